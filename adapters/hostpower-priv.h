/* SPDX-License-Identifier: MIT */
/* What hostpower.c and hostperf.c share: small sysfs attribute readers. */
#ifndef VPACK_HOSTPOWER_PRIV_H
#define VPACK_HOSTPOWER_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reads a small attribute file dir/path into buf without its trailing newline: 0 or -errno. */
int vpack__attr_read(int dir, const char *path, char *buf, size_t size);
/* A decimal attribute: 0, -errno, or -EINVAL when it is not one. */
int vpack__attr_u64(int dir, const char *path, uint64_t *v);
/* True when s is prefix followed by decimal digits only; the number goes to *n. */
bool vpack__numbered(const char *s, const char *prefix, unsigned *n);

#endif
