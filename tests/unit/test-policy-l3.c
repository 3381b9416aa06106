// SPDX-License-Identifier: MIT
/*
 * L3 caches as the next level of packing (rule 9 of vpack/policy.h): the
 * topology's per-cache CPU sets (hwloc XML and synthetic "l3" levels), and a
 * domain kept in the fewest L3 caches of its package that hold it.
 *
 * L4 below is synthetic "package:2 l3:4 core:4 pu:1": package k is CPUs
 * 16k..16k+15, its cache j CPUs 16k+4j..16k+4j+3, 4 cores each: one cache
 * holds 2.4 CPUs under the pack watermark and 3.2 under the spread one.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vpack/cpuset.h"
#include "vpack/policy.h"
#include "vpack/snapshot.h"
#include "vpack/topology.h"

#include "policy-test-util.h"

#define L4 "synthetic:package:2 l3:4 core:4 pu:1"

static struct vpack_topology *load(const char *spec)
{
    struct vpack_topology *t = NULL;
    char *err = NULL, path[1024];

    if (!strncmp(spec, "xml:", 4)) {
        const char *base = getenv("VPACK_FIXTURES");
        if (!base || !*base)
            fail_msg("VPACK_FIXTURES is not set (run through meson test)");
        snprintf(path, sizeof(path), "xml:%s/topologies/hwloc-xml/%s", base, spec + 4);
        spec = path;
    }
    if (vpack_topology_load(spec, NULL, NULL, &t, &err) < 0)
        fail_msg("%s: %s", spec, err ? err : "?");
    return t;
}

static struct vpack_snapshot *parse(const char *json)
{
    struct vpack_snapshot *s = NULL;
    char *err = NULL;
    if (vpack_snapshot_parse(json, strlen(json), &s, &err) < 0)
        fail_msg("snapshot: %s", err ? err : "?");
    return s;
}

/* One snapshot planned from a fresh state on a topology. */
struct l3case {
    struct vpack_topology *t;
    struct vpack_snapshot *s;
    struct vpack_plan *p;
};

/* How many L3 caches of the topology the set meets. */
static unsigned caches_met(const struct vpack_topology *t, const vpack_cpuset *set)
{
    unsigned n = 0;
    for (unsigned p = 0; p < t->npackages; p++)
        for (unsigned k = 0; k < t->packages[p].nl3; k++)
            n += vpack_cpuset_intersects(&t->packages[p].l3[k].cpus, set);
    return n;
}

/* Every mask of the domain but its light level-1 vCPUs (util < 0.5) meets n caches. */
static void assert_caches(const struct l3case *c, const char *name, unsigned n)
{
    const struct vpack_topology *t = c->t;
    const struct vpack_snapshot *s = c->s;
    const struct vpack_plan *p = c->p;
    const struct vpack_plan_domain *pd = plan_domain(p, name);
    const struct vpack_domain_sample *d = NULL;
    for (unsigned i = 0; i < s->ndomains; i++)
        if (!strcmp(s->domains[i].name, name))
            d = &s->domains[i];
    assert_non_null(d);
    if (caches_met(t, pd->emulator.cpus) != n || vpack_cpuset_count(pd->emulator.cpus) != 4 * n)
        fail_msg("%s: emulator on %u caches, want %u: %s", name, caches_met(t, pd->emulator.cpus),
                 n, plan_text(p));
    for (unsigned i = 0; i < pd->nvcpus; i++)
        if ((d->level >= 2 || d->vcpus[i].util >= 0.5) &&
            !vpack_cpuset_equal(pd->vcpus[i].cpus, pd->emulator.cpus))
            fail_msg("%s: vCPU %u not with the emulator: %s", name, i, plan_text(p));
}

static void case_run(struct l3case *c, const char *spec, const char *json)
{
    struct vpack_policy_params par;
    struct vpack_policy_state *st = vpack_policy_state_new();

    assert_non_null(st);
    vpack_policy_params_default(&par);
    c->t = load(spec);
    c->s = parse(json);
    c->p = NULL;
    assert_int_equal(vpack_plan_compute(c->t, &par, c->s, st, &c->p), 0);
    vpack_policy_state_free(st);
}

static void case_free(struct l3case *c)
{
    vpack_plan_free(c->p);
    vpack_snapshot_free(c->s);
    vpack_topology_free(c->t);
}

/* The topology keeps each cache's CPUs and cores, from hwloc XML and from synthetic specs. */
static void test_topology_l3(void **unused)
{
    (void)unused;
    struct vpack_topology *t = load(L4);
    char buf[64];

    assert_int_equal(t->npackages, 2);
    for (unsigned p = 0; p < 2; p++) {
        assert_int_equal(t->packages[p].nl3, 4);
        for (unsigned k = 0; k < 4; k++) {
            vpack_cpuset_format_buf(&t->packages[p].l3[k].cpus, buf, sizeof(buf));
            char want[32];
            snprintf(want, sizeof(want), "%u-%u", 16 * p + 4 * k, 16 * p + 4 * k + 3);
            assert_string_equal(buf, want);
            assert_int_equal(t->packages[p].l3[k].ncores, 4);
        }
    }
    assert_int_equal(vpack_topology_l3_of(t, 0), 0);
    assert_int_equal(vpack_topology_l3_of(t, 21), 1);
    assert_int_equal(vpack_topology_l3_of(t, 99), -1);
    vpack_topology_free(t);

    /* AMD EPYC 7763: 8 caches of 8 cores per package. */
    t = load("xml:AMD-19h-Zen3-2xEpyc-7763.output");
    assert_int_equal(t->npackages, 2);
    assert_int_equal(t->packages[1].nl3, 8);
    vpack_cpuset_format_buf(&t->packages[1].l3[2].cpus, buf, sizeof(buf));
    assert_string_equal(buf, "80-87");
    assert_int_equal(t->packages[1].l3[2].ncores, 8);
    assert_int_equal(vpack_topology_l3_of(t, 85), 2);
    vpack_topology_free(t);

    /* EPYC 7451 with SMT: caches of 3 cores, 6 PUs (siblings n and n+48). */
    t = load("xml:AMD-17h-Zen-2xEpyc-7451.output");
    assert_int_equal(t->packages[0].nl3, 8);
    vpack_cpuset_format_buf(&t->packages[0].l3[0].cpus, buf, sizeof(buf));
    assert_string_equal(buf, "0-2,48-50");
    assert_int_equal(t->packages[0].l3[0].ncores, 3);
    vpack_topology_free(t);

    /* No L3 in the file: no caches, no cache of any CPU. */
    t = load("xml:16amd64-8n2c-cpusets.xml");
    for (unsigned p = 0; p < t->npackages; p++) {
        assert_int_equal(t->packages[p].nl3, 0);
        assert_null(t->packages[p].l3);
    }
    assert_int_equal(vpack_topology_l3_of(t, 0), -1);
    vpack_topology_free(t);
}

/* A domain that fits one cache is kept in one, though its vCPUs ran in three. */
static void test_fits_one_cache(void **unused)
{
    (void)unused;
    struct l3case c;
    case_run(&c, L4,
        "{\"interval_ms\": 1000, \"cpus\": {\"0\": 0.8, \"5\": 0.8, \"10\": 0.8},"
        " \"domains\": [{\"name\": \"web\", \"level\": 1,"
        " \"vcpus\": [{\"id\": 0, \"util\": 0.8, \"cpu\": 0}, {\"id\": 1, \"util\": 0.8, \"cpu\": 5},"
        " {\"id\": 2, \"util\": 0.8, \"cpu\": 10}], \"emulator\": {\"util\": 0.02}}]}");
    assert_int_equal(c.p->nactive, 1);
    assert_caches(&c, "web", 1);
    if (!strstr(plan_domain(c.p, "web")->reason, "L3 cache"))
        fail_msg("the reason does not say which cache: %s", plan_domain(c.p, "web")->reason);
    case_free(&c);
}

/* Too big for one cache: the fewest that hold it (2 of 4), not the whole package. */
static void test_fewest_caches(void **unused)
{
    (void)unused;
    struct l3case c;
    case_run(&c, L4,
        "{\"interval_ms\": 1000, \"cpus\": {},"
        " \"domains\": [{\"name\": \"big\", \"level\": 2,"
        " \"vcpus\": [{\"id\": 0, \"util\": 0.9}, {\"id\": 1, \"util\": 0.9}, {\"id\": 2, \"util\": 0.9},"
        " {\"id\": 3, \"util\": 0.9}, {\"id\": 4, \"util\": 0.9}, {\"id\": 5, \"util\": 0.9},"
        " {\"id\": 6, \"util\": 0.1}], \"emulator\": {\"util\": 0.05}}]}");
    assert_caches(&c, "big", 2);
    case_free(&c);
}

/* Two domains that do not fit one cache together: one cache each. */
static void test_two_domains_two_caches(void **unused)
{
    (void)unused;
    struct l3case c;
    case_run(&c, L4,
        "{\"interval_ms\": 1000, \"cpus\": {},"
        " \"domains\": [{\"name\": \"a\", \"level\": 1,"
        " \"vcpus\": [{\"id\": 0, \"util\": 1.0}, {\"id\": 1, \"util\": 1.0}]},"
        " {\"name\": \"b\", \"level\": 1,"
        " \"vcpus\": [{\"id\": 0, \"util\": 1.0}, {\"id\": 1, \"util\": 1.0}]}]}");
    assert_int_equal(c.p->nactive, 1);
    assert_caches(&c, "a", 1);
    assert_caches(&c, "b", 1);
    if (vpack_cpuset_intersects(plan_domain(c.p, "a")->emulator.cpus,
                                plan_domain(c.p, "b")->emulator.cpus))
        fail_msg("a and b share a cache they do not fit together: %s", plan_text(c.p));
    case_free(&c);
}

/* On an EPYC 7763 host: a 3.6-CPU domain in one 8-core cache. */
static void test_epyc_cache(void **unused)
{
    (void)unused;
    struct l3case c;
    case_run(&c, "xml:AMD-19h-Zen3-2xEpyc-7763.output",
        "{\"interval_ms\": 1000, \"cpus\": {},"
        " \"domains\": [{\"name\": \"db\", \"level\": 1,"
        " \"vcpus\": [{\"id\": 0, \"util\": 0.9, \"cpu\": 3}, {\"id\": 1, \"util\": 0.9, \"cpu\": 12},"
        " {\"id\": 2, \"util\": 0.9, \"cpu\": 20}, {\"id\": 3, \"util\": 0.9, \"cpu\": 33}],"
        " \"emulator\": {\"util\": 0.02}, \"iothreads\": [{\"id\": 1, \"util\": 0.3}]}]}");
    const struct vpack_plan_domain *pd = plan_domain(c.p, "db");
    if (caches_met(c.t, pd->emulator.cpus) != 1 || vpack_cpuset_count(pd->emulator.cpus) != 8)
        fail_msg("db not in one cache: %s", plan_text(c.p));
    for (unsigned i = 0; i < pd->nvcpus; i++)
        assert_true(vpack_cpuset_equal(pd->vcpus[i].cpus, pd->emulator.cpus));
    assert_true(vpack_cpuset_equal(pd->iothreads[0].cpus, pd->emulator.cpus));
    case_free(&c);
}

/* A constant input keeps the domain's cache: its threads run where the last plan put them. */
static void test_cache_sticky(void **unused)
{
    (void)unused;
    struct vpack_topology *t = load(L4);
    struct vpack_policy_params par;
    struct vpack_policy_state *st = vpack_policy_state_new();
    vpack_cpuset first;
    int cpu = 13;

    assert_non_null(st);
    vpack_policy_params_default(&par);
    vpack_cpuset_zero(&first);
    for (unsigned k = 0; k < 90; k++) {
        char json[512];
        struct vpack_plan *p = NULL;
        snprintf(json, sizeof(json),
                 "{\"interval_ms\": 1000, \"cpus\": {\"%d\": 1.0, \"%d\": 0.9},"
                 " \"domains\": [{\"name\": \"w\", \"level\": 2,"
                 " \"vcpus\": [{\"id\": 0, \"util\": 1.0, \"cpu\": %d},"
                 " {\"id\": 1, \"util\": 0.9, \"cpu\": %d}]}]}",
                 cpu, cpu + 1, cpu, cpu + 1);
        struct vpack_snapshot *s = parse(json);
        assert_int_equal(vpack_plan_compute(t, &par, s, st, &p), 0);
        const vpack_cpuset *m = plan_domain(p, "w")->vcpus[0].cpus;
        assert_int_equal(caches_met(t, m), 1);
        if (k == 0)
            first = *m;
        else if (!vpack_cpuset_equal(m, &first))
            fail_msg("interval %u: w changed cache: %s", k, plan_text(p));
        cpu = vpack_cpuset_first(m);
        vpack_plan_free(p);
        vpack_snapshot_free(s);
    }
    vpack_policy_state_free(st);
    vpack_topology_free(t);
}

/* A domain across packages and a lifted plan are not narrowed to caches. */
static void test_no_cache_when_across(void **unused)
{
    (void)unused;
    struct l3case c;
    char json[2048];
    size_t off = (size_t)snprintf(json, sizeof(json),
                                  "{\"interval_ms\": 1000, \"cpus\": {}, \"domains\": "
                                  "[{\"name\": \"huge\", \"level\": 1, \"vcpus\": [");
    for (unsigned i = 0; i < 16; i++)
        off += (size_t)snprintf(json + off, sizeof(json) - off, "%s{\"id\": %u, \"util\": 0.95}",
                                i ? ", " : "", i);
    snprintf(json + off, sizeof(json) - off, "]}]}");
    case_run(&c, L4, json);
    const struct vpack_plan_domain *pd = plan_domain(c.p, "huge");
    assert_true(c.p->lifted || pd->npackages > 1);
    assert_true(vpack_cpuset_count(pd->emulator.cpus) >= 16);
    case_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topology_l3),
        cmocka_unit_test(test_fits_one_cache),
        cmocka_unit_test(test_fewest_caches),
        cmocka_unit_test(test_two_domains_two_caches),
        cmocka_unit_test(test_epyc_cache),
        cmocka_unit_test(test_cache_sticky),
        cmocka_unit_test(test_no_cache_when_across),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
