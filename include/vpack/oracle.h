/* SPDX-License-Identifier: MIT */
/*
 * The oracle: the fewest packages that could carry one interval of a trace,
 * the yardstick for the policy's active package count. Pure.
 *
 * A set S of packages holds the interval when
 *  (a) capacity: the sum over S of cores * pack_watermark is at least the
 *      demand (every thread's util, each cut to 1), and
 *  (b) bounds: every thread with demand > 0 can run in S: its guest pin, else
 *      its domain's cpuset bound, else any usable CPU, meets a CPU of S.
 * The oracle is the size of the smallest such S (all packages when none is).
 *
 * Exact for hosts of at most VPACK_ORACLE_EXACT_MAX packages: the sets are
 * enumerated by size, smallest first. For larger hosts it is a lower bound,
 * the larger of two:
 *  - capacity: the fewest packages, largest first, whose cores *
 *    pack_watermark reach the demand. Proof: any k packages have at most the
 *    cores of the k largest, so a smaller S fails (a).
 *  - disjoint bounds: threads whose allowed package sets are pairwise
 *    disjoint (picked greedily, smallest set first) each need a package of S
 *    of their own, so |S| is at least their number by (b).
 * A lower bound of both conditions is a lower bound of the minimum.
 */
#ifndef VPACK_ORACLE_H
#define VPACK_ORACLE_H

#include <stdbool.h>

#include "vpack/snapshot.h"
#include "vpack/topology.h"

#define VPACK_ORACLE_EXACT_MAX 16

/*
 * The oracle's package count for snap (util = demand) on topo; *exact (may
 * be NULL) says whether it is the minimum or a lower bound. Returns the
 * count (>= 1 when topo has a package), or -ENOMEM.
 */
int vpack_oracle_packages(const struct vpack_topology *topo, double pack_watermark,
                          const struct vpack_snapshot *snap, bool *exact);

#endif
