// SPDX-License-Identifier: MIT
/* Small json-c helpers; see json.h. */
#include "vpack/json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
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

const char *vpack_json_string_value(struct json_object *v)
{
    const char *s;

    if (!json_object_is_type(v, json_type_string))
        return NULL;
    s = json_object_get_string(v);
    return strlen(s) == (size_t)json_object_get_string_len(v) ? s : NULL;
}

/* The checked reader (json.h). */

int vpack_json_fail(struct vpack_json_reader *r, const char *path, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    free(r->err);
    r->err = NULL;
    if (asprintf(&r->err, "%s%s%s", path, *path ? ": " : "", msg) < 0) {
        r->err = NULL;
        r->ret = -ENOMEM;
    } else {
        r->ret = -EINVAL;
    }
    return r->ret;
}

void vpack_json_quote(char *dst, size_t n, const char *text, size_t len)
{
    size_t take = len, i;

    if (take > VPACK_JSON_QUOTE_MAX) {
        take = VPACK_JSON_QUOTE_MAX;
        while (take > 0 && ((unsigned char)text[take] & 0xC0) == 0x80)
            take--; /* cut on a UTF-8 character boundary */
    }
    if (take + 4 > n)
        take = n > 4 ? n - 4 : 0;
    for (i = 0; i < take; i++)
        dst[i] = (unsigned char)text[i] < 0x20 || text[i] == 0x7f ? '?' : text[i];
    if (take < len) {
        memcpy(dst + i, "...", 3);
        i += 3;
    }
    dst[i] = '\0';
}

void vpack_json_describe(char *dst, size_t n, struct json_object *v)
{
    const char *text;

    switch (json_object_get_type(v)) {
    case json_type_object:
        snprintf(dst, n, "an object");
        return;
    case json_type_array:
        snprintf(dst, n, "an array");
        return;
    default:
        text = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
                                                     JSON_C_TO_STRING_NOSLASHESCAPE);
        /* json-c returns NULL only when out of memory. */
        if (!text)
            text = "a value";
        vpack_json_quote(dst, n, text, strlen(text));
        return;
    }
}

void vpack_json_pathf(char *dst, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(dst, VPACK_JSON_PATH_MAX, fmt, ap);
    va_end(ap);
}

void vpack_json_path_join(char *dst, const char *path, const char *key)
{
    vpack_json_pathf(dst, "%s%s%s", path, *path ? "." : "", key);
}

int vpack_json_expected(struct vpack_json_reader *r, const char *path, const char *what,
                        struct json_object *v)
{
    char got[VPACK_JSON_QUOTE_LEN];

    vpack_json_describe(got, sizeof(got), v);
    return vpack_json_fail(r, path, "expected %s, got %s", what, got);
}

int vpack_json_missing(struct vpack_json_reader *r, const char *path, const char *key)
{
    char p[VPACK_JSON_PATH_MAX];

    vpack_json_path_join(p, path, key);
    return vpack_json_fail(r, p, "missing (required)");
}

int vpack_json_get_number(struct vpack_json_reader *r, const char *path, struct json_object *v,
                          double min, double max, double *out)
{
    char what[64];
    enum json_type t = json_object_get_type(v);
    double d;

    if (isnan(max))
        snprintf(what, sizeof(what), "a number >= %g", min);
    else
        snprintf(what, sizeof(what), "a number from %g to %g", min, max);
    if (t != json_type_int && t != json_type_double)
        return vpack_json_expected(r, path, what, v);
    d = json_object_get_double(v);
    if (!isfinite(d) || d < min || (!isnan(max) && d > max))
        return vpack_json_expected(r, path, what, v);
    *out = d;
    return 0;
}

int vpack_json_opt_number(struct vpack_json_reader *r, const char *path, struct json_object *o,
                          const char *key, double min, double max, double *out)
{
    char p[VPACK_JSON_PATH_MAX];
    struct json_object *v = vpack_json_member(o, key);

    if (!v)
        return 0;
    vpack_json_path_join(p, path, key);
    return vpack_json_get_number(r, p, v, min, max, out);
}

int vpack_json_get_int(struct vpack_json_reader *r, const char *path, struct json_object *v,
                       int64_t min, int64_t max, const char *what, int64_t *out)
{
    int64_t i;

    *out = 0;
    if (json_object_get_type(v) != json_type_int)
        return vpack_json_expected(r, path, what, v);
    i = json_object_get_int64(v);
    /* json-c saturates integers beyond int64 at INT64_MAX; those fail here too. */
    if (i < min || i > max)
        return vpack_json_expected(r, path, what, v);
    *out = i;
    return 0;
}

int vpack_json_get_string(struct vpack_json_reader *r, const char *path, struct json_object *v,
                          const char **out)
{
    *out = NULL;
    if (json_object_get_type(v) != json_type_string)
        return vpack_json_expected(r, path, "a string", v);
    if (!(*out = vpack_json_string_value(v)))
        return vpack_json_fail(r, path, "the string contains a NUL character");
    return 0;
}

int vpack_json_get_cpuset(struct vpack_json_reader *r, const char *path, struct json_object *v,
                          const char *what, vpack_cpuset *out)
{
    const char *text;
    char *err = NULL;
    int ret;

    if (json_object_get_type(v) != json_type_string)
        return vpack_json_expected(r, path, what, v);
    if ((ret = vpack_json_get_string(r, path, v, &text)) < 0)
        return ret;
    if (vpack_cpuset_parse(out, text, &err) < 0) {
        ret = err ? vpack_json_fail(r, path, "%s", err) : (r->ret = -ENOMEM);
        free(err);
        return ret;
    }
    return 0;
}

int vpack_json_opt_cpuset(struct vpack_json_reader *r, const char *path, struct json_object *o,
                          const char *key, const char *what, bool *has, vpack_cpuset *out)
{
    char p[VPACK_JSON_PATH_MAX];
    struct json_object *v = vpack_json_member(o, key);

    *has = v != NULL;
    if (!v)
        return 0;
    vpack_json_path_join(p, path, key);
    return vpack_json_get_cpuset(r, p, v, what, out);
}

char *vpack_json_to_text(struct json_object *o)
{
    const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE);

    /* json-c returns NULL only when out of memory. */
    return text ? strdup(text) : NULL;
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

    /* json-c would print NaN or Infinity, which JSON has no words for. */
    if (!isfinite(v))
        return json_object_new_double_s(v, "null");
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

/* Building with a bool *ok that the first failure clears (json.h). */

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
    vpack_json_set(obj, key, vpack_json_new_number(v, 0), ok);
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
