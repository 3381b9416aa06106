// SPDX-License-Identifier: MIT
/*
 * A plan as one line of JSON, for `vpackctl plan --json`, the agent's dumps
 * and the control protocol. The format is documented in policy.h and in
 * vpackctl(1), "PLAN FORMAT".
 */
#include "vpack/policy.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "vpack/json.h"


/* Adds a JSON null under key. */
static int add_null(json_object *o, const char *key)
{
    return json_object_object_add(o, key, NULL) < 0 ? -ENOMEM : 0;
}

/* A string, or null for NULL. */
static int add_string(json_object *o, const char *key, const char *s)
{
    return s ? vpack_json_add(o, key, json_object_new_string(s)) : add_null(o, key);
}

/*
 * A number with at most 10 significant digits: the demand is a sum of
 * measured fractions, and its last bits are noise (0.8700000000000001).
 * Integral values keep a ".0". Null when v is not finite.
 */
static int add_double(json_object *o, const char *key, double v)
{
    if (!isfinite(v))
        return add_null(o, key);
    return vpack_json_add(o, key, vpack_json_new_number(v, 10));
}

/* A mask in libvirt syntax, or null when the plan has none. */
static int add_cpus(json_object *o, const char *key, const vpack_cpuset *set)
{
    return set ? vpack_json_add_cpuset(o, key, set) : add_null(o, key);
}

static json_object *int_array(const int *v, unsigned n)
{
    json_object *a = json_object_new_array_ext((int)(n < INT_MAX ? n : INT_MAX));

    if (!a)
        return NULL;
    for (unsigned i = 0; i < n; i++) {
        if (vpack_json_push(a, json_object_new_int(v[i])) < 0) {
            json_object_put(a);
            return NULL;
        }
    }
    return a;
}

/* [{"id": 0, "cpus": "3"}, ...] */
static json_object *threads_json(const struct vpack_plan_thread *t, unsigned n)
{
    json_object *a = json_object_new_array_ext((int)(n < INT_MAX ? n : INT_MAX)), *o;

    if (!a)
        return NULL;
    for (unsigned i = 0; i < n; i++) {
        o = json_object_new_object();
        if (!o || vpack_json_add(o, "id", json_object_new_int(t[i].id)) < 0 ||
            add_cpus(o, "cpus", t[i].cpus) < 0) {
            json_object_put(o);
            json_object_put(a);
            return NULL;
        }
        if (vpack_json_push(a, o) < 0) {
            json_object_put(a);
            return NULL;
        }
    }
    return a;
}

static json_object *domain_json(const struct vpack_plan_domain *d)
{
    json_object *o = json_object_new_object();

    if (!o)
        return NULL;
    if (add_string(o, "name", d->name) < 0 || vpack_json_add(o, "level", json_object_new_int(d->level)) < 0 ||
        vpack_json_add(o, "packages", int_array(d->packages, d->npackages)) < 0 ||
        vpack_json_add(o, "moved", json_object_new_boolean(d->moved)) < 0 ||
        add_string(o, "reason", d->reason) < 0 ||
        vpack_json_add(o, "vcpus", threads_json(d->vcpus, d->nvcpus)) < 0 ||
        add_cpus(o, "emulator", d->emulator.cpus) < 0 ||
        vpack_json_add(o, "iothreads", threads_json(d->iothreads, d->niothreads)) < 0) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

char *vpack_plan_to_json(const struct vpack_plan *p)
{
    json_object *root = json_object_new_object(), *doms = NULL;
    char *text = NULL;
    int ret;

    if (!root)
        goto cleanup;
    if (vpack_json_add(root, "active_packages", int_array(p->active_packages, p->nactive)) < 0)
        goto cleanup;
    if (p->wakeup_package >= 0) {
        if (vpack_json_add(root, "wakeup_package", json_object_new_int(p->wakeup_package)) < 0)
            goto cleanup;
    } else if (add_null(root, "wakeup_package") < 0) {
        goto cleanup;
    }
    if (vpack_json_add(root, "lifted", json_object_new_boolean(p->lifted)) < 0 ||
        add_double(root, "demand", p->demand) < 0 ||
        add_string(root, "why", vpack_plan_why_name(p->why)) < 0 ||
        add_string(root, "reason", p->reason) < 0)
        goto cleanup;
    doms = json_object_new_array_ext((int)(p->ndomains < INT_MAX ? p->ndomains : INT_MAX));
    if (!doms)
        goto cleanup;
    for (unsigned i = 0; i < p->ndomains; i++)
        if (vpack_json_push(doms, domain_json(&p->domains[i])) < 0)
            goto cleanup;
    /* vpack_json_add() releases doms when it fails, so it is not ours after this. */
    ret = vpack_json_add(root, "domains", doms);
    doms = NULL;
    if (ret < 0)
        goto cleanup;
    text = vpack_json_to_text(root);

cleanup:
    json_object_put(doms);
    json_object_put(root);
    return text;
}
