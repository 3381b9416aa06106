#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The hardening options of systemd/vpackd.service, each applied with the
# kernel mechanism systemd uses for it (systemd is not PID 1 here), around
# vpackd against a real libvirtd and real QEMU (TCG) guests:
#
#   NoNewPrivileges=yes           setpriv --no-new-privs
#   CapabilityBoundingSet=        setpriv --bounding-set=-all --inh-caps=-all
#   ProtectSystem=strict          a mount namespace in which every mount but
#                                 /dev, /proc, /sys is remounted read-only,
#                                 the RuntimeDirectory bind-mounted writable
#   ProtectHome=yes               empty read-only mode-0 tmpfs over /home,
#                                 /root, /run/user
#   PrivateTmp=yes                fresh tmpfs on /tmp and /var/tmp
#   ProtectKernelModules=yes      module directories made inaccessible (and
#                                 no CAP_SYS_MODULE: the bounding set)
#   ProtectKernelLogs=yes         /proc/kmsg and /dev/kmsg made inaccessible
#   RestrictAddressFamilies=...   a seccomp filter on socket() (restrict-af,
#                                 libseccomp)
#
# Phases:
#   unit       the unit has each of these options; `systemd-analyze verify`
#              passes on the installed unit (meson install --destdir), and
#              `systemd-analyze security --offline=yes` rates it below 7
#   sandbox    the filters work: in the sandbox /etc is read-only, /root is
#              empty, AF_PACKET sockets are refused, AF_UNIX allowed; the
#              running vpackd has NoNewPrivs 1, no capabilities, a seccomp
#              filter
#   works      vpackd in the sandbox: connects to libvirt (vpackctl status),
#              serves metrics, packs two level-2 guests onto CPU 0 keeping
#              a guest pin, repairs libvirt's cpusets and re-pins after CPU 1
#              goes offline and online, and exits 0 on SIGTERM with the
#              guests' masks given back
#   cgroups    the same with /sys/fs/cgroup read-only (what
#              ProtectControlGroups= would do): the repair fails - the
#              reason the unit does not set it
#
# VPACKD, VPACKCTL, VPACK_RESTRICT_AF pick the binaries.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
VP_PREFIX=vphd-
builddir=${VPACK_BUILDDIR:-$here/../../build}
srcdir=${VPACK_SRCDIR:-$here/../..}
VPACKD=${VPACKD:-$builddir/agent/vpackd}
VPACKCTL=${VPACKCTL:-$builddir/ctl/vpackctl}
RESTRICT_AF=${VPACK_RESTRICT_AF:-$builddir/tests/integration/restrict-af}
NS=urn:vpack:powerpolicy:1
work=$(mktemp -d /var/tmp/vpack-hardening-test.XXXXXX)
rundir=$(mktemp -d /run/vpack-hardening.XXXXXX)   # stands for RuntimeDirectory
install -d -m 0755 /run/vpack   # the RuntimeDirectory itself, as systemd makes it
# The sandbox hides /tmp, /var/tmp, /home and /root, where a checkout (and so
# the build) may well be: run copies of the programs from outside them, as
# an installed vpackd runs from /usr/sbin.
bindir=$(mktemp -d /run/vpack-hardening-bin.XXXXXX)
install -m 0755 "$VPACKD" "$bindir/vpackd"
install -m 0755 "$RESTRICT_AF" "$bindir/restrict-af"
VPACKD=$bindir/vpackd
RESTRICT_AF=$bindir/restrict-af
sock=$rundir/vpackd.sock
agent_pid=""

vp_require_root
[ "$(nproc --all)" -ge 2 ] || vp_die "needs 2 CPUs"

cleanup() {
    local rc=$?
    vp_stop_pid "$agent_pid"
    vp_log_tail_on_failure $rc "$work/vpackd.log" 60
    rm -rf "$work" "$rundir" "$bindir"
    vp_cleanup    # CPUs online first
    # After the read-only-cgroup phase libvirt's cpusets lack CPU 1.
    vp_repair_machine_cpusets
    return $rc
}
trap cleanup EXIT

fail() { vp_fail "$@"; }
pass() { vp_pass "$@"; }

# sandbox [cgroup-ro] COMMAND...: execs COMMAND as the unit would run it, in
# place of the calling (sub)shell: `sandbox ... &` gives COMMAND's pid in $!,
# run it in ( ) otherwise. With "cgroup-ro" first, /sys/fs/cgroup is
# read-only too.
sandbox() {
    local cgro=""
    [ "$1" = cgroup-ro ] && { cgro=1; shift; }
    exec unshare --mount --propagation private -- bash -c '
        set -e
        rw=$1; cgro=$2; af=$3; shift 3
        # ProtectSystem=strict, with the RuntimeDirectory writable: the
        # real one, /run/vpack (vpackd keeps its per-connection lock there),
        # and the test'"'"'s, its state directory here.
        mount --bind "$rw" "$rw"
        mount --bind /run/vpack /run/vpack
        awk "{print \$5}" /proc/self/mountinfo | sort -u | while read -r mp; do
            case $mp in /dev|/dev/*|/proc|/proc/*|/sys|/sys/*|"$rw"|/run/vpack) continue ;; esac
            mount -o remount,bind,ro "$mp" 2>/dev/null || true
        done
        # ProtectHome=yes
        for d in /home /root /run/user; do
            [ -d "$d" ] && mount -t tmpfs -o ro,mode=000 tmpfs "$d"
        done
        # PrivateTmp=yes
        mount -t tmpfs -o mode=1777 tmpfs /tmp
        mount -t tmpfs -o mode=1777 tmpfs /var/tmp
        # ProtectKernelModules=yes, ProtectKernelLogs=yes
        for d in /lib/modules /usr/lib/modules; do
            [ -d "$d" ] && mount -t tmpfs -o ro,mode=000 tmpfs "$d"
        done
        for f in /proc/kmsg /dev/kmsg; do
            [ -e "$f" ] && mount --bind /dev/null "$f" && mount -o remount,bind,ro "$f"
        done
        # what ProtectControlGroups= would do (not in the unit)
        [ -z "$cgro" ] || mount -o remount,bind,ro /sys/fs/cgroup
        for mp in $(awk "\$5 ~ \"^/sys/fs/cgroup/\" {print \$5}" /proc/self/mountinfo); do
            [ -z "$cgro" ] || mount -o remount,bind,ro "$mp"
        done
        # NoNewPrivileges=yes, CapabilityBoundingSet=, RestrictAddressFamilies=
        exec setpriv --no-new-privs --bounding-set=-all --inh-caps=-all \
            "$af" unix,netlink,inet,inet6 "$@"
    ' sandbox "$rundir" "$cgro" "$RESTRICT_AF" "$@"
}

echo "== unit"
unit=$srcdir/systemd/vpackd.service
for opt in NoNewPrivileges=yes CapabilityBoundingSet= ProtectSystem=strict ProtectHome=yes \
           PrivateTmp=yes ProtectKernelModules=yes ProtectKernelLogs=yes \
           "RestrictAddressFamilies=AF_UNIX AF_NETLINK AF_INET AF_INET6" RuntimeDirectory=vpack; do
    grep -qx -- "$opt" "$unit" && pass "unit has $opt" || fail "unit lacks $opt"
done
for opt in ProtectControlGroups ProtectKernelTunables PrivateNetwork; do
    grep -q "^$opt=" "$unit" && fail "unit sets $opt (breaks vpackd)" || pass "unit does not set $opt"
done
meson install -C "$builddir" --no-rebuild --quiet --destdir "$work/inst" >/dev/null
inst_unit=$(find "$work/inst" -name vpackd.service | head -n1)
[ -n "$inst_unit" ] || vp_die "meson install put no vpackd.service in $work/inst"
mkdir -p "$work/unit"
exe=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$inst_unit")
sed "s|^ExecStart=$exe|ExecStart=$work/inst$exe|" "$inst_unit" > "$work/unit/vpackd.service"
manroot=$(find "$work/inst" -type d -name man | head -n1)
rc=0
out=$(MANPATH=$manroot systemd-analyze verify "$work/unit/vpackd.service" 2>&1) || rc=$?
[ $rc -eq 0 ] && [ -z "$out" ] && pass "systemd-analyze verify: clean (installed unit, ExecStart under the destdir)" ||
    fail "systemd-analyze verify (exit $rc): $out"
score=$(systemd-analyze security --offline=yes "$work/unit/vpackd.service" 2>&1 |
        sed -n 's/.*Overall exposure level for vpackd.service: \([0-9.]*\).*/\1/p')
sed "/^NoNewPrivileges=/,/^RestrictAddressFamilies=/d" "$work/unit/vpackd.service" > "$work/unit/plain.service"
score0=$(systemd-analyze security --offline=yes "$work/unit/plain.service" 2>&1 |
         sed -n 's/.*Overall exposure level for plain.service: \([0-9.]*\).*/\1/p')
if [ -n "$score" ] && awk -v s="$score" 'BEGIN {exit !(s < 7)}'; then
    pass "systemd-analyze security --offline=yes: exposure $score (without the options: $score0)"
else
    fail "systemd-analyze security: exposure '$score' (without the options: $score0)"
fi

echo "== sandbox"
rc=0; (sandbox touch /etc/vpack-hardening-probe 2>/dev/null) || rc=$?
[ $rc -ne 0 ] && [ ! -e /etc/vpack-hardening-probe ] && pass "in the sandbox /etc is read-only" ||
    { rm -f /etc/vpack-hardening-probe; fail "could write /etc in the sandbox"; }
rc=0; (sandbox touch "$rundir/probe") || rc=$?
[ $rc -eq 0 ] && [ -e "$rundir/probe" ] && pass "the run directory is writable" || fail "run directory not writable"
rm -f "$rundir/probe"
n=$(sandbox sh -c 'ls -A /root 2>/dev/null | wc -l')
t=$(sandbox stat -f -c %T /root)
[ "$n" = 0 ] && [ "$t" = tmpfs ] && pass "/root is an empty tmpfs root cannot even list" || fail "/root: $n entries, $t"
out=$(sandbox "$VP_PYTHON" -c '
import socket
socket.socket(socket.AF_UNIX).close(); socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 15).close()
socket.socket(socket.AF_INET).close(); socket.socket(socket.AF_INET6).close()
try:
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW); print("packet allowed")
except OSError as e:
    print("packet refused:", e.strerror)' 2>&1 || true)
grep -q "packet refused: Address family not supported" <<<"$out" && pass "AF_PACKET refused, AF_UNIX/NETLINK/INET/INET6 allowed" ||
    fail "address families: $out"

vp_install_deps
vp_start_libvirtd
vp_build_guest
vp_destroy_all_test_domains
META2="<vpack:powerpolicy xmlns:vpack='$NS' level='2'/>"
vp_define_start vphd-a 2 work:10 "" "$META2"
vp_define_start vphd-p 2 idle "<vcpupin vcpu='1' cpuset='1'/>" "$META2"
vp_wait_ready vphd-a
vp_wait_ready vphd-p

pins() {
    vp_virsh vcpupin "$1" | awk 'NF == 2 {printf "vcpu%s=%s ", $1, $2}'
    printf 'emulator=%s\n' "$(vp_virsh emulatorpin "$1" | tr -d ' \n')"
}
# Packed onto one package, either one (with vphd-p's vCPU 1 pinned to CPU 1,
# package 1 is awake anyway, and the policy may rightly choose it).
packed() {
    local c
    for c in 0 1; do
        [ "$(vp_pins vphd-a)" = "vcpu0=$c vcpu1=$c emulator=$c" ] &&
            [ "$(vp_pins vphd-p)" = "vcpu0=$c vcpu1=1 emulator=$c" ] && return 0
    done
    return 1
}
wait_for() { vp_wait_for "$@"; }

run_agent() {   # [cgroup-ro]
    port=$(vp_free_port)
    : > "$work/vpackd.log"
    sandbox "$@" "$VPACKD" --topology 'synthetic:"package:2 core:1 pu:1"' \
        --set agent.state_dir="$rundir" --set control.socket="$sock" --set metrics.port="$port" \
        --set policy.pack_watermark=0.9 --set policy.spread_watermark=0.95 \
        --set agent.log_level=debug >>"$work/vpackd.log" 2>&1 &
    agent_pid=$!
    for _ in $(seq 100); do
        [ -S "$sock" ] && [ "$(cat "/proc/$agent_pid/comm" 2>/dev/null)" = vpackd ] && return 0
        sleep 0.1
    done
    vp_die "vpackd in the sandbox did not open $sock"
}
hotplug_cycle() {
    echo 0 > /sys/devices/system/cpu/cpu1/online
    sleep 2
    echo 1 > /sys/devices/system/cpu/cpu1/online
    sleep 4
}

echo "== works in the sandbox"
run_agent
st=/proc/$agent_pid/status
nnp=$(awk '/^NoNewPrivs/ {print $2}' "$st"); bnd=$(awk '/^CapBnd/ {print $2}' "$st")
eff=$(awk '/^CapEff/ {print $2}' "$st"); sec=$(awk '/^Seccomp:/ {print $2}' "$st")
[ "$(cat /proc/$agent_pid/comm)" = vpackd ] && [ "$nnp" = 1 ] && [ "$bnd" = 0000000000000000 ] &&
    [ "$eff" = 0000000000000000 ] && [ "$sec" = 2 ] &&
    pass "vpackd runs with NoNewPrivs 1, CapBnd $bnd, CapEff $eff, Seccomp $sec" ||
    fail "vpackd's status: comm $(cat /proc/$agent_pid/comm) NoNewPrivs $nnp CapBnd $bnd CapEff $eff Seccomp $sec"
grep -q " / / ro," "/proc/$agent_pid/mountinfo" && pass "vpackd's / is read-only" || fail "vpackd's / is not read-only"
sleep 2
out=$("$VPACKCTL" status --socket "$sock" 2>&1 || true)
grep -q "libvirt connected" <<<"$out" && pass "vpackctl status: libvirt connected" || fail "status: $(head -n2 <<<"$out")"
m=$(curl -s --max-time 5 "http://127.0.0.1:$port/metrics" | awk '$1 == "vpack_libvirt_connected" {print $2}')
[ "$m" = 1 ] && pass "metrics served: vpack_libvirt_connected 1" || fail "metrics: vpack_libvirt_connected '$m'"
# (generous: guests just booted, and other jobs may load the machine)
if t=$(wait_for 60 packed); then pass "packed onto one package after ${t}s, vphd-p keeps vCPU 1 on CPU 1"
else fail "not packed: a: $(pins vphd-a) p: $(pins vphd-p)"; fi
hotplug_cycle
if grep -q "repaired [0-9]* cpuset cgroups" "$work/vpackd.log" && ! grep -q "cannot repair" "$work/vpackd.log"; then
    pass "after CPU 1 offline/online: $(grep -o 'repaired [0-9]* cpuset cgroups' "$work/vpackd.log" | tail -n1)"
else
    fail "no cpuset repair: $(grep -E 'repair|cgroup' "$work/vpackd.log" | tail -n3)"
fi
th=$(vp_thread_affinity vphd-p 1)
[ "$th" = 1 ] && pass "vphd-p vCPU 1 thread back on CPU 1" || fail "vphd-p vCPU 1 thread allowed on $th"
wait_for 20 packed >/dev/null && pass "packed again after the hotplug" ||
    fail "after the hotplug: a: $(pins vphd-a) p: $(pins vphd-p)"
kill -TERM "$agent_pid"; rc=0; wait "$agent_pid" || rc=$?; agent_pid=""
[ $rc -eq 0 ] && pass "vpackd exited 0 on SIGTERM" || fail "vpackd exited $rc"
[ "$(pins vphd-a)" = "vcpu0=0-1 vcpu1=0-1 emulator=0-1" ] && [ "$(pins vphd-p)" = "vcpu0=0-1 vcpu1=1 emulator=0-1" ] &&
    pass "masks given back on stop" || fail "after stop: a: $(pins vphd-a) p: $(pins vphd-p)"

echo "== cgroups read-only (ProtectControlGroups=): why it is not set"
run_agent cgroup-ro
wait_for 30 packed >/dev/null || true
hotplug_cycle
if grep -q "cannot repair the cpuset cgroups" "$work/vpackd.log"; then
    pass "with /sys/fs/cgroup read-only: $(grep -o 'cannot repair the cpuset cgroups.*' "$work/vpackd.log" | head -n1)"
else
    fail "read-only cgroups went unnoticed: $(grep -E 'repair|cgroup' "$work/vpackd.log" | tail -n3)"
fi
kill -TERM "$agent_pid"; rc=0; wait "$agent_pid" || rc=$?; agent_pid=""
vp_online_all_cpus
vp_repair_machine_cpusets

echo
vp_verdict
