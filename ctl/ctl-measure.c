// SPDX-License-Identifier: MIT
/*
 * vpackctl measure: an A/B run on the live host. Level 0 (A: vpackd holds
 * every domain at level 0, control op hold-level) and the configured levels
 * (B: the hold dropped) alternate in rounds A B A B ..., the first part of
 * each round left out as warm-up; per package the whole-package idle share
 * (/proc/stat), the cpuidle states' residency and the RAPL energy where
 * the host has them (adapters/hostpower.c), and the guests' run-queue
 * delay (vpackd's explain), each with its 95 % interval; then the verdict
 * (lib/measure.c). The levels are given back on every way out: the end, an
 * error, SIGINT, SIGTERM and SIGHUP; a measure killed outright leaves a
 * hold that vpackd drops by itself when its lease runs out.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"
#include "ctl-client.h"
#include "host.h"
#include "hostpower.h"
#include "vpack/config.h"
#include "vpack/cpuset.h"
#include "vpack/measure.h"
#include "vpack/proc.h"
#include "vpack/protocol.h"
#include "vpackctl.h"

enum { OPT_MINUTES = 256, OPT_ROUND, OPT_WARMUP, OPT_SAMPLE, OPT_JSON, OPT_SOCKET };

/* A level-0 round's hold lasts this much longer than the round, for a slow request or two. */
#define LEASE_MARGIN_S 30.0

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: vpackctl measure [--minutes N] [--round-seconds S] [--warmup-seconds W]\n"
            "                        [--sample-seconds P] [--json] [--socket PATH]\n"
            "\n"
            "An A/B run on this host: rounds of S seconds alternate between level 0\n"
            "(vpackd holds every domain at level 0; needs root) and the configured levels,\n"
            "level 0 first, for N minutes; the first W seconds of each round are left\n"
            "out. Prints per package the whole-package idle share, the cpuidle states'\n"
            "residency and the RAPL power where the host has them, and the guests'\n"
            "run-queue delay, each as mean ± half of its 95 %% interval (Student t over\n"
            "the rounds), and a verdict. The levels are given back at the end, on an\n"
            "error and on SIGINT, SIGTERM or SIGHUP. Needs a running vpackd.\n"
            "\n"
            "Options:\n"
            "  --minutes N        the run's length (default 40): at least 4 rounds\n"
            "  --round-seconds S  one round (default 300)\n"
            "  --warmup-seconds W left out at the start of each round (default S / 5)\n"
            "  --sample-seconds P how often the guests' delay is read (default 1)\n"
            "  --json             print the rounds, the figures and the verdict as JSON\n"
            "  --socket PATH      the agent's control socket (default: $VPACK_SOCKET,\n"
            "                     else " VPACK_DEFAULT_SOCKET ")\n"
            "  -h, --help         show this help\n"
            "\n"
            "Exit status: 0 measured (whatever the verdict), 1 failed (the levels given\n"
            "back), 2 usage, 3 vpackd not reachable, 128+N stopped by signal N (the\n"
            "levels given back).\n");
}

/* What one figure is. */
enum fig_kind { FIG_IDLE, FIG_IDLE_MIN, FIG_CSTATE, FIG_ENERGY, FIG_HOST_ENERGY, FIG_DELAY };

struct fig {
    enum fig_kind kind;
    int pk;                           /* index into the packages; -1: the host */
    char state[VPACK_CPUIDLE_NAME_MAX]; /* FIG_CSTATE: the cpuidle state's name */
};

/* The host at one moment. */
struct reading {
    double t;                         /* vpackctl_now() */
    struct vpack_cpu_times *cpu;
    unsigned ncpu;
    struct vpack_hostpower_reading hp;
};

struct run {
    struct vpackctl_args args;
    double minutes, round_s, warmup_s, sample_s;
    unsigned nrounds;
    unsigned npk;
    int *pk_id;                       /* vpackd's package ids */
    vpack_cpuset *pk_cpus;
    unsigned ndoms;
    char **doms;                      /* the domains' names at the start */
    struct fig *figs;
    unsigned nfigs;
    double *vals;                     /* [round * nfigs + fig]; NAN: not read */
    unsigned done;                    /* rounds measured */
    struct vpack_hostpower *hp;
    struct vpack_host_held stat;
    struct vpack_cpu_model cpu;
    bool have_cpu;
    bool held;                        /* a hold of ours may be in place */
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

/* SIGINT, SIGTERM and SIGHUP end the run; no SA_RESTART, so that a sleep ends at once. */
static void catch_signals(void)
{
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* Sleeps s seconds in short naps; false as soon as a signal asked to stop. */
static bool nap(double s)
{
    double end = vpackctl_now() + s;
    for (double left = s; left > 0 && !stop_signal; left = end - vpackctl_now()) {
        double d = left < 0.1 ? left : 0.1;
        struct timespec ts = {0, (long)(d * 1e9)};
        nanosleep(&ts, NULL);
    }
    return !stop_signal;
}

/* --minutes: a number above 0, at most a week. */
static int parse_minutes(const char *text, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || errno || !isfinite(v) || v <= 0 || v > 7 * 24 * 60) {
        vpackctl_err("measure: --minutes '%s': expected minutes, more than 0 and at most %d", text,
                     7 * 24 * 60);
        return VPACKCTL_EXIT_USAGE;
    }
    *out = v;
    return VPACKCTL_PROCEED;
}

static int parse_options(int argc, char **argv, struct run *m)
{
    /* A getopt table: its rows look alike because they are one kind of data. */
    static const struct option opts[] = {
        {"minutes", required_argument, NULL, OPT_MINUTES},
        {"round-seconds", required_argument, NULL, OPT_ROUND},
        {"warmup-seconds", required_argument, NULL, OPT_WARMUP},
        {"sample-seconds", required_argument, NULL, OPT_SAMPLE},
        {"json", no_argument, NULL, OPT_JSON},
        {"socket", required_argument, NULL, OPT_SOCKET},
        VPACKCTL_OPTIONS_END,
    };
    struct vpackctl_getopt g = {.cmd = "measure", .usage = usage, .options = opts};
    const char *socket_opt = NULL;
    double *dst;
    int c, r;

    m->minutes = 40, m->round_s = 300, m->warmup_s = -1, m->sample_s = 1;
    /* The getopt loop: alike in shape on purpose (vpackctl.h, struct vpackctl_getopt). */
    while ((c = vpackctl_getopt(&g, argc, argv)) >= 0) {
        if (c == OPT_JSON) {
            m->args.json = true;
            continue;
        }
        if (c == OPT_SOCKET) {
            socket_opt = optarg;
            continue;
        }
        if (c == OPT_MINUTES) {
            if ((r = parse_minutes(optarg, &m->minutes)) != VPACKCTL_PROCEED)
                return r;
            continue;
        }
        dst = c == OPT_ROUND ? &m->round_s : c == OPT_WARMUP ? &m->warmup_s : &m->sample_s;
        r = vpackctl_parse_seconds("measure", c == OPT_ROUND    ? "--round-seconds"
                                              : c == OPT_WARMUP ? "--warmup-seconds"
                                                                : "--sample-seconds",
                                   optarg, c == OPT_WARMUP, 24 * 3600, dst);
        if (r != VPACKCTL_PROCEED)
            return r;
    }
    if (c == VPACKCTL_OPT_EXIT)
        return g.exit_code;
    if (optind < argc) {
        vpackctl_err("measure: unexpected argument '%s' (see 'vpackctl measure --help')",
                     argv[optind]);
        return VPACKCTL_EXIT_USAGE;
    }
    if (socket_opt && !*socket_opt) {
        vpackctl_err("measure: --socket needs a path");
        return VPACKCTL_EXIT_USAGE;
    }
    m->args.cmd = "measure";
    m->args.socket = vpack_client_socket_path(socket_opt);
    if (m->warmup_s < 0)
        m->warmup_s = m->round_s / 5;
    return VPACKCTL_PROCEED;
}

/* The rounds N minutes hold, even; and the limits the options must keep. */
static int check_rounds(struct run *m)
{
    double n = floor(m->minutes * 60 / m->round_s);
    m->nrounds = n > 1e6 ? 1000000 : (unsigned)n & ~1u;
    if (m->nrounds < 4) {
        vpackctl_err("measure: --minutes %g holds %u rounds of %g s: at least 4 are needed "
                     "(two of each level) for an interval",
                     m->minutes, m->nrounds, m->round_s);
        return VPACKCTL_EXIT_USAGE;
    }
    if (m->warmup_s >= m->round_s) {
        vpackctl_err("measure: --warmup-seconds %g leaves nothing of a %g s round", m->warmup_s,
                     m->round_s);
        return VPACKCTL_EXIT_USAGE;
    }
    if (m->round_s + LEASE_MARGIN_S > VPACK_HOLD_MAX_S) {
        vpackctl_err("measure: --round-seconds %g: a round's hold may last at most %g s",
                     m->round_s, VPACK_HOLD_MAX_S - LEASE_MARGIN_S);
        return VPACKCTL_EXIT_USAGE;
    }
    return VPACKCTL_PROCEED;
}

/* Sends hold-level 0 for seconds (0: drops the hold). Returns an exit code. */
static int send_hold(struct run *m, double seconds)
{
    struct json_object *ans = NULL;
    /* Set first: a request that reaches vpackd and loses its answer leaves a hold too. */
    if (seconds > 0)
        m->held = true;
    int ret = vpackctl_ask(&m->args, VPACKCTL_TIMEOUT_MS, NULL, &ans, "hold-level", "level",
                           json_object_new_int(0), "seconds", json_object_new_double(seconds),
                           NULL);
    json_object_put(ans);
    if (ret == VPACKCTL_EXIT_OK && seconds == 0)
        m->held = false;
    return ret;
}

/* Drops our hold, if any: on every way out. */
static void give_back(struct run *m)
{
    if (!m->held)
        return;
    if (send_hold(m, 0) != VPACKCTL_EXIT_OK)
        vpackctl_err("measure: could not give the domains their levels back: vpackd drops "
                     "the hold by itself when its lease runs out (within %g s)",
                     m->round_s + LEASE_MARGIN_S);
    else if (!m->args.json || stop_signal)
        fprintf(stderr, "vpackctl: measure: every domain at its own level again\n");
}

/* The packages (ids, CPUs) and the domains' names from status; refuses a hold already there. */
static int read_status(struct run *m)
{
    struct json_object *st = NULL, *pks, *doms, *hold;
    int ret = vpackctl_ask(&m->args, VPACKCTL_TIMEOUT_MS, "status", &st, "status", NULL);
    if (ret)
        return ret;
    ret = VPACKCTL_EXIT_FAIL;
    if (json_object_object_get_ex(st, "hold", &hold) && hold) {
        vpackctl_err("measure: vpackd holds the levels already (another vpackctl measure?): "
                     "its hold ends in %.0f s", vpack_json_double(hold, "seconds_left", 0));
        goto out;
    }
    pks = vpack_json_array(st, "packages");
    doms = vpack_json_array(st, "domains");
    m->npk = pks ? (unsigned)json_object_array_length(pks) : 0;
    m->ndoms = doms ? (unsigned)json_object_array_length(doms) : 0;
    m->pk_id = calloc(m->npk + 1, sizeof(*m->pk_id));
    m->pk_cpus = calloc(m->npk + 1, sizeof(*m->pk_cpus));
    m->doms = calloc(m->ndoms + 1, sizeof(*m->doms));
    if (!m->pk_id || !m->pk_cpus || !m->doms) {
        vpackctl_err("measure: out of memory");
        goto out;
    }
    for (unsigned p = 0; p < m->npk; p++) {
        struct json_object *o = json_object_array_get_idx(pks, p);
        m->pk_id[p] = (int)vpack_json_double(o, "id", -1);
        if (vpack_cpuset_parse(&m->pk_cpus[p], vpack_json_str(o, "cpus", ""), NULL) < 0) {
            vpackctl_err("measure: invalid answer from vpackd: package %d has no CPU set",
                         m->pk_id[p]);
            goto out;
        }
    }
    for (unsigned d = 0; d < m->ndoms; d++)
        if (!(m->doms[d] = strdup(vpack_json_str(json_object_array_get_idx(doms, d), "name", "")))) {
            vpackctl_err("measure: out of memory");
            goto out;
        }
    ret = VPACKCTL_EXIT_OK;
out:
    json_object_put(st);
    return ret;
}

/* Reads the host now into *r (cleared first). Returns an exit code. */
static int read_host(struct run *m, struct reading *r)
{
    int e;
    free(r->cpu);
    vpack_hostpower_reading_clear(&r->hp);
    r->cpu = NULL;
    r->t = vpackctl_now();
    if ((e = vpack_host_cpu_times("/", &m->stat, &r->cpu, &r->ncpu)) < 0) {
        vpackctl_err("measure: cannot read /proc/stat: %s", strerror(-e));
        return VPACKCTL_EXIT_FAIL;
    }
    /* No cpuidle directory (no driver) leaves the states out; RAPL is read all the same. */
    vpack_hostpower_read(m->hp, &r->hp);
    return VPACKCTL_EXIT_OK;
}

static void reading_clear(struct reading *r)
{
    free(r->cpu);
    vpack_hostpower_reading_clear(&r->hp);
}

static const struct vpack_cpu_times *cpu_of(const struct reading *r, int cpu)
{
    for (unsigned i = 0; i < r->ncpu; i++)
        if (r->cpu[i].cpu == cpu)
            return &r->cpu[i];
    return NULL;
}

/* The joules of RAPL package id in r; NAN if it has none. */
static double joules(const struct reading *r, int id)
{
    for (size_t i = 0; i < r->hp.nenergy; i++)
        if ((int)r->hp.energy[i].package == id)
            return r->hp.energy[i].joules;
    return NAN;
}

/* The seconds CPU cpu spent in state name in r; NAN if not read. */
static double state_seconds(const struct reading *r, int cpu, const char *name)
{
    for (size_t i = 0; i < r->hp.nidle; i++)
        if ((int)r->hp.idle[i].cpu == cpu && !strcmp(r->hp.idle[i].name, name))
            return r->hp.idle[i].seconds;
    return NAN;
}

static int add_fig(struct run *m, enum fig_kind kind, int pk, const char *state)
{
    struct fig *f = realloc(m->figs, (m->nfigs + 1) * sizeof(*f));
    if (!f)
        return -ENOMEM;
    m->figs = f;
    f = &m->figs[m->nfigs++];
    *f = (struct fig){kind, pk, ""};
    if (state)
        snprintf(f->state, sizeof(f->state), "%s", state);
    return 0;
}

/* Whether package pk already has a figure for cpuidle state name. */
static bool has_state(const struct run *m, int pk, const char *name)
{
    for (unsigned i = 0; i < m->nfigs; i++)
        if (m->figs[i].kind == FIG_CSTATE && m->figs[i].pk == pk && !strcmp(m->figs[i].state, name))
            return true;
    return false;
}

/* The figures this host has, from a first reading r. */
static int plan_figures(struct run *m, const struct reading *r)
{
    bool any_energy = false;
    for (unsigned p = 0; p < m->npk; p++) {
        if (add_fig(m, FIG_IDLE, (int)p, NULL) < 0 || add_fig(m, FIG_IDLE_MIN, (int)p, NULL) < 0)
            return -ENOMEM;
        for (size_t i = 0; i < r->hp.nidle; i++)
            if (vpack_cpuset_isset(&m->pk_cpus[p], r->hp.idle[i].cpu) &&
                !has_state(m, (int)p, r->hp.idle[i].name) &&
                add_fig(m, FIG_CSTATE, (int)p, r->hp.idle[i].name) < 0)
                return -ENOMEM;
        if (!isnan(joules(r, m->pk_id[p])) && add_fig(m, FIG_ENERGY, (int)p, NULL) < 0)
            return -ENOMEM;
    }
    any_energy = r->hp.nenergy > 0;
    if ((any_energy && add_fig(m, FIG_HOST_ENERGY, -1, NULL) < 0) ||
        add_fig(m, FIG_DELAY, -1, NULL) < 0)
        return -ENOMEM;
    return 0;
}

/* Package pk's whole-idle bounds between a and b (NAN when no CPU of it was read in both). */
static void package_idle(const struct run *m, unsigned pk, const struct reading *a,
                         const struct reading *b, double *lo, double *hi)
{
    double *idle = malloc((vpack_cpuset_count(&m->pk_cpus[pk]) + 1) * sizeof(*idle));
    unsigned n = 0;
    *lo = *hi = NAN;
    if (!idle)
        return;
    VPACK_CPUSET_FOREACH(c, &m->pk_cpus[pk])
    {
        const struct vpack_cpu_times *x = cpu_of(a, c), *y = cpu_of(b, c);
        double busy = x && y ? vpack_cpu_times_busy(x, y) : -1;
        if (busy >= 0)
            idle[n++] = 1 - busy;
    }
    if (n > 0)
        vpack_package_idle_bounds(idle, n, lo, hi);
    free(idle);
}

/* The share of package pk's CPUs' time between a and b in cpuidle state name. */
static double state_share(const struct run *m, unsigned pk, const char *name,
                          const struct reading *a, const struct reading *b)
{
    double sum = 0;
    unsigned n = 0;
    VPACK_CPUSET_FOREACH(c, &m->pk_cpus[pk])
    {
        double d = state_seconds(b, c, name) - state_seconds(a, c, name);
        if (!isnan(d)) {
            sum += d;
            n++;
        }
    }
    return n && b->t > a->t ? sum / (n * (b->t - a->t)) : NAN;
}

/* The host's RAPL package power between a and b, every zone of b summed. */
static double host_watts(const struct reading *a, const struct reading *b)
{
    double j = 0;
    for (size_t i = 0; i < b->hp.nenergy; i++)
        j += b->hp.energy[i].joules - joules(a, (int)b->hp.energy[i].package);
    return b->hp.nenergy ? j / (b->t - a->t) : NAN;
}

/* One round's figures into vals, from the readings a and b and the mean guest delay. */
static void round_values(const struct run *m, const struct reading *a, const struct reading *b,
                         double delay, double *vals)
{
    for (unsigned i = 0; i < m->nfigs; i++) {
        const struct fig *f = &m->figs[i];
        double lo, hi;
        if (f->kind == FIG_IDLE || f->kind == FIG_IDLE_MIN) {
            package_idle(m, (unsigned)f->pk, a, b, &lo, &hi);
            vals[i] = f->kind == FIG_IDLE ? hi : lo;
        } else if (f->kind == FIG_CSTATE) {
            vals[i] = state_share(m, (unsigned)f->pk, f->state, a, b);
        } else if (f->kind == FIG_ENERGY) {
            vals[i] = (joules(b, m->pk_id[f->pk]) - joules(a, m->pk_id[f->pk])) / (b->t - a->t);
        } else if (f->kind == FIG_HOST_ENERGY) {
            vals[i] = host_watts(a, b);
        } else {
            vals[i] = delay;
        }
    }
}

/*
 * The guests' run-queue delay now: the sum over the domains of their
 * vCPUs' smoothed delay (seconds waiting per second) from vpackd's
 * explain. A domain gone since the start is left out. NAN when vpackd
 * could not be asked.
 */
static double guest_delay(const struct run *m)
{
    double sum = 0;
    for (unsigned d = 0; d < m->ndoms; d++) {
        struct json_object *req = vpackctl_new_request(&m->args, "explain", "domain",
                                                       json_object_new_string(m->doms[d]), NULL);
        struct json_object *ans = NULL, *vc;
        char *err = NULL;
        int r = req ? vpackctl_request(m->args.socket, req, VPACKCTL_TIMEOUT_MS, &ans, &err)
                    : -ENOMEM;
        json_object_put(req);
        free(err);
        if (r < 0) {
            json_object_put(ans);
            return NAN;
        }
        vc = vpack_json_array(vpack_json_member(ans, "domain"), "vcpus");
        for (size_t v = 0; vc && v < json_object_array_length(vc); v++)
            sum += vpack_json_double(json_object_array_get_idx(vc, v), "delay", 0);
        json_object_put(ans);
    }
    return sum;
}

/* The measured part of round k: from after its warm-up to its end. */
static int measure_round(struct run *m, unsigned k, struct reading *a, struct reading *b)
{
    double delay = 0, end;
    unsigned n = 0;
    int ret;
    if ((ret = read_host(m, a)))
        return ret;
    end = a->t + (m->round_s - m->warmup_s);
    while (vpackctl_now() + m->sample_s <= end) {
        if (!nap(m->sample_s))
            return VPACKCTL_EXIT_FAIL;
        double d = guest_delay(m);
        if (!isnan(d)) {
            delay += d;
            n++;
        }
    }
    if (!nap(end - vpackctl_now()) || (ret = read_host(m, b)))
        return ret ? ret : VPACKCTL_EXIT_FAIL;
    round_values(m, a, b, n ? 1000 * delay / n : NAN, &m->vals[k * m->nfigs]);
    return VPACKCTL_EXIT_OK;
}

/* Every round: A (held at level 0) when k is even, B (configured) when odd. */
static int run_rounds(struct run *m)
{
    struct reading a = {0}, b = {0};
    int ret = VPACKCTL_EXIT_OK;
    for (unsigned k = 0; k < m->nrounds && ret == VPACKCTL_EXIT_OK; k++) {
        bool level0 = k % 2 == 0;
        if (!m->args.json)
            fprintf(stderr, "vpackctl: measure: round %u of %u: %s\n", k + 1, m->nrounds,
                    level0 ? "level 0 (held)" : "the configured levels");
        if ((ret = send_hold(m, level0 ? m->round_s + LEASE_MARGIN_S : 0)))
            break;
        if (!nap(m->warmup_s)) {
            ret = VPACKCTL_EXIT_FAIL;
            break;
        }
        if (k == 0 && (ret = read_host(m, &a)) == 0 && plan_figures(m, &a) < 0) {
            vpackctl_err("measure: out of memory");
            ret = VPACKCTL_EXIT_FAIL;
        }
        if (k == 0 && ret == 0 &&
            !(m->vals = malloc((size_t)m->nrounds * m->nfigs * sizeof(*m->vals)))) {
            vpackctl_err("measure: out of memory");
            ret = VPACKCTL_EXIT_FAIL;
        }
        if (ret == 0 && (ret = measure_round(m, k, &a, &b)) == 0)
            m->done = k + 1;
    }
    reading_clear(&a);
    reading_clear(&b);
    return ret;
}

/* The figure's name, its unit and the factor from its value to that unit. */
static void fig_words(const struct run *m, const struct fig *f, char *name, size_t n,
                      const char **unit, double *scale)
{
    static const char *const what[] = {
        [FIG_IDLE] = "idle", [FIG_IDLE_MIN] = "idle_min", [FIG_CSTATE] = "cpuidle",
        [FIG_ENERGY] = "power", [FIG_HOST_ENERGY] = "power", [FIG_DELAY] = "guest_delay",
    };
    *unit = f->kind == FIG_ENERGY || f->kind == FIG_HOST_ENERGY ? "W"
            : f->kind == FIG_DELAY                              ? "ms/s"
                                                                : "%";
    *scale = !strcmp(*unit, "%") ? 100 : 1;
    if (f->pk < 0)
        snprintf(name, n, "host %s", what[f->kind]);
    else if (f->kind == FIG_CSTATE)
        snprintf(name, n, "package %d %s %s", m->pk_id[f->pk], what[f->kind], f->state);
    else
        snprintf(name, n, "package %d %s", m->pk_id[f->pk], what[f->kind]);
}

/* The figure i over the pairs measured: -EINVAL when a round of it was not read. */
static int fig_ab(const struct run *m, unsigned i, struct vpack_ab *ab)
{
    unsigned pairs = m->done / 2;
    double *a = calloc(pairs + 1, sizeof(*a)), *b = calloc(pairs + 1, sizeof(*b));
    int r = a && b ? 0 : -ENOMEM;
    for (unsigned p = 0; p < pairs && r == 0; p++) {
        a[p] = m->vals[(2 * p) * m->nfigs + i];
        b[p] = m->vals[(2 * p + 1) * m->nfigs + i];
    }
    if (r == 0)
        r = vpack_ab_of(a, b, pairs, ab);
    free(a);
    free(b);
    return r;
}

/* The verdict's input: the host's energy and each package's idle share. */
static int verdict_in(const struct run *m, struct vpack_verdict_in *in, struct vpack_ab *idle)
{
    *in = (struct vpack_verdict_in){.cpu = m->have_cpu ? &m->cpu : NULL, .npackages = m->npk,
                                    .package_ids = m->pk_id, .idle = idle};
    in->pc6_system_wide = m->have_cpu && vpack_pc6_system_wide(&m->cpu);
    for (unsigned i = 0; i < m->nfigs; i++) {
        const struct fig *f = &m->figs[i];
        int r = 0;
        if (f->kind == FIG_HOST_ENERGY)
            in->has_energy = (r = fig_ab(m, i, &in->energy_w)) == 0;
        else if (f->kind == FIG_IDLE && (r = fig_ab(m, i, &idle[f->pk])) < 0)
            idle[f->pk] = (struct vpack_ab){{NAN, NAN, 0}, {NAN, NAN, 0}, {NAN, NAN, 0}};
        if (r == -ENOMEM)
            return r;
    }
    return 0;
}

/* "12.3 ± 1.0" of iv in the unit (scale), or "n/a". */
static void fmt_iv(char *buf, size_t n, const struct vpack_interval *iv, double scale, bool sign)
{
    snprintf(buf, n, sign ? "%+.1f ± %.1f" : "%.1f ± %.1f", scale * iv->mean, scale * iv->half);
}

static void print_text(const struct run *m, const char *verdict)
{
    printf("%u rounds of %g s (the first %g s of each left out), %u pairs: level 0 against "
           "the configured levels;\neach figure is mean ± half of its 95 %% interval "
           "(Student t over the rounds)\n\n",
           m->done, m->round_s, m->warmup_s, m->done / 2);
    printf("%-30s %-18s %-18s %s\n", "figure", "level 0", "configured", "configured - level 0");
    for (unsigned i = 0; i < m->nfigs; i++) {
        char name[96], a[40], b[40], d[40];
        const char *unit;
        double scale;
        struct vpack_ab ab;
        fig_words(m, &m->figs[i], name, sizeof(name), &unit, &scale);
        if (fig_ab(m, i, &ab) < 0) {
            printf("%-30s n/a (not read in every round)\n", name);
            continue;
        }
        fmt_iv(a, sizeof(a), &ab.a, scale, false);
        fmt_iv(b, sizeof(b), &ab.b, scale, false);
        /* configured minus level 0: the pairs' difference turned round. */
        struct vpack_interval neg = {0 - ab.diff.mean, ab.diff.half, ab.diff.n};
        fmt_iv(d, sizeof(d), &neg, scale, true);
        printf("%-30s %-18s %-18s %s %s\n", name, a, b, d, unit);
    }
    printf("\nverdict: %s\n", verdict);
}

/* {"mean", "half"} in the figure's unit; null for an interval not had. */
static struct json_object *iv_json(const struct vpack_interval *iv, double scale, double sign,
                                   bool *ok)
{
    struct json_object *o = json_object_new_object();
    vpack_json_set(o, "mean", vpack_json_new_number(sign * scale * iv->mean, 6), ok);
    if (isfinite(iv->half))
        vpack_json_set(o, "half", vpack_json_new_number(scale * iv->half, 6), ok);
    else
        vpack_json_set_null(o, "half", ok);
    return o;
}

static struct json_object *fig_json(const struct run *m, unsigned i, bool *ok)
{
    struct json_object *o = json_object_new_object(), *rounds = json_object_new_array();
    char name[96];
    const char *unit;
    double scale;
    struct vpack_ab ab;
    fig_words(m, &m->figs[i], name, sizeof(name), &unit, &scale);
    vpack_json_set_str(o, "figure", name, ok);
    vpack_json_set_str(o, "unit", unit, ok);
    for (unsigned k = 0; k < m->done; k++) {
        double v = m->vals[k * m->nfigs + i];
        /* json-c's null is NULL: an unread round is added as it is, not as a failure. */
        if (isnan(v))
            *ok = *ok && json_object_array_add(rounds, NULL) == 0;
        else
            vpack_json_append(rounds, vpack_json_new_number(scale * v, 6), ok);
    }
    vpack_json_set(o, "rounds", rounds, ok);
    if (fig_ab(m, i, &ab) == 0) {
        vpack_json_set(o, "level0", iv_json(&ab.a, scale, 1, ok), ok);
        vpack_json_set(o, "configured", iv_json(&ab.b, scale, 1, ok), ok);
        vpack_json_set(o, "difference", iv_json(&ab.diff, scale, -1, ok), ok);
    } else {
        vpack_json_set_null(o, "level0", ok);
        vpack_json_set_null(o, "configured", ok);
        vpack_json_set_null(o, "difference", ok);
    }
    return o;
}

static int print_json(const struct run *m, const struct vpack_verdict *v, const char *verdict)
{
    static const char *const kinds[] = {"saved", "cost", "none"};
    struct json_object *root = json_object_new_object(), *figs = json_object_new_array();
    struct json_object *vo = json_object_new_object(), *why = json_object_new_array();
    bool ok = true;
    vpack_json_set_int(root, "rounds", m->done, &ok);
    vpack_json_set_double(root, "round_seconds", m->round_s, &ok);
    vpack_json_set_double(root, "warmup_seconds", m->warmup_s, &ok);
    vpack_json_set_double(root, "confidence", 0.95, &ok);
    for (unsigned i = 0; i < m->nfigs; i++)
        vpack_json_append(figs, fig_json(m, i, &ok), &ok);
    vpack_json_set(root, "figures", figs, &ok);
    vpack_json_set_str(vo, "result", kinds[v->kind], &ok);
    if (v->why & VPACK_WHY_NO_ENERGY)
        vpack_json_append(why, json_object_new_string("no-energy"), &ok);
    if (v->why & VPACK_WHY_OVERLAP)
        vpack_json_append(why, json_object_new_string("overlap"), &ok);
    if (v->why & VPACK_WHY_PC6_WIDE)
        vpack_json_append(why, json_object_new_string("pc6-system-wide"), &ok);
    vpack_json_set(vo, "why", why, &ok);
    vpack_json_set_str(vo, "text", verdict, &ok);
    vpack_json_set(root, "verdict", vo, &ok);
    if (!(root = vpack_json_finish(root, ok))) {
        vpackctl_err("measure: out of memory");
        return VPACKCTL_EXIT_FAIL;
    }
    int ret = vpackctl_print_json(root);
    json_object_put(root);
    return ret;
}

static int report(const struct run *m)
{
    struct vpack_ab *idle = calloc(m->npk + 1, sizeof(*idle));
    struct vpack_verdict_in in;
    struct vpack_verdict v;
    char *text = NULL;
    int ret = VPACKCTL_EXIT_FAIL;
    if (!idle || verdict_in(m, &in, idle) < 0)
        goto out;
    vpack_verdict_decide(&in, &v);
    if (!(text = vpack_verdict_text(&in, &v)))
        goto out;
    if (m->args.json)
        ret = print_json(m, &v, text);
    else {
        print_text(m, text);
        ret = vpackctl_flush();
    }
out:
    if (!text)
        vpackctl_err("measure: out of memory");
    free(text);
    free(idle);
    return ret;
}

/* The CPU model from /proc/cpuinfo, for the verdict's platform reasons; none is fine. */
static void read_cpu(struct run *m)
{
    char *buf = NULL;
    size_t len;
    if (vpack_host_read_file("/", "proc/cpuinfo", 1 << 22, &buf, &len) == 0)
        m->have_cpu = vpack_cpuinfo_model(buf, len, &m->cpu) == 0;
    free(buf);
}

static void run_free(struct run *m)
{
    for (unsigned d = 0; m->doms && d < m->ndoms; d++)
        free(m->doms[d]);
    free(m->doms);
    free(m->pk_id);
    free(m->pk_cpus);
    free(m->figs);
    free(m->vals);
    vpack_hostpower_free(m->hp);
    vpack_host_held_close(&m->stat);
}

int measure_main(int argc, char **argv)
{
    struct run m = {.stat = VPACK_HOST_HELD_INIT};
    int ret;
    if ((ret = parse_options(argc, argv, &m)) != VPACKCTL_PROCEED ||
        (ret = check_rounds(&m)) != VPACKCTL_PROCEED)
        return ret;
    if ((ret = read_status(&m)))
        goto out;
    read_cpu(&m);
    if (vpack_hostpower_new("/", &m.hp) < 0) {
        vpackctl_err("measure: out of memory");
        ret = VPACKCTL_EXIT_FAIL;
        goto out;
    }
    catch_signals();
    ret = run_rounds(&m);
    give_back(&m);
    if (stop_signal) {
        vpackctl_err("measure: stopped by signal %d after %u of %u rounds", (int)stop_signal,
                     m.done, m.nrounds);
        ret = 128 + stop_signal;
    } else if (ret == VPACKCTL_EXIT_OK) {
        ret = report(&m);
    }
out:
    run_free(&m);
    return ret;
}
