// SPDX-License-Identifier: MIT
/*
 * Snapshots: allocation, the JSON reader and the JSON writer. The format is
 * documented in vpackctl(1), "SNAPSHOT FORMAT".
 */
#include "vpack/snapshot.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "vpack/json.h"

static void thread_init(struct vpack_thread_sample *t, int id)
{
    t->id = id;
    t->util = 0;
    t->delay = 0;
    t->util_now = 0;
    t->delay_now = 0;
    t->pin = NULL;
    t->cpu = -1;
}

static void threads_free(struct vpack_thread_sample *t, unsigned n)
{
    if (!t)
        return;
    for (unsigned i = 0; i < n; i++)
        free(t[i].pin);
    free(t);
}

/* n new threads with ids from first_id into *out and *nout (none for n 0): 0 or -ENOMEM. */
static int threads_new(unsigned n, int first_id, struct vpack_thread_sample **out, unsigned *nout)
{
    if (!n)
        return 0;
    if (!(*out = calloc(n, sizeof(**out))))
        return -ENOMEM;
    *nout = n;
    for (unsigned i = 0; i < n; i++)
        thread_init(&(*out)[i], first_id + (int)i);
    return 0;
}

/* Frees what a domain owns and leaves it zeroed. */
static void domain_clear(struct vpack_domain_sample *d)
{
    free(d->name);
    free(d->cpuset);
    threads_free(d->vcpus, d->nvcpus);
    free(d->emulator.pin);
    threads_free(d->iothreads, d->niothreads);
    free(d->memory);
    memset(d, 0, sizeof(*d));
}

struct vpack_snapshot *vpack_snapshot_new(unsigned ncpus, unsigned ndomains)
{
    struct vpack_snapshot *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    s->interval_ms = 1000;
    if (ncpus) {
        s->cpu_busy = calloc(ncpus, sizeof(*s->cpu_busy));
        if (!s->cpu_busy)
            goto fail;
        for (unsigned i = 0; i < ncpus; i++)
            s->cpu_busy[i] = -1;
    }
    s->ncpus = ncpus;
    if (ndomains) {
        s->domains = calloc(ndomains, sizeof(*s->domains));
        if (!s->domains)
            goto fail;
    }
    s->ndomains = ndomains;
    return s;

fail:
    vpack_snapshot_free(s);
    return NULL;
}

int vpack_domain_sample_init(struct vpack_domain_sample *d, const char *name, int level,
                             unsigned nvcpus, unsigned niothreads)
{
    struct vpack_domain_sample n;
    int ret = -EINVAL;

    memset(&n, 0, sizeof(n));
    if (!d || !name || level < -1 || level > 2)
        goto cleanup;
    ret = -ENOMEM;
    n.name = strdup(name);
    if (!n.name)
        goto cleanup;
    n.level = level;
    if (threads_new(nvcpus, 0, &n.vcpus, &n.nvcpus) < 0 ||
        threads_new(niothreads, 1, &n.iothreads, &n.niothreads) < 0) /* iothreads from 1 */
        goto cleanup;
    thread_init(&n.emulator, -1);
    *d = n;
    /* d owns everything now; clear n so that cleanup frees nothing. */
    memset(&n, 0, sizeof(n));
    ret = 0;

cleanup:
    domain_clear(&n);
    return ret;
}

/* The _free() functions free their struct's members: alike in shape only (policy.c). */
void vpack_snapshot_free(struct vpack_snapshot *s)
{
    if (!s)
        return;
    for (unsigned i = 0; i < s->ndomains; i++)
        domain_clear(&s->domains[i]);
    free(s->domains);
    free(s->cpu_busy);
    free(s->cpu_busy_now);
    free(s);
}

/* *to = *from, with a pin of its own. */
static int thread_copy(struct vpack_thread_sample *to, const struct vpack_thread_sample *from)
{
    vpack_cpuset *pin = NULL;

    if (from->pin && !(pin = malloc(sizeof(*pin))))
        return -ENOMEM;
    free(to->pin);
    *to = *from;
    if (pin)
        *pin = *from->pin;
    to->pin = pin;
    return 0;
}

static int domain_copy(struct vpack_domain_sample *to, const struct vpack_domain_sample *from)
{
    if (vpack_domain_sample_init(to, from->name, from->level, from->nvcpus, from->niothreads) < 0)
        return -ENOMEM;
    for (unsigned v = 0; v < from->nvcpus; v++)
        if (thread_copy(&to->vcpus[v], &from->vcpus[v]) < 0)
            return -ENOMEM;
    for (unsigned k = 0; k < from->niothreads; k++)
        if (thread_copy(&to->iothreads[k], &from->iothreads[k]) < 0)
            return -ENOMEM;
    if (thread_copy(&to->emulator, &from->emulator) < 0)
        return -ENOMEM;
    if (from->cpuset) {
        if (!(to->cpuset = malloc(sizeof(*to->cpuset))))
            return -ENOMEM;
        *to->cpuset = *from->cpuset;
    }
    if (from->nmemory) {
        if (!(to->memory = malloc(from->nmemory * sizeof(*to->memory))))
            return -ENOMEM;
        memcpy(to->memory, from->memory, from->nmemory * sizeof(*to->memory));
        to->nmemory = from->nmemory;
    }
    return 0;
}

struct vpack_snapshot *vpack_snapshot_dup(const struct vpack_snapshot *s)
{
    struct vpack_snapshot *c = vpack_snapshot_new(s->ncpus, s->ndomains);

    if (!c)
        return NULL;
    c->interval_ms = s->interval_ms;
    if (s->ncpus)
        memcpy(c->cpu_busy, s->cpu_busy, s->ncpus * sizeof(*s->cpu_busy));
    if (s->cpu_busy_now) {
        if (vpack_snapshot_want_now(c) < 0)
            goto fail;
        memcpy(c->cpu_busy_now, s->cpu_busy_now, s->ncpus * sizeof(*s->cpu_busy_now));
    }
    for (unsigned i = 0; i < s->ndomains; i++)
        if (domain_copy(&c->domains[i], &s->domains[i]) < 0)
            goto fail;
    return c;

fail:
    vpack_snapshot_free(c);
    return NULL;
}

int vpack_snapshot_want_now(struct vpack_snapshot *s)
{
    if (s->cpu_busy_now || !s->ncpus)
        return 0;
    s->cpu_busy_now = malloc(s->ncpus * sizeof(*s->cpu_busy_now));
    if (!s->cpu_busy_now)
        return -ENOMEM;
    for (unsigned i = 0; i < s->ncpus; i++)
        s->cpu_busy_now[i] = -1;
    return 0;
}

/* Calls fn on every thread of s. */
static void each_thread(struct vpack_snapshot *s, void (*fn)(struct vpack_thread_sample *, void *),
                        void *arg)
{
    for (unsigned i = 0; i < s->ndomains; i++) {
        struct vpack_domain_sample *d = &s->domains[i];
        for (unsigned v = 0; v < d->nvcpus; v++)
            fn(&d->vcpus[v], arg);
        fn(&d->emulator, arg);
        for (unsigned t = 0; t < d->niothreads; t++)
            fn(&d->iothreads[t], arg);
    }
}

struct now_bound {
    double sum, scale, max_busy;
};

static void sum_util_now(struct vpack_thread_sample *t, void *arg)
{
    ((struct now_bound *)arg)->sum += t->util_now > 0 ? t->util_now : 0;
}

static void cut_now(struct vpack_thread_sample *t, void *arg)
{
    const struct now_bound *b = arg;
    if (t->util_now > 0)
        t->util_now *= b->scale;
    if (t->delay_now > b->max_busy)
        t->delay_now = b->max_busy;
}

double vpack_snapshot_bound_now(struct vpack_snapshot *s)
{
    struct now_bound b = {0, 1, 0};
    double busy = 0;

    if (!s->cpu_busy_now)
        return 0;
    for (unsigned c = 0; c < s->ncpus; c++) {
        double x = s->cpu_busy_now[c];
        /* A CPU in use without a reading of its own (just online, the first
         * interval) may have run any of it: nothing to bound by. */
        if (!(x >= 0)) {
            if (s->cpu_busy[c] >= 0)
                return 0;
            continue;
        }
        busy += x > 1 ? 1 : x;
        if (x > b.max_busy)
            b.max_busy = x > 1 ? 1 : x;
    }
    each_thread(s, sum_util_now, &b);
    if (b.sum > busy)
        b.scale = busy / b.sum;
    each_thread(s, cut_now, &b);
    return b.sum > busy ? b.sum - busy : 0;
}

/* The reader: every member through the checked reader of json.h. */

/* An optional CPU set member key of o into a new allocated set; absent or null leaves *out. */
static int opt_cpuset(struct vpack_json_reader *c, const char *path, json_object *o,
                      const char *key, vpack_cpuset **out)
{
    vpack_cpuset *set;
    bool has;
    int ret;

    if (!vpack_json_member(o, key))
        return 0;
    if (!(set = malloc(sizeof(*set))))
        return c->ret = -ENOMEM;
    ret = vpack_json_opt_cpuset(c, path, o, key, "a string", &has, set);
    if (ret < 0) {
        free(set);
        return ret;
    }
    *out = set;
    return 0;
}

/*
 * A key of cpus or memory: a canonical decimal id below max (no sign, no
 * leading zero), so that no two keys name the same id.
 */
static bool parse_id_key(const char *key, unsigned max, unsigned *out)
{
    unsigned long v = 0;
    const char *p = key;

    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] != '\0'))
        return false;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        v = v * 10 + (unsigned long)(*p - '0');
        if (v >= max)
            return false;
    }
    *out = (unsigned)v;
    return true;
}

/*
 * One thread object. For vCPUs and iothreads, "id" is required and at least
 * min_id; the emulator has no id.
 */
static int parse_thread(struct vpack_json_reader *c, const char *path, json_object *o,
                        bool has_id, int min_id, struct vpack_thread_sample *t)
{
    char p[VPACK_JSON_PATH_MAX], what[64];
    json_object *v;
    int64_t i;
    int ret;

    thread_init(t, -1);
    if (json_object_get_type(o) != json_type_object)
        return vpack_json_expected(c, path, "an object", o);
    if (has_id) {
        v = vpack_json_member(o, "id");
        if (!v)
            return vpack_json_missing(c, path, "id");
        vpack_json_path_join(p, path, "id");
        snprintf(what, sizeof(what), "an integer >= %d", min_id);
        ret = vpack_json_get_int(c, p, v, min_id, INT_MAX, what, &i);
        if (ret < 0)
            return ret;
        t->id = (int)i;
    }
    if ((ret = vpack_json_opt_number(c, path, o, "util", 0, NAN, &t->util)) < 0 ||
        (ret = vpack_json_opt_number(c, path, o, "delay", 0, NAN, &t->delay)) < 0 ||
        (ret = vpack_json_opt_number(c, path, o, "util_now", 0, NAN, &t->util_now)) < 0 ||
        (ret = vpack_json_opt_number(c, path, o, "delay_now", 0, NAN, &t->delay_now)) < 0)
        return ret;
    ret = opt_cpuset(c, path, o, "pin", &t->pin);
    if (ret < 0)
        return ret;
    v = vpack_json_member(o, "cpu");
    if (v) {
        vpack_json_path_join(p, path, "cpu");
        snprintf(what, sizeof(what), "a CPU id (0 to %d) or -1", VPACK_CPUSET_MAX - 1);
        ret = vpack_json_get_int(c, p, v, -1, VPACK_CPUSET_MAX - 1, what, &i);
        if (ret < 0)
            return ret;
        t->cpu = (int)i;
    }
    return 0;
}

struct id_index {
    int id;
    unsigned index;
};

static int cmp_id_index(const void *a, const void *b)
{
    const struct id_index *x = a, *y = b;

    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/*
 * Reports the first (by position in the array) thread whose id repeats an
 * earlier one, naming both.
 */
static int check_unique_ids(struct vpack_json_reader *c, const char *path, const char *array,
                            const char *noun, const struct vpack_thread_sample *t, unsigned n)
{
    struct id_index *idx = NULL;
    unsigned dup = UINT_MAX, first = 0;
    char p[VPACK_JSON_PATH_MAX];
    int ret = 0;

    if (n < 2)
        return 0;
    idx = malloc(n * sizeof(*idx));
    if (!idx)
        return c->ret = -ENOMEM;
    for (unsigned i = 0; i < n; i++)
        idx[i] = (struct id_index){t[i].id, i};
    qsort(idx, n, sizeof(*idx), cmp_id_index);
    for (unsigned i = 1; i < n; i++) {
        if (idx[i].id == idx[i - 1].id && idx[i].index < dup) {
            /* idx[i - 1] is an earlier thread with the same id. */
            unsigned j = i - 1;
            while (j > 0 && idx[j - 1].id == idx[i].id)
                j--;
            dup = idx[i].index;
            first = idx[j].index;
        }
    }
    if (dup != UINT_MAX) {
        vpack_json_pathf(p, "%s.%s[%u].id", path, array, dup);
        ret = vpack_json_fail(c, p, "duplicate %s id %d (also %s[%u])", noun, t[dup].id, array,
                              first);
    }
    free(idx);
    return ret;
}

/* An optional array of threads with ids >= min_id. */
static int parse_threads(struct vpack_json_reader *c, const char *path, json_object *o,
                         const char *key, const char *noun, int min_id,
                         struct vpack_thread_sample **out, unsigned *nout)
{
    char p[VPACK_JSON_PATH_MAX], tp[VPACK_JSON_PATH_MAX];
    json_object *v = vpack_json_member(o, key);
    size_t n;
    int ret;

    if (!v)
        return 0;
    vpack_json_path_join(p, path, key);
    if (json_object_get_type(v) != json_type_array)
        return vpack_json_expected(c, p, "an array", v);
    n = json_object_array_length(v);
    if (n == 0)
        return 0;
    if (n > UINT_MAX)
        return vpack_json_fail(c, p, "too many entries");
    *out = calloc(n, sizeof(**out));
    if (!*out)
        return c->ret = -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        vpack_json_pathf(tp, "%s[%zu]", p, i);
        ret = parse_thread(c, tp, json_object_array_get_idx(v, i), true, min_id, &(*out)[i]);
        /* Count the entry now: it may own a pin even when a later key failed. */
        *nout = (unsigned)i + 1;
        if (ret < 0)
            return ret;
    }
    return check_unique_ids(c, path, key, noun, *out, *nout);
}

static int parse_memory(struct vpack_json_reader *c, const char *path, json_object *o,
                        struct vpack_domain_sample *d)
{
    char p[VPACK_JSON_PATH_MAX], kp[VPACK_JSON_PATH_MAX], k[VPACK_JSON_QUOTE_LEN];
    json_object *v = vpack_json_member(o, "memory");
    size_t n;
    int ret;

    if (!v)
        return 0;
    vpack_json_path_join(p, path, "memory");
    if (json_object_get_type(v) != json_type_object)
        return vpack_json_expected(c, p, "an object", v);
    n = (size_t)json_object_object_length(v);
    if (n == 0)
        return 0;
    d->memory = calloc(n, sizeof(*d->memory));
    if (!d->memory)
        return c->ret = -ENOMEM;
    json_object_object_foreach(v, key, val) {
        unsigned node;
        double share = 0;

        if (!parse_id_key(key, VPACK_CPUSET_MAX, &node)) {
            vpack_json_quote(k, sizeof(k), key, strlen(key));
            return vpack_json_fail(c, p, "key \"%s\" is not a NUMA node id (0 to %d)", k,
                        VPACK_CPUSET_MAX - 1);
        }
        vpack_json_pathf(kp, "%s.%s", p, key);
        ret = vpack_json_get_number(c, kp, val, 0, 1, &share);
        if (ret < 0)
            return ret;
        d->memory[d->nmemory].node = (int)node;
        d->memory[d->nmemory].share = share;
        d->nmemory++;
    }
    return 0;
}

static int parse_domain(struct vpack_json_reader *c, unsigned idx, json_object *o,
                        struct vpack_domain_sample *d)
{
    char path[VPACK_JSON_PATH_MAX], p[VPACK_JSON_PATH_MAX], name[VPACK_JSON_QUOTE_LEN];
    json_object *v;
    const char *s;
    int64_t i;
    int ret;

    vpack_json_pathf(path, "domains[%u]", idx);
    d->level = -1;
    thread_init(&d->emulator, -1);
    if (json_object_get_type(o) != json_type_object)
        return vpack_json_expected(c, path, "an object", o);

    v = vpack_json_member(o, "name");
    if (!v)
        return vpack_json_missing(c, path, "name");
    vpack_json_path_join(p, path, "name");
    ret = vpack_json_get_string(c, p, v, &s);
    if (ret < 0)
        return ret;
    if (!*s)
        return vpack_json_fail(c, p, "expected a non-empty string, got \"\"");
    d->name = strdup(s);
    if (!d->name)
        return c->ret = -ENOMEM;
    /* From here on, messages name the domain as well as its index. */
    vpack_json_quote(name, sizeof(name), s, strlen(s));
    vpack_json_pathf(path, "domains[%u] (%s)", idx, name);

    v = vpack_json_member(o, "level");
    if (v) {
        vpack_json_path_join(p, path, "level");
        if (json_object_get_type(v) != json_type_int)
            return vpack_json_expected(c, p, "a power policy level (0, 1 or 2)", v);
        i = json_object_get_int64(v);
        if (i < 0 || i > 2) {
            char got[VPACK_JSON_QUOTE_LEN];

            vpack_json_describe(got, sizeof(got), v);
            return vpack_json_fail(c, p, "%s is not a power policy level (0, 1 or 2)", got);
        }
        d->level = (int)i;
    }

    ret = opt_cpuset(c, path, o, "cpuset", &d->cpuset);
    if (ret < 0)
        return ret;

    v = vpack_json_member(o, "vcpus");
    if (!v)
        return vpack_json_missing(c, path, "vcpus");
    ret = parse_threads(c, path, o, "vcpus", "vCPU", 0, &d->vcpus, &d->nvcpus);
    if (ret < 0)
        return ret;

    v = vpack_json_member(o, "emulator");
    if (v) {
        vpack_json_path_join(p, path, "emulator");
        ret = parse_thread(c, p, v, false, 0, &d->emulator);
        if (ret < 0)
            return ret;
    }

    /* libvirt numbers iothreads from 1. */
    ret = parse_threads(c, path, o, "iothreads", "iothread", 1, &d->iothreads, &d->niothreads);
    if (ret < 0)
        return ret;
    return parse_memory(c, path, o, d);
}

static int cmp_name_index(const void *a, const void *b, void *arg)
{
    const struct vpack_domain_sample *doms = arg;
    const unsigned *x = a, *y = b;
    int r = strcmp(doms[*x].name, doms[*y].name);

    if (r)
        return r;
    return *x < *y ? -1 : *x > *y;
}

static int check_unique_names(struct vpack_json_reader *c, const struct vpack_snapshot *s)
{
    unsigned *idx = NULL, dup = UINT_MAX, first = 0;
    char p[VPACK_JSON_PATH_MAX], name[VPACK_JSON_QUOTE_LEN];
    int ret = 0;

    if (s->ndomains < 2)
        return 0;
    idx = malloc(s->ndomains * sizeof(*idx));
    if (!idx)
        return c->ret = -ENOMEM;
    for (unsigned i = 0; i < s->ndomains; i++)
        idx[i] = i;
    qsort_r(idx, s->ndomains, sizeof(*idx), cmp_name_index, s->domains);
    for (unsigned i = 1; i < s->ndomains; i++) {
        if (!strcmp(s->domains[idx[i]].name, s->domains[idx[i - 1]].name) && idx[i] < dup) {
            unsigned j = i - 1;
            while (j > 0 && !strcmp(s->domains[idx[j - 1]].name, s->domains[idx[i]].name))
                j--;
            dup = idx[i];
            first = idx[j];
        }
    }
    if (dup != UINT_MAX) {
        const char *dn = s->domains[dup].name;

        vpack_json_quote(name, sizeof(name), dn, strlen(dn));
        vpack_json_pathf(p, "domains[%u] (%s).name", dup, name);
        ret = vpack_json_fail(c, p, "duplicate domain name (also domains[%u])", first);
    }
    free(idx);
    return ret;
}

/*
 * Reads the per-CPU map under key ("cpus" or "cpus_now"): CPU id -> busy
 * fraction 0..1, null or absent = not reported (-1). *arr gets max id + 1
 * entries (*n), or stays NULL for an empty map.
 */
static int parse_cpu_map(struct vpack_json_reader *c, json_object *v, const char *key, double **arr,
                         unsigned *n)
{
    char p[VPACK_JSON_PATH_MAX], k[VPACK_JSON_QUOTE_LEN];
    unsigned max = 0, cpu;
    bool any = false;
    int ret;

    if (json_object_get_type(v) != json_type_object)
        return vpack_json_expected(c, key, "an object", v);
    /* First pass: validate the keys and size the array. */
    json_object_object_foreach(v, k1, val) {
        (void)val;
        if (!parse_id_key(k1, VPACK_CPUSET_MAX, &cpu)) {
            vpack_json_quote(k, sizeof(k), k1, strlen(k1));
            return vpack_json_fail(c, key, "key \"%s\" is not a CPU id (0 to %d)", k,
                        VPACK_CPUSET_MAX - 1);
        }
        if (cpu > max)
            max = cpu;
        any = true;
    }
    if (!any)
        return 0;
    *arr = malloc((max + 1) * sizeof(**arr));
    if (!*arr)
        return c->ret = -ENOMEM;
    *n = max + 1;
    for (unsigned i = 0; i <= max; i++)
        (*arr)[i] = -1;
    json_object_object_foreach(v, k2, val2) {
        parse_id_key(k2, VPACK_CPUSET_MAX, &cpu);
        /* null means "not reported", like an absent key. */
        if (!val2)
            continue;
        vpack_json_pathf(p, "%s.%s", key, k2);
        ret = vpack_json_get_number(c, p, val2, 0, 1, &(*arr)[cpu]);
        if (ret < 0)
            return ret;
    }
    return 0;
}

/* "cpus", and "cpus_now" (optional, no CPU that "cpus" lacks). */
static int parse_cpus(struct vpack_json_reader *c, json_object *root, struct vpack_snapshot *s)
{
    json_object *v = vpack_json_member(root, "cpus");
    double *now = NULL;
    unsigned nnow = 0;
    int ret;

    if (!v)
        return vpack_json_missing(c, "", "cpus");
    ret = parse_cpu_map(c, v, "cpus", &s->cpu_busy, &s->ncpus);
    if (ret < 0 || !(v = vpack_json_member(root, "cpus_now")))
        return ret;
    ret = parse_cpu_map(c, v, "cpus_now", &now, &nnow);
    for (unsigned i = s->ncpus; ret == 0 && i < nnow; i++)
        if (now[i] >= 0)
            ret = vpack_json_fail(c, "cpus_now", "CPU %u is not in \"cpus\"", i);
    if (ret == 0 && s->ncpus) {
        s->cpu_busy_now = now;
        now = NULL;
        if (nnow < s->ncpus) {
            double *grown = realloc(s->cpu_busy_now, s->ncpus * sizeof(*grown));
            if (!grown)
                ret = c->ret = -ENOMEM;
            else
                for (s->cpu_busy_now = grown; nnow < s->ncpus; nnow++)
                    grown[nnow] = -1;
        }
    }
    free(now);
    return ret;
}

/* Converts a parsed JSON value into a snapshot. */
static int convert(struct vpack_json_reader *c, json_object *root, struct vpack_snapshot **out)
{
    struct vpack_snapshot *s = NULL;
    json_object *v;
    int64_t i;
    size_t n;
    int ret;

    if (json_object_get_type(root) != json_type_object) {
        ret = vpack_json_expected(c, "", "a JSON object (a snapshot)", root);
        goto cleanup;
    }
    ret = c->ret = -ENOMEM;
    s = calloc(1, sizeof(*s));
    if (!s)
        goto cleanup;

    v = vpack_json_member(root, "interval_ms");
    if (!v) {
        ret = vpack_json_missing(c, "", "interval_ms");
        goto cleanup;
    }
    ret = vpack_json_get_int(c, "interval_ms", v, 1, UINT_MAX, "a positive integer (milliseconds)",
                             &i);
    if (ret < 0)
        goto cleanup;
    s->interval_ms = (unsigned)i;

    ret = parse_cpus(c, root, s);
    if (ret < 0)
        goto cleanup;

    v = vpack_json_member(root, "domains");
    if (!v) {
        ret = vpack_json_missing(c, "", "domains");
        goto cleanup;
    }
    if (json_object_get_type(v) != json_type_array) {
        ret = vpack_json_expected(c, "domains", "an array", v);
        goto cleanup;
    }
    n = json_object_array_length(v);
    if (n > UINT_MAX) {
        ret = vpack_json_fail(c, "domains", "too many domains");
        goto cleanup;
    }
    if (n) {
        ret = c->ret = -ENOMEM;
        s->domains = calloc(n, sizeof(*s->domains));
        if (!s->domains)
            goto cleanup;
    }
    for (size_t d = 0; d < n; d++) {
        /* Count the domain first, so that the cleanup frees what it holds. */
        s->ndomains = (unsigned)d + 1;
        ret = parse_domain(c, (unsigned)d, json_object_array_get_idx(v, d), &s->domains[d]);
        if (ret < 0)
            goto cleanup;
    }
    ret = check_unique_names(c, s);
    if (ret < 0)
        goto cleanup;

    *out = s;
    s = NULL;
    ret = 0;

cleanup:
    vpack_snapshot_free(s);
    return ret;
}

static bool is_blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

static bool all_blank(const char *buf, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!is_blank(buf[i]))
            return false;
    return true;
}

int vpack_snapshot_parse_first(const char *buf, size_t len, size_t *end, size_t *err_at,
                               struct vpack_snapshot **out, char **errmsg)
{
    struct vpack_json_reader c = {NULL, -EINVAL};
    struct json_tokener *tok = NULL;
    json_object *root = NULL;
    enum json_tokener_error jerr;
    const char *nul;
    size_t feed, at = SIZE_MAX;
    bool finished = false;
    int ret = -EINVAL;

    *out = NULL;
    *errmsg = NULL;
    *end = 0;
    if (len > INT_MAX) {
        ret = vpack_json_fail(&c, "", "the text is too long (%zu bytes)", len);
        goto cleanup;
    }
    /* json-c stops at a NUL byte; only the text before one is JSON. */
    nul = memchr(buf, '\0', len);
    feed = nul ? (size_t)(nul - buf) : len;

    ret = -ENOMEM;
    tok = json_tokener_new();
    if (!tok)
        goto cleanup;
    /* Strict: no comments, trailing commas or leading zeros; what follows
     * the value is the caller's business. */
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS);
    root = json_tokener_parse_ex(tok, buf, (int)feed);
    jerr = json_tokener_get_error(tok);
    if (jerr == json_tokener_success) {
        *end = json_tokener_get_parse_end(tok);
    } else if (jerr == json_tokener_continue && !nul) {
        /* A top-level number is only complete once json-c sees its end. */
        finished = true;
        root = json_tokener_parse_ex(tok, "", 1);
        jerr = json_tokener_get_error(tok);
        if (jerr == json_tokener_success)
            *end = len;
    }
    if (jerr != json_tokener_success) {
        if (jerr != json_tokener_continue && jerr != json_tokener_error_parse_eof) {
            at = finished ? feed : json_tokener_get_parse_end(tok);
            ret = vpack_json_fail(&c, "", "invalid JSON: %s", json_tokener_error_desc(jerr));
        } else if (nul) {
            at = feed;
            ret = vpack_json_fail(&c, "", "invalid JSON: NUL byte in the text");
        } else {
            at = feed;
            if (all_blank(buf, feed))
                ret = vpack_json_fail(&c, "", "no snapshot (empty input)");
            else
                ret = vpack_json_fail(&c, "", "invalid JSON: unexpected end of input");
            if (ret == -EINVAL)
                ret = -ENODATA;
        }
        goto cleanup;
    }
    /* root is NULL for a top-level JSON null: convert() says what it expected. */
    ret = convert(&c, root, out);

cleanup:
    if (ret < 0)
        *errmsg = c.err;
    else
        free(c.err);
    if (err_at)
        *err_at = at;
    json_object_put(root);
    if (tok)
        json_tokener_free(tok);
    return ret;
}

/* "line L, column C" of byte offset off in buf; columns count bytes from 1. */
static void position(const char *buf, size_t off, char *dst, size_t n)
{
    size_t line = 1, col_start = 0;

    for (size_t i = 0; i < off; i++) {
        if (buf[i] == '\n') {
            line++;
            col_start = i + 1;
        }
    }
    snprintf(dst, n, "line %zu, column %zu", line, off - col_start + 1);
}

int vpack_snapshot_parse(const char *buf, size_t len, struct vpack_snapshot **out, char **errmsg)
{
    struct vpack_snapshot *s = NULL;
    char *msg = NULL, pos[64];
    size_t end, at;
    int ret;

    *out = NULL;
    *errmsg = NULL;
    ret = vpack_snapshot_parse_first(buf, len, &end, &at, &s, &msg);
    /* Data after the value is reported before what is wrong inside it. */
    if (end > 0 && !all_blank(buf + end, len - end)) {
        at = end;
        while (is_blank(buf[at]))
            at++;
        position(buf, at, pos, sizeof(pos));
        free(msg);
        msg = NULL;
        ret = -EINVAL;
        if (asprintf(&msg, "%s: unexpected data after the snapshot", pos) < 0) {
            msg = NULL;
            ret = -ENOMEM;
        }
        goto cleanup;
    }
    if (ret == -ENODATA)
        ret = -EINVAL;
    if (ret < 0 && msg && at != SIZE_MAX) {
        char *with_pos = NULL;

        position(buf, at, pos, sizeof(pos));
        if (asprintf(&with_pos, "%s: %s", pos, msg) < 0) {
            ret = -ENOMEM;
            with_pos = NULL;
        }
        free(msg);
        msg = with_pos;
    }
    if (ret < 0)
        goto cleanup;
    *out = s;
    s = NULL;

cleanup:
    vpack_snapshot_free(s);
    if (ret < 0)
        *errmsg = msg;
    else
        free(msg);
    return ret;
}

/* The writer. */

/* Adds a number unless it is not finite (then it is left out, read back as absent). */
static int add_double(json_object *o, const char *key, double v)
{
    if (!isfinite(v))
        return 0;
    return vpack_json_add(o, key, vpack_json_new_number(v, 0)); /* the shortest exact text */
}


/* A thread as a new object; the emulator (with_id false) has no "id". */
static json_object *thread_json(const struct vpack_thread_sample *t, bool with_id)
{
    json_object *o = json_object_new_object();

    if (!o)
        return NULL;
    if ((with_id && vpack_json_add(o, "id", json_object_new_int(t->id)) < 0) ||
        add_double(o, "util", t->util) < 0 || add_double(o, "delay", t->delay) < 0 ||
        (t->util_now > 0 && add_double(o, "util_now", t->util_now) < 0) ||
        (t->delay_now > 0 && add_double(o, "delay_now", t->delay_now) < 0) ||
        (t->pin && vpack_json_add_cpuset(o, "pin", t->pin) < 0) ||
        (t->cpu >= 0 && vpack_json_add(o, "cpu", json_object_new_int(t->cpu)) < 0)) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

static json_object *threads_json(const struct vpack_thread_sample *t, unsigned n)
{
    json_object *a = json_object_new_array_ext((int)(n < INT_MAX ? n : INT_MAX));

    if (!a)
        return NULL;
    for (unsigned i = 0; i < n; i++) {
        if (vpack_json_push(a, thread_json(&t[i], true)) < 0) {
            json_object_put(a);
            return NULL;
        }
    }
    return a;
}

static json_object *domain_json(const struct vpack_domain_sample *d)
{
    json_object *o = json_object_new_object(), *mem = NULL;
    char key[16];
    int ret = -ENOMEM;

    if (!o)
        goto cleanup;
    if (vpack_json_add(o, "name", json_object_new_string(d->name ? d->name : "")) < 0)
        goto cleanup;
    if (d->level >= 0 && vpack_json_add(o, "level", json_object_new_int(d->level)) < 0)
        goto cleanup;
    if (d->cpuset && vpack_json_add_cpuset(o, "cpuset", d->cpuset) < 0)
        goto cleanup;
    if (vpack_json_add(o, "vcpus", threads_json(d->vcpus, d->nvcpus)) < 0)
        goto cleanup;
    if (vpack_json_add(o, "emulator", thread_json(&d->emulator, false)) < 0)
        goto cleanup;
    if (d->niothreads && vpack_json_add(o, "iothreads", threads_json(d->iothreads, d->niothreads)) < 0)
        goto cleanup;
    if (d->nmemory) {
        mem = json_object_new_object();
        if (!mem)
            goto cleanup;
        for (unsigned i = 0; i < d->nmemory; i++) {
            snprintf(key, sizeof(key), "%d", d->memory[i].node);
            if (add_double(mem, key, d->memory[i].share) < 0)
                goto cleanup;
        }
        ret = vpack_json_add(o, "memory", mem);
        mem = NULL;
        if (ret < 0)
            goto cleanup;
    }
    ret = 0;

cleanup:
    json_object_put(mem);
    if (ret < 0) {
        json_object_put(o);
        o = NULL;
    }
    return o;
}

/* A per-CPU map: entries that are negative (or NaN) are "not reported" and left out. */
static json_object *cpu_map_json(const double *arr, unsigned n)
{
    json_object *o = json_object_new_object();
    char key[16];

    for (unsigned i = 0; o && i < n; i++) {
        if (!(arr[i] >= 0))
            continue;
        snprintf(key, sizeof(key), "%u", i);
        if (add_double(o, key, arr[i]) < 0) {
            json_object_put(o);
            o = NULL;
        }
    }
    return o;
}

json_object *vpack_snapshot_to_json_object(const struct vpack_snapshot *s)
{
    json_object *root = json_object_new_object(), *doms = NULL;

    if (!root)
        goto fail;
    if (vpack_json_add(root, "interval_ms", json_object_new_int64(s->interval_ms)) < 0)
        goto fail;
    if (vpack_json_add(root, "cpus", cpu_map_json(s->cpu_busy, s->ncpus)) < 0)
        goto fail;
    if (s->cpu_busy_now &&
        vpack_json_add(root, "cpus_now", cpu_map_json(s->cpu_busy_now, s->ncpus)) < 0)
        goto fail;
    /* An array of its own struct, as the plan's "domains": alike in shape only. */
    doms = json_object_new_array_ext((int)(s->ndomains < INT_MAX ? s->ndomains : INT_MAX));
    if (!doms)
        goto fail;
    for (unsigned i = 0; i < s->ndomains; i++)
        if (vpack_json_push(doms, domain_json(&s->domains[i])) < 0)
            goto fail;
    if (vpack_json_add(root, "domains", doms) < 0) {
        doms = NULL;
        goto fail;
    }
    return root;

fail:
    json_object_put(doms);
    json_object_put(root);
    return NULL;
}

char *vpack_snapshot_to_json(const struct vpack_snapshot *s)
{
    json_object *root = vpack_snapshot_to_json_object(s);
    char *text = root ? vpack_json_to_text(root) : NULL;

    json_object_put(root);
    return text;
}

static bool near(double a, double b, double band)
{
    return fabs(a - b) <= band;
}

static bool same_set(const vpack_cpuset *a, const vpack_cpuset *b)
{
    return !a || !b ? a == b : vpack_cpuset_equal(a, b);
}

static bool thread_within(const struct vpack_thread_sample *a,
                          const struct vpack_thread_sample *b, double band)
{
    return a->id == b->id && same_set(a->pin, b->pin) && near(a->util, b->util, band) &&
           near(a->delay, b->delay, band);
}

static bool domain_within(const struct vpack_domain_sample *a,
                          const struct vpack_domain_sample *b, double band)
{
    if (strcmp(a->name, b->name) || a->level != b->level || !same_set(a->cpuset, b->cpuset) ||
        a->nvcpus != b->nvcpus || a->niothreads != b->niothreads || a->nmemory != b->nmemory ||
        !thread_within(&a->emulator, &b->emulator, band))
        return false;
    for (unsigned i = 0; i < a->nvcpus; i++)
        if (!thread_within(&a->vcpus[i], &b->vcpus[i], band))
            return false;
    for (unsigned i = 0; i < a->niothreads; i++)
        if (!thread_within(&a->iothreads[i], &b->iothreads[i], band))
            return false;
    for (unsigned i = 0; i < a->nmemory; i++)
        if (a->memory[i].node != b->memory[i].node ||
            !near(a->memory[i].share, b->memory[i].share, band))
            return false;
    return true;
}

/* CPU c within bands[c], or within band where bands is NULL. */
static bool cpus_within(const struct vpack_snapshot *a, const double *busy, unsigned ncpus,
                        const double *bands, double band)
{
    if (!a || (ncpus && !busy) || a->ncpus != ncpus)
        return false;
    for (unsigned c = 0; c < ncpus; c++) {
        bool ra = a->cpu_busy[c] >= 0, rb = busy[c] >= 0;
        if (ra != rb || (ra && !near(a->cpu_busy[c], busy[c], bands ? bands[c] : band)))
            return false;
    }
    return true;
}

double vpack_cpu_band_update(double *noise, double prev_now, double now, double band,
                             double cap)
{
    if (cap < band)
        cap = band;
    if (prev_now >= 0 && now >= 0) {
        double d = fabs(now - prev_now);
        *noise += ((d < cap ? d : cap) - *noise) / 8;
    }
    double b = 2 * *noise;
    return b < band ? band : b > cap ? cap : b;
}

bool vpack_snapshot_cpus_within(const struct vpack_snapshot *a, const double *busy,
                                unsigned ncpus, double band)
{
    return cpus_within(a, busy, ncpus, NULL, band);
}

bool vpack_snapshot_cpus_within_each(const struct vpack_snapshot *a, const double *busy,
                                     unsigned ncpus, const double *bands)
{
    return bands && cpus_within(a, busy, ncpus, bands, 0);
}

/* -1, 0 or +1: v below, within or above band of s. */
static int side(double s, double v, double band)
{
    return v > s + band ? 1 : v < s - band ? -1 : 0;
}

bool vpack_snapshot_cpus_moved(const struct vpack_snapshot *a, const double *now,
                               const double *last, unsigned ncpus, const double *bands,
                               double at_once)
{
    if (!a || !now || !last || !bands || a->ncpus != ncpus)
        return true;
    for (unsigned c = 0; c < ncpus; c++) {
        double s = a->cpu_busy[c], band = bands[c];
        if ((s >= 0) != (now[c] >= 0))
            return true;
        if (s < 0)
            continue;
        int n = side(s, now[c], band);
        if (n == 0)
            continue;
        if (side(s, now[c], at_once > band ? at_once : band) != 0)
            return true;
        if (last[c] >= 0 && side(s, last[c], band) == n)
            return true;
    }
    return false;
}

bool vpack_snapshot_within(const struct vpack_snapshot *a, const struct vpack_snapshot *b,
                           double band)
{
    if (!a || !b || a->interval_ms != b->interval_ms || a->ndomains != b->ndomains ||
        !vpack_snapshot_cpus_within(a, b->cpu_busy, b->ncpus, band))
        return false;
    for (unsigned i = 0; i < a->ndomains; i++)
        if (!domain_within(&a->domains[i], &b->domains[i], band))
            return false;
    return true;
}
