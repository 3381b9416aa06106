#!/bin/bash
# SPDX-License-Identifier: MIT
#
# hook-memory.sh VPACK_HOOK: the hook's memory and time on huge domains
# (issue 14, item 8). A domain of 15 MiB with 360,000 guest NUMA cells and
# as many <memnode>s once made `vpack-hook --dump` use 1.18 GB and 8.7 s (a
# 2 KiB CPU set per memnode). Generated here, it must be refused with a
# one-line message within the limits; a domain at vpack's cell limit
# (16,384 cells and memnodes) must be read within them, every memnode in
# the record, and one of 20,000 cells is refused by the cell limit. Without sanitizers the limit is an address-space ulimit
# (ulimit -v, 256 MiB; the old reader needed 1,156 MiB and 2.8 s for the
# huge domain here, and without enough memory it let the domain start
# unchecked); AddressSanitizer reserves terabytes of address space, so
# there (VPACK_SANITIZE set) the peak RSS is measured instead.
set -euo pipefail
hook=${1:?usage: hook-memory.sh VPACK_HOOK}
limit_mib=${VPACK_HOOK_MEMORY_MIB:-256}
limit_s=${VPACK_HOOK_SECONDS:-5}
work=$(mktemp -d /tmp/vpack-hook-memory.XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0

# gen CELLS FILE: a domain with CELLS guest NUMA cells and a memnode for each.
gen() {
    python3 - "$1" > "$2" <<'EOF'
import sys
n = int(sys.argv[1])
out = sys.stdout
out.write("<domain type='qemu'><name>huge</name><memory unit='KiB'>%d</memory>"
          "<vcpu>1</vcpu><cpu><numa>\n" % (n * 1024))
# As short as vpack's reader takes them: 15 MiB for 360,000 cells.
out.write("<cell/>" * n)
out.write("</numa></cpu><numatune>")
for i in range(n):
    out.write("<memnode cellid='%d' nodeset='0'/>" % i)
out.write("</numatune><os><type>hvm</type></os></domain>\n")
EOF
}

# run NAME FILE ARGS...: the hook on FILE under the limits; sets rc, secs,
# peak (KiB, sanitized builds), out, err.
run() {
    local name=$1 file=$2
    shift 2
    python3 - "$limit_mib" "$limit_s" "$file" "$work/$name" "$@" <<'EOF'
import os, resource, subprocess, sys, time
limit_mib, limit_s, infile, prefix = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
cmd = sys.argv[5:]
def limit():
    if not os.environ.get("VPACK_SANITIZE"):
        resource.setrlimit(resource.RLIMIT_AS, (limit_mib << 20, limit_mib << 20))
t0 = time.monotonic()
with open(infile, "rb") as i, open(prefix + ".out", "wb") as o, open(prefix + ".err", "wb") as e:
    try:
        rc = subprocess.run(cmd, stdin=i, stdout=o, stderr=e, preexec_fn=limit,
                            timeout=limit_s * 4).returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
secs = time.monotonic() - t0
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(rc, "%.2f" % secs, peak)
EOF
}

check() {   # NAME WANT_RC FILE ARGS...
    local name=$1 want=$2 file=$3 rc secs peak
    shift 3
    read -r rc secs peak < <(run "$name" "$file" "$@")
    local err
    err=$(head -c 300 "$work/$name.err")
    echo "$name: exit $rc in ${secs}s, peak RSS $((peak / 1024)) MiB: $err"
    if [ "$rc" != "$want" ]; then
        echo "FAIL: $name: exit $rc, expected $want"; failures=$((failures + 1))
    fi
    if ! awk -v s="$secs" -v l="$limit_s" 'BEGIN {exit !(s <= l)}'; then
        echo "FAIL: $name: ${secs}s, more than ${limit_s}s"; failures=$((failures + 1))
    fi
    if [ -n "${VPACK_SANITIZE:-}" ] && [ $((peak / 1024)) -gt $((limit_mib * 2)) ]; then
        echo "FAIL: $name: peak RSS $((peak / 1024)) MiB (sanitized limit $((limit_mib * 2)) MiB)"
        failures=$((failures + 1))
    fi
}

gen 360000 "$work/huge.xml"
gen 16384 "$work/limit.xml"
gen 20000 "$work/cells.xml"
echo "huge.xml: $(stat -c %s "$work/huge.xml") bytes; limit.xml: $(stat -c %s "$work/limit.xml") bytes"
echo "limits: ${limit_mib} MiB of address space (RSS x2 when sanitized), ${limit_s} s"

check dump-huge 1 "$work/huge.xml" "$hook" --dump
grep -q "more than 262144 elements" "$work/dump-huge.err" ||
    { echo "FAIL: dump-huge: no clear message"; failures=$((failures + 1)); }
[ "$(wc -l < "$work/dump-huge.err")" -eq 1 ] ||
    { echo "FAIL: dump-huge: not one line on stderr"; failures=$((failures + 1)); }
check prepare-huge 1 "$work/huge.xml" "$hook" huge prepare begin -
grep -q "^vpack: domain 'huge': .*more than 262144 elements" "$work/prepare-huge.err" ||
    { echo "FAIL: prepare-huge: no clear message"; failures=$((failures + 1)); }
check dump-cells 1 "$work/cells.xml" "$hook" --dump
grep -q "more than 16384 guest NUMA cells" "$work/dump-cells.err" ||
    { echo "FAIL: dump-cells: no clear message"; failures=$((failures + 1)); }
check dump-limit 0 "$work/limit.xml" "$hook" --dump
n=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["numatune"]["memnode"]))' \
    "$work/dump-limit.out" 2>/dev/null || echo 0)
[ "$n" = 16384 ] && echo "dump-limit: 16384 memnodes in the record" ||
    { echo "FAIL: dump-limit: $n memnodes in the record"; failures=$((failures + 1)); }

[ $failures -eq 0 ] && echo "ok: the hook's memory and time are bounded"
[ $failures -eq 0 ]
