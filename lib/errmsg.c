// SPDX-License-Identifier: MIT
#include "vpack/errmsg.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int vpack_errmsg_set(int ret, char **errmsg, const char *fmt, ...)
{
    va_list ap;

    if (!errmsg)
        return ret;
    free(*errmsg);
    va_start(ap, fmt);
    if (vasprintf(errmsg, fmt, ap) < 0)
        *errmsg = NULL;
    va_end(ap);
    return ret;
}
