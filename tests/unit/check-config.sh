#!/bin/bash
# SPDX-License-Identifier: MIT
# vpackd --check-config, as the unit's ExecReload runs it before signalling
# vpackd: 0 and "configuration OK" for a good file (the shipped one, and one
# with a Nova extra-spec rule); 1 with the file, line and key on stderr for
# a bad one, and for a missing one; the same for the web configuration it
# names ([metrics] web_config). Usage: check-config.sh VPACKD SRCDIR
set -u
vpackd=$1 srcdir=$2
fails=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# check WANT-RC WANT-TEXT FILE: vpackd --check-config --config FILE.
check()
{
    local want_rc=$1 want=$2 file=$3 out rc=0
    out=$("$vpackd" --check-config --config "$file" 2>&1) || rc=$?
    if [[ $rc -ne $want_rc || $out != *"$want"* ]]; then
        echo "FAIL: --check-config $file: exit $rc, '$out'; want exit $want_rc with '$want'"
        fails=$((fails + 1))
    else
        echo "ok: --check-config $file: exit $rc: $out"
    fi
}

check 0 "configuration OK" "$srcdir/etc/vpackd.conf"
cat > "$dir/nova.conf" <<'CONF'
[rule "flavor-level"]
metadata_namespace = http://openstack.org/xmlns/libvirt/nova/1.1
level_from = instance/flavor/extraSpecs/extraSpec[@name="vpack:level"]
CONF
check 0 "configuration OK" "$dir/nova.conf"
printf '[policy]\ndefault_level = 1\nno_such_key = 1\n' > "$dir/bad-key.conf"
check 1 "$dir/bad-key.conf: line 3: policy.no_such_key: unknown key" "$dir/bad-key.conf"
sed 's/"vpack:level"\]/"vpack:level"/' "$dir/nova.conf" > "$dir/bad-filter.conf"
check 1 "line 3: rule \"flavor-level\".level_from: " "$dir/bad-filter.conf"
check 1 "without its closing ']'" "$dir/bad-filter.conf"
check 1 "cannot read $dir/missing.conf" "$dir/missing.conf"

# [metrics] web_config: the web configuration is read and checked too (its
# certificate against its key), its errors named with its file and line.
web=$srcdir/tests/data/webconfig
printf '[metrics]\nweb_config = %s\n' "$web/good.yml" > "$dir/web-good.conf"
check 0 "configuration OK" "$dir/web-good.conf"
printf '[metrics]\nweb_config = %s\n' "$web/mtls.yml" > "$dir/web-mtls.conf"
check 0 "configuration OK" "$dir/web-mtls.conf"
printf '[metrics]\nweb_config = %s\n' "$web/syntax.yml" > "$dir/web-syntax.conf"
check 1 "metrics.web_config: $web/syntax.yml: line 3: not YAML" "$dir/web-syntax.conf"
printf '[metrics]\nweb_config = %s\n' "$web/key-mismatch.yml" > "$dir/web-mismatch.conf"
check 1 "metrics.web_config: $web/key-mismatch.yml: key_file $web/other.key is not the key of cert_file $web/server.crt" "$dir/web-mismatch.conf"
printf '[metrics]\nweb_config = %s\n' "$dir/no-such.yml" > "$dir/web-missing.conf"
check 1 "metrics.web_config: cannot read $dir/no-such.yml: No such file or directory" "$dir/web-missing.conf"

if ((fails)); then
    echo "$fails --check-config case(s) failed"
    exit 1
fi
