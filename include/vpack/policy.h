/* SPDX-License-Identifier: MIT */
/*
 * The placement policy: a pure function from (topology, parameters,
 * snapshot, previous state) to (plan, next state). No file, socket, clock or
 * libvirt call happens in here: time advances by the snapshot's interval_ms.
 */
/*
 * The rules, in the order the planner applies them:
 *
 *  1. Level. A domain's level is its snapshot level, or default_level when
 *     that is -1. Level 0 domains are never restricted: every thread gets its
 *     "free" mask. A thread's free mask is its guest pin exactly as given when
 *     it has one, else the domain's bound. The bound is the domain's cpuset
 *     intersected with the usable CPUs (all usable CPUs without a cpuset). A
 *     domain whose bound is empty is not managed either.
 *  2. Guest pins. A pinned thread's mask is always its pin, unchanged, at
 *     every level and under every load.
 *  3. Demand. The host's load is the sum of the snapshot's per-CPU busy
 *     fractions over the usable CPUs (or the sum of all threads' util if that
 *     is larger). Capacity is counted in physical cores, never SMT threads.
 *     The load of the threads vpack places (rules 7, 8) moves with them: it
 *     is counted on the package each runs on (its last CPU; else its domain's
 *     previous packages; else the packages of its bound with the most load
 *     not yet explained), and a package's fixed load is the rest of its load.
 *     A domain's own load is never charged against its room.
 *  4. How many packages. The lower bound is the fewest packages whose
 *     cores * pack_watermark hold the demand, the largest packages first (so
 *     offline or reserved CPUs do not inflate the count), and at least every
 *     package a busy thread (util >= 0.05, or >= 0.025 for a package already
 *     active: hysteresis) keeps awake whatever vpack plans: the package of a
 *     guest pin that lies in one package, the package a thread pinned across
 *     packages runs on (its last CPU, else the busiest package of its pin),
 *     and the one package a busy domain's cpuset allows. With no previous
 *     state the planner uses the lower bound at once. Afterwards it spreads
 *     fast: when the load on the active packages (their CPUs' busy time, or
 *     every domain's thread util, whichever is more: load vpack cannot move
 *     that runs on a parked package takes no room from the guests, and
 *     spreading them would not move it) exceeds spread_watermark of the
 *     active cores for spread_samples snapshots in a row, or a vCPU vpack may move (not
 *     guest-pinned) of a managed domain has a delay over delay_threshold as
 *     long, it grows to max(lower bound, active + 1). Where the snapshot
 *     carries the last interval alone (cpu_busy_now), a snapshot counts only
 *     when that interval was over the trigger too (its CPUs' busy or its
 *     threads' util_now; the worst delay_now): smoothing falls slowly, and
 *     one busy interval would otherwise count twice. When the guests' own
 *     threads' util, smoothed and util_now, is under the trigger, the load
 *     over it (or the delay it makes the vCPUs wait) is someone else's: it
 *     takes spread_samples + 1 snapshots, since a burst of at most one
 *     interval that straddles two ticks is over in two, never three.
 *     It spreads at once when
 *     the guests' own threads asked for more than all the active cores in the
 *     last interval alone (every thread's util_now plus the delay_now of those
 *     vpack may move: a step that saturates the active packages measures no
 *     more than them, and smoothing holds part of it back) and their run time
 *     alone (util_now) filled the active cores to spread_watermark (delay
 *     beside a light run time is load outside the guests queueing them: it
 *     counts as a sample, no more); load outside the guests never spreads at
 *     once, except in a snapshot without cpu_busy_now, where the smoothed
 *     load on the active packages over all their cores is the only evidence
 *     and does (the guests' threads can show that; the cores' busy time
 *     cannot pass them). While
 *     a trigger is being counted and not reached, the load over it is one
 *     interval old: domains that stay keep their packages (rule 7), level 2
 *     light vCPUs beside the others stay there (rule 8) and domains kept in
 *     L3 caches stay in them (rule 9), whatever room that load leaves. A delay spread that moved none of the waiting domains does
 *     not grow again until the delay has fallen under half the threshold. It
 *     packs slowly: only after the lower bound has stayed below the active
 *     count, with no delay over half the threshold (or only the delay such a
 *     spread could not help), for pack_delay_ms
 *     (pack_delay_ms + min_residency_ms after a delay spread), and never by
 *     moving a domain placed less than min_residency_ms ago (such a domain
 *     keeps its packages active).
 *  5. Which packages. Preference order: packages that pins and bounds keep
 *     awake, then the packages active in the previous plan, then the package
 *     holding the most memory of managed domains, then packages with fixed
 *     load (>= 10% of their cores), then the most placed load running
 *     there, then lower package ids. Packages are taken in that order,
 *     skipping one when the count could then no longer hold the demand, and
 *     the largest are added past the count while the packages that pins and
 *     bounds keep awake are too small to hold what the count's largest
 *     packages would.
 *  6. Heavy load. When every package is needed, all restrictions are lifted
 *     (plan->lifted) and every thread gets its free mask.
 *  7. Domains. Managed domains are placed whole, largest movable demand first
 *     (first-fit decreasing; ties by name), each on one active package where
 *     it fits (room = cores * spread_watermark minus the fixed load minus
 *     what this plan placed there; the fixed load, vpack cannot move, at the
 *     lower of its smoothed and last-interval values: a burst of another
 *     process that ended takes no room while its average falls). First every domain that stays: on its
 *     current packages while they still fit (sticky; a domain across several
 *     packages goes to one once it fits one and has stayed min_residency_ms),
 *     and level 2 all-light domains on theirs (rule 8); then the domains whose
 *     bound allows one package; then the rest. So a domain that moves takes
 *     only the room the staying ones leave and never pushes one of them off.
 *     A domain that moves goes to the package holding at least half its
 *     memory, else the package it runs on, else the first in preference
 *     order, where it fits under the pack watermark (cores * pack_watermark
 *     minus the same loads), else in the same order where it fits under the
 *     spread watermark: the active packages are awake anyway, and filling one
 *     to the spread watermark while another has room queues for nothing.
 *     When no active package has room, a parked package of its bound that
 *     has is woken. A domain that fits no single package goes across the
 *     fewest packages, those with the most room first, waking parked ones
 *     when the active ones lack room. With pc6_scope system (pc6_system),
 *     a domain whose memory home is known and whose placed load (movable
 *     and light) fits that package under the spread watermark may be placed
 *     there only, its light vCPUs too: the home acts as its bound in rules
 *     7 to 9 and, once the domain is busy (util >= 0.05), keeps the package
 *     awake as a bound does (rule 4). Free masks, lifted plans and rule 10
 *     still use the domain's own bound.
 *  8. Long-running vCPUs: util >= busy_vcpu at first sight; afterwards a
 *     long-running vCPU stays one down to 85% of busy_vcpu and a light one
 *     becomes one at 115% (hysteresis). Level 1 packs the domain's
 *     long-running vCPUs, its emulator and iothreads onto the domain's
 *     packages; light vCPUs keep their free masks. Level 2 does the same,
 *     and its light vCPUs join the others when there is room; otherwise they
 *     stay on the package they went to last while that is active and has
 *     room, else they, and a level 2 domain with no long-running vCPU
 *     (whole), go to the wake-up target as sched_mc level 2 does: the
 *     busiest active package of its bound with room for them under the pack
 *     watermark, else under the spread watermark, the next one when they do
 *     not fit, a parked one woken when no active one has room. Such a domain
 *     stays on its package while that is active and has room. The plan's
 *     wake-up package is the busiest active package with at least 0.1 CPU of
 *     room.
 *  9. L3 caches. Inside a package with several L3 caches (AMD CCXs, sub-NUMA
 *     clusters), a domain placed on that one package is kept in the fewest
 *     caches that hold what goes with its emulator (its long-running vCPUs,
 *     emulator, iothreads and, at level 2, the light vCPUs beside them):
 *     room per cache = its cores * spread_watermark minus its share of the
 *     package's fixed load minus what this plan put there (each CPU's busy
 *     counted at the lower of its smoothed and last-interval values: a burst
 *     that ended crowds no cache while its smoothed value falls). It stays in its
 *     caches while they hold it (from several to one as soon as one does);
 *     else one cache: where most of its load ran, else the one with most
 *     room, under the pack watermark first, then under the spread watermark;
 *     else the fewest, most room first; else the whole package. Only caches
 *     the domain's bound allows wholly count (part of a cache does not have
 *     its room). Domains that
 *     stay in their caches go first, then the rest largest first. Threads
 *     that share data lose more across caches than the room gains them
 *     (VolanoMark). A domain across packages, and a lifted plan, are not
 *     narrowed to caches.
 * 10. Bounds. Every mask vpack sets is a subset of the domain's bound.
 * 11. Reasons. Every domain gets a one-line reason saying why it is where it
 *     is (and in which L3 caches); the plan gets one saying why this many
 *     packages are active.
 */
#ifndef VPACK_POLICY_H
#define VPACK_POLICY_H

#include <stdbool.h>

#include "vpack/cpuset.h"
#include "vpack/snapshot.h"
#include "vpack/topology.h"

struct vpack_policy_params {
    /* Pack while the load of the active packages stays under this share of
     * their physical cores; sizes the package count. Default 0.6. */
    double pack_watermark;
    /* Spread when the load exceeds this share of the active cores for
     * spread_samples samples in a row. Default 0.8. */
    double spread_watermark;
    /* Spread when any managed vCPU waits in the run queue more than this
     * fraction of the interval for spread_samples samples. Default 0.25. A spread forced by
     * delay alone is packed back pack_delay_ms + min_residency_ms after the
     * delay stopped. */
    double delay_threshold;
    /* A vCPU using at least this many CPUs is long-running. Default 0.5. */
    double busy_vcpu;
    unsigned spread_samples;   /* default 2 */
    unsigned pack_delay_ms;    /* load under the pack watermark this long; default 5000 */
    unsigned min_residency_ms; /* a domain stays put this long unless spreading; default 60000 */
    int default_level;         /* for domains with level -1; default 0 */
    /* Work a second busy hardware thread adds to a core, 0..1: load is
     * measured as work, SMT co-running discounted (lib/policy/smt.c); 1
     * counts busy time as it is. Default 0.25, the host model's figure (an
     * ASSUMPTION: data/power-model.ini gives its source). */
    double smt_gain;
    /* Where the platform's package C6 can be held ([policy] pc6_scope):
     * false per package (the default), true system-wide (Intel Xeon,
     * Skylake-SP and later: only while every CPU of every socket is in core
     * C6; data/power-model.ini gives the source). System-wide, a socket that
     * parks while another works saves nothing by a deep state, so a managed
     * domain whose memory home is known (its NUMA nodes hold at least half
     * its memory) is placed on that home's package while the plan restricts:
     * moving it elsewhere would buy nothing and cost it remote memory
     * (rule 7). */
    bool pc6_system;
};

void vpack_policy_params_default(struct vpack_policy_params *p);
/*
 * What the keys cannot say one at a time: the pack watermark must not be
 * above the spread watermark (the planner fills a package to the pack
 * watermark and spreads above the spread watermark; a pack watermark above
 * it would pack into load that spreads again at once). Every door a policy
 * comes through (vpackd's file and --set, simulate, plan) checks with this.
 * Returns 0, or -EINVAL with one line in msg (len bytes).
 */
int vpack_policy_params_check(const struct vpack_policy_params *p, char *msg, size_t len);

/* Opaque state carried from one snapshot to the next. */
struct vpack_policy_state;
struct vpack_policy_state *vpack_policy_state_new(void);
/* A deep copy (a dry run plans on one: the real state does not move); NULL when out of memory. */
struct vpack_policy_state *vpack_policy_state_dup(const struct vpack_policy_state *s);
void vpack_policy_state_free(struct vpack_policy_state *s);
/*
 * True when nothing in the state is counting down: a plan was made, no
 * spread trigger is being counted (spread_samples), no pack is waiting
 * (pack_delay_ms) and every domain was placed at least min_residency_ms
 * ago. The plan on the same snapshot would then be the same: an agent may
 * skip planning while its input stays put (vpack_snapshot_within()).
 */
bool vpack_policy_state_settled(const struct vpack_policy_state *s,
                                const struct vpack_policy_params *params);
/* Time passes with nothing to plan: advances the state's clock by ms. */
void vpack_policy_state_advance(struct vpack_policy_state *s, unsigned ms);

struct vpack_plan_thread {
    int id;                    /* vCPU or iothread id, -1 for the emulator */
    const vpack_cpuset *cpus;  /* the mask to apply (borrowed from the plan) */
    bool restricted;           /* true when vpack narrows it below pin/bound */
};

struct vpack_plan_domain {
    char *name;
    int level;                 /* effective level (default applied) */
    unsigned npackages;
    int *packages;             /* package ids the domain is placed on */
    bool moved;                /* placement changed in this plan */
    char *reason;              /* one line for `vpackctl explain` */
    unsigned nvcpus;
    struct vpack_plan_thread *vcpus;
    struct vpack_plan_thread emulator;
    unsigned niothreads;
    struct vpack_plan_thread *iothreads;
};

/*
 * Why the plan has as many packages as it has. The policy sets it; the agent's
 * metrics and logs count and name rebalances by it (never by the reason text).
 */
enum vpack_plan_why {
    VPACK_WHY_FIRST,   /* the first plan after start or a policy reset */
    VPACK_WHY_PACK,    /* packed onto fewer packages: load stayed low */
    VPACK_WHY_SPREAD,  /* spread onto more packages: load or run-queue delay */
    VPACK_WHY_HOLD,    /* as many packages as before (waiting, steady) */
    VPACK_WHY_N
};

/* "first", "pack", "spread", "other": the metrics' label values. */
const char *vpack_plan_why_name(enum vpack_plan_why why);

struct vpack_plan {
    unsigned nactive;
    int *active_packages;      /* package ids, in preference order */
    int wakeup_package;        /* package id, or -1 when none is nominated */
    bool lifted;               /* all restrictions lifted (heavy load) */
    double demand;             /* CPUs' worth of load the plan was sized for */
    enum vpack_plan_why why;   /* what changed the package count */
    char *reason;              /* why this many packages, in words */
    unsigned ndomains;
    struct vpack_plan_domain *domains; /* same order as the snapshot */
    void *priv;                /* mask storage */
};

/*
 * Computes a plan for snap and advances state. Returns 0 with *out set (free
 * with vpack_plan_free()), or a negative errno (then state is unchanged).
 */
int vpack_plan_compute(const struct vpack_topology *topo, const struct vpack_policy_params *params,
                       const struct vpack_snapshot *snap, struct vpack_policy_state *state,
                       struct vpack_plan **out);
void vpack_plan_free(struct vpack_plan *p);

/*
 * The load as vpack_plan_compute() measures it: snap's busy and run times
 * become work in place, SMT co-running discounted by params->smt_gain
 * (lib/policy/smt.c says how); unchanged on a host without SMT. state (may
 * be NULL) is the one the plan is computed with: it says where a domain
 * whose threads' CPUs are not known ran. For tests and tools that check a
 * plan against what the planner saw. 0 or -EINVAL, -ENOMEM (snap then
 * unchanged).
 */
int vpack_policy_measure_work(const struct vpack_topology *topo,
                              const struct vpack_policy_params *params,
                              const struct vpack_policy_state *state, struct vpack_snapshot *snap);

/*
 * JSON: {"active_packages": [0], "wakeup_package": 0, "lifted": false,
 * "demand": 0.4, "why": "first", "reason": "...", "domains": [{"name": "web1",
 * "level": 2, "packages": [0], "reason": "...", "vcpus": [{"id": 0, "cpus": "3"}],
 * "emulator": "0-7", "iothreads": [{"id": 1, "cpus": "2"}]}]}
 * "why" is vpack_plan_why_name(why). One line, no newline; the caller frees.
 */
char *vpack_plan_to_json(const struct vpack_plan *p);

#endif
