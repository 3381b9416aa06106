/* SPDX-License-Identifier: MIT */
/*
 * A rendered answer kept and served from that copy for a short while
 * (issue 27, C: a flood of requests costs ten renders a second, not one per
 * request): the control socket's views (agent/control.c) and /metrics
 * (metrics.c). Times are the caller's loop milliseconds (uv_now()); nothing
 * here reads a clock.
 */
#ifndef VPACK_RENDERED_H
#define VPACK_RENDERED_H

#include <stddef.h>
#include <stdint.h>

struct vpack_rendered {
    char *text;  /* the copy, NULL when none */
    size_t len;
    uint64_t at; /* when it was rendered */
};

/* The copy (*len its length) if one was rendered less than ttl_ms before now, else NULL. */
const char *vpack_rendered_get(const struct vpack_rendered *r, uint64_t now, uint64_t ttl_ms,
                               size_t *len);

/* Keeps text (taken over; NULL: none) of len bytes as rendered at now, in place of the last. */
void vpack_rendered_keep(struct vpack_rendered *r, char *text, size_t len, uint64_t now);

/* Drops the copy: the next vpack_rendered_get() is NULL. */
void vpack_rendered_drop(struct vpack_rendered *r);

#endif
