#!/usr/bin/env bash
# Smoke test of the integration harness: two real TCG guests under libvirtd,
# one idle and one busy; checks boot, vCPU count, vCPU run-time stats and a
# live-only vCPU pin.  Needs root.  Prints "ok" on success.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", b - a}'; }

# Each check ends the test where it fails (vp_die: "FAIL: ..."): what follows
# builds on it.
vp_test guest-boot vptest-
t_start=$(now)

vp_install_deps
vp_start_libvirtd
vp_build_guest
echo "kernel: $VP_KERNEL_VERSION"
echo "initrd: $VP_INITRD"
vp_destroy_all_test_domains          # leftovers of an aborted run

idle=${VP_PREFIX}idle
busy=${VP_PREFIX}busy

# ---- boot both guests ------------------------------------------------
t0=$(now)
vp_define_start "$idle" 2 idle
vp_define_start "$busy" 2 busy:1
vp_wait_ready "$idle" || vp_die "$idle did not boot"
t_idle=$(now)
vp_wait_ready "$busy" || vp_die "$busy did not boot"
t_busy=$(now)
echo "boot: $idle ready after $(elapsed "$t0" "$t_idle") s," \
     "$busy after $(elapsed "$t0" "$t_busy") s (both started together)"

for d in "$idle" "$busy"; do
    n=$(vp_guest_cpus "$d")
    [ "$n" = 2 ] || vp_die "$d: guest saw '${n:-?}' CPUs, expected 2 ($(grep VPACK-CPUS "$(vp_console_log "$d")" || true))"
    echo "$d: guest CPUs $n"
done

# ---- vCPU run time: busy guest >> idle guest -------------------------
sleep 1                               # let the busy loop get going
i0=$(vp_vcpu_time_total "$idle"); b0=$(vp_vcpu_time_total "$busy")
sleep 3
i1=$(vp_vcpu_time_total "$idle"); b1=$(vp_vcpu_time_total "$busy")
di=$((i1 - i0)); db=$((b1 - b0))
echo "vcpu time over 3 s: $idle ${di} ns, $busy ${db} ns"
vp_vcpu_times "$busy" | sed "s/^/  $busy vcpu /"
# Absolute floor kept low: a shared 2-CPU host may be busy with other work.
[ "$db" -gt 300000000 ] || vp_die "busy guest ran only ${db} ns in 3 s (expected > 0.3 s)"
[ "$db" -gt $((5 * di)) ] || vp_die "busy guest (${db} ns) not > 5x idle guest (${di} ns)"

# ---- live-only vCPU pin ----------------------------------------------
pins() { vp_virsh vcpupin "$@" | awk '$1 ~ /^[0-9]+$/ {print $1 ":" $2}' | tr '\n' ' '; }
cfg_before=$(pins "$busy" --config)
vp_virsh vcpupin "$busy" 0 1 --live >/dev/null || vp_die "virsh vcpupin $busy 0 1 --live failed"
live=$(pins "$busy")
cfg_after=$(pins "$busy" --config)
echo "pins: live [$live] config before [$cfg_before] after [$cfg_after]"
case " $live" in *" 0:1 "*) ;; *) vp_die "live pin of vCPU 0 not shown: [$live]" ;; esac
[ "$cfg_before" = "$cfg_after" ] || vp_die "persistent pins changed: [$cfg_before] -> [$cfg_after]"
if vp_virsh dumpxml --inactive "$busy" | vp_has '<vcpupin'; then
    vp_die "persistent XML gained a <vcpupin>"
fi
# The vCPU thread itself must now be confined to host CPU 1.
qpid=$(cat "/run/libvirt/qemu/$busy.pid")
tid=$(grep -lx 'CPU 0/TCG' /proc/"$qpid"/task/*/comm 2>/dev/null | head -n1 | cut -d/ -f5 || true)
[ -n "$tid" ] || vp_die "no 'CPU 0/TCG' thread in qemu $qpid"
allowed=$(awk '/^Cpus_allowed_list:/ {print $2}' "/proc/$qpid/task/$tid/status")
echo "vCPU 0 thread $tid Cpus_allowed_list: $allowed"
[ "$allowed" = 1 ] || vp_die "vCPU 0 thread allowed on '$allowed', expected 1"
echo "host CPU busy with vCPU 0 pinned to CPU 1 (2 s):"
vp_cpu_busy_sample 2 | sed 's/^/  /'

vp_destroy_all_test_domains
[ -z "$(vp_list_test_domains)" ] || vp_die "test domains left after cleanup"
echo "total: $(elapsed "$t_start" "$(now)") s"
echo "ok"
