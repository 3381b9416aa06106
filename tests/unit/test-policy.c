// SPDX-License-Identifier: MIT
/*
 * The placement policy, checked rule by rule against the contract in
 * include/vpack/policy.h. Topologies are hwloc synthetic descriptions (PU
 * numbers are CPU ids), snapshots are built in C; nothing here reads the
 * live host.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vpack/config.h"
#include "vpack/cpuset.h"
#include "vpack/policy.h"
#include "vpack/snapshot.h"
#include "vpack/topology.h"

#define EPS 1e-9

/* ---- Helpers: topologies, cpu sets, snapshots ---- */

static struct vpack_topology *topo_load_reserved(const char *desc, const char *reserved)
{
    char spec[256];
    char *err = NULL;
    struct vpack_topology *t = NULL;
    vpack_cpuset res;

    snprintf(spec, sizeof(spec), "synthetic:%s", desc);
    if (reserved)
        assert_int_equal(vpack_cpuset_parse(&res, reserved, NULL), 0);
    int r = vpack_topology_load(spec, reserved ? &res : NULL, NULL, &t, &err);
    if (r < 0 || !t)
        fail_msg("vpack_topology_load(%s) = %d: %s", spec, r, err ? err : "(no message)");
    free(err);
    return t;
}

static struct vpack_topology *topo_load(const char *desc)
{
    return topo_load_reserved(desc, NULL);
}

static vpack_cpuset set_of(const char *text)
{
    vpack_cpuset s;
    char *err = NULL;
    if (vpack_cpuset_parse(&s, text, &err) < 0)
        fail_msg("bad cpuset '%s' in test: %s", text, err ? err : "out of memory");
    return s;
}

static vpack_cpuset *cpuset_new(const char *text)
{
    vpack_cpuset *s = malloc(sizeof(*s));
    assert_non_null(s);
    *s = set_of(text);
    return s;
}

/* Formats a set for a message; four rotating buffers so one printf can show several. */
static const char *fmt(const vpack_cpuset *s)
{
    static char buf[4][512];
    static unsigned n;
    char *b = buf[n++ % 4];
    if (!s)
        return "(null)";
    size_t need = vpack_cpuset_format_buf(s, b, 512);
    if (need >= 512)
        strcpy(b + 500, "...");
    return b;
}

static const struct vpack_package *pkg_by_id(const struct vpack_topology *t, int id)
{
    int i = vpack_topology_package_index(t, id);
    if (i < 0)
        fail_msg("package id %d is not in the topology", id);
    return &t->packages[i];
}

static vpack_cpuset pkg_cpus(const struct vpack_topology *t, int id)
{
    return pkg_by_id(t, id)->cpus;
}

/* A snapshot sized for topo, no load, interval 1000 ms. */
static struct vpack_snapshot *snap_new(const struct vpack_topology *t, unsigned ndomains)
{
    unsigned ncpus = t->max_cpu >= 0 ? (unsigned)t->max_cpu + 1 : 0;
    struct vpack_snapshot *s = vpack_snapshot_new(ncpus, ndomains);
    assert_non_null(s);
    s->interval_ms = 1000;
    for (unsigned i = 0; i < s->ncpus; i++)
        s->cpu_busy[i] = 0.0;
    return s;
}

static void thread_reset(struct vpack_thread_sample *th, int id)
{
    th->id = id;
    th->util = 0.0;
    th->delay = 0.0;
    th->util_now = 0.0;
    th->delay_now = 0.0;
    th->pin = NULL;
    th->cpu = -1;
}

/* Domain i of s: nvcpus vCPUs of util each, niothreads idle iothreads. */
static struct vpack_domain_sample *dom_init(struct vpack_snapshot *s, unsigned i, const char *name,
                                            int level, unsigned nvcpus, unsigned niothreads,
                                            double util)
{
    assert_true(i < s->ndomains);
    struct vpack_domain_sample *d = &s->domains[i];
    assert_int_equal(vpack_domain_sample_init(d, name, level, nvcpus, niothreads), 0);
    assert_string_equal(d->name, name);
    assert_int_equal(d->nvcpus, nvcpus);
    assert_int_equal(d->niothreads, niothreads);
    for (unsigned j = 0; j < nvcpus; j++) {
        thread_reset(&d->vcpus[j], (int)j);
        d->vcpus[j].util = util;
    }
    thread_reset(&d->emulator, -1);
    for (unsigned j = 0; j < niothreads; j++)
        thread_reset(&d->iothreads[j], (int)j + 1);
    d->cpuset = NULL;
    d->nmemory = 0;
    d->memory = NULL;
    return d;
}

static void pin(struct vpack_thread_sample *th, const char *text)
{
    free(th->pin);
    th->pin = cpuset_new(text);
}

static void bound(struct vpack_domain_sample *d, const char *text)
{
    free(d->cpuset);
    d->cpuset = cpuset_new(text);
}

static void memory_on(struct vpack_domain_sample *d, unsigned n, const int *nodes,
                      const double *shares)
{
    free(d->memory);
    d->memory = calloc(n, sizeof(*d->memory));
    assert_non_null(d->memory);
    d->nmemory = n;
    for (unsigned i = 0; i < n; i++) {
        d->memory[i].node = nodes[i];
        d->memory[i].share = shares[i];
    }
}

/* Spreads load evenly over the usable CPUs of package id (busy fractions). */
static void busy_package(const struct vpack_topology *t, struct vpack_snapshot *s, int id,
                         double load)
{
    vpack_cpuset c = pkg_cpus(t, id);
    unsigned n = vpack_cpuset_count(&c);
    VPACK_CPUSET_FOREACH(cpu, &c) {
        s->cpu_busy[cpu] = load / n;
    }
}

static void busy_everywhere(const struct vpack_topology *t, struct vpack_snapshot *s, double load)
{
    unsigned n = vpack_cpuset_count(&t->cpus);
    VPACK_CPUSET_FOREACH(cpu, &t->cpus) {
        s->cpu_busy[cpu] = load / n;
    }
}

/*
 * Load no domain owns where it takes room from the guests: on the packages
 * of act (the last plan's active ones; none: everywhere), each CPU up to
 * full, the rest evenly on the other CPUs. vpack spreads for load on the
 * active packages; the same load on a parked package takes no room from
 * the guests.
 */
static void busy_on_active(const struct vpack_topology *t, struct vpack_snapshot *s, double load,
                           const int *act, unsigned nact)
{
    if (nact == 0) {
        busy_everywhere(t, s, load);
        return;
    }
    vpack_cpuset on = {0}, rest;
    for (unsigned i = 0; i < nact; i++) {
        vpack_cpuset c = pkg_cpus(t, act[i]);
        vpack_cpuset_or(&on, &on, &c);
    }
    vpack_cpuset_andnot(&rest, &t->cpus, &on);
    unsigned n = vpack_cpuset_count(&on), m = vpack_cpuset_count(&rest);
    double each = load / n > 1 ? 1 : load / n, left = load - each * n;
    VPACK_CPUSET_FOREACH(cpu, &on) {
        s->cpu_busy[cpu] = each;
    }
    VPACK_CPUSET_FOREACH(cpu, &rest) {
        s->cpu_busy[cpu] = m && left > 0 ? left / m : 0;
    }
}

/* The active packages of p, for busy_on_active(). */
static unsigned active_of(const struct vpack_plan *p, int *act, unsigned max)
{
    unsigned n = p->nactive < max ? p->nactive : max;
    for (unsigned i = 0; i < n; i++)
        act[i] = p->active_packages[i];
    return n;
}

/* The domain's bound: its cpuset intersected with the usable CPUs. */
static vpack_cpuset dom_bound(const struct vpack_topology *t, const struct vpack_domain_sample *d)
{
    vpack_cpuset b = t->cpus;
    if (d->cpuset)
        vpack_cpuset_and(&b, &b, d->cpuset);
    return b;
}

static vpack_cpuset free_mask(const struct vpack_topology *t, const struct vpack_domain_sample *d,
                              const struct vpack_thread_sample *th)
{
    return th->pin ? *th->pin : dom_bound(t, d);
}

static int eff_level(const struct vpack_policy_params *p, const struct vpack_domain_sample *d)
{
    return d->level == -1 ? p->default_level : d->level;
}

static unsigned total_cores(const struct vpack_topology *t)
{
    unsigned n = 0;
    for (unsigned i = 0; i < t->npackages; i++)
        n += t->packages[i].ncores;
    return n;
}

/* ---- Running the policy ---- */

struct runner {
    struct vpack_topology *topo;
    struct vpack_policy_params params;
    struct vpack_policy_state *state;
    unsigned long now_ms;  /* simulated time at the end of the last snapshot */
    int model_level;       /* level of every model domain; -1: alternate 1 and 2 */
};

static void runner_init(struct runner *r, const char *desc)
{
    r->topo = topo_load(desc);
    vpack_policy_params_default(&r->params);
    /* The rules as vpack/policy.h states them, on busy time: the SMT
     * discount (smt.c) has tests of its own (test_smt_*). */
    r->params.smt_gain = 1;
    r->state = vpack_policy_state_new();
    assert_non_null(r->state);
    r->now_ms = 0;
    r->model_level = -1;
}

static void runner_fini(struct runner *r)
{
    vpack_policy_state_free(r->state);
    vpack_topology_free(r->topo);
}

/* Structure every plan must have so that the checks can index it safely. */
static void check_shape(const struct vpack_topology *t, const struct vpack_snapshot *s,
                        const struct vpack_plan *p, const char *ctx)
{
    if (p->ndomains != s->ndomains)
        fail_msg("%s: plan has %u domains, snapshot %u", ctx, p->ndomains, s->ndomains);
    if (p->nactive > t->npackages)
        fail_msg("%s: %u active packages on a host of %u", ctx, p->nactive, t->npackages);
    for (unsigned i = 0; i < p->nactive; i++) {
        if (vpack_topology_package_index(t, p->active_packages[i]) < 0)
            fail_msg("%s: active package %d does not exist", ctx, p->active_packages[i]);
        for (unsigned j = 0; j < i; j++)
            if (p->active_packages[j] == p->active_packages[i])
                fail_msg("%s: package %d listed twice as active", ctx, p->active_packages[i]);
    }
    for (unsigned i = 0; i < s->ndomains; i++) {
        const struct vpack_domain_sample *d = &s->domains[i];
        const struct vpack_plan_domain *pd = &p->domains[i];
        if (!pd->name || strcmp(pd->name, d->name) != 0)
            fail_msg("%s: plan domain %u is '%s', snapshot has '%s'", ctx, i,
                     pd->name ? pd->name : "(null)", d->name);
        if (pd->nvcpus != d->nvcpus || pd->niothreads != d->niothreads)
            fail_msg("%s: %s: plan has %u vcpus/%u iothreads, snapshot %u/%u", ctx, d->name,
                     pd->nvcpus, pd->niothreads, d->nvcpus, d->niothreads);
        for (unsigned j = 0; j < d->nvcpus; j++)
            if (pd->vcpus[j].id != d->vcpus[j].id || !pd->vcpus[j].cpus)
                fail_msg("%s: %s: vcpu %u has id %d (want %d) or no mask", ctx, d->name, j,
                         pd->vcpus[j].id, d->vcpus[j].id);
        for (unsigned j = 0; j < d->niothreads; j++)
            if (pd->iothreads[j].id != d->iothreads[j].id || !pd->iothreads[j].cpus)
                fail_msg("%s: %s: iothread %u has id %d (want %d) or no mask", ctx, d->name, j,
                         pd->iothreads[j].id, d->iothreads[j].id);
        if (pd->emulator.id != -1 || !pd->emulator.cpus)
            fail_msg("%s: %s: emulator has id %d or no mask", ctx, d->name, pd->emulator.id);
    }
}

static struct vpack_plan *plan_step(struct runner *r, const struct vpack_snapshot *s)
{
    struct vpack_plan *p = NULL;
    int rc = vpack_plan_compute(r->topo, &r->params, s, r->state, &p);
    if (rc != 0 || !p)
        fail_msg("vpack_plan_compute at t=%lu ms returned %d", r->now_ms, rc);
    r->now_ms += s->interval_ms;
    char ctx[64];
    snprintf(ctx, sizeof(ctx), "plan at t=%lu ms", r->now_ms);
    check_shape(r->topo, s, p, ctx);
    return p;
}

static bool is_active(const struct vpack_plan *p, int id)
{
    for (unsigned i = 0; i < p->nactive; i++)
        if (p->active_packages[i] == id)
            return true;
    return false;
}

static vpack_cpuset cpus_of_packages(const struct vpack_topology *t, unsigned n, const int *ids)
{
    vpack_cpuset c;
    vpack_cpuset_zero(&c);
    for (unsigned i = 0; i < n; i++) {
        vpack_cpuset pc = pkg_cpus(t, ids[i]);
        vpack_cpuset_or(&c, &c, &pc);
    }
    return c;
}

static const char *active_str(const struct vpack_plan *p)
{
    static char buf[2][256];
    static unsigned n;
    char *b = buf[n++ % 2];
    size_t off = 0;
    b[0] = '\0';
    for (unsigned i = 0; i < p->nactive && off < 200; i++)
        off += (size_t)snprintf(b + off, 256 - off, "%s%d", i ? "," : "", p->active_packages[i]);
    return b;
}

/* ---- Rule checkers, shared by the rule tests and the property test ---- */

typedef void thread_fn(const struct vpack_topology *t, const struct vpack_policy_params *params,
                       const struct vpack_snapshot *s, const struct vpack_plan *p, unsigned di,
                       const struct vpack_thread_sample *th, const struct vpack_plan_thread *pt,
                       const char *what, const char *ctx);

static void foreach_thread(const struct vpack_topology *t, const struct vpack_policy_params *params,
                           const struct vpack_snapshot *s, const struct vpack_plan *p,
                           thread_fn *fn, const char *ctx)
{
    char what[64];
    for (unsigned i = 0; i < s->ndomains; i++) {
        const struct vpack_domain_sample *d = &s->domains[i];
        const struct vpack_plan_domain *pd = &p->domains[i];
        for (unsigned j = 0; j < d->nvcpus; j++) {
            snprintf(what, sizeof(what), "vcpu %d", d->vcpus[j].id);
            fn(t, params, s, p, i, &d->vcpus[j], &pd->vcpus[j], what, ctx);
        }
        fn(t, params, s, p, i, &d->emulator, &pd->emulator, "emulator", ctx);
        for (unsigned j = 0; j < d->niothreads; j++) {
            snprintf(what, sizeof(what), "iothread %d", d->iothreads[j].id);
            fn(t, params, s, p, i, &d->iothreads[j], &pd->iothreads[j], what, ctx);
        }
    }
}

/* Rule 2: a guest pin comes back exactly as given. */
static void pin_kept(const struct vpack_topology *t, const struct vpack_policy_params *params,
                     const struct vpack_snapshot *s, const struct vpack_plan *p, unsigned di,
                     const struct vpack_thread_sample *th, const struct vpack_plan_thread *pt,
                     const char *what, const char *ctx)
{
    (void)t, (void)params, (void)p;
    if (th->pin && !vpack_cpuset_equal(pt->cpus, th->pin))
        fail_msg("%s: %s %s is pinned to %s by the guest but the plan gives %s", ctx,
                 s->domains[di].name, what, fmt(th->pin), fmt(pt->cpus));
    if (th->pin && pt->restricted)
        fail_msg("%s: %s %s keeps its guest pin but is marked restricted", ctx,
                 s->domains[di].name, what);
}

static void check_pins(const struct vpack_topology *t, const struct vpack_policy_params *params,
                       const struct vpack_snapshot *s, const struct vpack_plan *p, const char *ctx)
{
    foreach_thread(t, params, s, p, pin_kept, ctx);
}

/* Rule 9: unpinned masks stay inside the domain's bound. */
static void within_bound(const struct vpack_topology *t, const struct vpack_policy_params *params,
                         const struct vpack_snapshot *s, const struct vpack_plan *p, unsigned di,
                         const struct vpack_thread_sample *th, const struct vpack_plan_thread *pt,
                         const char *what, const char *ctx)
{
    (void)params, (void)p;
    const struct vpack_domain_sample *d = &s->domains[di];
    if (th->pin)
        return;
    vpack_cpuset b = dom_bound(t, d);
    if (vpack_cpuset_empty(&b)) {
        /* Not managed: no restriction, and never a CPU outside its cpuset. */
        if (pt->restricted)
            fail_msg("%s: %s has no usable CPU in its cpuset %s but %s is restricted", ctx,
                     d->name, fmt(d->cpuset), what);
        if (d->cpuset && !vpack_cpuset_subset(pt->cpus, d->cpuset))
            fail_msg("%s: %s %s gets %s, outside its cpuset %s", ctx, d->name, what,
                     fmt(pt->cpus), fmt(d->cpuset));
        return;
    }
    if (!vpack_cpuset_subset(pt->cpus, &b))
        fail_msg("%s: %s %s gets %s, outside its bound %s", ctx, d->name, what, fmt(pt->cpus),
                 fmt(&b));
    if (vpack_cpuset_empty(pt->cpus))
        fail_msg("%s: %s %s gets an empty mask (bound %s)", ctx, d->name, what, fmt(&b));
}

static void check_bounds(const struct vpack_topology *t, const struct vpack_policy_params *params,
                         const struct vpack_snapshot *s, const struct vpack_plan *p,
                         const char *ctx)
{
    foreach_thread(t, params, s, p, within_bound, ctx);
}

/* Rules 1 and 6: level 0, unmanaged domains and lifted plans get free masks. */
static void free_when_unmanaged(const struct vpack_topology *t,
                                const struct vpack_policy_params *params,
                                const struct vpack_snapshot *s, const struct vpack_plan *p,
                                unsigned di, const struct vpack_thread_sample *th,
                                const struct vpack_plan_thread *pt, const char *what,
                                const char *ctx)
{
    const struct vpack_domain_sample *d = &s->domains[di];
    vpack_cpuset b = dom_bound(t, d);
    if (vpack_cpuset_empty(&b) && !th->pin)
        return; /* within_bound() covers it */
    vpack_cpuset fm = free_mask(t, d, th);
    int lvl = eff_level(params, d);
    if (lvl == 0 || p->lifted) {
        if (!vpack_cpuset_equal(pt->cpus, &fm) || pt->restricted)
            fail_msg("%s: %s (level %d%s) %s gets %s%s, want its free mask %s", ctx, d->name,
                     lvl, p->lifted ? ", plan lifted" : "", what, fmt(pt->cpus),
                     pt->restricted ? " (restricted)" : "", fmt(&fm));
    }
    /* restricted means "narrowed below pin/bound", nothing else. */
    bool narrowed = !vpack_cpuset_equal(pt->cpus, &fm);
    if (pt->restricted != narrowed)
        fail_msg("%s: %s %s: mask %s vs free mask %s but restricted=%d", ctx, d->name, what,
                 fmt(pt->cpus), fmt(&fm), pt->restricted);
}

static void check_free_masks(const struct vpack_topology *t,
                             const struct vpack_policy_params *params,
                             const struct vpack_snapshot *s, const struct vpack_plan *p,
                             const char *ctx)
{
    foreach_thread(t, params, s, p, free_when_unmanaged, ctx);
    for (unsigned i = 0; i < s->ndomains; i++)
        if (p->domains[i].level != eff_level(params, &s->domains[i]))
            fail_msg("%s: %s has snapshot level %d, default %d, plan says level %d", ctx,
                     s->domains[i].name, s->domains[i].level, params->default_level,
                     p->domains[i].level);
}

/* Rule 10. */
static void check_reasons(const struct vpack_snapshot *s, const struct vpack_plan *p,
                          const char *ctx)
{
    if (!p->reason || !p->reason[0])
        fail_msg("%s: the plan has no reason", ctx);
    if (strchr(p->reason, '\n'))
        fail_msg("%s: the plan's reason is not one line: '%s'", ctx, p->reason);
    for (unsigned i = 0; i < s->ndomains; i++) {
        const char *r = p->domains[i].reason;
        if (!r || !r[0])
            fail_msg("%s: domain %s has no reason", ctx, s->domains[i].name);
        if (strchr(r, '\n'))
            fail_msg("%s: domain %s's reason is not one line: '%s'", ctx, s->domains[i].name, r);
    }
}

/* Rule 3: demand = max(sum of busy over usable CPUs, sum of all threads' util). */
static double expected_demand(const struct vpack_topology *t, const struct vpack_snapshot *s)
{
    double busy = 0.0, util = 0.0;
    for (unsigned c = 0; c < s->ncpus; c++)
        if (s->cpu_busy[c] >= 0.0 && vpack_cpuset_isset(&t->cpus, c))
            busy += s->cpu_busy[c];
    for (unsigned i = 0; i < s->ndomains; i++) {
        const struct vpack_domain_sample *d = &s->domains[i];
        for (unsigned j = 0; j < d->nvcpus; j++)
            util += d->vcpus[j].util;
        util += d->emulator.util;
        for (unsigned j = 0; j < d->niothreads; j++)
            util += d->iothreads[j].util;
    }
    return busy > util ? busy : util;
}

static void check_demand(const struct vpack_topology *t, const struct vpack_snapshot *s,
                         const struct vpack_plan *p, const char *ctx)
{
    double want = expected_demand(t, s);
    if (fabs(p->demand - want) > 1e-6 * (1.0 + want))
        fail_msg("%s: plan demand %.6f, want %.6f", ctx, p->demand, want);
}

/* Managed placements stay on active packages; wake-up package is active. */
static void check_placement(const struct vpack_topology *t,
                            const struct vpack_policy_params *params,
                            const struct vpack_snapshot *s, const struct vpack_plan *p,
                            const char *ctx)
{
    if (p->wakeup_package != -1 && !is_active(p, p->wakeup_package))
        fail_msg("%s: wake-up package %d is not active (%s)", ctx, p->wakeup_package,
                 active_str(p));
    if (p->lifted)
        return;
    vpack_cpuset act = cpus_of_packages(t, p->nactive, p->active_packages);
    for (unsigned i = 0; i < s->ndomains; i++) {
        const struct vpack_domain_sample *d = &s->domains[i];
        const struct vpack_plan_domain *pd = &p->domains[i];
        vpack_cpuset b = dom_bound(t, d);
        if (eff_level(params, d) == 0 || vpack_cpuset_empty(&b))
            continue;
        for (unsigned k = 0; k < pd->npackages; k++)
            if (!is_active(p, pd->packages[k]))
                fail_msg("%s: %s is placed on package %d, which is not active (%s)", ctx,
                         d->name, pd->packages[k], active_str(p));
        for (unsigned j = 0; j < pd->nvcpus; j++)
            if (pd->vcpus[j].restricted && !vpack_cpuset_subset(pd->vcpus[j].cpus, &act))
                fail_msg("%s: %s vcpu %d restricted to %s, outside the active CPUs %s", ctx,
                         d->name, pd->vcpus[j].id, fmt(pd->vcpus[j].cpus), fmt(&act));
        if (pd->emulator.restricted && !vpack_cpuset_subset(pd->emulator.cpus, &act))
            fail_msg("%s: %s emulator restricted to %s, outside the active CPUs %s", ctx,
                     d->name, fmt(pd->emulator.cpus), fmt(&act));
    }
}

static void check_all(const struct vpack_topology *t, const struct vpack_policy_params *params,
                      const struct vpack_snapshot *s, const struct vpack_plan *p, const char *ctx)
{
    check_shape(t, s, p, ctx);
    check_pins(t, params, s, p, ctx);
    check_bounds(t, params, s, p, ctx);
    check_free_masks(t, params, s, p, ctx);
    check_reasons(s, p, ctx);
    check_demand(t, s, p, ctx);
    check_placement(t, params, s, p, ctx);
}

/* ---- A load model for the hysteresis tests ---- */

/*
 * Eight domains vm0..vm7 (level: even 1, odd 2, or all of them level) of 4
 * vCPUs and one iothread. The demand is poured into vCPUs at 0.8 each, vCPU 0 of every
 * domain first, then vCPU 1, ...; the rest stay idle. No CPU busy is
 * reported, so the demand is exactly the sum of the utils.
 */
#define MODEL_DOMAINS 8
#define MODEL_VCPUS 4

static struct vpack_snapshot *model_snap(const struct vpack_topology *t, double demand,
                                         double delay, int level)
{
    struct vpack_snapshot *s = snap_new(t, MODEL_DOMAINS);
    char name[16];
    for (unsigned i = 0; i < MODEL_DOMAINS; i++) {
        snprintf(name, sizeof(name), "vm%u", i);
        dom_init(s, i, name, level >= 0 ? level : i % 2 ? 2 : 1, MODEL_VCPUS, 1, 0.0);
    }
    double left = demand;
    for (unsigned v = 0; v < MODEL_VCPUS && left > 0; v++)
        for (unsigned i = 0; i < MODEL_DOMAINS && left > 0; i++) {
            double u = left < 0.8 ? left : 0.8;
            s->domains[i].vcpus[v].util = u;
            left -= u;
        }
    s->domains[0].vcpus[0].delay = delay;
    return s;
}

static struct vpack_plan *model_step(struct runner *r, double demand, double delay)
{
    struct vpack_snapshot *s = model_snap(r->topo, demand, delay, r->model_level);
    struct vpack_plan *p = plan_step(r, s);
    char ctx[64];
    snprintf(ctx, sizeof(ctx), "t=%lu ms demand %.2f", r->now_ms, demand);
    check_all(r->topo, &r->params, s, p, ctx);
    vpack_snapshot_free(s);
    return p;
}

static unsigned ceil_div(double a, double b)
{
    return (unsigned)ceil(a / b - 1e-12);
}

/* ---- Rule 2: guest pins ---- */

/* Every level, low / high / heavy load: pinned masks are the pins, bit for bit. */
static void test_guest_pins_kept(void **unused)
{
    (void)unused;
    const double loads[] = {0.5, 5.0, 30.0}; /* on 16 cores: low, high, heavy */
    for (int level = 0; level <= 2; level++) {
        for (unsigned li = 0; li < 3; li++) {
            struct runner r;
            runner_init(&r, "package:4 core:4 pu:2");
            for (int step = 0; step < 4; step++) {
                struct vpack_snapshot *s = snap_new(r.topo, 3);
                struct vpack_domain_sample *d = dom_init(s, 0, "pinned", level, 4, 2, 0.9);
                pin(&d->vcpus[0], "0,16383");      /* a CPU id the host does not have */
                pin(&d->vcpus[1], "9");            /* package 1 */
                pin(&d->vcpus[2], "3-5,30-31");    /* across packages 0 and 3 */
                pin(&d->emulator, "17");
                pin(&d->iothreads[0], "100-101"); /* nothing usable at all */
                d->emulator.util = 0.3;
                /* A pin may lie outside <vcpu cpuset>: <vcpupin> wins. */
                struct vpack_domain_sample *e = dom_init(s, 1, "bounded", level, 2, 1, 0.7);
                bound(e, "0-7");
                pin(&e->vcpus[1], "20-21");
                pin(&e->iothreads[0], "6");
                struct vpack_domain_sample *f = dom_init(s, 2, "load", level, 32, 0, 0.0);
                for (unsigned j = 0; j < 32; j++)
                    f->vcpus[j].util = loads[li] / 32;
                busy_everywhere(r.topo, s, loads[li]);
                struct vpack_plan *p = plan_step(&r, s);
                char ctx[96];
                snprintf(ctx, sizeof(ctx), "level %d load %.1f step %d", level, loads[li], step);
                check_pins(r.topo, &r.params, s, p, ctx);
                /* Spelled out for the off-host pin. */
                assert_true(vpack_cpuset_isset(p->domains[0].vcpus[0].cpus, 16383));
                assert_int_equal(vpack_cpuset_count(p->domains[0].vcpus[0].cpus), 2);
                vpack_plan_free(p);
                vpack_snapshot_free(s);
            }
            runner_fini(&r);
        }
    }
}

/* ---- Rule 9: bounds, as a property over random hosts and series ---- */

struct rng {
    uint64_t s;
};

static uint64_t rng_next(struct rng *r)
{
    /* xorshift64* */
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ULL;
}

static double rng_unit(struct rng *r)
{
    return (double)(rng_next(r) >> 11) / 9007199254740992.0;
}

static unsigned rng_below(struct rng *r, unsigned n)
{
    return n ? (unsigned)(rng_next(r) % n) : 0;
}

/* A random non-empty subset of the host's CPUs, maybe with ids it does not have. */
static vpack_cpuset *rng_cpuset(struct rng *r, const struct vpack_topology *t, bool offhost,
                                bool onhost)
{
    vpack_cpuset *s = malloc(sizeof(*s));
    assert_non_null(s);
    vpack_cpuset_zero(s);
    if (onhost) {
        unsigned kind = rng_below(r, 3);
        if (kind == 0 && t->npackages > 0) {
            /* One package, the usual NUMA-minded cpuset. */
            *s = t->packages[rng_below(r, t->npackages)].cpus;
        } else {
            double p = kind == 1 ? 0.15 : 0.6;
            VPACK_CPUSET_FOREACH(cpu, &t->cpus) {
                if (rng_unit(r) < p)
                    vpack_cpuset_set(s, (unsigned)cpu);
            }
            if (vpack_cpuset_empty(s))
                vpack_cpuset_set(s, (unsigned)vpack_cpuset_first(&t->cpus));
        }
    }
    if (offhost || vpack_cpuset_empty(s)) {
        vpack_cpuset_set(s, (unsigned)t->max_cpu + 1 + rng_below(r, 64));
        if (rng_below(r, 2))
            vpack_cpuset_set(s, VPACK_CPUSET_MAX - 1);
    }
    return s;
}

struct dom_template {
    char name[16];
    int level;
    unsigned nvcpus, niothreads;
    int bound_kind; /* 0 none, 1 on-host, 2 on+off-host, 3 off-host only */
    vpack_cpuset *bound;
    vpack_cpuset *vpin[16];
    vpack_cpuset *epin;
    vpack_cpuset *iopin[3];
    double weight;
    int memnode;
};

static vpack_cpuset *dup_set(const vpack_cpuset *s)
{
    if (!s)
        return NULL;
    vpack_cpuset *c = malloc(sizeof(*c));
    assert_non_null(c);
    *c = *s;
    return c;
}

static vpack_cpuset *rng_pin(struct rng *r, const struct vpack_topology *t, double prob)
{
    if (rng_unit(r) >= prob)
        return NULL;
    return rng_cpuset(r, t, rng_below(r, 5) == 0, true);
}

static void template_make(struct rng *r, const struct vpack_topology *t, struct dom_template *dt,
                          unsigned i)
{
    memset(dt, 0, sizeof(*dt));
    snprintf(dt->name, sizeof(dt->name), "dom%02u", i);
    dt->level = (int)rng_below(r, 4) - 1;
    dt->nvcpus = 1 + rng_below(r, 16);
    dt->niothreads = rng_below(r, 4);
    unsigned b = rng_below(r, 20);
    dt->bound_kind = b < 9 ? 0 : b < 15 ? 1 : b < 18 ? 2 : 3;
    if (dt->bound_kind)
        dt->bound = rng_cpuset(r, t, dt->bound_kind >= 2, dt->bound_kind <= 2);
    double pinp = rng_below(r, 3) == 0 ? 0.5 : 0.05;
    for (unsigned j = 0; j < dt->nvcpus; j++)
        dt->vpin[j] = rng_pin(r, t, pinp);
    dt->epin = rng_pin(r, t, pinp);
    for (unsigned j = 0; j < dt->niothreads; j++)
        dt->iopin[j] = rng_pin(r, t, pinp);
    dt->weight = rng_unit(r) * rng_unit(r) * 4.0;
    dt->memnode = (int)rng_below(r, 5);
}

static void template_free(struct dom_template *dt)
{
    free(dt->bound);
    for (unsigned j = 0; j < dt->nvcpus; j++)
        free(dt->vpin[j]);
    free(dt->epin);
    for (unsigned j = 0; j < dt->niothreads; j++)
        free(dt->iopin[j]);
}

/* One snapshot: the templates present this time, load around level (share of cores). */
static struct vpack_snapshot *rng_snapshot(struct rng *r, const struct vpack_topology *t,
                                           struct dom_template *tpl, unsigned ntpl, double level)
{
    unsigned present[32], n = 0;
    for (unsigned i = 0; i < ntpl; i++)
        if (rng_unit(r) < 0.85)
            present[n++] = i;
    unsigned extra = rng_below(r, 4) == 0 ? rng_below(r, 9) : 0; /* CPU ids beyond the host */
    unsigned ncpus = (unsigned)t->max_cpu + 1 + extra;
    struct vpack_snapshot *s = vpack_snapshot_new(ncpus, n);
    assert_non_null(s);
    const unsigned intervals[] = {500, 1000, 1000, 1000, 2000};
    s->interval_ms = intervals[rng_below(r, 5)];
    double cores = total_cores(t);
    double target = level * cores;
    double wsum = 0.0;
    for (unsigned k = 0; k < n; k++)
        wsum += tpl[present[k]].weight * tpl[present[k]].nvcpus;
    for (unsigned k = 0; k < n; k++) {
        struct dom_template *dt = &tpl[present[k]];
        struct vpack_domain_sample *d = dom_init(s, k, dt->name, dt->level, dt->nvcpus,
                                                 dt->niothreads, 0.0);
        d->cpuset = dup_set(dt->bound);
        double per = wsum > 0 ? target * dt->weight / wsum : 0.0;
        for (unsigned j = 0; j < dt->nvcpus; j++) {
            struct vpack_thread_sample *th = &d->vcpus[j];
            double u = per * (0.2 + 1.6 * rng_unit(r));
            th->util = u > 1.0 ? 1.0 : u;
            th->delay = rng_below(r, 10) == 0 ? rng_unit(r) * 0.4 : 0.0;
            th->pin = dup_set(dt->vpin[j]);
            th->cpu = rng_below(r, 3) ? (int)rng_below(r, ncpus + 2) : -1;
        }
        d->emulator.util = rng_unit(r) * 0.1;
        d->emulator.pin = dup_set(dt->epin);
        for (unsigned j = 0; j < dt->niothreads; j++) {
            d->iothreads[j].util = rng_unit(r) * 0.3;
            d->iothreads[j].pin = dup_set(dt->iopin[j]);
        }
        if (rng_below(r, 2)) {
            int nodes[2] = {dt->memnode, dt->memnode + 1};
            double sh = 0.5 + rng_unit(r) * 0.5;
            double shares[2] = {sh, 1.0 - sh};
            memory_on(d, 2, nodes, shares);
        }
    }
    for (unsigned c = 0; c < ncpus; c++) {
        if (rng_below(r, 40) == 0)
            s->cpu_busy[c] = -1.0; /* not reported */
        else if (c > (unsigned)t->max_cpu || !vpack_cpuset_isset(&t->cpus, c))
            s->cpu_busy[c] = rng_unit(r); /* must not count */
        else {
            double b = level * (0.5 + rng_unit(r));
            s->cpu_busy[c] = b > 1.0 ? 1.0 : b;
        }
    }
    return s;
}

static void test_masks_within_bound_property(void **unused)
{
    (void)unused;
    static const struct {
        const char *desc, *reserved;
    } hosts[] = {
        {"package:1 core:2 pu:1", NULL},
        {"package:2 core:2 pu:2", NULL},
        {"package:2 core:4 pu:1", NULL},
        {"package:4 core:4 pu:2", NULL},
        {"package:3 core:3 pu:2", NULL},
        {"package:2 numa:1 core:4 pu:2", NULL},
        {"package:8 core:4 pu:1", NULL},
        {"package:4 core:4 pu:2", "0-1,9"},
        {"package:2 core:8 pu:2", "0-7"},
    };
    const uint64_t seed = 0x5eedf00dULL;
    struct rng r = {seed};
    unsigned nplans = 0;
    for (unsigned h = 0; h < sizeof(hosts) / sizeof(hosts[0]); h++) {
        struct vpack_topology *t = topo_load_reserved(hosts[h].desc, hosts[h].reserved);
        for (unsigned series = 0; series < 8; series++) {
            struct vpack_policy_params params;
            vpack_policy_params_default(&params);
            params.smt_gain = 1; /* as runner_init() */
            params.default_level = (int)rng_below(&r, 3);
            if (series % 2) {
                /* Short timers, so that packing happens inside the series. */
                params.spread_samples = 1 + rng_below(&r, 3);
                params.pack_delay_ms = 2000;
                params.min_residency_ms = 6000;
            }
            struct vpack_policy_state *st = vpack_policy_state_new();
            assert_non_null(st);
            struct dom_template tpl[14];
            unsigned ntpl = 1 + rng_below(&r, 14);
            for (unsigned i = 0; i < ntpl; i++)
                template_make(&r, t, &tpl[i], i);
            double level = rng_unit(&r);
            for (unsigned step = 0; step < 40; step++) {
                /* Random walk over low, high and heavy load, with jumps. */
                if (rng_below(&r, 8) == 0)
                    level = rng_unit(&r) * 1.2;
                else
                    level += (rng_unit(&r) - 0.5) * 0.2;
                if (level < 0.0)
                    level = 0.0;
                if (level > 1.2)
                    level = 1.2;
                struct vpack_snapshot *s = rng_snapshot(&r, t, tpl, ntpl, level);
                struct vpack_plan *p = NULL;
                int rc = vpack_plan_compute(t, &params, s, st, &p);
                char ctx[160];
                snprintf(ctx, sizeof(ctx), "seed %#llx host '%s'%s%s series %u step %u load %.2f",
                         (unsigned long long)seed, hosts[h].desc,
                         hosts[h].reserved ? " reserved " : "",
                         hosts[h].reserved ? hosts[h].reserved : "", series, step, level);
                if (rc != 0 || !p)
                    fail_msg("%s: vpack_plan_compute returned %d", ctx, rc);
                check_all(t, &params, s, p, ctx);
                nplans++;
                vpack_plan_free(p);
                vpack_snapshot_free(s);
            }
            for (unsigned i = 0; i < ntpl; i++)
                template_free(&tpl[i]);
            vpack_policy_state_free(st);
        }
        vpack_topology_free(t);
    }
    assert_true(nplans >= 9 * 8 * 40);
}

/* ---- Rule 1: level 0 and default_level ---- */

static void test_level0_never_restricted(void **unused)
{
    (void)unused;
    const double loads[] = {0.5, 5.0, 30.0};
    for (unsigned li = 0; li < 3; li++) {
        struct runner r;
        runner_init(&r, "package:4 core:4 pu:2");
        for (int step = 0; step < 8; step++) {
            struct vpack_snapshot *s = snap_new(r.topo, 3);
            double u = loads[li] / 8 < 0.9 ? loads[li] / 8 : 0.9;
            dom_init(s, 0, "zero", 0, 4, 1, u);
            struct vpack_domain_sample *b = dom_init(s, 1, "zero-bound", 0, 2, 1, u);
            bound(b, "4-13");
            pin(&b->vcpus[1], "2");
            dom_init(s, 2, "nopolicy", -1, 2, 0, u);
            busy_everywhere(r.topo, s, loads[li]);
            struct vpack_plan *p = plan_step(&r, s);
            char ctx[64];
            snprintf(ctx, sizeof(ctx), "load %.1f step %d", loads[li], step);
            check_free_masks(r.topo, &r.params, s, p, ctx);
            /* Spelled out: the full bound for every unpinned thread. */
            assert_true(vpack_cpuset_equal(p->domains[0].vcpus[0].cpus, &r.topo->cpus));
            vpack_cpuset want = set_of("4-13");
            assert_true(vpack_cpuset_equal(p->domains[1].vcpus[0].cpus, &want));
            assert_true(vpack_cpuset_equal(p->domains[1].emulator.cpus, &want));
            assert_int_equal(p->domains[2].level, 0);
            assert_true(vpack_cpuset_equal(p->domains[2].vcpus[1].cpus, &r.topo->cpus));
            vpack_plan_free(p);
            vpack_snapshot_free(s);
        }
        runner_fini(&r);
    }

    /* default_level applies to level -1 only. */
    for (int def = 0; def <= 2; def++) {
        struct runner r;
        runner_init(&r, "package:4 core:4 pu:2");
        r.params.default_level = def;
        struct vpack_snapshot *s = snap_new(r.topo, 2);
        dom_init(s, 0, "nopolicy", -1, 2, 1, 0.9);
        dom_init(s, 1, "explicit0", 0, 2, 1, 0.1);
        struct vpack_plan *p = plan_step(&r, s);
        check_free_masks(r.topo, &r.params, s, p, "default_level");
        assert_int_equal(p->domains[0].level, def);
        assert_int_equal(p->domains[1].level, 0);
        /* 2.0 CPUs of demand on 16 cores: one package; a managed busy vCPU is confined. */
        assert_int_equal(p->nactive, 1);
        if (def > 0) {
            if (!p->domains[0].vcpus[0].restricted)
                fail_msg("default_level %d: busy vCPU of a level -1 domain not confined (%s)",
                         def, fmt(p->domains[0].vcpus[0].cpus));
        } else {
            assert_false(p->domains[0].vcpus[0].restricted);
        }
        vpack_plan_free(p);
        vpack_snapshot_free(s);
        runner_fini(&r);
    }
}

/* ---- Rules 3 and 4: how many packages ---- */

/* Expected lower bound with packages taken by ascending id. */
/* The fewest packages, the largest first (issue 13, B7: not in id order). */
static unsigned lower_bound_by_id(const struct vpack_topology *t, double pack_wm, double demand)
{
    unsigned cores[64], n = t->npackages < 64 ? t->npackages : 64;
    double cap = 0.0;
    for (unsigned i = 0; i < n; i++)
        cores[i] = t->packages[i].ncores;
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = i + 1; j < n; j++)
            if (cores[j] > cores[i]) {
                unsigned x = cores[i];
                cores[i] = cores[j];
                cores[j] = x;
            }
    for (unsigned i = 0; i < n; i++) {
        cap += cores[i] * pack_wm;
        if (cap >= demand)
            return i + 1;
    }
    return t->npackages;
}

static void test_package_count_lower_bound(void **unused)
{
    (void)unused;
    static const struct {
        const char *desc, *reserved;
    } hosts[] = {
        {"package:4 core:4 pu:2", NULL},
        {"package:2 core:8 pu:2", NULL},
        {"package:8 core:2 pu:1", NULL},
        {"package:3 core:6 pu:1", NULL},
        {"package:4 core:4 pu:2", "0-1"}, /* package 0 keeps 3 cores */
    };
    unsigned ncases = 0;
    for (unsigned h = 0; h < sizeof(hosts) / sizeof(hosts[0]); h++) {
        struct vpack_topology *t = topo_load_reserved(hosts[h].desc, hosts[h].reserved);
        struct vpack_policy_params params;
        vpack_policy_params_default(&params);
        params.smt_gain = 1; /* as runner_init() */
        unsigned cores = t->packages[t->npackages - 1].ncores;
        double cap = cores * params.pack_watermark;
        for (unsigned k = 1; k <= t->npackages; k++) {
            const double demands[] = {(k - 1) * cap + 0.05, k * cap - 0.05, (k - 0.5) * cap};
            for (unsigned di = 0; di < 3; di++) {
                for (int via_util = 0; via_util <= 1; via_util++) {
                    double demand = demands[di];
                    struct vpack_snapshot *s = snap_new(t, 1);
                    if (via_util) {
                        /* All of it as the util of a level 0 domain's vCPUs. */
                        unsigned n = (unsigned)ceil(demand);
                        struct vpack_domain_sample *d = dom_init(s, 0, "load", 0, n, 0, 0.0);
                        for (unsigned j = 0; j < n; j++)
                            d->vcpus[j].util = demand / n;
                        busy_everywhere(t, s, demand * 0.5);
                    } else {
                        dom_init(s, 0, "idle", 1, 2, 0, 0.0);
                        busy_everywhere(t, s, demand);
                    }
                    if (hosts[h].reserved) {
                        /* Reserved CPUs are not usable: their load does not count. */
                        s->cpu_busy[0] = 1.0;
                        s->cpu_busy[1] = 1.0;
                    }
                    struct vpack_policy_state *st = vpack_policy_state_new();
                    struct vpack_plan *p = NULL;
                    assert_int_equal(vpack_plan_compute(t, &params, s, st, &p), 0);
                    char ctx[128];
                    snprintf(ctx, sizeof(ctx), "host '%s' demand %.2f via %s", hosts[h].desc,
                             demand, via_util ? "util" : "busy");
                    check_shape(t, s, p, ctx);
                    check_demand(t, s, p, ctx);
                    unsigned want = lower_bound_by_id(t, params.pack_watermark, demand);
                    if (!hosts[h].reserved && want != ceil_div(demand, cap))
                        fail_msg("test bug: %u != ceil(%f / %f)", want, demand, cap);
                    if (p->nactive != want)
                        fail_msg("%s: %u active packages (%s), want %u = lower bound", ctx,
                                 p->nactive, active_str(p), want);
                    /* Nothing busier anywhere: lower ids first. */
                    for (unsigned i = 0; i < p->nactive && !hosts[h].reserved; i++)
                        if (p->active_packages[i] != t->packages[i].id)
                            fail_msg("%s: active packages %s, want the %u lowest", ctx,
                                     active_str(p), want);
                    ncases++;
                    vpack_plan_free(p);
                    vpack_policy_state_free(st);
                    vpack_snapshot_free(s);
                }
            }
        }
        vpack_topology_free(t);
    }
    assert_true(ncases > 50);
}

/* A busy thread pinned into one package alone keeps that package awake. */
static void test_pinned_busy_keeps_package_awake(void **unused)
{
    (void)unused;
    static const struct {
        const char *pin;
        double util;
        int level;
        bool emulator;
        double other;  /* extra unpinned demand */
        const char *want; /* active packages as a set, in any order */
    } cases[] = {
        {"24-25", 0.9, 0, false, 0.0, "3"},
        {"24-25", 0.9, 2, false, 0.0, "3"},
        {"31", 0.05, 1, false, 0.0, "3"},      /* 0.05 is busy */
        {"24-25", 0.9, 0, false, 2.0, "0,3"},  /* 2.9 needs 2: the pinned one and id 0 */
        {"16", 0.3, 0, true, 0.0, "2"},        /* a pinned emulator counts too */
        {"8,24", 0.9, 0, false, 0.0, "0"},     /* across two packages: forces neither */
        {"24-25", 0.04, 0, false, 0.0, "0"},   /* not busy */
    };
    for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct runner r;
        runner_init(&r, "package:4 core:4 pu:2");
        struct vpack_snapshot *s = snap_new(r.topo, 2);
        struct vpack_domain_sample *d = dom_init(s, 0, "pinned", cases[c].level, 2, 0, 0.0);
        if (cases[c].emulator) {
            pin(&d->emulator, cases[c].pin);
            d->emulator.util = cases[c].util;
        } else {
            pin(&d->vcpus[0], cases[c].pin);
            d->vcpus[0].util = cases[c].util;
        }
        struct vpack_domain_sample *o = dom_init(s, 1, "other", 0, 4, 0, cases[c].other / 4);
        (void)o;
        struct vpack_plan *p = plan_step(&r, s);
        vpack_cpuset want = set_of(cases[c].want), got;
        vpack_cpuset_zero(&got);
        for (unsigned i = 0; i < p->nactive; i++)
            vpack_cpuset_set(&got, (unsigned)p->active_packages[i]);
        if (!vpack_cpuset_equal(&got, &want))
            fail_msg("case %u (pin %s util %.2f%s): active packages %s, want {%s}", c,
                     cases[c].pin, cases[c].util, cases[c].emulator ? " emulator" : "",
                     active_str(p), cases[c].want);
        /* Pinned packages come first in preference order. */
        if (vpack_cpuset_count(&want) == 2 && p->nactive == 2 && p->active_packages[0] != 3)
            fail_msg("case %u: active %s, want the pinned package 3 first", c, active_str(p));
        vpack_plan_free(p);
        vpack_snapshot_free(s);
        runner_fini(&r);
    }
}

/*
 * The pinned-busy threshold has hysteresis: a pinned thread hovering just
 * under 0.05 keeps its already active package awake (down to 0.025), so the
 * package does not flap; below that it is let go, and a parked package is
 * only woken at 0.05.
 */
static void test_pinned_busy_hysteresis(void **unused)
{
    (void)unused;
    static const struct {
        double util;
        const char *want;
    } steps[] = {
        /* Another domain's busy pin keeps package 1 awake throughout. */
        {0.06, "1,3"}, /* busy: wakes package 3 */
        {0.04, "1,3"}, /* under 0.05 but package 3 is active: stays */
        {0.03, "1,3"},
        {0.01, "1"},   /* let go */
    };
    struct runner r;
    runner_init(&r, "package:4 core:4 pu:2");
    r.params.pack_delay_ms = 0;
    r.params.min_residency_ms = 0;
    for (unsigned c = 0; c < sizeof(steps) / sizeof(steps[0]); c++) {
        struct vpack_snapshot *s = snap_new(r.topo, 2);
        struct vpack_domain_sample *d = dom_init(s, 0, "pinned", 0, 2, 0, 0.0);
        pin(&d->vcpus[0], "24-25");
        d->vcpus[0].util = steps[c].util;
        struct vpack_domain_sample *o = dom_init(s, 1, "other", 0, 2, 0, 0.0);
        pin(&o->vcpus[0], "8-9");
        o->vcpus[0].util = 0.5;
        struct vpack_plan *p = plan_step(&r, s);
        vpack_cpuset want = set_of(steps[c].want), got;
        vpack_cpuset_zero(&got);
        for (unsigned i = 0; i < p->nactive; i++)
            vpack_cpuset_set(&got, (unsigned)p->active_packages[i]);
        if (!vpack_cpuset_equal(&got, &want))
            fail_msg("step %u (util %.2f): active packages %s, want {%s} (%s)", c, steps[c].util,
                     active_str(p), steps[c].want, p->reason);
        vpack_plan_free(p);
        vpack_snapshot_free(s);
    }
    /* A parked package is not woken by a thread under 0.05. */
    struct runner r2;
    runner_init(&r2, "package:4 core:4 pu:2");
    struct vpack_snapshot *s = snap_new(r2.topo, 1);
    struct vpack_domain_sample *d = dom_init(s, 0, "pinned", 0, 2, 0, 0.0);
    pin(&d->vcpus[0], "24-25");
    d->vcpus[0].util = 0.04;
    struct vpack_plan *p = plan_step(&r2, s);
    if (p->nactive != 1 || p->active_packages[0] != 0)
        fail_msg("util 0.04 woke a parked package: active %s", active_str(p));
    vpack_plan_free(p);
    vpack_snapshot_free(s);
    runner_fini(&r2);
    runner_fini(&r);
}

/*
 * Rule 4 lists what keeps a package active: the demand, busy guest-pinned
 * threads, hysteresis and residency. An idle domain whose cpuset lies in one
 * package is none of these, and keeps its bound.
 */
static void test_idle_bound_does_not_wake_package(void **unused)
{
    (void)unused;
    struct runner r;
    runner_init(&r, "package:4 core:4 pu:1");
    for (int step = 0; step < 3; step++) {
        struct vpack_snapshot *s = snap_new(r.topo, 2);
        dom_init(s, 0, "work", 1, 2, 0, 0.25);
        struct vpack_domain_sample *d = dom_init(s, 1, "node3", 2, 2, 1, 0.0);
        bound(d, "12-15");
        struct vpack_plan *p = plan_step(&r, s);
        char ctx[32];
        snprintf(ctx, sizeof(ctx), "step %d", step);
        check_all(r.topo, &r.params, s, p, ctx);
        if (p->nactive != 1 || p->active_packages[0] != 0)
            fail_msg("%s: demand 0.5 and an idle domain bound to package 3: active %s, want 0 "
                     "(%s; node3: %s)", ctx, active_str(p), p->reason, p->domains[1].reason);
        vpack_plan_free(p);
        vpack_snapshot_free(s);
    }
    runner_fini(&r);
}

/* Rule 3: capacity in physical cores. */
static void test_capacity_counts_cores_not_threads(void **unused)
{
    (void)unused;
    static const struct {
        const char *desc;
        double demand;
        unsigned want;
    } cases[] = {
        /* 2 cores * 0.6 = 1.2 < 1.5: two packages (4 threads * 0.6 = 2.4 would hold it). */
        {"package:2 core:2 pu:2", 1.5, 2},
        {"package:4 core:2 pu:2", 1.5, 2},
        {"package:4 core:2 pu:4", 2.0, 2},
        /* The same number of CPUs without SMT. */
        {"package:2 core:4 pu:1", 1.5, 1},
        {"package:4 core:4 pu:1", 1.5, 1},
    };
    for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        for (int via_util = 0; via_util <= 1; via_util++) {
            struct runner r;
            runner_init(&r, cases[c].desc);
            struct vpack_snapshot *s = snap_new(r.topo, 1);
            if (via_util) {
                dom_init(s, 0, "busy", 1, 3, 0, cases[c].demand / 3);
            } else {
                dom_init(s, 0, "idle", 1, 1, 0, 0.0);
                busy_everywhere(r.topo, s, cases[c].demand);
            }
            struct vpack_plan *p = plan_step(&r, s);
            if (p->nactive != cases[c].want)
                fail_msg("'%s' demand %.2f via %s: %u active packages (%s), want %u",
                         cases[c].desc, cases[c].demand, via_util ? "util" : "busy", p->nactive,
                         active_str(p), cases[c].want);
            vpack_plan_free(p);
            vpack_snapshot_free(s);
            runner_fini(&r);
        }
    }
}

/* Rule 5: busy packages before idle ones, then lower ids; previous plan kept. */
static void test_package_preference(void **unused)
{
    (void)unused;
    struct runner r;
    runner_init(&r, "package:4 core:4 pu:1");
    /* 0.5 busy on package 2 (12.5% of its cores), nothing else: package 2. */
    struct vpack_snapshot *s = snap_new(r.topo, 1);
    dom_init(s, 0, "idle", 1, 1, 0, 0.0);
    busy_package(r.topo, s, 2, 0.5);
    struct vpack_plan *p = plan_step(&r, s);
    if (p->nactive != 1 || p->active_packages[0] != 2)
        fail_msg("busy package 2: active %s, want 2", active_str(p));
    vpack_plan_free(p);
    vpack_snapshot_free(s);
    runner_fini(&r);

    /* 0.3 is under 10% of 4 cores: not busy, lowest id. */
    runner_init(&r, "package:4 core:4 pu:1");
    s = snap_new(r.topo, 1);
    dom_init(s, 0, "idle", 1, 1, 0, 0.0);
    busy_package(r.topo, s, 2, 0.3);
    p = plan_step(&r, s);
    if (p->nactive != 1 || p->active_packages[0] != 0)
        fail_msg("package 2 at 7.5%%: active %s, want 0", active_str(p));
    vpack_plan_free(p);
    vpack_snapshot_free(s);

    /* Once active, package 0 is preferred over a now busier package 3. */
    s = snap_new(r.topo, 1);
    dom_init(s, 0, "idle", 1, 1, 0, 0.0);
    busy_package(r.topo, s, 3, 1.0);
    p = plan_step(&r, s);
    if (p->nactive != 1 || p->active_packages[0] != 0)
        fail_msg("previous plan had 0 active: active %s, want 0 kept", active_str(p));
    vpack_plan_free(p);
    vpack_snapshot_free(s);
    runner_fini(&r);

    /* Two needed, packages 1 and 3 busy: {1, 3}, in that order. */
    runner_init(&r, "package:4 core:4 pu:1");
    s = snap_new(r.topo, 1);
    dom_init(s, 0, "idle", 1, 1, 0, 0.0);
    busy_package(r.topo, s, 3, 1.5);
    busy_package(r.topo, s, 1, 1.5);
    p = plan_step(&r, s);
    if (p->nactive != 2 || p->active_packages[0] != 1 || p->active_packages[1] != 3)
        fail_msg("busy 1 and 3, demand 3.0: active %s, want 1,3", active_str(p));
    vpack_plan_free(p);
    vpack_snapshot_free(s);
    runner_fini(&r);
}

/* ---- Rule 4: hysteresis ---- */

static void advance(struct runner *r, double demand, unsigned seconds)
{
    for (unsigned i = 0; i < seconds; i++)
        vpack_plan_free(model_step(r, demand, 0.0));
}

static void test_spike_spreads_within_two_snapshots(void **unused)
{
    (void)unused;
    /* 16 cores in 4 packages: pack capacity 2.4, spread threshold 3.2 per package. */
    static const struct {
        double spike, delay;
        unsigned want;      /* at least this many active packages */
        unsigned by_sample; /* at the latest at this snapshot of the spike */
        bool lifted;
    } cases[] = {
        {3.5, 0.0, 2, 2, false},  /* over 80% of 4 cores, under 4: two samples */
        {5.0, 0.0, 3, 1, false},  /* over all 4 active cores: at once, to the lower bound */
        {12.0, 0.0, 4, 1, true},  /* every package needed: lifted */
        {1.5, 0.3, 2, 2, false},  /* light load but a vCPU waits 30% of the time */
    };
    for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct runner r;
        runner_init(&r, "package:4 core:4 pu:2");
        advance(&r, 1.5, 10);
        struct vpack_plan *p = model_step(&r, 1.5, 0.0);
        if (p->nactive != 1)
            fail_msg("case %u: not packed before the spike: %s", c, active_str(p));
        vpack_plan_free(p);
        bool done = false;
        for (unsigned k = 1; k <= 2; k++) {
            p = model_step(&r, cases[c].spike, cases[c].delay);
            bool ok = p->nactive >= cases[c].want && (!cases[c].lifted || p->lifted);
            if (ok)
                done = true;
            if (k >= cases[c].by_sample && !done)
                fail_msg("case %u (spike %.1f delay %.2f): snapshot %u of the spike has %u "
                         "active (%s)%s, want >= %u%s", c, cases[c].spike, cases[c].delay, k,
                         p->nactive, active_str(p), p->lifted ? " lifted" : "", cases[c].want,
                         cases[c].lifted ? " and lifted" : "");
            vpack_plan_free(p);
        }
        runner_fini(&r);
    }
}

/*
 * A step that saturates the active package: A (0.14 CPU) packed with B,
 * whose vCPU starts spinning. On the one active core the step measures no
 * more than the core, and smoothing (rise 0.8) shows 0.94 of it: under all
 * of the core, so the smoothed values alone spread only at the second
 * snapshot. The last interval alone (util_now + delay_now) asks for 1.14
 * CPUs: over all of the core, at once. A guest pin on B's vCPU takes its
 * delay out (vpack cannot move it), and then the two-snapshot rule holds.
 */
static struct vpack_snapshot *step_snap(const struct vpack_topology *t, int active, bool now,
                                        const vpack_cpuset *b_pin)
{
    struct vpack_snapshot *s = snap_new(t, 2);
    dom_init(s, 0, "a", 2, 1, 0, 0.14);
    struct vpack_domain_sample *b = dom_init(s, 1, "b", 2, 1, 0, 0.8 * 0.86);
    s->domains[0].vcpus[0].delay = 0.8 * 0.02;
    b->vcpus[0].delay = 0.8 * 0.14;
    if (now) {
        s->domains[0].vcpus[0].util_now = 0.12;
        s->domains[0].vcpus[0].delay_now = 0.02;
        b->vcpus[0].util_now = 0.86;
        b->vcpus[0].delay_now = 0.14;
    }
    if (b_pin) {
        b->vcpus[0].pin = malloc(sizeof(*b_pin));
        assert_non_null(b->vcpus[0].pin);
        *b->vcpus[0].pin = *b_pin;
    }
    busy_package(t, s, active, 1.0);
    if (now) {
        assert_int_equal(vpack_snapshot_want_now(s), 0);
        memcpy(s->cpu_busy_now, s->cpu_busy, s->ncpus * sizeof(*s->cpu_busy));
    }
    return s;
}

static void test_saturating_step_spreads_at_once(void **unused)
{
    (void)unused;
    static const struct {
        bool now, pinned;
        unsigned by_sample; /* spread to both packages at this snapshot of the step, not before */
    } cases[] = {
        {true, false, 1},  /* the last interval alone is over the core: at once */
        {false, false, 2}, /* smoothed only (a record without them): two snapshots */
        {true, true, 2},   /* B guest-pinned: its delay is no reason; two snapshots */
    };
    for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct runner r;
        runner_init(&r, "package:2 core:1 pu:1");
        struct vpack_plan *p = NULL;
        for (unsigned k = 0; k < 10; k++) {
            struct vpack_snapshot *s = snap_new(r.topo, 2);
            dom_init(s, 0, "a", 2, 1, 0, 0.14);
            dom_init(s, 1, "b", 2, 1, 0, 0.0);
            busy_package(r.topo, s, p ? p->active_packages[0] : 0, 0.14);
            vpack_plan_free(p);
            p = plan_step(&r, s);
            vpack_snapshot_free(s);
        }
        if (p->nactive != 1)
            fail_msg("case %u: not packed before the step: %s", c, active_str(p));
        int active = p->active_packages[0];
        vpack_cpuset b_pin = pkg_cpus(r.topo, active);
        vpack_plan_free(p);
        for (unsigned k = 1; k <= 2; k++) {
            struct vpack_snapshot *s =
                step_snap(r.topo, active, cases[c].now, cases[c].pinned ? &b_pin : NULL);
            p = plan_step(&r, s);
            /* Spread to both packages: every package active, restrictions lifted. */
            bool spread = p->lifted;
            if (spread != (k >= cases[c].by_sample))
                fail_msg("case %u: snapshot %u of the step is %slifted (%s), want %slifted: %s",
                         c, k, spread ? "" : "not ", active_str(p),
                         k >= cases[c].by_sample ? "" : "not ", p->reason);
            if (spread && k == 1 && !strstr(p->reason, "last interval"))
                fail_msg("case %u: the reason does not say why: %s", c, p->reason);
            vpack_snapshot_free(s);
            vpack_plan_free(p);
        }
        runner_fini(&r);
    }
}

/*
 * What the agent hands the policy for a host whose raw per-CPU busy and
 * per-vCPU delay of one interval are given: each CPU and each vCPU smoothed
 * with the agent's own factors (lib/config.c), the raw values as the last
 * interval alone. Three idle level-2 guests of one vCPU each (util 0.02).
 */
struct agent_view {
    struct vpack_config cfg;
    double busy[2], delay[3];
    bool started;
};

static void view_smooth(const struct agent_view *v, double *avg, double x)
{
    *avg += (x > *avg ? v->cfg.smoothing_rise : v->cfg.smoothing_fall) * (x - *avg);
}

static struct vpack_snapshot *view_step(struct agent_view *v, const struct vpack_topology *t,
                                        const double raw[2], double delay_raw, unsigned nwait,
                                        bool now)
{
    static const char *const names[] = {"a", "b", "c"};
    struct vpack_snapshot *s = snap_new(t, 3);
    if (now)
        assert_int_equal(vpack_snapshot_want_now(s), 0);
    for (unsigned c = 0; c < 2; c++) {
        if (!v->started)
            v->busy[c] = raw[c];
        else
            view_smooth(v, &v->busy[c], raw[c]);
        s->cpu_busy[c] = v->busy[c];
        if (now)
            s->cpu_busy_now[c] = raw[c];
    }
    for (unsigned i = 0; i < 3; i++) {
        struct vpack_domain_sample *d = dom_init(s, i, names[i], 2, 1, 0, 0.02);
        double w = i < nwait ? delay_raw : 0; /* the first nwait wait */
        view_smooth(v, &v->delay[i], w);
        d->vcpus[0].delay = v->delay[i];
        if (now) {
            d->vcpus[0].util_now = 0.02;
            d->vcpus[0].delay_now = w;
        }
    }
    v->started = true;
    return s;
}

/*
 * A one-second burst outside the guests (1.5 CPUs over both CPUs, more than
 * the one active core) every 20 s, or a one-second run-queue delay of two
 * guests' vCPUs (under the core in all): with the last interval alone in the snapshot, neither
 * spreads the packed guests (the smoothed values stay over the watermark for
 * a second sample, the raw ones do not); the same load sustained spreads at
 * its third sample (the guests' own load at its second); without the last interval's values an isolated burst
 * spreads nothing either (load outside the guests is never a reason to
 * spread at once, and the smoothed active core is over for one sample).
 */
static void test_one_interval_burst_does_not_spread(void **unused)
{
    (void)unused;
    static const struct {
        const char *what;
        bool now, delay, sustained;
        unsigned nwait; /* delay: how many of the three vCPUs wait */
        int spread_at;  /* sample of the burst at which it spreads, -1: never */
    } cases[] = {
        {"isolated 1.5-CPU bursts, last interval known", true, false, false, 0, -1},
        {"isolated delay bursts of two vCPUs, last interval known", true, true, false, 2, -1},
        /* 0.06 run + 1.35 delay asks for more than the core, but the guests' run time
         * is light: other load queues them, no reason to spread at once. */
        {"isolated delay bursts of three vCPUs, last interval known", true, true, false, 3, -1},
        /* Load outside the guests (their own run time under the trigger), or the delay
         * it makes them wait, spreads one sample later than the guests' own load: a
         * one-second burst that straddles two ticks is over in two samples, never three. */
        {"sustained 1.5 CPUs, last interval known", true, false, true, 0, 3},
        {"sustained delay of two vCPUs, last interval known", true, true, true, 2, 3},
        /* The smoothed active core (0.81) is over the watermark for one sample only, and a
         * core's busy time cannot pass the core: only the guests' own threads spread at once. */
        {"isolated 1.5-CPU bursts, smoothed values only", false, false, false, 0, -1},
    };
    for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct runner r;
        struct agent_view v = {.started = false};
        runner_init(&r, "package:2 core:1 pu:1");
        assert_int_equal(vpack_config_init(&v.cfg), 0);
        unsigned changes = 0, first_spread = 0, last_nactive = 0;
        struct vpack_plan *p = NULL;
        for (unsigned k = 0; k < 200; k++) {
            int active = p && p->nactive == 1 ? p->active_packages[0] : 0;
            /* Bursts at 30, 50, 70, ...; sustained from 30 on. */
            bool burst = k >= 30 && (cases[c].sustained || (k - 30) % 20 == 0);
            double raw[2] = {0, 0}, delay = 0;
            raw[active] = 0.06;
            if (burst && !cases[c].delay) {
                /* 1.5 CPUs outside the guests: the active core full, half the other. */
                raw[active] = 1.0;
                raw[1 - active] += 0.5;
            } else if (burst) {
                /* Two vCPUs wait 0.45 of one interval: the smoothed delay (0.36, then
                 * 0.25) is over the 0.25 threshold twice, while the last interval's ask
                 * (0.06 run + 0.9 delay) stays under the one active core. */
                delay = 0.45;
            }
            struct vpack_snapshot *s =
                view_step(&v, r.topo, raw, delay, cases[c].nwait, cases[c].now);
            vpack_plan_free(p);
            p = plan_step(&r, s);
            vpack_snapshot_free(s);
            if (k == 29 && p->nactive != 1)
                fail_msg("%s: not packed before the bursts: %s", cases[c].what, active_str(p));
            if (k >= 30 && p->nactive != last_nactive) {
                changes++;
                if (!first_spread && p->nactive > last_nactive)
                    first_spread = k - 30 + 1;
            }
            last_nactive = p->nactive;
        }
        vpack_plan_free(p);
        if (cases[c].spread_at < 0 && changes)
            fail_msg("%s: %u changes of the active count after the first burst", cases[c].what,
                     changes);
        if (cases[c].spread_at > 0 && first_spread != (unsigned)cases[c].spread_at)
            fail_msg("%s: spread at sample %u of the burst, want %d", cases[c].what,
                     first_spread, cases[c].spread_at);
        vpack_config_clear(&v.cfg);
        runner_fini(&r);
    }
}

/* Moves of one domain across a series; residency checked against every move. */
struct move_log {
    unsigned long last_move[MODEL_DOMAINS];
    int pkgs[MODEL_DOMAINS][8];
    unsigned npkgs[MODEL_DOMAINS];
    unsigned nmoves;
};

static bool same_packages(const struct move_log *m, unsigned i, const struct vpack_plan_domain *pd)
{
    if (m->npkgs[i] != pd->npackages)
        return false;
    for (unsigned k = 0; k < pd->npackages; k++) {
        bool found = false;
        for (unsigned j = 0; j < m->npkgs[i]; j++)
            found = found || m->pkgs[i][j] == pd->packages[k];
        if (!found)
            return false;
    }
    return true;
}

static void log_placement(struct move_log *m, unsigned i, const struct vpack_plan_domain *pd,
                          unsigned long now)
{
    m->last_move[i] = now;
    m->npkgs[i] = pd->npackages < 8 ? pd->npackages : 8;
    for (unsigned k = 0; k < m->npkgs[i]; k++)
        m->pkgs[i][k] = pd->packages[k];
}

/*
 * Feeds demand(t) for seconds and fails when a domain moves (moved flag or
 * another package set) less than min_residency_ms after its previous
 * placement, unless that plan spreads (more active packages, or lifted).
 */
static void residency_run(const char *name, const char *desc, int level, double d0,
                          double (*demand)(unsigned), unsigned seconds, unsigned *nmoves,
                          unsigned *nactive_min, unsigned *nactive_max)
{
    struct runner r;
    runner_init(&r, desc);
    r.model_level = level;
    struct move_log m;
    memset(&m, 0, sizeof(m));
    struct vpack_plan *prev = model_step(&r, d0, 0.0);
    for (unsigned i = 0; i < MODEL_DOMAINS; i++)
        log_placement(&m, i, &prev->domains[i], r.now_ms);
    *nactive_min = *nactive_max = prev->nactive;
    for (unsigned sec = 1; sec <= seconds; sec++) {
        double dem = demand(sec);
        struct vpack_plan *p = model_step(&r, dem, 0.0);
        bool spread = p->nactive > prev->nactive || (p->lifted && !prev->lifted);
        for (unsigned i = 0; i < MODEL_DOMAINS; i++) {
            const struct vpack_plan_domain *pd = &p->domains[i];
            bool moved = pd->moved || !same_packages(&m, i, pd);
            if (!moved)
                continue;
            m.nmoves++;
            unsigned long since = r.now_ms - m.last_move[i];
            if (!spread && since < r.params.min_residency_ms)
                fail_msg("%s: t=%lu ms demand %.2f: %s moved (flag %d, %u packages, first %d) "
                         "%lu ms after its previous placement (min residency %u ms); active "
                         "%s, before %s",
                         name, r.now_ms, dem, pd->name, pd->moved, pd->npackages,
                         pd->npackages ? pd->packages[0] : -1, since, r.params.min_residency_ms,
                         active_str(p), active_str(prev));
            log_placement(&m, i, pd, r.now_ms);
        }
        if (p->nactive < *nactive_min)
            *nactive_min = p->nactive;
        if (p->nactive > *nactive_max)
            *nactive_max = p->nactive;
        vpack_plan_free(prev);
        prev = p;
    }
    vpack_plan_free(prev);
    *nmoves = m.nmoves;
    runner_fini(&r);
}

/* 2 packages active (8 cores): the spread threshold is 6.4. */
static double hover_spread(unsigned sec)
{
    return sec % 2 ? 6.5 : 6.3;
}

/* 3 packages active: 2 packages hold 4.8 at the pack watermark. */
static double hover_pack(unsigned sec)
{
    return sec % 2 ? 4.9 : 4.7;
}

/* Slow swings: 6 s packable, 4 s over the spread threshold of one package. */
static double swing(unsigned sec)
{
    return sec % 10 < 6 ? 1.5 : 7.0;
}

static void test_hover_no_repeated_moves(void **unused)
{
    (void)unused;
    unsigned nmoves, lo, hi;
    residency_run("hover at spread watermark", "package:4 core:4 pu:2", -1, 4.0, hover_spread,
                  200, &nmoves, &lo, &hi);
    /* Never two snapshots over in a row, never over all active cores: no spread. */
    if (lo != 2 || hi != 2)
        fail_msg("hover at spread watermark: active packages varied %u..%u, want 2 throughout",
                 lo, hi);
    residency_run("hover at pack watermark", "package:4 core:4 pu:2", -1, 6.0, hover_pack, 200,
                  &nmoves, &lo, &hi);
    /* The lower bound is never below 3 for pack_delay_ms: no packing. */
    if (lo != 3 || hi != 3)
        fail_msg("hover at pack watermark: active packages varied %u..%u, want 3 throughout", lo,
                 hi);
    /* Level 1 domains only, then levels 1 and 2 mixed. */
    residency_run("swing, level 1", "package:4 core:4 pu:2", 1, 1.5, swing, 200, &nmoves, &lo,
                  &hi);
    if (hi < 3)
        fail_msg("swing, level 1: never spread to 3 packages (max %u)", hi);
    residency_run("swing, levels 1 and 2", "package:4 core:4 pu:2", -1, 1.5, swing, 200, &nmoves,
                  &lo, &hi);
    if (hi < 3)
        fail_msg("swing, levels 1 and 2: never spread to 3 packages (max %u)", hi);
}

static void test_low_high_low_packs_again(void **unused)
{
    (void)unused;
    struct runner r;
    runner_init(&r, "package:4 core:4 pu:2");
    advance(&r, 1.5, 10);
    struct vpack_plan *p = model_step(&r, 1.5, 0.0);
    assert_int_equal(p->nactive, 1);
    vpack_plan_free(p);

    unsigned high_active = 0;
    for (unsigned sec = 1; sec <= 10; sec++) {
        p = model_step(&r, 7.0, 0.0);
        if (sec == 2 && p->nactive < 3)
            fail_msg("7.0 CPUs on 16 cores: only %u active at the 2nd snapshot", p->nactive);
        high_active = p->nactive;
        vpack_plan_free(p);
    }

    unsigned wait = r.params.pack_delay_ms / 1000;
    unsigned settle = (r.params.pack_delay_ms + r.params.min_residency_ms) / 1000 + 2;
    for (unsigned sec = 1; sec <= settle + 20; sec++) {
        p = model_step(&r, 1.5, 0.0);
        /* The lower bound has been under the active count for less than pack_delay_ms. */
        if (sec < wait && p->nactive < high_active)
            fail_msg("packed to %u packages %u s after load fell (pack delay %u ms)", p->nactive,
                     sec, r.params.pack_delay_ms);
        if (sec >= settle) {
            if (p->nactive != 1 || p->lifted)
                fail_msg("%u s after load fell (pack delay %u + residency %u ms): %u active "
                         "(%s)%s, want 1",
                         sec, r.params.pack_delay_ms, r.params.min_residency_ms, p->nactive,
                         active_str(p), p->lifted ? " lifted" : "");
            for (unsigned i = 0; i < p->ndomains; i++)
                for (unsigned k = 0; k < p->domains[i].npackages; k++)
                    if (p->domains[i].packages[k] != p->active_packages[0])
                        fail_msg("%s still on package %d after packing to %d", p->domains[i].name,
                                 p->domains[i].packages[k], p->active_packages[0]);
        }
        vpack_plan_free(p);
    }
    runner_fini(&r);

    /*
     * The same with load that vpack does not place (no domain, so no residency
     * holds a package), where the guests would be (the active packages):
     * packed once pack_delay_ms has passed, not before.
     */
    runner_init(&r, "package:4 core:4 pu:2");
    const struct {
        double busy;
        unsigned seconds;
    } phases[] = {{1.5, 10}, {7.0, 5}, {1.5, 10}};
    int act[8];
    unsigned nact = 0;
    for (unsigned ph = 0; ph < 3; ph++) {
        for (unsigned sec = 1; sec <= phases[ph].seconds; sec++) {
            struct vpack_snapshot *s = snap_new(r.topo, 0);
            busy_on_active(r.topo, s, phases[ph].busy, act, nact);
            p = plan_step(&r, s);
            nact = active_of(p, act, 8);
            check_demand(r.topo, s, p, "unplaced load");
            if (ph == 0 && sec == phases[0].seconds && p->nactive != 1)
                fail_msg("unplaced load 1.5: %u active, want 1", p->nactive);
            if (ph == 1)
                high_active = p->nactive;
            if (ph == 1 && sec == 1 && p->nactive < 3)
                fail_msg("unplaced load 7.0 over all active cores: %u active at once, want >= 3",
                         p->nactive);
            if (ph == 2 && sec < wait && p->nactive != high_active)
                fail_msg("unplaced load: %u active %u s after the load fell, want %u until "
                         "pack_delay_ms (%u)", p->nactive, sec, high_active,
                         r.params.pack_delay_ms);
            if (ph == 2 && sec >= wait + 1 && p->nactive != 1)
                fail_msg("unplaced load: %u active %u s after the load fell (pack delay %u ms), "
                         "want 1", p->nactive, sec, r.params.pack_delay_ms);
            vpack_plan_free(p);
            vpack_snapshot_free(s);
        }
    }
    runner_fini(&r);
}

/* plan->why names what changed the package count: set once per change, else hold. */
static void test_plan_why(void **unused)
{
    (void)unused;
    struct runner r;
    runner_init(&r, "package:4 core:4 pu:2");
    /* Load no domain owns (nothing is held by residency): low, high, low again. */
    const struct {
        double busy;
        unsigned seconds;
    } phases[] = {{1.5, 3}, {7.0, 3}, {1.5, 10}};
    unsigned nprev = 0, nfirst = 0, nspread = 0, npack = 0, nact = 0;
    int act[8];
    for (unsigned ph = 0; ph < 3; ph++) {
        for (unsigned sec = 1; sec <= phases[ph].seconds; sec++) {
            struct vpack_snapshot *s = snap_new(r.topo, 0);
            busy_on_active(r.topo, s, phases[ph].busy, act, nact);
            struct vpack_plan *p = plan_step(&r, s);
            nact = active_of(p, act, 8);
            enum vpack_plan_why want = VPACK_WHY_HOLD;
            if (ph == 0 && sec == 1)
                want = VPACK_WHY_FIRST;
            else if (p->nactive > nprev)
                want = VPACK_WHY_SPREAD;
            else if (p->nactive < nprev)
                want = VPACK_WHY_PACK;
            if (p->why != want)
                fail_msg("phase %u, %u s (load %.1f, %u -> %u active): why %s, want %s (%s)", ph,
                         sec, phases[ph].busy, nprev, p->nactive, vpack_plan_why_name(p->why),
                         vpack_plan_why_name(want), p->reason);
            nfirst += p->why == VPACK_WHY_FIRST;
            nspread += p->why == VPACK_WHY_SPREAD;
            npack += p->why == VPACK_WHY_PACK;
            nprev = p->nactive;
            vpack_plan_free(p);
            vpack_snapshot_free(s);
        }
    }
    /* One of each: 7.0 CPUs spread at once, the fall packs once pack_delay_ms has passed. */
    assert_int_equal(nfirst, 1);
    assert_int_equal(nspread, 1);
    assert_int_equal(npack, 1);
    assert_int_equal(nprev, 1);
    runner_fini(&r);

    /* A spread forced by run-queue delay alone is a spread too, on its second sample. */
    runner_init(&r, "package:4 core:4 pu:2");
    struct vpack_plan *p = model_step(&r, 1.5, 0.0);
    assert_int_equal(p->why, VPACK_WHY_FIRST);
    vpack_plan_free(p);
    p = model_step(&r, 1.5, 0.3);
    assert_int_equal(p->why, VPACK_WHY_HOLD);
    vpack_plan_free(p);
    p = model_step(&r, 1.5, 0.3);
    assert_int_equal(p->why, VPACK_WHY_SPREAD);
    assert_true(p->nactive >= 2);
    vpack_plan_free(p);
    runner_fini(&r);

    /* The metrics' label values. */
    assert_string_equal(vpack_plan_why_name(VPACK_WHY_FIRST), "first");
    assert_string_equal(vpack_plan_why_name(VPACK_WHY_PACK), "pack");
    assert_string_equal(vpack_plan_why_name(VPACK_WHY_SPREAD), "spread");
    assert_string_equal(vpack_plan_why_name(VPACK_WHY_HOLD), "other");
    assert_string_equal(vpack_plan_why_name(VPACK_WHY_N), "other");
}

/* ---- Rule 6: heavy load ---- */

static void heavy_cases(const char *desc, double demand);

static void test_heavy_load_lifts(void **unused)
{
    (void)unused;
    heavy_cases(NULL, 0.0);
}

/* One package and 1.5 CPUs on 2 cores (1.2 at the pack watermark): every package is needed. */
static void test_heavy_load_lifts_single_package(void **unused)
{
    (void)unused;
    heavy_cases("package:1 core:2 pu:1", 1.5);
}

static void heavy_cases(const char *desc, double demand)
{
    static const struct {
        const char *desc;
        double demand;
    } cases[] = {
        {"package:2 core:4 pu:2", 6.0},   /* needs 3 packages of 2.4 */
        {"package:4 core:4 pu:2", 12.0},  /* needs 5 */
        {"package:4 core:4 pu:2", 7.5},   /* needs exactly 4 (3 hold 7.2) */
    };
    unsigned ncases = desc ? 1 : sizeof(cases) / sizeof(cases[0]);
    for (unsigned c = 0; c < ncases; c++) {
        const char *cdesc = desc ? desc : cases[c].desc;
        double cdemand = desc ? demand : cases[c].demand;
        struct runner r;
        runner_init(&r, cdesc);
        for (int step = 0; step < 3; step++) {
            struct vpack_snapshot *s = snap_new(r.topo, 3);
            unsigned n = (unsigned)ceil(cdemand);
            dom_init(s, 0, "l1", 1, n, 1, cdemand / n / 2);
            struct vpack_domain_sample *b = dom_init(s, 1, "l2", 2, n, 1, cdemand / n / 2);
            bound(b, "1-3");
            struct vpack_domain_sample *e = dom_init(s, 2, "l2pinned", 2, 2, 1, 0.0);
            pin(&e->vcpus[0], "0");
            busy_everywhere(r.topo, s, cdemand);
            struct vpack_plan *p = plan_step(&r, s);
            char ctx[96];
            snprintf(ctx, sizeof(ctx), "'%s' demand %.1f step %d", cdesc, cdemand, step);
            if (!p->lifted || p->nactive != r.topo->npackages)
                fail_msg("%s: lifted=%d with %u of %u packages active", ctx, p->lifted, p->nactive,
                         r.topo->npackages);
            check_free_masks(r.topo, &r.params, s, p, ctx);
            check_pins(r.topo, &r.params, s, p, ctx);
            check_reasons(s, p, ctx);
            vpack_plan_free(p);
            vpack_snapshot_free(s);
        }
        runner_fini(&r);
    }
}

/*
 * Every package already awake (guest pins keep both busy) when the load turns
 * heavy: nothing is left to spread to, and the restrictions go.
 */
static void test_heavy_load_lifts_when_all_awake(void **unused)
{
    (void)unused;
    struct runner r;
    runner_init(&r, "package:2 core:4 pu:1");
    const double work[] = {0.1, 0.1, 0.1, 0.67, 0.67, 0.67, 0.67, 0.67, 0.67, 0.67};
    for (unsigned step = 0; step < sizeof(work) / sizeof(work[0]); step++) {
        struct vpack_snapshot *s = snap_new(r.topo, 4);
        struct vpack_domain_sample *pd = dom_init(s, 0, "pins", 0, 2, 0, 0.3);
        pin(&pd->vcpus[0], "0");
        pin(&pd->vcpus[1], "4");
        char name[8];
        for (unsigned i = 1; i < 4; i++) {
            snprintf(name, sizeof(name), "w%u", i);
            struct vpack_domain_sample *d = dom_init(s, i, name, 2, 4, 1, 0.2);
            d->vcpus[0].util = work[step];
            d->vcpus[1].util = work[step];
        }
        struct vpack_plan *p = plan_step(&r, s);
        char ctx[64];
        snprintf(ctx, sizeof(ctx), "pinned awake, step %u demand %.2f", step, p->demand);
        check_all(r.topo, &r.params, s, p, ctx);
        if (step == 0 && (p->nactive != 2 || p->lifted))
            fail_msg("%s: %u active, lifted %d; want both packages awake for the pins, not "
                     "lifted", ctx, p->nactive, p->lifted);
        /*
         * 0.6 + 3 * (1.34 + 0.4) = 5.82 CPUs: lower bound 3 packages of 2.4 > 2,
         * yet under 80% of the 8 active cores.
         */
        if (step >= 4 && !p->lifted)
            fail_msg("%s: every package needed (lower bound %u of %u) for %u snapshots, but "
                     "not lifted (active %s): %s", ctx, ceil_div(p->demand, 2.4),
                     r.topo->npackages, step - 2, active_str(p), p->reason);
        vpack_plan_free(p);
        vpack_snapshot_free(s);
    }
    runner_fini(&r);
}

/* ---- Rule 8: levels 1 and 2 ---- */

static void test_level1_confinement(void **unused)
{
    (void)unused;
    const char *bounds[] = {NULL, "0-3,8-11", "4-19"};
    for (unsigned bi = 0; bi < 3; bi++) {
        struct runner r;
        runner_init(&r, "package:4 core:4 pu:2");
        struct vpack_snapshot *s = snap_new(r.topo, 1);
        struct vpack_domain_sample *d = dom_init(s, 0, "l1", 1, 4, 2, 0.0);
        if (bounds[bi])
            bound(d, bounds[bi]);
        d->vcpus[0].util = 0.9;
        d->vcpus[1].util = 0.5; /* exactly busy_vcpu: long-running */
        d->vcpus[2].util = 0.1;
        d->vcpus[3].util = 0.0;
        d->emulator.util = 0.05;
        d->iothreads[0].util = 0.2;
        struct vpack_plan *p = plan_step(&r, s);
        char ctx[64];
        snprintf(ctx, sizeof(ctx), "level 1 bound %s", bounds[bi] ? bounds[bi] : "(none)");
        check_all(r.topo, &r.params, s, p, ctx);
        const struct vpack_plan_domain *pd = &p->domains[0];
        vpack_cpuset b = dom_bound(r.topo, d);
        if (pd->npackages != 1)
            fail_msg("%s: 1.75 CPUs placed on %u packages, want 1", ctx, pd->npackages);
        vpack_cpuset home = cpus_of_packages(r.topo, pd->npackages, pd->packages);
        vpack_cpuset_and(&home, &home, &b);
        /* The emulator and iothreads go with the long-running vCPUs (issue 13, B8). */
        const struct vpack_plan_thread *confined[] = {&pd->vcpus[0], &pd->vcpus[1], &pd->emulator,
                                                      &pd->iothreads[0], &pd->iothreads[1]};
        for (unsigned k = 0; k < 5; k++) {
            const struct vpack_plan_thread *pt = confined[k];
            if (!vpack_cpuset_subset(pt->cpus, &home) || vpack_cpuset_empty(pt->cpus))
                fail_msg("%s: thread %d (long-running or emulator) gets %s, want within %s", ctx,
                         pt->id, fmt(pt->cpus), fmt(&home));
            if (!vpack_cpuset_equal(&home, &b) && !pt->restricted)
                fail_msg("%s: thread %d not restricted (%s, bound %s)", ctx, pt->id, fmt(pt->cpus),
                         fmt(&b));
        }
        const struct vpack_plan_thread *freed[] = {&pd->vcpus[2], &pd->vcpus[3]};
        for (unsigned k = 0; k < 2; k++)
            if (!vpack_cpuset_equal(freed[k]->cpus, &b) || freed[k]->restricted)
                fail_msg("%s: light thread %d gets %s, want the bound %s", ctx, freed[k]->id,
                         fmt(freed[k]->cpus), fmt(&b));
        vpack_plan_free(p);
        vpack_snapshot_free(s);
        runner_fini(&r);
    }
}

static void test_level2_wakeup_confinement(void **unused)
{
    (void)unused;
    const char *bounds[] = {NULL, "0-3,8-11"};
    for (unsigned bi = 0; bi < 2; bi++) {
        struct runner r;
        runner_init(&r, "package:4 core:4 pu:2");
        struct vpack_snapshot *s = snap_new(r.topo, 3);
        struct vpack_domain_sample *d = dom_init(s, 0, "l2", 2, 4, 2, 0.0);
        if (bounds[bi])
            bound(d, bounds[bi]);
        d->vcpus[0].util = 0.9;
        d->vcpus[1].util = 0.7;
        d->vcpus[2].util = 0.1;
        d->vcpus[3].util = 0.0;
        d->emulator.util = 0.05;
        d->iothreads[0].util = 0.2;
        /* A level 2 domain with nothing long-running sits on the wake-up package. */
        struct vpack_domain_sample *q = dom_init(s, 1, "quiet", 2, 2, 1, 0.1);
        (void)q;
        /* Demand 1.95 + 0.2 + 2.4 = 4.55: two packages of 2.4 active. */
        dom_init(s, 2, "l0load", 0, 4, 0, 0.6);
        struct vpack_plan *p = plan_step(&r, s);
        char ctx[64];
        snprintf(ctx, sizeof(ctx), "level 2 bound %s", bounds[bi] ? bounds[bi] : "(none)");
        check_all(r.topo, &r.params, s, p, ctx);
        if (p->nactive != 2)
            fail_msg("%s: demand %.2f, %u active, want 2", ctx, p->demand, p->nactive);
        if (p->wakeup_package < 0 || !is_active(p, p->wakeup_package))
            fail_msg("%s: wake-up package %d is not an active package (%s)", ctx,
                     p->wakeup_package, active_str(p));
        const struct vpack_plan_domain *pd = &p->domains[0];
        vpack_cpuset b = dom_bound(r.topo, d);
        vpack_cpuset wake = pkg_cpus(r.topo, p->wakeup_package);
        vpack_cpuset_and(&wake, &wake, &b);
        vpack_cpuset home = cpus_of_packages(r.topo, pd->npackages, pd->packages);
        vpack_cpuset_and(&home, &home, &b);
        if (vpack_cpuset_empty(&home))
            fail_msg("%s: placed on packages with none of its bound", ctx);
        for (unsigned k = 0; k < 2; k++)
            if (!vpack_cpuset_subset(pd->vcpus[k].cpus, &home) ||
                vpack_cpuset_empty(pd->vcpus[k].cpus))
                fail_msg("%s: long-running vcpu %u gets %s, want within %s", ctx, k,
                         fmt(pd->vcpus[k].cpus), fmt(&home));
        /* Its light threads stay beside the long-running ones: there is room (issue 13, B8). */
        const struct vpack_plan_thread *light[] = {&pd->vcpus[2], &pd->vcpus[3], &pd->emulator,
                                                   &pd->iothreads[0], &pd->iothreads[1]};
        for (unsigned k = 0; k < 5; k++) {
            if (!vpack_cpuset_subset(light[k]->cpus, &home) || vpack_cpuset_empty(light[k]->cpus))
                fail_msg("%s: light thread %d gets %s, want beside the others in %s", ctx,
                         light[k]->id, fmt(light[k]->cpus), fmt(&home));
            if (!vpack_cpuset_equal(&home, &b) && !light[k]->restricted)
                fail_msg("%s: light thread %d not restricted", ctx, light[k]->id);
        }
        (void)wake;
        /* A domain with nothing long-running goes whole to one active package. */
        const struct vpack_plan_domain *pq = &p->domains[1];
        if (pq->npackages != 1 || !is_active(p, pq->packages[0]))
            fail_msg("%s: 'quiet' (no long-running vCPU) on %u packages (first %d), want one "
                     "active package", ctx, pq->npackages, pq->npackages ? pq->packages[0] : -1);
        vpack_cpuset wk = pkg_cpus(r.topo, pq->packages[0]);
        for (unsigned k = 0; k < pq->nvcpus; k++)
            if (!vpack_cpuset_subset(pq->vcpus[k].cpus, &wk))
                fail_msg("%s: quiet vcpu %u gets %s, want within %s", ctx, k,
                         fmt(pq->vcpus[k].cpus), fmt(&wk));
        vpack_plan_free(p);
        vpack_snapshot_free(s);
        runner_fini(&r);
    }
}

/* Wake-up package: ties to the lower id; kept while active and under the spread watermark. */
static void test_wakeup_tie_and_sticky(void **unused)
{
    (void)unused;
    struct runner r;
    runner_init(&r, "package:4 core:4 pu:1");
    /* Packages 2 and 3 equally busy (1.5 of 4 cores each), demand 3.0: both active. */
    struct vpack_snapshot *s = snap_new(r.topo, 1);
    dom_init(s, 0, "quiet", 2, 2, 1, 0.0);
    busy_package(r.topo, s, 2, 1.5);
    busy_package(r.topo, s, 3, 1.5);
    struct vpack_plan *p = plan_step(&r, s);
    check_all(r.topo, &r.params, s, p, "tie");
    if (p->nactive != 2 || !is_active(p, 2) || !is_active(p, 3))
        fail_msg("tie: active %s, want the busy packages 2,3", active_str(p));
    if (p->wakeup_package != 2)
        fail_msg("tie: wake-up package %d, want 2 (equal room: the lower id)", p->wakeup_package);
    vpack_plan_free(p);
    vpack_snapshot_free(s);

    /* Package 3 now has more room, but 2 is still under 80%: kept. */
    s = snap_new(r.topo, 1);
    dom_init(s, 0, "quiet", 2, 2, 1, 0.0);
    busy_package(r.topo, s, 2, 2.0);
    busy_package(r.topo, s, 3, 0.9);
    p = plan_step(&r, s);
    check_all(r.topo, &r.params, s, p, "sticky");
    if (p->wakeup_package != 2)
        fail_msg("sticky: wake-up package %d, want 2 kept (load 2.0 of 4 cores)",
                 p->wakeup_package);
    vpack_plan_free(p);
    vpack_snapshot_free(s);

    /* Package 2 over 80% of its cores: no longer semi-idle; 3 has the room. */
    s = snap_new(r.topo, 1);
    dom_init(s, 0, "quiet", 2, 2, 1, 0.0);
    busy_package(r.topo, s, 2, 3.4);
    busy_package(r.topo, s, 3, 0.5);
    p = plan_step(&r, s);
    check_all(r.topo, &r.params, s, p, "over");
    if (p->nactive >= 2 && p->wakeup_package != 3)
        fail_msg("package 2 at 85%%: wake-up package %d, want 3 (active %s)", p->wakeup_package,
                 active_str(p));
    vpack_plan_free(p);
    vpack_snapshot_free(s);
    runner_fini(&r);
}

/* ---- Rule 7: domains whole, first-fit decreasing ---- */

static void test_domains_whole_and_fewest_packages(void **unused)
{
    (void)unused;
    struct runner r;
    runner_init(&r, "package:4 core:4 pu:1");
    /* Room per package 3.2. Two domains of 2.7 fit one package each, not together. */
    struct vpack_snapshot *s = snap_new(r.topo, 3);
    dom_init(s, 0, "a", 1, 3, 0, 0.9);
    dom_init(s, 1, "b", 1, 3, 0, 0.9);
    dom_init(s, 2, "small", 1, 1, 0, 0.6);
    struct vpack_plan *p = plan_step(&r, s);
    check_all(r.topo, &r.params, s, p, "whole");
    for (unsigned i = 0; i < 3; i++) {
        const struct vpack_plan_domain *pd = &p->domains[i];
        if (pd->npackages != 1)
            fail_msg("whole: %s (fits one package) placed on %u packages", pd->name,
                     pd->npackages);
        vpack_cpuset home = pkg_cpus(r.topo, pd->packages[0]);
        for (unsigned k = 0; k < pd->nvcpus; k++)
            if (!vpack_cpuset_subset(pd->vcpus[k].cpus, &home))
                fail_msg("whole: %s vcpu %u gets %s, outside its package %d", pd->name, k,
                         fmt(pd->vcpus[k].cpus), pd->packages[0]);
    }
    if (p->domains[0].packages[0] == p->domains[1].packages[0])
        fail_msg("whole: a and b (2.7 each, room 3.2) share package %d",
                 p->domains[0].packages[0]);
    vpack_plan_free(p);
    vpack_snapshot_free(s);
    runner_fini(&r);

    /* A domain of 5.4 fits no package: across the fewest, 2. */
    runner_init(&r, "package:4 core:4 pu:1");
    s = snap_new(r.topo, 2);
    dom_init(s, 0, "big", 1, 6, 0, 0.9);
    dom_init(s, 1, "tiny", 1, 1, 0, 0.6);
    p = plan_step(&r, s);
    check_all(r.topo, &r.params, s, p, "big");
    const struct vpack_plan_domain *pd = &p->domains[0];
    if (pd->npackages != 2)
        fail_msg("big: 5.4 CPUs (room 3.2 per package) across %u packages, want 2",
                 pd->npackages);
    vpack_cpuset home = cpus_of_packages(r.topo, pd->npackages, pd->packages);
    for (unsigned k = 0; k < pd->nvcpus; k++)
        if (!vpack_cpuset_subset(pd->vcpus[k].cpus, &home))
            fail_msg("big: vcpu %u gets %s, outside its packages %s", k, fmt(pd->vcpus[k].cpus),
                     fmt(&home));
    if (p->domains[1].npackages != 1)
        fail_msg("big: tiny on %u packages", p->domains[1].npackages);
    vpack_plan_free(p);
    vpack_snapshot_free(s);
    runner_fini(&r);
}

/* ---- Rule 7: memory ---- */

static void test_memory_preference(void **unused)
{
    (void)unused;
    for (int node = 0; node < 4; node++) {
        struct runner r;
        runner_init(&r, "package:4 numa:1 core:4 pu:1");
        for (unsigned i = 0; i < r.topo->npackages; i++)
            if (r.topo->packages[i].nnuma != 1 || r.topo->packages[i].numa_nodes[0] != (int)i)
                fail_msg("package %u should hold NUMA node %u", i, i);
        struct vpack_snapshot *s = snap_new(r.topo, 1);
        struct vpack_domain_sample *d = dom_init(s, 0, "db", 1, 2, 0, 0.8);
        const int nodes[2] = {0, node};
        const double shares[2] = {0.1, 0.9};
        memory_on(d, node == 0 ? 1 : 2, node == 0 ? &nodes[1] : nodes,
                  node == 0 ? &shares[1] : shares);
        /* 3.0 busy on all packages alike: 2 active (0 and 1), equal room. */
        busy_everywhere(r.topo, s, 3.0);
        struct vpack_plan *p = plan_step(&r, s);
        char ctx[64];
        snprintf(ctx, sizeof(ctx), "memory on node %d", node);
        check_all(r.topo, &r.params, s, p, ctx);
        /* The memory decides which package stays awake (issue 13, B6). */
        if (p->nactive != 2 || p->active_packages[0] != node)
            fail_msg("%s: active %s, want %d first", ctx, active_str(p), node);
        const struct vpack_plan_domain *pd = &p->domains[0];
        int want = node;
        if (pd->npackages != 1 || pd->packages[0] != want)
            fail_msg("%s: placed on %u packages (first %d), want package %d", ctx, pd->npackages,
                     pd->npackages ? pd->packages[0] : -1, want);
        vpack_plan_free(p);
        vpack_snapshot_free(s);
        runner_fini(&r);
    }
}

/*
 * pc6_scope system (issue 26, item 6): two light level 2 domains whose
 * memory lies on different packages. Per package, the planner packs both
 * onto one package, the other domain's memory a socket away. System-wide,
 * a parked socket saves no deep state while the other works, so each stays
 * on its memory home; an idle one there wakes nothing, and a lifted plan
 * still hands back the whole cpuset.
 */
static void test_memory_home_system(void **unused)
{
    (void)unused;
    for (int system = 0; system <= 1; system++) {
        struct runner r;
        runner_init(&r, "package:2 numa:1 core:4 pu:1");
        r.params.pc6_system = system;
        struct vpack_snapshot *s = snap_new(r.topo, 3);
        const int nodes[2] = {0, 1};
        const double all = 1.0;
        memory_on(dom_init(s, 0, "a", 2, 2, 0, 0.15), 1, &nodes[0], &all);
        memory_on(dom_init(s, 1, "b", 2, 2, 0, 0.15), 1, &nodes[1], &all);
        memory_on(dom_init(s, 2, "idle", 2, 1, 0, 0.005), 1, &nodes[1], &all);
        busy_everywhere(r.topo, s, 0.7);
        struct vpack_plan *p = plan_step(&r, s);
        char ctx[64];
        snprintf(ctx, sizeof(ctx), "pc6_scope %s", system ? "system" : "package");
        check_all(r.topo, &r.params, s, p, ctx);
        const struct vpack_plan_domain *pa = &p->domains[0], *pb = &p->domains[1];
        if (pa->npackages != 1 || pb->npackages != 1)
            fail_msg("%s: a on %u packages, b on %u, want 1 each", ctx, pa->npackages,
                     pb->npackages);
        if (!system) {
            /* Packed: one package, b's memory elsewhere for one of them. */
            if (p->nactive != 1 || pa->packages[0] != pb->packages[0])
                fail_msg("%s: active %s, a on %d, b on %d: want both on one package", ctx,
                         active_str(p), pa->packages[0], pb->packages[0]);
        } else {
            if (p->nactive != 2 || pa->packages[0] != 0 || pb->packages[0] != 1)
                fail_msg("%s: active %s, a on %d, b on %d: want each on its memory's package",
                         ctx, active_str(p), pa->packages[0], pb->packages[0]);
            if (!strstr(pb->reason, "memory"))
                fail_msg("%s: b's reason '%s' does not name its memory", ctx, pb->reason);
        }
        vpack_plan_free(p);

        /* Heavy load: every package active, restrictions lifted, the whole cpuset back. */
        busy_everywhere(r.topo, s, 7.5);
        for (unsigned v = 0; v < s->domains[0].nvcpus; v++)
            s->domains[0].vcpus[v].util = s->domains[1].vcpus[v].util = 0.9;
        for (int k = 0; k < 3; k++) {
            p = plan_step(&r, s);
            check_all(r.topo, &r.params, s, p, ctx);
            if (k < 2)
                vpack_plan_free(p);
        }
        if (!p->lifted)
            fail_msg("%s: 7.5 CPUs on 8 cores not lifted (%s)", ctx, p->reason);
        for (unsigned i = 0; i < 3; i++)
            for (unsigned v = 0; v < p->domains[i].nvcpus; v++)
                if (!vpack_cpuset_equal(p->domains[i].vcpus[v].cpus, &r.topo->cpus))
                    fail_msg("%s: lifted, %s vCPU %u not on every CPU", ctx,
                             p->domains[i].name, v);
        vpack_plan_free(p);
        vpack_snapshot_free(s);
        runner_fini(&r);
    }
}

/* ---- Rule 10: reasons ---- */

static void test_reasons(void **unused)
{
    (void)unused;
    const double loads[] = {0.5, 5.0, 30.0};
    for (unsigned li = 0; li < 3; li++) {
        struct runner r;
        runner_init(&r, "package:4 core:4 pu:2");
        struct vpack_snapshot *s = snap_new(r.topo, 6);
        dom_init(s, 0, "l0", 0, 2, 1, 0.5);
        dom_init(s, 1, "l1", 1, 2, 1, 0.9);
        dom_init(s, 2, "l2", 2, 2, 1, 0.1);
        dom_init(s, 3, "nopolicy", -1, 2, 0, 0.2);
        struct vpack_domain_sample *e = dom_init(s, 4, "allpinned", 2, 1, 0, 0.9);
        pin(&e->vcpus[0], "5");
        pin(&e->emulator, "5");
        struct vpack_domain_sample *f = dom_init(s, 5, "nowhere", 2, 1, 0, 0.9);
        bound(f, "200-300");
        busy_everywhere(r.topo, s, loads[li]);
        struct vpack_plan *p = plan_step(&r, s);
        char ctx[32];
        snprintf(ctx, sizeof(ctx), "load %.1f", loads[li]);
        check_reasons(s, p, ctx);
        vpack_plan_free(p);
        vpack_snapshot_free(s);
        runner_fini(&r);
    }
}

/* ---- Bad input ---- */

static void test_bad_input_empty_bound(void **unused)
{
    (void)unused;
    struct runner r;
    runner_init(&r, "package:4 core:4 pu:2");
    struct vpack_snapshot *s = snap_new(r.topo, 2);
    struct vpack_domain_sample *d = dom_init(s, 0, "nowhere", 2, 3, 1, 0.9);
    bound(d, "64-127");
    pin(&d->vcpus[2], "3");
    dom_init(s, 1, "normal", 2, 2, 0, 0.9);
    struct vpack_plan *p = plan_step(&r, s);
    check_all(r.topo, &r.params, s, p, "empty bound");
    const struct vpack_plan_domain *pd = &p->domains[0];
    for (unsigned k = 0; k < pd->nvcpus; k++)
        assert_false(pd->vcpus[k].restricted);
    assert_false(pd->emulator.restricted);
    assert_false(pd->iothreads[0].restricted);
    if (!pd->reason || !pd->reason[0])
        fail_msg("a domain with no usable CPU must say why it is not managed");
    /* The other domain is managed as usual. */
    if (!p->domains[1].vcpus[0].restricted)
        fail_msg("'normal' next to a bad domain was not managed (%s)",
                 fmt(p->domains[1].vcpus[0].cpus));
    vpack_plan_free(p);
    vpack_snapshot_free(s);
    runner_fini(&r);
}

static void test_empty_snapshot(void **unused)
{
    (void)unused;
    struct runner r;
    runner_init(&r, "package:2 core:4 pu:2");
    for (int k = 0; k < 3; k++) {
        struct vpack_snapshot *s = k == 0 ? vpack_snapshot_new(0, 0) : snap_new(r.topo, 0);
        assert_non_null(s);
        s->interval_ms = 1000;
        if (k == 2)
            busy_everywhere(r.topo, s, 1.0);
        struct vpack_plan *p = plan_step(&r, s);
        assert_int_equal(p->ndomains, 0);
        assert_true(p->nactive <= r.topo->npackages);
        if (!p->reason || !p->reason[0])
            fail_msg("empty snapshot %d: plan has no reason", k);
        check_demand(r.topo, s, p, "empty");
        vpack_plan_free(p);
        vpack_snapshot_free(s);
    }
    runner_fini(&r);
}

static void test_domains_disappear(void **unused)
{
    (void)unused;
    static const char *const series[] = {"abc", "b", "", "acd", "dca", "d", "abcd"};
    struct runner r;
    runner_init(&r, "package:4 core:4 pu:2");
    r.params.min_residency_ms = 3000;
    r.params.pack_delay_ms = 2000;
    for (unsigned k = 0; k < sizeof(series) / sizeof(series[0]); k++) {
        for (int rep = 0; rep < 3; rep++) {
            unsigned n = (unsigned)strlen(series[k]);
            struct vpack_snapshot *s = snap_new(r.topo, n);
            for (unsigned i = 0; i < n; i++) {
                char name[8] = {'v', 'm', series[k][i], 0};
                /* Same name, different shape each time it comes back. */
                struct vpack_domain_sample *d =
                    dom_init(s, i, name, (int)(i % 3), 1 + (k + i) % 4, k % 2, 0.5 + 0.2 * rep);
                if (series[k][i] == 'c')
                    pin(&d->vcpus[0], "12");
            }
            struct vpack_plan *p = plan_step(&r, s);
            char ctx[32];
            snprintf(ctx, sizeof(ctx), "series '%s' rep %d", series[k], rep);
            check_all(r.topo, &r.params, s, p, ctx);
            vpack_plan_free(p);
            vpack_snapshot_free(s);
        }
    }
    runner_fini(&r);
}

static bool plans_equal(const struct vpack_plan *a, const struct vpack_plan *b)
{
    if (a->nactive != b->nactive || a->wakeup_package != b->wakeup_package ||
        a->lifted != b->lifted || a->ndomains != b->ndomains || strcmp(a->reason, b->reason))
        return false;
    for (unsigned i = 0; i < a->nactive; i++)
        if (a->active_packages[i] != b->active_packages[i])
            return false;
    for (unsigned i = 0; i < a->ndomains; i++) {
        const struct vpack_plan_domain *x = &a->domains[i], *y = &b->domains[i];
        if (x->npackages != y->npackages || x->moved != y->moved || strcmp(x->reason, y->reason))
            return false;
        for (unsigned k = 0; k < x->npackages; k++)
            if (x->packages[k] != y->packages[k])
                return false;
        for (unsigned k = 0; k < x->nvcpus; k++)
            if (!vpack_cpuset_equal(x->vcpus[k].cpus, y->vcpus[k].cpus))
                return false;
        if (!vpack_cpuset_equal(x->emulator.cpus, y->emulator.cpus))
            return false;
    }
    return true;
}

/* A failed call returns a negative errno and leaves the state as it was. */
/*
 * Settled: nothing counts down, so the same input gives the same plan. The
 * state settles only once the last move is min_residency_ms old, and a
 * spike or a drop starts a count again.
 */
static void test_settled(void **unused)
{
    (void)unused;
    struct runner r;
    runner_init(&r, "package:4 core:4 pu:2");
    assert_false(vpack_policy_state_settled(r.state, &r.params)); /* no plan yet */
    struct vpack_plan *p = model_step(&r, 1.5, 0.0);
    vpack_plan_free(p);
    /* Domains were just placed: young until min_residency_ms. */
    assert_false(vpack_policy_state_settled(r.state, &r.params));
    vpack_policy_state_advance(r.state, r.params.min_residency_ms - 1);
    assert_false(vpack_policy_state_settled(r.state, &r.params));
    vpack_policy_state_advance(r.state, 1);
    assert_true(vpack_policy_state_settled(r.state, &r.params));
    /* The same input planned again: still settled, and the same packages. */
    p = model_step(&r, 1.5, 0.0);
    assert_int_equal(p->nactive, 1);
    assert_int_equal(p->why, VPACK_WHY_HOLD);
    vpack_plan_free(p);
    assert_true(vpack_policy_state_settled(r.state, &r.params));
    /* A spike over the spread watermark: one sample counted, not settled. */
    p = model_step(&r, 3.5, 0.0);
    assert_int_equal(p->nactive, 1);
    vpack_plan_free(p);
    assert_false(vpack_policy_state_settled(r.state, &r.params));
    p = model_step(&r, 3.5, 0.0);
    assert_true(p->nactive >= 2);
    bool moved = false;
    for (unsigned i = 0; i < p->ndomains; i++)
        moved |= p->domains[i].moved;
    vpack_plan_free(p);
    /* Spread: settled again unless a domain moved (then it is young). */
    assert_true(vpack_policy_state_settled(r.state, &r.params) == !moved);
    /* Load gone: a pack is waiting for pack_delay_ms. */
    vpack_policy_state_advance(r.state, r.params.min_residency_ms);
    p = model_step(&r, 0.5, 0.0);
    vpack_plan_free(p);
    assert_false(vpack_policy_state_settled(r.state, &r.params));
    runner_fini(&r);
}

/* Two runners on the same host that have planned the same ten snapshots (load 1.5). */
static void twin_runners(struct runner *a, struct runner *b)
{
    runner_init(a, "package:4 core:4 pu:2");
    runner_init(b, "package:4 core:4 pu:2");
    for (int i = 0; i < 10; i++) {
        vpack_plan_free(model_step(a, 1.5, 0.0));
        vpack_plan_free(model_step(b, 1.5, 0.0));
    }
}

/* a and b plan a series of model loads alike, after what (for the message). */
static void plan_alike(struct runner *a, struct runner *b, const double *demands, unsigned n,
                       const char *what)
{
    for (unsigned i = 0; i < n; i++) {
        struct vpack_plan *pa = model_step(a, demands[i], 0.0);
        struct vpack_plan *pb = model_step(b, demands[i], 0.0);
        if (!plans_equal(pa, pb))
            fail_msg("snapshot %u after %s: plans differ (active %s vs %s)", i, what,
                     active_str(pa), active_str(pb));
        vpack_plan_free(pa);
        vpack_plan_free(pb);
    }
}

static void test_failure_leaves_state(void **unused)
{
    (void)unused;
    struct runner a, b;
    twin_runners(&a, &b);
    /* A spike of 3.5 needs two snapshots in a row to spread; fail between them. */
    struct vpack_snapshot *spike = model_snap(a.topo, 3.5, 0.0, -1);
    static struct vpack_plan sentinel; /* must come back untouched */
    struct vpack_plan *out = &sentinel;
    int rc;
    rc = vpack_plan_compute(NULL, &a.params, spike, a.state, &out);
    if (rc >= 0)
        fail_msg("NULL topology: returned %d", rc);
    rc = vpack_plan_compute(a.topo, NULL, spike, a.state, &out);
    if (rc >= 0)
        fail_msg("NULL params: returned %d", rc);
    rc = vpack_plan_compute(a.topo, &a.params, NULL, a.state, &out);
    if (rc >= 0)
        fail_msg("NULL snapshot: returned %d", rc);
    rc = vpack_plan_compute(a.topo, &a.params, spike, a.state, NULL);
    if (rc >= 0)
        fail_msg("NULL out: returned %d", rc);
    assert_ptr_equal(out, &sentinel);
    assert_int_equal(vpack_plan_compute(NULL, &a.params, spike, a.state, &out), -EINVAL);
    vpack_snapshot_free(spike);

    /* From here on a and b must plan identically. */
    const double demands[] = {3.5, 3.5, 3.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5};
    plan_alike(&a, &b, demands, sizeof(demands) / sizeof(demands[0]), "the failed calls");
    runner_fini(&a);
    runner_fini(&b);
    vpack_plan_free(NULL);
    vpack_policy_state_free(NULL);
}

/*
 * A dry run plans on a copy of the state: the copy plans as the state would,
 * and the state itself does not move. A fresh state would not: it has no
 * history (the agent's dry runs used one, and reported a "first plan").
 */
/*
 * SMT: busy time as work (lib/policy/smt.c). CPUs 0 and 1 are siblings
 * (hwloc's synthetic spec numbers a core's PUs together): busy 0.8 each,
 * each did 0.8 * (1 - 0.8 * (1 - 0.25) / 2) = 0.56 of a lone CPU's work;
 * CPU 3, its sibling idle, did all of its 0.5. A thread last on CPU 0 runs
 * at the package's ratio, (0.56 + 0.56 + 0.5) / (0.8 + 0.8 + 0.5); one of
 * unknown CPU and no previous plan at the host's (the same here).
 */
static void test_smt_measure_work(void **unused)
{
    (void)unused;
    struct vpack_topology *t = topo_load("package:1 core:2 pu:2");
    struct vpack_policy_params par;
    struct vpack_snapshot *s = snap_new(t, 1);
    const double ratio = (0.56 + 0.56 + 0.5) / 2.1;

    vpack_policy_params_default(&par);
    assert_true(par.smt_gain == 0.25);
    assert_int_equal(vpack_topology_core_of(t, 0), vpack_topology_core_of(t, 1));
    assert_int_equal(vpack_topology_core_of(t, 2), vpack_topology_core_of(t, 3));
    assert_int_not_equal(vpack_topology_core_of(t, 0), vpack_topology_core_of(t, 2));
    s->cpu_busy[0] = s->cpu_busy[1] = 0.8;
    s->cpu_busy[3] = 0.5;
    struct vpack_domain_sample *d = dom_init(s, 0, "a", 2, 2, 0, 0.8);
    d->vcpus[0].cpu = 0;
    d->vcpus[1].cpu = -1;
    d->emulator.util = 0;
    assert_int_equal(vpack_policy_measure_work(t, &par, NULL, s), 0);
    assert_true(fabs(s->cpu_busy[0] - 0.56) < 1e-9 && fabs(s->cpu_busy[1] - 0.56) < 1e-9);
    assert_true(s->cpu_busy[2] == 0 && fabs(s->cpu_busy[3] - 0.5) < 1e-9);
    assert_true(fabs(d->vcpus[0].util - 0.8 * ratio) < 1e-9);
    assert_true(fabs(d->vcpus[1].util - 0.8 * ratio) < 1e-9);
    /* The plan's demand is the work. */
    struct vpack_policy_state *st = vpack_policy_state_new();
    struct vpack_snapshot *s2 = snap_new(t, 0);
    struct vpack_plan *p = NULL;
    s2->cpu_busy[0] = s2->cpu_busy[1] = 0.8;
    s2->cpu_busy[3] = 0.5;
    assert_int_equal(vpack_plan_compute(t, &par, s2, st, &p), 0);
    assert_true(fabs(p->demand - 1.62) < 1e-9);
    assert_true(s2->cpu_busy[0] == 0.8); /* the caller's snapshot is not changed */
    vpack_plan_free(p);
    /* smt_gain 1: busy time as it is. */
    par.smt_gain = 1;
    assert_int_equal(vpack_plan_compute(t, &par, s2, st, &p), 0);
    assert_true(fabs(p->demand - 2.1) < 1e-9);
    vpack_plan_free(p);
    vpack_policy_state_free(st);
    vpack_snapshot_free(s2);
    vpack_snapshot_free(s);
    vpack_topology_free(t);
}

/* Without SMT nothing changes, whatever smt_gain says. */
static void test_smt_none_unchanged(void **unused)
{
    (void)unused;
    struct vpack_topology *t = topo_load("package:2 core:2 pu:1");
    struct vpack_policy_params par;
    struct vpack_snapshot *s = snap_new(t, 1);

    vpack_policy_params_default(&par);
    s->cpu_busy[0] = s->cpu_busy[1] = 0.9;
    struct vpack_domain_sample *d = dom_init(s, 0, "a", 2, 2, 0, 0.9);
    d->vcpus[0].cpu = 0;
    assert_int_equal(vpack_policy_measure_work(t, &par, NULL, s), 0);
    assert_true(s->cpu_busy[0] == 0.9 && s->cpu_busy[1] == 0.9 && d->vcpus[0].util == 0.9);
    assert_int_equal(vpack_policy_measure_work(NULL, &par, NULL, s), -EINVAL);
    vpack_snapshot_free(s);
    vpack_topology_free(t);
}

static void test_state_dup(void **unused)
{
    (void)unused;
    struct runner a, b;
    twin_runners(&a, &b);
    /* One snapshot of a spike: the copy and b plan it alike; a fresh state does not. */
    struct vpack_policy_state *copy = vpack_policy_state_dup(a.state), *fresh = vpack_policy_state_new();
    assert_non_null(copy);
    struct vpack_snapshot *spike = model_snap(a.topo, 3.5, 0.0, -1);
    struct vpack_plan *pc = NULL, *pf = NULL;
    assert_int_equal(vpack_plan_compute(a.topo, &a.params, spike, copy, &pc), 0);
    assert_int_equal(vpack_plan_compute(a.topo, &a.params, spike, fresh, &pf), 0);
    vpack_snapshot_free(spike);
    struct vpack_plan *pb = model_step(&b, 3.5, 0.0);
    if (!plans_equal(pc, pb))
        fail_msg("the copy plans otherwise than the state (active %s vs %s)", active_str(pc),
                 active_str(pb));
    if (!strstr(pf->reason, "first plan") || strstr(pc->reason, "first plan"))
        fail_msg("reasons: copy '%s', fresh '%s'", pc->reason, pf->reason);
    vpack_plan_free(pc);
    vpack_plan_free(pf);
    vpack_plan_free(pb);
    vpack_policy_state_free(fresh);
    /* More on the copy (a spread: the second spike) leaves a where it was. */
    for (int i = 0; i < 3; i++) {
        spike = model_snap(a.topo, 3.5, 0.0, -1);
        assert_int_equal(vpack_plan_compute(a.topo, &a.params, spike, copy, &pc), 0);
        vpack_plan_free(pc);
        vpack_snapshot_free(spike);
    }
    vpack_policy_state_free(copy);
    /* a missed b's spike: give it the same, then both must plan identically. */
    vpack_plan_free(model_step(&a, 3.5, 0.0));
    const double demands[] = {3.5, 3.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5};
    plan_alike(&a, &b, demands, sizeof(demands) / sizeof(demands[0]), "planning on the copy");
    runner_fini(&a);
    runner_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_guest_pins_kept),
        cmocka_unit_test(test_masks_within_bound_property),
        cmocka_unit_test(test_level0_never_restricted),
        cmocka_unit_test(test_package_count_lower_bound),
        cmocka_unit_test(test_pinned_busy_keeps_package_awake),
        cmocka_unit_test(test_idle_bound_does_not_wake_package),
        cmocka_unit_test(test_pinned_busy_hysteresis),
        cmocka_unit_test(test_capacity_counts_cores_not_threads),
        cmocka_unit_test(test_package_preference),
        cmocka_unit_test(test_spike_spreads_within_two_snapshots),
        cmocka_unit_test(test_saturating_step_spreads_at_once),
        cmocka_unit_test(test_one_interval_burst_does_not_spread),
        cmocka_unit_test(test_hover_no_repeated_moves),
        cmocka_unit_test(test_low_high_low_packs_again),
        cmocka_unit_test(test_plan_why),
        cmocka_unit_test(test_heavy_load_lifts),
        cmocka_unit_test(test_heavy_load_lifts_single_package),
        cmocka_unit_test(test_heavy_load_lifts_when_all_awake),
        cmocka_unit_test(test_level1_confinement),
        cmocka_unit_test(test_level2_wakeup_confinement),
        cmocka_unit_test(test_wakeup_tie_and_sticky),
        cmocka_unit_test(test_domains_whole_and_fewest_packages),
        cmocka_unit_test(test_memory_preference),
        cmocka_unit_test(test_memory_home_system),
        cmocka_unit_test(test_reasons),
        cmocka_unit_test(test_bad_input_empty_bound),
        cmocka_unit_test(test_empty_snapshot),
        cmocka_unit_test(test_domains_disappear),
        cmocka_unit_test(test_settled),
        cmocka_unit_test(test_failure_leaves_state),
        cmocka_unit_test(test_state_dup),
        cmocka_unit_test(test_smt_measure_work),
        cmocka_unit_test(test_smt_none_unchanged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
