#!/bin/bash
# SPDX-License-Identifier: MIT
#
# guest-image.sh OUT BUSY IDLE: a raw disk image OUT (one 512-byte sector)
# that boots tests/v2host/bootsector.S with BUSY and IDLE timer ticks (18.2
# a second) patched in: BUSY 0 IDLE 1 is an idle guest, BUSY 1 IDLE 0 a
# busy one, BUSY 1 IDLE 3 about a quarter of a vCPU. The boot sector is
# assembled with binutils (as, ld), which the build already needs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 3 ] || { echo "usage: guest-image.sh OUT BUSY IDLE" >&2; exit 2; }
out=$1 busy=$2 idle=$3
for n in "$busy" "$idle"; do
    [[ $n =~ ^[0-9]+$ ]] && [ "$n" -le 65535 ] || { echo "guest-image.sh: $n: ticks 0..65535" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
as --32 -o "$tmp/b.o" "$here/bootsector.S"
ld -m elf_i386 -Ttext=0x7c00 --oformat=binary -o "$tmp/b.bin" "$tmp/b.o"
[ "$(stat -c %s "$tmp/b.bin")" = 512 ] || { echo "guest-image.sh: the boot sector is not 512 bytes" >&2; exit 1; }
le16() { printf "\\\\x%02x\\\\x%02x" $(($1 & 255)) $(($1 >> 8)); }
printf "$(le16 "$busy")$(le16 "$idle")" | dd of="$tmp/b.bin" bs=1 seek=$((0x1fa)) conv=notrunc status=none
mv "$tmp/b.bin" "$out"
