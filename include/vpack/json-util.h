/* SPDX-License-Identifier: MIT */
/*
 * Small json-c helpers for everyone: tolerant readers for objects that may
 * come from an older or newer peer, and an add that cannot leak.
 */
#ifndef VPACK_JSON_UTIL_H
#define VPACK_JSON_UTIL_H

#include <stdbool.h>
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
 * Integral values keep a ".0", as json-c writes them. v must be finite.
 * NULL when out of memory. The plan and the snapshot writer print their
 * numbers through it.
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
/* Shorthands for vpack_json_set() with a new string, int, double or boolean. */
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
