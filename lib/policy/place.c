// SPDX-License-Identifier: MIT
/*
 * Placing threads (rules 7 and 8 of vpack/policy.h): managed domains first
 * fit decreasing on the active packages, then level 2's light load on the
 * wake-up target.
 */

#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vpack__plan_dom_order_cmp(const void *a, const void *b)
{
    const struct dom_info *x = *(const struct dom_info *const *)a;
    const struct dom_info *y = *(const struct dom_info *const *)b;
    if (fabs(x->movable - y->movable) > EPS)
        return x->movable > y->movable ? -1 : 1;
    if (fabs(x->light - y->light) > EPS)
        return x->light > y->light ? -1 : 1;
    return strcmp(x->d->name, y->d->name);
}

/* Room: what each package can take beyond the load vpack does not place. */
void vpack__plan_set_room(struct planner *pl)
{
    for (unsigned p = 0; p < pl->P; p++)
        pl->room[p] = vpack__plan_free_room(pl, (int)p);
}

/* Whether every package of its previous plan is here and active. */
static bool pkgs_in_active(const struct planner *pl, const struct dom_info *di)
{
    for (unsigned i = 0; i < di->nprev_pk; i++) {
        int p = di->prev_pk[i];
        if (p < 0 || !pl->active[p])
            return false;
    }
    return di->nprev_pk > 0;
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
    return pkg_id(pl, x) - pkg_id(pl, y);
}

/* Formats package ids of the indexes in pk as "0,1". */
static void fmt_pkgs(const struct planner *pl, const int *pk, unsigned n, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < n && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%d", i ? "," : "", pkg_id(pl, pk[i]));
}

/* Its bound lies wholly in parked packages: wake the first of them, if it has load. */
static void wake_parked(struct planner *pl, struct dom_info *di)
{
    char pk[128];

    for (unsigned i = 0; i < pl->P; i++) {
        int p = pl->order[i];
        if (!in_bound(pl, di, p))
            continue;
        const char *what = di->stay_pkg >= 0 ? "its memory home (pc6_scope system)" : "its cpuset";
        /* Only load wakes a package; an idle domain may sit on a parked one. */
        if (di->movable + di->light < PINNED_AWAKE_UTIL) {
            snprintf(di->reason, sizeof(di->reason),
                     "idle, and %s allows only parked package %d: left within "
                     "its cpuset, the package stays parked",
                     what, pkg_id(pl, p));
            return;
        }
        pl->active[p] = true;
        di->pk[di->npk++] = p;
        pl->room[p] -= di->movable + di->light;
        fmt_pkgs(pl, di->pk, di->npk, pk, sizeof(pk));
        snprintf(di->reason, sizeof(di->reason), "on package %s: %s allows no active package", pk,
                 what);
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

    if (!prev || !di->nprev_pk || di->nprev_pk > 64 || !pkgs_in_active(pl, di))
        return false;
    for (unsigned i = 0; i < di->nprev_pk; i++) {
        int p = di->prev_pk[i];
        if (!in_bound(pl, di, p))
            return false;
        tmp[n++] = p;
    }
    double room = room_of(pl, tmp, n);
    bool young = pl->now - prev->placed_ms < pl->par->min_residency_ms;
    /* A multi-package domain that now fits one package is packed onto it. */
    /* Within min_residency_ms it stays unless the host is spreading; while a spread
     * trigger is only being counted, the load that crowds it is not confirmed yet. */
    if ((room + EPS < di->movable && (!young || pl->spreading) && !vpack__plan_unconfirmed(pl)) ||
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
             pkg_id(pl, p), di->movable, why);
}

/*
 * Room left on p below the pack watermark (soft) or the spread watermark.
 * The active packages are awake anyway: filling one to the spread watermark
 * while another has room under the pack watermark saves nothing and queues.
 */
static double room_at(const struct planner *pl, int p, bool soft)
{
    const struct vpack_policy_params *par = pl->par;
    return pl->room[p] - (soft ? (par->spread_watermark - par->pack_watermark) * pl->cap[p] : 0);
}

/*
 * One active package where it fits: its memory's, where it runs, then
 * preference order; first under the pack watermark, then under the spread
 * watermark.
 */
static bool place_one(struct planner *pl, struct dom_info *di, unsigned nc)
{
    const int first[2] = {di->mem_home, di->home};
    static const char *const why[2] = {", where its memory is", ", where it runs"};

    for (int soft = 1; soft >= 0; soft--) {
        for (unsigned k = 0; k < 2; k++) {
            int p = first[k];
            if (p >= 0 && pl->active[p] && in_bound(pl, di, p) &&
                room_at(pl, p, soft) + EPS >= di->movable) {
                put_on(pl, di, p, why[k]);
                return true;
            }
        }
        for (unsigned i = 0; i < nc; i++)
            if (room_at(pl, pl->cand[i], soft) + EPS >= di->movable) {
                put_on(pl, di, pl->cand[i], "");
                return true;
            }
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

/* An all-light level 2 domain stays on its package while that is active and has room. */
static bool light_stays(struct planner *pl, struct dom_info *di)
{
    if (di->nprev_pk != 1 || !pkgs_in_active(pl, di))
        return false;
    int p = di->prev_pk[0];
    if (!in_bound(pl, di, p) || (pl->room[p] + EPS < di->light && !vpack__plan_unconfirmed(pl)))
        return false;
    di->pk[di->npk++] = p;
    pl->room[p] -= di->light;
    snprintf(di->reason, sizeof(di->reason), "stays on package %d: light load (%.2f CPUs) fits",
             pkg_id(pl, p), di->light);
    return true;
}

/*
 * The wake-up target for amount CPUs of light load (sched_mc level 2): the
 * busiest active package in its bound with room for it (under the pack
 * watermark if one has, else under the spread watermark); else a parked one
 * with room, woken; else the active one with most room. -1 when its bound
 * has no active package.
 */
static int wake_target(struct planner *pl, const struct dom_info *di, double amount)
{
    int best = -1, roomiest = -1;
    const double wm = pl->par->spread_watermark;

    /* Room under the pack watermark first, then under the spread watermark. */
    for (int soft = 1; soft >= 0 && best < 0; soft--) {
        for (unsigned p = 0; p < pl->P; p++) {
            if (!pl->active[p] || !in_bound(pl, di, (int)p))
                continue;
            if (roomiest < 0 || pl->room[p] > pl->room[roomiest] + EPS)
                roomiest = (int)p;
            if (room_at(pl, (int)p, soft) + EPS < amount)
                continue;
            double used = pl->cap[p] * wm - pl->room[p];
            if (best < 0 || used > pl->cap[best] * wm - pl->room[best] + EPS)
                best = (int)p;
        }
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

/* An all-light level 2 domain that does not stay: on the wake-up target (rule 8). */
static void place_all_light(struct planner *pl, struct dom_info *di)
{
    int p = wake_target(pl, di, di->light);
    if (p < 0) {
        wake_parked(pl, di);
        return;
    }
    di->pk[di->npk++] = p;
    pl->room[p] -= di->light;
    snprintf(di->reason, sizeof(di->reason), "on %s %d%s: light load (%.2f CPUs)",
             di->stay_pkg >= 0 ? "package" : "wake-up package", pkg_id(pl, p),
             di->stay_pkg >= 0 ? ", where its memory is (pc6_scope system)" : "", di->light);
}

/* Places one managed domain that does not stay where it is (rule 7). */
static void place_domain(struct planner *pl, struct dom_info *di)
{
    unsigned nc = candidates(pl, di);
    if (nc == 0)
        wake_parked(pl, di);
    else if (!place_one(pl, di, nc) && !wake_one(pl, di))
        place_across(pl, di, nc);
}

/* A level 2 domain with no long-running vCPU: placed as light load (rule 8). */
static bool all_light(const struct dom_info *di)
{
    return di->level >= 2 && di->movable <= EPS && di->light > EPS;
}

/*
 * Places managed domains with long-running threads, largest first (rule 7).
 * Domains that stay where they are go first, all-light ones too: a domain
 * that has to move takes only the room the staying ones leave, so one move
 * does not push a staying domain off its package in turn. Then those whose
 * cpuset allows one package, then the rest.
 */
int vpack__plan_place_managed(struct planner *pl)
{
    unsigned nc;


    for (unsigned i = 0; i < pl->snap->ndomains; i++) {
        struct dom_info *di = &pl->di[i];
        if (di->managed && pl->lifted)
            snprintf(di->reason, sizeof(di->reason),
                     "unrestricted: all %u packages active (load %.2f CPUs)", pl->P, pl->demand);
        else if (di->managed)
            pl->sorted[pl->nsorted++] = di;
    }
    qsort(pl->sorted, pl->nsorted, sizeof(*pl->sorted), vpack__plan_dom_order_cmp);
    for (unsigned i = 0; i < pl->nsorted; i++) {
        struct dom_info *di = pl->sorted[i];
        if (!(di->pk = calloc(pl->P, sizeof(*di->pk))))
            return -ENOMEM;
        if (all_light(di))
            light_stays(pl, di);
        else if ((nc = candidates(pl, di)) > 0)
            stay_put(pl, di, nc);
    }
    /* Those whose cpuset allows one package have no choice: before the others. */
    for (unsigned i = 0; i < pl->nsorted; i++) {
        struct dom_info *di = pl->sorted[i];
        if (di->npk == 0 && di->one_pkg >= 0)
            all_light(di) ? place_all_light(pl, di) : place_domain(pl, di);
    }
    for (unsigned i = 0; i < pl->nsorted; i++) {
        struct dom_info *di = pl->sorted[i];
        if (!all_light(di) && di->npk == 0)
            place_domain(pl, di);
    }
    return 0;
}

/*
 * Where a domain's light vCPUs go when its packages have no room for them:
 * where they went last time while that is active and has room (so they do
 * not flip between two packages of equal load), else the wake-up target.
 */
static int light_apart(struct planner *pl, const struct dom_info *di)
{
    int p = di->prev_light_pk;

    if (p >= 0 && pl->active[p] && in_bound(pl, di, p) &&
        pl->room[p] + EPS >= di->light)
        return p;
    return wake_target(pl, di, di->light);
}

static int light_order_cmp(const void *a, const void *b)
{
    const struct dom_info *x = *(const struct dom_info *const *)a;
    const struct dom_info *y = *(const struct dom_info *const *)b;
    bool sx = x->npk > 0, sy = y->npk > 0;
    if (sx != sy)
        return sx ? -1 : 1;
    return vpack__plan_dom_order_cmp(a, b);
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
int vpack__plan_place_light(struct planner *pl)
{
    unsigned n = 0;

    if (pl->lifted)
        return 0;
    for (unsigned i = 0; i < pl->nsorted; i++) {
        struct dom_info *di = pl->sorted[i];
        if (di->level < 2)
            continue;
        if (!all_light(di)) {
            bool with = false;
            /* Beside them while a load one interval old crowds them (a spread trigger
             * still being counted) if they were beside them before. */
            bool was_with = vpack__plan_unconfirmed(pl) && di->prev && di->prev->light_pkg_id < 0;
            for (unsigned k = 0; k < di->npk && !with && di->light > EPS; k++)
                if (pl->room[di->pk[k]] + EPS >= di->light || was_with) {
                    pl->room[di->pk[k]] -= di->light;
                    with = true;
                }
            if (di->light > EPS && !with && (di->light_pk = light_apart(pl, di)) >= 0) {
                pl->room[di->light_pk] -= di->light;
                size_t len = strlen(di->reason);
                snprintf(di->reason + len, sizeof(di->reason) - len,
                         "; light vCPUs on package %d: no room beside the others",
                         pkg_id(pl, di->light_pk));
            }
            continue;
        }
        pl->sorted[n++] = di; /* reuses the front of sorted: placed ones are done */
    }
    qsort(pl->sorted, n, sizeof(*pl->sorted), light_order_cmp);
    for (unsigned i = 0; i < n; i++) {
        struct dom_info *di = pl->sorted[i];
        if (!di->npk)
            place_all_light(pl, di);
    }
    pl->wake = choose_wakeup(pl);
    return 0;
}
