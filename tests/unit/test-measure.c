// SPDX-License-Identifier: MIT
/*
 * lib/measure.c: the statistics and the verdict of `vpackctl measure`. Every
 * expected figure is worked out by hand in the comment next to it.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vpack/measure.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static void test_t975(void **state)
{
    (void)state;
    assert_true(isinf(vpack_t975(0)));
    /* The table (NIST/SEMATECH 1.3.6.7.2). */
    assert_true(vpack_t975(1) == 12.706);
    assert_true(vpack_t975(2) == 4.303);
    assert_true(vpack_t975(30) == 2.042);
    /*
     * df 31 by A&S 26.7.5 with z = 1.959964, z^2 = 3.841459:
     * g1 = (z^2 + 1) z / 4 = 2.372273, / 31 = 0.076525;
     * g2 = ((5 z^2 + 16) z^2 + 3) z / 96 = 2.822500, / 961 = 0.002937;
     * g3 = (((3 z^2 + 19) z^2 + 17) z^2 - 15) z / 384 = 2.555850, / 29791 = 0.000086;
     * t = 1.959964 + 0.076525 + 0.002937 + 0.000086 = 2.039512 (tables: 2.0395).
     */
    assert_true(fabs(vpack_t975(31) - 2.039512) < 2e-6);
    /* The table's later rows, 3 decimals: 60 -> 2.000, 100 -> 1.984. */
    assert_true(fabs(vpack_t975(60) - 2.000) < 5e-4);
    assert_true(fabs(vpack_t975(100) - 1.984) < 5e-4);
    /* It only falls with df, towards the normal's 1.96. */
    for (unsigned df = 1; df < 200; df++)
        assert_true(vpack_t975(df + 1) < vpack_t975(df));
    assert_true(fabs(vpack_t975(100000) - 1.959964) < 1e-4);
}

static void test_interval(void **state)
{
    (void)state;
    struct vpack_interval iv;
    /*
     * 1..5: mean 3; squares about it 4 + 1 + 0 + 1 + 4 = 10; s = sqrt(10 / 4)
     * = 1.581139; s / sqrt(5) = 0.707107; half = 2.776 * 0.707107 = 1.962929.
     */
    const double x[] = {1, 2, 3, 4, 5};
    assert_int_equal(vpack_interval_of(x, 5, &iv), 0);
    assert_int_equal(iv.n, 5);
    assert_true(fabs(iv.mean - 3) < 1e-12);
    assert_true(fabs(iv.half - 1.962929) < 1e-6);
    assert_true(vpack_interval_excludes_zero(&iv)); /* 1.04 to 4.96 */
    /* One value bounds nothing; none is an error; so is a value that is not a number. */
    assert_int_equal(vpack_interval_of(x, 1, &iv), 0);
    assert_true(iv.mean == 1 && isinf(iv.half));
    assert_false(vpack_interval_excludes_zero(&iv));
    assert_int_equal(vpack_interval_of(x, 0, &iv), -EINVAL);
    const double bad[] = {1, NAN, 3}, inf[] = {1, INFINITY};
    assert_int_equal(vpack_interval_of(bad, 3, &iv), -EINVAL);
    assert_int_equal(vpack_interval_of(inf, 2, &iv), -EINVAL);
    /* Two equal values: no spread, half 0. */
    const double same[] = {0.25, 0.25};
    assert_int_equal(vpack_interval_of(same, 2, &iv), 0);
    assert_true(iv.half == 0 && iv.mean == 0.25);
    /* -1, 1: mean 0, s = sqrt(2), s / sqrt(2) = 1, half 12.706: holds 0. */
    const double pm[] = {-1, 1};
    assert_int_equal(vpack_interval_of(pm, 2, &iv), 0);
    assert_true(fabs(iv.half - 12.706) < 1e-9);
    assert_false(vpack_interval_excludes_zero(&iv));
}

static void test_ab(void **state)
{
    (void)state;
    struct vpack_ab ab;
    /*
     * a 10, 12, 11: mean 11, squares 1 + 1 + 0 = 2, s = 1, s / sqrt(3) =
     * 0.577350, half = 4.303 * 0.577350 = 2.484338. b 7, 8, 9: mean 8, the
     * same half. The two intervals (8.52 to 13.48, 5.52 to 10.48) overlap,
     * but the pairs' differences 3, 4, 2 (mean 3, half 2.484338 again: 0.52
     * to 5.48) do not hold 0: the pairing takes out what both rounds of a
     * pair share.
     */
    const double a[] = {10, 12, 11}, b[] = {7, 8, 9};
    assert_int_equal(vpack_ab_of(a, b, 3, &ab), 0);
    assert_true(fabs(ab.a.mean - 11) < 1e-12 && fabs(ab.a.half - 2.484338) < 1e-6);
    assert_true(fabs(ab.b.mean - 8) < 1e-12 && fabs(ab.b.half - 2.484338) < 1e-6);
    assert_true(fabs(ab.diff.mean - 3) < 1e-12 && fabs(ab.diff.half - 2.484338) < 1e-6);
    assert_int_equal(ab.diff.n, 3);
    assert_true(ab.a.mean - ab.a.half < ab.b.mean + ab.b.half);
    assert_true(vpack_interval_excludes_zero(&ab.diff));
    assert_int_equal(vpack_ab_of(a, b, 0, &ab), -EINVAL);
    const double nan_b[] = {7, NAN, 9};
    assert_int_equal(vpack_ab_of(a, nan_b, 3, &ab), -EINVAL);
}

static void test_idle_bounds(void **state)
{
    (void)state;
    double lo, hi;
    /* Idle 0.9 and 0.8: busy 0.1 + 0.2, so at least 0.7 whole-idle, at most 0.8. */
    const double two[] = {0.9, 0.8};
    vpack_package_idle_bounds(two, 2, &lo, &hi);
    assert_true(fabs(lo - 0.7) < 1e-12 && fabs(hi - 0.8) < 1e-12);
    /* Busy 0.5 + 0.6 > 1: nothing is certain, at most 0.4. */
    const double busy[] = {0.5, 0.4};
    vpack_package_idle_bounds(busy, 2, &lo, &hi);
    assert_true(lo == 0 && fabs(hi - 0.4) < 1e-12);
    /* One CPU: exact. */
    const double one[] = {0.3};
    vpack_package_idle_bounds(one, 1, &lo, &hi);
    assert_true(fabs(lo - 0.3) < 1e-12 && fabs(hi - 0.3) < 1e-12);
    vpack_package_idle_bounds(one, 0, &lo, &hi);
    assert_true(lo == 0 && hi == 0);
}

/* The file under $VPACK_TESTDATA, read whole (the caller frees it). */
static char *testdata(const char *name, size_t *len)
{
    char path[4096];
    const char *base = getenv("VPACK_TESTDATA");
    snprintf(path, sizeof(path), "%s/%s", base ? base : "tests/data", name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *buf = calloc(1, 1 << 16);
    assert_non_null(buf);
    *len = fread(buf, 1, (1 << 16) - 1, f);
    fclose(f);
    return buf;
}

static void test_cpuinfo(void **state)
{
    (void)state;
    struct vpack_cpu_model m;
    size_t len;
    /* This test machine's (tests/data/cpuinfo/README.md). */
    char *text = testdata("cpuinfo/amd-epyc-kvm.txt", &len);
    assert_int_equal(vpack_cpuinfo_model(text, len, &m), 0);
    assert_string_equal(m.vendor, "AuthenticAMD");
    assert_int_equal(m.family, 26);
    assert_int_equal(m.model, 2);
    assert_false(vpack_pc6_system_wide(&m));
    free(text);
    /*
     * The x86 kernel's format (arch/x86/kernel/cpu/proc.c: "vendor_id\t:
     * %s", "cpu family\t: %d", "model\t\t: %u", "model name\t: %s"): "model
     * name" is not "model"; only the first processor counts.
     */
    const char *spr = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n"
                      "model\t\t: 143\nmodel name\t: Intel(R) Xeon(R) Platinum 8462Y+\n"
                      "\nprocessor\t: 1\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n"
                      "model\t\t: 85\n";
    assert_int_equal(vpack_cpuinfo_model(spr, strlen(spr), &m), 0);
    assert_string_equal(m.vendor, "GenuineIntel");
    assert_int_equal(m.family, 6);
    assert_int_equal(m.model, 143);
    assert_true(vpack_pc6_system_wide(&m));
    /* Not a vendor: an error; a bad number is left unknown. */
    const char *none = "processor\t: 0\nmodel\t\t: 143\n";
    assert_int_equal(vpack_cpuinfo_model(none, strlen(none), &m), -EINVAL);
    const char *odd = "vendor_id : GenuineIntel\ncpu family : six\nmodel : 1434567\n";
    assert_int_equal(vpack_cpuinfo_model(odd, strlen(odd), &m), 0);
    assert_int_equal(m.family, -1);
    assert_int_equal(m.model, -1);
    assert_false(vpack_pc6_system_wide(&m));
    /* The Xeon list, and its neighbours that are not on it. */
    static const struct {
        const char *vendor;
        int family, model;
        bool wide;
    } cases[] = {
        {"GenuineIntel", 6, 85, true},   {"GenuineIntel", 6, 106, true},
        {"GenuineIntel", 6, 108, true},  {"GenuineIntel", 6, 143, true},
        {"GenuineIntel", 6, 173, true},  {"GenuineIntel", 6, 174, true},
        {"GenuineIntel", 6, 175, true},  {"GenuineIntel", 6, 207, true},
        {"GenuineIntel", 6, 151, false}, {"GenuineIntel", 15, 143, false},
        {"AuthenticAMD", 6, 143, false}, {"AuthenticAMD", 25, 17, false},
    };
    for (size_t i = 0; i < NELEM(cases); i++) {
        struct vpack_cpu_model c = {.family = cases[i].family, .model = cases[i].model};
        snprintf(c.vendor, sizeof(c.vendor), "%s", cases[i].vendor);
        assert_int_equal(vpack_pc6_system_wide(&c), cases[i].wide);
    }
}

/* A verdict and its words from energy rounds (NULL: no RAPL) and the idle rounds below. */
static char *verdict(const double *ea, const double *eb, const struct vpack_cpu_model *cpu,
                     struct vpack_verdict *v)
{
    /*
     * Package 0's whole-idle share at level 0 0.40, 0.45, 0.50, configured
     * 0.80, 0.75, 0.85: differences (level 0 minus configured) -0.40, -0.30,
     * -0.35, mean -0.35, squares 0.0025 + 0.0025 + 0 = 0.005, s = 0.05,
     * s / sqrt(3) = 0.028868, half = 4.303 * 0.028868 = 0.124217: packing
     * raised it by 35.0 ± 12.4 points. Package 1: 0.5 throughout, 0 ± 0.
     */
    static const double i0a[] = {0.40, 0.45, 0.50}, i0b[] = {0.80, 0.75, 0.85};
    static const double i1[] = {0.5, 0.5, 0.5};
    static const int ids[] = {0, 1};
    struct vpack_ab idle[2];
    struct vpack_verdict_in in = {.has_energy = ea != NULL, .cpu = cpu, .npackages = 2,
                                  .package_ids = ids, .idle = idle};
    assert_int_equal(vpack_ab_of(i0a, i0b, 3, &idle[0]), 0);
    assert_int_equal(vpack_ab_of(i1, i1, 3, &idle[1]), 0);
    if (ea)
        assert_int_equal(vpack_ab_of(ea, eb, 3, &in.energy_w), 0);
    in.pc6_system_wide = cpu && vpack_pc6_system_wide(cpu);
    vpack_verdict_decide(&in, v);
    char *text = vpack_verdict_text(&in, v);
    assert_non_null(text);
    return text;
}

static void test_verdict(void **state)
{
    (void)state;
    struct vpack_verdict v;
    struct vpack_cpu_model spr = {"GenuineIntel", 6, 143}, amd = {"AuthenticAMD", 26, 2};
    /* No RAPL (this machine): energy cannot be measured; the idle difference instead. */
    char *t = verdict(NULL, NULL, &amd, &v);
    assert_int_equal(v.kind, VPACK_VERDICT_NONE);
    assert_int_equal(v.why, VPACK_WHY_NO_ENERGY);
    assert_string_equal(t, "no measurable saving: energy cannot be measured here (no RAPL package "
                           "energy under /sys/class/powercap); the whole-package idle share, "
                           "configured minus level 0: package 0 +35.0 ± 12.4 points, package 1 "
                           "+0.0 ± 0.0 points");
    free(t);
    /* 100, 102, 101 W against 90, 91, 92: saving 10, 11, 9, mean 10, half 2.484338. */
    const double hi[] = {100, 102, 101}, lo[] = {90, 91, 92};
    t = verdict(hi, lo, &spr, &v);
    assert_int_equal(v.kind, VPACK_VERDICT_SAVED);
    assert_int_equal(v.why, 0); /* PC6's scope is no reason when a saving shows */
    assert_true(fabs(v.watts - 10) < 1e-12 && fabs(v.half - 2.484338) < 1e-6);
    assert_string_equal(t, "packing saved 10.0 ± 2.5 W here (95 % interval over 3 pairs of rounds)");
    free(t);
    /* The other way round: packing cost energy. */
    t = verdict(lo, hi, NULL, &v);
    assert_int_equal(v.kind, VPACK_VERDICT_COST);
    assert_true(fabs(v.watts + 10) < 1e-12);
    assert_string_equal(t, "packing cost 10.0 ± 2.5 W here (95 % interval over 3 pairs of rounds)");
    free(t);
    /*
     * 100, 90, 110 against 100 throughout: savings 0, -10, 10, mean 0,
     * squares 200, s = 10, s / sqrt(3) = 5.773503, half = 24.843383; level
     * 0's own interval the same, configured 0 wide.
     */
    const double wobbly[] = {100, 90, 110}, flat[] = {100, 100, 100};
    t = verdict(wobbly, flat, &amd, &v);
    assert_int_equal(v.kind, VPACK_VERDICT_NONE);
    assert_int_equal(v.why, VPACK_WHY_OVERLAP);
    assert_string_equal(t, "no measurable saving: the intervals overlap (level 0 100.0 ± 24.8 W, "
                           "configured 100.0 ± 0.0 W; saving 0.0 ± 24.8 W, which holds 0)");
    free(t);
    /* On a Xeon whose PC6 is system-wide, that is said too. */
    t = verdict(wobbly, flat, &spr, &v);
    assert_int_equal(v.why, VPACK_WHY_OVERLAP | VPACK_WHY_PC6_WIDE);
    assert_string_equal(t, "no measurable saving: the intervals overlap (level 0 100.0 ± 24.8 W, "
                           "configured 100.0 ± 0.0 W; saving 0.0 ± 24.8 W, which holds 0); PC6 is "
                           "system-wide on this platform (GenuineIntel family 6 model 143): a "
                           "parked package does not reach package C6 while another one is busy");
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_t975),      cmocka_unit_test(test_interval),
        cmocka_unit_test(test_ab),        cmocka_unit_test(test_idle_bounds),
        cmocka_unit_test(test_cpuinfo),   cmocka_unit_test(test_verdict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
