// SPDX-License-Identifier: MIT
/*
 * Work, not occupancy: what the planner measures load in (issue 26, item 6).
 *
 * Two busy hardware threads of one core each run slower than one alone: the
 * core does 1 + smt_gain CPUs' worth of work with both busy, not 2. A thread
 * beside a busy sibling therefore shows more run time for the same work, and
 * a CPU more busy time. A planner that reads busy time as demand sees the
 * load grow when it packs threads onto siblings and shrink when it spreads
 * them: it spreads, packs back, and spreads again under a constant input,
 * and a domain's own co-running makes whichever package it is on look
 * fuller than the one it is not on, so it moves back and forth every
 * minimum residency (test-policy-invariants on package:8 core:4 pu:2 found
 * both once the host model charged co-running).
 *
 * So, before any phase runs, the snapshot's busy times become work: a CPU
 * busy b beside siblings busy s in all (at most one CPU's worth counted) did
 * b * (1 - s * (1 - smt_gain) / 2) of a lone CPU's work, the speed the host
 * model (vpack/model.h, step 8) gives it; a thread's run time is scaled by
 * the ratio of work to busy time of the CPUs around the one it last ran on
 * (its L3 cache's, or its package's where the topology has no L3); when
 * the CPU is not known, of where the previous plan kept its domain (the
 * caches, else the packages; the host for a domain new to the policy), as
 * l3.c reads such a thread. A thread moves among its mask's CPUs,
 * and a ratio wider than the L3 cache would let the cache packer (l3.c)
 * count a domain's threads at another cache's ratio than the cache's own
 * busy time, and move it between caches every interval. Smoothed and last-interval values are
 * converted alike; run-queue delay is a share of time, not work, and stays.
 * On a host without SMT, or with smt_gain 1, the snapshot is used as it is.
 */

#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool has_smt(const struct vpack_topology *t)
{
    for (unsigned p = 0; p < t->npackages; p++)
        if (t->packages[p].threads_per_core > 1)
            return true;
    return false;
}

static double clamp01(double x)
{
    return x < 0 ? 0 : x > 1 ? 1 : x;
}

/* Regions: each package's L3 caches, or the package as one where it has none. */
static unsigned region_count(const struct vpack_topology *t)
{
    unsigned n = 0;
    for (unsigned p = 0; p < t->npackages; p++)
        n += t->packages[p].nl3 ? t->packages[p].nl3 : 1;
    return n;
}

/*
 * in[] (busy per CPU; negative: not reported) as work into out[]; sum[2r]
 * and sum[2r + 1] each region's work and busy time, sum[2 nr], sum[2 nr + 1]
 * the host's. core_sum holds ncores doubles.
 */
static void busy_to_work(const struct vpack_topology *t, double slow, const int *region,
                         unsigned nr, const double *in, unsigned n, double *out, double *core_sum,
                         unsigned ncores, double *sum)
{
    for (unsigned k = 0; k < ncores; k++)
        core_sum[k] = 0;
    for (unsigned r = 0; r < 2 * nr + 2; r++)
        sum[r] = 0;
    for (unsigned c = 0; c < n; c++) {
        int core = vpack_topology_core_of(t, (int)c);
        if (core >= 0 && in[c] > 0)
            core_sum[core] += clamp01(in[c]);
    }
    for (unsigned c = 0; c < n; c++) {
        int core = vpack_topology_core_of(t, (int)c), r = region[c];
        out[c] = in[c];
        if (core < 0 || r < 0 || in[c] <= 0)
            continue;
        double b = clamp01(in[c]);
        out[c] = b * (1 - clamp01(core_sum[core] - b) * slow);
        sum[2 * r] += out[c];
        sum[2 * r + 1] += b;
        sum[2 * nr] += out[c];
        sum[2 * nr + 1] += b;
    }
}

/* Work / busy of the regions in want[] (want[nr]: the host's); 1 when they were idle. */
static double ratio_of(const double *sum, const bool *want, unsigned nr)
{
    double w = 0, b = 0;
    for (unsigned r = 0; r <= nr; r++)
        if (want[r]) {
            w += sum[2 * r];
            b += sum[2 * r + 1];
        }
    return b > 0 ? w / b : 1;
}

/*
 * Where the threads of a domain whose CPU is not known ran: as l3.c reads
 * it, the L3 caches its one package kept it in, else its packages in the
 * previous plan, else the host (want[nr]).
 */
static void domain_regions(const struct vpack_topology *t, const struct vpack_policy_state *st,
                           const char *name, const int *base, unsigned nr, bool *want)
{
    const struct dom_state *ds = st ? vpack__plan_state_find(st, name) : NULL;
    bool any = false;

    memset(want, 0, (nr + 1) * sizeof(*want));
    for (unsigned k = 0; ds && k < ds->npkgs; k++) {
        int p = vpack_topology_package_index(t, ds->pkg_ids[k]);
        unsigned nl3 = p >= 0 ? t->packages[p].nl3 : 0, n = nl3 ? nl3 : 1;
        bool by_l3 = ds->npkgs == 1 && ds->l3 && nl3 >= 2 && nl3 < 64 && !(ds->l3 >> nl3);

        for (unsigned r = 0; p >= 0 && r < n; r++)
            if (!by_l3 || ds->l3 >> r & 1) {
                want[base[p] + (int)r] = true;
                any = true;
            }
    }
    want[nr] = !any;
}

/* A thread's run time as work: at its CPU's region's ratio, else at its domain's. */
static void thread_to_work(const struct vpack__work_view *v, const struct vpack_snapshot *in,
                           struct vpack_thread_sample *th, double dom, double dom_now)
{
    int r = th->cpu >= 0 && (unsigned)th->cpu < in->ncpus ? v->region[th->cpu] : -1;
    const double *sum = v->sum, *now = v->sum_now;

    th->util *= r >= 0 ? (sum[2 * r + 1] > 0 ? sum[2 * r] / sum[2 * r + 1] : 1) : dom;
    th->util_now *= r >= 0 ? (now[2 * r + 1] > 0 ? now[2 * r] / now[2 * r + 1] : 1) : dom_now;
}

int vpack__plan_work_view(const struct vpack_topology *t, const struct vpack_policy_params *par,
                          const struct vpack_policy_state *st, const struct vpack_snapshot *in,
                          struct vpack__work_view *v, const struct vpack_snapshot **out)
{
    const double slow = (1 - clamp01(par->smt_gain)) / 2;
    const unsigned nr = region_count(t);
    unsigned nthr = 0, ncores = 0;

    memset(v, 0, sizeof(*v));
    *out = in;
    if (slow <= 0 || !has_smt(t))
        return 0;
    for (int c = 0; c <= t->max_cpu; c++) {
        int core = vpack_topology_core_of(t, c);
        if (core >= 0 && (unsigned)core + 1 > ncores)
            ncores = (unsigned)core + 1;
    }
    for (unsigned i = 0; i < in->ndomains; i++)
        nthr += in->domains[i].nvcpus + in->domains[i].niothreads;
    v->snap = *in;
    /* Work per CPU (smoothed, last interval), the cores' sums, two region sums of 2 nr + 2. */
    v->num = calloc(2 * (size_t)in->ncpus + ncores + 4 * (size_t)nr + 4, sizeof(double));
    v->region = calloc((size_t)in->ncpus + t->npackages + 1, sizeof(int));
    v->want = calloc(nr + 1, sizeof(bool));
    v->doms = calloc(in->ndomains ? in->ndomains : 1, sizeof(*v->doms));
    v->thr = calloc(nthr ? nthr : 1, sizeof(*v->thr));
    if (!v->num || !v->region || !v->want || !v->doms || !v->thr) {
        vpack__plan_work_view_free(v);
        return -ENOMEM;
    }
    double *core_sum = v->num + 2 * (size_t)in->ncpus;
    int *base = v->region + in->ncpus;
    v->sum = core_sum + ncores;
    v->sum_now = v->sum + 2 * (size_t)nr + 2;
    for (unsigned p = 0, r = 0; p < t->npackages; p++) {
        base[p] = (int)r;
        r += t->packages[p].nl3 ? t->packages[p].nl3 : 1;
    }
    for (unsigned c = 0; c < in->ncpus; c++) {
        int p = vpack_topology_package_of(t, (int)c), k = vpack_topology_l3_of(t, (int)c);
        v->region[c] = p < 0 ? -1 : base[p] + (k > 0 ? k : 0);
    }
    v->snap.cpu_busy = v->num;
    busy_to_work(t, slow, v->region, nr, in->cpu_busy, in->ncpus, v->snap.cpu_busy, core_sum,
                 ncores, v->sum);
    memcpy(v->sum_now, v->sum, (2 * (size_t)nr + 2) * sizeof(double));
    if (in->cpu_busy_now) {
        v->snap.cpu_busy_now = v->num + in->ncpus;
        busy_to_work(t, slow, v->region, nr, in->cpu_busy_now, in->ncpus, v->snap.cpu_busy_now,
                     core_sum, ncores, v->sum_now);
    }
    v->snap.domains = v->doms;
    for (unsigned i = 0, off = 0; i < in->ndomains; i++) {
        const struct vpack_domain_sample *d = &in->domains[i];
        struct vpack_domain_sample *o = &v->doms[i];

        domain_regions(t, st, d->name, base, nr, v->want);
        double dom = ratio_of(v->sum, v->want, nr), dom_now = ratio_of(v->sum_now, v->want, nr);
        *o = *d;
        o->vcpus = v->thr + off;
        o->iothreads = v->thr + off + d->nvcpus;
        if (d->nvcpus)
            memcpy(o->vcpus, d->vcpus, d->nvcpus * sizeof(*d->vcpus));
        if (d->niothreads)
            memcpy(o->iothreads, d->iothreads, d->niothreads * sizeof(*d->iothreads));
        off += d->nvcpus + d->niothreads;
        for (unsigned k = 0; k < d->nvcpus; k++)
            thread_to_work(v, in, &o->vcpus[k], dom, dom_now);
        for (unsigned k = 0; k < d->niothreads; k++)
            thread_to_work(v, in, &o->iothreads[k], dom, dom_now);
        thread_to_work(v, in, &o->emulator, dom, dom_now);
    }
    *out = &v->snap;
    return 0;
}

void vpack__plan_work_view_free(struct vpack__work_view *v)
{
    free(v->num);
    free(v->region);
    free(v->want);
    free(v->doms);
    free(v->thr);
    memset(v, 0, sizeof(*v));
}

int vpack_policy_measure_work(const struct vpack_topology *topo,
                              const struct vpack_policy_params *params,
                              const struct vpack_policy_state *state, struct vpack_snapshot *snap)
{
    struct vpack__work_view v;
    const struct vpack_snapshot *w;
    int ret;

    if (!topo || !params || !snap)
        return -EINVAL;
    if ((ret = vpack__plan_work_view(topo, params, state, snap, &v, &w)) < 0 || w == snap)
        return ret;
    memcpy(snap->cpu_busy, w->cpu_busy, snap->ncpus * sizeof(*snap->cpu_busy));
    if (snap->cpu_busy_now)
        memcpy(snap->cpu_busy_now, w->cpu_busy_now, snap->ncpus * sizeof(*snap->cpu_busy_now));
    for (unsigned i = 0; i < snap->ndomains; i++) {
        struct vpack_domain_sample *d = &snap->domains[i];
        const struct vpack_domain_sample *o = &w->domains[i];
        if (d->nvcpus)
            memcpy(d->vcpus, o->vcpus, d->nvcpus * sizeof(*d->vcpus));
        if (d->niothreads)
            memcpy(d->iothreads, o->iothreads, d->niothreads * sizeof(*d->iothreads));
        d->emulator = o->emulator;
    }
    vpack__plan_work_view_free(&v);
    return 0;
}
