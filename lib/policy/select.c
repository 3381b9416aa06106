// SPDX-License-Identifier: MIT
/*
 * Which packages (rule 5 of vpack/policy.h, and rule 4's minimum residency):
 * count.c says how many, pl->nselect; this takes them in the
 * preference order describe.c worked out, then keeps awake the packages
 * of domains placed too recently to move. Writes pl->active.
 */

#include "internal.h"

#include <stdio.h>
#include <string.h>

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

/* A domain placed recently keeps its packages awake while packing (rule 4). */
static void hold_resident(struct planner *pl)
{
    for (unsigned i = 0; i < pl->snap->ndomains; i++) {
        const struct dom_info *di = &pl->di[i];
        const struct dom_state *ds = di->prev;
        if (!di->managed || !ds || pl->now - ds->placed_ms >= pl->par->min_residency_ms)
            continue;
        for (unsigned k = 0; k < di->nprev_pk; k++) {
            int p = di->prev_pk[k];
            if (p >= 0 && !pl->active[p]) {
                pl->active[p] = true;
                size_t len = strlen(pl->reason);
                snprintf(pl->reason + len, sizeof(pl->reason) - len,
                         "; package %d held for %s (minimum residency)", pkg_id(pl, p),
                         di->d->name);
            }
        }
    }
}

void vpack__plan_select(struct planner *pl)
{
    select_packages(pl, pl->nselect);
    if (!pl->lifted && !pl->spreading)
        hold_resident(pl);
}
