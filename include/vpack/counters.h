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

#include <stdbool.h>
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
      "that copy).")                                                                              \
    X(domains_unread, "vpack_domains_unread_total",                                               \
      "Domains that a read due every tenth interval left unread thread by thread: their "        \
      "process's CPU time ran at the rate of their last read.")

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

/*
 * The time a domain's thread ran and waited on a run queue, as counters
 * that only grow (vpack_vcpu_run_seconds_total, vpack_vcpu_wait_seconds_total):
 * one per vCPU, one for the emulator (every other thread of QEMU, threads
 * that come and go), one per iothread, counted over one run of the domain.
 * The kernel's own figures (a thread's schedstat, libvirt's vcpu.N.time)
 * run from the thread's start and end with it, so a sum over a set of
 * threads can shrink; the counter instead takes from each reading what it
 * grew since the last reading of the same thread, and a thread new to the
 * counter whole (its time since it started). A reading that cannot be
 * subtracted from the last (the threads sorted again from scratch, another
 * source) follows vpack_thread_time_rebase(): it adds nothing and is where
 * the next one starts from; the time in between is lost, never counted twice.
 */
struct vpack_thread_time {
    uint64_t run_ns, wait_ns;
    bool counted;     /* some reading was counted */
    bool wait_known;  /* ... from a source that has run-queue delay */
    bool rebase;      /* the readings of threads not seen yet add nothing; the caller clears it
                         once every thread has been read */
};

/* The last reading of one thread (or of the sum a source gives); seen false: none. */
struct vpack_thread_reading {
    bool seen;
    uint64_t run_ns, wait_ns;
};

/*
 * Counts a reading of a thread whose last reading is *last: what it grew
 * (a figure that went back counts 0), or, with no last reading, the
 * reading whole unless t->rebase. *last becomes this reading. has_wait: the
 * source measures run-queue delay (wait_ns is 0 otherwise).
 */
void vpack_thread_time_take(struct vpack_thread_time *t, struct vpack_thread_reading *last,
                            uint64_t run_ns, uint64_t wait_ns, bool has_wait);

/* Counts run_ns and wait_ns of growth measured by the caller. */
void vpack_thread_time_add(struct vpack_thread_time *t, uint64_t run_ns, uint64_t wait_ns,
                           bool has_wait);

/* The threads' last readings are lost: unseen threads start afresh, adding nothing. */
void vpack_thread_time_rebase(struct vpack_thread_time *t);

/* A new run of the domain: everything from 0. */
void vpack_thread_time_reset(struct vpack_thread_time *t);

#endif
