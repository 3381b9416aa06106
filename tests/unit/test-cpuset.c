// SPDX-License-Identifier: MIT
/* CPU sets: libvirt's syntax in both directions, and the set operations. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vpack/cpuset.h"

/* Parses text and returns its canonical form (static buffer). */
static const char *canon(const char *text)
{
    static char out[4096];
    char *err = (char *)text; /* must be replaced: NULL on success */
    vpack_cpuset s;
    int r = vpack_cpuset_parse(&s, text, &err);
    if (r < 0) {
        snprintf(out, sizeof(out), "ERROR: %s", err ? err : "(no message)");
        free(err);
        return out;
    }
    assert_null(err);
    vpack_cpuset_format_buf(&s, out, sizeof(out));
    return out;
}

static void test_parse_libvirt_examples(void **state)
{
    (void)state;
    assert_string_equal(canon("0-3,^2,8"), "0-1,3,8");
    assert_string_equal(canon("1-2,5-7,^6"), "1-2,5,7");
    assert_string_equal(canon("1-4,^2"), "1,3-4");
    assert_string_equal(canon("1-4,^3,6"), "1-2,4,6");
    assert_string_equal(canon("0-2,5-7"), "0-2,5-7");
    assert_string_equal(canon("1-4,8-20,525"), "1-4,8-20,525");
    assert_string_equal(canon("0,16383"), "0,16383");
    assert_string_equal(canon("2048,4096"), "2048,4096");
    assert_string_equal(canon("7"), "7");
    assert_string_equal(canon("3,1,2"), "1-3");
    /* Exclusions apply left to right: a later item adds the CPU back. */
    assert_string_equal(canon("0-3,^2,2"), "0-3");
    /* Excluding a CPU that is not there is fine. */
    assert_string_equal(canon("0,^5"), "0");
}

static void test_parse_blanks_and_trailing_comma(void **state)
{
    (void)state;
    /* libvirt skips blanks around items and numbers. */
    assert_string_equal(canon(" 0 - 2 , ^1 "), "0,2");
    assert_string_equal(canon("0, 4"), "0,4");
    /* libvirt's virBitmapParseSeparator() accepts one trailing comma. */
    assert_string_equal(canon("0-1,"), "0-1");
}

static void expect_error(const char *text, const char *needle)
{
    char *err = NULL;
    vpack_cpuset s;
    vpack_cpuset_zero(&s);
    vpack_cpuset_set(&s, 42);
    int r = vpack_cpuset_parse(&s, text, &err);
    assert_int_equal(r, -EINVAL);
    assert_non_null(err);
    if (!strstr(err, needle))
        fail_msg("error for '%s' is '%s', expected it to contain '%s'", text, err, needle);
    free(err);
    /* The output is untouched on error, also without a message. */
    assert_int_equal(vpack_cpuset_parse(&s, text, NULL), -EINVAL);
    assert_true(vpack_cpuset_isset(&s, 42));
    assert_int_equal(vpack_cpuset_count(&s), 1);
}

static void test_parse_garbage(void **state)
{
    (void)state;
    expect_error("aaa", "character 1");
    expect_error("aaa", "'aaa'");
    expect_error("3-1", "range 3-1 ends before it starts");
    expect_error("^", "character 2");
    expect_error("", "empty list");
    expect_error("   ", "empty list");
    expect_error(",1", "empty item");
    expect_error("1,,2", "empty item at character 3");
    expect_error("1-", "expected the end of a range");
    expect_error("^1-3", "'^' takes a single CPU");
    expect_error("1;2", "unexpected character at character 2");
    expect_error("0-2x", "unexpected character");
    expect_error("-1", "character 1");
    expect_error("16384", "out of range");
    expect_error("0-99999999999999999999", "out of range");
    expect_error("1,^1", "has no CPU");
    expect_error("0x3", "unexpected character");
}

/* Found by fuzz-snapshot (regress-cpuset-control-char): messages are one bounded line. */
static void test_parse_error_quoting(void **state)
{
    (void)state;
    vpack_cpuset s;
    char *err = NULL, text[200];
    assert_int_equal(vpack_cpuset_parse(&s, "0-\x01" "1", &err), -EINVAL);
    assert_string_equal(err, "invalid cpuset '0-?1': expected the end of a range at character 3");
    free(err);
    memset(text, '1', sizeof(text));
    text[150] = 'x';
    text[199] = '\0';
    assert_int_equal(vpack_cpuset_parse(&s, text, &err), -EINVAL);
    assert_string_equal(err, "invalid cpuset '1111111111111111111111111111111111111111111111111111"
                             "111111111111...': CPU id out of range (max 16383) at character 1");
    free(err);
}

static void test_format(void **state)
{
    (void)state;
    vpack_cpuset s;
    char buf[8];
    vpack_cpuset_zero(&s);
    assert_int_equal(vpack_cpuset_format_buf(&s, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "");
    vpack_cpuset_set(&s, 0);
    vpack_cpuset_set(&s, 1);
    vpack_cpuset_set(&s, 3);
    vpack_cpuset_set_range(&s, 10, 200);
    char *str = vpack_cpuset_format(&s);
    assert_string_equal(str, "0-1,3,10-200");
    /* Truncation reports the length it needed, like snprintf. */
    assert_int_equal(vpack_cpuset_format_buf(&s, buf, sizeof(buf)), strlen(str));
    assert_int_equal(strlen(buf), sizeof(buf) - 1);
    free(str);

    vpack_cpuset_zero(&s);
    vpack_cpuset_set_range(&s, 0, VPACK_CPUSET_MAX - 1);
    str = vpack_cpuset_format(&s);
    assert_string_equal(str, "0-16383");
    free(str);
}

static void test_ops(void **state)
{
    (void)state;
    vpack_cpuset a, b, c;
    assert_int_equal(vpack_cpuset_parse(&a, "0-7,64,127-129", NULL), 0);
    assert_int_equal(vpack_cpuset_parse(&b, "4-64,16383", NULL), 0);
    assert_int_equal(vpack_cpuset_count(&a), 12);
    assert_int_equal(vpack_cpuset_first(&a), 0);
    assert_int_equal(vpack_cpuset_last(&a), 129);
    assert_int_equal(vpack_cpuset_last(&b), 16383);
    assert_int_equal(vpack_cpuset_next(&a, 7), 64);
    assert_int_equal(vpack_cpuset_next(&a, 129), -1);
    assert_int_equal(vpack_cpuset_next(&b, 16383), -1);

    vpack_cpuset_and(&c, &a, &b);
    assert_string_equal(vpack_cpuset_format_buf(&c, NULL, 0) ? "x" : "", "x");
    char buf[64];
    vpack_cpuset_format_buf(&c, buf, sizeof(buf));
    assert_string_equal(buf, "4-7,64");
    vpack_cpuset_or(&c, &a, &b);
    vpack_cpuset_format_buf(&c, buf, sizeof(buf));
    assert_string_equal(buf, "0-64,127-129,16383");
    vpack_cpuset_andnot(&c, &a, &b);
    vpack_cpuset_format_buf(&c, buf, sizeof(buf));
    assert_string_equal(buf, "0-3,127-129");
    /* Aliasing dst and a source works. */
    vpack_cpuset_and(&a, &a, &b);
    vpack_cpuset_format_buf(&a, buf, sizeof(buf));
    assert_string_equal(buf, "4-7,64");

    assert_true(vpack_cpuset_intersects(&a, &b));
    assert_true(vpack_cpuset_subset(&a, &b));
    assert_false(vpack_cpuset_subset(&b, &a));
    assert_false(vpack_cpuset_equal(&a, &b));
    /* Equal within a set: the kernel's mask and vpack's, compared on the online CPUs. */
    {
        vpack_cpuset k, v, on;
        assert_int_equal(vpack_cpuset_parse(&k, "0-1", NULL), 0);
        assert_int_equal(vpack_cpuset_parse(&v, "0", NULL), 0);
        assert_int_equal(vpack_cpuset_parse(&on, "0", NULL), 0);
        assert_true(vpack_cpuset_equal_within(&k, &v, &on));  /* CPU 1 offline: both {0} */
        assert_int_equal(vpack_cpuset_parse(&on, "0-1", NULL), 0);
        assert_false(vpack_cpuset_equal_within(&k, &v, &on)); /* back: 0-1 is not 0 */
        assert_false(vpack_cpuset_equal_within(&v, &k, &on));
        assert_int_equal(vpack_cpuset_parse(&k, "0,200,16383", NULL), 0);
        assert_int_equal(vpack_cpuset_parse(&v, "0,16383", NULL), 0);
        assert_int_equal(vpack_cpuset_parse(&on, "0-199,201-16383", NULL), 0);
        assert_true(vpack_cpuset_equal_within(&k, &v, &on));  /* differ only off `within` */
        assert_int_equal(vpack_cpuset_parse(&on, "200", NULL), 0);
        assert_false(vpack_cpuset_equal_within(&k, &v, &on));
        vpack_cpuset_zero(&on);
        assert_true(vpack_cpuset_equal_within(&k, &v, &on));  /* nothing to compare on */
    }
    vpack_cpuset_zero(&c);
    assert_true(vpack_cpuset_empty(&c));
    assert_true(vpack_cpuset_subset(&c, &a));
    assert_false(vpack_cpuset_intersects(&c, &a));
    assert_int_equal(vpack_cpuset_first(&c), -1);
    assert_int_equal(vpack_cpuset_last(&c), -1);
    assert_int_equal(vpack_cpuset_set(&c, VPACK_CPUSET_MAX), -ERANGE);
    assert_int_equal(vpack_cpuset_set_range(&c, 5, 4), -ERANGE);
    assert_false(vpack_cpuset_isset(&c, 99999));

    int n = 0, sum = 0;
    VPACK_CPUSET_FOREACH(cpu, &b) {
        n++;
        sum += cpu;
    }
    assert_int_equal(n, 62);
    assert_int_equal(sum, (4 + 64) * 61 / 2 + 16383);
}

/* Every canonical string parses back to the same set. */
static void test_roundtrip(void **state)
{
    (void)state;
    unsigned seed = 12345;
    for (int iter = 0; iter < 500; iter++) {
        vpack_cpuset s, t;
        vpack_cpuset_zero(&s);
        int n = 1 + (int)(rand_r(&seed) % 40);
        for (int i = 0; i < n; i++)
            vpack_cpuset_set(&s, (unsigned)rand_r(&seed) % 300);
        char *str = vpack_cpuset_format(&s);
        assert_int_equal(vpack_cpuset_parse(&t, str, NULL), 0);
        assert_true(vpack_cpuset_equal(&s, &t));
        free(str);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_libvirt_examples),
        cmocka_unit_test(test_parse_blanks_and_trailing_comma),
        cmocka_unit_test(test_parse_garbage),
        cmocka_unit_test(test_parse_error_quoting),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_ops),
        cmocka_unit_test(test_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
