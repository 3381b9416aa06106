// SPDX-License-Identifier: MIT
/*
 * exporter-toolkit's web configuration (vpack/webconfig.h), read with
 * libyaml's document loader: the node tree keeps each node's line for the
 * messages.
 */
#include "vpack/webconfig.h"
#include "vpack/errmsg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

/* Keys of exporter-toolkit's format that vpackd knows and does not implement. */
static const char *const tls_unsupported[] = {
    "cert", "key", "client_allowed_sans", "min_version",
    "max_version", "cipher_suites", "curve_preferences", "prefer_server_cipher_suites",
};

static unsigned line_of(const yaml_node_t *n)
{
    return (unsigned)n->start_mark.line + 1;
}

/* A scalar's text, or NULL when n is not a scalar. YAML's null (~, null, nothing) is "". */
static const char *scalar(const yaml_node_t *n)
{
    if (!n || n->type != YAML_SCALAR_NODE)
        return NULL;
    const char *s = (const char *)n->data.scalar.value;
    if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
        (!strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL")))
        return "";
    return s;
}

static const char *kind(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a list";
    default:
        return "a scalar";
    }
}

/*
 * The keys of mapping m: each a scalar, none twice. Returns 0 or -EINVAL
 * with the message naming where (the mapping's path, "" at the top).
 */
static int check_keys(yaml_document_t *d, yaml_node_t *m, const char *where, char **errmsg)
{
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(d, p->key);
        const char *name = scalar(k);
        if (!name)
            return vpack_errmsg_set(-EINVAL, errmsg, "line %u: %s%sa key is %s, not a name",
                                    line_of(k), where, *where ? ": " : "", kind(k));
        for (yaml_node_pair_t *q = m->data.mapping.pairs.start; q < p; q++)
            if (!strcmp(scalar(yaml_document_get_node(d, q->key)), name))
                return vpack_errmsg_set(-EINVAL, errmsg, "line %u: %s%s%s: given twice (first "
                                        "at line %u)", line_of(k), where, *where ? "." : "", name,
                                        line_of(yaml_document_get_node(d, q->key)));
    }
    return 0;
}

/* A string value: a scalar, copied to *out. */
static int string_value(yaml_node_t *v, const char *path, char **out, char **errmsg)
{
    const char *s = scalar(v);
    if (!s)
        return vpack_errmsg_set(-EINVAL, errmsg, "line %u: %s: expected a string, got %s",
                                line_of(v), path, kind(v));
    free(*out);
    if (!(*out = strdup(s)))
        return -ENOMEM;
    return 0;
}

/* The toolkit's client_auth_type, of which vpackd does NoClientCert and RequireAndVerifyClientCert. */
static int client_auth_type(yaml_node_t *v, struct vpack_webconfig *w, char **errmsg)
{
    static const char *const go_types[] = {"RequestClientCert", "RequireAnyClientCert",
                                           "VerifyClientCertIfGiven"};
    const char *t = scalar(v);
    if (!t)
        return vpack_errmsg_set(-EINVAL, errmsg, "line %u: tls_server_config.client_auth_type: "
                                "expected a string, got %s", line_of(v), kind(v));
    if (!*t || !strcmp(t, "NoClientCert")) {
        w->require_client_cert = false;
        return 0;
    }
    if (!strcmp(t, "RequireAndVerifyClientCert")) {
        w->require_client_cert = true;
        return 0;
    }
    for (size_t i = 0; i < sizeof(go_types) / sizeof(*go_types); i++)
        if (!strcmp(t, go_types[i]))
            return vpack_errmsg_set(-EINVAL, errmsg, "line %u: tls_server_config.client_auth_type: "
                                    "%s is not supported by vpackd (NoClientCert or "
                                    "RequireAndVerifyClientCert)", line_of(v), t);
    return vpack_errmsg_set(-EINVAL, errmsg, "line %u: tls_server_config.client_auth_type: "
                            "unknown type '%s' (NoClientCert or RequireAndVerifyClientCert)",
                            line_of(v), t);
}

/*
 * Each level of the file checks its mapping and keys, then walks its pairs:
 * alike in shape with the top level's walk, not in what the keys mean.
 */
static int tls_config(yaml_document_t *d, yaml_node_t *m, struct vpack_webconfig *w,
                      char **errmsg)
{
    int r;
    if (m->type != YAML_MAPPING_NODE)
        return vpack_errmsg_set(-EINVAL, errmsg,
                                "line %u: tls_server_config: expected a mapping, got %s",
                                line_of(m), kind(m));
    if ((r = check_keys(d, m, "tls_server_config", errmsg)) < 0)
        return r;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(d, p->key), *v = yaml_document_get_node(d, p->value);
        const char *name = scalar(k);
        if (!strcmp(name, "cert_file"))
            r = string_value(v, "tls_server_config.cert_file", &w->cert_file, errmsg);
        else if (!strcmp(name, "key_file"))
            r = string_value(v, "tls_server_config.key_file", &w->key_file, errmsg);
        else if (!strcmp(name, "client_ca_file"))
            r = string_value(v, "tls_server_config.client_ca_file", &w->client_ca_file, errmsg);
        else if (!strcmp(name, "client_auth_type"))
            r = client_auth_type(v, w, errmsg);
        else {
            for (size_t i = 0; i < sizeof(tls_unsupported) / sizeof(*tls_unsupported); i++)
                if (!strcmp(name, tls_unsupported[i]))
                    return vpack_errmsg_set(-EINVAL, errmsg,
                                            "line %u: tls_server_config.%s: not supported by "
                                            "vpackd (cert_file, key_file, client_auth_type, "
                                            "client_ca_file)",
                                            line_of(k), name);
            return vpack_errmsg_set(-EINVAL, errmsg,
                                    "line %u: tls_server_config.%s: unknown key (cert_file, "
                                    "key_file, client_auth_type, client_ca_file)",
                                    line_of(k), name);
        }
        if (r < 0)
            return r;
    }
    const char *missing = !w->cert_file || !*w->cert_file ? "cert_file"
                          : !w->key_file || !*w->key_file ? "key_file"
                                                          : NULL;
    if (missing)
        return vpack_errmsg_set(-EINVAL, errmsg, "line %u: tls_server_config: %s is missing",
                                line_of(m), missing);
    bool ca = w->client_ca_file && *w->client_ca_file;
    if (w->require_client_cert && !ca)
        return vpack_errmsg_set(-EINVAL, errmsg, "line %u: tls_server_config: client_ca_file "
                                "is missing (client_auth_type RequireAndVerifyClientCert "
                                "verifies against it)", line_of(m));
    if (ca && !w->require_client_cert)
        return vpack_errmsg_set(-EINVAL, errmsg, "line %u: tls_server_config: client_ca_file "
                                "without client_auth_type RequireAndVerifyClientCert",
                                line_of(m));
    w->tls = true;
    return 0;
}

bool vpack_webconfig_is_bcrypt(const char *h)
{
    static const char b64[] = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    if (strlen(h) != 60 || h[0] != '$' || h[1] != '2' || !strchr("aby", h[2]) || !h[2] ||
        h[3] != '$' || h[6] != '$' || h[4] < '0' || h[4] > '3' || h[5] < '0' || h[5] > '9')
        return false;
    int cost = (h[4] - '0') * 10 + (h[5] - '0');
    if (cost < 4 || cost > 31)
        return false;
    return strspn(h + 7, b64) == 53;
}

static int users(yaml_document_t *d, yaml_node_t *m, struct vpack_webconfig *w, char **errmsg)
{
    int r;
    if (m->type == YAML_SCALAR_NODE && !*scalar(m))
        return 0; /* basic_auth_users: (nothing): no users */
    if (m->type != YAML_MAPPING_NODE)
        return vpack_errmsg_set(-EINVAL, errmsg,
                                "line %u: basic_auth_users: expected a mapping of user names "
                                "to bcrypt hashes, got %s", line_of(m), kind(m));
    if ((r = check_keys(d, m, "basic_auth_users", errmsg)) < 0)
        return r;
    size_t n = (size_t)(m->data.mapping.pairs.top - m->data.mapping.pairs.start);
    if (!n)
        return 0;
    if (!(w->users = calloc(n, sizeof(*w->users))))
        return -ENOMEM;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(d, p->key), *v = yaml_document_get_node(d, p->value);
        const char *name = scalar(k), *hash = scalar(v);
        if (!*name || strchr(name, ':'))
            return vpack_errmsg_set(-EINVAL, errmsg, "line %u: basic_auth_users: user name "
                                    "'%s' is empty or has ':' (basic authentication cannot "
                                    "send it)", line_of(k), name);
        if (!hash)
            return vpack_errmsg_set(-EINVAL, errmsg, "line %u: basic_auth_users.%s: expected "
                                    "a bcrypt hash, got %s", line_of(v), name, kind(v));
        if (!vpack_webconfig_is_bcrypt(hash))
            return vpack_errmsg_set(-EINVAL, errmsg, "line %u: basic_auth_users.%s: not a "
                                    "bcrypt hash ($2y$, $2b$ or $2a$, cost 04 to 31, 60 "
                                    "characters; htpasswd -nbB or mkpasswd -m bcrypt make one)",
                                    line_of(v), name);
        struct vpack_webconfig_user *u = &w->users[w->nusers];
        if (!(u->name = strdup(name)) || !(u->hash = strdup(hash))) {
            free(u->name);
            u->name = NULL;
            return -ENOMEM;
        }
        w->nusers++;
    }
    return 0;
}

static int document(yaml_document_t *d, struct vpack_webconfig *w, char **errmsg)
{
    yaml_node_t *root = yaml_document_get_root_node(d);
    int r;
    if (!root || (root->type == YAML_SCALAR_NODE && !*scalar(root)))
        return 0; /* an empty file */
    if (root->type != YAML_MAPPING_NODE)
        return vpack_errmsg_set(-EINVAL, errmsg, "line %u: expected a mapping "
                                "(tls_server_config, basic_auth_users), got %s",
                                line_of(root), kind(root));
    if ((r = check_keys(d, root, "", errmsg)) < 0)
        return r;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(d, p->key), *v = yaml_document_get_node(d, p->value);
        const char *name = scalar(k);
        if (!strcmp(name, "tls_server_config"))
            r = tls_config(d, v, w, errmsg);
        else if (!strcmp(name, "basic_auth_users"))
            r = users(d, v, w, errmsg);
        else if (!strcmp(name, "http_server_config"))
            r = vpack_errmsg_set(-EINVAL, errmsg, "line %u: http_server_config: not supported "
                                 "by vpackd (HTTP/1.1 only, no extra headers)", line_of(k));
        else
            r = vpack_errmsg_set(-EINVAL, errmsg, "line %u: %s: unknown key "
                                 "(tls_server_config, basic_auth_users)", line_of(k), name);
        if (r < 0)
            return r;
    }
    return 0;
}

int vpack_webconfig_parse(struct vpack_webconfig *w, const char *text, size_t len,
                          char **errmsg)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    int r;

    memset(w, 0, sizeof(*w));
    if (errmsg)
        *errmsg = NULL;
    if (!yaml_parser_initialize(&parser))
        return vpack_errmsg_set(-ENOMEM, errmsg, "out of memory");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        if (parser.error == YAML_MEMORY_ERROR)
            r = vpack_errmsg_set(-ENOMEM, errmsg, "out of memory");
        else
            r = vpack_errmsg_set(-EINVAL, errmsg, "line %zu: not YAML: %s%s%s",
                                 parser.problem_mark.line + 1,
                                 parser.problem ? parser.problem : "syntax error",
                                 parser.context ? " " : "", parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return r;
    }
    r = document(&doc, w, errmsg);
    /* A second document ("---") would be ignored silently: refuse it. */
    if (r == 0) {
        yaml_document_t more;
        if (!yaml_parser_load(&parser, &more))
            r = vpack_errmsg_set(-EINVAL, errmsg, "line %zu: not YAML: %s",
                                 parser.problem_mark.line + 1,
                                 parser.problem ? parser.problem : "syntax error");
        else {
            if (yaml_document_get_root_node(&more))
                r = vpack_errmsg_set(-EINVAL, errmsg, "line %zu: a second YAML document",
                                     more.start_mark.line + 1);
            yaml_document_delete(&more);
        }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (r == -ENOMEM && errmsg && !*errmsg)
        vpack_errmsg_set(r, errmsg, "out of memory");
    if (r < 0)
        vpack_webconfig_clear(w);
    return r;
}

void vpack_webconfig_clear(struct vpack_webconfig *w)
{
    free(w->cert_file);
    free(w->key_file);
    free(w->client_ca_file);
    for (unsigned i = 0; i < w->nusers; i++) {
        free(w->users[i].name);
        free(w->users[i].hash);
    }
    free(w->users);
    memset(w, 0, sizeof(*w));
}
