// SPDX-License-Identifier: MIT
#include "cgroup.h"

#include <ctype.h>
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
#include "vpack/cgroupfs.h"
#include "vpack/grow.h"
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

/* Reads the CPU list root/dir/file; *empty when it holds none. Returns 0 or -errno. */
static int read_set(const char *root, const char *dir, const char *file, vpack_cpuset *out,
                    bool *empty)
{
    char path[4096], *buf = NULL;
    if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
        return -ENAMETOOLONG;
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

static int read_cpus(const char *root, const char *dir, vpack_cpuset *out, bool *empty)
{
    return read_set(root, dir, "cpuset.cpus", out, empty);
}

static int write_cpus(const char *root, const char *dir, const vpack_cpuset *cpus)
{
    char path[4096];
    char *text = vpack_cpuset_format(cpus);
    int fd, ret = 0;
    if (!text)
        return -ENOMEM;
    snprintf(path, sizeof(path), "%s/%s/cpuset.cpus", root, dir);
    /* O_TRUNC: cgroupfs ignores it, a fixture tree's plain file needs it. */
    fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
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

/* One walk of the repair: the memo it reads (old) and the one it builds. */
struct repair_walk {
    const char *root;
    const struct vpack_cgroup_memo *old;
    vpack_cpuset back;      /* went offline since old was taken, online again */
    vpack_cpuset still;     /* went offline since, still offline */
    struct vpack_cgroup_group *groups;
    unsigned n;
    size_t cap;
    unsigned fixed;
    int err;                /* the first write that failed */
};

/* What dir had when the memo was taken; NULL when it was not there. */
static const vpack_cpuset *memo_find(const struct vpack_cgroup_memo *m, const char *dir)
{
    for (unsigned i = 0; m && i < m->n; i++)
        if (!strcmp(m->groups[i].dir, dir))
            return &m->groups[i].cpus;
    return NULL;
}

static int memo_add(struct repair_walk *w, const char *dir, const vpack_cpuset *cpus)
{
    struct vpack_cgroup_group *g = vpack_grow(w->groups, w->n, &w->cap, sizeof(*g));

    if (!g)
        return -ENOMEM;
    w->groups = g;
    if (!(w->groups[w->n].dir = strdup(dir)))
        return -ENOMEM;
    w->groups[w->n++].cpus = *cpus;
    return 0;
}

/*
 * Gives the group dir (CPUs *cur) back what the hotplug took from it and
 * its parent has again, and remembers it. Returns 0 or -ENOMEM (a failed
 * write is kept in w->err).
 */
static int repair_group(struct repair_walk *w, const char *dir, const vpack_cpuset *parent,
                        vpack_cpuset *cur)
{
    const vpack_cpuset *had = memo_find(w->old, dir);
    vpack_cpuset give, keep = *cur;
    if (had) {
        vpack_cpuset_and(&give, had, &w->back);
        vpack_cpuset_and(&give, &give, parent);
        vpack_cpuset_andnot(&give, &give, cur);
        if (!vpack_cpuset_empty(&give)) {
            vpack_cpuset want;
            vpack_cpuset_or(&want, cur, &give);
            int r = write_cpus(w->root, dir, &want);
            if (r < 0 && !w->err)
                w->err = r;
            if (r == 0) {
                w->fixed++;
                *cur = want;
            }
            /* What could not be written is tried again at the next walk. */
            keep = want;
        }
    }
    /* A CPU still offline that it had is remembered until it comes back. */
    if (had) {
        vpack_cpuset_and(&give, had, &w->still);
        vpack_cpuset_or(&keep, &keep, &give);
    }
    return memo_add(w, dir, &keep);
}

/* Repairs dir's children given the parent's (dir's) CPU set; recursive, parents first. */
static int repair_children(struct repair_walk *w, const char *dir, const vpack_cpuset *parent,
                           int depth)
{
    char full[4096];
    struct dirent *e;
    int ret = 0;

    if (depth > 8)
        return 0;
    snprintf(full, sizeof(full), "%s/%s", w->root, dir);
    DIR *d = opendir(full);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    while (ret == 0 && (e = readdir(d))) {
        char child[4096];
        vpack_cpuset cur;
        bool empty;
        if (e->d_name[0] == '.' || e->d_type != DT_DIR || thread_group(e->d_name))
            continue;
        if (snprintf(child, sizeof(child), "%s/%s", dir, e->d_name) >= (int)sizeof(child))
            continue;
        if (read_cpus(w->root, child, &cur, &empty) < 0)
            continue;
        if ((ret = repair_group(w, child, parent, &cur)) == 0)
            ret = repair_children(w, child, &cur, depth + 1);
    }
    closedir(d);
    return ret;
}

/* True when path is done[i] or below it, for some i < n. */
static bool walked(const char *path, const char *const *done, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(done[i]);
        if (!strncmp(path, done[i], l) && (path[l] == '\0' || path[l] == '/'))
            return true;
    }
    return false;
}

/* qsort: shorter paths first. */
static int shorter_first(const void *a, const void *b)
{
    size_t la = strlen(*(const char *const *)a), lb = strlen(*(const char *const *)b);
    return (la > lb) - (la < lb);
}

/*
 * The partitions to walk into out (at most VPACK_CGROUP_MAX_PARTITIONS):
 * libvirt's defaults, then the callers' (paths in the hierarchy, shortest
 * first), each once and none below another, so that no group is walked
 * twice. "/" is no partition: a walk of the whole hierarchy would touch
 * groups that are not libvirt's. Without memory for the sort, the defaults
 * alone.
 */
static size_t partition_list(const char *const *extra, const char **out)
{
    static const char *defaults[] = {"/machine", "/machine.slice"};
    size_t n = 0, nx = 0;
    for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
        out[n++] = defaults[i];
    while (extra && extra[nx])
        nx++;
    const char **sorted = nx ? malloc(nx * sizeof(*sorted)) : NULL;
    if (!sorted)
        return n;
    memcpy(sorted, extra, nx * sizeof(*sorted));
    qsort(sorted, nx, sizeof(*sorted), shorter_first);
    for (size_t i = 0; i < nx && n < VPACK_CGROUP_MAX_PARTITIONS; i++)
        if (sorted[i][0] == '/' && sorted[i][1] && !walked(sorted[i], out, n))
            out[n++] = sorted[i];
    free(sorted);
    return n;
}

/*
 * The set file of the group that holds partition part (a path below base,
 * a hierarchy's top directory, whose set is top): top itself for a
 * partition right below it. Returns 0, or <0 when that group cannot be read.
 */
static int parent_set(const char *root, const char *base, const char *part, const char *file,
                      const vpack_cpuset *top, vpack_cpuset *out)
{
    char up[4096];
    bool empty;
    *out = *top;
    if (snprintf(up, sizeof(up), "%s%s", base, part) >= (int)sizeof(up))
        return -ENAMETOOLONG;
    *strrchr(up, '/') = '\0';
    return strcmp(up, base) ? read_set(root, up, file, out, &empty) : 0;
}

void vpack_cgroup_memo_clear(struct vpack_cgroup_memo *m)
{
    for (unsigned i = 0; i < m->n; i++)
        free(m->groups[i].dir);
    free(m->groups);
    memset(m, 0, sizeof(*m));
}

int vpack_cgroup_repair(const char *root, struct vpack_cgroup_memo *m, const vpack_cpuset *online,
                        const vpack_cpuset *gone, const char *const *partitions, unsigned *nfixed)
{
    const char *parts[VPACK_CGROUP_MAX_PARTITIONS];
    size_t nparts = partition_list(partitions, parts);
    char rootbuf[4096];
    struct repair_walk w = {.root = rootbuf, .old = m->taken ? m : NULL};
    vpack_cpuset top, away;
    bool empty;
    int ret = 0;

    *nfixed = 0;
    snprintf(rootbuf, sizeof(rootbuf), "%s", root && *root ? root : "/");
    if (read_cpus(rootbuf, CPUSET_ROOT, &top, &empty) < 0)
        return 0; /* no cpuset v1 hierarchy: nothing to repair */
    /* Gone since the last look: offline now, or seen going by the caller. */
    vpack_cpuset_zero(&away);
    if (m->taken) {
        vpack_cpuset_andnot(&away, &m->online, online);
        vpack_cpuset_or(&away, &away, &m->away);
        if (gone)
            vpack_cpuset_or(&away, &away, gone);
    }
    vpack_cpuset_and(&w.back, &away, online);
    vpack_cpuset_andnot(&w.still, &away, online);
    for (size_t i = 0; ret == 0 && i < nparts; i++) {
        char dir[4096];
        vpack_cpuset cur, parent;
        if (snprintf(dir, sizeof(dir), CPUSET_ROOT "%s", parts[i]) >= (int)sizeof(dir) ||
            read_cpus(rootbuf, dir, &cur, &empty) < 0 ||
            parent_set(rootbuf, CPUSET_ROOT, parts[i], "cpuset.cpus", &top, &parent) < 0)
            continue;
        if ((ret = repair_group(&w, dir, &parent, &cur)) == 0)
            ret = repair_children(&w, dir, &cur, 0);
    }
    *nfixed = w.fixed;
    if (ret < 0) {
        struct vpack_cgroup_memo failed = {.groups = w.groups, .n = w.n};
        vpack_cgroup_memo_clear(&failed);
        return ret;
    }
    vpack_cgroup_memo_clear(m);
    m->taken = true;
    m->online = *online;
    m->away = w.still;
    if (w.err) /* the CPUs not given back are still away */
        vpack_cpuset_or(&m->away, &m->away, &w.back);
    m->groups = w.groups;
    m->n = w.n;
    return w.err;
}

/* True when the blank-separated list text holds word. */
static bool has_word(const char *text, const char *word)
{
    size_t wl = strlen(word);
    for (const char *p = text; (p = strstr(p, word)); p += wl)
        if ((p == text || isspace((unsigned char)p[-1])) && (!p[wl] || isspace((unsigned char)p[wl])))
            return true;
    return false;
}

/* True when root/path is a directory. */
static bool is_dir(const char *root, const char *path)
{
    char full[4096];
    struct stat st;
    if (snprintf(full, sizeof(full), "%s/%s", root && *root ? root : "/", path) >=
        (int)sizeof(full))
        return false;
    return stat(full, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Sets *slot to a copy of path when root/probe exists. Returns 0 or -ENOMEM. */
static int probe_mount(const char *root, const char *probe, const char *path, char **slot)
{
    char full[4096];
    if (snprintf(full, sizeof(full), "%s/%s", root && *root ? root : "/", probe) >=
            (int)sizeof(full) ||
        access(full, F_OK) < 0)
        return 0;
    return (*slot = strdup(path)) ? 0 : -ENOMEM;
}

/* Where the hierarchies usually are, for a tree without proc/self/mounts. */
static int probe_default(const char *root, struct vpack_cgroup_mounts *m)
{
    int r;
    if ((r = probe_mount(root, "sys/fs/cgroup/cgroup.controllers", "/sys/fs/cgroup",
                         &m->unified)) < 0 ||
        m->unified)
        return r;
    if ((r = probe_mount(root, "sys/fs/cgroup/unified/cgroup.controllers",
                         "/sys/fs/cgroup/unified", &m->unified)) < 0 ||
        (r = probe_mount(root, CPUSET_ROOT, "/" CPUSET_ROOT, &m->cpuset)) < 0)
        return r;
    return probe_mount(root, "sys/fs/cgroup/memory", "/sys/fs/cgroup/memory", &m->memory);
}

int vpack_cgroup_detect(const char *root, struct vpack_cgroup_host *out)
{
    char *buf = NULL, path[4096];
    size_t len;
    memset(out, 0, sizeof(*out));
    int r = vpack_host_read_file(root, "proc/self/mounts", 1 << 20, &buf, &len);
    if (r == 0) {
        r = vpack_cgroup_mounts_parse(buf, len, &out->mounts);
        free(buf);
        buf = NULL;
    } else {
        r = probe_default(root, &out->mounts);
    }
    if (r < 0) {
        vpack_cgroup_host_clear(out);
        return r;
    }
    out->cpuset = out->mounts.cpuset ? VPACK_CGROUP_V1 : VPACK_CGROUP_NONE;
    out->memory = out->mounts.memory ? VPACK_CGROUP_V1 : VPACK_CGROUP_NONE;
    /* A controller is on one hierarchy only: v2 has the ones its root lists. */
    if (out->mounts.unified &&
        snprintf(path, sizeof(path), "%s/cgroup.controllers", out->mounts.unified) <
            (int)sizeof(path) &&
        vpack_host_read_file(root, path, 1 << 16, &buf, NULL) == 0) {
        if (!out->cpuset && has_word(buf, "cpuset"))
            out->cpuset = VPACK_CGROUP_V2;
        if (!out->memory && has_word(buf, "memory"))
            out->memory = VPACK_CGROUP_V2;
        free(buf);
    }
    return 0;
}

void vpack_cgroup_host_clear(struct vpack_cgroup_host *h)
{
    vpack_cgroup_mounts_clear(&h->mounts);
    memset(h, 0, sizeof(*h));
}

const char *vpack_cgroup_version(const struct vpack_cgroup_host *h)
{
    if (h->mounts.cpuset || h->mounts.memory)
        return h->mounts.unified ? "hybrid" : "v1";
    return h->mounts.unified ? "v2" : "none";
}

const char *vpack_cgroup_ver_name(enum vpack_cgroup_ver v)
{
    return v == VPACK_CGROUP_V1 ? "v1" : v == VPACK_CGROUP_V2 ? "v2" : "none";
}

/* Cuts a trailing "/name" component off path, if it is there. */
static void cut_component(char *path, const char *name)
{
    char *slash = strrchr(path, '/');
    if (slash && !strcmp(slash + 1, name))
        *slash = '\0';
}

/*
 * The domain's group in the hierarchy of one controller (NULL: the v2
 * line) mounted at mount: mount + the process's path without a trailing
 * "emulator" and then "libvirt". NULL when the process sits at the top.
 */
static char *domain_dir(const char *root, int pid, const char *controller, const char *mount)
{
    char *path = NULL, *dir = NULL;
    if (!mount || vpack_host_process_cgroup(root, pid, controller, &path) < 0)
        return NULL;
    cut_component(path, "emulator");
    cut_component(path, "libvirt");
    if (path[0] && strcmp(path, "/") && asprintf(&dir, "%s%s", mount, path) < 0)
        dir = NULL;
    free(path);
    return dir;
}

static const char *ver_mount(const struct vpack_cgroup_host *h, enum vpack_cgroup_ver v,
                             const char *v1_mount)
{
    return v == VPACK_CGROUP_V1 ? v1_mount : v == VPACK_CGROUP_V2 ? h->mounts.unified : NULL;
}

void vpack_cgroup_domain_find(const char *root, const struct vpack_cgroup_host *h, int pid,
                              struct vpack_cgroup_domain *out)
{
    memset(out, 0, sizeof(*out));
    out->memory = domain_dir(root, pid, h->memory == VPACK_CGROUP_V1 ? "memory" : NULL,
                             ver_mount(h, h->memory, h->mounts.memory));
    if (out->memory)
        out->memory_ver = h->memory;
    out->threads = domain_dir(root, pid, h->cpuset == VPACK_CGROUP_V1 ? "cpuset" : NULL,
                              ver_mount(h, h->cpuset, h->mounts.cpuset));
    if (!out->threads)
        return;
    out->threads_ver = h->cpuset;
    /* With systemd, libvirt puts the thread groups in a "libvirt" child. */
    char *nested = NULL;
    if (asprintf(&nested, "%s/libvirt", out->threads) < 0)
        return;
    if (is_dir(root, nested)) {
        free(out->threads);
        out->threads = nested;
    } else {
        free(nested);
    }
}

void vpack_cgroup_domain_clear(struct vpack_cgroup_domain *d)
{
    free(d->memory);
    free(d->threads);
    memset(d, 0, sizeof(*d));
}

char *vpack_cgroup_partition_of(const struct vpack_cgroup_host *h,
                                const struct vpack_cgroup_domain *d)
{
    const char *mount = ver_mount(h, d->threads_ver, h->mounts.cpuset);
    size_t l = mount ? strlen(mount) : 0;
    if (!d->threads || !mount || strncmp(d->threads, mount, l) || d->threads[l] != '/')
        return NULL;
    char *p = strdup(d->threads + l);
    if (!p)
        return NULL;
    cut_component(p, "libvirt");
    char *slash = strrchr(p, '/');
    if (!slash || slash == p) { /* the domain's group sits at the top */
        free(p);
        return NULL;
    }
    *slash = '\0';
    return p;
}

int vpack_cgroup_iothread_ticks(const char *root, const struct vpack_cgroup_domain *d, int pid,
                                int id, uint64_t *ticks)
{
    char path[4096], *buf = NULL, *save = NULL;
    int *tids = NULL, r;
    unsigned n = 0, found;
    if (!d->threads || pid <= 0)
        return -ENOENT;
    /* v2's threaded groups list their threads in cgroup.threads. */
    if (snprintf(path, sizeof(path), "%s/iothread%d/%s", d->threads, id,
                 d->threads_ver == VPACK_CGROUP_V2 ? "cgroup.threads" : "tasks") >=
        (int)sizeof(path))
        return -ENAMETOOLONG;
    if ((r = vpack_host_read_file(root, path, 1 << 16, &buf, NULL)) < 0)
        return r;
    /* One TID a line: fewer TIDs than bytes. */
    if (!(tids = calloc(strlen(buf) + 1, sizeof(*tids)))) {
        free(buf);
        return -ENOMEM;
    }
    for (char *t = strtok_r(buf, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
        char tail;
        if (sscanf(t, "%d%c", &tids[n], &tail) == 1 && tids[n] > 0)
            n++;
    }
    r = vpack_host_threads_ticks(root, pid, tids, n, ticks, &found);
    free(tids);
    free(buf);
    return r;
}

int vpack_cgroup_numa_stat(const char *root, const struct vpack_cgroup_domain *d,
                           struct vpack_mem_share **out, unsigned *n, uint64_t *bytes)
{
    char path[4096], *buf = NULL;
    size_t len;
    unsigned max = 0;
    int r, version = d->memory_ver == VPACK_CGROUP_V2 ? 2 : 1;
    *out = NULL;
    *n = 0;
    *bytes = 0;
    if (!d->memory)
        return -ENOENT;
    if (snprintf(path, sizeof(path), "%s/memory.numa_stat", d->memory) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    if ((r = vpack_host_read_file(root, path, 1 << 20, &buf, &len)) < 0)
        return r;
    /* Every "N<node>=" has an '=': their count bounds the nodes listed. */
    for (size_t i = 0; i < len; i++)
        max += buf[i] == '=';
    r = -ENOMEM;
    if (max && !(*out = calloc(max, sizeof(**out))))
        goto cleanup;
    int v = max ? vpack_numastat_parse(buf, len, (uint64_t)sysconf(_SC_PAGESIZE), *out, max, n,
                                       bytes)
                : -EINVAL;
    if (v < 0)
        *n = 0;
    r = v > 0 ? v : version;
cleanup:
    free(buf);
    if (*n == 0) {
        free(*out);
        *out = NULL;
    }
    return r;
}

struct stale_walk {
    const char *root;
    const char *base; /* the unified hierarchy's mount point */
    const vpack_cpuset *online;
    struct vpack_cgroup_stale *arr;
    unsigned n;
    size_t cap;
};

/* The cpuset.cpus.partition of base+rel, newline cut; NULL when it has none. */
static char *read_partition(const struct stale_walk *w, const char *rel)
{
    char path[4096], *buf = NULL;
    if (snprintf(path, sizeof(path), "%s%s/cpuset.cpus.partition", w->base, rel) >=
            (int)sizeof(path) ||
        vpack_host_read_file(w->root, path, 4096, &buf, NULL) < 0)
        return NULL;
    buf[strcspn(buf, "\n")] = '\0';
    return buf;
}

/* True for a valid partition root ("root", "isolated"; not "... invalid (...)"). */
static bool valid_partition(const char *p)
{
    return p && (!strncmp(p, "root", 4) || !strncmp(p, "isolated", 8)) && !strstr(p, "invalid");
}

static int stale_add(struct stale_walk *w, const char *rel, const vpack_cpuset *missing)
{
    struct vpack_cgroup_stale *a = vpack_grow(w->arr, w->n, &w->cap, sizeof(*a));

    if (!a)
        return -ENOMEM;
    w->arr = a;
    struct vpack_cgroup_stale *s = &w->arr[w->n];
    if (!(s->group = strdup(rel)))
        return -ENOMEM;
    s->missing = *missing;
    s->partition = read_partition(w, rel);
    w->n++;
    return 0;
}

/*
 * The CPUs that valid partition roots among the children of base+rel (the
 * directory d) hold, their cpuset.cpus: the kernel takes them out of rel's
 * effective set.
 */
static void partition_held(const struct stale_walk *w, const char *rel, DIR *d,
                           vpack_cpuset *held)
{
    struct dirent *e;
    vpack_cpuset_zero(held);
    while ((e = readdir(d))) {
        char child[4096], dir[4200];
        vpack_cpuset cpus;
        bool empty;
        if (e->d_name[0] == '.' || e->d_type != DT_DIR ||
            snprintf(child, sizeof(child), "%s/%s", rel, e->d_name) >= (int)sizeof(child))
            continue;
        char *part = read_partition(w, child);
        snprintf(dir, sizeof(dir), "%s%s", w->base, child);
        if (valid_partition(part) && read_set(w->root, dir, "cpuset.cpus", &cpus, &empty) == 0)
            vpack_cpuset_or(held, held, &cpus);
        free(part);
    }
    rewinddir(d);
}

/* Checks the group base+rel (its parent's effective set: parent) and below it. */
static int check_group(struct stale_walk *w, const char *rel, const vpack_cpuset *parent,
                       int depth)
{
    char dir[4096], full[4200];
    vpack_cpuset eff, cpus, want, held;
    bool empty;
    int ret = 0;

    if (depth > 8 || snprintf(dir, sizeof(dir), "%s%s", w->base, rel) >= (int)sizeof(dir))
        return 0;
    /* No cpuset in this group: none below it either. */
    if (read_set(w->root, dir, "cpuset.cpus.effective", &eff, &empty) < 0)
        return 0;
    /*
     * A valid partition root has its cpuset.cpus to itself (the kernel takes
     * them out of its parent's set). Any other group: an empty cpuset.cpus
     * takes the parent's CPUs; so does one they do not meet.
     */
    char *part = read_partition(w, rel);
    bool own = valid_partition(part);
    free(part);
    if (read_set(w->root, dir, "cpuset.cpus", &cpus, &empty) < 0 || empty)
        want = *parent;
    else if (own)
        want = cpus;
    else
        vpack_cpuset_and(&want, &cpus, parent);
    if (vpack_cpuset_empty(&want))
        want = *parent;
    vpack_cpuset_and(&want, &want, w->online);
    snprintf(full, sizeof(full), "%s/%s", w->root && *w->root ? w->root : "/", dir);
    DIR *d = opendir(full);
    if (d)
        partition_held(w, rel, d, &held);
    else
        vpack_cpuset_zero(&held);
    vpack_cpuset_andnot(&want, &want, &eff);
    vpack_cpuset_andnot(&want, &want, &held);
    if (!vpack_cpuset_empty(&want))
        ret = stale_add(w, rel, &want);
    for (struct dirent *e; ret == 0 && d && (e = readdir(d));) {
        char child[4096];
        if (e->d_name[0] == '.' || e->d_type != DT_DIR ||
            snprintf(child, sizeof(child), "%s/%s", rel, e->d_name) >= (int)sizeof(child))
            continue;
        ret = check_group(w, child, &eff, depth + 1);
    }
    if (d)
        closedir(d);
    return ret;
}

int vpack_cgroup_check_effective(const char *root, const struct vpack_cgroup_host *h,
                                 const vpack_cpuset *online, const char *const *partitions,
                                 struct vpack_cgroup_stale **out, unsigned *n)
{
    const char *parts[VPACK_CGROUP_MAX_PARTITIONS];
    size_t nparts = partition_list(partitions, parts);
    struct stale_walk w = {root, h->mounts.unified, online, NULL, 0, 0};
    vpack_cpuset top;
    bool empty;
    int ret = 0;

    *out = NULL;
    *n = 0;
    if (h->cpuset != VPACK_CGROUP_V2 || !w.base)
        return 0;
    if (read_set(root, w.base, "cpuset.cpus.effective", &top, &empty) < 0)
        top = *online;
    for (size_t i = 0; ret == 0 && i < nparts; i++) {
        vpack_cpuset parent;
        /* A nested partition's parent is its parent group, not the top. */
        if (parent_set(root, w.base, parts[i], "cpuset.cpus.effective", &top, &parent) == 0)
            ret = check_group(&w, parts[i], &parent, 0);
    }
    if (ret < 0) {
        vpack_cgroup_stale_free(w.arr, w.n);
        return ret;
    }
    *out = w.arr;
    *n = w.n;
    return 0;
}

void vpack_cgroup_stale_free(struct vpack_cgroup_stale *s, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        free(s[i].group);
        free(s[i].partition);
    }
    free(s);
}
