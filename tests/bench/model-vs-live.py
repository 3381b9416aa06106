#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The host model against the live placement benchmark (BENCHMARKS.md, 1).

    model-vs-live.py VPACKCTL RESULTS_DIR [BENCHMARKS.md]

For each load (light/medium/heavy) and level (0/1/2) the placement part of
run-bench.sh measured, builds a trace with the same two guests (2 vCPUs
each) and the demand the live run measured, replays it with
`vpackctl simulate` on the same synthetic topology and policy settings, and
compares each package's whole-idle share and the placement (the CPUs each
thread is allowed on at the end) with the live figures. The live figures
come from RESULTS_DIR/placement (the raw snapshots of this run's placement
part), or, when this run had no placement part, from the placement tables
of BENCHMARKS.md. Writes RESULTS_DIR/simulate/model-vs-live.json for
bench-report.py; exits 1 when a run of vpackctl failed (not when the model
is outside the tolerance: that is a result, reported as such).

Demand mapping (documented in the report): the live table's "guests' QEMU
CPU" column is both guests' QEMU processes' CPU time per second at that load
and level. Each guest gets half of it, q. vCPU 0 runs the `work:PCT` item,
so it is given the item's duty cycle PCT/100; what is left, q - PCT/100 (the
TCG guest's own cost: the idle vCPU's timer ticks and halts, the emulator
thread's main loop and serial console), is split evenly between vCPU 1 and
the emulator thread. The total per guest is what was measured.
"""
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

TOPOLOGY = 'synthetic:"package:2 core:1 pu:1"'
# The agent's settings in the live benchmark (BENCHMARKS.md's header table).
SETTINGS = ["policy.pack_delay_ms=2000", "policy.min_residency_ms=4000"]
GUESTS = ["vpbench-a", "vpbench-b"]
LOADS = ("light", "medium", "heavy")
INTERVALS = 1800            # 30 min at 1 s: the settling seconds weigh < 0.5%
IDLE_TOLERANCE = 0.03       # per package, absolute share (3 points)


def bench_report():
    """bench-report.py as a module: its parsers of the raw snapshots."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench-report.py")
    spec = importlib.util.spec_from_file_location("bench_report", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def live_from_results(res):
    """{load: {"duty": d, "levels": {lv: {"idle": [i0, i1], "qemu": q, "placement": {...}}}}}
    from this run's raw placement snapshots, or {} when there are none."""
    br = bench_report()
    out = {}
    for load in LOADS:
        d = os.path.join(res, "placement", load)
        if not os.path.isdir(d):
            continue
        info = br.read_kv(os.path.join(d, "info"))
        m = re.match(r'work:(\d+)', info.get("guest_load", ""))
        if not m:
            continue
        cells = {}
        for f in sorted(os.listdir(d)):
            mm = re.match(r'r(\d+)-l(\d)\.a$', f)
            if mm and os.path.exists(os.path.join(d, f[:-2] + ".b")):
                cells.setdefault(int(mm.group(2)), []).append(br.load_pair(os.path.join(d, f[:-2])))
        levels = {}
        for lv, cs in cells.items():
            q = [c["guest_cpus"] for c in cs if c["guest_cpus"] is not None]
            if not q:
                continue
            levels[lv] = {"idle": [statistics.mean(c["cpu_idle"][p] for c in cs) for p in (0, 1)],
                          "qemu": statistics.mean(q), "placement": dict(cs[-1]["placement"])}
        if levels:
            out[load] = {"duty": int(m.group(1)) / 100, "levels": levels}
    return out


def first_number(cell):
    m = re.match(r'\s*(-?[\d.]+)', cell)
    return float(m.group(1)) if m else None


def live_from_markdown(path):
    """The same from BENCHMARKS.md's placement tables (means over rounds)."""
    out = {}
    if not os.path.exists(path):
        return out
    load = None
    for line in open(path, encoding="utf-8"):
        m = re.match(r'### (\w+) load \(`work:(\d+)`', line)
        if m:
            load = m.group(1)
            out[load] = {"duty": int(m.group(2)) / 100, "levels": {}}
            continue
        if line.startswith("## ") and not line.startswith("## 1."):
            load = None
        if load is None:
            continue
        cells = line.strip().split("|")
        if len(cells) >= 13 and re.fullmatch(r'\s*[012]\s*', cells[1]):
            lv = int(cells[1])
            i0, i1, q = first_number(cells[4]), first_number(cells[5]), first_number(cells[10])
            if None not in (i0, i1, q):
                out[load]["levels"].setdefault(lv, {})
                out[load]["levels"][lv].update({"idle": [i0 / 100, i1 / 100], "qemu": q})
        m = re.match(r'- level (\d): (.*)$', line.strip())
        if m:
            lv = int(m.group(1))
            pl = {}
            for part in m.group(2).split("; "):
                name, _, threads = part.partition(": ")
                pl[name] = threads
            out[load]["levels"].setdefault(lv, {})["placement"] = pl
    return {k: v for k, v in out.items() if v["levels"]}


def trace_line(duty, q):
    """One interval: both guests, vCPU 0 at the work item's duty, the rest of q split."""
    rest = max(0.0, q - duty) / 2
    vcpu0 = min(1.0, duty if q >= duty else q)
    doms = [{"name": g, "level": 0,
             "vcpus": [{"id": 0, "util": round(vcpu0, 4)}, {"id": 1, "util": round(rest, 4)}],
             "emulator": {"util": round(rest, 4)}} for g in GUESTS]
    return json.dumps({"interval_ms": 1000, "cpus": {}, "domains": doms}), (vcpu0, rest, rest)


def model_placement(dom):
    """'vcpu0=0 vcpu1=0 emulator=0' from simulate's placement entry, as bench-live prints it."""
    parts = ["vcpu%d=%s" % (i, c) for i, c in enumerate(dom["vcpus"])]
    parts.append("emulator=%s" % dom["emulator"])
    parts += ["iothread%d=%s" % (i + 1, c) for i, c in enumerate(dom["iothreads"])]
    return " ".join(parts)


def simulate(vpackctl, trace):
    cmd = [vpackctl, "simulate", "--trace", trace, "--topology", TOPOLOGY, "--json"]
    for s in SETTINGS:
        cmd += ["--set", s]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stderr.strip()))
    return json.loads(r.stdout)


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    vpackctl, res = sys.argv[1], sys.argv[2]
    md = sys.argv[3] if len(sys.argv) == 4 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "BENCHMARKS.md")
    live = live_from_results(res)
    source = "this run's placement part"
    if not live:
        live = live_from_markdown(md)
        source = "BENCHMARKS.md's placement tables (no placement part in this run)"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for load in LOADS:
            if load not in live:
                continue
            duty = live[load]["duty"]
            for lv in sorted(live[load]["levels"]):
                lf = live[load]["levels"][lv]
                if "idle" not in lf or "placement" not in lf:
                    continue
                q = lf["qemu"] / len(GUESTS)
                text, threads = trace_line(duty, q)
                path = os.path.join(tmp, "%s-%d.jsonl" % (load, lv))
                with open(path, "w") as fh:
                    fh.write((text + "\n") * INTERVALS)
                o = simulate(vpackctl, path)
                ml = o["levels"][lv]
                mpl = {d["name"]: model_placement(d) for d in ml["placement"]}
                idle_diff = [ml["package_idle"][p] - lf["idle"][p] for p in (0, 1)]
                rows.append({
                    "load": load, "duty": duty, "level": lv, "qemu_cpus": lf["qemu"],
                    "trace": {"vcpu0": threads[0], "vcpu1": threads[1], "emulator": threads[2]},
                    "live": {"idle": lf["idle"], "placement": lf["placement"]},
                    "model": {"idle": ml["package_idle"], "placement": mpl,
                              "delay_p99": ml["delay_p99"], "served_ratio": ml["served_ratio"]},
                    "idle_diff": idle_diff,
                    "idle_ok": all(abs(x) <= IDLE_TOLERANCE + 1e-9 for x in idle_diff),
                    "placement_ok": mpl == lf["placement"],
                })
    out = {"source": source, "topology": TOPOLOGY, "settings": SETTINGS, "intervals": INTERVALS,
           "idle_tolerance": IDLE_TOLERANCE, "rows": rows}
    dest = os.path.join(res, "simulate")
    os.makedirs(dest, exist_ok=True)
    with open(os.path.join(dest, "model-vs-live.json"), "w") as fh:
        json.dump(out, fh, indent=1)
    for r in rows:
        print("%-6s level %d: live idle %.1f/%.1f model %.1f/%.1f  placement %s" % (
            r["load"], r["level"], 100 * r["live"]["idle"][0], 100 * r["live"]["idle"][1],
            100 * r["model"]["idle"][0], 100 * r["model"]["idle"][1],
            "same" if r["placement_ok"] else "DIFFERS"))
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
