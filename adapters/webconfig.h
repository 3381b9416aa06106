/* SPDX-License-Identifier: MIT */
/*
 * The metrics endpoint's web configuration ([metrics] web_config,
 * vpack/webconfig.h) read from its file: the certificate and key read and
 * checked against each other with GnuTLS, and the basic-auth check with
 * libxcrypt's bcrypt.
 */
#ifndef VPACK_ADAPTERS_WEBCONFIG_H
#define VPACK_ADAPTERS_WEBCONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "vpack/webconfig.h"

struct vpack_web {
    char *path;                /* the web configuration file */
    struct vpack_webconfig cfg;
    char *cert_path, *key_path; /* cert_file and key_file, resolved */
    char *cert_pem, *key_pem;   /* NUL-terminated; NULL without TLS */
    char *ca_path, *ca_pem;     /* client_ca_file; NULL without client certificates */
    char *dummy_hash;           /* a bcrypt hash no password matches, at the first user's cost */
    /* Successful checks (SHA-256 of user, hash and password), newest at next - 1. */
#define VPACK_WEB_CACHE 8
    unsigned char cache[VPACK_WEB_CACHE][32];
    unsigned ncache, next;
    unsigned long long crypts; /* bcrypt runs (verifications not answered from the cache) */
};

/*
 * Reads the web configuration file path: parses it, reads cert_file and
 * key_file (relative paths are taken from path's directory, as the toolkit
 * does) and checks that they are PEM and that the key is the certificate's,
 * and client_ca_file's certificates.
 * Returns 0 with *out (vpack_web_free() it), or a negative errno with
 * *errmsg "PATH: ..." (caller frees) naming the file and the problem.
 */
int vpack_web_load(const char *path, struct vpack_web **out, char **errmsg);
void vpack_web_free(struct vpack_web *w);

/* Whether a and b serve the same (TLS files' contents and users); NULL is plain HTTP. */
bool vpack_web_same(const struct vpack_web *a, const struct vpack_web *b);

/*
 * Whether user and password match one of basic_auth_users. An answer
 * already given yes is taken from the cache; otherwise bcrypt runs whether
 * or not the user exists (against dummy_hash when not), so that the time
 * does not tell user names. *crypted (may be NULL) says whether it ran.
 */
bool vpack_web_check(struct vpack_web *w, const char *user, const char *password, bool *crypted);

/* Whether a check of user and password would be answered from the cache (no bcrypt). */
bool vpack_web_cached(const struct vpack_web *w, const char *user, const char *password);

/*
 * Whether the peer of the TLS session (a gnutls_session_t) sent a
 * certificate that client_ca_file's CAs signed, valid now and for TLS web
 * clients (key purpose clientAuth, when it has key purposes). When not,
 * *why (may be NULL) says why, from GnuTLS (caller frees).
 */
bool vpack_web_client_ok(const struct vpack_web *w, void *session, char **why);

#endif
