// SPDX-License-Identifier: MIT
/*
 * Invariants of the placement policy (issue 13, item 5), checked on every
 * plan over randomized series with fixed seeds, on synthetic hosts and on the
 * real topologies of $VPACK_FIXTURES (hwloc XML exports and sysfs trees).
 *
 * Series are closed-loop: each snapshot puts every thread on a CPU of the
 * mask the previous plan gave it (staying on its CPU while allowed, else the
 * least busy CPU of the mask) and reports per-CPU busy time from that, as the
 * kernel would. No host model: only where threads run, not how fast.
 *
 * Checked on every plan: guest pins kept; masks within the cpuset bound;
 * level 0 never restricted; no package given more than spread watermark x
 * cores of threads confined to it unless every package is active; a domain
 * that fits a parked package is not split; a domain's emulator and iothreads
 * stay with it. Per series: a constant input makes no mask change after
 * settling; vCPUs hovering +-10% around busy_vcpu make at most one change per
 * domain per minimum residency; a run-queue-delay spread is given back within
 * pack delay + minimum residency after the delay stops.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vpack/cpuset.h"
#include "vpack/policy.h"
#include "vpack/snapshot.h"
#include "vpack/topology.h"

#include "policy-test-util.h"

#define NDOMS 12
#define MAXV 8
#define MAXIO 2
#define NTHR (MAXV + 1 + MAXIO)
#define TOL 1e-6

struct tdom {
    char name[16];
    int level;
    unsigned nv, nio;
    vpack_cpuset bound;        /* usable CPUs of its cpuset (all without one) */
    bool has_bound;
    vpack_cpuset pin[NTHR];    /* thread j: vCPUs, emulator, iothreads */
    bool pinned[NTHR];
    double util[NTHR];
    int cpu[NTHR];             /* where it runs, -1 before the first snapshot */
    int memnode;
    double last_change_ms;     /* when its masks last changed */
};

struct world {
    struct vpack_topology *t;
    struct vpack_policy_params par;
    struct vpack_policy_state *st;
    struct tdom d[NDOMS];
    unsigned nd;
    double now_ms;
    struct vpack_snapshot *snap; /* the last one, and its plan */
    struct vpack_plan *plan;
    const char *label;
    unsigned seed;
};

static uint64_t rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

static double rnd_unit(uint64_t *s)
{
    return (double)rnd(s) / 2147483648.0;
}

static unsigned total_cores(const struct vpack_topology *t)
{
    unsigned n = 0;
    for (unsigned i = 0; i < t->npackages; i++)
        n += t->packages[i].ncores;
    return n;
}

/* How many domains have a vCPU hovering at busy_vcpu: 20% of the host's cores' worth. */
static unsigned hovering(const struct world *w)
{
    unsigned n = (unsigned)(total_cores(w->t) * 0.2 / w->par.busy_vcpu);
    n = n < 1 ? 1 : n;
    return n < w->nd ? n : w->nd;
}

/* A random host load: nd domains worth about share of the host's cores. */
static void world_init(struct world *w, struct vpack_topology *t, const char *label,
                       unsigned seed, double share, bool hover)
{
    uint64_t s = seed * 7919u + 17;
    double cores = total_cores(t);

    memset(w, 0, sizeof(*w));
    w->t = t;
    w->label = label;
    w->seed = seed;
    vpack_policy_params_default(&w->par);
    w->st = vpack_policy_state_new();
    assert_non_null(w->st);
    w->nd = 3 + (unsigned)(rnd(&s) % (NDOMS - 2));
    for (unsigned i = 0; i < w->nd; i++) {
        struct tdom *d = &w->d[i];
        snprintf(d->name, sizeof(d->name), "d%02u", i);
        d->level = (int)(rnd(&s) % 3);
        d->nv = 1 + (unsigned)(rnd(&s) % MAXV);
        d->nio = (unsigned)(rnd(&s) % (MAXIO + 1));
        d->memnode = rnd(&s) % 2 ? (int)(rnd(&s) % 2) : -1;
        d->bound = t->cpus;
        unsigned b = (unsigned)(rnd(&s) % 10);
        if (b == 0) {
            d->bound = t->packages[rnd(&s) % t->npackages].cpus;
            d->has_bound = true;
        } else if (b == 1) {
            vpack_cpuset_zero(&d->bound);
            VPACK_CPUSET_FOREACH(c, &t->cpus) {
                if (rnd(&s) % 2)
                    vpack_cpuset_set(&d->bound, (unsigned)c);
            }
            if (vpack_cpuset_empty(&d->bound))
                vpack_cpuset_set(&d->bound, (unsigned)vpack_cpuset_first(&t->cpus));
            d->has_bound = true;
        }
        double per = share * cores / w->nd / (d->nv * 0.6 + 0.2);
        for (unsigned j = 0; j < d->nv + 1 + d->nio; j++) {
            d->cpu[j] = -1;
            if (rnd(&s) % 25 == 0) {
                vpack_cpuset_zero(&d->pin[j]);
                vpack_cpuset_set(&d->pin[j], (unsigned)vpack_cpuset_first(&d->bound));
                d->pinned[j] = true;
            }
            double u = j < d->nv ? per * (0.3 + 1.4 * rnd_unit(&s)) : 0.3 * per * rnd_unit(&s);
            if (hover && j == 0 && i < hovering(w))
                u = w->par.busy_vcpu * (0.9 + 0.2 * rnd_unit(&s));
            d->util[j] = u > 1 ? 1 : u;
        }
    }
}

static void world_fini(struct world *w)
{
    vpack_plan_free(w->plan);
    vpack_snapshot_free(w->snap);
    vpack_policy_state_free(w->st);
}

/* The mask thread j of domain i may run on now. */
static const vpack_cpuset *allowed(const struct world *w, unsigned i, unsigned j)
{
    const struct tdom *d = &w->d[i];
    if (w->plan) {
        const struct vpack_plan_domain *pd = &w->plan->domains[i];
        return j < d->nv ? pd->vcpus[j].cpus
                         : j == d->nv ? pd->emulator.cpus : pd->iothreads[j - d->nv - 1].cpus;
    }
    return d->pinned[j] ? &d->pin[j] : &d->bound;
}

/* The next snapshot: threads where the last plan lets them run. */
static struct vpack_snapshot *world_snapshot(struct world *w, double delay)
{
    unsigned ncpus = (unsigned)w->t->max_cpu + 1;
    struct vpack_snapshot *s = vpack_snapshot_new(ncpus, w->nd);
    assert_non_null(s);
    for (unsigned c = 0; c < ncpus; c++)
        s->cpu_busy[c] = vpack_cpuset_isset(&w->t->cpus, c) ? 0 : -1;
    for (unsigned i = 0; i < w->nd; i++) {
        struct tdom *d = &w->d[i];
        struct vpack_domain_sample *ds = &s->domains[i];
        assert_int_equal(vpack_domain_sample_init(ds, d->name, d->level, d->nv, d->nio), 0);
        if (d->has_bound) {
            ds->cpuset = malloc(sizeof(*ds->cpuset));
            assert_non_null(ds->cpuset);
            *ds->cpuset = d->bound;
        }
        if (d->memnode >= 0) {
            ds->memory = calloc(1, sizeof(*ds->memory));
            assert_non_null(ds->memory);
            ds->nmemory = 1;
            ds->memory[0].node = d->memnode;
            ds->memory[0].share = 1.0;
        }
        for (unsigned j = 0; j < d->nv + 1 + d->nio; j++) {
            struct vpack_thread_sample *t =
                j < d->nv ? &ds->vcpus[j] : j == d->nv ? &ds->emulator : &ds->iothreads[j - d->nv - 1];
            const vpack_cpuset *m = allowed(w, i, j);
            if (d->cpu[j] < 0 || !vpack_cpuset_isset(m, (unsigned)d->cpu[j])) {
                d->cpu[j] = -1;
                VPACK_CPUSET_FOREACH(c, m) {
                    if ((unsigned)c < ncpus && s->cpu_busy[c] >= 0 &&
                        (d->cpu[j] < 0 || s->cpu_busy[c] < s->cpu_busy[d->cpu[j]] - TOL))
                        d->cpu[j] = c;
                }
            }
            t->util = d->util[j];
            t->cpu = d->cpu[j];
            t->delay = j < d->nv && !d->pinned[j] ? delay : 0;
            if (d->pinned[j]) {
                t->pin = malloc(sizeof(*t->pin));
                assert_non_null(t->pin);
                *t->pin = d->pin[j];
            }
            if (d->cpu[j] >= 0)
                s->cpu_busy[d->cpu[j]] += d->util[j];
        }
    }
    for (unsigned c = 0; c < ncpus; c++)
        if (s->cpu_busy[c] > 1)
            s->cpu_busy[c] = 1;
    return s;
}

#define FAIL(w, ...)                                                                     \
    do {                                                                                 \
        char msg_[512];                                                                  \
        snprintf(msg_, sizeof(msg_), __VA_ARGS__);                                       \
        fail_msg("%s seed %u t=%.0f ms: %s\nplan: %s", (w)->label, (w)->seed, (w)->now_ms, \
                 msg_, plan_text((w)->plan));                                            \
    } while (0)

static const struct vpack_plan_thread *plan_thread(const struct vpack_plan_domain *pd,
                                                   unsigned nv, unsigned j)
{
    return j < nv ? &pd->vcpus[j] : j == nv ? &pd->emulator : &pd->iothreads[j - nv - 1];
}

static bool all_active(const struct world *w)
{
    return w->plan->nactive == w->t->npackages;
}

/* Busy of a package in the snapshot. */
static double pkg_busy(const struct world *w, const struct vpack_package *pkg)
{
    double b = 0;
    VPACK_CPUSET_FOREACH(c, &pkg->cpus) {
        if ((unsigned)c < w->snap->ncpus && w->snap->cpu_busy[c] > 0)
            b += w->snap->cpu_busy[c];
    }
    return b;
}

static bool is_active(const struct vpack_plan *p, int id)
{
    for (unsigned i = 0; i < p->nactive; i++)
        if (p->active_packages[i] == id)
            return true;
    return false;
}

/* Pins, bounds, level 0, emulator and iothreads with the domain. */
static void check_masks(const struct world *w)
{
    const struct vpack_plan *p = w->plan;
    for (unsigned i = 0; i < w->nd; i++) {
        const struct tdom *d = &w->d[i];
        const struct vpack_plan_domain *pd = &p->domains[i];
        vpack_cpuset vunion;
        bool any_free_vcpu = false, managed = d->level >= 1 && !p->lifted;
        vpack_cpuset_zero(&vunion);
        for (unsigned j = 0; j < d->nv + 1 + d->nio; j++) {
            const vpack_cpuset *m = plan_thread(pd, d->nv, j)->cpus;
            if (d->pinned[j]) {
                if (!vpack_cpuset_equal(m, &d->pin[j]))
                    FAIL(w, "%s thread %u: guest pin changed", d->name, j);
                continue;
            }
            if (!vpack_cpuset_subset(m, &d->bound) || vpack_cpuset_empty(m))
                FAIL(w, "%s thread %u: mask outside its bound", d->name, j);
            if (d->level == 0 && !vpack_cpuset_equal(m, &d->bound))
                FAIL(w, "%s thread %u: level 0 restricted", d->name, j);
            if (j < d->nv) {
                vpack_cpuset_or(&vunion, &vunion, m);
                any_free_vcpu = true;
            }
        }
        if (!managed || !any_free_vcpu)
            continue;
        for (unsigned j = d->nv; j < d->nv + 1 + d->nio; j++) {
            const vpack_cpuset *m = plan_thread(pd, d->nv, j)->cpus;
            if (!d->pinned[j] && !vpack_cpuset_subset(m, &vunion))
                FAIL(w, "%s: emulator/iothread %u away from its vCPUs", d->name, j);
            if (!d->pinned[j] && !d->pinned[d->nv] && !vpack_cpuset_equal(m, pd->emulator.cpus))
                FAIL(w, "%s: iothread %u not with the emulator", d->name, j);
        }
    }
}

/* No package gets more than spread watermark x cores of threads vpack confined to it. */
static void check_capacity(const struct world *w)
{
    const struct vpack_plan *p = w->plan;
    if (p->lifted || all_active(w))
        return;
    for (unsigned k = 0; k < w->t->npackages; k++) {
        const struct vpack_package *pkg = &w->t->packages[k];
        double sum = 0;
        for (unsigned i = 0; i < w->nd; i++) {
            const struct tdom *d = &w->d[i];
            for (unsigned j = 0; j < d->nv + 1 + d->nio; j++) {
                const struct vpack_plan_thread *pt = plan_thread(&p->domains[i], d->nv, j);
                if (pt->restricted && vpack_cpuset_subset(pt->cpus, &pkg->cpus))
                    sum += d->util[j];
            }
        }
        if (sum > w->par.spread_watermark * pkg->ncores + TOL)
            FAIL(w, "package %d: %.2f CPUs confined to %u cores", pkg->id, sum, pkg->ncores);
    }
}

/* A managed domain that fits a package left parked is not split. */
static void check_not_split(const struct world *w, const vpack_cpuset *prev_emu, unsigned i)
{
    const struct vpack_plan *p = w->plan;
    const struct tdom *d = &w->d[i];
    const struct vpack_plan_domain *pd = &p->domains[i];
    double load = 0;

    if (d->level < 1 || p->lifted || all_active(w) || d->pinned[d->nv])
        return;
    /* Held where it was within the minimum residency: not a new split. */
    if (prev_emu && vpack_cpuset_equal(prev_emu, pd->emulator.cpus) &&
        w->now_ms - d->last_change_ms < w->par.min_residency_ms)
        return;
    for (unsigned j = 0; j < d->nv + 1 + d->nio; j++)
        load += d->pinned[j] ? 0 : d->util[j];
    bool fits = false;
    for (unsigned k = 0; k < w->t->npackages && !fits; k++) {
        const struct vpack_package *pkg = &w->t->packages[k];
        fits = !is_active(p, pkg->id) && vpack_cpuset_intersects(&pkg->cpus, &d->bound) &&
               load <= w->par.spread_watermark * pkg->ncores - pkg_busy(w, pkg) - TOL;
    }
    if (!fits)
        return;
    unsigned n = 0;
    for (unsigned k = 0; k < w->t->npackages; k++)
        n += vpack_cpuset_intersects(&w->t->packages[k].cpus, pd->emulator.cpus);
    if (n > 1)
        FAIL(w, "%s (%.2f CPUs) split over %u packages though a parked one has room", d->name,
             load, n);
}

/* One step: snapshot, plan, checks. Returns the number of domains whose masks changed. */
static unsigned step(struct world *w, double delay, unsigned *changed_by)
{
    struct vpack_snapshot *s = world_snapshot(w, delay);
    struct vpack_plan *p = NULL;
    unsigned changed = 0;

    s->interval_ms = 1000;
    int rc = vpack_plan_compute(w->t, &w->par, s, w->st, &p);
    if (rc < 0)
        fail_msg("%s seed %u: vpack_plan_compute = %d", w->label, w->seed, rc);
    w->now_ms += s->interval_ms;
    struct vpack_plan *old = w->plan;
    vpack_snapshot_free(w->snap);
    w->snap = s;
    w->plan = p;
    check_masks(w);
    check_capacity(w);
    for (unsigned i = 0; i < w->nd; i++) {
        const struct tdom *d = &w->d[i];
        bool diff = false;
        for (unsigned j = 0; old && j < d->nv + 1 + d->nio && !diff; j++)
            diff = !vpack_cpuset_equal(plan_thread(&old->domains[i], d->nv, j)->cpus,
                                       plan_thread(&p->domains[i], d->nv, j)->cpus);
        check_not_split(w, old ? old->domains[i].emulator.cpus : NULL, i);
        if (diff) {
            w->d[i].last_change_ms = w->now_ms;
            changed++;
            if (changed_by)
                changed_by[i]++;
        }
    }
    vpack_plan_free(old);
    return changed;
}

/* Topologies: synthetic hosts and every fixture that loads. */
struct topo_list {
    char spec[64][800];
    unsigned n;
};

static void topo_list_fill(struct topo_list *l)
{
    static const char *const synth[] = {
        "synthetic:package:2 core:4 pu:1", "synthetic:package:4 core:4 pu:1",
        "synthetic:package:8 core:4 pu:2", "synthetic:package:3 core:6 pu:2",
        "synthetic:package:2 core:16 pu:2",
    };
    static const char *const dirs[][2] = {{"topologies/hwloc-xml", "xml"},
                                          {"topologies/sysfs", "sysfs"}};
    const char *base = getenv("VPACK_FIXTURES");

    l->n = 0;
    for (unsigned i = 0; i < sizeof(synth) / sizeof(synth[0]); i++)
        snprintf(l->spec[l->n++], sizeof(l->spec[0]), "%s", synth[i]);
    if (!base || !*base)
        fail_msg("VPACK_FIXTURES is not set (run through meson test)");
    for (unsigned k = 0; k < 2; k++) {
        char dir[512];
        snprintf(dir, sizeof(dir), "%s/%s", base, dirs[k][0]);
        DIR *dp = opendir(dir);
        if (!dp)
            fail_msg("%s: %s", dir, strerror(errno));
        struct dirent *e;
        while ((e = readdir(dp)) && l->n < 64) {
            if (e->d_name[0] == '.' || strstr(e->d_name, ".md"))
                continue;
            snprintf(l->spec[l->n++], sizeof(l->spec[0]), "%s:%s/%s", dirs[k][1], dir, e->d_name);
        }
        closedir(dp);
    }
    assert_true(l->n >= 12);
}

typedef void scenario_fn(struct vpack_topology *t, const char *label, unsigned seed);

static void each_topology(scenario_fn *fn, unsigned nseeds)
{
    struct topo_list l;
    topo_list_fill(&l);
    for (unsigned i = 0; i < l.n; i++) {
        struct vpack_topology *t = NULL;
        char *err = NULL;
        if (vpack_topology_load(l.spec[i], NULL, NULL, &t, &err) < 0)
            fail_msg("%s: %s", l.spec[i], err ? err : "?");
        for (unsigned seed = 1; seed <= nseeds; seed++)
            fn(t, l.spec[i], seed);
        vpack_topology_free(t);
    }
}

/* A constant input: every plan keeps the invariants; no mask changes once settled. */
static void constant_run(struct vpack_topology *t, const char *label, unsigned seed)
{
    const double shares[] = {0.1, 0.3, 0.5, 0.7, 0.95};
    struct world w;
    world_init(&w, t, label, seed, shares[seed % 5], false);
    unsigned settle = (w.par.pack_delay_ms + w.par.min_residency_ms) / 1000 + 10;
    for (unsigned k = 0; k < settle + 60; k++) {
        unsigned changed = step(&w, 0, NULL);
        if (k >= settle && changed)
            FAIL(&w, "%u domains changed masks under a constant input", changed);
    }
    world_fini(&w);
}

static void test_constant_input(void **unused)
{
    (void)unused;
    each_topology(constant_run, 10);
}

/* vCPUs hovering +-10% around busy_vcpu: at most one change per domain per residency. */
static void hover_run(struct vpack_topology *t, const char *label, unsigned seed)
{
    struct world w;
    uint64_t s = seed;
    unsigned changes[NDOMS][8] = {{0}};
    world_init(&w, t, label, seed, 0.3, true);
    const unsigned res = w.par.min_residency_ms / 1000;
    for (unsigned k = 0; k < 8 * res; k++) {
        unsigned by[NDOMS] = {0};
        for (unsigned i = 0; i < hovering(&w); i++)
            w.d[i].util[0] = w.par.busy_vcpu * (0.9 + 0.2 * rnd_unit(&s));
        step(&w, 0, by);
        for (unsigned i = 0; i < w.nd; i++)
            changes[i][k / res] += k > 0 ? by[i] : 0;
    }
    for (unsigned i = 0; i < w.nd; i++)
        for (unsigned r = 1; r < 8; r++)
            if (changes[i][r] > 1)
                FAIL(&w, "%s changed masks %u times in residency period %u", w.d[i].name,
                     changes[i][r], r);
    world_fini(&w);
}

static void test_hover_busy_vcpu(void **unused)
{
    (void)unused;
    each_topology(hover_run, 4);
}

/* Run-queue delay for 15 s, then none: back to the count before within pack delay + residency. */
static void delay_run(struct vpack_topology *t, const char *label, unsigned seed)
{
    struct world w;
    world_init(&w, t, label, seed, 0.25, false);
    const unsigned settle = (w.par.pack_delay_ms + w.par.min_residency_ms) / 1000 + 10;
    for (unsigned k = 0; k < settle; k++)
        step(&w, 0, NULL);
    unsigned before = w.plan->nactive;
    bool lifted_before = w.plan->lifted;
    for (unsigned k = 0; k < 15; k++)
        step(&w, 0.5, NULL);
    unsigned release = (w.par.pack_delay_ms + w.par.min_residency_ms) / 1000;
    for (unsigned k = 0; k < release; k++)
        step(&w, 0, NULL);
    if (w.plan->nactive > before || (w.plan->lifted && !lifted_before))
        FAIL(&w, "%u active packages %u s after the delay stopped, %u before it", w.plan->nactive,
             release, before);
    world_fini(&w);
}

static void test_delay_spread_released(void **unused)
{
    (void)unused;
    each_topology(delay_run, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_constant_input),
        cmocka_unit_test(test_hover_busy_vcpu),
        cmocka_unit_test(test_delay_spread_released),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
