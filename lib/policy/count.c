// SPDX-License-Identifier: MIT
/*
 * How many packages (rules 4 and 6 of vpack/policy.h): the demand, the lower
 * bound, and the count with its damping: spread fast, pack slowly, the
 * delay-spread latch; every package needed lifts the restrictions. Reads the
 * description of describe.c, writes the count (pl->nselect, pl->count,
 * the plan's why and reason); which packages make it up is select.c's.
 */

#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fewest packages whose cores * share hold demand: the largest first (rule 4). */
static unsigned packages_for(const struct planner *pl, double demand, double share)
{
    double acc = 0;
    for (unsigned i = 0; i < pl->P; i++) {
        acc += pl->cap[pl->by_cap[i]] * share;
        if (acc + EPS >= demand)
            return i + 1;
    }
    return pl->P;
}

static void spread_to(struct planner *pl, unsigned nprev, bool over_load, double cap_prev)
{
    const struct vpack_policy_params *par = pl->par;
    struct count_state *c = &pl->count;

    c->ndemand = pl->nlow > nprev + 1 ? pl->nlow : nprev + 1;
    pl->spreading = true;
    pl->why = VPACK_WHY_SPREAD;
    pl->delay_spreading = !over_load && pl->spread_demand <= cap_prev + EPS;
    c->delay_spread = pl->delay_spreading;
    c->over_count = 0;
    c->under_ms = 0;
    if (!pl->delay_spreading && pl->spread_demand <= cap_prev + EPS &&
        pl->wanted_now > cap_prev + EPS)
        snprintf(pl->reason, sizeof(pl->reason),
                 "spread to %u of %u packages: the last interval asked for %.2f CPUs "
                 "(run time and run-queue delay), over all of %.0f cores",
                 c->ndemand, pl->P, pl->wanted_now, cap_prev);
    else if (!pl->delay_spreading)
        snprintf(pl->reason, sizeof(pl->reason),
                 "spread to %u of %u packages: load %.2f CPUs over %.0f%% of %.0f cores",
                 c->ndemand, pl->P, pl->spread_demand, par->spread_watermark * 100, cap_prev);
    else
        snprintf(pl->reason, sizeof(pl->reason),
                 "spread to %u of %u packages: run-queue delay %.0f%% over %.0f%%", c->ndemand,
                 pl->P, pl->max_delay * 100, par->delay_threshold * 100);
}

/*
 * The lower bound stays under the active count: pack once it has for
 * pack_delay_ms, or pack_delay_ms + min_residency_ms after a delay spread.
 */
static void pack_later(struct planner *pl)
{
    const struct vpack_policy_params *par = pl->par;
    struct count_state *c = &pl->count;
    uint64_t wait = par->pack_delay_ms + (c->delay_spread ? par->min_residency_ms : 0);

    c->under_ms += pl->snap->interval_ms;
    if (c->under_ms >= wait) {
        c->ndemand = pl->nlow;
        c->under_ms = 0;
        c->delay_spread = false;
        /* Packed back over a delay the spread could not help: still no evidence. */
        if (pl->max_delay <= par->delay_threshold / 2)
            c->delay_fruitless = false;
        pl->why = VPACK_WHY_PACK;
        snprintf(pl->reason, sizeof(pl->reason),
                 "packed to %u of %u packages: load %.2f CPUs stayed low for %llu ms",
                 c->ndemand, pl->P, pl->demand, (unsigned long long)wait);
    } else {
        snprintf(pl->reason, sizeof(pl->reason),
                 "%u of %u packages: load %.2f CPUs would fit %u, packing in %llu ms%s",
                 c->ndemand, pl->P, pl->demand, pl->nlow,
                 (unsigned long long)(wait - c->under_ms),
                 c->delay_spread ? " (after a run-queue delay spread)" : "");
    }
}

static void hold(struct planner *pl)
{
    const struct count_state *c = &pl->count;
    const unsigned n = c->ndemand, P = pl->P;

    pl->count.under_ms = 0;
    if (pl->max_delay > pl->par->delay_threshold && c->delay_fruitless)
        snprintf(pl->reason, sizeof(pl->reason),
                 "%u of %u packages: run-queue delay %.0f%%, but the last spread moved no "
                 "waiting vCPU",
                 n, P, pl->max_delay * 100);
    else if (c->over_count)
        snprintf(pl->reason, sizeof(pl->reason),
                 "%u of %u packages: over the spread trigger %u of %u samples%s", n, P,
                 c->over_count, pl->over_need,
                 pl->over_need > pl->par->spread_samples ? " (load outside the guests)" : "");
    else
        snprintf(pl->reason, sizeof(pl->reason), "%u of %u packages: load %.2f CPUs", n, P,
                 pl->demand);
}

/*
 * The busy time of the first n packages in preference order (the active
 * ones), smoothed and over the last interval alone (0 without it).
 */
static void active_load(const struct planner *pl, unsigned n, double *busy, double *busy_now)
{
    for (unsigned i = 0; i < n; i++) {
        *busy += pl->load[pl->order[i]];
        *busy_now += pl->load_now[pl->order[i]];
    }
}

/* How many packages the demand needs (rule 4): spread fast, pack slowly. */
static void choose_count(struct planner *pl)
{
    const struct vpack_policy_state *st = pl->st;
    const struct vpack_policy_params *par = pl->par;
    struct count_state *c = &pl->count;
    const unsigned P = pl->P;

    pl->why = VPACK_WHY_HOLD;
    pl->over_need = par->spread_samples;
    *c = st->count;
    if (!st->initialized || st->count.ndemand == 0) {
        *c = (struct count_state){.ndemand = pl->nlow};
        pl->why = VPACK_WHY_FIRST;
        snprintf(pl->reason, sizeof(pl->reason),
                 "first plan: load %.2f CPUs needs %u of %u packages", pl->demand, c->ndemand, P);
        return;
    }
    unsigned nprev = st->count.ndemand > P ? P : st->count.ndemand;
    /* The first nprev packages in preference order are the ones sized for the
     * demand; packages only pins keep awake come on top and do not count. */
    double cap_prev = 0;
    for (unsigned i = 0; i < nprev; i++)
        cap_prev += pl->cap[pl->order[i]];
    /*
     * What spreads is load on the active packages: their busy time, or the
     * guests' own run time wherever it is, whichever is more. Load vpack
     * cannot move that runs on a parked package (another process, a burst)
     * takes no room from the guests, and spreading them would not move it;
     * it still counts in the demand that sizes a pack, so that no pack is
     * made into it (this demand is never above that one: no flapping).
     */
    double active_busy = 0, active_busy_now = 0;
    active_load(pl, nprev, &active_busy, &active_busy_now);
    double spread_demand = active_busy > pl->threads_total ? active_busy : pl->threads_total;
    pl->spread_demand = spread_demand;
    double spread_demand_now =
        active_busy_now > pl->threads_now ? active_busy_now : pl->threads_now;
    bool over_load = packages_for(pl, spread_demand, par->spread_watermark) > nprev;
    /*
     * Where the snapshot carries the last interval alone, a sample counts only
     * when that interval was over too: smoothing falls slowly, so one busy
     * interval would stay over the watermark for the samples after it, and a
     * one-interval burst outside the guests (or the agent's own pin calls)
     * would spread every guest. A load that stays spreads spread_samples later.
     */
    bool over_load_now =
        !pl->have_now || packages_for(pl, spread_demand_now, par->spread_watermark) > nprev;
    /* At once when the guests' own threads asked for more than all the active cores in the
     * last interval alone (run time, and the run-queue delay of those vpack may move) and
     * their run time alone filled the active cores to the spread watermark: a step that
     * saturates the active packages measures no more than them, and smoothing keeps part of
     * it for the next interval. Delay beside a light run time is load outside the guests
     * queueing them (a burst of another process, libvirtd pinning): it counts as a sample.
     * Load outside the guests is never a reason to spread at once; without the last
     * interval's values (older snapshots, traces) the smoothed load over all the active
     * cores is the only evidence, and it is used. */
    bool over_now = pl->wanted_now > cap_prev + EPS &&
                    pl->threads_now + EPS >= par->spread_watermark * cap_prev;
    bool over_all = over_now || (!pl->have_now && spread_demand > cap_prev + EPS);
    /* A delay spread that moved no waiting vCPU is no evidence: do not grow on it. */
    if (pl->max_delay <= par->delay_threshold / 2)
        c->delay_fruitless = false;
    bool over_delay = pl->max_delay > par->delay_threshold && !c->delay_fruitless &&
                      (!pl->have_now || pl->max_delay_now > par->delay_threshold);
    /* With every package active there is nowhere to spread to. */
    c->over_count = ((over_load && over_load_now) || over_delay) && nprev < P ? c->over_count + 1 : 0;
    /*
     * Load outside the guests alone spreads one sample later than theirs: a
     * burst of another process of at most one interval that straddles two
     * ticks is over in both of them, never in a third, and spreading the
     * guests for it only to pack them again is a flap (issue 24). That holds
     * for the run-queue delay such a burst makes the guests wait too: while
     * their own run time is under the trigger, their delay is someone else's
     * load. Only the guests' own load over the trigger counts as before.
     */
    bool guests_over = packages_for(pl, pl->threads_total, par->spread_watermark) > nprev &&
                       (!pl->have_now ||
                        packages_for(pl, pl->threads_now, par->spread_watermark) > nprev);
    pl->over_need = par->spread_samples + (pl->have_now && !guests_over ? 1 : 0);
    c->ndemand = nprev;
    if (nprev < P && (over_all || c->over_count >= pl->over_need))
        spread_to(pl, nprev, over_load || over_all, cap_prev);
    /* A delay spread that moved no waiting vCPU packs back as one whose delay
     * stopped: more packages do not help a vCPU that waits where vpack
     * cannot move it (its guest's own pin, load outside the guests). */
    else if (pl->nlow < nprev && !over_load &&
             (pl->max_delay <= par->delay_threshold / 2 || c->delay_fruitless))
        pack_later(pl);
    else
        hold(pl);
}

void vpack__plan_count(struct planner *pl)
{
    const unsigned P = pl->P;

    pl->demand = pl->total_busy > pl->threads_total ? pl->total_busy : pl->threads_total;
    pl->demand_now = pl->total_busy_now > pl->threads_now ? pl->total_busy_now : pl->threads_now;
    pl->nlow = packages_for(pl, pl->demand, pl->par->pack_watermark);
    choose_count(pl);

    /* Rule 6. One package: lifted once its load passes the pack watermark. */
    unsigned n = pl->count.ndemand;
    pl->lifted = n >= P && (P > 1 || pl->demand > pl->par->pack_watermark * pl->cap[0] + EPS);
    if (pl->nforced > n)
        n = pl->nforced;
    pl->nselect = pl->lifted ? P : n;
    if (pl->lifted) {
        size_t len = strlen(pl->reason);
        snprintf(pl->reason + len, sizeof(pl->reason) - len,
                 "; all %u packages active: restrictions lifted", P);
    }
}

bool vpack__plan_unconfirmed(const struct planner *pl)
{
    return !pl->spreading && pl->count.over_count > 0 && pl->count.over_count < pl->over_need;
}
