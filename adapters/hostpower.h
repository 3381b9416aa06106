/* SPDX-License-Identifier: MIT */
/*
 * The host's power readings, under a root directory ("/" on a live host, a
 * fixture tree in tests): the time each CPU spent in each cpuidle state
 * (root/sys/devices/system/cpu/cpuN/cpuidle/stateM/{name,time}) and the
 * energy each package used, from RAPL (root/sys/class/powercap/intel-rapl:N,
 * the top-level "package-N" zones, AMD's too; the dies of a package
 * summed). RAPL's energy_uj wraps at max_energy_range_uj: the reader keeps
 * each zone's last value and undoes the wraps, so that the energy it gives
 * only grows. The metrics endpoint (metrics.h) reads it at each scrape.
 *
 * Issue 26 added, each left out where the host lacks it: the RAPL "dram"
 * subzone of each package (intel-rapl:N:M named "dram", wraps undone the
 * same way) and the "psys" zone; package and core C-state residency from
 * the kernel's C-state perf PMUs (hostperf.h; opened only when root is the
 * live "/", since perf_event_open(2) reaches the running kernel whatever
 * the root); uncore frequency from intel_uncore_frequency
 * (root/sys/devices/system/cpu/intel_uncore_frequency); and, per source,
 * whether it could be read and why not.
 */
#ifndef VPACK_HOSTPOWER_H
#define VPACK_HOSTPOWER_H

#include <stdbool.h>
#include <stddef.h>

#include "hostperf.h"
#include "vpack/prom.h"

struct vpack_hostpower;

/* The sources of hardware readings, as vpack_hardware_source_available{source} names them. */
enum vpack_hw_source {
    VPACK_HW_CPUIDLE,      /* "cpuidle" */
    VPACK_HW_RAPL_PACKAGE, /* "rapl_package" */
    VPACK_HW_RAPL_DRAM,    /* "rapl_dram" */
    VPACK_HW_RAPL_PSYS,    /* "rapl_psys" */
    VPACK_HW_CSTATE_PKG,   /* "cstate_pkg" (the PMU cstate_pkg or cstate_die) */
    VPACK_HW_CSTATE_CORE,  /* "cstate_core" */
    VPACK_HW_UNCORE,       /* "uncore_frequency" */
    VPACK_HW_N
};

/*
 * A reader of root's power readings; the C-state counters are opened here
 * when root is the live "/". Returns 0 or -ENOMEM.
 */
int vpack_hostpower_new(const char *root, struct vpack_hostpower **out);
/* The same with the C-state counters opened through ops (tests), or not at all (NULL). */
int vpack_hostpower_new_ops(const char *root, const struct vpack_perf_ops *ops,
                            struct vpack_hostpower **out);
/* NULL is fine. */
void vpack_hostpower_free(struct vpack_hostpower *hp);

#define VPACK_CPUIDLE_NAME_MAX 32

/* One reading. Clear it with vpack_hostpower_reading_clear(). */
struct vpack_hostpower_reading {
    struct vpack_prom_idle_state *idle; /* their names point into names[] */
    size_t nidle;
    struct vpack_prom_energy *energy;   /* none: no RAPL package zone could be read */
    size_t nenergy;
    char (*names)[VPACK_CPUIDLE_NAME_MAX];
    size_t cap;
    /* Issue 26 (added; the fields above keep their names and meaning): */
    struct vpack_prom_energy *dram;           /* RAPL "dram" subzones, per package */
    size_t ndram;
    bool has_psys;                            /* the RAPL "psys" zone was read */
    double psys_joules;
    struct vpack_prom_cstate *pkg_cstate;     /* per package and die, TSC cycles */
    size_t npkg_cstate;
    struct vpack_prom_cstate *core_cstate;    /* per package, summed over cores, TSC cycles */
    size_t ncore_cstate;
    double tsc_hz;                            /* the kernel's TSC rate; 0: not known */
    struct vpack_prom_uncore *uncore;         /* uncore frequency domains, in Hz */
    size_t nuncore;
    struct vpack_prom_available available[VPACK_HW_N]; /* in enum vpack_hw_source's order */
    size_t navailable;
};

/*
 * Reads the cpuidle states and the package energy into *out (zeroed first).
 * Returns 0, or -errno when root's CPU directory cannot be opened (out
 * still holds the energy). A CPU without cpuidle (offline, no driver), a
 * state or zone that cannot be read and a host without RAPL are left out,
 * not errors; so is what does not fit in memory.
 */
int vpack_hostpower_read(struct vpack_hostpower *hp, struct vpack_hostpower_reading *out);
void vpack_hostpower_reading_clear(struct vpack_hostpower_reading *r);

/* Why source c gave nothing at the last reading; NULL when it did. */
const char *vpack_hostpower_why(const struct vpack_hostpower *hp, enum vpack_hw_source c);

/*
 * One line for the log after a reading: "hardware counters: available: A,
 * B; not available: C: why; D: why".
 */
void vpack_hostpower_summary(const struct vpack_hostpower *hp, char *buf, size_t size);

/* The reading as the renderer takes it (borrowing r's arrays). */
void vpack_hostpower_prom_host(const struct vpack_hostpower_reading *r,
                               struct vpack_prom_host *out);

#endif
