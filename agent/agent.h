/* SPDX-License-Identifier: MIT */
/*
 * The agent: the observe -> plan -> act pipeline of vpackd on one libuv
 * loop. It owns the domain table, the policy state and the libvirt
 * adapter; the control socket and the metrics endpoint read it through the
 * functions below.
 */
#ifndef VPACK_AGENT_H
#define VPACK_AGENT_H

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>
#include <uv.h>

#include "vpack/config.h"
#include "vpack/prom.h"
#include "vpack/policy.h"
#include "vpack/protocol.h"

struct vpack_agent;

/*
 * Creates the agent on loop with a copy of cfg: loads the topology, starts
 * the libvirt connection, the sampling timer and the hotplug watcher.
 * Returns 0, or a negative errno with *errmsg (caller frees).
 */
int vpack_agent_start(uv_loop_t *loop, const struct vpack_config *cfg, struct vpack_agent **out,
                      char **errmsg);

/*
 * Applies a new configuration (SIGHUP). Paths and the libvirt URI take
 * effect at the next start; policy knobs, interval, topology, reserved
 * CPUs and the power policy rules now (every domain is read again at the
 * next cycle to match the new rules). Returns 0 or -errno with *errmsg.
 */
int vpack_agent_reload(struct vpack_agent *a, const struct vpack_config *cfg, char **errmsg);

/*
 * Stops: unless keep_placement, gives every thread vpack restricted its
 * guest-requested or full mask back; then closes the agent's handles and
 * frees it once they are closed. The loop then runs out.
 */
void vpack_agent_stop(struct vpack_agent *a);

/*
 * Runs one observe/plan/act cycle now; dry_run plans without pinning.
 * Returns 0 with the moves (free with vpack_moves_free()), or -errno with
 * *errmsg (caller frees): -ENOTCONN when libvirt is not connected.
 */
struct vpack_move {
    char *domain;
    char *threads;   /* "vcpu 0", "vcpus 0-3", "emulator", "iothread 1" */
    char *from, *to; /* CPU sets */
    char *reason;
};
int vpack_agent_rebalance(struct vpack_agent *a, bool dry_run, struct vpack_move **moves,
                          unsigned *nmoves, char **errmsg);
void vpack_moves_free(struct vpack_move *moves, unsigned n);
/* The moves as a JSON array of {"domain", "threads", "from", "to", "reason"};
 * NULL when out of memory. Caller puts. */
struct json_object *vpack_moves_json(const struct vpack_move *moves, unsigned n);

/*
 * The hook's hand-over (control socket ops "register" and "forget"): req is
 * the checked request (lib/format/protocol.c). register keeps the domain record (what the
 * guest asked for, as the hook saw it at start) under state_dir/domains/ so
 * that a restarted agent still knows it; it is the record of transient
 * domains. Returns 0 or -errno with *errmsg (caller frees).
 */
int vpack_agent_register(struct vpack_agent *a, const struct vpack_ctl_request *req, char **errmsg);
int vpack_agent_forget(struct vpack_agent *a, const struct vpack_ctl_request *req, char **errmsg);

/*
 * The control op hold-level (issue 26): from now, every domain is planned at
 * level at most level (its own level stays as it is), until seconds have
 * passed or the next hold-level; seconds 0 drops the hold at once. The next
 * interval plans (a->replan), and the log says each change.
 */
void vpack_agent_hold(struct vpack_agent *a, int level, double seconds);

/*
 * Status as JSON (the control socket's "status" answer): 0 with *out (caller
 * puts), or -ENOMEM.
 */
int vpack_agent_status_json(struct vpack_agent *a, struct json_object **out);

/* The figures of vpackd's one-line systemd STATUS=: packages in the topology,
 * those active (all until the first plan), and the domains vpack places. */
struct vpack_agent_summary {
    unsigned packages, active, domains;
};
void vpack_agent_summary(const struct vpack_agent *a, struct vpack_agent_summary *out);
/* One domain explained: 0 with *out (caller puts), -ENOENT when the agent
 * does not know it, or -ENOMEM. */
int vpack_agent_explain_json(struct vpack_agent *a, const char *name, struct json_object **out);
/*
 * Everything the metrics endpoint exports, as lib/format/prom.c's typed metrics
 * (a vpack_metrics_collect_fn: agent is the struct vpack_agent). NULL when
 * out of memory; free with vpack_prom_metrics_free().
 */
struct vpack_prom_metrics *vpack_agent_metrics(void *agent);

/*
 * The count of changes to what status, snapshot and the metrics show (agent
 * is the struct vpack_agent): one per sampling interval, one per domain
 * event, libvirt connection, hotplug, reload and change through the control
 * socket. A view rendered at one epoch is served as it is until the next
 * (agent/control.c, adapters/metrics.c): one render per interval however
 * many ask (issue 27, C).
 */
uint64_t vpack_agent_epoch(void *agent);
/* Something status shows changed outside the agent's own events (a control op). */
void vpack_agent_changed(struct vpack_agent *a);

/* The last snapshot the policy saw, for bug reports: 0 with *out (caller
 * puts; NULL before the first), or -ENOMEM. */
int vpack_agent_snapshot_json(struct vpack_agent *a, struct json_object **out);

#endif
