// SPDX-License-Identifier: MIT
#include "vpack/protocol.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "vpack/errmsg.h"
#include "vpack/json.h"

static const char *const op_names[] = {
    [VPACK_CTL_VERSION] = "version",     [VPACK_CTL_STATUS] = "status",
    [VPACK_CTL_SNAPSHOT] = "snapshot",   [VPACK_CTL_EXPLAIN] = "explain",
    [VPACK_CTL_REBALANCE] = "rebalance", [VPACK_CTL_REGISTER] = "register",
    [VPACK_CTL_FORGET] = "forget",       [VPACK_CTL_HOLD_LEVEL] = "hold-level",
};
_Static_assert(sizeof(op_names) / sizeof(op_names[0]) == VPACK_CTL_NOPS, "an op without a name");

/* The string member key of o, or NULL when absent, not a string or holding a NUL. */
static const char *str_member(struct json_object *o, const char *key)
{
    return vpack_json_string_value(vpack_json_member(o, key));
}

bool vpack_ctl_uuid_ok(const char *u)
{
    if (!u || strlen(u) != 36)
        return false;
    for (int i = 0; i < 36; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? u[i] != '-' : !strchr("0123456789abcdefABCDEF", u[i]))
            return false;
    }
    return true;
}

void vpack_ctl_request_clear(struct vpack_ctl_request *req)
{
    json_object_put(req->obj);
    memset(req, 0, sizeof(*req));
}

/* A domain name a log line or a status may carry: no control character. */
static bool name_ok(const char *s)
{
    if (!*s)
        return false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

/* hold-level's "level" (an integer 0 to 2) and "seconds" (0 to VPACK_HOLD_MAX_S). */
static int hold_args(struct vpack_ctl_request *req, char **errmsg)
{
    struct json_object *l = vpack_json_member(req->obj, "level");
    struct json_object *s = vpack_json_member(req->obj, "seconds");
    if (!json_object_is_type(l, json_type_int) || json_object_get_int64(l) < 0 ||
        json_object_get_int64(l) > 2)
        return vpack_errmsg_set(-EINVAL, errmsg,
                                "hold-level: needs a \"level\" of 0, 1 or 2 (an integer)");
    double sec = json_object_is_type(s, json_type_int) || json_object_is_type(s, json_type_double)
                     ? json_object_get_double(s)
                     : -1;
    /* NaN fails both comparisons: refused too. */
    if (!(sec >= 0 && sec <= VPACK_HOLD_MAX_S))
        return vpack_errmsg_set(-EINVAL, errmsg,
                                "hold-level: needs \"seconds\" from 0 (drop the hold) to %d",
                                VPACK_HOLD_MAX_S);
    req->hold_level = (int)json_object_get_int64(l);
    req->hold_seconds = sec;
    return 0;
}

static int check_args(struct vpack_ctl_request *req, char **errmsg)
{
    struct json_object *o = req->obj, *v;
    switch (req->op) {
    case VPACK_CTL_EXPLAIN:
        if (!(req->domain = str_member(o, "domain")))
            return vpack_errmsg_set(-EINVAL, errmsg, "explain needs a string \"domain\"");
        return 0;
    case VPACK_CTL_REGISTER:
        v = vpack_json_member(o, "domain");
        if (!json_object_is_type(v, json_type_object))
            return vpack_errmsg_set(-EINVAL, errmsg, "register: needs a \"domain\" object");
        req->record = v;
        req->name = str_member(v, "name");
        req->uuid = str_member(v, "uuid");
        if (!req->name || !vpack_ctl_uuid_ok(req->uuid))
            return vpack_errmsg_set(
                -EINVAL, errmsg, "register: the domain record needs a \"name\" and a valid \"uuid\"");
        if (!name_ok(req->name))
            return vpack_errmsg_set(-EINVAL, errmsg,
                                    "register: the domain's name is empty or holds a control "
                                    "character");
        const char *event = str_member(o, "event");
        req->reconnect = event && !strcmp(event, "reconnect");
        return 0;
    case VPACK_CTL_HOLD_LEVEL:
        return hold_args(req, errmsg);
    case VPACK_CTL_FORGET:
        req->uuid = str_member(o, "uuid");
        if (!vpack_ctl_uuid_ok(req->uuid))
            return vpack_errmsg_set(-EINVAL, errmsg, "forget: needs a valid \"uuid\"");
        return 0;
    default:
        return 0;
    }
}

int vpack_ctl_request_parse(const char *line, size_t len, bool privileged, unsigned uid,
                            struct vpack_ctl_request *req, char **errmsg)
{
    struct vpack_ctl_peer peer = {.privileged = privileged, .uid = uid};
    return vpack_ctl_request_parse_peer(line, len, &peer, req, errmsg);
}

/* Whether req changes the agent: only the admin socket takes it. */
static bool changes_agent(const struct vpack_ctl_request *req)
{
    switch (req->op) {
    case VPACK_CTL_REBALANCE:
        return !req->dry_run;
    case VPACK_CTL_REGISTER:
    case VPACK_CTL_FORGET:
    case VPACK_CTL_HOLD_LEVEL:
        return true;
    default:
        return false;
    }
}

int vpack_ctl_request_parse_peer(const char *line, size_t len, const struct vpack_ctl_peer *peer,
                                 struct vpack_ctl_request *req, char **errmsg)
{
    bool privileged = peer->privileged;
    unsigned uid = peer->uid;
    struct json_tokener *tok;
    struct json_object *op;
    enum json_tokener_error e;
    char quoted[VPACK_JSON_QUOTE_LEN];
    size_t i;
    int ret;

    memset(req, 0, sizeof(*req));
    if (errmsg)
        *errmsg = NULL;
    if (len > INT_MAX)
        return vpack_errmsg_set(-EINVAL, errmsg, "invalid JSON: the line is too long");
    if (!(tok = json_tokener_new()))
        return vpack_errmsg_set(-ENOMEM, errmsg, "out of memory");
    req->obj = json_tokener_parse_ex(tok, line, (int)len);
    e = json_tokener_get_error(tok);
    if (!req->obj || e != json_tokener_success || json_tokener_get_parse_end(tok) != len) {
        ret = vpack_errmsg_set(-EINVAL, errmsg, "invalid JSON: %s",
                               req->obj                     ? "trailing data"
                               : e == json_tokener_continue ? "incomplete"
                                                            : json_tokener_error_desc(e));
        json_tokener_free(tok);
        goto fail;
    }
    json_tokener_free(tok);
    if (!json_object_is_type(req->obj, json_type_object) ||
        !json_object_is_type(op = vpack_json_member(req->obj, "op"), json_type_string)) {
        ret = vpack_errmsg_set(-EINVAL, errmsg, "a request is an object with a string \"op\"");
        goto fail;
    }
    const char *name = json_object_get_string(op);
    size_t name_len = (size_t)json_object_get_string_len(op);
    for (i = 0; i < sizeof(op_names) / sizeof(op_names[0]); i++)
        if (strlen(op_names[i]) == name_len && !memcmp(op_names[i], name, name_len))
            break;
    if (i == sizeof(op_names) / sizeof(op_names[0])) {
        vpack_json_quote(quoted, sizeof(quoted), name, name_len);
        ret = vpack_errmsg_set(-EINVAL, errmsg, "unknown op '%s'", quoted);
        goto fail;
    }
    req->op = (enum vpack_ctl_op)i;
    req->op_name = op_names[i];
    /* json-c's truthiness: true, non-zero numbers and non-empty strings. */
    req->dry_run = req->op == VPACK_CTL_REBALANCE &&
                   json_object_get_boolean(vpack_json_member(req->obj, "dry_run"));
    if (peer->admin_socket && changes_agent(req)) {
        ret = vpack_errmsg_set(-EPERM, errmsg,
                               "permission denied: '%s' changes the agent: this socket serves "
                               "read-only requests; root and the vpack control group send it on "
                               "the admin socket %s",
                               req->op_name, peer->admin_socket);
        goto fail;
    }
    /* A record ties a guest to its requested pins: only the hook, which
     * runs as root, makes or removes one, not the control group. */
    if (req->op == VPACK_CTL_HOLD_LEVEL && uid != 0) {
        ret = vpack_errmsg_set(-EPERM, errmsg,
                               "permission denied: '%s' needs root: it changes every domain's "
                               "placement (uid %u)",
                               req->op_name, uid);
        goto fail;
    }
    if ((req->op == VPACK_CTL_REGISTER || req->op == VPACK_CTL_FORGET) && uid != 0) {
        ret = vpack_errmsg_set(-EPERM, errmsg,
                               "permission denied: '%s' needs root, as the hook runs (uid %u)",
                               req->op_name, uid);
        goto fail;
    }
    if (req->op == VPACK_CTL_REBALANCE && !privileged && !req->dry_run) {
        ret = vpack_errmsg_set(
            -EPERM, errmsg, "permission denied: '%s' needs root or the vpack control group (uid %u)",
            req->op_name, uid);
        goto fail;
    }
    if ((ret = check_args(req, errmsg)) < 0)
        goto fail;
    return 0;
fail:
    vpack_ctl_request_clear(req);
    return ret;
}
