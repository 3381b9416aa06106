#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Runs the whole suite (bash .ci/run) from a fresh clone of this checkout's
# HEAD, in a new directory, under perturbations that machines of this kind
# show and the developers' machines may not:
#
#   tests/perturb/run.sh PERTURBATION[,PERTURBATION...] [COMMAND...]
#
#   none            no perturbation: a fresh clone in another directory
#   slow-python     a python3 earlier on PATH that sleeps 0.4 s, then execs
#                   /usr/bin/python3 (a version manager's shim as it looks)
#   busy-python     the same shim spending 0.4 s of CPU first (as one such
#                   shim was measured to cost)
#   background      a nice -n 19 load of 0.3 CPU (tests/perturb/duty.c) for
#                   the whole run; VPACK_PERTURB_LOAD=SHARE changes the 0.3
#   cpuidle=GOV     the cpuidle governor GOV (menu, ladder, haltpoll...) for
#                   the run, put back afterwards; fails if the machine has no
#                   cpuidle driver (then the governor decides nothing)
#
# COMMAND (default: bash .ci/run) runs in the clone's top directory, with
# CI=true. Prints one line for RELIABILITY.md at the end and exits with the
# command's status. Commit first: uncommitted changes are not in the clone.
# VPACK_PERTURB_KEEP=1 keeps the clone. Root only (the suite needs it).
set -uo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 1 ] || { sed -n '4,27p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "perturb: run as root (the suite needs it)" >&2; exit 2; }
kinds=$1
shift
[ $# -gt 0 ] || set -- bash .ci/run

work=$(mktemp -d /tmp/vpack-perturb.XXXXXX)
load_pid=""
gov_file=/sys/devices/system/cpu/cpuidle/current_governor
gov_before=""

finish() {
    local rc=$?
    [ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null && wait "$load_pid" 2>/dev/null
    if [ -n "$gov_before" ]; then
        echo "$gov_before" > "$gov_file" 2>/dev/null ||
            echo "perturb: could not put the cpuidle governor back to $gov_before" >&2
    fi
    if [ -z "${VPACK_PERTURB_KEEP:-}" ]; then rm -rf "$work"; else echo "kept: $work"; fi
    return $rc
}
trap finish EXIT
trap 'exit 130' INT TERM

shim() {   # BODY: a python3 on PATH that runs BODY, then the distribution's
    mkdir -p "$work/bin"
    printf '#!/bin/sh\n%s\nexec /usr/bin/python3 "$@"\n' "$1" > "$work/bin/python3"
    chmod +x "$work/bin/python3"
    export PATH="$work/bin:$PATH"
}

for kind in ${kinds//,/ }; do
    case $kind in
    none) ;;
    slow-python) shim 'sleep 0.4' ;;
    busy-python) shim 'timeout 0.4 sh -c "while :; do :; done"' ;;
    background)
        command -v cc >/dev/null || { echo "perturb: needs a C compiler (cc)" >&2; exit 2; }
        cc -O2 -o "$work/duty" "$top/tests/perturb/duty.c" || exit 2
        nice -n 19 "$work/duty" "${VPACK_PERTURB_LOAD:-0.3}" &
        load_pid=$!
        ;;
    cpuidle=*)
        driver=$(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none)
        if [ "$driver" = none ]; then
            echo "perturb: this machine has no cpuidle driver (current_driver: none):" \
                 "a governor changes nothing here" >&2
            exit 2
        fi
        gov_before=$(cat "$gov_file")
        echo "${kind#cpuidle=}" > "$gov_file" ||
            { echo "perturb: cannot set the cpuidle governor ${kind#cpuidle=}" >&2; gov_before=""; exit 2; }
        ;;
    *) echo "perturb: unknown perturbation '$kind' (see $0 with no argument)" >&2; exit 2 ;;
    esac
done

git clone -q "$top" "$work/vpack" || exit 2
commit=$(git -C "$work/vpack" rev-parse --short HEAD)
driver=$(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none)
echo "== perturb: $kinds; clone of $commit in $work/vpack; cpuidle driver $driver" \
     "(governor $(cat "$gov_file" 2>/dev/null || echo none)); python3 on PATH: $(command -v python3)"
t0=$SECONDS
(cd "$work/vpack" && CI=true "$@") 2>&1 | tee "$work/run.log"
rc=${PIPESTATUS[0]}
counts=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$work/run.log" | tail -1)
echo
echo "perturb result | $(date -u +%F) | $(hostname) | $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') |" \
     "cpuidle $driver | $work/vpack | $kinds | $commit | ${counts:-no count} | exit $rc | $((SECONDS - t0)) s"
exit "$rc"
