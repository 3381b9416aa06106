// SPDX-License-Identifier: MIT
#include "vpack/cpuset.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vpack/errmsg.h"

void vpack_cpuset_zero(vpack_cpuset *s)
{
    memset(s, 0, sizeof(*s));
}

int vpack_cpuset_set(vpack_cpuset *s, unsigned cpu)
{
    if (cpu >= VPACK_CPUSET_MAX)
        return -ERANGE;
    s->w[cpu / 64] |= UINT64_C(1) << (cpu % 64);
    return 0;
}

int vpack_cpuset_set_range(vpack_cpuset *s, unsigned lo, unsigned hi)
{
    if (lo > hi || hi >= VPACK_CPUSET_MAX)
        return -ERANGE;
    for (unsigned c = lo; c <= hi;) {
        if (c % 64 == 0 && hi - c >= 63) {
            s->w[c / 64] = UINT64_MAX;
            c += 64;
        } else {
            s->w[c / 64] |= UINT64_C(1) << (c % 64);
            c++;
        }
    }
    return 0;
}

void vpack_cpuset_clear(vpack_cpuset *s, unsigned cpu)
{
    if (cpu < VPACK_CPUSET_MAX)
        s->w[cpu / 64] &= ~(UINT64_C(1) << (cpu % 64));
}

bool vpack_cpuset_isset(const vpack_cpuset *s, unsigned cpu)
{
    return cpu < VPACK_CPUSET_MAX && (s->w[cpu / 64] >> (cpu % 64)) & 1;
}

bool vpack_cpuset_empty(const vpack_cpuset *s)
{
    for (unsigned i = 0; i < VPACK_CPUSET_WORDS; i++)
        if (s->w[i])
            return false;
    return true;
}

unsigned vpack_cpuset_count(const vpack_cpuset *s)
{
    unsigned n = 0;
    for (unsigned i = 0; i < VPACK_CPUSET_WORDS; i++)
        n += (unsigned)__builtin_popcountll(s->w[i]);
    return n;
}

int vpack_cpuset_next(const vpack_cpuset *s, int prev)
{
    unsigned c = (unsigned)(prev + 1);
    if (prev < -1 || c >= VPACK_CPUSET_MAX)
        return -1;
    unsigned i = c / 64;
    uint64_t word = s->w[i] & (UINT64_MAX << (c % 64));
    for (;;) {
        if (word)
            return (int)(i * 64 + (unsigned)__builtin_ctzll(word));
        if (++i == VPACK_CPUSET_WORDS)
            return -1;
        word = s->w[i];
    }
}

int vpack_cpuset_first(const vpack_cpuset *s)
{
    return vpack_cpuset_next(s, -1);
}

int vpack_cpuset_last(const vpack_cpuset *s)
{
    for (unsigned i = VPACK_CPUSET_WORDS; i-- > 0;)
        if (s->w[i])
            return (int)(i * 64 + 63 - (unsigned)__builtin_clzll(s->w[i]));
    return -1;
}

void vpack_cpuset_and(vpack_cpuset *dst, const vpack_cpuset *a, const vpack_cpuset *b)
{
    for (unsigned i = 0; i < VPACK_CPUSET_WORDS; i++)
        dst->w[i] = a->w[i] & b->w[i];
}

void vpack_cpuset_or(vpack_cpuset *dst, const vpack_cpuset *a, const vpack_cpuset *b)
{
    for (unsigned i = 0; i < VPACK_CPUSET_WORDS; i++)
        dst->w[i] = a->w[i] | b->w[i];
}

void vpack_cpuset_andnot(vpack_cpuset *dst, const vpack_cpuset *a, const vpack_cpuset *b)
{
    for (unsigned i = 0; i < VPACK_CPUSET_WORDS; i++)
        dst->w[i] = a->w[i] & ~b->w[i];
}

bool vpack_cpuset_equal(const vpack_cpuset *a, const vpack_cpuset *b)
{
    return memcmp(a->w, b->w, sizeof(a->w)) == 0;
}

bool vpack_cpuset_equal_within(const vpack_cpuset *a, const vpack_cpuset *b,
                               const vpack_cpuset *within)
{
    for (unsigned i = 0; i < VPACK_CPUSET_WORDS; i++)
        if ((a->w[i] ^ b->w[i]) & within->w[i])
            return false;
    return true;
}

bool vpack_cpuset_intersects(const vpack_cpuset *a, const vpack_cpuset *b)
{
    for (unsigned i = 0; i < VPACK_CPUSET_WORDS; i++)
        if (a->w[i] & b->w[i])
            return true;
    return false;
}

bool vpack_cpuset_subset(const vpack_cpuset *a, const vpack_cpuset *b)
{
    for (unsigned i = 0; i < VPACK_CPUSET_WORDS; i++)
        if (a->w[i] & ~b->w[i])
            return false;
    return true;
}

static void skip_blanks(const char **p)
{
    while (isspace((unsigned char)**p))
        (*p)++;
}

/* Reads a decimal CPU id at *p; -EINVAL if there is no digit, -ERANGE if too big. */
static int read_id(const char **p, unsigned *out)
{
    unsigned long v = 0;
    if (!isdigit((unsigned char)**p))
        return -EINVAL;
    while (isdigit((unsigned char)**p)) {
        v = v * 10 + (unsigned long)(**p - '0');
        if (v >= VPACK_CPUSET_MAX)
            v = VPACK_CPUSET_MAX; /* saturate; reported as out of range */
        (*p)++;
    }
    if (v >= VPACK_CPUSET_MAX)
        return -ERANGE;
    *out = (unsigned)v;
    return 0;
}

/* The text as the message quotes it: at most QUOTE_MAX bytes, control characters as '?'. */
#define QUOTE_MAX 64

static int parse_error(char **errmsg, const char *text, const char *at, const char *what)
{
    char quoted[QUOTE_MAX + 4];
    size_t i;

    if (!errmsg)
        return -EINVAL; /* nothing to allocate on the sampling path */
    /* A message is one line: the text may come from JSON with "\n" in it. */
    for (i = 0; text[i] && i < QUOTE_MAX; i++)
        quoted[i] = (unsigned char)text[i] < 0x20 || text[i] == 0x7f ? '?' : text[i];
    if (text[i]) {
        while (i > 0 && ((unsigned char)text[i] & 0xC0) == 0x80)
            i--; /* cut on a UTF-8 character boundary */
        memcpy(quoted + i, "...", 3);
        i += 3;
    }
    quoted[i] = '\0';
    return vpack_errmsg_set(-EINVAL, errmsg, "invalid cpuset '%s': %s at character %zu", quoted,
                            what, (size_t)(at - text) + 1);
}

int vpack_cpuset_parse(vpack_cpuset *out, const char *text, char **errmsg)
{
    vpack_cpuset s;
    const char *p = text;
    char what[96];
    int r;

    if (errmsg)
        *errmsg = NULL;
    if (!text)
        return parse_error(errmsg, "", "", "no text");
    vpack_cpuset_zero(&s);
    skip_blanks(&p);
    if (*p == '\0')
        return parse_error(errmsg, text, p, "empty list");

    while (*p) {
        bool neg = false;
        unsigned start, last;
        const char *item = p;

        if (*p == '^') {
            neg = true;
            p++;
        }
        r = read_id(&p, &start);
        if (r == -ERANGE) {
            snprintf(what, sizeof(what), "CPU id out of range (max %d)", VPACK_CPUSET_MAX - 1);
            return parse_error(errmsg, text, item, what);
        }
        if (r < 0)
            return parse_error(errmsg, text, p,
                               *p == ',' || *p == '\0' ? "empty item" : "expected a CPU number");
        skip_blanks(&p);
        if (*p == '-') {
            if (neg)
                return parse_error(errmsg, text, p, "'^' takes a single CPU, not a range");
            p++;
            skip_blanks(&p);
            r = read_id(&p, &last);
            if (r == -ERANGE) {
                snprintf(what, sizeof(what), "CPU id out of range (max %d)", VPACK_CPUSET_MAX - 1);
                return parse_error(errmsg, text, item, what);
            }
            if (r < 0)
                return parse_error(errmsg, text, p, "expected the end of a range");
            if (last < start) {
                snprintf(what, sizeof(what), "range %u-%u ends before it starts", start, last);
                return parse_error(errmsg, text, item, what);
            }
            vpack_cpuset_set_range(&s, start, last);
            skip_blanks(&p);
        } else if (neg) {
            vpack_cpuset_clear(&s, start);
        } else {
            vpack_cpuset_set(&s, start);
        }
        if (*p == ',') {
            /* libvirt accepts one trailing comma ("0,"): the loop ends on NUL. */
            p++;
            skip_blanks(&p);
        } else if (*p != '\0') {
            return parse_error(errmsg, text, p, "unexpected character");
        }
    }
    if (vpack_cpuset_empty(&s))
        return parse_error(errmsg, text, p, "the set has no CPU");
    *out = s;
    return 0;
}

size_t vpack_cpuset_format_buf(const vpack_cpuset *s, char *buf, size_t len)
{
    size_t need = 0;
    char item[32];
    int c = vpack_cpuset_first(s);

    if (len)
        buf[0] = '\0';
    while (c >= 0) {
        int end = c, n;
        while (vpack_cpuset_isset(s, (unsigned)end + 1))
            end++;
        if (end > c)
            n = snprintf(item, sizeof(item), "%s%d-%d", need ? "," : "", c, end);
        else
            n = snprintf(item, sizeof(item), "%s%d", need ? "," : "", c);
        /* Copy what fits, truncating like snprintf. */
        if (need + 1 < len) {
            size_t room = len - 1 - need;
            size_t take = (size_t)n < room ? (size_t)n : room;
            memcpy(buf + need, item, take);
            buf[need + take] = '\0';
        }
        need += (size_t)n;
        c = vpack_cpuset_next(s, end);
    }
    return need;
}

char *vpack_cpuset_format(const vpack_cpuset *s)
{
    size_t n = vpack_cpuset_format_buf(s, NULL, 0);
    char *buf = malloc(n + 1);
    if (!buf)
        return NULL;
    vpack_cpuset_format_buf(s, buf, n + 1);
    return buf;
}
