// SPDX-License-Identifier: MIT
#include "safefs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host.h"
#include "vpack/errmsg.h"

/* Who a trusted directory or file must belong to, in words. */
static const char *owner_words(void)
{
    return geteuid() == 0 ? "root" : "the user running vpackd";
}

/*
 * Checks a directory on a trusted path (last: the directory itself, else an
 * ancestor). Returns 0 or -errno with *errmsg.
 */
static int check_dir(const struct stat *st, const char *shown, bool last, char **errmsg)
{
    uid_t me = geteuid();
    if (S_ISLNK(st->st_mode))
        return vpack_errmsg_set(-ELOOP, errmsg,
                                "%s: a symbolic link (a trusted path has none; give the real path)",
                                shown);
    if (!S_ISDIR(st->st_mode))
        return vpack_errmsg_set(-ENOTDIR, errmsg, "%s: not a directory", shown);
    if (st->st_uid != me && (last || st->st_uid != 0))
        return vpack_errmsg_set(-EPERM, errmsg,
                                "%s: belongs to uid %u, not to %s: refusing to trust it", shown,
                                (unsigned)st->st_uid, owner_words());
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) && (last || !(st->st_mode & S_ISVTX)))
        return vpack_errmsg_set(-EPERM, errmsg,
                                "%s: writable by %s (mode %04o): refusing to trust it", shown,
                                st->st_mode & S_IWOTH ? "others" : "its group",
                                (unsigned)(st->st_mode & 07777));
    return 0;
}

/*
 * Opens the directory name under the trusted directory fd (O_PATH for an
 * ancestor, which needs only search permission), creating it when asked,
 * and checks it. Returns the descriptor or -errno with *errmsg.
 */
static int open_step(int fd, const char *name, const char *shown, bool last, mode_t create_mode,
                     char **errmsg)
{
    int flags = (last ? O_RDONLY : O_PATH) | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    struct stat st;
    int nfd = openat(fd, name, flags);
    if (nfd < 0 && errno == ENOENT && last && create_mode) {
        if (mkdirat(fd, name, create_mode) < 0 && errno != EEXIST)
            return vpack_errmsg_set(-errno, errmsg, "cannot create %s: %s", shown, strerror(errno));
        nfd = openat(fd, name, flags);
    }
    if (nfd < 0) {
        int e = errno;
        /* O_NOFOLLOW | O_DIRECTORY on a link: ELOOP or ENOTDIR; say which it was. */
        if ((e == ELOOP || e == ENOTDIR) && fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            return check_dir(&st, shown, last, errmsg);
        return vpack_errmsg_set(-e, errmsg, "%s: %s", shown, e == ENOTDIR ? "not a directory"
                                                                        : strerror(e));
    }
    int r = fstat(nfd, &st) < 0 ? vpack_errmsg_set(-errno, errmsg, "%s: %s", shown, strerror(errno))
                                : check_dir(&st, shown, last, errmsg);
    if (r < 0) {
        close(nfd);
        return r;
    }
    return nfd;
}

int vpack_safefs_open_dir(const char *path, mode_t create_mode, char **errmsg)
{
    char copy[PATH_MAX], shown[PATH_MAX] = "", *comp[256], *save = NULL;
    size_t shown_len = 0;
    unsigned n = 0;
    struct stat st;
    int fd, r;
    if (errmsg)
        *errmsg = NULL;
    if (!path || path[0] != '/')
        return vpack_errmsg_set(-EINVAL, errmsg, "%s: not an absolute path", path ? path : "(null)");
    if (strlen(path) >= sizeof(copy))
        return vpack_errmsg_set(-ENAMETOOLONG, errmsg, "%.64s...: path too long", path);
    strcpy(copy, path);
    for (char *t = strtok_r(copy, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (!strcmp(t, "."))
            continue;
        if (!strcmp(t, ".."))
            return vpack_errmsg_set(-EINVAL, errmsg, "%s: '..' is not allowed in a trusted path",
                                    path);
        if (n == sizeof(comp) / sizeof(comp[0]) || strlen(t) > NAME_MAX)
            return vpack_errmsg_set(-ENAMETOOLONG, errmsg, "%s: path too long", path);
        comp[n++] = t;
    }
    if (n == 0)
        return vpack_errmsg_set(-EINVAL, errmsg, "%s: the root directory cannot be vpackd's", path);
    if ((fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
        return vpack_errmsg_set(-errno, errmsg, "/: %s", strerror(errno));
    r = fstat(fd, &st) < 0 ? vpack_errmsg_set(-errno, errmsg, "/: %s", strerror(errno))
                           : check_dir(&st, "/", false, errmsg);
    for (unsigned i = 0; r == 0 && i < n; i++) {
        shown_len += (size_t)snprintf(shown + shown_len, sizeof(shown) - shown_len, "/%s", comp[i]);
        int nfd = open_step(fd, comp[i], shown, i + 1 == n, create_mode, errmsg);
        close(fd);
        fd = nfd;
        r = nfd < 0 ? nfd : 0;
    }
    if (r < 0 && fd >= 0)
        close(fd);
    return r < 0 ? r : fd;
}

int vpack_safefs_open_subdir(int dirfd, const char *shown, const char *name, mode_t create_mode,
                             char **errmsg)
{
    char full[PATH_MAX];
    if (errmsg)
        *errmsg = NULL;
    snprintf(full, sizeof(full), "%s/%s", shown, name);
    if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
        return vpack_errmsg_set(-EINVAL, errmsg, "%s: not a single path component", full);
    return open_step(dirfd, name, full, true, create_mode, errmsg);
}

/* A file in a trusted directory is trusted when it is ours and nobody else may write it. */
static int check_file(int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EINVAL;
    if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)))
        return -EPERM;
    return 0;
}

int vpack_safefs_read(int dirfd, const char *name, size_t max, char **buf, size_t *len)
{
    /* O_NONBLOCK: a FIFO in its place must not hang the agent before fstat says what it is. */
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = check_file(fd);
    if (r == 0)
        r = vpack_host_read_fd(fd, max, buf, len);
    close(fd);
    return r;
}

/* Writes all of data to fd. Returns 0 or -errno. */
static int write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, data, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        data += w;
        len -= (size_t)w;
    }
    return 0;
}

int vpack_safefs_write(int dirfd, const char *name, const void *data, size_t len, mode_t mode)
{
    char tmp[NAME_MAX + 1];
    int fd = -1, r;
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", name) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    for (int attempt = 0; fd < 0; attempt++) {
        fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        /* A temporary file left by a crash (or anything else by that name): remove it, once. */
        if (fd < 0 && (errno != EEXIST || attempt > 0 || unlinkat(dirfd, tmp, 0) < 0))
            return -errno;
    }
    if ((r = write_all(fd, data, len)) < 0)
        goto fail;
    if (fsync(fd) < 0) {
        r = -errno;
        goto fail;
    }
    r = close(fd) < 0 ? -errno : 0;
    fd = -1;
    if (r < 0)
        goto fail;
    if (renameat(dirfd, tmp, dirfd, name) < 0) {
        r = -errno;
        goto fail;
    }
    /* The rename itself is durable only once the directory is. */
    return fsync(dirfd) < 0 ? -errno : 0;
fail:
    if (fd >= 0)
        close(fd);
    unlinkat(dirfd, tmp, 0);
    return r;
}

/* The pid the lock's holder wrote in it, or 0. */
static int read_holder(int fd)
{
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    long pid = strtol(buf, NULL, 10);
    return pid > 0 && pid < INT_MAX ? (int)pid : 0;
}

int vpack_safefs_lock(int dirfd, const char *name, int *holder)
{
    struct stat st, now;
    int fd = -1;
    *holder = 0;
    for (int attempt = 0; fd < 0; attempt++) {
        fd = openat(dirfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
        if (fd < 0)
            return -errno;
        if (fstat(fd, &st) < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        if (!S_ISREG(st.st_mode)) {
            close(fd);
            return -EINVAL;
        }
        if (st.st_uid == geteuid() && !(st.st_mode & 077))
            break;
        /* Someone else could open it (and hold a flock on it): replace it. */
        close(fd);
        fd = -1;
        if (attempt > 0)
            return -EPERM;
        /* Only the file we looked at, not one another vpackd put there meanwhile. */
        if (fstatat(dirfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_ino == st.st_ino &&
            now.st_dev == st.st_dev && unlinkat(dirfd, name, 0) < 0)
            return -errno;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        if (e == EWOULDBLOCK)
            *holder = read_holder(fd);
        close(fd);
        return -e;
    }
    char pid[32];
    int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}
