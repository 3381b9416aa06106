// SPDX-License-Identifier: MIT
/*
 * vpackd's log (adapters/log.c): text from a guest or a client (a domain
 * name, a record's name) cannot start a journal line of its own at another
 * priority (issue 27, item E).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"

static void test_escape(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(vpack_log_escape(out, sizeof(out), "plain name-1"), 12);
    assert_string_equal(out, "plain name-1");
    vpack_log_escape(out, sizeof(out), "a\n<0>kernel: x");
    assert_string_equal(out, "a\\n<0>kernel: x");
    vpack_log_escape(out, sizeof(out), "tab\there\r\x1b[2J\x7f");
    assert_string_equal(out, "tab\\x09here\\x0d\\x1b[2J\\x7f");
    /* systemd's escapes in unit names stay as they are. */
    vpack_log_escape(out, sizeof(out), "machine-qemu\\x2d1.scope");
    assert_string_equal(out, "machine-qemu\\x2d1.scope");
    /* Cut to fit, never in the middle of an escape. */
    assert_int_equal(vpack_log_escape(out, 5, "ab\ncd"), 4);
    assert_string_equal(out, "ab\\n");
    assert_int_equal(vpack_log_escape(out, 6, "abc\x01"), 3);
    assert_string_equal(out, "abc");
    assert_int_equal(vpack_log_escape(out, 1, "abc"), 0);
    assert_string_equal(out, "");
}

/* What vpack_log() writes on stderr for one call, read back from a file. */
static char *logged(const char *name)
{
    char path[] = "/tmp/vpack-test-log.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fd, 2), 2);
    vpack_log(VPACK_LOG_INFO, "domain %s: registered by the hook", name);
    fflush(stderr);
    assert_int_equal(dup2(saved, 2), 2);
    close(saved);
    char *buf = calloc(1, 8192);
    assert_non_null(buf);
    assert_true(pread(fd, buf, 8191, 0) >= 0);
    close(fd);
    unlink(path);
    return buf;
}

static void test_one_line_in_the_journal(void **state)
{
    (void)state;
    /* As under systemd: the priority prefix starts each line. */
    setenv("JOURNAL_STREAM", "8:1234", 1);
    char *out = logged("x\n<0>kernel: Out of memory: Killed process 1 (systemd)");
    assert_string_equal(out,
                        "<6>domain x\\n<0>kernel: Out of memory: Killed process 1 (systemd): "
                        "registered by the hook\n");
    free(out);
    /* A very long name is cut, still one line. */
    char *name = malloc(20000);
    assert_non_null(name);
    for (int i = 0; i < 19999; i++)
        name[i] = i % 100 == 50 ? '\n' : 'n';
    name[19999] = '\0';
    out = logged(name);
    /* The only newline ends the text. */
    assert_true(strchr(out, '\n') == out + strlen(out) - 1);
    assert_memory_equal(out, "<6>domain nnn", 13);
    free(name);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_one_line_in_the_journal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
