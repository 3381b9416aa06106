#!/bin/bash
# SPDX-License-Identifier: MIT
#
# hook-request.sh VPACK_HOOK DATA_DIR: vpack-hook's restore and migrate
# (issue 28) as libvirt runs them, the domain XML on stdin: each fixture of
# DATA_DIR/request printed with the guest's own pins (its .expected.xml),
# a domain without vpack's request passed through (nothing printed, exit
# 0), hostile request metadata refused (exit 1, one line on stderr,
# nothing on stdout), and no other operation writing to stdout.
set -euo pipefail
hook=${1:?usage: hook-request.sh VPACK_HOOK DATA_DIR}
data=${2:?usage: hook-request.sh VPACK_HOOK DATA_DIR}/request
work=$(mktemp -d /tmp/vpack-hook-request.XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# run OP SUBOP FILE: the hook's exit code in rc, its stdout and stderr in files.
run() {
    rc=0
    env -i PATH="$PATH" VPACK_SOCKET="$work/none.sock" "$hook" dom "$1" "$2" - \
        <"$3" >"$work/out" 2>"$work/err" || rc=$?
}

n=0
for f in "$data"/*.xml; do
    case $f in *.expected.xml) continue ;; esac
    for op in restore migrate; do
        run "$op" begin "$f"
        if [ "$rc" -eq 0 ] && cmp -s "$work/out" "${f%.xml}.expected.xml" && [ ! -s "$work/err" ]; then
            n=$((n + 1))
        else
            fail "$op begin $(basename "$f"): exit $rc, stdout differs from its .expected.xml" \
                 "or stderr: $(head -c 300 "$work/err")"
        fi
    done
done
if [ "$n" -ge 8 ]; then pass "$n fixtures rewritten to the guest's own pins by restore and migrate"
else fail "only $n fixture runs passed"; fi

# A domain without vpack's request: libvirt keeps its XML (empty output).
plain=$data/saved-no-pins.expected.xml
run restore begin "$plain"
if [ "$rc" -eq 0 ] && [ ! -s "$work/out" ]; then pass "no request: exit 0, nothing printed"
else fail "no request: exit $rc, stdout $(head -c 200 "$work/out")"; fi

# Hostile metadata: the restore is refused with one line.
sed 's|<vcpupin vcpu="1" cpuset="1"/>|<vcpupin vcpu="1" cpuset="1"/><vcpupin vcpu="9" cpuset="0"/>|' \
    "$data/saved-guest-pin.xml" >"$work/hostile.xml"
grep -q 'vcpu="9"' "$work/hostile.xml" || fail "could not build the hostile XML"
run migrate begin "$work/hostile.xml"
if [ "$rc" -eq 1 ] && [ ! -s "$work/out" ] && [ "$(wc -l <"$work/err")" -eq 1 ] &&
   grep -q "^vpack: domain 'acc-sr': vpack's request in <metadata> (urn:vpack:request:1): <vcpupin vcpu='9'>: the domain has 2 vCPUs$" "$work/err"; then
    pass "hostile request refused: $(cat "$work/err")"
else
    fail "hostile request: exit $rc, stdout $(wc -c <"$work/out") bytes, stderr: $(cat "$work/err")"
fi

# No other operation prints anything (libvirt reads stdout at restore and migrate only).
for opsub in "restore end" "migrate end" "started begin" "prepare begin" "release end"; do
    # shellcheck disable=SC2086
    run $opsub "$data/saved-guest-pin.xml"
    [ ! -s "$work/out" ] || fail "$opsub printed to stdout: $(head -c 200 "$work/out")"
done
pass "restore end, migrate end, started, prepare, release: nothing on stdout"

[ "$failures" -eq 0 ] && { echo ok; exit 0; }
echo "$failures failure(s)"; exit 1
