#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Benchmark (not a test): what vpack-hook adds to `virsh start` on a real
# libvirtd. 20 start + destroy cycles of a small idle level-2 domain (TCG)
#
#   (a) without the hook (baseline; libvirtd restarted without it)
#   (b) with the hook in /etc/libvirt/hooks/qemu.d/vpack, vpackd down
#   (c) with the hook, vpackd up on the default socket
#
# timing each `virsh start` (and `virsh destroy`) with date +%s%N; prints
# median and worst of each, and the added latency b-a and c-a. Then times
# the hook binary alone, as libvirtd runs it (same environment: LC_ALL=C,
# PATH, HOME; XML on stdin), 100 runs per case, vpackd up and down.
# Everything is put back at the end: the hook removed (an earlier vpack hook
# symlink restored), libvirtd reloaded if it was running before (stopped if
# this script started it), vpackd stopped, the vphkb-* domains undefined.
#
#   sudo bash tests/bench/bench-hook.sh
#
# Environment: VPACK_BUILDDIR (default build/), VPHK_STARTS (20),
# VPHK_HOOK_RUNS (100), VPHK_RELOAD=restart|hup (how libvirtd is made to
# look for hooks again), VPHK_WAIT (seconds to wait for another test's
# vpackd to finish first; 900), VP_VCPU_CPUSET (default 0: the guests stay
# on CPU 0).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
VP_VCPU_CPUSET=${VP_VCPU_CPUSET-0}
# shellcheck source=tests/integration/lib.sh
. "$here/../integration/lib.sh"
vp_test hook-bench vphkb-
HOOK=$VPACK_HOOK
: "${VPHK_STARTS:=20}"
: "${VPHK_HOOK_RUNS:=100}"
: "${VPHK_RELOAD:=restart}"
: "${VPHK_WAIT:=900}"
VP_HOOK_RELOAD=$VPHK_RELOAD
RUN_DIR=/run/vpack
DEF_SOCK=$RUN_DIR/vpackd.sock
DOM=vphkb-a

made_run_dir=""
vp_need_built "$HOOK" "$VPACKD" "$VPACKCTL"
vp_on_exit '[ -z "$made_run_dir" ] || default_socket_live || rm -rf "$RUN_DIR"'
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# ------------------------------------------------------------------ helpers
wait_quiet() { vp_wait_no_other_vpackd "$VPHK_WAIT" "$1" "$agent_pid"; }
# libvirtd looks for hooks at start and on SIGHUP only (vp_reload_hooks).
reload_libvirtd() {
    wait_quiet "reloading libvirtd"
    vp_reload_hooks
}
VP_HOOK_RELOADER=reload_libvirtd
default_socket_live() {
    [ -S "$DEF_SOCK" ] && "$VPACKCTL" status --socket "$DEF_SOCK" >/dev/null 2>&1
}

start_agent() {
    wait_quiet "starting vpackd"
    default_socket_live && vp_die "a vpackd already answers on $DEF_SOCK"
    vp_start_agent --ready=socket --socket="$DEF_SOCK" -- \
        --topology 'synthetic:"package:2 core:1 pu:1"' --set metrics.enabled=false
}

stop_agent() {
    [ -n "$agent_pid" ] || return 0
    local rc=0
    kill -CONT "$agent_pid" 2>/dev/null || true
    kill -TERM "$agent_pid" 2>/dev/null || true
    wait "$agent_pid" || rc=$?
    agent_pid=""
    [ $rc -eq 0 ] || vp_log "vpackd exited $rc"
}

# cycles LABEL: VPHK_STARTS start + destroy cycles; writes the times (ms)
# to $work/LABEL.start and $work/LABEL.destroy.
cycles() {
    local label=$1 t0 t1 t2
    : >"$work/$label.start"; : >"$work/$label.destroy"
    # One untimed cycle first: the first start after a daemon restart pays
    # for loading capabilities.
    vp_virsh start "$DOM" >/dev/null && vp_virsh destroy "$DOM" >/dev/null
    for _ in $(seq "$VPHK_STARTS"); do
        t0=$(date +%s%N)
        vp_virsh start "$DOM" >/dev/null || vp_die "virsh start $DOM failed ($label)"
        t1=$(date +%s%N)
        vp_virsh destroy "$DOM" >/dev/null || vp_die "virsh destroy $DOM failed ($label)"
        t2=$(date +%s%N)
        echo $(( (t1 - t0) / 1000 )) >>"$work/$label.start"     # microseconds
        echo $(( (t2 - t1) / 1000 )) >>"$work/$label.destroy"
        sleep 0.2
    done
}

# stats FILE: "median worst" in ms (from microseconds, one per line)
stats() {
    sort -n "$1" | awk '{a[NR] = $1} END {
        m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
        printf "%.1f %.1f\n", m / 1000, a[NR] / 1000 }'
}

# hook_alone LABEL SOCKET N OP...: runs the hook N times per OP (ops
# interleaved), as libvirtd does; prints median, p90 and worst in ms.
hook_alone() {
    local label=$1 sock=$2 n=$3; shift 3
    python3 - "$HOOK" "$DOM" "$work/$DOM.xml" "$sock" "$n" "$label" "$@" <<'EOF'
import os, subprocess, sys, time
hook, name, xmlpath, sock, n, label = sys.argv[1:7]
ops = sys.argv[7:]
xml = open(xmlpath, "rb").read()
# What libvirtd gives a hook (libvirt 9.0): LC_ALL=C, its PATH and HOME.
env = {"LC_ALL": "C", "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/root"}
if sock:
    env["VPACK_SOCKET"] = sock
times = {op: [] for op in ops}
for _ in range(int(n)):
    for op in ops:
        sub = "end" if op in ("stopped", "release") else "begin"
        argv = ["/bin/true"] if op == "true" else [hook, name, op, sub, "-"]
        t0 = time.perf_counter()
        r = subprocess.run(argv, input=xml, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        t = (time.perf_counter() - t0) * 1000
        if r.returncode != 0 or r.stdout:
            sys.exit("%s %s: exit %d, stdout %r, stderr %r" % (label, op, r.returncode,
                                                              r.stdout[:100], r.stderr[:200]))
        times[op].append(t)
for op in ops:
    v = sorted(times[op])
    what = "/bin/true (spawn cost)" if op == "true" else "%s, %s" % (op, label)
    print("  %-36s %7.2f %7.2f %7.2f   (%d runs)" % (what, v[len(v) // 2], v[int(len(v) * 0.9)],
                                                    v[-1], len(v)))
EOF
}

# ------------------------------------------------------------------- setup
vp_install_deps
vp_start_libvirtd
vp_build_guest
vp_destroy_all_test_domains
# shellcheck disable=SC2034 # read at the exit (vp_on_exit)
[ -e "$RUN_DIR" ] || made_run_dir=1
vp_define "$DOM" 1 idle "" "<vpack:powerpolicy xmlns:vpack='$NS' level='2'/>"
vp_virsh dumpxml "$DOM" >"$work/$DOM.xml"
wait_quiet "the benchmark"
default_socket_live && vp_die "a vpackd answers on $DEF_SOCK: stop it first"
rm -f "$DEF_SOCK"

vp_log "(a) no hook"
# Whatever vpack hook is installed is kept aside (and put back at the exit).
vp_install_hook --replace "$HOOK"
vp_unset_hook
reload_libvirtd || vp_die "libvirtd could not be reloaded"
cycles a

vp_log "(b) hook, vpackd down"
vp_set_hook
reload_libvirtd || vp_die "libvirtd could not be reloaded"
cycles b

vp_log "(c) hook, vpackd up"
start_agent
cycles c
grep -q "domain $DOM: registered by the hook" "$work/vpackd.log" ||
    vp_log "WARNING: vpackd did not log a registration of $DOM"

vp_log "hook binary alone"
{
    echo "hook binary alone (ms)                   median     p90   worst"
    hook_alone "vpackd up" "" "$VPHK_HOOK_RUNS" true prepare started stopped
} >"$work/alone.txt"
stop_agent
rm -f "$DEF_SOCK"
hook_alone "vpackd down" "" "$VPHK_HOOK_RUNS" started stopped >>"$work/alone.txt"
# The worst case: a vpackd that accepts and never answers (SIGSTOP).
vp_start_agent --ready=socket --socket="$work/stalled.sock" --log="$work/vpackd-stalled.log" -- \
    --topology 'synthetic:"package:2 core:1 pu:1"' --set metrics.enabled=false \
    --set control.socket="$work/stalled.sock" --set agent.state_dir="$work/stalled" \
    --set agent.interval_ms=600000 --keep-placement
kill -STOP "$agent_pid"
hook_alone "vpackd stalled" "$work/stalled.sock" 20 started >>"$work/alone.txt"
stop_agent

# ------------------------------------------------------------------ report
read -r am aw < <(stats "$work/a.start")
read -r bm bw < <(stats "$work/b.start")
read -r cm cw < <(stats "$work/c.start")
read -r adm adw < <(stats "$work/a.destroy")
read -r bdm bdw < <(stats "$work/b.destroy")
read -r cdm cdw < <(stats "$work/c.destroy")
echo
echo "vpack-hook benchmark: libvirt $(virsh -c "$VP_URI" version 2>/dev/null |
    awk '/Using library/ {print $NF}'), $(nproc) CPUs, $VPHK_STARTS cycles each, domain $DOM (TCG, 1 vCPU, idle)"
echo
printf '%-30s %10s %10s %14s %14s\n' "virsh start (ms)" median worst "destroy med" "destroy worst"
printf '%-30s %10s %10s %14s %14s\n' "(a) no hook" "$am" "$aw" "$adm" "$adw"
printf '%-30s %10s %10s %14s %14s\n' "(b) hook, vpackd down" "$bm" "$bw" "$bdm" "$bdw"
printf '%-30s %10s %10s %14s %14s\n' "(c) hook, vpackd up" "$cm" "$cw" "$cdm" "$cdw"
echo
awk -v am="$am" -v aw="$aw" -v bm="$bm" -v bw="$bw" -v cm="$cm" -v cw="$cw" \
    -v adm="$adm" -v bdm="$bdm" -v cdm="$cdm" 'BEGIN {
    printf "added to virsh start:   b-a median %+.1f ms, worst %+.1f ms\n", bm - am, bw - aw
    printf "                        c-a median %+.1f ms, worst %+.1f ms\n", cm - am, cw - aw
    printf "added to virsh destroy: b-a median %+.1f ms, c-a median %+.1f ms\n", bdm - adm, cdm - adm }'
echo
cat "$work/alone.txt"
