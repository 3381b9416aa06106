/* SPDX-License-Identifier: MIT */
/*
 * A rendered answer kept and served from that copy until what it shows
 * changes (issue 27, C: a flood of requests costs one render per sampling
 * interval, not one per request): the control socket's views
 * (agent/control.c) and /metrics (metrics.c). The epoch is the caller's
 * count of changes (the agent's: one per interval and one per change made
 * between two), the times its loop milliseconds (uv_now()); nothing here
 * reads a clock.
 */
#ifndef VPACK_RENDERED_H
#define VPACK_RENDERED_H

#include <stddef.h>
#include <stdint.h>

struct vpack_rendered {
    char *text;  /* the copy, NULL when none */
    size_t len;
    uint64_t at; /* when it was rendered */
    uint64_t epoch; /* of what it shows */
};

/*
 * The copy (*len its length) if one was rendered at this epoch and less than
 * ttl_ms before now, else NULL.
 */
const char *vpack_rendered_get(const struct vpack_rendered *r, uint64_t now, uint64_t ttl_ms,
                               uint64_t epoch, size_t *len);

/*
 * Keeps text (taken over; NULL: none) of len bytes as rendered at now and
 * epoch, in place of the last.
 */
void vpack_rendered_keep(struct vpack_rendered *r, char *text, size_t len, uint64_t now,
                         uint64_t epoch);

/* Drops the copy: the next vpack_rendered_get() is NULL. */
void vpack_rendered_drop(struct vpack_rendered *r);

#endif
