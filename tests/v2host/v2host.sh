#!/bin/bash
# SPDX-License-Identifier: MIT
#
# v2host.sh SCRIPT [TIMEOUT]: boots the v2 test host (a TCG VM: 2 sockets x
# 2 cores, two NUMA nodes, the unified cgroup v2 hierarchy only) on the
# suite's cached kernel and build-rootfs.sh's root file system (written to a
# throw-away snapshot: snapshot=on), with a second disk holding this build's
# vpackd, vpackctl and vpack-hook and SCRIPT; inside, an init mounts
# cgroup2 at /sys/fs/cgroup, enables cpuset, cpu and memory for its
# children, starts virtlogd and libvirtd and runs SCRIPT. Its output comes
# back on the serial console, to stdout; the exit status is SCRIPT's
# (VPACK-EXIT=N on the console), 124 when TIMEOUT (default 600 s) passes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/integration/lib.sh
. "$here/../integration/lib.sh"
[ $# -ge 1 ] || { echo "usage: v2host.sh SCRIPT [TIMEOUT]" >&2; exit 2; }
script=$1 timeout=${2:-600}
builddir=${VPACK_BUILDDIR:-$VP_TOP/build}
rootfs=$("$here/build-rootfs.sh")
vp_build_guest    # the kernel (VP_KERNEL) and its virtio modules
# The work directory names its owner: vp_reap_leftovers removes it, and
# stops the VM (its QEMU carries VPACK_TEST_OWNER), once this shell is gone.
work=$(mktemp -d "/tmp/vpack-v2host.$$.XXXXXX")
cleanup() {
    local pid
    for pid in $(pgrep -f "^qemu-system-x86_64 .*$work/" || true); do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

# The initramfs: busybox, the virtio modules, an init that mounts the two
# disks and switches to the payload's init.
mkdir -p "$work/initrd"/{bin,dev,proc,sys,newroot,lib/modules}
cp "$(command -v busybox)" "$work/initrd/bin/busybox"
for a in sh mount umount insmod switch_root mkdir sleep cat echo poweroff; do
    ln -s busybox "$work/initrd/bin/$a"
done
cp "$(dirname "$VP_KERNEL")"/modules/* "$work/initrd/lib/modules/"
cat > "$work/initrd/init" <<'INIT'
#!/bin/sh
PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /lib/modules/order); do insmod /lib/modules/$m; done
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -b /dev/vdb ] && break; sleep 0.2; done
mount -t ext4 /dev/vda /newroot || { echo "VPACK-EXIT=99 no root"; poweroff -f; }
mkdir -p /newroot/vpack
mount -t ext4 -o ro /dev/vdb /newroot/vpack || { echo "VPACK-EXIT=99 no payload"; poweroff -f; }
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /vpack/init
INIT
chmod 0755 "$work/initrd/init"
( cd "$work/initrd" && find . -print0 | cpio --null --quiet -o -H newc --owner=0:0 ) | gzip -1 > "$work/initrd.gz"

# The payload: this build's programs, the script and its init.
mkdir -p "$work/payload"
cp "$builddir/agent/vpackd" "$builddir/ctl/vpackctl" "$builddir/plugin/vpack-hook" "$work/payload/"
cp "$script" "$work/payload/test.sh"
cp "$here/inside.sh" "$work/payload/inside.sh"
# The nested guests' disks (tests/v2host/bootsector.S): idle, a quarter, busy.
"$here/guest-image.sh" "$work/payload/g-idle.img" 0 1
"$here/guest-image.sh" "$work/payload/g-quarter.img" 1 3
"$here/guest-image.sh" "$work/payload/g-busy.img" 1 0
cat > "$work/payload/init" <<'INIT'
#!/bin/sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t cgroup2 cgroup2 /sys/fs/cgroup
ip link set lo up
echo "+cpuset +cpu +memory" > /sys/fs/cgroup/cgroup.subtree_control
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /tmp
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts && mount -t tmpfs tmpfs /dev/shm
mkdir -p /run/libvirt /var/log/libvirt /var/lib/libvirt/qemu /var/cache/libvirt
# No libvirt-daemon-system (no systemd): its users, made here.
groupadd -r kvm 2>/dev/null; groupadd -r libvirt-qemu 2>/dev/null
useradd -r -g libvirt-qemu -G kvm -d /var/lib/libvirt -s /usr/sbin/nologin libvirt-qemu 2>/dev/null
echo "VPACK-CGROUP=$(stat -f -c %T /sys/fs/cgroup) controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
virtlogd >/tmp/virtlogd.log 2>&1 &
libvirtd >/tmp/libvirtd.log 2>&1 &
for _ in $(seq 150); do virsh -c qemu:///system version >/dev/null 2>&1 && break; sleep 0.2; done
virsh -c qemu:///system version || { echo "FAIL: libvirtd did not start"; tail -n 20 /tmp/libvirtd.log /tmp/virtlogd.log; }
bash /vpack/test.sh
echo "VPACK-EXIT=$?"
sync
echo o > /proc/sysrq-trigger
sleep 60   # init must not return while the power goes off
INIT
chmod 0755 "$work/payload/init"
mke2fs -q -t ext4 -d "$work/payload" -L vpack "$work/payload.img" 64M

timeout --foreground "$timeout" qemu-system-x86_64 -machine q35 -accel tcg,thread=multi -m 2048 \
    -smp 4,sockets=2,cores=2,threads=1 \
    -object memory-backend-ram,id=m0,size=1024M -object memory-backend-ram,id=m1,size=1024M \
    -numa node,nodeid=0,cpus=0-1,memdev=m0 -numa node,nodeid=1,cpus=2-3,memdev=m1 \
    -kernel "$VP_KERNEL" -initrd "$work/initrd.gz" \
    -append "console=ttyS0 panic=-1 quiet" -no-reboot -nographic -nodefaults -serial stdio \
    -drive file="$rootfs",format=raw,if=virtio,snapshot=on \
    -drive file="$work/payload.img",format=raw,if=virtio,readonly=on \
    | tee "$work/console.log" || true
st=$(sed -n 's/.*VPACK-EXIT=\([0-9]*\).*/\1/p' "$work/console.log" | tail -n1)
[ -n "$st" ] || exit 124
exit "$st"
