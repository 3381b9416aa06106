// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the /proc and cgroup file readers (lib/procstat.c):
 * /proc/stat, /proc/PID/task/TID/stat and cgroup v1 memory.numa_stat. Every
 * input goes to all three parsers (they read different lines of the same
 * kind of text). Checked on every input:
 *
 *  - /proc/stat: on success one entry per "cpuN" line, in file order, with
 *    that line's id, busy <= total, and the busy fraction between any two
 *    readings is -1 or within 0..1; on failure -EINVAL and nothing returned;
 *  - task stat: success only when there is a ')' followed by the fields;
 *  - numa_stat: at most max entries, node ids below 2^20, every share in
 *    0..1 and the shares summing to 1; -EINVAL or -ENODATA otherwise.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vpack/procstat.h"
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
}

static void check_numastat(const char *buf, size_t len)
{
    struct vpack_mem_share out[17];
    unsigned n = 999;
    out[16].node = -7;
    int r = vpack_numastat_parse(buf, len, out, 16, &n);
    CHECK(out[16].node == -7);
    if (r < 0) {
        CHECK((r == -EINVAL || r == -ENODATA) && n == 999);
        return;
    }
    CHECK(r == 0 && n >= 1 && n <= 16);
    double sum = 0;
    for (unsigned i = 0; i < n; i++) {
        CHECK(out[i].node >= 0 && out[i].node < 1 << 20);
        CHECK(out[i].share >= 0 && out[i].share <= 1);
        sum += out[i].share;
    }
    CHECK(fabs(sum - 1) < 1e-9);
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
    check_numastat(buf, size);
    free(buf);
    return 0;
}
