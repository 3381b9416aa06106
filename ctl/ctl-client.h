/* SPDX-License-Identifier: MIT */
/*
 * What the vpackctl commands that talk to the agent share: their command
 * line, their request, the call through the control socket's client
 * (adapters/client.h) and the printing of the answer.
 */
#ifndef VPACKCTL_CLIENT_H
#define VPACKCTL_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <json-c/json.h>

#include "vpack/json.h"

/* How long a command waits for the agent, connecting included. */
#define VPACKCTL_TIMEOUT_MS 5000
/* ... and a rebalance, which pins threads through libvirt before answering. */
#define VPACKCTL_REBALANCE_TIMEOUT_MS 60000

/* What a command that talks to the agent takes on its command line. */
struct vpackctl_cmdline {
    const char *cmd;          /* the subcommand, for messages: "status" */
    void (*usage)(FILE *f);   /* printed on stdout for -h and --help */
    bool dry_run;             /* --dry-run is an option too */
    const char *arg;          /* the one argument it needs ("DOMAIN"), or NULL for none */
};

/* ... and what vpackctl_parse_args() read from it. */
struct vpackctl_args {
    const char *cmd;          /* the vpackctl_cmdline's, for messages */
    const char *socket;       /* the socket to use: see vpack_client_socket_path() */
    const char *arg;          /* the argument, if the vpackctl_cmdline names one; not empty */
    bool json;                /* --json */
    bool dry_run;             /* --dry-run */
};

/*
 * Parses the command line of cl->cmd (argv[0] is the subcommand): --json,
 * --socket PATH, -h/--help and, if cl->dry_run, --dry-run; then cl->arg if
 * not NULL, and nothing more. Returns VPACKCTL_PROCEED with *a filled in;
 * else the exit code: VPACKCTL_EXIT_OK after the usage for --help,
 * VPACKCTL_EXIT_USAGE after one line on stderr.
 */
int vpackctl_parse_args(int argc, char **argv, const struct vpackctl_cmdline *cl,
                        struct vpackctl_args *a);

/*
 * A request {"op": op, KEY: VALUE, ...} from the (const char *KEY, struct
 * json_object *VALUE) pairs that follow op, up to a NULL KEY; the request
 * owns the values, and puts them if it cannot be made. The caller puts the
 * result; NULL after "CMD: out of memory" on stderr, a NULL VALUE included.
 */
struct json_object *vpackctl_new_request(const struct vpackctl_args *a, const char *op, ...)
    __attribute__((sentinel));

/*
 * Asks the agent at a->socket with vpackctl_call(), the request made as by
 * vpackctl_new_request() from op and the pairs that follow it. On success
 * returns VPACKCTL_EXIT_OK with *body (the caller puts it): the object at
 * member in the answer, or if member is NULL the whole answer without its
 * "ok". Otherwise returns VPACKCTL_EXIT_FAIL or VPACKCTL_EXIT_NOAGENT after
 * one line on stderr ("CMD: invalid answer from vpackd: no "MEMBER" object"
 * when the answer lacks it).
 */
int vpackctl_ask(const struct vpackctl_args *a, int timeout_ms, const char *member,
                 struct json_object **body, const char *op, ...) __attribute__((sentinel));

/* vpackctl_ask() on fd, a connection from vpackctl_connect() kept for several requests. */
int vpackctl_ask_on(const struct vpackctl_args *a, int fd, int timeout_ms, const char *member,
                    struct json_object **body, const char *op, ...) __attribute__((sentinel));

/*
 * Prints body on stdout: as JSON with --json (vpackctl_print_json()), else
 * with print_text, which returns 0 or -1 when out of memory; then flushes.
 * Returns the exit code, after "CMD: out of memory" or a failed write's
 * message on stderr if it is not VPACKCTL_EXIT_OK.
 */
int vpackctl_show(const struct vpackctl_args *a, struct json_object *body,
                  int (*print_text)(struct json_object *body, const struct vpackctl_args *a));

/*
 * vpack_client_call() with req as its request: 0 with *answer, or a
 * negative errno with *errmsg (see there; the caller frees it).
 */
int vpackctl_request(const char *path, struct json_object *req, int timeout_ms,
                     struct json_object **answer, char **errmsg);

/*
 * vpackctl_request() for a command, with the outcome as an exit code. On
 * {"ok": true} returns VPACKCTL_EXIT_OK with *answer (the caller puts it).
 * Otherwise prints one line on stderr and returns VPACKCTL_EXIT_NOAGENT
 * ("cannot reach vpackd at PATH: REASON") or VPACKCTL_EXIT_FAIL (the
 * agent's "error" of an {"ok": false} answer, or why the answer is unusable).
 */
int vpackctl_call(const char *path, struct json_object *req, int timeout_ms,
                  struct json_object **answer);

/*
 * A connection to the agent at path kept for several requests: returns
 * VPACKCTL_EXIT_OK with *fd (the caller close()s it), or VPACKCTL_EXIT_NOAGENT
 * or VPACKCTL_EXIT_FAIL after one line on stderr, as vpackctl_call().
 */
int vpackctl_connect(const char *path, int timeout_ms, int *fd);

#endif
