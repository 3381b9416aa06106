#!/bin/bash
# Inside the v2 host (v2host.sh cost.sh): what one nested boot-sector guest
# costs (idle, a quarter, busy), as CPU of its QEMU process over 20 s after a
# 5 s settle.
. /vpack/inside.sh
fail() { echo "FAIL: $*"; }
hz=$(getconf CLK_TCK)
for kind in idle quarter busy; do
    t0=$(date +%s%N)
    guest "v2c-$kind" "g-$kind.img" 1 ""
    t1=$(date +%s%N)
    pid=$(cat /run/libvirt/qemu/v2c-$kind.pid)
    sleep 5
    a=$(awk '{print $14 + $15}' /proc/$pid/stat)
    sleep 20
    b=$(awk '{print $14 + $15}' /proc/$pid/stat)
    echo "v2c-$kind: started in $(( (t1 - t0) / 1000000 )) ms; $(awk -v d=$((b - a)) -v hz=$hz 'BEGIN {printf "%.3f", d / hz / 20}') CPUs of the v2 host over 20 s"
    virsh destroy v2c-$kind >/dev/null
done
echo "v2 host idle: $(head -1 /proc/stat)"
