// SPDX-License-Identifier: MIT
/* The perf PMUs' sysfs format and event text; see vpack/perf-event.h. */
#include "vpack/perf-event.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vpack/errmsg.h"

/* A decimal number at *s, no sign; moves *s past it. */
static bool dec(const char **s, unsigned long *v)
{
    char *end;
    if (**s < '0' || **s > '9')
        return false;
    errno = 0;
    *v = strtoul(*s, &end, 10);
    if (errno)
        return false;
    *s = end;
    return true;
}

int vpack_perf_format_parse(const char *name, const char *text, struct vpack_perf_format *out,
                            char **errmsg)
{
    const char *s = text;
    unsigned long lo, hi;
    if (errmsg)
        *errmsg = NULL;
    if (strlen(name) >= sizeof(out->name))
        return vpack_errmsg_set(-EINVAL, errmsg, "format term name '%s' is too long", name);
    if (!strncmp(s, "config1:", 8) || !strncmp(s, "config2:", 8) || !strncmp(s, "config3:", 8))
        return vpack_errmsg_set(-EOPNOTSUPP, errmsg,
                                "format %s: '%s' is not in config (not supported)", name, text);
    if (strncmp(s, "config:", 7))
        return vpack_errmsg_set(-EINVAL, errmsg, "format %s: '%s' does not start with config:",
                                name, text);
    s += 7;
    if (!dec(&s, &lo))
        return vpack_errmsg_set(-EINVAL, errmsg, "format %s: no bit number in '%s'", name, text);
    hi = lo;
    if (*s == '-') {
        s++;
        if (!dec(&s, &hi))
            return vpack_errmsg_set(-EINVAL, errmsg, "format %s: no end bit in '%s'", name, text);
    }
    if (*s == ',')
        return vpack_errmsg_set(-EOPNOTSUPP, errmsg,
                                "format %s: split bit range '%s' (not supported)", name, text);
    if (*s || hi < lo || hi > 63)
        return vpack_errmsg_set(-EINVAL, errmsg, "format %s: bad bit range '%s'", name, text);
    snprintf(out->name, sizeof(out->name), "%s", name);
    out->lo = (unsigned)lo;
    out->hi = (unsigned)hi;
    return 0;
}

static const struct vpack_perf_format *find_format(const struct vpack_perf_format *fmt,
                                                   unsigned nfmt, const char *name, size_t n)
{
    for (unsigned i = 0; i < nfmt; i++)
        if (strlen(fmt[i].name) == n && !strncmp(fmt[i].name, name, n))
            return &fmt[i];
    return NULL;
}

/* One term "name" or "name=0xNN" of len n into *config. */
static int add_term(const char *term, size_t n, const struct vpack_perf_format *fmt,
                    unsigned nfmt, uint64_t *config, char **errmsg)
{
    const char *eq = memchr(term, '=', n);
    size_t nlen = eq ? (size_t)(eq - term) : n;
    unsigned long long v = 1;
    if (nlen == 0)
        return vpack_errmsg_set(-EINVAL, errmsg, "event term '%.*s' has no name", (int)n, term);
    const struct vpack_perf_format *f = find_format(fmt, nfmt, term, nlen);
    if (!f)
        return vpack_errmsg_set(-EINVAL, errmsg, "event term '%.*s' has no format", (int)nlen,
                                term);
    if (eq) {
        char num[32], *end;
        size_t vlen = n - nlen - 1;
        if (vlen == 0 || vlen >= sizeof(num))
            return vpack_errmsg_set(-EINVAL, errmsg, "event term '%.*s': bad value", (int)n, term);
        memcpy(num, eq + 1, vlen);
        num[vlen] = '\0';
        errno = 0;
        v = strtoull(num, &end, 0);
        if (*end || errno || num[0] == '-')
            return vpack_errmsg_set(-EINVAL, errmsg, "event term '%.*s': bad value", (int)n, term);
    }
    unsigned width = f->hi - f->lo + 1;
    if (width < 64 && v >> width)
        return vpack_errmsg_set(-EINVAL, errmsg, "event term '%.*s': value wider than %u bits",
                                (int)n, term, width);
    *config |= (uint64_t)v << f->lo;
    return 0;
}

int vpack_perf_event_parse(const char *text, const struct vpack_perf_format *fmt, unsigned nfmt,
                           uint64_t *config, char **errmsg)
{
    if (errmsg)
        *errmsg = NULL;
    *config = 0;
    if (!*text)
        return vpack_errmsg_set(-EINVAL, errmsg, "empty event");
    for (const char *p = text;;) {
        size_t n = strcspn(p, ",");
        int r = add_term(p, n, fmt, nfmt, config, errmsg);
        if (r < 0)
            return r;
        if (!p[n])
            return 0;
        p += n + 1;
    }
}

bool vpack_perf_cstate_name(const char *event, char *out, unsigned size)
{
    const char *s = event;
    unsigned long n;
    if (*s++ != 'c' || !dec(&s, &n) || strcmp(s, "-residency") || n > 99 || size < 4)
        return false;
    snprintf(out, size, "C%lu", n);
    return true;
}
