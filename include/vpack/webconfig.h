/* SPDX-License-Identifier: MIT */
/*
 * The web configuration file of the Prometheus exporters (exporter-toolkit's
 * web-configuration.md): TLS and basic authentication for vpackd's metrics
 * endpoint ([metrics] web_config, vpackd.conf(5)). YAML, read with libyaml:
 *
 *   tls_server_config:
 *     cert_file: server.crt     # PEM; relative to the file's directory
 *     key_file: server.key
 *     client_auth_type: RequireAndVerifyClientCert   # optional, with:
 *     client_ca_file: clients.crt
 *   basic_auth_users:
 *     alice: $2y$10$...         # bcrypt
 *
 * Pure: the text in, the settings out; the adapter (adapters/webconfig.c)
 * reads the files and checks the key against the certificate.
 */
#ifndef VPACK_WEBCONFIG_H
#define VPACK_WEBCONFIG_H

#include <stdbool.h>
#include <stddef.h>

struct vpack_webconfig_user {
    char *name;
    char *hash; /* bcrypt: $2a$, $2b$ or $2y$, cost 04 to 31 */
};

struct vpack_webconfig {
    bool tls;         /* tls_server_config given: cert_file and key_file are set */
    char *cert_file;  /* as written (the adapter resolves a relative path) */
    char *key_file;
    /* client_auth_type RequireAndVerifyClientCert: a client certificate that
     * client_ca_file's CAs signed, for TLS web clients, on every request */
    bool require_client_cert;
    char *client_ca_file;
    struct vpack_webconfig_user *users; /* basic_auth_users, in file order */
    unsigned nusers;
};

/*
 * Parses text (len bytes; need not be NUL-terminated) into w (zeroed
 * first). Refused, with -EINVAL and *errmsg "line N: WHERE: WHAT": YAML
 * syntax errors, a top level that is not a mapping, unknown keys, keys the
 * toolkit has and vpackd does not support (said so), a key given twice, a
 * value of the wrong kind, a tls_server_config without cert_file or
 * key_file, a client_auth_type other than NoClientCert and
 * RequireAndVerifyClientCert, the latter without client_ca_file or
 * client_ca_file without it, a user name that is empty or has ':', a hash that is not bcrypt.
 * An empty file is no TLS and no users. -ENOMEM when out of memory.
 */
int vpack_webconfig_parse(struct vpack_webconfig *w, const char *text, size_t len,
                          char **errmsg);
void vpack_webconfig_clear(struct vpack_webconfig *w);

/* Whether hash has the form of a bcrypt hash ($2a$, $2b$, $2y$; cost 04-31; 53 characters). */
bool vpack_webconfig_is_bcrypt(const char *hash);

#endif
