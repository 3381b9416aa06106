#!/bin/bash
# SPDX-License-Identifier: MIT
# Writes the doctor's fixture trees (README.md says what each one holds).
# Run from this folder; it replaces the trees. Written by hand from the
# kernel's sysfs ABI (Documentation/ABI/testing/sysfs-devices-system-cpu,
# sysfs-devices-power) and procfs, not copied from a host.
set -eu
cd "$(dirname "$0")"

w() { mkdir -p "$(dirname "$1")"; printf '%s\n' "$2" >"$1"; }

# A 2-package host, CPUs 0-1 on package 0 and 2-3 on package 1, intel_idle
# with POLL, C1, C1E and C6, nothing held, an NVMe and a NIC IRQ on CPU 0,
# RAPL on both packages, cgroup v1 with libvirt's machine partition, the
# hook installed, an Ice Lake-SP CPU (family 6 model 106: package C6
# system-wide) and vpackd.conf saying pc6_scope = system.
base()
{
    local t=$1 cpu s
    rm -rf "$t"
    local c=$t/sys/devices/system/cpu
    w "$c/online" 0-3
    w "$c/cpuidle/current_driver" intel_idle
    w "$c/cpuidle/current_governor" menu
    w "$c/cpuidle/current_governor_ro" menu
    for cpu in 0 1 2 3; do
        w "$c/cpu$cpu/topology/physical_package_id" $((cpu / 2))
        w "$c/cpu$cpu/power/pm_qos_resume_latency_us" 0
        s=0
        for st in POLL:0 C1:2 C1E:10 C6:170; do
            w "$c/cpu$cpu/cpuidle/state$s/name" "${st%:*}"
            w "$c/cpu$cpu/cpuidle/state$s/latency" "${st#*:}"
            w "$c/cpu$cpu/cpuidle/state$s/disable" 0
            s=$((s + 1))
        done
    done
    for pkg in 0 1; do
        w "$t/sys/class/powercap/intel-rapl:$pkg/name" package-$pkg
        w "$t/sys/class/powercap/intel-rapl:$pkg/energy_uj" 123456789
        w "$t/sys/class/powercap/intel-rapl:$pkg/max_energy_range_uj" 262143328850
    done
    w "$t/proc/1/comm" systemd
    mkdir -p "$t/proc/1/fd"
    ln -s /dev/null "$t/proc/1/fd/0"
    irq "$t" 24 nvme0q0 0 0-3
    irq "$t" 25 eth0-rx-0 0 0-1
    # Allocated but without a handler: never fires, not counted.
    w "$t/proc/irq/30/smp_affinity_list" 2
    w "$t/sys/fs/cgroup/cpuset/cpuset.cpus" 0-3
    w "$t/sys/fs/cgroup/cpuset/machine/cpuset.cpus" 0-3
    w "$t/etc/libvirt/hooks/qemu.d/vpack" '#!/bin/sh'
    chmod 0755 "$t/etc/libvirt/hooks/qemu.d/vpack"
    # /proc/cpuinfo's first processor, the keys vpack reads (x86's
    # show_cpuinfo() prints them so, tab-aligned).
    printf 'processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 106\n' \
        >"$t/proc/cpuinfo"
    w "$t/etc/vpack/vpackd.conf" "$(printf '[policy]\npc6_scope = system')"
}

# irq TREE N NAME EFFECTIVE ALLOWED: an IRQ with a handler named NAME.
irq()
{
    w "$1/proc/irq/$2/effective_affinity_list" "$4"
    w "$1/proc/irq/$2/smp_affinity_list" "$5"
    w "$1/proc/irq/$2/$3/.keep" ""
}

# proc TREE PID COMM: a process; hold TREE PID: it holds /dev/cpu_dma_latency.
proc() { w "$1/proc/$2/comm" "$3"; mkdir -p "$1/proc/$2/fd"; ln -s /dev/null "$1/proc/$2/fd/0"; }
hold() { ln -s /dev/cpu_dma_latency "$1/proc/$2/fd/5"; }
# limit TREE US: what reading /dev/cpu_dma_latency gives, a native s32.
limit() { mkdir -p "$1/dev"; python3 -c "import struct,sys; sys.stdout.buffer.write(struct.pack('=i', $2))" >"$1/dev/cpu_dma_latency"; }

base clean

# No cpuidle driver (as this project's machines: a VM without haltpoll).
base no-driver
w no-driver/sys/devices/system/cpu/cpuidle/current_driver none
rm -rf no-driver/sys/devices/system/cpu/cpu*/cpuidle

# C6 disabled on the CPUs of package 1 (cpupower idle-set -d 3 on them).
base c6-disabled
w c6-disabled/sys/devices/system/cpu/cpu2/cpuidle/state3/disable 1
w c6-disabled/sys/devices/system/cpu/cpu3/cpuidle/state3/disable 1

# PM QoS holds: cyclictest holds /dev/cpu_dma_latency at 0 us, and CPU 3's
# resume latency is limited to 20 us (C6 needs 170).
base qos-hold
proc qos-hold 4321 cyclictest
hold qos-hold 4321
limit qos-hold 0
w qos-hold/sys/devices/system/cpu/cpu3/power/pm_qos_resume_latency_us 20

# tuned running latency-performance (force_latency=cstate.id_no_zero:1:
# tuned holds /dev/cpu_dma_latency at C1's 2 us).
base tuned-latency
w tuned-latency/etc/tuned/active_profile latency-performance
proc tuned-latency 812 tuned
hold tuned-latency 812
limit tuned-latency 2

# Package C6 system-wide (the Ice Lake-SP of base) and no vpackd.conf: the
# default pc6_scope, package.
base pc6-wide
rm -r pc6-wide/etc/vpack

# IRQs steered to package 1 by a running irqbalance; the hook not executable.
base irq-pkg1
proc irq-pkg1 640 irqbalance
irq irq-pkg1 26 nvme0q1 2 2-3
irq irq-pkg1 27 eth0-rx-1 3 0-3
chmod 0644 irq-pkg1/etc/libvirt/hooks/qemu.d/vpack
