// SPDX-License-Identifier: MIT
/* A rendered answer served from its copy for a while; see rendered.h. */
#include "rendered.h"

#include <stdlib.h>

const char *vpack_rendered_get(const struct vpack_rendered *r, uint64_t now, uint64_t ttl_ms,
                               uint64_t epoch, size_t *len)
{
    if (!r->text || r->epoch != epoch || now - r->at >= ttl_ms)
        return NULL;
    *len = r->len;
    return r->text;
}

void vpack_rendered_keep(struct vpack_rendered *r, char *text, size_t len, uint64_t now,
                         uint64_t epoch)
{
    free(r->text);
    r->text = text;
    r->len = text ? len : 0;
    r->at = now;
    r->epoch = epoch;
}

void vpack_rendered_drop(struct vpack_rendered *r)
{
    free(r->text);
    r->text = NULL;
    r->len = 0;
}
