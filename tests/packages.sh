# shellcheck shell=bash
# SPDX-License-Identifier: MIT
#
# The Debian 12 packages vpack's scripts install, said once: demo.sh,
# tests/run-all.sh and tests/integration/lib.sh source this file.
# debian/control's Build-Depends says the same for the Debian package.

# What building the programs needs: `meson setup -Dtests=disabled` (or the
# default -Dtests=auto when the next list is missing) and ninja.
VP_BUILD_PACKAGES=(meson ninja-build pkg-config gcc libhwloc-dev libjson-c-dev libxml2-dev
                   libinih-dev libuv1-dev libvirt-dev libmicrohttpd-dev libsystemd-dev
                   libyaml-dev libgnutls28-dev libcrypt-dev libacl1-dev)

# What building the tests needs as well (-Dtests=enabled): cmocka for the
# unit tests, libseccomp for the hardening tests' restrict-af.
VP_TEST_BUILD_PACKAGES=(libcmocka-dev libseccomp-dev)

# What the v2 test host (tests/v2host) is made with: its root file system
# (mmdebstrap, mke2fs -d) and its guests' boot sector (as, ld).
VP_V2HOST_PACKAGES=(mmdebstrap e2fsprogs binutils)

# What tests/run-all.sh needs beyond both: clang and its sanitizer runtime
# (the clang builds, fuzzing), hwloc and xmllint for the fixtures, groff for
# the man pages, Prometheus and curl for the metrics tests, ss, dpkg-dev for
# the buildtypes' flags and the Debian package, Python for one-off helpers,
# socat to receive vpackd's sd_notify messages in the package test, openssl
# and whois (mkpasswd) for the metrics-tls test's certificate and bcrypt hash,
# and what the v2 test host is made with.
VP_SUITE_PACKAGES=(clang libclang-rt-14-dev hwloc-nox libxml2-utils groff-base prometheus curl
                   python3 iproute2 dpkg-dev socat openssl whois "${VP_V2HOST_PACKAGES[@]}")

# What the live tests and the demo run on (no libvirt-daemon-system: it pulls
# in systemd, polkit, iptables and the default network, none of which we use).
VP_PACKAGES=(libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients
             qemu-system-x86 busybox-static cpio gzip procps util-linux)

# vp_install_packages PACKAGE...: installs those dpkg does not have (no apt
# call at all when every one is there), apt-get update first once per shell.
# Quiet, but shows apt's output when it fails; returns its status.
vp_install_packages() {
    local p out missing=()
    for p in "$@"; do
        dpkg -s "$p" 2>/dev/null | grep '^Status: install ok installed' >/dev/null || missing+=("$p")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    echo "installing: ${missing[*]}" >&2
    if [ -z "${VP_APT_UPDATED:-}" ]; then
        out=$(env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300 update 2>&1) ||
            { printf '%s\n' "$out" >&2; return 1; }
        VP_APT_UPDATED=1
    fi
    out=$(env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300 install -y \
          --no-install-recommends "${missing[@]}" 2>&1) || { printf '%s\n' "$out" >&2; return 1; }
}
