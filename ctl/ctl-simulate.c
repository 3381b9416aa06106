// SPDX-License-Identifier: MIT
/*
 * vpackctl simulate: replays a trace (a file, or one built from PlanetLab VM
 * traces) through the host model (lib/sim/model.c) at levels 0, 1 and 2, next to
 * the oracles (lib/sim/oracle.c), and prints what vpack would save. This file
 * is the command: its options and inputs; the run and the writers are
 * simulate-*.c (simulate.h).
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

#include "host.h"
#include "vpack/config.h"
#include "vpack/model.h"
#include "vpack/oracle.h"
#include "vpack/policy.h"
#include "vpack/topology.h"
#include "vpack/trace.h"
#include "simulate.h"
#include "vpackctl.h"

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
            "below it), the delay-bounded optimum (the fewest packages on which the\n"
            "model's p99 vCPU delay stays under --delay-bound) and the policy target\n"
            "(the capacity bound at the pack watermark). See vpackctl(1), SIMULATE.\n"
            "\n"
            "Options:\n"
            "  --trace FILE        a trace: JSON lines, one interval each ('-': stdin)\n"
            "  --planetlab DIR     build the trace from PlanetLab VM traces in DIR\n"
            "  --vms N             ... from N files picked with the seed\n"
            "  --seed S            ... the seed (default 1)\n"
            "  --burst SIGMA       ... log-normal burst of mean 1 on each VM's demand\n"
            "                      (default 0: none); work that does not fit is carried\n"
            "  --burst-tau SECONDS ... the burst's correlation time (default 60; 0:\n"
            "                      independent every interval)\n"
            "  --vcpu-split HOW    ... a VM's demand over its vCPUs: even (default),\n"
            "                      simplex (random shares) or hot (one vCPU first)\n"
            "  --hold              ... hold readings instead of interpolating\n"
            "  --memory-homes HOW  ... where each VM's memory is: none (default) or\n"
            "                      spread (VM i's on NUMA node i mod the host's nodes)\n"
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
            "  --platform NAME     the platform profile of the power model (default:\n"
            "                      " VPACK_POWER_DEFAULT_PLATFORM "; built in: xeon-skx, xeon-icx, xeon-spr,\n"
            "                      pc6-package, amd-epyc)\n"
            "  --delay-bound PCT   the p99 vCPU delay, %% of the interval, the delay-\n"
            "                      bounded optimum keeps under (default 5)\n"
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
    OPT_BURST_TAU,
    OPT_VCPU_SPLIT,
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
    OPT_PLATFORM,
    OPT_DELAY_BOUND,
    OPT_MEMORY_HOMES,
};

struct sim_args {
    const char *trace, *planetlab, *write, *spec, *reserved, *power, *svg, *config;
    const char *platform;    /* --platform, or NULL for the default */
    double delay_bound;      /* --delay-bound, share of the interval */
    char **sets; /* --set, in order: pointers into argv */
    unsigned nsets;
    unsigned vms, interval_ms;
    unsigned long long seed;
    double burst, burst_tau, hours;
    enum vpack_vcpu_split split;
    bool hold, json;
    bool memory_spread;      /* --memory-homes spread */
    bool have_pin_cost;
    double pin_cost;         /* --pin-cost, ms */
    double host_burst;       /* --host-burst CPUS, or 0 */
    unsigned host_every;     /* ... EVERY intervals */
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

/* --memory-homes HOW. Returns 0 or -EINVAL (reported). */
static int parse_memory_homes(const char *text, struct sim_args *a)
{
    a->memory_spread = !strcmp(text, "spread");
    if (a->memory_spread || !strcmp(text, "none"))
        return 0;
    vpackctl_err("simulate: --memory-homes '%s': expected none or spread", text);
    return -EINVAL;
}

/* --vcpu-split HOW. Returns 0 or -EINVAL (reported). */
static int parse_split(const char *text, enum vpack_vcpu_split *out)
{
    for (unsigned s = 0; s < VPACK_SPLITS; s++)
        if (!strcmp(text, vpack_vcpu_split_name(s))) {
            *out = (enum vpack_vcpu_split)s;
            return 0;
        }
    vpackctl_err("simulate: --vcpu-split '%s': expected even, simplex or hot", text);
    return -EINVAL;
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
    /* A getopt table: its rows look alike because they are one kind of data. */
    static const struct option options[] = {
        {"trace", required_argument, NULL, OPT_TRACE},
        {"planetlab", required_argument, NULL, OPT_PLANETLAB},
        {"vms", required_argument, NULL, OPT_VMS},
        {"seed", required_argument, NULL, OPT_SEED},
        {"burst", required_argument, NULL, OPT_BURST},
        {"burst-tau", required_argument, NULL, OPT_BURST_TAU},
        {"vcpu-split", required_argument, NULL, OPT_VCPU_SPLIT},
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
        {"platform", required_argument, NULL, OPT_PLATFORM},
        {"delay-bound", required_argument, NULL, OPT_DELAY_BOUND},
        {"memory-homes", required_argument, NULL, OPT_MEMORY_HOMES},
        VPACKCTL_OPTIONS_END,
    };
    struct vpackctl_getopt g = {.cmd = "simulate", .usage = usage, .options = options};
    double v;
    int c;

    *a = (struct sim_args){.interval_ms = 1000, .seed = 1,
                           .burst_tau = VPACK_PLANETLAB_BURST_TAU, .delay_bound = 0.05};
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
        else if (c == OPT_BURST_TAU)
            err = parse_number(g.option, optarg, 0, 86400, &a->burst_tau);
        else if (c == OPT_VCPU_SPLIT)
            err = parse_split(optarg, &a->split);
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
        else if (c == OPT_PLATFORM)
            a->platform = optarg;
        else if (c == OPT_MEMORY_HOMES)
            err = parse_memory_homes(optarg, a);
        else if (c == OPT_DELAY_BOUND && !(err = parse_number(g.option, optarg, 0.01, 100, &v)))
            a->delay_bound = v / 100;
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
    if (a->trace && a->memory_spread) {
        vpackctl_err("simulate: --memory-homes is for --planetlab (a trace names its own)");
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
    s->pl.burst_tau = a->burst_tau;
    s->pl.split = a->split;
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

/* The built-in profile platform, or a message naming the ones there are. Returns 0 or -1. */
static int builtin_power(const char *platform, struct vpack_power_params *pw)
{
    char names[256] = "";
    size_t used = 0;
    const char *n;

    if (vpack_power_platform(platform, pw) == 0)
        return 0;
    for (unsigned i = 0; (n = vpack_power_platform_name(i)) && used < sizeof(names); i++)
        used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "", n);
    vpackctl_err("simulate: --platform '%s': not a built-in platform; they are %s", platform,
                 names);
    return -1;
}

/* The power model of --power and --platform, or the defaults. Returns 0 or -1 (reported). */
static int load_power(const char *path, const char *platform, struct vpack_power_params *pw)
{
    char *buf, *err = NULL;
    long len;
    int r;

    vpack_power_params_default(pw);
    if (!path)
        return platform ? builtin_power(platform, pw) : 0;
    if ((len = read_whole(path, &buf)) < 0)
        return -1;
    r = vpack_power_profile_parse(buf, (size_t)len, platform, pw, &err);
    free(buf);
    if (r < 0) {
        vpackctl_err("simulate: %s: %s", path, err ? err : "out of memory");
        free(err);
        return -1;
    }
    return 0;
}

/* --memory-homes spread: the host's NUMA nodes, package by package, into src's builder. */
static int memory_nodes(const struct vpack_topology *topo, struct source *src, int **nodes)
{
    unsigned n = 0;

    for (unsigned p = 0; p < topo->npackages; p++)
        n += topo->packages[p].nnuma;
    if (n == 0) {
        vpackctl_err("simulate: --memory-homes spread: the topology names no NUMA node");
        return -1;
    }
    if (!(*nodes = malloc(n * sizeof(**nodes)))) {
        vpackctl_err("simulate: out of memory");
        return -1;
    }
    n = 0;
    for (unsigned p = 0; p < topo->npackages; p++)
        for (unsigned k = 0; k < topo->packages[p].nnuma; k++)
            (*nodes)[n++] = topo->packages[p].numa_nodes[k];
    src->pl.mem_nodes = *nodes;
    src->pl.nmem_nodes = n;
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
    int *nodes = NULL;
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
    if (load_power(a.power, a.platform, &pw) < 0)
        goto cleanup;
    sim.topo = topo;
    sim.power = pw;
    sim.platform = a.platform ? a.platform : a.power ? "the file's default" : VPACK_POWER_DEFAULT_PLATFORM;
    sim.pc6_scope = pw.pc6_scope;
    /* The policy plans for the platform's PC6 scope unless the configuration names one. */
    if (!conf.pc6_scope_set)
        conf.policy.pc6_system = pw.pc6_scope == VPACK_PC6_SYSTEM;
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
    /* The delay-bounded optimum sizes packages as the capacity bound does. */
    sim.delay.cap = sim.bound.cap;
    sim.delay.delay_bound = a.delay_bound;
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
        if (planetlab_load(&a, &src) < 0 || (a.memory_spread && memory_nodes(topo, &src, &nodes) < 0))
            goto cleanup;
    }
    if (a.write && !(sim.write = fopen(a.write, "w"))) {
        vpackctl_err("simulate: %s: %s", a.write, strerror(errno));
        goto cleanup;
    }
    if (simulate_run(&sim, &src, a.hours * 3600, a.write) < 0)
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
    if (simulate_figures(&sim, f) < 0 || simulate_bound_broken(&sim) < 0)
        goto cleanup;
    if (a.svg && simulate_write_svg(&sim, f, a.svg) < 0)
        goto cleanup;
    ret = a.json ? simulate_print_json(&sim, f) : simulate_print_text(&sim, f);

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
    free(nodes);
    free(a.sets);
    return ret;
}
