// SPDX-License-Identifier: MIT
/* /proc/stat reader, on texts captured from real kernels. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vpack/cgroupfs.h"
#include "vpack/proc.h"
#include "vpack/qemu-threads.h"
#include "vpack/uevent.h"
#include "vpack/snapshot.h"

/* A 2-CPU Linux 6.1 host with cpu1 online. */
static const char stat_2cpu[] =
    "cpu  2255 34 2290 22625563 6290 127 456 0 0 0\n"
    "cpu0 1132 34 1441 11311718 3675 127 438 0 0 0\n"
    "cpu1 1123 0 849 11313845 2615 0 18 0 0 0\n"
    "intr 114930548 113199788 3 0 5 263 0 4 [...]\n"
    "ctxt 1990473\nbtime 1062191376\nprocesses 2915\nprocs_running 1\nprocs_blocked 0\n"
    "softirq 183433 0 21755 12 39 1137 231 21459 2263\n";

/* The same host with cpu1 offline: its line is gone. cpu10 checks multi-digit ids. */
static const char stat_offline[] =
    "cpu  2255 34 2290 22625563 6290 127 456 0 0 0\n"
    "cpu0 1132 34 1441 11311718 3675 127 438 0 0 0\n"
    "cpu10 5 0 5 90 0 0 0 0 7 0\n";

static void test_parse(void **state)
{
    (void)state;
    struct vpack_cpu_times *t = NULL;
    unsigned n = 0;
    assert_int_equal(vpack_procstat_parse(stat_2cpu, strlen(stat_2cpu), &t, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(t[0].cpu, 0);
    assert_int_equal(t[0].busy, 1132 + 34 + 1441 + 127 + 438);
    assert_int_equal(t[0].total, 1132 + 34 + 1441 + 127 + 438 + 11311718 + 3675);
    assert_int_equal(t[1].cpu, 1);
    free(t);

    assert_int_equal(vpack_procstat_parse(stat_offline, strlen(stat_offline), &t, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(t[1].cpu, 10);
    /* guest time (7) is inside user already and is not added again. */
    assert_int_equal(t[1].busy, 10);
    assert_int_equal(t[1].total, 100);
    free(t);
}

static void test_busy(void **state)
{
    (void)state;
    struct vpack_cpu_times a = {0, 100, 1000}, b = {0, 150, 1100}, c = {0, 150, 1100};
    assert_true(vpack_cpu_times_busy(&a, &b) > 0.499 && vpack_cpu_times_busy(&a, &b) < 0.501);
    assert_true(vpack_cpu_times_busy(&b, &c) < 0);
    assert_true(vpack_cpu_times_busy(&b, &a) < 0);
}

static int close_to(double a, double b)
{
    return a - b < 1e-9 && b - a < 1e-9;
}

/* A thread read after light intervals: the gap at its steady rate, the step in the last one. */
static void test_gap_rate(void **state)
{
    (void)state;
    /* One interval: the average. */
    assert_true(close_to(vpack_gap_rate(5e8, 0.0, 1e9, 0), 0.5));
    assert_true(close_to(vpack_gap_rate(5e8, 0.3, 1e9, 1e9), 0.5));
    /* 5 s read at once, average wanted (a read due by the count). */
    assert_true(close_to(vpack_gap_rate(5e8, 0.1, 5e9, 0), 0.1));
    /* Idle for 4 s (rate 0.01), then a busy loop in the last second. */
    assert_true(close_to(vpack_gap_rate(0.04e9 + 1e9, 0.01, 5e9, 1e9), 1.0));
    /* Less than the steady rate would give: 0, never negative. */
    assert_true(close_to(vpack_gap_rate(1e8, 0.05, 5e9, 1e9), 0.0));
    /* No time, or time backwards: 0, no division by zero. */
    assert_true(close_to(vpack_gap_rate(1e8, 0.05, 0, 1e9), 0.0));
    assert_true(close_to(vpack_gap_rate(1e8, 0.05, -1, 0), 0.0));
}

static void test_malformed(void **state)
{
    (void)state;
    struct vpack_cpu_times *t = NULL;
    unsigned n = 0;
    const char *bad[] = {"cpu0 1 2\n", "cpu0 x y z w\n", "cpu99999999999 1 2 3 4\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(vpack_procstat_parse(bad[i], strlen(bad[i]), &t, &n), -EINVAL);
    /* No trailing newline and a buffer that is not NUL-terminated. */
    char buf[] = {'c', 'p', 'u', '3', ' ', '1', ' ', '2', ' ', '3', ' ', '4', 'Z'};
    assert_int_equal(vpack_procstat_parse(buf, sizeof(buf) - 1, &t, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(t[0].cpu, 3);
    assert_int_equal(t[0].total, 10);
    free(t);
    assert_int_equal(vpack_procstat_parse("", 0, &t, &n), 0);
    assert_int_equal(n, 0);
    free(t);
}

/*
 * Found by fuzz-procstat (regress-overflow-*): numbers beyond 64 bits wrapped
 * and sums near the top wrapped to small, giving busy > total.
 */
static void test_overflow(void **state)
{
    (void)state;
    struct vpack_cpu_times *t = NULL;
    unsigned n = 0;
    uint64_t ticks = 0;
    const char *big = "cpu0 18446744073709551616 0 0 0\n";
    assert_int_equal(vpack_procstat_parse(big, strlen(big), &t, &n), -EINVAL);
    const char *top = "cpu0 18446744073709551615 0 0 5\n";
    assert_int_equal(vpack_procstat_parse(top, strlen(top), &t, &n), 0);
    assert_int_equal(n, 1);
    assert_true(t[0].busy == UINT64_MAX && t[0].total == UINT64_MAX);
    free(t);
    const char *task = "1 (x) S 1 1 1 0 -1 0 0 0 0 0 18446744073709551615 7 0\n";
    assert_int_equal(vpack_task_stat_parse(task, strlen(task), &ticks), 0);
    assert_true(ticks == UINT64_MAX);
    const char *numa = "total=99999999999999999999 N0=1\n";
    struct vpack_mem_share out[2];
    assert_int_equal(vpack_numastat_parse(numa, strlen(numa), 4096, out, 2, &n, NULL), -EINVAL);
}

static void test_numastat(void **state)
{
    (void)state;
    /* A cgroup v1 memory.numa_stat of a domain on a 2-node host, in pages. */
    const char text[] = "total=1000 N0=750 N1=250\nfile=10 N0=10 N1=0\nanon=990 N0=740 N1=250\n"
                        "hierarchical_total=1000 N0=750 N1=250\n";
    struct vpack_mem_share m[4];
    unsigned n = 0;
    uint64_t bytes = 0;
    assert_int_equal(vpack_numastat_parse(text, sizeof(text) - 1, 4096, m, 4, &n, &bytes), 1);
    assert_int_equal(n, 2);
    assert_int_equal(m[0].node, 0);
    assert_true(m[0].share > 0.7499 && m[0].share < 0.7501);
    assert_int_equal(m[1].node, 1);
    assert_true(m[1].share > 0.2499 && m[1].share < 0.2501);
    /* Pages times the page size. */
    assert_int_equal(bytes, 1000 * 4096);
    /* hierarchical_total (the group and its children: libvirt's nested group) wins. */
    const char nested[] = "total=0 N0=0 N1=0\nhierarchical_total=100 N0=0 N1=100\n";
    assert_int_equal(vpack_numastat_parse(nested, sizeof(nested) - 1, 65536, m, 4, &n, &bytes), 1);
    assert_int_equal(n, 2);
    assert_true(m[1].share > 0.9999);
    assert_int_equal(bytes, 100 * 65536);
    const char empty[] = "total=0 N0=0\n";
    assert_int_equal(vpack_numastat_parse(empty, sizeof(empty) - 1, 4096, m, 4, &n, NULL),
                     -ENODATA);
    const char bad[] = "total=5 X0=5\n";
    assert_int_equal(vpack_numastat_parse(bad, sizeof(bad) - 1, 4096, m, 4, &n, NULL), -EINVAL);
    assert_int_equal(vpack_numastat_parse("file=1 N0=1\n", 12, 4096, m, 4, &n, NULL), -EINVAL);
}

/*
 * cgroup v2 (Linux 6.1): one line per type, in bytes, with the node list
 * on each; new lines may come anywhere. The share is taken over the page
 * lists (what v1's total counts), not anon + file + ... (shmem is in both).
 */
static void test_numastat_v2(void **state)
{
    (void)state;
    const char text[] = "anon N0=100663296 N1=0\n"
                        "file N0=4194304 N1=4194304\n"
                        "kernel_stack N0=32768 N1=0\n"
                        "shmem N0=0 N1=0\n"
                        "inactive_anon N0=67108864 N1=0\n"
                        "active_anon N0=33554432 N1=0\n"
                        "inactive_file N0=2097152 N1=4194304\n"
                        "active_file N0=2097152 N1=0\n"
                        "unevictable N0=0 N1=0\n"
                        "slab_reclaimable N0=999999999 N1=0\n";
    struct vpack_mem_share m[4];
    unsigned n = 0;
    uint64_t bytes = 0;
    assert_int_equal(vpack_numastat_parse(text, sizeof(text) - 1, 4096, m, 4, &n, &bytes), 2);
    assert_int_equal(n, 2);
    assert_int_equal(m[0].node, 0);
    assert_int_equal(m[1].node, 1);
    /* 64 + 32 + 2 + 2 MiB on node 0, 4 MiB on node 1: bytes, the page size plays no part. */
    assert_int_equal(bytes, (uint64_t)104 << 20);
    assert_true(m[0].share > 100.0 / 104 - 1e-9 && m[0].share < 100.0 / 104 + 1e-9);
    assert_true(m[1].share > 4.0 / 104 - 1e-9 && m[1].share < 4.0 / 104 + 1e-9);
    /* Without the page lists (an older kernel's file): anon + file. */
    const char old[] = "anon N0=3072 N1=1024\nfile N0=0 N1=0\n";
    assert_int_equal(vpack_numastat_parse(old, sizeof(old) - 1, 4096, m, 4, &n, &bytes), 2);
    assert_int_equal(bytes, 4096);
    assert_true(m[0].share > 0.7499 && m[0].share < 0.7501);
    /* Room for one node: the other is left out, the shares still sum to 1. */
    assert_int_equal(vpack_numastat_parse(text, sizeof(text) - 1, 4096, m, 1, &n, NULL), 2);
    assert_int_equal(n, 1);
    assert_true(m[0].share > 0.9999);
    const char zero[] = "anon N0=0\ninactive_anon N0=0\n";
    assert_int_equal(vpack_numastat_parse(zero, sizeof(zero) - 1, 4096, m, 4, &n, NULL),
                     -ENODATA);
    const char broken[] = "active_anon N0=1 N1=x\n";
    assert_int_equal(vpack_numastat_parse(broken, sizeof(broken) - 1, 4096, m, 4, &n, NULL),
                     -EINVAL);
    const char other[] = "kernel_stack N0=1\nslab_reclaimable N0=5\n";
    assert_int_equal(vpack_numastat_parse(other, sizeof(other) - 1, 4096, m, 4, &n, NULL),
                     -EINVAL);
    assert_int_equal(vpack_numastat_parse("", 0, 4096, m, 4, &n, NULL), -EINVAL);
}

static void test_task_stat(void **state)
{
    (void)state;
    /* A QEMU iothread's stat on Linux 6.1; the name holds a space and a ')'. */
    const char text[] = "4242 (IO iothr) 1) S 1 4200 4200 0 -1 4194368 95 0 0 0 "
                        "1234 56 0 0 20 0 5 0 12345 1562196 56218 18446744073709551615\n";
    uint64_t t = 0;
    assert_int_equal(vpack_task_stat_parse(text, sizeof(text) - 1, &t), 0);
    assert_int_equal(t, 1234 + 56);
    assert_int_equal(vpack_task_stat_parse("4242 (x) S 1 2", 14, &t), -EINVAL);
    assert_int_equal(vpack_task_stat_parse("garbage", 7, &t), -EINVAL);
}

/* vpackd's own /proc/self/stat, /proc/stat's btime and /proc/self/limits (Linux 6.1). */
static void test_process(void **state)
{
    (void)state;
    const char stat[] = "3187 (vpa) ckd) S 1 3187 3187 0 -1 4194560 2411 0 3 0 1234 567 0 0 20 0 4 "
                        "0 379587 276037632 2885 18446744073709551615 94447754657792 0 0\n";
    struct vpack_proc_usage u = {0};
    assert_int_equal(vpack_proc_usage_parse(stat, sizeof(stat) - 1, &u), 0);
    assert_int_equal(u.utime, 1234);
    assert_int_equal(u.stime, 567);
    assert_int_equal(u.nthreads, 4);
    assert_int_equal(u.starttime, 379587);
    assert_int_equal(u.vsize, 276037632);
    assert_int_equal(u.rss, 2885);
    /* Cut before rss's successor, or a field that is no number: refused, *out untouched. */
    const char *bad[] = {"3187 (vpackd) S 1 3187 3187 0 -1 4194560 2411 0 3 0 1234 567 0 0 20 0 4 0 "
                         "379587 276037632 2885",
                         "3187 (vpackd) S 1 3187 3187 0 -1 4194560 2411 0 3 0 x 567 0 0 20 0 4 0 "
                         "379587 276037632 2885 0",
                         "3187 vpackd S 1", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(vpack_proc_usage_parse(bad[i], strlen(bad[i]), &u), -EINVAL);
        assert_int_equal(u.rss, 2885);
    }

    const char procstat[] = "cpu  110425 125048 108332 410730 818 0 962 0 0 0\n"
                            "cpu0 59542 62254 52401 203842 194 0 438 0 0 0\n"
                            "intr 7468233 0 9 0\nctxt 14287593\nbtime 1796467805\n"
                            "processes 31244\n";
    uint64_t btime = 0;
    assert_int_equal(vpack_procstat_btime(procstat, sizeof(procstat) - 1, &btime), 0);
    assert_int_equal(btime, 1796467805);
    /* The last line without its newline; no such line; a line that is not a number. */
    assert_int_equal(vpack_procstat_btime("ctxt 1\nbtime 42", 16, &btime), 0);
    assert_int_equal(btime, 42);
    assert_int_equal(vpack_procstat_btime("ctxt 1\nbtimex 4\n", 17, &btime), -ENOENT);
    assert_int_equal(vpack_procstat_btime("btime x\n", 8, &btime), -EINVAL);

    const char limits[] =
        "Limit                     Soft Limit           Hard Limit           Units     \n"
        "Max processes             96367                96367                processes \n"
        "Max open files            1024                 524288               files     \n";
    uint64_t soft = 0;
    assert_int_equal(vpack_proc_limits_open_files(limits, sizeof(limits) - 1, &soft), 0);
    assert_int_equal(soft, 1024);
    const char unl[] = "Max open files            unlimited            unlimited            files\n";
    assert_int_equal(vpack_proc_limits_open_files(unl, sizeof(unl) - 1, &soft), 0);
    assert_true(soft == UINT64_MAX);
    assert_int_equal(vpack_proc_limits_open_files(limits, 80, &soft), -ENOENT);
    assert_int_equal(vpack_proc_limits_open_files("Max open files   many\n", 22, &soft), -EINVAL);
}

/*
 * A process's CPU time across due reads (vpack_usage_watch): 10 ms ticks,
 * band 0.02 CPUs, a reference at most 60 s old.
 */
static void test_usage_watch(void **state)
{
    (void)state;
    const double tick = 1e7, band = 0.02;
    const uint64_t s = 1000000000ull, age = 60 * s;
    struct vpack_usage_watch w = {0};
    /* Nothing read yet, then one reading: no window, no reference. */
    assert_false(vpack_usage_unchanged(&w, 100, 1 * s, tick, band, age));
    vpack_usage_note(&w, 100, 1 * s, tick, true);
    assert_true(w.have_last);
    assert_false(w.have_ref);
    assert_false(vpack_usage_unchanged(&w, 110, 11 * s, tick, band, age));
    /* A full read 10 s on: 10 ticks, 0.01 CPUs, known to 2 ticks in 10 s (0.002). */
    vpack_usage_note(&w, 110, 11 * s, tick, true);
    assert_true(w.have_ref);
    assert_true(fabs(w.ref_rate - 0.01) < 1e-12);
    assert_true(fabs(w.ref_err - 0.002) < 1e-12);
    /* 10 s later: the same rate, and changes up to band less both windows' 2 ticks. */
    assert_true(vpack_usage_unchanged(&w, 120, 21 * s, tick, band, age));
    assert_true(vpack_usage_unchanged(&w, 126, 21 * s, tick, band, age));  /* +0.006 */
    assert_true(vpack_usage_unchanged(&w, 110, 21 * s, tick, band, age));  /* -0.010 */
    assert_true(vpack_usage_unchanged(&w, 135, 21 * s, tick, band, age));  /* +0.015 */
    assert_false(vpack_usage_unchanged(&w, 137, 21 * s, tick, band, age)); /* +0.017 + 0.004 */
    assert_false(vpack_usage_unchanged(&w, 140, 21 * s, tick, band, age)); /* +0.02 */
    assert_false(vpack_usage_unchanged(&w, 109, 21 * s, tick, band, age)); /* went back */
    assert_false(vpack_usage_unchanged(&w, 110, 11 * s, tick, band, age)); /* no window */
    /* A reading left unread keeps the reference; the next window starts there. */
    vpack_usage_note(&w, 120, 21 * s, tick, false);
    assert_true(fabs(w.ref_rate - 0.01) < 1e-12);
    assert_true(vpack_usage_unchanged(&w, 130, 31 * s, tick, band, age));
    /* Drift: each window compared with the reference, not with the one before. */
    vpack_usage_note(&w, 130, 31 * s, tick, false);
    assert_true(vpack_usage_unchanged(&w, 142, 41 * s, tick, band, age));  /* 0.012 */
    vpack_usage_note(&w, 142, 41 * s, tick, false);
    assert_true(vpack_usage_unchanged(&w, 162, 51 * s, tick, band, age));  /* 0.020 */
    assert_false(vpack_usage_unchanged(&w, 172, 51 * s, tick, band, age)); /* 0.030 */
    /* The reference is 60 s old at 71 s: a full read whatever the rate. */
    vpack_usage_note(&w, 152, 51 * s, tick, false);
    assert_true(vpack_usage_unchanged(&w, 161, 60 * s, tick, band, age));
    assert_false(vpack_usage_unchanged(&w, 172, 71 * s, tick, band, age));
    /* A full read over one second: 2 ticks in 1 s is the whole band, nothing passes. */
    vpack_usage_note(&w, 153, 52 * s, tick, true);
    assert_true(fabs(w.ref_err - 0.02) < 1e-12);
    assert_false(vpack_usage_unchanged(&w, 163, 62 * s, tick, band, age));
    /* Where the gap's move may be: the threads were last read at 11 s; readings left
     * unread since (the last at 51 s) confirmed the steady rate up to then. */
    assert_true(fabs(vpack_usage_last(&w, 11 * s, 0, 53 * s) - 1e9) < 1);   /* since 52 s */
    assert_true(fabs(vpack_usage_last(&w, 11 * s, 5e8, 53 * s) - 5e8) < 1); /* a CPU's step */
    assert_true(vpack_usage_last(&w, 52 * s, 0, 53 * s) == 0); /* read at the last reading */
    assert_true(vpack_usage_last(&w, 0, 0, 53 * s) == 0);      /* never read */
    /* A full read whose count went back (another process): no reference. */
    vpack_usage_note(&w, 5, 63 * s, tick, true);
    assert_false(w.have_ref);
    assert_false(vpack_usage_unchanged(&w, 6, 64 * s, tick, band, age));
}

static void test_schedstat(void **state)
{
    (void)state;
    struct vpack_schedstat s = {0};
    /* A TCG vCPU thread's schedstat on Linux 6.1. */
    const char text[] = "435330123456 9203180931 40311\n";
    assert_int_equal(vpack_schedstat_parse(text, sizeof(text) - 1, &s), 0);
    assert_int_equal(s.run_ns, 435330123456ULL);
    assert_int_equal(s.wait_ns, 9203180931ULL);
    assert_int_equal(s.slices, 40311);
    /* Without the newline (a short read cannot cut a number: the text is one line). */
    assert_int_equal(vpack_schedstat_parse("1 2 3", 5, &s), 0);
    assert_int_equal(s.run_ns + s.wait_ns + s.slices, 6);
    const char *bad[] = {"", "1 2", "1 2 x", "1 2 3 4", "1 2 3\n\n", "-1 2 3",
                         "18446744073709551616 0 0", "a b c"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        s.run_ns = 77;
        assert_int_equal(vpack_schedstat_parse(bad[i], strlen(bad[i]), &s), -EINVAL);
        assert_int_equal(s.run_ns, 77); /* untouched on error */
    }
}

static void test_uevent(void **state)
{
    (void)state;
    int cpu = -1, on = -1;
    const char off[] = "offline@/devices/system/cpu/cpu1\0ACTION=offline\0DEVPATH=/devices/system/cpu/cpu1\0SUBSYSTEM=cpu\0";
    const char onl[] = "online@/devices/system/cpu/cpu12\0ACTION=online\0";
    const char other[] = "add@/devices/virtual/net/veth0\0ACTION=add\0";
    const char cache[] = "online@/devices/system/cpu/cpu1/cache\0";
    const char udev[] = "libudev\0\xfe\xed\xca\xfe";
    assert_int_equal(vpack_uevent_parse_cpu(off, sizeof(off), &cpu, &on), 1);
    assert_int_equal(cpu, 1);
    assert_int_equal(on, 0);
    assert_int_equal(vpack_uevent_parse_cpu(onl, sizeof(onl), &cpu, &on), 1);
    assert_int_equal(cpu, 12);
    assert_int_equal(on, 1);
    assert_int_equal(vpack_uevent_parse_cpu(other, sizeof(other), &cpu, &on), 0);
    assert_int_equal(vpack_uevent_parse_cpu(cache, sizeof(cache), &cpu, &on), 0);
    assert_int_equal(vpack_uevent_parse_cpu(udev, sizeof(udev), &cpu, &on), -EINVAL);
    assert_int_equal(vpack_uevent_parse_cpu("", 0, &cpu, &on), -EINVAL);
}


/* /proc/PID/cgroup of a libvirt QEMU process under cgroup v1. */
static void test_proc_cgroup(void **state)
{
    (void)state;
    const char text[] = "12:pids:/machine/qemu-1-a.libvirt-qemu\n"
                        "4:cpu,cpuacct:/machine/qemu-1-a.libvirt-qemu/emulator\n"
                        "3:memory:/machine/qemu-1-a.libvirt-qemu\n"
                        "2:cpuset:/machine/qemu-1-a.libvirt-qemu/emulator\n"
                        "1:name=systemd:/machine.slice\n"
                        "0::/machine.slice";
    char *p = vpack_proc_cgroup_parse(text, strlen(text), "memory");
    assert_non_null(p);
    assert_string_equal(p, "/machine/qemu-1-a.libvirt-qemu");
    free(p);
    p = vpack_proc_cgroup_parse(text, strlen(text), "cpuacct");
    assert_string_equal(p, "/machine/qemu-1-a.libvirt-qemu/emulator");
    free(p);
    p = vpack_proc_cgroup_parse(text, strlen(text), "cpuset");
    assert_string_equal(p, "/machine/qemu-1-a.libvirt-qemu/emulator");
    free(p);
    /* "cpu" must not match "cpuset" or "cpuacct" by prefix; the last line has no newline. */
    p = vpack_proc_cgroup_parse(text, strlen(text), "cpu");
    assert_string_equal(p, "/machine/qemu-1-a.libvirt-qemu/emulator");
    free(p);
    assert_null(vpack_proc_cgroup_parse(text, strlen(text), "blkio"));
    assert_null(vpack_proc_cgroup_parse(text, strlen(text), ""));
    assert_null(vpack_proc_cgroup_parse("3:memory:relative\n", 18, "memory"));
    assert_null(vpack_proc_cgroup_parse("3:memory:\n", 10, "memory"));
    assert_null(vpack_proc_cgroup_parse("garbage", 7, "memory"));
    /* Only len bytes are read: the path stops at the end of the buffer. */
    p = vpack_proc_cgroup_parse("3:memory:/a/b", 11, "memory");
    assert_string_equal(p, "/a");
    free(p);
}

/* cgroup v2's line, and a hybrid host's (v1 controllers, v2 for tracking). */
static void test_proc_cgroup_v2(void **state)
{
    (void)state;
    const char v2[] = "0::/machine.slice/machine-qemu\\x2d1\\x2dweb.scope/libvirt/emulator\n";
    char *p = vpack_proc_cgroup_parse(v2, strlen(v2), NULL);
    assert_string_equal(p, "/machine.slice/machine-qemu\\x2d1\\x2dweb.scope/libvirt/emulator");
    free(p);
    assert_null(vpack_proc_cgroup_parse(v2, strlen(v2), "memory"));
    const char hybrid[] = "4:memory:/machine/qemu-1-a.libvirt-qemu\n1:name=systemd:/\n0::/\n";
    p = vpack_proc_cgroup_parse(hybrid, strlen(hybrid), NULL);
    assert_string_equal(p, "/");
    free(p);
    /* "1::/x" is not v2's line (hierarchy 0); a v1 line is not either. */
    assert_null(vpack_proc_cgroup_parse("1::/x\n3:memory:/y\n", 18, NULL));
    assert_null(vpack_proc_cgroup_parse("0::relative\n", 12, NULL));
}

static void test_cgroup_mounts(void **state)
{
    (void)state;
    struct vpack_cgroup_mounts m;
    /* Debian 12 without systemd as PID 1 (this project's test machines): hybrid. */
    const char hybrid[] =
        "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n"
        "tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0\n"
        "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n"
        "cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0\n"
        "cgroup /sys/fs/cgroup/memory cgroup rw,nosuid,nodev,noexec,relatime,memory 0 0\n"
        "cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0\n"
        "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";
    assert_int_equal(vpack_cgroup_mounts_parse(hybrid, sizeof(hybrid) - 1, &m), 0);
    assert_string_equal(m.cpuset, "/sys/fs/cgroup/cpuset");
    assert_string_equal(m.memory, "/sys/fs/cgroup/memory");
    assert_string_equal(m.unified, "/sys/fs/cgroup/unified");
    vpack_cgroup_mounts_clear(&m);
    assert_null(m.cpuset);
    /* Debian 12 with systemd: one cgroup2 mount. */
    const char v2[] = "cgroup2 /sys/fs/cgroup cgroup2 "
                      "rw,nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot 0 0";
    assert_int_equal(vpack_cgroup_mounts_parse(v2, sizeof(v2) - 1, &m), 0);
    assert_null(m.cpuset);
    assert_null(m.memory);
    assert_string_equal(m.unified, "/sys/fs/cgroup");
    vpack_cgroup_mounts_clear(&m);
    /* Controllers sharing a hierarchy, a blank escaped, "cpuset" not matched by prefix. */
    const char odd[] = "cgroup /cg/cpu\\040mem cgroup rw,cpuset,memory 0 0\n"
                       "cgroup /cg/x cgroup rw,cpusetx 0 0\n"
                       "garbage\n"
                       "cgroup relative cgroup rw,memory 0 0\n";
    assert_int_equal(vpack_cgroup_mounts_parse(odd, sizeof(odd) - 1, &m), 0);
    assert_string_equal(m.cpuset, "/cg/cpu mem");
    assert_string_equal(m.memory, "/cg/cpu mem");
    assert_null(m.unified);
    vpack_cgroup_mounts_clear(&m);
    /* An escaped NUL is not a path. */
    assert_int_equal(vpack_cgroup_mounts_parse("cgroup2 /a\\000b cgroup2 rw 0 0", 29, &m), 0);
    assert_null(m.unified);
    vpack_cgroup_mounts_clear(&m);
}

/* QEMU's thread names with debug-threads=on, as /proc/PID/task/TID/comm has them. */
static void test_qemu_threads(void **state)
{
    (void)state;
    int v = -7;
    assert_int_equal(vpack_qemu_thread_kind("CPU 0/KVM", &v), VPACK_QEMU_VCPU);
    assert_int_equal(v, 0);
    assert_int_equal(vpack_qemu_thread_kind("CPU 11/TCG", &v), VPACK_QEMU_VCPU);
    assert_int_equal(v, 11);
    assert_int_equal(vpack_qemu_thread_kind("ALL CPUs/TCG", &v), VPACK_QEMU_VCPU);
    assert_int_equal(v, -1);
    assert_int_equal(vpack_qemu_thread_kind("IO iothread1", &v), VPACK_QEMU_IOTHREAD);
    assert_int_equal(vpack_qemu_thread_kind("IO mon_iothread", &v), VPACK_QEMU_IOTHREAD);
    assert_int_equal(vpack_qemu_thread_kind("qemu-system-x86", &v), VPACK_QEMU_OTHER);
    assert_int_equal(vpack_qemu_thread_kind("CPU 0/KVM x", &v), VPACK_QEMU_OTHER);
    assert_int_equal(vpack_qemu_thread_kind("CPU x/KVM", &v), VPACK_QEMU_OTHER);
    assert_int_equal(vpack_qemu_thread_kind("worker", &v), VPACK_QEMU_OTHER);

    const unsigned ids[] = {1, 2, 1000, 10000, 99999};
    assert_int_equal(vpack_qemu_iothread_match("IO iothread1", ids, 5), 0);
    assert_int_equal(vpack_qemu_iothread_match("IO iothread2", ids, 5), 1);
    assert_int_equal(vpack_qemu_iothread_match("IO iothread3", ids, 5), -1);
    assert_int_equal(vpack_qemu_iothread_match("IO mon_iothread", ids, 5), -1);
    /* 15 bytes: "IO iothread1000" is 1000's name and 10000's cut one. */
    assert_int_equal(vpack_qemu_iothread_match("IO iothread1000", ids, 5), -2);
    assert_int_equal(vpack_qemu_iothread_match("IO iothread1000", ids, 3), 2);
    /* Cut, but only one of the ids reads so. */
    assert_int_equal(vpack_qemu_iothread_match("IO iothread9999", ids, 5), 4);
    assert_int_equal(vpack_qemu_iothread_match("IO iothread99999", ids, 5), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_busy),
        cmocka_unit_test(test_gap_rate),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_numastat),
        cmocka_unit_test(test_numastat_v2),
        cmocka_unit_test(test_task_stat),
        cmocka_unit_test(test_process),
        cmocka_unit_test(test_usage_watch),
        cmocka_unit_test(test_schedstat),
        cmocka_unit_test(test_uevent),
        cmocka_unit_test(test_proc_cgroup),
        cmocka_unit_test(test_proc_cgroup_v2),
        cmocka_unit_test(test_cgroup_mounts),
        cmocka_unit_test(test_qemu_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
