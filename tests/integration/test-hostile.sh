#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Hostile clients against a real vpackd, a real libvirtd and a real QEMU
# (TCG) guest vpho-a (level 2), registered by vpack-hook run as root.
# Phases:
#
#   non-root   a real unprivileged user (vpacktest, created if missing and
#              removed again): every mutating request on the control socket
#              (rebalance, register, forget, sent raw) is answered
#              "permission denied"; vpack-hook run by that user for
#              started (with the guest's XML changed to level 0) and
#              stopped exits 0 and changes nothing; vpackctl set-policy is
#              refused by libvirt; the agent's records (files and what
#              `vpackctl explain` says) are byte for byte the same after
#   loopback   with no [metrics] listen set, `ss -ltnp` shows vpackd
#              listening on 127.0.0.1 only
#   slowloris  150 connections sending their headers a byte every 0.5 s
#              for 20 s: a scrape every second answers 200 within 3 s
#   headers    a 1 MiB header and 20000 small headers: an error or a
#              dropped connection; the next scrape answers 200
#   many       1000 connections at once sending a request and not reading:
#              a scrape answers 200 within 3 s; vpackd still running
#   garbage    vpack-hook given 1 MiB of random bytes and 1 MiB of
#              unterminated XML on stdin: prepare exits 1 with one line on
#              stderr; started, stopped, release, reconnect exit 0 without
#              output; every call ends within 15 s
#   stop       SIGTERM: exit 0 (under ASan: no leak)
#
# VPACKD, VPACKCTL and VPACK_HOOK pick the binaries.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
vp_test hostile vpho-
TESTUSER=vpacktest
chmod 0755 "$work"
state=$work/state
created_user=""
vp_on_exit '[ -z "$created_user" ] || userdel "$TESTUSER" 2>/dev/null || true'
t_start=$SECONDS

# What the unprivileged user runs must be in its reach: the checkout may be
# under /root (mode 0700), where an installed program never is.
vp_public_copy VPACKCTL_PUB "$VPACKCTL"
vp_public_copy VPACK_HOOK_PUB "$VPACK_HOOK"


vp_install_deps
command -v ss >/dev/null || vp__quiet env DEBIAN_FRONTEND=noninteractive apt-get install -y -q iproute2
vp_start_libvirtd
vp_build_guest
vp_destroy_all_test_domains
if ! id "$TESTUSER" >/dev/null 2>&1; then
    useradd -M -r -s /usr/sbin/nologin "$TESTUSER"
    # shellcheck disable=SC2034 # read at the exit (vp_on_exit)
    created_user=1
fi

vp_define_start vpho-a 2 idle "" "<vpack:powerpolicy xmlns:vpack='$NS' level='2'/>"
vp_wait_ready vpho-a
uuid=$(vp_virsh domuuid vpho-a | tr -d ' \n')
vp_virsh dumpxml vpho-a > "$work/a.xml"
sed "s/level='2'/level='0'/; s/level=\"2\"/level=\"0\"/" "$work/a.xml" > "$work/a0.xml"
grep -q "level=.0." "$work/a0.xml" || vp_die "could not make a level-0 copy of the XML"
chmod 0644 "$work"/*.xml

port=$(vp_free_port)
vp_start_agent --ready=socket -- --topology 'synthetic:"package:2 core:1 pu:1"' --set control.socket="$sock" \
    --set agent.state_dir="$state" --set metrics.port="$port" --set agent.log_level=debug

# The hook as libvirt runs it (as root): registers vpho-a.
VPACK_SOCKET=$sock "$VPACK_HOOK" vpho-a started begin - < "$work/a.xml"
rec=$state/domains/$uuid.json
for _ in $(seq 50); do [ -s "$rec" ] && break; sleep 0.1; done
[ -s "$rec" ] && vp_pass "root's hook registered vpho-a ($rec)" || vp_fail "no record after the root hook"
sleep 2
records() { (cd "$state/domains" && sha256sum -- * 2>/dev/null) || true; }
# What explain says, without the measured columns (utilisation, delay, where
# the load is read) and the reason: a thread line up to its CPUS NOW.
explain() {
    "$VPACKCTL" explain vpho-a --socket "$sock" |
        awk '$1 == "reason" {next} $1 == "emulator" {NF = 3} $1 ~ /^(vcpu|iothread)$/ {NF = 4} {print}'
}
rec0=$(records)
exp0=$(explain)

echo "== non-root: control socket"
# Sends one line as $TESTUSER, prints the reply line.
as_user_send() {
    runuser -u "$TESTUSER" -- "$VP_PYTHON" -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
buf = b""
while not buf.endswith(b"\n"):
    c = s.recv(65536)
    if not c: break
    buf += c
print(buf.decode().strip())' "$sock" "$1"
}
dom_json=$("$VPACK_HOOK" --dump < "$work/a0.xml")
for req in '{"op":"rebalance"}' \
           '{"op":"rebalance","dry_run":false}' \
           "{\"op\":\"register\",\"event\":\"started\",\"domain\":$dom_json,\"transient\":null}" \
           "{\"op\":\"register\",\"event\":\"reconnect\",\"domain\":$dom_json,\"transient\":null}" \
           "{\"op\":\"forget\",\"name\":\"vpho-a\",\"uuid\":\"$uuid\"}" \
           '{"op":"forget","name":"vpho-a"}'; do
    what=$("$VP_PYTHON" -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["op"], d.get("event", d.get("dry_run", d.get("uuid", ""))))' "$req")
    reply=$(as_user_send "$req" || true)
    if grep -q "permission denied" <<<"$reply" && ! grep -q '"ok": *true' <<<"$reply"; then
        vp_pass "$TESTUSER: $what refused: $(head -c 120 <<<"$reply")"
    else
        vp_fail "$TESTUSER: $what answered: $(head -c 300 <<<"$reply")"
    fi
done

echo "== non-root: the hook's path"
for op in started reconnect stopped release; do
    xml=$work/a0.xml; [ "$op" = stopped ] || [ "$op" = release ] && xml=$work/a.xml
    rc=0
    runuser -u "$TESTUSER" -- env VPACK_SOCKET="$sock" timeout 15 "$VPACK_HOOK_PUB" vpho-a "$op" begin - \
        < "$xml" > "$work/hook.out" 2>&1 || rc=$?
    [ $rc -eq 0 ] && vp_pass "$TESTUSER: vpack-hook vpho-a $op exits 0 (libvirt must not fail the domain)" ||
        vp_fail "$TESTUSER: vpack-hook vpho-a $op exit $rc: $(cat "$work/hook.out")"
done
echo "== non-root: set-policy"
rc=0
out=$(runuser -u "$TESTUSER" -- timeout 30 "$VPACKCTL_PUB" set-policy vpho-a 0 --live 2>&1) || rc=$?
meta=$(vp_virsh metadata vpho-a --uri "$NS" --live 2>&1 || true)
if [ $rc -ne 0 ] && grep -Eq "level=[\"']2[\"']" <<<"$meta"; then
    vp_pass "$TESTUSER: set-policy refused (exit $rc: $(head -n1 <<<"$out")); metadata still level 2"
else
    vp_fail "$TESTUSER: set-policy exit $rc: $out; metadata: $meta"
fi
sleep 2
rec1=$(records)
exp1=$(explain)
[ -n "$rec0" ] && [ "$rec1" = "$rec0" ] && vp_pass "the agent's records are unchanged ($(wc -l <<<"$rec1") file(s))" ||
    vp_fail "records changed: before '$rec0' after '$rec1'"
[ "$exp1" = "$exp0" ] && vp_pass "vpackctl explain vpho-a unchanged (level $(awk '$1 == "level" {print $2}' <<<"$exp1"))" ||
    vp_fail "explain changed:"$'\n'"$exp0"$'\n'"--->"$'\n'"$exp1"

echo "== metrics: loopback by default"
lines=$(ss -ltnpH "sport = :$port" || true)
echo "    $lines"
if grep -q "127.0.0.1:$port" <<<"$lines" && grep -q "\"vpackd\",pid=$agent_pid" <<<"$lines" &&
   [ "$(wc -l <<<"$lines")" -eq 1 ]; then
    vp_pass "vpackd listens on 127.0.0.1:$port only"
else
    vp_fail "listening sockets for port $port: $lines"
fi

# scrape_ok: /metrics answers 200 within 3 s; prints "CODE SECONDS".
scrape() { curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time 5 "http://127.0.0.1:$port/metrics" || true; }
scrape_ok() { local r; r=$(scrape); [ "${r%% *}" = 200 ] && awk -v t="${r#* }" 'BEGIN {exit !(t < 3)}'; }

# Scrapes every second while "$@" runs; fails unless every one answered in time.
scrapes_during() {
    local what=$1; shift
    "$@" & local cpid=$!
    local n=0 bad=0 worst=0 r
    sleep 1
    while kill -0 $cpid 2>/dev/null; do
        r=$(scrape); n=$((n + 1))
        if [ "${r%% *}" != 200 ] || ! awk -v t="${r#* }" 'BEGIN {exit !(t < 3)}'; then
            bad=$((bad + 1)); echo "    scrape during $what: $r"
        fi
        worst=$(awk -v a="$worst" -v b="${r#* }" 'BEGIN {print (b + 0 > a + 0) ? b : a}')
        sleep 1
    done
    local crc=0; wait $cpid || crc=$?
    [ $crc -eq 0 ] || vp_fail "$what: the client script failed ($crc)"
    if [ $n -gt 0 ] && [ $bad -eq 0 ]; then vp_pass "$what: $n scrapes, all 200, slowest ${worst}s"
    else vp_fail "$what: $bad of $n scrapes failed or slower than 3 s"; fi
}

echo "== metrics: slowloris"
slowloris() {
    "$VP_PYTHON" - "$port" <<'EOF'
import socket, sys, time, resource
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
port = int(sys.argv[1]); conns = []
for _ in range(150):
    s = socket.socket(); s.settimeout(5)
    try:
        s.connect(("127.0.0.1", port)); s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        conns.append(s)
    except OSError:
        pass
end = time.time() + 20; sent = 0
while time.time() < end:
    for s in list(conns):
        try:
            s.send(b"a"); sent += 1
        except OSError:
            conns.remove(s)
    time.sleep(0.5)
print("    slowloris: %d bytes sent, %d of 150 connections still open at the end" % (sent, len(conns)))
EOF
}
scrapes_during "150 slowloris connections for 20 s" slowloris

echo "== metrics: huge headers"
big=$("$VP_PYTHON" - "$port" <<'EOF'
import socket, sys
port = int(sys.argv[1]); out = []
for name, req in (("1 MiB header", b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"),
                  ("20000 headers", b"GET /metrics HTTP/1.1\r\nHost: x\r\n" +
                   b"".join(b"X-H%d: %s\r\n" % (i, b"b" * 40) for i in range(20000)) + b"\r\n")):
    s = socket.socket(); s.settimeout(10); s.connect(("127.0.0.1", port))
    try:
        s.sendall(req)
    except OSError as e:
        pass
    try:
        reply = s.recv(200).split(b"\r\n")[0].decode(errors="replace") or "closed"
    except OSError as e:
        reply = "closed (%s)" % e.strerror
    out.append("%s: %s" % (name, reply))
    s.close()
print("; ".join(out))
EOF
)
echo "    $big"
if ! grep -q " 200 " <<<"$big"; then vp_pass "huge headers refused: $big"; else vp_fail "huge headers answered 200: $big"; fi
scrape_ok && vp_pass "a scrape after the huge headers answers 200 ($(scrape))" || vp_fail "scrape after huge headers: $(scrape)"

echo "== metrics: many connections"
many() {
    "$VP_PYTHON" - "$port" <<'EOF'
import socket, sys, time, resource
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
port = int(sys.argv[1]); conns = []; refused = 0
for _ in range(1000):
    s = socket.socket(); s.settimeout(2)
    try:
        s.connect(("127.0.0.1", port)); s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        conns.append(s)
    except OSError:
        refused += 1
time.sleep(10)
print("    many: %d connections made, %d refused or timed out" % (len(conns), refused))
EOF
}
scrapes_during "1000 connections not reading their answers" many
kill -0 "$agent_pid" && vp_pass "vpackd still running after the hostile HTTP clients" || vp_fail "vpackd died"
scrape_ok && vp_pass "scrape after the hostile HTTP clients: $(scrape)" || vp_fail "scrape afterwards: $(scrape)"

echo "== hook: 1 MiB of garbage on stdin"
head -c $((1 << 20)) /dev/urandom > "$work/garbage"
{ printf "<domain type='kvm'><name>vpho-g</name><description>"; head -c $((1 << 20)) /dev/zero | tr '\0' 'A'; } > "$work/garbage.xml"
for g in garbage garbage.xml; do
    for op in prepare started stopped release reconnect; do
        rc=0; s=$SECONDS
        VPACK_SOCKET=$sock timeout 15 "$VPACK_HOOK" vpho-g "$op" begin - < "$work/$g" \
            > "$work/hook.out" 2> "$work/hook.err" || rc=$?
        took=$((SECONDS - s))
        nerr=$(wc -l < "$work/hook.err")
        if [ "$op" = prepare ]; then
            if [ $rc -eq 1 ] && [ "$nerr" -eq 1 ] && grep -q "^vpack: domain 'vpho-g': " "$work/hook.err" &&
               [ ! -s "$work/hook.out" ]; then
                vp_pass "$g, $op: exit 1 in ${took}s: $(cat "$work/hook.err")"
            else
                vp_fail "$g, $op: exit $rc, $nerr stderr line(s): $(head -c 300 "$work/hook.err")"
            fi
        elif [ $rc -eq 0 ] && [ ! -s "$work/hook.out" ] && [ "$nerr" -eq 0 ]; then
            vp_pass "$g, $op: exit 0 in ${took}s, nothing printed (syslog only)"
        else
            vp_fail "$g, $op: exit $rc, stdout $(wc -c < "$work/hook.out") bytes, stderr: $(head -c 300 "$work/hook.err")"
        fi
    done
done
kill -0 "$agent_pid" && vp_pass "vpackd still running" || vp_fail "vpackd died"
[ "$(records)" = "$rec0" ] && vp_pass "vpho-a's record untouched by the garbage" || vp_fail "records changed by the garbage"

echo "== stop"
vp_stop_agent_check

echo
echo "time: $((SECONDS - t_start)) s in all"
vp_verdict
