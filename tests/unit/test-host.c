// SPDX-License-Identifier: MIT
/*
 * The host adapter on fixture trees: uevent parsing, /proc and /sys reads
 * under a root, and the cgroup v1 cpuset repair on a tree shaped like
 * libvirt's (machine/<domain>/{vcpuN,emulator}) after CPU 1 went offline and
 * came back; and what the agent reads of a QEMU process (its cgroups, its
 * iothreads' CPU time, where its memory is) on the fixture tree
 * $VPACK_TESTDATA/hosts/qemu-iothread.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cgroup.h"
#include "host.h"
#include "vpack/snapshot.h"

static char root[256];

static void put(const char *rel, const char *content)
{
    char path[1024], dir[1024];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    snprintf(dir, sizeof(dir), "%s", path);
    for (char *p = dir + strlen(root) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        mkdir(dir, 0755);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(content, f);
    fclose(f);
}

static char *get(const char *rel)
{
    char *buf = NULL;
    assert_int_equal(vpack_host_read_file(root, rel, 4096, &buf, NULL), 0);
    buf[strcspn(buf, "\n")] = '\0';
    return buf;
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof(root), "/tmp/vpack-test-host-XXXXXX");
    assert_non_null(mkdtemp(root));
    return 0;
}

static int teardown(void **state)
{
    char cmd[300];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_reads_under_root(void **state)
{
    (void)state;
    put("sys/devices/system/cpu/online", "0-1,4\n");
    put("proc/stat", "cpu  1 2 3 4\ncpu0 1 0 1 8 0 0 0 0\ncpu4 5 0 0 5 0 0 0 0\n");
    vpack_cpuset on;
    char buf[64];
    assert_int_equal(vpack_host_online_cpus(root, &on), 0);
    vpack_cpuset_format_buf(&on, buf, sizeof(buf));
    assert_string_equal(buf, "0-1,4");
    struct vpack_cpu_times *t = NULL;
    unsigned n = 0;
    assert_int_equal(vpack_host_cpu_times(root, &t, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(t[1].cpu, 4);
    assert_int_equal(t[1].busy, 5);
    free(t);
    char *data = NULL;
    assert_int_equal(vpack_host_read_file(root, "nonexistent", 10, &data, NULL), -ENOENT);
    assert_int_equal(vpack_host_read_file(root, "proc/stat", 10, &data, NULL), -EFBIG);
}

#define CG "sys/fs/cgroup/cpuset"
#define DOM CG "/machine/qemu-1-vptest-a.libvirt-qemu"

static void test_cgroup_repair(void **state)
{
    (void)state;
    /* After CPU 1 went offline and back: the root has it, libvirt's groups do not. */
    put(CG "/cpuset.cpus", "0-1\n");
    put(CG "/machine/cpuset.cpus", "0\n");
    put(DOM "/cpuset.cpus", "0\n");
    put(DOM "/vcpu0/cpuset.cpus", "0\n");
    put(DOM "/emulator/cpuset.cpus", "0\n");
    put(DOM "/iothread1/cpuset.cpus", "0\n");
    /* A group someone narrowed on purpose keeps what it had, plus what returned. */
    put(CG "/machine/qemu-2-b.libvirt-qemu/cpuset.cpus", "0\n");
    /* Groups outside libvirt's partition are not ours. */
    put(CG "/user/cpuset.cpus", "0\n");

    vpack_cpuset online;
    vpack_cpuset_zero(&online);
    vpack_cpuset_set_range(&online, 0, 1);
    unsigned fixed = 0;
    assert_int_equal(vpack_cgroup_repair(root, &online, &fixed), 0);
    assert_int_equal(fixed, 3);
    char *s;
    assert_string_equal((s = get(CG "/machine/cpuset.cpus")), "0-1");
    free(s);
    assert_string_equal((s = get(DOM "/cpuset.cpus")), "0-1");
    free(s);
    assert_string_equal((s = get(CG "/machine/qemu-2-b.libvirt-qemu/cpuset.cpus")), "0-1");
    free(s);
    /* Per-thread groups are libvirt's to rewrite when vpack pins through it. */
    assert_string_equal((s = get(DOM "/vcpu0/cpuset.cpus")), "0");
    free(s);
    assert_string_equal((s = get(DOM "/emulator/cpuset.cpus")), "0");
    free(s);
    assert_string_equal((s = get(DOM "/iothread1/cpuset.cpus")), "0");
    free(s);
    assert_string_equal((s = get(CG "/user/cpuset.cpus")), "0");
    free(s);

    /* Nothing left to repair: nothing written. */
    assert_int_equal(vpack_cgroup_repair(root, &online, &fixed), 0);
    assert_int_equal(fixed, 0);

    /* A CPU still offline is not given back. */
    put(CG "/cpuset.cpus", "0-2\n");
    put(CG "/machine/cpuset.cpus", "0\n");
    assert_int_equal(vpack_cgroup_repair(root, &online, &fixed), 0);
    assert_string_equal((s = get(CG "/machine/cpuset.cpus")), "0-1");
    free(s);
}

static void test_cgroup_v2_noop(void **state)
{
    (void)state;
    char other[300];
    snprintf(other, sizeof(other), "%s/none", root);
    vpack_cpuset online;
    vpack_cpuset_zero(&online);
    vpack_cpuset_set(&online, 0);
    unsigned fixed = 7;
    assert_int_equal(vpack_cgroup_repair(other, &online, &fixed), 0);
    assert_int_equal(fixed, 0);
}

/* The fixture tree of one QEMU process (pid 4242) on cgroup v1. */
static void qemu_root(char *out, size_t len)
{
    const char *data = getenv("VPACK_TESTDATA");
    if (!data || !*data)
        fail_msg("VPACK_TESTDATA is not set (run the test through meson)");
    snprintf(out, len, "%s/hosts/qemu-iothread", data);
}

static void test_process_cgroups(void **state)
{
    char qroot[4096], *mem = NULL, *cpuset = NULL, *g = NULL;
    (void)state;
    qemu_root(qroot, sizeof(qroot));
    assert_int_equal(vpack_host_process_cgroup(qroot, 4242, "cpu", &g), 0);
    assert_string_equal(g, "/machine/qemu-1-vm.libvirt-qemu/emulator");
    free(g);
    assert_int_equal(vpack_host_process_cgroup(qroot, 4242, "blkio", &g), -ENOENT);
    assert_int_equal(vpack_host_process_cgroup(qroot, 4243, "cpu", &g), -ENOENT);
    assert_int_equal(vpack_host_process_cgroup(qroot, 0, "cpu", &g), -ENOENT);
    /* The domain's cpuset group is the emulator's parent. */
    vpack_cgroup_domain_groups(qroot, 4242, &mem, &cpuset);
    assert_string_equal(mem, "/machine/qemu-1-vm.libvirt-qemu");
    assert_string_equal(cpuset, "/machine/qemu-1-vm.libvirt-qemu");
    free(mem);
    free(cpuset);
    vpack_cgroup_domain_groups(qroot, 4243, &mem, &cpuset);
    assert_null(mem);
    assert_null(cpuset);
}

static void test_iothread_ticks(void **state)
{
    char qroot[4096];
    uint64_t t = 0;
    (void)state;
    qemu_root(qroot, sizeof(qroot));
    assert_int_equal(vpack_host_task_ticks(qroot, 4242, "4250", &t), 0);
    assert_int_equal(t, 42);
    /* A name with blanks and parentheses in it. */
    assert_int_equal(vpack_host_task_ticks(qroot, 4242, "4251", &t), 0);
    assert_int_equal(t, 8);
    assert_int_equal(vpack_host_task_ticks(qroot, 4242, "4299", &t), -ENOENT);
    /* Both threads of iothread1; the one that is gone counts nothing. */
    assert_int_equal(vpack_cgroup_iothread_ticks(qroot, "/machine/qemu-1-vm.libvirt-qemu", 4242,
                                                 1, &t), 0);
    assert_int_equal(t, 50);
    assert_int_equal(vpack_cgroup_iothread_ticks(qroot, "/machine/qemu-1-vm.libvirt-qemu", 4242,
                                                 2, &t), -ENOENT);
    assert_int_equal(vpack_cgroup_iothread_ticks(qroot, NULL, 4242, 1, &t), -ENOENT);
}

/* 20 NUMA nodes come back, none cut. */
static void test_numa_stat(void **state)
{
    char qroot[4096];
    struct vpack_mem_share *m = NULL;
    unsigned n = 0;
    (void)state;
    qemu_root(qroot, sizeof(qroot));
    assert_int_equal(vpack_cgroup_numa_stat(qroot, "/machine/qemu-1-vm.libvirt-qemu", &m, &n), 0);
    assert_int_equal(n, 20);
    assert_int_equal(m[0].node, 0);
    assert_true(m[0].share > 0.047 && m[0].share < 0.048);
    assert_int_equal(m[19].node, 19);
    assert_true(m[19].share > 0.095 && m[19].share < 0.096);
    free(m);
    assert_int_equal(vpack_cgroup_numa_stat(qroot, "/machine/none", &m, &n), -ENOENT);
    assert_null(m);
    assert_int_equal(n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reads_under_root, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cgroup_repair, setup, teardown),
        cmocka_unit_test(test_cgroup_v2_noop),
        cmocka_unit_test(test_process_cgroups),
        cmocka_unit_test(test_iothread_ticks),
        cmocka_unit_test(test_numa_stat),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
