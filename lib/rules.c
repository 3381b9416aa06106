// SPDX-License-Identifier: MIT
/*
 * Power policy rules (vpack/rules.h): their keys, their checks and the
 * matching. A metadata condition is read the way libvirt keeps metadata:
 * the first <metadata> of the domain, and in it the first element of the
 * rule's namespace (libvirt drops any later one), matched by namespace URI,
 * never by prefix. metadata_path starts with that element's local name
 * and goes down through child elements of the same namespace (or of none)
 * to an element, whose text counts, or to a last step @ATTR, an attribute
 * in no namespace. An element step may carry one filter [@ATTR="VALUE"]
 * (exact, not a glob), which Nova's <nova:extraSpec name="KEY">VALUE</...>
 * needs: its extra specs differ only in that attribute. Where the path
 * names several nodes (<nova:port> is repeated), any one of them may match;
 * level_from takes the first.
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

/*
 * One step of a rule path: NAME, NAME[@ATTR="VALUE"] (an element whose
 * attribute ATTR is VALUE, so that one of Nova's repeated
 * <nova:extraSpec name="..."> can be named) or, last, @NAME.
 */
struct step {
    const char *name;  /* without its '@' */
    size_t n;
    bool attr;         /* @NAME: an attribute in no namespace */
    const char *fattr; /* the filter's attribute; NULL: no filter */
    size_t fattr_n;
    const char *fval; /* the filter's value, without its quotes */
    size_t fval_n;
    const char *next; /* the steps after this one; NULL: the last */
};

static size_t name_span(const char *p)
{
    return strcspn(p, "/[]=\"'");
}

/* Parses the filter at *p (after its '['); moves *p past its ']'. */
static int parse_filter(const char **p, struct step *s, const char *path, char **errmsg)
{
    const char *q = *p, *close;

    if (*q++ != '@')
        return vpack_errmsg_set(-EINVAL, errmsg, "'%s': a filter is [@NAME=\"VALUE\"], an "
                                "attribute of the element, e.g. extraSpec[@name=\"vpack:level\"]",
                                path);
    s->fattr = q;
    s->fattr_n = name_span(q);
    q += s->fattr_n;
    if (!is_xml_name(s->fattr, s->fattr_n) || memchr(s->fattr, ':', s->fattr_n) || *q++ != '=')
        return vpack_errmsg_set(-EINVAL, errmsg, "'%s': a filter is [@NAME=\"VALUE\"], with NAME "
                                "an attribute name without prefix", path);
    if ((*q != '"' && *q != '\'') || !(close = strchr(q + 1, *q)))
        return vpack_errmsg_set(-EINVAL, errmsg, "'%s': the value of a filter is quoted, as in "
                                "[@name=\"vpack:level\"]", path);
    s->fval = q + 1;
    s->fval_n = (size_t)(close - s->fval);
    if (close[1] != ']')
        return vpack_errmsg_set(-EINVAL, errmsg, "'%s': '[' without its closing ']' after the "
                                "quoted value (a filter is [@NAME=\"VALUE\"])", path);
    *p = close + 2;
    return 0;
}

/* Parses the step at p into *s. Returns 0 or -EINVAL with *errmsg. */
static int parse_step(const char *p, struct step *s, const char *path, char **errmsg)
{
    *s = (struct step){.attr = *p == '@'};
    s->name = p + s->attr;
    s->n = name_span(s->name);
    p = s->name + s->n;
    if (memchr(s->name, ':', s->n))
        return vpack_errmsg_set(-EINVAL, errmsg, "'%s': no prefixes: elements are "
                                "matched by metadata_namespace, whatever their prefix", path);
    if (!is_xml_name(s->name, s->n))
        return vpack_errmsg_set(-EINVAL, errmsg, "'%s': '%.*s%.*s' is not an element or "
                                "@attribute name", path, (int)s->attr, "@", (int)s->n, s->name);
    if (*p == '[') {
        int ret;
        if (s->attr)
            return vpack_errmsg_set(-EINVAL, errmsg, "'%s': an attribute (@NAME) has no filter",
                                    path);
        p++;
        if ((ret = parse_filter(&p, s, path, errmsg)) < 0)
            return ret;
    }
    if (*p == '/') {
        if (s->attr)
            return vpack_errmsg_set(-EINVAL, errmsg, "'%s': an attribute (@NAME) can only be "
                                    "the last step", path);
        s->next = p + 1;
        return 0;
    }
    if (*p != '\0')
        return vpack_errmsg_set(-EINVAL, errmsg, "'%s': '%c' after '%.*s' (steps are separated "
                                "by '/'; a filter is [@NAME=\"VALUE\"])", path, *p, (int)s->n,
                                s->name);
    return 0;
}

static int check_path(const char *path, char **errmsg)
{
    struct step s = {.next = path};
    int ret;

    if (*path == '\0')
        return vpack_errmsg_set(-EINVAL, errmsg, "empty (the path starts with the element's "
                                "name, e.g. instance/flavor/@name)");
    if (*path == '/' || *path == '@')
        return vpack_errmsg_set(-EINVAL, errmsg, "'%s' must start with the name of the "
                                "namespace's element inside <metadata>, e.g. instance/flavor/@name",
                                path);
    while (s.next)
        if ((ret = parse_step(s.next, &s, path, errmsg)) < 0)
            return ret;
    return 0;
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
        if (r->level_path)
            return vpack_errmsg_set(-EINVAL, errmsg, "a rule has level or level_from, not both");
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
    else if (!strcmp(key, "level_from"))
        field = &r->level_path;
    else
        return vpack_errmsg_set(-EINVAL, errmsg, "unknown key (a rule has level or level_from, "
                                "name, metadata_namespace, metadata_path and metadata_value)");
    if (*field)
        return vpack_errmsg_set(-EINVAL, errmsg, "set twice in this rule");
    if (field == &r->level_path && r->level >= 0)
        return vpack_errmsg_set(-EINVAL, errmsg, "a rule has level or level_from, not both");
    if (field == &r->name_glob && *value == '\0')
        return vpack_errmsg_set(-EINVAL, errmsg, "empty (expected a glob such as web-*)");
    if (field == &r->ns && (ret = check_namespace(value, errmsg)) < 0)
        return ret;
    if ((field == &r->path || field == &r->level_path) && (ret = check_path(value, errmsg)) < 0)
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
    if (r->level < 0 && !r->level_path)
        return vpack_errmsg_set(-EINVAL, errmsg, "no level (add level = 0, 1 or 2, or "
                                "level_from = PATH)");
    if (r->level_path && !r->ns)
        return vpack_errmsg_set(-EINVAL, errmsg, "level_from needs metadata_namespace");
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

/* The fields of Nova's <nova:instance> a tenant chooses, by their step. */
static const char *tenant_step(const char *path)
{
    static const struct {
        const char *step, *words;
    } fields[] = {
        {"name", "the instance's display name (<nova:name>)"},
        {"owner", "the owner's user and project names (<nova:owner>)"},
        {"image", "an image's properties (<nova:image>), which whoever uploads the image sets"},
    };
    if (!path || strncmp(path, "instance/", 9))
        return NULL;
    path += 9;
    size_t n = strcspn(path, "/[");
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        if (strlen(fields[i].step) == n && !strncmp(path, fields[i].step, n))
            return fields[i].words;
    return NULL;
}

const char *vpack_rule_tenant_field(const struct vpack_rule *r)
{
    const char *w;
    if (!r->ns || strcmp(r->ns, "http://openstack.org/xmlns/libvirt/nova/1.1"))
        return NULL;
    return (w = tenant_step(r->path)) ? w : tenant_step(r->level_path);
}

static void rule_clear(struct vpack_rule *r)
{
    free(r->name);
    free(r->name_glob);
    free(r->ns);
    free(r->path);
    free(r->value_glob);
    free(r->level_path);
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
            !dup_opt(&d->value_glob, s->value_glob) || !dup_opt(&d->level_path, s->level_path)) {
            vpack_rules_clear(dst);
            return -ENOMEM;
        }
    }
    return 0;
}

/* ---- Matching ---- */

/* An element with this local name, in the rule's namespace or in none, and
 * with the attribute of the step's filter set to its value. */
static bool is_step(xmlNode *n, const char *ns, const struct step *s)
{
    xmlChar *attr, *v;
    bool hit;

    if (n->type != XML_ELEMENT_NODE || (n->ns && !xmlStrEqual(n->ns->href, BAD_CAST ns)) ||
        strlen((const char *)n->name) != s->n || memcmp(n->name, s->name, s->n) != 0)
        return false;
    if (!s->fattr)
        return true;
    /* Out of memory reads as no match: the rule cannot hold. */
    if (!(attr = xmlStrndup(BAD_CAST s->fattr, (int)s->fattr_n)))
        return false;
    v = xmlGetNoNsProp(n, attr);
    xmlFree(attr);
    if (!v)
        return false;
    hit = strlen((const char *)v) == s->fval_n && !memcmp(v, s->fval, s->fval_n);
    xmlFree(v);
    return hit;
}

static bool is_blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

/* s without its leading and trailing XML blanks, in place. */
static char *trim(char *s)
{
    size_t n;

    while (is_blank(*s))
        s++;
    n = strlen(s);
    while (n > 0 && is_blank(s[n - 1]))
        s[--n] = '\0';
    return s;
}

/*
 * Sets *value (xmlFree() it) to the text, without its leading and trailing
 * blanks, of the first node that the steps from `steps` (NULL: el itself)
 * name below el and whose text matches glob (NULL: any text); leaves it
 * NULL when there is none. Returns 0 or -ENOMEM.
 */
static int walk(xmlNode *el, const char *ns, const char *steps, const char *glob, xmlChar **value)
{
    struct step s;

    if (!steps || *steps == '@') {
        xmlChar *v = steps ? xmlGetNoNsProp(el, BAD_CAST(steps + 1)) : xmlNodeGetContent(el);
        if (!v)
            return steps ? 0 : -ENOMEM; /* no such attribute: no match */
        char *t = trim((char *)v);
        memmove(v, t, strlen(t) + 1);
        if (!glob || fnmatch(glob, (const char *)v, 0) == 0)
            *value = v;
        else
            xmlFree(v);
        return 0;
    }
    /* The path was checked when the rule was read. */
    if (parse_step(steps, &s, steps, NULL) < 0)
        return 0;
    for (xmlNode *c = el->children; c && !*value; c = c->next) {
        int r;
        if (is_step(c, ns, &s) && (r = walk(c, ns, s.next, glob, value)) < 0)
            return r;
    }
    return 0;
}

/* The first element of namespace ns in <metadata> meta (NULL: none). */
static xmlNode *ns_element(xmlNode *meta, const char *ns)
{
    for (xmlNode *n = meta ? meta->children : NULL; n; n = n->next)
        if (n->type == XML_ELEMENT_NODE && n->ns && n->ns->href &&
            xmlStrEqual(n->ns->href, BAD_CAST ns))
            return n;
    return NULL;
}

/* The value path names in the namespace's element top, as walk() gives it. */
static int path_value(xmlNode *top, const char *ns, const char *path, const char *glob,
                      xmlChar **value)
{
    struct step s;

    *value = NULL;
    if (parse_step(path, &s, path, NULL) < 0 || !is_step(top, ns, &s))
        return 0;
    return walk(top, ns, s.next, glob, value);
}

/* Does the metadata condition of r hold in <metadata> meta (NULL: none)? */
static int metadata_matches(xmlNode *meta, const struct vpack_rule *r, bool *hit)
{
    xmlNode *top = ns_element(meta, r->ns);
    xmlChar *v = NULL;
    int ret;

    *hit = top && !r->path;
    if (!top || !r->path)
        return 0;
    ret = path_value(top, r->ns, r->path, r->value_glob, &v);
    *hit = v != NULL;
    xmlFree(v);
    return ret;
}

/*
 * The level that r's level_from names in <metadata> meta: *level is -1 when
 * it names nothing (the rule does not match). Returns 0, -EINVAL with
 * *errmsg when the text is not a level, or -ENOMEM.
 */
static int level_from(xmlNode *meta, const struct vpack_rule *r, int *level, char **errmsg)
{
    xmlNode *top = ns_element(meta, r->ns);
    xmlChar *v = NULL;
    int ret;

    *level = -1;
    if (!top || (ret = path_value(top, r->ns, r->level_path, NULL, &v)) < 0 || !v)
        return top ? ret : 0;
    *level = vpack_domxml_level_parse((const char *)v);
    if (*level < 0)
        ret = vpack_errmsg_set(-EINVAL, errmsg, "rule \"%s\": level_from %s is '%.40s', not a "
                               "power policy level (0, 1 or 2)", r->name, r->level_path,
                               (const char *)v);
    xmlFree(v);
    return ret;
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
        int level = r->level;
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
            if (r->level_path && (ret = level_from(meta, r, &level, errmsg)) < 0)
                break;
            if (level < 0)
                continue;
        }
        *out = (struct vpack_level){level, VPACK_LEVEL_RULE, r->name};
        break;
    }
    if (ret < 0)
        *out = (struct vpack_level){default_level, VPACK_LEVEL_DEFAULT, NULL};
    xmlFreeDoc(doc);
    return ret;
}
