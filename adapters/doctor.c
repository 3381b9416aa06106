// SPDX-License-Identifier: MIT
/* vpackctl doctor's facts from a root directory; see doctor.h. */
#include "doctor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "host.h"
#include "hostpower-priv.h"
#include "hostpower.h"
#include "vpack/config.h"
#include "vpack/grow.h"

#define CPU_DIR "sys/devices/system/cpu"

/* root/path as a directory stream, or NULL. */
static DIR *dir_at(int rootfd, const char *path)
{
    int fd = openat(rootfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d && fd >= 0)
        close(fd);
    return d;
}

/* The cpuidle states of one CPU, in state order (stateM's M). */
static int read_states(int rootfd, unsigned cpu, struct vpack_doctor_cpu *c)
{
    char path[128], sub[192], buf[64];
    unsigned m;
    struct dirent *e;
    size_t cap = 0;
    snprintf(path, sizeof(path), CPU_DIR "/cpu%u/cpuidle", cpu);
    DIR *d = dir_at(rootfd, path);
    if (!d)
        return 0;
    /* Count the states, then read state0..stateN-1 in order. */
    unsigned n = 0;
    while ((e = readdir(d)))
        if (vpack__numbered(e->d_name, "state", &m) && m + 1 > n)
            n = m + 1;
    closedir(d);
    for (m = 0; m < n; m++) {
        struct vpack_doctor_cstate s = {0};
        uint64_t v;
        snprintf(sub, sizeof(sub), "%s/state%u/name", path, m);
        if (vpack__attr_read(rootfd, sub, s.name, sizeof(s.name)) < 0)
            continue;
        snprintf(sub, sizeof(sub), "%s/state%u/latency", path, m);
        if (vpack__attr_u64(rootfd, sub, &v) == 0)
            s.latency_us = v > UINT32_MAX ? UINT32_MAX : (unsigned)v;
        snprintf(sub, sizeof(sub), "%s/state%u/disable", path, m);
        s.disabled = vpack__attr_read(rootfd, sub, buf, sizeof(buf)) == 0 && strcmp(buf, "0");
        struct vpack_doctor_cstate *g = vpack_grow(c->states, c->nstates, &cap, sizeof(s));
        if (!g)
            return -ENOMEM;
        c->states = g;
        c->states[c->nstates++] = s;
    }
    return 0;
}

static int read_cpus(int rootfd, const char *root, struct vpack_doctor_facts *f)
{
    vpack_cpuset online;
    char path[160], buf[64];
    size_t cap = 0;
    uint64_t v;

    if (vpack_host_online_cpus(root, &online) < 0)
        return 0;
    for (int id = vpack_cpuset_first(&online); id >= 0; id = vpack_cpuset_next(&online, id)) {
        struct vpack_doctor_cpu *g = vpack_grow(f->cpus, f->ncpus, &cap, sizeof(*f->cpus));
        if (!g)
            return -ENOMEM;
        f->cpus = g;
        struct vpack_doctor_cpu *c = &f->cpus[f->ncpus++];
        *c = (struct vpack_doctor_cpu){.id = id, .package = -1};
        snprintf(path, sizeof(path), CPU_DIR "/cpu%d/topology/physical_package_id", id);
        if (vpack__attr_u64(rootfd, path, &v) == 0 && v < 1u << 20)
            c->package = (int)v;
        snprintf(path, sizeof(path), CPU_DIR "/cpu%d/power/pm_qos_resume_latency_us", id);
        if (vpack__attr_read(rootfd, path, buf, sizeof(buf)) < 0 ||
            vpack_doctor_parse_qos(buf, &c->qos, &c->qos_us) < 0)
            c->qos = VPACK_QOS_UNKNOWN;
        if (read_states(rootfd, (unsigned)id, c) < 0)
            return -ENOMEM;
    }
    return 0;
}

/*
 * Whether process pid (a directory under root/proc) holds
 * /dev/cpu_dma_latency open: 1 or 0, -EACCES when its fd/ cannot be read.
 */
static int holds_dma(int rootfd, const char *pid)
{
    char path[320], link[64];
    struct dirent *e;
    bool found = false;
    snprintf(path, sizeof(path), "proc/%s/fd", pid);
    DIR *d = dir_at(rootfd, path);
    if (!d)
        return errno == EACCES || errno == EPERM ? -EACCES : 0;
    while (!found && (e = readdir(d))) {
        ssize_t n = readlinkat(dirfd(d), e->d_name, link, sizeof(link) - 1);
        if (n > 0) {
            link[n] = '\0';
            found = !strcmp(link, "/dev/cpu_dma_latency");
        }
    }
    closedir(d);
    return found;
}

static int read_procs(int rootfd, struct vpack_doctor_facts *f)
{
    struct dirent *e;
    size_t cap = 0;
    unsigned pid;
    char path[320], comm[32];
    DIR *d = dir_at(rootfd, "proc");
    if (!d)
        return 0;
    while ((e = readdir(d))) {
        if (!vpack__numbered(e->d_name, "", &pid) || pid == 0)
            continue;
        snprintf(path, sizeof(path), "proc/%s/comm", e->d_name);
        if (vpack__attr_read(rootfd, path, comm, sizeof(comm)) < 0)
            comm[0] = '\0';
        if (!strcmp(comm, "tuned"))
            f->tuned_running = true;
        if (!strcmp(comm, "irqbalance"))
            f->irqbalance_running = true;
        int held = holds_dma(rootfd, e->d_name);
        if (held < 0)
            f->procs_unreadable++;
        if (held <= 0)
            continue;
        struct vpack_doctor_holder *g = vpack_grow(f->holders, f->nholders, &cap, sizeof(*g));
        if (!g) {
            closedir(d);
            return -ENOMEM;
        }
        f->holders = g;
        f->holders[f->nholders] = (struct vpack_doctor_holder){.pid = (int)pid};
        snprintf(f->holders[f->nholders].comm, sizeof(f->holders[0].comm), "%s", comm);
        f->nholders++;
    }
    closedir(d);
    if (f->nholders) {
        int32_t v;
        int fd = openat(rootfd, "dev/cpu_dma_latency", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (read(fd, &v, sizeof(v)) == (ssize_t)sizeof(v)) {
                f->dma_limit_known = true;
                f->dma_limit_us = v;
            }
            close(fd);
        }
    }
    return 0;
}

static int read_irqs(int rootfd, struct vpack_doctor_facts *f)
{
    struct dirent *e, *a;
    size_t cap = 0;
    unsigned irq;
    char path[96], buf[4096];
    DIR *d = dir_at(rootfd, "proc/irq");
    if (!d)
        return 0;
    while ((e = readdir(d))) {
        struct vpack_doctor_irq q = {0};
        if (!vpack__numbered(e->d_name, "", &irq))
            continue;
        q.irq = (int)irq;
        /* A handler is a directory named for it: an IRQ without one never fires. */
        snprintf(path, sizeof(path), "proc/irq/%u", irq);
        DIR *qd = dir_at(rootfd, path);
        if (!qd)
            continue;
        while ((a = readdir(qd))) {
            struct stat st;
            if (a->d_name[0] == '.' || fstatat(dirfd(qd), a->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                !S_ISDIR(st.st_mode))
                continue;
            snprintf(q.name, sizeof(q.name), "%.47s", a->d_name);
            break;
        }
        closedir(qd);
        if (!q.name[0])
            continue;
        snprintf(path, sizeof(path), "proc/irq/%u/effective_affinity_list", irq);
        if (vpack__attr_read(rootfd, path, buf, sizeof(buf)) < 0 || !buf[0] ||
            vpack_cpuset_parse(&q.cpus, buf, NULL) < 0) {
            snprintf(path, sizeof(path), "proc/irq/%u/smp_affinity_list", irq);
            if (vpack__attr_read(rootfd, path, buf, sizeof(buf)) < 0 ||
                vpack_cpuset_parse(&q.cpus, buf, NULL) < 0)
                continue;
        }
        struct vpack_doctor_irq *g = vpack_grow(f->irqs, f->nirqs, &cap, sizeof(*g));
        if (!g) {
            closedir(d);
            return -ENOMEM;
        }
        f->irqs = g;
        f->irqs[f->nirqs++] = q;
    }
    closedir(d);
    return 0;
}

/* What vpackctl measure could read here, through the power adapter. */
static int read_power(const char *root, struct vpack_doctor_facts *f)
{
    struct vpack_hostpower *hp;
    struct vpack_hostpower_reading r;
    const char *w;
    if (vpack_hostpower_new(root, &hp) < 0)
        return -ENOMEM;
    vpack_hostpower_read(hp, &r);
    f->power_checked = true;
    f->rapl_package = !(w = vpack_hostpower_why(hp, VPACK_HW_RAPL_PACKAGE));
    snprintf(f->rapl_why, sizeof(f->rapl_why), "%s", w ? w : "");
    f->cstate_pkg = !(w = vpack_hostpower_why(hp, VPACK_HW_CSTATE_PKG));
    snprintf(f->cstate_why, sizeof(f->cstate_why), "%s", w ? w : "");
    f->cpuidle_residency = !vpack_hostpower_why(hp, VPACK_HW_CPUIDLE);
    vpack_hostpower_reading_clear(&r);
    vpack_hostpower_free(hp);
    return 0;
}

static int read_cgroup(int rootfd, const char *root, struct vpack_doctor_facts *f)
{
    struct vpack_cgroup_host h = {0};
    static const char *const partitions[] = {"machine.slice", "machine"};
    if (vpack_cgroup_detect(root, &h) < 0)
        return -ENOMEM;
    const char *mode = vpack_cgroup_version(&h);
    if (!strcmp(mode, "hybrid"))
        snprintf(f->cgroup_mode, sizeof(f->cgroup_mode), "hybrid (cpuset on %s)",
                 vpack_cgroup_ver_name(h.cpuset));
    else
        snprintf(f->cgroup_mode, sizeof(f->cgroup_mode), "%s", mode);
    const char *mnt = h.cpuset == VPACK_CGROUP_V1 ? h.mounts.cpuset : h.mounts.unified;
    for (size_t i = 0; mnt && i < sizeof(partitions) / sizeof(partitions[0]); i++) {
        char path[512];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", mnt[0] == '/' ? mnt + 1 : mnt, partitions[i]);
        if (fstatat(rootfd, path, &st, 0) == 0 && S_ISDIR(st.st_mode)) {
            snprintf(f->partition, sizeof(f->partition), "/%s", partitions[i]);
            break;
        }
    }
    vpack_cgroup_host_clear(&h);
    return 0;
}

static void read_hook(int rootfd, struct vpack_doctor_facts *f)
{
    static const char hook[] = "etc/libvirt/hooks/qemu.d/vpack";
    struct stat st;
    snprintf(f->hook_path, sizeof(f->hook_path), "/%s", hook);
    if (fstatat(rootfd, hook, &st, 0) < 0 || !S_ISREG(st.st_mode))
        f->hook = VPACK_HOOK_MISSING;
    else
        f->hook = st.st_mode & 0111 ? VPACK_HOOK_OK : VPACK_HOOK_NOT_EXECUTABLE;
}

/* The CPU model, and vpackd.conf's pc6_scope (the default without the file or the key). */
static void read_pc6(const char *root, struct vpack_doctor_facts *f)
{
    char *buf = NULL, *err = NULL;
    size_t len;
    struct vpack_config c;
    if (vpack_host_read_file(root, "proc/cpuinfo", 1 << 22, &buf, &len) == 0)
        f->cpu_known = vpack_cpuinfo_model(buf, len, &f->cpu) == 0;
    free(buf);
    buf = NULL;
    /* The default path under root (vpack_host_read_file() takes it without its leading '/'). */
    int r = vpack_host_read_file(root, &VPACK_DEFAULT_CONFIG[1], 1 << 20, &buf, &len);
    if (r < 0) {
        snprintf(f->conf_note, sizeof(f->conf_note), "%s: %s, so the default", VPACK_DEFAULT_CONFIG,
                 strerror(-r));
        return;
    }
    if (vpack_config_init(&c) < 0 || vpack_config_parse(&c, buf, &err) < 0) {
        snprintf(f->conf_note, sizeof(f->conf_note), "%s does not parse: %s", VPACK_DEFAULT_CONFIG,
                 err ? err : "out of memory");
    } else {
        f->pc6_system_conf = c.policy.pc6_system;
        snprintf(f->conf_note, sizeof(f->conf_note), "%s%s", VPACK_DEFAULT_CONFIG,
                 c.pc6_scope_set ? "" : ", the default");
    }
    vpack_config_clear(&c);
    free(err);
    free(buf);
}

int vpack_doctor_read(const char *root, struct vpack_doctor_facts *f)
{
    char buf[64];
    int r;

    *f = (struct vpack_doctor_facts){0};
    int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return -errno;
    if (vpack__attr_read(rootfd, CPU_DIR "/cpuidle/current_driver", buf, sizeof(buf)) == 0)
        snprintf(f->driver, sizeof(f->driver), "%s", buf);
    if (vpack__attr_read(rootfd, CPU_DIR "/cpuidle/current_governor", buf, sizeof(buf)) == 0 ||
        vpack__attr_read(rootfd, CPU_DIR "/cpuidle/current_governor_ro", buf, sizeof(buf)) == 0)
        snprintf(f->governor, sizeof(f->governor), "%s", buf);
    if (vpack__attr_read(rootfd, "etc/tuned/active_profile", buf, sizeof(buf)) == 0)
        snprintf(f->tuned_profile, sizeof(f->tuned_profile), "%s", buf);
    read_hook(rootfd, f);
    read_pc6(root, f);
    if ((r = read_cpus(rootfd, root, f)) < 0 || (r = read_procs(rootfd, f)) < 0 ||
        (r = read_irqs(rootfd, f)) < 0 || (r = read_power(root, f)) < 0 ||
        (r = read_cgroup(rootfd, root, f)) < 0) {
        close(rootfd);
        vpack_doctor_facts_clear(f);
        return r;
    }
    close(rootfd);
    return 0;
}
