/* SPDX-License-Identifier: MIT */
/*
 * Small json-c helpers for everyone: tolerant readers for objects that may
 * come from an older or newer peer, and an add that cannot leak.
 */
#ifndef VPACK_JSON_UTIL_H
#define VPACK_JSON_UTIL_H

#include <stdbool.h>

struct json_object;

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

#endif
