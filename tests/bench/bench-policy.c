// SPDX-License-Identifier: MIT
/*
 * Planning time as the host grows: vpack_plan_compute() on synthetic hosts of
 * 2 CPUs / 4 vCPUs, 64 CPUs / 500 vCPUs and 1,024 CPUs / 8,000 vCPUs, with a
 * seeded mix of levels, guest pins, cpusets and loads.
 *
 * Two measurements per host, each after a warm-up:
 *   cold    one snapshot planned with a fresh state (the agent's first plan);
 *   series  a replayed series of snapshots (load rising and falling) with the
 *           state carried from one to the next, as the agent runs.
 * Snapshots are generated outside the timed region, from a seed per snapshot,
 * so every replay sees the same series.
 * Prints median and p95 per snapshot, time per vCPU and the growth between
 * sizes. A benchmark, not a test: it has no threshold and exits 0 unless the
 * policy fails to plan.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vpack/cpuset.h"
#include "vpack/policy.h"
#include "vpack/snapshot.h"
#include "vpack/topology.h"

/* 120 s at 1 s: low 20 s, up to high, high 20 s, down, low for 65 s (packs again). */
#define SERIES_LEN 120
#define BUDGET_NS 1500000000.0 /* per measurement and host, roughly */

struct host {
    const char *label;
    const char *spec;
    unsigned nvcpus;
};

static const struct host hosts[] = {
    {"2 CPUs", "synthetic:package:1 core:2 pu:1", 4},
    {"64 CPUs", "synthetic:package:2 core:16 pu:2", 500},
    {"1024 CPUs", "synthetic:package:8 core:64 pu:2", 8000},
};
#define NHOSTS (sizeof(hosts) / sizeof(hosts[0]))

struct rng {
    uint64_t s;
};

static uint64_t rng_next(struct rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ULL;
}

static double rng_unit(struct rng *r)
{
    return (double)(rng_next(r) >> 11) / 9007199254740992.0;
}

static unsigned rng_below(struct rng *r, unsigned n)
{
    return n ? (unsigned)(rng_next(r) % n) : 0;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* What stays the same for one domain across the series. */
struct dom_shape {
    char name[24];
    int level;
    unsigned nvcpus, niothreads;
    int bound_pkg;        /* -1: no cpuset; else the package its cpuset names */
    bool pinned;          /* every vCPU pinned 1:1 (<vcpupin>) */
    bool emupin;          /* <emulatorpin> */
    int pin_base;         /* index of the first usable CPU its pins name */
    double busy;          /* how hard it works: 0 idle .. 1 flat out */
    int memnode;
};

struct workload {
    unsigned ndomains;
    struct dom_shape *dom;
    unsigned nvcpus;
    double scale;         /* makes load factor 1.0 about 35% of the physical cores */
    uint64_t seed;
};

static int workload_make(struct workload *w, const struct vpack_topology *t, unsigned nvcpus,
                         struct rng *r)
{
    static const unsigned sizes[] = {1, 2, 2, 2, 4, 4, 4, 8, 8, 16};
    unsigned ncpu = vpack_cpuset_count(&t->cpus);
    /*
     * Guest pins name CPUs of the first two packages, as an administrator
     * pinning to a node would (pins spread over every package would keep every
     * package awake, and the series would never pack).
     */
    unsigned npin = 0;
    for (unsigned i = 0; i < t->npackages && i < 2; i++)
        npin += vpack_cpuset_count(&t->packages[i].cpus);
    w->dom = calloc(nvcpus, sizeof(*w->dom));
    if (!w->dom)
        return -ENOMEM;
    w->ndomains = 0;
    w->nvcpus = 0;
    while (w->nvcpus < nvcpus) {
        struct dom_shape *d = &w->dom[w->ndomains];
        unsigned n = sizes[rng_below(r, sizeof(sizes) / sizeof(sizes[0]))];
        if (n > nvcpus - w->nvcpus)
            n = nvcpus - w->nvcpus;
        if (n > ncpu)
            n = ncpu;
        snprintf(d->name, sizeof(d->name), "vm%05u", w->ndomains);
        unsigned lv = rng_below(r, 20);
        d->level = lv < 5 ? 0 : lv < 10 ? 1 : lv < 17 ? 2 : -1;
        d->nvcpus = n;
        d->niothreads = rng_below(r, 4) == 0 ? 1 + rng_below(r, 2) : 0;
        /* Like the pins, cpusets name one of the first two packages. */
        d->bound_pkg = rng_below(r, 10) == 0 ? (int)rng_below(r, t->npackages < 2 ? 1 : 2) : -1;
        d->pinned = rng_below(r, 20) == 0;
        d->emupin = rng_below(r, 20) == 0;
        d->pin_base = (int)rng_below(r, npin);
        double u = rng_unit(r);
        d->busy = u < 0.6 ? 0.05 * u : u < 0.9 ? 0.5 * u : u;
        d->memnode = (int)rng_below(r, t->npackages);
        w->nvcpus += n;
        w->ndomains++;
    }
    /* A vCPU's expected util is busy * 0.775 (see series_snap()). */
    double expect = 0, cores = 0;
    for (unsigned k = 0; k < w->ndomains; k++)
        expect += 0.775 * w->dom[k].busy * w->dom[k].nvcpus;
    for (unsigned i = 0; i < t->npackages; i++)
        cores += t->packages[i].ncores;
    w->scale = expect > 0 ? 0.35 * cores / expect : 1.0;
    w->seed = rng_next(r);
    return 0;
}

/* Load factor at second i of the series. */
static double load_factor(unsigned i)
{
    if (i < 20)
        return 0.3;
    if (i < 30)
        return 0.3 + 1.4 * (i - 20) / 10.0;
    if (i < 50)
        return 1.7;
    if (i < 55)
        return 1.7 - 1.4 * (i - 50) / 5.0;
    return 0.3;
}

/* The CPU id of the k-th usable CPU (wrapping), for pins. */
static int nth_cpu(const struct vpack_topology *t, int k)
{
    unsigned n = vpack_cpuset_count(&t->cpus);
    unsigned want = (unsigned)k % n;
    VPACK_CPUSET_FOREACH(cpu, &t->cpus) {
        if (want-- == 0)
            return cpu;
    }
    return vpack_cpuset_first(&t->cpus);
}

static vpack_cpuset *set_one(int cpu)
{
    vpack_cpuset *s = malloc(sizeof(*s));
    if (s) {
        vpack_cpuset_zero(s);
        vpack_cpuset_set(s, (unsigned)cpu);
    }
    return s;
}

/* Snapshot i of the series: load follows low -> high -> low with noise. */
static struct vpack_snapshot *series_snap(const struct vpack_topology *t,
                                          const struct workload *w, unsigned i)
{
    struct rng rs = {w->seed ^ (0x9e3779b97f4a7c15ULL * (i + 1))};
    struct rng *r = &rs;
    double factor = load_factor(i) * w->scale;
    struct vpack_snapshot *s = vpack_snapshot_new((unsigned)t->max_cpu + 1, w->ndomains);
    if (!s)
        return NULL;
    s->interval_ms = 1000;
    double total = 0;
    for (unsigned k = 0; k < w->ndomains; k++) {
        const struct dom_shape *ds = &w->dom[k];
        struct vpack_domain_sample *d = &s->domains[k];
        if (vpack_domain_sample_init(d, ds->name, ds->level, ds->nvcpus, ds->niothreads) < 0)
            goto fail;
        if (ds->bound_pkg >= 0) {
            d->cpuset = malloc(sizeof(*d->cpuset));
            if (!d->cpuset)
                goto fail;
            *d->cpuset = t->packages[ds->bound_pkg].cpus;
        }
        for (unsigned j = 0; j < ds->nvcpus; j++) {
            struct vpack_thread_sample *th = &d->vcpus[j];
            double u = ds->busy * factor * (0.5 + rng_unit(r));
            if (rng_below(r, 4) == 0)
                u *= 0.1; /* some vCPUs of a busy VM idle */
            th->util = u > 1.0 ? 1.0 : u;
            th->delay = th->util > 0.8 && load_factor(i) > 1.2 ? 0.05 * rng_unit(r) : 0.0;
            th->cpu = nth_cpu(t, ds->pin_base + (int)j);
            th->pin = NULL;
            if (ds->pinned && !(th->pin = set_one(th->cpu)))
                goto fail;
            total += th->util;
        }
        d->emulator.id = -1;
        d->emulator.util = 0.01 + 0.02 * rng_unit(r);
        d->emulator.cpu = -1;
        if (ds->emupin && !(d->emulator.pin = set_one(nth_cpu(t, ds->pin_base))))
            goto fail;
        for (unsigned j = 0; j < ds->niothreads; j++) {
            d->iothreads[j].util = 0.05 * load_factor(i) * rng_unit(r);
            d->iothreads[j].cpu = -1;
        }
        d->memory = calloc(2, sizeof(*d->memory));
        if (!d->memory)
            goto fail;
        d->nmemory = 2;
        d->memory[0].node = ds->memnode;
        d->memory[0].share = 0.85;
        d->memory[1].node = (ds->memnode + 1) % (int)t->npackages;
        d->memory[1].share = 0.15;
    }
    /* Host busy: the guests' load plus a little of the host's own, unevenly spread. */
    unsigned ncpu = vpack_cpuset_count(&t->cpus);
    VPACK_CPUSET_FOREACH(cpu, &t->cpus) {
        double b = (total / ncpu) * (0.5 + rng_unit(r)) + 0.01;
        s->cpu_busy[cpu] = b > 1.0 ? 1.0 : b;
    }
    return s;
fail:
    vpack_snapshot_free(s);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double percentile(double *v, size_t n, double q)
{
    qsort(v, n, sizeof(*v), cmp_double);
    size_t i = (size_t)ceil(q * (double)n) - 1;
    if (i >= n)
        i = n - 1;
    return v[i];
}

struct result {
    unsigned ncpus, ncores, nvcpus, ndomains;
    double cold_med, cold_p95, ser_med, ser_p95;
    size_t cold_n, ser_n;
    unsigned nactive_min, nactive_max, spreads, packs, moves, lifted;
};

/* Plans snap with a fresh state; returns ns, or < 0 on error. */
static double time_cold(const struct vpack_topology *t, const struct vpack_policy_params *par,
                        const struct vpack_snapshot *s)
{
    struct vpack_policy_state *st = vpack_policy_state_new();
    struct vpack_plan *p = NULL;
    if (!st)
        return -1;
    double t0 = now_ns();
    int rc = vpack_plan_compute(t, par, s, st, &p);
    double dt = now_ns() - t0;
    vpack_plan_free(p);
    vpack_policy_state_free(st);
    return rc == 0 ? dt : -1;
}

/* Replays the series with one state; per-snapshot times into out (may be NULL). */
static int replay(const struct vpack_topology *t, const struct vpack_policy_params *par,
                  const struct workload *w, double *out, struct result *res)
{
    struct vpack_policy_state *st = vpack_policy_state_new();
    unsigned prev_active = 0;
    if (!st)
        return -ENOMEM;
    for (unsigned i = 0; i < SERIES_LEN; i++) {
        struct vpack_plan *p = NULL;
        struct vpack_snapshot *s = series_snap(t, w, i);
        if (!s) {
            vpack_policy_state_free(st);
            return -ENOMEM;
        }
        double t0 = now_ns();
        int rc = vpack_plan_compute(t, par, s, st, &p);
        double dt = now_ns() - t0;
        vpack_snapshot_free(s);
        if (rc < 0) {
            vpack_policy_state_free(st);
            return rc;
        }
        if (out)
            out[i] = dt;
        if (res) {
            if (i == 0 || p->nactive < res->nactive_min)
                res->nactive_min = p->nactive;
            if (i == 0 || p->nactive > res->nactive_max)
                res->nactive_max = p->nactive;
            if (i > 0 && p->nactive > prev_active)
                res->spreads++;
            if (i > 0 && p->nactive < prev_active)
                res->packs++;
            res->lifted += p->lifted;
            for (unsigned k = 0; k < p->ndomains && i > 0; k++)
                res->moves += p->domains[k].moved;
        }
        prev_active = p->nactive;
        vpack_plan_free(p);
    }
    vpack_policy_state_free(st);
    return 0;
}

static int bench_host(const struct host *h, struct result *res)
{
    struct vpack_topology *t = NULL;
    char *err = NULL;
    struct vpack_snapshot *probe[3] = {0};
    struct workload w = {0};
    double *cold = NULL, *ser = NULL;
    int ret = 1;
    struct rng r = {0x9e3779b97f4a7c15ULL ^ h->nvcpus};

    if (vpack_topology_load(h->spec, NULL, NULL, &t, &err) < 0) {
        fprintf(stderr, "bench-policy: %s: %s\n", h->spec, err ? err : "cannot load");
        goto cleanup;
    }
    struct vpack_policy_params par;
    vpack_policy_params_default(&par);
    par.default_level = 1;
    if (workload_make(&w, t, h->nvcpus, &r) < 0)
        goto cleanup;
    /* The cold runs plan a low, a rising and a high snapshot in turn. */
    for (unsigned i = 0; i < 3; i++)
        if (!(probe[i] = series_snap(t, &w, 10 + 15 * i))) {
            fprintf(stderr, "bench-policy: out of memory building snapshots\n");
            goto cleanup;
        }

    memset(res, 0, sizeof(*res));
    res->ncpus = vpack_cpuset_count(&t->cpus);
    for (unsigned i = 0; i < t->npackages; i++)
        res->ncores += t->packages[i].ncores;
    res->nvcpus = w.nvcpus;
    res->ndomains = w.ndomains;

    /* Cold: warm up, estimate, then as many runs as the budget allows. */
    double est = 0;
    for (int i = 0; i < 3; i++) {
        double dt = time_cold(t, &par, probe[2]);
        if (dt < 0)
            goto plan_failed;
        est = dt;
    }
    size_t n = (size_t)(BUDGET_NS / (est + 1));
    n = n < 21 ? 21 : n > 5000 ? 5000 : n;
    cold = malloc(n * sizeof(*cold));
    if (!cold)
        goto cleanup;
    for (size_t i = 0; i < n; i++)
        if ((cold[i] = time_cold(t, &par, probe[i % 3])) < 0)
            goto plan_failed;
    res->cold_n = n;
    res->cold_med = percentile(cold, n, 0.5);
    res->cold_p95 = percentile(cold, n, 0.95);

    /* Series: one warm-up replay (also records what the series does), then timed replays. */
    if (replay(t, &par, &w, NULL, res) < 0)
        goto plan_failed;
    size_t reps = (size_t)(BUDGET_NS / (est * SERIES_LEN + 1));
    reps = reps < 3 ? 3 : reps > 100 ? 100 : reps;
    ser = malloc(reps * SERIES_LEN * sizeof(*ser));
    if (!ser)
        goto cleanup;
    for (size_t k = 0; k < reps; k++)
        if (replay(t, &par, &w, ser + k * SERIES_LEN, NULL) < 0)
            goto plan_failed;
    res->ser_n = reps * SERIES_LEN;
    res->ser_med = percentile(ser, res->ser_n, 0.5);
    res->ser_p95 = percentile(ser, res->ser_n, 0.95);
    ret = 0;
    goto cleanup;

plan_failed:
    fprintf(stderr, "bench-policy: %s: vpack_plan_compute failed\n", h->label);
cleanup:
    free(cold);
    free(ser);
    for (unsigned i = 0; i < 3; i++)
        vpack_snapshot_free(probe[i]);
    free(w.dom);
    vpack_topology_free(t);
    free(err);
    return ret;
}

static void print_time(double ns)
{
    if (ns < 1e6)
        printf(" %9.1f us", ns / 1e3);
    else
        printf(" %9.2f ms", ns / 1e6);
}

int main(void)
{
    struct result res[NHOSTS];

    printf("vpack policy planning time (CLOCK_MONOTONIC, per snapshot)\n");
    printf("cold: fresh state, one snapshot; series: %d snapshots replayed with the state "
           "carried\n\n", SERIES_LEN);
    printf("%-10s %5s %5s %6s %5s | %12s %12s %6s | %12s %12s %6s | %9s\n", "host", "cpus", "cores",
           "vcpus", "doms", "cold median", "cold p95", "runs", "series med", "series p95", "plans",
           "ns/vCPU");
    for (unsigned i = 0; i < NHOSTS; i++) {
        if (bench_host(&hosts[i], &res[i]) != 0)
            return 1;
        const struct result *x = &res[i];
        printf("%-10s %5u %5u %6u %5u |", hosts[i].label, x->ncpus, x->ncores, x->nvcpus,
               x->ndomains);
        print_time(x->cold_med);
        print_time(x->cold_p95);
        printf(" %6zu |", x->cold_n);
        print_time(x->ser_med);
        print_time(x->ser_p95);
        printf(" %6zu |", x->ser_n);
        printf(" %9.1f\n", x->ser_med / x->nvcpus);
        fflush(stdout);
    }

    printf("\nwhat the replayed series did (load about 10%% -> 60%% -> 10%% of the cores):\n");
    for (unsigned i = 0; i < NHOSTS; i++)
        printf("  %-10s active packages %u..%u, %u spreads, %u packs, %u lifted plans, %u domain "
               "moves\n", hosts[i].label, res[i].nactive_min, res[i].nactive_max, res[i].spreads,
               res[i].packs, res[i].lifted, res[i].moves);

    printf("\ngrowth (series median):\n");
    for (unsigned i = 1; i < NHOSTS; i++) {
        const struct result *a = &res[i - 1], *b = &res[i];
        double vr = (double)b->nvcpus / a->nvcpus;
        double tr = b->ser_med / a->ser_med;
        double per = (b->ser_med / b->nvcpus) / (a->ser_med / a->nvcpus);
        printf("  %-10s -> %-10s vCPUs x%-7.1f time x%-8.1f time/vCPU x%-6.2f exponent %.2f\n",
               hosts[i - 1].label, hosts[i].label, vr, tr, per, log(tr) / log(vr));
    }
    {
        const struct result *a = &res[0], *b = &res[NHOSTS - 1];
        double vr = (double)b->nvcpus / a->nvcpus, tr = b->ser_med / a->ser_med;
        printf("  %-10s -> %-10s vCPUs x%-7.1f time x%-8.1f time/vCPU x%-6.2f exponent %.2f\n",
               hosts[0].label, hosts[NHOSTS - 1].label, vr, tr,
               (b->ser_med / b->nvcpus) / (a->ser_med / a->nvcpus), log(tr) / log(vr));
    }
    printf("  (exponent: log(time ratio) / log(vCPU ratio); 1.0 is linear)\n");
    return 0;
}
