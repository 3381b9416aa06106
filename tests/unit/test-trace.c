// SPDX-License-Identifier: MIT
/*
 * Traces (lib/sim/trace.c): the line reader's errors, the recorder's conversion
 * and the PlanetLab builder, on inline lines and on the PlanetLab files in
 * tests/data/planetlab (see its README).
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

#include "vpack/snapshot.h"
#include "vpack/trace.h"

#define EPS 1e-9

/* Parses text as line lineno; returns the error (0 on success) and the message. */
static int parse(const char *text, unsigned long lineno, struct vpack_snapshot **s, char **err)
{
    *err = NULL;
    return vpack_trace_parse_line(text, strlen(text), lineno, s, err);
}

static void expect_error(const char *text, unsigned long lineno, const char *part1,
                         const char *part2)
{
    struct vpack_snapshot *s = NULL;
    char *err = NULL;
    int r = parse(text, lineno, &s, &err);

    if (r != -EINVAL || !err || !strstr(err, part1) || (part2 && !strstr(err, part2)))
        fail_msg("'%s': got %d '%s', expected '%s' ... '%s'", text, r, err ? err : "(none)", part1,
                 part2 ? part2 : "");
    assert_null(s);
    free(err);
}

static void test_good_line(void **state)
{
    struct vpack_snapshot *s = NULL;
    char *err = NULL;

    (void)state;
    assert_int_equal(parse("{\"interval_ms\":500,\"cpus\":{},\"domains\":[{\"name\":\"a\",\"level\":2,"
                           "\"cpuset\":\"0-3\",\"vcpus\":[{\"id\":0,\"util\":0.5,\"pin\":\"1\"}],"
                           "\"memory\":{\"0\":1}}]}  \r\n",
                           1, &s, &err),
                     0);
    assert_null(err);
    assert_int_equal(s->interval_ms, 500);
    assert_int_equal(s->ndomains, 1);
    assert_int_equal(s->domains[0].level, 2);
    assert_float_equal(s->domains[0].vcpus[0].util, 0.5, EPS);
    assert_non_null(s->domains[0].vcpus[0].pin);
    assert_non_null(s->domains[0].cpuset);
    assert_int_equal(s->domains[0].nmemory, 1);
    vpack_snapshot_free(s);
    assert_int_equal(parse(" \t\r\n", 9, &s, &err), -ENODATA);
    assert_null(s);
    assert_null(err);
}

static void test_bad_lines(void **state)
{
    (void)state;
    expect_error("{\"interval_ms\":1000,", 3, "line 3", "JSON");
    expect_error("nonsense", 4, "line 4, column ", "invalid JSON");
    expect_error("{\"interval_ms\":1000,\"cpus\":{}}", 5, "line 5", "domains");
    expect_error("{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\","
                 "\"vcpus\":[{\"id\":0,\"util\":1.5}]}]}",
                 7, "line 7: domain 'a'", "demands 1.5 CPUs");
    expect_error("{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\","
                 "\"vcpus\":[{\"id\":0,\"util\":-1}]}]}",
                 8, "line 8", "util");
    expect_error("{\"interval_ms\":1000,\"cpus\":{},\"domains\":[{\"name\":\"a\",\"vcpus\":[]},"
                 "{\"name\":\"a\",\"vcpus\":[]}]}",
                 9, "line 9", "duplicate domain name");
    expect_error("{\"interval_ms\":1000,\"cpus\":{},\"domains\":[]} {}", 10, "line 10, column 45",
                 "one interval per line");
}

static void test_from_observed(void **state)
{
    struct vpack_snapshot *s = NULL;
    char *err = NULL;

    (void)state;
    assert_int_equal(parse("{\"interval_ms\":1000,\"cpus\":{\"0\":0.5},\"domains\":[{\"name\":\"a\","
                           "\"vcpus\":[{\"id\":0,\"util\":0.3,\"delay\":0.2,\"cpu\":0},"
                           "{\"id\":1,\"util\":0.9,\"delay\":0.4}],\"emulator\":{\"util\":0.1}}]}",
                           1, &s, &err),
                     0);
    vpack_trace_from_observed(s);
    assert_float_equal(s->domains[0].vcpus[0].util, 0.5, EPS);
    assert_float_equal(s->domains[0].vcpus[0].delay, 0, EPS);
    assert_int_equal(s->domains[0].vcpus[0].cpu, -1);
    assert_float_equal(s->domains[0].vcpus[1].util, 1.0, EPS);
    assert_float_equal(s->domains[0].emulator.util, 0.1, EPS);
    vpack_snapshot_free(s);
}

static void test_planetlab_parse(void **state)
{
    double *v = NULL;
    char *err = NULL;

    (void)state;
    assert_int_equal(vpack_planetlab_parse("10\n\n 20.5 \n0\n", 12, &v, &err), 3);
    assert_float_equal(v[1], 20.5, EPS);
    free(v);
    assert_int_equal(vpack_planetlab_parse("10\nabc\n", 7, &v, &err), -EINVAL);
    assert_non_null(strstr(err, "line 2"));
    assert_null(v);
    free(err);
    assert_int_equal(vpack_planetlab_parse("150\n", 4, &v, &err), -EINVAL);
    assert_non_null(strstr(err, "line 1: '150'"));
    free(err);
    assert_int_equal(vpack_planetlab_parse("\n\n", 2, &v, &err), -EINVAL);
    free(err);
}

/* A real file: 288 readings. */
static void test_planetlab_file(void **state)
{
    const char *dir = getenv("VPACK_TESTDATA");
    char path[4096], buf[8192], *err = NULL;
    double *v = NULL;
    size_t n;
    FILE *f;

    (void)state;
    assert_non_null(dir);
    snprintf(path, sizeof(path), "%s/planetlab/20110303/147-179_surfsnel_dsl_internl_net_uw_oneswarm",
             dir);
    f = fopen(path, "r");
    if (!f)
        fail_msg("%s: %s", path, strerror(errno));
    n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    assert_int_equal(vpack_planetlab_parse(buf, n, &v, &err), 288);
    assert_float_equal(v[0], 0, EPS);
    assert_float_equal(v[1], 2, EPS);
    free(v);
}

static void test_planetlab_pick(void **state)
{
    unsigned a[100], b[100], c[100];

    (void)state;
    vpack_planetlab_pick(1052, 100, 1, a);
    vpack_planetlab_pick(1052, 100, 1, b);
    vpack_planetlab_pick(1052, 100, 2, c);
    assert_memory_equal(a, b, sizeof(a));
    assert_memory_not_equal(a, c, sizeof(a));
    for (unsigned i = 1; i < 100; i++)
        assert_true(a[i] > a[i - 1]);
    assert_true(a[99] < 1052);
    /* All of them when n = nfiles. */
    vpack_planetlab_pick(5, 5, 7, a);
    for (unsigned i = 0; i < 5; i++)
        assert_int_equal(a[i], i);
    assert_int_equal(vpack_planetlab_vcpus(1, 3), vpack_planetlab_vcpus(1, 3));
    {
        unsigned count[5] = {0};
        for (unsigned i = 0; i < 1000; i++)
            count[vpack_planetlab_vcpus(9, i)]++;
        assert_int_equal(count[0] + count[3], 0);
        assert_true(count[1] > 300 && count[1] < 500);
        assert_true(count[4] > 170 && count[4] < 330);
    }
}

static void build(struct vpack_planetlab *pl, double burst)
{
    static double r0[] = {0, 100, 40}, r1[] = {50};
    static char n0[] = "vm0", n1[] = "vm1";
    static struct vpack_planetlab_vm vms[2];

    vms[0] = (struct vpack_planetlab_vm){.name = n0, .nvcpus = 2, .nreadings = 3, .pct = r0};
    vms[1] = (struct vpack_planetlab_vm){.name = n1, .nvcpus = 1, .nreadings = 1, .pct = r1};
    *pl = (struct vpack_planetlab){.nvms = 2, .vms = vms, .interval_ms = 1000, .reading_ms = 300000,
                                   .burst = burst, .interpolate = 1, .level = 2, .seed = 42};
}

static void test_planetlab_snapshot(void **state)
{
    struct vpack_planetlab pl;
    struct vpack_snapshot *s = NULL;

    (void)state;
    build(&pl, 0);
    assert_int_equal(vpack_planetlab_intervals(&pl), 900);
    /* Half way from 0 to 100 percent: 0.5 CPUs over 2 vCPUs. */
    assert_int_equal(vpack_planetlab_snapshot(&pl, 150, &s), 0);
    assert_int_equal(s->ndomains, 2);
    assert_string_equal(s->domains[0].name, "vm0");
    assert_int_equal(s->domains[0].level, 2);
    assert_int_equal(s->domains[0].nvcpus, 2);
    assert_float_equal(s->domains[0].vcpus[0].util, 0.25, EPS);
    assert_float_equal(s->domains[0].vcpus[1].util, 0.25, EPS);
    assert_float_equal(s->domains[1].vcpus[0].util, 0.5, EPS);
    vpack_snapshot_free(s);
    /* Held after the last reading. */
    assert_int_equal(vpack_planetlab_snapshot(&pl, 899, &s), 0);
    assert_float_equal(s->domains[0].vcpus[0].util, 0.2, EPS);
    vpack_snapshot_free(s);
    pl.interpolate = 0;
    assert_int_equal(vpack_planetlab_snapshot(&pl, 450, &s), 0);
    assert_float_equal(s->domains[0].vcpus[0].util, 0.5, EPS);
    vpack_snapshot_free(s);
}

/* The burst model: the same seed gives the same trace, called again or replayed. */
static void test_planetlab_burst(void **state)
{
    struct vpack_planetlab pl;
    struct vpack_snapshot *a = NULL, *b = NULL;
    double first = 0;
    bool differs = false;

    (void)state;
    build(&pl, 0.5);
    for (unsigned long k = 0; k < 2000; k++) {
        assert_int_equal(vpack_planetlab_snapshot(&pl, k, &a), 0);
        if (k < 50) {
            assert_int_equal(vpack_planetlab_snapshot(&pl, k, &b), 0);
            assert_float_equal(a->domains[1].vcpus[0].util, b->domains[1].vcpus[0].util, 0);
            vpack_snapshot_free(b);
        }
        if (k == 7)
            first = a->domains[1].vcpus[0].util;
        assert_true(a->domains[1].vcpus[0].util <= 1.0);
        differs = differs || fabs(a->domains[1].vcpus[0].util - 0.5) > 0.01;
        vpack_snapshot_free(a);
    }
    assert_true(differs);
    /* Going back replays from the start: the same interval 7. */
    assert_int_equal(vpack_planetlab_snapshot(&pl, 7, &a), 0);
    assert_float_equal(a->domains[1].vcpus[0].util, first, 0);
    vpack_snapshot_free(a);
}

/* Three VMs of 1, 2 and 4 vCPUs, readings held, changing every reading; n intervals' worth. */
#define LONG_READINGS 1400
static void build_long(struct vpack_planetlab *pl, double burst, double tau,
                       enum vpack_vcpu_split split)
{
    static double pct[3][LONG_READINGS];
    static char names[3][8] = {"a", "b", "c"};
    static struct vpack_planetlab_vm vms[3];

    for (unsigned v = 0; v < 3; v++) {
        for (unsigned i = 0; i < LONG_READINGS; i++)
            pct[v][i] = 5 + 10.0 * ((i * (v + 3)) % 7) + 5 * v; /* 5 % to 75 % */
        vms[v] = (struct vpack_planetlab_vm){.name = names[v], .nvcpus = v == 0 ? 1 : 2 * v,
                                             .nreadings = LONG_READINGS, .pct = pct[v]};
    }
    *pl = (struct vpack_planetlab){.nvms = 3, .vms = vms, .interval_ms = 1000,
                                   .reading_ms = 300000, .burst = burst, .burst_tau = tau,
                                   .split = split, .interpolate = 0, .level = 0, .seed = 7};
}

/* Every vCPU's demand over intervals 0..n-1, in CPUs; *end: the work carried past the last. */
static double total_demand(struct vpack_planetlab *pl, unsigned long n, double *end)
{
    double sum = 0, last = 0;

    for (unsigned long k = 0; k < n; k++) {
        struct vpack_snapshot *s = NULL;

        assert_int_equal(vpack_planetlab_snapshot(pl, k, &s), 0);
        last = 0;
        for (unsigned d = 0; d < s->ndomains; d++)
            for (unsigned c = 0; c < s->domains[d].nvcpus; c++) {
                assert_true(s->domains[d].vcpus[c].util >= 0 &&
                            s->domains[d].vcpus[c].util <= 1 + 1e-12);
                last += s->domains[d].vcpus[c].util;
            }
        sum += last;
        vpack_snapshot_free(s);
    }
    /* What the last interval wanted and did not get is still owed. */
    *end = 0;
    for (unsigned v = 0; v < pl->nvms; v++)
        *end += pl->burst > 0 ? pl->vms[v].wanted : 0;
    *end = pl->burst > 0 ? *end - last : 0;
    return sum;
}

/*
 * The burst preserves the mean demand: over a long series, the mean demand
 * with log-normal bursts of sigma 2 (mean 1, variance e^4 - 1 = 53.6) is the
 * readings' mean. The readings' mean is summed here from the readings.
 * Tolerance: with n = 400000 intervals of 3 VMs, the factor's own relative
 * standard error is about sqrt(53.6 / 1.2e6) = 0.7 % for independent
 * intervals and a few times that for tau = 10 s (correlated intervals count
 * as fewer): 6 % is more than 4 standard errors either way, while the old
 * cut (demand over a vCPU dropped) lost 37 % (issue 26).
 */
static void test_burst_mean(void **state)
{
    const unsigned long n = 400000;
    const double taus[] = {0, 10};
    struct vpack_planetlab pl;
    double want = 0, got, end;

    (void)state;
    build_long(&pl, 0, 0, VPACK_SPLIT_EVEN);
    for (unsigned long k = 0; k < n; k++)
        for (unsigned v = 0; v < 3; v++)
            want += pl.vms[v].pct[k * 1000 / 300000] / 100;
    /* Sigma 0: exactly the readings. */
    got = total_demand(&pl, n, &end);
    assert_float_equal(got / n, want / n, 1e-9);
    for (unsigned i = 0; i < 2; i++) {
        build_long(&pl, 2, taus[i], VPACK_SPLIT_EVEN);
        got = total_demand(&pl, n, &end);
        print_message("sigma 2, tau %g: mean %.4f CPUs (+ %.3f carried at the end), readings %.4f\n",
                      taus[i], got / n, end, want / n);
        assert_true(end >= 0);
        assert_true(fabs((got + end) / want - 1) < 0.06);
    }
    /* The split changes who runs it, not how much there is. */
    build_long(&pl, 2, 10, VPACK_SPLIT_HOT);
    got = total_demand(&pl, n, &end);
    assert_true(fabs((got + end) / want - 1) < 0.06);
}

/* The lag-1 autocorrelation of VM 0's demand over n intervals. */
static double lag1(struct vpack_planetlab *pl, unsigned long n)
{
    double sx = 0, sxx = 0, sxy = 0, prev = 0;

    for (unsigned long k = 0; k < n; k++) {
        struct vpack_snapshot *s = NULL;
        double x;

        assert_int_equal(vpack_planetlab_snapshot(pl, k, &s), 0);
        x = s->domains[0].vcpus[0].util;
        vpack_snapshot_free(s);
        sx += x;
        sxx += x * x;
        if (k > 0)
            sxy += x * prev;
        prev = x;
    }
    /* Stationary: one mean and variance for both lags. */
    return (sxy / (n - 1) - (sx / n) * (sx / n)) / (sxx / n - (sx / n) * (sx / n));
}

/*
 * The bursts are correlated in time: with the log of the factor an AR(1)
 * process of coefficient phi = exp(-1 s / tau), the factor exp(s z - s^2/2)
 * has lag-1 autocorrelation (exp(s^2 phi) - 1) / (exp(s^2) - 1) (the
 * covariance of two log-normals). One VM at a flat 10 % of a CPU and sigma
 * 0.5 is never cut (a factor of 10 is 4.8 standard deviations of z away),
 * so its demand is the factor times 0.1. n = 100000: the estimate's
 * standard error is about 1 / sqrt(n) = 0.003 for independent intervals,
 * some 0.01 at tau 10; the tolerances are 0.02 and 0.04.
 */
static void test_burst_autocorrelation(void **state)
{
    static double flat[400];
    static char name[] = "flat";
    struct vpack_planetlab_vm vm = {.name = name, .nvcpus = 1, .nreadings = 400, .pct = flat};
    struct vpack_planetlab pl = {.nvms = 1, .vms = &vm, .interval_ms = 1000, .reading_ms = 300000,
                                 .burst = 0.5, .interpolate = 0, .seed = 3};
    double s2 = 0.25, phi = exp(-1.0 / 10), r;

    (void)state;
    for (unsigned i = 0; i < 400; i++)
        flat[i] = 10;
    pl.burst_tau = 0;
    r = lag1(&pl, 100000);
    print_message("tau 0: lag-1 autocorrelation %.4f\n", r);
    assert_true(fabs(r) < 0.02);
    vm.z = vm.wanted = 0;
    pl.next = 0;
    pl.burst_tau = 10;
    r = lag1(&pl, 100000);
    print_message("tau 10: lag-1 autocorrelation %.4f, expected %.4f\n", r,
                  (exp(s2 * phi) - 1) / (exp(s2) - 1));
    assert_true(fabs(r - (exp(s2 * phi) - 1) / (exp(s2) - 1)) < 0.04);
}

/* Interval k of pl, VM v's vCPU utils in u (at most 8). */
static void vcpus_at(struct vpack_planetlab *pl, unsigned long k, unsigned v, double *u)
{
    struct vpack_snapshot *s = NULL;

    assert_int_equal(vpack_planetlab_snapshot(pl, k, &s), 0);
    for (unsigned c = 0; c < s->domains[v].nvcpus; c++)
        u[c] = s->domains[v].vcpus[c].util;
    vpack_snapshot_free(s);
}

/*
 * The split: the VM's demand is the same whichever way it is shared; even
 * gives each vCPU demand / n, hot one vCPU all of it (a reading is at most
 * one CPU) and which one is drawn anew each reading, simplex shares uniform
 * on the simplex: for 2 vCPUs, vCPU 0's share is uniform on [0, 1] (mean
 * 1/2, variance 1/12). Over more than the vCPUs hold (a hand-made 250 %),
 * hot fills one vCPU and spreads the rest evenly.
 */
static void test_vcpu_split(void **state)
{
    struct vpack_planetlab pl;
    double u[8], m = 0, m2 = 0;
    unsigned hot[4] = {0}, nread = 1000;

    (void)state;
    build_long(&pl, 0, 0, VPACK_SPLIT_EVEN);
    vcpus_at(&pl, 0, 2, u);
    for (unsigned c = 0; c < 4; c++)
        assert_float_equal(u[c], pl.vms[2].pct[0] / 100 / 4, 1e-12);
    pl.split = VPACK_SPLIT_HOT;
    for (unsigned i = 0; i < nread; i++) {
        double want = pl.vms[2].pct[i] / 100, sum = 0;
        unsigned nhot = 0, h = 0;

        vcpus_at(&pl, (unsigned long)i * 300, 2, u);
        for (unsigned c = 0; c < 4; c++) {
            sum += u[c];
            if (u[c] > 0) {
                nhot++;
                h = c;
            }
        }
        assert_float_equal(sum, want, 1e-12);
        assert_int_equal(nhot, 1);
        hot[h]++;
    }
    /* Each vCPU is the hot one about a quarter of the time (binomial sd 14). */
    for (unsigned c = 0; c < 4; c++)
        assert_true(hot[c] > 250 - 70 && hot[c] < 250 + 70);
    pl.split = VPACK_SPLIT_SIMPLEX;
    for (unsigned i = 0; i < nread; i++) {
        double want = pl.vms[1].pct[i] / 100, share;

        vcpus_at(&pl, (unsigned long)i * 300 + 17, 1, u);
        assert_float_equal(u[0] + u[1], want, 1e-12);
        share = u[0] / want;
        m += share;
        m2 += share * share;
    }
    m /= nread;
    m2 = m2 / nread - m * m;
    /* Standard errors 0.009 and 0.003. */
    assert_true(fabs(m - 0.5) < 0.04);
    assert_true(fabs(m2 - 1.0 / 12) < 0.015);
    /* More than the vCPUs can hold. */
    pl.vms[2].pct[0] = 250;
    pl.split = VPACK_SPLIT_HOT;
    vcpus_at(&pl, 0, 2, u);
    assert_float_equal(u[0] + u[1] + u[2] + u[3], 2.5, 1e-12);
    for (unsigned c = 0; c < 4; c++)
        assert_true(fabs(u[c] - 1) < 1e-12 || fabs(u[c] - 0.5) < 1e-12);
}

/*
 * The series line reader both a trace and `vpackctl plan` use: the line's own
 * message and column, in the caller's words; the line break left out.
 */
static void test_series_line(void **state)
{
    const char *good = "{\"interval_ms\":1000,\"cpus\":{},\"domains\":[]}";
    struct vpack_snapshot *s = NULL;
    char line[128], *err = NULL;
    size_t col = 99;

    (void)state;
    assert_int_equal(vpack_series_parse_line(" \t\r\n", 4, "snapshot", "series", &s, &col, &err),
                     -ENODATA);
    assert_null(err);
    assert_int_equal(col, 0);
    snprintf(line, sizeof(line), "%s\r\n", good);
    assert_int_equal(vpack_series_parse_line(line, strlen(line), "snapshot", "series", &s, &col,
                                             &err), 0);
    assert_non_null(s);
    assert_null(err);
    vpack_snapshot_free(s);
    /* Data after it: the column of that data, in each caller's words. */
    snprintf(line, sizeof(line), "%s  {}\n", good);
    assert_int_equal(vpack_series_parse_line(line, strlen(line), "snapshot", "series", &s, &col,
                                             &err), -EINVAL);
    assert_null(s);
    assert_int_equal(col, strlen(good) + 3);
    assert_string_equal(err, "unexpected data after the snapshot (a series has one snapshot per "
                             "line)");
    free(err);
    assert_int_equal(vpack_series_parse_line(line, strlen(line), "interval", "trace", &s, &col,
                                             &err), -EINVAL);
    assert_string_equal(err, "unexpected data after the interval (a trace has one interval per "
                             "line)");
    free(err);
    /* A snapshot the line does not finish: said so, with or without the line break. */
    assert_int_equal(vpack_series_parse_line("{\"interval_ms\":1000,\n", 21, "snapshot", "series",
                                             &s, &col, &err), -EINVAL);
    assert_non_null(strstr(err, "(a series has one snapshot per line)"));
    free(err);
    /* Not a snapshot: the snapshot reader's own message, no column. */
    assert_int_equal(vpack_series_parse_line("{\"interval_ms\":1000}", 20, "snapshot", "series",
                                             &s, &col, &err), -EINVAL);
    assert_string_equal(err, "cpus: missing (required)");
    assert_int_equal(col, 0);
    free(err);
    /* NULL errmsg: nothing allocated, the same answer. */
    assert_int_equal(vpack_series_parse_line("nonsense", 8, "snapshot", "series", &s, &col, NULL),
                     -EINVAL);
    assert_true(col > 0);
    assert_null(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_line),
        cmocka_unit_test(test_bad_lines),
        cmocka_unit_test(test_series_line),
        cmocka_unit_test(test_from_observed),
        cmocka_unit_test(test_planetlab_parse),
        cmocka_unit_test(test_planetlab_file),
        cmocka_unit_test(test_planetlab_pick),
        cmocka_unit_test(test_planetlab_snapshot),
        cmocka_unit_test(test_planetlab_burst),
        cmocka_unit_test(test_burst_mean),
        cmocka_unit_test(test_burst_autocorrelation),
        cmocka_unit_test(test_vcpu_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
