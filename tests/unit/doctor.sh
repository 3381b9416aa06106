#!/bin/bash
# SPDX-License-Identifier: MIT
# vpackctl doctor, the real binary, on the fixture trees of tests/data/doctor
# (--root): its exit status (1 exactly when a finding cancels the saving,
# 0 with warnings only, 2 on a usage error), the finding each tree is made
# for in the text and in --json, and --json's keys.
# Usage: doctor.sh VPACKCTL TESTDATA
set -u
vpackctl=$1 trees=$2/doctor
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# run TREE WANT-EXIT CHECK SEVERITY: the exit status, and CHECK's SEVERITY in text and JSON.
run()
{
    local tree=$1 want=$2 check=$3 sev=$4 out rc
    out=$("$vpackctl" doctor --root "$trees/$tree")
    rc=$?
    [[ $rc -eq $want ]] || fail "$tree: exit $rc, want $want"
    grep -Eq "^$sev +$check " <<<"$out" || fail "$tree: no '$sev $check' line in:"$'\n'"$out"
    out=$("$vpackctl" doctor --json --root "$trees/$tree")
    rc=$?
    [[ $rc -eq $want ]] || fail "$tree --json: exit $rc, want $want"
    python3 -c "$json_check" "$check" "$sev" "$want" <<<"$out" || fail "$tree --json: $out"
    echo "ok: $tree: exit $want, $sev $check"
}

# The --json form: its keys, why null exactly for ok, and saving_cancelled
# true exactly with a cancel and exit 1.
json_check='
import json, sys
check, sev, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = json.load(sys.stdin)
assert set(d) == {"findings", "cancels", "warnings", "saving_cancelled"}, d.keys()
assert d["saving_cancelled"] == (want == 1) == (d["cancels"] > 0)
for f in d["findings"]:
    assert set(f) == {"check", "severity", "what", "why", "fix"}, f
    assert (f["why"] is None) == (f["severity"] == "ok"), f
assert any(f["check"] == check and f["severity"] == sev for f in d["findings"])
'

run clean 0 c-states ok
run no-driver 1 cpuidle-driver cancels
run c6-disabled 1 c-states cancels
run qos-hold 1 cpu-dma-latency cancels
run qos-hold 1 pm-qos-resume cancels
run tuned-latency 1 tuned cancels
run irq-pkg1 0 irq-affinity warning
run irq-pkg1 0 irqbalance warning
run clean 0 pc6-scope ok
run pc6-wide 0 pc6-scope warning

# Usage errors and a root that is not there.
"$vpackctl" doctor --bogus >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "doctor --bogus: want exit 2"
"$vpackctl" doctor extra >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "doctor extra: want exit 2"
err=$("$vpackctl" doctor --root /nonexistent-vpack 2>&1 >/dev/null)
[[ $? -eq 1 && $err == *"/nonexistent-vpack"* ]] || fail "doctor --root /nonexistent-vpack: '$err'"
[[ $("$vpackctl" doctor --help) == *"--root DIR"* ]] || fail "doctor --help has no --root DIR"

[[ $fails -eq 0 ]] || { echo "$fails failure(s)"; exit 1; }
echo "all passed"
