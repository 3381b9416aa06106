#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A save and restore never carry vpack's pins into the new run (issue 28):
# vpack-hook installed in a real libvirtd, a real vpackd on the default
# socket, real QEMU (TCG) guests, the topology override treating CPU 0 and
# CPU 1 as two packages. Phases:
#
#   pack       vprs-a (level 2, 2 vCPUs, no pins of its own) and vprs-b
#              (level 2, its own <vcpupin vcpu='1' cpuset='1'/>) are packed
#              by vpackd; vprs-a's live XML carries vpack's request metadata
#              (urn:vpack:request:1) with no pin in it
#   migrate    vpack-hook's `migrate begin` on `virsh dumpxml --migratable`
#              of both (what libvirt sends the destination): vprs-a's XML
#              comes out with no pin and no request, vprs-b's with its own
#              pin only
#   save       `virsh save` of both while packed, `virsh restore` of both:
#              vpackd logs "registered by the hook"; vprs-a's new run starts
#              on 0-1 (vpackd's first pin of it moves vCPU 0 from 0-1) and is
#              packed again; vprs-b's vCPU 1 is still on CPU 1
#   managed    `virsh managedsave` of vprs-a and `virsh start`: the same
#   nohook     vpackd killed (-9) with vprs-a packed and its record removed
#              (a vpackd that never saw the run): the new vpackd takes the
#              request from the metadata, not vpack's pins in the live XML
#   stop       SIGTERM: exit 0; every thread of vprs-a is on 0-1, vprs-b's
#              vCPU 1 on exactly CPU 1 (kernel and live XML) and its other
#              threads on 0-1; the request metadata stays in both (libvirt
#              keeps the full masks given back as explicit live pins), and
#              the hook's migrate begin on their migratable XML gives vprs-a
#              no pin and vprs-b its own pin only
#
# Before the fix the hook left the saved XML alone and vpackd took vpack's
# pins as the guest's own: vprs-a stayed on one CPU after SIGTERM.
#
# Environment: VPACK_BUILDDIR (default build/).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
VP_VCPU_CPUSET=""
# shellcheck source=tests/integration/lib.sh
. "$here/lib.sh"
vp_test restore vprs-
vp_need_cpus 2
HOOK=$VPACK_HOOK
REQ_NS=urn:vpack:request:1
META2="<vpack:powerpolicy xmlns:vpack='$NS' level='2'/>"
PIN1="<vcpupin vcpu='1' cpuset='1'/>"
RUN_DIR=/run/vpack
SOCK=$RUN_DIR/vpackd.sock
vp_need_built "$HOOK" "$VPACKD" "$VPACKCTL"
# A domain with a managed save image cannot be undefined: the images go too.
vp_on_exit 'for d in vprs-a vprs-b; do vp_virsh managedsave-remove "$d" >/dev/null 2>&1; done'

ctl() { "$VPACKCTL" "$@" --socket "$SOCK"; }

# The test checks the guests' pins through the agent next: libvirt connected.
start_agent() {
    vp_start_agent --ready=libvirt --socket="$SOCK" -- --topology 'synthetic:"package:2 core:1 pu:1"' \
        --set agent.state_dir="$RUN_DIR" --set control.socket="$SOCK" \
        --set policy.pack_delay_ms=2000 --set policy.min_residency_ms=4000 \
        --set metrics.enabled=false --set agent.log_level=debug
}
# b_own: vprs-b's vCPU 1 is on exactly CPU 1 and nothing else of it is narrowed.
b_own() {
    local p
    p=$(vp_pins vprs-b)
    [ "$p" = "vcpu0=0-1 vcpu1=1 emulator=0-1" ]
}
# first_move_from_full SINCE WHAT: vpackd's first pin of vprs-a's vCPU 0 after
# line SINCE of its log moved it from 0-1: the new run started with the
# guest's own (no) pins, not with vpack's from the saved run.
first_move_from_full() {
    local line
    line=$(tail -n "+$(($1 + 1))" "$log" | grep -m1 "domain vprs-a: vcpu 0 " || true)
    case $line in
    *" 0-1 -> "*) vp_pass "vprs-a started unpinned $2, then packed: ${line#vpackd\[info\]: }" ;;
    *) vp_fail "vprs-a did not start with its full mask $2: first pin of vCPU 0: ${line:-none, it was on the saved pins}" ;;
    esac
}
wait_packed() {   # WHAT
    if vp_wait_for 60 vp_all_packed vprs-a >/dev/null; then
        vp_pass "vprs-a packed $1: $(vp_pins vprs-a)"
    else
        vp_fail "vprs-a not packed within 60 s $1: $(vp_pins vprs-a)"
    fi
}
check_b_pin() {   # WHEN
    if [ "$(vp_thread_affinity vprs-b 1)" = 1 ]; then
        vp_pass "vprs-b vCPU 1 on its own pin, CPU 1 ($1)"
    else
        vp_fail "vprs-b vCPU 1 on $(vp_thread_affinity vprs-b 1), its own pin is CPU 1 ($1)"
    fi
}

vp_install_deps
vp_start_libvirtd
vp_build_guest
vp_destroy_all_test_domains
vp_wait_no_other_vpackd 900 "installing the hook"
vp_install_hook "$HOOK"
vp_restart_libvirtd || vp_die "libvirtd could not be restarted to see the hook"
[ -S "$SOCK" ] && ctl status >/dev/null 2>&1 && vp_die "a vpackd answers on $SOCK"

echo "== pack"
vp_define_start vprs-a 2 idle "" "$META2"
vp_define_start vprs-b 2 idle "$PIN1" "$META2"
vp_wait_ready vprs-a || vp_die "vprs-a did not boot"
vp_wait_ready vprs-b || vp_die "vprs-b did not boot"
start_agent
wait_packed "at first"
check_b_pin "packed"
meta=$(vp_request_meta vprs-a)
case $meta in
*request*vcpupin*) vp_fail "vprs-a's request metadata holds a pin it never asked for: $meta" ;;
*request*) vp_pass "vprs-a's live XML holds vpack's request: $(echo "$meta" | tr -d '\n ')" ;;
*) vp_fail "vprs-a's live XML has no request metadata ($REQ_NS)" ;;
esac

echo "== migrate: the hook on the XML libvirt migrates"
vp_virsh dumpxml --migratable vprs-a > "$work/a-migratable.xml"
vp_virsh dumpxml --migratable vprs-b > "$work/b-migratable.xml"
if "$HOOK" vprs-a migrate begin - < "$work/a-migratable.xml" > "$work/a-in.xml" &&
   [ -s "$work/a-in.xml" ] && ! grep -Eq '<(vcpu|emulator|iothread)pin|urn:vpack:request' "$work/a-in.xml"; then
    vp_pass "migrate begin on vprs-a's migratable XML: no pin, no request left"
else
    vp_fail "migrate begin on vprs-a: $(grep -E 'pin |request' "$work/a-in.xml" | tr -s ' \n' ' ')"
fi
if "$HOOK" vprs-b migrate begin - < "$work/b-migratable.xml" > "$work/b-in.xml" &&
   [ "$(grep -Ec '<(vcpu|emulator|iothread)pin' "$work/b-in.xml")" = 1 ] &&
   grep -Eq "<vcpupin vcpu=.1. cpuset=.1./>" "$work/b-in.xml"; then
    vp_pass "migrate begin on vprs-b's migratable XML: its own pin only"
else
    vp_fail "migrate begin on vprs-b: $(grep -E 'pin |request' "$work/b-in.xml" | tr -s ' \n' ' ')"
fi

echo "== save and restore"
uuid_a=$(vp_virsh domuuid vprs-a)
for d in vprs-a vprs-b; do
    vp_virsh save "$d" "$work/$d.save" >/dev/null || vp_die "virsh save $d failed"
done
echo "saved vprs-a's cputune: $(vp_virsh save-image-dumpxml "$work/vprs-a.save" |
    grep -E '<(vcpu|emulator)pin' | tr -s ' \n' ' ')"
since=$(wc -l < "$log")
for d in vprs-a vprs-b; do
    vp_virsh restore "$work/$d.save" >/dev/null || vp_die "virsh restore $d failed"
done
if vp_wait_for 10 grep -q "domain vprs-a: registered by the hook" "$log" >/dev/null; then
    vp_pass "vpackd: $(grep "domain vprs-a: registered by the hook" "$log" | tail -n1)"
else
    vp_fail "vpackd did not log vprs-a's registration by the hook"
fi
wait_packed "again after the restore"
first_move_from_full "$since" "after the restore"
check_b_pin "restored"

echo "== managedsave and start"
vp_virsh managedsave vprs-a >/dev/null || vp_die "virsh managedsave vprs-a failed"
since=$(wc -l < "$log")
vp_virsh start vprs-a >/dev/null || vp_die "virsh start vprs-a (managed save) failed"
wait_packed "again after the managed save"
first_move_from_full "$since" "after the managed save"

echo "== nohook: a vpackd that never saw the run"
kill -9 "$agent_pid"; wait "$agent_pid" 2>/dev/null || true; agent_pid=""
rm -f "$RUN_DIR/domains/$uuid_a.json"
start_agent
if vp_wait_for 10 grep -q "domain vprs-a: .*request.*metadata" "$log" >/dev/null; then
    vp_pass "vpackd: $(grep "domain vprs-a: .*request.*metadata" "$log" | tail -n1)"
else
    vp_fail "vpackd did not take vprs-a's request from its metadata"
fi
sleep 2

echo "== stop"
stop_rc=0
kill -TERM "$agent_pid"; wait "$agent_pid" || stop_rc=$?; agent_pid=""
if [ $stop_rc -eq 0 ]; then vp_pass "vpackd exited 0 on SIGTERM"; else vp_fail "vpackd exited $stop_rc on SIGTERM"; fi
grep "stopping: restored" "$log" | tail -n1
if vp_all_on 0-1 vprs-a; then
    vp_pass "every thread of vprs-a back on 0-1: $(vp_pins vprs-a)"
else
    vp_fail "vprs-a still narrowed with vpack stopped: $(vp_pins vprs-a) (want every thread on 0-1)"
fi
if b_own; then
    vp_pass "vprs-b has exactly its own pin: $(vp_pins vprs-b)"
else
    vp_fail "vprs-b: $(vp_pins vprs-b) (want vcpu0=0-1 vcpu1=1 emulator=0-1)"
fi
if vp_live_pins vprs-b | vp_has -x "vcpupin 1 1"; then
    vp_pass "vprs-b's live XML keeps <vcpupin vcpu='1' cpuset='1'/>"
else
    vp_fail "vprs-b's live pins: $(vp_live_pins vprs-b | tr '\n' ';')"
fi
# libvirt 9.0 has no call that removes a live pin: the full masks given back
# are explicit pins of every CPU in the live XML, and the request stays for
# the rest of the run so that a later save or migration does not carry them
# as the guest's own.
for d in vprs-a vprs-b; do
    if vp_request_meta "$d" | vp_has "request"; then
        vp_pass "$d: vpack's request stays in the live metadata after the stop"
    else
        vp_fail "$d: no request in the live metadata after the stop: a save would keep vpack's pins"
    fi
done
vp_virsh dumpxml --migratable vprs-a > "$work/a-stopped.xml"
vp_virsh dumpxml --migratable vprs-b > "$work/b-stopped.xml"
if grep -Eq '<vcpupin' "$work/a-stopped.xml" &&
   "$HOOK" vprs-a migrate begin - < "$work/a-stopped.xml" > "$work/a-stopped-in.xml" &&
   [ -s "$work/a-stopped-in.xml" ] && ! grep -Eq '<(vcpu|emulator|iothread)pin|urn:vpack:request' "$work/a-stopped-in.xml"; then
    vp_pass "after the stop, migrate begin on vprs-a: its full-mask pins ($(grep -c '<vcpupin' "$work/a-stopped.xml") in the live XML) stripped"
else
    vp_fail "after the stop, migrate begin on vprs-a: $(grep -E 'pin |request' "$work/a-stopped-in.xml" "$work/a-stopped.xml" 2>&1 | tr -s ' \n' ' ')"
fi
if "$HOOK" vprs-b migrate begin - < "$work/b-stopped.xml" > "$work/b-stopped-in.xml" &&
   [ "$(grep -Ec '<(vcpu|emulator|iothread)pin' "$work/b-stopped-in.xml")" = 1 ] &&
   grep -Eq "<vcpupin vcpu=.1. cpuset=.1./>" "$work/b-stopped-in.xml"; then
    vp_pass "after the stop, migrate begin on vprs-b: its own pin only"
else
    vp_fail "after the stop, migrate begin on vprs-b: $(grep -E 'pin |request' "$work/b-stopped-in.xml" | tr -s ' \n' ' ')"
fi

vp_verdict
