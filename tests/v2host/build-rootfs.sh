#!/bin/bash
# SPDX-License-Identifier: MIT
#
# build-rootfs.sh: prints the path of the v2 test host's root file system, a
# ext4 image of a minimal Debian 12 (booted on a
# throw-away snapshot, so read-only in effect) with libvirt's QEMU driver, QEMU
# and vpack's runtime libraries, built with mmdebstrap from this machine's
# apt sources on first use and cached under $VP_CACHE/v2host (default
# /var/cache/vpack-test/v2host), keyed by the candidate versions of the
# packages, as tests/integration/lib.sh caches the guest kernel.
set -euo pipefail
cache=${VP_CACHE:-/var/cache/vpack-test}/v2host
pkgs=(busybox util-linux procps iproute2 hwloc-nox strace
      libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86
      libuv1 libhwloc15 libjson-c5 libxml2 libinih1 libmicrohttpd12 libsystemd0
      libyaml-0-2 libgnutls30 libcrypt1 libacl1
      libasan8 libubsan1)   # the sanitizer build's vpackd runs in there too
key=$(apt-cache policy "${pkgs[@]}" | awk '/^[^ ]/ {p = $1} /Candidate:/ {print p, $2}' |
      sha256sum | cut -c1-16)
out=$cache/rootfs-$key.ext4
if [ -s "$out" ]; then echo "$out"; exit 0; fi
for p in mmdebstrap e2fsprogs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
        DEBIAN_FRONTEND=noninteractive apt-get install -y "$p" >&2
done
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
sources=/etc/apt/sources.list
[ -s "$sources" ] || sources=/etc/apt/sources.list.d/debian.sources
mmdebstrap --variant=minbase --include="$(IFS=,; echo "${pkgs[*]}")" \
    --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "$tmp/root" "$sources" >&2
size=$(( $(du -sm "$tmp/root" | cut -f1) * 5 / 4 + 512 ))
mke2fs -q -t ext4 -d "$tmp/root" -L v2root "$tmp/rootfs.ext4" "${size}M" >&2
mv "$tmp/rootfs.ext4" "$out"
# Older images (other package versions) go.
find "$cache" -maxdepth 1 -name 'rootfs-*.ext4' ! -path "$out" -delete
echo "$out"
