// SPDX-License-Identifier: MIT
#include "policy-test-util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

const char *plan_text(const struct vpack_plan *p)
{
    static char buf[8192];
    char *json = vpack_plan_to_json(p);

    snprintf(buf, sizeof(buf), "%s", json ? json : "(out of memory)");
    free(json);
    return buf;
}

const struct vpack_plan_domain *plan_domain(const struct vpack_plan *p, const char *name)
{
    for (unsigned i = 0; i < p->ndomains; i++)
        if (!strcmp(p->domains[i].name, name))
            return &p->domains[i];
    fail_msg("no domain %s in the plan", name);
    return NULL;
}
