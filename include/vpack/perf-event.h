/* SPDX-License-Identifier: MIT */
/*
 * The perf PMUs' sysfs text, taken as text (adapters/hostperf.c reads the
 * files): a PMU's format terms (/sys/bus/event_source/devices/PMU/format/TERM,
 * "config:0-63") and its events (.../events/NAME, "event=0x02"), as the
 * kernel documents them in Documentation/ABI/testing/
 * sysfs-bus-event_source-devices-format and -events. Only terms that map to
 * one bit range of perf_event_attr.config are taken: the C-state PMUs
 * (arch/x86/events/intel/cstate.c: "event" is "config:0-63") need no more.
 */
#ifndef VPACK_PERF_EVENT_H
#define VPACK_PERF_EVENT_H

#include <stdbool.h>
#include <stdint.h>

/* One format term: its bits lo..hi of perf_event_attr.config. */
struct vpack_perf_format {
    char name[32];
    unsigned lo, hi;
};

/*
 * Parses a format file's text ("config:0-63", "config:8") for the term
 * name into *out. Returns 0; -EOPNOTSUPP for config1/config2 or a split
 * range ("config:0-7,32-35"), which no C-state PMU uses; -EINVAL for
 * anything else, with *errmsg (vpack/errmsg.h) saying what.
 */
int vpack_perf_format_parse(const char *name, const char *text, struct vpack_perf_format *out,
                            char **errmsg);

/*
 * Parses an event file's text ("event=0x02", "event=0x3c,umask=0x1", a
 * term alone meaning =1) into the config it stands for, each term placed
 * in its bits as fmt[0..nfmt) say. Returns 0; -EINVAL when a term is not
 * in fmt, a value does not fit its bits, or the text is malformed (a "?"
 * parameter included), with *errmsg.
 */
int vpack_perf_event_parse(const char *text, const struct vpack_perf_format *fmt, unsigned nfmt,
                           uint64_t *config, char **errmsg);

/*
 * A C-state PMU's event name ("c6-residency", cstate.c's names) as the
 * state it counts ("C6") into out (size bytes). False for any other name.
 */
bool vpack_perf_cstate_name(const char *event, char *out, unsigned size);

#endif
