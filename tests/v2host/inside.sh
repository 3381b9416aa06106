#!/bin/bash
# SPDX-License-Identifier: MIT
#
# inside.sh: what the scripts run inside the v2 test host share (v2host.sh
# puts it at /vpack/inside.sh). fail() is the caller's.

# guest NAME IMAGE VCPUS EXTRA-XML: starts a transient level-2 domain NAME
# that boots the boot-sector disk /vpack/IMAGE (a copy of it in /tmp), with
# EXTRA-XML (cputune, resource, ...) in its definition.
guest() {   # NAME IMAGE VCPUS EXTRA-XML
    cp "/vpack/$2" "/tmp/$1.img"
    cat > "/tmp/$1.xml" <<XML
<domain type='qemu'>
  <name>$1</name>
  <memory unit='MiB'>16</memory>
  <vcpu>$3</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/></os>
  <features><acpi/><apic/></features>
  <metadata><vpack:powerpolicy xmlns:vpack='urn:vpack:powerpolicy:1' level='2'/></metadata>
  $4
  <devices>
    <disk type='file' device='disk'><driver name='qemu' type='raw'/>
      <source file='/tmp/$1.img'/><target dev='hda' bus='ide'/></disk>
  </devices>
</domain>
XML
    virsh -q create "/tmp/$1.xml" >/dev/null || fail "guest $1 did not start"
}
