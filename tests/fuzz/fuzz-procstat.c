// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the /proc, cgroup and uevent readers (lib/sys/):
 * /proc/stat, /proc/PID/task/TID/stat, cgroup v1 memory.numa_stat,
 * /proc/PID/cgroup and kernel uevent datagrams. Every input goes to all
 * five parsers (they read different lines of the same kind of text).
 * Checked on every input:
 *
 *  - /proc/stat: on success one entry per "cpuN" line, in file order, with
 *    that line's id, busy <= total, and the busy fraction between any two
 *    readings is -1 or within 0..1; on failure -EINVAL and nothing returned;
 *  - task stat: success only when there is a ')' followed by the fields;
 *  - schedstat: success only for three numbers of digits and one optional
 *    newline; on failure the output is untouched;
 *  - numa_stat: at most max entries, node ids below 2^20, every share in
 *    0..1 and the shares summing to 1; -EINVAL or -ENODATA otherwise;
 *  - /proc/PID/cgroup: NULL, or an absolute path without newline or NUL
 *    that stands in the text right after a ':' (for "memory", "cpuset" and
 *    "cpu", the last a prefix of the other controllers' names);
 *  - uevent: 1 only for "online@" or "offline@" + a CPU's devpath before the
 *    first NUL, with the matching state and a CPU number >= 0; 0 or -EINVAL
 *    otherwise, -EINVAL exactly when the header has no '@';
 *  - perf PMU text (lib/sys/perf-event.c), up to the first NUL: a format
 *    term parsed is a bit range within 0..63; an event parsed with the
 *    terms event (config:0-7), umask (config:8-15) and edge (config:18)
 *    sets no bit outside them; a failure is -EINVAL or -EOPNOTSUPP with a
 *    message naming it; a C-state name is "C" and digits.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vpack/cgroupfs.h"
#include "vpack/perf-event.h"
#include "vpack/proc.h"
#include "vpack/qemu-threads.h"
#include "vpack/uevent.h"
#include "vpack/snapshot.h"

#define CHECK(cond) ((cond) ? (void)0 : abort())

/* The "cpuN" lines of the text, as the parser must see them. */
static unsigned count_cpu_lines(const char *buf, size_t len, int *ids, unsigned max)
{
    unsigned n = 0;
    const char *p = buf, *end = buf + len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        if (eol - p > 3 && !memcmp(p, "cpu", 3) && isdigit((unsigned char)p[3])) {
            long id = 0;
            for (const char *q = p + 3; q < eol && isdigit((unsigned char)*q) && id <= 1 << 21; q++)
                id = id * 10 + (*q - '0');
            if (n < max)
                ids[n] = (int)id;
            n++;
        }
        p = eol + 1;
    }
    return n;
}

static void check_procstat(const char *buf, size_t len)
{
    struct vpack_cpu_times *t = NULL;
    unsigned n = 12345;
    int r = vpack_procstat_parse(buf, len, &t, &n);
    if (r < 0) {
        CHECK(r == -EINVAL || r == -ENOMEM);
        CHECK(n == 12345);
        return;
    }
    int ids[4096];
    unsigned lines = count_cpu_lines(buf, len, ids, 4096);
    CHECK(n == lines);
    CHECK(n == 0 || t != NULL);
    for (unsigned i = 0; i < n; i++) {
        CHECK(t[i].cpu >= 0 && t[i].cpu <= 1 << 20);
        CHECK(i >= 4096 || t[i].cpu == ids[i]);
        CHECK(t[i].busy <= t[i].total);
        if (i > 0) {
            double b = vpack_cpu_times_busy(&t[i - 1], &t[i]);
            CHECK(b == -1 || (b >= 0 && b <= 1));
        }
    }
    free(t);
}

static void check_task_stat(const char *buf, size_t len)
{
    uint64_t ticks = 42;
    int r = vpack_task_stat_parse(buf, len, &ticks);
    if (r < 0) {
        CHECK(r == -EINVAL && ticks == 42);
        return;
    }
    CHECK(r == 0 && memchr(buf, ')', len) != NULL);
    /* The start time (field 22) is further on: found only where utime was. */
    uint64_t start = 42;
    r = vpack_task_stat_start(buf, len, &start);
    CHECK(r == 0 || (r == -EINVAL && start == 42));
    /* vpackd's own process figures: where they are found, utime and stime are those above
     * and the start time the one vpack_task_stat_start() found. */
    struct vpack_proc_usage u = {.rss = 42};
    r = vpack_proc_usage_parse(buf, len, &u);
    CHECK(r == 0 || (r == -EINVAL && u.rss == 42));
    if (r == 0) {
        CHECK(u.utime + u.stime == ticks || ticks == UINT64_MAX);
        CHECK(u.starttime == start);
    }
}

/* /proc/stat's btime and /proc/PID/limits' open files: an answer or an error, never more. */
static void check_process_text(const char *buf, size_t len)
{
    uint64_t v = 42;
    int r = vpack_procstat_btime(buf, len, &v);
    CHECK(r == 0 || ((r == -ENOENT || r == -EINVAL) && v == 42));
    v = 42;
    r = vpack_proc_limits_open_files(buf, len, &v);
    CHECK(r == 0 || ((r == -ENOENT || r == -EINVAL) && v == 42));
}

static void check_numastat(const char *buf, size_t len)
{
    struct vpack_mem_share out[17];
    unsigned n = 999;
    uint64_t bytes = 7;
    out[16].node = -7;
    int r = vpack_numastat_parse(buf, len, 4096, out, 16, &n, &bytes);
    CHECK(out[16].node == -7);
    if (r < 0) {
        CHECK((r == -EINVAL || r == -ENODATA) && n == 999 && bytes == 7);
        return;
    }
    CHECK((r == 1 || r == 2) && n >= 1 && n <= 16 && bytes > 0);
    double sum = 0;
    for (unsigned i = 0; i < n; i++) {
        CHECK(out[i].node >= 0 && out[i].node < 1 << 20);
        CHECK(out[i].share >= 0 && out[i].share <= 1);
        sum += out[i].share;
    }
    CHECK(fabs(sum - 1) < 1e-9);
}

static void check_proc_cgroup(const char *buf, size_t len)
{
    /* NULL: cgroup v2's "0::" line. */
    static const char *const ctl[] = {"memory", "cpuset", "cpu", NULL};
    for (unsigned i = 0; i < sizeof(ctl) / sizeof(ctl[0]); i++) {
        char *p = vpack_proc_cgroup_parse(buf, len, ctl[i]);
        if (!p)
            continue;
        size_t pl = strlen(p);
        CHECK(pl >= 1 && pl <= len && p[0] == '/' && !strchr(p, '\n'));
        /* It is in the text, after a ':' */
        bool found = false;
        for (const char *q = buf; !found && (q = memchr(q, ':', len - (size_t)(q - buf))); q++)
            found = (size_t)(buf + len - (q + 1)) >= pl && !memcmp(q + 1, p, pl);
        CHECK(found);
        free(p);
    }
}

/* Each mount point found is an absolute path with no NUL, no longer than the text. */
static void check_mounts(const char *buf, size_t len)
{
    struct vpack_cgroup_mounts m;
    if (vpack_cgroup_mounts_parse(buf, len, &m) < 0)
        return;
    const char *const found[] = {m.cpuset, m.memory, m.unified};
    for (unsigned i = 0; i < 3; i++)
        CHECK(!found[i] || (found[i][0] == '/' && strlen(found[i]) <= len));
    vpack_cgroup_mounts_clear(&m);
}

/* The text as a thread name (cut at VPACK_COMM_MAX bytes and at a NUL, as comm is). */
static void check_qemu_thread(const char *buf, size_t len)
{
    static const unsigned ids[] = {1, 1000, 10000};
    char comm[VPACK_COMM_MAX + 1];
    int vcpu = -7;
    snprintf(comm, sizeof(comm), "%.*s", (int)(len < VPACK_COMM_MAX ? len : VPACK_COMM_MAX), buf);
    enum vpack_qemu_thread k = vpack_qemu_thread_kind(comm, &vcpu);
    CHECK(k == VPACK_QEMU_VCPU ? vcpu >= -1 : vcpu == -7);
    int i = vpack_qemu_iothread_match(comm, ids, 3);
    CHECK(i >= -2 && i < 3);
    CHECK(i < 0 || k == VPACK_QEMU_IOTHREAD);
}

static void check_schedstat(const char *buf, size_t len)
{
    struct vpack_schedstat s = {7, 7, 7};
    int r = vpack_schedstat_parse(buf, len, &s);
    unsigned digits_runs = 0;
    bool in = false, other = false;
    for (size_t i = 0; i < len; i++) {
        bool d = isdigit((unsigned char)buf[i]);
        digits_runs += d && !in;
        in = d;
        other |= !d && buf[i] != ' ' && buf[i] != '\t' && !(buf[i] == '\n' && i == len - 1);
    }
    if (r == 0)
        CHECK(digits_runs == 3 && !other);
    else
        CHECK(r == -EINVAL && s.run_ns == 7 && s.wait_ns == 7 && s.slices == 7);
}

static void check_uevent(const char *buf, size_t len)
{
    int cpu = -7, online = -7;
    int r = vpack_uevent_parse_cpu(buf, len, &cpu, &online);
    const char *nul = memchr(buf, '\0', len);
    size_t hl = nul ? (size_t)(nul - buf) : len;
    bool has_at = memchr(buf, '@', hl) != NULL;
    CHECK(r == -EINVAL ? !has_at : has_at);
    if (r != 1) {
        CHECK((r == 0 || r == -EINVAL) && cpu == -7 && online == -7);
        return;
    }
    CHECK(cpu >= 0 && (online == 0 || online == 1));
    const char *want = online ? "online@/devices/system/cpu/cpu" : "offline@/devices/system/cpu/cpu";
    CHECK(hl >= strlen(want) && !memcmp(buf, want, strlen(want)));
}

static void check_perf_event(const char *buf, size_t len)
{
    char *text = strndup(buf, len), *err = NULL, state[8];
    struct vpack_perf_format f[3], one;
    uint64_t config;
    if (!text)
        return;
    int r = vpack_perf_format_parse("x", text, &one, &err);
    CHECK(r == 0 ? !err && one.lo <= one.hi && one.hi <= 63 : (r == -EINVAL || r == -EOPNOTSUPP));
    free(err);
    CHECK(vpack_perf_format_parse("event", "config:0-7", &f[0], NULL) == 0);
    CHECK(vpack_perf_format_parse("umask", "config:8-15", &f[1], NULL) == 0);
    CHECK(vpack_perf_format_parse("edge", "config:18", &f[2], NULL) == 0);
    r = vpack_perf_event_parse(text, f, 3, &config, &err);
    CHECK(r == 0 ? !err && !(config & ~(uint64_t)0x4ffff) : r == -EINVAL);
    free(err);
    if (vpack_perf_cstate_name(text, state, sizeof(state)))
        CHECK(state[0] == 'C' && isdigit((unsigned char)state[1]));
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A heap copy of exactly size bytes: ASan sees any read past the end. */
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    check_procstat(buf, size);
    check_task_stat(buf, size);
    check_process_text(buf, size);
    check_schedstat(buf, size);
    check_numastat(buf, size);
    check_proc_cgroup(buf, size);
    check_mounts(buf, size);
    check_qemu_thread(buf, size);
    check_uevent(buf, size);
    check_perf_event(buf, size);
    free(buf);
    return 0;
}
