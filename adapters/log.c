// SPDX-License-Identifier: MIT
#include "log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static enum vpack_log_level threshold = VPACK_LOG_INFO;
static int journal = -1;

void vpack_log_set_level(const char *name)
{
    if (!strcmp(name, "error"))
        threshold = VPACK_LOG_ERR;
    else if (!strcmp(name, "warning"))
        threshold = VPACK_LOG_WARNING;
    else if (!strcmp(name, "debug"))
        threshold = VPACK_LOG_DEBUG;
    else
        threshold = VPACK_LOG_INFO;
}

size_t vpack_log_escape(char *dst, size_t cap, const char *src)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;

    if (cap == 0)
        return 0;
    for (const unsigned char *p = (const unsigned char *)src; *p; p++) {
        char esc[4];
        size_t len = 1;
        if (*p == '\n') {
            memcpy(esc, "\\n", 2);
            len = 2;
        } else if (*p < 0x20 || *p == 0x7f) {
            esc[0] = '\\';
            esc[1] = 'x';
            esc[2] = hex[*p >> 4];
            esc[3] = hex[*p & 15];
            len = 4;
        } else {
            esc[0] = (char)*p;
        }
        if (n + len >= cap)
            break;
        memcpy(dst + n, esc, len);
        n += len;
    }
    dst[n] = '\0';
    return n;
}

void vpack_log(enum vpack_log_level level, const char *fmt, ...)
{
    static const char *names[] = {[3] = "error", [4] = "warning", [6] = "info", [7] = "debug"};
    /* A line longer than this is cut: the journal's own line limit is larger. */
    char text[4096], line[4096 * 2];
    va_list ap;
    if (level > threshold)
        return;
    if (journal < 0)
        journal = getenv("JOURNAL_STREAM") != NULL;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    /* Names and messages from guests and clients may hold a newline and a
     * "<0>" after it: escaped, every event stays one line at its own priority. */
    vpack_log_escape(line, sizeof(line), text);
    if (journal)
        fprintf(stderr, "<%d>%s\n", level, line);
    else
        fprintf(stderr, "vpackd[%s]: %s\n", names[level], line);
}
