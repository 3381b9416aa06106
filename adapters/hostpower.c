// SPDX-License-Identifier: MIT
/* The host's power readings: cpuidle, RAPL, C-state PMUs, uncore frequency; see hostpower.h. */
#include "hostpower.h"
#include "hostpower-priv.h"
#include "vpack/grow.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A RAPL zone's energy counter, wraps undone, kept across readings. */
struct rapl_zone {
    char dir[64];   /* "intel-rapl:0" */
    uint64_t prev;  /* last raw energy_uj */
    uint64_t total; /* first reading plus every increase since, in uJ */
};

struct vpack_hostpower {
    char *root;
    struct rapl_zone *zones;
    size_t nzones;
    struct vpack_hostperf *perf; /* NULL: the root is not the live kernel's */
    bool avail[VPACK_HW_N];      /* as of the last reading */
    char why[VPACK_HW_N][256];   /* why not, when not */
};

int vpack_hostpower_new_ops(const char *root, const struct vpack_perf_ops *ops,
                            struct vpack_hostpower **out)
{
    struct vpack_hostpower *hp = calloc(1, sizeof(*hp));
    *out = NULL;
    if (!hp || !(hp->root = strdup(root)) ||
        (ops && vpack_hostperf_open(root, ops, &hp->perf) < 0)) {
        vpack_hostpower_free(hp);
        return -ENOMEM;
    }
    *out = hp;
    return 0;
}

int vpack_hostpower_new(const char *root, struct vpack_hostpower **out)
{
    char *real = realpath(root, NULL);
    /* perf_event_open(2) opens the running kernel's PMUs: only its own /sys describes them. */
    bool live = real && !strcmp(real, "/");
    free(real);
    return vpack_hostpower_new_ops(root, live ? &vpack_perf_ops_live : NULL, out);
}

void vpack_hostpower_free(struct vpack_hostpower *hp)
{
    if (!hp)
        return;
    vpack_hostperf_free(hp->perf);
    free(hp->zones);
    free(hp->root);
    free(hp);
}

void vpack_hostpower_reading_clear(struct vpack_hostpower_reading *r)
{
    free(r->idle);
    free(r->names);
    free(r->energy);
    free(r->dram);
    free(r->pkg_cstate);
    free(r->core_cstate);
    free(r->uncore);
    *r = (struct vpack_hostpower_reading){0};
}

int vpack__attr_read(int dir, const char *path, char *buf, size_t size)
{
    ssize_t n;
    int fd = openat(dir, path, O_RDONLY | O_CLOEXEC), ret = 0;
    if (fd < 0)
        return -errno;
    do
        n = read(fd, buf, size - 1);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        ret = -errno;
    close(fd);
    if (ret < 0)
        return ret;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        n--;
    buf[n] = '\0';
    return 0;
}

int vpack__attr_u64(int dir, const char *path, uint64_t *v)
{
    char buf[32], *end;
    int r = vpack__attr_read(dir, path, buf, sizeof(buf));
    if (r < 0)
        return r;
    errno = 0;
    unsigned long long x = strtoull(buf, &end, 10);
    if (end == buf || *end || errno || buf[0] == '-')
        return -EINVAL;
    *v = x;
    return 0;
}

bool vpack__numbered(const char *s, const char *prefix, unsigned *n)
{
    size_t k = strlen(prefix);
    char *end;
    if (strncmp(s, prefix, k) || s[k] < '0' || s[k] > '9')
        return false;
    errno = 0;
    unsigned long v = strtoul(s + k, &end, 10);
    if (*end || errno || v > 1u << 30)
        return false;
    *n = (unsigned)v;
    return true;
}

/* Adds the states of root/sys/devices/system/cpu/cpuN/cpuidle/stateM to h. */
static int read_cpuidle(const char *root, struct vpack_hostpower_reading *h)
{
    char path[4096], sub[320], name[VPACK_CPUIDLE_NAME_MAX];
    struct dirent *e, *s;
    unsigned cpu, state;
    uint64_t us;
    DIR *cpus;
    if (snprintf(path, sizeof(path), "%s/sys/devices/system/cpu", root) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    cpus = opendir(path);
    if (!cpus)
        return -errno;
    while ((e = readdir(cpus))) {
        if (!vpack__numbered(e->d_name, "cpu", &cpu))
            continue;
        snprintf(sub, sizeof(sub), "%s/cpuidle", e->d_name);
        int fd = openat(dirfd(cpus), sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            continue; /* no cpuidle driver, or the CPU is offline */
        DIR *states = fdopendir(fd);
        if (!states) {
            close(fd);
            continue;
        }
        while ((s = readdir(states))) {
            if (!vpack__numbered(s->d_name, "state", &state))
                continue;
            snprintf(sub, sizeof(sub), "%s/name", s->d_name);
            if (vpack__attr_read(fd, sub, name, sizeof(name)) < 0 || !name[0])
                continue;
            snprintf(sub, sizeof(sub), "%s/time", s->d_name);
            if (vpack__attr_u64(fd, sub, &us) < 0)
                continue;
            if (h->nidle == h->cap) {
                size_t ncap = h->cap ? h->cap * 2 : 64;
                struct vpack_prom_idle_state *ni = realloc(h->idle, ncap * sizeof(*ni));
                if (!ni)
                    break;
                h->idle = ni;
                char(*nn)[VPACK_CPUIDLE_NAME_MAX] = realloc(h->names, ncap * sizeof(*nn));
                if (!nn)
                    break;
                h->names = nn;
                h->cap = ncap;
            }
            memcpy(h->names[h->nidle], name, sizeof(name));
            h->idle[h->nidle++] = (struct vpack_prom_idle_state){cpu, NULL, (double)us / 1e6};
        }
        closedir(states);
    }
    closedir(cpus);
    /* Only now: names[] may have moved while it grew. */
    for (size_t i = 0; i < h->nidle; i++)
        h->idle[i].name = h->names[i];
    return 0;
}

/* "package-3" or "package-3-die-1" -> 3. */
static bool rapl_package(const char *name, unsigned *pkg)
{
    char *end;
    if (strncmp(name, "package-", 8) || name[8] < '0' || name[8] > '9')
        return false;
    unsigned long v = strtoul(name + 8, &end, 10);
    unsigned die;
    if (v > 1u << 20 || (*end && !vpack__numbered(end, "-die-", &die)))
        return false;
    *pkg = (unsigned)v;
    return true;
}

static struct rapl_zone *rapl_zone(struct vpack_hostpower *hp, const char *dir, bool *fresh)
{
    *fresh = false;
    for (size_t i = 0; i < hp->nzones; i++)
        if (!strcmp(hp->zones[i].dir, dir))
            return &hp->zones[i];
    struct rapl_zone *nz = realloc(hp->zones, (hp->nzones + 1) * sizeof(*nz));
    if (!nz)
        return NULL;
    hp->zones = nz;
    nz = &hp->zones[hp->nzones++];
    *nz = (struct rapl_zone){0};
    snprintf(nz->dir, sizeof(nz->dir), "%s", dir);
    *fresh = true;
    return nz;
}

/* Which RAPL zone a powercap entry is: a top-level zone, a subzone, or neither. */
enum zone_kind { ZONE_NONE, ZONE_TOP, ZONE_SUB };

/* "intel-rapl:N" (top) or "intel-rapl:N:M" (sub); *parent is N. */
static enum zone_kind rapl_entry(const char *d, unsigned *parent)
{
    char top[64];
    const char *colon;
    unsigned sub;
    if (vpack__numbered(d, "intel-rapl:", parent))
        return ZONE_TOP;
    if (strncmp(d, "intel-rapl:", 11) || !(colon = strchr(d + 11, ':')) ||
        (size_t)(colon - d) >= sizeof(top))
        return ZONE_NONE;
    memcpy(top, d, (size_t)(colon - d));
    top[colon - d] = '\0';
    return vpack__numbered(top, "intel-rapl:", parent) && vpack__numbered(colon, ":", &sub)
               ? ZONE_SUB
               : ZONE_NONE;
}

/* The zone dir's energy since the first reading, in J, wraps undone. */
static int zone_joules(struct vpack_hostpower *hp, int dir, const char *entry, double *joules)
{
    char sub[320];
    uint64_t raw, range;
    bool fresh;
    snprintf(sub, sizeof(sub), "%s/energy_uj", entry);
    int r = vpack__attr_u64(dir, sub, &raw);
    if (r < 0)
        return r; /* energy_uj is root-only on recent kernels */
    snprintf(sub, sizeof(sub), "%s/max_energy_range_uj", entry);
    if (vpack__attr_u64(dir, sub, &range) < 0)
        range = 0;
    struct rapl_zone *z = rapl_zone(hp, entry, &fresh);
    if (!z)
        return -ENOMEM;
    z->total = fresh ? raw : z->total + vpack_prom_wrap_delta(z->prev, raw, range);
    z->prev = raw;
    *joules = (double)z->total / 1e6;
    return 0;
}

/* Adds joules to package pkg of *list (the dies of a package summed). */
static int add_energy(struct vpack_prom_energy **list, size_t *n, unsigned pkg, double joules)
{
    size_t i;
    for (i = 0; i < *n && (*list)[i].package != pkg; i++)
        ;
    if (i == *n) {
        struct vpack_prom_energy *ne = realloc(*list, (*n + 1) * sizeof(*ne));
        if (!ne)
            return -ENOMEM;
        *list = ne;
        ne[(*n)++] = (struct vpack_prom_energy){pkg, 0};
    }
    (*list)[i].joules += joules;
    return 0;
}

/* The package of the top-level zone "intel-rapl:N" under dir, from its name. */
static bool parent_package(int dir, unsigned parent, unsigned *pkg)
{
    char sub[64], name[64];
    snprintf(sub, sizeof(sub), "intel-rapl:%u/name", parent);
    return vpack__attr_read(dir, sub, name, sizeof(name)) == 0 && rapl_package(name, pkg);
}

/* What one RAPL kind's zones said during a read: the reason when none could be read. */
static void zone_seen(struct vpack_hostpower *hp, enum vpack_hw_source c, int r)
{
    if (r == 0)
        hp->avail[c] = true;
    else if (!hp->avail[c])
        snprintf(hp->why[c], sizeof(hp->why[c]), "energy_uj: %s", strerror(-r));
}

/*
 * Adds the energy of root/sys/class/powercap's RAPL zones (Documentation/
 * power/powercap/powercap.rst; AMD's RAPL uses the same names) to h: the
 * top-level "package-N" zones (the dies of a package summed), their "dram"
 * subzones (intel-rapl:N:M), and the "psys" zone. No powercap directory or
 * no such zone: nothing, and the reason in hp->why.
 */
static void read_rapl(struct vpack_hostpower *hp, struct vpack_hostpower_reading *h)
{
    char path[4096], sub[320], name[64];
    struct dirent *e;
    unsigned parent, pkg;
    double j;
    static const enum vpack_hw_source rapl[] = {VPACK_HW_RAPL_PACKAGE, VPACK_HW_RAPL_DRAM,
                                                 VPACK_HW_RAPL_PSYS};
    static const char *const none[] = {"no RAPL package zone", "no RAPL \"dram\" subzone",
                                       "no RAPL \"psys\" zone"};
    for (size_t i = 0; i < 3; i++) {
        hp->avail[rapl[i]] = false;
        snprintf(hp->why[rapl[i]], sizeof(hp->why[0]), "%s", none[i]);
    }
    if (snprintf(path, sizeof(path), "%s/sys/class/powercap", hp->root) >= (int)sizeof(path))
        return;
    DIR *d = opendir(path);
    if (!d) {
        for (size_t i = 0; i < 3; i++)
            snprintf(hp->why[rapl[i]], sizeof(hp->why[0]),
                     "no /sys/class/powercap (no RAPL driver: intel_rapl_msr, or AMD's)");
        return;
    }
    while ((e = readdir(d))) {
        enum zone_kind kind = rapl_entry(e->d_name, &parent);
        if (kind == ZONE_NONE || strlen(e->d_name) >= sizeof(hp->zones->dir))
            continue;
        snprintf(sub, sizeof(sub), "%s/name", e->d_name);
        if (vpack__attr_read(dirfd(d), sub, name, sizeof(name)) < 0)
            continue;
        int r = 0;
        if (kind == ZONE_TOP && rapl_package(name, &pkg)) {
            if ((r = zone_joules(hp, dirfd(d), e->d_name, &j)) == 0)
                r = add_energy(&h->energy, &h->nenergy, pkg, j);
            zone_seen(hp, VPACK_HW_RAPL_PACKAGE, r);
        } else if (kind == ZONE_TOP && !strcmp(name, "psys")) {
            if ((r = zone_joules(hp, dirfd(d), e->d_name, &j)) == 0) {
                h->has_psys = true;
                h->psys_joules += j;
            }
            zone_seen(hp, VPACK_HW_RAPL_PSYS, r);
        } else if (kind == ZONE_SUB && !strcmp(name, "dram") &&
                   parent_package(dirfd(d), parent, &pkg)) {
            if ((r = zone_joules(hp, dirfd(d), e->d_name, &j)) == 0)
                r = add_energy(&h->dram, &h->ndram, pkg, j);
            zone_seen(hp, VPACK_HW_RAPL_DRAM, r);
        }
        if (r == -ENOMEM)
            break;
    }
    closedir(d);
}

/* ------------------------------------------------------------- uncore */

/* One uncore attribute in kHz as Hz; -1 when it cannot be read. */
static double khz(int dir, const char *entry, const char *attr)
{
    char sub[320];
    uint64_t v;
    snprintf(sub, sizeof(sub), "%s/%s", entry, attr);
    return vpack__attr_u64(dir, sub, &v) == 0 ? (double)v * 1e3 : -1;
}

static int id_attr(int dir, const char *entry, const char *attr)
{
    char sub[320];
    uint64_t v;
    snprintf(sub, sizeof(sub), "%s/%s", entry, attr);
    return vpack__attr_u64(dir, sub, &v) == 0 && v <= 1u << 20 ? (int)v : -1;
}

/* "package_01_die_00" -> 1, 0. */
static bool uncore_legacy(const char *d, unsigned *pkg, unsigned *die)
{
    char *end;
    if (strncmp(d, "package_", 8) || d[8] < '0' || d[8] > '9')
        return false;
    unsigned long v = strtoul(d + 8, &end, 10);
    if (v > 1u << 20 || !vpack__numbered(end, "_die_", die))
        return false;
    *pkg = (unsigned)v;
    return true;
}

static int cmp_uncore(const void *x, const void *y)
{
    const struct vpack_prom_uncore *a = x, *b = y;
    if (a->package != b->package)
        return a->package < b->package ? -1 : 1;
    if (a->die != b->die)
        return a->die < b->die ? -1 : 1;
    if (a->domain != b->domain)
        return a->domain < b->domain ? -1 : 1;
    return (a->cluster > b->cluster) - (a->cluster < b->cluster);
}

/* Reads one uncore directory entry into *u: false when it is neither kind or has no frequency. */
static bool uncore_entry(int dir, const char *entry, bool tpmi, struct vpack_prom_uncore *u)
{
    unsigned pkg, die, n;
    if (tpmi) {
        int p = id_attr(dir, entry, "package_id");
        if (!vpack__numbered(entry, "uncore", &n) || p < 0)
            return false;
        *u = (struct vpack_prom_uncore){(unsigned)p, id_attr(dir, entry, "die_id"),
                                        id_attr(dir, entry, "domain_id"),
                                        id_attr(dir, entry, "fabric_cluster_id"), 0, 0, 0, 0, 0};
    } else {
        if (!uncore_legacy(entry, &pkg, &die))
            return false;
        *u = (struct vpack_prom_uncore){pkg, (int)die, -1, -1, 0, 0, 0, 0, 0};
    }
    u->current = khz(dir, entry, "current_freq_khz");
    u->min = khz(dir, entry, "min_freq_khz");
    u->max = khz(dir, entry, "max_freq_khz");
    u->initial_min = khz(dir, entry, "initial_min_freq_khz");
    u->initial_max = khz(dir, entry, "initial_max_freq_khz");
    return u->current >= 0 || u->min >= 0 || u->max >= 0 || u->initial_min >= 0 ||
           u->initial_max >= 0;
}

/*
 * Adds root/sys/devices/system/cpu/intel_uncore_frequency's domains to h
 * (Documentation/admin-guide/pm/intel_uncore_frequency_scaling.rst): the
 * uncoreNN directories where there are any (TPMI: they alone have
 * current_freq_khz, and package_PP_die_DD beside them only repeats their
 * limits), else the package_PP_die_DD ones.
 */
static int read_uncore(struct vpack_hostpower *hp, struct vpack_hostpower_reading *h)
{
    char path[4096];
    struct dirent *e;
    unsigned n;
    bool tpmi = false;
    snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/intel_uncore_frequency", hp->root);
    DIR *d = opendir(path);
    if (!d) {
        snprintf(hp->why[VPACK_HW_UNCORE], sizeof(hp->why[0]),
                 "no intel_uncore_frequency driver (Intel server CPUs, none in a virtual "
                 "machine)");
        return 0;
    }
    while ((e = readdir(d)))
        tpmi |= vpack__numbered(e->d_name, "uncore", &n);
    rewinddir(d);
    size_t cap = 0;
    while ((e = readdir(d))) {
        struct vpack_prom_uncore u;
        if (!uncore_entry(dirfd(d), e->d_name, tpmi, &u))
            continue;
        struct vpack_prom_uncore *g = vpack_grow(h->uncore, h->nuncore, &cap, sizeof(u));
        if (!g) {
            closedir(d);
            return -ENOMEM;
        }
        h->uncore = g;
        g[h->nuncore++] = u;
    }
    closedir(d);
    if (h->nuncore)
        qsort(h->uncore, h->nuncore, sizeof(*h->uncore), cmp_uncore);
    hp->avail[VPACK_HW_UNCORE] = h->nuncore > 0;
    snprintf(hp->why[VPACK_HW_UNCORE], sizeof(hp->why[0]), "%s",
             h->nuncore ? "" : "intel_uncore_frequency has no readable domain");
    return 0;
}

/* ------------------------------------------------------------- C-states */

static void read_cstates(struct vpack_hostpower *hp, struct vpack_hostpower_reading *h)
{
    static const enum vpack_hw_source which[2] = {VPACK_HW_CSTATE_PKG, VPACK_HW_CSTATE_CORE};
    for (int k = 0; k < 2; k++) {
        const char *why = hp->perf ? vpack_hostperf_why(hp->perf, (enum vpack_hostperf_kind)k)
                                   : "not read: the counters are the running kernel's, and the "
                                     "root is not /";
        hp->avail[which[k]] = !why;
        snprintf(hp->why[which[k]], sizeof(hp->why[0]), "%s", why ? why : "");
    }
    if (!hp->perf)
        return;
    h->tsc_hz = vpack_hostperf_tsc_hz(hp->perf);
    if (vpack_hostperf_read(hp->perf, VPACK_HOSTPERF_PKG, &h->pkg_cstate, &h->npkg_cstate) == 0)
        vpack_hostperf_read(hp->perf, VPACK_HOSTPERF_CORE, &h->core_cstate, &h->ncore_cstate);
}

static const char *const hw_names[VPACK_HW_N] = {
    [VPACK_HW_CPUIDLE] = "cpuidle",         [VPACK_HW_RAPL_PACKAGE] = "rapl_package",
    [VPACK_HW_RAPL_DRAM] = "rapl_dram",     [VPACK_HW_RAPL_PSYS] = "rapl_psys",
    [VPACK_HW_CSTATE_PKG] = "cstate_pkg",   [VPACK_HW_CSTATE_CORE] = "cstate_core",
    [VPACK_HW_UNCORE] = "uncore_frequency",
};

int vpack_hostpower_read(struct vpack_hostpower *hp, struct vpack_hostpower_reading *out)
{
    *out = (struct vpack_hostpower_reading){0};
    int r = read_cpuidle(hp->root, out);
    hp->avail[VPACK_HW_CPUIDLE] = out->nidle > 0;
    snprintf(hp->why[VPACK_HW_CPUIDLE], sizeof(hp->why[0]), "%s",
             r < 0 ? strerror(-r) : out->nidle ? "" : "no cpuidle state (no cpuidle driver)");
    read_rapl(hp, out);
    read_uncore(hp, out);
    read_cstates(hp, out);
    for (int i = 0; i < VPACK_HW_N; i++)
        out->available[i] = (struct vpack_prom_available){hw_names[i], hp->avail[i]};
    out->navailable = VPACK_HW_N;
    return r;
}

const char *vpack_hostpower_why(const struct vpack_hostpower *hp, enum vpack_hw_source c)
{
    return hp->avail[c] ? NULL : hp->why[c];
}

void vpack_hostpower_summary(const struct vpack_hostpower *hp, char *buf, size_t size)
{
    size_t n = (size_t)snprintf(buf, size, "hardware counters: available:");
    bool any = false;
    for (int i = 0; i < VPACK_HW_N && n < size; i++)
        if (hp->avail[i]) {
            n += (size_t)snprintf(buf + n, size - n, "%s %s", any ? "," : "", hw_names[i]);
            any = true;
        }
    if (!any && n < size)
        n += (size_t)snprintf(buf + n, size - n, " none");
    any = false;
    for (int i = 0; i < VPACK_HW_N && n < size; i++)
        if (!hp->avail[i]) {
            n += (size_t)snprintf(buf + n, size - n, "%s %s: %s", any ? ";" : "; not available:",
                                  hw_names[i], hp->why[i]);
            any = true;
        }
}

void vpack_hostpower_prom_host(const struct vpack_hostpower_reading *r,
                               struct vpack_prom_host *out)
{
    *out = (struct vpack_prom_host){r->idle,       r->nidle,        r->energy,      r->nenergy,
                                    r->dram,       r->ndram,        r->has_psys,    r->psys_joules,
                                    r->pkg_cstate, r->npkg_cstate,  r->core_cstate, r->ncore_cstate,
                                    r->tsc_hz,     r->uncore,       r->nuncore,     r->available,
                                    r->navailable,  NULL};
}
