/* SPDX-License-Identifier: MIT */
/*
 * Trusted directories and the files in them: vpackd's state directory (its
 * lock, the hook's records) and the control socket's directory.
 *
 * A directory is trusted when its path is walked from / one component at a
 * time, each opened relative to its parent with O_NOFOLLOW (no symbolic link
 * anywhere on the path), every ancestor belongs to root or to the user
 * running vpackd and is writable by nobody else unless it is sticky (/tmp),
 * and the directory itself belongs to the user running vpackd (root, for the
 * service) and is writable by nobody else. Files in it are opened relative
 * to its descriptor with O_NOFOLLOW and trusted only when they belong to that
 * user and are writable by nobody else; writes go to a new temporary file
 * that is fsynced and renamed over the old one, and the directory is fsynced.
 */
#ifndef VPACK_SAFEFS_H
#define VPACK_SAFEFS_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Opens the trusted directory path (absolute; "." and empty components are
 * skipped, ".." is refused). When create_mode is not 0 and the last
 * component is missing, it is created with that mode. Returns a descriptor
 * (O_RDONLY | O_DIRECTORY | O_CLOEXEC; the caller closes it), or -errno with
 * *errmsg naming the component at fault: -EPERM for an owner or mode that
 * is not trusted, -ELOOP for a symbolic link, -ENOTDIR, -EINVAL for a path
 * that is not absolute.
 */
int vpack_safefs_open_dir(const char *path, mode_t create_mode, char **errmsg);

/*
 * The same for the directory name (one component) under the trusted
 * directory dirfd; shown is dirfd's path, for the message.
 */
int vpack_safefs_open_subdir(int dirfd, const char *shown, const char *name, mode_t create_mode,
                             char **errmsg);

/*
 * Reads the file name under dirfd whole (at most max bytes, -EFBIG beyond)
 * into a NUL-terminated buffer the caller frees. -ELOOP for a symbolic
 * link, -EINVAL for something that is not a regular file, -EPERM when it
 * belongs to someone else or others may write it; else 0 or -errno.
 */
int vpack_safefs_read(int dirfd, const char *name, size_t max, char **buf, size_t *len);

/*
 * Replaces (or creates) name under dirfd with len bytes of data, mode mode:
 * written to "NAME.tmp" (created with O_EXCL | O_NOFOLLOW), fsynced,
 * renamed over name, then the directory fsynced. A crash leaves the old
 * file or the new one, never half of one. Returns 0 or -errno.
 */
int vpack_safefs_write(int dirfd, const char *name, const void *data, size_t len, mode_t mode);

/*
 * Takes the lock file name under dirfd: opened O_RDWR | O_NOFOLLOW, mode
 * 0600, flock(LOCK_EX | LOCK_NB), our pid written in it. A file there that
 * belongs to someone else or that others may read (0644, left by an older
 * vpackd: anyone could open and flock it) is replaced first. Returns the
 * descriptor (held for as long as the lock is), -EWOULDBLOCK with *holder
 * set to the pid written by the holder (0 if unknown), or -errno.
 */
int vpack_safefs_lock(int dirfd, const char *name, int *holder);

#endif
