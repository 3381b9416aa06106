/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus text exposition (format 0.0.4) of vpackd's metrics. A pure
 * renderer: the agent's metrics object (vpack_agent_metrics_json()) and
 * the host readings below go in, the text comes out; no file, socket or
 * clock is touched. agent/metrics.c reads the host and serves the text.
 */
#ifndef VPACK_PROM_H
#define VPACK_PROM_H

#include <stddef.h>
#include <stdint.h>

struct json_object;

#define VPACK_PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Time one CPU spent in one cpuidle state since boot. */
struct vpack_prom_idle_state {
    unsigned cpu;
    const char *name;   /* the state's sysfs "name", e.g. "C6"; borrowed */
    double seconds;
};

/* Energy one package used since an arbitrary start, counter wraps undone. */
struct vpack_prom_energy {
    unsigned package;   /* N of the RAPL zone "package-N" */
    double joules;
};

/* What the agent does not know: read from /sys by the caller. */
struct vpack_prom_host {
    const struct vpack_prom_idle_state *idle;
    size_t nidle;
    const struct vpack_prom_energy *energy; /* none: no energy family at all */
    size_t nenergy;
};

/*
 * Renders metrics (the object vpack_agent_metrics_json() documents) and
 * host (may be NULL) as Prometheus text into *out, NUL-terminated, *len
 * bytes without the NUL; *out is the caller's to free. Keys that are
 * missing or of the wrong type leave their samples out. Label values are
 * escaped, and invalid UTF-8 in them becomes U+FFFD. Returns 0, -EINVAL
 * when metrics is not an object, or -ENOMEM.
 */
int vpack_prom_render(struct json_object *metrics, const struct vpack_prom_host *host, char **out,
                      size_t *len);

/*
 * How much a counter that wraps to 0 above range (RAPL energy_uj, wrapping
 * at max_energy_range_uj) grew from the reading prev to cur, assuming at
 * most one wrap in between. With cur < prev and no usable range the
 * counter is taken to have restarted from 0: the answer is cur.
 */
uint64_t vpack_prom_wrap_delta(uint64_t prev, uint64_t cur, uint64_t range);

#endif
