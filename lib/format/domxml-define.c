// SPDX-License-Identifier: MIT
/*
 * The rewrites that edit a domain document and write it back:
 * vpack_domxml_define_rewrite() (`vpackctl define`: the power policy moved
 * into <metadata>) and the guest's own pins kept by vpackd in <metadata>
 * (vpack_domxml_request_format(), vpack_domxml_request_restore()). They
 * read with domxml.c's helpers (domxml-priv.h) and keep the document's
 * indentation where they add or remove elements.
 */
#include "vpack/domxml.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/tree.h>
#include <libxml/xmlsave.h>

#include "domxml-priv.h"

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
        if (!vpack__domxml_is_blank((char)*p))
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
        if (vpack__domxml_is_el(n, "name") || vpack__domxml_is_el(n, "uuid") ||
            vpack__domxml_is_el(n, "genid") || vpack__domxml_is_el(n, "title") ||
            vpack__domxml_is_el(n, "description"))
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
    struct domxml_ctx c = {0};
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
    if ((ret = vpack__domxml_load(&c, buf, len, &doc, &root)) < 0)
        goto cleanup;
    /* The name only makes messages better; libvirt checks it at define. */
    el = vpack__domxml_first_child(root, "name");
    if (el && (ret = vpack__domxml_text_of(el, &name)) < 0)
        goto cleanup;
    c.name = name;
    meta = vpack__domxml_first_child(root, "metadata");

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
                     (!n->ns || vpack__domxml_in_vpack_ns(n));
            if (pass == 1 && vpack__domxml_in_vpack_ns(n) && !policy) {
                vpack__domxml_qualified(n, qa, sizeof(qa));
                ret = vpack__domxml_fail(&c, "<metadata>: <%s>: unknown element in vpack's "
                                         "namespace %s (expected <%s>)", qa, VPACK_XML_NS,
                                         VPACK_XML_POLICY_ELEMENT);
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
        int l = vpack__domxml_policy_level(&c, found[i],
                                           found[i]->parent == meta && meta ? "<metadata>: " : "");
        if (l < 0) {
            ret = -EINVAL;
            goto cleanup;
        }
        if (level >= 0 && l != level) {
            vpack__domxml_qualified(first, qa, sizeof(qa));
            vpack__domxml_qualified(found[i], qb, sizeof(qb));
            ret = vpack__domxml_fail(
                &c, "conflicting power policy levels: <%s level='%d'> and <%s level='%d'>", qa,
                level, qb, l);
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

/* The public functions' cleanup tails free their own locals: alike in shape only. */
cleanup:
    ret = vpack__domxml_finish_err(&c, ret, errmsg);
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
static int read_request(struct domxml_ctx *c, xmlNode *el, struct vpack_domxml *d)
{
    struct domxml_pins *s = vpack__domxml_pins_new(d);
    int ret = s ? 0 : -ENOMEM;

    /* In document order, unlike the domain's <cputune>: the first fault is reported. */
    for (xmlNode *p = el->children; p && ret == 0; p = p->next) {
        if (p->type == XML_COMMENT_NODE || is_blank_text(p))
            continue;
        if (p->type != XML_ELEMENT_NODE) {
            ret = vpack__domxml_fail(c,
                                     "unexpected text or markup (only <vcpupin>, <emulatorpin> and "
                                     "<iothreadpin> elements belong there)");
        } else if (is_request_el(p, "vcpupin")) {
            ret = vpack__domxml_read_pin_vcpu(c, p, d, s, true);
        } else if (is_request_el(p, "emulatorpin")) {
            ret = vpack__domxml_read_pin_emulator(c, p, d);
        } else if (is_request_el(p, "iothreadpin")) {
            ret = vpack__domxml_read_pin_iothread(c, p, d, s, true);
        } else {
            char q[128];
            vpack__domxml_qualified(p, q, sizeof(q));
            ret = vpack__domxml_fail(c,
                                     "<%s>: unknown element (expected <vcpupin>, <emulatorpin> or "
                                     "<iothreadpin>)",
                                     q);
        }
    }
    if (ret == 0)
        vpack__domxml_sort_pins(d);
    vpack__domxml_pins_free(s);
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
    return vpack__domxml_is_el(n, "vcpupin") || vpack__domxml_is_el(n, "emulatorpin") ||
           vpack__domxml_is_el(n, "iothreadpin");
}

/*
 * Puts req's pins in place of every pin of the domain's <cputune>s: where
 * the first <cputune>'s first pin was (at its end when it has none; a new
 * <cputune> after <vcpu> when the domain has none), and removes every
 * element of the request's namespace from <metadata>.
 */
static int request_apply(xmlDoc *doc, xmlNode *root, xmlNode *meta, const struct vpack_domxml *req)
{
    xmlNode *tune = vpack__domxml_first_child(root, "cputune"), *anchor = NULL, *next, *text;
    const char *indent;
    size_t ilen;
    int r = 0;

    for (xmlNode *p = tune ? tune->children : NULL; p && !anchor; p = p->next)
        if (is_pin(p))
            anchor = p;
    if (!tune && (req->nvcpupin || req->has_emulatorpin || req->niothreadpin)) {
        xmlNode *vcpu = vpack__domxml_first_child(root, "vcpu");
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
        if (!vpack__domxml_is_el(t, "cputune"))
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
    struct domxml_ctx c = {0};
    struct vpack_domxml *d = NULL;
    xmlDoc *doc = NULL;
    xmlNode *root, *meta, *el = NULL;
    char q[128], where[192];
    int ret;

    *out_xml = NULL;
    if (errmsg)
        *errmsg = NULL;
    if ((ret = vpack__domxml_load(&c, buf, len, &doc, &root)) < 0)
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
    if ((ret = vpack__domxml_read_identity(&c, root, &d->name, &d->has_uuid, d->uuid, false)) < 0 ||
        (ret = vpack__domxml_read_vcpus(&c, root, d)) < 0 ||
        (ret = vpack__domxml_read_iothreads(&c, root, d)) < 0)
        goto cleanup;
    vpack__domxml_qualified(el, q, sizeof(q));
    snprintf(where, sizeof(where), "vpack's request in <metadata> (%s): ", VPACK_XML_REQUEST_NS);
    c.where = where;
    if (!xmlStrEqual(el->name, BAD_CAST VPACK_XML_REQUEST_ELEMENT)) {
        ret = vpack__domxml_fail(&c, "<%s>: unknown element (expected <%s>)", q,
                                 VPACK_XML_REQUEST_ELEMENT);
        goto cleanup;
    }
    if ((ret = read_request(&c, el, d)) < 0)
        goto cleanup;
    if ((ret = request_apply(doc, root, meta, d)) < 0 || (ret = serialize(doc, out_xml)) < 0)
        goto cleanup;
    ret = 1;

cleanup:
    ret = vpack__domxml_finish_err(&c, ret, errmsg);
    vpack_domxml_free(d);
    xmlFreeDoc(doc);
    return ret;
}
