// SPDX-License-Identifier: MIT
/*
 * vpackctl simulate's run: each interval of the source through the host
 * model at levels 0, 1 and 2 and the two oracles, the timeline, the figures.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simulate.h"
#include "vpack/oracle.h"
#include "vpack/snapshot.h"
#include "vpackctl.h"

/* The next interval: 1 with *snap, 0 at the end, -1 after a message. */
static int source_next(struct source *s, struct vpack_snapshot **snap)
{
    *snap = NULL;
    if (!s->f) {
        if (s->k >= s->nintervals)
            return 0;
        if (vpack_planetlab_snapshot(&s->pl, s->k++, snap) < 0) {
            vpackctl_err("simulate: out of memory");
            return -1;
        }
        return 1;
    }
    for (;;) {
        ssize_t n = getline(&s->line, &s->cap, s->f);
        char *err = NULL;
        int r;

        if (n < 0) {
            if (ferror(s->f)) {
                vpackctl_err("simulate: %s: cannot read: %s", s->name, strerror(errno));
                return -1;
            }
            return 0;
        }
        s->lineno++;
        r = vpack_trace_parse_line(s->line, (size_t)n, s->lineno, snap, &err);
        if (r == -ENODATA)
            continue;
        if (r < 0) {
            vpackctl_err("simulate: %s: %s", s->name, err ? err : "out of memory");
            free(err);
            return -1;
        }
        return 1;
    }
}

static int timeline_add(struct sim *sim, const struct point *p)
{
    if (sim->ntl == sim->captl) {
        unsigned long nc = sim->captl ? sim->captl * 2 : 4096;
        struct point *np = realloc(sim->tl, nc * sizeof(*np));
        if (!np)
            return -ENOMEM;
        sim->tl = np;
        sim->captl = nc;
    }
    sim->tl[sim->ntl++] = *p;
    return 0;
}

/* Writes snap as a line of the trace being written. Returns 0 or -1 (reported). */
static int write_interval(struct sim *sim, const char *path, const struct vpack_snapshot *snap)
{
    char *json = vpack_snapshot_to_json(snap);

    if (!json) {
        vpackctl_err("simulate: out of memory");
        return -1;
    }
    if (fputs(json, sim->write) < 0 || fputc('\n', sim->write) < 0) {
        vpackctl_err("simulate: %s: %s", path, strerror(errno));
        free(json);
        return -1;
    }
    free(json);
    return 0;
}

/* Adds snap's count of oracle o; *k gets it. Returns 0 or -1 (reported). */
static int oracle_add(struct sim *sim, struct oracle *o, const struct vpack_snapshot *snap, int *k)
{
    bool exact;

    *k = o->delay_bound > 0 ? vpack_oracle_delay_packages(sim->topo, o->cap, snap, o->delay_bound,
                                                          &exact)
                            : vpack_oracle_packages(sim->topo, o->cap, snap, &exact);
    if (*k < 0) {
        vpackctl_err("simulate: out of memory");
        return -1;
    }
    o->package_s += *k * (snap->interval_ms / 1000.0);
    o->exact = o->exact && exact;
    return 0;
}

/* One interval through the three models and the oracles. Returns 0 or -1 (reported). */
static int step(struct sim *sim, const struct vpack_snapshot *snap, const char *where,
                unsigned long at)
{
    struct vpack_model_interval iv;
    struct point p = {0};
    int bound, target, delay;

    /* The burst ends each period of host_every intervals. */
    bool burst = sim->host_every && sim->host_burst > 0 &&
                 ++sim->nsteps % sim->host_every == 0;

    if (oracle_add(sim, &sim->bound, snap, &bound) < 0 ||
        oracle_add(sim, &sim->target, snap, &target) < 0 ||
        oracle_add(sim, &sim->delay, snap, &delay) < 0)
        return -1;
    for (int l = 0; l < NLEVELS; l++) {
        char *err = NULL;
        int r = burst ? vpack_model_add_foreign(sim->model[l], -1, sim->host_burst) : 0;

        if (r == 0)
            r = vpack_model_step(sim->model[l], snap, &iv, &err);

        if (r < 0) {
            vpackctl_err("simulate: %s: interval %lu: %s", where, at,
                         err ? err : "out of memory");
            free(err);
            return -1;
        }
        if (iv.nworking < (unsigned)bound) {
            sim->under_bound[l]++;
            /* A refill is work lost to a move, not to capacity: the bound still holds. */
            if (iv.served + iv.refill >= iv.demand - 1e-9)
                sim->under_bound_served[l]++;
        }
        if (l == NLEVELS - 1) {
            p.demand = (float)iv.demand;
            p.active = (unsigned short)iv.nworking;
            p.wakeup = (short)(iv.wakeup_package < SHRT_MAX ? iv.wakeup_package : -1);
        }
    }
    sim->seconds += snap->interval_ms / 1000.0;
    p.bound = (unsigned short)bound;
    if (snap->ndomains > sim->ndomains)
        sim->ndomains = snap->ndomains;
    if (timeline_add(sim, &p) < 0) {
        vpackctl_err("simulate: out of memory");
        return -1;
    }
    return 0;
}

/* Runs every interval of src (up to max_s seconds, 0: all). Returns 0 or -1 (reported). */
int simulate_run(struct sim *sim, struct source *src, double max_s, const char *write_path)
{
    double seconds = 0;

    sim->bound.exact = sim->target.exact = sim->delay.exact = true;
    for (;;) {
        struct vpack_snapshot *snap = NULL;
        int r;

        if (max_s > 0 && seconds >= max_s - 1e-9)
            break;
        r = source_next(src, &snap);
        if (r <= 0)
            return r;
        seconds += snap->interval_ms / 1000.0;
        if ((sim->write && write_interval(sim, write_path, snap) < 0) ||
            step(sim, snap, src->name,
                 src->f ? src->lineno : src->k) < 0) {
            vpack_snapshot_free(snap);
            return -1;
        }
        vpack_snapshot_free(snap);
    }
    return 0;
}

/* Energy under the power model's scope had a whole-idle package outside the deep state drawn deep_w. */
static double energy_idle_deep(const struct sim *sim, const struct vpack_model_totals *t)
{
    return t->energy_scope_j[sim->pc6_scope] -
           (sim->idle_w - sim->deep_w) * t->shallow_pkg_s[sim->pc6_scope];
}

/*
 * The consolidation literature's ranking figures (Beloglazov and Buyya,
 * "Optimal online deterministic algorithms and adaptive heuristics for
 * energy and performance efficient dynamic consolidation of virtual
 * machines in cloud data centers", CCPE 24(13), 2012): the saturation share
 * (their SLATAH: the share of active-host time at 100 %), and energy x
 * violation (their ESV = E x SLATAH x PDM), with PDM here the share of the
 * demanded work the model did not serve (theirs: what migrations cost; here
 * also what sharing costs: the model's unserved work is both the moved
 * threads' cache refill, model.h's costs, and demand over capacity).
 * Returns 0 or -1 (reported).
 */
static int ranking_figures(const struct sim *sim, int l, struct figures *x)
{
    if (vpack_model_vm_spread(sim->model[l], &x->vm) < 0) {
        vpackctl_err("simulate: out of memory");
        return -1;
    }
    x->saturation = x->t.active_pkg_s > 0 ? x->t.saturated_pkg_s / x->t.active_pkg_s : 0;
    x->esv = x->kwh * x->saturation * (1 - x->served_ratio);
    return 0;
}

/* The figures of the costs (model.h, step 8) of level x, f[0] being level 0's. */
static void cost_figures(const struct sim *sim, const struct figures *f, struct figures *x)
{
    const struct vpack_model_totals *t = &x->t;

    x->vs_delay = sim->delay.package_s > 0 ? t->active_pkg_s / sim->delay.package_s - 1 : 0;
    for (unsigned v = 0; v < VPACK_COST_VARIANTS; v++)
        x->saving_var[v] =
            f[0].t.energy_var_j[v] > 0 ? 1 - t->energy_var_j[v] / f[0].t.energy_var_j[v] : 0;
    /* The refill comes off served work one for one: none of it, or twice (as long as the
     * threads had that much served: an estimate from above). */
    x->served_refill0 = t->demand > 0 ? (t->served + t->refill_s) / t->demand : 1;
    x->served_refill2 = t->demand > 0 ? (t->served - t->refill_s) / t->demand : 1;
}

int simulate_figures(const struct sim *sim, struct figures *f)
{
    for (int l = 0; l < NLEVELS; l++) {
        struct figures *x = &f[l];

        vpack_model_totals(sim->model[l], &x->t);
        x->kwh = x->t.energy_j / 3.6e6;
        x->saving = f[0].t.energy_j > 0 ? 1 - x->t.energy_j / f[0].t.energy_j : 0;
        for (unsigned s = 0; s < VPACK_PC6_SCOPES; s++)
            x->saving_scope[s] = f[0].t.energy_scope_j[s] > 0
                                     ? 1 - x->t.energy_scope_j[s] / f[0].t.energy_scope_j[s]
                                     : 0;
        x->saving_idle_deep = energy_idle_deep(sim, &f[0].t) > 0
                                  ? 1 - energy_idle_deep(sim, &x->t) / energy_idle_deep(sim, &f[0].t)
                                  : 0;
        x->served_ratio = x->t.demand > 0 ? x->t.served / x->t.demand : 1;
        x->moves_per_hour = x->t.seconds > 0 ? x->t.moves / (x->t.seconds / 3600) : 0;
        x->awake_pkg_s = 0;
        for (unsigned p = 0; p < x->t.npackages; p++)
            x->awake_pkg_s += x->t.seconds - x->t.pkg_idle_s[p];
        x->vs_bound = sim->bound.package_s > 0 ? x->t.active_pkg_s / sim->bound.package_s - 1 : 0;
        x->vs_target =
            sim->target.package_s > 0 ? x->t.active_pkg_s / sim->target.package_s - 1 : 0;
        if (ranking_figures(sim, l, x) < 0)
            return -1;
        cost_figures(sim, f, x);
    }
    return 0;
}

/*
 * A level with fewer packages with work than the capacity bound while it
 * served all its demand breaks the bound's proof (oracle.h): a bug in the
 * model or the oracle, never a result. Returns 0, or -1 (reported).
 */
int simulate_bound_broken(const struct sim *sim)
{
    int ret = 0;

    for (int l = 0; l < NLEVELS; l++)
        if (sim->under_bound_served[l]) {
            vpackctl_err("simulate: bug: level %d had fewer packages with work than the capacity "
                         "bound in %lu intervals where it served all its demand",
                         l, sim->under_bound_served[l]);
            ret = -1;
        }
    return ret;
}

