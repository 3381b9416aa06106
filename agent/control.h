/* SPDX-License-Identifier: MIT */
/*
 * The control sockets: one JSON object per line each way on a Unix stream
 * socket: the control socket (default /run/vpack/vpackd.sock, 0666) for
 * the requests that change nothing, and the admin socket beside it
 * (vpack_client_admin_path(): /run/vpack/vpackd-admin.sock, 0600 root, open
 * to the control group by group or ACL) which alone takes the changes.
 * Each accepts at most ACCEPTS_PER_TURN connections per loop iteration.
 * Requests carry "op":
 *
 *   status, explain {"domain"}, snapshot, version       anyone who can connect
 *   rebalance {"dry_run"}, register {"domain": RECORD},
 *   forget {"uuid", "name"}, hold-level                  root or [control] group,
 *                                                        on the admin socket
 *                                                        (a dry run: anyone)
 *
 * Answers are {"ok": true, ...} or {"ok": false, "error": "..."}. The peer's
 * credentials are the kernel's from connect(): SO_PEERCRED and
 * SO_PEERGROUPS. Root and the control group have max_clients connections,
 * everyone else another max_clients. Lines longer than [control] max_line,
 * connections beyond those, clients that complete no request line within
 * idle_timeout_ms and clients that do not read their answers are dropped;
 * the agent goes on. The socket's directory must be trusted (safefs.h).
 */
#ifndef VPACK_CONTROL_H
#define VPACK_CONTROL_H

#include <uv.h>

#include "agent.h"
#include "vpack/config.h"

struct vpack_control;

int vpack_control_start(uv_loop_t *loop, const struct vpack_config *cfg, struct vpack_agent *agent,
                        struct vpack_control **out, char **errmsg);
/* Closes the socket and every client; memory is freed as the handles close. */
void vpack_control_stop(struct vpack_control *c);

#endif
