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
  latency SOCK SECONDS        a status request every 0.1 s on a new
                              connection; the answer times
"""
import fcntl
import json
import os
import socket
import sys
import threading
import time


def connect(path, timeout=5):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    return s


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
    print(f"count={len(times)} failed={bad} max_ms={times[-1]:.0f} "
          f"median_ms={times[len(times) // 2]:.0f}", flush=True)


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
    elif cmd == "latency":
        latency(a[0], float(a[1]))
    else:
        sys.exit(f"unknown command {cmd}")
