// SPDX-License-Identifier: MIT
/*
 * The agent as JSON: status (the control socket's "status"), explain (one
 * domain), the last snapshot, the moves of a rebalance, and everything the
 * metrics endpoint exports. Every view is built with jsonout.h and returns
 * NULL (or -ENOMEM) when an allocation fails, never half a view.
 */
#include "agent-priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jsonout.h"
#include "vpack-build.h"

const double vpack__hist_bounds[VPACK__NBUCKETS] = {0.0001, 0.00025, 0.0005, 0.001,
                                                    0.0025, 0.005,   0.01,   0.025,
                                                    0.05,   0.1,     0.25,   1.0};

static const char *const pin_why_names[PIN_NWHY] = {"plan", "hotplug", "stop"};
static const char *const pin_result_names[RES_N] = {"ok", "domain_gone", "invalid_cpus",
                                                   "transient", "error"};

void vpack__hist_observe(struct histogram *h, double seconds)
{
    for (size_t i = 0; i < VPACK__NBUCKETS; i++)
        if (seconds <= vpack__hist_bounds[i])
            h->buckets[i]++;
    h->count++;
    h->sum += seconds;
}

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

/* "name", "level", "managed" and "packages" of a domain: what every view starts with. */
static struct json_object *domain_head(const struct vpack_agent *a, const struct agent_dom *d,
                                       bool *ok)
{
    struct json_object *o = json_object_new_object();
    vpack__json_set_str(o, "name", d->name, ok);
    vpack__json_set_int(o, "level", vpack__dom_level(a, d), ok);
    vpack__json_set_bool(o, "managed", vpack__dom_placed(a, d), ok);
    vpack__json_set(o, "packages", vpack__json_ints(d->packages, d->npackages), ok);
    return o;
}

static struct json_object *status_package(const struct vpack_agent *a,
                                          const struct vpack_package *pk, bool *ok)
{
    struct json_object *o = json_object_new_object(), *doms = json_object_new_array();
    unsigned n;
    double busy = package_busy(a, pk, &n);
    vpack__json_set_int(o, "id", pk->id, ok);
    vpack__json_set_cpuset(o, "cpus", &pk->cpus, ok);
    vpack__json_set_int(o, "cores", pk->ncores, ok);
    vpack__json_set_double(o, "busy", busy, ok);
    vpack__json_set_double(o, "idle", n ? 1 - busy : 1, ok);
    vpack__json_set_str(o, "state", package_active(a, pk) ? "active" : "parked", ok);
    for (unsigned i = 0; i < a->ndoms; i++)
        for (unsigned k = 0; k < a->doms[i].npackages; k++)
            if (a->doms[i].packages[k] == pk->id && a->doms[i].name)
                vpack__json_append(doms, json_object_new_string(a->doms[i].name), ok);
    vpack__json_set(o, "domains", doms, ok);
    return o;
}

static struct json_object *status_counters(const struct vpack_agent *a, bool *ok)
{
    struct json_object *o = json_object_new_object();
    vpack__json_set_int(o, "samples", (int64_t)a->ctr.samples, ok);
    vpack__json_set_int(o, "plans", (int64_t)a->ctr.plans, ok);
    vpack__json_set_int(o, "pins_ok", (int64_t)a->ctr.pins_ok, ok);
    vpack__json_set_int(o, "pins_failed", (int64_t)a->ctr.pins_failed, ok);
    vpack__json_set_int(o, "rebalances", (int64_t)a->ctr.rebalances, ok);
    vpack__json_set_int(o, "hotplug_events", (int64_t)a->ctr.hotplug_events, ok);
    vpack__json_set_int(o, "cgroup_repairs", (int64_t)a->ctr.cgroup_repairs, ok);
    vpack__json_set_int(o, "connects", (int64_t)a->ctr.reconnects, ok);
    return o;
}

static void status_plan(const struct vpack_plan *plan, struct json_object *root, bool *ok)
{
    vpack__json_set_str(root, "reason", plan->reason, ok);
    vpack__json_set_double(root, "demand", plan->demand, ok);
    vpack__json_set_bool(root, "lifted", plan->lifted, ok);
    if (plan->wakeup_package >= 0)
        vpack__json_set_int(root, "wakeup_package", plan->wakeup_package, ok);
    else
        vpack__json_set_null(root, "wakeup_package", ok);
}

int vpack_agent_status_json(struct vpack_agent *a, struct json_object **out)
{
    struct json_object *root = json_object_new_object();
    struct json_object *pkgs = json_object_new_array(), *doms = json_object_new_array();
    bool ok = true;
    vpack__json_set_bool(root, "libvirt_connected", vpack_virt_connected(a->virt), &ok);
    vpack__json_set_str(root, "topology", a->cfg.topology, &ok);
    if (a->plan)
        status_plan(a->plan, root, &ok);
    for (unsigned p = 0; p < a->topo->npackages; p++)
        vpack__json_append(pkgs, status_package(a, &a->topo->packages[p], &ok), &ok);
    vpack__json_set(root, "packages", pkgs, &ok);
    for (unsigned i = 0; i < a->ndoms; i++) {
        const struct agent_dom *d = &a->doms[i];
        if (!d->name)
            continue;
        struct json_object *o = domain_head(a, d, &ok);
        vpack__json_set_str(o, "reason", d->reason ? d->reason : "", &ok);
        vpack__json_append(doms, o, &ok);
    }
    vpack__json_set(root, "domains", doms, &ok);
    vpack__json_set(root, "counters", status_counters(a, &ok), &ok);
    *out = vpack__json_finish(root, ok);
    return *out ? 0 : -ENOMEM;
}

static struct json_object *thread_json(const struct agent_thread *t, const char *label, bool *ok)
{
    struct json_object *o = json_object_new_object();
    if (label)
        vpack__json_set_str(o, "thread", label, ok);
    else
        vpack__json_set_int(o, "id", t->id, ok);
    vpack__json_set_cpuset(o, "pin", t->has_pin ? &t->pin : NULL, ok);
    vpack__json_set_cpuset(o, "cpus", t->applied_known ? &t->applied : NULL, ok);
    vpack__json_set_double(o, "util", t->util, ok);
    vpack__json_set_double(o, "delay", t->delay, ok);
    return o;
}

/* "vcpus" (the online ones), "emulator" and "iothreads" of d into o. */
static void explain_threads(const struct agent_dom *d, struct json_object *o, bool *ok)
{
    struct json_object *vc = json_object_new_array(), *io = json_object_new_array();
    for (unsigned v = 0; v < d->nvcpus; v++)
        if (d->vcpu_online[v])
            vpack__json_append(vc, thread_json(&d->vcpus[v], NULL, ok), ok);
    vpack__json_set(o, "vcpus", vc, ok);
    vpack__json_set(o, "emulator", thread_json(&d->emulator, "emulator", ok), ok);
    for (unsigned t = 0; t < d->niothreads; t++)
        vpack__json_append(io, thread_json(&d->iothreads[t], NULL, ok), ok);
    vpack__json_set(o, "iothreads", io, ok);
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
    vpack__json_set_str(o, "name", d->name, &ok);
    vpack__json_set_str(o, "uuid", d->uuid, &ok);
    vpack__json_set_int(o, "level", vpack__dom_level(a, d), &ok);
    vpack__json_set_bool(o, "level_set", d->level >= 0, &ok);
    vpack__json_set_bool(o, "managed", vpack__dom_placed(a, d), &ok);
    vpack__json_set_cpuset(o, "cpuset", d->has_bound ? &d->bound : NULL, &ok);
    vpack__json_set_str(o, "reason", d->reason ? d->reason : "", &ok);
    vpack__json_set(o, "packages", vpack__json_ints(d->packages, d->npackages), &ok);
    explain_threads(d, o, &ok);
    *out = vpack__json_finish(o, ok);
    return *out ? 0 : -ENOMEM;
}

int vpack_agent_snapshot_json(struct vpack_agent *a, struct json_object **out)
{
    *out = NULL;
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
        vpack__json_set_str(m, "domain", moves[i].domain, &ok);
        vpack__json_set_str(m, "threads", moves[i].threads, &ok);
        vpack__json_set_str(m, "from", moves[i].from, &ok);
        vpack__json_set_str(m, "to", moves[i].to, &ok);
        vpack__json_set_str(m, "reason", moves[i].reason, &ok);
        vpack__json_append(arr, m, &ok);
    }
    return vpack__json_finish(arr, ok);
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

static struct json_object *metrics_package(const struct vpack_agent *a,
                                           const struct vpack_package *pk, bool *ok)
{
    struct json_object *o = json_object_new_object();
    unsigned n;
    vpack__json_set_int(o, "id", pk->id, ok);
    vpack__json_set_cpuset(o, "cpus", &pk->cpus, ok);
    vpack__json_set_int(o, "cores", pk->ncores, ok);
    vpack__json_set_double(o, "busy", package_busy(a, pk, &n), ok);
    vpack__json_set_double(o, "idle_seconds", package_idle_seconds(a, pk), ok);
    vpack__json_set_bool(o, "active", package_active(a, pk), ok);
    vpack__json_set_bool(o, "wakeup", a->plan && a->plan->wakeup_package == pk->id, ok);
    return o;
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

static struct json_object *metrics_domain(const struct vpack_agent *a, const struct agent_dom *d,
                                          bool *ok)
{
    struct json_object *o = domain_head(a, d, ok), *vc = json_object_new_array();
    double remote;
    for (unsigned v = 0; v < d->nvcpus; v++) {
        if (!d->vcpu_online[v])
            continue;
        struct json_object *t = json_object_new_object();
        vpack__json_set_int(t, "id", v, ok);
        vpack__json_set_double(t, "util", d->vcpus[v].util, ok);
        vpack__json_set_double(t, "delay", d->vcpus[v].delay, ok);
        vpack__json_append(vc, t, ok);
    }
    vpack__json_set(o, "vcpus", vc, ok);
    /* Memory outside the packages it is placed on, where NUMA nodes are known. */
    if (d->nmem && d->npackages > 0 && vpack__dom_placed(a, d) && remote_memory(a, d, &remote))
        vpack__json_set_double(o, "remote_memory", remote, ok);
    return o;
}

static struct json_object *hist_json(const struct histogram *h, bool *ok)
{
    struct json_object *o = json_object_new_object(), *b = json_object_new_array();
    for (size_t i = 0; i < VPACK__NBUCKETS; i++) {
        struct json_object *pair = json_object_new_array();
        vpack__json_append(pair, json_object_new_double(vpack__hist_bounds[i]), ok);
        vpack__json_append(pair, json_object_new_int64((int64_t)h->buckets[i]), ok);
        vpack__json_append(b, pair, ok);
    }
    vpack__json_set(o, "buckets", b, ok);
    vpack__json_set_double(o, "sum", h->sum, ok);
    vpack__json_set_int(o, "count", (int64_t)h->count, ok);
    return o;
}

/* "pin_ops" [{"reason", "result", "count"}] and "rebalances" [{"reason", "count"}]. */
static void metrics_ops(const struct vpack_agent *a, struct json_object *root, bool *ok)
{
    struct json_object *ops = json_object_new_array(), *reb = json_object_new_array();
    for (int w = 0; w < PIN_NWHY; w++)
        for (int r = 0; r < RES_N; r++) {
            struct json_object *o = json_object_new_object();
            vpack__json_set_str(o, "reason", pin_why_names[w], ok);
            vpack__json_set_str(o, "result", pin_result_names[r], ok);
            vpack__json_set_int(o, "count", (int64_t)a->pin_ops[w][r], ok);
            vpack__json_append(ops, o, ok);
        }
    vpack__json_set(root, "pin_ops", ops, ok);
    for (int w = 0; w < VPACK_WHY_N; w++) {
        struct json_object *o = json_object_new_object();
        vpack__json_set_str(o, "reason", vpack_plan_why_name(w), ok);
        vpack__json_set_int(o, "count", (int64_t)a->rebalances[w], ok);
        vpack__json_append(reb, o, ok);
    }
    vpack__json_set(root, "rebalances", reb, ok);
}

struct json_object *vpack_agent_metrics_json(struct vpack_agent *a)
{
    struct json_object *root = json_object_new_object();
    struct json_object *pkgs = json_object_new_array(), *doms = json_object_new_array();
    bool ok = true;
    vpack__json_set_bool(root, "connected", vpack_virt_connected(a->virt), &ok);
    vpack__json_set_str(root, "version", VPACK_VERSION, &ok);
    vpack__json_set_str(root, "sysfs_root", a->cfg.sysfs_root, &ok);
    vpack__json_set_double(root, "demand", a->plan ? a->plan->demand : 0, &ok);
    vpack__json_set_bool(root, "lifted", a->plan && a->plan->lifted, &ok);
    for (unsigned p = 0; p < a->topo->npackages; p++)
        vpack__json_append(pkgs, metrics_package(a, &a->topo->packages[p], &ok), &ok);
    vpack__json_set(root, "packages", pkgs, &ok);
    for (unsigned i = 0; i < a->ndoms; i++)
        if (a->doms[i].name)
            vpack__json_append(doms, metrics_domain(a, &a->doms[i], &ok), &ok);
    vpack__json_set(root, "domains", doms, &ok);
    metrics_ops(a, root, &ok);
    vpack__json_set(root, "plan_duration", hist_json(&a->plan_hist, &ok), &ok);
    vpack__json_set(root, "cycle_duration", hist_json(&a->cycle_hist, &ok), &ok);
    vpack__json_set_int(root, "samples", (int64_t)a->ctr.samples, &ok);
    vpack__json_set_int(root, "connects", (int64_t)a->ctr.reconnects, &ok);
    vpack__json_set_int(root, "hotplug_events", (int64_t)a->ctr.hotplug_events, &ok);
    vpack__json_set_int(root, "cgroup_repairs", (int64_t)a->ctr.cgroup_repairs, &ok);
    return vpack__json_finish(root, ok);
}
