/* SPDX-License-Identifier: MIT */
/*
 * Inside libvpackcore only: what the domain-XML reader (domxml.c) shares
 * with the files that read the same documents or the same record, so that
 * every one of them refuses the same things the same way with the same
 * words:
 *  - domrecord.c (the record's JSON) sorts and checks as the reader does;
 *  - domxml-define.c (the define rewrite, the guest's request) reads
 *    through the reader's context, messages and pin readers;
 *  - lib/rules.c only loads documents (vpack__domxml_read_doc()).
 * Not for the programs: nothing outside lib/ includes libxml2 types
 * through vpack's headers.
 */
#ifndef VPACK_DOMXML_PRIV_H
#define VPACK_DOMXML_PRIV_H

#include <stdbool.h>
#include <stddef.h>

#include <libxml/tree.h>

#include "vpack/domxml.h"

/*
 * Parses a domain document exactly as vpack_domxml_parse() starts: no
 * network, no DTD, no DOCTYPE, at most VPACK_DOMXML_MAX_SIZE bytes, root
 * <domain>. Returns 0 with *doc (free with xmlFreeDoc()) and *root, or
 * -EINVAL with *errmsg (caller frees; "domain XML: DETAIL") or -ENOMEM.
 */
int vpack__domxml_read_doc(const char *buf, size_t len, xmlDoc **doc, xmlNode **root,
                           char **errmsg);

/* The <metadata> element libvirt keeps (the first, in no namespace); NULL when none. */
xmlNode *vpack__domxml_metadata(xmlNode *root);

/* ---- The reader's context and messages ---- */

/* One reading of one document: who it is for messages, and its first error. */
struct domxml_ctx {
    const char *name; /* the domain's name for messages, once known */
    const char *where; /* what is being read, after the name in messages ("" or NULL: the domain) */
    char *err;        /* the first error, already sanitized */
};

/* Records the first error, prefixed with the domain's name, and returns
 * -EINVAL. */
__attribute__((format(printf, 2, 3)))
int vpack__domxml_fail(struct domxml_ctx *c, const char *fmt, ...);
/* Hands out c's error (or frees it) at the end of a public function.
 * Returns ret, but -ENOMEM for an -EINVAL with no message in c (the
 * message itself could not be allocated): `ret = ...(&c, ret, errmsg);`. */
int vpack__domxml_finish_err(struct domxml_ctx *c, int ret, char **errmsg);
/* vpack__domxml_read_doc() with the message in c. */
int vpack__domxml_load(struct domxml_ctx *c, const char *buf, size_t len, xmlDoc **docp,
                       xmlNode **rootp);

/* ---- Small readers mirroring libvirt's helpers ---- */

/* An element with this local name in no namespace, as libvirt's XPath
 * name tests match. */
bool vpack__domxml_is_el(const xmlNode *n, const char *name);
xmlNode *vpack__domxml_first_child(xmlNode *parent, const char *name);
/* XPath's string() of n, NULL when empty (xmlFree() it); -ENOMEM only from libxml2. */
int vpack__domxml_text_of(xmlNode *n, char **out);
/* An XML blank: space, tab, newline, carriage return. */
bool vpack__domxml_is_blank(char ch);
/* An element in vpack's policy namespace (VPACK_XML_NS). */
bool vpack__domxml_in_vpack_ns(const xmlNode *n);
/* "vpack:powerpolicy" or "powerpolicy", for messages. */
void vpack__domxml_qualified(const xmlNode *n, char *buf, size_t len);
/* A policy element's level attribute: the level, or -EINVAL (message in c). */
int vpack__domxml_policy_level(struct domxml_ctx *c, xmlNode *n, const char *where);
/* libvirt's virUUIDParse(): 0 with the canonical form in out, or -EINVAL. */
int vpack__domxml_uuid_canon(const char *s, char out[37]);

/* ---- Parts of the domain ---- */

/* <name> and <uuid>; sets c->name. strict_uuid false: a bad uuid is absent. */
int vpack__domxml_read_identity(struct domxml_ctx *c, xmlNode *root, char **name,
                                bool *has_uuid, char uuid[37], bool strict_uuid);
/* <vcpu> and <vcpus> into d, as libvirt's virDomainVcpuParse(). */
int vpack__domxml_read_vcpus(struct domxml_ctx *c, xmlNode *root, struct vpack_domxml *d);
/* <iothreads> and <iothreadids> into d. */
int vpack__domxml_read_iothreads(struct domxml_ctx *c, xmlNode *root, struct vpack_domxml *d);

/* The pins read so far of one document or request: each thread once. */
struct domxml_pins;
struct domxml_pins *vpack__domxml_pins_new(const struct vpack_domxml *d);
void vpack__domxml_pins_free(struct domxml_pins *s);
/*
 * One pin element p into d (unsorted). request: p is from vpack's request,
 * its own stricter format (a thread the domain lacks is an error, not
 * ignored). Return 0 or -EINVAL/-ENOMEM.
 */
int vpack__domxml_read_pin_vcpu(struct domxml_ctx *c, xmlNode *p, struct vpack_domxml *d,
                                struct domxml_pins *s, bool request);
int vpack__domxml_read_pin_emulator(struct domxml_ctx *c, xmlNode *p, struct vpack_domxml *d);
int vpack__domxml_read_pin_iothread(struct domxml_ctx *c, xmlNode *p, struct vpack_domxml *d,
                                    struct domxml_pins *s, bool request);
/* d's pin arrays sorted by thread, as struct vpack_domxml promises. */
void vpack__domxml_sort_pins(struct vpack_domxml *d);

/* qsort()/bsearch() orders of the record's arrays. */
int vpack__domxml_cmp_uint(const void *a, const void *b);
int vpack__domxml_cmp_vcpupin(const void *a, const void *b);
int vpack__domxml_cmp_memnode(const void *a, const void *b);

#endif
