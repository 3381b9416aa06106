/* SPDX-License-Identifier: MIT */
/*
 * vpackd's configuration: /etc/vpack/vpackd.conf, an INI file read with
 * inih. Every key, its default and its meaning are in vpackd.conf(5).
 */
#ifndef VPACK_CONFIG_H
#define VPACK_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "vpack/cpuset.h"
#include "vpack/policy.h"
#include "vpack/rules.h"

#define VPACK_DEFAULT_CONFIG "/etc/vpack/vpackd.conf"
#define VPACK_DEFAULT_SOCKET "/run/vpack/vpackd.sock"
/*
 * The admin socket beside it (issue 27): the control socket's path with
 * "-admin" before its ".sock" (or at its end), mode 0660 root:[control]
 * group (0600 without a group); the one that takes changes.
 */
#define VPACK_DEFAULT_ADMIN_SOCKET "/run/vpack/vpackd-admin.sock"
#define VPACK_DEFAULT_STATE_DIR "/run/vpack"
#define VPACK_DEFAULT_METRICS_PORT 9477
/* The agent's moving average; the host model (vpack/model.h) observes with the same. */
#define VPACK_DEFAULT_SMOOTHING_RISE 0.8
#define VPACK_DEFAULT_SMOOTHING_FALL 0.3

/*
 * The agent's moving average, one step: a rise followed with weight rise,
 * a fall with weight fall. The agent and the host model both use it, so
 * that the model observes as the agent does.
 */
static inline void vpack_smooth(double *avg, double sample, double rise, double fall)
{
    *avg += (sample > *avg ? rise : fall) * (sample - *avg);
}

struct vpack_config {
    /* [agent] */
    unsigned interval_ms;       /* sampling interval; 1000 */
    char *libvirt_uri;          /* qemu:///system */
    char *topology;             /* topology spec; "host" */
    bool has_reserved;
    bool pc6_scope_set;     /* [policy] pc6_scope was given (simulate: else the platform's) */
    vpack_cpuset reserved_cpus; /* CPUs vpack never uses; none */
    char *state_dir;            /* /run/vpack */
    bool keep_placement;        /* keep pins on stop; false */
    double smoothing_rise;      /* EWMA weight of a new sample above the average; 0.8 */
    double smoothing_fall;      /* ... below the average; 0.3 */
    double steady_band;         /* skip planning while no load moved more than this since the
                                   last plan (CPUs' worth, and delay fraction); 0.02; 0: never */
    char *sysfs_root;           /* root for /sys and /proc reads; "/" */
    char *log_level;            /* error, warning, info, debug; "info" */
    /* [policy] */
    struct vpack_policy_params policy;
    /* [control] */
    char *socket_path;          /* /run/vpack/vpackd.sock */
    char *control_group;        /* group allowed to change things besides root; none */
    unsigned max_clients;       /* 64 */
    unsigned idle_timeout_ms;   /* 30000 */
    unsigned max_line;          /* longest request line in bytes; 65536 */
    /* [metrics] */
    bool metrics_enabled;       /* true */
    char *metrics_listen;       /* 127.0.0.1 */
    unsigned metrics_port;      /* 9477 */
    char *metrics_web_config;   /* exporter-toolkit web configuration (TLS, basic auth),
                                   vpack/webconfig.h; "": plain HTTP */
    /* [rule "NAME"] sections, in file order: levels for domains without
     * their own power policy element (vpack/rules.h) */
    struct vpack_rules rules;
};

/* Fills every field with its default; returns -ENOMEM. */
int vpack_config_init(struct vpack_config *c);
void vpack_config_clear(struct vpack_config *c);

/*
 * Applies an INI text (NUL-terminated) on top of c; its [rule "NAME"]
 * sections are appended to c->rules. Unknown sections or keys, bad values,
 * lines longer than inih reads and incomplete rules are errors: returns
 * -EINVAL with *errmsg (caller frees) naming the line, key and value; c may
 * then be partly updated, so parse into a fresh copy when the old one must
 * survive (SIGHUP).
 */
int vpack_config_parse(struct vpack_config *c, const char *text, char **errmsg);

/*
 * What holds for the whole configuration once the file and every --set are
 * applied (vpack_policy_params_check()). Returns 0, or -EINVAL with
 * *errmsg (caller frees).
 */
int vpack_config_check(const struct vpack_config *c, char **errmsg);

/*
 * Sets one key as "section.key=value" (the form of vpackd's --set option);
 * same errors as vpack_config_parse(). Rules are set in the file only.
 */
int vpack_config_set(struct vpack_config *c, const char *assignment, char **errmsg);

/* Which input of vpack_config_load() an error is about. */
enum vpack_config_input {
    VPACK_CONFIG_TEXT, /* the file's text (or the check, when no --set was given) */
    VPACK_CONFIG_SETS, /* a --set (or the check, when one was given) */
};

/*
 * The configuration as every door takes it (vpackd, vpackctl simulate and
 * plan): the defaults, then text (a file's contents; NULL: none) with
 * vpack_config_parse(), then each of sets[0..nsets) in order with
 * vpack_config_set(), then vpack_config_check(). Returns 0 with *c filled
 * (vpack_config_clear() it), or -EINVAL / -ENOMEM with *c cleared and
 * *errmsg (caller frees) in one form for every door: "NAME: line N: ..." for
 * the text, named name (the file, as the caller shows it); "--set ..." for a
 * set; for the check, "NAME: [policy]: ..." when no set was given, else
 * "[policy]: ..." (a set may be what broke it). *input (may be NULL) says
 * which of the two was at fault, for a caller whose exit code differs.
 */
int vpack_config_load(struct vpack_config *c, const char *text, const char *name,
                      char *const *sets, unsigned nsets, enum vpack_config_input *input,
                      char **errmsg);

#endif
