// SPDX-License-Identifier: MIT
/*
 * vpackctl plan: runs the policy offline on recorded snapshots, with no agent
 * and no libvirt. A file holds one snapshot (pretty-printed or not) or a
 * series, one snapshot per line, replayed in order with one policy state.
 * The file is read with the adapters' reader, a series line with trace.c's
 * reader, the policy settings with the configuration's loader: plan has no
 * rules of its own.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vpack/config.h"
#include "vpack/cpuset.h"
#include "vpack/policy.h"
#include "vpack/snapshot.h"
#include "vpack/topology.h"
#include "vpack/trace.h"
#include "host.h"
#include "vpackctl.h"

static void usage(FILE *f)
{
    struct vpack_policy_params d;

    vpack_policy_params_default(&d);
    fprintf(f,
            "Usage: vpackctl plan --snapshot FILE [--topology SPEC] [--reserved CPUS]\n"
            "                     [POLICY OPTIONS] [--json]\n"
            "\n"
            "Run the placement policy offline on recorded snapshots and print the plans.\n"
            "FILE ('-' for standard input) holds one JSON snapshot, or a series of them,\n"
            "one per line, replayed in order as the agent would see them.\n"
            "\n"
            "Options:\n"
            "  --snapshot FILE          the snapshot or series to replay (required)\n"
            "  --topology SPEC          host (the default), xml:PATH, synthetic:DESC or\n"
            "                           sysfs:ROOT\n"
            "  --reserved CPUS          leave these CPUs out (libvirt syntax)\n"
            "  --json                   print each plan as one line of JSON\n"
            "  --set SECTION.KEY=VALUE  set one key of vpackd.conf(5), as vpackd's --set\n"
            "                           (repeatable; plan uses the [policy] keys)\n"
            "  -h, --help               show this help\n"
            "\n"
            "Policy options, each short for --set policy.KEY=VALUE (defaults in brackets):\n"
            "  --pack-watermark F       size the active packages for this share of their\n"
            "                           cores [%g]\n"
            "  --spread-watermark F     spread when the load exceeds this share of the\n"
            "                           active cores [%g]\n"
            "  --spread-samples N       ... for this many snapshots in a row [%u]\n"
            "  --delay-threshold F      spread when a managed vCPU waits this share of\n"
            "                           the interval in the run queue [%g]\n"
            "  --busy-vcpu F            a vCPU using this many CPUs is long-running [%g]\n"
            "  --pack-delay MS          pack only after the load stayed low this long [%u]\n"
            "  --min-residency MS       move a domain at most this often, unless\n"
            "                           spreading [%u]\n"
            "  --default-level N        level of domains without a policy (0, 1 or 2) [%d]\n",
            d.pack_watermark, d.spread_watermark, d.spread_samples, d.delay_threshold,
            d.busy_vcpu, d.pack_delay_ms, d.min_residency_ms, d.default_level);
}

/* What one replay needs, and where it is in the file. */
struct replay {
    const char *file; /* the name used in messages */
    const struct vpack_topology *topo;
    const struct vpack_policy_params *params;
    struct vpack_policy_state *state;
    bool json;
    unsigned count;   /* snapshots replayed so far */
};

/*
 * Prints "vpackctl: FILE[:LINE[:COLUMN]]: MESSAGE"; line and column 0 are
 * left out.
 */
static void report(const struct replay *r, unsigned long line, unsigned long col, const char *fmt,
                   ...) __attribute__((format(printf, 4, 5)));
static void report(const struct replay *r, unsigned long line, unsigned long col, const char *fmt,
                   ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (line && col)
        vpackctl_err("%s:%lu:%lu: %s", r->file, line, col, msg);
    else if (line)
        vpackctl_err("%s:%lu: %s", r->file, line, msg);
    else
        vpackctl_err("%s: %s", r->file, msg);
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
            return false;
    return true;
}

/* Offset of the first character that is not blank at or after off. */
static size_t skip_blank(const char *s, size_t n, size_t off)
{
    while (off < n && blank(s + off, 1))
        off++;
    return off;
}

static void print_ids(FILE *f, const int *ids, unsigned n)
{
    if (n == 0)
        fputs("-", f);
    for (unsigned i = 0; i < n; i++)
        fprintf(f, "%s%d", i ? "," : "", ids[i]);
}

/* A mask in libvirt syntax, "*" after it when vpack narrowed it. */
static int print_mask(FILE *f, const struct vpack_plan_thread *t)
{
    char *text;

    if (!t->cpus) {
        fputs("-", f);
        return 0;
    }
    text = vpack_cpuset_format(t->cpus);
    if (!text)
        return -ENOMEM;
    fprintf(f, "%s%s", text, t->restricted ? "*" : "");
    free(text);
    return 0;
}

static bool same_mask(const struct vpack_plan_thread *a, const struct vpack_plan_thread *b)
{
    if (a->restricted != b->restricted || !a->cpus != !b->cpus)
        return false;
    return !a->cpus || vpack_cpuset_equal(a->cpus, b->cpus);
}

/*
 * "0-3 -> 0-7*, 4 -> 2": runs of consecutive ids with the same mask are
 * printed once.
 */
static int print_threads(FILE *f, const struct vpack_plan_thread *t, unsigned n)
{
    unsigned i = 0, j;

    while (i < n) {
        for (j = i; j + 1 < n && t[j + 1].id == t[j].id + 1 && same_mask(&t[j + 1], &t[i]); j++)
            ;
        fprintf(f, "%s%d", i ? ", " : "", t[i].id);
        if (j > i)
            fprintf(f, "-%d", t[j].id);
        fputs(" -> ", f);
        if (print_mask(f, &t[i]) < 0)
            return -ENOMEM;
        i = j + 1;
    }
    return 0;
}

/* The human-readable block for one plan. */
static int print_plan(FILE *f, const struct vpack_plan *p, unsigned index, unsigned long line)
{
    if (index > 1)
        fputc('\n', f);
    fprintf(f, "snapshot %u", index);
    if (line)
        fprintf(f, " (line %lu)", line);
    fputs(": active packages ", f);
    print_ids(f, p->active_packages, p->nactive);
    if (p->wakeup_package >= 0)
        fprintf(f, "; wake-up package %d", p->wakeup_package);
    else
        fputs("; no wake-up package", f);
    fprintf(f, "; demand %.2f CPUs%s\n", p->demand, p->lifted ? "; restrictions lifted" : "");
    fprintf(f, "  plan: %s\n", p->reason ? p->reason : "-");
    for (unsigned i = 0; i < p->ndomains; i++) {
        const struct vpack_plan_domain *d = &p->domains[i];

        fprintf(f, "  %s: level %d, package%s ", d->name ? d->name : "-", d->level,
                d->npackages == 1 ? "" : "s");
        print_ids(f, d->packages, d->npackages);
        fprintf(f, "%s\n", d->moved ? ", moved" : "");
        fprintf(f, "    reason: %s\n", d->reason ? d->reason : "-");
        fputs("    vcpus ", f);
        if (d->nvcpus == 0)
            fputs("-", f);
        if (print_threads(f, d->vcpus, d->nvcpus) < 0)
            return -ENOMEM;
        fputs("; emulator -> ", f);
        if (print_mask(f, &d->emulator) < 0)
            return -ENOMEM;
        if (d->niothreads) {
            fputs("; iothreads ", f);
            if (print_threads(f, d->iothreads, d->niothreads) < 0)
                return -ENOMEM;
        }
        fputc('\n', f);
    }
    return 0;
}

/* Plans one snapshot and prints the plan. Returns 0 or -1 (reported). */
static int replay_one(struct replay *r, const struct vpack_snapshot *snap, unsigned long line)
{
    struct vpack_plan *plan = NULL;
    char *json = NULL;
    int ret, err;

    ret = -1;
    err = vpack_plan_compute(r->topo, r->params, snap, r->state, &plan);
    if (err < 0) {
        report(r, line, 0, "cannot compute a plan: %s", strerror(-err));
        goto cleanup;
    }
    r->count++;
    if (r->json) {
        json = vpack_plan_to_json(plan);
        if (!json) {
            report(r, line, 0, "out of memory");
            goto cleanup;
        }
        puts(json);
    } else if (print_plan(stdout, plan, r->count, line) < 0) {
        report(r, line, 0, "out of memory");
        goto cleanup;
    }
    ret = 0;

cleanup:
    free(json);
    vpack_plan_free(plan);
    return ret;
}

/*
 * Reports why text, the rest of the file from line first_line on, is not
 * one snapshot, if it is not: true then.
 */
static bool whole_error(const struct replay *r, const char *text, size_t len,
                        unsigned long first_line, int err, size_t end, size_t at, const char *msg)
{
    bool trailing = end > 0 && !blank(text + end, len - end);
    unsigned long line = first_line, col = 1;

    if (trailing)
        at = skip_blank(text, len, end);
    if (at == SIZE_MAX) {
        if (err < 0)
            report(r, 0, 0, "%s", msg ? msg : "out of memory");
        return err < 0;
    }
    for (size_t i = 0; i < at; i++) {
        if (text[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    if (trailing)
        report(r, line, col,
               "unexpected data after the snapshot (a series has one snapshot per line)");
    else
        report(r, line, col, "%s", msg ? msg : "out of memory");
    return true;
}

/* Replays line `line` of a series (trace.c's series reader). Returns 0 or -1 (reported). */
static int replay_line(struct replay *r, const char *text, size_t len, unsigned long line)
{
    struct vpack_snapshot *snap = NULL;
    char *msg = NULL;
    size_t col;
    int ret = -1;

    if (vpack_series_parse_line(text, len, "snapshot", "series", &snap, &col, &msg) < 0)
        report(r, line, col, "%s", msg ? msg : "out of memory");
    else
        ret = replay_one(r, snap, line);
    free(msg);
    vpack_snapshot_free(snap);
    return ret;
}

/*
 * Replays text, one snapshot that starts at line first_line and takes the
 * rest of the file (pretty-printed). Returns 0 or -1 (reported).
 */
static int replay_whole(struct replay *r, const char *text, size_t len, unsigned long first_line)
{
    struct vpack_snapshot *snap = NULL;
    char *msg = NULL;
    size_t end, at;
    int ret = -1, err;

    err = vpack_snapshot_parse_first(text, len, &end, &at, &snap, &msg);
    if (!whole_error(r, text, len, first_line, err, end, at, msg))
        ret = replay_one(r, snap, 0);
    free(msg);
    vpack_snapshot_free(snap);
    return ret;
}

/*
 * Replays the file's text (read whole with the adapters' reader). The first
 * line that is not blank decides: if it holds a whole snapshot, the file is
 * a series (one line is a series of one); if its snapshot goes on, the file
 * is one pretty-printed snapshot.
 */
static int replay_file(struct replay *r, const char *text, size_t len)
{
    unsigned long lineno = 0;
    bool first = true;

    for (size_t pos = 0, n; pos < len; pos += n) {
        const char *nl = memchr(text + pos, '\n', len - pos);

        n = nl ? (size_t)(nl - (text + pos)) + 1 : len - pos;
        lineno++;
        if (blank(text + pos, n))
            continue;
        if (first) {
            struct vpack_snapshot *snap = NULL;
            char *msg = NULL;
            size_t end, at;
            int err = vpack_snapshot_parse_first(text + pos, n, &end, &at, &snap, &msg);

            vpack_snapshot_free(snap);
            free(msg);
            first = false;
            if (err == -ENODATA)
                return replay_whole(r, text + pos, len - pos, lineno);
        }
        if (replay_line(r, text + pos, n, lineno) < 0)
            return -1;
    }
    if (r->count == 0) {
        report(r, 0, 0, "no snapshot in the file");
        return -1;
    }
    return 0;
}

enum {
    OPT_SNAPSHOT = 256,
    OPT_TOPOLOGY,
    OPT_RESERVED,
    OPT_JSON,
    OPT_SET,
    /* The policy options, from here on: each is short for --set policy.KEY=VALUE. */
    OPT_PACK_WATERMARK,
    OPT_SPREAD_WATERMARK,
    OPT_SPREAD_SAMPLES,
    OPT_DELAY_THRESHOLD,
    OPT_BUSY_VCPU,
    OPT_PACK_DELAY,
    OPT_MIN_RESIDENCY,
    OPT_DEFAULT_LEVEL,
};

/* The [policy] key of each policy option. */
static const char *const policy_key[] = {
    [OPT_PACK_WATERMARK - OPT_PACK_WATERMARK] = "pack_watermark",
    [OPT_SPREAD_WATERMARK - OPT_PACK_WATERMARK] = "spread_watermark",
    [OPT_SPREAD_SAMPLES - OPT_PACK_WATERMARK] = "spread_samples",
    [OPT_DELAY_THRESHOLD - OPT_PACK_WATERMARK] = "delay_threshold",
    [OPT_BUSY_VCPU - OPT_PACK_WATERMARK] = "busy_vcpu",
    [OPT_PACK_DELAY - OPT_PACK_WATERMARK] = "pack_delay_ms",
    [OPT_MIN_RESIDENCY - OPT_PACK_WATERMARK] = "min_residency_ms",
    [OPT_DEFAULT_LEVEL - OPT_PACK_WATERMARK] = "default_level",
};

/* What plan's command line says. */
struct plan_args {
    const char *snapshot, *spec, *reserved;
    bool json;
    char **sets; /* each --set and policy option as "SECTION.KEY=VALUE", in order (owned) */
    unsigned nsets;
    struct vpack_policy_params params;
};

static void plan_args_clear(struct plan_args *pa)
{
    for (unsigned i = 0; i < pa->nsets; i++)
        free(pa->sets[i]);
    free(pa->sets);
    pa->sets = NULL;
    pa->nsets = 0;
}

/*
 * The policy from the --set options and the policy options, in their order,
 * through the configuration's own parser and check (vpack_config_load(), as
 * vpackd and simulate). Returns VPACKCTL_PROCEED or the exit code (reported).
 */
static int load_policy(struct plan_args *pa)
{
    struct vpack_config conf;
    char *err = NULL;

    if (vpack_config_load(&conf, NULL, "plan", pa->sets, pa->nsets, NULL, &err) < 0) {
        vpackctl_err("plan: %s", err ? err : "out of memory");
        free(err);
        return err ? VPACKCTL_EXIT_USAGE : VPACKCTL_EXIT_FAIL;
    }
    pa->params = conf.policy;
    vpack_config_clear(&conf);
    return VPACKCTL_PROCEED;
}

/*
 * Reads the command line into *pa (plan_args_clear() it). Returns
 * VPACKCTL_PROCEED, or the exit code (after the usage for --help, or one
 * line on stderr).
 */
static int parse_args(int argc, char **argv, struct plan_args *pa)
{
    /* A getopt table: its rows look alike because they are one kind of data. */
    static const struct option options[] = {
        {"snapshot", required_argument, NULL, OPT_SNAPSHOT},
        {"topology", required_argument, NULL, OPT_TOPOLOGY},
        {"reserved", required_argument, NULL, OPT_RESERVED},
        {"json", no_argument, NULL, OPT_JSON},
        {"set", required_argument, NULL, OPT_SET},
        {"pack-watermark", required_argument, NULL, OPT_PACK_WATERMARK},
        {"spread-watermark", required_argument, NULL, OPT_SPREAD_WATERMARK},
        {"spread-samples", required_argument, NULL, OPT_SPREAD_SAMPLES},
        {"delay-threshold", required_argument, NULL, OPT_DELAY_THRESHOLD},
        {"busy-vcpu", required_argument, NULL, OPT_BUSY_VCPU},
        {"pack-delay", required_argument, NULL, OPT_PACK_DELAY},
        {"min-residency", required_argument, NULL, OPT_MIN_RESIDENCY},
        {"default-level", required_argument, NULL, OPT_DEFAULT_LEVEL},
        VPACKCTL_OPTIONS_END,
    };
    struct vpackctl_getopt g = {.cmd = "plan", .usage = usage, .options = options};
    int c;

    *pa = (struct plan_args){0};
    /* Every setting is an argument of its own: argc bounds their number. */
    if (!(pa->sets = calloc((size_t)argc, sizeof(*pa->sets)))) {
        vpackctl_err("plan: out of memory");
        return VPACKCTL_EXIT_FAIL;
    }
    /* The getopt loop: alike in shape on purpose (vpackctl.h, struct vpackctl_getopt). */
    while ((c = vpackctl_getopt(&g, argc, argv)) >= 0) {
        if (c == OPT_SNAPSHOT)
            pa->snapshot = optarg;
        else if (c == OPT_TOPOLOGY)
            pa->spec = optarg;
        else if (c == OPT_RESERVED)
            pa->reserved = optarg;
        else if (c == OPT_JSON)
            pa->json = true;
        else if ((c == OPT_SET && !(pa->sets[pa->nsets] = strdup(optarg))) ||
                 (c >= OPT_PACK_WATERMARK &&
                  asprintf(&pa->sets[pa->nsets], "policy.%s=%s",
                           policy_key[c - OPT_PACK_WATERMARK], optarg) < 0)) {
            pa->sets[pa->nsets] = NULL;
            vpackctl_err("plan: out of memory");
            return VPACKCTL_EXIT_FAIL;
        } else {
            pa->nsets++;
        }
    }
    if (c == VPACKCTL_OPT_EXIT)
        return g.exit_code;
    if (optind < argc) {
        vpackctl_err("plan: unexpected argument '%s' (see 'vpackctl plan --help')", argv[optind]);
        return VPACKCTL_EXIT_USAGE;
    }
    if (!pa->snapshot) {
        vpackctl_err("plan: --snapshot FILE is required (see 'vpackctl plan --help')");
        return VPACKCTL_EXIT_USAGE;
    }
    return load_policy(pa);
}

int plan_main(int argc, char **argv)
{
    struct plan_args pa;
    struct replay r = {0};
    struct vpack_topology *topo = NULL;
    char *text = NULL;
    size_t len = 0;
    int ret, err;

    ret = parse_args(argc, argv, &pa);
    plan_args_clear(&pa);
    if (ret != VPACKCTL_PROCEED)
        return ret;
    /* A bad --reserved is a usage error, found before the file is opened. */
    if ((ret = vpackctl_load_topology("plan", pa.spec, pa.reserved, &topo)))
        return ret;
    ret = VPACKCTL_EXIT_FAIL;
    r.file = strcmp(pa.snapshot, "-") ? pa.snapshot : "<stdin>";
    err = strcmp(pa.snapshot, "-")
              ? vpack_host_read_file(NULL, pa.snapshot, SIZE_MAX - 1, &text, &len)
              : vpack_host_read_fd(STDIN_FILENO, SIZE_MAX - 1, &text, &len);
    if (err < 0) {
        vpackctl_err("%s: %s", r.file, strerror(-err));
        goto cleanup;
    }
    r.topo = topo;
    r.params = &pa.params;
    r.json = pa.json;
    r.state = vpack_policy_state_new();
    if (!r.state) {
        vpackctl_err("plan: out of memory");
        goto cleanup;
    }
    if (replay_file(&r, text, len) < 0)
        goto cleanup;
    ret = vpackctl_flush();

cleanup:
    free(text);
    vpack_policy_state_free(r.state);
    vpack_topology_free(topo);
    return ret;
}
