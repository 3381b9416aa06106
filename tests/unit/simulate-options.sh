#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# vpackctl simulate's policy options, --config FILE and --set SECTION.KEY=VALUE,
# and the host's own load (--pin-cost, --host-burst), the workload options
# (--burst-tau, --vcpu-split) and the ranking figures (per-VM delay and
# unserved share, saturation share, energy x violation) on a hand-made trace:
# a bad key, value or file is one line on stderr naming it (exit 2 for --set,
# 1 for the file), and a setting changes what the model does, the same from
# the file or from --set, --set winning over the file. Runs on the PlanetLab
# fixture and a synthetic topology: no libvirt, no agent. Prints "ok".
#
#   bash tests/unit/simulate-options.sh build/ctl/vpackctl
set -euo pipefail

ctl=${1:?usage: simulate-options.sh VPACKCTL}
sim_test=simulate-options
source "$(dirname "$0")/sim-lib.sh"
topo='synthetic:"package:2 core:2 pu:1"'

# sim ARGS...: a short simulation (4 VMs, 10 minutes); sets rc, out, err.
sim() {
    rc=0
    "$ctl" simulate --planetlab "$data" --vms 4 --seed 1 --hours 0.17 "$@" \
        >"$tmp/out" 2>"$tmp/err" || rc=$?
    out=$(cat "$tmp/out")
    err=$(cat "$tmp/err")
}

# refused WHAT RC TEXT...: the last run exited RC with one line on stderr
# containing every TEXT, and printed nothing.
refused() {
    local what=$1 want=$2 t
    shift 2
    [ "$rc" -eq "$want" ] || fail "$what: exit code $rc, expected $want (stderr: '$err')"
    [ -z "$out" ] || fail "$what: printed '$out'"
    [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "$what: stderr is not one line: '$err'"
    for t in "$@"; do
        case $err in
        *"$t"*) ;;
        *) fail "$what: stderr '$err' does not name '$t'" ;;
        esac
    done
}

# field JSON EXPR: a Python expression over the JSON object o.
field() {
    python3 -c 'import json, sys; o = json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2"
}

# ---- bad input: one line naming what is wrong -----------------------------
sim --topology "$topo" --set policy.no_such_key=1
refused "unknown key" 2 "--set" "policy.no_such_key" "unknown key"
sim --topology "$topo" --set policy.pack_watermark=1.5
refused "value out of range" 2 "policy.pack_watermark" "'1.5'"
sim --topology "$topo" --set policy.pack_watermark=abc
refused "value not a number" 2 "policy.pack_watermark" "'abc'"
sim --topology "$topo" --set policy.pack_watermark
refused "no value" 2 "'policy.pack_watermark'" "SECTION.KEY=VALUE"
sim --topology "$topo" --set nosuchsection.key=1
refused "unknown section" 2 "nosuchsection"
sim --topology "$topo" --set
refused "--set without argument" 2 "'--set'" "needs an argument"
printf '[policy]\n# the watermark\npack_watermark = 0.5\nspread_watermark = lots\n' >"$tmp/bad.conf"
sim --topology "$topo" --config "$tmp/bad.conf"
refused "bad value in the file" 1 "$tmp/bad.conf" "line 4" "policy.spread_watermark" "'lots'"
printf '[policy]\nno_such = 1\n' >"$tmp/badkey.conf"
sim --topology "$topo" --config "$tmp/badkey.conf"
refused "unknown key in the file" 1 "$tmp/badkey.conf" "line 2" "policy.no_such" "unknown key"
sim --topology "$topo" --config "$tmp/missing.conf"
refused "missing file" 1 "$tmp/missing.conf" "No such file"
printf '[agent]\nreserved_cpus = 1-x\n' >"$tmp/badcpus.conf"
sim --topology "$topo" --config "$tmp/badcpus.conf"
refused "bad reserved_cpus" 1 "agent.reserved_cpus"

# ---- settings take effect --------------------------------------------------
sim --topology "$topo" --json
[ "$rc" -eq 0 ] || fail "defaults: exit $rc ($err)"
default=$out
packed=$(field "$default" 'o["levels"][2]["active_package_seconds"] < o["levels"][0]["active_package_seconds"]')
[ "$packed" = True ] || fail "defaults: level 2 did not pack (the test needs a trace it packs)"

# A pack watermark of 0.01: nothing ever fits, level 2 keeps both packages.
sim --topology "$topo" --json --set policy.pack_watermark=0.01
[ "$rc" -eq 0 ] || fail "--set pack_watermark: exit $rc ($err)"
low=$out
[ "$(field "$low" 'o["levels"][2]["active_package_seconds"] == o["levels"][0]["active_package_seconds"]')" = True ] ||
    fail "--set policy.pack_watermark=0.01 did not stop packing: $(field "$low" '[l["active_package_seconds"] for l in o["levels"]]')"
[ "$low" != "$default" ] || fail "--set policy.pack_watermark changed nothing"

printf '[policy]\npack_watermark = 0.01\n' >"$tmp/low.conf"
sim --topology "$topo" --json --config "$tmp/low.conf"
[ "$rc" -eq 0 ] && [ "$out" = "$low" ] || fail "--config with the same key differs from --set ($err)"
sim --topology "$topo" --json --config "$tmp/low.conf" --set policy.pack_watermark=0.6
[ "$rc" -eq 0 ] && [ "$out" = "$default" ] || fail "--set after --config did not win ($err)"

# The file's topology and reserved CPUs, unless the command line gives them.
printf '[agent]\ntopology = %s\nreserved_cpus = 2-3\n' "$topo" >"$tmp/host.conf"
sim --json --config "$tmp/host.conf"
[ "$rc" -eq 0 ] || fail "--config topology: exit $rc ($err)"
[ "$(field "$out" 'len(o["levels"][0]["package_idle"])')" = 1 ] ||
    fail "--config reserved_cpus = 2-3 did not leave package 1 out"
sim --json --config "$tmp/host.conf" --reserved 3
[ "$(field "$out" 'len(o["levels"][0]["package_idle"])')" = 2 ] ||
    fail "--reserved did not win over the file's reserved_cpus"

# ---- the host outside the guests: the pin charge and --host-burst ---------
sim --topology "$topo" --pin-cost -1
refused "negative pin cost" 2 "--pin-cost" "'-1'"
sim --topology "$topo" --host-burst 1.5
refused "burst without EVERY" 2 "--host-burst" "CPUS:EVERY"
sim --topology "$topo" --host-burst 1.5:2.5
refused "burst EVERY not whole" 2 "--host-burst" "whole number"
pins=$(field "$default" 'o["levels"][2]["pin_ops"]')
[ "$(field "$default" 'abs(o["levels"][2]["pin_cpu_s"] - 0.00216 * o["levels"][2]["pin_ops"]) < 1e-9')" = True ] ||
    fail "default pin charge: $(field "$default" 'o["levels"][2]["pin_cpu_s"]') CPU-s for $pins pins, not 2.16 ms each"
sim --topology "$topo" --json --pin-cost 0
[ "$rc" -eq 0 ] && [ "$(field "$out" 'o["levels"][2]["pin_cpu_s"]')" = 0.0 ] ||
    fail "--pin-cost 0 still charged: $(field "$out" 'o["levels"][2]["pin_cpu_s"]') ($err)"
[ "$(field "$out" 'o["levels"][0]["energy_j"] == '"$(field "$default" 'o["levels"][0]["energy_j"]')")" = True ] ||
    fail "--pin-cost changed level 0, which pins nothing"
sim --topology "$topo" --json --host-burst 2:10
[ "$rc" -eq 0 ] || fail "--host-burst: exit $rc ($err)"
[ "$(field "$out" '[round(l["foreign_cpu_s"], 6) for l in o["levels"]]')" = "[122.0, 122.0, 122.0]" ] ||
    fail "--host-burst 2:10 over 612 intervals: $(field "$out" '[l["foreign_cpu_s"] for l in o["levels"]]') CPU-s, expected 61 bursts of 2"
[ "$(field "$out" 'o["levels"][0]["energy_j"] > '"$(field "$default" 'o["levels"][0]["energy_j"]')")" = True ] &&
    [ "$(field "$out" 'o["levels"][0]["served_cpu_s"] <= '"$(field "$default" 'o["levels"][0]["served_cpu_s"]')")" = True ] ||
    fail "--host-burst: not charged to energy, or counted as served work"

# ---- the power model: the deep state's scope --------------------------------
printf '[package]\npc6_scope = socket\n' >"$tmp/badscope.ini"
sim --topology "$topo" --power "$tmp/badscope.ini"
refused "bad pc6_scope" 1 "$tmp/badscope.ini" "line 2" "pc6_scope" "expected package, system or none"
[ "$(field "$default" 'o["pc6_scope"]')" = system ] || fail "built-in pc6_scope is not system"
[ "$(field "$default" 'all(abs(l["saving"] - l["by_pc6_scope"]["system"]["saving"]) < 1e-9 for l in o["levels"])')" = True ] ||
    fail "default: saving is not the system scope's"
printf '[package]\npc6_scope = package\n' >"$tmp/package.ini"
sim --topology "$topo" --json --power "$tmp/package.ini"
[ "$rc" -eq 0 ] || fail "--power pc6_scope = package: exit $rc ($err)"
[ "$(field "$out" 'o["pc6_scope"]')" = package ] || fail "--power: pc6_scope not taken"
# The same run: every scope's figures equal; the headline saving follows the file.
[ "$(field "$out" 'o["levels"][2]["by_pc6_scope"] == '"$(field "$default" 'o["levels"][2]["by_pc6_scope"]')")" = True ] ||
    fail "--power pc6_scope changed the per-scope figures, which do not depend on it"
[ "$(field "$out" 'abs(o["levels"][2]["saving"] - o["levels"][2]["by_pc6_scope"]["package"]["saving"]) < 1e-9 and o["levels"][2]["saving"] > o["levels"][2]["by_pc6_scope"]["system"]["saving"]')" = True ] ||
    fail "pc6_scope = package: level 2 saving $(field "$out" 'o["levels"][2]["by_pc6_scope"]') not the package scope's, or not above system's"

# ---- the workload options: refused with one line naming them --------------
sim --topology "$topo" --vcpu-split lumpy
refused "bad --vcpu-split" 2 "--vcpu-split" "'lumpy'" "even, simplex or hot"
sim --topology "$topo" --burst-tau -1
refused "negative --burst-tau" 2 "--burst-tau" "'-1'"
sim --topology "$topo" --memory-homes everywhere
refused "bad --memory-homes" 2 "--memory-homes" "'everywhere'" "none or spread"
sim --topology "$topo" --set policy.pc6_scope=socket
refused "bad policy.pc6_scope" 2 "policy.pc6_scope" "'socket'" "package or system"
sim --topology "$topo" --json --burst 1 --burst-tau 30 --vcpu-split hot
[ "$rc" -eq 0 ] || fail "--burst 1 --burst-tau 30 --vcpu-split hot: exit $rc ($err)"
[ "$(field "$out" 'o["levels"][0]["demand_cpu_s"] != '"$(field "$default" 'o["levels"][0]["demand_cpu_s"]')")" = True ] ||
    fail "--burst 1 did not change the demand"

# ---- the ranking figures, on a trace small enough to compute by hand --------
# One CPU. Interval 1: VMs a, b, c want 0.1, 0.2, 0.3, all served; each
# waits s * W(0.6 - s), W(rho) = rho / (1 - rho) (model.h step 5 on one CPU).
# Interval 2: a and b want 0.6 each: 1.2 on one CPU, each served 0.5 and
# waiting the rest of the interval (0.5: the cut of step 5); the package is
# saturated in 1 of its 2 intervals with work.
one='synthetic:"package:1 core:1 pu:1"'
vm() { printf '{"name":"%s","level":0,"vcpus":[{"id":0,"util":%s}]}' "$1" "$2"; }
{
    printf '{"interval_ms":1000,"cpus":{},"domains":[%s,%s,%s]}\n' "$(vm a 0.1)" "$(vm b 0.2)" "$(vm c 0.3)"
    printf '{"interval_ms":1000,"cpus":{},"domains":[%s,%s,%s]}\n' "$(vm a 0.6)" "$(vm b 0.6)" "$(vm c 0)"
} >"$tmp/rank.jsonl"
rank=$(python3 -c '
W = lambda rho: rho / (1 - rho)
delay = {"a": 0.1 * W(0.5) + 0.5, "b": 0.2 * W(0.4) + 0.5, "c": 0.3 * W(0.3)}
want = {"a": 0.7, "b": 0.8, "c": 0.3}
d = sorted(delay[v] / want[v] for v in want)
u = sorted((0.1 / 0.7, 0.1 / 0.8, 0.0))
# nearest rank of 3: p50 the 2nd, p99 the 3rd
print(d[1], d[2], d[2], u[1], u[2], u[2], 0.5, 0.2 / 1.8)')
read -r dp50 dp99 dmax up50 up99 umax sat unserved <<<"$rank"
# The deep state's exit latency delays work too (model.h step 8): a profile
# without one keeps the hand computation to step 5's queueing alone.
printf '[package]\nexit_latency_us = 0\ntarget_residency_us = 0\n' >"$tmp/noexit.ini"
"$ctl" simulate --trace "$tmp/rank.jsonl" --topology "$one" --power "$tmp/noexit.ini" --json >"$tmp/out" 2>"$tmp/err" ||
    fail "ranking trace: $(cat "$tmp/err")"
out=$(cat "$tmp/out")
for l in 0 1 2; do
    python3 -c '
import json, sys
x = json.loads(sys.argv[1])["levels"][int(sys.argv[2])]; v = x["per_vm"]
want = [float(a) for a in sys.argv[3:10]]
have = (v["delay"]["p50"], v["delay"]["p99"], v["delay"]["max"], v["unserved"]["p50"],
        v["unserved"]["p99"], v["unserved"]["max"], x["saturation_share"])
esv = x["energy_j"] / 3.6e6 * x["saturation_share"] * float(sys.argv[10])
sys.exit(not (v["vms"] == 3 and all(abs(a - b) < 1e-6 for a, b in zip(want, have)) and
              abs(x["energy_x_violation"] - esv) < 1e-12 and
              x["work_lost_to_moves_cpu_s"] == x["costs"]["refill_cpu_s"]))
' "$out" "$l" "$dp50" "$dp99" "$dmax" "$up50" "$up99" "$umax" "$sat" "$unserved" ||
        fail "ranking trace, level $l: $(field "$out" 'o["levels"]['$l']'); expected per-VM delay $dp50 $dp99 $dmax, unserved $up50 $up99 $umax, saturation $sat, energy x violation = kWh x $sat x $unserved, work lost to moves null"
done
"$ctl" simulate --trace "$tmp/rank.jsonl" --topology "$one" --power "$tmp/noexit.ini" >"$tmp/out" 2>&1 || true
grep -q '^per-VM delay p99 .* 85\.71%$' "$tmp/out" && grep -q '^saturation share .* 50\.00%$' "$tmp/out" &&
    grep -q '^work lost to moves *the refill CPU-seconds row' "$tmp/out" ||
    fail "ranking trace: the text rows are missing or wrong:"$'\n'"$(cat "$tmp/out")"
# ---- platform profiles and the delay bound ---------------------------------
sim --topology "$topo" --platform xeon-nope
refused "unknown platform" 1 "--platform 'xeon-nope'" \
    "xeon-skx, xeon-icx, xeon-spr, pc6-package, amd-epyc"
[ "$(field "$default" 'o["platform"]["name"]')" = xeon-spr ] || fail "default platform not xeon-spr"
sim --topology "$topo" --json --platform pc6-package
[ "$rc" -eq 0 ] || fail "--platform pc6-package: exit $rc ($err)"
[ "$(field "$out" 'o["pc6_scope"], o["platform"]["exit_latency_us"], o["platform"]["target_residency_us"]')" = "('package', 290.0, 800.0)" ] ||
    fail "--platform pc6-package: $(field "$out" 'o["platform"]'), scope $(field "$out" 'o["pc6_scope"]')"
sim --topology "$topo" --json --power "$here/../../data/power-model.ini" --platform xeon-skx
[ "$(field "$out" 'o["pc6_scope"], o["platform"]["exit_latency_us"], o["platform"]["target_residency_us"]')" = "('system', 133.0, 600.0)" ] ||
    fail "--power data/power-model.ini --platform xeon-skx: $(field "$out" 'o["platform"]') ($err)"
sim --topology "$topo" --power "$tmp/package.ini" --platform xeon-spr
refused "--platform with a one-platform file" 1 "no platform 'xeon-spr'" "it has no profiles"
sim --topology "$topo" --delay-bound 0
refused "--delay-bound 0" 2 "--delay-bound" "'0'"
sim --topology "$topo" --json --delay-bound 0.01
[ "$(field "$out" 'o["delay_bound"] == 0.0001 and o["delay_bounded_optimum"]["package_seconds"] >= o["capacity_bound"]["package_seconds"]')" = True ] ||
    fail "--delay-bound 0.01: $(field "$out" 'o["delay_bound"], o["delay_bounded_optimum"], o["capacity_bound"]')"

if [ "$failures" -ne 0 ]; then
    echo "simulate-options: $failures failure(s)" >&2
    exit 1
fi
echo ok
