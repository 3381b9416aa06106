// SPDX-License-Identifier: MIT
/*
 * The metrics endpoint's web configuration (lib/format/webconfig.c read
 * through adapters/webconfig.c) on the files of tests/data/webconfig: what
 * a good file gives, every refusal with its file and line, and the
 * basic-auth check (bcrypt, the cache, unknown users).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "webconfig.h"

static char *fixture(const char *name)
{
    const char *dir = getenv("VPACK_TESTDATA");
    char *p = NULL;
    assert_non_null(dir);
    assert_true(asprintf(&p, "%s/webconfig/%s", dir, name) > 0);
    return p;
}

static struct vpack_web *load_ok(const char *name)
{
    char *path = fixture(name), *err = NULL;
    struct vpack_web *w = NULL;
    int r = vpack_web_load(path, &w, &err);
    if (r < 0)
        fail_msg("%s: %s", name, err ? err : strerror(-r));
    assert_null(err);
    free(path);
    return w;
}

static void test_good(void **state)
{
    (void)state;
    struct vpack_web *w = load_ok("good.yml");
    assert_true(w->cfg.tls);
    assert_string_equal(w->cfg.cert_file, "server.crt");
    /* Relative to the file's directory, as exporter-toolkit takes them. */
    const char *dir = getenv("VPACK_TESTDATA");
    assert_memory_equal(w->cert_path, dir, strlen(dir));
    assert_non_null(strstr(w->cert_path, "/webconfig/server.crt"));
    assert_non_null(strstr(w->key_path, "/webconfig/server.key"));
    assert_non_null(strstr(w->cert_pem, "-----BEGIN CERTIFICATE-----"));
    assert_non_null(strstr(w->key_pem, "PRIVATE KEY-----"));
    assert_int_equal(w->cfg.nusers, 2);
    assert_string_equal(w->cfg.users[0].name, "alice");
    assert_memory_equal(w->cfg.users[0].hash, "$2y$05$", 7);
    assert_string_equal(w->cfg.users[1].name, "bob");
    assert_memory_equal(w->cfg.users[1].hash, "$2b$05$", 7);
    /* The dummy hash for unknown users has the first user's cost. */
    assert_memory_equal(w->dummy_hash, "$2b$05$", 7);
    assert_true(vpack_webconfig_is_bcrypt(w->dummy_hash));
    vpack_web_free(w);
}

/* Client certificates: the CA file read and checked; without them, none. */
static void test_mtls(void **state)
{
    (void)state;
    struct vpack_web *w = load_ok("mtls.yml"), *g = load_ok("tls-only.yml");
    assert_true(w->cfg.require_client_cert);
    assert_non_null(strstr(w->ca_path, "/webconfig/ca.crt"));
    assert_non_null(strstr(w->ca_pem, "-----BEGIN CERTIFICATE-----"));
    assert_false(g->cfg.require_client_cert);
    assert_null(g->ca_pem);
    assert_false(vpack_web_same(w, g)); /* a reload to or from client certificates restarts */
    /* No TLS session (a plain connection): refused, and said why. */
    char *why = NULL;
    assert_false(vpack_web_client_ok(w, NULL, &why));
    assert_non_null(why);
    free(why);
    vpack_web_free(w);
    vpack_web_free(g);
}

static void test_partial(void **state)
{
    (void)state;
    struct vpack_web *w = load_ok("users-only.yml");
    assert_false(w->cfg.tls);
    assert_null(w->cert_pem);
    assert_int_equal(w->cfg.nusers, 1);
    vpack_web_free(w);
    w = load_ok("tls-only.yml");
    assert_true(w->cfg.tls);
    assert_int_equal(w->cfg.nusers, 0);
    assert_null(w->dummy_hash);
    vpack_web_free(w);
    w = load_ok("empty.yml");
    assert_false(w->cfg.tls);
    assert_int_equal(w->cfg.nusers, 0);
    vpack_web_free(w);
}

/* Each bad file: refused, the message names the file and says what (and the line). */
static void test_errors(void **state)
{
    (void)state;
    static const struct {
        const char *file, *want;
    } cases[] = {
        {"no-such.yml", "cannot read PATH: No such file or directory"},
        {"syntax.yml", "PATH: line 3: not YAML: "},
        {"unknown-key.yml", "PATH: line 1: tls_config: unknown key (tls_server_config, basic_auth_users)"},
        {"unknown-tls-key.yml", "PATH: line 4: tls_server_config.keyfile: unknown key"},
        {"unsupported.yml", "PATH: line 4: tls_server_config.min_version: not supported by vpackd"},
        {"client-auth-any.yml", "PATH: line 4: tls_server_config.client_auth_type: RequireAnyClientCert is not supported by vpackd (NoClientCert or RequireAndVerifyClientCert)"},
        {"client-auth-unknown.yml", "PATH: line 4: tls_server_config.client_auth_type: unknown type 'Sometimes'"},
        {"ca-missing.yml", "PATH: line 2: tls_server_config: client_ca_file is missing (client_auth_type RequireAndVerifyClientCert verifies against it)"},
        {"ca-without-auth.yml", "PATH: line 2: tls_server_config: client_ca_file without client_auth_type RequireAndVerifyClientCert"},
        {"ca-missing-file.yml", "PATH: tls_server_config.client_ca_file: cannot read "},
        {"ca-not-pem.yml", "PATH: client_ca_file "},
        {"http-server.yml", "PATH: line 1: http_server_config: not supported by vpackd"},
        {"missing-key.yml", "PATH: line 2: tls_server_config: key_file is missing"},
        {"missing-cert.yml", "PATH: line 2: tls_server_config: cert_file is missing"},
        {"empty-key.yml", "PATH: line 2: tls_server_config: key_file is missing"},
        {"tls-scalar.yml", "PATH: line 1: tls_server_config: expected a mapping, got a scalar"},
        {"not-mapping.yml", "PATH: line 1: expected a mapping (tls_server_config, basic_auth_users), got a list"},
        {"users-list.yml", "PATH: line 2: basic_auth_users: expected a mapping of user names"},
        {"not-bcrypt.yml", "PATH: line 2: basic_auth_users.alice: not a bcrypt hash"},
        {"plain-password.yml", "PATH: line 2: basic_auth_users.alice: not a bcrypt hash"},
        {"duplicate-user.yml", "PATH: line 3: basic_auth_users.alice: given twice (first at line 2)"},
        {"colon-user.yml", "PATH: line 2: basic_auth_users: user name 'al:ice' is empty or has ':'"},
        {"two-documents.yml", "PATH: line 3: a second YAML document"},
        {"cert-missing-file.yml", "PATH: tls_server_config.cert_file: cannot read "},
        {"key-mismatch.yml", "PATH: key_file "},
        {"cert-not-pem.yml", "PATH: cert_file "},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        char *path = fixture(cases[i].file), *err = NULL, want[1024];
        struct vpack_web *w = (struct vpack_web *)&w; /* not NULL: must be set to NULL */
        const char *at = strstr(cases[i].want, "PATH");
        snprintf(want, sizeof(want), "%.*s%s%s", (int)(at - cases[i].want), cases[i].want, path,
                 at + 4);
        int r = vpack_web_load(path, &w, &err);
        if (r >= 0 || !err || !strstr(err, want))
            fail_msg("%s: got %d '%s'; want an error with '%s'", cases[i].file, r,
                     err ? err : "(none)", want);
        assert_int_equal(r, strstr(cases[i].want, "cannot read") ? -ENOENT : -EINVAL);
        assert_null(w);
        printf("ok: %s: %s\n", cases[i].file, err);
        free(err);
        free(path);
    }
}

/* The mismatch and not-PEM messages say which files and what is wrong. */
static void test_tls_errors(void **state)
{
    (void)state;
    char *path = fixture("key-mismatch.yml"), *err = NULL;
    struct vpack_web *w = NULL;
    assert_int_equal(vpack_web_load(path, &w, &err), -EINVAL);
    assert_non_null(strstr(err, "/webconfig/other.key is not the key of cert_file "));
    assert_non_null(strstr(err, "/webconfig/server.crt"));
    free(err);
    free(path);
    path = fixture("cert-not-pem.yml");
    assert_int_equal(vpack_web_load(path, &w, &err), -EINVAL);
    assert_non_null(strstr(err, "(PEM certificate and unencrypted PEM key expected)"));
    free(err);
    free(path);
}

static void test_is_bcrypt(void **state)
{
    (void)state;
    const char *h = "$2b$10$TnVAJ4HoAeM/2TEUbx.AJeHTzIJjepmxLyRUNT4cAS/W4B6dQliYu";
    char buf[80];
    assert_true(vpack_webconfig_is_bcrypt(h));
    strcpy(buf, h);
    buf[2] = 'x'; /* $2x$: not accepted */
    assert_false(vpack_webconfig_is_bcrypt(buf));
    strcpy(buf, h);
    memcpy(buf + 4, "03", 2); /* cost below 4 */
    assert_false(vpack_webconfig_is_bcrypt(buf));
    memcpy(buf + 4, "32", 2); /* above 31 */
    assert_false(vpack_webconfig_is_bcrypt(buf));
    memcpy(buf + 4, "31", 2);
    assert_true(vpack_webconfig_is_bcrypt(buf));
    strcpy(buf, h);
    buf[20] = '+'; /* not bcrypt's base64 */
    assert_false(vpack_webconfig_is_bcrypt(buf));
    strcpy(buf, h);
    buf[59] = '\0'; /* short */
    assert_false(vpack_webconfig_is_bcrypt(buf));
    strcpy(buf, h);
    strcat(buf, "u"); /* long */
    assert_false(vpack_webconfig_is_bcrypt(buf));
}

static void test_check(void **state)
{
    (void)state;
    struct vpack_web *w = load_ok("good.yml");
    bool crypted;
    assert_false(vpack_web_cached(w, "alice", "alice-secret"));
    assert_true(vpack_web_check(w, "alice", "alice-secret", &crypted)); /* $2y$ */
    assert_true(crypted);
    /* Answered yes once: from the cache now, without bcrypt. */
    assert_true(vpack_web_cached(w, "alice", "alice-secret"));
    assert_true(vpack_web_check(w, "alice", "alice-secret", &crypted));
    assert_false(crypted);
    assert_true(vpack_web_check(w, "bob", "bob-secret", &crypted)); /* $2b$ */
    assert_true(crypted);
    /* Wrong passwords and unknown users run bcrypt all the same, and are not cached. */
    assert_false(vpack_web_check(w, "alice", "bob-secret", &crypted));
    assert_true(crypted);
    assert_false(vpack_web_check(w, "alice", "alice-secret\n", &crypted));
    assert_true(crypted);
    assert_false(vpack_web_check(w, "bob", "alice-secret", &crypted));
    assert_true(crypted);
    assert_false(vpack_web_check(w, "mallory", "alice-secret", &crypted));
    assert_true(crypted);
    assert_false(vpack_web_check(w, "mallory", "alice-secret", &crypted));
    assert_true(crypted);
    assert_false(vpack_web_check(w, "", "", &crypted));
    assert_false(vpack_web_cached(w, "alice", "bob-secret"));
    assert_int_equal(w->crypts, 8);
    vpack_web_free(w);
    /* No users: nobody gets in (the endpoint asks for no authentication then). */
    w = load_ok("tls-only.yml");
    assert_false(vpack_web_check(w, "alice", "alice-secret", NULL));
    vpack_web_free(w);
}

static void test_same(void **state)
{
    (void)state;
    struct vpack_web *a = load_ok("good.yml"), *b = load_ok("good.yml");
    struct vpack_web *c = load_ok("tls-only.yml"), *d = load_ok("users-only.yml");
    assert_true(vpack_web_same(a, b));
    assert_true(vpack_web_same(NULL, NULL));
    assert_false(vpack_web_same(a, NULL));
    assert_false(vpack_web_same(NULL, a));
    assert_false(vpack_web_same(a, c));
    assert_false(vpack_web_same(a, d));
    assert_false(vpack_web_same(c, d));
    vpack_web_free(a);
    vpack_web_free(b);
    vpack_web_free(c);
    vpack_web_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),     cmocka_unit_test(test_partial),
        cmocka_unit_test(test_mtls),
        cmocka_unit_test(test_errors),   cmocka_unit_test(test_tls_errors),
        cmocka_unit_test(test_is_bcrypt), cmocka_unit_test(test_check),
        cmocka_unit_test(test_same),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
