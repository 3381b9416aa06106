#!/bin/bash
# SPDX-License-Identifier: MIT
#
# contrib/: the Prometheus rules and configuration and the Grafana dashboard,
# checked with the real promtool and a real Prometheus server. Steps:
#
#   names       every vpack_* metric the rules and the dashboard use is one
#               lib/prom.c renders (histograms: _bucket, _sum, _count)
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
#   prometheus  a fake vpackd (python3, serving a representative exposition
#               that passes `promtool check metrics`, counters moving) is
#               scraped every second by a Prometheus started with the
#               contrib configuration (only the target and the intervals
#               changed); its 5 alerting rules load and evaluate without
#               error; every "expr" of the dashboard, with the Grafana
#               variables replaced by concrete values, answers
#               /api/v1/query with status "success" and a non-empty result,
#               and a few answer what the fake's data implies (parked
#               package only, placement rows, deep-state shares, watts,
#               joules per vCPU-second, domains per level and package)
#
# Prints "ok" last; exits non-zero on the first failing step. Needs
# python3, curl, promtool and prometheus: when the last two are missing it
# installs Debian's `prometheus` package (as root). PROMETHEUS and PROMTOOL
# pick the binaries.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
PROMETHEUS=${PROMETHEUS:-prometheus}
PROMTOOL=${PROMTOOL:-promtool}
rules=$top/contrib/prometheus/vpack-alerts.yml
config=$top/contrib/prometheus/prometheus.yml
unit=$top/contrib/prometheus/vpack-alerts.test.yml
dashboard=$top/contrib/grafana/vpack-dashboard.json
work=$(mktemp -d /tmp/vpack-contrib-test.XXXXXX)
fake_pid=""
prom_pid=""

log() { printf '[test-contrib] %s\n' "$*" >&2; }
die() { printf '[test-contrib] FAIL: %s\n' "$*" >&2; exit 1; }

stop_pid() { # PID: SIGTERM, then SIGKILL after 5 s
    local pid=$1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    local rc=$?
    stop_pid "$prom_pid"
    stop_pid "$fake_pid"
    if [ $rc -ne 0 ]; then
        echo "---- prometheus log (last 20 lines)"; tail -n 20 "$work/prometheus.log" 2>/dev/null || true
        echo "---- fake vpackd log (last 10 lines)"; tail -n 10 "$work/fake.log" 2>/dev/null || true
    fi
    rm -rf "$work"
    exit $rc
}
trap cleanup EXIT

for f in "$rules" "$config" "$unit" "$dashboard"; do
    [ -f "$f" ] || die "missing $f"
done
command -v python3 >/dev/null || die "python3 is needed"
command -v curl >/dev/null || die "curl is needed"
if ! command -v "$PROMTOOL" >/dev/null || ! command -v "$PROMETHEUS" >/dev/null; then
    [ "$(id -u)" -eq 0 ] || die "promtool/prometheus missing and not root: apt-get install prometheus"
    log "installing prometheus (Debian package)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    # Its maintainer scripts may try to start a service; without systemd
    # that fails harmlessly or starts one on :9090, which this test does not use.
    apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1 || true
    if ! command -v "$PROMTOOL" >/dev/null || ! command -v "$PROMETHEUS" >/dev/null; then
        die "cannot install prometheus"
    fi
fi

# ------------------------------------------------------------------ names
log "names: metrics used by the rules and the dashboard exist in lib/prom.c"
python3 - "$top/lib/prom.c" "$rules" "$dashboard" <<'EOF'
import re, sys
src = open(sys.argv[1]).read()
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
    sys.exit("no histogram families found in lib/prom.c")
EOF

# ------------------------------------------------------------------ rules
log "rules: promtool check rules"
"$PROMTOOL" check rules "$rules" >"$work/check-rules.log" 2>&1 \
    || { cat "$work/check-rules.log"; die "promtool check rules"; }
grep -q "SUCCESS: 5 rules found" "$work/check-rules.log" \
    || { cat "$work/check-rules.log"; die "expected 5 rules"; }

# ----------------------------------------------------------------- config
# rule_files is relative to the configuration's directory: check copies.
log "config: promtool check config"
mkdir -p "$work/etc"
cp "$config" "$rules" "$work/etc/"
"$PROMTOOL" check config "$work/etc/prometheus.yml" >"$work/check-config.log" 2>&1 \
    || { cat "$work/check-config.log"; die "promtool check config"; }
grep -q "SUCCESS: 1 rule files found" "$work/check-config.log" \
    || { cat "$work/check-config.log"; die "the configuration does not load the rule file"; }

# ------------------------------------------------------------------- unit
log "unit: promtool test rules"
(cd "$(dirname "$unit")" && "$PROMTOOL" test rules "$(basename "$unit")") >"$work/unit.log" 2>&1 \
    || { cat "$work/unit.log"; die "promtool test rules"; }

# -------------------------------------------------------------- dashboard
log "dashboard: JSON and structure"
python3 -m json.tool "$dashboard" >/dev/null || die "dashboard is not valid JSON"
python3 - "$dashboard" <<'EOF'
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

# ------------------------------------------------------------- prometheus
# A fake vpackd: the families lib/prom.c renders, with labels as it writes
# them, for two packages (0 active, 1 parked), three domains and four CPUs;
# the counters grow with time so that rate() has something to show.
cat >"$work/fake.py" <<'EOF'
import http.server, math, sys, time
t0 = time.time()

def render():
    t = time.time() - t0
    n = int(t * 10)
    o = []
    def fam(name, typ, help_):
        o.append("# HELP %s %s\n# TYPE %s %s\n" % (name, help_, name, typ))
    def s(name, labels, v):
        lab = ",".join('%s="%s"' % kv for kv in labels)
        o.append("%s%s %s\n" % (name, "{%s}" % lab if lab else "", v))
    fam("vpack_build_info", "gauge", "vpackd's version; the value is always 1.")
    s("vpack_build_info", [("version", "0.1.0")], 1)
    fam("vpack_libvirt_connected", "gauge", "1 while connected.")
    s("vpack_libvirt_connected", [], 1)
    fam("vpack_libvirt_connects_total", "counter", "Connections opened.")
    s("vpack_libvirt_connects_total", [], 1 + n // 50)
    pk = [(0, 0.42, 1000 + 0.6 * t, 1, 1), (1, 0.03, 2000 + 1.9 * t, 0, 0)]
    for name, typ, i in (("vpack_package_busy_ratio", "gauge", 1),
                         ("vpack_package_idle_seconds_total", "counter", 2),
                         ("vpack_package_active", "gauge", 3),
                         ("vpack_package_wakeup", "gauge", 4)):
        fam(name, typ, "Per package.")
        for p in pk:
            s(name, [("package", str(p[0]))], p[i])
    fam("vpack_active_packages", "gauge", "Active packages.")
    s("vpack_active_packages", [], 1)
    fam("vpack_demand_cpus", "gauge", "Demand.")
    s("vpack_demand_cpus", [], 0.85)
    fam("vpack_restrictions_lifted", "gauge", "Lifted.")
    s("vpack_restrictions_lifted", [], 0)
    fam("vpack_cpu_idle_state_residency_seconds_total", "counter", "cpuidle residency.")
    for cpu in range(4):
        for st, share in (("C1", 0.1), ("C6", 0.5 if cpu >= 2 else 0.2), ("POLL", 0.01)):
            s("vpack_cpu_idle_state_residency_seconds_total", [("cpu", str(cpu)), ("state", st)],
              round(100 + share * t, 6))
    fam("vpack_package_energy_joules_total", "counter", "RAPL energy.")
    s("vpack_package_energy_joules_total", [("package", "0")], round(1e5 + 45 * t, 3))
    s("vpack_package_energy_joules_total", [("package", "1")], round(2e5 + 12 * t, 3))
    doms = [("db1", 1, 1, [0, 1], [(0, 0.3, 0.02), (1, 0.1, 0.0)]),
            ("plain", 0, 0, [], [(0, 0.05, 0.0)]),
            ("web1", 2, 1, [0], [(0, 0.8, 0.3), (1, 0.05, 0.01)])]
    fam("vpack_domain_level", "gauge", "Level.")
    for d in doms:
        s("vpack_domain_level", [("domain", d[0])], d[1])
    fam("vpack_domain_managed", "gauge", "Managed.")
    for d in doms:
        s("vpack_domain_managed", [("domain", d[0])], d[2])
    fam("vpack_domain_package", "gauge", "Placement.")
    for d in doms:
        for p in d[3]:
            s("vpack_domain_package", [("domain", d[0]), ("package", str(p))], 1)
    for name, i in (("vpack_vcpu_delay_ratio", 2), ("vpack_vcpu_utilization_ratio", 1)):
        fam(name, "gauge", "Per vCPU.")
        for d in doms:
            for v in d[4]:
                s(name, [("domain", d[0]), ("vcpu", str(v[0]))], v[i])
    fam("vpack_rebalances_total", "counter", "Rebalances.")
    for r, k in (("first", 0), ("pack", 20), ("spread", 30), ("other", 0)):
        s("vpack_rebalances_total", [("reason", r)], 1 + (n // k if k else 0))
    fam("vpack_pin_operations_total", "counter", "Pin calls.")
    for w in ("plan", "hotplug", "stop"):
        for r in ("ok", "domain_gone", "invalid_cpus", "transient", "error"):
            v = 0
            if w == "plan" and r == "ok":
                v = 3 * n
            elif w == "plan" and r == "transient":
                v = n // 15
            s("vpack_pin_operations_total", [("reason", w), ("result", r)], v)
    bounds = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1]
    for name, scale in (("vpack_plan_duration_seconds", 1), ("vpack_sample_duration_seconds", 4)):
        fam(name, "histogram", "Durations.")
        count = 10 + n
        for b in bounds:
            frac = min(1.0, 1 - math.exp(-b * 2000 / scale))
            s(name + "_bucket", [("le", repr(b) if b < 1 else "1")], int(count * frac))
        s(name + "_bucket", [("le", "+Inf")], count)
        s(name + "_sum", [], round(count * 0.0005 * scale, 6))
        s(name + "_count", [], count)
    fam("vpack_samples_total", "counter", "Samples.")
    s("vpack_samples_total", [], 10 + n // 10)
    fam("vpack_hotplug_events_total", "counter", "Hotplug events.")
    s("vpack_hotplug_events_total", [], n // 40)
    fam("vpack_cgroup_repairs_total", "counter", "Repairs.")
    s("vpack_cgroup_repairs_total", [], n // 40)
    return "".join(o).encode()

class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = render()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass

if len(sys.argv) > 1 and sys.argv[1] == "--print":
    sys.stdout.write(render().decode())
    sys.exit(0)
srv = http.server.HTTPServer(("127.0.0.1", 0), H)
with open(sys.argv[1], "w") as f:
    f.write(str(srv.server_address[1]))
srv.serve_forever()
EOF
log "prometheus: fake vpackd exposition passes promtool check metrics"
python3 "$work/fake.py" --print >"$work/fake.prom"
"$PROMTOOL" check metrics <"$work/fake.prom" >"$work/check-metrics.log" 2>&1 \
    || { cat "$work/check-metrics.log"; die "the fake exposition fails promtool check metrics"; }
# The fake must not use names vpackd does not render.
python3 - "$top/lib/prom.c" "$work/fake.prom" <<'EOF'
import re, sys
known = set(re.findall(r'"(vpack_[a-z0-9_]+)"', open(sys.argv[1]).read()))
fams = set(re.findall(r'^# TYPE (\S+)', open(sys.argv[2]).read(), re.M))
if fams != known:
    sys.exit("fake families differ from lib/prom.c: only fake %s, only prom.c %s"
             % (sorted(fams - known), sorted(known - fams)))
EOF

python3 "$work/fake.py" "$work/fake.port" >"$work/fake.log" 2>&1 &
fake_pid=$!
for _ in $(seq 50); do [ -s "$work/fake.port" ] && break; sleep 0.1; done
[ -s "$work/fake.port" ] || die "fake vpackd did not start"
fake_port=$(cat "$work/fake.port")
prom_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# The contrib configuration, scraping the fake every second.
mkdir -p "$work/run"
cp "$rules" "$work/run/"
sed -e "s/127\.0\.0\.1:9477/127.0.0.1:$fake_port/" \
    -e 's/scrape_interval: 15s/scrape_interval: 1s/' \
    -e 's/evaluation_interval: 15s/evaluation_interval: 1s/' \
    -e 's/scrape_timeout: 5s/scrape_timeout: 1s/' \
    "$config" >"$work/run/prometheus.yml"
grep -q "127.0.0.1:$fake_port" "$work/run/prometheus.yml" || die "cannot point the configuration at the fake"
! grep -q '15s' "$work/run/prometheus.yml" || die "intervals left at 15s in the test configuration"

log "prometheus: starting on 127.0.0.1:$prom_port"
"$PROMETHEUS" --config.file="$work/run/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
prom_pid=$!
api=http://127.0.0.1:$prom_port
ready=""
for _ in $(seq 150); do
    kill -0 "$prom_pid" 2>/dev/null || die "prometheus exited"
    if curl -fsS "$api/-/ready" >/dev/null 2>&1; then ready=1; break; fi
    sleep 0.2
done
[ -n "$ready" ] || die "prometheus not ready within 30 s"

# Wait until several scrapes are in: the queries use 8 s windows.
scraped=""
for _ in $(seq 120); do
    n=$(curl -fsS --get "$api/api/v1/query" --data-urlencode 'query=count_over_time(vpack_samples_total[1m])' \
        | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(int(float(r[0]["value"][1])) if r else 0)')
    if [ "$n" -ge 10 ]; then scraped=1; break; fi
    sleep 0.5
done
[ -n "$scraped" ] || die "prometheus did not scrape the fake vpackd"

log "prometheus: alerting rules loaded and healthy"
python3 - "$api" <<'EOF'
import json, sys, time, urllib.request
api = sys.argv[1]
want = {"VpackAgentDown", "VpackLibvirtDisconnected", "VpackPackagesSpreadForLong",
        "VpackPinFailures", "VpackRunQueueDelayHigh"}
deadline = time.time() + 20
while True:
    d = json.load(urllib.request.urlopen(api + "/api/v1/rules?type=alert"))
    rules = {r["name"]: r for g in d["data"]["groups"] for r in g["rules"]}
    bad = [(n, r.get("health"), r.get("lastError")) for n, r in rules.items() if r.get("health") != "ok"]
    if set(rules) == want and not bad:
        break
    if time.time() > deadline:
        sys.exit("rules: loaded %s, unhealthy %s" % (sorted(rules), bad))
    time.sleep(0.5)
EOF

log "prometheus: every dashboard query succeeds and returns data"
python3 - "$api" "$dashboard" <<'EOF'
import json, re, sys, urllib.error, urllib.parse, urllib.request
api, path = sys.argv[1], sys.argv[2]
d = json.load(open(path))
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

# What some queries must answer for the fake's data (package 1 parked;
# domains db1 level 1 on packages 0 and 1, web1 level 2 on package 0, plain
# level 0 nowhere; C6 is the only deep state; 57 W; 1.3 CPUs of vCPUs):
# catches joins on the wrong labels and filters that match nothing or all.
def near(x, want, tol=0.1):
    return abs(float(x) - want) <= tol * abs(want)
def by(res, *labels):
    return {tuple(r["metric"].get(l) for l in labels): float(r["value"][1]) for r in res}
expect = {
    ("Idle CPUs on parked packages", "A"):
        lambda r: set(by(r, "package")) == {("1",)} and near(by(r, "package")[("1",)], 1.9),
    ("Packages active vs parked", "A"): lambda r: [float(x["value"][1]) for x in r] == [1.0],
    ("Packages active vs parked", "B"): lambda r: [float(x["value"][1]) for x in r] == [1.0],
    ("Deep idle-state residency per CPU", "A"):
        lambda r: set(by(r, "cpu")) == {("0",), ("1",), ("2",), ("3",)}
        and all(near(v, 0.5 if c[0] in "23" else 0.2) for c, v in by(r, "cpu").items()),
    ("Host package power", "A"): lambda r: len(r) == 1 and near(r[0]["value"][1], 57),
    ("Energy per vCPU-second of guest run time", "A"):
        lambda r: len(r) == 1 and near(r[0]["value"][1], 57 / 1.3),
    ("Top 10 vCPUs by run-queue delay", "A"):
        lambda r: len(r) == 5 and max(float(x["value"][1]) for x in r) == 0.3,
    ("Domain placement", "A"):
        lambda r: by(r, "domain", "package") == {("db1", "0"): 1, ("db1", "1"): 1, ("web1", "0"): 2},
    ("Domains", "C"): lambda r: by(r, "domain") == {("db1",): 2, ("web1",): 1},
    ("Domains per level", "A"): lambda r: by(r, "level") == {("0",): 1, ("1",): 1, ("2",): 1},
    ("Domains per package", "A"): lambda r: by(r, "package") == {("0",): 2, ("1",): 1},
}

fails = []
seen = set()
for title, ref, expr in exprs:
    q = subst(expr)
    url = api + "/api/v1/query?" + urllib.parse.urlencode({"query": q})
    try:
        r = json.load(urllib.request.urlopen(url))
    except urllib.error.HTTPError as e:
        r = json.load(e)
    if r.get("status") != "success":
        fails.append("%s: %s\n    %s" % (title, r.get("error"), q))
    elif not r["data"]["result"]:
        fails.append("%s: empty result\n    %s" % (title, q))
    elif (title, ref) in expect:
        seen.add((title, ref))
        if not expect[(title, ref)](r["data"]["result"]):
            fails.append("%s %s: unexpected answer %s\n    %s"
                         % (title, ref, json.dumps(r["data"]["result"]), q))
for k in set(expect) - seen:
    if not any(k == (t, f) for t, f, _ in exprs):
        fails.append("no query %s %s in the dashboard" % k)
print("[test-contrib] %d dashboard queries checked, %d answers compared"
      % (len(exprs), len(seen)), file=sys.stderr)
if fails:
    sys.exit("dashboard queries:\n  " + "\n  ".join(fails))
EOF

echo ok
