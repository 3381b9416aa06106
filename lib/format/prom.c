// SPDX-License-Identifier: MIT
#include "vpack/prom.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growing text buffer; after a failed allocation it only records that. */
struct buf {
    char *p;
    size_t len, cap;
    bool oom;
};

static void buf_add(struct buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t ncap = b->cap ? b->cap : 4096;
        while (b->len + n + 1 > ncap)
            ncap *= 2;
        char *p = realloc(b->p, ncap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = ncap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_puts(struct buf *b, const char *s)
{
    buf_add(b, s, strlen(s));
}

/* Length of the valid UTF-8 sequence starting at s (n bytes left), 0 if none. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    uint32_t cp, min;
    size_t len;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        len = 2, cp = s[0] & 0x1f, min = 0x80;
    } else if ((s[0] & 0xf0) == 0xe0) {
        len = 3, cp = s[0] & 0x0f, min = 0x800;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        len = 4, cp = s[0] & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/*
 * A label value as the text format wants it: backslash, double quote and
 * line feed escaped; a byte that is not part of valid UTF-8 becomes U+FFFD
 * (Prometheus rejects the whole scrape otherwise).
 */
static void buf_label_value(struct buf *b, const char *v)
{
    const unsigned char *s = (const unsigned char *)v;
    size_t n = strlen(v);
    while (n) {
        size_t k = utf8_len(s, n);
        if (k == 0) {
            buf_add(b, "\xef\xbf\xbd", 3);
            k = 1;
        } else if (*s == '\\') {
            buf_add(b, "\\\\", 2);
        } else if (*s == '"') {
            buf_add(b, "\\\"", 2);
        } else if (*s == '\n') {
            buf_add(b, "\\n", 2);
        } else {
            buf_add(b, (const char *)s, k);
        }
        s += k;
        n -= k;
    }
}

/*
 * A sample value: the shortest of %.15g, %.16g and %.17g that reads back
 * as v, and the text format's NaN, +Inf and -Inf.
 */
static const char *fmt_double(char *s, size_t n, double v)
{
    if (isnan(v))
        snprintf(s, n, "NaN");
    else if (isinf(v))
        snprintf(s, n, "%s", v > 0 ? "+Inf" : "-Inf");
    else
        for (int digits = 15; digits <= 17; digits++)
            if (snprintf(s, n, "%.*g", digits, v), strtod(s, NULL) == v)
                break;
    return s;
}

static const char *fmt_i64(char *s, size_t n, int64_t v)
{
    snprintf(s, n, "%" PRId64, v);
    return s;
}

static const char *fmt_u64(char *s, size_t n, uint64_t v)
{
    snprintf(s, n, "%" PRIu64, v);
    return s;
}

struct label {
    const char *name;
    const char *value;
};

/* A metric family; its # HELP and # TYPE lines come before its first sample. */
struct family {
    const char *name;
    const char *type;
    const char *help;
    bool started;
};

static void sample(struct buf *b, struct family *f, const char *suffix, const struct label *l,
                   size_t nl, const char *value)
{
    if (!f->started) {
        buf_puts(b, "# HELP ");
        buf_puts(b, f->name);
        buf_puts(b, " ");
        buf_puts(b, f->help);
        buf_puts(b, "\n# TYPE ");
        buf_puts(b, f->name);
        buf_puts(b, " ");
        buf_puts(b, f->type);
        buf_puts(b, "\n");
        f->started = true;
    }
    buf_puts(b, f->name);
    buf_puts(b, suffix);
    for (size_t i = 0; i < nl; i++) {
        buf_puts(b, i ? "," : "{");
        buf_puts(b, l[i].name);
        buf_puts(b, "=\"");
        buf_label_value(b, l[i].value);
        buf_puts(b, "\"");
    }
    if (nl)
        buf_puts(b, "}");
    buf_puts(b, " ");
    buf_puts(b, value);
    buf_puts(b, "\n");
}

/* One unlabelled sample with value v. */
static void scalar(struct buf *b, const char *v, const char *name, const char *type,
                   const char *help)
{
    struct family f = {name, type, help, false};
    sample(b, &f, "", NULL, 0, v);
}

static void scalar_double(struct buf *b, double v, const char *name, const char *type,
                          const char *help)
{
    char s[64];
    scalar(b, fmt_double(s, sizeof(s), v), name, type, help);
}

static void scalar_u64(struct buf *b, uint64_t v, const char *name, const char *type,
                       const char *help)
{
    char s[32];
    scalar(b, fmt_u64(s, sizeof(s), v), name, type, help);
}

/* Line i of VPACK_COUNTERS (vpack/counters.h) as its unlabelled counter family, if it has one. */
static void counter(struct buf *b, const struct vpack_counters *c, enum vpack_counter i)
{
    const struct vpack_counter_def *d = &vpack_counter_defs[i];
    if (d->prom)
        scalar_u64(b, vpack_counters_get(c, i), d->prom, "counter", d->help);
}

/* Which member of a package one per-package family shows. */
enum pkg_field { PKG_BUSY, PKG_IDLE, PKG_ACTIVE, PKG_WAKEUP };

static double pkg_value(const struct vpack_prom_package *p, enum pkg_field field)
{
    switch (field) {
    case PKG_BUSY:
        return p->busy;
    case PKG_IDLE:
        return p->idle_seconds;
    case PKG_ACTIVE:
        return p->active;
    case PKG_WAKEUP:
        return p->wakeup;
    }
    return 0;
}

/* One sample per package, labelled with its id. */
static void per_package(struct buf *b, const struct vpack_prom_metrics *m, enum pkg_field field,
                        const char *name, const char *type, const char *help)
{
    struct family f = {name, type, help, false};
    char id[32], v[64];
    for (size_t i = 0; i < m->npackages; i++) {
        struct label l = {"package", fmt_i64(id, sizeof(id), m->packages[i].id)};
        sample(b, &f, "", &l, 1, fmt_double(v, sizeof(v), pkg_value(&m->packages[i], field)));
    }
}

static void packages(struct buf *b, const struct vpack_prom_metrics *m)
{
    per_package(b, m, PKG_BUSY, "vpack_package_busy_ratio", "gauge",
                "Smoothed busy share of the package's CPUs (0 to 1), as the planner sees it.");
    per_package(b, m, PKG_IDLE, "vpack_package_idle_seconds_total", "counter",
                "Idle time of the package's CPUs since boot, summed over its CPUs, from /proc/stat.");
    per_package(b, m, PKG_ACTIVE, "vpack_package_active", "gauge",
                "1 when the plan keeps the package active, 0 when it is parked.");
    per_package(b, m, PKG_WAKEUP, "vpack_package_wakeup", "gauge",
                "1 for the wake-up package, where level-2 domains' light threads wait, else 0.");
    uint64_t active = 0;
    for (size_t i = 0; i < m->npackages; i++)
        active += m->packages[i].active;
    scalar_u64(b, active, "vpack_active_packages", "gauge",
               "Number of packages the current plan keeps active.");
}

static int cmp_idle(const void *x, const void *y)
{
    const struct vpack_prom_idle_state *a = *(const struct vpack_prom_idle_state *const *)x;
    const struct vpack_prom_idle_state *b = *(const struct vpack_prom_idle_state *const *)y;
    if (a->cpu != b->cpu)
        return a->cpu < b->cpu ? -1 : 1;
    if (!a->name || !b->name)
        return !b->name - !a->name; /* nameless first */
    return strcmp(a->name, b->name);
}

/* One counter per package: energy in joules; a package that repeats is shown once. */
static void energy(struct buf *b, const struct vpack_prom_energy *e, size_t n, const char *name,
                   const char *help)
{
    struct family f = {name, "counter", help, false};
    char pkg[32], v[64];
    for (size_t i = 0; i < n; i++) {
        bool dup = false;
        for (size_t k = 0; k < i; k++)
            dup |= e[k].package == e[i].package;
        if (dup)
            continue;
        snprintf(pkg, sizeof(pkg), "%u", e[i].package);
        struct label l = {"package", pkg};
        sample(b, &f, "", &l, 1, fmt_double(v, sizeof(v), e[i].joules));
    }
}

/*
 * C-state residency, labelled package, die (package states) and state. In
 * seconds where the TSC's rate is known, else in TSC cycles under a name
 * that says so: the counters tick at the TSC's rate, nothing else.
 */
static void cstates(struct buf *b, const struct vpack_prom_host *h, bool pkg)
{
    const struct vpack_prom_cstate *c = pkg ? h->pkg_cstate : h->core_cstate;
    size_t n = pkg ? h->npkg_cstate : h->ncore_cstate;
    bool secs = h->tsc_hz > 0;
    struct family f = {
        pkg ? (secs ? "vpack_package_cstate_residency_seconds_total"
                    : "vpack_package_cstate_residency_tsc_cycles_total")
            : (secs ? "vpack_core_cstate_residency_seconds_total"
                    : "vpack_core_cstate_residency_tsc_cycles_total"),
        "counter",
        pkg ? (secs ? "Time the package (the die, on packages of several) spent in the package "
                      "C-state since vpackd started, from the kernel's cstate_pkg/cstate_die "
                      "perf PMU (TSC cycles over the kernel's TSC rate)."
                    : "TSC cycles the package (the die) spent in the package C-state since "
                      "vpackd started, from the kernel's cstate_pkg/cstate_die perf PMU; the "
                      "TSC rate is not known here.")
            : (secs ? "Time the package's cores spent in the core C-state since vpackd started, "
                      "summed over its cores, from the kernel's cstate_core perf PMU (TSC "
                      "cycles over the kernel's TSC rate)."
                    : "TSC cycles the package's cores spent in the core C-state since vpackd "
                      "started, summed over its cores, from the kernel's cstate_core perf PMU; "
                      "the TSC rate is not known here."),
        false};
    char pk[32], die[32], v[64];
    for (size_t i = 0; i < n; i++) {
        bool dup = false;
        for (size_t k = 0; k < i; k++)
            dup |= c[k].package == c[i].package && (!pkg || c[k].die == c[i].die) &&
                   !strcmp(c[k].state, c[i].state);
        if (dup || !c[i].state[0])
            continue;
        snprintf(pk, sizeof(pk), "%u", c[i].package);
        snprintf(die, sizeof(die), "%u", c[i].die);
        struct label l[3] = {{"package", pk}, {"die", die}, {"state", c[i].state}};
        if (!pkg)
            l[1] = l[2];
        double value = c[i].value / (secs ? h->tsc_hz : 1);
        sample(b, &f, "", l, pkg ? 3 : 2, fmt_double(v, sizeof(v), value));
    }
}

/* Which value of an uncore domain one family shows. */
static const struct {
    size_t offset;
    const char *name, *help;
} uncore_fields[] = {
    {offsetof(struct vpack_prom_uncore, current), "vpack_uncore_frequency_hertz",
     "Uncore (mesh, LLC) frequency now, from intel_uncore_frequency's current_freq_khz."},
    {offsetof(struct vpack_prom_uncore, min), "vpack_uncore_frequency_min_hertz",
     "Lowest uncore frequency the hardware may choose, as set (min_freq_khz)."},
    {offsetof(struct vpack_prom_uncore, max), "vpack_uncore_frequency_max_hertz",
     "Highest uncore frequency the hardware may choose, as set (max_freq_khz)."},
    {offsetof(struct vpack_prom_uncore, initial_min), "vpack_uncore_frequency_initial_min_hertz",
     "Lowest uncore frequency out of reset (initial_min_freq_khz)."},
    {offsetof(struct vpack_prom_uncore, initial_max), "vpack_uncore_frequency_initial_max_hertz",
     "Highest uncore frequency out of reset (initial_max_freq_khz)."},
};

/* Labels of an uncore domain: package, then die, or domain and cluster (those it has). */
static size_t uncore_labels(const struct vpack_prom_uncore *u, struct label *l, char (*s)[32])
{
    size_t n = 0;
    snprintf(s[0], 32, "%u", u->package);
    l[n++] = (struct label){"package", s[0]};
    if (u->die >= 0) {
        snprintf(s[1], 32, "%d", u->die);
        l[n++] = (struct label){"die", s[1]};
    }
    if (u->domain >= 0) {
        snprintf(s[2], 32, "%d", u->domain);
        l[n++] = (struct label){"domain", s[2]};
    }
    if (u->cluster >= 0) {
        snprintf(s[3], 32, "%d", u->cluster);
        l[n++] = (struct label){"cluster", s[3]};
    }
    return n;
}

static void uncore(struct buf *b, const struct vpack_prom_host *h)
{
    struct label l[4];
    char s[4][32], v[64];
    for (size_t k = 0; k < sizeof(uncore_fields) / sizeof(uncore_fields[0]); k++) {
        struct family f = {uncore_fields[k].name, "gauge", uncore_fields[k].help, false};
        for (size_t i = 0; i < h->nuncore; i++) {
            double hz;
            memcpy(&hz, (const char *)&h->uncore[i] + uncore_fields[k].offset, sizeof(hz));
            if (hz >= 0)
                sample(b, &f, "", l, uncore_labels(&h->uncore[i], l, s),
                       fmt_double(v, sizeof(v), hz));
        }
    }
}

/* RAPL DRAM and platform energy, C-state residency, uncore frequency, and which exist. */
static void hardware_families(struct buf *b, const struct vpack_prom_host *h)
{
    energy(b, h->dram, h->ndram, "vpack_dram_energy_joules_total",
           "Energy the package's DRAM used, from its RAPL \"dram\" subzone (/sys/class/powercap), "
           "counter wraps undone.");
    if (h->has_psys) {
        char v[64];
        scalar(b, fmt_double(v, sizeof(v), h->psys_joules), "vpack_platform_energy_joules_total",
               "counter", "Energy the whole platform used, from the RAPL \"psys\" zone "
               "(/sys/class/powercap), counter wraps undone.");
    }
    cstates(b, h, true);
    cstates(b, h, false);
    uncore(b, h);
    struct family f = {"vpack_hardware_source_available", "gauge",
                       "1 when vpackd reads this source of hardware readings on this host, 0 when "
                       "it is absent or cannot be read (the log says why at start).",
                       false};
    for (size_t i = 0; i < h->navailable; i++) {
        struct label l = {"source", h->available[i].source};
        if (h->available[i].source)
            sample(b, &f, "", &l, 1, h->available[i].available ? "1" : "0");
    }
}

/* The process collector's families, with the names and help of the client libraries. */
static void process_families(struct buf *b, const struct vpack_prom_process *p)
{
    static const struct {
        size_t offset;
        const char *name, *type, *help;
    } fields[] = {
        {offsetof(struct vpack_prom_process, cpu_seconds), "process_cpu_seconds_total", "counter",
         "Total user and system CPU time spent in seconds."},
        {offsetof(struct vpack_prom_process, open_fds), "process_open_fds", "gauge",
         "Number of open file descriptors."},
        {offsetof(struct vpack_prom_process, max_fds), "process_max_fds", "gauge",
         "Maximum number of open file descriptors."},
        {offsetof(struct vpack_prom_process, virtual_bytes), "process_virtual_memory_bytes",
         "gauge", "Virtual memory size in bytes."},
        {offsetof(struct vpack_prom_process, resident_bytes), "process_resident_memory_bytes",
         "gauge", "Resident memory size in bytes."},
        {offsetof(struct vpack_prom_process, start_time_seconds), "process_start_time_seconds",
         "gauge", "Start time of the process since unix epoch in seconds."},
    };
    if (!p)
        return;
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        double v;
        memcpy(&v, (const char *)p + fields[i].offset, sizeof(v));
        if (v >= 0)
            scalar_double(b, v, fields[i].name, fields[i].type, fields[i].help);
    }
}

static int host_families(struct buf *b, const struct vpack_prom_host *host)
{
    char cpu[32], v[64];
    if (!host)
        return 0;
    process_families(b, host->process);
    /* Sorted, and a (cpu, state) pair that repeats is left out: one series each. */
    const struct vpack_prom_idle_state **idle = NULL;
    if (host->nidle) {
        idle = malloc(host->nidle * sizeof(*idle));
        if (!idle)
            return -ENOMEM;
        for (size_t i = 0; i < host->nidle; i++)
            idle[i] = &host->idle[i];
        qsort(idle, host->nidle, sizeof(*idle), cmp_idle);
    }
    struct family fi = {"vpack_cpu_idle_state_residency_seconds_total", "counter",
                        "Time the CPU spent in the cpuidle state since boot, from "
                        "/sys/devices/system/cpu/cpuN/cpuidle/stateM/time.",
                        false};
    for (size_t i = 0; i < host->nidle; i++) {
        if (!idle[i]->name || (i && cmp_idle(&idle[i - 1], &idle[i]) == 0))
            continue;
        snprintf(cpu, sizeof(cpu), "%u", idle[i]->cpu);
        struct label l[2] = {{"cpu", cpu}, {"state", idle[i]->name}};
        sample(b, &fi, "", l, 2, fmt_double(v, sizeof(v), idle[i]->seconds));
    }
    free(idle);

    energy(b, host->energy, host->nenergy, "vpack_package_energy_joules_total",
           "Energy the package used, from RAPL (/sys/class/powercap), counter wraps "
           "undone; absent where the host has no RAPL.");
    hardware_families(b, host);
    return 0;
}

static int cmp_dom(const void *x, const void *y)
{
    const struct vpack_prom_domain *a = *(const struct vpack_prom_domain *const *)x;
    const struct vpack_prom_domain *b = *(const struct vpack_prom_domain *const *)y;
    return strcmp(a->name, b->name);
}

static const char *const thread_class_names[] = {"vcpu", "emulator", "iothread"};

static bool same_thread(const struct vpack_prom_thread *a, const struct vpack_prom_thread *b)
{
    return a->cls == b->cls && (a->cls == VPACK_PROM_EMULATOR || a->id == b->id);
}

/* By class, then id; the same thread in the order given (the first is shown). */
static int cmp_thread(const void *x, const void *y)
{
    const struct vpack_prom_thread *a = *(const struct vpack_prom_thread *const *)x;
    const struct vpack_prom_thread *b = *(const struct vpack_prom_thread *const *)y;
    if (a->cls != b->cls)
        return a->cls < b->cls ? -1 : 1;
    if (!same_thread(a, b))
        return a->id < b->id ? -1 : 1;
    return a < b ? -1 : a > b;
}

/*
 * The thread counters of every domain: vCPUs by number, the emulator,
 * iothreads by id; a (class, id) that repeats is shown once. wait: the
 * run-queue family, which leaves out the threads whose source has none.
 */
static int thread_counters(struct buf *b, const struct vpack_prom_domain *const *d, size_t nd,
                           bool wait, const char *name, const char *help)
{
    struct family f = {name, "counter", help, false};
    char id[32], v[64];
    for (size_t i = 0; i < nd; i++) {
        const struct vpack_prom_thread **t = NULL;
        size_t n = d[i]->nthreads;
        if (n && !(t = malloc(n * sizeof(*t))))
            return -ENOMEM;
        for (size_t k = 0; k < n; k++)
            t[k] = &d[i]->threads[k];
        if (n)
            qsort(t, n, sizeof(*t), cmp_thread);
        for (size_t k = 0; k < n; k++) {
            if ((unsigned)t[k]->cls > VPACK_PROM_IOTHREAD || (wait && !t[k]->has_wait) ||
                (k && same_thread(t[k - 1], t[k])))
                continue;
            snprintf(id, sizeof(id), "%u", t[k]->id);
            struct label l[3] = {{"domain", d[i]->name},
                                 {"class", thread_class_names[t[k]->cls]},
                                 {"id", id}};
            double s = wait ? t[k]->wait_seconds : t[k]->run_seconds;
            sample(b, &f, "", l, t[k]->cls == VPACK_PROM_EMULATOR ? 2 : 3,
                   fmt_double(v, sizeof(v), s));
        }
        free(t);
    }
    return 0;
}

static void domain_packages(struct buf *b, const struct vpack_prom_domain *const *d, size_t nd)
{
    struct family fp = {"vpack_domain_package", "gauge",
                        "1 for each package the domain's threads are placed on.", false};
    char pk[32];
    for (size_t i = 0; i < nd; i++)
        for (size_t k = 0; k < d[i]->npackages; k++) {
            struct label l[2] = {{"domain", d[i]->name},
                                 {"package", fmt_i64(pk, sizeof(pk), d[i]->packages[k])}};
            sample(b, &fp, "", l, 2, "1");
        }
}

/* The per-domain families, sorted by name; a name that repeats is shown once. */
static int domains(struct buf *b, const struct vpack_prom_metrics *m)
{
    const struct vpack_prom_domain **d = NULL;
    size_t nd = 0;
    char v[64];
    if (m->ndomains && !(d = malloc(m->ndomains * sizeof(*d))))
        return -ENOMEM;
    for (size_t i = 0; i < m->ndomains; i++)
        if (m->domains[i].name)
            d[nd++] = &m->domains[i];
    if (nd)
        qsort(d, nd, sizeof(*d), cmp_dom);
    size_t keep = 0;
    for (size_t i = 0; i < nd; i++)
        if (!keep || strcmp(d[keep - 1]->name, d[i]->name))
            d[keep++] = d[i];
    nd = keep;

    struct family fl = {"vpack_domain_level", "gauge",
                        "Power policy level in effect for the domain (0 none, 1 or 2).", false};
    struct family fm = {"vpack_domain_managed", "gauge",
                        "1 when the agent knows the pins the domain asked for and may place its "
                        "threads, else 0.",
                        false};
    for (size_t i = 0; i < nd; i++) {
        struct label l = {"domain", d[i]->name};
        sample(b, &fl, "", &l, 1, fmt_i64(v, sizeof(v), d[i]->level));
    }
    /* A family's samples stand together: one loop a family, alike in shape only. */
    for (size_t i = 0; i < nd; i++) {
        struct label l = {"domain", d[i]->name};
        sample(b, &fm, "", &l, 1, d[i]->managed ? "1" : "0");
    }
    domain_packages(b, d, nd);
    struct family fr = {"vpack_domain_remote_memory_ratio", "gauge",
                        "Share of the domain's memory on NUMA nodes outside the packages it is "
                        "placed on (vpack never migrates memory).",
                        false};
    for (size_t i = 0; i < nd; i++) {
        struct label l = {"domain", d[i]->name};
        if (d[i]->remote_memory >= 0)
            sample(b, &fr, "", &l, 1, fmt_double(v, sizeof(v), d[i]->remote_memory));
    }
    int r = thread_counters(
        b, d, nd, false, "vpack_vcpu_run_seconds_total",
        "Time the domain's threads ran on a CPU during this run of the domain, from the "
        "kernel's schedstat: per vCPU (class=\"vcpu\", id its number), the emulator (every "
        "other thread of QEMU, together) and per iothread (id libvirt's iothread id).");
    if (r == 0)
        r = thread_counters(
            b, d, nd, true, "vpack_vcpu_wait_seconds_total",
            "Time the domain's threads were runnable but waited on a run queue during this run "
            "of the domain, from the kernel's schedstat; by class and id as "
            "vpack_vcpu_run_seconds_total (an iothread read from its cgroup has none).");
    free(d);
    return r;
}

/* A counter labelled by reason, and by result where the counts have one. */
static void by_reason(struct buf *b, const struct vpack_prom_count *c, size_t n, const char *name,
                      const char *help)
{
    struct family f = {name, "counter", help, false};
    char v[32];
    for (size_t i = 0; i < n; i++) {
        if (!c[i].reason)
            continue;
        struct label l[2] = {{"reason", c[i].reason}, {"result", c[i].result}};
        sample(b, &f, "", l, c[i].result ? 2 : 1, fmt_u64(v, sizeof(v), c[i].count));
    }
}

const double vpack_prom_bucket_bounds[VPACK_PROM_NBUCKETS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0};

void vpack_prom_observe(struct vpack_prom_histogram *h, double seconds)
{
    for (size_t i = 0; i < VPACK_PROM_NBUCKETS; i++)
        if (seconds <= vpack_prom_bucket_bounds[i])
            h->buckets[i]++;
    h->count++;
    h->sum += seconds;
}

/* The buckets, then le="+Inf" with the count, then _sum and _count. */
static void histogram(struct buf *b, const struct vpack_prom_histogram *h, const char *name,
                      const char *help)
{
    struct family f = {name, "histogram", help, false};
    char le[64], v[32], sum[64], count[32];
    for (size_t i = 0; i < VPACK_PROM_NBUCKETS; i++) {
        struct label l = {"le", fmt_double(le, sizeof(le), vpack_prom_bucket_bounds[i])};
        sample(b, &f, "_bucket", &l, 1, fmt_u64(v, sizeof(v), h->buckets[i]));
    }
    fmt_u64(count, sizeof(count), h->count);
    struct label inf = {"le", "+Inf"};
    sample(b, &f, "_bucket", &inf, 1, count);
    sample(b, &f, "_sum", NULL, 0, fmt_double(sum, sizeof(sum), h->sum));
    sample(b, &f, "_count", NULL, 0, count);
}

int vpack_prom_render(const struct vpack_prom_metrics *m, const struct vpack_prom_host *host,
                      char **out, size_t *len)
{
    struct buf b = {0};
    int ret;

    *out = NULL;
    if (len)
        *len = 0;
    if (!m)
        return -EINVAL;

    if (m->version) {
        struct family f = {"vpack_build_info", "gauge",
                           "vpackd's version, the git commit it was built from, and the version "
                           "of the libvirt daemon it last connected to; the value is always 1.",
                           false};
        struct label l[3] = {{"version", m->version},
                             {"commit", m->commit ? m->commit : "unknown"},
                             {"libvirt", m->libvirt ? m->libvirt : "unknown"}};
        sample(&b, &f, "", l, 3, "1");
    }
    scalar(&b, m->connected ? "1" : "0", "vpack_libvirt_connected", "gauge",
           "1 while the agent is connected to libvirt, else 0.");
    /* Next to the connection's gauge, where it always was; the other counters come last. */
    counter(&b, &m->counters, VPACK_COUNTER_connects);
    packages(&b, m);
    scalar_double(&b, m->demand, "vpack_demand_cpus", "gauge",
                  "CPUs' worth of load the planner expects, from the smoothed samples.");
    scalar(&b, m->lifted ? "1" : "0", "vpack_restrictions_lifted", "gauge",
           "1 while the plan lifts every restriction (load too high to pack), else 0.");
    if ((ret = host_families(&b, host)) < 0 || (ret = domains(&b, m)) < 0) {
        free(b.p);
        return ret;
    }
    by_reason(&b, m->rebalances, m->nrebalances, "vpack_rebalances_total",
              "Plans that moved threads, by why the plan changed.");
    by_reason(&b, m->pin_ops, m->npin_ops, "vpack_pin_operations_total",
              "Pin calls to libvirt, by why they were made and how they ended.");
    histogram(&b, &m->plan_duration, "vpack_plan_duration_seconds",
              "Time the policy took to compute one plan.");
    histogram(&b, &m->cycle_duration, "vpack_sample_duration_seconds",
              "Time one sampling cycle took: read, plan and pin.");
    for (int i = 0; i < VPACK_NCOUNTERS; i++)
        if (i != VPACK_COUNTER_connects)
            counter(&b, &m->counters, i);
    buf_add(&b, "", 0);
    if (b.oom) {
        free(b.p);
        return -ENOMEM;
    }
    *out = b.p;
    if (len)
        *len = b.len;
    return 0;
}

void vpack_prom_metrics_free(struct vpack_prom_metrics *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->ndomains; i++) {
        free(m->domains[i].name);
        free(m->domains[i].packages);
        free(m->domains[i].threads);
    }
    free(m->domains);
    free(m->packages);
    free(m->rebalances);
    free(m->pin_ops);
    free(m);
}

uint64_t vpack_prom_wrap_delta(uint64_t prev, uint64_t cur, uint64_t range)
{
    if (cur >= prev)
        return cur - prev;
    if (range == 0 || prev > range)
        return cur;
    return range - prev + cur;
}
