#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# vpackctl without an agent: exit codes and messages of the commands that
# talk to vpackd when nothing listens (3), of usage errors (2), of --help (0)
# and of 'version' (0: an agent that is away is not an error there). Needs no
# root, no libvirt and no vpackd. Prints "ok" on success.
#
#   VPACKCTL=build/ctl/vpackctl bash tests/integration/test-vpackctl-offline.sh
#   bash tests/integration/test-vpackctl-offline.sh build/ctl/vpackctl
#
# Without either, $VPACK_BUILDDIR/ctl/vpackctl is used.
set -euo pipefail

ctl=${1:-${VPACKCTL:-${VPACK_BUILDDIR:-}/ctl/vpackctl}}
[ -x "$ctl" ] || { echo "test-vpackctl-offline: no vpackctl at '$ctl' (set VPACKCTL)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nosock=$tmp/run/vpackd.sock          # its directory does not exist either
failures=0

fail() {
    echo "test-vpackctl-offline: FAIL: $*" >&2
    failures=$((failures + 1))
}

# run ARGS...: runs vpackctl with VPACK_SOCKET unset; sets rc, out, err.
run() {
    rc=0
    env -u VPACK_SOCKET "$ctl" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    out=$(cat "$tmp/out")
    err=$(cat "$tmp/err")
}

# expect WHAT RC: checks the exit code of the last run.
expect_rc() {
    [ "$rc" -eq "$2" ] || fail "$1: exit code $rc, expected $2 (stderr: '$err')"
}

# expect_err WHAT TEXT: stderr of the last run is one line that contains TEXT.
expect_err() {
    if [ -z "$err" ] || [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ]; then
        fail "$1: stderr is not one line: '$err'"
    fi
    case $err in
    *"$2"*) ;;
    *) fail "$1: stderr '$err' does not contain '$2'" ;;
    esac
}

expect_no_out() {
    [ -z "$out" ] || fail "$1: unexpected stdout: '$out'"
}

# ---- no agent: exit 3, one line naming the socket -----------------------
for cmd in "status" "status --json" "rebalance" "rebalance --dry-run" "rebalance --json" \
           "explain web1" "explain web1 --json"; do
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
if command -v python3 >/dev/null; then
    python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$tmp/stale.sock"
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
    fail "version (no agent): first line '$(printf '%s\n' "$out" | head -n1)'"
case $out in
*"vpackd not reachable at $nosock: No such file or directory"*) ;;
*) fail "version (no agent): stdout '$out' does not say vpackd is not reachable" ;;
esac
[ -z "$err" ] || fail "version (no agent): unexpected stderr '$err'"

run version --json --socket "$nosock"
expect_rc "version --json (no agent)" 0
case $out in
'{"vpackctl":"'*'","vpackd":null}') ;;
*) fail "version --json (no agent): stdout '$out'" ;;
esac

run --version
expect_rc "--version" 0
case $out in
"vpackctl "[0-9]*) ;;
*) fail "--version: stdout '$out'" ;;
esac

# ---- --help: usage on stdout, exit 0 --------------------------------------
for cmd in status rebalance explain version; do
    for h in --help -h; do
        run "$cmd" "$h"
        expect_rc "$cmd $h" 0
        case $out in
        "Usage: vpackctl $cmd"*) ;;
        *) fail "$cmd $h: stdout does not start with 'Usage: vpackctl $cmd': '$out'" ;;
        esac
        case $out in
        *--socket*) ;;
        *) fail "$cmd $h: usage does not mention --socket" ;;
        esac
        [ -z "$err" ] || fail "$cmd $h: unexpected stderr '$err'"
    done
done
# --help wins over the arguments, and needs no agent.
run explain --help --socket "$nosock"
expect_rc "explain --help --socket" 0
run --help
expect_rc "--help" 0
for cmd in status rebalance explain topology plan version; do
    case $out in
    *"  $cmd "*) ;;
    *) fail "--help: command '$cmd' missing from the list" ;;
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
frobnicate|vpackctl: unknown command 'frobnicate' (see 'vpackctl --help')
EOF

run status --socket ""
expect_rc "status --socket ''" 2
expect_err "status --socket ''" "vpackctl: status: --socket needs a path"

run
expect_rc "no command" 2
expect_no_out "no command"
case $err in
"Usage: vpackctl COMMAND"*) ;;
*) fail "no command: stderr does not start with the usage: '$err'" ;;
esac

if [ "$failures" -ne 0 ]; then
    echo "test-vpackctl-offline: $failures check(s) failed" >&2
    exit 1
fi
echo ok
