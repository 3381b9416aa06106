/* SPDX-License-Identifier: MIT */
/*
 * The host's power readings, under a root directory ("/" on a live host, a
 * fixture tree in tests): the time each CPU spent in each cpuidle state
 * (root/sys/devices/system/cpu/cpuN/cpuidle/stateM/{name,time}) and the
 * energy each package used, from RAPL (root/sys/class/powercap/intel-rapl:N,
 * the top-level "package-N" zones, AMD's too; the dies of a package
 * summed). RAPL's energy_uj wraps at max_energy_range_uj: the reader keeps
 * each zone's last value and undoes the wraps, so that the energy it gives
 * only grows. The metrics endpoint (metrics.h) reads it at each scrape.
 */
#ifndef VPACK_HOSTPOWER_H
#define VPACK_HOSTPOWER_H

#include <stddef.h>

#include "vpack/prom.h"

struct vpack_hostpower;

/* A reader of root's power readings. Returns 0 or -ENOMEM. */
int vpack_hostpower_new(const char *root, struct vpack_hostpower **out);
/* NULL is fine. */
void vpack_hostpower_free(struct vpack_hostpower *hp);

#define VPACK_CPUIDLE_NAME_MAX 32

/* One reading. Clear it with vpack_hostpower_reading_clear(). */
struct vpack_hostpower_reading {
    struct vpack_prom_idle_state *idle; /* their names point into names[] */
    size_t nidle;
    struct vpack_prom_energy *energy;   /* none: no RAPL package zone could be read */
    size_t nenergy;
    char (*names)[VPACK_CPUIDLE_NAME_MAX];
    size_t cap;
};

/*
 * Reads the cpuidle states and the package energy into *out (zeroed first).
 * Returns 0, or -errno when root's CPU directory cannot be opened (out
 * still holds the energy). A CPU without cpuidle (offline, no driver), a
 * state or zone that cannot be read and a host without RAPL are left out,
 * not errors; so is what does not fit in memory.
 */
int vpack_hostpower_read(struct vpack_hostpower *hp, struct vpack_hostpower_reading *out);
void vpack_hostpower_reading_clear(struct vpack_hostpower_reading *r);

#endif
