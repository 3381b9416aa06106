// SPDX-License-Identifier: MIT
/*
 * The plan's output (rules 2, 10, 11 of vpack/policy.h): each thread's mask,
 * the plan's packages and reasons, and the next state's domains.
 */

#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Records a managed domain's placement and its long-running vCPUs in the next state. */
static int remember(struct planner *pl, const struct dom_info *di, const int *ids,
                    unsigned nids, uint64_t placed)
{
    struct dom_state *ds = &pl->newdoms[pl->nnew];
    unsigned nv = di->d->nvcpus;

    ds->name = strdup(di->d->name);
    ds->pkg_ids = malloc((nids ? nids : 1) * sizeof(int));
    ds->busy = malloc(nv ? nv : 1);
    if (!ds->name || !ds->pkg_ids || !ds->busy) {
        vpack__plan_dom_state_clear(ds);
        memset(ds, 0, sizeof(*ds));
        return -ENOMEM;
    }
    memcpy(ds->pkg_ids, ids, nids * sizeof(int));
    for (unsigned i = 0; i < nv; i++)
        ds->busy[i] = vpack__plan_vcpu_busy(pl, di, i);
    ds->nbusy = nv;
    ds->npkgs = nids;
    ds->placed_ms = placed;
    ds->light_pkg_id = di->light_pk >= 0 ? pkg_id(pl, di->light_pk) : -1;
    ds->l3 = di->l3;
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
            found = prev->pkg_ids[j] == ids[i];
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
        vpack_cpuset *c = vpack__plan_pool_new(pl->pool);
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
    vpack_cpuset *c = vpack__plan_pool_new(pl->pool);
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
        vpack_cpuset *c = vpack__plan_pool_new(pl->pool);
        if (!c)
            return -ENOMEM;
        *c = d->cpuset ? *d->cpuset : pl->topo->cpus;
        bound = pmask = lmask = c;
    }
    if (restrict_) {
        if (!(pmask = union_mask(pl, di, di->pk, di->npk)))
            return -ENOMEM;
        if (di->l3mask)
            pmask = di->l3mask;
        lmask = pmask;
        if (di->light_pk >= 0 && !(lmask = union_mask(pl, di, &di->light_pk, 1)))
            return -ENOMEM;
        for (unsigned i = 0; i < di->npk; i++)
            ids[nids++] = pkg_id(pl, di->pk[i]);
        if (di->light_pk >= 0) {
            bool have = false;
            for (unsigned i = 0; i < di->npk; i++)
                have = have || di->pk[i] == di->light_pk;
            if (!have)
                ids[nids++] = pkg_id(pl, di->light_pk);
        }
    } else if (!di->managed || pl->lifted) {
        for (unsigned p = 0; p < pl->P; p++)
            if (in_cpuset(pl, di, (int)p))
                ids[nids++] = pkg_id(pl, (int)p);
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
            m = vpack__plan_vcpu_busy(pl, di, i) ? pmask : (di->level >= 2 ? lmask : bound);
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

/* Fills the plan and the next state's domains. Returns -ENOMEM, or -EINVAL for duplicate names. */
int vpack__plan_build_plan(struct planner *pl)
{
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
    plan->wakeup_package = pl->wake >= 0 ? pkg_id(pl, pl->wake) : -1;
    for (unsigned i = 0; i < pl->P; i++)
        if (pl->active[pl->order[i]]) {
            pl->active_ids[plan->nactive] = pkg_id(pl, pl->order[i]);
            plan->active_packages[plan->nactive++] = pkg_id(pl, pl->order[i]);
        }

    for (unsigned i = 0; i < pl->snap->ndomains; i++) {
        struct dom_info *di = &pl->di[i];
        struct vpack_plan_domain *pd = &plan->domains[i];
        int *ids = pl->cand;
        for (unsigned k = 0; k < di->npk; k++)
            ids[k] = pkg_id(pl, di->pk[k]);
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
    qsort(pl->newdoms, pl->nnew, sizeof(*pl->newdoms), vpack__plan_dom_state_cmp);
    for (unsigned i = 1; i < pl->nnew; i++)
        if (!strcmp(pl->newdoms[i - 1].name, pl->newdoms[i].name))
            return -EINVAL; /* duplicate domain names */
    /* A delay spread that moved none of the waiting domains does not grow again. */
    if (pl->delay_spreading && !waiting_moved)
        pl->count.delay_fruitless = true;
    return 0;
}
