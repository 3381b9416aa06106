// SPDX-License-Identifier: MIT
#include "vpack/measure.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* t(0.975, df) for df 1 to 30: NIST/SEMATECH e-Handbook, table 1.3.6.7.2. */
static const double t975[30] = {
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
};

double vpack_t975(unsigned df)
{
    if (df == 0)
        return INFINITY;
    if (df <= 30)
        return t975[df - 1];
    /* Abramowitz and Stegun 26.7.5, three terms, z = the normal's 97.5th percentile. */
    const double z = 1.959963984540054, z2 = z * z, v = df;
    double g1 = (z2 + 1) * z / 4;
    double g2 = ((5 * z2 + 16) * z2 + 3) * z / 96;
    double g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384;
    return z + g1 / v + g2 / (v * v) + g3 / (v * v * v);
}

int vpack_interval_of(const double *x, unsigned n, struct vpack_interval *out)
{
    double sum = 0, ss = 0;
    if (n == 0)
        return -EINVAL;
    for (unsigned i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            return -EINVAL;
        sum += x[i];
    }
    double mean = sum / n;
    for (unsigned i = 0; i < n; i++)
        ss += (x[i] - mean) * (x[i] - mean);
    out->mean = mean;
    out->n = n;
    out->half = n < 2 ? INFINITY : vpack_t975(n - 1) * sqrt(ss / (n - 1)) / sqrt(n);
    return 0;
}

bool vpack_interval_excludes_zero(const struct vpack_interval *i)
{
    return i->mean - i->half > 0 || i->mean + i->half < 0;
}

int vpack_ab_of(const double *a, const double *b, unsigned n, struct vpack_ab *out)
{
    double *d = n ? malloc(n * sizeof(*d)) : NULL;
    int r;
    if (n && !d)
        return -ENOMEM;
    for (unsigned i = 0; i < n; i++)
        d[i] = a[i] - b[i];
    if ((r = vpack_interval_of(a, n, &out->a)) == 0 && (r = vpack_interval_of(b, n, &out->b)) == 0)
        r = vpack_interval_of(d, n, &out->diff);
    free(d);
    return r;
}

void vpack_package_idle_bounds(const double *idle, unsigned n, double *lo, double *hi)
{
    double busy = 0, least = 1;
    *lo = *hi = 0;
    if (n == 0)
        return;
    for (unsigned i = 0; i < n; i++) {
        busy += 1 - idle[i];
        if (idle[i] < least)
            least = idle[i];
    }
    *hi = least;
    *lo = 1 - busy > 0 ? 1 - busy : 0;
}

/* The value of "KEY<tabs or spaces>: VALUE" when line (of n bytes) has key; else NULL. */
static const char *cpuinfo_value(const char *line, size_t n, const char *key, size_t *vlen)
{
    size_t k = strlen(key);
    if (n < k || memcmp(line, key, k))
        return NULL;
    while (k < n && (line[k] == ' ' || line[k] == '\t'))
        k++;
    if (k >= n || line[k] != ':')
        return NULL;
    for (k++; k < n && line[k] == ' '; k++)
        ;
    *vlen = n - k;
    return line + k;
}

/* A small decimal integer of len bytes, or -1. */
static int small_int(const char *s, size_t len)
{
    int v = 0;
    if (len == 0 || len > 6)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

int vpack_cpuinfo_model(const char *text, size_t len, struct vpack_cpu_model *out)
{
    const char *p = text, *end = text + len;
    unsigned processors = 0;
    memset(out, 0, sizeof(*out));
    out->family = out->model = -1;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p), vl;
        const char *v;
        /* The second processor's block: the first one's keys are all there are. */
        if (cpuinfo_value(p, n, "processor", &vl) && ++processors > 1)
            break;
        if ((v = cpuinfo_value(p, n, "vendor_id", &vl)))
            snprintf(out->vendor, sizeof(out->vendor), "%.*s", (int)vl, v);
        else if ((v = cpuinfo_value(p, n, "cpu family", &vl)))
            out->family = small_int(v, vl);
        else if ((v = cpuinfo_value(p, n, "model", &vl)))
            out->model = small_int(v, vl);
        p += n + 1;
    }
    return out->vendor[0] ? 0 : -EINVAL;
}

bool vpack_pc6_system_wide(const struct vpack_cpu_model *m)
{
    static const int xeon[] = {85, 106, 108, 143, 173, 174, 175, 207};
    if (strcmp(m->vendor, "GenuineIntel") || m->family != 6)
        return false;
    for (size_t i = 0; i < sizeof(xeon) / sizeof(xeon[0]); i++)
        if (m->model == xeon[i])
            return true;
    return false;
}

void vpack_verdict_decide(const struct vpack_verdict_in *in, struct vpack_verdict *out)
{
    memset(out, 0, sizeof(*out));
    out->kind = VPACK_VERDICT_NONE;
    if (!in->has_energy) {
        out->why = VPACK_WHY_NO_ENERGY;
    } else {
        out->watts = in->energy_w.diff.mean;
        out->half = in->energy_w.diff.half;
        if (vpack_interval_excludes_zero(&in->energy_w.diff))
            out->kind = out->watts > 0 ? VPACK_VERDICT_SAVED : VPACK_VERDICT_COST;
        else
            out->why = VPACK_WHY_OVERLAP;
    }
    if (out->kind == VPACK_VERDICT_NONE && in->pc6_system_wide)
        out->why |= VPACK_WHY_PC6_WIDE;
}

/* A growing text: vasprintf appended; false once out of memory (then s is NULL). */
struct text {
    char *s;
};

static void __attribute__((format(printf, 2, 3))) add(struct text *t, const char *fmt, ...)
{
    char *more = NULL, *joined = NULL;
    va_list ap;
    if (!t->s)
        return;
    va_start(ap, fmt);
    int r = vasprintf(&more, fmt, ap);
    va_end(ap);
    if (r < 0 || asprintf(&joined, "%s%s", t->s, more) < 0)
        joined = NULL;
    free(more);
    free(t->s);
    t->s = joined;
}

/* "package P +X ± Y points" for each package: configured minus level 0 idle share. */
static void idle_gains(struct text *t, const struct vpack_verdict_in *in)
{
    for (unsigned p = 0; p < in->npackages; p++) {
        const struct vpack_interval *d = &in->idle[p].diff;
        add(t, "%spackage %d %+.1f ± %.1f points", p ? ", " : "", in->package_ids[p],
            0 - 100 * d->mean, 100 * d->half); /* 0 - x: no "-0.0" for no change */
    }
}

char *vpack_verdict_text(const struct vpack_verdict_in *in, const struct vpack_verdict *v)
{
    struct text t = {strdup("")};
    unsigned pairs = in->energy_w.diff.n;
    if (v->kind != VPACK_VERDICT_NONE) {
        add(&t, "packing %s %.1f ± %.1f W here (95 %% interval over %u pairs of rounds)",
            v->kind == VPACK_VERDICT_SAVED ? "saved" : "cost", fabs(v->watts), v->half, pairs);
        return t.s;
    }
    add(&t, "no measurable saving");
    if (v->why & VPACK_WHY_NO_ENERGY) {
        add(&t, ": energy cannot be measured here (no RAPL package energy under "
                "/sys/class/powercap); the whole-package idle share, configured minus level 0: ");
        idle_gains(&t, in);
    } else if (v->why & VPACK_WHY_OVERLAP) {
        add(&t, ": the intervals overlap (level 0 %.1f ± %.1f W, configured %.1f ± %.1f W; "
                "saving %.1f ± %.1f W, which holds 0)",
            in->energy_w.a.mean, in->energy_w.a.half, in->energy_w.b.mean, in->energy_w.b.half,
            v->watts, v->half);
    }
    if (v->why & VPACK_WHY_PC6_WIDE) {
        add(&t, "; PC6 is system-wide on this platform");
        if (in->cpu)
            add(&t, " (%s family %d model %d)", in->cpu->vendor, in->cpu->family, in->cpu->model);
        add(&t, ": a parked package does not reach package C6 while another one is busy");
    }
    return t.s;
}
