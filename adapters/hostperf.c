// SPDX-License-Identifier: MIT
/* C-state residency from the kernel's C-state perf PMUs; see hostperf.h. */
#include "hostperf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hostpower-priv.h"
#include "vpack/cpuset.h"
#include "vpack/grow.h"
#include "vpack/perf-event.h"

#define MAX_FORMATS 8

struct counter {
    int fd;
    unsigned package, die;
    char state[8];
};

struct kind {
    struct counter *c;
    size_t n, cap;
    char why[256]; /* empty: it has counters */
};

struct vpack_hostperf {
    struct vpack_perf_ops ops;
    struct kind kind[2];
    double tsc_hz;
};

/* ------------------------------------------------------------- the kernel */

static int live_open(void *ud, uint32_t type, uint64_t config, int cpu)
{
    struct perf_event_attr a;
    (void)ud;
    memset(&a, 0, sizeof(a));
    a.type = type;
    a.size = sizeof(a);
    a.config = config;
    /* System-wide on cpu: the C-state PMUs take nothing else (cstate_pmu_event_init()). */
    long fd = syscall(SYS_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
    return fd < 0 ? -errno : (int)fd;
}

static int live_read(void *ud, int fd, uint64_t *count)
{
    ssize_t n;
    (void)ud;
    do
        n = read(fd, count, sizeof(*count));
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    return n == (ssize_t)sizeof(*count) ? 0 : -EIO;
}

/*
 * The kernel's TSC rate, from the counter's mmap page (perf_event_open(2):
 * with cap_user_time, time_mult and time_shift convert TSC cycles to ns;
 * x86 fills them from its cyc2ns data only while sched_clock runs on a
 * stable TSC). Only the first page is mapped: a counting event needs no
 * ring buffer.
 */
static double live_tsc_hz(void *ud, int fd)
{
    long pg = sysconf(_SC_PAGESIZE);
    uint32_t seq, mult;
    uint16_t shift;
    bool cap;
    (void)ud;
    if (pg <= 0)
        return 0;
    struct perf_event_mmap_page *m = mmap(NULL, (size_t)pg, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return 0;
    do {
        seq = __atomic_load_n(&m->lock, __ATOMIC_ACQUIRE);
        cap = m->cap_user_time;
        mult = m->time_mult;
        shift = m->time_shift;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
    } while (__atomic_load_n(&m->lock, __ATOMIC_ACQUIRE) != seq || (seq & 1));
    munmap(m, (size_t)pg);
    return cap ? vpack_perf_tsc_hz(mult, shift) : 0;
}

static void live_close(void *ud, int fd)
{
    (void)ud;
    close(fd);
}

const struct vpack_perf_ops vpack_perf_ops_live = {live_open, live_read, live_tsc_hz, live_close,
                                                   NULL};

double vpack_perf_tsc_hz(uint32_t time_mult, uint16_t time_shift)
{
    if (!time_mult || time_shift > 62)
        return 0;
    return 1e9 * (double)(1ull << time_shift) / (double)time_mult;
}

/* ------------------------------------------------------------- discovery */

/* One PMU's events: their states and configs. */
struct pmu {
    uint32_t type;
    unsigned nev;
    char state[16][8];
    uint64_t config[16];
    vpack_cpuset cpus;
};

/* The directory dir/name as a DIR, or NULL. */
static DIR *opendir_at(int dir, const char *name)
{
    int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d && fd >= 0)
        close(fd);
    return d;
}

static void read_formats(int dir, struct vpack_perf_format *fmt, unsigned *nfmt)
{
    char text[128];
    struct dirent *e;
    DIR *d = opendir_at(dir, "format");
    *nfmt = 0;
    if (!d)
        return;
    while ((e = readdir(d)) && *nfmt < MAX_FORMATS)
        if (e->d_name[0] != '.' && vpack__attr_read(dirfd(d), e->d_name, text, sizeof(text)) == 0 &&
            vpack_perf_format_parse(e->d_name, text, &fmt[*nfmt], NULL) == 0)
            ++*nfmt;
    closedir(d);
}

/* The C-state events of the PMU directory dir ("cN-residency"; .scale and .unit files are not). */
static void read_events(int dir, const struct vpack_perf_format *fmt, unsigned nfmt, struct pmu *p)
{
    char text[128], state[8];
    struct dirent *e;
    DIR *d = opendir_at(dir, "events");
    if (!d)
        return;
    while ((e = readdir(d)) && p->nev < sizeof(p->config) / sizeof(p->config[0])) {
        if (!vpack_perf_cstate_name(e->d_name, state, sizeof(state)) ||
            vpack__attr_read(dirfd(d), e->d_name, text, sizeof(text)) < 0 ||
            vpack_perf_event_parse(text, fmt, nfmt, &p->config[p->nev], NULL) < 0)
            continue;
        memcpy(p->state[p->nev++], state, sizeof(state));
    }
    closedir(d);
}

/* Opens root's PMU name: its type, events and cpumask into *p. -ENOENT: no such PMU. */
static int find_pmu(const char *root, const char *name, struct pmu *p, char *why, size_t nwhy)
{
    char path[4096], text[4096];
    struct vpack_perf_format fmt[MAX_FORMATS];
    unsigned nfmt = 0;
    uint64_t type;
    snprintf(path, sizeof(path), "%s/sys/bus/event_source/devices/%s", root, name);
    int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) {
        int err = errno;
        snprintf(why, nwhy, "%s: %s", name, strerror(err));
        return -err;
    }
    memset(p, 0, sizeof(*p));
    int r = vpack__attr_u64(dir, "type", &type);
    if (r < 0 || type > UINT32_MAX) {
        snprintf(why, nwhy, "%s: no readable type", name);
    } else if (read_formats(dir, fmt, &nfmt), read_events(dir, fmt, nfmt, p), !p->nev) {
        snprintf(why, nwhy, "%s: no C-state event it can name", name);
    } else if (vpack__attr_read(dir, "cpumask", text, sizeof(text)) < 0 ||
               vpack_cpuset_parse(&p->cpus, text, NULL) < 0) {
        snprintf(why, nwhy, "%s: no cpumask", name);
    } else {
        p->type = (uint32_t)type;
        why[0] = '\0';
    }
    close(dir);
    return why[0] ? -EINVAL : 0;
}

/* The package and die of root's cpu: 0, or -errno when its topology cannot be read. */
static int cpu_package(const char *root, int cpu, unsigned *package, unsigned *die)
{
    char path[4096];
    uint64_t v;
    snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/cpu%d/topology", root, cpu);
    int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return -errno;
    int r = vpack__attr_u64(dir, "physical_package_id", &v);
    *package = r == 0 && v <= 1u << 20 ? (unsigned)v : 0;
    /* die_id came in Linux 5.3; without it, one die a package. */
    *die = vpack__attr_u64(dir, "die_id", &v) == 0 && v <= 1u << 20 ? (unsigned)v : 0;
    close(dir);
    return r;
}

static void close_kind(struct vpack_hostperf *p, struct kind *k)
{
    for (size_t i = 0; i < k->n; i++)
        p->ops.close(p->ops.ud, k->c[i].fd);
    free(k->c);
    k->c = NULL;
    k->n = k->cap = 0;
}

/* Opens every event of pmu on every CPU of its cpumask into k. */
static int open_pmu(struct vpack_hostperf *p, const char *root, const char *name,
                    const struct pmu *pmu, struct kind *k)
{
    int last = 0;
    unsigned package = 0, die = 0;
    for (int cpu = vpack_cpuset_first(&pmu->cpus); cpu >= 0;
         cpu = vpack_cpuset_next(&pmu->cpus, cpu)) {
        if ((last = cpu_package(root, cpu, &package, &die)) < 0)
            continue;
        for (unsigned e = 0; e < pmu->nev; e++) {
            int fd = p->ops.open(p->ops.ud, pmu->type, pmu->config[e], cpu);
            if (fd == -EACCES || fd == -EPERM) {
                close_kind(p, k);
                snprintf(k->why, sizeof(k->why),
                         "%s: permission denied (perf_event_open needs CAP_PERFMON or "
                         "kernel.perf_event_paranoid <= 0)",
                         name);
                return 0;
            }
            if (fd < 0) {
                last = fd;
                continue;
            }
            struct counter *c = vpack_grow(k->c, k->n, &k->cap, sizeof(*c));
            if (!c) {
                p->ops.close(p->ops.ud, fd);
                return -ENOMEM;
            }
            k->c = c;
            c[k->n++] = (struct counter){fd, package, die, {0}};
            memcpy(c[k->n - 1].state, pmu->state[e], sizeof(c->state));
        }
    }
    if (!k->n)
        snprintf(k->why, sizeof(k->why), "%s: no counter could be opened (%s)", name,
                 strerror(last < 0 ? -last : ENODEV));
    return 0;
}

/* The names a kind's PMU has: cstate.c registers cstate_pkg as cstate_die on multi-die packages. */
static const char *const kind_pmus[2][3] = {{"cstate_pkg", "cstate_die", NULL},
                                            {"cstate_core", NULL, NULL}};

static int open_kind(struct vpack_hostperf *p, const char *root, enum vpack_hostperf_kind kind)
{
    struct kind *k = &p->kind[kind];
    struct pmu pmu;
    for (const char *const *name = kind_pmus[kind]; *name; name++) {
        int r = find_pmu(root, *name, &pmu, k->why, sizeof(k->why));
        if (r == -ENOENT)
            continue;
        return r < 0 ? 0 : open_pmu(p, root, *name, &pmu, k);
    }
    snprintf(k->why, sizeof(k->why),
             "no %s PMU (the kernel's intel_cstate driver: Intel CPUs, not in a virtual machine)",
             kind == VPACK_HOSTPERF_PKG ? "cstate_pkg or cstate_die" : "cstate_core");
    return 0;
}

int vpack_hostperf_open(const char *root, const struct vpack_perf_ops *ops,
                        struct vpack_hostperf **out)
{
    struct vpack_hostperf *p = calloc(1, sizeof(*p));
    *out = NULL;
    if (!p)
        return -ENOMEM;
    p->ops = ops ? *ops : vpack_perf_ops_live;
    for (int kind = 0; kind < 2; kind++)
        if (open_kind(p, root, (enum vpack_hostperf_kind)kind) < 0) {
            vpack_hostperf_free(p);
            return -ENOMEM;
        }
    for (int kind = 0; kind < 2 && !p->tsc_hz; kind++)
        if (p->kind[kind].n)
            p->tsc_hz = p->ops.tsc_hz(p->ops.ud, p->kind[kind].c[0].fd);
    *out = p;
    return 0;
}

void vpack_hostperf_free(struct vpack_hostperf *p)
{
    if (!p)
        return;
    for (int kind = 0; kind < 2; kind++)
        close_kind(p, &p->kind[kind]);
    free(p);
}

const char *vpack_hostperf_why(const struct vpack_hostperf *p, enum vpack_hostperf_kind kind)
{
    return p->kind[kind].n ? NULL : p->kind[kind].why;
}

size_t vpack_hostperf_count(const struct vpack_hostperf *p, enum vpack_hostperf_kind kind)
{
    return p->kind[kind].n;
}

double vpack_hostperf_tsc_hz(const struct vpack_hostperf *p)
{
    return p->tsc_hz;
}

/* ------------------------------------------------------------- reading */

/* "C10" after "C6": by the state's number. */
static int cmp_cstate(const void *x, const void *y)
{
    const struct vpack_prom_cstate *a = x, *b = y;
    unsigned long sa = strtoul(a->state + 1, NULL, 10), sb = strtoul(b->state + 1, NULL, 10);
    if (a->package != b->package)
        return a->package < b->package ? -1 : 1;
    if (a->die != b->die)
        return a->die < b->die ? -1 : 1;
    return (sa > sb) - (sa < sb);
}

int vpack_hostperf_read(struct vpack_hostperf *p, enum vpack_hostperf_kind kind,
                        struct vpack_prom_cstate **out, size_t *n)
{
    struct kind *k = &p->kind[kind];
    struct vpack_prom_cstate *r = NULL;
    bool *bad = k->n ? calloc(k->n, sizeof(*bad)) : NULL;
    size_t nr = 0, cap = 0;
    *out = NULL;
    *n = 0;
    if (k->n && !bad)
        return -ENOMEM;
    for (size_t i = 0; i < k->n; i++) {
        const struct counter *c = &k->c[i];
        /* Core states are summed per package: the die does not part them. */
        unsigned die = kind == VPACK_HOSTPERF_PKG ? c->die : 0;
        uint64_t count = 0;
        size_t j;
        int rr = p->ops.read(p->ops.ud, c->fd, &count);
        for (j = 0; j < nr; j++)
            if (r[j].package == c->package && r[j].die == die && !strcmp(r[j].state, c->state))
                break;
        if (j == nr) {
            struct vpack_prom_cstate *g = vpack_grow(r, nr, &cap, sizeof(*r));
            if (!g) {
                free(r);
                free(bad);
                return -ENOMEM;
            }
            r = g;
            r[nr] = (struct vpack_prom_cstate){c->package, die, {0}, 0};
            memcpy(r[nr++].state, c->state, sizeof(c->state));
        }
        if (rr < 0)
            bad[j] = true;
        r[j].value += (double)count;
    }
    size_t keep = 0;
    for (size_t j = 0; j < nr; j++)
        if (!bad[j])
            r[keep++] = r[j];
    free(bad);
    if (keep)
        qsort(r, keep, sizeof(*r), cmp_cstate);
    else {
        free(r);
        r = NULL;
    }
    *out = r;
    *n = keep;
    return 0;
}
