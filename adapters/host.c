// SPDX-License-Identifier: MIT
#include "host.h"
#include "vpack/cgroupfs.h"
#include "vpack/proc.h"
#include "vpack/prom.h"
#include "vpack/qemu-threads.h"
#include "vpack/uevent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Reads fd to its end (at most max bytes) into *buf, grown as needed (its
 * capacity in *cap; kept between calls by a reader that reads again),
 * NUL-terminated, the length in *len. whole: pread from offset 0, and a
 * read short of the room is the end, no second read to see 0: true of a
 * regular file and of /proc/stat (one seq_file record: a read hands out all
 * of it that fits), not of every seq_file (one of many records stops at a
 * page); else read() what is left (a pipe, stdin) until 0.
 */
static int fill(int fd, bool whole, size_t max, char **buf, size_t *cap, size_t *len)
{
    size_t n = 0;
    *len = 0;
    for (;;) {
        if (n + 4096 + 1 > *cap) {
            size_t ncap = *cap ? *cap * 2 : 8192;
            char *d = realloc(*buf, ncap);
            if (!d)
                return -ENOMEM;
            *buf = d;
            *cap = ncap;
        }
        size_t room = *cap - n - 1;
        ssize_t r = whole ? pread(fd, *buf + n, room, (off_t)n) : read(fd, *buf + n, room);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return errno ? -errno : -EIO;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > max)
            return -EFBIG;
        if (whole && (size_t)r < room)
            break;
    }
    (*buf)[n] = '\0';
    *len = n;
    return 0;
}

int vpack_host_read_fd(int fd, size_t max, char **buf, size_t *len)
{
    char *data = NULL;
    size_t cap = 0, n;
    int r = fill(fd, false, max, &data, &cap, &n);
    if (r < 0) {
        free(data);
        return r;
    }
    *buf = data;
    if (len)
        *len = n;
    return 0;
}

/* Opens root/rel with flags; returns the descriptor or -errno. */
static int open_under(const char *root, const char *rel, int flags)
{
    char full[4096];
    /* root NULL: rel as given (a path from the user); "" or a root: under it. */
    int n = root ? snprintf(full, sizeof(full), "%s/%s", *root ? root : "/", rel)
                 : snprintf(full, sizeof(full), "%s", rel);
    if (n < 0 || n >= (int)sizeof(full))
        return -ENAMETOOLONG;
    int fd = open(full, flags | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int vpack_host_read_file(const char *root, const char *path, size_t max, char **buf, size_t *len)
{
    int fd = open_under(root, path, O_RDONLY);
    if (fd < 0)
        return fd;
    int ret = vpack_host_read_fd(fd, max, buf, len);
    close(fd);
    return ret;
}

void vpack_host_held_close(struct vpack_host_held *h)
{
    if (h->fd >= 0)
        close(h->fd);
    free(h->buf);
    *h = (struct vpack_host_held)VPACK_HOST_HELD_INIT;
}

int vpack_host_cpu_times(const char *root, struct vpack_host_held *h, struct vpack_cpu_times **out,
                         unsigned *n)
{
    size_t len;
    int r;
    if (h->fd < 0 && (h->fd = open_under(root, "proc/stat", O_RDONLY)) < 0) {
        r = h->fd;
        h->fd = -1;
        return r;
    }
    if ((r = fill(h->fd, true, 16 << 20, &h->buf, &h->cap, &len)) < 0) {
        /* Opened again at the next read: a descriptor that failed once is not trusted. */
        close(h->fd);
        h->fd = -1;
        return r;
    }
    return vpack_procstat_parse(h->buf, len, out, n);
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

/* Entries of root/proc/self/fd, its own descriptor among them (as the client libraries count). */
static int count_fds(const char *root, double *n)
{
    int fd = open_under(root, "proc/self/fd", O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return fd;
    DIR *dir = fdopendir(fd);
    if (!dir) {
        int r = -errno;
        close(fd);
        return r;
    }
    double count = 0;
    const struct dirent *e;
    while ((e = readdir(dir)))
        count += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(dir);
    *n = count;
    return 0;
}

int vpack_host_self_process(const char *root, struct vpack_prom_process *out)
{
    char *buf = NULL;
    size_t len;
    int r, first = 0;
    struct vpack_proc_usage u;
    uint64_t btime, soft;
    double tck = (double)sysconf(_SC_CLK_TCK), page = (double)sysconf(_SC_PAGESIZE);
    *out = (struct vpack_prom_process){-1, -1, -1, -1, -1, -1};

    if ((r = vpack_host_read_file(root, "proc/self/stat", 4096, &buf, &len)) == 0)
        r = vpack_proc_usage_parse(buf, len, &u);
    free(buf);
    buf = NULL;
    if (r == 0 && tck > 0) {
        out->cpu_seconds = (double)u.utime / tck + (double)u.stime / tck;
        out->virtual_bytes = (double)u.vsize;
        out->resident_bytes = (double)u.rss * page;
        int b = vpack_host_read_file(root, "proc/stat", 16 << 20, &buf, &len);
        if (b == 0)
            b = vpack_procstat_btime(buf, len, &btime);
        free(buf);
        buf = NULL;
        if (b == 0)
            out->start_time_seconds = (double)btime + (double)u.starttime / tck;
        first = b;
    }
    first = r < 0 ? r : first;
    if ((r = vpack_host_read_file(root, "proc/self/limits", 16384, &buf, &len)) == 0 &&
        (r = vpack_proc_limits_open_files(buf, len, &soft)) == 0 && soft != UINT64_MAX)
        out->max_fds = (double)soft;
    free(buf);
    first = first ? first : r;
    r = count_fds(root, &out->open_fds);
    return first ? first : r;
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

int vpack_host_schedstat_open(const char *root, int pid, int tid)
{
    char rel[64];
    if (pid <= 0 || tid <= 0)
        return -ENOENT;
    snprintf(rel, sizeof(rel), "proc/%d/task/%d/schedstat", pid, tid);
    int fd = open_under(root ? root : "", rel, O_RDONLY);
    if (fd != -ENOENT)
        return fd;
    /* No file: the thread ended, or this kernel keeps no schedstat (CONFIG_SCHED_INFO). */
    snprintf(rel, sizeof(rel), "proc/%d/task/%d", pid, tid);
    int dfd = open_under(root ? root : "", rel, O_RDONLY | O_DIRECTORY);
    if (dfd < 0)
        return -ENOENT;
    close(dfd);
    return -ENOTSUP;
}

/*
 * A held /proc file's text from its start into buf: its length, -EINVAL when
 * it fills buf (sized for the longest text the file can hold: a full buffer
 * is no such text), or -errno (-ESRCH: the task ended since it was opened).
 */
static ssize_t pread_whole(int fd, char *buf, size_t size)
{
    ssize_t n;
    do
        n = pread(fd, buf, size, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    return (size_t)n == size ? -EINVAL : n;
}

int vpack_host_schedstat_read(int fd, struct vpack_schedstat *out)
{
    char buf[128]; /* three 64-bit numbers */
    ssize_t n = pread_whole(fd, buf, sizeof(buf));
    return n < 0 ? (int)n : vpack_schedstat_parse(buf, (size_t)n, out);
}

/* root/proc/PID/NAME opened with flags: the descriptor or -errno. */
static int open_pid_entry(const char *root, int pid, const char *name, int flags)
{
    char rel[64];
    if (pid <= 0)
        return -ENOENT;
    snprintf(rel, sizeof(rel), "proc/%d/%s", pid, name);
    return open_under(root ? root : "", rel, flags);
}

int vpack_host_proc_stat_open(const char *root, int pid)
{
    return open_pid_entry(root, pid, "stat", O_RDONLY);
}

int vpack_host_proc_stat_read(int fd, struct vpack_proc_usage *out)
{
    char buf[2048]; /* 52 fields of at most 20 digits, a name of at most 64 bytes */
    ssize_t n = pread_whole(fd, buf, sizeof(buf));
    return n < 0 ? (int)n : vpack_proc_usage_parse(buf, (size_t)n, out);
}

int vpack_host_task_dir_open(const char *root, int pid)
{
    return open_pid_entry(root, pid, "task", O_RDONLY | O_DIRECTORY);
}

int vpack_host_task_count(int dirfd)
{
    struct stat st;
    if (fstat(dirfd, &st) < 0)
        return -errno;
    if (st.st_nlink < 3)
        return -ENOTSUP;
    return st.st_nlink - 2 > INT32_MAX ? INT32_MAX : (int)(st.st_nlink - 2);
}

static void to_cpu_set(const vpack_cpuset *in, cpu_set_t *out, size_t size)
{
    CPU_ZERO_S(size, out);
    VPACK_CPUSET_FOREACH(c, in)
    {
        if ((size_t)c >= size * 8)
            break;
        CPU_SET_S((size_t)c, size, out);
    }
}

int vpack_host_set_own_affinity(const char *root, const vpack_cpuset *cpus)
{
    char path[4096];
    size_t size = CPU_ALLOC_SIZE(VPACK_CPUSET_MAX);
    cpu_set_t *set = CPU_ALLOC(VPACK_CPUSET_MAX);
    struct dirent *e;
    int n = 0, ret = 0;
    if (!set)
        return -ENOMEM;
    to_cpu_set(cpus, set, size);
    if (snprintf(path, sizeof(path), "%s/proc/self/task", root && *root ? root : "/") >=
        (int)sizeof(path)) {
        CPU_FREE(set);
        return -ENAMETOOLONG;
    }
    DIR *d = opendir(path);
    if (!d) {
        ret = -errno;
        CPU_FREE(set);
        return ret;
    }
    while ((e = readdir(d))) {
        int tid;
        char tail;
        if (sscanf(e->d_name, "%d%c", &tid, &tail) != 1 || tid <= 0)
            continue;
        if (sched_setaffinity(tid, size, set) == 0) {
            n++;
        } else if (errno != ESRCH) {
            ret = -errno;
            break;
        }
    }
    closedir(d);
    CPU_FREE(set);
    return ret < 0 ? ret : n;
}

int vpack_host_thread_affinity(int tid, vpack_cpuset *out)
{
    /* On the stack: this runs for every guest thread in the intervals after a hotplug. */
    unsigned long bits[VPACK_CPUSET_MAX / (8 * sizeof(unsigned long))];
    cpu_set_t *set = (cpu_set_t *)bits;
    size_t size = sizeof(bits);
    if (sched_getaffinity(tid, size, set) < 0)
        return -errno;
    vpack_cpuset_zero(out);
    /* Stops at the last CPU set: a few bits on a small host, not all 16384. */
    int left = CPU_COUNT_S(size, set);
    for (unsigned c = 0; left > 0 && c < VPACK_CPUSET_MAX; c++)
        if (CPU_ISSET_S(c, size, set)) {
            vpack_cpuset_set(out, c);
            left--;
        }
    return 0;
}

int vpack_host_own_affinity(vpack_cpuset *out)
{
    return vpack_host_thread_affinity(0, out);
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
