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
/* A long-running vCPU stays one down to busy_vcpu * (1 - this); a light one
 * becomes long-running at busy_vcpu * (1 + this). */
#define BUSY_HYSTERESIS 0.15

struct dom_state {
    char *name;
    unsigned npkgs;
    int *pkgs;          /* package ids it was placed on */
    uint64_t placed_ms; /* policy time of its last move */
    unsigned seen;      /* generation it was last seen in */
    unsigned nbusy;
    unsigned char *busy; /* per vCPU position: long-running in the last plan */
};

struct vpack_policy_state {
    bool initialized;
    uint64_t now_ms;
    unsigned generation;
    unsigned over_count;   /* consecutive snapshots over the spread triggers */
    uint64_t under_ms;     /* how long the lower bound stayed under the active count */
    unsigned ndemand;      /* package count chosen for the demand (before pins/holds) */
    bool delay_spread;     /* the packages were last added for run-queue delay */
    bool delay_fruitless;  /* that spread moved no waiting domain: do not grow for delay */
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
    int mem_home;          /* package index holding >= half its memory, or -1 */
    int home;              /* package index where most of its placed load runs now, or -1 */
    int light_pk;          /* level 2: package index of its light vCPUs, -1: with the rest */
    struct dom_state *prev;
    unsigned npk;
    int *pk;               /* chosen package indexes */
    bool moved;
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
    return calloc(1, sizeof(struct vpack_policy_state));
}

static void dom_state_clear(struct dom_state *ds)
{
    free(ds->name);
    free(ds->pkgs);
    free(ds->busy);
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
        to->busy = NULL;
        if (!(to->name = strdup(from->name)))
            goto fail;
        if (from->nbusy && !(to->busy = malloc(from->nbusy))) {
            c->ndoms++;
            goto fail;
        }
        if (from->nbusy)
            memcpy(to->busy, from->busy, from->nbusy);
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
    double *cap;           /* physical cores with a usable CPU */
    double *load;          /* sum of its usable CPUs' busy fractions */
    double *own;           /* of that, load of threads vpack places (it moves with them) */
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
    unsigned nforced;      /* packages that pins and bounds keep awake */
    unsigned nlow;         /* fewest packages that hold the demand */

    /* Hysteresis: how many packages and why; the counters go to the next state. */
    unsigned ndemand;      /* package count chosen for the demand */
    bool spreading, lifted;
    bool delay_spreading;  /* this plan adds a package for run-queue delay */
    enum vpack_plan_why why;
    char reason[256];
    unsigned over_count;
    uint64_t under_ms;
    bool delay_spread, delay_fruitless;
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

static bool in_bound(const struct planner *pl, const struct dom_info *di, int p)
{
    return di->bound_is_all || vpack_cpuset_intersects(&pl->pkg_mask[p], di->bound);
}

/* Room a package offers an empty placement: its watermark minus the load vpack does not place. */
static double free_room(const struct planner *pl, int p)
{
    double other = pl->load[p] - pl->own[p];
    return pl->cap[p] * pl->par->spread_watermark - (other > 0 ? other : 0);
}

/*
 * Whether vCPU i of a domain is long-running: at busy_vcpu, with hysteresis
 * around it for a vCPU the previous plan classed (rule 8).
 */
static bool vcpu_busy(const struct planner *pl, const struct dom_info *di, unsigned i)
{
    const struct dom_state *ds = di->prev;
    double b = pl->par->busy_vcpu, u = di->d->vcpus[i].util;

    if (ds && ds->busy && ds->nbusy == di->d->nvcpus)
        return ds->busy[i] ? u >= b * (1 - BUSY_HYSTERESIS) - EPS
                           : u >= b * (1 + BUSY_HYSTERESIS) - EPS;
    return u >= b;
}

static int pkg_pref_cmp(const void *a, const void *b, void *ctx)
{
    const struct planner *pl = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    if (pl->forced[x] != pl->forced[y])
        return pl->forced[x] ? -1 : 1;
    if (pl->was_active[x] != pl->was_active[y])
        return pl->was_active[x] ? -1 : 1;
    if (fabs(pl->mem_w[x] - pl->mem_w[y]) > EPS)
        return pl->mem_w[x] > pl->mem_w[y] ? -1 : 1;
    if (pl->awake[x] != pl->awake[y])
        return pl->awake[x] ? -1 : 1;
    if (fabs(pl->own[x] - pl->own[y]) > EPS)
        return pl->own[x] > pl->own[y] ? -1 : 1;
    return pl->topo->packages[x].id - pl->topo->packages[y].id;
}

static int cap_desc_cmp(const void *a, const void *b, void *ctx)
{
    const struct planner *pl = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    if (pl->cap[x] != pl->cap[y])
        return pl->cap[x] > pl->cap[y] ? -1 : 1;
    return pkg_pref_cmp(a, b, ctx);
}

static int dom_order_cmp(const void *a, const void *b)
{
    const struct dom_info *x = *(const struct dom_info *const *)a;
    const struct dom_info *y = *(const struct dom_info *const *)b;
    if (fabs(x->movable - y->movable) > EPS)
        return x->movable > y->movable ? -1 : 1;
    if (fabs(x->light - y->light) > EPS)
        return x->light > y->light ? -1 : 1;
    return strcmp(x->d->name, y->d->name);
}

/* Works out a domain's level, bound, demand split and memory home. */
static void describe_domain(struct planner *pl, struct dom_info *di, vpack_cpuset *bound_store)
{
    const struct vpack_domain_sample *d = di->d;
    double light_vcpus = 0, others = 0;
    unsigned nbusy = 0;
    bool any_free = false;

    di->level = effective_level(pl, d->level);
    di->mem_home = -1;
    di->home = -1;
    di->light_pk = -1;
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
        if (thread_pinned(t))
            continue; /* vpack cannot move it: its delay is no reason to spread */
        any_free = true;
        if (t->delay > di->max_delay)
            di->max_delay = t->delay;
        if (vcpu_busy(pl, di, i)) {
            di->movable += t->util;
            nbusy++;
        } else {
            light_vcpus += t->util;
        }
    }
    di->total += d->emulator.util;
    if (!thread_pinned(&d->emulator)) {
        any_free = true;
        others += d->emulator.util;
    }
    for (unsigned i = 0; i < d->niothreads; i++) {
        const struct vpack_thread_sample *t = &d->iothreads[i];
        di->total += t->util;
        if (!thread_pinned(t)) {
            any_free = true;
            others += t->util;
        }
    }
    /* The emulator and iothreads go with the long-running vCPUs; a level 2
     * domain without any is light as a whole. */
    if (di->level >= 2 && nbusy == 0) {
        di->light = light_vcpus + others;
    } else {
        di->movable += others;
        if (di->level >= 2)
            di->light = light_vcpus;
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

/* Whether vpack places this thread (rather than leaving it its free mask). */
static bool thread_placed(const struct planner *pl, const struct dom_info *di, unsigned j)
{
    const struct vpack_domain_sample *d = di->d;
    if (j < d->nvcpus)
        return !thread_pinned(&d->vcpus[j]) && (di->level >= 2 || vcpu_busy(pl, di, j));
    const struct vpack_thread_sample *t =
        j == d->nvcpus ? &d->emulator : &d->iothreads[j - d->nvcpus - 1];
    return !thread_pinned(t);
}

static const struct vpack_thread_sample *thread_at(const struct vpack_domain_sample *d, unsigned j)
{
    return j < d->nvcpus ? &d->vcpus[j]
                         : (j == d->nvcpus ? &d->emulator : &d->iothreads[j - d->nvcpus - 1]);
}

/*
 * Where the load vpack places of one managed domain runs now, so that a
 * domain's own load is never charged against its own room (B1, B11): a
 * thread's last CPU when known, else the domain's previous packages, else
 * the packages of its bound with the most load not yet explained.
 */
static void attribute_domain(struct planner *pl, struct dom_info *di)
{
    const struct vpack_domain_sample *d = di->d;
    double *here = pl->scratch, rest = 0;
    unsigned nc = 0;

    memset(here, 0, pl->P * sizeof(*here));
    for (unsigned j = 0; j < d->nvcpus + d->niothreads + 1; j++) {
        const struct vpack_thread_sample *t = thread_at(d, j);
        if (t->util <= 0 || !thread_placed(pl, di, j))
            continue;
        int p = t->cpu >= 0 ? vpack_topology_package_of(pl->topo, t->cpu) : -1;
        if (p >= 0)
            here[p] += t->util;
        else
            rest += t->util;
    }
    if (rest > EPS && di->prev) {
        for (unsigned k = 0; k < di->prev->npkgs; k++) {
            int p = vpack_topology_package_index(pl->topo, di->prev->pkgs[k]);
            if (p >= 0)
                pl->cand[nc++] = p;
        }
    }
    if (rest > EPS && nc == 0)
        for (unsigned p = 0; p < pl->P; p++)
            if (in_bound(pl, di, (int)p))
                pl->cand[nc++] = (int)p;
    while (rest > EPS) {
        int best = -1;
        double best_left = EPS;
        for (unsigned i = 0; i < nc; i++) {
            int p = pl->cand[i];
            double left = pl->load[p] - pl->own[p] - here[p];
            if (left > best_left) {
                best = p;
                best_left = left;
            }
        }
        if (best < 0)
            break; /* the rest runs where no load is reported: nothing to explain */
        double take = rest < best_left ? rest : best_left;
        here[best] += take;
        rest -= take;
    }
    for (unsigned p = 0; p < pl->P; p++) {
        pl->own[p] += here[p];
        if (here[p] > EPS && (di->home < 0 || here[p] > here[di->home] + EPS))
            di->home = (int)p;
    }
    if (di->mem_home >= 0)
        pl->mem_w[di->mem_home] += di->movable + di->light;
}

/* The package a thread allowed on several packages runs on: its last CPU, else the busiest. */
static int running_package(const struct planner *pl, const struct vpack_thread_sample *t,
                           const vpack_cpuset *allowed)
{
    double *sum = pl->scratch;
    int best = -1;

    if (t->cpu >= 0 && vpack_cpuset_isset(allowed, (unsigned)t->cpu))
        return vpack_topology_package_of(pl->topo, t->cpu);
    memset(sum, 0, pl->P * sizeof(*sum));
    VPACK_CPUSET_FOREACH(c, allowed) {
        int p = vpack_topology_package_of(pl->topo, c);
        if (p < 0 || (unsigned)c >= pl->snap->ncpus || pl->snap->cpu_busy[c] <= 0)
            continue;
        sum[p] += pl->snap->cpu_busy[c];
        if (best < 0 || sum[p] > sum[best] + EPS)
            best = p;
    }
    return best;
}

static void force_awake(struct planner *pl, int p, double util)
{
    /* Hysteresis: an active package stays awake down to half the threshold. */
    if (p >= 0 && util >= (pl->was_active[p] ? PINNED_AWAKE_UTIL / 2 : PINNED_AWAKE_UTIL))
        pl->forced[p] = true;
}

/*
 * Packages a domain keeps awake whatever vpack plans: the package a busy
 * guest-pinned thread runs on (its pin's one package, or where it runs when
 * the pin spans several), and the one package a busy domain's cpuset allows.
 */
static void mark_forced(struct planner *pl, const struct dom_info *di)
{
    const struct vpack_domain_sample *d = di->d;
    double bound_util = 0;

    for (unsigned j = 0; j < d->nvcpus + d->niothreads + 1; j++) {
        const struct vpack_thread_sample *t = thread_at(d, j);
        if (!t->pin) {
            bound_util += t->util;
            continue;
        }
        if (t->util < PINNED_AWAKE_UTIL / 2)
            continue;
        vpack_cpuset usable;
        vpack_cpuset_and(&usable, t->pin, &pl->topo->cpus);
        int p = single_package(pl, &usable);
        force_awake(pl, p >= 0 ? p : running_package(pl, t, &usable), t->util);
    }
    if (!di->bound_is_all && bound_util >= PINNED_AWAKE_UTIL / 2 &&
        !vpack_cpuset_empty(di->bound))
        force_awake(pl, single_package(pl, di->bound), bound_util);
}

static void describe_domains(struct planner *pl)
{
    for (unsigned i = 0; i < pl->snap->ndomains; i++) {
        struct dom_info *di = &pl->di[i];
        di->d = &pl->snap->domains[i];
        di->prev = state_find(pl->st, di->d->name);
        describe_domain(pl, di, &pl->bounds[i]);
        pl->threads_total += di->total;
        if (di->managed) {
            attribute_domain(pl, di);
            if (di->max_delay > pl->max_delay)
                pl->max_delay = di->max_delay;
        }
        mark_forced(pl, di);
    }
}

/* The fewest packages whose cores * share hold the demand: the largest first (rule 4). */
static unsigned packages_for(const struct planner *pl, double share)
{
    double acc = 0;
    for (unsigned i = 0; i < pl->P; i++) {
        acc += pl->cap[pl->by_cap[i]] * share;
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
        /* Load vpack places moves with its domains: it keeps nothing awake. */
        pl->awake[p] = pl->load[p] - pl->own[p] >= AWAKE_SHARE * pl->cap[p];
        pl->nforced += pl->forced[p];
    }
    qsort_r(pl->order, pl->P, sizeof(int), pkg_pref_cmp, pl);
    qsort_r(pl->by_cap, pl->P, sizeof(int), cap_desc_cmp, pl);
    pl->nlow = packages_for(pl, pl->par->pack_watermark);
}

static void spread_to(struct planner *pl, unsigned nprev, bool over_load, double cap_prev)
{
    const struct vpack_policy_params *par = pl->par;

    pl->ndemand = pl->nlow > nprev + 1 ? pl->nlow : nprev + 1;
    pl->spreading = true;
    pl->why = VPACK_WHY_SPREAD;
    pl->delay_spreading = !over_load && pl->demand <= cap_prev + EPS;
    pl->delay_spread = pl->delay_spreading;
    pl->over_count = 0;
    pl->under_ms = 0;
    if (!pl->delay_spreading)
        snprintf(pl->reason, sizeof(pl->reason),
                 "spread to %u of %u packages: load %.2f CPUs over %.0f%% of %.0f cores",
                 pl->ndemand, pl->P, pl->demand, par->spread_watermark * 100, cap_prev);
    else
        snprintf(pl->reason, sizeof(pl->reason),
                 "spread to %u of %u packages: run-queue delay %.0f%% over %.0f%%", pl->ndemand,
                 pl->P, pl->max_delay * 100, par->delay_threshold * 100);
}

/*
 * The lower bound stays under the active count: pack once it has for
 * pack_delay_ms, or pack_delay_ms + min_residency_ms after a delay spread.
 */
static void pack_later(struct planner *pl)
{
    const struct vpack_policy_params *par = pl->par;
    uint64_t wait = par->pack_delay_ms + (pl->delay_spread ? par->min_residency_ms : 0);

    pl->under_ms += pl->snap->interval_ms;
    if (pl->under_ms >= wait) {
        pl->ndemand = pl->nlow;
        pl->under_ms = 0;
        pl->delay_spread = false;
        pl->delay_fruitless = false;
        pl->why = VPACK_WHY_PACK;
        snprintf(pl->reason, sizeof(pl->reason),
                 "packed to %u of %u packages: load %.2f CPUs stayed low for %llu ms",
                 pl->ndemand, pl->P, pl->demand, (unsigned long long)wait);
    } else {
        snprintf(pl->reason, sizeof(pl->reason),
                 "%u of %u packages: load %.2f CPUs would fit %u, packing in %llu ms%s",
                 pl->ndemand, pl->P, pl->demand, pl->nlow,
                 (unsigned long long)(wait - pl->under_ms),
                 pl->delay_spread ? " (after a run-queue delay spread)" : "");
    }
}

static void hold(struct planner *pl)
{
    const unsigned n = pl->ndemand, P = pl->P;

    pl->under_ms = 0;
    if (pl->max_delay > pl->par->delay_threshold && pl->delay_fruitless)
        snprintf(pl->reason, sizeof(pl->reason),
                 "%u of %u packages: run-queue delay %.0f%%, but the last spread moved no "
                 "waiting vCPU",
                 n, P, pl->max_delay * 100);
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
    pl->delay_spread = st->delay_spread;
    pl->delay_fruitless = st->delay_fruitless;
    if (!st->initialized || st->ndemand == 0) {
        pl->ndemand = pl->nlow;
        pl->over_count = 0;
        pl->under_ms = 0;
        pl->delay_spread = pl->delay_fruitless = false;
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
    /* A delay spread that moved no waiting vCPU is no evidence: do not grow on it. */
    if (pl->max_delay <= par->delay_threshold / 2)
        pl->delay_fruitless = false;
    bool over_delay = pl->max_delay > par->delay_threshold && !pl->delay_fruitless;
    /* With every package active there is nowhere to spread to. */
    pl->over_count = (over_load || over_delay) && nprev < P ? pl->over_count + 1 : 0;
    pl->ndemand = nprev;
    if (nprev < P && (over_all || pl->over_count >= par->spread_samples))
        spread_to(pl, nprev, over_load || over_all, cap_prev);
    else if (pl->nlow < nprev && !over_load && pl->max_delay <= par->delay_threshold / 2)
        pack_later(pl);
    else
        hold(pl);
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

/* The pack capacity of the k largest packages not active and not skip. */
static double largest_rest(const struct planner *pl, int skip, unsigned k)
{
    double c = 0;
    for (unsigned i = 0; i < pl->P && k; i++) {
        int p = pl->by_cap[i];
        if (p == skip || pl->active[p])
            continue;
        c += pl->cap[p] * pl->par->pack_watermark;
        k--;
    }
    return c;
}

/*
 * n packages: those pins and bounds keep awake, then in preference order
 * each package that still lets n packages hold the demand (so the count is
 * the fewest even when packages differ in size), then the largest.
 */
static void select_packages(struct planner *pl, unsigned n)
{
    const double pw = pl->par->pack_watermark;
    unsigned count = 0;
    double got = 0;

    for (unsigned p = 0; p < pl->P; p++)
        if (pl->forced[p]) {
            pl->active[p] = true;
            got += pl->cap[p] * pw;
            count++;
        }
    for (unsigned i = 0; i < pl->P && count < n; i++) {
        int p = pl->order[i];
        if (pl->active[p])
            continue;
        if (got + pl->cap[p] * pw + largest_rest(pl, p, n - count - 1) + EPS < pl->demand)
            continue;
        pl->active[p] = true;
        got += pl->cap[p] * pw;
        count++;
    }
    for (unsigned i = 0; i < pl->P && count < n; i++)
        if (!pl->active[pl->by_cap[i]]) {
            pl->active[pl->by_cap[i]] = true;
            count++;
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
    select_packages(pl, n);
    if (pl->lifted) {
        size_t len = strlen(pl->reason);
        snprintf(pl->reason + len, sizeof(pl->reason) - len,
                 "; all %u packages active: restrictions lifted", P);
    } else if (!pl->spreading) {
        hold_resident(pl);
    }
}

/* Room: what each package can take beyond the load vpack does not place. */
static void set_room(struct planner *pl)
{
    for (unsigned p = 0; p < pl->P; p++)
        pl->room[p] = free_room(pl, (int)p);
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
        r += pl->room[pk[i]] > 0 ? pl->room[pk[i]] : 0;
    return r;
}

static void take_room(struct planner *pl, const int *pk, unsigned n, double amount)
{
    double total = room_of(pl, pk, n);
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

/* Its bound lies wholly in parked packages: wake the first of them, if it has load. */
static void wake_parked(struct planner *pl, struct dom_info *di)
{
    char pk[128];

    for (unsigned i = 0; i < pl->P; i++) {
        int p = pl->order[i];
        if (!in_bound(pl, di, p))
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
        pl->room[p] -= di->movable + di->light;
        fmt_pkgs(pl, di->pk, di->npk, pk, sizeof(pk));
        snprintf(di->reason, sizeof(di->reason),
                 "on package %s: its cpuset allows no active package", pk);
        return;
    }
    /* not reached: the bound is non-empty */
}

/* Whether amount fits one of the nc candidate packages. */
static bool fits_one(const struct planner *pl, unsigned nc, double amount)
{
    for (unsigned i = 0; i < nc; i++)
        if (pl->room[pl->cand[i]] + EPS >= amount)
            return true;
    return false;
}

/* Sticky: it stays where it is while that still fits (rule 7). */
static bool stay_put(struct planner *pl, struct dom_info *di, unsigned nc)
{
    const struct dom_state *prev = di->prev;
    int tmp[64];
    unsigned n = 0;
    char pk[128];

    if (!prev || !prev->npkgs || prev->npkgs > 64 || !pkgs_in_active(pl, prev))
        return false;
    for (unsigned i = 0; i < prev->npkgs; i++) {
        int p = vpack_topology_package_index(pl->topo, prev->pkgs[i]);
        if (!in_bound(pl, di, p))
            return false;
        tmp[n++] = p;
    }
    double room = room_of(pl, tmp, n);
    bool young = pl->now - prev->placed_ms < pl->par->min_residency_ms;
    /* A multi-package domain that now fits one package is packed onto it. */
    /* Within min_residency_ms it stays unless the host is spreading. */
    if ((room + EPS < di->movable && (!young || pl->spreading)) ||
        (n > 1 && !young && fits_one(pl, nc, di->movable)))
        return false;
    memcpy(di->pk, tmp, n * sizeof(*tmp));
    di->npk = n;
    take_room(pl, di->pk, di->npk, di->movable);
    fmt_pkgs(pl, di->pk, di->npk, pk, sizeof(pk));
    snprintf(di->reason, sizeof(di->reason), "stays on package%s %s: %.2f CPUs fit",
             n > 1 ? "s" : "", pk, di->movable);
    return true;
}

static void put_on(struct planner *pl, struct dom_info *di, int p, const char *why)
{
    di->pk[di->npk++] = p;
    pl->room[p] -= di->movable;
    snprintf(di->reason, sizeof(di->reason), "packed on package %d: %.2f CPUs fit%s",
             pl->topo->packages[p].id, di->movable, why);
}

/* One active package where it fits: its memory's, where it runs, then preference order. */
static bool place_one(struct planner *pl, struct dom_info *di, unsigned nc)
{
    const int first[2] = {di->mem_home, di->home};
    static const char *const why[2] = {", where its memory is", ", where it runs"};

    for (unsigned k = 0; k < 2; k++) {
        int p = first[k];
        if (p >= 0 && pl->active[p] && in_bound(pl, di, p) && pl->room[p] + EPS >= di->movable) {
            put_on(pl, di, p, why[k]);
            return true;
        }
    }
    for (unsigned i = 0; i < nc; i++)
        if (pl->room[pl->cand[i]] + EPS >= di->movable) {
            put_on(pl, di, pl->cand[i], "");
            return true;
        }
    return false;
}

/* No active package has room, but a parked one in its bound would: wake it. */
static bool wake_one(struct planner *pl, struct dom_info *di)
{
    for (unsigned i = 0; i < pl->P; i++) {
        int p = pl->order[i];
        if (pl->active[p] || !in_bound(pl, di, p) || pl->room[p] + EPS < di->movable)
            continue;
        pl->active[p] = true;
        put_on(pl, di, p, ": no active package had room");
        return true;
    }
    return false;
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
    /* Not enough room on the active packages: wake parked ones in its bound. */
    for (unsigned i = 0; i < pl->P && got + EPS < di->movable; i++) {
        int p = pl->order[i];
        if (pl->active[p] || !in_bound(pl, di, p) || pl->room[p] <= EPS)
            continue;
        pl->active[p] = true;
        di->pk[di->npk++] = p;
        got += pl->room[p];
    }
    take_room(pl, di->pk, di->npk, di->movable);
    fmt_pkgs(pl, di->pk, di->npk, pk, sizeof(pk));
    if (got + EPS >= di->movable)
        snprintf(di->reason, sizeof(di->reason),
                 "spread over packages %s: %.2f CPUs do not fit one package", pk, di->movable);
    else
        snprintf(di->reason, sizeof(di->reason),
                 "over packages %s: %.2f CPUs exceed the room of the packages", pk, di->movable);
}

/* Active packages in its bound, in preference order, into pl->cand. */
static unsigned candidates(struct planner *pl, const struct dom_info *di)
{
    unsigned nc = 0;
    for (unsigned i = 0; i < pl->P; i++) {
        int p = pl->order[i];
        if (pl->active[p] && in_bound(pl, di, p))
            pl->cand[nc++] = p;
    }
    return nc;
}

/* Places one managed domain on active packages (rule 7). Returns 0 or -ENOMEM. */
static int place_domain(struct planner *pl, struct dom_info *di)
{
    di->pk = calloc(pl->P, sizeof(*di->pk));
    if (!di->pk)
        return -ENOMEM;
    unsigned nc = candidates(pl, di);
    if (nc == 0)
        wake_parked(pl, di);
    else if (!stay_put(pl, di, nc) && !place_one(pl, di, nc) && !wake_one(pl, di))
        place_across(pl, di, nc);
    return 0;
}

/* Places managed domains with long-running threads, largest first (rule 7). */
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
        if (di->level >= 2 && di->movable <= EPS && di->light > EPS)
            continue; /* all light: placed with the light load */
        if ((ret = place_domain(pl, di)) < 0)
            return ret;
    }
    return 0;
}

/*
 * The wake-up target for amount CPUs of light load (sched_mc level 2): the
 * busiest active package in its bound with room for it; else a parked one
 * with room, woken; else the active one with most room. -1 when its bound
 * has no active package.
 */
static int wake_target(struct planner *pl, const struct dom_info *di, double amount)
{
    int best = -1, roomiest = -1;
    const double wm = pl->par->spread_watermark;

    for (unsigned p = 0; p < pl->P; p++) {
        if (!pl->active[p] || !in_bound(pl, di, (int)p))
            continue;
        if (roomiest < 0 || pl->room[p] > pl->room[roomiest] + EPS)
            roomiest = (int)p;
        if (pl->room[p] + EPS < amount)
            continue;
        double used = pl->cap[p] * wm - pl->room[p];
        if (best < 0 || used > pl->cap[best] * wm - pl->room[best] + EPS)
            best = (int)p;
    }
    if (best >= 0 || roomiest < 0)
        return best;
    for (unsigned i = 0; i < pl->P; i++) {
        int p = pl->order[i];
        if (!pl->active[p] && in_bound(pl, di, p) && pl->room[p] + EPS >= amount) {
            pl->active[p] = true;
            return p;
        }
    }
    return roomiest;
}

/* An all-light level 2 domain stays on its package while that is active and has room. */
static bool light_stays(struct planner *pl, struct dom_info *di)
{
    const struct dom_state *ds = di->prev;
    if (!ds || ds->npkgs != 1 || !pkgs_in_active(pl, ds))
        return false;
    int p = vpack_topology_package_index(pl->topo, ds->pkgs[0]);
    if (!in_bound(pl, di, p) || pl->room[p] + EPS < di->light)
        return false;
    di->pk[di->npk++] = p;
    pl->room[p] -= di->light;
    snprintf(di->reason, sizeof(di->reason), "stays on package %d: light load (%.2f CPUs) fits",
             pl->topo->packages[p].id, di->light);
    return true;
}

static int light_order_cmp(const void *a, const void *b)
{
    const struct dom_info *x = *(const struct dom_info *const *)a;
    const struct dom_info *y = *(const struct dom_info *const *)b;
    bool sx = x->npk > 0, sy = y->npk > 0;
    if (sx != sy)
        return sx ? -1 : 1;
    return dom_order_cmp(a, b);
}

/* The package the next light thread would go to: busiest with room left. */
static int choose_wakeup(struct planner *pl)
{
    int best = -1, roomiest = -1;
    const double wm = pl->par->spread_watermark;

    for (unsigned p = 0; p < pl->P; p++) {
        if (!pl->active[p])
            continue;
        if (roomiest < 0 || pl->room[p] > pl->room[roomiest] + EPS)
            roomiest = (int)p;
        if (pl->room[p] < ROOM_STEP)
            continue;
        double used = pl->cap[p] * wm - pl->room[p];
        if (best < 0 || used > pl->cap[best] * wm - pl->room[best] + EPS)
            best = (int)p;
    }
    return best >= 0 ? best : roomiest;
}

/*
 * Level 2 (rule 8): a domain's light vCPUs stay with its long-running ones
 * when there is room; other light load, and all-light domains, go to the
 * busiest active package with room for them.
 */
static int place_light(struct planner *pl)
{
    unsigned n = 0;

    if (pl->lifted)
        return 0;
    for (unsigned i = 0; i < pl->nsorted; i++) {
        struct dom_info *di = pl->sorted[i];
        if (di->level < 2)
            continue;
        if (di->pk) {
            bool with = false;
            for (unsigned k = 0; k < di->npk && !with && di->light > EPS; k++)
                if (pl->room[di->pk[k]] + EPS >= di->light) {
                    pl->room[di->pk[k]] -= di->light;
                    with = true;
                }
            if (di->light > EPS && !with && (di->light_pk = wake_target(pl, di, di->light)) >= 0) {
                pl->room[di->light_pk] -= di->light;
                size_t len = strlen(di->reason);
                snprintf(di->reason + len, sizeof(di->reason) - len,
                         "; light vCPUs on package %d: no room beside the others",
                         pl->topo->packages[di->light_pk].id);
            }
            continue;
        }
        if (!(di->pk = calloc(pl->P, sizeof(*di->pk))))
            return -ENOMEM;
        light_stays(pl, di);
        pl->sorted[n++] = di; /* reuses the front of sorted: placed ones are done */
    }
    qsort(pl->sorted, n, sizeof(*pl->sorted), light_order_cmp);
    for (unsigned i = 0; i < n; i++) {
        struct dom_info *di = pl->sorted[i];
        if (di->npk)
            continue;
        int p = wake_target(pl, di, di->light);
        if (p < 0) {
            wake_parked(pl, di);
            continue;
        }
        di->pk[di->npk++] = p;
        pl->room[p] -= di->light;
        snprintf(di->reason, sizeof(di->reason), "on wake-up package %d: light load (%.2f CPUs)",
                 pl->topo->packages[p].id, di->light);
    }
    pl->wake = choose_wakeup(pl);
    return 0;
}

/* Records a managed domain's placement and its long-running vCPUs in the next state. */
static int remember(struct planner *pl, const struct dom_info *di, const int *ids,
                    unsigned nids, uint64_t placed)
{
    struct dom_state *ds = &pl->newdoms[pl->nnew];
    unsigned nv = di->d->nvcpus;

    ds->name = strdup(di->d->name);
    ds->pkgs = malloc((nids ? nids : 1) * sizeof(int));
    ds->busy = malloc(nv ? nv : 1);
    if (!ds->name || !ds->pkgs || !ds->busy) {
        dom_state_clear(ds);
        memset(ds, 0, sizeof(*ds));
        return -ENOMEM;
    }
    memcpy(ds->pkgs, ids, nids * sizeof(int));
    for (unsigned i = 0; i < nv; i++)
        ds->busy[i] = vcpu_busy(pl, di, i);
    ds->nbusy = nv;
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

/* The CPUs of n packages within the domain's bound (the bound itself if that is empty). */
static const vpack_cpuset *union_mask(struct planner *pl, const struct dom_info *di,
                                      const int *pk, unsigned n)
{
    if (n == 1 && di->bound_is_all)
        return &pl->pkg_mask[pk[0]];
    vpack_cpuset *c = pool_new(pl->pool);
    if (!c)
        return NULL;
    vpack_cpuset_zero(c);
    for (unsigned i = 0; i < n; i++)
        vpack_cpuset_or(c, c, &pl->pkg_mask[pk[i]]);
    vpack_cpuset_and(c, c, di->bound);
    if (vpack_cpuset_empty(c))
        *c = *di->bound;
    return c;
}

static int build_domain(struct planner *pl, struct dom_info *di, struct vpack_plan_domain *out)
{
    const struct vpack_domain_sample *d = di->d;
    const vpack_cpuset *bound = di->bound;
    const vpack_cpuset *pmask = bound, *lmask = bound;
    bool restrict_ = di->managed && !pl->lifted && di->npk > 0;
    int *ids = pl->ids;
    unsigned nids = 0;
    int r;

    if (vpack_cpuset_empty(bound)) {
        /* Not manageable: hand back what the domain asked for, else everything. */
        vpack_cpuset *c = pool_new(pl->pool);
        if (!c)
            return -ENOMEM;
        *c = d->cpuset ? *d->cpuset : pl->topo->cpus;
        bound = pmask = lmask = c;
    }
    if (restrict_) {
        if (!(pmask = union_mask(pl, di, di->pk, di->npk)))
            return -ENOMEM;
        lmask = pmask;
        if (di->light_pk >= 0 && !(lmask = union_mask(pl, di, &di->light_pk, 1)))
            return -ENOMEM;
        for (unsigned i = 0; i < di->npk; i++)
            ids[nids++] = pl->topo->packages[di->pk[i]].id;
        if (di->light_pk >= 0) {
            bool have = false;
            for (unsigned i = 0; i < di->npk; i++)
                have = have || di->pk[i] == di->light_pk;
            if (!have)
                ids[nids++] = pl->topo->packages[di->light_pk].id;
        }
    } else if (!di->managed || pl->lifted) {
        for (unsigned p = 0; p < pl->P; p++)
            if (in_bound(pl, di, (int)p))
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
        const vpack_cpuset *m = bound;
        if (restrict_ && !thread_pinned(&d->vcpus[i]))
            m = vcpu_busy(pl, di, i) ? pmask : (di->level >= 2 ? lmask : bound);
        if ((r = set_thread(pl, &out->vcpus[i], &d->vcpus[i], m, bound)) < 0)
            return r;
    }
    /* The emulator and iothreads go with the domain's long-running vCPUs. */
    if ((r = set_thread(pl, &out->emulator, &d->emulator, restrict_ ? pmask : bound, bound)) < 0)
        return r;
    out->emulator.id = -1;
    for (unsigned i = 0; i < d->niothreads; i++)
        if ((r = set_thread(pl, &out->iothreads[i], &d->iothreads[i], restrict_ ? pmask : bound,
                            bound)) < 0)
            return r;
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
    pl->own = calloc(P, sizeof(double));
    pl->mem_w = calloc(P, sizeof(double));
    pl->room = calloc(P, sizeof(double));
    pl->scratch = calloc(P, sizeof(double));
    pl->forced = calloc(P, sizeof(bool));
    pl->was_active = calloc(P, sizeof(bool));
    pl->awake = calloc(P, sizeof(bool));
    pl->active = calloc(P, sizeof(bool));
    pl->order = calloc(P, sizeof(int));
    pl->by_cap = calloc(P, sizeof(int));
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
    if (!pl->cap || !pl->load || !pl->own || !pl->mem_w || !pl->room || !pl->scratch ||
        !pl->forced || !pl->was_active || !pl->awake || !pl->active || !pl->order ||
        !pl->by_cap || !pl->pkg_mask || !pl->pool || !pl->di || !pl->sorted || !pl->bounds ||
        !pl->cand || !pl->ids || !pl->active_ids || !pl->newdoms || !pl->plan)
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
    free(pl->own);
    free(pl->mem_w);
    free(pl->room);
    free(pl->scratch);
    free(pl->forced);
    free(pl->was_active);
    free(pl->awake);
    free(pl->active);
    free(pl->order);
    free(pl->by_cap);
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
        pl->by_cap[p] = (int)p;
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

/* Fills the plan and the next state's domains. Returns -ENOMEM, or -EINVAL for duplicate names. */
static int build_plan(struct planner *pl)
{
    const struct vpack_topology *topo = pl->topo;
    struct vpack_plan *plan = pl->plan;
    unsigned nactive = 0;
    bool waiting_moved = false;
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
        int *ids = pl->cand;
        for (unsigned k = 0; k < di->npk; k++)
            ids[k] = topo->packages[di->pk[k]].id;
        di->moved = di->managed && !pl->lifted && !same_pkgs(di->prev, ids, di->npk);
        plan->ndomains = i + 1;
        if ((ret = build_domain(pl, di, pd)) < 0)
            return ret;
        if (!di->managed)
            continue;
        if (pd->moved && di->max_delay > pl->par->delay_threshold)
            waiting_moved = true;
        uint64_t placed = pd->moved || !di->prev ? pl->now : di->prev->placed_ms;
        if ((ret = remember(pl, di, ids, di->npk, placed)) < 0)
            return ret;
    }
    qsort(pl->newdoms, pl->nnew, sizeof(*pl->newdoms), dom_state_cmp);
    for (unsigned i = 1; i < pl->nnew; i++)
        if (!strcmp(pl->newdoms[i - 1].name, pl->newdoms[i].name))
            return -EINVAL; /* duplicate domain names */
    /* A delay spread that moved none of the waiting domains does not grow again. */
    if (pl->delay_spreading && !waiting_moved)
        pl->delay_fruitless = true;
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
    st->delay_spread = pl->delay_spread;
    st->delay_fruitless = pl->delay_fruitless;
    st->ndemand = pl->ndemand;
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

bool vpack_policy_state_settled(const struct vpack_policy_state *s,
                                const struct vpack_policy_params *params)
{
    if (!s->initialized || s->ndemand == 0 || s->over_count || s->under_ms)
        return false;
    for (unsigned i = 0; i < s->ndoms; i++)
        if (s->now_ms - s->doms[i].placed_ms < params->min_residency_ms)
            return false;
    return true;
}

void vpack_policy_state_advance(struct vpack_policy_state *s, unsigned ms)
{
    s->now_ms += ms;
}
