// SPDX-License-Identifier: MIT
/*
 * The kernel's cgroup text, taken as text: a process's /proc/PID/cgroup
 * lines, the cgroup and cgroup2 lines of /proc/self/mounts, and a group's
 * memory.numa_stat (either version).
 */
#include "vpack/cgroupfs.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sys-priv.h"
#include "vpack/snapshot.h"

/*
 * Reads the " N0=5 N1=7" entries of one memory.numa_stat line from q to eol,
 * each value times scale, and adds them to out[] by node (a node not there
 * yet is appended while there is room). Returns 0 or -EINVAL.
 */
static int numastat_nodes(const char *q, const char *eol, double scale,
                          struct vpack_mem_share *out, unsigned max, unsigned *cnt)
{
    while (q < eol) {
        uint64_t node, v;
        while (q < eol && *q == ' ')
            q++;
        if (q >= eol)
            break;
        if (*q != 'N' || (q++, vpack__read_u64(&q, eol, &node) < 0) || q >= eol || *q != '=')
            return -EINVAL;
        q++;
        if (vpack__read_u64(&q, eol, &v) < 0)
            return -EINVAL;
        if (node >= 1u << 20)
            continue;
        unsigned i = 0;
        while (i < *cnt && out[i].node != (int)node)
            i++;
        if (i == *cnt) {
            if (*cnt == max)
                continue;
            out[(*cnt)++] = (struct vpack_mem_share){(int)node, 0};
        }
        out[i].share += (double)v * scale;
    }
    return 0;
}

/* The line of buf that starts with key (key includes its '=' or ' '), or NULL; *eol its end. */
static const char *numastat_line(const char *buf, const char *end, const char *key,
                                 const char **eol)
{
    size_t kl = strlen(key);
    for (const char *p = buf; p < end; p = *eol + 1) {
        *eol = memchr(p, '\n', (size_t)(end - p));
        if (!*eol)
            *eol = end;
        if ((size_t)(*eol - p) >= kl && !memcmp(p, key, kl))
            return p + kl;
    }
    return NULL;
}

int vpack_numastat_parse(const char *buf, size_t len, uint64_t page_size,
                         struct vpack_mem_share *out, unsigned max, unsigned *n, uint64_t *bytes)
{
    /* v2's page-reclaim lists: together what v1's total counts. */
    static const char *const lru[] = {"inactive_anon ", "active_anon ", "inactive_file ",
                                      "active_file ", "unevictable "};
    static const char *const types[] = {"anon ", "file "};
    const char *end = buf + len, *eol, *q;
    unsigned cnt = 0, found = 0;
    double sum = 0;
    int version;
    uint64_t total = 1;

    if ((q = numastat_line(buf, end, "hierarchical_total=", &eol)) ||
        (q = numastat_line(buf, end, "total=", &eol))) {
        /* v1, in pages: "total=512 N0=500 N1=12". */
        version = 1;
        if (vpack__read_u64(&q, eol, &total) < 0 ||
            numastat_nodes(q, eol, (double)page_size, out, max, &cnt) < 0)
            return -EINVAL;
    } else {
        /* v2, in bytes: "anon N0=4096 N1=0" and more lines of other types. */
        version = 2;
        for (size_t k = 0; k < sizeof(lru) / sizeof(lru[0]); k++) {
            if (!(q = numastat_line(buf, end, lru[k], &eol)))
                continue;
            if (numastat_nodes(q, eol, 1, out, max, &cnt) < 0)
                return -EINVAL;
            found++;
        }
        for (size_t k = 0; !found && k < sizeof(types) / sizeof(types[0]); k++)
            if ((q = numastat_line(buf, end, types[k], &eol)) &&
                numastat_nodes(q, eol, 1, out, max, &cnt) < 0)
                return -EINVAL;
        if (cnt == 0)
            return -EINVAL;
    }
    for (unsigned i = 0; i < cnt; i++)
        sum += out[i].share;
    if (total == 0 || sum <= 0)
        return -ENODATA;
    for (unsigned i = 0; i < cnt; i++)
        out[i].share /= sum;
    *n = cnt;
    if (bytes)
        *bytes = sum < 18446744073709549568.0 ? (uint64_t)sum : UINT64_MAX;
    return version;
}

/* True when the controller list [t, c2) of a /proc/PID/cgroup line names controller. */
static bool lists_controller(const char *t, const char *c2, const char *controller, size_t cl)
{
    while (t < c2) {
        const char *comma = memchr(t, ',', (size_t)(c2 - t));
        const char *te = comma ? comma : c2;
        if ((size_t)(te - t) == cl && !memcmp(t, controller, cl))
            return true;
        t = te + 1;
    }
    return false;
}

char *vpack_proc_cgroup_parse(const char *buf, size_t len, const char *controller)
{
    const char *p = buf, *end = buf + len;
    size_t cl = controller ? strlen(controller) : 0;
    if (controller && !cl)
        return NULL;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        /* "4:memory:/machine/...": id, a comma-separated controller list, path;
         * cgroup v2's line is "0::/machine.slice/..." (no controller list). */
        const char *c1 = memchr(p, ':', (size_t)(eol - p));
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) : NULL;
        bool match = c2 && (controller ? lists_controller(c1 + 1, c2, controller, cl)
                                       : c1 - p == 1 && *p == '0' && c2 == c1 + 1);
        if (match) {
            size_t pl = (size_t)(eol - c2 - 1);
            /* A path is absolute and has no NUL in it. */
            if (pl == 0 || c2[1] != '/' || memchr(c2 + 1, '\0', pl))
                return NULL;
            return strndup(c2 + 1, pl);
        }
        p = eol + 1;
    }
    return NULL;
}

/*
 * Copies the mount point field [f, fe) of a /proc/self/mounts line into
 * *out, decoding the kernel's octal escapes ("\040" for a blank); *out is
 * NULL when the field is not an absolute path (or decodes to a NUL).
 * Returns 0 or -ENOMEM.
 */
static int mount_point(const char *f, const char *fe, char **out)
{
    char *m = malloc((size_t)(fe - f) + 1), *o = m;
    *out = NULL;
    if (!m)
        return -ENOMEM;
    for (const char *q = f; q < fe; q++) {
        if (*q == '\\' && fe - q >= 4 && q[1] >= '0' && q[1] <= '3' && q[2] >= '0' &&
            q[2] <= '7' && q[3] >= '0' && q[3] <= '7') {
            *o++ = (char)((q[1] - '0') * 64 + (q[2] - '0') * 8 + (q[3] - '0'));
            q += 3;
        } else {
            *o++ = *q;
        }
    }
    *o = '\0';
    if (m[0] == '/' && strlen(m) == (size_t)(o - m))
        *out = m;
    else
        free(m);
    return 0;
}

/* Splits [p, eol) at blanks into at most max fields; returns how many. */
static unsigned split_fields(const char *p, const char *eol, const char **f, const char **fe,
                             unsigned max)
{
    unsigned nf = 0;
    while (p < eol && nf < max) {
        while (p < eol && *p == ' ')
            p++;
        if (p >= eol)
            break;
        f[nf] = p;
        while (p < eol && *p != ' ')
            p++;
        fe[nf++] = p;
    }
    return nf;
}

/* Sets *slot to the mount point [f, fe) unless it is set already. Returns 0 or -ENOMEM. */
static int take_mount(char **slot, const char *f, const char *fe)
{
    return *slot ? 0 : mount_point(f, fe, slot);
}

void vpack_cgroup_mounts_clear(struct vpack_cgroup_mounts *m)
{
    free(m->cpuset);
    free(m->memory);
    free(m->unified);
    memset(m, 0, sizeof(*m));
}

int vpack_cgroup_mounts_parse(const char *buf, size_t len, struct vpack_cgroup_mounts *out)
{
    const char *p = buf, *end = buf + len;
    memset(out, 0, sizeof(*out));
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p)), *f[4], *fe[4];
        if (!eol)
            eol = end;
        /* "cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0" */
        unsigned nf = split_fields(p, eol, f, fe, 4);
        p = eol + 1;
        if (nf < 4)
            continue;
        size_t tl = (size_t)(fe[2] - f[2]);
        int r = 0;
        if (tl == 7 && !memcmp(f[2], "cgroup2", 7)) {
            r = take_mount(&out->unified, f[1], fe[1]);
        } else if (tl == 6 && !memcmp(f[2], "cgroup", 6)) {
            if (lists_controller(f[3], fe[3], "cpuset", 6))
                r = take_mount(&out->cpuset, f[1], fe[1]);
            if (r == 0 && lists_controller(f[3], fe[3], "memory", 6))
                r = take_mount(&out->memory, f[1], fe[1]);
        }
        if (r < 0) {
            vpack_cgroup_mounts_clear(out);
            return r;
        }
    }
    return 0;
}
