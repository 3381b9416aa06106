/* SPDX-License-Identifier: MIT */
/*
 * vpackctl's side of the control socket (agent/control.h): a synchronous
 * client that sends one request line and reads one answer line within a
 * deadline, plus what the commands that talk to the agent share.
 */
#ifndef VPACKCTL_CLIENT_H
#define VPACKCTL_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <json-c/json.h>

/* How long a command waits for the agent, connecting included. */
#define VPACKCTL_TIMEOUT_MS 5000
/* ... and a rebalance, which pins threads through libvirt before answering. */
#define VPACKCTL_REBALANCE_TIMEOUT_MS 60000
/* The longest answer line read, newline excluded. */
#define VPACKCTL_ANSWER_MAX (16u << 20)

/*
 * The socket to use: option (--socket) if not NULL, else $VPACK_SOCKET if set
 * and not empty, else VPACK_DEFAULT_SOCKET. Borrowed.
 */
const char *vpackctl_socket_path(const char *option);

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
    const char *socket;       /* the socket to use: see vpackctl_socket_path() */
    const char *arg;          /* the argument, if the vpackctl_cmdline names one; not empty */
    bool json;                /* --json */
    bool dry_run;             /* --dry-run */
};

/* vpackctl_parse_args()'s answer when the command should go on. */
#define VPACKCTL_PROCEED (-1)

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

/*
 * Prints body on stdout: as JSON with --json (vpackctl_print_json()), else
 * with print_text, which returns 0 or -1 when out of memory; then flushes.
 * Returns the exit code, after "CMD: out of memory" or a failed write's
 * message on stderr if it is not VPACKCTL_EXIT_OK.
 */
int vpackctl_show(const struct vpackctl_args *a, struct json_object *body,
                  int (*print_text)(struct json_object *body, const struct vpackctl_args *a));

/*
 * Sends req as one line to the agent listening at path and reads one answer
 * line, all within timeout_ms. Returns 0 with *answer (the caller
 * json_object_put()s it) when a JSON object came back, whether its "ok" is
 * true or false. Otherwise returns a negative errno with a one-line reason in
 * why: see vpackctl_unreachable() for which ones mean the agent is away.
 * -ETIMEDOUT: nothing within timeout_ms; -ECONNRESET: the agent closed the
 * connection without answering; -EBADMSG: the answer is not one JSON object;
 * -EMSGSIZE: no newline within VPACKCTL_ANSWER_MAX bytes.
 */
int vpackctl_request(const char *path, struct json_object *req, int timeout_ms,
                     struct json_object **answer, char *why, size_t whylen);

/*
 * True if err, from vpackctl_request(), means the agent could not be reached
 * (no socket, nobody listening, no answer in time, connection dropped); false
 * if the agent answered something unusable, or we lack memory or descriptors.
 */
bool vpackctl_unreachable(int err);

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
 * Prints o as JSON on stdout: one object on one line, or indented when
 * stdout is a terminal. Returns VPACKCTL_EXIT_OK, or VPACKCTL_EXIT_FAIL after
 * a message if stdout could not be written.
 */
int vpackctl_print_json(struct json_object *o);

/* Flushes stdout; returns VPACKCTL_EXIT_OK, or VPACKCTL_EXIT_FAIL after a message. */
int vpackctl_flush(void);

/*
 * Readers for the agent's answers, which may come from an older or newer
 * agent: a key that is missing or of another type reads as dflt.
 * vpackctl_json_str()'s result is borrowed from o.
 */
const char *vpackctl_json_str(struct json_object *o, const char *key, const char *dflt);
/* Any value but null as text (numbers too: "0"). */
const char *vpackctl_json_text(struct json_object *o, const char *key, const char *dflt);
double vpackctl_json_double(struct json_object *o, const char *key, double dflt);
bool vpackctl_json_bool(struct json_object *o, const char *key, bool dflt);
/* The array at key, or NULL. Borrowed. */
struct json_object *vpackctl_json_array(struct json_object *o, const char *key);

/*
 * An array of numbers or strings at key as "0,1", or dflt if it is missing
 * or empty. The caller frees the result; NULL if out of memory.
 */
char *vpackctl_json_list(struct json_object *o, const char *key, const char *dflt);

/*
 * Prints the message for getopt_long()'s answer c (':' or '?') about
 * argv[optind - 1], for subcommand cmd. Long options that take no argument
 * must have a val of at least 256 for "takes no argument" to be recognised.
 */
void vpackctl_option_error(const char *cmd, int c, char **argv);

#endif
