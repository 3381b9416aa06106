#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The benchmark suite, one command (as root, on this 2-CPU machine about
# 15-18 minutes):
#
#   sudo tests/bench/run-bench.sh
#
# installs what it needs, builds vpack (build-bench/, the project's default
# optimized build, not sanitized), then measures on a real libvirtd with QEMU
# (TCG) guests and vpackd treating CPU 0 and CPU 1 as two packages:
#
#   placement   light / medium / heavy load x level 0, 1, 2, VPB_ROUNDS rounds
#   reaction    load step -> spread and work-rate recovery; drop -> re-pack
#   stability   pin operations per minute, steady and oscillating load
#   cost        the agent's whole cost per interval (vpackd's threads plus
#               libvirtd's CPU on its behalf) with 0, 1, 10, 30, 60 idle
#               guests, this build against the baseline's vpackd (--baseline),
#               the parked package's idle share with vpackd against the same
#               pins held with it stopped, and perf profiles at 10 and 30
#   hook        the hook's added latency to `virsh start` (bench-hook.sh)
#   planner     bench-policy: plan time up to 1,024 CPUs / 8,000 vCPUs
#   simulate    the host model (no libvirt): vpackctl simulate on the
#               PlanetLab traces, 2 x 16-core SMT and 4 x 24-core hosts, and
#               every day x 3 seeds on 2- and 4-socket hosts (bench-days.sh); and
#               model-vs-live.py, the placement scenario through the model
#               (live figures from this run's placement part, else from
#               BENCHMARKS.md)
#
# and rewrites BENCHMARKS.md from what this run measured.
#
# Options (for development; a partial run writes BENCHMARKS.partial.md
# unless --out or --update is given):
#   --parts LIST     comma-separated: placement,reaction,stability,cost,hook,planner,simulate
#   --loads LIST     placement loads (light,medium,heavy)
#   --rounds N       placement rounds (3)
#   --measure S      seconds per measurement (10)
#   --cost-rounds N  rounds of the cost part's three windows per guest count (3;
#                    each round is about a minute per guest count)
#   --out FILE       where the report goes
#   --update         a partial run replaces only its own sections of BENCHMARKS.md
#                    (or --out), keeping the rest: e.g. `--parts simulate --update`
#   --no-build       use build-bench as it is
#   --builddir DIR   use the binaries of an existing build (not rebuilt; meant
#                    for `meson test --benchmark`); raw data in DIR/bench-results
#   --baseline REV   the old path's vpackd for the cost part, built from REV
#                    (git archive, in BUILDDIR/baseline/); default: see
#                    baseline= below, the last commit reading the guests through one
#                    libvirt bulk stats call every interval
#   --background SHARE  a nice -n 19 load of SHARE of one CPU (0..1,
#                    tests/perturb/duty.c) for the whole run, as on a host
#                    that runs other work: its CPUs' load moves from second
#                    to second; the report says so
# VPACK_LIVE_LOCK=FILE: run each live part under `flock FILE` (a shared
# machine); the raw data stays in build-bench/bench-results/.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
parts=placement,reaction,stability,cost,hook,planner,simulate
update=""
loads=light,medium,heavy
rounds=3
measure=10
out=""
# The last commit whose vpackd makes one libvirt bulk stats call every
# interval and plans every interval (issue 15's "old path").
baseline=9cb828e
build=1
full=1
bdir=$top/build-bench
background=""
while [ $# -gt 0 ]; do
    case $1 in
    --parts) parts=$2; full=""; shift 2 ;;
    --loads) loads=$2; full=""; shift 2 ;;
    --rounds) rounds=$2; full=""; shift 2 ;;
    --measure) measure=$2; full=""; shift 2 ;;
    --cost-rounds) export VPB_COST_ROUNDS=$2; full=""; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --update) update=1; shift ;;
    --no-build) build=""; shift ;;
    --builddir) bdir=$(cd "$2" && pwd); build=""; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    --background)
        awk -v s="$2" 'BEGIN {exit !(s ~ /^[0-9.]+$/ && s + 0 > 0 && s + 0 <= 1)}' ||
            { echo "run-bench.sh: --background takes a share of one CPU, above 0 and at most 1, not '$2'" >&2; exit 2; }
        background=$2; shift 2 ;;
    -h|--help) sed -n '3,54p' "$0"; exit 0 ;;
    *) echo "run-bench.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[ -n "$out" ] || { if [ -n "$full" ] || [ -n "$update" ]; then out=$top/BENCHMARKS.md; else out=$top/BENCHMARKS.partial.md; fi; }
[ "$(id -u)" -eq 0 ] || { echo "run-bench.sh: run as root" >&2; exit 1; }
has() { case ",$parts," in *",$1,"*) return 0 ;; esac; return 1; }
t_start=$SECONDS
log() { printf '[bench %s +%ds] %s\n' "$(date +%H:%M:%S)" $((SECONDS - t_start)) "$*" >&2; }

# The packages, said once in tests/packages.sh; perf and Python for the report.
# shellcheck source=../packages.sh
. tests/packages.sh
vp_install_packages "${VP_BUILD_PACKAGES[@]}" "${VP_TEST_BUILD_PACKAGES[@]}" "${VP_PACKAGES[@]}" \
    python3 linux-perf || { log "cannot install the packages the benchmarks need"; exit 1; }
if [ -n "$build" ]; then
    log "building build-bench (buildtype debugoptimized: -O2, no sanitizers)"
    # -Dtests=enabled: bench-wake is built with the tests (an "auto" build set up
    # before cmocka or libseccomp were installed would leave it out).
    if [ -d build-bench ]; then meson configure build-bench -Dtests=enabled >/dev/null
    else meson setup build-bench -Dtests=enabled >/dev/null; fi
    ninja -C build-bench >/dev/null
fi
if [ -f "$bdir/meson-info/intro-buildoptions.json" ] &&
   python3 -c 'import json,sys; o = {x["name"]: x["value"] for x in json.load(open(sys.argv[1]))}; sys.exit(o.get("b_sanitize", "none") in ("none", ""))' \
       "$bdir/meson-info/intro-buildoptions.json"; then
    log "WARNING: $bdir is a sanitizer build: its numbers are not the product's"
fi
export VPACK_BUILDDIR=$bdir
if has cost; then
    # The old path, built from its own sources (no git worktree: nothing of
    # this checkout's git state changes).
    src=$bdir/baseline/src-$baseline
    if [ ! -x "$bdir/baseline/build-$baseline/agent/vpackd" ]; then
        log "building the baseline vpackd ($baseline) in $bdir/baseline/"
        rm -rf "$src"; mkdir -p "$src"
        git archive "$baseline" | tar -x -C "$src"
        # Its own output only when it fails (the old tree builds with what this one needs).
        blog=$(meson setup "$bdir/baseline/build-$baseline" "$src" 2>&1 &&
              ninja -C "$bdir/baseline/build-$baseline" agent/vpackd 2>&1) ||
            { printf '%s\n' "$blog" | tail -20 >&2; log "cannot build the baseline vpackd ($baseline)"; exit 1; }
    fi
    export VPB_BASELINE_VPACKD=$bdir/baseline/build-$baseline/agent/vpackd
    export VPB_BASELINE_REV=$(git rev-parse --short "$baseline")
fi
results=$bdir/bench-results
rm -rf "$results"; mkdir -p "$results"
export VPB_OUT=$results VPB_ROUNDS=$rounds VPB_MEASURE_S=$measure
{
    echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "host_cpus=$(nproc)"
    echo "cpu_model=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
    echo "kernel=$(uname -r)"
    echo "libvirt=$(dpkg-query -W -f '${Version}' libvirt-daemon 2>/dev/null || echo '?')"
    echo "qemu=$(dpkg-query -W -f '${Version}' qemu-system-x86 2>/dev/null || echo '?')"
    echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo '+changes')"
    echo "rapl=$([ -d /sys/class/powercap ] && find /sys/class/powercap -mindepth 1 -maxdepth 1 -printf '%f ' || echo absent)"
    # Idle is part of what a wake-up costs: which cpuidle driver and governor,
    # and whether haltpoll polls before it halts (0: it halts at once).
    cpuidle=/sys/devices/system/cpu/cpuidle
    echo "cpuidle=$(cat $cpuidle/current_driver 2>/dev/null || echo none)" \
         "governor=$(cat $cpuidle/current_governor 2>/dev/null || cat $cpuidle/current_governor_ro 2>/dev/null || echo none)" \
         "halt_poll_ns=$(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns 2>/dev/null || echo -)"
    echo "full=${full:-0} rounds=$rounds measure_s=$measure"
    [ -z "$background" ] || echo "background=$background"
} >"$results/info"
if [ -n "$background" ]; then
    cc -O2 -o "$results/duty" tests/perturb/duty.c
    nice -n 19 "$results/duty" "$background" &
    duty_pid=$!
    trap 'kill "$duty_pid" 2>/dev/null || true' EXIT
    log "background: a nice -n 19 load of $background CPU (pid $duty_pid)"
fi

live() { # runs one live part, under the shared lock if VPACK_LIVE_LOCK is set
    log "live: $*"
    if [ -n "${VPACK_LIVE_LOCK:-}" ]; then
        flock "$VPACK_LIVE_LOCK" bash tests/bench/bench-live.sh "$@"
    else
        bash tests/bench/bench-live.sh "$@"
    fi
}

# The host model: 24 h of 100 PlanetLab VMs on two hosts (.json: simulate's
# figures, .meta: what bench-report.py needs besides), then the model against
# the live placement scenario. CPU-bound and not live: niced, no lock.
simulate_part() {
    local vpackctl=$1 dir=$2 t0=$SECONDS name desc title cores speed s0
    mkdir -p "$dir"
    while IFS='|' read -r name desc title cores speed; do
        s0=$EPOCHREALTIME
        nice -n 19 "$vpackctl" simulate --planetlab tests/data/planetlab/20110303 --vms 100 \
            --seed 1 --topology "synthetic:\"$desc\"" --json >"$dir/$name.json" || return 1
        printf 'title=%s\ncores=%s\nspeed_target=%s\nwall_s=%s\n' "$title" "$cores" "$speed" \
            "$(awk -v a="$s0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')" >"$dir/$name.meta"
    done <<'EOF_TOPOLOGIES'
2x16-smt|package:2 core:16 pu:2|2 x 16 cores, SMT (64 CPUs)|32|1
4x24|package:4 core:24 pu:1|4 x 24 cores, no SMT (96 CPUs)|96|0
EOF_TOPOLOGIES
    # Every day of tests/data/planetlab, three seeds, 2- and 4-socket hosts with
    # and without SMT, at 60 s intervals (issue 26): a Markdown table.
    bash tests/bench/bench-days.sh "$vpackctl" 60 "1 2 3" >"$dir/days.md" || return 1
    # The same on the 2-socket hosts without bursts and with the trace builder's
    # bursts and uneven vCPUs (issue 26, item 4): one section per workload.
    local args
    for args in "" "--burst 1" "--burst 1 --vcpu-split hot" "--burst 2 --vcpu-split hot"; do
        # shellcheck disable=SC2086 # the workload's options, split on purpose
        HOSTS='package:2 core:16 pu:1;package:2 core:16 pu:2' \
        TITLE="Workload: ${args:-no bursts, even vCPUs}" \
            bash tests/bench/bench-days.sh "$vpackctl" 60 "1 2 3" -- $args || return 1
        echo
    done >"$dir/days-bursts.md"
    python3 tests/bench/model-vs-live.py "$vpackctl" "$(dirname "$dir")" "$top/BENCHMARKS.md" \
        >"$dir/model-vs-live.txt" || return 1
    echo "simulate $((SECONDS - t0))" >>"$(dirname "$dir")/durations"
}

rc=0
if has planner; then
    log "planner scale (bench-policy)"
    t0=$SECONDS
    "$bdir/tests/bench/bench-policy" >"$results/planner.txt" 2>&1 || rc=1
    echo "planner $((SECONDS - t0))" >>"$results/durations"
fi
if has placement; then
    for l in ${loads//,/ }; do live placement "$l" || rc=1; done
fi
has reaction && { live reaction || rc=1; }
has stability && { live stability || rc=1; }
has cost && { live cost || rc=1; }
if has hook; then
    log "hook latency (bench-hook.sh, shortened)"
    hook() {
        local t0=$SECONDS
        VPHK_STARTS=8 VPHK_HOOK_RUNS=30 bash tests/bench/bench-hook.sh
        echo "hook $((SECONDS - t0))" >>"$VPB_OUT/durations"
    }
    if [ -n "${VPACK_LIVE_LOCK:-}" ]; then
        export -f hook; flock "$VPACK_LIVE_LOCK" bash -c hook >"$results/hook.txt" 2>"$results/hook.log" || rc=1
    else
        hook >"$results/hook.txt" 2>"$results/hook.log" || rc=1
    fi
fi
if has simulate; then
    log "host model (vpackctl simulate, model-vs-live.py)"
    simulate_part "$bdir/ctl/vpackctl" "$results/simulate" || rc=1
fi
echo "duration_s=$((SECONDS - t_start)) status=$rc" >>"$results/info"
log "writing $out"
python3 tests/bench/bench-report.py "$results" "$out" ${update:+--update}
log "done in $((SECONDS - t_start)) s (status $rc)"
exit $rc
