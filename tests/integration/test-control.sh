#!/bin/bash
# SPDX-License-Identifier: MIT
#
# vpackd's control socket and vpackctl against a real vpackd, a real libvirtd
# and two idle QEMU (TCG) guests: vpctl-a (level 2) and vpctl-b (level 0). The
# topology override treats CPU 0 and CPU 1 as two packages. Phases:
#
#   commands   wait --for packed, status (text and --json: one package
#              ACTIVE, the other PARKED, vpctl-a on the active one), explain
#              (known and unknown domain), version, rebalance --dry-run and a
#              real rebalance as root, exit codes
#   wait       vpackctl wait: parked=1 and level=vpctl-a:2 met (0), spread
#              and level=vpctl-b:2 timed out with the last state (1), a bad
#              condition (2); under offline, a wait cut off by the agent's
#              stop and one without an agent (3)
#   non-root   a real unprivileged user (vpacktest, created if missing and
#              removed again) may run status and rebalance --dry-run but a
#              real rebalance is refused with "permission denied"
#   hostile    python3 clients: over-long lines (with and without newline),
#              invalid JSON, an array, no "op", an unknown op; pipelined
#              requests, also followed by a half-close; 200 idle connections
#              (status still answers, then the idle timeout closes them); a
#              client that floods status requests and never reads (dropped
#              while status keeps working); the agent survives all of it
#   offline    vpackd stopped (SIGTERM, exit 0): `set-policy vpctl-b 2 --live`
#              works through libvirt alone, `status` and `wait` exit 3; restarted, the
#              agent manages vpctl-b at level 2
#   limits     default max_clients (64): client 65 gets a "too many clients"
#              error line; service resumes once the others close or time out
#   stop       SIGTERM: exit 0
#
# Environment: VPACK_BUILDDIR (default: build/ of this tree), VPACKD and
# VPACKCTL (default: the binaries in it), VP_* as in lib.sh. Guests are named
# vpctl-*; only those are removed. Root only. Prints "ok" last on success.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
vp_test control vpctl-
TESTUSER=vpacktest
IDLE_MS=5000
# The unprivileged user must reach the socket (which vpackd makes 0666).
chmod 0711 "$work"
created_user=""
t_start=$SECONDS
vp_need_built "$VPACKD" "$VPACKCTL"
[ -x "$VP_PYTHON" ] || vp_die "$VP_PYTHON is needed"
vp_on_exit '[ -z "$created_user" ] || userdel "$TESTUSER" >/dev/null 2>&1 || vp_log "could not remove user $TESTUSER"'

# alive PID: the process exists and is not a zombie.
alive() { vp_alive "$@"; }

# start_agent READY [--set K=V ...]: a real vpackd on our socket (vp_start_agent
# --ready=READY). A short minimum residency: when load elsewhere on the
# machine (other tests' guests booting) makes the first plan spread, it
# packs again within seconds instead of holding both packages for the
# default 60 s.
start_agent() {
    local ready=$1; shift
    vp_start_agent --ready="$ready" -- --topology 'synthetic:"package:2 core:1 pu:1"' \
        --set agent.state_dir="$work" --set control.socket="$sock" \
        --set control.idle_timeout_ms=$IDLE_MS --set metrics.enabled=false \
        --set policy.min_residency_ms=3000 "$@"
}

# stop_agent: SIGTERM, wait up to 15 s (then SIGKILL); sets stop_rc.
stop_agent() {
    kill -TERM "$agent_pid"
    for _ in $(seq 150); do alive "$agent_pid" || break; sleep 0.1; done
    if alive "$agent_pid"; then
        echo "vpackd did not exit within 15 s of SIGTERM: killing it"
        kill -KILL "$agent_pid"
    fi
    stop_rc=0
    wait "$agent_pid" || stop_rc=$?
    agent_pid=""
}

# run CMD...: sets rc and out (stdout and stderr together).
run() { rc=0; out=$("$@" 2>&1) || rc=$?; }

# wait_for SECONDS CMD...: vp_wait_for polling every 0.5 s.
wait_for() { VP_POLL=0.5 vp_wait_for "$@"; }

ctl() { "$VPACKCTL" "$@" --socket "$sock"; }

# The hostile and concurrent clients; each prints ok:/FAIL: lines.
cat >"$work/clients.py" <<'PYEOF'
import json, select, socket, subprocess, sys, time

failures = 0


def ok(msg):
    print("ok: " + msg, flush=True)


def fail(msg):
    global failures
    failures += 1
    print("FAIL: " + msg, flush=True)


def connect(path):
    """Connects; EAGAIN (the listen queue is full for a moment) is retried for 5 s."""
    deadline = time.monotonic() + 5
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        try:
            s.connect(path)
            return s
        except BlockingIOError:
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def recv_line(s, buf, timeout):
    """(line, rest, state): state is line, eof, reset or timeout."""
    deadline = time.monotonic() + timeout
    while True:
        i = buf.find(b"\n")
        if i >= 0:
            return buf[:i], buf[i + 1:], "line"
        left = deadline - time.monotonic()
        if left <= 0:
            return None, buf, "timeout"
        s.settimeout(left)
        try:
            d = s.recv(65536)
        except TimeoutError:
            return None, buf, "timeout"
        except (ConnectionResetError, BrokenPipeError):
            return None, buf, "reset"
        if not d:
            return None, buf, "eof"
        buf += d


def answer(line):
    """The answer object, or None if it is not one with a boolean "ok"."""
    try:
        a = json.loads(line)
    except ValueError:
        return None
    return a if isinstance(a, dict) and isinstance(a.get("ok"), bool) else None


def is_error(a, want=None):
    return (a is not None and a["ok"] is False and isinstance(a.get("error"), str)
            and a["error"] != "" and (want is None or want in a["error"]))


def vpackctl(ctl, path, *args):
    t = time.monotonic()
    r = subprocess.run([ctl, *args, "--socket", path], capture_output=True, text=True,
                       timeout=60)
    return r.returncode, r.stdout + r.stderr, time.monotonic() - t


def short(b, n=100):
    s = b.decode(errors="replace") if isinstance(b, bytes) else str(b)
    return s if len(s) <= n else s[:n] + "..."


def proto(path):
    """Malformed requests each get {"ok": false, "error": ...}; the connection goes on."""
    cases = [
        ("invalid JSON (truncated)", b'{"op": "status"', "invalid JSON"),
        ("invalid JSON (text)", b"this is not json", "invalid JSON"),
        ("a JSON array", b'[{"op": "status"}]', None),
        ("a JSON string", b'"status"', None),
        ("no \"op\"", b'{"domain": "vpctl-a"}', None),
        ("\"op\" not a string", b'{"op": 5}', None),
        ("unknown op", b'{"op": "frobnicate"}', "unknown op"),
        ("explain without a domain", b'{"op": "explain"}', None),
        ("two objects on one line", b'{"op": "version"}{"op": "version"}', None),
        ("nesting 200 deep", b"[" * 200 + b"]" * 200, None),
    ]
    s, buf = connect(path), b""
    for name, line, want in cases:
        s.sendall(line + b"\n")
        got, buf, state = recv_line(s, buf, 3)
        if state != "line":
            fail(f"{name}: no answer ({state}); the connection is gone")
            s, buf = connect(path), b""
            continue
        a = answer(got)
        if is_error(a, want):
            ok(f"{name} -> {short(got)}")
        else:
            fail(f"{name}: expected an error{' about ' + want if want else ''}, got {short(got)}")
    # The same connection still works, and pipelined requests are answered in order.
    s.sendall(b'{"op": "version"}\n\n{"op": "status"}\n{"op": "snapshot"}\n')
    keys = []
    for _ in range(3):
        got, buf, state = recv_line(s, buf, 5)
        a = answer(got) if state == "line" else None
        keys.append(sorted(k for k in a if k != "ok") if a and a["ok"] else state)
    if keys == [["version"], ["status"], ["snapshot"]]:
        ok("after 10 bad requests the same connection answers 3 pipelined ones in order")
    else:
        fail(f"pipelined version/status/snapshot after bad requests: {keys}")
    s.close()


def longline(path, size, newline, idle_ms):
    """An over-long line gets an error answer or the client is dropped, long before the idle timeout."""
    what = f"{size // 1024} KiB line {'with' if newline else 'without'} newline"
    pre = b'{"op": "status", "pad": "'
    data = pre + b"x" * (size - len(pre) - 2) + b'"}' + (b"\n" if newline else b"")
    s = connect(path)
    t = time.monotonic()
    send_err = None
    try:
        s.sendall(data)
    except (BrokenPipeError, ConnectionResetError) as e:
        send_err = type(e).__name__
    limit = min(3.0, idle_ms / 2000)
    got, buf, state = recv_line(s, b"", limit)
    first = got
    if state == "line":
        a = answer(got)
        if a is None or a["ok"]:
            fail(f"{what}: answered {short(got)}")
            return
        _, _, state = recv_line(s, buf, limit)
    dt = time.monotonic() - t
    s.close()
    if state in ("eof", "reset") and dt < limit:
        how = f"error answer {short(first)}, then closed" if first is not None else "closed without an answer"
        ok(f"{what}: {how} ({state}) after {dt:.2f} s" + (f"; our send got {send_err}" if send_err else ""))
    else:
        fail(f"{what}: still connected after {dt:.2f} s (answer: {short(first) if first else 'none'})")


def halfclose(path, n):
    """n pipelined requests, then shutdown(SHUT_WR): all n answers arrive before EOF."""
    s = connect(path)
    s.sendall(b'{"op": "status"}\n' * n)
    s.shutdown(socket.SHUT_WR)
    buf, answers, state = b"", 0, None
    while True:
        got, buf, state = recv_line(s, buf, 5)
        if state != "line":
            break
        a = answer(got)
        if a and a["ok"]:
            answers += 1
    s.close()
    if answers == n and state == "eof":
        ok(f"{n} pipelined status requests then a half-close: {n} answers, then EOF")
    else:
        fail(f"{n} pipelined status requests then a half-close: {answers} answers, then {state} "
             "(answers queued when the client half-closed were thrown away)")


def idle(path, n, ctl, idle_ms):
    """n idle connections: status still answers; the idle timeout closes them."""
    socks, opened = [], []
    for _ in range(n):
        socks.append(connect(path))
        opened.append(time.monotonic())
    ok(f"{n} idle connections open")
    rc, out, dt = vpackctl(ctl, path, "status")
    if rc == 0 and dt < 3 and "vpctl-a" in out:
        ok(f"vpackctl status with {n} idle connections open: exit 0 in {dt:.2f} s")
    else:
        fail(f"vpackctl status with {n} idle connections open: exit {rc} in {dt:.2f} s: {short(out, 300)}")
    gone = refused = 0
    for s in socks:
        s.setblocking(False)  # a socket with a timeout waits even with MSG_DONTWAIT
        try:
            d = s.recv(4096, socket.MSG_DONTWAIT)
        except BlockingIOError:
            continue
        except ConnectionResetError:
            gone += 1
            continue
        if d:
            refused += 1
        else:
            gone += 1
    if gone == refused == 0:
        ok(f"all {n} idle connections still open (none refused) after the status call")
    else:
        fail(f"of {n} idle connections {refused} got an answer (refused?) and {gone} were closed")
    # The agent closes them once idle for idle_timeout_ms.
    p = select.poll()
    fds = {s.fileno(): i for i, s in enumerate(socks)}
    for s in socks:
        p.register(s, select.POLLIN)
    closed_after = {}
    deadline = time.monotonic() + idle_ms / 1000 + 4
    while len(closed_after) < n and time.monotonic() < deadline:
        for fd, _ in p.poll(200):
            i = fds[fd]
            try:
                d = socks[i].recv(4096, socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            except ConnectionResetError:
                d = b""
            if not d:
                closed_after[i] = time.monotonic() - opened[i]
                p.unregister(fd)
    for s in socks:
        s.close()
    if len(closed_after) < n:
        fail(f"only {len(closed_after)} of {n} idle connections closed by the agent within "
             f"{idle_ms / 1000 + 4:.0f} s (idle_timeout_ms {idle_ms})")
        return
    lo, hi = min(closed_after.values()), max(closed_after.values())
    if lo >= 0.9 * idle_ms / 1000:
        ok(f"the agent closed all {n} idle connections after {lo:.1f}..{hi:.1f} s (idle_timeout_ms {idle_ms})")
    else:
        fail(f"idle connections closed too early: after {lo:.1f} s (idle_timeout_ms {idle_ms})")


def flood(path, ctl, idle_ms, pid):
    """A client that sends status requests and never reads is dropped; others are served."""
    def rss():
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) // 1024
        except OSError:
            return -1
    rss0 = rss()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect(path)
    chunk = b'{"op": "status"}\n' * 1000
    sent, send_err, during = 0, None, None
    t = time.monotonic()
    while sent < 500000 and time.monotonic() - t < 30:
        try:
            s.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError, TimeoutError) as e:
            send_err = type(e).__name__
            break
        sent += 1000
        if sent == 2000:
            during = vpackctl(ctl, path, "status")
    flood_s = time.monotonic() - t
    # What is left to read, then EOF or reset if the agent dropped us.
    got, state = 0, "timeout"
    s.settimeout(3)
    try:
        while True:
            d = s.recv(1 << 20)
            if not d:
                state = "eof"
                break
            got += len(d)
    except ConnectionResetError:
        state = "reset"
    except TimeoutError:
        state = "timeout"
    s.close()
    if during is None:
        fail("flood: dropped before a status call could run during it")
    elif during[0] == 0 and during[2] < 3:
        ok(f"vpackctl status while the flood was queued: exit 0 in {during[2]:.2f} s")
    else:
        fail(f"vpackctl status during the flood: exit {during[0]} in {during[2]:.2f} s: {short(during[1], 300)}")
    # Backpressure (issue 27, A): vpackd stops reading a client with more
    # than 64 KiB unread, so its sends block, and closes it at its idle
    # timeout; its memory does not grow meanwhile.
    rss1 = rss()
    if (send_err in ("BrokenPipeError", "ConnectionResetError") or state in ("eof", "reset")) \
            and flood_s < idle_ms / 1000 + 5 and rss1 - rss0 < 32:
        ok(f"a client that never reads was held back, then dropped after {sent} requests in "
           f"{flood_s:.2f} s (send: {send_err or 'ok'}; then {got} bytes readable and {state}); "
           f"agent RSS {rss0} -> {rss1} MiB")
    else:
        fail(f"a client that never reads was not dropped in time: {sent} requests in "
             f"{flood_s:.2f} s, send {send_err}, then {state}; agent RSS {rss0} -> {rss1} MiB")
    rc, out, dt = vpackctl(ctl, path, "status")
    if rc == 0 and dt < 3:
        ok(f"vpackctl status after the flood: exit 0 in {dt:.2f} s")
    else:
        fail(f"vpackctl status after the flood: exit {rc}: {short(out, 300)}")


def full(path, n, ctl, idle_ms):
    """max_clients n: client n+1 is refused with a clear error; service resumes later."""
    def open_clients():
        socks = []
        for i in range(n):
            s = connect(path)
            s.sendall(b'{"op": "version"}\n')
            got, _, state = recv_line(s, b"", 3)
            a = answer(got) if state == "line" else None
            if not (a and a["ok"]):
                fail(f"client {i + 1} of {n}: {state} {short(got or b'')}")
                for x in socks + [s]:
                    x.close()
                return None
            socks.append(s)
        return socks

    def one_too_many(round_):
        s = connect(path)
        got, buf, state = recv_line(s, b"", 3)
        a = answer(got) if state == "line" else None
        end = recv_line(s, buf, 3)[2] if state == "line" else state
        s.close()
        if is_error(a, "too many clients") and end in ("eof", "reset"):
            ok(f"{round_}: client {n + 1} gets {short(got)} and is closed ({end})")
        else:
            fail(f"{round_}: client {n + 1} got {state} {short(got or b'')}, then {end}")

    def status_resumes(why):
        t = time.monotonic()
        while True:
            rc, out, _ = vpackctl(ctl, path, "status")
            if rc == 0:
                ok(f"vpackctl status answers again {time.monotonic() - t:.1f} s after {why}")
                return
            if time.monotonic() - t > 3:
                fail(f"vpackctl status still fails 3 s after {why}: exit {rc}: {short(out, 300)}")
                return
            time.sleep(0.1)

    socks = open_clients()
    if socks is None:
        return
    ok(f"{n} clients connected and answered")
    one_too_many("while full")
    rc, out, _ = vpackctl(ctl, path, "status")
    if rc == 1 and "too many clients" in out:
        ok(f"vpackctl status while full: exit 1: {out.strip()}")
    else:
        fail(f"vpackctl status while full: exit {rc}: {short(out, 300)}")
    for s in socks:
        s.close()
    status_resumes(f"the {n} clients closed")

    socks = open_clients()
    if socks is None:
        return
    one_too_many("full again")
    # Now they idle: the agent closes them after idle_timeout_ms.
    deadline = time.monotonic() + idle_ms / 1000 + 4
    open_ = list(socks)
    for s in socks:
        s.setblocking(False)
    while open_ and time.monotonic() < deadline:
        r, _, _ = select.select(open_, [], [], 0.2)
        for s in r:
            try:
                d = s.recv(4096, socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            except ConnectionResetError:
                d = b""
            if not d:
                open_.remove(s)
    for s in socks:
        s.close()
    if open_:
        fail(f"{len(open_)} of {n} idle clients still open {idle_ms / 1000 + 4:.0f} s later")
        return
    ok(f"the {n} idle clients timed out (idle_timeout_ms {idle_ms})")
    status_resumes(f"the {n} clients timed out")


if __name__ == "__main__":
    cmd, path = sys.argv[1], sys.argv[2]
    a = sys.argv[3:]
    if cmd == "proto":
        proto(path)
    elif cmd == "longline":
        longline(path, int(a[0]), a[1] == "newline", int(a[2]))
    elif cmd == "halfclose":
        halfclose(path, int(a[0]))
    elif cmd == "idle":
        idle(path, int(a[0]), a[1], int(a[2]))
    elif cmd == "flood":
        flood(path, a[0], int(a[1]), int(a[2]))
    elif cmd == "full":
        full(path, int(a[0]), a[1], int(a[2]))
    else:
        sys.exit(f"unknown command {cmd}")
    sys.exit(1 if failures else 0)
PYEOF

# clients CMD ARGS...: runs one client scenario and counts its FAIL lines.
clients() {
    local o r=0 n
    o=$(timeout 120 "$VP_PYTHON" "$work/clients.py" "$1" "$sock" "${@:2}" 2>&1) || r=$?
    printf '%s\n' "$o"
    n=$(grep -c '^FAIL' <<<"$o" || true)
    VP_FAILURES=$((VP_FAILURES + n))
    while IFS= read -r l; do VP_FAIL_LINES+=("$l"); done < <(grep '^FAIL' <<<"$o" || true)
    [ $r -eq 0 ] || [ "$n" -ne 0 ] || vp_fail "clients.py $1 exited $r"
}

# ------------------------------------------------------------------ setup
others=$(pgrep -x vpackd || true)
[ -z "$others" ] ||
    vp_log "note: another vpackd runs ($(tr "\n" " " <<<"$others")); it may pin the same guests"
vp_install_deps
vp_start_libvirtd
vp_build_guest
vp_destroy_all_test_domains

vp_define_start vpctl-a 1 idle "" "<vpack:powerpolicy xmlns:vpack='$NS' level='2'/>"
vp_define_start vpctl-b 1 idle "" "<vpack:powerpolicy xmlns:vpack='$NS' level='0'/>"
vp_wait_ready vpctl-a
vp_wait_ready vpctl-b
t_guests=$SECONDS

echo "== commands"
# The test waits for the plan next (vpackctl wait): the socket is enough.
start_agent socket --set control.max_clients=256
# Which package stays awake is the policy's choice (the busier one, by what
# else runs on the host at that moment). vpackctl wait watches on one
# connection: no process started per look.
act=0
t0=$SECONDS
run ctl wait --for packed --timeout 25
if [ $rc -eq 0 ] && [[ $out =~ ([0-9]+)\ active ]]; then
    act=${BASH_REMATCH[1]}
    vp_pass "vpackctl wait --for packed: exit 0 after $((SECONDS - t0)) s: $out"
else
    vp_fail "not packed within 25 s (vpackctl wait exit $rc): $out"
fi
# On the active package: vpctl-a, in the domains line under its block.
on_active() { awk -v p="$act" '$1 == "package" {cur = $2} /^  domains:/ && cur == p' <<<"$out"; }
run ctl status
if [ $rc -eq 0 ] && grep -Eq "^package $act +cpus [^ ]+ +ACTIVE " <<<"$out" &&
   grep -Eq "^package $((1 - act)) +cpus [^ ]+ +PARKED " <<<"$out" &&
   grep -Eq '^vpctl-a +2 +yes ' <<<"$out" && on_active | vp_has -w vpctl-a; then
    vp_pass "vpackctl status: package $act ACTIVE with vpctl-a on it, package $((1 - act)) PARKED, vpctl-a level 2 managed"
else
    vp_fail "vpackctl status (exit $rc):"$'\n'"$out"
fi
printf '%s\n' "$out" | sed 's/^/    /'
run ctl status --json
if [ $rc -eq 0 ] && "$VP_PYTHON" -c '
import json, sys
st = json.loads(sys.argv[1])
assert isinstance(st["packages"], list) and len(st["packages"]) == 2
assert isinstance(st["domains"], list)
a = [d for d in st["domains"] if d["name"] == "vpctl-a"]
assert a and a[0]["level"] == 2 and a[0]["managed"] is True
' "$out" 2>/dev/null; then
    vp_pass "vpackctl status --json parses, has packages (2) and domains (vpctl-a level 2)"
else
    vp_fail "vpackctl status --json (exit $rc): $out"
fi

run ctl explain vpctl-a
if [ $rc -eq 0 ] && grep -Eq '^level +2 \(set in' <<<"$out" && grep -Eq '^managed +yes' <<<"$out" &&
   grep -Eq '^reason +[^ -]' <<<"$out"; then
    vp_pass "vpackctl explain vpctl-a: level 2, managed, reason '$(sed -n 's/^reason *//p' <<<"$out")'"
else
    vp_fail "vpackctl explain vpctl-a (exit $rc):"$'\n'"$out"
fi
run ctl explain vpctl-b
if [ $rc -eq 0 ] && grep -Eq '^level +0 \(set in' <<<"$out" && grep -Eq '^reason +level 0' <<<"$out"; then
    vp_pass "vpackctl explain vpctl-b: level 0, reason '$(sed -n 's/^reason *//p' <<<"$out")'"
else
    vp_fail "vpackctl explain vpctl-b (exit $rc):"$'\n'"$out"
fi
run ctl explain vpctl-nosuch
if [ $rc -eq 1 ] && grep -q "vpctl-nosuch.*not running or not known" <<<"$out"; then
    vp_pass "explain of an unknown domain: exit 1: $out"
else
    vp_fail "explain of an unknown domain: exit $rc: $out"
fi
run ctl explain
[ $rc -eq 2 ] && vp_pass "explain without DOMAIN: exit 2 (usage)" || vp_fail "explain without DOMAIN: exit $rc: $out"
run ctl version
if [ $rc -eq 0 ] && grep -q '^vpackd ' <<<"$out"; then
    vp_pass "vpackctl version: $(tr '\n' ' ' <<<"$out")"
else
    vp_fail "vpackctl version (exit $rc): $out"
fi
run ctl rebalance --dry-run
if [ $rc -eq 0 ] && grep -qF "(dry run: nothing applied)" <<<"$out"; then
    vp_pass "rebalance --dry-run: exit 0, $(tr '\n' ' ' <<<"$out")"
else
    vp_fail "rebalance --dry-run (exit $rc): $out"
fi
run ctl rebalance
[ $rc -eq 0 ] && vp_pass "rebalance as root: exit 0 ($(tr '\n' ' ' <<<"$out"))" ||
    vp_fail "rebalance as root (exit $rc): $out"

echo "== wait"
# vpackctl wait on the real agent: met (0), timed out with the last state
# (1), a condition it cannot read (2); the agent away or going away (3) is
# under "offline".
# Which package stays awake is the policy's choice: either order is right.
one_parked='^packages [0-9]+ (active|parked), [0-9]+ (active|parked); demand [0-9.]+ CPUs$'
run ctl wait --for parked=1 --timeout 10
[ $rc -eq 0 ] && [[ $out =~ $one_parked ]] && [[ $out == *" parked"* ]] &&
    vp_pass "wait --for parked=1: exit 0: $out" || vp_fail "wait --for parked=1: exit $rc: $out"
run ctl wait --for level=vpctl-a:2 --timeout 10
[ $rc -eq 0 ] && [ "$out" = "domain vpctl-a level 2" ] &&
    vp_pass "wait --for level=vpctl-a:2: exit 0: $out" || vp_fail "wait --for level=vpctl-a:2: exit $rc: $out"
# Two idle guests stay packed: spread times out, after 2 s and not much more.
t0=${EPOCHREALTIME/./}
rc=0
ctl wait --for spread --timeout 2 >"$work/wait.out" 2>"$work/wait.err" || rc=$?
ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
if [ $rc -eq 1 ] && [[ $(cat "$work/wait.out") =~ $one_parked ]] && grep -q ' parked' "$work/wait.out" &&
   [ "$(cat "$work/wait.err")" = "vpackctl: wait: spread not reached within 2 s" ] &&
   [ $ms -ge 2000 ] && [ $ms -lt 4000 ]; then
    vp_pass "wait --for spread --timeout 2: exit 1 after $ms ms, last state: $(cat "$work/wait.out")"
else
    vp_fail "wait --for spread --timeout 2: exit $rc after $ms ms: $(cat "$work/wait.out" "$work/wait.err")"
fi
run ctl wait --for level=vpctl-b:2 --timeout 1
[ $rc -eq 1 ] && [[ $out == *"domain vpctl-b level 0"* ]] &&
    vp_pass "wait --for level=vpctl-b:2 --timeout 1: exit 1, vpctl-b level 0" ||
    vp_fail "wait --for level=vpctl-b:2 --timeout 1: exit $rc: $out"
run ctl wait --for sideways
[ $rc -eq 2 ] && [ "$out" = "vpackctl: wait: --for 'sideways': unknown condition (expected packed, spread, parked=N or level=DOMAIN:N)" ] &&
    vp_pass "wait --for sideways: exit 2: $out" || vp_fail "wait --for sideways: exit $rc: $out"

echo "== non-root"
if ! id "$TESTUSER" >/dev/null 2>&1; then
    useradd -M -r -s /usr/sbin/nologin "$TESTUSER"
    # shellcheck disable=SC2034 # read at the exit (vp_on_exit)
    created_user=1
fi
vp_public_copy VPACKCTL_PUB "$VPACKCTL"   # the checkout may be out of the user's reach
asuser() { runuser -u "$TESTUSER" -- "$VPACKCTL_PUB" "$@" --socket "$sock"; }
run asuser rebalance
if [ $rc -eq 1 ] && grep -q "permission denied" <<<"$out"; then
    vp_pass "$TESTUSER: rebalance refused, exit 1: $out"
else
    vp_fail "$TESTUSER: rebalance: exit $rc: $out"
fi
run asuser status
[ $rc -eq 0 ] && grep -q vpctl-a <<<"$out" && vp_pass "$TESTUSER: status works (exit 0)" ||
    vp_fail "$TESTUSER: status: exit $rc: $out"
run asuser rebalance --dry-run
if [ $rc -eq 0 ] && grep -qF "(dry run: nothing applied)" <<<"$out"; then
    vp_pass "$TESTUSER: rebalance --dry-run works (exit 0)"
else
    vp_fail "$TESTUSER: rebalance --dry-run: exit $rc: $out"
fi

echo "== hostile clients"
t_hostile=$SECONDS
clients longline $((200 * 1024)) nonewline $IDLE_MS
clients longline $((100 * 1024)) newline $IDLE_MS
clients proto
clients halfclose 200
clients idle 200 "$VPACKCTL" $IDLE_MS
clients flood "$VPACKCTL" $IDLE_MS "$agent_pid"
grep -q "dropping a client that does not read" "$work/vpackd.log" &&
    vp_pass "the agent logged the drop" || vp_fail "no drop logged"
alive "$agent_pid" && vp_pass "vpackd still running after the hostile clients" || vp_fail "vpackd died"
run ctl status
[ $rc -eq 0 ] && vp_pass "vpackctl status after the hostile clients: exit 0" ||
    vp_fail "vpackctl status after the hostile clients: exit $rc: $out"
t_hostile=$((SECONDS - t_hostile))

echo "== offline: set-policy without the agent"
# A wait for what two packages never show (both parked) is cut off by the stop: 3.
# Root's vpackctl talks to the admin socket beside $sock, which it names.
ctl wait --for parked=2 --timeout 60 >"$work/wait.out" 2>&1 &
wait_pid=$!
sleep 1
stop_agent
[ $stop_rc -eq 0 ] && vp_pass "vpackd exited 0 on SIGTERM" || vp_fail "vpackd exited $stop_rc on SIGTERM"
rc=0; wait "$wait_pid" || rc=$?
if [ $rc -eq 3 ] && grep -qF "vpackctl: cannot reach vpackd at $work/vpackd-admin.sock: the agent closed the connection" "$work/wait.out"; then
    vp_pass "a wait cut off by the agent's stop: exit 3: $(cat "$work/wait.out")"
else
    vp_fail "a wait cut off by the agent's stop: exit $rc: $(cat "$work/wait.out")"
fi
run "$VPACKCTL" set-policy vpctl-b 2 --live
if [ $rc -eq 0 ]; then
    vp_pass "set-policy vpctl-b 2 --live without the agent: exit 0: $out"
else
    vp_fail "set-policy vpctl-b 2 --live without the agent: exit $rc: $out"
    if [ $rc -eq 2 ]; then
        # Go on with the options first, so that the rest is still checked.
        run "$VPACKCTL" set-policy --live vpctl-b 2
        echo "    (set-policy --live vpctl-b 2: exit $rc: $out)"
    fi
fi
meta=$(vp_virsh metadata vpctl-b --uri "$NS" --live 2>&1 || true)
if grep -Eq "level=[\"']2[\"']" <<<"$meta"; then
    vp_pass "virsh metadata vpctl-b --live: $meta"
else
    vp_fail "virsh metadata vpctl-b --live: $meta"
fi
run ctl status
if [ $rc -eq 3 ] && grep -q "cannot reach vpackd" <<<"$out"; then
    vp_pass "status without the agent: exit 3: $out"
else
    vp_fail "status without the agent: exit $rc: $out"
fi
run ctl wait --for packed --timeout 5
if [ $rc -eq 3 ] && [ "$out" = "vpackctl: cannot reach vpackd at $sock: No such file or directory (is vpackd running?)" ]; then
    vp_pass "wait without the agent: exit 3 at once: $out"
else
    vp_fail "wait without the agent: exit $rc: $out"
fi

echo "== restart; default max_clients"
# The test asks the agent about vpctl-b next (explain): libvirt connected.
start_agent libvirt
# Level 2 from the live metadata, and placed by the plan (no longer "level 0: not managed").
wait_b2() {
    local e
    e=$(ctl explain vpctl-b 2>/dev/null) && grep -Eq '^level +2 \(set in' <<<"$e" &&
        grep -Eq '^reason +[^ -]' <<<"$e" && ! grep -Eq '^reason +level 0' <<<"$e"
}
if t=$(wait_for 10 wait_b2); then
    run ctl explain vpctl-b
    if grep -Eq '^managed +yes' <<<"$out"; then
        vp_pass "after the restart, explain vpctl-b: level 2 (set in the metadata), managed, packages $(sed -n 's/^packages *//p' <<<"$out"), reason '$(sed -n 's/^reason *//p' <<<"$out")' (${t}s)"
    else
        vp_fail "explain vpctl-b after the restart:"$'\n'"$out"
    fi
else
    vp_fail "vpctl-b not at level 2 after the restart: $(ctl explain vpctl-b 2>&1 | tr '\n' '|')"
fi
clients full 64 "$VPACKCTL" $IDLE_MS
alive "$agent_pid" && vp_pass "vpackd still running" || vp_fail "vpackd died"

echo "== stop"
stop_agent
[ $stop_rc -eq 0 ] && vp_pass "vpackd exited 0 on SIGTERM" || vp_fail "vpackd exited $stop_rc on SIGTERM"
[ ! -e "$sock" ] && vp_pass "control socket removed on exit" || vp_fail "$sock left behind"

echo
echo "time: $((SECONDS - t_start)) s in all (guests ready after $((t_guests - t_start)) s, hostile clients $t_hostile s)"
vp_verdict
