// SPDX-License-Identifier: MIT
/*
 * Observe: per-CPU busy time from /proc/stat, per-thread load from one
 * libvirt bulk stats call (iothreads from the threads QEMU names, else their
 * cgroups; memory from memory.numa_stat of either cgroup version),
 * smoothed; and the snapshot the policy plans on.
 */
#include "agent-priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "log.h"

/* Moving average: rises followed fast, falls slowly. */
static void smooth(const struct vpack_agent *a, double *avg, double sample)
{
    *avg += (sample > *avg ? a->cfg.smoothing_rise : a->cfg.smoothing_fall) * (sample - *avg);
}

/* Grows cpu_busy to n CPUs (new ones not reported). Returns 0 or -ENOMEM. */
static int grow_cpu_busy(struct vpack_agent *a, unsigned n)
{
    if (n <= a->ncpu_busy)
        return 0;
    double *b = realloc(a->cpu_busy, n * sizeof(*b));
    if (!b)
        return -ENOMEM;
    for (unsigned i = a->ncpu_busy; i < n; i++)
        b[i] = -1;
    a->cpu_busy = b;
    a->ncpu_busy = n;
    return 0;
}

/* Reads /proc/stat and updates each CPU's smoothed busy fraction. */
void vpack__sample_cpus(struct vpack_agent *a)
{
    struct vpack_cpu_times *t = NULL;
    unsigned n = 0;
    int r = vpack_host_cpu_times(a->cfg.sysfs_root, &t, &n);
    if (r < 0) {
        log_warn("cannot read /proc/stat: %s", strerror(-r));
        return;
    }
    int maxcpu = -1;
    for (unsigned i = 0; i < n; i++)
        if (t[i].cpu > maxcpu)
            maxcpu = t[i].cpu;
    if (grow_cpu_busy(a, (unsigned)(maxcpu + 1)) < 0) {
        free(t);
        return;
    }
    /*
     * /proc/stat lists CPUs in ascending order, so the two readings are
     * merged in one pass. A CPU with no line (offline) reports nothing.
     */
    unsigned k = 0;
    int next = 0;
    for (unsigned i = 0; i < n; i++) {
        int c = t[i].cpu;
        for (; next < c; next++)
            a->cpu_busy[next] = -1;
        next = c + 1;
        while (k < a->nprev_times && a->prev_times[k].cpu < c)
            k++;
        if (k == a->nprev_times || a->prev_times[k].cpu != c)
            continue;
        double busy = vpack_cpu_times_busy(&a->prev_times[k], &t[i]);
        double *s = &a->cpu_busy[c];
        if (busy < 0)
            continue;
        if (*s < 0)
            *s = busy;
        else
            smooth(a, s, busy);
    }
    for (; next < (int)a->ncpu_busy; next++)
        a->cpu_busy[next] = -1;
    free(a->prev_times);
    a->prev_times = t;
    a->nprev_times = n;
}

/* Where the domain's memory is (memory.numa_stat); read every few samples. */
static void sample_memory(struct vpack_agent *a, struct agent_dom *d)
{
    struct vpack_mem_share *mem;
    unsigned n;
    uint64_t bytes;
    int v = vpack_cgroup_numa_stat(a->cfg.sysfs_root, &d->cg, &mem, &n, &bytes);
    if (v < 0 || n == 0) {
        if (d->mem_error != (v < 0 ? v : -ENODATA))
            log_debug("domain %s: no memory placement from %s: %s", d->name,
                      d->cg.memory ? d->cg.memory : "its memory cgroup (not found)",
                      strerror(v < 0 ? -v : ENODATA));
        d->mem_error = v < 0 ? v : -ENODATA;
        return;
    }
    free(d->mem);
    d->mem = mem;
    d->nmem = n;
    d->mem_bytes = bytes;
    d->mem_source = v == 2 ? SRC_CGROUP_V2 : SRC_CGROUP_V1;
    d->mem_error = 0;
}

/* The vCPUs' run time and delay; returns the run time they took since the last sample. */
static uint64_t sample_vcpus(struct vpack_agent *a, struct agent_dom *d,
                             const struct vpack_virt_stats *rec, double dt)
{
    uint64_t vsum = 0;
    for (unsigned v = 0; v < rec->nvcpus && v < d->nvcpus; v++) {
        struct agent_thread *t = &d->vcpus[v];
        uint64_t tm = rec->vcpu_time_ns[v], dl = rec->vcpu_delay_ns[v];
        if (t->have_prev && dt > 0 && tm >= t->prev_time) {
            double util = (double)(tm - t->prev_time) / dt;
            double delay = dl >= t->prev_delay ? (double)(dl - t->prev_delay) / dt : 0;
            smooth(a, &t->util, util);
            smooth(a, &t->delay, delay);
            vsum += tm - t->prev_time;
        }
        t->prev_time = tm;
        t->prev_delay = dl;
        t->have_prev = true;
        d->vcpu_online[v] = rec->vcpu_online[v];
    }
    return vsum;
}

/*
 * CPU time of one iothread, in ticks, from the thread QEMU named for it, or
 * else from its cgroup; *src says which. Returns 0 or -errno.
 */
static int iothread_ticks(struct vpack_agent *a, struct agent_dom *d,
                          const struct agent_thread *io, uint64_t *ticks, enum load_source *src)
{
    unsigned found = 0;
    if (io->tid > 0 &&
        vpack_host_threads_ticks(a->cfg.sysfs_root, d->pid, &io->tid, 1, ticks, &found) == 0 &&
        found == 1) {
        *src = SRC_NAME;
        return 0;
    }
    if (io->tid > 0)
        d->rescan_threads = true; /* the thread is gone: the iothread may have a new one */
    *src = d->cg.threads_ver == VPACK_CGROUP_V2 ? SRC_CGROUP_V2 : SRC_CGROUP_V1;
    int r = vpack_cgroup_iothread_ticks(a->cfg.sysfs_root, &d->cg, d->pid, io->id, ticks);
    if (r < 0)
        *src = SRC_NONE;
    return r;
}

/* The iothreads' load; returns the nanoseconds they ran since the last sample. */
static double sample_iothreads(struct vpack_agent *a, struct agent_dom *d, double dt)
{
    double tick_ns = 1e9 / (double)sysconf(_SC_CLK_TCK);
    double iosum = 0;
    if (d->rescan_threads)
        vpack__dom_find_threads(a, d);
    for (unsigned t = 0; t < d->niothreads; t++) {
        struct agent_thread *io = &d->iothreads[t];
        enum load_source src;
        uint64_t ticks;
        if (iothread_ticks(a, d, io, &ticks, &src) < 0) {
            io->have_ticks = false;
            io->source = SRC_NONE;
            continue;
        }
        /* Readings from two sources do not subtract. */
        if (io->have_ticks && src == io->source && dt > 0 && ticks >= io->prev_ticks) {
            double ns = (double)(ticks - io->prev_ticks) * tick_ns;
            smooth(a, &io->util, ns / dt);
            iosum += ns;
        }
        io->prev_ticks = ticks;
        io->have_ticks = true;
        io->source = src;
    }
    return iosum;
}

static void sample_domain(struct vpack_agent *a, struct agent_dom *d,
                          const struct vpack_virt_stats *rec, double dt)
{
    d->seen = true;
    uint64_t vsum = sample_vcpus(a, d, rec, dt);
    double iosum = sample_iothreads(a, d, dt);
    /* The emulator is what is left of cpu.time. */
    if (d->have_prev_cpu && dt > 0 && rec->cpu_time_ns >= d->prev_cpu_time) {
        double all = (double)(rec->cpu_time_ns - d->prev_cpu_time);
        double rest = all - (double)vsum - iosum;
        smooth(a, &d->emulator.util, rest > 0 ? rest / dt : 0);
    }
    d->prev_cpu_time = rec->cpu_time_ns;
    d->have_prev_cpu = true;
    /* Memory moves slowly: read it at once for a new domain, then every 5th sample. */
    if (d->nmem == 0 || a->ctr.samples % 5 == 1)
        sample_memory(a, d);
}

/* One bulk stats call: per-vCPU run time and delay, the rest to the emulator. */
void vpack__sample_domains(struct vpack_agent *a)
{
    struct vpack_virt_stats *recs = NULL;
    unsigned n = 0;
    char *err = NULL;
    uint64_t now = uv_hrtime();
    double dt = a->prev_ns ? (double)(now - a->prev_ns) : 0;

    if (vpack_virt_stats_all(a->virt, &recs, &n, &err) < 0) {
        log_warn("cannot read domain statistics: %s", err ? err : "?");
        free(err);
        return;
    }
    for (unsigned i = 0; i < a->ndoms; i++)
        a->doms[i].seen = false;
    for (unsigned i = 0; i < n; i++) {
        struct agent_dom *d = vpack__dom_add(a, recs[i].uuid);
        if (d)
            sample_domain(a, d, &recs[i], dt);
    }
    vpack_virt_stats_free(recs, n);
    a->prev_ns = now;
}

static int thread_to_sample(const struct agent_thread *t, struct vpack_thread_sample *s)
{
    s->id = t->id;
    s->util = t->util;
    s->delay = t->delay;
    s->cpu = -1;
    if (t->has_pin) {
        s->pin = malloc(sizeof(*s->pin));
        if (!s->pin)
            return -ENOMEM;
        *s->pin = t->pin;
    }
    return 0;
}

/* True for a domain the policy sees: read at least once, not waiting for a refresh. */
static bool in_snapshot(const struct agent_dom *d)
{
    return d->name && !d->refresh;
}

/* Fills one domain of the snapshot from d. Returns 0 or -ENOMEM. */
static int domain_to_sample(const struct agent_dom *d, struct vpack_domain_sample *ds)
{
    unsigned non = 0;
    for (unsigned v = 0; v < d->nvcpus; v++)
        non += d->vcpu_online[v];
    /* A domain vpack cannot read the request of is level 0 (rule: hands off). */
    if (vpack_domain_sample_init(ds, d->name, d->known ? d->level : 0, non, d->niothreads) < 0)
        return -ENOMEM;
    if (d->has_bound) {
        if (!(ds->cpuset = malloc(sizeof(*ds->cpuset))))
            return -ENOMEM;
        *ds->cpuset = d->bound;
    }
    if (d->nmem) {
        if (!(ds->memory = malloc(d->nmem * sizeof(*ds->memory))))
            return -ENOMEM;
        memcpy(ds->memory, d->mem, d->nmem * sizeof(*ds->memory));
        ds->nmemory = d->nmem;
    }
    unsigned j = 0;
    for (unsigned v = 0; v < d->nvcpus; v++)
        if (d->vcpu_online[v] && thread_to_sample(&d->vcpus[v], &ds->vcpus[j++]) < 0)
            return -ENOMEM;
    if (thread_to_sample(&d->emulator, &ds->emulator) < 0)
        return -ENOMEM;
    ds->emulator.id = -1;
    for (unsigned t = 0; t < d->niothreads; t++)
        if (thread_to_sample(&d->iothreads[t], &ds->iothreads[t]) < 0)
            return -ENOMEM;
    return 0;
}

int vpack__sample_snapshot(struct vpack_agent *a, struct vpack_snapshot **out, unsigned **map)
{
    unsigned nd = 0, k = 0;
    for (unsigned i = 0; i < a->ndoms; i++)
        nd += in_snapshot(&a->doms[i]);
    struct vpack_snapshot *s = vpack_snapshot_new(a->ncpu_busy, nd);
    unsigned *m = calloc(nd ? nd : 1, sizeof(*m));
    if (!s || !m)
        goto fail;
    s->interval_ms = a->cfg.interval_ms;
    for (unsigned c = 0; c < a->ncpu_busy; c++)
        s->cpu_busy[c] = a->cpu_busy[c];
    for (unsigned i = 0; i < a->ndoms; i++) {
        if (!in_snapshot(&a->doms[i]))
            continue;
        if (domain_to_sample(&a->doms[i], &s->domains[k]) < 0)
            goto fail;
        m[k++] = i;
    }
    *out = s;
    *map = m;
    return 0;
fail:
    vpack_snapshot_free(s);
    free(m);
    return -ENOMEM;
}
