// SPDX-License-Identifier: MIT
/*
 * The kernel's uevents (NETLINK_KOBJECT_UEVENT datagrams), taken as bytes:
 * which CPU went online or offline.
 */
#include "vpack/uevent.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int vpack_uevent_parse_cpu(const char *buf, size_t len, int *cpu, int *online)
{
    const char *at = memchr(buf, '@', len);
    const char *nul = memchr(buf, '\0', len);
    size_t hl = nul ? (size_t)(nul - buf) : len;
    int id;
    char tail;

    if (!at || (size_t)(at - buf) >= hl)
        return -EINVAL; /* libudev's own messages start "libudev"; the kernel's have '@' */
    size_t alen = (size_t)(at - buf);
    int on;
    if (alen == 6 && !memcmp(buf, "online", 6))
        on = 1;
    else if (alen == 7 && !memcmp(buf, "offline", 7))
        on = 0;
    else
        return 0;
    char devpath[256];
    size_t dl = hl - alen - 1;
    if (dl >= sizeof(devpath))
        return 0;
    memcpy(devpath, at + 1, dl);
    devpath[dl] = '\0';
    if (sscanf(devpath, "/devices/system/cpu/cpu%d%c", &id, &tail) != 1 || id < 0)
        return 0;
    *cpu = id;
    *online = on;
    return 1;
}
