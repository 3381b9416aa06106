// SPDX-License-Identifier: MIT
/* vpackctl's synchronous client for the control socket; see ctl-client.h. */
#include "ctl-client.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "vpack/config.h"
#include "vpackctl.h"

const char *vpackctl_socket_path(const char *option)
{
    const char *env = getenv("VPACK_SOCKET");

    if (option)
        return option;
    return env && *env ? env : VPACK_DEFAULT_SOCKET;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for events on fd until deadline. Returns 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        struct pollfd p = {.fd = fd, .events = events};
        int r;

        if (left <= 0)
            return -ETIMEDOUT;
        r = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
        if (r > 0)
            return 0; /* POLLERR and POLLHUP too: the next call says what */
        if (r == 0)
            return -ETIMEDOUT;
        if (errno != EINTR)
            return -errno;
    }
}

/* Seconds, for messages: "5 s", "0.5 s". */
static void format_timeout(char *buf, size_t len, int timeout_ms)
{
    if (timeout_ms % 1000 == 0)
        snprintf(buf, len, "%d s", timeout_ms / 1000);
    else
        snprintf(buf, len, "%.1f s", timeout_ms / 1000.0);
}

/*
 * Connects fd to path before deadline. A Unix socket connects at once or
 * fails at once; EAGAIN means the agent's listen queue is full, so we retry
 * until the deadline.
 */
static int connect_until(int fd, const struct sockaddr_un *addr, int64_t deadline)
{
    for (;;) {
        int err = 0;
        socklen_t elen = sizeof(err);
        int r;

        if (connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) == 0)
            return 0;
        if (errno == EAGAIN) {
            if (now_ms() + 10 >= deadline)
                return -ETIMEDOUT;
            poll(NULL, 0, 10);
            continue;
        }
        if (errno != EINPROGRESS)
            return -errno;
        if ((r = wait_fd(fd, POLLOUT, deadline)) < 0)
            return r;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
            return -errno;
        return err ? -err : 0;
    }
}

/* Sends len bytes of s before deadline. */
static int send_all(int fd, const char *s, size_t len, int64_t deadline)
{
    size_t sent = 0;

    while (sent < len) {
        ssize_t n = send(fd, s + sent, len - sent, MSG_NOSIGNAL);
        int r;

        if (n >= 0) {
            sent += (size_t)n;
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        if ((r = wait_fd(fd, POLLOUT, deadline)) < 0)
            return r;
    }
    return 0;
}

/*
 * Reads up to the first newline before deadline. Returns 0 with *line (NUL
 * terminated, newline removed; the caller frees it) and *len.
 */
static int recv_line(int fd, int64_t deadline, char **line, size_t *len)
{
    size_t got = 0, cap = 0;
    char *buf = NULL;
    int ret;

    *line = NULL;
    for (;;) {
        char *nl;
        ssize_t n;

        /*
         * Room for the longest line, its newline and a NUL: the limit is
         * passed when more bytes than that arrive with no newline.
         */
        if (cap - got < 4096 && cap < VPACKCTL_ANSWER_MAX + 2) {
            size_t ncap = cap ? cap * 2 : 65536;
            char *b;

            if (ncap > VPACKCTL_ANSWER_MAX + 2)
                ncap = VPACKCTL_ANSWER_MAX + 2;
            if (!(b = realloc(buf, ncap))) {
                ret = -ENOMEM;
                goto cleanup;
            }
            buf = b;
            cap = ncap;
        }
        if ((ret = wait_fd(fd, POLLIN, deadline)) < 0)
            goto cleanup;
        n = recv(fd, buf + got, cap - 1 - got, 0);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            ret = -errno;
            goto cleanup;
        }
        if (n == 0) {
            ret = -ECONNRESET;
            goto cleanup;
        }
        nl = memchr(buf + got, '\n', (size_t)n);
        got += (size_t)n;
        if (nl) {
            *nl = '\0';
            *len = (size_t)(nl - buf);
            break;
        }
        if (got > VPACKCTL_ANSWER_MAX) {
            ret = -EMSGSIZE;
            goto cleanup;
        }
    }
    *line = buf;
    buf = NULL;
    ret = 0;
cleanup:
    free(buf);
    return ret;
}

/* Parses one JSON object from text (len bytes and a NUL), allowing whitespace around it. */
static int parse_answer(const char *text, size_t len, struct json_object **out, char *why,
                        size_t whylen)
{
    struct json_tokener *tok = json_tokener_new();
    struct json_object *o = NULL;
    size_t end;
    int ret = -EBADMSG;

    *out = NULL;
    if (!tok)
        return -ENOMEM;
    if (len >= INT32_MAX) {
        snprintf(why, whylen, "answer too long");
        goto cleanup;
    }
    /* With its NUL, so that a bare literal or number at the end is complete. */
    o = json_tokener_parse_ex(tok, text, (int)len + 1);
    if (!o || json_tokener_get_error(tok) != json_tokener_success) {
        enum json_tokener_error e = json_tokener_get_error(tok);
        snprintf(why, whylen, "%s%s",
                 e == json_tokener_success || e == json_tokener_continue ? "" : "not JSON: ",
                 e == json_tokener_continue ? "the answer ends too early"
                 : e == json_tokener_success ? "null instead of an object"
                                             : json_tokener_error_desc(e));
        goto cleanup;
    }
    end = json_tokener_get_parse_end(tok);
    while (end < len && (text[end] == ' ' || text[end] == '\t' || text[end] == '\r'))
        end++;
    if (end < len) {
        snprintf(why, whylen, "trailing data after the answer");
        goto cleanup;
    }
    if (!json_object_is_type(o, json_type_object)) {
        snprintf(why, whylen, "the answer is not a JSON object");
        goto cleanup;
    }
    *out = o;
    o = NULL;
    ret = 0;
cleanup:
    json_object_put(o);
    json_tokener_free(tok);
    return ret;
}

int vpackctl_request(const char *path, struct json_object *req, int timeout_ms,
                     struct json_object **answer, char *why, size_t whylen)
{
    int64_t deadline = now_ms() + timeout_ms;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    char *line = NULL, *reply = NULL, tmo[32];
    const char *text;
    size_t len, rlen = 0;
    int fd = -1, ret;

    *answer = NULL;
    format_timeout(tmo, sizeof(tmo), timeout_ms);
    if (strlen(path) >= sizeof(addr.sun_path)) {
        snprintf(why, whylen, "the socket path is longer than %zu bytes",
                 sizeof(addr.sun_path) - 1);
        ret = -ENAMETOOLONG;
        goto cleanup;
    }
    memcpy(addr.sun_path, path, strlen(path) + 1);

    text = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN |
                                                   JSON_C_TO_STRING_NOSLASHESCAPE);
    len = text ? strlen(text) : 0;
    if (!text || !(line = malloc(len + 1))) {
        snprintf(why, whylen, "out of memory");
        ret = -ENOMEM;
        goto cleanup;
    }
    memcpy(line, text, len);
    line[len++] = '\n';

    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ret = -errno;
        snprintf(why, whylen, "socket: %s", strerror(errno));
        goto cleanup;
    }
    if ((ret = connect_until(fd, &addr, deadline)) < 0) {
        if (ret == -ETIMEDOUT)
            snprintf(why, whylen, "no connection within %s (the agent is busy)", tmo);
        else
            snprintf(why, whylen, "%s", strerror(-ret));
        goto cleanup;
    }
    ret = send_all(fd, line, len, deadline);
    /*
     * The agent may answer and close before it reads the request ("too many
     * clients"): the send fails, but what it said is still there to read.
     */
    if (ret == 0 || ret == -EPIPE || ret == -ECONNRESET) {
        int r = recv_line(fd, deadline, &reply, &rlen);

        if (ret == 0 || r == 0)
            ret = r;
    }
    if (ret < 0) {
        if (ret == -ETIMEDOUT)
            snprintf(why, whylen, "no answer within %s", tmo);
        else if (ret == -ECONNRESET || ret == -EPIPE)
            snprintf(why, whylen, "the agent closed the connection without answering");
        else if (ret == -EMSGSIZE)
            snprintf(why, whylen, "the answer is longer than %u bytes", VPACKCTL_ANSWER_MAX);
        else
            snprintf(why, whylen, "%s", strerror(-ret));
        if (ret == -EPIPE)
            ret = -ECONNRESET;
        goto cleanup;
    }
    ret = parse_answer(reply, rlen, answer, why, whylen);
cleanup:
    if (fd >= 0)
        close(fd);
    free(reply);
    free(line);
    return ret;
}

bool vpackctl_unreachable(int err)
{
    switch (err) {
    case -EBADMSG:      /* it answered, but not with an object */
    case -EMSGSIZE:     /* ... or with no end */
    case -ENOMEM:
    case -EMFILE:       /* no socket for us, whatever the agent does */
    case -ENFILE:
    case -ENAMETOOLONG: /* a path no socket can have */
        return false;
    default:            /* ENOENT, ECONNREFUSED, EACCES, ETIMEDOUT, ECONNRESET, ... */
        return err < 0;
    }
}

int vpackctl_call(const char *path, struct json_object *req, int timeout_ms,
                  struct json_object **answer)
{
    struct json_object *a = NULL, *ok, *err;
    char why[512];
    int r;

    *answer = NULL;
    r = vpackctl_request(path, req, timeout_ms, &a, why, sizeof(why));
    if (r < 0) {
        if (vpackctl_unreachable(r)) {
            vpackctl_err("cannot reach vpackd at %s: %s%s", path, why,
                         r == -ENOENT || r == -ECONNREFUSED ? " (is vpackd running?)" : "");
            return VPACKCTL_EXIT_NOAGENT;
        }
        if (r == -EBADMSG || r == -EMSGSIZE)
            vpackctl_err("invalid answer from vpackd at %s: %s", path, why);
        else
            vpackctl_err("%s: %s", path, why);
        return VPACKCTL_EXIT_FAIL;
    }
    if (!json_object_object_get_ex(a, "ok", &ok) || !json_object_is_type(ok, json_type_boolean)) {
        vpackctl_err("invalid answer from vpackd at %s: no boolean \"ok\"", path);
        json_object_put(a);
        return VPACKCTL_EXIT_FAIL;
    }
    if (!json_object_get_boolean(ok)) {
        if (json_object_object_get_ex(a, "error", &err) && json_object_is_type(err, json_type_string))
            vpackctl_err("%s", json_object_get_string(err));
        else
            vpackctl_err("vpackd refused the request and gave no reason");
        json_object_put(a);
        return VPACKCTL_EXIT_FAIL;
    }
    *answer = a;
    return VPACKCTL_EXIT_OK;
}

int vpackctl_flush(void)
{
    /* A full disk or closed pipe shows up here, not at printf(). */
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        vpackctl_err("cannot write the output%s%s", errno ? ": " : "", errno ? strerror(errno) : "");
        return VPACKCTL_EXIT_FAIL;
    }
    return VPACKCTL_EXIT_OK;
}

int vpackctl_print_json(struct json_object *o)
{
    int flags = JSON_C_TO_STRING_NOSLASHESCAPE;

    if (isatty(STDOUT_FILENO))
        flags |= JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED;
    puts(json_object_to_json_string_ext(o, flags));
    return vpackctl_flush();
}

const char *vpackctl_json_str(struct json_object *o, const char *key, const char *dflt)
{
    struct json_object *v;

    if (o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string))
        return json_object_get_string(v);
    return dflt;
}

const char *vpackctl_json_text(struct json_object *o, const char *key, const char *dflt)
{
    struct json_object *v;

    if (o && json_object_object_get_ex(o, key, &v) && v)
        return json_object_get_string(v);
    return dflt;
}

double vpackctl_json_double(struct json_object *o, const char *key, double dflt)
{
    struct json_object *v;

    if (o && json_object_object_get_ex(o, key, &v) &&
        (json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)))
        return json_object_get_double(v);
    return dflt;
}

bool vpackctl_json_bool(struct json_object *o, const char *key, bool dflt)
{
    struct json_object *v;

    if (o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_boolean))
        return json_object_get_boolean(v);
    return dflt;
}

struct json_object *vpackctl_json_array(struct json_object *o, const char *key)
{
    struct json_object *v;

    if (o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_array))
        return v;
    return NULL;
}

char *vpackctl_json_list(struct json_object *o, const char *key, const char *dflt)
{
    struct json_object *arr = vpackctl_json_array(o, key);
    size_t n = arr ? json_object_array_length(arr) : 0, len = 0;
    char *buf = NULL;
    FILE *f;

    if (n == 0)
        return strdup(dflt);
    if (!(f = open_memstream(&buf, &len)))
        return NULL;
    for (size_t i = 0; i < n; i++) {
        const char *s = json_object_get_string(json_object_array_get_idx(arr, i));
        fprintf(f, "%s%s", i ? "," : "", s ? s : "?");
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

void vpackctl_option_error(const char *cmd, int c, char **argv)
{
    const char *arg = argv[optind - 1];

    if (c == ':')
        vpackctl_err("%s: option '%s' needs an argument (see 'vpackctl %s --help')", cmd, arg,
                     cmd);
    else if (optopt >= 256)
        /* getopt_long() puts a known option's val here when it got an argument. */
        vpackctl_err("%s: option '%s' takes no argument (see 'vpackctl %s --help')", cmd, arg,
                     cmd);
    else if (optopt)
        vpackctl_err("%s: unknown option '-%c' (see 'vpackctl %s --help')", cmd, optopt, cmd);
    else
        vpackctl_err("%s: unknown option '%s' (see 'vpackctl %s --help')", cmd, arg, cmd);
}

int vpackctl_parse_args(int argc, char **argv, const struct vpackctl_cmdline *cl,
                        struct vpackctl_args *a)
{
    enum { OPT_DRY_RUN = 256, OPT_JSON, OPT_SOCKET };
    /* --dry-run first, so that the commands without it start one further. */
    static const struct option options[] = {
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {"json", no_argument, NULL, OPT_JSON},
        {"socket", required_argument, NULL, OPT_SOCKET},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *socket_opt = NULL;
    int c;

    *a = (struct vpackctl_args){.cmd = cl->cmd};
    opterr = 0;
    optind = 0;
    while ((c = getopt_long(argc, argv, ":h", cl->dry_run ? options : options + 1, NULL)) != -1) {
        switch (c) {
        case OPT_DRY_RUN:
            a->dry_run = true;
            break;
        case OPT_JSON:
            a->json = true;
            break;
        case OPT_SOCKET:
            socket_opt = optarg;
            break;
        case 'h':
            cl->usage(stdout);
            return VPACKCTL_EXIT_OK;
        default:
            vpackctl_option_error(cl->cmd, c, argv);
            return VPACKCTL_EXIT_USAGE;
        }
    }
    if (cl->arg) {
        if (optind >= argc) {
            vpackctl_err("%s: missing %s (see 'vpackctl %s --help')", cl->cmd, cl->arg, cl->cmd);
            return VPACKCTL_EXIT_USAGE;
        }
        a->arg = argv[optind++];
    }
    if (optind < argc) {
        vpackctl_err("%s: unexpected argument '%s' (see 'vpackctl %s --help')", cl->cmd,
                     argv[optind], cl->cmd);
        return VPACKCTL_EXIT_USAGE;
    }
    if (a->arg && !*a->arg) {
        vpackctl_err("%s: %s is empty", cl->cmd, cl->arg);
        return VPACKCTL_EXIT_USAGE;
    }
    if (socket_opt && !*socket_opt) {
        vpackctl_err("%s: --socket needs a path", cl->cmd);
        return VPACKCTL_EXIT_USAGE;
    }
    a->socket = vpackctl_socket_path(socket_opt);
    return VPACKCTL_PROCEED;
}

/* vpackctl_new_request() with the pairs in ap. */
static struct json_object *new_request_v(const struct vpackctl_args *a, const char *op, va_list ap)
{
    struct json_object *req = json_object_new_object(), *val = json_object_new_string(op);
    const char *key = "op";
    bool ok = req != NULL;

    /* Every value goes into req or is put, whatever fails. */
    for (;;) {
        if (ok && val && json_object_object_add(req, key, val) == 0)
            val = NULL;
        else
            ok = false;
        json_object_put(val);
        if (!(key = va_arg(ap, const char *)))
            break;
        val = va_arg(ap, struct json_object *);
    }
    if (!ok) {
        vpackctl_err("%s: out of memory", a->cmd);
        json_object_put(req);
        return NULL;
    }
    return req;
}

struct json_object *vpackctl_new_request(const struct vpackctl_args *a, const char *op, ...)
{
    struct json_object *req;
    va_list ap;

    va_start(ap, op);
    req = new_request_v(a, op, ap);
    va_end(ap);
    return req;
}

int vpackctl_ask(const struct vpackctl_args *a, int timeout_ms, const char *member,
                 struct json_object **body, const char *op, ...)
{
    struct json_object *req, *ans = NULL, *m;
    va_list ap;
    int ret;

    *body = NULL;
    va_start(ap, op);
    req = new_request_v(a, op, ap);
    va_end(ap);
    if (!req)
        return VPACKCTL_EXIT_FAIL;
    if ((ret = vpackctl_call(a->socket, req, timeout_ms, &ans)))
        goto cleanup;
    if (!member) {
        json_object_object_del(ans, "ok");
        *body = ans;
        ans = NULL;
    } else if (json_object_object_get_ex(ans, member, &m) &&
               json_object_is_type(m, json_type_object)) {
        *body = json_object_get(m);
    } else {
        vpackctl_err("%s: invalid answer from vpackd: no \"%s\" object", a->cmd, member);
        ret = VPACKCTL_EXIT_FAIL;
    }
cleanup:
    json_object_put(ans);
    json_object_put(req);
    return ret;
}

int vpackctl_show(const struct vpackctl_args *a, struct json_object *body,
                  int (*print_text)(struct json_object *body, const struct vpackctl_args *a))
{
    if (a->json)
        return vpackctl_print_json(body);
    if (print_text(body, a) < 0) {
        vpackctl_err("%s: out of memory", a->cmd);
        return VPACKCTL_EXIT_FAIL;
    }
    return vpackctl_flush();
}
