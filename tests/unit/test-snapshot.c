// SPDX-License-Identifier: MIT
/*
 * Snapshots: the allocation helpers, the JSON reader (every field, every
 * error message), the writer (round trips), and the plan's JSON writer.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "vpack/cpuset.h"
#include "vpack/json.h"
#include "vpack/policy.h"
#include "vpack/snapshot.h"

/* The example of SPEC.md and vpackctl(1). */
static const char spec_example[] =
    "{\"interval_ms\": 1000,\n"
    " \"cpus\": {\"0\": 0.12, \"1\": 0.03},\n"
    " \"domains\": [\n"
    "   {\"name\": \"web1\", \"level\": 2, \"cpuset\": \"0-15\",\n"
    "    \"vcpus\": [{\"id\": 0, \"util\": 0.80, \"delay\": 0.01, \"pin\": \"3\", \"cpu\": 3},\n"
    "              {\"id\": 1, \"util\": 0.05, \"delay\": 0.0}],\n"
    "    \"emulator\": {\"util\": 0.02},\n"
    "    \"iothreads\": [{\"id\": 1, \"util\": 0.0, \"pin\": \"2\"}],\n"
    "    \"memory\": {\"0\": 0.9, \"1\": 0.1}}]}\n";

/* Replaces every ' by " so that test inputs read like JSON. */
static char *dq(const char *text)
{
    char *s = strdup(text);

    assert_non_null(s);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    return s;
}

static struct vpack_snapshot *parse_ok(const char *text, size_t len)
{
    struct vpack_snapshot *s = NULL;
    char *err = NULL;
    int r = vpack_snapshot_parse(text, len, &s, &err);

    if (r != 0)
        fail_msg("parse failed (%d): %s\ninput: %.*s", r, err ? err : "(no message)", (int)len,
                 text);
    assert_null(err);
    assert_non_null(s);
    return s;
}

/* Parses text (with ' for ") and checks the error message exactly. */
static void expect_error(const char *text, const char *message)
{
    struct vpack_snapshot *s = (void *)1;
    char *err = NULL, *json = dq(text);
    int r = vpack_snapshot_parse(json, strlen(json), &s, &err);

    if (r != -EINVAL)
        fail_msg("expected -EINVAL, got %d for: %s", r, json);
    assert_null(s);
    assert_non_null(err);
    if (strcmp(err, message) != 0)
        fail_msg("for input: %s\n  got message:      %s\n  expected message: %s", json, err,
                 message);
    free(err);
    free(json);
}

static void assert_set(const vpack_cpuset *set, const char *text)
{
    char buf[256];

    assert_non_null(set);
    vpack_cpuset_format_buf(set, buf, sizeof(buf));
    assert_string_equal(buf, text);
}

static void assert_close(double a, double b)
{
    if (fabs(a - b) > 1e-12)
        fail_msg("%.17g != %.17g", a, b);
}

static void test_new_and_init(void **state)
{
    struct vpack_snapshot *s = vpack_snapshot_new(4, 2);

    (void)state;
    assert_non_null(s);
    assert_int_equal(s->interval_ms, 1000);
    assert_int_equal(s->ncpus, 4);
    for (unsigned i = 0; i < 4; i++)
        assert_true(s->cpu_busy[i] < 0);
    assert_int_equal(s->ndomains, 2);
    assert_null(s->domains[0].name);
    assert_int_equal(s->domains[1].nvcpus, 0);

    assert_int_equal(vpack_domain_sample_init(&s->domains[0], "web1", 2, 3, 2), 0);
    struct vpack_domain_sample *d = &s->domains[0];
    assert_string_equal(d->name, "web1");
    assert_int_equal(d->level, 2);
    assert_null(d->cpuset);
    assert_int_equal(d->nvcpus, 3);
    for (unsigned i = 0; i < 3; i++) {
        assert_int_equal(d->vcpus[i].id, i);
        assert_true(d->vcpus[i].util == 0 && d->vcpus[i].delay == 0);
        assert_null(d->vcpus[i].pin);
        assert_int_equal(d->vcpus[i].cpu, -1);
    }
    assert_int_equal(d->niothreads, 2);
    assert_int_equal(d->iothreads[0].id, 1);
    assert_int_equal(d->iothreads[1].id, 2);
    assert_int_equal(d->iothreads[1].cpu, -1);
    assert_null(d->iothreads[1].pin);
    assert_int_equal(d->emulator.id, -1);
    assert_int_equal(d->emulator.cpu, -1);
    assert_null(d->emulator.pin);
    assert_int_equal(d->nmemory, 0);

    /* No iothreads and no policy element. */
    assert_int_equal(vpack_domain_sample_init(&s->domains[1], "db1", -1, 1, 0), 0);
    assert_int_equal(s->domains[1].level, -1);
    assert_int_equal(s->domains[1].niothreads, 0);
    assert_null(s->domains[1].iothreads);

    /* Pins set by the caller belong to the snapshot. */
    d->vcpus[1].pin = malloc(sizeof(vpack_cpuset));
    assert_non_null(d->vcpus[1].pin);
    vpack_cpuset_zero(d->vcpus[1].pin);
    vpack_cpuset_set(d->vcpus[1].pin, 1);
    vpack_snapshot_free(s);

    /* Bad arguments. */
    struct vpack_domain_sample e;
    memset(&e, 0, sizeof(e));
    assert_int_equal(vpack_domain_sample_init(&e, "x", 3, 1, 0), -EINVAL);
    assert_int_equal(vpack_domain_sample_init(&e, "x", -2, 1, 0), -EINVAL);
    assert_int_equal(vpack_domain_sample_init(&e, NULL, 0, 1, 0), -EINVAL);
    assert_null(e.name);
    assert_null(e.vcpus);

    /* An empty snapshot, and freeing NULL. */
    s = vpack_snapshot_new(0, 0);
    assert_non_null(s);
    assert_null(s->cpu_busy);
    assert_null(s->domains);
    vpack_snapshot_free(s);
    vpack_snapshot_free(NULL);
}

/* Every field of the SPEC example. */
static void check_spec_example(const struct vpack_snapshot *s)
{
    assert_int_equal(s->interval_ms, 1000);
    assert_int_equal(s->ncpus, 2);
    assert_close(s->cpu_busy[0], 0.12);
    assert_close(s->cpu_busy[1], 0.03);
    assert_int_equal(s->ndomains, 1);

    const struct vpack_domain_sample *d = &s->domains[0];
    assert_string_equal(d->name, "web1");
    assert_int_equal(d->level, 2);
    assert_set(d->cpuset, "0-15");

    assert_int_equal(d->nvcpus, 2);
    assert_int_equal(d->vcpus[0].id, 0);
    assert_close(d->vcpus[0].util, 0.80);
    assert_close(d->vcpus[0].delay, 0.01);
    assert_set(d->vcpus[0].pin, "3");
    assert_int_equal(d->vcpus[0].cpu, 3);
    assert_int_equal(d->vcpus[1].id, 1);
    assert_close(d->vcpus[1].util, 0.05);
    assert_close(d->vcpus[1].delay, 0.0);
    assert_null(d->vcpus[1].pin);
    assert_int_equal(d->vcpus[1].cpu, -1);

    assert_int_equal(d->emulator.id, -1);
    assert_close(d->emulator.util, 0.02);
    assert_close(d->emulator.delay, 0);
    assert_null(d->emulator.pin);
    assert_int_equal(d->emulator.cpu, -1);

    assert_int_equal(d->niothreads, 1);
    assert_int_equal(d->iothreads[0].id, 1);
    assert_close(d->iothreads[0].util, 0);
    assert_close(d->iothreads[0].delay, 0);
    assert_set(d->iothreads[0].pin, "2");
    assert_int_equal(d->iothreads[0].cpu, -1);

    assert_int_equal(d->nmemory, 2);
    assert_int_equal(d->memory[0].node, 0);
    assert_close(d->memory[0].share, 0.9);
    assert_int_equal(d->memory[1].node, 1);
    assert_close(d->memory[1].share, 0.1);
}

static void test_parse_spec_example(void **state)
{
    (void)state;
    struct vpack_snapshot *s = parse_ok(spec_example, strlen(spec_example));
    check_spec_example(s);
    vpack_snapshot_free(s);
}

/* Reads a file of tests/data into a buffer; NULL (test skipped) when not found. */
static char *read_testdata(const char *name, size_t *len)
{
    const char *dir = getenv("VPACK_TESTDATA");
    char path[4096];
    char *buf = NULL;
    FILE *f;
    long n;

    snprintf(path, sizeof(path), "%s/%s", dir ? dir : "tests/data", name);
    f = fopen(path, "rb");
    if (!f)
        return NULL;
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

/* tests/data/snapshots/example.json is the same snapshot, pretty-printed. */
static void test_parse_example_file(void **state)
{
    size_t len;
    char *buf = read_testdata("snapshots/example.json", &len);

    (void)state;
    if (!buf)
        skip();
    struct vpack_snapshot *s = parse_ok(buf, len);
    check_spec_example(s);
    vpack_snapshot_free(s);
    free(buf);
}

/* Every line of the series parses, with three level 2 domains. */
static void test_parse_series_file(void **state)
{
    size_t len, lines = 0;
    char *buf = read_testdata("snapshots/low-high-low.jsonl", &len);

    (void)state;
    if (!buf)
        skip();
    for (char *p = buf, *nl; p < buf + len; p = nl + 1) {
        nl = memchr(p, '\n', (size_t)(buf + len - p));
        assert_non_null(nl);
        struct vpack_snapshot *s = parse_ok(p, (size_t)(nl - p));
        assert_int_equal(s->interval_ms, 1000);
        assert_int_equal(s->ncpus, 2);
        assert_int_equal(s->ndomains, 3);
        for (unsigned i = 0; i < 3; i++)
            assert_int_equal(s->domains[i].level, 2);
        vpack_snapshot_free(s);
        lines++;
    }
    assert_int_equal(lines, 30);
    free(buf);
}

static void test_defaults(void **state)
{
    char *json = dq("{'interval_ms': 500, 'cpus': {'3': 1}, 'domains': ["
                    "{'name': 'a', 'vcpus': [{'id': 4}]},"
                    "{'name': 'b', 'level': null, 'cpuset': null, 'vcpus': [],"
                    " 'emulator': null, 'iothreads': null, 'memory': null}]}");
    struct vpack_snapshot *s = parse_ok(json, strlen(json));

    (void)state;
    assert_int_equal(s->interval_ms, 500);
    /* ncpus is the highest id + 1; CPUs not in the object are not reported. */
    assert_int_equal(s->ncpus, 4);
    assert_true(s->cpu_busy[0] < 0 && s->cpu_busy[1] < 0 && s->cpu_busy[2] < 0);
    assert_close(s->cpu_busy[3], 1.0);
    for (unsigned i = 0; i < 2; i++) {
        const struct vpack_domain_sample *d = &s->domains[i];
        assert_int_equal(d->level, -1);
        assert_null(d->cpuset);
        assert_int_equal(d->emulator.id, -1);
        assert_int_equal(d->emulator.cpu, -1);
        assert_close(d->emulator.util, 0);
        assert_null(d->emulator.pin);
        assert_int_equal(d->niothreads, 0);
        assert_int_equal(d->nmemory, 0);
    }
    assert_int_equal(s->domains[0].nvcpus, 1);
    assert_int_equal(s->domains[0].vcpus[0].id, 4);
    assert_close(s->domains[0].vcpus[0].util, 0);
    assert_close(s->domains[0].vcpus[0].delay, 0);
    assert_int_equal(s->domains[0].vcpus[0].cpu, -1);
    assert_null(s->domains[0].vcpus[0].pin);
    assert_int_equal(s->domains[1].nvcpus, 0);
    vpack_snapshot_free(s);
    free(json);

    /* No CPUs and no domains is a valid (if dull) snapshot. */
    json = dq("{'interval_ms': 1, 'cpus': {}, 'domains': []}");
    s = parse_ok(json, strlen(json));
    assert_int_equal(s->ncpus, 0);
    assert_int_equal(s->ndomains, 0);
    vpack_snapshot_free(s);
    free(json);
}

static void test_parse_not_nul_terminated(void **state)
{
    const char *text = "{\"interval_ms\": 1000, \"cpus\": {\"0\": 0.5}, \"domains\": []}";
    size_t len = strlen(text);
    /* The snapshot followed by bytes that are not part of it, and no NUL. */
    char *buf = malloc(len + 8);

    (void)state;
    assert_non_null(buf);
    memcpy(buf, text, len);
    memcpy(buf + len, "garbage!", 8);
    struct vpack_snapshot *s = parse_ok(buf, len);
    assert_int_equal(s->interval_ms, 1000);
    assert_close(s->cpu_busy[0], 0.5);
    vpack_snapshot_free(s);

    /* A top-level value that ends exactly at len (a number needs its end seen). */
    struct vpack_snapshot *t = NULL;
    char *err = NULL;
    memcpy(buf, "12345", 5);
    assert_int_equal(vpack_snapshot_parse(buf, 3, &t, &err), -EINVAL);
    assert_string_equal(err, "expected a JSON object (a snapshot), got 123");
    free(err);
    free(buf);
}

static void test_unknown_keys_ignored(void **state)
{
    char *json = dq("{'version': 2, 'interval_ms': 1000, 'host': {'name': 'h', 'x': [1, 2]},"
                    " 'cpus': {'0': 0.5}, 'extra': null, 'domains': [{'name': 'web1',"
                    " 'uuid': 'abc', 'level': 1, 'future': {'a': [{'b': 1}]},"
                    " 'vcpus': [{'id': 0, 'util': 0.5, 'steal': 0.1, 'tid': 1234}],"
                    " 'emulator': {'util': 0.1, 'tid': 1, 'id': 99},"
                    " 'iothreads': [{'id': 1, 'queue': 'q'}],"
                    " 'memory': {'0': 1}, 'numa_tuning': 'strict'}], 'trailer': true}");
    struct vpack_snapshot *s = parse_ok(json, strlen(json));

    (void)state;
    assert_int_equal(s->ndomains, 1);
    assert_int_equal(s->domains[0].level, 1);
    assert_close(s->domains[0].vcpus[0].util, 0.5);
    /* The emulator has no id, whatever the file says. */
    assert_int_equal(s->domains[0].emulator.id, -1);
    assert_close(s->domains[0].emulator.util, 0.1);
    assert_int_equal(s->domains[0].iothreads[0].id, 1);
    vpack_snapshot_free(s);
    free(json);
}

/* Numbers: ints where doubles go, exponents, cpu -1. */
static void test_numbers(void **state)
{
    char *json = dq("{'interval_ms': 4294967295, 'cpus': {'16383': 0, '2': 1.0e-1},"
                    " 'domains': [{'name': 'n', 'vcpus': [{'id': 2147483647, 'util': 2,"
                    " 'delay': 1e-3, 'cpu': -1}, {'id': 0, 'cpu': 16383, 'util': 1.5}]}]}");
    struct vpack_snapshot *s = parse_ok(json, strlen(json));

    (void)state;
    assert_int_equal(s->interval_ms, 4294967295u);
    assert_int_equal(s->ncpus, 16384);
    assert_close(s->cpu_busy[16383], 0);
    assert_close(s->cpu_busy[2], 0.1);
    assert_true(s->cpu_busy[3] < 0);
    assert_int_equal(s->domains[0].vcpus[0].id, 2147483647);
    /* util is CPUs' worth: a thread may be reported above 1. */
    assert_close(s->domains[0].vcpus[0].util, 2);
    assert_close(s->domains[0].vcpus[0].delay, 0.001);
    assert_int_equal(s->domains[0].vcpus[0].cpu, -1);
    assert_int_equal(s->domains[0].vcpus[1].cpu, 16383);
    vpack_snapshot_free(s);
    free(json);
}

static void test_errors_top_level(void **state)
{
    (void)state;
    expect_error("{'cpus': {}, 'domains': []}", "interval_ms: missing (required)");
    expect_error("{'interval_ms': null, 'cpus': {}, 'domains': []}",
                 "interval_ms: missing (required)");
    expect_error("{'interval_ms': 0, 'cpus': {}, 'domains': []}",
                 "interval_ms: expected a positive integer (milliseconds), got 0");
    expect_error("{'interval_ms': -5, 'cpus': {}, 'domains': []}",
                 "interval_ms: expected a positive integer (milliseconds), got -5");
    expect_error("{'interval_ms': 1.5, 'cpus': {}, 'domains': []}",
                 "interval_ms: expected a positive integer (milliseconds), got 1.5");
    expect_error("{'interval_ms': '1000', 'cpus': {}, 'domains': []}",
                 "interval_ms: expected a positive integer (milliseconds), got \"1000\"");
    expect_error("{'interval_ms': 4294967296, 'cpus': {}, 'domains': []}",
                 "interval_ms: expected a positive integer (milliseconds), got 4294967296");
    expect_error("{'interval_ms': 1000, 'domains': []}", "cpus: missing (required)");
    expect_error("{'interval_ms': 1000, 'cpus': [0.5], 'domains': []}",
                 "cpus: expected an object, got an array");
    expect_error("{'interval_ms': 1000, 'cpus': {'x': 0.5}, 'domains': []}",
                 "cpus: key \"x\" is not a CPU id (0 to 16383)");
    expect_error("{'interval_ms': 1000, 'cpus': {'-1': 0.5}, 'domains': []}",
                 "cpus: key \"-1\" is not a CPU id (0 to 16383)");
    expect_error("{'interval_ms': 1000, 'cpus': {'01': 0.5}, 'domains': []}",
                 "cpus: key \"01\" is not a CPU id (0 to 16383)");
    expect_error("{'interval_ms': 1000, 'cpus': {'16384': 0.5}, 'domains': []}",
                 "cpus: key \"16384\" is not a CPU id (0 to 16383)");
    expect_error("{'interval_ms': 1000, 'cpus': {'': 0.5}, 'domains': []}",
                 "cpus: key \"\" is not a CPU id (0 to 16383)");
    expect_error("{'interval_ms': 1000, 'cpus': {'0': 1.5}, 'domains': []}",
                 "cpus.0: expected a number from 0 to 1, got 1.5");
    expect_error("{'interval_ms': 1000, 'cpus': {'7': -0.1}, 'domains': []}",
                 "cpus.7: expected a number from 0 to 1, got -0.1");
    expect_error("{'interval_ms': 1000, 'cpus': {'0': 'busy'}, 'domains': []}",
                 "cpus.0: expected a number from 0 to 1, got \"busy\"");
    expect_error("{'interval_ms': 1000, 'cpus': {'0': true}, 'domains': []}",
                 "cpus.0: expected a number from 0 to 1, got true");
    expect_error("{'interval_ms': 1000, 'cpus': {}}", "domains: missing (required)");
    expect_error("{'interval_ms': 1000, 'cpus': {}, 'domains': {}}",
                 "domains: expected an array, got an object");
    expect_error("{'interval_ms': 1000, 'cpus': {}, 'domains': [5]}",
                 "domains[0]: expected an object, got 5");
    expect_error("[1, 2]", "expected a JSON object (a snapshot), got an array");
    expect_error("null", "expected a JSON object (a snapshot), got null");
    expect_error("\"snapshot\"", "expected a JSON object (a snapshot), got \"snapshot\"");
}

/* A snapshot with one domain "web1" and one vCPU, then the given domain keys. */
#define DOM(keys) \
    "{'interval_ms': 1000, 'cpus': {'0': 0.5}, 'domains': [{'name': 'web1', " keys "}]}"
#define VCPU(keys) DOM("'vcpus': [{'id': 0, " keys "}]")

static void test_errors_domain(void **state)
{
    (void)state;
    expect_error("{'interval_ms': 1000, 'cpus': {}, 'domains': [{'vcpus': []}]}",
                 "domains[0].name: missing (required)");
    expect_error("{'interval_ms': 1000, 'cpus': {}, 'domains': [{'name': '', 'vcpus': []}]}",
                 "domains[0].name: expected a non-empty string, got \"\"");
    expect_error("{'interval_ms': 1000, 'cpus': {}, 'domains': [{'name': 7, 'vcpus': []}]}",
                 "domains[0].name: expected a string, got 7");
    expect_error("{'interval_ms': 1000, 'cpus': {}, 'domains': [{'name': 'a\\u0000b',"
                 " 'vcpus': []}]}",
                 "domains[0].name: the string contains a NUL character");
    expect_error(DOM("'level': 7, 'vcpus': []"),
                 "domains[0] (web1).level: 7 is not a power policy level (0, 1 or 2)");
    expect_error(DOM("'level': -1, 'vcpus': []"),
                 "domains[0] (web1).level: -1 is not a power policy level (0, 1 or 2)");
    expect_error(DOM("'level': '2', 'vcpus': []"),
                 "domains[0] (web1).level: expected a power policy level (0, 1 or 2), got \"2\"");
    expect_error(DOM("'level': 1.0, 'vcpus': []"),
                 "domains[0] (web1).level: expected a power policy level (0, 1 or 2), got 1.0");
    expect_error(DOM("'cpuset': 'aaa', 'vcpus': []"),
                 "domains[0] (web1).cpuset: invalid cpuset 'aaa': expected a CPU number at "
                 "character 1");
    expect_error(DOM("'cpuset': '0-3,^0-3', 'vcpus': []"),
                 "domains[0] (web1).cpuset: invalid cpuset '0-3,^0-3': '^' takes a single CPU, "
                 "not a range at character 7");
    /* Found by fuzz-snapshot (regress-cpuset-control-char): the message is one line. */
    expect_error(DOM("'cpuset': '0-\\u00011', 'vcpus': []"),
                 "domains[0] (web1).cpuset: invalid cpuset '0-?1': expected the end of a range "
                 "at character 3");
    expect_error(DOM("'cpuset': [0, 1], 'vcpus': []"),
                 "domains[0] (web1).cpuset: expected a string, got an array");
    expect_error(DOM("'level': 2"), "domains[0] (web1).vcpus: missing (required)");
    expect_error(DOM("'vcpus': null"), "domains[0] (web1).vcpus: missing (required)");
    expect_error(DOM("'vcpus': {'0': {}}"),
                 "domains[0] (web1).vcpus: expected an array, got an object");
    expect_error(DOM("'vcpus': [1]"), "domains[0] (web1).vcpus[0]: expected an object, got 1");
    expect_error(DOM("'vcpus': [], 'emulator': [1]"),
                 "domains[0] (web1).emulator: expected an object, got an array");
    expect_error(DOM("'vcpus': [], 'emulator': {'util': -1}"),
                 "domains[0] (web1).emulator.util: expected a number >= 0, got -1");
    expect_error(DOM("'vcpus': [], 'iothreads': {}"),
                 "domains[0] (web1).iothreads: expected an array, got an object");
    expect_error(DOM("'vcpus': [], 'iothreads': [{'util': 0}]"),
                 "domains[0] (web1).iothreads[0].id: missing (required)");
    expect_error(DOM("'vcpus': [], 'iothreads': [{'id': 0}]"),
                 "domains[0] (web1).iothreads[0].id: expected an integer >= 1, got 0");
    expect_error(DOM("'vcpus': [], 'memory': [0.5]"),
                 "domains[0] (web1).memory: expected an object, got an array");
    expect_error(DOM("'vcpus': [], 'memory': {'node0': 1}"),
                 "domains[0] (web1).memory: key \"node0\" is not a NUMA node id (0 to 16383)");
    expect_error(DOM("'vcpus': [], 'memory': {'1': 2}"),
                 "domains[0] (web1).memory.1: expected a number from 0 to 1, got 2");
}

static void test_errors_threads(void **state)
{
    (void)state;
    /* The example of the design brief, word for word. */
    expect_error("{'interval_ms': 1000, 'cpus': {}, 'domains': ["
                 "{'name': 'web1', 'vcpus': []},"
                 "{'name': 'web2', 'vcpus': [{'id': 0, 'util': 'x'}]}]}",
                 "domains[1] (web2).vcpus[0].util: expected a number >= 0, got \"x\"");
    expect_error(DOM("'vcpus': [{'util': 0.5}]"),
                 "domains[0] (web1).vcpus[0].id: missing (required)");
    expect_error(DOM("'vcpus': [{'id': -1}]"),
                 "domains[0] (web1).vcpus[0].id: expected an integer >= 0, got -1");
    expect_error(DOM("'vcpus': [{'id': '0'}]"),
                 "domains[0] (web1).vcpus[0].id: expected an integer >= 0, got \"0\"");
    expect_error(DOM("'vcpus': [{'id': 2147483648}]"),
                 "domains[0] (web1).vcpus[0].id: expected an integer >= 0, got 2147483648");
    expect_error(VCPU("'util': -0.5"),
                 "domains[0] (web1).vcpus[0].util: expected a number >= 0, got -0.5");
    expect_error(VCPU("'util': NaN"),
                 "domains[0] (web1).vcpus[0].util: expected a number >= 0, got NaN");
    expect_error(VCPU("'util': 1e400"),
                 "domains[0] (web1).vcpus[0].util: expected a number >= 0, got 1e400");
    expect_error(VCPU("'delay': -1"),
                 "domains[0] (web1).vcpus[0].delay: expected a number >= 0, got -1");
    expect_error(VCPU("'delay': [0]"),
                 "domains[0] (web1).vcpus[0].delay: expected a number >= 0, got an array");
    expect_error(VCPU("'pin': ''"),
                 "domains[0] (web1).vcpus[0].pin: invalid cpuset '': empty list at character 1");
    expect_error(VCPU("'pin': 3"), "domains[0] (web1).vcpus[0].pin: expected a string, got 3");
    expect_error(VCPU("'pin': '16384'"),
                 "domains[0] (web1).vcpus[0].pin: invalid cpuset '16384': CPU id out of range "
                 "(max 16383) at character 1");
    expect_error(VCPU("'cpu': 16384"),
                 "domains[0] (web1).vcpus[0].cpu: expected a CPU id (0 to 16383) or -1, got "
                 "16384");
    expect_error(VCPU("'cpu': -2"),
                 "domains[0] (web1).vcpus[0].cpu: expected a CPU id (0 to 16383) or -1, got -2");
    expect_error(VCPU("'cpu': '3'"),
                 "domains[0] (web1).vcpus[0].cpu: expected a CPU id (0 to 16383) or -1, got "
                 "\"3\"");
    expect_error(DOM("'vcpus': [], 'iothreads': [{'id': 1, 'pin': 'x'}]"),
                 "domains[0] (web1).iothreads[0].pin: invalid cpuset 'x': expected a CPU number "
                 "at character 1");
}

static void test_errors_duplicates(void **state)
{
    (void)state;
    expect_error(DOM("'vcpus': [{'id': 0}, {'id': 1}, {'id': 0}]"),
                 "domains[0] (web1).vcpus[2].id: duplicate vCPU id 0 (also vcpus[0])");
    /* The first repeat in file order is the one reported. */
    expect_error(DOM("'vcpus': [{'id': 5}, {'id': 3}, {'id': 3}, {'id': 5}, {'id': 5}]"),
                 "domains[0] (web1).vcpus[2].id: duplicate vCPU id 3 (also vcpus[1])");
    expect_error(DOM("'vcpus': [], 'iothreads': [{'id': 1}, {'id': 1}]"),
                 "domains[0] (web1).iothreads[1].id: duplicate iothread id 1 (also iothreads[0])");
    expect_error("{'interval_ms': 1000, 'cpus': {}, 'domains': ["
                 "{'name': 'web1', 'vcpus': []}, {'name': 'db', 'vcpus': []},"
                 "{'name': 'web1', 'vcpus': []}]}",
                 "domains[2] (web1).name: duplicate domain name (also domains[0])");
    /* vCPU and iothread ids are separate spaces; so are different domains. */
    char *json = dq("{'interval_ms': 1000, 'cpus': {}, 'domains': ["
                    "{'name': 'a', 'vcpus': [{'id': 1}], 'iothreads': [{'id': 1}]},"
                    "{'name': 'b', 'vcpus': [{'id': 1}]}]}");
    struct vpack_snapshot *s = parse_ok(json, strlen(json));
    vpack_snapshot_free(s);
    free(json);
}

static void test_errors_syntax(void **state)
{
    (void)state;
    expect_error("", "line 1, column 1: no snapshot (empty input)");
    expect_error(" \n ", "line 2, column 2: no snapshot (empty input)");
    expect_error("{'interval_ms': 1000,", "line 1, column 22: invalid JSON: unexpected end of input");
    expect_error("{'interval_ms': 1000,,}", "line 1, column 22: invalid JSON: quoted object property name expected");
    expect_error("{'interval_ms': 1000,\n 'cpus': {'0': 0.5,},\n 'domains': []}",
                 "line 2, column 20: invalid JSON: unexpected character");
    expect_error("{'interval_ms': 1000, /* x */ 'cpus': {}, 'domains': []}",
                 "line 1, column 23: invalid JSON: quoted object property name expected");
    expect_error("{'interval_ms': 01000, 'cpus': {}, 'domains': []}",
                 "line 1, column 22: invalid JSON: number expected");
    expect_error("{'interval_ms': 1000, 'cpus': {}, 'domains': []} x",
                 "line 1, column 50: unexpected data after the snapshot");
    expect_error("{'interval_ms': 1000, 'cpus': {}, 'domains': []}\n"
                 "{'interval_ms': 1000, 'cpus': {}, 'domains': []}\n",
                 "line 2, column 1: unexpected data after the snapshot");
    /* Data after the object is reported before what is wrong inside it. */
    expect_error("{'cpus': {}} {}", "line 1, column 14: unexpected data after the snapshot");

    /* NUL bytes: inside the value, and after it. */
    struct vpack_snapshot *s = NULL;
    char *err = NULL;
    const char in_value[] = "{\"interval_ms\": 1\0000}";
    assert_int_equal(vpack_snapshot_parse(in_value, sizeof(in_value) - 1, &s, &err), -EINVAL);
    assert_string_equal(err, "line 1, column 18: invalid JSON: NUL byte in the text");
    free(err);
    const char after[] = "{\"interval_ms\": 1, \"cpus\": {}, \"domains\": []}\0";
    assert_int_equal(vpack_snapshot_parse(after, sizeof(after) - 1, &s, &err), -EINVAL);
    assert_string_equal(err, "line 1, column 46: unexpected data after the snapshot");
    free(err);
    assert_null(s);
}

static void test_error_quoting(void **state)
{
    char name[300], *json, *err = NULL;
    struct vpack_snapshot *s = NULL;

    (void)state;
    /* A long domain name is cut short in messages; control characters become '?'. */
    memset(name, 'n', 200);
    name[200] = '\0';
    assert_true(asprintf(&json, "{\"interval_ms\": 1, \"cpus\": {}, \"domains\": [{\"name\": "
                                "\"%s\\t\", \"level\": 9, \"vcpus\": []}]}",
                         name) > 0);
    assert_int_equal(vpack_snapshot_parse(json, strlen(json), &s, &err), -EINVAL);
    char expect[300];
    snprintf(expect, sizeof(expect), "domains[0] (%.64s...).level: 9 is not a power policy "
             "level (0, 1 or 2)", name);
    assert_string_equal(err, expect);
    free(err);
    free(json);

    json = dq("{'interval_ms': 1, 'cpus': {}, 'domains': [{'name': 'a\\nb', 'level': 9,"
              " 'vcpus': []}]}");
    assert_int_equal(vpack_snapshot_parse(json, strlen(json), &s, &err), -EINVAL);
    assert_string_equal(err, "domains[0] (a?b).level: 9 is not a power policy level (0, 1 or 2)");
    free(err);
    free(json);
}

static void test_parse_first(void **state)
{
    struct vpack_snapshot *s = NULL;
    char *err = NULL;
    size_t end, at;
    char *two = dq("{'interval_ms': 10, 'cpus': {}, 'domains': []}  \n"
                   "{'interval_ms': 20, 'cpus': {}, 'domains': []}\n");
    size_t first_len = strlen("{'interval_ms': 10, 'cpus': {}, 'domains': []}");

    (void)state;
    /* A series: each call reads one snapshot and says where the next begins. */
    assert_int_equal(vpack_snapshot_parse_first(two, strlen(two), &end, &at, &s, &err), 0);
    assert_int_equal(s->interval_ms, 10);
    assert_true(end >= first_len && end <= first_len + 3);
    assert_int_equal(at, SIZE_MAX);
    vpack_snapshot_free(s);
    assert_int_equal(vpack_snapshot_parse_first(two + end, strlen(two) - end, &end, &at, &s, &err),
                     0);
    assert_int_equal(s->interval_ms, 20);
    vpack_snapshot_free(s);
    free(two);

    /* A text that stops inside the value: -ENODATA, the position is its end. */
    char *part = dq("{'interval_ms': 10,\n");
    assert_int_equal(vpack_snapshot_parse_first(part, strlen(part), &end, &at, &s, &err),
                     -ENODATA);
    assert_null(s);
    assert_int_equal(end, 0);
    assert_int_equal(at, strlen(part));
    assert_string_equal(err, "invalid JSON: unexpected end of input");
    free(err);
    free(part);
    assert_int_equal(vpack_snapshot_parse_first("  \n", 3, &end, &at, &s, &err), -ENODATA);
    assert_string_equal(err, "no snapshot (empty input)");
    free(err);

    /* A syntax error: the position is the offending byte, not in the message. */
    assert_int_equal(vpack_snapshot_parse_first("{\"a\" 1}", 7, &end, &at, &s, &err), -EINVAL);
    assert_int_equal(at, 5);
    assert_int_equal(end, 0);
    assert_string_equal(err, "invalid JSON: object property name separator ':' expected");
    free(err);

    /* A complete value that is not a valid snapshot still reports its end. */
    assert_int_equal(vpack_snapshot_parse_first("{} {}", 5, &end, &at, &s, &err), -EINVAL);
    assert_int_equal(end, 3);
    assert_int_equal(at, SIZE_MAX);
    assert_string_equal(err, "interval_ms: missing (required)");
    free(err);
}

/* Writes, reads back and writes again: the same text and the same values. */
static void test_round_trip(void **state)
{
    struct vpack_snapshot *a = parse_ok(spec_example, strlen(spec_example)), *b;
    char *ja = vpack_snapshot_to_json(a), *jb;

    (void)state;
    assert_non_null(ja);
    assert_null(strchr(ja, '\n'));
    b = parse_ok(ja, strlen(ja));
    check_spec_example(b);
    jb = vpack_snapshot_to_json(b);
    assert_string_equal(ja, jb);
    /* Numbers are written in their shortest exact form, not with 17 digits. */
    assert_non_null(strstr(ja, "\"util\":0.8,"));
    assert_non_null(strstr(ja, "\"0\":0.12"));
    assert_non_null(strstr(ja, "\"cpuset\":\"0-15\""));
    vpack_snapshot_free(a);
    vpack_snapshot_free(b);
    free(ja);
    free(jb);
}

/*
 * The one number format (json.h): the shortest exact text for digits 0,
 * as vpackd's views and `vpackctl simulate --json` print through
 * vpack_json_set_double(), and null, not NaN or Infinity, when not finite.
 */
static void test_json_number(void **state)
{
    static const struct {
        double v;
        int digits;
        const char *text;
    } cases[] = {
        {0.8, 0, "0.8"},     {0.1 + 0.2, 0, "0.30000000000000004"},
        {1, 0, "1.0"},       {1e300, 0, "1e+300"},
        {0.87000000001, 10, "0.87"}, {NAN, 0, "null"},
        {INFINITY, 0, "null"}, {-INFINITY, 10, "null"},
    };
    json_object *o = json_object_new_object();
    bool ok = true;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_object *v = vpack_json_new_number(cases[i].v, cases[i].digits);
        assert_non_null(v);
        assert_string_equal(json_object_to_json_string(v), cases[i].text);
        json_object_put(v);
    }
    vpack_json_set_double(o, "a", 0.8, &ok);
    vpack_json_set_double(o, "b", NAN, &ok);
    assert_true(ok);
    assert_string_equal(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
                        "{\"a\":0.8,\"b\":null}");
    json_object_put(o);
}

/* The last interval's unsmoothed util_now and delay_now: read, written back, 0 left out. */
static void test_now_values(void **state)
{
    (void)state;
    char *in = dq("{'interval_ms': 1000, 'cpus': {}, 'domains': [{'name': 'b', 'vcpus': ["
                  "{'id': 0, 'util': 0.69, 'delay': 0.11, 'util_now': 0.86, 'delay_now': 0.14},"
                  "{'id': 1, 'util': 0.1}], 'emulator': {'util_now': 0.02}}]}");
    struct vpack_snapshot *s = parse_ok(in, strlen(in));
    const struct vpack_domain_sample *d = &s->domains[0];
    assert_float_equal(d->vcpus[0].util_now, 0.86, 1e-12);
    assert_float_equal(d->vcpus[0].delay_now, 0.14, 1e-12);
    assert_float_equal(d->vcpus[1].util_now, 0.0, 0);
    assert_float_equal(d->vcpus[1].delay_now, 0.0, 0);
    assert_float_equal(d->emulator.util_now, 0.02, 1e-12);
    char *j = vpack_snapshot_to_json(s);
    assert_non_null(j);
    assert_non_null(strstr(j, "\"util_now\":0.86,\"delay_now\":0.14"));
    /* Not known (0): left out, so that older readers and records stay as they were. */
    assert_null(strstr(j, "\"util\":0.1,\"delay\":0.0,\"util_now\""));
    struct vpack_snapshot *b = parse_ok(j, strlen(j));
    assert_float_equal(b->domains[0].vcpus[0].delay_now, 0.14, 1e-12);
    assert_float_equal(b->domains[0].emulator.util_now, 0.02, 1e-12);
    expect_error(DOM("'vcpus': [{'id': 0, 'delay_now': -0.5}]"),
                 "domains[0] (web1).vcpus[0].delay_now: expected a number >= 0, got -0.5");
    vpack_snapshot_free(b);
    vpack_snapshot_free(s);
    free(j);
    free(in);
}

/* cpus_now: the CPUs' last interval alone; read, written, checked; and the bound it sets. */
static void test_cpus_now(void **state)
{
    (void)state;
    char *in = dq("{'interval_ms': 1000, 'cpus': {'0': 0.3, '1': 0.05, '3': 0.1},"
                  " 'cpus_now': {'0': 0.1, '1': 0.02}, 'domains': [{'name': 'b', 'vcpus': ["
                  "{'id': 0, 'util': 0.3, 'util_now': 0.3, 'delay_now': 0.5},"
                  "{'id': 1, 'util': 0.1, 'util_now': 0.06}], 'emulator': {'util_now': 0.04}}]}");
    struct vpack_snapshot *s = parse_ok(in, strlen(in));
    assert_int_equal(s->ncpus, 4);
    assert_non_null(s->cpu_busy_now);
    assert_float_equal(s->cpu_busy_now[0], 0.1, 1e-12);
    assert_float_equal(s->cpu_busy_now[1], 0.02, 1e-12);
    assert_true(s->cpu_busy_now[2] < 0 && s->cpu_busy_now[3] < 0); /* not reported */
    char *j = vpack_snapshot_to_json(s);
    assert_non_null(j);
    assert_non_null(strstr(j, "\"cpus_now\":{\"0\":0.1,\"1\":0.02}"));
    struct vpack_snapshot *b = parse_ok(j, strlen(j));
    assert_float_equal(b->cpu_busy_now[1], 0.02, 1e-12);
    assert_true(b->cpu_busy_now[3] < 0);

    /* CPU 3 has a reading but none of the last interval alone: it may have run
     * anything, so nothing is bounded. */
    assert_float_equal(vpack_snapshot_bound_now(s), 0, 0);
    assert_float_equal(s->domains[0].vcpus[0].util_now, 0.3, 1e-12);
    s->cpu_busy_now[3] = 0;
    /* The threads asked for 0.4 CPUs in an interval the CPUs were 0.12 busy: cut to it,
     * in proportion; a delay no longer than the busiest CPU was busy. */
    assert_float_equal(vpack_snapshot_bound_now(s), 0.4 - 0.12, 1e-9);
    const struct vpack_domain_sample *d = &s->domains[0];
    assert_float_equal(d->vcpus[0].util_now, 0.3 * 0.12 / 0.4, 1e-9);
    assert_float_equal(d->vcpus[1].util_now, 0.06 * 0.12 / 0.4, 1e-9);
    assert_float_equal(d->emulator.util_now, 0.04 * 0.12 / 0.4, 1e-9);
    assert_float_equal(d->vcpus[0].delay_now, 0.1, 1e-12);
    assert_float_equal(vpack_snapshot_bound_now(s), 0, 1e-9); /* within now: unchanged */
    assert_float_equal(d->vcpus[0].util_now, 0.3 * 0.12 / 0.4, 1e-9);
    /* Without cpus_now there is nothing to bound by. */
    free(b->cpu_busy_now);
    b->cpu_busy_now = NULL;
    assert_float_equal(vpack_snapshot_bound_now(b), 0, 0);
    assert_float_equal(b->domains[0].vcpus[0].util_now, 0.3, 1e-12);
    /* Absent from what has none. */
    char *j2 = vpack_snapshot_to_json(b);
    assert_null(strstr(j2, "cpus_now"));

    expect_error("{'interval_ms': 1000, 'cpus': {'0': 0.5}, 'cpus_now': {'1': 0.5}, 'domains': []}",
                 "cpus_now: CPU 1 is not in \"cpus\"");
    expect_error("{'interval_ms': 1000, 'cpus': {'0': 0.5}, 'cpus_now': {'0': 2}, 'domains': []}",
                 "cpus_now.0: expected a number from 0 to 1, got 2");
    expect_error("{'interval_ms': 1000, 'cpus': {'0': 0.5}, 'cpus_now': [1], 'domains': []}",
                 "cpus_now: expected an object, got an array");
    vpack_snapshot_free(b);
    vpack_snapshot_free(s);
    free(j);
    free(j2);
    free(in);
}

/* A snapshot built in code: absent fields stay absent through JSON. */
static void test_round_trip_built(void **state)
{
    struct vpack_snapshot *s = vpack_snapshot_new(6, 2), *t;
    char *j, *j2;

    (void)state;
    assert_non_null(s);
    s->interval_ms = 250;
    s->cpu_busy[0] = 0.25;
    s->cpu_busy[5] = 1.0 / 3.0;
    assert_int_equal(vpack_domain_sample_init(&s->domains[0], "a \"quoted\" name/x", -1, 2, 0), 0);
    assert_int_equal(vpack_domain_sample_init(&s->domains[1], "b", 0, 1, 1), 0);
    struct vpack_domain_sample *d = &s->domains[1];
    d->cpuset = malloc(sizeof(vpack_cpuset));
    assert_non_null(d->cpuset);
    assert_int_equal(vpack_cpuset_parse(d->cpuset, "0-3,5", NULL), 0);
    d->vcpus[0].util = 0.1 + 0.2;
    d->vcpus[0].delay = 1e-9;
    d->vcpus[0].cpu = 5;
    d->iothreads[0].pin = malloc(sizeof(vpack_cpuset));
    assert_non_null(d->iothreads[0].pin);
    assert_int_equal(vpack_cpuset_parse(d->iothreads[0].pin, "4", NULL), 0);
    d->emulator.util = 0.5;
    d->emulator.cpu = 2;
    d->memory = calloc(2, sizeof(*d->memory));
    assert_non_null(d->memory);
    d->nmemory = 2;
    d->memory[0] = (struct vpack_mem_share){1, 0.75};
    d->memory[1] = (struct vpack_mem_share){0, 0.25};

    j = vpack_snapshot_to_json(s);
    assert_non_null(j);
    /* Domain a: no level, no cpuset, no iothreads, no memory, no pins, no cpu. */
    assert_non_null(strstr(j, "{\"name\":\"a \\\"quoted\\\" name/x\",\"vcpus\":[{\"id\":0,"
                              "\"util\":0.0,\"delay\":0.0},{\"id\":1,\"util\":0.0,"
                              "\"delay\":0.0}],\"emulator\":{\"util\":0.0,\"delay\":0.0}}"));
    assert_non_null(strstr(j, "\"cpus\":{\"0\":0.25,\"5\":"));
    t = parse_ok(j, strlen(j));
    assert_int_equal(t->interval_ms, 250);
    assert_int_equal(t->ncpus, 6);
    assert_true(t->cpu_busy[0] == 0.25 && t->cpu_busy[5] == 1.0 / 3.0);
    assert_true(t->cpu_busy[1] < 0 && t->cpu_busy[4] < 0);
    assert_string_equal(t->domains[0].name, "a \"quoted\" name/x");
    assert_int_equal(t->domains[0].level, -1);
    assert_null(t->domains[0].cpuset);
    assert_int_equal(t->domains[0].nvcpus, 2);
    d = &t->domains[1];
    assert_int_equal(d->level, 0);
    assert_set(d->cpuset, "0-3,5");
    /* Exactly the same doubles come back. */
    assert_true(d->vcpus[0].util == 0.1 + 0.2);
    assert_true(d->vcpus[0].delay == 1e-9);
    assert_int_equal(d->vcpus[0].cpu, 5);
    assert_int_equal(d->iothreads[0].id, 1);
    assert_set(d->iothreads[0].pin, "4");
    assert_true(d->emulator.util == 0.5);
    assert_int_equal(d->emulator.cpu, 2);
    assert_int_equal(d->nmemory, 2);
    assert_int_equal(d->memory[0].node, 1);
    assert_true(d->memory[0].share == 0.75);
    assert_int_equal(d->memory[1].node, 0);
    j2 = vpack_snapshot_to_json(t);
    assert_string_equal(j, j2);
    vpack_snapshot_free(s);
    vpack_snapshot_free(t);
    free(j);
    free(j2);
}

/*
 * The json_object form (what vpackd embeds in its "snapshot" answer) prints
 * as the string writer's text, alone and inside a larger object.
 */
static void test_to_json_object(void **state)
{
    static const char text[] =
        "{\"interval_ms\":500,\"cpus\":{\"0\":0.8,\"1\":0.1},\"domains\":[{\"name\":\"a\","
        "\"level\":2,\"cpuset\":\"0-1\",\"vcpus\":[{\"id\":0,\"util\":0.3,\"delay\":0.01,"
        "\"pin\":\"1\"}],\"emulator\":{\"util\":0.05,\"delay\":0.0},\"memory\":{\"0\":1.0}}]}";
    struct vpack_snapshot *s = parse_ok(text, strlen(text));
    json_object *o, *ans;
    char *j;

    (void)state;
    o = vpack_snapshot_to_json_object(s);
    assert_non_null(o);
    j = vpack_snapshot_to_json(s);
    assert_non_null(j);
    assert_string_equal(j, text);
    assert_string_equal(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                              JSON_C_TO_STRING_NOSLASHESCAPE),
                        j);
    ans = json_object_new_object();
    assert_non_null(ans);
    assert_int_equal(json_object_object_add(ans, "snapshot", o), 0);
    assert_non_null(strstr(json_object_to_json_string_ext(ans, JSON_C_TO_STRING_PLAIN), j));
    json_object_put(ans);
    vpack_snapshot_free(s);
    free(j);
}

/* 1000 domains of 8 vCPUs (the benchmark's 8,000 vCPUs) parse and round-trip. */
static void test_large(void **state)
{
    const unsigned ndom = 1000, nvcpu = 8, ncpu = 1024;
    size_t cap = 4 << 20, len = 0;
    char *buf = malloc(cap);

    (void)state;
    assert_non_null(buf);
#define PUT(...) (len += (size_t)snprintf(buf + len, cap - len, __VA_ARGS__), assert_true(len < cap))
    PUT("{\"interval_ms\": 1000, \"cpus\": {");
    for (unsigned c = 0; c < ncpu; c++)
        PUT("%s\"%u\": %.2f", c ? ", " : "", c, (c % 100) / 100.0);
    PUT("}, \"domains\": [");
    for (unsigned d = 0; d < ndom; d++) {
        PUT("%s{\"name\": \"vm%04u\", \"level\": %u, \"cpuset\": \"%u-%u\", \"vcpus\": [",
            d ? ", " : "", d, d % 3, (d * 8) % ncpu, (d * 8) % ncpu + 7);
        for (unsigned v = 0; v < nvcpu; v++)
            PUT("%s{\"id\": %u, \"util\": 0.%02u, \"delay\": 0.01, \"cpu\": %u}", v ? ", " : "",
                v, (d + v) % 100, (d * 8 + v) % ncpu);
        PUT("], \"emulator\": {\"util\": 0.01}, \"iothreads\": [{\"id\": 1, \"pin\": \"%u\"}],"
            " \"memory\": {\"%u\": 1}}", d % ncpu, d % 4);
    }
    PUT("]}");
    struct vpack_snapshot *s = parse_ok(buf, len);
    assert_int_equal(s->ncpus, ncpu);
    assert_int_equal(s->ndomains, ndom);
    assert_string_equal(s->domains[999].name, "vm0999");
    assert_int_equal(s->domains[999].level, 999 % 3);
    assert_int_equal(s->domains[999].nvcpus, nvcpu);
    assert_close(s->domains[999].vcpus[7].util, ((999 + 7) % 100) / 100.0);
    assert_set(s->domains[999].iothreads[0].pin, "999");
    char *json = vpack_snapshot_to_json(s);
    assert_non_null(json);
    struct vpack_snapshot *t = parse_ok(json, strlen(json));
    assert_int_equal(t->ndomains, ndom);
    vpack_snapshot_free(t);
    vpack_snapshot_free(s);
    free(json);

    /* A duplicate name at the end of a large snapshot is found. */
    len -= 2;
    PUT(", {\"name\": \"vm0003\", \"vcpus\": []}]}");
    char *err = NULL;
    s = NULL;
    assert_int_equal(vpack_snapshot_parse(buf, len, &s, &err), -EINVAL);
    assert_string_equal(err, "domains[1000] (vm0003).name: duplicate domain name (also domains[3])");
    free(err);
#undef PUT
    free(buf);
}

/* The plan's JSON. */

static json_object *get(json_object *o, const char *key)
{
    json_object *v = NULL;

    if (!json_object_object_get_ex(o, key, &v))
        fail_msg("key '%s' missing in %s", key, json_object_to_json_string(o));
    return v;
}

static void assert_json_string(json_object *v, const char *s)
{
    assert_int_equal(json_object_get_type(v), json_type_string);
    assert_string_equal(json_object_get_string(v), s);
}

static void assert_json_int(json_object *v, int i)
{
    assert_int_equal(json_object_get_type(v), json_type_int);
    assert_int_equal(json_object_get_int(v), i);
}

static void test_plan_to_json(void **state)
{
    vpack_cpuset c3, c07, c2, c47;
    int active[] = {1, 0}, pk_web[] = {1}, pk_db[] = {0, 1};
    struct vpack_plan_thread web_vcpus[] = {{0, &c3, false}, {1, &c07, true}};
    struct vpack_plan_thread web_io[] = {{1, &c2, false}};
    struct vpack_plan_thread db_vcpus[] = {{0, &c47, true}};
    struct vpack_plan_domain doms[] = {
        {.name = "web1", .level = 2, .npackages = 1, .packages = pk_web, .moved = true,
         .reason = "packed onto package 1: light load", .nvcpus = 2, .vcpus = web_vcpus,
         .emulator = {-1, &c07, true}, .niothreads = 1, .iothreads = web_io},
        {.name = "db \"1\"", .level = 0, .npackages = 2, .packages = pk_db, .moved = false,
         .reason = NULL, .nvcpus = 1, .vcpus = db_vcpus, .emulator = {-1, &c47, false},
         .niothreads = 0, .iothreads = NULL},
    };
    struct vpack_plan plan = {
        .nactive = 2, .active_packages = active, .wakeup_package = 1, .lifted = false,
        .demand = 0.4, .reason = "2 packages hold 1.3 CPUs", .ndomains = 2, .domains = doms,
        .priv = NULL,
    };
    char *text;
    json_object *root, *d, *t;

    (void)state;
    assert_int_equal(vpack_cpuset_parse(&c3, "3", NULL), 0);
    assert_int_equal(vpack_cpuset_parse(&c07, "0-7", NULL), 0);
    assert_int_equal(vpack_cpuset_parse(&c2, "2", NULL), 0);
    assert_int_equal(vpack_cpuset_parse(&c47, "4-5,7", NULL), 0);

    text = vpack_plan_to_json(&plan);
    assert_non_null(text);
    assert_null(strchr(text, '\n'));
    /* 0.4, not 0.40000000000000002. */
    assert_non_null(strstr(text, "\"demand\":0.4,"));
    root = json_tokener_parse(text);
    assert_non_null(root);

    t = get(root, "active_packages");
    assert_int_equal(json_object_array_length(t), 2);
    assert_json_int(json_object_array_get_idx(t, 0), 1);
    assert_json_int(json_object_array_get_idx(t, 1), 0);
    assert_json_int(get(root, "wakeup_package"), 1);
    assert_int_equal(json_object_get_type(get(root, "lifted")), json_type_boolean);
    assert_false(json_object_get_boolean(get(root, "lifted")));
    assert_true(json_object_get_double(get(root, "demand")) == 0.4);
    assert_json_string(get(root, "reason"), "2 packages hold 1.3 CPUs");

    t = get(root, "domains");
    assert_int_equal(json_object_array_length(t), 2);
    d = json_object_array_get_idx(t, 0);
    assert_json_string(get(d, "name"), "web1");
    assert_json_int(get(d, "level"), 2);
    assert_int_equal(json_object_array_length(get(d, "packages")), 1);
    assert_json_int(json_object_array_get_idx(get(d, "packages"), 0), 1);
    assert_true(json_object_get_boolean(get(d, "moved")));
    assert_json_string(get(d, "reason"), "packed onto package 1: light load");
    json_object *v = get(d, "vcpus");
    assert_int_equal(json_object_array_length(v), 2);
    assert_json_int(get(json_object_array_get_idx(v, 0), "id"), 0);
    assert_json_string(get(json_object_array_get_idx(v, 0), "cpus"), "3");
    assert_json_int(get(json_object_array_get_idx(v, 1), "id"), 1);
    assert_json_string(get(json_object_array_get_idx(v, 1), "cpus"), "0-7");
    assert_json_string(get(d, "emulator"), "0-7");
    v = get(d, "iothreads");
    assert_int_equal(json_object_array_length(v), 1);
    assert_json_int(get(json_object_array_get_idx(v, 0), "id"), 1);
    assert_json_string(get(json_object_array_get_idx(v, 0), "cpus"), "2");

    d = json_object_array_get_idx(t, 1);
    assert_json_string(get(d, "name"), "db \"1\"");
    assert_json_int(get(d, "level"), 0);
    assert_int_equal(json_object_array_length(get(d, "packages")), 2);
    assert_false(json_object_get_boolean(get(d, "moved")));
    assert_null(get(d, "reason"));
    assert_json_string(get(json_object_array_get_idx(get(d, "vcpus"), 0), "cpus"), "4-5,7");
    assert_json_string(get(d, "emulator"), "4-5,7");
    /* A domain without iothreads has an empty list, not a missing key. */
    assert_int_equal(json_object_get_type(get(d, "iothreads")), json_type_array);
    assert_int_equal(json_object_array_length(get(d, "iothreads")), 0);
    json_object_put(root);
    free(text);

    /* No wake-up package, restrictions lifted, no domains. */
    plan.wakeup_package = -1;
    plan.lifted = true;
    plan.demand = 3;
    plan.ndomains = 0;
    plan.domains = NULL;
    text = vpack_plan_to_json(&plan);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"wakeup_package\":null,\"lifted\":true,\"demand\":3.0,"));
    root = json_tokener_parse(text);
    assert_non_null(root);
    assert_null(get(root, "wakeup_package"));
    assert_true(json_object_get_boolean(get(root, "lifted")));
    assert_true(json_object_get_double(get(root, "demand")) == 3.0);
    assert_int_equal(json_object_array_length(get(root, "domains")), 0);
    json_object_put(root);
    free(text);

    /* The demand's last bits are noise: 10 significant digits are written. */
    plan.demand = 0.3 + 0.57;
    text = vpack_plan_to_json(&plan);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"demand\":0.87,"));
    free(text);

    /* No active package at all. */
    plan.nactive = 0;
    plan.active_packages = NULL;
    text = vpack_plan_to_json(&plan);
    assert_non_null(text);
    assert_non_null(strstr(text, "{\"active_packages\":[],"));
    free(text);
}

/* The key order of the plan, as policy.h documents it. */
static void test_plan_to_json_order(void **state)
{
    vpack_cpuset c0;
    int active[] = {0};
    struct vpack_plan_thread vc[] = {{0, &c0, false}};
    struct vpack_plan_domain dom = {.name = "a", .level = 1, .npackages = 1, .packages = active,
                                    .reason = "r", .nvcpus = 1, .vcpus = vc,
                                    .emulator = {-1, &c0, false}};
    struct vpack_plan plan = {.nactive = 1, .active_packages = active, .wakeup_package = 0,
                              .demand = 0.25, .reason = "why", .ndomains = 1, .domains = &dom};
    char *text;

    (void)state;
    vpack_cpuset_zero(&c0);
    vpack_cpuset_set(&c0, 0);
    text = vpack_plan_to_json(&plan);
    assert_non_null(text);
    assert_string_equal(text,
                        "{\"active_packages\":[0],\"wakeup_package\":0,\"lifted\":false,"
                        "\"demand\":0.25,\"why\":\"first\",\"reason\":\"why\","
                        "\"domains\":[{\"name\":\"a\","
                        "\"level\":1,\"packages\":[0],\"moved\":false,\"reason\":\"r\","
                        "\"vcpus\":[{\"id\":0,\"cpus\":\"0\"}],\"emulator\":\"0\","
                        "\"iothreads\":[]}]}");
    free(text);
}

/* Two parses of one text: the same input, then one field changed at a time. */
static void test_within(void **state)
{
    (void)state;
    const char base[] =
        "{\"interval_ms\": 1000, \"cpus\": {\"0\": 0.50, \"1\": 0.02}, \"domains\": ["
        "{\"name\": \"web\", \"level\": 2, \"cpuset\": \"0-1\", \"vcpus\": ["
        "{\"id\": 0, \"util\": 0.40, \"delay\": 0.01, \"pin\": \"0\"},"
        "{\"id\": 1, \"util\": 0.00, \"delay\": 0.0}],"
        "\"emulator\": {\"util\": 0.01}, \"iothreads\": [{\"id\": 1, \"util\": 0.0}],"
        "\"memory\": {\"0\": 1.0}}]}";
    static const struct {
        const char *from, *to;
        bool within; /* with a band of 0.02 */
    } cases[] = {
        {"\"0\": 0.50", "\"0\": 0.515", true},    /* CPU load inside the band */
        {"\"0\": 0.50", "\"0\": 0.53", false},    /* ... and outside it */
        {"\"1\": 0.02", "\"1\": 0.00", true},
        {"\"1\": 0.02", "\"2\": 0.02", false},    /* another CPU reports */
        {"\"util\": 0.40", "\"util\": 0.41", true},
        {"\"util\": 0.40", "\"util\": 1.40", false}, /* a load step */
        {"\"delay\": 0.01", "\"delay\": 0.30", false},
        {"\"level\": 2", "\"level\": 1", false},
        {"\"cpuset\": \"0-1\"", "\"cpuset\": \"0\"", false},
        {"\"pin\": \"0\"", "\"pin\": \"1\"", false},
        {"\"emulator\": {\"util\": 0.01}", "\"emulator\": {\"util\": 0.05}", false},
        {"\"memory\": {\"0\": 1.0}", "\"memory\": {\"1\": 1.0}", false},
        {"\"name\": \"web\"", "\"name\": \"db\"", false},
        {"\"interval_ms\": 1000", "\"interval_ms\": 2000", false},
        {",{\"id\": 1, \"util\": 0.00, \"delay\": 0.0}]", "]", false}, /* a vCPU went */
    };
    struct vpack_snapshot *a = NULL, *b = NULL;
    char *err = NULL;
    assert_int_equal(vpack_snapshot_parse(base, strlen(base), &a, &err), 0);
    assert_int_equal(vpack_snapshot_parse(base, strlen(base), &b, &err), 0);
    assert_true(vpack_snapshot_within(a, b, 0.0));
    assert_false(vpack_snapshot_within(a, NULL, 1.0));
    vpack_snapshot_free(b);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[2048];
        const char *at = strstr(base, cases[i].from);
        assert_non_null(at);
        snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - base), base, cases[i].to,
                 at + strlen(cases[i].from));
        if (vpack_snapshot_parse(text, strlen(text), &b, &err) < 0)
            fail_msg("case %zu: %s", i, err ? err : "?");
        if (vpack_snapshot_within(a, b, 0.02) != cases[i].within ||
            vpack_snapshot_within(b, a, 0.02) != cases[i].within)
            fail_msg("case %zu (%s -> %s): within is %d, want %d", i, cases[i].from, cases[i].to,
                     !cases[i].within, cases[i].within);
        vpack_snapshot_free(b);
    }
    vpack_snapshot_free(a);
}

/* The CPUs' part alone: what vpackd compares before it reads the domains. */
static void test_cpus_within(void **state)
{
    (void)state;
    const char text[] = "{\"interval_ms\": 1000, \"cpus\": {\"0\": 0.50, \"2\": 0.10}, "
                        "\"domains\": []}";
    struct vpack_snapshot *a = NULL;
    char *err = NULL;
    assert_int_equal(vpack_snapshot_parse(text, strlen(text), &a, &err), 0);
    assert_int_equal(a->ncpus, 3);
    const double same[] = {0.51, -1, 0.09}, step[] = {0.50, -1, 0.13}, more[] = {0.5, -1, 0.1, 0},
                 online[] = {0.50, 0.0, 0.10}, gone[] = {0.50, -1, -1};
    assert_true(vpack_snapshot_cpus_within(a, same, 3, 0.02));
    assert_false(vpack_snapshot_cpus_within(a, same, 3, 0.0));
    assert_false(vpack_snapshot_cpus_within(a, step, 3, 0.02)); /* a load step on CPU 2 */
    assert_false(vpack_snapshot_cpus_within(a, more, 4, 0.02)); /* a CPU more */
    assert_false(vpack_snapshot_cpus_within(a, online, 3, 0.02)); /* CPU 1 reports now */
    assert_false(vpack_snapshot_cpus_within(a, gone, 3, 0.02)); /* CPU 2 went offline */
    assert_false(vpack_snapshot_cpus_within(a, same, 2, 0.02));
    assert_false(vpack_snapshot_cpus_within(a, NULL, 3, 0.02));
    assert_false(vpack_snapshot_cpus_within(NULL, same, 3, 0.02));
    vpack_snapshot_free(a);
}

/* A CPU's light band: the steady band while quiet, twice its noise, at most cap. */
static void test_cpu_band(void **state)
{
    (void)state;
    double noise = 0, band = 0;
    /* Quiet: the steady band. */
    for (int k = 0; k < 50; k++)
        band = vpack_cpu_band_update(&noise, 0.30, 0.305, 0.02, 0.1);
    assert_float_equal(band, 0.02, 1e-9);
    assert_float_equal(noise, 0.005, 1e-3);
    /* Busy shares alternating 0.30 / 0.34: the noise tends to 0.04, the band to 0.08. */
    for (int k = 0; k < 100; k++)
        band = vpack_cpu_band_update(&noise, k % 2 ? 0.30 : 0.34, k % 2 ? 0.34 : 0.30, 0.02, 0.1);
    assert_float_equal(noise, 0.04, 1e-3);
    assert_float_equal(band, 0.08, 2e-3);
    /* A step of a whole CPU counts at most cap: one step raises the noise by cap / 8 at most,
     * and the band never passes cap. */
    double before = noise;
    band = vpack_cpu_band_update(&noise, 0.30, 1.0, 0.02, 0.1);
    assert_true(noise <= before + (0.1 - before) / 8 + 1e-12);
    assert_true(band <= 0.1 + 1e-12);
    for (int k = 0; k < 100; k++)
        band = vpack_cpu_band_update(&noise, 0.0, 1.0, 0.02, 0.1);
    assert_float_equal(band, 0.1, 1e-9);
    /* Not read (offline, first interval): the noise stays. */
    before = noise;
    vpack_cpu_band_update(&noise, -1, 0.5, 0.02, 0.1);
    vpack_cpu_band_update(&noise, 0.5, -1, 0.02, 0.1);
    assert_float_equal(noise, before, 0);
    /* A cap under the steady band is the steady band. */
    noise = 0.2;
    assert_float_equal(vpack_cpu_band_update(&noise, -1, -1, 0.05, 0.01), 0.05, 1e-12);
}

/* A snapshot of CPU 0 at 0.50 and CPU 1 at 0.10, no domain. */
static struct vpack_snapshot *two_cpus(void)
{
    static const char text[] = "{\"interval_ms\": 1000, \"cpus\": {\"0\": 0.50, \"1\": 0.10}, "
                               "\"domains\": []}";
    return parse_ok(text, strlen(text));
}

/* Per-CPU bands: each CPU against its own. */
static void test_cpus_within_each(void **state)
{
    (void)state;
    struct vpack_snapshot *a = two_cpus();
    const double busy[] = {0.56, 0.13}, wide[] = {0.08, 0.04}, narrow[] = {0.02, 0.08};
    assert_true(vpack_snapshot_cpus_within_each(a, busy, 2, wide));
    assert_false(vpack_snapshot_cpus_within_each(a, busy, 2, narrow)); /* CPU 0 moved 0.06 */
    assert_false(vpack_snapshot_cpus_within_each(a, busy, 2, NULL));
    assert_false(vpack_snapshot_cpus_within_each(NULL, busy, 2, wide));
    vpack_snapshot_free(a);
}

/*
 * A move to read the domains for at once: a big one, one that lasted two
 * intervals on the same side, or a CPU coming or going; a small move of one
 * interval waits.
 */
static void test_cpus_moved(void **state)
{
    (void)state;
    struct vpack_snapshot *a = two_cpus();
    const double bands[] = {0.04, 0.04}, wide[] = {0.2, 0.2};
    const double calm[] = {0.50, 0.10};
    double now[2] = {0.56, 0.10}, last[2] = {0.50, 0.10};

    /* +0.06 for one interval: beyond the band, below at_once: waits. */
    assert_false(vpack_snapshot_cpus_moved(a, now, last, 2, bands, 0.1));
    /* The same in the interval before: it lasted. */
    last[0] = 0.55;
    assert_true(vpack_snapshot_cpus_moved(a, now, last, 2, bands, 0.1));
    /* Below the band before, above it now: two sides, no move that lasted. */
    last[0] = 0.44;
    assert_false(vpack_snapshot_cpus_moved(a, now, last, 2, bands, 0.1));
    /* Not read the interval before: waits. */
    last[0] = -1;
    assert_false(vpack_snapshot_cpus_moved(a, now, last, 2, bands, 0.1));
    /* Beyond at_once, up or down: at once. */
    now[0] = 0.65;
    assert_true(vpack_snapshot_cpus_moved(a, now, calm, 2, bands, 0.1));
    now[0] = 0.38;
    assert_true(vpack_snapshot_cpus_moved(a, now, calm, 2, bands, 0.1));
    /* Down for two intervals, on CPU 1. */
    now[0] = 0.50;
    now[1] = 0.05;
    last[0] = 0.50;
    last[1] = 0.04;
    assert_true(vpack_snapshot_cpus_moved(a, now, last, 2, bands, 0.1));
    /* A band wider than at_once: the band rules, also for a move of one interval. */
    now[1] = 0.10;
    now[0] = 0.65;
    assert_false(vpack_snapshot_cpus_moved(a, now, calm, 2, wide, 0.1));
    now[0] = 0.75;
    assert_true(vpack_snapshot_cpus_moved(a, now, calm, 2, wide, 0.1));
    /* Within the band: no move, whatever came before. */
    assert_false(vpack_snapshot_cpus_moved(a, calm, now, 2, bands, 0.1));
    /* A CPU that went offline (not read now) or came back. */
    now[0] = -1;
    assert_true(vpack_snapshot_cpus_moved(a, now, calm, 2, bands, 0.1));
    a->cpu_busy[0] = -1;
    assert_true(vpack_snapshot_cpus_moved(a, calm, calm, 2, bands, 0.1));
    assert_false(vpack_snapshot_cpus_moved(a, now, calm, 2, bands, 0.1)); /* both not read */
    /* Nothing to compare with: read. */
    assert_true(vpack_snapshot_cpus_moved(NULL, calm, calm, 2, bands, 0.1));
    assert_true(vpack_snapshot_cpus_moved(a, calm, NULL, 2, bands, 0.1));
    assert_true(vpack_snapshot_cpus_moved(a, calm, calm, 2, NULL, 0.1));
    assert_true(vpack_snapshot_cpus_moved(a, calm, calm, 1, bands, 0.1));
    vpack_snapshot_free(a);
}

/* vpack_snapshot_dup(): the same snapshot (its JSON), nothing shared. */
static void test_dup(void **unused)
{
    (void)unused;
    struct vpack_snapshot *s = parse_ok(spec_example, strlen(spec_example));
    assert_int_equal(vpack_snapshot_want_now(s), 0);
    s->cpu_busy_now[0] = 0.5;
    struct vpack_snapshot *c = vpack_snapshot_dup(s);
    char *a = vpack_snapshot_to_json(s), *b = vpack_snapshot_to_json(c);

    assert_non_null(c);
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(a, b);
    assert_ptr_not_equal(c->domains[0].vcpus[0].pin, s->domains[0].vcpus[0].pin);
    assert_ptr_not_equal(c->domains[0].cpuset, s->domains[0].cpuset);
    assert_ptr_not_equal(c->domains[0].memory, s->domains[0].memory);
    assert_true(c->cpu_busy_now[0] == 0.5);
    vpack_cpuset_zero(c->domains[0].vcpus[0].pin);
    assert_true(vpack_cpuset_isset(s->domains[0].vcpus[0].pin, 3));
    free(a);
    free(b);
    vpack_snapshot_free(s);
    vpack_snapshot_free(c); /* ASan: no double free, no leak */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_and_init),
        cmocka_unit_test(test_cpu_band),
        cmocka_unit_test(test_cpus_within_each),
        cmocka_unit_test(test_cpus_moved),
        cmocka_unit_test(test_parse_spec_example),
        cmocka_unit_test(test_parse_example_file),
        cmocka_unit_test(test_parse_series_file),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_parse_not_nul_terminated),
        cmocka_unit_test(test_unknown_keys_ignored),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_errors_top_level),
        cmocka_unit_test(test_errors_domain),
        cmocka_unit_test(test_errors_threads),
        cmocka_unit_test(test_errors_duplicates),
        cmocka_unit_test(test_errors_syntax),
        cmocka_unit_test(test_error_quoting),
        cmocka_unit_test(test_parse_first),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_now_values),
        cmocka_unit_test(test_cpus_now),
        cmocka_unit_test(test_round_trip_built),
        cmocka_unit_test(test_to_json_object),
        cmocka_unit_test(test_large),
        cmocka_unit_test(test_plan_to_json),
        cmocka_unit_test(test_plan_to_json_order),
        cmocka_unit_test(test_json_number),
        cmocka_unit_test(test_within),
        cmocka_unit_test(test_cpus_within),
        cmocka_unit_test(test_dup),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
