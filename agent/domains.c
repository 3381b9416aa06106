// SPDX-License-Identifier: MIT
/*
 * The agent's domain table: one entry per running domain, refreshed from
 * libvirt when an event or a failed pin marks it, and the hook's records
 * under state_dir/domains/ (what a transient domain asked for at start).
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
#include "vpack/domxml.h"

/* Frees what d owns (free()s in a row, alike in shape to every destructor). */
void vpack__dom_free(struct agent_dom *d)
{
    free(d->name);
    free(d->rule);
    free(d->vcpus);
    free(d->vcpu_online);
    free(d->iothreads);
    free(d->reason);
    free(d->packages);
    vpack_cgroup_domain_clear(&d->cg);
    free(d->mem);
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
    return d;
}

void vpack__dom_remove(struct vpack_agent *a, const char *uuid)
{
    for (unsigned i = 0; i < a->ndoms; i++) {
        if (strcmp(a->doms[i].uuid, uuid))
            continue;
        log_info("domain %s stopped: forgotten", a->doms[i].name ? a->doms[i].name : uuid);
        vpack__dom_free(&a->doms[i]);
        memmove(&a->doms[i], &a->doms[i + 1], (a->ndoms - i - 1) * sizeof(*a->doms));
        a->ndoms--;
        return;
    }
}

int vpack__dom_level(const struct vpack_agent *a, const struct agent_dom *d)
{
    return d->level >= 0 ? d->level : a->cfg.policy.default_level;
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
    static const char *const names[] = {"none", "thread-name", "cgroup-v1", "cgroup-v2"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "none";
}

/*
 * QEMU's threads, by the names it gives them with debug-threads=on:
 * "CPU N/KVM" (or /TCG) runs vCPU N, "IO iothreadN" libvirt's iothread N;
 * every other thread (the main thread, call_rcu, the thread pool's
 * "worker"s, the monitor's "IO mon_iothread", ...) is the emulator's. Only
 * the iothreads are looked up here: libvirt's bulk stats give each vCPU's
 * time, and the emulator's load is the rest of the domain's cpu.time
 * (sample.c). A "worker" that an iothread's block layer starts inherits the
 * iothread's cgroup, so the cgroup fallback counts it to the iothread; by
 * name it is the emulator's.
 */
void vpack__dom_find_threads(struct vpack_agent *a, struct agent_dom *d)
{
    struct vpack_host_thread *t = NULL;
    unsigned nt = 0, *ids = NULL, named = 0;
    d->rescan_threads = false;
    for (unsigned i = 0; i < d->niothreads; i++)
        d->iothreads[i].tid = 0;
    if (!d->niothreads || vpack_host_threads(a->cfg.sysfs_root, d->pid, &t, &nt) < 0)
        return;
    if (!(ids = calloc(d->niothreads, sizeof(*ids)))) {
        free(t);
        return;
    }
    for (unsigned i = 0; i < d->niothreads; i++)
        ids[i] = (unsigned)d->iothreads[i].id;
    for (unsigned k = 0; k < nt; k++) {
        int vcpu;
        if (vpack_qemu_thread_kind(t[k].comm, &vcpu) != VPACK_QEMU_IOTHREAD)
            continue;
        int i = vpack_qemu_iothread_match(t[k].comm, ids, d->niothreads);
        if (i == -2)
            log_debug("domain %s: thread %d '%s' could be more than one iothread (its name is "
                      "cut): reading those from their cgroups", d->name, t[k].tid, t[k].comm);
        if (i < 0)
            continue;
        /* Two threads of one name cannot be told apart: the cgroup decides. */
        d->iothreads[i].tid = d->iothreads[i].tid ? -1 : t[k].tid;
    }
    for (unsigned i = 0; i < d->niothreads; i++) {
        if (d->iothreads[i].tid < 0)
            d->iothreads[i].tid = 0;
        named += d->iothreads[i].tid > 0;
    }
    if (named < d->niothreads)
        log_debug("domain %s: %u of %u iothreads found by name (QEMU without debug-threads?); "
                  "the others are read from their cgroups", d->name, named, d->niothreads);
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

/* The name of uuid's record in state_dir/domains/. */
static void record_name(const char *uuid, char *buf, size_t len)
{
    snprintf(buf, len, "%s.json", uuid);
}

/*
 * Reads a transient domain's request from the hook's record; NULL when
 * there is none, or none to trust (vpack then keeps its hands off).
 */
static struct vpack_domxml *load_record(const struct vpack_agent *a, const struct agent_dom *d)
{
    char name[64], *buf = NULL, *err = NULL;
    struct vpack_domxml *rec = NULL;
    size_t len;
    record_name(d->uuid, name, sizeof(name));
    int r = vpack_safefs_read(a->records_fd, name, VPACK_DOMXML_MAX_SIZE, &buf, &len);
    if (r < 0) {
        if (r != -ENOENT)
            log_warn("domain %s: the hook's record %s/domains/%s is not trusted (%s): leaving the "
                     "domain alone", d->name, a->cfg.state_dir, name,
                     r == -EPERM ? "not root's own, or writable by others"
                     : r == -ELOOP ? "a symbolic link" : strerror(-r));
        return NULL;
    }
    if (vpack_domxml_from_json(buf, len, &rec, &err) < 0)
        log_warn("domain %s: the hook's record %s/domains/%s is damaged (%s): leaving it alone",
                 d->name, a->cfg.state_dir, name, err ? err : "?");
    free(err);
    free(buf);
    return rec;
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
 * Takes what the guest asked for (its persistent XML, or the hook's record
 * of a transient domain). A record naming a vCPU the domain does not have
 * is damaged: false, and vpack keeps its hands off the domain.
 */
static bool take_request(struct agent_dom *d, const struct vpack_domxml *req, bool record)
{
    d->has_bound = req->has_cpuset;
    if (req->has_cpuset)
        d->bound = req->cpuset;
    for (unsigned i = 0; i < d->nvcpus; i++)
        d->vcpus[i].has_pin = false;
    for (size_t i = 0; i < req->nvcpupin; i++) {
        if (req->vcpupin[i].vcpu >= d->nvcpus) {
            if (record)
                return false;
            continue;
        }
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

/* One domain as libvirt has it: its definitions (live, persistent) and live pins. */
struct dom_read {
    struct vpack_virt_domain info;
    struct vpack_virt_pins pins;
    struct vpack_domxml *live, *req;
};

static void dom_read_clear(struct dom_read *rd)
{
    vpack_domxml_free(rd->live);
    vpack_domxml_free(rd->req);
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
    if (rd->info.inactive_xml &&
        (r = parse_xml(rd->info.name, "persistent", rd->info.inactive_xml, &rd->req)) < 0)
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

/* Re-reads what the guest asked for (inactive XML) and what is applied (live pins). */
int vpack__dom_refresh(struct vpack_agent *a, struct agent_dom *d)
{
    struct dom_read rd = {0};
    int r = dom_read(a, d->uuid, &rd);
    if (r < 0 || (r = take_identity(d, &rd)) < 0 || (r = take_rule(a, d, &rd)) < 0 ||
        (r = size_threads(d, rd.live)) < 0)
        goto cleanup;
    if (rd.req) {
        d->known = take_request(d, rd.req, false);
    } else {
        /* Transient: only the hook's record says what it asked for; without one, hands off. */
        struct vpack_domxml *rec = load_record(a, d);
        d->known = rec && take_request(d, rec, true);
        if (rec && !d->known)
            log_warn("domain %s: the hook's record names vCPUs it does not have: leaving it alone",
                     d->name);
        vpack_domxml_free(rec);
    }
    take_pins(d, &rd.pins);
    vpack_cgroup_domain_clear(&d->cg);
    vpack_cgroup_domain_find(a->cfg.sysfs_root, &a->cgroup, rd.info.pid, &d->cg);
    d->pid = rd.info.pid;
    vpack__dom_find_threads(a, d);
    d->refresh = false;
    log_debug("domain %s: refreshed (level %d, %u vCPUs, %u iothreads%s)", d->name, d->level,
              d->nvcpus, d->niothreads, d->known ? "" : ", transient: unmanaged");
cleanup:
    dom_read_clear(&rd);
    return r;
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
    char name[64];
    struct stat st;
    *errmsg = NULL;
    record_name(req->uuid, name, sizeof(name));
    /* At libvirtd's reconnect the live XML may carry vpack's own pins: the
     * record from the domain's start, if there is one, stays the record. */
    if (req->reconnect && fstatat(a->records_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        log_debug("domain %s: reconnect: keeping the record from its start", req->name);
        return 0;
    }
    const char *text = json_object_to_json_string_ext(req->record, JSON_C_TO_STRING_PLAIN);
    int r = text ? vpack_safefs_write(a->records_fd, name, text, strlen(text), 0600) : -ENOMEM;
    if (r < 0)
        return vpack__errmsg(errmsg, r, "cannot store the record in %s/domains/%s: %s",
                             a->cfg.state_dir, name, strerror(-r));
    struct agent_dom *d = vpack__dom_add(a, req->uuid);
    if (d)
        d->refresh = true;
    log_info("domain %s: registered by the hook", req->name);
    return 0;
}

int vpack_agent_forget(struct vpack_agent *a, const struct vpack_ctl_request *req, char **errmsg)
{
    char name[64];
    *errmsg = NULL;
    record_name(req->uuid, name, sizeof(name));
    unlinkat(a->records_fd, name, 0);
    return 0;
}
