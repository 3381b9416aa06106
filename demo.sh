#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The vpack demo. Until the agent lands this runs the policy offline: it
# builds vpack, shows the topology a 2-package host would have, and replays a
# recorded load series (light, then two busy vCPUs, then light again) through
# the planner, showing the packages packed, spread and packed again.
# The live version boots real guests on a real libvirtd and packs them with
# vpackd.
set -euo pipefail
cd "$(dirname "$0")"

pkgs=(meson ninja-build pkg-config gcc libhwloc-dev libjson-c-dev libxml2-dev libinih-dev
      libuv1-dev libvirt-dev libcmocka-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null

topo='synthetic:"package:2 core:1 pu:1"'
echo "== the topology vpack would see, treating CPU 0 and CPU 1 as two packages"
./build/agent/vpackctl topology --topology "$topo"
echo
echo "== replaying tests/data/snapshots/low-high-low.jsonl (30 one-second samples)"
./build/agent/vpackctl plan --snapshot tests/data/snapshots/low-high-low.jsonl \
    --topology "$topo" --min-residency 10000 --json |
    awk -F'"reason":' '{
        n++; split($0, a, "\"active_packages\":\\["); split(a[2], b, "]");
        r = $2; sub(/^"/, "", r); sub(/".*/, "", r);
        printf "t=%2ds  active packages [%s]  %s\n", n, b[1], r }'
