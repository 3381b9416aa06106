/* SPDX-License-Identifier: MIT */
#ifndef VPACKCTL_H
#define VPACKCTL_H

#include <stdio.h>

/*
 * Exit codes of vpackctl, documented in vpackctl(1):
 *   0 success; 1 the operation failed (bad input, libvirt refused, ...);
 *   2 usage error; 3 the agent is not reachable.
 */
enum {
    VPACKCTL_EXIT_OK = 0,
    VPACKCTL_EXIT_FAIL = 1,
    VPACKCTL_EXIT_USAGE = 2,
    VPACKCTL_EXIT_NOAGENT = 3,
};

struct vpackctl_cmd {
    const char *name;
    int (*main)(int argc, char **argv); /* argv[0] is the subcommand name */
    const char *summary;
};

/* One per file: ctl/ctl-<name>.c */
int topology_main(int argc, char **argv);
int plan_main(int argc, char **argv);
int status_main(int argc, char **argv);
int rebalance_main(int argc, char **argv);
int explain_main(int argc, char **argv);
int version_main(int argc, char **argv);
int set_policy_main(int argc, char **argv);
int define_main(int argc, char **argv);

/* Prints "vpackctl: <message>" on stderr. */
void vpackctl_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
