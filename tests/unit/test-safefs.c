// SPDX-License-Identifier: MIT
/*
 * Trusted directories and files (adapters/safefs.c) on a scratch tree under
 * /tmp: symbolic links anywhere on the path, foreign owners, group- and
 * world-writable modes, planted links at the names vpackd writes, atomic
 * replacement, and the lock file (0600, replaced when someone else could
 * open it). The cases with a foreign owner need root (chown); vpack's tests
 * run as root, and a run as another user reports them skipped.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "safefs.h"

#define NOBODY 65534

static char root[256];

static const char *at(const char *rel)
{
    static char path[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof(path[k]), "%s/%s", root, rel);
    return path[k];
}

static void put(const char *rel, const char *content, mode_t mode)
{
    int fd = open(at(rel), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
}

static char *slurp(const char *rel)
{
    static char buf[256];
    int fd = open(at(rel), O_RDONLY);
    assert_true(fd >= 0);
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    assert_true(n >= 0);
    buf[n] = '\0';
    return buf;
}

static void mkdir_mode(const char *rel, mode_t mode)
{
    assert_int_equal(mkdir(at(rel), 0700), 0);
    assert_int_equal(chmod(at(rel), mode), 0);
}

/* Opens path as a trusted directory: the result, and the message in *msg (freed by the caller). */
static int open_dir(const char *path, mode_t create, char **msg)
{
    *msg = NULL;
    int fd = vpack_safefs_open_dir(path, create, msg);
    if (fd >= 0) {
        assert_null(*msg);
        close(fd);
        return 0;
    }
    assert_non_null(*msg);
    return fd;
}

static void expect_refused(const char *path, int err, const char *words)
{
    char *msg = NULL;
    assert_int_equal(open_dir(path, 0, &msg), err);
    if (!strstr(msg, words))
        fail_msg("'%s' does not say '%s'", msg, words);
    free(msg);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof(root), "/tmp/vpack-test-safefs-XXXXXX");
    assert_non_null(mkdtemp(root));
    return 0;
}

static int teardown(void **state)
{
    char cmd[300];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_open_and_create(void **state)
{
    char *msg = NULL;
    struct stat st;
    (void)state;
    assert_int_equal(open_dir(at("state"), 0, &msg), -ENOENT);
    assert_non_null(strstr(msg, "state: No such file"));
    free(msg);
    assert_int_equal(open_dir(at("state"), 0755, &msg), 0);
    assert_int_equal(stat(at("state"), &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(open_dir(at("state/"), 0, &msg), 0);
    assert_int_equal(open_dir(at("./state/."), 0, &msg), 0);
    int fd = vpack_safefs_open_dir(at("state"), 0, &msg);
    assert_true(fd >= 0);
    int sub = vpack_safefs_open_subdir(fd, at("state"), "domains", 0700, &msg);
    assert_true(sub >= 0);
    assert_int_equal(fstat(sub, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    close(sub);
    assert_int_equal(vpack_safefs_open_subdir(fd, at("state"), "../x", 0700, &msg), -EINVAL);
    free(msg);
    close(fd);
    expect_refused("relative/dir", -EINVAL, "not an absolute path");
    expect_refused(at("state/../state"), -EINVAL, "'..'");
    expect_refused("/", -EINVAL, "root directory");
}

static void test_links_and_files(void **state)
{
    (void)state;
    mkdir_mode("real", 0755);
    mkdir_mode("real/dir", 0755);
    assert_int_equal(symlink(at("real"), at("link")), 0);
    assert_int_equal(symlink(at("real/dir"), at("dirlink")), 0);
    expect_refused(at("link/dir"), -ELOOP, "link: a symbolic link");
    expect_refused(at("dirlink"), -ELOOP, "dirlink: a symbolic link");
    put("file", "x", 0644);
    expect_refused(at("file"), -ENOTDIR, "file: not a directory");
    expect_refused(at("file/sub"), -ENOTDIR, "file: not a directory");
}

static void test_modes(void **state)
{
    char *msg = NULL;
    (void)state;
    mkdir_mode("open", 0777);
    expect_refused(at("open"), -EPERM, "writable by others (mode 0777)");
    mkdir_mode("group", 0775);
    expect_refused(at("group"), -EPERM, "writable by its group (mode 0775)");
    mkdir_mode("group/dir", 0755);
    expect_refused(at("group/dir"), -EPERM, "group: writable by its group");
    /* A sticky world-writable ancestor (/tmp) is fine; as the directory itself it is not. */
    mkdir_mode("sticky", 01777);
    mkdir_mode("sticky/dir", 0700);
    assert_int_equal(open_dir(at("sticky/dir"), 0, &msg), 0);
    expect_refused(at("sticky"), -EPERM, "writable by others (mode 1777)");
}

static void test_owner(void **state)
{
    char *msg = NULL;
    (void)state;
    if (geteuid() != 0)
        skip();
    mkdir_mode("theirs", 0755);
    assert_int_equal(chown(at("theirs"), NOBODY, NOBODY), 0);
    expect_refused(at("theirs"), -EPERM, "theirs: belongs to uid 65534, not to root");
    mkdir_mode("theirs/mine", 0755);
    expect_refused(at("theirs/mine"), -EPERM, "theirs: belongs to uid 65534");
    /* Creating it would be no better: refused before anything is made. */
    expect_refused(at("theirs/new"), -EPERM, "theirs: belongs to uid 65534");
    struct stat st;
    assert_int_equal(stat(at("theirs/new"), &st), -1);
    mkdir_mode("ok", 0755);
    assert_int_equal(open_dir(at("ok"), 0, &msg), 0);
}

static void test_read(void **state)
{
    char *buf = NULL;
    size_t len = 0;
    (void)state;
    int fd = open(root, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    put("rec.json", "{\"a\":1}", 0600);
    assert_int_equal(vpack_safefs_read(fd, "rec.json", 1024, &buf, &len), 0);
    assert_string_equal(buf, "{\"a\":1}");
    assert_int_equal(len, 7);
    free(buf);
    assert_int_equal(vpack_safefs_read(fd, "rec.json", 3, &buf, &len), -EFBIG);
    put("secret", "root only", 0600);
    assert_int_equal(symlink("secret", at("link.json")), 0);
    assert_int_equal(vpack_safefs_read(fd, "link.json", 1024, &buf, &len), -ELOOP);
    put("open.json", "{}", 0666);
    assert_int_equal(vpack_safefs_read(fd, "open.json", 1024, &buf, &len), -EPERM);
    put("group.json", "{}", 0620);
    assert_int_equal(vpack_safefs_read(fd, "group.json", 1024, &buf, &len), -EPERM);
    /* A FIFO is refused, not waited on. */
    assert_int_equal(mkfifo(at("fifo.json"), 0600), 0);
    assert_int_equal(vpack_safefs_read(fd, "fifo.json", 1024, &buf, &len), -EINVAL);
    if (geteuid() == 0) {
        put("theirs.json", "{}", 0644);
        assert_int_equal(chown(at("theirs.json"), NOBODY, NOBODY), 0);
        assert_int_equal(vpack_safefs_read(fd, "theirs.json", 1024, &buf, &len), -EPERM);
    }
    assert_int_equal(vpack_safefs_read(fd, "missing.json", 1024, &buf, &len), -ENOENT);
    close(fd);
}

static void test_write(void **state)
{
    struct stat st;
    (void)state;
    int fd = open(root, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    assert_int_equal(vpack_safefs_write(fd, "rec.json", "first", 5, 0600), 0);
    assert_string_equal(slurp("rec.json"), "first");
    assert_int_equal(stat(at("rec.json"), &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(vpack_safefs_write(fd, "rec.json", "second", 6, 0600), 0);
    assert_string_equal(slurp("rec.json"), "second");
    assert_int_equal(lstat(at("rec.json.tmp"), &st), -1);
    /* Links planted at the temporary name and at the name: followed by neither. */
    put("victim", "untouched", 0600);
    assert_int_equal(symlink(at("victim"), at("rec.json.tmp")), 0);
    assert_int_equal(vpack_safefs_write(fd, "rec.json", "third", 5, 0600), 0);
    assert_string_equal(slurp("victim"), "untouched");
    assert_string_equal(slurp("rec.json"), "third");
    assert_int_equal(unlink(at("rec.json")), 0);
    assert_int_equal(symlink(at("victim"), at("rec.json")), 0);
    assert_int_equal(vpack_safefs_write(fd, "rec.json", "fourth", 6, 0600), 0);
    assert_string_equal(slurp("victim"), "untouched");
    assert_int_equal(lstat(at("rec.json"), &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_string_equal(slurp("rec.json"), "fourth");
    /* A failure leaves the old file. */
    assert_int_equal(mkdir(at("dir.json"), 0700), 0);
    assert_int_equal(vpack_safefs_write(fd, "dir.json", "x", 1, 0600), -EISDIR);
    assert_int_equal(lstat(at("dir.json.tmp"), &st), -1);
    close(fd);
}

static void test_lock(void **state)
{
    struct stat st;
    int holder = -1;
    char want[32];
    (void)state;
    int dfd = open(root, O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    int fd = vpack_safefs_lock(dfd, "vpackd.lock", &holder);
    assert_true(fd >= 0);
    assert_int_equal(stat(at("vpackd.lock"), &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    snprintf(want, sizeof(want), "%d\n", (int)getpid());
    assert_string_equal(slurp("vpackd.lock"), want);
    /* Held: a second taker is told who holds it. */
    assert_int_equal(vpack_safefs_lock(dfd, "vpackd.lock", &holder), -EWOULDBLOCK);
    assert_int_equal(holder, (int)getpid());
    close(fd);
    /* A 0644 lock file someone else opened and flocked (an older vpackd's): replaced. */
    assert_int_equal(chmod(at("vpackd.lock"), 0644), 0);
    int squatter = open(at("vpackd.lock"), O_RDONLY);
    assert_true(squatter >= 0);
    assert_int_equal(flock(squatter, LOCK_EX | LOCK_NB), 0);
    fd = vpack_safefs_lock(dfd, "vpackd.lock", &holder);
    assert_true(fd >= 0);
    assert_int_equal(stat(at("vpackd.lock"), &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    close(fd);
    close(squatter);
    /* A link in its place is not followed. */
    assert_int_equal(symlink(at("elsewhere"), at("link.lock")), 0);
    assert_int_equal(vpack_safefs_lock(dfd, "link.lock", &holder), -ELOOP);
    assert_int_equal(lstat(at("elsewhere"), &st), -1);
    close(dfd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_and_create, setup, teardown),
        cmocka_unit_test_setup_teardown(test_links_and_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_modes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_owner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
