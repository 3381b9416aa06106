// SPDX-License-Identifier: MIT
/*
 * The libvirt adapter (adapters/virt.c) against a real libvirtd and a running
 * QEMU guest, named by $VPACK_TEST_DOMAIN (test-virt-adapter.sh boots it:
 * 2 vCPUs, vCPU 0 busy). Needs root and a host with at least 2 CPUs.
 *
 *   VPACK_TEST_URI    connection (default qemu:///system)
 *   VPACK_TEST_SLOW   non-empty: also hold the domain's job lock for 30 s
 *                     to see -EBUSY and a stats call that does not wait
 *
 * With adapters/virt-event.c the adapter runs on a libuv loop (events,
 * reconnects through a proxy socket the test cuts); without it only the
 * synchronous connection is tested.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "virt.h"
#ifdef VPACK_HAVE_VIRT_EVENT
#include "virt-event.h"
#endif

#define LIBVIRT_SOCK "/run/libvirt/libvirt-sock"

struct events {
    int connected;
    int disconnected;
    int started, stopped, metadata, defined;
    char last_uuid[37];
};

static struct {
    const char *uri;
    const char *name;
    char uuid[37];
    uv_loop_t loop;
    bool have_loop;
    struct vpack_virt *v;
    struct events ev;
    int host_cpus;
} T;

/* ------------------------------------------------------------- helpers */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

#ifdef VPACK_HAVE_VIRT_EVENT
static void on_connected(void *opaque)
{
    ((struct events *)opaque)->connected++;
}

static void on_disconnected(void *opaque)
{
    ((struct events *)opaque)->disconnected++;
}

static void on_domain_event(void *opaque, const char *uuid, enum vpack_virt_event ev)
{
    struct events *e = opaque;
    snprintf(e->last_uuid, sizeof(e->last_uuid), "%s", uuid);
    switch (ev) {
    case VPACK_VIRT_STARTED: e->started++; break;
    case VPACK_VIRT_STOPPED: e->stopped++; break;
    case VPACK_VIRT_METADATA: e->metadata++; break;
    case VPACK_VIRT_DEFINED: e->defined++; break;
    }
}

static const struct vpack_virt_cbs test_cbs = {
    .connected = on_connected,
    .disconnected = on_disconnected,
    .domain_event = on_domain_event,
};
#endif

static void on_tick(uv_timer_t *t)
{
    (void)t;
}

/* Runs the loop until *counter exceeds base or ms pass; true if it did. */
static bool run_until(const int *counter, int base, unsigned ms)
{
    uv_timer_t tick;
    uint64_t deadline = now_ms() + ms;
    bool ok;

    if (!T.have_loop)
        return *counter > base;
    uv_timer_init(&T.loop, &tick);
    uv_timer_start(&tick, on_tick, 20, 20);
    while (*counter <= base && now_ms() < deadline)
        uv_run(&T.loop, UV_RUN_ONCE);
    ok = *counter > base;
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(&T.loop, UV_RUN_NOWAIT);
    return ok;
}

/* Runs the loop for ms (events are dispatched from it). */
static void run_for(unsigned ms)
{
    int never = 0;
    if (T.have_loop)
        run_until(&never, 0, ms);
    else
        usleep(ms * 1000);
}

static bool file_contains(const char *text, const char *needle)
{
    return text && strstr(text, needle);
}

/* ------------------------------------------------------ group set-up */

/* The adapter's last error message (vpack/errmsg.h): errp() frees the one
 * before and passes a fresh slot to a call, errs() reads it for a log. */
static char *last_err;

static char **errp(void)
{
    free(last_err);
    last_err = NULL;
    return &last_err;
}

static const char *errs(void)
{
    return last_err ? last_err : "(no message)";
}

static int group_setup(void **state)
{
    int r;

    (void)state;
    T.uri = getenv("VPACK_TEST_URI");
    if (!T.uri || !*T.uri)
        T.uri = "qemu:///system";
    T.name = getenv("VPACK_TEST_DOMAIN");
    if (!T.name || !*T.name) {
        fprintf(stderr, "VPACK_TEST_DOMAIN is not set\n");
        return -1;
    }
    T.host_cpus = (int)sysconf(_SC_NPROCESSORS_CONF);
#ifdef VPACK_HAVE_VIRT_EVENT
    if (uv_loop_init(&T.loop) != 0)
        return -1;
    T.have_loop = true;
    if ((r = vpack_virt_event_register(&T.loop)) < 0) {
        fprintf(stderr, "vpack_virt_event_register: %s\n", strerror(-r));
        return -1;
    }
    if ((r = vpack_virt_new(&T.loop, T.uri, &test_cbs, &T.ev, &T.v)) < 0) {
        fprintf(stderr, "vpack_virt_new: %s\n", strerror(-r));
        return -1;
    }
    if (vpack_virt_connected(T.v)) {
        fprintf(stderr, "connected before the loop ran\n");
        return -1;
    }
    if (!run_until(&T.ev.connected, 0, 10000)) {
        fprintf(stderr, "no connection after 10 s: %s\n", vpack_virt_last_error(T.v));
        return -1;
    }
#else
    if ((r = vpack_virt_open_sync(T.uri, &T.v, errp())) < 0) {
        fprintf(stderr, "vpack_virt_open_sync: %s\n", errs());
        return -1;
    }
#endif
    if ((r = vpack_virt_lookup(T.v, T.name, T.uuid, errp())) < 0) {
        fprintf(stderr, "lookup %s: %s\n", T.name, errs());
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    free(last_err);
    last_err = NULL;
    vpack_virt_free(T.v);
    T.v = NULL;
#ifdef VPACK_HAVE_VIRT_EVENT
    vpack_virt_event_close();
    uv_run(&T.loop, UV_RUN_DEFAULT);
    int r = uv_loop_close(&T.loop);
    if (r != 0) {
        fprintf(stderr, "uv_loop_close: %s (a handle was left open)\n", uv_strerror(r));
        return -1;
    }
#endif
    return 0;
}

/* ------------------------------------------------------------- tests */

static void test_connected(void **state)
{
    (void)state;
    assert_true(vpack_virt_connected(T.v));
    assert_string_equal(vpack_virt_last_error(T.v), "");
    if (T.have_loop)
        assert_int_equal(T.ev.connected, 1);
}

static void test_lookup(void **state)
{
    char uuid[37];
    char id[16];
    struct vpack_virt_domain d;

    (void)state;
    /* By UUID and by numeric id, as virsh accepts them. */
    assert_int_equal(vpack_virt_lookup(T.v, T.uuid, uuid, errp()), 0);
    assert_string_equal(uuid, T.uuid);
    assert_int_equal(vpack_virt_domain_get(T.v, T.uuid, &d, errp()), 0);
    snprintf(id, sizeof(id), "%d", d.id);
    vpack_virt_domain_clear(&d);
    assert_int_equal(vpack_virt_lookup(T.v, id, uuid, errp()), 0);
    assert_null(last_err); /* no message on success */
    assert_string_equal(uuid, T.uuid);
    assert_int_equal(vpack_virt_lookup(T.v, "vpvirt-no-such-domain", uuid, errp()),
                     -ENOENT);
    print_message("lookup of a missing name: %s\n", errs());
    assert_string_equal(errs(), "domain 'vpvirt-no-such-domain' not found");
    /* Without errmsg: the same answer, and no message is made. */
    assert_int_equal(vpack_virt_lookup(T.v, "vpvirt-no-such-domain", uuid, NULL), -ENOENT);
    assert_int_equal(
        vpack_virt_lookup(T.v, "00000000-0000-0000-0000-00000000beef", uuid, errp()),
        -ENOENT);
}

static void test_list_running(void **state)
{
    char **uuids = NULL;
    unsigned n = 0;
    bool found = false;

    (void)state;
    assert_int_equal(vpack_virt_list_running(T.v, &uuids, &n, errp()), 0);
    for (unsigned i = 0; i < n; i++) {
        if (strcmp(uuids[i], T.uuid) == 0)
            found = true;
        free(uuids[i]);
    }
    free(uuids);
    assert_true(found);
}

static void test_domain_get(void **state)
{
    struct vpack_virt_domain d;
    char path[64], comm[64] = "";
    FILE *f;

    (void)state;
    assert_int_equal(vpack_virt_domain_get(T.v, T.uuid, &d, errp()), 0);
    assert_string_equal(d.name, T.name);
    assert_string_equal(d.uuid, T.uuid);
    assert_true(d.id > 0);
    assert_true(d.persistent);
    assert_true(file_contains(d.live_xml, "<domain type='qemu' id="));
    assert_non_null(d.inactive_xml);
    assert_true(file_contains(d.inactive_xml, "<domain type='qemu'>"));
    assert_true(d.pid > 0);
    snprintf(path, sizeof(path), "/proc/%d/comm", d.pid);
    f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(comm, sizeof(comm), f));
    fclose(f);
    assert_non_null(strstr(comm, "qemu"));
    vpack_virt_domain_clear(&d);
    assert_null(d.name);
    assert_int_equal(d.pid, -1);

    assert_int_equal(vpack_virt_domain_get(T.v, "00000000-0000-0000-0000-00000000beef", &d, errp()),
                     -ENOENT);
    assert_null(d.name);
}

static const struct vpack_virt_stats *find_stats(const struct vpack_virt_stats *recs, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (strcmp(recs[i].uuid, T.uuid) == 0)
            return &recs[i];
    return NULL;
}

static void test_stats(void **state)
{
    struct vpack_virt_stats *a = NULL, *b = NULL;
    const struct vpack_virt_stats *sa, *sb;
    unsigned na = 0, nb = 0;
    uint64_t ta = 0, tb = 0;

    (void)state;
    assert_int_equal(vpack_virt_stats_all(T.v, &a, &na, errp()), 0);
    run_for(1000);
    assert_int_equal(vpack_virt_stats_all(T.v, &b, &nb, errp()), 0);
    sa = find_stats(a, na);
    sb = find_stats(b, nb);
    assert_non_null(sa);
    assert_non_null(sb);
    assert_int_equal(sa->nvcpus, 2);
    assert_int_equal(sa->nvcpus_current, 2);
    assert_true(sa->vcpu_online[0] && sa->vcpu_online[1]);
    assert_true(sb->cpu_time_ns > sa->cpu_time_ns);
    for (unsigned i = 0; i < sa->nvcpus; i++) {
        print_message("vcpu.%u.time %" PRIu64 " -> %" PRIu64 ", delay %" PRIu64 " -> %" PRIu64
                      "\n",
                      i, sa->vcpu_time_ns[i], sb->vcpu_time_ns[i], sa->vcpu_delay_ns[i],
                      sb->vcpu_delay_ns[i]);
        assert_true(sb->vcpu_time_ns[i] >= sa->vcpu_time_ns[i]);
        ta += sa->vcpu_time_ns[i];
        tb += sb->vcpu_time_ns[i];
    }
    /* vCPU 0 runs a busy loop: at least 50 ms of the second, even on a
     * crowded host (the field moves in 10 ms steps). */
    assert_true(sb->vcpu_time_ns[0] - sa->vcpu_time_ns[0] >= 50000000ull);
    assert_true(tb > ta);
    print_message("vcpu.N.delay reported: %s\n", sa->has_delay ? "yes" : "no");
    assert_true(sa->has_delay);
    vpack_virt_stats_free(a, na);
    vpack_virt_stats_free(b, nb);
    vpack_virt_stats_free(NULL, 0);
}

static void test_pins_get(void **state)
{
    struct vpack_virt_pins p;
    vpack_cpuset all;

    (void)state;
    vpack_cpuset_zero(&all);
    vpack_cpuset_set_range(&all, 0, (unsigned)T.host_cpus - 1);
    assert_int_equal(vpack_virt_pins_get(T.v, T.uuid, &p, errp()), 0);
    assert_int_equal(p.nvcpus, 2);
    /* Nothing pinned yet: every thread may use every host CPU. */
    assert_true(vpack_cpuset_equal(&p.vcpus[0], &all));
    assert_true(vpack_cpuset_equal(&p.vcpus[1], &all));
    assert_true(vpack_cpuset_equal(&p.emulator, &all));
    assert_int_equal(p.niothreads, 0);
    vpack_virt_pins_clear(&p);
    assert_null(p.vcpus);
}

static void test_pin_vcpu_live(void **state)
{
    struct vpack_virt_pins p;
    struct vpack_virt_domain d;
    vpack_cpuset one;

    (void)state;
    vpack_cpuset_zero(&one);
    vpack_cpuset_set(&one, 1);
    assert_int_equal(vpack_virt_pin(T.v, T.uuid, VPACK_THREAD_VCPU, 0, &one, errp()),
                     0);
    assert_int_equal(vpack_virt_pins_get(T.v, T.uuid, &p, errp()), 0);
    assert_true(vpack_cpuset_equal(&p.vcpus[0], &one));
    assert_false(vpack_cpuset_equal(&p.vcpus[1], &one));
    vpack_virt_pins_clear(&p);

    assert_int_equal(vpack_virt_domain_get(T.v, T.uuid, &d, errp()), 0);
    assert_true(file_contains(d.live_xml, "<vcpupin vcpu='0' cpuset='1'/>"));
    /* The persistent definition is untouched. */
    assert_false(file_contains(d.inactive_xml, "vcpupin"));
    vpack_virt_domain_clear(&d);
}

static void test_pin_bad_cpu(void **state)
{
    vpack_cpuset s;

    (void)state;
    vpack_cpuset_zero(&s);
    vpack_cpuset_set(&s, 4000);
    assert_int_equal(vpack_virt_pin(T.v, T.uuid, VPACK_THREAD_VCPU, 0, &s, errp()),
                     -EINVAL);
    print_message("CPU 4000: %s\n", errs());
    vpack_cpuset_zero(&s);
    assert_int_equal(
        vpack_virt_pin(T.v, T.uuid, VPACK_THREAD_EMULATOR, 0, &s, errp()), -EINVAL);
    /* A vCPU the domain does not have: libvirt's INVALID_ARG. */
    vpack_cpuset_set(&s, 0);
    assert_int_equal(vpack_virt_pin(T.v, T.uuid, VPACK_THREAD_VCPU, 7, &s, errp()),
                     -EINVAL);
    print_message("vCPU 7: %s\n", errs());
    assert_int_equal(vpack_virt_pin(T.v, T.uuid, VPACK_THREAD_IOTHREAD, 3, &s, errp()),
                     -EINVAL);
    print_message("iothread 3: %s\n", errs());
}

static void test_pin_missing_domain(void **state)
{
    vpack_cpuset s;

    (void)state;
    vpack_cpuset_zero(&s);
    vpack_cpuset_set(&s, 0);
    assert_int_equal(vpack_virt_pin(T.v, "00000000-0000-0000-0000-00000000beef",
                                    VPACK_THREAD_VCPU, 0, &s, errp()),
                     -ENOENT);
    print_message("unknown UUID: %s\n", errs());
}

/* The definition of T.name renamed to name, without its UUID. */
static char *copy_definition(const char *name)
{
    struct vpack_virt_domain d;
    char *xml, *a, *b, *out = NULL;
    size_t len;

    if (vpack_virt_domain_get(T.v, T.uuid, &d, errp()) < 0)
        return NULL;
    xml = d.inactive_xml;
    a = strstr(xml, "<uuid>");
    b = a ? strstr(a, "</uuid>") : NULL;
    if (a && b)
        memmove(a, b + strlen("</uuid>"), strlen(b + strlen("</uuid>")) + 1);
    a = strstr(xml, "<name>");
    b = a ? strstr(a, "</name>") : NULL;
    if (a && b) {
        len = strlen(xml) + strlen(name) + 1;
        out = malloc(len);
        if (out)
            snprintf(out, len, "%.*s<name>%s%s", (int)(a - xml), xml, name, b);
    }
    vpack_virt_domain_clear(&d);
    return out;
}

static void undefine(const char *name)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "virsh -q -c '%s' undefine '%s' >/dev/null 2>&1", T.uri, name);
    if (system(cmd) != 0)
        fprintf(stderr, "could not undefine %s\n", name);
}

static void test_define_and_stopped_domain(void **state)
{
    char name[128], *xml, *got = NULL, uuid[37];
    vpack_cpuset s;
    struct vpack_virt_pins p;
    int defined0 = T.ev.defined;

    (void)state;
    snprintf(name, sizeof(name), "%s-stopped", T.name);
    xml = copy_definition(name);
    assert_non_null(xml);
    assert_int_equal(vpack_virt_define_xml(T.v, xml, &got, errp()), 0);
    free(xml);
    assert_string_equal(got, name);
    free(got);
    if (T.have_loop) {
        assert_true(run_until(&T.ev.defined, defined0, 5000));
    }
    assert_int_equal(vpack_virt_lookup(T.v, name, uuid, errp()), 0);

    vpack_cpuset_zero(&s);
    vpack_cpuset_set(&s, 0);
    assert_int_equal(vpack_virt_pin(T.v, uuid, VPACK_THREAD_VCPU, 0, &s, errp()),
                     -ENOENT);
    print_message("stopped domain, vCPU: %s\n", errs());
    assert_int_equal(vpack_virt_pin(T.v, uuid, VPACK_THREAD_EMULATOR, 0, &s, errp()),
                     -ENOENT);
    assert_int_equal(vpack_virt_pins_get(T.v, uuid, &p, errp()), -ENOENT);
    assert_null(p.vcpus);

    assert_int_equal(vpack_virt_define_xml(T.v, "<domain type='qemu'><name>x", NULL, errp()),
                     -EINVAL);
    print_message("bad XML: %s\n", errs());
    undefine(name);
}

static void test_pin_emulator(void **state)
{
    struct vpack_virt_pins p;
    vpack_cpuset zero, all;

    (void)state;
    vpack_cpuset_zero(&zero);
    vpack_cpuset_set(&zero, 0);
    assert_int_equal(
        vpack_virt_pin(T.v, T.uuid, VPACK_THREAD_EMULATOR, 0, &zero, errp()), 0);
    assert_int_equal(vpack_virt_pins_get(T.v, T.uuid, &p, errp()), 0);
    assert_true(vpack_cpuset_equal(&p.emulator, &zero));
    vpack_virt_pins_clear(&p);

    /* CPUs the host lacks are dropped, the rest is applied. */
    vpack_cpuset_zero(&all);
    vpack_cpuset_set_range(&all, 0, 4095);
    assert_int_equal(
        vpack_virt_pin(T.v, T.uuid, VPACK_THREAD_EMULATOR, 0, &all, errp()), 0);
    assert_int_equal(vpack_virt_pins_get(T.v, T.uuid, &p, errp()), 0);
    assert_int_equal(vpack_cpuset_count(&p.emulator), (unsigned)T.host_cpus);
    vpack_virt_pins_clear(&p);
}

/* ---- the domain's cpuset cgroup loses a CPU (what CPU hotplug does) */

static bool read_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    bool ok = f && fgets(buf, (int)len, f);
    if (f)
        fclose(f);
    if (ok)
        buf[strcspn(buf, "\n")] = '\0';
    return ok;
}

static bool write_line(const char *path, const char *val)
{
    FILE *f = fopen(path, "w");
    bool ok = f && fputs(val, f) >= 0;
    if (f && fclose(f) != 0)
        ok = false;
    return ok;
}

/* /sys/fs/cgroup/cpuset/machine/qemu-N-NAME.libvirt-qemu, from the
 * emulator's cgroup on the cgroup v1 cpuset hierarchy. */
static bool domain_cpuset_dir(int pid, char *dir, size_t len)
{
    char path[64], line[1024];
    FILE *f;
    bool ok = false;

    snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
    if (!(f = fopen(path, "r")))
        return false;
    while (fgets(line, sizeof(line), f)) {
        char *p = strstr(line, ":cpuset:");
        char *e;
        if (!p)
            continue;
        p += strlen(":cpuset:");
        p[strcspn(p, "\n")] = '\0';
        e = strrchr(p, '/');
        if (e && strcmp(e, "/emulator") == 0)
            *e = '\0';
        snprintf(dir, len, "/sys/fs/cgroup/cpuset%s", p);
        ok = access(dir, F_OK) == 0;
        break;
    }
    fclose(f);
    return ok;
}

static void test_pin_cgroup_lost_cpu(void **state)
{
    struct vpack_virt_domain d;
    char dir[512], path[600];
    static const char *kids[] = {"vcpu0", "vcpu1", "emulator"};
    char saved[4][64];
    vpack_cpuset s;
    int r;

    (void)state;
    if (T.host_cpus < 2)
        skip();
    assert_int_equal(vpack_virt_domain_get(T.v, T.uuid, &d, errp()), 0);
    if (!domain_cpuset_dir(d.pid, dir, sizeof(dir))) {
        vpack_virt_domain_clear(&d);
        print_message("no cgroup v1 cpuset for the domain: skipped\n");
        skip();
    }
    vpack_virt_domain_clear(&d);
    print_message("domain cpuset cgroup: %s\n", dir);

    /* Narrow children first, then the domain: cgroup v1 wants children
     * inside their parent. */
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/%s/cpuset.cpus", dir, kids[i]);
        assert_true(read_line(path, saved[i], sizeof(saved[i])));
        assert_true(write_line(path, "0"));
    }
    snprintf(path, sizeof(path), "%s/cpuset.cpus", dir);
    assert_true(read_line(path, saved[3], sizeof(saved[3])));
    assert_true(write_line(path, "0"));

    vpack_cpuset_zero(&s);
    vpack_cpuset_set(&s, 1);
    r = vpack_virt_pin(T.v, T.uuid, VPACK_THREAD_VCPU, 1, &s, errp());
    print_message("vCPU, CPU outside the domain cpuset: %s\n", errs());
    int r2 = vpack_virt_pin(T.v, T.uuid, VPACK_THREAD_EMULATOR, 0, &s, errp());
    print_message("emulator, CPU outside the domain cpuset: %s\n", errs());

    /* Restore parent first, then the children. */
    assert_true(write_line(path, saved[3]));
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/%s/cpuset.cpus", dir, kids[i]);
        assert_true(write_line(path, saved[i]));
    }
    assert_int_equal(r, -EINVAL);
    assert_int_equal(r2, -EINVAL);
}

static void test_set_level(void **state)
{
    struct vpack_virt_domain d;
    int meta0 = T.ev.metadata;

    (void)state;
    assert_int_equal(vpack_virt_set_level(T.v, T.name, 2, true, false, errp()), 0);
    if (T.have_loop) {
        assert_true(run_until(&T.ev.metadata, meta0, 5000));
        assert_string_equal(T.ev.last_uuid, T.uuid);
    }
    assert_int_equal(vpack_virt_domain_get(T.v, T.uuid, &d, errp()), 0);
    assert_true(file_contains(d.live_xml, "<vpack:powerpolicy xmlns:vpack=\"urn:vpack:powerpolicy:1\" level=\"2\"/>"));
    assert_false(file_contains(d.inactive_xml, "powerpolicy"));
    vpack_virt_domain_clear(&d);

    /* Both, by UUID; the element is replaced, not added. */
    assert_int_equal(vpack_virt_set_level(T.v, T.uuid, 1, true, true, errp()), 0);
    assert_int_equal(vpack_virt_domain_get(T.v, T.uuid, &d, errp()), 0);
    assert_true(file_contains(d.live_xml, "level=\"1\""));
    assert_false(file_contains(d.live_xml, "level=\"2\""));
    assert_true(file_contains(d.inactive_xml, "urn:vpack:powerpolicy:1"));
    vpack_virt_domain_clear(&d);

    /* Removal. */
    assert_int_equal(vpack_virt_set_level(T.v, T.name, -1, true, true, errp()), 0);
    assert_int_equal(vpack_virt_domain_get(T.v, T.uuid, &d, errp()), 0);
    assert_false(file_contains(d.live_xml, "powerpolicy"));
    assert_false(file_contains(d.inactive_xml, "powerpolicy"));
    vpack_virt_domain_clear(&d);

    assert_int_equal(vpack_virt_set_level(T.v, T.name, 3, true, false, errp()), -EINVAL);
    assert_int_equal(vpack_virt_set_level(T.v, "vpvirt-no-such", 1, true, false, errp()),
                     -ENOENT);

    /* Another namespace's change is reported too: vpackd.conf's rules may
     * read another manager's metadata (Nova's flavor). */
    if (T.have_loop) {
        char cmd[512];
        int m;
        run_for(500); /* the events of the changes above */
        m = T.ev.metadata;
        snprintf(cmd, sizeof(cmd),
                 "virsh -q -c '%s' metadata '%s' --live --uri urn:other:1 --key o "
                 "--set '<x/>' >/dev/null && virsh -q -c '%s' metadata '%s' --live "
                 "--uri urn:other:1 --remove >/dev/null",
                 T.uri, T.name, T.uri, T.name);
        assert_int_equal(system(cmd), 0);
        assert_true(run_until(&T.ev.metadata, m + 1, 5000));
        assert_string_equal(T.ev.last_uuid, T.uuid);
    }
}

/* ---- the job lock held by a stuck monitor command (VPACK_TEST_SLOW) */

static void test_busy_domain(void **state)
{
    struct vpack_virt_domain d;
    struct vpack_virt_stats *recs = NULL;
    unsigned n = 0;
    char cmd[512];
    vpack_cpuset s;
    uint64_t t0;
    int r;

    (void)state;
    if (!getenv("VPACK_TEST_SLOW") || !*getenv("VPACK_TEST_SLOW"))
        skip();
    assert_int_equal(vpack_virt_domain_get(T.v, T.uuid, &d, errp()), 0);
    assert_true(d.pid > 0);
    /* A stopped QEMU never answers; the monitor command holds the job. */
    assert_int_equal(kill(d.pid, SIGSTOP), 0);
    snprintf(cmd, sizeof(cmd),
             "timeout 120 virsh -q -c '%s' qemu-monitor-command '%s' "
             "'{\"execute\":\"query-status\"}' >/dev/null 2>&1 &",
             T.uri, T.name);
    assert_int_equal(system(cmd), 0);
    usleep(1000 * 1000);

    t0 = now_ms();
    r = vpack_virt_stats_all(T.v, &recs, &n, errp());
    print_message("stats while the job is held: %d in %" PRIu64 " ms\n", r, now_ms() - t0);
    const struct vpack_virt_stats *st = r == 0 ? find_stats(recs, n) : NULL;
    bool stats_ok = st && st->nvcpus == 2 && st->vcpu_time_ns[0] > 0;
    bool stats_fast = now_ms() - t0 < 5000;
    vpack_virt_stats_free(recs, n);

    vpack_cpuset_zero(&s);
    vpack_cpuset_set(&s, 0);
    t0 = now_ms();
    r = vpack_virt_pin(T.v, T.uuid, VPACK_THREAD_VCPU, 1, &s, errp());
    print_message("pin while the job is held: %d after %" PRIu64 " ms: %s\n", r, now_ms() - t0,
                  errs());
    kill(d.pid, SIGCONT);
    vpack_virt_domain_clear(&d);
    assert_true(stats_ok);
    assert_true(stats_fast);
    assert_int_equal(r, -EBUSY);
}

/* ---- reconnects, through a proxy socket the test can cut */

#ifdef VPACK_HAVE_VIRT_EVENT
#define PROXY_MAX 8

static struct {
    char path[108];
    int lfd;
    int wake[2];
    pthread_t th;
    atomic_int accepts;
    atomic_int refused;
    atomic_uint_least64_t refuse_until;
    int pairs[PROXY_MAX][2];
    int npairs;
} P;

static void proxy_close_pair(int i)
{
    close(P.pairs[i][0]);
    close(P.pairs[i][1]);
    P.pairs[i][0] = P.pairs[--P.npairs][0];
    P.pairs[i][1] = P.pairs[P.npairs][1];
}

static int proxy_upstream(void)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", LIBVIRT_SOCK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static void *proxy_main(void *arg)
{
    (void)arg;
    for (;;) {
        struct pollfd pfd[2 + 2 * PROXY_MAX];
        int n = 0;
        pfd[n++] = (struct pollfd){.fd = P.wake[0], .events = POLLIN};
        pfd[n++] = (struct pollfd){.fd = P.lfd, .events = POLLIN};
        for (int i = 0; i < P.npairs; i++) {
            pfd[n++] = (struct pollfd){.fd = P.pairs[i][0], .events = POLLIN};
            pfd[n++] = (struct pollfd){.fd = P.pairs[i][1], .events = POLLIN};
        }
        if (poll(pfd, (nfds_t)n, -1) < 0)
            continue;
        if (pfd[0].revents) {
            char c = 0;
            if (read(P.wake[0], &c, 1) == 1 && c == 'q')
                break;
            while (P.npairs > 0) /* 'c': cut every connection */
                proxy_close_pair(0);
            continue;
        }
        if (pfd[1].revents & POLLIN) {
            int cfd = accept4(P.lfd, NULL, NULL, SOCK_CLOEXEC), ufd;
            if (cfd >= 0) {
                atomic_fetch_add(&P.accepts, 1);
                if (now_ms() < atomic_load(&P.refuse_until) || P.npairs == PROXY_MAX ||
                    (ufd = proxy_upstream()) < 0) {
                    atomic_fetch_add(&P.refused, 1);
                    close(cfd);
                } else {
                    P.pairs[P.npairs][0] = cfd;
                    P.pairs[P.npairs][1] = ufd;
                    P.npairs++;
                }
            }
            continue;
        }
        for (int i = 0; i < P.npairs; i++) {
            for (int side = 0; side < 2; side++) {
                struct pollfd *q = &pfd[2 + 2 * i + side];
                char buf[65536];
                ssize_t got;
                bool dead = false;
                if (!q->revents)
                    continue;
                got = read(q->fd, buf, sizeof(buf));
                if (got <= 0) {
                    dead = true;
                } else {
                    for (ssize_t off = 0; off < got;) {
                        ssize_t w = write(P.pairs[i][!side], buf + off, (size_t)(got - off));
                        if (w <= 0) {
                            dead = true;
                            break;
                        }
                        off += w;
                    }
                }
                if (dead) {
                    proxy_close_pair(i);
                    goto next; /* the fds moved: poll again */
                }
            }
        }
    next:;
    }
    while (P.npairs > 0)
        proxy_close_pair(0);
    return NULL;
}

static bool proxy_start(void)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(P.path, sizeof(P.path), "/tmp/vpvirt-proxy-%d.sock", (int)getpid());
    unlink(P.path);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", P.path);
    P.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (P.lfd < 0 || bind(P.lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(P.lfd, 8) < 0)
        return false;
    if (pipe2(P.wake, O_CLOEXEC) < 0)
        return false;
    return pthread_create(&P.th, NULL, proxy_main, NULL) == 0;
}

static void proxy_send(char c)
{
    if (write(P.wake[1], &c, 1) != 1)
        fprintf(stderr, "proxy: cannot write the wake pipe\n");
}

static void proxy_stop(void)
{
    proxy_send('q');
    pthread_join(P.th, NULL);
    close(P.lfd);
    close(P.wake[0]);
    close(P.wake[1]);
    unlink(P.path);
}

static void test_reconnect(void **state)
{
    struct vpack_virt *v = NULL;
    struct events ev = {0};
    struct vpack_virt_stats *recs = NULL;
    unsigned n = 0;
    char uri[256];
    int r, refused0;

    (void)state;
    if (strcmp(T.uri, "qemu:///system") != 0 || access(LIBVIRT_SOCK, F_OK) != 0)
        skip();
    assert_true(proxy_start());
    snprintf(uri, sizeof(uri), "qemu+unix:///system?socket=%s", P.path);
    assert_int_equal(vpack_virt_new(&T.loop, uri, &test_cbs, &ev, &v), 0);
    assert_true(run_until(&ev.connected, 0, 10000));
    assert_true(vpack_virt_connected(v));
    assert_int_equal(vpack_virt_stats_all(v, &recs, &n, errp()), 0);
    vpack_virt_stats_free(recs, n);

    /* Cut, and refuse new connections for 1.2 s: the first attempts fail
     * (at once, after 0.5 s), the one after 1 s more succeeds. */
    atomic_store(&P.refuse_until, now_ms() + 1200);
    refused0 = atomic_load(&P.refused);
    proxy_send('c');
    usleep(200 * 1000);
    /* The loop has not run: the call itself finds the connection dead. */
    r = vpack_virt_stats_all(v, &recs, &n, errp());
    print_message("stats on a cut connection: %d (%s)\n", r, errs());
    assert_int_equal(r, -ENOTCONN);
    assert_false(vpack_virt_connected(v));
    assert_true(run_until(&ev.disconnected, 0, 5000));
    assert_int_equal(ev.connected, 1);
    assert_int_equal(vpack_virt_stats_all(v, &recs, &n, errp()), -ENOTCONN);
    assert_true(run_until(&ev.connected, 1, 10000));
    print_message("reconnected after %d refused attempts\n", atomic_load(&P.refused) - refused0);
    assert_true(atomic_load(&P.refused) - refused0 >= 2);
    assert_int_equal(ev.disconnected, 1);
    assert_string_equal(vpack_virt_last_error(v), "");
    assert_int_equal(vpack_virt_stats_all(v, &recs, &n, errp()), 0);
    vpack_virt_stats_free(recs, n);

    /* Events flow on the new connection. */
    int m = ev.metadata;
    assert_int_equal(vpack_virt_set_level(v, T.name, 1, true, false, errp()), 0);
    assert_true(run_until(&ev.metadata, m, 5000));
    assert_int_equal(vpack_virt_set_level(v, T.name, -1, true, false, errp()), 0);

    /* Lost for good: the adapter keeps retrying until freed. */
    atomic_store(&P.refuse_until, now_ms() + 3600 * 1000);
    proxy_send('c');
    assert_true(run_until(&ev.disconnected, 1, 5000));
    run_for(800);
    print_message("while refused: %s\n", vpack_virt_last_error(v));
    assert_true(strlen(vpack_virt_last_error(v)) > 0);
    vpack_virt_free(v);
    int c = ev.connected, d = ev.disconnected;
    run_for(200);
    assert_int_equal(ev.connected, c);
    assert_int_equal(ev.disconnected, d);
    proxy_stop();
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_connected),
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_list_running),
        cmocka_unit_test(test_domain_get),
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_pins_get),
        cmocka_unit_test(test_pin_vcpu_live),
        cmocka_unit_test(test_pin_bad_cpu),
        cmocka_unit_test(test_pin_missing_domain),
        cmocka_unit_test(test_define_and_stopped_domain),
        cmocka_unit_test(test_pin_emulator),
        cmocka_unit_test(test_pin_cgroup_lost_cpu),
        cmocka_unit_test(test_set_level),
        cmocka_unit_test(test_busy_domain),
#ifdef VPACK_HAVE_VIRT_EVENT
        cmocka_unit_test(test_reconnect),
#endif
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
