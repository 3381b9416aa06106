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
 */
#include "vpack/domxml.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlsave.h>

#include "domxml-priv.h"
#include "vpack/errmsg.h"
#include "vpack/json-util.h"

/* Longest error message handed out, so that a huge attribute value cannot
 * turn the hook's one line on stderr into megabytes. */
#define MSG_MAX 480

struct ctx {
    const char *name; /* the domain's name for messages, once known */
    const char *where; /* what is being read, after the name in messages ("" or NULL: the domain) */
    char *err;        /* the first error, already sanitized */
};

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
static int fail(struct ctx *c, const char *fmt, ...)
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
static void add_warning(struct ctx *c, struct vpack_domxml *d, const char *fmt, ...)
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
static bool is_el(const xmlNode *n, const char *name)
{
    return n->type == XML_ELEMENT_NODE && !n->ns && xmlStrEqual(n->name, BAD_CAST name);
}

static xmlNode *first_child(xmlNode *parent, const char *name)
{
    for (xmlNode *n = parent->children; n; n = n->next)
        if (is_el(n, name))
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
static int text_of(xmlNode *n, char **out)
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

static bool is_xml_blank(char ch)
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
static int prop_uint(struct ctx *c, xmlNode *n, const char *name, bool required,
                     bool nonzero, unsigned *out)
{
    char *v = prop(n, name);
    int ret;

    if (!v) {
        if (!required)
            return 0;
        return fail(c, "<%s>: missing required attribute '%s'", (const char *)n->name, name);
    }
    if (str_to_uint(v, out) < 0)
        ret = fail(c, "<%s %s='%s'>: expected a non-negative integer", (const char *)n->name,
                   name, v);
    else if (nonzero && *out == 0)
        ret = fail(c, "<%s %s='0'>: zero is not permitted", (const char *)n->name, name);
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
static int prop_enum(struct ctx *c, xmlNode *n, const char *name, const char *const *names,
                     size_t nnames, bool required, int *out)
{
    char *v = prop(n, name);
    int ret = -EINVAL;

    if (!v) {
        if (!required)
            return 0;
        return fail(c, "<%s>: missing required attribute '%s'", (const char *)n->name, name);
    }
    for (size_t i = 0; i < nnames; i++) {
        if (strcmp(v, names[i]) == 0) {
            *out = (int)i;
            ret = 1;
            break;
        }
    }
    if (ret < 0)
        fail(c, "<%s %s='%s'>: invalid value", (const char *)n->name, name, v);
    xmlFree(v);
    return ret;
}

/*
 * A cpuset or nodeset attribute: libvirt's virBitmapParse() with
 * VIR_DOMAIN_CPUMASK_LEN, and an empty set refused. what names the element
 * for the message, e.g. "<vcpupin vcpu='1' cpuset='%s'>". Returns 0 or
 * -EINVAL.
 */
static int parse_set(struct ctx *c, const char *text, const char *elem, const char *attr,
                     vpack_cpuset *out)
{
    char *err = NULL;
    int r = 0;

    if (vpack_cpuset_parse(out, text, &err) < 0)
        r = fail(c, "%s %s='%s'>: %s", elem, attr, text, err ? err : "out of memory");
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
static int read_doc(struct ctx *c, const char *buf, size_t len, xmlDoc **docp, xmlNode **rootp)
{
    xmlParserCtxt *pctxt = NULL;
    xmlDoc *doc = NULL;
    xmlNode *root;
    int ret;

    *docp = NULL;
    *rootp = NULL;
    if (!buf || len == 0) {
        ret = fail(c, "the document is empty");
        goto cleanup;
    }
    if (len > VPACK_DOMXML_MAX_SIZE) {
        ret = fail(c, "the document is larger than %u MiB", VPACK_DOMXML_MAX_SIZE >> 20);
        goto cleanup;
    }
    /* libxml2's tree costs some 400 bytes an element: count them first. */
    if (start_tags(buf, len) > VPACK_DOMXML_MAX_ELEMENTS) {
        ret = fail(c, "more than %u elements (vpack's limit)", VPACK_DOMXML_MAX_ELEMENTS);
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
            ret = fail(c, "not well-formed XML at line %d: %s", e->line, e->message);
        else
            ret = fail(c, "not well-formed XML");
        goto cleanup;
    }
    if (doc->intSubset || doc->extSubset) {
        ret = fail(c, "a DOCTYPE declaration is not accepted in domain XML");
        goto cleanup;
    }
    root = xmlDocGetRootElement(doc);
    if (!root) {
        ret = fail(c, "the document has no root element");
        goto cleanup;
    }
    /* libvirt compares the root's name only. */
    if (!xmlStrEqual(root->name, BAD_CAST "domain")) {
        ret = fail(c, "unexpected root element <%s>, expecting <domain>", (const char *)root->name);
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

static void finish_err(struct ctx *c, int ret, char **errmsg);

/* read_doc() for lib/rules.c (domxml-priv.h). */
int vpack__domxml_read_doc(const char *buf, size_t len, xmlDoc **doc, xmlNode **root,
                           char **errmsg)
{
    struct ctx c = {0};
    int ret = read_doc(&c, buf, len, doc, root);

    if (errmsg)
        *errmsg = NULL;
    if (ret == -EINVAL && !c.err)
        ret = -ENOMEM;
    finish_err(&c, ret, errmsg);
    return ret;
}

xmlNode *vpack__domxml_metadata(xmlNode *root)
{
    return first_child(root, "metadata");
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
static int uuid_canon(const char *s, char out[37])
{
    unsigned char raw[16];
    const char *p = s;
    size_t i = 0;

    while (is_xml_blank(*p))
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
        if (!is_xml_blank(*p))
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
static int read_identity(struct ctx *c, xmlNode *root, char **name, bool *has_uuid,
                         char uuid[37], bool strict_uuid)
{
    xmlNode *n;
    char *text = NULL;
    int ret;

    *name = NULL;
    *has_uuid = false;
    n = first_child(root, "name");
    if (n && (ret = text_of(n, name)) < 0)
        goto cleanup;
    if (!*name) {
        ret = fail(c, "<name>: the domain has no name");
        goto cleanup;
    }
    if (strchr(*name, '\n')) {
        ret = fail(c, "<name>: invalid character '\\n' in the name '%s'", *name);
        goto cleanup;
    }
    if (strchr(*name, '/')) {
        ret = fail(c, "<name>: the name '%s' cannot contain '/'", *name);
        goto cleanup;
    }
    c->name = *name;
    n = first_child(root, "uuid");
    if (n && (ret = text_of(n, &text)) < 0)
        goto cleanup;
    if (text) {
        if (uuid_canon(text, uuid) == 0) {
            *has_uuid = true;
        } else if (strict_uuid) {
            ret = fail(c, "<uuid>: malformed uuid '%s'", text);
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
static void qualified(const xmlNode *n, char *buf, size_t len)
{
    if (n->ns && n->ns->prefix)
        snprintf(buf, len, "%s:%s", (const char *)n->ns->prefix, (const char *)n->name);
    else
        snprintf(buf, len, "%s", (const char *)n->name);
}

/* Validates a policy element's level attribute. Returns the level or
 * -EINVAL. where is "<metadata>: " or "". */
static int policy_level(struct ctx *c, xmlNode *n, const char *where)
{
    char qname[128];
    char *v;
    int level;

    qualified(n, qname, sizeof(qname));
    /* The attribute is not namespaced, as the schema says. */
    v = (char *)xmlGetNoNsProp(n, BAD_CAST VPACK_XML_POLICY_LEVEL);
    if (!v)
        return fail(c, "%s<%s>: missing attribute 'level' (expected 0, 1 or 2)", where, qname);
    level = vpack_domxml_level_parse(v);
    if (level < 0)
        fail(c, "%s<%s level='%s'>: invalid power policy level '%s': expected 0, 1 or 2", where,
             qname, v, v);
    xmlFree(v);
    return level;
}

static bool in_vpack_ns(const xmlNode *n)
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
static int read_level(struct ctx *c, xmlNode *root, int *level)
{
    xmlNode *meta = vpack__domxml_metadata(root);
    char qname[128];

    *level = -1;
    if (!meta)
        return 0;
    for (xmlNode *n = meta->children; n; n = n->next) {
        if (!in_vpack_ns(n))
            continue;
        if (!xmlStrEqual(n->name, BAD_CAST VPACK_XML_POLICY_ELEMENT)) {
            qualified(n, qname, sizeof(qname));
            return fail(c, "<metadata>: <%s>: unknown element in vpack's namespace %s "
                        "(expected <%s>)", qname, VPACK_XML_NS, VPACK_XML_POLICY_ELEMENT);
        }
        *level = policy_level(c, n, "<metadata>: ");
        return *level < 0 ? -EINVAL : 0;
    }
    return 0;
}

/* ---- vCPUs ---- */

/* libvirt's virDomainVcpuParse(). */
static int read_vcpus(struct ctx *c, xmlNode *root, struct vpack_domxml *d)
{
    xmlNode *vcpu = first_child(root, "vcpu");
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
            ret = fail(c, "<vcpu>: the maximum vCPU count '%s' is not an integer", text);
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
        ret = fail(c, "<vcpu>: the maximum vCPU count must be at least 1");
        goto cleanup;
    }
    if (maxvcpus > VPACK_DOMXML_MAX_VCPUS) {
        ret = fail(c, "<vcpu>: %u vCPUs is more than vpack supports (%u)", maxvcpus,
                   VPACK_DOMXML_MAX_VCPUS);
        goto cleanup;
    }
    d->vcpus = maxvcpus;
    vpack_cpuset_zero(&d->online);

    /* Individual vCPU states, when given, decide which vCPUs are online and
     * current= is then ignored (even when it exceeds the maximum). */
    for (xmlNode *vs = root->children; vs; vs = vs->next) {
        if (!is_el(vs, "vcpus"))
            continue;
        for (xmlNode *v = vs->children; v; v = v->next) {
            unsigned id, order;
            int enabled = 1, hotpluggable = 0;

            if (!is_el(v, "vcpu"))
                continue;
            individual = true;
            if ((ret = prop_uint(c, v, "id", true, false, &id)) < 0)
                goto cleanup;
            if (id >= maxvcpus) {
                ret = fail(c, "<vcpus><vcpu id='%u'>: vCPU id out of range of the maximum "
                           "vCPU count %u", id, maxvcpus);
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
            ret = fail(c, "<vcpu current='%u'>: the current vCPU count %u exceeds the maximum %u",
                       current, current, maxvcpus);
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

static int cmp_uint(const void *a, const void *b)
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
static int read_iothreads(struct ctx *c, xmlNode *root, struct vpack_domxml *d)
{
    xmlNode *n = first_child(root, "iothreads");
    struct id_at *listed = NULL;
    size_t nlisted = 0, cap = 0, dup_at = SIZE_MAX;
    unsigned count = 0, dup_id = 0;
    bool bad = false;
    char *text = NULL;
    int ret;

    if (n && (ret = text_of(n, &text)) < 0)
        goto cleanup;
    if (text && str_to_uint(text, &count) < 0) {
        ret = fail(c, "<iothreads>: invalid iothreads count '%s'", text);
        goto cleanup;
    }
    for (xmlNode *ids = root->children; ids; ids = ids->next) {
        if (!is_el(ids, "iothreadids"))
            continue;
        for (xmlNode *t = ids->children; t; t = t->next) {
            unsigned id;
            if (!is_el(t, "iothread"))
                continue;
            if (nlisted == VPACK_DOMXML_MAX_IOTHREADS) {
                ret = fail(c, "<iothreadids>: more than %u iothreads (vpack's limit)",
                           VPACK_DOMXML_MAX_IOTHREADS);
                goto cleanup;
            }
            /* Stop at the first bad id; a duplicate before it wins below. */
            if (prop_uint(c, t, "id", true, true, &id) < 0) {
                bad = true;
                break;
            }
            if (nlisted == cap) {
                size_t ncap = cap ? cap * 2 : 8;
                struct id_at *grown = realloc(listed, ncap * sizeof(*grown));
                if (!grown) {
                    ret = -ENOMEM;
                    goto cleanup;
                }
                listed = grown;
                cap = ncap;
            }
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
        ret = fail(c, "<iothreadids><iothread id='%u'>: duplicate iothread id", dup_id);
        goto cleanup;
    }
    if (bad) {
        ret = -EINVAL;
        goto cleanup;
    }
    if (nlisted > count)
        count = (unsigned)nlisted;
    if (count > VPACK_DOMXML_MAX_IOTHREADS) {
        ret = fail(c, "<iothreads>: %u iothreads is more than vpack supports (%u)", count,
                   VPACK_DOMXML_MAX_IOTHREADS);
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
        qsort(d->iothreads, count, sizeof(*d->iothreads), cmp_uint);
    }
    ret = 0;

cleanup:
    xmlFree(text);
    free(listed);
    return ret;
}

/* ---- cputune ---- */

static int cmp_vcpupin(const void *a, const void *b)
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
struct pin_state {
    vpack_cpuset vcpus;   /* pinned vCPUs */
    bool *iothreads;      /* pinned iothreads, by index in d->iothreads */
    size_t vcpupin_cap, iothreadpin_cap; /* allocated in d->vcpupin, d->iothreadpin */
};

/* Allocated (a vpack_cpuset is 2 KiB), for d's vCPUs and iothreads. */
static struct pin_state *pin_state_new(const struct vpack_domxml *d)
{
    struct pin_state *s = calloc(1, sizeof(*s));

    /* One more than needed: calloc(0, ...) may return NULL. */
    if (s && !(s->iothreads = calloc(d->niothreads + 1, sizeof(*s->iothreads)))) {
        free(s);
        return NULL;
    }
    return s;
}

static void pin_state_free(struct pin_state *s)
{
    if (s)
        free(s->iothreads);
    free(s);
}

/*
 * Room for one more in arr, which holds n elements of size bytes and has
 * room for *cap: arr itself, or arr grown (*cap updated), or NULL when out
 * of memory (arr left as it was).
 */
static void *grow_pins(void *arr, size_t n, size_t *cap, size_t size)
{
    size_t ncap;
    void *grown;

    if (n < *cap)
        return arr;
    ncap = *cap ? *cap * 2 : 4;
    if (!(grown = realloc(arr, ncap * size)))
        return NULL;
    *cap = ncap;
    return grown;
}

/* d's pin arrays sorted by thread, as struct vpack_domxml promises (no id twice). */
static void sort_pins(struct vpack_domxml *d)
{
    if (d->nvcpupin > 1)
        qsort(d->vcpupin, d->nvcpupin, sizeof(*d->vcpupin), cmp_vcpupin);
    if (d->niothreadpin > 1)
        qsort(d->iothreadpin, d->niothreadpin, sizeof(*d->iothreadpin), cmp_iothreadpin);
}

/*
 * The cpuset attribute of pin element p, which elem names in messages
 * ("<iothreadpin iothread='1'"). Returns 0 or -EINVAL.
 */
static int read_pin_cpuset(struct ctx *c, xmlNode *p, const char *elem, vpack_cpuset *out)
{
    char *cpuset = prop(p, "cpuset");
    int ret;

    if (!cpuset)
        return fail(c, "%s>: missing cpuset", elem);
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
static int read_vcpupin_el(struct ctx *c, xmlNode *p, struct vpack_domxml *d,
                           struct pin_state *s, bool request)
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
    /* read_vcpus() keeps d->vcpus within VPACK_CPUSET_MAX; s->vcpus relies on it. */
    exists = vcpu < d->vcpus && vcpu < VPACK_CPUSET_MAX;
    if (!exists && !request) {
        add_warning(c, d, "%s>: ignored: the domain has %u vCPUs", elem, d->vcpus);
        return 0;
    }
    /* libvirt refuses a missing cpuset, then a duplicate, then an invalid
     * cpuset (xmlHasProp() is the lookup of prop(), without the copy). */
    if (!request && vpack_cpuset_isset(&s->vcpus, vcpu) && xmlHasProp(p, BAD_CAST "cpuset"))
        return fail(c, "%s>: duplicate vcpupin for vCPU %u", elem, vcpu);
    if ((ret = read_pin_cpuset(c, p, elem, &cpus)) < 0)
        return ret;
    /* Only vpack's request gets here with a vCPU the domain lacks or a duplicate. */
    if (!exists)
        return fail(c, "%s>: the domain has %u vCPUs", elem, d->vcpus);
    if (vpack_cpuset_isset(&s->vcpus, vcpu))
        return fail(c, "%s>: vCPU %u is pinned twice", elem, vcpu);
    if (!(pins = grow_pins(d->vcpupin, d->nvcpupin, &s->vcpupin_cap, sizeof(*pins))))
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
static int read_emulatorpin_el(struct ctx *c, xmlNode *p, struct vpack_domxml *d)
{
    vpack_cpuset cpus;
    int ret;

    if ((ret = read_pin_cpuset(c, p, "<emulatorpin", &cpus)) < 0)
        return ret;
    if (d->has_emulatorpin)
        return fail(c, "<emulatorpin>: more than one");
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
static int read_iothreadpin_el(struct ctx *c, xmlNode *p, struct vpack_domxml *d,
                               struct pin_state *s, bool request)
{
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
        found = bsearch(&id, d->iothreads, d->niothreads, sizeof(*d->iothreads), cmp_uint);
    if ((found || request) && (ret = read_pin_cpuset(c, p, elem, &cpus)) < 0)
        return ret;
    if (!found)
        return fail(c, "%s>: the domain has no iothread %u", elem, id);
    idx = (size_t)(found - d->iothreads);
    if (s->iothreads[idx])
        return request ? fail(c, "%s>: iothread %u is pinned twice", elem, id)
                       : fail(c, "%s>: duplicate iothreadpin for iothread %u", elem, id);
    if (!(pins = grow_pins(d->iothreadpin, d->niothreadpin, &s->iothreadpin_cap, sizeof(*pins))))
        return -ENOMEM;
    d->iothreadpin = pins;
    d->iothreadpin[d->niothreadpin++] = (struct vpack_iothreadpin){id, cpus};
    s->iothreads[idx] = true;
    return 0;
}

typedef int pin_el_reader(struct ctx *c, xmlNode *p, struct vpack_domxml *d, struct pin_state *s,
                          bool request);

/*
 * Every <cputune><NAME> of the domain, as libvirt's "./cputune/NAME" finds
 * them (under every <cputune>, in document order), through read_el. Each
 * kind is read in a pass of its own, as libvirt reads them (<vcpupin>s,
 * <emulatorpin>, <iothreadpin>s): that decides which fault is reported.
 */
static int read_cputune_pins(struct ctx *c, xmlNode *root, struct vpack_domxml *d,
                             const char *name, pin_el_reader *read_el)
{
    struct pin_state *s = pin_state_new(d);
    int ret = s ? 0 : -ENOMEM;

    for (xmlNode *tune = root->children; tune && ret == 0; tune = tune->next) {
        if (!is_el(tune, "cputune"))
            continue;
        for (xmlNode *p = tune->children; p && ret == 0; p = p->next)
            if (is_el(p, name))
                ret = read_el(c, p, d, s, false);
    }
    if (ret == 0)
        sort_pins(d);
    pin_state_free(s);
    return ret;
}

/* virDomainEmulatorPinDefParseXML(): at most one in all <cputune>s. */
static int read_emulatorpin(struct ctx *c, xmlNode *root, struct vpack_domxml *d)
{
    xmlNode *pin = NULL;

    for (xmlNode *tune = root->children; tune; tune = tune->next) {
        if (!is_el(tune, "cputune"))
            continue;
        for (xmlNode *p = tune->children; p; p = p->next) {
            if (!is_el(p, "emulatorpin"))
                continue;
            if (pin)
                return fail(c, "<cputune>: only one <emulatorpin> is supported");
            pin = p;
        }
    }
    return pin ? read_emulatorpin_el(c, pin, d) : 0;
}

/* ---- numatune ---- */

/* The number of guest NUMA cells: every <cell> of the first <numa> of each
 * <cpu>, as libvirt's "./cpu/numa[1]/cell" counts them. */
static int count_numa_cells(struct ctx *c, xmlNode *root, size_t *ncells)
{
    bool has_numa = false;

    *ncells = 0;
    for (xmlNode *cpu = root->children; cpu; cpu = cpu->next) {
        xmlNode *numa;
        if (!is_el(cpu, "cpu") || !(numa = first_child(cpu, "numa")))
            continue;
        has_numa = true;
        for (xmlNode *cell = numa->children; cell; cell = cell->next)
            if (is_el(cell, "cell") && ++*ncells > VPACK_DOMXML_MAX_CELLS)
                return fail(c, "<cpu><numa>: more than %u guest NUMA cells (vpack's limit; "
                            "QEMU takes at most 128)", VPACK_DOMXML_MAX_CELLS);
    }
    if (has_numa && *ncells == 0)
        return fail(c, "<cpu><numa>: NUMA topology defined without NUMA cells");
    return 0;
}

static int cmp_memnode(const void *a, const void *b)
{
    const struct vpack_memnode *x = a, *y = b;
    return x->cellid < y->cellid ? -1 : x->cellid > y->cellid;
}

/* virDomainNumatuneNodeParseXML(): every <numatune><memnode>. */
static int read_memnodes(struct ctx *c, xmlNode *numatune, size_t ncells,
                         struct vpack_numatune *nt)
{
    vpack_cpuset *set = NULL; /* one for every cell: each keeps only its text */
    bool *seen = NULL;
    size_t cap = 0;
    char *nodeset = NULL;
    int ret;
    bool any = false;

    for (xmlNode *m = numatune ? numatune->children : NULL; m; m = m->next)
        if (is_el(m, "memnode"))
            any = true;
    if (!any) {
        ret = 0;
        goto cleanup;
    }
    if (nt->memory_specified && nt->memory_placement == VPACK_NUMA_PLACEMENT_AUTO) {
        ret = fail(c, "<numatune><memnode>: per-node binding is not compatible with automatic "
                   "NUMA placement");
        goto cleanup;
    }
    if (ncells == 0) {
        ret = fail(c, "<numatune><memnode>: invalid without any guest NUMA cells");
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

        if (!is_el(m, "memnode"))
            continue;
        if ((ret = prop_uint(c, m, "cellid", true, false, &cellid)) < 0)
            goto cleanup;
        if (cellid >= ncells) {
            ret = fail(c, "<memnode cellid='%u'>: the guest has no NUMA cell %u (it has %zu)",
                       cellid, cellid, ncells);
            goto cleanup;
        }
        if (seen[cellid]) {
            ret = fail(c, "<memnode cellid='%u'>: multiple memnode elements with cellid %u",
                       cellid, cellid);
            goto cleanup;
        }
        r = prop_enum(c, m, "mode", numa_mode_names, 4, false, &mode);
        if (r < 0) {
            ret = r;
            goto cleanup;
        }
        nodeset = prop(m, "nodeset");
        if (!nodeset) {
            ret = fail(c, "<memnode cellid='%u'>: missing nodeset", cellid);
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
        qsort(nt->memnodes, nt->nmemnodes, sizeof(*nt->memnodes), cmp_memnode);
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
static int read_numatune(struct ctx *c, xmlNode *root, struct vpack_domxml *d)
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
        if (!is_el(n, "numatune"))
            continue;
        if (numatune) {
            ret = fail(c, "only one <numatune> is supported");
            goto cleanup;
        }
        numatune = n;
    }
    if (numatune)
        mem = first_child(numatune, "memory");
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
            ret = fail(c, "<numatune><memory>: a nodeset must be set when placement is static");
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

/* Hands out ctx's error (or frees it) at the end of a public function. */
static void finish_err(struct ctx *c, int ret, char **errmsg)
{
    if (errmsg && ret < 0) {
        *errmsg = c->err;
        c->err = NULL;
    }
    free(c->err);
    c->err = NULL;
}

int vpack_domxml_parse(const char *buf, size_t len, struct vpack_domxml **out, char **errmsg)
{
    struct ctx c = {0};
    struct vpack_domxml *d = NULL;
    xmlDoc *doc = NULL;
    xmlNode *root;
    int ret;

    *out = NULL;
    if (errmsg)
        *errmsg = NULL;
    if ((ret = read_doc(&c, buf, len, &doc, &root)) < 0)
        goto cleanup;
    d = calloc(1, sizeof(*d));
    if (!d) {
        ret = -ENOMEM;
        goto cleanup;
    }
    d->level = -1;
    if ((ret = read_identity(&c, root, &d->name, &d->has_uuid, d->uuid, true)) < 0)
        goto cleanup;
    c.name = d->name;
    if ((ret = read_level(&c, root, &d->level)) < 0)
        goto cleanup;
    if ((ret = read_vcpus(&c, root, d)) < 0)
        goto cleanup;
    if ((ret = read_iothreads(&c, root, d)) < 0)
        goto cleanup;
    if ((ret = read_cputune_pins(&c, root, d, "vcpupin", read_vcpupin_el)) < 0)
        goto cleanup;
    if ((ret = read_emulatorpin(&c, root, d)) < 0)
        goto cleanup;
    if ((ret = read_cputune_pins(&c, root, d, "iothreadpin", read_iothreadpin_el)) < 0)
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
        ret = fail(&c, "<vcpu>: the domain has no online vCPU");
        goto cleanup;
    }
    *out = d;
    d = NULL;
    ret = 0;

cleanup:
    if (ret == -EINVAL && !c.err)
        ret = -ENOMEM; /* the message itself could not be allocated */
    finish_err(&c, ret, errmsg);
    vpack_domxml_free(d);
    xmlFreeDoc(doc);
    return ret;
}

int vpack_domxml_identity(const char *buf, size_t len, char **name, char **uuid, char **errmsg)
{
    struct ctx c = {0};
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
    if ((ret = read_doc(&c, buf, len, &doc, &root)) < 0)
        goto cleanup;
    if ((ret = read_identity(&c, root, &xname, &has_uuid, canon, false)) < 0)
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
    if (ret == -EINVAL && !c.err)
        ret = -ENOMEM;
    finish_err(&c, ret, errmsg);
    xmlFree(xname);
    xmlFreeDoc(doc);
    return ret;
}

/* ---- JSON ---- */


/* Adds key: value, consuming value (NULL means JSON null). */
static int add(json_object *o, const char *key, json_object *v)
{
    if (json_object_object_add(o, key, v) < 0) {
        json_object_put(v);
        return -ENOMEM;
    }
    return 0;
}

static json_object *numatune_json(const struct vpack_numatune *nt)
{
    json_object *o = json_object_new_object(), *mem = NULL, *nodes = NULL;
    char key[16];

    if (!o)
        return NULL;
    if (nt->memory_specified) {
        mem = json_object_new_object();
        if (!mem ||
            add(mem, "mode", json_object_new_string(vpack_numa_mode_name(nt->memory_mode))) < 0)
            goto fail;
        if (nt->memory_placement == VPACK_NUMA_PLACEMENT_STATIC) {
            if (add(mem, "placement", json_object_new_string("static")) < 0 ||
                vpack_json_add_cpuset(mem, "nodeset", &nt->memory_nodeset) < 0)
                goto fail;
        } else if (add(mem, "placement", json_object_new_string("auto")) < 0) {
            goto fail;
        }
        if (add(o, "memory", mem) < 0) {
            mem = NULL;
            goto fail;
        }
        mem = NULL;
    }
    if (nt->nmemnodes) {
        nodes = json_object_new_object();
        if (!nodes)
            goto fail;
        for (size_t i = 0; i < nt->nmemnodes; i++) {
            const struct vpack_memnode *mn = &nt->memnodes[i];
            json_object *m = json_object_new_object();

            if (!m)
                goto fail;
            if (add(m, "mode", json_object_new_string(vpack_numa_mode_name(mn->mode))) < 0 ||
                add(m, "nodeset", json_object_new_string(mn->nodeset)) < 0) {
                json_object_put(m);
                goto fail;
            }
            snprintf(key, sizeof(key), "%u", mn->cellid);
            if (add(nodes, key, m) < 0) /* add() released m */
                goto fail;
        }
        if (add(o, "memnode", nodes) < 0) {
            nodes = NULL;
            goto fail;
        }
        nodes = NULL;
    }
    return o;

fail:
    json_object_put(mem);
    json_object_put(nodes);
    json_object_put(o);
    return NULL;
}

char *vpack_domxml_to_json(const struct vpack_domxml *d)
{
    json_object *o = json_object_new_object(), *pins = NULL, *ids = NULL, *nt = NULL;
    char *out = NULL;
    char key[16];

    if (!o)
        return NULL;
    if (add(o, "name", json_object_new_string(d->name)) < 0 ||
        add(o, "uuid", d->has_uuid ? json_object_new_string(d->uuid) : NULL) < 0 ||
        add(o, "level", d->level >= 0 ? json_object_new_int(d->level) : NULL) < 0 ||
        add(o, "vcpus", json_object_new_int64(d->vcpus)) < 0 ||
        add(o, "vcpus_current", json_object_new_int64(d->vcpus_current)) < 0 ||
        vpack_json_add_cpuset(o, "online", &d->online) < 0 ||
        add(o, "placement", json_object_new_string(
                                d->placement == VPACK_VCPU_PLACEMENT_AUTO ? "auto" : "static")) < 0)
        goto cleanup;
    if (d->has_cpuset ? vpack_json_add_cpuset(o, "cpuset", &d->cpuset) < 0 : add(o, "cpuset", NULL) < 0)
        goto cleanup;

    pins = json_object_new_object();
    if (!pins)
        goto cleanup;
    for (size_t i = 0; i < d->nvcpupin; i++) {
        snprintf(key, sizeof(key), "%u", d->vcpupin[i].vcpu);
        if (vpack_json_add_cpuset(pins, key, &d->vcpupin[i].cpus) < 0)
            goto cleanup;
    }
    if (add(o, "vcpupin", pins) < 0) {
        pins = NULL;
        goto cleanup;
    }
    pins = NULL;

    if (d->has_emulatorpin ? vpack_json_add_cpuset(o, "emulatorpin", &d->emulatorpin) < 0
                           : add(o, "emulatorpin", NULL) < 0)
        goto cleanup;

    ids = json_object_new_array();
    if (!ids)
        goto cleanup;
    for (size_t i = 0; i < d->niothreads; i++) {
        json_object *v = json_object_new_int64(d->iothreads[i]);
        if (!v || json_object_array_add(ids, v) < 0) {
            json_object_put(v);
            goto cleanup;
        }
    }
    if (add(o, "iothreads", ids) < 0) {
        ids = NULL;
        goto cleanup;
    }
    ids = NULL;

    pins = json_object_new_object();
    if (!pins)
        goto cleanup;
    for (size_t i = 0; i < d->niothreadpin; i++) {
        snprintf(key, sizeof(key), "%u", d->iothreadpin[i].iothread);
        if (vpack_json_add_cpuset(pins, key, &d->iothreadpin[i].cpus) < 0)
            goto cleanup;
    }
    if (add(o, "iothreadpin", pins) < 0) {
        pins = NULL;
        goto cleanup;
    }
    pins = NULL;

    if (d->numatune.present) {
        nt = numatune_json(&d->numatune);
        if (!nt || add(o, "numatune", nt) < 0)
            goto cleanup;
    }
    out = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                       JSON_C_TO_STRING_NOSLASHESCAPE));

cleanup:
    json_object_put(pins);
    json_object_put(ids);
    json_object_put(o);
    return out;
}

/* ---- The record's JSON, read back ---- */

/* Sets *errmsg to "domain record: KEY: WHAT" and returns -EINVAL (or -ENOMEM). */
static int rec_fail(char **errmsg, const char *key, const char *what)
{
    if (errmsg && asprintf(errmsg, "domain record: \"%s\": %s", key, what) < 0) {
        *errmsg = NULL;
        return -ENOMEM;
    }
    return -EINVAL;
}

/* The member key of o; NULL when it is absent or null. */
static json_object *rec_member(json_object *o, const char *key)
{
    json_object *v = NULL;
    return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static int rec_set(json_object *v, const char *key, vpack_cpuset *out, char **errmsg)
{
    if (!json_object_is_type(v, json_type_string) ||
        vpack_cpuset_parse(out, json_object_get_string(v), NULL) < 0)
        return rec_fail(errmsg, key, "expected a CPU set");
    return 0;
}

/* An optional CPU set: *has is false when the key is absent or null. */
static int rec_opt_set(json_object *o, const char *key, bool *has, vpack_cpuset *out,
                       char **errmsg)
{
    json_object *v = rec_member(o, key);
    *has = v != NULL;
    return v ? rec_set(v, key, out, errmsg) : 0;
}

/* A non-negative integer up to max; an absent one is 0. */
static int rec_uint(json_object *o, const char *key, unsigned max, unsigned *out, char **errmsg)
{
    json_object *v = rec_member(o, key);
    int64_t n;
    *out = 0;
    if (!v)
        return 0;
    if (!json_object_is_type(v, json_type_int) || (n = json_object_get_int64(v)) < 0 ||
        n > (int64_t)max)
        return rec_fail(errmsg, key, "expected a number in range");
    *out = (unsigned)n;
    return 0;
}

/* An object key that is an id: decimal digits only. */
static int rec_id(const char *s, const char *key, unsigned *out, char **errmsg)
{
    unsigned long v = 0;
    if (!*s)
        return rec_fail(errmsg, key, "expected decimal ids as keys");
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || v > UINT_MAX / 10)
            return rec_fail(errmsg, key, "expected decimal ids as keys");
        v = v * 10 + (unsigned long)(*p - '0');
    }
    if (v > UINT_MAX)
        return rec_fail(errmsg, key, "expected decimal ids as keys");
    *out = (unsigned)v;
    return 0;
}

/* {"ID": CPUSET, ...} as (id, set) pairs ascending by id; absent is none. */
static int rec_pins(json_object *o, const char *key, struct vpack_vcpupin **out, size_t *n,
                    char **errmsg)
{
    json_object *v = rec_member(o, key);
    size_t i = 0;
    *out = NULL;
    *n = 0;
    if (!v)
        return 0;
    if (!json_object_is_type(v, json_type_object))
        return rec_fail(errmsg, key, "expected an object");
    size_t len = (size_t)json_object_object_length(v);
    if (len && !(*out = calloc(len, sizeof(**out))))
        return -ENOMEM;
    json_object_object_foreach(v, id, set)
    {
        int r = rec_id(id, key, &(*out)[i].vcpu, errmsg);
        if (r < 0 || (r = rec_set(set, key, &(*out)[i].cpus, errmsg)) < 0) {
            free(*out);
            *out = NULL;
            return r;
        }
        i++;
    }
    if (len)
        qsort(*out, len, sizeof(**out), cmp_vcpupin);
    *n = len;
    return 0;
}

static int rec_numa_mode(json_object *o, const char *key, enum vpack_numa_mode *mode,
                         char **errmsg)
{
    json_object *v = rec_member(o, "mode");
    const char *s = v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
    for (int m = VPACK_NUMA_MODE_STRICT; m <= VPACK_NUMA_MODE_RESTRICTIVE; m++)
        if (!strcmp(s, vpack_numa_mode_name((enum vpack_numa_mode)m))) {
            *mode = (enum vpack_numa_mode)m;
            return 0;
        }
    return rec_fail(errmsg, key, "expected a numatune mode");
}

static int rec_memory(json_object *mem, struct vpack_numatune *nt, char **errmsg)
{
    json_object *pl = rec_member(mem, "placement");
    const char *s = pl && json_object_is_type(pl, json_type_string) ? json_object_get_string(pl)
                                                                    : "";
    bool has;
    int r;
    if (!json_object_is_type(mem, json_type_object))
        return rec_fail(errmsg, "memory", "expected an object");
    nt->memory_specified = true;
    if ((r = rec_numa_mode(mem, "memory", &nt->memory_mode, errmsg)) < 0)
        return r;
    if (!strcmp(s, "auto")) {
        nt->memory_placement = VPACK_NUMA_PLACEMENT_AUTO;
        return 0;
    }
    if (strcmp(s, "static"))
        return rec_fail(errmsg, "memory", "expected placement static or auto");
    nt->memory_placement = VPACK_NUMA_PLACEMENT_STATIC;
    if ((r = rec_opt_set(mem, "nodeset", &has, &nt->memory_nodeset, errmsg)) < 0)
        return r;
    return has ? 0 : rec_fail(errmsg, "memory", "a static placement needs a nodeset");
}

static int rec_memnodes(json_object *nodes, struct vpack_numatune *nt, char **errmsg)
{
    vpack_cpuset set;
    size_t i = 0;
    bool has;
    int r;
    if (!json_object_is_type(nodes, json_type_object))
        return rec_fail(errmsg, "memnode", "expected an object");
    size_t len = (size_t)json_object_object_length(nodes);
    if (len > VPACK_DOMXML_MAX_CELLS)
        return rec_fail(errmsg, "memnode", "too many");
    if (len && !(nt->memnodes = calloc(len, sizeof(*nt->memnodes))))
        return -ENOMEM;
    json_object_object_foreach(nodes, cell, m)
    {
        struct vpack_memnode *mn = &nt->memnodes[i++];
        nt->nmemnodes = i;
        if ((r = rec_id(cell, "memnode", &mn->cellid, errmsg)) < 0)
            return r;
        if (!json_object_is_type(m, json_type_object))
            return rec_fail(errmsg, "memnode", "expected an object per cell");
        if ((r = rec_numa_mode(m, "memnode", &mn->mode, errmsg)) < 0 ||
            (r = rec_opt_set(m, "nodeset", &has, &set, errmsg)) < 0)
            return r;
        if (!has)
            return rec_fail(errmsg, "memnode", "a cell needs a nodeset");
        if (!(mn->nodeset = vpack_cpuset_format(&set)))
            return -ENOMEM;
    }
    if (len)
        qsort(nt->memnodes, len, sizeof(*nt->memnodes), cmp_memnode);
    return 0;
}

static int rec_numatune(json_object *o, struct vpack_numatune *nt, char **errmsg)
{
    json_object *v = rec_member(o, "numatune"), *m;
    int r;
    if (!v)
        return 0;
    if (!json_object_is_type(v, json_type_object))
        return rec_fail(errmsg, "numatune", "expected an object");
    nt->present = true;
    if ((m = rec_member(v, "memory")) && (r = rec_memory(m, nt, errmsg)) < 0)
        return r;
    if ((m = rec_member(v, "memnode")) && (r = rec_memnodes(m, nt, errmsg)) < 0)
        return r;
    return 0;
}

static int rec_iothreads(json_object *o, struct vpack_domxml *d, char **errmsg)
{
    json_object *v = rec_member(o, "iothreads");
    struct vpack_vcpupin *pins = NULL;
    size_t n = 0;
    int r;
    if (v && !json_object_is_type(v, json_type_array))
        return rec_fail(errmsg, "iothreads", "expected an array");
    d->niothreads = v ? json_object_array_length(v) : 0;
    if (d->niothreads > VPACK_DOMXML_MAX_IOTHREADS)
        return rec_fail(errmsg, "iothreads", "too many");
    if (d->niothreads && !(d->iothreads = calloc(d->niothreads, sizeof(*d->iothreads))))
        return -ENOMEM;
    for (size_t i = 0; i < d->niothreads; i++) {
        json_object *id = json_object_array_get_idx(v, i);
        int64_t x;
        if (!json_object_is_type(id, json_type_int) || (x = json_object_get_int64(id)) < 0 ||
            x > UINT_MAX)
            return rec_fail(errmsg, "iothreads", "expected ids");
        d->iothreads[i] = (unsigned)x;
    }
    if (d->niothreads)
        qsort(d->iothreads, d->niothreads, sizeof(*d->iothreads), cmp_uint);
    if ((r = rec_pins(o, "iothreadpin", &pins, &n, errmsg)) < 0)
        return r;
    if (n && !(d->iothreadpin = calloc(n, sizeof(*d->iothreadpin)))) {
        free(pins);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        d->iothreadpin[i].iothread = pins[i].vcpu;
        d->iothreadpin[i].cpus = pins[i].cpus;
    }
    d->niothreadpin = n;
    free(pins);
    return 0;
}

/* "name", "uuid", "level" and "placement". */
static int rec_identity(json_object *o, struct vpack_domxml *d, char **errmsg)
{
    json_object *v = rec_member(o, "name");
    if (!v || !json_object_is_type(v, json_type_string))
        return rec_fail(errmsg, "name", "expected a string");
    if (!(d->name = (char *)xmlStrdup((const xmlChar *)json_object_get_string(v))))
        return -ENOMEM;
    if ((v = rec_member(o, "uuid"))) {
        if (!json_object_is_type(v, json_type_string) ||
            uuid_canon(json_object_get_string(v), d->uuid) < 0)
            return rec_fail(errmsg, "uuid", "expected a UUID");
        d->has_uuid = true;
    }
    d->level = -1;
    if ((v = rec_member(o, "level"))) {
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
            json_object_get_int64(v) > 2)
            return rec_fail(errmsg, "level", "expected 0, 1, 2 or null");
        d->level = (int)json_object_get_int64(v);
    }
    v = rec_member(o, "placement");
    const char *pl = v && json_object_is_type(v, json_type_string) ? json_object_get_string(v)
                                                                   : v ? "" : "static";
    if (strcmp(pl, "static") && strcmp(pl, "auto"))
        return rec_fail(errmsg, "placement", "expected static or auto");
    d->placement = strcmp(pl, "auto") ? VPACK_VCPU_PLACEMENT_STATIC : VPACK_VCPU_PLACEMENT_AUTO;
    return 0;
}

/*
 * What the reader never writes, so no record can hold: a pin for a vCPU
 * beyond "vcpus", for an iothread not in "iothreads", or two for one
 * thread. Such a record is damaged as a whole: trusting the rest would
 * drop a guest's pin silently.
 */
static int rec_consistent(const struct vpack_domxml *d, char **errmsg)
{
    for (size_t i = 0; i < d->nvcpupin; i++)
        if (d->vcpupin[i].vcpu >= d->vcpus || (i && d->vcpupin[i].vcpu == d->vcpupin[i - 1].vcpu))
            return rec_fail(errmsg, "vcpupin", "a pin for a vCPU the domain does not have");
    for (size_t i = 0; i < d->niothreadpin; i++)
        if (!d->niothreads ||
            !bsearch(&d->iothreadpin[i].iothread, d->iothreads, d->niothreads,
                     sizeof(*d->iothreads), cmp_uint) ||
            (i && d->iothreadpin[i].iothread == d->iothreadpin[i - 1].iothread))
            return rec_fail(errmsg, "iothreadpin", "a pin for an iothread the domain does not have");
    return 0;
}

static int rec_read(json_object *o, struct vpack_domxml *d, char **errmsg)
{
    bool has;
    int r;
    if (!json_object_is_type(o, json_type_object))
        return rec_fail(errmsg, "", "expected an object");
    if ((r = rec_identity(o, d, errmsg)) < 0 ||
        (r = rec_uint(o, "vcpus", VPACK_DOMXML_MAX_VCPUS, &d->vcpus, errmsg)) < 0 ||
        (r = rec_uint(o, "vcpus_current", VPACK_DOMXML_MAX_VCPUS, &d->vcpus_current, errmsg)) <
            0 ||
        (r = rec_opt_set(o, "online", &has, &d->online, errmsg)) < 0 ||
        (r = rec_opt_set(o, "cpuset", &d->has_cpuset, &d->cpuset, errmsg)) < 0 ||
        (r = rec_pins(o, "vcpupin", &d->vcpupin, &d->nvcpupin, errmsg)) < 0 ||
        (r = rec_opt_set(o, "emulatorpin", &d->has_emulatorpin, &d->emulatorpin, errmsg)) < 0 ||
        (r = rec_iothreads(o, d, errmsg)) < 0 || (r = rec_consistent(d, errmsg)) < 0)
        return r;
    return rec_numatune(o, &d->numatune, errmsg);
}

int vpack_domxml_from_json_object(struct json_object *o, struct vpack_domxml **out, char **errmsg)
{
    struct vpack_domxml *d = calloc(1, sizeof(*d));
    int ret;

    *out = NULL;
    if (errmsg)
        *errmsg = NULL;
    if (!d)
        return -ENOMEM;
    if ((ret = rec_read(o, d, errmsg)) < 0) {
        vpack_domxml_free(d);
        return ret;
    }
    *out = d;
    return 0;
}

int vpack_domxml_request_check(const struct vpack_domxml *req, const struct vpack_domxml *live,
                               char **errmsg)
{
    if (errmsg)
        *errmsg = NULL;
    for (size_t i = 0; i < req->nvcpupin; i++)
        if (req->vcpupin[i].vcpu >= live->vcpus)
            return vpack_errmsg_set(-EINVAL, errmsg, "it pins vCPU %u, the domain has %u vCPUs",
                                    req->vcpupin[i].vcpu, live->vcpus);
    for (size_t i = 0; i < req->niothreadpin; i++)
        if (!live->niothreads ||
            !bsearch(&req->iothreadpin[i].iothread, live->iothreads, live->niothreads,
                     sizeof(*live->iothreads), cmp_uint))
            return vpack_errmsg_set(-EINVAL, errmsg,
                                    "it pins iothread %u, the domain has no such iothread",
                                    req->iothreadpin[i].iothread);
    return 0;
}

int vpack_domxml_from_json(const char *buf, size_t len, struct vpack_domxml **out, char **errmsg)
{
    struct json_tokener *tok = json_tokener_new();
    struct vpack_domxml *d = calloc(1, sizeof(*d));
    json_object *o = NULL;
    int ret = -ENOMEM;

    *out = NULL;
    if (errmsg)
        *errmsg = NULL;
    if (!tok || !d)
        goto cleanup;
    if (len > INT_MAX || !(o = json_tokener_parse_ex(tok, buf, (int)len)) ||
        json_tokener_get_error(tok) != json_tokener_success) {
        ret = rec_fail(errmsg, "", "not JSON");
        goto cleanup;
    }
    if ((ret = rec_read(o, d, errmsg)) < 0)
        goto cleanup;
    *out = d;
    d = NULL;
cleanup:
    vpack_domxml_free(d);
    json_object_put(o);
    if (tok)
        json_tokener_free(tok);
    return ret;
}

/* ---- The define rewrite ---- */

/* The blanks after the last newline in the text node before n: the
 * indentation n sits at, or "" when there is none. */
static const char *indent_of(const xmlNode *n, size_t *len)
{
    const char *s, *nl;

    *len = 0;
    if (!n || !n->prev || n->prev->type != XML_TEXT_NODE || !n->prev->content)
        return "";
    s = (const char *)n->prev->content;
    nl = strrchr(s, '\n');
    if (!nl)
        return "";
    nl++;
    for (const char *p = nl; *p; p++)
        if (*p != ' ' && *p != '\t')
            return "";
    *len = strlen(nl);
    return nl;
}

static bool is_blank_text(const xmlNode *n)
{
    if (!n || n->type != XML_TEXT_NODE)
        return false;
    for (const xmlChar *p = n->content; p && *p; p++)
        if (!is_xml_blank((char)*p))
            return false;
    return true;
}

/* Unlinks and frees n and the blank text before it, so no empty line is
 * left where it was. */
static void remove_node(xmlNode *n)
{
    xmlNode *prev = n->prev;

    if (is_blank_text(prev)) {
        xmlUnlinkNode(prev);
        xmlFreeNode(prev);
    }
    xmlUnlinkNode(n);
    xmlFreeNode(n);
}

/* A text node "\n" + indent + extra spaces. */
static xmlNode *newline_text(xmlDoc *doc, const char *indent, size_t ilen, size_t extra)
{
    char buf[256];
    size_t n = 0;

    buf[n++] = '\n';
    for (size_t i = 0; i < ilen && n < sizeof(buf) - 1; i++)
        buf[n++] = indent[i];
    for (size_t i = 0; i < extra && n < sizeof(buf) - 1; i++)
        buf[n++] = ' ';
    buf[n] = '\0';
    return xmlNewDocText(doc, BAD_CAST buf);
}

/*
 * Puts a new <metadata> where libvirt formats it: after the last of
 * <name>, <uuid>, <genid>, <title> and <description>, or first. Elements go
 * in before the text that indents them: libxml2 merges a text node into an
 * adjacent one, so text is only ever added next to elements.
 */
static xmlNode *create_metadata(xmlDoc *doc, xmlNode *root)
{
    xmlNode *after = NULL, *first, *meta, *text;
    const char *indent;
    size_t ilen;

    for (xmlNode *n = root->children; n; n = n->next)
        if (is_el(n, "name") || is_el(n, "uuid") || is_el(n, "genid") || is_el(n, "title") ||
            is_el(n, "description"))
            after = n;
    meta = xmlNewDocNode(doc, NULL, BAD_CAST "metadata", NULL);
    if (!meta)
        return NULL;
    if (after) {
        /* [after][blank][next] becomes [after]["\n" indent][meta][blank][next]. */
        indent = indent_of(after, &ilen);
        xmlAddNextSibling(after, meta);
        if ((text = newline_text(doc, indent, ilen, 0)))
            xmlAddPrevSibling(meta, text);
        return meta;
    }
    first = xmlFirstElementChild(root);
    if (!first) {
        xmlAddChild(root, meta);
        return meta;
    }
    /* [blank][first] becomes [blank][meta]["\n" indent][first]. */
    indent = indent_of(first, &ilen);
    xmlAddPrevSibling(first, meta);
    if ((text = newline_text(doc, indent, ilen, 0)))
        xmlAddPrevSibling(first, text);
    return meta;
}

/* Appends child to meta, indented one level (two spaces) deeper. */
static void append_indented(xmlDoc *doc, xmlNode *meta, xmlNode *child)
{
    xmlNode *last = meta->last, *text;
    const char *indent;
    size_t ilen;

    indent = indent_of(meta, &ilen);
    if (is_blank_text(last) && strchr((const char *)last->content, '\n')) {
        /* [...][blank] becomes [...]["\n" indent "  "][child][blank]. */
        xmlAddPrevSibling(last, child);
        if ((text = newline_text(doc, indent, ilen, 2)))
            xmlAddPrevSibling(child, text);
        return;
    }
    if ((text = newline_text(doc, indent, ilen, 2)))
        xmlAddChild(meta, text);
    xmlAddChild(meta, child);
    if ((text = newline_text(doc, indent, ilen, 0)))
        xmlAddChild(meta, text);
}

static int serialize(xmlDoc *doc, char **out)
{
    xmlBuffer *xbuf = xmlBufferCreate();
    xmlSaveCtxt *save = NULL;
    int ret = -ENOMEM;

    *out = NULL;
    if (!xbuf)
        goto cleanup;
    save = xmlSaveToBuffer(xbuf, "UTF-8", XML_SAVE_NO_DECL);
    if (!save)
        goto cleanup;
    if (xmlSaveDoc(save, doc) < 0) {
        xmlSaveClose(save);
        save = NULL;
        goto cleanup;
    }
    xmlSaveClose(save);
    save = NULL;
    *out = strndup((const char *)xmlBufferContent(xbuf), (size_t)xmlBufferLength(xbuf));
    if (*out)
        ret = 0;

cleanup:
    xmlBufferFree(xbuf);
    return ret;
}

int vpack_domxml_define_rewrite(const char *buf, size_t len, char **out_xml, int *out_level,
                                char **errmsg)
{
    struct ctx c = {0};
    xmlDoc *doc = NULL;
    xmlNode *root, *meta, *el;
    xmlNode **found = NULL;
    size_t nfound = 0, cap = 0;
    char *name = NULL;
    int level = -1, ret;
    char qa[128], qb[128];
    xmlNode *first = NULL;

    *out_xml = NULL;
    *out_level = -1;
    if (errmsg)
        *errmsg = NULL;
    if ((ret = read_doc(&c, buf, len, &doc, &root)) < 0)
        goto cleanup;
    /* The name only makes messages better; libvirt checks it at define. */
    el = first_child(root, "name");
    if (el && (ret = text_of(el, &name)) < 0)
        goto cleanup;
    c.name = name;
    meta = first_child(root, "metadata");

    /* Collect: short forms under <domain> (also a namespaced one there,
     * which libvirt would drop as well), then everything in <metadata>
     * that is a short form or in vpack's namespace. */
    for (int pass = 0; pass < 2; pass++) {
        xmlNode *parent = pass == 0 ? root : meta;
        for (xmlNode *n = parent ? parent->children : NULL; n; n = n->next) {
            bool policy;
            if (n->type != XML_ELEMENT_NODE)
                continue;
            policy = xmlStrEqual(n->name, BAD_CAST VPACK_XML_POLICY_ELEMENT) &&
                     (!n->ns || in_vpack_ns(n));
            if (pass == 1 && in_vpack_ns(n) && !policy) {
                qualified(n, qa, sizeof(qa));
                ret = fail(&c, "<metadata>: <%s>: unknown element in vpack's namespace %s "
                           "(expected <%s>)", qa, VPACK_XML_NS, VPACK_XML_POLICY_ELEMENT);
                goto cleanup;
            }
            if (!policy)
                continue;
            if (nfound == cap) {
                size_t ncap = cap ? cap * 2 : 4;
                xmlNode **grown = realloc(found, ncap * sizeof(*grown));
                if (!grown) {
                    ret = -ENOMEM;
                    goto cleanup;
                }
                found = grown;
                cap = ncap;
            }
            found[nfound++] = n;
        }
    }

    /* Validate every level before touching anything. */
    for (size_t i = 0; i < nfound; i++) {
        int l = policy_level(&c, found[i], found[i]->parent == meta && meta ? "<metadata>: " : "");
        if (l < 0) {
            ret = -EINVAL;
            goto cleanup;
        }
        if (level >= 0 && l != level) {
            qualified(first, qa, sizeof(qa));
            qualified(found[i], qb, sizeof(qb));
            ret = fail(&c, "conflicting power policy levels: <%s level='%d'> and <%s level='%d'>",
                       qa, level, qb, l);
            goto cleanup;
        }
        if (level < 0) {
            level = l;
            first = found[i];
        }
    }
    if (nfound == 0) {
        *out_xml = strndup(buf, len);
        ret = *out_xml ? 0 : -ENOMEM;
        goto cleanup;
    }

    for (size_t i = 0; i < nfound; i++)
        remove_node(found[i]);
    if (!meta && !(meta = create_metadata(doc, root))) {
        ret = -ENOMEM;
        goto cleanup;
    }
    el = xmlNewDocNode(doc, NULL, BAD_CAST VPACK_XML_POLICY_ELEMENT, NULL);
    if (!el) {
        ret = -ENOMEM;
        goto cleanup;
    }
    {
        char lv[2] = {(char)('0' + level), '\0'};
        xmlNs *ns = xmlNewNs(el, BAD_CAST VPACK_XML_NS, BAD_CAST VPACK_XML_NS_PREFIX);
        if (!ns || !xmlNewProp(el, BAD_CAST VPACK_XML_POLICY_LEVEL, BAD_CAST lv)) {
            xmlFreeNode(el);
            ret = -ENOMEM;
            goto cleanup;
        }
        xmlSetNs(el, ns);
    }
    append_indented(doc, meta, el);
    if ((ret = serialize(doc, out_xml)) < 0)
        goto cleanup;
    *out_level = level;
    ret = 0;

cleanup:
    if (ret == -EINVAL && !c.err)
        ret = -ENOMEM;
    finish_err(&c, ret, errmsg);
    free(found);
    xmlFree(name);
    xmlFreeDoc(doc);
    return ret;
}

/* ---- vpack's record of the guest's request (urn:vpack:request:1) ---- */

/* Appends one pin element; id_attr NULL for the emulator. Returns 0 or -ENOMEM. */
static int request_pin_text(FILE *f, const char *elem, const char *id_attr, unsigned id,
                            const vpack_cpuset *cpus)
{
    char *set = vpack_cpuset_format(cpus);
    int r;

    if (!set)
        return -ENOMEM;
    if (id_attr)
        r = fprintf(f, "<%s %s='%u' cpuset='%s'/>", elem, id_attr, id, set);
    else
        r = fprintf(f, "<%s cpuset='%s'/>", elem, set);
    free(set);
    return r < 0 ? -ENOMEM : 0;
}

char *vpack_domxml_request_format(const struct vpack_domxml *req)
{
    char *out = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&out, &size);
    int r = 0;

    if (!f)
        return NULL;
    if (fprintf(f, "<%s>", VPACK_XML_REQUEST_ELEMENT) < 0)
        r = -ENOMEM;
    for (size_t i = 0; r == 0 && i < req->nvcpupin; i++)
        r = request_pin_text(f, "vcpupin", "vcpu", req->vcpupin[i].vcpu, &req->vcpupin[i].cpus);
    if (r == 0 && req->has_emulatorpin)
        r = request_pin_text(f, "emulatorpin", NULL, 0, &req->emulatorpin);
    for (size_t i = 0; r == 0 && i < req->niothreadpin; i++)
        r = request_pin_text(f, "iothreadpin", "iothread", req->iothreadpin[i].iothread,
                             &req->iothreadpin[i].cpus);
    if (r == 0 && fprintf(f, "</%s>", VPACK_XML_REQUEST_ELEMENT) < 0)
        r = -ENOMEM;
    if (fclose(f) != 0)
        r = -ENOMEM;
    if (r < 0) {
        free(out);
        return NULL;
    }
    return out;
}

static bool in_request_ns(const xmlNode *n)
{
    return n->type == XML_ELEMENT_NODE && n->ns && n->ns->href &&
           xmlStrEqual(n->ns->href, BAD_CAST VPACK_XML_REQUEST_NS);
}

/*
 * A child of the request element: in no namespace (libvirt namespaces only
 * the element itself) or in the request's own.
 */
static bool is_request_el(const xmlNode *n, const char *name)
{
    return n->type == XML_ELEMENT_NODE && (!n->ns || in_request_ns(n)) &&
           xmlStrEqual(n->name, BAD_CAST name);
}

/*
 * Reads the request element el of domain d (its vCPUs and iothreads read)
 * into d's pins, strictly: only <vcpupin vcpu cpuset>, one <emulatorpin
 * cpuset> and <iothreadpin iothread cpuset>, each thread once and one the
 * domain has; nothing else but blanks and comments. vpackd wrote it;
 * anything else was written by someone else, and no pin is taken from it.
 */
static int read_request(struct ctx *c, xmlNode *el, struct vpack_domxml *d)
{
    struct pin_state *s = pin_state_new(d);
    int ret = s ? 0 : -ENOMEM;

    /* In document order, unlike the domain's <cputune>: the first fault is reported. */
    for (xmlNode *p = el->children; p && ret == 0; p = p->next) {
        if (p->type == XML_COMMENT_NODE || is_blank_text(p))
            continue;
        if (p->type != XML_ELEMENT_NODE) {
            ret = fail(c, "unexpected text or markup (only <vcpupin>, <emulatorpin> and "
                       "<iothreadpin> elements belong there)");
        } else if (is_request_el(p, "vcpupin")) {
            ret = read_vcpupin_el(c, p, d, s, true);
        } else if (is_request_el(p, "emulatorpin")) {
            ret = read_emulatorpin_el(c, p, d);
        } else if (is_request_el(p, "iothreadpin")) {
            ret = read_iothreadpin_el(c, p, d, s, true);
        } else {
            char q[128];
            qualified(p, q, sizeof(q));
            ret = fail(c, "<%s>: unknown element (expected <vcpupin>, <emulatorpin> or "
                       "<iothreadpin>)", q);
        }
    }
    if (ret == 0)
        sort_pins(d);
    pin_state_free(s);
    return ret;
}

/*
 * Puts child in parent before anchor, at anchor's indentation
 * ([blank][anchor] becomes [blank][child]["\n" indent][anchor]), or at the
 * end of parent when anchor is NULL.
 */
static void add_indented(xmlDoc *doc, xmlNode *parent, xmlNode *anchor, xmlNode *child)
{
    const char *indent;
    size_t ilen;
    xmlNode *text;

    if (!anchor) {
        append_indented(doc, parent, child);
        return;
    }
    indent = indent_of(anchor, &ilen);
    xmlAddPrevSibling(anchor, child);
    if ((text = newline_text(doc, indent, ilen, 0)))
        xmlAddPrevSibling(anchor, text);
}

/* Adds one pin element to tune, before anchor (NULL: at the end). Returns 0 or -ENOMEM. */
static int add_pin(xmlDoc *doc, xmlNode *tune, xmlNode *anchor, const void *mark,
                   const char *elem, const char *id_attr, unsigned id, const vpack_cpuset *cpus)
{
    char *set = vpack_cpuset_format(cpus), num[16];
    xmlNode *n = set ? xmlNewDocNode(doc, NULL, BAD_CAST elem, NULL) : NULL;
    int r = -ENOMEM;

    snprintf(num, sizeof(num), "%u", id);
    if (n && (!id_attr || xmlNewProp(n, BAD_CAST id_attr, BAD_CAST num)) &&
        xmlNewProp(n, BAD_CAST "cpuset", BAD_CAST set)) {
        n->_private = (void *)mark; /* request_apply() keeps it */
        add_indented(doc, tune, anchor, n);
        n = NULL;
        r = 0;
    }
    xmlFreeNode(n);
    free(set);
    return r;
}

static bool is_pin(const xmlNode *n)
{
    return is_el(n, "vcpupin") || is_el(n, "emulatorpin") || is_el(n, "iothreadpin");
}

/*
 * Puts req's pins in place of every pin of the domain's <cputune>s: where
 * the first <cputune>'s first pin was (at its end when it has none; a new
 * <cputune> after <vcpu> when the domain has none), and removes every
 * element of the request's namespace from <metadata>.
 */
static int request_apply(xmlDoc *doc, xmlNode *root, xmlNode *meta, const struct vpack_domxml *req)
{
    xmlNode *tune = first_child(root, "cputune"), *anchor = NULL, *next, *text;
    const char *indent;
    size_t ilen;
    int r = 0;

    for (xmlNode *p = tune ? tune->children : NULL; p && !anchor; p = p->next)
        if (is_pin(p))
            anchor = p;
    if (!tune && (req->nvcpupin || req->has_emulatorpin || req->niothreadpin)) {
        xmlNode *vcpu = first_child(root, "vcpu");
        if (!(tune = xmlNewDocNode(doc, NULL, BAD_CAST "cputune", NULL)))
            return -ENOMEM;
        if (vcpu) {
            /* [vcpu][blank] becomes [vcpu]["\n" indent][cputune][blank]. */
            indent = indent_of(vcpu, &ilen);
            xmlAddNextSibling(vcpu, tune);
            if ((text = newline_text(doc, indent, ilen, 0)))
                xmlAddPrevSibling(tune, text);
        } else {
            xmlAddChild(root, tune);
        }
    }
    for (size_t i = 0; r == 0 && i < req->nvcpupin; i++)
        r = add_pin(doc, tune, anchor, req, "vcpupin", "vcpu", req->vcpupin[i].vcpu,
                    &req->vcpupin[i].cpus);
    if (r == 0 && req->has_emulatorpin)
        r = add_pin(doc, tune, anchor, req, "emulatorpin", NULL, 0, &req->emulatorpin);
    for (size_t i = 0; r == 0 && i < req->niothreadpin; i++)
        r = add_pin(doc, tune, anchor, req, "iothreadpin", "iothread", req->iothreadpin[i].iothread,
                    &req->iothreadpin[i].cpus);
    if (r < 0)
        return r;
    /* The old pins go: those of every <cputune>, as libvirt reads them all. */
    for (xmlNode *t = root->children; t; t = t->next) {
        if (!is_el(t, "cputune"))
            continue;
        for (xmlNode *p = t->children; p; p = next) {
            next = p->next;
            if (is_pin(p) && p->_private != (void *)req)
                remove_node(p);
        }
    }
    for (xmlNode *p = meta->children; p; p = next) {
        next = p->next;
        if (in_request_ns(p))
            remove_node(p);
    }
    return 0;
}

int vpack_domxml_request_restore(const char *buf, size_t len, char **out_xml, char **errmsg)
{
    struct ctx c = {0};
    struct vpack_domxml *d = NULL;
    xmlDoc *doc = NULL;
    xmlNode *root, *meta, *el = NULL;
    char q[128], where[192];
    int ret;

    *out_xml = NULL;
    if (errmsg)
        *errmsg = NULL;
    if ((ret = read_doc(&c, buf, len, &doc, &root)) < 0)
        goto cleanup;
    /* libvirt keeps the first element of a namespace in <metadata>: that one is the request. */
    meta = vpack__domxml_metadata(root);
    for (xmlNode *n = meta ? meta->children : NULL; n && !el; n = n->next)
        if (in_request_ns(n))
            el = n;
    if (!el) {
        ret = 0;
        goto cleanup;
    }
    if (!(d = calloc(1, sizeof(*d)))) {
        ret = -ENOMEM;
        goto cleanup;
    }
    if ((ret = read_identity(&c, root, &d->name, &d->has_uuid, d->uuid, false)) < 0 ||
        (ret = read_vcpus(&c, root, d)) < 0 || (ret = read_iothreads(&c, root, d)) < 0)
        goto cleanup;
    qualified(el, q, sizeof(q));
    snprintf(where, sizeof(where), "vpack's request in <metadata> (%s): ", VPACK_XML_REQUEST_NS);
    c.where = where;
    if (!xmlStrEqual(el->name, BAD_CAST VPACK_XML_REQUEST_ELEMENT)) {
        ret = fail(&c, "<%s>: unknown element (expected <%s>)", q, VPACK_XML_REQUEST_ELEMENT);
        goto cleanup;
    }
    if ((ret = read_request(&c, el, d)) < 0)
        goto cleanup;
    if ((ret = request_apply(doc, root, meta, d)) < 0 || (ret = serialize(doc, out_xml)) < 0)
        goto cleanup;
    ret = 1;

cleanup:
    if (ret == -EINVAL && !c.err)
        ret = -ENOMEM;
    finish_err(&c, ret, errmsg);
    vpack_domxml_free(d);
    xmlFreeDoc(doc);
    return ret;
}
