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

void vpack_log(enum vpack_log_level level, const char *fmt, ...)
{
    static const char *names[] = {[3] = "error", [4] = "warning", [6] = "info", [7] = "debug"};
    va_list ap;
    if (level > threshold)
        return;
    if (journal < 0)
        journal = getenv("JOURNAL_STREAM") != NULL;
    if (journal)
        fprintf(stderr, "<%d>", level);
    else
        fprintf(stderr, "vpackd[%s]: ", names[level]);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}
