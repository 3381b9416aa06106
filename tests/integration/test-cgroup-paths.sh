#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Where vpackd reads iothread load and memory placement, on this host's
# cgroups (v1 controllers; a cgroup2 mount beside them makes it "hybrid"),
# with real TCG guests:
#
#   version    `vpackctl status` names the cgroup version and where cpuset
#              and memory are, as /proc/self/mounts says, and lists no
#              unavailable feature
#   names      a level-2 guest with an iothread whose virtio disk the guest
#              reads (io:vda): vpackd found the iothread by the name QEMU
#              gave its thread ("IO iothread1", the version-independent
#              path), the same thread as in libvirt's v1 iothread1 group,
#              and its load matches what the thread's own /proc stat says
#   memory     that guest's memory placement comes from memory.numa_stat of
#              the group /proc/PID/cgroup names, with the file's size and
#              the host's NUMA node
#   fallback   a guest whose QEMU runs with debug-threads=off names no
#              thread: its iothread is read through the cgroup
#
# VPACKD and VPACKCTL pick the binaries (default: $VPACK_BUILDDIR).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
vp_test cgroup vpcg-

# jq-like reads of the agent's JSON: json FILTER (a Python expression on j).
status_json() { "$VPACKCTL" status --json --socket "$sock"; }
explain_json() { "$VPACKCTL" explain "$1" --json --socket "$sock"; }
json() { "$VP_PYTHON" -c "import json, sys; j = json.load(sys.stdin); print($1)"; }

# guest_xml NAME LOAD [QEMU_NAME_OPTS]: a level-2 domain with iothread 1 and
# a read-only virtio disk on it; QEMU_NAME_OPTS replaces QEMU's -name.
guest_xml() {
    vp_domain_xml "$1" 1 "$2" "" "<vpack:powerpolicy xmlns:vpack='$NS' level='2'/>" |
        "$VP_PYTHON" -c '
import sys
xml, disk, name = sys.stdin.read(), sys.argv[1], sys.argv[2]
xml = xml.replace("<vcpu ", "<iothreads>1</iothreads>\n  <vcpu ", 1)
xml = xml.replace("</devices>", f"""  <disk type=\"file\" device=\"disk\">
      <driver name=\"qemu\" type=\"raw\" iothread=\"1\"/>
      <source file=\"{disk}\"/>
      <target dev=\"vda\" bus=\"virtio\"/>
      <readonly/>
    </disk>
  </devices>""", 1)
if name:
    xml = xml.replace("<domain type=\x27qemu\x27>", "<domain type=\x27qemu\x27 "
                      "xmlns:qemu=\x27http://libvirt.org/schemas/domain/qemu/1.0\x27>", 1)
    xml = xml.replace("</domain>", f"""  <qemu:commandline>
    <qemu:arg value=\"-name\"/>
    <qemu:arg value=\"{name}\"/>
  </qemu:commandline>
</domain>""", 1)
print(xml, end="")' "$work/disk.img" "${3:-}"
}

define_start() {
    mkdir -p "$VP_LOGDIR"
    guest_xml "$@" > "$VP_LOGDIR/$1.xml"
    vp_virsh define "$VP_LOGDIR/$1.xml" >/dev/null
    vp_start "$1"
}

# tid_named PID COMM: the TIDs of PID's threads named COMM.
tid_named() {
    local t c
    for t in /proc/"$1"/task/*; do
        read -r c < "$t/comm" 2>/dev/null || continue
        [ "$c" = "$2" ] && echo "${t##*/}"
    done
    return 0
}

vp_install_deps
vp_start_libvirtd
vp_build_guest
vp_destroy_all_test_domains

# The guests read it (read-only); QEMU runs as libvirt-qemu.
chmod 0755 "$work"
head -c $((32 << 20)) /dev/urandom > "$work/disk.img"
chmod 0644 "$work/disk.img"

define_start vpcg-io io:vda
define_start vpcg-legacy idle "guest=vpcg-legacy,debug-threads=off"
vp_wait_ready vpcg-io
vp_wait_ready vpcg-legacy
if vp_wait_for 30 grep -q 'VPACK-IO-STARTED' "$(vp_console_log vpcg-io)" >/dev/null; then
    vp_pass "vpcg-io reads its virtio disk (io:vda)"
else
    vp_fail "vpcg-io did not start its I/O: $(grep -a 'VPACK-IO' "$(vp_console_log vpcg-io)" || echo no output)"
fi
pid_io=$(vp_qemu_pid vpcg-io)
pid_lg=$(vp_qemu_pid vpcg-legacy)

# The test asks the agent about the guests next: libvirt connected.
vp_start_agent --ready=libvirt -- --topology 'synthetic:"package:2 core:1 pu:1"' \
    --set agent.state_dir="$work/state" --set control.socket="$sock" \
    --set metrics.enabled=false --set agent.log_level=debug
# Both domains read, and their memory (read at once for a new domain).
vp_wait_for 20 bash -c "$VPACKCTL explain vpcg-legacy --json --socket $sock 2>/dev/null |
    grep -q '\"source\": *\"cgroup-v1\"'" >/dev/null || true

echo "== version"
want=v1
grep -q ' cgroup2 ' /proc/self/mounts && want=hybrid
st=$(status_json)
got=$(json '"%s %s %s %d" % (j["cgroup"]["version"], j["cgroup"]["cpuset"], j["cgroup"]["memory"], len(j["cgroup"]["unavailable"]))' <<<"$st")
if [ "$got" = "$want v1 v1 0" ]; then
    vp_pass "status: cgroup $want, cpuset and memory on v1, no feature unavailable"
else
    vp_fail "status: cgroup '$got', want '$want v1 v1 0': $(json 'j["cgroup"]' <<<"$st")"
fi
line=$("$VPACKCTL" status --socket "$sock" | grep '^cgroup ' || true)
case $line in
"cgroup $want: cpuset v1, memory v1"*"every feature available") vp_pass "status text: $line" ;;
*) vp_fail "status text has no cgroup line naming $want and v1: '$line'" ;;
esac

echo "== names"
io_tid=$(tid_named "$pid_io" "IO iothread1")
cpuset_group=$(sed -n 's/^[0-9]*:cpuset://p' "/proc/$pid_io/cgroup")
cpuset_group=${cpuset_group%/emulator}
tasks=/sys/fs/cgroup/cpuset$cpuset_group/iothread1/tasks
if [ -n "$io_tid" ] && grep -qx "$io_tid" "$tasks"; then
    vp_pass "QEMU named its iothread 'IO iothread1' (TID $io_tid), the thread in $tasks"
else
    vp_fail "no thread 'IO iothread1' ($io_tid) in QEMU $pid_io, or not in $tasks"
fi
ex=$(explain_json vpcg-io)
got=$(json '"%s %s %s" % (j["level"], j["iothreads"][0]["source"], j["iothreads"][0].get("tid"))' <<<"$ex")
if [ "$got" = "2 thread-name $io_tid" ]; then
    vp_pass "explain: level-2 vpcg-io's iothread 1 read by its name, TID $io_tid"
else
    vp_fail "explain: vpcg-io level, iothread source, TID: '$got', want '2 thread-name $io_tid'"
fi
# The load vpackd reports against the thread's own /proc stat over the same 12 s.
hz=$(getconf CLK_TCK)
# (vp__proc_ticks reads /proc/ARG/stat: a thread's is /proc/PID/task/TID/stat.)
t0=$(vp__proc_ticks "$pid_io/task/$io_tid"); s0=${EPOCHREALTIME/./}
sleep 12
t1=$(vp__proc_ticks "$pid_io/task/$io_tid"); s1=${EPOCHREALTIME/./}
util=$(explain_json vpcg-io | json 'j["iothreads"][0]["util"]')
measured=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v us=$((s1 - s0)) 'BEGIN {printf "%.3f", (b - a) / hz / (us / 1e6)}')
echo "iothread 1: vpackd says $util CPUs, its /proc stat $measured CPUs over 12 s"
if awk -v m="$measured" 'BEGIN {exit !(m >= 0.005)}'; then
    vp_pass "the iothread is loaded: $measured CPUs"
else
    vp_fail "the iothread did no work ($measured CPUs): the guest's I/O does not reach it"
fi
if awk -v u="$util" -v m="$measured" 'BEGIN {d = u - m; if (d < 0) d = -d; t = m / 2; if (t < 0.02) t = 0.02; exit !(d <= t)}'; then
    vp_pass "vpackd's iothread load $util matches the thread's $measured"
else
    vp_fail "vpackd's iothread load $util, the thread's own $measured"
fi
"$VPACKCTL" explain vpcg-io --socket "$sock" | vp_has "^iothread 1 .*thread-name $io_tid\$" &&
    vp_pass "explain text: iothread 1 LOAD FROM thread-name $io_tid" ||
    vp_fail "explain text: $("$VPACKCTL" explain vpcg-io --socket "$sock" | grep '^iothread' || true)"

echo "== memory"
mem_group=$(sed -n 's/^[0-9]*:memory://p' "/proc/$pid_io/cgroup")
dir=/sys/fs/cgroup/memory$mem_group
pages=$(sed -n 's/^hierarchical_total=\([0-9]*\) .*/\1/p' "$dir/memory.numa_stat")
file_bytes=$((pages * $(getconf PAGESIZE)))
nodes=$(cat /sys/devices/system/node/online)
ex=$(explain_json vpcg-io)
got=$(json '"%s %s" % (j["memory"]["source"], j["memory"]["dir"])' <<<"$ex")
bytes=$(json 'j["memory"]["bytes"]' <<<"$ex")
shares=$(json '" ".join("%d=%.2f" % (n["node"], n["share"]) for n in j["memory"]["nodes"])' <<<"$ex")
echo "memory: vpackd $bytes bytes ($shares) from $got; the file now $file_bytes bytes; nodes $nodes"
[ "$got" = "cgroup-v1 $dir" ] && vp_pass "memory placement from $dir/memory.numa_stat (cgroup v1)" ||
    vp_fail "memory placement from '$got', want 'cgroup-v1 $dir'"
if awk -v b="$bytes" -v f="$file_bytes" 'BEGIN {exit !(b >= 8 * 2^20 && b >= f * 0.75 && b <= f * 1.25)}'; then
    vp_pass "memory size $bytes bytes: the file's pages times the page size ($file_bytes)"
else
    vp_fail "memory size $bytes bytes, the file says $file_bytes"
fi
if [ "$nodes" = 0 ]; then
    [ "$shares" = "0=1.00" ] && vp_pass "all of it on node 0, the host's only node" ||
        vp_fail "shares '$shares' on a one-node host"
else
    [ -n "$shares" ] && vp_pass "shares per node: $shares" || vp_fail "no shares per node"
fi
"$VPACKCTL" explain vpcg-io --socket "$sock" | vp_has "^memory .* MiB: node .*(cgroup-v1, $dir)" &&
    vp_pass "explain text names the memory's source" ||
    vp_fail "explain text: $("$VPACKCTL" explain vpcg-io --socket "$sock" | grep '^memory' || true)"

echo "== fallback"
if [ -z "$(tid_named "$pid_lg" "IO iothread1")" ] && [ -n "$(tid_named "$pid_lg" qemu-system-x86)" ]; then
    vp_pass "QEMU with debug-threads=off names no thread 'IO iothread1'"
else
    vp_fail "vpcg-legacy's QEMU names its threads: $(cat /proc/"$pid_lg"/task/*/comm | sort | uniq -c | tr '\n' ' ')"
fi
got=$(explain_json vpcg-legacy | json '"%s %s" % (j["iothreads"][0]["source"], j["memory"]["source"])')
[ "$got" = "cgroup-v1 cgroup-v1" ] && vp_pass "vpcg-legacy's iothread read through its v1 cgroup" ||
    vp_fail "vpcg-legacy iothread and memory sources '$got', want 'cgroup-v1 cgroup-v1'"

echo "== stop"
vp_stop_agent_check

echo
vp_verdict
