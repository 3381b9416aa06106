#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A guest's pins survive every path, and nothing vpack narrowed stays
# narrowed (issue 14, items 5, 9, 10, 11): a real vpackd on a real libvirtd
# with real QEMU (TCG) guests, the topology override treating CPU 0 and
# CPU 1 as two packages. Phases:
#
#   redefine   vpin-p (level 2) started with <vcpupin vcpu='1' cpuset='1'/>;
#              `virsh define` of it without that pin while it runs (libvirt
#              applies it at the next start only): 8 s later, and after
#              kill -9 and a restart of vpackd, vCPU 1 is still pinned to
#              CPU 1 (explain's guest pin and the kernel's thread affinity)
#   level0     vpin-a and vpin-b (level 2) packed; vpackd killed (-9); vpin-a
#              set to level 0 (live) meanwhile; the restarted vpackd
#              releases every thread of vpin-a to 0-1. The same with
#              --keep-placement and SIGTERM
#   transient  vpin-t, transient, pin vCPU 1 -> CPU 1, registered by the
#              hook (run as libvirt runs it); vpackd killed; vpin-t
#              destroyed and created again with the same uuid and no pin
#              (its registration would fail: no agent); the restarted vpackd
#              discards the old record and takes the new run's live XML
#   records    a record of a domain that is not running (a valid file,
#              root's, 0600) is discarded at start
#   nonetlink  vpackd under restrict-af unix,inet (no netlink socket): it
#              reads the online CPUs each interval; CPU 1 offline 3 s, then
#              online: vpin-p's vCPU 1 is back on CPU 1 and libvirt's cpuset
#              groups have CPU 1 again
#   numad      vpin-n with <vcpu placement='auto'> (numad installed for the
#              test, purged after): its bound is numad's placement as
#              libvirt applied it (the CPUs of the NUMA nodes it chose), not
#              "all CPUs"; at stop it is within that bound
#   stop       SIGTERM: exit 0 (under ASan: no leak)
#
# VPACKD, VPACKCTL, VPACK_HOOK and VPACK_RESTRICT_AF pick the binaries.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
vp_test intent vpin-
vp_need_cpus 2
VPACK_RESTRICT_AF=${VPACK_RESTRICT_AF:-$builddir/tests/integration/restrict-af}
META2="<vpack:powerpolicy xmlns:vpack='$NS' level='2'/>"
PIN1="<vcpupin vcpu='1' cpuset='1'/>"
state=$work/state
installed_numad=""
t_start=$SECONDS
vp_need_built "$VPACKD" "$VPACKCTL" "$VPACK_HOOK" "$VPACK_RESTRICT_AF"
vp_on_exit '[ -z "$installed_numad" ] || vp__apt purge -y numad >/dev/null 2>&1 || echo "could not purge numad"'

ctl() { "$VPACKCTL" "$@" --socket "$sock"; }

# start_agent [WRAPPER...] [-- OPTION...]: vpackd in the background, until
# it is connected to libvirt (the test asks it about the guests next).
start_agent() {
    local wrap=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do wrap+=("$1"); shift; done
    [ "${1:-}" = -- ] && shift
    vp_start_agent --ready=libvirt "${wrap[@]}" -- --topology 'synthetic:"package:2 core:1 pu:1"' \
        --set agent.state_dir="$state" --set control.socket="$sock" \
        --set policy.pack_delay_ms=2000 --set policy.min_residency_ms=4000 \
        --set metrics.enabled=false --set agent.log_level=debug "$@"
}
kill_agent() { kill -9 "$agent_pid"; wait "$agent_pid" 2>/dev/null || true; agent_pid=""; }
stop_agent() {   # SIGTERM; sets stop_rc
    stop_rc=0
    kill -TERM "$agent_pid"
    wait "$agent_pid" || stop_rc=$?
    agent_pid=""
}
# explain_field DOMAIN PYEXPR: a value from explain --json (d is the JSON).
explain_field() {
    ctl explain "$1" --json 2>/dev/null |
        "$VP_PYTHON" -c "import json, sys; d = json.load(sys.stdin); print($2)" 2>/dev/null || echo "?"
}
vcpu1_pin() { explain_field "$1" "([v.get('pin') for v in d['vcpus'] if v['id'] == 1] + [None])[0]"; }
# check_pin1 WHERE: vpin-p's vCPU 1 is pinned to CPU 1 by the guest and on CPU 1 in the kernel.
check_pin1() {
    local pin aff
    pin=$(vcpu1_pin vpin-p)
    aff=$(vp_thread_affinity vpin-p 1)
    if [ "$pin" = 1 ] && [ "$aff" = 1 ]; then
        vp_pass "vpin-p vCPU 1 keeps its guest pin ($1): pin $pin, thread on $aff"
    else
        vp_fail "vpin-p vCPU 1 lost its guest pin ($1): explain says pin $pin, thread allowed on $aff"
    fi
}
# all_on_01 NAME: every thread of the domain may run on 0-1 (released).
all_on_01() { vp_all_on 0-1 "$1"; }
pin1_on_1() { [ "$(vp_thread_affinity vpin-p 1)" = 1 ]; }
# machine_has CPUS: libvirt's machine cpuset group (cgroup v1) has exactly CPUS.
machine_has() { [ "$(cat /sys/fs/cgroup/cpuset/machine/cpuset.cpus 2>/dev/null)" = "$1" ]; }

vp_install_deps
vp_start_libvirtd
vp_build_guest
vp_destroy_all_test_domains
mkdir -p "$state"

echo "== redefine: a running domain's request is what it was started with"
vp_define_start vpin-p 2 idle "$PIN1" "$META2"
vp_define_start vpin-q 1 idle "" "$META2"
vp_wait_ready vpin-p
vp_wait_ready vpin-q
start_agent
sleep 3
check_pin1 "started"
puuid=$(vp_virsh domuuid vpin-p | tr -d ' \n')
vp_domain_xml vpin-p 2 idle "" "$META2" | sed "s|<name>vpin-p</name>|&<uuid>$puuid</uuid>|" \
    > "$work/p-nopin.xml"
vp_virsh define "$work/p-nopin.xml" >/dev/null
vp_virsh dumpxml --inactive vpin-p | vp_has "vcpupin vcpu='1'" &&
    vp_die "the redefinition kept the pin: nothing to test"
echo "    redefined vpin-p without its <vcpupin> while it runs"
sleep 8
check_pin1 "8 s after virsh define without the pin"
kill_agent
start_agent
sleep 4
check_pin1 "after kill -9 and a restart of vpackd"
req=$(explain_field vpin-p "d.get('request')")
[ "$req" = live ] && vp_pass "vpin-p's request: its live XML at first sight ($req)" ||
    vp_fail "vpin-p's request comes from '$req', not the live XML at first sight"

echo "== level0: a domain made level 0 while vpackd was down is released"
vp_define_start vpin-a 2 idle "" "$META2"
vp_define_start vpin-b 2 idle "" "$META2"
vp_wait_ready vpin-a
vp_wait_ready vpin-b
for how in kill keep; do
    vp_virsh metadata vpin-a --uri "$NS" --key vpack --set '<powerpolicy level="2"/>' --live >/dev/null
    if [ $how = keep ]; then
        stop_agent
        start_agent -- --keep-placement
    fi
    if t=$(vp_wait_for 30 vp_all_packed vpin-a vpin-b); then
        echo "    ($how) vpin-a and vpin-b packed after ${t}s: a: $(vp_pins vpin-a)"
    else
        vp_fail "($how) vpin-a and vpin-b not packed: a: $(vp_pins vpin-a) b: $(vp_pins vpin-b)"
        continue
    fi
    if [ $how = kill ]; then
        kill_agent
    else
        stop_agent
        [ $stop_rc -eq 0 ] || vp_fail "vpackd --keep-placement exited $stop_rc on SIGTERM"
    fi
    before=$(vp_pins vpin-a)
    if all_on_01 vpin-a; then vp_fail "($how) vpin-a was released before the restart: $before"; continue; fi
    vp_virsh metadata vpin-a --uri "$NS" --key vpack --set '<powerpolicy level="0"/>' --live >/dev/null
    start_agent
    if t=$(vp_wait_for 6 all_on_01 vpin-a); then
        vp_pass "($how) level 0 while vpackd was down: released after the restart in ${t}s ($before -> $(vp_pins vpin-a))"
    else
        vp_fail "($how) vpin-a made level 0 while vpackd was down stays squeezed: $(vp_pins vpin-a)"
    fi
done
vp_virsh destroy vpin-a >/dev/null; vp_virsh destroy vpin-b >/dev/null

echo "== transient: a domain re-created with the same uuid does not inherit a record"
tuuid=$(cat /proc/sys/kernel/random/uuid)
vp_domain_xml vpin-t 2 idle "$PIN1" "$META2" | sed "s|<name>vpin-t</name>|&<uuid>$tuuid</uuid>|" \
    > "$work/t-pin.xml"
vp_domain_xml vpin-t 2 idle "" "$META2" | sed "s|<name>vpin-t</name>|&<uuid>$tuuid</uuid>|" \
    > "$work/t-nopin.xml"
rm -f "$(vp_console_log vpin-t)"
vp_virsh create "$work/t-pin.xml" >/dev/null
vp_wait_ready vpin-t
vp_virsh dumpxml vpin-t > "$work/t-live.xml"
VPACK_SOCKET=$sock "$VPACK_HOOK" vpin-t started begin - < "$work/t-live.xml"
sleep 2
p=$(vcpu1_pin vpin-t)
[ "$p" = 1 ] && vp_pass "vpin-t (transient) registered by the hook: vCPU 1 pinned to $p" ||
    vp_fail "vpin-t's hook record not taken: vCPU 1 pin $p"
kill_agent
vp_virsh destroy vpin-t >/dev/null
rm -f "$(vp_console_log vpin-t)"
vp_virsh create "$work/t-nopin.xml" >/dev/null
vp_wait_ready vpin-t
start_agent
sleep 3
p=$(vcpu1_pin vpin-t)
req=$(explain_field vpin-t "d.get('request')")
[ "$p" = None ] && [ "$req" = live ] &&
    vp_pass "re-created vpin-t: the old run's record discarded, vCPU 1 unpinned, request from the live XML" ||
    vp_fail "re-created vpin-t inherited the old record: vCPU 1 pin $p, request $req"
grep -q "vpin-t: the record is of an earlier run" "$log" && vp_pass "the stale record was named in the log" ||
    vp_fail "no log line for the stale record of vpin-t"
vp_virsh destroy vpin-t >/dev/null

echo "== records: a record of a domain that is not running is discarded"
stop_agent
ghost=$(cat /proc/sys/kernel/random/uuid)
"$VP_PYTHON" -c 'import json, sys; print(json.dumps({"name": "vpin-ghost", "uuid": sys.argv[1], "vcpus": 1, "vcpupin": {"0": "1"}}))' \
    "$ghost" > "$state/domains/$ghost.json"
chmod 0600 "$state/domains/$ghost.json"
start_agent
sleep 2
[ ! -e "$state/domains/$ghost.json" ] && vp_pass "the record of a domain that is not running is gone at start" ||
    vp_fail "$state/domains/$ghost.json (no such domain running) kept"
[ -e "$state/domains/$puuid.json" ] &&
    vp_pass "the running vpin-p's record is kept" || vp_fail "the running vpin-p's record was discarded"

echo "== nonetlink: hotplug without uevents"
stop_agent
start_agent "$VPACK_RESTRICT_AF" unix,inet
grep -q "reading the online CPUs each interval" "$log" &&
    vp_pass "no netlink socket: vpackd says it reads the online CPUs each interval" ||
    vp_fail "no netlink: $(grep -m1 'hotplug' "$log" || echo nothing logged)"
sleep 2
check_pin1 "before the hotplug"
echo 0 > /sys/devices/system/cpu/cpu1/online
sleep 3
echo 1 > /sys/devices/system/cpu/cpu1/online
if t=$(vp_wait_for 8 machine_has 0-1); then
    vp_pass "libvirt's machine cpuset has CPU 1 again after ${t}s"
else
    vp_fail "libvirt's machine cpuset: $(cat /sys/fs/cgroup/cpuset/machine/cpuset.cpus 2>/dev/null)"
fi
vp_wait_for 8 pin1_on_1 >/dev/null || true
check_pin1 "CPU 1 offline 3 s and back, no netlink"
grep -q "online CPUs changed" "$log" && vp_pass "the change was read from sysfs" ||
    vp_fail "no 'online CPUs changed' in the log"

echo "== numad: placement='auto' is bounded by numad's placement"
stop_agent
if ! dpkg -s numad >/dev/null 2>&1; then
    vp__apt_update_once
    vp__quiet vp__apt install -y --no-install-recommends numad || vp_die "cannot install numad"
    # shellcheck disable=SC2034 # read at the exit (vp_on_exit)
    installed_numad=1
fi
vp_domain_xml vpin-n 2 idle "" "<vpack:powerpolicy xmlns:vpack='$NS' level='0'/>" |
    sed "s|<vcpu placement='static'>2</vcpu>|<vcpu placement='auto'>2</vcpu>|" > "$work/n.xml"
grep -q "placement='auto'" "$work/n.xml" || vp_die "no placement='auto' in the test domain"
vp_virsh define "$work/n.xml" >/dev/null
vp_start vpin-n
vp_wait_ready vpin-n
nodes=$(vp_virsh numatune vpin-n | awk '$1 == "numa_nodeset" {print $3}')
want=""
for n in $(echo "$nodes" | tr ',' ' '); do want="$want,$(cat /sys/devices/system/node/node$n/cpulist)"; done
want=${want#,}
echo "    numad chose NUMA nodes '$nodes' (CPUs $want)"
start_agent
sleep 2
b=$(explain_field vpin-n "(d.get('cpuset'), d.get('bound_source'))")
[ "$b" = "('$want', 'numad')" ] && vp_pass "vpin-n's bound is numad's placement: $b" ||
    vp_fail "vpin-n's bound: $b (want the CPUs $want of nodes '$nodes', from numad)"
ctl explain vpin-n | grep '^bound' | sed 's/^/    /'

echo "== stop"
stop_agent
[ $stop_rc -eq 0 ] && vp_pass "vpackd exited 0 on SIGTERM" || vp_fail "vpackd exited $stop_rc on SIGTERM"
aff=$(vp_pins vpin-n)
ok=1
for kv in $aff; do [ "${kv#*=}" = "$want" ] || ok=0; done
[ $ok = 1 ] && vp_pass "vpin-n after stop: every thread on its placement $want ($aff)" ||
    vp_fail "vpin-n after stop: $aff (placement $want)"
aff=$(vp_thread_affinity vpin-p 1)
[ "$aff" = 1 ] && vp_pass "vpin-p vCPU 1 on its guest pin after vpackd stopped" ||
    vp_fail "vpin-p vCPU 1 allowed on $aff after vpackd stopped"

echo
echo "time: $((SECONDS - t_start)) s"
vp_verdict
