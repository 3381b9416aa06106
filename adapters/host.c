// SPDX-License-Identifier: MIT
#include "host.h"
#include "vpack/procstat.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int vpack_host_read_fd(int fd, size_t max, char **buf, size_t *len)
{
    char *data = NULL;
    size_t n = 0, cap = 0;
    int ret;

    for (;;) {
        if (n + 4096 + 1 > cap) {
            size_t ncap = cap ? cap * 2 : 8192;
            char *d = realloc(data, ncap);
            if (!d) {
                ret = -ENOMEM;
                goto cleanup;
            }
            data = d;
            cap = ncap;
        }
        ssize_t r = read(fd, data + n, cap - n - 1);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            ret = -errno;
            goto cleanup;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > max) {
            ret = -EFBIG;
            goto cleanup;
        }
    }
    if (!data && !(data = malloc(1))) {
        ret = -ENOMEM;
        goto cleanup;
    }
    data[n] = '\0';
    *buf = data;
    if (len)
        *len = n;
    data = NULL;
    ret = 0;
cleanup:
    free(data);
    return ret;
}

int vpack_host_read_file(const char *root, const char *path, size_t max, char **buf, size_t *len)
{
    char full[4096];

    int n = root ? snprintf(full, sizeof(full), "%s/%s", *root ? root : "/", path)
                 : snprintf(full, sizeof(full), "%s", path); /* as given */
    if (n < 0 || n >= (int)sizeof(full))
        return -ENAMETOOLONG;
    int fd = open(full, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int ret = vpack_host_read_fd(fd, max, buf, len);
    close(fd);
    return ret;
}

int vpack_host_cpu_times(const char *root, struct vpack_cpu_times **out, unsigned *n)
{
    char *buf = NULL;
    size_t len = 0;
    int r = vpack_host_read_file(root, "proc/stat", 16 << 20, &buf, &len);
    if (r < 0)
        return r;
    r = vpack_procstat_parse(buf, len, out, n);
    free(buf);
    return r;
}

int vpack_host_online_cpus(const char *root, vpack_cpuset *out)
{
    char *buf = NULL;
    int r = vpack_host_read_file(root, "sys/devices/system/cpu/online", 1 << 16, &buf, NULL);
    if (r < 0)
        return r;
    buf[strcspn(buf, "\n")] = '\0';
    r = vpack_cpuset_parse(out, buf, NULL);
    free(buf);
    return r;
}

int vpack_host_process_cgroup(const char *root, int pid, const char *controller, char **group)
{
    char path[64], *buf = NULL;
    int r;
    if (pid <= 0)
        return -ENOENT;
    snprintf(path, sizeof(path), "proc/%d/cgroup", pid);
    if ((r = vpack_host_read_file(root, path, 1 << 16, &buf, NULL)) < 0)
        return r;
    *group = vpack_proc_cgroup_parse(buf, strlen(buf), controller);
    free(buf);
    return *group ? 0 : -ENOENT;
}

int vpack_host_task_ticks(const char *root, int pid, const char *tid, uint64_t *ticks)
{
    char path[4096], *buf = NULL;
    size_t len;
    int r;
    if (snprintf(path, sizeof(path), "proc/%d/task/%s/stat", pid, tid) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    if ((r = vpack_host_read_file(root, path, 4096, &buf, &len)) < 0)
        return r;
    r = vpack_task_stat_parse(buf, len, ticks);
    free(buf);
    return r;
}

int vpack_host_process_start(const char *root, int pid, uint64_t *start)
{
    char path[64], *buf = NULL;
    size_t len;
    int r;
    if (pid <= 0)
        return -ENOENT;
    snprintf(path, sizeof(path), "proc/%d/stat", pid);
    if ((r = vpack_host_read_file(root, path, 4096, &buf, &len)) < 0)
        return r;
    r = vpack_task_stat_start(buf, len, start);
    free(buf);
    return r;
}

int vpack_host_node_cpus(const char *root, const vpack_cpuset *nodes, vpack_cpuset *out)
{
    vpack_cpuset_zero(out);
    VPACK_CPUSET_FOREACH(node, nodes) {
        char path[96], *buf = NULL;
        vpack_cpuset cpus;
        int r;
        snprintf(path, sizeof(path), "sys/devices/system/node/node%d/cpulist", node);
        if ((r = vpack_host_read_file(root, path, 1 << 16, &buf, NULL)) < 0)
            return r;
        buf[strcspn(buf, "\n")] = '\0';
        /* A node without CPUs (memory only) has an empty list. */
        r = buf[0] ? vpack_cpuset_parse(&cpus, buf, NULL) : 0;
        if (r == 0 && buf[0])
            vpack_cpuset_or(out, out, &cpus);
        free(buf);
        if (r < 0)
            return r;
    }
    return 0;
}

int vpack_host_threads(const char *root, int pid, struct vpack_host_thread **out, unsigned *n)
{
    char path[4096];
    struct vpack_host_thread *arr = NULL;
    unsigned cnt = 0, cap = 0;
    struct dirent *e;
    int ret = 0;

    *out = NULL;
    *n = 0;
    if (pid <= 0)
        return -ENOENT;
    if (snprintf(path, sizeof(path), "%s/proc/%d/task", root && *root ? root : "/", pid) >=
        (int)sizeof(path))
        return -ENAMETOOLONG;
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    while ((e = readdir(d))) {
        char rel[64], *comm = NULL, tail;
        int tid;
        if (sscanf(e->d_name, "%d%c", &tid, &tail) != 1 || tid <= 0)
            continue;
        snprintf(rel, sizeof(rel), "proc/%d/task/%d/comm", pid, tid);
        if (vpack_host_read_file(root, rel, 4096, &comm, NULL) < 0)
            continue; /* ended meanwhile */
        if (cnt == cap) {
            unsigned ncap = cap ? cap * 2 : 16;
            struct vpack_host_thread *t = realloc(arr, ncap * sizeof(*t));
            if (!t) {
                free(comm);
                ret = -ENOMEM;
                break;
            }
            arr = t;
            cap = ncap;
        }
        comm[strcspn(comm, "\n")] = '\0';
        arr[cnt].tid = tid;
        /* As the kernel keeps it: at most VPACK_COMM_MAX bytes. */
        snprintf(arr[cnt].comm, sizeof(arr[cnt].comm), "%.*s", VPACK_COMM_MAX, comm);
        cnt++;
        free(comm);
    }
    closedir(d);
    if (ret < 0) {
        free(arr);
        return ret;
    }
    *out = arr;
    *n = cnt;
    return 0;
}

int vpack_host_threads_ticks(const char *root, int pid, const int *tids, unsigned n,
                             uint64_t *ticks, unsigned *found)
{
    *ticks = 0;
    *found = 0;
    for (unsigned i = 0; i < n; i++) {
        char tid[16];
        uint64_t t;
        snprintf(tid, sizeof(tid), "%d", tids[i]);
        int r = vpack_host_task_ticks(root, pid, tid, &t);
        if (r == -ENOENT)
            continue;
        if (r < 0)
            return r;
        *ticks += t;
        (*found)++;
    }
    return 0;
}

struct vpack_hotplug {
    uv_poll_t poll;
    int fd;
    vpack_hotplug_cb cb;
    void *opaque;
};

static void on_uevent(uv_poll_t *handle, int status, int events)
{
    struct vpack_hotplug *h = handle->data;
    char buf[8192];
    (void)events;
    if (status < 0)
        return;
    for (;;) {
        ssize_t n = recv(h->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && errno == ENOBUFS) {
            /* The socket overflowed: events were lost. */
            h->cb(h->opaque, -1, -1);
            continue;
        }
        if (n <= 0)
            break;
        int cpu, online;
        if (vpack_uevent_parse_cpu(buf, (size_t)n, &cpu, &online) == 1)
            h->cb(h->opaque, cpu, online);
    }
}

int vpack_hotplug_start(uv_loop_t *loop, vpack_hotplug_cb cb, void *opaque,
                        struct vpack_hotplug **out)
{
    struct sockaddr_nl addr = {.nl_family = AF_NETLINK, .nl_groups = 1};
    struct vpack_hotplug *h = calloc(1, sizeof(*h));
    int ret;

    if (!h)
        return -ENOMEM;
    h->fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_KOBJECT_UEVENT);
    if (h->fd < 0) {
        ret = -errno;
        goto fail;
    }
    if (bind(h->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        ret = -errno;
        goto fail;
    }
    if ((ret = uv_poll_init(loop, &h->poll, h->fd)) < 0)
        goto fail;
    h->poll.data = h;
    h->cb = cb;
    h->opaque = opaque;
    if ((ret = uv_poll_start(&h->poll, UV_READABLE, on_uevent)) < 0) {
        vpack_hotplug_stop(h);
        return ret;
    }
    *out = h;
    return 0;
fail:
    if (h->fd >= 0)
        close(h->fd);
    free(h);
    return ret;
}

static void on_close(uv_handle_t *handle)
{
    struct vpack_hotplug *h = handle->data;
    close(h->fd);
    free(h);
}

void vpack_hotplug_stop(struct vpack_hotplug *h)
{
    if (h)
        uv_close((uv_handle_t *)&h->poll, on_close);
}
