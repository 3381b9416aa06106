#!/bin/bash
# SPDX-License-Identifier: MIT
# vpackctl's bash completion (contrib/bash-completion/vpackctl), sourced as
# bash-completion would, completing against the real vpackctl (its --help is
# where the completion reads commands and options): a command prefix, the
# options of status, an option's file argument, set-policy's LEVEL, wait's
# conditions. Only the list of running domains is a stub (it would need
# libvirt). Usage: completion.sh COMPLETION-FILE VPACKCTL
set -u
comp=$1 vpackctl=$2
fails=0

# shellcheck source=/dev/null
source "$comp" || { echo "FAIL: cannot source $comp"; exit 1; }
complete -p vpackctl >/dev/null || { echo "FAIL: no completion registered for vpackctl"; exit 1; }

# expect WANT WORD...: completing the last WORD gives WANT (sorted, space-separated).
expect()
{
    local want=$1 got
    shift
    COMP_WORDS=("$vpackctl" "$@")
    COMP_CWORD=${#COMP_WORDS[@]}
    ((COMP_CWORD--))
    COMPREPLY=()
    _vpackctl
    got=$(printf '%s\n' "${COMPREPLY[@]}" | sort | paste -sd ' ')
    if [[ $got != "$want" ]]; then
        echo "FAIL: vpackctl $* -> '$got', want '$want'"
        fails=$((fails + 1))
    else
        echo "ok: vpackctl $* -> '$got'"
    fi
}

expect "set-policy simulate status" s
expect "rebalance record" re
expect "--help" --
# Every command that vpackctl --help lists completes from an empty word.
all=$("$vpackctl" --help | awk '/^Commands:/ {on = 1; next} on && NF == 0 {on = 0} on {print $1}' |
    sort | paste -sd ' ')
[[ $(wc -w <<<"$all") -ge 11 ]] || { echo "FAIL: vpackctl --help lists only '$all'"; fails=$((fails + 1)); }
expect "--help $all" ""
expect "--json" status --j
expect "--help --json --socket" status --
expect "--help --json --socket" status --json --
expect "--config --connect" set-policy --con
expect "0 1 2" set-policy web-1 ""
expect "" set-policy web-1 2 ""
expect "packed parked=" wait --for p

# An option's FILE/PATH argument completes file names.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
touch "$dir/vpackd.sock" "$dir/other"
expect "$dir/vpackd.sock" status --socket "$dir/vp"
expect "$dir/vpackd.sock" status --json --socket "$dir/vp"
# doctor: its options, and --root's DIR completes directories only.
expect "--connect --help --json --root" doctor --
mkdir "$dir/tree"
expect "$dir/tree" doctor --root "$dir/t"
expect "$dir/tree" doctor --json --root "$dir/"

# Domains: the one stubbed source (virsh list --name needs libvirt).
_vpackctl_domains() { printf '%s\n' web-1 web-2 db; }
expect "web-1 web-2" explain w
expect "db web-1 web-2" set-policy ""
expect "web-2" set-policy --connect qemu:///system web-2
expect "db" set-policy --live d

if ((fails)); then
    echo "$fails completion case(s) failed"
    exit 1
fi
