#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The policy follows the physics of memory (issue 26, item 6). Where package
# C6 is system-wide (the default platform, xeon-spr: a socket that parks
# while another works reaches no deep state), packing a VM away from its
# memory's socket saves nothing and costs it remote memory. With each VM's
# memory on a NUMA node of its own (`--memory-homes spread`), on 2- and
# 4-socket hosts, `vpackctl simulate` must show:
#  - the model charges remote memory: level 0 (unpinned vCPUs run on every
#    socket) has remote-memory vCPU-seconds, and none with the charge off
#    (remote_penalty = 0 in a --power file);
#  - level 2 slows no VM more than level 0 does (per-VM delay p99 and max)
#    and spends no more energy;
#  - the same invariant fails for the policy before the change, which
#    `--set policy.pc6_scope=package` still selects: it packs half the VMs a
#    socket away from their memory for no saving (so the check can fail);
#  - where package C6 is per package (platform pc6-package, no memory
#    homes), level 2 still saves: the change took no packing away there.
# No libvirt, no agent. Prints "ok".
#
#   bash tests/unit/simulate-memory.sh build/ctl/vpackctl
set -euo pipefail

ctl=${1:?usage: simulate-memory.sh VPACKCTL}
sim_test=simulate-memory
source "$(dirname "$0")/sim-lib.sh"
power=$here/../../data/power-model.ini

# sim NAME ARGS...: one 24 h run of 60 VMs (30 s intervals) into $tmp/NAME.
sim() {
    local name=$1
    shift
    if ! "$ctl" simulate --planetlab "$data" --vms 60 --interval-ms 30000 "$@" \
            >"$tmp/$name" 2>"$tmp/err"; then
        fail "$name: simulate failed: $(cat "$tmp/err")"
        : >"$tmp/$name"
    fi
}

# cell NAME LABEL LEVEL: the row LABEL's figure for LEVEL (0..2) of run NAME, without its %.
cell() {
    sed -n "s/^$2  *//p" "$tmp/$1" | head -1 | awk -v l="$3" '{ v = $(l + 1); sub(/%$/, "", v); print v }'
}

# holds NAME: level 2's per-VM delay p99 and max and energy no worse than level 0's.
holds() {
    local n=$1 row a b
    for row in "per-VM delay p99" "per-VM delay max" "energy (kWh)"; do
        a=$(cell "$n" "$row" 0)
        b=$(cell "$n" "$row" 2)
        [ -n "$a" ] && [ -n "$b" ] || { echo "no '$row' row"; return 1; }
        if ! awk -v a="$a" -v b="$b" 'BEGIN { exit !(b <= a * 1.0001 + 1e-9) }'; then
            echo "$row: level 2 $b > level 0 $a"
            return 1
        fi
    done
}

two='synthetic:"package:2 [numa] core:16 pu:1"'
four='synthetic:"package:4 [numa] core:16 pu:1"'
sim two --topology "$two" --memory-homes spread
sim four --topology "$four" --memory-homes spread
sim two-old --topology "$two" --memory-homes spread --set policy.pc6_scope=package
sed 's/^remote_penalty = .*/remote_penalty = 0/' "$power" >"$tmp/free.ini"
sim two-free --topology "$two" --memory-homes spread --power "$tmp/free.ini"
sim pkg --topology "$two" --platform pc6-package

for n in two four; do
    r=$(cell "$n" "remote-memory vCPU-s" 0)
    awk -v r="$r" 'BEGIN { exit !(r > 100) }' ||
        fail "$n: level 0 has $r remote-memory vCPU-seconds: the model charges none"
    why=$(holds "$n") || fail "$n (xeon-spr, memory spread): $why"
    echo "simulate-memory: $n: per-VM delay p99 level 0 $(cell "$n" "per-VM delay p99" 0)%," \
        "level 2 $(cell "$n" "per-VM delay p99" 2)%; remote-memory vCPU-s level 0 $r," \
        "level 2 $(cell "$n" "remote-memory vCPU-s" 2)"
done
if why=$(holds two-old); then
    fail "two-old: the policy before the change (pc6_scope package) passes the invariant: it can no longer fail"
else
    echo "simulate-memory: the policy before the change fails it, as it must: $why"
fi
for l in 0 1 2; do
    r=$(cell two-free "remote-memory vCPU-s" "$l")
    [ "$r" = "0.0" ] || fail "two-free: remote_penalty = 0, yet level $l has $r remote-memory vCPU-s"
done
s=$(cell pkg "saving vs level 0" 2)
awk -v s="$s" 'BEGIN { exit !(s > 10) }' ||
    fail "pkg (pc6-package, no memory homes): level 2 saves $s%, want > 10%"
echo "simulate-memory: pc6-package without memory homes: level 2 saves $s%"

if [ "$failures" -gt 0 ]; then
    echo "simulate-memory: $failures failure(s)" >&2
    exit 1
fi
echo ok
