// SPDX-License-Identifier: MIT
/*
 * The kernel's /proc text about CPUs and threads, taken as text, not read
 * from the files: the per-CPU lines of /proc/stat and its boot time, a
 * task's stat (CPU time, start time, memory) and schedstat, a process's
 * open-file limit, and the rate of a counter read over a gap.
 */
#include "vpack/proc.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sys-priv.h"

/* sys-priv.h */
int vpack__read_u64(const char **p, const char *end, uint64_t *v)
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
            if (vpack__read_u64(&q, eol, &id) < 0 || id > 1u << 20)
                goto cleanup;
            /* user nice system idle iowait irq softirq steal [guest guest_nice] */
            while (nf < 8 && vpack__read_u64(&q, eol, &f[nf]) == 0)
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

double vpack_gap_rate(double ns, double prev, double dt, double last)
{
    if (!(dt > 0))
        return 0;
    if (last > 0 && dt > last) {
        double rest = ns - prev * (dt - last);
        return rest > 0 ? rest / last : 0;
    }
    return ns / dt;
}

/*
 * Points *p at the blank before field (3 or more) of a /proc/PID/stat text:
 * the name (field 2) ends at the last ')', "1234 (CPU 0/TCG) S 1 ...".
 */
static int stat_field(const char *buf, const char *end, int field, const char **p)
{
    const char *q = NULL;
    for (const char *c = buf; c < end; c++)
        if (*c == ')')
            q = c;
    if (!q)
        return -EINVAL;
    q++;
    for (int f = 3; f < field; f++) {
        while (q < end && *q == ' ')
            q++;
        while (q < end && *q != ' ')
            q++;
        if (q >= end)
            return -EINVAL;
    }
    *p = q;
    return 0;
}

int vpack_task_stat_parse(const char *buf, size_t len, uint64_t *ticks)
{
    const char *end = buf + len, *p;
    uint64_t utime, stime;
    /* utime is field 14, stime field 15. */
    if (stat_field(buf, end, 14, &p) < 0 || vpack__read_u64(&p, end, &utime) < 0 ||
        vpack__read_u64(&p, end, &stime) < 0)
        return -EINVAL;
    *ticks = add_sat(utime, stime);
    return 0;
}

int vpack_schedstat_parse(const char *buf, size_t len, struct vpack_schedstat *out)
{
    const char *p = buf, *end = buf + len;
    struct vpack_schedstat s;
    if (vpack__read_u64(&p, end, &s.run_ns) < 0 || vpack__read_u64(&p, end, &s.wait_ns) < 0 ||
        vpack__read_u64(&p, end, &s.slices) < 0)
        return -EINVAL;
    if (p < end && *p == '\n')
        p++;
    if (p != end)
        return -EINVAL;
    *out = s;
    return 0;
}

int vpack_task_stat_start(const char *buf, size_t len, uint64_t *start)
{
    const char *end = buf + len, *p;
    /* starttime is field 22. */
    if (stat_field(buf, end, 22, &p) < 0 || vpack__read_u64(&p, end, start) < 0)
        return -EINVAL;
    return 0;
}

int vpack_proc_usage_parse(const char *buf, size_t len, struct vpack_proc_usage *out)
{
    const char *end = buf + len, *p;
    struct vpack_proc_usage u;
    uint64_t skip;
    /* utime 14, stime 15, (cutime, cstime, priority, nice, num_threads, itrealvalue: 16-21,
     * some of them signed), starttime 22, vsize 23, rss 24. */
    if (stat_field(buf, end, 14, &p) < 0 || vpack__read_u64(&p, end, &u.utime) < 0 ||
        vpack__read_u64(&p, end, &u.stime) < 0 || stat_field(buf, end, 20, &p) < 0 ||
        vpack__read_u64(&p, end, &u.nthreads) < 0 || stat_field(buf, end, 22, &p) < 0 ||
        vpack__read_u64(&p, end, &u.starttime) < 0 || vpack__read_u64(&p, end, &u.vsize) < 0 ||
        vpack__read_u64(&p, end, &u.rss) < 0 || vpack__read_u64(&p, end, &skip) < 0)
        return -EINVAL;
    *out = u;
    return 0;
}

/* The window since w's last reading, in ns; 0 when there is none or the count went back. */
static double usage_window(const struct vpack_usage_watch *w, uint64_t ticks, uint64_t now_ns)
{
    if (!w->have_last || now_ns <= w->at_ns || ticks < w->ticks)
        return 0;
    return (double)(now_ns - w->at_ns);
}

bool vpack_usage_unchanged(const struct vpack_usage_watch *w, uint64_t ticks, uint64_t now_ns,
                           double tick_ns, double band, uint64_t max_age_ns)
{
    double win = usage_window(w, ticks, now_ns);
    if (!(win > 0) || !w->have_ref || now_ns < w->ref_at_ns || now_ns - w->ref_at_ns >= max_age_ns)
        return false;
    double rate = (double)(ticks - w->ticks) * tick_ns / win;
    return fabs(rate - w->ref_rate) + 2 * tick_ns / win + w->ref_err <= band;
}

void vpack_usage_note(struct vpack_usage_watch *w, uint64_t ticks, uint64_t now_ns, double tick_ns,
                      bool full)
{
    double win = usage_window(w, ticks, now_ns);
    if (full) {
        w->have_ref = win > 0;
        if (w->have_ref) {
            w->ref_rate = (double)(ticks - w->ticks) * tick_ns / win;
            w->ref_err = 2 * tick_ns / win;
            w->ref_at_ns = now_ns;
        }
    }
    w->ticks = ticks;
    w->at_ns = now_ns;
    w->have_last = true;
}

double vpack_usage_last(const struct vpack_usage_watch *w, uint64_t read_ns, double last_ns,
                        uint64_t now_ns)
{
    if (last_ns > 0)
        return last_ns;
    if (read_ns && w->have_last && w->at_ns > read_ns && now_ns > w->at_ns)
        return (double)(now_ns - w->at_ns);
    return 0;
}

/* The line of buf that starts with key, as [*line, *eol); false when none does. */
static bool find_line(const char *buf, size_t len, const char *key, const char **line,
                      const char **eol)
{
    const char *end = buf + len;
    size_t k = strlen(key);
    for (const char *p = buf; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        if ((size_t)(e - p) >= k && !memcmp(p, key, k)) {
            *line = p + k;
            *eol = e;
            return true;
        }
        p = e + 1;
    }
    return false;
}

int vpack_procstat_btime(const char *buf, size_t len, uint64_t *btime)
{
    const char *p, *eol;
    if (!find_line(buf, len, "btime ", &p, &eol))
        return -ENOENT;
    if (vpack__read_u64(&p, eol, btime) < 0)
        return -EINVAL;
    return 0;
}

int vpack_proc_limits_open_files(const char *buf, size_t len, uint64_t *soft)
{
    /* "Max open files            1024                 524288               files" */
    const char *p, *eol;
    static const char unlimited[] = "unlimited";
    if (!find_line(buf, len, "Max open files ", &p, &eol))
        return -ENOENT;
    while (p < eol && *p == ' ')
        p++;
    if ((size_t)(eol - p) >= sizeof(unlimited) - 1 &&
        !memcmp(p, unlimited, sizeof(unlimited) - 1)) {
        *soft = UINT64_MAX;
        return 0;
    }
    return vpack__read_u64(&p, eol, soft) < 0 ? -EINVAL : 0;
}
