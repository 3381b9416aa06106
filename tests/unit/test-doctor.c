// SPDX-License-Identifier: MIT
/*
 * vpackctl doctor's checks (lib/doctor.c) over facts built here, and the
 * facts read from fixture trees (adapters/doctor.c on tests/data/doctor/,
 * see its README): each tree must give its one finding, with its severity,
 * and no other finding that cancels.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"
#include "vpack/doctor.h"

/* ------------------------------------------------------------- helpers */

struct run {
    struct vpack_doctor_finding *v;
    size_t n;
};

static struct run check(const struct vpack_doctor_facts *f)
{
    struct run r;
    assert_int_equal(vpack_doctor_check(f, &r.v, &r.n), 0);
    return r;
}

/* The findings of one tree under $VPACK_TESTDATA/doctor. */
static struct run check_tree(const char *name)
{
    char root[4096];
    struct vpack_doctor_facts f;
    const char *dir = getenv("VPACK_TESTDATA");
    assert_non_null(dir);
    snprintf(root, sizeof(root), "%s/doctor/%s", dir, name);
    assert_int_equal(vpack_doctor_read(root, &f), 0);
    struct run r = check(&f);
    vpack_doctor_facts_clear(&f);
    return r;
}

/* The first finding of check with severity sev; fails the test when there is none. */
static const struct vpack_doctor_finding *want(const struct run *r, const char *name,
                                               enum vpack_doctor_severity sev)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->v[i].check, name) && r->v[i].severity == sev)
            return &r->v[i];
    for (size_t i = 0; i < r->n; i++)
        print_message("  %s %s: %s\n", vpack_doctor_severity_name(r->v[i].severity),
                      r->v[i].check, r->v[i].what);
    fail_msg("no %s finding of %s", vpack_doctor_severity_name(sev), name);
    return NULL;
}

/* How many findings have severity sev. */
static size_t count(const struct run *r, enum vpack_doctor_severity sev)
{
    size_t k = 0;
    for (size_t i = 0; i < r->n; i++)
        k += r->v[i].severity == sev;
    return k;
}

static void contains(const char *text, const char *part)
{
    if (!strstr(text, part))
        fail_msg("'%s' does not contain '%s'", text, part);
}

/* A warning or a cancel says why it matters and how to fix it. */
static void explained(const struct run *r)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].severity >= VPACK_DOCTOR_WARNING) {
            assert_true(r->v[i].why[0]);
            assert_true(r->v[i].fix[0]);
        }
}

/* Four CPUs on two packages, intel_idle with POLL, C1 and C6 everywhere. */
static void facts_2pkg(struct vpack_doctor_facts *f)
{
    static const struct vpack_doctor_cstate states[] = {
        {"POLL", 0, false}, {"C1", 2, false}, {"C6", 170, false}};
    *f = (struct vpack_doctor_facts){0};
    strcpy(f->driver, "intel_idle");
    strcpy(f->governor, "menu");
    f->ncpus = 4;
    f->cpus = calloc(4, sizeof(*f->cpus));
    assert_non_null(f->cpus);
    for (int i = 0; i < 4; i++) {
        f->cpus[i] = (struct vpack_doctor_cpu){.id = i, .package = i / 2,
                                               .qos = VPACK_QOS_NO_CONSTRAINT, .nstates = 3};
        f->cpus[i].states = malloc(sizeof(states));
        assert_non_null(f->cpus[i].states);
        memcpy(f->cpus[i].states, states, sizeof(states));
    }
    f->hook = VPACK_HOOK_OK;
}

/* ------------------------------------------------------- over facts */

static void test_parse_qos(void **state)
{
    enum vpack_doctor_qos q;
    unsigned us;
    (void)state;
    assert_int_equal(vpack_doctor_parse_qos("0\n", &q, &us), 0);
    assert_int_equal(q, VPACK_QOS_NO_CONSTRAINT);
    assert_int_equal(vpack_doctor_parse_qos("n/a", &q, &us), 0);
    assert_int_equal(q, VPACK_QOS_ZERO);
    assert_int_equal(vpack_doctor_parse_qos("20", &q, &us), 0);
    assert_int_equal(q, VPACK_QOS_LIMIT);
    assert_int_equal(us, 20);
    assert_int_equal(vpack_doctor_parse_qos("", &q, &us), -EINVAL);
    assert_int_equal(vpack_doctor_parse_qos("-1", &q, &us), -EINVAL);
    assert_int_equal(vpack_doctor_parse_qos("12x", &q, &us), -EINVAL);
}

/* Nothing wrong: every check is ok, and the worst is ok. */
static void test_clean_facts(void **state)
{
    struct vpack_doctor_facts f;
    (void)state;
    facts_2pkg(&f);
    struct run r = check(&f);
    assert_int_equal(vpack_doctor_worst(r.v, r.n), VPACK_DOCTOR_OK);
    want(&r, "c-states", VPACK_DOCTOR_OK);
    want(&r, "irq-affinity", VPACK_DOCTOR_OK);
    assert_int_equal(vpack_doctor_home_package(&f), 0);
    free(r.v);
    vpack_doctor_facts_clear(&f);
}

/*
 * Package C6's scope against pc6_scope: each of the four cases, over facts.
 * No CPU read: no finding.
 */
static void test_pc6_scope(void **state)
{
    static const struct {
        const char *vendor;
        int model;
        bool conf_system;
        enum vpack_doctor_severity sev;
        const char *what;
    } cases[] = {
        {"GenuineIntel", 143, true, VPACK_DOCTOR_OK, "model 143: package C6 is system-wide"},
        {"GenuineIntel", 143, false, VPACK_DOCTOR_WARNING, "but pc6_scope = package"},
        {"AuthenticAMD", 1, true, VPACK_DOCTOR_INFO, "not one Intel documents"},
        {"AuthenticAMD", 1, false, VPACK_DOCTOR_OK, "not known to be system-wide"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct vpack_doctor_facts f;
        facts_2pkg(&f);
        struct run r = check(&f);
        for (size_t k = 0; k < r.n; k++)
            assert_string_not_equal(r.v[k].check, "pc6-scope");
        free(r.v);
        f.cpu_known = true;
        snprintf(f.cpu.vendor, sizeof(f.cpu.vendor), "%s", cases[i].vendor);
        f.cpu.family = cases[i].vendor[0] == 'G' ? 6 : 25;
        f.cpu.model = cases[i].model;
        f.pc6_system_conf = cases[i].conf_system;
        snprintf(f.conf_note, sizeof(f.conf_note), "a note");
        r = check(&f);
        const struct vpack_doctor_finding *x = want(&r, "pc6-scope", cases[i].sev);
        contains(x->what, cases[i].what);
        contains(x->what, "(a note)");
        if (cases[i].sev == VPACK_DOCTOR_WARNING)
            contains(x->fix, "pc6_scope = system");
        explained(&r);
        free(r.v);
        vpack_doctor_facts_clear(&f);
    }
}

/* "n/a" on one CPU: no C-state at all there; a limit above C6's latency changes nothing. */
static void test_resume_qos(void **state)
{
    struct vpack_doctor_facts f;
    (void)state;
    facts_2pkg(&f);
    f.cpus[2].qos = VPACK_QOS_ZERO;
    struct run r = check(&f);
    contains(want(&r, "pm-qos-resume", VPACK_DOCTOR_CANCELS)->what, "CPUs 2");
    free(r.v);
    f.cpus[2].qos = VPACK_QOS_LIMIT;
    f.cpus[2].qos_us = 500;
    r = check(&f);
    want(&r, "pm-qos-resume", VPACK_DOCTOR_INFO);
    assert_int_equal(vpack_doctor_worst(r.v, r.n), VPACK_DOCTOR_INFO);
    free(r.v);
    vpack_doctor_facts_clear(&f);
}

/*
 * /dev/cpu_dma_latency: a limit below C6's latency cancels, one above does
 * not, an unknown one warns, and so does a scan that could not look at
 * every process.
 */
static void test_dma_latency(void **state)
{
    struct vpack_doctor_facts f;
    (void)state;
    facts_2pkg(&f);
    f.holders = calloc(1, sizeof(*f.holders));
    assert_non_null(f.holders);
    f.nholders = 1;
    f.holders[0] = (struct vpack_doctor_holder){.pid = 99, .comm = "qemu-rt"};
    struct run r = check(&f);
    contains(want(&r, "cpu-dma-latency", VPACK_DOCTOR_WARNING)->what, "qemu-rt (pid 99)");
    free(r.v);
    f.dma_limit_known = true;
    f.dma_limit_us = 100;
    r = check(&f);
    want(&r, "cpu-dma-latency", VPACK_DOCTOR_CANCELS);
    free(r.v);
    f.dma_limit_us = 2000000000; /* PM_QOS_DEFAULT_VALUE: no limit */
    r = check(&f);
    want(&r, "cpu-dma-latency", VPACK_DOCTOR_INFO);
    free(r.v);
    /* No holder seen, but not every process could be looked at (not root). */
    f.nholders = 0;
    f.procs_unreadable = 3;
    r = check(&f);
    contains(want(&r, "cpu-dma-latency", VPACK_DOCTOR_WARNING)->what, "3 processes");
    free(r.v);
    vpack_doctor_facts_clear(&f);
}

/* A merged tuned profile is read word by word; throughput warns; a stopped tuned only warns. */
static void test_tuned_words(void **state)
{
    struct vpack_doctor_facts f;
    (void)state;
    facts_2pkg(&f);
    f.tuned_running = true;
    strcpy(f.tuned_profile, "virtual-host network-latency");
    struct run r = check(&f);
    want(&r, "tuned", VPACK_DOCTOR_CANCELS);
    free(r.v);
    strcpy(f.tuned_profile, "throughput-performance");
    r = check(&f);
    want(&r, "tuned", VPACK_DOCTOR_WARNING);
    free(r.v);
    strcpy(f.tuned_profile, "my-latency-performance-ish");
    r = check(&f);
    want(&r, "tuned", VPACK_DOCTOR_OK);
    free(r.v);
    strcpy(f.tuned_profile, "latency-performance");
    f.tuned_running = false;
    r = check(&f);
    contains(want(&r, "tuned", VPACK_DOCTOR_WARNING)->what, "not running");
    free(r.v);
    vpack_doctor_facts_clear(&f);
}

/* libvirt before 6.5 runs no qemu.d hook; an unreachable daemon is only info. */
static void test_libvirt(void **state)
{
    struct vpack_doctor_facts f;
    (void)state;
    facts_2pkg(&f);
    f.libvirt_checked = true;
    f.libvirt_daemon = true;
    f.libvirt_version = 6004000;
    struct run r = check(&f);
    contains(want(&r, "libvirt", VPACK_DOCTOR_WARNING)->what, "6.4.0");
    free(r.v);
    f.libvirt_version = 9000000;
    f.libvirt_daemon = false;
    strcpy(f.libvirt_why, "connecting: no socket");
    r = check(&f);
    contains(want(&r, "libvirt", VPACK_DOCTOR_INFO)->what, "9.0.0");
    free(r.v);
    vpack_doctor_facts_clear(&f);
}

/* ------------------------------------------------------- on fixture trees */

static void test_tree_clean(void **state)
{
    (void)state;
    struct run r = check_tree("clean");
    /* Only the C-state counters, which a tree cannot have (perf reaches the live kernel). */
    assert_int_equal(vpack_doctor_worst(r.v, r.n), VPACK_DOCTOR_INFO);
    want(&r, "measure-cstate", VPACK_DOCTOR_INFO);
    want(&r, "measure-rapl", VPACK_DOCTOR_OK);
    contains(want(&r, "cgroup", VPACK_DOCTOR_OK)->what, "v1, libvirt's partition /machine");
    contains(want(&r, "c-states", VPACK_DOCTOR_OK)->what, "C6 (170 us)");
    want(&r, "hook", VPACK_DOCTOR_OK);
    contains(want(&r, "pc6-scope", VPACK_DOCTOR_OK)->what,
             "GenuineIntel family 6 model 106: package C6 is system-wide; pc6_scope = system "
             "(/etc/vpack/vpackd.conf)");
    /* IRQ 30 has no handler: not read. */
    contains(want(&r, "irq-affinity", VPACK_DOCTOR_OK)->what, "(2 read)");
    free(r.v);
}

static void test_tree_no_driver(void **state)
{
    (void)state;
    struct run r = check_tree("no-driver");
    contains(want(&r, "cpuidle-driver", VPACK_DOCTOR_CANCELS)->what, "none");
    assert_int_equal(count(&r, VPACK_DOCTOR_CANCELS), 1);
    explained(&r);
    free(r.v);
}

static void test_tree_c6_disabled(void **state)
{
    (void)state;
    struct run r = check_tree("c6-disabled");
    const struct vpack_doctor_finding *x = want(&r, "c-states", VPACK_DOCTOR_CANCELS);
    contains(x->what, "C6");
    contains(x->what, "CPUs 2-3");
    assert_int_equal(count(&r, VPACK_DOCTOR_CANCELS), 1);
    explained(&r);
    free(r.v);
}

static void test_tree_qos_hold(void **state)
{
    (void)state;
    struct run r = check_tree("qos-hold");
    contains(want(&r, "cpu-dma-latency", VPACK_DOCTOR_CANCELS)->what, "cyclictest (pid 4321): limit 0 us");
    contains(want(&r, "pm-qos-resume", VPACK_DOCTOR_CANCELS)->what, "CPUs 3 to 20 us");
    assert_int_equal(count(&r, VPACK_DOCTOR_CANCELS), 2);
    explained(&r);
    free(r.v);
}

static void test_tree_tuned_latency(void **state)
{
    (void)state;
    struct run r = check_tree("tuned-latency");
    contains(want(&r, "tuned", VPACK_DOCTOR_CANCELS)->what, "latency-performance");
    contains(want(&r, "cpu-dma-latency", VPACK_DOCTOR_CANCELS)->what, "tuned (pid 812): limit 2 us");
    explained(&r);
    free(r.v);
}

static void test_tree_irq_pkg1(void **state)
{
    (void)state;
    struct run r = check_tree("irq-pkg1");
    const struct vpack_doctor_finding *x = want(&r, "irq-affinity", VPACK_DOCTOR_WARNING);
    contains(x->what, "2 IRQs only on package 1");
    contains(x->what, "26 (nvme0q1)");
    contains(x->what, "27 (eth0-rx-1)"); /* effective CPU 3, though 0-3 allowed */
    contains(want(&r, "irqbalance", VPACK_DOCTOR_WARNING)->fix, "IRQBALANCE_BANNED_CPULIST=2-3");
    want(&r, "hook", VPACK_DOCTOR_WARNING);
    assert_int_equal(count(&r, VPACK_DOCTOR_CANCELS), 0);
    explained(&r);
    free(r.v);
}

static void test_tree_pc6_wide(void **state)
{
    (void)state;
    struct run r = check_tree("pc6-wide");
    const struct vpack_doctor_finding *x = want(&r, "pc6-scope", VPACK_DOCTOR_WARNING);
    contains(x->what, "model 106: package C6 is system-wide, but pc6_scope = package");
    contains(x->what, "/etc/vpack/vpackd.conf: No such file or directory, so the default");
    contains(x->fix, "pc6_scope = system under [policy] in /etc/vpack/vpackd.conf");
    assert_int_equal(count(&r, VPACK_DOCTOR_CANCELS), 0);
    explained(&r);
    free(r.v);
}

static void test_tree_missing(void **state)
{
    struct vpack_doctor_facts f;
    (void)state;
    assert_int_equal(vpack_doctor_read("/nonexistent-vpack-root", &f), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_qos),
        cmocka_unit_test(test_clean_facts),
        cmocka_unit_test(test_resume_qos),
        cmocka_unit_test(test_pc6_scope),
        cmocka_unit_test(test_dma_latency),
        cmocka_unit_test(test_tuned_words),
        cmocka_unit_test(test_libvirt),
        cmocka_unit_test(test_tree_clean),
        cmocka_unit_test(test_tree_no_driver),
        cmocka_unit_test(test_tree_c6_disabled),
        cmocka_unit_test(test_tree_qos_hold),
        cmocka_unit_test(test_tree_tuned_latency),
        cmocka_unit_test(test_tree_irq_pkg1),
        cmocka_unit_test(test_tree_pc6_wide),
        cmocka_unit_test(test_tree_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
