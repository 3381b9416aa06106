// SPDX-License-Identifier: MIT
/* The oracles: see include/vpack/oracle.h for the definitions and the proofs. */
#include "vpack/oracle.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "vpack/model.h"

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

static const struct vpack_thread_sample *thread_at(const struct vpack_domain_sample *d, unsigned k)
{
    if (k < d->nvcpus)
        return &d->vcpus[k];
    return k == d->nvcpus ? &d->emulator : &d->iothreads[k - d->nvcpus - 1];
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

/* The packages each thread with demand may run on (distinct, supersets dropped) and the
 * demand, into *cons (owned), *ncons and *need. Returns 0 or -ENOMEM. */
static int constraints(const struct vpack_topology *t, const struct vpack_snapshot *snap,
                       uint64_t **cons, unsigned *ncons, double *need)
{
    unsigned n = t->npackages, cap = 0;

    *ncons = 0;
    *need = 0;
    for (unsigned i = 0; i < snap->ndomains; i++)
        cap += snap->domains[i].nvcpus + 1 + snap->domains[i].niothreads;
    *cons = malloc((cap ? cap : 1) * sizeof(**cons));
    if (!*cons)
        return -ENOMEM;
    for (unsigned i = 0; i < snap->ndomains; i++) {
        const struct vpack_domain_sample *d = &snap->domains[i];
        unsigned nt = d->nvcpus + 1 + d->niothreads;

        for (unsigned k = 0; k < nt; k++) {
            const struct vpack_thread_sample *th = thread_at(d, k);
            const vpack_cpuset *allowed = th->pin ? th->pin : d->cpuset;
            uint64_t bits;

            /* The host model counts a package with less work than this idle. */
            if (th->util <= VPACK_ORACLE_EPS)
                continue;
            *need += cut(th->util);
            if (!allowed || n > MAX_BITS)
                continue;
            bits = packages_of(t, allowed);
            /* A thread that can run on no usable CPU constrains nothing we can choose. */
            if (bits)
                add_constraint(*cons, ncons, bits);
        }
    }
    return 0;
}

/* The smallest k whose best set (see ok_set) passes test; all packages when none does. */
typedef bool (*set_test)(const struct vpack_topology *t, uint64_t set, const void *arg);

/* The fewest packages of a set that holds (capacity and bounds) and passes test (NULL: any). */
static int exact_min(const struct vpack_topology *t, const double *capacity, double need,
                     const uint64_t *cons, unsigned ncons, set_test test, const void *arg)
{
    unsigned n = t->npackages;

    for (unsigned k = 1; k < n; k++) {
        uint64_t limit = UINT64_C(1) << n;

        for (uint64_t s = (UINT64_C(1) << k) - 1; s < limit; s = next_combination(s))
            if (holds(t, capacity, s, need, cons, ncons) && (!test || test(t, s, arg)))
                return (int)k;
    }
    return (int)n;
}

int vpack_oracle_packages(const struct vpack_topology *t, const double *capacity,
                          const struct vpack_snapshot *snap, bool *exact)
{
    unsigned n = t->npackages, ncons = 0;
    uint64_t *cons = NULL;
    double need = 0;
    int ret;

    if (exact)
        *exact = true;
    if (n == 0)
        return 0;
    if (constraints(t, snap, &cons, &ncons, &need) < 0)
        return -ENOMEM;
    /* Nothing demanded: no package need hold anything. */
    if (need <= 0)
        ret = 0;
    else if (n > VPACK_ORACLE_EXACT_MAX) {
        if (exact)
            *exact = false;
        ret = lower_bound(t, capacity, need, cons, ncons);
    } else
        ret = exact_min(t, capacity, need, cons, ncons, NULL, NULL);
    free(cons);
    return ret;
}

/* What the delay test needs: the interval's vCPU demands and the bound. */
struct delay_arg {
    const double *vcpu;    /* each vCPU's demand (cut to 1) */
    unsigned nvcpus;
    double need, bound;
};

/* The usable CPUs of the packages of set. */
static unsigned set_cpus(const struct vpack_topology *t, uint64_t set)
{
    unsigned c = 0;

    for (unsigned p = 0; p < t->npackages && p < MAX_BITS; p++)
        if (set >> p & 1)
            c += vpack_cpuset_count(&t->packages[p].cpus);
    return c;
}

/* The model's p99 vCPU delay with the demand spread over c CPUs is at most the bound. */
static bool delay_ok(unsigned c, const struct delay_arg *a)
{
    unsigned ok = 0, want = a->nvcpus - a->nvcpus / 100;

    for (unsigned i = 0; i < a->nvcpus; i++) {
        double d = a->vcpu[i], rho = c ? (a->need - d) / c : 0;

        if (d <= 0 || d * vpack_model_wait_factor(rho < 0 ? 0 : rho, c) <= a->bound)
            ok++;
    }
    return ok >= want;
}

static bool delay_test(const struct vpack_topology *t, uint64_t set, const void *arg)
{
    return delay_ok(set_cpus(t, set), arg);
}

static int cmp_udesc(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Beyond VPACK_ORACLE_EXACT_MAX: the smallest k whose k largest packages (in CPUs) pass. */
static int delay_lower(const struct vpack_topology *t, const struct delay_arg *a)
{
    unsigned *cpus = malloc(t->npackages * sizeof(*cpus)), c = 0, k;

    if (!cpus)
        return -ENOMEM;
    for (unsigned p = 0; p < t->npackages; p++)
        cpus[p] = vpack_cpuset_count(&t->packages[p].cpus);
    qsort(cpus, t->npackages, sizeof(*cpus), cmp_udesc);
    for (k = 0; k < t->npackages; k++) {
        c += cpus[k];
        if (delay_ok(c, a))
            break;
    }
    free(cpus);
    return (int)(k < t->npackages ? k + 1 : t->npackages);
}

/* The vCPUs' demands of snap into a (a->vcpu owned). Returns 0 or -ENOMEM. */
static int vcpu_demands(const struct vpack_snapshot *snap, struct delay_arg *a)
{
    double *v;

    a->nvcpus = 0;
    for (unsigned i = 0; i < snap->ndomains; i++)
        a->nvcpus += snap->domains[i].nvcpus;
    a->vcpu = v = malloc((a->nvcpus ? a->nvcpus : 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    a->nvcpus = 0;
    for (unsigned i = 0; i < snap->ndomains; i++)
        for (unsigned k = 0; k < snap->domains[i].nvcpus; k++) {
            double u = snap->domains[i].vcpus[k].util;
            v[a->nvcpus++] = u <= VPACK_ORACLE_EPS ? 0 : cut(u);
        }
    return 0;
}

int vpack_oracle_delay_packages(const struct vpack_topology *t, const double *capacity,
                                const struct vpack_snapshot *snap, double bound, bool *exact)
{
    struct delay_arg a = {.bound = bound};
    unsigned n = t->npackages, ncons = 0;
    uint64_t *cons = NULL;
    int ret, k;

    if (exact)
        *exact = true;
    if (n == 0)
        return 0;
    if (constraints(t, snap, &cons, &ncons, &a.need) < 0 || vcpu_demands(snap, &a) < 0) {
        free(cons);
        return -ENOMEM;
    }
    if (a.need <= 0)
        ret = 0;
    else if (n > VPACK_ORACLE_EXACT_MAX) {
        if (exact)
            *exact = false;
        ret = lower_bound(t, capacity, a.need, cons, ncons);
        k = ret < 0 ? ret : delay_lower(t, &a);
        ret = ret < 0 || k < 0 ? -ENOMEM : ret > k ? ret : k;
    } else
        ret = exact_min(t, capacity, a.need, cons, ncons, delay_test, &a);
    free(cons);
    free((void *)a.vcpu);
    return ret;
}
