/* SPDX-License-Identifier: MIT */
/* A reader for the per-CPU lines of /proc/stat, taking the text, not the file. */
#ifndef VPACK_PROCSTAT_H
#define VPACK_PROCSTAT_H

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
 * Reads the CPU time of one thread from its /proc/PID/task/TID/stat text:
 * utime + stime (fields 14 and 15, after the parenthesised name, which may
 * itself hold spaces and parentheses), in clock ticks. Returns 0 or -EINVAL.
 */
int vpack_task_stat_parse(const char *buf, size_t len, uint64_t *ticks);

/*
 * Parses the "total=" line of a cgroup v1 memory.numa_stat text
 * ("total=512 N0=500 N1=12") into the share of pages per NUMA node. Writes
 * at most max entries to out (node ascending, shares summing to 1), sets *n,
 * and returns 0; -EINVAL when there is no total line, -ENODATA when the
 * total is 0.
 */
struct vpack_mem_share;
int vpack_numastat_parse(const char *buf, size_t len, struct vpack_mem_share *out, unsigned max,
                         unsigned *n);

#endif
