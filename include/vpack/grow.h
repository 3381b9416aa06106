/* SPDX-License-Identifier: MIT */
/*
 * The one way a list that grows by doubling makes room for its next
 * element (the domain-XML reader's pins and iothread ids, the cgroup
 * adapter's walks).
 */
#ifndef VPACK_GROW_H
#define VPACK_GROW_H

#include <stddef.h>

/*
 * Room for one more in arr, which holds n elements of size bytes and has
 * room for *cap: arr itself, or arr grown (*cap doubled, 4 at first), or
 * NULL when out of memory (arr left as it was, the caller still frees it).
 */
void *vpack_grow(void *arr, size_t n, size_t *cap, size_t size);

#endif
