#!/bin/bash
# SPDX-License-Identifier: MIT
#
# contrib/: the Prometheus rules and configuration and the Grafana dashboard,
# checked with the real promtool, a real Prometheus server and the real
# vpackd, against a real libvirtd with one real QEMU (TCG) guest. Steps:
#
#   names       every vpack_* metric the rules and the dashboard use is one
#               lib/format/prom.c or its counters table (include/vpack/counters.h) renders
#               (histograms: _bucket, _sum, _count)
#   rules       `promtool check rules contrib/prometheus/vpack-alerts.yml`
#   config      `promtool check config` on a copy of
#               contrib/prometheus/prometheus.yml beside a copy of the rules
#   unit        `promtool test rules contrib/prometheus/vpack-alerts.test.yml`:
#               each alert fires on its series and not on the near misses
#   dashboard   contrib/grafana/vpack-dashboard.json parses
#               (python3 -m json.tool); its structure is sane (unique panel
#               ids, panels on the 24-column grid without overlap, every
#               panel and query on the ${DS_PROMETHEUS} datasource variable,
#               an "instance" variable, every $variable defined)
#   agent       vpackd ($VPACKD) on a synthetic two-package topology
#               (package:2 core:1 pu:1), metrics on a free port, scraped every
#               second by a Prometheus started with the contrib configuration
#               (only the target and the intervals changed); then one
#               level-2 guest (vpcon-a, 1 vCPU, busy 10% of the time)
#               starts, so that the agent places it while Prometheus watches
#               (a rebalance to annotate)
#   exposition  vpackd's /metrics has vpack_domain_level{domain="vpcon-a"} 2,
#               passes `promtool check metrics`, renders only those names
#               names, and lacks a family only where the host lacks its
#               source (energy without RAPL, idle-state residency without
#               cpuidle, the hardware families of a source that
#               vpack_hardware_source_available says vpackd does not read)
#   prometheus  rate() of vpcon-a's vCPU run-time counter
#               (vpack_vcpu_run_seconds_total) over 10 s is above 0 and at
#               most one CPU, and so is the whole domain's;
#               its 5 alerting rules load and evaluate without error
#               (VpackAgentDown and VpackLibvirtDisconnected inactive); every
#               "expr" of the dashboard, with the Grafana variables replaced
#               by concrete values and evaluated at one instant (the first
#               with a parked package: the guest's boot makes vpackd spread,
#               and it packs again about a minute later, its minimum
#               residency; at most 90 s of waiting), answers
#               /api/v1/query with status "success"; the result is non-empty
#               unless a metric family it needs is not exported on this host,
#               or its filter has nothing to pass at that instant (no parked
#               package, no non-shallow idle state, no vCPU run time), which
#               is checked and printed; the annotation is evaluated over the
#               run, as Grafana does, and shows the guest's placement; and the
#               answers agree with the agent's data (vpcon-a at level 2,
#               managed and placed, 2 packages and at least one active,
#               ratios between 0 and 1, joins that keep every row, about one
#               sampling cycle a second)
#   stop        Prometheus stopped; SIGTERM: vpackd exits 0
#
# Prints "ok" last; exits non-zero on the first failing step. Runs as root
# (libvirt, QEMU); installs what it misses (lib.sh's packages, prometheus,
# curl, python3). VPACKD (default $VPACK_BUILDDIR/agent/vpackd, build dir
# default build/), PROMETHEUS and PROMTOOL pick the binaries.
#
# The agent sees every domain of the libvirtd it connects to, including
# other tests' domains: the checks on domains look at vpcon-a, or compare
# the dashboard's answers with the agent's own series at the same instant.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
vp_test contrib vpcon-
top=$srcdir
PROMETHEUS=${PROMETHEUS:-prometheus}
PROMTOOL=${PROMTOOL:-promtool}
DOM=vpcon-a
rules=$top/contrib/prometheus/vpack-alerts.yml
config=$top/contrib/prometheus/prometheus.yml
unit=$top/contrib/prometheus/vpack-alerts.test.yml
dashboard=$top/contrib/grafana/vpack-dashboard.json
prom_pid=""
vp_need_built "$VPACKD"
vp_on_exit --early 'vp_stop_pid "$prom_pid"'

for f in "$rules" "$config" "$unit" "$dashboard"; do
    [ -f "$f" ] || vp_die "missing $f"
done
VP_PACKAGES+=(prometheus curl python3)
vp_install_deps
command -v "$PROMTOOL" >/dev/null || vp_die "no promtool binary ($PROMTOOL)"
command -v "$PROMETHEUS" >/dev/null || vp_die "no prometheus binary ($PROMETHEUS)"

# ------------------------------------------------------------------ names
# The names vpackd renders: lib/format/prom.c's, and the counters' table it renders
# them from (include/vpack/counters.h).
names="$top/lib/format/prom.c:$top/include/vpack/counters.h"
vp_log "names: metrics used by the rules and the dashboard exist in lib/format/prom.c or counters.h"
"$VP_PYTHON" - "$names" "$rules" "$dashboard" <<'EOF'
import re, sys
src = "".join(open(p).read() for p in sys.argv[1].split(":"))
known = set(re.findall(r'"(vpack_[a-z0-9_]+)"', src))
if not known:
    sys.exit("no metric names found in %s" % sys.argv[1])
hist = {n for n in known if re.search(r'histogram\([^;]*"%s"' % n, src, re.S)}
ok = set(known)
for h in hist:
    ok |= {h + "_bucket", h + "_sum", h + "_count"}
bad = []
for f in sys.argv[2:]:
    for name in sorted(set(re.findall(r'\bvpack_[a-z0-9_]+', open(f).read()))):
        if name not in ok:
            bad.append("%s: %s" % (f, name))
if bad:
    sys.exit("unknown metric names:\n  " + "\n  ".join(bad))
if not hist:
    sys.exit("no histogram families found in lib/format/prom.c")
EOF

# ------------------------------------------------------------------ rules
vp_log "rules: promtool check rules"
"$PROMTOOL" check rules "$rules" >"$work/check-rules.log" 2>&1 \
    || { cat "$work/check-rules.log"; vp_die "promtool check rules"; }
grep -q "SUCCESS: 5 rules found" "$work/check-rules.log" \
    || { cat "$work/check-rules.log"; vp_die "expected 5 rules"; }

# ----------------------------------------------------------------- config
# rule_files is relative to the configuration's directory: check copies.
vp_log "config: promtool check config"
mkdir -p "$work/etc"
cp "$config" "$rules" "$work/etc/"
"$PROMTOOL" check config "$work/etc/prometheus.yml" >"$work/check-config.log" 2>&1 \
    || { cat "$work/check-config.log"; vp_die "promtool check config"; }
grep -q "SUCCESS: 1 rule files found" "$work/check-config.log" \
    || { cat "$work/check-config.log"; vp_die "the configuration does not load the rule file"; }

# ------------------------------------------------------------------- unit
vp_log "unit: promtool test rules"
(cd "$(dirname "$unit")" && "$PROMTOOL" test rules "$(basename "$unit")") >"$work/unit.log" 2>&1 \
    || { cat "$work/unit.log"; vp_die "promtool test rules"; }

# -------------------------------------------------------------- dashboard
vp_log "dashboard: JSON and structure"
"$VP_PYTHON" -m json.tool "$dashboard" >/dev/null || vp_die "dashboard is not valid JSON"
"$VP_PYTHON" - "$dashboard" <<'EOF'
import json, re, sys
d = json.load(open(sys.argv[1]))
err = []
def need(cond, msg):
    if not cond:
        err.append(msg)

need(d.get("schemaVersion", 0) >= 36, "schemaVersion < 36")
need(d.get("uid") and d.get("title"), "uid and title")
tv = {v["name"]: v for v in d.get("templating", {}).get("list", [])}
ds = tv.get("DS_PROMETHEUS")
need(ds and ds.get("type") == "datasource" and ds.get("query") == "prometheus",
     "no datasource variable DS_PROMETHEUS of type prometheus")
need("instance" in tv and tv["instance"].get("type") == "query", "no instance query variable")
builtin = {"__rate_interval", "__interval", "__range", "__interval_ms", "__range_s", "__range_ms"}

def want_ds(where, o):
    x = o.get("datasource")
    need(isinstance(x, dict) and x.get("uid") == "${DS_PROMETHEUS}" and x.get("type") == "prometheus",
         "%s: datasource is not ${DS_PROMETHEUS}: %r" % (where, x))

def vars_ok(where, s):
    for m in re.finditer(r'\$(?:\{(\w+)(?::\w+)?\}|(\w+))', s):
        n = m.group(1) or m.group(2)
        need(n in tv or n in builtin, "%s: undefined variable $%s" % (where, n))

ids, cells, nexpr = set(), {}, 0
panels = []
for p in d["panels"]:
    panels.append(p)
    panels.extend(p.get("panels", []))
for p in panels:
    where = "panel %r" % p.get("title")
    need(isinstance(p.get("id"), int) and p["id"] not in ids, where + ": id missing or repeated")
    ids.add(p.get("id"))
    g = p.get("gridPos", {})
    need(all(isinstance(g.get(k), int) for k in "hwxy") and g["x"] >= 0 and g["w"] > 0
         and g["x"] + g["w"] <= 24, where + ": bad gridPos %r" % g)
    if err:
        continue
    for x in range(g["x"], g["x"] + g["w"]):
        for y in range(g["y"], g["y"] + g["h"]):
            need((x, y) not in cells, "%s overlaps %s" % (where, cells.get((x, y))))
            cells[(x, y)] = where
    if p["type"] == "row":
        continue
    need(p.get("title"), "panel %d without title" % p["id"])
    want_ds(where, p)
    refs = [t.get("refId") for t in p.get("targets", [])]
    need(refs and len(refs) == len(set(refs)), where + ": no targets or repeated refId")
    for t in p.get("targets", []):
        want_ds(where, t)
        need(t.get("expr"), where + ": target without expr")
        vars_ok(where, t.get("expr", ""))
        nexpr += 1
for a in d.get("annotations", {}).get("list", []):
    if "expr" in a:
        want_ds("annotation %r" % a.get("name"), a)
        vars_ok("annotation %r" % a.get("name"), a["expr"])
        nexpr += 1
need(nexpr >= 20, "only %d queries" % nexpr)
if err:
    sys.exit("dashboard:\n  " + "\n  ".join(err))
EOF

# ------------------------------------------------------------------ agent
vp_start_libvirtd
vp_build_guest
vp_destroy_all_test_domains

port=$(vp_free_port)
metrics_url=http://127.0.0.1:$port/metrics
vp_log "agent: starting $VPACKD (metrics on 127.0.0.1:$port)"
vp_start_agent --ready=socket -- --topology 'synthetic:"package:2 core:1 pu:1"' \
    --set agent.state_dir="$work/state" --set control.socket="$sock" \
    --set metrics.port="$port" --set policy.min_residency_ms=5000
vp_wait_until 15 curl -sf -o /dev/null "$metrics_url" || vp_die "vpackd does not answer on $metrics_url"
version=$("$VPACKD" --version | awk '{print $2}')

# The contrib configuration, scraping vpackd every second.
prom_port=$(vp_free_port)
mkdir -p "$work/run"
cp "$rules" "$work/run/"
sed -e "s/127\.0\.0\.1:9477/127.0.0.1:$port/" \
    -e 's/scrape_interval: 15s/scrape_interval: 1s/' \
    -e 's/evaluation_interval: 15s/evaluation_interval: 1s/' \
    -e 's/scrape_timeout: 5s/scrape_timeout: 1s/' \
    "$config" >"$work/run/prometheus.yml"
grep -q "127.0.0.1:$port" "$work/run/prometheus.yml" || vp_die "cannot point the configuration at vpackd"
! grep -q '15s' "$work/run/prometheus.yml" || vp_die "intervals left at 15s in the test configuration"

vp_log "agent: Prometheus on 127.0.0.1:$prom_port scraping it"
"$PROMETHEUS" --config.file="$work/run/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
prom_pid=$!
api=http://127.0.0.1:$prom_port
ready=""
for _ in $(seq 150); do
    kill -0 "$prom_pid" 2>/dev/null || vp_die "prometheus exited"
    if curl -fsS "$api/-/ready" >/dev/null 2>&1; then ready=1; break; fi
    sleep 0.2
done
[ -n "$ready" ] || vp_die "prometheus not ready within 30 s"
t_start=$(date +%s.%N)

# instant QUERY: number of series in the answer (0 on any error); polled, so
# counted without an interpreter.
prom_count() {
    vp_prom_series "$(curl -fsS --get "$api/api/v1/query" --data-urlencode "query=$1" 2>/dev/null)"
}
# Prometheus must have the rebalance counters before the guest starts, so
# that placing the guest shows as an increase.
scraped_twice() { [ "$(prom_count 'count_over_time(vpack_rebalances_total[1m]) >= 2')" -gt 0 ]; }
vp_wait_until 30 scraped_twice || vp_die "prometheus did not scrape vpackd"

vp_log "agent: starting $DOM (1 vCPU, busy 10% of the time, level 2)"
vp_define_start "$DOM" 1 duty:10 "" "<vpack:powerpolicy xmlns:vpack='$NS' level='2'/>"
vp_wait_ready "$DOM" || vp_die "$DOM did not boot"

# ------------------------------------------------------------- exposition
vp_log "exposition: vpackd's /metrics"
level_line="vpack_domain_level{domain=\"$DOM\"} 2"
# Placed, and read once since (a domain's threads are read from the interval
# after the one that placed it: its vCPU families come then).
placed() {
    curl -sf "$metrics_url" -o "$work/metrics.prom" &&
        grep -qxF "$level_line" "$work/metrics.prom" &&
        grep -q "^vpack_domain_package{domain=\"$DOM\",package=\"[01]\"} 1\$" "$work/metrics.prom" &&
        grep -q "^vpack_vcpu_run_seconds_total{domain=\"$DOM\"" "$work/metrics.prom"
}
vp_wait_until 20 placed || { grep '^vpack_domain' "$work/metrics.prom" >&2 || true
                          vp_die "vpackd does not report $DOM at level 2 on a package, read"; }
"$PROMTOOL" check metrics <"$work/metrics.prom" >"$work/check-metrics.log" 2>&1 \
    || { cat "$work/check-metrics.log"; vp_die "vpackd's exposition fails promtool check metrics"; }
# Families vpackd renders here: all the names of lib/format/prom.c and counters.h,
# except those whose source this host lacks. Writes the exported family
# names to families.txt.
"$VP_PYTHON" - "$names" "$work/metrics.prom" "$work/families.txt" <<'EOF'
import glob, re, sys
known = set(re.findall(r'"((?:vpack|process)_[a-z0-9_]+)"',
                       "".join(open(p).read() for p in sys.argv[1].split(":"))))
fams = set(re.findall(r'^# TYPE (\S+)', open(sys.argv[2]).read(), re.M))
if fams - known:
    sys.exit("vpackd renders families lib/format/prom.c and counters.h do not name: %s"
             % sorted(fams - known))
rapl = bool(glob.glob("/sys/class/powercap/intel-rapl:[0-9]*"))
cpuidle = bool(glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*/time"))
why = {"vpack_package_energy_joules_total":
           (rapl, "no RAPL on this host (no /sys/class/powercap/intel-rapl:*)"),
       "vpack_cpu_idle_state_residency_seconds_total":
           (cpuidle, "no cpuidle on this host (no /sys/devices/system/cpu/cpu*/cpuidle)")}
# Issue 26's hardware families: vpackd says itself which sources it reads
# (vpack_hardware_source_available); a family of a source it does not read
# is absent, and C-state residency is in seconds or in TSC cycles, not both.
text = open(sys.argv[2]).read()
gauge = dict(re.findall(r'^vpack_hardware_source_available\{source="(\w+)"\} (\d)', text, re.M))
hw = {"vpack_dram_energy_joules_total": "rapl_dram",
      "vpack_platform_energy_joules_total": "rapl_psys",
      "vpack_package_cstate_residency_seconds_total": "cstate_pkg",
      "vpack_package_cstate_residency_tsc_cycles_total": "cstate_pkg",
      "vpack_core_cstate_residency_seconds_total": "cstate_core",
      "vpack_core_cstate_residency_tsc_cycles_total": "cstate_core"}
for f in known:
    if f.startswith("vpack_uncore_frequency_"):
        hw[f] = "uncore_frequency"
for f, counter in hw.items():
    twin = (f.replace("_seconds_total", "_tsc_cycles_total") if "_seconds_total" in f
            else f.replace("_tsc_cycles_total", "_seconds_total"))
    if gauge.get(counter) != "1":
        why[f] = (False, "vpackd reads no %s here (vpack_hardware_source_available)" % counter)
    elif twin != f and twin in fams:
        why[f] = (False, "exported as %s" % twin)
    elif counter == "uncore_frequency" and fams & {g for g in hw if hw[g] == counter}:
        why[f] = (False, "this uncore driver has no such attribute")
bad = []
for f in sorted(known - fams):
    have_source, reason = why.get(f, (True, None))
    if have_source:
        bad.append(f)
    else:
        print("[test-contrib]   not exported: %s: %s" % (f, reason), file=sys.stderr)
if bad:
    sys.exit("vpackd does not export %s" % bad)
with open(sys.argv[3], "w") as out:
    out.write("\n".join(sorted(fams)) + "\n")
print("[test-contrib]   %d of %d families exported, %d samples"
      % (len(fams), len(known), len(re.findall(r'^vpack_', open(sys.argv[2]).read(), re.M))),
      file=sys.stderr)
EOF

# ------------------------------------------------------------- prometheus
vp_log "prometheus: $level_line scraped, 10 s of samples"
in_prom() {
    [ "$(prom_count "vpack_domain_level{domain=\"$DOM\"} == 2")" = 1 ] &&
        [ "$(prom_count 'count_over_time(vpack_samples_total[1m]) >= 10')" -gt 0 ]
}
vp_wait_until 30 in_prom || vp_die "Prometheus does not have $DOM at level 2 (or too few scrapes)"

# The guest's vCPU runs 10% of the time: the rate of its run-time counter is
# above 0 (and at most one CPU, with rate()'s slack), and so is the rate of
# the whole domain's, emulator included.
vp_log "prometheus: rate() of $DOM's thread counters"
prom_value() {
    local o re='"value":\[[^],]*,"([^"]*)"\]'
    o=$(curl -fsS --get "$api/api/v1/query" --data-urlencode "query=$1" 2>/dev/null) || o=""
    [ "$(vp_prom_series "$o")" = 1 ] && [[ $o =~ $re ]] && echo "${BASH_REMATCH[1]}"
    return 0
}
vcpu_rate="rate(vpack_vcpu_run_seconds_total{domain=\"$DOM\",class=\"vcpu\",id=\"0\"}[10s])"
dom_rate="sum(rate(vpack_vcpu_run_seconds_total{domain=\"$DOM\"}[10s]))"
rate_positive() { awk -v r="$(prom_value "$vcpu_rate")" 'BEGIN {exit !(r > 0 && r <= 1.25)}'; }
vp_wait_until 20 rate_positive ||
    vp_die "$vcpu_rate = '$(prom_value "$vcpu_rate")', want above 0 for a busy guest"
vp_log "  $vcpu_rate = $(prom_value "$vcpu_rate"); $dom_rate = $(prom_value "$dom_rate");" \
    "vCPU 0 waited $(prom_value "rate(vpack_vcpu_wait_seconds_total{domain=\"$DOM\",class=\"vcpu\",id=\"0\"}[10s])") s/s"
awk -v r="$(prom_value "$dom_rate")" 'BEGIN {exit !(r > 0)}' || vp_die "$dom_rate is not above 0"

vp_log "prometheus: alerting rules loaded and healthy"
"$VP_PYTHON" - "$api" <<'EOF'
import json, sys, time, urllib.request
api = sys.argv[1]
want = {"VpackAgentDown", "VpackLibvirtDisconnected", "VpackPackagesSpreadForLong",
        "VpackPinFailures", "VpackRunQueueDelayHigh"}
# With vpackd up and connected these two have nothing to fire on.
quiet = {"VpackAgentDown", "VpackLibvirtDisconnected"}
deadline = time.time() + 20
while True:
    d = json.load(urllib.request.urlopen(api + "/api/v1/rules?type=alert"))
    rules = {r["name"]: r for g in d["data"]["groups"] for r in g["rules"]}
    bad = [(n, r.get("health"), r.get("lastError")) for n, r in rules.items() if r.get("health") != "ok"]
    loud = [(n, rules[n].get("state")) for n in sorted(quiet & set(rules))
            if rules[n].get("state") != "inactive"]
    if set(rules) == want and not bad and not loud:
        break
    if time.time() > deadline:
        sys.exit("rules: loaded %s, unhealthy %s, not inactive %s" % (sorted(rules), bad, loud))
    time.sleep(0.5)
EOF

# The dashboard's "Rebalances" annotation must show an event of this run.
# Placing the guest is one, but it may fall where Prometheus cannot see an
# increase (the guest's boot can make vpackd spread, lifting every pin, and
# the one rebalance is then the first sample of a series): make one that
# cannot be missed. Once a package is parked, switching the domain to level
# 0 and back moves its threads twice, each a rebalance.
vp_log "prometheus: a rebalance for the annotation (level 2 -> 0 -> 2 while packed)"
parked_now() { [ "$(prom_count 'vpack_package_active == 0')" -gt 0 ]; }
vp_wait_until 90 parked_now || vp_log "no package parked after 90 s (other load on the host?); going on"
rebalances() { curl -sf "$metrics_url" | awk '/^vpack_rebalances_total\{/ {s += $2} END {print s + 0}'; }
more_rebalances() { [ "$(rebalances)" -gt "$1" ]; }
in_prom_rebalances() {
    [ "$(prom_count "sum(vpack_rebalances_total) > $1")" -gt 0 ]
}
r0=$(rebalances)
vp_virsh metadata "$DOM" --uri "$NS" --key vpack --set '<powerpolicy level="0"/>' --live >/dev/null
vp_wait_until 10 more_rebalances "$r0" || vp_log "no rebalance counted after the switch to level 0"
sleep 2
vp_virsh metadata "$DOM" --uri "$NS" --key vpack --set '<powerpolicy level="2"/>' --live >/dev/null
vp_wait_until 10 more_rebalances "$((r0 + 1))" || vp_log "no rebalance counted after the switch back to level 2"
vp_wait_until 10 in_prom_rebalances "$r0" || vp_log "Prometheus has not scraped the new rebalances"
# The queries below are evaluated a second in the past: level 2 for the last
# 3 s of samples.
level_back() { [ "$(prom_count "min_over_time(vpack_domain_level{domain=\"$DOM\"}[3s]) == 2")" = 1 ]; }
vp_wait_until 10 level_back || vp_die "Prometheus does not see $DOM back at level 2"

vp_log "prometheus: every dashboard query succeeds; answers match the agent's data"
"$VP_PYTHON" - "$api" "$dashboard" "$work/families.txt" "$DOM" "$version" "$t_start" "$work/vpackd.log" <<'EOF'
import collections, json, math, re, sys, time, urllib.error, urllib.parse, urllib.request
api, path, famfile, DOM, VERSION = sys.argv[1:6]
t_start = float(sys.argv[6])
agent_log = sys.argv[7]
d = json.load(open(path))
exported = set(open(famfile).read().split())
# Windows as Grafana would pick them for a 1 s scrape (rate over a window
# longer than the data would divide a few seconds' increase by it).
values = {"__rate_interval": "8s", "__interval": "8s", "__range": "1h",
          "__interval_ms": "8000", "__range_s": "3600", "__range_ms": "3600000"}
for v in d["templating"]["list"]:
    if v["type"] in ("textbox", "custom", "constant"):
        values[v["name"]] = v.get("current", {}).get("value") or v.get("query", "")
    elif v["type"] == "query":
        values[v["name"]] = v.get("allValue") or ".*"
    elif v["type"] == "datasource":
        values[v["name"]] = "prometheus"

def subst(expr):
    return re.sub(r'\$(?:\{(\w+)(?::\w+)?\}|(\w+))', lambda m: values[m.group(1) or m.group(2)], expr)

def get(endpoint, **params):
    url = api + endpoint + "?" + urllib.parse.urlencode(params)
    try:
        return json.load(urllib.request.urlopen(url))
    except urllib.error.HTTPError as e:
        return json.load(e)

def q(expr, t):
    r = get("/api/v1/query", query=expr, time="%.3f" % t)
    if r.get("status") != "success":
        sys.exit("query failed: %s: %s" % (expr, r.get("error")))
    return r["data"]["result"]

exprs = []
def walk(o, where):
    if isinstance(o, dict):
        title = o.get("title") or o.get("name") or where
        for k, v in o.items():
            if k == "expr" and isinstance(v, str):
                exprs.append((title, o.get("refId", "A"), v))
            else:
                walk(v, title)
    elif isinstance(o, list):
        for x in o:
            walk(x, where)
walk(d, "dashboard")
annotations = {a["expr"] for a in d.get("annotations", {}).get("list", []) if "expr" in a}

def families(expr):
    out = set()
    for n in re.findall(r'\bvpack_[a-z0-9_]+', expr):
        base = re.sub(r'_(bucket|sum|count)$', '', n)
        out.add(base if base != n and base in exported else n)
    return out

# A query whose families are all exported must answer something, unless its
# filter has nothing to pass at that instant: the precondition (evaluated at
# the same instant) being empty proves that.
shallow = values["shallow_states"]
may_be_empty = {
    ("Idle CPUs on parked packages", "A"):
        ('vpack_package_active == 0', "no package parked at that instant"),
    ("Deep idle-state residency per CPU", "A"):
        ('vpack_cpu_idle_state_residency_seconds_total{state!~"%s"}' % shallow,
         "every idle state of this host matches shallow_states"),
    ("Energy per vCPU-second of guest run time", "A"):
        ('sum(rate(vpack_vcpu_run_seconds_total{class="vcpu"}[8s])) > 0', "no vCPU run time in the window"),
}

# Pick the instant: one where a package is parked. The guest's boot usually
# made vpackd spread (and lift its pins); it packs again once the load has
# stayed low for pack_delay_ms and the domain's minimum residency (60 s) is
# over. Other tests' guests on this host may keep both packages awake: after
# 90 s the queries run anyway, and an empty "parked" panel is explained.
def last_plan():
    plans = [l.strip() for l in open(agent_log) if "plan: " in l]
    return plans[-1].split("plan: ", 1)[1] if plans else "no plan logged"
waited = time.time()
if not q('vpack_package_active == 0', time.time() - 1):
    print("[test-contrib]   waiting (up to 90 s) for a parked package; vpackd's last plan: %s"
          % last_plan(), file=sys.stderr)
deadline = time.time() + 90
while True:
    t = time.time() - 1
    if q('vpack_package_active == 0', t) or time.time() > deadline:
        break
    time.sleep(1)
print("[test-contrib]   evaluating at %s (+%.0f s), %s; vpackd's last plan: %s"
      % (time.strftime("%H:%M:%S", time.localtime(t)), t + 1 - waited,
         "a package parked" if q('vpack_package_active == 0', t) else "no package parked",
         last_plan()), file=sys.stderr)

def by(res, *labels):
    return {tuple(r["metric"].get(l) for l in labels): float(r["value"][1]) for r in res}
def vals(res):
    return [float(r["value"][1]) for r in res]
def within(res, lo, hi):
    return all(math.isfinite(v) and lo <= v <= hi for v in vals(res))
def one(res):
    assert len(res) == 1, "expected one series, got %d" % len(res)
    return float(res[0]["value"][1])
def level_str(v):
    return str(int(v)) if v == int(v) else repr(v)

PK = {("0",), ("1",)}          # package:2 core:1 pu:1
ONE_CPU = 1.25                 # idle seconds per second of one CPU, with rate()'s slack

def raw(expr):
    return q(expr, t)

# Checks of the answers against the agent's data at the same instant. Each
# returns a message when the answer is wrong.
def c_active_packages(r, R):
    n = one(r)
    if not (1 <= n <= 2): return "active packages %g, want 1 or 2" % n
def c_packages(r, R):
    if one(r) != 2: return "%g packages, want 2" % one(r)
def c_active_vs_parked_a(r, R):
    if one(r) != one(R[("Active packages", "A")]): return "sum of vpack_package_active != vpack_active_packages"
def c_active_vs_parked_b(r, R):
    if one(r) + one(R[("Packages active vs parked", "A")]) != 2: return "active + parked != 2"
def c_ratio01(r, R):
    if not within(r, 0, 1): return "a value outside 0..1"
def c_bool(r, R):
    if not all(v in (0, 1) for v in vals(r)): return "a value other than 0 or 1"
def c_one(r, R):
    if vals(r) != [1.0]: return "want [1]"
def c_nonneg(r, R):
    if not within(r, 0, math.inf): return "a negative or non-finite value"
def c_positive(r, R):
    if not all(math.isfinite(v) and v > 0 for v in vals(r)): return "a value <= 0 or non-finite"
def c_version(r, R):
    if [(x["metric"].get("version"), x["value"][1]) for x in r] != [(VERSION, "1")]:
        return "want version=%s value 1" % VERSION
def c_package_state(r, R):
    if set(by(r, "package")) != PK: return "packages %s" % sorted(by(r, "package"))
    if not all(v in (0, 1) for v in vals(r)): return "a value other than 0 or 1"
    if sum(vals(r)) != one(R[("Active packages", "A")]): return "active packages disagree"
def c_busy(r, R):
    if set(by(r, "package")) != PK: return "packages %s" % sorted(by(r, "package"))
    return c_ratio01(r, R)
def c_wakeup(r, R):
    if set(by(r, "package")) != PK: return "packages %s" % sorted(by(r, "package"))
    if not all(v in (0, 1) for v in vals(r)) or sum(vals(r)) > 1: return "more than one wake-up package"
def c_idle_parked(r, R):
    parked = {(x["metric"]["package"],) for x in raw('vpack_package_active == 0')}
    if set(by(r, "package")) != parked: return "packages %s, parked %s" % (sorted(by(r, "package")), sorted(parked))
    if not within(r, 0, ONE_CPU): return "more idle time than one CPU has"
def c_idle_all(r, R):
    if set(by(r, "package")) != PK: return "packages %s" % sorted(by(r, "package"))
    if not within(r, 0, ONE_CPU): return "more idle time than one CPU has"
def c_deep(r, R):
    cpus = {(x["metric"]["cpu"],) for x in raw('vpack_cpu_idle_state_residency_seconds_total{state!~"%s"}' % shallow)}
    if set(by(r, "cpu")) != cpus: return "CPUs %s, want %s" % (sorted(by(r, "cpu")), sorted(cpus))
    if not within(r, 0, ONE_CPU): return "a CPU idle more than all the time"
def c_by_state(r, R):
    states = {(x["metric"]["state"],) for x in raw('vpack_cpu_idle_state_residency_seconds_total')}
    if set(by(r, "state")) != states: return "states %s, want %s" % (sorted(by(r, "state")), sorted(states))
    if not within(r, 0, ONE_CPU): return "a state resident more than all the time"
def c_topk(r, R):
    n = len(raw('vpack_vcpu_wait_seconds_total{class="vcpu"}'))
    if len(r) != min(10, n): return "%d rows of %d vCPUs" % (len(r), n)
    if (DOM, "0") not in by(r, "domain", "id") and n <= 10: return "no %s vCPU 0" % DOM
    return c_ratio01(r, R)
def c_worst(r, R):
    if (DOM,) not in by(r, "domain"): return "no %s" % DOM
    return c_ratio01(r, R)
def c_runtime(r, R):
    v = by(r, "domain").get((DOM,))
    if v is None or not (0 < v < 1.25): return "%s (1 vCPU busy 10%% of the time) at %s" % (DOM, v)
def c_demand_b(r, R):
    if one(r) != one(R[("Active packages", "A")]): return "disagrees with Active packages"
def c_reasons(r, R):
    if set(by(r, "reason")) != {("first",), ("pack",), ("spread",), ("other",)}:
        return "reasons %s" % sorted(by(r, "reason"))
    return c_nonneg(r, R)
def c_pins(r, R):
    want = {(x["metric"]["reason"], x["metric"]["result"]) for x in raw('vpack_pin_operations_total')}
    got = set(by(r, "reason", "result"))
    if got != want or ("plan", "ok") not in got: return "rows %s, series %s" % (sorted(got), sorted(want))
    return c_nonneg(r, R)
def c_quantiles(title):
    def c(r, R):
        p = [one(R[(title, k)]) for k in "ABC"]
        if not all(math.isfinite(x) and x > 0 for x in p) or not p[0] <= p[1] <= p[2]:
            return "p50, p90, p99 = %s" % p
    return c
def c_sampling(r, R):
    if not (0.5 <= one(r) <= 1.5): return "%g cycles/s, want about 1 (interval_ms 1000)" % one(r)
def c_dom_level(r, R):
    if by(r, "domain").get((DOM,)) != 2: return "%s level %s, want 2" % (DOM, by(r, "domain").get((DOM,)))
def c_dom_managed(r, R):
    if by(r, "domain").get((DOM,)) != 1: return "%s managed %s, want 1" % (DOM, by(r, "domain").get((DOM,)))
def c_dom_packages(r, R):
    v = by(r, "domain").get((DOM,))
    if v not in (1, 2): return "%s on %s packages, want 1 or 2" % (DOM, v)
def c_dom_delay(r, R):
    if (DOM,) not in by(r, "domain"): return "no %s" % DOM
    return c_ratio01(r, R)
def c_placement(r, R):
    levels = by(R[("Domains", "A")], "domain")
    rows = by(r, "domain", "package")
    series = {(x["metric"]["domain"], x["metric"]["package"]) for x in raw('vpack_domain_package')}
    if set(rows) != series: return "rows %s, vpack_domain_package %s" % (sorted(rows), sorted(series))
    wrong = [k for k, v in rows.items() if levels.get((k[0],)) != v]
    if wrong: return "rows whose value is not the domain's level: %s" % wrong
    mine = [k for k in rows if k[0] == DOM]
    if not mine or any((k[1],) not in PK for k in mine): return "%s rows %s" % (DOM, mine)
    if len(mine) != by(R[("Domains", "C")], "domain").get((DOM,)): return "disagrees with Domains C"
def c_per_level(r, R):
    want = collections.Counter(level_str(v) for v in vals(R[("Domains", "A")]))
    got = {k[0]: v for k, v in by(r, "level").items()}
    if got != dict(want): return "%s, want %s" % (got, dict(want))
    if got.get("2", 0) < 1: return "no domain at level 2"
def c_per_package(r, R):
    want = collections.Counter(x["metric"]["package"] for x in raw('vpack_domain_package'))
    got = {k[0]: v for k, v in by(r, "package").items()}
    if got != dict(want): return "%s, want %s" % (got, dict(want))
    if not any(k[0] == DOM for k in by(R[("Domain placement", "A")], "domain", "package")):
        return "no package holds %s" % DOM

expect = {
    ("Active packages", "A"): c_active_packages,
    ("Active packages", "B"): c_packages,
    ("Demand", "A"): c_nonneg,
    ("Restrictions lifted", "A"): c_bool,
    ("libvirt", "A"): c_one,
    ("Scrape", "A"): c_one,
    ("Version", "A"): c_version,
    ("Package state (active or parked)", "A"): c_package_state,
    ("Packages active vs parked", "A"): c_active_vs_parked_a,
    ("Packages active vs parked", "B"): c_active_vs_parked_b,
    ("Busy ratio per package", "A"): c_busy,
    ("Wake-up package", "A"): c_wakeup,
    ("Idle CPUs on parked packages", "A"): c_idle_parked,
    ("Idle CPUs per package (all)", "A"): c_idle_all,
    ("Deep idle-state residency per CPU", "A"): c_deep,
    ("Idle-state residency by state (average over CPUs)", "A"): c_by_state,
    ("Package power", "A"): c_positive,
    ("Host package power", "A"): c_positive,
    ("Energy per vCPU-second of guest run time", "A"): c_positive,
    ("Top 10 vCPUs by run-queue delay", "A"): c_topk,
    ("Worst vCPU delay per domain", "A"): c_worst,
    ("Guest vCPU run time per domain", "A"): c_runtime,
    ("Demand vs active packages", "A"): c_nonneg,
    ("Demand vs active packages", "B"): c_demand_b,
    ("Demand vs active packages", "C"): c_bool,
    ("Rebalances by reason", "A"): c_reasons,
    ("Pin operations by reason and result", "A"): c_pins,
    ("Plan duration", "C"): c_quantiles("Plan duration"),
    ("Plan duration", "D"): c_positive,
    ("Sample cycle duration", "C"): c_quantiles("Sample cycle duration"),
    ("Sample cycle duration", "D"): c_positive,
    ("Sampling, hotplug and cgroup repairs", "A"): c_sampling,
    ("Sampling, hotplug and cgroup repairs", "B"): c_nonneg,
    ("Sampling, hotplug and cgroup repairs", "C"): c_nonneg,
    ("libvirt connection and scrape", "A"): c_one,
    ("libvirt connection and scrape", "B"): c_one,
    ("libvirt connections opened", "A"): c_nonneg,
    ("Domains", "A"): c_dom_level,
    ("Domains", "B"): c_dom_managed,
    ("Domains", "C"): c_dom_packages,
    ("Domains", "D"): c_runtime,
    ("Domains", "E"): c_dom_delay,
    ("Domain placement", "A"): c_placement,
    ("Domains per level", "A"): c_per_level,
    ("Domains per package", "A"): c_per_package,
}

fails, empty, R = [], [], {}
for title, ref, expr in exprs:
    qs = subst(expr)
    r = get("/api/v1/query", query=qs, time="%.3f" % t)
    if r.get("status") != "success":
        fails.append("%s %s: %s\n    %s" % (title, ref, r.get("error"), qs))
        continue
    res = r["data"]["result"]
    if expr in annotations:
        # Grafana runs annotation queries over the dashboard's time range.
        rr = get("/api/v1/query_range", query=qs, start="%.3f" % t_start, end="%.3f" % t, step="1")
        if rr.get("status") != "success":
            fails.append("%s (range): %s\n    %s" % (title, rr.get("error"), qs))
        elif not rr["data"]["result"]:
            fails.append("%s: no event over the run although %s was placed\n    %s" % (title, DOM, qs))
        else:
            ev = sorted({x["metric"].get("reason") for x in rr["data"]["result"]})
            print("[test-contrib]   annotation %r over the run: %s" % (title, ", ".join(ev)), file=sys.stderr)
        continue
    R[(title, ref)] = res
    if res:
        continue
    missing = sorted(families(expr) - exported)
    if missing:
        empty.append("%s %s: %s not exported on this host" % (title, ref, ", ".join(missing)))
    elif (title, ref) in may_be_empty and not q(subst(may_be_empty[(title, ref)][0]), t):
        empty.append("%s %s: %s" % (title, ref, may_be_empty[(title, ref)][1]))
    else:
        fails.append("%s %s: empty result although vpackd exports %s\n    %s"
                     % (title, ref, ", ".join(sorted(families(expr))), qs))

compared = 0
for key, check in expect.items():
    if key not in R:
        if not any(key == (t_, f) for t_, f, _ in exprs):
            fails.append("no query %s %s in the dashboard" % key)
        continue
    if not R[key]:
        continue
    compared += 1
    try:
        msg = check(R[key], R)
    except (AssertionError, KeyError) as e:
        msg = "%s: %s" % (type(e).__name__, e)
    if msg:
        fails.append("%s %s: %s: %s" % (key[0], key[1], msg, json.dumps(R[key])))
for e in empty:
    print("[test-contrib]   empty (allowed): %s" % e, file=sys.stderr)
print("[test-contrib] %d dashboard queries checked at one instant, %d empty (allowed), "
      "%d answers compared with the agent's data" % (len(exprs), len(empty), compared), file=sys.stderr)
if fails:
    sys.exit("dashboard queries:\n  " + "\n  ".join(fails))
EOF

# ------------------------------------------------------------------- stop
vp_log "stop: Prometheus, then SIGTERM to vpackd"
vp_stop_pid "$prom_pid"; prom_pid=""
kill -TERM "$agent_pid"
rc=0
wait "$agent_pid" || rc=$?
agent_pid=""
[ "$rc" -eq 0 ] || vp_die "vpackd exited $rc on SIGTERM"

echo ok
