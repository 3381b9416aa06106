// SPDX-License-Identifier: MIT
#include "vpack/prom.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

/* A growing text buffer; after a failed allocation it only records that. */
struct buf {
    char *p;
    size_t len, cap;
    bool oom;
};

static void buf_add(struct buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t ncap = b->cap ? b->cap : 4096;
        while (b->len + n + 1 > ncap)
            ncap *= 2;
        char *p = realloc(b->p, ncap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = ncap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_puts(struct buf *b, const char *s)
{
    buf_add(b, s, strlen(s));
}

/* Length of the valid UTF-8 sequence starting at s (n bytes left), 0 if none. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    uint32_t cp, min;
    size_t len;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        len = 2, cp = s[0] & 0x1f, min = 0x80;
    } else if ((s[0] & 0xf0) == 0xe0) {
        len = 3, cp = s[0] & 0x0f, min = 0x800;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        len = 4, cp = s[0] & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/*
 * A label value as the text format wants it: backslash, double quote and
 * line feed escaped; a byte that is not part of valid UTF-8 becomes U+FFFD
 * (Prometheus rejects the whole scrape otherwise).
 */
static void buf_label_value(struct buf *b, const char *v)
{
    const unsigned char *s = (const unsigned char *)v;
    size_t n = strlen(v);
    while (n) {
        size_t k = utf8_len(s, n);
        if (k == 0) {
            buf_add(b, "\xef\xbf\xbd", 3);
            k = 1;
        } else if (*s == '\\') {
            buf_add(b, "\\\\", 2);
        } else if (*s == '"') {
            buf_add(b, "\\\"", 2);
        } else if (*s == '\n') {
            buf_add(b, "\\n", 2);
        } else {
            buf_add(b, (const char *)s, k);
        }
        s += k;
        n -= k;
    }
}

/*
 * A sample value: the shortest of %.15g, %.16g and %.17g that reads back
 * as v, and the text format's NaN, +Inf and -Inf.
 */
static const char *fmt_double(char *s, size_t n, double v)
{
    if (isnan(v))
        snprintf(s, n, "NaN");
    else if (isinf(v))
        snprintf(s, n, "%s", v > 0 ? "+Inf" : "-Inf");
    else
        for (int digits = 15; digits <= 17; digits++)
            if (snprintf(s, n, "%.*g", digits, v), strtod(s, NULL) == v)
                break;
    return s;
}

static const char *fmt_i64(char *s, size_t n, int64_t v)
{
    snprintf(s, n, "%" PRId64, v);
    return s;
}

/* The member key of o when it has type t (any number type for json_type_double). */
static struct json_object *get(struct json_object *o, const char *key, json_type t)
{
    struct json_object *v;
    if (!o || !json_object_object_get_ex(o, key, &v) || !v)
        return NULL;
    if (t == json_type_double)
        return json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int) ||
                       json_object_is_type(v, json_type_boolean)
                   ? v
                   : NULL;
    return json_object_is_type(v, t) ? v : NULL;
}

/* Formats the number, integer or boolean at o.key into s; false when there is none. */
static bool num(struct json_object *o, const char *key, char *s, size_t n)
{
    struct json_object *v = get(o, key, json_type_double);
    if (!v)
        return false;
    if (json_object_is_type(v, json_type_boolean))
        snprintf(s, n, "%d", json_object_get_boolean(v) ? 1 : 0);
    else if (json_object_is_type(v, json_type_int))
        fmt_i64(s, n, json_object_get_int64(v));
    else
        fmt_double(s, n, json_object_get_double(v));
    return true;
}

struct label {
    const char *name;
    const char *value;
};

/* A metric family; its # HELP and # TYPE lines come before its first sample. */
struct family {
    const char *name;
    const char *type;
    const char *help;
    bool started;
};

static void sample(struct buf *b, struct family *f, const char *suffix, const struct label *l,
                   size_t nl, const char *value)
{
    if (!f->started) {
        buf_puts(b, "# HELP ");
        buf_puts(b, f->name);
        buf_puts(b, " ");
        buf_puts(b, f->help);
        buf_puts(b, "\n# TYPE ");
        buf_puts(b, f->name);
        buf_puts(b, " ");
        buf_puts(b, f->type);
        buf_puts(b, "\n");
        f->started = true;
    }
    buf_puts(b, f->name);
    buf_puts(b, suffix);
    for (size_t i = 0; i < nl; i++) {
        buf_puts(b, i ? "," : "{");
        buf_puts(b, l[i].name);
        buf_puts(b, "=\"");
        buf_label_value(b, l[i].value);
        buf_puts(b, "\"");
    }
    if (nl)
        buf_puts(b, "}");
    buf_puts(b, " ");
    buf_puts(b, value);
    buf_puts(b, "\n");
}

/* One unlabelled sample from metrics.key, nothing when the key is absent. */
static void scalar(struct buf *b, struct json_object *mj, const char *key, const char *name,
                   const char *type, const char *help)
{
    struct family f = {name, type, help, false};
    char v[64];
    if (num(mj, key, v, sizeof(v)))
        sample(b, &f, "", NULL, 0, v);
}

/* One sample per package from packages[].key, labelled with packages[].id. */
static void per_package(struct buf *b, struct json_object *pkgs, const char *key, const char *name,
                        const char *type, const char *help)
{
    struct family f = {name, type, help, false};
    char id[32], v[64];
    size_t n = pkgs ? json_object_array_length(pkgs) : 0;
    for (size_t i = 0; i < n; i++) {
        struct json_object *p = json_object_array_get_idx(pkgs, i);
        struct json_object *idv = get(p, "id", json_type_int);
        if (!idv || !num(p, key, v, sizeof(v)))
            continue;
        fmt_i64(id, sizeof(id), json_object_get_int64(idv));
        struct label l = {"package", id};
        sample(b, &f, "", &l, 1, v);
    }
}

static void packages(struct buf *b, struct json_object *mj)
{
    struct json_object *pkgs = get(mj, "packages", json_type_array);
    if (!pkgs)
        return;
    per_package(b, pkgs, "busy", "vpack_package_busy_ratio", "gauge",
                "Smoothed busy share of the package's CPUs (0 to 1), as the planner sees it.");
    per_package(b, pkgs, "idle_seconds", "vpack_package_idle_seconds_total", "counter",
                "Idle time of the package's CPUs since boot, summed over its CPUs, from /proc/stat.");
    per_package(b, pkgs, "active", "vpack_package_active", "gauge",
                "1 when the plan keeps the package active, 0 when it is parked.");
    per_package(b, pkgs, "wakeup", "vpack_package_wakeup", "gauge",
                "1 for the wake-up package, where level-2 domains' light threads wait, else 0.");

    struct family f = {"vpack_active_packages", "gauge",
                       "Number of packages the current plan keeps active.", false};
    char v[32];
    int64_t active = 0;
    for (size_t i = 0; i < json_object_array_length(pkgs); i++) {
        struct json_object *a = get(json_object_array_get_idx(pkgs, i), "active", json_type_boolean);
        active += a && json_object_get_boolean(a);
    }
    sample(b, &f, "", NULL, 0, fmt_i64(v, sizeof(v), active));
}

static int cmp_idle(const void *x, const void *y)
{
    const struct vpack_prom_idle_state *a = *(const struct vpack_prom_idle_state *const *)x;
    const struct vpack_prom_idle_state *b = *(const struct vpack_prom_idle_state *const *)y;
    if (a->cpu != b->cpu)
        return a->cpu < b->cpu ? -1 : 1;
    if (!a->name || !b->name)
        return !b->name - !a->name; /* nameless first */
    return strcmp(a->name, b->name);
}

static int host_families(struct buf *b, const struct vpack_prom_host *host)
{
    char cpu[32], v[64];
    if (!host)
        return 0;
    /* Sorted, and a (cpu, state) pair that repeats is left out: one series each. */
    const struct vpack_prom_idle_state **idle = NULL;
    if (host->nidle) {
        idle = malloc(host->nidle * sizeof(*idle));
        if (!idle)
            return -ENOMEM;
        for (size_t i = 0; i < host->nidle; i++)
            idle[i] = &host->idle[i];
        qsort(idle, host->nidle, sizeof(*idle), cmp_idle);
    }
    struct family fi = {"vpack_cpu_idle_state_residency_seconds_total", "counter",
                        "Time the CPU spent in the cpuidle state since boot, from "
                        "/sys/devices/system/cpu/cpuN/cpuidle/stateM/time.",
                        false};
    for (size_t i = 0; i < host->nidle; i++) {
        if (!idle[i]->name || (i && cmp_idle(&idle[i - 1], &idle[i]) == 0))
            continue;
        snprintf(cpu, sizeof(cpu), "%u", idle[i]->cpu);
        struct label l[2] = {{"cpu", cpu}, {"state", idle[i]->name}};
        sample(b, &fi, "", l, 2, fmt_double(v, sizeof(v), idle[i]->seconds));
    }
    free(idle);

    struct family fe = {"vpack_package_energy_joules_total", "counter",
                        "Energy the package used, from RAPL (/sys/class/powercap), counter wraps "
                        "undone; absent where the host has no RAPL.",
                        false};
    for (size_t i = 0; i < host->nenergy; i++) {
        bool dup = false;
        for (size_t k = 0; k < i; k++)
            dup |= host->energy[k].package == host->energy[i].package;
        if (dup)
            continue;
        snprintf(cpu, sizeof(cpu), "%u", host->energy[i].package);
        struct label l = {"package", cpu};
        sample(b, &fe, "", &l, 1, fmt_double(v, sizeof(v), host->energy[i].joules));
    }
    return 0;
}

struct dom {
    const char *name;
    struct json_object *o;
};

static int cmp_dom(const void *x, const void *y)
{
    return strcmp(((const struct dom *)x)->name, ((const struct dom *)y)->name);
}

static void vcpus(struct buf *b, const struct dom *d, size_t nd, const char *key, const char *name,
                  const char *help)
{
    struct family f = {name, "gauge", help, false};
    char id[32], v[64];
    for (size_t i = 0; i < nd; i++) {
        struct json_object *vc = get(d[i].o, "vcpus", json_type_array);
        size_t n = vc ? json_object_array_length(vc) : 0;
        for (size_t k = 0; k < n; k++) {
            struct json_object *t = json_object_array_get_idx(vc, k);
            struct json_object *idv = get(t, "id", json_type_int);
            if (!idv || !num(t, key, v, sizeof(v)))
                continue;
            fmt_i64(id, sizeof(id), json_object_get_int64(idv));
            struct label l[2] = {{"domain", d[i].name}, {"vcpu", id}};
            sample(b, &f, "", l, 2, v);
        }
    }
}

static int domains(struct buf *b, struct json_object *mj)
{
    struct json_object *arr = get(mj, "domains", json_type_array);
    size_t n = arr ? json_object_array_length(arr) : 0, nd = 0;
    struct dom *d;
    char v[64], pk[32];
    if (!n)
        return 0;
    d = calloc(n, sizeof(*d));
    if (!d)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        struct json_object *o = json_object_array_get_idx(arr, i);
        struct json_object *name = get(o, "name", json_type_string);
        if (name)
            d[nd++] = (struct dom){json_object_get_string(name), o};
    }
    /* Sorted by name; a name that repeats keeps its first entry only. */
    qsort(d, nd, sizeof(*d), cmp_dom);
    size_t u = 0;
    for (size_t i = 0; i < nd; i++)
        if (!u || strcmp(d[u - 1].name, d[i].name))
            d[u++] = d[i];
    nd = u;

    struct family fl = {"vpack_domain_level", "gauge",
                        "Power policy level in effect for the domain (0 none, 1 or 2).", false};
    struct family fm = {"vpack_domain_managed", "gauge",
                        "1 when the agent knows the pins the domain asked for and may place its "
                        "threads, else 0.",
                        false};
    struct family fp = {"vpack_domain_package", "gauge",
                        "1 for each package the domain's threads are placed on.", false};
    for (size_t i = 0; i < nd; i++) {
        struct label l = {"domain", d[i].name};
        if (num(d[i].o, "level", v, sizeof(v)))
            sample(b, &fl, "", &l, 1, v);
    }
    for (size_t i = 0; i < nd; i++) {
        struct label l = {"domain", d[i].name};
        if (num(d[i].o, "managed", v, sizeof(v)))
            sample(b, &fm, "", &l, 1, v);
    }
    for (size_t i = 0; i < nd; i++) {
        struct json_object *p = get(d[i].o, "packages", json_type_array);
        size_t np = p ? json_object_array_length(p) : 0;
        for (size_t k = 0; k < np; k++) {
            struct json_object *id = json_object_array_get_idx(p, k);
            bool dup = false;
            if (!json_object_is_type(id, json_type_int))
                continue;
            for (size_t j = 0; j < k; j++)
                dup |= json_object_is_type(json_object_array_get_idx(p, j), json_type_int) &&
                       json_object_get_int64(json_object_array_get_idx(p, j)) ==
                           json_object_get_int64(id);
            if (dup)
                continue;
            fmt_i64(pk, sizeof(pk), json_object_get_int64(id));
            struct label l[2] = {{"domain", d[i].name}, {"package", pk}};
            sample(b, &fp, "", l, 2, "1");
        }
    }
    struct family fr = {"vpack_domain_remote_memory_ratio", "gauge",
                        "Share of the domain's memory on NUMA nodes outside the packages it is "
                        "placed on (vpack never migrates memory).",
                        false};
    for (size_t i = 0; i < nd; i++) {
        struct label l = {"domain", d[i].name};
        if (num(d[i].o, "remote_memory", v, sizeof(v)))
            sample(b, &fr, "", &l, 1, v);
    }
    vcpus(b, d, nd, "delay", "vpack_vcpu_delay_ratio",
          "Run-queue delay of the vCPU thread over the last interval, as a fraction of it.");
    vcpus(b, d, nd, "util", "vpack_vcpu_utilization_ratio",
          "Run time of the vCPU thread over the last interval, as a fraction of it.");
    free(d);
    return 0;
}

/* A counter labelled by the string members keys[] of each element of metrics.key. */
static void by_reason(struct buf *b, struct json_object *mj, const char *key, const char *const *keys,
                      size_t nkeys, const char *name, const char *help)
{
    struct family f = {name, "counter", help, false};
    struct json_object *arr = get(mj, key, json_type_array);
    size_t n = arr ? json_object_array_length(arr) : 0;
    char v[64];
    for (size_t i = 0; i < n; i++) {
        struct json_object *o = json_object_array_get_idx(arr, i);
        struct label l[2];
        size_t k;
        for (k = 0; k < nkeys && k < 2; k++) {
            struct json_object *s = get(o, keys[k], json_type_string);
            if (!s)
                break;
            l[k] = (struct label){keys[k], json_object_get_string(s)};
        }
        if (k == nkeys && num(o, "count", v, sizeof(v)))
            sample(b, &f, "", l, nkeys, v);
    }
}

/*
 * A histogram from {"buckets": [[upper_bound, cumulative_count], ...],
 * "sum", "count"}: the buckets in increasing order of bound (others are
 * left out), then le="+Inf" with the count, then _sum and _count.
 */
static void histogram(struct buf *b, struct json_object *mj, const char *key, const char *name,
                      const char *help)
{
    struct family f = {name, "histogram", help, false};
    struct json_object *h = get(mj, key, json_type_object);
    struct json_object *bk = get(h, "buckets", json_type_array);
    char le[64], v[64], sum[64], count[64];
    double prev = -INFINITY;
    if (!h || !num(h, "sum", sum, sizeof(sum)) || !num(h, "count", count, sizeof(count)))
        return;
    for (size_t i = 0; bk && i < json_object_array_length(bk); i++) {
        struct json_object *pair = json_object_array_get_idx(bk, i);
        if (!json_object_is_type(pair, json_type_array) || json_object_array_length(pair) != 2)
            continue;
        struct json_object *ub = json_object_array_get_idx(pair, 0);
        struct json_object *c = json_object_array_get_idx(pair, 1);
        if (!(json_object_is_type(ub, json_type_double) || json_object_is_type(ub, json_type_int)) ||
            !json_object_is_type(c, json_type_int))
            continue;
        double bound = json_object_get_double(ub);
        if (!isfinite(bound) || bound <= prev)
            continue;
        prev = bound;
        struct label l = {"le", fmt_double(le, sizeof(le), bound)};
        sample(b, &f, "_bucket", &l, 1, fmt_i64(v, sizeof(v), json_object_get_int64(c)));
    }
    struct label inf = {"le", "+Inf"};
    sample(b, &f, "_bucket", &inf, 1, count);
    sample(b, &f, "_sum", NULL, 0, sum);
    sample(b, &f, "_count", NULL, 0, count);
}

int vpack_prom_render(struct json_object *mj, const struct vpack_prom_host *host, char **out,
                      size_t *len)
{
    static const char *const reason[] = {"reason"};
    static const char *const reason_result[] = {"reason", "result"};
    struct buf b = {0};
    int ret = -ENOMEM;

    *out = NULL;
    if (len)
        *len = 0;
    if (!mj || !json_object_is_type(mj, json_type_object))
        return -EINVAL;

    struct json_object *version = get(mj, "version", json_type_string);
    if (version) {
        struct family f = {"vpack_build_info", "gauge", "vpackd's version; the value is always 1.",
                           false};
        struct label l = {"version", json_object_get_string(version)};
        sample(&b, &f, "", &l, 1, "1");
    }
    scalar(&b, mj, "connected", "vpack_libvirt_connected", "gauge",
           "1 while the agent is connected to libvirt, else 0.");
    scalar(&b, mj, "connects", "vpack_libvirt_connects_total", "counter",
           "Connections to libvirt the agent opened, the first one included.");
    packages(&b, mj);
    scalar(&b, mj, "demand", "vpack_demand_cpus", "gauge",
           "CPUs' worth of load the planner expects, from the smoothed samples.");
    scalar(&b, mj, "lifted", "vpack_restrictions_lifted", "gauge",
           "1 while the plan lifts every restriction (load too high to pack), else 0.");
    if ((ret = host_families(&b, host)) < 0)
        goto cleanup;
    if ((ret = domains(&b, mj)) < 0)
        goto cleanup;
    by_reason(&b, mj, "rebalances", reason, 1, "vpack_rebalances_total",
              "Plans that moved threads, by why the plan changed.");
    by_reason(&b, mj, "pin_ops", reason_result, 2, "vpack_pin_operations_total",
              "Pin calls to libvirt, by why they were made and how they ended.");
    histogram(&b, mj, "plan_duration", "vpack_plan_duration_seconds",
              "Time the policy took to compute one plan.");
    histogram(&b, mj, "cycle_duration", "vpack_sample_duration_seconds",
              "Time one sampling cycle took: read, plan and pin.");
    scalar(&b, mj, "samples", "vpack_samples_total", "counter", "Sampling cycles run.");
    scalar(&b, mj, "hotplug_events", "vpack_hotplug_events_total", "counter",
           "CPU online and offline events seen.");
    scalar(&b, mj, "cgroup_repairs", "vpack_cgroup_repairs_total", "counter",
           "cpuset cgroups repaired after a CPU came back online.");
    buf_add(&b, "", 0);
    ret = b.oom ? -ENOMEM : 0;
cleanup:
    if (ret < 0) {
        free(b.p);
        return ret;
    }
    *out = b.p;
    if (len)
        *len = b.len;
    return 0;
}

uint64_t vpack_prom_wrap_delta(uint64_t prev, uint64_t cur, uint64_t range)
{
    if (cur >= prev)
        return cur - prev;
    if (range == 0 || prev > range)
        return cur;
    return range - prev + cur;
}
