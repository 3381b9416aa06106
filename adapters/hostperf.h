/* SPDX-License-Identifier: MIT */
/*
 * Package and core C-state residency from the kernel's C-state perf PMUs
 * (arch/x86/events/intel/cstate.c), without MSRs: under a root directory
 * ("/" live, a fixture tree in tests) the PMUs cstate_pkg (cstate_die on
 * packages of several dies) and cstate_core are found in
 * root/sys/bus/event_source/devices/PMU/{type,cpumask,format/TERM,events/NAME}
 * (Documentation/ABI/testing/sysfs-bus-event_source-devices-{events,format}),
 * one counter is opened per event and per CPU of the PMU's cpumask (the
 * kernel's designated reader: one CPU per die, or per core), and each CPU's
 * package (and die) comes from root/sys/devices/system/cpu/cpuN/topology/
 * {physical_package_id,die_id}. The counters count TSC cycles (Intel SDM
 * vol. 4: "count at the same frequency as the TSC"); the TSC's rate is the
 * kernel's own (perf's mmap page of a counter, cap_user_time: time_mult and
 * time_shift convert TSC cycles to ns), or not known.
 *
 * The perf calls go through struct vpack_perf_ops, so that a test can
 * stand in for the kernel; vpack_perf_ops_live is perf_event_open(2).
 */
#ifndef VPACK_HOSTPERF_H
#define VPACK_HOSTPERF_H

#include <stddef.h>
#include <stdint.h>

#include "vpack/prom.h"

struct vpack_perf_ops {
    /* A counting event of PMU type and config on cpu, system-wide: a fd, or -errno. */
    int (*open)(void *ud, uint32_t type, uint64_t config, int cpu);
    int (*read)(void *ud, int fd, uint64_t *count); /* 0 or -errno */
    double (*tsc_hz)(void *ud, int fd);             /* the TSC's rate; 0: not known */
    void (*close)(void *ud, int fd);
    void *ud;
};

extern const struct vpack_perf_ops vpack_perf_ops_live;

struct vpack_hostperf;

/*
 * Finds and opens root's C-state counters with ops (NULL: live). Never
 * fails for want of a PMU or of permission: those are reported by
 * vpack_hostperf_why(). Returns 0 or -ENOMEM.
 */
int vpack_hostperf_open(const char *root, const struct vpack_perf_ops *ops,
                        struct vpack_hostperf **out);
/* Closes the counters. NULL is fine. */
void vpack_hostperf_free(struct vpack_hostperf *p);

enum vpack_hostperf_kind { VPACK_HOSTPERF_PKG, VPACK_HOSTPERF_CORE };

/*
 * Why kind has no counter: NULL when it has at least one, else a static
 * sentence ("no cstate_pkg PMU under ROOT/sys/bus/event_source/devices",
 * "permission denied (...)").
 */
const char *vpack_hostperf_why(const struct vpack_hostperf *p, enum vpack_hostperf_kind kind);
/* Counters open of kind (events x CPUs). */
size_t vpack_hostperf_count(const struct vpack_hostperf *p, enum vpack_hostperf_kind kind);

/* The TSC's rate from the kernel, 0 when not known (then values are TSC cycles). */
double vpack_hostperf_tsc_hz(const struct vpack_hostperf *p);

/*
 * Reads every counter of kind into *out (n entries, the caller frees):
 * package states per (package, die, state), core states per (package,
 * state) summed over the package's cores, in TSC cycles, sorted. A counter
 * that cannot be read is left out (its package's sum then too). Returns
 * 0 or -ENOMEM.
 */
int vpack_hostperf_read(struct vpack_hostperf *p, enum vpack_hostperf_kind kind,
                        struct vpack_prom_cstate **out, size_t *n);

/*
 * The TSC's rate from the mmap page fields of a perf counter: time_mult
 * and time_shift turn cycles into ns (ns = cycles * mult >> shift), so the
 * rate is 1e9 * 2^shift / mult. 0 when mult is 0.
 */
double vpack_perf_tsc_hz(uint32_t time_mult, uint16_t time_shift);

#endif
