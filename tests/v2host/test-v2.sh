#!/bin/bash
# SPDX-License-Identifier: MIT
#
# test-v2.sh: runs inside the v2 test host (v2host.sh test-v2.sh): the
# unified cgroup v2 hierarchy alone, two real sockets of two cores with two
# NUMA nodes, libvirt's QEMU driver, and this build's vpackd without a
# topology override. Boot-sector guests (bootsector.S) give real vCPU,
# emulator and QEMU threads in libvirt's real v2 groups. Each check prints
# "ok: ..." or "FAIL: ..."; the exit status is the number of failures.
#
# What differs from cgroup v1, asserted here: vpackd reads
# cpuset.cpus.effective and writes no cgroup file (libvirt writes each
# thread group's cpuset.cpus when vpackd pins through it); no group's
# cpuset.cpus is ever wider than it was; after a CPU goes and comes back
# the kernel, not vpackd, gives it back, and vpackd checks that it did in
# every partition its guests live in, libvirt's custom <partition> too.
set -u
# shellcheck source=tests/v2host/inside.sh
. /vpack/inside.sh
V=/vpack
CG=/sys/fs/cgroup
fails=0
ok()   { echo "ok: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ctl()  { "$V/vpackctl" "$@"; }
sec()  { echo "== [${SECONDS} s] $*"; }

# The CPU list of a "Cpus_allowed_list" or cpuset file as one number a CPU.
expand() {
    local IFS=, part out=""
    for part in $1; do
        case $part in
            *-*) out="$out $(seq -s ' ' "${part%-*}" "${part#*-}")" ;;
            "") ;;
            *) out="$out $part" ;;
        esac
    done
    echo "$out"
}
# subset A B: every CPU of list A is in list B.
subset() {
    local c b=" $(expand "$2") "
    for c in $(expand "$1"); do
        case $b in *" $c "*) ;; *) return 1 ;; esac
    done
    return 0
}
# The CPUs of list $1 that are online, as expand() gives them.
online_of() {
    local c out="" on=" $(expand "$(cat /sys/devices/system/cpu/online)") "
    for c in $(expand "$1"); do
        case $on in *" $c "*) out="$out $c" ;; esac
    done
    echo "$out"
}
allowed() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "$1/status"; }
qpid() { cat "/run/libvirt/qemu/$1.pid"; }

# Busy CPUs of this host over $1 seconds, in hundredths, from /proc/stat.
busy_hundredths() {
    local a b
    read -r _ u n s i w q sq st _ < /proc/stat; a=$((u + n + s + q + sq + st)); b=$((a + i + w))
    sleep "$1"
    read -r _ u n s i w q sq st _ < /proc/stat
    local busy=$((u + n + s + q + sq + st - a)) all=$((u + n + s + q + sq + st + i + w - b))
    echo $((busy * 400 / all))   # 4 CPUs
}

# Every thread of domain $1 runs within $2; with a guest pin $3 for its
# vCPU 0 ("-" for none), that vCPU has exactly its pin: vpack never
# narrows or widens what the guest asked for.
placed_within() {
    local dom=$1 within=$2 pin=${3:--} pid t comm a bad=""
    pid=$(qpid "$dom") || { fail "$dom: no pid"; return; }
    for t in /proc/"$pid"/task/*; do
        comm=$(cat "$t/comm" 2>/dev/null) && a=$(allowed "$t" 2>/dev/null) && [ -n "$a" ] || continue   # ended meanwhile
        if [ "$pin" != - ] && [ "$comm" = "CPU 0/TCG" ]; then
            [ "$(expand "$a")" = "$(online_of "$pin")" ] || bad="$bad [$comm: $a, not its pin $pin]"
        else
            subset "$a" "$within" || bad="$bad [$comm: $a]"
        fi
    done
    if [ -z "$bad" ]; then ok "$4: $dom's threads within $within"; else fail "$4: $dom:$bad"; fi
}

# The cpuset.cpus of every group in the partitions, "path=list" a line.
cpus_of_groups() {
    find "$CG/machine" "$CG/vpacktest.partition" -name cpuset.cpus 2>/dev/null | sort |
        while read -r f; do echo "${f#$CG}=$(cat "$f")"; done
}
# No group's cpuset.cpus is wider than it was in $1 (empty: all online).
none_wider() {
    local line path was now bad=""
    while IFS== read -r path was; do
        [ -f "$CG$path" ] || continue
        now=$(cat "$CG$path")
        [ -n "$was" ] || was=$(cat /sys/devices/system/cpu/online)
        [ -n "$now" ] || now=$(cat /sys/devices/system/cpu/online)
        subset "$now" "$was" || bad="$bad [$path: $was -> $now]"
    done < "$1"
    if [ -z "$bad" ]; then ok "$2: no group's cpuset.cpus wider than before"; else fail "$2: widened:$bad"; fi
}
# Every group's cpuset.cpus.effective is its allowed CPUs that are online.
none_stale() {
    local f dir eff bad=""
    for f in $(find "$CG/machine" "$CG/vpacktest.partition" -name cpuset.cpus.effective); do
        dir=${f%/*}
        eff=$(cat "$f")
        subset "$(cat "${dir%/*}/cpuset.cpus.effective")" "$eff" ||
            [ -n "$(cat "$dir/cpuset.cpus")" ] || bad="$bad [${dir#$CG}: $eff]"
    done
    if [ -z "$bad" ]; then ok "$1: every group got its CPUs back"; else fail "$1: stale:$bad"; fi
}

# The CPUs of the one ACTIVE package vpackd reports; empty unless exactly one.
active_cpus() {
    ctl status | sed -n 's/^package [0-9]*  cpus \([0-9,-]*\)  ACTIVE.*/\1/p' | sed -n '1{$p}'
}
# Every thread of the three idle guests within the active package (their
# pins kept); vpackd may be moving when it is read, so up to three tries.
packed_ok() {
    local try out
    for try in 1 2 3; do
        act=$(active_cpus)
        out=$( [ -n "$act" ] && { placed_within v2g-a "$act" - "$1"; placed_within v2g-c "$act" - "$1"
                                   placed_within v2g-p "$act" 1-3 "$1, pin kept"; } )
        if [ -n "$act" ] && ! echo "$out" | grep -q '^FAIL'; then echo "$out"; return; fi
        sleep 3
    done
    echo "$out"
    if [ -z "$act" ]; then fail "$1: not one ACTIVE package"; else fails=$((fails + 1)); fi
}

# Waits (up to 120 s) for vpackd's control socket: vpackctl wait needs it there.
socket_up() {
    local t0=$SECONDS
    for _ in $(seq 240); do [ -S /run/vpack/vpackd.sock ] && break; sleep 0.5; done
    echo "vpackd's socket after $((SECONDS - t0)) s"
}

metric() {   # NAME: its value on vpackd's /metrics
    busybox wget -q -O - "http://127.0.0.1:9477/metrics" |
        sed -n "s/^$1 \([0-9.e+-]*\)$/\1/p"
}


sec "the host"
[ "$(stat -f -c %T $CG)" = cgroup2fs ] && ! grep -q ' cgroup ' /proc/mounts &&
    ok "cgroup2 is the only cgroup hierarchy" || fail "cgroup layout: $(grep cgroup /proc/mounts)"
[ "$(cat /sys/devices/system/node/node0/cpulist)" = 0-1 ] &&
    [ "$(cat /sys/devices/system/node/node1/cpulist)" = 2-3 ] &&
    [ "$(cat /sys/devices/system/cpu/cpu2/topology/physical_package_id)" = 1 ] &&
    ok "two sockets (0-1, 2-3), two NUMA nodes" || fail "topology: $(lscpu | grep -E 'Socket|NUMA')"

sec "three idle level-2 guests: one plain, one pinned, one in <partition>"
# Without systemd libvirt makes no partition: "/vpacktest" is the group
# vpacktest.partition (libvirt's suffix), made here with its controllers.
mkdir "$CG/vpacktest.partition" && echo "+cpuset +cpu +memory" > "$CG/vpacktest.partition/cgroup.subtree_control" ||
    fail "cannot make the partition's group"
guest v2g-a g-idle.img 2 ""
guest v2g-p g-idle.img 1 "<cputune><vcpupin vcpu='0' cpuset='1-3'/></cputune>"
guest v2g-c g-idle.img 1 "<resource><partition>/vpacktest</partition></resource>"
[ -d "$CG/vpacktest.partition" ] && grep -q vpacktest.partition "/proc/$(qpid v2g-c)/cgroup" &&
    ok "libvirt put v2g-c in its <partition>: $(cat "/proc/$(qpid v2g-c)/cgroup")" ||
    fail "v2g-c's group: $(cat "/proc/$(qpid v2g-c)/cgroup")"
grep -q '^0::/machine/qemu-[0-9]*-v2g-a.libvirt-qemu/emulator$' "/proc/$(qpid v2g-a)/cgroup" &&
    ok "v2g-a's QEMU in libvirt's v2 group" || fail "v2g-a: $(cat "/proc/$(qpid v2g-a)/cgroup")"
echo "-- the live v2 tree (fixture source)"
for f in $(find "$CG/machine" "$CG/vpacktest.partition" -name 'cpuset.cpus*' | sort); do
    echo "tree: ${f#$CG}=$(cat "$f")"
done
cpus_of_groups > /tmp/before.groups
sleep 3
load=$(busy_hundredths 5)
echo "the host's load with the guests, before vpackd: 0.$(printf %02d "$load") CPUs"
# vpackd's defaults: pack while the load fits 0.6 of one package's 2 cores
# (1.2 CPUs), spread above 0.8 of them (1.6). Idle, the guests cost about
# 0.1 CPU each (README.md); two busy ones add 2 CPUs.
[ "$load" -le 70 ] && ok "idle load 0.$(printf %02d "$load") CPUs, well under 1.2" ||
    fail "the host is too busy to test packing: 0.$(printf %02d "$load") CPUs (at most 0.70)"

sec "vpackd on the real topology"
mkdir -p -m 0755 /run/vpack
"$V/vpackd" --set agent.state_dir=/tmp/vpstate --set metrics.enabled=true \
    --set metrics.listen=127.0.0.1 --set metrics.port=9477 \
    --set policy.pack_delay_ms=2000 --set policy.min_residency_ms=3000 \
    >/tmp/vpackd.log 2>&1 &
vp=$!
socket_up
if ctl wait --for parked=1 --timeout 90; then ok "packed: one package parked"; else fail "not packed in 90 s"; fi
ctl status > /tmp/status
cat /tmp/status
grep -q 'topology host' /tmp/status && ok "vpackd read the real topology (no override)" ||
    fail "status: $(head -n 3 /tmp/status)"
grep -q 'cgroup v2: cpuset v2' /tmp/status && ok "vpackd sees cpuset on cgroup v2" ||
    fail "status header: $(sed -n 3p /tmp/status)"
packed_ok "packed"
ctl explain v2g-c | grep -q 'cgroup-v2, /sys/fs/cgroup/vpacktest.partition/qemu-[0-9]*-v2g-c' &&
    ok "v2g-c's memory read from its group in the <partition>" || { fail "v2g-c's memory"; ctl explain v2g-c; }
# libvirt wrote the thread groups' cpuset.cpus when vpackd pinned through it.
g=$(dirname "$(sed -n 's/^0:://p' "/proc/$(qpid v2g-a)/cgroup")")
v0=$(cat "$CG$g/vcpu0/cpuset.cpus")
[ -n "$v0" ] && subset "$v0" "$(active_cpus)" &&
    ok "libvirt narrowed $g/vcpu0 to $(cat "$CG$g/vcpu0/cpuset.cpus")" ||
    fail "$g/vcpu0/cpuset.cpus: $(cat "$CG$g/vcpu0/cpuset.cpus")"
none_wider /tmp/before.groups packed

sec "a CPU of the active package goes offline and comes back"
# The active package's last CPU (never CPU 0): the groups vpackd's pins
# narrowed to that package lose it from cpuset.cpus.effective, and get it back.
act=$(active_cpus); off=${act##*[-,]}
[ -n "$act" ] && [ "$off" != 0 ] || { fail "no active package to take a CPU from ('$act')"; off=1; }
echo "taking CPU $off of the active package (CPUs $act) offline"
echo 0 > "/sys/devices/system/cpu/cpu$off/online"
sleep 6
for d in v2g-a v2g-p v2g-c; do placed_within "$d" "$(cat /sys/devices/system/cpu/online)" - "CPU $off offline"; done
placed_within v2g-p 0-3 1-3 "CPU $off offline, pin kept"
echo 1 > "/sys/devices/system/cpu/cpu$off/online"
sleep 8
none_stale "CPU $off back"
placed_within v2g-p 0-3 1-3 "CPU $off back, pin kept"
ctl wait --for parked=1 --timeout 60 >/dev/null && ok "packed again after the hotplug" ||
    fail "not packed after the hotplug"
packed_ok "after the hotplug"
for w in "CPU $off went offline" "CPU $off went online" "CPUs online now: 0-3"; do
    grep -q "$w" /tmp/vpackd.log && ok "vpackd's log: $w" || fail "vpackd's log lacks '$w'"
done
grep -q 'not in its cpuset.cpus.effective' /tmp/vpackd.log &&
    fail "vpackd called a group stale: $(grep 'not in its cpuset.cpus.effective' /tmp/vpackd.log)"
stale=$(metric vpack_cgroup_stale_total)
[ "$stale" = 0 ] && ok "vpack_cgroup_stale_total 0: the kernel gave every group its CPU back" ||
    fail "vpack_cgroup_stale_total '$stale' with no stale group"
none_wider /tmp/before.groups "after the hotplug"

sec "two busy guests: spread over both sockets"
guest v2g-b1 g-busy.img 1 ""
guest v2g-b2 g-busy.img 1 ""
if ctl wait --for spread --timeout 90; then ok "spread"; else fail "not spread in 90 s"; ctl status; fi
placed_within v2g-b1 0-3 - spread
placed_within v2g-p 0-3 1-3 "spread, pin kept"
virsh -q destroy v2g-b1 >/dev/null; virsh -q destroy v2g-b2 >/dev/null
ctl wait --for parked=1 --timeout 120 >/dev/null && ok "packed again when the busy guests went" ||
    fail "not packed again"
packed_ok "packed again"

sec "vpackd stops: every thread and group as it was"
kill -TERM "$vp"; wait "$vp"; st=$?
[ "$st" = 0 ] && ok "vpackd stopped cleanly (exit 0, no leak or error from the sanitizers)" ||
    { fail "vpackd exit $st"; tail -n 30 /tmp/vpackd.log; }
for d in v2g-a v2g-c; do placed_within "$d" 0-3 - "after stop"; done
a=$(allowed "$(grep -l 'CPU 0/TCG' /proc/"$(qpid v2g-p)"/task/*/comm | xargs dirname)")
[ "$a" = 1-3 ] && ok "after stop: v2g-p's vCPU has its pin 1-3 back" || fail "after stop: v2g-p's vCPU on $a"
# libvirt pins by writing the thread group's cpuset.cpus, so a group that
# was empty (all of its parent's CPUs) has them all written out now.
cpus_of_groups > /tmp/after.groups
online=$(cat /sys/devices/system/cpu/online)
bad=""
while IFS== read -r path was; do
    now=$(sed -n "s|^$path=||p" /tmp/after.groups)
    [ "$now" = "$was" ] || { [ -z "$was" ] && [ "$now" = "$online" ]; } || bad="$bad [$path: '$was' -> '$now']"
done < /tmp/before.groups
[ -z "$bad" ] && ok "after stop: every group's cpuset.cpus as before (or, when empty, all online CPUs)" ||
    fail "after stop:$bad"
echo "-- vpackd's log"; tail -n 25 /tmp/vpackd.log

sec "vpackd under strace through a hotplug, a stale group made: the cgroup files it opens"
# LeakSanitizer stops the world with ptrace, which strace already holds.
ASAN_OPTIONS=detect_leaks=0 strace --seccomp-bpf -f -qq -o /tmp/vpackd.strace -e trace=openat \
    -e status=successful "$V/vpackd" --set agent.state_dir=/tmp/vpstate2 \
    --set metrics.enabled=true --set metrics.listen=127.0.0.1 --set metrics.port=9478 \
    >/tmp/vpackd2.log 2>&1 &
vp=$!
socket_up
ctl wait --for parked=1 --timeout 120 || { fail "not packed under strace"; tail -n 20 /tmp/vpackd2.log; }
act=$(active_cpus); off=${act##*[-,]}; [ -n "$act" ] && [ "$off" != 0 ] || off=1
# Linux 6.1 gives every group its CPU back, so a stale group is made: the
# CPU's absence from v2g-c's cpuset.cpus.effective (in the <partition>),
# a file bind-mounted over the kernel's. vpackd must name that group once
# the CPU is back, and count it on /metrics.
cg_c=$CG$(dirname "$(sed -n 's/^0:://p' "/proc/$(qpid v2g-c)/cgroup")")
fake=""; for c in $(expand "$(cat /sys/devices/system/cpu/online)"); do [ "$c" = "$off" ] || fake="$fake${fake:+,}$c"; done
echo "$fake" > /tmp/stale.effective
mount --bind /tmp/stale.effective "$cg_c/cpuset.cpus.effective" &&
    echo "made stale: ${cg_c#$CG}/cpuset.cpus.effective reads $(cat "$cg_c/cpuset.cpus.effective")"
echo 0 > "/sys/devices/system/cpu/cpu$off/online"; sleep 4
echo 1 > "/sys/devices/system/cpu/cpu$off/online"; sleep 8
stale=$(busybox wget -q -O - "http://127.0.0.1:9478/metrics" | sed -n 's/^vpack_cgroup_stale_total \([0-9]*\)$/\1/p')
umount "$cg_c/cpuset.cpus.effective"
[ -n "$stale" ] && [ "$stale" -ge 1 ] && ok "vpack_cgroup_stale_total $stale with one group made stale" ||
    fail "vpack_cgroup_stale_total '$stale' with one group made stale"
grep -q "cgroup ${cg_c#$CG}: CPUs $off are online .* not in its cpuset.cpus.effective" /tmp/vpackd2.log &&
    ok "vpackd named the stale group in the <partition>" ||
    { fail "vpackd did not name ${cg_c#$CG} as stale"; grep 'cgroup ' /tmp/vpackd2.log; }
kill -TERM "$(pgrep -x vpackd)"; wait "$vp"
grep -q 'CPUs online now: 0-3' /tmp/vpackd2.log || fail "vpackd under strace did not see the hotplug"
writes=$(grep -E 'openat\(.*/sys/fs/cgroup.*O_(WRONLY|RDWR)' /tmp/vpackd.strace | head -n 5)
[ -z "$writes" ] && ok "vpackd opened no cgroup file for writing" || fail "vpackd wrote: $writes"
grep -q 'vpacktest.partition/qemu-[0-9]*-v2g-c.libvirt-qemu/cpuset.cpus.effective' /tmp/vpackd.strace &&
    ok "vpackd read cpuset.cpus.effective in the <partition> after the hotplug" ||
    fail "vpackd never read the <partition>'s cpuset.cpus.effective"
grep -c 'openat(.*/sys/fs/cgroup' /tmp/vpackd.strace | sed 's/^/cgroup files opened by vpackd: /'
grep -o '/sys/fs/cgroup/[^"]*' /tmp/vpackd.strace | sed 's/qemu-[0-9]*-[^/]*/DOM/' | sort | uniq -c | sort -rn
for d in v2g-a v2g-p v2g-c; do virsh -q destroy "$d" >/dev/null 2>&1; done
echo "$fails failure(s)"
exit "$fails"
