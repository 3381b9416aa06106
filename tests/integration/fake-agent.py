# SPDX-License-Identifier: MIT
"""A stand-in for vpackd's control socket, for test-vpackctl-offline.sh:
vpackctl's answers without an agent, libvirt or root.

  fake-agent.py SOCK ANSWERS LOG

Listens on SOCK and answers the k-th request line of each connection with
the k-th line of the file ANSWERS; after the last line it repeats it,
unless that line is CLOSE, then it closes the connection. Appends
"connect" and "request" lines to LOG as they come, and prints "ready"
once listening. Runs until killed.
"""
import os
import socket
import sys


def serve(conn, answers, log):
    k = 0
    buf = b""
    with conn:
        while True:
            data = conn.recv(65536)
            if not data:
                return
            buf += data
            while b"\n" in buf:
                _, buf = buf.split(b"\n", 1)
                log.write("request\n")
                line = answers[min(k, len(answers) - 1)]
                k += 1
                if line == "CLOSE":
                    return
                conn.sendall(line.encode() + b"\n")


def main():
    path, answers_file, log_file = sys.argv[1:4]
    with open(answers_file) as f:
        answers = [line.rstrip("\n") for line in f if line.strip()]
    if os.path.exists(path):
        os.unlink(path)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)
    print("ready", flush=True)
    with open(log_file, "a", buffering=1) as log:
        while True:
            conn, _ = srv.accept()
            log.write("connect\n")
            serve(conn, answers, log)


if __name__ == "__main__":
    main()
