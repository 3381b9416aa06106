// SPDX-License-Identifier: MIT
#include "cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host.h"
#include "vpack/procstat.h"
#include "vpack/snapshot.h"

#define CPUSET_ROOT "sys/fs/cgroup/cpuset"

/* True for libvirt's per-thread groups, which libvirt itself rewrites. */
static bool thread_group(const char *name)
{
    unsigned n;
    char tail;
    if (!strcmp(name, "emulator"))
        return true;
    if (sscanf(name, "vcpu%u%c", &n, &tail) == 1)
        return true;
    return sscanf(name, "iothread%u%c", &n, &tail) == 1;
}

static int read_cpus(const char *root, const char *dir, vpack_cpuset *out, bool *empty)
{
    char path[4096], *buf = NULL;
    snprintf(path, sizeof(path), "%s/cpuset.cpus", dir);
    int r = vpack_host_read_file(root, path, 1 << 16, &buf, NULL);
    if (r < 0)
        return r;
    buf[strcspn(buf, "\n")] = '\0';
    vpack_cpuset_zero(out);
    *empty = buf[0] == '\0';
    r = *empty ? 0 : vpack_cpuset_parse(out, buf, NULL);
    free(buf);
    return r;
}

static int write_cpus(const char *root, const char *dir, const vpack_cpuset *cpus)
{
    char path[4096];
    char *text = vpack_cpuset_format(cpus);
    int fd, ret = 0;
    if (!text)
        return -ENOMEM;
    snprintf(path, sizeof(path), "%s/%s/cpuset.cpus", root, dir);
    fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        ret = -errno;
    } else {
        /* cgroupfs reports a refused value at write time. */
        if (write(fd, text, strlen(text)) < 0)
            ret = -errno;
        if (close(fd) < 0 && ret == 0)
            ret = -errno;
    }
    free(text);
    return ret;
}

/*
 * Gives the group dir (CPUs *cur) back what its parent has online, never
 * narrowing it; an empty group is left alone. Returns 0 or -errno.
 */
static int repair_group(const char *root, const char *dir, const vpack_cpuset *parent,
                        const vpack_cpuset *online, bool empty, vpack_cpuset *cur,
                        unsigned *nfixed)
{
    vpack_cpuset want;
    vpack_cpuset_and(&want, parent, online);
    /* Only give back what was lost: never narrow a group. */
    vpack_cpuset_or(&want, &want, cur);
    vpack_cpuset_and(&want, &want, parent);
    if (empty || vpack_cpuset_equal(&want, cur) || vpack_cpuset_empty(&want))
        return 0;
    int r = write_cpus(root, dir, &want);
    if (r < 0)
        return r;
    (*nfixed)++;
    *cur = want;
    return 0;
}

/* Repairs dir's children given the parent's (dir's) CPU set; recursive, parents first. */
static int repair_children(const char *root, const char *dir, const vpack_cpuset *parent,
                           const vpack_cpuset *online, unsigned *nfixed, int depth)
{
    char full[4096];
    struct dirent *e;
    int ret = 0;

    if (depth > 8)
        return 0;
    snprintf(full, sizeof(full), "%s/%s", root, dir);
    DIR *d = opendir(full);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    while ((e = readdir(d))) {
        char child[4096];
        vpack_cpuset cur;
        bool empty;
        if (e->d_name[0] == '.' || e->d_type != DT_DIR || thread_group(e->d_name))
            continue;
        if (snprintf(child, sizeof(child), "%s/%s", dir, e->d_name) >= (int)sizeof(child))
            continue;
        if (read_cpus(root, child, &cur, &empty) < 0)
            continue;
        int r = repair_group(root, child, parent, online, empty, &cur, nfixed);
        if (r < 0)
            ret = r;
        r = repair_children(root, child, &cur, online, nfixed, depth + 1);
        if (r < 0)
            ret = r;
    }
    closedir(d);
    return ret;
}

int vpack_cgroup_repair(const char *root, const vpack_cpuset *online, unsigned *nfixed)
{
    static const char *partitions[] = {"machine", "machine.slice"};
    char rootbuf[4096];
    vpack_cpuset top;
    bool empty;
    int ret = 0;

    *nfixed = 0;
    snprintf(rootbuf, sizeof(rootbuf), "%s", root && *root ? root : "/");
    if (read_cpus(rootbuf, CPUSET_ROOT, &top, &empty) < 0)
        return 0; /* no cpuset v1 hierarchy: nothing to repair */
    for (size_t i = 0; i < sizeof(partitions) / sizeof(partitions[0]); i++) {
        char dir[256];
        vpack_cpuset cur;
        snprintf(dir, sizeof(dir), CPUSET_ROOT "/%s", partitions[i]);
        if (read_cpus(rootbuf, dir, &cur, &empty) < 0)
            continue;
        int r = repair_group(rootbuf, dir, &top, online, empty, &cur, nfixed);
        if (r < 0)
            ret = r;
        r = repair_children(rootbuf, dir, &cur, online, nfixed, 0);
        if (r < 0)
            ret = r;
    }
    return ret;
}

void vpack_cgroup_domain_groups(const char *root, int pid, char **memcg, char **cpusetcg)
{
    if (vpack_host_process_cgroup(root, pid, "memory", memcg) < 0)
        *memcg = NULL;
    if (vpack_host_process_cgroup(root, pid, "cpuset", cpusetcg) < 0) {
        *cpusetcg = NULL;
        return;
    }
    char *slash = strrchr(*cpusetcg, '/');
    if (slash && !strcmp(slash, "/emulator"))
        *slash = '\0';
}

int vpack_cgroup_iothread_ticks(const char *root, const char *cpusetcg, int pid, int id,
                                uint64_t *ticks)
{
    char path[4096], *buf = NULL, *save = NULL;
    int r;
    if (!cpusetcg || pid <= 0)
        return -ENOENT;
    if (snprintf(path, sizeof(path), CPUSET_ROOT "%s/iothread%d/tasks", cpusetcg, id) >=
        (int)sizeof(path))
        return -ENAMETOOLONG;
    if ((r = vpack_host_read_file(root, path, 1 << 16, &buf, NULL)) < 0)
        return r;
    *ticks = 0;
    for (char *tid = strtok_r(buf, "\n", &save); tid; tid = strtok_r(NULL, "\n", &save)) {
        uint64_t t;
        if (vpack_host_task_ticks(root, pid, tid, &t) == 0)
            *ticks += t;
    }
    free(buf);
    return 0;
}

int vpack_cgroup_numa_stat(const char *root, const char *memcg, struct vpack_mem_share **out,
                           unsigned *n)
{
    char path[4096], *buf = NULL;
    size_t len;
    unsigned max = 0;
    int r;
    *out = NULL;
    *n = 0;
    if (snprintf(path, sizeof(path), "sys/fs/cgroup/memory%s/memory.numa_stat", memcg) >=
        (int)sizeof(path))
        return -ENAMETOOLONG;
    if ((r = vpack_host_read_file(root, path, 1 << 20, &buf, &len)) < 0)
        return r;
    /* Every "N<node>=" has an '=': their count bounds the nodes listed. */
    for (size_t i = 0; i < len; i++)
        max += buf[i] == '=';
    r = -ENOMEM;
    if (max && !(*out = calloc(max, sizeof(**out))))
        goto cleanup;
    if (!max || vpack_numastat_parse(buf, len, *out, max, n) < 0)
        *n = 0;
    r = 0;
cleanup:
    free(buf);
    if (*n == 0) {
        free(*out);
        *out = NULL;
    }
    return r;
}
