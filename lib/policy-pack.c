// SPDX-License-Identifier: MIT
/*
 * Choosing packages (rules 4-6 of vpack/policy.h): the demand, the
 * preference order, the lower bound and which packages are active.
 */

#include "policy-internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The fewest packages whose cores * share hold demand: the largest first (rule 4). */
unsigned vpack__plan_packages_for(const struct planner *pl, double demand, double share)
{
    double acc = 0;
    for (unsigned i = 0; i < pl->P; i++) {
        acc += pl->cap[pl->by_cap[i]] * share;
        if (acc + EPS >= demand)
            return i + 1;
    }
    return pl->P;
}

/* The demand, the preference order (rule 5) and the lower bound (rule 4). */
void vpack__plan_size_demand(struct planner *pl)
{
    pl->demand = pl->total_busy > pl->threads_total ? pl->total_busy : pl->threads_total;
    pl->demand_now = pl->total_busy_now > pl->threads_now ? pl->total_busy_now : pl->threads_now;
    for (unsigned p = 0; p < pl->P; p++) {
        /* Load vpack places moves with its domains: it keeps nothing awake. */
        pl->awake[p] = pl->load[p] - pl->own[p] >= AWAKE_SHARE * pl->cap[p];
        pl->nforced += pl->forced[p];
    }
    qsort_r(pl->order, pl->P, sizeof(int), pkg_pref_cmp, pl);
    qsort_r(pl->by_cap, pl->P, sizeof(int), cap_desc_cmp, pl);
    pl->nlow = vpack__plan_packages_for(pl, pl->demand, pl->par->pack_watermark);
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
 * the fewest even when packages differ in size), then the largest, more than
 * n when the packages kept awake are too small to make up the demand.
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
    /* Then the largest, up to n and until they hold what the n largest would
     * of the demand: small packages that pins or bounds keep awake do not
     * leave the count short of it. */
    double want = 0;
    for (unsigned i = 0; i < pl->P && i < n; i++)
        want += pl->cap[pl->by_cap[i]] * pw;
    if (want > pl->demand)
        want = pl->demand;
    for (unsigned i = 0; i < pl->P && (count < n || got + EPS < want); i++) {
        int p = pl->by_cap[i];
        if (!pl->active[p]) {
            pl->active[p] = true;
            got += pl->cap[p] * pw;
            count++;
        }
    }
}

/* Activates the chosen packages, those pins keep awake and held ones (rules 4-6). */
void vpack__plan_activate_packages(struct planner *pl)
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
        vpack__plan_hold_resident(pl);
    }
}
