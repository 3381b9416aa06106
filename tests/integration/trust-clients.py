# SPDX-License-Identifier: MIT
"""Clients of vpackd's control socket for test-trust.sh, run as root or as
an unprivileged user. Each command prints what it saw as key=value words
(and a human line); the shell script decides what passes.

  hog SOCK N MODE SECONDS     N connections; MODE trickle (one space a
                              second, never a newline) or polite (a whole
                              "version" request a second); prints
                              "ready ..." once connected, then when each
                              was closed by the agent
  send SOCK LINE              one request, prints the answer line
  forked SOCK LINE            the request on a connection whose connect()ing
                              process has exited (and been reaped) before the
                              agent accepts it
  lockhold PATH SECONDS       open PATH read-only and flock it, then hold it
  burst SOCK N                N dry-run rebalance requests pipelined on one
                              connection, all answers read
  flood SOCK N SECONDS        N connections pipelining status requests
                              as fast as the socket takes them, never
                              reading an answer (issue 27, A); prints
                              "ready ..." once connected, then how much
                              was sent and how many the agent closed
  busy SOCK N SECONDS SIZE    N connections, each sending status requests
                              padded to SIZE bytes as fast as it reads the
                              answers (reconnecting when closed; issue 27,
                              C); prints how many were answered
  scrape URL N SECONDS        N keep-alive HTTP connections getting URL
                              flat out (issue 27, C); prints how many
                              answered and how many distinct bodies came
  latency SOCK SECONDS        a status request every 0.1 s on a new
                              connection; the answer times
  storm SOCK HOLD PROCS SECONDS STOP
                              issue 27, B: HOLD connections held open (the
                              unprivileged pool's slots), then PROCS
                              processes connecting and closing at once in a
                              loop for SECONDS or until the file STOP
                              exists (each connection past the
                              pool is accepted only to be refused); prints
                              "ready held=N" once held, then how many
                              connects went through and how many found the
                              listen queue full (EAGAIN)
  hammer SOCK SECONDS         for tests/bench/soak.sh: everything above at
                              once, for SECONDS: 48 connections held open
                              with a byte of a request every 5 s (never a
                              whole line; reopened when the agent closes
                              them), 8 polite clients, a burst of 2000
                              pipelined dry runs every 15 s, and every 2 s
                              one connection with garbage, an oversized
                              line, an unknown op or a refused rebalance
"""
import fcntl
import json
import os
import random
import socket
import sys
import threading
import time


def connect(path, timeout=5):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    return s


def is_ok(line):
    """True for an answer {"ok": true, ...}, with or without the blank."""
    return line.startswith('{"ok":true') or '"ok": true' in line[:12]


def read_line(s, timeout):
    """The first line the agent sends, or a word for what happened instead."""
    s.settimeout(timeout)
    buf = b""
    try:
        while b"\n" not in buf:
            d = s.recv(65536)
            if not d:
                return "eof" if not buf else buf.decode(errors="replace")
            buf += d
    except socket.timeout:
        return "timeout"
    except (ConnectionResetError, BrokenPipeError):
        return "reset"
    return buf.split(b"\n")[0].decode(errors="replace")


def hog(path, n, mode, seconds):
    socks, opened, refused = [], [], 0
    for _ in range(n):
        s = connect(path)
        socks.append(s)
        opened.append(time.monotonic())
    # A refused connection gets "too many clients" and is closed at once.
    time.sleep(0.5)
    for s in socks:
        s.setblocking(False)
        try:
            s.recv(4096)   # the error line, or EOF
            refused += 1
        except BlockingIOError:
            pass
        except ConnectionResetError:
            refused += 1
    print(f"ready connected={n - refused} refused={refused}", flush=True)
    closed = {}
    end = time.monotonic() + seconds
    while time.monotonic() < end and len(closed) < n:
        for i, s in enumerate(socks):
            if i in closed:
                continue
            try:
                if mode == "trickle":
                    s.send(b" ")
                else:
                    s.send(b'{"op":"version"}\n')
                    s.settimeout(2)
                    if read_line(s, 2) in ("eof", "reset", "timeout"):
                        raise ConnectionResetError
                    s.setblocking(False)
                    continue
                d = s.recv(4096)
                if not d:
                    raise ConnectionResetError
            except BlockingIOError:
                pass
            except (ConnectionResetError, BrokenPipeError, OSError):
                closed[i] = time.monotonic() - opened[i]
        time.sleep(1)
    for s in socks:
        s.close()
    if closed:
        t = sorted(closed.values())
        print(f"closed={len(closed)} of={n} first={t[0]:.1f} last={t[-1]:.1f}", flush=True)
    else:
        print(f"closed=0 of={n} first=- last=-", flush=True)


def send(path, line):
    s = connect(path, 10)
    try:
        s.sendall(line.encode() + b"\n")
    except OSError:
        pass  # refused: the agent's answer may still be there to read
    print(read_line(s, 10), flush=True)


def forked(path, line):
    """The connect()ing process is gone (and reaped) when the agent looks at it."""
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        try:
            s = connect(path, 10)
            socket.send_fds(child, [b"x"], [s.fileno()])
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    _, fds, _, _ = socket.recv_fds(parent, 1, 1)
    s = socket.socket(fileno=fds[0])
    print(f"ready connector={pid} gone={not os.path.exists('/proc/%d' % pid)}", flush=True)
    s.sendall(line.encode() + b"\n")
    print(read_line(s, 30), flush=True)


def lockhold(path, seconds):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        print(f"open={e.errno} ({e.strerror})", flush=True)
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        print("open=0 locked=1", flush=True)
    except OSError as e:
        print(f"open=0 locked=0 ({e.strerror})", flush=True)
    time.sleep(seconds)
    os.close(fd)


def burst(path, n):
    s = connect(path, 30)
    got = {"ok": 0, "err": 0, "first": ""}

    def reader():
        buf, seen = b"", 0
        try:
            while seen < n:
                d = s.recv(1 << 20)
                if not d:
                    break
                buf += d
                *lines, buf = buf.split(b"\n")
                for ln in lines:
                    seen += 1
                    a = json.loads(ln)
                    got["ok" if a.get("ok") else "err"] += 1
                    got["first"] = got["first"] or ("" if a.get("ok") else a.get("error", ""))
        except (OSError, ValueError):
            pass

    t = threading.Thread(target=reader)
    t.start()
    t0 = time.monotonic()
    try:
        s.sendall(b'{"op":"rebalance","dry_run":true}\n' * n)
    except OSError:
        pass
    t.join(60)
    print(f"answers={got['ok']} errors={got['err']} seconds={time.monotonic() - t0:.2f} "
          f"{got['first']}", flush=True)


def latency(path, seconds):
    times, bad = [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        try:
            s = connect(path, 5)
            s.sendall(b'{"op":"status"}\n')
            a = json.loads(read_line(s, 5))
            s.close()
            if not a.get("ok"):
                bad += 1
        except (OSError, ValueError):
            bad += 1
        times.append((time.monotonic() - t0) * 1000)
        time.sleep(0.1)
    times.sort()
    over = sum(1 for t in times if t >= 100)
    print(f"count={len(times)} failed={bad} max_ms={times[-1]:.0f} "
          f"median_ms={times[len(times) // 2]:.0f} "
          f"p99_ms={times[min(len(times) - 1, len(times) * 99 // 100)]:.1f} "
          f"over100={over}", flush=True)


def flood(path, n, seconds):
    """n connections pipelining status requests and never reading; one the
    agent closes is opened again (at most one try each 0.2 s), so that the
    pressure lasts the whole run."""
    import select
    req = b'{"op":"status"}\n' * 256

    def open_one():
        s = connect(path, 5)
        s.setblocking(False)
        return s

    live = {}
    for _ in range(n):
        try:
            s = open_one()
            live[s.fileno()] = s
        except OSError:
            break
    print(f"ready connected={len(live)}", flush=True)
    sent, closed, reopened, refused = 0, 0, 0, 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if len(live) < n:
            try:
                s = open_one()
                live[s.fileno()] = s
                reopened += 1
            except OSError:
                refused += 1
        if not live:
            time.sleep(0.2)
            continue
        _, w, _ = select.select([], list(live), [], 0.2)
        for fd in w:
            try:
                sent += live[fd].send(req)
            except BlockingIOError:
                pass
            except OSError:
                live.pop(fd).close()
                closed += 1
    print(f"sent_mb={sent / 1e6:.1f} closed={closed} reopened={reopened} refused={refused} "
          f"open={len(live)}", flush=True)
    for s in live.values():
        s.close()


def leave(path, n, quiet):
    """n connections pipeline status requests and read nothing until each
    socket has taken no byte for quiet seconds (the agent stopped reading
    them: their unread answers or their pool's hold them), then all close at
    once; then a new connection asks for the version every 50 ms until one
    is answered (not "too many clients"), for 10 s at most."""
    import select
    req = b'{"op":"status"}\n' * 256
    socks, last = [], {}
    for _ in range(n):
        s = connect(path, 5)
        s.setblocking(False)
        socks.append(s)
        last[s.fileno()] = time.monotonic()
    end = time.monotonic() + 30
    while time.monotonic() < end:
        now = time.monotonic()
        if all(now - last[s.fileno()] >= quiet for s in socks):
            break
        _, w, _ = select.select([], socks, [], 0.1)
        for s in w:
            try:
                if s.send(req) > 0:
                    last[s.fileno()] = time.monotonic()
            except OSError:
                pass   # full (EAGAIN), or closed by the agent
    now = time.monotonic()
    stalled = sum(1 for s in socks if now - last[s.fileno()] >= quiet)
    for s in socks:
        s.close()
    t0 = time.monotonic()
    answer, tries = "none", 0
    while time.monotonic() - t0 < 10:
        tries += 1
        try:
            c = connect(path, 2)
            c.sendall(b'{"op":"version"}\n')
            answer = read_line(c, 2)
            c.close()
        except OSError as e:
            answer = f"error {e}"
        if is_ok(answer):
            break
        time.sleep(0.05)
    free_ms = (time.monotonic() - t0) * 1000
    print(f"stalled={stalled} of={n} free_ms={free_ms:.0f} tries={tries} last={answer[:60]}",
          flush=True)


def busy(path, n, seconds, size):
    import selectors
    pad = max(0, size - len(b'{"op":"status"}') - 1)
    req = b'{"op":"status"' + b" " * pad + b"}\n"
    sel = selectors.DefaultSelector()
    st = {"answers": 0, "errors": 0, "closed": 0, "refused": 0}
    end = time.monotonic() + seconds

    def open_one():
        try:
            s = connect(path, 5)
        except OSError:
            st["refused"] += 1
            return
        s.setblocking(False)
        c = {"s": s, "out": req, "buf": b""}
        sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE, c)

    def drop(c):
        sel.unregister(c["s"])
        c["s"].close()
        st["closed"] += 1
        if time.monotonic() < end:
            open_one()

    for _ in range(n):
        open_one()
    print(f"ready connected={len(sel.get_map())}", flush=True)
    while time.monotonic() < end and sel.get_map():
        for key, ev in sel.select(0.2):
            c = key.data
            try:
                if ev & selectors.EVENT_WRITE and c["out"]:
                    c["out"] = c["out"][c["s"].send(c["out"]):]
                    if not c["out"]:
                        sel.modify(c["s"], selectors.EVENT_READ, c)
                if ev & selectors.EVENT_READ:
                    d = c["s"].recv(1 << 20)
                    if not d:
                        drop(c)
                        continue
                    c["buf"] += d
                    while b"\n" in c["buf"]:
                        ln, c["buf"] = c["buf"].split(b"\n", 1)
                        st["answers" if is_ok(ln.decode(errors="replace")) else "errors"] += 1
                        c["out"] = req
                        sel.modify(c["s"], selectors.EVENT_READ | selectors.EVENT_WRITE, c)
            except BlockingIOError:
                pass
            except OSError:
                drop(c)
    print(" ".join(f"{k}={v}" for k, v in st.items()), flush=True)


def scrape(url, n, seconds):
    import http.client
    import urllib.parse
    u = urllib.parse.urlsplit(url)
    st = {"answers": 0, "failed": 0}
    bodies = set()
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def worker():
        c, ok, bad, seen = None, 0, 0, set()
        while time.monotonic() < end:
            try:
                if c is None:
                    c = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
                c.request("GET", u.path)
                r = c.getresponse()
                body = r.read()
                if r.status == 200:
                    ok += 1
                    seen.add(hash(body))
                else:
                    bad += 1
            except (OSError, http.client.HTTPException):
                bad += 1
                if c is not None:
                    c.close()
                c = None
                time.sleep(0.01)
        with lock:
            st["answers"] += ok
            st["failed"] += bad
            bodies.update(seen)

    ts = [threading.Thread(target=worker) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(f"answers={st['answers']} failed={st['failed']} bodies={len(bodies)} "
          f"per_s={st['answers'] / seconds:.0f}", flush=True)


class Hammer:
    """The soak's unprivileged client: every way test-trust.sh tries to lock
    root out, at once and for a long time. Counts what happened."""

    def __init__(self, path, seconds):
        self.path, self.end = path, time.monotonic() + seconds
        self.lock = threading.Lock()
        self.n = {"held_opened": 0, "held_closed": 0, "refused": 0,
                  "polite_answers": 0, "polite_lost": 0, "bursts": 0,
                  "burst_answers": 0, "odd_sent": 0, "odd_answered": 0,
                  "connect_errors": 0}

    def count(self, key, by=1):
        with self.lock:
            self.n[key] += by

    def running(self):
        return time.monotonic() < self.end

    def open(self):
        try:
            return connect(self.path, 5)
        except OSError:
            self.count("connect_errors")
            return None

    def holder(self, slots=48):
        """Connections that send a byte of a request every 5 s, never a
        newline; the agent must close each at its whole-line deadline."""
        req = b'{"op":"status"}'
        held = []          # [socket, bytes sent]
        while self.running():
            while len(held) < slots and self.running():
                s = self.open()
                if s is None:
                    break
                s.setblocking(False)
                held.append([s, 0])
                self.count("held_opened")
            for h in list(held):
                s, sent = h
                try:
                    d = s.recv(4096)
                    if not d:
                        raise ConnectionResetError
                    if b"too many clients" in d:
                        self.count("refused")
                        raise ConnectionResetError
                except BlockingIOError:
                    try:
                        s.send(req[sent % len(req):sent % len(req) + 1])
                        h[1] = sent + 1
                        continue
                    except BlockingIOError:
                        continue
                    except OSError:
                        pass
                except OSError:
                    pass
                self.count("held_closed")
                s.close()
                held.remove(h)
            time.sleep(5)
        for s, _ in held:
            s.close()

    def polite(self):
        s = None
        while self.running():
            try:
                if s is None:
                    s = connect(self.path, 5)
                s.sendall(b'{"op":"version"}\n')
                if read_line(s, 5) in ("eof", "reset", "timeout"):
                    raise ConnectionResetError
                self.count("polite_answers")
            except OSError:
                self.count("polite_lost")
                if s is not None:
                    s.close()
                s = None
            time.sleep(1)
        if s is not None:
            s.close()

    def bursts(self, n=2000):
        while self.running():
            s = self.open()
            if s is not None:
                answers = 0
                try:
                    s.sendall(b'{"op":"rebalance","dry_run":true}\n' * n)
                    s.settimeout(60)
                    buf = b""
                    while answers < n:
                        d = s.recv(1 << 20)
                        if not d:
                            break
                        buf += d
                        answers += buf.count(b"\n")
                        buf = buf[buf.rfind(b"\n") + 1:]
                except OSError:
                    pass
                s.close()
                self.count("bursts")
                self.count("burst_answers", answers)
            time.sleep(15)

    def odd(self):
        kinds = [lambda: bytes(random.getrandbits(8) for _ in range(200)).replace(b"\n", b"") + b"\n",
                 lambda: b"x" * (256 * 1024),
                 lambda: b'{"op":"no-such-op"}\n',
                 lambda: b'{"op":"rebalance"}\n',
                 lambda: b'{"op":"status","extra":' + b"[" * 5000 + b"\n",
                 lambda: b"\x00\xff\n"]
        while self.running():
            s = self.open()
            if s is not None:
                try:
                    s.sendall(random.choice(kinds)())
                    self.count("odd_sent")
                    if read_line(s, 5) not in ("eof", "reset", "timeout"):
                        self.count("odd_answered")
                except OSError:
                    pass
                s.close()
            time.sleep(2)

    def run(self):
        random.seed(14)
        ts = [threading.Thread(target=self.holder), threading.Thread(target=self.bursts),
              threading.Thread(target=self.odd)]
        ts += [threading.Thread(target=self.polite) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print(" ".join(f"{k}={v}" for k, v in self.n.items()), flush=True)


def churn(path, seconds, stop, out):
    """connect() and close() as fast as the socket takes them."""
    import errno
    addr, done, full, other, n = path, 0, 0, 0, 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        n += 1
        if n % 1000 == 0 and os.path.exists(stop):
            break
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(addr)
            done += 1
        except BlockingIOError:
            full += 1
        except OSError as e:
            if e.errno == errno.EAGAIN:
                full += 1
            else:
                other += 1
        s.close()
    os.write(out, f"{done} {full} {other}\n".encode())


def storm(path, hold, procs, seconds, stop):
    held = []
    for _ in range(hold):
        try:
            held.append(connect(path, 5))
        except OSError:
            break
    print(f"ready held={len(held)}", flush=True)
    r, w = os.pipe()
    pids = []
    for _ in range(procs):
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                churn(path, seconds, stop, w)
            finally:
                os._exit(0)
        pids.append(pid)
    os.close(w)
    for pid in pids:
        os.waitpid(pid, 0)
    with os.fdopen(r) as f:
        counts = [list(map(int, ln.split())) for ln in f if ln.strip()]
    done, full, other = (sum(c[i] for c in counts) for i in range(3))
    # The held ones still open: a slot the agent closed says it was dropped.
    open_ = 0
    for s in held:
        s.setblocking(False)
        try:
            open_ += 0 if s.recv(1) == b"" else 1
        except BlockingIOError:
            open_ += 1
        except OSError:
            pass
        s.close()
    print(f"connects={done} eagain={full} other_errors={other} held_open={open_}", flush=True)


if __name__ == "__main__":
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "hog":
        hog(a[0], int(a[1]), a[2], float(a[3]))
    elif cmd == "send":
        send(a[0], a[1])
    elif cmd == "forked":
        forked(a[0], a[1])
    elif cmd == "lockhold":
        lockhold(a[0], float(a[1]))
    elif cmd == "burst":
        burst(a[0], int(a[1]))
    elif cmd == "flood":
        flood(a[0], int(a[1]), float(a[2]))
    elif cmd == "leave":
        leave(a[0], int(a[1]), float(a[2]))
    elif cmd == "busy":
        busy(a[0], int(a[1]), float(a[2]), int(a[3]))
    elif cmd == "scrape":
        scrape(a[0], int(a[1]), float(a[2]))
    elif cmd == "latency":
        latency(a[0], float(a[1]))
    elif cmd == "storm":
        storm(a[0], int(a[1]), int(a[2]), float(a[3]), a[4])
    elif cmd == "hammer":
        Hammer(a[0], float(a[1])).run()
    else:
        sys.exit(f"unknown command {cmd}")
