// SPDX-License-Identifier: MIT
/*
 * The topology loader: one hwloc code path for the live host, hwloc XML
 * exports, synthetic descriptions and Linux sysfs trees, reduced to the
 * packages, cores, NUMA nodes and L3 caches the policy needs.
 */
#include "vpack/topology.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <hwloc.h>
#include <json-c/json.h>

#include "vpack/json.h"

enum source_kind {
    SOURCE_HOST,
    SOURCE_XML,
    SOURCE_SYNTHETIC,
    SOURCE_SYSFS,
};

/* One environment variable changed around hwloc_topology_load(). */
struct env_saved {
    const char *name;
    char *old; /* the previous value, or NULL when it was unset */
    bool changed;
};

/* A package as hwloc reports it, before it is reduced to usable CPUs. */
struct raw_package {
    int id;
    hwloc_const_cpuset_t cpuset;
};

static void set_errmsg(char **errmsg, const char *spec, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Sets *errmsg to "topology 'SPEC': MESSAGE"; on allocation failure it stays NULL. */
static void set_errmsg(char **errmsg, const char *spec, const char *fmt, ...)
{
    char *msg = NULL;
    va_list ap;

    if (!errmsg)
        return;
    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    if (!msg || asprintf(errmsg, "topology '%s': %s", spec, msg) < 0)
        *errmsg = NULL;
    free(msg);
}

/*
 * Sets (value non-NULL) or unsets (value NULL) an environment variable and
 * remembers its previous value in *s for env_restore(). Returns 0 or -errno.
 */
static int env_override(struct env_saved *s, const char *name, const char *value)
{
    const char *old = getenv(name);

    s->name = name;
    s->old = NULL;
    s->changed = false;
    if (old) {
        s->old = strdup(old);
        if (!s->old)
            return -ENOMEM;
    }
    if (value ? setenv(name, value, 1) : unsetenv(name)) {
        int err = -errno;
        free(s->old);
        s->old = NULL;
        return err;
    }
    s->changed = true;
    return 0;
}

/* Puts back what env_override() changed; a no-op for an untouched entry. */
static void env_restore(struct env_saved *s)
{
    if (s->changed) {
        if (s->old)
            setenv(s->name, s->old, 1);
        else
            unsetenv(s->name);
    }
    free(s->old);
    s->old = NULL;
    s->changed = false;
}

/*
 * Splits a spec into its kind and argument (a pointer into spec). Returns 0,
 * or -EINVAL for an unknown prefix.
 */
static int parse_spec(const char *spec, enum source_kind *kind, const char **arg)
{
    static const struct {
        const char *prefix;
        enum source_kind kind;
    } prefixes[] = {
        {"xml:", SOURCE_XML},
        {"synthetic:", SOURCE_SYNTHETIC},
        {"sysfs:", SOURCE_SYSFS},
    };

    *arg = NULL;
    if (!spec || !*spec || !strcmp(spec, "host")) {
        *kind = SOURCE_HOST;
        return 0;
    }
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        size_t len = strlen(prefixes[i].prefix);
        if (!strncmp(spec, prefixes[i].prefix, len)) {
            *kind = prefixes[i].kind;
            *arg = spec + len;
            return 0;
        }
    }
    return -EINVAL;
}

/*
 * Returns a copy of a synthetic description without one pair of surrounding
 * double (or single) quotes, which a configuration file or shell line may
 * carry and hwloc rejects; NULL when out of memory.
 */
static char *unquote(const char *desc)
{
    size_t len = strlen(desc);

    if (len >= 2 && (desc[0] == '"' || desc[0] == '\'') && desc[len - 1] == desc[0])
        return strndup(desc + 1, len - 2);
    return strdup(desc);
}

/*
 * Converts a finite hwloc bitmap to a vpack_cpuset. Ids of VPACK_CPUSET_MAX
 * and above cannot be pinned through libvirt and are ignored.
 */
static void bitmap_to_cpuset(hwloc_const_bitmap_t b, vpack_cpuset *out)
{
    int id;

    vpack_cpuset_zero(out);
    hwloc_bitmap_foreach_begin(id, b)
    {
        if (id >= VPACK_CPUSET_MAX)
            break;
        vpack_cpuset_set(out, (unsigned)id);
    }
    hwloc_bitmap_foreach_end();
}

/* Converts a vpack_cpuset to an hwloc bitmap. Returns 0 or -ENOMEM. */
static int cpuset_to_bitmap(const vpack_cpuset *s, hwloc_bitmap_t out)
{
    hwloc_bitmap_zero(out);
    VPACK_CPUSET_FOREACH(cpu, s)
    {
        if (hwloc_bitmap_set(out, (unsigned)cpu) < 0)
            return -ENOMEM;
    }
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int cmp_raw_package(const void *a, const void *b)
{
    return cmp_int(&((const struct raw_package *)a)->id, &((const struct raw_package *)b)->id);
}

/* hwloc leaves os_index unknown when the OS gave no number; the logical index stands in. */
static int object_id(hwloc_obj_t obj)
{
    if (obj->os_index == HWLOC_UNKNOWN_INDEX)
        return (int)obj->logical_index;
    return (int)obj->os_index;
}

/*
 * Counts the cores holding at least one CPU of cpus and the most CPUs of cpus
 * on one core. A CPU under no Core object (hwloc built none, or left some PU
 * outside them) counts as a core of its own. Returns 0 or -ENOMEM.
 */
static int count_cores(hwloc_topology_t topo, hwloc_const_cpuset_t cpus, unsigned *ncores,
                       unsigned *threads)
{
    hwloc_bitmap_t mine = hwloc_bitmap_alloc();
    hwloc_bitmap_t covered = hwloc_bitmap_alloc();
    hwloc_obj_t core = NULL;
    int ret = -ENOMEM;

    *ncores = 0;
    *threads = 0;
    if (!mine || !covered)
        goto cleanup;
    while ((core = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_CORE, core))) {
        int w;

        if (hwloc_bitmap_and(mine, core->cpuset, cpus) < 0 ||
            hwloc_bitmap_or(covered, covered, mine) < 0)
            goto cleanup;
        w = hwloc_bitmap_weight(mine);
        if (w > 0) {
            (*ncores)++;
            if ((unsigned)w > *threads)
                *threads = (unsigned)w;
        }
    }
    if (hwloc_bitmap_andnot(mine, cpus, covered) < 0)
        goto cleanup;
    if (!hwloc_bitmap_iszero(mine)) {
        *ncores += (unsigned)hwloc_bitmap_weight(mine);
        if (*threads < 1)
            *threads = 1;
    }
    ret = 0;
cleanup:
    hwloc_bitmap_free(mine);
    hwloc_bitmap_free(covered);
    return ret;
}

/*
 * t->cpu_core: each usable CPU's physical core, numbered in hwloc's order of
 * Core objects; a usable CPU under no Core object is a core of its own
 * (count_cores() counts it so). Returns 0 or -ENOMEM.
 */
static int number_cores(hwloc_topology_t topo, struct vpack_topology *t)
{
    hwloc_obj_t core = NULL;
    vpack_cpuset set;
    int next = 0;

    t->cpu_core = malloc(((size_t)t->max_cpu + 1) * sizeof(*t->cpu_core));
    if (!t->cpu_core)
        return -ENOMEM;
    for (int c = 0; c <= t->max_cpu; c++)
        t->cpu_core[c] = -1;
    while ((core = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_CORE, core))) {
        bool any = false;

        bitmap_to_cpuset(core->cpuset, &set);
        vpack_cpuset_and(&set, &set, &t->cpus);
        VPACK_CPUSET_FOREACH(cpu, &set)
        {
            t->cpu_core[cpu] = next;
            any = true;
        }
        next += any;
    }
    VPACK_CPUSET_FOREACH(cpu, &t->cpus)
    {
        if (t->cpu_core[cpu] < 0)
            t->cpu_core[cpu] = next++;
    }
    return 0;
}

/* L3 caches by their lowest CPU. */
static int cmp_l3(const void *a, const void *b)
{
    return vpack_cpuset_first(&((const struct vpack_l3 *)a)->cpus) -
           vpack_cpuset_first(&((const struct vpack_l3 *)b)->cpus);
}

/*
 * Fills the NUMA nodes and L3 caches of p. In hwloc 2 NUMA nodes are memory
 * children of a Package, Group or the Machine, not parents of the cores, so
 * they are matched by cpuset rather than by ancestry. An L3 keeps the usable
 * CPUs of this package under it. Returns 0 or -ENOMEM.
 */
static int find_numa_and_l3(hwloc_topology_t topo, hwloc_const_cpuset_t cpus,
                            struct vpack_package *p)
{
    int nnodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    hwloc_obj_t obj = NULL;

    p->nnuma = 0;
    p->numa_nodes = NULL;
    p->nl3 = 0;
    if (nnodes > 0) {
        p->numa_nodes = calloc((size_t)nnodes, sizeof(*p->numa_nodes));
        if (!p->numa_nodes)
            return -ENOMEM;
    }
    while ((obj = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, obj))) {
        if (p->nnuma < (unsigned)nnodes && obj->cpuset && hwloc_bitmap_intersects(obj->cpuset, cpus))
            p->numa_nodes[p->nnuma++] = object_id(obj);
    }
    qsort(p->numa_nodes, p->nnuma, sizeof(*p->numa_nodes), cmp_int);

    int ncaches = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_L3CACHE);
    if (ncaches <= 0)
        return 0;
    hwloc_bitmap_t mine = hwloc_bitmap_alloc();
    p->l3 = calloc((size_t)ncaches, sizeof(*p->l3));
    if (!mine || !p->l3) {
        hwloc_bitmap_free(mine);
        return -ENOMEM;
    }
    obj = NULL;
    while ((obj = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_L3CACHE, obj))) {
        unsigned threads;
        if (p->nl3 >= (unsigned)ncaches || !obj->cpuset ||
            !hwloc_bitmap_intersects(obj->cpuset, cpus))
            continue;
        struct vpack_l3 *c = &p->l3[p->nl3];
        if (hwloc_bitmap_and(mine, obj->cpuset, cpus) < 0 ||
            count_cores(topo, mine, &c->ncores, &threads) < 0) {
            hwloc_bitmap_free(mine);
            return -ENOMEM;
        }
        bitmap_to_cpuset(mine, &c->cpus);
        p->nl3++;
    }
    hwloc_bitmap_free(mine);
    qsort(p->l3, p->nl3, sizeof(*p->l3), cmp_l3);
    return 0;
}

/*
 * Lists the packages with their hwloc cpusets in *out (caller frees), sorted
 * by id. A topology without Package objects is one package, number 0.
 * Returns the count or -ENOMEM.
 */
static int list_packages(hwloc_topology_t topo, struct raw_package **out)
{
    int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
    struct raw_package *raw;
    hwloc_obj_t obj = NULL;
    int i = 0;

    if (n <= 0) {
        raw = calloc(1, sizeof(*raw));
        if (!raw)
            return -ENOMEM;
        raw[0].id = 0;
        raw[0].cpuset = hwloc_get_root_obj(topo)->cpuset;
        *out = raw;
        return 1;
    }
    raw = calloc((size_t)n, sizeof(*raw));
    if (!raw)
        return -ENOMEM;
    while (i < n && (obj = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, obj))) {
        raw[i].id = object_id(obj);
        raw[i].cpuset = obj->cpuset;
        i++;
    }
    qsort(raw, (size_t)i, sizeof(*raw), cmp_raw_package);
    *out = raw;
    return i;
}

/*
 * Reduces a loaded hwloc topology to t's packages: usable CPUs are the online
 * (in the topology's cpuset) and allowed ones, minus reserved, within
 * restrict_to. Returns 0, -ENOMEM, or -ENODEV when no usable CPU is left.
 */
static int build(hwloc_topology_t topo, const vpack_cpuset *reserved,
                 const vpack_cpuset *restrict_to, struct vpack_topology *t)
{
    hwloc_bitmap_t usable = hwloc_bitmap_alloc();
    hwloc_bitmap_t mine = hwloc_bitmap_alloc();
    struct raw_package *raw = NULL;
    vpack_cpuset cpus;
    int nraw, ret = -ENOMEM;

    if (!usable || !mine)
        goto cleanup;

    /* The root cpuset is finite (present PUs only), so the result is too. */
    if (hwloc_bitmap_and(usable, hwloc_topology_get_topology_cpuset(topo),
                         hwloc_topology_get_allowed_cpuset(topo)) < 0)
        goto cleanup;
    bitmap_to_cpuset(usable, &cpus);
    if (reserved)
        vpack_cpuset_andnot(&cpus, &cpus, reserved);
    if (restrict_to)
        vpack_cpuset_and(&cpus, &cpus, restrict_to);
    ret = cpuset_to_bitmap(&cpus, usable);
    if (ret < 0)
        goto cleanup;

    nraw = list_packages(topo, &raw);
    if (nraw < 0) {
        ret = nraw;
        goto cleanup;
    }
    ret = -ENOMEM;
    t->packages = calloc((size_t)nraw, sizeof(*t->packages));
    if (!t->packages)
        goto cleanup;

    vpack_cpuset_zero(&t->cpus);
    for (int i = 0; i < nraw; i++) {
        struct vpack_package *p = &t->packages[t->npackages];

        if (!raw[i].cpuset)
            continue;
        if (hwloc_bitmap_and(mine, raw[i].cpuset, usable) < 0)
            goto cleanup;
        if (hwloc_bitmap_iszero(mine))
            continue;
        p->id = raw[i].id;
        bitmap_to_cpuset(mine, &p->cpus);
        /* Counted before anything can fail, so that vpack_topology_free() sees it. */
        t->npackages++;
        ret = count_cores(topo, mine, &p->ncores, &p->threads_per_core);
        if (ret < 0)
            goto cleanup;
        ret = find_numa_and_l3(topo, mine, p);
        if (ret < 0)
            goto cleanup;
        ret = -ENOMEM;
        /* A CPU no package holds is not usable: the policy places by package. */
        vpack_cpuset_or(&t->cpus, &t->cpus, &p->cpus);
    }

    ret = -ENODEV;
    if (t->npackages == 0)
        goto cleanup;
    ret = -ENOMEM;
    t->max_cpu = vpack_cpuset_last(&t->cpus);
    t->cpu_package = malloc(((size_t)t->max_cpu + 1) * sizeof(*t->cpu_package));
    if (!t->cpu_package)
        goto cleanup;
    for (int c = 0; c <= t->max_cpu; c++)
        t->cpu_package[c] = -1;
    t->cpu_l3 = malloc(((size_t)t->max_cpu + 1) * sizeof(*t->cpu_l3));
    if (!t->cpu_l3)
        goto cleanup;
    for (int c = 0; c <= t->max_cpu; c++)
        t->cpu_l3[c] = -1;
    for (unsigned i = 0; i < t->npackages; i++) {
        VPACK_CPUSET_FOREACH(cpu, &t->packages[i].cpus)
        t->cpu_package[cpu] = (int)i;
        for (unsigned k = 0; k < t->packages[i].nl3; k++) {
            VPACK_CPUSET_FOREACH(cpu, &t->packages[i].l3[k].cpus)
            t->cpu_l3[cpu] = (int)k;
        }
    }
    ret = number_cores(topo, t);
cleanup:
    free(raw);
    hwloc_bitmap_free(usable);
    hwloc_bitmap_free(mine);
    return ret;
}

/*
 * Points hwloc's Linux backend at a sysfs tree: checks that ROOT has
 * sys/devices/system/cpu (otherwise hwloc quietly falls back to counting the
 * CPUs of the machine running us) and keeps hwloc's x86 backend, which reads
 * this machine's CPUID, out. Returns 0 or -errno with *what naming the step.
 */
static int prepare_sysfs(hwloc_topology_t topo, const char *root, struct env_saved *fsroot,
                         const char **what)
{
    char *cpudir = NULL;
    struct stat st;
    int ret;

    *what = "cannot read sysfs tree";
    if (!*root)
        return -EINVAL;
    if (asprintf(&cpudir, "%s/sys/devices/system/cpu", root) < 0)
        return -ENOMEM;
    if (stat(cpudir, &st) < 0)
        ret = -errno;
    else if (!S_ISDIR(st.st_mode))
        ret = -ENOTDIR;
    else
        ret = 0;
    free(cpudir);
    if (ret < 0)
        return ret;

    /* EINVAL means this hwloc has no x86 component: nothing to keep out. */
    *what = "cannot configure hwloc";
    errno = 0;
    if (hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86") < 0 &&
        errno != EINVAL)
        return errno ? -errno : -ENOMEM;
    /* hwloc 2 has no API for the fsroot; its Linux backend reads the variable at load. */
    return env_override(fsroot, "HWLOC_FSROOT", root);
}

int vpack_topology_load(const char *spec, const vpack_cpuset *reserved,
                        const vpack_cpuset *restrict_to, struct vpack_topology **out,
                        char **errmsg)
{
    const char *name = (spec && *spec) ? spec : "host";
    struct env_saved fsroot = {0}, thissystem = {0};
    struct vpack_topology *t = NULL;
    hwloc_topology_t topo = NULL;
    enum source_kind kind;
    const char *arg, *what = "cannot load topology";
    char *desc = NULL;
    int ret;

    if (errmsg)
        *errmsg = NULL;
    if (!out)
        return -EINVAL;
    *out = NULL;

    ret = parse_spec(spec, &kind, &arg);
    if (ret < 0) {
        set_errmsg(errmsg, name, "unknown source (expected host, xml:PATH, synthetic:DESC or sysfs:ROOT)");
        goto cleanup;
    }

    ret = -ENOMEM;
    t = calloc(1, sizeof(*t));
    if (!t)
        goto cleanup;
    t->max_cpu = -1;
    t->source = strdup(name);
    if (!t->source)
        goto cleanup;

    if (hwloc_topology_init(&topo) < 0) {
        topo = NULL;
        ret = errno ? -errno : -ENOMEM;
        what = "cannot initialise hwloc";
        goto fail_msg;
    }

    errno = 0;
    switch (kind) {
    case SOURCE_HOST:
        ret = 0;
        break;
    case SOURCE_XML:
        what = "cannot load hwloc XML";
        if (!*arg)
            ret = -ENOENT;
        else if (hwloc_topology_set_xml(topo, arg) < 0)
            ret = errno ? -errno : -EINVAL;
        else
            ret = 0;
        break;
    case SOURCE_SYNTHETIC: /* alike in shape to SOURCE_XML: another hwloc setter */
        what = "invalid synthetic description";
        desc = unquote(arg);
        if (!desc)
            ret = -ENOMEM;
        else if (!*desc)
            ret = -EINVAL;
        else if (hwloc_topology_set_synthetic(topo, desc) < 0)
            ret = errno ? -errno : -EINVAL;
        else
            ret = 0;
        break;
    case SOURCE_SYSFS:
        ret = prepare_sysfs(topo, arg, &fsroot, &what);
        break;
    }
    if (ret < 0)
        goto fail_msg;

    /*
     * A file or description is never this machine. HWLOC_THISSYSTEM=1 in our
     * environment would make hwloc treat it as such, and with
     * HWLOC_THISSYSTEM_ALLOWED_RESOURCES=1 it would then cut the topology
     * down to our own cgroup's CPUs; forcing 0 for the load rules both out.
     * Changing the environment is not thread-safe: load before starting
     * threads that read it.
     */
    if (kind != SOURCE_HOST) {
        ret = env_override(&thissystem, "HWLOC_THISSYSTEM", "0");
        if (ret < 0) {
            what = "cannot set HWLOC_THISSYSTEM";
            goto fail_msg;
        }
    }

    errno = 0;
    ret = hwloc_topology_load(topo);
    if (ret < 0)
        ret = errno ? -errno : -EINVAL;
    env_restore(&fsroot);
    env_restore(&thissystem);
    if (ret < 0) {
        what = "hwloc cannot load the topology";
        goto fail_msg;
    }

    if (kind == SOURCE_SYSFS) {
        /* Any other backend would have described this machine, not the tree. */
        const char *backend = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo), "Backend");
        if (!backend || strcmp(backend, "Linux")) {
            ret = -ENODEV;
            what = "hwloc's Linux backend found no CPU topology in the tree";
            goto fail_msg;
        }
    }

    ret = build(topo, reserved, restrict_to, t);
    if (ret == -ENODEV) {
        set_errmsg(errmsg, name, "no usable CPU (all are offline, disallowed, reserved or outside the allowed set)");
        goto cleanup;
    }
    if (ret < 0) {
        what = "cannot build the topology";
        goto fail_msg;
    }

    *out = t;
    t = NULL;
    ret = 0;
    goto cleanup;

fail_msg:
    set_errmsg(errmsg, name, "%s: %s", what, strerror(-ret));
cleanup:
    env_restore(&fsroot);
    env_restore(&thissystem);
    if (topo)
        hwloc_topology_destroy(topo);
    free(desc);
    vpack_topology_free(t);
    return ret;
}

/* The _free() functions free their struct's members: alike in shape only. */
void vpack_topology_free(struct vpack_topology *t)
{
    if (!t)
        return;
    for (unsigned i = 0; i < t->npackages; i++) {
        free(t->packages[i].numa_nodes);
        free(t->packages[i].l3);
    }
    free(t->packages);
    free(t->cpu_package);
    free(t->cpu_l3);
    free(t->cpu_core);
    free(t->source);
    free(t);
}

int vpack_topology_package_of(const struct vpack_topology *t, int cpu)
{
    if (!t || !t->cpu_package || cpu < 0 || cpu > t->max_cpu)
        return -1;
    return t->cpu_package[cpu];
}

int vpack_topology_l3_of(const struct vpack_topology *t, int cpu)
{
    if (!t || !t->cpu_l3 || cpu < 0 || cpu > t->max_cpu)
        return -1;
    return t->cpu_l3[cpu];
}

int vpack_topology_core_of(const struct vpack_topology *t, int cpu)
{
    if (!t || !t->cpu_core || cpu < 0 || cpu > t->max_cpu)
        return -1;
    return t->cpu_core[cpu];
}

int vpack_topology_package_index(const struct vpack_topology *t, int id)
{
    unsigned lo = 0, hi;

    if (!t)
        return -1;
    /* Packages are sorted by id. */
    hi = t->npackages;
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        if (t->packages[mid].id == id)
            return (int)mid;
        if (t->packages[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}



static struct json_object *package_to_json(const struct vpack_package *p)
{
    struct json_object *obj = json_object_new_object();
    struct json_object *nodes = NULL;

    if (!obj)
        return NULL;
    if (vpack_json_add(obj, "id", json_object_new_int(p->id)) < 0 ||
        vpack_json_add_cpuset(obj, "cpus", &p->cpus) < 0 ||
        vpack_json_add(obj, "cores", json_object_new_int64(p->ncores)) < 0 ||
        vpack_json_add(obj, "threads_per_core", json_object_new_int64(p->threads_per_core)) < 0)
        goto fail;
    nodes = json_object_new_array();
    if (!nodes)
        goto fail;
    for (unsigned i = 0; i < p->nnuma; i++) {
        struct json_object *n = json_object_new_int(p->numa_nodes[i]);
        if (!n || json_object_array_add(nodes, n) < 0) {
            json_object_put(n);
            json_object_put(nodes);
            goto fail;
        }
    }
    if (vpack_json_add(obj, "numa_nodes", nodes) < 0 ||
        vpack_json_add(obj, "l3", json_object_new_int64(p->nl3)) < 0)
        goto fail;
    return obj;
fail:
    json_object_put(obj);
    return NULL;
}

char *vpack_topology_to_json(const struct vpack_topology *t)
{
    struct json_object *root = json_object_new_object();
    struct json_object *pkgs = NULL;
    char *ret = NULL;

    if (!root || !t)
        goto cleanup;
    if (vpack_json_add(root, "source", json_object_new_string(t->source ? t->source : "host")) < 0 ||
        vpack_json_add_cpuset(root, "cpus", &t->cpus) < 0)
        goto cleanup;
    pkgs = json_object_new_array();
    if (!pkgs)
        goto cleanup;
    for (unsigned i = 0; i < t->npackages; i++) {
        struct json_object *p = package_to_json(&t->packages[i]);
        if (!p || json_object_array_add(pkgs, p) < 0) {
            json_object_put(p);
            json_object_put(pkgs);
            goto cleanup;
        }
    }
    if (vpack_json_add(root, "packages", pkgs) < 0)
        goto cleanup;
    /* Paths in "source" read better without json-c's default "\/". */
    ret = vpack_json_to_text(root);
cleanup:
    json_object_put(root);
    return ret;
}
