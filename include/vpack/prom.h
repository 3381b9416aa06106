/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus text exposition (format 0.0.4) of vpackd's metrics. A pure
 * renderer: the agent's metrics (struct vpack_prom_metrics, filled by
 * agent/views.c) and the host readings below go in, the text comes out; no
 * file, socket or clock is touched. adapters/hostpower.c reads the host,
 * adapters/metrics.c serves the text. A new counter is one line in
 * vpack/counters.h, nothing here. Any other metric (a gauge, a labelled
 * family) is a field here, a line in vpack_prom_render() and a line where
 * the agent fills it.
 */
#ifndef VPACK_PROM_H
#define VPACK_PROM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vpack/counters.h"

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

/*
 * Time in one C-state from the kernel's C-state perf PMUs
 * (arch/x86/events/intel/cstate.c): per die for a package state (PMU
 * cstate_pkg, or cstate_die on packages of several dies), per package
 * summed over its cores for a core state (PMU cstate_core). The counters
 * count at the TSC's rate (Intel SDM vol. 4, MSR_PKG_C6_RESIDENCY and
 * kin: "count at the same frequency as the TSC").
 */
struct vpack_prom_cstate {
    unsigned package;
    unsigned die;       /* package states only */
    char state[8];      /* "C6", from the event name "c6-residency" */
    double value;       /* seconds when vpack_prom_host.tsc_hz > 0, else TSC cycles */
};

/* One uncore frequency domain (intel_uncore_frequency sysfs), in Hz; < 0: not read. */
struct vpack_prom_uncore {
    unsigned package;
    int die;            /* package_PP_die_DD directories; -1 in uncoreNN ones without die_id */
    int domain, cluster; /* uncoreNN directories (TPMI); -1 in package_PP_die_DD ones */
    double current, min, max, initial_min, initial_max;
};

/* Whether a source of hardware readings could be read on this host. */
struct vpack_prom_available {
    const char *source; /* static: "rapl_package", "rapl_dram", "cstate_pkg", ... */
    bool available;
};

/*
 * vpackd's own process, as the Prometheus client libraries export every
 * process (their process collector: process_cpu_seconds_total and kin).
 * A value below 0 is not known, and its family is left out.
 */
struct vpack_prom_process {
    double cpu_seconds;         /* user + system CPU time */
    double resident_bytes;
    double virtual_bytes;
    double open_fds;
    double max_fds;             /* the soft limit on open files */
    double start_time_seconds;  /* since the Unix epoch */
};

/*
 * What the agent does not know: read from /sys by the caller. Fields after
 * nenergy came with issue 26; none of them: their families are left out.
 */
struct vpack_prom_host {
    const struct vpack_prom_idle_state *idle;
    size_t nidle;
    const struct vpack_prom_energy *energy; /* none: no energy family at all */
    size_t nenergy;
    const struct vpack_prom_energy *dram;   /* RAPL "dram" subzones, per package */
    size_t ndram;
    bool has_psys;                          /* RAPL "psys" zone (the whole platform) */
    double psys_joules;
    const struct vpack_prom_cstate *pkg_cstate;
    size_t npkg_cstate;
    const struct vpack_prom_cstate *core_cstate;
    size_t ncore_cstate;
    double tsc_hz;                          /* > 0: the C-state values are seconds */
    const struct vpack_prom_uncore *uncore;
    size_t nuncore;
    const struct vpack_prom_available *available;
    size_t navailable;
    const struct vpack_prom_process *process; /* NULL: no process_* family */
};

/* Upper bounds, in seconds, of the duration histograms' buckets. */
#define VPACK_PROM_NBUCKETS 12
extern const double vpack_prom_bucket_bounds[VPACK_PROM_NBUCKETS];

struct vpack_prom_histogram {
    uint64_t buckets[VPACK_PROM_NBUCKETS]; /* cumulative: observations <= bound */
    uint64_t count;
    double sum;
};

/* Counts one observation of seconds into h. */
void vpack_prom_observe(struct vpack_prom_histogram *h, double seconds);

struct vpack_prom_package {
    int id;
    double busy;         /* smoothed busy share of its CPUs, 0 to 1 */
    double idle_seconds; /* idle time of its CPUs since boot, summed */
    bool active;         /* the plan keeps it awake */
    bool wakeup;         /* the wake-up package */
};

/* The kinds of a domain's threads, the "class" label of the thread counters. */
enum vpack_prom_thread_class { VPACK_PROM_VCPU, VPACK_PROM_EMULATOR, VPACK_PROM_IOTHREAD };

/*
 * One vCPU, the emulator (every other thread of QEMU, together) or one
 * iothread of a domain: the time its threads ran and waited on a run queue,
 * in seconds, counted over this run of the domain (agent/sample.c says how).
 */
struct vpack_prom_thread {
    enum vpack_prom_thread_class cls;
    unsigned id;          /* vCPU number, libvirt's iothread id; not shown for the emulator */
    double run_seconds;
    double wait_seconds;
    bool has_wait;        /* false: its source has no run-queue delay (an iothread's cgroup) */
};

struct vpack_prom_domain {
    char *name;
    int level;
    bool managed;
    int *packages;
    size_t npackages;
    struct vpack_prom_thread *threads; /* in any order: rendered vCPUs, emulator, iothreads */
    size_t nthreads;
    double remote_memory; /* share of memory off its packages; < 0: not known */
};

/* A counter split by one or two labels: reason, and result when not NULL. */
struct vpack_prom_count {
    const char *reason;  /* static strings: the enums' names */
    const char *result;
    uint64_t count;
};

/*
 * What the agent knows, as one typed value. Filled by the agent, freed with
 * vpack_prom_metrics_free() (which frees names and arrays; the counts'
 * strings are static).
 */
struct vpack_prom_metrics {
    /* vpack_build_info's labels; version NULL leaves it out. Static or borrowed. */
    const char *version;
    const char *commit;  /* the git commit vpackd was built from; NULL: "unknown" */
    const char *libvirt; /* libvirtd's version (virConnectGetLibVersion); NULL: "unknown" */
    bool connected;
    double demand;
    bool lifted;
    struct vpack_prom_package *packages;
    size_t npackages;
    struct vpack_prom_domain *domains;
    size_t ndomains;
    struct vpack_prom_count *rebalances; /* label: reason */
    size_t nrebalances;
    struct vpack_prom_count *pin_ops;    /* labels: reason, result */
    size_t npin_ops;
    struct vpack_prom_histogram plan_duration, cycle_duration;
    struct vpack_counters counters; /* those with a Prometheus family are rendered */
};

void vpack_prom_metrics_free(struct vpack_prom_metrics *m);

/*
 * Renders m and host (may be NULL) as Prometheus text into *out,
 * NUL-terminated, *len bytes without the NUL; *out is the caller's to free.
 * Label values are escaped, and invalid UTF-8 in them becomes U+FFFD. A
 * domain name that repeats (a table caught mid-change) is rendered once,
 * because Prometheus rejects a scrape with two series of one label set.
 * Returns 0, -EINVAL when m is NULL, or -ENOMEM.
 */
int vpack_prom_render(const struct vpack_prom_metrics *m, const struct vpack_prom_host *host,
                      char **out, size_t *len);

/*
 * How much a counter that wraps to 0 above range (RAPL energy_uj, wrapping
 * at max_energy_range_uj) grew from the reading prev to cur, assuming at
 * most one wrap in between. With cur < prev and no usable range the
 * counter is taken to have restarted from 0: the answer is cur.
 */
uint64_t vpack_prom_wrap_delta(uint64_t prev, uint64_t cur, uint64_t range);

#endif
