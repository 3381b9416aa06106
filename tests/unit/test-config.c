// SPDX-License-Identifier: MIT
/* vpackd.conf: defaults, every kind of key, rules, and errors that name the line. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vpack/config.h"

static void test_defaults(void **state)
{
    (void)state;
    struct vpack_config c;
    assert_int_equal(vpack_config_init(&c), 0);
    assert_int_equal(c.interval_ms, 1000);
    assert_string_equal(c.socket_path, "/run/vpack/vpackd.sock");
    assert_string_equal(c.metrics_listen, "127.0.0.1");
    assert_int_equal(c.metrics_port, 9477);
    assert_string_equal(c.metrics_web_config, ""); /* plain HTTP */
    assert_int_equal(c.policy.default_level, 0);
    assert_false(c.has_reserved);
    assert_false(c.keep_placement);
    vpack_config_clear(&c);
}

static void test_parse_all_kinds(void **state)
{
    (void)state;
    struct vpack_config c;
    char *err = NULL;
    const char *text = "; comment\n"
                       "[agent]\n"
                       "interval_ms = 500\n"
                       "topology = synthetic:package:2 core:1 pu:1\n"
                       "reserved_cpus = 0-3,^2\n"
                       "keep_placement = yes\n"
                       "[policy]\n"
                       "default_level = 2\n"
                       "pack_watermark = 0.5\n"
                       "min_residency_ms = 10000\n"
                       "pc6_scope = system\n"
                       "[control]\n"
                       "group = vpack\n"
                       "[metrics]\n"
                       "port = 9999\n"
                       "enabled = false\n"
                       "web_config = /etc/vpack/web-config.yml\n";
    assert_int_equal(vpack_config_init(&c), 0);
    assert_int_equal(vpack_config_parse(&c, text, &err), 0);
    assert_null(err);
    assert_int_equal(c.interval_ms, 500);
    assert_string_equal(c.topology, "synthetic:package:2 core:1 pu:1");
    assert_true(c.has_reserved);
    char buf[32];
    vpack_cpuset_format_buf(&c.reserved_cpus, buf, sizeof(buf));
    assert_string_equal(buf, "0-1,3");
    assert_true(c.keep_placement);
    assert_int_equal(c.policy.default_level, 2);
    assert_true(c.policy.pack_watermark == 0.5);
    assert_int_equal(c.policy.min_residency_ms, 10000);
    assert_true(c.policy.pc6_system);
    assert_true(c.pc6_scope_set);
    assert_string_equal(c.control_group, "vpack");
    assert_int_equal(c.metrics_port, 9999);
    assert_false(c.metrics_enabled);
    assert_string_equal(c.metrics_web_config, "/etc/vpack/web-config.yml");
    vpack_config_clear(&c);
}

static void expect_error(const char *text, const char *needle)
{
    struct vpack_config c;
    char *err = NULL;
    assert_int_equal(vpack_config_init(&c), 0);
    assert_int_equal(vpack_config_parse(&c, text, &err), -EINVAL);
    assert_non_null(err);
    if (!strstr(err, needle))
        fail_msg("error for '%s' is '%s', expected '%s'", text, err, needle);
    free(err);
    vpack_config_clear(&c);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("[agent]\ninterval_ms = fast\n", "line 2: agent.interval_ms: 'fast' is not a whole number");
    expect_error("[agent]\ninterval_ms = 5\n", "from 100 to 600000");
    expect_error("[policy]\ndefault_level = 3\n", "'3' is not a power policy level");
    expect_error("[policy]\npack_watermark = 1.5\n", "not a number from 0 to 1");
    expect_error("[agent]\nreserved_cpus = aaa\n", "invalid cpuset 'aaa'");
    expect_error("[agent]\nbogus = 1\n", "agent.bogus: unknown key");
    expect_error("[nosuch]\nx = 1\n", "unknown section [nosuch]");
    expect_error("[agent]\nkeep_placement = maybe\n", "'maybe' is not true or false");
    expect_error("[agent]\nthis line is garbage\n", "line 2");
    expect_error("[metrics]\nport = 70000\n", "from 0 to 65535");
    expect_error("[agent]\nlog_level = loud\n", "not a log level");
    expect_error("[policy]\npc6_scope = socket\n",
                 "line 2: policy.pc6_scope: 'socket' is not a PC6 scope (package or system)");
}

#define NOVA_NS "http://openstack.org/xmlns/libvirt/nova/1.1"

static void test_rules(void **state)
{
    (void)state;
    struct vpack_config c;
    char *err = NULL;
    const char *text = "[policy]\n"
                       "default_level = 1\n"
                       "\n"
                       "[rule \"nova-large\"]\n"
                       "level = 2\n"
                       "metadata_namespace = " NOVA_NS "\n"
                       "metadata_path = instance/flavor/@name\n"
                       "metadata_value = m1.large*\n"
                       "[rule \"batch\"]\n"
                       "name = batch-*\n"
                       "level = 0\n"
                       "[ rule \"nova-any\" ]\n"
                       "level = 1\n"
                       "metadata_namespace = " NOVA_NS "\n"
                       "; a comment\n"
                       "[rule \"empty-value\"]\n"
                       "level = 1\n"
                       "name = x*\n"
                       "metadata_namespace = urn:x\n"
                       "metadata_path = a/b\n"
                       "metadata_value =\n";
    assert_int_equal(vpack_config_init(&c), 0);
    assert_int_equal(vpack_config_parse(&c, text, &err), 0);
    assert_null(err);
    assert_int_equal(c.policy.default_level, 1);
    assert_int_equal(c.rules.n, 4);
    const struct vpack_rule *r = &c.rules.v[0];
    assert_string_equal(r->name, "nova-large");
    assert_int_equal(r->line, 4);
    assert_int_equal(r->level, 2);
    assert_null(r->name_glob);
    assert_string_equal(r->ns, NOVA_NS);
    assert_string_equal(r->path, "instance/flavor/@name");
    assert_string_equal(r->value_glob, "m1.large*");
    r = &c.rules.v[1];
    assert_string_equal(r->name, "batch");
    assert_int_equal(r->line, 9);
    assert_int_equal(r->level, 0);
    assert_string_equal(r->name_glob, "batch-*");
    assert_null(r->ns);
    r = &c.rules.v[2];
    assert_string_equal(r->name, "nova-any");
    assert_int_equal(r->line, 12);
    assert_null(r->path);
    assert_null(r->value_glob);
    r = &c.rules.v[3];
    assert_string_equal(r->value_glob, "");

    /* A deep copy: nothing shared with the original. */
    struct vpack_rules copy;
    assert_int_equal(vpack_rules_copy(&copy, &c.rules), 0);
    assert_int_equal(copy.n, 4);
    assert_ptr_not_equal(copy.v[0].ns, c.rules.v[0].ns);
    vpack_config_clear(&c);
    assert_string_equal(copy.v[0].ns, NOVA_NS);
    assert_string_equal(copy.v[3].path, "a/b");
    assert_non_null(vpack_rules_find(&copy, "batch"));
    assert_null(vpack_rules_find(&copy, "nosuch"));
    vpack_rules_clear(&copy);
    assert_int_equal(copy.n, 0);
}

static void test_rule_errors(void **state)
{
    (void)state;
    /* Keys, with the line of the key. */
    expect_error("[rule \"a\"]\nlevel = 3\nname = x\n",
                 "line 2: rule \"a\".level: '3' is not a power policy level (0, 1 or 2)");
    expect_error("[rule \"a\"]\nlevel = 1\nname = x\nlevel = 2\n",
                 "line 4: rule \"a\".level: set twice in this rule");
    expect_error("[rule \"a\"]\nlevel = 1\nname = x\nname = y\n",
                 "line 4: rule \"a\".name: set twice");
    expect_error("[rule \"a\"]\nlevel = 1\nflavor = m1.*\n",
                 "line 3: rule \"a\".flavor: unknown key (a rule has level or level_from, name, ");
    expect_error("[rule \"a\"]\nlevel = 1\nname =\n", "line 3: rule \"a\".name: empty");
    expect_error("[rule \"a\"]\nlevel = 1\nmetadata_namespace =\n",
                 "metadata_namespace: empty (expected a namespace URI");
    expect_error("[rule \"a\"]\nlevel = 1\nmetadata_namespace = a b\n",
                 "'a b' is not a namespace URI");
    expect_error("[rule \"a\"]\nlevel = 1\nmetadata_namespace = urn:vpack:powerpolicy:1\n",
                 "is vpack's own namespace");
    expect_error("[rule \"a\"]\nmetadata_path = nova:instance/nova:flavor/@name\n",
                 "line 2: rule \"a\".metadata_path: 'nova:instance/nova:flavor/@name': no prefixes");
    expect_error("[rule \"a\"]\nmetadata_path = /instance/flavor\n",
                 "must start with the name of the namespace's element");
    expect_error("[rule \"a\"]\nmetadata_path = @name\n",
                 "must start with the name of the namespace's element");
    expect_error("[rule \"a\"]\nmetadata_path = instance/@flavor/name\n",
                 "an attribute (@NAME) can only be the last step");
    expect_error("[rule \"a\"]\nmetadata_path = instance//flavor\n",
                 "'instance//flavor': '' is not an element or @attribute name");
    /* A position is no filter: only [@NAME="VALUE"] is. */
    expect_error("[rule \"a\"]\nmetadata_path = instance/flavor[1]\n",
                 "'instance/flavor[1]': a filter is [@NAME=\"VALUE\"], an attribute of the element");
    expect_error("[rule \"a\"]\nmetadata_path = instance/@\n", "'@' is not an element");
    expect_error("[rule \"a\"]\nmetadata_path =\n", "metadata_path: empty");
    /* Headers. */
    expect_error("[rule nova]\nlevel = 1\n",
                 "line 2: [rule nova]: expected [rule \"NAME\"], NAME of at most 40");
    expect_error("[rule \"two words\"]\nlevel = 1\n", "expected [rule \"NAME\"]");
    expect_error("[rule \"\"]\nlevel = 1\n", "expected [rule \"NAME\"]");
    expect_error("[rule \"a\" x]\nlevel = 1\n", "expected [rule \"NAME\"]");
    expect_error("[rule:a]\nlevel = 1\n", "expected [rule \"NAME\"]");
    expect_error("[ rule a ]\nlevel = 1\n", "line 2: [ rule a ]: expected [rule \"NAME\"]");
    /* Longer than the 49 characters inih keeps of a section name. */
    expect_error("[rule \"abcdefghij-abcdefghij-abcdefghij-abcdefghij-x\"]\nlevel = 1\n",
                 "expected [rule \"NAME\"]");
    expect_error("[rule \"a\"]\nlevel = 1\nname = x\n[agent]\n[rule \"a\"]\nlevel = 2\n",
                 "line 6: [rule \"a\"]: rule \"a\" is already defined at line 1");
    expect_error("[rules]\nx = 1\n", "unknown section [rules]");
    /* Whole rules, with the line of their header, in file order. */
    expect_error("[agent]\n[rule \"a\"]\nname = x*\n", "line 2: rule \"a\": no level (add level");
    expect_error("[rule \"a\"]\nlevel = 2\n", "line 1: rule \"a\": no condition (add name");
    expect_error("[rule \"a\"]\nlevel = 2\nmetadata_path = a/b\n",
                 "rule \"a\": metadata_path needs metadata_namespace");
    expect_error("[rule \"a\"]\nlevel = 2\nmetadata_namespace = urn:x\nmetadata_value = v\n",
                 "rule \"a\": metadata_value needs metadata_path");
    expect_error("[rule \"ok\"]\nlevel = 1\nname = x\n\n[rule \"b\"]\n; nothing\n[agent]\n",
                 "line 5: a rule section with no keys");
    expect_error("[rule \"ok\"]\nlevel = 1\nname = x\n[rule \"b\"]\n", "line 4: a rule section");
    /* The first error in the file wins, whatever its kind. */
    expect_error("[agent]\ngarbage\n[rule \"a\"]\nlevel = 9\n",
                 "line 2: not a section header or key = value");
    expect_error("[rule \"a\"]\nlevel = 9\n[agent]\ngarbage\n", "line 2: rule \"a\".level");
}

static void test_long_line(void **state)
{
    (void)state;
    char text[600];
    /* inih reads 200 bytes at a time: a longer line would be split in two. */
    int n = snprintf(text, sizeof(text), "[rule \"a\"]\nlevel = 1\nmetadata_namespace = urn:");
    memset(text + n, 'x', 300);
    strcpy(text + n + 300, "\n");
    expect_error(text, "line 3: longer than 198 characters");
    /* 198 characters and the newline fit. */
    n = snprintf(text, sizeof(text), "[rule \"a\"]\nlevel = 1\nname = ");
    memset(text + n, 'x', 198 - 7);
    strcpy(text + n + 198 - 7, "\n");
    struct vpack_config c;
    char *err = NULL;
    assert_int_equal(vpack_config_init(&c), 0);
    assert_int_equal(vpack_config_parse(&c, text, &err), 0);
    assert_int_equal(strlen(c.rules.v[0].name_glob), 198 - 7);
    vpack_config_clear(&c);
    /* ... and so does a last line of 199 without one. */
    n = snprintf(text, sizeof(text), "[rule \"a\"]\nlevel = 1\nname = ");
    memset(text + n, 'x', 199 - 7);
    text[n + 199 - 7] = '\0';
    assert_int_equal(vpack_config_init(&c), 0);
    assert_int_equal(vpack_config_parse(&c, text, &err), 0);
    vpack_config_clear(&c);
}

static void test_set(void **state)
{
    (void)state;
    struct vpack_config c;
    char *err = NULL;
    assert_int_equal(vpack_config_init(&c), 0);
    assert_int_equal(vpack_config_set(&c, "policy.spread_samples=3", &err), 0);
    assert_int_equal(c.policy.spread_samples, 3);
    assert_int_equal(vpack_config_set(&c, "agent.topology=synthetic:\"package:2 core:1 pu:1\"", &err), 0);
    assert_string_equal(c.topology, "synthetic:\"package:2 core:1 pu:1\"");
    assert_int_equal(vpack_config_set(&c, "nodot=1", &err), -EINVAL);
    assert_non_null(strstr(err, "SECTION.KEY=VALUE"));
    free(err);
    assert_int_equal(vpack_config_set(&c, "policy.spread_samples=0", &err), -EINVAL);
    free(err);
    /* Rules come from the file only. */
    assert_int_equal(vpack_config_set(&c, "rule \"a\".level=1", &err), -EINVAL);
    assert_non_null(strstr(err, "unknown section"));
    free(err);
    assert_int_equal(c.rules.n, 0);
    vpack_config_clear(&c);
}

/* The watermarks' order holds for the whole configuration, file and --set. */
static void test_check(void **state)
{
    (void)state;
    struct vpack_config c;
    char *err = NULL;
    assert_int_equal(vpack_config_init(&c), 0);
    assert_int_equal(vpack_config_check(&c, &err), 0);
    assert_null(err);
    assert_int_equal(vpack_config_parse(&c, "[policy]\npack_watermark = 0.9\n", &err), 0);
    assert_int_equal(vpack_config_check(&c, &err), -EINVAL);
    assert_non_null(strstr(err, "pack watermark (0.9) is above the spread watermark (0.8)"));
    free(err);
    assert_int_equal(vpack_config_set(&c, "policy.spread_watermark=0.9", &err), 0);
    assert_int_equal(vpack_config_check(&c, &err), 0);
    vpack_config_clear(&c);
}

/* The loader every door uses: the file, then each --set in order, then the check. */
static void test_load(void **state)
{
    (void)state;
    struct vpack_config c;
    enum vpack_config_input bad = VPACK_CONFIG_SETS;
    char *err = NULL;
    char *sets[] = {"policy.spread_samples=4", "policy.pack_watermark=0.3"};

    assert_int_equal(vpack_config_load(&c, "[policy]\npack_watermark = 0.5\nspread_samples = 2\n",
                                       "f.conf", sets, 2, &bad, &err), 0);
    assert_null(err);
    assert_int_equal(c.policy.spread_samples, 4);
    assert_true(c.policy.pack_watermark == 0.3);
    assert_string_equal(c.socket_path, VPACK_DEFAULT_SOCKET);
    vpack_config_clear(&c);

    /* No file: the defaults and the sets. */
    assert_int_equal(vpack_config_load(&c, NULL, "f.conf", sets, 1, NULL, &err), 0);
    assert_int_equal(c.policy.spread_samples, 4);
    assert_int_equal(c.interval_ms, 1000);
    vpack_config_clear(&c);

    /* A bad line: the file's name and line; *c is cleared. */
    assert_int_equal(vpack_config_load(&c, "[policy]\nspread_samples = 0\n", "f.conf", sets, 2,
                                       &bad, &err), -EINVAL);
    assert_string_equal(err, "f.conf: line 2: policy.spread_samples: '0' is not a whole number "
                             "from 1 to 100");
    assert_int_equal(bad, VPACK_CONFIG_TEXT);
    assert_null(c.socket_path);
    free(err);

    /* A bad --set, after a good file: the set, and the later ones not applied. */
    char *badset[] = {"policy.spread_samples=0", "policy.no_such=1"};
    assert_int_equal(vpack_config_load(&c, "", "f.conf", badset, 2, &bad, &err), -EINVAL);
    assert_string_equal(err, "--set policy.spread_samples: '0' is not a whole number from 1 to 100");
    assert_int_equal(bad, VPACK_CONFIG_SETS);
    free(err);
    char *noeq[] = {"policy.spread_samples"};
    assert_int_equal(vpack_config_load(&c, NULL, "f.conf", noeq, 1, &bad, &err), -EINVAL);
    assert_string_equal(err, "--set 'policy.spread_samples': expected SECTION.KEY=VALUE");
    free(err);
}

/*
 * One setting, one sentence: a bad value or a bad order of the watermarks
 * reads the same from the file and from --set; only where it came from
 * differs.
 */
static void test_load_same_error(void **state)
{
    (void)state;
    static const struct {
        const char *line, *set, *what;
    } cases[] = {
        {"pack_watermark = 1.5", "policy.pack_watermark=1.5",
         "policy.pack_watermark: '1.5' is not a number from 0 to 1"},
        {"no_such = 1", "policy.no_such=1", "policy.no_such: unknown key"},
        {"default_level = 3", "policy.default_level=3",
         "policy.default_level: '3' is not a power policy level (0, 1 or 2)"},
        {"pack_watermark = 0.9", "policy.pack_watermark=0.9",
         "[policy]: the pack watermark (0.9) is above the spread watermark (0.8): packed "
         "load would spread again at once"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct vpack_config c;
        enum vpack_config_input bad;
        char text[128], *from_file = NULL, *from_set = NULL, *sets[] = {(char *)cases[i].set};
        const char *tail;

        snprintf(text, sizeof(text), "[policy]\n%s\n", cases[i].line);
        assert_int_equal(vpack_config_load(&c, text, "f.conf", NULL, 0, &bad, &from_file), -EINVAL);
        assert_int_equal(bad, VPACK_CONFIG_TEXT);
        assert_int_equal(vpack_config_load(&c, NULL, "f.conf", sets, 1, &bad, &from_set), -EINVAL);
        assert_int_equal(bad, VPACK_CONFIG_SETS);
        /* "f.conf: line 2: WHAT" (or "f.conf: WHAT" for the check) and "--set WHAT" / "WHAT". */
        tail = from_file + strlen(from_file) - strlen(cases[i].what);
        assert_true(strlen(from_file) > strlen(cases[i].what));
        assert_string_equal(tail, cases[i].what);
        assert_true(!strncmp(from_file, "f.conf: ", 8));
        tail = from_set + strlen(from_set) - strlen(cases[i].what);
        assert_string_equal(tail, cases[i].what);
        assert_true(!strcmp(from_set, cases[i].what) || !strncmp(from_set, "--set ", 6));
        free(from_file);
        free(from_set);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_parse_all_kinds),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_rule_errors),
        cmocka_unit_test(test_long_line),
        cmocka_unit_test(test_set),
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_load_same_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
