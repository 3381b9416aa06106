/* SPDX-License-Identifier: MIT */
/*
 * Checked json-c building for the agent's answers and views. Every call
 * takes a bool *ok that the first failed allocation clears; a view is built
 * straight through and checked once, at vpack__json_finish(). Each call
 * consumes the value it is given, also after a failure.
 */
#ifndef VPACK_JSONOUT_H
#define VPACK_JSONOUT_H

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "vpack/cpuset.h"

/* obj[key] = v; a NULL obj or v (a failed allocation) clears *ok. */
void vpack__json_set(struct json_object *obj, const char *key, struct json_object *v, bool *ok);
/* obj[key] = null. */
void vpack__json_set_null(struct json_object *obj, const char *key, bool *ok);
/* Appends v to the array arr. */
void vpack__json_append(struct json_object *arr, struct json_object *v, bool *ok);
/* Shorthands for vpack__json_set() with a new string, int, double or boolean. */
void vpack__json_set_str(struct json_object *obj, const char *key, const char *s, bool *ok);
void vpack__json_set_int(struct json_object *obj, const char *key, int64_t v, bool *ok);
void vpack__json_set_double(struct json_object *obj, const char *key, double v, bool *ok);
void vpack__json_set_bool(struct json_object *obj, const char *key, bool v, bool *ok);
/* obj[key] = the CPU set's text ("0-3,8"), or null when s is NULL. */
void vpack__json_set_cpuset(struct json_object *obj, const char *key, const vpack_cpuset *s,
                            bool *ok);
/* An array of ints; NULL when out of memory. */
struct json_object *vpack__json_ints(const int *v, unsigned n);
/* obj when ok (and non-NULL); otherwise puts obj and returns NULL. */
struct json_object *vpack__json_finish(struct json_object *obj, bool ok);

#endif
