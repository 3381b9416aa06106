// SPDX-License-Identifier: MIT
/*
 * The agent's pipeline, after irqbalance's scan(): observe (/proc/stat and
 * one libvirt bulk stats call), plan (the pure policy), act (pin what
 * differs, LIVE only). Everything runs on the one libuv loop; libvirt's
 * events only mark domains for a refresh that the next cycle does.
 */
#include "agent.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "vpack-build.h"
#include "host.h"
#include "log.h"
#include "virt.h"
#include "vpack/domxml.h"
#include "vpack/procstat.h"
#include "vpack/snapshot.h"
#include "vpack/topology.h"

struct agent_thread {
    int id;
    bool has_pin;          /* the guest asked for this pin */
    vpack_cpuset pin;
    bool applied_known;    /* applied holds the live mask */
    vpack_cpuset applied;
    bool have_prev;
    uint64_t prev_time, prev_delay;
    double util, delay;    /* smoothed */
    uint64_t prev_ticks;   /* iothreads: CPU time of the group's tasks, in ticks */
    bool have_ticks;
};

struct agent_dom {
    char uuid[37];
    char *name;
    int level;             /* from the live metadata; -1 when absent */
    bool persistent;
    bool known;            /* requested pins and bound are known */
    bool has_bound;
    vpack_cpuset bound;    /* <vcpu cpuset> as the guest asked */
    unsigned nvcpus;       /* vcpu maximum */
    struct agent_thread *vcpus;
    bool *vcpu_online;
    struct agent_thread emulator;
    unsigned niothreads;
    struct agent_thread *iothreads;
    bool have_prev_cpu;
    uint64_t prev_cpu_time;
    bool refresh;          /* re-read XML and live pins at the next cycle */
    bool managed;          /* vpack restricted it at some point */
    bool seen;             /* in the last stats call */
    char *reason;          /* the policy's last word on it */
    int npackages;
    int packages[8];
    char *memcg;           /* its cgroup v1 memory group, for memory.numa_stat */
    char *cpusetcg;        /* its cgroup v1 cpuset group (iothreadN/ below it) */
    int pid;               /* QEMU's pid */
    unsigned nmem;
    struct vpack_mem_share mem[16]; /* share of its memory per NUMA node */
};

/* Pin operations by why and how they ended, for the metrics. */
enum pin_why { PIN_PLAN, PIN_HOTPLUG, PIN_STOP, PIN_NWHY };
enum pin_result { RES_OK, RES_GONE, RES_INVALID, RES_TRANSIENT, RES_ERROR, RES_N };
static const char *const pin_why_names[PIN_NWHY] = {"plan", "hotplug", "stop"};
static const char *const pin_result_names[RES_N] = {"ok", "domain_gone", "invalid_cpus",
                                                   "transient", "error"};

/* Upper bounds in seconds of the duration histograms' buckets. */
static const double hist_bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                     0.01,   0.025,   0.05,   0.1,   0.25,   1.0};
#define NBUCKETS (sizeof(hist_bounds) / sizeof(hist_bounds[0]))
struct histogram {
    uint64_t buckets[NBUCKETS]; /* cumulative */
    uint64_t count;
    double sum;
};

static void hist_observe(struct histogram *h, double seconds)
{
    for (size_t i = 0; i < NBUCKETS; i++)
        if (seconds <= hist_bounds[i])
            h->buckets[i]++;
    h->count++;
    h->sum += seconds;
}

struct vpack_agent {
    uv_loop_t *loop;
    struct vpack_config cfg;
    struct vpack_topology *topo;
    struct vpack_policy_state *pstate;
    struct vpack_virt *virt;
    struct vpack_hotplug *hotplug;
    uv_timer_t tick;
    vpack_cpuset online;
    struct vpack_cpu_times *prev_times;
    unsigned nprev_times;
    double *cpu_busy;      /* smoothed, by CPU id */
    unsigned ncpu_busy;
    uint64_t prev_ns;      /* time of the last stats sample */
    struct agent_dom *doms;
    unsigned ndoms;
    bool need_list;        /* list running domains at the next cycle */
    bool hotplug_pending;  /* a CPU came or went: repair, re-read, re-pin */
    struct vpack_plan *plan;
    struct vpack_snapshot *snap;
    struct vpack_agent_counters ctr;
    uint64_t pin_ops[PIN_NWHY][RES_N];
    uint64_t rebalances[VPACK_WHY_N];
    struct histogram plan_hist, cycle_hist;
    bool stopping;
    char *pin_gate;        /* VPACK_TEST_PIN_GATE: test-only fault injection */
};

static void dom_free(struct agent_dom *d)
{
    free(d->name);
    free(d->vcpus);
    free(d->vcpu_online);
    free(d->iothreads);
    free(d->reason);
    free(d->memcg);
    free(d->cpusetcg);
    memset(d, 0, sizeof(*d));
}

static struct agent_dom *dom_find(struct vpack_agent *a, const char *uuid)
{
    for (unsigned i = 0; i < a->ndoms; i++)
        if (!strcmp(a->doms[i].uuid, uuid))
            return &a->doms[i];
    return NULL;
}

static bool load_record(struct vpack_agent *a, struct agent_dom *d);

static struct agent_dom *dom_add(struct vpack_agent *a, const char *uuid)
{
    struct agent_dom *d = dom_find(a, uuid);
    if (d)
        return d;
    struct agent_dom *n = realloc(a->doms, (a->ndoms + 1) * sizeof(*n));
    if (!n)
        return NULL;
    a->doms = n;
    d = &a->doms[a->ndoms++];
    memset(d, 0, sizeof(*d));
    snprintf(d->uuid, sizeof(d->uuid), "%s", uuid);
    d->level = -1;
    d->refresh = true;
    d->emulator.id = -1;
    return d;
}

static void dom_remove(struct vpack_agent *a, const char *uuid)
{
    for (unsigned i = 0; i < a->ndoms; i++) {
        if (strcmp(a->doms[i].uuid, uuid))
            continue;
        log_info("domain %s stopped: forgotten", a->doms[i].name ? a->doms[i].name : uuid);
        dom_free(&a->doms[i]);
        memmove(&a->doms[i], &a->doms[i + 1], (a->ndoms - i - 1) * sizeof(*a->doms));
        a->ndoms--;
        return;
    }
}

/* The mask a thread has when vpack does not restrict it. */
static void free_mask(const struct vpack_agent *a, const struct agent_dom *d,
                      const struct agent_thread *t, vpack_cpuset *out)
{
    if (t->has_pin)
        *out = t->pin;
    else if (d->has_bound)
        *out = d->bound;
    else
        *out = a->online;
    vpack_cpuset_and(out, out, &a->online);
}

static int effective_level(const struct vpack_agent *a, const struct agent_dom *d)
{
    return d->level >= 0 ? d->level : a->cfg.policy.default_level;
}

/* The cgroup v1 group of a process for controller ("/machine/qemu-1-a.libvirt-qemu"), or NULL. */
static char *process_cgroup(const struct vpack_agent *a, int pid, const char *controller)
{
    char path[64], *buf = NULL, *res;
    if (pid <= 0)
        return NULL;
    snprintf(path, sizeof(path), "proc/%d/cgroup", pid);
    if (vpack_host_read_file(a->cfg.sysfs_root, path, 1 << 16, &buf, NULL) < 0)
        return NULL;
    res = vpack_proc_cgroup_parse(buf, strlen(buf), controller);
    free(buf);
    return res;
}

/*
 * CPU time of one iothread, in clock ticks: the tasks of its cgroup v1
 * group (libvirt puts each iothread in iothreadN/), read from
 * /proc/PID/task/TID/stat. libvirt's stats have no iothread CPU time.
 */
static int iothread_ticks(const struct vpack_agent *a, const struct agent_dom *d, int id,
                          uint64_t *ticks)
{
    char path[4096], *buf = NULL, *save = NULL;
    int r;
    if (!d->cpusetcg || d->pid <= 0)
        return -ENOENT;
    snprintf(path, sizeof(path), "sys/fs/cgroup/cpuset%s/iothread%d/tasks", d->cpusetcg, id);
    if ((r = vpack_host_read_file(a->cfg.sysfs_root, path, 1 << 16, &buf, NULL)) < 0)
        return r;
    *ticks = 0;
    for (char *tid = strtok_r(buf, "\n", &save); tid; tid = strtok_r(NULL, "\n", &save)) {
        char *st = NULL;
        size_t len;
        uint64_t t;
        snprintf(path, sizeof(path), "proc/%d/task/%s/stat", d->pid, tid);
        if (vpack_host_read_file(a->cfg.sysfs_root, path, 4096, &st, &len) == 0 &&
            vpack_task_stat_parse(st, len, &t) == 0)
            *ticks += t;
        free(st);
    }
    free(buf);
    return 0;
}

/* Where the domain's memory is (memory.numa_stat); read every few samples. */
static void sample_memory(struct vpack_agent *a, struct agent_dom *d)
{
    char path[4096], *buf = NULL;
    size_t len;
    if (!d->memcg)
        return;
    snprintf(path, sizeof(path), "sys/fs/cgroup/memory%s/memory.numa_stat", d->memcg);
    if (vpack_host_read_file(a->cfg.sysfs_root, path, 1 << 20, &buf, &len) < 0)
        return;
    if (vpack_numastat_parse(buf, len, d->mem, 16, &d->nmem) < 0)
        d->nmem = 0;
    free(buf);
}

/* Re-reads what the guest asked for (inactive XML) and what is applied (live pins). */
static int dom_refresh(struct vpack_agent *a, struct agent_dom *d)
{
    struct vpack_virt_domain info = {0};
    struct vpack_virt_pins pins = {0};
    struct vpack_domxml *live = NULL, *req = NULL;
    char *err = NULL, *perr = NULL;
    int r;

    r = vpack_virt_domain_get(a->virt, d->uuid, &info, &err);
    if (r < 0) {
        if (r != -ENOENT)
            log_warn("domain %s: cannot read its definition: %s", d->uuid, err ? err : "?");
        free(err);
        return r;
    }
    r = vpack_domxml_parse(info.live_xml, strlen(info.live_xml), &live, &perr);
    if (r < 0) {
        log_warn("domain %s: cannot read its live XML: %s", info.name, perr ? perr : "?");
        goto cleanup;
    }
    if (info.inactive_xml) {
        r = vpack_domxml_parse(info.inactive_xml, strlen(info.inactive_xml), &req, &perr);
        if (r < 0) {
            log_warn("domain %s: cannot read its persistent XML: %s", info.name,
                     perr ? perr : "?");
            goto cleanup;
        }
    }
    r = vpack_virt_pins_get(a->virt, d->uuid, &pins, &err);
    if (r < 0) {
        log_warn("domain %s: cannot read its live pins: %s", info.name, err ? err : "?");
        goto cleanup;
    }

    free(d->name);
    d->name = strdup(info.name);
    if (!d->name) {
        r = -ENOMEM;
        goto cleanup;
    }
    int old_level = d->level;
    d->level = live->level;
    d->persistent = info.persistent;
    if (d->known && old_level != d->level)
        log_info("domain %s: power policy level %d -> %d", d->name, old_level, d->level);

    /* Threads: size from the live definition, requests from the persistent one. */
    unsigned nv = live->vcpus;
    if (nv != d->nvcpus) {
        struct agent_thread *t = calloc(nv ? nv : 1, sizeof(*t));
        bool *on = calloc(nv ? nv : 1, sizeof(*on));
        if (!t || !on) {
            free(t);
            free(on);
            r = -ENOMEM;
            goto cleanup;
        }
        free(d->vcpus);
        free(d->vcpu_online);
        d->vcpus = t;
        d->vcpu_online = on;
        d->nvcpus = nv;
    }
    for (unsigned i = 0; i < nv; i++) {
        d->vcpus[i].id = (int)i;
        d->vcpu_online[i] = vpack_cpuset_isset(&live->online, i);
    }
    if (live->niothreads != d->niothreads) {
        struct agent_thread *t = calloc(live->niothreads ? live->niothreads : 1, sizeof(*t));
        if (!t) {
            r = -ENOMEM;
            goto cleanup;
        }
        free(d->iothreads);
        d->iothreads = t;
        d->niothreads = (unsigned)live->niothreads;
    }
    for (unsigned i = 0; i < d->niothreads; i++)
        d->iothreads[i].id = (int)live->iothreads[i];

    /* Transient domains: no persistent record yet, so vpack keeps its hands off. */
    if (req) {
        d->has_bound = req->has_cpuset;
        if (req->has_cpuset)
            d->bound = req->cpuset;
        for (unsigned i = 0; i < d->nvcpus; i++)
            d->vcpus[i].has_pin = false;
        for (size_t i = 0; i < req->nvcpupin; i++)
            if (req->vcpupin[i].vcpu < d->nvcpus) {
                d->vcpus[req->vcpupin[i].vcpu].has_pin = true;
                d->vcpus[req->vcpupin[i].vcpu].pin = req->vcpupin[i].cpus;
            }
        d->emulator.has_pin = req->has_emulatorpin;
        if (req->has_emulatorpin)
            d->emulator.pin = req->emulatorpin;
        for (unsigned i = 0; i < d->niothreads; i++) {
            d->iothreads[i].has_pin = false;
            for (size_t k = 0; k < req->niothreadpin; k++)
                if ((int)req->iothreadpin[k].iothread == d->iothreads[i].id) {
                    d->iothreads[i].has_pin = true;
                    d->iothreads[i].pin = req->iothreadpin[k].cpus;
                }
        }
        d->known = true;
    } else {
        d->known = load_record(a, d);
    }

    /* What is applied now, as libvirt reports it. */
    for (unsigned i = 0; i < d->nvcpus; i++) {
        d->vcpus[i].applied_known = i < pins.nvcpus;
        if (i < pins.nvcpus)
            d->vcpus[i].applied = pins.vcpus[i];
    }
    d->emulator.applied = pins.emulator;
    d->emulator.applied_known = true;
    for (unsigned i = 0; i < d->niothreads; i++) {
        d->iothreads[i].applied_known = false;
        for (unsigned k = 0; k < pins.niothreads; k++)
            if (pins.iothread_ids[k] == d->iothreads[i].id) {
                d->iothreads[i].applied = pins.iothreads[k];
                d->iothreads[i].applied_known = true;
            }
    }
    free(d->memcg);
    d->memcg = process_cgroup(a, info.pid, "memory");
    free(d->cpusetcg);
    /* QEMU's main thread sits in the domain's emulator/ group. */
    d->cpusetcg = process_cgroup(a, info.pid, "cpuset");
    if (d->cpusetcg) {
        char *slash = strrchr(d->cpusetcg, '/');
        if (slash && !strcmp(slash, "/emulator"))
            *slash = '\0';
    }
    d->pid = info.pid;
    d->refresh = false;
    r = 0;
    log_debug("domain %s: refreshed (level %d, %u vCPUs, %u iothreads%s)", d->name, d->level,
              d->nvcpus, d->niothreads, d->known ? "" : ", transient: unmanaged");

cleanup:
    free(err);
    free(perr);
    vpack_domxml_free(live);
    vpack_domxml_free(req);
    vpack_virt_pins_clear(&pins);
    vpack_virt_domain_clear(&info);
    return r;
}

static void list_running(struct vpack_agent *a)
{
    char **uuids = NULL, *err = NULL;
    unsigned n = 0;
    if (vpack_virt_list_running(a->virt, &uuids, &n, &err) < 0) {
        log_warn("cannot list running domains: %s", err ? err : "?");
        free(err);
        return;
    }
    /* Forget domains that stopped while we were not looking. */
    for (unsigned i = a->ndoms; i-- > 0;) {
        bool found = false;
        for (unsigned k = 0; k < n && !found; k++)
            found = !strcmp(uuids[k], a->doms[i].uuid);
        if (!found)
            dom_remove(a, a->doms[i].uuid);
    }
    for (unsigned k = 0; k < n; k++) {
        struct agent_dom *d = dom_add(a, uuids[k]);
        if (d)
            d->refresh = true;
        free(uuids[k]);
    }
    free(uuids);
    a->need_list = false;
}

static int load_topology(struct vpack_agent *a, char **errmsg)
{
    struct vpack_topology *t = NULL;
    vpack_cpuset online;
    int r = vpack_host_online_cpus(a->cfg.sysfs_root, &online);
    if (r < 0) {
        if (asprintf(errmsg, "cannot read the online CPUs: %s", strerror(-r)) < 0)
            *errmsg = NULL;
        return r;
    }
    r = vpack_topology_load(a->cfg.topology, a->cfg.has_reserved ? &a->cfg.reserved_cpus : NULL,
                            &online, &t, errmsg);
    if (r < 0)
        return r;
    vpack_topology_free(a->topo);
    a->topo = t;
    a->online = online;
    return 0;
}

/* Moving average: rises followed fast, falls slowly. */
static void smooth(const struct vpack_agent *a, double *avg, double sample)
{
    *avg += (sample > *avg ? a->cfg.smoothing_rise : a->cfg.smoothing_fall) * (sample - *avg);
}

/* Reads /proc/stat and updates each CPU's smoothed busy fraction. */
static void sample_cpus(struct vpack_agent *a)
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
    if ((unsigned)(maxcpu + 1) > a->ncpu_busy) {
        double *b = realloc(a->cpu_busy, (size_t)(maxcpu + 1) * sizeof(*b));
        if (!b) {
            free(t);
            return;
        }
        for (unsigned i = a->ncpu_busy; i < (unsigned)(maxcpu + 1); i++)
            b[i] = -1;
        a->cpu_busy = b;
        a->ncpu_busy = (unsigned)(maxcpu + 1);
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


/* One bulk stats call: per-vCPU run time and delay, the rest to the emulator. */
static void sample_domains(struct vpack_agent *a)
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
        struct agent_dom *d = dom_find(a, recs[i].uuid);
        if (!d) {
            d = dom_add(a, recs[i].uuid);
            if (!d)
                continue;
        }
        d->seen = true;
        uint64_t vsum = 0;
        for (unsigned v = 0; v < recs[i].nvcpus && v < d->nvcpus; v++) {
            struct agent_thread *t = &d->vcpus[v];
            uint64_t tm = recs[i].vcpu_time_ns[v], dl = recs[i].vcpu_delay_ns[v];
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
            d->vcpu_online[v] = recs[i].vcpu_online[v];
        }
        /* iothreads from their cgroups; the emulator is what is left of cpu.time. */
        double tick_ns = 1e9 / (double)sysconf(_SC_CLK_TCK);
        double iosum = 0;
        for (unsigned t = 0; t < d->niothreads; t++) {
            struct agent_thread *io = &d->iothreads[t];
            uint64_t ticks;
            if (iothread_ticks(a, d, io->id, &ticks) < 0) {
                io->have_ticks = false;
                continue;
            }
            if (io->have_ticks && dt > 0 && ticks >= io->prev_ticks) {
                double ns = (double)(ticks - io->prev_ticks) * tick_ns;
                smooth(a, &io->util, ns / dt);
                iosum += ns;
            }
            io->prev_ticks = ticks;
            io->have_ticks = true;
        }
        if (d->have_prev_cpu && dt > 0 && recs[i].cpu_time_ns >= d->prev_cpu_time) {
            double all = (double)(recs[i].cpu_time_ns - d->prev_cpu_time);
            double rest = all - (double)vsum - iosum;
            smooth(a, &d->emulator.util, rest > 0 ? rest / dt : 0);
        }
        d->prev_cpu_time = recs[i].cpu_time_ns;
        d->have_prev_cpu = true;
        /* Memory moves slowly: read it at once for a new domain, then every 5th sample. */
        if (d->nmem == 0 || a->ctr.samples % 5 == 1)
            sample_memory(a, d);
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

/* The policy's input: one snapshot of every running domain vpack knows. */
static int build_snapshot(struct vpack_agent *a, struct vpack_snapshot **out, unsigned **map)
{
    unsigned nd = 0;
    for (unsigned i = 0; i < a->ndoms; i++)
        if (a->doms[i].name && !a->doms[i].refresh)
            nd++;
    struct vpack_snapshot *s = vpack_snapshot_new(a->ncpu_busy, nd);
    unsigned *m = calloc(nd ? nd : 1, sizeof(*m));
    if (!s || !m)
        goto fail;
    s->interval_ms = a->cfg.interval_ms;
    for (unsigned c = 0; c < a->ncpu_busy; c++)
        s->cpu_busy[c] = a->cpu_busy[c];
    unsigned k = 0;
    for (unsigned i = 0; i < a->ndoms; i++) {
        struct agent_dom *d = &a->doms[i];
        if (!d->name || d->refresh)
            continue;
        unsigned non = 0;
        for (unsigned v = 0; v < d->nvcpus; v++)
            non += d->vcpu_online[v];
        /* A domain vpack cannot read the request of is level 0 (rule: hands off). */
        int level = d->known ? d->level : 0;
        struct vpack_domain_sample *ds = &s->domains[k];
        if (vpack_domain_sample_init(ds, d->name, level, non, d->niothreads) < 0)
            goto fail;
        m[k++] = i;
        if (d->has_bound) {
            ds->cpuset = malloc(sizeof(*ds->cpuset));
            if (!ds->cpuset)
                goto fail;
            *ds->cpuset = d->bound;
        }
        if (d->nmem) {
            ds->memory = malloc(d->nmem * sizeof(*ds->memory));
            if (!ds->memory)
                goto fail;
            memcpy(ds->memory, d->mem, d->nmem * sizeof(*ds->memory));
            ds->nmemory = d->nmem;
        }
        unsigned j = 0;
        for (unsigned v = 0; v < d->nvcpus; v++)
            if (d->vcpu_online[v] && thread_to_sample(&d->vcpus[v], &ds->vcpus[j++]) < 0)
                goto fail;
        if (thread_to_sample(&d->emulator, &ds->emulator) < 0)
            goto fail;
        ds->emulator.id = -1;
        for (unsigned t = 0; t < d->niothreads; t++)
            if (thread_to_sample(&d->iothreads[t], &ds->iothreads[t]) < 0)
                goto fail;
    }
    *out = s;
    *map = m;
    return 0;
fail:
    vpack_snapshot_free(s);
    free(m);
    return -ENOMEM;
}

static const char *kind_name(enum vpack_thread_kind k)
{
    return k == VPACK_THREAD_VCPU ? "vcpu" : k == VPACK_THREAD_EMULATOR ? "emulator" : "iothread";
}

static int move_add(struct vpack_move **moves, unsigned *n, const char *dom, const char *threads,
                    const vpack_cpuset *from, const vpack_cpuset *to, const char *reason)
{
    struct vpack_move *m = realloc(*moves, (*n + 1) * sizeof(*m));
    if (!m)
        return -ENOMEM;
    *moves = m;
    m = &m[(*n)++];
    m->domain = strdup(dom);
    m->threads = strdup(threads);
    m->from = from ? vpack_cpuset_format(from) : strdup("?");
    m->to = vpack_cpuset_format(to);
    m->reason = strdup(reason ? reason : "");
    return 0;
}

void vpack_moves_free(struct vpack_move *moves, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        free(moves[i].domain);
        free(moves[i].threads);
        free(moves[i].from);
        free(moves[i].to);
        free(moves[i].reason);
    }
    free(moves);
}

/*
 * Test-only fault injection, for the fault tests: with VPACK_TEST_PIN_GATE=DIR
 * in the environment at startup, a pin call that finds DIR/arm (empty, or
 * naming its domain) removes it,
 * writes "DOMAIN THREAD" to DIR/paused and holds the whole agent there, after
 * sampling and planning and before libvirt is asked, until DIR/paused is
 * removed (at most 60 s). The test destroys a domain or takes a CPU offline
 * in that window. Without the variable nothing is read or waited for.
 */
static void pin_gate(const struct vpack_agent *a, const char *dom, const char *label)
{
    char arm[4200], paused[4200], tmp[4210];
    if (!a->pin_gate)
        return;
    snprintf(arm, sizeof(arm), "%s/arm", a->pin_gate);
    FILE *f = fopen(arm, "r");
    if (!f)
        return;
    char only[256] = "";
    if (!fgets(only, sizeof(only), f))
        only[0] = '\0';
    fclose(f);
    only[strcspn(only, "\n")] = '\0';
    bool mine = !only[0] || !strcmp(only, dom);
    if (!mine || unlink(arm) < 0)
        return;
    snprintf(paused, sizeof(paused), "%s/paused", a->pin_gate);
    snprintf(tmp, sizeof(tmp), "%s.tmp", paused);
    f = fopen(tmp, "w");
    if (!f || fprintf(f, "%s %s\n", dom, label) < 0 || fclose(f) != 0 || rename(tmp, paused) < 0) {
        log_warn("fault injection: cannot write %s", paused);
        return;
    }
    log_warn("fault injection: holding the pin of domain %s %s until %s is removed", dom, label,
             paused);
    for (int i = 0; i < 600 && access(paused, F_OK) == 0; i++)
        usleep(100 * 1000);
    log_warn("fault injection: going on with the pin of domain %s %s", dom, label);
}

/*
 * Pins one thread to want if it differs from what is applied. Returns 1
 * when it pinned (or would, in a dry run), 0 when nothing changed, <0 on
 * failure (already logged and counted).
 */
static int apply_thread(struct vpack_agent *a, struct agent_dom *d, struct agent_thread *t,
                        enum vpack_thread_kind kind, const vpack_cpuset *want_in, bool dry_run,
                        const char *reason, struct vpack_move **moves, unsigned *nmoves)
{
    vpack_cpuset want, have;
    char *err = NULL, label[64];
    vpack_cpuset_and(&want, want_in, &a->online);
    if (vpack_cpuset_empty(&want))
        return 0; /* every CPU it may use is offline: nothing to do until one returns */
    if (t->applied_known) {
        vpack_cpuset_and(&have, &t->applied, &a->online);
        if (vpack_cpuset_equal(&have, &want))
            return 0;
    }
    if (kind == VPACK_THREAD_EMULATOR)
        snprintf(label, sizeof(label), "emulator");
    else
        snprintf(label, sizeof(label), "%s %d", kind_name(kind), t->id);
    if (moves)
        move_add(moves, nmoves, d->name, label, t->applied_known ? &have : NULL, &want, reason);
    if (dry_run)
        return 1;
    pin_gate(a, d->name, label);
    int r = vpack_virt_pin(a->virt, d->uuid, kind, t->id, &want, &err);
    enum pin_why why = reason && !strcmp(reason, "agent stopping")            ? PIN_STOP
                       : reason && !strcmp(reason, "restore after hotplug")   ? PIN_HOTPLUG
                                                                              : PIN_PLAN;
    a->pin_ops[why][r == 0 ? RES_OK
                    : r == -ENOENT ? RES_GONE
                    : r == -EINVAL ? RES_INVALID
                    : (r == -EBUSY || r == -ENOTCONN) ? RES_TRANSIENT
                                                      : RES_ERROR]++;
    if (r == 0) {
        char *from = t->applied_known ? vpack_cpuset_format(&have) : NULL;
        char *to = vpack_cpuset_format(&want);
        log_info("domain %s: %s %s -> %s (%s)", d->name, label, from ? from : "?", to ? to : "?",
                 reason ? reason : "restore");
        free(from);
        free(to);
        t->applied = want;
        t->applied_known = true;
        a->ctr.pins_ok++;
        return 1;
    }
    a->ctr.pins_failed++;
    switch (r) {
    case -ENOENT: /* the domain is gone: the stop event will forget it */
        a->ctr.pins_gone++;
        d->refresh = true;
        log_info("domain %s: gone while pinning %s", d->name, label);
        break;
    case -EINVAL: /* a CPU went away or the cgroup lost it: repair and re-plan */
        a->ctr.pins_invalid++;
        a->hotplug_pending = true;
        t->applied_known = false;
        log_warn("domain %s: %s refused: %s", d->name, label, err ? err : "?");
        break;
    case -EBUSY: /* a job holds the domain: the next cycle retries */
    case -ENOTCONN:
        a->ctr.pins_transient++;
        t->applied_known = false;
        log_info("domain %s: %s not pinned now (%s); retrying", d->name, label, err ? err : "?");
        break;
    default: /* unknown: re-read the domain before trying again */
        t->applied_known = false;
        d->refresh = true;
        log_warn("domain %s: pinning %s failed: %s", d->name, label, err ? err : "?");
        break;
    }
    free(err);
    return r;
}

static void set_reason(struct agent_dom *d, const struct vpack_plan_domain *pd)
{
    free(d->reason);
    d->reason = strdup(pd->reason ? pd->reason : "");
    d->npackages = 0;
    for (unsigned i = 0; i < pd->npackages && i < 8; i++)
        d->packages[d->npackages++] = pd->packages[i];
}

/* Applies plan; domains map to the snapshot's order through map. */
static int act(struct vpack_agent *a, const struct vpack_plan *plan, const unsigned *map,
               bool dry_run, struct vpack_move **moves, unsigned *nmoves)
{
    unsigned changed = 0;
    for (unsigned i = 0; i < plan->ndomains; i++) {
        const struct vpack_plan_domain *pd = &plan->domains[i];
        struct agent_dom *d = &a->doms[map[i]];
        if (!dry_run)
            set_reason(d, pd);
        /* Level 0 and unknown domains are never touched. */
        if (pd->level < 1 && !d->managed)
            continue;
        if (!d->known)
            continue;
        const char *why = pd->reason;
        unsigned j = 0;
        for (unsigned v = 0; v < d->nvcpus; v++) {
            if (!d->vcpu_online[v])
                continue;
            const struct vpack_plan_thread *pt = &pd->vcpus[j++];
            if (apply_thread(a, d, &d->vcpus[v], VPACK_THREAD_VCPU, pt->cpus, dry_run, why, moves,
                             nmoves) > 0)
                changed++;
        }
        if (apply_thread(a, d, &d->emulator, VPACK_THREAD_EMULATOR, pd->emulator.cpus, dry_run,
                         why, moves, nmoves) > 0)
            changed++;
        for (unsigned t = 0; t < d->niothreads && t < pd->niothreads; t++)
            if (apply_thread(a, d, &d->iothreads[t], VPACK_THREAD_IOTHREAD, pd->iothreads[t].cpus,
                             dry_run, why, moves, nmoves) > 0)
                changed++;
        if (!dry_run && pd->level >= 1)
            d->managed = true;
    }
    return (int)changed;
}

/* After a CPU came back: repair libvirt's cpusets, re-read the topology, re-pin all. */
static void handle_hotplug(struct vpack_agent *a)
{
    char *err = NULL;
    unsigned fixed = 0;
    a->hotplug_pending = false;
    if (load_topology(a, &err) < 0) {
        log_err("cannot re-read the topology: %s", err ? err : "?");
        free(err);
        return;
    }
    int r = vpack_cgroup_repair(a->cfg.sysfs_root, &a->online, &fixed);
    if (r < 0)
        log_warn("cannot repair the cpuset cgroups: %s", strerror(-r));
    if (fixed) {
        a->ctr.cgroup_repairs += fixed;
        log_info("repaired %u cpuset cgroups after a CPU came back", fixed);
    }
    /* The kernel moved threads and libvirt's view may be stale: pin everything again. */
    for (unsigned i = 0; i < a->ndoms; i++) {
        struct agent_dom *d = &a->doms[i];
        for (unsigned v = 0; v < d->nvcpus; v++)
            d->vcpus[v].applied_known = false;
        d->emulator.applied_known = false;
        for (unsigned t = 0; t < d->niothreads; t++)
            d->iothreads[t].applied_known = false;
    }
    char *cpus = vpack_cpuset_format(&a->online);
    log_info("CPUs online now: %s; re-applying guest pins and the plan", cpus ? cpus : "?");
    free(cpus);
}

/*
 * Threads of domains that vpack does not place keep whatever they have; but
 * after a hotplug cycle the kernel has narrowed them (a thread whose CPU went
 * away stays on the CPUs left, and its cgroup keeps the CPU removed). Their
 * intent is restored: the guest's pin, or the domain's full bound. Only
 * threads whose mask is unknown since the hotplug are touched.
 */
static void restore_after_hotplug(struct vpack_agent *a, const struct vpack_plan *plan,
                                  const unsigned *map)
{
    static const char why[] = "restore after hotplug";
    vpack_cpuset want;
    for (unsigned i = 0; i < plan->ndomains; i++) {
        struct agent_dom *d = &a->doms[map[i]];
        if (!d->known || plan->domains[i].level >= 1 || d->managed)
            continue;
        for (unsigned v = 0; v < d->nvcpus; v++)
            if (d->vcpu_online[v] && !d->vcpus[v].applied_known) {
                free_mask(a, d, &d->vcpus[v], &want);
                apply_thread(a, d, &d->vcpus[v], VPACK_THREAD_VCPU, &want, false, why, NULL, NULL);
            }
        if (!d->emulator.applied_known) {
            free_mask(a, d, &d->emulator, &want);
            apply_thread(a, d, &d->emulator, VPACK_THREAD_EMULATOR, &want, false, why, NULL, NULL);
        }
        for (unsigned t = 0; t < d->niothreads; t++)
            if (!d->iothreads[t].applied_known) {
                free_mask(a, d, &d->iothreads[t], &want);
                apply_thread(a, d, &d->iothreads[t], VPACK_THREAD_IOTHREAD, &want, false, why,
                             NULL, NULL);
            }
    }
}

static int cycle(struct vpack_agent *a, bool dry_run, struct vpack_move **moves, unsigned *nmoves)
{
    struct vpack_snapshot *snap = NULL;
    struct vpack_plan *plan = NULL;
    unsigned *map = NULL;
    int r;

    if (!vpack_virt_connected(a->virt))
        return -ENOTCONN;
    if (a->hotplug_pending && !dry_run)
        handle_hotplug(a);
    if (a->need_list)
        list_running(a);
    for (unsigned i = 0; i < a->ndoms; i++)
        if (a->doms[i].refresh && dom_refresh(a, &a->doms[i]) == -ENOENT)
            dom_remove(a, a->doms[i--].uuid);

    if ((r = build_snapshot(a, &snap, &map)) < 0)
        return r;
    uint64_t t0 = uv_hrtime();
    r = vpack_plan_compute(a->topo, &a->cfg.policy, snap, a->pstate, &plan);
    if (!dry_run)
        hist_observe(&a->plan_hist, (double)(uv_hrtime() - t0) / 1e9);
    if (r < 0) {
        log_err("planning failed: %s", strerror(-r));
        goto cleanup;
    }
    a->ctr.plans++;
    r = act(a, plan, map, dry_run, moves, nmoves);
    if (!dry_run) {
        restore_after_hotplug(a, plan, map);
        if (r > 0) {
            a->ctr.rebalances++;
            a->rebalances[plan->why < VPACK_WHY_N ? plan->why : VPACK_WHY_HOLD]++;
            log_info("plan: %s", plan->reason);
        }
    }
    vpack_plan_free(a->plan);
    a->plan = plan;
    plan = NULL;
    vpack_snapshot_free(a->snap);
    a->snap = snap;
    snap = NULL;
    r = 0;
cleanup:
    vpack_plan_free(plan);
    vpack_snapshot_free(snap);
    free(map);
    return r;
}

static void on_tick(uv_timer_t *timer)
{
    struct vpack_agent *a = timer->data;
    if (a->stopping)
        return;
    uint64_t t0 = uv_hrtime();
    a->ctr.samples++;
    sample_cpus(a);
    if (!vpack_virt_connected(a->virt))
        return;
    if (a->need_list)
        list_running(a);
    sample_domains(a);
    int r = cycle(a, false, NULL, NULL);
    if (r < 0 && r != -ENOTCONN)
        log_warn("cycle failed: %s", strerror(-r));
    hist_observe(&a->cycle_hist, (double)(uv_hrtime() - t0) / 1e9);
}

static void on_connected(void *opaque)
{
    struct vpack_agent *a = opaque;
    a->ctr.reconnects++;
    a->need_list = true;
    a->prev_ns = 0;
    for (unsigned i = 0; i < a->ndoms; i++) {
        a->doms[i].refresh = true;
        a->doms[i].have_prev_cpu = false;
        for (unsigned v = 0; v < a->doms[i].nvcpus; v++)
            a->doms[i].vcpus[v].have_prev = false;
    }
    log_info("connected to libvirt (%s)", a->cfg.libvirt_uri);
}

static void on_disconnected(void *opaque)
{
    (void)opaque;
    log_warn("lost the connection to libvirt; reconnecting");
}

static void on_domain_event(void *opaque, const char *uuid, enum vpack_virt_event ev)
{
    struct vpack_agent *a = opaque;
    struct agent_dom *d;
    switch (ev) {
    case VPACK_VIRT_STARTED:
    case VPACK_VIRT_METADATA:
    case VPACK_VIRT_DEFINED:
        d = dom_find(a, uuid);
        if (d)
            d->refresh = true;
        else if (ev == VPACK_VIRT_STARTED)
            dom_add(a, uuid);
        break;
    case VPACK_VIRT_STOPPED:
        dom_remove(a, uuid);
        break;
    }
}

static void on_hotplug(void *opaque, int cpu, int online)
{
    struct vpack_agent *a = opaque;
    a->ctr.hotplug_events++;
    log_info("CPU %d went %s", cpu, online ? "online" : "offline");
    a->hotplug_pending = true;
}

int vpack_agent_start(uv_loop_t *loop, const struct vpack_config *cfg, struct vpack_agent **out,
                      char **errmsg)
{
    static const struct vpack_virt_cbs cbs = {
        .connected = on_connected,
        .disconnected = on_disconnected,
        .domain_event = on_domain_event,
    };
    struct vpack_agent *a = calloc(1, sizeof(*a));
    int r;

    *errmsg = NULL;
    if (!a)
        return -ENOMEM;
    a->loop = loop;
    if ((r = vpack_config_init(&a->cfg)) < 0)
        goto fail;
    /* A deep copy: the caller keeps its own. */
    {
        struct vpack_config c = *cfg;
        vpack_config_clear(&a->cfg);
        a->cfg = c;
        a->cfg.libvirt_uri = strdup(c.libvirt_uri);
        a->cfg.topology = strdup(c.topology);
        a->cfg.state_dir = strdup(c.state_dir);
        a->cfg.sysfs_root = strdup(c.sysfs_root);
        a->cfg.log_level = strdup(c.log_level);
        a->cfg.socket_path = strdup(c.socket_path);
        a->cfg.control_group = strdup(c.control_group);
        a->cfg.metrics_listen = strdup(c.metrics_listen);
        if (!a->cfg.libvirt_uri || !a->cfg.topology || !a->cfg.state_dir || !a->cfg.sysfs_root ||
            !a->cfg.log_level || !a->cfg.socket_path || !a->cfg.control_group ||
            !a->cfg.metrics_listen) {
            r = -ENOMEM;
            goto fail;
        }
    }
    const char *gate = getenv("VPACK_TEST_PIN_GATE");
    if (gate && *gate) {
        if (!(a->pin_gate = strdup(gate))) {
            r = -ENOMEM;
            goto fail;
        }
        log_warn("VPACK_TEST_PIN_GATE=%s: test-only fault injection is on", gate);
    }
    if ((r = load_topology(a, errmsg)) < 0)
        goto fail;
    a->pstate = vpack_policy_state_new();
    if (!a->pstate) {
        r = -ENOMEM;
        goto fail;
    }
    sample_cpus(a);
    r = vpack_hotplug_start(loop, on_hotplug, a, &a->hotplug);
    if (r < 0)
        log_warn("cannot watch CPU hotplug events: %s; checking each interval instead",
                 strerror(-r));
    r = vpack_virt_new(loop, a->cfg.libvirt_uri, &cbs, a, &a->virt);
    if (r < 0) {
        if (asprintf(errmsg, "cannot start the libvirt adapter: %s", strerror(-r)) < 0)
            *errmsg = NULL;
        goto fail;
    }
    uv_timer_init(loop, &a->tick);
    a->tick.data = a;
    uv_timer_start(&a->tick, on_tick, a->cfg.interval_ms, a->cfg.interval_ms);
    *out = a;
    return 0;
fail:
    if (!*errmsg && asprintf(errmsg, "%s", strerror(-r)) < 0)
        *errmsg = NULL;
    if (a->hotplug)
        vpack_hotplug_stop(a->hotplug);
    vpack_policy_state_free(a->pstate);
    vpack_topology_free(a->topo);
    vpack_config_clear(&a->cfg);
    free(a->pin_gate);
    free(a);
    return r;
}

int vpack_agent_reload(struct vpack_agent *a, const struct vpack_config *cfg, char **errmsg)
{
    char *topo = strdup(cfg->topology);
    char *old_topo = a->cfg.topology;
    struct vpack_config old = a->cfg;
    *errmsg = NULL;
    if (!topo)
        return -ENOMEM;
    a->cfg.topology = topo;
    a->cfg.has_reserved = cfg->has_reserved;
    a->cfg.reserved_cpus = cfg->reserved_cpus;
    int r = load_topology(a, errmsg);
    if (r < 0) {
        a->cfg.topology = old_topo;
        a->cfg.has_reserved = old.has_reserved;
        a->cfg.reserved_cpus = old.reserved_cpus;
        free(topo);
        return r;
    }
    free(old_topo);
    a->cfg.policy = cfg->policy;
    a->cfg.smoothing_rise = cfg->smoothing_rise;
    a->cfg.smoothing_fall = cfg->smoothing_fall;
    a->cfg.keep_placement = cfg->keep_placement;
    if (cfg->interval_ms != a->cfg.interval_ms) {
        a->cfg.interval_ms = cfg->interval_ms;
        uv_timer_start(&a->tick, on_tick, a->cfg.interval_ms, a->cfg.interval_ms);
    }
    free(a->cfg.log_level);
    a->cfg.log_level = strdup(cfg->log_level);
    vpack_log_set_level(cfg->log_level);
    log_info("configuration reloaded");
    return 0;
}

/* Gives back every restricted thread its guest-requested or full mask. */
static void restore_all(struct vpack_agent *a)
{
    unsigned n = 0;
    for (unsigned i = 0; i < a->ndoms; i++) {
        struct agent_dom *d = &a->doms[i];
        vpack_cpuset want;
        if (!d->known || !d->name || (effective_level(a, d) < 1 && !d->managed))
            continue;
        for (unsigned v = 0; v < d->nvcpus; v++) {
            if (!d->vcpu_online[v])
                continue;
            free_mask(a, d, &d->vcpus[v], &want);
            n += apply_thread(a, d, &d->vcpus[v], VPACK_THREAD_VCPU, &want, false,
                              "agent stopping", NULL, NULL) > 0;
        }
        free_mask(a, d, &d->emulator, &want);
        n += apply_thread(a, d, &d->emulator, VPACK_THREAD_EMULATOR, &want, false,
                          "agent stopping", NULL, NULL) > 0;
        for (unsigned t = 0; t < d->niothreads; t++) {
            free_mask(a, d, &d->iothreads[t], &want);
            n += apply_thread(a, d, &d->iothreads[t], VPACK_THREAD_IOTHREAD, &want, false,
                              "agent stopping", NULL, NULL) > 0;
        }
    }
    log_info("stopping: restored %u thread masks", n);
}

static void on_tick_closed(uv_handle_t *h)
{
    struct vpack_agent *a = h->data;
    for (unsigned i = 0; i < a->ndoms; i++)
        dom_free(&a->doms[i]);
    free(a->doms);
    free(a->prev_times);
    free(a->cpu_busy);
    vpack_plan_free(a->plan);
    vpack_snapshot_free(a->snap);
    vpack_policy_state_free(a->pstate);
    vpack_topology_free(a->topo);
    vpack_config_clear(&a->cfg);
    free(a->pin_gate);
    free(a);
}

void vpack_agent_stop(struct vpack_agent *a)
{
    if (!a || a->stopping)
        return;
    a->stopping = true;
    if (!a->cfg.keep_placement && vpack_virt_connected(a->virt)) {
        /* Re-read what is applied, so nothing pinned by us is missed. */
        for (unsigned i = 0; i < a->ndoms; i++)
            if (a->doms[i].refresh)
                dom_refresh(a, &a->doms[i]);
        restore_all(a);
    } else if (a->cfg.keep_placement) {
        log_info("stopping: keeping the current placement (keep_placement)");
    }
    uv_timer_stop(&a->tick);
    if (a->hotplug)
        vpack_hotplug_stop(a->hotplug);
    vpack_virt_free(a->virt);
    a->virt = NULL;
    uv_close((uv_handle_t *)&a->tick, on_tick_closed);
}

int vpack_agent_rebalance(struct vpack_agent *a, bool dry_run, struct vpack_move **moves,
                          unsigned *nmoves)
{
    *moves = NULL;
    *nmoves = 0;
    if (!vpack_virt_connected(a->virt))
        return -ENOTCONN;
    if (dry_run) {
        /* Plan on a copy of the policy state: a dry run must not change it. */
        struct vpack_policy_state *saved = a->pstate;
        a->pstate = vpack_policy_state_new();
        if (!a->pstate) {
            a->pstate = saved;
            return -ENOMEM;
        }
        int r = cycle(a, true, moves, nmoves);
        vpack_policy_state_free(a->pstate);
        a->pstate = saved;
        return r;
    }
    return cycle(a, false, moves, nmoves);
}

const struct vpack_agent_counters *vpack_agent_counters(const struct vpack_agent *a)
{
    return &a->ctr;
}

static struct json_object *cpuset_json(const vpack_cpuset *s)
{
    char *str = vpack_cpuset_format(s);
    struct json_object *o = json_object_new_string(str ? str : "");
    free(str);
    return o;
}

struct json_object *vpack_agent_status_json(struct vpack_agent *a)
{
    struct json_object *root = json_object_new_object();
    struct json_object *pkgs = json_object_new_array();
    json_object_object_add(root, "libvirt_connected",
                           json_object_new_boolean(vpack_virt_connected(a->virt)));
    json_object_object_add(root, "topology", json_object_new_string(a->cfg.topology));
    if (a->plan) {
        json_object_object_add(root, "reason", json_object_new_string(a->plan->reason));
        json_object_object_add(root, "demand", json_object_new_double(a->plan->demand));
        json_object_object_add(root, "lifted", json_object_new_boolean(a->plan->lifted));
        json_object_object_add(root, "wakeup_package",
                               a->plan->wakeup_package >= 0
                                   ? json_object_new_int(a->plan->wakeup_package)
                                   : NULL);
    }
    for (unsigned p = 0; p < a->topo->npackages; p++) {
        const struct vpack_package *pk = &a->topo->packages[p];
        struct json_object *o = json_object_new_object();
        double busy = 0;
        unsigned n = 0;
        VPACK_CPUSET_FOREACH(c, &pk->cpus)
        {
            if ((unsigned)c < a->ncpu_busy && a->cpu_busy[c] >= 0) {
                busy += a->cpu_busy[c];
                n++;
            }
        }
        bool active = true;
        if (a->plan) {
            active = false;
            for (unsigned k = 0; k < a->plan->nactive; k++)
                active |= a->plan->active_packages[k] == pk->id;
        }
        json_object_object_add(o, "id", json_object_new_int(pk->id));
        json_object_object_add(o, "cpus", cpuset_json(&pk->cpus));
        json_object_object_add(o, "cores", json_object_new_int((int)pk->ncores));
        json_object_object_add(o, "busy", json_object_new_double(n ? busy / n : 0));
        json_object_object_add(o, "idle", json_object_new_double(n ? 1 - busy / n : 1));
        json_object_object_add(o, "state", json_object_new_string(active ? "active" : "parked"));
        struct json_object *doms = json_object_new_array();
        for (unsigned i = 0; i < a->ndoms; i++)
            for (int k = 0; k < a->doms[i].npackages; k++)
                if (a->doms[i].packages[k] == pk->id && a->doms[i].name)
                    json_object_array_add(doms, json_object_new_string(a->doms[i].name));
        json_object_object_add(o, "domains", doms);
        json_object_array_add(pkgs, o);
    }
    json_object_object_add(root, "packages", pkgs);
    struct json_object *doms = json_object_new_array();
    for (unsigned i = 0; i < a->ndoms; i++) {
        struct agent_dom *d = &a->doms[i];
        if (!d->name)
            continue;
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "name", json_object_new_string(d->name));
        json_object_object_add(o, "level", json_object_new_int(effective_level(a, d)));
        json_object_object_add(o, "managed", json_object_new_boolean(d->known && effective_level(a, d) >= 1));
        struct json_object *pk = json_object_new_array();
        for (int k = 0; k < d->npackages; k++)
            json_object_array_add(pk, json_object_new_int(d->packages[k]));
        json_object_object_add(o, "packages", pk);
        json_object_object_add(o, "reason", json_object_new_string(d->reason ? d->reason : ""));
        json_object_array_add(doms, o);
    }
    json_object_object_add(root, "domains", doms);
    struct json_object *ctr = json_object_new_object();
    json_object_object_add(ctr, "samples", json_object_new_int64((int64_t)a->ctr.samples));
    json_object_object_add(ctr, "plans", json_object_new_int64((int64_t)a->ctr.plans));
    json_object_object_add(ctr, "pins_ok", json_object_new_int64((int64_t)a->ctr.pins_ok));
    json_object_object_add(ctr, "pins_failed", json_object_new_int64((int64_t)a->ctr.pins_failed));
    json_object_object_add(ctr, "rebalances", json_object_new_int64((int64_t)a->ctr.rebalances));
    json_object_object_add(ctr, "hotplug_events",
                           json_object_new_int64((int64_t)a->ctr.hotplug_events));
    json_object_object_add(ctr, "cgroup_repairs",
                           json_object_new_int64((int64_t)a->ctr.cgroup_repairs));
    json_object_object_add(ctr, "connects", json_object_new_int64((int64_t)a->ctr.reconnects));
    json_object_object_add(root, "counters", ctr);
    return root;
}

static struct json_object *thread_json(const struct agent_thread *t, const char *label)
{
    struct json_object *o = json_object_new_object();
    if (label)
        json_object_object_add(o, "thread", json_object_new_string(label));
    else
        json_object_object_add(o, "id", json_object_new_int(t->id));
    json_object_object_add(o, "pin", t->has_pin ? cpuset_json(&t->pin) : NULL);
    json_object_object_add(o, "cpus", t->applied_known ? cpuset_json(&t->applied) : NULL);
    json_object_object_add(o, "util", json_object_new_double(t->util));
    json_object_object_add(o, "delay", json_object_new_double(t->delay));
    return o;
}

struct json_object *vpack_agent_explain_json(struct vpack_agent *a, const char *name)
{
    for (unsigned i = 0; i < a->ndoms; i++) {
        struct agent_dom *d = &a->doms[i];
        if (!d->name || strcmp(d->name, name))
            continue;
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "name", json_object_new_string(d->name));
        json_object_object_add(o, "uuid", json_object_new_string(d->uuid));
        json_object_object_add(o, "level", json_object_new_int(effective_level(a, d)));
        json_object_object_add(o, "level_set", json_object_new_boolean(d->level >= 0));
        json_object_object_add(o, "managed", json_object_new_boolean(d->known && effective_level(a, d) >= 1));
        json_object_object_add(o, "cpuset", d->has_bound ? cpuset_json(&d->bound) : NULL);
        json_object_object_add(o, "reason", json_object_new_string(d->reason ? d->reason : ""));
        struct json_object *pk = json_object_new_array();
        for (int k = 0; k < d->npackages; k++)
            json_object_array_add(pk, json_object_new_int(d->packages[k]));
        json_object_object_add(o, "packages", pk);
        struct json_object *vc = json_object_new_array();
        for (unsigned v = 0; v < d->nvcpus; v++)
            if (d->vcpu_online[v])
                json_object_array_add(vc, thread_json(&d->vcpus[v], NULL));
        json_object_object_add(o, "vcpus", vc);
        json_object_object_add(o, "emulator", thread_json(&d->emulator, "emulator"));
        struct json_object *io = json_object_new_array();
        for (unsigned t = 0; t < d->niothreads; t++)
            json_object_array_add(io, thread_json(&d->iothreads[t], NULL));
        json_object_object_add(o, "iothreads", io);
        return o;
    }
    return NULL;
}

struct json_object *vpack_agent_snapshot_json(struct vpack_agent *a)
{
    if (!a->snap)
        return NULL;
    char *s = vpack_snapshot_to_json(a->snap);
    struct json_object *o = s ? json_tokener_parse(s) : NULL;
    free(s);
    return o;
}

static int record_path(const struct vpack_agent *a, const char *uuid, char *buf, size_t len,
                       bool mkdirs)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/domains", a->cfg.state_dir);
    if (mkdirs) {
        if (mkdir(a->cfg.state_dir, 0755) < 0 && errno != EEXIST)
            return -errno;
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
            return -errno;
    }
    if (snprintf(buf, len, "%s/%s.json", dir, uuid) >= (int)len)
        return -ENAMETOOLONG;
    return 0;
}

static const char *json_str(struct json_object *o, const char *key)
{
    struct json_object *v;
    if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

int vpack_agent_register(struct vpack_agent *a, const struct vpack_ctl_request *req, char **errmsg)
{
    char path[4096], tmp[4200];
    const char *uuid = req->uuid, *name = req->name;
    *errmsg = NULL;
    int r = record_path(a, uuid, path, sizeof(path), true);
    if (r < 0)
        return r;
    /* At libvirtd's reconnect the live XML may carry vpack's own pins: the
     * record from the domain's start, if there is one, stays the record. */
    if (req->reconnect && access(path, F_OK) == 0) {
        log_debug("domain %s: reconnect: keeping the record from its start", name);
        return 0;
    }
    /* Write-then-rename: a crash never leaves half a record. */
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (json_object_to_file_ext(tmp, req->record, JSON_C_TO_STRING_PLAIN) < 0 || rename(tmp, path) < 0) {
        r = -errno ? -errno : -EIO;
        unlink(tmp);
        if (asprintf(errmsg, "cannot store the record in %s: %s", path, strerror(-r)) < 0)
            *errmsg = NULL;
        return r;
    }
    struct agent_dom *d = dom_add(a, uuid);
    if (d)
        d->refresh = true;
    log_info("domain %s: registered by the hook", name);
    return 0;
}

int vpack_agent_forget(struct vpack_agent *a, const struct vpack_ctl_request *req, char **errmsg)
{
    char path[4096];
    *errmsg = NULL;
    if (record_path(a, req->uuid, path, sizeof(path), false) == 0)
        unlink(path);
    return 0;
}

/* Reads a transient domain's requested pins from the hook's record. */
static bool load_record(struct vpack_agent *a, struct agent_dom *d)
{
    char path[4096];
    struct json_object *rec, *o;
    if (record_path(a, d->uuid, path, sizeof(path), false) < 0)
        return false;
    rec = json_object_from_file(path);
    if (!rec)
        return false;
    bool ok = true;
    const char *s = json_str(rec, "cpuset");
    d->has_bound = s != NULL;
    if (s && vpack_cpuset_parse(&d->bound, s, NULL) < 0)
        ok = false;
    for (unsigned i = 0; i < d->nvcpus; i++)
        d->vcpus[i].has_pin = false;
    if (json_object_object_get_ex(rec, "vcpupin", &o) && json_object_is_type(o, json_type_object)) {
        json_object_object_foreach(o, key, val)
        {
            char *end;
            unsigned long id = strtoul(key, &end, 10);
            if (*end || id >= d->nvcpus || !json_object_is_type(val, json_type_string) ||
                vpack_cpuset_parse(&d->vcpus[id].pin, json_object_get_string(val), NULL) < 0) {
                ok = false;
                continue;
            }
            d->vcpus[id].has_pin = true;
        }
    }
    s = json_str(rec, "emulatorpin");
    d->emulator.has_pin = s && vpack_cpuset_parse(&d->emulator.pin, s, NULL) == 0;
    for (unsigned t = 0; t < d->niothreads; t++)
        d->iothreads[t].has_pin = false;
    if (json_object_object_get_ex(rec, "iothreadpin", &o) && json_object_is_type(o, json_type_object)) {
        json_object_object_foreach(o, key, val)
        {
            int id = atoi(key);
            for (unsigned t = 0; t < d->niothreads; t++)
                if (d->iothreads[t].id == id && json_object_is_type(val, json_type_string) &&
                    vpack_cpuset_parse(&d->iothreads[t].pin, json_object_get_string(val),
                                       NULL) == 0)
                    d->iothreads[t].has_pin = true;
        }
    }
    json_object_put(rec);
    if (!ok)
        log_warn("domain %s: the hook's record in %s is damaged: leaving it alone", d->name, path);
    return ok;
}

static struct json_object *hist_json(const struct histogram *h)
{
    struct json_object *o = json_object_new_object(), *b = json_object_new_array();
    for (size_t i = 0; i < NBUCKETS; i++) {
        struct json_object *pair = json_object_new_array();
        json_object_array_add(pair, json_object_new_double(hist_bounds[i]));
        json_object_array_add(pair, json_object_new_int64((int64_t)h->buckets[i]));
        json_object_array_add(b, pair);
    }
    json_object_object_add(o, "buckets", b);
    json_object_object_add(o, "sum", json_object_new_double(h->sum));
    json_object_object_add(o, "count", json_object_new_int64((int64_t)h->count));
    return o;
}

struct json_object *vpack_agent_metrics_json(struct vpack_agent *a)
{
    struct json_object *root = json_object_new_object();
    double hz = (double)sysconf(_SC_CLK_TCK);
    json_object_object_add(root, "connected", json_object_new_boolean(vpack_virt_connected(a->virt)));
    json_object_object_add(root, "version", json_object_new_string(VPACK_VERSION));
    json_object_object_add(root, "sysfs_root", json_object_new_string(a->cfg.sysfs_root));
    json_object_object_add(root, "demand", json_object_new_double(a->plan ? a->plan->demand : 0));
    json_object_object_add(root, "lifted", json_object_new_boolean(a->plan && a->plan->lifted));

    struct json_object *pkgs = json_object_new_array();
    for (unsigned p = 0; p < a->topo->npackages; p++) {
        const struct vpack_package *pk = &a->topo->packages[p];
        struct json_object *o = json_object_new_object();
        double busy = 0, idle_s = 0;
        unsigned n = 0;
        VPACK_CPUSET_FOREACH(c, &pk->cpus)
        {
            if ((unsigned)c < a->ncpu_busy && a->cpu_busy[c] >= 0) {
                busy += a->cpu_busy[c];
                n++;
            }
            for (unsigned k = 0; k < a->nprev_times; k++)
                if (a->prev_times[k].cpu == c)
                    idle_s += (double)(a->prev_times[k].total - a->prev_times[k].busy) / hz;
        }
        bool active = !a->plan;
        for (unsigned k = 0; a->plan && k < a->plan->nactive; k++)
            active |= a->plan->active_packages[k] == pk->id;
        json_object_object_add(o, "id", json_object_new_int(pk->id));
        json_object_object_add(o, "cpus", cpuset_json(&pk->cpus));
        json_object_object_add(o, "cores", json_object_new_int((int)pk->ncores));
        json_object_object_add(o, "busy", json_object_new_double(n ? busy / n : 0));
        json_object_object_add(o, "idle_seconds", json_object_new_double(idle_s));
        json_object_object_add(o, "active", json_object_new_boolean(active));
        json_object_object_add(o, "wakeup", json_object_new_boolean(a->plan && a->plan->wakeup_package == pk->id));
        json_object_array_add(pkgs, o);
    }
    json_object_object_add(root, "packages", pkgs);

    struct json_object *doms = json_object_new_array();
    for (unsigned i = 0; i < a->ndoms; i++) {
        struct agent_dom *d = &a->doms[i];
        if (!d->name)
            continue;
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "name", json_object_new_string(d->name));
        json_object_object_add(o, "level", json_object_new_int(effective_level(a, d)));
        json_object_object_add(o, "managed", json_object_new_boolean(d->known && effective_level(a, d) >= 1));
        struct json_object *pk = json_object_new_array();
        for (int k = 0; k < d->npackages; k++)
            json_object_array_add(pk, json_object_new_int(d->packages[k]));
        json_object_object_add(o, "packages", pk);
        struct json_object *vc = json_object_new_array();
        for (unsigned v = 0; v < d->nvcpus; v++) {
            if (!d->vcpu_online[v])
                continue;
            struct json_object *t = json_object_new_object();
            json_object_object_add(t, "id", json_object_new_int((int)v));
            json_object_object_add(t, "util", json_object_new_double(d->vcpus[v].util));
            json_object_object_add(t, "delay", json_object_new_double(d->vcpus[v].delay));
            json_object_array_add(vc, t);
        }
        json_object_object_add(o, "vcpus", vc);
        /* Memory outside the packages it is placed on, where NUMA nodes are known. */
        if (d->nmem && d->npackages > 0 && d->known && effective_level(a, d) >= 1) {
            double local = 0;
            bool nodes = false;
            for (int k = 0; k < d->npackages; k++) {
                int pi = vpack_topology_package_index(a->topo, d->packages[k]);
                if (pi < 0)
                    continue;
                const struct vpack_package *pkg = &a->topo->packages[pi];
                for (unsigned nn = 0; nn < pkg->nnuma; nn++) {
                    nodes = true;
                    for (unsigned m = 0; m < d->nmem; m++)
                        if (d->mem[m].node == pkg->numa_nodes[nn])
                            local += d->mem[m].share;
                }
            }
            if (nodes)
                json_object_object_add(o, "remote_memory",
                                       json_object_new_double(local >= 1 ? 0 : 1 - local));
        }
        json_object_array_add(doms, o);
    }
    json_object_object_add(root, "domains", doms);

    struct json_object *ops = json_object_new_array();
    for (int w = 0; w < PIN_NWHY; w++)
        for (int r = 0; r < RES_N; r++) {
            struct json_object *o = json_object_new_object();
            json_object_object_add(o, "reason", json_object_new_string(pin_why_names[w]));
            json_object_object_add(o, "result", json_object_new_string(pin_result_names[r]));
            json_object_object_add(o, "count", json_object_new_int64((int64_t)a->pin_ops[w][r]));
            json_object_array_add(ops, o);
        }
    json_object_object_add(root, "pin_ops", ops);
    struct json_object *reb = json_object_new_array();
    for (int w = 0; w < VPACK_WHY_N; w++) {
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "reason", json_object_new_string(vpack_plan_why_name(w)));
        json_object_object_add(o, "count", json_object_new_int64((int64_t)a->rebalances[w]));
        json_object_array_add(reb, o);
    }
    json_object_object_add(root, "rebalances", reb);
    json_object_object_add(root, "plan_duration", hist_json(&a->plan_hist));
    json_object_object_add(root, "cycle_duration", hist_json(&a->cycle_hist));
    json_object_object_add(root, "samples", json_object_new_int64((int64_t)a->ctr.samples));
    json_object_object_add(root, "connects", json_object_new_int64((int64_t)a->ctr.reconnects));
    json_object_object_add(root, "hotplug_events", json_object_new_int64((int64_t)a->ctr.hotplug_events));
    json_object_object_add(root, "cgroup_repairs", json_object_new_int64((int64_t)a->ctr.cgroup_repairs));
    return root;
}
