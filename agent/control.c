// SPDX-License-Identifier: MIT
#include "control.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/acl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "vpack/errmsg.h"
#include "vpack/json.h"
#include "client.h"
#include "log.h"
#include "rendered.h"
#include "safefs.h"
#include "vpack-build.h"

/* A client that leaves this much unread output is dropped. */
#define MAX_PENDING_OUTPUT (4u << 20)
/*
 * Backpressure (issue 27, A): a client with more unread output than this
 * gets no further request answered (nor read) until its output is written;
 * one that never reads is closed by its idle timer, one that left at its
 * first failed write (on_written).
 */
#define OUTPUT_HIGH (64u << 10)
/* The unread output of all unprivileged clients together, likewise. */
#define POOL_OUTPUT (1u << 20)
/* An unprivileged client's longest request line: its requests are short. */
#define UNPRIV_MAX_LINE 4096
/*
 * A view (status, snapshot) is rendered once per epoch of the agent (a
 * sampling interval, or a change in between: vpack_agent_epoch()) and
 * served from that copy meanwhile, for this long at most (issue 27, C:
 * thousands of status requests a second cost one render per interval).
 */
#define VIEW_MAX_AGE_MS 1000
/*
 * The unprivileged pool's request budget (issue 27, C): its clients have
 * POOL_LINES request lines answered per BUDGET_WINDOW_MS between them, each
 * an equal share (one at least); a client past its share waits, unread,
 * for its next window. Root and the control group have no budget.
 */
#define POOL_LINES 100u
#define BUDGET_WINDOW_MS 100u
/* Request lines of one client answered before the others get a turn. */
#define LINES_PER_TURN 16
/*
 * Connections a socket accepts per loop iteration (issue 27, item 1):
 * libuv's accept loop otherwise drains the whole listen queue in one go,
 * and a flood of connect/close on the read-only socket (turned into
 * refusals once its pool is full) held the loop from the other socket and
 * the agent's timer. Past this many the socket waits for the next
 * iteration, and further connections wait in its listen queue.
 */
#define ACCEPTS_PER_TURN 16
/*
 * Connections the read-only socket accepts per budget window (100 ms),
 * whatever the iterations (issue 27, item 3): each costs vpackd an accept,
 * the peer's credentials and a close (some 60 us), so an attacker that
 * reconnects flat out (a 64 KiB line ends its connection at once) held
 * a third of a core with the per-iteration cap alone. Past the budget the
 * socket waits for the window's end, connections queue in the kernel and,
 * the queue full, are refused there (EAGAIN): at most 1,000 a second, a few
 * percent of a core. The admin socket has no such budget: root and the
 * hook never wait behind the world.
 */
#define PUBLIC_ACCEPTS_PER_WINDOW 100u

/* The sockets: anyone's read-only one, and the admin one of root and the control group. */
enum { SOCK_PUBLIC, SOCK_ADMIN, NSOCKS };

/*
 * The pools of connection slots, max_clients each: other users share one,
 * the control group's members another, and root (vpackctl as root, the
 * hook) has its own, so that neither the world nor a group member can hold
 * every slot root and the hook would need (issue 27, F).
 */
enum { POOL_WORLD, POOL_GROUP, POOL_ROOT, NPOOLS };

/* A budget window (BUDGET_WINDOW_MS, from uv_now) and what was taken in it. */
struct budget_window {
    uint64_t start;
    unsigned used;
};

/* What w has used of the window that holds now: a new one, unused, once BUDGET_WINDOW_MS passed. */
static unsigned window_used(struct budget_window *w, uint64_t now)
{
    if (now - w->start >= BUDGET_WINDOW_MS) {
        w->start = now;
        w->used = 0;
    }
    return w->used;
}

struct listener {
    uv_pipe_t pipe;
    uv_idle_t resume;      /* runs while a connection waits for the next iteration */
    uv_timer_t window;     /* runs while one waits for the next budget window */
    struct vpack_control *ctl;
    bool admin;
    unsigned accepted;     /* in this loop iteration */
    struct budget_window budget; /* the read-only socket's accepts */
    char *path;
    int dirfd;             /* the socket's trusted directory */
    const char *name;      /* the socket's name in it (points into path) */
};

struct client {
    uv_pipe_t pipe;
    uv_timer_t idle;
    struct vpack_control *ctl;
    struct client *next;
    char *buf;
    size_t len, cap;
    int pool;              /* POOL_*: whose slots it takes */
    bool admin;            /* came on the admin socket */
    bool counted;          /* in ctl->nclients[pool] */
    bool draining;         /* no more reading; closes once its answers are written */
    bool deferred;         /* complete lines wait for their turn; not reading meanwhile */
    bool blocked;          /* lines wait until its (or its pool's) output is written,
                              or its budget's next window */
    struct budget_window budget; /* unprivileged: the lines answered */
    uid_t uid;
    int closing;           /* handles still to close */
    uv_shutdown_t shutdown;
};

/* Root or the control group: whatever is not the other users' pool. */
static bool privileged(const struct client *cl)
{
    return cl->pool != POOL_WORLD;
}

struct vpack_control {
    struct listener socks[NSOCKS];
    uv_check_t tick;       /* after each iteration's poll: the accept counts start again */
    uv_idle_t turns;       /* runs while clients have lines waiting (client_drain) */
    uv_timer_t refill;     /* runs while unprivileged clients wait for their budget */
    int open_handles;      /* the above: freed once all are closed */
    uv_loop_t *loop;
    struct vpack_agent *agent;
    struct client *clients;
    unsigned nclients[NPOOLS]; /* by pool */
    unsigned max_clients;  /* per pool */
    unsigned idle_ms;
    size_t max_line;
    gid_t group;
    bool has_group;
    bool stopping;
    struct vpack_rendered views[VPACK_CTL_NOPS]; /* whole answer lines, newline included */
};

static void unblock(struct vpack_control *ctl);

static void client_freed(uv_handle_t *h)
{
    struct client *cl = h->data;
    if (--cl->closing == 0) {
        free(cl->buf);
        free(cl);
    }
}

static void client_close(struct client *cl)
{
    struct vpack_control *ctl = cl->ctl;
    if (cl->closing)
        return;
    for (struct client **p = &ctl->clients; *p; p = &(*p)->next)
        if (*p == cl) {
            *p = cl->next;
            break;
        }
    if (cl->counted)
        ctl->nclients[cl->pool]--;
    cl->closing = 2;
    uv_close((uv_handle_t *)&cl->pipe, client_freed);
    uv_close((uv_handle_t *)&cl->idle, client_freed);
    /* Its unread output no longer counts against its pool. */
    if (!ctl->stopping)
        unblock(ctl);
}

static void on_drained(uv_shutdown_t *req, int status)
{
    (void)status;
    client_close(req->data);
}

/*
 * Stops reading and closes the client once the answers already queued are
 * written (a client that half-closes after pipelining its requests gets them
 * all). One that does not read them is closed by its idle timer.
 */
static void client_finish(struct client *cl)
{
    if (cl->closing || cl->draining)
        return;
    cl->draining = true;
    uv_read_stop((uv_stream_t *)&cl->pipe);
    cl->shutdown.data = cl;
    if (uv_shutdown(&cl->shutdown, (uv_stream_t *)&cl->pipe, on_drained) < 0)
        client_close(cl);
}

struct write_req {
    uv_write_t req;
    char *data;
};

/* Output queued for cl and not yet taken by the kernel. */
static size_t pending(const struct client *cl)
{
    return uv_stream_get_write_queue_size((const uv_stream_t *)&cl->pipe);
}

static void unblock(struct vpack_control *ctl);

static void on_refill(uv_timer_t *t)
{
    unblock(t->data);
}

/*
 * Whether unprivileged cl has used its share of the pool's budget in its
 * current window; if so, the refill timer runs (every window that began by
 * now has ended when it fires).
 */
static bool over_budget(struct client *cl)
{
    struct vpack_control *ctl = cl->ctl;
    uint64_t now = uv_now(ctl->loop);
    unsigned n = ctl->nclients[POOL_WORLD] ? ctl->nclients[POOL_WORLD] : 1;
    unsigned share = POOL_LINES / n ? POOL_LINES / n : 1;
    if (window_used(&cl->budget, now) < share)
        return false;
    if (!uv_is_active((uv_handle_t *)&ctl->refill))
        uv_timer_start(&ctl->refill, on_refill, BUDGET_WINDOW_MS, 0);
    return true;
}

/*
 * Whether cl must wait for output to be written, or for its budget's next
 * window, before more is answered.
 */
static bool must_wait(struct client *cl)
{
    if (pending(cl) > OUTPUT_HIGH)
        return true;
    if (privileged(cl))
        return false;
    if (over_budget(cl))
        return true;
    size_t pool = 0;
    for (const struct client *c = cl->ctl->clients; c; c = c->next)
        if (!privileged(c))
            pool += pending(c);
    return pool > POOL_OUTPUT;
}

static void send_text(struct client *cl, const char *text, size_t n);

/* o as one line with its newline (caller frees), or NULL. */
static char *line_of(struct json_object *o, size_t *n)
{
    const char *s = o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN) : NULL;
    char *line = NULL;
    if (s && (line = malloc(strlen(s) + 2))) {
        *n = strlen(s) + 1;
        memcpy(line, s, *n - 1);
        line[*n - 1] = '\n';
    }
    return line;
}

/* Sends one object as a line. */
static void send_obj(struct client *cl, struct json_object *o)
{
    size_t n = 0;
    char *line = line_of(o, &n);
    send_text(cl, line, n);
    free(line);
}

static void on_turn(uv_idle_t *h);

/* Gives the clients that waited for output or budget, and may go on now, their turns. */
static void unblock(struct vpack_control *ctl)
{
    for (struct client *c = ctl->clients; c; c = c->next)
        if (c->blocked && !c->closing && !must_wait(c)) {
            c->blocked = false;
            c->deferred = true;
            uv_idle_start(&ctl->turns, on_turn);
        }
}

/*
 * A write that failed (EPIPE: the peer left) ends the client at once. One
 * that vpackd stopped reading (its output or its pool's over the limit)
 * tells of its end no other way, and libuv writes nothing more of its queue
 * after an error: it would keep its slot, and its queued output would hold
 * its pool's other clients, until its idle timer.
 */
static void on_written(uv_write_t *req, int status)
{
    struct write_req *w = (struct write_req *)req;
    struct client *cl = req->handle->data;
    free(w->data);
    free(w);
    if (cl->closing)
        return;
    if (status < 0) {
        log_debug("control: a client left with its answers unread (uid %u: %s)",
                  (unsigned)cl->uid, uv_strerror(status));
        client_close(cl);
        return;
    }
    unblock(cl->ctl);
}

/* The longest request line cl may send. */
static size_t max_line(const struct client *cl)
{
    size_t m = cl->ctl->max_line;
    return privileged(cl) || m < UNPRIV_MAX_LINE ? m : UNPRIV_MAX_LINE;
}

/*
 * Sends n bytes of text (a line, with its newline; NULL: out of memory);
 * drops the client if it stopped reading (or on no memory).
 */
static void send_text(struct client *cl, const char *text, size_t n)
{
    struct write_req *w = text ? malloc(sizeof(*w)) : NULL;
    if (!w || !(w->data = malloc(n))) {
        free(w);
        client_close(cl);
        return;
    }
    memcpy(w->data, text, n);
    if (uv_stream_get_write_queue_size((uv_stream_t *)&cl->pipe) > MAX_PENDING_OUTPUT) {
        log_warn("control: dropping a client that does not read its answers");
        free(w->data);
        free(w);
        client_close(cl);
        return;
    }
    uv_buf_t b = uv_buf_init(w->data, (unsigned)n);
    if (uv_write(&w->req, (uv_stream_t *)&cl->pipe, &b, 1, on_written) < 0) {
        free(w->data);
        free(w);
        client_close(cl);
    }
}

/* {"ok": ok} with "error": msg when msg is non-NULL; NULL when out of memory. */
static struct json_object *answer_new(bool ok, const char *msg)
{
    struct json_object *o = json_object_new_object();
    bool good = true;
    vpack_json_set_bool(o, "ok", ok, &good);
    if (msg)
        vpack_json_set_str(o, "error", msg, &good);
    return vpack_json_finish(o, good);
}

static void send_error(struct client *cl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void send_error(struct client *cl, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    struct json_object *o = answer_new(false, msg);
    send_obj(cl, o);
    json_object_put(o);
}

/*
 * One op: adds its results to the answer ans ({"ok": true}). Returns 0, or
 * -errno with *errmsg (caller frees; NULL for "OP: strerror").
 */
typedef int (*op_fn)(struct vpack_agent *a, const struct vpack_ctl_request *req,
                     struct json_object *ans, char **errmsg);

static int op_version(struct vpack_agent *a, const struct vpack_ctl_request *req,
                      struct json_object *ans, char **errmsg)
{
    bool ok = true;
    (void)a, (void)req, (void)errmsg;
    vpack_json_set_str(ans, "version", VPACK_VERSION, &ok);
    return ok ? 0 : -ENOMEM;
}

/* Adds key: the view a view function builds; a NULL view (none yet) is JSON null. */
static int add_view(struct json_object *ans, const char *key, int r, struct json_object *view)
{
    bool ok = true;
    if (r < 0)
        return r;
    if (view)
        vpack_json_set(ans, key, view, &ok);
    else
        vpack_json_set_null(ans, key, &ok);
    return ok ? 0 : -ENOMEM;
}

static int op_explain(struct vpack_agent *a, const struct vpack_ctl_request *req,
                      struct json_object *ans, char **errmsg)
{
    struct json_object *v = NULL;
    int r = vpack_agent_explain_json(a, req->domain, &v);
    if (r == -ENOENT &&
        asprintf(errmsg, "domain '%s' is not running or not known to vpackd", req->domain) < 0)
        *errmsg = NULL;
    return add_view(ans, "domain", r, v);
}

static int op_rebalance(struct vpack_agent *a, const struct vpack_ctl_request *req,
                        struct json_object *ans, char **errmsg)
{
    struct vpack_move *moves = NULL;
    unsigned n = 0;
    char *err = NULL;
    bool ok = true;
    int r = vpack_agent_rebalance(a, req->dry_run, &moves, &n, &err);
    if (r < 0) {
        if (asprintf(errmsg, "rebalance failed: %s", err ? err : strerror(-r)) < 0)
            *errmsg = NULL;
        free(err);
        return r;
    }
    vpack_json_set_bool(ans, "dry_run", req->dry_run, &ok);
    vpack_json_set(ans, "moves", vpack_moves_json(moves, n), &ok);
    vpack_moves_free(moves, n);
    return ok ? 0 : -ENOMEM;
}

static int op_register(struct vpack_agent *a, const struct vpack_ctl_request *req,
                       struct json_object *ans, char **errmsg)
{
    (void)ans;
    return vpack_agent_register(a, req, errmsg);
}

static int op_forget(struct vpack_agent *a, const struct vpack_ctl_request *req,
                     struct json_object *ans, char **errmsg)
{
    (void)ans;
    return vpack_agent_forget(a, req, errmsg);
}

static int op_hold_level(struct vpack_agent *a, const struct vpack_ctl_request *req,
                         struct json_object *ans, char **errmsg)
{
    (void)ans, (void)errmsg;
    vpack_agent_hold(a, req->hold_level, req->hold_seconds);
    return 0;
}

/*
 * The ops: a function, or a view of the agent that the answer carries under
 * key; prefix when an error is told as "OP: ERROR".
 */
static const struct {
    op_fn fn;
    int (*view)(struct vpack_agent *a, struct json_object **out);
    const char *key;
    bool prefix;
} ops[] = {
    [VPACK_CTL_VERSION] = {op_version, NULL, NULL, true},
    [VPACK_CTL_STATUS] = {NULL, vpack_agent_status_json, "status", true},
    [VPACK_CTL_SNAPSHOT] = {NULL, vpack_agent_snapshot_json, "snapshot", true},
    [VPACK_CTL_EXPLAIN] = {op_explain, NULL, NULL, false},
    [VPACK_CTL_REBALANCE] = {op_rebalance, NULL, NULL, false},
    [VPACK_CTL_REGISTER] = {op_register, NULL, NULL, true},
    [VPACK_CTL_FORGET] = {op_forget, NULL, NULL, true},
    [VPACK_CTL_HOLD_LEVEL] = {op_hold_level, NULL, NULL, true},
};
_Static_assert(sizeof(ops) / sizeof(ops[0]) == VPACK_CTL_NOPS, "an op without an entry in ops[]");

/* Runs op on the agent into ans. Returns 0 or -errno with *err as for op_fn. */
static int run_op(struct vpack_agent *a, const struct vpack_ctl_request *req,
                  struct json_object *ans, char **err)
{
    struct json_object *v = NULL;
    if (ops[req->op].fn)
        return ops[req->op].fn(a, req, ans, err);
    int r = ops[req->op].view(a, &v);
    return add_view(ans, ops[req->op].key, r, v);
}

static void handle_line(struct client *cl, const char *line, size_t len)
{
    struct vpack_ctl_request req;
    struct json_object *ans = NULL;
    char *err = NULL;
    bool known;
    int r;
    struct vpack_ctl_peer peer = {
        .privileged = privileged(cl),
        .uid = (unsigned)cl->uid,
        .admin_socket = cl->admin ? NULL : cl->ctl->socks[SOCK_ADMIN].path,
    };
    /* lib/format/protocol.c checks the request, the socket, the permission and the arguments. */
    if (vpack_ctl_request_parse_peer(line, len, &peer, &req, &err) < 0) {
        send_error(cl, "%s", err ? err : "out of memory");
        free(err);
        return;
    }
    known = (size_t)req.op < sizeof(ops) / sizeof(ops[0]) &&
            (ops[req.op].fn || ops[req.op].view);
    struct vpack_rendered *vc = known && ops[req.op].view ? &cl->ctl->views[req.op] : NULL;
    uint64_t now = uv_now(cl->ctl->loop), epoch = vpack_agent_epoch(cl->ctl->agent);
    const char *copy;
    size_t copy_len;
    if (vc && (copy = vpack_rendered_get(vc, now, VIEW_MAX_AGE_MS, epoch, &copy_len))) {
        send_text(cl, copy, copy_len);
        vpack_ctl_request_clear(&req);
        return;
    }
    if (!known)
        r = -EINVAL;
    else if (!(ans = answer_new(true, NULL)))
        r = -ENOMEM;
    else
        r = run_op(cl->ctl->agent, &req, ans, &err);
    if (r < 0 && err && known && !ops[req.op].prefix)
        send_error(cl, "%s", err);
    else if (r < 0)
        send_error(cl, "%s: %s", req.op_name, err ? err : strerror(-r));
    else if (vc) {
        char *text = line_of(ans, &copy_len);
        vpack_rendered_keep(vc, text, copy_len, now, epoch);
        send_text(cl, vc->text, vc->len);
    } else {
        send_obj(cl, ans);
    }
    /* A change through the socket shows in the next view (and /metrics) at once. */
    if (r == 0 && !vc && req.op != VPACK_CTL_EXPLAIN && !req.dry_run &&
        req.op != VPACK_CTL_VERSION)
        vpack_agent_changed(cl->ctl->agent);
    free(err);
    json_object_put(ans);
    vpack_ctl_request_clear(&req);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct client *cl = h->data;
    (void)suggested;
    if (cl->cap - cl->len < 4096) {
        size_t ncap = cl->cap ? cl->cap * 2 : 8192;
        if (ncap > max_line(cl) + 8192)
            ncap = max_line(cl) + 8192;
        char *b = ncap > cl->cap ? realloc(cl->buf, ncap) : NULL;
        if (b) {
            cl->buf = b;
            cl->cap = ncap;
        }
    }
    *buf = uv_buf_init(cl->buf + cl->len, (unsigned)(cl->cap - cl->len));
}

enum drain { DRAIN_DONE, DRAIN_MORE, DRAIN_BLOCKED };

/*
 * Answers up to LINES_PER_TURN of cl's complete request lines. Returns true
 * when complete lines are left for another turn: a client that pipelines
 * thousands of requests holds the loop for one turn at a time, and every
 * other client (root's among them) is served in between.
 */
static enum drain client_drain(struct client *cl)
{
    size_t pos = 0, max = max_line(cl);
    unsigned handled = 0;
    enum drain more = DRAIN_DONE;
    for (;;) {
        char *nl = memchr(cl->buf + pos, '\n', cl->len - pos);
        if (!nl)
            break;
        size_t ll = (size_t)(nl - (cl->buf + pos));
        if (ll > max) {
            send_error(cl, "request line longer than %zu bytes", max);
            client_finish(cl);
            return DRAIN_DONE;
        }
        if (handled == LINES_PER_TURN) {
            more = DRAIN_MORE;
            break;
        }
        if (must_wait(cl)) {
            more = DRAIN_BLOCKED;
            break;
        }
        if (ll > 0) {
            handle_line(cl, cl->buf + pos, ll);
            handled++;
            cl->budget.used++;
            if (cl->closing)
                return DRAIN_DONE;
            /* The deadline runs per request line: bytes that end none do not move it. */
            uv_timer_again(&cl->idle);
        }
        pos += ll + 1;
    }
    memmove(cl->buf, cl->buf + pos, cl->len - pos);
    cl->len -= pos;
    if (more == DRAIN_DONE && cl->len > max) {
        send_error(cl, "request line longer than %zu bytes", max);
        client_finish(cl);
        return DRAIN_DONE;
    }
    return more;
}

/* Reads no more from cl until the lines it has sent are answered, turn by turn. */
static void client_defer(struct client *cl)
{
    uv_read_stop((uv_stream_t *)&cl->pipe);
    cl->deferred = true;
    uv_idle_start(&cl->ctl->turns, on_turn);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct client *cl = s->data;
    (void)buf;
    if (n < 0) {
        if (n == UV_EOF)
            client_finish(cl);
        else
            client_close(cl);
        return;
    }
    cl->len += (size_t)n;
    switch (client_drain(cl)) {
    case DRAIN_MORE:
        client_defer(cl);
        break;
    case DRAIN_BLOCKED:
        uv_read_stop((uv_stream_t *)&cl->pipe);
        cl->blocked = true;
        break;
    case DRAIN_DONE:
        break;
    }
}

/* Once per loop iteration while lines wait: one turn for each client with some. */
static void on_turn(uv_idle_t *h)
{
    struct vpack_control *ctl = h->data;
    bool left = false;
    for (struct client *cl = ctl->clients, *next; cl; cl = next) {
        next = cl->next;
        if (!cl->deferred || cl->closing)
            continue;
        enum drain d = client_drain(cl);
        if (d == DRAIN_MORE) {
            left = true;
            continue;
        }
        cl->deferred = false;
        if (d == DRAIN_BLOCKED)
            cl->blocked = true;
        else if (!cl->closing && !cl->draining)
            uv_read_start((uv_stream_t *)&cl->pipe, on_alloc, on_read);
    }
    /* A client closed during its drain may have unblocked one the walk had
     * already passed (unblock() from client_close()): it still needs a turn. */
    for (struct client *cl = ctl->clients; cl && !left; cl = cl->next)
        left = cl->deferred && !cl->closing;
    if (!left)
        uv_idle_stop(h);
}

/*
 * A client that has not completed a request line within idle_timeout_ms of
 * connecting or of its last one is closed.
 */
static void on_idle(uv_timer_t *t)
{
    struct client *cl = t->data;
    /* Blocked only by the shared pool, it did read its own answers. */
    if (cl->blocked && pending(cl) > OUTPUT_HIGH)
        log_warn("control: dropping a client that does not read its answers (uid %u, %zu "
                 "bytes unread)", (unsigned)cl->uid, pending(cl));
    client_close(cl);
}

/*
 * Whether the peer was in group when it connected: its supplementary
 * groups as the kernel recorded them at connect() (SO_PEERGROUPS, Linux
 * 4.13), not read from /proc/PID/status, whose process may be gone or
 * another by then. False when they cannot be had.
 */
static bool peer_in_group(int fd, gid_t group)
{
    gid_t small[64], *groups = small;
    socklen_t len = sizeof(small);
    bool found = false;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0) {
        /* ERANGE: len is now the size needed. */
        if (errno != ERANGE || !(groups = malloc(len)) ||
            getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0) {
            if (groups != small)
                free(groups);
            return false;
        }
    }
    for (size_t i = 0; i < len / sizeof(gid_t) && !found; i++)
        found = groups[i] == group;
    if (groups != small)
        free(groups);
    return found;
}

/*
 * Who the peer is, from the credentials the kernel recorded at connect():
 * its uid, and whether it may change anything (root or the control group,
 * primary or supplementary).
 */
static void on_resume(uv_idle_t *h);
static void on_window(uv_timer_t *h);

static void client_identify(struct vpack_control *ctl, struct client *cl)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    uv_os_fd_t fd;
    cl->uid = (uid_t)-1;
    if (uv_fileno((uv_handle_t *)&cl->pipe, &fd) < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        return;
    cl->uid = cred.uid;
    cl->pool = cred.uid == 0 ? POOL_ROOT
               : ctl->has_group && (cred.gid == ctl->group || peer_in_group(fd, ctl->group))
                   ? POOL_GROUP
                   : POOL_WORLD;
}

/*
 * Takes the connection waiting on l. Each pool (other users, the control
 * group, root) has max_clients slots: however many connections the others
 * hold, root gets in, and the control group does whatever other users hold.
 * The admin socket's file lets only root and the group connect; their
 * credentials are checked again here.
 */
static void accept_one(struct listener *l)
{
    struct vpack_control *ctl = l->ctl;
    struct client *cl = calloc(1, sizeof(*cl));
    l->accepted++;
    l->budget.used++;
    if (!cl) {
        /* Left waiting: libuv polls the socket again once it is accepted. */
        uv_idle_start(&l->resume, on_resume);
        return;
    }
    cl->ctl = ctl;
    cl->admin = l->admin;
    uv_pipe_init(ctl->loop, &cl->pipe, 0);
    uv_timer_init(ctl->loop, &cl->idle);
    cl->pipe.data = cl->idle.data = cl;
    cl->next = ctl->clients;
    ctl->clients = cl;
    if (uv_accept((uv_stream_t *)&l->pipe, (uv_stream_t *)&cl->pipe) < 0) {
        client_close(cl);
        return;
    }
    client_identify(ctl, cl);
    if (cl->admin && !privileged(cl)) {
        log_warn("control: uid %u connected to the admin socket %s, which is for root and the "
                 "control group: refused", (unsigned)cl->uid, l->path);
        send_error(cl, "permission denied: the admin socket serves root and the vpack control "
                       "group only (uid %u)", (unsigned)cl->uid);
        client_close(cl);
        return;
    }
    if (ctl->nclients[cl->pool] >= ctl->max_clients) {
        send_error(cl, "too many clients (%u)", ctl->max_clients);
        client_close(cl);
        return;
    }
    ctl->nclients[cl->pool]++;
    cl->counted = true;
    uv_timer_start(&cl->idle, on_idle, ctl->idle_ms, ctl->idle_ms);
    uv_read_start((uv_stream_t *)&cl->pipe, on_alloc, on_read);
}

static void try_accept(struct listener *l);

/*
 * The next iteration: the connection left waiting is taken, within the
 * read-only socket's budget (libuv then polls the socket again).
 */
static void on_resume(uv_idle_t *h)
{
    struct listener *l = h->data;
    uv_idle_stop(h);
    try_accept(l);
}

/*
 * The read-only socket's next budget window (window_used() starts it): the
 * connection left waiting is taken.
 */
static void on_window(uv_timer_t *h)
{
    try_accept(h->data);
}

/*
 * At most ACCEPTS_PER_TURN connections per socket and loop iteration, and
 * PUBLIC_ACCEPTS_PER_WINDOW per budget window on the read-only one: one
 * not accepted stays with libuv, which stops polling the socket until
 * on_resume() accepts it in the next iteration.
 */
static void try_accept(struct listener *l)
{
    if (!l->admin) {
        uint64_t now = uv_now(l->ctl->loop);
        if (window_used(&l->budget, now) >= PUBLIC_ACCEPTS_PER_WINDOW) {
            uv_timer_start(&l->window, on_window, l->budget.start + BUDGET_WINDOW_MS - now, 0);
            return;
        }
    }
    if (l->accepted >= ACCEPTS_PER_TURN) {
        uv_idle_start(&l->resume, on_resume);
        return;
    }
    accept_one(l);
}

static void on_connection(uv_stream_t *server, int status)
{
    if (status == 0)
        try_accept(server->data);
}

/* After each iteration's poll. */
static void on_tick(uv_check_t *h)
{
    struct vpack_control *ctl = h->data;
    for (int i = 0; i < NSOCKS; i++)
        ctl->socks[i].accepted = 0;
}

static void control_free(struct vpack_control *ctl)
{
    for (int i = 0; i < NSOCKS; i++) {
        if (ctl->socks[i].dirfd >= 0)
            close(ctl->socks[i].dirfd);
        free(ctl->socks[i].path);
    }
    for (size_t i = 0; i < sizeof(ctl->views) / sizeof(ctl->views[0]); i++)
        vpack_rendered_drop(&ctl->views[i]);
    free(ctl);
}

static void handle_closed(uv_handle_t *h)
{
    struct vpack_control *ctl = h->data;
    if (--ctl->open_handles == 0)
        control_free(ctl);
}

static void listener_closed(uv_handle_t *h)
{
    struct listener *l = h->data;
    if (--l->ctl->open_handles == 0)
        control_free(l->ctl);
}

/* Closes the sockets, the turns and the timers; ctl is freed once the loop has closed them. */
static void control_close(struct vpack_control *ctl)
{
    for (int i = 0; i < NSOCKS; i++) {
        uv_close((uv_handle_t *)&ctl->socks[i].pipe, listener_closed);
        uv_close((uv_handle_t *)&ctl->socks[i].resume, listener_closed);
        uv_close((uv_handle_t *)&ctl->socks[i].window, listener_closed);
    }
    uv_close((uv_handle_t *)&ctl->tick, handle_closed);
    uv_close((uv_handle_t *)&ctl->turns, handle_closed);
    uv_close((uv_handle_t *)&ctl->refill, handle_closed);
}

/* Whether something listens on path: a connection it accepts (or queues) says so. */
static bool socket_live(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return false;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool live = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EAGAIN;
    close(fd);
    return live;
}

/*
 * The socket's directory (/run/vpack, created if needed) must be trusted
 * (adapters/safefs.h). A socket already there is another agent's while
 * something listens on it, else a crashed agent's, removed. Returns 0 or
 * -errno with *errmsg.
 */
static int prepare_path(struct listener *l, char **errmsg)
{
    char dir[4096];
    struct stat st;
    const char *slash = strrchr(l->path, '/');
    if (l->path[0] != '/' || !slash[1])
        return vpack_errmsg_set(-EINVAL, errmsg, "not an absolute path to a socket");
    snprintf(dir, sizeof(dir), "%.*s", slash == l->path ? 1 : (int)(slash - l->path), l->path);
    l->name = slash + 1;
    if ((l->dirfd = vpack_safefs_open_dir(dir, 0755, errmsg)) < 0)
        return l->dirfd;
    if (fstatat(l->dirfd, l->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : vpack_errmsg_set(-errno, errmsg, "%s", strerror(errno));
    if (!S_ISSOCK(st.st_mode))
        return vpack_errmsg_set(-EEXIST, errmsg, "it exists and is not a socket");
    if (socket_live(l->path))
        return vpack_errmsg_set(-EADDRINUSE, errmsg, "another vpackd serves it");
    if (unlinkat(l->dirfd, l->name, 0) < 0)
        return vpack_errmsg_set(-errno, errmsg, "cannot remove the old socket: %s", strerror(errno));
    return 0;
}

/*
 * The admin socket's access ACL, built by entry (a gid in acl_from_text()'s
 * text would be looked up as a group name first): the owner rw, the group
 * owner nothing, the control group rw, others nothing. NULL with errno set.
 */
static acl_t group_acl(gid_t group)
{
    static const struct { acl_tag_t tag; bool rw; } want[] = {
        {ACL_USER_OBJ, true}, {ACL_GROUP_OBJ, false}, {ACL_GROUP, true},
        {ACL_MASK, true}, {ACL_OTHER, false}};
    acl_t acl = acl_init(5);
    for (size_t i = 0; acl && i < sizeof(want) / sizeof(want[0]); i++) {
        acl_entry_t e;
        acl_permset_t ps;
        if (acl_create_entry(&acl, &e) < 0 || acl_set_tag_type(e, want[i].tag) < 0 ||
            (want[i].tag == ACL_GROUP && acl_set_qualifier(e, &group) < 0) ||
            acl_get_permset(e, &ps) < 0 || acl_clear_perms(ps) < 0 ||
            (want[i].rw && (acl_add_perm(ps, ACL_READ) < 0 || acl_add_perm(ps, ACL_WRITE) < 0))) {
            int err = errno;
            acl_free(acl);
            errno = err;
            return NULL;
        }
    }
    return acl;
}

/*
 * Opens the admin socket's file to the control group: 0660 root:group, or,
 * where vpackd may not chown (the unit leaves it no capability, and root
 * may give a file only to a group of its own without CAP_CHOWN), 0600
 * root:root with a POSIX ACL entry giving the group read and write (which
 * connect() checks as it checks the mode: `getfacl` shows it). Returns 0
 * or -errno.
 */
static int open_to_group(struct vpack_control *ctl, struct listener *l)
{
    if (fchownat(l->dirfd, l->name, 0, ctl->group, AT_SYMLINK_NOFOLLOW) == 0)
        return fchmodat(l->dirfd, l->name, 0660, 0) < 0 ? -errno : 0;
    if (errno != EPERM)
        return -errno;
    acl_t acl = group_acl(ctl->group);
    if (!acl)
        return -errno;
    char proc[64];
    /* By the path under the trusted directory: sockets cannot be opened. */
    int fd = openat(l->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        int e = -errno;
        acl_free(acl);
        return e;
    }
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d/%s", fd, l->name);
    int r = acl_set_file(proc, ACL_TYPE_ACCESS, acl) < 0 ? -errno : 0;
    close(fd);
    acl_free(acl);
    if (r == -EOPNOTSUPP)
        return -EPERM; /* neither chown (CAP_CHOWN) nor an ACL on this file system */
    return r;
}

/*
 * Binds and listens on l: the read-only socket 0666 (anyone may connect and
 * read; the umask makes it so, not a chmod of the path), the admin socket
 * 0600 root, then 0660 root:group when there is a control group (it is
 * never more open than that meanwhile). Returns 0 or -errno with *errmsg.
 */
static int listen_on(struct vpack_control *ctl, struct listener *l, char **errmsg);

/*
 * An error about l: the caller names the control socket; the admin
 * socket's own path is added to its messages. Returns r.
 */
static int about(const struct listener *l, int r, char **errmsg)
{
    char *was = *errmsg;
    if (!l->admin || !was)
        return r;
    if (asprintf(errmsg, "its admin socket %s: %s", l->path, was) < 0)
        *errmsg = NULL;
    free(was);
    return r;
}

static int listen_on(struct vpack_control *ctl, struct listener *l, char **errmsg)
{
    mode_t umask_was = umask(l->admin ? 0177 : 0111);
    int r = uv_pipe_bind(&l->pipe, l->path);
    umask(umask_was);
    if (r < 0)
        return vpack_errmsg_set(r, errmsg, "%s", uv_strerror(r));
    if (l->admin && ctl->has_group && (r = open_to_group(ctl, l)) < 0)
        return vpack_errmsg_set(r, errmsg, "cannot open it to the control group: %s",
                                strerror(-r));
    if ((r = uv_listen((uv_stream_t *)&l->pipe, 128, on_connection)) < 0)
        return vpack_errmsg_set(r, errmsg, "%s", uv_strerror(r));
    return 0;
}

int vpack_control_start(uv_loop_t *loop, const struct vpack_config *cfg, struct vpack_agent *agent,
                        struct vpack_control **out, char **errmsg)
{
    struct vpack_control *ctl = calloc(1, sizeof(*ctl));
    int r;
    *errmsg = NULL;
    *out = NULL;
    if (!ctl)
        return -ENOMEM;
    ctl->loop = loop;
    ctl->agent = agent;
    ctl->max_clients = cfg->max_clients;
    ctl->idle_ms = cfg->idle_timeout_ms;
    ctl->max_line = cfg->max_line;
    char admin[sizeof(((struct sockaddr_un *)0)->sun_path)];
    for (int i = 0; i < NSOCKS; i++) {
        ctl->socks[i].dirfd = -1;
        ctl->socks[i].admin = i == SOCK_ADMIN;
        ctl->socks[i].ctl = ctl;
    }
    if (vpack_client_admin_path(cfg->socket_path, admin, sizeof(admin)) < 0) {
        control_free(ctl);
        return vpack_errmsg_set(-ENAMETOOLONG, errmsg,
                                "the admin socket's path (%s with \"-admin\") is too long for "
                                "a socket",
                                cfg->socket_path);
    }
    if (!(ctl->socks[SOCK_PUBLIC].path = strdup(cfg->socket_path)) ||
        !(ctl->socks[SOCK_ADMIN].path = strdup(admin))) {
        control_free(ctl);
        return -ENOMEM;
    }
    if (cfg->control_group && *cfg->control_group) {
        struct group *g = getgrnam(cfg->control_group);
        if (!g) {
            control_free(ctl);
            return vpack_errmsg_set(-ENOENT, errmsg, "control group '%s' does not exist",
                                    cfg->control_group);
        }
        ctl->group = g->gr_gid;
        ctl->has_group = true;
    }
    for (int i = 0; i < NSOCKS; i++)
        if ((r = prepare_path(&ctl->socks[i], errmsg)) < 0) {
            about(&ctl->socks[i], r, errmsg);
            control_free(ctl);
            return r;
        }
    for (int i = 0; i < NSOCKS; i++) {
        struct listener *l = &ctl->socks[i];
        uv_pipe_init(loop, &l->pipe, 0);
        uv_idle_init(loop, &l->resume);
        uv_timer_init(loop, &l->window);
        l->pipe.data = l->resume.data = l->window.data = l;
    }
    uv_check_init(loop, &ctl->tick);
    uv_idle_init(loop, &ctl->turns);
    uv_timer_init(loop, &ctl->refill);
    ctl->tick.data = ctl->turns.data = ctl->refill.data = ctl;
    ctl->open_handles = 3 * NSOCKS + 3;
    uv_check_start(&ctl->tick, on_tick);
    /* The admin socket first: a read-only socket is never served without it. */
    for (int i = NSOCKS - 1; i >= 0; i--)
        if ((r = listen_on(ctl, &ctl->socks[i], errmsg)) < 0) {
            about(&ctl->socks[i], r, errmsg);
            for (int j = NSOCKS - 1; j >= i; j--)
                unlinkat(ctl->socks[j].dirfd, ctl->socks[j].name, 0);
            control_close(ctl);
            return r;
        }
    *out = ctl;
    return 0;
}

void vpack_control_stop(struct vpack_control *ctl)
{
    if (!ctl || ctl->stopping)
        return;
    ctl->stopping = true;
    while (ctl->clients)
        client_close(ctl->clients);
    for (int i = 0; i < NSOCKS; i++)
        unlinkat(ctl->socks[i].dirfd, ctl->socks[i].name, 0);
    control_close(ctl);
}
