// SPDX-License-Identifier: MIT
/* vpackd.conf: defaults, every kind of key, and errors that name the line. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
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
                       "[control]\n"
                       "group = vpack\n"
                       "[metrics]\n"
                       "port = 9999\n"
                       "enabled = false\n";
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
    assert_string_equal(c.control_group, "vpack");
    assert_int_equal(c.metrics_port, 9999);
    assert_false(c.metrics_enabled);
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
    vpack_config_clear(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_parse_all_kinds),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
