#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# vpackctl without an agent: exit codes and messages of the commands that
# talk to vpackd when nothing listens (3), of usage errors (2), of --help (0)
# and of 'version' (0: an agent that is away is not an error there); and
# 'vpackctl wait' against a stand-in for the agent (fake-agent.py) that
# answers fixed status objects. Needs no root, no libvirt and no vpackd.
# Prints "ok" on success.
#
#   VPACKCTL=build/ctl/vpackctl bash tests/integration/test-vpackctl-offline.sh
#   bash tests/integration/test-vpackctl-offline.sh build/ctl/vpackctl
#
# Without either, $VPACK_BUILDDIR/ctl/vpackctl is used.
set -euo pipefail

ctl=${1:-${VPACKCTL:-${VPACK_BUILDDIR:-}/ctl/vpackctl}}
[ -x "$ctl" ] || { echo "test-vpackctl-offline: no vpackctl at '$ctl' (set VPACKCTL)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"   # VP_PYTHON, vp_fail and vp_verdict (no root, no libvirt)

tmp=$(mktemp -d)
fake_pids=()   # the stand-in agents of the 'wait' checks
trap 'kill "${fake_pids[@]}" 2>/dev/null; rm -rf "$tmp"' EXIT
nosock=$tmp/run/vpackd.sock          # its directory does not exist either

# run ARGS...: runs vpackctl with VPACK_SOCKET unset; sets rc, out, err.
run() {
    rc=0
    env -u VPACK_SOCKET "$ctl" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    out=$(cat "$tmp/out")
    err=$(cat "$tmp/err")
}

# expect WHAT RC: checks the exit code of the last run.
expect_rc() {
    [ "$rc" -eq "$2" ] || vp_fail "$1: exit code $rc, expected $2 (stderr: '$err')"
}

# expect_err WHAT TEXT: stderr of the last run is one line that contains TEXT.
expect_err() {
    if [ -z "$err" ] || [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ]; then
        vp_fail "$1: stderr is not one line: '$err'"
    fi
    case $err in
    *"$2"*) ;;
    *) vp_fail "$1: stderr '$err' does not contain '$2'" ;;
    esac
}

expect_no_out() {
    [ -z "$out" ] || vp_fail "$1: unexpected stdout: '$out'"
}

# expect_out WHAT TEXT: stdout of the last run is TEXT.
expect_out() {
    [ "$out" = "$2" ] || vp_fail "$1: stdout '$out', expected '$2'"
}

# ---- no agent: exit 3, one line naming the socket -----------------------
for cmd in "status" "status --json" "rebalance" "rebalance --dry-run" "rebalance --json" \
           "explain web1" "explain web1 --json" "wait --for packed" "wait --for spread --json"; do
    # shellcheck disable=SC2086 # cmd is split on purpose
    run $cmd --socket "$nosock"
    expect_rc "$cmd (no agent)" 3
    expect_no_out "$cmd (no agent)"
    expect_err "$cmd (no agent)" \
        "vpackctl: cannot reach vpackd at $nosock: No such file or directory (is vpackd running?)"
done

# The socket comes from $VPACK_SOCKET when --socket is not given ...
rc=0
VPACK_SOCKET=$tmp/env.sock "$ctl" status >"$tmp/out" 2>"$tmp/err" || rc=$?
out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
expect_rc "status with VPACK_SOCKET" 3
expect_err "status with VPACK_SOCKET" "cannot reach vpackd at $tmp/env.sock:"

# ... and --socket wins over it.
rc=0
VPACK_SOCKET=$tmp/env.sock "$ctl" status --socket "$nosock" >"$tmp/out" 2>"$tmp/err" || rc=$?
out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
expect_rc "status --socket over VPACK_SOCKET" 3
expect_err "status --socket over VPACK_SOCKET" "cannot reach vpackd at $nosock:"

# A plain file where the socket should be: nobody listens there.
: >"$tmp/plain"
run status --socket "$tmp/plain"
expect_rc "status (plain file)" 3
expect_err "status (plain file)" "cannot reach vpackd at $tmp/plain: Connection refused (is vpackd running?)"

# A stale socket, as a crashed agent leaves it: bound, nobody listening.
if [ -x "$VP_PYTHON" ]; then
    "$VP_PYTHON" -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$tmp/stale.sock"
    run rebalance --socket "$tmp/stale.sock"
    expect_rc "rebalance (stale socket)" 3
    expect_err "rebalance (stale socket)" \
        "cannot reach vpackd at $tmp/stale.sock: Connection refused (is vpackd running?)"
fi

# A path no Unix socket can have is an error, but not "unreachable".
long=$tmp/$(printf 'x%.0s' $(seq 1 120)).sock
run status --socket "$long"
expect_rc "status (path too long)" 1
expect_err "status (path too long)" "the socket path is longer than"

# ---- version: ours always, the agent's when it answers --------------------
run version --socket "$nosock"
expect_rc "version (no agent)" 0
[ "$(printf '%s\n' "$out" | head -n1)" = "vpackctl $("$ctl" --version | cut -d' ' -f2)" ] ||
    vp_fail "version (no agent): first line '$(printf '%s\n' "$out" | head -n1)'"
case $out in
*"vpackd not reachable at $nosock: No such file or directory"*) ;;
*) vp_fail "version (no agent): stdout '$out' does not say vpackd is not reachable" ;;
esac
[ -z "$err" ] || vp_fail "version (no agent): unexpected stderr '$err'"

run version --json --socket "$nosock"
expect_rc "version --json (no agent)" 0
case $out in
'{"vpackctl":"'*'","vpackd":null}') ;;
*) vp_fail "version --json (no agent): stdout '$out'" ;;
esac

run --version
expect_rc "--version" 0
case $out in
"vpackctl "[0-9]*) ;;
*) vp_fail "--version: stdout '$out'" ;;
esac

# ---- --help: usage on stdout, exit 0 --------------------------------------
for cmd in status rebalance explain version wait; do
    for h in --help -h; do
        run "$cmd" "$h"
        expect_rc "$cmd $h" 0
        case $out in
        "Usage: vpackctl $cmd"*) ;;
        *) vp_fail "$cmd $h: stdout does not start with 'Usage: vpackctl $cmd': '$out'" ;;
        esac
        case $out in
        *--socket*) ;;
        *) vp_fail "$cmd $h: usage does not mention --socket" ;;
        esac
        [ -z "$err" ] || vp_fail "$cmd $h: unexpected stderr '$err'"
    done
done
# --help wins over the arguments, and needs no agent.
run explain --help --socket "$nosock"
expect_rc "explain --help --socket" 0
run --help
expect_rc "--help" 0
for cmd in status rebalance explain topology plan version wait; do
    case $out in
    *"  $cmd "*) ;;
    *) vp_fail "--help: command '$cmd' missing from the list" ;;
    esac
done

# ---- usage errors: one line on stderr, nothing on stdout, exit 2 ----------
# "ARGS|MESSAGE": the socket given is never reached, parsing fails first.
while IFS='|' read -r args msg; do
    # shellcheck disable=SC2086 # args is split on purpose
    run $args
    expect_rc "$args" 2
    expect_no_out "$args"
    expect_err "$args" "$msg"
done <<EOF
status --bogus|vpackctl: status: unknown option '--bogus' (see 'vpackctl status --help')
status -x|vpackctl: status: unknown option '-x'
status --json=yes|vpackctl: status: option '--json=yes' takes no argument
status --socket|vpackctl: status: option '--socket' needs an argument
status extra|vpackctl: status: unexpected argument 'extra'
rebalance --dry-run=1|vpackctl: rebalance: option '--dry-run=1' takes no argument
rebalance --force|vpackctl: rebalance: unknown option '--force' (see 'vpackctl rebalance --help')
rebalance now|vpackctl: rebalance: unexpected argument 'now'
explain|vpackctl: explain: missing DOMAIN (see 'vpackctl explain --help')
explain --json|vpackctl: explain: missing DOMAIN
explain a b|vpackctl: explain: unexpected argument 'b'
explain web1 --verbose|vpackctl: explain: unknown option '--verbose'
version --bogus|vpackctl: version: unknown option '--bogus'
version 1|vpackctl: version: unexpected argument '1'
wait|vpackctl: wait: --for CONDITION is required (see 'vpackctl wait --help')
wait --for|vpackctl: wait: option '--for' needs an argument
wait --for packed now|vpackctl: wait: unexpected argument 'now'
wait --for parked|vpackctl: wait: --for 'parked': unknown condition (expected packed, spread, parked=N or level=DOMAIN:N)
wait --for Packed|vpackctl: wait: --for 'Packed': unknown condition
wait --for parked=|vpackctl: wait: --for 'parked=': N of parked=N must be a number of packages
wait --for parked=-1|vpackctl: wait: --for 'parked=-1': N of parked=N must be a number of packages
wait --for parked=1x|vpackctl: wait: --for 'parked=1x': N of parked=N must be a number of packages
wait --for level=web1|vpackctl: wait: --for 'level=web1': expected level=DOMAIN:N
wait --for level=:2|vpackctl: wait: --for 'level=:2': expected level=DOMAIN:N
wait --for level=web1:3|vpackctl: wait: --for 'level=web1:3': '3' is not a power policy level (0, 1 or 2)
wait --for level=web1:|vpackctl: wait: --for 'level=web1:': '' is not a power policy level
wait --for packed --timeout x|vpackctl: wait: --timeout 'x': expected seconds, 0 or more and at most 604800
wait --for packed --timeout -1|vpackctl: wait: --timeout '-1': expected seconds
wait --for packed --json=1|vpackctl: wait: option '--json=1' takes no argument
doctor --bogus|vpackctl: doctor: unknown option '--bogus' (see 'vpackctl doctor --help')
doctor extra|vpackctl: doctor: unexpected argument 'extra' (see 'vpackctl doctor --help')
doctor --root|vpackctl: doctor: option '--root' needs an argument
frobnicate|vpackctl: unknown command 'frobnicate' (see 'vpackctl --help')
EOF
run doctor --root ""
expect_rc "doctor --root ''" 2
expect_err "doctor --root ''" "vpackctl: doctor: --root needs a directory"

run status --socket ""
expect_rc "status --socket ''" 2
expect_err "status --socket ''" "vpackctl: status: --socket needs a path"
run wait --for packed --socket ""
expect_rc "wait --socket ''" 2
expect_err "wait --socket ''" "vpackctl: wait: --socket needs a path"

# ---- measure: usage errors before anything is asked -----------------------
while IFS='|' read -r args want; do
    # shellcheck disable=SC2086 # args is split on purpose
    run measure $args --socket "$nosock"
    expect_rc "measure $args" 2
    expect_no_out "measure $args"
    expect_err "measure $args" "$want"
done <<'EOF2'
--minutes 3 --round-seconds 60|vpackctl: measure: --minutes 3 holds 2 rounds of 60 s: at least 4 are needed (two of each level) for an interval
--minutes 1 --round-seconds 10 --warmup-seconds 10|vpackctl: measure: --warmup-seconds 10 leaves nothing of a 10 s round
--minutes 600 --round-seconds 3590|vpackctl: measure: --round-seconds 3590: a round's hold may last at most 3570 s
--minutes 0|vpackctl: measure: --minutes '0': expected minutes, more than 0 and at most 10080
--minutes x|vpackctl: measure: --minutes 'x': expected minutes, more than 0 and at most 10080
--round-seconds -1|vpackctl: measure: --round-seconds '-1': expected seconds, more than 0 and at most 86400
--sample-seconds 0|vpackctl: measure: --sample-seconds '0': expected seconds, more than 0 and at most 86400
--bogus|vpackctl: measure: unknown option '--bogus'
EOF2
run measure --minutes 1 --round-seconds 10 --socket "$nosock"
expect_rc "measure (no agent)" 3
expect_err "measure (no agent)" "vpackctl: cannot reach vpackd at $nosock: No such file or directory"
# 5.4 rounds of 10 s make 4 (an even number): accepted, then no agent.
run measure --minutes 0.9 --round-seconds 10 --socket "$nosock"
expect_rc "measure 0.9 min of 10 s rounds (no agent)" 3

# ---- wait against a stand-in agent ----------------------------------------
# fake_agent NAME LINE...: a stand-in on $tmp/NAME.sock answering the k-th
# request of a connection with the k-th LINE (the last one repeated; CLOSE:
# close instead); what it saw goes to $tmp/NAME.log.
fake_agent() {
    local name=$1 ready=""
    shift
    printf '%s\n' "$@" >"$tmp/$name.answers"
    : >"$tmp/$name.log"
    mkfifo "$tmp/$name.ready"
    "$VP_PYTHON" "$here/fake-agent.py" "$tmp/$name.sock" "$tmp/$name.answers" \
        "$tmp/$name.log" >"$tmp/$name.ready" &
    fake_pids+=($!)
    read -r -t 10 ready <"$tmp/$name.ready" || true
    [ "$ready" = ready ] || vp_fail "fake agent $name did not start"
}
# The status answers: no plan yet, both packages active, package 1 parked,
# and two of three packages parked (a made-up host, for parked=N).
nopl='{"ok":true,"status":{"packages":[{"id":0,"state":"active"},{"id":1,"state":"active"}],"domains":[]}}'
sprd='{"ok":true,"status":{"reason":"spread","demand":1.2,"packages":[{"id":0,"state":"active"},{"id":1,"state":"active"}],"domains":[{"name":"web1","level":1}]}}'
pack='{"ok":true,"status":{"reason":"packed","demand":0.4,"packages":[{"id":0,"state":"active"},{"id":1,"state":"parked"}],"domains":[{"name":"web1","level":2},{"name":"a:b","level":0}]}}'
two='{"ok":true,"status":{"reason":"packed","demand":0.1,"packages":[{"id":0,"state":"active"},{"id":1,"state":"parked"},{"id":2,"state":"parked"}],"domains":[]}}'
if [ -x "$VP_PYTHON" ]; then
    # Packed on the third look: exit 0 with the state that met it, all on one connection.
    fake_agent steps "$nopl" "$sprd" "$pack"
    run wait --for packed --timeout 10 --socket "$tmp/steps.sock"
    expect_rc "wait packed (third look)" 0
    expect_out "wait packed (third look)" "packages 0 active, 1 parked; demand 0.40 CPUs"
    [ -z "$err" ] || vp_fail "wait packed (third look): unexpected stderr '$err'"
    [ "$(grep -c connect "$tmp/steps.log")" = 1 ] && [ "$(grep -c request "$tmp/steps.log")" = 3 ] ||
        vp_fail "wait packed (third look): expected 1 connection and 3 requests, saw $(sort "$tmp/steps.log" | uniq -c | tr -s ' \n' ' ')"
    # No plan yet: even "spread" does not hold (every package is active before it).
    fake_agent noplan "$nopl"
    run wait --for spread --timeout 0.5 --socket "$tmp/noplan.sock"
    expect_rc "wait spread (no plan yet)" 1
    expect_out "wait spread (no plan yet)" "packages 0 active, 1 active; no plan yet"
    expect_err "wait spread (no plan yet)" "vpackctl: wait: spread not reached within 0.5 s"
    # Timeout: exit 1, the last state on stdout, one line on stderr.
    fake_agent spread "$sprd"
    run wait --for packed --timeout 0.6 --socket "$tmp/spread.sock"
    expect_rc "wait packed (timeout)" 1
    expect_out "wait packed (timeout)" "packages 0 active, 1 active; demand 1.20 CPUs"
    expect_err "wait packed (timeout)" "vpackctl: wait: packed not reached within 0.6 s"
    n=$(grep -c request "$tmp/spread.log")
    [ "$n" -ge 2 ] && [ "$n" -le 6 ] || vp_fail "wait packed (timeout): $n looks in 0.6 s, expected 2 to 6 (one each 0.5 s)"
    # Each condition on each state, --timeout 0: one look.
    # measure refuses to start over another hold (another measure running).
    fake_agent held '{"ok":true,"status":{"packages":[{"id":0,"cpus":"0"}],"domains":[],"hold":{"level":0,"seconds_left":41.6}}}'
    run measure --minutes 1 --round-seconds 10 --socket "$tmp/held.sock"
    expect_rc "measure (a hold already)" 1
    expect_err "measure (a hold already)" \
        "vpackctl: measure: vpackd holds the levels already (another vpackctl measure?): its hold ends in 42 s"
    [ "$(grep -c request "$tmp/held.log")" = 1 ] ||
        vp_fail "measure (a hold already): asked more than status: $(grep -c request "$tmp/held.log") requests"
    fake_agent packed "$pack"
    fake_agent two "$two"
    while IFS='|' read -r sock cond want_rc want_out; do
        run wait --for "$cond" --timeout 0 --socket "$tmp/$sock.sock"
        expect_rc "wait $cond ($sock)" "$want_rc"
        expect_out "wait $cond ($sock)" "$want_out"
    done <<EOF2
spread|spread|0|packages 0 active, 1 active; demand 1.20 CPUs
spread|parked=0|0|packages 0 active, 1 active; demand 1.20 CPUs
spread|parked=1|1|packages 0 active, 1 active; demand 1.20 CPUs
spread|level=web1:1|0|domain web1 level 1
spread|level=web1:2|1|domain web1 level 1
spread|level=db1:0|1|domain db1 not reported by vpackd
packed|spread|1|packages 0 active, 1 parked; demand 0.40 CPUs
packed|parked=1|0|packages 0 active, 1 parked; demand 0.40 CPUs
packed|parked=2|1|packages 0 active, 1 parked; demand 0.40 CPUs
packed|level=web1:2|0|domain web1 level 2
packed|level=a:b:0|0|domain a:b level 0
two|packed|0|packages 0 active, 1 parked, 2 parked; demand 0.10 CPUs
two|parked=2|0|packages 0 active, 1 parked, 2 parked; demand 0.10 CPUs
two|parked=1|1|packages 0 active, 1 parked, 2 parked; demand 0.10 CPUs
EOF2
    # --json: the status object the condition was met on.
    run wait --for packed --json --timeout 0 --socket "$tmp/packed.sock"
    expect_rc "wait --json" 0
    case $out in
    '{"reason":"packed",'*'"state":"parked"'*) ;;
    *) vp_fail "wait --json: stdout '$out'" ;;
    esac
    # The agent drops the connection while we wait: 3, not a timeout.
    fake_agent drop "$sprd" CLOSE
    run wait --for packed --timeout 10 --socket "$tmp/drop.sock"
    expect_rc "wait (connection dropped)" 3
    expect_no_out "wait (connection dropped)"
    expect_err "wait (connection dropped)" \
        "vpackctl: cannot reach vpackd at $tmp/drop.sock: the agent closed the connection without answering"
    # The agent refuses: 1, with its reason.
    fake_agent refuse '{"ok":false,"error":"too many clients (64)"}'
    run wait --for packed --timeout 10 --socket "$tmp/refuse.sock"
    expect_rc "wait (refused)" 1
    expect_err "wait (refused)" "vpackctl: too many clients (64)"
fi

run
expect_rc "no command" 2
expect_no_out "no command"
case $err in
"Usage: vpackctl COMMAND"*) ;;
*) vp_fail "no command: stderr does not start with the usage: '$err'" ;;
esac

vp_verdict
