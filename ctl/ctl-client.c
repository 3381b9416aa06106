// SPDX-License-Identifier: MIT
/* What the vpackctl commands that talk to the agent share; see ctl-client.h. */
#include "ctl-client.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "vpackctl.h"

/* vpackctl_request() on fd from vpackctl_connect(), or if fd < 0 on a connection of its own. */
static int send_request(const char *path, int fd, struct json_object *req, int timeout_ms,
                        struct json_object **answer, char **errmsg)
{
    const char *text = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN |
                                                               JSON_C_TO_STRING_NOSLASHESCAPE);

    *answer = NULL;
    *errmsg = NULL;
    if (!text) {
        *errmsg = strdup("out of memory");
        return -ENOMEM;
    }
    return fd < 0 ? vpack_client_call(path, text, timeout_ms, answer, errmsg)
                  : vpack_client_exchange(fd, text, timeout_ms, answer, errmsg);
}

int vpackctl_request(const char *path, struct json_object *req, int timeout_ms,
                     struct json_object **answer, char **errmsg)
{
    return send_request(path, -1, req, timeout_ms, answer, errmsg);
}

/* The exit code for r < 0 from the client, after one line on stderr saying why. */
static int request_failed(const char *path, int r, const char *why)
{
    const char *reason = why ? why : strerror(-r);

    if (vpack_client_unreachable(r)) {
        vpackctl_err("cannot reach vpackd at %s: %s%s", path, reason,
                     r == -ENOENT || r == -ECONNREFUSED ? " (is vpackd running?)" : "");
        return VPACKCTL_EXIT_NOAGENT;
    }
    if (r == -EBADMSG || r == -EMSGSIZE)
        vpackctl_err("invalid answer from vpackd at %s: %s", path, reason);
    else
        vpackctl_err("%s: %s", path, reason);
    return VPACKCTL_EXIT_FAIL;
}

/*
 * The exit code of the client's answer (r, why, a), as vpackctl_call()
 * says; takes a and frees why.
 */
static int call_outcome(const char *path, int r, char *why, struct json_object *a,
                        struct json_object **answer)
{
    struct json_object *ok;
    int ret = VPACKCTL_EXIT_FAIL;

    if (r < 0) {
        ret = request_failed(path, r, why);
    } else if (!json_object_object_get_ex(a, "ok", &ok) ||
               !json_object_is_type(ok, json_type_boolean)) {
        vpackctl_err("invalid answer from vpackd at %s: no boolean \"ok\"", path);
    } else if (!json_object_get_boolean(ok)) {
        vpackctl_err("%s", vpack_json_str(a, "error",
                                          "vpackd refused the request and gave no reason"));
    } else {
        *answer = a;
        a = NULL;
        ret = VPACKCTL_EXIT_OK;
    }
    json_object_put(a);
    free(why);
    return ret;
}

/* vpackctl_call() on fd from vpackctl_connect(), or if fd < 0 on a connection of its own. */
static int exchange(const char *path, int fd, struct json_object *req, int timeout_ms,
                    struct json_object **answer)
{
    struct json_object *a = NULL;
    char *why = NULL;
    int r;

    *answer = NULL;
    r = send_request(path, fd, req, timeout_ms, &a, &why);
    return call_outcome(path, r, why, a, answer);
}

int vpackctl_call(const char *path, struct json_object *req, int timeout_ms,
                  struct json_object **answer)
{
    return exchange(path, -1, req, timeout_ms, answer);
}

int vpackctl_connect(const char *path, int timeout_ms, int *fd)
{
    char *why = NULL;
    int r = vpack_client_connect(path, timeout_ms, fd, &why), ret = VPACKCTL_EXIT_OK;

    if (r < 0)
        ret = request_failed(path, r, why);
    free(why);
    return ret;
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
        VPACKCTL_OPTIONS_END,
    };
    struct vpackctl_getopt g = {.cmd = cl->cmd, .usage = cl->usage,
                                .options = cl->dry_run ? options : options + 1};
    const char *socket_opt = NULL;
    int c;

    *a = (struct vpackctl_args){.cmd = cl->cmd};
    while ((c = vpackctl_getopt(&g, argc, argv)) >= 0) {
        if (c == OPT_DRY_RUN)
            a->dry_run = true;
        else if (c == OPT_JSON)
            a->json = true;
        else
            socket_opt = optarg;
    }
    if (c == VPACKCTL_OPT_EXIT)
        return g.exit_code;
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
    a->socket = vpack_client_socket_path(socket_opt);
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

/* vpackctl_ask_on() with the pairs in ap. */
static int ask_v(const struct vpackctl_args *a, int fd, int timeout_ms, const char *member,
                 struct json_object **body, const char *op, va_list ap)
{
    struct json_object *req, *ans = NULL, *m;
    int ret;

    *body = NULL;
    if (!(req = new_request_v(a, op, ap)))
        return VPACKCTL_EXIT_FAIL;
    if ((ret = exchange(a->socket, fd, req, timeout_ms, &ans)))
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

int vpackctl_ask(const struct vpackctl_args *a, int timeout_ms, const char *member,
                 struct json_object **body, const char *op, ...)
{
    va_list ap;
    int ret;

    va_start(ap, op);
    ret = ask_v(a, -1, timeout_ms, member, body, op, ap);
    va_end(ap);
    return ret;
}

int vpackctl_ask_on(const struct vpackctl_args *a, int fd, int timeout_ms, const char *member,
                    struct json_object **body, const char *op, ...)
{
    va_list ap;
    int ret;

    va_start(ap, op);
    ret = ask_v(a, fd, timeout_ms, member, body, op, ap);
    va_end(ap);
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
