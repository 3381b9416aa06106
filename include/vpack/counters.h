/* SPDX-License-Identifier: MIT */
/*
 * vpackd's counters, defined once. Each line of VPACK_COUNTERS below is one
 * counter, X(name, prom, help):
 *
 *   name  its field in struct vpack_counters (the agent's a->ctr) and its key
 *         in status's "counters" object;
 *   prom  its Prometheus family, always of type counter and unlabelled (a
 *         gauge is no count and has no place here); NULL: status only;
 *   help  that family's # HELP text (NULL with prom).
 *
 * Status's "counters" (vpack_counters_json()) and the metrics
 * (vpack_prom_render()) are both produced from this list, in its order: so
 * a new counter is one line here and its increment in agent/ (and its
 * words in README.md and vpackd(8)); tests/unit/test-prom.c checks that
 * every line reaches both outputs, and its golden files (tests/data/prom/)
 * take the new lines in. In the metrics the counters come last,
 * after the histograms, except vpack_libvirt_connects_total, which follows
 * vpack_libvirt_connected (lib/format/prom.c).
 *
 * Status only: plans (no family; vpack_plan_duration_seconds_count counts
 * failed plans too); pins_ok, pins_failed and rebalances, which the metrics
 * show split by label (vpack_pin_operations_total{reason,result},
 * vpack_rebalances_total{reason}) from the agent's own arrays. libvirt_calls
 * is counted by adapters/virt.c (vpack_virt_calls()); agent/views.c copies
 * it in when status or the metrics are read.
 */
#ifndef VPACK_COUNTERS_H
#define VPACK_COUNTERS_H

#include <stddef.h>
#include <stdint.h>

struct json_object;

#define VPACK_COUNTERS(X)                                                                         \
    X(samples, "vpack_samples_total", "Sampling cycles run.")                                     \
    X(plans, NULL, NULL)                                                                          \
    X(pins_ok, NULL, NULL)                                                                        \
    X(pins_failed, NULL, NULL)                                                                    \
    X(rebalances, NULL, NULL)                                                                     \
    X(hotplug_events, "vpack_hotplug_events_total", "CPU online and offline events seen.")       \
    X(cgroup_repairs, "vpack_cgroup_repairs_total",                                               \
      "cpuset cgroups repaired after a CPU came back online.")                                    \
    X(cgroup_stale, "vpack_cgroup_stale_total",                                                   \
      "cgroup v2 guest groups found without an online CPU they should have "                      \
      "(vpack does not widen a v2 group; the operator must).")                                    \
    X(connects, "vpack_libvirt_connects_total",                                                   \
      "Connections to libvirt the agent opened, the first one included.")                         \
    X(plans_skipped, "vpack_plans_skipped_total",                                                 \
      "Sampling cycles that planned nothing: no load moved beyond the steady band.")              \
    X(reads_skipped, "vpack_reads_skipped_total",                                                 \
      "Steady sampling cycles that read no domain: every CPU's load stayed in the band.")         \
    X(libvirt_calls, "vpack_libvirt_calls_total",                                                 \
      "Calls into libvirt that libvirtd answered (reads and pins).")                             \
    X(view_renders, "vpack_view_renders_total",                                                   \
      "Status and snapshot answers rendered for the control socket (at most one each per "       \
      "sampling interval; other requests are served that copy).")                                 \
    X(metrics_renders, "vpack_metrics_renders_total",                                             \
      "/metrics pages rendered (at most one per sampling interval; other scrapes are served "     \
      "that copy).")

/* One uint64_t per line of VPACK_COUNTERS, by its name. */
struct vpack_counters {
#define VPACK_COUNTER_FIELD(name, prom, help) uint64_t name;
    VPACK_COUNTERS(VPACK_COUNTER_FIELD)
#undef VPACK_COUNTER_FIELD
};

/* VPACK_COUNTER_<name>: a line's index in vpack_counter_defs[]. */
enum vpack_counter {
#define VPACK_COUNTER_INDEX(name, prom, help) VPACK_COUNTER_##name,
    VPACK_COUNTERS(VPACK_COUNTER_INDEX)
#undef VPACK_COUNTER_INDEX
    VPACK_NCOUNTERS
};

/* A line of VPACK_COUNTERS as data; the strings are static. */
struct vpack_counter_def {
    const char *name;  /* status key */
    const char *prom;  /* Prometheus family; NULL: status only */
    const char *help;
    size_t offset;     /* of its field in struct vpack_counters */
};

/* The lines of VPACK_COUNTERS, in its order. */
extern const struct vpack_counter_def vpack_counter_defs[VPACK_NCOUNTERS];

/* The value of counter i in c. */
uint64_t vpack_counters_get(const struct vpack_counters *c, enum vpack_counter i);

/*
 * Status's "counters": {"samples": N, "plans": N, ...}, every line of
 * VPACK_COUNTERS in its order (values above INT64_MAX wrap, as json-c's
 * integers are signed). NULL when out of memory.
 */
struct json_object *vpack_counters_json(const struct vpack_counters *c);

#endif
