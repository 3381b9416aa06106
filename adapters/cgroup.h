/* SPDX-License-Identifier: MIT */
/*
 * cgroup v1 cpuset repair. When a CPU goes offline, the kernel removes it
 * from every cpuset cgroup's cpuset.cpus, and when it comes back only the
 * root cpuset gets it again. libvirt's machine and per-domain groups keep it
 * removed, and libvirt cannot pin a thread to that CPU ("Unable to write to
 * .../cpuset.cpus") until the parents are written back, parent first.
 */
#ifndef VPACK_CGROUP_H
#define VPACK_CGROUP_H

#include <stdint.h>

#include "vpack/cpuset.h"

struct vpack_mem_share;

/*
 * Walks the cpuset hierarchy of libvirt's machines under
 * root/sys/fs/cgroup/cpuset (the "machine" and "machine.slice" partitions)
 * top-down and gives every group above the per-thread groups (vcpuN,
 * emulator, iothreadN) its parent's CPUs back, limited to online. The
 * per-thread groups are left to libvirt, which rewrites them when vpack
 * pins through it. *nfixed counts the groups written. On cgroup v2 (no
 * cpuset v1 mount) it does nothing and returns 0.
 */
int vpack_cgroup_repair(const char *root, const vpack_cpuset *online, unsigned *nfixed);

/*
 * The cgroup v1 groups of a domain from its QEMU process pid: *memcg (the
 * memory group) and *cpusetcg (the domain's cpuset group: QEMU's main
 * thread sits in its emulator/ child, which is cut off). Each is a string
 * the caller frees, or NULL when the process or the controller is not
 * there.
 */
void vpack_cgroup_domain_groups(const char *root, int pid, char **memcg, char **cpusetcg);

/*
 * CPU time in clock ticks of one iothread of a domain: the tasks of its
 * group root/sys/fs/cgroup/cpuset<cpusetcg>/iothread<id>/ (where libvirt
 * puts each iothread), summed from /proc/<pid>/task/<tid>/stat. libvirt's
 * stats have no iothread CPU time. Returns 0 or -errno (-ENOENT without a
 * group or pid).
 */
int vpack_cgroup_iothread_ticks(const char *root, const char *cpusetcg, int pid, int id,
                                uint64_t *ticks);

/*
 * Where a domain's memory is: the total= line of
 * root/sys/fs/cgroup/memory<memcg>/memory.numa_stat as one share per NUMA
 * node listed (node ascending; *out the caller frees, as many entries as
 * the file lists nodes). Returns 0 (*n is 0 when the file has no usable
 * total line), or -errno when it cannot be read.
 */
int vpack_cgroup_numa_stat(const char *root, const char *memcg, struct vpack_mem_share **out,
                           unsigned *n);

#endif
