/* SPDX-License-Identifier: MIT */
/*
 * The planner's internals, shared by its phases (lib/policy/): the policy
 * state, the planner's working state and each phase's entry point. Not
 * installed; nothing outside lib/policy/ includes it.
 *
 * The phases, in the order vpack_plan_compute() runs them; each reads what
 * the ones before it wrote and calls none of the others:
 *
 *   policy.c    the state, the driver vpack_plan_compute() and the plan's lifetime
 *   smt.c       before the phases: the snapshot's busy and run times as work, SMT
 *               co-running discounted (what every phase measures load in)
 *   describe.c  the packages, each domain (level, bound, long-running vCPUs, where
 *               its load runs) and the preference order (rules 1-3, 5, 8)
 *   count.c     how many packages: demand, lower bound, spread fast and pack
 *               slowly, lifted (rules 4, 6)
 *   select.c    which packages: in preference order, and those minimum
 *               residency holds (rules 4, 5)
 *   place.c     placing domains and light load on the active packages (rules 7, 8)
 *   l3.c        packing each domain into the fewest L3 caches of its package (rule 9)
 *   build.c     the plan's masks and the next state (rules 2, 10, 11)
 *
 * Package ids and indexes: an id is the topology's package number (what a
 * plan, a reason and the state between plans hold: the state outlives a
 * topology); an index is a position in topo->packages (what every per-package
 * array of the planner is indexed by). Ids live in names ending in _id or
 * _ids; everything else that names a package (p, pk, *_pk) is an index. The
 * previous plan's ids become indexes once, in describe.c (dom_info.prev_pk,
 * was_active), and indexes become ids only through pkg_id().
 */
#ifndef VPACK_POLICY_INTERNAL_H
#define VPACK_POLICY_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "vpack/policy.h"

/* A guest-pinned thread at least this busy keeps its package awake. */
#define PINNED_AWAKE_UTIL 0.05
/* A package at least this busy (share of its cores) counts as awake. */
#define AWAKE_SHARE 0.10
/* Rooms are compared in steps of this many cores, so near-ties go to the lower id. */
#define ROOM_STEP 0.10
/* Tolerance when comparing loads with capacities. */
#define EPS 1e-9
/* A long-running vCPU stays one down to busy_vcpu * (1 - this); a light one
 * becomes long-running at busy_vcpu * (1 + this). */
#define BUSY_HYSTERESIS 0.15

struct dom_state {
    char *name;
    unsigned npkgs;
    int *pkg_ids;       /* package ids it was placed on */
    uint64_t placed_ms; /* policy time of its last move */
    unsigned seen;      /* generation it was last seen in */
    unsigned nbusy;
    unsigned char *busy; /* per vCPU position: long-running in the last plan */
    int light_pkg_id;   /* level 2: package id of its light vCPUs when apart, else -1 */
    uint64_t l3;        /* L3 caches (bit k: l3[k] of its one package) it was kept in, or 0 */
};

/* What counting (rule 4) carries from one plan to the next: count.c
 * starts from the state's copy and the next state takes the planner's whole. */
struct count_state {
    unsigned ndemand;      /* package count chosen for the demand (before pins/holds) */
    unsigned over_count;   /* consecutive snapshots over the spread triggers */
    uint64_t under_ms;     /* how long the lower bound stayed under the active count */
    bool delay_spread;     /* the packages were last added for run-queue delay */
    bool delay_fruitless;  /* that spread moved no waiting domain: do not grow for delay */
};

struct vpack_policy_state {
    bool initialized;
    uint64_t now_ms;
    unsigned generation;
    struct count_state count;
    unsigned nactive;
    int *active_ids;       /* previous plan's active packages */
    unsigned ndoms;
    struct dom_state *doms; /* sorted by name */
};

/* Mask storage owned by a plan: masks are allocated one by one and freed together. */
struct mask_pool {
    vpack_cpuset **masks;
    unsigned n, cap;
    vpack_cpuset *pkg_masks; /* per package; plan masks point into it */
    vpack_cpuset *bounds;    /* per domain */
    vpack_cpuset all;        /* every usable CPU */
};

/* What the planner works out about one domain before placing it. */
struct dom_info {
    const struct vpack_domain_sample *d;
    int level;
    bool managed;          /* level >= 1, usable bound, not everything pinned */
    bool bound_is_all;     /* bound == every usable CPU */
    const vpack_cpuset *bound;
    double movable;        /* load vpack places on the domain's packages */
    double light;          /* load a level 2 domain puts on the wake-up package */
    double total;          /* every thread's util */
    double max_delay;      /* worst delay of a vCPU vpack may move */
    double max_delay_now;  /* ... of the last interval alone */
    double util_now;       /* every thread's util_now */
    double delay_now;      /* delay_now of the threads vpack may move */
    int mem_home;          /* package index holding >= half its memory, or -1 */
    int home;              /* package index where most of its placed load runs now, or -1 */
    int light_pk;          /* level 2: package index of its light vCPUs, -1: with the rest */
    int one_pkg;           /* package index of the one package its bound allows, or -1 */
    int stay_pkg;          /* pc6_system: its memory home, the only package it is placed on; -1 */
    uint64_t l3;           /* L3 caches of its one package it is kept in (bit k: l3[k]), or 0 */
    const vpack_cpuset *l3mask; /* their CPUs within its bound, or NULL: the whole package */
    const struct dom_state *prev;
    unsigned nprev_pk;     /* prev->npkgs */
    int *prev_pk;          /* prev->pkg_ids as indexes, -1 for a package no longer there */
    int prev_light_pk;     /* prev->light_pkg_id as an index, or -1 */
    unsigned npk;
    int *pk;               /* chosen package indexes */
    bool moved;
    char reason[256];
};

/* Everything one planning pass needs, so helpers take one pointer. */
struct planner {
    const struct vpack_topology *topo;
    const struct vpack_policy_params *par;
    const struct vpack_snapshot *snap; /* as work (smt.c): what every phase reads */
    const struct vpack_snapshot *raw;  /* the caller's: run time, for rule 8's classes */
    struct vpack_policy_state *st;
    unsigned P;
    double *cap;           /* physical cores with a usable CPU */
    double *load;          /* sum of its usable CPUs' busy fractions */
    double *own;           /* of that, load of threads vpack places (it moves with them) */
    double *load_now;      /* with have_now: its usable CPUs' busy over the last interval */
    double *mem_w;         /* load of managed domains whose memory is there */
    double *room;          /* spread watermark * cores minus what is placed or fixed there */
    double *scratch;       /* P entries */
    bool *forced, *was_active, *awake, *active;
    int *order;            /* package indexes in preference order */
    int *by_cap;           /* package indexes, most cores first */
    struct dom_info *di;
    struct mask_pool *pool;
    vpack_cpuset *pkg_mask; /* per package: its usable CPUs */
    uint64_t now;          /* policy time of this snapshot */
    vpack_cpuset *bounds;  /* per domain, in the pool */
    struct dom_info **sorted; /* managed domains, largest first */
    unsigned nsorted;
    int *cand, *ids;       /* scratch, P entries each */

    /* Demand: what the snapshot asks for. */
    double total_busy;     /* sum of the usable CPUs' busy fractions */
    double threads_total;  /* every thread's util */
    double max_delay;      /* worst run-queue delay of a vCPU vpack may move */
    double demand;
    double wanted_now;     /* the last interval alone: every thread's run time plus the
                            * run-queue delay of those vpack may move (rule 4) */
    bool have_now;         /* the snapshot carries the last interval alone (cpu_busy_now) */
    double total_busy_now; /* with it: the usable CPUs' busy over the last interval */
    double threads_now;    /* every thread's util_now */
    double demand_now;     /* the larger of those two */
    double spread_demand;  /* what spreads: the active packages' busy or the threads' util */
    double max_delay_now;  /* worst delay_now of a vCPU vpack may move */
    unsigned nforced;      /* packages that pins and bounds keep awake */

    /* The count (count.c): how many packages and why. */
    unsigned nlow;         /* fewest packages that hold the demand */
    struct count_state count; /* the next state's; count.ndemand: the count for the demand */
    unsigned nselect;      /* packages to select: the count, those pins keep awake, or all */
    bool spreading, lifted;
    bool delay_spreading;  /* this plan adds a package for run-queue delay */
    enum vpack_plan_why why;
    char reason[256];
    unsigned over_need;    /* samples this trigger needs: spread_samples, one more for load
                            * outside the guests alone */
    int wake;              /* wake-up package index, or -1 */

    /* Output: the plan and the next state's domains. */
    struct vpack_plan *plan;
    int *active_ids;
    struct dom_state *newdoms;
    unsigned nnew;
};

static inline bool thread_pinned(const struct vpack_thread_sample *t)
{
    return t->pin != NULL;
}

/* The id of package index p. */
static inline int pkg_id(const struct planner *pl, int p)
{
    return pl->topo->packages[p].id;
}

/* Whether package p is in the domain's own bound (its cpuset). */
static inline bool in_cpuset(const struct planner *pl, const struct dom_info *di, int p)
{
    return di->bound_is_all || vpack_cpuset_intersects(&pl->pkg_mask[p], di->bound);
}

/* Whether the domain may be placed on package p: in its bound, and its memory home if it stays there. */
static inline bool in_bound(const struct planner *pl, const struct dom_info *di, int p)
{
    return (di->stay_pkg < 0 || p == di->stay_pkg) && in_cpuset(pl, di, p);
}

/* Thread j of a domain: its vCPUs, then the emulator, then its iothreads. */
static inline const struct vpack_thread_sample *
vpack__plan_thread_at(const struct vpack_domain_sample *d, unsigned j)
{
    return j < d->nvcpus ? &d->vcpus[j]
                         : (j == d->nvcpus ? &d->emulator : &d->iothreads[j - d->nvcpus - 1]);
}

/* policy.c */
void vpack__plan_dom_state_clear(struct dom_state *ds);
int vpack__plan_dom_state_cmp(const void *a, const void *b);
const struct dom_state *vpack__plan_state_find(const struct vpack_policy_state *s,
                                               const char *name);
vpack_cpuset *vpack__plan_pool_new(struct mask_pool *pool);

/* describe.c: describe. Returns 0 or -ENOMEM. */
int vpack__plan_describe(struct planner *pl);
/* Queries on the description, for the phases after it: */
double vpack__plan_free_room(const struct planner *pl, int p);
/* Whether vpack places thread j (rather than leaving it its free mask). */
bool vpack__plan_thread_placed(const struct planner *pl, const struct dom_info *di, unsigned j);
/* Whether vCPU i is long-running (rule 8). */
bool vpack__plan_vcpu_busy(const struct planner *pl, const struct dom_info *di, unsigned i);

/* count.c: how many. */
void vpack__plan_count(struct planner *pl);
/*
 * True while a spread trigger is being counted but not reached (rule 4): the
 * load over it is one interval old, perhaps a burst that is gone in the next.
 * Domains that stay where they are keep their packages meanwhile (rules 7, 8).
 */
bool vpack__plan_unconfirmed(const struct planner *pl);

/* select.c: which. */
void vpack__plan_select(struct planner *pl);

/* place.c */
void vpack__plan_set_room(struct planner *pl);
int vpack__plan_place_managed(struct planner *pl);
int vpack__plan_place_light(struct planner *pl);
int vpack__plan_dom_order_cmp(const void *a, const void *b);

/* l3.c */
int vpack__plan_place_l3(struct planner *pl);

/* build.c */
int vpack__plan_build_plan(struct planner *pl);

/* smt.c: the snapshot as work (SMT co-running discounted); a view that borrows from it. */
struct vpack__work_view {
    struct vpack_snapshot snap;          /* in's fields, with the arrays below */
    double *num;                         /* work per CPU, smoothed and last interval; scratch */
    int *region;                         /* each CPU's L3 cache (or package) over the host */
    double *sum, *sum_now;               /* work and busy per region, then the host's */
    bool *want;                          /* scratch: regions of one domain */
    struct vpack_domain_sample *doms;    /* in's domains, their threads in thr */
    struct vpack_thread_sample *thr;
};
/* *out is in itself without SMT (or smt_gain 1), else &v->snap. 0 or -ENOMEM. */
int vpack__plan_work_view(const struct vpack_topology *t, const struct vpack_policy_params *par,
                          const struct vpack_policy_state *st, const struct vpack_snapshot *in,
                          struct vpack__work_view *v, const struct vpack_snapshot **out);
void vpack__plan_work_view_free(struct vpack__work_view *v);

#endif
