#!/bin/bash
# SPDX-License-Identifier: MIT
#
# vpack-hook run by a real libvirtd. Installs the hook as
# /etc/libvirt/hooks/qemu.d/vpack (a symlink to the build's vpack-hook),
# makes libvirtd look for hooks again, and checks:
#
#   reconnect  a domain that was running before libvirtd restarted with the
#              hook installed is still running (a non-zero exit at
#              `reconnect` would have killed it)
#   reject     domains with level='7' and level='two' in vpack's namespaced
#              metadata are defined (libvirt does not know vpack) but
#              `virsh start` fails with vpack's one-line message
#   start      a level-2 domain starts
#   no agent   with no vpackd and no socket a domain starts; the hook alone,
#              told to register with a vpackd stopped by SIGSTOP, exits 0
#              within its bounded wait (50 ms, asserted < 300 ms wall); a
#              domain still starts with that stalled vpackd on the default
#              socket (median of 3 starts < 500 ms over the median without)
#   agent      with vpackd on the default socket and state dir (libvirtd
#              gives hooks a clean environment: no VPACK_SOCKET), a
#              transient level-2 domain from `virsh create` is registered
#              (record in /run/vpack/domains/UUID.json, "registered by the
#              hook" in vpackd's log, `vpackctl explain` says managed yes),
#              and `virsh destroy` makes the hook remove the record; vpackd
#              exits 0 on SIGTERM
#   define     `vpackctl define` turns the short form <powerpolicy level='2'/>
#              into vpack's namespaced element; level='5' is refused with
#              exit 1 and nothing is defined; `vpackctl set-policy NAME 1
#              --config` works without vpackd
#
# Cleanup: destroys and undefines vphk-* domains, stops the vpackd it
# started, removes the hook (putting back an earlier vpack hook symlink, if
# there was one), makes libvirtd forget it, and stops libvirtd only if this
# script started it. /etc/libvirt/hooks/qemu is never touched; a file named
# qemu.d/vpack that is not vpack's hook makes the test fail, untouched.
#
# libvirt facts this relies on (libvirt 9.0, checked on this machine): the
# daemon looks for hooks at start and on SIGHUP only (a hook added later is
# not run), but lists qemu.d/ on every call once it has seen one there; the
# hook's environment is only LC_ALL=C, PATH and HOME (by libvirt's source also
# LD_PRELOAD, LD_LIBRARY_PATH, USER, LOGNAME, TMPDIR when libvirtd has them); a failed
# `prepare` shows as
#   error: Hook script execution failed: internal error: Child process
#   (LC_ALL=C PATH=... HOME=/root /etc/libvirt/hooks/qemu.d/vpack NAME
#   prepare begin -) unexpected exit status 1: vpack: domain 'NAME': ...
#
# Environment: VPACK_BUILDDIR (default build/), VPHK_RELOAD=restart|hup (how
# libvirtd is made to look for hooks again; default restart), VPHK_WAIT
# (seconds to wait for another test's vpackd to finish before restarting
# libvirtd or starting an agent on the default socket; default 900),
# VP_VCPU_CPUSET (default 0: the guests stay on CPU 0, out of the way of
# tests measuring CPU 1).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
VP_VCPU_CPUSET=${VP_VCPU_CPUSET-0}
# shellcheck source=tests/integration/lib.sh
. "$here/lib.sh"
vp_test hook vphk-
HOOK=$VPACK_HOOK
: "${VPHK_RELOAD:=restart}"
: "${VPHK_WAIT:=900}"
VP_HOOK_RELOAD=$VPHK_RELOAD
RUN_DIR=/run/vpack
DEF_SOCK=$RUN_DIR/vpackd.sock
TOPO='synthetic:"package:2 core:1 pu:1"'

made_run_dir=""
stalled_pid=""         # vpackd under SIGSTOP (agent_pid: vpackd on the default socket)
vp_need_built "$HOOK" "$VPACKD" "$VPACKCTL"
vp_on_exit --early 'vp_stop_pid "$stalled_pid"; stalled_pid=""'
vp_on_exit '[ -z "$made_run_dir" ] || default_socket_live || rm -rf "$RUN_DIR"'

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
words() { printf '%s\n' "$@" | tr -s '\n' ' ' | sed 's/ $//'; }   # one line

# ------------------------------------------------------------------ helpers
# Another test's vpackd would fight ours over the same domains, and a
# libvirtd restart under it disturbs what it measures: wait (bounded) until
# there is none before a step that must not race them.
wait_quiet() { vp_wait_no_other_vpackd "$VPHK_WAIT" "$1" "$agent_pid" "$stalled_pid"; }
# Makes libvirtd look for hooks again (vp_reload_hooks), other agents gone.
reload_libvirtd() {
    wait_quiet "reloading libvirtd"
    vp_reload_hooks
}
VP_HOOK_RELOADER=reload_libvirtd
is_vpack_hook() { vp_is_vpack_hook "$1"; }
# True when something answers on the default control socket.
default_socket_live() {
    [ -S "$DEF_SOCK" ] && "$VPACKCTL" status --socket "$DEF_SOCK" >/dev/null 2>&1
}

# start_vpackd VAR SOCKET STATE_DIR LOG [OPTION...]: starts vpackd in the
# background (a child of this shell, so that its exit code can be had);
# sets VAR to its pid once the socket is there.
start_vpackd() {
    local var=$1 so=$2 state=$3 lf=$4; shift 4
    vp_start_agent --ready=socket --pid="$var" --socket="$so" --log="$lf" -- \
        --topology "$TOPO" --set control.socket="$so" --set agent.state_dir="$state" \
        --set metrics.enabled=false --set agent.log_level=debug "$@"
}

stop_vpackd() {     # PID: SIGCONT, SIGTERM; returns vpackd's exit code
    local pid=$1 rc=0
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" || rc=$?
    return "$rc"
}

# wait_for SECONDS CMD...: polls every 0.1 s.
wait_for() { VP_POLL=0.1 vp_wait_until "$@"; }

domstate() { vp_virsh domstate "$1" 2>/dev/null | head -n1; }

# ------------------------------------------------------------------- setup
vp_install_deps
vp_start_libvirtd
vp_build_guest
vp_destroy_all_test_domains
# shellcheck disable=SC2034 # read at the exit (vp_on_exit)
[ -e "$RUN_DIR" ] || made_run_dir=1

meta() { echo "<vpack:powerpolicy xmlns:vpack='$NS' level='$1'/>"; }

echo "== reconnect"
# Running before the hook is installed: libvirtd's restart runs the hook
# with `reconnect` for it.
vp_define_start vphk-rc 1 idle "" "$(meta 2)"
# Before the hook is in place: a libvirtd restart by another test would
# make it live while that test runs.
wait_quiet "installing the hook"
vp_install_hook --replace "$HOOK"
reload_libvirtd || vp_die "libvirtd could not be reloaded"
if [ "$VPHK_RELOAD" = hup ]; then
    echo "(SIGHUP: no reconnect to check)"
elif [ "$(domstate vphk-rc)" = running ]; then
    vp_pass "a running level-2 domain survived libvirtd's restart with the hook (reconnect)"
else
    vp_fail "vphk-rc is '$(domstate vphk-rc)' after libvirtd restarted with the hook"
fi
vp_virsh destroy vphk-rc >/dev/null 2>&1 || true

echo "== reject invalid levels"
for lv in 7 two; do
    name=vphk-l$lv
    vp_define "$name" 1 idle "" "$(meta "$lv")" ||
        { vp_fail "virsh define refused $name (level='$lv')"; continue; }
    rc=0
    err=$(vp_virsh start "$name" 2>&1 >/dev/null) || rc=$?
    echo "virsh start $name: exit $rc: $(echo "$err" | tr '\n' ' ')"
    if [ $rc -eq 0 ]; then
        vp_fail "virsh start $name (level='$lv') succeeded"
    elif ! grep -qF "vpack: domain '$name'" <<<"$err"; then
        vp_fail "virsh start $name: the error does not name the domain the vpack way"
    elif ! grep -qF "'$lv'" <<<"$err"; then
        vp_fail "virsh start $name: the error does not show the bad value '$lv'"
    else
        vp_pass "virsh start $name refused (exit $rc) with vpack's message naming '$lv'"
    fi
    st=$(domstate "$name")
    [ "$st" = "shut off" ] && vp_pass "$name is shut off" || vp_fail "$name is '$st' after the refused start"
done

echo "== valid domain starts"
vp_define vphk-l2 1 idle "" "$(meta 2)"
if vp_start vphk-l2 && [ "$(domstate vphk-l2)" = running ]; then
    vp_pass "level-2 domain started"
else
    vp_fail "level-2 domain did not start"
fi
vp_virsh destroy vphk-l2 >/dev/null 2>&1 || true

echo "== no agent"
wait_quiet "checking the case without vpackd"
if default_socket_live; then
    vp_die "a vpackd answers on $DEF_SOCK: cannot check the no-agent case"
fi
rm -f "$DEF_SOCK"   # a stale socket of a crashed agent: nobody listens
# start_cycles NAME N: N start/destroy cycles; prints the start times (ms).
start_cycles() {
    local name=$1 n=$2 t0 t1
    for _ in $(seq "$n"); do
        t0=$(now_ms)
        vp_virsh start "$name" >/dev/null || { echo "start-failed"; return 1; }
        t1=$(now_ms)
        [ "$(domstate "$name")" = running ] || { echo "not-running"; return 1; }
        echo $((t1 - t0))
        vp_virsh destroy "$name" >/dev/null
    done
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
vp_define vphk-na 1 idle "" "$(meta 2)"
if times_none=$(start_cycles vphk-na 3); then
    med_none=$(median <<<"$times_none")
    vp_pass "domain starts with no vpackd and no socket (virsh start: $(words "$times_none") ms)"
else
    vp_fail "domain did not start without vpackd ($times_none)"
    med_none=""
fi

# The hook alone, talking to a vpackd that accepts but never answers.
vp_virsh dumpxml vphk-na > "$work/vphk-na.xml"
start_vpackd stalled_pid "$work/stalled.sock" "$work/stalled-state" "$work/vpackd-stalled.log" \
    --set agent.interval_ms=600000 --keep-placement
kill -STOP "$stalled_pid"
worst=0
for _ in 1 2 3 4 5; do
    t0=$(now_ms); rc=0
    VPACK_SOCKET=$work/stalled.sock "$HOOK" vphk-na started begin - <"$work/vphk-na.xml" \
        >"$work/hook.out" 2>"$work/hook.err" || rc=$?
    t=$(( $(now_ms) - t0 ))
    if [ $t -gt $worst ]; then worst=$t; fi
    [ $rc -eq 0 ] || vp_fail "hook (stalled vpackd) exited $rc: $(cat "$work/hook.err")"
    [ ! -s "$work/hook.out" ] || vp_fail "hook wrote to stdout: $(head -c 200 "$work/hook.out")"
done
if [ $worst -lt 300 ]; then
    vp_pass "hook with a SIGSTOPped vpackd: exit 0, worst of 5 runs ${worst} ms (bounded wait 50 ms, limit 300)"
else
    vp_fail "hook with a SIGSTOPped vpackd took ${worst} ms (limit 300)"
fi
worst=0
for _ in 1 2 3 4 5; do
    t0=$(now_ms); rc=0
    VPACK_SOCKET=$work/none.sock "$HOOK" vphk-na started begin - <"$work/vphk-na.xml" \
        >/dev/null 2>&1 || rc=$?
    t=$(( $(now_ms) - t0 ))
    if [ $t -gt $worst ]; then worst=$t; fi
    [ $rc -eq 0 ] || vp_fail "hook (no socket) exited $rc"
done
[ $worst -lt 300 ] && vp_pass "hook with no socket: exit 0, worst of 5 runs ${worst} ms" ||
    vp_fail "hook with no socket took ${worst} ms"
stop_vpackd "$stalled_pid" || true
stalled_pid=""

# The same stall on the default socket, through libvirtd: started (and
# stopped, release at destroy) each wait at most 50 ms.
wait_quiet "starting a vpackd on the default socket"
default_socket_live && vp_die "a vpackd answers on $DEF_SOCK"
start_vpackd stalled_pid "$DEF_SOCK" "$RUN_DIR" "$work/vpackd-stalled-default.log" \
    --set agent.interval_ms=600000 --keep-placement
kill -STOP "$stalled_pid"
if times_stall=$(start_cycles vphk-na 3); then
    med_stall=$(median <<<"$times_stall")
    echo "virsh start with no agent: $(words "$times_none") ms; with a stalled agent: $(words "$times_stall") ms"
    if [ -n "$med_none" ] && [ $((med_stall - med_none)) -lt 500 ]; then
        vp_pass "domain starts with a SIGSTOPped vpackd on the default socket (median ${med_stall} ms vs ${med_none} ms without)"
    else
        vp_fail "start with a stalled vpackd: median ${med_stall} ms vs ${med_none:-?} ms without"
    fi
else
    vp_fail "domain did not start with a SIGSTOPped vpackd on the default socket ($times_stall)"
fi
stop_vpackd "$stalled_pid" || true
stalled_pid=""
rm -rf "$RUN_DIR/domains"

echo "== agent"
wait_quiet "starting vpackd on the default socket"
default_socket_live && vp_die "a vpackd answers on $DEF_SOCK"
start_vpackd agent_pid "$DEF_SOCK" "$RUN_DIR" "$work/vpackd.log"
vp_domain_xml vphk-tr 1 idle "" "$(meta 2)" > "$work/vphk-tr.xml"
rm -f "$(vp_console_log vphk-tr)"
if ! vp_virsh create "$work/vphk-tr.xml" >/dev/null; then
    vp_fail "virsh create of a transient level-2 domain failed"
else
    uuid=$(vp_virsh domuuid vphk-tr)
    rec=$RUN_DIR/domains/$uuid.json
    if wait_for 5 test -s "$rec"; then
        vp_pass "record $rec written"
        if "$VP_PYTHON" - "$rec" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r.get("name") == "vphk-tr" and r.get("level") == 2 else 1)
EOF
        then vp_pass "record names vphk-tr with level 2"
        else vp_fail "record content: $(head -c 300 "$rec")"; fi
    else
        vp_fail "no record $rec within 5 s"
    fi
    if wait_for 5 grep -q "domain vphk-tr: registered by the hook" "$work/vpackd.log"; then
        vp_pass "vpackd logged: $(grep -m1 'domain vphk-tr: registered by the hook' "$work/vpackd.log")"
    else
        vp_fail "vpackd did not log the registration"
    fi
    explain_managed() { "$VPACKCTL" explain vphk-tr 2>/dev/null | vp_has -E '^managed +yes'; }
    if wait_for 5 explain_managed; then
        vp_pass "vpackctl explain vphk-tr: managed yes"
    else
        vp_fail "vpackctl explain vphk-tr: $("$VPACKCTL" explain vphk-tr 2>&1 | tr '\n' ' ')"
    fi
    vp_virsh destroy vphk-tr >/dev/null
    if wait_for 5 test ! -e "$rec"; then
        vp_pass "virsh destroy: the hook made vpackd forget the record"
    else
        vp_fail "record $rec still there 5 s after virsh destroy"
    fi
fi
rc=0; stop_vpackd "$agent_pid" || rc=$?
agent_pid=""
[ $rc -eq 0 ] && vp_pass "vpackd exited 0 on SIGTERM" || vp_fail "vpackd exited $rc on SIGTERM"

echo "== vpackctl define"
short_xml() {   # NAME LEVEL: domain XML with <powerpolicy level='LEVEL'/> under <domain>
    vp_domain_xml "$1" 1 idle | sed "s|^\(  <name>.*</name>\)$|\1\n  <powerpolicy level='$2'/>|"
}
short_xml vphk-def 2 > "$work/vphk-def.xml"
grep -q "^  <powerpolicy level='2'/>" "$work/vphk-def.xml" || vp_die "could not build the short-form XML"
# policy_of NAME [--inactive]: "URI LEVEL" of vpack's element in dumpxml.
policy_of() {
    vp_virsh dumpxml "$@" | "$VP_PYTHON" -c '
import sys, xml.etree.ElementTree as ET
ns = "urn:vpack:powerpolicy:1"
root = ET.fromstring(sys.stdin.read())
found = [(e.tag, e.get("level")) for m in root.findall("metadata") for e in m
         if e.tag.startswith("{")]
for tag, level in found:
    print(tag[1:].split("}")[0], level)
'
}
out=$("$VPACKCTL" define "$work/vphk-def.xml" 2>&1) && rc=0 || rc=$?
echo "vpackctl define: exit $rc: $out"
if [ $rc -ne 0 ]; then
    vp_fail "vpackctl define of the short form failed"
else
    got=$(policy_of vphk-def)
    [ "$got" = "$NS 2" ] && vp_pass "dumpxml has vpack's element ($NS) with level 2" ||
        vp_fail "dumpxml policy: '$got'"
    vp_virsh dumpxml vphk-def | grep -F 'powerpolicy' || true
fi
short_xml vphk-def5 5 > "$work/vphk-def5.xml"
out=$("$VPACKCTL" define "$work/vphk-def5.xml" 2>&1) && rc=0 || rc=$?
echo "vpackctl define (level 5): exit $rc: $out"
[ $rc -eq 1 ] && vp_pass "level 5 refused with exit 1" || vp_fail "level 5: exit $rc"
if vp_virsh dominfo vphk-def5 >/dev/null 2>&1; then
    vp_fail "vphk-def5 was defined"
else
    vp_pass "nothing defined for level 5"
fi
[ -z "$(vp_foreign_vpackd "$agent_pid" "$stalled_pid")" ] || vp_log "note: another vpackd runs; set-policy does not use it"
out=$("$VPACKCTL" set-policy vphk-def 1 --config 2>&1) && rc=0 || rc=$?
echo "vpackctl set-policy vphk-def 1 --config: exit $rc: $out"
got=$(policy_of --inactive vphk-def)
if [ $rc -eq 0 ] && [ "$got" = "$NS 1" ]; then
    vp_pass "set-policy --config: level 1 in dumpxml --inactive"
elif [ $rc -eq 2 ] && "$VPACKCTL" set-policy --config vphk-def 1 >/dev/null 2>&1 &&
     [ "$(policy_of --inactive vphk-def)" = "$NS 1" ]; then
    vp_fail "set-policy refuses options after DOMAIN LEVEL, as its usage writes them" \
         "(set-policy --config vphk-def 1 works)"
else
    vp_fail "set-policy --config: exit $rc, policy '$got'"
fi

echo
vp_verdict
