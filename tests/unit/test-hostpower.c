// SPDX-License-Identifier: MIT
/*
 * The hardware readings of issue 26 on fixture trees (tests/data/hw/, see
 * its README for their sources): the perf PMUs' sysfs text
 * (lib/sys/perf-event.c), the C-state counters (adapters/hostperf.c) with
 * a stand-in for the kernel, RAPL DRAM and psys energy with its wraps,
 * uncore frequency (legacy and TPMI directories), and, for each missing
 * source, its absence from the metrics, its 0 in
 * vpack_hardware_source_available and its reason. Then the real
 * perf_event_open(2) path live: on this host's own /sys, where a host
 * without a C-state PMU (any virtual machine) must say "not available"
 * and print nothing; and on a tree that names the live kernel's msr PMU
 * ("tsc" event) in place of cstate_pkg, where it must open, read and grow.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostperf.h"
#include "hostpower.h"
#include "prom-test-util.h"
#include "vpack/perf-event.h"
#include "vpack/prom.h"

/* ------------------------------------------------------------- helpers */

static char *copy_fixture(const char *name)
{
    const char *dir = getenv("VPACK_TESTDATA");
    char *root = strdup("/tmp/vpack-hw-XXXXXX"), cmd[8192];
    assert_non_null(dir);
    assert_non_null(root);
    assert_non_null(mkdtemp(root));
    if (name) {
        snprintf(cmd, sizeof(cmd), "cp -r '%s/hw/%s/.' '%s'", dir, name, root);
        assert_int_equal(system(cmd), 0);
    }
    return root;
}

/* The reading rendered (with no agent metrics): the caller frees it. */
static char *render(const struct vpack_hostpower_reading *r)
{
    struct vpack_prom_metrics m = {0};
    struct vpack_prom_host h;
    char *t = NULL;
    vpack_hostpower_prom_host(r, &h);
    assert_int_equal(vpack_prom_render(&m, &h, &t, NULL), 0);
    return t;
}

static const struct vpack_prom_available *avail(const struct vpack_hostpower_reading *r,
                                                const char *counter)
{
    for (size_t i = 0; i < r->navailable; i++)
        if (!strcmp(r->available[i].source, counter))
            return &r->available[i];
    fail_msg("no availability of %s", counter);
    return NULL;
}

/*
 * A stand-in for the kernel: counter fd 1 + 16 * cpu + config; its count
 * 1e9 * (config + 1) + cpu + bump, so that each package's sum is known.
 */
struct fake {
    int open_err;   /* every open fails with it when not 0 */
    int bad_cpu;    /* reads of this CPU's counters fail (-1: none) */
    double hz;
    uint64_t bump;
    int opened, closed;
};

static int fake_open(void *ud, uint32_t type, uint64_t config, int cpu)
{
    struct fake *f = ud;
    (void)type;
    if (f->open_err)
        return f->open_err;
    assert_true(config < 16);
    f->opened++;
    return 1 + 16 * cpu + (int)config;
}

static int fake_read(void *ud, int fd, uint64_t *count)
{
    struct fake *f = ud;
    int cpu = (fd - 1) / 16, config = (fd - 1) % 16;
    if (cpu == f->bad_cpu)
        return -EIO;
    *count = 1000000000ull * (uint64_t)(config + 1) + (uint64_t)cpu + f->bump;
    return 0;
}

static double fake_tsc_hz(void *ud, int fd)
{
    (void)fd;
    return ((struct fake *)ud)->hz;
}

static void fake_close(void *ud, int fd)
{
    (void)fd;
    ((struct fake *)ud)->closed++;
}

static struct vpack_perf_ops fake_ops(struct fake *f)
{
    return (struct vpack_perf_ops){fake_open, fake_read, fake_tsc_hz, fake_close, f};
}

/* One reader on a copy of a fixture, with the stand-in kernel f. */
struct run {
    struct fake f;
    struct vpack_perf_ops ops;
    struct vpack_hostpower *hp;
    struct vpack_hostpower_reading r;
    char *root;
};

/* Copies fixture (NULL: an empty tree), opens a reader on it through u->f and reads it once. */
static int run_open(struct run *u, const char *fixture, struct fake f)
{
    u->f = f;
    u->ops = fake_ops(&u->f);
    u->root = copy_fixture(fixture);
    assert_int_equal(vpack_hostpower_new_ops(u->root, &u->ops, &u->hp), 0);
    return vpack_hostpower_read(u->hp, &u->r);
}

/* Frees it all; every counter opened was closed. */
static void run_close(struct run *u)
{
    vpack_hostpower_reading_clear(&u->r);
    vpack_hostpower_free(u->hp);
    assert_int_equal(u->f.closed, u->f.opened);
    remove_root(u->root);
}

static const struct vpack_prom_cstate *cstate(const struct vpack_prom_cstate *c, size_t n,
                                              unsigned pkg, unsigned die, const char *state)
{
    for (size_t i = 0; i < n; i++)
        if (c[i].package == pkg && c[i].die == die && !strcmp(c[i].state, state))
            return &c[i];
    fail_msg("no C-state %s of package %u die %u", state, pkg, die);
    return NULL;
}

/* ------------------------------------------------------------- sysfs text */

static void test_format_parse(void **state)
{
    struct vpack_perf_format f;
    char *err = NULL;
    (void)state;
    assert_int_equal(vpack_perf_format_parse("event", "config:0-63", &f, &err), 0);
    assert_null(err);
    assert_string_equal(f.name, "event");
    assert_int_equal(f.lo, 0);
    assert_int_equal(f.hi, 63);
    assert_int_equal(vpack_perf_format_parse("edge", "config:18", &f, NULL), 0);
    assert_int_equal(f.lo, 18);
    assert_int_equal(f.hi, 18);
    assert_int_equal(vpack_perf_format_parse("ldlat", "config1:0-15", &f, &err), -EOPNOTSUPP);
    assert_non_null(strstr(err, "config1:0-15"));
    free(err);
    assert_int_equal(vpack_perf_format_parse("x", "config:0-7,32-35", &f, &err), -EOPNOTSUPP);
    assert_non_null(strstr(err, "split"));
    free(err);
    assert_int_equal(vpack_perf_format_parse("x", "conf:1", &f, &err), -EINVAL);
    assert_non_null(strstr(err, "does not start with config:"));
    free(err);
    assert_int_equal(vpack_perf_format_parse("x", "config:0-64", &f, &err), -EINVAL);
    assert_non_null(strstr(err, "bad bit range"));
    free(err);
    assert_int_equal(vpack_perf_format_parse("x", "config:9-3", &f, NULL), -EINVAL);
    assert_int_equal(vpack_perf_format_parse("x", "config:", &f, NULL), -EINVAL);
}

static void test_event_parse(void **state)
{
    struct vpack_perf_format f[3];
    uint64_t config;
    char *err = NULL;
    (void)state;
    assert_int_equal(vpack_perf_format_parse("event", "config:0-7", &f[0], NULL), 0);
    assert_int_equal(vpack_perf_format_parse("umask", "config:8-15", &f[1], NULL), 0);
    assert_int_equal(vpack_perf_format_parse("edge", "config:18", &f[2], NULL), 0);
    /* cstate.c's strings. */
    assert_int_equal(vpack_perf_event_parse("event=0x02", f, 3, &config, &err), 0);
    assert_null(err);
    assert_int_equal(config, 2);
    assert_int_equal(vpack_perf_event_parse("event=0x00", f, 3, &config, NULL), 0);
    assert_int_equal(config, 0);
    /* The ABI document's shapes: several terms, a term alone meaning 1. */
    assert_int_equal(vpack_perf_event_parse("event=0x3c,umask=0x1,edge", f, 3, &config, NULL), 0);
    assert_int_equal(config, 0x3c | 0x100 | 1u << 18);
    assert_int_equal(vpack_perf_event_parse("event=0x1ff", f, 3, &config, &err), -EINVAL);
    assert_non_null(strstr(err, "wider than 8 bits"));
    free(err);
    assert_int_equal(vpack_perf_event_parse("cmask=0x3", f, 3, &config, &err), -EINVAL);
    assert_non_null(strstr(err, "'cmask' has no format"));
    free(err);
    assert_int_equal(vpack_perf_event_parse("event=?", f, 3, &config, &err), -EINVAL);
    assert_non_null(strstr(err, "bad value"));
    free(err);
    assert_int_equal(vpack_perf_event_parse("", f, 3, &config, NULL), -EINVAL);
    assert_int_equal(vpack_perf_event_parse("event=0x1,", f, 3, &config, NULL), -EINVAL);
    assert_int_equal(vpack_perf_event_parse("=1", f, 3, &config, NULL), -EINVAL);
}

static void test_cstate_name(void **state)
{
    char s[8];
    (void)state;
    assert_true(vpack_perf_cstate_name("c6-residency", s, sizeof(s)));
    assert_string_equal(s, "C6");
    assert_true(vpack_perf_cstate_name("c10-residency", s, sizeof(s)));
    assert_string_equal(s, "C10");
    assert_false(vpack_perf_cstate_name("c6-residency.scale", s, sizeof(s)));
    assert_false(vpack_perf_cstate_name("tsc", s, sizeof(s)));
    assert_false(vpack_perf_cstate_name("cx-residency", s, sizeof(s)));
}

static void test_tsc_hz(void **state)
{
    (void)state;
    /* The kernel's cyc2ns for 2.1 GHz: mult = 2^24 * 1e6 / 2100000 kHz, rounded. */
    double hz = vpack_perf_tsc_hz(7989150, 24);
    assert_true(hz > 2.1e9 - 1e3 && hz < 2.1e9 + 1e3);
    assert_true(vpack_perf_tsc_hz(0, 24) == 0);
}

/* ------------------------------------------------------------- fixtures */

/*
 * Two Sapphire Rapids-like packages: package and DRAM energy, a DRAM zone
 * that wraps, package and core C-states summed per package, legacy uncore
 * directories; no psys.
 */
static void test_spr(void **state)
{
    struct run u;
    (void)state;
    assert_int_equal(run_open(&u, "spr-2s", (struct fake){.bad_cpu = -1, .hz = 2e9}), 0);
    /* cstate_pkg: 2 events x CPUs 0,4; cstate_core: 2 events x CPUs 0-7. */
    assert_int_equal(u.f.opened, 4 + 16);
    struct vpack_hostpower *hp = u.hp;
    struct vpack_hostpower_reading r = u.r;

    assert_int_equal(r.nenergy, 2);
    assert_int_equal(r.ndram, 2);
    for (size_t i = 0; i < 2; i++) {
        bool p0 = r.dram[i].package == 0;
        assert_true(r.dram[i].joules == (p0 ? 65712.0 : 4.0));
    }
    assert_false(r.has_psys);
    assert_true(r.tsc_hz == 2e9);

    assert_int_equal(r.npkg_cstate, 4);
    assert_true(cstate(r.pkg_cstate, 4, 0, 0, "C2")->value == 1e9);
    assert_true(cstate(r.pkg_cstate, 4, 1, 0, "C6")->value == 3e9 + 4);
    /* Sorted: package, die, then the state's number. */
    assert_string_equal(r.pkg_cstate[0].state, "C2");
    assert_int_equal(r.pkg_cstate[3].package, 1);
    /* Core C6 of package 0: its cores' readers are CPUs 0-3. */
    assert_int_equal(r.ncore_cstate, 4);
    assert_true(cstate(r.core_cstate, 4, 0, 0, "C6")->value == 4 * 3e9 + 0 + 1 + 2 + 3);
    assert_true(cstate(r.core_cstate, 4, 1, 0, "C1")->value == 4 * 1e9 + 4 + 5 + 6 + 7);

    assert_int_equal(r.nuncore, 2);
    assert_int_equal(r.uncore[0].package, 0);
    assert_int_equal(r.uncore[0].die, 0);
    assert_int_equal(r.uncore[0].domain, -1);
    assert_true(r.uncore[0].current == 1.8e9);
    assert_true(r.uncore[1].current == 8e8);
    assert_true(r.uncore[1].initial_max == 2.5e9);

    assert_true(avail(&r, "rapl_package")->available);
    assert_true(avail(&r, "rapl_dram")->available);
    assert_false(avail(&r, "rapl_psys")->available);
    assert_true(avail(&r, "cstate_pkg")->available);
    assert_true(avail(&r, "cstate_core")->available);
    assert_true(avail(&r, "uncore_frequency")->available);
    assert_true(avail(&r, "cpuidle")->available);
    assert_string_equal(vpack_hostpower_why(hp, VPACK_HW_RAPL_PSYS), "no RAPL \"psys\" zone");

    char *t = render(&r);
    assert_line(t, "vpack_package_energy_joules_total{package=\"0\"} 123.456789");
    assert_line(t, "# TYPE vpack_dram_energy_joules_total counter");
    assert_line(t, "vpack_dram_energy_joules_total{package=\"1\"} 4");
    assert_null(strstr(t, "vpack_platform_energy"));
    assert_line(t, "# TYPE vpack_package_cstate_residency_seconds_total counter");
    assert_line(t, "vpack_package_cstate_residency_seconds_total{package=\"0\",die=\"0\",state=\"C6\"} 1.5");
    assert_line(t, "vpack_core_cstate_residency_seconds_total{package=\"0\",state=\"C6\"} 6.000000003");
    assert_null(strstr(t, "tsc_cycles"));
    assert_line(t, "vpack_uncore_frequency_hertz{package=\"0\",die=\"0\"} 1800000000");
    assert_line(t, "vpack_uncore_frequency_min_hertz{package=\"1\",die=\"0\"} 800000000");
    assert_line(t, "vpack_uncore_frequency_initial_max_hertz{package=\"1\",die=\"0\"} 2500000000");
    assert_line(t, "vpack_hardware_source_available{source=\"rapl_dram\"} 1");
    assert_line(t, "vpack_hardware_source_available{source=\"rapl_psys\"} 0");
    free(t);
    vpack_hostpower_reading_clear(&u.r);
    assert_null(u.r.dram);

    /* 65712000000 -> 1000000 of a 65712999613 uJ range: +1999613 uJ, not a restart. */
    put_file(u.root, "sys/class/powercap/intel-rapl:0:0/energy_uj", "1000000\n");
    u.f.bump = 2000000000; /* one second at 2 GHz on every counter */
    assert_int_equal(vpack_hostpower_read(hp, &u.r), 0);
    for (size_t i = 0; i < u.r.ndram; i++)
        if (u.r.dram[i].package == 0)
            assert_true(u.r.dram[i].joules == (65712000000.0 + 1999613) / 1e6);
    assert_true(cstate(u.r.pkg_cstate, 4, 0, 0, "C2")->value == 3e9);
    run_close(&u);
}

/*
 * One Granite Rapids-like package of two dies: cstate_die (the name
 * cstate.c gives cstate_pkg then), no cstate_core, TPMI uncore directories
 * taken over the package ones, psys, no DRAM zone.
 */
static void test_gnr(void **state)
{
    struct run u;
    (void)state;
    assert_int_equal(run_open(&u, "gnr-tpmi", (struct fake){.bad_cpu = -1, .hz = 0}), 0);
    struct vpack_hostpower *hp = u.hp;
    struct vpack_hostpower_reading r = u.r;
    assert_int_equal(r.npkg_cstate, 4);
    assert_true(cstate(r.pkg_cstate, 4, 0, 1, "C6")->value == 3e9 + 2);
    assert_int_equal(r.ncore_cstate, 0);
    assert_false(avail(&r, "cstate_core")->available);
    assert_non_null(strstr(vpack_hostpower_why(hp, VPACK_HW_CSTATE_CORE), "no cstate_core PMU"));
    assert_true(r.has_psys);
    assert_true(r.psys_joules == 7.0);
    assert_int_equal(r.ndram, 0);
    assert_false(avail(&r, "rapl_dram")->available);

    assert_int_equal(r.nuncore, 4);
    assert_int_equal(r.uncore[3].die, 1);
    assert_int_equal(r.uncore[3].domain, 1);
    assert_int_equal(r.uncore[3].cluster, 1);
    assert_true(r.uncore[3].current == 1.3e9);

    char *t = render(&r);
    /* No TSC rate: the cycles, under a name that says so. */
    assert_line(t, "# TYPE vpack_package_cstate_residency_tsc_cycles_total counter");
    assert_line(t, "vpack_package_cstate_residency_tsc_cycles_total{package=\"0\",die=\"1\",state=\"C6\"} 3000000002");
    assert_null(strstr(t, "residency_seconds_total"));
    assert_null(strstr(t, "vpack_core_cstate"));
    assert_line(t, "vpack_platform_energy_joules_total 7");
    assert_null(strstr(t, "vpack_dram_energy"));
    assert_line(t, "vpack_uncore_frequency_hertz{package=\"0\",die=\"1\",domain=\"1\",cluster=\"1\"} 1300000000");
    assert_null(strstr(t, "vpack_uncore_frequency_hertz{package=\"0\",die=\"0\"}"));
    assert_line(t, "vpack_hardware_source_available{source=\"cstate_core\"} 0");
    free(t);
    run_close(&u);
}

/* A tree with none of it: every source absent, each with its reason, no family but the gauge. */
static void test_absent(void **state)
{
    struct run u;
    char line[4096];
    (void)state;
    assert_int_equal(run_open(&u, NULL, (struct fake){.bad_cpu = -1, .hz = 2e9}), -ENOENT);
    assert_int_equal(u.f.opened, 0);
    struct vpack_hostpower *hp = u.hp;
    struct vpack_hostpower_reading r = u.r;
    assert_int_equal(r.navailable, VPACK_HW_N);
    for (size_t i = 0; i < r.navailable; i++)
        assert_false(r.available[i].available);
    assert_non_null(strstr(vpack_hostpower_why(hp, VPACK_HW_RAPL_PACKAGE), "no /sys/class/powercap"));
    assert_non_null(strstr(vpack_hostpower_why(hp, VPACK_HW_CSTATE_PKG),
                           "no cstate_pkg or cstate_die PMU"));
    assert_non_null(strstr(vpack_hostpower_why(hp, VPACK_HW_UNCORE),
                           "no intel_uncore_frequency driver"));
    char *t = render(&r);
    for (const char *fam = "vpack_dram_energy\0vpack_platform_energy\0vpack_package_cstate\0"
                           "vpack_core_cstate\0vpack_uncore\0vpack_package_energy\0";
         *fam; fam += strlen(fam) + 1)
        if (strstr(t, fam))
            fail_msg("%s rendered without its source:\n%s", fam, t);
    assert_line(t, "vpack_hardware_source_available{source=\"cstate_pkg\"} 0");
    assert_line(t, "vpack_hardware_source_available{source=\"uncore_frequency\"} 0");
    free(t);
    vpack_hostpower_summary(hp, line, sizeof(line));
    assert_non_null(strstr(line, "hardware counters: available: none; not available: cpuidle: "));
    assert_non_null(strstr(line, "; cstate_core: no cstate_core PMU"));
    run_close(&u);
}

/*
 * Sources there but unreadable: perf_event_open refused (no CAP_PERFMON),
 * a RAPL energy_uj that cannot be read; a fixture root without ops
 * (vpack_hostpower_new() on a root that is not "/") opens no counter.
 */
static void test_unreadable(void **state)
{
    struct fake f = {.open_err = -EACCES, .bad_cpu = -1};
    struct vpack_perf_ops ops = fake_ops(&f);
    struct vpack_hostpower *hp = NULL;
    struct vpack_hostpower_reading r;
    char *root = copy_fixture("spr-2s"), path[4096], line[4096];
    (void)state;
    snprintf(path, sizeof(path), "%s/sys/class/powercap/intel-rapl:1/energy_uj", root);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkdir(path, 0755), 0); /* read(2) fails: EISDIR (root reads any mode) */
    assert_int_equal(vpack_hostpower_new_ops(root, &ops, &hp), 0);
    assert_int_equal(vpack_hostpower_read(hp, &r), 0);
    assert_int_equal(r.npkg_cstate + r.ncore_cstate, 0);
    assert_non_null(strstr(vpack_hostpower_why(hp, VPACK_HW_CSTATE_PKG),
                           "cstate_pkg: permission denied (perf_event_open needs CAP_PERFMON"));
    assert_non_null(strstr(vpack_hostpower_why(hp, VPACK_HW_CSTATE_CORE), "cstate_core: permission denied"));
    /* Package 1's zone unreadable, package 0's read: the source is there, package 1 is not. */
    assert_int_equal(r.nenergy, 1);
    assert_int_equal(r.energy[0].package, 0);
    assert_true(avail(&r, "rapl_package")->available);
    vpack_hostpower_reading_clear(&r);
    vpack_hostpower_free(hp);

    /* Only one package zone, and unreadable: the reason is the error. */
    snprintf(path, sizeof(path), "rm -rf '%s/sys/class/powercap/intel-rapl:0'", root);
    assert_int_equal(system(path), 0);
    assert_int_equal(vpack_hostpower_new(root, &hp), 0);
    assert_int_equal(vpack_hostpower_read(hp, &r), 0);
    assert_false(avail(&r, "rapl_package")->available);
    assert_string_equal(vpack_hostpower_why(hp, VPACK_HW_RAPL_PACKAGE), "energy_uj: Is a directory");
    assert_non_null(strstr(vpack_hostpower_why(hp, VPACK_HW_CSTATE_PKG), "root is not /"));
    vpack_hostpower_summary(hp, line, sizeof(line));
    assert_non_null(strstr(line, "rapl_package: energy_uj: Is a directory"));
    assert_non_null(strstr(line, "available: cpuidle, rapl_dram, uncore_frequency;"));
    vpack_hostpower_reading_clear(&r);
    vpack_hostpower_free(hp);
    remove_root(root);
}

/* A counter that cannot be read leaves its package's entry out, not a smaller sum. */
static void test_read_error(void **state)
{
    struct run u;
    (void)state;
    assert_int_equal(run_open(&u, "spr-2s", (struct fake){.bad_cpu = 5, .hz = 2e9}), 0);
    assert_int_equal(u.r.npkg_cstate, 4);  /* the package readers are CPUs 0 and 4 */
    assert_int_equal(u.r.ncore_cstate, 2); /* package 1's cores include CPU 5 */
    assert_int_equal(u.r.core_cstate[0].package, 0);
    assert_int_equal(u.r.core_cstate[1].package, 0);
    run_close(&u);
}

/* ------------------------------------------------------------- live */

/*
 * This host's own /sys through the real perf_event_open(2): without a
 * C-state PMU (any virtual machine: cstate.c does not load under a
 * hypervisor) both kinds say why and nothing is printed, over several
 * readings; with one, what opened is what is read.
 */
static void test_live_root(void **state)
{
    struct vpack_hostpower *hp = NULL;
    struct vpack_hostpower_reading r;
    char errpath[] = "/tmp/vpack-hw-err-XXXXXX";
    (void)state;
    bool has_pkg = access("/sys/bus/event_source/devices/cstate_pkg", F_OK) == 0 ||
                   access("/sys/bus/event_source/devices/cstate_die", F_OK) == 0;
    int errfd = mkstemp(errpath), saved = dup(2);
    assert_true(errfd >= 0 && saved >= 0);
    fflush(stderr);
    dup2(errfd, 2);
    assert_int_equal(vpack_hostpower_new("/", &hp), 0);
    for (int i = 0; i < 3; i++) {
        vpack_hostpower_read(hp, &r);
        if (has_pkg != avail(&r, "cstate_pkg")->available)
            print_message("cstate_pkg PMU present but not read: %s\n",
                          vpack_hostpower_why(hp, VPACK_HW_CSTATE_PKG));
        if (!has_pkg) {
            assert_false(avail(&r, "cstate_pkg")->available);
            assert_int_equal(r.npkg_cstate, 0);
        } else if (avail(&r, "cstate_pkg")->available) {
            assert_true(r.npkg_cstate > 0);
        }
        vpack_hostpower_reading_clear(&r);
    }
    vpack_hostpower_free(hp);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    struct stat st;
    assert_int_equal(fstat(errfd, &st), 0);
    close(errfd);
    unlink(errpath);
    assert_int_equal(st.st_size, 0); /* no error spam, not even one line */
    if (!has_pkg)
        print_message("no C-state PMU here: cstate_pkg and cstate_core not available\n");
}

/*
 * The real perf_event_open(2), read(2) and mmap(2) path on a tree that
 * names the live kernel's msr PMU (arch/x86/events/msr.c: its "tsc"
 * event, config 0, counts the TSC) as a cstate_pkg with one event
 * "c0-residency": it must open on CPU 0, and its count must grow.
 */
static void test_live_perf(void **state)
{
    char type[32];
    FILE *fp = fopen("/sys/bus/event_source/devices/msr/type", "r");
    (void)state;
    if (!fp || !fgets(type, sizeof(type), fp)) {
        if (fp)
            fclose(fp);
        print_message("no msr PMU on this host: the live perf path is not exercised\n");
        skip();
    }
    fclose(fp);
    char *root = copy_fixture("spr-2s");
    put_file(root, "sys/bus/event_source/devices/cstate_pkg/type", type);
    put_file(root, "sys/bus/event_source/devices/cstate_pkg/cpumask", "0\n");
    char cmd[4200];
    snprintf(cmd, sizeof(cmd),
             "cd '%s/sys/bus/event_source/devices' && rm -rf cstate_core cstate_pkg/events/* && "
             "echo event=0x00 > cstate_pkg/events/c0-residency",
             root);
    assert_int_equal(system(cmd), 0);
    struct vpack_hostpower *hp = NULL;
    struct vpack_hostpower_reading a, b;
    assert_int_equal(vpack_hostpower_new_ops(root, &vpack_perf_ops_live, &hp), 0);
    assert_int_equal(vpack_hostpower_read(hp, &a), 0);
    const char *why = vpack_hostpower_why(hp, VPACK_HW_CSTATE_PKG);
    if (why)
        fail_msg("the msr PMU's tsc event did not open as a counter: %s", why);
    usleep(20000);
    assert_int_equal(vpack_hostpower_read(hp, &b), 0);
    assert_int_equal(a.npkg_cstate, 1);
    assert_int_equal(b.npkg_cstate, 1);
    assert_string_equal(a.pkg_cstate[0].state, "C0");
    double cycles = b.pkg_cstate[0].value - a.pkg_cstate[0].value;
    print_message("msr/tsc on CPU 0: %.0f cycles in 20 ms; kernel TSC rate %.6g Hz\n", cycles,
                  b.tsc_hz);
    assert_true(cycles > 0);
    /* With a rate, 20 ms of TSC reads as at least 20 ms; a busy host may add seconds, not 1000x. */
    if (b.tsc_hz > 0)
        assert_true(cycles / b.tsc_hz >= 0.019 && cycles / b.tsc_hz < 10.0);
    vpack_hostpower_reading_clear(&a);
    vpack_hostpower_reading_clear(&b);
    vpack_hostpower_free(hp);
    remove_root(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_parse), cmocka_unit_test(test_event_parse),
        cmocka_unit_test(test_cstate_name),  cmocka_unit_test(test_tsc_hz),
        cmocka_unit_test(test_spr),          cmocka_unit_test(test_gnr),
        cmocka_unit_test(test_absent),       cmocka_unit_test(test_unreadable),
        cmocka_unit_test(test_read_error),   cmocka_unit_test(test_live_root),
        cmocka_unit_test(test_live_perf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
