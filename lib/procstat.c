// SPDX-License-Identifier: MIT
#include "vpack/procstat.h"

#include "vpack/snapshot.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads an unsigned decimal at *p (after blanks); -EINVAL if none or above UINT64_MAX. */
static int read_u64(const char **p, const char *end, uint64_t *v)
{
    while (*p < end && (**p == ' ' || **p == '\t'))
        (*p)++;
    if (*p >= end || !isdigit((unsigned char)**p))
        return -EINVAL;
    uint64_t x = 0;
    while (*p < end && isdigit((unsigned char)**p)) {
        unsigned d = (unsigned)(**p - '0');
        if (x > (UINT64_MAX - d) / 10)
            return -EINVAL;
        x = x * 10 + d;
        (*p)++;
    }
    *v = x;
    return 0;
}

/* a + b, stopping at UINT64_MAX: counters near the top must not wrap to small. */
static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

int vpack_procstat_parse(const char *buf, size_t len, struct vpack_cpu_times **out, unsigned *n)
{
    const char *p = buf, *end = buf + len;
    struct vpack_cpu_times *arr = NULL;
    unsigned cnt = 0, cap = 0;
    int ret = -EINVAL;

    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        if (eol - p > 3 && !memcmp(p, "cpu", 3) && isdigit((unsigned char)p[3])) {
            const char *q = p + 3;
            uint64_t id, f[8] = {0};
            unsigned nf = 0;
            if (read_u64(&q, eol, &id) < 0 || id > 1u << 20)
                goto cleanup;
            /* user nice system idle iowait irq softirq steal [guest guest_nice] */
            while (nf < 8 && read_u64(&q, eol, &f[nf]) == 0)
                nf++;
            if (nf < 4)
                goto cleanup;
            if (cnt == cap) {
                unsigned ncap = cap ? cap * 2 : 64;
                struct vpack_cpu_times *t = realloc(arr, ncap * sizeof(*t));
                if (!t) {
                    ret = -ENOMEM;
                    goto cleanup;
                }
                arr = t;
                cap = ncap;
            }
            uint64_t idle = add_sat(f[3], f[4]);
            uint64_t busy = 0;
            for (int k = 0; k < 8; k++)
                if (k != 3 && k != 4)
                    busy = add_sat(busy, f[k]);
            arr[cnt].cpu = (int)id;
            arr[cnt].busy = busy;
            arr[cnt].total = add_sat(busy, idle);
            cnt++;
        }
        p = eol + 1;
    }
    *out = arr;
    *n = cnt;
    arr = NULL;
    ret = 0;
cleanup:
    free(arr);
    return ret;
}

double vpack_cpu_times_busy(const struct vpack_cpu_times *before, const struct vpack_cpu_times *after)
{
    if (after->total <= before->total || after->busy < before->busy)
        return -1;
    double b = (double)(after->busy - before->busy) / (double)(after->total - before->total);
    return b > 1 ? 1 : b;
}

int vpack_numastat_parse(const char *buf, size_t len, struct vpack_mem_share *out, unsigned max,
                         unsigned *n)
{
    const char *p = buf, *end = buf + len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        if (eol - p > 6 && !memcmp(p, "total=", 6)) {
            const char *q = p + 6;
            uint64_t total, pages;
            unsigned cnt = 0;
            double sum = 0;
            if (read_u64(&q, eol, &total) < 0)
                return -EINVAL;
            while (q < eol) {
                while (q < eol && *q == ' ')
                    q++;
                if (q >= eol)
                    break;
                uint64_t node;
                if (*q != 'N' || (q++, read_u64(&q, eol, &node) < 0) || q >= eol || *q != '=')
                    return -EINVAL;
                q++;
                if (read_u64(&q, eol, &pages) < 0)
                    return -EINVAL;
                if (cnt < max && node < 1u << 20) {
                    out[cnt].node = (int)node;
                    out[cnt].share = (double)pages;
                    sum += (double)pages;
                    cnt++;
                }
            }
            if (total == 0 || sum <= 0)
                return -ENODATA;
            for (unsigned i = 0; i < cnt; i++)
                out[i].share /= sum;
            *n = cnt;
            return 0;
        }
        p = eol + 1;
    }
    return -EINVAL;
}

int vpack_task_stat_parse(const char *buf, size_t len, uint64_t *ticks)
{
    const char *end = buf + len, *p = NULL;
    /* The name ends at the last ')': "1234 (CPU 0/TCG) S 1 ...". */
    for (const char *q = buf; q < end; q++)
        if (*q == ')')
            p = q;
    if (!p)
        return -EINVAL;
    p++;
    /* Field 3 (state) is next; utime is field 14, stime field 15. */
    for (int field = 3; field < 14; field++) {
        while (p < end && *p == ' ')
            p++;
        while (p < end && *p != ' ')
            p++;
        if (p >= end)
            return -EINVAL;
    }
    uint64_t utime, stime;
    if (read_u64(&p, end, &utime) < 0 || read_u64(&p, end, &stime) < 0)
        return -EINVAL;
    *ticks = add_sat(utime, stime);
    return 0;
}

int vpack_uevent_parse_cpu(const char *buf, size_t len, int *cpu, int *online)
{
    const char *at = memchr(buf, '@', len);
    const char *nul = memchr(buf, '\0', len);
    size_t hl = nul ? (size_t)(nul - buf) : len;
    int id;
    char tail;

    if (!at || (size_t)(at - buf) >= hl)
        return -EINVAL; /* libudev's own messages start "libudev"; the kernel's have '@' */
    size_t alen = (size_t)(at - buf);
    int on;
    if (alen == 6 && !memcmp(buf, "online", 6))
        on = 1;
    else if (alen == 7 && !memcmp(buf, "offline", 7))
        on = 0;
    else
        return 0;
    char devpath[256];
    size_t dl = hl - alen - 1;
    if (dl >= sizeof(devpath))
        return 0;
    memcpy(devpath, at + 1, dl);
    devpath[dl] = '\0';
    if (sscanf(devpath, "/devices/system/cpu/cpu%d%c", &id, &tail) != 1 || id < 0)
        return 0;
    *cpu = id;
    *online = on;
    return 1;
}

char *vpack_proc_cgroup_parse(const char *buf, size_t len, const char *controller)
{
    const char *p = buf, *end = buf + len;
    size_t cl = strlen(controller);
    if (!cl)
        return NULL;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        /* "4:memory:/machine/...": id, a comma-separated controller list, path */
        const char *c1 = memchr(p, ':', (size_t)(eol - p));
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) : NULL;
        if (c2) {
            for (const char *t = c1 + 1; t < c2;) {
                const char *comma = memchr(t, ',', (size_t)(c2 - t));
                const char *te = comma ? comma : c2;
                if ((size_t)(te - t) == cl && !memcmp(t, controller, cl)) {
                    size_t pl = (size_t)(eol - c2 - 1);
                    /* A path is absolute and has no NUL in it. */
                    if (pl == 0 || c2[1] != '/' || memchr(c2 + 1, '\0', pl))
                        return NULL;
                    return strndup(c2 + 1, pl);
                }
                t = te + 1;
            }
        }
        p = eol + 1;
    }
    return NULL;
}
