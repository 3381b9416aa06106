// SPDX-License-Identifier: MIT
/*
 * The domain-XML reader: every libvirt fixture in $VPACK_FIXTURES/domains
 * against its record written by hand in $VPACK_TESTDATA/domains, libvirt
 * 9.0's rules one at a time, the define rewrite, and xml/ (the schema,
 * checked with xmllint, and the examples).
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include "vpack/domrecord.h"
#include "vpack/domxml.h"

/* ---- Helpers ---- */

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n = 0;

    if (!f)
        fail_msg("cannot open %s: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
        fail_msg("cannot size %s", path);
    buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n)
        fail_msg("cannot read %s", path);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static const char *env_dir(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v)
        fail_msg("%s is not set (run the test through meson)", name);
    return v;
}

/* The source tree: $VPACK_TESTDATA is <source>/tests/data. */
static void source_path(char *out, size_t len, const char *rel)
{
    snprintf(out, len, "%s/../../%s", env_dir("VPACK_TESTDATA"), rel);
}

static struct vpack_domxml *parse_ok(const char *xml)
{
    struct vpack_domxml *d = NULL;
    char *msg = NULL;
    int r = vpack_domxml_parse(xml, strlen(xml), &d, &msg);
    if (r != 0)
        fail_msg("parse failed (%d): %s\nXML: %s", r, msg ? msg : "(no message)", xml);
    assert_null(msg);
    return d;
}

/* Parses xml, expecting failure with a message containing every needle. */
static void parse_err(const char *xml, ...)
{
    struct vpack_domxml *d = NULL;
    char *msg = NULL;
    const char *needle;
    va_list ap;
    int r = vpack_domxml_parse(xml, strlen(xml), &d, &msg);

    if (r == 0)
        fail_msg("parse succeeded but should fail\nXML: %s", xml);
    assert_int_equal(r, -EINVAL);
    assert_null(d);
    assert_non_null(msg);
    if (strchr(msg, '\n'))
        fail_msg("message has a newline: '%s'", msg);
    va_start(ap, xml);
    while ((needle = va_arg(ap, const char *)))
        if (!strstr(msg, needle))
            fail_msg("message '%s' does not contain '%s'\nXML: %s", msg, needle, xml);
    va_end(ap);
    free(msg);
}

static char *json_of(const char *xml)
{
    struct vpack_domxml *d = parse_ok(xml);
    char *j = vpack_domxml_to_json(d);
    assert_non_null(j);
    vpack_domxml_free(d);
    return j;
}

/* Compares a record with the expected JSON text structurally. */
static void expect_json(const char *xml, const char *expected)
{
    char *got = json_of(xml);
    json_object *a = json_tokener_parse(got), *b = json_tokener_parse(expected);

    assert_non_null(a);
    if (!b)
        fail_msg("bad expected JSON: %s", expected);
    if (!json_object_equal(a, b))
        fail_msg("record differs\n got:      %s\n expected: %s\nXML: %s", got, expected, xml);
    json_object_put(a);
    json_object_put(b);
    free(got);
}

#define DOM(body)                                                                   \
    "<domain type='qemu'><name>t</name>"                                            \
    "<uuid>c7a5fdbd-edaf-9455-926a-d65c16db1809</uuid>" body "</domain>"
#define META(el) DOM("<metadata>" el "</metadata><vcpu>2</vcpu>")
#define NS "xmlns:vpack='urn:vpack:powerpolicy:1'"

static int level_of(const char *xml)
{
    struct vpack_domxml *d = parse_ok(xml);
    int level = d->level;
    vpack_domxml_free(d);
    return level;
}

/* ---- The libvirt fixtures ---- */

/* $VPACK_FIXTURES/domains, opened; its path in dir. */
static DIR *open_fixture_dir(char *dir, size_t len)
{
    DIR *dp;
    snprintf(dir, len, "%s/domains", env_dir("VPACK_FIXTURES"));
    if (!(dp = opendir(dir)))
        fail_msg("cannot open %s: %s", dir, strerror(errno));
    return dp;
}

static void test_fixtures(void **state)
{
    char dir[4096], path[4096 + 512], expected_path[4096];
    const char *testdata = env_dir("VPACK_TESTDATA");
    struct dirent *e;
    DIR *dp;
    int checked = 0;

    (void)state;
    dp = open_fixture_dir(dir, sizeof(dir));
    while ((e = readdir(dp))) {
        size_t n = strlen(e->d_name), xlen, jlen;
        char *xml, *ejson, *msg = NULL;
        json_object *want, *err;
        struct vpack_domxml *d = NULL;
        int r;

        if (n < 5 || strcmp(e->d_name + n - 4, ".xml") != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        snprintf(expected_path, sizeof(expected_path), "%s/domains/%.*s.expected.json", testdata,
                 (int)(n - 4), e->d_name);
        if (access(expected_path, R_OK) != 0)
            fail_msg("fixture %s has no expected record %s", e->d_name, expected_path);
        xml = read_file(path, &xlen);
        ejson = read_file(expected_path, &jlen);
        want = json_tokener_parse(ejson);
        if (!want)
            fail_msg("%s is not valid JSON", expected_path);
        r = vpack_domxml_parse(xml, xlen, &d, &msg);
        if (json_object_object_get_ex(want, "error", &err)) {
            if (r == 0)
                fail_msg("%s: parsed, but %s expects an error", e->d_name, expected_path);
            assert_int_equal(r, -EINVAL);
            assert_string_equal(msg, json_object_get_string(err));
        } else {
            char *got;
            json_object *have;

            if (r != 0)
                fail_msg("%s: %s", e->d_name, msg ? msg : "parse failed");
            got = vpack_domxml_to_json(d);
            assert_non_null(got);
            have = json_tokener_parse(got);
            assert_non_null(have);
            if (!json_object_equal(have, want))
                fail_msg("%s: record differs\n got:      %s\n expected: %s", e->d_name, got,
                         json_object_to_json_string_ext(want, JSON_C_TO_STRING_PLAIN));
            json_object_put(have);
            free(got);
        }
        json_object_put(want);
        vpack_domxml_free(d);
        free(msg);
        free(ejson);
        free(xml);
        checked++;
    }
    closedir(dp);
    /* The README lists ten. */
    assert_true(checked >= 10);
}

/* Reads a record back with vpack_domxml_from_json(); fails the test on an error. */
static struct vpack_domxml *from_json_ok(const char *json)
{
    struct vpack_domxml *d = NULL;
    char *msg = NULL;
    int r = vpack_domxml_from_json(json, strlen(json), &d, &msg);
    if (r != 0)
        fail_msg("cannot read back %s: %s", json, msg ? msg : "?");
    return d;
}

/* Writes and reads back the record of one fixture; 1 when it is valid XML, else 0. */
static int round_trip_fixture(const char *path)
{
    struct vpack_domxml *d = NULL, *back;
    size_t xlen;
    char *xml = read_file(path, &xlen), *j, *j2;
    int valid = vpack_domxml_parse(xml, xlen, &d, NULL) == 0;

    free(xml);
    if (!valid)
        return 0;
    j = vpack_domxml_to_json(d);
    assert_non_null(j);
    back = from_json_ok(j);
    assert_string_equal(back->name, d->name);
    assert_int_equal(back->has_uuid, d->has_uuid);
    assert_int_equal(back->level, d->level);
    assert_int_equal(back->vcpus, d->vcpus);
    assert_int_equal(back->nvcpupin, d->nvcpupin);
    for (size_t i = 0; i < d->nvcpupin; i++) {
        assert_int_equal(back->vcpupin[i].vcpu, d->vcpupin[i].vcpu);
        assert_true(vpack_cpuset_equal(&back->vcpupin[i].cpus, &d->vcpupin[i].cpus));
    }
    assert_int_equal(back->has_emulatorpin, d->has_emulatorpin);
    assert_int_equal(back->niothreadpin, d->niothreadpin);
    assert_int_equal(back->numatune.nmemnodes, d->numatune.nmemnodes);
    j2 = vpack_domxml_to_json(back);
    assert_non_null(j2);
    assert_string_equal(j2, j);
    vpack_domxml_free(back);
    vpack_domxml_free(d);
    free(j);
    free(j2);
    return 1;
}

/*
 * The hook writes a record (vpack_domxml_to_json) and vpackd reads it back
 * (vpack_domxml_from_json): every fixture comes back field for field and
 * writes the same text again.
 */
static void test_json_round_trip(void **state)
{
    char dir[4096], path[4096 + 512];
    DIR *dp = open_fixture_dir(dir, sizeof(dir));
    int checked = 0;

    (void)state;
    for (struct dirent *e; (e = readdir(dp));) {
        size_t n = strlen(e->d_name);
        if (n > 4 && !strcmp(e->d_name + n - 4, ".xml")) {
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            checked += round_trip_fixture(path);
        }
    }
    closedir(dp);
    assert_true(checked >= 9);
}

/*
 * A damaged record is refused with the path of its bad member named, in
 * json.h's checked reader's words; absent keys are defaults.
 */
static void test_json_read_errors(void **state)
{
    static const struct {
        const char *json, *msg;
    } bad[] = {
        {"[]",
         "domain record: expected an object (a domain record), got an array"},
        {"{\"name\":\"a\",\"cpuset\":\"x\"}",
         "domain record: cpuset: invalid cpuset 'x': expected a CPU number at character 1"},
        {"{\"uuid\":null}",
         "domain record: name: missing (required)"},
        {"{\"name\":\"a\",\"vcpupin\":{\"0\":\"1-\"}}",
         "domain record: vcpupin.0: invalid cpuset '1-': expected the end of a range at "
         "character 3"},
        {"{\"name\":\"a\",\"vcpupin\":{\"-1\":\"1\"}}",
         "domain record: vcpupin: key \"-1\" is not a decimal id"},
        {"{\"name\":\"a\",\"level\":3}",
         "domain record: level: expected 0, 1, 2 or null, got 3"},
        {"{\"name\":\"a\",\"emulatorpin\":7}",
         "domain record: emulatorpin: expected a CPU set, got 7"},
        {"{\"name\":\"a\",\"iothreadpin\":{\"1\":\"\"}}",
         "domain record: iothreadpin.1: invalid cpuset '': empty list at character 1"},
        {"{\"name\":\"a\",\"numatune\":{\"memory\":{\"mode\":\"x\"}}}",
         "domain record: numatune.memory.mode: expected a numatune mode (strict, "
         "preferred, interleave or restrictive), got \"x\""},
        {"{\"name\":",
         "domain record: invalid JSON: unexpected end of data"},
        /* Issue 14, item 13: pins no reader output has make the whole record damaged. */
        {"{\"name\":\"a\",\"vcpus\":2,\"vcpupin\":{\"2\":\"1\"}}",
         "domain record: vcpupin.2: a pin for a vCPU the domain does not have (\"vcpus\" is 2)"},
        {"{\"name\":\"a\",\"vcpus\":2,\"vcpupin\":{\"1\":\"0\",\"01\":\"1\"}}",
         "domain record: vcpupin.1: a second pin for the same vCPU"},
        {"{\"name\":\"a\",\"iothreads\":[1],\"iothreadpin\":{\"2\":\"1\"}}",
         "domain record: iothreadpin.2: a pin for an iothread the domain does not have "
         "(not in \"iothreads\")"},
        {"{\"name\":\"a\",\"iothreadpin\":{\"1\":\"0\"}}",
         "domain record: iothreadpin.1: a pin for an iothread the domain does not have "
         "(not in \"iothreads\")"},
        {"{\"name\":\"a\",\"iothreads\":[1],\"iothreadpin\":{\"1\":\"0\",\"001\":\"1\"}}",
         "domain record: iothreadpin.1: a second pin for the same iothread"},
        {"{\"name\":\"a\",\"emulatorpin\":\"^0\"}",
         "domain record: emulatorpin: invalid cpuset '^0': the set has no CPU at character 3"},
        {"{\"name\":\"a\",\"emulatorpin\":\"0,x\"}",
         "domain record: emulatorpin: invalid cpuset '0,x': expected a CPU number at character 3"},
        {"{\"name\":\"a\",\"iothreads\":[1],\"iothreadpin\":{\"1\":[0]}}",
         "domain record: iothreadpin.1: expected a CPU set, got an array"},
        {"{\"name\":\"a\",\"vcpus\":4,\"vcpupin\":{\"3\":5}}",
         "domain record: vcpupin.3: expected a CPU set, got 5"},
        {"{\"name\":\"a\",\"vcpus\":-1}",
         "domain record: vcpus: expected an integer from 0 to 16384, got -1"},
        {"{\"name\":\"a\",\"uuid\":\"x\"}",
         "domain record: uuid: expected a UUID, got \"x\""},
        {"{\"name\":5}",
         "domain record: name: expected a string, got 5"},
        {"{\"name\":\"a\",\"placement\":\"dynamic\"}",
         "domain record: placement: expected \"static\" or \"auto\", got \"dynamic\""},
        {"{\"name\":\"a\",\"iothreads\":[\"x\"]}",
         "domain record: iothreads[0]: expected an iothread id (an integer >= 0), got \"x\""},
        {"{\"name\":\"a\",\"iothreads\":{}}",
         "domain record: iothreads: expected an array, got an object"},
        {"{\"name\":\"a\",\"numatune\":{\"memory\":{\"mode\":\"strict\"}}}",
         "domain record: numatune.memory.placement: missing (required)"},
        {"{\"name\":\"a\",\"numatune\":{\"memory\":{\"mode\":\"strict\","
         "\"placement\":\"static\"}}}",
         "domain record: numatune.memory: a static placement needs a \"nodeset\""},
        {"{\"name\":\"a\",\"numatune\":{\"memnode\":{\"0\":{\"mode\":\"strict\"}}}}",
         "domain record: numatune.memnode.0: a cell needs a \"nodeset\""},
        {"{\"name\":\"a\",\"numatune\":{\"memnode\":{\"x\":{\"mode\":\"strict\"}}}}",
         "domain record: numatune.memnode: key \"x\" is not a decimal id"},
        {"{\"name\":\"a\",\"numatune\":{\"memnode\":{\"0\":3}}}",
         "domain record: numatune.memnode.0: expected an object, got 3"},
        {"{\"name\":\"a\",\"numatune\":[]}",
         "domain record: numatune: expected an object, got an array"},
        {"null",
         "domain record: expected an object (a domain record), got null"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct vpack_domxml *d = NULL;
        char *msg = NULL;
        assert_int_equal(vpack_domxml_from_json(bad[i].json, strlen(bad[i].json), &d, &msg),
                         -EINVAL);
        assert_null(d);
        assert_non_null(msg);
        if (strcmp(msg, bad[i].msg))
            fail_msg("%s: message '%s', expected '%s'", bad[i].json, msg, bad[i].msg);
        free(msg);
    }
    struct vpack_domxml *d =
        from_json_ok("{\"name\":\"t\",\"vcpus\":4,\"vcpupin\":{\"3\":\"1\",\"1\":\"0-1\"}}");
    assert_int_equal(d->level, -1);
    assert_false(d->has_uuid);
    assert_false(d->has_cpuset);
    assert_int_equal(d->nvcpupin, 2);
    assert_int_equal(d->vcpupin[0].vcpu, 1);
    assert_int_equal(d->vcpupin[1].vcpu, 3);
    vpack_domxml_free(d);
}

/*
 * Issue 14, item 13: a record is the domain's only when every thread it
 * pins exists in the running domain; else it is damaged as a whole and the
 * agent leaves the domain alone (a pin dropped silently would let vpack
 * move a thread the guest pinned).
 */
static void test_request_check(void **state)
{
    struct vpack_domxml *live = parse_ok(DOM("<vcpu>2</vcpu><iothreads>1</iothreads>"));
    static const char *const bad[] = {
        "{\"name\":\"a\",\"vcpus\":4,\"vcpupin\":{\"3\":\"1\"}}",
        "{\"name\":\"a\",\"vcpus\":2,\"iothreads\":[1,2],\"iothreadpin\":{\"2\":\"1\"}}",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct vpack_domxml *req = from_json_ok(bad[i]);
        char *msg = NULL;
        assert_int_equal(vpack_domxml_request_check(req, live, &msg), -EINVAL);
        assert_non_null(msg);
        assert_non_null(strstr(msg, "the domain has"));
        free(msg);
        vpack_domxml_free(req);
    }
    struct vpack_domxml *req = from_json_ok(
        "{\"name\":\"a\",\"vcpus\":2,\"vcpupin\":{\"1\":\"1\"},\"emulatorpin\":\"0\","
        "\"iothreads\":[1],\"iothreadpin\":{\"1\":\"0\"}}");
    assert_int_equal(vpack_domxml_request_check(req, live, NULL), 0);
    vpack_domxml_free(req);
    vpack_domxml_free(live);
}

/* The invalid fixture names its bad value, as the hook must. */
static void test_fixture_cpuset_invalid(void **state)
{
    char path[4096];
    size_t len;
    char *xml, *msg = NULL;
    struct vpack_domxml *d = NULL;

    (void)state;
    snprintf(path, sizeof(path), "%s/domains/cpuset-invalid.xml", env_dir("VPACK_FIXTURES"));
    xml = read_file(path, &len);
    assert_int_equal(vpack_domxml_parse(xml, len, &d, &msg), -EINVAL);
    assert_non_null(strstr(msg, "'aaa'"));
    assert_non_null(strstr(msg, "domain 'QEMUGuest1'"));
    free(msg);
    free(xml);
}

/* ---- The power policy ---- */

static void test_level_values(void **state)
{
    (void)state;
    assert_int_equal(level_of(META("<vpack:powerpolicy " NS " level='0'/>")), 0);
    assert_int_equal(level_of(META("<vpack:powerpolicy " NS " level='1'/>")), 1);
    assert_int_equal(level_of(META("<vpack:powerpolicy " NS " level=\"2\"/>")), 2);
    assert_int_equal(level_of(DOM("<vcpu>2</vcpu>")), -1);
    assert_int_equal(level_of(DOM("<metadata/><vcpu>2</vcpu>")), -1);

    parse_err(META("<vpack:powerpolicy " NS " level='7'/>"), "domain 't'", "'7'", NULL);
    parse_err(META("<vpack:powerpolicy " NS " level='two'/>"), "domain 't'", "'two'", NULL);
    parse_err(META("<vpack:powerpolicy " NS " level=' 1'/>"), "' 1'", NULL);
    parse_err(META("<vpack:powerpolicy " NS " level='1 '/>"), "'1 '", NULL);
    parse_err(META("<vpack:powerpolicy " NS " level='01'/>"), "'01'", NULL);
    parse_err(META("<vpack:powerpolicy " NS " level='-1'/>"), "'-1'", NULL);
    parse_err(META("<vpack:powerpolicy " NS " level=''/>"), "level=''", NULL);
    parse_err(META("<vpack:powerpolicy " NS "/>"), "domain 't'", "missing attribute 'level'",
              NULL);
    /* A namespaced attribute is not the level attribute. */
    parse_err(META("<vpack:powerpolicy " NS " vpack:level='1'/>"), "missing attribute 'level'",
              NULL);

    assert_int_equal(vpack_domxml_level_parse("2"), 2);
    assert_int_equal(vpack_domxml_level_parse("3"), -EINVAL);
    assert_int_equal(vpack_domxml_level_parse(""), -EINVAL);
    assert_int_equal(vpack_domxml_level_parse(NULL), -EINVAL);
}

static void test_level_namespaces(void **state)
{
    (void)state;
    /* libvirt drops an un-namespaced element in <metadata> and an unknown
     * element under <domain>: both mean "no policy" to the reader. */
    assert_int_equal(level_of(META("<powerpolicy level='2'/>")), -1);
    assert_int_equal(level_of(DOM("<powerpolicy level='2'/><vcpu>2</vcpu>")), -1);
    assert_int_equal(level_of(DOM("<vpack:powerpolicy " NS " level='2'/><vcpu>2</vcpu>")), -1);
    /* The prefix does not matter, the URI does. */
    assert_int_equal(level_of(META("<p:powerpolicy xmlns:p='urn:vpack:powerpolicy:1' level='1'/>")), 1);
    assert_int_equal(level_of(META("<powerpolicy xmlns='urn:vpack:powerpolicy:1' level='2'/>")), 2);
    assert_int_equal(level_of(META("<vpack:powerpolicy xmlns:vpack='urn:vpack:powerpolicy:2' level='2'/>")), -1);
    /* Other namespaces' metadata is left alone. */
    assert_int_equal(level_of(META("<app:x xmlns:app='urn:app'/><powerpolicy level='7'/>"
                                   "<vpack:powerpolicy " NS " level='1'/>")), 1);
    /* libvirt keeps only the first element of a namespace. */
    assert_int_equal(level_of(META("<vpack:powerpolicy " NS " level='1'/>"
                                   "<vpack:powerpolicy " NS " level='7'/>")), 1);
    parse_err(META("<vpack:other " NS "/><vpack:powerpolicy " NS " level='1'/>"),
              "<vpack:other>", "urn:vpack:powerpolicy:1", NULL);
    /* Only the first <metadata> counts. */
    assert_int_equal(level_of(DOM("<metadata/><metadata><vpack:powerpolicy " NS
                                  " level='2'/></metadata><vcpu>1</vcpu>")), -1);
}

/* ---- vCPUs ---- */

static void test_vcpus(void **state)
{
    struct vpack_domxml *d;

    (void)state;
    /* No <vcpu> at all: one vCPU. */
    expect_json(DOM(""), "{\"name\":\"t\",\"uuid\":\"c7a5fdbd-edaf-9455-926a-d65c16db1809\","
                         "\"level\":null,\"vcpus\":1,\"vcpus_current\":1,\"online\":\"0\","
                         "\"placement\":\"static\",\"cpuset\":null,\"vcpupin\":{},"
                         "\"emulatorpin\":null,\"iothreads\":[],\"iothreadpin\":{}}");
    d = parse_ok(DOM("<vcpu current='3'>8</vcpu>"));
    assert_int_equal(d->vcpus, 8);
    assert_int_equal(d->vcpus_current, 3);
    assert_int_equal(vpack_cpuset_count(&d->online), 3);
    assert_true(vpack_cpuset_isset(&d->online, 2));
    vpack_domxml_free(d);
    /* libvirt's number syntax: leading blanks and '+' are fine. */
    d = parse_ok(DOM("<vcpu current=' +1'> 2</vcpu>"));
    assert_int_equal(d->vcpus, 2);
    assert_int_equal(d->vcpus_current, 1);
    vpack_domxml_free(d);

    parse_err(DOM("<vcpu current='5'>4</vcpu>"), "domain 't'", "current='5'", "exceeds", NULL);
    parse_err(DOM("<vcpu>two</vcpu>"), "<vcpu>", "'two'", NULL);
    parse_err(DOM("<vcpu>2 </vcpu>"), "<vcpu>", NULL);
    parse_err(DOM("<vcpu></vcpu>"), "<vcpu>", NULL);
    parse_err(DOM("<vcpu>0</vcpu>"), "<vcpu>", "at least 1", NULL);
    parse_err(DOM("<vcpu current='0'>2</vcpu>"), "no online vCPU", NULL);
    parse_err(DOM("<vcpu current='-1'>2</vcpu>"), "current='-1'", NULL);
    parse_err(DOM("<vcpu current='x'>2</vcpu>"), "current='x'", NULL);
    parse_err(DOM("<vcpu>16385</vcpu>"), "16385", "vpack", NULL);
    /* "-1" wraps to UINT_MAX in libvirt's virStrToLong_ui. */
    parse_err(DOM("<vcpu>-1</vcpu>"), "4294967295", NULL);
    parse_err(DOM("<vcpu placement='bogus'>2</vcpu>"), "placement='bogus'", NULL);
    parse_err(DOM("<vcpu placement=''>2</vcpu>"), "placement=''", NULL);
    parse_err(DOM("<vcpu cpuset='aaa'>2</vcpu>"), "<vcpu cpuset='aaa'>: invalid cpuset 'aaa'",
              NULL);
    parse_err(DOM("<vcpu cpuset=''>2</vcpu>"), "cpuset=''", NULL);
    parse_err(DOM("<vcpu cpuset='^1'>2</vcpu>"), "cpuset='^1'", NULL);
    parse_err(DOM("<vcpu cpuset='16384'>2</vcpu>"), "cpuset='16384'", NULL);
    /* The first <vcpu> counts. */
    d = parse_ok(DOM("<vcpu>3</vcpu><vcpu>x</vcpu>"));
    assert_int_equal(d->vcpus, 3);
    vpack_domxml_free(d);
}

static void test_vcpus_individual(void **state)
{
    struct vpack_domxml *d;

    (void)state;
    d = parse_ok(DOM("<vcpu current='1'>3</vcpu><vcpus><vcpu id='2' enabled='yes'/></vcpus>"));
    assert_int_equal(d->vcpus_current, 1);
    assert_true(vpack_cpuset_isset(&d->online, 2));
    assert_false(vpack_cpuset_isset(&d->online, 0));
    vpack_domxml_free(d);
    /* With <vcpus>, current= is ignored even when too large. */
    d = parse_ok(DOM("<vcpu current='9'>3</vcpu><vcpus><vcpu id='0' enabled='yes'/>"
                     "<vcpu id='1' enabled='yes' hotpluggable='no' order='1'/></vcpus>"));
    assert_int_equal(d->vcpus_current, 2);
    vpack_domxml_free(d);
    /* A later entry for the same id wins. */
    d = parse_ok(DOM("<vcpu>3</vcpu><vcpus><vcpu id='2' enabled='no'/><vcpu id='2' enabled='yes'/>"
                     "</vcpus>"));
    assert_int_equal(d->vcpus_current, 1);
    vpack_domxml_free(d);

    parse_err(DOM("<vcpu>3</vcpu><vcpus><vcpu id='3' enabled='yes'/></vcpus>"), "id='3'",
              "out of range", NULL);
    parse_err(DOM("<vcpu>3</vcpu><vcpus><vcpu id='1' enabled='maybe'/></vcpus>"),
              "enabled='maybe'", NULL);
    parse_err(DOM("<vcpu>3</vcpu><vcpus><vcpu id='1'/></vcpus>"), "'enabled'", NULL);
    parse_err(DOM("<vcpu>3</vcpu><vcpus><vcpu enabled='yes'/></vcpus>"), "'id'", NULL);
    parse_err(DOM("<vcpu>3</vcpu><vcpus><vcpu id='1' enabled='yes' hotpluggable='x'/></vcpus>"),
              "hotpluggable='x'", NULL);
    parse_err(DOM("<vcpu>3</vcpu><vcpus><vcpu id='1' enabled='yes' order='-2'/></vcpus>"),
              "order='-2'", NULL);
    parse_err(DOM("<vcpu current='1'>3</vcpu><vcpus><vcpu id='1' enabled='no'/></vcpus>"),
              "no online vCPU", NULL);
}

/* ---- iothreads ---- */

static void test_iothreads(void **state)
{
    struct vpack_domxml *d;

    (void)state;
    /* libvirt completes missing ids with the lowest unused ones. */
    d = parse_ok(DOM("<vcpu>1</vcpu><iothreads>4</iothreads><iothreadids><iothread id='5'/>"
                     "<iothread id='6'/></iothreadids>"));
    assert_int_equal(d->niothreads, 4);
    assert_int_equal(d->iothreads[0], 1);
    assert_int_equal(d->iothreads[1], 2);
    assert_int_equal(d->iothreads[2], 5);
    assert_int_equal(d->iothreads[3], 6);
    vpack_domxml_free(d);
    expect_json(DOM("<iothreads>3</iothreads><iothreadids><iothread id='2'/></iothreadids>"
                    "<cputune><iothreadpin iothread='3' cpuset='0-1'/></cputune>"),
                "{\"name\":\"t\",\"uuid\":\"c7a5fdbd-edaf-9455-926a-d65c16db1809\","
                "\"level\":null,\"vcpus\":1,\"vcpus_current\":1,\"online\":\"0\","
                "\"placement\":\"static\",\"cpuset\":null,\"vcpupin\":{},"
                "\"emulatorpin\":null,\"iothreads\":[1,2,3],\"iothreadpin\":{\"3\":\"0-1\"}}");
    /* More ids than <iothreads>: the ids win. */
    d = parse_ok(DOM("<iothreads>1</iothreads><iothreadids><iothread id='9'/><iothread id='3'/>"
                     "</iothreadids>"));
    assert_int_equal(d->niothreads, 2);
    assert_int_equal(d->iothreads[0], 3);
    assert_int_equal(d->iothreads[1], 9);
    vpack_domxml_free(d);
    /* An empty <iothreads> is no count at all. */
    d = parse_ok(DOM("<iothreads></iothreads>"));
    assert_int_equal(d->niothreads, 0);
    vpack_domxml_free(d);

    parse_err(DOM("<iothreads>x</iothreads>"), "<iothreads>", "'x'", NULL);
    parse_err(DOM("<iothreads>-1</iothreads>"), "'-1'", NULL);
    parse_err(DOM("<iothreads>20000</iothreads>"), "20000", NULL);
    parse_err(DOM("<iothreadids><iothread id='0'/></iothreadids>"), "id='0'", "zero", NULL);
    parse_err(DOM("<iothreadids><iothread/></iothreadids>"), "'id'", NULL);
    parse_err(DOM("<iothreadids><iothread id='3'/><iothread id='3'/></iothreadids>"),
              "id='3'", "duplicate", NULL);
    /* libvirt stops at the first problem in document order. */
    parse_err(DOM("<iothreadids><iothread id='3'/><iothread id='3'/><iothread id='x'/>"
                  "</iothreadids>"), "duplicate", NULL);
    parse_err(DOM("<iothreadids><iothread id='3'/><iothread id='x'/><iothread id='3'/>"
                  "</iothreadids>"), "id='x'", NULL);
    parse_err(DOM("<iothreads>1</iothreads><cputune><iothreadpin iothread='2' cpuset='1'/>"
                  "</cputune>"), "iothread='2'", "no iothread 2", NULL);
    parse_err(DOM("<iothreads>1</iothreads><cputune><iothreadpin iothread='1' cpuset='1'/>"
                  "<iothreadpin iothread='1' cpuset='2'/></cputune>"), "duplicate", NULL);
    parse_err(DOM("<iothreads>1</iothreads><cputune><iothreadpin iothread='1'/></cputune>"),
              "missing cpuset", NULL);
    parse_err(DOM("<iothreads>1</iothreads><cputune><iothreadpin iothread='1' cpuset='z'/>"
                  "</cputune>"), "<iothreadpin iothread='1' cpuset='z'>", NULL);
}

/* ---- cputune ---- */

static void test_vcpupin(void **state)
{
    struct vpack_domxml *d;

    (void)state;
    /* libvirt 9.0 ignores a pin for a vCPU the domain does not have
     * ("Ignoring vcpupin for missing vcpus"), whatever its cpuset; vpack
     * does the same and keeps a warning. */
    d = parse_ok(DOM("<vcpu>2</vcpu><cputune><vcpupin vcpu='2' cpuset='1'/>"
                     "<vcpupin vcpu='7' cpuset='aaa'/><vcpupin vcpu='9'/>"
                     "<vcpupin vcpu='1' cpuset='0-3,^2'/></cputune>"));
    assert_int_equal(d->nvcpupin, 1);
    assert_int_equal(d->vcpupin[0].vcpu, 1);
    assert_int_equal(vpack_cpuset_count(&d->vcpupin[0].cpus), 3);
    assert_int_equal(d->nwarnings, 3);
    assert_non_null(strstr(d->warnings[0], "vcpu='2'"));
    vpack_domxml_free(d);
    /* Every <cputune> counts; the record is sorted. */
    expect_json(DOM("<vcpu>3</vcpu><cputune><vcpupin vcpu='2' cpuset='5'/></cputune>"
                    "<cputune><vcpupin vcpu='0' cpuset='4,1-2'/><emulatorpin cpuset='7'/></cputune>"),
                "{\"name\":\"t\",\"uuid\":\"c7a5fdbd-edaf-9455-926a-d65c16db1809\","
                "\"level\":null,\"vcpus\":3,\"vcpus_current\":3,\"online\":\"0-2\","
                "\"placement\":\"static\",\"cpuset\":null,\"vcpupin\":{\"0\":\"1-2,4\",\"2\":\"5\"},"
                "\"emulatorpin\":\"7\",\"iothreads\":[],\"iothreadpin\":{}}");

    parse_err(DOM("<vcpu>2</vcpu><cputune><vcpupin vcpu='0' cpuset='1'/>"
                  "<vcpupin vcpu='0' cpuset='2'/></cputune>"), "domain 't'", "vcpu='0'",
              "duplicate", NULL);
    parse_err(DOM("<vcpu>2</vcpu><cputune><vcpupin vcpu='0' cpuset='1'/></cputune>"
                  "<cputune><vcpupin vcpu='0' cpuset='1'/></cputune>"), "duplicate", NULL);
    parse_err(DOM("<vcpu>2</vcpu><cputune><vcpupin vcpu='0'/></cputune>"), "missing cpuset",
              NULL);
    parse_err(DOM("<vcpu>2</vcpu><cputune><vcpupin cpuset='1'/></cputune>"), "'vcpu'", NULL);
    parse_err(DOM("<vcpu>2</vcpu><cputune><vcpupin vcpu='-1' cpuset='1'/></cputune>"),
              "vcpu='-1'", NULL);
    parse_err(DOM("<vcpu>2</vcpu><cputune><vcpupin vcpu='1' cpuset='3-1'/></cputune>"),
              "<vcpupin vcpu='1' cpuset='3-1'>", "3-1", NULL);
    parse_err(DOM("<vcpu>2</vcpu><cputune><emulatorpin cpuset='1'/><emulatorpin cpuset='2'/>"
                  "</cputune>"), "only one <emulatorpin>", NULL);
    parse_err(DOM("<vcpu>2</vcpu><cputune><emulatorpin/></cputune>"), "<emulatorpin>",
              "missing cpuset", NULL);
    parse_err(DOM("<vcpu>2</vcpu><cputune><emulatorpin cpuset='1,'/><emulatorpin cpuset='x'/>"
                  "</cputune>"), "only one", NULL);
}

/* ---- numatune ---- */

static void test_numatune(void **state)
{
    struct vpack_domxml *d;

    (void)state;
    /* placement='auto' implies automatic memory placement... */
    d = parse_ok(DOM("<vcpu placement='auto' cpuset='aaa'>2</vcpu>"));
    assert_int_equal(d->placement, VPACK_VCPU_PLACEMENT_AUTO);
    assert_false(d->has_cpuset); /* libvirt does not read cpuset then */
    assert_true(d->numatune.present);
    assert_int_equal(d->numatune.memory_mode, VPACK_NUMA_MODE_STRICT);
    assert_int_equal(d->numatune.memory_placement, VPACK_NUMA_PLACEMENT_AUTO);
    vpack_domxml_free(d);
    /* ...unless numatune says otherwise. */
    d = parse_ok(DOM("<vcpu placement='auto'>2</vcpu><numatune><memory nodeset='0'/></numatune>"));
    assert_int_equal(d->placement, VPACK_VCPU_PLACEMENT_AUTO);
    assert_int_equal(d->numatune.memory_placement, VPACK_NUMA_PLACEMENT_STATIC);
    vpack_domxml_free(d);
    d = parse_ok(DOM("<vcpu placement='auto'>2</vcpu><numatune><memory/></numatune>"));
    assert_false(d->numatune.present);
    vpack_domxml_free(d);
    /* Automatic memory placement makes unpinned vCPUs automatic too. */
    d = parse_ok(DOM("<vcpu>2</vcpu><numatune><memory placement='auto' nodeset='1'/></numatune>"));
    assert_int_equal(d->placement, VPACK_VCPU_PLACEMENT_AUTO);
    vpack_domxml_free(d);
    d = parse_ok(DOM("<vcpu>2</vcpu><cputune><emulatorpin cpuset='1'/></cputune>"
                     "<numatune><memory placement='auto'/></numatune>"));
    assert_int_equal(d->placement, VPACK_VCPU_PLACEMENT_STATIC);
    vpack_domxml_free(d);
    expect_json(DOM("<vcpu>2</vcpu><cpu><numa><cell id='0' cpus='0-1' memory='1024'/>"
                    "</numa></cpu><numatune><memnode cellid='0' nodeset='1-2,^2'/>"
                    "<memory mode='restrictive' nodeset='0'/></numatune>"),
                "{\"name\":\"t\",\"uuid\":\"c7a5fdbd-edaf-9455-926a-d65c16db1809\","
                "\"level\":null,\"vcpus\":2,\"vcpus_current\":2,\"online\":\"0-1\","
                "\"placement\":\"static\",\"cpuset\":null,\"vcpupin\":{},"
                "\"emulatorpin\":null,\"iothreads\":[],\"iothreadpin\":{},"
                "\"numatune\":{\"memory\":{\"mode\":\"restrictive\",\"placement\":\"static\","
                "\"nodeset\":\"0\"},\"memnode\":{\"0\":{\"mode\":\"strict\",\"nodeset\":\"1\"}}}}");

    parse_err(DOM("<vcpu>2</vcpu><numatune><memory mode='strict'/></numatune>"), "nodeset",
              "static", NULL);
    parse_err(DOM("<vcpu>2</vcpu><numatune><memory mode='bogus' nodeset='0'/></numatune>"),
              "mode='bogus'", NULL);
    parse_err(DOM("<vcpu>2</vcpu><numatune><memory placement='x'/></numatune>"),
              "placement='x'", NULL);
    parse_err(DOM("<vcpu>2</vcpu><numatune><memory nodeset='a'/></numatune>"), "nodeset='a'",
              NULL);
    parse_err(DOM("<vcpu>2</vcpu><numatune/><numatune/>"), "only one <numatune>", NULL);
    parse_err(DOM("<vcpu>2</vcpu><numatune><memnode cellid='0' nodeset='1'/></numatune>"),
              "without any guest NUMA cells", NULL);
    parse_err(DOM("<vcpu>2</vcpu><cpu><numa><cell id='0' cpus='0-1' memory='1'/></numa></cpu>"
                  "<numatune><memory placement='auto'/><memnode cellid='0' nodeset='1'/>"
                  "</numatune>"), "automatic", NULL);
    parse_err(DOM("<vcpu>2</vcpu><cpu><numa><cell id='0' cpus='0-1' memory='1'/></numa></cpu>"
                  "<numatune><memnode cellid='1' nodeset='1'/></numatune>"), "cellid='1'", NULL);
    parse_err(DOM("<vcpu>2</vcpu><cpu><numa><cell id='0' cpus='0-1' memory='1'/></numa></cpu>"
                  "<numatune><memnode cellid='0' nodeset='1'/><memnode cellid='0' nodeset='2'/>"
                  "</numatune>"), "multiple", NULL);
    parse_err(DOM("<vcpu>2</vcpu><cpu><numa><cell id='0' cpus='0-1' memory='1'/></numa></cpu>"
                  "<numatune><memnode cellid='0'/></numatune>"), "missing nodeset", NULL);
    parse_err(DOM("<vcpu>2</vcpu><cpu><numa/></cpu>"), "without NUMA cells", NULL);
}

/* ---- The document ---- */

static void test_document(void **state)
{
    struct vpack_domxml *d = NULL;
    char *msg = NULL, *name = NULL, *uuid = NULL;

    (void)state;
    assert_int_equal(vpack_domxml_parse("", 0, &d, &msg), -EINVAL);
    assert_string_equal(msg, "domain XML: the document is empty");
    free(msg);
    parse_err("<domain type='qemu'><name>t</name><vcpu>2</vcpu>", "domain XML:",
              "not well-formed", NULL);
    parse_err("<domain type='qemu'><name>t</name></domian>", "not well-formed", NULL);
    parse_err("<network><name>t</name></network>", "domain XML:", "<network>", NULL);
    parse_err("not xml at all", "not well-formed", NULL);
    parse_err("<!DOCTYPE domain [<!ENTITY x 'y'>]><domain><name>&x;</name></domain>",
              "DOCTYPE", NULL);
    parse_err("<domain type='qemu'><vcpu>1</vcpu></domain>", "domain XML:", "no name", NULL);
    parse_err("<domain type='qemu'><name></name></domain>", "no name", NULL);
    parse_err("<domain type='qemu'><name>a/b</name></domain>", "'/'", NULL);
    parse_err("<domain type='qemu'><name>a&#10;b</name></domain>", "a\\nb", NULL);
    parse_err("<domain type='qemu'><name>t</name><uuid>xyz</uuid></domain>", "domain 't'",
              "<uuid>", "'xyz'", NULL);
    /* A namespaced root's children are not libvirt's. */
    parse_err("<domain xmlns='urn:x'><name>t</name></domain>", "no name", NULL);

    /* libvirt's liberal uuid syntax, printed canonically. */
    d = parse_ok("<domain type='qemu'><name>t</name>"
                 "<uuid> C7A5FDBD-EDAF 9455926a-d65c16db1809 </uuid></domain>");
    assert_true(d->has_uuid);
    assert_string_equal(d->uuid, "c7a5fdbd-edaf-9455-926a-d65c16db1809");
    vpack_domxml_free(d);
    d = parse_ok("<domain type='qemu'><name>t</name><uuid></uuid></domain>");
    assert_false(d->has_uuid);
    vpack_domxml_free(d);

    /* The identity reader tolerates what the full reader refuses. */
    assert_int_equal(vpack_domxml_identity(DOM("<vcpu cpuset='aaa'>2</vcpu>"),
                                           strlen(DOM("<vcpu cpuset='aaa'>2</vcpu>")), &name,
                                           &uuid, &msg), 0);
    assert_string_equal(name, "t");
    assert_string_equal(uuid, "c7a5fdbd-edaf-9455-926a-d65c16db1809");
    free(name);
    free(uuid);
    {
        static const char bad_uuid[] = "<domain><name>u</name><uuid>bad</uuid></domain>";
        assert_int_equal(vpack_domxml_identity(bad_uuid, strlen(bad_uuid), &name, &uuid, &msg), 0);
    }
    assert_string_equal(name, "u");
    assert_null(uuid);
    free(name);
    assert_int_equal(vpack_domxml_identity("<domain/>", 9, &name, &uuid, &msg), -EINVAL);
    assert_non_null(msg);
    free(msg);
}

/* Messages are one line, however strange the value. */
static void test_messages_one_line(void **state)
{
    char big[2000];
    char xml[3000];
    struct vpack_domxml *d = NULL;
    char *msg = NULL;

    (void)state;
    parse_err(DOM("<vcpu cpuset='1&#10;2'>2</vcpu>"), "cpuset='1\\n2'", NULL);
    parse_err(DOM("<vcpu cpuset='1&#9;x'>2</vcpu>"), "\\t", NULL);
    memset(big, 'z', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    snprintf(xml, sizeof(xml), DOM("<vcpu cpuset='%s'>2</vcpu>"), big);
    assert_int_equal(vpack_domxml_parse(xml, strlen(xml), &d, &msg), -EINVAL);
    assert_true(strlen(msg) <= 490);
    assert_non_null(strstr(msg, "..."));
    free(msg);
}

/* ---- The define rewrite ---- */

static char *rewrite_ok(const char *xml, int want_level)
{
    char *out = NULL, *msg = NULL;
    int level = -2;
    int r = vpack_domxml_define_rewrite(xml, strlen(xml), &out, &level, &msg);

    if (r != 0)
        fail_msg("rewrite failed (%d): %s\nXML: %s", r, msg ? msg : "-", xml);
    assert_int_equal(level, want_level);
    assert_non_null(out);
    if (want_level >= 0) {
        /* The result reads back with that level and no short form left. */
        assert_int_equal(level_of(out), want_level);
        if (strstr(out, "<powerpolicy"))
            fail_msg("short form left in:\n%s", out);
        assert_non_null(strstr(out, "<vpack:powerpolicy xmlns:vpack=\"urn:vpack:powerpolicy:1\""));
    }
    return out;
}

static void rewrite_err(const char *xml, const char *needle)
{
    char *out = NULL, *msg = NULL;
    int level = -2;
    int r = vpack_domxml_define_rewrite(xml, strlen(xml), &out, &level, &msg);

    assert_int_equal(r, -EINVAL);
    assert_null(out);
    assert_int_equal(level, -1);
    assert_non_null(msg);
    if (!strstr(msg, needle))
        fail_msg("message '%s' does not contain '%s'", msg, needle);
    free(msg);
}

static void test_define_rewrite_forms(void **state)
{
    char *out;

    (void)state;
    /* Short form under <domain>: <metadata> is created after <uuid>. */
    out = rewrite_ok("<domain type='qemu'>\n"
                     "  <name>web1</name>\n"
                     "  <uuid>c7a5fdbd-edaf-9455-926a-d65c16db1809</uuid>\n"
                     "  <powerpolicy level='2'/>\n"
                     "  <memory unit='KiB'>219136</memory>\n"
                     "</domain>\n", 2);
    assert_string_equal(out, "<domain type=\"qemu\">\n"
                             "  <name>web1</name>\n"
                             "  <uuid>c7a5fdbd-edaf-9455-926a-d65c16db1809</uuid>\n"
                             "  <metadata>\n"
                             "    <vpack:powerpolicy xmlns:vpack=\"urn:vpack:powerpolicy:1\" "
                             "level=\"2\"/>\n"
                             "  </metadata>\n"
                             "  <memory unit=\"KiB\">219136</memory>\n"
                             "</domain>\n");
    free(out);

    /* Short form in <metadata>, next to another application's element. */
    out = rewrite_ok("<domain type='qemu'>\n"
                     "  <name>web1</name>\n"
                     "  <metadata>\n"
                     "    <app:x xmlns:app='urn:app'/>\n"
                     "    <powerpolicy level='1'/>\n"
                     "  </metadata>\n"
                     "</domain>", 1);
    assert_string_equal(out, "<domain type=\"qemu\">\n"
                             "  <name>web1</name>\n"
                             "  <metadata>\n"
                             "    <app:x xmlns:app=\"urn:app\"/>\n"
                             "    <vpack:powerpolicy xmlns:vpack=\"urn:vpack:powerpolicy:1\" "
                             "level=\"1\"/>\n"
                             "  </metadata>\n"
                             "</domain>\n");
    free(out);

    /* Already namespaced (any prefix): rewritten to vpack's own form. */
    out = rewrite_ok("<domain type='qemu'><name>w</name><metadata><p:powerpolicy "
                     "xmlns:p='urn:vpack:powerpolicy:1' level='0'/></metadata></domain>", 0);
    free(out);

    /* All three at once, agreeing. */
    out = rewrite_ok("<domain type='qemu'><name>w</name><powerpolicy level='2'/><metadata>"
                     "<powerpolicy level='2'/><vpack:powerpolicy " NS " level='2'/>"
                     "</metadata><vcpu>1</vcpu></domain>", 2);
    assert_int_equal((int)(strstr(out, "powerpolicy") - out) > 0, 1);
    assert_null(strstr(strstr(out, "powerpolicy") + 1, "powerpolicy "));
    free(out);

    /* Compact XML and no <name>/<uuid> before the first element. */
    out = rewrite_ok("<domain type='qemu'><vcpu>1</vcpu><name>n</name>"
                     "<powerpolicy level='1'/></domain>", 1);
    free(out);
    /* Nothing else in <domain> (not a valid domain: no re-read). */
    {
        static const char bare[] = "<domain type='qemu'><powerpolicy level='1'/></domain>";
        int level = -2;
        char *msg = NULL;
        assert_int_equal(vpack_domxml_define_rewrite(bare, strlen(bare), &out, &level, &msg), 0);
        assert_int_equal(level, 1);
        assert_string_equal(out, "<domain type=\"qemu\"><metadata>\n"
                                 "  <vpack:powerpolicy xmlns:vpack=\"urn:vpack:powerpolicy:1\" "
                                 "level=\"1\"/>\n"
                                 "</metadata></domain>\n");
        free(out);
    }

    /* No policy: the text comes back unchanged. */
    out = rewrite_ok("<domain type='qemu'><name>n</name>  <!-- c --></domain>", -1);
    assert_string_equal(out, "<domain type='qemu'><name>n</name>  <!-- c --></domain>");
    free(out);
    /* Another namespace's powerpolicy is not ours. */
    out = rewrite_ok("<domain type='qemu'><name>n</name><metadata><o:powerpolicy "
                     "xmlns:o='urn:other' level='9'/></metadata></domain>", -1);
    free(out);
}

static void test_define_rewrite_errors(void **state)
{
    (void)state;
    rewrite_err("<domain type='qemu'><name>web1</name><powerpolicy level='3'/></domain>",
                "domain 'web1'");
    rewrite_err("<domain type='qemu'><name>web1</name><powerpolicy level='3'/></domain>", "'3'");
    rewrite_err("<domain><name>w</name><metadata><powerpolicy level='two'/></metadata></domain>",
                "'two'");
    rewrite_err("<domain><name>w</name><metadata><vpack:powerpolicy " NS " level=' 1'/>"
                "</metadata></domain>", "' 1'");
    rewrite_err("<domain><name>w</name><powerpolicy/></domain>", "missing attribute 'level'");
    rewrite_err("<domain><name>w</name><powerpolicy level='1'/><metadata><vpack:powerpolicy "
                NS " level='2'/></metadata></domain>", "conflicting");
    /* The invalid level is refused even when a valid one comes first. */
    rewrite_err("<domain><name>w</name><powerpolicy level='1'/><metadata><powerpolicy "
                "level='9'/></metadata></domain>", "'9'");
    rewrite_err("<domain><name>w</name><metadata><vpack:x " NS "/></metadata></domain>",
                "<vpack:x>");
    rewrite_err("<domain><name>w</name><powerpolicy level='1'/>", "not well-formed");
    rewrite_err("<network><powerpolicy level='1'/></network>", "<network>");
    rewrite_err("", "empty");
}

/* ---- xml/: the schema and the examples ---- */

static bool have_xmllint(void)
{
    return system("xmllint --version >/dev/null 2>&1") == 0;
}

/* Validates text against xml/powerpolicy.rng with xmllint; true if valid. */
static bool schema_accepts(const char *text)
{
    char rng[4096], cmd[9000];
    char tmp[] = "/tmp/vpack-test-domxml-XXXXXX";
    int fd = mkstemp(tmp), r;
    FILE *f;

    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    source_path(rng, sizeof(rng), "xml/powerpolicy.rng");
    snprintf(cmd, sizeof(cmd), "xmllint --noout --relaxng '%s' '%s' >/dev/null 2>&1", rng, tmp);
    r = system(cmd);
    unlink(tmp);
    return r == 0;
}

/* The examples' policy element, serialized alone (caller frees). */
static char *policy_element_of(const char *xml, size_t len)
{
    xmlDoc *doc = xmlReadMemory(xml, (int)len, NULL, NULL, XML_PARSE_NONET);
    xmlNode *root, *meta = NULL, *el = NULL;
    xmlBuffer *buf;
    char *out;

    assert_non_null(doc);
    root = xmlDocGetRootElement(doc);
    for (xmlNode *n = root->children; n; n = n->next)
        if (n->type == XML_ELEMENT_NODE && xmlStrEqual(n->name, BAD_CAST "metadata"))
            meta = n;
    assert_non_null(meta);
    for (xmlNode *n = meta->children; n; n = n->next)
        if (n->type == XML_ELEMENT_NODE && n->ns &&
            xmlStrEqual(n->ns->href, BAD_CAST VPACK_XML_NS))
            el = n;
    assert_non_null(el);
    buf = xmlBufferCreate();
    assert_non_null(buf);
    assert_true(xmlNodeDump(buf, doc, el, 0, 0) > 0);
    out = strdup((const char *)xmlBufferContent(buf));
    xmlBufferFree(buf);
    xmlFreeDoc(doc);
    return out;
}

static void test_schema(void **state)
{
    char *out;

    (void)state;
    if (!have_xmllint())
        skip();
    assert_true(schema_accepts("<vpack:powerpolicy " NS " level='0'/>"));
    assert_true(schema_accepts("<vpack:powerpolicy " NS " level='2'/>"));
    assert_true(schema_accepts("<powerpolicy xmlns='urn:vpack:powerpolicy:1' level='1'/>"));
    assert_false(schema_accepts("<vpack:powerpolicy " NS " level='3'/>"));
    assert_false(schema_accepts("<vpack:powerpolicy " NS " level=' 1'/>"));
    assert_false(schema_accepts("<vpack:powerpolicy " NS " level='01'/>"));
    assert_false(schema_accepts("<vpack:powerpolicy " NS "/>"));
    assert_false(schema_accepts("<vpack:powerpolicy " NS " level='1' extra='x'/>"));
    assert_false(schema_accepts("<vpack:powerpolicy " NS " level='1'>text</vpack:powerpolicy>"));
    assert_false(schema_accepts("<powerpolicy level='1'/>"));
    assert_false(schema_accepts("<vpack:powerpolicy xmlns:vpack='urn:vpack:powerpolicy:2' "
                                "level='1'/>"));

    /* What the define rewrite writes is valid too. */
    out = rewrite_ok("<domain><name>w</name><powerpolicy level='1'/></domain>", 1);
    {
        char *el = policy_element_of(out, strlen(out));
        assert_true(schema_accepts(el));
        free(el);
    }
    free(out);
}

static void test_examples(void **state)
{
    static const struct {
        const char *file;
        int level;
        int vcpupins;
    } examples[] = {
        {"xml/examples/domain-level0.xml", 0, 0},
        {"xml/examples/domain-level1.xml", 1, 0},
        {"xml/examples/domain-level2.xml", 2, 0},
        {"xml/examples/domain-level2-pinned.xml", 2, 1},
    };
    bool lint = have_xmllint();

    (void)state;
    for (size_t i = 0; i < sizeof(examples) / sizeof(examples[0]); i++) {
        char path[4096];
        size_t len;
        char *xml, *msg = NULL, *el;
        struct vpack_domxml *d = NULL;

        source_path(path, sizeof(path), examples[i].file);
        xml = read_file(path, &len);
        if (vpack_domxml_parse(xml, len, &d, &msg) != 0)
            fail_msg("%s: %s", examples[i].file, msg);
        assert_int_equal(d->level, examples[i].level);
        assert_int_equal(d->nvcpupin, examples[i].vcpupins);
        assert_non_null(strstr(xml, "<domain type='qemu'>"));
        el = policy_element_of(xml, len);
        if (lint && !schema_accepts(el))
            fail_msg("%s: the schema refuses %s", examples[i].file, el);
        free(el);
        vpack_domxml_free(d);
        free(xml);
    }
}


/* ---- vpack's request in the live metadata ---- */

#define RQNS "xmlns:vpackreq='urn:vpack:request:1'"
#define RQDOM(meta, rest)                                                          \
    DOM("<metadata>" meta "</metadata><vcpu>2</vcpu><iothreads>1</iothreads>"      \
        "<cputune><vcpupin vcpu='0' cpuset='0'/><vcpupin vcpu='1' cpuset='0'/>"     \
        "<emulatorpin cpuset='0'/></cputune>" rest)

/* The rewrite of xml, which must succeed (1); the caller frees it. */
static char *restore_ok(const char *xml)
{
    char *out = NULL, *msg = NULL;
    int r = vpack_domxml_request_restore(xml, strlen(xml), &out, &msg);
    if (r != 1)
        fail_msg("request restore returned %d: %s\nXML: %s", r, msg ? msg : "-", xml);
    assert_null(msg);
    assert_non_null(out);
    return out;
}

/* The rewrite of xml fails with a one-line message holding needle; nothing is written. */
static void restore_err(const char *xml, const char *needle)
{
    char *out = NULL, *msg = NULL;
    int r = vpack_domxml_request_restore(xml, strlen(xml), &out, &msg);
    if (r != -EINVAL)
        fail_msg("request restore returned %d, expected -EINVAL\nXML: %s\nout: %s", r, xml,
                 out ? out : "-");
    assert_null(out);
    assert_non_null(msg);
    if (strchr(msg, '\n') || !strstr(msg, "domain 't': vpack's request in <metadata> "
                                          "(urn:vpack:request:1): ") || !strstr(msg, needle))
        fail_msg("message '%s' does not say '%s' about vpack's request", msg, needle);
    free(msg);
}

/* Each fixture in $VPACK_TESTDATA/request, rewritten, is its .expected.xml byte for byte. */
static void test_request_restore_fixtures(void **state)
{
    char dir[4096], path[4096 + 512], expected[4096 + 512];
    struct dirent *e;
    DIR *dp;
    int checked = 0;

    (void)state;
    snprintf(dir, sizeof(dir), "%s/request", env_dir("VPACK_TESTDATA"));
    if (!(dp = opendir(dir)))
        fail_msg("cannot open %s: %s", dir, strerror(errno));
    while ((e = readdir(dp))) {
        size_t n = strlen(e->d_name), xlen, elen;
        char *xml, *want, *out = NULL, *msg = NULL;
        if (n < 5 || strcmp(e->d_name + n - 4, ".xml") || strstr(e->d_name, ".expected."))
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        snprintf(expected, sizeof(expected), "%s/%.*s.expected.xml", dir, (int)(n - 4),
                 e->d_name);
        xml = read_file(path, &xlen);
        want = read_file(expected, &elen);
        int r = vpack_domxml_request_restore(xml, xlen, &out, &msg);
        if (r != 1)
            fail_msg("%s: %d: %s", e->d_name, r, msg ? msg : "-");
        if (strcmp(out, want))
            fail_msg("%s: rewritten differs from %s\n got:\n%s", e->d_name, expected, out);
        /* What the rewrite gives is what the guest asked for, and no request is left. */
        struct vpack_domxml *d = parse_ok(out);
        char *again = NULL;
        assert_int_equal(vpack_domxml_request_restore(out, strlen(out), &again, &msg), 0);
        assert_null(again);
        vpack_domxml_free(d);
        free(out);
        free(want);
        free(xml);
        checked++;
    }
    closedir(dp);
    assert_true(checked >= 4);
}

/* The request vpackd writes, read back by the rewrite: the same pins, vpack's gone. */
static void test_request_round_trip(void **state)
{
    static const char *const requests[] = {
        "", /* the guest pins nothing */
        "<vcpupin vcpu='1' cpuset='1'/>",
        ("<vcpupin vcpu='0' cpuset='0-1,3'/><vcpupin vcpu='1' cpuset='2'/>"
         "<emulatorpin cpuset='1'/><iothreadpin iothread='1' cpuset='0,2'/>"),
    };
    (void)state;
    for (size_t i = 0; i < sizeof(requests) / sizeof(requests[0]); i++) {
        char own[1024], packed[4096], *req_xml, *out;
        /* The domain as started: the guest's own pins. */
        snprintf(own, sizeof(own),
                 DOM("<vcpu>2</vcpu><iothreads>1</iothreads><cputune>%s</cputune>"), requests[i]);
        struct vpack_domxml *asked = parse_ok(own);
        assert_non_null(req_xml = vpack_domxml_request_format(asked));
        /* The live XML after vpack packed it onto CPU 3: its pins, and the request with
         * the prefix libvirt gives it. */
        size_t inner = strlen(req_xml) - strlen("<request>") - strlen("</request>");
        assert_int_equal(strncmp(req_xml, "<request>", 9), 0);
        snprintf(packed, sizeof(packed),
                 DOM("<metadata><vpackreq:request " RQNS ">%.*s</vpackreq:request></metadata>"
                     "<vcpu>2</vcpu><iothreads>1</iothreads><cputune><vcpupin vcpu='0' "
                     "cpuset='3'/><vcpupin vcpu='1' cpuset='3'/><emulatorpin cpuset='3'/>"
                     "<iothreadpin iothread='1' cpuset='3'/></cputune>"),
                 (int)inner, req_xml + strlen("<request>"));
        out = restore_ok(packed);
        struct vpack_domxml *got = parse_ok(out);
        char *a = vpack_domxml_to_json(asked), *b = vpack_domxml_to_json(got);
        if (strcmp(a, b))
            fail_msg("request %zu: asked %s\n got %s\n from %s", i, a, b, out);
        free(a);
        free(b);
        vpack_domxml_free(got);
        vpack_domxml_free(asked);
        free(out);
        free(req_xml);
    }
}

static void test_request_format(void **state)
{
    struct vpack_domxml *d = parse_ok(
        DOM("<vcpu>4</vcpu><iothreads>2</iothreads><cputune><vcpupin vcpu='3' cpuset='1-2'/>"
            "<vcpupin vcpu='0' cpuset='0,1,2'/><emulatorpin cpuset='0'/>"
            "<iothreadpin iothread='2' cpuset='3'/></cputune>"));
    char *x = vpack_domxml_request_format(d);
    (void)state;
    assert_string_equal(x, "<request><vcpupin vcpu='0' cpuset='0-2'/><vcpupin vcpu='3' "
                           "cpuset='1-2'/><emulatorpin cpuset='0'/><iothreadpin iothread='2' "
                           "cpuset='3'/></request>");
    free(x);
    vpack_domxml_free(d);
    d = parse_ok(DOM("<vcpu>2</vcpu>"));
    x = vpack_domxml_request_format(d);
    assert_string_equal(x, "<request></request>");
    free(x);
    vpack_domxml_free(d);
}

/* No request: nothing to do, whatever else the metadata holds. */
static void test_request_absent(void **state)
{
    static const char *const none[] = {
        DOM("<vcpu>2</vcpu><cputune><vcpupin vcpu='0' cpuset='0'/></cputune>"),
        META("<vpack:powerpolicy " NS " level='2'/>"),
        /* Outside <metadata> libvirt drops it: not a request. */
        DOM("<vpackreq:request " RQNS "/><vcpu>2</vcpu>"),
        /* In no namespace, or in the policy's: not vpack's request. */
        META("<request/>"),
        META("<vpack:request " NS "/>"),
    };
    (void)state;
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
        char *out = NULL, *msg = NULL;
        assert_int_equal(vpack_domxml_request_restore(none[i], strlen(none[i]), &out, &msg), 0);
        assert_null(out);
        assert_null(msg);
    }
}

/* Only the first request counts, as libvirt keeps it; every one is removed. */
static void test_request_first_wins(void **state)
{
    char *out = restore_ok(RQDOM("<vpackreq:request " RQNS "><vcpupin vcpu='1' cpuset='1'/>"
                                 "</vpackreq:request><x:request xmlns:x='urn:vpack:request:1'>"
                                 "<vcpupin vcpu='0' cpuset='0'/></x:request>", ""));
    struct vpack_domxml *d = parse_ok(out);
    (void)state;
    assert_int_equal(d->nvcpupin, 1);
    assert_int_equal(d->vcpupin[0].vcpu, 1);
    assert_false(d->has_emulatorpin);
    assert_null(strstr(out, "urn:vpack:request:1"));
    vpack_domxml_free(d);
    free(out);
}

/* Metadata vpackd did not write: a clear error, and no pin taken from it. */
static void test_request_hostile(void **state)
{
#define RQ(body) RQDOM("<vpackreq:request " RQNS ">" body "</vpackreq:request>", "")
    (void)state;
    restore_err(RQDOM("<vpackreq:pins " RQNS "/>", ""), "<vpackreq:pins>: unknown element");
    restore_err(RQ("<shares>10</shares>"), "<shares>: unknown element");
    restore_err(RQ("<x:vcpupin xmlns:x='urn:other' vcpu='0' cpuset='0'/>"),
                "<x:vcpupin>: unknown element");
    restore_err(RQ("0-1"), "unexpected text");
    restore_err(RQ("<![CDATA[x]]>"), "unexpected text");
    restore_err(RQ("<vcpupin vcpu='2' cpuset='0'/>"), "<vcpupin vcpu='2'>: the domain has 2 vCPUs");
    restore_err(RQ("<vcpupin vcpu='99999999999' cpuset='0'/>"), "expected a non-negative integer");
    restore_err(RQ("<vcpupin vcpu='-1' cpuset='0'/>"), "expected a non-negative integer");
    restore_err(RQ("<vcpupin vcpu='x' cpuset='0'/>"), "expected a non-negative integer");
    restore_err(RQ("<vcpupin cpuset='0'/>"), "missing required attribute 'vcpu'");
    restore_err(RQ("<vcpupin vcpu='0'/>"), "<vcpupin vcpu='0'>: missing cpuset");
    restore_err(RQ("<vcpupin vcpu='0' cpuset='aaa'/>"), "cpuset='aaa'>: invalid cpuset");
    restore_err(RQ("<vcpupin vcpu='0' cpuset=''/>"), "cpuset=''>");
    restore_err(RQ("<vcpupin vcpu='0' cpuset='99999'/>"), "cpuset='99999'>");
    restore_err(RQ("<vcpupin vcpu='1' cpuset='0'/><vcpupin vcpu='1' cpuset='1'/>"),
                "vCPU 1 is pinned twice");
    restore_err(RQ("<emulatorpin cpuset='0'/><emulatorpin cpuset='1'/>"),
                "<emulatorpin>: more than one");
    restore_err(RQ("<emulatorpin/>"), "<emulatorpin>: missing cpuset");
    restore_err(RQ("<iothreadpin iothread='2' cpuset='0'/>"), "the domain has no iothread 2");
    restore_err(RQ("<iothreadpin iothread='0' cpuset='0'/>"), "zero is not permitted");
    restore_err(RQ("<iothreadpin iothread='1' cpuset='0'/><iothreadpin iothread='1' cpuset='0'/>"),
                "iothread 1 is pinned twice");
    restore_err(RQ("<vcpupin vcpu='0' cpuset='1\n2'/>"), "invalid cpuset");
#undef RQ
    /* A document that is no domain is refused as the reader refuses it. */
    char *out = NULL, *msg = NULL;
    assert_int_equal(vpack_domxml_request_restore("<domain>", 8, &out, &msg), -EINVAL);
    assert_null(out);
    assert_non_null(strstr(msg, "not well-formed"));
    free(msg);
}

/*
 * The pin readers share their per-element code, yet the domain's <cputune>
 * is read as libvirt 9.0 reads it and vpack's request in its own stricter
 * way: which check comes first, and what a missing vCPU is, differ. Each
 * case holds two faults, so the message says which check ran first.
 */
static void test_pin_check_order(void **state)
{
    struct vpack_domxml *d;
    char *out;

    (void)state;
    /* The domain: every <vcpupin> first, then <emulatorpin>, then
     * <iothreadpin>, whatever the document order. */
    parse_err(DOM("<vcpu>2</vcpu><iothreads>1</iothreads><cputune><iothreadpin iothread='1' "
                  "cpuset='x'/><emulatorpin cpuset='y'/><vcpupin vcpu='0' cpuset='z'/></cputune>"),
              "domain 't': <vcpupin vcpu='0' cpuset='z'>: invalid cpuset", NULL);
    parse_err(DOM("<vcpu>2</vcpu><iothreads>1</iothreads><cputune><iothreadpin iothread='1' "
                  "cpuset='x'/><emulatorpin cpuset='y'/></cputune>"),
              "domain 't': <emulatorpin cpuset='y'>: invalid cpuset", NULL);
    /* A missing vCPU is ignored before its cpuset is looked at, twice over. */
    d = parse_ok(DOM("<vcpu>2</vcpu><cputune><vcpupin vcpu='5'/><vcpupin vcpu='5' cpuset='x'/>"
                     "</cputune>"));
    assert_int_equal(d->nvcpupin, 0);
    assert_int_equal(d->nwarnings, 2);
    assert_string_equal(d->warnings[1], "domain 't': <vcpupin vcpu='5'>: ignored: the domain "
                                        "has 2 vCPUs");
    vpack_domxml_free(d);
    /* A duplicate vCPU: a missing cpuset is found first, an invalid one after. */
    parse_err(DOM("<vcpu>2</vcpu><cputune><vcpupin vcpu='0' cpuset='1'/><vcpupin vcpu='0'/>"
                  "</cputune>"), "domain 't': <vcpupin vcpu='0'>: missing cpuset", NULL);
    parse_err(DOM("<vcpu>2</vcpu><cputune><vcpupin vcpu='0' cpuset='1'/>"
                  "<vcpupin vcpu='0' cpuset='x'/></cputune>"),
              "domain 't': <vcpupin vcpu='0'>: duplicate vcpupin for vCPU 0", NULL);
    /* A missing iothread before its cpuset; a duplicate after it. */
    parse_err(DOM("<iothreads>1</iothreads><cputune><iothreadpin iothread='2' cpuset='x'/>"
                  "</cputune>"), "domain 't': <iothreadpin iothread='2'>: the domain has no "
              "iothread 2", NULL);
    parse_err(DOM("<iothreads>1</iothreads><cputune><iothreadpin iothread='1' cpuset='1'/>"
                  "<iothreadpin iothread='1' cpuset='x'/></cputune>"),
              "domain 't': <iothreadpin iothread='1' cpuset='x'>: invalid cpuset", NULL);
    parse_err(DOM("<iothreads>1</iothreads><cputune><iothreadpin iothread='1' cpuset='1'/>"
                  "<iothreadpin iothread='1' cpuset='2'/></cputune>"),
              "domain 't': <iothreadpin iothread='1'>: duplicate iothreadpin for iothread 1",
              NULL);
    /* A second <emulatorpin> before the first's cpuset. */
    parse_err(DOM("<vcpu>2</vcpu><cputune><emulatorpin/><emulatorpin cpuset='1'/></cputune>"),
              "domain 't': <cputune>: only one <emulatorpin> is supported", NULL);

#define RQ(body) RQDOM("<vpackreq:request " RQNS ">" body "</vpackreq:request>", "")
    /* The request: document order, and every cpuset before the thread's checks. */
    restore_err(RQ("<iothreadpin iothread='2' cpuset='0'/><vcpupin vcpu='5' cpuset='0'/>"),
                "<iothreadpin iothread='2'>: the domain has no iothread 2");
    restore_err(RQ("<vcpupin vcpu='5' cpuset='x'/>"), "<vcpupin vcpu='5' cpuset='x'>: invalid");
    restore_err(RQ("<vcpupin vcpu='5'/>"), "<vcpupin vcpu='5'>: missing cpuset");
    restore_err(RQ("<vcpupin vcpu='1' cpuset='0'/><vcpupin vcpu='1' cpuset='x'/>"),
                "<vcpupin vcpu='1' cpuset='x'>: invalid");
    restore_err(RQ("<vcpupin vcpu='1' cpuset='0'/><vcpupin vcpu='1'/>"),
                "<vcpupin vcpu='1'>: missing cpuset");
    restore_err(RQ("<vcpupin vcpu='1' cpuset='0'/><vcpupin vcpu='1' cpuset='1'/>"),
                "<vcpupin vcpu='1'>: vCPU 1 is pinned twice");
    restore_err(RQ("<iothreadpin iothread='2' cpuset='x'/>"),
                "<iothreadpin iothread='2' cpuset='x'>: invalid");
    restore_err(RQ("<iothreadpin iothread='2'/>"), "<iothreadpin iothread='2'>: missing cpuset");
    restore_err(RQ("<iothreadpin iothread='1' cpuset='0'/><iothreadpin iothread='1' cpuset='x'/>"),
                "<iothreadpin iothread='1' cpuset='x'>: invalid");
    restore_err(RQ("<iothreadpin iothread='1' cpuset='0'/><iothreadpin iothread='1' cpuset='1'/>"),
                "<iothreadpin iothread='1'>: iothread 1 is pinned twice");
    restore_err(RQ("<emulatorpin cpuset='0'/><emulatorpin cpuset='x'/>"),
                "<emulatorpin cpuset='x'>: invalid");
    restore_err(RQ("<emulatorpin cpuset='0'/><emulatorpin/>"), "<emulatorpin>: missing cpuset");
    restore_err(RQ("<emulatorpin cpuset='0'/><emulatorpin cpuset='1'/>"),
                "<emulatorpin>: more than one");
    /* What it reads comes out sorted, vCPU 0 allowed. */
    out = restore_ok(RQ("<vcpupin vcpu='1' cpuset='1'/><emulatorpin cpuset='2'/>"
                        "<vcpupin vcpu='0' cpuset='0'/>"));
    assert_non_null(strstr(out, "<vcpupin vcpu=\"0\" cpuset=\"0\"/>"));
    assert_true(strstr(out, "<vcpupin vcpu=\"0\" cpuset=\"0\"/>") <
                strstr(out, "<vcpupin vcpu=\"1\" cpuset=\"1\"/>"));
    free(out);
#undef RQ
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_fixture_cpuset_invalid),
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_json_read_errors),
        cmocka_unit_test(test_request_check),
        cmocka_unit_test(test_level_values),
        cmocka_unit_test(test_level_namespaces),
        cmocka_unit_test(test_vcpus),
        cmocka_unit_test(test_vcpus_individual),
        cmocka_unit_test(test_iothreads),
        cmocka_unit_test(test_vcpupin),
        cmocka_unit_test(test_numatune),
        cmocka_unit_test(test_document),
        cmocka_unit_test(test_messages_one_line),
        cmocka_unit_test(test_define_rewrite_forms),
        cmocka_unit_test(test_define_rewrite_errors),
        cmocka_unit_test(test_schema),
        cmocka_unit_test(test_examples),
        cmocka_unit_test(test_request_format),
        cmocka_unit_test(test_request_restore_fixtures),
        cmocka_unit_test(test_request_round_trip),
        cmocka_unit_test(test_request_absent),
        cmocka_unit_test(test_request_first_wins),
        cmocka_unit_test(test_request_hostile),
        cmocka_unit_test(test_pin_check_order),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    xmlCleanupParser();
    return r;
}
