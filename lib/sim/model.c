// SPDX-License-Identifier: MIT
/* The host model: see include/vpack/model.h for what it computes and why. */
#include "vpack/model.h"

#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vpack/config.h"
#include "vpack/errmsg.h"

/* The p99 delay comes from a histogram of this many bins over 0..1. */
#define HIST_BINS 10000

static const char *const scope_names[VPACK_PC6_SCOPES] = {"package", "system", "none"};

const char *vpack_pc6_scope_name(enum vpack_pc6_scope s)
{
    return (unsigned)s < VPACK_PC6_SCOPES ? scope_names[s] : "?";
}

/*
 * The built-in platform profiles: the values of data/power-model.ini, which
 * names the source of each (a unit test keeps the two alike). The watts are
 * the same assumed Xeon socket on every profile; what differs is where PC6
 * can be held and the deep state's latency and residency.
 */
#define COSTS                                                                                  \
    .busy_period_ms = 2.0, .refill_ms = 1.0, .remote_penalty = 0.1, .remote = VPACK_REMOTE_HOLDS, \
    .smt_corun = true
#define XEON_W .awake_w = 30.0, .core_w = 5.0, .deep_w = 8.0, .idle_w = 30.0, .smt_gain = 0.25
static const struct {
    const char *name;
    struct vpack_power_params p;
} platforms[] = {
    /* intel_idle skx_cstates C6; icx_cstates C6; spr_cstates C6 (also Emerald Rapids). */
    {"xeon-skx", {XEON_W, .pc6_scope = VPACK_PC6_SYSTEM, .exit_us = 133, .residency_us = 600, COSTS}},
    {"xeon-icx", {XEON_W, .pc6_scope = VPACK_PC6_SYSTEM, .exit_us = 170, .residency_us = 600, COSTS}},
    {"xeon-spr", {XEON_W, .pc6_scope = VPACK_PC6_SYSTEM, .exit_us = 290, .residency_us = 800, COSTS}},
    {"pc6-package", {XEON_W, .pc6_scope = VPACK_PC6_PACKAGE, .exit_us = 290, .residency_us = 800, COSTS}},
    {"amd-epyc", {XEON_W, .pc6_scope = VPACK_PC6_SYSTEM, .exit_us = 400, .residency_us = 800, COSTS}},
};
#define NPLATFORMS (sizeof(platforms) / sizeof(platforms[0]))

const char *vpack_power_platform_name(unsigned i)
{
    return i < NPLATFORMS ? platforms[i].name : NULL;
}

int vpack_power_platform(const char *name, struct vpack_power_params *p)
{
    for (unsigned i = 0; i < NPLATFORMS; i++)
        if (!strcmp(name, platforms[i].name)) {
            *p = platforms[i].p;
            return 0;
        }
    return -ENOENT;
}

void vpack_power_params_default(struct vpack_power_params *p)
{
    vpack_power_platform(VPACK_POWER_DEFAULT_PLATFORM, p);
}

/* A numeric key of the power file: where it goes and its range. */
struct power_key_def {
    const char *name;
    size_t off;
    double min, max;
};

#define PKEY(n, f, lo, hi) {n, offsetof(struct vpack_power_params, f), lo, hi}
static const struct power_key_def profile_keys[] = {
    PKEY("awake_w", awake_w, 0, 1e6),
    PKEY("core_w", core_w, 0, 1e6),
    PKEY("deep_w", deep_w, 0, 1e6),
    PKEY("idle_w", idle_w, 0, 1e6),
    PKEY("smt_gain", smt_gain, 0, 1),
    PKEY("exit_latency_us", exit_us, 0, 1e6),
    PKEY("target_residency_us", residency_us, 0, 1e6),
    PKEY("busy_period_ms", busy_period_ms, 0.001, 1e6),
    PKEY("refill_ms", refill_ms, 0, 1000),
    PKEY("remote_penalty", remote_penalty, 0, 10),
};
/* Keys 0..6 belong to a platform, 7.. to [costs]. */
#define NPLATFORM_KEYS 7
#define NPOWER_KEYS (sizeof(profile_keys) / sizeof(profile_keys[0]))
#define MAX_PROFILES 32

struct power_ctx {
    struct vpack_power_params p; /* the profile being read */
    const char *want;            /* its section, or NULL for [package] and [smt] */
    bool have_idle;
    char def[64];                /* default = NAME */
    char names[MAX_PROFILES][64];
    unsigned nnames;
    bool legacy;                 /* [package] or [smt] seen */
    char msg[256];
};

/* An enumerated value: its index in names[n], or -1 with c->msg. */
static int power_enum(struct power_ctx *c, const char *section, const char *key, const char *value,
                      const char *const *names, unsigned n, const char *expect)
{
    for (unsigned i = 0; i < n; i++)
        if (!strcmp(value, names[i]))
            return (int)i;
    snprintf(c->msg, sizeof(c->msg), "[%s] %s = '%s': expected %s", section, key, value, expect);
    return -1;
}

/* Sets key name of dst from value, keys first..last of profile_keys. Returns 1, or 0 with c->msg. */
static int power_set(struct power_ctx *c, struct vpack_power_params *dst, unsigned first,
                     unsigned last, const char *section, const char *name, const char *value)
{
    static const char *const remote_names[] = {"holds", "free"};
    char *end;
    double v;
    int e;

    if (first == 0 && !strcmp(name, "pc6_scope")) {
        e = power_enum(c, section, name, value, scope_names, VPACK_PC6_SCOPES,
                       "package, system or none");
        dst->pc6_scope = (enum vpack_pc6_scope)(e < 0 ? 0 : e);
        return e >= 0;
    }
    if (last == NPOWER_KEYS && !strcmp(name, "remote_memory")) {
        e = power_enum(c, section, name, value, remote_names, 2, "holds or free");
        dst->remote = (enum vpack_remote_memory)(e < 0 ? 0 : e);
        return e >= 0;
    }
    for (unsigned k = first; k < last; k++) {
        const struct power_key_def *d = &profile_keys[k];

        if (strcmp(name, d->name))
            continue;
        errno = 0;
        v = strtod(value, &end);
        if (end == value || *end || errno || !isfinite(v) || v < d->min || v > d->max) {
            snprintf(c->msg, sizeof(c->msg), "[%s] %s = '%s': expected a number from %g to %g",
                     section, name, value, d->min, d->max);
            return 0;
        }
        *(double *)((char *)dst + d->off) = v;
        if (dst == &c->p && !strcmp(name, "idle_w"))
            c->have_idle = true;
        return 1;
    }
    snprintf(c->msg, sizeof(c->msg), "unknown key '%s' in section [%s]", name, section);
    return 0;
}

/* A key before the first section: only default = NAME. */
static int power_global(struct power_ctx *c, const char *name, const char *value)
{
    if (strcmp(name, "default") || strlen(value) >= sizeof(c->def)) {
        snprintf(c->msg, sizeof(c->msg), "'%s' before the first section: expected default = NAME",
                 name);
        return 0;
    }
    snprintf(c->def, sizeof(c->def), "%s", value);
    return 1;
}

/* Notes section as a platform profile. Returns 1, or 0 with c->msg. */
static int power_profile(struct power_ctx *c, const char *section)
{
    for (unsigned i = 0; i < c->nnames; i++)
        if (!strcmp(c->names[i], section))
            return 1;
    if (c->nnames == MAX_PROFILES || strlen(section) >= sizeof(c->names[0])) {
        snprintf(c->msg, sizeof(c->msg), "[%s]: at most %d profiles of up to 63 characters",
                 section, MAX_PROFILES);
        return 0;
    }
    snprintf(c->names[c->nnames++], sizeof(c->names[0]), "%s", section);
    return 1;
}

static int power_key(void *user, const char *section, const char *name, const char *value)
{
    struct power_ctx *c = user;
    struct vpack_power_params scratch = c->p;
    bool mine;

    /* inih goes on after an error and reports the first one's line: keep its message. */
    if (c->msg[0])
        return 0;
    if (!*section)
        return power_global(c, name, value);
    if (!strcmp(section, "costs"))
        return power_set(c, &c->p, NPLATFORM_KEYS, NPOWER_KEYS, section, name, value);
    if (!strcmp(section, "smt")) {
        c->legacy = true;
        if (strcmp(name, "gain")) {
            snprintf(c->msg, sizeof(c->msg), "unknown key '%s' in section [smt]", name);
            return 0;
        }
        return power_set(c, c->want ? &scratch : &c->p, 4, 5, section, "smt_gain", value);
    }
    if (!strcmp(section, "package")) {
        c->legacy = true;
        if (!strcmp(name, "smt_gain")) {
            snprintf(c->msg, sizeof(c->msg), "[package] smt_gain: it is [smt] gain there");
            return 0;
        }
        return power_set(c, c->want ? &scratch : &c->p, 0, NPLATFORM_KEYS, section, name, value);
    }
    if (!power_profile(c, section))
        return 0;
    /* Every profile's keys are checked; only the wanted one's are kept. */
    mine = c->want && !strcmp(section, c->want);
    return power_set(c, mine ? &c->p : &scratch, 0, NPLATFORM_KEYS, section, name, value);
}

/* One pass over buf reading profile want (NULL: [package] and [smt]) into c->p. */
static int power_pass(struct power_ctx *c, const char *buf, const char *want, char **errmsg)
{
    int line;

    vpack_power_params_default(&c->p);
    c->want = want;
    c->have_idle = false;
    c->nnames = 0;
    c->legacy = false;
    c->msg[0] = '\0';
    line = ini_parse_string(buf, power_key, c);
    if (line != 0)
        return vpack_errmsg_set(-EINVAL, errmsg, "line %d: %s", line,
                                c->msg[0] ? c->msg : "not an INI line");
    if (!c->have_idle)
        c->p.idle_w = c->p.awake_w;
    if (c->p.deep_w > c->p.idle_w || c->p.idle_w > c->p.awake_w)
        return vpack_errmsg_set(-EINVAL, errmsg,
                                "%s%s%sexpected deep_w <= idle_w <= awake_w, got %g, %g and %g: an "
                                "idler state draws no more",
                                want ? "[" : "", want ? want : "", want ? "] " : "", c->p.deep_w,
                                c->p.idle_w, c->p.awake_w);
    return 0;
}

/* "a, b, c": the profiles c found. */
static void power_names(const struct power_ctx *c, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (unsigned i = 0; i < c->nnames && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", c->names[i]);
}

/* The profiles form: every profile checked, platform (or the default) into *out. */
static int power_profiles(struct power_ctx *c, const char *buf, const char *platform,
                          struct vpack_power_params *out, char **errmsg)
{
    char names[MAX_PROFILES * 66], want[64];
    unsigned n = c->nnames;
    bool found = false;
    int err;

    if (c->legacy)
        return vpack_errmsg_set(-EINVAL, errmsg,
                                "both [package]/[smt] and platform sections: use one form");
    if (!platform && !c->def[0])
        return vpack_errmsg_set(-EINVAL, errmsg, "no 'default = NAME' before the first section");
    snprintf(want, sizeof(want), "%s", platform ? platform : c->def);
    power_names(c, names, sizeof(names));
    for (unsigned i = 0; i < n; i++)
        found = found || !strcmp(c->names[i], want);
    if (!found)
        return vpack_errmsg_set(-EINVAL, errmsg, "no platform '%s' in the power model; it has %s",
                                want, names);
    for (unsigned i = 0; i < n; i++) {
        char name[64];

        snprintf(name, sizeof(name), "%s", c->names[i]);
        if ((err = power_pass(c, buf, name, errmsg)) < 0)
            return err;
        if (!strcmp(name, want))
            *out = c->p;
    }
    return 0;
}

int vpack_power_profile_parse(const char *text, size_t len, const char *platform,
                              struct vpack_power_params *out, char **errmsg)
{
    struct power_ctx *c;
    char *buf;
    int err;

    if (errmsg)
        *errmsg = NULL;
    buf = malloc(len + 1);
    c = calloc(1, sizeof(*c));
    if (!buf || !c) {
        free(buf);
        free(c);
        return -ENOMEM;
    }
    memcpy(buf, text, len);
    buf[len] = '\0';
    if (strlen(buf) != len)
        err = vpack_errmsg_set(-EINVAL, errmsg, "a NUL byte in the power model");
    else if ((err = power_pass(c, buf, NULL, errmsg)) < 0)
        ;
    else if (c->nnames)
        err = power_profiles(c, buf, platform, out, errmsg);
    else if (platform)
        err = vpack_errmsg_set(-EINVAL, errmsg,
                               "no platform '%s' in the power model: it has no profiles", platform);
    else
        *out = c->p;
    free(buf);
    free(c);
    return err;
}

int vpack_power_params_parse(const char *text, size_t len, struct vpack_power_params *out,
                             char **errmsg)
{
    return vpack_power_profile_parse(text, len, NULL, out, errmsg);
}

void vpack_model_host_default(struct vpack_model_host *h)
{
    h->pin_cpu_ms = VPACK_MODEL_PIN_CPU_MS;
    h->smoothing_rise = VPACK_DEFAULT_SMOOTHING_RISE;
    h->smoothing_fall = VPACK_DEFAULT_SMOOTHING_FALL;
}

/* A CPU mask over the topology's CPUs, interned: threads compare masks by index. */
struct mask {
    uint64_t *w;          /* nwords words */
    unsigned ncpus;
    int *cpus;            /* its usable CPUs, ascending */
};

/* What the model remembers of one thread between intervals. */
struct mthread {
    unsigned mask;        /* interned index of the mask applied */
    double util, delay;   /* the last interval alone: the agent's util_now, delay_now */
    double util_avg, delay_avg; /* smoothed as the agent smooths them: its util, delay */
};

struct mdom {
    struct vpack_model_domain pub;
    char *name;
    unsigned nvcpus, niothreads;
    struct mthread *thr;  /* vCPUs, the emulator, iothreads */
};

struct vpack_model {
    const struct vpack_topology *topo;
    struct vpack_policy_params params;
    struct vpack_power_params power;
    struct vpack_model_host host;
    int level;
    struct vpack_policy_state *state;
    struct vpack_plan *last_plan; /* until taken or the next step */

    unsigned nwords, ncpu;  /* words and CPU ids 0..max_cpu */
    int *cpu_core;          /* global core index per CPU, -1 when unusable */
    unsigned ncores;
    unsigned *core_pkg;     /* package index per core */

    struct mask *masks;
    unsigned nmasks, capmasks;

    struct mdom *doms;
    unsigned ndoms, capdoms;
    unsigned *map;          /* snapshot domain index -> doms index, last interval */
    unsigned nmap, capmap;

    /* The snapshot the policy sees: borrowed names, pins, cpusets, memory. */
    struct vpack_snapshot obs;
    unsigned capobs;
    struct vpack_thread_sample *obs_thr;
    unsigned capthr;
    bool first;
    double *foreign;        /* per CPU: load from outside the guests for the next step */

    /* Scratch, per interval. */
    double *load, *frac, *occ, *tmp;
    double *core_busy, *pkg_busy, *pkg_idle;
    bool keep_planned;             /* vpack_model_keep_planned() was called */
    struct vpack_snapshot *planned; /* the last plan's input as it measured it, or NULL */
    double *dom_demand, *dom_served;
    unsigned *thr_mask;     /* per thread of the interval: interned mask */
    double *thr_demand;
    double *mdemand, *mserved;
    unsigned *morder, *moff;
    double *mocc;           /* per mask: occupancy summed over its CPUs */
    double *fill;
    unsigned capfill;
    unsigned cap[9];        /* capacities of the scratch arrays above, in order */
    double *sat_core;       /* account_saturation()'s: per core, offered, CPUs with work, usable */

    /* The costs of step 8 (model.h). */
    double *speed;          /* per CPU: its speed beside its SMT siblings, this interval */
    double *pkg_lat;        /* per package: delay per unit of work from deep-state exits */
    bool *pkg_held;         /* per package: memory of a domain with demand on it */
    double *pkg_mem;        /* per package: the share of one domain's memory there (scratch) */
    double *mlat;           /* per mask: its work's delay per unit from deep-state exits */
    unsigned capmlat;
    unsigned *thr_prev;     /* per thread of the interval: its mask before the plan */
    unsigned capprev;

    struct vpack_model_totals tot;
    double *pkg_busy_s, *pkg_idle_s;
    unsigned long hist[HIST_BINS + 1];
    unsigned long nhist;
};

/* Grows *arr of *cap elements of size sz to hold n. Returns 0 or -ENOMEM. */
static int grow(void *arr, unsigned *cap, unsigned n, size_t sz)
{
    void **a = arr;
    unsigned c = *cap ? *cap : 8;
    void *p;

    if (n <= *cap)
        return 0;
    while (c < n)
        c *= 2;
    p = realloc(*a, (size_t)c * sz);
    if (!p)
        return -ENOMEM;
    memset((char *)p + (size_t)*cap * sz, 0, (size_t)(c - *cap) * sz);
    *a = p;
    *cap = c;
    return 0;
}

/* Interns words w (nwords, already limited to usable CPUs): its index, or -ENOMEM. */
static int intern(struct vpack_model *m, const uint64_t *w)
{
    struct mask *k;

    for (unsigned i = 0; i < m->nmasks; i++)
        if (!memcmp(m->masks[i].w, w, m->nwords * sizeof(uint64_t)))
            return (int)i;
    if (grow(&m->masks, &m->capmasks, m->nmasks + 1, sizeof(*m->masks)) < 0)
        return -ENOMEM;
    k = &m->masks[m->nmasks];
    k->w = malloc(m->nwords * sizeof(uint64_t));
    k->cpus = malloc(m->ncpu * sizeof(int));
    if (!k->w || !k->cpus) {
        free(k->w);
        free(k->cpus);
        k->w = NULL;
        k->cpus = NULL;
        return -ENOMEM;
    }
    memcpy(k->w, w, m->nwords * sizeof(uint64_t));
    k->ncpus = 0;
    for (unsigned c = 0; c < m->ncpu; c++)
        if (w[c / 64] >> (c % 64) & 1)
            k->cpus[k->ncpus++] = (int)c;
    return (int)m->nmasks++;
}

/* Interns s & the usable CPUs (s NULL: all usable CPUs). */
static int intern_set(struct vpack_model *m, const vpack_cpuset *s, const vpack_cpuset *and2)
{
    uint64_t w[VPACK_CPUSET_WORDS];

    for (unsigned i = 0; i < m->nwords; i++) {
        w[i] = m->topo->cpus.w[i];
        if (s)
            w[i] &= s->w[i];
        if (and2)
            w[i] &= and2->w[i];
    }
    return intern(m, w);
}

static void build_cores(struct vpack_model *m)
{
    const struct vpack_topology *t = m->topo;

    /* The topology's cores: SMT siblings as the hardware (or hwloc's synthetic spec) pairs them. */
    for (unsigned c = 0; c < m->ncpu; c++) {
        int core = vpack_topology_core_of(t, (int)c);
        m->cpu_core[c] = core;
        if (core >= 0)
            m->core_pkg[core] = (unsigned)vpack_topology_package_of(t, (int)c);
    }
}

int vpack_model_new(const struct vpack_topology *topo, const struct vpack_policy_params *params,
                    const struct vpack_power_params *power, int level, struct vpack_model **out,
                    char **errmsg)
{
    struct vpack_model *m;
    unsigned ncores = 0, np;

    if (errmsg)
        *errmsg = NULL;
    *out = NULL;
    if (level < -1 || level > 2)
        return vpack_errmsg_set(-EINVAL, errmsg, "level %d: expected -1, 0, 1 or 2", level);
    if (!topo || topo->npackages == 0 || topo->max_cpu < 0)
        return vpack_errmsg_set(-EINVAL, errmsg, "the topology has no usable CPU");
    if ((unsigned)power->pc6_scope >= VPACK_PC6_SCOPES)
        return vpack_errmsg_set(-EINVAL, errmsg, "pc6_scope %d: expected 0 to %d",
                                (int)power->pc6_scope, VPACK_PC6_SCOPES - 1);
    m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->topo = topo;
    m->params = *params;
    m->power = *power;
    vpack_model_host_default(&m->host);
    m->level = level;
    m->first = true;
    m->ncpu = (unsigned)topo->max_cpu + 1;
    m->nwords = (m->ncpu + 63) / 64;
    np = topo->npackages;
    for (int c = 0; c <= topo->max_cpu; c++) {
        int core = vpack_topology_core_of(topo, c);
        if (core >= 0 && (unsigned)core + 1 > ncores)
            ncores = (unsigned)core + 1;
    }
    m->ncores = ncores;
    m->state = vpack_policy_state_new();
    m->cpu_core = malloc(m->ncpu * sizeof(int));
    m->core_pkg = malloc(ncores * sizeof(unsigned));
    m->load = calloc(m->ncpu, sizeof(double));
    m->frac = calloc(m->ncpu, sizeof(double));
    m->occ = calloc(m->ncpu, sizeof(double));
    m->tmp = calloc(m->ncpu > ncores ? m->ncpu : ncores, sizeof(double));
    m->core_busy = calloc(ncores, sizeof(double));
    m->pkg_busy = calloc(np, sizeof(double));
    m->pkg_idle = calloc(np, sizeof(double));
    m->pkg_busy_s = calloc(np, sizeof(double));
    m->pkg_idle_s = calloc(np, sizeof(double));
    m->obs.cpu_busy = calloc(m->ncpu, sizeof(double));
    m->obs.cpu_busy_now = calloc(m->ncpu, sizeof(double));
    m->foreign = calloc(m->ncpu, sizeof(double));
    m->speed = calloc(m->ncpu, sizeof(double));
    m->pkg_lat = calloc(np, sizeof(double));
    m->pkg_held = calloc(np, sizeof(bool));
    m->pkg_mem = calloc(np, sizeof(double));
    if (!m->speed || !m->pkg_lat || !m->pkg_held || !m->pkg_mem) {
        vpack_model_free(m);
        return -ENOMEM;
    }
    if (!m->state || !m->cpu_core || !m->core_pkg || !m->load || !m->frac || !m->occ || !m->tmp ||
        !m->core_busy || !m->pkg_busy || !m->pkg_idle || !m->pkg_busy_s || !m->pkg_idle_s ||
        !m->obs.cpu_busy || !m->obs.cpu_busy_now || !m->foreign) {
        vpack_model_free(m);
        return -ENOMEM;
    }
    m->obs.ncpus = m->ncpu;
    build_cores(m);
    m->tot.npackages = np;
    m->tot.pkg_busy_s = m->pkg_busy_s;
    m->tot.pkg_idle_s = m->pkg_idle_s;
    *out = m;
    return 0;
}

void vpack_model_free(struct vpack_model *m)
{
    if (!m)
        return;
    vpack_policy_state_free(m->state);
    vpack_plan_free(m->last_plan);
    for (unsigned i = 0; i < m->nmasks; i++) {
        free(m->masks[i].w);
        free(m->masks[i].cpus);
    }
    free(m->masks);
    for (unsigned i = 0; i < m->ndoms; i++) {
        free(m->doms[i].name);
        free(m->doms[i].thr);
    }
    free(m->doms);
    free(m->map);
    free(m->obs.domains);
    free(m->obs.cpu_busy);
    free(m->obs.cpu_busy_now);
    free(m->foreign);
    free(m->obs_thr);
    free(m->cpu_core);
    free(m->core_pkg);
    free(m->load);
    free(m->frac);
    free(m->occ);
    free(m->tmp);
    free(m->core_busy);
    free(m->pkg_busy);
    vpack_snapshot_free(m->planned);
    free(m->pkg_idle);
    free(m->pkg_busy_s);
    free(m->pkg_idle_s);
    free(m->dom_demand);
    free(m->dom_served);
    free(m->thr_mask);
    free(m->thr_demand);
    free(m->mdemand);
    free(m->mserved);
    free(m->morder);
    free(m->moff);
    free(m->mocc);
    free(m->fill);
    free(m->sat_core);
    free(m->speed);
    free(m->pkg_lat);
    free(m->pkg_held);
    free(m->pkg_mem);
    free(m->mlat);
    free(m->thr_prev);
    free(m);
}

int vpack_model_set_host(struct vpack_model *m, const struct vpack_model_host *h, char **errmsg)
{
    if (errmsg)
        *errmsg = NULL;
    if (!isfinite(h->pin_cpu_ms) || h->pin_cpu_ms < 0 || h->pin_cpu_ms > 1000)
        return vpack_errmsg_set(-EINVAL, errmsg, "pin cost %g ms: expected 0 to 1000",
                                h->pin_cpu_ms);
    if (!(h->smoothing_rise > 0 && h->smoothing_rise <= 1) ||
        !(h->smoothing_fall > 0 && h->smoothing_fall <= 1))
        return vpack_errmsg_set(-EINVAL, errmsg,
                                "smoothing rise %g, fall %g: each must be over 0, at most 1",
                                h->smoothing_rise, h->smoothing_fall);
    m->host = *h;
    return 0;
}

int vpack_model_add_foreign(struct vpack_model *m, int cpu, double cpus)
{
    unsigned n = 0;

    if (!isfinite(cpus) || cpus < 0)
        return -EINVAL;
    if (cpu >= 0) {
        if ((unsigned)cpu >= m->ncpu || m->cpu_core[cpu] < 0)
            return -EINVAL;
        m->foreign[cpu] += cpus;
        return 0;
    }
    if (cpu != -1)
        return -EINVAL;
    for (unsigned c = 0; c < m->ncpu; c++)
        n += m->cpu_core[c] >= 0;
    for (unsigned c = 0; c < m->ncpu; c++)
        if (m->cpu_core[c] >= 0)
            m->foreign[c] += cpus / n;
    return 0;
}

/* The foreign load given for this step, in CPUs; the pin operations' charge added to it. */
static double charge_foreign(struct vpack_model *m, const struct vpack_model_interval *iv,
                             double dt, double *pin_cpu)
{
    double given = 0;

    for (unsigned c = 0; c < m->ncpu; c++)
        given += m->foreign[c];
    *pin_cpu = dt > 0 ? iv->pin_ops * m->host.pin_cpu_ms / 1000 / dt : 0;
    if (*pin_cpu > 0)
        vpack_model_add_foreign(m, -1, *pin_cpu);
    return given;
}

static unsigned nthreads_of(const struct vpack_domain_sample *d)
{
    return d->nvcpus + 1 + d->niothreads;
}

static const struct vpack_thread_sample *thread_of(const struct vpack_domain_sample *d, unsigned k)
{
    if (k < d->nvcpus)
        return &d->vcpus[k];
    if (k == d->nvcpus)
        return &d->emulator;
    return &d->iothreads[k - d->nvcpus - 1];
}

static double demand_of(const struct vpack_thread_sample *t)
{
    return t->util > 1 ? 1 : t->util;
}

/* The agent's moving average (agent/sample.c): rises followed fast, falls slowly. */
static void smooth(const struct vpack_model *m, double *avg, double sample)
{
    vpack_smooth(avg, sample, m->host.smoothing_rise, m->host.smoothing_fall);
}

/* (Re)starts what the model knows of d in slot md: every thread on its free mask. */
static int dom_reset(struct vpack_model *m, struct mdom *md, const struct vpack_domain_sample *d)
{
    unsigned n = nthreads_of(d);
    struct mthread *thr = realloc(md->thr, n * sizeof(*thr));

    if (!thr)
        return -ENOMEM;
    md->thr = thr;
    md->nvcpus = d->nvcpus;
    md->niothreads = d->niothreads;
    for (unsigned k = 0; k < n; k++) {
        const struct vpack_thread_sample *t = thread_of(d, k);
        int mi = intern_set(m, t->pin ? t->pin : d->cpuset, NULL);

        if (mi < 0)
            return mi;
        thr[k].mask = (unsigned)mi;
        thr[k].util = thr[k].util_avg = demand_of(t);
        thr[k].delay = thr[k].delay_avg = 0;
    }
    return 0;
}

/* The model's slot for snapshot domain i (d), matched by name; -ENOMEM. */
static int dom_slot(struct vpack_model *m, unsigned i, const struct vpack_domain_sample *d)
{
    unsigned s = m->ndoms;
    struct mdom *md;
    int err;

    if (i < m->nmap && m->map[i] < m->ndoms && !strcmp(m->doms[m->map[i]].name, d->name))
        s = m->map[i];
    for (unsigned k = 0; s == m->ndoms && k < m->ndoms; k++)
        if (!strcmp(m->doms[k].name, d->name))
            s = k;
    if (s == m->ndoms) {
        if (grow(&m->doms, &m->capdoms, m->ndoms + 1, sizeof(*m->doms)) < 0)
            return -ENOMEM;
        md = &m->doms[s];
        md->name = strdup(d->name);
        if (!md->name)
            return -ENOMEM;
        md->pub.name = md->name;
        m->ndoms++;
        if ((err = dom_reset(m, md, d)) < 0)
            return err;
    }
    md = &m->doms[s];
    if (md->nvcpus != d->nvcpus || md->niothreads != d->niothreads)
        if ((err = dom_reset(m, md, d)) < 0)
            return err;
    return (int)s;
}

/*
 * The first observation, before any interval ran: the demand spread evenly,
 * b of work on every usable CPU. Each CPU is busy as long as that work takes
 * beside its core's siblings doing the same (step 8's speed, by the same
 * fixed-point iteration as smt_stretch()), and each thread's run time
 * grows alike, so that the first plan reads what a real host's first
 * interval would show (issue 26, item 6: the planner measures work).
 */
static void first_obs(struct vpack_model *m, double b)
{
    const double slow = m->power.smt_corun ? (1 - m->power.smt_gain) / 2 : 0;
    double work = 0, busy = 0;

    b = b > 1 ? 1 : b;
    for (unsigned k = 0; k < m->ncores; k++)
        m->tmp[k] = 0;
    for (unsigned c = 0; c < m->ncpu; c++)
        if (m->cpu_core[c] >= 0)
            m->tmp[m->cpu_core[c]] += 1;
    for (unsigned c = 0; c < m->ncpu; c++) {
        double o = b, sib = m->cpu_core[c] < 0 ? 0 : m->tmp[m->cpu_core[c]] - 1;

        for (unsigned round = 0; round < 64 && slow > 0; round++) {
            double s = sib * o > 1 ? 1 : sib * o;
            double next = b / (1 - s * slow);
            next = next > 1 ? 1 : next;
            if (fabs(next - o) <= 1e-12)
                break;
            o = next;
        }
        m->obs.cpu_busy[c] = m->cpu_core[c] < 0 ? -1 : o;
        m->obs.cpu_busy_now[c] = m->obs.cpu_busy[c];
        if (m->cpu_core[c] >= 0) {
            work += b;
            busy += o;
        }
    }
    if (work <= 0 || busy <= work)
        return;
    for (unsigned i = 0; i < m->obs.ndomains; i++) {
        struct vpack_domain_sample *d = &m->obs.domains[i];
        for (unsigned k = 0; k < d->nvcpus + 1 + d->niothreads; k++) {
            struct vpack_thread_sample *t = k < d->nvcpus    ? &d->vcpus[k]
                                            : k == d->nvcpus ? &d->emulator
                                                             : &d->iothreads[k - d->nvcpus - 1];
            t->util *= busy / work;
            t->util_now *= busy / work;
        }
    }
}

/* Builds m->obs from snap and the last interval's observations. */
static int build_obs(struct vpack_model *m, const struct vpack_snapshot *snap)
{
    unsigned total = 0, off = 0;
    double demand = 0, usable = (double)vpack_cpuset_count(&m->topo->cpus);

    for (unsigned i = 0; i < snap->ndomains; i++)
        total += nthreads_of(&snap->domains[i]);
    /* At least one of each: no arithmetic on a NULL array. */
    if (grow(&m->obs.domains, &m->capobs, snap->ndomains + 1, sizeof(*m->obs.domains)) < 0 ||
        grow(&m->obs_thr, &m->capthr, total + 1, sizeof(*m->obs_thr)) < 0 ||
        grow(&m->map, &m->capmap, snap->ndomains + 1, sizeof(*m->map)) < 0)
        return -ENOMEM;
    m->obs.interval_ms = snap->interval_ms;
    m->obs.ndomains = snap->ndomains;
    for (unsigned i = 0; i < snap->ndomains; i++) {
        const struct vpack_domain_sample *d = &snap->domains[i];
        struct vpack_domain_sample *o = &m->obs.domains[i];
        int s = dom_slot(m, i, d);

        if (s < 0)
            return s;
        m->map[i] = (unsigned)s;
        *o = *d;
        if (m->level >= 0)
            o->level = m->level;
        o->vcpus = &m->obs_thr[off];
        o->iothreads = &m->obs_thr[off + d->nvcpus];
        for (unsigned k = 0; k < nthreads_of(d); k++) {
            const struct vpack_thread_sample *t = thread_of(d, k);
            struct vpack_thread_sample *ot = k == d->nvcpus ? &o->emulator
                                             : k < d->nvcpus ? &o->vcpus[k]
                                                             : &o->iothreads[k - d->nvcpus - 1];
            *ot = *t;
            /* Never below 0 (the agent's readings are not): smoothing a 0 can round to -1e-20. */
            ot->util = fmax(m->doms[s].thr[k].util_avg, 0);
            ot->delay = fmax(m->doms[s].thr[k].delay_avg, 0);
            ot->util_now = fmax(m->doms[s].thr[k].util, 0);
            ot->delay_now = fmax(m->doms[s].thr[k].delay, 0);
            ot->cpu = -1;
            demand += demand_of(t);
        }
        off += d->nvcpus + d->niothreads;
    }
    m->nmap = snap->ndomains;
    if (m->first)
        first_obs(m, usable > 0 ? demand / usable : 0);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Water-fills D onto mask k's CPUs: the least loaded are raised first. */
static void water_fill(struct vpack_model *m, const struct mask *k, double D, double *fill)
{
    unsigned n = k->ncpus, j;
    double sum = 0, level = 0;

    if (n == 0 || D <= 0) {
        for (unsigned i = 0; i < n; i++)
            fill[i] = 0;
        return;
    }
    for (unsigned i = 0; i < n; i++)
        m->tmp[i] = m->load[k->cpus[i]];
    qsort(m->tmp, n, sizeof(double), cmp_double);
    /* The level L with sum over CPUs below it of (L - load) = D. */
    for (j = 0; j < n; j++) {
        sum += m->tmp[j];
        level = (D + sum) / (j + 1);
        if (j + 1 == n || level <= m->tmp[j + 1])
            break;
    }
    for (unsigned i = 0; i < n; i++) {
        double add = level - m->load[k->cpus[i]];
        fill[i] = add > 0 ? add : 0;
        m->load[k->cpus[i]] += fill[i];
    }
}

/*
 * SMT co-running (model.h, step 8): each CPU's speed beside its core's other
 * CPUs, and its occupancy at that speed, by fixed-point iteration (each
 * round moves the occupancies by less than half the last one's change, as
 * a sibling's occupancy changes a CPU's speed by at most (1 - g) / 2: until
 * nothing moves by 1e-12, at most 64 rounds). m->tmp holds each core's
 * occupancy sum; serve() reads it as the work the core is asked for.
 */
static void smt_stretch(struct vpack_model *m)
{
    double slow = m->power.smt_corun ? (1 - m->power.smt_gain) / 2 : 0;

    for (unsigned c = 0; c < m->ncpu; c++)
        m->speed[c] = 1;
    for (int round = 0, moved = 1; moved && round < 64; round++) {
        moved = 0;
        for (unsigned c = 0; c < m->ncpu; c++) {
            int core = m->cpu_core[c];
            double sib;

            if (core < 0)
                continue;
            sib = m->tmp[core] - m->occ[c];
            m->speed[c] = 1 - (sib > 1 ? 1 : sib < 0 ? 0 : sib) * slow;
        }
        for (unsigned k = 0; k < m->ncores; k++)
            m->tmp[k] = 0;
        for (unsigned c = 0; c < m->ncpu; c++) {
            int core = m->cpu_core[c];
            double want;

            if (core < 0)
                continue;
            want = m->load[c] / m->speed[c];
            want = want > 1 ? 1 : want;
            moved = moved || fabs(want - m->occ[c]) > 1e-12;
            m->occ[c] = want;
            m->tmp[core] += m->occ[c];
        }
    }
    /* serve() caps the work, not the occupancy: tmp becomes work asked of each core. */
    for (unsigned k = 0; k < m->ncores; k++)
        m->tmp[k] = 0;
    for (unsigned c = 0; c < m->ncpu; c++)
        if (m->cpu_core[c] >= 0)
            m->tmp[m->cpu_core[c]] += m->occ[c] * m->speed[c];
}

/* Serves each CPU's load under its core's capacity: m->frac, m->occ, busy and idle. */
static void serve(struct vpack_model *m)
{
    const struct vpack_topology *t = m->topo;
    double g = m->power.smt_gain;

    for (unsigned c = 0; c < m->ncores; c++)
        m->core_busy[c] = 0;
    /* Per core: want = sum of min(load, 1), k = CPUs with work. tmp holds want per core. */
    for (unsigned c = 0; c < m->ncores; c++)
        m->tmp[c] = 0;
    for (unsigned c = 0; c < m->ncpu; c++) {
        int core = m->cpu_core[c];
        if (core < 0)
            continue;
        m->occ[c] = m->load[c] > 1 ? 1 : m->load[c];
        m->tmp[core] += m->occ[c];
        /* core_busy holds the count of CPUs with work, then the product of idles */
        if (m->load[c] > 0)
            m->core_busy[core] += 1;
    }
    smt_stretch(m);
    for (unsigned c = 0; c < m->ncpu; c++) {
        int core = m->cpu_core[c];
        double cap, scale;

        if (core < 0)
            continue;
        cap = m->core_busy[core] >= 1 ? 1 + g * (m->core_busy[core] - 1) : 1;
        scale = m->tmp[core] > cap ? cap / m->tmp[core] : 1;
        m->frac[c] = m->load[c] > 0 ? m->occ[c] * m->speed[c] * scale / m->load[c] : 1;
    }
    for (unsigned c = 0; c < m->ncores; c++)
        m->core_busy[c] = 1; /* now the product of (1 - occupancy) */
    for (unsigned c = 0; c < m->ncpu; c++)
        if (m->cpu_core[c] >= 0)
            m->core_busy[m->cpu_core[c]] *= 1 - m->occ[c];
    for (unsigned p = 0; p < t->npackages; p++) {
        m->pkg_busy[p] = 0;
        m->pkg_idle[p] = 1;
    }
    for (unsigned c = 0; c < m->ncores; c++) {
        unsigned p = m->core_pkg[c];
        m->core_busy[c] = 1 - m->core_busy[c];
        m->pkg_busy[p] += m->core_busy[c];
        m->pkg_idle[p] *= 1 - m->core_busy[c];
    }
}

double vpack_model_wait_factor(double rho, unsigned c)
{
    if (rho <= 0 || c == 0)
        return 0;
    if (rho > 0.99)
        rho = 0.99;
    return pow(rho, sqrt(2.0 * (c + 1)) - 1) / (c * (1 - rho));
}

/* Sizes the per-interval scratch for ndom domains, nthr threads and every interned mask. */
static int scratch(struct vpack_model *m, unsigned ndom, unsigned nthr)
{
    unsigned nm = m->nmasks;

    ndom++;
    nthr++;
    nm++;
    if (grow(&m->dom_demand, &m->cap[0], ndom, sizeof(double)) < 0 ||
        grow(&m->dom_served, &m->cap[1], ndom, sizeof(double)) < 0 ||
        grow(&m->thr_mask, &m->cap[2], nthr, sizeof(unsigned)) < 0 ||
        grow(&m->thr_demand, &m->cap[3], nthr, sizeof(double)) < 0 ||
        grow(&m->mdemand, &m->cap[4], nm, sizeof(double)) < 0 ||
        grow(&m->mserved, &m->cap[5], nm, sizeof(double)) < 0 ||
        grow(&m->morder, &m->cap[6], nm, sizeof(unsigned)) < 0 ||
        grow(&m->moff, &m->cap[7], nm, sizeof(unsigned)) < 0 ||
        grow(&m->mocc, &m->cap[8], nm, sizeof(double)) < 0)
        return -ENOMEM;
    return 0;
}

/* The mask the plan gives thread k of plan domain pd (snapshot domain d): interned. */
static int plan_mask(struct vpack_model *m, const struct vpack_plan_domain *pd,
                     const struct vpack_domain_sample *d, unsigned k)
{
    const struct vpack_plan_thread *pt = k < pd->nvcpus    ? &pd->vcpus[k]
                                         : k == pd->nvcpus ? &pd->emulator
                                                           : &pd->iothreads[k - pd->nvcpus - 1];
    const struct vpack_thread_sample *t = thread_of(d, k);

    if (pt->cpus)
        return intern_set(m, pt->cpus, NULL);
    return intern_set(m, t->pin ? t->pin : d->cpuset, NULL);
}

/* Applies the plan's masks: counts pin operations and moves, fills thr_mask and thr_demand. */
static int apply_plan(struct vpack_model *m, const struct vpack_snapshot *snap,
                      const struct vpack_plan *plan, struct vpack_model_interval *iv)
{
    unsigned off = 0;

    if (plan->ndomains != snap->ndomains)
        return -EPROTO;
    for (unsigned i = 0; i < snap->ndomains; i++) {
        const struct vpack_domain_sample *d = &snap->domains[i];
        const struct vpack_plan_domain *pd = &plan->domains[i];
        struct mdom *md = &m->doms[m->map[i]];

        if (pd->nvcpus != d->nvcpus || pd->niothreads != d->niothreads)
            return -EPROTO;
        iv->moves += pd->moved;
        for (unsigned k = 0; k < nthreads_of(d); k++) {
            int mi = plan_mask(m, pd, d, k);

            if (mi < 0)
                return mi;
            if ((unsigned)mi != md->thr[k].mask)
                iv->pin_ops++;
            md->thr[k].mask = (unsigned)mi;
            m->thr_mask[off] = (unsigned)mi;
            m->thr_demand[off++] = demand_of(thread_of(d, k));
        }
    }
    return 0;
}

/* Places every group's demand, narrowest mask first; serves it. Returns 0 or -ENOMEM. */
static int share(struct vpack_model *m, unsigned nthr)
{
    unsigned used = 0, need = 0;

    for (unsigned k = 0; k < m->nmasks; k++)
        m->mdemand[k] = m->mserved[k] = m->mocc[k] = 0;
    for (unsigned t = 0; t < nthr; t++)
        m->mdemand[m->thr_mask[t]] += m->thr_demand[t];
    for (unsigned k = 0; k < m->nmasks; k++) {
        if (m->mdemand[k] <= 0)
            continue;
        /* Insertion by width, then index: a stable order. */
        unsigned j = used++;
        while (j > 0 && m->masks[m->morder[j - 1]].ncpus > m->masks[k].ncpus) {
            m->morder[j] = m->morder[j - 1];
            j--;
        }
        m->morder[j] = k;
    }
    for (unsigned j = 0; j < used; j++) {
        m->moff[m->morder[j]] = need;
        need += m->masks[m->morder[j]].ncpus;
    }
    if (grow(&m->fill, &m->capfill, need ? need : 1, sizeof(double)) < 0)
        return -ENOMEM;
    /* Foreign load first: the guests' groups are levelled on top of it. */
    for (unsigned c = 0; c < m->ncpu; c++)
        m->load[c] = m->cpu_core[c] < 0 ? 0 : m->foreign[c];
    for (unsigned j = 0; j < used; j++) {
        unsigned k = m->morder[j];
        water_fill(m, &m->masks[k], m->mdemand[k], &m->fill[m->moff[k]]);
    }
    serve(m);
    for (unsigned j = 0; j < used; j++) {
        const struct mask *mk = &m->masks[m->morder[j]];
        unsigned k = m->morder[j];

        for (unsigned i = 0; i < mk->ncpus; i++) {
            m->mserved[k] += m->fill[m->moff[k] + i] * m->frac[mk->cpus[i]];
            m->mocc[k] += m->occ[mk->cpus[i]];
        }
        if (m->mserved[k] > m->mdemand[k])
            m->mserved[k] = m->mdemand[k];
    }
    return 0;
}

/* A vCPU's part in its domain's per-VM figures (vpack_model_vm_spread()). */
static void account_vcpu(struct mdom *md, double demand, double delay, double dt)
{
    md->pub.vcpu_demand += demand * dt;
    md->pub.vcpu_delay += delay * dt;
}

/* Each thread's mask before the plan is applied (step 8: a changed one refills). */
static int remember_masks(struct vpack_model *m, const struct vpack_snapshot *snap, unsigned nthr)
{
    unsigned off = 0;

    if (grow(&m->thr_prev, &m->capprev, nthr + 1, sizeof(unsigned)) < 0)
        return -ENOMEM;
    for (unsigned i = 0; i < snap->ndomains; i++) {
        const struct mdom *md = &m->doms[m->map[i]];

        for (unsigned k = 0; k < nthreads_of(&snap->domains[i]); k++)
            m->thr_prev[off++] = md->thr[k].mask;
    }
    return 0;
}

/* The share of whole-idle time idle, woken rate times a second, in gaps of at least T
 * (seconds), less the exits' latency L: the deep state's share (model.h, step 8). */
static double gap_deep(double idle, double rate, double T, double L)
{
    double x, deep;

    if (idle <= 0)
        return 0;
    if (rate <= 0 || (T <= 0 && L <= 0))
        return idle;
    if (!isfinite(rate))
        return 0;
    x = T * rate / idle;
    deep = idle * (1 + x) * exp(-x) - rate * exp(-x) * L;
    return deep > 0 ? deep : 0;
}

/* Exits from the deep state a second: wake-ups ending a gap of at least T (exponential gaps
 * of mean idle / rate); none when the gaps are all too short to count (rate infinite). */
static double exits_of(double idle, double rate, double T)
{
    if (idle <= 0 || rate <= 0 || !isfinite(rate))
        return 0;
    return rate * exp(-T * rate / idle);
}

/* Package p's wake-ups a second with busy periods of busy_s seconds. */
static double wake_rate(const struct vpack_model *m, unsigned p, double busy_s)
{
    double busy = 1 - m->pkg_idle[p];

    if (busy <= 0)
        return 0;
    return busy_s > 0 ? busy / busy_s : INFINITY;
}

/*
 * The share of the interval package p holds its deep state under scope s,
 * busy periods of busy_s seconds; residency: the target residency and exit
 * latency count; memory: a held package (pkg_held) is not deep.
 */
static double deep_share(const struct vpack_model *m, unsigned p, enum vpack_pc6_scope s,
                         double busy_s, bool residency, bool memory)
{
    const struct vpack_power_params *pw = &m->power;
    double T = residency ? pw->residency_us / 1e6 : 0, L = residency ? pw->exit_us / 1e6 : 0;
    double idle = 1, rate = 0;
    bool held = false;

    memory = memory && pw->remote == VPACK_REMOTE_HOLDS;
    if (s == VPACK_PC6_NONE)
        return 0;
    if (s == VPACK_PC6_PACKAGE)
        return memory && m->pkg_held[p] ? 0 : gap_deep(m->pkg_idle[p], wake_rate(m, p, busy_s), T, L);
    /* System-wide: every package whole-idle at once (independent packages). */
    for (unsigned q = 0; q < m->topo->npackages; q++) {
        idle *= m->pkg_idle[q];
        rate += wake_rate(m, q, busy_s);
        held = held || m->pkg_held[q];
    }
    return memory && held ? 0 : gap_deep(idle, rate, T, L);
}

/* Package p's power at deep share deep of the interval, watts. */
static double pkg_watts(const struct vpack_model *m, unsigned p, double deep)
{
    const struct vpack_power_params *pw = &m->power;
    double idle = m->pkg_idle[p];

    return deep * pw->deep_w + (idle - deep) * pw->idle_w + (1 - idle) * pw->awake_w +
           pw->core_w * m->pkg_busy[p];
}

/* pkg_held: the packages holding memory of a domain with demand in snap. */
static void hold_memory(struct vpack_model *m, const struct vpack_snapshot *snap)
{
    const struct vpack_topology *t = m->topo;

    for (unsigned p = 0; p < t->npackages; p++)
        m->pkg_held[p] = false;
    for (unsigned i = 0; i < snap->ndomains; i++) {
        const struct vpack_domain_sample *d = &snap->domains[i];
        double demand = 0;

        for (unsigned k = 0; k < nthreads_of(d); k++)
            demand += demand_of(thread_of(d, k));
        if (demand <= VPACK_MODEL_WORK_EPS)
            continue;
        for (unsigned j = 0; j < d->nmemory; j++)
            for (unsigned p = 0; p < t->npackages; p++)
                for (unsigned n = 0; n < t->packages[p].nnuma; n++)
                    if (d->memory[j].share > 0 && t->packages[p].numa_nodes[n] == d->memory[j].node)
                        m->pkg_held[p] = true;
    }
}

/*
 * Deep-state exits under the power model's scope: pkg_lat per package (exit
 * delay per unit of its work), mlat per mask (its work's, by where share()
 * put it), the count in the totals. Returns 0 or -ENOMEM.
 */
static int exit_costs(struct vpack_model *m, const struct vpack_snapshot *snap)
{
    const struct vpack_power_params *pw = &m->power;
    double busy_s = pw->busy_period_ms / 1000, L = pw->exit_us / 1e6, T = pw->residency_us / 1e6;
    double all_idle = 1, all_rate = 0;
    unsigned np = m->topo->npackages;

    if (grow(&m->mlat, &m->capmlat, m->nmasks + 1, sizeof(double)) < 0)
        return -ENOMEM;
    hold_memory(m, snap);
    for (unsigned p = 0; p < np; p++) {
        all_idle *= m->pkg_idle[p];
        all_rate += wake_rate(m, p, busy_s);
    }
    for (unsigned p = 0; p < np; p++) {
        double rate = wake_rate(m, p, busy_s), idle = m->pkg_idle[p], exits = 0;

        /* The exits: wake-ups ending a gap of at least T, i.e. one spent deep; system-wide,
         * the system's, each package's in proportion to its rate. */
        if (deep_share(m, p, pw->pc6_scope, busy_s, true, true) <= 0)
            exits = 0;
        else if (pw->pc6_scope == VPACK_PC6_PACKAGE)
            exits = exits_of(idle, rate, T);
        else if (pw->pc6_scope == VPACK_PC6_SYSTEM && all_rate > 0 && isfinite(all_rate))
            exits = exits_of(all_idle, all_rate, T) * rate / all_rate;
        m->tot.deep_wakes += exits * snap->interval_ms / 1000.0;
        m->pkg_lat[p] = m->pkg_busy[p] > VPACK_MODEL_WORK_EPS ? exits * L / m->pkg_busy[p] : 0;
    }
    for (unsigned k = 0; k < m->nmasks; k++) {
        const struct mask *mk = &m->masks[k];
        double w = 0, lat = 0;

        m->mlat[k] = 0;
        if (m->mdemand[k] <= 0)
            continue;
        for (unsigned i = 0; i < mk->ncpus; i++) {
            double f = m->fill[m->moff[k] + i];

            w += f;
            lat += f * m->pkg_lat[m->topo->cpu_package[mk->cpus[i]]];
        }
        m->mlat[k] = w > 0 ? lat / w : 0;
    }
    return 0;
}

/*
 * Thread off's costs (step 8): a moved thread's refill comes off its served
 * work *s; returns the delay its work waits for deep-state exits.
 */
static double thread_costs(struct vpack_model *m, unsigned off, double *s, double dt)
{
    double wake = *s * m->mlat[m->thr_mask[off]];

    if (m->thr_prev[off] != m->thr_mask[off] && dt > 0 && *s > 0) {
        double lost = m->power.refill_ms / 1000 / dt;

        lost = lost < *s ? lost : *s;
        *s -= lost;
        m->tot.refill_s += lost * dt;
    }
    m->tot.wake_delay_s += wake * dt;
    return wake;
}

/* The totals of step 8: SMT time, held package-seconds, energy with each assumption varied. */
static void account_costs(struct vpack_model *m, double dt)
{
    const struct vpack_power_params *pw = &m->power;
    double busy_s = pw->busy_period_ms / 1000;

    for (unsigned c = 0; c < m->ncpu; c++)
        if (m->cpu_core[c] >= 0)
            m->tot.smt_slow_s += m->occ[c] * (1 - m->speed[c]) * dt;
    for (unsigned p = 0; p < m->topo->npackages; p++) {
        enum vpack_pc6_scope s = pw->pc6_scope;
        double deep[VPACK_COST_VARIANTS] = {
            deep_share(m, p, s, busy_s, false, true),
            deep_share(m, p, s, busy_s / 10, true, true),
            deep_share(m, p, s, busy_s * 10, true, true),
            deep_share(m, p, s, busy_s, true, false),
        };

        m->tot.held_pkg_s += m->pkg_held[p] ? dt : 0;
        for (unsigned v = 0; v < VPACK_COST_VARIANTS; v++)
            m->tot.energy_var_j[v] += pkg_watts(m, p, deep[v]) * dt;
    }
}

const char *vpack_cost_variant_name(enum vpack_cost_variant v)
{
    static const char *const names[VPACK_COST_VARIANTS] = {
        "residency ignored", "busy period / 10", "busy period x 10", "remote memory free"};

    return (unsigned)v < VPACK_COST_VARIANTS ? names[v] : "?";
}

/* pkg_mem: the share of d's memory on each package; returns false when d names none. */
static bool memory_shares(struct vpack_model *m, const struct vpack_domain_sample *d)
{
    const struct vpack_topology *t = m->topo;
    bool any = false;

    for (unsigned p = 0; p < t->npackages; p++) {
        m->pkg_mem[p] = 0;
        for (unsigned j = 0; j < d->nmemory; j++)
            for (unsigned n = 0; n < t->packages[p].nnuma; n++)
                if (d->memory[j].share > 0 && t->packages[p].numa_nodes[n] == d->memory[j].node) {
                    m->pkg_mem[p] += d->memory[j].share;
                    any = true;
                }
        if (m->pkg_mem[p] > 1)
            m->pkg_mem[p] = 1;
    }
    return any;
}

/*
 * The remote-memory stall of s CPUs of work served through mask mk
 * (model.h, step 8): the share of the mask's work share() put on packages
 * without the domain's memory (pkg_mem), times remote_penalty.
 */
static double remote_costs(struct vpack_model *m, unsigned mk, double s, double dt)
{
    const struct mask *k = &m->masks[mk];
    double all = 0, away = 0, stall;

    if (s <= 0 || m->power.remote_penalty <= 0)
        return 0;
    for (unsigned i = 0; i < k->ncpus; i++) {
        int core = m->cpu_core[k->cpus[i]];
        double f = m->fill[m->moff[mk] + i];

        if (core < 0 || f <= 0)
            continue;
        all += f;
        away += f * (1 - m->pkg_mem[m->core_pkg[core]]);
    }
    stall = all > 0 ? s * away / all * m->power.remote_penalty : 0;
    m->tot.remote_delay_s += stall * dt;
    return stall;
}

/* Each thread's served work and delay; the domains' sums; the next observation. */
static void account_threads(struct vpack_model *m, const struct vpack_snapshot *snap,
                            struct vpack_model_interval *iv, double dt)
{
    unsigned off = 0;

    for (unsigned i = 0; i < snap->ndomains; i++) {
        const struct vpack_domain_sample *d = &snap->domains[i];
        struct mdom *md = &m->doms[m->map[i]];

        bool mem = memory_shares(m, d);

        m->dom_demand[i] = m->dom_served[i] = 0;
        for (unsigned k = 0; k < nthreads_of(d); k++, off++) {
            unsigned mk = m->thr_mask[off];
            const struct mask *msk = &m->masks[mk];
            double dmd = m->thr_demand[off], s = 0, delay = 0, remote = 0;

            if (dmd > 0 && m->mdemand[mk] > 0)
                s = dmd * m->mserved[mk] / m->mdemand[mk];
            if (dmd > 0) {
                /* Occupancy beyond its work: the others', and its own SMT stretch (step 8). */
                double rho = msk->ncpus ? (m->mocc[mk] - s) / msk->ncpus : 0;
                double wake = thread_costs(m, off, &s, dt);
                remote = mem ? remote_costs(m, mk, s, dt) : 0;

                delay = (dmd - s) + s * vpack_model_wait_factor(rho < 0 ? 0 : rho, msk->ncpus) +
                        wake + remote;
                if (delay > 1 - s)
                    delay = 1 - s;
            }
            md->thr[k].util = s;
            /* A stall on remote memory is run time on a real host: its schedstat shows no wait. */
            md->thr[k].delay = delay - remote > 0 ? delay - remote : 0;
            smooth(m, &md->thr[k].util_avg, s);
            smooth(m, &md->thr[k].delay_avg, md->thr[k].delay);
            m->dom_demand[i] += dmd;
            m->dom_served[i] += s;
            if (k < d->nvcpus) {
                unsigned b = (unsigned)(delay * HIST_BINS + 0.5);
                m->hist[b > HIST_BINS ? HIST_BINS : b]++;
                m->nhist++;
                account_vcpu(md, dmd, delay, dt);
                if (delay > iv->max_delay)
                    iv->max_delay = delay;
            }
        }
        iv->demand += m->dom_demand[i];
        iv->served += m->dom_served[i];
        md->pub.demand += m->dom_demand[i] * dt;
        md->pub.served += m->dom_served[i] * dt;
    }
    for (unsigned c = 0; c < m->ncpu; c++) {
        if (m->cpu_core[c] < 0) {
            m->obs.cpu_busy_now[c] = m->obs.cpu_busy[c] = -1;
            continue;
        }
        m->obs.cpu_busy_now[c] = m->occ[c];
        smooth(m, &m->obs.cpu_busy[c], m->occ[c]);
    }
}

/* Power and energy per package; the totals. */
static void account_packages(struct vpack_model *m, struct vpack_model_interval *iv, double dt)
{
    const struct vpack_power_params *pw = &m->power;

    for (unsigned p = 0; p < m->topo->npackages; p++) {
        double idle = m->pkg_idle[p];
        unsigned nc = m->topo->packages[p].ncores ? m->topo->packages[p].ncores : 1;

        for (unsigned s = 0; s < VPACK_PC6_SCOPES; s++) {
            /* The share of the interval in the deep state under scope s (step 8). */
            double deep = deep_share(m, p, s, pw->busy_period_ms / 1000, true, true);
            double watts = pkg_watts(m, p, deep);

            m->tot.energy_scope_j[s] += watts * dt;
            m->tot.shallow_pkg_s[s] += (idle - deep) * dt;
            if (s == pw->pc6_scope)
                iv->energy_j += watts * dt;
        }
        if (m->pkg_busy[p] > VPACK_MODEL_WORK_EPS)
            iv->nworking++;
        m->pkg_busy[p] /= nc;
        m->pkg_busy_s[p] += m->pkg_busy[p] * dt;
        m->pkg_idle_s[p] += idle * dt;
    }
    m->tot.intervals++;
    m->tot.seconds += dt;
    m->tot.demand += iv->demand * dt;
    m->tot.served += iv->served * dt;
    m->tot.energy_j += iv->energy_j;
    m->tot.pin_ops += iv->pin_ops;
    m->tot.foreign_s += iv->foreign * dt;
    m->tot.pin_cpu_s += iv->pin_cpu * dt;
    m->tot.moves += iv->moves;
    m->tot.active_pkg_s += iv->nworking * dt;
    m->tot.planned_pkg_s += iv->nactive * dt;
}

/*
 * Step 8: the packages that served all they can in this interval (every
 * core at 1 + smt_gain * (usable CPUs - 1)) add the interval to
 * saturated_pkg_s. Returns 0 or -ENOMEM.
 */
static int account_saturation(struct vpack_model *m, double dt)
{
    double g = m->power.smt_gain, *want, *busy, *n;

    if (!m->sat_core && !(m->sat_core = malloc(3 * m->ncores * sizeof(double))))
        return -ENOMEM;
    want = m->sat_core;
    busy = want + m->ncores;
    n = busy + m->ncores;
    for (unsigned c = 0; c < m->ncores; c++)
        want[c] = busy[c] = n[c] = 0;
    for (unsigned c = 0; c < m->ncpu; c++) {
        int core = m->cpu_core[c];

        if (core < 0)
            continue;
        want[core] += m->occ[c];
        busy[core] += m->load[c] > 0;
        n[core] += 1;
    }
    for (unsigned p = 0; p < m->topo->npackages; p++) {
        bool full = true;

        for (unsigned c = 0; c < m->ncores && full; c++)
            if (m->core_pkg[c] == p && n[c] > 0)
                full = busy[c] == n[c] && want[c] >= (1 + g * (n[c] - 1)) * (1 - 1e-9);
        m->tot.saturated_pkg_s += full ? dt : 0;
    }
    return 0;
}

/* m->planned: a copy of m->obs as the policy, about to plan, measures it. */
static int keep_planned(struct vpack_model *m)
{
    vpack_snapshot_free(m->planned);
    if (!(m->planned = vpack_snapshot_dup(&m->obs)))
        return -ENOMEM;
    return vpack_policy_measure_work(m->topo, &m->params, m->state, m->planned);
}

int vpack_model_step(struct vpack_model *m, const struct vpack_snapshot *snap,
                     struct vpack_model_interval *out, char **errmsg)
{
    struct vpack_model_interval iv = {0};
    struct vpack_plan *plan = NULL;
    double dt = snap->interval_ms / 1000.0;
    unsigned nthr = 0;
    int err;

    if (errmsg)
        *errmsg = NULL;
    for (unsigned i = 0; i < snap->ndomains; i++)
        nthr += nthreads_of(&snap->domains[i]);
    if ((err = build_obs(m, snap)) < 0 || (err = scratch(m, snap->ndomains, nthr)) < 0)
        goto cleanup;
    if (m->keep_planned && (err = keep_planned(m)) < 0)
        goto cleanup;
    err = vpack_plan_compute(m->topo, &m->params, &m->obs, m->state, &plan);
    if (err < 0) {
        vpack_errmsg_set(err, errmsg, "the policy refused the interval: %s", strerror(-err));
        goto cleanup;
    }
    iv.nactive = plan->lifted ? m->topo->npackages : plan->nactive;
    iv.wakeup_package = plan->wakeup_package;
    iv.lifted = plan->lifted;
    if ((err = remember_masks(m, snap, nthr)) < 0)
        goto cleanup;
    if ((err = apply_plan(m, snap, plan, &iv)) < 0) {
        if (err == -EPROTO)
            vpack_errmsg_set(-EINVAL, errmsg, "the plan does not match the interval's domains");
        goto cleanup;
    }
    iv.foreign = charge_foreign(m, &iv, dt, &iv.pin_cpu);
    /* apply_plan() may have interned new masks. */
    if ((err = scratch(m, snap->ndomains, nthr)) < 0 || (err = share(m, nthr)) < 0 ||
        (err = exit_costs(m, snap)) < 0)
        goto cleanup;
    iv.refill = m->tot.refill_s;
    account_threads(m, snap, &iv, dt);
    iv.refill = dt > 0 ? (m->tot.refill_s - iv.refill) / dt : 0;
    account_costs(m, dt);
    account_packages(m, &iv, dt);
    if ((err = account_saturation(m, dt)) < 0)
        goto cleanup;
    m->first = false;
    iv.seconds = dt;
    iv.npackages = m->topo->npackages;
    iv.pkg_busy = m->pkg_busy;
    iv.pkg_idle = m->pkg_idle;
    iv.ndomains = snap->ndomains;
    iv.dom_demand = m->dom_demand;
    iv.dom_served = m->dom_served;
    if (out)
        *out = iv;
    err = 0;
    vpack_plan_free(m->last_plan);
    m->last_plan = plan;
    plan = NULL;

cleanup:
    /* Foreign load is the next step's only, whether it ran or not. */
    for (unsigned c = 0; c < m->ncpu; c++)
        m->foreign[c] = 0;
    vpack_plan_free(plan);
    return err == -EPROTO ? -EINVAL : err;
}

struct vpack_plan *vpack_model_take_plan(struct vpack_model *m)
{
    struct vpack_plan *p = m->last_plan;

    m->last_plan = NULL;
    return p;
}

const struct vpack_snapshot *vpack_model_observed(const struct vpack_model *m)
{
    return &m->obs;
}

void vpack_model_keep_planned(struct vpack_model *m)
{
    m->keep_planned = true;
}

const struct vpack_snapshot *vpack_model_planned(const struct vpack_model *m)
{
    return m->planned;
}

void vpack_model_totals(const struct vpack_model *m, struct vpack_model_totals *out)
{
    unsigned long want, seen = 0;

    *out = m->tot;
    out->delay_p99 = 0;
    if (m->nhist == 0)
        return;
    /* The smallest bin with at least 99% of the samples at or below it. */
    want = m->nhist - m->nhist / 100;
    for (unsigned b = 0; b <= HIST_BINS; b++) {
        seen += m->hist[b];
        if (seen >= want) {
            out->delay_p99 = (double)b / HIST_BINS;
            break;
        }
    }
}

const struct vpack_model_domain *vpack_model_domain_get(const struct vpack_model *m, unsigned i)
{
    return i < m->ndoms ? &m->doms[i].pub : NULL;
}

int vpack_model_thread_cpus(const struct vpack_model *m, unsigned i, unsigned k, vpack_cpuset *out)
{
    const struct mdom *md;
    const struct mask *mk;

    if (i >= m->ndoms)
        return -ENOENT;
    md = &m->doms[i];
    if (k >= md->nvcpus + 1 + md->niothreads)
        return -ENOENT;
    mk = &m->masks[md->thr[k].mask];
    vpack_cpuset_zero(out);
    for (unsigned c = 0; c < mk->ncpus; c++)
        if (vpack_cpuset_set(out, (unsigned)mk->cpus[c]) < 0)
            return -ENOENT;
    return (int)md->nvcpus;
}

/* The nearest-rank percentile q of v[0..n) (sorted, n > 0): the ceil(q n)-th smallest. */
static double nearest_rank(const double *v, unsigned n, double q)
{
    double r = ceil(q * n - 1e-9);

    return v[r < 1 ? 0 : (unsigned)r - 1];
}

int vpack_model_vm_spread(const struct vpack_model *m, struct vpack_model_vm_spread *out)
{
    double *delay = malloc((m->ndoms ? m->ndoms : 1) * sizeof(double));
    double *unserved = malloc((m->ndoms ? m->ndoms : 1) * sizeof(double));
    unsigned n = 0;

    *out = (struct vpack_model_vm_spread){0};
    if (!delay || !unserved) {
        free(delay);
        free(unserved);
        return -ENOMEM;
    }
    for (unsigned i = 0; i < m->ndoms; i++) {
        const struct vpack_model_domain *d = &m->doms[i].pub;

        if (d->vcpu_demand <= 0)
            continue;
        delay[n] = d->vcpu_delay / d->vcpu_demand;
        unserved[n++] = d->demand > 0 && d->served < d->demand ? 1 - d->served / d->demand : 0;
    }
    if (n > 0) {
        qsort(delay, n, sizeof(double), cmp_double);
        qsort(unserved, n, sizeof(double), cmp_double);
        *out = (struct vpack_model_vm_spread){
            .n = n,
            .delay_p50 = nearest_rank(delay, n, 0.50),
            .delay_p99 = nearest_rank(delay, n, 0.99),
            .delay_max = delay[n - 1],
            .unserved_p50 = nearest_rank(unserved, n, 0.50),
            .unserved_p99 = nearest_rank(unserved, n, 0.99),
            .unserved_max = unserved[n - 1],
        };
    }
    free(delay);
    free(unserved);
    return 0;
}
