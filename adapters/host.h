/* SPDX-License-Identifier: MIT */
/*
 * The host adapter: /proc and /sys reads under a root directory ("/" on a
 * live host, a fixture tree in tests), and the CPU hotplug watcher.
 */
#ifndef VPACK_HOST_H
#define VPACK_HOST_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "vpack/cpuset.h"
#include "vpack/proc.h"
#include "vpack/qemu-threads.h"

/*
 * Reads root/path whole (at most max bytes; larger is -EFBIG) into a
 * NUL-terminated buffer the caller frees; with root NULL, path as given (a
 * relative one from the working directory). Returns 0 or -errno.
 */
int vpack_host_read_file(const char *root, const char *path, size_t max, char **buf, size_t *len);
/* The same for what is left to read on fd (a pipe, stdin); fd stays open. */
int vpack_host_read_fd(int fd, size_t max, char **buf, size_t *len);

/*
 * A file read again every interval (/proc/stat): opened once, then read with
 * pread from offset 0 into a buffer kept between reads, so that a read costs
 * no open, close or allocation (issue 24: each second's wake-up is vpackd's
 * floor). Zero it with VPACK_HOST_HELD_INIT; vpack_host_held_close() frees it.
 */
struct vpack_host_held {
    int fd;
    char *buf;
    size_t cap;
};
#define VPACK_HOST_HELD_INIT {-1, NULL, 0}
void vpack_host_held_close(struct vpack_host_held *h);

/*
 * Per-CPU times from root/proc/stat through h (opened at the first read, and
 * again after a read failed); *out is the caller's to free.
 */
int vpack_host_cpu_times(const char *root, struct vpack_host_held *h, struct vpack_cpu_times **out,
                         unsigned *n);

/* The online CPUs from root/sys/devices/system/cpu/online. */
int vpack_host_online_cpus(const char *root, vpack_cpuset *out);

/*
 * The cgroup of process pid, from root/proc/PID/cgroup: for one v1
 * controller, or with controller NULL the cgroup v2 ("0::") line. 0 with
 * *group ("/machine/qemu-1-a.libvirt-qemu/emulator", caller frees), -ENOENT
 * when the process or the line is not there (or pid is not positive), or
 * -errno.
 */
int vpack_host_process_cgroup(const char *root, int pid, const char *controller, char **group);

/*
 * CPU time (utime + stime, in clock ticks) of thread tid of process pid,
 * from root/proc/PID/task/TID/stat. Returns 0, -errno or -EINVAL.
 */
int vpack_host_task_ticks(const char *root, int pid, const char *tid, uint64_t *ticks);

/*
 * The start time of process pid (clock ticks after boot, from
 * root/proc/PID/stat): with the pid it names one run of a program. Returns
 * 0, -ENOENT when there is no such process, or -errno.
 */
int vpack_host_process_start(const char *root, int pid, uint64_t *start);

/*
 * vpackd's own process as the Prometheus client libraries export one: CPU
 * time, memory and start time from root/proc/self/stat (and the boot time of
 * root/proc/stat), open descriptors (the entries of root/proc/self/fd) and
 * their soft limit (root/proc/self/limits). A figure that cannot be read is
 * -1 (its family is left out); returns 0 when all were read, else the
 * first -errno.
 */
struct vpack_prom_process;
int vpack_host_self_process(const char *root, struct vpack_prom_process *out);

/*
 * The host CPUs of the NUMA nodes in nodes, from
 * root/sys/devices/system/node/nodeN/cpulist. Returns 0, or -errno
 * (-ENOENT for a node the host does not have).
 */
int vpack_host_node_cpus(const char *root, const vpack_cpuset *nodes, vpack_cpuset *out);

/* A thread of a process and its name ("IO iothread1", at most VPACK_COMM_MAX bytes). */
struct vpack_host_thread {
    int tid;
    char comm[VPACK_COMM_MAX + 1];
};

/*
 * The threads of process pid and their names, from root/proc/PID/task/ and
 * each TID/comm; a thread that ends while they are read is left out.
 * Returns 0 with *out (caller frees) and *n, or -errno (-ENOENT: no such
 * process).
 */
int vpack_host_threads(const char *root, int pid, struct vpack_host_thread **out, unsigned *n);

/*
 * The CPU time of threads tids[0..n) of process pid, summed into *ticks
 * (vpack_host_task_ticks); *found counts the threads still there. Returns 0
 * or -errno other than -ENOENT (a thread that is gone is only not found).
 */
int vpack_host_threads_ticks(const char *root, int pid, const int *tids, unsigned n,
                             uint64_t *ticks, unsigned *found);

/*
 * A thread's schedstat (vpack_schedstat_parse), read through a descriptor
 * held open, so that a reading each interval is one pread() and no path
 * lookup. vpack_host_schedstat_open() opens root/proc/PID/task/TID/schedstat
 * and returns the descriptor (the caller closes it) or -errno (-ENOENT: no
 * such thread; -ENOTSUP: the thread is there but has no schedstat, a kernel
 * without CONFIG_SCHED_INFO). vpack_host_schedstat_read() returns 0, -ESRCH when the
 * thread has ended since (the kernel's answer on a held file), -EINVAL for
 * a text it cannot read, or -errno.
 */
int vpack_host_schedstat_open(const char *root, int pid, int tid);
int vpack_host_schedstat_read(int fd, struct vpack_schedstat *out);

/*
 * A process's /proc/PID/stat held open (vpack_proc_usage_parse): its CPU
 * time and thread count in one pread() and no path lookup, the cheap look
 * at a domain vpackd need not read thread by thread (vpack_usage_watch).
 * vpack_host_proc_stat_open() returns the descriptor (the caller closes it)
 * or -errno; vpack_host_proc_stat_read() returns 0, -ESRCH when the process
 * has ended since, -EINVAL for a text it cannot read, or -errno.
 */
int vpack_host_proc_stat_open(const char *root, int pid);
int vpack_host_proc_stat_read(int fd, struct vpack_proc_usage *out);

/*
 * root/proc/PID/task held open (O_DIRECTORY; the caller closes it), and the
 * number of threads the process has now, from that descriptor alone: procfs
 * gives the directory one link per thread plus two. -ENOTSUP where the
 * directory's link count says nothing (a fixture on a filesystem that
 * counts no links). The cheap check that a process started or ended a
 * thread.
 */
int vpack_host_task_dir_open(const char *root, int pid);
int vpack_host_task_count(int dirfd);

/*
 * Sets the CPU affinity of every thread of the calling process, listed in
 * root/proc/self/task, to cpus (threads started later inherit their
 * creator's). Returns the number of threads set, or -errno from the first
 * failure other than a thread that ended meanwhile.
 */
int vpack_host_set_own_affinity(const char *root, const vpack_cpuset *cpus);
/* The calling thread's CPU affinity. Returns 0 or -errno. */
int vpack_host_own_affinity(vpack_cpuset *out);
/*
 * The CPU affinity of thread tid (any process's; 0: the calling thread) as
 * the kernel has it now: sched_getaffinity(2), one system call, which
 * gives the thread's mask within the active CPUs. Returns 0, -ESRCH when
 * the thread has ended, or -errno.
 */
int vpack_host_thread_affinity(int tid, vpack_cpuset *out);

/*
 * Watches kernel uevents (NETLINK_KOBJECT_UEVENT) for CPUs going online or
 * offline and calls cb on the loop for each, with the CPU id and its new
 * state; with cpu -1 (and online -1) when the socket overflowed (ENOBUFS)
 * and events were lost. The socket is polled by the loop; nothing blocks.
 */
struct vpack_hotplug;
typedef void (*vpack_hotplug_cb)(void *opaque, int cpu, int online);
int vpack_hotplug_start(uv_loop_t *loop, vpack_hotplug_cb cb, void *opaque,
                        struct vpack_hotplug **out);
/* Stops watching; the memory is freed once the loop has closed the handle. */
void vpack_hotplug_stop(struct vpack_hotplug *h);

#endif
