// SPDX-License-Identifier: MIT
/*
 * L3 caches as the next level of packing (rule 9 of vpack/policy.h): inside
 * its one package, a domain's placed threads go to the fewest L3 caches that
 * hold them, and a domain that fits one cache is kept in one. Threads that
 * talk to each other through a shared cache lose more when pulled apart than
 * they gain from the room (VolanoMark); the package stays awake either way.
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Caches are tracked as bits of a uint64_t: larger packages are left whole. */
#define MAX_L3 64

/* Per cache of the packages with several: room left, under the spread watermark. */
struct l3_plan {
    unsigned *off;  /* per package: index of its first cache in room */
    double *room;
    double *cap;    /* cores of each cache */
};

/* What a domain puts on its package's CPUs: the threads that go with its emulator
 * (level 2 light vCPUs beside the others, or all of an all-light domain). */
static double placed_load(const struct dom_info *di)
{
    return di->movable + (di->level >= 2 && di->light_pk < 0 ? di->light : 0);
}

/*
 * Room per cache: its cores times the spread watermark, minus its share of
 * the package's load vpack does not place. That share is the busy of its
 * CPUs not explained by placed threads known to run there, scaled so the
 * caches' shares add up to the package's fixed load.
 */
/*
 * CPU c's busy share for the caches' rooms: the smoothed one, or the last
 * interval's where that is lower. Load the last interval no longer shows
 * (a burst that ended, its smoothed value still falling) crowds no cache:
 * inside one package, moving between caches on it gains nothing.
 */
static double cpu_load(const struct planner *pl, int c)
{
    const struct vpack_snapshot *s = pl->snap;
    if ((unsigned)c >= s->ncpus || !(s->cpu_busy[c] > 0))
        return 0;
    double b = s->cpu_busy[c] > 1 ? 1 : s->cpu_busy[c];
    if (s->cpu_busy_now && s->cpu_busy_now[c] >= 0 && s->cpu_busy_now[c] < b)
        b = s->cpu_busy_now[c];
    return b;
}

static int l3_rooms(struct planner *pl, struct l3_plan *lp)
{
    const struct vpack_topology *topo = pl->topo;
    unsigned n = 0;

    lp->off = calloc(pl->P + 1, sizeof(*lp->off));
    if (!lp->off)
        return -ENOMEM;
    for (unsigned p = 0; p < pl->P; p++) {
        lp->off[p] = n;
        if (topo->packages[p].nl3 >= 2 && topo->packages[p].nl3 <= MAX_L3)
            n += topo->packages[p].nl3;
    }
    lp->off[pl->P] = n;
    if (n == 0)
        return 0;
    lp->room = calloc(n, sizeof(*lp->room));
    lp->cap = calloc(n, sizeof(*lp->cap));
    double *known = calloc(n, sizeof(*known));
    if (!lp->room || !lp->cap || !known) {
        free(known);
        return -ENOMEM;
    }
    /* Placed load known to run in a cache: a placed thread's last CPU, else
     * the caches its domain was kept in (its own load is not others'). */
    for (unsigned i = 0; i < pl->snap->ndomains; i++) {
        const struct dom_info *di = &pl->di[i];
        const struct vpack_domain_sample *d = di->d;
        const struct dom_state *ds = di->prev;
        int pp = ds && ds->l3 && di->nprev_pk == 1 ? di->prev_pk[0] : -1;
        uint64_t was = pp >= 0 && lp->off[pp + 1] > lp->off[pp] && !(ds->l3 >> topo->packages[pp].nl3)
                           ? ds->l3
                           : 0;
        if (!di->managed)
            continue;
        for (unsigned j = 0; j < d->nvcpus + d->niothreads + 1; j++) {
            const struct vpack_thread_sample *t = vpack__plan_thread_at(d, j);
            int p = t->cpu >= 0 ? vpack_topology_package_of(topo, t->cpu) : -1;
            int k = t->cpu >= 0 ? vpack_topology_l3_of(topo, t->cpu) : -1;
            if (t->util <= 0 || !vpack__plan_thread_placed(pl, di, j))
                continue;
            if (p >= 0 && k >= 0 && lp->off[p] + (unsigned)k < lp->off[p + 1]) {
                known[lp->off[p] + (unsigned)k] += t->util;
            } else if (t->cpu < 0 && was) {
                double each = t->util / __builtin_popcountll(was);
                for (unsigned b = 0; was >> b; b++)
                    if (was >> b & 1)
                        known[lp->off[pp] + b] += each;
            }
        }
    }
    for (unsigned p = 0; p < pl->P; p++) {
        const struct vpack_package *pkg = &topo->packages[p];
        unsigned nk = lp->off[p + 1] - lp->off[p];
        double rest_sum = 0, fixed = pl->load[p] - pl->own[p], load_now = 0;
        double *rest = &lp->room[lp->off[p]];

        for (unsigned k = 0; k < nk; k++) {
            double busy = 0;
            VPACK_CPUSET_FOREACH(c, &pkg->l3[k].cpus) {
                double b = cpu_load(pl, c);
                busy += b;
                load_now += b;
            }
            rest[k] = busy - known[lp->off[p] + k] > 0 ? busy - known[lp->off[p] + k] : 0;
            rest_sum += rest[k];
        }
        if (pl->have_now && load_now - pl->own[p] < fixed)
            fixed = load_now - pl->own[p];
        for (unsigned k = 0; k < nk; k++) {
            double share = rest_sum > EPS && fixed > 0 ? rest[k] * fixed / rest_sum : 0;
            lp->cap[lp->off[p] + k] = pkg->l3[k].ncores ? pkg->l3[k].ncores : 1;
            rest[k] = lp->cap[lp->off[p] + k] * pl->par->spread_watermark - share;
        }
    }
    free(known);
    return 0;
}

/* Room of cache g (an index into lp->room) under the pack watermark (soft) or the spread one. */
static double room_at(const struct planner *pl, const struct l3_plan *lp, unsigned g, bool soft)
{
    const struct vpack_policy_params *par = pl->par;
    return lp->room[g] - (soft ? (par->spread_watermark - par->pack_watermark) * lp->cap[g] : 0);
}

/* The cache where most of the domain's placed load ran, or -1. */
static int l3_home(const struct planner *pl, const struct dom_info *di, int p)
{
    const struct vpack_domain_sample *d = di->d;
    double best = EPS, sum[MAX_L3] = {0};
    int home = -1;

    for (unsigned j = 0; j < d->nvcpus + d->niothreads + 1; j++) {
        const struct vpack_thread_sample *t = vpack__plan_thread_at(d, j);
        int k = t->cpu >= 0 && vpack_topology_package_of(pl->topo, t->cpu) == p
                    ? vpack_topology_l3_of(pl->topo, t->cpu)
                    : -1;
        if (k < 0 || k >= MAX_L3 || !vpack__plan_thread_placed(pl, di, j))
            continue;
        sum[k] += t->util;
        if (sum[k] > best) {
            best = sum[k];
            home = k;
        }
    }
    return home;
}

/*
 * Whether its bound allows every CPU of the caches in bits of package p: a
 * cache it may use only part of does not have the room the cache has.
 */
static bool l3_in_bound(const struct planner *pl, const struct dom_info *di, int p, uint64_t bits)
{
    const struct vpack_package *pkg = &pl->topo->packages[p];
    for (unsigned k = 0; k < pkg->nl3; k++)
        if ((bits >> k & 1) && !di->bound_is_all &&
            !vpack_cpuset_subset(&pkg->l3[k].cpus, di->bound))
            return false;
    return true;
}

static double bits_room(const struct l3_plan *lp, unsigned base, uint64_t bits)
{
    double r = 0;
    for (unsigned k = 0; bits >> k; k++)
        if (bits >> k & 1)
            r += lp->room[base + k] > 0 ? lp->room[base + k] : 0;
    return r;
}

/* The cheapest choice of caches of package p for load (rule 9). */
static uint64_t choose_l3(struct planner *pl, struct l3_plan *lp, const struct dom_info *di,
                          int p, double load)
{
    const struct vpack_package *pkg = &pl->topo->packages[p];
    const unsigned base = lp->off[p], nk = pkg->nl3;
    const struct dom_state *ds = di->prev;
    int home = l3_home(pl, di, p);
    uint64_t prev = 0;

    /* Sticky: where it was kept while that still holds it; from several
     * caches to one as soon as one holds it under the pack watermark. */
    if (ds && ds->l3 && di->nprev_pk == 1 && di->prev_pk[0] == p && !(ds->l3 >> nk) &&
        l3_in_bound(pl, di, p, ds->l3))
        prev = ds->l3;
    /* A load one interval old (a spread trigger still being counted) moves nothing. */
    if (prev && vpack__plan_unconfirmed(pl))
        return prev;
    if (prev && !(prev & (prev - 1)) &&
        room_at(pl, lp, base + (unsigned)__builtin_ctzll(prev), false) + EPS >= load)
        return prev;
    /* One cache: where it ran, then the one with most room; under the pack
     * watermark first, then under the spread watermark. */
    for (int soft = 1; soft >= 0; soft--) {
        int best = -1;
        if (home >= 0 && l3_in_bound(pl, di, p, UINT64_C(1) << home) &&
            room_at(pl, lp, base + (unsigned)home, soft) + EPS >= load)
            return UINT64_C(1) << home;
        for (unsigned k = 0; k < nk; k++)
            if (l3_in_bound(pl, di, p, UINT64_C(1) << k) &&
                room_at(pl, lp, base + k, soft) + EPS >= load &&
                (best < 0 || lp->room[base + k] > lp->room[base + (unsigned)best] + EPS))
                best = (int)k;
        if (best >= 0)
            return UINT64_C(1) << best;
    }
    if (prev && bits_room(lp, base, prev) + EPS >= load)
        return prev;
    /* The fewest caches, those with most room first. */
    uint64_t bits = 0;
    double got = 0;
    while (got + EPS < load) {
        int best = -1;
        for (unsigned k = 0; k < nk; k++)
            if (!(bits >> k & 1) && l3_in_bound(pl, di, p, UINT64_C(1) << k) &&
                (best < 0 || lp->room[base + k] > lp->room[base + (unsigned)best] + EPS))
                best = (int)k;
        if (best < 0 || lp->room[base + (unsigned)best] <= EPS)
            return 0; /* the caches cannot hold it: the whole package */
        bits |= UINT64_C(1) << best;
        got += lp->room[base + (unsigned)best];
    }
    return bits;
}

/* Takes load from the rooms of the caches in bits, in proportion to their room. */
static void take_l3(struct l3_plan *lp, unsigned base, uint64_t bits, double load)
{
    double total = bits_room(lp, base, bits);
    unsigned n = (unsigned)__builtin_popcountll(bits);
    for (unsigned k = 0; bits >> k; k++)
        if (bits >> k & 1) {
            double r = lp->room[base + k] > 0 ? lp->room[base + k] : 0;
            lp->room[base + k] -= load * (total > EPS ? r / total : 1.0 / n);
        }
}

/* The CPUs of the caches in bits of package p within the domain's bound, in the pool. */
static int l3_mask(struct planner *pl, struct dom_info *di, int p, uint64_t bits)
{
    const struct vpack_package *pkg = &pl->topo->packages[p];
    vpack_cpuset *c = vpack__plan_pool_new(pl->pool);
    char why[64];

    if (!c)
        return -ENOMEM;
    vpack_cpuset_zero(c);
    for (unsigned k = 0; k < pkg->nl3; k++)
        if (bits >> k & 1)
            vpack_cpuset_or(c, c, &pkg->l3[k].cpus);
    vpack_cpuset_and(c, c, di->bound);
    if (vpack_cpuset_empty(c))
        return 0;
    di->l3 = bits;
    di->l3mask = c;
    if (bits & (bits - 1))
        snprintf(why, sizeof(why), "; across %d L3 caches", __builtin_popcountll(bits));
    else
        snprintf(why, sizeof(why), "; in L3 cache %d", __builtin_ctzll(bits));
    size_t len = strlen(di->reason);
    snprintf(di->reason + len, sizeof(di->reason) - len, "%s", why);
    return 0;
}

/*
 * Rule 9: each managed domain placed on one package with several L3 caches
 * is kept in the fewest of them that hold what goes with its emulator,
 * largest first, the domains that stay in their caches before the others.
 */
int vpack__plan_place_l3(struct planner *pl)
{
    struct l3_plan lp = {0};
    unsigned n = 0;
    int ret = 0;

    if (pl->lifted)
        return 0;
    if ((ret = l3_rooms(pl, &lp)) < 0 || lp.off[pl->P] == 0)
        goto cleanup;
    for (unsigned i = 0; i < pl->snap->ndomains; i++) {
        struct dom_info *di = &pl->di[i];
        if (di->managed && di->npk == 1 && placed_load(di) > EPS &&
            lp.off[di->pk[0] + 1] > lp.off[di->pk[0]])
            pl->sorted[n++] = di;
    }
    qsort(pl->sorted, n, sizeof(*pl->sorted), vpack__plan_dom_order_cmp);
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned i = 0; i < n; i++) {
            struct dom_info *di = pl->sorted[i];
            const int p = di->pk[0];
            const double load = placed_load(di);
            const struct dom_state *ds = di->prev;
            bool stays = ds && ds->l3 && di->nprev_pk == 1 && di->prev_pk[0] == p;
            if (di->l3mask || (pass == 0 && !stays))
                continue;
            uint64_t bits = choose_l3(pl, &lp, di, p, load);
            if (!bits || (pass == 0 && bits != ds->l3))
                continue;
            take_l3(&lp, lp.off[p], bits, load);
            if ((ret = l3_mask(pl, di, p, bits)) < 0)
                goto cleanup;
        }
    }
cleanup:
    free(lp.off);
    free(lp.room);
    free(lp.cap);
    return ret;
}
