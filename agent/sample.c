// SPDX-License-Identifier: MIT
/*
 * Observe: per-CPU busy time from /proc/stat, each QEMU thread's run time
 * and run-queue delay from its /proc/PID/task/TID/schedstat (held open; the
 * threads sorted by QEMU's names once per domain start, libvirt's bulk
 * stats only for a domain whose vCPUs have no threads of their own;
 * iothreads not found by name from their cgroups; memory from
 * memory.numa_stat of either cgroup version), smoothed; the snapshot the
 * policy plans on; and whether it moved enough since the last plan to plan
 * again.
 */
#include "agent-priv.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "log.h"

/* Moving average: rises followed fast, falls slowly (vpack_smooth()). */
static void smooth(const struct vpack_agent *a, double *avg, double sample)
{
    vpack_smooth(avg, sample, a->cfg.smoothing_rise, a->cfg.smoothing_fall);
}

/* Grows one per-CPU array from a->ncpu_busy to n entries, the new ones fill. */
static int grow_per_cpu(double **arr, unsigned from, unsigned n, double fill)
{
    double *b = realloc(*arr, n * sizeof(*b));
    if (!b)
        return -ENOMEM;
    *arr = b;
    for (unsigned i = from; i < n; i++)
        b[i] = fill;
    return 0;
}

/* Grows the per-CPU readings to n CPUs (new ones not reported). Returns 0 or -ENOMEM. */
static int grow_cpu_busy(struct vpack_agent *a, unsigned n)
{
    if (n <= a->ncpu_busy)
        return 0;
    if (grow_per_cpu(&a->cpu_busy, a->ncpu_busy, n, -1) < 0 ||
        grow_per_cpu(&a->cpu_busy_now, a->ncpu_busy, n, -1) < 0 ||
        grow_per_cpu(&a->cpu_busy_last, a->ncpu_busy, n, -1) < 0 ||
        grow_per_cpu(&a->cpu_noise, a->ncpu_busy, n, 0) < 0 ||
        grow_per_cpu(&a->cpu_band, a->ncpu_busy, n, a->cfg.steady_band) < 0)
        return -ENOMEM;
    a->ncpu_busy = n;
    return 0;
}

/*
 * The band a light interval allows CPU c (vpack__sample_read()): the steady
 * band, or twice the CPU's own noise between intervals where that is wider
 * (issue 24: with 30 idle TCG guests a CPU's busy share moved more than 0.02
 * between most intervals, and each of those read every domain and planned),
 * at most half the gap between the pack and the spread watermarks: a step of
 * that much on one CPU is still read in the interval it shows in. A full
 * read still comes every VPACK__LIGHT_MAX intervals and plans on the steady
 * band.
 */
static double band_cap(const struct vpack_agent *a)
{
    return (a->cfg.policy.spread_watermark - a->cfg.policy.pack_watermark) / 2;
}

static void update_band(struct vpack_agent *a, unsigned c, double prev_now, double now)
{
    a->cpu_band[c] = vpack_cpu_band_update(&a->cpu_noise[c], prev_now, now, a->cfg.steady_band,
                                           band_cap(a));
}

/* Reads /proc/stat and updates each CPU's smoothed busy fraction. */
void vpack__sample_cpus(struct vpack_agent *a)
{
    struct vpack_cpu_times *t = NULL;
    unsigned n = 0;
    int r = vpack_host_cpu_times(a->cfg.sysfs_root, &a->proc_stat, &t, &n);
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
            a->cpu_busy[next] = a->cpu_busy_now[next] = a->cpu_busy_last[next] = -1;
        next = c + 1;
        double prev_now = a->cpu_busy_now[c];
        a->cpu_busy_last[c] = prev_now;
        a->cpu_busy_now[c] = -1;
        while (k < a->nprev_times && a->prev_times[k].cpu < c)
            k++;
        if (k == a->nprev_times || a->prev_times[k].cpu != c)
            continue;
        double busy = vpack_cpu_times_busy(&a->prev_times[k], &t[i]);
        double *s = &a->cpu_busy[c];
        if (busy < 0)
            continue;
        a->cpu_busy_now[c] = busy;
        update_band(a, (unsigned)c, prev_now, busy);
        if (*s < 0)
            *s = busy;
        else
            smooth(a, s, busy);
    }
    for (; next < (int)a->ncpu_busy; next++)
        a->cpu_busy[next] = a->cpu_busy_now[next] = a->cpu_busy_last[next] = -1;
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

/*
 * t was counted from another source than its threads' schedstat: their
 * last readings are older than what was counted, and the next reading by
 * name is a new start (vpack/counters.h), not growth counted twice.
 */
static void counted_elsewhere(struct agent_thread *t)
{
    for (unsigned i = 0; i < t->ntids; i++)
        t->tids[i].last.seen = false;
    vpack_thread_time_rebase(&t->time);
}

/*
 * The time one reading spans: dt, ns since the domain was last read (0: no
 * earlier reading); last_ns, the part a step may be in when the read
 * follows light intervals or a due read that left it (vpack_gap_rate(): the
 * rest of the gap is taken at the rate before), 0 for the average over dt.
 */
struct gap {
    double dt;
    double last_ns;
};

/*
 * A new reading of a thread's run and wait time (ns, summed over its
 * threads) from src: its util and delay over the gap g. Returns the run time since
 * the last reading of the same source, 0 when there is none. Readings by
 * name were counted thread by thread (read_threads()); the others are
 * counted here, by what they grew.
 */
static uint64_t take_reading(const struct vpack_agent *a, struct agent_thread *t, uint64_t run,
                             uint64_t wait, const struct gap *g, enum load_source src)
{
    uint64_t ran = 0;
    if (src != SRC_NAME) {
        struct vpack_thread_reading last = {t->have_prev && t->source == src, t->prev_time,
                                            t->prev_delay};
        if (!last.seen)
            vpack_thread_time_rebase(&t->time); /* another source: from here on */
        vpack_thread_time_take(&t->time, &last, run, wait, src == SRC_LIBVIRT);
        counted_elsewhere(t);
    }
    if (t->have_prev && t->source == src && g->dt > 0 && run >= t->prev_time) {
        ran = run - t->prev_time;
        double u = vpack_gap_rate((double)ran, t->util, g->dt, g->last_ns);
        double w = wait >= t->prev_delay
                       ? vpack_gap_rate((double)(wait - t->prev_delay), t->delay, g->dt,
                                        g->last_ns)
                       : 0;
        smooth(a, &t->util, u);
        smooth(a, &t->delay, w);
        t->util_now = u;
        t->delay_now = w;
    } else {
        t->util_now = t->delay_now = 0;
    }
    t->prev_time = run;
    t->prev_delay = wait;
    t->have_prev = true;
    t->source = src;
    return ran;
}

/*
 * Sums the schedstat of t's threads. Returns 0; -ESRCH when one of them
 * ended (d->rescan_threads is set: the threads are sorted again next
 * interval); -ENOENT when t has no thread; -EBADF when a file of it is not
 * open; or -errno.
 */
static int read_threads(struct agent_dom *d, struct agent_thread *t, uint64_t *run,
                        uint64_t *wait)
{
    *run = *wait = 0;
    if (!t->ntids)
        return -ENOENT;
    for (unsigned i = 0; i < t->ntids; i++) {
        struct vpack_schedstat st;
        /* Not opened: it ended before it was opened (sorted again), or (logged) no file. */
        if (t->tids[i].fd < 0)
            return d->rescan_threads ? -ESRCH : -EBADF;
        int r = vpack_host_schedstat_read(t->tids[i].fd, &st);
        if (r == -ESRCH || r == -ENOENT) {
            d->rescan_threads = true;
            return -ESRCH;
        }
        if (r < 0)
            return r;
        vpack_thread_time_take(&t->time, &t->tids[i].last, st.run_ns, st.wait_ns, true);
        *run += st.run_ns;
        *wait += st.wait_ns;
    }
    t->time.rebase = false; /* every thread has a last reading now */
    return 0;
}

/* One thread's counters up to now, if it is read by name (vpack__sample_counters()). */
static void count_now(struct agent_dom *d, struct agent_thread *t)
{
    uint64_t run, wait;
    if (t->source == SRC_NAME)
        (void)read_threads(d, t, &run, &wait); /* a thread gone: sorted again next interval */
}

void vpack__sample_counters(struct vpack_agent *a)
{
    for (unsigned i = 0; i < a->ndoms; i++) {
        struct agent_dom *d = &a->doms[i];
        if (!d->name || d->stats_libvirt || d->rescan_threads)
            continue;
        for (unsigned v = 0; v < d->nvcpus; v++)
            if (d->vcpu_online[v])
                count_now(d, &d->vcpus[v]);
        count_now(d, &d->emulator);
        for (unsigned t = 0; t < d->niothreads; t++)
            count_now(d, &d->iothreads[t]);
    }
}

/*
 * One thread (or the emulator's set) from its schedstat files. A thread that
 * ended is sorted again next interval (read_threads()); a file that cannot
 * be read for another reason (a text vpackd cannot parse, an I/O error, a
 * file not opened) hands the domain to libvirt's stats from this interval
 * on, until its threads are sorted again: its load is never left stale.
 */
static void sample_threads(struct vpack_agent *a, struct agent_dom *d, struct agent_thread *t,
                           const struct gap *g)
{
    uint64_t run, wait;
    int r = read_threads(d, t, &run, &wait);
    if (r == 0) {
        take_reading(a, t, run, wait, g, SRC_NAME);
        return;
    }
    t->have_prev = false;
    t->source = SRC_NONE;
    t->util_now = t->delay_now = 0;
    if (r != -ESRCH && !d->stats_libvirt) {
        log_warn("domain %s: cannot read the schedstat of its %s %d: %s; reading it through "
                 "libvirt", d->name, t->id < 0 ? "emulator" : "vCPU", t->id < 0 ? 0 : t->id,
                 strerror(-r));
        d->stats_libvirt = true;
    }
}

/* The vCPUs' run time and delay from libvirt's stats; returns the run time since the last. */
static uint64_t sample_vcpus_libvirt(struct vpack_agent *a, struct agent_dom *d,
                                     const struct vpack_virt_stats *rec, const struct gap *g)
{
    uint64_t vsum = 0;
    for (unsigned v = 0; v < rec->nvcpus && v < d->nvcpus; v++) {
        vsum += take_reading(a, &d->vcpus[v], rec->vcpu_time_ns[v], rec->vcpu_delay_ns[v], g,
                             SRC_LIBVIRT);
        d->vcpu_online[v] = rec->vcpu_online[v];
    }
    return vsum;
}

/* A clock tick of /proc's CPU times (USER_HZ), in ns. */
static double clock_tick_ns(void)
{
    return 1e9 / (double)sysconf(_SC_CLK_TCK);
}

/* An iothread not found by name: its cgroup's threads (ticks, no run-queue delay). */
static void sample_iothread_cgroup(struct vpack_agent *a, struct agent_dom *d,
                                   struct agent_thread *io, const struct gap *g)
{
    uint64_t ticks;
    double tick_ns = clock_tick_ns();
    enum load_source src = d->cg.threads_ver == VPACK_CGROUP_V2 ? SRC_CGROUP_V2 : SRC_CGROUP_V1;
    if (vpack_cgroup_iothread_ticks(a->cfg.sysfs_root, &d->cg, d->pid, io->id, &ticks) < 0) {
        io->have_prev = false;
        io->source = SRC_NONE;
        io->util_now = io->delay_now = 0;
        return;
    }
    take_reading(a, io, (uint64_t)((double)ticks * tick_ns), 0, g, src);
}

/* The iothreads' load; returns the nanoseconds they ran since the last sample. */
static uint64_t sample_iothreads(struct vpack_agent *a, struct agent_dom *d, const struct gap *g)
{
    uint64_t iosum = 0;
    for (unsigned t = 0; t < d->niothreads; t++) {
        struct agent_thread *io = &d->iothreads[t];
        uint64_t before = io->prev_time, run, wait;
        bool had = io->have_prev;
        if (io->ntids == 1 && read_threads(d, io, &run, &wait) == 0)
            take_reading(a, io, run, wait, g, SRC_NAME);
        else
            sample_iothread_cgroup(a, d, io, g);
        if (had && io->have_prev && io->prev_time >= before)
            iosum += io->prev_time - before;
    }
    return iosum;
}

/*
 * A domain read through libvirt's bulk stats (a vCPU without a thread of its
 * own): the vCPUs from the stats, the emulator as what is left of cpu.time.
 */
static void sample_domain_libvirt(struct vpack_agent *a, struct agent_dom *d,
                                  const struct vpack_virt_stats *rec, const struct gap *g)
{
    uint64_t vsum = sample_vcpus_libvirt(a, d, rec, g);
    uint64_t iosum = sample_iothreads(a, d, g);
    /* prev_cpu_time is the last interval's only if libvirt read that one too. */
    if (d->have_prev_cpu && d->emulator.source == SRC_REMAINDER && g->dt > 0 &&
        rec->cpu_time_ns >= d->prev_cpu_time) {
        double rest = (double)(rec->cpu_time_ns - d->prev_cpu_time) - (double)vsum - (double)iosum;
        d->emulator.util_now =
            rest > 0 ? vpack_gap_rate(rest, d->emulator.util, g->dt, g->last_ns) : 0;
        if (rest > 0)
            vpack_thread_time_add(&d->emulator.time, (uint64_t)rest, 0, false);
        counted_elsewhere(&d->emulator);
        smooth(a, &d->emulator.util, d->emulator.util_now);
    } else {
        d->emulator.util_now = 0;
    }
    d->emulator.source = SRC_REMAINDER;
    d->prev_cpu_time = rec->cpu_time_ns;
    d->have_prev_cpu = true;
}

/* A domain from its threads' schedstat files: no libvirt call. */
static void sample_domain_threads(struct vpack_agent *a, struct agent_dom *d, const struct gap *g)
{
    for (unsigned v = 0; v < d->nvcpus; v++)
        if (d->vcpu_online[v])
            sample_threads(a, d, &d->vcpus[v], g);
    sample_threads(a, d, &d->emulator, g);
    sample_iothreads(a, d, g);
    d->have_prev_cpu = true; /* read at least once (views.c: what could not be read) */
}

/*
 * Memory moves slowly (vpack never migrates it; the kernel's balancing
 * takes minutes): read it at once for a new domain, then every 120th
 * sample. The kernel sums memory.numa_stat over the group's pages per node
 * on every read: the costliest read of a steady interval (issue 24, perf of
 * vpackd with 30 idle guests: 14 % of its CPU time when it came every 30th
 * sample, 45 us a domain).
 */
#define MEMORY_EVERY 120
static void sample_domain_memory(struct vpack_agent *a, struct agent_dom *d, bool due)
{
    if (d->nmem == 0 || due)
        sample_memory(a, d);
}

/* The domains libvirt's stats read: one bulk call for all, made only when one needs it. */
static void sample_libvirt(struct vpack_agent *a, const struct gap *g)
{
    struct vpack_virt_stats *recs = NULL;
    unsigned n = 0;
    char *err = NULL;
    if (vpack_virt_stats_all(a->virt, &recs, &n, &err) < 0) {
        log_warn("cannot read domain statistics: %s", err ? err : "?");
        free(err);
        return;
    }
    for (unsigned i = 0; i < n; i++) {
        struct agent_dom *d = vpack__dom_find(a, recs[i].uuid);
        if (d && d->stats_libvirt && d->name)
            sample_domain_libvirt(a, d, &recs[i], g);
    }
    vpack_virt_stats_free(recs, n);
}

/* A vCPU came or went since the live XML was read: a thread of its own appeared or ended. */
static bool vcpus_changed(const struct agent_dom *d)
{
    bool named = false, differ = false;
    for (unsigned v = 0; v < d->nvcpus; v++) {
        named |= d->vcpus[v].ntids > 0;
        differ |= (d->vcpus[v].ntids > 0) != d->vcpu_online[v];
    }
    return named && differ;
}

/*
 * QEMU's thread count; with usage_too, and its CPU time in *usage where
 * /proc/PID/stat is held (one pread for both, but the kernel writes the
 * whole text); else the count from the task directory's link count (an
 * fstat). -1 when neither tells (-ENOTSUP: a process gone, or a tree that
 * counts no links): that asks for nothing, a thread gone shows as ESRCH on
 * its file.
 */
static int thread_count(const struct agent_dom *d, bool usage_too, struct vpack_proc_usage *usage,
                        bool *have)
{
    *have = usage_too && d->stat_fd >= 0 && vpack_host_proc_stat_read(d->stat_fd, usage) == 0;
    if (*have)
        return usage->nthreads > INT32_MAX ? INT32_MAX : (int)usage->nthreads;
    return d->task_fd >= 0 ? vpack_host_task_count(d->task_fd) : -1;
}

/*
 * Each domain's threads from their schedstat files, sorted again where one
 * ended or QEMU started one; libvirt's bulk stats only for domains with a
 * vCPU that has no thread of its own. A due read leaves a domain's threads
 * unread while its process's CPU time says nothing changed (vpack_usage_watch).
 */
void vpack__sample_domains(struct vpack_agent *a, double last_ns, bool due)
{
    uint64_t now = uv_hrtime();
    /* Since the domains were last read: one interval, or a few light ones more. */
    double dt = a->prev_ns ? (double)(now - a->prev_ns) : 0;
    double tick_ns = clock_tick_ns();
    bool libvirt = false, mem_due = a->ctr.samples - a->mem_sample >= MEMORY_EVERY;
    uint64_t unread = a->ctr.domains_unread;
    if (mem_due)
        a->mem_sample = a->ctr.samples;

    for (unsigned i = 0; i < a->ndoms; i++) {
        struct agent_dom *d = &a->doms[i];
        if (!d->name)
            continue; /* never read from libvirt yet: its threads are not known */
        /* The CPU time is read at due reads (and once to start from): the reference is
         * the rate between two of them, ten intervals or more apart, where a tick's
         * rounding weighs little; the reads a CPU asks for take the cheaper count. */
        struct vpack_proc_usage u = {0};
        bool have_u = false;
        int count = d->rescan_threads
                        ? -1
                        : thread_count(d, due || !d->usage.have_last, &u, &have_u);
        if (count >= 0 && count != d->nthreads)
            d->rescan_threads = true;
        uint64_t ticks = u.utime + u.stime;
        if (due && have_u && !d->rescan_threads && !d->stats_libvirt && d->read_ns &&
            vpack_usage_unchanged(&d->usage, ticks, now, tick_ns, a->cfg.steady_band,
                                  VPACK__FULL_READ_MAX_NS)) {
            vpack_usage_note(&d->usage, ticks, now, tick_ns, false);
            a->ctr.domains_unread++;
            sample_domain_memory(a, d, mem_due);
            continue;
        }
        if (d->rescan_threads) {
            vpack__dom_find_threads(a, d); /* a new watch: the reading above was the old one's */
            have_u = false;
            if (vcpus_changed(d)) {
                d->refresh = true; /* the next cycle reads its live XML */
                continue;
            }
        }
        /* Since this domain's threads were last read: a due read may have left them. */
        if (!d->stats_libvirt) {
            struct gap g = {d->read_ns ? (double)(now - d->read_ns) : 0,
                            vpack_usage_last(&d->usage, d->read_ns, last_ns, now)};
            sample_domain_threads(a, d, &g);
        }
        if (have_u)
            vpack_usage_note(&d->usage, ticks, now, tick_ns, true);
        d->read_ns = now;
        libvirt |= d->stats_libvirt; /* also a domain whose files failed just now */
        sample_domain_memory(a, d, mem_due);
    }
    if (libvirt)
        sample_libvirt(a, &(struct gap){dt, last_ns});
    a->prev_ns = now;
    if (due)
        log_debug("due read: %" PRIu64 " of %u domains left unread (CPU time as at their last "
                  "read)", a->ctr.domains_unread - unread, a->ndoms);
}

/*
 * True when something asks for a plan whatever the load: a replan, a
 * listing, a hotplug, no plan yet, a band of 0, the policy counting down, a
 * domain to refresh or whose request is due to be written again, a pin that
 * failed or a mask not known since a hotplug.
 */
static bool plan_pending(const struct vpack_agent *a)
{
    if (a->replan || a->need_list || a->hotplug_pending || !a->plan || !a->snap ||
        a->cfg.steady_band <= 0 || !vpack_policy_state_settled(a->pstate, &a->cfg.policy))
        return true;
    /* A pin that failed, or a mask not known since a hotplug: act again. */
    for (unsigned i = 0; i < a->ndoms; i++) {
        const struct agent_dom *d = &a->doms[i];
        if (d->refresh || (d->mark_failed && d->level >= 1 && vpack__dom_mark_due(a, d)))
            return true;
        if (!d->managed)
            continue;
        for (unsigned v = 0; v < d->nvcpus; v++)
            if (d->vcpu_online[v] && !d->vcpus[v].applied_known)
                return true;
        if (!d->emulator.applied_known)
            return true;
        for (unsigned t = 0; t < d->niothreads; t++)
            if (!d->iothreads[t].applied_known)
                return true;
    }
    return false;
}

bool vpack__sample_steady(const struct vpack_agent *a, const struct vpack_snapshot *snap)
{
    return !plan_pending(a) && vpack_snapshot_within(a->snap, snap, a->cfg.steady_band);
}

/*
 * The domains are read at least every VPACK__LIGHT_MAX intervals (threads
 * started, memory, a load that moved from one guest to another on the same
 * CPU) and in every interval where a CPU's load left the band: a load step
 * on any guest thread is planned in the interval it shows in.
 */
enum vpack__read vpack__sample_read(const struct vpack_agent *a)
{
    if (plan_pending(a))
        return READ_MOVED;
    bool light = a->light_streak + 1 < VPACK__LIGHT_MAX;
    if (vpack_snapshot_cpus_within_each(a->snap, a->cpu_busy, a->ncpu_busy, a->cpu_band))
        return light ? READ_LIGHT : READ_DUE;
    /* A move beyond the cap of every band is read at once. */
    if (vpack_snapshot_cpus_moved(a->snap, a->cpu_busy_now, a->cpu_busy_last, a->ncpu_busy,
                                  a->cpu_band, band_cap(a)))
        return READ_MOVED;
    return light ? READ_WAIT : READ_DUE;
}

static int thread_to_sample(const struct agent_thread *t, struct vpack_thread_sample *s)
{
    s->id = t->id;
    s->util = t->util;
    s->delay = t->delay;
    s->util_now = t->util_now;
    s->delay_now = t->delay_now;
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
static int domain_to_sample(const struct vpack_agent *a, const struct agent_dom *d,
                            struct vpack_domain_sample *ds)
{
    unsigned non = 0;
    for (unsigned v = 0; v < d->nvcpus; v++)
        non += d->vcpu_online[v];
    /* A domain vpack cannot read the request of is level 0 (rule: hands off). */
    if (vpack_domain_sample_init(ds, d->name, d->known ? vpack__dom_plan_level(a, d) : 0, non,
                                 d->niothreads) < 0)
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
    if (vpack_snapshot_want_now(s) < 0)
        goto fail;
    for (unsigned c = 0; c < a->ncpu_busy; c++) {
        s->cpu_busy[c] = a->cpu_busy[c];
        s->cpu_busy_now[c] = a->cpu_busy_now[c];
    }
    for (unsigned i = 0; i < a->ndoms; i++) {
        if (!in_snapshot(&a->doms[i]))
            continue;
        if (domain_to_sample(a, &a->doms[i], &s->domains[k]) < 0)
            goto fail;
        m[k++] = i;
    }
    /* After unread intervals a thread's reading puts what cannot be dated into the last one. */
    double cut = vpack_snapshot_bound_now(s);
    if (cut > 0)
        log_debug("the threads' last interval read %.2f CPUs more than /proc/stat showed: cut",
                  cut);
    *out = s;
    *map = m;
    return 0;
fail:
    vpack_snapshot_free(s);
    free(m);
    return -ENOMEM;
}
