/* SPDX-License-Identifier: MIT */
/*
 * Oracles: the fewest packages that could carry one interval of a trace, the
 * yardsticks for a policy's package count. Pure.
 *
 * Each package p is given a capacity cap[p], in CPUs' worth of work. A set S
 * of packages holds the interval when
 *  (a) capacity: the sum over S of cap[p] is at least the demand (every
 *      thread's util, each cut to 1), and
 *  (b) bounds: every thread with demand > 0 can run in S: its guest pin, else
 *      its domain's cpuset bound, else any usable CPU, meets a CPU of S.
 * The oracle is the size of the smallest such S (all packages when none is).
 *
 * Two capacities, two oracles (vpackctl simulate reports both):
 *
 *  - The capacity bound (vpack_oracle_capacity_real()): cap[p] is the most
 *    work the package can serve at 100 %: ncores + smt_gain * (ncpus -
 *    ncores), the host model's per-core capacity 1 + smt_gain * (k - 1)
 *    (include/vpack/model.h, step 4) summed over its cores, every CPU busy.
 *    It is a true lower bound of the packages with work of any placement
 *    that serves the whole demand and keeps every pin and bound: such a
 *    placement's working set W serves the demand within W's capacity, so W
 *    satisfies (a), and every thread with demand runs inside its allowed
 *    CPUs in W, so W satisfies (b); hence |W| >= the smallest such set. A
 *    policy whose working set is smaller in an interval has left demand
 *    unserved in that interval; one that is smaller with every demand served
 *    has a bug (vpackctl simulate counts such intervals and fails on one).
 *  - The policy target (vpack_oracle_capacity_target()): cap[p] is ncores *
 *    pack_watermark, the load the policy aims to leave on a package. Not a
 *    bound: a policy that fills packages past the pack watermark (up to its
 *    spread watermark) or counts SMT siblings legitimately uses fewer.
 *
 * A third count is not a bound but an optimum under the host model:
 *
 *  - The delay-bounded optimum (vpack_oracle_delay_packages(), capacities
 *    as the capacity bound's): the size of the smallest set S that holds
 *    the interval ((a) and (b)) and on whose usable CPUs, c of them, the
 *    model's queueing formula (include/vpack/model.h, step 5) puts the p99
 *    of the interval's vCPU delays at most a stated bound: with the whole
 *    demand D served, spread evenly over S's CPUs, vCPU i of demand d waits
 *    d * W((D - d) / c, c), W the model's wait factor
 *    (vpack_model_wait_factor()), and at least n - floor(n / 100) of the
 *    interval's n vCPUs wait at most the bound. It is what the model says
 *    a placement that spreads evenly over the fewest packages would need; it
 *    leaves out the model's other costs (SMT co-running, foreign load, pin
 *    and refill work, deep-state exits: step 8) and a placement's uneven
 *    masks, so a real placement, or the model's own levels, may have less
 *    delay on fewer packages (a lumpy placement can put the light vCPUs on
 *    idle CPUs) or more. It is never below the capacity bound: its sets
 *    satisfy (a) and (b), and the capacity bound is the smallest such set
 *    (for larger hosts both are lower bounds, see below, and the
 *    delay-bounded one is the larger of the capacity bound's lower bound and
 *    the delay one). W decreases as c grows with D fixed, so among sets of
 *    one size the one with the most CPUs has the least delay.
 *
 * Exact for hosts of at most VPACK_ORACLE_EXACT_MAX packages: the sets are
 * enumerated by size, smallest first. For larger hosts it is a lower bound,
 * the larger of two:
 *  - capacity: the fewest packages, largest capacity first, whose capacities
 *    reach the demand. Proof: any k packages hold at most the capacity of
 *    the k largest, so a smaller S fails (a).
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
 * A thread demanding at most this much (CPUs: 10 us a second) demands
 * nothing here. The host model counts a package with at most
 * VPACK_MODEL_WORK_EPS (model.h, 1e-9) CPUs of work as idle: a larger share,
 * even spread over a thousand CPUs of several packages, still leaves one of
 * them working (test-model's test_oracle_eps_above_model_eps keeps it so).
 */
#define VPACK_ORACLE_EPS 1e-5

/* cap[p] = ncores + smt_gain * (usable CPUs - ncores) for every package of topo. */
void vpack_oracle_capacity_real(const struct vpack_topology *topo, double smt_gain, double *cap);

/* cap[p] = ncores * pack_watermark for every package of topo. */
void vpack_oracle_capacity_target(const struct vpack_topology *topo, double pack_watermark,
                                  double *cap);

/*
 * The oracle's package count for snap (util = demand) on topo, with cap[]
 * (one per package, > 0) as above; *exact (may be NULL) says whether it is
 * the minimum or a lower bound of it. Returns the count: 0 when no thread
 * demands anything (a policy still keeps one package awake), else >= 1
 * when topo has a package; or -ENOMEM.
 */
int vpack_oracle_packages(const struct vpack_topology *topo, const double *cap,
                          const struct vpack_snapshot *snap, bool *exact);

/*
 * The delay-bounded optimum for snap on topo with cap[] (the capacity
 * bound's) and bound (share of the interval, p99 of the vCPUs' delay): the
 * count, 0 when nothing is demanded, all packages when no set meets the
 * bound; or -ENOMEM. *exact as for vpack_oracle_packages(): beyond
 * VPACK_ORACLE_EXACT_MAX packages it is a lower bound of the optimum, the
 * larger of the capacity lower bound and the fewest packages, most CPUs
 * first, that meet the delay bound (no set of k packages has more CPUs).
 */
int vpack_oracle_delay_packages(const struct vpack_topology *topo, const double *cap,
                                const struct vpack_snapshot *snap, double bound, bool *exact);

#endif
