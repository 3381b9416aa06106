// SPDX-License-Identifier: MIT
/*
 * The policy-audit cases of issue 13 (tests/data/policy-audit/README.md),
 * one test each: the snapshots are replayed through vpack_plan_compute() with
 * the default parameters, as `vpackctl plan --snapshot FILE --topology SPEC
 * --json` does, and each test asserts exactly the property the README's table
 * states for its case.
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

#define EPS 1e-9
#define MAX_LINES 64

/* "T2".."T4" of the README: n packages of 4 one-thread cores. */
#define T(n) "synthetic:package:" #n " core:4 pu:1"

struct replay {
    struct vpack_topology *topo;
    struct vpack_snapshot *snaps[MAX_LINES];
    struct vpack_plan *plans[MAX_LINES];
    unsigned n;
};

static const char *env_path(const char *var, const char *rest, char *buf, size_t len)
{
    const char *base = getenv(var);

    if (!base || !*base)
        fail_msg("%s is not set (run through meson test)", var);
    snprintf(buf, len, "%s/%s", base, rest);
    return buf;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("%s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t cap = 0;
    *len = 0;
    for (;;) {
        if (cap - *len < 4096) {
            cap = cap * 2 + 4096;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        size_t got = fread(buf + *len, 1, cap - *len, f);
        if (got == 0)
            break;
        *len += got;
    }
    fclose(f);
    return buf;
}

/*
 * Replays the case file (in $VPACK_TESTDATA/policy-audit) on the topology
 * spec ("xml:" specs are relative to the hwloc fixtures) with reserved CPUs.
 */
static void replay(struct replay *r, const char *file, const char *spec, const char *reserved)
{
    char path[2048], xml[2100], rel[256];
    char *err = NULL;
    vpack_cpuset res;
    struct vpack_policy_params params;
    size_t len, off = 0;

    memset(r, 0, sizeof(*r));
    if (!strncmp(spec, "xml:", 4)) {
        snprintf(rel, sizeof(rel), "topologies/hwloc-xml/%s", spec + 4);
        snprintf(xml, sizeof(xml), "xml:%s", env_path("VPACK_FIXTURES", rel, path, sizeof(path)));
        spec = xml;
    }
    if (reserved)
        assert_int_equal(vpack_cpuset_parse(&res, reserved, NULL), 0);
    if (vpack_topology_load(spec, reserved ? &res : NULL, NULL, &r->topo, &err) < 0)
        fail_msg("%s: %s", spec, err ? err : "?");

    snprintf(rel, sizeof(rel), "policy-audit/%s", file);
    char *text = slurp(env_path("VPACK_TESTDATA", rel, path, sizeof(path)), &len);
    vpack_policy_params_default(&params);
    struct vpack_policy_state *st = vpack_policy_state_new();
    assert_non_null(st);
    while (off < len && r->n < MAX_LINES) {
        size_t end = 0, at = 0;
        int rc = vpack_snapshot_parse_first(text + off, len - off, &end, &at, &r->snaps[r->n], &err);
        if (rc == -ENODATA)
            break;
        if (rc < 0)
            fail_msg("%s line %u: %s", file, r->n + 1, err ? err : "?");
        rc = vpack_plan_compute(r->topo, &params, r->snaps[r->n], st, &r->plans[r->n]);
        if (rc < 0)
            fail_msg("%s line %u: vpack_plan_compute = %d", file, r->n + 1, rc);
        r->n++;
        off += end;
    }
    assert_true(r->n > 0);
    free(text);
    vpack_policy_state_free(st);
}

static void replay_free(struct replay *r)
{
    for (unsigned i = 0; i < r->n; i++) {
        vpack_plan_free(r->plans[i]);
        vpack_snapshot_free(r->snaps[i]);
    }
    vpack_topology_free(r->topo);
}

static vpack_cpuset pkg_cpus(const struct vpack_topology *t, int id)
{
    int i = vpack_topology_package_index(t, id);
    if (i < 0)
        fail_msg("no package %d", id);
    return t->packages[i].cpus;
}

static vpack_cpuset active_cpus(const struct vpack_topology *t, const struct vpack_plan *p)
{
    vpack_cpuset c;
    vpack_cpuset_zero(&c);
    for (unsigned i = 0; i < p->nactive; i++) {
        vpack_cpuset pc = pkg_cpus(t, p->active_packages[i]);
        vpack_cpuset_or(&c, &c, &pc);
    }
    return c;
}

/* Every mask of the domain (vCPUs, emulator, iothreads) lies within set. */
static void masks_within(const struct vpack_plan *p, const char *name, const vpack_cpuset *set,
                         unsigned line)
{
    const struct vpack_plan_domain *pd = plan_domain(p, name);
    bool ok = vpack_cpuset_subset(pd->emulator.cpus, set);
    for (unsigned i = 0; i < pd->nvcpus; i++)
        ok = ok && vpack_cpuset_subset(pd->vcpus[i].cpus, set);
    for (unsigned i = 0; i < pd->niothreads; i++)
        ok = ok && vpack_cpuset_subset(pd->iothreads[i].cpus, set);
    if (!ok)
        fail_msg("line %u: a mask of %s leaves the allowed CPUs: %s", line, name, plan_text(p));
}

static void active_is(const struct vpack_plan *p, const int *ids, unsigned n, unsigned line)
{
    bool ok = p->nactive == n;
    for (unsigned i = 0; i < n && ok; i++) {
        bool found = false;
        for (unsigned j = 0; j < p->nactive; j++)
            found = found || p->active_packages[j] == ids[i];
        ok = found;
    }
    if (!ok)
        fail_msg("line %u: wrong active packages: %s", line, plan_text(p));
}

static void packed_on_one(const struct vpack_plan *p, unsigned line)
{
    if (p->lifted || p->nactive != 1)
        fail_msg("line %u: want one active package, not lifted: %s", line, plan_text(p));
}

/* B1: web (2.4 CPUs) on one package, all its masks inside it. */
static void test_b1_domain_kept_whole(void **unused)
{
    (void)unused;
    struct replay r;
    replay(&r, "b1.json", T(3), NULL);
    const struct vpack_plan_domain *web = plan_domain(r.plans[0], "web");
    if (web->npackages != 1)
        fail_msg("web on %u packages: %s", web->npackages, plan_text(r.plans[0]));
    vpack_cpuset pc = pkg_cpus(r.topo, web->packages[0]);
    masks_within(r.plans[0], "web", &pc, 1);
    replay_free(&r);
}

/* B2, B2b: no active package carries more than 0.8 x its cores of confined threads. */
static void no_package_over_spread(const char *file, const char *spec)
{
    struct replay r;
    replay(&r, file, spec, NULL);
    for (unsigned l = 0; l < r.n; l++) {
        const struct vpack_plan *p = r.plans[l];
        const struct vpack_snapshot *s = r.snaps[l];
        if (p->lifted)
            continue;
        for (unsigned a = 0; a < p->nactive; a++) {
            const struct vpack_package *pkg =
                &r.topo->packages[vpack_topology_package_index(r.topo, p->active_packages[a])];
            double sum = 0;
            for (unsigned d = 0; d < s->ndomains; d++) {
                const struct vpack_plan_domain *pd = &p->domains[d];
                const struct vpack_domain_sample *sd = &s->domains[d];
                for (unsigned i = 0; i < sd->nvcpus; i++)
                    sum += vpack_cpuset_subset(pd->vcpus[i].cpus, &pkg->cpus) ? sd->vcpus[i].util : 0;
                for (unsigned i = 0; i < sd->niothreads; i++)
                    sum += vpack_cpuset_subset(pd->iothreads[i].cpus, &pkg->cpus) ? sd->iothreads[i].util : 0;
                sum += vpack_cpuset_subset(pd->emulator.cpus, &pkg->cpus) ? sd->emulator.util : 0;
            }
            if (sum > 0.8 * pkg->ncores + EPS)
                fail_msg("line %u: %.2f CPUs confined to package %d (%u cores): %s", l + 1, sum,
                         pkg->id, pkg->ncores, plan_text(p));
        }
    }
    replay_free(&r);
}

static void test_b2_light_load_shared(void **unused)
{
    (void)unused;
    no_package_over_spread("b2.jsonl", T(4));
}

static void test_b2b_smt_counts_cores(void **unused)
{
    (void)unused;
    no_package_over_spread("b13.json", "synthetic:package:8 core:4 pu:2");
}

/* B3: a held level 2 domain stays within the active packages. */
static void test_b3_held_stays_active(void **unused)
{
    (void)unused;
    struct replay r;
    replay(&r, "b3.jsonl", T(3), NULL);
    for (unsigned l = 0; l < r.n; l++) {
        vpack_cpuset act = active_cpus(r.topo, r.plans[l]);
        masks_within(r.plans[l], "lite", &act, l + 1);
    }
    replay_free(&r);
}

/* B4: a delay spread is given back once the delay has gone. */
static void test_b4_delay_spread_released(void **unused)
{
    (void)unused;
    struct replay r;
    replay(&r, "b4.jsonl", T(4), NULL);
    assert_int_equal(r.n, 37);
    packed_on_one(r.plans[r.n - 1], r.n);
    replay_free(&r);
}

/* B4p: the delay of a guest-pinned vCPU spreads nothing. */
static void test_b4p_pinned_delay_ignored(void **unused)
{
    (void)unused;
    struct replay r;
    replay(&r, "b4p.jsonl", T(4), NULL);
    for (unsigned l = 0; l < r.n; l++)
        packed_on_one(r.plans[l], l + 1);
    replay_free(&r);
}

/* B5: the package a cpuset binds a domain to stays awake; the other parks. */
static void test_b5_bound_decides(void **unused)
{
    (void)unused;
    struct replay r;
    const int one[] = {1};
    replay(&r, "b5.jsonl", T(2), NULL);
    active_is(r.plans[r.n - 1], one, 1, r.n);
    replay_free(&r);
}

/* B6: the package holding the memory wins. */
static void test_b6_memory_decides(void **unused)
{
    (void)unused;
    struct replay r;
    const int one[] = {1};
    replay(&r, "b8.json", "xml:32em64t-2n8c2t-pci-noio.xml", NULL);
    active_is(r.plans[0], one, 1, 1);
    replay_free(&r);
}

/* B7: asymmetric packages: the fewest that hold the load. */
static void test_b7_fewest_asymmetric(void **unused)
{
    (void)unused;
    struct replay r;
    replay(&r, "b7.json", "xml:16em64t-4s2c2t-offlines.xml", NULL);
    if (r.plans[0]->nactive != 1)
        fail_msg("want 1 active package: %s", plan_text(r.plans[0]));
    replay_free(&r);
}

static void test_b7s_reserved(void **unused)
{
    (void)unused;
    struct replay r;
    const int one[] = {1};
    replay(&r, "b7s.json", T(2), "0-2");
    packed_on_one(r.plans[0], 1);
    active_is(r.plans[0], one, 1, 1);
    replay_free(&r);
}

/* B8: a level 2 domain that fits where it runs stays there, I/O threads too. */
static void test_b8_domain_with_its_threads(void **unused)
{
    (void)unused;
    struct replay r;
    vpack_cpuset c;
    replay(&r, "b12.json", T(3), NULL);
    assert_int_equal(vpack_cpuset_parse(&c, "4-7", NULL), 0);
    masks_within(r.plans[0], "db", &c, 1);
    replay_free(&r);
}

/* B9: a busy thread pinned across packages keeps the package it runs on active. */
static void test_b9_pinned_span_awake(void **unused)
{
    (void)unused;
    struct replay r;
    replay(&r, "b11.json", T(2), NULL);
    bool found = false;
    for (unsigned i = 0; i < r.plans[0]->nactive; i++)
        found = found || r.plans[0]->active_packages[i] == 1;
    if (!found)
        fail_msg("package 1 reported parked: %s", plan_text(r.plans[0]));
    replay_free(&r);
}

/* B10: a vCPU hovering at busy_vcpu keeps its mask. */
static void test_b10_no_flapping(void **unused)
{
    (void)unused;
    struct replay r;
    replay(&r, "b10.jsonl", T(2), NULL);
    const vpack_cpuset *first = plan_domain(r.plans[0], "osc")->vcpus[0].cpus;
    for (unsigned l = 1; l < r.n; l++)
        if (!vpack_cpuset_equal(plan_domain(r.plans[l], "osc")->vcpus[0].cpus, first))
            fail_msg("line %u: vCPU 0 of osc changed mask: %s", l + 1, plan_text(r.plans[l]));
    replay_free(&r);
}

/* B11: a domain across several packages keeps them. */
static void test_b11_multi_package_stays(void **unused)
{
    (void)unused;
    struct replay r;
    replay(&r, "b17.jsonl", T(4), NULL);
    assert_int_equal(r.n, 4);
    const struct vpack_plan_domain *h1 = plan_domain(r.plans[1], "huge");
    for (unsigned l = 2; l < 4; l++) {
        const struct vpack_plan_domain *h = plan_domain(r.plans[l], "huge");
        bool same = h->npackages == h1->npackages;
        for (unsigned i = 0; i < h->npackages && same; i++) {
            bool found = false;
            for (unsigned j = 0; j < h1->npackages; j++)
                found = found || h1->packages[j] == h->packages[i];
            same = found;
        }
        if (!same)
            fail_msg("line %u: huge moved from its line 2 packages: %s", l + 1,
                     plan_text(r.plans[l]));
    }
    replay_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b1_domain_kept_whole),
        cmocka_unit_test(test_b2_light_load_shared),
        cmocka_unit_test(test_b2b_smt_counts_cores),
        cmocka_unit_test(test_b3_held_stays_active),
        cmocka_unit_test(test_b4_delay_spread_released),
        cmocka_unit_test(test_b4p_pinned_delay_ignored),
        cmocka_unit_test(test_b5_bound_decides),
        cmocka_unit_test(test_b6_memory_decides),
        cmocka_unit_test(test_b7_fewest_asymmetric),
        cmocka_unit_test(test_b7s_reserved),
        cmocka_unit_test(test_b8_domain_with_its_threads),
        cmocka_unit_test(test_b9_pinned_span_awake),
        cmocka_unit_test(test_b10_no_flapping),
        cmocka_unit_test(test_b11_multi_package_stays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
