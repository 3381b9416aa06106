/* SPDX-License-Identifier: MIT */
/*
 * vpackctl doctor's checks: what on a host can cancel or hide the saving of
 * packing (issue 28, item 5). Pure: the checks run over a struct of facts
 * that adapters/doctor.c reads from a root directory ("/" live, a fixture
 * tree in tests), so that each check is tested on facts and on trees.
 *
 * Each check gives one finding or more, each with a severity:
 *   ok       the check passed (what it saw, in what);
 *   info     worth knowing, changes nothing (libvirt's partition, ...);
 *   warning  hides or may reduce the saving (no RAPL for measure, IRQs
 *            routed to a package vpack may park, no hook, ...);
 *   cancels  keeps parked packages out of their deep idle states, so that
 *            packing saves nothing (no cpuidle driver, the deepest C-state
 *            disabled or below a PM QoS latency limit, a latency tuned
 *            profile).
 * `vpackctl doctor` exits 1 when at least one finding cancels.
 */
#ifndef VPACK_DOCTOR_H
#define VPACK_DOCTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vpack/cpuset.h"
#include "vpack/measure.h"

/* One cpuidle state of one CPU (cpuN/cpuidle/stateM/{name,latency,disable}). */
struct vpack_doctor_cstate {
    char name[32];
    unsigned latency_us; /* its exit latency */
    bool disabled;       /* disable = 1 */
};

/* A CPU's pm_qos_resume_latency_us, as the kernel prints it. */
enum vpack_doctor_qos {
    VPACK_QOS_UNKNOWN,       /* no file (old kernel, fixture without it) */
    VPACK_QOS_NO_CONSTRAINT, /* "0": no limit */
    VPACK_QOS_ZERO,          /* "n/a": no latency tolerated, no C-state at all */
    VPACK_QOS_LIMIT,         /* N: states with an exit latency above N us are not used */
};

struct vpack_doctor_cpu {
    int id;
    int package;                        /* physical_package_id; -1 not known */
    struct vpack_doctor_cstate *states; /* NULL: no cpuidle directory */
    size_t nstates;
    enum vpack_doctor_qos qos;
    unsigned qos_us;                    /* VPACK_QOS_LIMIT's N */
};

/* One IRQ's CPUs (effective_affinity_list, else smp_affinity_list). */
struct vpack_doctor_irq {
    int irq;
    vpack_cpuset cpus;
    char name[48]; /* its first action's name (the directory under /proc/irq/N), or "" */
};

/* A process that holds /dev/cpu_dma_latency open. */
struct vpack_doctor_holder {
    int pid;
    char comm[32];
};

/* The hook's state: /etc/libvirt/hooks/qemu.d/vpack. */
enum vpack_doctor_hook { VPACK_HOOK_MISSING, VPACK_HOOK_NOT_EXECUTABLE, VPACK_HOOK_OK };

/* Everything the checks look at. Zero it, then fill what is known. */
struct vpack_doctor_facts {
    /* cpuidle: current_driver ("" no file or "none"), current_governor(_ro). */
    char driver[64];
    char governor[64];
    struct vpack_doctor_cpu *cpus; /* the online CPUs, by id */
    size_t ncpus;
    /* /dev/cpu_dma_latency: who holds it open, and the limit if it could be read. */
    struct vpack_doctor_holder *holders;
    size_t nholders;
    size_t procs_unreadable; /* processes whose fd/ could not be read (not root) */
    bool dma_limit_known;
    int32_t dma_limit_us;
    /* tuned: /etc/tuned/active_profile ("" none), and whether tuned runs. */
    char tuned_profile[64];
    bool tuned_running;
    bool irqbalance_running;
    struct vpack_doctor_irq *irqs;
    size_t nirqs;
    /* What vpackctl measure can read (adapters/hostpower.h); NULL why: available. */
    bool power_checked;
    bool rapl_package, cstate_pkg, cpuidle_residency;
    char rapl_why[128], cstate_why[128];
    /* cgroups: "v1", "v2", "hybrid (cpuset on v1)", "none"; libvirt's partition ("" none found). */
    char cgroup_mode[32];
    char partition[32];
    /* libvirt: its version as libvirt encodes it (major * 1000000 + minor * 1000 +
     * micro), 0 not known (libvirt_why says why); libvirt_daemon: the daemon's. */
    bool libvirt_checked;
    unsigned long libvirt_version;
    bool libvirt_daemon;
    char libvirt_why[128];
    enum vpack_doctor_hook hook;
    char hook_path[128];
    /* The CPU (/proc/cpuinfo; cpu_known false: not read) and vpackd.conf's
     * [policy] pc6_scope (false: package, also the default when the file or
     * the key is not there); conf_note says which ("/etc/vpack/vpackd.conf",
     * "no /etc/vpack/vpackd.conf: the default", or why it did not parse). */
    bool cpu_known;
    struct vpack_cpu_model cpu;
    bool pc6_system_conf;
    char conf_note[160];
};

void vpack_doctor_facts_clear(struct vpack_doctor_facts *f);

enum vpack_doctor_severity {
    VPACK_DOCTOR_OK,
    VPACK_DOCTOR_INFO,
    VPACK_DOCTOR_WARNING,
    VPACK_DOCTOR_CANCELS,
};

/* "ok", "info", "warning", "cancels". */
const char *vpack_doctor_severity_name(enum vpack_doctor_severity s);

struct vpack_doctor_finding {
    const char *check; /* static: "cpuidle-driver", "c-states", ... */
    enum vpack_doctor_severity severity;
    char what[512];    /* what was found */
    char why[512];     /* why it matters ("" for ok) */
    char fix[512];     /* how to fix it ("" for ok) */
};

/*
 * Runs every check over f: *out holds the findings in a fixed order (the
 * caller frees it), at least one per check. Returns 0 or -ENOMEM.
 */
int vpack_doctor_check(const struct vpack_doctor_facts *f, struct vpack_doctor_finding **out,
                       size_t *n);

/* The highest severity among the findings (VPACK_DOCTOR_OK for none). */
enum vpack_doctor_severity vpack_doctor_worst(const struct vpack_doctor_finding *v, size_t n);

/*
 * A CPU's pm_qos_resume_latency_us text: "0" (no constraint), "n/a"
 * (none tolerated) or a number of us. Returns 0, or -EINVAL.
 */
int vpack_doctor_parse_qos(const char *text, enum vpack_doctor_qos *qos, unsigned *us);

/*
 * The package that stays awake (the host's own work runs there): the
 * package of the lowest online CPU; -1 when no package is known.
 */
int vpack_doctor_home_package(const struct vpack_doctor_facts *f);

#endif
