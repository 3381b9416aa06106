/* SPDX-License-Identifier: MIT */
/*
 * Readers of the kernel's cgroup text (/proc/PID/cgroup, the cgroup lines
 * of /proc/self/mounts, memory.numa_stat), taking the text, not the file.
 */
#ifndef VPACK_CGROUPFS_H
#define VPACK_CGROUPFS_H

#include <stddef.h>
#include <stdint.h>

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

#endif
