#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Benchmark (not a test): the CPU time one live pin operation costs the host
# outside the guests' own work, the figure behind the host model's move
# charge (VPACK_MODEL_PIN_CPU_MS in include/vpack/model.h).
#
# Starts libvirtd (unless it runs) with VPPC_GUESTS idle TCG guests of 2
# vCPUs, lets them settle, then for VPPC_ROUNDS rounds:
#
#   base: reads utime + stime (/proc/PID/stat) of libvirtd and of every
#         guest's QEMU process, sleeps as long as the pin phase took last
#         time (the first round: VPPC_BASE_S), reads them again;
#   pins: the same reads around VPPC_PINS live pin operations sent through
#         ONE virsh process and connection (commands on its stdin), as
#         vpackd sends them through its one connection: each guest's vCPUs
#         and emulator in turn, alternating between host CPU 0 and CPU 1 so
#         every call moves a thread (`vcpupin --live`, `emulatorpin --live`).
#
# cost per pin = (pins delta - base delta scaled to the pin phase's length)
#                / VPPC_PINS
#
# printed for libvirtd and for the QEMU processes (the moved threads and
# what QEMU does on libvirt's behalf) apart, and virsh's own CPU (the
# client's side: vpackd's in real life). Ticks are 1/CLK_TCK s; with
# 300 pins a 10 ms tick is under 0.04 ms per pin.
#
#   sudo flock /tmp/vpack-live.lock bash tests/bench/bench-pin-cost.sh
#
# Environment: VPPC_GUESTS (3), VPPC_PINS (300), VPPC_ROUNDS (3),
# VPPC_BASE_S (5), VPPC_SETTLE_S (10).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/integration/lib.sh
. "$here/../integration/lib.sh"
# shellcheck disable=SC2034 # used by lib.sh
VP_PREFIX=vpbench-
: "${VPPC_GUESTS:=3}"
: "${VPPC_PINS:=300}"
: "${VPPC_ROUNDS:=3}"
: "${VPPC_BASE_S:=5}"
: "${VPPC_SETTLE_S:=10}"

vp_require_root
trap vp_cleanup EXIT
vp_install_deps
vp_start_libvirtd
vp_build_guest
vp_destroy_all_test_domains

doms=()
for i in $(seq "$VPPC_GUESTS"); do
    d=${VP_PREFIX}pin$i
    vp_define_start "$d" 2 idle
    doms+=("$d")
done
for d in "${doms[@]}"; do vp_wait_ready "$d" || vp_die "$d did not boot"; done
sleep "$VPPC_SETTLE_S"

lv=$(vp__daemon_pid libvirtd) || vp_die "no libvirtd"
qpids=()
for d in "${doms[@]}"; do qpids+=("$(vp_qemu_pid "$d")"); done
hz=$(getconf CLK_TCK)

# ticks_qemu: utime + stime of every guest's QEMU process, summed.
ticks_qemu() {
    local p s=0
    for p in "${qpids[@]}"; do s=$((s + $(vp__proc_ticks "$p"))); done
    echo "$s"
}

# The pin commands: vCPU 0, vCPU 1 and the emulator of each guest in turn,
# host CPU 0 on even passes, 1 on odd ones: each call changes the mask.
pin_script() {
    local n=0 pass=0 d c
    while :; do
        c=$((pass % 2))
        for d in "${doms[@]}"; do
            for what in "vcpupin $d 0 $c --live" "vcpupin $d 1 $c --live" \
                        "emulatorpin $d $c --live"; do
                echo "$what"
                n=$((n + 1))
                [ "$n" -lt "$VPPC_PINS" ] || return 0
            done
        done
        pass=$((pass + 1))
    done
}
script=$(mktemp /tmp/vpack-pin-cost.XXXXXX)
pin_script > "$script"

echo "machine: $(uname -n), $(nproc) CPUs, $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)," \
     "cpuidle driver $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo '?')," \
     "libvirt $(virsh -v), $(qemu-system-x86_64 --version | head -n1)"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); $VPPC_GUESTS idle TCG guests of 2 vCPUs;" \
     "$VPPC_PINS live pins per round through one virsh connection"

base_s=$VPPC_BASE_S
all=()
for r in $(seq "$VPPC_ROUNDS"); do
    l0=$(vp__proc_ticks "$lv"); q0=$(ticks_qemu); t0=${EPOCHREALTIME/./}
    sleep "$base_s"
    l1=$(vp__proc_ticks "$lv"); q1=$(ticks_qemu); t1=${EPOCHREALTIME/./}

    TIMEFORMAT='%U %S'
    l2=$(vp__proc_ticks "$lv"); q2=$(ticks_qemu); t2=${EPOCHREALTIME/./}
    { time virsh -q -c "$VP_URI" < "$script" >/dev/null; } 2> "$script.time"
    l3=$(vp__proc_ticks "$lv"); q3=$(ticks_qemu); t3=${EPOCHREALTIME/./}
    read -r cu cs < "$script.time"

    line=$(awk -v l0="$l0" -v l1="$l1" -v l2="$l2" -v l3="$l3" -v q0="$q0" -v q1="$q1" \
               -v q2="$q2" -v q3="$q3" -v bt=$((t1 - t0)) -v pt=$((t3 - t2)) -v hz="$hz" \
               -v n="$VPPC_PINS" -v cu="$cu" -v cs="$cs" 'BEGIN {
        k = pt / bt
        lb = (l1 - l0) / hz * 1000; lp = (l3 - l2) / hz * 1000
        qb = (q1 - q0) / hz * 1000; qp = (q3 - q2) / hz * 1000
        lpin = (lp - lb * k) / n; qpin = (qp - qb * k) / n
        printf "%.3f %.3f %.3f %.3f %.1f %.1f %.1f %.1f %.0f", lpin, qpin, lpin + qpin,
               (cu + cs) * 1000 / n, pt / 1000 / n, lb / (bt / 1e6), qb / (bt / 1e6), pt / 1e3, lp + qp
    }')
    read -r lpin qpin tot cli wall lbase qbase ptms raw <<< "$line"
    echo "round $r: per pin: libvirtd $lpin ms, QEMU $qpin ms, together $tot ms CPU;" \
         "virsh (client) $cli ms; $wall ms wall per call; idle rates libvirtd $lbase ms/s," \
         "QEMU $qbase ms/s; pin phase ${ptms} ms"
    all+=("$tot")
    base_s=$(awk -v p="$ptms" 'BEGIN {s = p / 1000; printf "%.2f", s < 1 ? 1 : s}')
done
rm -f "$script" "$script.time"
printf '%s\n' "${all[@]}" | sort -n |
    awk '{v[NR] = $1} END {printf "median over %d rounds: %.3f ms CPU per pin (libvirtd + QEMU)\n",
                            NR, v[int((NR + 1) / 2)]}'
