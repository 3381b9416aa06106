/* SPDX-License-Identifier: MIT */
/*
 * Host topology as the policy sees it: packages (sockets), their physical
 * cores, SMT threads, L3 caches and NUMA nodes, restricted to the CPUs the
 * agent may use. The structures are plain data; only vpack_topology_load()
 * does I/O (through hwloc).
 */
#ifndef VPACK_TOPOLOGY_H
#define VPACK_TOPOLOGY_H

#include "vpack/cpuset.h"

/* One L3 cache (an AMD CCX, an Intel socket's LLC) within a package. */
struct vpack_l3 {
    vpack_cpuset cpus;         /* usable PUs under it (within its package) */
    unsigned ncores;           /* physical cores with at least one of them */
};

struct vpack_package {
    int id;                    /* the package's OS index (physical_package_id) */
    vpack_cpuset cpus;         /* usable PUs of this package */
    unsigned ncores;           /* physical cores with at least one usable PU */
    unsigned threads_per_core; /* most usable PUs on one core */
    unsigned nnuma;            /* NUMA nodes whose CPUs intersect ours */
    int *numa_nodes;           /* their OS indexes, ascending */
    unsigned nl3;              /* L3 caches holding at least one usable PU */
    struct vpack_l3 *l3;       /* those caches, by lowest CPU; NULL when nl3 == 0 */
};

struct vpack_topology {
    vpack_cpuset cpus;       /* every usable CPU */
    unsigned npackages;      /* packages with at least one usable CPU */
    struct vpack_package *packages; /* ascending id: the policy's default order */
    int max_cpu;             /* highest usable CPU id, -1 if none */
    int *cpu_package;        /* [0..max_cpu]: index into packages, or -1 */
    int *cpu_l3;             /* [0..max_cpu]: index into its package's l3, or -1 */
    int *cpu_core;           /* [0..max_cpu]: its physical core, numbered over the
                              * host from 0 (SMT siblings share one), or -1 */
    char *source;            /* the spec it was loaded from */
};

/*
 * Loads a topology. spec is one of:
 *   NULL, "" or "host"      the live host (hwloc's default discovery)
 *   "xml:PATH"              an hwloc XML export
 *   "synthetic:DESC"        an hwloc synthetic description, e.g.
 *                           synthetic:"package:2 core:1 pu:1" or, with L3
 *                           caches inside packages, "package:2 l3:4 core:4
 *                           pu:2"; its PU numbers are taken as real CPU ids
 *   "sysfs:ROOT"            a Linux sysfs tree under ROOT, read with hwloc's
 *                           Linux backend only (no CPUID of this machine)
 * Only online, allowed PUs are kept; reserved (may be NULL) are removed, and
 * if restrict_to is non-NULL only its CPUs are kept. Packages left with no
 * usable CPU are dropped.
 *
 * Returns 0 with *out set (free with vpack_topology_free()), or a negative
 * errno with *errmsg set to a message the caller frees.
 */
int vpack_topology_load(const char *spec, const vpack_cpuset *reserved,
                        const vpack_cpuset *restrict_to, struct vpack_topology **out,
                        char **errmsg);
void vpack_topology_free(struct vpack_topology *t);

/* Index into t->packages of the package holding cpu, or -1. */
int vpack_topology_package_of(const struct vpack_topology *t, int cpu);
/* Index into its package's l3 of the L3 cache holding cpu, or -1 (none, or not usable). */
int vpack_topology_l3_of(const struct vpack_topology *t, int cpu);
/* The physical core of cpu (an index over the host; SMT siblings share it), or -1. */
int vpack_topology_core_of(const struct vpack_topology *t, int cpu);
/* Index into t->packages of the package with OS index id, or -1. */
int vpack_topology_package_index(const struct vpack_topology *t, int id);

/*
 * JSON for `vpackctl topology --json`:
 * {"source": "...", "cpus": "0-3", "packages": [{"id": 0, "cpus": "0-1",
 *  "cores": 2, "threads_per_core": 1, "numa_nodes": [0], "l3": 1}, ...]}
 * Returns a string the caller frees, or NULL when out of memory.
 */
char *vpack_topology_to_json(const struct vpack_topology *t);

#endif
