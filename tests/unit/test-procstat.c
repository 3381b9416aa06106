// SPDX-License-Identifier: MIT
/* /proc/stat reader, on texts captured from real kernels. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vpack/procstat.h"
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
    assert_int_equal(vpack_numastat_parse(numa, strlen(numa), out, 2, &n), -EINVAL);
}

static void test_numastat(void **state)
{
    (void)state;
    /* A cgroup v1 memory.numa_stat of a domain on a 2-node host. */
    const char text[] = "total=1000 N0=750 N1=250\nfile=10 N0=10 N1=0\nanon=990 N0=740 N1=250\n"
                        "hierarchical_total=1000 N0=750 N1=250\n";
    struct vpack_mem_share m[4];
    unsigned n = 0;
    assert_int_equal(vpack_numastat_parse(text, sizeof(text) - 1, m, 4, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(m[0].node, 0);
    assert_true(m[0].share > 0.7499 && m[0].share < 0.7501);
    assert_int_equal(m[1].node, 1);
    assert_true(m[1].share > 0.2499 && m[1].share < 0.2501);
    const char empty[] = "total=0 N0=0\n";
    assert_int_equal(vpack_numastat_parse(empty, sizeof(empty) - 1, m, 4, &n), -ENODATA);
    const char bad[] = "total=5 X0=5\n";
    assert_int_equal(vpack_numastat_parse(bad, sizeof(bad) - 1, m, 4, &n), -EINVAL);
    assert_int_equal(vpack_numastat_parse("file=1 N0=1\n", 12, m, 4, &n), -EINVAL);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_busy),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_numastat),
        cmocka_unit_test(test_task_stat),
        cmocka_unit_test(test_uevent),
        cmocka_unit_test(test_proc_cgroup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
