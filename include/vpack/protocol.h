/* SPDX-License-Identifier: MIT */
/*
 * The control protocol's requests: one JSON object per line on vpackd's
 * socket (agent/control.c does the socket). This is the pure part: a line
 * and the peer's privilege in, a checked request or the answer's error text
 * out. Ops:
 *
 *   version, status, snapshot              anyone who can connect
 *   explain {"domain": NAME}               anyone
 *   rebalance {"dry_run": BOOL}            root or [control] group; anyone when dry_run
 *   register {"domain": RECORD, "event"}   root or [control] group
 *   forget {"uuid"}                        root or [control] group
 *   hold-level {"level": L, "seconds": S}  root: every domain at level L at
 *                                          most for S seconds (0: drop the hold)
 *
 * The ops that change the agent (a real rebalance, register, forget,
 * hold-level) are taken on the admin socket only (issue 27: root and the
 * control group reach it, whatever others do to the read-only socket).
 *
 * The permission check comes before the arguments are checked: a peer that
 * may not write learns nothing about its arguments.
 */
#ifndef VPACK_PROTOCOL_H
#define VPACK_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

enum vpack_ctl_op {
    VPACK_CTL_VERSION,
    VPACK_CTL_STATUS,
    VPACK_CTL_SNAPSHOT,
    VPACK_CTL_EXPLAIN,
    VPACK_CTL_REBALANCE,
    VPACK_CTL_REGISTER,
    VPACK_CTL_FORGET,
    VPACK_CTL_HOLD_LEVEL,
    VPACK_CTL_NOPS /* the number of ops, not one */
};

struct vpack_ctl_request {
    enum vpack_ctl_op op;
    const char *op_name;           /* "version", ... (static) */
    bool dry_run;                  /* rebalance: plan only */
    const char *domain;            /* explain: the domain's name */
    struct json_object *record;    /* register: the hook's domain record */
    const char *name;              /* register: the record's "name" */
    const char *uuid;              /* register: the record's "uuid"; forget: the request's */
    bool reconnect;                /* register: "event" is "reconnect" */
    int hold_level;                /* hold-level: the most any domain's level may be, 0 to 2 */
    double hold_seconds;           /* hold-level: the lease, 0 (drop) to VPACK_HOLD_MAX_S */
    struct json_object *obj;       /* the whole request; the pointers above point into it */
};

/*
 * Reads one request line of len bytes (without its '\n'; no NUL needed) from
 * a peer that is privileged (root or the control group) or not, whose uid
 * is uid: register and forget need uid 0 (the hook runs as root), a real
 * rebalance a privileged peer; uid is named in a refusal. Returns 0 with *req filled (release it with
 * vpack_ctl_request_clear()), or -EINVAL (not a request, unknown op, bad
 * arguments), -EPERM (the op changes something and the peer may not) or
 * -ENOMEM, with the text of the answer's "error" in *errmsg (one line; see
 * vpack/errmsg.h: the caller frees it, NULL when out of memory). Strings
 * with a NUL character in them are not names, uuids or ops.
 */
int vpack_ctl_request_parse(const char *line, size_t len, bool privileged, unsigned uid,
                            struct vpack_ctl_request *req, char **errmsg);

/* Who sent a request, and on which socket. */
struct vpack_ctl_peer {
    bool privileged;          /* root or the control group */
    unsigned uid;
    /* NULL: the request came on the admin socket. Else it came on the
     * read-only socket, and this is the admin socket's path, which a
     * refusal of a change names. */
    const char *admin_socket;
};

/*
 * vpack_ctl_request_parse() for peer: on the read-only socket every op that
 * changes the agent is refused (-EPERM, "permission denied: ... the admin
 * socket PATH ...") before the peer's own permission is looked at.
 * vpack_ctl_request_parse() is this on the admin socket.
 */
int vpack_ctl_request_parse_peer(const char *line, size_t len, const struct vpack_ctl_peer *peer,
                                 struct vpack_ctl_request *req, char **errmsg);
void vpack_ctl_request_clear(struct vpack_ctl_request *req);

/*
 * The longest lease of a hold: a `vpackctl measure` that is killed leaves
 * the host at the held level for no longer than its lease, which it renews
 * each round; an hour bounds what a hand-made request can do.
 */
#define VPACK_HOLD_MAX_S 3600

/* True for a libvirt UUID in its 36-character text form. */
bool vpack_ctl_uuid_ok(const char *uuid);

#endif
