// SPDX-License-Identifier: MIT
/* Traces: the series line reader, the recorder's conversion, the PlanetLab builder (vpack/trace.h). */
#include "vpack/trace.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vpack/errmsg.h"

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* "line N: " before msg (which is freed); col 0 leaves the column out. */
static int line_error(int ret, char **errmsg, unsigned long lineno, size_t col, char *msg)
{
    if (col)
        vpack_errmsg_set(ret, errmsg, "line %lu, column %zu: %s", lineno, col,
                         msg ? msg : "out of memory");
    else
        vpack_errmsg_set(ret, errmsg, "line %lu: %s", lineno, msg ? msg : "out of memory");
    free(msg);
    return ret;
}

/* Names the first thread of d demanding more than one CPU, if any: true then. */
static bool over_one(const struct vpack_domain_sample *d, char *what, size_t len)
{
    for (unsigned k = 0; k < d->nvcpus; k++)
        if (d->vcpus[k].util > 1 + 1e-9) {
            snprintf(what, len, "vcpus[%u] (id %d) demands %g CPUs", k, d->vcpus[k].id,
                     d->vcpus[k].util);
            return true;
        }
    for (unsigned k = 0; k < d->niothreads; k++)
        if (d->iothreads[k].util > 1 + 1e-9) {
            snprintf(what, len, "iothreads[%u] (id %d) demands %g CPUs", k, d->iothreads[k].id,
                     d->iothreads[k].util);
            return true;
        }
    if (d->emulator.util > 1 + 1e-9) {
        snprintf(what, len, "the emulator demands %g CPUs", d->emulator.util);
        return true;
    }
    return false;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The first name two domains share, or NULL (also when out of memory: *nomem). */
static const char *duplicate_name(const struct vpack_snapshot *s, bool *nomem)
{
    const char **names;
    const char *dup = NULL;

    *nomem = false;
    if (s->ndomains < 2)
        return NULL;
    names = malloc(s->ndomains * sizeof(*names));
    if (!names) {
        *nomem = true;
        return NULL;
    }
    for (unsigned i = 0; i < s->ndomains; i++)
        names[i] = s->domains[i].name;
    qsort(names, s->ndomains, sizeof(*names), cmp_name);
    for (unsigned i = 1; i < s->ndomains && !dup; i++)
        if (!strcmp(names[i - 1], names[i]))
            dup = names[i];
    free(names);
    return dup;
}

int vpack_series_parse_line(const char *buf, size_t len, const char *item, const char *series,
                            struct vpack_snapshot **out, size_t *col, char **errmsg)
{
    struct vpack_snapshot *s = NULL;
    char *msg = NULL;
    size_t end, at, i = 0;
    int err;

    *out = NULL;
    *col = 0;
    if (errmsg)
        *errmsg = NULL;
    /* Without its line break, an unfinished line is reported at its end. */
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        len--;
    while (i < len && is_blank(buf[i]))
        i++;
    if (i == len)
        return -ENODATA;
    err = vpack_snapshot_parse_first(buf, len, &end, &at, &s, &msg);
    /* A whole value with more after it: the line is not one snapshot. */
    for (i = end; end > 0 && i < len && is_blank(buf[i]); i++)
        ;
    if (end > 0 && i < len) {
        vpack_snapshot_free(s);
        free(msg);
        *col = i + 1;
        return vpack_errmsg_set(-EINVAL, errmsg, "unexpected data after the %s (a %s has one %s "
                                "per line)", item, series, item);
    }
    if (err == -ENOMEM || (err < 0 && !msg)) {
        free(msg);
        return -ENOMEM;
    }
    if (err < 0) {
        *col = at == SIZE_MAX ? 0 : at + 1;
        if (err == -ENODATA) {
            vpack_errmsg_set(0, errmsg, "%s (a %s has one %s per line)", msg, series, item);
        } else if (errmsg) {
            *errmsg = msg;
            msg = NULL;
        }
        free(msg);
        return -EINVAL;
    }
    free(msg);
    *out = s;
    return 0;
}

int vpack_trace_parse_line(const char *buf, size_t len, unsigned long lineno,
                           struct vpack_snapshot **out, char **errmsg)
{
    struct vpack_snapshot *s = NULL;
    char *msg = NULL, what[160];
    const char *dup;
    size_t col;
    bool nomem;
    int err;

    *out = NULL;
    if (errmsg)
        *errmsg = NULL;
    err = vpack_series_parse_line(buf, len, "interval", "trace", &s, &col, &msg);
    if (err == -ENODATA)
        return err;
    if (err < 0)
        return line_error(err, errmsg, lineno, col, msg);
    for (unsigned d = 0; d < s->ndomains; d++)
        if (over_one(&s->domains[d], what, sizeof(what))) {
            err = vpack_errmsg_set(-EINVAL, errmsg,
                                   "line %lu: domain '%.64s': %s; a thread demands at most 1",
                                   lineno, s->domains[d].name, what);
            vpack_snapshot_free(s);
            return err;
        }
    dup = duplicate_name(s, &nomem);
    if (dup || nomem) {
        err = nomem ? -ENOMEM
                    : vpack_errmsg_set(-EINVAL, errmsg, "line %lu: two domains named '%.64s'",
                                       lineno, dup);
        vpack_snapshot_free(s);
        return err;
    }
    *out = s;
    return 0;
}

static void observed_thread(struct vpack_thread_sample *t)
{
    double d = t->util + t->delay;

    t->util = d > 1 ? 1 : d;
    t->delay = 0;
    t->cpu = -1;
}

void vpack_trace_from_observed(struct vpack_snapshot *s)
{
    for (unsigned i = 0; i < s->ndomains; i++) {
        struct vpack_domain_sample *d = &s->domains[i];

        for (unsigned k = 0; k < d->nvcpus; k++)
            observed_thread(&d->vcpus[k]);
        for (unsigned k = 0; k < d->niothreads; k++)
            observed_thread(&d->iothreads[k]);
        observed_thread(&d->emulator);
    }
}

int vpack_planetlab_parse(const char *buf, size_t len, double **out, char **errmsg)
{
    size_t pos = 0, cap = 0, n = 0;
    unsigned long line = 0;
    double *v = NULL;

    *out = NULL;
    if (errmsg)
        *errmsg = NULL;
    while (pos < len) {
        size_t eol = pos, a, b;
        char num[64], *endp;
        double x;

        while (eol < len && buf[eol] != '\n')
            eol++;
        line++;
        for (a = pos; a < eol && is_blank(buf[a]); a++)
            ;
        for (b = eol; b > a && is_blank(buf[b - 1]); b--)
            ;
        pos = eol + 1;
        if (a == b)
            continue;
        if (b - a >= sizeof(num) || memchr(buf + a, '\0', b - a)) {
            free(v);
            return vpack_errmsg_set(-EINVAL, errmsg, "line %lu: not a percentage", line);
        }
        memcpy(num, buf + a, b - a);
        num[b - a] = '\0';
        errno = 0;
        x = strtod(num, &endp);
        if (endp == num || *endp || errno || !isfinite(x) || x < 0 || x > 100) {
            free(v);
            return vpack_errmsg_set(-EINVAL, errmsg,
                                    "line %lu: '%s' is not a percentage (0 to 100)", line, num);
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 512;
            double *nv = realloc(v, nc * sizeof(*nv));
            if (!nv) {
                free(v);
                return -ENOMEM;
            }
            v = nv;
            cap = nc;
        }
        v[n++] = x;
    }
    if (n == 0) {
        free(v);
        return vpack_errmsg_set(-EINVAL, errmsg, "no reading in the file");
    }
    if (n > 1000000) {
        free(v);
        return vpack_errmsg_set(-EINVAL, errmsg, "more than 1000000 readings");
    }
    *out = v;
    return (int)n;
}

/* splitmix64: a small, well-mixed generator that is the same everywhere. */
static uint64_t mix(uint64_t x)
{
    x += UINT64_C(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

/* A number in [0, 1) from a 64-bit value. */
static double unit(uint64_t x)
{
    return (double)(x >> 11) * 0x1.0p-53;
}

void vpack_planetlab_pick(unsigned nfiles, unsigned n, uint64_t seed, unsigned *idx)
{
    /* Selection sampling (Knuth's algorithm S): ascending, each subset equally likely. */
    uint64_t state = seed;
    unsigned chosen = 0;

    for (unsigned i = 0; i < nfiles && chosen < n; i++) {
        state = mix(state);
        if (unit(state) * (nfiles - i) < n - chosen)
            idx[chosen++] = i;
    }
}

unsigned vpack_planetlab_vcpus(uint64_t seed, unsigned vm)
{
    double u = unit(mix(seed ^ mix(UINT64_C(0x76637075) + vm)));

    return u < 0.40 ? 1 : u < 0.75 ? 2 : 4;
}

unsigned long vpack_planetlab_intervals(const struct vpack_planetlab *pl)
{
    unsigned long most = 0;

    for (unsigned v = 0; v < pl->nvms; v++)
        if (pl->vms[v].nreadings > most)
            most = pl->vms[v].nreadings;
    if (pl->interval_ms == 0)
        return 0;
    return (unsigned long)((double)most * pl->reading_ms / pl->interval_ms);
}

/* VM v's demand in CPUs at interval k, before any burst. */
static double vm_demand(const struct vpack_planetlab *pl, const struct vpack_planetlab_vm *vm,
                        unsigned long k)
{
    double pos = (double)k * pl->interval_ms / pl->reading_ms;
    unsigned long i = (unsigned long)pos;
    double f = pos - (double)i, a, b;

    if (vm->nreadings == 0)
        return 0;
    if (i >= vm->nreadings - 1)
        return vm->pct[vm->nreadings - 1] / 100;
    a = vm->pct[i];
    b = vm->pct[i + 1];
    return (pl->interpolate ? a + (b - a) * f : a) / 100;
}

/* e_k of VM v: a standard normal draw from the seed, the VM and the interval (Box-Muller). */
static double burst_normal(const struct vpack_planetlab *pl, unsigned v, unsigned long k)
{
    uint64_t h = mix(pl->seed ^ mix(((uint64_t)v << 40) ^ k));
    double u1 = unit(h), u2 = unit(mix(h));

    return sqrt(-2 * log(1 - u1)) * cos(2 * M_PI * u2);
}

/* The AR(1) coefficient: exp(-interval / tau), 0 for tau 0 (independent intervals). */
static double burst_phi(const struct vpack_planetlab *pl)
{
    return pl->burst_tau > 0 ? exp(-(pl->interval_ms / 1000.0) / pl->burst_tau) : 0;
}

static const char *const split_names[VPACK_SPLITS] = {"even", "simplex", "hot"};

const char *vpack_vcpu_split_name(enum vpack_vcpu_split s)
{
    return (unsigned)s < VPACK_SPLITS ? split_names[s] : "?";
}

/* VM v's weight of vCPU c (of n) in interval k: the split's, summing to 1 over c. */
static double split_weight(const struct vpack_planetlab *pl, unsigned v, unsigned n, unsigned c,
                           unsigned long k)
{
    /* A new draw every reading: the split is a property of the VM's work of the moment. */
    uint64_t r = (uint64_t)((double)k * pl->interval_ms / pl->reading_ms);
    uint64_t h = mix(pl->seed ^ mix(UINT64_C(0x73706c6974) ^ ((uint64_t)v << 40) ^ r));
    double sum = 0, mine = 0;

    if (pl->split == VPACK_SPLIT_EVEN || n < 2)
        return 1.0 / n;
    if (pl->split == VPACK_SPLIT_HOT)
        return (unsigned)(unit(h) * n) == c ? 1 : 0;
    /* Normalised standard exponentials are uniform on the simplex. */
    for (unsigned i = 0; i < n; i++) {
        double e = -log(1 - unit(mix(h + i)));

        sum += e;
        if (i == c)
            mine = e;
    }
    return mine / sum;
}

/*
 * Shares W over VM v's n vCPUs (u[0..n)) by the split's weights, each at
 * most one CPU; an excess spread evenly over the vCPUs with room until none
 * is left or all are full. Returns what did not fit.
 */
static double fill_vcpus(const struct vpack_planetlab *pl, unsigned v, unsigned long k, double W,
                         unsigned n, double *u)
{
    double excess = 0;

    for (unsigned c = 0; c < n; c++)
        u[c] = W * split_weight(pl, v, n, c, k);
    /* Each round fills at least one more vCPU or places the whole excess. */
    for (unsigned round = 0; round <= n; round++) {
        unsigned room = 0;

        excess = 0;
        for (unsigned c = 0; c < n; c++) {
            if (u[c] > 1) {
                excess += u[c] - 1;
                u[c] = 1;
            }
            room += u[c] < 1;
        }
        if (excess <= 0 || room == 0)
            break;
        for (unsigned c = 0; c < n; c++)
            if (u[c] < 1)
                u[c] += excess / room;
    }
    return excess > 0 ? excess : 0;
}

/* Runs VM v's burst state to interval k (pl->next == k): z and the wanted work W. */
static void burst_step(const struct vpack_planetlab *pl, unsigned v, unsigned long k, double *u)
{
    struct vpack_planetlab_vm *vm = &pl->vms[v];
    double phi = burst_phi(pl), e = burst_normal(pl, v, k), carry = 0;

    if (k > 0)
        carry = fill_vcpus(pl, v, k - 1, vm->wanted, vm->nvcpus, u);
    vm->z = k > 0 ? phi * vm->z + sqrt(1 - phi * phi) * e : e;
    vm->wanted = vm_demand(pl, vm, k) * exp(pl->burst * vm->z - pl->burst * pl->burst / 2) +
                 carry;
}

/* Brings every VM's state to interval k, replaying from 0 when k is behind. */
static void burst_advance(struct vpack_planetlab *pl, unsigned long k, double *u)
{
    if (pl->next > k + 1)
        pl->next = 0;
    for (; pl->next <= k; pl->next++)
        for (unsigned v = 0; v < pl->nvms; v++)
            burst_step(pl, v, pl->next, u);
}

/* A scratch array as long as the largest VM's vCPUs (at least 1), or NULL. */
static double *vcpu_scratch(const struct vpack_planetlab *pl)
{
    unsigned most = 1;

    for (unsigned v = 0; v < pl->nvms; v++)
        if (pl->vms[v].nvcpus > most)
            most = pl->vms[v].nvcpus;
    return malloc(most * sizeof(double));
}

int vpack_planetlab_snapshot(struct vpack_planetlab *pl, unsigned long k,
                             struct vpack_snapshot **out)
{
    double *u = vcpu_scratch(pl);
    struct vpack_snapshot *s = u ? vpack_snapshot_new(0, pl->nvms) : NULL;

    *out = NULL;
    if (!s) {
        free(u);
        return -ENOMEM;
    }
    if (pl->burst > 0)
        burst_advance(pl, k, u);
    s->interval_ms = pl->interval_ms;
    for (unsigned v = 0; v < pl->nvms; v++) {
        const struct vpack_planetlab_vm *vm = &pl->vms[v];
        struct vpack_domain_sample *d = &s->domains[v];
        int err = vpack_domain_sample_init(d, vm->name, pl->level, vm->nvcpus, 0);

        if (err < 0) {
            vpack_snapshot_free(s);
            free(u);
            return err;
        }
        fill_vcpus(pl, v, k, pl->burst > 0 ? vm->wanted : vm_demand(pl, vm, k), vm->nvcpus, u);
        for (unsigned c = 0; c < vm->nvcpus; c++)
            d->vcpus[c].util = u[c];
        if (pl->nmem_nodes) {
            d->memory = malloc(sizeof(*d->memory));
            if (!d->memory) {
                vpack_snapshot_free(s);
                free(u);
                return -ENOMEM;
            }
            d->memory[0] = (struct vpack_mem_share){.node = pl->mem_nodes[v % pl->nmem_nodes],
                                                    .share = 1};
            d->nmemory = 1;
        }
    }
    free(u);
    *out = s;
    return 0;
}

void vpack_planetlab_clear(struct vpack_planetlab *pl)
{
    for (unsigned v = 0; v < pl->nvms; v++) {
        free(pl->vms[v].name);
        free(pl->vms[v].pct);
    }
    free(pl->vms);
    pl->vms = NULL;
    pl->nvms = 0;
    pl->next = 0;
}
