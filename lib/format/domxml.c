// SPDX-License-Identifier: MIT
/*
 * The domain-XML reader. It walks the libxml2 tree instead of running XPath,
 * but follows libvirt 9.0's domain_conf.c and numa_conf.c step by step:
 * which element counts when there are several (libvirt's "./vcpu[1]" is the
 * first, "./cputune/vcpupin" is every one under every <cputune>), which
 * number syntax each value accepts (virStrToLong_ui vs. _uip), which checks
 * come first, and what is ignored rather than refused. Where vpack itself
 * refuses something libvirt accepts, a comment says so.
 *
 * Like libvirt's XPath expressions, element lookups match only elements in
 * no namespace; the policy element is the one exception, matched by
 * namespace URI.
 *
 * This file reads the document (vpack_domxml_parse(), _identity(), the
 * policy level). The record's JSON is domrecord.c; the rewrites that edit
 * a document (define, the guest's request) are domxml-define.c; what they
 * share of the reader is in domxml-priv.h.
 */
#include "vpack/domxml.h"
#include "vpack/grow.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "domxml-priv.h"

/* Longest error message handed out, so that a huge attribute value cannot
 * turn the hook's one line on stderr into megabytes. */
#define MSG_MAX 480

static const char *const numa_mode_names[] = {
    [VPACK_NUMA_MODE_STRICT] = "strict",
    [VPACK_NUMA_MODE_PREFERRED] = "preferred",
    [VPACK_NUMA_MODE_INTERLEAVE] = "interleave",
    [VPACK_NUMA_MODE_RESTRICTIVE] = "restrictive",
};

/* libvirt's virDomainNumatunePlacement: "default" resolves to one of the
 * other two while parsing. */
enum { NUMA_PLACEMENT_DEFAULT = 0 };
static const char *const numa_placement_names[] = {"default", "static", "auto"};
static const char *const vcpu_placement_names[] = {"static", "auto"};
/* virTristateBool without "absent", which libvirt refuses for these. */
static const char *const yes_no_names[] = {"yes", "no"};

const char *vpack_numa_mode_name(enum vpack_numa_mode mode)
{
    if ((unsigned)mode >= sizeof(numa_mode_names) / sizeof(numa_mode_names[0]))
        return "unknown";
    return numa_mode_names[mode];
}

/* ---- Messages ---- */

/*
 * Copies s into a new string that is safe to print as one line: control
 * characters become \n, \t, \r or \xNN, and the result is cut at MSG_MAX
 * bytes (on a UTF-8 character boundary) with "..." appended.
 */
static char *sanitize(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(MSG_MAX + 8);
    size_t o = 0;

    if (!out)
        return NULL;
    /* Trailing newlines come from libxml2's messages; drop them. */
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
        n--;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char esc[8];
        size_t elen;

        if (ch == '\n')
            elen = (size_t)snprintf(esc, sizeof(esc), "\\n");
        else if (ch == '\t')
            elen = (size_t)snprintf(esc, sizeof(esc), "\\t");
        else if (ch == '\r')
            elen = (size_t)snprintf(esc, sizeof(esc), "\\r");
        else if (ch < 0x20 || ch == 0x7f)
            elen = (size_t)snprintf(esc, sizeof(esc), "\\x%02x", ch);
        else {
            esc[0] = (char)ch;
            elen = 1;
        }
        if (o + elen > MSG_MAX) {
            /* Do not leave half a UTF-8 sequence behind. */
            while (o > 0 && ((unsigned char)out[o - 1] & 0xc0) == 0x80)
                o--;
            if (o > 0 && (unsigned char)out[o - 1] >= 0xc0)
                o--;
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        memcpy(out + o, esc, elen);
        o += elen;
    }
    out[o] = '\0';
    return out;
}

/* Records the first error, prefixed with the domain's name, and returns
 * -EINVAL. */
__attribute__((format(printf, 2, 3)))
int vpack__domxml_fail(struct domxml_ctx *c, const char *fmt, ...)
{
    char *detail = NULL, *full = NULL;
    va_list ap;
    int n;

    if (c->err)
        return -EINVAL;
    va_start(ap, fmt);
    n = vasprintf(&detail, fmt, ap);
    va_end(ap);
    if (n < 0)
        goto cleanup;
    if (c->name)
        n = asprintf(&full, "domain '%s': %s%s", c->name, c->where ? c->where : "", detail);
    else
        n = asprintf(&full, "domain XML: %s%s", c->where ? c->where : "", detail);
    if (n < 0) {
        full = NULL;
        goto cleanup;
    }
    c->err = sanitize(full);

cleanup:
    free(detail);
    free(full);
    return -EINVAL;
}

/* Adds a one-line warning to d; out of memory only loses the warning. */
__attribute__((format(printf, 3, 4)))
static void add_warning(struct domxml_ctx *c, struct vpack_domxml *d, const char *fmt, ...)
{
    char *detail = NULL, *full = NULL, *clean = NULL;
    char **grown;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vasprintf(&detail, fmt, ap);
    va_end(ap);
    if (n < 0) {
        detail = NULL;
        goto cleanup;
    }
    if (asprintf(&full, "domain '%s': %s", c->name ? c->name : "?", detail) < 0) {
        full = NULL;
        goto cleanup;
    }
    clean = sanitize(full);
    if (!clean)
        goto cleanup;
    grown = realloc(d->warnings, (d->nwarnings + 1) * sizeof(*grown));
    if (!grown)
        goto cleanup;
    d->warnings = grown;
    d->warnings[d->nwarnings++] = clean;
    clean = NULL;

cleanup:
    free(detail);
    free(full);
    free(clean);
}

/* ---- Small readers mirroring libvirt's helpers ---- */

/* An element with this local name in no namespace, as libvirt's XPath
 * name tests match. */
bool vpack__domxml_is_el(const xmlNode *n, const char *name)
{
    return n->type == XML_ELEMENT_NODE && !n->ns && xmlStrEqual(n->name, BAD_CAST name);
}

xmlNode *vpack__domxml_first_child(xmlNode *parent, const char *name)
{
    for (xmlNode *n = parent->children; n; n = n->next)
        if (vpack__domxml_is_el(n, name))
            return n;
    return NULL;
}

/* libvirt reads attributes with xmlGetProp(), which ignores namespaces. */
static char *prop(xmlNode *n, const char *name)
{
    return (char *)xmlGetProp(n, BAD_CAST name);
}

/*
 * The text of an element as XPath's string() gives it (all descendant
 * text), or NULL when empty, like libvirt's virXPathString(). Returns
 * -ENOMEM only when libxml2 fails to allocate.
 */
int vpack__domxml_text_of(xmlNode *n, char **out)
{
    xmlChar *s = xmlNodeGetContent(n);

    *out = NULL;
    if (!s)
        return -ENOMEM;
    if (s[0] == '\0') {
        xmlFree(s);
        return 0;
    }
    *out = (char *)s;
    return 0;
}

bool vpack__domxml_is_blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

/*
 * libvirt's virStrToLong_uip() in base 10: leading blanks and '+' allowed,
 * any '-' refused, nothing may follow the digits.
 */
static int str_to_uint(const char *s, unsigned *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (end == s || *end || errno || memchr(s, '-', (size_t)(end - s)) || v > UINT_MAX)
        return -EINVAL;
    *out = (unsigned)v;
    return 0;
}

/*
 * libvirt's virStrToLong_ui() in base 10: like str_to_uint() but "-N"
 * wraps around, so "-1" is UINT_MAX.
 */
static int str_to_uint_wrap(const char *s, unsigned *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (end == s || *end || errno)
        return -EINVAL;
    if (memchr(s, '-', (size_t)(end - s))) {
        if (-v > UINT_MAX)
            return -EINVAL;
        v &= UINT_MAX;
    }
    if (v > UINT_MAX)
        return -EINVAL;
    *out = (unsigned)v;
    return 0;
}

/*
 * An unsigned attribute as libvirt's virXMLPropUInt() reads it. Returns 1
 * with *out set, 0 when absent and not required, or -EINVAL.
 */
static int prop_uint(struct domxml_ctx *c, xmlNode *n, const char *name, bool required,
                     bool nonzero, unsigned *out)
{
    char *v = prop(n, name);
    int ret;

    if (!v) {
        if (!required)
            return 0;
        return vpack__domxml_fail(c, "<%s>: missing required attribute '%s'", (const char *)n->name,
                                  name);
    }
    if (str_to_uint(v, out) < 0)
        ret = vpack__domxml_fail(c, "<%s %s='%s'>: expected a non-negative integer",
                                 (const char *)n->name, name, v);
    else if (nonzero && *out == 0)
        ret = vpack__domxml_fail(c, "<%s %s='0'>: zero is not permitted", (const char *)n->name,
                                 name);
    else
        ret = 1;
    xmlFree(v);
    return ret;
}

/*
 * An enumerated attribute as libvirt's virXMLPropEnum() reads it: exact,
 * case-sensitive names. Returns 1 with *out the index in names, 0 when
 * absent and not required, or -EINVAL.
 */
static int prop_enum(struct domxml_ctx *c, xmlNode *n, const char *name, const char *const *names,
                     size_t nnames, bool required, int *out)
{
    char *v = prop(n, name);
    int ret = -EINVAL;

    if (!v) {
        if (!required)
            return 0;
        return vpack__domxml_fail(c, "<%s>: missing required attribute '%s'", (const char *)n->name,
                                  name);
    }
    for (size_t i = 0; i < nnames; i++) {
        if (strcmp(v, names[i]) == 0) {
            *out = (int)i;
            ret = 1;
            break;
        }
    }
    if (ret < 0)
        vpack__domxml_fail(c, "<%s %s='%s'>: invalid value", (const char *)n->name, name, v);
    xmlFree(v);
    return ret;
}

/*
 * A cpuset or nodeset attribute: libvirt's virBitmapParse() with
 * VIR_DOMAIN_CPUMASK_LEN, and an empty set refused. what names the element
 * for the message, e.g. "<vcpupin vcpu='1' cpuset='%s'>". Returns 0 or
 * -EINVAL.
 */
static int parse_set(struct domxml_ctx *c, const char *text, const char *elem, const char *attr,
                     vpack_cpuset *out)
{
    char *err = NULL;
    int r = 0;

    if (vpack_cpuset_parse(out, text, &err) < 0)
        r = vpack__domxml_fail(c, "%s %s='%s'>: %s", elem, attr, text, err ? err : "out of memory");
    free(err);
    return r;
}

/* ---- Reading the document ---- */

/*
 * An upper bound of the elements in buf: every '<' followed by a name's
 * first character (not "</", "<!", "<?"). A '<' inside a comment or CDATA
 * counts too; the bound only has to be cheap and never too low.
 */
static size_t start_tags(const char *buf, size_t len)
{
    size_t n = 0;
    for (const char *p = buf, *end = buf + len; (p = memchr(p, '<', (size_t)(end - p))); p++)
        if (p + 1 < end && p[1] != '/' && p[1] != '!' && p[1] != '?')
            n++;
    return n;
}

/*
 * Parses buf without network access, external entities or DTD loading and
 * returns the <domain> root. A DOCTYPE is refused outright: entity
 * definitions would be expanded when text is read.
 */
int vpack__domxml_load(struct domxml_ctx *c, const char *buf, size_t len, xmlDoc **docp,
                       xmlNode **rootp)
{
    xmlParserCtxt *pctxt = NULL;
    xmlDoc *doc = NULL;
    xmlNode *root;
    int ret;

    *docp = NULL;
    *rootp = NULL;
    if (!buf || len == 0) {
        ret = vpack__domxml_fail(c, "the document is empty");
        goto cleanup;
    }
    if (len > VPACK_DOMXML_MAX_SIZE) {
        ret = vpack__domxml_fail(c, "the document is larger than %u MiB",
                                 VPACK_DOMXML_MAX_SIZE >> 20);
        goto cleanup;
    }
    /* libxml2's tree costs some 400 bytes an element: count them first. */
    if (start_tags(buf, len) > VPACK_DOMXML_MAX_ELEMENTS) {
        ret = vpack__domxml_fail(c, "more than %u elements (vpack's limit)",
                                 VPACK_DOMXML_MAX_ELEMENTS);
        goto cleanup;
    }
    xmlInitParser();
    pctxt = xmlNewParserCtxt();
    if (!pctxt) {
        ret = -ENOMEM;
        goto cleanup;
    }
    doc = xmlCtxtReadMemory(pctxt, buf, (int)len, NULL, NULL,
                            XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    if (!doc || !pctxt->wellFormed) {
        const xmlError *e = &pctxt->lastError;
        if (e->message)
            ret = vpack__domxml_fail(c, "not well-formed XML at line %d: %s", e->line, e->message);
        else
            ret = vpack__domxml_fail(c, "not well-formed XML");
        goto cleanup;
    }
    if (doc->intSubset || doc->extSubset) {
        ret = vpack__domxml_fail(c, "a DOCTYPE declaration is not accepted in domain XML");
        goto cleanup;
    }
    root = xmlDocGetRootElement(doc);
    if (!root) {
        ret = vpack__domxml_fail(c, "the document has no root element");
        goto cleanup;
    }
    /* libvirt compares the root's name only. */
    if (!xmlStrEqual(root->name, BAD_CAST "domain")) {
        ret = vpack__domxml_fail(c, "unexpected root element <%s>, expecting <domain>",
                                 (const char *)root->name);
        goto cleanup;
    }
    *docp = doc;
    *rootp = root;
    doc = NULL;
    ret = 0;

cleanup:
    xmlFreeDoc(doc);
    xmlFreeParserCtxt(pctxt);
    return ret;
}

/* vpack__domxml_load() for lib/rules.c (domxml-priv.h). */
int vpack__domxml_read_doc(const char *buf, size_t len, xmlDoc **doc, xmlNode **root, char **errmsg)
{
    struct domxml_ctx c = {0};
    int ret = vpack__domxml_load(&c, buf, len, doc, root);

    if (errmsg)
        *errmsg = NULL;
    return vpack__domxml_finish_err(&c, ret, errmsg);
}

xmlNode *vpack__domxml_metadata(xmlNode *root)
{
    return vpack__domxml_first_child(root, "metadata");
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* libvirt's virUUIDParse(): 32 hex digits, '-' or ' ' allowed between
 * pairs, blanks around. Writes the canonical form to out. */
int vpack__domxml_uuid_canon(const char *s, char out[37])
{
    unsigned char raw[16];
    const char *p = s;
    size_t i = 0;

    while (vpack__domxml_is_blank(*p))
        p++;
    while (i < 16) {
        int hi, lo;
        if (*p == '\0')
            return -EINVAL;
        if (*p == '-' || *p == ' ') {
            p++;
            continue;
        }
        hi = hexval(p[0]);
        if (hi < 0 || p[1] == '\0')
            return -EINVAL;
        lo = hexval(p[1]);
        if (lo < 0)
            return -EINVAL;
        raw[i++] = (unsigned char)(hi * 16 + lo);
        p += 2;
    }
    while (*p) {
        if (!vpack__domxml_is_blank(*p))
            return -EINVAL;
        p++;
    }
    snprintf(out, 37,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7], raw[8], raw[9],
             raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]);
    return 0;
}

/*
 * <name> and <uuid>. A name is required and may contain neither '\n' nor
 * '/' (libvirt refuses both). With strict_uuid false, a malformed uuid is
 * reported as absent instead of refused.
 */
int vpack__domxml_read_identity(struct domxml_ctx *c, xmlNode *root, char **name, bool *has_uuid,
                                char uuid[37], bool strict_uuid)
{
    xmlNode *n;
    char *text = NULL;
    int ret;

    *name = NULL;
    *has_uuid = false;
    n = vpack__domxml_first_child(root, "name");
    if (n && (ret = vpack__domxml_text_of(n, name)) < 0)
        goto cleanup;
    if (!*name) {
        ret = vpack__domxml_fail(c, "<name>: the domain has no name");
        goto cleanup;
    }
    if (strchr(*name, '\n')) {
        ret = vpack__domxml_fail(c, "<name>: invalid character '\\n' in the name '%s'", *name);
        goto cleanup;
    }
    if (strchr(*name, '/')) {
        ret = vpack__domxml_fail(c, "<name>: the name '%s' cannot contain '/'", *name);
        goto cleanup;
    }
    c->name = *name;
    n = vpack__domxml_first_child(root, "uuid");
    if (n && (ret = vpack__domxml_text_of(n, &text)) < 0)
        goto cleanup;
    if (text) {
        if (vpack__domxml_uuid_canon(text, uuid) == 0) {
            *has_uuid = true;
        } else if (strict_uuid) {
            ret = vpack__domxml_fail(c, "<uuid>: malformed uuid '%s'", text);
            goto cleanup;
        }
    }
    ret = 0;

cleanup:
    xmlFree(text);
    if (ret < 0) {
        c->name = NULL;
        xmlFree(*name);
        *name = NULL;
    }
    return ret;
}

int vpack_domxml_level_parse(const char *text)
{
    if (text && text[0] >= '0' && text[0] <= '2' && text[1] == '\0')
        return text[0] - '0';
    return -EINVAL;
}

/* "<vpack:powerpolicy" or "<powerpolicy", for messages. */
void vpack__domxml_qualified(const xmlNode *n, char *buf, size_t len)
{
    if (n->ns && n->ns->prefix)
        snprintf(buf, len, "%s:%s", (const char *)n->ns->prefix, (const char *)n->name);
    else
        snprintf(buf, len, "%s", (const char *)n->name);
}

/* Validates a policy element's level attribute. Returns the level or
 * -EINVAL. where is "<metadata>: " or "". */
int vpack__domxml_policy_level(struct domxml_ctx *c, xmlNode *n, const char *where)
{
    char qname[128];
    char *v;
    int level;

    vpack__domxml_qualified(n, qname, sizeof(qname));
    /* The attribute is not namespaced, as the schema says. */
    v = (char *)xmlGetNoNsProp(n, BAD_CAST VPACK_XML_POLICY_LEVEL);
    if (!v)
        return vpack__domxml_fail(c, "%s<%s>: missing attribute 'level' (expected 0, 1 or 2)",
                                  where, qname);
    level = vpack_domxml_level_parse(v);
    if (level < 0)
        vpack__domxml_fail(c,
                           "%s<%s level='%s'>: invalid power policy level '%s': expected 0, 1 or 2",
                           where, qname, v, v);
    xmlFree(v);
    return level;
}

bool vpack__domxml_in_vpack_ns(const xmlNode *n)
{
    return n->type == XML_ELEMENT_NODE && n->ns && n->ns->href &&
           xmlStrEqual(n->ns->href, BAD_CAST VPACK_XML_NS);
}

/*
 * The level from <metadata>. libvirt keeps only the first <metadata> and,
 * in it, only the first element of each namespace (virXMLNodeSanitizeNamespaces
 * drops the rest and every un-namespaced element), so that first element in
 * vpack's namespace is the policy. Anything but <powerpolicy> there is an
 * invalid policy.
 */
static int read_level(struct domxml_ctx *c, xmlNode *root, int *level)
{
    xmlNode *meta = vpack__domxml_metadata(root);
    char qname[128];

    *level = -1;
    if (!meta)
        return 0;
    for (xmlNode *n = meta->children; n; n = n->next) {
        if (!vpack__domxml_in_vpack_ns(n))
            continue;
        if (!xmlStrEqual(n->name, BAD_CAST VPACK_XML_POLICY_ELEMENT)) {
            vpack__domxml_qualified(n, qname, sizeof(qname));
            return vpack__domxml_fail(c,
                                      "<metadata>: <%s>: unknown element in vpack's namespace %s "
                                      "(expected <%s>)",
                                      qname, VPACK_XML_NS, VPACK_XML_POLICY_ELEMENT);
        }
        *level = vpack__domxml_policy_level(c, n, "<metadata>: ");
        return *level < 0 ? -EINVAL : 0;
    }
    return 0;
}

/* ---- vCPUs ---- */

/* libvirt's virDomainVcpuParse(). */
int vpack__domxml_read_vcpus(struct domxml_ctx *c, xmlNode *root, struct vpack_domxml *d)
{
    xmlNode *vcpu = vpack__domxml_first_child(root, "vcpu");
    unsigned maxvcpus = 1, current = 1;
    bool individual = false;
    char *text = NULL, *cpuset = NULL;
    int placement = VPACK_VCPU_PLACEMENT_STATIC;
    int r, ret;

    if (vcpu) {
        xmlChar *content = xmlNodeGetContent(vcpu);
        if (!content) {
            ret = -ENOMEM;
            goto cleanup;
        }
        text = (char *)content;
        if (str_to_uint_wrap(text, &maxvcpus) < 0) {
            ret = vpack__domxml_fail(c, "<vcpu>: the maximum vCPU count '%s' is not an integer",
                                     text);
            goto cleanup;
        }
        r = prop_uint(c, vcpu, "current", false, false, &current);
        if (r < 0) {
            ret = r;
            goto cleanup;
        }
        if (r == 0)
            current = maxvcpus;
        if ((r = prop_enum(c, vcpu, "placement", vcpu_placement_names, 2, false, &placement)) < 0) {
            ret = r;
            goto cleanup;
        }
        /* With placement='auto' libvirt does not even read cpuset. */
        if (placement != VPACK_VCPU_PLACEMENT_AUTO && (cpuset = prop(vcpu, "cpuset"))) {
            if ((ret = parse_set(c, cpuset, "<vcpu", "cpuset", &d->cpuset)) < 0)
                goto cleanup;
            d->has_cpuset = true;
        }
    }
    d->placement = (enum vpack_vcpu_placement)placement;
    /* vpack's limits: libvirt itself fails later, on <numa> checks, for 0. */
    if (maxvcpus == 0) {
        ret = vpack__domxml_fail(c, "<vcpu>: the maximum vCPU count must be at least 1");
        goto cleanup;
    }
    if (maxvcpus > VPACK_DOMXML_MAX_VCPUS) {
        ret = vpack__domxml_fail(c, "<vcpu>: %u vCPUs is more than vpack supports (%u)", maxvcpus,
                                 VPACK_DOMXML_MAX_VCPUS);
        goto cleanup;
    }
    d->vcpus = maxvcpus;
    vpack_cpuset_zero(&d->online);

    /* Individual vCPU states, when given, decide which vCPUs are online and
     * current= is then ignored (even when it exceeds the maximum). */
    for (xmlNode *vs = root->children; vs; vs = vs->next) {
        if (!vpack__domxml_is_el(vs, "vcpus"))
            continue;
        for (xmlNode *v = vs->children; v; v = v->next) {
            unsigned id, order;
            int enabled = 1, hotpluggable = 0;

            if (!vpack__domxml_is_el(v, "vcpu"))
                continue;
            individual = true;
            if ((ret = prop_uint(c, v, "id", true, false, &id)) < 0)
                goto cleanup;
            if (id >= maxvcpus) {
                ret = vpack__domxml_fail(c, "<vcpus><vcpu id='%u'>: vCPU id out of range of "
                                         "the maximum vCPU count %u", id, maxvcpus);
                goto cleanup;
            }
            if ((ret = prop_enum(c, v, "enabled", yes_no_names, 2, true, &enabled)) < 0)
                goto cleanup;
            if ((ret = prop_enum(c, v, "hotpluggable", yes_no_names, 2, false,
                                 &hotpluggable)) < 0)
                goto cleanup;
            if ((ret = prop_uint(c, v, "order", false, false, &order)) < 0)
                goto cleanup;
            if (enabled == 0) /* yes_no_names[0] is "yes" */
                vpack_cpuset_set(&d->online, id);
            else
                vpack_cpuset_clear(&d->online, id);
        }
    }
    if (!individual) {
        if (current > maxvcpus) {
            ret = vpack__domxml_fail(
                c, "<vcpu current='%u'>: the current vCPU count %u exceeds the maximum %u", current,
                current, maxvcpus);
            goto cleanup;
        }
        if (current > 0)
            vpack_cpuset_set_range(&d->online, 0, current - 1);
    }
    d->vcpus_current = vpack_cpuset_count(&d->online);
    ret = 0;

cleanup:
    xmlFree(text);
    xmlFree(cpuset);
    return ret;
}

/* ---- iothreads ---- */

struct id_at {
    unsigned id;
    size_t at; /* position in the document */
};

static int cmp_id_at(const void *a, const void *b)
{
    const struct id_at *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

int vpack__domxml_cmp_uint(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return x < y ? -1 : x > y;
}

/*
 * libvirt's virDomainDefParseIOThreads() and virDomainIOThreadIDDefArrayInit():
 * ids come from every <iothreadids><iothread id/>, the count is the larger
 * of <iothreads> and the number of ids, and missing ids are filled with the
 * lowest unused ids from 1 up (<iothreads>4 with ids 5 and 6 gives 1,2,5,6).
 */
int vpack__domxml_read_iothreads(struct domxml_ctx *c, xmlNode *root, struct vpack_domxml *d)
{
    xmlNode *n = vpack__domxml_first_child(root, "iothreads");
    struct id_at *listed = NULL;
    size_t nlisted = 0, cap = 0, dup_at = SIZE_MAX;
    unsigned count = 0, dup_id = 0;
    bool bad = false;
    char *text = NULL;
    int ret;

    if (n && (ret = vpack__domxml_text_of(n, &text)) < 0)
        goto cleanup;
    if (text && str_to_uint(text, &count) < 0) {
        ret = vpack__domxml_fail(c, "<iothreads>: invalid iothreads count '%s'", text);
        goto cleanup;
    }
    for (xmlNode *ids = root->children; ids; ids = ids->next) {
        if (!vpack__domxml_is_el(ids, "iothreadids"))
            continue;
        for (xmlNode *t = ids->children; t; t = t->next) {
            unsigned id;
            if (!vpack__domxml_is_el(t, "iothread"))
                continue;
            if (nlisted == VPACK_DOMXML_MAX_IOTHREADS) {
                ret = vpack__domxml_fail(c, "<iothreadids>: more than %u iothreads (vpack's limit)",
                                         VPACK_DOMXML_MAX_IOTHREADS);
                goto cleanup;
            }
            /* Stop at the first bad id; a duplicate before it wins below. */
            if (prop_uint(c, t, "id", true, true, &id) < 0) {
                bad = true;
                break;
            }
            struct id_at *grown = vpack_grow(listed, nlisted, &cap, sizeof(*listed));
            if (!grown) {
                ret = -ENOMEM;
                goto cleanup;
            }
            listed = grown;
            listed[nlisted].id = id;
            listed[nlisted].at = nlisted;
            nlisted++;
        }
        if (bad)
            break;
    }
    /* libvirt reports the first duplicate in document order. */
    if (nlisted > 1) {
        qsort(listed, nlisted, sizeof(*listed), cmp_id_at);
        for (size_t i = 1; i < nlisted; i++) {
            if (listed[i].id == listed[i - 1].id && listed[i].at < dup_at &&
                (i < 2 || listed[i - 2].id != listed[i].id)) {
                dup_at = listed[i].at;
                dup_id = listed[i].id;
            }
        }
    }
    if (dup_at != SIZE_MAX) {
        free(c->err); /* a later bad id loses to this duplicate */
        c->err = NULL;
        ret = vpack__domxml_fail(c, "<iothreadids><iothread id='%u'>: duplicate iothread id",
                                 dup_id);
        goto cleanup;
    }
    if (bad) {
        ret = -EINVAL;
        goto cleanup;
    }
    if (nlisted > count)
        count = (unsigned)nlisted;
    if (count > VPACK_DOMXML_MAX_IOTHREADS) {
        ret = vpack__domxml_fail(c, "<iothreads>: %u iothreads is more than vpack supports (%u)",
                                 count, VPACK_DOMXML_MAX_IOTHREADS);
        goto cleanup;
    }
    if (count > 0) {
        size_t k = 0, have = 0;
        d->iothreads = malloc(count * sizeof(*d->iothreads));
        if (!d->iothreads) {
            ret = -ENOMEM;
            goto cleanup;
        }
        for (size_t i = 0; i < nlisted; i++)
            d->iothreads[k++] = listed[i].id;
        /* listed is sorted by id: walk it to find the unused low ids. */
        for (unsigned id = 1; k < count; id++) {
            while (have < nlisted && listed[have].id < id)
                have++;
            if (have < nlisted && listed[have].id == id)
                continue;
            d->iothreads[k++] = id;
        }
        d->niothreads = count;
        qsort(d->iothreads, count, sizeof(*d->iothreads), vpack__domxml_cmp_uint);
    }
    ret = 0;

cleanup:
    xmlFree(text);
    free(listed);
    return ret;
}

/* ---- cputune ---- */

int vpack__domxml_cmp_vcpupin(const void *a, const void *b)
{
    const struct vpack_vcpupin *x = a, *y = b;
    return x->vcpu < y->vcpu ? -1 : x->vcpu > y->vcpu;
}

static int cmp_iothreadpin(const void *a, const void *b)
{
    const struct vpack_iothreadpin *x = a, *y = b;
    return x->iothread < y->iothread ? -1 : x->iothread > y->iothread;
}

/*
 * The pin readers below serve both the domain's own <cputune> and vpack's
 * request (read_request()). What they have taken so far: each thread is
 * pinned once.
 */
struct domxml_pins {
    vpack_cpuset vcpus;   /* pinned vCPUs */
    bool *iothreads;      /* pinned iothreads, by index in d->iothreads */
    size_t vcpupin_cap, iothreadpin_cap; /* allocated in d->vcpupin, d->iothreadpin */
};

/* Allocated (a vpack_cpuset is 2 KiB), for d's vCPUs and iothreads. */
struct domxml_pins *vpack__domxml_pins_new(const struct vpack_domxml *d)
{
    struct domxml_pins *s = calloc(1, sizeof(*s));

    /* One more than needed: calloc(0, ...) may return NULL. */
    if (s && !(s->iothreads = calloc(d->niothreads + 1, sizeof(*s->iothreads)))) {
        free(s);
        return NULL;
    }
    return s;
}

void vpack__domxml_pins_free(struct domxml_pins *s)
{
    if (s)
        free(s->iothreads);
    free(s);
}

/* d's pin arrays sorted by thread, as struct vpack_domxml promises (no id twice). */
void vpack__domxml_sort_pins(struct vpack_domxml *d)
{
    if (d->nvcpupin > 1)
        qsort(d->vcpupin, d->nvcpupin, sizeof(*d->vcpupin), vpack__domxml_cmp_vcpupin);
    if (d->niothreadpin > 1)
        qsort(d->iothreadpin, d->niothreadpin, sizeof(*d->iothreadpin), cmp_iothreadpin);
}

/*
 * The cpuset attribute of pin element p, which elem names in messages
 * ("<iothreadpin iothread='1'"). Returns 0 or -EINVAL.
 */
static int read_pin_cpuset(struct domxml_ctx *c, xmlNode *p, const char *elem, vpack_cpuset *out)
{
    char *cpuset = prop(p, "cpuset");
    int ret;

    if (!cpuset)
        return vpack__domxml_fail(c, "%s>: missing cpuset", elem);
    ret = parse_set(c, cpuset, elem, "cpuset", out);
    xmlFree(cpuset);
    return ret;
}

/*
 * One <vcpupin vcpu cpuset> into d->vcpupin (unsorted). The domain's own is
 * read as libvirt 9.0's virDomainVcpuPinDefParseXML() reads it: a pin for
 * a vCPU the domain does not have is ignored (with a warning in its log),
 * whatever its cpuset says, and a duplicate is found before the cpuset is
 * parsed. vpack's request (request) is its own format: the cpuset comes
 * first, and a vCPU the domain does not have is an error, since the record
 * is then not this domain's.
 */
int vpack__domxml_read_pin_vcpu(struct domxml_ctx *c, xmlNode *p, struct vpack_domxml *d,
                                struct domxml_pins *s, bool request)
{
    unsigned vcpu = 0; /* set by prop_uint() on success; gcc -O3 cannot tell */
    bool exists;
    vpack_cpuset cpus;
    struct vpack_vcpupin *pins;
    char elem[64];
    int ret;

    if ((ret = prop_uint(c, p, "vcpu", true, false, &vcpu)) < 0)
        return ret;
    snprintf(elem, sizeof(elem), "<vcpupin vcpu='%u'", vcpu);
    /* vpack__domxml_read_vcpus() keeps d->vcpus within VPACK_CPUSET_MAX; s->vcpus relies on it. */
    exists = vcpu < d->vcpus && vcpu < VPACK_CPUSET_MAX;
    if (!exists && !request) {
        add_warning(c, d, "%s>: ignored: the domain has %u vCPUs", elem, d->vcpus);
        return 0;
    }
    /* libvirt refuses a missing cpuset, then a duplicate, then an invalid
     * cpuset (xmlHasProp() is the lookup of prop(), without the copy). */
    if (!request && vpack_cpuset_isset(&s->vcpus, vcpu) && xmlHasProp(p, BAD_CAST "cpuset"))
        return vpack__domxml_fail(c, "%s>: duplicate vcpupin for vCPU %u", elem, vcpu);
    if ((ret = read_pin_cpuset(c, p, elem, &cpus)) < 0)
        return ret;
    /* Only vpack's request gets here with a vCPU the domain lacks or a duplicate. */
    if (!exists)
        return vpack__domxml_fail(c, "%s>: the domain has %u vCPUs", elem, d->vcpus);
    if (vpack_cpuset_isset(&s->vcpus, vcpu))
        return vpack__domxml_fail(c, "%s>: vCPU %u is pinned twice", elem, vcpu);
    if (!(pins = vpack_grow(d->vcpupin, d->nvcpupin, &s->vcpupin_cap, sizeof(*pins))))
        return -ENOMEM;
    d->vcpupin = pins;
    d->vcpupin[d->nvcpupin++] = (struct vpack_vcpupin){vcpu, cpus};
    vpack_cpuset_set(&s->vcpus, vcpu);
    return 0;
}

/*
 * One <emulatorpin cpuset> into d. The domain's own has been checked to be
 * the only one (libvirt counts them before it reads one); vpack's request
 * finds a second one here, after its cpuset.
 */
int vpack__domxml_read_pin_emulator(struct domxml_ctx *c, xmlNode *p, struct vpack_domxml *d)
{
    vpack_cpuset cpus;
    int ret;

    if ((ret = read_pin_cpuset(c, p, "<emulatorpin", &cpus)) < 0)
        return ret;
    if (d->has_emulatorpin)
        return vpack__domxml_fail(c, "<emulatorpin>: more than one");
    d->has_emulatorpin = true;
    d->emulatorpin = cpus;
    return 0;
}

/*
 * One <iothreadpin iothread cpuset> into d->iothreadpin (unsorted). The
 * domain's own is read as libvirt's virDomainIOThreadPinDefParseXML() reads
 * it: an iothread the domain does not have is refused before the cpuset is
 * read. vpack's request (request) reads the cpuset first, and words a
 * duplicate its own way.
 */
int vpack__domxml_read_pin_iothread(struct domxml_ctx *c, xmlNode *p, struct vpack_domxml *d,
                                    struct domxml_pins *s, bool request)
{
    /* Alike in shape to vpack__domxml_read_pin_vcpu(): libvirt checks the two in other orders. */
    unsigned id = 0; /* likewise */
    const unsigned *found = NULL;
    size_t idx;
    vpack_cpuset cpus;
    struct vpack_iothreadpin *pins;
    char elem[64];
    int ret;

    if ((ret = prop_uint(c, p, "iothread", true, true, &id)) < 0)
        return ret;
    snprintf(elem, sizeof(elem), "<iothreadpin iothread='%u'", id);
    if (d->niothreads)
        found = bsearch(&id, d->iothreads, d->niothreads, sizeof(*d->iothreads),
                        vpack__domxml_cmp_uint);
    if ((found || request) && (ret = read_pin_cpuset(c, p, elem, &cpus)) < 0)
        return ret;
    if (!found)
        return vpack__domxml_fail(c, "%s>: the domain has no iothread %u", elem, id);
    idx = (size_t)(found - d->iothreads);
    if (s->iothreads[idx])
        return request
                   ? vpack__domxml_fail(c, "%s>: iothread %u is pinned twice", elem, id)
                   : vpack__domxml_fail(c, "%s>: duplicate iothreadpin for iothread %u", elem, id);
    if (!(pins = vpack_grow(d->iothreadpin, d->niothreadpin, &s->iothreadpin_cap, sizeof(*pins))))
        return -ENOMEM;
    d->iothreadpin = pins;
    d->iothreadpin[d->niothreadpin++] = (struct vpack_iothreadpin){id, cpus};
    s->iothreads[idx] = true;
    return 0;
}

typedef int pin_el_reader(struct domxml_ctx *c, xmlNode *p, struct vpack_domxml *d,
                          struct domxml_pins *s, bool request);

/*
 * Every <cputune><NAME> of the domain, as libvirt's "./cputune/NAME" finds
 * them (under every <cputune>, in document order), through read_el. Each
 * kind is read in a pass of its own, as libvirt reads them (<vcpupin>s,
 * <emulatorpin>, <iothreadpin>s): that decides which fault is reported.
 */
static int read_cputune_pins(struct domxml_ctx *c, xmlNode *root, struct vpack_domxml *d,
                             const char *name, pin_el_reader *read_el)
{
    struct domxml_pins *s = vpack__domxml_pins_new(d);
    int ret = s ? 0 : -ENOMEM;

    for (xmlNode *tune = root->children; tune && ret == 0; tune = tune->next) {
        if (!vpack__domxml_is_el(tune, "cputune"))
            continue;
        for (xmlNode *p = tune->children; p && ret == 0; p = p->next)
            if (vpack__domxml_is_el(p, name))
                ret = read_el(c, p, d, s, false);
    }
    if (ret == 0)
        vpack__domxml_sort_pins(d);
    vpack__domxml_pins_free(s);
    return ret;
}

/* virDomainEmulatorPinDefParseXML(): at most one in all <cputune>s. */
static int read_emulatorpin(struct domxml_ctx *c, xmlNode *root, struct vpack_domxml *d)
{
    xmlNode *pin = NULL;

    for (xmlNode *tune = root->children; tune; tune = tune->next) {
        if (!vpack__domxml_is_el(tune, "cputune"))
            continue;
        for (xmlNode *p = tune->children; p; p = p->next) {
            if (!vpack__domxml_is_el(p, "emulatorpin"))
                continue;
            if (pin)
                return vpack__domxml_fail(c, "<cputune>: only one <emulatorpin> is supported");
            pin = p;
        }
    }
    return pin ? vpack__domxml_read_pin_emulator(c, pin, d) : 0;
}

/* ---- numatune ---- */

/* The number of guest NUMA cells: every <cell> of the first <numa> of each
 * <cpu>, as libvirt's "./cpu/numa[1]/cell" counts them. */
static int count_numa_cells(struct domxml_ctx *c, xmlNode *root, size_t *ncells)
{
    bool has_numa = false;

    *ncells = 0;
    for (xmlNode *cpu = root->children; cpu; cpu = cpu->next) {
        xmlNode *numa;
        if (!vpack__domxml_is_el(cpu, "cpu") || !(numa = vpack__domxml_first_child(cpu, "numa")))
            continue;
        has_numa = true;
        for (xmlNode *cell = numa->children; cell; cell = cell->next)
            if (vpack__domxml_is_el(cell, "cell") && ++*ncells > VPACK_DOMXML_MAX_CELLS)
                return vpack__domxml_fail(c, "<cpu><numa>: more than %u guest NUMA cells "
                                          "(vpack's limit; QEMU takes at most 128)",
                                          VPACK_DOMXML_MAX_CELLS);
    }
    if (has_numa && *ncells == 0)
        return vpack__domxml_fail(c, "<cpu><numa>: NUMA topology defined without NUMA cells");
    return 0;
}

int vpack__domxml_cmp_memnode(const void *a, const void *b)
{
    const struct vpack_memnode *x = a, *y = b;
    return x->cellid < y->cellid ? -1 : x->cellid > y->cellid;
}

/* virDomainNumatuneNodeParseXML(): every <numatune><memnode>. */
static int read_memnodes(struct domxml_ctx *c, xmlNode *numatune, size_t ncells,
                         struct vpack_numatune *nt)
{
    vpack_cpuset *set = NULL; /* one for every cell: each keeps only its text */
    bool *seen = NULL;
    size_t cap = 0;
    char *nodeset = NULL;
    int ret;
    bool any = false;

    for (xmlNode *m = numatune ? numatune->children : NULL; m; m = m->next)
        if (vpack__domxml_is_el(m, "memnode"))
            any = true;
    if (!any) {
        ret = 0;
        goto cleanup;
    }
    if (nt->memory_specified && nt->memory_placement == VPACK_NUMA_PLACEMENT_AUTO) {
        ret = vpack__domxml_fail(
            c, "<numatune><memnode>: per-node binding is not compatible with automatic "
               "NUMA placement");
        goto cleanup;
    }
    if (ncells == 0) {
        ret = vpack__domxml_fail(c, "<numatune><memnode>: invalid without any guest NUMA cells");
        goto cleanup;
    }
    seen = calloc(ncells, sizeof(*seen));
    set = malloc(sizeof(*set));
    if (!seen || !set) {
        ret = -ENOMEM;
        goto cleanup;
    }
    for (xmlNode *m = numatune->children; m; m = m->next) {
        unsigned cellid;
        int mode = VPACK_NUMA_MODE_STRICT, r;
        char elem[64];
        struct vpack_memnode *mn;

        if (!vpack__domxml_is_el(m, "memnode"))
            continue;
        if ((ret = prop_uint(c, m, "cellid", true, false, &cellid)) < 0)
            goto cleanup;
        if (cellid >= ncells) {
            ret = vpack__domxml_fail(
                c, "<memnode cellid='%u'>: the guest has no NUMA cell %u (it has %zu)", cellid,
                cellid, ncells);
            goto cleanup;
        }
        if (seen[cellid]) {
            ret = vpack__domxml_fail(
                c, "<memnode cellid='%u'>: multiple memnode elements with cellid %u", cellid,
                cellid);
            goto cleanup;
        }
        r = prop_enum(c, m, "mode", numa_mode_names, 4, false, &mode);
        if (r < 0) {
            ret = r;
            goto cleanup;
        }
        nodeset = prop(m, "nodeset");
        if (!nodeset) {
            ret = vpack__domxml_fail(c, "<memnode cellid='%u'>: missing nodeset", cellid);
            goto cleanup;
        }
        if (nt->nmemnodes == cap) {
            size_t ncap = cap ? cap * 2 : 4;
            struct vpack_memnode *grown = realloc(nt->memnodes, ncap * sizeof(*grown));
            if (!grown) {
                ret = -ENOMEM;
                goto cleanup;
            }
            nt->memnodes = grown;
            cap = ncap;
        }
        mn = &nt->memnodes[nt->nmemnodes];
        snprintf(elem, sizeof(elem), "<memnode cellid='%u'", cellid);
        if ((ret = parse_set(c, nodeset, elem, "nodeset", set)) < 0)
            goto cleanup;
        if (!(mn->nodeset = vpack_cpuset_format(set))) {
            ret = -ENOMEM;
            goto cleanup;
        }
        mn->cellid = cellid;
        mn->mode = (enum vpack_numa_mode)mode;
        nt->nmemnodes++;
        seen[cellid] = true;
        xmlFree(nodeset);
        nodeset = NULL;
    }
    if (nt->nmemnodes > 1)
        qsort(nt->memnodes, nt->nmemnodes, sizeof(*nt->memnodes), vpack__domxml_cmp_memnode);
    ret = 0;

cleanup:
    xmlFree(nodeset);
    free(seen);
    free(set);
    return ret;
}

/*
 * virDomainNumatuneParseXML() and virDomainNumatuneSet(). placement_static
 * is <vcpu placement> being static: with placement='auto' and no
 * <numatune><memory>, memory placement is auto as well.
 */
static int read_numatune(struct domxml_ctx *c, xmlNode *root, struct vpack_domxml *d)
{
    struct vpack_numatune *nt = &d->numatune;
    bool placement_static = d->placement == VPACK_VCPU_PLACEMENT_STATIC;
    xmlNode *numatune = NULL, *mem = NULL;
    char *nodesetstr = NULL;
    vpack_cpuset *nodeset = NULL;
    int mode = -1, placement = -1, r, ret;
    size_t ncells;

    /* libvirt reads the guest NUMA cells first. */
    if ((ret = count_numa_cells(c, root, &ncells)) < 0)
        goto cleanup;
    for (xmlNode *n = root->children; n; n = n->next) {
        if (!vpack__domxml_is_el(n, "numatune"))
            continue;
        if (numatune) {
            ret = vpack__domxml_fail(c, "only one <numatune> is supported");
            goto cleanup;
        }
        numatune = n;
    }
    if (numatune)
        mem = vpack__domxml_first_child(numatune, "memory");
    if (!placement_static && !mem)
        placement = VPACK_NUMA_PLACEMENT_AUTO;
    if (mem) {
        /* Absent attributes leave mode and placement at -1. */
        if ((r = prop_enum(c, mem, "mode", numa_mode_names, 4, false, &mode)) < 0) {
            ret = r;
            goto cleanup;
        }
        if ((r = prop_enum(c, mem, "placement", numa_placement_names, 3, false,
                           &placement)) < 0) {
            ret = r;
            goto cleanup;
        }
        if ((nodesetstr = prop(mem, "nodeset"))) {
            nodeset = malloc(sizeof(*nodeset));
            if (!nodeset) {
                ret = -ENOMEM;
                goto cleanup;
            }
            if ((ret = parse_set(c, nodesetstr, "<numatune><memory", "nodeset", nodeset)) < 0)
                goto cleanup;
        }
    }

    /* virDomainNumatuneSet() on a fresh definition. */
    if (mode != -1 || placement != -1 || nodeset) {
        if (mode == -1)
            mode = VPACK_NUMA_MODE_STRICT;
        if (placement == -1)
            placement = nodeset ? VPACK_NUMA_PLACEMENT_STATIC : NUMA_PLACEMENT_DEFAULT;
        if (placement == NUMA_PLACEMENT_DEFAULT)
            placement = nodeset || placement_static ? VPACK_NUMA_PLACEMENT_STATIC
                                                    : VPACK_NUMA_PLACEMENT_AUTO;
        if (placement == VPACK_NUMA_PLACEMENT_STATIC && !nodeset) {
            ret = vpack__domxml_fail(
                c, "<numatune><memory>: a nodeset must be set when placement is static");
            goto cleanup;
        }
        nt->memory_specified = true;
        nt->memory_mode = (enum vpack_numa_mode)mode;
        nt->memory_placement = (enum vpack_numa_placement)placement;
        /* A nodeset with automatic placement is dropped. */
        if (placement == VPACK_NUMA_PLACEMENT_STATIC)
            nt->memory_nodeset = *nodeset;
    }

    if ((ret = read_memnodes(c, numatune, ncells, nt)) < 0)
        goto cleanup;
    nt->present = nt->memory_specified || nt->nmemnodes > 0;
    ret = 0;

cleanup:
    xmlFree(nodesetstr);
    free(nodeset);
    return ret;
}

/* ---- The record ---- */

void vpack_domxml_free(struct vpack_domxml *d)
{
    if (!d)
        return;
    xmlFree(d->name);
    free(d->vcpupin);
    free(d->iothreads);
    free(d->iothreadpin);
    for (size_t i = 0; i < d->numatune.nmemnodes; i++)
        free(d->numatune.memnodes[i].nodeset);
    free(d->numatune.memnodes);
    for (size_t i = 0; i < d->nwarnings; i++)
        free(d->warnings[i]);
    free(d->warnings);
    free(d);
}

/* Hands out ctx's error (or frees it) at the end of a public function;
 * returns ret, or -ENOMEM for an -EINVAL whose message could not be
 * allocated. */
int vpack__domxml_finish_err(struct domxml_ctx *c, int ret, char **errmsg)
{
    if (ret == -EINVAL && !c->err)
        ret = -ENOMEM; /* the message itself could not be allocated */
    if (errmsg && ret < 0) {
        *errmsg = c->err;
        c->err = NULL;
    }
    free(c->err);
    c->err = NULL;
    return ret;
}

int vpack_domxml_parse(const char *buf, size_t len, struct vpack_domxml **out, char **errmsg)
{
    struct domxml_ctx c = {0};
    struct vpack_domxml *d = NULL;
    xmlDoc *doc = NULL;
    xmlNode *root;
    int ret;

    *out = NULL;
    if (errmsg)
        *errmsg = NULL;
    if ((ret = vpack__domxml_load(&c, buf, len, &doc, &root)) < 0)
        goto cleanup;
    d = calloc(1, sizeof(*d));
    if (!d) {
        ret = -ENOMEM;
        goto cleanup;
    }
    d->level = -1;
    if ((ret = vpack__domxml_read_identity(&c, root, &d->name, &d->has_uuid, d->uuid, true)) < 0)
        goto cleanup;
    c.name = d->name;
    if ((ret = read_level(&c, root, &d->level)) < 0)
        goto cleanup;
    if ((ret = vpack__domxml_read_vcpus(&c, root, d)) < 0)
        goto cleanup;
    if ((ret = vpack__domxml_read_iothreads(&c, root, d)) < 0)
        goto cleanup;
    if ((ret = read_cputune_pins(&c, root, d, "vcpupin", vpack__domxml_read_pin_vcpu)) < 0)
        goto cleanup;
    if ((ret = read_emulatorpin(&c, root, d)) < 0)
        goto cleanup;
    if ((ret = read_cputune_pins(&c, root, d, "iothreadpin", vpack__domxml_read_pin_iothread)) < 0)
        goto cleanup;
    if ((ret = read_numatune(&c, root, d)) < 0)
        goto cleanup;
    /* libvirt: automatic memory placement without any CPU pinning makes the
     * vCPU placement automatic too (which is why vcpu-placement-static, with
     * its emulatorpin, stays static). */
    if (d->numatune.memory_specified &&
        d->numatune.memory_placement == VPACK_NUMA_PLACEMENT_AUTO && !d->has_cpuset &&
        d->nvcpupin == 0 && !d->has_emulatorpin && d->niothreadpin == 0)
        d->placement = VPACK_VCPU_PLACEMENT_AUTO;
    /* libvirt's QEMU driver refuses a domain with no online vCPU. */
    if (d->vcpus_current == 0) {
        ret = vpack__domxml_fail(&c, "<vcpu>: the domain has no online vCPU");
        goto cleanup;
    }
    *out = d;
    d = NULL;
    ret = 0;

cleanup:
    ret = vpack__domxml_finish_err(&c, ret, errmsg);
    vpack_domxml_free(d);
    xmlFreeDoc(doc);
    return ret;
}

int vpack_domxml_identity(const char *buf, size_t len, char **name, char **uuid, char **errmsg)
{
    struct domxml_ctx c = {0};
    xmlDoc *doc = NULL;
    xmlNode *root;
    char canon[37];
    char *xname = NULL;
    bool has_uuid = false;
    int ret;

    *name = NULL;
    *uuid = NULL;
    if (errmsg)
        *errmsg = NULL;
    if ((ret = vpack__domxml_load(&c, buf, len, &doc, &root)) < 0)
        goto cleanup;
    if ((ret = vpack__domxml_read_identity(&c, root, &xname, &has_uuid, canon, false)) < 0)
        goto cleanup;
    *name = strdup(xname);
    if (!*name || (has_uuid && !(*uuid = strdup(canon)))) {
        free(*name);
        *name = NULL;
        ret = -ENOMEM;
        goto cleanup;
    }
    ret = 0;

cleanup:
    ret = vpack__domxml_finish_err(&c, ret, errmsg);
    xmlFree(xname);
    xmlFreeDoc(doc);
    return ret;
}
