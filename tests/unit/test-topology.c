// SPDX-License-Identifier: MIT
/*
 * The topology loader against real machines: every hwloc XML export and every
 * sysfs tree in $VPACK_FIXTURES/topologies, each compared with
 * tests/data/topologies/<fixture name>.expected.json, plus synthetic
 * topologies, reserved and restricted CPUs, bad specs and the JSON form.
 *
 * The expected files were written from the fixtures' READMEs, not from this
 * loader's output. Where a README leaves something to inference it is noted
 * here:
 * - 16amd64-8n2c-cpusets.xml: the README gives 8 dual-core packages, the
 *   allowed CPUs 0-3,5-6,12-15, the present packages 0,1,2,3,6,7, the allowed
 *   NUMA nodes 1-5, and that CPUs 0-1 and 12-15 sit in packages whose node
 *   (0, 6, 7) is not allowed. So package k holds CPUs 2k and 2k+1 and node k:
 *   packages 0, 6 and 7 get no NUMA node, 1, 2 and 3 get nodes 1, 2 and 3,
 *   and nodes 4 and 5 (wholly disallowed packages 4 and 5) match no package.
 *   No L3 and no SMT: l3 0, one thread per core.
 * - "One NUMA node per package" (32em64t, 32intel64, AMD 19h) is read as node
 *   N on package N; for AMD 17h "4 per package, node 0 = 0-5,48-53" as nodes
 *   0-3 on package 0 and 4-7 on package 1.
 * - 16em64t-4s2c2t-offlines (sysfs, CPUs 2,5,13,14 offline): package 1 keeps
 *   {1,9}, one core with two threads; package 2 keeps {6} and {10}, two cores
 *   with one thread each, as the README says. Its NUMA node's cpumap lists
 *   all 16 CPUs, offline ones included; only online ones count.
 * - offline-cpu0-node0: node 0 is absent, so package 0's CPUs have no NUMA
 *   node (numa_nodes []). node1/cpulist (1,3,...,23) and node1/cpumap
 *   (5,7,...,19) disagree; hwloc reads the map, and either way node 1 meets
 *   package 1 only.
 * Checked with lstopo-no-graphics 2.9.0 (-i FILE, or HWLOC_FSROOT=DIR
 * HWLOC_COMPONENTS=linux,-x86): hwloc agrees with every value above.
 *
 * Nothing here reads the live /sys or /proc: there is no "host" load.
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
#include <sys/stat.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "vpack/cpuset.h"
#include "vpack/topology.h"

#define N_XML_FIXTURES 8
#define N_SYSFS_FIXTURES 3

/* Returns "$VAR/rest" (static buffer); fails the test when VAR is unset. */
static const char *env_path(const char *var, const char *rest)
{
    static char buf[2048];
    const char *base = getenv(var);

    if (!base || !*base)
        fail_msg("%s is not set (run through meson test)", var);
    snprintf(buf, sizeof(buf), "%s/%s", base, rest);
    return buf;
}

/* Loads spec with no reserved or restricted CPUs; fails the test on error. */
static struct vpack_topology *load_ok(const char *spec)
{
    struct vpack_topology *t = NULL;
    char *err = NULL;
    int r = vpack_topology_load(spec, NULL, NULL, &t, &err);

    if (r < 0)
        fail_msg("%s: %d %s", spec, r, err ? err : "(no message)");
    assert_null(err);
    assert_non_null(t);
    return t;
}

static void load_fixture_spec(char *spec, size_t len, const char *kind, const char *dir,
                              const char *name)
{
    snprintf(spec, len, "%s:%s/%s", kind, env_path("VPACK_FIXTURES", dir), name);
}

static char *cpus_text(const vpack_cpuset *s)
{
    char *text = vpack_cpuset_format(s);
    assert_non_null(text);
    return text;
}

static void assert_cpus(const vpack_cpuset *s, const char *expected)
{
    char *text = cpus_text(s);
    if (strcmp(text, expected)) {
        print_error("cpus: expected \"%s\", got \"%s\"\n", expected, text);
        free(text);
        fail();
    }
    free(text);
}

/*
 * Compares two JSON values structurally (object key order does not matter).
 * On the first difference, writes its path and both values to diff and
 * returns false.
 */
static bool json_same(const char *path, struct json_object *exp, struct json_object *got,
                      char *diff, size_t len)
{
    enum json_type te = json_object_get_type(exp), tg = json_object_get_type(got);
    char sub[512];

    if (te != tg)
        goto differ;
    switch (te) {
    case json_type_object: {
        if (json_object_object_length(exp) != json_object_object_length(got))
            goto differ;
        json_object_object_foreach(exp, key, val)
        {
            struct json_object *other;
            snprintf(sub, sizeof(sub), "%s.%s", path, key);
            if (!json_object_object_get_ex(got, key, &other)) {
                snprintf(diff, len, "%s: missing", sub);
                return false;
            }
            if (!json_same(sub, val, other, diff, len))
                return false;
        }
        return true;
    }
    case json_type_array: {
        size_t n = json_object_array_length(exp);
        if (n != json_object_array_length(got))
            goto differ;
        for (size_t i = 0; i < n; i++) {
            snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
            if (!json_same(sub, json_object_array_get_idx(exp, i),
                           json_object_array_get_idx(got, i), diff, len))
                return false;
        }
        return true;
    }
    case json_type_int:
        if (json_object_get_int64(exp) != json_object_get_int64(got))
            goto differ;
        return true;
    case json_type_string:
        if (strcmp(json_object_get_string(exp), json_object_get_string(got)))
            goto differ;
        return true;
    default:
        if (!json_object_equal(exp, got))
            goto differ;
        return true;
    }
differ:
    snprintf(diff, len, "%s: expected %s, got %s", path,
             json_object_to_json_string_ext(exp, JSON_C_TO_STRING_PLAIN),
             json_object_to_json_string_ext(got, JSON_C_TO_STRING_PLAIN));
    return false;
}

/*
 * Loads KIND:DIR/NAME and compares it with NAME.expected.json. Returns false
 * after printing the first difference, so that the caller can go on with the
 * other fixtures; any other failure ends the test.
 */
static bool check_fixture(const char *kind, const char *dir, const char *name)
{
    char spec[8192], expected_path[4096], diff[2048];
    struct vpack_topology *t;
    struct json_object *expected, *got, *source;
    char *json;
    bool same;

    load_fixture_spec(spec, sizeof(spec), kind, dir, name);
    snprintf(expected_path, sizeof(expected_path), "%s",
             env_path("VPACK_TESTDATA", "topologies/"));
    strncat(expected_path, name, sizeof(expected_path) - strlen(expected_path) - 1);
    strncat(expected_path, ".expected.json", sizeof(expected_path) - strlen(expected_path) - 1);

    expected = json_object_from_file(expected_path);
    if (!expected)
        fail_msg("%s: cannot read %s: %s", name, expected_path, json_util_get_last_err());

    t = load_ok(spec);
    json = vpack_topology_to_json(t);
    assert_non_null(json);
    got = json_tokener_parse(json);
    assert_non_null(got);

    /* "source" is the spec, which holds this machine's path: not in the file. */
    assert_true(json_object_object_get_ex(got, "source", &source));
    assert_string_equal(json_object_get_string(source), spec);
    json_object_object_del(got, "source");

    same = json_same("", expected, got, diff, sizeof(diff));
    if (same)
        print_message("ok %s:%s\n", kind, name);
    else
        print_error("%s:%s: %s\n", kind, name, diff);

    /* The struct agrees with its JSON where the JSON cannot show it. */
    assert_int_equal(t->max_cpu, vpack_cpuset_last(&t->cpus));
    for (int c = 0; c <= t->max_cpu; c++) {
        int i = vpack_topology_package_of(t, c);
        if (vpack_cpuset_isset(&t->cpus, c)) {
            assert_in_range(i, 0, t->npackages - 1);
            assert_true(vpack_cpuset_isset(&t->packages[i].cpus, c));
        } else {
            assert_int_equal(i, -1);
        }
    }

    json_object_put(got);
    json_object_put(expected);
    free(json);
    vpack_topology_free(t);
    return same;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Lists the fixtures in $VPACK_FIXTURES/topologies/DIR (files or directories,
 * README.md left out), sorted, into names; returns the count.
 */
static size_t list_fixtures(const char *dir, bool want_dirs, char **names, size_t max)
{
    char path[4096];
    struct dirent *de;
    size_t n = 0;
    DIR *d;

    snprintf(path, sizeof(path), "%s", env_path("VPACK_FIXTURES", dir));
    d = opendir(path);
    if (!d)
        fail_msg("cannot open %s: %s", path, strerror(errno));
    while ((de = readdir(d))) {
        char full[8192];
        struct stat st;

        if (de->d_name[0] == '.' || !strcmp(de->d_name, "README.md"))
            continue;
        snprintf(full, sizeof(full), "%s/%s", path, de->d_name);
        assert_int_equal(stat(full, &st), 0);
        if (want_dirs != !!S_ISDIR(st.st_mode))
            fail_msg("%s: unexpected %s", full, want_dirs ? "file" : "directory");
        assert_true(n < max);
        names[n] = strdup(de->d_name);
        assert_non_null(names[n]);
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof(*names), cmp_str);
    return n;
}

static void check_fixture_dir(const char *kind, const char *dir, bool want_dirs, size_t count)
{
    char *names[64];
    size_t n = list_fixtures(dir, want_dirs, names, sizeof(names) / sizeof(names[0]));
    unsigned failed = 0;

    /* A fixture that disappears or appears without an expected file is an error. */
    assert_int_equal(n, count);
    for (size_t i = 0; i < n; i++) {
        if (!check_fixture(kind, dir, names[i]))
            failed++;
        free(names[i]);
    }
    if (failed)
        fail_msg("%u of %zu %s fixtures differ from their expected files", failed, n, kind);
}

static void test_hwloc_xml_fixtures(void **state)
{
    (void)state;
    check_fixture_dir("xml", "topologies/hwloc-xml", false, N_XML_FIXTURES);
}

static void test_sysfs_fixtures(void **state)
{
    (void)state;
    check_fixture_dir("sysfs", "topologies/sysfs", true, N_SYSFS_FIXTURES);
}

/* Every expected file belongs to a fixture: none is left over from a removed one. */
static void test_no_stale_expected_files(void **state)
{
    char path[4096];
    struct dirent *de;
    size_t n = 0;
    DIR *d;

    (void)state;
    snprintf(path, sizeof(path), "%s", env_path("VPACK_TESTDATA", "topologies"));
    d = opendir(path);
    assert_non_null(d);
    while ((de = readdir(d))) {
        static const char suffix[] = ".expected.json";
        size_t len = strlen(de->d_name);
        char name[256], fixture[8192];
        struct stat st;

        if (len <= strlen(suffix) || strcmp(de->d_name + len - strlen(suffix), suffix))
            continue;
        snprintf(name, sizeof(name), "%.*s", (int)(len - strlen(suffix)), de->d_name);
        snprintf(fixture, sizeof(fixture), "%s/%s",
                 env_path("VPACK_FIXTURES", "topologies/hwloc-xml"), name);
        if (stat(fixture, &st) < 0)
            snprintf(fixture, sizeof(fixture), "%s/%s",
                     env_path("VPACK_FIXTURES", "topologies/sysfs"), name);
        if (stat(fixture, &st) < 0)
            fail_msg("%s has no fixture", de->d_name);
        n++;
    }
    closedir(d);
    assert_int_equal(n, N_XML_FIXTURES + N_SYSFS_FIXTURES);
}

static void test_synthetic_one_cpu_packages(void **state)
{
    /* With and without the quotes a configuration file would carry. */
    static const char *const specs[] = {
        "synthetic:\"package:2 core:1 pu:1\"",
        "synthetic:package:2 core:1 pu:1",
        "synthetic:'package:2 core:1 pu:1'",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
        struct vpack_topology *t = load_ok(specs[i]);

        assert_string_equal(t->source, specs[i]);
        assert_int_equal(t->npackages, 2);
        for (int p = 0; p < 2; p++) {
            vpack_cpuset want;
            vpack_cpuset_zero(&want);
            vpack_cpuset_set(&want, (unsigned)p);
            assert_int_equal(t->packages[p].id, p);
            assert_true(vpack_cpuset_equal(&t->packages[p].cpus, &want));
            assert_int_equal(t->packages[p].ncores, 1);
            assert_int_equal(t->packages[p].threads_per_core, 1);
            /* hwloc gives a synthetic topology without NUMA level one node, 0. */
            assert_int_equal(t->packages[p].nnuma, 1);
            assert_int_equal(t->packages[p].numa_nodes[0], 0);
            assert_int_equal(t->packages[p].nl3, 0);
        }
        assert_cpus(&t->cpus, "0-1");
        assert_int_equal(t->max_cpu, 1);
        assert_int_equal(t->cpu_package[0], 0);
        assert_int_equal(t->cpu_package[1], 1);
        vpack_topology_free(t);
    }
}

static void test_synthetic_smt(void **state)
{
    struct vpack_topology *t = load_ok("synthetic:package:2 core:4 pu:2");

    (void)state;
    assert_int_equal(t->npackages, 2);
    assert_cpus(&t->packages[0].cpus, "0-7");
    assert_cpus(&t->packages[1].cpus, "8-15");
    for (int p = 0; p < 2; p++) {
        assert_int_equal(t->packages[p].id, p);
        assert_int_equal(t->packages[p].ncores, 4);
        assert_int_equal(t->packages[p].threads_per_core, 2);
    }
    vpack_topology_free(t);
}

/* PU os indexes from a synthetic description are the CPU ids. */
static void test_synthetic_interleaved_ids(void **state)
{
    struct vpack_topology *t =
        load_ok("synthetic:package:2 core:2 pu:2(indexes=0,4,8,12,1,5,9,13)");

    (void)state;
    assert_int_equal(t->npackages, 2);
    assert_cpus(&t->packages[0].cpus, "0,4,8,12");
    assert_cpus(&t->packages[1].cpus, "1,5,9,13");
    assert_int_equal(t->packages[0].ncores, 2);
    assert_int_equal(t->packages[0].threads_per_core, 2);
    assert_int_equal(t->max_cpu, 13);
    assert_int_equal(vpack_topology_package_of(t, 5), 1);
    assert_int_equal(vpack_topology_package_of(t, 8), 0);
    assert_int_equal(vpack_topology_package_of(t, 2), -1);
    vpack_topology_free(t);
}

/* Without Core objects each PU is a core; without Package objects the machine is package 0. */
static void test_synthetic_missing_levels(void **state)
{
    struct vpack_topology *t = load_ok("synthetic:package:2 pu:3");

    (void)state;
    assert_int_equal(t->npackages, 2);
    assert_int_equal(t->packages[1].ncores, 3);
    assert_int_equal(t->packages[1].threads_per_core, 1);
    vpack_topology_free(t);

    t = load_ok("synthetic:core:2 pu:2");
    assert_int_equal(t->npackages, 1);
    assert_int_equal(t->packages[0].id, 0);
    assert_cpus(&t->packages[0].cpus, "0-3");
    assert_int_equal(t->packages[0].ncores, 2);
    assert_int_equal(t->packages[0].threads_per_core, 2);
    vpack_topology_free(t);
}

static void parse(vpack_cpuset *s, const char *text)
{
    char *err = NULL;
    if (vpack_cpuset_parse(s, text, &err) < 0)
        fail_msg("%s: %s", text, err ? err : "out of memory");
}

static void test_reserved(void **state)
{
    char spec[8192];
    struct vpack_topology *t = NULL;
    vpack_cpuset reserved;
    char *err = NULL;

    (void)state;
    load_fixture_spec(spec, sizeof(spec), "xml", "topologies/hwloc-xml",
                      "32em64t-2n8c2t-pci-noio.xml");

    /* Reserving the SMT siblings leaves one thread per core. */
    parse(&reserved, "16-31");
    assert_int_equal(vpack_topology_load(spec, &reserved, NULL, &t, &err), 0);
    assert_int_equal(t->npackages, 2);
    assert_cpus(&t->cpus, "0-15");
    assert_cpus(&t->packages[0].cpus, "0-7");
    assert_int_equal(t->packages[0].ncores, 8);
    assert_int_equal(t->packages[0].threads_per_core, 1);
    assert_int_equal(vpack_topology_package_of(t, 16), -1);
    vpack_topology_free(t);

    /* A package whose CPUs are all reserved is dropped. */
    parse(&reserved, "0-7,16-23,9");
    assert_int_equal(vpack_topology_load(spec, &reserved, NULL, &t, &err), 0);
    assert_int_equal(t->npackages, 1);
    assert_int_equal(t->packages[0].id, 1);
    assert_cpus(&t->cpus, "8,10-15,24-31");
    assert_cpus(&t->packages[0].cpus, "8,10-15,24-31");
    /* CPU 9 is reserved, its sibling 25 is not: the core still counts. */
    assert_int_equal(t->packages[0].ncores, 8);
    assert_int_equal(t->packages[0].threads_per_core, 2);
    assert_int_equal(t->packages[0].nnuma, 1);
    assert_int_equal(t->packages[0].numa_nodes[0], 1);
    assert_int_equal(vpack_topology_package_index(t, 0), -1);
    assert_int_equal(vpack_topology_package_index(t, 1), 0);
    assert_int_equal(vpack_topology_package_of(t, 0), -1);
    assert_int_equal(vpack_topology_package_of(t, 9), -1);
    assert_int_equal(vpack_topology_package_of(t, 25), 0);
    assert_int_equal(t->max_cpu, 31);
    vpack_topology_free(t);
    assert_null(err);
}

static void test_restrict_to(void **state)
{
    char spec[8192];
    struct vpack_topology *t = NULL;
    vpack_cpuset only, reserved;
    char *err = NULL;

    (void)state;
    load_fixture_spec(spec, sizeof(spec), "xml", "topologies/hwloc-xml",
                      "32em64t-2n8c2t-pci-noio.xml");
    parse(&only, "0,8,16,100");
    assert_int_equal(vpack_topology_load(spec, NULL, &only, &t, &err), 0);
    assert_int_equal(t->npackages, 2);
    assert_cpus(&t->cpus, "0,8,16");
    assert_cpus(&t->packages[0].cpus, "0,16");
    assert_int_equal(t->packages[0].ncores, 1);
    assert_int_equal(t->packages[0].threads_per_core, 2);
    assert_cpus(&t->packages[1].cpus, "8");
    assert_int_equal(t->packages[1].ncores, 1);
    assert_int_equal(t->packages[1].threads_per_core, 1);
    assert_int_equal(t->packages[1].nl3, 1);
    assert_int_equal(t->max_cpu, 16);
    vpack_topology_free(t);

    /* Both at once: reserved wins inside the restriction. */
    parse(&reserved, "8");
    assert_int_equal(vpack_topology_load(spec, &reserved, &only, &t, &err), 0);
    assert_int_equal(t->npackages, 1);
    assert_cpus(&t->cpus, "0,16");
    vpack_topology_free(t);

    /* Restricting a NUMA-split package keeps only the nodes it still meets. */
    load_fixture_spec(spec, sizeof(spec), "xml", "topologies/hwloc-xml",
                      "AMD-17h-Zen-2xEpyc-7451.output");
    parse(&only, "0-2,12-13,50");
    assert_int_equal(vpack_topology_load(spec, NULL, &only, &t, &err), 0);
    assert_int_equal(t->npackages, 1);
    assert_int_equal(t->packages[0].ncores, 5);
    assert_int_equal(t->packages[0].threads_per_core, 2);
    assert_int_equal(t->packages[0].nnuma, 2);
    assert_int_equal(t->packages[0].numa_nodes[0], 0);
    assert_int_equal(t->packages[0].numa_nodes[1], 2);
    assert_int_equal(t->packages[0].nl3, 2);
    vpack_topology_free(t);
    assert_null(err);
}

/* Loads spec expecting failure with errno want and a message holding needle. */
static void expect_error(const char *spec, const vpack_cpuset *reserved,
                         const vpack_cpuset *restrict_to, int want, const char *needle)
{
    struct vpack_topology *t = (struct vpack_topology *)&t;
    char *err = NULL;
    int r = vpack_topology_load(spec, reserved, restrict_to, &t, &err);

    if (r != want)
        fail_msg("%s: expected %d, got %d (%s)", spec, want, r, err ? err : "no message");
    assert_null(t);
    assert_non_null(err);
    if (!strstr(err, needle))
        fail_msg("%s: message \"%s\" does not contain \"%s\"", spec, err, needle);
    free(err);
}

static void test_bad_specs(void **state)
{
    char spec[8192], msg[8400];
    vpack_cpuset all;

    (void)state;
    expect_error("bogus:x", NULL, NULL, -EINVAL, "topology 'bogus:x': unknown source");
    expect_error("hwloc", NULL, NULL, -EINVAL, "topology 'hwloc': unknown source");
    expect_error("xml:/nonexistent", NULL, NULL, -ENOENT,
                 "topology 'xml:/nonexistent': cannot load hwloc XML: No such file or directory");
    expect_error("xml:", NULL, NULL, -ENOENT, "topology 'xml:': cannot load hwloc XML");
    expect_error("synthetic:garbage", NULL, NULL, -EINVAL,
                 "topology 'synthetic:garbage': invalid synthetic description");
    expect_error("synthetic:", NULL, NULL, -EINVAL, "invalid synthetic description");
    expect_error("synthetic:\"\"", NULL, NULL, -EINVAL, "invalid synthetic description");
    expect_error("synthetic:\"package:2 pu:1", NULL, NULL, -EINVAL,
                 "invalid synthetic description");
    expect_error("sysfs:/nonexistent", NULL, NULL, -ENOENT,
                 "topology 'sysfs:/nonexistent': cannot read sysfs tree");
    expect_error("sysfs:", NULL, NULL, -EINVAL, "cannot read sysfs tree");
    /* A directory that is not an fsroot (no sys/devices/system/cpu). */
    snprintf(spec, sizeof(spec), "sysfs:%s", env_path("VPACK_FIXTURES", "topologies"));
    expect_error(spec, NULL, NULL, -ENOENT, "cannot read sysfs tree");

    /* Nothing usable left. */
    load_fixture_spec(spec, sizeof(spec), "xml", "topologies/hwloc-xml",
                      "16em64t-4s2c2t.xml");
    snprintf(msg, sizeof(msg), "topology '%s': no usable CPU", spec);
    parse(&all, "0-15");
    expect_error(spec, &all, NULL, -ENODEV, msg);
    parse(&all, "16-100");
    expect_error(spec, NULL, &all, -ENODEV, msg);
    /* Disallowed CPUs (4, 7-11 here) are not usable either. */
    load_fixture_spec(spec, sizeof(spec), "xml", "topologies/hwloc-xml",
                      "16amd64-8n2c-cpusets.xml");
    parse(&all, "4,7-11");
    expect_error(spec, NULL, &all, -ENODEV, "no usable CPU");

    /* out is required. */
    assert_int_equal(vpack_topology_load("synthetic:pu:1", NULL, NULL, NULL, NULL), -EINVAL);
}

/*
 * Cores as the hardware pairs SMT siblings: on the 2-socket sysfs fixture
 * (its thread_siblings_list: 0,16 and 5,21) CPU n and n + 16 share a core,
 * 32 CPUs make 16 cores; hwloc's synthetic spec numbers a core's PUs
 * together. The host model and the planner's SMT discount read these.
 */
static void test_cores(void **state)
{
    char spec[8192];
    struct vpack_topology *t;
    int most = -1;

    (void)state;
    load_fixture_spec(spec, sizeof(spec), "sysfs", "topologies/sysfs", "32intel64-2p8co2t+8ve");
    t = load_ok(spec);
    assert_int_equal(vpack_topology_core_of(t, 0), vpack_topology_core_of(t, 16));
    assert_int_equal(vpack_topology_core_of(t, 5), vpack_topology_core_of(t, 21));
    assert_int_not_equal(vpack_topology_core_of(t, 0), vpack_topology_core_of(t, 1));
    for (int c = 0; c <= t->max_cpu; c++)
        if (vpack_topology_core_of(t, c) > most)
            most = vpack_topology_core_of(t, c);
    assert_int_equal(most + 1, 16);
    assert_int_equal(vpack_topology_core_of(t, -1), -1);
    assert_int_equal(vpack_topology_core_of(t, t->max_cpu + 1), -1);
    vpack_topology_free(t);
    t = load_ok("synthetic:package:2 core:2 pu:2");
    assert_int_equal(vpack_topology_core_of(t, 0), vpack_topology_core_of(t, 1));
    assert_int_not_equal(vpack_topology_core_of(t, 1), vpack_topology_core_of(t, 2));
    assert_int_equal(vpack_topology_core_of(t, 7), 3);
    vpack_topology_free(t);
}

static void test_package_lookups(void **state)
{
    char spec[8192];
    struct vpack_topology *t;

    (void)state;
    load_fixture_spec(spec, sizeof(spec), "xml", "topologies/hwloc-xml",
                      "16amd64-8n2c-cpusets.xml");
    t = load_ok(spec);
    assert_int_equal(t->npackages, 6);
    assert_int_equal(vpack_topology_package_index(t, 0), 0);
    assert_int_equal(vpack_topology_package_index(t, 3), 3);
    assert_int_equal(vpack_topology_package_index(t, 4), -1);
    assert_int_equal(vpack_topology_package_index(t, 5), -1);
    assert_int_equal(vpack_topology_package_index(t, 6), 4);
    assert_int_equal(vpack_topology_package_index(t, 7), 5);
    assert_int_equal(vpack_topology_package_index(t, 8), -1);
    assert_int_equal(vpack_topology_package_index(t, -1), -1);
    assert_int_equal(vpack_topology_package_of(t, 0), 0);
    assert_int_equal(vpack_topology_package_of(t, 5), 2);
    assert_int_equal(vpack_topology_package_of(t, 4), -1);
    assert_int_equal(vpack_topology_package_of(t, 9), -1);
    assert_int_equal(vpack_topology_package_of(t, 12), 4);
    assert_int_equal(vpack_topology_package_of(t, 15), 5);
    assert_int_equal(vpack_topology_package_of(t, 16), -1);
    assert_int_equal(vpack_topology_package_of(t, -1), -1);
    assert_int_equal(vpack_topology_package_of(t, VPACK_CPUSET_MAX), -1);
    assert_int_equal(t->max_cpu, 15);
    vpack_topology_free(t);

    assert_int_equal(vpack_topology_package_of(NULL, 0), -1);
    assert_int_equal(vpack_topology_package_index(NULL, 0), -1);
    vpack_topology_free(NULL);
}

static void assert_keys(struct json_object *obj, const char *const *keys, size_t n)
{
    assert_true(json_object_is_type(obj, json_type_object));
    assert_int_equal(json_object_object_length(obj), n);
    for (size_t i = 0; i < n; i++) {
        if (!json_object_object_get_ex(obj, keys[i], NULL))
            fail_msg("missing key \"%s\" in %s", keys[i], json_object_to_json_string(obj));
    }
}

static struct json_object *member(struct json_object *obj, const char *key, enum json_type type)
{
    struct json_object *v = NULL;
    assert_true(json_object_object_get_ex(obj, key, &v));
    if (!json_object_is_type(v, type))
        fail_msg("\"%s\" has type %s", key, json_type_to_name(json_object_get_type(v)));
    return v;
}

static void test_to_json_shape(void **state)
{
    static const char *const top[] = {"source", "cpus", "packages"};
    static const char *const pkg[] = {"id", "cpus", "cores", "threads_per_core", "numa_nodes", "l3"};
    char spec[8192];
    struct vpack_topology *t;
    struct json_object *root, *pkgs, *p0, *nodes;
    char *json;

    (void)state;
    load_fixture_spec(spec, sizeof(spec), "xml", "topologies/hwloc-xml",
                      "AMD-17h-Zen-2xEpyc-7451.output");
    t = load_ok(spec);
    json = vpack_topology_to_json(t);
    assert_non_null(json);
    /* The path is written as it is, without json-c's "\/" escaping. */
    assert_null(strstr(json, "\\/"));
    assert_non_null(strstr(json, spec));

    root = json_tokener_parse(json);
    assert_non_null(root);
    assert_keys(root, top, 3);
    assert_string_equal(json_object_get_string(member(root, "source", json_type_string)), spec);
    assert_string_equal(json_object_get_string(member(root, "cpus", json_type_string)), "0-95");
    pkgs = member(root, "packages", json_type_array);
    assert_int_equal(json_object_array_length(pkgs), 2);
    for (size_t i = 0; i < 2; i++)
        assert_keys(json_object_array_get_idx(pkgs, i), pkg, 6);
    p0 = json_object_array_get_idx(pkgs, 0);
    assert_int_equal(json_object_get_int(member(p0, "id", json_type_int)), 0);
    assert_string_equal(json_object_get_string(member(p0, "cpus", json_type_string)),
                        "0-23,48-71");
    assert_int_equal(json_object_get_int(member(p0, "cores", json_type_int)), 24);
    assert_int_equal(json_object_get_int(member(p0, "threads_per_core", json_type_int)), 2);
    assert_int_equal(json_object_get_int(member(p0, "l3", json_type_int)), 8);
    nodes = member(p0, "numa_nodes", json_type_array);
    assert_int_equal(json_object_array_length(nodes), 4);
    for (size_t i = 0; i < 4; i++) {
        struct json_object *n = json_object_array_get_idx(nodes, i);
        assert_true(json_object_is_type(n, json_type_int));
        assert_int_equal(json_object_get_int(n), (int)i);
    }
    json_object_put(root);
    free(json);
    vpack_topology_free(t);
}

/*
 * The loader changes HWLOC_FSROOT and HWLOC_THISSYSTEM only for the load.
 * HWLOC_THISSYSTEM=1 with HWLOC_THISSYSTEM_ALLOWED_RESOURCES=1 would make
 * hwloc cut an XML topology down to this process's own CPUs; the loader
 * rules that out, so the fixture keeps its 32 CPUs.
 */
static void test_environment_kept(void **state)
{
    char spec[8192];
    struct vpack_topology *t;

    (void)state;
    load_fixture_spec(spec, sizeof(spec), "sysfs", "topologies/sysfs", "offline-cpu0-node0");
    assert_int_equal(setenv("HWLOC_FSROOT", "/previous", 1), 0);
    unsetenv("HWLOC_THISSYSTEM");
    t = load_ok(spec);
    assert_cpus(&t->cpus, "4-20");
    vpack_topology_free(t);
    assert_string_equal(getenv("HWLOC_FSROOT"), "/previous");
    assert_null(getenv("HWLOC_THISSYSTEM"));

    unsetenv("HWLOC_FSROOT");
    t = load_ok(spec);
    vpack_topology_free(t);
    assert_null(getenv("HWLOC_FSROOT"));

    load_fixture_spec(spec, sizeof(spec), "xml", "topologies/hwloc-xml",
                      "32em64t-2n8c2t-pci-noio.xml");
    assert_int_equal(setenv("HWLOC_THISSYSTEM", "1", 1), 0);
    assert_int_equal(setenv("HWLOC_THISSYSTEM_ALLOWED_RESOURCES", "1", 1), 0);
    t = load_ok(spec);
    assert_cpus(&t->cpus, "0-31");
    vpack_topology_free(t);
    assert_string_equal(getenv("HWLOC_THISSYSTEM"), "1");
    unsetenv("HWLOC_THISSYSTEM");
    unsetenv("HWLOC_THISSYSTEM_ALLOWED_RESOURCES");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hwloc_xml_fixtures),
        cmocka_unit_test(test_sysfs_fixtures),
        cmocka_unit_test(test_no_stale_expected_files),
        cmocka_unit_test(test_synthetic_one_cpu_packages),
        cmocka_unit_test(test_synthetic_smt),
        cmocka_unit_test(test_synthetic_interleaved_ids),
        cmocka_unit_test(test_synthetic_missing_levels),
        cmocka_unit_test(test_reserved),
        cmocka_unit_test(test_restrict_to),
        cmocka_unit_test(test_bad_specs),
        cmocka_unit_test(test_package_lookups),
        cmocka_unit_test(test_cores),
        cmocka_unit_test(test_to_json_shape),
        cmocka_unit_test(test_environment_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
