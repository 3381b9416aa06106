/* SPDX-License-Identifier: MIT */
/*
 * The cgroup adapter: which hierarchies the host has, the groups libvirt
 * made for a domain, and what CPU hotplug did to them.
 *
 * cgroup v1 cpuset repair. When a CPU goes offline, the kernel removes it
 * from every cpuset cgroup's cpuset.cpus, and when it comes back only the
 * root cpuset gets it again. libvirt's machine and per-domain groups keep it
 * removed, and libvirt cannot pin a thread to that CPU ("Unable to write to
 * .../cpuset.cpus") until the parents are written back, parent first. Only
 * what the hotplug took is written back: a group narrower than its parent
 * may be so on purpose.
 */
#ifndef VPACK_CGROUP_H
#define VPACK_CGROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "vpack/cpuset.h"
#include "vpack/cgroupfs.h"

struct vpack_mem_share;

/*
 * What the groups of libvirt's cpuset hierarchy had (the "machine" and
 * "machine.slice" partitions under root/sys/fs/cgroup/cpuset and every
 * group below them but the per-thread ones), the last time vpack looked,
 * and which CPUs went offline since. The repair gives a group back only
 * what CPU hotplug took from it: never what an administrator (or libvirt)
 * narrowed it to.
 */
struct vpack_cgroup_group {
    char *dir;            /* root-relative, "sys/fs/cgroup/cpuset/machine/..." */
    vpack_cpuset cpus;    /* what it had, CPUs that are offline now included */
};
struct vpack_cgroup_memo {
    bool taken;           /* looked at least once */
    vpack_cpuset online;  /* the CPUs online then */
    vpack_cpuset away;    /* went offline since, not back yet */
    struct vpack_cgroup_group *groups;
    unsigned n;
};

/*
 * Walks the v1 cpuset groups of libvirt's machines top-down, in libvirt's
 * partitions (machine, machine.slice, and partitions, NULL-terminated:
 * the guests' own, from vpack_cgroup_partition_of(); NULL for none;
 * at most VPACK_CGROUP_MAX_PARTITIONS in all, each once). A group gets
 * back the CPUs it had when m was last taken that went offline since (by
 * m's online set, or in gone: CPUs the caller saw go, may be NULL) and are
 * online again, within its parent's CPUs; nothing else is ever added, and
 * nothing is taken away. The per-thread groups (vcpuN, emulator,
 * iothreadN) are left to libvirt, which rewrites them when vpack pins
 * through it. Then m holds what every group has now (plus the CPUs still
 * offline that it had). The first walk only looks. *nfixed counts the
 * groups written. On a host without a cpuset v1 hierarchy it does nothing
 * and returns 0. Returns 0 or -errno (-ENOMEM: m is kept as it was).
 */
int vpack_cgroup_repair(const char *root, struct vpack_cgroup_memo *m, const vpack_cpuset *online,
                        const vpack_cpuset *gone, const char *const *partitions, unsigned *nfixed);
void vpack_cgroup_memo_clear(struct vpack_cgroup_memo *m);

/* Which cgroup hierarchy a controller is on. */
enum vpack_cgroup_ver { VPACK_CGROUP_NONE, VPACK_CGROUP_V1, VPACK_CGROUP_V2 };

/* What vpack needs to know of the host's cgroups. */
struct vpack_cgroup_host {
    struct vpack_cgroup_mounts mounts; /* mount points, absolute */
    enum vpack_cgroup_ver cpuset, memory;
};

/*
 * Finds the cgroup hierarchies from root/proc/self/mounts (the v1
 * hierarchies of cpuset and memory, the cgroup2 mount and the controllers
 * its root's cgroup.controllers lists). Without a mounts file (a fixture
 * tree) it looks for root/sys/fs/cgroup/cgroup.controllers (v2) and
 * root/sys/fs/cgroup/{cpuset,memory}/ (v1). Returns 0 or -ENOMEM; a host
 * without cgroups is "none".
 */
int vpack_cgroup_detect(const char *root, struct vpack_cgroup_host *out);
void vpack_cgroup_host_clear(struct vpack_cgroup_host *h);
/*
 * "v1" (v1 controllers only), "v2" (one unified hierarchy), "hybrid" (v1
 * controllers beside a cgroup2 mount, systemd's /sys/fs/cgroup/unified) or
 * "none". Borrowed.
 */
const char *vpack_cgroup_version(const struct vpack_cgroup_host *h);
/* "v1", "v2" or "none". Borrowed. */
const char *vpack_cgroup_ver_name(enum vpack_cgroup_ver v);

/*
 * The groups libvirt made for one QEMU process, as root-relative
 * directories (NULL when not found). The process's cgroup path (the
 * controller's line of /proc/PID/cgroup, or the "0::" line on v2) ends in
 * QEMU's main thread's group: ".../emulator", below a "libvirt" group on
 * hosts with systemd; the domain's group is what is left without those
 * two (libvirt's own virCgroupV2DetectPlacement does the same):
 *
 *   v2, systemd  /machine.slice/machine-qemu\x2d1\x2dweb.scope/libvirt/emulator
 *   v2, without  /machine/qemu-1-web.libvirt-qemu/emulator
 *   v1           /machine/qemu-1-web.libvirt-qemu/emulator  (cpuset; memory: the group)
 */
struct vpack_cgroup_domain {
    char *memory;                  /* the domain's memory group: memory.numa_stat */
    char *threads;                 /* the parent of vcpuN/, emulator/, iothreadN/ (cpuset) */
    enum vpack_cgroup_ver memory_ver, threads_ver;
};
void vpack_cgroup_domain_find(const char *root, const struct vpack_cgroup_host *h, int pid,
                              struct vpack_cgroup_domain *out);
void vpack_cgroup_domain_clear(struct vpack_cgroup_domain *d);

/* The most partitions one walk visits, libvirt's two defaults included. */
#define VPACK_CGROUP_MAX_PARTITIONS 64
/*
 * The partition d's group is in, as a path in its cpuset hierarchy: the
 * domain's group's parent ("/machine", "/machine.slice", or a custom
 * libvirt <partition> such as "/vpacktest.partition"). NULL when d has no
 * cpuset group, sits at the top, or out of memory. The caller frees it.
 */
char *vpack_cgroup_partition_of(const struct vpack_cgroup_host *h,
                                const struct vpack_cgroup_domain *d);

/*
 * CPU time in clock ticks of one iothread of a domain from the threads
 * libvirt put in its group: d->threads/iothread<id>/tasks (v1) or
 * cgroup.threads (v2), each summed from /proc/<pid>/task/<tid>/stat. The
 * fallback for QEMU that does not name its threads: vpack finds iothreads
 * by name first. Returns 0 or -errno (-ENOENT without a group or pid).
 */
int vpack_cgroup_iothread_ticks(const char *root, const struct vpack_cgroup_domain *d, int pid,
                                int id, uint64_t *ticks);

/*
 * Where a domain's memory is: d->memory/memory.numa_stat of either cgroup
 * version (vpack_numastat_parse) as one share per NUMA node listed (*out the
 * caller frees, as many entries as the file lists nodes) and *bytes, its
 * size. Returns the version of the file read (1 or 2; *n is 0 when it has
 * no usable line), or -errno when it cannot be read (-ENOENT without a
 * group).
 */
int vpack_cgroup_numa_stat(const char *root, const struct vpack_cgroup_domain *d,
                           struct vpack_mem_share **out, unsigned *n, uint64_t *bytes);

/* A cgroup v2 group whose cpuset.cpus.effective lacks online CPUs it should have. */
struct vpack_cgroup_stale {
    char *group;          /* its path in the hierarchy, "/machine.slice/..." */
    vpack_cpuset missing; /* online, allowed by its cpuset.cpus and its parent, not effective */
    char *partition;      /* its cpuset.cpus.partition ("member", "root invalid (...)"), or NULL */
};

/*
 * cgroup v2's side of CPU hotplug. v2 keeps a group's cpuset.cpus when a
 * CPU goes offline and only shrinks cpuset.cpus.effective, which the kernel
 * gives back when the CPU returns, unless a partition is invalid or took
 * the CPU. This checks that it did, writing nothing: it walks libvirt's
 * partitions of the unified hierarchy (machine.slice, machine, and the
 * partitions, NULL-terminated, of the guests: vpack_cgroup_partition_of();
 * NULL for none) and lists
 * each group whose effective set lacks an online CPU that its cpuset.cpus
 * (or, when empty, its parent's effective set) allows and that no child
 * partition of it holds. Only the topmost group that lost a CPU is listed,
 * not its children. Returns 0 with *out (free with vpack_cgroup_stale_free)
 * and *n, or -ENOMEM; without cpuset on v2, *n is 0.
 */
int vpack_cgroup_check_effective(const char *root, const struct vpack_cgroup_host *h,
                                 const vpack_cpuset *online, const char *const *partitions,
                                 struct vpack_cgroup_stale **out, unsigned *n);
void vpack_cgroup_stale_free(struct vpack_cgroup_stale *s, unsigned n);

#endif
