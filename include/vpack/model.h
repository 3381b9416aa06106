/* SPDX-License-Identifier: MIT */
/*
 * The host model: a fluid, deterministic model of a host running the real
 * policy, for `vpackctl simulate` and the benchmarks. Pure: no file, clock or
 * libvirt; a trace interval in, figures out.
 *
 * Each interval (vpack_model_step()):
 *
 *  1. The policy sees what the agent would have seen: the trace's domains,
 *     levels (or the model's level for all), pins, cpusets and memory, with
 *     each thread's util and delay and each CPU's busy share as the model
 *     computed them for the intervals before, smoothed as the agent smooths
 *     them (a moving average that follows a rise with weight smoothing_rise
 *     and a fall with smoothing_fall: struct vpack_model_host, by default the
 *     agent's own defaults, VPACK_DEFAULT_SMOOTHING_* of vpack/config.h), and
 *     the last interval alone, unsmoothed, in each CPU's cpu_busy_now and
 *     each thread's util_now and delay_now (the first interval: util =
 *     util_now = demand, delay 0, every usable CPU at the mean demand, in
 *     cpu_busy and cpu_busy_now). It runs the real
 *     vpack_plan_compute() with one policy state kept across intervals.
 *  2. The plan's masks are applied. A thread whose mask differs from the one
 *     it had is one pin operation (a thread starts with its free mask: its
 *     pin, else its domain's bound); a plan domain marked moved is one move.
 *     Each pin operation costs the host pin_cpu_ms of CPU time outside the
 *     guests (libvirtd's work for the call, the moved thread's migration:
 *     VPACK_MODEL_PIN_CPU_MS, measured), charged in the interval of the move
 *     as foreign load spread evenly over every usable CPU. That is an
 *     assumption: libvirtd is not confined, and its worker threads run
 *     wherever the scheduler finds room. Its effect: a parked package is
 *     charged its CPUs' share of every move (its whole-idle share is a
 *     little pessimistic), an active one less than it may really carry when
 *     libvirtd runs beside the vpackd that woke it.
 *  3. Sharing. Foreign load (vpack_model_add_foreign(): work from outside
 *     the guests, such as a one-interval burst of another process, and the
 *     pin charge of step 2) is put on its CPUs first. A thread's demand (the
 *     trace's util, at most one CPU) is offered to the CPUs of its mask.
 *     Threads with the same mask form a group; groups are placed narrowest
 *     mask first, each water-filled onto its CPUs (the least loaded CPUs are
 *     raised first, as the scheduler's load balancing would), so wider masks
 *     take what narrower ones and foreign load left. Foreign load is served
 *     beside the guests' in proportion (step 4), occupies its CPUs (steps 5
 *     to 7: busy shares, delay, idle, energy) and is never demand or served
 *     work.
 *  4. Capacity. The topology does not name SMT siblings, so within a package
 *     the i-th usable CPU (ascending) belongs to core i mod ncores. A core
 *     serves at most one CPU's worth per CPU and 1 + smt_gain * (k - 1) in
 *     all when k of its CPUs have work (smt_gain from the power file: what a
 *     second hardware thread adds). Over capacity, each CPU's work is served
 *     in proportion; a group's threads share its served work in proportion
 *     to their demand.
 *  5. Delay (a queueing approximation). A thread waits for the work it was
 *     not served, plus for its served work s the M/M/c waiting time of
 *     Sakasegawa's approximation (Sakasegawa, "An approximation formula
 *     Lq ~= alpha * rho^beta / (1 - rho)", Ann. Inst. Statist. Math. 29,
 *     1977): s * rho^(sqrt(2(c+1)) - 1) / (c (1 - rho)), with c the CPUs of
 *     its mask and rho their occupancy by other threads (at most 0.99); the
 *     sum is at most 1 - s (run plus wait fit the interval).
 *  6. Busy and idle. A CPU is occupied min(1, offered load) of the time; a
 *     core is busy 1 - prod(1 - occupancy of its CPUs) (independent
 *     siblings); a package is whole-idle prod(1 - busy of its cores) of the
 *     time (independent cores: exact when no core has work, pessimistic for
 *     correlated idle).
 *  7. Power, per package: awake_w while not whole-idle, plus core_w per
 *     busy core; while whole-idle, deep_w for the share of the interval the
 *     deep package C-state can be held and idle_w (every core in core C6,
 *     the uncore up) for the rest. Where the deep state can be held is the
 *     platform's pc6_scope: per package, the package's whole-idle share;
 *     system-wide (Intel Xeon: package C6 is entered only when every CPU of
 *     every socket is in core C6), the share of the interval every package
 *     is whole-idle at once, prod(whole-idle share) over the packages
 *     (independent packages, as for cores); none, never. energy = power *
 *     interval. The totals also keep the energy under each scope, so one run
 *     shows what the platform's scope does to the result.
 *  8. Costs (each figure's source is in data/power-model.ini).
 *     - SMT: a CPU whose core's other CPUs are occupied o of the time (at
 *       most 1) runs at 1 - o (1 - smt_gain) / 2 of a CPU's speed (two busy
 *       siblings share 1 + smt_gain, step 4's capacity), so its work
 *       occupies it load / speed (at most 1): more delay (step 5 counts
 *       the stretch as occupancy beyond the thread's work, so the delay
 *       figure holds the slowdown, which a real host's schedstat would
 *       count as running) and, over 1, less served work. The policy sees
 *       the stretched occupancy as CPU busy, as the agent would. Solved
 *       by fixed-point iteration; smt_slow_s keeps the time run beyond the
 *       work done.
 *     - Moves: beside the pin charge of step 2, a thread whose mask changed
 *       loses refill_ms of its served work refilling its caches (at most
 *       what it was served), so served falls below demand.
 *     - Deep state: a package with work alternates busy periods of mean
 *       busy_period_ms with whole-idle gaps, taken as exponential
 *       (independent wake-ups): wake-ups per second r = (1 - idle) / busy
 *       period, mean gap g = idle / r. Only gaps longer than the target
 *       residency T reach the deep state: the share of whole-idle time in
 *       them is (1 + T/g) e^(-T/g). Each exit from it (r e^(-T/g) a second)
 *       costs the exit latency L, awake rather than deep, and as delay of
 *       the work on the package, spread over it in proportion. System-wide
 *       scope: the same over the share every package is whole-idle, with r
 *       the sum of the packages' rates, each package's exits in proportion
 *       to its rate.
 *     - Memory: under remote_memory = holds, a package holding (on one of
 *       its NUMA nodes) memory of a domain with demand in the interval is
 *       not in the deep state (its memory controller serves the domain
 *       wherever it runs); system-wide, no package is. Only traces with
 *       memory homes (a recording's "memory", or simulate's --memory-homes)
 *       have them. Its latency costs the guest: a thread's work served on
 *       CPUs of packages holding none of its domain's memory (by the share
 *       of the memory each package holds, its work spread over its mask's
 *       CPUs as step 4 filled them) waits remote_penalty seconds per second
 *       served there, charged as delay like a deep-state exit. Bandwidth
 *       saturation (many guests streaming across one link) is not
 *       modelled.
 *     Totals keep the energy with each assumption varied (VPACK_VAR_*).
 *  9. Saturation (vpack_model_totals' saturated_pkg_s). A package is
 *     saturated in an interval when it serves all it can: each of its cores
 *     serves 1 + smt_gain * (n - 1), n its usable CPUs (every CPU of the
 *     core has work and the core is offered at least that much). Such an
 *     interval counts whole: the fluid model has no time finer than the
 *     interval, so a package full for half of it and idle for the rest is
 *     not saturated here.
 *
 * What the model cannot see: transition energy of C-states, turbo and
 * frequency, remote memory's bandwidth, interrupts and host
 * processes outside the trace other than the foreign load it is given and its own pin operations' charge
 * (vpackd's own sampling is not charged), scheduler imperfection inside a
 * mask, bursts shorter than an interval, second-scale guest bursts the trace
 * does not carry. Nor does it see that the scheduler lets a thread that
 * wakes briefly preempt a CPU-bound one: foreign load delays the guests'
 * threads as any other occupancy does (step 5), so a burst that nearly
 * fills a CPU gives its light vCPUs a large run-queue delay (on the 2 x 1
 * core host, guests of 0.2 CPUs beside a 1.5 CPU burst: about 40% each),
 * likely more than a real host would show.
 */
#ifndef VPACK_MODEL_H
#define VPACK_MODEL_H

#include <stddef.h>

#include "vpack/cpuset.h"
#include "vpack/policy.h"
#include "vpack/snapshot.h"
#include "vpack/topology.h"

/* Where a package can hold its deep C-state (package C6). */
enum vpack_pc6_scope {
    VPACK_PC6_PACKAGE, /* whenever all of its own cores are idle */
    VPACK_PC6_SYSTEM,  /* only while every core of every package is idle */
    VPACK_PC6_NONE,    /* never (disabled, or no such state) */
    VPACK_PC6_SCOPES
};

/* "package", "system" or "none". */
const char *vpack_pc6_scope_name(enum vpack_pc6_scope s);

/* What a domain's memory does to the socket that holds it (VPACK_COST_REMOTE_*). */
enum vpack_remote_memory {
    VPACK_REMOTE_HOLDS, /* a node holding memory of a domain with work keeps its package out of PC6 */
    VPACK_REMOTE_FREE,  /* memory costs nothing (the model before issue 26) */
};

/*
 * One platform's power model and the costs packing pays on it;
 * data/power-model.ini names the source of every figure, profile by profile.
 */
struct vpack_power_params {
    double awake_w;   /* package awake, no core busy (uncore, LLC, links) */
    double core_w;    /* added per busy physical core */
    double deep_w;    /* whole package in its deep C-state */
    double idle_w;    /* whole package idle (cores in core C6) outside the deep state */
    double smt_gain;  /* work a second busy hardware thread adds to a core, 0..1 */
    enum vpack_pc6_scope pc6_scope;
    double exit_us;      /* the deep state's exit latency, microseconds */
    double residency_us; /* its target residency: a shorter idle gap does not reach it */
    /* The costs ([costs] of the file; the same for every platform). */
    double busy_period_ms;  /* mean length of a working package's busy period */
    double refill_ms;       /* CPU time a moved thread loses refilling its caches */
    /* Seconds a thread's work stalls per second it runs away from its
     * domain's memory (a package whose NUMA nodes hold none of it): charged
     * as delay, step 8. 0 in a zeroed struct (the model before issue 26). */
    double remote_penalty;
    enum vpack_remote_memory remote;
    /* SMT siblings slow each other (step 8); true in every built-in profile and
     * a parsed file, false (the model before issue 26) in a zeroed struct. */
    bool smt_corun;
};

/* The platform profiles built in: the profiles of data/power-model.ini. */
#define VPACK_POWER_DEFAULT_PLATFORM "xeon-spr"
/* The i-th built-in profile's name, or NULL past the last. */
const char *vpack_power_platform_name(unsigned i);
/* The built-in profile name into *p: 0, or -ENOENT for a name not built in. */
int vpack_power_platform(const char *name, struct vpack_power_params *p);
/* The default profile, VPACK_POWER_DEFAULT_PLATFORM. */
void vpack_power_params_default(struct vpack_power_params *p);

/*
 * CPU time one live pin operation costs the host outside the guests' work,
 * in ms: libvirtd's for the call (virDomainPinVcpuFlags / PinEmulator with
 * VIR_DOMAIN_AFFECT_LIVE through one open connection) plus the QEMU
 * process's (the moved thread). Measured by tests/bench/bench-pin-cost.sh,
 * 2026-12-02, on a 2-CPU AMD EPYC VM (Debian 12, libvirt 9.0.0, QEMU 7.2,
 * no cpuidle driver), 3 idle TCG guests of 2 vCPUs, 3 rounds of 300 pins
 * alternating CPU 0 and CPU 1, utime + stime from /proc/PID/stat against
 * an idle window of the same length: libvirtd 1.93, 2.47 and 2.07 ms per
 * pin, QEMU -0.02, -0.13 and +0.09 ms (within the idle window's noise; an
 * idle vCPU thread is moved while it sleeps), together median 2.16 ms,
 * 9-11 ms wall per call. The client's side (vpackd's; virsh's there:
 * 1.2-1.4 ms per call) is not in it.
 */
#define VPACK_MODEL_PIN_CPU_MS 2.16

/* A package with at most this many CPUs of work in an interval counts as idle
 * in it (nworking); VPACK_ORACLE_EPS is sized against it (oracle.h). */
#define VPACK_MODEL_WORK_EPS 1e-9

/* What the host spends and how the agent observes, beside the power model. */
struct vpack_model_host {
    double pin_cpu_ms;      /* CPU-ms per pin operation, 0..1000; VPACK_MODEL_PIN_CPU_MS */
    double smoothing_rise;  /* the agent's moving average, (0, 1]: weight of a rise */
    double smoothing_fall;  /* ... of a fall; both default to the agent's defaults */
};

/* The defaults above. */
void vpack_model_host_default(struct vpack_model_host *h);
/*
 * Reads an INI text of len bytes, in one of two forms.
 *  - Profiles (data/power-model.ini): a key default = NAME before the first
 *    section, then one section per platform, [NAME], with keys awake_w,
 *    core_w, deep_w, idle_w (watts, >= 0, deep_w <= idle_w <= awake_w;
 *    idle_w missing is awake_w), pc6_scope (package, system or none),
 *    smt_gain (0..1), exit_latency_us and target_residency_us (0..1e6).
 *  - One platform: section [package] with the keys above but smt_gain, and
 *    [smt] with gain.
 * Either form may have [costs] with busy_period_ms (0.001..1e6), refill_ms
 * (0..1000) and remote_memory (holds or free). Missing keys keep the
 * built-in default profile's values. platform names the profile to take
 * (NULL: the file's default). Every profile is checked, not only the one
 * taken. Returns 0, or -EINVAL with *errmsg ("line N: ...") for an unknown
 * key or a bad value, or for a platform the file does not have (the message
 * lists the ones it has).
 */
int vpack_power_profile_parse(const char *text, size_t len, const char *platform,
                              struct vpack_power_params *out, char **errmsg);
/* vpack_power_profile_parse() of the file's default platform. */
int vpack_power_params_parse(const char *text, size_t len, struct vpack_power_params *out,
                             char **errmsg);

struct vpack_model;

/*
 * A model of topo (borrowed: it must outlive the model) running the policy
 * with params. level is the level every domain is given (0..2), or -1 to
 * keep the trace's. Returns 0 with *out, -EINVAL (bad level or parameters,
 * *errmsg says which) or -ENOMEM.
 */
int vpack_model_new(const struct vpack_topology *topo, const struct vpack_policy_params *params,
                    const struct vpack_power_params *power, int level, struct vpack_model **out,
                    char **errmsg);
void vpack_model_free(struct vpack_model *m);

/*
 * Replaces the model's host figures (vpack_model_new() starts with the
 * defaults). Returns 0, or -EINVAL with *errmsg for a value out of range.
 */
int vpack_model_set_host(struct vpack_model *m, const struct vpack_model_host *h, char **errmsg);

/*
 * Gives the next interval only foreign load: cpus CPUs' worth of work from
 * outside the guests (another process's burst, say) on usable CPU cpu, or
 * spread evenly over every usable CPU when cpu is -1. Calls add up; the next
 * vpack_model_step() charges it and forgets it. Returns 0, or -EINVAL for a
 * CPU that is not usable or a load that is negative or not finite.
 */
int vpack_model_add_foreign(struct vpack_model *m, int cpu, double cpus);

/* What one interval came to. Arrays are the model's, valid until the next step. */
struct vpack_model_interval {
    double seconds;          /* the interval's length */
    double demand, served;   /* CPUs' worth of work demanded and served, all threads */
    double max_delay;        /* the largest vCPU delay, share of the interval */
    double foreign;          /* CPUs' worth of foreign load given (vpack_model_add_foreign()) */
    double pin_cpu;          /* CPUs' worth the pin operations cost (pin_ops x pin_cpu_ms) */
    double refill;           /* CPUs' worth of served work moved threads lost refilling (step 8) */
    double energy_j;
    unsigned pin_ops, moves;
    unsigned nactive;        /* the plan's active packages (all when lifted) */
    unsigned nworking;       /* packages with work on them: not whole-idle all the interval */
    int wakeup_package;      /* the plan's, or -1 */
    bool lifted;
    unsigned npackages;
    const double *pkg_busy;  /* per package (topology order): busy share of its cores */
    const double *pkg_idle;  /* ... share of the interval it was whole-idle */
    unsigned ndomains;       /* the interval's domains, in trace order */
    const double *dom_demand, *dom_served;
};

/*
 * Runs one interval of trace: snap's threads' util is their demand (at most
 * 1; more is cut to 1), its delay and cpus are ignored. Returns 0 with *out
 * filled if out is not NULL, -EINVAL with *errmsg if the policy refused the
 * interval, or -ENOMEM.
 */
int vpack_model_step(struct vpack_model *m, const struct vpack_snapshot *snap,
                     struct vpack_model_interval *out, char **errmsg);

/*
 * The plan of the last interval, handed over (free it with vpack_plan_free()),
 * or NULL when no interval ran or it was already taken. A plan not taken is
 * freed at the next step. For tests that check every plan the model applies.
 */
struct vpack_plan *vpack_model_take_plan(struct vpack_model *m);
/*
 * The snapshot the policy saw in the last interval (its domains and threads,
 * util and delay as the model observed them, smoothed, and util_now and
 * delay_now), valid until the next step; its cpu_busy and cpu_busy_now
 * already hold what the next interval's policy will see.
 */
const struct vpack_snapshot *vpack_model_observed(const struct vpack_model *m);
/*
 * From the next step on, keep a copy of what each step's plan read, as the
 * planner measured it: work, SMT co-running discounted
 * (vpack_policy_measure_work(), with the state it planned with).
 * vpack_model_planned() gives it until the next step; NULL before a step
 * kept one. For tests that check each plan against its input.
 */
void vpack_model_keep_planned(struct vpack_model *m);
const struct vpack_snapshot *vpack_model_planned(const struct vpack_model *m);

/* The cost assumptions simulate varies, one at a time (step 8). */
enum vpack_cost_variant {
    VPACK_VAR_NO_RESIDENCY, /* every whole-idle gap reaches the deep state, exits free */
    VPACK_VAR_BUSY_SHORT,   /* busy_period_ms / 10: ten times as many, shorter idle gaps */
    VPACK_VAR_BUSY_LONG,    /* busy_period_ms * 10 */
    VPACK_VAR_REMOTE_FREE,  /* remote_memory = free */
    VPACK_COST_VARIANTS
};
/* "residency ignored", "busy period / 10", ...: what variant v changes, short. */
const char *vpack_cost_variant_name(enum vpack_cost_variant v);

/*
 * Sakasegawa's M/M/c waiting time per unit of service at occupancy rho
 * (capped at 0.99) on c servers: step 5's factor, for the oracles too.
 */
double vpack_model_wait_factor(double rho, unsigned c);

/* Everything so far. */
struct vpack_model_totals {
    unsigned long intervals;
    double seconds;
    double demand, served;        /* CPU-seconds */
    double energy_j;              /* with the power model's pc6_scope */
    double energy_scope_j[VPACK_PC6_SCOPES]; /* the same run under each scope */
    /* Package-seconds whole-idle outside the deep state, under each scope: the
     * energy at another idle_w is energy_scope_j + (that - idle_w) * this. */
    double shallow_pkg_s[VPACK_PC6_SCOPES];
    unsigned long pin_ops, moves;
    double foreign_s;             /* CPU-seconds of foreign load given */
    double pin_cpu_s;             /* CPU-seconds the pin operations cost */
    double active_pkg_s;          /* package-seconds with work on the package (nworking) */
    double planned_pkg_s;         /* package-seconds the plans named active (nactive) */
    unsigned npackages;
    const double *pkg_busy_s;     /* per package: core-busy share times seconds */
    const double *pkg_idle_s;     /* per package: whole-idle seconds */
    double delay_p99;             /* over every vCPU in every interval, share of the interval */
    /* Package-seconds a package served all it can (step 9): the saturation share
     * is this over active_pkg_s (SLATAH, Beloglazov and Buyya 2012). */
    double saturated_pkg_s;
    /* The costs packing pays (step 8). */
    double refill_s;              /* CPU-seconds of work moved threads lost refilling caches */
    double smt_slow_s;            /* CPU-seconds run beyond the work done, SMT siblings co-running */
    double wake_delay_s;          /* vCPU-seconds waited for a package's deep-state exit */
    double remote_delay_s;        /* vCPU-seconds stalled on remote memory (remote_penalty) */
    double deep_wakes;            /* exits from the deep state (expected count) */
    double held_pkg_s;            /* package-seconds a domain's memory kept out of the deep state */
    /* The energy under the power model's scope with one assumption varied. */
    double energy_var_j[VPACK_COST_VARIANTS];
};

void vpack_model_totals(const struct vpack_model *m, struct vpack_model_totals *out);

/* Per domain ever seen, in order of first appearance: work in CPU-seconds. */
struct vpack_model_domain {
    const char *name;
    double demand, served;
    double vcpu_demand;   /* its vCPUs' alone, CPU-seconds */
    double vcpu_delay;    /* seconds its vCPUs waited (step 5's delay times the interval) */
};
/* The i-th domain seen, or NULL past the last. */
const struct vpack_model_domain *vpack_model_domain_get(const struct vpack_model *m, unsigned i);

/*
 * Per-VM slowdown: one figure per domain with vCPU work, then its spread
 * across the domains (not one pooled figure over every vCPU-interval):
 *  - delay: the domain's vCPU wait per CPU-second its vCPUs wanted,
 *    vcpu_delay / vcpu_demand (0.1: its work took 10 % longer than alone);
 *  - unserved: the share of its demand not served, 1 - served / demand.
 * p50 and p99 are nearest-rank percentiles (the ceil(q n)-th smallest of
 * n), max the largest. Domains whose vCPUs wanted nothing are not counted
 * (n says how many are).
 */
struct vpack_model_vm_spread {
    unsigned n;
    double delay_p50, delay_p99, delay_max;
    double unserved_p50, unserved_p99, unserved_max;
};
/* Returns 0 with *out, or -ENOMEM. */
int vpack_model_vm_spread(const struct vpack_model *m, struct vpack_model_vm_spread *out);

/*
 * The CPUs thread k of the i-th domain seen (its vCPUs, then the emulator,
 * then its iothreads) was allowed on after the last interval the domain was
 * in: the plan's mask as the model applied it, within the usable CPUs.
 * Returns the domain's vCPU count with *out (so k == that count is the
 * emulator), or -ENOENT past the last domain or thread.
 */
int vpack_model_thread_cpus(const struct vpack_model *m, unsigned i, unsigned k, vpack_cpuset *out);

#endif
