// SPDX-License-Identifier: MIT
/*
 * The agent's domain table: one entry per running domain, refreshed from
 * libvirt when an event or a failed pin marks it. What a domain asked for
 * is taken once per run, from its record (records.c): the hook's, or its
 * live XML at first sight; its persistent definition is never read.
 */
#include "agent-priv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "log.h"
#include "safefs.h"
#include "vpack/domrecord.h"
#include "vpack/domxml.h"

/* Frees what d owns (free()s in a row, alike in shape to every destructor). */
void vpack__dom_free(struct agent_dom *d)
{
    vpack__dom_threads_close(d);
    free(d->name);
    free(d->rule);
    free(d->vcpus);
    free(d->vcpu_online);
    free(d->iothreads);
    free(d->reason);
    free(d->packages);
    vpack_cgroup_domain_clear(&d->cg);
    free(d->mem);
    vpack_domxml_free(d->req);
    memset(d, 0, sizeof(*d));
}

struct agent_dom *vpack__dom_find(struct vpack_agent *a, const char *uuid)
{
    for (unsigned i = 0; i < a->ndoms; i++)
        if (!strcmp(a->doms[i].uuid, uuid))
            return &a->doms[i];
    return NULL;
}

struct agent_dom *vpack__dom_add(struct vpack_agent *a, const char *uuid)
{
    struct agent_dom *d = vpack__dom_find(a, uuid);
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
    d->task_fd = -1;
    d->stat_fd = -1;
    return d;
}

void vpack__dom_remove(struct vpack_agent *a, const char *uuid)
{
    for (unsigned i = 0; i < a->ndoms; i++) {
        if (strcmp(a->doms[i].uuid, uuid))
            continue;
        log_info("domain %s stopped: forgotten", a->doms[i].name ? a->doms[i].name : uuid);
        /* Its run's record goes with it; records of domains not running are not kept. */
        if (a->doms[i].run.pid > 0)
            vpack__record_discard_run(a, uuid, &a->doms[i].run);
        vpack__dom_free(&a->doms[i]);
        memmove(&a->doms[i], &a->doms[i + 1], (a->ndoms - i - 1) * sizeof(*a->doms));
        a->ndoms--;
        a->replan = true; /* the load it leaves: planned now, not at the next read */
        return;
    }
}

int vpack__dom_level(const struct vpack_agent *a, const struct agent_dom *d)
{
    return d->level >= 0 ? d->level : a->cfg.policy.default_level;
}

int vpack__dom_plan_level(const struct vpack_agent *a, const struct agent_dom *d)
{
    /* d->level as it is (-1: the policy's default) unless the hold caps it. */
    if (a->hold_level >= 0 && vpack__dom_level(a, d) > a->hold_level)
        return a->hold_level;
    return d->level;
}

enum vpack_level_source vpack__dom_level_source(const struct agent_dom *d)
{
    return d->level < 0 ? VPACK_LEVEL_DEFAULT : d->rule ? VPACK_LEVEL_RULE : VPACK_LEVEL_DOMAIN;
}

bool vpack__dom_placed(const struct vpack_agent *a, const struct agent_dom *d)
{
    return d->known && vpack__dom_level(a, d) >= 1;
}

void vpack__dom_free_mask(const struct vpack_agent *a, const struct agent_dom *d,
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

const char *vpack__source_name(enum load_source s)
{
    static const char *const names[] = {"none",    "thread-name", "cgroup-v1",
                                        "cgroup-v2", "libvirt",   "remainder"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "none";
}

static void tids_close(struct agent_thread *t)
{
    for (unsigned i = 0; i < t->ntids; i++)
        if (t->tids[i].fd >= 0)
            close(t->tids[i].fd);
    free(t->tids);
    t->tids = NULL;
    t->ntids = 0;
    t->have_prev = false; /* a new set of threads: its sum starts again */
    vpack_thread_time_rebase(&t->time); /* their next readings are a new start */
}

void vpack__dom_threads_close(struct agent_dom *d)
{
    for (unsigned v = 0; v < d->nvcpus; v++)
        tids_close(&d->vcpus[v]);
    tids_close(&d->emulator);
    for (unsigned i = 0; i < d->niothreads; i++)
        tids_close(&d->iothreads[i]);
    if (d->task_fd >= 0)
        close(d->task_fd);
    d->task_fd = -1;
    if (d->stat_fd >= 0)
        close(d->stat_fd);
    d->stat_fd = -1;
}

/* The counters of every thread of d, for a new run. */
static void threads_counters_reset(struct agent_dom *d)
{
    for (unsigned v = 0; v < d->nvcpus; v++)
        vpack_thread_time_reset(&d->vcpus[v].time);
    vpack_thread_time_reset(&d->emulator.time);
    for (unsigned i = 0; i < d->niothreads; i++)
        vpack_thread_time_reset(&d->iothreads[i].time);
}

/* True when t reads exactly the threads tids[0..n), in that order, all open. */
static bool same_tids(const struct agent_thread *t, const int *tids, unsigned n)
{
    if (t->ntids != n)
        return false;
    for (unsigned i = 0; i < n; i++)
        if (t->tids[i].tid != tids[i] || t->tids[i].fd < 0)
            return false;
    return true;
}

/*
 * Gives t the threads tids[0..n), their schedstat files opened. A thread
 * that already reads exactly these keeps its files and its last reading, so
 * that a new sort (a refresh, a worker thread come or gone) loses no
 * interval. Returns 0; 1 when a file could not be opened for another reason
 * than its thread having ended (out of descriptors: logged); or -ENOMEM.
 */
static int tids_set(struct vpack_agent *a, struct agent_dom *d, struct agent_thread *t,
                    const int *tids, unsigned n)
{
    int ret = 0;
    if (same_tids(t, tids, n))
        return 0;
    /* The threads it read before keep their files and last readings: the counters
     * take from each only what it grew, and a new thread whole. */
    struct agent_thread old = *t;
    t->tids = NULL;
    t->ntids = 0;
    t->have_prev = false; /* a new set of threads: its sum starts again */
    if (n && !(t->tids = calloc(n, sizeof(*t->tids)))) {
        t->tids = old.tids;
        t->ntids = old.ntids;
        tids_close(t);
        return -ENOMEM;
    }
    for (unsigned i = 0; i < n; i++) {
        struct agent_tid *was = NULL;
        for (unsigned k = 0; k < old.ntids && !was; k++)
            if (old.tids[k].tid == tids[i] && old.tids[k].fd >= 0)
                was = &old.tids[k];
        if (was) {
            t->tids[t->ntids++] = *was;
            was->fd = -1; /* handed over */
            continue;
        }
        int fd = vpack_host_schedstat_open(a->cfg.sysfs_root, d->pid, tids[i]);
        if (fd == -ENOENT || fd == -ESRCH) {
            d->rescan_threads = true; /* ended since it was listed */
        } else if (fd == -ENOTSUP) {
            log_warn("domain %s: thread %d has no schedstat (a kernel without "
                     "CONFIG_SCHED_INFO?): libvirt's stats read the domain", d->name, tids[i]);
            ret = 1;
        } else if (fd < 0) {
            log_warn("domain %s: cannot open the schedstat of thread %d: %s", d->name, tids[i],
                     strerror(-fd));
            ret = 1;
        }
        t->tids[t->ntids++] = (struct agent_tid){tids[i], fd < 0 ? -1 : fd, {0}};
    }
    for (unsigned k = 0; k < old.ntids; k++)
        if (old.tids[k].fd >= 0)
            close(old.tids[k].fd);
    free(old.tids);
    return ret;
}

/* The tids of the threads whose owner is want, in listing order; *n counts them. */
static void tids_of(const struct vpack_host_thread *t, const int *owner, unsigned nt, int want,
                    int *out, unsigned *n)
{
    *n = 0;
    for (unsigned k = 0; k < nt; k++)
        if (owner[k] == want)
            out[(*n)++] = t[k].tid;
}

/*
 * QEMU's threads, by the names it gives them with debug-threads=on
 * (libvirt always asks for it): "CPU N/KVM" (or /TCG) runs vCPU N, "IO
 * iothreadN" libvirt's iothread N; every other thread (the main thread,
 * call_rcu, the thread pool's "worker"s, the monitor's "IO mon_iothread",
 * ...) is the emulator's. libvirt 9.0's API gives no thread ids (vCPU pins,
 * virDomainGetVcpus and the bulk stats carry none), so the threads are
 * sorted here once per domain start or refresh, and again when one ends or
 * the process starts a thread (the task directory's link count). A vCPU
 * without a thread of its own (single-threaded TCG, "ALL CPUs/TCG"; QEMU
 * without debug-threads) makes the domain one libvirt's stats read. An
 * iothread not found is read from its cgroup: a "worker" that an
 * iothread's block layer starts inherits the iothread's cgroup, so the
 * cgroup fallback counts it to the iothread; by name it is the emulator's.
 */
void vpack__dom_find_threads(struct vpack_agent *a, struct agent_dom *d)
{
    struct vpack_host_thread *t = NULL;
    unsigned nt = 0, *ids = NULL, named = 0, missing = 0, n;
    int *owner = NULL, *tids = NULL;
    d->rescan_threads = false;
    if (d->task_fd >= 0)
        close(d->task_fd);
    d->task_fd = -1;
    if (d->stat_fd >= 0)
        close(d->stat_fd);
    d->stat_fd = -1;
    d->usage = (struct vpack_usage_watch){0}; /* perhaps another process: a full read first */
    if (vpack_host_threads(a->cfg.sysfs_root, d->pid, &t, &nt) < 0) {
        vpack__dom_threads_close(d);
        d->stats_libvirt = true;
        return;
    }
    if (!(ids = calloc(d->niothreads + 1, sizeof(*ids))) ||
        !(owner = calloc(nt + 1, sizeof(*owner))) || !(tids = calloc(nt + 1, sizeof(*tids))))
        goto cleanup;
    for (unsigned i = 0; i < d->niothreads; i++)
        ids[i] = (unsigned)d->iothreads[i].id;
    /* owner[k]: 1 + the vCPU, -(1 + the iothread index), or 0 for the emulator. */
    for (unsigned k = 0; k < nt; k++) {
        int vcpu;
        enum vpack_qemu_thread kind = vpack_qemu_thread_kind(t[k].comm, &vcpu);
        if (kind == VPACK_QEMU_VCPU && vcpu >= 0 && (unsigned)vcpu < d->nvcpus) {
            owner[k] = 1 + vcpu;
        } else if (kind == VPACK_QEMU_IOTHREAD) {
            int i = vpack_qemu_iothread_match(t[k].comm, ids, d->niothreads);
            if (i == -2)
                log_debug("domain %s: thread %d '%s' could be more than one iothread (its name "
                          "is cut): reading those from their cgroups", d->name, t[k].tid,
                          t[k].comm);
            owner[k] = i >= 0 ? -(1 + i) : 0;
        }
    }
    for (unsigned v = 0; v < d->nvcpus; v++) {
        tids_of(t, owner, nt, 1 + (int)v, tids, &n);
        /* Two threads of one vCPU's name cannot be told apart: libvirt reads it, as one
         * whose file cannot be opened. */
        int r = tids_set(a, d, &d->vcpus[v], tids, n == 1 ? 1 : 0);
        if (r < 0)
            goto cleanup;
        missing += d->vcpu_online[v] && (n != 1 || r > 0);
    }
    tids_of(t, owner, nt, 0, tids, &n);
    int er = tids_set(a, d, &d->emulator, tids, n);
    if (er < 0)
        goto cleanup;
    missing += er > 0; /* an emulator thread not read: libvirt's cpu.time leaves it */
    for (unsigned i = 0; i < d->niothreads; i++) {
        tids_of(t, owner, nt, -(1 + (int)i), tids, &n);
        /* Two threads of one name: the cgroup decides. */
        if (tids_set(a, d, &d->iothreads[i], tids, n == 1 ? 1 : 0) < 0)
            goto cleanup;
        named += n == 1;
    }
    d->stats_libvirt = missing > 0;
    int dfd = vpack_host_task_dir_open(a->cfg.sysfs_root, d->pid);
    d->task_fd = dfd < 0 ? -1 : dfd;
    int sfd = vpack_host_proc_stat_open(a->cfg.sysfs_root, d->pid);
    d->stat_fd = sfd < 0 ? -1 : sfd;
    d->nthreads = (int)nt;
    if (missing)
        log_debug("domain %s: %u vCPUs or emulator threads cannot be read by name (single-"
                  "threaded TCG, QEMU without debug-threads, no schedstat?): libvirt's stats "
                  "read the domain", d->name, missing);
    if (named < d->niothreads)
        log_debug("domain %s: %u of %u iothreads found by name (QEMU without debug-threads?); "
                  "the others are read from their cgroups", d->name, named, d->niothreads);
cleanup:
    free(tids);
    free(owner);
    free(ids);
    free(t);
}

int vpack__dom_set_placement(struct agent_dom *d, const struct vpack_plan_domain *pd)
{
    size_t size = pd->npackages * sizeof(*d->packages);
    int *pk = NULL;
    char *reason;
    if (size && !(pk = malloc(size)))
        return -ENOMEM;
    if (!(reason = strdup(pd->reason ? pd->reason : ""))) {
        free(pk);
        return -ENOMEM;
    }
    if (size)
        memcpy(pk, pd->packages, size);
    free(d->packages);
    d->packages = pk;
    d->npackages = pd->npackages;
    free(d->reason);
    d->reason = reason;
    return 0;
}

int vpack__records_open(struct vpack_agent *a, char **errmsg)
{
    int dfd = vpack_safefs_open_dir(a->cfg.state_dir, 0755, errmsg);
    if (dfd < 0)
        return dfd;
    a->records_fd = vpack_safefs_open_subdir(dfd, a->cfg.state_dir, "domains", 0700, errmsg);
    close(dfd);
    return a->records_fd < 0 ? a->records_fd : 0;
}

/* Sizes the thread arrays from the live definition. Returns 0 or -ENOMEM. */
static int size_threads(struct agent_dom *d, const struct vpack_domxml *live)
{
    unsigned nv = live->vcpus;
    if (nv != d->nvcpus) {
        struct agent_thread *t = calloc(nv ? nv : 1, sizeof(*t));
        bool *on = calloc(nv ? nv : 1, sizeof(*on));
        if (!t || !on) {
            free(t);
            free(on);
            return -ENOMEM;
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
        if (!t)
            return -ENOMEM;
        free(d->iothreads);
        d->iothreads = t;
        d->niothreads = (unsigned)live->niothreads;
    }
    for (unsigned i = 0; i < d->niothreads; i++)
        d->iothreads[i].id = (int)live->iothreads[i];
    return 0;
}

/*
 * Takes what the guest asked for (req, checked against the live domain by
 * vpack_domxml_request_check()): its pins and its <vcpu cpuset> bound.
 * The bound of a domain with automatic placement is set by auto_bound().
 */
static void take_request(struct agent_dom *d, const struct vpack_domxml *req)
{
    d->has_bound = req->has_cpuset;
    d->bound_auto = false;
    if (req->has_cpuset)
        d->bound = req->cpuset;
    for (unsigned i = 0; i < d->nvcpus; i++)
        d->vcpus[i].has_pin = false;
    for (size_t i = 0; i < req->nvcpupin; i++) {
        if (req->vcpupin[i].vcpu >= d->nvcpus)
            continue; /* not after the check */
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
}

/*
 * With placement='auto' libvirt ignores <vcpu cpuset> and binds the domain
 * to the CPUs of the NUMA nodes numad advised at start: that placement, as
 * libvirt applied it, is the bound. False when it cannot be read: vpack
 * then keeps its hands off the domain rather than widen it to every CPU.
 */
static bool auto_bound(struct vpack_agent *a, struct agent_dom *d)
{
    vpack_cpuset nodes;
    char *err = NULL, list[64];
    int r = vpack_virt_numa_nodeset(a->virt, d->uuid, &nodes, &err);
    if (r == 0 && (r = vpack_host_node_cpus(a->cfg.sysfs_root, &nodes, &d->bound)) == 0 &&
        vpack_cpuset_empty(&d->bound))
        r = -ENOENT;
    if (r < 0) {
        log_warn("domain %s: placement='auto', but its placement cannot be read (%s): leaving "
                 "it alone", d->name, err ? err : strerror(-r));
        free(err);
        return false;
    }
    vpack_cpuset_format_buf(&nodes, list, sizeof(list));
    log_debug("domain %s: placement='auto': bound to the CPUs of NUMA nodes %s", d->name, list);
    d->has_bound = true;
    d->bound_auto = true;
    return true;
}

/* Takes what is applied now, as libvirt reports it. */
static void take_pins(struct agent_dom *d, const struct vpack_virt_pins *pins)
{
    for (unsigned i = 0; i < d->nvcpus; i++) {
        d->vcpus[i].applied_known = i < pins->nvcpus;
        if (i < pins->nvcpus)
            d->vcpus[i].applied = pins->vcpus[i];
    }
    d->emulator.applied = pins->emulator;
    d->emulator.applied_known = true;
    for (unsigned i = 0; i < d->niothreads; i++) {
        d->iothreads[i].applied_known = false;
        for (unsigned k = 0; k < pins->niothreads; k++)
            if (pins->iothread_ids[k] == d->iothreads[i].id) {
                d->iothreads[i].applied = pins->iothreads[k];
                d->iothreads[i].applied_known = true;
            }
    }
}

/*
 * One running domain as libvirt has it: its live definition and live pins.
 * Its persistent definition is never read: a `virsh define` while it runs
 * changes the next run, not what this one asked for.
 */
struct dom_read {
    struct vpack_virt_domain info;
    struct vpack_virt_pins pins;
    struct vpack_domxml *live;
};

static void dom_read_clear(struct dom_read *rd)
{
    vpack_domxml_free(rd->live);
    vpack_virt_pins_clear(&rd->pins);
    vpack_virt_domain_clear(&rd->info);
}

/* Parses one of the domain's definitions; what fails is logged. */
static int parse_xml(const char *name, const char *which, const char *xml,
                     struct vpack_domxml **out)
{
    char *err = NULL;
    int r = vpack_domxml_parse(xml, strlen(xml), out, &err);
    if (r < 0)
        log_warn("domain %s: cannot read its %s XML: %s", name, which, err ? err : "?");
    free(err);
    return r;
}

static int dom_read(struct vpack_agent *a, const char *uuid, struct dom_read *rd)
{
    char *err = NULL;
    int r = vpack_virt_domain_get(a->virt, uuid, &rd->info, &err);
    if (r < 0) {
        if (r != -ENOENT)
            log_warn("domain %s: cannot read its definition: %s", uuid, err ? err : "?");
        free(err);
        return r;
    }
    if ((r = parse_xml(rd->info.name, "live", rd->info.live_xml, &rd->live)) < 0)
        return r;
    r = vpack_virt_pins_get(a->virt, uuid, &rd->pins, &err);
    if (r < 0)
        log_warn("domain %s: cannot read its live pins: %s", rd->info.name, err ? err : "?");
    free(err);
    return r;
}

/* Takes the domain's name, level and persistence; logs a level change. */
static int take_identity(struct agent_dom *d, const struct dom_read *rd)
{
    char *name = strdup(rd->info.name);
    if (!name)
        return -ENOMEM;
    free(d->name);
    d->name = name;
    int own = d->rule ? -1 : d->level; /* take_rule() follows */
    if (d->known && own != rd->live->level)
        log_info("domain %s: power policy level %d -> %d", d->name, own, rd->live->level);
    d->level = rd->live->level;
    d->persistent = rd->info.persistent;
    return 0;
}

/*
 * Without its own level (take_identity() just read it), the first rule of
 * the configuration that matches the domain's name and live XML gives it
 * one; logs a change.
 */
static int take_rule(struct vpack_agent *a, struct agent_dom *d, const struct dom_read *rd)
{
    struct vpack_level lv;
    char *err = NULL, *rule = NULL;
    const char *xml = rd->info.live_xml;
    if (vpack_rules_resolve(&a->cfg.rules, d->level, -1, d->name, xml, strlen(xml), &lv, &err) < 0)
        log_warn("domain %s: cannot match the rules: %s", d->name, err ? err : "out of memory");
    free(err);
    if (lv.source == VPACK_LEVEL_RULE && !(rule = strdup(lv.rule)))
        return -ENOMEM;
    if (rule && (!d->rule || strcmp(rule, d->rule)))
        log_info("domain %s: level %d from rule \"%s\"", d->name, lv.level, rule);
    else if (!rule && d->rule && d->level < 0)
        log_info("domain %s: no rule matches any more: the default level applies", d->name);
    free(d->rule);
    d->rule = rule;
    d->level = lv.level;
    return 0;
}

/*
 * What a domain seen for the first time asked for: its live XML with the
 * pins of vpack's request metadata in place of the live ones when it has
 * that metadata (*from_meta), else its live XML (taken from rd). Returns 0
 * with *req, or <0 (logged: the domain is left alone).
 */
static int first_sight(struct agent_dom *d, struct dom_read *rd, struct vpack_domxml **req,
                       bool *from_meta)
{
    const char *xml = rd->info.live_xml;
    char *fixed = NULL, *err = NULL;
    int r = vpack_domxml_request_restore(xml, strlen(xml), &fixed, &err);
    *req = NULL;
    *from_meta = r == 1;
    if (r < 0) {
        log_warn("domain %s: %s: leaving the domain alone", d->name,
                 err ? err : strerror(-r));
        free(err);
        return r;
    }
    if (r == 0) {
        *req = rd->live;
        rd->live = NULL;
        return 0;
    }
    r = parse_xml(d->name, "live (with vpack's request)", fixed, req);
    free(fixed);
    return r;
}

/*
 * What this run of d asked for: its record, if it is this run's (the hook's,
 * or the one vpackd wrote at first sight), else the live XML now, at first
 * sight, which becomes its record. Sets d->req (NULL: not known, hands off),
 * d->origin and, from the record, d->managed.
 */
static void take_run(struct vpack_agent *a, struct agent_dom *d, struct dom_read *rd,
                     const struct agent_run *run)
{
    struct record_meta meta;
    struct vpack_domxml *req = NULL;
    char *why = NULL;
    int r = vpack__record_read(a, d->uuid, &req, &meta, &why);

    vpack_domxml_free(d->req);
    d->req = NULL;
    d->origin = REQ_NONE;
    d->managed = false;
    d->marked = false;
    d->mark_failed = false;
    d->run = *run;
    if (r == 0 && meta.run.pid > 0 && run->pid > 0 && !vpack__run_same(&meta.run, run)) {
        log_info("domain %s: the record is of an earlier run (pid %d), not this one (pid %d): "
                 "discarded", d->name, meta.run.pid, run->pid);
        vpack__record_discard(a, d->uuid);
        vpack_domxml_free(req);
        req = NULL;
        r = -ENOENT;
    }
    if (r == 0 && vpack_domxml_request_check(req, rd->live, &why) < 0)
        r = -EINVAL;
    if (r < 0 && r != -ENOENT) {
        log_warn("domain %s: its record %s/domains/%s.json is %s%s: leaving the domain alone",
                 d->name, a->cfg.state_dir, d->uuid, r == -EINVAL ? "damaged: " : "",
                 why ? why : strerror(-r));
        vpack_domxml_free(req);
        free(why);
        return;
    }
    free(why);
    if (r == 0) {
        d->req = req;
        d->origin = meta.origin;
        d->managed = meta.narrowed;
        if (meta.run.pid == 0 && run->pid > 0) {
            meta.run = *run; /* bound to this run from now on */
            if (vpack__record_write(a, d->uuid, req, &meta) < 0)
                log_warn("domain %s: cannot bind its record to this run", d->name);
        }
        log_debug("domain %s: request from its record (%s)%s", d->name,
                  vpack__origin_name(d->origin), d->managed ? ", narrowed by vpack" : "");
        return;
    }
    /* First sight: the live XML is what it asked for, unless it carries vpack's request
     * (the run was restored or migrated from a run vpack placed). */
    bool from_meta = false;
    if ((r = first_sight(d, rd, &req, &from_meta)) < 0)
        return;
    meta = (struct record_meta){*run, REQ_LIVE, false};
    d->req = req;
    d->origin = REQ_LIVE;
    if ((r = vpack__record_write(a, d->uuid, d->req, &meta)) < 0)
        log_warn("domain %s: cannot keep its record in %s/domains: %s", d->name,
                 a->cfg.state_dir, strerror(-r));
    if (from_meta)
        log_info("domain %s: no record: what it asked for is vpack's request in its live "
                 "metadata (the live pins are vpack's, from an earlier run)", d->name);
    else
        log_info("domain %s: no record: what it asked for is its live XML at first sight",
                 d->name);
}

/* Re-reads the domain's identity, level and live pins; its request once per run. */
int vpack__dom_refresh(struct vpack_agent *a, struct agent_dom *d)
{
    struct dom_read rd = {0};
    struct agent_run run;
    int r = dom_read(a, d->uuid, &rd);
    if (r < 0 || (r = take_identity(d, &rd)) < 0 || (r = take_rule(a, d, &rd)) < 0)
        goto cleanup;
    /* Threads are kept across a refresh (sorted again below) unless the process or the
     * thread arrays change. */
    if (rd.info.pid != d->pid || rd.live->vcpus != d->nvcpus ||
        rd.live->niothreads != d->niothreads)
        vpack__dom_threads_close(d);
    if (rd.info.pid != d->pid)
        threads_counters_reset(d); /* a new run: its counters start from its threads' start */
    if ((r = size_threads(d, rd.live)) < 0)
        goto cleanup;
    vpack__run_of(a, rd.info.pid, &run);
    /* Once per run (a pid that cannot be told keeps the request it has). */
    if (!d->req || (run.pid > 0 && !vpack__run_same(&d->run, &run))) {
        take_run(a, d, &rd, &run);
        a->cpusets_look = true; /* a new run has new cpuset groups */
    }
    d->known = d->req != NULL;
    if (d->req) {
        take_request(d, d->req);
        if (d->req->placement == VPACK_VCPU_PLACEMENT_AUTO && !auto_bound(a, d))
            d->known = false;
    }
    take_pins(d, &rd.pins);
    vpack_cgroup_domain_clear(&d->cg);
    vpack_cgroup_domain_find(a->cfg.sysfs_root, &a->cgroup, rd.info.pid, &d->cg);
    d->pid = rd.info.pid;
    vpack__dom_find_threads(a, d);
    d->refresh = false;
    a->replan = true; /* its pins may have changed under vpack: compare them with a plan */
    log_debug("domain %s: refreshed (level %d, %u vCPUs, %u iothreads%s)", d->name, d->level,
              d->nvcpus, d->niothreads, d->known ? "" : ", request unknown: unmanaged");
cleanup:
    dom_read_clear(&rd);
    return r;
}

void vpack__dom_narrowed(struct vpack_agent *a, struct agent_dom *d)
{
    struct record_meta meta = {d->run, d->origin, true};
    int r = d->req ? vpack__record_write(a, d->uuid, d->req, &meta) : -ENOENT;
    if (r < 0)
        log_warn("domain %s: cannot note in its record that vpack narrowed it (%s): a restart "
                 "would not know", d->name, strerror(-r));
}

int vpack__dom_mark(struct vpack_agent *a, struct agent_dom *d)
{
    char *xml = d->req ? vpack_domxml_request_format(d->req) : NULL, *err = NULL;
    int r = xml ? vpack_virt_set_request(a->virt, d->uuid, xml, &err) : -ENOMEM;
    free(xml);
    if (r < 0 && !d->mark_failed)
        log_warn("domain %s: cannot write its request to its live metadata (%s): not placing "
                 "it until it can (a save or a migration would take vpack's pins for its own)",
                 d->name, err ? err : strerror(-r));
    else if (r == 0 && d->mark_failed)
        log_info("domain %s: its request is in its live metadata now", d->name);
    free(err);
    d->mark_failed = r < 0;
    d->marked = r == 0;
    /* Retried after 1, 2, 4 ... 64 intervals (plan_pending() plans for it, steady or
     * not): a libvirtd that refuses does not get a call and a plan every interval. */
    if (r < 0) {
        d->mark_next = a->ctr.samples + (UINT64_C(1) << (d->mark_tries < 6 ? d->mark_tries : 6));
        d->mark_tries++;
    } else {
        d->mark_tries = 0;
    }
    return r;
}

bool vpack__dom_mark_due(const struct vpack_agent *a, const struct agent_dom *d)
{
    return !d->mark_failed || a->ctr.samples >= d->mark_next;
}

void vpack__doms_refresh(struct vpack_agent *a)
{
    for (unsigned i = 0; i < a->ndoms; i++)
        if (a->doms[i].refresh && vpack__dom_refresh(a, &a->doms[i]) == -ENOENT)
            vpack__dom_remove(a, a->doms[i--].uuid);
}

void vpack__doms_list_running(struct vpack_agent *a)
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
            vpack__dom_remove(a, a->doms[i].uuid);
    }
    /* And the records of domains that are not running (stopped while vpackd was down). */
    vpack__records_sweep(a, uuids, n);
    for (unsigned k = 0; k < n; k++) {
        struct agent_dom *d = vpack__dom_add(a, uuids[k]);
        if (d)
            d->refresh = true;
        free(uuids[k]);
    }
    free(uuids);
    a->need_list = false;
}

int vpack_agent_register(struct vpack_agent *a, const struct vpack_ctl_request *req, char **errmsg)
{
    struct agent_dom *d = vpack__dom_find(a, req->uuid);
    struct record_meta meta = {{0, 0}, REQ_HOOK, false}, old;
    struct vpack_domxml *rec = NULL;
    char *err = NULL;
    *errmsg = NULL;
    /* At libvirtd's reconnect the live XML may carry vpack's own pins: the
     * record of the run, if there is one, stays the record. */
    if (req->reconnect && ((d && d->req) || vpack__record_read(a, req->uuid, &rec, &old, &err) !=
                                                   -ENOENT)) {
        vpack_domxml_free(rec);
        free(err);
        log_debug("domain %s: reconnect: keeping the record of its run", req->name);
        return 0;
    }
    int r = vpack_domxml_from_json_object(req->record, &rec, &err);
    if (r < 0) {
        r = vpack__errmsg(errmsg, r, "the domain record is damaged: %s",
                          err ? err : strerror(-r));
        free(err);
        return r;
    }
    /* The run it is of: the pid file, no libvirt call (libvirtd waits for the hook). */
    vpack__run_of(a, vpack_virt_qemu_pid(req->name), &meta.run);
    if (d && d->managed && vpack__run_same(&d->run, &meta.run))
        meta.narrowed = true;
    r = vpack__record_write(a, req->uuid, rec, &meta);
    vpack_domxml_free(rec);
    if (r < 0)
        return vpack__errmsg(errmsg, r, "cannot store the record in %s/domains/%s.json: %s",
                             a->cfg.state_dir, req->uuid, strerror(-r));
    if ((d = vpack__dom_add(a, req->uuid))) {
        d->refresh = true;
        vpack_domxml_free(d->req); /* taken again, from this record */
        d->req = NULL;
    }
    log_info("domain %s: registered by the hook", req->name);
    return 0;
}

int vpack_agent_forget(struct vpack_agent *a, const struct vpack_ctl_request *req, char **errmsg)
{
    *errmsg = NULL;
    vpack__record_discard(a, req->uuid);
    return 0;
}
