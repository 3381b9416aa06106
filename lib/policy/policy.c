// SPDX-License-Identifier: MIT
/*
 * The placement policy. See the rules in include/vpack/policy.h; the comments
 * here say how, not what. Nothing in the planner does I/O or reads a clock:
 * time is the sum of the snapshots' intervals. This file holds the policy
 * state, the plan's lifetime and vpack_plan_compute(), which runs the phases
 * of lib/policy/ in order (lib/policy/internal.h lists them): describe,
 * count, select, place, build.
 */

#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vpack_policy_params_default(struct vpack_policy_params *p)
{
    /* A field a line, like the power model's defaults: alike in shape only. */
    p->pack_watermark = 0.6;
    p->spread_watermark = 0.8;
    p->delay_threshold = 0.25;
    p->busy_vcpu = 0.5;
    p->spread_samples = 2;
    p->pack_delay_ms = 5000;
    p->min_residency_ms = 60000;
    p->default_level = 0;
    p->smt_gain = 0.25;
    p->pc6_system = false;
}

int vpack_policy_params_check(const struct vpack_policy_params *p, char *msg, size_t len)
{
    if (!(p->pack_watermark <= p->spread_watermark)) {
        snprintf(msg, len,
                 "the pack watermark (%g) is above the spread watermark (%g): packed load "
                 "would spread again at once",
                 p->pack_watermark, p->spread_watermark);
        return -EINVAL;
    }
    return 0;
}

struct vpack_policy_state *vpack_policy_state_new(void)
{
    return calloc(1, sizeof(struct vpack_policy_state));
}

void vpack__plan_dom_state_clear(struct dom_state *ds)
{
    free(ds->name);
    free(ds->pkg_ids);
    free(ds->busy);
}

/* The _free() functions free their struct's members: alike in shape only. */
void vpack_policy_state_free(struct vpack_policy_state *s)
{
    if (!s)
        return;
    for (unsigned i = 0; i < s->ndoms; i++)
        vpack__plan_dom_state_clear(&s->doms[i]);
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
        to->pkg_ids = NULL;
        to->busy = NULL;
        if (!(to->name = strdup(from->name)))
            goto fail;
        if (from->nbusy && !(to->busy = malloc(from->nbusy))) {
            c->ndoms++;
            goto fail;
        }
        if (from->nbusy)
            memcpy(to->busy, from->busy, from->nbusy);
        if (from->npkgs && !(to->pkg_ids = malloc(from->npkgs * sizeof(*to->pkg_ids)))) {
            c->ndoms++; /* its name is freed with the rest */
            goto fail;
        }
        if (from->npkgs)
            memcpy(to->pkg_ids, from->pkg_ids, from->npkgs * sizeof(*to->pkg_ids));
    }
    return c;
fail:
    vpack_policy_state_free(c);
    return NULL;
}

int vpack__plan_dom_state_cmp(const void *a, const void *b)
{
    return strcmp(((const struct dom_state *)a)->name, ((const struct dom_state *)b)->name);
}

const struct dom_state *vpack__plan_state_find(const struct vpack_policy_state *s,
                                               const char *name)
{
    struct dom_state key = {.name = (char *)name};
    if (!s->ndoms)
        return NULL;
    return bsearch(&key, s->doms, s->ndoms, sizeof(*s->doms), vpack__plan_dom_state_cmp);
}

vpack_cpuset *vpack__plan_pool_new(struct mask_pool *pool)
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

const char *vpack_plan_why_name(enum vpack_plan_why why)
{
    static const char *const names[VPACK_WHY_N] = {"first", "pack", "spread", "other"};
    return (unsigned)why < VPACK_WHY_N ? names[why] : "other";
}

/* Allocates the planner's arrays and the plan, which owns the mask pool. */
static int planner_alloc(struct planner *pl)
{
    const unsigned P = pl->P, nd = pl->snap->ndomains ? pl->snap->ndomains : 1;

    /* One array a line: the rows look alike because they are one kind of data. */
    pl->cap = calloc(P, sizeof(double));
    pl->load = calloc(P, sizeof(double));
    pl->own = calloc(P, sizeof(double));
    pl->load_now = calloc(P, sizeof(double));
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
    if (!pl->cap || !pl->load || !pl->own || !pl->load_now || !pl->mem_w || !pl->room || !pl->scratch ||
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
            vpack__plan_dom_state_clear(&pl->newdoms[i]);
        free(pl->newdoms);
    }
    if (pl->di)
        for (unsigned i = 0; i < pl->snap->ndomains; i++) {
            free(pl->di[i].pk);
            free(pl->di[i].prev_pk);
        }
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
    free(pl->load_now);
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

/* Moves the next state into st: nothing can fail here. */
static void commit_state(struct planner *pl)
{
    struct vpack_policy_state *st = pl->st;

    for (unsigned i = 0; i < st->ndoms; i++)
        vpack__plan_dom_state_clear(&st->doms[i]);
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
    st->count = pl->count;
    st->generation++;
}

int vpack_plan_compute(const struct vpack_topology *topo, const struct vpack_policy_params *par,
                       const struct vpack_snapshot *snap, struct vpack_policy_state *st,
                       struct vpack_plan **out)
{
    struct planner pl = {.topo = topo, .par = par, .snap = snap, .raw = snap, .st = st, .wake = -1};
    struct vpack__work_view work;
    int ret;

    if (!topo || !par || !snap || !st || !out || topo->npackages == 0)
        return -EINVAL;
    *out = NULL;
    pl.P = topo->npackages;
    pl.now = st->now_ms + snap->interval_ms;

    if ((ret = vpack__plan_work_view(topo, par, st, snap, &work, &pl.snap)) < 0)
        return ret;
    if ((ret = planner_alloc(&pl)) < 0)
        goto cleanup;
    if ((ret = vpack__plan_describe(&pl)) < 0)
        goto cleanup;
    vpack__plan_count(&pl);
    vpack__plan_select(&pl);
    vpack__plan_set_room(&pl);
    if ((ret = vpack__plan_place_managed(&pl)) < 0 || (ret = vpack__plan_place_light(&pl)) < 0 ||
        (ret = vpack__plan_place_l3(&pl)) < 0 ||
        (ret = vpack__plan_build_plan(&pl)) < 0)
        goto cleanup;
    commit_state(&pl);
    *out = pl.plan;
    pl.plan = NULL;

cleanup:
    planner_free(&pl, ret);
    vpack__plan_work_view_free(&work);
    return ret;
}

bool vpack_policy_state_settled(const struct vpack_policy_state *s,
                                const struct vpack_policy_params *params)
{
    if (!s->initialized || s->count.ndemand == 0 || s->count.over_count || s->count.under_ms)
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
