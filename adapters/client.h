/* SPDX-License-Identifier: MIT */
/*
 * The control socket's client (agent/control.h is the server): one request
 * line out, one answer line back, within a deadline, on a connection of its
 * own or on one kept for the next request. Synchronous; used by vpackctl
 * and vpack-hook.
 */
#ifndef VPACK_CLIENT_H
#define VPACK_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;

/*
 * Milliseconds on the monotonic clock: what the client's deadlines are
 * measured on, and vpackctl's (vpackctl_now()); the one place it is read
 * outside the agent's loop.
 */
int64_t vpack_client_now_ms(void);

/* The longest answer line read, newline excluded. */
#define VPACK_CLIENT_ANSWER_MAX (16u << 20)

/*
 * The admin socket that goes with the control socket at path: path with
 * "-admin" inserted before its ".sock", or appended when it has none
 * (/run/vpack/vpackd.sock: /run/vpack/vpackd-admin.sock). One configured
 * path names both, so a client that knows one finds the other. Returns 0
 * with it in buf, or -ENAMETOOLONG when it does not fit in size bytes or in
 * a socket address.
 */
int vpack_client_admin_path(const char *path, char *buf, size_t size);

/*
 * The socket to use. The control socket is option if not NULL, else
 * $VPACK_SOCKET if set and not empty, else VPACK_DEFAULT_SOCKET; its admin
 * socket (vpack_client_admin_path()) is used instead when the caller may
 * connect to it (root, the [control] group: the file's permissions say so),
 * the control socket otherwise. Borrowed (static storage).
 */
const char *vpack_client_socket_path(const char *option);

/*
 * Sends request (one JSON text without a newline) to the agent listening at
 * path and reads one answer line, all within timeout_ms; a full listen queue
 * is waited out, and an answer sent before the agent closed the connection
 * on us is still read. Returns 0 with *answer (the caller puts it) when a
 * JSON object came back, whatever its "ok". Otherwise a negative errno, and
 * *errmsg (the caller frees it; NULL if out of memory) says why in one line
 * without the path: -ETIMEDOUT, nothing within timeout_ms; -ECONNRESET, the
 * agent closed the connection without answering; -EBADMSG, the answer is not
 * one JSON object; -EMSGSIZE, no newline within VPACK_CLIENT_ANSWER_MAX
 * bytes; -ENAMETOOLONG, no socket can have that path; connect()'s errno.
 */
int vpack_client_call(const char *path, const char *request, int timeout_ms,
                      struct json_object **answer, char **errmsg);

/*
 * A connection for several requests, one after the other (vpackctl wait):
 * connects to path within timeout_ms. Returns 0 with *fd (the caller
 * close()s it), or a negative errno with *errmsg as vpack_client_call().
 */
int vpack_client_connect(const char *path, int timeout_ms, int *fd, char **errmsg);

/*
 * vpack_client_call() on fd, from vpack_client_connect(): sends request and
 * reads its answer line within timeout_ms, with the same results. After an
 * error other than -EBADMSG the connection is of no further use.
 */
int vpack_client_exchange(int fd, const char *request, int timeout_ms,
                          struct json_object **answer, char **errmsg);

/*
 * True if err, from vpack_client_call(), means the agent could not be
 * reached (no socket, nobody listening, no answer in time, connection
 * dropped); false if it answered something unusable, or we lack memory or
 * descriptors.
 */
bool vpack_client_unreachable(int err);

#endif
