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

/*
 * Parses one uevent datagram ("ACTION@DEVPATH\0KEY=VALUE\0..."). Returns 1
 * with *cpu and *online set for a CPU online/offline event, 0 for any other
 * event, -EINVAL for garbage.
 */
int vpack_uevent_parse_cpu(const char *buf, size_t len, int *cpu, int *online);

/*
 * The cgroup v1 path of a process for one controller, from its
 * /proc/PID/cgroup text ("4:memory:/machine/qemu-1-a.libvirt-qemu"; the
 * controller list may hold several names, "2:cpu,cpuacct:/..."): a new
 * string (caller frees), or NULL when the controller is not there or the
 * path is not absolute.
 */
char *vpack_proc_cgroup_parse(const char *buf, size_t len, const char *controller);

#endif
