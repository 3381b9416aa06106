#!/bin/bash
# SPDX-License-Identifier: MIT
# The host model's speed: `vpackctl simulate` of 24 h at 1 s intervals of the
# 100 PlanetLab VMs in tests/data/planetlab on a 2 x 16-core SMT host, the
# three levels and the two oracles. Prints the wall time and fails above LIMIT_S
# (default 60). Usage: bench-simulate.sh VPACKCTL
set -euo pipefail
vpackctl=${1:?usage: bench-simulate.sh VPACKCTL}
here=$(cd "$(dirname "$0")" && pwd)
data=$here/../data/planetlab/20110303
limit=${LIMIT_S:-60}
topo='synthetic:"package:2 core:16 pu:2"'
start=$EPOCHREALTIME
out=$("$vpackctl" simulate --planetlab "$data" --vms 100 --seed 1 --topology "$topo" --json)
end=$EPOCHREALTIME
secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
echo "$out"
echo "simulate: 24 h at 1 s, 100 VMs, $topo, levels 0/1/2 + oracles: ${secs} s (limit ${limit} s)"
if awk -v s="$secs" -v l="$limit" 'BEGIN { exit !(s > l) }'; then
    echo "FAIL: over ${limit} s"
    exit 1
fi
