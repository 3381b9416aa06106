// SPDX-License-Identifier: MIT
/*
 * vpackctl simulate --json: the figures as one JSON object.
 */
#include <stdint.h>

#include <json-c/json.h>

#include "simulate.h"
#include "vpack/json.h"
#include "vpackctl.h"

/* Per domain of a model: where its threads ended up, as JSON. */
static struct json_object *placement_json(const struct vpack_model *m, bool *ok)
{
    struct json_object *doms = json_object_new_array();
    const struct vpack_model_domain *d;

    for (unsigned i = 0; (d = vpack_model_domain_get(m, i)); i++) {
        struct json_object *o = json_object_new_object(), *vcpus = json_object_new_array(),
                           *io = json_object_new_array();
        vpack_cpuset cpus;
        int nv;

        vpack_json_set_str(o, "name", d->name, ok);
        for (unsigned k = 0; (nv = vpack_model_thread_cpus(m, i, k, &cpus)) >= 0; k++) {
            if (k == (unsigned)nv)
                vpack_json_set_cpuset(o, "emulator", &cpus, ok);
            else
                vpack_json_append(k < (unsigned)nv ? vcpus : io, vpack_json_cpuset(&cpus), ok);
        }
        vpack_json_set(o, "vcpus", vcpus, ok);
        vpack_json_set(o, "iothreads", io, ok);
        vpack_json_append(doms, vpack_json_finish(o, *ok), ok);
    }
    return doms;
}

/* {"package": {"energy_j", "saving"}, "system": ..., "none": ...} of one level. */
static struct json_object *scope_json(const struct figures *x, bool *ok)
{
    struct json_object *o = json_object_new_object();

    for (unsigned s = 0; s < VPACK_PC6_SCOPES; s++) {
        struct json_object *e = json_object_new_object();

        vpack_json_set_double(e, "energy_j", x->t.energy_scope_j[s], ok);
        vpack_json_set_double(e, "saving", x->saving_scope[s], ok);
        vpack_json_set(o, vpack_pc6_scope_name(s), vpack_json_finish(e, *ok), ok);
    }
    return vpack_json_finish(o, *ok);
}

/* {"vms", "delay": {"p50", "p99", "max"}, "unserved": {...}}: the spread across VMs. */
static struct json_object *vm_spread_json(const struct vpack_model_vm_spread *v, bool *ok)
{
    struct json_object *o = json_object_new_object(), *d = json_object_new_object(),
                       *u = json_object_new_object();

    vpack_json_set_int(o, "vms", v->n, ok);
    vpack_json_set_double(d, "p50", v->delay_p50, ok);
    vpack_json_set_double(d, "p99", v->delay_p99, ok);
    vpack_json_set_double(d, "max", v->delay_max, ok);
    vpack_json_set_double(u, "p50", v->unserved_p50, ok);
    vpack_json_set_double(u, "p99", v->unserved_p99, ok);
    vpack_json_set_double(u, "max", v->unserved_max, ok);
    vpack_json_set(o, "delay", vpack_json_finish(d, *ok), ok);
    vpack_json_set(o, "unserved", vpack_json_finish(u, *ok), ok);
    return vpack_json_finish(o, *ok);
}

static struct json_object *oracle_json(const struct oracle *x, bool *ok)
{
    struct json_object *o = json_object_new_object();

    vpack_json_set_double(o, "package_seconds", x->package_s, ok);
    vpack_json_set_bool(o, "exact", x->exact, ok);
    return vpack_json_finish(o, *ok);
}

/* The platform profile's figures the model used. */
static struct json_object *platform_json(const struct sim *sim, bool *ok)
{
    const struct vpack_power_params *p = &sim->power;
    struct json_object *o = json_object_new_object();

    vpack_json_set_str(o, "name", sim->platform, ok);
    vpack_json_set_double(o, "exit_latency_us", p->exit_us, ok);
    vpack_json_set_double(o, "target_residency_us", p->residency_us, ok);
    vpack_json_set_double(o, "busy_period_ms", p->busy_period_ms, ok);
    vpack_json_set_double(o, "refill_ms", p->refill_ms, ok);
    vpack_json_set_str(o, "remote_memory", p->remote == VPACK_REMOTE_HOLDS ? "holds" : "free", ok);
    return vpack_json_finish(o, *ok);
}

/* The costs of one level (model.h, step 8) and the saving with each assumption varied. */
static struct json_object *costs_json(const struct figures *x, bool *ok)
{
    struct json_object *o = json_object_new_object(), *var = json_object_new_object();

    vpack_json_set_double(o, "refill_cpu_s", x->t.refill_s, ok);
    vpack_json_set_double(o, "smt_slowdown_cpu_s", x->t.smt_slow_s, ok);
    vpack_json_set_double(o, "exit_delay_vcpu_s", x->t.wake_delay_s, ok);
    vpack_json_set_double(o, "deep_exits", x->t.deep_wakes, ok);
    vpack_json_set_double(o, "memory_held_package_s", x->t.held_pkg_s, ok);
    vpack_json_set_double(o, "remote_memory_delay_vcpu_s", x->t.remote_delay_s, ok);
    vpack_json_set_double(o, "served_ratio_refill_0", x->served_refill0, ok);
    vpack_json_set_double(o, "served_ratio_refill_x2", x->served_refill2, ok);
    for (unsigned v = 0; v < VPACK_COST_VARIANTS; v++)
        vpack_json_set_double(var, vpack_cost_variant_name(v), x->saving_var[v], ok);
    vpack_json_set(o, "saving_by_assumption", vpack_json_finish(var, *ok), ok);
    return vpack_json_finish(o, *ok);
}

int simulate_print_json(const struct sim *sim, const struct figures *f)
{
    struct json_object *o = json_object_new_object(), *levels = json_object_new_array();
    bool ok = true;
    int ret;

    vpack_json_set_int(o, "intervals", (int64_t)f[0].t.intervals, &ok);
    vpack_json_set_double(o, "seconds", f[0].t.seconds, &ok);
    vpack_json_set_int(o, "domains", (int64_t)sim->ndomains, &ok);
    vpack_json_set_str(o, "topology", sim->topo->source ? sim->topo->source : "host", &ok);
    vpack_json_set_str(o, "pc6_scope", vpack_pc6_scope_name(sim->pc6_scope), &ok);
    vpack_json_set(o, "capacity_bound", oracle_json(&sim->bound, &ok), &ok);
    vpack_json_set(o, "policy_target", oracle_json(&sim->target, &ok), &ok);
    vpack_json_set(o, "delay_bounded_optimum", oracle_json(&sim->delay, &ok), &ok);
    vpack_json_set_double(o, "delay_bound", sim->delay.delay_bound, &ok);
    vpack_json_set(o, "platform", platform_json(sim, &ok), &ok);
    for (int l = 0; l < NLEVELS; l++) {
        const struct figures *x = &f[l];
        struct json_object *lv = json_object_new_object(), *idle = json_object_new_array(),
                           *busy = json_object_new_array();

        vpack_json_set_int(lv, "level", l, &ok);
        for (unsigned p = 0; p < sim->topo->npackages; p++) {
            double s = x->t.seconds > 0 ? x->t.seconds : 1;
            vpack_json_append(idle, vpack_json_new_number(x->t.pkg_idle_s[p] / s, 0), &ok);
            vpack_json_append(busy, vpack_json_new_number(x->t.pkg_busy_s[p] / s, 0), &ok);
        }
        vpack_json_set(lv, "package_idle", idle, &ok);
        vpack_json_set(lv, "package_busy", busy, &ok);
        vpack_json_set_double(lv, "energy_j", x->t.energy_j, &ok);
        vpack_json_set_double(lv, "saving", x->saving, &ok);
        vpack_json_set(lv, "by_pc6_scope", scope_json(x, &ok), &ok);
        vpack_json_set_double(lv, "saving_idle_w_as_deep_w", x->saving_idle_deep, &ok);
        vpack_json_set_double(lv, "demand_cpu_s", x->t.demand, &ok);
        vpack_json_set_double(lv, "served_cpu_s", x->t.served, &ok);
        vpack_json_set_double(lv, "served_ratio", x->served_ratio, &ok);
        vpack_json_set_double(lv, "delay_p99", x->t.delay_p99, &ok);
        vpack_json_set(lv, "per_vm", vm_spread_json(&x->vm, &ok), &ok);
        vpack_json_set_double(lv, "saturated_package_seconds", x->t.saturated_pkg_s, &ok);
        vpack_json_set_double(lv, "saturation_share", x->saturation, &ok);
        vpack_json_set_double(lv, "energy_x_violation", x->esv, &ok);
        /* The moved threads' cache refill (model.h's costs): work they were not served. */
        vpack_json_set_double(lv, "work_lost_to_moves_cpu_s", x->t.refill_s, &ok);
        vpack_json_set_double(lv, "moves_per_hour", x->moves_per_hour, &ok);
        vpack_json_set_int(lv, "moves", (int64_t)x->t.moves, &ok);
        vpack_json_set_int(lv, "pin_ops", (int64_t)x->t.pin_ops, &ok);
        vpack_json_set_double(lv, "pin_cpu_s", x->t.pin_cpu_s, &ok);
        vpack_json_set_double(lv, "foreign_cpu_s", x->t.foreign_s, &ok);
        vpack_json_set_double(lv, "awake_package_seconds", x->awake_pkg_s, &ok);
        vpack_json_set_double(lv, "active_package_seconds", x->t.active_pkg_s, &ok);
        vpack_json_set_double(lv, "planned_package_seconds", x->t.planned_pkg_s, &ok);
        vpack_json_set_double(lv, "vs_capacity_bound", x->vs_bound, &ok);
        vpack_json_set_double(lv, "vs_policy_target", x->vs_target, &ok);
        vpack_json_set_int(lv, "intervals_under_bound", (int64_t)sim->under_bound[l], &ok);
        vpack_json_set_double(lv, "vs_delay_bounded_optimum", x->vs_delay, &ok);
        vpack_json_set(lv, "costs", costs_json(x, &ok), &ok);
        vpack_json_set(lv, "placement", placement_json(sim->model[l], &ok), &ok);
        vpack_json_append(levels, vpack_json_finish(lv, ok), &ok);
    }
    vpack_json_set(o, "levels", levels, &ok);
    o = vpack_json_finish(o, ok);
    if (!o) {
        vpackctl_err("simulate: out of memory");
        return VPACKCTL_EXIT_FAIL;
    }
    ret = vpackctl_print_json(o);
    json_object_put(o);
    return ret;
}

