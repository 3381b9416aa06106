// SPDX-License-Identifier: MIT
#include "metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "host.h"
#include "hostpower.h"
#include "log.h"
#include "rendered.h"
#include "vpack/prom.h"
#include "webconfig.h"

#define CONNECTION_LIMIT 64u
/*
 * Connections one address may hold (issue 27, C; MHD refuses the rest),
 * when the endpoint listens on an address other than loopback: one client
 * cannot take every slot from the others. Prometheus holds one. Not on
 * loopback: there every client has the same address (or picks one of
 * 127/8), and a hard limit would refuse a local Prometheus with the flood.
 */
#define PER_IP_LIMIT 16u
/*
 * Above this many open connections from one address, a new one from it
 * closes that address's least recently active idle one (on loopback too):
 * a scraper that shares an address with a flood still gets in.
 */
#define PER_IP_EVICT_ABOVE 8u
/*
 * The request budget (issue 27, C): one answer per connection per
 * WINDOW_MS; a request past it is suspended (not read, not answered) until
 * the connection's next window. Prometheus asks once in a few seconds; a
 * scraper flat out gets 10 answers a second per connection, and the
 * connection limits above bound the connections. Per connection, not for
 * the endpoint: a flood's requests never queue ahead of a newcomer's first.
 */
#define WINDOW_MS 100u
/* Above this many open connections, a new one closes the least recently active idle one. */
#define EVICT_ABOVE (CONNECTION_LIMIT - 8u)
#define CONNECTION_TIMEOUT_S 10u
#define CONNECTION_MEMORY ((size_t)32 * 1024)
/*
 * Basic authentication: bcrypt runs the endpoint allows itself per second
 * (those not answered from the cache of successful checks). At cost 10 one
 * run takes 55-90 ms of the agent's loop on a 2.x GHz core (measured with
 * crypt_rn, RELIABILITY.md): a flood of wrong passwords takes at most a
 * third of the loop; past the budget, 503 with Retry-After.
 */
#define CRYPT_PER_S 4u
/* MHD's messages after start are logged at most this often (ms). */
#define LOG_INTERVAL_MS 10000

#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/*
 * One TCP connection, in least-recently-active order (head first). MHD owns
 * the socket; evicting it is shutdown(2), after which MHD sees the end of
 * the stream, closes it and tells on_connection() as for any other close.
 */
struct conn {
    struct conn *prev, *next;
    int fd;
    struct sockaddr_storage peer; /* family 0: unknown */
    bool busy;      /* a request on it is being answered */
    bool evicted;
    struct MHD_Connection *mhd; /* while suspended (over the budget), else NULL */
    uint64_t answered_at; /* when its last request was answered (loop ms); 0: never */
};

struct vpack_metrics {
    uv_poll_t poll;   /* MHD's epoll descriptor */
    uv_timer_t timer; /* MHD's next timeout */
    uv_timer_t refill; /* runs while requests wait for their next window */
    unsigned suspended;
    uv_loop_t *loop;
    struct MHD_Daemon *mhd;
    vpack_metrics_collect_fn collect;
    void *collect_ud;
    char *sysfs_root; /* [agent] sysfs_root, for the log */
    unsigned port;
    struct conn *head, *tail;
    unsigned nconns;  /* open and not evicted */
    uint64_t evictions;
    uint64_t closed;  /* connections closed, ever */
    struct vpack_hostpower *power; /* cpuidle and RAPL, read at each render */
    bool starting;    /* MHD's messages go to start_err */
    char *start_err;
    uint64_t last_log_ms;
    unsigned suppressed;
    bool have_poll;
    int closing;      /* handles still to close */
    bool stopping;
    struct vpack_web *web;  /* TLS and basic auth; NULL: plain HTTP, no auth */
    uint64_t crypt_window;  /* when the current second of bcrypt budget began (loop ms) */
    unsigned crypts;        /* bcrypt runs in it */
    unsigned long long crypt_refused;
    struct vpack_rendered page; /* the last rendered /metrics (see epoch) */
    vpack_metrics_epoch_fn epoch; /* NULL: the copy lasts PAGE_MAX_AGE_MS */
};

/*
 * /metrics is rendered once per epoch of the agent (one sampling interval,
 * or a change in between) and served from that copy meanwhile, for this
 * long at most (issue 27, C: a scrape flood costs one render per interval,
 * not one per request). Prometheus scrapes every few seconds: it never sees
 * a copy.
 */
#define PAGE_MAX_AGE_MS 1000

static const char index_page[] =
    "<!DOCTYPE html>\n<html><head><title>vpackd</title></head>\n"
    "<body><h1>vpackd</h1><p><a href=\"/metrics\">Metrics</a></p></body></html>\n";

/* Queues a response; body is freed by MHD when owned, else it must be static. */
static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             char *body, size_t len, bool owned, const char *allow)
{
    struct MHD_Response *r;
    enum MHD_Result ret;
    if (owned)
        r = MHD_create_response_from_buffer_with_free_callback(len, body, free);
    else
        r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_PERSISTENT);
    if (!r) {
        if (owned)
            free(body);
        return MHD_NO;
    }
    if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type) == MHD_NO ||
        (allow && MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow) == MHD_NO)) {
        MHD_destroy_response(r);
        return MHD_NO;
    }
    ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

#define TEXT_PLAIN "text/plain; charset=utf-8"
#define REPLY_STATIC(c, status, type, text, allow)                                            \
    reply(c, status, type, (char *)(text), sizeof(text) - 1, false, allow)

static enum MHD_Result render_metrics(struct vpack_metrics *m, struct MHD_Connection *c);

static uint64_t page_epoch(const struct vpack_metrics *m)
{
    return m->epoch ? m->epoch(m->collect_ud) : 0;
}

static enum MHD_Result reply_metrics(struct vpack_metrics *m, struct MHD_Connection *c)
{
    size_t len;
    const char *page = vpack_rendered_get(&m->page, uv_now(m->loop), PAGE_MAX_AGE_MS,
                                          page_epoch(m), &len);
    if (!page)
        return render_metrics(m, c);
    char *copy = malloc(len);
    if (!copy)
        return MHD_NO;
    memcpy(copy, page, len);
    return reply(c, MHD_HTTP_OK, VPACK_PROM_CONTENT_TYPE, copy, len, true, NULL);
}

/* Renders /metrics afresh, keeps a copy and answers c with it. */
static enum MHD_Result render_metrics(struct vpack_metrics *m, struct MHD_Connection *c)
{
    struct vpack_hostpower_reading h;
    struct vpack_prom_host ph;
    char *text = NULL;
    size_t len = 0;
    int r;
    uint64_t epoch = page_epoch(m);
    struct vpack_prom_metrics *pm = m->collect(m->collect_ud);

    if ((r = vpack_hostpower_read(m->power, &h)) < 0)
        log_debug("metrics: no cpuidle states under %s: %s", m->sysfs_root, strerror(-r));
    vpack_hostpower_prom_host(&h, &ph);
    /* vpackd's own process, always the live one: sysfs_root may be a fixture tree. */
    struct vpack_prom_process proc;
    if ((r = vpack_host_self_process("/", &proc)) < 0)
        log_debug("metrics: vpackd's process figures incomplete: %s", strerror(-r));
    ph.process = &proc;
    r = pm ? vpack_prom_render(pm, &ph, &text, &len) : -ENOMEM;
    vpack_prom_metrics_free(pm);
    vpack_hostpower_reading_clear(&h);
    if (r < 0) {
        log_warn("metrics: cannot render: %s", strerror(-r));
        return REPLY_STATIC(c, MHD_HTTP_INTERNAL_SERVER_ERROR, TEXT_PLAIN,
                            "cannot render the metrics\n", NULL);
    }
    char *page = malloc(len ? len : 1);
    if (page)
        memcpy(page, text, len);
    /* Out of memory: no copy (the last had run out anyway). */
    vpack_rendered_keep(&m->page, page, len, uv_now(m->loop), epoch);
    return reply(c, MHD_HTTP_OK, VPACK_PROM_CONTENT_TYPE, text, len, true, NULL);
}

static void on_refill(uv_timer_t *t);

/*
 * Whether the request on c waits for its connection's next window: then it
 * is suspended (MHD reads nothing more from it) until on_refill() resumes
 * it and MHD asks again. One the endpoint does not track (cn is m) is
 * answered.
 */
static bool over_budget(struct vpack_metrics *m, struct MHD_Connection *c, void *cn_or_m)
{
    uint64_t now = uv_now(m->loop);
    struct conn *cn = cn_or_m;
    if (cn_or_m == (void *)m || !cn->answered_at || now - cn->answered_at >= WINDOW_MS) {
        if (cn_or_m != (void *)m)
            cn->answered_at = now ? now : 1;
        return false;
    }
    cn->mhd = c;
    m->suspended++;
    MHD_suspend_connection(c);
    if (!uv_is_active((uv_handle_t *)&m->refill))
        uv_timer_start(&m->refill, on_refill, cn->answered_at + WINDOW_MS - now, 0);
    return true;
}

/* Resumes every suspended request; MHD asks for each again (and the budget decides). */
static void resume_all(struct vpack_metrics *m)
{
    for (struct conn *cn = m->head; cn && m->suspended; cn = cn->next)
        if (cn->mhd) {
            MHD_resume_connection(cn->mhd);
            cn->mhd = NULL;
            m->suspended--;
        }
}

static void run(struct vpack_metrics *m);

static void on_refill(uv_timer_t *t)
{
    struct vpack_metrics *m = container_of(t, struct vpack_metrics, refill);
    resume_all(m);
    run(m);
}

/* Whether one more bcrypt run fits in this second's budget (and counts it). */
static bool crypt_budget(struct vpack_metrics *m)
{
    uint64_t now = uv_now(m->loop);
    if (!m->crypt_window || now - m->crypt_window >= 1000) {
        m->crypt_window = now ? now : 1;
        m->crypts = 0;
    }
    if (m->crypts >= CRYPT_PER_S) {
        m->crypt_refused++;
        return false;
    }
    m->crypts++;
    return true;
}

static const char unauthorized[] = "Unauthorized\n";
static const char busy[] = "Too many password checks: try again in a second\n";

/*
 * Whether c's request has the basic authentication of one of the users;
 * when not, *res is the answer queued: 401 with WWW-Authenticate, or 503
 * past the bcrypt budget.
 */
static bool authorized(struct vpack_metrics *m, struct MHD_Connection *c, enum MHD_Result *res)
{
    char *pass = NULL;
    char *user = MHD_basic_auth_get_username_password(c, &pass);
    bool ok = false, refused = false;
    if (user && pass) {
        if (vpack_web_cached(m->web, user, pass) || crypt_budget(m))
            ok = vpack_web_check(m->web, user, pass, NULL);
        else
            refused = true;
        explicit_bzero(pass, strlen(pass));
    }
    MHD_free(user);
    MHD_free(pass);
    if (ok)
        return true;
    const char *text = refused ? busy : unauthorized;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text,
                                                             MHD_RESPMEM_PERSISTENT);
    *res = MHD_NO;
    if (!r)
        return false;
    if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, TEXT_PLAIN) == MHD_YES) {
        if (!refused)
            *res = MHD_queue_basic_auth_fail_response(c, "vpackd", r);
        else if (MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1") == MHD_YES)
            *res = MHD_queue_response(c, MHD_HTTP_SERVICE_UNAVAILABLE, r);
    }
    MHD_destroy_response(r);
    return false;
}

static const char forbidden[] =
    "Forbidden: a client certificate signed by the configured client CA is needed\n";

/*
 * client_auth_type RequireAndVerifyClientCert: MHD asks for the client's
 * certificate in the handshake (MHD_OPTION_HTTPS_MEM_TRUST) but takes the
 * connection without one: each request is checked here, and gets 403 and
 * the connection's end when the certificate is missing or not the CA's.
 */
static bool client_verified(struct vpack_metrics *m, struct MHD_Connection *c, enum MHD_Result *res)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    char *why = NULL;
    if (vpack_web_client_ok(m->web, ci ? ci->tls_session : NULL, &why))
        return true;
    log_debug("metrics: client certificate refused: %s", why ? why : "out of memory");
    free(why);
    struct MHD_Response *r = MHD_create_response_from_buffer(sizeof(forbidden) - 1,
                                                             (void *)forbidden,
                                                             MHD_RESPMEM_PERSISTENT);
    *res = MHD_NO;
    if (!r)
        return false;
    if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, TEXT_PLAIN) == MHD_YES &&
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close") == MHD_YES)
        *res = MHD_queue_response(c, MHD_HTTP_FORBIDDEN, r);
    MHD_destroy_response(r);
    return false;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    struct vpack_metrics *m = cls;
    bool get = !strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD);
    bool metrics = !strcmp(url, "/metrics");
    (void)version;
    (void)upload_data;
    if (!*req_cls) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        struct conn *cn = ci ? ci->socket_context : NULL;
        if (cn)
            cn->busy = true;
        *req_cls = cn ? (void *)cn : (void *)m;
        /*
         * A bodiless GET or HEAD is answered at the next call, once MHD has
         * the whole request: then the connection can stay open. Anything
         * else is answered now, which makes MHD skip the body and close.
         */
        if (get && !MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH) &&
            !MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
            return MHD_YES;
    } else if (*upload_data_size) {
        *upload_data_size = 0; /* not reached: there is no body */
        return MHD_YES;
    }
    if (over_budget(m, c, *req_cls))
        return MHD_YES;
    enum MHD_Result res;
    if (m->web && m->web->cfg.require_client_cert && !client_verified(m, c, &res))
        return res;
    if (m->web && m->web->cfg.nusers && !authorized(m, c, &res))
        return res;
    if (!metrics && strcmp(url, "/"))
        return REPLY_STATIC(c, MHD_HTTP_NOT_FOUND, TEXT_PLAIN, "Not Found: see /metrics\n", NULL);
    if (!get)
        return REPLY_STATIC(c, MHD_HTTP_METHOD_NOT_ALLOWED, TEXT_PLAIN, "Method Not Allowed\n",
                            "GET, HEAD");
    if (!metrics)
        return REPLY_STATIC(c, MHD_HTTP_OK, "text/html; charset=utf-8", index_page, NULL);
    return reply_metrics(m, c);
}

static void conn_unlink(struct vpack_metrics *m, struct conn *cn)
{
    *(cn->prev ? &cn->prev->next : &m->head) = cn->next;
    *(cn->next ? &cn->next->prev : &m->tail) = cn->prev;
    cn->prev = cn->next = NULL;
}

static void conn_append(struct vpack_metrics *m, struct conn *cn)
{
    cn->prev = m->tail;
    *(m->tail ? &m->tail->next : &m->head) = cn;
    m->tail = cn;
}

/* Request answered (or abandoned): the connection is idle and most recently active. */
static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct vpack_metrics *m = cls;
    struct conn *cn = *req_cls;
    (void)c;
    (void)toe;
    if (cn && (void *)cn != (void *)m) {
        cn->busy = false;
        conn_unlink(m, cn);
        conn_append(m, cn);
    }
    *req_cls = NULL;
}

/* Whether a and b are the same address (the port aside); false when either is unknown. */
static bool same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->ss_family == AF_INET6)
        return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                       &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
    return false;
}

/*
 * Makes room for a new connection: shuts down the least recently active
 * connection that is not being answered (never the newest), of those from
 * like's address when like is not NULL. An idle keep-alive connection or
 * one still sending its headers is as good as closed for a scraper: it
 * reconnects.
 */
static void evict_one(struct vpack_metrics *m, const struct conn *like)
{
    for (struct conn *cn = m->head; cn && cn != m->tail; cn = cn->next) {
        if (cn->busy || cn->evicted || (like && !same_host(&cn->peer, &like->peer)))
            continue;
        if (shutdown(cn->fd, SHUT_RDWR) < 0 && errno != ENOTCONN)
            log_debug("metrics: shutdown: %s", strerror(errno));
        cn->evicted = true;
        m->nconns--;
        m->evictions++;
        if (m->evictions == 1 || m->evictions % 1000 == 0)
            log_info("metrics: %u connections open%s: closed the least recently active idle one "
                     "(%" PRIu64 " so far)",
                     like ? PER_IP_EVICT_ABOVE : EVICT_ABOVE, like ? " from one address" : "",
                     m->evictions);
        return;
    }
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct vpack_metrics *m = cls;
    struct conn *cn = *socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ci || !(cn = calloc(1, sizeof(*cn))))
            return; /* not tracked: never evicted, MHD's own limit still holds */
        cn->fd = ci->connect_fd;
        ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (ci && ci->client_addr) {
            size_t n = ci->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                       : ci->client_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                                : 0;
            memcpy(&cn->peer, ci->client_addr, n);
        }
        conn_append(m, cn);
        *socket_context = cn;
        unsigned same = 0;
        for (const struct conn *o = m->head; o; o = o->next)
            same += !o->evicted && same_host(&o->peer, &cn->peer);
        if (same > PER_IP_EVICT_ABOVE)
            evict_one(m, cn);
        if (++m->nconns > EVICT_ABOVE)
            evict_one(m, NULL);
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        m->closed++;
        if (!cn)
            return;
        conn_unlink(m, cn);
        if (!cn->evicted)
            m->nconns--;
        free(cn);
        *socket_context = NULL;
    }
}

/*
 * MHD's messages. While starting, the last one becomes the error message.
 * Afterwards most are about one misbehaving client (a request too large, a
 * peer gone): debug. Those about limits, resources and failed calls are
 * warnings, at most one per LOG_INTERVAL_MS so that a flood of connections
 * cannot flood the log.
 */
static void on_mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    struct vpack_metrics *m = cls;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        msg[--n] = '\0';
    if (m->starting) {
        free(m->start_err);
        m->start_err = strdup(msg);
        log_debug("metrics: %s", msg);
        return;
    }
    if (!strstr(msg, "limit") && !strstr(msg, "resource") && !strstr(msg, "ailed")) {
        log_debug("metrics: %s", msg);
        return;
    }
    uint64_t now = uv_now(m->loop);
    if (m->last_log_ms && now - m->last_log_ms < LOG_INTERVAL_MS) {
        m->suppressed++;
        return;
    }
    if (m->suppressed)
        log_warn("metrics: %s (%u more messages since the last)", msg, m->suppressed);
    else
        log_warn("metrics: %s", msg);
    m->last_log_ms = now ? now : 1;
    m->suppressed = 0;
}

/* ------------------------------------------------------------------ loop */

static void on_timer(uv_timer_t *t);

/*
 * Lets MHD do what is ready, then arms the timer for its next deadline.
 * At its connection limit MHD stops watching the listening socket and
 * watches it again only at the start of a later run: so when a connection
 * closed during this run, the next one comes at once, not at the next
 * timeout (connections waiting in the backlog would wait that long).
 */
static void run(struct vpack_metrics *m)
{
    MHD_UNSIGNED_LONG_LONG ms;
    uint64_t closed = m->closed;
    if (m->stopping)
        return;
    MHD_run(m->mhd);
    if (m->closed != closed)
        uv_timer_start(&m->timer, on_timer, 0, 0);
    else if (MHD_get_timeout(m->mhd, &ms) == MHD_YES)
        uv_timer_start(&m->timer, on_timer, (uint64_t)ms, 0);
    else
        uv_timer_stop(&m->timer);
}

static void on_timer(uv_timer_t *t)
{
    run(container_of(t, struct vpack_metrics, timer));
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    struct vpack_metrics *m = container_of(p, struct vpack_metrics, poll);
    (void)events;
    if (status < 0)
        log_debug("metrics: poll: %s", uv_strerror(status));
    run(m);
}

static void metrics_free(struct vpack_metrics *m)
{
    vpack_hostpower_free(m->power);
    free(m->sysfs_root);
    free(m->start_err);
    vpack_rendered_drop(&m->page);
    free(m);
}

static void on_closed(uv_handle_t *h)
{
    struct vpack_metrics *m = h->data;
    if (--m->closing == 0)
        metrics_free(m);
}

void vpack_metrics_stop(struct vpack_metrics *m)
{
    if (!m || m->stopping)
        return;
    m->stopping = true;
    /* libuv forgets the epoll descriptor before MHD closes it. */
    m->closing = m->have_poll ? 3 : 2;
    if (m->have_poll)
        uv_close((uv_handle_t *)&m->poll, on_closed);
    uv_close((uv_handle_t *)&m->timer, on_closed);
    uv_close((uv_handle_t *)&m->refill, on_closed);
    /* MHD closes a suspended connection only once it is resumed. */
    resume_all(m);
    /* Closes every connection (on_connection() frees each) and the sockets. */
    MHD_stop_daemon(m->mhd);
    m->mhd = NULL;
}

void vpack_metrics_set_epoch(struct vpack_metrics *m, vpack_metrics_epoch_fn epoch)
{
    m->epoch = epoch;
}

unsigned vpack_metrics_port(const struct vpack_metrics *m)
{
    return m ? m->port : 0;
}

/* Parses "127.0.0.1", "::1" or "[::1]" with port into addr; returns the MHD flag it needs. */
static int parse_listen(const char *where, unsigned port, struct sockaddr_storage *addr,
                        unsigned *flags)
{
    char host[INET6_ADDRSTRLEN + 2];
    size_t n = strlen(where);
    memset(addr, 0, sizeof(*addr));
    if (n >= 2 && where[0] == '[' && where[n - 1] == ']' && n - 2 < sizeof(host)) {
        memcpy(host, where + 1, n - 2);
        host[n - 2] = '\0';
    } else if (n < sizeof(host)) {
        memcpy(host, where, n + 1);
    } else {
        return -EINVAL;
    }
    struct sockaddr_in *in = (struct sockaddr_in *)addr;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)addr;
    if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        *flags = 0;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        *flags = MHD_USE_IPv6;
        return 0;
    }
    return -EINVAL;
}

static char *strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *strdup_printf(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

/*
 * Reads the host once and says in one line which hardware readings it has
 * and why not the others; the scrapes after it say nothing more about them.
 */
static void log_hardware(struct vpack_hostpower *hp)
{
    struct vpack_hostpower_reading h;
    char line[2048];
    vpack_hostpower_read(hp, &h);
    vpack_hostpower_reading_clear(&h);
    vpack_hostpower_summary(hp, line, sizeof(line));
    log_info("metrics: %s", line);
}

/* Whether a is a loopback address (127/8, ::1, ::ffff:127/104). */
static bool is_loopback(const struct sockaddr_storage *a)
{
    if (a->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
    if (a->ss_family != AF_INET6)
        return false;
    const struct in6_addr *s6 = &((const struct sockaddr_in6 *)a)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(s6) || (IN6_IS_ADDR_V4MAPPED(s6) && s6->s6_addr[12] == 127);
}

unsigned long long vpack_metrics_crypt_refused(const struct vpack_metrics *m)
{
    return m ? m->crypt_refused : 0;
}

int vpack_metrics_start(uv_loop_t *loop, const struct vpack_config *cfg,
                        vpack_metrics_collect_fn collect, void *ud,
                        struct vpack_metrics **out, char **errmsg)
{
    return vpack_metrics_start_web(loop, cfg, NULL, collect, ud, out, errmsg);
}

int vpack_metrics_start_web(uv_loop_t *loop, const struct vpack_config *cfg, struct vpack_web *web,
                            vpack_metrics_collect_fn collect, void *ud,
                            struct vpack_metrics **out, char **errmsg)
{
    struct vpack_metrics *m = NULL;
    struct sockaddr_storage addr;
    const union MHD_DaemonInfo *info;
    unsigned family_flag;
    int ret = -EINVAL;

    *out = NULL;
    *errmsg = NULL;
    const char *where = cfg->metrics_listen ? cfg->metrics_listen : "127.0.0.1";
    if (cfg->metrics_port > 65535 || parse_listen(where, cfg->metrics_port, &addr, &family_flag) < 0) {
        *errmsg = strdup_printf("metrics.listen '%s' is not an IPv4 or IPv6 address", where);
        goto cleanup;
    }
    ret = -ENOMEM;
    m = calloc(1, sizeof(*m));
    if (!m || !(m->sysfs_root = strdup(cfg->sysfs_root && *cfg->sysfs_root ? cfg->sysfs_root : "/")) ||
        vpack_hostpower_new(m->sysfs_root, &m->power) < 0)
        goto cleanup;
    log_hardware(m->power);
    m->loop = loop;
    m->collect = collect;
    m->collect_ud = ud;
    m->web = web;
    m->starting = true;
    bool tls = web && web->cfg.tls;
    bool trust = tls && web->ca_pem;
    struct MHD_OptionItem tls_opts[] = {
        {tls ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, tls ? web->key_pem : NULL},
        {MHD_OPTION_HTTPS_MEM_CERT, 0, tls ? web->cert_pem : NULL},
        {trust ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, 0, trust ? web->ca_pem : NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    errno = 0;
    m->mhd = MHD_start_daemon(
        MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME | family_flag |
            (tls ? MHD_USE_TLS : 0),
        (uint16_t)cfg->metrics_port, NULL, NULL, on_request, m, MHD_OPTION_EXTERNAL_LOGGER,
        (MHD_LogCallback)on_mhd_log, m,
        MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)&addr,
        MHD_OPTION_CONNECTION_LIMIT, CONNECTION_LIMIT, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        is_loopback(&addr) ? 0u : PER_IP_LIMIT, MHD_OPTION_CONNECTION_TIMEOUT,
        CONNECTION_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT, CONNECTION_MEMORY,
        MHD_OPTION_NOTIFY_CONNECTION, (MHD_NotifyConnectionCallback)on_connection, m,
        MHD_OPTION_NOTIFY_COMPLETED, (MHD_RequestCompletedCallback)on_completed, m,
        MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_END);
    if (!m->mhd) {
        /* MHD's last message says why ("Failed to bind to port 9477: ..."). */
        ret = errno > 0 ? -errno : -EIO;
        *errmsg = m->start_err;
        m->start_err = NULL;
        goto cleanup;
    }
    m->starting = false;
    info = MHD_get_daemon_info(m->mhd, MHD_DAEMON_INFO_BIND_PORT);
    m->port = info ? info->port : cfg->metrics_port;
    /* From here on the handles own m: vpack_metrics_stop() frees it. */
    uv_timer_init(loop, &m->timer);
    uv_timer_init(loop, &m->refill);
    m->timer.data = m->refill.data = m;
    info = MHD_get_daemon_info(m->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    ret = info ? uv_poll_init(loop, &m->poll, info->epoll_fd) : -EIO;
    if (ret < 0)
        goto cleanup;
    m->have_poll = true;
    m->poll.data = m;
    if ((ret = uv_poll_start(&m->poll, UV_READABLE, on_poll)) < 0)
        goto cleanup;
    run(m);
    char auth[96] = "", users[64] = "";
    if (web && web->cfg.nusers)
        snprintf(users, sizeof(users), "basic authentication, %u user%s", web->cfg.nusers,
                 web->cfg.nusers == 1 ? "" : "s");
    if (trust || *users)
        snprintf(auth, sizeof(auth), " (%s%s%s)", trust ? "client certificates" : "",
                 trust && *users ? ", " : "", users);
    if (family_flag && where[0] != '[')
        log_info("metrics on http%s://[%s]:%u/metrics%s", tls ? "s" : "", where, m->port, auth);
    else
        log_info("metrics on http%s://%s:%u/metrics%s", tls ? "s" : "", where, m->port, auth);
    *out = m;
    m = NULL;
    ret = 0;
cleanup:
    if (ret < 0 && !*errmsg)
        *errmsg = strdup_printf("%s%s", m && m->mhd ? "cannot watch the HTTP server: " : "",
                                strerror(-ret));
    if (m && m->mhd)
        vpack_metrics_stop(m);
    else if (m)
        metrics_free(m);
    return ret;
}
