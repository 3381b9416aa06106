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
 *     computed them for the previous interval (the first interval: util =
 *     demand, delay 0, every usable CPU at the mean demand). It runs the real
 *     vpack_plan_compute() with one policy state kept across intervals.
 *  2. The plan's masks are applied. A thread whose mask differs from the one
 *     it had is one pin operation (a thread starts with its free mask: its
 *     pin, else its domain's bound); a plan domain marked moved is one move.
 *  3. Sharing. A thread's demand (the trace's util, at most one CPU) is
 *     offered to the CPUs of its mask. Threads with the same mask form a
 *     group; groups are placed narrowest mask first, each water-filled onto
 *     its CPUs (the least loaded CPUs are raised first, as the scheduler's
 *     load balancing would), so wider masks take what narrower ones left.
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
 *  7. Power, per package: awake_w while not whole-idle, deep_w while
 *     whole-idle (the deep package C-state), plus core_w per busy core.
 *     energy = power * interval.
 *
 * What the model cannot see: wake-up latency and transition energy of
 * C-states, turbo and frequency, cache and memory locality (remote memory
 * costs nothing here), interrupts and host processes outside the trace,
 * scheduler imperfection inside a mask, second-scale bursts the trace does
 * not carry.
 */
#ifndef VPACK_MODEL_H
#define VPACK_MODEL_H

#include <stddef.h>

#include "vpack/cpuset.h"
#include "vpack/policy.h"
#include "vpack/snapshot.h"
#include "vpack/topology.h"

/* The per-package power model; data/power-model.ini cites the sources. */
struct vpack_power_params {
    double awake_w;   /* package awake, no core busy (uncore, LLC, links) */
    double core_w;    /* added per busy physical core */
    double deep_w;    /* whole package in its deep C-state */
    double smt_gain;  /* work a second busy hardware thread adds to a core, 0..1 */
};

/* The defaults, the values of data/power-model.ini. */
void vpack_power_params_default(struct vpack_power_params *p);
/*
 * Reads an INI text of len bytes: section [package] with keys awake_w,
 * core_w, deep_w (watts, >= 0, deep_w <= awake_w) and [smt] with gain
 * (0..1); missing keys keep their defaults. Returns 0, or -EINVAL with
 * *errmsg ("line N: ...") for an unknown key or a bad value.
 */
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

/* What one interval came to. Arrays are the model's, valid until the next step. */
struct vpack_model_interval {
    double seconds;          /* the interval's length */
    double demand, served;   /* CPUs' worth of work demanded and served, all threads */
    double max_delay;        /* the largest vCPU delay, share of the interval */
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
 * util and delay as the model observed them), valid until the next step;
 * its cpu_busy already holds what the next interval's policy will see.
 */
const struct vpack_snapshot *vpack_model_observed(const struct vpack_model *m);

/* Everything so far. */
struct vpack_model_totals {
    unsigned long intervals;
    double seconds;
    double demand, served;        /* CPU-seconds */
    double energy_j;
    unsigned long pin_ops, moves;
    double active_pkg_s;          /* package-seconds with work on the package (nworking) */
    double planned_pkg_s;         /* package-seconds the plans named active (nactive) */
    unsigned npackages;
    const double *pkg_busy_s;     /* per package: core-busy share times seconds */
    const double *pkg_idle_s;     /* per package: whole-idle seconds */
    double delay_p99;             /* over every vCPU in every interval, share of the interval */
};

void vpack_model_totals(const struct vpack_model *m, struct vpack_model_totals *out);

/* Per domain ever seen, in order of first appearance: work in CPU-seconds. */
struct vpack_model_domain {
    const char *name;
    double demand, served;
};
/* The i-th domain seen, or NULL past the last. */
const struct vpack_model_domain *vpack_model_domain_get(const struct vpack_model *m, unsigned i);

/*
 * The CPUs thread k of the i-th domain seen (its vCPUs, then the emulator,
 * then its iothreads) was allowed on after the last interval the domain was
 * in: the plan's mask as the model applied it, within the usable CPUs.
 * Returns the domain's vCPU count with *out (so k == that count is the
 * emulator), or -ENOENT past the last domain or thread.
 */
int vpack_model_thread_cpus(const struct vpack_model *m, unsigned i, unsigned k, vpack_cpuset *out);

#endif
