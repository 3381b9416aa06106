/* SPDX-License-Identifier: MIT */
/*
 * Small json-c helpers for everyone: tolerant readers for objects that may
 * come from an older or newer peer, the checked reader that names the path
 * of a bad member (snapshots, the hook's domain record, the control
 * protocol), one number format, and an add that cannot leak.
 */
#ifndef VPACK_JSON_H
#define VPACK_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vpack/cpuset.h"

struct json_object;

/*
 * The value of member key of object o, borrowed; NULL when o is NULL or not
 * an object, or key is absent or null. The one way vpack gets a member:
 * the readers below, the snapshot reader and the domain record use it.
 */
struct json_object *vpack_json_member(struct json_object *o, const char *key);

/*
 * Readers: a key that is missing, or whose value is of another type, reads
 * as dflt; o may be NULL. Strings are borrowed from o.
 */
const char *vpack_json_str(struct json_object *o, const char *key, const char *dflt);
/* Any value but null as text (numbers too: "0"). */
const char *vpack_json_text(struct json_object *o, const char *key, const char *dflt);
/* An integer or a double. */
double vpack_json_double(struct json_object *o, const char *key, double dflt);
bool vpack_json_bool(struct json_object *o, const char *key, bool dflt);
/* The array at key, or NULL. Borrowed. */
struct json_object *vpack_json_array(struct json_object *o, const char *key);

/*
 * An array of numbers or strings at key as "0,1", or a copy of dflt if it is
 * missing or empty. The caller frees the result; NULL if out of memory.
 */
char *vpack_json_list(struct json_object *o, const char *key, const char *dflt);

/*
 * The text of v when it is a string without a NUL character, borrowed;
 * NULL when v is NULL, not a string or holds a NUL (json-c keeps them, C
 * strings would end there). The checked reader's strings and the control
 * protocol's names go through it.
 */
const char *vpack_json_string_value(struct json_object *v);

/*
 * The checked reader: a format that must be right or refused reads each
 * member through these, and the first bad one gives a message "PATH: WHAT"
 * with PATH the member's place in the document, keys joined with "." and
 * array indexes in brackets ("domains[2] (web).vcpus[0].util"), and WHAT
 * saying what was wanted and what was there ("expected a number >= 0, got
 * \"x\""). Each call returns 0, or the error code to pass up: r->ret,
 * -EINVAL with r->err set, or -ENOMEM. Start with
 * struct vpack_json_reader r = {NULL, -EINVAL}; the caller frees r.err.
 */
struct vpack_json_reader {
    char *err;  /* the last error's message, allocated; NULL when none or out of memory */
    int ret;    /* -EINVAL, or -ENOMEM when even the message could not be made */
};

/* Room for a path: "domains[123456] (name...).iothreads[123456]" and friends. */
#define VPACK_JSON_PATH_MAX 256
/* The most bytes of a bad value or a name a message quotes, before "...". */
#define VPACK_JSON_QUOTE_MAX 64
/* Room for one quoted text: VPACK_JSON_QUOTE_MAX bytes, "..." and the NUL. */
#define VPACK_JSON_QUOTE_LEN (VPACK_JSON_QUOTE_MAX + 8)

/* Records the error "PATH: MESSAGE" ("MESSAGE" for path "") and returns r->ret. */
int vpack_json_fail(struct vpack_json_reader *r, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "expected WHAT, got V" at path, V as vpack_json_describe() puts it. */
int vpack_json_expected(struct vpack_json_reader *r, const char *path, const char *what,
                        struct json_object *v);
/* "PATH.KEY: missing (required)". */
int vpack_json_missing(struct vpack_json_reader *r, const char *path, const char *key);

/*
 * Copies len bytes of text into dst (of size n, at least
 * VPACK_JSON_QUOTE_LEN) for a message: control characters (and NULs)
 * become '?', and text longer than VPACK_JSON_QUOTE_MAX bytes is cut on a
 * UTF-8 character boundary and ends in "...".
 */
void vpack_json_quote(char *dst, size_t n, const char *text, size_t len);
/*
 * A bad value for "got ..." into dst (of size n, at least
 * VPACK_JSON_QUOTE_LEN): the JSON text of a scalar (a string with its
 * quotes), cut as vpack_json_quote() cuts, or "an object" or "an array".
 */
void vpack_json_describe(char *dst, size_t n, struct json_object *v);
/* Formats a path into dst (VPACK_JSON_PATH_MAX bytes); a path too long is cut short. */
void vpack_json_pathf(char *dst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "path.key" into dst (VPACK_JSON_PATH_MAX bytes); just "key" when path is "". */
void vpack_json_path_join(char *dst, const char *path, const char *key);

/*
 * The value v at path, checked. A number >= min, and <= max when max is
 * not NAN; integers count as numbers. Not finite is never in range.
 */
int vpack_json_get_number(struct vpack_json_reader *r, const char *path, struct json_object *v,
                          double min, double max, double *out);
/* The same for the member key of object o when it is there: absent or null leaves *out alone. */
int vpack_json_opt_number(struct vpack_json_reader *r, const char *path, struct json_object *o,
                          const char *key, double min, double max, double *out);
/* An integer in min..max; what says what is expected ("a positive integer"); *out 0 on error. */
int vpack_json_get_int(struct vpack_json_reader *r, const char *path, struct json_object *v,
                       int64_t min, int64_t max, const char *what, int64_t *out);
/* A string without NUL characters; *out is borrowed from v, NULL on error. */
int vpack_json_get_string(struct vpack_json_reader *r, const char *path, struct json_object *v,
                          const char **out);
/*
 * A string holding a CPU set in libvirt's syntax, into *out; a value that
 * is not a string is "expected WHAT", a string that is no CPU set gives
 * vpack_cpuset_parse()'s message.
 */
int vpack_json_get_cpuset(struct vpack_json_reader *r, const char *path, struct json_object *v,
                          const char *what, vpack_cpuset *out);
/* The same for the member key of object o when it is there: *has is false when absent or null. */
int vpack_json_opt_cpuset(struct vpack_json_reader *r, const char *path, struct json_object *o,
                          const char *key, const char *what, bool *has, vpack_cpuset *out);

/*
 * o's JSON text on one line, without json-c's "\/" for "/", as a new
 * string the caller frees; NULL when out of memory. The writers' text.
 */
char *vpack_json_to_text(struct json_object *o);

/*
 * Adds v under key of o; v may be NULL after a failed allocation. Returns 0,
 * or -ENOMEM with v put.
 */
int vpack_json_add(struct json_object *o, const char *key, struct json_object *v);
/* Appends v to the array arr, as vpack_json_add() adds: 0, or -ENOMEM with v put. */
int vpack_json_push(struct json_object *arr, struct json_object *v);

/*
 * A new double whose JSON text is v with digits significant digits
 * ("%.10g"), or with digits 0 the shortest text that reads back as exactly
 * v (15 to 17 digits; json-c alone prints 17: 0.8 as 0.80000000000000004).
 * Integral values keep a ".0", as json-c writes them. A v that is not
 * finite prints as null (json-c would print NaN or Infinity, which are not
 * JSON); the object still holds v. NULL when out of memory. The one number
 * format: the plan (10 digits), the snapshot writer, vpackd's views and
 * `vpackctl simulate --json` (0, through vpack_json_set_double()) print
 * their numbers through it.
 */
struct json_object *vpack_json_new_number(double v, int digits);

/* A new string holding the CPU set's text ("0-3,8"); NULL when out of memory. */
struct json_object *vpack_json_cpuset(const vpack_cpuset *s);
/* vpack_json_add() of vpack_json_cpuset(s). */
int vpack_json_add_cpuset(struct json_object *o, const char *key, const vpack_cpuset *s);

/*
 * Checked building for views built straight through: every call takes a
 * bool *ok that the first failed allocation clears, and the result is
 * checked once, at vpack_json_finish(). Each call consumes the value it is
 * given, also after a failure.
 */
/* obj[key] = v; a NULL obj or v (a failed allocation) clears *ok. */
void vpack_json_set(struct json_object *obj, const char *key, struct json_object *v, bool *ok);
/* obj[key] = null. */
void vpack_json_set_null(struct json_object *obj, const char *key, bool *ok);
/* Appends v to the array arr. */
void vpack_json_append(struct json_object *arr, struct json_object *v, bool *ok);
/*
 * Shorthands for vpack_json_set() with a new string, int, double or
 * boolean; a double through vpack_json_new_number(v, 0), so null when not
 * finite.
 */
void vpack_json_set_str(struct json_object *obj, const char *key, const char *s, bool *ok);
void vpack_json_set_int(struct json_object *obj, const char *key, int64_t v, bool *ok);
void vpack_json_set_double(struct json_object *obj, const char *key, double v, bool *ok);
void vpack_json_set_bool(struct json_object *obj, const char *key, bool v, bool *ok);
/* obj[key] = the CPU set's text ("0-3,8"), or null when s is NULL. */
void vpack_json_set_cpuset(struct json_object *obj, const char *key, const vpack_cpuset *s,
                            bool *ok);
/* An array of ints; NULL when out of memory. */
struct json_object *vpack_json_ints(const int *v, unsigned n);
/* obj when ok (and non-NULL); otherwise puts obj and returns NULL. */
struct json_object *vpack_json_finish(struct json_object *obj, bool ok);

#endif
