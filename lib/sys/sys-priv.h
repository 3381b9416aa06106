/* SPDX-License-Identifier: MIT */
/*
 * Inside libvpackcore only: what the readers of the kernel's text files in
 * lib/sys/ share. The kernel prints its counters the same way in /proc and
 * in cgroupfs, so they read them the same way.
 */
#ifndef VPACK_SYS_PRIV_H
#define VPACK_SYS_PRIV_H

#include <stdint.h>

/* Reads an unsigned decimal at *p (after blanks) and moves *p past it;
 * -EINVAL if none or above UINT64_MAX. */
int vpack__read_u64(const char **p, const char *end, uint64_t *v);

#endif
