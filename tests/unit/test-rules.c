// SPDX-License-Identifier: MIT
/*
 * Power policy rules (lib/rules.c) on domain XML: Nova's real metadata
 * blocks ($VPACK_FIXTURES/nova, copied from Nova's own tests, and a domain
 * in their shape with a vpack:level extra spec), [@name="..."] filters and
 * level_from, name globs,
 * namespaces matched by URI and not by prefix, attributes against text,
 * first match wins, the domain's own element wins, and XML that cannot be
 * read. The rules come from configuration text, as vpackd reads them.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "host.h"
#include "vpack/config.h"
#include "vpack/domxml.h"
#include "vpack/rules.h"

#define NOVA_NS "http://openstack.org/xmlns/libvirt/nova/1.1"

/* One of Nova's metadata blocks, as its tests have it. */
static char *nova_block(const char *file)
{
    const char *dir = getenv("VPACK_FIXTURES");
    char path[4096], *buf = NULL;
    size_t len;
    if (!dir || !*dir)
        fail_msg("VPACK_FIXTURES is not set (run the test through meson)");
    snprintf(path, sizeof(path), "%s/nova/%s", dir, file);
    int r = vpack_host_read_file(NULL, path, 1 << 20, &buf, &len);
    if (r < 0)
        fail_msg("cannot read %s: %s", path, strerror(-r));
    return buf;
}

/* A domain named name with meta inside its <metadata> (NULL: none). */
static char *domain(const char *name, const char *meta)
{
    char *xml = NULL;
    int n;
    if (meta)
        n = asprintf(&xml, "<domain type='kvm'>\n  <name>%s</name>\n  <memory>131072</memory>\n"
                     "  <vcpu>2</vcpu>\n  <metadata>\n%s  </metadata>\n</domain>\n", name, meta);
    else
        n = asprintf(&xml, "<domain type='kvm'><name>%s</name><vcpu>2</vcpu></domain>", name);
    assert_true(n > 0);
    return xml;
}

static void rules_parse(struct vpack_config *c, const char *text)
{
    char *err = NULL;
    assert_int_equal(vpack_config_init(c), 0);
    if (vpack_config_parse(c, text, &err) != 0)
        fail_msg("configuration refused: %s\n%s", err ? err : "?", text);
}

/*
 * The level xml gets from rules (a configuration text): checks its level
 * and the rule's name (NULL: the default applies). own_level is the
 * domain's own, as the domain-XML reader sees it.
 */
static void expect(const char *rules, const char *name, const char *xml, int level,
                   const char *rule)
{
    struct vpack_config c;
    struct vpack_domxml *d = NULL;
    struct vpack_level lv;
    char *err = NULL;

    rules_parse(&c, rules);
    assert_int_equal(vpack_domxml_parse(xml, strlen(xml), &d, &err), 0);
    assert_int_equal(vpack_rules_resolve(&c.rules, d->level, c.policy.default_level, name, xml,
                                         strlen(xml), &lv, &err),
                     0);
    assert_null(err);
    if (lv.level != level || (rule ? !lv.rule || strcmp(lv.rule, rule) : lv.rule != NULL))
        fail_msg("%s: level %d from %s (rule %s), expected %d from rule %s\nrules:\n%s", name,
                 lv.level, vpack_level_source_name(lv.source), lv.rule ? lv.rule : "-", level,
                 rule ? rule : "-", rules);
    assert_int_equal(lv.source, d->level >= 0 ? VPACK_LEVEL_DOMAIN
                                : rule       ? VPACK_LEVEL_RULE
                                             : VPACK_LEVEL_DEFAULT);
    vpack_domxml_free(d);
    vpack_config_clear(&c);
}

/* One rule r with the metadata condition NS, PATH and VALUE. */
static char *meta_rule(const char *ns, const char *path, const char *value)
{
    char *text = NULL;
    int n = asprintf(&text,
                     "[rule \"r\"]\nlevel = 2\nmetadata_namespace = %s\n%s%s%s%s%s", ns,
                     path ? "metadata_path = " : "", path ? path : "", path ? "\n" : "",
                     value ? "metadata_value = " : "", value ? value : "");
    assert_true(n > 0);
    return text;
}

/* Does the rule (ns, path, value) match xml? */
static void expect_meta(const char *xml, const char *ns, const char *path, const char *value,
                        bool match)
{
    char *text = meta_rule(ns, path, value);
    expect(text, "instance-00000001", xml, match ? 2 : 0, match ? "r" : NULL);
    free(text);
}

static void test_nova_flavor(void **state)
{
    (void)state;
    char *block = nova_block("instance-flavor-extra-specs.xml");
    char *xml = domain("instance-00000001", block);

    /* The case: the flavor's name attribute. */
    expect_meta(xml, NOVA_NS, "instance/flavor/@name", "m1.lowgravity", true);
    expect_meta(xml, NOVA_NS, "instance/flavor/@name", "m1.*", true);
    expect_meta(xml, NOVA_NS, "instance/flavor/@name", "m2.*", false);
    expect_meta(xml, NOVA_NS, "instance/flavor/@name", "M1.LOWGRAVITY", false);
    /* Without a value: the attribute, the element, the namespace exist. */
    expect_meta(xml, NOVA_NS, "instance/flavor/@name", NULL, true);
    expect_meta(xml, NOVA_NS, "instance/flavor/@disk", NULL, false);
    expect_meta(xml, NOVA_NS, "instance/flavor", NULL, true);
    expect_meta(xml, NOVA_NS, NULL, NULL, true);
    /* Text of an element, blanks around it ignored; an attribute is not an element. */
    expect_meta(xml, NOVA_NS, "instance/flavor/vcpus", "8", true);
    expect_meta(xml, NOVA_NS, "instance/flavor/vcpus", "[4-8]", true);
    expect_meta(xml, NOVA_NS, "instance/flavor/name", NULL, false);
    expect_meta(xml, NOVA_NS, "instance/name", "moonbuggy", true);
    expect_meta(xml, NOVA_NS, "instance/name/@name", NULL, false);
    expect_meta(xml, NOVA_NS, "instance/owner/project", "moonshot", true);
    expect_meta(xml, NOVA_NS, "instance/owner/project/@uuid", "f241e906-*", true);
    expect_meta(xml, NOVA_NS, "instance/flavor/extraSpecs/extraSpec/@name", "hw_rng:allowed",
                true);
    expect_meta(xml, NOVA_NS, "instance/flavor/extraSpecs/extraSpec", "true", true);
    /* An element's text is all the text below it, as XPath's string(). */
    expect_meta(xml, NOVA_NS, "instance/owner", "*buzz*moonshot*", true);
    /* Repeated elements: any one may match (the second port's third address). */
    expect_meta(xml, NOVA_NS, "instance/ports/port/ip/@address", "1.2.3.4", true);
    expect_meta(xml, NOVA_NS, "instance/ports/port/ip/@address", "1.2.3.5", false);
    /* The path starts with the namespace's element inside <metadata>. */
    expect_meta(xml, NOVA_NS, "flavor/@name", "m1.*", false);
    expect_meta(xml, NOVA_NS, "server/flavor/@name", "m1.*", false);
    /* Another version of Nova's namespace is another namespace. */
    expect_meta(xml, "http://openstack.org/xmlns/libvirt/nova/1.0", "instance/flavor/@name",
                "m1.*", false);
    expect_meta(xml, "urn:other", NULL, NULL, false);
    free(xml);
    free(block);
}

static void test_nova_image(void **state)
{
    (void)state;
    char *block = nova_block("instance-from-image.xml");
    char *xml = domain("instance-00000002", block);

    expect_meta(xml, NOVA_NS, "instance/image/properties/property", "ubuntu", true);
    expect_meta(xml, NOVA_NS, "instance/image/properties/property/@name", "os_type", true);
    expect_meta(xml, NOVA_NS, "instance/image/diskFormat", "raw", true);
    /* <nova:extraSpecs></nova:extraSpecs>: an empty text matches only "" (or "*"). */
    expect_meta(xml, NOVA_NS, "instance/flavor/extraSpecs", "", true);
    expect_meta(xml, NOVA_NS, "instance/flavor/extraSpecs", "*", true);
    expect_meta(xml, NOVA_NS, "instance/flavor/extraSpecs", "?*", false);
    expect_meta(xml, NOVA_NS, "instance/flavor/extraSpecs/extraSpec", NULL, false);
    free(xml);
    free(block);
}

/* The same metadata under other prefixes, or none, is the same. */
static void test_prefixes(void **state)
{
    (void)state;
    static const char *const same[] = {
        "<n:instance xmlns:n='" NOVA_NS "'><n:flavor name='m1.large'/></n:instance>\n",
        "<instance xmlns='" NOVA_NS "'><flavor name='m1.large'/></instance>\n",
        /* Children in no namespace count as the element's own. */
        "<os:instance xmlns:os='" NOVA_NS "'><flavor name='m1.large'/></os:instance>\n",
    };
    static const char *const other[] = {
        /* The prefix nova, bound to another URI. */
        "<nova:instance xmlns:nova='urn:not-nova'><nova:flavor name='m1.large'/></nova:instance>\n",
        /* The flavor in another namespace than the instance. */
        "<nova:instance xmlns:nova='" NOVA_NS "' xmlns:x='urn:x'><x:flavor name='m1.large'/>"
        "</nova:instance>\n",
        /* A namespaced attribute is not the attribute in no namespace. */
        "<nova:instance xmlns:nova='" NOVA_NS "'><nova:flavor nova:name='m1.large'/>"
        "</nova:instance>\n",
        /* Un-namespaced metadata: libvirt drops it. */
        "<instance><flavor name='m1.large'/></instance>\n",
    };
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        char *xml = domain("d", same[i]);
        expect_meta(xml, NOVA_NS, "instance/flavor/@name", "m1.large", true);
        free(xml);
    }
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
        char *xml = domain("d", other[i]);
        expect_meta(xml, NOVA_NS, "instance/flavor/@name", "m1.large", false);
        free(xml);
    }
    /* libvirt keeps the first element of a namespace: only that one counts. */
    char *xml = domain("d", "<a:instance xmlns:a='" NOVA_NS "'><a:flavor name='m1.small'/>"
                            "</a:instance>\n<b:instance xmlns:b='" NOVA_NS "'>"
                            "<b:flavor name='m1.large'/></b:instance>\n");
    expect_meta(xml, NOVA_NS, "instance/flavor/@name", "m1.small", true);
    expect_meta(xml, NOVA_NS, "instance/flavor/@name", "m1.large", false);
    free(xml);
    /* ... and only in the first <metadata>. */
    xml = strdup("<domain><name>d</name><metadata/><metadata><n:instance xmlns:n='" NOVA_NS
                 "'/></metadata></domain>");
    assert_non_null(xml);
    expect_meta(xml, NOVA_NS, NULL, NULL, false);
    free(xml);
}

static void test_names_and_order(void **state)
{
    (void)state;
    char *block = nova_block("instance-flavor-extra-specs.xml");
    char *nova = domain("instance-0000002a", block);
    char *plain = domain("web-1", NULL);
    const char *rules = "[policy]\n"
                        "default_level = 1\n"
                        "[rule \"batch\"]\n"
                        "name = batch-*\n"
                        "level = 0\n"
                        "[rule \"nova-lowgravity\"]\n"
                        "level = 2\n"
                        "metadata_namespace = " NOVA_NS "\n"
                        "metadata_path = instance/flavor/@name\n"
                        "metadata_value = m1.lowgravity\n"
                        "[rule \"nova-any\"]\n"
                        "level = 0\n"
                        "metadata_namespace = " NOVA_NS "\n"
                        "[rule \"web\"]\n"
                        "name = web-[0-9]*\n"
                        "level = 2\n"
                        "[rule \"web-again\"]\n"
                        "name = web-*\n"
                        "level = 0\n"
                        "[rule \"both\"]\n"
                        "name = db-*\n"
                        "level = 2\n"
                        "metadata_namespace = " NOVA_NS "\n";

    /* First match wins: nova-lowgravity before nova-any. */
    expect(rules, "instance-0000002a", nova, 2, "nova-lowgravity");
    /* A name rule before it wins over it. */
    char *batch = domain("batch-7", block);
    expect(rules, "batch-7", batch, 0, "batch");
    /* web before web-again. */
    expect(rules, "web-1", plain, 2, "web");
    char *webx = domain("web-x", NULL);
    expect(rules, "web-x", webx, 0, "web-again");
    /* A rule with a name and a metadata condition needs both. */
    char *db_plain = domain("db-1", NULL), *db_nova = domain("db-1", "<x:instance xmlns:x='"
                                                             NOVA_NS "'/>\n");
    expect(rules, "db-1", db_plain, 1, NULL);
    expect(rules, "db-1", db_nova, 0, "nova-any");
    /* Globs match the whole name, case and all. */
    char *upper = domain("WEB-1", NULL), *pre = domain("my-web-1", NULL);
    expect(rules, "WEB-1", upper, 1, NULL);
    expect(rules, "my-web-1", pre, 1, NULL);

    free(pre);
    free(upper);
    free(db_nova);
    free(db_plain);
    free(webx);
    free(batch);
    free(plain);
    free(nova);
    free(block);
}

/* The domain's own element always wins, whatever its level and the rules'. */
static void test_own_element_wins(void **state)
{
    (void)state;
    char *block = nova_block("instance-flavor-extra-specs.xml");
    const char *rules = "[rule \"nova\"]\nlevel = 2\nmetadata_namespace = " NOVA_NS "\n"
                        "[rule \"all\"]\nlevel = 2\nname = *\n";
    for (int own = 0; own <= 2; own++) {
        char *meta = NULL, *xml;
        assert_true(asprintf(&meta, "%s<vpack:powerpolicy xmlns:vpack='urn:vpack:powerpolicy:1'"
                             " level='%d'/>\n", block, own) > 0);
        xml = domain("instance-00000001", meta);
        expect(rules, "instance-00000001", xml, own, NULL);
        free(xml);
        free(meta);
    }
    free(block);
}

/* A rule that takes its level from extra spec vpack:level, and a fallback. */
static const char extra_spec_rules[] =
    "[rule \"spec\"]\n"
    "metadata_namespace = " NOVA_NS "\n"
    "level_from = instance/flavor/extraSpecs/extraSpec[@name=\"vpack:level\"]\n"
    "[rule \"rest\"]\nlevel = 1\nname = instance-*\n";

/* xml with the first `from` replaced by `to` (the caller frees). */
static char *replaced(const char *xml, const char *from, const char *to)
{
    const char *at = strstr(xml, from);
    char *out = NULL;
    assert_non_null(at);
    assert_true(asprintf(&out, "%.*s%s%s", (int)(at - xml), xml, to, at + strlen(from)) > 0);
    return out;
}

static void test_nova_extra_spec(void **state)
{
    (void)state;
    char *xml = nova_block("domain-extra-spec-level.xml");
    const char *name = "instance-00000003";

    /* The filter picks one of the repeated <nova:extraSpec>, by exact name. */
    expect_meta(xml, NOVA_NS, "instance/flavor/extraSpecs/extraSpec[@name=\"vpack:level\"]", "2",
                true);
    expect_meta(xml, NOVA_NS, "instance/flavor/extraSpecs/extraSpec[@name='vpack:level']", "2",
                true);
    expect_meta(xml, NOVA_NS, "instance/flavor/extraSpecs/extraSpec[@name=\"vpack:note\"]", "2",
                false);
    expect_meta(xml, NOVA_NS, "instance/flavor/extraSpecs/extraSpec[@name=\"vpack:*\"]", NULL,
                false);
    expect_meta(xml, NOVA_NS, "instance/flavor/extraSpecs/extraSpec[@id=\"vpack:level\"]", NULL,
                false);
    /* A filter on any element step, and an attribute after it. */
    expect_meta(xml, NOVA_NS, "instance/flavor[@name=\"b1.parkable\"]/vcpus", "2", true);
    expect_meta(xml, NOVA_NS, "instance/flavor[@name=\"m1.large\"]/vcpus", NULL, false);
    expect_meta(xml, NOVA_NS, "instance/owner/user[@uuid=\"3472c2a6-de91-4fb5-b618-42bc781ef670\"]",
                "buzz", true);
    expect_meta(xml, NOVA_NS, "instance/flavor[@id=\"5a0c7c1e-3f1d-4d8e-9b7a-2c6d0e9f1a2b\"]/@name",
                "b1.*", true);

    /* level_from: the level is the text; a domain without the spec falls through. */
    expect(extra_spec_rules, name, xml, 2, "spec");
    char *zero = replaced(xml, ">2</nova:extraSpec>", "> 0\n</nova:extraSpec>");
    expect(extra_spec_rules, name, zero, 0, "spec");
    char *none = replaced(xml, "\"vpack:level\"", "\"vpack:other\"");
    expect(extra_spec_rules, name, none, 1, "rest");

    /* Text that is not a level: an error that names the rule and the text. */
    char *bad = replaced(xml, ">2</nova:extraSpec>", ">high</nova:extraSpec>");
    struct vpack_config c;
    struct vpack_level lv;
    char *err = NULL;
    rules_parse(&c, extra_spec_rules);
    assert_int_equal(vpack_rules_resolve(&c.rules, -1, 0, name, bad, strlen(bad), &lv, &err),
                     -EINVAL);
    assert_non_null(err);
    print_message("bad level text: %s\n", err);
    assert_non_null(strstr(err, "rule \"spec\""));
    assert_non_null(strstr(err, "'high'"));
    assert_non_null(strstr(err, "0, 1 or 2"));
    assert_int_equal(lv.source, VPACK_LEVEL_DEFAULT);
    free(err);
    vpack_config_clear(&c);
    free(bad);
    free(none);
    free(zero);
    free(xml);
}

/* A configuration that must be refused with a message holding want. */
static void expect_refused(const char *text, const char *want)
{
    struct vpack_config c;
    char *err = NULL;
    assert_int_equal(vpack_config_init(&c), 0);
    assert_int_equal(vpack_config_parse(&c, text, &err), -EINVAL);
    assert_non_null(err);
    print_message("refused: %s\n", err);
    if (!strstr(err, want))
        fail_msg("message '%s' lacks '%s'", err, want);
    free(err);
    vpack_config_clear(&c);
}

static void test_filter_errors(void **state)
{
    (void)state;
    static const struct {
        const char *path, *want;
    } bad[] = {
        {"instance/flavor/extraSpecs/extraSpec[@name=\"vpack:level\"", "without its closing ']'"},
        {"instance/flavor/extraSpecs/extraSpec[@name=vpack:level]", "is quoted"},
        {"instance/flavor/extraSpecs/extraSpec[@name=\"vpack:level]", "is quoted"},
        {"instance/flavor/extraSpecs/extraSpec[name=\"vpack:level\"]", "an attribute of the element"},
        {"instance/flavor/extraSpecs/extraSpec[@nova:name=\"x\"]", "without prefix"},
        {"instance/flavor/extraSpecs/extraSpec[@name]", "without prefix"},
        {"instance/flavor/@name[@a=\"b\"]", "has no filter"},
        {"instance/flavor/extraSpecs/extraSpec[@name=\"x\"]y", "'y' after 'extraSpec'"},
        {"instance/flavor]", "']' after 'flavor'"},
        {"nova:instance/nova:flavor", "no prefixes"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *text = NULL;
        assert_true(asprintf(&text, "[rule \"r\"]\nlevel = 2\nmetadata_namespace = " NOVA_NS
                             "\nmetadata_path = %s\n", bad[i].path) > 0);
        expect_refused(text, bad[i].want);
        free(text);
        assert_true(asprintf(&text, "[rule \"r\"]\nmetadata_namespace = " NOVA_NS
                             "\nlevel_from = %s\n", bad[i].path) > 0);
        expect_refused(text, bad[i].want);
        free(text);
    }
    /* level and level_from exclude each other; level_from needs the namespace. */
    expect_refused("[rule \"r\"]\nlevel = 2\nmetadata_namespace = urn:x\nlevel_from = a/b\n",
                   "level or level_from, not both");
    expect_refused("[rule \"r\"]\nlevel_from = a/b\nlevel = 2\nmetadata_namespace = urn:x\n",
                   "level or level_from, not both");
    expect_refused("[rule \"r\"]\nlevel_from = a/b\nname = x\n",
                   "level_from needs metadata_namespace");
}

/* Issue 27 item 7: rules on what a Nova tenant chooses are told apart from
 * rules on what the operator defines. */
static void test_tenant_fields(void **state)
{
    static const struct {
        const char *rule;
        const char *field; /* a word of the answer, or NULL */
    } cases[] = {
        {"metadata_path = instance/name\nmetadata_value = batch-*\nlevel = 2", "display name"},
        {"metadata_path = instance/owner/project\nmetadata_value = moonshot\nlevel = 2", "owner"},
        {"metadata_path = instance/owner/user/@uuid\nlevel = 1", "owner"},
        {"level_from = instance/image/properties/property[@name=\"vpack:level\"]", "image"},
        {"metadata_path = instance/image/@uuid\nlevel = 2", "image"},
        {"metadata_path = instance/flavor/@name\nmetadata_value = m1.large*\nlevel = 2", NULL},
        {"level_from = instance/flavor/extraSpecs/extraSpec[@name=\"vpack:level\"]", NULL},
        {"metadata_path = instance/namespace\nlevel = 2", NULL},
        {"metadata_path = instance\nlevel = 2", NULL},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *text = NULL;
        struct vpack_config c;
        assert_true(asprintf(&text, "[rule \"r\"]\nmetadata_namespace = %s\n%s\n", NOVA_NS,
                             cases[i].rule) > 0);
        rules_parse(&c, text);
        assert_int_equal(c.rules.n, 1);
        const char *w = vpack_rule_tenant_field(&c.rules.v[0]);
        if (cases[i].field ? !w || !strstr(w, cases[i].field) : w != NULL)
            fail_msg("%s: '%s', expected %s", cases[i].rule, w ? w : "NULL",
                     cases[i].field ? cases[i].field : "NULL");
        vpack_config_clear(&c);
        free(text);
    }
    /* The same path in another namespace is not Nova's. */
    struct vpack_config c;
    rules_parse(&c, "[rule \"o\"]\nmetadata_namespace = urn:other:1\nmetadata_path = "
                    "instance/name\nlevel = 2\n");
    assert_null(vpack_rule_tenant_field(&c.rules.v[0]));
    vpack_config_clear(&c);
}

static void test_default_and_errors(void **state)
{
    (void)state;
    struct vpack_config c;
    struct vpack_level lv;
    char *err = NULL;
    const char *junk = "<domain><name>x</name><metadata>";

    /* No rule at all, and no metadata. */
    char *xml = domain("x", NULL);
    expect("", "x", xml, 0, NULL);
    expect("[policy]\ndefault_level = 2\n", "x", xml, 2, NULL);
    expect_meta(xml, NOVA_NS, NULL, NULL, false);
    free(xml);

    /* The XML is read only when a metadata rule is reached. */
    rules_parse(&c, "[rule \"n\"]\nlevel = 1\nname = x\n"
                    "[rule \"m\"]\nlevel = 2\nmetadata_namespace = urn:m\n");
    assert_int_equal(vpack_rules_resolve(&c.rules, -1, 0, "x", junk, strlen(junk), &lv, &err), 0);
    assert_int_equal(lv.level, 1);
    assert_string_equal(lv.rule, "n");
    /* Own level: nothing read. */
    assert_int_equal(vpack_rules_resolve(&c.rules, 0, 2, "y", junk, strlen(junk), &lv, &err), 0);
    assert_int_equal(lv.source, VPACK_LEVEL_DOMAIN);
    assert_int_equal(lv.level, 0);
    /* Unreadable XML: an error that says why, and the default. */
    assert_int_equal(vpack_rules_resolve(&c.rules, -1, 1, "y", junk, strlen(junk), &lv, &err),
                     -EINVAL);
    assert_non_null(err);
    print_message("unreadable XML: %s\n", err);
    assert_non_null(strstr(err, "not well-formed"));
    free(err);
    assert_int_equal(lv.source, VPACK_LEVEL_DEFAULT);
    assert_int_equal(lv.level, 1);
    assert_null(lv.rule);
    const char *doctype = "<!DOCTYPE domain [<!ENTITY e 'x'>]><domain><name>y</name></domain>";
    assert_int_equal(vpack_rules_resolve(&c.rules, -1, 0, "y", doctype, strlen(doctype), &lv,
                                         &err),
                     -EINVAL);
    assert_non_null(strstr(err, "DOCTYPE"));
    free(err);
    assert_int_equal(vpack_rules_resolve(&c.rules, -1, 0, "y", "", 0, &lv, NULL), -EINVAL);
    vpack_config_clear(&c);

    assert_string_equal(vpack_level_source_name(VPACK_LEVEL_DOMAIN), "domain");
    assert_string_equal(vpack_level_source_name(VPACK_LEVEL_RULE), "rule");
    assert_string_equal(vpack_level_source_name(VPACK_LEVEL_DEFAULT), "default");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nova_flavor),
        cmocka_unit_test(test_nova_image),
        cmocka_unit_test(test_nova_extra_spec),
        cmocka_unit_test(test_filter_errors),
        cmocka_unit_test(test_prefixes),
        cmocka_unit_test(test_names_and_order),
        cmocka_unit_test(test_own_element_wins),
        cmocka_unit_test(test_default_and_errors),
        cmocka_unit_test(test_tenant_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
