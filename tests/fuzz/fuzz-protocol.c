// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the control protocol (lib/format/protocol.c): the input is
 * what a client writes to /run/vpack/vpackd.sock, split into lines as
 * agent/control.c splits it (empty lines skipped), each line parsed for an
 * unprivileged and for a privileged peer. Checked on every line:
 *
 *  - an unprivileged peer never gets a request that changes something:
 *    no register, no forget, no rebalance other than a dry run;
 *  - the two peers get the same request, or the unprivileged one -EPERM;
 *  - an error comes with a one-line message (no control characters) that
 *    fits the buffer, and the error answer control.c builds from it is one
 *    line of JSON that reads back to the same message;
 *  - a request's fields are what its op needs: a NUL-free domain name for
 *    explain, a record with a name and a valid uuid for register, a valid
 *    uuid for forget; op_name is the op's own name.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "vpack/protocol.h"

#define CHECK(cond) ((cond) ? (void)0 : abort())

static const char *const names[] = {"version", "status", "snapshot", "explain",
                                    "rebalance", "register", "forget"};

static void check_error(const char *err)
{
    CHECK(err[0] != '\0');
    for (const char *p = err; *p; p++)
        CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
    /* The answer control.c sends: {"ok": false, "error": err} on one line. */
    struct json_object *o = json_object_new_object();
    json_object_object_add(o, "ok", json_object_new_boolean(false));
    json_object_object_add(o, "error", json_object_new_string(err));
    const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
    CHECK(s && !strchr(s, '\n'));
    struct json_object *back = json_tokener_parse(s), *e;
    CHECK(back && json_object_object_get_ex(back, "error", &e) &&
          !strcmp(json_object_get_string(e), err));
    json_object_put(back);
    json_object_put(o);
}

static void check_request(const struct vpack_ctl_request *r)
{
    CHECK((unsigned)r->op < sizeof(names) / sizeof(names[0]));
    CHECK(r->op_name && !strcmp(r->op_name, names[r->op]));
    CHECK(json_object_is_type(r->obj, json_type_object));
    switch (r->op) {
    case VPACK_CTL_EXPLAIN:
        CHECK(r->domain != NULL);
        break;
    case VPACK_CTL_REGISTER:
        CHECK(json_object_is_type(r->record, json_type_object));
        CHECK(r->name && vpack_ctl_uuid_ok(r->uuid));
        break;
    case VPACK_CTL_FORGET:
        CHECK(vpack_ctl_uuid_ok(r->uuid));
        break;
    default:
        break;
    }
}

static bool same_request(const struct vpack_ctl_request *a, const struct vpack_ctl_request *b)
{
    return a->op == b->op && a->dry_run == b->dry_run && a->reconnect == b->reconnect &&
           !a->domain == !b->domain && (!a->domain || !strcmp(a->domain, b->domain)) &&
           !a->uuid == !b->uuid && (!a->uuid || !strcmp(a->uuid, b->uuid));
}

static void check_line(const char *line, size_t len)
{
    struct vpack_ctl_request user, root;
    char *uerr = NULL, *rerr = NULL;
    int ur = vpack_ctl_request_parse(line, len, false, 1000, &user, &uerr);
    int rr = vpack_ctl_request_parse(line, len, true, 0, &root, &rerr);
    CHECK(ur == 0 || ur == -EINVAL || ur == -EPERM || ur == -ENOMEM);
    CHECK(rr == 0 || rr == -EINVAL || rr == -ENOMEM);
    if (ur == 0) {
        check_request(&user);
        CHECK(user.op != VPACK_CTL_REGISTER && user.op != VPACK_CTL_FORGET);
        CHECK(user.op != VPACK_CTL_REBALANCE || user.dry_run);
        CHECK(rr == 0 && same_request(&user, &root));
        CHECK(uerr == NULL);
    } else {
        /* No message only when there was no memory for it. */
        CHECK(uerr != NULL || ur == -ENOMEM);
        if (uerr)
            check_error(uerr);
        CHECK(user.obj == NULL);
        if (ur == -EINVAL && rr == -EINVAL && uerr && rerr)
            CHECK(!strcmp(uerr, rerr));
    }
    if (rr == 0) {
        check_request(&root);
        CHECK(rerr == NULL);
    } else {
        CHECK(rerr != NULL || rr == -ENOMEM);
        if (rerr)
            check_error(rerr);
        CHECK(root.obj == NULL);
    }
    free(uerr);
    free(rerr);
    vpack_ctl_request_clear(&user);
    vpack_ctl_request_clear(&root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (!nl)
            break; /* control.c waits for the rest of a line */
        if (len > 0) {
            /* A heap copy of exactly the line: ASan sees any read past it. */
            char *line = malloc(len);
            if (!line)
                return 0;
            memcpy(line, p, len);
            check_line(line, len);
            free(line);
        }
        p = nl + 1;
    }
    return 0;
}
