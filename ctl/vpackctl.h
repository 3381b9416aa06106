/* SPDX-License-Identifier: MIT */
#ifndef VPACKCTL_H
#define VPACKCTL_H

#include <getopt.h>
#include <stdbool.h>
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

/* A command-line parser's answer when the command should go on: not an exit code. */
#define VPACKCTL_PROCEED (-1)

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
int record_main(int argc, char **argv);
int simulate_main(int argc, char **argv);
int wait_main(int argc, char **argv);
int measure_main(int argc, char **argv);
int doctor_main(int argc, char **argv);

/* Prints "vpackctl: <message>" on stderr. */
void vpackctl_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The rest is ctl/ctl-util.c: what every subcommand may use. */

/*
 * A subcommand's options, for vpackctl_getopt(). Every subcommand's loop
 * over it (`while ((c = vpackctl_getopt(...)) >= 0)`, then the
 * VPACKCTL_OPT_EXIT check and its own argument count) looks alike on
 * purpose: what is shared is in vpackctl_getopt(); what is left is each
 * command's own options, which a table would only hide.
 */
struct vpackctl_getopt {
    const char *cmd;                /* the subcommand, for messages: "plan" */
    void (*usage)(FILE *f);         /* printed on stdout for -h and --help */
    const struct option *options;   /* values of at least 256, then VPACKCTL_OPTIONS_END */
    const char *option;             /* the long option vpackctl_getopt() returned, or NULL */
    int exit_code;                  /* when vpackctl_getopt() said VPACKCTL_OPT_EXIT */
    bool started;                   /* false before the first call */
};

/* The end of a subcommand's options: --help, and the terminator. */
#define VPACKCTL_OPTIONS_END {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}

/* vpackctl_getopt()'s answers that are not an option. */
#define VPACKCTL_OPT_END (-1)
#define VPACKCTL_OPT_EXIT (-2)

/*
 * getopt_long() over g->options and -h, from argv[1] on the first call.
 * Returns the next option's value (optarg set), VPACKCTL_OPT_END after the
 * last (optind at the first operand), or VPACKCTL_OPT_EXIT with
 * g->exit_code: VPACKCTL_EXIT_OK after the usage for -h and --help,
 * VPACKCTL_EXIT_USAGE after one line on stderr for a bad option.
 */
int vpackctl_getopt(struct vpackctl_getopt *g, int argc, char **argv);

/*
 * Prints the message for getopt_long()'s answer c (':' or '?') about
 * argv[optind - 1], for subcommand cmd. Long options that take no argument
 * must have a val of at least 256 (or be --help) for "takes no argument" to
 * be recognised.
 */
void vpackctl_option_error(const char *cmd, int c, char **argv);

/*
 * Parses text, the argument of option opt ("--timeout") of subcommand cmd,
 * as seconds: a number above 0 (or 0 too if zero_ok) and at most max.
 * Returns VPACKCTL_PROCEED with *out, or VPACKCTL_EXIT_USAGE after one line
 * on stderr.
 */
int vpackctl_parse_seconds(const char *cmd, const char *opt, const char *text, bool zero_ok,
                           double max, double *out);

/* Seconds on the monotonic clock (vpack_client_now_ms(), in seconds). */
double vpackctl_now(void);

/* Sleeps s seconds, signals or not. */
void vpackctl_sleep(double s);

/* Flushes stdout; returns VPACKCTL_EXIT_OK, or VPACKCTL_EXIT_FAIL after a message. */
int vpackctl_flush(void);

/*
 * Prints o as JSON on stdout: one object on one line, or indented when
 * stdout is a terminal. Returns VPACKCTL_EXIT_OK, or VPACKCTL_EXIT_FAIL after
 * a message if stdout could not be written.
 */
struct json_object;
int vpackctl_print_json(struct json_object *o);

/*
 * Loads the topology of --topology spec (NULL: the host's) without the CPUs
 * of --reserved text (NULL: none), for subcommand cmd. Returns
 * VPACKCTL_EXIT_OK with *topo (vpack_topology_free() it); else after one
 * line on stderr VPACKCTL_EXIT_USAGE (a bad --reserved) or VPACKCTL_EXIT_FAIL.
 */
struct vpack_topology;
int vpackctl_load_topology(const char *cmd, const char *spec, const char *reserved,
                           struct vpack_topology **topo);


/* The libvirt connection of the commands that talk to libvirt, and its --help line. */
#define VPACKCTL_DEFAULT_URI "qemu:///system"
#define VPACKCTL_HELP_CONNECT \
    "  --connect URI     libvirt connection (default " VPACKCTL_DEFAULT_URI ")\n"

/*
 * Connects to libvirt at uri. Returns VPACKCTL_EXIT_OK with *v
 * (vpack_virt_free() it), or VPACKCTL_EXIT_FAIL after one line on stderr.
 */
struct vpack_virt;
int vpackctl_virt_open(const char *uri, struct vpack_virt **v);

#endif
