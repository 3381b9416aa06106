// SPDX-License-Identifier: MIT
/* The oracles: see include/vpack/oracle.h for the definitions and the proofs. */
#include "vpack/oracle.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* Package bitmaps: hosts with more packages get the capacity bound only. */
#define MAX_BITS 64

/* The packages (bitmap) that set s meets; all of them for s NULL. */
static uint64_t packages_of(const struct vpack_topology *t, const vpack_cpuset *s)
{
    uint64_t bits = 0;

    for (unsigned p = 0; p < t->npackages && p < MAX_BITS; p++)
        if (!s || vpack_cpuset_intersects(&t->packages[p].cpus, s))
            bits |= UINT64_C(1) << p;
    return bits;
}

static double cut(double u)
{
    return u > 1 ? 1 : u;
}

/* Adds bits to the list of distinct constraints (a new one replaces its supersets). */
static void add_constraint(uint64_t *list, unsigned *n, uint64_t bits)
{
    unsigned k = 0;

    for (unsigned i = 0; i < *n; i++)
        if ((list[i] & bits) == list[i])
            return; /* a subset is already required */
    for (unsigned i = 0; i < *n; i++)
        if ((list[i] & bits) != bits)
            list[k++] = list[i];
    list[k++] = bits;
    *n = k;
}

static bool holds(const struct vpack_topology *t, const double *capacity, uint64_t set,
                  double need, const uint64_t *cons, unsigned ncons)
{
    double cap = 0;

    for (unsigned p = 0; p < t->npackages; p++)
        if (set >> p & 1)
            cap += capacity[p];
    if (cap < need - 1e-9)
        return false;
    for (unsigned i = 0; i < ncons; i++)
        if (!(cons[i] & set))
            return false;
    return true;
}

/* The next bitmap with the same number of bits (Gosper's hack). */
static uint64_t next_combination(uint64_t x)
{
    uint64_t c = x & -x, r = x + c;
    return (((r ^ x) >> 2) / c) | r;
}

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int popcount_cmp(const void *a, const void *b)
{
    int x = __builtin_popcountll(*(const uint64_t *)a), y = __builtin_popcountll(*(const uint64_t *)b);
    return x - y;
}

/* The two lower bounds of the header comment. */
static int lower_bound(const struct vpack_topology *t, const double *capacity, double need,
                       uint64_t *cons, unsigned ncons)
{
    double *sorted = malloc(t->npackages * sizeof(*sorted));
    unsigned k = 0, disjoint = 0;
    double cap = 0;
    uint64_t taken = 0;

    if (!sorted)
        return -ENOMEM;
    for (unsigned p = 0; p < t->npackages; p++)
        sorted[p] = capacity[p];
    qsort(sorted, t->npackages, sizeof(*sorted), cmp_desc);
    while (k < t->npackages && cap < need - 1e-9)
        cap += sorted[k++];
    free(sorted);
    qsort(cons, ncons, sizeof(*cons), popcount_cmp);
    for (unsigned i = 0; i < ncons; i++) {
        if (cons[i] & taken)
            continue;
        taken |= cons[i];
        disjoint++;
    }
    k = k > disjoint ? k : disjoint;
    return (int)(k ? k : 1);
}

void vpack_oracle_capacity_real(const struct vpack_topology *t, double smt_gain, double *cap)
{
    for (unsigned p = 0; p < t->npackages; p++) {
        const struct vpack_package *pk = &t->packages[p];
        unsigned cpus = vpack_cpuset_count(&pk->cpus), cores = pk->ncores ? pk->ncores : 1;

        /* The model's cores: CPU i of the package is on core i mod ncores (model.h, step 4). */
        cap[p] = cpus > cores ? cores + smt_gain * (cpus - cores) : cpus;
    }
}

void vpack_oracle_capacity_target(const struct vpack_topology *t, double pack_watermark,
                                  double *cap)
{
    for (unsigned p = 0; p < t->npackages; p++)
        cap[p] = t->packages[p].ncores * pack_watermark;
}

int vpack_oracle_packages(const struct vpack_topology *t, const double *capacity,
                          const struct vpack_snapshot *snap, bool *exact)
{
    unsigned n = t->npackages, ncons = 0, cap = 0;
    uint64_t *cons = NULL;
    double need = 0;
    int ret;

    if (exact)
        *exact = true;
    if (n == 0)
        return 0;
    for (unsigned i = 0; i < snap->ndomains; i++)
        cap += snap->domains[i].nvcpus + 1 + snap->domains[i].niothreads;
    cons = malloc((cap ? cap : 1) * sizeof(*cons));
    if (!cons)
        return -ENOMEM;
    for (unsigned i = 0; i < snap->ndomains; i++) {
        const struct vpack_domain_sample *d = &snap->domains[i];
        unsigned nt = d->nvcpus + 1 + d->niothreads;

        for (unsigned k = 0; k < nt; k++) {
            const struct vpack_thread_sample *th = k < d->nvcpus    ? &d->vcpus[k]
                                                   : k == d->nvcpus ? &d->emulator
                                                                    : &d->iothreads[k - d->nvcpus - 1];
            const vpack_cpuset *allowed = th->pin ? th->pin : d->cpuset;
            uint64_t bits;

            /* The host model counts a package with less work than this idle. */
            if (th->util <= VPACK_ORACLE_EPS)
                continue;
            need += cut(th->util);
            if (!allowed || n > MAX_BITS)
                continue;
            bits = packages_of(t, allowed);
            /* A thread that can run on no usable CPU constrains nothing we can choose. */
            if (bits)
                add_constraint(cons, &ncons, bits);
        }
    }
    /* Nothing demanded: no package need hold anything. */
    if (need <= 0) {
        free(cons);
        return 0;
    }
    if (n > VPACK_ORACLE_EXACT_MAX) {
        if (exact)
            *exact = false;
        ret = lower_bound(t, capacity, need, cons, ncons);
        free(cons);
        return ret;
    }
    ret = (int)n;
    for (unsigned k = 1; k < n && ret == (int)n; k++) {
        uint64_t limit = UINT64_C(1) << n;

        for (uint64_t s = (UINT64_C(1) << k) - 1; s < limit; s = next_combination(s))
            if (holds(t, capacity, s, need, cons, ncons)) {
                ret = (int)k;
                break;
            }
    }
    free(cons);
    return ret;
}
