// SPDX-License-Identifier: MIT
/* The control socket's client; see client.h. */
#include "client.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "vpack/config.h"
#include "vpack/errmsg.h"

int vpack_client_admin_path(const char *path, char *buf, size_t size)
{
    static const char suffix[] = ".sock";
    size_t len = strlen(path), stem = len;
    struct sockaddr_un sa;
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;

    /* A name that is only ".sock" keeps it whole: "-admin" follows it. */
    if (strlen(name) > sizeof(suffix) - 1 &&
        !strcmp(path + len - (sizeof(suffix) - 1), suffix))
        stem = len - (sizeof(suffix) - 1);
    if (snprintf(buf, size, "%.*s-admin%s", (int)stem, path, path + stem) >= (int)size ||
        strlen(buf) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    return 0;
}

const char *vpack_client_socket_path(const char *option)
{
    static char admin[sizeof(((struct sockaddr_un *)0)->sun_path)];
    const char *env = getenv("VPACK_SOCKET");
    const char *path = option ? option : env && *env ? env : VPACK_DEFAULT_SOCKET;

    /*
     * connect() on a Unix socket needs write permission on its file:
     * access() asks the same question without a connection the agent
     * would have to accept and refuse.
     */
    if (vpack_client_admin_path(path, admin, sizeof(admin)) == 0 && access(admin, W_OK) == 0)
        return admin;
    return path;
}

int64_t vpack_client_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for events on fd until deadline. Returns 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - vpack_client_now_ms();
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

/* For messages: "5 s", "50 ms". */
static void format_timeout(char *buf, size_t len, int timeout_ms)
{
    if (timeout_ms % 1000 == 0)
        snprintf(buf, len, "%d s", timeout_ms / 1000);
    else
        snprintf(buf, len, "%d ms", timeout_ms);
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
            if (vpack_client_now_ms() + 10 >= deadline)
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

/* Grows buf so that 4096 more bytes fit, up to the longest answer. */
static int grow(char **buf, size_t got, size_t *cap)
{
    size_t ncap = *cap ? *cap * 2 : 65536;
    char *b;

    if (*cap - got >= 4096 || *cap >= VPACK_CLIENT_ANSWER_MAX + 2)
        return 0;
    if (ncap > VPACK_CLIENT_ANSWER_MAX + 2)
        ncap = VPACK_CLIENT_ANSWER_MAX + 2;
    if (!(b = realloc(*buf, ncap)))
        return -ENOMEM;
    *buf = b;
    *cap = ncap;
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
        if ((ret = grow(&buf, got, &cap)) < 0 || (ret = wait_fd(fd, POLLIN, deadline)) < 0)
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
        if (got > VPACK_CLIENT_ANSWER_MAX) {
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
static int parse_answer(const char *text, size_t len, struct json_object **out, char **errmsg)
{
    struct json_tokener *tok = json_tokener_new();
    struct json_object *o = NULL;
    enum json_tokener_error e;
    size_t end;
    int ret = -EBADMSG;

    *out = NULL;
    if (!tok)
        return vpack_errmsg_set(-ENOMEM, errmsg, "out of memory");
    if (len >= INT32_MAX) {
        vpack_errmsg_set(ret, errmsg, "answer too long");
        goto cleanup;
    }
    /* With its NUL, so that a bare literal or number at the end is complete. */
    o = json_tokener_parse_ex(tok, text, (int)len + 1);
    e = json_tokener_get_error(tok);
    if (!o || e != json_tokener_success) {
        vpack_errmsg_set(ret, errmsg, "%s%s",
                         e == json_tokener_success || e == json_tokener_continue ? "" : "not JSON: ",
                         e == json_tokener_continue  ? "the answer ends too early"
                         : e == json_tokener_success ? "null instead of an object"
                                                     : json_tokener_error_desc(e));
        goto cleanup;
    }
    end = json_tokener_get_parse_end(tok);
    while (end < len && (text[end] == ' ' || text[end] == '\t' || text[end] == '\r'))
        end++;
    if (end < len) {
        vpack_errmsg_set(ret, errmsg, "trailing data after the answer");
        goto cleanup;
    }
    if (!json_object_is_type(o, json_type_object)) {
        vpack_errmsg_set(ret, errmsg, "the answer is not a JSON object");
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

/* Why the exchange failed with err, after connecting. */
static int exchange_failed(int err, int timeout_ms, char **errmsg)
{
    char tmo[32];

    format_timeout(tmo, sizeof(tmo), timeout_ms);
    if (err == -ETIMEDOUT)
        return vpack_errmsg_set(err, errmsg, "no answer within %s", tmo);
    if (err == -ECONNRESET || err == -EPIPE)
        return vpack_errmsg_set(-ECONNRESET, errmsg,
                                "the agent closed the connection without answering");
    if (err == -EMSGSIZE)
        return vpack_errmsg_set(err, errmsg, "the answer is longer than %u bytes",
                                VPACK_CLIENT_ANSWER_MAX);
    return vpack_errmsg_set(err, errmsg, "%s", strerror(-err));
}

/* Connects a new socket to path before deadline: 0 with *fd, or -errno. */
static int open_socket(const char *path, int64_t deadline, int timeout_ms, int *fd,
                       char **errmsg)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    size_t plen = strlen(path);
    char tmo[32];
    int ret;

    if (plen >= sizeof(addr.sun_path))
        return vpack_errmsg_set(-ENAMETOOLONG, errmsg, "the socket path is longer than %zu bytes",
                                sizeof(addr.sun_path) - 1);
    memcpy(addr.sun_path, path, plen + 1);
    *fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (*fd < 0)
        return vpack_errmsg_set(-errno, errmsg, "socket: %s", strerror(errno));
    if ((ret = connect_until(*fd, &addr, deadline)) == 0)
        return 0;
    format_timeout(tmo, sizeof(tmo), timeout_ms);
    if (ret == -ETIMEDOUT)
        return vpack_errmsg_set(ret, errmsg, "no connection within %s (the agent is busy)", tmo);
    return vpack_errmsg_set(ret, errmsg, "%s", strerror(-ret));
}

int vpack_client_connect(const char *path, int timeout_ms, int *fd, char **errmsg)
{
    int ret;

    *fd = -1;
    *errmsg = NULL;
    if ((ret = open_socket(path, vpack_client_now_ms() + timeout_ms, timeout_ms, fd, errmsg)) < 0 &&
        *fd >= 0) {
        close(*fd);
        *fd = -1;
    }
    return ret;
}

/* vpack_client_exchange() before deadline; timeout_ms is for messages. */
static int exchange_until(int fd, const char *request, int64_t deadline, int timeout_ms,
                          struct json_object **answer, char **errmsg)
{
    size_t len = strlen(request), rlen = 0;
    char *line = NULL, *reply = NULL;
    int ret;

    *answer = NULL;
    *errmsg = NULL;
    if (!(line = malloc(len + 1))) {
        ret = vpack_errmsg_set(-ENOMEM, errmsg, "out of memory");
        goto cleanup;
    }
    memcpy(line, request, len);
    line[len++] = '\n';
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
    if (ret < 0)
        ret = exchange_failed(ret, timeout_ms, errmsg);
    else
        ret = parse_answer(reply, rlen, answer, errmsg);
cleanup:
    free(reply);
    free(line);
    return ret;
}

int vpack_client_exchange(int fd, const char *request, int timeout_ms,
                          struct json_object **answer, char **errmsg)
{
    return exchange_until(fd, request, vpack_client_now_ms() + timeout_ms, timeout_ms, answer,
                          errmsg);
}

int vpack_client_call(const char *path, const char *request, int timeout_ms,
                      struct json_object **answer, char **errmsg)
{
    int64_t deadline = vpack_client_now_ms() + timeout_ms;
    int fd = -1, ret;

    *answer = NULL;
    *errmsg = NULL;
    if ((ret = open_socket(path, deadline, timeout_ms, &fd, errmsg)) == 0)
        ret = exchange_until(fd, request, deadline, timeout_ms, answer, errmsg);
    if (fd >= 0)
        close(fd);
    return ret;
}

bool vpack_client_unreachable(int err)
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
