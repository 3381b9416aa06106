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
