#!/bin/bash
# SPDX-License-Identifier: MIT
#
# What issue 27's floods cost vpackd (items A and C), measured, not asserted:
# vpackd on libvirt's test driver (test:///default: no libvirtd, no guest,
# so no live lock), the attackers as nobody, root's status timed meanwhile.
# Phases of SECONDS each (default 10):
#
#   idle     nothing: vpackd's own CPU share
#   lines    64 connections sending status requests padded to 64 KiB,
#            reading the answers, reconnecting when closed (C)
#   requests 64 connections sending short status requests as fast as they
#            read the answers (C)
#   scrape   16 keep-alive connections getting /metrics flat out (C)
#   flood    64 connections pipelining status requests, never reading (A)
#
# For each: vpackd's CPU (utime + stime over the phase, % of one core), its
# peak VmRSS, what the attackers got, and root's status latency on the
# admin socket, where root's vpackctl asks (a new connection every 0.1 s).
# Before/after: run it with VPACKD pointing at each
# build, e.g.
#   tests/bench/bench-flood.sh                      # ./build/agent/vpackd
#   VPACKD=/tmp/old/build/agent/vpackd tests/bench/bench-flood.sh
# Run as root (for nobody); the figures depend on the machine and its load.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
VPACKD=${VPACKD:-$here/../../build/agent/vpackd}
SECS=${1:-10}
PY=${VP_PYTHON:-/usr/bin/python3}
[ "$(id -u)" = 0 ] || { echo "run as root (the attackers run as nobody)" >&2; exit 2; }
[ -x "$VPACKD" ] || { echo "no vpackd at $VPACKD (build first)" >&2; exit 2; }
work=$(mktemp -d /tmp/vpack-bench-flood.XXXXXX)
chmod 0755 "$work"
install -m 0644 "$here/../integration/trust-clients.py" "$work/clients.py"
sock=$work/vpackd.sock
port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
NOBODY=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
pid=""
cleanup() { [ -z "$pid" ] || kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

"$VPACKD" --topology 'synthetic:"package:2 core:1 pu:1"' --set agent.state_dir="$work/state" \
    --set control.socket="$sock" --set agent.libvirt_uri=test:///default \
    --set metrics.enabled=true --set metrics.port="$port" >"$work/vpackd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
sleep 1
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }

echo "vpackd: $VPACKD ($("$VPACKD" --version 2>&1 | head -n1)), ${SECS} s a phase, $(nproc) CPUs"
printf '%-9s %7s %9s  %-48s %s\n' phase "cpu%" "rss_mib" "attackers" "root's status"
phase() {   # NAME CMD...: CMD as the attack (empty: none)
    local name=$1 c0 c1 t0 t1 peak r lat att=""
    shift
    c0=$(cpu); t0=$(date +%s%N); peak=$(rss)
    [ $# -eq 0 ] || { "$@" >"$work/att.out" 2>&1 & }
    local apid=$!
    "$PY" "$work/clients.py" latency "$work/vpackd-admin.sock" "$SECS" >"$work/lat.out" 2>&1 &
    local lpid=$!
    for _ in $(seq "$SECS"); do sleep 1; r=$(rss); [ "$r" -gt "$peak" ] && peak=$r; done
    wait "$lpid" || true
    [ $# -eq 0 ] || { wait "$apid" || true; att=$(tail -n1 "$work/att.out"); }
    c1=$(cpu); t1=$(date +%s%N)
    lat=$(sed 's/count=[0-9]* //' "$work/lat.out")
    printf '%-9s %7.1f %9.1f  %-48s %s\n' "$name" \
        "$(awk -v c=$((c1 - c0)) -v t=$((t1 - t0)) -v k="$ticks" 'BEGIN {print 100 * c / k / (t / 1e9)}')" \
        "$(awk -v r="$peak" 'BEGIN {print r / 1024}')" "$att" "$lat"
    kill -0 "$pid" 2>/dev/null || { echo "vpackd died: $(tail -n3 "$work/vpackd.log")"; exit 1; }
    sleep 1
}
phase idle
phase lines "${NOBODY[@]}" "$PY" "$work/clients.py" busy "$sock" 64 "$SECS" 65536
phase requests "${NOBODY[@]}" "$PY" "$work/clients.py" busy "$sock" 64 "$SECS" 16
phase scrape "${NOBODY[@]}" "$PY" "$work/clients.py" scrape "http://127.0.0.1:$port/metrics" 16 "$SECS"
phase flood "${NOBODY[@]}" "$PY" "$work/clients.py" flood "$sock" 64 "$SECS"
