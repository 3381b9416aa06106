// SPDX-License-Identifier: MIT
#include "webconfig.h"

#include <crypt.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "host.h"
#include "vpack/errmsg.h"

/* The largest web configuration, certificate chain or key read. */
#define FILE_MAX ((size_t)1 << 20)

/* file, resolved against dir (the web configuration's directory) when relative. */
static char *resolve(const char *dir, const char *file)
{
    char *s = NULL;
    if (file[0] == '/' || !*dir)
        return strdup(file);
    if (asprintf(&s, "%s/%s", dir, file) < 0)
        return NULL;
    return s;
}

static int read_pem(const char *web, const char *what, const char *path, char **out,
                    char **errmsg)
{
    int r = vpack_host_read_file(NULL, path, FILE_MAX, out, NULL);
    if (r < 0)
        return vpack_errmsg_set(r, errmsg, "%s: tls_server_config.%s: cannot read %s: %s", web,
                                what, path, r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
    return 0;
}

/* Whether the certificate and the key are PEM GnuTLS reads, and go together. */
static int check_pair(struct vpack_web *w, char **errmsg)
{
    gnutls_certificate_credentials_t cred;
    gnutls_datum_t cert = {(unsigned char *)w->cert_pem, (unsigned)strlen(w->cert_pem)};
    gnutls_datum_t key = {(unsigned char *)w->key_pem, (unsigned)strlen(w->key_pem)};
    if (gnutls_certificate_allocate_credentials(&cred) < 0)
        return vpack_errmsg_set(-ENOMEM, errmsg, "out of memory");
    int r = gnutls_certificate_set_x509_key_mem2(cred, &cert, &key, GNUTLS_X509_FMT_PEM, NULL, 0);
    gnutls_certificate_free_credentials(cred);
    if (r >= 0)
        return 0;
    if (r == GNUTLS_E_CERTIFICATE_KEY_MISMATCH)
        return vpack_errmsg_set(-EINVAL, errmsg, "%s: key_file %s is not the key of cert_file %s",
                                w->path, w->key_path, w->cert_path);
    return vpack_errmsg_set(-EINVAL, errmsg, "%s: cert_file %s and key_file %s: %s (PEM "
                            "certificate and unencrypted PEM key expected)", w->path,
                            w->cert_path, w->key_path, gnutls_strerror(r));
}

/* Whether client_ca_file holds at least one PEM certificate GnuTLS reads. */
static int check_ca(struct vpack_web *w, char **errmsg)
{
    gnutls_certificate_credentials_t cred;
    gnutls_datum_t ca = {(unsigned char *)w->ca_pem, (unsigned)strlen(w->ca_pem)};
    if (gnutls_certificate_allocate_credentials(&cred) < 0)
        return vpack_errmsg_set(-ENOMEM, errmsg, "out of memory");
    int r = gnutls_certificate_set_x509_trust_mem(cred, &ca, GNUTLS_X509_FMT_PEM);
    gnutls_certificate_free_credentials(cred);
    if (r > 0)
        return 0;
    return vpack_errmsg_set(-EINVAL, errmsg, "%s: client_ca_file %s: %s", w->path, w->ca_path,
                            r < 0 ? gnutls_strerror(r) : "no PEM certificate in it");
}

bool vpack_web_client_ok(const struct vpack_web *w, void *session, char **why)
{
    gnutls_typed_vdata_st purpose = {GNUTLS_DT_KEY_PURPOSE_OID,
                                     (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT, 0};
    unsigned status = 0;
    gnutls_datum_t text = {NULL, 0};
    int r;
    (void)w;
    if (why)
        *why = NULL;
    if (!session)
        r = GNUTLS_E_INVALID_SESSION;
    else if ((r = gnutls_certificate_verify_peers(session, &purpose, 1, &status)) == 0 && !status)
        return true;
    if (!why)
        return false;
    if (r < 0)
        *why = strdup(r == GNUTLS_E_NO_CERTIFICATE_FOUND ? "no client certificate"
                                                         : gnutls_strerror(r));
    else if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &text, 0) == 0) {
        *why = strdup((const char *)text.data);
        gnutls_free(text.data);
    }
    return false;
}

/* A hash no password gives, at cost (one bcrypt run, at load). */
static char *dummy_hash(unsigned cost)
{
    char salt[CRYPT_GENSALT_OUTPUT_SIZE], pass[33];
    struct crypt_data *cd = calloc(1, sizeof(*cd));
    unsigned char rnd[16];
    char *out = NULL;
    if (!cd || gnutls_rnd(GNUTLS_RND_NONCE, rnd, sizeof(rnd)) < 0)
        goto out;
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(pass + 2 * i, 3, "%02x", rnd[i]);
    if (crypt_gensalt_rn("$2b$", cost, NULL, 0, salt, sizeof(salt))) {
        const char *h = crypt_rn(pass, salt, cd, sizeof(*cd));
        if (h && h[0] == '$')
            out = strdup(h);
    }
out:
    free(cd);
    return out;
}

int vpack_web_load(const char *path, struct vpack_web **out, char **errmsg)
{
    struct vpack_web *w = calloc(1, sizeof(*w));
    char *text = NULL, *err = NULL, *dir = NULL;
    size_t len = 0;
    int r = -ENOMEM;

    *out = NULL;
    if (errmsg)
        *errmsg = NULL;
    if (!w || !(w->path = strdup(path)) || !(dir = strdup(path)))
        goto fail;
    char *slash = strrchr(dir, '/');
    if (slash)
        slash[slash == dir] = '\0'; /* "/x.yml": "/" */
    else
        dir[0] = '\0';
    if ((r = vpack_host_read_file(NULL, path, FILE_MAX, &text, &len)) < 0) {
        r = vpack_errmsg_set(r, errmsg, "cannot read %s: %s", path,
                             r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
        goto fail;
    }
    if ((r = vpack_webconfig_parse(&w->cfg, text, len, &err)) < 0) {
        r = vpack_errmsg_set(r, errmsg, "%s: %s", path, err ? err : "out of memory");
        goto fail;
    }
    if (w->cfg.tls) {
        r = -ENOMEM;
        if (!(w->cert_path = resolve(dir, w->cfg.cert_file)) ||
            !(w->key_path = resolve(dir, w->cfg.key_file)))
            goto fail;
        if ((r = read_pem(path, "cert_file", w->cert_path, &w->cert_pem, errmsg)) < 0 ||
            (r = read_pem(path, "key_file", w->key_path, &w->key_pem, errmsg)) < 0 ||
            (r = check_pair(w, errmsg)) < 0)
            goto fail;
        if (w->cfg.require_client_cert) {
            if (!(w->ca_path = resolve(dir, w->cfg.client_ca_file))) {
                r = -ENOMEM;
                goto fail;
            }
            if ((r = read_pem(path, "client_ca_file", w->ca_path, &w->ca_pem, errmsg)) < 0 ||
                (r = check_ca(w, errmsg)) < 0)
                goto fail;
        }
    }
    if (w->cfg.nusers) {
        const char *h = w->cfg.users[0].hash;
        if (!(w->dummy_hash = dummy_hash((unsigned)((h[4] - '0') * 10 + (h[5] - '0'))))) {
            r = vpack_errmsg_set(-ENOMEM, errmsg, "%s: cannot make a bcrypt hash", path);
            goto fail;
        }
    }
    free(text);
    free(dir);
    *out = w;
    return 0;
fail:
    if (r == -ENOMEM && errmsg && !*errmsg)
        vpack_errmsg_set(r, errmsg, "%s: out of memory", path);
    free(err);
    free(text);
    free(dir);
    vpack_web_free(w);
    return r;
}

void vpack_web_free(struct vpack_web *w)
{
    if (!w)
        return;
    vpack_webconfig_clear(&w->cfg);
    free(w->path);
    free(w->cert_path);
    free(w->key_path);
    if (w->key_pem)
        gnutls_memset(w->key_pem, 0, strlen(w->key_pem));
    free(w->cert_pem);
    free(w->key_pem);
    free(w->ca_path);
    free(w->ca_pem);
    free(w->dummy_hash);
    gnutls_memset(w->cache, 0, sizeof(w->cache));
    free(w);
}

static bool streq(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

bool vpack_web_same(const struct vpack_web *a, const struct vpack_web *b)
{
    if (!a || !b)
        return a == b;
    if (!streq(a->cert_pem, b->cert_pem) || !streq(a->key_pem, b->key_pem) ||
        !streq(a->ca_pem, b->ca_pem) || a->cfg.nusers != b->cfg.nusers)
        return false;
    for (unsigned i = 0; i < a->cfg.nusers; i++)
        if (strcmp(a->cfg.users[i].name, b->cfg.users[i].name) ||
            strcmp(a->cfg.users[i].hash, b->cfg.users[i].hash))
            return false;
    return true;
}

/* The configured user's hash, or the dummy one: every name is looked at (no early exit). */
static const char *hash_of(const struct vpack_web *w, const char *user)
{
    const char *hash = NULL;
    for (unsigned i = 0; i < w->cfg.nusers; i++)
        if (!strcmp(w->cfg.users[i].name, user) && !hash)
            hash = w->cfg.users[i].hash;
    return hash;
}

/* SHA-256 of user, hash and password, NUL-separated: what the cache holds. */
static int cache_key(const char *user, const char *hash, const char *password,
                     unsigned char key[32])
{
    size_t lu = strlen(user) + 1, lh = strlen(hash) + 1, lp = strlen(password);
    unsigned char *buf = malloc(lu + lh + lp + 1);
    if (!buf)
        return -ENOMEM;
    memcpy(buf, user, lu);
    memcpy(buf + lu, hash, lh);
    memcpy(buf + lu + lh, password, lp);
    int r = gnutls_hash_fast(GNUTLS_DIG_SHA256, buf, lu + lh + lp, key);
    gnutls_memset(buf, 0, lu + lh + lp);
    free(buf);
    return r < 0 ? -EIO : 0;
}

static bool in_cache(const struct vpack_web *w, const unsigned char key[32])
{
    bool hit = false;
    for (unsigned i = 0; i < w->ncache; i++) {
        unsigned char diff = 0;
        for (unsigned k = 0; k < 32; k++)
            diff |= (unsigned char)(w->cache[i][k] ^ key[k]);
        hit |= !diff;
    }
    return hit;
}

bool vpack_web_cached(const struct vpack_web *w, const char *user, const char *password)
{
    unsigned char key[32];
    const char *hash = hash_of(w, user);
    return hash && cache_key(user, hash, password, key) == 0 && in_cache(w, key);
}

bool vpack_web_check(struct vpack_web *w, const char *user, const char *password, bool *crypted)
{
    const char *hash = hash_of(w, user);
    unsigned char key[32];
    bool have_key = false, ok;

    if (crypted)
        *crypted = false;
    if (!w->cfg.nusers)
        return false;
    if (hash && cache_key(user, hash, password, key) == 0) {
        have_key = true;
        if (in_cache(w, key))
            return true;
    }
    struct crypt_data *cd = calloc(1, sizeof(*cd));
    if (!cd)
        return false;
    const char *want = hash ? hash : w->dummy_hash;
    const char *got = crypt_rn(password, want, cd, sizeof(*cd));
    w->crypts++;
    if (crypted)
        *crypted = true;
    /* crypt_rn's result has want's length when it is a hash; compare every byte. */
    size_t n = strlen(want);
    unsigned char diff = !got || strlen(got) != n;
    for (size_t i = 0; got && i < n && got[i]; i++)
        diff |= (unsigned char)(got[i] ^ want[i]);
    ok = hash && !diff;
    explicit_bzero(cd, sizeof(*cd));
    free(cd);
    if (ok && have_key) {
        memcpy(w->cache[w->next], key, sizeof(key));
        w->next = (w->next + 1) % VPACK_WEB_CACHE;
        if (w->ncache < VPACK_WEB_CACHE)
            w->ncache++;
    }
    return ok;
}
