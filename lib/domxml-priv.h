/* SPDX-License-Identifier: MIT */
/*
 * Inside libvpackcore only: the domain-XML reader's document loading, for
 * the other readers of domain XML in lib/ (rules.c), so that every one of
 * them refuses the same documents the same way. Not for the programs:
 * nothing outside lib/ includes libxml2 types through vpack's headers.
 */
#ifndef VPACK_DOMXML_PRIV_H
#define VPACK_DOMXML_PRIV_H

#include <stddef.h>

#include <libxml/tree.h>

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

#endif
