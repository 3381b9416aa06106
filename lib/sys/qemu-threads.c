// SPDX-License-Identifier: MIT
/*
 * The names QEMU gives its threads (/proc/PID/task/TID/comm): which are
 * vCPUs, which run an iothread, and which of libvirt's iothreads.
 */
#include "vpack/qemu-threads.h"

#include <stdio.h>
#include <string.h>

enum vpack_qemu_thread vpack_qemu_thread_kind(const char *comm, int *vcpu)
{
    unsigned id;
    int end = 0;
    if (!strcmp(comm, "ALL CPUs/TCG")) {
        *vcpu = -1;
        return VPACK_QEMU_VCPU;
    }
    /* "CPU 3/KVM", "CPU 3/TCG" and the other accelerators' names. */
    if (sscanf(comm, "CPU %u/%*[A-Za-z]%n", &id, &end) == 1 && end > 0 && !comm[end] &&
        id <= 1u << 20) {
        *vcpu = (int)id;
        return VPACK_QEMU_VCPU;
    }
    return strncmp(comm, "IO ", 3) ? VPACK_QEMU_OTHER : VPACK_QEMU_IOTHREAD;
}

int vpack_qemu_iothread_match(const char *comm, const unsigned *ids, unsigned n)
{
    int found = -1;
    for (unsigned i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof(name), "IO iothread%u", ids[i]);
        /* The kernel keeps the first 15 bytes of a thread's name. */
        name[VPACK_COMM_MAX] = '\0';
        if (strcmp(comm, name))
            continue;
        if (found >= 0)
            return -2;
        found = (int)i;
    }
    return found;
}
