#!/bin/bash
# SPDX-License-Identifier: MIT
#
# vpackctl doctor on this live host (issue 28, item 5), with libvirtd up:
#
#   host       doctor --json runs on / and says what this host's sysfs says:
#              with no cpuidle driver (current_driver "none" or missing, as on
#              this project's virtual machines) cpuidle-driver cancels and
#              the exit status is 1; with a driver, that driver is named;
#              libvirt's version is the daemon's (libvirtd --version); the
#              cgroup mode and the hook have their findings
#   qos hold   a process that opens /dev/cpu_dma_latency and writes 0 (a
#              native s32) is named in the cpu-dma-latency finding, by pid,
#              with "limit 0 us"; once it has closed the file (it exits),
#              it is no longer named. The hold lasts a few seconds.
#
# Run under the machine-wide lock:
#   flock /tmp/vpack-live.lock meson test -C build --suite integration doctor
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
vp_test doctor vpdoc-
vp_need_built "$VPACKCTL"
vp_start_libvirtd

holder=""
vp_on_exit --early '[ -n "$holder" ] && kill "$holder" 2>/dev/null; true'

# doctor_json: runs vpackctl doctor --json; sets rc and out.
doctor_json() {
    rc=0
    out=$("$VPACKCTL" doctor --json 2>"$work/doctor.err") || rc=$?
}

# finding CHECK: "SEVERITY<TAB>WHAT" of CHECK's findings in $out, one a line.
finding() {
    "$VP_PYTHON" -c '
import json, sys
for f in json.load(sys.stdin)["findings"]:
    if f["check"] == sys.argv[1]:
        print(f["severity"] + "\t" + f["what"])' "$1" <<<"$out"
}

# ---------------------------------------------------------------- host
doctor_json
[ "$rc" -le 1 ] || vp_fail "doctor --json: exit $rc: $(cat "$work/doctor.err")"
driver=$(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo missing)
got=$(finding cpuidle-driver)
case $driver in
none | missing)
    if [ "${got%%$'\t'*}" = cancels ] && [ "$rc" -eq 1 ]; then
        vp_pass "no cpuidle driver here ($driver): cpuidle-driver cancels, exit 1"
    else
        vp_fail "no cpuidle driver here ($driver): got '$got', exit $rc"
    fi ;;
*)
    if printf '%s\n' "$got" | vp_has -F "$driver"; then
        vp_pass "cpuidle driver $driver named"
    else
        vp_fail "cpuidle driver $driver: got '$got'"
    fi ;;
esac
want=$(libvirtd --version | awk '{print $NF}')
got=$(finding libvirt)
if [ "$got" = "ok"$'\t'"libvirt $want" ]; then
    vp_pass "libvirt $want, the daemon's"
else
    vp_fail "libvirt: got '$got', want 'ok	libvirt $want'"
fi
for c in cgroup hook tuned irq-affinity measure-rapl pc6-scope; do
    [ -n "$(finding "$c")" ] || vp_fail "no $c finding in: $out"
done
# The CPU as /proc/cpuinfo names it, against vpackd.conf's pc6_scope.
vendor=$(awk -F': ' '/^vendor_id/ {print $2; exit}' /proc/cpuinfo)
got=$(finding pc6-scope)
if [ -n "$vendor" ] && printf '%s\n' "$got" | vp_has -F "$vendor family"; then
    vp_pass "pc6-scope names this CPU: $got"
else
    vp_fail "pc6-scope: got '$got', want this CPU's vendor '$vendor'"
fi
vp_log "this host: $(finding cgroup | tr '\t' ' '); $(finding hook | tr '\t' ' ')"

# ---------------------------------------------------------------- qos hold
# A shell opens the device, writes a 0 us limit, then becomes a sleep that
# keeps the descriptor: the hold is the sleep's until it exits.
(exec 3>/dev/cpu_dma_latency && printf '\0\0\0\0' >&3 && exec sleep 8) &
holder=$!
for _ in $(seq 50); do
    [ "$(readlink "/proc/$holder/fd/3" 2>/dev/null)" = /dev/cpu_dma_latency ] &&
        [ "$(cat "/proc/$holder/comm" 2>/dev/null)" = sleep ] && break
    sleep 0.1
done
doctor_json
got=$(finding cpu-dma-latency)
if printf '%s\n' "$got" | vp_has -F "sleep (pid $holder): limit 0 us"; then
    vp_pass "the hold of pid $holder found: $got"
else
    vp_fail "the hold of pid $holder not found: '$got'"
fi
kill "$holder"
wait "$holder" 2>/dev/null || true
doctor_json
got=$(finding cpu-dma-latency)
if printf '%s\n' "$got" | vp_has -F "(pid $holder)"; then
    vp_fail "pid $holder closed the file but is still named: '$got'"
else
    vp_pass "gone once closed: $got"
fi
holder=""

vp_verdict
