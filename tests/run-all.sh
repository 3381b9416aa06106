#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Sets up everything the tests need on a Debian 12 machine (as root) and runs
# them all: the unit tests in a normal build, every buildtype compiled with
# gcc and clang and Debian's hardening flags, the unit tests in an
# AddressSanitizer + UndefinedBehaviorSanitizer build, the fuzz targets
# (corpus replay and a short run each), then the integration tests against a
# real libvirtd with real QEMU guests (the Debian package's among them). Prints "N passed, N failed" last and exits
# non-zero if anything failed.
#
#   tests/run-all.sh            everything
#   VPACK_SKIP_INTEGRATION=1    unit tests and fuzzing only (for a machine without libvirt)
#   VPACK_FUZZ_SECONDS=N        fuzz each target N s (default 15; the domain XML 2N)
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

# What the builds and the suite need (tests/packages.sh, shared with demo.sh).
. tests/packages.sh
echo "== build dependencies"
vp_install_packages "${VP_BUILD_PACKAGES[@]}" "${VP_TEST_BUILD_PACKAGES[@]}" \
    "${VP_SUITE_PACKAGES[@]}" ||
    { echo "cannot install build dependencies"; echo "0 passed, 1 failed"; exit 1; }

passed=0
failed=0

# The v2 test host's root file system (tests/v2host/build-rootfs.sh, cached
# under /var/cache/vpack-test after the first build): made now, at a low
# priority beside the builds, which measure no time, so that the live tests
# later run on a quiet machine. Its log: build-logs/v2rootfs.log.
rootfs_pid=""
if [ -z "${VPACK_SKIP_INTEGRATION:-}" ]; then
    mkdir -p build-logs
    # Its exit status goes to a file: the fuzzing phase's wait reaps it.
    rm -f build-logs/v2rootfs.rc
    { rc=0; nice -n 19 tests/v2host/build-rootfs.sh > build-logs/v2rootfs.log 2>&1 || rc=$?
      echo "$rc" > build-logs/v2rootfs.rc; } &
    rootfs_pid=$!
fi

# Runs one meson test set and adds its counts; the log says what failed.
run_suite() {
    local dir=$1; shift
    local log="$dir/meson-logs/testlog.json"
    meson test -C "$dir" --print-errorlogs "$@"
    local rc=$?
    if [ -f "$log" ]; then
        local ok bad
        ok=$(grep -c '"result": "OK"' "$log" || true)
        bad=$(grep -c -E '"result": "(FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS)"' "$log" || true)
        passed=$((passed + ok))
        failed=$((failed + bad))
        # A run that failed without a log entry (setup error) still counts.
        if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then failed=$((failed + 1)); fi
    else
        failed=$((failed + 1))
    fi
}

# Every build builds the tests: a missing cmocka or libseccomp is an error
# here, not a build without tests (-Dtests=auto, the default, would skip them).
# Warnings are errors where VPACK_WERROR=1 (.ci/run sets it), not by default:
# a packager's build on the next compiler must not fail on a new warning.
setup_opts=(-Dtests=enabled)
werror=""
[ "${VPACK_WERROR:-0}" = 1 ] && { setup_opts+=(-Dwerror=true); werror=1; }

build() {
    local dir=$1; shift
    if [ -d "$dir" ]; then
        meson setup --reconfigure "$dir" "${setup_opts[@]}" "$@" >/dev/null
    else
        meson setup "$dir" "${setup_opts[@]}" "$@" >/dev/null
    fi && ninja -C "$dir"
}

echo "== build (gcc${werror:+, -Werror})"
if build build; then
    run_suite build --suite unit
else
    failed=$((failed + 1))
fi

# Packagers' builds: every standard buildtype, with gcc and with clang, with
# Debian's default hardening flags (dpkg-buildflags); compiled, not tested.
# Each keeps its own optimisation level: dpkg-buildflags' -O2 would come after
# meson's and win, so debug takes DEB_BUILD_OPTIONS=noopt (-O0, and no
# _FORTIFY_SOURCE, which needs optimisation) and release strips the -O2 (-O3
# stays); plain and debugoptimized build at -O2 either way, with the same
# compiler flags (-g -O2 and the hardening flags, compile_commands.json of
# both compared), so plain stands for both: debugoptimized is the default
# buildtype, and the gcc, ASan and package builds use it. A warning fails
# the build even without -Werror.
buildtype_build() {   # CC BUILDTYPE DIR [VAR=VALUE for dpkg-buildflags ...]
    local cc=$1 bt=$2 dir=$3 cflags cppflags ldflags
    shift 3
    cflags=$(env "$@" dpkg-buildflags --get CFLAGS) &&
        cppflags=$(env "$@" dpkg-buildflags --get CPPFLAGS) &&
        ldflags=$(env "$@" dpkg-buildflags --get LDFLAGS) || return 1
    rm -rf "$dir"
    CC=$cc CFLAGS=$cflags CPPFLAGS=$cppflags LDFLAGS=$ldflags \
        meson setup "$dir" -Dbuildtype="$bt" "${setup_opts[@]}" >/dev/null &&
        ninja -C "$dir" > "$dir/ninja.log" 2>&1
}
echo "== buildtypes: gcc and clang, dpkg-buildflags${werror:+, -Werror}; compile only"
for cc in gcc clang; do
    for bt in plain debug release; do
        case $bt in
        debug) flagenv=(DEB_BUILD_OPTIONS=noopt) ;;
        release) flagenv=(DEB_CFLAGS_MAINT_STRIP=-O2) ;;
        *) flagenv=() ;;
        esac
        dir=build-buildtypes/$cc-$bt
        t0=$SECONDS
        if buildtype_build "$cc" "$bt" "$dir" "${flagenv[@]}" &&
           ! grep -q 'warning:' "$dir/ninja.log"; then
            echo "buildtype $bt, $cc: built without warnings ($((SECONDS - t0)) s)"
            passed=$((passed + 1))
        else
            echo "buildtype $bt, $cc: FAILED"
            grep -E -m 20 'warning:|error:' "$dir/ninja.log" 2>/dev/null
            failed=$((failed + 1))
        fi
    done
done

echo "== build with AddressSanitizer and UndefinedBehaviorSanitizer"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if build build-asan -Db_sanitize=address,undefined -Db_lundef=false; then
    # simulate-bound's days with one seed of three here (the gcc build above
    # ran all three): each run costs about five times as much under ASan.
    VPACK_BOUND_SEEDS=1 run_suite build-asan --suite unit
else
    failed=$((failed + 1))
fi

# Each libFuzzer target (tests/fuzz/README.md) briefly: VPACK_FUZZ_SECONDS
# each (default 15), the domain-XML reader twice that.
fuzz_seconds=${VPACK_FUZZ_SECONDS:-15}
echo "== fuzzing (libFuzzer, ASan + UBSan): corpus replay, then ${fuzz_seconds} s per target"
if CC=clang build build-fuzz -Dfuzzing=true -Db_sanitize=address,undefined -Db_lundef=false; then
    # (build() builds everything with clang too: a second compiler's warnings.)
    # The checked-in corpora are replayed first (meson tests), then new
    # inputs are searched for in scratch copies so the tree stays as it is.
    # A crash leaves its input in build-fuzz/crash-<target>-*.
    run_suite build-fuzz --suite fuzz
    # libFuzzer runs one process: the targets go as many at a time as the
    # machine has CPUs (each still fuzzes its full time), and are reported
    # in order once all have finished.
    fuzz_targets=(domxml cpuset procstat snapshot protocol metrics rules)   # the longest first
    fuzz_jobs=$(nproc)
    fuzz_one() {   # TARGET SECONDS: fuzz it, its exit status in build-fuzz/fuzz-TARGET.rc
        local target=$1 secs=$2 scratch dict=() rc=0
        [ -f "tests/fuzz/$target.dict" ] && dict=(-dict="tests/fuzz/$target.dict")
        scratch=$(mktemp -d)
        cp -r "tests/fuzz/corpus/$target/." "$scratch/"
        "build-fuzz/tests/fuzz/fuzz-$target" "${dict[@]}" \
            -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
            -artifact_prefix="build-fuzz/crash-$target-" -print_final_stats=1 \
            "$scratch" > "build-fuzz/fuzz-$target.log" 2>&1 || rc=$?
        echo "$rc" > "build-fuzz/fuzz-$target.rc"
        rm -rf "$scratch"
    }
    for target in "${fuzz_targets[@]}"; do
        secs=$fuzz_seconds
        [ "$target" = domxml ] && secs=$((fuzz_seconds * 2))
        rm -f "build-fuzz/fuzz-$target.rc"
        while [ "$(jobs -rp | wc -l)" -ge "$fuzz_jobs" ]; do wait -n || true; done
        fuzz_one "$target" "$secs" &
    done
    wait
    for target in "${fuzz_targets[@]}"; do
        secs=$fuzz_seconds
        [ "$target" = domxml ] && secs=$((fuzz_seconds * 2))
        log="build-fuzz/fuzz-$target.log"
        if [ "$(cat "build-fuzz/fuzz-$target.rc" 2>/dev/null)" = 0 ]; then
            echo "fuzz-$target: no crash ($(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') inputs in $secs s)"
            passed=$((passed + 1))
        else
            echo "fuzz-$target: FAILED"; tail -40 "$log"
            failed=$((failed + 1))
        fi
    done
else
    failed=$((failed + 1))
fi

if [ -z "${VPACK_SKIP_INTEGRATION:-}" ]; then
    # With the sanitizer build's programs: vpackd, vpack-hook and vpackctl
    # run under ASan and LeakSanitizer, and a leak or a crash fails the test.
    if [ -n "$rootfs_pid" ]; then
        wait "$rootfs_pid" 2>/dev/null || true   # "not a child": reaped already
        [ "$(cat build-logs/v2rootfs.rc 2>/dev/null)" = 0 ] ||
            { echo "the v2 test host's root file system was not made:"; tail -n 20 build-logs/v2rootfs.log; }
    fi
    echo "== integration tests (real libvirtd, real QEMU guests, sanitized programs)"
    run_suite build-asan --suite integration
    # cgroup v2 alone and two real sockets, in a test host of our own (a VM).
    echo "== v2 test host (cgroup v2, two sockets, nested guests)"
    run_suite build-asan --suite v2host
    # A test that meson's timeout killed could not clean up after itself;
    # the next one does, and after the last one this does.
    bash -c '. tests/integration/lib.sh && vp_reap_all' || true
fi

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
