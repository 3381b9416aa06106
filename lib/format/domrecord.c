// SPDX-License-Identifier: MIT
/*
 * The hook's record of a domain: struct vpack_domxml as one line of JSON
 * (vpack_domxml_to_json()), read back strictly (vpack_domxml_from_json*(),
 * the rec_* readers), and a request checked against the live domain.
 * vpackd keeps these records under its state_dir; the document they come
 * from is read by domxml.c.
 */
#include "vpack/domrecord.h"

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
#include "vpack/json.h"

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

/*
 * Adds key: {"ID": CPUSET, ...}, a member per pin, from vcpu or io (the
 * other NULL): "vcpupin" and "iothreadpin" differ in their id's name only.
 */
static int add_pins(json_object *o, const char *key, const struct vpack_vcpupin *vcpu,
                    const struct vpack_iothreadpin *io, size_t n)
{
    json_object *pins = json_object_new_object();
    char id[16];

    for (size_t i = 0; pins && i < n; i++) {
        snprintf(id, sizeof(id), "%u", vcpu ? vcpu[i].vcpu : io[i].iothread);
        if (vpack_json_add_cpuset(pins, id, vcpu ? &vcpu[i].cpus : &io[i].cpus) < 0) {
            json_object_put(pins);
            pins = NULL;
        }
    }
    return pins ? add(o, key, pins) : -ENOMEM;
}

/* The ids as a new array of numbers (they may pass INT_MAX); NULL when out of memory. */
static json_object *ids_json(const unsigned *ids, size_t n)
{
    json_object *a = json_object_new_array();

    for (size_t i = 0; a && i < n; i++) {
        if (vpack_json_push(a, json_object_new_int64(ids[i])) < 0) {
            json_object_put(a);
            a = NULL;
        }
    }
    return a;
}

char *vpack_domxml_to_json(const struct vpack_domxml *d)
{
    json_object *o = json_object_new_object(), *nt = NULL;
    char *out = NULL;

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
    if (add_pins(o, "vcpupin", d->vcpupin, NULL, d->nvcpupin) < 0)
        goto cleanup;
    if (d->has_emulatorpin ? vpack_json_add_cpuset(o, "emulatorpin", &d->emulatorpin) < 0
                           : add(o, "emulatorpin", NULL) < 0)
        goto cleanup;

    if (vpack_json_add(o, "iothreads", ids_json(d->iothreads, d->niothreads)) < 0 ||
        add_pins(o, "iothreadpin", NULL, d->iothreadpin, d->niothreadpin) < 0)
        goto cleanup;

    if (d->numatune.present) {
        nt = numatune_json(&d->numatune);
        if (!nt || add(o, "numatune", nt) < 0)
            goto cleanup;
    }
    out = vpack_json_to_text(o);

cleanup:
    json_object_put(o);
    return out;
}

/* ---- The record's JSON, read back ---- */

/*
 * Every member goes through json.h's checked reader, so that a damaged
 * record names the path of its bad member ("vcpupin.3: expected a CPU set,
 * got 5"); the message the caller gets starts with "domain record: ".
 */

/* The CPU set at path. */
static int rec_set(struct vpack_json_reader *r, const char *path, json_object *v,
                   vpack_cpuset *out)
{
    return vpack_json_get_cpuset(r, path, v, "a CPU set", out);
}

/* An optional CPU set member key of o: *has is false when it is absent or null. */
static int rec_opt_set(struct vpack_json_reader *r, const char *path, json_object *o,
                       const char *key, bool *has, vpack_cpuset *out)
{
    return vpack_json_opt_cpuset(r, path, o, key, "a CPU set", has, out);
}

/* A non-negative integer up to max; an absent one is 0. */
static int rec_uint(struct vpack_json_reader *r, json_object *o, const char *key, unsigned max,
                    unsigned *out)
{
    json_object *v = vpack_json_member(o, key);
    char what[64];
    int64_t n;
    int ret;

    *out = 0;
    if (!v)
        return 0;
    snprintf(what, sizeof(what), "an integer from 0 to %u", max);
    if ((ret = vpack_json_get_int(r, key, v, 0, max, what, &n)) < 0)
        return ret;
    *out = (unsigned)n;
    return 0;
}

/* A key of the object at path that is an id: decimal digits only. */
static int rec_id(struct vpack_json_reader *r, const char *path, const char *s, unsigned *out)
{
    char k[VPACK_JSON_QUOTE_LEN];
    unsigned long v = 0;
    const char *p;

    for (p = s; *p; p++) {
        if (*p < '0' || *p > '9' || v > UINT_MAX / 10)
            break;
        v = v * 10 + (unsigned long)(*p - '0');
    }
    if (!*s || *p || v > UINT_MAX) {
        vpack_json_quote(k, sizeof(k), s, strlen(s));
        return vpack_json_fail(r, path, "key \"%s\" is not a decimal id", k);
    }
    *out = (unsigned)v;
    return 0;
}

/* {"ID": CPUSET, ...} as (id, set) pairs ascending by id; absent is none. */
static int rec_pins(struct vpack_json_reader *r, json_object *o, const char *key,
                    struct vpack_vcpupin **out, size_t *n)
{
    json_object *v = vpack_json_member(o, key);
    char p[VPACK_JSON_PATH_MAX];
    size_t i = 0;
    *out = NULL;
    *n = 0;
    if (!v)
        return 0;
    if (!json_object_is_type(v, json_type_object))
        return vpack_json_expected(r, key, "an object", v);
    size_t len = (size_t)json_object_object_length(v);
    if (len && !(*out = calloc(len, sizeof(**out))))
        return r->ret = -ENOMEM;
    json_object_object_foreach(v, id, set)
    {
        int ret = rec_id(r, key, id, &(*out)[i].vcpu);
        if (ret == 0) {
            vpack_json_path_join(p, key, id);
            ret = rec_set(r, p, set, &(*out)[i].cpus);
        }
        if (ret < 0) {
            free(*out);
            *out = NULL;
            return ret;
        }
        i++;
    }
    if (len)
        qsort(*out, len, sizeof(**out), vpack__domxml_cmp_vcpupin);
    *n = len;
    return 0;
}

/* The "mode" of the numatune object o at path. */
static int rec_numa_mode(struct vpack_json_reader *r, const char *path, json_object *o,
                         enum vpack_numa_mode *mode)
{
    json_object *v = vpack_json_member(o, "mode");
    const char *s = vpack_json_string_value(v);
    char p[VPACK_JSON_PATH_MAX];

    if (!v)
        return vpack_json_missing(r, path, "mode");
    for (int m = VPACK_NUMA_MODE_STRICT; s && m <= VPACK_NUMA_MODE_RESTRICTIVE; m++)
        if (!strcmp(s, vpack_numa_mode_name((enum vpack_numa_mode)m))) {
            *mode = (enum vpack_numa_mode)m;
            return 0;
        }
    vpack_json_path_join(p, path, "mode");
    return vpack_json_expected(
        r, p, "a numatune mode (strict, preferred, interleave or restrictive)", v);
}

/* "static" or "auto" at path: true for "auto". */
static int rec_placement(struct vpack_json_reader *r, const char *path, json_object *v,
                         bool *is_auto)
{
    const char *s = vpack_json_string_value(v);

    if (!s || (strcmp(s, "static") && strcmp(s, "auto")))
        return vpack_json_expected(r, path, "\"static\" or \"auto\"", v);
    *is_auto = !strcmp(s, "auto");
    return 0;
}

static int rec_memory(struct vpack_json_reader *r, json_object *mem, struct vpack_numatune *nt)
{
    static const char path[] = "numatune.memory";
    char p[VPACK_JSON_PATH_MAX];
    json_object *pl;
    bool has, is_auto = false;
    int ret;

    if (!json_object_is_type(mem, json_type_object))
        return vpack_json_expected(r, path, "an object", mem);
    nt->memory_specified = true;
    if ((ret = rec_numa_mode(r, path, mem, &nt->memory_mode)) < 0)
        return ret;
    if (!(pl = vpack_json_member(mem, "placement")))
        return vpack_json_missing(r, path, "placement");
    vpack_json_path_join(p, path, "placement");
    if ((ret = rec_placement(r, p, pl, &is_auto)) < 0)
        return ret;
    if (is_auto) {
        nt->memory_placement = VPACK_NUMA_PLACEMENT_AUTO;
        return 0;
    }
    nt->memory_placement = VPACK_NUMA_PLACEMENT_STATIC;
    if ((ret = rec_opt_set(r, path, mem, "nodeset", &has, &nt->memory_nodeset)) < 0)
        return ret;
    return has ? 0 : vpack_json_fail(r, path, "a static placement needs a \"nodeset\"");
}

static int rec_memnodes(struct vpack_json_reader *r, json_object *nodes,
                        struct vpack_numatune *nt)
{
    static const char path[] = "numatune.memnode";
    char p[VPACK_JSON_PATH_MAX];
    vpack_cpuset set;
    size_t i = 0;
    bool has;
    int ret;

    if (!json_object_is_type(nodes, json_type_object))
        return vpack_json_expected(r, path, "an object", nodes);
    size_t len = (size_t)json_object_object_length(nodes);
    if (len > VPACK_DOMXML_MAX_CELLS)
        return vpack_json_fail(r, path, "too many cells (more than %u)", VPACK_DOMXML_MAX_CELLS);
    if (len && !(nt->memnodes = calloc(len, sizeof(*nt->memnodes))))
        return r->ret = -ENOMEM;
    json_object_object_foreach(nodes, cell, m)
    {
        struct vpack_memnode *mn = &nt->memnodes[i++];
        nt->nmemnodes = i;
        if ((ret = rec_id(r, path, cell, &mn->cellid)) < 0)
            return ret;
        vpack_json_path_join(p, path, cell);
        if (!json_object_is_type(m, json_type_object))
            return vpack_json_expected(r, p, "an object", m);
        if ((ret = rec_numa_mode(r, p, m, &mn->mode)) < 0 ||
            (ret = rec_opt_set(r, p, m, "nodeset", &has, &set)) < 0)
            return ret;
        if (!has)
            return vpack_json_fail(r, p, "a cell needs a \"nodeset\"");
        if (!(mn->nodeset = vpack_cpuset_format(&set)))
            return r->ret = -ENOMEM;
    }
    if (len)
        qsort(nt->memnodes, len, sizeof(*nt->memnodes), vpack__domxml_cmp_memnode);
    return 0;
}

static int rec_numatune(struct vpack_json_reader *r, json_object *o, struct vpack_numatune *nt)
{
    json_object *v = vpack_json_member(o, "numatune"), *m;
    int ret;
    if (!v)
        return 0;
    if (!json_object_is_type(v, json_type_object))
        return vpack_json_expected(r, "numatune", "an object", v);
    nt->present = true;
    if ((m = vpack_json_member(v, "memory")) && (ret = rec_memory(r, m, nt)) < 0)
        return ret;
    if ((m = vpack_json_member(v, "memnode")) && (ret = rec_memnodes(r, m, nt)) < 0)
        return ret;
    return 0;
}

static int rec_iothreads(struct vpack_json_reader *r, json_object *o, struct vpack_domxml *d)
{
    json_object *v = vpack_json_member(o, "iothreads");
    struct vpack_vcpupin *pins = NULL;
    char p[VPACK_JSON_PATH_MAX];
    size_t n = 0;
    int ret;
    if (v && !json_object_is_type(v, json_type_array))
        return vpack_json_expected(r, "iothreads", "an array", v);
    d->niothreads = v ? json_object_array_length(v) : 0;
    if (d->niothreads > VPACK_DOMXML_MAX_IOTHREADS)
        return vpack_json_fail(r, "iothreads", "too many iothreads (more than %u)",
                               VPACK_DOMXML_MAX_IOTHREADS);
    if (d->niothreads && !(d->iothreads = calloc(d->niothreads, sizeof(*d->iothreads))))
        return r->ret = -ENOMEM;
    for (size_t i = 0; i < d->niothreads; i++) {
        int64_t x;
        vpack_json_pathf(p, "iothreads[%zu]", i);
        if ((ret = vpack_json_get_int(r, p, json_object_array_get_idx(v, i), 0, UINT_MAX,
                                      "an iothread id (an integer >= 0)", &x)) < 0)
            return ret;
        d->iothreads[i] = (unsigned)x;
    }
    if (d->niothreads)
        qsort(d->iothreads, d->niothreads, sizeof(*d->iothreads), vpack__domxml_cmp_uint);
    if ((ret = rec_pins(r, o, "iothreadpin", &pins, &n)) < 0)
        return ret;
    if (n && !(d->iothreadpin = calloc(n, sizeof(*d->iothreadpin)))) {
        free(pins);
        return r->ret = -ENOMEM;
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
static int rec_identity(struct vpack_json_reader *r, json_object *o, struct vpack_domxml *d)
{
    json_object *v = vpack_json_member(o, "name");
    const char *s;
    bool is_auto = false;
    int64_t level;
    int ret;

    if (!v)
        return vpack_json_missing(r, "", "name");
    if ((ret = vpack_json_get_string(r, "name", v, &s)) < 0)
        return ret;
    if (!(d->name = (char *)xmlStrdup((const xmlChar *)s)))
        return r->ret = -ENOMEM;
    if ((v = vpack_json_member(o, "uuid"))) {
        if (!(s = vpack_json_string_value(v)) || vpack__domxml_uuid_canon(s, d->uuid) < 0)
            return vpack_json_expected(r, "uuid", "a UUID", v);
        d->has_uuid = true;
    }
    d->level = -1;
    if ((v = vpack_json_member(o, "level"))) {
        if ((ret = vpack_json_get_int(r, "level", v, 0, 2, "0, 1, 2 or null", &level)) < 0)
            return ret;
        d->level = (int)level;
    }
    if ((v = vpack_json_member(o, "placement")) &&
        (ret = rec_placement(r, "placement", v, &is_auto)) < 0)
        return ret;
    d->placement = is_auto ? VPACK_VCPU_PLACEMENT_AUTO : VPACK_VCPU_PLACEMENT_STATIC;
    return 0;
}

/*
 * What the reader never writes, so no record can hold: a pin for a vCPU
 * beyond "vcpus", for an iothread not in "iothreads", or two for one
 * thread. Such a record is damaged as a whole: trusting the rest would
 * drop a guest's pin silently.
 */
static int rec_consistent(struct vpack_json_reader *r, const struct vpack_domxml *d)
{
    char p[VPACK_JSON_PATH_MAX];

    for (size_t i = 0; i < d->nvcpupin; i++) {
        unsigned id = d->vcpupin[i].vcpu;
        vpack_json_pathf(p, "vcpupin.%u", id);
        if (id >= d->vcpus)
            return vpack_json_fail(r, p, "a pin for a vCPU the domain does not have "
                                         "(\"vcpus\" is %u)", d->vcpus);
        if (i && id == d->vcpupin[i - 1].vcpu)
            return vpack_json_fail(r, p, "a second pin for the same vCPU");
    }
    for (size_t i = 0; i < d->niothreadpin; i++) {
        unsigned id = d->iothreadpin[i].iothread;
        vpack_json_pathf(p, "iothreadpin.%u", id);
        if (!d->niothreads || !bsearch(&id, d->iothreads, d->niothreads, sizeof(*d->iothreads),
                                       vpack__domxml_cmp_uint))
            return vpack_json_fail(r, p, "a pin for an iothread the domain does not have "
                                         "(not in \"iothreads\")");
        if (i && id == d->iothreadpin[i - 1].iothread)
            return vpack_json_fail(r, p, "a second pin for the same iothread");
    }
    return 0;
}

static int rec_read(struct vpack_json_reader *r, json_object *o, struct vpack_domxml *d)
{
    bool has;
    int ret;
    if (!json_object_is_type(o, json_type_object))
        return vpack_json_expected(r, "", "an object (a domain record)", o);
    if ((ret = rec_identity(r, o, d)) < 0 ||
        (ret = rec_uint(r, o, "vcpus", VPACK_DOMXML_MAX_VCPUS, &d->vcpus)) < 0 ||
        (ret = rec_uint(r, o, "vcpus_current", VPACK_DOMXML_MAX_VCPUS, &d->vcpus_current)) < 0 ||
        (ret = rec_opt_set(r, "", o, "online", &has, &d->online)) < 0 ||
        (ret = rec_opt_set(r, "", o, "cpuset", &d->has_cpuset, &d->cpuset)) < 0 ||
        (ret = rec_pins(r, o, "vcpupin", &d->vcpupin, &d->nvcpupin)) < 0 ||
        (ret = rec_opt_set(r, "", o, "emulatorpin", &d->has_emulatorpin, &d->emulatorpin)) < 0 ||
        (ret = rec_iothreads(r, o, d)) < 0 || (ret = rec_consistent(r, d)) < 0)
        return ret;
    return rec_numatune(r, o, &d->numatune);
}

/*
 * Ends a read: on an error, hands the reader's message out as *errmsg
 * (when wanted) with "domain record: " in front, and frees d.
 */
static int rec_done(struct vpack_json_reader *r, int ret, struct vpack_domxml *d,
                    struct vpack_domxml **out, char **errmsg)
{
    if (ret == 0) {
        *out = d;
    } else {
        vpack_domxml_free(d);
        if (errmsg && r->err && asprintf(errmsg, "domain record: %s", r->err) < 0) {
            *errmsg = NULL;
            ret = -ENOMEM;
        }
    }
    free(r->err);
    return ret;
}

int vpack_domxml_from_json_object(struct json_object *o, struct vpack_domxml **out, char **errmsg)
{
    struct vpack_json_reader r = {NULL, -EINVAL};
    struct vpack_domxml *d = calloc(1, sizeof(*d));

    *out = NULL;
    if (errmsg)
        *errmsg = NULL;
    if (!d)
        return -ENOMEM;
    return rec_done(&r, rec_read(&r, o, d), d, out, errmsg);
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
    struct vpack_json_reader r = {NULL, -EINVAL};
    struct json_tokener *tok = json_tokener_new();
    struct vpack_domxml *d = calloc(1, sizeof(*d));
    enum json_tokener_error e;
    json_object *o = NULL;
    int ret = -ENOMEM;

    *out = NULL;
    if (errmsg)
        *errmsg = NULL;
    if (!tok || !d)
        goto cleanup;
    if (len > INT_MAX) {
        ret = vpack_json_fail(&r, "", "the text is too long (%zu bytes)", len);
        goto cleanup;
    }
    o = json_tokener_parse_ex(tok, buf, (int)len);
    /* A top-level literal or number is only complete once json-c sees its end. */
    if ((e = json_tokener_get_error(tok)) == json_tokener_continue) {
        o = json_tokener_parse_ex(tok, "", 1);
        e = json_tokener_get_error(tok);
    }
    if (e != json_tokener_success) {
        ret = vpack_json_fail(&r, "", "invalid JSON: %s",
                              e == json_tokener_continue ? "unexpected end of input"
                                                         : json_tokener_error_desc(e));
        goto cleanup;
    }
    /* o is NULL for a JSON null: rec_read() says what it expected. */
    ret = rec_read(&r, o, d);
cleanup:
    ret = rec_done(&r, ret, d, out, errmsg);
    json_object_put(o);
    if (tok)
        json_tokener_free(tok);
    return ret;
}
