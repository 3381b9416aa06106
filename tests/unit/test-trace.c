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

    vms[0] = (struct vpack_planetlab_vm){n0, 2, 3, r0};
    vms[1] = (struct vpack_planetlab_vm){n1, 1, 1, r1};
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

/* The burst model: the same seed gives the same trace; its mean is the reading's. */
static void test_planetlab_burst(void **state)
{
    struct vpack_planetlab pl;
    struct vpack_snapshot *a = NULL, *b = NULL;
    double sum = 0;
    bool differs = false;

    (void)state;
    build(&pl, 0.5);
    for (unsigned long k = 0; k < 20000; k++) {
        assert_int_equal(vpack_planetlab_snapshot(&pl, k, &a), 0);
        if (k < 50) {
            assert_int_equal(vpack_planetlab_snapshot(&pl, k, &b), 0);
            assert_float_equal(a->domains[1].vcpus[0].util, b->domains[1].vcpus[0].util, 0);
            vpack_snapshot_free(b);
        }
        assert_true(a->domains[1].vcpus[0].util <= 1.0);
        differs = differs || fabs(a->domains[1].vcpus[0].util - 0.5) > 0.01;
        sum += a->domains[1].vcpus[0].util;
        vpack_snapshot_free(a);
    }
    assert_true(differs);
    /* Mean 0.5 less what the cut at 1 takes off (small at sigma 0.5). */
    assert_true(sum / 20000 > 0.46 && sum / 20000 < 0.52);
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
