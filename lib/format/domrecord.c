// SPDX-License-Identifier: MIT
/*
 * The hook's record of a domain: struct vpack_domxml as one line of JSON
 * (vpack_domxml_to_json()), read back strictly (vpack_domxml_from_json*(),
 * the rec_* readers), and a request checked against the live domain.
 * vpackd keeps these records under its state_dir; the document they come
 * from is read by domxml.c.
 */
#include "vpack/domxml.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <libxml/xmlstring.h>

#include "domxml-priv.h"
#include "vpack/errmsg.h"
#include "vpack/json-util.h"

/* ---- JSON ---- */

/* Adds key: value, consuming value (NULL means JSON null). */
static int add(json_object *o, const char *key, json_object *v)
{
    if (json_object_object_add(o, key, v) < 0) {
        json_object_put(v);
        return -ENOMEM;
    }
    return 0;
}

static json_object *numatune_json(const struct vpack_numatune *nt)
{
    json_object *o = json_object_new_object(), *mem = NULL, *nodes = NULL;
    char key[16];

    if (!o)
        return NULL;
    if (nt->memory_specified) {
        mem = json_object_new_object();
        if (!mem ||
            add(mem, "mode", json_object_new_string(vpack_numa_mode_name(nt->memory_mode))) < 0)
            goto fail;
        if (nt->memory_placement == VPACK_NUMA_PLACEMENT_STATIC) {
            if (add(mem, "placement", json_object_new_string("static")) < 0 ||
                vpack_json_add_cpuset(mem, "nodeset", &nt->memory_nodeset) < 0)
                goto fail;
        } else if (add(mem, "placement", json_object_new_string("auto")) < 0) {
            goto fail;
        }
        if (add(o, "memory", mem) < 0) {
            mem = NULL;
            goto fail;
        }
        mem = NULL;
    }
    if (nt->nmemnodes) {
        nodes = json_object_new_object();
        if (!nodes)
            goto fail;
        for (size_t i = 0; i < nt->nmemnodes; i++) {
            const struct vpack_memnode *mn = &nt->memnodes[i];
            json_object *m = json_object_new_object();

            if (!m)
                goto fail;
            if (add(m, "mode", json_object_new_string(vpack_numa_mode_name(mn->mode))) < 0 ||
                add(m, "nodeset", json_object_new_string(mn->nodeset)) < 0) {
                json_object_put(m);
                goto fail;
            }
            snprintf(key, sizeof(key), "%u", mn->cellid);
            if (add(nodes, key, m) < 0) /* add() released m */
                goto fail;
        }
        if (add(o, "memnode", nodes) < 0) {
            nodes = NULL;
            goto fail;
        }
        nodes = NULL;
    }
    return o;

fail:
    json_object_put(mem);
    json_object_put(nodes);
    json_object_put(o);
    return NULL;
}

char *vpack_domxml_to_json(const struct vpack_domxml *d)
{
    json_object *o = json_object_new_object(), *pins = NULL, *ids = NULL, *nt = NULL;
    char *out = NULL;
    char key[16];

    if (!o)
        return NULL;
    if (add(o, "name", json_object_new_string(d->name)) < 0 ||
        add(o, "uuid", d->has_uuid ? json_object_new_string(d->uuid) : NULL) < 0 ||
        add(o, "level", d->level >= 0 ? json_object_new_int(d->level) : NULL) < 0 ||
        add(o, "vcpus", json_object_new_int64(d->vcpus)) < 0 ||
        add(o, "vcpus_current", json_object_new_int64(d->vcpus_current)) < 0 ||
        vpack_json_add_cpuset(o, "online", &d->online) < 0 ||
        add(o, "placement", json_object_new_string(
                                d->placement == VPACK_VCPU_PLACEMENT_AUTO ? "auto" : "static")) < 0)
        goto cleanup;
    if (d->has_cpuset ? vpack_json_add_cpuset(o, "cpuset", &d->cpuset) < 0 : add(o, "cpuset", NULL) < 0)
        goto cleanup;

    pins = json_object_new_object();
    if (!pins)
        goto cleanup;
    for (size_t i = 0; i < d->nvcpupin; i++) {
        snprintf(key, sizeof(key), "%u", d->vcpupin[i].vcpu);
        if (vpack_json_add_cpuset(pins, key, &d->vcpupin[i].cpus) < 0)
            goto cleanup;
    }
    if (add(o, "vcpupin", pins) < 0) {
        pins = NULL;
        goto cleanup;
    }
    pins = NULL;

    if (d->has_emulatorpin ? vpack_json_add_cpuset(o, "emulatorpin", &d->emulatorpin) < 0
                           : add(o, "emulatorpin", NULL) < 0)
        goto cleanup;

    ids = json_object_new_array();
    if (!ids)
        goto cleanup;
    for (size_t i = 0; i < d->niothreads; i++) {
        json_object *v = json_object_new_int64(d->iothreads[i]);
        if (!v || json_object_array_add(ids, v) < 0) {
            json_object_put(v);
            goto cleanup;
        }
    }
    if (add(o, "iothreads", ids) < 0) {
        ids = NULL;
        goto cleanup;
    }
    ids = NULL;

    pins = json_object_new_object();
    if (!pins)
        goto cleanup;
    for (size_t i = 0; i < d->niothreadpin; i++) {
        snprintf(key, sizeof(key), "%u", d->iothreadpin[i].iothread);
        if (vpack_json_add_cpuset(pins, key, &d->iothreadpin[i].cpus) < 0)
            goto cleanup;
    }
    if (add(o, "iothreadpin", pins) < 0) {
        pins = NULL;
        goto cleanup;
    }
    pins = NULL;

    if (d->numatune.present) {
        nt = numatune_json(&d->numatune);
        if (!nt || add(o, "numatune", nt) < 0)
            goto cleanup;
    }
    out = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                       JSON_C_TO_STRING_NOSLASHESCAPE));

cleanup:
    json_object_put(pins);
    json_object_put(ids);
    json_object_put(o);
    return out;
}

/* ---- The record's JSON, read back ---- */

/* Sets *errmsg to "domain record: KEY: WHAT" and returns -EINVAL (or -ENOMEM). */
static int rec_fail(char **errmsg, const char *key, const char *what)
{
    if (errmsg && asprintf(errmsg, "domain record: \"%s\": %s", key, what) < 0) {
        *errmsg = NULL;
        return -ENOMEM;
    }
    return -EINVAL;
}

static int rec_set(json_object *v, const char *key, vpack_cpuset *out, char **errmsg)
{
    if (!json_object_is_type(v, json_type_string) ||
        vpack_cpuset_parse(out, json_object_get_string(v), NULL) < 0)
        return rec_fail(errmsg, key, "expected a CPU set");
    return 0;
}

/* An optional CPU set: *has is false when the key is absent or null. */
static int rec_opt_set(json_object *o, const char *key, bool *has, vpack_cpuset *out,
                       char **errmsg)
{
    json_object *v = vpack_json_member(o, key);
    *has = v != NULL;
    return v ? rec_set(v, key, out, errmsg) : 0;
}

/* A non-negative integer up to max; an absent one is 0. */
static int rec_uint(json_object *o, const char *key, unsigned max, unsigned *out, char **errmsg)
{
    json_object *v = vpack_json_member(o, key);
    int64_t n;
    *out = 0;
    if (!v)
        return 0;
    if (!json_object_is_type(v, json_type_int) || (n = json_object_get_int64(v)) < 0 ||
        n > (int64_t)max)
        return rec_fail(errmsg, key, "expected a number in range");
    *out = (unsigned)n;
    return 0;
}

/* An object key that is an id: decimal digits only. */
static int rec_id(const char *s, const char *key, unsigned *out, char **errmsg)
{
    unsigned long v = 0;
    if (!*s)
        return rec_fail(errmsg, key, "expected decimal ids as keys");
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || v > UINT_MAX / 10)
            return rec_fail(errmsg, key, "expected decimal ids as keys");
        v = v * 10 + (unsigned long)(*p - '0');
    }
    if (v > UINT_MAX)
        return rec_fail(errmsg, key, "expected decimal ids as keys");
    *out = (unsigned)v;
    return 0;
}

/* {"ID": CPUSET, ...} as (id, set) pairs ascending by id; absent is none. */
static int rec_pins(json_object *o, const char *key, struct vpack_vcpupin **out, size_t *n,
                    char **errmsg)
{
    json_object *v = vpack_json_member(o, key);
    size_t i = 0;
    *out = NULL;
    *n = 0;
    if (!v)
        return 0;
    if (!json_object_is_type(v, json_type_object))
        return rec_fail(errmsg, key, "expected an object");
    size_t len = (size_t)json_object_object_length(v);
    if (len && !(*out = calloc(len, sizeof(**out))))
        return -ENOMEM;
    json_object_object_foreach(v, id, set)
    {
        int r = rec_id(id, key, &(*out)[i].vcpu, errmsg);
        if (r < 0 || (r = rec_set(set, key, &(*out)[i].cpus, errmsg)) < 0) {
            free(*out);
            *out = NULL;
            return r;
        }
        i++;
    }
    if (len)
        qsort(*out, len, sizeof(**out), vpack__domxml_cmp_vcpupin);
    *n = len;
    return 0;
}

static int rec_numa_mode(json_object *o, const char *key, enum vpack_numa_mode *mode,
                         char **errmsg)
{
    json_object *v = vpack_json_member(o, "mode");
    const char *s = v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
    for (int m = VPACK_NUMA_MODE_STRICT; m <= VPACK_NUMA_MODE_RESTRICTIVE; m++)
        if (!strcmp(s, vpack_numa_mode_name((enum vpack_numa_mode)m))) {
            *mode = (enum vpack_numa_mode)m;
            return 0;
        }
    return rec_fail(errmsg, key, "expected a numatune mode");
}

static int rec_memory(json_object *mem, struct vpack_numatune *nt, char **errmsg)
{
    json_object *pl = vpack_json_member(mem, "placement");
    const char *s = pl && json_object_is_type(pl, json_type_string) ? json_object_get_string(pl)
                                                                    : "";
    bool has;
    int r;
    if (!json_object_is_type(mem, json_type_object))
        return rec_fail(errmsg, "memory", "expected an object");
    nt->memory_specified = true;
    if ((r = rec_numa_mode(mem, "memory", &nt->memory_mode, errmsg)) < 0)
        return r;
    if (!strcmp(s, "auto")) {
        nt->memory_placement = VPACK_NUMA_PLACEMENT_AUTO;
        return 0;
    }
    if (strcmp(s, "static"))
        return rec_fail(errmsg, "memory", "expected placement static or auto");
    nt->memory_placement = VPACK_NUMA_PLACEMENT_STATIC;
    if ((r = rec_opt_set(mem, "nodeset", &has, &nt->memory_nodeset, errmsg)) < 0)
        return r;
    return has ? 0 : rec_fail(errmsg, "memory", "a static placement needs a nodeset");
}

static int rec_memnodes(json_object *nodes, struct vpack_numatune *nt, char **errmsg)
{
    vpack_cpuset set;
    size_t i = 0;
    bool has;
    int r;
    if (!json_object_is_type(nodes, json_type_object))
        return rec_fail(errmsg, "memnode", "expected an object");
    size_t len = (size_t)json_object_object_length(nodes);
    if (len > VPACK_DOMXML_MAX_CELLS)
        return rec_fail(errmsg, "memnode", "too many");
    if (len && !(nt->memnodes = calloc(len, sizeof(*nt->memnodes))))
        return -ENOMEM;
    json_object_object_foreach(nodes, cell, m)
    {
        struct vpack_memnode *mn = &nt->memnodes[i++];
        nt->nmemnodes = i;
        if ((r = rec_id(cell, "memnode", &mn->cellid, errmsg)) < 0)
            return r;
        if (!json_object_is_type(m, json_type_object))
            return rec_fail(errmsg, "memnode", "expected an object per cell");
        if ((r = rec_numa_mode(m, "memnode", &mn->mode, errmsg)) < 0 ||
            (r = rec_opt_set(m, "nodeset", &has, &set, errmsg)) < 0)
            return r;
        if (!has)
            return rec_fail(errmsg, "memnode", "a cell needs a nodeset");
        if (!(mn->nodeset = vpack_cpuset_format(&set)))
            return -ENOMEM;
    }
    if (len)
        qsort(nt->memnodes, len, sizeof(*nt->memnodes), vpack__domxml_cmp_memnode);
    return 0;
}

static int rec_numatune(json_object *o, struct vpack_numatune *nt, char **errmsg)
{
    json_object *v = vpack_json_member(o, "numatune"), *m;
    int r;
    if (!v)
        return 0;
    if (!json_object_is_type(v, json_type_object))
        return rec_fail(errmsg, "numatune", "expected an object");
    nt->present = true;
    if ((m = vpack_json_member(v, "memory")) && (r = rec_memory(m, nt, errmsg)) < 0)
        return r;
    if ((m = vpack_json_member(v, "memnode")) && (r = rec_memnodes(m, nt, errmsg)) < 0)
        return r;
    return 0;
}

static int rec_iothreads(json_object *o, struct vpack_domxml *d, char **errmsg)
{
    json_object *v = vpack_json_member(o, "iothreads");
    struct vpack_vcpupin *pins = NULL;
    size_t n = 0;
    int r;
    if (v && !json_object_is_type(v, json_type_array))
        return rec_fail(errmsg, "iothreads", "expected an array");
    d->niothreads = v ? json_object_array_length(v) : 0;
    if (d->niothreads > VPACK_DOMXML_MAX_IOTHREADS)
        return rec_fail(errmsg, "iothreads", "too many");
    if (d->niothreads && !(d->iothreads = calloc(d->niothreads, sizeof(*d->iothreads))))
        return -ENOMEM;
    for (size_t i = 0; i < d->niothreads; i++) {
        json_object *id = json_object_array_get_idx(v, i);
        int64_t x;
        if (!json_object_is_type(id, json_type_int) || (x = json_object_get_int64(id)) < 0 ||
            x > UINT_MAX)
            return rec_fail(errmsg, "iothreads", "expected ids");
        d->iothreads[i] = (unsigned)x;
    }
    if (d->niothreads)
        qsort(d->iothreads, d->niothreads, sizeof(*d->iothreads), vpack__domxml_cmp_uint);
    if ((r = rec_pins(o, "iothreadpin", &pins, &n, errmsg)) < 0)
        return r;
    if (n && !(d->iothreadpin = calloc(n, sizeof(*d->iothreadpin)))) {
        free(pins);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        d->iothreadpin[i].iothread = pins[i].vcpu;
        d->iothreadpin[i].cpus = pins[i].cpus;
    }
    d->niothreadpin = n;
    free(pins);
    return 0;
}

/* "name", "uuid", "level" and "placement". */
static int rec_identity(json_object *o, struct vpack_domxml *d, char **errmsg)
{
    json_object *v = vpack_json_member(o, "name");
    if (!v || !json_object_is_type(v, json_type_string))
        return rec_fail(errmsg, "name", "expected a string");
    if (!(d->name = (char *)xmlStrdup((const xmlChar *)json_object_get_string(v))))
        return -ENOMEM;
    if ((v = vpack_json_member(o, "uuid"))) {
        if (!json_object_is_type(v, json_type_string) ||
            vpack__domxml_uuid_canon(json_object_get_string(v), d->uuid) < 0)
            return rec_fail(errmsg, "uuid", "expected a UUID");
        d->has_uuid = true;
    }
    d->level = -1;
    if ((v = vpack_json_member(o, "level"))) {
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
            json_object_get_int64(v) > 2)
            return rec_fail(errmsg, "level", "expected 0, 1, 2 or null");
        d->level = (int)json_object_get_int64(v);
    }
    v = vpack_json_member(o, "placement");
    const char *pl = v && json_object_is_type(v, json_type_string) ? json_object_get_string(v)
                                                                   : v ? "" : "static";
    if (strcmp(pl, "static") && strcmp(pl, "auto"))
        return rec_fail(errmsg, "placement", "expected static or auto");
    d->placement = strcmp(pl, "auto") ? VPACK_VCPU_PLACEMENT_STATIC : VPACK_VCPU_PLACEMENT_AUTO;
    return 0;
}

/*
 * What the reader never writes, so no record can hold: a pin for a vCPU
 * beyond "vcpus", for an iothread not in "iothreads", or two for one
 * thread. Such a record is damaged as a whole: trusting the rest would
 * drop a guest's pin silently.
 */
static int rec_consistent(const struct vpack_domxml *d, char **errmsg)
{
    for (size_t i = 0; i < d->nvcpupin; i++)
        if (d->vcpupin[i].vcpu >= d->vcpus || (i && d->vcpupin[i].vcpu == d->vcpupin[i - 1].vcpu))
            return rec_fail(errmsg, "vcpupin", "a pin for a vCPU the domain does not have");
    for (size_t i = 0; i < d->niothreadpin; i++)
        if (!d->niothreads ||
            !bsearch(&d->iothreadpin[i].iothread, d->iothreads, d->niothreads,
                     sizeof(*d->iothreads), vpack__domxml_cmp_uint) ||
            (i && d->iothreadpin[i].iothread == d->iothreadpin[i - 1].iothread))
            return rec_fail(errmsg, "iothreadpin", "a pin for an iothread the domain does not have");
    return 0;
}

static int rec_read(json_object *o, struct vpack_domxml *d, char **errmsg)
{
    bool has;
    int r;
    if (!json_object_is_type(o, json_type_object))
        return rec_fail(errmsg, "", "expected an object");
    if ((r = rec_identity(o, d, errmsg)) < 0 ||
        (r = rec_uint(o, "vcpus", VPACK_DOMXML_MAX_VCPUS, &d->vcpus, errmsg)) < 0 ||
        (r = rec_uint(o, "vcpus_current", VPACK_DOMXML_MAX_VCPUS, &d->vcpus_current, errmsg)) <
            0 ||
        (r = rec_opt_set(o, "online", &has, &d->online, errmsg)) < 0 ||
        (r = rec_opt_set(o, "cpuset", &d->has_cpuset, &d->cpuset, errmsg)) < 0 ||
        (r = rec_pins(o, "vcpupin", &d->vcpupin, &d->nvcpupin, errmsg)) < 0 ||
        (r = rec_opt_set(o, "emulatorpin", &d->has_emulatorpin, &d->emulatorpin, errmsg)) < 0 ||
        (r = rec_iothreads(o, d, errmsg)) < 0 || (r = rec_consistent(d, errmsg)) < 0)
        return r;
    return rec_numatune(o, &d->numatune, errmsg);
}

int vpack_domxml_from_json_object(struct json_object *o, struct vpack_domxml **out, char **errmsg)
{
    struct vpack_domxml *d = calloc(1, sizeof(*d));
    int ret;

    *out = NULL;
    if (errmsg)
        *errmsg = NULL;
    if (!d)
        return -ENOMEM;
    if ((ret = rec_read(o, d, errmsg)) < 0) {
        vpack_domxml_free(d);
        return ret;
    }
    *out = d;
    return 0;
}

int vpack_domxml_request_check(const struct vpack_domxml *req, const struct vpack_domxml *live,
                               char **errmsg)
{
    if (errmsg)
        *errmsg = NULL;
    for (size_t i = 0; i < req->nvcpupin; i++)
        if (req->vcpupin[i].vcpu >= live->vcpus)
            return vpack_errmsg_set(-EINVAL, errmsg, "it pins vCPU %u, the domain has %u vCPUs",
                                    req->vcpupin[i].vcpu, live->vcpus);
    for (size_t i = 0; i < req->niothreadpin; i++)
        if (!live->niothreads ||
            !bsearch(&req->iothreadpin[i].iothread, live->iothreads, live->niothreads,
                     sizeof(*live->iothreads), vpack__domxml_cmp_uint))
            return vpack_errmsg_set(-EINVAL, errmsg,
                                    "it pins iothread %u, the domain has no such iothread",
                                    req->iothreadpin[i].iothread);
    return 0;
}

int vpack_domxml_from_json(const char *buf, size_t len, struct vpack_domxml **out, char **errmsg)
{
    struct json_tokener *tok = json_tokener_new();
    struct vpack_domxml *d = calloc(1, sizeof(*d));
    json_object *o = NULL;
    int ret = -ENOMEM;

    *out = NULL;
    if (errmsg)
        *errmsg = NULL;
    if (!tok || !d)
        goto cleanup;
    if (len > INT_MAX || !(o = json_tokener_parse_ex(tok, buf, (int)len)) ||
        json_tokener_get_error(tok) != json_tokener_success) {
        ret = rec_fail(errmsg, "", "not JSON");
        goto cleanup;
    }
    if ((ret = rec_read(o, d, errmsg)) < 0)
        goto cleanup;
    *out = d;
    d = NULL;
cleanup:
    vpack_domxml_free(d);
    json_object_put(o);
    if (tok)
        json_tokener_free(tok);
    return ret;
}
