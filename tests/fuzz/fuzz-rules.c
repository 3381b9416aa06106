// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the power policy rules: vpackd.conf text with
 * [rule "NAME"] sections (lib/config.c's reader) and the matching of the
 * rules against a domain's XML (lib/rules.c). The input is the
 * configuration, a NUL byte, then the domain XML; without a NUL, all of it
 * is the XML and the rules are a fixed set in Nova's namespace. Checked on
 * every input:
 *
 *  - a refused configuration has a one-line message of bounded length,
 *    starting with the line ("line N: ") except for inih's own failures;
 *  - an accepted one holds only complete rules, with unique names, in
 *    file order, and copies whole;
 *  - resolving gives 0 or -EINVAL with a one-line message (or -ENOMEM),
 *    -EINVAL on readable XML only for a level_from text that is not a
 *    level; the domain's own level always wins; a rule's level is that
 *    rule's (or, with level_from, one it read),
 *    and no rule before it would have matched (it is the first).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>

#include "vpack/config.h"
#include "vpack/domxml.h"
#include "vpack/rules.h"

static const char fixed_rules[] =
    "[rule \"flavor\"]\nlevel = 2\n"
    "metadata_namespace = http://openstack.org/xmlns/libvirt/nova/1.1\n"
    "metadata_path = instance/flavor/@name\nmetadata_value = m1.*\n"
    "[rule \"text\"]\nlevel = 1\n"
    "metadata_namespace = http://openstack.org/xmlns/libvirt/nova/1.1\n"
    "metadata_path = instance/owner/project\nmetadata_value = *shot\n"
    "[rule \"spec\"]\n"
    "metadata_namespace = http://openstack.org/xmlns/libvirt/nova/1.1\n"
    "level_from = instance/flavor/extraSpecs/extraSpec[@name=\"vpack:level\"]\n"
    "[rule \"ns\"]\nlevel = 0\nname = *\nmetadata_namespace = urn:x\n";

static void quiet(void *ctx, const char *msg, ...)
{
    (void)ctx;
    (void)msg;
}

static void check_msg(const char *msg)
{
    if (!msg || strchr(msg, '\n') || strlen(msg) > 700)
        abort();
}

static void check_rules(const struct vpack_rules *rs)
{
    struct vpack_rules copy;
    for (unsigned i = 0; i < rs->n; i++) {
        if (vpack_rule_check(&rs->v[i], NULL) != 0 || (i && rs->v[i].line <= rs->v[i - 1].line))
            abort();
        for (unsigned k = 0; k < i; k++)
            if (!strcmp(rs->v[k].name, rs->v[i].name))
                abort();
    }
    if (vpack_rules_copy(&copy, rs) < 0)
        return;
    if (copy.n != rs->n)
        abort();
    for (unsigned i = 0; i < copy.n; i++)
        if (strcmp(copy.v[i].name, rs->v[i].name) || copy.v[i].level != rs->v[i].level)
            abort();
    vpack_rules_clear(&copy);
}

/* The level of rules r[0..n) alone, the domain having none of its own. */
static int resolve_first(const struct vpack_rules *rs, unsigned n, const char *name,
                         const char *xml, size_t len, struct vpack_level *lv)
{
    struct vpack_rules head = {n, rs->v};
    return vpack_rules_resolve(&head, -1, -1, name, xml, len, lv, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    const char *nul = memchr(data, '\0', size);
    const char *xml = nul ? nul + 1 : (const char *)data;
    size_t xlen = nul ? size - (size_t)(nul + 1 - (const char *)data) : size;
    struct vpack_config c;
    struct vpack_domxml *d = NULL;
    struct vpack_level lv, prev;
    char *err = NULL, *name = NULL;
    int r;

    if (!init) {
        xmlSetGenericErrorFunc(NULL, quiet);
        init = 1;
    }
    if (vpack_config_init(&c) < 0)
        return 0;
    r = vpack_config_parse(&c, nul ? (const char *)data : fixed_rules, &err);
    if (r == -EINVAL) {
        check_msg(err);
        if (strncmp(err, "line ", 5) && strncmp(err, "cannot parse", 12))
            abort();
        goto cleanup;
    }
    if (r < 0)
        goto cleanup;
    if (err)
        abort();
    check_rules(&c.rules);

    /* The domain's name and own level as vpackd reads them. */
    if (vpack_domxml_parse(xml, xlen, &d, NULL) == 0)
        name = strdup(d->name);
    r = vpack_rules_resolve(&c.rules, d ? d->level : -1, -1, name ? name : "x", xml, xlen, &lv,
                            &err);
    if (r == -EINVAL) {
        check_msg(err);
        /* With readable XML, only a level_from text that is not a level. */
        if (lv.source != VPACK_LEVEL_DEFAULT || lv.level != -1 ||
            (d && strncmp(err, "rule \"", 6)))
            abort();
        goto cleanup;
    }
    if (r < 0)
        goto cleanup;
    if (err || lv.level < -1 || lv.level > 2)
        abort();
    if (d && d->level >= 0 && (lv.source != VPACK_LEVEL_DOMAIN || lv.level != d->level))
        abort();
    if (lv.source == VPACK_LEVEL_RULE) {
        const struct vpack_rule *rule = vpack_rules_find(&c.rules, lv.rule);
        unsigned idx;
        if (!rule || (rule->level_path ? rule->level >= 0 : rule->level != lv.level))
            abort();
        idx = (unsigned)(rule - c.rules.v);
        /* No rule before it matches; with it, it does. */
        if (resolve_first(&c.rules, idx, name ? name : "x", xml, xlen, &prev) == 0 &&
            prev.source != VPACK_LEVEL_DEFAULT)
            abort();
        if (resolve_first(&c.rules, idx + 1, name ? name : "x", xml, xlen, &prev) == 0 &&
            (prev.source != VPACK_LEVEL_RULE || strcmp(prev.rule, lv.rule)))
            abort();
    } else if (lv.source == VPACK_LEVEL_DEFAULT && lv.level != -1) {
        abort();
    }

cleanup:
    free(err);
    free(name);
    vpack_domxml_free(d);
    vpack_config_clear(&c);
    return 0;
}
