// SPDX-License-Identifier: MIT
#include "vpack/config.h"
#include "vpack/errmsg.h"

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
    c->smoothing_rise = VPACK_DEFAULT_SMOOTHING_RISE;
    c->smoothing_fall = VPACK_DEFAULT_SMOOTHING_FALL;
    c->steady_band = 0.02;
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
    c->metrics_web_config = strdup("");
    if (!c->libvirt_uri || !c->topology || !c->state_dir || !c->sysfs_root || !c->log_level ||
        !c->socket_path || !c->control_group || !c->metrics_listen || !c->metrics_web_config) {
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
    free(c->metrics_web_config);
    vpack_rules_clear(&c->rules);
    memset(c, 0, sizeof(*c));
}

enum kind { K_UINT, K_DOUBLE01, K_DOUBLE, K_BOOL, K_STR, K_CPUS, K_LEVEL, K_LOG, K_SCOPE };

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
    {"agent", "steady_band", K_DOUBLE01, OFF(steady_band), 0, 0},
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
    {"policy", "smt_gain", K_DOUBLE01, OFF(policy.smt_gain), 0, 0},
    {"policy", "pc6_scope", K_SCOPE, OFF(policy.pc6_system), 0, 0},
    {"control", "socket", K_STR, OFF(socket_path), 0, 0},
    {"control", "group", K_STR, OFF(control_group), 0, 0},
    {"control", "max_clients", K_UINT, OFF(max_clients), 1, 100000},
    {"control", "idle_timeout_ms", K_UINT, OFF(idle_timeout_ms), 100, 86400000},
    {"control", "max_line", K_UINT, OFF(max_line), 256, 16777216},
    {"metrics", "enabled", K_BOOL, OFF(metrics_enabled), 0, 0},
    {"metrics", "listen", K_STR, OFF(metrics_listen), 0, 0},
    {"metrics", "port", K_UINT, OFF(metrics_port), 0, 65535},
    {"metrics", "web_config", K_STR, OFF(metrics_web_config), 0, 0},
};

struct parse_ctx {
    struct vpack_config *c;
    char *err;
    /* The text, handed to inih a line at a time by read_line(). */
    const char *next;
    size_t left;
    unsigned line;          /* the line inih is at (it counts the same way) */
    unsigned header_line;   /* the line of the last section header */
    unsigned *rule_headers; /* lines of the [rule ...] headers, in order */
    unsigned nrule_headers;
    unsigned err_line;      /* the line err is about; 0: none */
};

/*
 * Errors name the line (when line > 0), then "section.key" or, with name
 * NULL, "[section]".
 */
static int set_err(struct parse_ctx *ctx, int line, const char *section, const char *name,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int set_err(struct parse_ctx *ctx, int line, const char *section, const char *name,
                   const char *fmt, ...)
{
    char what[256], where[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (name)
        snprintf(where, sizeof(where), "%s.%s", section, name);
    else
        snprintf(where, sizeof(where), "[%s]", section);
    free(ctx->err);
    ctx->err = NULL;
    ctx->err_line = line > 0 ? (unsigned)line : 0;
    if (line > 0) {
        if (asprintf(&ctx->err, "line %d: %s: %s", line, where, what) < 0)
            ctx->err = NULL;
    } else if (asprintf(&ctx->err, "%s: %s", where, what) < 0) {
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
    case K_SCOPE: /* bool: true for system-wide */
        if (strcmp(value, "package") && strcmp(value, "system"))
            return set_err(ctx, line, section, name, "'%s' is not a PC6 scope (package or system)",
                           value);
        *(bool *)field = !strcmp(value, "system");
        ctx->c->pc6_scope_set = true;
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

/*
 * inih's reader over the text, as its own string reader, that also counts
 * lines and notes section headers: Debian's inih calls no handler for a
 * header (INI_CALL_HANDLER_ON_NEW_SECTION is off), yet a rule's messages
 * name its header's line, and a [rule "NAME"] with no key at all must not be
 * lost silently. A line longer than inih's buffer would be split into two
 * lines: it is an error instead.
 */
static char *read_line(char *str, int num, void *stream)
{
    struct parse_ctx *ctx = stream;
    size_t n = 0, max = num > 1 ? (size_t)num - 1 : 0;
    const char *p;

    if (ctx->left == 0 || max == 0 || ctx->err)
        return NULL;
    while (n < max && n < ctx->left && ctx->next[n] != '\n')
        n++;
    if (n < ctx->left && ctx->next[n] == '\n' && n < max)
        n++;
    else if (n == max && n < ctx->left) {
        /* No room left for the newline (or the line goes on). */
        ctx->err_line = ctx->line + 1;
        if (asprintf(&ctx->err, "line %u: longer than %d characters", ctx->err_line, num - 2) < 0)
            ctx->err = NULL;
        return NULL;
    }
    memcpy(str, ctx->next, n);
    str[n] = '\0';
    ctx->next += n;
    ctx->left -= n;
    ctx->line++;
    p = str;
    if (ctx->line == 1 && !strncmp(p, "\xef\xbb\xbf", 3))
        p += 3;
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\v' || *p == '\f')
        p++;
    if (*p == '[') {
        ctx->header_line = ctx->line;
        if (vpack_rule_section(p + 1)) {
            unsigned *grown = realloc(ctx->rule_headers,
                                      (ctx->nrule_headers + 1) * sizeof(*grown));
            if (!grown) {
                ctx->err_line = ctx->line;
                ctx->err = strdup("out of memory");
                return NULL;
            }
            ctx->rule_headers = grown;
            ctx->rule_headers[ctx->nrule_headers++] = ctx->line;
        }
    }
    return str;
}

/* A key of a [rule "NAME"] section: the rule is created at its first key. */
static int rule_key(struct parse_ctx *ctx, const char *section, const char *name,
                    const char *value)
{
    char rname[VPACK_RULE_NAME_MAX + 1], *err = NULL;
    struct vpack_rule *r;

    if (vpack_rule_section_name(section, rname) < 0)
        return set_err(ctx, (int)ctx->line, section, NULL,
                       "expected [rule \"NAME\"], NAME of at most %d letters, digits, "
                       "'.', '_' or '-'", VPACK_RULE_NAME_MAX);
    r = vpack_rules_find(&ctx->c->rules, rname);
    if (r && r->line != ctx->header_line)
        return set_err(ctx, (int)ctx->line, section, NULL,
                       "rule \"%s\" is already defined at line %u", rname, r->line);
    if (!r && !(r = vpack_rules_add(&ctx->c->rules, rname, ctx->header_line)))
        return set_err(ctx, (int)ctx->line, section, name, "out of memory");
    if (vpack_rule_set(r, name, value, &err) < 0) {
        set_err(ctx, (int)ctx->line, section, name, "%s", err ? err : "out of memory");
        free(err);
        return 0;
    }
    return 1;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
    struct parse_ctx *ctx = user;
    if (ctx->err)
        return 0;
    if (vpack_rule_section(section))
        return rule_key(ctx, section, name, value);
    return apply(ctx, (int)ctx->line, section, name, value);
}

/* After the text: every [rule ...] header has a complete rule, in file order. */
static void check_rules(struct parse_ctx *ctx)
{
    for (unsigned i = 0; i < ctx->nrule_headers && !ctx->err; i++) {
        const struct vpack_rule *r = NULL;
        char *err = NULL;
        for (unsigned k = 0; k < ctx->c->rules.n && !r; k++)
            if (ctx->c->rules.v[k].line == ctx->rule_headers[i])
                r = &ctx->c->rules.v[k];
        ctx->err_line = ctx->rule_headers[i];
        if (!r) {
            if (asprintf(&ctx->err, "line %u: a rule section with no keys (a rule needs "
                         "level and a condition)", ctx->rule_headers[i]) < 0)
                ctx->err = NULL;
        } else if (vpack_rule_check(r, &err) < 0) {
            if (asprintf(&ctx->err, "line %u: rule \"%s\": %s", r->line, r->name,
                         err ? err : "out of memory") < 0)
                ctx->err = NULL;
            free(err);
        }
    }
}

int vpack_config_parse(struct vpack_config *c, const char *text, char **errmsg)
{
    struct parse_ctx ctx = {.c = c, .next = text, .left = strlen(text)};
    int r = ini_parse_stream(read_line, &ctx, handler, &ctx);
    *errmsg = NULL;
    if (r == 0 && !ctx.err)
        check_rules(&ctx);
    free(ctx.rule_headers);
    if (r == 0 && !ctx.err)
        return 0;
    /* The first error in the text: inih's own (a line that is neither a
     * header nor key = value) may come before the one in ctx.err. */
    if (r > 0 && (!ctx.err || (unsigned)r < ctx.err_line)) {
        if (asprintf(errmsg, "line %d: not a section header or key = value", r) < 0)
            *errmsg = NULL;
    } else if (ctx.err) {
        *errmsg = ctx.err;
        ctx.err = NULL;
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

int vpack_config_check(const struct vpack_config *c, char **errmsg)
{
    char msg[256];

    *errmsg = NULL;
    if (vpack_policy_params_check(&c->policy, msg, sizeof(msg)) == 0)
        return 0;
    if (asprintf(errmsg, "[policy]: %s", msg) < 0)
        *errmsg = NULL;
    return -EINVAL;
}

int vpack_config_load(struct vpack_config *c, const char *text, const char *name,
                      char *const *sets, unsigned nsets, enum vpack_config_input *input,
                      char **errmsg)
{
    enum vpack_config_input at = VPACK_CONFIG_TEXT;
    char *err = NULL;
    int r = vpack_config_init(c);

    *errmsg = NULL;
    if (input)
        *input = VPACK_CONFIG_TEXT;
    if (r < 0)
        return r;
    if (text && (r = vpack_config_parse(c, text, &err)) < 0) {
        r = vpack_errmsg_set(r, errmsg, "%s: %s", name, err ? err : "out of memory");
        goto fail;
    }
    at = VPACK_CONFIG_SETS;
    for (unsigned i = 0; i < nsets; i++)
        if ((r = vpack_config_set(c, sets[i], &err)) < 0) {
            r = vpack_errmsg_set(r, errmsg, "--set %s", err ? err : "out of memory");
            goto fail;
        }
    if ((r = vpack_config_check(c, &err)) < 0) {
        at = nsets ? VPACK_CONFIG_SETS : VPACK_CONFIG_TEXT;
        r = vpack_errmsg_set(r, errmsg, "%s%s%s", nsets ? "" : name, nsets ? "" : ": ",
                             err ? err : "out of memory");
        goto fail;
    }
    return 0;
fail:
    free(err);
    vpack_config_clear(c);
    if (input)
        *input = at;
    return r;
}
