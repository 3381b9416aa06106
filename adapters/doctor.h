/* SPDX-License-Identifier: MIT */
/*
 * vpackctl doctor's facts (vpack/doctor.h), read from a root directory ("/"
 * on a live host, a fixture tree in tests):
 *   root/sys/devices/system/cpu/cpuidle/{current_driver,current_governor(_ro)}
 *   root/sys/devices/system/cpu/online, and per online CPU N
 *     cpuN/topology/physical_package_id, cpuN/cpuidle/stateM/{name,latency,disable},
 *     cpuN/power/pm_qos_resume_latency_us
 *   root/proc/PID/comm and fd/N: who holds /dev/cpu_dma_latency open (the
 *     fd's link), whether tuned or irqbalance runs
 *   root/dev/cpu_dma_latency: the CPU latency limit (a binary s32), read
 *     only when some process holds it (opening it adds a request that
 *     limits nothing)
 *   root/etc/tuned/active_profile
 *   root/proc/irq/N/{effective_affinity_list,smp_affinity_list}: IRQs
 *     with a handler (a directory under N/) only
 *   RAPL and C-state counters through hostpower.h, cgroups through
 *     cgroup.h, root/etc/libvirt/hooks/qemu.d/vpack.
 * libvirt's version is not under a root: the caller adds it.
 */
#ifndef VPACK_ADAPTERS_DOCTOR_H
#define VPACK_ADAPTERS_DOCTOR_H

#include "vpack/doctor.h"

/*
 * Fills *f (zeroed first; vpack_doctor_facts_clear() it) from root. What
 * cannot be read is left unknown, not an error. Returns 0, -ENOMEM, or
 * -errno when root cannot be opened.
 */
int vpack_doctor_read(const char *root, struct vpack_doctor_facts *f);

#endif
