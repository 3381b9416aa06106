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

/*
 * Parses a memory.numa_stat text of either cgroup version into the share of
 * the group's memory per NUMA node:
 *   v1, in pages: "total=512 N0=500 N1=12"; the "hierarchical_total=" line
 *       (the group and its children) when there is one, else "total=".
 *   v2, in bytes: one line per type, "anon N0=2097152 N1=0"; the sum of the
 *       page-reclaim lists (inactive_anon, active_anon, inactive_file,
 *       active_file, unevictable: what v1's total counts), or of anon and
 *       file when the text has none of those. Other lines are ignored.
 * Writes at most max entries to out (nodes in the order listed: the kernel
 * lists them ascending; shares summing to 1) and sets *n, and *bytes (unless
 * NULL) to the total in bytes (v1's pages times page_size). Returns the
 * cgroup version of the text (1 or 2); -EINVAL when it is neither or a line
 * it reads is malformed, -ENODATA when the total is 0.
 */
struct vpack_mem_share;
int vpack_numastat_parse(const char *buf, size_t len, uint64_t page_size,
                         struct vpack_mem_share *out, unsigned max, unsigned *n, uint64_t *bytes);

/*
 * Parses one uevent datagram ("ACTION@DEVPATH\0KEY=VALUE\0..."). Returns 1
 * with *cpu and *online set for a CPU online/offline event, 0 for any other
 * event, -EINVAL for garbage.
 */
int vpack_uevent_parse_cpu(const char *buf, size_t len, int *cpu, int *online);

/*
 * The cgroup path of a process from its /proc/PID/cgroup text: for one v1
 * controller ("4:memory:/machine/qemu-1-a.libvirt-qemu"; the controller
 * list may hold several names, "2:cpu,cpuacct:/..."), or with controller
 * NULL the cgroup v2 line ("0::/machine.slice/..."). A new string (caller
 * frees), or NULL when there is no such line or the path is not absolute.
 */
char *vpack_proc_cgroup_parse(const char *buf, size_t len, const char *controller);

/* Where the cgroup hierarchies vpack reads are mounted (absolute paths, or NULL). */
struct vpack_cgroup_mounts {
    char *cpuset;  /* the v1 hierarchy with the cpuset controller */
    char *memory;  /* the v1 hierarchy with the memory controller */
    char *unified; /* the first cgroup2 mount: /sys/fs/cgroup, or .../unified on a hybrid host */
};

/*
 * Reads the cgroup and cgroup2 lines of a /proc/self/mounts text
 * ("cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0"), decoding
 * the kernel's octal escapes in mount points; other lines are skipped.
 * Returns 0 (*out filled; clear it with vpack_cgroup_mounts_clear) or
 * -ENOMEM.
 */
int vpack_cgroup_mounts_parse(const char *buf, size_t len, struct vpack_cgroup_mounts *out);
void vpack_cgroup_mounts_clear(struct vpack_cgroup_mounts *m);

/* The kernel keeps the first 15 bytes of a thread's name (TASK_COMM_LEN - 1). */
#define VPACK_COMM_MAX 15

/*
 * QEMU started with "-name ...,debug-threads=on" (libvirt always asks for
 * it) names its threads: "CPU 3/KVM" ("CPU 3/TCG", ...) is a vCPU thread,
 * "ALL CPUs/TCG" runs every vCPU (single-threaded TCG), "IO <id>" runs the
 * iothread object <id>, or the monitor's ("IO mon_iothread"). Anything
 * else (the main thread, "call_rcu", "worker", ...) is OTHER.
 */
enum vpack_qemu_thread { VPACK_QEMU_OTHER, VPACK_QEMU_VCPU, VPACK_QEMU_IOTHREAD };
/* The kind of a thread named comm (no newline); *vcpu is the vCPU (-1: all) for VCPU. */
enum vpack_qemu_thread vpack_qemu_thread_kind(const char *comm, int *vcpu);

/*
 * Which of libvirt's iothreads a thread named comm runs: libvirt creates
 * iothread N as "-object iothread,id=iothreadN", so QEMU names it "IO
 * iothreadN", cut to VPACK_COMM_MAX bytes (ids from 10000 up are cut).
 * Returns the index in ids[] whose name comm is, -1 for none, -2 when
 * the cut name is that of more than one of ids[] (1000 and 10000 both read
 * "IO iothread1000").
 */
int vpack_qemu_iothread_match(const char *comm, const unsigned *ids, unsigned n);

#endif
