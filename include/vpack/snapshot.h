/* SPDX-License-Identifier: MIT */
/*
 * A snapshot: what the agent observed over one sampling interval, the input
 * of the policy. Its JSON form is documented in vpackctl(1) ("SNAPSHOT
 * FORMAT") and in README.md.
 */
#ifndef VPACK_SNAPSHOT_H
#define VPACK_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>

#include "vpack/cpuset.h"

/* One vCPU, the emulator or one iothread. */
struct vpack_thread_sample {
    int id;              /* vCPU or iothread id; -1 for the emulator */
    double util;         /* CPUs' worth of run time over the interval, >= 0 */
    double delay;        /* run-queue delay as a fraction of the interval, >= 0 */
    double util_now;     /* util and delay of the last interval alone, not smoothed: what */
    double delay_now;    /* a step asks for at once; 0 when not known */
    vpack_cpuset *pin;   /* guest-requested CPU set, or NULL for none (owned) */
    int cpu;             /* CPU it last ran on, or -1 if unknown */
};

struct vpack_mem_share {
    int node;            /* NUMA node OS index */
    double share;        /* fraction of the domain's memory there, 0..1 */
};

struct vpack_domain_sample {
    char *name;
    int level;           /* 0, 1, 2; or -1 when the domain has no policy element */
    vpack_cpuset *cpuset; /* the <vcpu cpuset> bound, or NULL for all usable (owned) */
    unsigned nvcpus;
    struct vpack_thread_sample *vcpus;
    struct vpack_thread_sample emulator;
    unsigned niothreads;
    struct vpack_thread_sample *iothreads;
    unsigned nmemory;
    struct vpack_mem_share *memory;
};

struct vpack_snapshot {
    unsigned interval_ms;
    unsigned ncpus;      /* length of cpu_busy: highest CPU id seen + 1 */
    double *cpu_busy;    /* busy fraction 0..1 per CPU id; negative = not reported */
    /*
     * The last interval alone, not smoothed: ncpus entries like cpu_busy, or
     * NULL when not known. When it is given, the snapshot carries the last
     * interval's values, and a thread's util_now or delay_now of 0 means 0
     * (without it, 0 there means "not known").
     */
    double *cpu_busy_now;
    unsigned ndomains;
    struct vpack_domain_sample *domains;
};

/*
 * Parses one snapshot from a JSON text of len bytes (no NUL needed).
 * Returns 0 with *out set, or -EINVAL with *errmsg (caller frees) naming the
 * key and the bad value.
 */
int vpack_snapshot_parse(const char *buf, size_t len, struct vpack_snapshot **out,
                         char **errmsg);
/*
 * For readers of series and callers that report positions themselves: parses
 * the first JSON value in buf as a snapshot and ignores what follows it.
 * *end is set to the offset just past the value and the whitespace after it,
 * whenever the value was complete (even if it is not a valid snapshot), else
 * to 0. *err_at is set to the byte offset of a JSON syntax error, else to
 * SIZE_MAX; the message then carries no position. Returns 0, -EINVAL, or
 * -ENODATA when the text ended before the value did (empty or blank input
 * included), or -ENOMEM.
 */
int vpack_snapshot_parse_first(const char *buf, size_t len, size_t *end, size_t *err_at,
                               struct vpack_snapshot **out, char **errmsg);
/* One-line JSON (no newline); the caller frees; NULL when out of memory. */
char *vpack_snapshot_to_json(const struct vpack_snapshot *s);
/*
 * The same snapshot as a json-c object, for callers that embed it in a
 * larger answer (the agent's "snapshot" op); the caller puts it. NULL when
 * out of memory.
 */
struct json_object;
struct json_object *vpack_snapshot_to_json_object(const struct vpack_snapshot *s);
void vpack_snapshot_free(struct vpack_snapshot *s);

/*
 * Allocation helpers for code that builds snapshots (agent, tests, bench).
 * vpack_snapshot_new() sets interval_ms to 1000, every cpu_busy entry to -1
 * (not reported) and zeroes the domains; NULL when out of memory.
 */
struct vpack_snapshot *vpack_snapshot_new(unsigned ncpus, unsigned ndomains);
/*
 * Fills an empty (zeroed) domain: copies name, sets level (-1..2) and
 * allocates the vcpus and iothreads arrays (ids default to 0..n-1 / 1..n),
 * every thread with util and delay 0, no pin and cpu -1; the emulator gets
 * id -1 and cpu -1. Returns 0, -EINVAL or -ENOMEM (then d is left empty).
 */
int vpack_domain_sample_init(struct vpack_domain_sample *d, const char *name, int level,
                             unsigned nvcpus, unsigned niothreads);

/* A deep copy of s; NULL when out of memory. */
struct vpack_snapshot *vpack_snapshot_dup(const struct vpack_snapshot *s);

/*
 * Gives s a cpu_busy_now array (every entry -1: not reported) if it has none.
 * Returns 0 or -ENOMEM.
 */
int vpack_snapshot_want_now(struct vpack_snapshot *s);
/*
 * Keeps the last interval's thread readings within what the CPUs showed in
 * that interval: a thread ran no more than the CPUs were busy, and waited in
 * a run queue only while a CPU it may use ran something else. When s has
 * cpu_busy_now, the threads' util_now are scaled down together so that their
 * sum is at most the sum of cpu_busy_now, and each delay_now is cut to the
 * busiest CPU's cpu_busy_now. An agent that reads threads after a few
 * unread intervals puts what it cannot date into the last one; this keeps
 * such a reading from showing a step the CPUs did not show. Nothing is
 * bounded when a CPU with a cpu_busy reading has no cpu_busy_now (a CPU
 * just online: what it ran is unknown). Returns how much util_now it took
 * away (CPUs), 0 when nothing was cut.
 */
double vpack_snapshot_bound_now(struct vpack_snapshot *s);

/*
 * True when b would be the same input to the policy as a, up to band: the
 * same interval, CPUs (reported or not) and domains in the same order with
 * the same names, levels, bounds, thread ids, pins and memory nodes, and
 * every CPU's busy fraction, every thread's util and delay and every memory
 * share within band of a's (|b - a| <= band). The "cpu" a thread last ran
 * on is not compared: the policy reads it only for the cache or package
 * whose SMT discount its run time takes (lib/policy/smt.c), which moves
 * with the CPUs' readings the band compares. vpackd skips planning
 * while each interval's snapshot stays within its band of the last
 * planned one (a drift is measured from that plan, so it cannot creep).
 */
bool vpack_snapshot_within(const struct vpack_snapshot *a, const struct vpack_snapshot *b,
                           double band);
/*
 * The CPUs' part of vpack_snapshot_within(): true when busy[0..ncpus) has
 * a's CPUs, the same ones reported (>= 0), each within band of a's. vpackd
 * leaves the domains unread in an interval whose CPUs stay within the band
 * of the last plan's: a load step on a thread moves its CPU's load.
 */
bool vpack_snapshot_cpus_within(const struct vpack_snapshot *a, const double *busy,
                                unsigned ncpus, double band);
/*
 * The band a light interval allows one CPU (vpackd reads no domain while
 * every CPU stays within its band of the last plan's busy share): the steady
 * band, or twice the CPU's own interval-to-interval noise where that is
 * wider, at most cap. *noise is the moving average (weight 1/8) of
 * |now - prev_now|, each difference counted at most cap; prev_now or now
 * below 0 (not read) leaves it. Returns the band.
 */
double vpack_cpu_band_update(double *noise, double prev_now, double now, double band,
                             double cap);
/* The same with a band per CPU (bands[0..ncpus)); false where bands is NULL. */
bool vpack_snapshot_cpus_within_each(const struct vpack_snapshot *a, const double *busy,
                                     unsigned ncpus, const double *bands);
/*
 * Whether a CPU's move out of its band is one to read the domains for at
 * once (vpackd, issue 24 item 6): a CPU read now and not in a (or the
 * other way round); or a CPU whose busy share of this interval alone
 * (now[c]) is more than at_once from a's (at_once below bands[c] counts as
 * bands[c]); or one whose share was beyond its band on the same side in
 * this interval and the one before (last[c]). A move of one interval that
 * is smaller than at_once waits for the next. A share below 0 is not read.
 * True where a, now, last or bands is NULL or the CPU counts differ: what
 * cannot be compared is read.
 */
bool vpack_snapshot_cpus_moved(const struct vpack_snapshot *a, const double *now,
                               const double *last, unsigned ncpus, const double *bands,
                               double at_once);

#endif
