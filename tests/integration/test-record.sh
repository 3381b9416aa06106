#!/bin/bash
# SPDX-License-Identifier: MIT
#
# vpackctl record against a real vpackd with a real QEMU (TCG) guest, and
# vpackctl simulate on what it wrote:
#
#   record    one level-2 guest (vprec-a, 2 vCPUs, vCPU 0 busy, vCPU 1 pinned
#             to CPU 1); vpackd on a synthetic two-package topology; record
#             for 6 s: at least 3 intervals, every line a trace interval
#             naming vprec-a with 2 vCPUs, vCPU 1's pin "1" kept, no delay
#             (folded into demand); on the last, vCPU 0's demand at least 0.5
#   simulate  the recording replays at levels 0, 1 and 2 (--json): as many
#             intervals as lines, demand above 0.5 CPU-seconds per second,
#             and --svg writes a timeline
#   errors    no agent: exit 3; --duration 0: exit 2
#
# VPACKD and VPACKCTL (default under $VPACK_BUILDDIR) pick the binaries.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
vp_test record vprec-
DOM=vprec-a
vp_need_built "$VPACKD" "$VPACKCTL"

vp_install_deps
command -v jq >/dev/null || { VP_PACKAGES+=(jq); vp_install_deps; }
vp_start_libvirtd
vp_build_guest
vp_destroy_all_test_domains

vp_define_start "$DOM" 2 busy:1 "<vcpupin vcpu='1' cpuset='1'/>" \
    "<vpack:powerpolicy xmlns:vpack='$NS' level='2'/>"
vp_wait_ready "$DOM"

echo "== record"
# The recording is of the guests, through the agent: libvirt connected.
vp_start_agent --ready=libvirt -- --topology 'synthetic:"package:2 core:1 pu:1"' \
    --set control.socket="$sock" --set agent.state_dir="$work/state"
trace=$work/trace.jsonl
if "$VPACKCTL" record --duration 6 --output "$trace" --socket "$sock" 2>"$work/record.err"; then
    vp_pass "record exits 0: $(cat "$work/record.err")"
else
    vp_fail "record failed: $(cat "$work/record.err")"
fi
lines=$(grep -c . "$trace" || true)
[ "$lines" -ge 3 ] && vp_pass "$lines intervals in 6 s" || vp_fail "only $lines intervals in 6 s"
bad=0
while IFS= read -r l; do
    jq -e --arg d "$DOM" '.domains[] | select(.name == $d) |
        (.vcpus | length) == 2 and .vcpus[1].pin == "1" and
        ([.vcpus[].delay // 0] | add) == 0' <<<"$l" >/dev/null || bad=$((bad + 1))
done <"$trace"
[ "$bad" -eq 0 ] && vp_pass "every interval: $DOM, 2 vCPUs, pin 1 kept, delay folded into demand" ||
    vp_fail "$bad interval(s) without the guest as it runs: $(cat "$trace")"
# The agent's smoothing ramps up over the first intervals: the last one shows the busy loop.
jq -e --arg d "$DOM" '.domains[] | select(.name == $d) | .vcpus[0].util >= 0.5' \
    <<<"$(tail -n 1 "$trace")" >/dev/null &&
    vp_pass "last interval: vCPU 0 demands at least 0.5 (the busy loop)" ||
    vp_fail "last interval: vCPU 0 demand below 0.5: $(tail -n 1 "$trace")"

echo "== simulate"
if out=$("$VPACKCTL" simulate --trace "$trace" --topology 'synthetic:"package:2 core:1 pu:1"' \
        --json --svg "$work/t.svg" 2>&1); then
    vp_pass "simulate accepts the recording"
    n=$(jq -r .intervals <<<"$out")
    [ "$n" = "$lines" ] && vp_pass "simulate replays $n intervals" ||
        vp_fail "simulate replayed $n intervals of $lines"
    jq -e '(.levels | length) == 3 and (.levels[0].demand_cpu_s / .seconds) > 0.5' <<<"$out" \
        >/dev/null && vp_pass "3 levels, demand above 0.5 CPUs: $(jq -c '[.levels[] | {level, served_ratio, saving}]' <<<"$out")" ||
        vp_fail "simulate's figures: $out"
    grep -q '<svg' "$work/t.svg" && grep -q 'polyline' "$work/t.svg" &&
        vp_pass "the SVG timeline is drawn" || vp_fail "no SVG timeline"
else
    vp_fail "simulate refused the recording: $out"
fi

echo "== errors"
set +e
"$VPACKCTL" record --duration 1 --output "$work/none" --socket "$work/nobody.sock" 2>/dev/null
rc=$?
"$VPACKCTL" record --duration 0 --output "$work/none" --socket "$sock" 2>/dev/null
rc2=$?
set -e
[ $rc -eq 3 ] && vp_pass "no agent: exit 3" || vp_fail "no agent: exit $rc"
[ $rc2 -eq 2 ] && vp_pass "--duration 0: exit 2" || vp_fail "--duration 0: exit $rc2"

vp_verdict
