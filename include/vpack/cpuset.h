/* SPDX-License-Identifier: MIT */
/*
 * Host CPU sets: a fixed-size bitmap for CPU ids 0..VPACK_CPUSET_MAX-1 and
 * libvirt's text syntax for it ("0-3,^2,8" = {0,1,3,8}).
 *
 * A vpack_cpuset is a plain value (2 KiB): copy it with '=', keep it on the
 * stack or embed it. No function here allocates except vpack_cpuset_format(),
 * whose result the caller frees, and vpack_cpuset_parse()'s error message.
 */
#ifndef VPACK_CPUSET_H
#define VPACK_CPUSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* libvirt's VIR_DOMAIN_CPUMASK_LEN: CPU ids 0..16383 are valid. */
#define VPACK_CPUSET_MAX 16384
#define VPACK_CPUSET_WORDS (VPACK_CPUSET_MAX / 64)

typedef struct vpack_cpuset {
    uint64_t w[VPACK_CPUSET_WORDS];
} vpack_cpuset;

void vpack_cpuset_zero(vpack_cpuset *s);
/* Sets lo..hi inclusive; returns -ERANGE if hi is out of range or lo > hi. */
int vpack_cpuset_set_range(vpack_cpuset *s, unsigned lo, unsigned hi);
/* Returns -ERANGE for cpu >= VPACK_CPUSET_MAX. */
int vpack_cpuset_set(vpack_cpuset *s, unsigned cpu);
void vpack_cpuset_clear(vpack_cpuset *s, unsigned cpu);
bool vpack_cpuset_isset(const vpack_cpuset *s, unsigned cpu);
bool vpack_cpuset_empty(const vpack_cpuset *s);
unsigned vpack_cpuset_count(const vpack_cpuset *s);
/* First set bit, or -1 when empty. */
int vpack_cpuset_first(const vpack_cpuset *s);
/* Highest set bit, or -1 when empty. */
int vpack_cpuset_last(const vpack_cpuset *s);
/* Next set bit after prev (pass -1 to start), or -1 at the end. */
int vpack_cpuset_next(const vpack_cpuset *s, int prev);

/* dst may alias a or b. */
void vpack_cpuset_and(vpack_cpuset *dst, const vpack_cpuset *a, const vpack_cpuset *b);
void vpack_cpuset_or(vpack_cpuset *dst, const vpack_cpuset *a, const vpack_cpuset *b);
/* dst = a & ~b */
void vpack_cpuset_andnot(vpack_cpuset *dst, const vpack_cpuset *a, const vpack_cpuset *b);
bool vpack_cpuset_equal(const vpack_cpuset *a, const vpack_cpuset *b);
/* True when a and b have the same members within `within` (a & within == b & within). */
bool vpack_cpuset_equal_within(const vpack_cpuset *a, const vpack_cpuset *b,
                               const vpack_cpuset *within);
bool vpack_cpuset_intersects(const vpack_cpuset *a, const vpack_cpuset *b);
/* True when every member of a is in b (the empty set is a subset of all). */
bool vpack_cpuset_subset(const vpack_cpuset *a, const vpack_cpuset *b);

/*
 * Parses libvirt's cpuset syntax exactly as libvirt's
 * virBitmapParseSeparator() does: comma-separated items "N", "N-M" and "^N",
 * applied left to right, blanks around items skipped, ids below
 * VPACK_CPUSET_MAX. A result with no member is an error, as it is for every
 * cpuset attribute libvirt accepts.
 *
 * Returns 0, or -EINVAL with *errmsg naming what was wrong and at which
 * character (see vpack/errmsg.h: the caller frees it; with errmsg == NULL,
 * as on the sampling path, nothing is allocated).
 */
int vpack_cpuset_parse(vpack_cpuset *out, const char *text, char **errmsg);

/*
 * Formats like libvirt's virBitmapFormat(): ascending runs, "a-b" for runs of
 * two or more, "a" for singles, joined by ','; the empty set is "".
 * vpack_cpuset_format_buf() returns the length it needed (excluding the NUL)
 * like snprintf; vpack_cpuset_format() returns a string the caller frees, or
 * NULL when out of memory.
 */
size_t vpack_cpuset_format_buf(const vpack_cpuset *s, char *buf, size_t len);
char *vpack_cpuset_format(const vpack_cpuset *s);

#define VPACK_CPUSET_FOREACH(cpu, set) \
    for (int cpu = vpack_cpuset_first(set); cpu >= 0; cpu = vpack_cpuset_next(set, cpu))

#endif
