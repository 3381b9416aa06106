// SPDX-License-Identifier: MIT
/* The host's power readings: cpuidle residency and RAPL energy; see hostpower.h. */
#include "hostpower.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A RAPL zone's energy counter, wraps undone, kept across readings. */
struct rapl_zone {
    char dir[64];   /* "intel-rapl:0" */
    uint64_t prev;  /* last raw energy_uj */
    uint64_t total; /* first reading plus every increase since, in uJ */
};

struct vpack_hostpower {
    char *root;
    struct rapl_zone *zones;
    size_t nzones;
};

int vpack_hostpower_new(const char *root, struct vpack_hostpower **out)
{
    struct vpack_hostpower *hp = calloc(1, sizeof(*hp));
    *out = NULL;
    if (!hp || !(hp->root = strdup(root))) {
        free(hp);
        return -ENOMEM;
    }
    *out = hp;
    return 0;
}

void vpack_hostpower_free(struct vpack_hostpower *hp)
{
    if (!hp)
        return;
    free(hp->zones);
    free(hp->root);
    free(hp);
}

void vpack_hostpower_reading_clear(struct vpack_hostpower_reading *r)
{
    free(r->idle);
    free(r->names);
    free(r->energy);
    *r = (struct vpack_hostpower_reading){0};
}

/* Reads a small attribute file dir/path into buf without its trailing newline. */
static int read_attr(int dir, const char *path, char *buf, size_t size)
{
    ssize_t n;
    int fd = openat(dir, path, O_RDONLY | O_CLOEXEC), ret = 0;
    if (fd < 0)
        return -errno;
    do
        n = read(fd, buf, size - 1);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        ret = -errno;
    close(fd);
    if (ret < 0)
        return ret;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        n--;
    buf[n] = '\0';
    return 0;
}

static int read_u64(int dir, const char *path, uint64_t *v)
{
    char buf[32], *end;
    int r = read_attr(dir, path, buf, sizeof(buf));
    if (r < 0)
        return r;
    errno = 0;
    unsigned long long x = strtoull(buf, &end, 10);
    if (end == buf || *end || errno || buf[0] == '-')
        return -EINVAL;
    *v = x;
    return 0;
}

/* True when s is prefix followed by decimal digits only; the number goes to *n. */
static bool numbered(const char *s, const char *prefix, unsigned *n)
{
    size_t k = strlen(prefix);
    char *end;
    if (strncmp(s, prefix, k) || s[k] < '0' || s[k] > '9')
        return false;
    errno = 0;
    unsigned long v = strtoul(s + k, &end, 10);
    if (*end || errno || v > 1u << 30)
        return false;
    *n = (unsigned)v;
    return true;
}

/* Adds the states of root/sys/devices/system/cpu/cpuN/cpuidle/stateM to h. */
static int read_cpuidle(const char *root, struct vpack_hostpower_reading *h)
{
    char path[4096], sub[320], name[VPACK_CPUIDLE_NAME_MAX];
    struct dirent *e, *s;
    unsigned cpu, state;
    uint64_t us;
    DIR *cpus;
    if (snprintf(path, sizeof(path), "%s/sys/devices/system/cpu", root) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    cpus = opendir(path);
    if (!cpus)
        return -errno;
    while ((e = readdir(cpus))) {
        if (!numbered(e->d_name, "cpu", &cpu))
            continue;
        snprintf(sub, sizeof(sub), "%s/cpuidle", e->d_name);
        int fd = openat(dirfd(cpus), sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            continue; /* no cpuidle driver, or the CPU is offline */
        DIR *states = fdopendir(fd);
        if (!states) {
            close(fd);
            continue;
        }
        while ((s = readdir(states))) {
            if (!numbered(s->d_name, "state", &state))
                continue;
            snprintf(sub, sizeof(sub), "%s/name", s->d_name);
            if (read_attr(fd, sub, name, sizeof(name)) < 0 || !name[0])
                continue;
            snprintf(sub, sizeof(sub), "%s/time", s->d_name);
            if (read_u64(fd, sub, &us) < 0)
                continue;
            if (h->nidle == h->cap) {
                size_t ncap = h->cap ? h->cap * 2 : 64;
                struct vpack_prom_idle_state *ni = realloc(h->idle, ncap * sizeof(*ni));
                if (!ni)
                    break;
                h->idle = ni;
                char(*nn)[VPACK_CPUIDLE_NAME_MAX] = realloc(h->names, ncap * sizeof(*nn));
                if (!nn)
                    break;
                h->names = nn;
                h->cap = ncap;
            }
            memcpy(h->names[h->nidle], name, sizeof(name));
            h->idle[h->nidle++] = (struct vpack_prom_idle_state){cpu, NULL, (double)us / 1e6};
        }
        closedir(states);
    }
    closedir(cpus);
    /* Only now: names[] may have moved while it grew. */
    for (size_t i = 0; i < h->nidle; i++)
        h->idle[i].name = h->names[i];
    return 0;
}

/* "package-3" or "package-3-die-1" -> 3. */
static bool rapl_package(const char *name, unsigned *pkg)
{
    char *end;
    if (strncmp(name, "package-", 8) || name[8] < '0' || name[8] > '9')
        return false;
    unsigned long v = strtoul(name + 8, &end, 10);
    unsigned die;
    if (v > 1u << 20 || (*end && !numbered(end, "-die-", &die)))
        return false;
    *pkg = (unsigned)v;
    return true;
}

static struct rapl_zone *rapl_zone(struct vpack_hostpower *hp, const char *dir, bool *fresh)
{
    *fresh = false;
    for (size_t i = 0; i < hp->nzones; i++)
        if (!strcmp(hp->zones[i].dir, dir))
            return &hp->zones[i];
    struct rapl_zone *nz = realloc(hp->zones, (hp->nzones + 1) * sizeof(*nz));
    if (!nz)
        return NULL;
    hp->zones = nz;
    nz = &hp->zones[hp->nzones++];
    *nz = (struct rapl_zone){0};
    snprintf(nz->dir, sizeof(nz->dir), "%s", dir);
    *fresh = true;
    return nz;
}

/*
 * Adds the package energy of root/sys/class/powercap/intel-rapl:N (the
 * top-level zones; AMD's RAPL uses the same names) to h, summing the dies
 * of one package. No powercap directory or no package zone: nothing.
 */
static void read_rapl(struct vpack_hostpower *hp, struct vpack_hostpower_reading *h)
{
    char path[4096], sub[320], name[64];
    struct dirent *e;
    unsigned zone, pkg;
    uint64_t raw, range;
    if (snprintf(path, sizeof(path), "%s/sys/class/powercap", hp->root) >= (int)sizeof(path))
        return;
    DIR *d = opendir(path);
    if (!d)
        return;
    while ((e = readdir(d))) {
        bool fresh;
        if (!numbered(e->d_name, "intel-rapl:", &zone) || strlen(e->d_name) >= sizeof(hp->zones->dir))
            continue;
        snprintf(sub, sizeof(sub), "%s/name", e->d_name);
        if (read_attr(dirfd(d), sub, name, sizeof(name)) < 0 || !rapl_package(name, &pkg))
            continue;
        snprintf(sub, sizeof(sub), "%s/energy_uj", e->d_name);
        if (read_u64(dirfd(d), sub, &raw) < 0)
            continue; /* energy_uj is root-only on recent kernels */
        snprintf(sub, sizeof(sub), "%s/max_energy_range_uj", e->d_name);
        if (read_u64(dirfd(d), sub, &range) < 0)
            range = 0;
        struct rapl_zone *z = rapl_zone(hp, e->d_name, &fresh);
        if (!z)
            break;
        z->total = fresh ? raw : z->total + vpack_prom_wrap_delta(z->prev, raw, range);
        z->prev = raw;
        size_t i;
        for (i = 0; i < h->nenergy && h->energy[i].package != pkg; i++)
            ;
        if (i == h->nenergy) {
            struct vpack_prom_energy *ne = realloc(h->energy, (h->nenergy + 1) * sizeof(*ne));
            if (!ne)
                break;
            h->energy = ne;
            h->energy[h->nenergy++] = (struct vpack_prom_energy){pkg, 0};
        }
        h->energy[i].joules += (double)z->total / 1e6;
    }
    closedir(d);
}

int vpack_hostpower_read(struct vpack_hostpower *hp, struct vpack_hostpower_reading *out)
{
    *out = (struct vpack_hostpower_reading){0};
    int r = read_cpuidle(hp->root, out);
    read_rapl(hp, out);
    return r;
}
