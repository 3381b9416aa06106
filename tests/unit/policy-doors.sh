#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# One rule, every door: a policy whose pack watermark is above its spread
# watermark is refused with the same sentence by vpackd (the file, --set,
# --check-config), vpackctl simulate (--config, --set) and vpackctl plan
# (--pack-watermark, --set); a consistent one is taken by each. The check is
# vpack_policy_params_check() in lib/policy/policy.c and every door loads its
# settings with vpack_config_load() (lib/config.c); no door has its own. A bad
# value is refused with the same sentence too, from a file line or a --set
# (plan's policy options are short for --set). No libvirt, no agent started
# (vpackd --check-config exits after reading). Prints "ok".
#
#   bash tests/unit/policy-doors.sh build/agent/vpackd build/ctl/vpackctl
set -euo pipefail

vpackd=${1:?usage: policy-doors.sh VPACKD VPACKCTL}
ctl=${2:?usage: policy-doors.sh VPACKD VPACKCTL}
here=$(cd "$(dirname "$0")" && pwd)
data=$here/../data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
want="is above the spread watermark"

fail() {
    echo "policy-doors: FAIL: $*" >&2
    failures=$((failures + 1))
}

# door NAME WANT_RC COMMAND...: runs it; a refusal must exit WANT_RC and say
# $want (one line), an acceptance (WANT_RC 0) must exit 0 and not say it.
door() {
    local name=$1 want_rc=$2 rc=0 out
    shift 2
    out=$("$@" 2>&1 >/dev/null) || rc=$?
    if [ "$want_rc" -ne 0 ]; then
        [ "$rc" -eq "$want_rc" ] && grep -qF "$want" <<<"$out" && [ "$(wc -l <<<"$out")" -eq 1 ] ||
            fail "$name: exit $rc (wanted $want_rc), stderr '$out' (wanted '$want')"
    else
        [ "$rc" -eq 0 ] && ! grep -qF "$want" <<<"$out" ||
            fail "$name: exit $rc, stderr '$out' (wanted it taken)"
    fi
}

printf '[policy]\npack_watermark = 0.9\nspread_watermark = 0.8\n' >"$tmp/bad.conf"
printf '[policy]\npack_watermark = 0.7\nspread_watermark = 0.8\n' >"$tmp/good.conf"
: >"$tmp/empty.conf"

# vpackd: the file, --set on top of a good file, and --set that repairs a bad one.
door "vpackd file" 1 "$vpackd" -c "$tmp/bad.conf" --check-config
door "vpackd --set" 1 "$vpackd" -c "$tmp/empty.conf" --set policy.pack_watermark=0.85 --check-config
door "vpackd --set repairs the file" 0 "$vpackd" -c "$tmp/bad.conf" \
    --set policy.spread_watermark=0.95 --check-config
door "vpackd good file" 0 "$vpackd" -c "$tmp/good.conf" --check-config
# Equal watermarks are allowed (pack up to the point where it spreads).
door "vpackd equal" 0 "$vpackd" -c "$tmp/empty.conf" --set policy.pack_watermark=0.8 --check-config

# vpackctl simulate: the file (exit 1) and --set (exit 2).
sim=("$ctl" simulate --planetlab "$data/planetlab/20110303" --vms 2 --seed 1 --hours 0.02
     --topology 'synthetic:"package:2 core:2 pu:1"')
door "simulate --config" 1 "${sim[@]}" --config "$tmp/bad.conf"
door "simulate --set" 2 "${sim[@]}" --set policy.pack_watermark=0.85
door "simulate --set repairs the file" 0 "${sim[@]}" --config "$tmp/bad.conf" \
    --set policy.pack_watermark=0.5

# vpackctl plan: its policy options (short for --set) and --set, the same check.
snap=$data/snapshots/example.json
topo='synthetic:"package:2 core:2 pu:1"'
door "plan" 2 "$ctl" plan --snapshot "$snap" --topology "$topo" --pack-watermark 0.9 --spread-watermark 0.8
door "plan good" 0 "$ctl" plan --snapshot "$snap" --topology "$topo" --pack-watermark 0.7 --spread-watermark 0.8
door "plan --set" 2 "$ctl" plan --snapshot "$snap" --topology "$topo" --set policy.pack_watermark=0.85
door "plan --set repairs" 0 "$ctl" plan --snapshot "$snap" --topology "$topo" --pack-watermark 0.9 \
    --set policy.spread_watermark=0.95

# every_door WHAT LINE SETTING SENTENCE: a bad setting, as the file line LINE
# of [policy] and as --set policy.SETTING (plan: also its shorthand, where
# it has one), is refused at every door with SENTENCE.
plan=("$ctl" plan --snapshot "$snap" --topology "$topo")
every_door() {
    local what=$1 line=$2 setting=$3 short
    want=$4
    printf '[policy]\n%s\n' "$line" >"$tmp/one.conf"
    door "vpackd file: $what" 1 "$vpackd" -c "$tmp/one.conf" --check-config
    door "vpackd --set: $what" 1 "$vpackd" -c "$tmp/empty.conf" --set "policy.$setting" --check-config
    door "simulate --config: $what" 1 "${sim[@]}" --config "$tmp/one.conf"
    door "simulate --set: $what" 2 "${sim[@]}" --set "policy.$setting"
    door "plan --set: $what" 2 "${plan[@]}" --set "policy.$setting"
    short=${setting%%=*}
    short=--${short//_/-}
    "$ctl" plan --help | grep -- "^  $short " >/dev/null &&
        door "plan $short: $what" 2 "${plan[@]}" "$short" "${setting#*=}"
    return 0
}
every_door "bad value" "pack_watermark = 1.5" "pack_watermark=1.5" \
    "policy.pack_watermark: '1.5' is not a number from 0 to 1"
every_door "unknown key" "no_such = 1" "no_such=1" "policy.no_such: unknown key"
every_door "bad count" "spread_samples = 101" "spread_samples=101" \
    "policy.spread_samples: '101' is not a whole number from 1 to 100"

[ "$failures" -eq 0 ] || { echo "policy-doors: $failures failed" >&2; exit 1; }
echo ok
