#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The vpack live demo, on a fresh Debian 12 machine, as root:
#
#   1. installs what it needs, builds vpack, starts virtlogd and libvirtd;
#   2. boots three small QEMU guests (TCG) at power policy level 2, one vCPU
#      of one of them about 10% busy, the rest idle;
#   3. measures what the guests cost here, starts vpackd with its default
#      policy (but an 8 s minimum residency, to re-pack in seconds) treating
#      CPU 0 and CPU 1 as two packages (synthetic:"package:2 core:1 pu:1")
#      and shows `vpackctl status`: every guest on one package, the other
#      parked, and how idle it is (which package stays awake is the policy's
#      choice: the busier one);
#   4. raises the load (a fourth guest whose two vCPUs busy-loop) and shows
#      vpackd spreading out; then lowers it and shows it packing again;
#   5. stops vpackd (which gives every thread its full mask back) and removes
#      the demo guests. VPACK_DEMO_KEEP=1 leaves guests and agent running.
set -euo pipefail
top=$(cd "$(dirname "$0")" && pwd)
cd "$top"
. tests/integration/lib.sh
VP_PREFIX=vpdemo-
NS=urn:vpack:powerpolicy:1
META2="<vpack:powerpolicy xmlns:vpack='$NS' level='2'/>"
work=$(mktemp -d /tmp/vpack-demo.XXXXXX)
sock=$work/vpackd.sock
agent_pid=""

vp_require_root
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# The demo checks what it shows, so that it doubles as a test. It watches
# with vpackctl wait: one process and one connection asking the agent twice
# a second. A process started per look (an interpreter, above all)
# would be load of its own on a small host, and vpackd would see it.
expect_parked() { # SECONDS: waits until one package is parked; prints its id
    local state
    state=$("$vpackctl" wait --for parked=1 --timeout "$1" --socket "$sock") ||
        { echo "demo: no package parked after $1 s (vpackd saw: $state)" >&2; return 1; }
    [[ $state =~ ([0-9]+)\ parked ]] && echo "${BASH_REMATCH[1]}"
}
expect_spread() { # SECONDS: waits until no package is parked
    local state
    state=$("$vpackctl" wait --for spread --timeout "$1" --socket "$sock") ||
        { echo "demo: still a package parked $1 s after the load rose (vpackd saw: $state)" >&2
          return 1; }
}

finish() {
    local rc=$?
    if [ -n "${VPACK_DEMO_KEEP:-}" ] && [ $rc -eq 0 ]; then
        echo "left running: vpackd (pid $agent_pid, socket $sock) and the vpdemo-* guests"
        VP_KEEP_DOMAINS=1
        VP_STARTED_LIBVIRTD_PID="" VP_STARTED_VIRTLOGD_PID=""
        return 0
    fi
    if [ -n "$agent_pid" ] && kill -0 "$agent_pid" 2>/dev/null; then
        kill -TERM "$agent_pid"; wait "$agent_pid" || true
    fi
    vp_cleanup
    rm -rf "$work"
    return $rc
}
trap finish EXIT

say "installing packages and building vpack"
# The programs' build needs only VP_BUILD_PACKAGES (tests/packages.sh): the
# tests, which need more, are built where their packages are (-Dtests=auto).
vp_install_packages "${VP_BUILD_PACKAGES[@]}" || vp_die "cannot install ${VP_BUILD_PACKAGES[*]}"
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
vpackctl=$top/build/ctl/vpackctl

say "starting libvirtd and booting three level-2 guests"
vp_install_deps
vp_start_libvirtd
vp_build_guest >/dev/null
vp_destroy_all_test_domains
vp_define_start vpdemo-web 2 work:10 "" "$META2"
vp_define_start vpdemo-db 2 idle "" "$META2"
vp_define_start vpdemo-batch 2 idle "" "$META2"
for d in web db batch; do vp_wait_ready vpdemo-$d; done
vp_virsh list

say "measuring what the guests cost on this machine"
sleep 2   # the boots' tail
vp_domain_costs 5 vpdemo-web vpdemo-db vpdemo-batch |
    awk '{printf "  %s: %.2f CPUs\n", $1, $2}'
# vpackd packs while the load stays under pack_watermark (default 0.6) of
# the active cores; one package here is one core, and vpackd's own work
# (about 0.1 CPU under the sanitizers) comes on top. On a host busy with
# other work the watermarks rise so that the load keeps 0.25 of room.
vp_fit_watermarks 0.6 0.8 0.25 "the demo's guests must fit one 1-core package well under the pack watermark"

say "starting vpackd (CPU 0 and CPU 1 treated as two packages)"
echo "default policy settings but one: policy.min_residency_ms=8000 (default 60000), to re-pack in seconds, not a minute"
[ "${VP_WATERMARKS[1]}" = policy.pack_watermark=0.60 ] ||
    echo "and, for this busy host, ${VP_WATERMARKS[1]} ${VP_WATERMARKS[3]} (defaults 0.6 and 0.8)"
# Default policy settings, except one: min_residency_ms (default 60 s, how
# long a domain stays put before vpackd packs it again) is 8 s, so that the
# demo shows packing after the load falls in seconds rather than a minute.
"$top/build/agent/vpackd" --topology 'synthetic:"package:2 core:1 pu:1"' \
    --set agent.state_dir="$work" --set control.socket="$sock" \
    --set policy.min_residency_ms=8000 --set metrics.port=0 "${VP_WATERMARKS[@]}" \
    >"$work/vpackd.log" 2>&1 &
agent_pid=$!
for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
pk=$(expect_parked 20)
echo "package $pk parked: every managed thread runs on package $((1 - pk))"
sleep 2
"$vpackctl" status --socket "$sock"
echo
echo "measuring CPU $pk (package $pk) for 10 s:"
vp_cpu_busy_sample 10 | awk -v c="cpu$pk" '$1 == c {printf "  %s busy %.0f%%, idle %.0f%%\n", $1, $2 * 100, (1 - $2) * 100}'

say "raising the load: a fourth guest with two busy-looping vCPUs"
vp_define_start vpdemo-burst 2 busy:2 "" "$META2"
vp_wait_ready vpdemo-burst
expect_spread 10
"$vpackctl" status --socket "$sock"

say "the load falls again: vpackd packs after the pack delay and residency"
vp_virsh destroy vpdemo-burst >/dev/null
pk=$(expect_parked 40)
echo "package $pk parked again"
"$vpackctl" status --socket "$sock"
echo
echo "why vpdemo-web is where it is:"
"$vpackctl" explain vpdemo-web --socket "$sock"

say "what vpackd did (its log)"
grep -E "plan:|->" "$work/vpackd.log" | head -40
