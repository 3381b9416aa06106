// SPDX-License-Identifier: MIT
/*
 * The planner's first phase, describe: each package's cores, usable CPUs and
 * load; what each domain is (level, bound, long-running vCPUs, memory home,
 * its previous packages as indexes), where the load vpack places runs now,
 * which packages guest pins and bounds keep awake (rules 1-3 and 8 of
 * vpack/policy.h); and from all that the packages' preference order (rule
 * 5), which counting measures the active packages by and selecting takes
 * packages in.
 */

#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Whether vCPU i of a domain is long-running: at busy_vcpu, with hysteresis
 * around it for a vCPU the previous plan classed (rule 8). By its run time
 * as the snapshot gives it, not as work (smt.c): how long a vCPU keeps a
 * CPU is what makes it long-running, and work read through where its
 * domain ran moves with a move, enough to reclass a vCPU hovering at the
 * boundary right after its domain was packed.
 */
bool vpack__plan_vcpu_busy(const struct planner *pl, const struct dom_info *di, unsigned i)
{
    const struct dom_state *ds = di->prev;
    double b = pl->par->busy_vcpu, u = pl->raw->domains[di - pl->di].vcpus[i].util;

    if (ds && ds->busy && ds->nbusy == di->d->nvcpus)
        return ds->busy[i] ? u >= b * (1 - BUSY_HYSTERESIS) - EPS
                           : u >= b * (1 + BUSY_HYSTERESIS) - EPS;
    return u >= b;
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
        if (snap->cpu_busy_now && snap->cpu_busy_now[c] >= 0) {
            double n = snap->cpu_busy_now[c] > 1 ? 1 : snap->cpu_busy_now[c];
            pl->load_now[p] += n;
            pl->total_busy_now += n;
        }
    }
    pl->have_now = snap->cpu_busy_now != NULL;
    for (unsigned i = 0; i < pl->st->nactive; i++) {
        int p = vpack_topology_package_index(topo, pl->st->active_ids[i]);
        if (p >= 0)
            pl->was_active[p] = true;
    }
}

/* The previous plan's packages of a domain as indexes of this topology. */
static int prev_packages(struct planner *pl, struct dom_info *di)
{
    const struct dom_state *ds = di->prev;

    di->prev_light_pk = -1;
    if (!ds)
        return 0;
    if (ds->light_pkg_id >= 0)
        di->prev_light_pk = vpack_topology_package_index(pl->topo, ds->light_pkg_id);
    if (!ds->npkgs)
        return 0;
    if (!(di->prev_pk = malloc(ds->npkgs * sizeof(*di->prev_pk))))
        return -ENOMEM;
    for (unsigned k = 0; k < ds->npkgs; k++)
        di->prev_pk[k] = vpack_topology_package_index(pl->topo, ds->pkg_ids[k]);
    di->nprev_pk = ds->npkgs;
    return 0;
}

static int effective_level(const struct planner *pl, int level)
{
    return level < 0 ? pl->par->default_level : level;
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

/*
 * Room a package offers an empty placement: its watermark minus the load
 * vpack does not place, at the lower of its smoothed and last-interval
 * values: a burst of another process that ended takes no room while its
 * smoothed value falls (issue 24; l3.c does the same per cache).
 */
double vpack__plan_free_room(const struct planner *pl, int p)
{
    double other = pl->load[p] - pl->own[p];
    if (pl->have_now && pl->load_now[p] - pl->own[p] < other)
        other = pl->load_now[p] - pl->own[p];
    return pl->cap[p] * pl->par->spread_watermark - (other > 0 ? other : 0);
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
    di->stay_pkg = -1;
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
    di->one_pkg = pl->P == 1 ? 0 : di->bound_is_all ? -1 : single_package(pl, di->bound);

    for (unsigned j = 0; j < d->nvcpus + d->niothreads + 1; j++) {
        const struct vpack_thread_sample *t = vpack__plan_thread_at(d, j);
        di->util_now += t->util_now;
        if (!thread_pinned(t))
            di->delay_now += t->delay_now;
    }
    for (unsigned i = 0; i < d->nvcpus; i++) {
        const struct vpack_thread_sample *t = &d->vcpus[i];
        di->total += t->util;
        if (thread_pinned(t))
            continue; /* vpack cannot move it: its delay is no reason to spread */
        any_free = true;
        if (t->delay > di->max_delay)
            di->max_delay = t->delay;
        if (t->delay_now > di->max_delay_now)
            di->max_delay_now = t->delay_now;
        if (vpack__plan_vcpu_busy(pl, di, i)) {
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
    /* System-wide PC6: the memory home keeps a domain that fits it (rule 7). */
    int h = di->mem_home;
    if (pl->par->pc6_system && di->managed && h >= 0 && in_cpuset(pl, di, h) &&
        di->movable + di->light <= pl->cap[h] * pl->par->spread_watermark + EPS)
        di->stay_pkg = h;
}

/* Whether vpack places this thread (rather than leaving it its free mask). */
bool vpack__plan_thread_placed(const struct planner *pl, const struct dom_info *di, unsigned j)
{
    const struct vpack_domain_sample *d = di->d;
    if (j < d->nvcpus)
        return !thread_pinned(&d->vcpus[j]) && (di->level >= 2 || vpack__plan_vcpu_busy(pl, di, j));
    const struct vpack_thread_sample *t =
        j == d->nvcpus ? &d->emulator : &d->iothreads[j - d->nvcpus - 1];
    return !thread_pinned(t);
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
        const struct vpack_thread_sample *t = vpack__plan_thread_at(d, j);
        if (t->util <= 0 || !vpack__plan_thread_placed(pl, di, j))
            continue;
        int p = t->cpu >= 0 ? vpack_topology_package_of(pl->topo, t->cpu) : -1;
        /* Light vCPUs the last plan kept apart run on their own package. */
        if (p < 0 && j < d->nvcpus && di->level >= 2 && di->prev_light_pk >= 0 &&
            !vpack__plan_vcpu_busy(pl, di, j))
            p = di->prev_light_pk;
        if (p >= 0)
            here[p] += t->util;
        else
            rest += t->util;
    }
    if (rest > EPS)
        for (unsigned k = 0; k < di->nprev_pk; k++)
            if (di->prev_pk[k] >= 0)
                pl->cand[nc++] = di->prev_pk[k];
    if (rest > EPS && nc == 0)
        for (unsigned p = 0; p < pl->P; p++)
            if (in_cpuset(pl, di, (int)p))
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
        const struct vpack_thread_sample *t = vpack__plan_thread_at(d, j);
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
    /* A memory home that keeps its domain keeps its package awake as a bound does. */
    if (di->stay_pkg >= 0 && di->movable + di->light >= PINNED_AWAKE_UTIL / 2)
        force_awake(pl, di->stay_pkg, di->movable + di->light);
}

static int describe_domains(struct planner *pl)
{
    for (unsigned i = 0; i < pl->snap->ndomains; i++) {
        struct dom_info *di = &pl->di[i];
        di->d = &pl->snap->domains[i];
        di->prev = vpack__plan_state_find(pl->st, di->d->name);
        if (prev_packages(pl, di) < 0)
            return -ENOMEM;
        describe_domain(pl, di, &pl->bounds[i]);
        pl->threads_total += di->total;
        pl->threads_now += di->util_now;
        pl->wanted_now += di->util_now + (di->managed ? di->delay_now : 0);
        if (di->managed) {
            attribute_domain(pl, di);
            if (di->max_delay > pl->max_delay)
                pl->max_delay = di->max_delay;
            if (di->max_delay_now > pl->max_delay_now)
                pl->max_delay_now = di->max_delay_now;
        }
        mark_forced(pl, di);
    }
    return 0;
}

/* Rule 5's preference order: what pins keep awake, was active, holds memory, is awake, runs placed load. */
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
    return pkg_id(pl, x) - pkg_id(pl, y);
}

static int cap_desc_cmp(const void *a, const void *b, void *ctx)
{
    const struct planner *pl = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    if (pl->cap[x] != pl->cap[y])
        return pl->cap[x] > pl->cap[y] ? -1 : 1;
    return pkg_pref_cmp(a, b, ctx);
}

/* Which packages are awake, kept awake, and the preference order (rule 5). */
static void rank_packages(struct planner *pl)
{
    for (unsigned p = 0; p < pl->P; p++) {
        /* Load vpack places moves with its domains: it keeps nothing awake. */
        pl->awake[p] = pl->load[p] - pl->own[p] >= AWAKE_SHARE * pl->cap[p];
        pl->nforced += pl->forced[p];
    }
    qsort_r(pl->order, pl->P, sizeof(int), pkg_pref_cmp, pl);
    qsort_r(pl->by_cap, pl->P, sizeof(int), cap_desc_cmp, pl);
}

int vpack__plan_describe(struct planner *pl)
{
    observe_packages(pl);
    if (describe_domains(pl) < 0)
        return -ENOMEM;
    rank_packages(pl);
    return 0;
}
