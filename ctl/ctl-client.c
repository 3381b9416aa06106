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

int vpackctl_request(const char *path, struct json_object *req, int timeout_ms,
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
    return vpack_client_call(path, text, timeout_ms, answer, errmsg);
}

int vpackctl_call(const char *path, struct json_object *req, int timeout_ms,
                  struct json_object **answer)
{
    struct json_object *a = NULL, *ok;
    char *why = NULL;
    const char *reason;
    int r, ret = VPACKCTL_EXIT_FAIL;

    *answer = NULL;
    r = vpackctl_request(path, req, timeout_ms, &a, &why);
    reason = why ? why : strerror(-r);
    if (r < 0 && vpack_client_unreachable(r)) {
        vpackctl_err("cannot reach vpackd at %s: %s%s", path, reason,
                     r == -ENOENT || r == -ECONNREFUSED ? " (is vpackd running?)" : "");
        ret = VPACKCTL_EXIT_NOAGENT;
    } else if (r == -EBADMSG || r == -EMSGSIZE) {
        vpackctl_err("invalid answer from vpackd at %s: %s", path, reason);
    } else if (r < 0) {
        vpackctl_err("%s: %s", path, reason);
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
