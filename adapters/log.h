/* SPDX-License-Identifier: MIT */
/*
 * vpackd's log: one line per event on stderr, prefixed with the syslog
 * priority in sd-daemon(3) form ("<6>") when stderr is the journal, so
 * journalctl -p works; plain "vpackd[level]: " otherwise. Control characters
 * in the message are escaped (vpack_log_escape()): one event, one line.
 */
#ifndef VPACK_LOG_H
#define VPACK_LOG_H

enum vpack_log_level { VPACK_LOG_ERR = 3, VPACK_LOG_WARNING = 4, VPACK_LOG_INFO = 6, VPACK_LOG_DEBUG = 7 };

#include <stddef.h>

/*
 * Copies src into dst (cap bytes, NUL-terminated, cut to fit) with every
 * control character escaped: "\n" for a newline, "\xNN" for the rest (and
 * DEL), so that text from a guest or a client cannot start a log line of its
 * own (a backslash stays: systemd's unit names hold "\x2d" already). Returns the length written.
 */
size_t vpack_log_escape(char *dst, size_t cap, const char *src);

/* Sets the threshold from "error", "warning", "info" or "debug". */
void vpack_log_set_level(const char *name);
void vpack_log(enum vpack_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...) vpack_log(VPACK_LOG_ERR, __VA_ARGS__)
#define log_warn(...) vpack_log(VPACK_LOG_WARNING, __VA_ARGS__)
#define log_info(...) vpack_log(VPACK_LOG_INFO, __VA_ARGS__)
#define log_debug(...) vpack_log(VPACK_LOG_DEBUG, __VA_ARGS__)

#endif
