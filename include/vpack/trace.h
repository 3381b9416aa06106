/* SPDX-License-Identifier: MIT */
/*
 * Traces: what a host's domains demand, interval by interval, for the host
 * model (vpack/model.h). Pure: text in, snapshots out.
 *
 * A trace is JSON lines, one interval per line, each line a snapshot (the
 * format of README.md's "Snapshot format") read as demand: a thread's "util"
 * is the CPUs' worth it wants to run (at most 1), "delay" and "cpus" are
 * ignored by the model ("cpus" may be {}), and per domain "level", "cpuset",
 * "memory" and each thread's "pin" are as in a snapshot. Blank lines are
 * skipped; every other line must be one interval.
 *
 * `vpackctl record` writes the agent's snapshots as a trace: a thread that
 * ran util and waited delay wanted util + delay (cut to 1).
 */
#ifndef VPACK_TRACE_H
#define VPACK_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "vpack/snapshot.h"

/*
 * One line of a series of snapshots, the one reader of both kinds: a trace
 * (item "interval", series "trace") and the series `vpackctl plan` replays
 * ("snapshot", "series"). buf is len bytes; a line break at its end is left
 * out. Returns 0 with *out; -ENODATA for a blank line; -EINVAL with *errmsg
 * (the line's own words, no line number) and *col (the 1-based column it is
 * about, 0: none) for a line that is not exactly one snapshot: bad JSON, not
 * a snapshot, one the line does not finish ("... (a SERIES has one ITEM per
 * line)"), data after it ("unexpected data after the ITEM (a SERIES has one
 * ITEM per line)"); or -ENOMEM.
 */
int vpack_series_parse_line(const char *buf, size_t len, const char *item, const char *series,
                            struct vpack_snapshot **out, size_t *col, char **errmsg);

/*
 * Parses line lineno (for messages) of a trace, len bytes (its line break
 * may be left on), with vpack_series_parse_line(). Returns 0 with *out, -ENODATA for a blank line (nothing to do), or
 * -EINVAL with *errmsg "line N: ..." (column too for JSON syntax) for a line
 * that is not one interval: bad JSON, not a snapshot, data after it, a
 * thread demanding more than one CPU, two domains of one name. -ENOMEM.
 */
int vpack_trace_parse_line(const char *buf, size_t len, unsigned long lineno,
                           struct vpack_snapshot **out, char **errmsg);

/*
 * Turns an agent's snapshot into a trace interval in place: util += delay
 * (cut to 1), delay = 0, cpu = -1.
 */
void vpack_trace_from_observed(struct vpack_snapshot *s);

/*
 * The PlanetLab builder (the CoMon VM traces: one reading per 5 minutes, the
 * VM's utilisation of one CPU in percent). A VM's base demand at time t is
 * its reading, linearly interpolated between readings (held after the last,
 * or held throughout with interpolate = 0), as a share of one CPU.
 *
 * Bursts (burst > 0): the base demand of each VM in interval k is multiplied
 * by exp(burst * z_k - burst^2 / 2), z an AR(1) process in log space,
 * z_k = phi z_(k-1) + sqrt(1 - phi^2) e_k with phi = exp(-interval /
 * burst_tau) (0 when burst_tau is 0: independent each interval) and e_k
 * standard normal from the seed, the VM and the interval; z_0 = e_0. z is
 * stationary N(0, 1), so the factor has mean 1 in every interval and a
 * lag-1 autocorrelation of (exp(burst^2 phi) - 1) / (exp(burst^2) - 1).
 *
 * The split: the VM's wanted work W (its demand plus what did not fit
 * before) is shared by its vCPUs (enum vpack_vcpu_split) with weights drawn
 * from the seed, the VM and the reading (a new draw every reading), each
 * vCPU at most one CPU; a vCPU's excess is spread evenly over the vCPUs
 * with room (the guest's scheduler moves runnable work to idle vCPUs), and
 * what still does not fit is carried to the next interval. So no demand is
 * lost: over a run, the work offered plus the carry at the end is the base
 * demand times the factors, whose mean is the base demand's. Without
 * bursts W is at most one CPU (a reading is at most 100 %) and nothing is
 * ever carried.
 *
 * Emulators demand nothing; there are no iothreads, pins or bounds. Every
 * domain gets level, and its memory home when mem_nodes are given.
 */
enum vpack_vcpu_split {
    VPACK_SPLIT_EVEN,    /* W / nvcpus each: the vCPUs move in lock-step */
    VPACK_SPLIT_SIMPLEX, /* weights uniform on the simplex (Dirichlet(1, ..., 1)) */
    VPACK_SPLIT_HOT,     /* one vCPU (drawn) takes W up to one CPU, the rest evenly */
    VPACK_SPLITS
};

/* "even", "simplex" or "hot". */
const char *vpack_vcpu_split_name(enum vpack_vcpu_split s);

struct vpack_planetlab_vm {
    char *name;            /* domain name (owned) */
    unsigned nvcpus;
    unsigned nreadings;
    double *pct;           /* readings, percent of one CPU (owned) */
    /* The builder's state: interval vpack_planetlab.next - 1's AR(1) value and W. */
    double z, wanted;
};

struct vpack_planetlab {
    unsigned nvms;
    struct vpack_planetlab_vm *vms;
    unsigned interval_ms;  /* the trace's interval; default 1000 */
    unsigned reading_ms;   /* between readings; 300000 */
    double burst;          /* log-normal sigma; 0: none */
    double burst_tau;      /* the burst's correlation time, seconds; 0: independent */
    enum vpack_vcpu_split split;
    int interpolate;       /* 1: linear between readings, 0: hold */
    int level;             /* every domain's level */
    /* Memory homes (simulate --memory-homes spread): VM v's memory is all on
     * NUMA node mem_nodes[v % nmem_nodes], as first touch leaves a VM that
     * started where the host's scheduler put it; none when nmem_nodes is 0.
     * Borrowed. */
    const int *mem_nodes;
    unsigned nmem_nodes;
    uint64_t seed;
    unsigned long next;    /* the builder's: intervals the vms' state has run */
};

/* The default burst_tau, seconds (an ASSUMPTION: see man/vpackctl.1, --burst-tau). */
#define VPACK_PLANETLAB_BURST_TAU 60.0

/*
 * Parses one PlanetLab file's text: one integer or decimal percentage
 * (0..100) per line; blank lines skipped. Returns the count (> 0) with *out
 * (caller frees), or -EINVAL with *errmsg "line N: ...", or -ENOMEM.
 */
int vpack_planetlab_parse(const char *buf, size_t len, double **out, char **errmsg);

/*
 * Picks n of nfiles (n <= nfiles) with seed: idx[0..n) distinct, ascending.
 * The same seed gives the same choice.
 */
void vpack_planetlab_pick(unsigned nfiles, unsigned n, uint64_t seed, unsigned *idx);

/* A VM's vCPU count from seed and its index: 1 (40%), 2 (35%) or 4 (25%). */
unsigned vpack_planetlab_vcpus(uint64_t seed, unsigned vm);

/* The number of intervals the readings cover: the longest VM's readings * reading_ms. */
unsigned long vpack_planetlab_intervals(const struct vpack_planetlab *pl);

/*
 * Interval k of the trace as a snapshot (free with vpack_snapshot_free()).
 * With bursts the intervals depend on the ones before (the AR(1) value and
 * the carry): pl keeps that state, so calls in order k = 0, 1, 2, ... cost
 * one interval each; any other k replays from 0 (the same answer, slower).
 * Returns 0 or -ENOMEM.
 */
int vpack_planetlab_snapshot(struct vpack_planetlab *pl, unsigned long k,
                             struct vpack_snapshot **out);

/* Frees the VMs (names, readings) and the array; the struct itself is the caller's. */
void vpack_planetlab_clear(struct vpack_planetlab *pl);

#endif
