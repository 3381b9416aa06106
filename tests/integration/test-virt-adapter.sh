#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Runs the libvirt adapter's C test (virt-adapter.c) against one real TCG
# guest: boots $VPACK_TEST_DOMAIN (default vpvirt-1; 2 vCPUs, vCPU 0 busy),
# runs the test binary ($VPACK_VIRT_ADAPTER_TEST, or the first argument),
# then removes only its own domains. Needs root and 2 host CPUs; exits 77
# (meson's "skipped") without them.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

dom=${VPACK_TEST_DOMAIN:-vpvirt-1}
bin=${VPACK_VIRT_ADAPTER_TEST:-${1:-}}
[ -n "$bin" ] && [ -x "$bin" ] || vp_die "no test binary (VPACK_VIRT_ADAPTER_TEST or \$1)"
case $dom in vpvirt-*) ;; *) vp_die "VPACK_TEST_DOMAIN must start with vpvirt-" ;; esac
[ "$(id -u)" -eq 0 ] || { echo "not root: skipped"; exit 77; }
[ "$(nproc --all)" -ge 2 ] || { echo "fewer than 2 host CPUs: skipped"; exit 77; }

# One run at a time on this host: builds in other directories run the same
# test with the same domain name.
exec 8>/run/lock/vpack-virt-adapter.lock
flock -w 500 8 || vp_die "another run of this test holds /run/lock/vpack-virt-adapter.lock"
# Under that lock every vpvirt-* domain is this run's (or an aborted run's):
# the exit removes them all.
vp_test virt-adapter vpvirt-

vp_install_deps
vp_start_libvirtd
vp_build_guest
vp_destroy_all_test_domains             # leftovers of an aborted run
vp_define_start "$dom" 2 busy:1
vp_wait_ready "$dom" || vp_die "$dom did not boot"

VPACK_TEST_DOMAIN=$dom VPACK_TEST_URI=$VP_URI "$bin"
