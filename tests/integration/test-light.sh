#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Which intervals read the guests (issue 24 item 6), interval by interval:
# vpackd against a real libvirtd with no guest, reading a /proc/stat that
# this test writes (agent.sysfs_root: a tree holding proc/stat,
# proc/self/mounts and the online CPUs), 2 s intervals, the default
# watermarks (pack 0.6, spread 0.8: half their gap is 0.1). The test waits
# for each of vpackd's intervals to end (its samples counter), says from
# reads_skipped whether that interval read the guests, and writes what the
# next one reads.
#
#   steady    CPU 0 30 % busy, CPU 1 2 %: intervals read nothing but
#             /proc/stat, every tenth reads the guests (due)
#   blip      CPU 0 at 36 % for one interval (beyond its band of 0.02 to
#             0.03, below the half gap): read nothing, then or after
#   lasting   CPU 0 at 36 % for two intervals: the second reads
#   jump      CPU 0 at 50 % for one interval (beyond the half gap): read at
#             once
#
# Each phase starts right after a due read, so that no due read falls in it.
# With the vpackd of before this check (a read for every move out of the
# band) the blip reads the guests and the test fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
vp_test light vplt-
vp_need_built "$VPACKD" "$VPACKCTL"

vp_install_deps
vp_start_libvirtd
vp_destroy_all_test_domains
others=$(vp_virsh list --name | sed '/^$/d' | wc -l)
[ "$others" -eq 0 ] || vp_die "$others domain(s) running: this test needs a libvirtd with none"

root=$work/root
mkdir -p "$root/proc/self" "$root/sys/devices/system/cpu"
echo 0-1 >"$root/sys/devices/system/cpu/online"
: >"$root/proc/self/mounts"
INTERVAL_MS=2000
ticks=$((INTERVAL_MS / 10)) # /proc/stat counts in 10 ms ticks
b0=0 i0=0 b1=0 i1=0
# put PCT0 PCT1: one more interval of CPU 0 and CPU 1 that busy, written in
# place (vpackd holds the file open and reads it with pread).
put() {
    b0=$((b0 + $1 * ticks / 100)); i0=$((i0 + (100 - $1) * ticks / 100))
    b1=$((b1 + $2 * ticks / 100)); i1=$((i1 + (100 - $2) * ticks / 100))
    printf 'cpu  %d 0 0 %d 0 0 0 0 0 0\ncpu0 %d 0 0 %d 0 0 0 0 0 0\ncpu1 %d 0 0 %d 0 0 0 0 0 0\nintr 0\nctxt 0\nbtime 0\nprocesses 1\nprocs_running 1\nprocs_blocked 0\n' \
        $((b0 + b1)) $((i0 + i1)) "$b0" "$i0" "$b1" "$i1" >"$root/proc/stat"
}
put 30 2

vp_start_agent --ready=libvirt -- --topology 'synthetic:"package:2 core:1 pu:1"' \
    --set agent.state_dir="$work/state" --set control.socket="$sock" \
    --set agent.sysfs_root="$root" --set agent.interval_ms=$INTERVAL_MS \
    --set metrics.enabled=false

read -r last_n last_r <<<"$(vp_counters samples reads_skipped)"
# tick PCT0 PCT1: waits for vpackd's interval to end, sets $was to "light"
# or "read" (did that interval read the guests?), then writes what the next
# interval reads. An interval missed (the test too slow to write in time)
# ends the test: its readings would be off.
tick() {
    local n r t
    for t in $(seq 200); do
        read -r n r <<<"$(vp_counters samples reads_skipped)"
        [ "$n" != "$last_n" ] && break
        sleep 0.02
    done
    [ "$n" != "$last_n" ] || vp_die "vpackd ran no interval in 4 s"
    [ $((n - last_n)) -eq 1 ] || vp_die "the test missed $((n - last_n - 1)) interval(s): its /proc/stat is off"
    put "$1" "$2"
    if [ $((r - last_r)) -eq 1 ]; then was=light; else was=read; fi
    last_n=$n last_r=$r
}
# anchor: steady intervals until one reads the guests after three that did
# not (a due read on a steady host); its next interval reads what was written
# last, the steady load.
anchor() {
    local lights=0 k
    for k in $(seq 30); do
        tick 30 2
        if [ "$was" = light ]; then
            lights=$((lights + 1))
        elif [ "$lights" -ge 3 ]; then
            return 0
        else
            lights=0
        fi
    done
    vp_die "no due read after three light intervals in 30 intervals: vpackd never settled"
}

# phase WHAT WANT LOAD...: one tick per LOAD (CPU 0's busy %, CPU 1 at 2),
# each load read by the interval after the one the tick saw end; the
# intervals' outcomes against WANT. The first interval reads what was
# written before the phase (the steady load after an anchor).
phase() {
    local what=$1 want=$2 got=() l
    shift 2
    for l in "$@"; do
        tick "$l" 2
        got+=("$was")
    done
    if [ "${got[*]}" = "$want" ]; then
        vp_pass "$what (intervals: ${got[*]})"
    else
        vp_fail "$what: want $want, got ${got[*]}"
    fi
}

echo "== steady"
anchor
vp_pass "steady load: light intervals, and a due read after them"

echo "== blip"
# Intervals: steady, the blip, back, back.
phase "CPU 0 +0.06 for one interval: no read, then or after" "light light light light" 36 30 30 30

echo "== lasting"
# Intervals: back, the move's first, its second.
phase "CPU 0 +0.06 for two intervals: read in the second" "light light read" 36 36 30

echo "== jump"
anchor
# Intervals: steady, the jump.
phase "CPU 0 +0.20 for one interval: read at once" "light read" 50 30

echo "== stop"
vp_stop_agent_check
vp_verdict
