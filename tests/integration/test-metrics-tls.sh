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
#               ca_file and basic_auth: up == 1 through its HTTP API; a
#               second job presents a client certificate as well: up == 1
#   client certificates
#               SIGHUP to client_auth_type RequireAndVerifyClientCert with
#               a CA made by openssl: without a client certificate or with
#               one of another CA 403, with the CA's and no password 401,
#               with both 200; Prometheus's first job goes down (up 0), the
#               one with the client certificate stays up
#   reload      SIGHUP with a broken web configuration: refused in the log,
#               the old configuration still serves; SIGHUP with a new
#               password and no client certificates: the old password gets
#               401, the new one 200
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
# A client CA and a client certificate it signed (clientAuth), for the
# client-certificates phase, and one of no CA's: Prometheus's second job
# presents the good one from the start (vpackd ignores it until then).
k=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 "${k[@]}" -days 2 -keyout "$work/ca.key" -out "$work/web/clients.crt" \
    -subj "/CN=vpack test client CA" -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign,cRLSign 2>>"$work/openssl.log" &&
    openssl req "${k[@]}" -keyout "$work/client.key" -out "$work/client.csr" -subj /CN=prometheus \
        2>>"$work/openssl.log" &&
    printf 'extendedKeyUsage=clientAuth\n' >"$work/client.ext" &&
    openssl x509 -req -in "$work/client.csr" -CA "$work/web/clients.crt" -CAkey "$work/ca.key" \
        -CAcreateserial -days 2 -extfile "$work/client.ext" -out "$work/client.crt" \
        2>>"$work/openssl.log" &&
    openssl req -x509 "${k[@]}" -days 2 -keyout "$work/rogue.key" -out "$work/rogue.crt" \
        -subj /CN=prometheus -addext extendedKeyUsage=clientAuth 2>>"$work/openssl.log" ||
    vp_die "openssl: $(cat "$work/openssl.log")"
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
  - job_name: vpackd-client-cert
    scheme: https
    tls_config:
      ca_file: $work/web/vpackd.crt
      cert_file: $work/client.crt
      key_file: $work/client.key
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
up_is() { [ "$(prom_query "up{job=\"$1\"}")" = "$2" ]; }
both_up() { up_is vpackd 1 && up_is vpackd-client-cert 1; }
start=$SECONDS
if vp_wait_until 30 both_up; then
    vp_pass "Prometheus over https with basic_auth: up = 1 after $((SECONDS - start)) s (both jobs)"
    v=$(prom_query 'vpack_build_info{job="vpackd"}')
    [ "$v" = 1 ] && vp_pass "Prometheus has vpack_build_info" || vp_fail "no vpack_build_info in Prometheus"
else
    vp_fail "Prometheus: up = '$(prom_query 'up{job="vpackd"}')', '$(prom_query 'up{job="vpackd-client-cert"}')'"
    curl -s "http://127.0.0.1:$pport/api/v1/targets" || true
fi

echo "== client certificates"
sed 's|^  key_file: vpackd.key$|&\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: clients.crt|' \
    "$work/web/web.yml.good" >"$work/web/web.yml"
vp_has -q RequireAndVerifyClientCert "$work/web/web.yml" || vp_die "cannot write the client-certificate configuration"
kill -HUP "$agent_pid"
restarted() { vp_has -qF "metrics on https://127.0.0.1:$port/metrics (client certificates, basic authentication, 1 user)" "$log"; }
vp_wait_until 5 restarted && vp_pass "SIGHUP: the endpoint serves with client certificates" ||
    vp_fail "SIGHUP: no 'client certificates' line in the log"
cc=(--cert "$work/client.crt" --key "$work/client.key")
c=$(code "${ca[@]}" -u "prometheus:$pass" "$url/metrics")
[ "$c" = 403 ] && vp_pass "password, no client certificate: 403" || vp_fail "no client certificate: $c"
c=$(code "${ca[@]}" --cert "$work/rogue.crt" --key "$work/rogue.key" -u "prometheus:$pass" "$url/metrics")
[ "$c" = 403 ] && vp_pass "a client certificate of another CA: 403" || vp_fail "another CA's client certificate: $c"
c=$(code "${ca[@]}" "${cc[@]}" "$url/metrics")
[ "$c" = 401 ] && vp_pass "the CA's client certificate, no password: 401" || vp_fail "client certificate without password: $c"
c=$(code "${ca[@]}" "${cc[@]}" -u "prometheus:$pass" "$url/metrics")
[ "$c" = 200 ] && vp_pass "the CA's client certificate and the password: 200" || vp_fail "client certificate and password: $c"
# Two scrapes in a row refused (not one that met the restart), and why.
start=$SECONDS
refused() { [ "$(prom_query 'max_over_time(up{job="vpackd"}[2500ms])')" = 0 ]; }
if vp_wait_until 15 refused && up_is vpackd-client-cert 1; then
    vp_pass "Prometheus: the job without a client certificate down, the one with it up ($((SECONDS - start)) s)"
    curl -s "http://127.0.0.1:$pport/api/v1/targets?state=active" >"$work/targets.json" || true
    vp_has -q '"lastError":"server returned HTTP status 403 Forbidden"' "$work/targets.json" &&
        vp_pass "Prometheus's error for it: HTTP status 403 Forbidden" ||
        { vp_fail "no 403 in Prometheus's targets:"; cat "$work/targets.json"; }
else
    vp_fail "Prometheus: up = '$(prom_query 'up{job="vpackd"}')' without and '$(prom_query 'up{job="vpackd-client-cert"}')' with a client certificate"
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
c=$(code "${ca[@]}" "${cc[@]}" -u "prometheus:$pass" "$url/metrics")
[ "$c" = 200 ] && vp_pass "the old web configuration still serves: 200 (client certificate and password)" ||
    vp_fail "after a refused reload: $c"
pass2=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
sed "s|'.*'|'$(mkpasswd -m bcrypt -R 10 "$pass2")'|" "$work/web/web.yml.good" >"$work/web/web.yml"
kill -HUP "$agent_pid"
new_ok() { [ "$(code "${ca[@]}" -u "prometheus:$pass2" "$url/metrics")" = 200 ]; }
vp_wait_until 5 new_ok && vp_pass "SIGHUP with a new password, no client certificates: 200 with it" ||
    vp_fail "the new password: refused"
c=$(code "${ca[@]}" -u "prometheus:$pass" "$url/metrics")
[ "$c" = 401 ] && vp_pass "and the old one gets 401 (the cache went with the old users)" ||
    vp_fail "the old password after the reload: $c"

echo "== stop"
vp_stop_agent_check
echo "   phases took $((SECONDS - t0)) s"
vp_verdict
