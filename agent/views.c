// SPDX-License-Identifier: MIT
/*
 * The agent as JSON: status (the control socket's "status"), explain (one
 * domain), the last snapshot, the moves of a rebalance, and everything the
 * metrics endpoint exports. Every view is built with vpack/json.h and returns
 * NULL (or -ENOMEM) when an allocation fails, never half a view.
 */
#include "agent-priv.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vpack/json.h"
#include "vpack-build.h"
#include "vpack-commit.h"

static const char *const pin_why_names[PIN_NWHY] = {"plan", "hotplug", "stop"};
static const char *const pin_result_names[RES_N] = {"ok", "domain_gone", "invalid_cpus",
                                                   "transient", "error"};

/* Mean smoothed busy fraction of the package's CPUs that report; *n counts them. */
static double package_busy(const struct vpack_agent *a, const struct vpack_package *pk,
                           unsigned *n)
{
    double busy = 0;
    *n = 0;
    VPACK_CPUSET_FOREACH(c, &pk->cpus)
    {
        if ((unsigned)c < a->ncpu_busy && a->cpu_busy[c] >= 0) {
            busy += a->cpu_busy[c];
            (*n)++;
        }
    }
    return *n ? busy / *n : 0;
}

/* Active in the last plan (every package is, before the first). */
static bool package_active(const struct vpack_agent *a, const struct vpack_package *pk)
{
    bool active = !a->plan;
    for (unsigned k = 0; a->plan && k < a->plan->nactive; k++)
        active |= a->plan->active_packages[k] == pk->id;
    return active;
}

void vpack_agent_summary(const struct vpack_agent *a, struct vpack_agent_summary *out)
{
    *out = (struct vpack_agent_summary){.packages = a->topo->npackages};
    for (unsigned p = 0; p < a->topo->npackages; p++)
        out->active += package_active(a, &a->topo->packages[p]);
    for (unsigned i = 0; i < a->ndoms; i++)
        out->domains += a->doms[i].name && vpack__dom_placed(a, &a->doms[i]);
}

/* "level", "level_source" ("domain", "rule", "default") and "rule" (its name or null). */
static void domain_level(const struct vpack_agent *a, const struct agent_dom *d,
                         struct json_object *o, bool *ok)
{
    enum vpack_level_source src = vpack__dom_level_source(d);
    vpack_json_set_int(o, "level", vpack__dom_level(a, d), ok);
    vpack_json_set_str(o, "level_source", vpack_level_source_name(src), ok);
    if (src == VPACK_LEVEL_RULE)
        vpack_json_set_str(o, "rule", d->rule, ok);
    else
        vpack_json_set_null(o, "rule", ok);
}

/* "name", the level, "managed" and "packages" of a domain: what every view starts with. */
static struct json_object *domain_head(const struct vpack_agent *a, const struct agent_dom *d,
                                       bool *ok)
{
    struct json_object *o = json_object_new_object();
    vpack_json_set_str(o, "name", d->name, ok);
    domain_level(a, d, o, ok);
    vpack_json_set_bool(o, "managed", vpack__dom_placed(a, d), ok);
    vpack_json_set(o, "packages", vpack_json_ints(d->packages, d->npackages), ok);
    return o;
}

static struct json_object *status_package(const struct vpack_agent *a,
                                          const struct vpack_package *pk, bool *ok)
{
    struct json_object *o = json_object_new_object(), *doms = json_object_new_array();
    unsigned n;
    double busy = package_busy(a, pk, &n);
    vpack_json_set_int(o, "id", pk->id, ok);
    vpack_json_set_cpuset(o, "cpus", &pk->cpus, ok);
    vpack_json_set_int(o, "cores", pk->ncores, ok);
    vpack_json_set_double(o, "busy", busy, ok);
    vpack_json_set_double(o, "idle", n ? 1 - busy : 1, ok);
    vpack_json_set_str(o, "state", package_active(a, pk) ? "active" : "parked", ok);
    for (unsigned i = 0; i < a->ndoms; i++)
        for (unsigned k = 0; k < a->doms[i].npackages; k++)
            if (a->doms[i].packages[k] == pk->id && a->doms[i].name)
                vpack_json_append(doms, json_object_new_string(a->doms[i].name), ok);
    vpack_json_set(o, "domains", doms, ok);
    return o;
}

/* The counters as status and the metrics show them: libvirt_calls is adapters/virt.c's. */
static struct vpack_counters counters_now(const struct vpack_agent *a)
{
    struct vpack_counters c = a->ctr;
    c.libvirt_calls = vpack_virt_calls(a->virt);
    return c;
}

/* "cycle_ns": wall time spent in each part of the intervals so far (agent-priv.h). */
static struct json_object *status_phases(const struct vpack_agent *a, bool *ok)
{
    static const char *const names[PHASE_N] = {"cpus", "domains", "steady", "plan", "own"};
    struct json_object *o = json_object_new_object();
    for (unsigned p = 0; p < PHASE_N; p++)
        vpack_json_set_int(o, names[p], (int64_t)a->phase_ns[p], ok);
    return o;
}

/* "agent_threads": the package vpackd's own threads follow (null: not confined) and their CPUs. */
static struct json_object *status_own(const struct vpack_agent *a, bool *ok)
{
    struct json_object *o = json_object_new_object();
    int pk = a->own_package >= 0 ? vpack_topology_package_index(a->topo, a->own_package) : -1;
    if (pk >= 0) {
        vpack_cpuset m;
        vpack_cpuset_and(&m, &a->own_mask, &a->topo->packages[pk].cpus);
        vpack_json_set_int(o, "package", a->own_package, ok);
        vpack_json_set_cpuset(o, "cpus", &m, ok);
    } else {
        vpack_json_set_null(o, "package", ok);
        vpack_json_set_cpuset(o, "cpus", a->own_known ? &a->own_mask : NULL, ok);
    }
    return o;
}

static void status_plan(const struct vpack_plan *plan, struct json_object *root, bool *ok)
{
    vpack_json_set_str(root, "reason", plan->reason, ok);
    vpack_json_set_double(root, "demand", plan->demand, ok);
    vpack_json_set_bool(root, "lifted", plan->lifted, ok);
    if (plan->wakeup_package >= 0)
        vpack_json_set_int(root, "wakeup_package", plan->wakeup_package, ok);
    else
        vpack_json_set_null(root, "wakeup_package", ok);
}

/* Appends {"feature": feature, "why": why} to arr; why is freed (NULL: out of memory). */
static void unavailable(struct json_object *arr, const char *feature, char *why, bool *ok)
{
    struct json_object *o = json_object_new_object();
    vpack_json_set_str(o, "feature", feature, ok);
    vpack_json_set(o, "why", why ? json_object_new_string(why) : NULL, ok);
    vpack_json_append(arr, o, ok);
    free(why);
}

/* What a domain's reads could not see: its iothreads' load, its memory placement. */
static void domain_unavailable(const struct vpack_agent *a, const struct agent_dom *d,
                               struct json_object *arr, bool *ok)
{
    char *why;
    /* Only once it was sampled: before that, nothing was tried. */
    if (!d->name || !d->have_prev_cpu)
        return;
    for (unsigned t = 0; t < d->niothreads; t++) {
        int id = d->iothreads[t].id;
        if (d->iothreads[t].source != SRC_NONE)
            continue;
        if (asprintf(&why, "domain %s, iothread %d: QEMU names no thread 'IO iothread%d' and "
                     "no cgroup group of it was found", d->name, id, id) < 0)
            why = NULL;
        unavailable(arr, "iothread-load", why, ok);
    }
    if (!d->mem_error || a->cgroup.memory == VPACK_CGROUP_NONE)
        return;
    if (!d->cg.memory ? asprintf(&why, "domain %s: its QEMU process (pid %d) has no memory "
                                       "cgroup of its own", d->name, d->pid) < 0
                      : asprintf(&why, "domain %s: cannot read %s/memory.numa_stat: %s", d->name,
                                 d->cg.memory, strerror(-d->mem_error)) < 0)
        why = NULL;
    unavailable(arr, "memory-placement", why, ok);
}

/*
 * "cgroup": the version, where cpuset and memory are, and what vpack cannot
 * do on this host or for a domain, with why.
 */
static struct json_object *status_cgroup(const struct vpack_agent *a, bool *ok)
{
    const struct vpack_cgroup_host *h = &a->cgroup;
    struct json_object *o = json_object_new_object(), *un = json_object_new_array();
    vpack_json_set_str(o, "version", vpack_cgroup_version(h), ok);
    vpack_json_set_str(o, "cpuset", vpack_cgroup_ver_name(h->cpuset), ok);
    vpack_json_set_str(o, "memory", vpack_cgroup_ver_name(h->memory), ok);
    if (h->mounts.unified)
        vpack_json_set_str(o, "unified", h->mounts.unified, ok);
    else
        vpack_json_set_null(o, "unified", ok);
    if (h->memory == VPACK_CGROUP_NONE)
        unavailable(un, "memory-placement",
                    strdup("no memory controller (no v1 hierarchy, not in the cgroup2 root's "
                           "cgroup.controllers): where a domain's memory is stays unknown"),
                    ok);
    if (h->cpuset == VPACK_CGROUP_NONE)
        unavailable(un, "hotplug-cpusets",
                    strdup("no cpuset controller: libvirt's cpusets are neither repaired (v1) "
                           "nor checked (v2) after CPU hotplug"),
                    ok);
    for (unsigned i = 0; i < a->ndoms; i++)
        domain_unavailable(a, &a->doms[i], un, ok);
    vpack_json_set(o, "unavailable", un, ok);
    return o;
}

/* "hold": null, or the held level and the seconds its lease has left (hold-level). */
static void status_hold(const struct vpack_agent *a, struct json_object *root, bool *ok)
{
    if (a->hold_level < 0) {
        vpack_json_set_null(root, "hold", ok);
        return;
    }
    struct json_object *o = json_object_new_object();
    uint64_t now = uv_now(a->loop);
    double left = a->hold_until_ms > now ? (double)(a->hold_until_ms - now) / 1000 : 0;
    vpack_json_set_int(o, "level", a->hold_level, ok);
    vpack_json_set_double(o, "seconds_left", left, ok);
    vpack_json_set(root, "hold", o, ok);
}

int vpack_agent_status_json(struct vpack_agent *a, struct json_object **out)
{
    struct json_object *root = json_object_new_object();
    struct json_object *pkgs = json_object_new_array(), *doms = json_object_new_array();
    bool ok = true;
    a->ctr.view_renders++;
    vpack_json_set_bool(root, "libvirt_connected", vpack_virt_connected(a->virt), &ok);
    vpack_json_set_str(root, "topology", a->cfg.topology, &ok);
    if (a->plan)
        status_plan(a->plan, root, &ok);
    for (unsigned p = 0; p < a->topo->npackages; p++)
        vpack_json_append(pkgs, status_package(a, &a->topo->packages[p], &ok), &ok);
    vpack_json_set(root, "packages", pkgs, &ok);
    for (unsigned i = 0; i < a->ndoms; i++) {
        const struct agent_dom *d = &a->doms[i];
        if (!d->name)
            continue;
        struct json_object *o = domain_head(a, d, &ok);
        vpack_json_set_str(o, "reason", d->reason ? d->reason : "", &ok);
        vpack_json_append(doms, o, &ok);
    }
    vpack_json_set(root, "domains", doms, &ok);
    status_hold(a, root, &ok);
    vpack_json_set(root, "cgroup", status_cgroup(a, &ok), &ok);
    struct vpack_counters ctr = counters_now(a);
    vpack_json_set(root, "counters", vpack_counters_json(&ctr), &ok);
    vpack_json_set(root, "agent_threads", status_own(a, &ok), &ok);
    vpack_json_set(root, "cycle_ns", status_phases(a, &ok), &ok);
    *out = vpack_json_finish(root, ok);
    return *out ? 0 : -ENOMEM;
}

/* One thread; source says where its load is read ("libvirt", "thread-name", ...). */
static struct json_object *thread_json(const struct agent_thread *t, const char *label,
                                       const char *source, bool *ok)
{
    struct json_object *o = json_object_new_object();
    if (label)
        vpack_json_set_str(o, "thread", label, ok);
    else
        vpack_json_set_int(o, "id", t->id, ok);
    vpack_json_set_cpuset(o, "pin", t->has_pin ? &t->pin : NULL, ok);
    vpack_json_set_cpuset(o, "cpus", t->applied_known ? &t->applied : NULL, ok);
    vpack_json_set_double(o, "util", t->util, ok);
    vpack_json_set_double(o, "delay", t->delay, ok);
    vpack_json_set_str(o, "source", source, ok);
    return o;
}

/* A vCPU's or an iothread's thread, with its "tid" when it is read by its name. */
static struct json_object *named_thread_json(const struct agent_thread *t, bool *ok)
{
    struct json_object *j = thread_json(t, NULL, vpack__source_name(t->source), ok);
    if (t->source == SRC_NAME && t->ntids == 1)
        vpack_json_set_int(j, "tid", t->tids[0].tid, ok);
    return j;
}

/*
 * "vcpus" (the online ones), "emulator" and "iothreads" of d into o; each
 * says where its load is read ("thread-name": the schedstat of the thread
 * QEMU named; "libvirt"; the emulator's "remainder" of cpu.time).
 */
static void explain_threads(const struct agent_dom *d, struct json_object *o, bool *ok)
{
    struct json_object *vc = json_object_new_array(), *io = json_object_new_array();
    for (unsigned v = 0; v < d->nvcpus; v++)
        if (d->vcpu_online[v])
            vpack_json_append(vc, named_thread_json(&d->vcpus[v], ok), ok);
    vpack_json_set(o, "vcpus", vc, ok);
    struct json_object *em =
        thread_json(&d->emulator, "emulator", vpack__source_name(d->emulator.source), ok);
    if (d->emulator.source == SRC_NAME)
        vpack_json_set_int(em, "threads", d->emulator.ntids, ok);
    vpack_json_set(o, "emulator", em, ok);
    for (unsigned t = 0; t < d->niothreads; t++)
        vpack_json_append(io, named_thread_json(&d->iothreads[t], ok), ok);
    vpack_json_set(o, "iothreads", io, ok);
}

/* "memory": where it was read, how much, and its share per NUMA node. */
static struct json_object *explain_memory(const struct agent_dom *d, bool *ok)
{
    struct json_object *o = json_object_new_object(), *nodes = json_object_new_array();
    vpack_json_set_str(o, "source", vpack__source_name(d->mem_source), ok);
    if (d->cg.memory)
        vpack_json_set_str(o, "dir", d->cg.memory, ok);
    else
        vpack_json_set_null(o, "dir", ok);
    vpack_json_set_int(o, "bytes", (int64_t)(d->mem_bytes > INT64_MAX ? INT64_MAX : d->mem_bytes),
                       ok);
    for (unsigned m = 0; m < d->nmem; m++) {
        struct json_object *n = json_object_new_object();
        vpack_json_set_int(n, "node", d->mem[m].node, ok);
        vpack_json_set_double(n, "share", d->mem[m].share, ok);
        vpack_json_append(nodes, n, ok);
    }
    vpack_json_set(o, "nodes", nodes, ok);
    if (d->mem_error)
        vpack_json_set_str(o, "error", strerror(-d->mem_error), ok);
    else
        vpack_json_set_null(o, "error", ok);
    return o;
}

int vpack_agent_explain_json(struct vpack_agent *a, const char *name, struct json_object **out)
{
    const struct agent_dom *d = NULL;
    bool ok = true;
    *out = NULL;
    for (unsigned i = 0; i < a->ndoms && !d; i++)
        if (a->doms[i].name && !strcmp(a->doms[i].name, name))
            d = &a->doms[i];
    if (!d)
        return -ENOENT;
    struct json_object *o = json_object_new_object();
    vpack_json_set_str(o, "name", d->name, &ok);
    vpack_json_set_str(o, "uuid", d->uuid, &ok);
    domain_level(a, d, o, &ok);
    vpack_json_set_bool(o, "level_set", vpack__dom_level_source(d) == VPACK_LEVEL_DOMAIN, &ok);
    vpack_json_set_bool(o, "managed", vpack__dom_placed(a, d), &ok);
    vpack_json_set_cpuset(o, "cpuset", d->has_bound ? &d->bound : NULL, &ok);
    vpack_json_set_str(o, "bound_source", !d->has_bound ? "none" : d->bound_auto ? "numad" : "cpuset",
                       &ok);
    vpack_json_set_str(o, "request", vpack__origin_name(d->origin), &ok);
    vpack_json_set_bool(o, "narrowed", d->managed, &ok);
    vpack_json_set_str(o, "reason", d->reason ? d->reason : "", &ok);
    vpack_json_set(o, "packages", vpack_json_ints(d->packages, d->npackages), &ok);
    explain_threads(d, o, &ok);
    vpack_json_set(o, "memory", explain_memory(d, &ok), &ok);
    *out = vpack_json_finish(o, ok);
    return *out ? 0 : -ENOMEM;
}

int vpack_agent_snapshot_json(struct vpack_agent *a, struct json_object **out)
{
    *out = NULL;
    a->ctr.view_renders++;
    if (!a->snap)
        return 0;
    *out = vpack_snapshot_to_json_object(a->snap);
    return *out ? 0 : -ENOMEM;
}

struct json_object *vpack_moves_json(const struct vpack_move *moves, unsigned n)
{
    struct json_object *arr = json_object_new_array();
    bool ok = true;
    for (unsigned i = 0; i < n; i++) {
        struct json_object *m = json_object_new_object();
        vpack_json_set_str(m, "domain", moves[i].domain, &ok);
        vpack_json_set_str(m, "threads", moves[i].threads, &ok);
        vpack_json_set_str(m, "from", moves[i].from, &ok);
        vpack_json_set_str(m, "to", moves[i].to, &ok);
        vpack_json_set_str(m, "reason", moves[i].reason, &ok);
        vpack_json_append(arr, m, &ok);
    }
    return vpack_json_finish(arr, ok);
}

/* Seconds the package's CPUs spent idle since boot (the last /proc/stat reading). */
static double package_idle_seconds(const struct vpack_agent *a, const struct vpack_package *pk)
{
    double hz = (double)sysconf(_SC_CLK_TCK), idle_s = 0;
    VPACK_CPUSET_FOREACH(c, &pk->cpus)
    {
        for (unsigned k = 0; k < a->nprev_times; k++)
            if (a->prev_times[k].cpu == c)
                idle_s += (double)(a->prev_times[k].total - a->prev_times[k].busy) / hz;
    }
    return idle_s;
}

static void metrics_package(const struct vpack_agent *a, const struct vpack_package *pk,
                            struct vpack_prom_package *out)
{
    unsigned n;
    *out = (struct vpack_prom_package){pk->id, package_busy(a, pk, &n),
                                       package_idle_seconds(a, pk), package_active(a, pk),
                                       a->plan && a->plan->wakeup_package == pk->id};
}

/*
 * The share of a placed domain's memory outside the packages it is placed
 * on; false when none of those packages has a known NUMA node.
 */
static bool remote_memory(const struct vpack_agent *a, const struct agent_dom *d, double *remote)
{
    double local = 0;
    bool nodes = false;
    for (unsigned k = 0; k < d->npackages; k++) {
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
    *remote = local >= 1 ? 0 : 1 - local;
    return nodes;
}

/* A thread's counters, once it has counted something in this run. */
static void metrics_thread(const struct agent_thread *t, enum vpack_prom_thread_class cls,
                           unsigned id, struct vpack_prom_domain *out)
{
    if (t->time.counted)
        out->threads[out->nthreads++] = (struct vpack_prom_thread){
            cls, id, (double)t->time.run_ns / 1e9, (double)t->time.wait_ns / 1e9,
            t->time.wait_known};
}

static int metrics_domain(const struct vpack_agent *a, const struct agent_dom *d,
                          struct vpack_prom_domain *out)
{
    bool placed = vpack__dom_placed(a, d);
    *out = (struct vpack_prom_domain){.name = strdup(d->name), .level = vpack__dom_level(a, d),
                                      .managed = placed, .remote_memory = -1};
    if (!out->name)
        return -ENOMEM;
    if (d->npackages) {
        if (!(out->packages = calloc(d->npackages, sizeof(*out->packages))))
            return -ENOMEM;
        memcpy(out->packages, d->packages, d->npackages * sizeof(*out->packages));
        out->npackages = d->npackages;
    }
    if (!(out->threads = calloc(d->nvcpus + 1 + d->niothreads, sizeof(*out->threads))))
        return -ENOMEM;
    for (unsigned v = 0; v < d->nvcpus; v++)
        metrics_thread(&d->vcpus[v], VPACK_PROM_VCPU, v, out);
    metrics_thread(&d->emulator, VPACK_PROM_EMULATOR, 0, out);
    for (unsigned i = 0; i < d->niothreads; i++)
        metrics_thread(&d->iothreads[i], VPACK_PROM_IOTHREAD, (unsigned)d->iothreads[i].id, out);
    /* Memory outside the packages it is placed on, where NUMA nodes are known. */
    double remote;
    if (d->nmem && d->npackages > 0 && placed && remote_memory(a, d, &remote))
        out->remote_memory = remote;
    return 0;
}

/* The pin and rebalance counters, labelled by the enums' names. */
static int metrics_counts(const struct vpack_agent *a, struct vpack_prom_metrics *m)
{
    m->rebalances = calloc(VPACK_WHY_N, sizeof(*m->rebalances));
    m->pin_ops = calloc((size_t)PIN_NWHY * RES_N, sizeof(*m->pin_ops));
    if (!m->rebalances || !m->pin_ops)
        return -ENOMEM;
    for (int w = 0; w < VPACK_WHY_N; w++)
        m->rebalances[m->nrebalances++] =
            (struct vpack_prom_count){vpack_plan_why_name(w), NULL, a->rebalances[w]};
    for (int w = 0; w < PIN_NWHY; w++)
        for (int r = 0; r < RES_N; r++)
            m->pin_ops[m->npin_ops++] =
                (struct vpack_prom_count){pin_why_names[w], pin_result_names[r], a->pin_ops[w][r]};
    return 0;
}

struct vpack_prom_metrics *vpack_agent_metrics(void *agent)
{
    struct vpack_agent *a = agent;
    vpack__sample_counters(a); /* the thread counters as of the scrape, not of the last read */
    struct vpack_prom_metrics *m = calloc(1, sizeof(*m));
    a->ctr.metrics_renders++;
    if (!m)
        return NULL;
    m->version = VPACK_VERSION;
    m->commit = VPACK_COMMIT;
    m->libvirt = vpack_virt_lib_version(a->virt);
    m->connected = vpack_virt_connected(a->virt);
    m->demand = a->plan ? a->plan->demand : 0;
    m->lifted = a->plan && a->plan->lifted;
    m->plan_duration = a->plan_hist;
    m->cycle_duration = a->cycle_hist;
    m->counters = counters_now(a);
    if (!(m->packages = calloc(a->topo->npackages, sizeof(*m->packages))) ||
        (a->ndoms && !(m->domains = calloc(a->ndoms, sizeof(*m->domains)))) ||
        metrics_counts(a, m) < 0)
        goto fail;
    for (unsigned p = 0; p < a->topo->npackages; p++)
        metrics_package(a, &a->topo->packages[p], &m->packages[m->npackages++]);
    for (unsigned i = 0; i < a->ndoms; i++)
        if (a->doms[i].name && metrics_domain(a, &a->doms[i], &m->domains[m->ndomains++]) < 0)
            goto fail;
    return m;
fail:
    vpack_prom_metrics_free(m);
    return NULL;
}
