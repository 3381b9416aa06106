/* SPDX-License-Identifier: MIT */
/*
 * Power policy rules: the [rule "NAME"] sections of vpackd.conf, which give
 * a level to domains that carry no <vpack:powerpolicy> of their own, such
 * as the domains OpenStack Nova, oVirt or another manager defines and may
 * rewrite at any time. A rule matches a domain by its name (a glob) and/or
 * by a value in another namespace's <metadata> element (Nova writes
 * <nova:instance><nova:flavor name="..."> under
 * http://openstack.org/xmlns/libvirt/nova/1.1); every condition a rule has
 * must hold. The first matching rule in file order gives the level; the
 * domain's own element always wins over every rule; with neither, the
 * configured default level applies. vpackd.conf(5) describes the keys.
 *
 * Pure: rules are built from configuration text (lib/config.c reads the
 * INI sections) and matched against a domain's name and XML buffer.
 *
 * Ownership: struct vpack_rules owns every string in it; release it with
 * vpack_rules_clear(). Error messages are the caller's to free().
 */
#ifndef VPACK_RULES_H
#define VPACK_RULES_H

#include <stdbool.h>
#include <stddef.h>

/* Longest rule name: inih hands out at most 49 characters of a section
 * header, and [rule "NAME"] needs 8 of them. */
#define VPACK_RULE_NAME_MAX 40

/* Where a domain's level comes from. */
enum vpack_level_source {
    VPACK_LEVEL_DEFAULT = 0, /* [policy] default_level: nothing else applies */
    VPACK_LEVEL_DOMAIN,      /* the domain's own <vpack:powerpolicy> */
    VPACK_LEVEL_RULE,        /* a [rule "NAME"] of the configuration */
};

struct vpack_rule {
    char *name;          /* NAME of [rule "NAME"] */
    unsigned line;       /* the line of its section header, for messages */
    int level;           /* 0, 1, 2; -1 until the level key is read, or with level_from */
    char *name_glob;     /* name = GLOB (fnmatch); NULL: any name */
    char *ns;            /* metadata_namespace = URI; NULL: no metadata condition */
    char *path;          /* metadata_path = a/b/@c; NULL: the namespace's element exists */
    char *value_glob;    /* metadata_value = GLOB; NULL: what the path names exists */
    char *level_path;    /* level_from = PATH: the level is the text of what it names
                          * in the rule's namespace (the rule matches only where it
                          * names something); NULL: the level key gives it */
};

struct vpack_rules {
    unsigned n;
    struct vpack_rule *v; /* in file order: the first that matches wins */
};

/* The level that applies to one domain, and why. */
struct vpack_level {
    int level;
    enum vpack_level_source source;
    const char *rule;    /* with VPACK_LEVEL_RULE, the rule's name (borrowed from the rules) */
};

/* "default", "domain" or "rule": the JSON views' "level_source". */
const char *vpack_level_source_name(enum vpack_level_source source);

/*
 * Parses the section name inih gives for [rule "NAME"]: true (with *is_rule)
 * for every section that starts with the word "rule"; then 0 with name (a
 * buffer of VPACK_RULE_NAME_MAX + 1) filled, or -EINVAL when the header is
 * not exactly `rule "NAME"` with NAME of letters, digits, '.', '_' and '-'.
 */
bool vpack_rule_section(const char *section);
int vpack_rule_section_name(const char *section, char name[VPACK_RULE_NAME_MAX + 1]);

/*
 * Appends a rule with no key set yet. Returns it (owned by rs), or NULL when
 * out of memory. name is copied.
 */
struct vpack_rule *vpack_rules_add(struct vpack_rules *rs, const char *name, unsigned line);
struct vpack_rule *vpack_rules_find(const struct vpack_rules *rs, const char *name);

/*
 * Sets one key of a rule: level, level_from, name, metadata_namespace,
 * metadata_path, metadata_value. A path is steps separated by '/': element
 * local names, each with at most one filter [@NAME="VALUE"] (or 'VALUE'),
 * and an @ATTR last. Returns 0; -EINVAL for an unknown key, a key set twice or
 * a bad value, with *errmsg (caller frees) saying which and why; -ENOMEM.
 */
int vpack_rule_set(struct vpack_rule *r, const char *key, const char *value, char **errmsg);

/*
 * Checks that a rule is complete: it has a level and at least one condition,
 * a metadata_path has its namespace and a metadata_value its path. Returns 0
 * or -EINVAL with *errmsg (caller frees; without the rule's name or line).
 */
int vpack_rule_check(const struct vpack_rule *r, char **errmsg);

/*
 * Whether a rule matches on, or takes its level from, a field of Nova's
 * metadata that the tenant chooses, not the operator: the instance's
 * display name (<nova:name>), the owner's names (<nova:owner>), an image's
 * properties (<nova:image>: whoever uploads the image sets them). Such a
 * rule lets every tenant choose their own level. Returns the field in words,
 * or NULL (also for the flavor, which the operator defines).
 */
const char *vpack_rule_tenant_field(const struct vpack_rule *r);

/* A deep copy into *dst (whatever it held is not freed). Returns 0 or -ENOMEM. */
int vpack_rules_copy(struct vpack_rules *dst, const struct vpack_rules *src);
void vpack_rules_clear(struct vpack_rules *rs);

/*
 * The level of the domain `name` whose XML is len bytes of xml (the live
 * definition; no NUL needed). own_level is the level of the domain's own
 * element (vpack_domxml's level: -1 without one); it always wins, and then
 * the XML is not read. Otherwise the first rule that matches gives the
 * level, else default_level does. The XML is parsed only when a rule with a
 * metadata condition is reached. Returns 0 with *out, or -EINVAL (XML that
 * cannot be read, with *errmsg as vpack_domxml_parse() words it, or a
 * level_from whose text is not a level, with *errmsg naming the rule; *out
 * is then the default) or -ENOMEM.
 */
int vpack_rules_resolve(const struct vpack_rules *rs, int own_level, int default_level,
                        const char *name, const char *xml, size_t len, struct vpack_level *out,
                        char **errmsg);

#endif
