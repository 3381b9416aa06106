# shellcheck shell=bash
# tests/integration/lib.sh - harness for vpack's integration tests and demo.
#
# Source it from a bash script (it is `set -euo pipefail` friendly); a test
# script begins with the prologue, vp_test, which also owns its exit:
#
#   . "$(dirname "$0")/lib.sh"
#   vp_test guest-boot vptest-
#   vp_install_deps
#   vp_start_libvirtd
#   vp_build_guest
#   vp_define_start vptest-a 2 busy:1
#   vp_wait_ready vptest-a
#   vp_start_agent --ready=libvirt -- --set control.socket="$sock"
#   ... vp_pass / vp_fail ...
#   vp_verdict
#
# Guests are TCG (<domain type='qemu'>) and boot a Debian cloud kernel with
# a busybox initramfs whose /init runs the load pattern given by `vpload=`
# on the kernel command line.  See README.md beside this file.

# ---------------------------------------------------------------- settings
: "${VP_CACHE:=/var/cache/vpack-test}"       # kernel + initramfs cache
: "${VP_LOGDIR:=/var/log/vpack-test}"        # console logs, domain XML
: "${VP_PREFIX:=vptest-}"                    # test domain name prefix
: "${VP_URI:=qemu:///system}"                # libvirt connection
: "${VP_READY_TIMEOUT:=60}"                  # seconds for a guest to boot
: "${VP_DAEMON_TIMEOUT:=30}"                 # seconds for libvirtd to answer
: "${VP_MEMORY_MIB:=128}"                    # guest memory (64 MiB is too small:
                                             # the 6.1 kernel triple-faults)
: "${VP_KERNEL_PKG:=}"                       # force a kernel package name
: "${VP_VCPU_CPUSET:=}"                      # optional <vcpu cpuset='...'>
: "${VP_KEEP_DOMAINS:=}"                     # non-empty: cleanup keeps domains
: "${VP_VERBOSE:=}"                          # non-empty: show apt/daemon output
# The Python of the tests' helpers: the distribution's, not whatever python3
# comes first on PATH (a version manager's shim costs 0.4 s of CPU a start,
# load enough to move what the tests measure). Never started in a polling
# loop: those read vpackctl's output with shell built-ins (vpackctl wait).
: "${VP_PYTHON:=/usr/bin/python3}"
# The top of the source tree this lib.sh is in.
VP_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# The guest kernel's modules for a virtio disk (io:DEV), in load order.
VP_GUEST_MODULES=(virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci
                  virtio_blk)

# The package lists (VP_PACKAGES: what the live tests run on) and
# vp_install_packages, shared with demo.sh and tests/run-all.sh.
# shellcheck source=../packages.sh
. "$(dirname "${BASH_SOURCE[0]}")/../packages.sh"

# Every test domain's name starts with one of these (one per script).
VP_ALL_PREFIXES=(vptest- vpag- vpcon- vpctl- vpf- vphd- vphk- vpho- vpmet- vpvirt-
                 vpdemo- vpbench- vphkb- vpsoak- vprule- vppkg- vpcg- vptr- vpin- vprec-
                 vpst- vpbu- vprs- vpms- vpmg- vpadm-)

# Every process a test starts (vpackd, libvirtd, virtlogd, ...) inherits
# VPACK_TEST_OWNER, the pid of the outermost test shell. When that shell is
# gone (meson's timeout killed it before its trap could clean up), the next
# test finds its processes by this mark and stops them: vp_reap_leftovers.
# The mark is "PID@START", START the shell's start time (/proc/PID/stat,
# field 22): PIDs come round again (pid_max is 32768 on the test machines,
# and a run of the suite goes through them every quarter of an hour), so a
# PID alone could name a stranger and keep a dead test's processes alive.
# vp__start_time PID: that process's start time, in clock ticks after boot.
vp__start_time() {
    local s
    read -r s < "/proc/$1/stat" 2>/dev/null || return 1
    s=${s##*) }   # past the command name, which may hold spaces
    set -- $s     # field 3 (state) is now $1: field 22 is $20
    printf '%s\n' "${20:-}"
}
# vp__owner_alive OWNER: the process a mark names (PID@START, or a bare PID
# from an older mark) still runs, and is the same process.
vp__owner_alive() {
    local pid=${1%%@*} start=${1#*@}
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    [ "$start" != "$1" ] || return 0
    [ "$(vp__start_time "$pid")" = "$start" ]
}
if [ -z "${VPACK_TEST_OWNER:-}" ] || ! vp__owner_alive "$VPACK_TEST_OWNER"; then
    VPACK_TEST_OWNER=$$@$(vp__start_time $$)
fi
export VPACK_TEST_OWNER
# Where a test notes what it changed outside its own work directory (the
# hook link, the installed vpack package), so that a later test can undo it
# if this one is killed.
: "${VP_MARKDIR:=/run/vpack-test}"
VP_REAPED=${VP_REAPED:-}

# Set by vp_build_guest.
VP_KERNEL=${VP_KERNEL:-}
VP_INITRD=${VP_INITRD:-}
VP_KERNEL_VERSION=${VP_KERNEL_VERSION:-}

# Daemons started by this shell (only these are stopped by the cleanup).
VP_STARTED_VIRTLOGD_PID=${VP_STARTED_VIRTLOGD_PID:-}
VP_STARTED_LIBVIRTD_PID=${VP_STARTED_LIBVIRTD_PID:-}
VP_APT_UPDATED=${VP_APT_UPDATED:-}

# ----------------------------------------------------------------- helpers
vp_log() { printf '[vpack-it %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# vp_die MSG: a failure the script cannot go on from: one line "FAIL: MSG",
# kept for the failed checks' summary at the end (vp__test_exit's log tail).
vp_die() {
    printf 'FAIL: %s\n' "$*" >&2
    VP_FAIL_LINES+=("FAIL: $*")
    exit 1
}

vp_require_root() {
    [ "$(id -u)" -eq 0 ] || vp_die "integration tests must run as root"
}

# virsh on the test connection.
vp_virsh() { virsh -q -c "$VP_URI" "$@"; }

# Run a command quietly unless VP_VERBOSE; show its output if it fails.
vp__quiet() {
    if [ -n "$VP_VERBOSE" ]; then "$@"; return; fi
    local out rc=0
    out=$("$@" 2>&1) || rc=$?
    if [ "$rc" -ne 0 ]; then printf '%s\n' "$out" >&2; fi
    return "$rc"
}

# vp__apt ARGS: apt-get without questions, waiting (bounded) for dpkg's lock.
vp__apt() { env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300 "$@"; }

vp__apt_update_once() {
    [ -n "$VP_APT_UPDATED" ] && return 0
    vp_log "apt-get update"
    vp__quiet env DEBIAN_FRONTEND=noninteractive apt-get update -q
    VP_APT_UPDATED=1
}

# ------------------------------------------------------------ dependencies
# vp_install_deps: install what the integration tests need (VP_PACKAGES); no
# apt call at all when everything is already installed.
vp_install_deps() {
    vp_install_packages "${VP_PACKAGES[@]}" || vp_die "cannot install ${VP_PACKAGES[*]}"
}

# ----------------------------------------------------------------- daemons
vp__pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

# vp__daemon_pid NAME: pid of a running daemon NAME (pidfile, else pgrep).
vp__daemon_pid() {
    local pid=""
    if [ -r "/run/$1.pid" ]; then pid=$(cat "/run/$1.pid" 2>/dev/null || true); fi
    if vp__pid_alive "$pid" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ]; then
        echo "$pid"; return 0
    fi
    pid=$(pgrep -x "$1" 2>/dev/null | head -n1 || true)
    [ -n "$pid" ] && { echo "$pid"; return 0; }
    return 1
}

vp__ensure_users() {
    getent group kvm >/dev/null || groupadd -r kvm
    getent group libvirt-qemu >/dev/null || groupadd -r libvirt-qemu
    getent group libvirt >/dev/null || groupadd -r libvirt
    if ! getent passwd libvirt-qemu >/dev/null; then
        useradd -r -g libvirt-qemu -G kvm -d /var/lib/libvirt \
            -s /usr/sbin/nologin -c "Libvirt Qemu" libvirt-qemu
    fi
    # libvirt probes QEMU's capabilities as root (KVM found) but validates
    # its cache as the qemu user: when libvirt-qemu cannot open /dev/kvm the
    # cache is declared outdated on every call and QEMU is re-probed each
    # time (seconds per virsh define/start).  Give /dev/kvm the usual Debian
    # udev permissions (root:kvm 0660); guests still run under TCG.
    if [ -c /dev/kvm ] &&
       ! runuser -u libvirt-qemu -- test -r /dev/kvm -a -w /dev/kvm 2>/dev/null; then
        vp_log "giving /dev/kvm to group kvm (mode 0660)"
        chgrp kvm /dev/kvm && chmod 0660 /dev/kvm
        id -nG libvirt-qemu | vp_has -w kvm || usermod -a -G kvm libvirt-qemu
    fi
    mkdir -p /var/log/libvirt/qemu /var/lib/libvirt/qemu /var/cache/libvirt \
             /run/libvirt "$VP_LOGDIR"
    chmod 0755 "$VP_LOGDIR"
}

# vp__marked_pids NAME: pids of processes called NAME that an earlier test
# started and left behind: their VPACK_TEST_OWNER names a shell that is gone.
vp__marked_pids() {
    local pid owner
    for pid in $(pgrep -x "$1" 2>/dev/null || true); do
        owner=$(tr '\0' '\n' 2>/dev/null < "/proc/$pid/environ" |
                sed -n 's/^VPACK_TEST_OWNER=//p') || true
        [ -n "$owner" ] || continue
        [ "$owner" = "$VPACK_TEST_OWNER" ] && continue
        vp__owner_alive "$owner" && continue
        echo "$pid"
    done
}

# vp_repair_machine_cpusets: after a test that was killed with a CPU
# offline, libvirt's cgroup v1 cpusets (machine, machine.slice and below)
# lack that CPU: give every group under them its parent's CPUs, parents first.
vp_repair_machine_cpusets() {
    local top=/sys/fs/cgroup/cpuset f parent
    [ -r "$top/cpuset.cpus" ] || return 0
    # Shallowest first, so that each parent is repaired before its children.
    find "$top"/machine "$top"/machine.slice -name cpuset.cpus 2>/dev/null |
        awk -F/ '{print NF, $0}' | sort -n | cut -d' ' -f2- |
        while read -r f; do
            parent=$(dirname "$(dirname "$f")")/cpuset.cpus
            [ -r "$parent" ] || continue
            [ "$(cat "$f")" = "$(cat "$parent")" ] && continue
            cat "$parent" > "$f" 2>/dev/null || true
        done || true
}

# vp_purge_test_package: purges the vpack Debian package that
# test-package.sh installed (and marked in $VP_MARKDIR/package, with the pid
# of its test shell); the package's prerm stops its vpackd, which gives the
# guests their pins back. Fails if dpkg still knows the package.
vp_purge_test_package() {
    vp__apt purge -y vpack >/dev/null 2>&1 || true
    if dpkg-query -W -f='${Status}' vpack 2>/dev/null | vp_has -v 'not-installed'; then
        vp_log "could not purge the vpack package"; return 1
    fi
    rm -f "$VP_MARKDIR/package"
}

# vp_reap_leftovers: removes what an earlier, killed test left behind, before
# this one starts: its vpackd (SIGTERM first: it gives the pins back), the
# test domains of every script (running or only defined), a hook link it
# installed, the vpack package test-package.sh installed (an operator's own
# vpack package carries no mark and is left alone), offline CPUs and
# shrunken cpusets, its libvirtd and virtlogd.
# Once per test shell; vp_start_libvirtd calls it.
vp_reap_leftovers() {
    [ -n "$VP_REAPED" ] && return 0
    VP_REAPED=1
    local pid d link target n=0
    for pid in $(vp__marked_pids vpackd); do
        vp_log "stopping vpackd $pid left by an earlier test"
        vp_stop_pid "$pid"; n=$((n + 1))
    done
    if [ -r "$VP_MARKDIR/hook-link" ]; then
        { read -r link; read -r target; } < "$VP_MARKDIR/hook-link" || true
        if [ -n "${link:-}" ] && [ -L "$link" ] && [ "$(readlink "$link")" = "${target:-}" ]; then
            vp_log "removing the hook link $link left by an earlier test"
            rm -f "$link"; n=$((n + 1))
        fi
        rm -f "$VP_MARKDIR/hook-link"
    fi
    if [ -r "$VP_MARKDIR/package" ]; then
        read -r pid < "$VP_MARKDIR/package" || pid=""
        if [ -z "$pid" ] || ! vp__owner_alive "$pid"; then
            if dpkg-query -W -f='${Status}' vpack 2>/dev/null | vp_has -v 'not-installed'; then
                vp_log "purging the vpack package an earlier test installed"
                vp_purge_test_package && n=$((n + 1))
            else
                rm -f "$VP_MARKDIR/package"
            fi
        fi
    fi
    vp__reap_second_libvirtd && n=$((n + 1))
    vp_online_all_cpus
    vp_repair_machine_cpusets
    for d in /run/vpack-test-bin.*; do
        [ -d "$d" ] && ! vp__owner_alive "${d##*.}" && rm -rf "$d"
    done
    # The v2 test host (tests/v2host/v2host.sh): its VM and its work directory.
    for pid in $(vp__marked_pids qemu-system-x86); do
        vp_log "stopping the v2 test host $pid left by an earlier test"
        vp__stop_pid "$pid" qemu-system-x86; n=$((n + 1))
    done
    for d in /tmp/vpack-v2host.*; do
        pid=${d#/tmp/vpack-v2host.}
        [ -d "$d" ] && ! kill -0 "${pid%%.*}" 2>/dev/null && rm -rf "$d"
    done
    # Test domains go through a libvirtd: an earlier test's own one if it
    # still runs, else one started for the purpose (it reconnects to QEMU
    # processes that outlived their libvirtd).
    if virsh -c "$VP_URI" version >/dev/null 2>&1 ||
       { pgrep -f 'qemu-system.*guest=vp[a-z]*-' >/dev/null 2>&1 && vp__start_daemons; }; then
        for d in $(vp_list_test_domains "${VP_ALL_PREFIXES[@]}"); do
            vp_log "removing test domain $d left by an earlier test"; n=$((n + 1))
        done
        vp_destroy_all_test_domains "${VP_ALL_PREFIXES[@]}"
    fi
    for d in libvirtd virtlogd; do
        for pid in $(vp__marked_pids "$d"); do
            vp_log "stopping $d $pid left by an earlier test"
            vp__stop_pid "$pid" "$d"; n=$((n + 1))
            [ "$pid" = "$VP_STARTED_LIBVIRTD_PID" ] && VP_STARTED_LIBVIRTD_PID=""
            [ "$pid" = "$VP_STARTED_VIRTLOGD_PID" ] && VP_STARTED_VIRTLOGD_PID=""
        done
    done
    [ "$n" -eq 0 ] || vp_log "cleaned up $n things an earlier test left behind"
    return 0
}

# vp_start_libvirtd: start virtlogd and libvirtd unless they run; wait until
# `virsh version` answers.  Idempotent. Removes an earlier test's leftovers
# first (vp_reap_leftovers).
vp_start_libvirtd() {
    vp_reap_leftovers
    vp__start_daemons || vp_die "libvirtd does not answer on $VP_URI after ${VP_DAEMON_TIMEOUT}s"
}

vp__start_daemons() {
    vp__ensure_users
    local pid
    if ! pid=$(vp__daemon_pid virtlogd); then
        vp_log "starting virtlogd"
        virtlogd -d
        for _ in $(seq 50); do pid=$(vp__daemon_pid virtlogd) && break; sleep 0.1; done
        [ -n "$pid" ] || vp_die "virtlogd did not start"
        VP_STARTED_VIRTLOGD_PID=$pid
    fi
    if ! pid=$(vp__daemon_pid libvirtd); then
        vp_log "starting libvirtd"
        libvirtd -d
        for _ in $(seq 50); do pid=$(vp__daemon_pid libvirtd) && break; sleep 0.1; done
        [ -n "$pid" ] || vp_die "libvirtd did not start"
        VP_STARTED_LIBVIRTD_PID=$pid
    fi
    vp__wait_libvirtd
}

vp__stop_pid() {   # PID NAME
    local pid=$1
    vp__pid_alive "$pid" || return 0
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 0
    vp_log "stopping $2 ($pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do vp__pid_alive "$pid" || return 0; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
}

# vp_stop_libvirtd: stop the daemons that THIS shell started, nothing else.
vp_stop_libvirtd() {
    if [ -n "$VP_STARTED_LIBVIRTD_PID" ]; then
        vp__stop_pid "$VP_STARTED_LIBVIRTD_PID" libvirtd
        VP_STARTED_LIBVIRTD_PID=""
    fi
    if [ -n "$VP_STARTED_VIRTLOGD_PID" ]; then
        vp__stop_pid "$VP_STARTED_VIRTLOGD_PID" virtlogd
        VP_STARTED_VIRTLOGD_PID=""
    fi
}

# vp_restart_libvirtd: stop libvirtd and start it again (it then looks for
# hooks again and runs their "reconnect"); if this shell had started it, the
# cleanup stops the new one. Waits until it answers.
vp_restart_libvirtd() {
    local pid new ours=""
    pid=$(vp__daemon_pid libvirtd) || { vp_start_libvirtd; return 0; }
    [ "$pid" = "$VP_STARTED_LIBVIRTD_PID" ] && ours=1
    vp_log "restarting libvirtd ($pid)"
    kill -TERM "$pid"
    for _ in $(seq 300); do vp__pid_alive "$pid" || break; sleep 0.1; done
    if vp__pid_alive "$pid"; then vp_log "libvirtd ($pid) did not stop within 30 s"; return 1; fi
    libvirtd -d
    for _ in $(seq 100); do
        new=$(vp__daemon_pid libvirtd) && [ "$new" != "$pid" ] && break
        new=""; sleep 0.1
    done
    [ -n "$new" ] || { vp_log "libvirtd did not start again"; return 1; }
    [ -z "$ours" ] || VP_STARTED_LIBVIRTD_PID=$new
    vp__wait_libvirtd
}

vp__wait_libvirtd() {
    local deadline=$((SECONDS + VP_DAEMON_TIMEOUT))
    until virsh -c "$VP_URI" version >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$deadline" ] || { vp_log "libvirtd does not answer on $VP_URI"; return 1; }
        sleep 0.2
    done
}

# vp_stop_pid PID: SIGCONT and SIGTERM, then SIGKILL after 5 s; reaps it if
# it is ours.
vp_stop_pid() {
    local pid=$1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
    kill -CONT "$pid" 2>/dev/null || true    # one a test stopped (SIGSTOP)
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# ---------------------------------------------------------- counted checks
# A test script's checks: vp_fail reports a failed check, counts it in
# VP_FAILURES and goes on; vp_pass reports a passed one; vp_verdict ends the
# script ("ok", or the count and exit 1).
VP_FAILURES=0
# Every failed check is one line starting with "FAIL:", printed where it
# happens and again, all of them, as the last lines of the test (vp_verdict
# and the log tail on failure): meson keeps only a test's last lines.
VP_FAIL_LINES=()
vp_fail() { echo "FAIL: $*"; VP_FAILURES=$((VP_FAILURES + 1)); VP_FAIL_LINES+=("FAIL: $*"); }
vp_pass() { echo "ok: $*"; }
# vp_has GREP-OPTIONS...: grep -q that reads all of its input. Under
# pipefail, `cmd | vp_has` fails when grep matches and exits before cmd has
# written its last line: cmd dies of SIGPIPE (a Python writer with
# PYTHONUNBUFFERED set raises BrokenPipeError) and the pipeline reports the
# match as a failure. CI's environment made test-restore fail that way.
vp_has() { grep "$@" >/dev/null; }
vp__fail_summary() {
    [ "${#VP_FAIL_LINES[@]}" -gt 0 ] || return 0
    echo "---- the failed checks"
    printf '%s\n' "${VP_FAIL_LINES[@]}" | cut -c1-400
}
vp_verdict() {
    if [ "$VP_FAILURES" -eq 0 ]; then echo "ok"; return 0; fi
    vp__fail_summary
    echo "$VP_FAILURES failure(s)"
    exit 1
}

# vp__tail_logs_on_failure RC LINES FILE...: for a test's exit: when RC or
# VP_FAILURES says something failed, the last LINES of each FILE there is
# (each once), then the failed checks again.
vp__tail_logs_on_failure() {
    local lines=$2 f seen=" "
    [ "$1" -ne 0 ] || [ "$VP_FAILURES" -ne 0 ] || return 0
    shift 2
    for f in "$@"; do
        [ -f "$f" ] || continue
        case $seen in *" $f "*) continue ;; esac
        seen+="$f "
        echo "---- $(basename "$f") (last $lines lines)"
        tail -n "$lines" "$f" 2>/dev/null || true
    done
    vp__fail_summary
}

# ------------------------------------------------------- a test's prologue
# vp_test NAME PREFIX: the prologue of every integration script. Needs root;
# sets VP_PREFIX (the script's domain names start with it), builddir (the
# build directory, absolute: $VPACK_BUILDDIR, default build/ of this tree),
# srcdir, VPACKD, VPACKCTL and VPACK_HOOK (unless the environment names them:
# meson's test environment does), NS (vpack's metadata namespace), work (a
# fresh directory: /tmp/vpack-NAME-test.XXXXXX, or under VP_WORK_PARENT),
# sock and log (the agent's control socket and log in it) and agent_pid
# (empty until vp_start_agent). From then on the script's exit, whatever its
# cause, runs vp__test_exit; SIGTERM (meson's timeout), SIGINT and SIGHUP
# end the script through it too (what meson's SIGKILL half a second later
# cuts short, the next test's vp_reap_leftovers removes).
# shellcheck disable=SC2034 # the settings are for the script
vp_test() {
    VP_TEST_NAME=$1
    VP_PREFIX=$2
    vp_require_root
    builddir=${VPACK_BUILDDIR:-$VP_TOP/build}
    builddir=$(cd "$builddir" 2>/dev/null && pwd) || builddir=${VPACK_BUILDDIR:-$VP_TOP/build}
    srcdir=$(cd "${VPACK_SRCDIR:-$VP_TOP}" && pwd)
    VPACKD=${VPACKD:-$builddir/agent/vpackd}
    VPACKCTL=${VPACKCTL:-$builddir/ctl/vpackctl}
    VPACK_HOOK=${VPACK_HOOK:-$builddir/plugin/vpack-hook}
    NS=urn:vpack:powerpolicy:1
    work=$(mktemp -d "${VP_WORK_PARENT:-/tmp}/vpack-$1-test.XXXXXX")
    sock=$work/vpackd.sock
    log=$work/vpackd.log
    agent_pid=""
    VP_EXIT_EARLY=()
    VP_EXIT_LATE=()
    trap vp__test_exit EXIT
    trap 'exit 143' TERM
    trap 'exit 130' INT
    trap 'exit 129' HUP
}

# vp_need_built FILE...: each FILE is there and executable, or the test ends
# saying which one to build.
vp_need_built() {
    local f
    for f in "$@"; do [ -x "$f" ] || vp_die "build first: no $f (ninja -C ${builddir:-build})"; done
}

# vp_need_cpus N: the host has at least N CPUs.
vp_need_cpus() { [ "$(nproc --all)" -ge "$1" ] || vp_die "needs $1 CPUs"; }

# vp_on_exit [--early] CMD: CMD (a string, eval'd) is part of the script's
# exit. --early: before its agent is stopped (to free an agent held
# somewhere, or stop other processes first); else after the agent is
# stopped and the test domains are gone, before the work directory goes
# (the last registered runs first). In CMD, $rc is the script's exit status.
vp_on_exit() {
    if [ "$1" = --early ]; then VP_EXIT_EARLY+=("$2"); else VP_EXIT_LATE+=("$1"); fi
}

# VP_LOG_TAIL: how many lines of $log a failed test shows (60).
: "${VP_LOG_TAIL:=60}"

# vp__test_exit: the exit of a script that called vp_test, keeping its exit
# status: the --early commands, the agent stopped, when a check or the
# script failed the tail of $log and of every other *.log in the work
# directory (and all of $log copied to $VP_LOGDIR/test-NAME-vpackd.log), every test domain destroyed and undefined (unless
# VP_KEEP_DOMAINS), the other vp_on_exit commands (newest first), the work
# directory removed, then vp_cleanup (CPUs online, the daemons this shell
# started stopped).
vp__test_exit() {
    local rc=$? i
    set +eu
    trap - TERM INT HUP
    for i in "${VP_EXIT_EARLY[@]}"; do eval "$i"; done
    vp_stop_pid "$agent_pid"
    agent_pid=""
    if { [ $rc -ne 0 ] || [ "$VP_FAILURES" -ne 0 ]; } && [ -s "$log" ]; then
        mkdir -p "$VP_LOGDIR" && cp "$log" "$VP_LOGDIR/test-$VP_TEST_NAME-vpackd.log" &&
            echo "---- all of the agent's log: $VP_LOGDIR/test-$VP_TEST_NAME-vpackd.log"
    fi
    vp__tail_logs_on_failure $rc "$VP_LOG_TAIL" "$log" "$work"/*.log
    [ -n "$VP_KEEP_DOMAINS" ] || vp_destroy_all_test_domains
    for ((i = ${#VP_EXIT_LATE[@]} - 1; i >= 0; i--)); do eval "${VP_EXIT_LATE[i]}"; done
    rm -rf "$work"
    vp_cleanup
    return $rc
}

# vp_alive PID: the process exists and is not a zombie (an agent that exited
# stays a zombie until the shell that started it waits for it).
vp_alive() {
    local line=""
    [ -n "${1:-}" ] && read -r line < "/proc/$1/stat" 2>/dev/null || return 1
    line=${line##*) }
    [ "${line%% *}" != Z ]
}

# vp_start_agent [--ready=socket|libvirt] [--socket=PATH] [--pid=VAR]
#                [--log=FILE] [WRAPPER...] -- [ARG...]:
# starts "$VPACKD" ARG... in the background (through WRAPPER, a command that
# ends by exec'ing it: restrict-af, env, a shell function), its output
# appended to FILE ($log), its pid in VAR (agent_pid), and waits up to 10 s
# (100 looks, 0.1 s apart) until it is ready:
#   socket   (the default) its process is vpackd (past any wrapper) and
#            PATH ($sock) is a socket: enough to talk to the agent itself
#   libvirt  its status says libvirt_connected: for a test that next acts
#            on guests through the agent
# A vpackd that exits first, or is not ready in time, ends the test (vp_die)
# with its log's tail.
vp_start_agent() {
    local ready=socket so=$sock var=agent_pid lf=$log pid st="" wrap=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        case $1 in
        --ready=*) ready=${1#--ready=} ;;
        --socket=*) so=${1#--socket=} ;;
        --pid=*) var=${1#--pid=} ;;
        --log=*) lf=${1#--log=} ;;
        *) wrap+=("$1") ;;
        esac
        shift
    done
    [ "${1:-}" = -- ] && shift
    case $ready in socket|libvirt) ;; *) vp_die "vp_start_agent: --ready=$ready (socket or libvirt)" ;; esac
    echo "---- start $(date +%T) ${wrap[*]} $*" >>"$lf"
    "${wrap[@]}" "$VPACKD" "$@" >>"$lf" 2>&1 &
    pid=$!
    printf -v "$var" '%s' "$pid"
    for _ in $(seq 100); do
        vp_alive "$pid" || { st="exited"; break; }
        if [ "$ready" = socket ]; then
            local comm=""
            read -r comm < "/proc/$pid/comm" 2>/dev/null || true
            [ "$comm" = vpackd ] && [ -S "$so" ] && return 0
        elif "$VPACKCTL" status --json --socket "$so" 2>/dev/null |
                grep -q '"libvirt_connected": *true'; then
            return 0
        fi
        sleep 0.1
    done
    vp_stop_pid "$pid"
    printf -v "$var" '%s' ""
    echo "---- $(basename "$lf") (last 20 lines)" >&2
    tail -n 20 "$lf" >&2
    if [ -n "$st" ]; then vp_die "vpackd exited at start (before it was ready: $ready)"; fi
    vp_die "vpackd not ready ($ready) on $so within 10 s"
}

# vp_stop_agent_check: the agent's stop as a check: SIGTERM, and it must
# exit 0 (under ASan: without a leak). Sets rc to its exit code.
vp_stop_agent_check() {
    kill -TERM "$agent_pid"
    rc=0
    wait "$agent_pid" || rc=$?
    agent_pid=""
    if [ $rc -eq 0 ]; then vp_pass "vpackd exited 0 on SIGTERM"; else vp_fail "vpackd exited $rc on SIGTERM"; fi
}

# ------------------------------------------------------ the libvirt hook
# Where an operator puts vpack's hook (libvirt runs every file in qemu.d).
VP_HOOKS_DIR=/etc/libvirt/hooks
VP_HOOK_LINK=$VP_HOOKS_DIR/qemu.d/vpack
VP_HOOK_TARGET=""       # what vp_install_hook links there
VP_HOOK_PREV=""         # an earlier vpack hook: a link's target, or a saved copy
VP_HOOK_PREV_COPY=""    # non-empty: VP_HOOK_PREV is a copy
VP_HOOK_MADE_DIRS=()    # directories vp_install_hook made
# VP_HOOK_RELOAD: how libvirtd is made to look for hooks again: restart
# (the default; it also runs the hook's "reconnect") or hup.
: "${VP_HOOK_RELOAD:=restart}"

# vp_reload_hooks: makes libvirtd look for hooks again (it does only at its
# start and on SIGHUP): VP_HOOK_RELOAD says how.
vp_reload_hooks() {
    local pid
    if [ "$VP_HOOK_RELOAD" = hup ] && pid=$(vp__daemon_pid libvirtd); then
        vp_log "libvirtd ($pid): SIGHUP, to look for hooks again"
        kill -HUP "$pid"; sleep 1
        vp__wait_libvirtd
    else
        vp_restart_libvirtd
    fi
}

# vp_install_hook [--replace] HOOK: links HOOK as $VP_HOOK_LINK, making the
# directories it needs. Anything already there ends the test, except with
# --replace an earlier vpack hook (a link or a copy), which is kept aside
# and put back by vp_remove_hook. The link is marked in
# $VP_MARKDIR/hook-link, so that a later test removes it if this one is
# killed; the script's exit runs vp_remove_hook. libvirtd is not told:
# call vp_reload_hooks (after waiting for other agents if that matters).
vp_install_hook() {
    local replace="" d
    [ "$1" = --replace ] && { replace=1; shift; }
    VP_HOOK_TARGET=$1
    if [ -e "$VP_HOOK_LINK" ] || [ -L "$VP_HOOK_LINK" ]; then
        [ -n "$replace" ] || vp_die "$VP_HOOK_LINK exists: not replacing it"
        vp_is_vpack_hook "$VP_HOOK_LINK" ||
            vp_die "$VP_HOOK_LINK exists and is not vpack's hook: not overwriting it"
        if [ -L "$VP_HOOK_LINK" ]; then
            VP_HOOK_PREV=$(readlink "$VP_HOOK_LINK")
        else
            VP_HOOK_PREV=$work/vpack-hook.saved; VP_HOOK_PREV_COPY=1
            cp -p "$VP_HOOK_LINK" "$VP_HOOK_PREV"
        fi
        vp_log "replacing the vpack hook $VP_HOOK_LINK for the test"
    fi
    for d in "$VP_HOOKS_DIR" "$VP_HOOKS_DIR/qemu.d"; do
        [ -d "$d" ] || { mkdir -p "$d"; VP_HOOK_MADE_DIRS=("$d" "${VP_HOOK_MADE_DIRS[@]}"); }
    done
    vp_set_hook
    # If this script is killed, the next test removes the link (vp_reap_leftovers).
    mkdir -p "$VP_MARKDIR" && printf '%s\n%s\n' "$VP_HOOK_LINK" "$VP_HOOK_TARGET" > "$VP_MARKDIR/hook-link"
    vp_on_exit vp_remove_hook
    vp_log "installed $VP_HOOK_LINK -> $VP_HOOK_TARGET"
}

# vp_set_hook / vp_unset_hook: the installed hook's link in place (atomically)
# or gone, for a test that compares the two.
vp_set_hook() {
    ln -sfn "$VP_HOOK_TARGET" "$VP_HOOK_LINK.vp-tmp"
    mv -T "$VP_HOOK_LINK.vp-tmp" "$VP_HOOK_LINK"
}
vp_unset_hook() { rm -f "$VP_HOOK_LINK"; }

# vp_remove_hook: undoes vp_install_hook: the link (if it is still ours), the
# mark, the earlier vpack hook back, the directories it made; then libvirtd
# forgets the hook (VP_HOOK_RELOADER, default vp_reload_hooks), unless it
# is one this shell started (vp_cleanup stops it).
vp_remove_hook() {
    local pid d
    [ -n "$VP_HOOK_TARGET" ] || return 0
    [ "$(readlink "$VP_HOOK_LINK" 2>/dev/null)" = "$VP_HOOK_TARGET" ] && rm -f "$VP_HOOK_LINK"
    rm -f "$VP_MARKDIR/hook-link"
    if [ -n "$VP_HOOK_PREV_COPY" ]; then
        cp -p "$VP_HOOK_PREV" "$VP_HOOK_LINK"
    elif [ -n "$VP_HOOK_PREV" ]; then
        ln -sfn "$VP_HOOK_PREV" "$VP_HOOK_LINK"
    fi
    [ -z "$VP_HOOK_PREV" ] || vp_log "put back the earlier vpack hook $VP_HOOK_LINK"
    VP_HOOK_TARGET="" VP_HOOK_PREV="" VP_HOOK_PREV_COPY=""
    for d in "${VP_HOOK_MADE_DIRS[@]}"; do rmdir "$d" 2>/dev/null || true; done
    VP_HOOK_MADE_DIRS=()
    if pid=$(vp__daemon_pid libvirtd) && [ "$pid" != "$VP_STARTED_LIBVIRTD_PID" ]; then
        "${VP_HOOK_RELOADER:-vp_reload_hooks}" ||
            vp_log "WARNING: libvirtd could not be made to forget the hook"
    fi
}

# vp_free_port: a TCP port on 127.0.0.1 nobody listens on now.
vp_free_port() {
    "$VP_PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# vp_hold_connections PORT N SECONDS: N idle TCP connections to 127.0.0.1:PORT
# held open for SECONDS by one python3 process in the background (its pid
# in flood_pid, for vp_stop_pid); returns once all are open (vp_die if not
# within 15 s).
vp_hold_connections() {
    cat >"$work/flood.py" <<'EOF_FLOOD'
import socket, sys, time
port, n, s = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(n)]
print("holding", len(held), flush=True)
time.sleep(s)
EOF_FLOOD
    "$VP_PYTHON" "$work/flood.py" "$1" "$2" "$3" >"$work/flood.out" 2>&1 &
    flood_pid=$!
    vp_wait_until 15 grep -q holding "$work/flood.out" || vp_die "flood: $(cat "$work/flood.out")"
}

# vp_foreign_vpackd [OWN_PID...]: pids of running vpackd processes but these.
# Another test's agent would pin the same guests.
vp_foreign_vpackd() {
    local p o mine
    for p in $(pgrep -x vpackd 2>/dev/null || true); do
        mine=""
        for o in "$@"; do [ "$p" = "$o" ] && mine=1; done
        [ -n "$mine" ] || echo "$p"
    done
}

# vp_wait_no_other_vpackd SECONDS WHAT [OWN_PID...]: waits (bounded) until no
# other vpackd runs, before something that must not race it (WHAT says what).
vp_wait_no_other_vpackd() {
    local limit=$1 what=$2 deadline others said=""
    shift 2
    deadline=$((SECONDS + limit))
    while others=$(vp_foreign_vpackd "$@") && [ -n "$others" ]; do
        others=$(printf '%s' "$others" | tr -s '\n' ' ')
        if [ "$SECONDS" -ge "$deadline" ]; then
            vp_log "WARNING: vpackd $others still running after ${limit}s; going on ($what)"
            return 0
        fi
        [ -n "$said" ] || vp_log "another vpackd ($others) is running: waiting before $what"
        said=1
        sleep 2
    done
}

# vp_is_vpack_hook PATH: a symlink to a vpack-hook, a copy of one, or the
# package's wrapper script (plugin/qemu-hook.in).
vp_is_vpack_hook() {
    if [ -L "$1" ] && [ "$(basename "$(readlink "$1")")" = vpack-hook ]; then return 0; fi
    if [ -f "$1" ] && grep -qx 'exec .*/vpack-hook "\$@"' "$1"; then return 0; fi
    [ -f "$1" ] && grep -aq 'Usage: vpack-hook' "$1"
}

# ------------------------------------------------------------- guest image
# The guest's /init.  Runs the load pattern from `vpload=` on the kernel
# command line: a comma-separated list of
#   idle        nothing
#   busy:N      N busy loops, pinned to the next N guest CPUs (0..N-1 first)
#   duty:PCT    one loop on the next guest CPU, running PCT% of each 100 ms
#   wait:S      start the items after it S seconds later (VPACK-LOAD-STARTED)
#   work:PCT    like duty:PCT, but counts work units (fixed chunks of
#               computation) and prints VPACK-WORK id=CPU t=UPTIME n=UNITS
#               (cumulative) about every 500 ms: throughput for the benchmarks
#   io:DEV      loads the virtio modules the initramfs carries and reads the
#               virtio disk /dev/DEV over and over with O_DIRECT (past the
#               guest's page cache): I/O for the disk's iothread
#               (VPACK-IO-STARTED, or VPACK-IO-ERROR)
# e.g. vpload=busy:1,duty:30 -> CPU 0 busy, CPU 1 busy 30% of the time;
# vpload=wait:10,busy:2 -> idle for 10 s, then two busy loops.
# Prints VPACK-CPUS=<n> VPACK-ONLINE=<list>, then VPACK-GUEST-READY.
vp__guest_init() {
    cat <<'EOF'
#!/bin/sh
# vpack integration-test guest init (generated by tests/integration/lib.sh)
PATH=/bin
export PATH
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
load=idle
for w in $(cat /proc/cmdline); do
    case $w in vpload=*) load=${w#vpload=} ;; esac
done
ncpu=$(nproc)
echo "VPACK-CPUS=$ncpu VPACK-ONLINE=$(cat /sys/devices/system/cpu/online)"
echo "VPACK-LOAD=$load"
cpu=0
oldifs=$IFS
IFS=,
set -- $load
IFS=$oldifs
# start_items ITEM...: starts the loads; "wait:S" defers the items after it
# by S seconds (in the background) and prints VPACK-LOAD-STARTED then.
start_items() {
    while [ $# -gt 0 ]; do
        item=$1; shift
        case $item in
        idle|'') ;;
        wait:*)
            (sleep "${item#wait:}"; echo "VPACK-LOAD-STARTED"; start_items "$@"; wait) &
            return ;;
        busy:*)
            n=${item#busy:}
            i=0
            while [ "$i" -lt "$n" ]; do
                taskset -c $((cpu % ncpu)) vp-spin &
                cpu=$((cpu + 1)); i=$((i + 1))
            done ;;
        duty:*)
            taskset -c $((cpu % ncpu)) vp-duty "${item#duty:}" &
            cpu=$((cpu + 1)) ;;
        work:*)
            taskset -c $((cpu % ncpu)) vp-work "${item#work:}" $((cpu % ncpu)) &
            cpu=$((cpu + 1)) ;;
        io:*)
            vp-io "${item#io:}" & ;;
        *)  echo "VPACK-LOAD-ERROR: unknown item '$item'" ;;
        esac
    done
}
# vp-work PCT ID (the benchmarks' load): counts work units, one unit being
# 200 steps of a linear congruential generator in shell arithmetic, while
# running PCT% of every 100 ms (SIGSTOP/SIGCONT, like vp-duty, but without
# forking); prints
# "VPACK-WORK id=ID t=UPTIME n=UNITS" (cumulative) about every 500 ms.
cat > /bin/vp-work <<'WORK'
#!/bin/sh
pct=${1:-50}; id=${2:-0}
[ "$pct" -gt 100 ] && pct=100
[ "$pct" -lt 1 ] && pct=1
(
    n=0; x=1; next=0
    while :; do
        j=0
        while [ $j -lt 200 ]; do x=$(( (x * 1103515245 + 12345) % 2147483648 )); j=$((j + 1)); done
        n=$((n + 1))
        read -r up rest < /proc/uptime
        cs=$(( ${up%.*} * 100 + 1${up#*.} - 100 ))
        if [ "$cs" -ge "$next" ]; then echo "VPACK-WORK id=$id t=$up n=$n"; next=$((cs + 50)); fi
    done
) &
w=$!
[ "$pct" -ge 100 ] && { wait; exit 0; }
# Sleeps with read -t on a FIFO nobody writes: no fork (usleep would fork
# twice a period, which costs a TCG guest more than the work itself).
mkfifo /tmp/vp-work.$id
exec 3<>/tmp/vp-work.$id
on=$(printf '0.%03d' "$pct"); off=$(printf '0.%03d' $((100 - pct)))
while :; do
    kill -STOP $w
    read -t "$off" x <&3
    kill -CONT $w
    read -t "$on" x <&3
done
WORK
chmod 0755 /bin/vp-work
start_items "$@"
echo "VPACK-GUEST-READY"
while :; do sleep 3600; done
EOF
}

# vp-io DEV: the io:DEV load. The Debian cloud kernel has virtio as modules:
# the initramfs carries them (vp__fetch_kernel) with their load order.
vp__guest_io() {
    cat <<'EOF'
#!/bin/sh
for m in $(cat /lib/modules/order 2>/dev/null); do insmod "/lib/modules/$m" 2>/dev/null; done
i=0
while [ ! -b "/dev/$1" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -b "/dev/$1" ] || { echo "VPACK-IO-ERROR: no /dev/$1"; exit 1; }
echo "VPACK-IO-STARTED dev=$1"
while :; do dd if="/dev/$1" of=/dev/null bs=64k iflag=direct 2>/dev/null; done
EOF
}

vp__guest_spin() {
    printf '%s\n' '#!/bin/sh' 'while :; do :; done'
}

vp__guest_duty() {
    cat <<'EOF'
#!/bin/sh
# vp-duty PCT: a busy loop that runs PCT% of every 100 ms period.
pct=${1:-50}
[ "$pct" -gt 100 ] && pct=100
[ "$pct" -lt 0 ] && pct=0
vp-spin &
spin=$!
[ "$pct" -ge 100 ] && { wait; exit 0; }
on=$((pct * 1000)); off=$(((100 - pct) * 1000))
while :; do
    kill -STOP $spin
    usleep $off
    [ "$on" -gt 0 ] || continue
    kill -CONT $spin
    usleep $on
done
EOF
}

# Name of the newest Debian cloud kernel package the archive has.
vp__kernel_pkg() {
    if [ -n "$VP_KERNEL_PKG" ]; then echo "$VP_KERNEL_PKG"; return 0; fi
    local pkg
    pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
          awk '/Depends: linux-image-[0-9].*-cloud-amd64$/ {print $2; exit}') || true
    if [ -z "$pkg" ]; then
        vp__apt_update_once
        pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
              awk '/Depends: linux-image-[0-9].*-cloud-amd64$/ {print $2; exit}') || true
    fi
    [ -n "$pkg" ] || return 1
    echo "$pkg"
}

vp__fetch_kernel() {
    local pkg kdir tmp deb a
    if ! pkg=$(vp__kernel_pkg); then
        # Offline: fall back to any kernel already in the cache.
        kdir=$(ls -d "$VP_CACHE"/kernel/linux-image-* 2>/dev/null | sort -V | tail -n1 || true)
        [ -n "$kdir" ] && [ -s "$kdir/vmlinuz" ] ||
            vp_die "cannot find a linux-image-*-cloud-amd64 package (apt-cache) and none is cached"
        VP_KERNEL="$kdir/vmlinuz"
        VP_KERNEL_VERSION=$(cat "$kdir/version" 2>/dev/null || echo unknown)
        return 0
    fi
    kdir="$VP_CACHE/kernel/$pkg"
    if [ ! -s "$kdir/vmlinuz" ] || [ ! -s "$kdir/modules/order" ]; then
        vp_log "downloading kernel package $pkg"
        tmp=$(mktemp -d "$VP_CACHE/.dl.XXXXXX")
        ( cd "$tmp" && vp__quiet apt-get -q -o APT::Sandbox::User=root download "$pkg" ) ||
            { rm -rf "$tmp"; vp_die "apt-get download $pkg failed"; }
        deb=$(ls "$tmp"/*.deb)
        mkdir -p "$tmp/x"
        dpkg-deb -x "$deb" "$tmp/x"
        mkdir -p "$kdir"
        cp "$tmp"/x/boot/vmlinuz-* "$kdir/vmlinuz.tmp"
        dpkg-deb -f "$deb" Version > "$kdir/version"
        # The virtio disk driver and what it needs, in load order (io:DEV).
        mkdir -p "$kdir/modules.tmp"
        for a in "${VP_GUEST_MODULES[@]}"; do
            cp "$(find "$tmp/x/lib/modules" -name "$a.ko" | head -n1)" "$kdir/modules.tmp/" ||
                vp_die "$pkg has no $a.ko"
            echo "$a.ko" >> "$kdir/modules.tmp/order"
        done
        chmod 0644 "$kdir/vmlinuz.tmp" "$kdir/version" "$kdir"/modules.tmp/*
        rm -rf "$kdir/modules"
        mv "$kdir/modules.tmp" "$kdir/modules"
        mv "$kdir/vmlinuz.tmp" "$kdir/vmlinuz"
        rm -rf "$tmp"
    fi
    VP_KERNEL="$kdir/vmlinuz"
    VP_KERNEL_VERSION="$pkg $(cat "$kdir/version" 2>/dev/null || true)"
}

vp__build_initrd() {
    local bb key root out tmp a mods
    bb=$(command -v busybox || true)
    [ -n "$bb" ] || vp_die "busybox not found (install busybox-static)"
    # Busybox must be static: the initramfs has no libraries.
    if LC_ALL=C ldd "$bb" >/dev/null 2>&1; then
        vp_die "$bb is dynamically linked; install busybox-static"
    fi
    mods=$(dirname "$VP_KERNEL")/modules
    key=$( { sha256sum "$bb" | cut -d' ' -f1; vp__guest_init; vp__guest_spin;
             vp__guest_duty; vp__guest_io; cat "$mods"/* 2>/dev/null | sha256sum;
             echo layout-v1; } | sha256sum | cut -c1-16)
    out="$VP_CACHE/initrd-$key.cpio.gz"
    if [ ! -s "$out" ]; then
        vp_log "building initramfs $out"
        tmp=$(mktemp -d "$VP_CACHE/.initrd.XXXXXX")
        root="$tmp/root"
        mkdir -p "$root"/{bin,dev,proc,sys,tmp,root}
        cp "$bb" "$root/bin/busybox"
        for a in $("$bb" --list); do
            [ "$a" = busybox ] || ln -sf busybox "$root/bin/$a"
        done
        vp__guest_init > "$root/init"
        vp__guest_spin > "$root/bin/vp-spin"
        vp__guest_duty > "$root/bin/vp-duty"
        vp__guest_io > "$root/bin/vp-io"
        chmod 0755 "$root/init" "$root/bin/vp-spin" "$root/bin/vp-duty" "$root/bin/vp-io"
        if [ -d "$mods" ]; then
            mkdir -p "$root/lib/modules"
            cp "$mods"/* "$root/lib/modules/"
        fi
        mknod -m 0600 "$root/dev/console" c 5 1
        mknod -m 0666 "$root/dev/null" c 1 3
        ( cd "$root" && find . -print0 | LC_ALL=C sort -z |
          cpio --null --quiet -o -H newc --reproducible --owner=0:0 ) |
            gzip -9n > "$tmp/initrd.gz"
        chmod 0644 "$tmp/initrd.gz"
        mv "$tmp/initrd.gz" "$out"
        rm -rf "$tmp"
    fi
    VP_INITRD=$out
}

# vp_build_guest: make sure a kernel and initramfs are in $VP_CACHE; sets
# VP_KERNEL, VP_INITRD and VP_KERNEL_VERSION.  Cheap when cached.
vp_build_guest() {
    mkdir -p "$VP_CACHE"
    # qemu runs as libvirt-qemu: the images must be world-readable.
    chmod 0755 "$VP_CACHE"
    mkdir -p "$VP_CACHE/kernel" && chmod 0755 "$VP_CACHE/kernel"
    local out
    out=$(
        set -e
        exec 9>"$VP_CACHE/.lock"
        flock -w 600 9 || vp_die "timeout waiting for $VP_CACHE/.lock"
        vp__fetch_kernel
        vp__build_initrd
        printf '%s\n%s\n%s\n' "$VP_KERNEL" "$VP_INITRD" "$VP_KERNEL_VERSION"
    ) || vp_die "building the test guest failed"
    { read -r VP_KERNEL; read -r VP_INITRD; read -r VP_KERNEL_VERSION; } <<<"$out"
    chmod -R a+rX "$VP_CACHE/kernel" 2>/dev/null || true
    export VP_KERNEL VP_INITRD VP_KERNEL_VERSION
}

# ------------------------------------------------------------------ domains
vp_console_log() { echo "$VP_LOGDIR/$1.console"; }

vp__xml_escape() {
    local s=$1
    s=${s//&/&amp;}; s=${s//</&lt;}; s=${s//>/&gt;}; s=${s//\'/&apos;}
    printf '%s' "$s"
}

# vp_domain_xml NAME VCPUS LOAD [EXTRA_CPUTUNE_XML] [METADATA_XML]
# Prints a TCG domain definition.  EXTRA_CPUTUNE_XML goes inside <cputune>
# (e.g. "<vcpupin vcpu='0' cpuset='1'/>"), METADATA_XML inside <metadata>.
# $VP_VCPU_CPUSET, if set, becomes <vcpu cpuset='...'>.
# The guest kernel gets no_timer_check: under TCG on a busy host (tens of
# guests booting at once) its IO-APIC timer check can miss a tick and panic
# ("IO-APIC + timer doesn't work"), and a panicked TCG guest spins a host CPU;
# panic=-1 makes any other panic a reset (a second boot) instead of a spin.
vp_domain_xml() {
    local name=$1 vcpus=$2 load=$3 cputune=${4:-} metadata=${5:-}
    [ -n "$VP_KERNEL" ] && [ -n "$VP_INITRD" ] || vp_build_guest >&2
    local cpuset_attr=""
    [ -n "$VP_VCPU_CPUSET" ] && cpuset_attr=" cpuset='$VP_VCPU_CPUSET'"
    cat <<EOF
<domain type='qemu'>
  <name>$(vp__xml_escape "$name")</name>
  <memory unit='MiB'>$VP_MEMORY_MIB</memory>
  <vcpu placement='static'$cpuset_attr>$vcpus</vcpu>
EOF
    [ -n "$cputune" ] && printf '  <cputune>\n    %s\n  </cputune>\n' "$cputune"
    [ -n "$metadata" ] && printf '  <metadata>\n    %s\n  </metadata>\n' "$metadata"
    cat <<EOF
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$VP_KERNEL</kernel>
    <initrd>$VP_INITRD</initrd>
    <cmdline>console=ttyS0 quiet no_timer_check panic=-1 vpload=$(vp__xml_escape "$load")</cmdline>
  </os>
  <features><acpi/><apic/></features>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <seclabel type='none' model='dac'/>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <controller type='usb' model='none'/>
    <serial type='file'>
      <source path='$VP_LOGDIR/$(vp__xml_escape "$name").console'/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
EOF
}

vp__check_name() {
    case $1 in
    "$VP_PREFIX"*) ;;
    *) vp_die "test domain name '$1' must start with VP_PREFIX '$VP_PREFIX'" ;;
    esac
}

# vp_define NAME VCPUS LOAD [EXTRA_CPUTUNE_XML] [METADATA_XML]: define only.
vp_define() {
    vp__check_name "$1"
    mkdir -p "$VP_LOGDIR"
    local xml="$VP_LOGDIR/$1.xml"
    vp_domain_xml "$@" > "$xml"
    vp_virsh define "$xml" >/dev/null
}

# vp_start NAME: start a defined domain (fresh console log).
vp_start() {
    rm -f "$(vp_console_log "$1")"
    vp_virsh start "$1" >/dev/null
}

# vp_define_start NAME VCPUS LOAD [EXTRA_CPUTUNE_XML] [METADATA_XML]
vp_define_start() {
    vp_define "$@"
    vp_start "$1"
}

# vp_wait_ready NAME [TIMEOUT]: wait until the guest prints VPACK-GUEST-READY.
vp_wait_ready() {
    local name=$1 timeout=${2:-$VP_READY_TIMEOUT} log
    log=$(vp_console_log "$name")
    local deadline=$((SECONDS + timeout))
    while :; do
        if [ -r "$log" ] && grep -q 'VPACK-GUEST-READY' "$log"; then return 0; fi
        if [ "$(vp_virsh domstate "$name" 2>/dev/null)" != running ]; then
            vp_log "domain $name is not running"; break
        fi
        [ "$SECONDS" -lt "$deadline" ] || { vp_log "timeout (${timeout}s)"; break; }
        sleep 0.2
    done
    vp_log "$name did not become ready; console log tail:"
    tail -n 20 "$log" 2>/dev/null >&2 || true
    vp_log "qemu log tail:"
    tail -n 10 "/var/log/libvirt/qemu/$name.log" 2>/dev/null >&2 || true
    return 1
}

# vp_guest_cpus NAME: number of CPUs the guest reported (VPACK-CPUS=).
vp_guest_cpus() {
    sed -n 's/.*VPACK-CPUS=\([0-9]*\).*/\1/p' "$(vp_console_log "$1")" | tail -n1
}

# vp_vcpu_times NAME: "N TIME_NS" per vCPU, from bulk stats (vcpu.N.time).
vp_vcpu_times() {
    vp_virsh domstats --vcpu "$1" |
        sed -n 's/^ *vcpu\.\([0-9]*\)\.time=\([0-9]*\)$/\1 \2/p'
}

# vp_vcpu_time_total NAME: sum of vcpu.N.time in ns.
vp_vcpu_time_total() {
    vp_vcpu_times "$1" | awk '{s += $2} END {printf "%.0f\n", s}'
}

# vp_list_test_domains [PREFIX...]: names of all domains starting with a
# PREFIX (default: $VP_PREFIX).
vp_list_test_domains() {
    [ $# -gt 0 ] || set -- "$VP_PREFIX"
    { virsh -q -c "$VP_URI" list --all --name 2>/dev/null || true; } |
        awk -v p="$*" 'BEGIN {n = split(p, a, " ")}
                       {for (i = 1; i <= n; i++) if (index($0, a[i]) == 1) {print; next}}'
}

# vp_destroy_all_test_domains [PREFIX...]: destroy and undefine every domain
# whose name starts with a PREFIX (default: $VP_PREFIX).
vp_destroy_all_test_domains() {
    local d
    for d in $(vp_list_test_domains "$@"); do
        virsh -q -c "$VP_URI" destroy "$d" >/dev/null 2>&1 || true
        virsh -q -c "$VP_URI" undefine "$d" >/dev/null 2>&1 || true
    done
}

# ------------------------------------------------------------- host probes
# vp_cpu_busy_sample [SECONDS]: busy fraction of each online host CPU over
# SECONDS (default 1), from two /proc/stat reads: "cpu0 0.53" per line.
vp_cpu_busy_sample() {
    local secs=${1:-1} a b
    a=$(grep '^cpu[0-9]' /proc/stat)
    sleep "$secs"
    b=$(grep '^cpu[0-9]' /proc/stat)
    awk 'NR == FNR { t = 0; for (i = 2; i <= 9; i++) t += $i
                     T[$1] = t; I[$1] = $5 + $6; next }
         ($1 in T) { t = 0; for (i = 2; i <= 9; i++) t += $i
                     dt = t - T[$1]; di = $5 + $6 - I[$1]
                     printf "%s %.2f\n", $1, (dt > 0 ? 1 - di / dt : 0) }' \
        <(printf '%s\n' "$a") <(printf '%s\n' "$b")
}

# vp_online_all_cpus: bring every offline host CPU back online.
# (VP_SYSFS_CPU overrides /sys/devices/system/cpu, for testing the harness.)
vp_online_all_cpus() {
    local f
    for f in "${VP_SYSFS_CPU:-/sys/devices/system/cpu}"/cpu[0-9]*/online; do
        [ -e "$f" ] || continue
        if [ "$(cat "$f" 2>/dev/null)" = 0 ]; then
            echo 1 > "$f" 2>/dev/null || vp_log "could not online ${f%/online}"
        fi
    done
}

# vp_public_copy VAR PATH: sets VAR to a copy of the program PATH that any
# user can run. A checkout under /root (mode 0700) is out of the reach of
# the tests' unprivileged user, as an installed program in /usr/bin is not.
# The copies live in /run/vpack-test-bin.OWNER; vp_cleanup removes them.
vp_public_copy() {
    local dir=/run/vpack-test-bin.$VPACK_TEST_OWNER
    mkdir -p "$dir" && chmod 0755 "$dir"
    install -m 0755 "$2" "$dir/$(basename "$2")"
    printf -v "$1" '%s' "$dir/$(basename "$2")"
}

# vp__destroy_test_domains_surely: vp_destroy_all_test_domains, again
# (bounded: 6 times, waiting up to 30 s each for libvirtd to answer) while
# one is left: another test may be restarting libvirtd under us. Nothing
# to do when no libvirtd runs.
vp__destroy_test_domains_surely() {
    local try
    for try in 1 2 3 4 5 6; do
        vp__daemon_pid libvirtd >/dev/null || return 0   # no libvirtd: no domain runs
        vp_destroy_all_test_domains
        virsh -c "$VP_URI" version >/dev/null 2>&1 && [ -z "$(vp_list_test_domains)" ] && return 0
        [ $try -lt 6 ] || break
        sleep 2
        for _ in $(seq 60); do virsh -c "$VP_URI" version >/dev/null 2>&1 && break; sleep 0.5; done
    done
    vp_log "could not remove every $VP_PREFIX* domain: $(vp_list_test_domains | tr '\n' ' ')"
}

# vp_cleanup: destroy test domains, online all CPUs, stop our daemons.
# Keeps the caller's exit status; use as `trap vp_cleanup EXIT`.
vp_cleanup() {
    local rc=$? opts=$-
    set +e
    if [ -z "$VP_KEEP_DOMAINS" ]; then vp__destroy_test_domains_surely; fi
    vp_online_all_cpus
    vp_stop_libvirtd
    rm -rf "/run/vpack-test-bin.$VPACK_TEST_OWNER"
    case $opts in *e*) set -e ;; esac
    return "$rc"
}

# ----------------------------------------------------- cheap state probes
# Tests poll for state several times a second on a 2-CPU host: a poll must
# cost next to nothing, or the test's own polling becomes the load vpackd
# reacts to. These read /proc with shell builtins only (no fork, no libvirt
# call); use virsh where libvirt's own view is what is being checked.

# vp_qemu_pid NAME: the QEMU process of a running domain.
# VP_QEMU_RUNDIR: where the pid files are (the second libvirtd's for guests
# migrated to it: VP2_QEMU_RUNDIR).
vp_qemu_pid() {
    local pid=""
    # libvirt writes the pid without a newline: read fails but sets pid.
    read -r pid < "${VP_QEMU_RUNDIR:-/run/libvirt/qemu}/$1.pid" 2>/dev/null || true
    [ -n "$pid" ] || return 1
    printf '%s\n' "$pid"
}

# vp__allowed_list VAR TASKDIR: sets VAR to the task's Cpus_allowed_list
# (no subshell: this runs for every thread of every poll).
vp__allowed_list() {
    local k v
    while read -r k v; do
        [ "$k" = "Cpus_allowed_list:" ] && { printf -v "$1" '%s' "$v"; return 0; }
    done < "$2/status"
    return 1
}

# vp_pins NAME: the kernel's view of a domain's pins, as
# "vcpu0=0 vcpu1=0-1 emulator=0": each vCPU thread ("CPU N/TCG" or
# "CPU N/KVM") and the emulator (QEMU's main thread), from
# /proc/PID/task/TID/status. "?" when the domain does not run.
vp_pins() {
    local pid t comm n out="" emu="" i
    local -a vc=()
    pid=$(vp_qemu_pid "$1") || { echo "?"; return 0; }
    for t in /proc/"$pid"/task/*; do
        read -r comm < "$t/comm" 2>/dev/null || continue
        case $comm in
        "CPU "*/TCG|"CPU "*/KVM)
            n=${comm#CPU }; n=${n%%/*}
            vp__allowed_list "vc[n]" "$t" 2>/dev/null || vc[n]="?" ;;
        esac
    done
    vp__allowed_list emu "/proc/$pid/task/$pid" 2>/dev/null || emu="?"
    for i in "${!vc[@]}"; do out+="vcpu$i=${vc[i]} "; done
    printf '%semulator=%s\n' "$out" "$emu"
}

# vp_thread_affinity NAME VCPU: Cpus_allowed_list of vCPU VCPU's thread.
vp_thread_affinity() {
    local kv
    for kv in $(vp_pins "$1"); do
        [ "${kv%%=*}" = "vcpu$2" ] && { echo "${kv#*=}"; return 0; }
    done
    echo "?"
}

# vp_all_on CPUS NAME...: true when every vCPU thread and the emulator of
# each domain may run on exactly CPUS (the kernel's view).
vp_all_on() {
    local want=$1 d kv
    shift
    for d in "$@"; do
        for kv in $(vp_pins "$d"); do [ "${kv#*=}" = "$want" ] || return 1; done
    done
}

# vp_pin_context NAME...: what to print beside a failed pin check, read
# now: each domain's kernel view and libvirt's, the vpackd processes that
# run, and libvirtd's clients (virt-admin): another program that pins
# shows there.
vp_pin_context() {
    local d
    printf 'kernel: '
    for d in "$@"; do printf '%s %s; ' "$d" "$(vp_pins "$d")"; done
    printf '| libvirt: '
    for d in "$@"; do
        printf '%s %s emulator=%s; ' "$d" \
            "$(vp_virsh vcpupin "$d" 2>&1 | awk 'NF == 2 {printf "vcpu%s=%s ", $1, $2}')" \
            "$(vp_virsh emulatorpin "$d" 2>&1 | tr -d ' \n')"
    done
    printf '| vpackd running: %s' "$(pgrep -a vpackd | cut -c1-120 | tr '\n' ';')"
    printf '| libvirtd clients: %s\n' "$(virt-admin -q client-list libvirtd 2>&1 | tr -s ' \n' ' ')"
}

# vp_released CPUS NAME...: the check after vpackd's stop, vp_all_on with
# a record: when it fails, VP_RELEASED_WHY holds the view the check read
# and vp_pin_context's, read after it.
VP_RELEASED_WHY=""
vp_released() {
    local want=$1 d kv p seen="" bad=0
    shift
    for d in "$@"; do
        p=$(vp_pins "$d")
        seen+="$d $p; "
        for kv in $p; do [ "${kv#*=}" = "$want" ] || bad=1; done
    done
    VP_RELEASED_WHY=""
    [ "$bad" -eq 0 ] && return 0
    VP_RELEASED_WHY="the check read: $seen| then $(vp_pin_context "$@")"
    return 1
}

# vp_packed_cpu NAME...: when every thread of them is on one and the same
# CPU, 0 or 1 (the two one-CPU packages of the tests' synthetic topology),
# prints it; else fails. Which package stays awake is the policy's choice
# (the busier one), so tests accept either. vp_all_packed: only the test.
vp_packed_cpu() {
    local c
    for c in 0 1; do vp_all_on "$c" "$@" && { echo "$c"; return 0; }; done
    return 1
}
vp_all_packed() { vp_packed_cpu "$@" >/dev/null; }

# vp_placed_keeping_pin CPUS PINNED VCPU PIN [OTHER...]: every thread of
# each OTHER domain may run on exactly CPUS, and so may PINNED's, but for
# its vCPU VCPU, on exactly PIN (the guest's own pin; the kernel's view).
vp_placed_keeping_pin() {
    local want=$1 dom=$2 v=$3 pin=$4 kv seen=""
    shift 4
    [ $# -eq 0 ] || vp_all_on "$want" "$@" || return 1
    for kv in $(vp_pins "$dom"); do
        if [ "${kv%%=*}" = "vcpu$v" ]; then
            [ "${kv#*=}" = "$pin" ] || return 1
            seen=1
        else
            [ "${kv#*=}" = "$want" ] || return 1
        fi
    done
    [ -n "$seen" ]
}
# vp_packed_keeping_pin PINNED VCPU PIN [OTHER...]: vp_placed_keeping_pin on
# CPU 0 or on CPU 1, whichever package the policy keeps awake.
vp_packed_keeping_pin() {
    local c
    for c in 0 1; do vp_placed_keeping_pin "$c" "$@" && return 0; done
    return 1
}

# vp_counters NAME...: the values of the agent's counters ($sock's status),
# one line, in that order. For polling loops: shell built-ins
# (vp_json_field), no interpreter.
vp_counters() {
    local json k out=()
    json=$("$VPACKCTL" status --json --socket "$sock") || return 1
    for k in "$@"; do out+=("$(vp_json_field "$json" "$k")") || return 1; done
    echo "${out[*]}"
}

# vp_json_field JSON KEY: the value of the first member KEY in JSON as
# vpackctl prints it when its output is not a terminal (one line, no blanks):
# a number, true, false, null, or a string with no quote in it (printed
# without its quotes); fails when there is none. Shell built-ins only: for
# polls, where starting an interpreter each time would load a small host.
vp_json_field() {
    local re="\"$2\":(\"[^\"]*\"|[^,}\"]+)" v
    [[ $1 =~ $re ]] || return 1
    v=${BASH_REMATCH[1]}
    v=${v#\"}
    printf '%s\n' "${v%\"}"
}

# vp_prom_series ANSWER: how many series a Prometheus query's answer (its
# JSON, compact as Prometheus sends it) holds, one "metric" object each; 0
# unless its status is success. Shell built-ins only, for polls.
vp_prom_series() {
    local o=$1
    case $o in *'"status":"success"'*) ;; *) echo 0; return 0 ;; esac
    o=${o//\"metric\":/$'\001'}
    o=${o//[^$'\001']/}
    echo "${#o}"
}

# vp_wait_for SECONDS CMD...: runs CMD every 0.2 s (VP_POLL) until it
# succeeds (prints the seconds it took) or SECONDS pass (returns 1).
vp_wait_for() {
    local limit=$1 start now
    shift
    start=${EPOCHREALTIME/./}
    while :; do
        if "$@"; then
            now=${EPOCHREALTIME/./}
            printf '%d.%d\n' $(((now - start) / 1000000)) $(((now - start) / 100000 % 10))
            return 0
        fi
        now=${EPOCHREALTIME/./}
        [ $((now - start)) -le $((limit * 1000000)) ] || return 1
        sleep "${VP_POLL:-0.2}"
    done
}

# vp_wait_until SECONDS CMD...: vp_wait_for without printing the time.
vp_wait_until() { vp_wait_for "$@" >/dev/null; }

# --------------------------------------------------- calibration to the host
# Machines of one kind differ (CPU speed, what a TCG guest costs): a live
# test measures the load it depends on instead of assuming a number.

# vp_host_load SECONDS: CPUs' worth of busy time of the whole host (the sum of
# every CPU's busy fraction) over SECONDS, from /proc/stat.
vp_host_load() {
    vp_cpu_busy_sample "${1:-5}" | awk '{s += $2} END {printf "%.2f\n", s}'
}

# vp_cpu_line: the host's "cpu" line of /proc/stat (all CPUs together);
# vp_busy_cpus FIRST SECOND: CPUs' worth of busy time between two of them.
vp_cpu_line() { grep '^cpu ' /proc/stat; }
vp_busy_cpus() {
    awk -v n="$(nproc)" 'NR == 1 { for (i = 2; i <= 9; i++) t0 += $i; i0 = $5 + $6 }
        NR == 2 { for (i = 2; i <= 9; i++) t1 += $i; i1 = $5 + $6 }
        END { dt = t1 - t0; printf "%.2f", (dt > 0 ? n * (1 - (i1 - i0) / dt) : 0) }' \
        <(printf '%s\n%s\n' "$1" "$2")
}

# vp__proc_ticks PID: utime + stime of a process (all its threads), in ticks.
vp__proc_ticks() {
    local line="" rest
    [ -n "$1" ] && read -r line < "/proc/$1/stat" 2>/dev/null
    [ -n "$line" ] || { echo 0; return 0; }
    rest=${line##*) }
    # After "pid (comm) ": state is field 3; utime and stime are 14 and 15.
    set -- $rest
    echo $(( ${12} + ${13} ))
}

# vp_domain_costs SECONDS NAME...: what each running domain's QEMU process
# really costs over SECONDS, in CPUs: "NAME 0.25" per line.
vp_domain_costs() {
    local secs=$1 d hz t0 t1 a=()
    shift
    hz=$(getconf CLK_TCK)
    for d in "$@"; do a+=("$(vp__proc_ticks "$(vp_qemu_pid "$d")")"); done
    t0=${EPOCHREALTIME/./}
    sleep "$secs"
    t1=${EPOCHREALTIME/./}
    local i=0
    for d in "$@"; do
        awk -v n="$d" -v a="${a[i]}" -v b="$(vp__proc_ticks "$(vp_qemu_pid "$d")")" \
            -v hz="$hz" -v us=$((t1 - t0)) 'BEGIN {printf "%s %.3f\n", n, (b - a) / hz / (us / 1e6)}'
        i=$((i + 1))
    done
}

# vp_fit_watermarks PACK SPREAD MARGIN WHAT [MAX_SPREAD]: sizes the
# watermarks a test gives vpackd (--set) from the load it measures instead of
# failing on a busy machine: the host's load (vp_host_load over 5 s, CPUs, the
# test's guests included: with one-core packages, what the packed core
# carries) must sit MARGIN under the pack watermark. PACK and SPREAD are the
# test's own watermarks; where the measured load needs more, the pack
# watermark becomes load + MARGIN and the spread watermark keeps its distance
# above it, at most MAX_SPREAD (default 1): a test that must see a spread
# gives the highest spread watermark its load step can still cross (a busy
# share never exceeds 1, so a spread watermark of 1 is never crossed). Sets
# VP_WATERMARKS (an array of --set arguments) and logs both numbers. Measures
# again when even a pack watermark of MAX_SPREAD would leave less than
# MARGIN: load from elsewhere that passes (a compiler, say) waits; fails only
# when it stays for all 8 measurements (40 s): a machine too busy for the
# test. Guests that just booted settle within that too.
vp_fit_watermarks() {
    local pack=$1 spread=$2 margin=$3 what=$4 max=${5:-1} load try fit
    for try in 1 2 3 4 5 6 7 8; do
        load=$(vp_host_load 5)
        fit=$(awk -v l="$load" -v p="$pack" -v s="$spread" -v m="$margin" -v x="$max" 'BEGIN {
            np = l + m > p ? l + m : p; ns = s + (np - p); if (ns > x) ns = x
            if (np > x) exit 1
            if (ns < np) ns = np
            printf "%.2f %.2f", np, ns }') && break
        vp_log "measured load $load CPUs: even a pack watermark of $max leaves less than $margin: measuring again"
        fit=""
    done
    [ -n "$fit" ] || vp_die "this host is too busy for the test: $load CPUs busy, $margin under a pack" \
           "watermark of at most $max needed ($what); see what else runs (top) and run the test again"
    read -r pack spread <<<"$fit"
    VP_WATERMARKS=(--set "policy.pack_watermark=$pack" --set "policy.spread_watermark=$spread")
    if [ "$pack" = "$(printf '%.2f' "$1")" ]; then
        vp_log "measured load $load CPUs: watermarks $pack (pack) and $spread (spread) as the test has them ($what)"
    else
        vp_log "measured load $load CPUs: pack watermark raised from $1 to $pack, spread to $spread, to keep $margin of room ($what)"
    fi
}

# vp_request_meta NAME [VIRSH]: vpack's request metadata (urn:vpack:request:1)
# in the domain's live XML, "" when none; VIRSH: the virsh function
# (vp_virsh, the default, or vp2_virsh).
vp_request_meta() { "${2:-vp_virsh}" metadata "$1" urn:vpack:request:1 2>/dev/null || true; }
# vp_live_pins NAME [VIRSH]: the live XML's <cputune> pins, one
# "vcpupin 1 1" (or "emulatorpin - 0-1", "iothreadpin 1 0") a line.
vp_live_pins() {
    "${2:-vp_virsh}" dumpxml "$1" | "$VP_PYTHON" -c '
import sys, xml.etree.ElementTree as ET
for t in ET.fromstring(sys.stdin.read()).findall("cputune"):
    for p in t:
        if p.tag in ("vcpupin", "emulatorpin", "iothreadpin"):
            print(p.tag, p.get("vcpu", p.get("iothread", "-")), p.get("cpuset"))'
}

# ------------------------------------ a second libvirtd, to migrate to
# Two daemons of one machine share /run/libvirt, /etc/libvirt and the rest,
# and libvirt refuses a migration to a daemon of its own host UUID ("internal
# error: Attempt to migrate guest to the same host UUID", measured with B's
# host_uuid set to A's). The second one runs in a mount namespace of its own,
# where directories of DIR stand in for those, with a host_uuid of its own in
# its libvirtd.conf (where SMBIOS has no system UUID, as in this test VM, each
# daemon draws a random one anyway; where it has one, both would read it). It
# is on the same network, so a migration reaches it through its socket
# (qemu+unix:///system?socket=...) and QEMU's stream through 127.0.0.1.
# shellcheck disable=SC2034 # VP2_QEMU_RUNDIR is for the scripts
VP2_DIR="" VP2_URI="" VP2_PID="" VP2_LOGD_PID="" VP2_QEMU_RUNDIR=""
VP2_DIRS=(run/libvirt run/vpack etc/libvirt var/lib/libvirt var/cache/libvirt var/log/libvirt)

# vp_start_second_libvirtd DIR [HOOK]: starts a virtlogd and a libvirtd in
# that namespace, HOOK (if given) installed as its hooks/qemu.d/vpack only; the
# namespace's /run/vpack is DIR/run/vpack, so a vpackd started in it (nsenter
# -t $VP2_PID -m) is the one that hook talks to. Sets VP2_URI (virsh -c),
# VP2_PID (its libvirtd), VP2_QEMU_RUNDIR (its guests' pid files, seen from
# here: VP_QEMU_RUNDIR for vp_pins). Marked in $VP_MARKDIR/second-libvirtd: if
# the test is killed, the next one stops its guests (vp_reap_leftovers); the
# script's exit runs vp_stop_second_libvirtd.
vp_start_second_libvirtd() {
    local dir=$1 hook=${2:-} d
    VP2_DIR=$dir
    for d in "${VP2_DIRS[@]}"; do mkdir -p "$dir/$d"; done
    mkdir -p "$dir/etc/libvirt/qemu" "$dir/var/lib/libvirt/qemu" "$dir/var/log/libvirt/qemu"
    cp /etc/libvirt/libvirt.conf "$dir/etc/libvirt/" 2>/dev/null || true
    printf 'host_uuid = "%s"\n' "$(cat /proc/sys/kernel/random/uuid)" > "$dir/etc/libvirt/libvirtd.conf"
    # QEMU's capabilities, probed already by the first daemon (else seconds).
    [ -d /var/cache/libvirt/qemu ] && cp -a /var/cache/libvirt/qemu "$dir/var/cache/libvirt/"
    if [ -n "$hook" ]; then
        mkdir -p "$dir/etc/libvirt/hooks/qemu.d"
        ln -s "$hook" "$dir/etc/libvirt/hooks/qemu.d/vpack"
    fi
    chmod 0755 "$dir"
    mkdir -p "$VP_MARKDIR" && printf '%s\n%s\n' "$VPACK_TEST_OWNER" "$dir" > "$VP_MARKDIR/second-libvirtd"
    vp_on_exit vp_stop_second_libvirtd
    vp_log "starting a second virtlogd and libvirtd (mount namespace, $dir)"
    # The daemons keep the namespace: it ends when they do.
    # shellcheck disable=SC2016 # the inner shell expands them
    unshare -m --propagation private /bin/bash -c '
        set -e
        dir=$1; shift
        for d in "$@"; do mkdir -p "/$d"; mount --bind "$dir/$d" "/$d"; done
        virtlogd -d -p "$dir/virtlogd.pid"
        libvirtd -d -p "$dir/libvirtd.pid"' _ "$dir" "${VP2_DIRS[@]}" ||
        vp_die "could not start the second libvirtd"
    read -r VP2_LOGD_PID < "$dir/virtlogd.pid" || true
    read -r VP2_PID < "$dir/libvirtd.pid" || true
    VP2_URI="qemu+unix:///system?socket=$dir/run/libvirt/libvirt-sock"
    VP2_QEMU_RUNDIR=$dir/run/libvirt/qemu
    local deadline=$((SECONDS + VP_DAEMON_TIMEOUT))
    until virsh -c "$VP2_URI" version >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$deadline" ] || vp_die "the second libvirtd does not answer on $VP2_URI"
        sleep 0.2
    done
}

# vp2_virsh ARGS: virsh on the second libvirtd.
vp2_virsh() { virsh -q -c "$VP2_URI" "$@"; }

# vp__kill_qemus_of RUNDIR: kills the QEMU of every pid file in RUNDIR.
vp__kill_qemus_of() {
    local f pid comm
    for f in "$1"/*.pid; do
        [ -e "$f" ] || continue
        pid=""; read -r pid < "$f" 2>/dev/null || true
        read -r comm < "/proc/$pid/comm" 2>/dev/null || continue
        case $comm in qemu-system-*) kill -KILL "$pid" 2>/dev/null || true ;; esac
    done
}

# vp_stop_second_libvirtd: destroys and undefines the second libvirtd's
# domains (a libvirtd that stops leaves its guests running), kills any QEMU
# left, stops its libvirtd and virtlogd.
vp_stop_second_libvirtd() {
    local d
    [ -n "$VP2_DIR" ] || return 0
    if [ -n "$VP2_URI" ] && virsh -c "$VP2_URI" version >/dev/null 2>&1; then
        for d in $(virsh -q -c "$VP2_URI" list --all --name 2>/dev/null); do
            virsh -q -c "$VP2_URI" destroy "$d" >/dev/null 2>&1 || true
            virsh -q -c "$VP2_URI" undefine "$d" >/dev/null 2>&1 || true
        done
    fi
    vp__kill_qemus_of "$VP2_DIR/run/libvirt/qemu"
    vp__stop_pid "$VP2_PID" libvirtd
    vp__stop_pid "$VP2_LOGD_PID" virtlogd
    rm -f "$VP_MARKDIR/second-libvirtd"
    # shellcheck disable=SC2034 # VP2_QEMU_RUNDIR is for the scripts
    VP2_DIR="" VP2_URI="" VP2_PID="" VP2_LOGD_PID="" VP2_QEMU_RUNDIR=""
}

# vp__reap_second_libvirtd: for vp_reap_leftovers: the guests of a second
# libvirtd whose test is gone (its daemons are marked: stopped after this).
vp__reap_second_libvirtd() {
    local owner="" dir=""
    [ -r "$VP_MARKDIR/second-libvirtd" ] || return 1
    { read -r owner; read -r dir; } < "$VP_MARKDIR/second-libvirtd" || true
    if [ -n "$owner" ] && vp__owner_alive "$owner"; then return 1; fi
    rm -f "$VP_MARKDIR/second-libvirtd"
    [ -n "$dir" ] && [ -d "$dir/run/libvirt/qemu" ] || return 1
    vp_log "killing the guests of the second libvirtd ($dir) an earlier test left"
    local f names=() name cg
    for f in "$dir"/run/libvirt/qemu/*.pid; do
        [ -e "$f" ] && names+=("$(basename "$f" .pid)")
    done
    vp__kill_qemus_of "$dir/run/libvirt/qemu"
    sleep 1
    # Their cgroups (machine/qemu-ID-NAME.libvirt-qemu), if that libvirtd did
    # not remove them: rmdir removes only groups without tasks.
    for name in "${names[@]}"; do
        for cg in /sys/fs/cgroup/*/machine/qemu-*-"$name".libvirt-qemu; do
            [ -d "$cg" ] || continue
            find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
        done
    done
    return 0
}

# vp_reap_all: for the end of a whole run (tests/run-all.sh): removes what
# any test left behind, and stops the libvirtd it had to start for that.
vp_reap_all() {
    VP_REAPED=""
    vp_reap_leftovers
    vp_stop_libvirtd
}
