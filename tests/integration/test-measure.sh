#!/bin/bash
# SPDX-License-Identifier: MIT
#
# vpackctl measure (issue 26, item 5) against a real vpackd with real QEMU
# (TCG) guests, the topology override treating CPU 0 and CPU 1 as two
# packages: two level-2 guests of about 0.25 CPUs each (work:20; packed on
# one package, spread over both at level 0) and one idle level-0 guest (never
# touched). Phases:
#
#   run      `vpackctl measure --json`, 4 rounds of 12 s (5 s warm-up): the
#            rounds alternate (vpackd's log: hold-level 0, dropped, hold,
#            dropped; the kernel's view: the level-2 guests spread to CPUs
#            0-1, then packed, then spread, then packed); every figure has
#            an interval; the verdict on this machine (no RAPL) says energy
#            cannot be measured here and gives the idle-residency difference;
#            the package packing empties is idler at the configured levels
#   after    every domain at its own level (status), no hold, the level-2
#            guests packed again, the level-0 guest on CPUs 0-1
#   sigterm  a second measure gets SIGTERM in its first (level-0) round: it
#            gives the levels back (exit 143, status without a hold at
#            once), the guests pack again, the level-0 guest untouched
#   stop     vpackd's SIGTERM: every thread on CPUs 0-1, exit 0
#
# VPACKD (default $VPACK_BUILDDIR/agent/vpackd) and VPACKCTL pick the binaries.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
vp_test measure vpms-
vp_need_cpus 2

status_json() { "$VPACKCTL" status --json --socket "$sock"; }
# "null" without a hold, "{" with one (vp_json_field stops at the object's first quote).
hold_field() { vp_json_field "$(status_json)" hold; }
no_hold() { [ "$(hold_field)" = null ]; }
packed2() { vp_all_packed vpms-a vpms-b; }
spread2() { vp_all_on 0-1 vpms-a vpms-b; }

# watch FILE: one word a 0.3 s poll while it runs, "spread", "packed" or
# "other", written when it changes (shell built-ins: no process per look).
watch() {
    local last="" now
    while :; do
        if spread2; then now=spread; elif packed2; then now=packed; else now=other; fi
        [ "$now" = "$last" ] || echo "$now" >>"$1"
        last=$now
        sleep 0.3
    done
}

vp_install_deps
vp_start_libvirtd
vp_build_guest
vp_destroy_all_test_domains

META2="<vpack:powerpolicy xmlns:vpack='$NS' level='2'/>"
META0="<vpack:powerpolicy xmlns:vpack='$NS' level='0'/>"
# work:20: 20 % of each 100 ms without forking (about 0.25 CPUs under TCG).
vp_define_start vpms-a 1 work:20 "" "$META2"
vp_define_start vpms-b 1 work:20 "" "$META2"
vp_define_start vpms-z 1 idle "" "$META0"
for d in a b z; do vp_wait_ready vpms-$d; done
sleep 2 # the boots' tail
vp_fit_watermarks 0.8 0.95 0.2 "two guests of 0.25 CPUs packed must stay clear of the pack watermark" 0.95

# Short pack delay and residency: a configured round packs within its warm-up.
vp_start_agent --ready=libvirt -- --topology 'synthetic:"package:2 core:1 pu:1"' \
    --set agent.state_dir="$work/state" --set control.socket="$sock" \
    --set policy.pack_delay_ms=2000 --set policy.min_residency_ms=3000 \
    "${VP_WATERMARKS[@]}" --set metrics.enabled=false --set agent.log_level=debug
vp_wait_for 30 packed2 >/dev/null && vp_pass "two level-2 guests packed" ||
    vp_fail "not packed within 30 s: a: $(vp_pins vpms-a); b: $(vp_pins vpms-b)"

echo "== run"
watch "$work/states" &
watcher=$!
vp_on_exit "kill $watcher 2>/dev/null || true"
t0=$SECONDS
rc=0
"$VPACKCTL" measure --minutes 1 --round-seconds 12 --warmup-seconds 5 --json --socket "$sock" \
    >"$work/measure.json" 2>"$work/measure.err" || rc=$?
kill "$watcher" 2>/dev/null || true
wait "$watcher" 2>/dev/null || true
echo "measure took $((SECONDS - t0)) s, exit $rc; the guests were: $(tr '\n' ' ' <"$work/states")"
[ "$rc" -eq 0 ] && vp_pass "measure exits 0" || vp_fail "measure exit $rc: $(tail -n 3 "$work/measure.err")"

# The rounds in vpackd's log: hold, dropped, hold, dropped.
holds=$(grep -oE 'hold-level 0 (for [0-9.]+ s|dropped)' "$work/vpackd.log" |
    sed -E 's/for [0-9.]+ s/held/' | awk '{print $3}' | tr '\n' ' ')
[ "$holds" = "held dropped held dropped " ] && vp_pass "vpackd's log: level 0 held, dropped, held, dropped" ||
    vp_fail "vpackd's log shows the holds '$holds', want 'held dropped held dropped'"
# The kernel's view: level 0 spreads the level-2 guests, the configured level packs them.
seq=$(grep -v other "$work/states" | uniq | tr '\n' ' ')
[[ $seq == *"spread packed spread packed"* ]] &&
    vp_pass "the kernel's view alternates: $seq" ||
    vp_fail "the guests' placement went '$seq', want spread packed spread packed in it"

# The figures and the verdict.
if "$VP_PYTHON" - "$work/measure.json" <<'EOF'; then
import json, sys
m = json.load(open(sys.argv[1]))
bad = []
if m["rounds"] != 4:
    bad.append("rounds %r, want 4" % m["rounds"])
names = [f["figure"] for f in m["figures"]]
for want in ("package 0 idle", "package 1 idle", "host guest_delay"):
    if want not in names:
        bad.append("no figure %r in %r" % (want, names))
for f in m["figures"]:
    if len(f["rounds"]) != 4 or None in f["rounds"]:
        bad.append("%s: rounds %r" % (f["figure"], f["rounds"]))
    for k in ("level0", "configured", "difference"):
        iv = f.get(k)
        if not iv or not isinstance(iv.get("mean"), (int, float)) or \
                not isinstance(iv.get("half"), (int, float)) or iv["half"] < 0:
            bad.append("%s: %s is %r, want a mean and a half-width" % (f["figure"], k, iv))
v = m["verdict"]
if v["result"] != "none" or "no-energy" not in v["why"]:
    bad.append("verdict %r, want none for no-energy" % v)
t = v["text"]
for want in ("energy cannot be measured here", "configured minus level 0",
             "package 0 ", "package 1 ", " points"):
    if want not in t:
        bad.append("verdict text %r lacks %r" % (t, want))
# The guests were spread at level 0 and packed at the configured level: the
# package they were packed off has the larger idle share in configured rounds.
idle = {f["figure"]: f for f in m["figures"]}
gain = max(idle["package 0 idle"]["difference"]["mean"], idle["package 1 idle"]["difference"]["mean"])
if not gain > 0:
    bad.append("no package idler at the configured level: %r" % gain)
for f in m["figures"]:
    if f.get("difference"):
        print("%-26s level 0 %8.2f ± %-7.2f configured %8.2f ± %-7.2f difference %+8.2f ± %.2f %s" % (
            f["figure"], f["level0"]["mean"], f["level0"]["half"], f["configured"]["mean"],
            f["configured"]["half"], f["difference"]["mean"], f["difference"]["half"], f["unit"]))
print("verdict:", t)
for b in bad:
    print("bad:", b)
sys.exit(1 if bad else 0)
EOF
    vp_pass "every figure has an interval; the verdict: no RAPL here, the idle difference instead"
else
    vp_fail "measure's JSON (above)"
fi

echo "== after"
no_hold && vp_pass "no hold after the run" || vp_fail "status hold '$(hold_field)' after the run"
levels=$(status_json | "$VP_PYTHON" -c 'import json, sys
print(" ".join("%s=%s" % (d["name"], d["level"]) for d in sorted(json.load(sys.stdin)["domains"], key=lambda d: d["name"])))')
[ "$levels" = "vpms-a=2 vpms-b=2 vpms-z=0" ] && vp_pass "every domain at its own level: $levels" ||
    vp_fail "levels after the run: '$levels'"
vp_wait_for 10 packed2 >/dev/null && vp_pass "the level-2 guests packed after the run" ||
    vp_fail "not packed after the run: a: $(vp_pins vpms-a); b: $(vp_pins vpms-b)"
vp_all_on 0-1 vpms-z && vp_pass "the level-0 guest on CPUs 0-1 (its full mask)" ||
    vp_fail "the level-0 guest: $(vp_pins vpms-z)"

echo "== sigterm"
"$VPACKCTL" measure --minutes 1 --round-seconds 12 --warmup-seconds 5 --socket "$sock" \
    >"$work/measure2.out" 2>"$work/measure2.err" &
mpid=$!
vp_wait_for 8 spread2 >/dev/null || vp_fail "the first round did not spread the guests"
[ "$(hold_field)" = "{" ] && vp_pass "a hold in place during the level-0 round" ||
    vp_fail "status hold '$(hold_field)' during the level-0 round"
kill -TERM "$mpid"
rc=0
wait "$mpid" || rc=$?
[ "$rc" -eq 143 ] && vp_pass "measure stopped by SIGTERM exits 143" ||
    vp_fail "measure after SIGTERM exits $rc: $(cat "$work/measure2.err")"
grep -q "every domain at its own level again" "$work/measure2.err" &&
    vp_pass "measure says it gave the levels back" || vp_fail "measure's stderr: $(cat "$work/measure2.err")"
no_hold && vp_pass "no hold after SIGTERM" || vp_fail "status hold '$(hold_field)' after SIGTERM"
vp_wait_for 10 packed2 >/dev/null && vp_pass "the level-2 guests packed again after SIGTERM" ||
    vp_fail "not packed after SIGTERM: a: $(vp_pins vpms-a); b: $(vp_pins vpms-b)"
vp_all_on 0-1 vpms-z && vp_pass "the level-0 guest still on CPUs 0-1" ||
    vp_fail "the level-0 guest: $(vp_pins vpms-z)"

echo "== stop"
vp_stop_agent_check
vp_released 0-1 vpms-a vpms-b vpms-z && vp_pass "after vpackd's SIGTERM every thread on CPUs 0-1" ||
    vp_fail "after vpackd's stop: $VP_RELEASED_WHY"
vp_verdict
