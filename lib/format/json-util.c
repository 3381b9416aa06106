// SPDX-License-Identifier: MIT
/* Small json-c helpers; see json-util.h. */
#include "vpack/json-util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "vpack/cpuset.h"

struct json_object *vpack_json_member(struct json_object *o, const char *key)
{
    struct json_object *v = NULL;

    /* json-c answers 0 for a NULL o or one that is not an object. */
    return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

/* The value at key if o has one of type t, else NULL. */
static struct json_object *member(struct json_object *o, const char *key, json_type t)
{
    struct json_object *v = vpack_json_member(o, key);

    return v && json_object_is_type(v, t) ? v : NULL;
}

const char *vpack_json_str(struct json_object *o, const char *key, const char *dflt)
{
    struct json_object *v = member(o, key, json_type_string);

    return v ? json_object_get_string(v) : dflt;
}

const char *vpack_json_text(struct json_object *o, const char *key, const char *dflt)
{
    struct json_object *v;

    if (o && json_object_object_get_ex(o, key, &v) && v)
        return json_object_get_string(v);
    return dflt;
}

double vpack_json_double(struct json_object *o, const char *key, double dflt)
{
    struct json_object *v = member(o, key, json_type_double);

    if (!v)
        v = member(o, key, json_type_int);
    return v ? json_object_get_double(v) : dflt;
}

bool vpack_json_bool(struct json_object *o, const char *key, bool dflt)
{
    struct json_object *v = member(o, key, json_type_boolean);

    return v ? json_object_get_boolean(v) : dflt;
}

struct json_object *vpack_json_array(struct json_object *o, const char *key)
{
    return member(o, key, json_type_array);
}

char *vpack_json_list(struct json_object *o, const char *key, const char *dflt)
{
    struct json_object *arr = vpack_json_array(o, key);
    size_t n = arr ? json_object_array_length(arr) : 0, len = 0;
    char *buf = NULL;
    FILE *f;

    if (n == 0)
        return strdup(dflt);
    if (!(f = open_memstream(&buf, &len)))
        return NULL;
    for (size_t i = 0; i < n; i++) {
        const char *s = json_object_get_string(json_object_array_get_idx(arr, i));
        fprintf(f, "%s%s", i ? "," : "", s ? s : "?");
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

int vpack_json_add(struct json_object *o, const char *key, struct json_object *v)
{
    if (!v)
        return -ENOMEM;
    if (json_object_object_add(o, key, v) < 0) {
        json_object_put(v);
        return -ENOMEM;
    }
    return 0;
}

struct json_object *vpack_json_new_number(double v, int digits)
{
    char buf[40];

    if (digits > 0) {
        snprintf(buf, sizeof(buf), "%.*g", digits, v);
    } else {
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(buf, sizeof(buf), "%.*g", prec, v);
            if (strtod(buf, NULL) == v)
                break;
        }
    }
    if (!strpbrk(buf, ".eE"))
        strcat(buf, ".0");
    return json_object_new_double_s(v, buf);
}

struct json_object *vpack_json_cpuset(const vpack_cpuset *s)
{
    char *text = vpack_cpuset_format(s);
    struct json_object *v = text ? json_object_new_string(text) : NULL;
    free(text);
    return v;
}

int vpack_json_push(struct json_object *arr, struct json_object *v)
{
    if (!v)
        return -ENOMEM;
    if (json_object_array_add(arr, v) < 0) {
        json_object_put(v);
        return -ENOMEM;
    }
    return 0;
}

int vpack_json_add_cpuset(struct json_object *o, const char *key, const vpack_cpuset *s)
{
    return vpack_json_add(o, key, vpack_json_cpuset(s));
}

/* Building with a bool *ok that the first failure clears (json-util.h). */

void vpack_json_set(struct json_object *obj, const char *key, struct json_object *v, bool *ok)
{
    if (!obj || !v || json_object_object_add(obj, key, v) < 0) {
        json_object_put(v);
        *ok = false;
    }
}

void vpack_json_set_null(struct json_object *obj, const char *key, bool *ok)
{
    if (!obj || json_object_object_add(obj, key, NULL) < 0)
        *ok = false;
}

void vpack_json_append(struct json_object *arr, struct json_object *v, bool *ok)
{
    if (!arr || !v || json_object_array_add(arr, v) < 0) {
        json_object_put(v);
        *ok = false;
    }
}

void vpack_json_set_str(struct json_object *obj, const char *key, const char *s, bool *ok)
{
    vpack_json_set(obj, key, json_object_new_string(s), ok);
}

void vpack_json_set_int(struct json_object *obj, const char *key, int64_t v, bool *ok)
{
    vpack_json_set(obj, key, json_object_new_int64(v), ok);
}

void vpack_json_set_double(struct json_object *obj, const char *key, double v, bool *ok)
{
    vpack_json_set(obj, key, json_object_new_double(v), ok);
}

void vpack_json_set_bool(struct json_object *obj, const char *key, bool v, bool *ok)
{
    vpack_json_set(obj, key, json_object_new_boolean(v), ok);
}

void vpack_json_set_cpuset(struct json_object *obj, const char *key, const vpack_cpuset *s,
                            bool *ok)
{
    if (!s) {
        vpack_json_set_null(obj, key, ok);
        return;
    }
    vpack_json_set(obj, key, vpack_json_cpuset(s), ok);
}

struct json_object *vpack_json_ints(const int *v, unsigned n)
{
    struct json_object *arr = json_object_new_array();
    bool ok = true;
    for (unsigned i = 0; i < n; i++)
        vpack_json_append(arr, json_object_new_int(v[i]), &ok);
    return vpack_json_finish(arr, ok);
}

struct json_object *vpack_json_finish(struct json_object *obj, bool ok)
{
    if (ok && obj)
        return obj;
    json_object_put(obj);
    return NULL;
}
