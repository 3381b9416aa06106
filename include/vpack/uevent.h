/* SPDX-License-Identifier: MIT */
/* A reader of the kernel's uevent datagrams, taking the bytes, not the socket. */
#ifndef VPACK_UEVENT_H
#define VPACK_UEVENT_H

#include <stddef.h>

/*
 * Parses one uevent datagram ("ACTION@DEVPATH\0KEY=VALUE\0..."). Returns 1
 * with *cpu and *online set for a CPU online/offline event, 0 for any other
 * event, -EINVAL for garbage.
 */
int vpack_uevent_parse_cpu(const char *buf, size_t len, int *cpu, int *online);

#endif
