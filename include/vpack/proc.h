/* SPDX-License-Identifier: MIT */
/*
 * Readers of the kernel's /proc text about CPUs, threads and processes
 * (/proc/stat, a task's stat and schedstat, a process's limits), taking the
 * text, not the file.
 */
#ifndef VPACK_PROC_H
#define VPACK_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vpack_cpu_times {
    int cpu;         /* CPU id from "cpuN" */
    uint64_t busy;   /* user + nice + system + irq + softirq + steal, in ticks */
    uint64_t total;  /* busy + idle + iowait */
};

/*
 * Parses the "cpuN ..." lines of a /proc/stat text of len bytes; the
 * aggregate "cpu" line and other lines are skipped. guest and guest_nice are
 * already part of user and nice, so they are not added again. Offline CPUs
 * have no line. Sums stop at UINT64_MAX. Returns 0 with *out (caller frees) and
 * *n set, or -EINVAL for a malformed cpu line (a number beyond 64 bits
 * included), -ENOMEM.
 */
int vpack_procstat_parse(const char *buf, size_t len, struct vpack_cpu_times **out, unsigned *n);

/*
 * Busy fraction (0..1) of one CPU between two readings, or -1 when the
 * counters did not advance or went backwards (the CPU was offline between).
 */
double vpack_cpu_times_busy(const struct vpack_cpu_times *before, const struct vpack_cpu_times *after);

/*
 * The rate (per ns) of ns of a counter (run or wait time) that grew over dt
 * ns. last 0: the average, ns / dt. last > 0 (vpackd reads a thread after
 * light intervals, dt spanning them, because a load moved in the last
 * interval of length last): the gap before the last interval is taken at
 * the thread's steady rate prev and the rest is the last interval's,
 * max(0, ns - prev * (dt - last)) / last, so that a step is not averaged
 * over the gap. dt <= last is the average again; dt <= 0 gives 0.
 */
double vpack_gap_rate(double ns, double prev, double dt, double last);

/*
 * Reads the CPU time of one thread from its /proc/PID/task/TID/stat text:
 * utime + stime (fields 14 and 15, after the parenthesised name, which may
 * itself hold spaces and parentheses), in clock ticks. Returns 0 or -EINVAL.
 */
int vpack_task_stat_parse(const char *buf, size_t len, uint64_t *ticks);
/*
 * The start time of a process from its /proc/PID/stat text (field 22, in
 * clock ticks after boot): with the pid, it names one process for good
 * within a boot. Returns 0 or -EINVAL.
 */
int vpack_task_stat_start(const char *buf, size_t len, uint64_t *start);

/* What a process's /proc/PID/stat says of its resources (proc(5)). */
struct vpack_proc_usage {
    uint64_t utime, stime; /* CPU time in user and kernel mode, clock ticks (fields 14, 15) */
    uint64_t nthreads;     /* threads it has now (field 20) */
    uint64_t starttime;    /* clock ticks after boot (field 22) */
    uint64_t vsize;        /* virtual memory, bytes (field 23) */
    uint64_t rss;          /* resident set, pages (field 24) */
};
/* Parses a /proc/PID/stat text into *out. Returns 0 or -EINVAL. */
int vpack_proc_usage_parse(const char *buf, size_t len, struct vpack_proc_usage *out);

/*
 * A process's CPU time (utime + stime of its /proc/PID/stat: every thread it
 * has or had, in clock ticks of tick_ns) watched across the intervals in
 * which vpackd must look at its threads again though no CPU's load moved
 * (every tenth): one read a process instead of one a thread. The rate since
 * the last reading is compared with the rate over the window that ended at
 * the last reading made beside a read of every thread (the reference). Both
 * are whole ticks, each of utime and stime rounded down: a difference of
 * two readings is off by less than 2 ticks, 2 * tick_ns / window of a rate,
 * and that bound is counted against the band on both windows, so a change
 * of more than band is never taken for none.
 */
struct vpack_usage_watch {
    uint64_t ticks, at_ns; /* the last reading, and when (ns, any one clock) */
    double ref_rate;       /* CPUs, over the window that ended at the last full read */
    double ref_err;        /* its quantisation bound, CPUs */
    uint64_t ref_at_ns;    /* when that full read was */
    bool have_last, have_ref;
};

/*
 * True when ticks read at now_ns show a rate since w's last reading within
 * band of w's reference, both windows' quantisation bounds included, and
 * the reference is less than max_age_ns old. False without a last reading
 * or a reference, for a window of no length, or for a count that went
 * backwards (another process).
 */
bool vpack_usage_unchanged(const struct vpack_usage_watch *w, uint64_t ticks, uint64_t now_ns,
                           double tick_ns, double band, uint64_t max_age_ns);

/*
 * Takes the reading ticks at now_ns as w's last. full: made beside a read
 * of every thread, so the rate over the window since the last reading
 * becomes the reference (none for a window of no length or a count that
 * went backwards).
 */
void vpack_usage_note(struct vpack_usage_watch *w, uint64_t ticks, uint64_t now_ns, double tick_ns,
                      bool full);

/*
 * The part at the end of a domain's gap (its threads last read at read_ns)
 * that a read at now_ns may show a move in: the last argument of
 * vpack_gap_rate(). last_ns when it is set (the interval or two a CPU asked
 * for after light intervals); else, where a due read found the process's
 * CPU time steady after read_ns and left the threads unread, the time since
 * that reading (a step in the interval after it is not averaged over the
 * whole gap); else 0, the average.
 */
double vpack_usage_last(const struct vpack_usage_watch *w, uint64_t read_ns, double last_ns,
                        uint64_t now_ns);
/*
 * The boot time from a /proc/stat text: its "btime" line, seconds since the
 * epoch. Returns 0, -ENOENT without such a line, or -EINVAL.
 */
int vpack_procstat_btime(const char *buf, size_t len, uint64_t *btime);
/*
 * The soft limit on open files from a /proc/PID/limits text (the "Max open
 * files" line): *soft, UINT64_MAX for "unlimited". Returns 0, -ENOENT
 * without that line, or -EINVAL.
 */
int vpack_proc_limits_open_files(const char *buf, size_t len, uint64_t *soft);

/* A thread's scheduler statistics, from /proc/PID/task/TID/schedstat. */
struct vpack_schedstat {
    uint64_t run_ns;   /* time on a CPU */
    uint64_t wait_ns;  /* time runnable, waiting in a run queue */
    uint64_t slices;   /* timeslices run */
};

/*
 * Parses a /proc/PID/task/TID/schedstat text ("run_ns wait_ns slices\n",
 * the three numbers the kernel prints with CONFIG_SCHED_INFO). Returns 0 or
 * -EINVAL (fewer than three numbers, anything after them but a newline, a
 * number beyond 64 bits).
 */
int vpack_schedstat_parse(const char *buf, size_t len, struct vpack_schedstat *out);

#endif
