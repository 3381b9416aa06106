// SPDX-License-Identifier: MIT
#include "policy-test-util.h"

#include <stdio.h>
#include <stdlib.h>

const char *plan_text(const struct vpack_plan *p)
{
    static char buf[8192];
    char *json = vpack_plan_to_json(p);

    snprintf(buf, sizeof(buf), "%s", json ? json : "(out of memory)");
    free(json);
    return buf;
}
