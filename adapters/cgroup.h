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

#include "vpack/cpuset.h"

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

#endif
