#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The metrics endpoint with a web configuration ([metrics] web_config,
# exporter-toolkit's format): TLS and basic authentication, against curl
# and a real Prometheus server. vpackd runs on libvirt's test:///default
# driver (no libvirtd, no guest: what is tested is the endpoint). Phases:
#
#   setup       a self-signed ECDSA certificate for 127.0.0.1 (openssl) and
#               a bcrypt hash of cost 10 (mkpasswd -m bcrypt, libxcrypt's
#               own); the web configuration names the files relative to
#               its directory
#   https       vpackd logs "metrics on https://...": /metrics over https
#               with the right password answers 200 and the metrics text
#               (vpack_build_info); no password, a wrong one, an unknown
#               user: 401 with WWW-Authenticate: Basic; plain http to the
#               port gets no HTTP answer; the time of the first (bcrypt)
#               and of a later (cached) scrape, printed
#   budget      five requests on one TLS connection take four windows of
#               100 ms at least (the per-connection budget holds under
#               TLS); 8 wrong passwords at once: at most 4 bcrypt runs a
#               second, the rest 503 with Retry-After; the right password
#               still gets in afterwards
#   flood       100 idle TCP connections (no TLS handshake) held open: a
#               scrape over https still answers 200 within 3 s
#   prometheus  a Prometheus server scraping with scheme https, tls_config
#               ca_file and basic_auth: up == 1 through its HTTP API
#   reload      SIGHUP with a broken web configuration: refused in the log,
#               the old password still works; SIGHUP with a new password:
#               the old one gets 401, the new one 200
#   stop        SIGTERM: vpackd exits 0 (under ASan: no leak)
#
# VPACKD (default $VPACK_BUILDDIR/agent/vpackd) and PROMETHEUS pick the
# binaries.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
vp_test metrics-tls vptls-
vp_need_built "$VPACKD"
PROMETHEUS=${PROMETHEUS:-prometheus}
prom_pid=""
flood_pid=""
vp_on_exit --early 'vp_stop_pid "$flood_pid"; vp_stop_pid "$prom_pid"'
t0=$SECONDS

VP_PACKAGES+=(prometheus curl openssl whois python3)
vp_install_deps
command -v "$PROMETHEUS" >/dev/null || vp_die "no prometheus binary"
command -v mkpasswd >/dev/null || vp_die "no mkpasswd (Debian package whois)"

echo "== setup"
mkdir -p "$work/web"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -keyout "$work/web/vpackd.key" -out "$work/web/vpackd.crt" -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 2>"$work/openssl.log" || vp_die "openssl: $(cat "$work/openssl.log")"
pass=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
hash=$(mkpasswd -m bcrypt -R 10 "$pass")
case $hash in '$2b$10$'*) vp_pass "mkpasswd made a bcrypt hash of cost 10" ;; *) vp_die "mkpasswd: '$hash'" ;; esac
cat >"$work/web/web.yml" <<EOF
tls_server_config:
  cert_file: vpackd.crt
  key_file: vpackd.key
basic_auth_users:
  prometheus: '$hash'
EOF
cp "$work/web/web.yml" "$work/web/web.yml.good"

echo "== https"
port=$(vp_free_port)
url=https://127.0.0.1:$port
ca=(--cacert "$work/web/vpackd.crt")
vp_start_agent --ready=socket -- --topology 'synthetic:"package:2 core:1 pu:1"' \
    --set agent.libvirt_uri=test:///default --set metrics.port="$port" \
    --set metrics.web_config="$work/web/web.yml" --set control.socket="$sock" \
    --set agent.state_dir="$work/state"
vp_has -F "metrics on https://127.0.0.1:$port/metrics (basic authentication, 1 user)" "$log" &&
    vp_pass "vpackd logs the https address and the users" || vp_fail "no 'metrics on https' line in the log"

# code [CURL-ARG...]: the HTTP status (000: no HTTP answer).
code() { curl -s -o /dev/null --max-time 5 -w '%{http_code}' "$@" || true; }
ok() { [ "$(code "${ca[@]}" -u "prometheus:$pass" "$url/metrics")" = 200 ]; }
vp_wait_until 10 ok || vp_die "vpackd does not answer on $url/metrics with the password"
# The wait above may have been the first check: a fresh user name for bcrypt's cost.
t=$(curl -s "${ca[@]}" -u "prometheus:$pass" -o "$work/metrics.txt" -w '%{http_code} %{time_total}' "$url/metrics")
[ "${t% *}" = 200 ] && vp_has -q '^vpack_build_info{' "$work/metrics.txt" &&
    vp_pass "https with the password: 200 and the metrics ($(wc -l <"$work/metrics.txt") lines, ${t#* } s, cached)" ||
    vp_fail "https with the password: '$t'"
curl -s "${ca[@]}" -D "$work/h401" -o /dev/null "$url/metrics" || true
head -1 "$work/h401" | vp_has -q ' 401' && vp_has -qi '^WWW-Authenticate: Basic realm="vpackd"' "$work/h401" &&
    vp_pass "no password: 401 with WWW-Authenticate: Basic" || { vp_fail "no password:"; cat "$work/h401"; }
t=$(curl -s "${ca[@]}" -u "prometheus:x$pass" -o /dev/null -w '%{http_code} %{time_total}' "$url/metrics" || true)
[ "${t% *}" = 401 ] && vp_pass "wrong password: 401 (${t#* } s: one bcrypt run)" || vp_fail "wrong password: '$t'"
c=$(code "${ca[@]}" -u "alice:$pass" "$url/")
[ "$c" = 401 ] && vp_pass "unknown user: 401 (also on /)" || vp_fail "unknown user: $c"
c=$(code "${ca[@]}" -u "prometheus:$pass" "$url/")
[ "$c" = 200 ] && vp_pass "/ with the password: 200" || vp_fail "/ with the password: $c"
c=$(code "http://127.0.0.1:$port/metrics")
[ "$c" = 000 ] && vp_pass "plain http to the TLS port: no HTTP answer" || vp_fail "plain http answered $c"
c=$(code -u "prometheus:$pass" "$url/metrics")
[ "$c" = 000 ] && vp_pass "https without the CA: refused by curl (self-signed)" || vp_fail "no CA: $c"

echo "== budget"
# Five requests on one keep-alive TLS connection: one answer per 100 ms.
five=()
for _ in $(seq 5); do five+=(-o /dev/null "$url/metrics"); done
t_begin=$EPOCHREALTIME
connects=$(curl -s "${ca[@]}" -u "prometheus:$pass" -w '%{num_connects}\n' "${five[@]}" |
    awk '{n += $1} END {print n}')
took=$(awk -v a="$t_begin" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.3f", b - a}')
[ "$connects" = 1 ] && awk -v t="$took" 'BEGIN {exit !(t >= 0.35)}' &&
    vp_pass "five requests on one TLS connection: $took s (four waits for the next 100 ms window)" ||
    vp_fail "five requests on one TLS connection: $connects connections, $took s"
sleep 1.1
# Eight at once (more from one address would evict each other: the per-address limit).
urls=()
for _ in $(seq 8); do urls+=(-o /dev/null "$url/metrics"); done
codes=$(curl -s "${ca[@]}" -u "prometheus:wrong" --parallel --parallel-immediate --parallel-max 8 \
    -w '%{http_code}\n' "${urls[@]}" 2>/dev/null | sort | uniq -c | tr '\n' ' ' || true)
echo "   8 wrong passwords at once (count, status): $codes"
n401=$(awk '{for (i = 2; i <= NF; i += 2) if ($i == 401) print $(i - 1)}' <<<"$codes")
n503=$(awk '{for (i = 2; i <= NF; i += 2) if ($i == 503) print $(i - 1)}' <<<"$codes")
[ "${n401:-0}" -ge 1 ] && [ "${n503:-0}" -ge 2 ] && [ $((n401 + n503)) = 8 ] &&
    vp_pass "bcrypt budget: ${n401} checked (401), ${n503} refused (503)" ||
    vp_fail "bcrypt budget: 401 x ${n401:-0}, 503 x ${n503:-0}"
sleep 1.1
curl -s "${ca[@]}" -u "prometheus:wrong" --parallel --parallel-max 8 -D "$work/h503" "${urls[@]}" \
    2>/dev/null || true
vp_has -qi '^Retry-After: 1' "$work/h503" && vp_pass "503 says Retry-After: 1" ||
    vp_fail "no Retry-After in the 503 answers"
# Cached: the right password does not wait for the budget.
c=$(code "${ca[@]}" -u "prometheus:$pass" "$url/metrics")
[ "$c" = 200 ] && vp_pass "the right password right after: 200 (cached)" || vp_fail "right password after the flood: $c"

echo "== flood"
vp_hold_connections "$port" 100 60
t=$(curl -s "${ca[@]}" -u "prometheus:$pass" -o /dev/null --max-time 10 -w '%{http_code} %{time_total}' \
    "$url/metrics" || true)
if [ "${t% *}" = 200 ] && awk -v t="${t#* }" 'BEGIN {exit !(t < 3)}'; then
    vp_pass "https scrape with 100 idle connections held: 200 in ${t#* } s"
else
    vp_fail "https scrape during the flood: '$t'"
fi
vp_stop_pid "$flood_pid"; flood_pid=""

echo "== prometheus"
pport=$(vp_free_port)
printf '%s\n' "$pass" >"$work/password"
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: vpackd
    scheme: https
    tls_config:
      ca_file: $work/web/vpackd.crt
    basic_auth:
      username: prometheus
      password_file: $work/password
    static_configs:
      - targets: ['127.0.0.1:$port']
EOF
"$PROMETHEUS" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$pport" >"$work/prometheus.log" 2>&1 &
prom_pid=$!
prom_query() {
    local o re='"value":\[[^],]*,"([^"]*)"\]'
    o=$(curl -s "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1") || o=""
    [ "$(vp_prom_series "$o")" = 1 ] && [[ $o =~ $re ]] && echo "${BASH_REMATCH[1]}"
    return 0
}
up() { [ "$(prom_query 'up{job="vpackd"}')" = 1 ]; }
start=$SECONDS
if vp_wait_until 30 up; then
    vp_pass "Prometheus over https with basic_auth: up = 1 after $((SECONDS - start)) s"
    v=$(prom_query 'vpack_build_info')
    [ "$v" = 1 ] && vp_pass "Prometheus has vpack_build_info" || vp_fail "no vpack_build_info in Prometheus"
else
    vp_fail "Prometheus: up = '$(prom_query 'up{job="vpackd"}')'"
    curl -s "http://127.0.0.1:$pport/api/v1/targets" || true
fi
vp_stop_pid "$prom_pid"; prom_pid=""

echo "== reload"
printf 'tls_server_config:\n  cert_file: vpackd.crt\n  key_file: vpackd.key\n  min_version: TLS13\n' \
    >"$work/web/web.yml"
kill -HUP "$agent_pid"
vp_wait_until 5 vp_has -q "SIGHUP: configuration not reloaded" "$log" &&
    vp_has -qF "$work/web/web.yml: line 4: tls_server_config.min_version: not supported by vpackd" "$log" &&
    vp_pass "SIGHUP with a broken web configuration: refused, the file and line in the log" ||
    vp_fail "SIGHUP with a broken web configuration: no refusal in the log"
c=$(code "${ca[@]}" -u "prometheus:$pass" "$url/metrics")
[ "$c" = 200 ] && vp_pass "the old web configuration still serves: 200" || vp_fail "after a refused reload: $c"
pass2=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
sed "s|'.*'|'$(mkpasswd -m bcrypt -R 10 "$pass2")'|" "$work/web/web.yml.good" >"$work/web/web.yml"
kill -HUP "$agent_pid"
new_ok() { [ "$(code "${ca[@]}" -u "prometheus:$pass2" "$url/metrics")" = 200 ]; }
vp_wait_until 5 new_ok && vp_pass "SIGHUP with a new password: 200 with it" || vp_fail "the new password: refused"
c=$(code "${ca[@]}" -u "prometheus:$pass" "$url/metrics")
[ "$c" = 401 ] && vp_pass "and the old one gets 401 (the cache went with the old users)" ||
    vp_fail "the old password after the reload: $c"

echo "== stop"
vp_stop_agent_check
echo "   phases took $((SECONDS - t0)) s"
vp_verdict
