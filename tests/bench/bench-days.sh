#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The host model over every PlanetLab day of tests/data/planetlab, several
# seeds, and 2- and 4-socket hosts with and without SMT (issue 26): for each
# host, level 2 against level 0 as mean, standard deviation and range over
# day x seed of: the saving with package C6 per package, with package C6
# system-wide (the built-in Xeon profile, idle_w = awake_w) and with idle_w
# as low as deep_w; package-seconds with work against the capacity bound
# and the delay-bounded optimum; served work; p99 vCPU delay; moves per hour;
# CPU-seconds run beyond the work done by SMT siblings co-running (the
# model's costs, include/vpack/model.h step 8, are on); and at level 0 and level 2:
# per-VM delay p99 and max (each VM's wait per CPU-second wanted, across the
# VMs) and the saturation share. Prints a Markdown section.
#
#   tests/bench/bench-days.sh VPACKCTL [INTERVAL_S] [SEEDS] [-- SIMULATE ARGS...]
#
# INTERVAL_S (default 60): the trace's interval; the readings are 5 minutes
# apart and interpolated in between. SEEDS (default "1 2 3"). SIMULATE ARGS
# are given to every run (e.g. -- --burst 1 --vcpu-split hot). HOSTS, if
# set, replaces the hosts: synthetic descriptions separated by ';'; TITLE, if
# set, the section's heading. One run
# of 24 h x 100 VMs takes about 1 s at 60 s on a 2-CPU VM, 15 s at 1 s.
set -euo pipefail

ctl=${1:?usage: bench-days.sh VPACKCTL [INTERVAL_S] [SEEDS] [-- SIMULATE ARGS...]}
interval=${2:-60}
seeds=${3:-1 2 3}
shift $(($# < 3 ? $# : 3))
[ "${1:-}" != -- ] || shift
extra=("$@")
here=$(cd "$(dirname "$0")" && pwd)
days=("$here"/../data/planetlab/20*)
hosts=('package:2 core:16 pu:1' 'package:2 core:16 pu:2' 'package:4 core:16 pu:1'
       'package:4 core:16 pu:2')
if [ -n "${HOSTS:-}" ]; then
    IFS=';' read -r -a hosts <<<"$HOSTS"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# level2 LABEL: the level 2 cell of the row starting with LABEL, without %; level0 the level 0 cell.
level2() { awk -v l="$1" 'index($0, l) == 1 { v = $NF; sub(/%$/, "", v); print v; exit }' "$tmp/out"; }
level0() { awk -v l="$1" 'index($0, l) == 1 { v = $(NF - 2); sub(/%$/, "", v); print v; exit }' "$tmp/out"; }

echo "### ${TITLE:-Every day, every seed: level 2 against level 0}"
echo
echo "\`tests/bench/bench-days.sh\`: ${#days[@]} PlanetLab days (\`tests/data/planetlab\`), seeds $seeds," \
     "100 VMs, ${interval} s intervals, default policy, the built-in power model${extra[*]:+, \`${extra[*]}\`}; mean ± standard" \
     "deviation [min, max] over day x seed. Run $(date -u '+%Y-%m-%d %H:%M UTC')," \
     "vpack $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')."
echo
echo "| host | saving, PC6 per package | saving, PC6 system-wide | saving, system-wide with idle_w = deep_w | vs capacity bound | vs delay-bounded optimum | served | p99 delay % | moves/h | SMT slowdown CPU-s | per-VM delay p99 %, level 0 | per-VM delay p99 % | per-VM delay max %, level 0 | per-VM delay max % | saturation %, level 0 | saturation % |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for host in "${hosts[@]}"; do
    : >"$tmp/rows"
    for day in "${days[@]}"; do
        for seed in $seeds; do
            nice -n 19 "$ctl" simulate --planetlab "$day" --vms 100 --seed "$seed" \
                --interval-ms "$((interval * 1000))" --topology "synthetic:\"$host\"" \
                ${extra[@]+"${extra[@]}"} >"$tmp/out"
            echo "$(level2 '  ... PC6 scope package') $(level2 '  ... PC6 scope system') \
$(level2 '  ... idle_w as deep_w') $(level2 'vs capacity bound') $(level2 'vs delay-bounded optimum') \
$(level2 'served work ratio') $(level2 'p99 vCPU delay') $(level2 'moves per hour') \
$(level2 'SMT slowdown CPU-seconds') $(level0 'per-VM delay p99') \
$(level2 'per-VM delay p99') $(level0 'per-VM delay max') $(level2 'per-VM delay max') \
$(level0 'saturation share') $(level2 'saturation share')" >>"$tmp/rows"
        done
    done
    awk -v host="$host" '
        { for (i = 1; i <= NF; i++) { v = $i + 0; s[i] += v; q[i] += v * v
              if (NR == 1 || v < lo[i]) lo[i] = v; if (NR == 1 || v > hi[i]) hi[i] = v } }
        END {
            printf "| `%s` (%d runs)", host, NR
            for (i = 1; i <= 15; i++) {
                m = s[i] / NR; sd = q[i] / NR - m * m; sd = sd > 0 ? sqrt(sd) : 0
                f = (i == 6) ? "%.4f ± %.4f [%.4f, %.4f]" : (i == 9 ? "%.0f ± %.0f [%.0f, %.0f]" : (i >= 10 ? "%.2f ± %.2f [%.2f, %.2f]" : "%.1f ± %.1f [%.1f, %.1f]"))
                printf " | " f, m, sd, lo[i], hi[i]
            }
            print " |"
        }' "$tmp/rows"
done
