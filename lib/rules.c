// SPDX-License-Identifier: MIT
/*
 * Power policy rules (vpack/rules.h): their keys, their checks and the
 * matching. A metadata condition is read the way libvirt keeps metadata:
 * the first <metadata> of the domain, and in it the first element of the
 * rule's namespace (libvirt drops any later one), matched by namespace URI,
 * never by prefix. metadata_path starts with that element's local name
 * and goes down through child elements of the same namespace (or of none)
 * to an element, whose text counts, or to a last step @ATTR, an attribute
 * in no namespace. Where the path names several nodes (<nova:port> is
 * repeated), any one of them may match.
 */
#include "vpack/rules.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/tree.h>

#include "format/domxml-priv.h"
#include "vpack/domxml.h"
#include "vpack/errmsg.h"

const char *vpack_level_source_name(enum vpack_level_source source)
{
    switch (source) {
    case VPACK_LEVEL_DOMAIN:
        return "domain";
    case VPACK_LEVEL_RULE:
        return "rule";
    case VPACK_LEVEL_DEFAULT:
        break;
    }
    return "default";
}

/* ---- Rule sections and keys ---- */

static bool is_name_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '_' || ch == '-';
}

static const char *skip_blanks(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

bool vpack_rule_section(const char *section)
{
    const char *p = skip_blanks(section);
    return strncmp(p, "rule", 4) == 0 && !is_name_char(p[4]);
}

/* The section inih hands over for [rule "NAME"] is `rule "NAME"`; blanks
 * around the words are fine, as in [ rule "NAME" ]. */
int vpack_rule_section_name(const char *section, char name[VPACK_RULE_NAME_MAX + 1])
{
    const char *p, *end;
    size_t n;

    if (!vpack_rule_section(section))
        return -EINVAL;
    p = skip_blanks(skip_blanks(section) + 4);
    if (*p++ != '"' || !(end = strchr(p, '"')) || *skip_blanks(end + 1) != '\0')
        return -EINVAL;
    n = (size_t)(end - p);
    if (n == 0 || n > VPACK_RULE_NAME_MAX)
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!is_name_char(p[i]))
            return -EINVAL;
    memcpy(name, p, n);
    name[n] = '\0';
    return 0;
}

struct vpack_rule *vpack_rules_add(struct vpack_rules *rs, const char *name, unsigned line)
{
    struct vpack_rule *grown = realloc(rs->v, (rs->n + 1) * sizeof(*grown));
    char *copy = strdup(name);

    if (!grown || !copy) {
        /* realloc() kept the old array either way: rs is still whole. */
        if (grown)
            rs->v = grown;
        free(copy);
        return NULL;
    }
    rs->v = grown;
    rs->v[rs->n] = (struct vpack_rule){.name = copy, .line = line, .level = -1};
    return &rs->v[rs->n++];
}

struct vpack_rule *vpack_rules_find(const struct vpack_rules *rs, const char *name)
{
    for (unsigned i = 0; i < rs->n; i++)
        if (!strcmp(rs->v[i].name, name))
            return &rs->v[i];
    return NULL;
}

/* A local name as XML has them: a letter, '_' or a UTF-8 byte first; then
 * also digits, '-' and '.'. No ':': prefixes mean nothing to a rule. */
static bool is_xml_name(const char *s, size_t n)
{
    if (n == 0 || (s[0] >= '0' && s[0] <= '9') || s[0] == '-' || s[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_name_char(s[i]) && !((unsigned char)s[i] & 0x80))
            return false;
    return true;
}

static int check_path(const char *path, char **errmsg)
{
    const char *p = path;

    if (*p == '\0')
        return vpack_errmsg_set(-EINVAL, errmsg, "empty (the path starts with the element's "
                                "name, e.g. instance/flavor/@name)");
    if (*p == '/' || *p == '@')
        return vpack_errmsg_set(-EINVAL, errmsg, "'%s' must start with the name of the "
                                "namespace's element inside <metadata>, e.g. instance/flavor/@name",
                                path);
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        bool attr = *p == '@';

        if (attr && slash)
            return vpack_errmsg_set(-EINVAL, errmsg, "'%s': an attribute (@NAME) can only be "
                                    "the last step", path);
        if (memchr(p, ':', n))
            return vpack_errmsg_set(-EINVAL, errmsg, "'%s': no prefixes: elements are "
                                    "matched by metadata_namespace, whatever their prefix", path);
        if (!is_xml_name(p + attr, n - attr))
            return vpack_errmsg_set(-EINVAL, errmsg, "'%s': '%.*s' is not an element or "
                                    "@attribute name", path, (int)n, p);
        if (!slash)
            return 0;
        p = slash + 1;
    }
}

static int check_namespace(const char *uri, char **errmsg)
{
    if (*uri == '\0')
        return vpack_errmsg_set(-EINVAL, errmsg, "empty (expected a namespace URI, e.g. "
                                "http://openstack.org/xmlns/libvirt/nova/1.1)");
    for (const char *p = uri; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return vpack_errmsg_set(-EINVAL, errmsg, "'%s' is not a namespace URI (it "
                                    "contains blanks or control characters)", uri);
    if (!strcmp(uri, VPACK_XML_NS))
        return vpack_errmsg_set(-EINVAL, errmsg, "'%s' is vpack's own namespace: a domain's "
                                "own element always wins over the rules", uri);
    return 0;
}

int vpack_rule_set(struct vpack_rule *r, const char *key, const char *value, char **errmsg)
{
    char **field = NULL;
    int ret;

    if (errmsg)
        *errmsg = NULL;
    if (!strcmp(key, "level")) {
        int level = vpack_domxml_level_parse(value);
        if (r->level >= 0)
            return vpack_errmsg_set(-EINVAL, errmsg, "set twice in this rule");
        if (level < 0)
            return vpack_errmsg_set(-EINVAL, errmsg,
                                    "'%s' is not a power policy level (0, 1 or 2)", value);
        r->level = level;
        return 0;
    }
    if (!strcmp(key, "name"))
        field = &r->name_glob;
    else if (!strcmp(key, "metadata_namespace"))
        field = &r->ns;
    else if (!strcmp(key, "metadata_path"))
        field = &r->path;
    else if (!strcmp(key, "metadata_value"))
        field = &r->value_glob;
    else
        return vpack_errmsg_set(-EINVAL, errmsg, "unknown key (a rule has level, name, "
                                "metadata_namespace, metadata_path and metadata_value)");
    if (*field)
        return vpack_errmsg_set(-EINVAL, errmsg, "set twice in this rule");
    if (field == &r->name_glob && *value == '\0')
        return vpack_errmsg_set(-EINVAL, errmsg, "empty (expected a glob such as web-*)");
    if (field == &r->ns && (ret = check_namespace(value, errmsg)) < 0)
        return ret;
    if (field == &r->path && (ret = check_path(value, errmsg)) < 0)
        return ret;
    /* metadata_value may be empty: Nova writes <nova:image uuid=""> for a
     * server booted from a volume. */
    if (!(*field = strdup(value)))
        return vpack_errmsg_set(-ENOMEM, errmsg, "out of memory");
    return 0;
}

int vpack_rule_check(const struct vpack_rule *r, char **errmsg)
{
    if (errmsg)
        *errmsg = NULL;
    if (r->level < 0)
        return vpack_errmsg_set(-EINVAL, errmsg, "no level (add level = 0, 1 or 2)");
    if (r->path && !r->ns)
        return vpack_errmsg_set(-EINVAL, errmsg, "metadata_path needs metadata_namespace");
    if (r->value_glob && !r->path)
        return vpack_errmsg_set(-EINVAL, errmsg, "metadata_value needs metadata_path");
    if (!r->name_glob && !r->ns)
        return vpack_errmsg_set(-EINVAL, errmsg, "no condition (add name = GLOB or "
                                "metadata_namespace = URI; [policy] default_level is the "
                                "level of every other domain)");
    return 0;
}

static void rule_clear(struct vpack_rule *r)
{
    free(r->name);
    free(r->name_glob);
    free(r->ns);
    free(r->path);
    free(r->value_glob);
}

void vpack_rules_clear(struct vpack_rules *rs)
{
    for (unsigned i = 0; i < rs->n; i++)
        rule_clear(&rs->v[i]);
    free(rs->v);
    rs->v = NULL;
    rs->n = 0;
}

/* strdup() that keeps NULL; false when out of memory. */
static bool dup_opt(char **dst, const char *src)
{
    *dst = src ? strdup(src) : NULL;
    return !src || *dst;
}

int vpack_rules_copy(struct vpack_rules *dst, const struct vpack_rules *src)
{
    *dst = (struct vpack_rules){0};
    if (src->n == 0)
        return 0;
    if (!(dst->v = calloc(src->n, sizeof(*dst->v))))
        return -ENOMEM;
    for (unsigned i = 0; i < src->n; i++) {
        const struct vpack_rule *s = &src->v[i];
        struct vpack_rule *d = &dst->v[dst->n++];
        *d = (struct vpack_rule){.line = s->line, .level = s->level};
        if (!dup_opt(&d->name, s->name) || !dup_opt(&d->name_glob, s->name_glob) ||
            !dup_opt(&d->ns, s->ns) || !dup_opt(&d->path, s->path) ||
            !dup_opt(&d->value_glob, s->value_glob)) {
            vpack_rules_clear(dst);
            return -ENOMEM;
        }
    }
    return 0;
}

/* ---- Matching ---- */

/* An element with this local name, in the rule's namespace or in none. */
static bool is_step(const xmlNode *n, const char *ns, const char *step, size_t len)
{
    return n->type == XML_ELEMENT_NODE && (!n->ns || xmlStrEqual(n->ns->href, BAD_CAST ns)) &&
           strlen((const char *)n->name) == len && !memcmp(n->name, step, len);
}

static bool is_blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

/* Matches glob against s without its leading and trailing XML blanks. */
static bool value_matches(const char *glob, const char *s)
{
    size_t n;
    char *trimmed;
    bool hit;

    while (is_blank(*s))
        s++;
    n = strlen(s);
    while (n > 0 && is_blank(s[n - 1]))
        n--;
    if (s[n] == '\0')
        return fnmatch(glob, s, 0) == 0;
    if (!(trimmed = strndup(s, n)))
        return false;
    hit = fnmatch(glob, trimmed, 0) == 0;
    free(trimmed);
    return hit;
}

/*
 * Sets *hit when steps, the rest of the path below el ("" for el itself),
 * names a node whose value matches glob (NULL: any value). Returns 0 or
 * -ENOMEM.
 */
static int walk(xmlNode *el, const char *ns, const char *steps, const char *glob, bool *hit)
{
    const char *slash;
    size_t n;

    if (*steps == '\0' && !glob) {
        *hit = true;
        return 0;
    }
    if (*steps == '\0' || *steps == '@') {
        bool attr = *steps == '@';
        xmlChar *v = attr ? xmlGetNoNsProp(el, BAD_CAST(steps + 1)) : xmlNodeGetContent(el);
        if (!v)
            return attr ? 0 : -ENOMEM; /* no such attribute: no match */
        *hit = !glob || value_matches(glob, (const char *)v);
        xmlFree(v);
        return 0;
    }
    slash = strchr(steps, '/');
    n = slash ? (size_t)(slash - steps) : strlen(steps);
    for (xmlNode *c = el->children; c && !*hit; c = c->next) {
        int r;
        if (is_step(c, ns, steps, n) && (r = walk(c, ns, slash ? slash + 1 : "", glob, hit)) < 0)
            return r;
    }
    return 0;
}

/* Does the metadata condition of r hold in <metadata> meta (NULL: none)? */
static int metadata_matches(xmlNode *meta, const struct vpack_rule *r, bool *hit)
{
    xmlNode *top = NULL;

    *hit = false;
    for (xmlNode *n = meta ? meta->children : NULL; n && !top; n = n->next)
        if (n->type == XML_ELEMENT_NODE && n->ns && n->ns->href &&
            xmlStrEqual(n->ns->href, BAD_CAST r->ns))
            top = n;
    if (!top)
        return 0;
    if (!r->path) {
        *hit = true;
        return 0;
    }
    const char *slash = strchr(r->path, '/');
    size_t n = slash ? (size_t)(slash - r->path) : strlen(r->path);
    if (strlen((const char *)top->name) != n || memcmp(top->name, r->path, n) != 0)
        return 0;
    return walk(top, r->ns, slash ? slash + 1 : "", r->value_glob, hit);
}

int vpack_rules_resolve(const struct vpack_rules *rs, int own_level, int default_level,
                        const char *name, const char *xml, size_t len, struct vpack_level *out,
                        char **errmsg)
{
    xmlDoc *doc = NULL;
    xmlNode *root, *meta = NULL;
    int ret = 0;

    if (errmsg)
        *errmsg = NULL;
    *out = (struct vpack_level){default_level, VPACK_LEVEL_DEFAULT, NULL};
    if (own_level >= 0) {
        *out = (struct vpack_level){own_level, VPACK_LEVEL_DOMAIN, NULL};
        return 0;
    }
    for (unsigned i = 0; i < rs->n; i++) {
        const struct vpack_rule *r = &rs->v[i];
        bool hit;

        if (r->name_glob && fnmatch(r->name_glob, name, 0) != 0)
            continue;
        if (r->ns) {
            /* Read once, and only when a rule needs it. */
            if (!doc) {
                if ((ret = vpack__domxml_read_doc(xml, len, &doc, &root, errmsg)) < 0)
                    break;
                meta = vpack__domxml_metadata(root);
            }
            if ((ret = metadata_matches(meta, r, &hit)) < 0)
                break;
            if (!hit)
                continue;
        }
        *out = (struct vpack_level){r->level, VPACK_LEVEL_RULE, r->name};
        break;
    }
    if (ret < 0)
        *out = (struct vpack_level){default_level, VPACK_LEVEL_DEFAULT, NULL};
    xmlFreeDoc(doc);
    return ret;
}
