// SPDX-License-Identifier: MIT
/*
 * unit-filters [--allow FILE | --log-outside FILE] COMMAND [ARG...]: runs
 * COMMAND under the
 * seccomp filters systemd installs for these options of vpackd.service
 * (systemd 252, src/shared/seccomp-util.c), for test-hardening.sh, which
 * cannot ask systemd (not PID 1 here):
 *
 *   RestrictNamespaces=yes     setns() fails; unshare() and clone() with a
 *                              CLONE_NEW* flag fail (EPERM); clone3() ENOSYS
 *                              (its flags are out of a filter's reach; libc
 *                              falls back to clone())
 *   LockPersonality=yes        personality() to anything but PER_LINUX: EPERM
 *   MemoryDenyWriteExecute=yes mmap() writable and executable, mprotect() and
 *                              pkey_mprotect() to executable, shmat() with
 *                              SHM_EXEC: EPERM
 *   RestrictRealtime=yes       sched_setscheduler() to SCHED_FIFO, SCHED_RR,
 *                              SCHED_DEADLINE (or an unknown policy): EPERM
 *   RestrictSUIDSGID=yes       chmod(), fchmod(), fchmodat(), creat(), open()
 *                              and openat() with O_CREAT, mknod(), mknodat()
 *                              with S_ISUID or S_ISGID: EPERM
 *   ProtectClock=yes           @clock (adjtimex, clock_adjtime, clock_settime,
 *                              settimeofday): EPERM
 *   ProtectHostname=yes        sethostname(), setdomainname(): EPERM (the UTS
 *                              namespace is the caller's: unshare --uts)
 *   PrivateDevices=yes         @raw-io (ioperm, iopl): EPERM (the /dev is the
 *                              caller's)
 *   SystemCallArchitectures=   the filter is for the native architecture
 *     native                   only; a call of another (i386, x32) kills
 *
 * With --allow FILE (system call names, one a line: what the unit's
 * SystemCallFilter= lines allow, groups expanded), SystemCallFilter= with
 * SystemCallErrorNumber=EPERM: every other call fails with EPERM, and the
 * kernel logs it (the filter's SECCOMP_FILTER_FLAG_LOG: an audit record,
 * type=1326, with the pid and the call's number, where "errno" is in
 * /proc/sys/kernel/seccomp/actions_logged, as by default).
 * With --log-outside FILE instead, every other call is let through but
 * logged (SECCOMP_RET_LOG): what such a filter would refuse, for a program
 * that must not fail (`meson test --wrapper`).
 * Sets no_new_privs first (a seccomp filter needs it without CAP_SYS_ADMIN).
 *
 * unit-filters --name NUMBER: the name of the native system call NUMBER
 * (for reading those audit records).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef SCHED_DEADLINE
#define SCHED_DEADLINE 6
#endif

/* The comparisons spelled out: SCMP_A0() leaves datum_b to the initializer,
 * which clang's -Wmissing-field-initializers refuses. */
static struct scmp_arg_cmp masked(unsigned arg, scmp_datum_t mask)
{
    return (struct scmp_arg_cmp){.arg = arg, .op = SCMP_CMP_MASKED_EQ, .datum_a = mask, .datum_b = mask};
}

static struct scmp_arg_cmp cmp(unsigned arg, enum scmp_compare op, scmp_datum_t v)
{
    return (struct scmp_arg_cmp){.arg = arg, .op = op, .datum_a = v, .datum_b = 0};
}

/* Adds a rule for the call called name, if this architecture has it. */
static int rule(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n,
                const struct scmp_arg_cmp *args)
{
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR || nr < 0)
        return 0;
    int r = seccomp_rule_add_exact_array(ctx, action, nr, n, args);
    if (r < 0)
        fprintf(stderr, "unit-filters: rule for %s: %s\n", name, strerror(-r));
    return r;
}

static int unit_rules(scmp_filter_ctx ctx)
{
    static const unsigned long ns_flags[] = {CLONE_NEWCGROUP, CLONE_NEWIPC, CLONE_NEWNET,
                                             CLONE_NEWNS,     CLONE_NEWPID, CLONE_NEWUSER,
                                             CLONE_NEWUTS};
    static const char *const denied[] = {
        "setns",        "adjtimex",      "clock_adjtime", "clock_adjtime64", "clock_settime",
        "clock_settime64", "settimeofday", "sethostname",  "setdomainname",  "ioperm",
        "iopl"};
    const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    struct scmp_arg_cmp a[2];
    int r = 0;

    for (size_t i = 0; r == 0 && i < sizeof(denied) / sizeof(denied[0]); i++)
        r = rule(ctx, eperm, denied[i], 0, NULL);
    /* RestrictNamespaces=yes */
    for (size_t i = 0; r == 0 && i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++) {
        a[0] = masked(0, ns_flags[i]);
        if ((r = rule(ctx, eperm, "unshare", 1, a)) == 0)
            r = rule(ctx, eperm, "clone", 1, a); /* x86_64: the flags are argument 0 */
    }
    if (r == 0)
        r = rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL);
    /* LockPersonality=yes */
    if (r == 0) {
        a[0] = cmp(0, SCMP_CMP_NE, PER_LINUX);
        r = rule(ctx, eperm, "personality", 1, a);
    }
    /* MemoryDenyWriteExecute=yes */
    if (r == 0) {
        a[0] = masked(2, PROT_EXEC | PROT_WRITE);
        r = rule(ctx, eperm, "mmap", 1, a);
    }
    if (r == 0) {
        a[0] = masked(2, PROT_EXEC);
        if ((r = rule(ctx, eperm, "mprotect", 1, a)) == 0)
            r = rule(ctx, eperm, "pkey_mprotect", 1, a);
    }
    if (r == 0) {
        a[0] = masked(2, SHM_EXEC);
        r = rule(ctx, eperm, "shmat", 1, a);
    }
    /* RestrictRealtime=yes */
    if (r == 0) {
        a[0] = cmp(1, SCMP_CMP_EQ, SCHED_FIFO);
        if ((r = rule(ctx, eperm, "sched_setscheduler", 1, a)) == 0) {
            a[0] = cmp(1, SCMP_CMP_EQ, SCHED_RR);
            r = rule(ctx, eperm, "sched_setscheduler", 1, a);
        }
        if (r == 0) {
            a[0] = cmp(1, SCMP_CMP_GE, SCHED_DEADLINE);
            r = rule(ctx, eperm, "sched_setscheduler", 1, a);
        }
    }
    /* RestrictSUIDSGID=yes */
    static const unsigned bits[] = {S_ISUID, S_ISGID};
    for (size_t b = 0; r == 0 && b < sizeof(bits) / sizeof(bits[0]); b++) {
        static const struct {
            const char *name;
            int flags_arg, mode_arg; /* flags_arg -1: no O_CREAT to look at */
        } calls[] = {{"chmod", -1, 1},  {"fchmod", -1, 1}, {"fchmodat", -1, 2}, {"creat", -1, 1},
                     {"mknod", -1, 1},  {"mknodat", -1, 2}, {"open", 1, 2},     {"openat", 2, 3}};
        for (size_t i = 0; r == 0 && i < sizeof(calls) / sizeof(calls[0]); i++) {
            unsigned n = 0;
            if (calls[i].flags_arg >= 0)
                a[n++] = masked((unsigned)calls[i].flags_arg, O_CREAT);
            a[n++] = masked((unsigned)calls[i].mode_arg, bits[b]);
            r = rule(ctx, eperm, calls[i].name, n, a);
        }
    }
    return r;
}

/* Loads the unit's filter. Returns 0 or -errno. */
static int unit_filter(void)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx)
        return -ENOMEM;
    /* SystemCallArchitectures=native: only the native architecture is in
     * the filter (seccomp_init's default); a call of any other kills. */
    int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (r == 0)
        r = unit_rules(ctx);
    if (r == 0)
        r = seccomp_load(ctx);
    seccomp_release(ctx);
    return r;
}

/* A filter letting every call in the file through and giving all others
 * other_action, logged. */
static int allow_list(const char *file, uint32_t other_action)
{
    char line[128];
    int r = 0;
    FILE *f = fopen(file, "re");
    if (!f) {
        fprintf(stderr, "unit-filters: %s: %s\n", file, strerror(errno));
        return -errno;
    }
    scmp_filter_ctx ctx = seccomp_init(other_action);
    if (!ctx) {
        fclose(f);
        return -ENOMEM;
    }
    /* Refusals logged too (SCMP_ACT_LOG logs whatever this says). */
    r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_LOG, 1);
    while (r == 0 && fgets(line, sizeof(line), f)) {
        line[strcspn(line, " \t\r\n")] = '\0';
        if (line[0] && line[0] != '#')
            r = rule(ctx, SCMP_ACT_ALLOW, line, 0, NULL);
    }
    fclose(f);
    if (r == 0)
        r = seccomp_load(ctx);
    seccomp_release(ctx);
    return r;
}

int main(int argc, char **argv)
{
    const char *listfile = NULL;
    uint32_t other_action = SCMP_ACT_LOG;
    int argi = 1, r;
    if (argc == 3 && !strcmp(argv[1], "--name")) {
        char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, atoi(argv[2]));
        printf("%s\n", name ? name : argv[2]);
        free(name);
        return 0;
    }
    if (argc > 2 && (!strcmp(argv[1], "--log-outside") || !strcmp(argv[1], "--allow"))) {
        listfile = argv[2];
        if (!strcmp(argv[1], "--allow"))
            other_action = SCMP_ACT_ERRNO(EPERM);
        argi = 3;
    }
    if (argi >= argc) {
        fprintf(stderr, "Usage: unit-filters [--allow FILE | --log-outside FILE] COMMAND [ARG...]\n");
        return 2;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        perror("unit-filters: PR_SET_NO_NEW_PRIVS");
        return 1;
    }
    if ((r = unit_filter()) < 0) {
        fprintf(stderr, "unit-filters: seccomp: %s\n", strerror(-r));
        return 1;
    }
    /* The allow list last, so that loading it is neither refused nor
     * logged: from here on only COMMAND's calls are (it has this pid). */
    if (listfile && (r = allow_list(listfile, other_action)) < 0) {
        fprintf(stderr, "unit-filters: the allow list: %s\n", strerror(-r));
        return 1;
    }
    execvp(argv[argi], argv + argi);
    fprintf(stderr, "unit-filters: %s: %s\n", argv[argi], strerror(errno));
    return 127;
}
