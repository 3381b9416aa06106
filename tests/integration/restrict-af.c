// SPDX-License-Identifier: MIT
/*
 * restrict-af FAMILIES COMMAND [ARG...]: runs COMMAND with socket(2) limited
 * to the address families in FAMILIES (comma-separated: unix, netlink, inet,
 * inet6), as systemd's RestrictAddressFamilies= does: a seccomp filter that
 * makes socket() fail with EAFNOSUPPORT for every other family. Sets
 * no_new_privs first (a seccomp filter needs it without CAP_SYS_ADMIN).
 * For test-hardening.sh, which cannot ask systemd (not PID 1 here).
 */
#include <errno.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

static int family(const char *name)
{
    static const struct {
        const char *name;
        int af;
    } names[] = {{"unix", AF_UNIX}, {"netlink", AF_NETLINK}, {"inet", AF_INET}, {"inet6", AF_INET6}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcmp(name, names[i].name))
            return names[i].af;
    return -1;
}

int main(int argc, char **argv)
{
    bool allowed[AF_MAX] = {false};
    char list[256];
    if (argc < 3) {
        fprintf(stderr, "Usage: restrict-af unix,netlink,inet,inet6 COMMAND [ARG...]\n");
        return 2;
    }
    snprintf(list, sizeof(list), "%s", argv[1]);
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int af = family(tok);
        if (af < 0) {
            fprintf(stderr, "restrict-af: unknown family '%s'\n", tok);
            return 2;
        }
        allowed[af] = true;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        perror("restrict-af: PR_SET_NO_NEW_PRIVS");
        return 1;
    }
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) {
        fprintf(stderr, "restrict-af: seccomp_init failed\n");
        return 1;
    }
    /* The comparisons spelled out: SCMP_A0() leaves datum_b to the
     * initializer, which clang's -Wmissing-field-initializers refuses. */
    int r = 0;
    for (int af = 0; af < AF_MAX && r == 0; af++)
        if (!allowed[af]) {
            struct scmp_arg_cmp eq = {.arg = 0, .op = SCMP_CMP_EQ, .datum_a = (scmp_datum_t)af, .datum_b = 0};
            r = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1, &eq);
        }
    if (r == 0) {
        struct scmp_arg_cmp ge = {.arg = 0, .op = SCMP_CMP_GE, .datum_a = (scmp_datum_t)AF_MAX, .datum_b = 0};
        r = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1, &ge);
    }
    if (r == 0)
        r = seccomp_load(ctx);
    seccomp_release(ctx);
    if (r < 0) {
        fprintf(stderr, "restrict-af: seccomp: %s\n", strerror(-r));
        return 1;
    }
    execvp(argv[2], argv + 2);
    fprintf(stderr, "restrict-af: %s: %s\n", argv[2], strerror(errno));
    return 127;
}
