// SPDX-License-Identifier: MIT
#include "vpack/config.h"

#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int vpack_config_init(struct vpack_config *c)
{
    memset(c, 0, sizeof(*c));
    c->interval_ms = 1000;
    c->keep_placement = false;
    c->smoothing_rise = 0.8;
    c->smoothing_fall = 0.3;
    vpack_policy_params_default(&c->policy);
    c->max_clients = 64;
    c->idle_timeout_ms = 30000;
    c->max_line = 65536;
    c->metrics_enabled = true;
    c->metrics_port = VPACK_DEFAULT_METRICS_PORT;
    c->libvirt_uri = strdup("qemu:///system");
    c->topology = strdup("host");
    c->state_dir = strdup(VPACK_DEFAULT_STATE_DIR);
    c->sysfs_root = strdup("/");
    c->log_level = strdup("info");
    c->socket_path = strdup(VPACK_DEFAULT_SOCKET);
    c->control_group = strdup("");
    c->metrics_listen = strdup("127.0.0.1");
    if (!c->libvirt_uri || !c->topology || !c->state_dir || !c->sysfs_root || !c->log_level ||
        !c->socket_path || !c->control_group || !c->metrics_listen) {
        vpack_config_clear(c);
        return -ENOMEM;
    }
    return 0;
}

void vpack_config_clear(struct vpack_config *c)
{
    free(c->libvirt_uri);
    free(c->topology);
    free(c->state_dir);
    free(c->sysfs_root);
    free(c->log_level);
    free(c->socket_path);
    free(c->control_group);
    free(c->metrics_listen);
    memset(c, 0, sizeof(*c));
}

enum kind { K_UINT, K_DOUBLE01, K_DOUBLE, K_BOOL, K_STR, K_CPUS, K_LEVEL, K_LOG };

struct key {
    const char *section, *name;
    enum kind kind;
    size_t off;
    unsigned min, max; /* K_UINT bounds */
};

#define OFF(f) offsetof(struct vpack_config, f)
static const struct key keys[] = {
    {"agent", "interval_ms", K_UINT, OFF(interval_ms), 100, 600000},
    {"agent", "libvirt_uri", K_STR, OFF(libvirt_uri), 0, 0},
    {"agent", "topology", K_STR, OFF(topology), 0, 0},
    {"agent", "reserved_cpus", K_CPUS, OFF(reserved_cpus), 0, 0},
    {"agent", "state_dir", K_STR, OFF(state_dir), 0, 0},
    {"agent", "keep_placement", K_BOOL, OFF(keep_placement), 0, 0},
    {"agent", "smoothing_rise", K_DOUBLE01, OFF(smoothing_rise), 0, 0},
    {"agent", "smoothing_fall", K_DOUBLE01, OFF(smoothing_fall), 0, 0},
    {"agent", "sysfs_root", K_STR, OFF(sysfs_root), 0, 0},
    {"agent", "log_level", K_LOG, OFF(log_level), 0, 0},
    {"policy", "default_level", K_LEVEL, OFF(policy.default_level), 0, 0},
    {"policy", "pack_watermark", K_DOUBLE01, OFF(policy.pack_watermark), 0, 0},
    {"policy", "spread_watermark", K_DOUBLE01, OFF(policy.spread_watermark), 0, 0},
    {"policy", "delay_threshold", K_DOUBLE01, OFF(policy.delay_threshold), 0, 0},
    {"policy", "busy_vcpu", K_DOUBLE01, OFF(policy.busy_vcpu), 0, 0},
    {"policy", "spread_samples", K_UINT, OFF(policy.spread_samples), 1, 100},
    {"policy", "pack_delay_ms", K_UINT, OFF(policy.pack_delay_ms), 0, 86400000},
    {"policy", "min_residency_ms", K_UINT, OFF(policy.min_residency_ms), 0, 86400000},
    {"control", "socket", K_STR, OFF(socket_path), 0, 0},
    {"control", "group", K_STR, OFF(control_group), 0, 0},
    {"control", "max_clients", K_UINT, OFF(max_clients), 1, 100000},
    {"control", "idle_timeout_ms", K_UINT, OFF(idle_timeout_ms), 100, 86400000},
    {"control", "max_line", K_UINT, OFF(max_line), 256, 16777216},
    {"metrics", "enabled", K_BOOL, OFF(metrics_enabled), 0, 0},
    {"metrics", "listen", K_STR, OFF(metrics_listen), 0, 0},
    {"metrics", "port", K_UINT, OFF(metrics_port), 0, 65535},
};

struct parse_ctx {
    struct vpack_config *c;
    char *err;
};

static int set_err(struct parse_ctx *ctx, int line, const char *section, const char *name,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int set_err(struct parse_ctx *ctx, int line, const char *section, const char *name,
                   const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    free(ctx->err);
    ctx->err = NULL;
    if (line > 0) {
        if (asprintf(&ctx->err, "line %d: %s.%s: %s", line, section, name, what) < 0)
            ctx->err = NULL;
    } else if (asprintf(&ctx->err, "%s.%s: %s", section, name, what) < 0) {
        ctx->err = NULL;
    }
    return 0;
}

static int apply(struct parse_ctx *ctx, int line, const char *section, const char *name,
                 const char *value)
{
    const struct key *k = NULL;
    bool section_known = false;
    char *end;

    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if (!strcmp(keys[i].section, section)) {
            section_known = true;
            if (!strcmp(keys[i].name, name))
                k = &keys[i];
        }
    }
    if (!section_known)
        return set_err(ctx, line, section, name, "unknown section [%s]", section);
    if (!k)
        return set_err(ctx, line, section, name, "unknown key");

    void *field = (char *)ctx->c + k->off;
    switch (k->kind) {
    case K_UINT: {
        errno = 0;
        unsigned long v = strtoul(value, &end, 10);
        if (errno || end == value || *end || value[0] == '-' || v < k->min || v > k->max)
            return set_err(ctx, line, section, name, "'%s' is not a whole number from %u to %u",
                           value, k->min, k->max);
        *(unsigned *)field = (unsigned)v;
        break;
    }
    case K_DOUBLE01:
    case K_DOUBLE: {
        errno = 0;
        double v = strtod(value, &end);
        if (errno || end == value || *end || v < 0 || (k->kind == K_DOUBLE01 && v > 1) || v != v)
            return set_err(ctx, line, section, name, "'%s' is not a number %s", value,
                           k->kind == K_DOUBLE01 ? "from 0 to 1" : ">= 0");
        *(double *)field = v;
        break;
    }
    case K_BOOL:
        if (!strcasecmp(value, "true") || !strcasecmp(value, "yes") || !strcmp(value, "1"))
            *(bool *)field = true;
        else if (!strcasecmp(value, "false") || !strcasecmp(value, "no") || !strcmp(value, "0"))
            *(bool *)field = false;
        else
            return set_err(ctx, line, section, name, "'%s' is not true or false", value);
        break;
    case K_LEVEL:
        if (strlen(value) != 1 || value[0] < '0' || value[0] > '2')
            return set_err(ctx, line, section, name,
                           "'%s' is not a power policy level (0, 1 or 2)", value);
        *(int *)field = value[0] - '0';
        break;
    case K_CPUS: {
        char *perr = NULL;
        if (value[0] == '\0') {
            ctx->c->has_reserved = false;
            vpack_cpuset_zero(&ctx->c->reserved_cpus);
            break;
        }
        if (vpack_cpuset_parse(&ctx->c->reserved_cpus, value, &perr) < 0) {
            int r = set_err(ctx, line, section, name, "%s", perr ? perr : "out of memory");
            free(perr);
            return r;
        }
        ctx->c->has_reserved = true;
        break;
    }
    case K_LOG:
        if (strcmp(value, "error") && strcmp(value, "warning") && strcmp(value, "info") &&
            strcmp(value, "debug"))
            return set_err(ctx, line, section, name,
                           "'%s' is not a log level (error, warning, info, debug)", value);
        /* fall through */
    case K_STR: {
        char *dup = strdup(value);
        if (!dup)
            return set_err(ctx, line, section, name, "out of memory");
        free(*(char **)field);
        *(char **)field = dup;
        break;
    }
    }
    return 1;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
    struct parse_ctx *ctx = user;
    if (ctx->err)
        return 0;
    return apply(ctx, 0, section, name, value);
}

int vpack_config_parse(struct vpack_config *c, const char *text, char **errmsg)
{
    struct parse_ctx ctx = {.c = c};
    int r = ini_parse_string(text, handler, &ctx);
    *errmsg = NULL;
    if (r == 0 && !ctx.err)
        return 0;
    if (ctx.err) {
        /* inih reports the line of the first error it returned 0 for. */
        if (r > 0 && asprintf(errmsg, "line %d: %s", r, ctx.err) < 0)
            *errmsg = NULL;
        if (!*errmsg) {
            *errmsg = ctx.err;
            ctx.err = NULL;
        }
    } else if (r > 0) {
        if (asprintf(errmsg, "line %d: not a section header or key = value", r) < 0)
            *errmsg = NULL;
    } else if (asprintf(errmsg, "cannot parse the configuration (%d)", r) < 0) {
        *errmsg = NULL;
    }
    free(ctx.err);
    return r == -2 ? -ENOMEM : -EINVAL;
}

int vpack_config_set(struct vpack_config *c, const char *assignment, char **errmsg)
{
    struct parse_ctx ctx = {.c = c};
    const char *dot = strchr(assignment, '.');
    const char *eq = strchr(assignment, '=');
    *errmsg = NULL;
    if (!dot || !eq || dot > eq) {
        if (asprintf(errmsg, "'%s': expected SECTION.KEY=VALUE", assignment) < 0)
            *errmsg = NULL;
        return -EINVAL;
    }
    char section[64], name[64];
    size_t sl = (size_t)(dot - assignment), nl = (size_t)(eq - dot - 1);
    if (sl >= sizeof(section) || nl >= sizeof(name)) {
        if (asprintf(errmsg, "'%s': unknown key", assignment) < 0)
            *errmsg = NULL;
        return -EINVAL;
    }
    memcpy(section, assignment, sl);
    section[sl] = '\0';
    memcpy(name, dot + 1, nl);
    name[nl] = '\0';
    apply(&ctx, 0, section, name, eq + 1);
    if (ctx.err) {
        *errmsg = ctx.err;
        return -EINVAL;
    }
    return 0;
}
