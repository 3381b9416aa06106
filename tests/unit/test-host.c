// SPDX-License-Identifier: MIT
/*
 * The host adapter on fixture trees: uevent parsing, /proc and /sys reads
 * under a root, and the cgroup v1 cpuset repair on a tree shaped like
 * libvirt's (machine/<domain>/{vcpuN,emulator}) through CPU 1 going offline
 * and coming back, and on v1-narrowed (groups narrower than their parents on
 * purpose, which it must never widen); and what the agent reads of a QEMU process (its cgroups, its
 * iothreads' threads and CPU time, where its memory is) on the fixture
 * trees $VPACK_TESTDATA/hosts/: qemu-iothread (cgroup v1), v2-systemd and
 * v2-machine (cgroup v2 with and without systemd), and cgroup v2's side of
 * CPU hotplug on copies of v2-systemd.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cgroup.h"
#include "host.h"
#include "vpack/prom.h"
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
    struct vpack_host_held h = VPACK_HOST_HELD_INIT;
    assert_int_equal(vpack_host_cpu_times(root, &h, &t, &n), 0);
    vpack_host_held_close(&h);
    assert_int_equal(n, 2);
    assert_int_equal(t[1].cpu, 4);
    assert_int_equal(t[1].busy, 5);
    free(t);
    char *data = NULL;
    assert_int_equal(vpack_host_read_file(root, "nonexistent", 10, &data, NULL), -ENOENT);
    assert_int_equal(vpack_host_read_file(root, "proc/stat", 10, &data, NULL), -EFBIG);
}

/*
 * /proc/stat held open: each read sees the file as it is now (rewritten in
 * place, longer than the first buffer), with the same descriptor; a read
 * that fails closes it and the next one opens the file again.
 */
static void test_cpu_times_held(void **state)
{
    (void)state;
    struct vpack_host_held h = VPACK_HOST_HELD_INIT;
    struct vpack_cpu_times *t = NULL;
    unsigned n = 0;
    put("proc/stat", "cpu  1 2 3 4\ncpu0 1 0 1 8 0 0 0 0\n");
    assert_int_equal(vpack_host_cpu_times(root, &h, &t, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(t[0].busy, 2);
    free(t);
    int fd = h.fd;
    assert_true(fd >= 0);
    /* 300 CPUs: about 10 KB, past the first 8 KB buffer. */
    char *big = malloc(300 * 64 + 64), *p = big;
    p += sprintf(p, "cpu  1 2 3 4\n");
    for (int c = 0; c < 300; c++)
        p += sprintf(p, "cpu%d %d 0 0 100 0 0 0 0\n", c, c);
    put("proc/stat", big);
    free(big);
    assert_int_equal(vpack_host_cpu_times(root, &h, &t, &n), 0);
    assert_int_equal(n, 300);
    assert_int_equal(t[299].cpu, 299);
    assert_int_equal(t[299].busy, 299);
    assert_int_equal(h.fd, fd);
    free(t);
    /* Read fails (a directory in its place, opened afresh): closed, then opened again. */
    vpack_host_held_close(&h);
    assert_int_equal(h.fd, -1);
    char path[1024];
    snprintf(path, sizeof(path), "%s/proc/stat", root);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(vpack_host_cpu_times(root, &h, &t, &n), -EISDIR);
    assert_int_equal(h.fd, -1);
    assert_int_equal(rmdir(path), 0);
    put("proc/stat", "cpu0 4 0 0 4 0 0 0 0\n");
    assert_int_equal(vpack_host_cpu_times(root, &h, &t, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(t[0].busy, 4);
    assert_true(h.fd >= 0);
    free(t);
    vpack_host_held_close(&h);
    /* Nothing there: the error, and nothing held. */
    assert_int_equal(unlink(path), 0);
    assert_int_equal(vpack_host_cpu_times(root, &h, &t, &n), -ENOENT);
    assert_int_equal(h.fd, -1);
}

/* Without a root the path is taken as given: `vpackd -c my.conf` reads ./my.conf. */
static void test_reads_relative(void **state)
{
    char cwd[4096], *buf = NULL;
    (void)state;
    put("etc/my.conf", "[agent]\n");
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(root), 0);
    int r = vpack_host_read_file(NULL, "etc/my.conf", 4096, &buf, NULL);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(r, 0);
    assert_string_equal(buf, "[agent]\n");
    free(buf);
}

#define CG "sys/fs/cgroup/cpuset"
#define DOM CG "/machine/qemu-1-vptest-a.libvirt-qemu"

static void copy_tree(const char *name);

static void set_list(vpack_cpuset *s, const char *list)
{
    assert_int_equal(vpack_cpuset_parse(s, list, NULL), 0);
}

/* One repair walk with online CPUs list; gone: CPUs seen going (NULL: none). */
static unsigned repair(struct vpack_cgroup_memo *m, const char *list, const char *gone)
{
    vpack_cpuset online, g;
    unsigned fixed = 99;
    set_list(&online, list);
    if (gone)
        set_list(&g, gone);
    assert_int_equal(vpack_cgroup_repair(root, m, &online, gone ? &g : NULL, NULL, &fixed), 0);
    return fixed;
}

static void expect_cpus(const char *rel, const char *want)
{
    char *s = get(rel);
    if (strcmp(s, want))
        fail_msg("%s: '%s', expected '%s'", rel, s, want);
    free(s);
}

static void test_cgroup_repair(void **state)
{
    struct vpack_cgroup_memo m = {0};
    (void)state;
    /* All online: what the groups have is remembered, nothing written. */
    put(CG "/cpuset.cpus", "0-1\n");
    put(CG "/machine/cpuset.cpus", "0-1\n");
    put(DOM "/cpuset.cpus", "0-1\n");
    put(DOM "/vcpu0/cpuset.cpus", "1\n");
    put(DOM "/emulator/cpuset.cpus", "0-1\n");
    put(DOM "/iothread1/cpuset.cpus", "0-1\n");
    /* A group someone narrowed on purpose. */
    put(CG "/machine/qemu-2-b.libvirt-qemu/cpuset.cpus", "0\n");
    /* Groups outside libvirt's partition are not ours. */
    put(CG "/user/cpuset.cpus", "1\n");
    assert_int_equal(repair(&m, "0-1", NULL), 0);
    /* CPU 1 goes offline: the kernel takes it from every group. */
    put(CG "/cpuset.cpus", "0\n");
    put(CG "/machine/cpuset.cpus", "0\n");
    put(DOM "/cpuset.cpus", "0\n");
    put(DOM "/vcpu0/cpuset.cpus", "0\n");
    put(DOM "/emulator/cpuset.cpus", "0\n");
    put(DOM "/iothread1/cpuset.cpus", "0\n");
    put(CG "/user/cpuset.cpus", "0\n");
    assert_int_equal(repair(&m, "0", "1"), 0);
    /* It comes back: only the root has it again. */
    put(CG "/cpuset.cpus", "0-1\n");
    assert_int_equal(repair(&m, "0-1", NULL), 2);
    expect_cpus(CG "/machine/cpuset.cpus", "0-1");
    expect_cpus(DOM "/cpuset.cpus", "0-1");
    /* The narrowed group had no CPU 1: it gets none. */
    expect_cpus(CG "/machine/qemu-2-b.libvirt-qemu/cpuset.cpus", "0");
    /* Per-thread groups are libvirt's to rewrite when vpack pins through it. */
    expect_cpus(DOM "/vcpu0/cpuset.cpus", "0");
    expect_cpus(DOM "/emulator/cpuset.cpus", "0");
    expect_cpus(DOM "/iothread1/cpuset.cpus", "0");
    expect_cpus(CG "/user/cpuset.cpus", "0");
    /* Nothing left to repair: nothing written. */
    assert_int_equal(repair(&m, "0-1", NULL), 0);

    /* Offline and back between two walks: the caller saw it go. */
    put(CG "/machine/cpuset.cpus", "0\n");
    put(DOM "/cpuset.cpus", "0\n");
    assert_int_equal(repair(&m, "0-1", "1"), 2);
    expect_cpus(DOM "/cpuset.cpus", "0-1");
    /* Unseen, the same is an administrator's narrowing: left alone. */
    put(CG "/machine/cpuset.cpus", "0\n");
    put(DOM "/cpuset.cpus", "0\n");
    assert_int_equal(repair(&m, "0-1", NULL), 0);
    expect_cpus(CG "/machine/cpuset.cpus", "0");
    vpack_cgroup_memo_clear(&m);
}

/*
 * Issue 14, item 4: a v1 host where groups are narrower than their parents
 * on purpose (tests/data/hosts/v1-narrowed): with nothing offline nothing is
 * widened; after CPU 3 goes offline and comes back (CPU 2 stays offline a
 * while longer), each group gets back exactly what it had, and a group
 * emptied by the offline CPU gets it back too.
 */
static void test_cgroup_repair_narrowed(void **state)
{
    static const char *const groups[][2] = {
        {CG "/machine/cpuset.cpus", "0-3"},
        {CG "/machine/restricted.partition/cpuset.cpus", "2-3"},
        {CG "/machine/restricted.partition/qemu-1-web.libvirt-qemu/cpuset.cpus", "2-3"},
        {CG "/machine/qemu-2-db.libvirt-qemu/cpuset.cpus", "0-3"},
        {CG "/machine.slice/cpuset.cpus", "0-3"},
        {CG "/machine.slice/systemd-nspawn@ct1.service/cpuset.cpus", "3"},
        {CG "/user.slice/cpuset.cpus", "1"},
    };
    struct vpack_cgroup_memo m = {0};
    (void)state;
    copy_tree("v1-narrowed");
    /* Nothing went offline: however often it looks, nothing is written. */
    assert_int_equal(repair(&m, "0-3", NULL), 0);
    assert_int_equal(repair(&m, "0-3", NULL), 0);
    for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++)
        expect_cpus(groups[i][0], groups[i][1]);
    /* A pin libvirt refused does not change that either (no CPU went). */
    assert_int_equal(repair(&m, "0-3", NULL), 0);

    /* CPUs 2 and 3 go offline: the kernel takes them everywhere. */
    put(CG "/cpuset.cpus", "0-1\n");
    put(CG "/machine/cpuset.cpus", "0-1\n");
    put(CG "/machine/restricted.partition/cpuset.cpus", "\n");
    put(CG "/machine/restricted.partition/qemu-1-web.libvirt-qemu/cpuset.cpus", "\n");
    put(CG "/machine/qemu-2-db.libvirt-qemu/cpuset.cpus", "0-1\n");
    put(CG "/machine.slice/cpuset.cpus", "0-1\n");
    put(CG "/machine.slice/systemd-nspawn@ct1.service/cpuset.cpus", "\n");
    assert_int_equal(repair(&m, "0-1", NULL), 0);
    /* CPU 3 comes back. */
    put(CG "/cpuset.cpus", "0-1,3\n");
    assert_int_equal(repair(&m, "0-1,3", NULL), 6);
    expect_cpus(CG "/machine/cpuset.cpus", "0-1,3");
    expect_cpus(CG "/machine/restricted.partition/cpuset.cpus", "3");
    expect_cpus(CG "/machine/restricted.partition/qemu-1-web.libvirt-qemu/cpuset.cpus", "3");
    expect_cpus(CG "/machine/qemu-2-db.libvirt-qemu/cpuset.cpus", "0-1,3");
    expect_cpus(CG "/machine.slice/cpuset.cpus", "0-1,3");
    expect_cpus(CG "/machine.slice/systemd-nspawn@ct1.service/cpuset.cpus", "3");
    /* CPU 2 too: still remembered where it was. */
    put(CG "/cpuset.cpus", "0-3\n");
    assert_int_equal(repair(&m, "0-3", NULL), 5);
    for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++)
        if (!strstr(groups[i][0], "user.slice"))
            expect_cpus(groups[i][0], groups[i][1]);
    /* Outside libvirt's partitions nothing is touched, whatever it lost. */
    expect_cpus(CG "/user.slice/cpuset.cpus", "1");
    assert_int_equal(repair(&m, "0-3", NULL), 0);
    vpack_cgroup_memo_clear(&m);
}

/*
 * Issue 14, item 10: a domain with placement='auto' is bounded by the CPUs
 * of the NUMA nodes numad chose, read from sysfs (a real two-node host's
 * tree, tests/data/fixtures/topologies/sysfs/32intel64-2p8co2t+8ve), never
 * "every CPU"; and a run of a process is named by its pid and start time.
 */
static void test_node_cpus_and_runs(void **state)
{
    char sys[4096], buf[128];
    const char *fx = getenv("VPACK_FIXTURES");
    vpack_cpuset nodes, cpus;
    uint64_t start = 0;
    (void)state;
    if (!fx || !*fx)
        fail_msg("VPACK_FIXTURES is not set (run the test through meson)");
    snprintf(sys, sizeof(sys), "%s/topologies/sysfs/32intel64-2p8co2t+8ve", fx);
    set_list(&nodes, "1");
    assert_int_equal(vpack_host_node_cpus(sys, &nodes, &cpus), 0);
    vpack_cpuset_format_buf(&cpus, buf, sizeof(buf));
    assert_string_equal(buf, "8-15,24-31");
    set_list(&nodes, "0-1");
    assert_int_equal(vpack_host_node_cpus(sys, &nodes, &cpus), 0);
    vpack_cpuset_format_buf(&cpus, buf, sizeof(buf));
    assert_string_equal(buf, "0-31");
    set_list(&nodes, "2");
    assert_int_equal(vpack_host_node_cpus(sys, &nodes, &cpus), -ENOENT);
    /* A node with memory only has an empty list. */
    put("sys/devices/system/node/node0/cpulist", "\n");
    put("sys/devices/system/node/node1/cpulist", "2-3\n");
    set_list(&nodes, "0-1");
    assert_int_equal(vpack_host_node_cpus(root, &nodes, &cpus), 0);
    vpack_cpuset_format_buf(&cpus, buf, sizeof(buf));
    assert_string_equal(buf, "2-3");
    /* Field 22 of /proc/PID/stat, after a name with blanks and parentheses. */
    put("proc/77/stat", "77 (qemu (x) y) S 1 77 77 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 4 0 "
                        "123456 1000 10\n");
    assert_int_equal(vpack_host_process_start(root, 77, &start), 0);
    assert_int_equal(start, 123456);
    assert_int_equal(vpack_host_process_start(root, 78, &start), -ENOENT);
    put("proc/79/stat", "79 (short) S 1 2 3\n");
    assert_int_equal(vpack_host_process_start(root, 79, &start), -EINVAL);
    assert_int_equal(vpack_host_process_start(root, 0, &start), -ENOENT);
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
    struct vpack_cgroup_memo m = {0};
    assert_int_equal(vpack_cgroup_repair(other, &m, &online, NULL, NULL, &fixed), 0);
    assert_int_equal(fixed, 0);
    assert_false(m.taken);
}

/* A fixture tree under $VPACK_TESTDATA/hosts/ (tests/data/hosts/README.md). */
static void host_root(const char *name, char *out, size_t len)
{
    const char *data = getenv("VPACK_TESTDATA");
    if (!data || !*data)
        fail_msg("VPACK_TESTDATA is not set (run the test through meson)");
    snprintf(out, len, "%s/hosts/%s", data, name);
}

/*
 * vpackd's own process figures (the process_* metrics) from the fixture tree
 * vpackd-self, then from the live /proc.
 */
static void test_self_process(void **state)
{
    (void)state;
    char tree[4096];
    struct vpack_prom_process p;
    double tck = (double)sysconf(_SC_CLK_TCK), page = (double)sysconf(_SC_PAGESIZE);
    host_root("vpackd-self", tree, sizeof(tree));
    assert_int_equal(vpack_host_self_process(tree, &p), 0);
    assert_true(p.cpu_seconds == 1234 / tck + 567 / tck);
    assert_true(p.virtual_bytes == 276037632);
    assert_true(p.resident_bytes == 2885 * page);
    assert_true(p.open_fds == 6);
    assert_true(p.max_fds == 1024);
    assert_true(p.start_time_seconds == 1796467805 + 379587 / tck);

    /* A tree with none of it: every figure unknown. */
    host_root("v2-machine", tree, sizeof(tree));
    assert_true(vpack_host_self_process(tree, &p) < 0);
    assert_true(p.cpu_seconds < 0 && p.resident_bytes < 0 && p.virtual_bytes < 0 &&
                p.open_fds < 0 && p.max_fds < 0 && p.start_time_seconds < 0);

    /* This process: started within the last day, now; some memory; stdin to stderr open. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    assert_int_equal(vpack_host_self_process("", &p), 0);
    assert_true(p.start_time_seconds <= (double)now.tv_sec + 1 &&
                p.start_time_seconds > (double)now.tv_sec - 86400);
    assert_true(p.cpu_seconds >= 0 && p.resident_bytes > 0 && p.virtual_bytes >= p.resident_bytes);
    assert_true(p.open_fds >= 3 && p.max_fds >= p.open_fds);
}

/* The fixture tree of one QEMU process (pid 4242) on cgroup v1. */
static void qemu_root(char *out, size_t len)
{
    host_root("qemu-iothread", out, len);
}

/* The v1 tree has no proc/self/mounts: its hierarchies are found where they usually are. */
static void test_process_cgroups(void **state)
{
    char qroot[4096], *g = NULL;
    struct vpack_cgroup_host h;
    struct vpack_cgroup_domain d;
    (void)state;
    qemu_root(qroot, sizeof(qroot));
    assert_int_equal(vpack_host_process_cgroup(qroot, 4242, "cpu", &g), 0);
    assert_string_equal(g, "/machine/qemu-1-vm.libvirt-qemu/emulator");
    free(g);
    assert_int_equal(vpack_host_process_cgroup(qroot, 4242, "blkio", &g), -ENOENT);
    assert_int_equal(vpack_host_process_cgroup(qroot, 4242, NULL, &g), -ENOENT);
    assert_int_equal(vpack_host_process_cgroup(qroot, 4243, "cpu", &g), -ENOENT);
    assert_int_equal(vpack_host_process_cgroup(qroot, 0, "cpu", &g), -ENOENT);
    assert_int_equal(vpack_cgroup_detect(qroot, &h), 0);
    assert_string_equal(vpack_cgroup_version(&h), "v1");
    assert_int_equal(h.cpuset, VPACK_CGROUP_V1);
    assert_int_equal(h.memory, VPACK_CGROUP_V1);
    /* The domain's cpuset group is the emulator's parent. */
    vpack_cgroup_domain_find(qroot, &h, 4242, &d);
    assert_string_equal(d.memory, "/sys/fs/cgroup/memory/machine/qemu-1-vm.libvirt-qemu");
    assert_string_equal(d.threads, "/sys/fs/cgroup/cpuset/machine/qemu-1-vm.libvirt-qemu");
    assert_int_equal(d.memory_ver, VPACK_CGROUP_V1);
    assert_int_equal(d.threads_ver, VPACK_CGROUP_V1);
    vpack_cgroup_domain_clear(&d);
    vpack_cgroup_domain_find(qroot, &h, 4243, &d);
    assert_null(d.memory);
    assert_null(d.threads);
    /* v1 has nothing of v2's hotplug check to do. */
    struct vpack_cgroup_stale *st = NULL;
    unsigned n = 9;
    vpack_cpuset online;
    vpack_cpuset_zero(&online);
    vpack_cpuset_set_range(&online, 0, 3);
    assert_int_equal(vpack_cgroup_check_effective(qroot, &h, &online, NULL, &st, &n), 0);
    assert_int_equal(n, 0);
    assert_null(st);
    vpack_cgroup_host_clear(&h);
}

static void test_iothread_ticks(void **state)
{
    char qroot[4096];
    uint64_t t = 0;
    struct vpack_cgroup_host h;
    struct vpack_cgroup_domain d;
    (void)state;
    qemu_root(qroot, sizeof(qroot));
    assert_int_equal(vpack_host_task_ticks(qroot, 4242, "4250", &t), 0);
    assert_int_equal(t, 42);
    /* A name with blanks and parentheses in it. */
    assert_int_equal(vpack_host_task_ticks(qroot, 4242, "4251", &t), 0);
    assert_int_equal(t, 8);
    assert_int_equal(vpack_host_task_ticks(qroot, 4242, "4299", &t), -ENOENT);
    /* Both threads of iothread1; the one that is gone counts nothing. */
    assert_int_equal(vpack_cgroup_detect(qroot, &h), 0);
    vpack_cgroup_domain_find(qroot, &h, 4242, &d);
    assert_int_equal(vpack_cgroup_iothread_ticks(qroot, &d, 4242, 1, &t), 0);
    assert_int_equal(t, 50);
    assert_int_equal(vpack_cgroup_iothread_ticks(qroot, &d, 4242, 2, &t), -ENOENT);
    vpack_cgroup_domain_clear(&d);
    assert_int_equal(vpack_cgroup_iothread_ticks(qroot, &d, 4242, 1, &t), -ENOENT);
    vpack_cgroup_host_clear(&h);
}

/* 20 NUMA nodes come back, none cut; v1 counts pages. */
static void test_numa_stat(void **state)
{
    char qroot[4096];
    struct vpack_mem_share *m = NULL;
    unsigned n = 0;
    uint64_t bytes = 0;
    struct vpack_cgroup_host h;
    struct vpack_cgroup_domain d;
    (void)state;
    qemu_root(qroot, sizeof(qroot));
    assert_int_equal(vpack_cgroup_detect(qroot, &h), 0);
    vpack_cgroup_domain_find(qroot, &h, 4242, &d);
    assert_int_equal(vpack_cgroup_numa_stat(qroot, &d, &m, &n, &bytes), 1);
    assert_int_equal(n, 20);
    assert_int_equal(m[0].node, 0);
    assert_true(m[0].share > 0.047 && m[0].share < 0.048);
    assert_int_equal(m[19].node, 19);
    assert_true(m[19].share > 0.095 && m[19].share < 0.096);
    assert_int_equal(bytes, 2100 * (uint64_t)sysconf(_SC_PAGESIZE));
    free(m);
    free(d.memory);
    d.memory = strdup("/sys/fs/cgroup/memory/machine/none");
    assert_int_equal(vpack_cgroup_numa_stat(qroot, &d, &m, &n, &bytes), -ENOENT);
    assert_null(m);
    assert_int_equal(n, 0);
    vpack_cgroup_domain_clear(&d);
    assert_int_equal(vpack_cgroup_numa_stat(qroot, &d, &m, &n, &bytes), -ENOENT);
    vpack_cgroup_host_clear(&h);
}

/* Fixture tree name, a cgroup v2 host: its root into r, its hierarchies into *h. */
static void v2_tree(const char *name, char *r, size_t len, struct vpack_cgroup_host *h)
{
    host_root(name, r, len);
    assert_int_equal(vpack_cgroup_detect(r, h), 0);
    assert_string_equal(vpack_cgroup_version(h), "v2");
    assert_string_equal(h->mounts.unified, "/sys/fs/cgroup");
    assert_int_equal(h->cpuset, VPACK_CGROUP_V2);
    assert_int_equal(h->memory, VPACK_CGROUP_V2);
}

/* The one thread of pid named comm; fails the test when there is not exactly one. */
static int tid_named(const struct vpack_host_thread *t, unsigned n, const char *comm)
{
    int tid = 0;
    for (unsigned i = 0; i < n; i++) {
        if (strcmp(t[i].comm, comm))
            continue;
        assert_int_equal(tid, 0);
        tid = t[i].tid;
    }
    assert_int_not_equal(tid, 0);
    return tid;
}

/*
 * Debian 12 with systemd, libvirt 9.0: the domain's scope in machine.slice,
 * QEMU in its "libvirt" child, the thread groups below that.
 */
static void test_v2_systemd(void **state)
{
    char r[4096];
    struct vpack_cgroup_host h;
    struct vpack_cgroup_domain d;
    struct vpack_host_thread *t = NULL;
    struct vpack_mem_share *m = NULL;
    unsigned n = 0, found = 0;
    uint64_t ticks = 0, bytes = 0;
    (void)state;
    v2_tree("v2-systemd", r, sizeof(r), &h);
    vpack_cgroup_domain_find(r, &h, 5151, &d);
    assert_string_equal(d.memory, "/sys/fs/cgroup/machine.slice/machine-qemu\\x2d1\\x2dweb.scope");
    assert_string_equal(d.threads,
                        "/sys/fs/cgroup/machine.slice/machine-qemu\\x2d1\\x2dweb.scope/libvirt");
    assert_int_equal(d.memory_ver, VPACK_CGROUP_V2);
    assert_int_equal(d.threads_ver, VPACK_CGROUP_V2);

    /* The threads by name: iothread1 is one thread... */
    assert_int_equal(vpack_host_threads(r, 5151, &t, &n), 0);
    assert_int_equal(n, 8);
    int io = tid_named(t, n, "IO iothread1");
    assert_int_equal(io, 5155);
    const unsigned ids[] = {1};
    for (unsigned i = 0; i < n; i++) {
        int vcpu = -7;
        enum vpack_qemu_thread k = vpack_qemu_thread_kind(t[i].comm, &vcpu);
        int match = vpack_qemu_iothread_match(t[i].comm, ids, 1);
        assert_int_equal(match, t[i].tid == 5155 ? 0 : -1);
        if (t[i].tid == 5157 || t[i].tid == 5158)
            assert_true(k == VPACK_QEMU_VCPU && vcpu == t[i].tid - 5157);
        else if (t[i].tid != 5155 && t[i].tid != 5156)
            assert_int_equal(k, VPACK_QEMU_OTHER);
    }
    free(t);
    assert_int_equal(vpack_host_threads_ticks(r, 5151, &io, 1, &ticks, &found), 0);
    assert_int_equal(found, 1);
    assert_int_equal(ticks, 730 + 412);
    /* ...its cgroup also holds the "worker" it started (cgroup.threads). */
    assert_int_equal(vpack_cgroup_iothread_ticks(r, &d, 5151, 1, &ticks), 0);
    assert_int_equal(ticks, 730 + 412 + 205 + 118);

    /* The scope's memory.numa_stat (bytes), not the nested group's. */
    assert_int_equal(vpack_cgroup_numa_stat(r, &d, &m, &n, &bytes), 2);
    assert_int_equal(n, 2);
    assert_int_equal(bytes, 2155872256u);
    assert_int_equal(m[0].node, 0);
    assert_true(fabs(m[0].share - 1619001344.0 / 2155872256.0) < 1e-9);
    assert_true(fabs(m[1].share - 536870912.0 / 2155872256.0) < 1e-9);
    free(m);

    /* Every CPU back: nothing to say. */
    struct vpack_cgroup_stale *st = NULL;
    vpack_cpuset online;
    vpack_cpuset_zero(&online);
    vpack_cpuset_set_range(&online, 0, 3);
    assert_int_equal(vpack_cgroup_check_effective(r, &h, &online, NULL, &st, &n), 0);
    assert_int_equal(n, 0);
    vpack_cgroup_stale_free(st, n);
    vpack_cgroup_domain_clear(&d);
    vpack_cgroup_host_clear(&h);
}

/*
 * libvirt without systemd (machine/qemu-N-NAME.libvirt-qemu, no nested
 * group): a QEMU with debug-threads and one without.
 */
static void test_v2_machine(void **state)
{
    char r[4096];
    struct vpack_cgroup_host h;
    struct vpack_cgroup_domain d;
    struct vpack_host_thread *t = NULL;
    struct vpack_mem_share *m = NULL;
    unsigned n = 0, found = 0;
    uint64_t ticks = 0, bytes = 0;
    (void)state;
    v2_tree("v2-machine", r, sizeof(r), &h);
    vpack_cgroup_domain_find(r, &h, 6262, &d);
    assert_string_equal(d.memory, "/sys/fs/cgroup/machine/qemu-2-db.libvirt-qemu");
    assert_string_equal(d.threads, "/sys/fs/cgroup/machine/qemu-2-db.libvirt-qemu");

    assert_int_equal(vpack_host_threads(r, 6262, &t, &n), 0);
    assert_int_equal(n, 9);
    const unsigned ids[] = {1, 2};
    int tids[2] = {0, 0};
    for (unsigned i = 0; i < n; i++) {
        int k = vpack_qemu_iothread_match(t[i].comm, ids, 2);
        if (k >= 0)
            tids[k] = t[i].tid;
    }
    free(t);
    assert_int_equal(tids[0], 6264);
    assert_int_equal(tids[1], 6265);
    assert_int_equal(vpack_host_threads_ticks(r, 6262, tids, 2, &ticks, &found), 0);
    assert_int_equal(found, 2);
    assert_int_equal(ticks, 15033 + 9120 + 412 + 230);
    /* A thread that is gone is not found, and is no error. */
    int gone[] = {6264, 6299};
    assert_int_equal(vpack_host_threads_ticks(r, 6262, gone, 2, &ticks, &found), 0);
    assert_int_equal(found, 1);
    assert_int_equal(ticks, 15033 + 9120);

    assert_int_equal(vpack_cgroup_numa_stat(r, &d, &m, &n, &bytes), 2);
    assert_int_equal(n, 4);
    assert_int_equal(bytes, 3300917248u);
    assert_int_equal(m[1].node, 1);
    assert_true(fabs(m[1].share - 3217031168.0 / 3300917248.0) < 1e-9);
    assert_int_equal(m[2].node, 2);
    assert_true(m[2].share == 0);
    free(m);
    vpack_cgroup_domain_clear(&d);

    /* Without debug-threads every thread is "qemu-system-x86": the cgroup it is. */
    assert_int_equal(vpack_host_threads(r, 6363, &t, &n), 0);
    assert_int_equal(n, 4);
    for (unsigned i = 0; i < n; i++)
        assert_int_equal(vpack_qemu_iothread_match(t[i].comm, ids, 1), -1);
    free(t);
    vpack_cgroup_domain_find(r, &h, 6363, &d);
    assert_int_equal(vpack_cgroup_iothread_ticks(r, &d, 6363, 1, &ticks), 0);
    assert_int_equal(ticks, 77 + 23);
    vpack_cgroup_domain_clear(&d);
    vpack_cgroup_host_clear(&h);
}

/* Copies fixture tree name into the test's temporary root. */
static void copy_tree(const char *name)
{
    char src[4096], cmd[8500];
    host_root(name, src, sizeof(src));
    snprintf(cmd, sizeof(cmd), "cp -R '%s/.' '%s/'", src, root);
    assert_int_equal(system(cmd), 0);
}

#define SCOPE "sys/fs/cgroup/machine.slice/machine-qemu\\x2d1\\x2dweb.scope"

/*
 * Checks the copied tree, walking the guests' partitions parts (NULL: only
 * libvirt's defaults); n stale groups expected, the first one's fields given.
 */
static void expect_stale_in(const char *const *parts, const char *online_list, unsigned want,
                            const char *group, const char *missing, const char *partition)
{
    struct vpack_cgroup_host h;
    struct vpack_cgroup_stale *st = NULL;
    vpack_cpuset online;
    unsigned n = 99;
    char buf[64];
    assert_int_equal(vpack_cpuset_parse(&online, online_list, NULL), 0);
    assert_int_equal(vpack_cgroup_detect(root, &h), 0);
    assert_int_equal(vpack_cgroup_check_effective(root, &h, &online, parts, &st, &n), 0);
    assert_int_equal(n, want);
    if (want) {
        assert_string_equal(st[0].group, group);
        vpack_cpuset_format_buf(&st[0].missing, buf, sizeof(buf));
        assert_string_equal(buf, missing);
        if (partition)
            assert_string_equal(st[0].partition, partition);
        else
            assert_null(st[0].partition);
    }
    vpack_cgroup_stale_free(st, n);
    vpack_cgroup_host_clear(&h);
}

static void expect_stale(const char *online_list, unsigned want, const char *group,
                         const char *missing, const char *partition)
{
    expect_stale_in(NULL, online_list, want, group, missing, partition);
}

/*
 * cgroup v2 after CPU 3 went offline and came back, on a copy of the
 * systemd layout: the kernel normally gives it back to every group
 * (nothing to say); the cases where it did not are named, and only at the
 * topmost group that lost it.
 */
static void test_v2_hotplug_check(void **state)
{
    (void)state;
    copy_tree("v2-systemd");
    expect_stale("0-3", 0, NULL, NULL, NULL);
    /* The scope did not get CPU 3 back, so neither did anything below it. */
    put(SCOPE "/cpuset.cpus.effective", "0-2\n");
    put(SCOPE "/libvirt/cpuset.cpus.effective", "0-2\n");
    put(SCOPE "/libvirt/vcpu1/cpuset.cpus.effective", "0-2\n");
    put(SCOPE "/libvirt/emulator/cpuset.cpus.effective", "0-2\n");
    expect_stale("0-3", 1, "/machine.slice/machine-qemu\\x2d1\\x2dweb.scope", "3", "member");
    /* CPU 3 still offline: nothing is missing. */
    expect_stale("0-2", 0, NULL, NULL, NULL);
    /* An invalid partition is named as the kernel words it. */
    put(SCOPE "/cpuset.cpus", "2-3\n");
    put(SCOPE "/cpuset.cpus.effective", "2\n");
    put(SCOPE "/cpuset.cpus.partition", "root invalid (Parent is not a partition root)\n");
    expect_stale("0-3", 1, "/machine.slice/machine-qemu\\x2d1\\x2dweb.scope", "3",
                 "root invalid (Parent is not a partition root)");
    /* Only a thread group lost it (vcpu1 is allowed 0-3); vcpu0, pinned to CPU 0, did not. */
    copy_tree("v2-systemd");
    put(SCOPE "/libvirt/vcpu1/cpuset.cpus.effective", "0-2\n");
    expect_stale("0-3", 1, "/machine.slice/machine-qemu\\x2d1\\x2dweb.scope/libvirt/vcpu1", "3",
                 "member");
    /* A CPU that a valid child partition holds is not missing from its parent. */
    copy_tree("v2-systemd");
    put("sys/fs/cgroup/machine.slice/cpuset.cpus.effective", "0-2\n");
    put("sys/fs/cgroup/machine.slice/rt.slice/cpuset.cpus", "3\n");
    put("sys/fs/cgroup/machine.slice/rt.slice/cpuset.cpus.effective", "3\n");
    put("sys/fs/cgroup/machine.slice/rt.slice/cpuset.cpus.partition", "isolated\n");
    put(SCOPE "/cpuset.cpus.effective", "0-2\n");
    put(SCOPE "/libvirt/cpuset.cpus.effective", "0-2\n");
    put(SCOPE "/libvirt/vcpu1/cpuset.cpus.effective", "0-2\n");
    put(SCOPE "/libvirt/emulator/cpuset.cpus.effective", "0-2\n");
    expect_stale("0-3", 0, NULL, NULL, NULL);
    /* The partition lost its CPU: that is said of it, not of its parent. */
    put("sys/fs/cgroup/machine.slice/rt.slice/cpuset.cpus.effective", "\n");
    expect_stale("0-3", 1, "/machine.slice/rt.slice", "3", "isolated");
    /* Once that partition is invalid, its parent should have had the CPU back. */
    put("sys/fs/cgroup/machine.slice/rt.slice/cpuset.cpus.effective", "0-2\n");
    put("sys/fs/cgroup/machine.slice/rt.slice/cpuset.cpus.partition",
        "isolated invalid (Cpu list in cpuset.cpus not exclusive)\n");
    expect_stale("0-3", 1, "/machine.slice", "3", "member");
}

#define LIVE_C "sys/fs/cgroup/vpacktest.partition/qemu-3-v2g-c.libvirt-qemu"

/*
 * Issue 29: the tree of the live v2 test host (tests/data/hosts/v2-live,
 * copied from tests/v2host): v2g-c lives in a custom libvirt <partition>,
 * /vpacktest.partition. Its partition is found from its QEMU's group, and
 * the hotplug check walks it only when told; before, the check walked
 * machine and machine.slice alone and a group there that never got its CPU
 * back went unseen.
 */
static void test_v2_live_partition(void **state)
{
    struct vpack_cgroup_host h;
    struct vpack_cgroup_domain d;
    (void)state;
    copy_tree("v2-live");
    assert_int_equal(vpack_cgroup_detect(root, &h), 0);
    assert_int_equal(h.cpuset, VPACK_CGROUP_V2);
    vpack_cgroup_domain_find(root, &h, 260, &d);
    assert_string_equal(d.threads, "/sys/fs/cgroup/vpacktest.partition/qemu-3-v2g-c.libvirt-qemu");
    char *p = vpack_cgroup_partition_of(&h, &d);
    assert_string_equal(p, "/vpacktest.partition");
    free(p);
    vpack_cgroup_domain_clear(&d);
    vpack_cgroup_domain_find(root, &h, 245, &d);
    p = vpack_cgroup_partition_of(&h, &d);
    assert_string_equal(p, "/machine");
    free(p);
    /* A domain's group at the top has no partition; no group, none either. */
    free(d.threads);
    assert_non_null(d.threads = strdup("/sys/fs/cgroup/qemu-9-top.libvirt-qemu"));
    assert_null(vpack_cgroup_partition_of(&h, &d));
    free(d.threads);
    d.threads = NULL;
    assert_null(vpack_cgroup_partition_of(&h, &d));
    vpack_cgroup_domain_clear(&d);
    vpack_cgroup_host_clear(&h);

    /* As the live host had it: every CPU everywhere, nothing to say. */
    static const char *const parts[] = {"/vpacktest.partition", NULL};
    expect_stale_in(parts, "0-3", 0, NULL, NULL, NULL);
    /* v2g-c's group did not get CPU 3 back. */
    put(LIVE_C "/cpuset.cpus.effective", "0-2\n");
    put(LIVE_C "/vcpu0/cpuset.cpus.effective", "0-2\n");
    put(LIVE_C "/emulator/cpuset.cpus.effective", "0-2\n");
    /* Before: unseen. */
    expect_stale("0-3", 0, NULL, NULL, NULL);
    /* Now: named, once, however often or however nested the caller names its partition. */
    expect_stale_in(parts, "0-3", 1, "/vpacktest.partition/qemu-3-v2g-c.libvirt-qemu", "3",
                    "member");
    static const char *const twice[] = {"/vpacktest.partition/qemu-3-v2g-c.libvirt-qemu", "/",
                                        "/machine", "/vpacktest.partition",
                                        "/vpacktest.partition", NULL};
    expect_stale_in(twice, "0-3", 1, "/vpacktest.partition/qemu-3-v2g-c.libvirt-qemu", "3",
                    "member");
    /* A partition nested in another group is checked against that group, not the top:
     * /vpacktest.partition lost CPU 3 too, so its child has all it may have. */
    put("sys/fs/cgroup/vpacktest.partition/cpuset.cpus.effective", "0-2\n");
    static const char *const nested[] = {"/vpacktest.partition/qemu-3-v2g-c.libvirt-qemu", NULL};
    expect_stale_in(nested, "0-3", 0, NULL, NULL, NULL);
    expect_stale_in(parts, "0-3", 1, "/vpacktest.partition", "3", "member");
}

/*
 * The v1 repair in a custom partition: before, it walked machine and
 * machine.slice alone, so a group in /vpacktest.partition kept a CPU that
 * went offline and came back out for good.
 */
static void test_cgroup_repair_partition(void **state)
{
    static const char *const parts[] = {"/vpacktest.partition", NULL};
    struct vpack_cgroup_memo m = {0}, before = {0};
    vpack_cpuset online, g;
    unsigned fixed = 99;
    (void)state;
    put(CG "/cpuset.cpus", "0-3\n");
    put(CG "/vpacktest.partition/cpuset.cpus", "0-3\n");
    put(CG "/vpacktest.partition/qemu-3-c.libvirt-qemu/cpuset.cpus", "0-3\n");
    put(CG "/vpacktest.partition/qemu-3-c.libvirt-qemu/vcpu0/cpuset.cpus", "2\n");
    set_list(&online, "0-3");
    assert_int_equal(vpack_cgroup_repair(root, &m, &online, NULL, parts, &fixed), 0);
    assert_int_equal(vpack_cgroup_repair(root, &before, &online, NULL, NULL, &fixed), 0);
    /* CPU 3 goes and comes back; the kernel took it from each group. */
    put(CG "/vpacktest.partition/cpuset.cpus", "0-2\n");
    put(CG "/vpacktest.partition/qemu-3-c.libvirt-qemu/cpuset.cpus", "0-2\n");
    set_list(&g, "3");
    /* Before: not walked, not repaired. */
    assert_int_equal(vpack_cgroup_repair(root, &before, &online, &g, NULL, &fixed), 0);
    assert_int_equal(fixed, 0);
    expect_cpus(CG "/vpacktest.partition/cpuset.cpus", "0-2");
    assert_int_equal(vpack_cgroup_repair(root, &m, &online, &g, parts, &fixed), 0);
    assert_int_equal(fixed, 2);
    expect_cpus(CG "/vpacktest.partition/cpuset.cpus", "0-3");
    expect_cpus(CG "/vpacktest.partition/qemu-3-c.libvirt-qemu/cpuset.cpus", "0-3");
    expect_cpus(CG "/vpacktest.partition/qemu-3-c.libvirt-qemu/vcpu0/cpuset.cpus", "2");
    vpack_cgroup_memo_clear(&m);
    vpack_cgroup_memo_clear(&before);
}

/* Which version a host is, from its mounts and the cgroup2 root's controllers. */
static void test_cgroup_detect(void **state)
{
    struct vpack_cgroup_host h;
    (void)state;
    /* This project's test machines: v1 controllers beside systemd's unified mount. */
    put("proc/self/mounts", "cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0\n"
                            "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n"
                            "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n");
    put("sys/fs/cgroup/unified/cgroup.controllers", "hugetlb\n");
    assert_int_equal(vpack_cgroup_detect(root, &h), 0);
    assert_string_equal(vpack_cgroup_version(&h), "hybrid");
    assert_int_equal(h.cpuset, VPACK_CGROUP_V1);
    assert_int_equal(h.memory, VPACK_CGROUP_V1);
    vpack_cgroup_host_clear(&h);
    /* v2 with no memory controller enabled at its root: memory is unavailable. */
    put("proc/self/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n");
    put("sys/fs/cgroup/cgroup.controllers", "cpuset cpu pids\n");
    assert_int_equal(vpack_cgroup_detect(root, &h), 0);
    assert_string_equal(vpack_cgroup_version(&h), "v2");
    assert_int_equal(h.cpuset, VPACK_CGROUP_V2);
    assert_int_equal(h.memory, VPACK_CGROUP_NONE);
    assert_string_equal(vpack_cgroup_ver_name(h.memory), "none");
    vpack_cgroup_host_clear(&h);
    /* No cgroups at all. */
    put("proc/self/mounts", "proc /proc proc rw 0 0\n");
    assert_int_equal(vpack_cgroup_detect(root, &h), 0);
    assert_string_equal(vpack_cgroup_version(&h), "none");
    vpack_cgroup_host_clear(&h);
}

/*
 * QEMU's threads read through held schedstat descriptors (v2-systemd's
 * domain web, pid 5151), the task directory's thread count, and what a
 * missing thread or a broken text gives.
 */
static void test_schedstat(void **state)
{
    char r[4096], tmp[4200];
    struct vpack_schedstat s = {0};
    (void)state;
    host_root("v2-systemd", r, sizeof(r));
    int fd = vpack_host_schedstat_open(r, 5151, 5157); /* "CPU 0/KVM" */
    assert_true(fd >= 0);
    assert_int_equal(vpack_host_schedstat_read(fd, &s), 0);
    assert_int_equal(s.run_ns, 435330123456ULL);
    assert_int_equal(s.wait_ns, 9203180931ULL);
    assert_int_equal(s.slices, 40311);
    /* Read again from the start: the same descriptor serves every interval. */
    s.run_ns = 0;
    assert_int_equal(vpack_host_schedstat_read(fd, &s), 0);
    assert_int_equal(s.run_ns, 435330123456ULL);
    close(fd);
    assert_int_equal(vpack_host_schedstat_open(r, 5151, 5199), -ENOENT);
    assert_int_equal(vpack_host_schedstat_open(r, 5151, 0), -ENOENT);
    assert_int_equal(vpack_host_schedstat_open(r, -1, 5157), -ENOENT);

    /* Eight threads: the directory's link count says so without listing it. */
    int dfd = vpack_host_task_dir_open(r, 5151);
    assert_true(dfd >= 0);
    struct vpack_host_thread *t = NULL;
    unsigned n = 0;
    assert_int_equal(vpack_host_threads(r, 5151, &t, &n), 0);
    free(t);
    assert_int_equal(vpack_host_task_count(dfd), (int)n);
    close(dfd);
    assert_int_equal(vpack_host_task_dir_open(r, 5199), -ENOENT);

    /* Not a schedstat text: a stat file read through the same call. */
    snprintf(tmp, sizeof(tmp), "%s/proc/5151/task/5157/stat", r);
    fd = open(tmp, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(vpack_host_schedstat_read(fd, &s), -EINVAL);
    close(fd);
}

/*
 * What the agent's sampler meets on a live host, on a tree of its own: a
 * thread that has no schedstat file (a kernel without CONFIG_SCHED_INFO)
 * is told from one that ended; a thread that ends while its file is held
 * (the kernel then answers ESRCH; here the text is cut, as a file read
 * while it is rewritten); an empty file; and a task directory on a
 * filesystem that counts no links.
 */
static void test_schedstat_faults(void **state)
{
    struct vpack_schedstat s = {0};
    char path[512];
    (void)state;
    put("proc/77/task/77/stat", "77 (qemu-system-x86) S 1\n");
    put("proc/77/task/78/schedstat", "100 20 3\n");
    assert_int_equal(vpack_host_schedstat_open(root, 77, 77), -ENOTSUP);
    assert_int_equal(vpack_host_schedstat_open(root, 77, 79), -ENOENT);
    assert_int_equal(vpack_host_schedstat_open(root, 78, 78), -ENOENT);

    int fd = vpack_host_schedstat_open(root, 77, 78);
    assert_true(fd >= 0);
    assert_int_equal(vpack_host_schedstat_read(fd, &s), 0);
    assert_int_equal(s.run_ns, 100);
    /* Cut short and then emptied under the held descriptor: no reading, no crash. */
    put("proc/77/task/78/schedstat", "100 2");
    assert_int_equal(vpack_host_schedstat_read(fd, &s), -EINVAL);
    put("proc/77/task/78/schedstat", "");
    assert_int_equal(vpack_host_schedstat_read(fd, &s), -EINVAL);
    assert_int_equal(s.run_ns, 100); /* untouched on failure */
    /* Removed while held (the file stays readable through the descriptor). */
    snprintf(path, sizeof(path), "%s/proc/77/task/78/schedstat", root);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(vpack_host_schedstat_read(fd, &s), -EINVAL);
    close(fd);
    assert_int_equal(vpack_host_schedstat_open(root, 77, 78), -ENOTSUP);

    /* tmpfs and most filesystems give a directory 2 + its subdirectories links,
     * as procfs gives 2 + its threads: two thread directories here. */
    int dfd = vpack_host_task_dir_open(root, 77);
    assert_true(dfd >= 0);
    int n = vpack_host_task_count(dfd);
    assert_true(n == 2 || n == -ENOTSUP);
    close(dfd);
    assert_int_equal(vpack_host_task_count(-1), -EBADF);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reads_under_root, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reads_relative, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cpu_times_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cgroup_repair, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cgroup_repair_narrowed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_cpus_and_runs, setup, teardown),
        cmocka_unit_test(test_cgroup_v2_noop),
        cmocka_unit_test(test_self_process),
        cmocka_unit_test(test_process_cgroups),
        cmocka_unit_test(test_iothread_ticks),
        cmocka_unit_test(test_numa_stat),
        cmocka_unit_test(test_v2_systemd),
        cmocka_unit_test(test_v2_machine),
        cmocka_unit_test(test_schedstat),
        cmocka_unit_test_setup_teardown(test_schedstat_faults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_v2_hotplug_check, setup, teardown),
        cmocka_unit_test_setup_teardown(test_v2_live_partition, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cgroup_repair_partition, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cgroup_detect, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
