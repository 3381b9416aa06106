#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Cheap when steady (issue 15): vpackd against a real libvirtd with real
# QEMU (TCG) guests, the topology override treating CPU 0 and CPU 1 as two
# packages. Phases:
#
#   read     each vCPU is read from the schedstat of the thread QEMU named
#            (explain: source "thread-name" and its tid)
#   steady   two idle level-2 guests packed and settled: over STEADY_S
#            intervals vpackd's own counters show zero libvirt calls and
#            zero pin calls, intervals skipped planning, and some read
#            /proc/stat alone (no guest), never more than 9 in a row; the
#            reads due every tenth interval leave idle guests' threads
#            unread (one /proc/PID/stat each: domains_unread; a host whose
#            load keeps moving may let fewer than three reads fall due, and
#            the test then says it could not check); the loop
#            thread wakes once an interval: libvirtd's keepalive probes
#            (one every 5 s) are read at the interval, not when they come
#   own      vpackd's threads (every one in /proc/PID/task) are on the
#            wake-up package, the one the guests are packed on
#   step     a busy-looping guest is resumed while vpackd skips planning:
#            every thread is spread within 4 s: the step shows in the
#            first interval after it (in part); it spreads there when that
#            interval alone asks for more than the active core, else at the
#            next one (over the watermark for spread_samples, 2), so at most
#            2 intervals plus the pin calls, and 4 s leaves room for a slow
#            host; a step the band hid until the next due read (up to 9
#            light intervals) would take 10 or more (the < 2 s target of
#            issue 15 is a benchmark: tests/bench, reaction part)
#            and vpackd's threads are free again (restrictions lifted)
#   stop     the busy guest suspended again: packed, vpackd's threads back
#            on the wake-up package; then SIGTERM: vpackd gives its threads
#            the CPUs it started with back (its log says so, after the
#            sched_setaffinity calls succeeded) and exits 0
#
# VPACKD (default $VPACK_BUILDDIR/agent/vpackd) and VPACKCTL pick the binaries.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
vp_test steady vpst-
vp_need_cpus 2
STEADY_S=${STEADY_S:-20} # two due reads at least (one every 10 intervals)

status_json() { "$VPACKCTL" status --json --socket "$sock"; }
# The CPUs every thread of vpackd may run on, when they all agree; else "mixed".
agent_cpus() {
    local t l out=""
    for t in /proc/"$agent_pid"/task/*; do
        l=$(awk '/^Cpus_allowed_list/ {print $2}' "$t/status" 2>/dev/null) || continue
        [ -n "$l" ] || continue
        if [ -z "$out" ]; then out=$l; elif [ "$out" != "$l" ]; then echo mixed; return 0; fi
    done
    echo "$out"
}
agent_on() { [ "$(agent_cpus)" = "$1" ]; }

vp_install_deps
vp_start_libvirtd
vp_build_guest
vp_destroy_all_test_domains

META2="<vpack:powerpolicy xmlns:vpack='$NS' level='2'/>"
vp_define_start vpst-a 1 idle "" "$META2"
vp_define_start vpst-b 1 idle "" "$META2"
vp_define_start vpst-c 1 busy:1 "" "$META2"
for d in a b c; do vp_wait_ready vpst-$d; done
vp_virsh suspend vpst-c >/dev/null
sleep 2 # the boots' tail
# The step saturates the packed core (busy 1.0): a spread watermark above 0.9
# would leave it less than the margin to cross.
vp_fit_watermarks 0.6 0.8 0.1 "two idle guests packed must leave the load step (+1 CPU) to decide" 0.9

# Short pack delay and residency: the plan settles within seconds. The band
# is 0.05 rather than the default 0.02 so that other work on a shared test
# machine moves the per-CPU load past it less often; the step is +1 CPU.
vp_start_agent --ready=socket -- --topology 'synthetic:"package:2 core:1 pu:1"' \
    --set agent.state_dir="$work/state" --set control.socket="$sock" \
    --set policy.pack_delay_ms=2000 --set policy.min_residency_ms=4000 \
    --set agent.steady_band=0.05 "${VP_WATERMARKS[@]}" \
    --set metrics.enabled=false --set agent.log_level=debug

echo "== read"
pk=""
if vp_wait_for 30 vp_all_packed vpst-a vpst-b vpst-c >/dev/null; then
    pk=$(vp_packed_cpu vpst-a vpst-b vpst-c)
    vp_pass "three level-2 guests packed on package $pk"
else
    vp_fail "not packed within 30 s: $(for d in a b c; do echo "vpst-$d: $(vp_pins vpst-$d);"; done)"
fi
# The first plan can come before the first reading: wait for one.
# sources: "VCPU0_SOURCE TID EMULATOR_SOURCE" of vpst-a from explain --json,
# with shell built-ins (polled): the thread objects hold no object.
sources() {
    local json vre='"vcpus":\[\{[^}]*"source":"([^"]*)"(,"tid":([0-9]+))?'
    local ere='"emulator":\{[^}]*"source":"([^"]*)"' v
    json=$("$VPACKCTL" explain vpst-a --json --socket "$sock") || return 1
    [[ $json =~ $vre ]] || return 1
    v="${BASH_REMATCH[1]} ${BASH_REMATCH[3]:-none}"
    [[ $json =~ $ere ]] || return 1
    echo "$v ${BASH_REMATCH[1]}"
}
read_by_name() { sources | vp_has '^thread-name '; }
vp_wait_for 5 read_by_name >/dev/null || true
src=$(sources)
qpid=$(vp_qemu_pid vpst-a)
read -r vsrc vtid esrc <<<"$src"
if [ "$vsrc" = thread-name ] && [ "$esrc" = thread-name ] && [ -r "/proc/$qpid/task/$vtid/comm" ] &&
    [ "$(cat "/proc/$qpid/task/$vtid/comm")" = "CPU 0/TCG" ]; then
    vp_pass "vCPU 0 of vpst-a read from thread $vtid ('CPU 0/TCG'), the emulator from its threads"
else
    vp_fail "vpst-a: vCPU source '$vsrc' tid '$vtid' (QEMU pid $qpid), emulator source '$esrc'"
fi

echo "== steady"
# Settled: residency (4 s) and the pack delay (2 s) behind us, nothing planned for 2 s.
settled() {
    local s0 s1
    s0=$(vp_counters plans_skipped)
    sleep 2
    s1=$(vp_counters plans_skipped)
    [ $((s1 - s0)) -ge 2 ]
}
vp_wait_for 30 settled >/dev/null || vp_log "vpackd did not skip two intervals in a row within 30 s"
# The host's busy CPUs over the window (/proc/stat), for the failure
# messages: other work that starts after the headroom check moves the load
# vpackd sees, and then planning and pins are right, not a fault.
# Reads due every tenth interval so far (vpackd logs each at debug level).
due_reads() { grep -c 'due read: ' "$work/vpackd.log" || true; }
# Times vpackd's loop thread went to sleep (and so woke up).
sleeps() { awk '/^voluntary_ctxt_switches/ {print $2}' "/proc/$agent_pid/task/$agent_pid/status"; }
read -r c0 p0 f0 s0 n0 r0 u0 <<<"$(vp_counters libvirt_calls pins_ok pins_failed plans_skipped samples reads_skipped domains_unread)"
d0=$(due_reads)
h0=$(vp_cpu_line)
w0=$(sleeps)
sleep "$STEADY_S"
w1=$(sleeps)
h1=$(vp_cpu_line)
read -r c1 p1 f1 s1 n1 r1 u1 <<<"$(vp_counters libvirt_calls pins_ok pins_failed plans_skipped samples reads_skipped domains_unread)"
n=$((n1 - n0))
woke=$((w1 - w0))
busy=$(vp_busy_cpus "$h0" "$h1")
echo "over $n intervals: libvirt calls $((c1 - c0)), pins $((p1 - p0)) ok + $((f1 - f0)) failed, plans skipped $((s1 - s0)), guests not read $((r1 - r0)), domains a due read left unread $((u1 - u0)), loop thread woke $woke times; host busy $busy CPUs"
[ "$n" -ge $((STEADY_S - 1)) ] || vp_fail "only $n sampling intervals in ${STEADY_S}s"
# libvirtd probes vpackd 5 s after its last message (keepalive): about
# STEADY_S / 5 probes. vpackd reads libvirt's socket at its interval, so a
# probe wakes nothing; a vpackd woken by each would show n + 3 or more.
if [ "$woke" -le $((n + 1)) ]; then
    vp_pass "vpackd's loop thread woke $woke times in $n intervals: libvirtd's keepalive probes woke it none"
else
    vp_fail "vpackd's loop thread woke $woke times in $n intervals (want at most $((n + 1)): one a" \
        "interval; libvirtd's probes are read at the interval)"
fi
if [ $((c1 - c0)) -eq 0 ]; then
    vp_pass "zero libvirt calls over $n steady intervals"
else
    vp_fail "$((c1 - c0)) libvirt calls over $n steady intervals (want 0)"
fi
if [ $((p1 - p0 + f1 - f0)) -eq 0 ]; then
    vp_pass "zero pin calls over $n steady intervals"
else
    vp_fail "$((p1 - p0)) pins ok and $((f1 - f0)) failed over $n steady intervals (want 0;" \
        "the host was $busy CPUs busy over them, the guests and vpackd included)"
fi
# Other work on the host may move a CPU's load past the band now and then
# (then vpackd plans, still without a libvirt or pin call); steady intervals
# must skip.
if [ $((s1 - s0)) -gt 0 ]; then
    vp_pass "$((s1 - s0)) of $n steady intervals skipped planning"
else
    vp_fail "only $((s1 - s0)) of $n steady intervals skipped planning"
fi
# Light intervals read /proc/stat alone; the guests are read at least every
# 10th (VPACK__LIGHT_MAX): any n intervals in a row hold n/10 reads at least.
if [ $((r1 - r0)) -gt 0 ] && [ $((r1 - r0)) -le $((n - n / 10)) ]; then
    vp_pass "$((r1 - r0)) of $n steady intervals read no guest (at most $((n - n / 10)): 9 in 10)"
else
    vp_fail "$((r1 - r0)) of $n steady intervals read no guest (want 1 to $((n - n / 10)): 9 in 10)"
fi
# A read due only because ten intervals went by looks at each guest's
# /proc/PID/stat first and leaves the threads of one whose CPU time ran as
# at its last read unread (domains_unread). Other work that moves a CPU's
# load past the band makes that read a full one: wait up to 40 s more for
# one due read that had nothing to read. A due read comes only after nine
# light intervals in a row, and it can leave a guest unread only when the
# two due reads before it read the guest's CPU time (its rate then, to
# compare with: the first one after the guest booted still holds the boot),
# the later one under a minute earlier: the third due read at the least. A
# background load that moves a CPU's load for two intervals every few
# seconds may let fewer than three come in the window (vpackd logs each at
# debug level): then there was nothing to check, and the test says so.
unread_grew() { [ "$(vp_counters domains_unread)" -gt "$u0" ]; }
if [ "$u1" -gt "$u0" ] || vp_wait_for 40 unread_grew >/dev/null; then
    vp_pass "due reads left $(($(vp_counters domains_unread) - u0)) idle guest(s) unread thread by thread (their process's CPU time unchanged)"
elif [ "$(($(due_reads) - d0))" -lt 3 ]; then
    vp_log "not checked: $(($(due_reads) - d0)) read(s) due in $((STEADY_S + 40)) s, three are" \
        "needed (the host, $busy CPUs busy over the window, moved a CPU's load past its band" \
        "in most runs of nine intervals)"
else
    vp_fail "$(($(due_reads) - d0)) due reads in $((STEADY_S + 40)) s, none left an idle guest" \
        "unread (domains_unread stayed $u0): $(grep 'due read: ' "$work/vpackd.log" | tail -n 2)"
fi

echo "== own"
if [ -n "$pk" ] && vp_wait_for 3 agent_on "$pk" >/dev/null; then
    vp_pass "all $(ls /proc/"$agent_pid"/task | wc -l) threads of vpackd on CPU $pk, the wake-up package"
else
    vp_fail "vpackd's threads on '$(agent_cpus)', want the wake-up package's CPU '$pk'"
fi
own=$(status_json | "$VP_PYTHON" -c 'import json, sys; o = json.load(sys.stdin)["agent_threads"]; print(o["package"], o["cpus"])')
[ "$own" = "$pk $pk" ] && vp_pass "status agent_threads: package $pk, CPUs $pk" ||
    vp_fail "status agent_threads: '$own', want '$pk $pk'"

echo "== step"
# The step comes while vpackd skips planning: the band must not hide it.
read -r s0 n0 <<<"$(vp_counters plans_skipped samples)"
[ $((s0)) -gt 0 ] || vp_fail "no interval skipped before the step"
vp_virsh resume vpst-c >/dev/null
if t=$(vp_wait_for 4 vp_all_on 0-1 vpst-a vpst-b vpst-c); then
    vp_pass "load step (+1 CPU): every thread spread to CPUs 0-1 after ${t}s"
else
    vp_fail "not spread within 4 s of the step: $(for d in a b c; do echo "vpst-$d: $(vp_pins vpst-$d);"; done)"
fi
if vp_wait_for 3 agent_on 0-1 >/dev/null; then
    vp_pass "restrictions lifted: vpackd's threads on CPUs 0-1 again"
else
    vp_fail "vpackd's threads on '$(agent_cpus)' after the spread, want 0-1"
fi

echo "== stop"
vp_virsh suspend vpst-c >/dev/null
if vp_wait_for 30 vp_all_packed vpst-a vpst-b vpst-c >/dev/null; then
    pk=$(vp_packed_cpu vpst-a vpst-b vpst-c)
    vp_pass "load dropped: packed again on package $pk"
else
    vp_fail "not packed again within 30 s of the drop"
fi
if vp_wait_for 3 agent_on "$pk" >/dev/null; then
    vp_pass "vpackd's threads on CPU $pk again"
else
    vp_fail "vpackd's threads on '$(agent_cpus)' after the re-pack, want '$pk'"
fi
vp_stop_agent_check
if grep -Eq "stopping: vpackd's [0-9]+ threads on CPUs 0-1 again" "$work/vpackd.log"; then
    vp_pass "on SIGTERM vpackd's threads got CPUs 0-1 (its start affinity) back"
else
    vp_fail "no release of vpackd's threads in its log: $(grep "vpackd's" "$work/vpackd.log" | tail -n 3)"
fi
vp_verdict
