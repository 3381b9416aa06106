// SPDX-License-Identifier: MIT
#include "jsonout.h"

#include <stdlib.h>

void vpack__json_set(struct json_object *obj, const char *key, struct json_object *v, bool *ok)
{
    if (!obj || !v || json_object_object_add(obj, key, v) < 0) {
        json_object_put(v);
        *ok = false;
    }
}

void vpack__json_set_null(struct json_object *obj, const char *key, bool *ok)
{
    if (!obj || json_object_object_add(obj, key, NULL) < 0)
        *ok = false;
}

void vpack__json_append(struct json_object *arr, struct json_object *v, bool *ok)
{
    if (!arr || !v || json_object_array_add(arr, v) < 0) {
        json_object_put(v);
        *ok = false;
    }
}

void vpack__json_set_str(struct json_object *obj, const char *key, const char *s, bool *ok)
{
    vpack__json_set(obj, key, json_object_new_string(s), ok);
}

void vpack__json_set_int(struct json_object *obj, const char *key, int64_t v, bool *ok)
{
    vpack__json_set(obj, key, json_object_new_int64(v), ok);
}

void vpack__json_set_double(struct json_object *obj, const char *key, double v, bool *ok)
{
    vpack__json_set(obj, key, json_object_new_double(v), ok);
}

void vpack__json_set_bool(struct json_object *obj, const char *key, bool v, bool *ok)
{
    vpack__json_set(obj, key, json_object_new_boolean(v), ok);
}

void vpack__json_set_cpuset(struct json_object *obj, const char *key, const vpack_cpuset *s,
                            bool *ok)
{
    if (!s) {
        vpack__json_set_null(obj, key, ok);
        return;
    }
    char *text = vpack_cpuset_format(s);
    vpack__json_set(obj, key, text ? json_object_new_string(text) : NULL, ok);
    free(text);
}

struct json_object *vpack__json_ints(const int *v, unsigned n)
{
    struct json_object *arr = json_object_new_array();
    bool ok = true;
    for (unsigned i = 0; i < n; i++)
        vpack__json_append(arr, json_object_new_int(v[i]), &ok);
    return vpack__json_finish(arr, ok);
}

struct json_object *vpack__json_finish(struct json_object *obj, bool ok)
{
    if (ok && obj)
        return obj;
    json_object_put(obj);
    return NULL;
}
