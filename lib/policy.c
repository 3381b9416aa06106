// SPDX-License-Identifier: MIT
/*
 * The placement policy. See the rules in include/vpack/policy.h; the comments
 * here say how, not what. Nothing in this file does I/O or reads a clock:
 * time is the sum of the snapshots' intervals.
 */
#include "vpack/policy.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A guest-pinned thread at least this busy keeps its package awake. */
#define PINNED_AWAKE_UTIL 0.05
/* A package at least this busy (share of its cores) counts as awake. */
#define AWAKE_SHARE 0.10
/* Rooms are compared in steps of this many cores, so near-ties go to the lower id. */
#define ROOM_STEP 0.10
/* Tolerance when comparing loads with capacities. */
#define EPS 1e-9

struct dom_state {
    char *name;
    unsigned npkgs;
    int *pkgs;          /* package ids it was placed on */
    uint64_t placed_ms; /* policy time of its last move */
    unsigned seen;      /* generation it was last seen in */
};

struct vpack_policy_state {
    bool initialized;
    uint64_t now_ms;
    unsigned generation;
    unsigned over_count;   /* consecutive snapshots over the spread triggers */
    uint64_t under_ms;     /* how long the lower bound stayed under the active count */
    unsigned ndemand;      /* package count chosen for the demand (before pins/holds) */
    double delay_demand;   /* demand when run-queue delay last forced a spread, else 0 */
    unsigned nactive;
    int *active_ids;       /* previous plan's active packages */
    int wakeup_id;
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
    double max_delay;
    int mem_home;          /* package index holding >= half its memory, or -1 */
    struct dom_state *prev;
    unsigned npk;
    int *pk;               /* chosen package indexes */
    bool held, moved;
    char reason[256];
};

void vpack_policy_params_default(struct vpack_policy_params *p)
{
    p->pack_watermark = 0.6;
    p->spread_watermark = 0.8;
    p->delay_threshold = 0.25;
    p->busy_vcpu = 0.5;
    p->spread_samples = 2;
    p->pack_delay_ms = 5000;
    p->min_residency_ms = 60000;
    p->default_level = 0;
}

struct vpack_policy_state *vpack_policy_state_new(void)
{
    struct vpack_policy_state *s = calloc(1, sizeof(*s));
    if (s)
        s->wakeup_id = -1;
    return s;
}

static void dom_state_clear(struct dom_state *ds)
{
    free(ds->name);
    free(ds->pkgs);
}

void vpack_policy_state_free(struct vpack_policy_state *s)
{
    if (!s)
        return;
    for (unsigned i = 0; i < s->ndoms; i++)
        dom_state_clear(&s->doms[i]);
    free(s->doms);
    free(s->active_ids);
    free(s);
}

struct vpack_policy_state *vpack_policy_state_dup(const struct vpack_policy_state *s)
{
    struct vpack_policy_state *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    *c = *s;
    c->active_ids = NULL;
    c->doms = NULL;
    c->ndoms = 0;
    if (s->nactive && !(c->active_ids = malloc(s->nactive * sizeof(*c->active_ids))))
        goto fail;
    if (s->nactive)
        memcpy(c->active_ids, s->active_ids, s->nactive * sizeof(*c->active_ids));
    if (s->ndoms && !(c->doms = calloc(s->ndoms, sizeof(*c->doms))))
        goto fail;
    for (; c->ndoms < s->ndoms; c->ndoms++) {
        const struct dom_state *from = &s->doms[c->ndoms];
        struct dom_state *to = &c->doms[c->ndoms];
        *to = *from;
        to->pkgs = NULL;
        if (!(to->name = strdup(from->name)))
            goto fail;
        if (from->npkgs && !(to->pkgs = malloc(from->npkgs * sizeof(*to->pkgs)))) {
            c->ndoms++; /* its name is freed with the rest */
            goto fail;
        }
        if (from->npkgs)
            memcpy(to->pkgs, from->pkgs, from->npkgs * sizeof(*to->pkgs));
    }
    return c;
fail:
    vpack_policy_state_free(c);
    return NULL;
}

static int dom_state_cmp(const void *a, const void *b)
{
    return strcmp(((const struct dom_state *)a)->name, ((const struct dom_state *)b)->name);
}

static struct dom_state *state_find(struct vpack_policy_state *s, const char *name)
{
    struct dom_state key = {.name = (char *)name};
    if (!s->ndoms)
        return NULL;
    return bsearch(&key, s->doms, s->ndoms, sizeof(*s->doms), dom_state_cmp);
}

static vpack_cpuset *pool_new(struct mask_pool *pool)
{
    if (pool->n == pool->cap) {
        unsigned ncap = pool->cap ? pool->cap * 2 : 64;
        vpack_cpuset **m = realloc(pool->masks, ncap * sizeof(*m));
        if (!m)
            return NULL;
        pool->masks = m;
        pool->cap = ncap;
    }
    vpack_cpuset *c = malloc(sizeof(*c));
    if (c)
        pool->masks[pool->n++] = c;
    return c;
}

static void pool_free(struct mask_pool *pool)
{
    if (!pool)
        return;
    for (unsigned i = 0; i < pool->n; i++)
        free(pool->masks[i]);
    free(pool->masks);
    free(pool->pkg_masks);
    free(pool->bounds);
    free(pool);
}

void vpack_plan_free(struct vpack_plan *p)
{
    if (!p)
        return;
    for (unsigned i = 0; i < p->ndomains; i++) {
        struct vpack_plan_domain *d = &p->domains[i];
        free(d->name);
        free(d->packages);
        free(d->reason);
        free(d->vcpus);
        free(d->iothreads);
    }
    free(p->domains);
    free(p->active_packages);
    free(p->reason);
    pool_free(p->priv);
    free(p);
}

/* Everything one planning pass needs, so helpers take one pointer. */
struct planner {
    const struct vpack_topology *topo;
    const struct vpack_policy_params *par;
    const struct vpack_snapshot *snap;
    struct vpack_policy_state *st;
    unsigned P;
    double *cap, *load, *room;
    bool *forced, *was_active, *awake, *active;
    int *order;            /* package indexes in preference order */
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
    double movable_total;  /* load of managed domains that vpack places */
    double max_delay;      /* worst run-queue delay of a managed domain */
    double demand;
    unsigned nforced;      /* packages that guest pins keep awake */
    unsigned nlow;         /* fewest packages that hold the demand */

    /* Hysteresis: how many packages and why; the counters go to the next state. */
    unsigned ndemand;      /* package count chosen for the demand */
    bool spreading, lifted;
    enum vpack_plan_why why;
    char reason[256];
    unsigned over_count;
    uint64_t under_ms;
    double delay_demand;
    int wake;              /* wake-up package index, or -1 */

    /* Output: the plan and the next state's domains. */
    struct vpack_plan *plan;
    int *active_ids;
    struct dom_state *newdoms;
    unsigned nnew;
};

static int effective_level(const struct planner *pl, int level)
{
    return level < 0 ? pl->par->default_level : level;
}

static bool thread_pinned(const struct vpack_thread_sample *t)
{
    return t->pin != NULL;
}

/* Index of the one package holding every usable CPU of set, or -1. */
static int single_package(const struct planner *pl, const vpack_cpuset *set)
{
    int pkg = -1;
    for (unsigned p = 0; p < pl->P; p++) {
        if (vpack_cpuset_intersects(set, &pl->pkg_mask[p])) {
            if (pkg >= 0)
                return -1;
            pkg = (int)p;
        }
    }
    return pkg;
}

static int pkg_pref_cmp(const void *a, const void *b, void *ctx)
{
    const struct planner *pl = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    if (pl->forced[x] != pl->forced[y])
        return pl->forced[x] ? -1 : 1;
    if (pl->was_active[x] != pl->was_active[y])
        return pl->was_active[x] ? -1 : 1;
    if (pl->awake[x] != pl->awake[y])
        return pl->awake[x] ? -1 : 1;
    return pl->topo->packages[x].id - pl->topo->packages[y].id;
}

static int dom_order_cmp(const void *a, const void *b)
{
    const struct dom_info *x = *(const struct dom_info *const *)a;
    const struct dom_info *y = *(const struct dom_info *const *)b;
    if (fabs(x->movable - y->movable) > EPS)
        return x->movable > y->movable ? -1 : 1;
    return strcmp(x->d->name, y->d->name);
}

/* Works out a domain's level, bound, demand split and memory home. */
static void describe_domain(struct planner *pl, struct dom_info *di, vpack_cpuset *bound_store)
{
    const struct vpack_domain_sample *d = di->d;
    const struct vpack_policy_params *par = pl->par;
    bool any_free = false;

    di->level = effective_level(pl, d->level);
    di->mem_home = -1;
    if (d->cpuset) {
        vpack_cpuset_and(bound_store, d->cpuset, &pl->topo->cpus);
        di->bound_is_all = vpack_cpuset_equal(bound_store, &pl->topo->cpus);
        di->bound = di->bound_is_all ? &pl->pool->all : bound_store;
    } else {
        di->bound_is_all = true;
        di->bound = &pl->pool->all;
    }

    for (unsigned i = 0; i < d->nvcpus; i++) {
        const struct vpack_thread_sample *t = &d->vcpus[i];
        di->total += t->util;
        if (t->delay > di->max_delay)
            di->max_delay = t->delay;
        if (thread_pinned(t))
            continue;
        any_free = true;
        if (t->util >= par->busy_vcpu)
            di->movable += t->util;
        else if (di->level >= 2)
            di->light += t->util;
    }
    di->total += d->emulator.util;
    if (!thread_pinned(&d->emulator)) {
        any_free = true;
        if (di->level >= 2)
            di->light += d->emulator.util;
        else
            di->movable += d->emulator.util;
    }
    for (unsigned i = 0; i < d->niothreads; i++) {
        const struct vpack_thread_sample *t = &d->iothreads[i];
        di->total += t->util;
        if (!thread_pinned(t)) {
            any_free = true;
            if (di->level >= 2)
                di->light += t->util;
        }
    }

    if (di->level < 1)
        snprintf(di->reason, sizeof(di->reason), "level 0: not managed");
    else if (vpack_cpuset_empty(di->bound))
        snprintf(di->reason, sizeof(di->reason),
                 "not managed: its cpuset has no usable CPU on this host");
    else if (!any_free)
        snprintf(di->reason, sizeof(di->reason), "kept: the guest pins every thread");
    else
        di->managed = true;

    /* The package whose NUMA nodes hold at least half the domain's memory. */
    for (unsigned p = 0; p < pl->P && d->nmemory; p++) {
        const struct vpack_package *pkg = &pl->topo->packages[p];
        double share = 0;
        for (unsigned m = 0; m < d->nmemory; m++)
            for (unsigned n = 0; n < pkg->nnuma; n++)
                if (pkg->numa_nodes[n] == d->memory[m].node)
                    share += d->memory[m].share;
        if (share >= 0.5 - EPS) {
            di->mem_home = (int)p;
            break;
        }
    }
}

static bool pkgs_in_active(const struct planner *pl, const struct dom_state *ds)
{
    for (unsigned i = 0; i < ds->npkgs; i++) {
        int p = vpack_topology_package_index(pl->topo, ds->pkgs[i]);
        if (p < 0 || !pl->active[p])
            return false;
    }
    return ds->npkgs > 0;
}

static double room_of(const struct planner *pl, const int *pk, unsigned n)
{
    double r = 0;
    for (unsigned i = 0; i < n; i++)
        r += pl->room[pk[i]];
    return r;
}

static void take_room(struct planner *pl, const int *pk, unsigned n, double amount)
{
    double total = 0;
    for (unsigned i = 0; i < n; i++)
        total += pl->room[pk[i]] > 0 ? pl->room[pk[i]] : 0;
    for (unsigned i = 0; i < n; i++) {
        double share = total > EPS ? (pl->room[pk[i]] > 0 ? pl->room[pk[i]] : 0) / total
                                   : 1.0 / n;
        pl->room[pk[i]] -= amount * share;
    }
}

static int room_desc_cmp(const void *a, const void *b, void *ctx)
{
    const struct planner *pl = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    double rx = floor(pl->room[x] / ROOM_STEP + EPS), ry = floor(pl->room[y] / ROOM_STEP + EPS);
    if (rx != ry)
        return rx > ry ? -1 : 1;
    return pl->topo->packages[x].id - pl->topo->packages[y].id;
}

/* Formats package ids of the indexes in pk as "0,1". */
static void fmt_pkgs(const struct planner *pl, const int *pk, unsigned n, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < n && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%d", i ? "," : "",
                                pl->topo->packages[pk[i]].id);
}

/* "held on package 0: placed 12 s ago (minimum residency 60 s)" */
static void held_reason(const struct planner *pl, struct dom_info *di)
{
    char pk[128];

    fmt_pkgs(pl, di->pk, di->npk, pk, sizeof(pk));
    snprintf(di->reason, sizeof(di->reason),
             "held on package%s %s: placed %llu s ago (minimum residency %u s)",
             di->npk > 1 ? "s" : "", pk,
             (unsigned long long)((pl->now - di->prev->placed_ms) / 1000),
             pl->par->min_residency_ms / 1000);
}

/* Its bound lies wholly in parked packages: wake the first of them, if it has load. */
static void wake_parked(struct planner *pl, struct dom_info *di)
{
    char pk[128];

    for (unsigned i = 0; i < pl->P; i++) {
        int p = pl->order[i];
        if (!vpack_cpuset_intersects(&pl->pkg_mask[p], di->bound))
            continue;
        /* Only load wakes a package; an idle domain may sit on a parked one. */
        if (di->movable + di->light < PINNED_AWAKE_UTIL) {
            snprintf(di->reason, sizeof(di->reason),
                     "idle, and its cpuset allows only parked package %d: left within "
                     "its cpuset, the package stays parked",
                     pl->topo->packages[p].id);
            return;
        }
        pl->active[p] = true;
        di->pk[di->npk++] = p;
        pl->room[p] -= di->movable;
        fmt_pkgs(pl, di->pk, di->npk, pk, sizeof(pk));
        snprintf(di->reason, sizeof(di->reason),
                 "on package %s: its cpuset allows no active package", pk);
        return;
    }
    /* not reached: the bound is non-empty */
}

/* Sticky: it stays where it is if that still fits, or if it may not move yet. */
static bool stay_put(struct planner *pl, struct dom_info *di)
{
    const struct dom_state *prev = di->prev;
    int tmp[64];
    unsigned n = 0;
    bool in_bound = true;
    char pk[128];

    if (!prev || !prev->npkgs || !pkgs_in_active(pl, prev))
        return false;
    for (unsigned i = 0; i < prev->npkgs && n < 64; i++) {
        int p = vpack_topology_package_index(pl->topo, prev->pkgs[i]);
        if (!vpack_cpuset_intersects(&pl->pkg_mask[p], di->bound))
            in_bound = false;
        tmp[n++] = p;
    }
    double room = room_of(pl, tmp, n);
    bool young = pl->now - prev->placed_ms < pl->par->min_residency_ms;
    /* A multi-package domain that now fits one package is re-packed. */
    bool shrink = n > 1 && !young;
    if (!in_bound || shrink || (room + EPS < di->movable && (!young || pl->spreading)))
        return false;
    memcpy(di->pk, tmp, n * sizeof(*tmp));
    di->npk = n;
    take_room(pl, di->pk, di->npk, di->movable);
    if (room + EPS < di->movable) {
        held_reason(pl, di);
        return true;
    }
    fmt_pkgs(pl, di->pk, di->npk, pk, sizeof(pk));
    snprintf(di->reason, sizeof(di->reason), "stays on package%s %s: %.2f CPUs fit",
             n > 1 ? "s" : "", pk, di->movable);
    return true;
}

/* One package where it fits: the memory home first, then preference order. */
static bool place_one(struct planner *pl, struct dom_info *di, unsigned nc)
{
    int one = -1;
    char pk[128];

    if (di->mem_home >= 0 && pl->active[di->mem_home] &&
        vpack_cpuset_intersects(&pl->pkg_mask[di->mem_home], di->bound) &&
        pl->room[di->mem_home] + EPS >= di->movable)
        one = di->mem_home;
    for (unsigned i = 0; i < nc && one < 0; i++)
        if (pl->room[pl->cand[i]] + EPS >= di->movable)
            one = pl->cand[i];
    if (one < 0)
        return false;
    di->pk[di->npk++] = one;
    pl->room[one] -= di->movable;
    fmt_pkgs(pl, di->pk, di->npk, pk, sizeof(pk));
    snprintf(di->reason, sizeof(di->reason), "packed on package %s: %.2f CPUs fit%s", pk,
             di->movable, one == di->mem_home ? ", where its memory is" : "");
    return true;
}

/* Too big for one package: the fewest packages, those with most room first. */
static void place_across(struct planner *pl, struct dom_info *di, unsigned nc)
{
    double got = 0;
    char pk[128];

    qsort_r(pl->cand, nc, sizeof(*pl->cand), room_desc_cmp, pl);
    for (unsigned i = 0; i < nc && got + EPS < di->movable; i++) {
        di->pk[di->npk++] = pl->cand[i];
        got += pl->room[pl->cand[i]] > 0 ? pl->room[pl->cand[i]] : 0;
    }
    take_room(pl, di->pk, di->npk, di->movable);
    fmt_pkgs(pl, di->pk, di->npk, pk, sizeof(pk));
    if (got + EPS >= di->movable)
        snprintf(di->reason, sizeof(di->reason),
                 "spread over packages %s: %.2f CPUs do not fit one package", pk, di->movable);
    else
        snprintf(di->reason, sizeof(di->reason),
                 "over packages %s: %.2f CPUs exceed the room of the active packages", pk,
                 di->movable);
}

/* Places one managed domain on active packages (rule 7). Returns 0 or -ENOMEM. */
static int place_domain(struct planner *pl, struct dom_info *di)
{
    unsigned nc = 0;

    di->pk = calloc(pl->P, sizeof(*di->pk));
    if (!di->pk)
        return -ENOMEM;
    for (unsigned i = 0; i < pl->P; i++) {
        int p = pl->order[i];
        if (pl->active[p] && vpack_cpuset_intersects(&pl->pkg_mask[p], di->bound))
            pl->cand[nc++] = p;
    }
    if (nc == 0)
        wake_parked(pl, di);
    else if (!stay_put(pl, di) && !place_one(pl, di, nc))
        place_across(pl, di, nc);
    return 0;
}

/* Chooses the preferred wake-up package among active ones (rule 8). */
static int choose_wakeup(struct planner *pl)
{
    int prev = pl->st->wakeup_id >= 0 ? vpack_topology_package_index(pl->topo, pl->st->wakeup_id)
                                      : -1;
    if (prev >= 0 && pl->active[prev] && pl->room[prev] >= -EPS)
        return prev;
    int best = -1;
    for (unsigned p = 0; p < pl->P; p++) {
        if (!pl->active[p])
            continue;
        if (best < 0) {
            best = (int)p;
            continue;
        }
        double rb = floor(pl->room[best] / ROOM_STEP + EPS), rp = floor(pl->room[p] / ROOM_STEP + EPS);
        if (rp > rb || (rp == rb && pl->topo->packages[p].id < pl->topo->packages[best].id))
            best = (int)p;
    }
    return best;
}

/* Records a domain's placement in the next state; returns -ENOMEM. */
static int remember(struct planner *pl, const char *name, const int *ids, unsigned nids,
                    uint64_t placed)
{
    struct dom_state *ds = &pl->newdoms[pl->nnew];
    ds->name = strdup(name);
    ds->pkgs = malloc((nids ? nids : 1) * sizeof(int));
    if (!ds->name || !ds->pkgs) {
        free(ds->name);
        free(ds->pkgs);
        return -ENOMEM;
    }
    memcpy(ds->pkgs, ids, nids * sizeof(int));
    ds->npkgs = nids;
    ds->placed_ms = placed;
    ds->seen = pl->st->generation;
    pl->nnew++;
    return 0;
}

static bool same_pkgs(const struct dom_state *prev, const int *ids, unsigned n)
{
    if (!prev || prev->npkgs != n)
        return false;
    for (unsigned i = 0; i < n; i++) {
        bool found = false;
        for (unsigned j = 0; j < n && !found; j++)
            found = prev->pkgs[j] == ids[i];
        if (!found)
            return false;
    }
    return true;
}

/* Fills one plan thread: its pin when pinned, else mask. */
static int set_thread(struct planner *pl, struct vpack_plan_thread *pt,
                      const struct vpack_thread_sample *t, const vpack_cpuset *mask,
                      const vpack_cpuset *free_mask)
{
    pt->id = t->id;
    if (t->pin) {
        vpack_cpuset *c = pool_new(pl->pool);
        if (!c)
            return -ENOMEM;
        *c = *t->pin;
        pt->cpus = c;
        pt->restricted = false;
        return 0;
    }
    pt->cpus = mask;
    pt->restricted = mask != free_mask && !vpack_cpuset_equal(mask, free_mask);
    return 0;
}

static const vpack_cpuset *union_mask(struct planner *pl, const struct dom_info *di)
{
    if (di->npk == 1 && di->bound_is_all)
        return &pl->pkg_mask[di->pk[0]];
    vpack_cpuset *c = pool_new(pl->pool);
    if (!c)
        return NULL;
    vpack_cpuset_zero(c);
    for (unsigned i = 0; i < di->npk; i++)
        vpack_cpuset_or(c, c, &pl->pkg_mask[di->pk[i]]);
    vpack_cpuset_and(c, c, di->bound);
    if (vpack_cpuset_empty(c))
        *c = *di->bound;
    return c;
}

static int build_domain(struct planner *pl, struct dom_info *di, struct vpack_plan_domain *out)
{
    const struct vpack_domain_sample *d = di->d;
    const vpack_cpuset *bound = di->bound;
    const vpack_cpuset *pmask = bound, *wmask = bound;
    bool restrict_ = di->managed && !pl->lifted;
    const int wake = pl->wake;
    int *ids = pl->ids;
    unsigned nids = 0;
    int r;

    if (vpack_cpuset_empty(bound)) {
        /* Not manageable: hand back what the domain asked for, else everything. */
        vpack_cpuset *c = pool_new(pl->pool);
        if (!c)
            return -ENOMEM;
        *c = d->cpuset ? *d->cpuset : pl->topo->cpus;
        bound = pmask = wmask = c;
    }
    if (restrict_) {
        pmask = union_mask(pl, di);
        if (!pmask)
            return -ENOMEM;
        if (di->level >= 2 && wake >= 0 && !di->held) {
            if (di->bound_is_all) {
                wmask = &pl->pkg_mask[wake];
            } else {
                vpack_cpuset *c = pool_new(pl->pool);
                if (!c)
                    return -ENOMEM;
                vpack_cpuset_and(c, &pl->pkg_mask[wake], bound);
                if (vpack_cpuset_empty(c))
                    *c = *pmask;
                wmask = c;
            }
        }
        for (unsigned i = 0; i < di->npk; i++)
            ids[nids++] = pl->topo->packages[di->pk[i]].id;
    } else {
        for (unsigned p = 0; p < pl->P; p++)
            if (vpack_cpuset_intersects(&pl->pkg_mask[p], bound))
                ids[nids++] = pl->topo->packages[p].id;
    }

    out->name = strdup(d->name);
    out->level = di->level;
    out->moved = di->moved;
    out->reason = strdup(di->reason);
    out->npackages = nids;
    out->packages = malloc((nids ? nids : 1) * sizeof(int));
    out->vcpus = calloc(d->nvcpus ? d->nvcpus : 1, sizeof(*out->vcpus));
    out->iothreads = calloc(d->niothreads ? d->niothreads : 1, sizeof(*out->iothreads));
    if (!out->name || !out->reason || !out->packages || !out->vcpus || !out->iothreads)
        return -ENOMEM;
    memcpy(out->packages, ids, nids * sizeof(int));
    out->nvcpus = d->nvcpus;
    out->niothreads = d->niothreads;

    for (unsigned i = 0; i < d->nvcpus; i++) {
        const struct vpack_thread_sample *t = &d->vcpus[i];
        const vpack_cpuset *m = bound;
        if (restrict_)
            m = t->util >= pl->par->busy_vcpu ? pmask : (di->level >= 2 ? wmask : bound);
        if ((r = set_thread(pl, &out->vcpus[i], t, m, bound)) < 0)
            return r;
    }
    const vpack_cpuset *em = restrict_ ? (di->level >= 2 ? wmask : pmask) : bound;
    if ((r = set_thread(pl, &out->emulator, &d->emulator, em, bound)) < 0)
        return r;
    out->emulator.id = -1;
    for (unsigned i = 0; i < d->niothreads; i++) {
        const vpack_cpuset *m = restrict_ && di->level >= 2 ? wmask : bound;
        if ((r = set_thread(pl, &out->iothreads[i], &d->iothreads[i], m, bound)) < 0)
            return r;
    }
    return 0;
}

const char *vpack_plan_why_name(enum vpack_plan_why why)
{
    static const char *const names[VPACK_WHY_N] = {"first", "pack", "spread", "other"};
    return (unsigned)why < VPACK_WHY_N ? names[why] : "other";
}


/* Allocates the planner's arrays and the plan, which owns the mask pool. */
static int planner_alloc(struct planner *pl)
{
    const unsigned P = pl->P, nd = pl->snap->ndomains ? pl->snap->ndomains : 1;

    pl->cap = calloc(P, sizeof(double));
    pl->load = calloc(P, sizeof(double));
    pl->room = calloc(P, sizeof(double));
    pl->forced = calloc(P, sizeof(bool));
    pl->was_active = calloc(P, sizeof(bool));
    pl->awake = calloc(P, sizeof(bool));
    pl->active = calloc(P, sizeof(bool));
    pl->order = calloc(P, sizeof(int));
    pl->pool = calloc(1, sizeof(*pl->pool));
    if (pl->pool) {
        /* Plan masks point into these, so the plan owns them. */
        pl->pool->pkg_masks = calloc(P, sizeof(vpack_cpuset));
        pl->pool->bounds = malloc(nd * sizeof(vpack_cpuset));
        pl->pool->all = pl->topo->cpus;
        pl->pkg_mask = pl->pool->pkg_masks;
        pl->bounds = pl->pool->bounds;
    }
    pl->di = calloc(nd, sizeof(*pl->di));
    pl->sorted = calloc(nd, sizeof(*pl->sorted));
    pl->cand = calloc(P, sizeof(int));
    pl->ids = calloc(P, sizeof(int));
    pl->active_ids = calloc(P, sizeof(int));
    pl->newdoms = calloc(nd, sizeof(*pl->newdoms));
    pl->plan = calloc(1, sizeof(*pl->plan));
    if (!pl->cap || !pl->load || !pl->room || !pl->forced || !pl->was_active || !pl->awake ||
        !pl->active || !pl->order || !pl->pkg_mask || !pl->pool || !pl->di || !pl->sorted ||
        !pl->bounds || !pl->cand || !pl->ids || !pl->active_ids || !pl->newdoms || !pl->plan)
        return -ENOMEM;
    pl->plan->priv = pl->pool;
    pl->plan->wakeup_package = -1;
    return 0;
}

/* Frees what the planner holds; the plan too unless it was handed out. */
static void planner_free(struct planner *pl, int ret)
{
    if (pl->newdoms) {
        for (unsigned i = 0; i < pl->nnew; i++)
            dom_state_clear(&pl->newdoms[i]);
        free(pl->newdoms);
    }
    if (pl->di)
        for (unsigned i = 0; i < pl->snap->ndomains; i++)
            free(pl->di[i].pk);
    if (pl->plan) {
        if (!pl->plan->priv)
            pool_free(pl->pool);
        vpack_plan_free(pl->plan);
    } else if (ret < 0) {
        pool_free(pl->pool);
    }
    free(pl->cap);
    free(pl->load);
    free(pl->room);
    free(pl->forced);
    free(pl->was_active);
    free(pl->awake);
    free(pl->active);
    free(pl->order);
    free(pl->di);
    free(pl->sorted);
    free(pl->cand);
    free(pl->ids);
    free(pl->active_ids);
}

/* Per-package capacity (physical cores), usable CPUs, load, and the previous plan. */
static void observe_packages(struct planner *pl)
{
    const struct vpack_topology *topo = pl->topo;
    const struct vpack_snapshot *snap = pl->snap;

    for (unsigned p = 0; p < pl->P; p++) {
        pl->cap[p] = topo->packages[p].ncores ? topo->packages[p].ncores : 1;
        pl->pkg_mask[p] = topo->packages[p].cpus;
        pl->order[p] = (int)p;
    }
    for (unsigned c = 0; c < snap->ncpus; c++) {
        int p = vpack_topology_package_of(topo, (int)c);
        if (p < 0 || snap->cpu_busy[c] < 0)
            continue;
        double b = snap->cpu_busy[c] > 1 ? 1 : snap->cpu_busy[c];
        pl->load[p] += b;
        pl->total_busy += b;
    }
    for (unsigned i = 0; i < pl->st->nactive; i++) {
        int p = vpack_topology_package_index(topo, pl->st->active_ids[i]);
        if (p >= 0)
            pl->was_active[p] = true;
    }
}

/* Packages that a busy guest-pinned thread of d keeps awake: its pin lies in one package. */
static void mark_pinned_awake(struct planner *pl, const struct vpack_domain_sample *d)
{
    for (unsigned j = 0; j < d->nvcpus + d->niothreads + 1; j++) {
        const struct vpack_thread_sample *t =
            j < d->nvcpus ? &d->vcpus[j]
                          : (j == d->nvcpus ? &d->emulator : &d->iothreads[j - d->nvcpus - 1]);
        if (t->pin && t->util >= PINNED_AWAKE_UTIL / 2) {
            vpack_cpuset usable;
            vpack_cpuset_and(&usable, t->pin, &pl->topo->cpus);
            int p = single_package(pl, &usable);
            /* Hysteresis: an active package stays awake down to half the threshold. */
            if (p >= 0 &&
                t->util >= (pl->was_active[p] ? PINNED_AWAKE_UTIL / 2 : PINNED_AWAKE_UTIL))
                pl->forced[p] = true;
        }
    }
}

static void describe_domains(struct planner *pl)
{
    for (unsigned i = 0; i < pl->snap->ndomains; i++) {
        struct dom_info *di = &pl->di[i];
        di->d = &pl->snap->domains[i];
        describe_domain(pl, di, &pl->bounds[i]);
        di->prev = state_find(pl->st, di->d->name);
        pl->threads_total += di->total;
        if (di->managed) {
            pl->movable_total += di->movable + di->light;
            if (di->max_delay > pl->max_delay)
                pl->max_delay = di->max_delay;
        }
        mark_pinned_awake(pl, di->d);
    }
}

/* The fewest packages, in preference order, whose cores * share hold the demand. */
static unsigned packages_for(const struct planner *pl, double share)
{
    double acc = 0;
    for (unsigned i = 0; i < pl->P; i++) {
        acc += pl->cap[pl->order[i]] * share;
        if (acc + EPS >= pl->demand)
            return i + 1;
    }
    return pl->P;
}

/* The demand, the preference order (rule 5) and the lower bound (rule 4). */
static void size_demand(struct planner *pl)
{
    pl->demand = pl->total_busy > pl->threads_total ? pl->total_busy : pl->threads_total;
    for (unsigned p = 0; p < pl->P; p++) {
        pl->awake[p] = pl->load[p] >= AWAKE_SHARE * pl->cap[p];
        pl->nforced += pl->forced[p];
    }
    qsort_r(pl->order, pl->P, sizeof(int), pkg_pref_cmp, pl);
    pl->nlow = packages_for(pl, pl->par->pack_watermark);
}

static void spread_to(struct planner *pl, unsigned nprev, bool over_load, double cap_prev)
{
    const struct vpack_policy_params *par = pl->par;

    pl->ndemand = pl->nlow > nprev + 1 ? pl->nlow : nprev + 1;
    pl->spreading = true;
    pl->why = VPACK_WHY_SPREAD;
    /* Delay spread at a load the watermarks call light: packing again
     * at the same load would only bring the delay back. */
    pl->delay_demand = over_load ? 0 : pl->demand;
    pl->over_count = 0;
    pl->under_ms = 0;
    if (over_load)
        snprintf(pl->reason, sizeof(pl->reason),
                 "spread to %u of %u packages: load %.2f CPUs over %.0f%% of %.0f cores",
                 pl->ndemand, pl->P, pl->demand, par->spread_watermark * 100, cap_prev);
    else
        snprintf(pl->reason, sizeof(pl->reason),
                 "spread to %u of %u packages: run-queue delay %.0f%% over %.0f%%", pl->ndemand,
                 pl->P, pl->max_delay * 100, par->delay_threshold * 100);
}

/* The lower bound stays under the active count: pack once it has for pack_delay_ms. */
static void pack_later(struct planner *pl)
{
    const struct vpack_policy_params *par = pl->par;

    pl->under_ms += pl->snap->interval_ms;
    if (pl->under_ms >= par->pack_delay_ms) {
        pl->ndemand = pl->nlow;
        pl->under_ms = 0;
        pl->delay_demand = 0;
        pl->why = VPACK_WHY_PACK;
        snprintf(pl->reason, sizeof(pl->reason),
                 "packed to %u of %u packages: load %.2f CPUs stayed low for %u ms", pl->ndemand,
                 pl->P, pl->demand, par->pack_delay_ms);
    } else {
        snprintf(pl->reason, sizeof(pl->reason),
                 "%u of %u packages: load %.2f CPUs would fit %u, packing in %llu ms", pl->ndemand,
                 pl->P, pl->demand, pl->nlow,
                 (unsigned long long)(par->pack_delay_ms - pl->under_ms));
    }
}

static void hold(struct planner *pl, unsigned nprev)
{
    const unsigned n = pl->ndemand, P = pl->P;

    pl->under_ms = 0;
    if (pl->nlow < nprev && pl->delay_demand > 0 && pl->demand >= 0.75 * pl->delay_demand)
        snprintf(pl->reason, sizeof(pl->reason),
                 "%u of %u packages: load %.2f CPUs is still 75%% or more of the %.2f "
                 "CPUs at which vCPUs queued when packed",
                 n, P, pl->demand, pl->delay_demand);
    else if (pl->over_count)
        snprintf(pl->reason, sizeof(pl->reason),
                 "%u of %u packages: over the spread trigger %u of %u samples", n, P,
                 pl->over_count, pl->par->spread_samples);
    else
        snprintf(pl->reason, sizeof(pl->reason), "%u of %u packages: load %.2f CPUs", n, P,
                 pl->demand);
}

/* How many packages the demand needs (rule 4): spread fast, pack slowly. */
static void choose_count(struct planner *pl)
{
    const struct vpack_policy_state *st = pl->st;
    const struct vpack_policy_params *par = pl->par;
    const unsigned P = pl->P;

    pl->why = VPACK_WHY_HOLD;
    pl->over_count = st->over_count;
    pl->under_ms = st->under_ms;
    pl->delay_demand = st->delay_demand;
    if (!st->initialized || st->ndemand == 0) {
        pl->ndemand = pl->nlow;
        pl->over_count = 0;
        pl->under_ms = 0;
        pl->why = VPACK_WHY_FIRST;
        snprintf(pl->reason, sizeof(pl->reason),
                 "first plan: load %.2f CPUs needs %u of %u packages", pl->demand, pl->ndemand, P);
        return;
    }
    unsigned nprev = st->ndemand > P ? P : st->ndemand;
    /* The first nprev packages in preference order are the ones sized for the
     * demand; packages only pins keep awake come on top and do not count. */
    double cap_prev = 0;
    for (unsigned i = 0; i < nprev; i++)
        cap_prev += pl->cap[pl->order[i]];
    bool over_load = packages_for(pl, par->spread_watermark) > nprev;
    bool over_all = pl->demand > cap_prev + EPS;
    bool over_delay = pl->max_delay > par->delay_threshold;
    /* With every package active there is nowhere to spread to. */
    pl->over_count = (over_load || over_delay) && nprev < P ? pl->over_count + 1 : 0;
    pl->ndemand = nprev;
    if (nprev < P && (over_all || pl->over_count >= par->spread_samples))
        spread_to(pl, nprev, over_load, cap_prev);
    else if (pl->nlow < nprev && !over_load && pl->max_delay <= par->delay_threshold / 2 &&
             (pl->delay_demand <= 0 || pl->demand < 0.75 * pl->delay_demand))
        pack_later(pl);
    else
        hold(pl, nprev);
}

/* A domain placed recently keeps its packages awake while packing (rule 4). */
static void hold_resident(struct planner *pl)
{
    for (unsigned i = 0; i < pl->snap->ndomains; i++) {
        struct dom_info *di = &pl->di[i];
        const struct dom_state *ds = di->prev;
        if (!di->managed || !ds || pl->now - ds->placed_ms >= pl->par->min_residency_ms)
            continue;
        for (unsigned k = 0; k < ds->npkgs; k++) {
            int p = vpack_topology_package_index(pl->topo, ds->pkgs[k]);
            if (p >= 0 && !pl->active[p]) {
                pl->active[p] = true;
                size_t len = strlen(pl->reason);
                snprintf(pl->reason + len, sizeof(pl->reason) - len,
                         "; package %d held for %s (minimum residency)",
                         pl->topo->packages[p].id, di->d->name);
            }
        }
    }
}

/* Activates the chosen packages, those pins keep awake and held ones (rules 4-6). */
static void activate_packages(struct planner *pl)
{
    const unsigned P = pl->P;
    unsigned n = pl->ndemand;

    /* One package: lifted once its load passes the pack watermark. */
    pl->lifted = n >= P && (P > 1 || pl->demand > pl->par->pack_watermark * pl->cap[0] + EPS);
    if (pl->nforced > n)
        n = pl->nforced;
    if (pl->lifted)
        n = P;
    for (unsigned i = 0; i < n && i < P; i++)
        pl->active[pl->order[i]] = true;
    if (pl->lifted) {
        size_t len = strlen(pl->reason);
        snprintf(pl->reason + len, sizeof(pl->reason) - len,
                 "; all %u packages active: restrictions lifted", P);
    } else if (!pl->spreading) {
        hold_resident(pl);
    }
}

/* Room: what each package can take beyond the load vpack cannot move. */
static void set_room(struct planner *pl)
{
    double fixed_share = pl->total_busy > EPS ? 1 - pl->movable_total / pl->total_busy : 1;
    if (fixed_share < 0)
        fixed_share = 0;
    for (unsigned p = 0; p < pl->P; p++)
        pl->room[p] = pl->cap[p] * pl->par->spread_watermark - pl->load[p] * fixed_share;
}

/* Places managed domains, largest first (rule 7); lifted ones only get a reason. */
static int place_managed(struct planner *pl)
{
    int ret;

    for (unsigned i = 0; i < pl->snap->ndomains; i++) {
        struct dom_info *di = &pl->di[i];
        if (di->managed && pl->lifted)
            snprintf(di->reason, sizeof(di->reason),
                     "unrestricted: all %u packages active (load %.2f CPUs)", pl->P, pl->demand);
        else if (di->managed)
            pl->sorted[pl->nsorted++] = di;
    }
    qsort(pl->sorted, pl->nsorted, sizeof(*pl->sorted), dom_order_cmp);
    for (unsigned i = 0; i < pl->nsorted; i++) {
        struct dom_info *di = pl->sorted[i];
        if (di->level >= 2 && di->movable <= EPS)
            continue; /* all light: it follows the wake-up package */
        if ((ret = place_domain(pl, di)) < 0)
            return ret;
    }
    return 0;
}

/*
 * A level 2 domain placed less than min_residency_ms ago stays where it is
 * unless that is the wake-up package. Returns 1 when held, 0, or -ENOMEM.
 */
static int hold_light(struct planner *pl, struct dom_info *di)
{
    const struct dom_state *ds = di->prev;

    if (!ds || !ds->npkgs || pl->spreading ||
        pl->now - ds->placed_ms >= pl->par->min_residency_ms || !pkgs_in_active(pl, ds))
        return 0;
    /* Already on the wake-up package: it goes there like the others. */
    if (ds->npkgs == 1 && vpack_topology_package_index(pl->topo, ds->pkgs[0]) == pl->wake)
        return 0;
    di->pk = calloc(ds->npkgs, sizeof(int));
    if (!di->pk)
        return -ENOMEM;
    for (unsigned k = 0; k < ds->npkgs; k++)
        di->pk[di->npk++] = vpack_topology_package_index(pl->topo, ds->pkgs[k]);
    di->held = true;
    take_room(pl, di->pk, di->npk, di->light);
    held_reason(pl, di);
    return 1;
}

/* Level 2: light threads go to the wake-up package (rule 8). */
static int place_light(struct planner *pl)
{
    int ret;

    if (pl->lifted)
        return 0;
    pl->wake = choose_wakeup(pl);
    for (unsigned i = 0; i < pl->nsorted && pl->wake >= 0; i++) {
        struct dom_info *di = pl->sorted[i];
        if (di->level < 2)
            continue;
        if (di->pk) {
            pl->room[pl->wake] -= di->light;
            continue;
        }
        if ((ret = hold_light(pl, di)) != 0) {
            if (ret < 0)
                return ret;
            continue;
        }
        pl->room[pl->wake] -= di->light;
        if (!vpack_cpuset_intersects(&pl->pkg_mask[pl->wake], di->bound)) {
            /* Its bound excludes the wake-up package: place it like the others. */
            if ((ret = place_domain(pl, di)) < 0)
                return ret;
            continue;
        }
        di->pk = calloc(1, sizeof(int));
        if (!di->pk)
            return -ENOMEM;
        di->pk[di->npk++] = pl->wake;
        snprintf(di->reason, sizeof(di->reason), "on wake-up package %d: light load (%.2f CPUs)",
                 pl->topo->packages[pl->wake].id, di->light);
    }
    return 0;
}

/* Fills the plan and the next state's domains. Returns -ENOMEM, or -EINVAL for duplicate names. */
static int build_plan(struct planner *pl)
{
    const struct vpack_topology *topo = pl->topo;
    struct vpack_plan *plan = pl->plan;
    unsigned nactive = 0;
    int ret;

    for (unsigned p = 0; p < pl->P; p++)
        nactive += pl->active[p];
    plan->active_packages = malloc(nactive * sizeof(int) + sizeof(int));
    plan->domains = calloc(pl->snap->ndomains ? pl->snap->ndomains : 1, sizeof(*plan->domains));
    plan->reason = strdup(pl->reason);
    if (!plan->active_packages || !plan->domains || !plan->reason)
        return -ENOMEM;
    plan->demand = pl->demand;
    plan->why = pl->why;
    plan->lifted = pl->lifted;
    plan->wakeup_package = pl->wake >= 0 ? topo->packages[pl->wake].id : -1;
    for (unsigned i = 0; i < pl->P; i++)
        if (pl->active[pl->order[i]]) {
            pl->active_ids[plan->nactive] = topo->packages[pl->order[i]].id;
            plan->active_packages[plan->nactive++] = topo->packages[pl->order[i]].id;
        }

    for (unsigned i = 0; i < pl->snap->ndomains; i++) {
        struct dom_info *di = &pl->di[i];
        struct vpack_plan_domain *pd = &plan->domains[i];
        plan->ndomains = i + 1;
        if ((ret = build_domain(pl, di, pd)) < 0)
            return ret;
        if (!di->managed)
            continue;
        pd->moved = !same_pkgs(di->prev, pd->packages, pd->npackages);
        uint64_t placed = pd->moved || !di->prev ? pl->now : di->prev->placed_ms;
        if ((ret = remember(pl, di->d->name, pd->packages, pd->npackages, placed)) < 0)
            return ret;
    }
    qsort(pl->newdoms, pl->nnew, sizeof(*pl->newdoms), dom_state_cmp);
    for (unsigned i = 1; i < pl->nnew; i++)
        if (!strcmp(pl->newdoms[i - 1].name, pl->newdoms[i].name))
            return -EINVAL; /* duplicate domain names */
    return 0;
}

/* Moves the next state into st: nothing can fail here. */
static void commit_state(struct planner *pl)
{
    struct vpack_policy_state *st = pl->st;

    for (unsigned i = 0; i < st->ndoms; i++)
        dom_state_clear(&st->doms[i]);
    free(st->doms);
    st->doms = pl->newdoms;
    st->ndoms = pl->nnew;
    pl->newdoms = NULL;
    free(st->active_ids);
    st->active_ids = pl->active_ids;
    st->nactive = pl->plan->nactive;
    pl->active_ids = NULL;
    st->initialized = true;
    st->now_ms = pl->now;
    st->over_count = pl->over_count;
    st->under_ms = pl->under_ms;
    st->delay_demand = pl->delay_demand;
    st->ndemand = pl->ndemand;
    st->wakeup_id = pl->plan->wakeup_package;
    st->generation++;
}

int vpack_plan_compute(const struct vpack_topology *topo, const struct vpack_policy_params *par,
                       const struct vpack_snapshot *snap, struct vpack_policy_state *st,
                       struct vpack_plan **out)
{
    struct planner pl = {.topo = topo, .par = par, .snap = snap, .st = st, .wake = -1};
    int ret;

    if (!topo || !par || !snap || !st || !out || topo->npackages == 0)
        return -EINVAL;
    *out = NULL;
    pl.P = topo->npackages;
    pl.now = st->now_ms + snap->interval_ms;

    if ((ret = planner_alloc(&pl)) < 0)
        goto cleanup;
    observe_packages(&pl);
    describe_domains(&pl);
    size_demand(&pl);
    choose_count(&pl);
    activate_packages(&pl);
    set_room(&pl);
    if ((ret = place_managed(&pl)) < 0 || (ret = place_light(&pl)) < 0 ||
        (ret = build_plan(&pl)) < 0)
        goto cleanup;
    commit_state(&pl);
    *out = pl.plan;
    pl.plan = NULL;

cleanup:
    planner_free(&pl, ret);
    return ret;
}
