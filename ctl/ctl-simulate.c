// SPDX-License-Identifier: MIT
/*
 * vpackctl simulate: replays a trace (a file, or one built from PlanetLab VM
 * traces) through the host model (lib/model.c) at levels 0, 1 and 2, next to
 * the oracles (lib/oracle.c), and prints what vpack would save.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "host.h"
#include "vpack/config.h"
#include "vpack/json-util.h"
#include "vpack/model.h"
#include "vpack/oracle.h"
#include "vpack/policy.h"
#include "vpack/topology.h"
#include "vpack/trace.h"
#include "vpackctl.h"

#define NLEVELS 3
/* Traces of at most this many domains get their placement in the text output. */
#define PLACEMENT_DOMAINS 8
/* Columns of the SVG timeline at most. */
#define SVG_COLUMNS 1000

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: vpackctl simulate --trace FILE [OPTIONS]\n"
            "       vpackctl simulate --planetlab DIR --vms N [--seed S] [--burst SIGMA]\n"
            "                         [--hold] [OPTIONS]\n"
            "\n"
            "Replay a trace through the host model with the policy at levels 0, 1 and 2\n"
            "and print, side by side: each package's whole-idle share, the modelled\n"
            "energy and the saving against level 0, the share of the demanded work\n"
            "served, the p99 vCPU run-queue delay, moves per hour, awake package-\n"
            "seconds, and the package-seconds with work against two oracles: the\n"
            "capacity bound (the fewest packages whose full capacity holds the demand\n"
            "with every pin and bound kept: no level that serves its demand goes\n"
            "below it) and the policy target (the same at the pack watermark). See\n"
            "vpackctl(1), SIMULATE.\n"
            "\n"
            "Options:\n"
            "  --trace FILE        a trace: JSON lines, one interval each ('-': stdin)\n"
            "  --planetlab DIR     build the trace from PlanetLab VM traces in DIR\n"
            "  --vms N             ... from N files picked with the seed\n"
            "  --seed S            ... the seed (default 1)\n"
            "  --burst SIGMA       ... log-normal burst on each VM's demand (default 0)\n"
            "  --hold              ... hold readings instead of interpolating\n"
            "  --interval-ms MS    ... the trace's interval (default 1000)\n"
            "  --hours H           stop after H hours of trace\n"
            "  --write-trace FILE  also write the trace replayed, as JSON lines\n"
            "  --topology SPEC     host (the default), xml:PATH, synthetic:DESC, sysfs:ROOT\n"
            "  --reserved CPUS     leave these CPUs out (libvirt syntax)\n"
            "  --config FILE       take the [policy] keys (and [agent] topology,\n"
            "                      reserved_cpus and smoothing) from vpackd's\n"
            "                      configuration file\n"
            "  --set SECTION.KEY=VALUE\n"
            "                      override one configuration key, as vpackd's --set\n"
            "                      (repeatable; applied after --config)\n"
            "  --power FILE        the power model (default: built in, as in\n"
            "                      data/power-model.ini)\n"
            "  --pin-cost MS       CPU time each pin operation costs the host outside\n"
            "                      the guests (default: 2.16, measured; 0 to 1000)\n"
            "  --host-burst CPUS:EVERY\n"
            "                      one interval in every EVERY, load of CPUS CPUs from\n"
            "                      outside the guests, spread over every usable CPU\n"
            "  --json              print the figures as one JSON object\n"
            "  --svg FILE          draw the level 2 timeline: demand, active packages,\n"
            "                      capacity bound, wake-up package\n"
            "  -h, --help          show this help\n");
}

enum {
    OPT_TRACE = 256,
    OPT_PLANETLAB,
    OPT_VMS,
    OPT_SEED,
    OPT_BURST,
    OPT_HOLD,
    OPT_INTERVAL,
    OPT_HOURS,
    OPT_WRITE,
    OPT_TOPOLOGY,
    OPT_RESERVED,
    OPT_POWER,
    OPT_CONFIG,
    OPT_SET,
    OPT_JSON,
    OPT_SVG,
    OPT_PIN_COST,
    OPT_HOST_BURST,
};

struct sim_args {
    const char *trace, *planetlab, *write, *spec, *reserved, *power, *svg, *config;
    char **sets; /* --set, in order: pointers into argv */
    unsigned nsets;
    unsigned vms, interval_ms;
    unsigned long long seed;
    double burst, hours;
    bool hold, json;
    bool have_pin_cost;
    double pin_cost;         /* --pin-cost, ms */
    double host_burst;       /* --host-burst CPUS, or 0 */
    unsigned host_every;     /* ... EVERY intervals */
};

/* Where the intervals come from. */
struct source {
    FILE *f;                 /* a trace file, or NULL */
    const char *name;
    char *line;
    size_t cap;
    unsigned long lineno;
    struct vpack_planetlab pl;
    unsigned long k, nintervals;
};

/* One point of the timeline (level 2). */
struct point {
    float demand;
    unsigned short active, bound; /* packages with work (level 2); the capacity bound */
    short wakeup;
};

/* One oracle (include/vpack/oracle.h) over the whole trace. */
struct oracle {
    double *cap;            /* per package */
    double package_s;       /* its count times each interval's length, summed */
    bool exact;             /* every interval's count was the minimum */
};

struct sim {
    const struct vpack_topology *topo;
    struct vpack_model *model[NLEVELS];
    struct oracle bound, target; /* the capacity bound, the policy target */
    double seconds;
    /* Per level: intervals with fewer packages with work than the bound, and
     * of those, intervals where the level served all its demand (a bug). */
    unsigned long under_bound[NLEVELS], under_bound_served[NLEVELS];
    unsigned long ndomains; /* most domains in one interval */
    enum vpack_pc6_scope pc6_scope; /* the power model's */
    double idle_w, deep_w;          /* ... for the idle_w sensitivity */
    double host_burst;      /* --host-burst: CPUs, every host_every intervals */
    unsigned host_every;
    unsigned long nsteps;
    struct point *tl;
    unsigned long ntl, captl;
    FILE *write;
};

static int parse_number(const char *opt, const char *text, double min, double max, double *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(text, &end);
    if (end == text || *end || errno || !isfinite(v) || v < min || v > max) {
        vpackctl_err("simulate: --%s '%s': expected a number from %g to %g", opt, text, min, max);
        return -EINVAL;
    }
    *out = v;
    return 0;
}

/* --host-burst CPUS:EVERY. Returns 0 or -EINVAL (reported). */
static int parse_host_burst(const char *text, struct sim_args *a)
{
    const char *colon = strchr(text, ':');
    char cpus[64];
    double every;

    if (!colon || (size_t)(colon - text) >= sizeof(cpus)) {
        vpackctl_err("simulate: --host-burst '%s': expected CPUS:EVERY, such as 1.5:20", text);
        return -EINVAL;
    }
    memcpy(cpus, text, (size_t)(colon - text));
    cpus[colon - text] = '\0';
    if (parse_number("host-burst", cpus, 0, 100000, &a->host_burst) < 0 ||
        parse_number("host-burst", colon + 1, 1, 1e9, &every) < 0)
        return -EINVAL;
    if (every != floor(every)) {
        vpackctl_err("simulate: --host-burst '%s': EVERY is a whole number of intervals", text);
        return -EINVAL;
    }
    a->host_every = (unsigned)every;
    return 0;
}

static int parse_args(int argc, char **argv, struct sim_args *a)
{
    static const struct option options[] = {
        {"trace", required_argument, NULL, OPT_TRACE},
        {"planetlab", required_argument, NULL, OPT_PLANETLAB},
        {"vms", required_argument, NULL, OPT_VMS},
        {"seed", required_argument, NULL, OPT_SEED},
        {"burst", required_argument, NULL, OPT_BURST},
        {"hold", no_argument, NULL, OPT_HOLD},
        {"interval-ms", required_argument, NULL, OPT_INTERVAL},
        {"hours", required_argument, NULL, OPT_HOURS},
        {"write-trace", required_argument, NULL, OPT_WRITE},
        {"topology", required_argument, NULL, OPT_TOPOLOGY},
        {"reserved", required_argument, NULL, OPT_RESERVED},
        {"power", required_argument, NULL, OPT_POWER},
        {"config", required_argument, NULL, OPT_CONFIG},
        {"set", required_argument, NULL, OPT_SET},
        {"json", no_argument, NULL, OPT_JSON},
        {"svg", required_argument, NULL, OPT_SVG},
        {"pin-cost", required_argument, NULL, OPT_PIN_COST},
        {"host-burst", required_argument, NULL, OPT_HOST_BURST},
        VPACKCTL_OPTIONS_END,
    };
    struct vpackctl_getopt g = {.cmd = "simulate", .usage = usage, .options = options};
    double v;
    int c;

    *a = (struct sim_args){.interval_ms = 1000, .seed = 1};
    /* Every --set is an argument of its own: argc bounds their number. */
    a->sets = calloc((size_t)argc, sizeof(*a->sets));
    if (!a->sets) {
        vpackctl_err("simulate: out of memory");
        return VPACKCTL_EXIT_FAIL;
    }
    while ((c = vpackctl_getopt(&g, argc, argv)) >= 0) {
        int err = 0;

        if (c == OPT_TRACE)
            a->trace = optarg;
        else if (c == OPT_PLANETLAB)
            a->planetlab = optarg;
        else if (c == OPT_VMS && !(err = parse_number(g.option, optarg, 1, 100000, &v)))
            a->vms = (unsigned)v;
        else if (c == OPT_SEED && !(err = parse_number(g.option, optarg, 0, 1e15, &v)))
            a->seed = (unsigned long long)v;
        else if (c == OPT_BURST)
            err = parse_number(g.option, optarg, 0, 3, &a->burst);
        else if (c == OPT_HOLD)
            a->hold = true;
        else if (c == OPT_INTERVAL && !(err = parse_number(g.option, optarg, 100, 3600000, &v)))
            a->interval_ms = (unsigned)v;
        else if (c == OPT_HOURS)
            err = parse_number(g.option, optarg, 0.001, 100000, &a->hours);
        else if (c == OPT_WRITE)
            a->write = optarg;
        else if (c == OPT_TOPOLOGY)
            a->spec = optarg;
        else if (c == OPT_RESERVED)
            a->reserved = optarg;
        else if (c == OPT_POWER)
            a->power = optarg;
        else if (c == OPT_CONFIG)
            a->config = optarg;
        else if (c == OPT_SET)
            a->sets[a->nsets++] = optarg;
        else if (c == OPT_JSON)
            a->json = true;
        else if (c == OPT_SVG)
            a->svg = optarg;
        else if (c == OPT_PIN_COST) {
            err = parse_number(g.option, optarg, 0, 1000, &a->pin_cost);
            a->have_pin_cost = true;
        } else if (c == OPT_HOST_BURST)
            err = parse_host_burst(optarg, a);
        if (err < 0)
            return VPACKCTL_EXIT_USAGE;
    }
    if (c == VPACKCTL_OPT_EXIT)
        return g.exit_code;
    if (optind < argc) {
        vpackctl_err("simulate: unexpected argument '%s' (see 'vpackctl simulate --help')",
                     argv[optind]);
        return VPACKCTL_EXIT_USAGE;
    }
    if (!a->trace == !a->planetlab) {
        vpackctl_err("simulate: give one of --trace FILE and --planetlab DIR "
                     "(see 'vpackctl simulate --help')");
        return VPACKCTL_EXIT_USAGE;
    }
    if (a->planetlab && !a->vms) {
        vpackctl_err("simulate: --planetlab needs --vms N");
        return VPACKCTL_EXIT_USAGE;
    }
    return VPACKCTL_PROCEED;
}

/*
 * The whole of file path into *buf (NUL-terminated, at most 64 MiB), read
 * with the adapters' reader as every whole file is; its length, or -1
 * after a message.
 */
static long read_whole(const char *path, char **buf)
{
    size_t len;
    int r = vpack_host_read_file(NULL, path, (64u << 20) - 1, buf, &len);

    if (r < 0) {
        *buf = NULL;
        vpackctl_err("simulate: %s: %s", path, r == -EFBIG ? "larger than 64 MiB" : strerror(-r));
        return -1;
    }
    return (long)len;
}

static int regular_file(const struct dirent *e)
{
    return e->d_name[0] != '.' && (e->d_type == DT_REG || e->d_type == DT_UNKNOWN);
}

/* Reads the picked PlanetLab files of a->planetlab into s->pl. Returns 0 or -1 (reported). */
static int planetlab_load(const struct sim_args *a, struct source *s)
{
    struct dirent **list = NULL;
    unsigned *idx = NULL;
    int n, ret = -1;

    n = scandir(a->planetlab, &list, regular_file, alphasort);
    if (n < 0) {
        vpackctl_err("simulate: %s: %s", a->planetlab, strerror(errno));
        return -1;
    }
    if ((unsigned)n < a->vms) {
        vpackctl_err("simulate: %s has %d files, fewer than --vms %u", a->planetlab, n, a->vms);
        goto cleanup;
    }
    idx = malloc(a->vms * sizeof(*idx));
    s->pl.vms = calloc(a->vms, sizeof(*s->pl.vms));
    if (!idx || !s->pl.vms) {
        vpackctl_err("simulate: out of memory");
        goto cleanup;
    }
    vpack_planetlab_pick((unsigned)n, a->vms, a->seed, idx);
    for (unsigned v = 0; v < a->vms; v++) {
        struct vpack_planetlab_vm *vm = &s->pl.vms[v];
        char path[PATH_MAX], *buf = NULL, *err = NULL;
        int r;

        snprintf(path, sizeof(path), "%s/%s", a->planetlab, list[idx[v]]->d_name);
        if (read_whole(path, &buf) < 0)
            goto cleanup;
        r = vpack_planetlab_parse(buf, strlen(buf), &vm->pct, &err);
        free(buf);
        if (r < 0) {
            vpackctl_err("simulate: %s: %s", path, err ? err : "out of memory");
            free(err);
            goto cleanup;
        }
        s->pl.nvms = v + 1;
        vm->nreadings = (unsigned)r;
        vm->nvcpus = vpack_planetlab_vcpus(a->seed, v);
        vm->name = strdup(list[idx[v]]->d_name);
        if (!vm->name) {
            vpackctl_err("simulate: out of memory");
            goto cleanup;
        }
    }
    s->pl.interval_ms = a->interval_ms;
    s->pl.reading_ms = 300000;
    s->pl.burst = a->burst;
    s->pl.interpolate = !a->hold;
    s->pl.level = 2;
    s->pl.seed = a->seed;
    s->nintervals = vpack_planetlab_intervals(&s->pl);
    ret = 0;

cleanup:
    for (int i = 0; i < n; i++)
        free(list[i]);
    free(list);
    free(idx);
    return ret;
}

/* The next interval: 1 with *snap, 0 at the end, -1 after a message. */
static int source_next(struct source *s, struct vpack_snapshot **snap)
{
    *snap = NULL;
    if (!s->f) {
        if (s->k >= s->nintervals)
            return 0;
        if (vpack_planetlab_snapshot(&s->pl, s->k++, snap) < 0) {
            vpackctl_err("simulate: out of memory");
            return -1;
        }
        return 1;
    }
    for (;;) {
        ssize_t n = getline(&s->line, &s->cap, s->f);
        char *err = NULL;
        int r;

        if (n < 0) {
            if (ferror(s->f)) {
                vpackctl_err("simulate: %s: cannot read: %s", s->name, strerror(errno));
                return -1;
            }
            return 0;
        }
        s->lineno++;
        r = vpack_trace_parse_line(s->line, (size_t)n, s->lineno, snap, &err);
        if (r == -ENODATA)
            continue;
        if (r < 0) {
            vpackctl_err("simulate: %s: %s", s->name, err ? err : "out of memory");
            free(err);
            return -1;
        }
        return 1;
    }
}

static int timeline_add(struct sim *sim, const struct point *p)
{
    if (sim->ntl == sim->captl) {
        unsigned long nc = sim->captl ? sim->captl * 2 : 4096;
        struct point *np = realloc(sim->tl, nc * sizeof(*np));
        if (!np)
            return -ENOMEM;
        sim->tl = np;
        sim->captl = nc;
    }
    sim->tl[sim->ntl++] = *p;
    return 0;
}

/* Writes snap as a line of the trace being written. Returns 0 or -1 (reported). */
static int write_interval(struct sim *sim, const char *path, const struct vpack_snapshot *snap)
{
    char *json = vpack_snapshot_to_json(snap);

    if (!json) {
        vpackctl_err("simulate: out of memory");
        return -1;
    }
    if (fputs(json, sim->write) < 0 || fputc('\n', sim->write) < 0) {
        vpackctl_err("simulate: %s: %s", path, strerror(errno));
        free(json);
        return -1;
    }
    free(json);
    return 0;
}

/* Adds snap's count of oracle o; *k gets it. Returns 0 or -1 (reported). */
static int oracle_add(struct sim *sim, struct oracle *o, const struct vpack_snapshot *snap, int *k)
{
    bool exact;

    *k = vpack_oracle_packages(sim->topo, o->cap, snap, &exact);
    if (*k < 0) {
        vpackctl_err("simulate: out of memory");
        return -1;
    }
    o->package_s += *k * (snap->interval_ms / 1000.0);
    o->exact = o->exact && exact;
    return 0;
}

/* One interval through the three models and the oracles. Returns 0 or -1 (reported). */
static int step(struct sim *sim, const struct vpack_snapshot *snap, const char *where,
                unsigned long at)
{
    struct vpack_model_interval iv;
    struct point p = {0};
    int bound, target;

    /* The burst ends each period of host_every intervals. */
    bool burst = sim->host_every && sim->host_burst > 0 &&
                 ++sim->nsteps % sim->host_every == 0;

    if (oracle_add(sim, &sim->bound, snap, &bound) < 0 ||
        oracle_add(sim, &sim->target, snap, &target) < 0)
        return -1;
    for (int l = 0; l < NLEVELS; l++) {
        char *err = NULL;
        int r = burst ? vpack_model_add_foreign(sim->model[l], -1, sim->host_burst) : 0;

        if (r == 0)
            r = vpack_model_step(sim->model[l], snap, &iv, &err);

        if (r < 0) {
            vpackctl_err("simulate: %s: interval %lu: %s", where, at,
                         err ? err : "out of memory");
            free(err);
            return -1;
        }
        if (iv.nworking < (unsigned)bound) {
            sim->under_bound[l]++;
            if (iv.served >= iv.demand - 1e-9)
                sim->under_bound_served[l]++;
        }
        if (l == NLEVELS - 1) {
            p.demand = (float)iv.demand;
            p.active = (unsigned short)iv.nworking;
            p.wakeup = (short)(iv.wakeup_package < SHRT_MAX ? iv.wakeup_package : -1);
        }
    }
    sim->seconds += snap->interval_ms / 1000.0;
    p.bound = (unsigned short)bound;
    if (snap->ndomains > sim->ndomains)
        sim->ndomains = snap->ndomains;
    if (timeline_add(sim, &p) < 0) {
        vpackctl_err("simulate: out of memory");
        return -1;
    }
    return 0;
}

/* Runs every interval of src (up to max_s seconds, 0: all). Returns 0 or -1 (reported). */
static int run(struct sim *sim, struct source *src, double max_s, const char *write_path)
{
    double seconds = 0;

    sim->bound.exact = sim->target.exact = true;
    for (;;) {
        struct vpack_snapshot *snap = NULL;
        int r;

        if (max_s > 0 && seconds >= max_s - 1e-9)
            break;
        r = source_next(src, &snap);
        if (r <= 0)
            return r;
        seconds += snap->interval_ms / 1000.0;
        if ((sim->write && write_interval(sim, write_path, snap) < 0) ||
            step(sim, snap, src->name,
                 src->f ? src->lineno : src->k) < 0) {
            vpack_snapshot_free(snap);
            return -1;
        }
        vpack_snapshot_free(snap);
    }
    return 0;
}

/* The figures of one level. */
struct figures {
    struct vpack_model_totals t;
    double kwh, saving, served_ratio, moves_per_hour;
    double awake_pkg_s;          /* sum over packages of the time not whole-idle */
    double saving_scope[VPACK_PC6_SCOPES]; /* against level 0, under each deep-state scope */
    double saving_idle_deep;     /* ... under the power model's scope, with idle_w = deep_w */
    double vs_bound, vs_target;  /* package-seconds with work against each oracle */
};

/* Energy under the power model's scope had a whole-idle package outside the deep state drawn deep_w. */
static double energy_idle_deep(const struct sim *sim, const struct vpack_model_totals *t)
{
    return t->energy_scope_j[sim->pc6_scope] -
           (sim->idle_w - sim->deep_w) * t->shallow_pkg_s[sim->pc6_scope];
}

static void figures_of(const struct sim *sim, struct figures *f)
{
    for (int l = 0; l < NLEVELS; l++) {
        struct figures *x = &f[l];

        vpack_model_totals(sim->model[l], &x->t);
        x->kwh = x->t.energy_j / 3.6e6;
        x->saving = f[0].t.energy_j > 0 ? 1 - x->t.energy_j / f[0].t.energy_j : 0;
        for (unsigned s = 0; s < VPACK_PC6_SCOPES; s++)
            x->saving_scope[s] = f[0].t.energy_scope_j[s] > 0
                                     ? 1 - x->t.energy_scope_j[s] / f[0].t.energy_scope_j[s]
                                     : 0;
        x->saving_idle_deep = energy_idle_deep(sim, &f[0].t) > 0
                                  ? 1 - energy_idle_deep(sim, &x->t) / energy_idle_deep(sim, &f[0].t)
                                  : 0;
        x->served_ratio = x->t.demand > 0 ? x->t.served / x->t.demand : 1;
        x->moves_per_hour = x->t.seconds > 0 ? x->t.moves / (x->t.seconds / 3600) : 0;
        x->awake_pkg_s = 0;
        for (unsigned p = 0; p < x->t.npackages; p++)
            x->awake_pkg_s += x->t.seconds - x->t.pkg_idle_s[p];
        x->vs_bound = sim->bound.package_s > 0 ? x->t.active_pkg_s / sim->bound.package_s - 1 : 0;
        x->vs_target =
            sim->target.package_s > 0 ? x->t.active_pkg_s / sim->target.package_s - 1 : 0;
    }
}

/* What a row of the table shows. */
enum row {
    ROW_KWH,
    ROW_SAVING,
    ROW_SERVED,
    ROW_DELAY,
    ROW_MOVES,
    ROW_PINS,
    ROW_PIN_CPU,
    ROW_ACTIVE,
    ROW_AWAKE,
    ROW_BOUND,
    ROW_TARGET,
};

static void print_row(const char *label, const struct figures *f, enum row what)
{
    printf("%-26s", label);
    for (int l = 0; l < NLEVELS; l++) {
        const struct figures *x = &f[l];
        char cell[64];

        switch (what) {
        case ROW_KWH:
            snprintf(cell, sizeof(cell), "%.4f", x->kwh);
            break;
        case ROW_SAVING:
            snprintf(cell, sizeof(cell), "%.1f%%", x->saving * 100);
            break;
        case ROW_SERVED:
            snprintf(cell, sizeof(cell), "%.4f", x->served_ratio);
            break;
        case ROW_DELAY:
            snprintf(cell, sizeof(cell), "%.2f%%", x->t.delay_p99 * 100);
            break;
        case ROW_MOVES:
            snprintf(cell, sizeof(cell), "%.1f", x->moves_per_hour);
            break;
        case ROW_PINS:
            snprintf(cell, sizeof(cell), "%lu", x->t.pin_ops);
            break;
        case ROW_PIN_CPU:
            snprintf(cell, sizeof(cell), "%.2f", x->t.pin_cpu_s);
            break;
        case ROW_ACTIVE:
            snprintf(cell, sizeof(cell), "%.0f", x->t.active_pkg_s);
            break;
        case ROW_AWAKE:
            snprintf(cell, sizeof(cell), "%.0f", x->awake_pkg_s);
            break;
        case ROW_BOUND:
            snprintf(cell, sizeof(cell), "%+.1f%%", x->vs_bound * 100);
            break;
        default:
            snprintf(cell, sizeof(cell), "%+.1f%%", x->vs_target * 100);
            break;
        }
        printf(" %12s", cell);
    }
    putchar('\n');
}

/* Where thread k of the model's i-th domain ended up, as a CPU list in *buf. */
static int thread_cpus_text(const struct vpack_model *m, unsigned i, unsigned k, char *buf,
                            size_t len)
{
    vpack_cpuset cpus;
    int nv = vpack_model_thread_cpus(m, i, k, &cpus);

    if (nv >= 0)
        vpack_cpuset_format_buf(&cpus, buf, len);
    return nv;
}

/* "vcpu0=0 vcpu1=0-1 emulator=0 iothread1=1" for the model's i-th domain. */
static void placement_line(const struct vpack_model *m, unsigned i, char *buf, size_t len)
{
    size_t used = 0;
    char cpus[256];
    int nv;

    buf[0] = '\0';
    for (unsigned k = 0; used < len && (nv = thread_cpus_text(m, i, k, cpus, sizeof(cpus))) >= 0;
         k++) {
        int n;

        if (k < (unsigned)nv)
            n = snprintf(buf + used, len - used, "%svcpu%u=%s", k ? " " : "", k, cpus);
        else if (k == (unsigned)nv)
            n = snprintf(buf + used, len - used, " emulator=%s", cpus);
        else
            n = snprintf(buf + used, len - used, " iothread%u=%s", k - (unsigned)nv, cpus);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

static int print_text(const struct sim *sim, const struct figures *f)
{
    const struct vpack_topology *t = sim->topo;

    printf("%lu intervals (%.2f h), up to %lu domains, on %s (%u packages)\n\n",
           f[0].t.intervals, f[0].t.seconds / 3600, sim->ndomains,
           t->source ? t->source : "host", t->npackages);
    printf("%-26s %12s %12s %12s\n", "", "level 0", "level 1", "level 2");
    for (unsigned p = 0; p < t->npackages; p++) {
        char label[64];

        snprintf(label, sizeof(label), "package %d whole-idle", t->packages[p].id);
        printf("%-26s", label);
        for (int l = 0; l < NLEVELS; l++) {
            char cell[32];
            snprintf(cell, sizeof(cell), "%.1f%%",
                     f[l].t.seconds > 0 ? 100 * f[l].t.pkg_idle_s[p] / f[l].t.seconds : 0);
            printf(" %12s", cell);
        }
        putchar('\n');
    }
    print_row("energy (kWh)", f, ROW_KWH);
    print_row("saving vs level 0", f, ROW_SAVING);
    /* The same run with the deep package C-state held elsewhere (sensitivity). */
    for (unsigned s = 0; s < VPACK_PC6_SCOPES; s++) {
        char label[64];

        snprintf(label, sizeof(label), "  ... PC6 scope %s%s", vpack_pc6_scope_name(s),
                 s == sim->pc6_scope ? "*" : "");
        printf("%-26s", label);
        for (int l = 0; l < NLEVELS; l++) {
            char cell[32];
            snprintf(cell, sizeof(cell), "%.1f%%", f[l].saving_scope[s] * 100);
            printf(" %12s", cell);
        }
        putchar('\n');
    }
    printf("%-26s", "  ... idle_w as deep_w");
    for (int l = 0; l < NLEVELS; l++) {
        char cell[32];
        snprintf(cell, sizeof(cell), "%.1f%%", f[l].saving_idle_deep * 100);
        printf(" %12s", cell);
    }
    putchar('\n');
    print_row("served work ratio", f, ROW_SERVED);
    print_row("p99 vCPU delay", f, ROW_DELAY);
    print_row("moves per hour", f, ROW_MOVES);
    print_row("pin operations", f, ROW_PINS);
    print_row("pin CPU-seconds", f, ROW_PIN_CPU);
    print_row("awake package-seconds", f, ROW_AWAKE);
    print_row("package-seconds with work", f, ROW_ACTIVE);
    print_row("vs capacity bound", f, ROW_BOUND);
    print_row("vs policy target", f, ROW_TARGET);
    printf("%-26s", "intervals under the bound");
    for (int l = 0; l < NLEVELS; l++)
        printf(" %12lu", sim->under_bound[l]);
    putchar('\n');
    printf("%-26s %12.0f (%s)\n", "capacity bound pkg-s", sim->bound.package_s,
           sim->bound.exact ? "exact" : "lower bound");
    printf("%-26s %12.0f (%s)\n", "policy target pkg-s", sim->target.package_s,
           sim->target.exact ? "exact" : "lower bound");
    if (f[0].t.foreign_s > 0)
        printf("%-26s %12.1f (--host-burst)\n", "CPU-seconds outside guests", f[0].t.foreign_s);
    /* Where each thread ended up, for a trace small enough to read. */
    if (sim->ndomains <= PLACEMENT_DOMAINS) {
        const struct vpack_model_domain *d;

        printf("\nplacement at the end:\n");
        for (int l = 0; l < NLEVELS; l++) {
            printf("  level %d:", l);
            for (unsigned i = 0; (d = vpack_model_domain_get(sim->model[l], i)); i++) {
                char line[1024];

                placement_line(sim->model[l], i, line, sizeof(line));
                printf("%s %s: %s", i ? ";" : "", d->name, line);
            }
            putchar('\n');
        }
    }
    return vpackctl_flush();
}

/* Per domain of a model: where its threads ended up, as JSON. */
static struct json_object *placement_json(const struct vpack_model *m, bool *ok)
{
    struct json_object *doms = json_object_new_array();
    const struct vpack_model_domain *d;

    for (unsigned i = 0; (d = vpack_model_domain_get(m, i)); i++) {
        struct json_object *o = json_object_new_object(), *vcpus = json_object_new_array(),
                           *io = json_object_new_array();
        vpack_cpuset cpus;
        int nv;

        vpack_json_set_str(o, "name", d->name, ok);
        for (unsigned k = 0; (nv = vpack_model_thread_cpus(m, i, k, &cpus)) >= 0; k++) {
            if (k == (unsigned)nv)
                vpack_json_set_cpuset(o, "emulator", &cpus, ok);
            else
                vpack_json_append(k < (unsigned)nv ? vcpus : io, vpack_json_cpuset(&cpus), ok);
        }
        vpack_json_set(o, "vcpus", vcpus, ok);
        vpack_json_set(o, "iothreads", io, ok);
        vpack_json_append(doms, vpack_json_finish(o, *ok), ok);
    }
    return doms;
}

/* {"package": {"energy_j", "saving"}, "system": ..., "none": ...} of one level. */
static struct json_object *scope_json(const struct figures *x, bool *ok)
{
    struct json_object *o = json_object_new_object();

    for (unsigned s = 0; s < VPACK_PC6_SCOPES; s++) {
        struct json_object *e = json_object_new_object();

        vpack_json_set_double(e, "energy_j", x->t.energy_scope_j[s], ok);
        vpack_json_set_double(e, "saving", x->saving_scope[s], ok);
        vpack_json_set(o, vpack_pc6_scope_name(s), vpack_json_finish(e, *ok), ok);
    }
    return vpack_json_finish(o, *ok);
}

static struct json_object *oracle_json(const struct oracle *x, bool *ok)
{
    struct json_object *o = json_object_new_object();

    vpack_json_set_double(o, "package_seconds", x->package_s, ok);
    vpack_json_set_bool(o, "exact", x->exact, ok);
    return vpack_json_finish(o, *ok);
}

static int print_json(const struct sim *sim, const struct figures *f)
{
    struct json_object *o = json_object_new_object(), *levels = json_object_new_array();
    bool ok = true;
    int ret;

    vpack_json_set_int(o, "intervals", (int64_t)f[0].t.intervals, &ok);
    vpack_json_set_double(o, "seconds", f[0].t.seconds, &ok);
    vpack_json_set_int(o, "domains", (int64_t)sim->ndomains, &ok);
    vpack_json_set_str(o, "topology", sim->topo->source ? sim->topo->source : "host", &ok);
    vpack_json_set_str(o, "pc6_scope", vpack_pc6_scope_name(sim->pc6_scope), &ok);
    vpack_json_set(o, "capacity_bound", oracle_json(&sim->bound, &ok), &ok);
    vpack_json_set(o, "policy_target", oracle_json(&sim->target, &ok), &ok);
    for (int l = 0; l < NLEVELS; l++) {
        const struct figures *x = &f[l];
        struct json_object *lv = json_object_new_object(), *idle = json_object_new_array(),
                           *busy = json_object_new_array();

        vpack_json_set_int(lv, "level", l, &ok);
        for (unsigned p = 0; p < sim->topo->npackages; p++) {
            double s = x->t.seconds > 0 ? x->t.seconds : 1;
            vpack_json_append(idle, json_object_new_double(x->t.pkg_idle_s[p] / s), &ok);
            vpack_json_append(busy, json_object_new_double(x->t.pkg_busy_s[p] / s), &ok);
        }
        vpack_json_set(lv, "package_idle", idle, &ok);
        vpack_json_set(lv, "package_busy", busy, &ok);
        vpack_json_set_double(lv, "energy_j", x->t.energy_j, &ok);
        vpack_json_set_double(lv, "saving", x->saving, &ok);
        vpack_json_set(lv, "by_pc6_scope", scope_json(x, &ok), &ok);
        vpack_json_set_double(lv, "saving_idle_w_as_deep_w", x->saving_idle_deep, &ok);
        vpack_json_set_double(lv, "demand_cpu_s", x->t.demand, &ok);
        vpack_json_set_double(lv, "served_cpu_s", x->t.served, &ok);
        vpack_json_set_double(lv, "served_ratio", x->served_ratio, &ok);
        vpack_json_set_double(lv, "delay_p99", x->t.delay_p99, &ok);
        vpack_json_set_double(lv, "moves_per_hour", x->moves_per_hour, &ok);
        vpack_json_set_int(lv, "moves", (int64_t)x->t.moves, &ok);
        vpack_json_set_int(lv, "pin_ops", (int64_t)x->t.pin_ops, &ok);
        vpack_json_set_double(lv, "pin_cpu_s", x->t.pin_cpu_s, &ok);
        vpack_json_set_double(lv, "foreign_cpu_s", x->t.foreign_s, &ok);
        vpack_json_set_double(lv, "awake_package_seconds", x->awake_pkg_s, &ok);
        vpack_json_set_double(lv, "active_package_seconds", x->t.active_pkg_s, &ok);
        vpack_json_set_double(lv, "planned_package_seconds", x->t.planned_pkg_s, &ok);
        vpack_json_set_double(lv, "vs_capacity_bound", x->vs_bound, &ok);
        vpack_json_set_double(lv, "vs_policy_target", x->vs_target, &ok);
        vpack_json_set_int(lv, "intervals_under_bound", (int64_t)sim->under_bound[l], &ok);
        vpack_json_set(lv, "placement", placement_json(sim->model[l], &ok), &ok);
        vpack_json_append(levels, vpack_json_finish(lv, ok), &ok);
    }
    vpack_json_set(o, "levels", levels, &ok);
    o = vpack_json_finish(o, ok);
    if (!o) {
        vpackctl_err("simulate: out of memory");
        return VPACKCTL_EXIT_FAIL;
    }
    ret = vpackctl_print_json(o);
    json_object_put(o);
    return ret;
}

/* A colour for package index p. */
static void pkg_colour(unsigned p, char *buf, size_t len)
{
    snprintf(buf, len, "hsl(%u,65%%,55%%)", (p * 360 / 7 + 30) % 360);
}

/* The mean of timeline series `series` (0 demand in packages' worth, 1 active, 2 the capacity
 * bound) over points a..b-1. */
static double tl_mean(const struct sim *sim, int series, unsigned long a, unsigned long b,
                      double cores_per_pkg)
{
    double sum = 0;

    for (unsigned long i = a; i < b; i++)
        sum += series == 0   ? sim->tl[i].demand / cores_per_pkg
               : series == 1 ? sim->tl[i].active
                             : sim->tl[i].bound;
    return b > a ? sum / (double)(b - a) : 0;
}

/* A step line through the columns' values, a point only where the value changes. */
static void svg_steps(FILE *f, const double *v, unsigned cols, double x0, double cw, double y0,
                      double scale)
{
    double prev = y0 - scale * v[0];

    fprintf(f, "%.1f,%.1f", x0, prev);
    for (unsigned c = 1; c < cols; c++) {
        double y = y0 - scale * v[c];

        if (fabs(y - prev) >= 0.05) {
            fprintf(f, " %.1f,%.1f %.1f,%.1f", x0 + c * cw, prev, x0 + c * cw, y);
            prev = y;
        }
    }
    fprintf(f, " %.1f,%.1f", x0 + cols * cw, prev);
}

/* Hours between time ticks: at most 12 ticks. */
static double tick_hours(double hours)
{
    static const double steps[] = {1.0 / 60, 5.0 / 60, 0.25, 0.5, 1, 2, 3, 4, 6, 12, 24, 48, 168};

    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
        if (hours / steps[i] <= 12)
            return steps[i];
    return hours / 12;
}

/*
 * The level 2 timeline as SVG: the demand in packages' worth of cores, the
 * packages with work on them and the capacity bound, on one package scale;
 * a strip coloured by the wake-up package; the day's figures underneath.
 */
static int write_svg(const struct sim *sim, const struct figures *fg, const char *path)
{
    const double W = 1000, H = 400, top = 50, plot = 230, left = 56, right = 16;
    unsigned cols = sim->ntl < SVG_COLUMNS ? (unsigned)sim->ntl : SVG_COLUMNS;
    unsigned np = sim->topo->npackages, gstep;
    double cores = 0, cw, ymax, hours = sim->seconds / 3600, th, strip = top + plot + 30;
    double *v = NULL;
    FILE *f;

    if (cols == 0) {
        vpackctl_err("simulate: --svg: no interval to draw");
        return -1;
    }
    for (unsigned p = 0; p < np; p++)
        cores += sim->topo->packages[p].ncores;
    if (!(v = malloc(cols * sizeof(*v)))) {
        vpackctl_err("simulate: out of memory");
        return -1;
    }
    f = fopen(path, "w");
    if (!f) {
        vpackctl_err("simulate: %s: %s", path, strerror(errno));
        free(v);
        return -1;
    }
    cw = (W - left - right) / cols;
    ymax = np > 0 ? np : 1;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"13\">\n",
            W, H, W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"20\" font-size=\"15\" font-weight=\"bold\">vpack level 2 "
               "on %u packages (%.0f cores), %.1f h, %lu domains</text>\n",
            left, np, cores, hours, sim->ndomains);
    /* Legend. */
    fprintf(f, "<g font-size=\"12\">"
               "<line x1=\"%.0f\" y1=\"36\" x2=\"%.0f\" y2=\"36\" stroke=\"#1f5fbf\" stroke-width=\"1.5\"/>"
               "<text x=\"%.0f\" y=\"40\">demand (packages' worth of cores)</text>"
               "<line x1=\"%.0f\" y1=\"36\" x2=\"%.0f\" y2=\"36\" stroke=\"#d62728\" stroke-width=\"2.5\"/>"
               "<text x=\"%.0f\" y=\"40\">packages with work (vpack)</text>"
               "<line x1=\"%.0f\" y1=\"36\" x2=\"%.0f\" y2=\"36\" stroke=\"#444\" stroke-width=\"1.5\" "
               "stroke-dasharray=\"5,3\"/><text x=\"%.0f\" y=\"40\">capacity bound (fewest packages)</text></g>\n",
            left, left + 24, left + 30, left + 270, left + 294, left + 300, left + 490, left + 514,
            left + 520);
    /* Package grid and labels. */
    gstep = np <= 8 ? 1 : (np + 7) / 8;
    for (unsigned k = 0; k <= np; k += gstep) {
        double y = top + plot - plot * k / ymax;

        fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"%s\"/>"
                   "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%u</text>\n",
                left, y, W - right, y, k ? "#e4e4e4" : "black", left - 6, y + 4, k);
    }
    fprintf(f, "<text x=\"14\" y=\"%.0f\" transform=\"rotate(-90 14 %.0f)\" "
               "text-anchor=\"middle\">packages</text>\n",
            top + plot / 2, top + plot / 2);
    /* Time axis. */
    th = tick_hours(hours);
    for (double t = 0; t <= hours + 1e-9; t += th) {
        double x = left + (W - left - right) * (hours > 0 ? t / hours : 0);

        fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"black\"/>",
                x, top + plot, x, top + plot + 5);
        if (th < 1)
            fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%.0f min</text>\n", x,
                    top + plot + 18, t * 60);
        else
            fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%.0f h</text>\n", x,
                    top + plot + 18, t);
    }
    /* The three series, each the mean over its column's intervals. */
    for (int series = 0; series < 3; series++) {
        static const char *const style[] = {
            "stroke=\"#1f5fbf\" stroke-width=\"1.5\"",
            "stroke=\"#d62728\" stroke-width=\"2.5\"",
            "stroke=\"#444\" stroke-width=\"1.5\" stroke-dasharray=\"5,3\"",
        };

        for (unsigned c = 0; c < cols; c++)
            v[c] = tl_mean(sim, series, (unsigned long)c * sim->ntl / cols,
                           (unsigned long)(c + 1) * sim->ntl / cols, np ? cores / np : 1);
        fprintf(f, "<polyline fill=\"none\" %s points=\"", style[series]);
        svg_steps(f, v, cols, left, cw, top + plot, plot / ymax);
        fprintf(f, "\"/>\n");
    }
    /* The wake-up package strip: one rectangle per run of the same package. */
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\" font-size=\"11\">wake-up</text>\n",
            left - 6, strip + 11);
    for (unsigned c = 0, start = 0; c < cols; c++) {
        unsigned long i = (unsigned long)(c + 1) * sim->ntl / cols - 1;
        int w = sim->tl[i].wakeup;
        int pi = w >= 0 ? vpack_topology_package_index(sim->topo, w) : -1;
        int next = -2;
        char colour[32];

        if (c + 1 < cols) {
            int wn = sim->tl[(unsigned long)(c + 2) * sim->ntl / cols - 1].wakeup;
            next = wn >= 0 ? vpack_topology_package_index(sim->topo, wn) : -1;
        }
        if (next == pi)
            continue;
        if (pi < 0)
            snprintf(colour, sizeof(colour), "#dddddd");
        else
            pkg_colour((unsigned)pi, colour, sizeof(colour));
        fprintf(f, "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.2f\" height=\"14\" fill=\"%s\"/>\n",
                left + start * cw, strip, (c + 1 - start) * cw, colour);
        start = c + 1;
    }
    for (unsigned p = 0; p < np && p < 8; p++) {
        char colour[32];

        pkg_colour(p, colour, sizeof(colour));
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                   "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\">wake-up package %d</text>\n",
                left + p * 150.0, strip + 22, colour, left + p * 150.0 + 16, strip + 32,
                sim->topo->packages[p].id);
    }
    /* The figures of the whole run. */
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">level 2 against level 0: energy %+.1f%%, served "
               "work %.4f of level 0, %.1f moves per hour</text>\n",
            left, H - 28, -100 * fg[2].saving,
            fg[0].t.served > 0 ? fg[2].t.served / fg[0].t.served : 1, fg[2].moves_per_hour);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">package-seconds with work: level 2 %.0f, capacity "
               "bound %.0f (level 2 %+.1f%%), level 0 %.0f</text>\n",
            left, H - 10, fg[2].t.active_pkg_s, sim->bound.package_s, 100 * fg[2].vs_bound,
            fg[0].t.active_pkg_s);
    fprintf(f, "</svg>\n");
    free(v);
    if (fclose(f) != 0) {
        vpackctl_err("simulate: %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/*
 * The configuration of --config FILE, then each --set (vpack_config_load(),
 * as vpackd). Returns VPACKCTL_PROCEED, or after one line on stderr
 * VPACKCTL_EXIT_FAIL (the file) or VPACKCTL_EXIT_USAGE (a --set).
 */
static int load_config(const struct sim_args *a, struct vpack_config *c)
{
    char *text = NULL, *err = NULL, name[PATH_MAX + 16];
    enum vpack_config_input bad;
    int r;

    if (a->config && (r = vpack_host_read_file(NULL, a->config, 1 << 20, &text, NULL)) < 0) {
        vpackctl_err("simulate: --config %s: %s", a->config, strerror(-r));
        return VPACKCTL_EXIT_FAIL;
    }
    snprintf(name, sizeof(name), "--config %s", a->config ? a->config : "");
    r = vpack_config_load(c, text, name, a->sets, a->nsets, &bad, &err);
    free(text);
    if (r < 0) {
        vpackctl_err("simulate: %s", err ? err : "out of memory");
        free(err);
        return bad == VPACK_CONFIG_SETS ? VPACKCTL_EXIT_USAGE : VPACKCTL_EXIT_FAIL;
    }
    return VPACKCTL_PROCEED;
}

/*
 * A level with fewer packages with work than the capacity bound while it
 * served all its demand breaks the bound's proof (oracle.h): a bug in the
 * model or the oracle, never a result. Returns 0, or -1 (reported).
 */
static int bound_broken(const struct sim *sim)
{
    int ret = 0;

    for (int l = 0; l < NLEVELS; l++)
        if (sim->under_bound_served[l]) {
            vpackctl_err("simulate: bug: level %d had fewer packages with work than the capacity "
                         "bound in %lu intervals where it served all its demand",
                         l, sim->under_bound_served[l]);
            ret = -1;
        }
    return ret;
}

/* The power model of --power, or the defaults. Returns 0 or -1 (reported). */
static int load_power(const char *path, struct vpack_power_params *pw)
{
    char *buf, *err = NULL;
    long len;
    int r;

    vpack_power_params_default(pw);
    if (!path)
        return 0;
    if ((len = read_whole(path, &buf)) < 0)
        return -1;
    r = vpack_power_params_parse(buf, (size_t)len, pw, &err);
    free(buf);
    if (r < 0) {
        vpackctl_err("simulate: %s: %s", path, err ? err : "out of memory");
        free(err);
        return -1;
    }
    return 0;
}

int simulate_main(int argc, char **argv)
{
    struct sim_args a;
    struct sim sim = {0};
    struct source src = {0};
    struct vpack_topology *topo = NULL;
    struct vpack_power_params pw;
    struct vpack_model_host host;
    struct vpack_config conf = {0};
    struct figures f[NLEVELS];
    char *reserved = NULL;
    int ret;

    if ((ret = parse_args(argc, argv, &a)) != VPACKCTL_PROCEED ||
        (ret = load_config(&a, &conf)) != VPACKCTL_PROCEED)
        goto cleanup;
    /* The command line's topology and reserved CPUs, else the configuration's. */
    if (!a.reserved && conf.has_reserved && !(reserved = vpack_cpuset_format(&conf.reserved_cpus))) {
        vpackctl_err("simulate: out of memory");
        ret = VPACKCTL_EXIT_FAIL;
        goto cleanup;
    }
    if ((ret = vpackctl_load_topology("simulate", a.spec ? a.spec : conf.topology,
                                      a.reserved ? a.reserved : reserved, &topo)))
        goto cleanup;
    ret = VPACKCTL_EXIT_FAIL;
    if (load_power(a.power, &pw) < 0)
        goto cleanup;
    sim.topo = topo;
    sim.pc6_scope = pw.pc6_scope;
    sim.idle_w = pw.idle_w;
    sim.deep_w = pw.deep_w;
    sim.bound.cap = calloc(topo->npackages ? topo->npackages : 1, sizeof(double));
    sim.target.cap = calloc(topo->npackages ? topo->npackages : 1, sizeof(double));
    if (!sim.bound.cap || !sim.target.cap) {
        vpackctl_err("simulate: out of memory");
        goto cleanup;
    }
    vpack_oracle_capacity_real(topo, pw.smt_gain, sim.bound.cap);
    vpack_oracle_capacity_target(topo, conf.policy.pack_watermark, sim.target.cap);
    vpack_model_host_default(&host);
    /* The model observes as the configured agent would. */
    host.smoothing_rise = conf.smoothing_rise;
    host.smoothing_fall = conf.smoothing_fall;
    if (a.have_pin_cost)
        host.pin_cpu_ms = a.pin_cost;
    sim.host_burst = a.host_burst;
    sim.host_every = a.host_every;
    for (int l = 0; l < NLEVELS; l++) {
        char *err = NULL;

        if (vpack_model_new(topo, &conf.policy, &pw, l, &sim.model[l], &err) < 0 ||
            vpack_model_set_host(sim.model[l], &host, &err) < 0) {
            vpackctl_err("simulate: %s", err ? err : "out of memory");
            free(err);
            goto cleanup;
        }
    }
    if (a.trace) {
        src.name = a.trace;
        src.f = strcmp(a.trace, "-") ? fopen(a.trace, "r") : stdin;
        if (!src.f) {
            vpackctl_err("simulate: %s: %s", a.trace, strerror(errno));
            goto cleanup;
        }
    } else {
        src.name = a.planetlab;
        if (planetlab_load(&a, &src) < 0)
            goto cleanup;
    }
    if (a.write && !(sim.write = fopen(a.write, "w"))) {
        vpackctl_err("simulate: %s: %s", a.write, strerror(errno));
        goto cleanup;
    }
    if (run(&sim, &src, a.hours * 3600, a.write) < 0)
        goto cleanup;
    if (sim.write) {
        int r = fclose(sim.write);
        sim.write = NULL;
        if (r != 0) {
            vpackctl_err("simulate: %s: %s", a.write, strerror(errno));
            goto cleanup;
        }
    }
    if (sim.ntl == 0) {
        vpackctl_err("simulate: %s: no interval in the trace", src.name);
        goto cleanup;
    }
    figures_of(&sim, f);
    if (bound_broken(&sim) < 0)
        goto cleanup;
    if (a.svg && write_svg(&sim, f, a.svg) < 0)
        goto cleanup;
    ret = a.json ? print_json(&sim, f) : print_text(&sim, f);

cleanup:
    if (sim.write)
        fclose(sim.write);
    if (src.f && src.f != stdin)
        fclose(src.f);
    free(src.line);
    vpack_planetlab_clear(&src.pl);
    for (int l = 0; l < NLEVELS; l++)
        vpack_model_free(sim.model[l]);
    free(sim.tl);
    free(sim.bound.cap);
    free(sim.target.cap);
    vpack_topology_free(topo);
    vpack_config_clear(&conf);
    free(reserved);
    free(a.sets);
    return ret;
}
