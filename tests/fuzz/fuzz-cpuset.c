// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the cpu set parser and formatter (lib/cpuset.c).
 * The input is one cpuset text, or two joined by '|'. Checked on every input:
 *
 *  - the parser either succeeds with a non-empty set, or fails with -EINVAL
 *    and a non-empty, NUL-terminated message that fits the buffer, without
 *    control characters (the text it quotes may hold any);
 *  - format then re-parse gives the same set (round trip), and formatting is
 *    canonical: digits, ',' and '-' only, ascending runs, formatting the
 *    re-parsed set gives the same text;
 *  - vpack_cpuset_format_buf() returns the full length whatever the buffer
 *    and truncates like snprintf (a NUL-terminated prefix);
 *  - count, first, last and next agree with isset, and every member is
 *    below VPACK_CPUSET_MAX;
 *  - with two sets: and/or/andnot/subset/intersects/equal obey the set laws.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vpack/cpuset.h"

#define CHECK(cond) ((cond) ? (void)0 : abort())

/* Parses text; on success checks the set's own invariants and the round trip. */
static int parse_checked(const char *text, vpack_cpuset *out)
{
    char *err = NULL;
    vpack_cpuset quiet;
    int r = vpack_cpuset_parse(out, text, &err);
    /* Without errmsg: the same result (nothing allocated on the sampling path). */
    CHECK(vpack_cpuset_parse(&quiet, text, NULL) == r);
    if (r < 0) {
        CHECK(r == -EINVAL);
        CHECK(err != NULL && err[0] != '\0');
        for (const char *c = err; *c; c++) /* one line: the text is quoted */
            CHECK((unsigned char)*c >= 0x20 && *c != 0x7f);
        free(err);
        return r;
    }
    CHECK(r == 0 && err == NULL && vpack_cpuset_equal(out, &quiet));
    CHECK(!vpack_cpuset_empty(out));

    /* Iteration agrees with count, first, last and isset. */
    unsigned n = 0;
    int prev = -1;
    VPACK_CPUSET_FOREACH(c, out) {
        CHECK(c > prev && c < VPACK_CPUSET_MAX && vpack_cpuset_isset(out, (unsigned)c));
        for (int k = prev + 1; k < c; k++)
            CHECK(!vpack_cpuset_isset(out, (unsigned)k));
        prev = c;
        n++;
    }
    CHECK(n == vpack_cpuset_count(out));
    CHECK(vpack_cpuset_first(out) >= 0 && vpack_cpuset_last(out) == prev);

    /* Format: canonical text that parses back to the same set. */
    char *f = vpack_cpuset_format(out);
    CHECK(f != NULL && f[0] != '\0');
    size_t len = strlen(f);
    CHECK(strspn(f, "0123456789,-") == len);
    CHECK(f[0] != ',' && f[len - 1] != ',' && f[len - 1] != '-');
    vpack_cpuset back;
    CHECK(vpack_cpuset_parse(&back, f, NULL) == 0);
    CHECK(vpack_cpuset_equal(&back, out));
    char *f2 = vpack_cpuset_format(&back);
    CHECK(f2 && strcmp(f, f2) == 0);
    free(f2);

    /* format_buf: snprintf semantics for every short buffer size. */
    CHECK(vpack_cpuset_format_buf(out, NULL, 0) == len);
    char small[24];
    for (size_t sz = 1; sz <= sizeof(small); sz++) {
        memset(small, 'x', sizeof(small));
        CHECK(vpack_cpuset_format_buf(out, small, sz) == len);
        size_t got = strnlen(small, sz);
        CHECK(got < sz && got == (len < sz - 1 ? len : sz - 1));
        CHECK(memcmp(small, f, got) == 0);
    }
    free(f);
    return 0;
}

static void check_laws(const vpack_cpuset *a, const vpack_cpuset *b)
{
    vpack_cpuset i, u, d, t;
    vpack_cpuset_and(&i, a, b);
    vpack_cpuset_or(&u, a, b);
    vpack_cpuset_andnot(&d, a, b);
    CHECK(vpack_cpuset_subset(&i, a) && vpack_cpuset_subset(&i, b));
    CHECK(vpack_cpuset_subset(a, &u) && vpack_cpuset_subset(b, &u));
    CHECK(vpack_cpuset_count(&u) + vpack_cpuset_count(&i) ==
          vpack_cpuset_count(a) + vpack_cpuset_count(b));
    CHECK(vpack_cpuset_intersects(a, b) == !vpack_cpuset_empty(&i));
    CHECK(!vpack_cpuset_intersects(&d, b));
    vpack_cpuset_or(&t, &d, &i);
    CHECK(vpack_cpuset_equal(&t, a));
    CHECK(vpack_cpuset_subset(a, b) == vpack_cpuset_empty(&d));
    CHECK(vpack_cpuset_equal(a, b) == (vpack_cpuset_subset(a, b) && vpack_cpuset_subset(b, a)));
    /* dst may alias an operand. */
    t = *a;
    vpack_cpuset_and(&t, &t, b);
    CHECK(vpack_cpuset_equal(&t, &i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *bar = memchr(text, '|', size);
    vpack_cpuset a, b;
    if (bar) {
        *bar = '\0';
        if (parse_checked(text, &a) == 0 && parse_checked(bar + 1, &b) == 0) {
            check_laws(&a, &b);
            check_laws(&b, &a);
        }
    } else {
        parse_checked(text, &a);
    }
    free(text);
    return 0;
}
