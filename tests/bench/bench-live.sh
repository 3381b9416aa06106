#!/bin/bash
# SPDX-License-Identifier: MIT
#
# One live part of the benchmark suite (run by tests/bench/run-bench.sh):
# a real libvirtd, QEMU (TCG) guests, and vpackd treating CPU 0 and CPU 1 as
# two packages (synthetic:"package:2 core:1 pu:1"). Writes raw measurements
# (snapshots of /proc/stat, cpuidle, guest work counters, vCPU delays, pin
# counters, vpackd's CPU time) under $VPB_OUT/PART/; bench-report.py turns
# them into numbers. Each part starts and stops everything it needs.
#
#   bash tests/bench/bench-live.sh placement light|medium|heavy
#   bash tests/bench/bench-live.sh reaction
#   bash tests/bench/bench-live.sh stability
#   bash tests/bench/bench-live.sh cost
#
# Environment: VPACK_BUILDDIR, VPB_OUT, VPB_ROUNDS (3), VPB_MEASURE_S (10),
# VPB_TRIALS (3, reaction), VPB_STABLE_S (40), VPB_OSC_DEFAULT_S (60),
# VPB_COST_GUESTS ("1 10 30 60"), VPB_COST_ROUNDS (3), VPB_COST_WINDOW_S (12),
# VPB_COST_PROFILE ("10 30"; empty: none), VPB_COST_PROFILE_S (20),
# VPB_COST_WARM_S (20), VPB_BASELINE_VPACKD (the old path's vpackd, for
# cost), VPB_BASELINE_REV (its revision).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/integration/lib.sh
. "$here/../integration/lib.sh"
# shellcheck disable=SC2034 # used by lib.sh
VP_PREFIX=vpbench-
builddir=$(cd "${VPACK_BUILDDIR:-$here/../../build-bench}" && pwd)
VPACKD=$builddir/agent/vpackd
VPACKCTL=$builddir/ctl/vpackctl
: "${VPB_OUT:?set VPB_OUT}"
: "${VPB_ROUNDS:=3}"
: "${VPB_MEASURE_S:=10}"
: "${VPB_TRIALS:=3}"
: "${VPB_STABLE_S:=40}"
: "${VPB_OSC_DEFAULT_S:=60}"
: "${VPB_COST_GUESTS:=1 10 30 60}"
# The agent's configuration for the whole suite: defaults but for shorter
# pack delay and residency, so that a level change settles in seconds.
VPB_AGENT_SET=(--set policy.pack_delay_ms=2000 --set policy.min_residency_ms=4000)
NS=urn:vpack:powerpolicy:1
part=${1:?part}
work=$(mktemp -d /tmp/vpack-bench.XXXXXX)
sock=$work/vpackd.sock
agent_pid=""
tailers=()

vp_require_root
for f in "$VPACKD" "$VPACKCTL"; do [ -x "$f" ] || vp_die "$f not built"; done

cleanup() {
    local rc=$?
    set +e
    for p in "${tailers[@]}"; do kill "$p" 2>/dev/null; done
    if [ -n "$agent_pid" ]; then
        kill -TERM "$agent_pid" 2>/dev/null
        wait "$agent_pid" 2>/dev/null
    fi
    [ $rc -eq 0 ] || { echo "---- vpackd log tail"; tail -n 30 "$work/vpackd.log"; } >&2
    rm -rf "$work"
    vp_cleanup
    return $rc
}
trap cleanup EXIT

start_agent() { # [BINARY [EXTRA_ARGS...]]: this build's vpackd by default
    local bin=${1:-$VPACKD}
    [ $# -eq 0 ] || shift
    vp_wait_no_other_vpackd 600 "the benchmark's vpackd"
    "$bin" --topology 'synthetic:"package:2 core:1 pu:1"' \
        --set agent.state_dir="$work/state" --set control.socket="$sock" \
        --set metrics.enabled=false "${VPB_AGENT_SET[@]}" "$@" >>"$work/vpackd.log" 2>&1 &
    agent_pid=$!
    for _ in $(seq 100); do [ -S "$sock" ] && return 0; sleep 0.1; done
    vp_die "vpackd did not open $sock"
}

status_json() { "$VPACKCTL" status --json --socket "$sock"; }
# One of vpackd's counters; polled once a second while settling: shell
# built-ins (vp_json_field), no interpreter (python3 may be a 0.4 s shim).
counter() { local j; j=$(status_json) && vp_json_field "$j" "$1"; }
meta() { echo "<vpack:powerpolicy xmlns:vpack='$NS' level='$1'/>"; }
set_level() { # LEVEL DOM...
    local l=$1 d; shift
    for d in "$@"; do
        vp_virsh metadata "$d" --uri "$NS" --key vpack --set "<powerpolicy level=\"$l\"/>" --live >/dev/null
    done
}
# "vcpu0=0 vcpu1=0-1 emulator=0": libvirt's live view of a domain's pins.
pins() {
    vp_virsh vcpupin "$1" | awk 'NF == 2 {printf "vcpu%s=%s ", $1, $2}'
    printf 'emulator=%s\n' "$(vp_virsh emulatorpin "$1" | tr -d ' \n')"
}
all_on() { # CPUS DOM...: every vCPU and emulator of each DOM pinned to exactly CPUS
    local want=$1 d kv; shift
    for d in "$@"; do
        for kv in $(pins "$d"); do [ "${kv#*=}" = "$want" ] || return 1; done
    done
}
# all_packed DOM...: every thread of them on CPU 0, or every one on CPU 1 (which
# package stays awake is the policy's choice: the busier one at the first plan),
# by the kernel's view (lib.sh's vp_all_on reads /proc): polling through virsh
# every 0.1 s would itself be more load than the pack watermark allows.
all_packed() { vp_all_on 0 "$@" || vp_all_on 1 "$@"; }
now() { echo "$EPOCHREALTIME"; }
# wait_for SECONDS CMD...: polls every 0.1 s; prints the seconds it took.
wait_for() {
    local limit=$1 start; shift
    start=$(now)
    while :; do
        if "$@"; then awk -v s="$start" -v e="$(now)" 'BEGIN {printf "%.2f\n", e - s}'; return 0; fi
        awk -v s="$start" -v e="$(now)" -v l="$limit" 'BEGIN {exit !(e - s > l)}' && return 1
        sleep 0.1
    done
}

# settle: after a change, wait until no pin call happened for 3 s (at
# least 3 s, at most 25 s).
settle() {
    local last cur quiet=0 t=0
    last=$(counter pins_ok)
    while [ $t -lt 25 ]; do
        sleep 1; t=$((t + 1))
        cur=$(counter pins_ok)
        if [ "$cur" = "$last" ]; then quiet=$((quiet + 1)); else quiet=0; last=$cur; fi
        [ $quiet -ge 3 ] && return 0
    done
    vp_log "WARNING: pins still changing after 25 s"
}

# snap_host: the host's counters (time, /proc/stat, cpuidle), with shell
# builtins only, so that reading them costs the CPUs nothing.
snap_host() {
    local l c s n t u
    echo "T $EPOCHREALTIME"
    while read -r l; do case $l in cpu[0-9]*) echo "P $l" ;; esac; done </proc/stat
    for c in /sys/devices/system/cpu/cpu[0-9]*; do
        for s in "$c"/cpuidle/state[0-9]*; do
            [ -r "$s/time" ] || continue
            read -r n <"$s/name"; read -r t <"$s/time"; read -r u <"$s/usage"
            echo "I ${c##*/} ${s##*/} ${n// /_} $t $u"
        done
    done
}

# snap FILE DOM...: one raw snapshot of everything a cell measures. The
# host's counters are read last in a start snapshot (FILE ending in .a) and
# first in an end snapshot, so that the benchmark's own virsh, vpackctl and
# python calls fall outside the measured window.
snap() {
    local f=$1 d; shift
    {
        case $f in *.a) ;; *) snap_host ;; esac
        for d in "$@"; do
            grep -a '^VPACK-WORK' "$(vp_console_log "$d")" 2>/dev/null |
                awk -v d="$d" '{last[$2] = $0} END {for (k in last) print "W", d, last[k]}' || true
            echo "L $d $(pins "$d")"
        done
        [ $# -eq 0 ] || vp_virsh domstats --vcpu --cpu-total "$@" | awk '/^Domain:/ {gsub(/\047/, "", $2); d = $2}
            /vcpu\.[0-9]+\.(delay|time)=|cpu\.time=/ {print "S", d, $1}'
        status_json | python3 -c 'import json, sys; c = json.load(sys.stdin)["counters"]
print("C pins_ok %d\nC samples %d" % (c["pins_ok"], c["samples"]))'
        # vpackd's CPU time (utime + stime, clock ticks), RSS (kB), ticks
        # per second, and its threads' run time from schedstat (ns)
        echo "A $(awk '{print $14 + $15}' "/proc/$agent_pid/stat") $(awk '/^VmRSS/ {print $2}' "/proc/$agent_pid/status") $(getconf CLK_TCK) $(cat /proc/"$agent_pid"/task/*/schedstat | awk '{s += $1} END {printf "%.0f", s}')"
        case $f in *.a) snap_host ;; esac
    } >"$f"
}

# measure NAME SECONDS DOM...: snapshots NAME.a and NAME.b, SECONDS apart.
measure() {
    local name=$1 secs=$2; shift 2
    snap "$name.a" "$@"
    sleep "$secs"
    snap "$name.b" "$@"
}

boot() { # NAME VCPUS LOAD LEVEL
    vp_define_start "$1" "$2" "$3" "" "$(meta "$4")"
}

setup() {
    vp_install_deps
    vp_start_libvirtd
    vp_build_guest >/dev/null
    vp_destroy_all_test_domains
    mkdir -p "$VPB_OUT/$part"
}

# ----------------------------------------------------------------- placement
# Two guests of 2 vCPUs each; vCPU 0 of each counts work units at a duty
# cycle, vCPU 1 idles. Levels interleaved
# within each round, the order rotated from round to round.
placement() {
    local load=$1 l1 r k lv order
    case $load in
    # QEMU time of one guest, measured: idle 0.004 CPU, work:10 0.14,
    # work:30 0.33 (TCG costs about 1.1x the duty cycle).
    light)  l1=work:10 ;;            # ~0.3 CPU in all: well under one package
    medium) l1=work:40 ;;            # ~0.9 CPU: about one package
    heavy)  l1=work:70 ;;            # ~1.6 CPU: more than one package
    *) vp_die "unknown load $load" ;;
    esac
    local dir=$VPB_OUT/placement/$load
    mkdir -p "$dir"
    boot vpbench-a 2 "$l1" 0
    boot vpbench-b 2 "$l1" 0
    vp_wait_ready vpbench-a; vp_wait_ready vpbench-b
    start_agent
    sleep 5     # the guests' boot tail
    echo "load=$load guest_load=$l1 guests=2 vcpus=2 measure_s=$VPB_MEASURE_S" >"$dir/info"
    for r in $(seq "$VPB_ROUNDS"); do
        order=$(( (r - 1) % 3 ))
        for k in 0 1 2; do
            lv=$(( (k + order) % 3 ))
            vp_log "placement $load round $r level $lv"
            set_level "$lv" vpbench-a vpbench-b
            settle
            measure "$dir/r$r-l$lv" "$VPB_MEASURE_S" vpbench-a vpbench-b
        done
    done
}

# stamp_console DOM FILE: every new console line, prefixed with the host time.
# One process (python3), so that the cleanup can stop it by its pid.
stamp_console() {
    python3 -u - "$(vp_console_log "$1")" "$2" <<'EOF' &
import os, sys, time
src, dst = sys.argv[1], sys.argv[2]
f = open(src, "rb")
f.seek(0, os.SEEK_END)
buf = b""
with open(dst, "a") as out:
    while True:
        chunk = f.read()
        if not chunk:
            time.sleep(0.05)
            continue
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            out.write("%.6f %s\n" % (time.time(), line.decode(errors="replace").rstrip("\r")))
            out.flush()
EOF
    tailers+=($!)
}

# ------------------------------------------------------------------ reaction
# A counts work (work:10); B busy-loops one vCPU but is suspended. Step:
# resume B; drop: suspend B. Both level 2.
reaction() {
    local dir=$VPB_OUT/reaction t i ts tw
    mkdir -p "$dir"
    boot vpbench-a 2 work:10 2
    boot vpbench-b 2 busy:1 2
    vp_wait_ready vpbench-a; vp_wait_ready vpbench-b
    vp_virsh suspend vpbench-b >/dev/null
    start_agent
    stamp_console vpbench-a "$dir/a-work.stamped"
    : >"$dir/events"
    for i in $(seq "$VPB_TRIALS"); do
        if ! t=$(wait_for 40 all_packed vpbench-a vpbench-b); then
            # Nothing to react to: report it (e.g. other load on the host).
            echo "trial=$i step=NA not_packed=1 a=$(pins vpbench-a | tr ' ' ,) b=$(pins vpbench-b | tr ' ' ,)" >>"$dir/events"
            vp_log "reaction trial $i: A and B not packed within 40 s; no step"
            return 0
        fi
        sleep 6     # a steady packed work rate to compare with
        # A random part, so that the trials' steps fall at different points
        # of vpackd's 1 s tick (the packing that ends the wait comes on one).
        sleep "0.$(printf '%03d' $((RANDOM % 1000)))"
        if ! all_packed vpbench-a vpbench-b; then
            # Spread before the step (other load on the host): nothing to time.
            echo "trial=$i step=NA unpacked_at_step=1 a=$(pins vpbench-a | tr ' ' ,) b=$(pins vpbench-b | tr ' ' ,)" >>"$dir/events"
            vp_log "reaction trial $i: A and B spread again before the step; no step"
            continue
        fi
        ts=$(now)
        vp_virsh resume vpbench-b >/dev/null
        t=$(wait_for 30 vp_all_on 0-1 vpbench-a vpbench-b) || t=NA
        echo "trial=$i step=$ts spread_s=$t" >>"$dir/events"
        vp_log "reaction trial $i: spread after ${t}s"
        sleep 8     # the work rate after the spread
        tw=$(now)
        vp_virsh suspend vpbench-b >/dev/null
        t=$(wait_for 60 all_packed vpbench-a vpbench-b) || t=NA
        echo "trial=$i drop=$tw repack_s=$t" >>"$dir/events"
        vp_log "reaction trial $i: re-packed after ${t}s"
    done
    sleep 1
}

# ----------------------------------------------------------------- stability
# steady: the light load at level 2, VPB_STABLE_S seconds. oscillating: C
# counts work at 20% (~0.22 CPU), D (work:60, ~0.66 CPU) is suspended and
# resumed every 5 s, so the load swings from well under the pack watermark
# (0.6) to over the spread one (0.8): first with the suite's short pack delay
# (2 s) and residency (4 s), VPB_STABLE_S seconds, then with vpackd's
# defaults (5 s, 60 s), VPB_OSC_DEFAULT_S seconds, which is what damps it.
oscillate() { # SECONDS
    local end=$((SECONDS + $1))
    while [ $SECONDS -lt $end ]; do
        vp_virsh suspend vpbench-d >/dev/null; sleep 5
        vp_virsh resume vpbench-d >/dev/null; sleep 5
    done
}

stability() {
    local dir=$VPB_OUT/stability
    mkdir -p "$dir"
    boot vpbench-a 2 work:10 2
    boot vpbench-b 2 work:10 2
    vp_wait_ready vpbench-a; vp_wait_ready vpbench-b
    start_agent
    wait_for 60 all_packed vpbench-a vpbench-b >/dev/null || vp_log "WARNING: light load not packed"
    settle
    vp_log "stability: steady light load, ${VPB_STABLE_S}s"
    measure "$dir/steady" "$VPB_STABLE_S" vpbench-a vpbench-b
    vp_virsh destroy vpbench-a >/dev/null; vp_virsh destroy vpbench-b >/dev/null
    boot vpbench-c 2 work:20 2
    boot vpbench-d 2 work:60 2
    vp_wait_ready vpbench-c; vp_wait_ready vpbench-d
    settle
    vp_log "stability: load oscillating (vpbench-d suspended/resumed every 5 s), ${VPB_STABLE_S}s"
    snap "$dir/osc.a" vpbench-c vpbench-d
    oscillate "$VPB_STABLE_S"
    snap "$dir/osc.b" vpbench-c vpbench-d
    # The same swing under vpackd's default pack delay and residency.
    kill -TERM "$agent_pid"; wait "$agent_pid" || true; agent_pid=""
    VPB_AGENT_SET=()
    start_agent
    settle
    vp_log "stability: the same, vpackd's default pack delay and residency, ${VPB_OSC_DEFAULT_S}s"
    snap "$dir/osc-default.a" vpbench-c vpbench-d
    oscillate "$VPB_OSC_DEFAULT_S"
    snap "$dir/osc-default.b" vpbench-c vpbench-d
}

# ---------------------------------------------------------------------- cost
# The whole cost of the agent: vpackd's threads plus the CPU libvirtd spends
# on its behalf (libvirtd with vpackd running minus without), per interval,
# with N idle level-2 guests of 1 vCPU (VPB_COST_GUESTS), for this build's
# vpackd ("new") and the baseline's (VPB_BASELINE_VPACKD, "old": the bulk
# stats sampler), side by side. Per N, VPB_COST_ROUNDS rounds of three
# windows of VPB_COST_WINDOW_S seconds, the order rotated each round: no
# vpackd ("none"), old, new. Every vpackd runs with --keep-placement, so the
# guests keep the packed pins through all three windows: the "none" window
# is the same pins held with vpackd stopped, and its parked CPU's idle share
# is what vpackd's own work is compared with. Threads' CPU time is the sum
# of /proc/PID/task/*/schedstat (ns). Then, for N in VPB_COST_PROFILE, perf
# profiles of vpackd and libvirtd under each vpackd (VPB_COST_PROFILE_S s).
# Each vpackd's window (and its events) starts VPB_COST_WARM_S s after it
# settled: a steady vpackd's reads due every tenth interval compare each
# guest's CPU time with its rate between two earlier due reads, which a
# vpackd started a few seconds before its window does not have yet.
: "${VPB_COST_ROUNDS:=3}"
: "${VPB_COST_WARM_S:=20}"
: "${VPB_COST_WINDOW_S:=12}"
: "${VPB_COST_PROFILE=10 30}" # set and empty: no profile
: "${VPB_COST_PROFILE_S:=20}"

# Sum of the run time (ns) of every thread of PID, from schedstat.
threads_ns() {
    local t s=0 r _
    for t in /proc/"$1"/task/*/schedstat; do
        read -r r _ <"$t" 2>/dev/null || continue
        s=$((s + r))
    done
    echo "$s"
}

# cost_snap FILE: host counters, libvirtd's and the agent's threads' run time,
# and (outside the window, like snap) the agent's counters.
cost_snap() {
    local f=$1 lv
    lv=$(pgrep -xo libvirtd) || vp_die "libvirtd is not running"
    {
        case $f in *.a) ;; *) snap_host; echo "D $(threads_ns "$lv")"
            [ -z "$agent_pid" ] || echo "A $(threads_ns "$agent_pid") $(awk '/^VmRSS/ {print $2}' "/proc/$agent_pid/status")" ;; esac
        if [ -n "$agent_pid" ]; then
            status_json | python3 -c 'import json, sys
d = json.load(sys.stdin)
c = d["counters"]
print("C samples %d\nC pins_ok %d\nC libvirt_calls %d\nC plans_skipped %d\nC wakeup %d" % (
    c["samples"], c["pins_ok"], c.get("libvirt_calls", -1), c.get("plans_skipped", -1),
    -1 if d.get("wakeup_package") is None else d["wakeup_package"]))
if "reads_skipped" in c:
    print("C reads_skipped %d" % c["reads_skipped"])
for k, v in d.get("cycle_ns", {}).items():
    print("C phase_%s %d" % (k, v))'
        fi
        case $f in *.a) [ -z "$agent_pid" ] || echo "A $(threads_ns "$agent_pid") $(awk '/^VmRSS/ {print $2}' "/proc/$agent_pid/status")"
            echo "D $(threads_ns "$lv")"; snap_host ;; esac
    } >"$f"
}

# start_cost_agent BINARY: a vpackd that keeps its pins when stopped.
start_cost_agent() {
    start_agent "$1" --keep-placement
}
stop_agent() {
    [ -n "$agent_pid" ] || return 0
    kill -TERM "$agent_pid"; wait "$agent_pid" || true; agent_pid=""
}

# Settled: no pin for 3 s, and for a vpackd that skips planning, skipping.
cost_settle() {
    settle
    local s0 s1 t=0
    s0=$(counter plans_skipped 2>/dev/null) || return 0
    while [ $t -lt 20 ]; do
        sleep 1; t=$((t + 1))
        s1=$(counter plans_skipped)
        [ "$s1" -gt "$s0" ] && return 0
    done
    vp_log "WARNING: vpackd did not skip a plan within 20 s of settling"
}

cost_window() { # FILE_PREFIX KIND
    local f=$1 kind=$2
    case $kind in
    none) sleep 3 ;;   # libvirtd's tail of the last agent's calls
    old) start_cost_agent "$VPB_BASELINE_VPACKD"; sleep 3; settle; sleep "$VPB_COST_WARM_S" ;;
    new) start_cost_agent "$VPACKD"; sleep 3; cost_settle; sleep "$VPB_COST_WARM_S" ;;
    esac
    cost_snap "$f.a"
    sleep "$VPB_COST_WINDOW_S"
    cost_snap "$f.b"
    stop_agent
}

# profile N KIND: perf's samples of vpackd and libvirtd under one vpackd.
cost_profile() {
    local n=$1 kind=$2 bin lv
    bin=$VPACKD
    [ "$kind" = new ] || bin=$VPB_BASELINE_VPACKD
    lv=$(pgrep -xo libvirtd)
    start_cost_agent "$bin"; sleep 3
    if [ "$kind" = new ]; then cost_settle; else settle; fi
    perf record -q -F 19999 -o "$work/perf.data" -p "$agent_pid,$lv" -- sleep "$VPB_COST_PROFILE_S" \
        >/dev/null 2>&1 || vp_log "WARNING: perf record failed"
    echo "samples=$(counter samples)" >"$dir/profile-g$n-$kind.info"
    stop_agent
    perf report -q -i "$work/perf.data" --stdio -F overhead,comm,dso,sym --percent-limit 0.5 \
        2>/dev/null | sed '/^$/d' | head -n 40 >"$dir/profile-g$n-$kind.txt" || true
    perf report -q -i "$work/perf.data" --stdio -F overhead,sample,comm 2>/dev/null | sed '/^$/d' \
        >"$dir/profile-g$n-$kind.comm" || true
    rm -f "$work/perf.data"
}

# events N KIND: what vpackd and libvirtd make the kernel do per interval
# under this build's vpackd (KIND new) or libvirtd alone (none), counted by perf's software
# events over VPB_COST_PROFILE_S s: system calls (raw_syscalls:sys_enter),
# page faults and context switches. Counts, not times: they carry from one
# machine to another, where the time each costs differs (a system call or a
# wake-up costs several times more on some hypervisors than on others).
# Apart from the timed windows: counting a tracepoint costs time itself.
cost_events() {
    local n=$1 kind=$2 lv pids s0 s1 c0 c1 p0 p1
    lv=$(pgrep -xo libvirtd)
    pids=$lv
    if [ "$kind" != none ]; then
        if [ "$kind" = new ]; then start_cost_agent "$VPACKD"; else start_cost_agent "$VPB_BASELINE_VPACKD"; fi
        sleep 3; cost_settle; sleep "$VPB_COST_WARM_S"
        pids="$agent_pid,$lv"
        read -r s0 c0 p0 <<<"$(vp_counters samples libvirt_calls pins_ok)"
    else
        sleep 3
    fi
    # One perf per process, side by side: each sums its process's threads.
    local ev=raw_syscalls:sys_enter,page-faults,context-switches p q=()
    for p in ${pids//,/ }; do
        perf stat -x, -e "$ev" -p "$p" -- sleep "$VPB_COST_PROFILE_S" \
            2>"$dir/events-g$n-$kind-$p.csv" >/dev/null &
        q+=($!)
    done
    for p in "${q[@]}"; do wait "$p" || vp_log "WARNING: perf stat failed"; done
    if [ "$kind" != none ]; then
        read -r s1 c1 p1 <<<"$(vp_counters samples libvirt_calls pins_ok)"
        echo "samples=$((s1 - s0)) seconds=$VPB_COST_PROFILE_S agent=$agent_pid libvirtd=$lv" \
             "libvirt_calls=$((c1 - c0)) pins=$((p1 - p0))" >"$dir/events-g$n-$kind.info"
        stop_agent
    else
        echo "samples=0 seconds=$VPB_COST_PROFILE_S agent=0 libvirtd=$lv" >"$dir/events-g$n-$kind.info"
    fi
}

cost() {
    local dir=$VPB_OUT/cost n have=0 i r k kind t0 order
    : "${VPB_BASELINE_VPACKD:?set VPB_BASELINE_VPACKD (run-bench.sh builds it)}"
    [ -x "$VPB_BASELINE_VPACKD" ] || vp_die "$VPB_BASELINE_VPACKD is not built"
    command -v perf >/dev/null || vp_die "perf is not installed (run-bench.sh installs linux-perf)"
    mkdir -p "$dir"
    echo "guests=$VPB_COST_GUESTS rounds=$VPB_COST_ROUNDS window_s=$VPB_COST_WINDOW_S warm_s=$VPB_COST_WARM_S" \
         "baseline=${VPB_BASELINE_REV:-?} memory_mib=$VP_MEMORY_MIB profile_s=$VPB_COST_PROFILE_S" \
         "load=$(cut -d' ' -f1-3 /proc/loadavg)" >"$dir/info"
    # The floor: what a process that only wakes once a second (and reads
    # /proc/stat) costs on this machine.
    "$builddir/tests/bench/bench-wake" 10 >"$dir/floor" || vp_log "WARNING: bench-wake failed"
    for n in 0 $VPB_COST_GUESTS; do
        if [ "$n" -gt "$have" ]; then
            t0=$EPOCHREALTIME
            for i in $(seq $((have + 1)) "$n"); do boot "vpbench-g$i" 1 idle 2; done
            for i in $(seq $((have + 1)) "$n"); do VP_READY_TIMEOUT=600 vp_wait_ready "vpbench-g$i"; done
            echo "boot from=$have to=$n seconds=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}')" >>"$dir/boots"
            have=$n
            sleep 5
            # Pack them once, so that every window starts from the same pins.
            start_cost_agent "$VPACKD"; sleep 3; cost_settle; stop_agent
        fi
        for r in $(seq "$VPB_COST_ROUNDS"); do
            order=(none old new)
            [ $((r % 3)) -eq 2 ] && order=(new none old)
            [ $((r % 3)) -eq 0 ] && order=(old new none)
            for kind in "${order[@]}"; do
                vp_log "cost: $n guests, round $r, $kind"
                cost_window "$dir/g$n-r$r-$kind" "$kind"
            done
        done
        # Before the profiles: perf report's own work would move the load.
        for kind in none old new; do vp_log "cost: events, $n guests, $kind"; cost_events "$n" "$kind"; done
        case " $VPB_COST_PROFILE " in
        *" $n "*) for kind in old new; do vp_log "cost: profile, $n guests, $kind"; cost_profile "$n" "$kind"; done ;;
        esac
    done
}

setup
case $part in
placement) placement "${2:?load}" ;;
reaction) reaction ;;
stability) stability ;;
cost) cost ;;
*) vp_die "unknown part $part" ;;
esac
echo "$part${2:+-$2} $SECONDS" >>"$VPB_OUT/durations"
vp_log "$part ${2:-} done in ${SECONDS}s"
