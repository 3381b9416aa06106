#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The hardening options of systemd/vpackd.service, each applied with the
# kernel mechanism systemd uses for it (systemd is not PID 1 here), around
# vpackd against a real libvirtd and real QEMU (TCG) guests:
#
#   NoNewPrivileges=yes           setpriv --no-new-privs
#   CapabilityBoundingSet=        setpriv --bounding-set=-all --inh-caps=-all
#   ProtectSystem=strict          a mount namespace in which every mount but
#                                 /dev, /proc, /sys is remounted read-only,
#                                 the RuntimeDirectory bind-mounted writable
#   ProtectHome=yes               empty read-only mode-0 tmpfs over /home,
#                                 /root, /run/user
#   PrivateTmp=yes                fresh tmpfs on /tmp and /var/tmp
#   ProtectKernelModules=yes      module directories made inaccessible (and
#                                 no CAP_SYS_MODULE: the bounding set)
#   ProtectKernelLogs=yes         /proc/kmsg and /dev/kmsg made inaccessible
#   ProtectKernelTunables=yes     /proc/sys, /proc/sysrq-trigger, /proc/irq,
#                                 /proc/bus, /proc/acpi, /proc/fs,
#                                 /proc/latency_stats, /proc/timer_list, ...
#                                 bound read-only onto themselves where they
#                                 exist, /proc/kcore and /proc/kallsyms
#                                 covered by a mode-0 file; every mount under
#                                 /sys remounted read-only
#   ProtectControlGroups=yes      /sys/fs/cgroup and its hierarchies too ...
#   ReadWritePaths=               ... but /sys/fs/cgroup/cpuset, left
#     -/sys/fs/cgroup/cpuset      writable (systemd's remount skips it)
#   PrivateDevices=yes            /dev a tmpfs of its own with null, zero,
#                                 full, random, urandom, tty (bound from the
#                                 host's), pts, shm; read-only
#   ProtectHostname=yes           a UTS namespace (unshare --uts), and
#   RestrictNamespaces=yes,       seccomp filters as systemd's (unit-filters,
#   LockPersonality=yes,          libseccomp): no namespace made or joined,
#   MemoryDenyWriteExecute=yes,   no personality change, no writable and
#   RestrictRealtime=yes,         executable memory, no realtime policy, no
#   RestrictSUIDSGID=yes,         set-user/group-ID bit, no clock or host
#   ProtectClock=yes,             name set, @raw-io refused (PrivateDevices),
#   SystemCallArchitectures=      no call of another architecture
#     native
#   UMask=0077                    umask 0077
#   RestrictAddressFamilies=...   a seccomp filter on socket() (restrict-af,
#                                 libseccomp)
#   SystemCallFilter=@system-     unit-filters --allow: the unit's
#     service perf_event_open,    SystemCallFilter= lines expanded by
#   SystemCallErrorNumber=EPERM   systemd-analyze syscall-filter; every
#                                 other call fails with EPERM and is logged
#                                 (an audit record in the kernel log)
#   IPAddressDeny=any,            not mimicked (a cgroup BPF program);
#   IPAddressAllow=localhost      the works phase checks that vpackd's only
#                                 IP sockets are on loopback
#
# PrivateMounts=yes is the sandbox's own mount namespace (unshare --mount
# --propagation private).
#
# Phases:
#   unit       the unit has each of these options; `systemd-analyze verify`
#              passes on the installed unit (meson install --destdir), and
#              `systemd-analyze security --offline=yes` rates it below 4.1
#              (it measured 3.6; 5.6 before ProtectKernelTunables and the
#              options after it)
#   sandbox    the filters work: in the sandbox /etc is read-only, /root is
#              empty, writing /proc/sys/kernel/core_pattern (its own value)
#              fails, /dev holds only the unit's nodes, user namespaces,
#              writable executable memory, personality changes and a
#              set-user-ID bit are refused, the umask is 0077, AF_PACKET
#              sockets are refused, AF_UNIX allowed; a call outside
#              the unit's SystemCallFilter= (syslog) fails with EPERM and is
#              logged
#   works      vpackd in the sandbox: the running vpackd has NoNewPrivs 1, no
#              capabilities, the 3 seccomp filters, its /, /proc/sys, /sys and
#              /sys/fs/cgroup read-only and /sys/fs/cgroup/cpuset writable;
#              it connects to libvirt (vpackctl status, also as an
#              unprivileged user: the socket is still 0666), serves metrics
#              (its IP sockets all on 127.0.0.1), packs two level-2 guests
#              onto CPU 0 keeping a guest pin, repairs libvirt's cpusets and
#              re-pins after CPU 1 goes offline and online, reconnects after
#              libvirtd restarts, and exits 0 on SIGTERM with the guests'
#              masks given back; no system call of its was refused
#   cgroups    the same with /sys/fs/cgroup/cpuset read-only too (no
#              ReadWritePaths=): the repair fails - the reason the unit
#              has it
#
# VPACKD, VPACKCTL, VPACK_RESTRICT_AF, VPACK_UNIT_FILTERS pick the binaries.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
# The sandbox hides /tmp: the work directory is under /var/tmp.
VP_WORK_PARENT=/var/tmp
vp_test hardening vphd-
vp_need_cpus 2
RESTRICT_AF=${VPACK_RESTRICT_AF:-$builddir/tests/integration/restrict-af}
UNIT_FILTERS=${VPACK_UNIT_FILTERS:-$builddir/tests/integration/unit-filters}
rundir=$(mktemp -d /run/vpack-hardening.XXXXXX)   # stands for RuntimeDirectory
vp_on_exit 'rm -rf "$rundir"'
install -d -m 0755 /run/vpack   # the RuntimeDirectory itself, as systemd makes it
# The sandbox hides /tmp, /var/tmp, /home and /root, where a checkout (and so
# the build) may well be: run copies of the programs from outside them, as
# an installed vpackd runs from /usr/sbin.
bindir=$(mktemp -d /run/vpack-hardening-bin.XXXXXX)
vp_on_exit 'rm -rf "$bindir"'
install -m 0755 "$VPACKD" "$bindir/vpackd"
install -m 0755 "$RESTRICT_AF" "$bindir/restrict-af"
install -m 0755 "$UNIT_FILTERS" "$bindir/unit-filters"
install -m 0755 "$VPACKCTL" "$bindir/vpackctl"
VPACKD=$bindir/vpackd
RESTRICT_AF=$bindir/restrict-af
UNIT_FILTERS=$bindir/unit-filters
# An unprivileged status client must reach the socket and vpackctl, as it
# reaches /run/vpack (mode 0755) and /usr/bin.
chmod 0755 "$rundir" "$bindir"
# The sandbox's own /dev and its inaccessible file are built here.
fsdir=$(mktemp -d /run/vpack-hardening-fs.XXXXXX)
vp_on_exit 'rm -rf "$fsdir"'
# What the unit's SystemCallFilter= lines allow, groups expanded: the first
# line is the allow list, a later one adds to it, or with "~" takes away.
expand_set() {
    case $1 in
        @*) systemd-analyze syscall-filter "$1" | awk 'NR > 1 && NF && $1 !~ /^#/ {print $1}' |
                while read -r c; do expand_set "$c"; done ;;
        *) echo "$1" ;;
    esac
}
allowed=$bindir/syscall-filter.txt
: > "$allowed"
while read -r line; do
    set -- ${line#SystemCallFilter=}
    if [ "${1:0:1}" = "~" ]; then
        set -- "${1#\~}" "${@:2}"
        for g in "$@"; do expand_set "$g"; done | sort -u > "$bindir/minus.txt"
        comm -23 "$allowed" "$bindir/minus.txt" > "$bindir/rest.txt"; mv "$bindir/rest.txt" "$allowed"
    else
        { cat "$allowed"; for g in "$@"; do expand_set "$g"; done; } | sort -u > "$bindir/plus.txt"
        mv "$bindir/plus.txt" "$allowed"
    fi
done < <(grep "^SystemCallFilter=" "$srcdir/systemd/vpackd.service")
grep -qx execve "$allowed" && grep -qx perf_event_open "$allowed" ||
    { echo "the unit's SystemCallFilter= expanded to $(wc -l < "$allowed") calls, without execve or perf_event_open"; exit 1; }
sock=$rundir/vpackd.sock
# After the read-only-cpuset phase libvirt's cpusets lack CPU 1: at the
# exit, once vp_cleanup has brought the CPUs online, they get it back.
vp_on_exit 'vp_online_all_cpus; vp_repair_machine_cpusets'


# sandbox [cgroup-ro] COMMAND...: execs COMMAND as the unit would run it, in
# place of the calling (sub)shell: `sandbox ... &` gives COMMAND's pid in $!,
# run it in ( ) otherwise. With "cgroup-ro" first, /sys/fs/cgroup/cpuset is
# read-only too, as it would be without the unit's ReadWritePaths=.
sandbox() {
    local cgro=""
    [ "$1" = cgroup-ro ] && { cgro=1; shift; }
    exec unshare --mount --uts --propagation private -- bash -c '
        set -e
        rw=$1; cgro=$2; af=$3; uf=$4; allow=$5; fs=$6; shift 6
        # PrivateDevices=yes: a tmpfs /dev with the nodes systemd puts there
        # (bound from the host'"'"'s, where systemd makes them), built first,
        # while / is writable; read-only at the end.
        mount -t tmpfs -o mode=0755,nosuid tmpfs "$fs"
        mkdir -m 0755 "$fs/dev" "$fs/dev/pts" "$fs/dev/shm"
        for n in null zero full random urandom tty; do
            touch "$fs/dev/$n"; mount --bind "/dev/$n" "$fs/dev/$n"
        done
        mount --bind /dev/pts "$fs/dev/pts"
        mount --bind /dev/shm "$fs/dev/shm"
        ln -s pts/ptmx "$fs/dev/ptmx"
        ln -s /proc/self/fd "$fs/dev/fd"
        for i in 0:stdin 1:stdout 2:stderr; do ln -s "/proc/self/fd/${i%%:*}" "$fs/dev/${i#*:}"; done
        # What systemd binds over a path it makes inaccessible.
        touch "$fs/inaccessible"; chmod 0000 "$fs/inaccessible"
        mount -o remount,nosuid,noexec "$fs"
        mount --rbind "$fs/dev" /dev
        # ProtectSystem=strict, with the RuntimeDirectory writable: the
        # real one, /run/vpack (vpackd keeps its per-connection lock there),
        # and the test'"'"'s, its state directory here.
        mount --bind "$rw" "$rw"
        mount --bind /run/vpack /run/vpack
        awk "{print \$5}" /proc/self/mountinfo | sort -u | while read -r mp; do
            case $mp in /dev|/dev/*|/proc|/proc/*|/sys|/sys/*|"$rw"|/run/vpack) continue ;; esac
            mount -o remount,bind,ro "$mp" 2>/dev/null || true
        done
        mount -o remount,bind,ro /dev
        # ProtectHome=yes
        for d in /home /root /run/user; do
            [ -d "$d" ] && mount -t tmpfs -o ro,mode=000 tmpfs "$d"
        done
        # PrivateTmp=yes
        mount -t tmpfs -o mode=1777 tmpfs /tmp
        mount -t tmpfs -o mode=1777 tmpfs /var/tmp
        # ProtectKernelModules=yes, ProtectKernelLogs=yes
        for d in /lib/modules /usr/lib/modules; do
            [ -d "$d" ] && mount -t tmpfs -o ro,mode=000 tmpfs "$d"
        done
        for f in /proc/kmsg /dev/kmsg; do
            [ -e "$f" ] && mount --bind /dev/null "$f" && mount -o remount,bind,ro "$f"
        done
        # ProtectKernelTunables=yes: the /proc entries of systemd 252 (and
        # /proc/timer_list, of later ones) bound read-only onto themselves,
        # kcore and kallsyms inaccessible ...
        for p in /proc/acpi /proc/apm /proc/asound /proc/bus /proc/fs /proc/irq \
                 /proc/latency_stats /proc/mtrr /proc/scsi /proc/sys /proc/sysrq-trigger \
                 /proc/timer_list /proc/timer_stats; do
            [ -e "$p" ] || continue
            mount --bind "$p" "$p"; mount -o remount,bind,ro "$p"
        done
        for p in /proc/kcore /proc/kallsyms; do
            [ -e "$p" ] && mount --bind "$fs/inaccessible" "$p"
        done
        # ... and /sys with everything under it read-only; with
        # ProtectControlGroups=yes that includes /sys/fs/cgroup, but for the
        # ReadWritePaths= (systemd'"'"'s recursive read-only remount skips it).
        awk "{print \$5}" /proc/self/mountinfo | grep -E "^/sys(/|\$)" | sort -u | while read -r mp; do
            case $mp in /sys/fs/cgroup/cpuset|/sys/fs/cgroup/cpuset/*) [ -n "$cgro" ] || continue ;; esac
            mount -o remount,bind,ro "$mp" || echo "sandbox: cannot make $mp read-only" >&2
        done
        # UMask=0077
        umask 0077
        # NoNewPrivileges=yes, CapabilityBoundingSet=, RestrictAddressFamilies=,
        # then the other seccomp options and SystemCallFilter= (EPERM,
        # logged)
        exec setpriv --no-new-privs --bounding-set=-all --inh-caps=-all \
            "$af" unix,netlink,inet,inet6 "$uf" --allow "$allow" "$@"
    ' sandbox "$rundir" "$cgro" "$RESTRICT_AF" "$UNIT_FILTERS" "$allowed" "$fsdir" "$@"
}

echo "== unit"
unit=$srcdir/systemd/vpackd.service
for opt in NoNewPrivileges=yes CapabilityBoundingSet= ProtectSystem=strict ProtectHome=yes \
           PrivateTmp=yes ProtectKernelModules=yes ProtectKernelLogs=yes \
           ProtectKernelTunables=yes ProtectControlGroups=yes ReadWritePaths=-/sys/fs/cgroup/cpuset \
           PrivateDevices=yes RestrictNamespaces=yes LockPersonality=yes MemoryDenyWriteExecute=yes \
           RestrictRealtime=yes RestrictSUIDSGID=yes ProtectClock=yes ProtectHostname=yes \
           SystemCallArchitectures=native UMask=0077 \
           "RestrictAddressFamilies=AF_UNIX AF_NETLINK AF_INET AF_INET6" RuntimeDirectory=vpack \
           "SystemCallFilter=@system-service perf_event_open" SystemCallErrorNumber=EPERM \
           IPAddressDeny=any IPAddressAllow=localhost PrivateMounts=yes; do
    grep -qx -- "$opt" "$unit" && vp_pass "unit has $opt" || vp_fail "unit lacks $opt"
done
# The only writable path beyond the RuntimeDirectory: the cpuset tree.
n=$(grep -c "^ReadWritePaths=" "$unit" || true)
[ "$n" = 1 ] && vp_pass "one ReadWritePaths= line" || vp_fail "$n ReadWritePaths= lines"
for opt in PrivateNetwork; do
    grep -q "^$opt=" "$unit" && vp_fail "unit sets $opt (see its comment)" || vp_pass "unit does not set $opt"
done
meson install -C "$builddir" --no-rebuild --quiet --destdir "$work/inst" >/dev/null
inst_unit=$(find "$work/inst" -name vpackd.service | head -n1)
[ -n "$inst_unit" ] || vp_die "meson install put no vpackd.service in $work/inst"
mkdir -p "$work/unit"
exe=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$inst_unit")
# ExecStart and the ExecReload that checks the file first run the same vpackd.
sed "s|^\(Exec[A-Za-z]*=\)$exe |\1$work/inst$exe |" "$inst_unit" > "$work/unit/vpackd.service"
manroot=$(find "$work/inst" -type d -name man | head -n1)
rc=0
out=$(MANPATH=$manroot systemd-analyze verify "$work/unit/vpackd.service" 2>&1) || rc=$?
[ $rc -eq 0 ] && [ -z "$out" ] && vp_pass "systemd-analyze verify: clean (installed unit, ExecStart and ExecReload under the destdir)" ||
    vp_fail "systemd-analyze verify (exit $rc): $out"
score=$(systemd-analyze security --offline=yes "$work/unit/vpackd.service" 2>&1 |
        sed -n 's/.*Overall exposure level for vpackd.service: \([0-9.]*\).*/\1/p')
sed "/^NoNewPrivileges=/,/^PrivateMounts=/d" "$work/unit/vpackd.service" > "$work/unit/plain.service"
score0=$(systemd-analyze security --offline=yes "$work/unit/plain.service" 2>&1 |
         sed -n 's/.*Overall exposure level for plain.service: \([0-9.]*\).*/\1/p')
# Measured 2.1 (systemd 252; 3.6 before SystemCallFilter= and IPAddressDeny=,
# 5.6 before ProtectKernelTunables=); issue 27 wants it below 2.5.
if [ -n "$score" ] && awk -v s="$score" 'BEGIN {exit !(s < 2.5)}'; then
    vp_pass "systemd-analyze security --offline=yes: exposure $score, below 2.5 (without the options: $score0)"
else
    vp_fail "systemd-analyze security: exposure '$score', not below 2.5 (without the options: $score0)"
fi

echo "== sandbox"
rc=0; (sandbox touch /etc/vpack-hardening-probe 2>/dev/null) || rc=$?
[ $rc -ne 0 ] && [ ! -e /etc/vpack-hardening-probe ] && vp_pass "in the sandbox /etc is read-only" ||
    { rm -f /etc/vpack-hardening-probe; vp_fail "could write /etc in the sandbox"; }
rc=0; (sandbox touch "$rundir/probe") || rc=$?
[ $rc -eq 0 ] && [ -e "$rundir/probe" ] && vp_pass "the run directory is writable" || vp_fail "run directory not writable"
rm -f "$rundir/probe"
n=$(sandbox sh -c 'ls -A /root 2>/dev/null | wc -l')
t=$(sandbox stat -f -c %T /root)
[ "$n" = 0 ] && [ "$t" = tmpfs ] && vp_pass "/root is an empty tmpfs root cannot even list" || vp_fail "/root: $n entries, $t"
out=$(sandbox "$VP_PYTHON" -c '
import socket
socket.socket(socket.AF_UNIX).close(); socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 15).close()
socket.socket(socket.AF_INET).close(); socket.socket(socket.AF_INET6).close()
try:
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW); print("packet allowed")
except OSError as e:
    print("packet refused:", e.strerror)' 2>&1 || true)
grep -q "packet refused: Address family not supported" <<<"$out" && vp_pass "AF_PACKET refused, AF_UNIX/NETLINK/INET/INET6 allowed" ||
    vp_fail "address families: $out"
# ProtectKernelTunables=yes: the sysctl a compromised vpackd would want
# first. Its own value written back: nothing changes even if it worked.
# (sandbox execs: an `|| ...` of a failed command goes outside the $( ).)
out=$(sandbox sh -c 'v=$(cat /proc/sys/kernel/core_pattern) && printf "%s\n" "$v" > /proc/sys/kernel/core_pattern && echo written' 2>&1) || true
if grep -q "Read-only file system" <<<"$out" && ! grep -q written <<<"$out"; then
    vp_pass "writing /proc/sys/kernel/core_pattern fails: $(tail -n1 <<<"$out")"
else
    vp_fail "/proc/sys/kernel/core_pattern: $out"
fi
out=$(sandbox sh -c 'head -c1 /proc/kcore >/dev/null 2>&1 && echo kcore; ls /dev | tr "\n" " "') || true
[ "$out" = "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero " ] &&
    vp_pass "PrivateDevices: /dev holds $out; /proc/kcore not readable" || vp_fail "/dev, kcore: $out"
# The seccomp options: each of these works as capless root without them.
out=$(sandbox sh -c 'unshare --user true 2>&1 || echo refused' 2>&1) || true
grep -q refused <<<"$out" && vp_pass "RestrictNamespaces: unshare --user refused" || vp_fail "unshare --user: $out"
out=$(sandbox sh -c 'setarch "$(uname -m)" --addr-no-randomize true 2>&1 || echo refused' 2>&1) || true
grep -q refused <<<"$out" && vp_pass "LockPersonality: setarch -R refused" || vp_fail "setarch -R: $out"
out=$(sandbox "$VP_PYTHON" -c '
import mmap
try:
    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC); print("wx allowed")
except OSError as e:
    print("wx refused:", e.strerror)
mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE).close(); print("rw allowed")' 2>&1) || true
grep -q "wx refused: Operation not permitted" <<<"$out" && grep -q "rw allowed" <<<"$out" &&
    vp_pass "MemoryDenyWriteExecute: a writable executable mapping refused, a writable one allowed" ||
    vp_fail "mmap: $out"
out=$(sandbox sh -c 'f=$1/suid-probe; : > "$f"; chmod 0644 "$f"; chmod 4755 "$f" 2>&1 || echo refused; umask' sh "$rundir" 2>&1) || true
rm -f "$rundir/suid-probe"
grep -q refused <<<"$out" && grep -qx 0077 <<<"$out" &&
    vp_pass "RestrictSUIDSGID: chmod 4755 refused; UMask: umask 0077" || vp_fail "suid, umask: $out"
# SystemCallFilter= with SystemCallErrorNumber=EPERM: syslog(2) (a query
# of the kernel log's size; not in the set) from a sandboxed program fails
# with EPERM, and the refusal is logged under its pid.
outside_calls() {   # PID: the numbers of the calls logged for it
    dmesg 2>/dev/null | grep "type=1326" | grep " pid=$1 " |
        sed -n 's/.* syscall=\([0-9]*\) .*/\1/p' | sort -un || true
}
out=$(sandbox "$VP_PYTHON" -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(103, 10, None, 0); print(os.getpid(), r, os.strerror(ctypes.get_errno()))' 2>&1) || true
probe=${out%% *}
for _ in 1 2 3 4 5 6 7 8 9 10; do
    nrs=$(outside_calls "$probe"); [ -z "$nrs" ] || break; sleep 0.2
done
[ "$nrs" = 103 ] && [ "${out#* }" = "-1 Operation not permitted" ] &&
    vp_pass "a call outside SystemCallFilter= fails with EPERM and is logged: syslog, pid $probe" ||
    vp_fail "a call outside SystemCallFilter=: '$out', logged calls '$nrs'"

vp_install_deps
vp_start_libvirtd
vp_build_guest
vp_destroy_all_test_domains
META2="<vpack:powerpolicy xmlns:vpack='$NS' level='2'/>"
vp_define_start vphd-a 2 work:10 "" "$META2"
vp_define_start vphd-p 2 idle "<vcpupin vcpu='1' cpuset='1'/>" "$META2"
vp_wait_ready vphd-a
vp_wait_ready vphd-p

pins() {
    vp_virsh vcpupin "$1" | awk 'NF == 2 {printf "vcpu%s=%s ", $1, $2}'
    printf 'emulator=%s\n' "$(vp_virsh emulatorpin "$1" | tr -d ' \n')"
}
# Packed onto one package, either one (with vphd-p's vCPU 1 pinned to CPU 1,
# package 1 is awake anyway, and the policy may rightly choose it).
packed() { vp_packed_keeping_pin vphd-p 1 1 vphd-a; }
wait_for() { vp_wait_for "$@"; }

run_agent() {   # [cgroup-ro]
    port=$(vp_free_port)
    # (appended: vp_start_agent heads each start, and the log keeps both phases)
    # The test asks for its status next, and then checks that it says
    # "libvirt connected" itself: the socket is enough.
    # Under AddressSanitizer, LeakSanitizer's check at exit stops the world
    # with ptrace, which the unit's SystemCallFilter= refuses (EPERM): it
    # then aborts (exit 134) after vpackd stopped cleanly. Leaks are checked
    # by the other live tests; in the sandbox the exit status is the unit's.
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    vp_start_agent --ready=socket sandbox "$@" -- --topology 'synthetic:"package:2 core:1 pu:1"' \
        --set agent.state_dir="$rundir" --set control.socket="$sock" --set metrics.port="$port" \
        --set policy.pack_watermark=0.9 --set policy.spread_watermark=0.95 \
        --set agent.log_level=debug
}
hotplug_cycle() {
    echo 0 > /sys/devices/system/cpu/cpu1/online
    sleep 2
    echo 1 > /sys/devices/system/cpu/cpu1/online
    sleep 4
}

echo "== works in the sandbox"
run_agent
st=/proc/$agent_pid/status
nnp=$(awk '/^NoNewPrivs/ {print $2}' "$st"); bnd=$(awk '/^CapBnd/ {print $2}' "$st")
eff=$(awk '/^CapEff/ {print $2}' "$st"); sec=$(awk '/^Seccomp:/ {print $2}' "$st")
nf=$(awk '/^Seccomp_filters:/ {print $2}' "$st")
# Three filters: restrict-af's, the unit's other options, the logging one.
[ "$(cat /proc/$agent_pid/comm)" = vpackd ] && [ "$nnp" = 1 ] && [ "$bnd" = 0000000000000000 ] &&
    [ "$eff" = 0000000000000000 ] && [ "$sec" = 2 ] && [ "$nf" = 3 ] &&
    vp_pass "vpackd runs with NoNewPrivs 1, CapBnd $bnd, CapEff $eff, Seccomp $sec, Seccomp_filters $nf" ||
    vp_fail "vpackd's status: comm $(cat /proc/$agent_pid/comm) NoNewPrivs $nnp CapBnd $bnd CapEff $eff Seccomp $sec Seccomp_filters $nf"
grep -q " / / ro," "/proc/$agent_pid/mountinfo" && vp_pass "vpackd's / is read-only" || vp_fail "vpackd's / is not read-only"
# Mount point -> its options, in vpackd's namespace.
mnt() { awk -v m="$1" '$5 == m {o = $6} END {print o}' "/proc/$agent_pid/mountinfo"; }
ro=""; rw=""
for m in /proc/sys /proc/sysrq-trigger /sys /sys/fs/cgroup /sys/fs/cgroup/memory /sys/fs/cgroup/unified /dev; do
    case $(mnt "$m") in ro,*) ro="$ro $m" ;; "") ;; *) rw="$rw $m" ;; esac
done
[ -z "$rw" ] && vp_pass "vpackd's read-only mounts:$ro" || vp_fail "writable in vpackd's namespace:$rw (read-only:$ro)"
case $(mnt /sys/fs/cgroup/cpuset) in
    rw,*) vp_pass "vpackd's /sys/fs/cgroup/cpuset is writable (ReadWritePaths=)" ;;
    *) vp_fail "vpackd's /sys/fs/cgroup/cpuset: '$(mnt /sys/fs/cgroup/cpuset)'" ;;
esac
sleep 2
out=$("$VPACKCTL" status --socket "$sock" 2>&1 || true)
grep -q "libvirt connected" <<<"$out" && vp_pass "vpackctl status: libvirt connected" || vp_fail "status: $(head -n2 <<<"$out")"
# UMask=0077 does not reach the socket: vpackd binds it under a umask of
# its own (agent/control.c), and anyone may ask for status.
mode=$(stat -c %a "$sock")
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$VPACKCTL" status --socket "$sock" 2>&1 || true)
[ "$mode" = 666 ] && grep -q "libvirt connected" <<<"$out" &&
    vp_pass "socket mode $mode under UMask=0077; vpackctl status as uid 65534: libvirt connected" ||
    vp_fail "socket mode $mode; status as uid 65534: $(head -n2 <<<"$out")"
m=$(curl -s --max-time 5 "http://127.0.0.1:$port/metrics" | awk '$1 == "vpack_libvirt_connected" {print $2}')
[ "$m" = 1 ] && vp_pass "metrics served: vpack_libvirt_connected 1" || vp_fail "metrics: vpack_libvirt_connected '$m'"
# IPAddressAllow=localhost: every IP socket vpackd holds (the endpoint, the
# scrape above if still open) is on loopback, so the unit's IP filter takes
# nothing from it.
ips=$(ss -tuanpH | awk -v p="pid=$agent_pid," 'index($0, p) {print $5}' | sort -u | tr '\n' ' ')
if [ -n "$ips" ] && ! grep -qvE '^(127\.|\[::1\]|\[::ffff:127\.)' < <(tr ' ' '\n' <<<"$ips" | grep .); then
    vp_pass "vpackd's IP sockets are on loopback only: $ips"
else
    vp_fail "vpackd's IP sockets: '$ips'"
fi
# (generous: guests just booted, and other jobs may load the machine)
if t=$(wait_for 60 packed); then vp_pass "packed onto one package after ${t}s, vphd-p keeps vCPU 1 on CPU 1"
else vp_fail "not packed: a: $(pins vphd-a) p: $(pins vphd-p)"; fi
hotplug_cycle
if grep -q "repaired [0-9]* cpuset cgroups" "$work/vpackd.log" && ! grep -q "cannot repair" "$work/vpackd.log"; then
    vp_pass "after CPU 1 offline/online: $(grep -o 'repaired [0-9]* cpuset cgroups' "$work/vpackd.log" | tail -n1)"
else
    vp_fail "no cpuset repair: $(grep -E 'repair|cgroup' "$work/vpackd.log" | tail -n3)"
fi
th=$(vp_thread_affinity vphd-p 1)
[ "$th" = 1 ] && vp_pass "vphd-p vCPU 1 thread back on CPU 1" || vp_fail "vphd-p vCPU 1 thread allowed on $th"
wait_for 20 packed >/dev/null && vp_pass "packed again after the hotplug" ||
    vp_fail "after the hotplug: a: $(pins vphd-a) p: $(pins vphd-p)"
# libvirtd restarted under vpackd: libvirt's reconnect paths (the remote
# client, its keepalive, the event loop) under the filter too.
connects() { vp_json_field "$("$VPACKCTL" status --json --socket "$sock" 2>/dev/null)" connects; }
rejoined() {
    [ "$(connects)" -gt "$c0" ] &&
        [ "$(curl -s --max-time 2 "http://127.0.0.1:$port/metrics" | awk '$1 == "vpack_libvirt_connected" {print $2}')" = 1 ]
}
c0=$(connects)
vp_restart_libvirtd || vp_fail "libvirtd did not restart"
if t=$(wait_for 20 rejoined); then vp_pass "reconnected ${t}s after libvirtd restarted (connects $c0 -> $(connects))"
else vp_fail "not reconnected within 20 s of libvirtd's restart (connects $c0 -> $(connects))"; fi
pid=$agent_pid
kill -TERM "$agent_pid"; rc=0; wait "$agent_pid" || rc=$?; agent_pid=""
[ $rc -eq 0 ] && vp_pass "vpackd exited 0 on SIGTERM" || vp_fail "vpackd exited $rc"
[ "$(pins vphd-a)" = "vcpu0=0-1 vcpu1=0-1 emulator=0-1" ] && [ "$(pins vphd-p)" = "vcpu0=0-1 vcpu1=1 emulator=0-1" ] &&
    vp_pass "masks given back on stop" || vp_fail "after stop: a: $(pins vphd-a) p: $(pins vphd-p)"
# What SystemCallFilter= refused vpackd: the filter's audit records (type
# 1326) with its pid, in the kernel log. Each would be a failed call (EPERM)
# somewhere in vpackd, libvirt's client, libuv or libmicrohttpd.
nrs=$(outside_calls "$pid")
if [ -z "$nrs" ]; then
    vp_pass "SystemCallFilter= refused vpackd no system call on these paths"
else
    vp_fail "SystemCallFilter= refused vpackd: $(for n in $nrs; do "$UNIT_FILTERS" --name "$n"; done | tr '\n' ' ')"
fi

echo "== the cpuset tree read-only too (no ReadWritePaths=): why the unit has it"
run_agent cgroup-ro
wait_for 30 packed >/dev/null || true
hotplug_cycle
if grep -q "cannot repair the cpuset cgroups" "$work/vpackd.log"; then
    vp_pass "with /sys/fs/cgroup/cpuset read-only: $(grep -o 'cannot repair the cpuset cgroups.*' "$work/vpackd.log" | head -n1)"
else
    vp_fail "read-only cgroups went unnoticed: $(grep -E 'repair|cgroup' "$work/vpackd.log" | tail -n3)"
fi
kill -TERM "$agent_pid"; rc=0; wait "$agent_pid" || rc=$?; agent_pid=""
vp_online_all_cpus
vp_repair_machine_cpusets

echo
vp_verdict
