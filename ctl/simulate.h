/* SPDX-License-Identifier: MIT */
/*
 * vpackctl simulate's own header: what the run (simulate-run.c) fills and
 * each writer (simulate-text.c, simulate-json.c, simulate-svg.c) prints.
 * The command (ctl-simulate.c) reads the options and the inputs, runs, then
 * calls one writer. A new output is a simulate-<name>.c with one function
 * over const struct sim and its figures, declared here.
 */
#ifndef VPACKCTL_SIMULATE_H
#define VPACKCTL_SIMULATE_H

#include <stdbool.h>
#include <stdio.h>

#include "vpack/model.h"
#include "vpack/topology.h"
#include "vpack/trace.h"

/* The levels simulated: 0, 1 and 2. */
#define NLEVELS 3

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
    double delay_bound;     /* > 0: the delay-bounded optimum at this p99 delay bound */
    bool exact;             /* every interval's count was the minimum */
};

struct sim {
    const struct vpack_topology *topo;
    struct vpack_model *model[NLEVELS];
    struct oracle bound, target; /* the capacity bound, the policy target */
    struct oracle delay;         /* the delay-bounded optimum (its cap is bound's) */
    const char *platform;        /* the power model's platform profile */
    struct vpack_power_params power;
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

/* The figures of one level. */
struct figures {
    struct vpack_model_totals t;
    double kwh, saving, served_ratio, moves_per_hour;
    double awake_pkg_s;          /* sum over packages of the time not whole-idle */
    double saving_scope[VPACK_PC6_SCOPES]; /* against level 0, under each deep-state scope */
    double saving_idle_deep;     /* ... under the power model's scope, with idle_w = deep_w */
    double vs_bound, vs_target;  /* package-seconds with work against each oracle */
    struct vpack_model_vm_spread vm; /* per-VM delay and unserved share, across VMs */
    double saturation;           /* saturated over active package-seconds (SLATAH-like) */
    double esv;                  /* energy (kWh) x saturation x unserved share of demand */
    double vs_delay;             /* ... against the delay-bounded optimum */
    double saving_var[VPACK_COST_VARIANTS]; /* against level 0, one cost assumption varied */
    double served_refill0, served_refill2;  /* served ratio with refill_ms 0 and doubled */
};

/*
 * Runs every interval of src (up to max_s seconds, 0: all) through the
 * three models and the oracles, writing each to sim->write when it is set
 * (named write_path in messages). Returns 0 or -1 (reported).
 */
int simulate_run(struct sim *sim, struct source *src, double max_s, const char *write_path);
/* The figures of each level from the models' totals (f[NLEVELS]). Returns 0 or -1 (reported). */
int simulate_figures(const struct sim *sim, struct figures *f);
/* A level under the capacity bound with its demand served: -1 (reported), else 0. */
int simulate_bound_broken(const struct sim *sim);

/* The writers: the table on stdout, the JSON object on stdout, the SVG timeline into path. */
int simulate_print_text(const struct sim *sim, const struct figures *f);
int simulate_print_json(const struct sim *sim, const struct figures *f);
int simulate_write_svg(const struct sim *sim, const struct figures *f, const char *path);

#endif
