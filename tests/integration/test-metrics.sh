#!/bin/bash
# SPDX-License-Identifier: MIT
#
# vpackd's metrics endpoint against a real libvirtd, a real QEMU (TCG) guest
# and a real Prometheus server. Phases:
#
#   scrape      one level-2 guest (vpmet-a); vpackd on a synthetic
#               two-package topology serving metrics on a free port:
#               /metrics answers 200 with the 0.0.4 content type, passes
#               `promtool check metrics`, and has
#               vpack_domain_level{domain="vpmet-a"} 2; its vCPU 0's
#               vpack_vcpu_run_seconds_total between libvirt's vcpu.0.time
#               read just before and just after, run and wait counters of
#               vCPU 0 and the emulator, no per-vCPU ratio; the six
#               process_* families, the start time within the last two
#               minutes and open fds as many as /proc/PID/fd lists (+-5: a
#               scrape's own connections come and go);
#               vpack_build_info's commit that of HEAD and its libvirt
#               the daemon's version (virsh version --daemon);
#               cpuidle residency
#               where the host has cpuidle, RAPL energy only where it has
#               RAPL; / links /metrics, other paths 404, POST 405
#   prometheus  a Prometheus server scraping vpackd every second answers
#               query=vpack_domain_level{domain="vpmet-a"} with "2"
#   restart     the guest destroyed: its series go; started again: vCPU
#               0's counter is back below its old value and grows
#   oversized   a request with a 100 KiB header gets an error (431) or is
#               dropped; /metrics still answers
#   flood       200 idle TCP connections held open by a python3 script do
#               not stop a scrape: curl /metrics answers 200 within 3 s
#   stop        Prometheus stopped; SIGTERM: vpackd exits 0 (under ASan: no
#               leak)
#
# VPACKD (default $VPACK_BUILDDIR/agent/vpackd), PROMETHEUS and PROMTOOL
# pick the binaries.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
vp_test metrics vpmet-
vp_need_built "$VPACKD"
PROMETHEUS=${PROMETHEUS:-prometheus}
PROMTOOL=${PROMTOOL:-promtool}
DOM=vpmet-a
prom_pid=""
flood_pid=""
vp_on_exit --early 'vp_stop_pid "$flood_pid"; vp_stop_pid "$prom_pid"'

VP_PACKAGES+=(prometheus curl python3)
vp_install_deps
command -v "$PROMETHEUS" >/dev/null || vp_die "no prometheus binary"
command -v "$PROMTOOL" >/dev/null || vp_die "no promtool binary"
vp_start_libvirtd
vp_build_guest
vp_destroy_all_test_domains

vp_define_start "$DOM" 1 idle "" "<vpack:powerpolicy xmlns:vpack='$NS' level='2'/>"
vp_wait_ready "$DOM"

echo "== scrape"
port=$(vp_free_port)
url=http://127.0.0.1:$port
vp_start_agent --ready=socket -- --topology 'synthetic:"package:2 core:1 pu:1"' \
    --set metrics.port="$port" --set control.socket="$sock" \
    --set agent.state_dir="$work/state"
vp_wait_until 10 curl -sf -o /dev/null "$url/metrics" || vp_die "vpackd does not answer on $url/metrics"
grep -q "metrics on http://127.0.0.1:$port/metrics" "$work/vpackd.log" &&
    vp_pass "vpackd logs the metrics address" || vp_fail "no 'metrics on' line in the log"

level_line="vpack_domain_level{domain=\"$DOM\"} 2"
scrape() { curl -sf "$url/metrics" -o "$work/metrics.txt"; }
has_level() { scrape && grep -qxF "$level_line" "$work/metrics.txt"; }
if vp_wait_until 15 has_level; then vp_pass "$level_line"
else vp_fail "no '$level_line' in /metrics:"; grep vpack_domain "$work/metrics.txt" || true; fi

ctype=$(curl -s -o /dev/null -w '%{content_type}' "$url/metrics")
[ "$ctype" = "text/plain; version=0.0.4; charset=utf-8" ] &&
    vp_pass "Content-Type: $ctype" || vp_fail "Content-Type: '$ctype'"
if out=$("$PROMTOOL" check metrics <"$work/metrics.txt" 2>&1); then
    vp_pass "promtool check metrics: no complaint${out:+ ($out)}"
else
    vp_fail "promtool check metrics: $out"
fi
echo "$(grep -c '^vpack_' "$work/metrics.txt") samples in $(grep -c '^# TYPE' "$work/metrics.txt") families"
grep -E "^vpack_(domain_[a-z]+|vcpu_[a-z_]+)\{domain=\"$DOM\"" "$work/metrics.txt" | sed 's/^/    /'
grep -q "^vpack_domain_package{domain=\"$DOM\",package=\"[01]\"} 1$" "$work/metrics.txt" &&
    vp_pass "vpack_domain_package for $DOM" || vp_fail "no vpack_domain_package for $DOM"
# The thread counters: vCPU 0's run time is its thread's, as libvirt reads it
# (vcpu.0.time), read just before and after the scrape; libvirt may count it
# in clock ticks (/proc/PID/task/TID/stat) where vpackd reads schedstat's
# nanoseconds: 10% and 50 ms of slack. The pause lets the endpoint's
# 100 ms copy of the last scrape run out.
run_re="^vpack_vcpu_run_seconds_total{domain=\"$DOM\",class=\"vcpu\",id=\"0\"} "
vcpu_run() { scrape && sed -n "s/$run_re//p" "$work/metrics.txt"; }
# The domain is in the table (its level) an interval before its threads are first read.
has_run() { [ -n "$(vcpu_run)" ]; }
vp_wait_until 10 has_run || vp_fail "no vpack_vcpu_run_seconds_total of $DOM's vCPU 0 within 10 s"
sleep 0.2
before=$(vp_vcpu_times "$DOM" | awk '$1 == 0 {printf "%.3f", $2 / 1e9}')
ours=$(vcpu_run)
after=$(vp_vcpu_times "$DOM" | awk '$1 == 0 {printf "%.3f", $2 / 1e9}')
if [ -n "$ours" ] && awk -v b="$before" -v o="$ours" -v a="$after" 'BEGIN {exit !(o >= b * 0.9 - 0.05 && o <= a * 1.1 + 0.05)}'; then
    vp_pass "vpack_vcpu_run_seconds_total of vCPU 0: $ours s, libvirt's vcpu.0.time $before .. $after s"
else
    vp_fail "vpack_vcpu_run_seconds_total of vCPU 0: '$ours', libvirt's vcpu.0.time $before .. $after s"
fi
for c in 'class="vcpu",id="0"' 'class="emulator"'; do
    vp_has -q "^vpack_vcpu_wait_seconds_total{domain=\"$DOM\",$c} " "$work/metrics.txt" &&
        vp_has -q "^vpack_vcpu_run_seconds_total{domain=\"$DOM\",$c} " "$work/metrics.txt" &&
        vp_pass "run and wait counters of $DOM's $c" || vp_fail "no run or wait counter of $DOM's $c"
done
# vpackd's own process, as the client libraries export one.
missing=""
for f in process_cpu_seconds_total process_resident_memory_bytes process_virtual_memory_bytes \
    process_open_fds process_max_fds process_start_time_seconds; do
    vp_has -q "^$f [0-9]" "$work/metrics.txt" || missing+=" $f"
done
[ -z "$missing" ] && vp_pass "process_* families" || vp_fail "missing:$missing"
started=$(sed -n 's/^process_start_time_seconds //p' "$work/metrics.txt")
fds=$(sed -n 's/^process_open_fds //p' "$work/metrics.txt")
real_fds=$(ls "/proc/$agent_pid/fd" | wc -l)
awk -v s="$started" -v now="$(date +%s)" -v f="$fds" -v r="$real_fds" \
    'BEGIN {exit !(s > now - 120 && s <= now + 1 && f > 3 && f <= r + 5 && f >= r - 5)}' &&
    vp_pass "process_start_time_seconds $started (now $(date +%s)), process_open_fds $fds (/proc/PID/fd: $real_fds)" ||
    vp_fail "process_start_time_seconds $started (now $(date +%s)), process_open_fds $fds (/proc/PID/fd: $real_fds)"
# vpack_build_info: the commit this tree is at (built with it: meson test
# builds first) and the version of the libvirtd it connected to.
commit=$(git -C "$srcdir" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
daemon=$(vp_virsh version --daemon | sed -n 's/^Running against daemon: *//p')
bi=$(grep '^vpack_build_info{' "$work/metrics.txt" || true)
re='^vpack_build_info\{version="[^"]+",commit="([^"]*)",libvirt="([^"]*)"\} 1$'
if [[ $bi =~ $re ]] && [ "${BASH_REMATCH[1]%-dirty}" = "$commit" ] && [ "${BASH_REMATCH[2]}" = "$daemon" ]; then
    vp_pass "$bi (HEAD $commit, libvirtd $daemon)"
else
    vp_fail "'$bi', want commit $commit and libvirt $daemon"
fi
vp_has -q '_ratio{domain=.*,vcpu=' "$work/metrics.txt" &&
    vp_fail "a per-vCPU ratio is still exported" || vp_pass "no per-vCPU ratio"
if ls /sys/devices/system/cpu/cpu0/cpuidle/state0/time >/dev/null 2>&1; then
    grep -q '^vpack_cpu_idle_state_residency_seconds_total{cpu="0",state=' "$work/metrics.txt" &&
        vp_pass "cpuidle residency of CPU 0" || vp_fail "no cpuidle residency though the host has cpuidle"
else
    echo "host has no cpuidle: residency not checked"
fi
if ls -d /sys/class/powercap/intel-rapl:[0-9]* >/dev/null 2>&1; then
    grep -q '^vpack_package_energy_joules_total{package=' "$work/metrics.txt" &&
        vp_pass "RAPL energy exported" || vp_fail "host has RAPL but no vpack_package_energy_joules_total"
else
    grep -q 'vpack_package_energy' "$work/metrics.txt" &&
        vp_fail "no RAPL on this host, yet energy is exported" ||
        vp_pass "no RAPL on this host: no energy family at all"
fi
code() { curl -s -o /dev/null -w '%{http_code}' "$@" || true; }
[ "$(code "$url/")" = 200 ] && curl -s "$url/" | vp_has 'href="/metrics"' &&
    vp_pass "/ links /metrics" || vp_fail "/ does not link /metrics"
[ "$(code "$url/nope")" = 404 ] && vp_pass "/nope: 404" || vp_fail "/nope: $(code "$url/nope")"
[ "$(code -X POST -d x=1 "$url/metrics")" = 405 ] && vp_pass "POST /metrics: 405" ||
    vp_fail "POST /metrics: $(code -X POST -d x=1 "$url/metrics")"
[ "$(code -I "$url/metrics")" = 200 ] && vp_pass "HEAD /metrics: 200" || vp_fail "HEAD /metrics"

echo "== prometheus"
pport=$(vp_free_port)
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: vpackd
    static_configs:
      - targets: ['127.0.0.1:$port']
EOF
"$PROMTOOL" check config "$work/prometheus.yml" >/dev/null || vp_die "bad Prometheus configuration"
"$PROMETHEUS" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$pport" >"$work/prometheus.log" 2>&1 &
prom_pid=$!
vp_wait_until 30 curl -sf -o /dev/null "http://127.0.0.1:$pport/-/ready" ||
    vp_die "Prometheus not ready on port $pport"
# Prints the value of the query's single sample, or nothing. Polled: read
# with shell built-ins, no interpreter.
prom_query() {
    local o re='"value":\[[^],]*,"([^"]*)"\]'
    o=$(curl -s "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1") || o=""
    [ "$(vp_prom_series "$o")" = 1 ] && [[ $o =~ $re ]] && echo "${BASH_REMATCH[1]}"
    return 0
}
query="vpack_domain_level{domain=\"$DOM\"}"
level_in_prom() { [ "$(prom_query "$query")" = 2 ]; }
start=$SECONDS
if vp_wait_until 30 level_in_prom; then
    vp_pass "Prometheus: $query = $(prom_query "$query") after $((SECONDS - start)) s"
    echo "   $(curl -s "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$query")"
else
    vp_fail "Prometheus: $query = '$(prom_query "$query")'"
    curl -s "http://127.0.0.1:$pport/api/v1/targets" | "$VP_PYTHON" -c 'import json, sys
for t in json.load(sys.stdin)["data"]["activeTargets"]:
    print("   target", t["scrapeUrl"], t["health"], t.get("lastError", ""))' || true
fi
echo "   Prometheus: up = $(prom_query 'up{job="vpackd"}'), scrape_samples_scraped = $(prom_query 'scrape_samples_scraped{job="vpackd"}')"
samples=$(prom_query 'vpack_samples_total')
[ -n "$samples" ] && vp_pass "Prometheus has vpack_samples_total = $samples" || vp_fail "no vpack_samples_total in Prometheus"

echo "== counters across a restart"
# The domain goes away: its series go with it; it comes back: they start
# again from its new threads (a counter reset), never from the old value.
old_run=$(vcpu_run)
vp_virsh destroy "$DOM" >/dev/null
gone() { scrape && ! vp_has -q "domain=\"$DOM\"" "$work/metrics.txt"; }
vp_wait_until 10 gone && vp_pass "$DOM stopped: no series of it" || vp_fail "$DOM stopped, its series remain"
vp_start "$DOM"
if vp_wait_until 15 has_run; then
    new_run=$(vcpu_run)
    awk -v n="$new_run" -v o="$old_run" 'BEGIN {exit !(n < o)}' &&
        vp_pass "$DOM started again: vCPU 0's counter from its new thread ($new_run s, was $old_run s)" ||
        vp_fail "$DOM started again: vCPU 0's counter $new_run s, not below $old_run s"
    rising() { awk -v n="$(vcpu_run)" -v o="$new_run" 'BEGIN {exit !(n > o)}'; }
    vp_wait_until 10 rising && vp_pass "and it grows ($(vcpu_run) s)" || vp_fail "it does not grow from $new_run s"
else
    vp_fail "$DOM started again: no vCPU 0 counter"
fi

echo "== oversized request"
big=$(head -c 102400 /dev/zero | tr '\0' a)
c=$(code -H "X-Big: $big" "$url/metrics")
case $c in
431 | 413 | 400 | 000) vp_pass "100 KiB header: $c" ;;
*) vp_fail "100 KiB header answered $c" ;;
esac
[ "$(code "$url/metrics")" = 200 ] && vp_pass "/metrics answers after it" || vp_fail "/metrics broken after an oversized request"

echo "== flood"
vp_hold_connections "$port" 200 120
t=$(curl -s -o /dev/null --max-time 10 -w '%{http_code} %{time_total}' "$url/metrics" || true)
echo "   with 200 idle connections held: HTTP ${t% *} in ${t#* } s"
if [ "${t% *}" = 200 ] && awk -v t="${t#* }" 'BEGIN {exit !(t < 3)}'; then
    vp_pass "scrape during the flood: 200 in ${t#* } s"
else
    vp_fail "scrape during the flood: '$t'"
fi
established=$(ss -Htn state established "( sport = :$port )" | wc -l)
echo "   server-side connections still established: $established (limit 64)"
vp_stop_pid "$flood_pid"; flood_pid=""
[ "$(code "$url/metrics")" = 200 ] && vp_pass "/metrics answers after the flood" || vp_fail "/metrics after the flood"
kill -0 "$agent_pid" 2>/dev/null && vp_pass "vpackd still running" || vp_fail "vpackd died"

echo "== stop"
vp_stop_pid "$prom_pid"; prom_pid=""
vp_stop_agent_check
curl -s -o /dev/null --max-time 2 "$url/metrics" && vp_fail "the port still answers" ||
    vp_pass "metrics port closed"

vp_verdict
