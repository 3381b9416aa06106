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
# shellcheck disable=SC2034 # used by lib.sh
VP_PREFIX=vphkb-
builddir=${VPACK_BUILDDIR:-$here/../../build}
builddir=$(cd "$builddir" && pwd) || vp_die "no build directory $builddir"
HOOK=$builddir/plugin/vpack-hook
VPACKD=$builddir/agent/vpackd
VPACKCTL=$builddir/ctl/vpackctl
: "${VPHK_STARTS:=20}"
: "${VPHK_HOOK_RUNS:=100}"
: "${VPHK_RELOAD:=restart}"
: "${VPHK_WAIT:=900}"
NS=urn:vpack:powerpolicy:1
HOOKS=/etc/libvirt/hooks
HOOK_DIR=$HOOKS/qemu.d
HOOK_LINK=$HOOK_DIR/vpack
RUN_DIR=/run/vpack
DEF_SOCK=$RUN_DIR/vpackd.sock
DOM=vphkb-a

work=$(mktemp -d /tmp/vpack-hook-bench.XXXXXX)
hook_changed=""        # the hook dir is not as we found it
prev_hook=""           # what was at $HOOK_LINK: a symlink target or a saved copy
prev_is_copy=""
made_hooks_dir=""
made_hook_dir=""
made_run_dir=""
agent_pid=""

vp_require_root
for f in "$HOOK" "$VPACKD" "$VPACKCTL"; do
    [ -x "$f" ] || vp_die "$f not built (ninja -C $builddir)"
done
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# ------------------------------------------------------------------ helpers


wait_quiet() { vp_wait_no_other_vpackd "$VPHK_WAIT" "$1" "$agent_pid"; }
reload_libvirtd() {
    local pid
    wait_quiet "reloading libvirtd"
    if [ "$VPHK_RELOAD" = hup ] && pid=$(vp__daemon_pid libvirtd); then
        kill -HUP "$pid"; sleep 1
        vp__wait_libvirtd
    else
        vp_restart_libvirtd
    fi
}
is_vpack_hook() { vp_is_vpack_hook "$1"; }
default_socket_live() {
    [ -S "$DEF_SOCK" ] && "$VPACKCTL" status --socket "$DEF_SOCK" >/dev/null 2>&1
}


# Moves whatever vpack hook is installed out of the way (once).
save_hook() {
    [ -z "$hook_changed" ] || return 0
    if [ -e "$HOOK_LINK" ] || [ -L "$HOOK_LINK" ]; then
        is_vpack_hook "$HOOK_LINK" ||
            vp_die "$HOOK_LINK exists and is not vpack's hook: not touching it"
        if [ -L "$HOOK_LINK" ]; then
            prev_hook=$(readlink "$HOOK_LINK")
        else
            prev_hook=$work/vpack-hook.saved; prev_is_copy=1
            cp -p "$HOOK_LINK" "$prev_hook"
        fi
        vp_log "moving the installed vpack hook aside for the benchmark"
    fi
    [ -d "$HOOKS" ] || { mkdir -p "$HOOKS"; made_hooks_dir=1; }
    [ -d "$HOOK_DIR" ] || { mkdir -p "$HOOK_DIR"; made_hook_dir=1; }
    hook_changed=1
}

unset_hook() { rm -f "$HOOK_LINK"; }
set_hook() {
    ln -sfn "$HOOK" "$HOOK_LINK.vphkb-tmp"
    mv -T "$HOOK_LINK.vphkb-tmp" "$HOOK_LINK"
}

restore_hook() {
    [ -n "$hook_changed" ] || return 0
    rm -f "$HOOK_LINK"
    if [ -n "$prev_is_copy" ]; then cp -p "$prev_hook" "$HOOK_LINK"
    elif [ -n "$prev_hook" ]; then ln -sfn "$prev_hook" "$HOOK_LINK"; fi
    [ -z "$made_hook_dir" ] || rmdir "$HOOK_DIR" 2>/dev/null || true
    [ -z "$made_hooks_dir" ] || rmdir "$HOOKS" 2>/dev/null || true
    hook_changed=""
}

# libvirtd looks for hooks at start and on SIGHUP only.

start_agent() {
    wait_quiet "starting vpackd"
    default_socket_live && vp_die "a vpackd already answers on $DEF_SOCK"
    "$VPACKD" --topology 'synthetic:"package:2 core:1 pu:1"' --set metrics.enabled=false \
        >>"$work/vpackd.log" 2>&1 &
    agent_pid=$!
    for _ in $(seq 100); do [ -S "$DEF_SOCK" ] && return 0; sleep 0.1; done
    vp_die "vpackd did not open $DEF_SOCK"
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

cleanup() {
    local rc=$? pid
    set +e
    stop_agent
    [ -n "$VP_KEEP_DOMAINS" ] || vp_destroy_all_test_domains
    if [ -n "$hook_changed" ]; then
        restore_hook
        if pid=$(vp__daemon_pid libvirtd) && [ "$pid" != "$VP_STARTED_LIBVIRTD_PID" ]; then
            reload_libvirtd || vp_log "WARNING: libvirtd not reloaded after restoring the hooks"
        fi
    fi
    if [ -n "$made_run_dir" ] && ! default_socket_live; then rm -rf "$RUN_DIR"; fi
    rm -rf "$work"
    vp_cleanup
    return $rc
}
trap cleanup EXIT

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
[ -e "$RUN_DIR" ] || made_run_dir=1
vp_define "$DOM" 1 idle "" "<vpack:powerpolicy xmlns:vpack='$NS' level='2'/>"
vp_virsh dumpxml "$DOM" >"$work/$DOM.xml"
wait_quiet "the benchmark"
default_socket_live && vp_die "a vpackd answers on $DEF_SOCK: stop it first"
rm -f "$DEF_SOCK"

vp_log "(a) no hook"
save_hook
unset_hook
reload_libvirtd || vp_die "libvirtd could not be reloaded"
cycles a

vp_log "(b) hook, vpackd down"
set_hook
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
"$VPACKD" --topology 'synthetic:"package:2 core:1 pu:1"' --set metrics.enabled=false \
    --set control.socket="$work/stalled.sock" --set agent.state_dir="$work/stalled" \
    --set agent.interval_ms=600000 --keep-placement >>"$work/vpackd-stalled.log" 2>&1 &
agent_pid=$!
for _ in $(seq 100); do [ -S "$work/stalled.sock" ] && break; sleep 0.1; done
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
