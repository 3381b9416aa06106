// SPDX-License-Identifier: MIT
/*
 * The host model (lib/sim/model.c) and the oracle (lib/sim/oracle.c) on cases small
 * enough to compute by hand. Topologies are hwloc synthetic descriptions,
 * intervals trace lines (vpack/trace.h); nothing reads the live host.
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

#include "vpack/model.h"
#include "vpack/oracle.h"
#include "vpack/policy.h"
#include "vpack/snapshot.h"
#include "vpack/topology.h"
#include "vpack/trace.h"

#define EPS 1e-6

static struct vpack_topology *topo(const char *desc)
{
    struct vpack_topology *t = NULL;
    char spec[256], *err = NULL;

    snprintf(spec, sizeof(spec), "synthetic:%s", desc);
    if (vpack_topology_load(spec, NULL, NULL, &t, &err) < 0)
        fail_msg("%s: %s", spec, err ? err : "?");
    return t;
}

static struct vpack_snapshot *line(const char *text)
{
    struct vpack_snapshot *s = NULL;
    char *err = NULL;

    if (vpack_trace_parse_line(text, strlen(text), 1, &s, &err) < 0)
        fail_msg("trace line '%s': %s", text, err ? err : "?");
    return s;
}

/* Round numbers, so that the energy is easy to check. */
static const struct vpack_power_params power = {
    .awake_w = 20, .core_w = 5, .deep_w = 2, .smt_gain = 0.25};

static struct vpack_model *model(const struct vpack_topology *t, int level)
{
    struct vpack_policy_params pp;
    struct vpack_model *m = NULL;
    char *err = NULL;

    vpack_policy_params_default(&pp);
    if (vpack_model_new(t, &pp, &power, level, &m, &err) < 0)
        fail_msg("vpack_model_new: %s", err ? err : "?");
    return m;
}

static void step(struct vpack_model *m, const char *text, struct vpack_model_interval *iv)
{
    struct vpack_snapshot *s = line(text);
    char *err = NULL;

    if (vpack_model_step(m, s, iv, &err) < 0)
        fail_msg("vpack_model_step: %s", err ? err : "?");
    vpack_snapshot_free(s);
}

/* One vCPU busy all the time on a one-CPU host: served, no wait, package busy. */
static void test_one_busy_vcpu(void **state)
{
    struct vpack_topology *t = topo("\"package:1 core:1 pu:1\"");
    struct vpack_model *m = model(t, 0);
    struct vpack_model_interval iv;
    struct vpack_model_totals tot;

    (void)state;
    step(m, "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\",\"level\":0,"
            "\"vcpus\":[{\"id\":0,\"util\":1.0}]}]}", &iv);
    assert_float_equal(iv.demand, 1.0, EPS);
    assert_float_equal(iv.served, 1.0, EPS);
    assert_float_equal(iv.max_delay, 0.0, EPS);
    assert_float_equal(iv.pkg_busy[0], 1.0, EPS);
    assert_float_equal(iv.pkg_idle[0], 0.0, EPS);
    /* awake 20 W + one busy core 5 W, for one second. */
    assert_float_equal(iv.energy_j, 25.0, EPS);
    assert_int_equal(iv.ndomains, 1);
    assert_float_equal(iv.dom_served[0], 1.0, EPS);
    vpack_model_totals(m, &tot);
    assert_int_equal(tot.intervals, 1);
    assert_float_equal(tot.served, 1.0, EPS);
    assert_string_equal(vpack_model_domain_get(m, 0)->name, "a");
    assert_null(vpack_model_domain_get(m, 1));
    vpack_model_free(m);
    vpack_topology_free(t);
}

/*
 * Foreign load: occupies its CPU beside the guests, served in proportion,
 * charged to busy, idle and energy, never to demand or served work.
 */
static void test_foreign_load(void **state)
{
    struct vpack_topology *t = topo("\"package:1 core:1 pu:1\"");
    struct vpack_model *m = model(t, 0);
    struct vpack_model_interval iv;
    struct vpack_model_totals tot;
    const char *half = "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\","
                       "\"level\":0,\"vcpus\":[{\"id\":0,\"util\":0.5}]}]}";

    (void)state;
    assert_int_equal(vpack_model_add_foreign(m, 1, 0.1), -EINVAL);
    assert_int_equal(vpack_model_add_foreign(m, -2, 0.1), -EINVAL);
    assert_int_equal(vpack_model_add_foreign(m, 0, -0.1), -EINVAL);
    assert_int_equal(vpack_model_add_foreign(m, 0, NAN), -EINVAL);
    assert_int_equal(vpack_model_add_foreign(m, -1, 0.25), 0);
    step(m, half, &iv);
    assert_float_equal(iv.demand, 0.5, EPS);
    assert_float_equal(iv.served, 0.5, EPS);
    assert_float_equal(iv.foreign, 0.25, EPS);
    assert_float_equal(iv.pkg_busy[0], 0.75, EPS);
    assert_float_equal(iv.pkg_idle[0], 0.25, EPS);
    /* deep 2 W x 0.25 + awake 20 W x 0.75 + core 5 W x 0.75 */
    assert_float_equal(iv.energy_j, 0.5 + 15 + 3.75, EPS);
    /* Observed as the agent would: the first interval's 0.5, then a rise to 0.75 at 0.8. */
    assert_float_equal(vpack_model_observed(m)->cpu_busy[0], 0.5 + 0.8 * 0.25, EPS);
    /* The next interval only: gone, and the busy share falls at 0.3. */
    step(m, half, &iv);
    assert_float_equal(iv.foreign, 0.0, EPS);
    assert_float_equal(iv.pkg_busy[0], 0.5, EPS);
    assert_float_equal(vpack_model_observed(m)->cpu_busy[0], 0.7 - 0.3 * 0.2, EPS);
    /* Over the CPU: both served in proportion, the vCPU waits for the rest. */
    assert_int_equal(vpack_model_add_foreign(m, 0, 1.5), 0);
    step(m, half, &iv);
    assert_float_equal(iv.served, 0.25, EPS);
    assert_float_equal(iv.max_delay, 0.75, EPS);
    vpack_model_totals(m, &tot);
    assert_float_equal(tot.foreign_s, 1.75, EPS);
    assert_float_equal(tot.demand, 1.5, EPS);
    vpack_model_free(m);
    vpack_topology_free(t);
}

/* Each pin operation costs pin_cpu_ms, spread over every usable CPU: the parked one too. */
static void test_pin_charge(void **state)
{
    struct vpack_topology *t = topo("\"package:2 core:1 pu:1\"");
    struct vpack_model *m = model(t, 2);
    struct vpack_model_host h;
    struct vpack_model_interval iv;
    struct vpack_model_totals tot;
    char *err = NULL;
    const char *light = "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\","
                        "\"level\":2,\"vcpus\":[{\"id\":0,\"util\":0.1},{\"id\":1,\"util\":0.1}]}]}";

    (void)state;
    vpack_model_host_default(&h);
    assert_float_equal(h.pin_cpu_ms, VPACK_MODEL_PIN_CPU_MS, EPS);
    h.smoothing_fall = 0;
    assert_int_equal(vpack_model_set_host(m, &h, &err), -EINVAL);
    assert_non_null(err);
    free(err);
    h.smoothing_fall = 0.3;
    h.pin_cpu_ms = 100;
    assert_int_equal(vpack_model_set_host(m, &h, &err), 0);
    step(m, light, &iv);
    /* The first plan packs the domain onto one package: every thread is pinned once. */
    assert_int_equal(iv.nactive, 1);
    assert_int_equal(iv.pin_ops, 3);
    assert_float_equal(iv.pin_cpu, 0.3, EPS);
    assert_float_equal(iv.foreign, 0.0, EPS);
    assert_float_equal(iv.demand, 0.2, EPS);
    assert_float_equal(iv.served, 0.2, EPS);
    /* The parked package's one CPU carries half the charge. */
    assert_float_equal(iv.pkg_busy[0] + iv.pkg_busy[1], 0.5, EPS);
    assert_true(fabs(iv.pkg_busy[0] - 0.15) < EPS || fabs(iv.pkg_busy[1] - 0.15) < EPS);
    step(m, light, &iv);
    assert_int_equal(iv.pin_ops, 0);
    assert_float_equal(iv.pin_cpu, 0.0, EPS);
    vpack_model_totals(m, &tot);
    assert_float_equal(tot.pin_cpu_s, 0.3, EPS);
    vpack_model_free(m);
    vpack_topology_free(t);
}

/* The policy sees smoothed util, delay and busy, and the last interval alone beside them. */
static void test_observed_smoothed(void **state)
{
    struct vpack_topology *t = topo("\"package:1 core:1 pu:1\"");
    struct vpack_model *m = model(t, 0);
    const struct vpack_domain_sample *d;

    (void)state;
    step(m, "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\",\"level\":0,"
            "\"vcpus\":[{\"id\":0,\"util\":1.0}]}]}", NULL);
    for (int k = 0; k < 2; k++)
        step(m, "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\",\"level\":0,"
                "\"vcpus\":[{\"id\":0,\"util\":0}]}]}", NULL);
    /* The third interval's policy saw the second's: ran 0, smoothed 1 -> 0.7. */
    d = &vpack_model_observed(m)->domains[0];
    assert_float_equal(d->vcpus[0].util_now, 0.0, EPS);
    assert_float_equal(d->vcpus[0].util, 0.7, EPS);
    /* The next one will see 0.49 busy: 1, then two falls at 0.3; and the interval alone, 0. */
    assert_float_equal(vpack_model_observed(m)->cpu_busy[0], 0.49, EPS);
    assert_non_null(vpack_model_observed(m)->cpu_busy_now);
    assert_float_equal(vpack_model_observed(m)->cpu_busy_now[0], 0.0, EPS);
    vpack_model_free(m);
    vpack_topology_free(t);
}

/* Two vCPUs on one CPU: one CPU's worth served, half each, each waits the other half. */
static void test_two_on_one_cpu(void **state)
{
    struct vpack_topology *t = topo("\"package:1 core:1 pu:1\"");
    struct vpack_model *m = model(t, 0);
    struct vpack_model_interval iv;

    (void)state;
    step(m, "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\",\"level\":0,"
            "\"vcpus\":[{\"id\":0,\"util\":1.0},{\"id\":1,\"util\":1.0}]}]}", &iv);
    assert_float_equal(iv.served, 1.0, EPS);
    assert_float_equal(iv.max_delay, 0.5, EPS);
    vpack_model_free(m);
    vpack_topology_free(t);
}

/* SMT: two busy siblings of one core share 1 + smt_gain CPUs of work. */
static void test_smt_sharing(void **state)
{
    struct vpack_topology *t = topo("\"package:1 core:1 pu:2\"");
    struct vpack_model *m = model(t, 0);
    struct vpack_model_interval iv;

    (void)state;
    step(m, "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\",\"level\":0,"
            "\"vcpus\":[{\"id\":0,\"util\":1.0,\"pin\":\"0\"},{\"id\":1,\"util\":1.0,\"pin\":\"1\"}]}]}",
         &iv);
    assert_float_equal(iv.served, 1.25, EPS);
    assert_float_equal(iv.dom_served[0], 1.25, EPS);
    /* Each ran 0.625 and waited the rest of the interval. */
    assert_float_equal(iv.max_delay, 0.375, EPS);
    assert_float_equal(iv.pkg_busy[0], 1.0, EPS);
    /* ... while one busy thread alone has its core to itself. */
    step(m, "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\",\"level\":0,"
            "\"vcpus\":[{\"id\":0,\"util\":1.0,\"pin\":\"0\"},{\"id\":1,\"util\":0,\"pin\":\"1\"}]}]}",
         &iv);
    assert_float_equal(iv.served, 1.0, EPS);
    assert_float_equal(iv.max_delay, 0.0, EPS);
    vpack_model_free(m);
    vpack_topology_free(t);
}

/* Sakasegawa's M/M/c waiting time per unit of service (model.h step 5), from the formula. */
static double sakasegawa(double rho, unsigned c)
{
    return pow(rho, sqrt(2.0 * (c + 1)) - 1) / (c * (1 - rho));
}

/*
 * Per-VM slowdown, each VM's own: on one CPU, VMs of 0.1, 0.2 and 0.3 CPUs
 * (and one of none) are all served; each waits s * W(rho) with rho the
 * others' 0.6 - s (step 5), so its wait per CPU-second wanted is W(0.6 - s).
 * The spread across the three: p50 the 2nd smallest (ceil(0.5 * 3)), p99
 * the 3rd (ceil(0.99 * 3)). Then an interval over capacity (0.8 and 0.6 of
 * a, b, c at 0): served in proportion, the unserved share per VM.
 */
static void test_per_vm_slowdown(void **state)
{
    struct vpack_topology *t = topo("\"package:1 core:1 pu:1\"");
    struct vpack_model *m = model(t, 0);
    struct vpack_model_vm_spread v;
    struct vpack_model_interval iv;
    const struct vpack_model_domain *d;
    double w[3], ua, ub, da, db;

    (void)state;
    step(m, "{\"interval_ms\":1000,\"cpus\":{},\"domains\":["
            "{\"name\":\"a\",\"level\":0,\"vcpus\":[{\"id\":0,\"util\":0.1}]},"
            "{\"name\":\"b\",\"level\":0,\"vcpus\":[{\"id\":0,\"util\":0.2}]},"
            "{\"name\":\"c\",\"level\":0,\"vcpus\":[{\"id\":0,\"util\":0.3}]},"
            "{\"name\":\"idle\",\"level\":0,\"vcpus\":[{\"id\":0,\"util\":0}]}]}", &iv);
    for (unsigned i = 0; i < 3; i++) {
        double s = 0.1 * (i + 1);

        w[i] = sakasegawa(0.6 - s, 1);
        d = vpack_model_domain_get(m, i);
        assert_float_equal(d->vcpu_demand, s, EPS);
        assert_float_equal(d->vcpu_delay, s * w[i], EPS);
    }
    /* W falls with s here: a's is the largest. */
    assert_true(w[0] > w[1] && w[1] > w[2]);
    assert_int_equal(vpack_model_vm_spread(m, &v), 0);
    assert_int_equal(v.n, 3);
    assert_float_equal(v.delay_p50, w[1], EPS);
    assert_float_equal(v.delay_p99, w[0], EPS);
    assert_float_equal(v.delay_max, w[0], EPS);
    assert_float_equal(v.unserved_max, 0, EPS);
    /* Over capacity: 1.4 CPUs on one; a gets 0.8 / 1.4 of the CPU, b 0.6 / 1.4. */
    step(m, "{\"interval_ms\":1000,\"cpus\":{},\"domains\":["
            "{\"name\":\"a\",\"level\":0,\"vcpus\":[{\"id\":0,\"util\":0.8}]},"
            "{\"name\":\"b\",\"level\":0,\"vcpus\":[{\"id\":0,\"util\":0.6}]},"
            "{\"name\":\"c\",\"level\":0,\"vcpus\":[{\"id\":0,\"util\":0}]}]}", &iv);
    ua = 1 - (0.1 + 0.8 / 1.4) / 0.9;  /* over both intervals */
    ub = 1 - (0.2 + 0.6 / 1.4) / 0.8;
    /* Wait: the unserved work, plus the served work's queueing, cut to the interval. */
    /* The CPU is fully occupied: rho, the others' part, is 1 - s. */
    da = fmin(0.8 - 0.8 / 1.4 + 0.8 / 1.4 * sakasegawa(1 - 0.8 / 1.4, 1), 1 - 0.8 / 1.4);
    db = fmin(0.6 - 0.6 / 1.4 + 0.6 / 1.4 * sakasegawa(1 - 0.6 / 1.4, 1), 1 - 0.6 / 1.4);
    assert_float_equal(vpack_model_domain_get(m, 0)->vcpu_delay, 0.1 * w[0] + da, EPS);
    assert_float_equal(vpack_model_domain_get(m, 1)->vcpu_delay, 0.2 * w[1] + db, EPS);
    assert_int_equal(vpack_model_vm_spread(m, &v), 0);
    assert_int_equal(v.n, 3);
    /* c was served all it wanted: unserved 0, 0 < ub < ua. */
    assert_true(ub > 0 && ua > ub);
    assert_float_equal(v.unserved_p50, ub, EPS);
    assert_float_equal(v.unserved_p99, ua, EPS);
    assert_float_equal(v.unserved_max, ua, EPS);
    assert_float_equal(v.delay_max, fmax((0.1 * w[0] + da) / 0.9, (0.2 * w[1] + db) / 0.8), EPS);
    vpack_model_free(m);
    vpack_topology_free(t);
}

/* One interval of one domain with n vCPUs of util u each. */
static void step_busy(struct vpack_model *m, unsigned n, double u)
{
    char text[1024];
    size_t len = 0;

    len += (size_t)snprintf(text + len, sizeof(text) - len,
                            "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\","
                            "\"level\":0,\"vcpus\":[");
    for (unsigned k = 0; k < n; k++)
        len += (size_t)snprintf(text + len, sizeof(text) - len, "%s{\"id\":%u,\"util\":%g}",
                                k ? "," : "", k, u);
    snprintf(text + len, sizeof(text) - len, "]}]}");
    step(m, text, NULL);
}

/*
 * The saturation share (step 8): a package is saturated when it serves all
 * it can. One core of two hardware threads (smt_gain 0.25) serves at most
 * 1.25: 2 CPUs of demand saturate it; 1.25 spread over both threads (0.625
 * each) just does; 1 CPU (0.5 on each thread) does not, though both
 * threads have work; an idle interval has no work, so it is not active
 * time. Shares: 2 of 3 active package-seconds. Two one-CPU packages: 1.5
 * CPUs (0.75 each) saturate neither, 2 CPUs both.
 */
static void test_saturation(void **state)
{
    struct vpack_topology *t = topo("\"package:1 core:1 pu:2\"");
    struct vpack_model *m = model(t, 0);
    struct vpack_model_totals tot;

    (void)state;
    step_busy(m, 2, 1.0);
    step_busy(m, 2, 0.625);
    step_busy(m, 2, 0.5);
    step_busy(m, 2, 0);
    vpack_model_totals(m, &tot);
    assert_float_equal(tot.active_pkg_s, 3, EPS);
    assert_float_equal(tot.saturated_pkg_s, 2, EPS);
    vpack_model_free(m);
    vpack_topology_free(t);

    t = topo("\"package:2 core:1 pu:1\"");
    m = model(t, 0);
    step_busy(m, 2, 0.75);
    vpack_model_totals(m, &tot);
    assert_float_equal(tot.active_pkg_s, 2, EPS);
    assert_float_equal(tot.saturated_pkg_s, 0, EPS);
    step_busy(m, 2, 1.0);
    vpack_model_totals(m, &tot);
    assert_float_equal(tot.saturated_pkg_s, 2, EPS);
    vpack_model_free(m);
    vpack_topology_free(t);
}

/* An idle package sits in its deep C-state; a half-busy one half the time. */
static void test_idle_package_deep_state(void **state)
{
    struct vpack_topology *t = topo("\"package:2 core:1 pu:1\"");
    struct vpack_model *m = model(t, 0);
    struct vpack_model_interval iv;
    struct vpack_model_totals tot;

    (void)state;
    step(m, "{\"interval_ms\":2000,\"cpus\":{},\"domains\":[{\"name\":\"a\",\"level\":0,"
            "\"vcpus\":[{\"id\":0,\"util\":0.5,\"pin\":\"0\"}]}]}", &iv);
    assert_float_equal(iv.pkg_idle[1], 1.0, EPS);
    assert_float_equal(iv.pkg_busy[1], 0.0, EPS);
    assert_float_equal(iv.pkg_idle[0], 0.5, EPS);
    assert_float_equal(iv.pkg_busy[0], 0.5, EPS);
    /* Package 0: 0.5 * 2 + 0.5 * 20 + 0.5 * 5 = 13.5 W; package 1: 2 W; for 2 s. */
    assert_float_equal(iv.energy_j, 31.0, EPS);
    vpack_model_totals(m, &tot);
    assert_float_equal(tot.seconds, 2.0, EPS);
    assert_float_equal(tot.pkg_idle_s[1], 2.0, EPS);
    assert_float_equal(tot.pkg_idle_s[0], 1.0, EPS);
    vpack_model_free(m);
    vpack_topology_free(t);
}

/*
 * The real policy in the loop: a level 2 domain spread over two packages is
 * packed onto one (pin operations on the first interval), then nothing
 * changes while the load does not; level 0 never pins anything.
 */
static void test_policy_in_the_loop(void **state)
{
    static const char *iv_text =
        "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"w\",\"level\":0,"
        "\"vcpus\":[{\"id\":0,\"util\":0.7},{\"id\":1,\"util\":0.1}]}]}";
    struct vpack_topology *t = topo("\"package:2 core:4 pu:1\"");
    struct vpack_model *m2 = model(t, 2), *m0 = model(t, 0);
    struct vpack_model_interval iv;
    struct vpack_model_totals tot;

    (void)state;
    step(m2, iv_text, &iv);
    assert_int_equal(iv.nactive, 1);
    assert_true(iv.pin_ops >= 2);
    for (int i = 0; i < 10; i++) {
        step(m2, iv_text, &iv);
        assert_int_equal(iv.pin_ops, 0);
        assert_int_equal(iv.nactive, 1);
    }
    /* The parked package is whole-idle. */
    assert_true(iv.pkg_idle[0] > 0.999 || iv.pkg_idle[1] > 0.999);
    assert_float_equal(iv.served, 0.8, EPS);
    /* Every thread (2 vCPUs, the emulator) ended up on the awake package only. */
    {
        vpack_cpuset cpus, all;
        int awake = iv.pkg_idle[0] > 0.999 ? 1 : 0;

        vpack_cpuset_zero(&all);
        for (unsigned k = 0; k < 3; k++) {
            assert_int_equal(vpack_model_thread_cpus(m2, 0, k, &cpus), 2);
            assert_false(vpack_cpuset_empty(&cpus));
            vpack_cpuset_or(&all, &all, &cpus);
        }
        assert_true(vpack_cpuset_subset(&all, &t->packages[awake].cpus));
        assert_int_equal(vpack_model_thread_cpus(m2, 0, 3, &cpus), -ENOENT);
        assert_int_equal(vpack_model_thread_cpus(m2, 1, 0, &cpus), -ENOENT);
    }
    for (int i = 0; i < 11; i++) {
        step(m0, iv_text, &iv);
        assert_int_equal(iv.pin_ops, 0);
    }
    /* Level 0: the load is spread over both packages, neither is ever whole-idle. */
    assert_true(iv.pkg_idle[0] < 0.999 && iv.pkg_idle[1] < 0.999);
    /* ... and every thread is allowed on every CPU. */
    {
        vpack_cpuset cpus;

        assert_int_equal(vpack_model_thread_cpus(m0, 0, 0, &cpus), 2);
        assert_true(vpack_cpuset_equal(&cpus, &t->cpus));
    }
    vpack_model_totals(m0, &tot);
    {
        struct vpack_model_totals t2;
        vpack_model_totals(m2, &t2);
        assert_true(t2.energy_j < tot.energy_j);
        assert_float_equal(t2.served, tot.served, EPS);
    }
    vpack_model_free(m0);
    vpack_model_free(m2);
    vpack_topology_free(t);
}

static void test_model_bad_level(void **state)
{
    struct vpack_topology *t = topo("\"package:1 core:1 pu:1\"");
    struct vpack_policy_params pp;
    struct vpack_model *m = NULL;
    char *err = NULL;

    (void)state;
    vpack_policy_params_default(&pp);
    assert_int_equal(vpack_model_new(t, &pp, &power, 3, &m, &err), -EINVAL);
    assert_null(m);
    assert_non_null(strstr(err, "level 3"));
    free(err);
    vpack_topology_free(t);
}

static void test_power_params(void **state)
{
    struct vpack_power_params p;
    char *err = NULL;
    const char *good = "# watts\n[package]\nawake_w = 40\ncore_w = 4.5\ndeep_w = 9\n[smt]\ngain = 0.3\n";
    const char *bad = "[package]\nawake_w = 40\ncore_w = lots\n";

    (void)state;
    assert_int_equal(vpack_power_params_parse(good, strlen(good), &p, &err), 0);
    assert_float_equal(p.awake_w, 40, EPS);
    assert_float_equal(p.core_w, 4.5, EPS);
    assert_float_equal(p.deep_w, 9, EPS);
    assert_float_equal(p.smt_gain, 0.3, EPS);
    assert_int_equal(vpack_power_params_parse(bad, strlen(bad), &p, &err), -EINVAL);
    assert_non_null(strstr(err, "line 3"));
    assert_non_null(strstr(err, "core_w"));
    free(err);
    assert_int_equal(vpack_power_params_parse("[x]\ny=1\n", 8, &p, &err), -EINVAL);
    assert_non_null(strstr(err, "unknown key 'y'"));
    free(err);
    assert_int_equal(vpack_power_params_parse("[package]\ndeep_w=50\n", 20, &p, &err), -EINVAL);
    assert_non_null(strstr(err, "deep_w"));
    free(err);
    /* idle_w: awake_w when missing, between deep_w and awake_w; the scope by name. */
    assert_float_equal(p.idle_w, p.awake_w, EPS);
    assert_int_equal(p.pc6_scope, VPACK_PC6_SYSTEM);
    assert_int_equal(vpack_power_params_parse(good, strlen(good), &p, &err), 0);
    assert_float_equal(p.idle_w, 40, EPS);
    {
        const char *t = "[package]\nidle_w = 20\npc6_scope = package\n";
        assert_int_equal(vpack_power_params_parse(t, strlen(t), &p, &err), 0);
        assert_float_equal(p.idle_w, 20, EPS);
        assert_int_equal(p.pc6_scope, VPACK_PC6_PACKAGE);
        assert_string_equal(vpack_pc6_scope_name(p.pc6_scope), "package");
        t = "[package]\npc6_scope = socket\n";
        assert_int_equal(vpack_power_params_parse(t, strlen(t), &p, &err), -EINVAL);
        assert_non_null(strstr(err, "line 2"));
        assert_non_null(strstr(err, "expected package, system or none"));
        free(err);
        t = "[package]\nidle_w = 5\n"; /* below deep_w 8 */
        assert_int_equal(vpack_power_params_parse(t, strlen(t), &p, &err), -EINVAL);
        assert_non_null(strstr(err, "deep_w <= idle_w <= awake_w"));
        free(err);
    }
}

/* The power model with the costs of step 8 set, the rest as power. */
static struct vpack_model *model_with(const struct vpack_topology *t, int level,
                                      const struct vpack_power_params *pw)
{
    struct vpack_policy_params pp;
    struct vpack_model *m = NULL;
    char *err = NULL;

    vpack_policy_params_default(&pp);
    if (vpack_model_new(t, &pp, pw, level, &m, &err) < 0)
        fail_msg("vpack_model_new: %s", err ? err : "?");
    return m;
}

/*
 * Packing hurts: a moved thread refills its caches (refill_ms off its served
 * work), so the interval of the first plan, which pins every thread, serves
 * less than the demand though the host has room; the next serves it all.
 */
static void test_refill_served_below_demand(void **state)
{
    struct vpack_topology *t = topo("\"package:2 core:1 pu:1\"");
    struct vpack_power_params pw = power;
    struct vpack_model *m;
    struct vpack_model_interval iv;
    struct vpack_model_totals tot;
    const char *light = "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\","
                        "\"level\":2,\"vcpus\":[{\"id\":0,\"util\":0.1},{\"id\":1,\"util\":0.1}]}]}";

    (void)state;
    pw.refill_ms = 50;
    m = model_with(t, 2, &pw);
    step(m, light, &iv);
    assert_int_equal(iv.pin_ops, 3);
    assert_float_equal(iv.demand, 0.2, EPS);
    /* Two moved vCPUs lose 0.05 each; the emulator, demanding nothing, loses nothing. */
    assert_float_equal(iv.served, 0.1, EPS);
    step(m, light, &iv);
    assert_int_equal(iv.pin_ops, 0);
    assert_float_equal(iv.served, 0.2, EPS);
    vpack_model_totals(m, &tot);
    assert_float_equal(tot.refill_s, 0.1, EPS);
    assert_true(tot.served / tot.demand < 1 - 0.2);
    vpack_model_free(m);
    vpack_topology_free(t);
}

/*
 * Remote memory stalls the guest (model.h, step 8): a vCPU of 0.5 pinned to
 * package 0 with its memory on node 1 waits remote_penalty (0.2 here) per
 * second served there: 0.1, as delay, not as what the policy observes; with
 * its memory on node 0 nothing; unpinned, water-filled 0.25 on each package,
 * half of it away: 0.05. remote_penalty 0 charges nothing.
 */
static void test_remote_memory_stall(void **state)
{
    struct vpack_topology *t = topo("\"package:2 [numa] core:1 pu:1\"");
    struct vpack_power_params pw = power;
    struct vpack_model *m;
    struct vpack_model_interval iv;
    struct vpack_model_totals tot;
    const struct {
        const char *pin, *node;
        double penalty, want;
    } cases[] = {
        {",\"pin\":\"0\"", "1", 0.2, 0.1},
        {",\"pin\":\"0\"", "0", 0.2, 0.0},
        {"", "1", 0.2, 0.05},
        {",\"pin\":\"0\"", "1", 0.0, 0.0},
    };

    (void)state;
    for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[512];

        snprintf(text, sizeof(text),
                 "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\",\"level\":0,"
                 "\"vcpus\":[{\"id\":0,\"util\":0.5%s}],\"memory\":{\"%s\":1}}]}",
                 cases[i].pin, cases[i].node);
        pw.remote_penalty = cases[i].penalty;
        m = model_with(t, 0, &pw);
        step(m, text, &iv);
        assert_float_equal(iv.served, 0.5, EPS);
        assert_float_equal(iv.max_delay, cases[i].want, EPS);
        vpack_model_totals(m, &tot);
        assert_float_equal(tot.remote_delay_s, cases[i].want, EPS);
        /* The policy sees no wait: on a real host a stall is run time. */
        assert_float_equal(vpack_model_observed(m)->domains[0].vcpus[0].delay, 0, EPS);
        vpack_model_free(m);
    }
    vpack_topology_free(t);
}

/*
 * SMT siblings slow each other: two threads of 0.5 on the two CPUs of one
 * core run at 1 - o (1 - g) / 2 of a CPU's speed beside a sibling occupied
 * o; the fixed point o = 0.5 / (1 - 0.375 o) is 2/3, each is served all its
 * 0.5 but waits its own stretch (rho 2/3 - 1/2 on one CPU: 0.5 * 0.2).
 * With smt_gain 1 a sibling costs nothing.
 */
static void test_smt_slowdown(void **state)
{
    struct vpack_topology *t = topo("\"package:1 core:1 pu:2\"");
    struct vpack_power_params pw = power;
    struct vpack_model *m;
    struct vpack_model_interval iv;
    struct vpack_model_totals tot;
    const char *two = "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\",\"level\":0,"
                      "\"vcpus\":[{\"id\":0,\"util\":0.5,\"pin\":\"0\"},"
                      "{\"id\":1,\"util\":0.5,\"pin\":\"1\"}]}]}";

    (void)state;
    pw.smt_corun = true;
    m = model_with(t, 0, &pw);
    step(m, two, &iv);
    assert_float_equal(iv.served, 1.0, EPS);
    assert_float_equal(iv.max_delay, 0.1, EPS);
    assert_float_equal(iv.pkg_busy[0], 1 - (1 / 3.0) * (1 / 3.0), EPS);
    vpack_model_totals(m, &tot);
    assert_float_equal(tot.smt_slow_s, 2 * (2 / 3.0) * 0.25, EPS);
    vpack_model_free(m);
    pw.smt_gain = 1;
    m = model_with(t, 0, &pw);
    step(m, two, &iv);
    assert_float_equal(iv.max_delay, 0.0, EPS);
    vpack_model_totals(m, &tot);
    assert_float_equal(tot.smt_slow_s, 0.0, EPS);
    vpack_model_free(m);
    vpack_topology_free(t);
}

/* Package p's watts (model.h, step 7) at idle share idle, deep share deep, busy cores busy. */
static double watts(const struct vpack_power_params *pw, double idle, double deep, double busy)
{
    return deep * pw->deep_w + (idle - deep) * pw->idle_w + (1 - idle) * pw->awake_w +
           busy * pw->core_w;
}

/*
 * Target residency and exit latency (step 8): a one-core package busy half
 * the time in busy periods of 2 ms wakes 250 times a second, its gaps 2 ms
 * on average; with T = 800 us the share of whole-idle time in gaps past T is
 * (1 + 0.4) e^-0.4, less 290 us per exit (250 e^-0.4 of them), and each exit
 * delays the work. A residency of a second leaves no deep state at all;
 * none, and the whole idle half is deep (the "residency ignored" variant).
 */
static void test_residency_and_exit(void **state)
{
    struct vpack_topology *t = topo("\"package:1 core:1 pu:1\"");
    struct vpack_power_params pw = power;
    struct vpack_model *m;
    struct vpack_model_interval iv;
    struct vpack_model_totals tot;
    const char *half = "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\",\"level\":0,"
                       "\"vcpus\":[{\"id\":0,\"util\":0.5}]}]}";
    double exits = 250 * exp(-0.4), deep = 0.5 * 1.4 * exp(-0.4) - exits * 290e-6;

    (void)state;
    pw.idle_w = 15;
    pw.pc6_scope = VPACK_PC6_PACKAGE;
    pw.busy_period_ms = 2;
    pw.residency_us = 800;
    pw.exit_us = 290;
    m = model_with(t, 0, &pw);
    step(m, half, &iv);
    assert_float_equal(iv.energy_j, watts(&pw, 0.5, deep, 0.5), EPS);
    vpack_model_totals(m, &tot);
    assert_float_equal(tot.deep_wakes, exits, EPS);
    /* The exits' 290 us each, spread over the package's half CPU of work: all the vCPU's. */
    assert_float_equal(tot.wake_delay_s, exits * 290e-6, EPS);
    assert_float_equal(iv.max_delay, exits * 290e-6, EPS);
    assert_float_equal(tot.energy_var_j[VPACK_VAR_NO_RESIDENCY], watts(&pw, 0.5, 0.5, 0.5), EPS);
    assert_true(tot.energy_var_j[VPACK_VAR_BUSY_SHORT] > iv.energy_j);
    assert_true(tot.energy_var_j[VPACK_VAR_BUSY_LONG] < iv.energy_j);
    vpack_model_free(m);
    pw.residency_us = 1e6;
    m = model_with(t, 0, &pw);
    step(m, half, &iv);
    assert_true(iv.energy_j > watts(&pw, 0.5, 1e-6, 0.5));
    assert_true(iv.energy_j <= watts(&pw, 0.5, 0, 0.5) + EPS);
    vpack_model_free(m);
    vpack_topology_free(t);
}

/*
 * Memory homes: a domain running on package 0 with its memory on node 1
 * (package 1) keeps package 1 out of the deep state under remote_memory =
 * holds; with free, package 1 sleeps.
 */
static void test_remote_memory(void **state)
{
    struct vpack_topology *t = topo("\"package:2 numa:1 core:1 pu:1\"");
    struct vpack_power_params pw = power;
    struct vpack_model *m;
    struct vpack_model_interval iv;
    struct vpack_model_totals tot;
    const char *remote = "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\","
                         "\"level\":0,\"vcpus\":[{\"id\":0,\"util\":1.0,\"pin\":\"0\"}],"
                         "\"memory\":{\"1\":1.0}}]}";

    (void)state;
    pw.idle_w = 15;
    m = model_with(t, 0, &pw);
    step(m, remote, &iv);
    /* Package 0 busy: 20 + 5; package 1 idle but held: idle_w. */
    assert_float_equal(iv.energy_j, 25 + 15, EPS);
    vpack_model_totals(m, &tot);
    assert_float_equal(tot.held_pkg_s, 1.0, EPS);
    assert_float_equal(tot.energy_var_j[VPACK_VAR_REMOTE_FREE], 25 + 2, EPS);
    vpack_model_free(m);
    pw.remote = VPACK_REMOTE_FREE;
    m = model_with(t, 0, &pw);
    step(m, remote, &iv);
    assert_float_equal(iv.energy_j, 25 + 2, EPS);
    vpack_model_free(m);
    vpack_topology_free(t);
}

/*
 * The delay-bounded optimum: 16 vCPUs of 0.3 on 2 x 8 CPUs. One package
 * holds 4.8 CPUs of work in 8 (the capacity bound is 1), but with the
 * others at occupancy 4.5 / 8 each waits 0.3 * W(0.5625, 8), about 1.3 %;
 * spread over 16 CPUs, 0.3 * W(0.28, 16), about 0.006 %. A bound of 10 %
 * takes one package, of 1 % two; of 1e-4 % none meets it: all packages.
 */
static void test_oracle_delay(void **state)
{
    struct vpack_topology *t = topo("\"package:2 core:8 pu:1\"");
    double real[2], one = 0.3 * vpack_model_wait_factor(4.5 / 8, 8);
    char buf[4096];
    size_t used = 0;
    struct vpack_snapshot *s;
    bool exact = false;

    (void)state;
    used += (size_t)snprintf(buf, sizeof(buf), "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{"
                             "\"name\":\"a\",\"level\":0,\"vcpus\":[");
    for (int i = 0; i < 16; i++)
        used += (size_t)snprintf(buf + used, sizeof(buf) - used, "%s{\"id\":%d,\"util\":0.3}",
                                 i ? "," : "", i);
    snprintf(buf + used, sizeof(buf) - used, "]}]}");
    s = line(buf);
    vpack_oracle_capacity_real(t, power.smt_gain, real);
    assert_true(one > 0.01 && one < 0.1);
    assert_int_equal(vpack_oracle_packages(t, real, s, NULL), 1);
    assert_int_equal(vpack_oracle_delay_packages(t, real, s, 0.10, &exact), 1);
    assert_true(exact);
    assert_int_equal(vpack_oracle_delay_packages(t, real, s, 0.01, NULL), 2);
    assert_int_equal(vpack_oracle_delay_packages(t, real, s, 1e-6, NULL), 2);
    vpack_snapshot_free(s);
    vpack_topology_free(t);
}

/* A named profile of the file, into *p. */
static int file_platform(const char *text, size_t len, const char *name,
                         struct vpack_power_params *p, char **err)
{
    return vpack_power_profile_parse(text, len, name, p, err);
}

/* Two profiles alike, field by field. */
static void assert_power_equal(const struct vpack_power_params *a, const struct vpack_power_params *b)
{
    assert_float_equal(a->awake_w, b->awake_w, EPS);
    assert_float_equal(a->core_w, b->core_w, EPS);
    assert_float_equal(a->deep_w, b->deep_w, EPS);
    assert_float_equal(a->idle_w, b->idle_w, EPS);
    assert_float_equal(a->smt_gain, b->smt_gain, EPS);
    assert_int_equal(a->pc6_scope, b->pc6_scope);
    assert_float_equal(a->exit_us, b->exit_us, EPS);
    assert_float_equal(a->residency_us, b->residency_us, EPS);
    assert_float_equal(a->busy_period_ms, b->busy_period_ms, EPS);
    assert_float_equal(a->refill_ms, b->refill_ms, EPS);
    assert_float_equal(a->remote_penalty, b->remote_penalty, EPS);
    assert_int_equal(a->remote, b->remote);
}

/* The profiles form: a named platform, the default, and what is wrong with a file. */
static void test_power_profiles(void **state)
{
    const char *two = "default = b\n[a]\nawake_w = 40\nexit_latency_us = 100\n"
                      "[b]\npc6_scope = package\ntarget_residency_us = 50\n[costs]\nrefill_ms = 3\n"
                      "remote_memory = free\nremote_penalty = 0.3\n";
    struct vpack_power_params p;
    char *err = NULL;
    const char *t;

    (void)state;
    assert_int_equal(file_platform(two, strlen(two), "a", &p, &err), 0);
    assert_float_equal(p.awake_w, 40, EPS);
    assert_float_equal(p.idle_w, 40, EPS);
    assert_float_equal(p.exit_us, 100, EPS);
    assert_float_equal(p.refill_ms, 3, EPS);
    assert_float_equal(p.remote_penalty, 0.3, EPS);
    assert_int_equal(p.remote, VPACK_REMOTE_FREE);
    assert_int_equal(file_platform(two, strlen(two), NULL, &p, &err), 0);
    assert_int_equal(p.pc6_scope, VPACK_PC6_PACKAGE);
    assert_float_equal(p.residency_us, 50, EPS);
    assert_int_equal(file_platform(two, strlen(two), "c", &p, &err), -EINVAL);
    assert_non_null(strstr(err, "no platform 'c' in the power model; it has a, b"));
    free(err);
    t = "[a]\nawake_w = 40\n";
    assert_int_equal(file_platform(t, strlen(t), NULL, &p, &err), -EINVAL);
    assert_non_null(strstr(err, "default = NAME"));
    free(err);
    t = "default = a\n[a]\nawake_w = 40\n[b]\nexit_latency_us = -1\n";
    assert_int_equal(file_platform(t, strlen(t), "a", &p, &err), -EINVAL);
    assert_non_null(strstr(err, "line 5"));
    free(err);
    t = "default = a\n[a]\nawake_w = 40\n[b]\ndeep_w = 50\n";
    assert_int_equal(file_platform(t, strlen(t), "a", &p, &err), -EINVAL);
    assert_non_null(strstr(err, "[b] expected deep_w <= idle_w"));
    free(err);
    t = "default = a\n[a]\nawake_w = 40\n[package]\ncore_w = 1\n";
    assert_int_equal(file_platform(t, strlen(t), "a", &p, &err), -EINVAL);
    assert_non_null(strstr(err, "use one form"));
    free(err);
    t = "[costs]\nremote_memory = sometimes\n";
    assert_int_equal(file_platform(t, strlen(t), NULL, &p, &err), -EINVAL);
    assert_non_null(strstr(err, "expected holds or free"));
    free(err);
    t = "[package]\nawake_w = 40\n";
    assert_int_equal(file_platform(t, strlen(t), "a", &p, &err), -EINVAL);
    assert_non_null(strstr(err, "it has no profiles"));
    free(err);
    assert_int_equal(vpack_power_platform("no-such", &p), -ENOENT);
}

/*
 * data/power-model.ini (VPACK_TESTDATA/../../data) holds the built-in
 * profiles: each one alike, field by field, its default the built-in
 * default, and no profile more or fewer (the message of a name it lacks
 * lists the ones it has).
 */
static void test_power_file_is_default(void **state)
{
    const char *dir = getenv("VPACK_TESTDATA"), *name;
    struct vpack_power_params file, def;
    char path[4096], *buf = NULL, *err = NULL, names[512] = "";
    size_t cap = 0, len, used = 0;
    FILE *f;

    (void)state;
    assert_non_null(dir);
    snprintf(path, sizeof(path), "%s/../../data/power-model.ini", dir);
    f = fopen(path, "r");
    assert_non_null(f);
    len = (size_t)getdelim(&buf, &cap, '\0', f);
    fclose(f);
    assert_int_equal(vpack_power_params_parse(buf, len, &file, &err), 0);
    vpack_power_params_default(&def);
    assert_power_equal(&file, &def);
    for (unsigned i = 0; (name = vpack_power_platform_name(i)); i++) {
        assert_int_equal(vpack_power_platform(name, &def), 0);
        assert_int_equal(vpack_power_profile_parse(buf, len, name, &file, &err), 0);
        assert_power_equal(&file, &def);
        used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "", name);
    }
    assert_int_equal(vpack_power_profile_parse(buf, len, "none-such", &file, &err), -EINVAL);
    assert_non_null(strstr(err, names));
    assert_string_equal(strstr(err, "it has ") + strlen("it has "), names);
    free(err);
    free(buf);
}

/*
 * The deep state's scope: one package half busy, the other idle. Per
 * package, the idle one is deep all the time; system-wide, only while the
 * busy one is idle too (half the time; idle_w the other half); with none,
 * whole-idle time draws idle_w.
 */
static void test_pc6_scope(void **state)
{
    struct vpack_topology *t = topo("\"package:2 core:1 pu:1\"");
    struct vpack_power_params pw = power;
    struct vpack_model_totals tot;
    struct vpack_model_interval iv;
    struct vpack_policy_params pp;
    struct vpack_model *m = NULL;
    char *err = NULL;
    /* Package 0: busy half the time: 0.5 * 20 (awake) + 0.5 * 5 (core) + its idle half. */
    double p0 = 0.5 * 20 + 0.5 * 5, want[VPACK_PC6_SCOPES] = {
        p0 + 0.5 * 2 + 2,                         /* idle half deep; package 1 deep */
        p0 + 0.5 * 2 + 0.5 * 2 + 0.5 * 15,        /* package 1 deep while package 0 idles */
        p0 + 0.5 * 15 + 15,                       /* never deep */
    };

    (void)state;
    pw.idle_w = 15;
    vpack_policy_params_default(&pp);
    for (unsigned s = 0; s < VPACK_PC6_SCOPES; s++) {
        pw.pc6_scope = (enum vpack_pc6_scope)s;
        assert_int_equal(vpack_model_new(t, &pp, &pw, 0, &m, &err), 0);
        step(m, "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\",\"level\":0,"
                "\"vcpus\":[{\"id\":0,\"util\":0.5,\"pin\":\"0\"}]}]}", &iv);
        vpack_model_totals(m, &tot);
        assert_float_equal(iv.energy_j, want[s], EPS);
        assert_float_equal(tot.energy_j, want[s], EPS);
        for (unsigned k = 0; k < VPACK_PC6_SCOPES; k++)
            assert_float_equal(tot.energy_scope_j[k], want[k], EPS);
        /* Whole-idle outside the deep state: 0 per package, 0.5 s system-wide, 1.5 s never. */
        assert_float_equal(tot.shallow_pkg_s[VPACK_PC6_PACKAGE], 0, EPS);
        assert_float_equal(tot.shallow_pkg_s[VPACK_PC6_SYSTEM], 0.5, EPS);
        assert_float_equal(tot.shallow_pkg_s[VPACK_PC6_NONE], 1.5, EPS);
        vpack_model_free(m);
    }
    pw.pc6_scope = VPACK_PC6_SCOPES;
    assert_int_equal(vpack_model_new(t, &pp, &pw, 0, &m, &err), -EINVAL);
    assert_non_null(strstr(err, "pc6_scope"));
    free(err);
    vpack_topology_free(t);
}

/* The policy target's count at pack watermark 0.6. */
static int oracle(const struct vpack_topology *t, const char *text, bool *exact)
{
    struct vpack_snapshot *s = line(text);
    double *cap = calloc(t->npackages, sizeof(*cap));
    int k;

    assert_non_null(cap);
    vpack_oracle_capacity_target(t, 0.6, cap);
    k = vpack_oracle_packages(t, cap, s, exact);
    vpack_snapshot_free(s);
    free(cap);
    return k;
}

/* T2: two packages of 4 cores, 2.4 CPUs each under the pack watermark. */
static void test_oracle_small_exact(void **state)
{
    struct vpack_topology *t = topo("\"package:2 core:4 pu:1\"");
    bool exact = false;

    (void)state;
    /* Nothing demanded: no package needed (the policy keeps one awake regardless). */
    assert_int_equal(oracle(t, "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[]}", &exact), 0);
    assert_true(exact);
    assert_int_equal(oracle(t, "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\","
                               "\"vcpus\":[{\"id\":0,\"util\":1},{\"id\":1,\"util\":1}]}]}",
                            &exact),
                     1);
    assert_int_equal(oracle(t, "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\","
                               "\"vcpus\":[{\"id\":0,\"util\":1},{\"id\":1,\"util\":1},"
                               "{\"id\":2,\"util\":0.5}]}]}",
                            &exact),
                     2);
    vpack_topology_free(t);
}

/* Pins and bounds in two packages force both awake; an idle pinned thread does not. */
static void test_oracle_pins(void **state)
{
    struct vpack_topology *t = topo("\"package:2 core:4 pu:1\"");

    (void)state;
    assert_int_equal(oracle(t, "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\","
                               "\"vcpus\":[{\"id\":0,\"util\":0.2,\"pin\":\"0\"},"
                               "{\"id\":1,\"util\":0.2,\"pin\":\"5\"}]}]}",
                            NULL),
                     2);
    assert_int_equal(oracle(t, "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\","
                               "\"vcpus\":[{\"id\":0,\"util\":0.2,\"pin\":\"0\"},"
                               "{\"id\":1,\"util\":0,\"pin\":\"5\"}]}]}",
                            NULL),
                     1);
    assert_int_equal(oracle(t, "{\"interval_ms\":1000,\"cpus\":{},\"domains\":["
                               "{\"name\":\"a\",\"cpuset\":\"4-7\",\"vcpus\":[{\"id\":0,\"util\":0.2}]},"
                               "{\"name\":\"b\",\"vcpus\":[{\"id\":0,\"util\":0.2,\"pin\":\"1\"}]}]}",
                            NULL),
                     2);
    /* A pin over both packages leaves the choice free. */
    assert_int_equal(oracle(t, "{\"interval_ms\":1000,\"cpus\":{},\"domains\":["
                               "{\"name\":\"a\",\"cpuset\":\"3-4\",\"vcpus\":[{\"id\":0,\"util\":0.2}]},"
                               "{\"name\":\"b\",\"vcpus\":[{\"id\":0,\"util\":0.2,\"pin\":\"5\"}]}]}",
                            NULL),
                     1);
    vpack_topology_free(t);
}

/* 20 packages: a lower bound, from capacity or from disjoint pins. */
static void test_oracle_large_bound(void **state)
{
    struct vpack_topology *t = topo("\"package:20 core:2 pu:1\"");
    char text[2048];
    size_t n;
    bool exact = true;

    (void)state;
    /* 5 CPUs at 1.2 per package: 5 packages (4 hold 4.8). */
    assert_int_equal(oracle(t, "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\","
                               "\"vcpus\":[{\"id\":0,\"util\":1},{\"id\":1,\"util\":1},"
                               "{\"id\":2,\"util\":1},{\"id\":3,\"util\":1},{\"id\":4,\"util\":1}]}]}",
                            &exact),
                     5);
    assert_false(exact);
    /* Seven light threads pinned to seven different packages. */
    n = (size_t)snprintf(text, sizeof(text), "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{"
                                             "\"name\":\"a\",\"vcpus\":[");
    for (int i = 0; i < 7; i++)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "%s{\"id\":%d,\"util\":0.1,\"pin\":\"%d\"}",
                              i ? "," : "", i, 2 * i);
    snprintf(text + n, sizeof(text) - n, "]}]}");
    assert_int_equal(oracle(t, text, NULL), 7);
    vpack_topology_free(t);
}

/* n (at most 64) busy vCPUs of one level-0 domain, free to run anywhere, into text. */
static const char *busy_domain(unsigned n, char *text, size_t size)
{
    size_t len = (size_t)snprintf(text, size, "{\"interval_ms\":1000,\"cpus\":{},\"domains\":"
                                              "[{\"name\":\"a\",\"level\":0,\"vcpus\":[");

    for (unsigned i = 0; i < n && len < size; i++)
        len += (size_t)snprintf(text + len, size - len, "%s{\"id\":%u,\"util\":1}", i ? "," : "", i);
    if (len < size)
        snprintf(text + len, size - len, "]}]}");
    return text;
}

/*
 * The capacity bound: each package serves ncores + smt_gain * (CPUs -
 * ncores) at most, which is what the model serves when every CPU is busy
 * (the bound's proof rests on it), and the bound never exceeds the policy
 * target.
 */
static void test_oracle_capacity_bound(void **state)
{
    struct vpack_topology *t = topo("\"package:2 core:4 pu:2\"");
    struct vpack_model *m = model(t, 0);
    struct vpack_model_interval iv;
    double real[2], target[2];
    bool exact = false;

    (void)state;
    vpack_oracle_capacity_real(t, power.smt_gain, real);
    vpack_oracle_capacity_target(t, 0.6, target);
    assert_float_equal(real[0], 4 + power.smt_gain * 4, EPS);
    assert_float_equal(target[1], 2.4, EPS);
    for (unsigned n = 1; n <= 16; n++) {
        char buf[4096];
        const char *text = busy_domain(n, buf, sizeof(buf));
        struct vpack_snapshot *s = line(text);
        int bound = vpack_oracle_packages(t, real, s, &exact);
        int tgt = vpack_oracle_packages(t, target, s, NULL);

        assert_true(exact);
        /* 5 CPUs' worth per package: 1 package up to 5 busy vCPUs, then 2. */
        assert_int_equal(bound, n <= 5 ? 1 : 2);
        assert_int_equal(tgt, n <= 2 ? 1 : 2);
        assert_true(bound <= tgt);
        /* The model serves no more than the bound's capacity of every package. */
        step(m, text, &iv);
        assert_true(iv.served <= real[0] + real[1] + EPS);
        if (n == 16)
            assert_float_equal(iv.served, real[0] + real[1], EPS);
        vpack_snapshot_free(s);
    }
    vpack_model_free(m);
    vpack_topology_free(t);
}

/* A thread the oracle counts (over VPACK_ORACLE_EPS) spread over a thousand CPUs
 * still leaves the model counting a package with work (over VPACK_MODEL_WORK_EPS). */
static void test_oracle_eps_above_model_eps(void **unused)
{
    (void)unused;
    assert_true(VPACK_ORACLE_EPS / 1000 > VPACK_MODEL_WORK_EPS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_per_vm_slowdown),
        cmocka_unit_test(test_saturation),
        cmocka_unit_test(test_oracle_eps_above_model_eps),
        cmocka_unit_test(test_one_busy_vcpu),
        cmocka_unit_test(test_foreign_load),
        cmocka_unit_test(test_pin_charge),
        cmocka_unit_test(test_observed_smoothed),
        cmocka_unit_test(test_two_on_one_cpu),
        cmocka_unit_test(test_smt_sharing),
        cmocka_unit_test(test_idle_package_deep_state),
        cmocka_unit_test(test_policy_in_the_loop),
        cmocka_unit_test(test_model_bad_level),
        cmocka_unit_test(test_power_params),
        cmocka_unit_test(test_pc6_scope),
        cmocka_unit_test(test_power_file_is_default),
        cmocka_unit_test(test_power_profiles),
        cmocka_unit_test(test_refill_served_below_demand),
        cmocka_unit_test(test_remote_memory_stall),
        cmocka_unit_test(test_smt_slowdown),
        cmocka_unit_test(test_residency_and_exit),
        cmocka_unit_test(test_remote_memory),
        cmocka_unit_test(test_oracle_delay),
        cmocka_unit_test(test_oracle_small_exact),
        cmocka_unit_test(test_oracle_pins),
        cmocka_unit_test(test_oracle_large_bound),
        cmocka_unit_test(test_oracle_capacity_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
