#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Power policy rules of vpackd.conf against a real libvirtd with real QEMU
# (TCG) guests, the topology override treating CPU 0 and CPU 1 as two
# packages. Four guests, none of them told about vpack by hand:
#
#   vprule-nova-1  Nova's metadata block exactly as Nova's tests have it
#                  (tests/data/fixtures/nova), no vpack element
#   vprule-web-1   no metadata; its name matches a rule's glob
#   vprule-own-1   Nova's block too, and its own vpack element at level 0:
#                  the own element wins over the matching rule (level 2)
#   vprule-none-1  nothing matches: the default level
#
# Phases:
#   config   vpackd --check-config names the file, line and key of a bad rule
#   rules    `vpackctl explain` (text and JSON) gives each its level and its
#            source; the two rule-given level-2 guests get packed onto one
#            package; the other two are never restricted
#   rewrite  the manager rewrites its metadata (virsh metadata --set in
#            Nova's namespace, another flavor): the rule stops matching and
#            the guest is given its full mask back, without a restart
#   sighup   new rules in the file and SIGHUP: every level follows
#            (rule -> other rule, rule -> rule at another level,
#            default -> rule), the newly level-2 guests get packed; a
#            broken file on SIGHUP changes nothing
#   stop     SIGTERM: everything unrestricted, vpackd exits 0
#
# VPACKD and VPACKCTL pick the binaries (default: $VPACK_BUILDDIR).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
vp_test rules vprule-
vp_need_cpus 2
NOVA_NS=http://openstack.org/xmlns/libvirt/nova/1.1
NOVA_BLOCK=$srcdir/tests/data/fixtures/nova/instance-flavor-extra-specs.xml
conf=$work/vpackd.conf
[ -r "$NOVA_BLOCK" ] || vp_die "missing $NOVA_BLOCK"


# write_conf RULES: the whole configuration file, with RULES at its end.
write_conf() {
    cat >"$conf" <<EOF
# vpackd.conf of test-rules.sh
[agent]
topology = synthetic:"package:2 core:1 pu:1"
state_dir = $work/state
log_level = debug

[policy]
pack_watermark = ${pack_wm:-0.9}
spread_watermark = ${spread_wm:-0.95}
pack_delay_ms = 3000
min_residency_ms = 5000

[control]
socket = $sock

[metrics]
enabled = false

$1
EOF
}

# The test asks the agent about the guests next (explain): libvirt connected.
start_agent() { vp_start_agent --ready=libvirt -- -c "$conf"; }

# explain_field NAME KEY: one key of `vpackctl explain --json` ("null" for
# null, "?" while the agent does not know the domain yet). Polled: read with
# shell built-ins (vp_json_field), no interpreter.
explain_field() {
    local json
    json=$("$VPACKCTL" explain "$1" --json --socket "$sock" 2>/dev/null) || { echo "?"; return 0; }
    vp_json_field "$json" "$2" || echo "?"
}

# level_is NAME LEVEL SOURCE RULE: explain says so (RULE "null" for none).
level_is() {
    local json
    json=$("$VPACKCTL" explain "$1" --json --socket "$sock" 2>/dev/null) || return 1
    [ "$(vp_json_field "$json" level)" = "$2" ] &&
        [ "$(vp_json_field "$json" level_source)" = "$3" ] &&
        [ "$(vp_json_field "$json" rule)" = "$4" ]
}

# expect_level NAME LEVEL SOURCE RULE WHEN: waits (a few intervals) for it.
expect_level() {
    local t
    if t=$(vp_wait_for 10 level_is "$1" "$2" "$3" "$4"); then
        vp_pass "$1: level $2 from $3${4:+ $4} ($5, after ${t}s)"
    else
        vp_fail "$1: level $(explain_field "$1" level) from $(explain_field "$1" level_source)" \
             "$(explain_field "$1" rule), expected $2 from $3 $4 ($5)"
    fi
}

vp_install_deps
[ -x "$VP_PYTHON" ] || vp_die "$VP_PYTHON is needed to read vpackctl's JSON"
vp_start_libvirtd
vp_build_guest
vp_destroy_all_test_domains

echo "== config"
write_conf '[rule "bad"]
name = vprule-*
level = 3'
rc=0; out=$("$VPACKD" -c "$conf" --check-config 2>&1) || rc=$?
line=$(grep -n '^level = 3' "$conf" | cut -d: -f1)
if [ $rc -ne 0 ] && grep -qF "$conf: line $line: rule \"bad\".level: '3' is not a power policy level" <<<"$out"; then
    vp_pass "a bad rule is refused with file, line and key: $out"
else
    vp_fail "bad rule: exit $rc, '$out' (wanted $conf: line $line: rule \"bad\".level)"
fi
write_conf '[rule "half"]
level = 2'
rc=0; out=$("$VPACKD" -c "$conf" --check-config 2>&1) || rc=$?
line=$(grep -n '^\[rule "half"\]' "$conf" | cut -d: -f1)
[ $rc -ne 0 ] && grep -qF "$conf: line $line: rule \"half\": no condition" <<<"$out" &&
    vp_pass "a rule without a condition is refused: $out" || vp_fail "rule without condition: exit $rc, '$out'"

echo "== guests"
nova_meta=$(cat "$NOVA_BLOCK")
own_meta="$nova_meta
<vpack:powerpolicy xmlns:vpack='$NS' level='0'/>"
vp_define_start vprule-nova-1 1 idle "" "$nova_meta"
vp_define_start vprule-web-1 1 idle
vp_define_start vprule-own-1 1 idle "" "$own_meta"
vp_define_start vprule-none-1 1 idle
for d in nova-1 web-1 own-1 none-1; do vp_wait_ready vprule-$d; done
# libvirt keeps Nova's block as Nova wrote it: the flavor is there, in Nova's namespace.
live=$(vp_virsh metadata vprule-nova-1 --uri "$NOVA_NS")
grep -q 'flavor name="m1.lowgravity"' <<<"$live" && vp_pass "libvirt kept Nova's block" ||
    vp_fail "Nova's block not in the live definition: $live"
vp_virsh dumpxml vprule-nova-1 | vp_has powerpolicy && vp_fail "vprule-nova-1 has a vpack element"
sleep 2   # the boots' tail
vp_domain_costs 5 vprule-nova-1 vprule-web-1 vprule-own-1 vprule-none-1 | sed 's/^/guest cost (CPUs): /'
# Packed, two idle guests share one 1-core package; the watermarks are 0.9
# and 0.95: the load must sit well under them.
vp_fit_watermarks 0.9 0.95 0.3 "the packed load must stay clear of the pack watermark"
pack_wm=${VP_WATERMARKS[1]#*=} spread_wm=${VP_WATERMARKS[3]#*=}

echo "== rules"
write_conf "[rule \"nova-lowgravity\"]
# The flavor, as Nova writes it: <nova:flavor name=\"m1.lowgravity\">
level = 2
metadata_namespace = $NOVA_NS
metadata_path = instance/flavor/@name
metadata_value = m1.low*

[rule \"web\"]
level = 2
name = vprule-web-*"
start_agent
expect_level vprule-nova-1 2 rule nova-lowgravity "Nova's flavor"
expect_level vprule-web-1 2 rule web "name glob"
expect_level vprule-own-1 0 domain null "own element over a matching rule"
expect_level vprule-none-1 0 default null "nothing matches"
txt=$("$VPACKCTL" explain vprule-nova-1 --socket "$sock")
grep -qx 'level *2 (rule "nova-lowgravity" in vpackd.conf)' <<<"$txt" &&
    vp_pass "explain's text names the rule" || vp_fail "explain's text: $(grep '^level' <<<"$txt")"
txt=$("$VPACKCTL" explain vprule-own-1 --socket "$sock")
grep -q "^level *0 (set in the domain's metadata)" <<<"$txt" &&
    vp_pass "explain's text: own element" || vp_fail "explain's text for own-1: $(grep '^level' <<<"$txt")"
st=$("$VPACKCTL" status --json --socket "$sock" | "$VP_PYTHON" -c "
import json, sys
for d in json.load(sys.stdin)['domains']:
    print(d['name'], d['level'], d['level_source'], d['rule'])" | sort)
grep -qx 'vprule-web-1 2 rule web' <<<"$st" && vp_pass "status JSON has the rule" ||
    vp_fail "status JSON: $st"
if t=$(vp_wait_for 20 vp_all_packed vprule-nova-1 vprule-web-1); then
    vp_pass "the two rule-given level-2 guests packed on CPU $(vp_packed_cpu vprule-nova-1 vprule-web-1) after ${t}s"
else
    vp_fail "not packed: nova-1 $(vp_pins vprule-nova-1), web-1 $(vp_pins vprule-web-1)"
fi
sleep 3
vp_all_on 0-1 vprule-own-1 vprule-none-1 && vp_pass "level-0 guests never restricted" ||
    vp_fail "level-0 guests restricted: own-1 $(vp_pins vprule-own-1), none-1 $(vp_pins vprule-none-1)"

echo "== rewrite"
# What a manager does to its own metadata (virDomainSetMetadata in its
# namespace): replaces the element. The flavor is now m1.large.
vp_virsh metadata vprule-nova-1 --uri "$NOVA_NS" --key nova --live \
    --set '<instance><flavor name="m1.large"/></instance>' >/dev/null
expect_level vprule-nova-1 0 default null "flavor rewritten live: no rule matches"
if t=$(vp_wait_for 5 vp_all_on 0-1 vprule-nova-1); then
    vp_pass "vprule-nova-1 given its full mask back after ${t}s"
else
    vp_fail "vprule-nova-1 still restricted: $(vp_pins vprule-nova-1)"
fi

echo "== sighup"
write_conf "[rule \"nova-large\"]
level = 2
metadata_namespace = $NOVA_NS
metadata_path = instance/flavor/@name
metadata_value = m1.large

[rule \"web\"]
level = 1
name = vprule-web-*

[rule \"nova-any\"]
level = 2
metadata_namespace = $NOVA_NS

[rule \"none\"]
level = 2
name = vprule-none-*"
kill -HUP "$agent_pid"
expect_level vprule-nova-1 2 rule nova-large "new rule after SIGHUP"
expect_level vprule-web-1 1 rule web "same rule, new level"
expect_level vprule-none-1 2 rule none "default -> rule"
expect_level vprule-own-1 0 domain null "own element over nova-any"
grep -q 'configuration reloaded (4 power policy rules)' "$work/vpackd.log" &&
    vp_pass "reload logged with 4 rules" || vp_fail "no reload line in the log"
if t=$(vp_wait_for 20 vp_all_packed vprule-nova-1 vprule-none-1); then
    vp_pass "the new level-2 guests packed after ${t}s"
else
    vp_fail "not packed after SIGHUP: nova-1 $(vp_pins vprule-nova-1), none-1 $(vp_pins vprule-none-1)"
fi
vp_all_on 0-1 vprule-own-1 && vp_pass "vprule-own-1 still unrestricted" ||
    vp_fail "vprule-own-1 restricted: $(vp_pins vprule-own-1)"
# A broken file: nothing changes, the agent says why and goes on.
write_conf '[rule "web"]
level = 0
name = vprule-web-*
metadata_path = flavor/@name'
kill -HUP "$agent_pid"
sleep 2
kill -0 "$agent_pid" && vp_pass "vpackd still running after a broken SIGHUP" || vp_fail "vpackd died"
grep -q "$conf: line .*metadata_path needs metadata_namespace" "$work/vpackd.log" &&
    vp_pass "the broken file's error is logged" || vp_fail "no error logged for the broken file"
level_is vprule-web-1 1 rule web && vp_pass "rules unchanged after a broken SIGHUP" ||
    vp_fail "vprule-web-1 changed after a broken SIGHUP: $(explain_field vprule-web-1 level)"

echo "== stop"
vp_stop_agent_check
for d in vprule-nova-1 vprule-web-1 vprule-own-1 vprule-none-1; do
    vp_released 0-1 "$d" && vp_pass "$d unrestricted after stop" || vp_fail "$d left: $VP_RELEASED_WHY"
done

echo
vp_verdict
