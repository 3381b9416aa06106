#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The Debian package, built and used the way an operator would. Phases:
#
#   build      dpkg-buildpackage -us -uc -b in a scratch copy of the checkout
#              (it writes into the parent directory: never next to the
#              checkout); its version is meson.build's project version
#   lintian    no error, warning or info tag that debian/ does not override
#   install    apt-get install ./vpack_*.deb: the three programs, the man
#              pages, the bash completion, the unit, the hook script in
#              /etc/libvirt/hooks/qemu.d/ and /etc/vpack/vpackd.conf (both
#              conffiles) are where they belong; the unit is Type=notify,
#              ordered after libvirtd and virtqemud without pulling either
#              in; it is not enabled and vpackd is not running
#   hook       after a libvirtd restart, the installed hook refuses a domain
#              with level='7' with vpack's message
#   agent      the operator's edits to the conffile (topology override, metrics
#              port, watermarks); vpackd started from the unit's ExecStart as
#              systemd would (its RuntimeDirectory, a clean environment, cwd
#              /) packs a level-2 guest pair, one of them with a guest pin, and
#              the installed vpackctl reaches it on the default socket;
#              NOTIFY_SOCKET points at a socat datagram socket, where READY=1
#              and STATUS= arrive
#   reload     the unit's ExecReload lines, in order, as systemd runs them:
#              with a broken conffile the first (vpackd --check-config) fails
#              with the file's line and key, the rest is not run, and vpackd
#              keeps serving; with a good one, RELOADING=1 then READY=1 arrive
#   purge      apt-get purge -y vpack: the prerm stops vpackd (SIGTERM, exit
#              0), every guest thread has the pins it had before vpackd ran,
#              and nothing of vpack is left: every file dpkg listed, /etc/vpack,
#              /run/vpack, the hook script, the unit, any enablement symlink
#              and deb-systemd-helper's state; after a libvirtd restart the domain
#              with level='7' starts (no hook runs)
#
# The cleanup purges the package even when the test fails; if the test is
# killed, the next test does (vp_reap_leftovers, by the mark in
# $VP_MARKDIR/package). An installed vpack package this test did not install
# makes it fail, untouched.
#
# Environment: VPACK_SRCDIR (default: the checkout this script is in).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/integration/lib.sh
. "$here/lib.sh"
# Builds its own programs: only srcdir of vp_test's settings is used.
vp_test package vppkg-
vp_need_cpus 2
UNIT=/lib/systemd/system/vpackd.service
WANTS=/etc/systemd/system/multi-user.target.wants/vpackd.service
CONF=/etc/vpack/vpackd.conf
HOOK_LINK=$VP_HOOK_LINK
RUN_DIR=/run/vpack
installed=""
# The package's prerm stops its vpackd, which gives the pins back: first.
vp_on_exit --early '[ -z "$installed" ] || { vp_log "cleanup: purging the vpack package"; vp_purge_test_package; }'
# A libvirtd this script did not start forgets the hook on a restart; one
# it started, vp_cleanup stops.
vp_on_exit '[ -z "$installed" ] || [ -n "$VP_STARTED_LIBVIRTD_PID" ] || vp_restart_libvirtd'

# Pids of running processes of the installed /usr/sbin/vpackd.
package_vpackd() {
    local p
    for p in $(pgrep -x vpackd 2>/dev/null || true); do
        [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = /usr/sbin/vpackd ] && echo "$p"
    done
    return 0
}

# Whatever an earlier, killed test left (its guests, its vpackd, the package
# it installed) goes first.
vp_install_deps
vp_reap_leftovers
if dpkg-query -W -f='${Status}' vpack 2>/dev/null | vp_has -v 'not-installed'; then
    vp_die "a vpack package is installed ($(dpkg-query -W -f='${Version} ${Status}' vpack)):" \
           "not touching it; remove it to run this test"
fi
if [ -e "$HOOK_LINK" ] || [ -L "$HOOK_LINK" ]; then
    vp_die "$HOOK_LINK exists (not from a package): not overwriting it"
fi

echo "== build"
# What it takes to build the package (apt reads the Build-Depends).
vp_install_packages dpkg-dev debhelper lintian || vp_die "cannot install dpkg-dev debhelper lintian"
# A scratch copy of the checkout (the files git knows, or all but build
# directories when it is not a git checkout), with what is not committed yet.
mkdir -p "$work/src/vpack"
if git -C "$srcdir" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$srcdir" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
        tar -cf - --null -T -) | tar -xf - -C "$work/src/vpack"
else
    tar -C "$srcdir" -cf - --exclude='./build*' --exclude=./.git . | tar -xf - -C "$work/src/vpack"
fi
(cd "$work/src/vpack" && dpkg-checkbuilddeps >/dev/null 2>&1) || {
    vp_log "installing the build dependencies"
    vp__apt_update_once
    vp__quiet vp__apt build-dep -y --no-install-recommends "$work/src/vpack"
}
t0=$SECONDS
# A standard build: no nocheck or noopt from the environment.
if (cd "$work/src/vpack" && env -u DEB_BUILD_OPTIONS dpkg-buildpackage -us -uc -b) \
        > "$work/build.log" 2>&1; then
    vp_pass "dpkg-buildpackage -us -uc -b built the package in $((SECONDS - t0)) s"
else
    tail -n 40 "$work/build.log"
    vp_die "dpkg-buildpackage failed"
fi
version=$(sed -n "s/^ *version : '\([^']*\)'.*/\1/p" "$srcdir/meson.build")
deb=$work/src/vpack_${version}_$(dpkg --print-architecture).deb
[ -f "$deb" ] && vp_pass "built $(basename "$deb") (meson.build's version $version)" ||
    vp_die "no $(basename "$deb"): $(ls "$work/src")"
grep -q 'meson test --suite unit' "$work/build.log" &&
    grep -qE '^Fail: +0 *$' "$work/build.log" &&
    vp_pass "the build ran the unit tests: $(grep -E '^Ok: ' "$work/build.log" | tr -s ' ')" ||
    vp_fail "the build did not run the unit tests, or one failed"

echo "== lintian"
lintian --pedantic --display-info "$work"/src/vpack_*.changes > "$work/lintian.log" 2>&1 || true
{ grep -v 'running with root privileges' "$work/lintian.log" || true; } | sed 's/^/  /'
if grep -qE '^(E|W|I|X):' "$work/lintian.log"; then
    vp_fail "lintian: $(grep -cE '^(E|W|I|X):' "$work/lintian.log") tag(s) not overridden"
else
    vp_pass "lintian: no error, warning or info tag ($(grep -c '^P:' "$work/lintian.log" || true) pedantic)"
fi

echo "== install"
# Marked first: if this test is killed from here on, the next one purges.
mkdir -p "$VP_MARKDIR" && printf '%s\n' "$VPACK_TEST_OWNER" > "$VP_MARKDIR/package"
installed=1
# Not libvirt-daemon-system (Recommends): the tests' libvirtd is started by hand.
vp__quiet vp__apt install -y --no-install-recommends "$deb" ||
    vp_die "apt-get install $(basename "$deb") failed"
[ "$(dpkg-query -W -f='${Status} ${Version}' vpack)" = "install ok installed $version" ] &&
    vp_pass "vpack $version installed" || vp_fail "dpkg says: $(dpkg-query -W -f='${Status} ${Version}' vpack)"
dpkg -L vpack > "$work/files"
for f in /usr/sbin/vpackd /usr/bin/vpackctl /usr/bin/vpack-hook "$UNIT" "$CONF" "$HOOK_LINK" \
         /usr/share/bash-completion/completions/vpackctl /usr/share/man/man8/vpackd.8.gz /usr/share/man/man1/vpackctl.1.gz \
         /usr/share/man/man5/vpackd.conf.5.gz /usr/share/man/man8/vpack-hook.8.gz \
         /usr/share/doc/vpack/copyright; do
    if grep -qxF "$f" "$work/files" && { [ -e "$f" ] || [ -L "$f" ]; }; then vp_pass "installed $f"
    else vp_fail "$f is not installed"; fi
done
[ ! -L "$HOOK_LINK" ] && [ -f "$HOOK_LINK" ] && [ -x "$HOOK_LINK" ] &&
    grep -qx 'exec /usr/bin/vpack-hook "\$@"' "$HOOK_LINK" &&
    vp_pass "hook $HOOK_LINK: an executable script that runs /usr/bin/vpack-hook" ||
    vp_fail "hook: $(ls -l "$HOOK_LINK" 2>&1): $(tail -n1 "$HOOK_LINK" 2>&1)"
for f in "$CONF" "$HOOK_LINK"; do
    dpkg-query -W -f='${Conffiles}\n' vpack | vp_has "^ $f " &&
        vp_pass "$f is a conffile" || vp_fail "$f is not a conffile: $(dpkg-query -W -f='${Conffiles}' vpack)"
done
dpkg-query -W -f='${Depends}\n' vpack | vp_has 'libvirt-daemon (>= 6.5)' &&
    vp_pass "Depends: libvirt-daemon (>= 6.5)" || vp_fail "Depends: $(dpkg-query -W -f='${Depends}' vpack)"
[ ! -e "$WANTS" ] && [ ! -L "$WANTS" ] && vp_pass "unit not enabled by the installation" ||
    vp_fail "unit enabled: $(ls -l "$WANTS" 2>&1)"
grep -qx 'Type=notify' "$UNIT" && vp_pass "unit: Type=notify" || vp_fail "unit: $(grep '^Type=' "$UNIT")"
after=$(sed -n 's/^After=//p' "$UNIT" | tr '\n' ' ')
[[ " $after " == *" libvirtd.service "* && " $after " == *" virtqemud.service "* ]] &&
    ! grep -qE '^(Wants|Requires|BindsTo)=.*(libvirtd|virtqemud)' "$UNIT" &&
    vp_pass "unit: After=$after, pulling in neither libvirt daemon" ||
    vp_fail "unit: After=$after; $(grep -E '^(Wants|Requires|BindsTo)=' "$UNIT")"
[ -z "$(package_vpackd)" ] && vp_pass "vpackd not started by the installation" ||
    vp_fail "vpackd runs after installation: $(package_vpackd)"
v=$(vpackctl version 2>/dev/null | head -n1) || true
[[ $v == *"$version"* ]] && vp_pass "vpackctl version: $v" || vp_fail "vpackctl version says '$v'"

echo "== hook"
vp_start_libvirtd
vp_build_guest
vp_destroy_all_test_domains
vp_wait_no_other_vpackd 900 "restarting libvirtd and starting vpackd on the default socket"
# libvirt looks for hooks when it starts.
vp_restart_libvirtd
vp_define vppkg-bad 1 idle "" "<vpack:powerpolicy xmlns:vpack='$NS' level='7'/>"
if out=$(vp_virsh start vppkg-bad 2>&1); then
    vp_fail "the installed hook let a level-7 domain start"
    vp_virsh destroy vppkg-bad >/dev/null 2>&1 || true
elif [[ $out == *"vpack: domain 'vppkg-bad'"*"invalid power policy level '7'"* ]]; then
    vp_pass "the installed hook refused level 7: ${out##*: vpack: }"
else
    vp_fail "vppkg-bad did not start, but not because of vpack: $out"
fi

echo "== agent"
META2="<vpack:powerpolicy xmlns:vpack='$NS' level='2'/>"
vp_define_start vppkg-a 2 idle "<vcpupin vcpu='1' cpuset='0'/>" "$META2"
vp_define_start vppkg-b 2 idle "" "$META2"
vp_wait_ready vppkg-a
vp_wait_ready vppkg-b
# What the guests asked for, as the kernel has it before vpackd runs.
asked_a=$(vp_pins vppkg-a)
asked_b=$(vp_pins vppkg-b)
[ "$asked_a" = "vcpu0=0-1 vcpu1=0 emulator=0-1" ] && [ "$asked_b" = "vcpu0=0-1 vcpu1=0-1 emulator=0-1" ] &&
    vp_pass "guest pins before vpackd: a: $asked_a; b: $asked_b" ||
    vp_fail "unexpected pins before vpackd: a: $asked_a; b: $asked_b"
# The operator's edits: this 2-CPU host as two packages (the tests' topology
# override), watermarks the packed load sits well under, a free metrics port.
port=$(vp_free_port)
sed -i -e 's|^# topology = host$|topology = synthetic:"package:2 core:1 pu:1"|' \
       -e 's|^# pack_watermark = .*|pack_watermark = 0.9|' \
       -e 's|^# spread_watermark = .*|spread_watermark = 0.95|' \
       -e "s|^# port = 9477\$|port = $port|" "$CONF"
[ "$(grep -cE '^(topology|pack_watermark|spread_watermark|port) = ' "$CONF")" = 4 ] ||
    vp_die "could not edit $CONF: $(grep -vE '^(#|$)' "$CONF" | tr '\n' ' ')"
out=$(/usr/sbin/vpackd --config "$CONF" --check-config 2>&1) &&
    vp_pass "vpackd --check-config accepts the edited conffile" || vp_fail "vpackd --check-config: $out"
vp_fit_watermarks 0.9 0.95 0.3 "the packed load must stay clear of the pack watermark"
sed -i -e "s/^pack_watermark = .*/pack_watermark = ${VP_WATERMARKS[1]#*=}/" \
       -e "s/^spread_watermark = .*/spread_watermark = ${VP_WATERMARKS[3]#*=}/" "$CONF"
# The unit's command line, run as systemd runs it: its RuntimeDirectory (mode
# 0755), a clean environment with the unit's Environment= settings, cwd /,
# stdin /dev/null. VPACK_TEST_OWNER lets the next test stop it if this one
# is killed.
exec_start=$(sed -n 's/^ExecStart=//p' "$UNIT")
[[ $exec_start == /usr/sbin/vpackd\ * ]] && [[ $exec_start != *[\"\'\\\$]* ]] ||
    vp_die "unexpected ExecStart in $UNIT: $exec_start"
read -ra cmd <<<"$exec_start"
unit_env=()
while IFS= read -r e; do
    read -ra kv <<<"$e"
    unit_env+=("${kv[@]}")
done < <(sed -n 's/^Environment=//p' "$UNIT")
sed -n 's/^RuntimeDirectory=//p' "$UNIT" | vp_has -x vpack || vp_die "$UNIT has no RuntimeDirectory=vpack"
mkdir -p "$RUN_DIR" && chmod 0755 "$RUN_DIR"
# systemd's notification socket, played by socat: one datagram a message,
# appended to notify.log (the messages have no final newline; the checks
# below grep for each field).
vp_install_packages socat || vp_die "cannot install socat"
notify_sock=$work/notify.sock notify_log=$work/notify.log
: > "$notify_log"
socat -u "UNIX-RECV:$notify_sock" "OPEN:$notify_log,append" &
notify_pid=$!
vp_on_exit 'kill "$notify_pid" 2>/dev/null || true'
vp_wait_for 5 test -S "$notify_sock" >/dev/null || vp_die "socat did not open $notify_sock"
vp_log "starting the unit's command line: $exec_start"
(cd / && exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    VPACK_TEST_OWNER="$VPACK_TEST_OWNER" NOTIFY_SOCKET="$notify_sock" "${unit_env[@]}" "${cmd[@]}") \
    < /dev/null >> "$work/vpackd.log" 2>&1 &
agent_pid=$!
if vp_wait_for 10 test -S "$RUN_DIR/vpackd.sock" >/dev/null; then vp_pass "vpackd opened $RUN_DIR/vpackd.sock"
else vp_die "vpackd did not open $RUN_DIR/vpackd.sock"; fi
[ "$(package_vpackd)" = "$agent_pid" ] || vp_fail "vpackd runs as $(package_vpackd), not as $agent_pid"
# Packed onto one CPU, whichever the policy keeps awake (the busier: other
# load on the machine decides), vppkg-a's guest pin (vCPU 1 on CPU 0) kept.
if t=$(vp_wait_for 30 vp_packed_keeping_pin vppkg-a 1 0 vppkg-b); then
    vp_pass "both guests packed onto one CPU after ${t}s, vppkg-a's guest pin kept:" \
         "a: $(vp_pins vppkg-a); b: $(vp_pins vppkg-b)"
else
    vp_fail "not packed: a: $(vp_pins vppkg-a); b: $(vp_pins vppkg-b)"
fi
out=$(vpackctl status 2>&1) && [[ $out == *vppkg-a* ]] &&
    vp_pass "vpackctl status on the default socket lists vppkg-a" || vp_fail "vpackctl status: $out"
out=$(curl -s "http://127.0.0.1:$port/metrics") && [[ $out == *vpack_* ]] &&
    vp_pass "metrics served on the configured port $port" || vp_fail "no metrics on port $port"
# notified: does notify.log, from byte $1 on, hold each of the strings $2...?
notified() {
    local from=$1 s text
    shift
    text=$(tail -c +"$((from + 1))" "$notify_log")
    for s in "$@"; do [[ $text == *"$s"* ]] || return 1; done
}
statuses() { grep -ao 'STATUS=[0-9]* of [0-9]* packages active, [0-9]* domains placed' "$notify_log" | tail -n1; }
if vp_wait_for 5 notified 0 READY=1 STATUS= >/dev/null; then
    vp_pass "sd_notify: READY=1 and $(statuses)"
else
    vp_fail "sd_notify: no READY=1 and STATUS= on NOTIFY_SOCKET: '$(tr '\n' '|' < "$notify_log")'"
fi
[[ $(statuses) == *"2 domains placed"* ]] && vp_pass "the last STATUS= counts both guests placed" ||
    vp_fail "last STATUS=: '$(statuses)'"

echo "== reload"
# The unit's ExecReload lines, parsed from it, run in order as systemd does:
# one that fails ends the reload (failed), and the rest is not run.
mapfile -t reload_cmds < <(sed -n 's/^ExecReload=//p' "$UNIT")
[ "${#reload_cmds[@]}" -ge 2 ] && [[ ${reload_cmds[0]} == *--check-config* ]] ||
    vp_die "unexpected ExecReload in $UNIT: ${reload_cmds[*]}"
run_reload() {
    local line rc=0
    local -a rcmd
    for line in "${reload_cmds[@]}"; do
        read -ra rcmd <<<"${line//\$MAINPID/$agent_pid}"
        (cd / && exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "${rcmd[@]}") \
            < /dev/null >> "$work/reload.log" 2>&1 || { rc=$?; break; }
    done
    return "$rc"
}
cp "$CONF" "$work/vpackd.conf.good"
printf '[policy]\nno_such_key = 1\n' >> "$CONF"
: > "$work/reload.log"
mark=$(stat -c %s "$notify_log")
if run_reload; then
    vp_fail "the reload with a broken file succeeded"
elif grep -q "no_such_key: unknown key" "$work/reload.log"; then
    vp_pass "a broken file fails the reload: $(tail -n1 "$work/reload.log")"
else
    vp_fail "the reload failed, but not with the key's message: $(cat "$work/reload.log")"
fi
sleep 1
! notified "$mark" RELOADING=1 && kill -0 "$agent_pid" && out=$(vpackctl status 2>&1) &&
    [[ $out == *vppkg-a* ]] &&
    vp_pass "after the failed reload vpackd was not signalled and still serves" ||
    vp_fail "after the failed reload: $(tail -c +"$((mark + 1))" "$notify_log"); $out"
cp "$work/vpackd.conf.good" "$CONF"
mark=$(stat -c %s "$notify_log")
if run_reload; then vp_pass "the reload with the good file succeeded"
else vp_fail "the reload with the good file failed: $(cat "$work/reload.log")"; fi
if vp_wait_for 5 notified "$mark" RELOADING=1 MONOTONIC_USEC= READY=1 >/dev/null; then
    text=$(tail -c +"$((mark + 1))" "$notify_log")
    before=${text%%READY=1*}
    [[ $before == *RELOADING=1* ]] && vp_pass "sd_notify: RELOADING=1 (with MONOTONIC_USEC=), then READY=1" ||
        vp_fail "sd_notify: READY=1 before RELOADING=1: $text"
else
    vp_fail "sd_notify: no RELOADING=1 ... READY=1 after SIGHUP: '$(tail -c +"$((mark + 1))" "$notify_log")'"
fi
kill -0 "$agent_pid" && out=$(vpackctl status 2>&1) && [[ $out == *vppkg-a* ]] &&
    vp_pass "vpackd serves after the reload" || vp_fail "after the reload: $out"

echo "== purge"
vp_log "apt-get purge -y vpack"
cp "$work/files" "$work/files.installed"
if vp__quiet vp__apt purge -y vpack; then vp_pass "apt-get purge -y vpack"
else vp_fail "apt-get purge -y vpack failed"; fi
if dpkg-query -W -f='${Status}' vpack 2>/dev/null | vp_has -v 'not-installed'; then
    vp_fail "still known to dpkg: $(dpkg-query -W -f='${Status}' vpack)"
else
    # shellcheck disable=SC2034 # read at the exit (vp_on_exit)
    installed=""
    rm -f "$VP_MARKDIR/package"
    vp_pass "dpkg no longer knows vpack"
fi
if kill -0 "$agent_pid" 2>/dev/null; then
    vp_fail "vpackd still runs after the purge"
else
    rc=0; wait "$agent_pid" || rc=$?
    agent_pid=""
    [ "$rc" -eq 0 ] && vp_pass "the prerm stopped vpackd; it exited 0" || vp_fail "vpackd exited $rc"
fi
a=$(vp_pins vppkg-a); b=$(vp_pins vppkg-b)
[ "$a" = "$asked_a" ] && vp_pass "vppkg-a back to its own pins: $a" || vp_fail "vppkg-a left at $a (asked $asked_a)"
[ "$b" = "$asked_b" ] && vp_pass "vppkg-b back to its own pins: $b" || vp_fail "vppkg-b left at $b (asked $asked_b)"
left=()
while IFS= read -r f; do
    case $f in /.|"") continue ;; esac
    if [ -d "$f" ]; then
        # Directories other packages share (/usr/bin, ...) stay; vpack's go.
        [[ $f == *vpack* ]] && left+=("$f")
    elif [ -e "$f" ] || [ -L "$f" ]; then
        left+=("$f")
    fi
done < "$work/files.installed"
for f in /etc/vpack "$RUN_DIR" "$HOOK_LINK" /usr/share/bash-completion/completions/vpackctl "$UNIT" "$WANTS"; do
    { [ -e "$f" ] || [ -L "$f" ]; } && left+=("$f")
done
while IFS= read -r f; do left+=("$f"); done < <(
    find /var/lib/systemd/deb-systemd-helper-enabled /var/lib/systemd/deb-systemd-helper-masked \
         /etc/systemd/system -name 'vpackd*' 2>/dev/null; ls -d /var/lib/dpkg/info/vpack.* 2>/dev/null)
[ "${#left[@]}" -eq 0 ] &&
    vp_pass "nothing of vpack left ($(wc -l < "$work/files.installed") paths dpkg listed, /etc/vpack, $RUN_DIR, the hook script, the completion, the unit and any enablement)" ||
    vp_fail "left after the purge: ${left[*]}"
[ -z "$(package_vpackd)" ] || vp_fail "a vpackd from the package still runs: $(package_vpackd)"
vp_restart_libvirtd
if out=$(vp_virsh start vppkg-bad 2>&1); then
    vp_pass "after libvirtd's restart no vpack hook runs: the level-7 domain starts"
else
    vp_fail "the level-7 domain does not start after the purge: $out"
fi
vp_virsh destroy vppkg-bad >/dev/null 2>&1 || true

echo
vp_verdict
