// SPDX-License-Identifier: MIT
/*
 * vpack-hook: libvirt's QEMU hook. libvirt runs it as
 * `vpack-hook DOMAIN OP SUBOP EXTRA` with the domain XML on stdin.
 *
 *   prepare             validate the domain's power policy; on error exit 1
 *                       with one line on stderr, which libvirt shows the user
 *   started, reconnect  tell vpackd about the domain (bounded wait), exit 0
 *   stopped, release    tell vpackd to forget it, exit 0
 *   migrate, restore    (begin) the XML of the incoming or restored domain:
 *                       when it carries vpack's request (urn:vpack:request:1,
 *                       written by vpackd while it placed the domain), print
 *                       it with the guest's own pins in place of vpack's and
 *                       the request removed; else print nothing (libvirt
 *                       keeps the XML). Metadata that is not a valid request:
 *                       exit 1 with one line on stderr (the restore or the
 *                       migration is refused rather than run with pins
 *                       nobody asked for)
 *   anything else       exit 0 without reading stdin
 *
 * Rules from libvirt 9.0 (see vpack-hook(8)): a non-zero exit at started or
 * reconnect kills the running domain, so those always exit 0; only migrate
 * and restore read stdout, so nothing is written there at any other
 * operation; libvirtd waits for the hook, so it must never call back into
 * libvirt nor wait long.
 *
 * Outside libvirt: `vpack-hook --dump` prints the record JSON of the domain
 * XML on stdin; `--help`, `--version`.
 */
#include "vpack-build.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include <json-c/json.h>
#include <libxml/parser.h>

#include "client.h"
#include "host.h"
#include "vpack/config.h"
#include "vpack/domrecord.h"
#include "vpack/domxml.h"
#include "vpack/json.h"

#define DEFAULT_TIMEOUT_MS 50
#define MAX_TIMEOUT_MS 10000

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: vpack-hook DOMAIN OP SUBOP EXTRA   (run by libvirt, XML on stdin)\n"
            "       vpack-hook --dump                  print the record JSON of the\n"
            "                                          domain XML on stdin\n"
            "       vpack-hook --help | --version\n"
            "\n"
            "Environment: VPACK_SOCKET (default " VPACK_DEFAULT_SOCKET "),\n"
            "             VPACK_HOOK_TIMEOUT_MS (default %d, total wait for vpackd).\n"
            "See vpack-hook(8).\n",
            DEFAULT_TIMEOUT_MS);
}

/* libxml2 must not print anything behind our back. */
static void quiet_xml_error(void *ctx, const char *msg, ...)
{
    (void)ctx;
    (void)msg;
}

/* ---- Talking to vpackd ---- */

/* The domain XML on stdin, at most VPACK_DOMXML_MAX_SIZE bytes (else -EFBIG). */
static int read_stdin(char **xml, size_t *len)
{
    return vpack_host_read_fd(STDIN_FILENO, VPACK_DOMXML_MAX_SIZE, xml, len);
}

static int timeout_from_env(void)
{
    const char *s = getenv("VPACK_HOOK_TIMEOUT_MS");
    char *end;
    long v;

    if (!s || !*s)
        return DEFAULT_TIMEOUT_MS;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || v < 1 || v > MAX_TIMEOUT_MS) {
        syslog(LOG_WARNING, "ignoring VPACK_HOOK_TIMEOUT_MS='%s' (expected 1..%d ms); using %d",
               s, MAX_TIMEOUT_MS, DEFAULT_TIMEOUT_MS);
        return DEFAULT_TIMEOUT_MS;
    }
    return (int)v;
}

/*
 * Sends one message for domain name and checks the reply. Everything that
 * goes wrong ends up as one syslog line; nothing here fails the hook.
 */
static void tell_agent(const char *name, const char *what, const char *request)
{
    const char *path = vpack_client_socket_path(NULL);
    struct json_object *r = NULL, *ok;
    char *why = NULL;
    int err;

    err = vpack_client_call(path, request, timeout_from_env(), &r, &why);
    if (err < 0)
        syslog(LOG_WARNING, "domain '%s': could not %s with vpackd at %s: %s; continuing "
               "without it", name, what, path, why ? why : strerror(-err));
    else if (json_object_object_get_ex(r, "error", NULL) ||
             (json_object_object_get_ex(r, "ok", &ok) && !json_object_get_boolean(ok)))
        syslog(LOG_WARNING, "domain '%s': vpackd refused to %s: %s", name, what,
               vpack_json_text(r, "error", "no reason given"));
    json_object_put(r);
    free(why);
}

/* ---- The hook's operations ---- */

/*
 * Turns a parser message into the hook's one line. Messages from before
 * the domain's name was known start with "domain XML: "; the name libvirt
 * passed on the command line stands in.
 */
static void report_prepare_error(const char *argname, const char *msg)
{
    static const char early[] = "domain XML: ";

    if (!msg)
        fprintf(stderr, "vpack: domain '%s': cannot read the domain XML (out of memory)\n",
                argname);
    else if (strncmp(msg, early, sizeof(early) - 1) == 0)
        fprintf(stderr, "vpack: domain '%s': %s\n", argname, msg + sizeof(early) - 1);
    else
        fprintf(stderr, "vpack: %s\n", msg);
}

static int hook_prepare(const char *argname, const char *xml, size_t len)
{
    struct vpack_domxml *d = NULL;
    char *msg = NULL;
    int r = vpack_domxml_parse(xml, len, &d, &msg);

    if (r == -ENOMEM && !msg) {
        /* Not the domain's fault: let it start. */
        syslog(LOG_ERR, "domain '%s': out of memory while checking the domain XML", argname);
        return 0;
    }
    if (r < 0) {
        report_prepare_error(argname, msg);
        free(msg);
        return 1;
    }
    vpack_domxml_free(d);
    return 0;
}

/*
 * restore and migrate: the XML libvirt is about to run, with vpack's pins
 * put back to the guest's own request. out is the real standard output.
 */
static int hook_request(const char *argname, const char *xml, size_t len, FILE *out)
{
    char *fixed = NULL, *msg = NULL;
    int r = vpack_domxml_request_restore(xml, len, &fixed, &msg), ret = 0;

    if (r < 0) {
        /* Not knowing the guest's own pins, the run would keep vpack's as if asked for. */
        report_prepare_error(argname, msg);
        ret = 1;
    } else if (r == 1 && (fputs(fixed, out) < 0 || fflush(out) != 0)) {
        fprintf(stderr, "vpack: domain '%s': cannot write the domain XML: %s\n", argname,
                strerror(errno));
        ret = 1;
    }
    free(fixed);
    free(msg);
    return ret;
}

static void hook_register(const char *argname, const char *op, const char *xml, size_t len)
{
    struct vpack_domxml *d = NULL;
    char *msg = NULL, *rec = NULL, *line = NULL, *fixed = NULL;
    int r;

    /* A run restored or migrated without this hook's restore/migrate (an older hook, one
     * that failed) still carries vpack's request: the guest asked for that, not the pins. */
    if ((r = vpack_domxml_request_restore(xml, len, &fixed, &msg)) < 0) {
        syslog(LOG_WARNING, "domain '%s': not registered with vpackd: %s", argname,
               msg ? msg : "out of memory");
        goto cleanup;
    }
    if (r == 1) {
        xml = fixed;
        len = strlen(fixed);
    }
    if (vpack_domxml_parse(xml, len, &d, &msg) < 0) {
        syslog(LOG_WARNING, "domain '%s': not registered with vpackd: %s", argname,
               msg ? msg : "out of memory");
        goto cleanup;
    }
    rec = vpack_domxml_to_json(d);
    /* "event" tells the agent whether this is a start or libvirtd reconnecting
     * to a running domain, whose live XML may hold vpack's own pins. */
    if (!rec ||
        asprintf(&line, "{\"op\":\"register\",\"event\":\"%s\",\"domain\":%s}", op, rec) < 0) {
        line = NULL;
        syslog(LOG_WARNING, "domain '%s': not registered with vpackd: out of memory", argname);
        goto cleanup;
    }
    tell_agent(d->name, "register", line);

cleanup:
    free(fixed);
    free(line);
    free(rec);
    free(msg);
    vpack_domxml_free(d);
}

static void hook_forget(const char *argname, const char *xml, size_t len)
{
    char *name = NULL, *uuid = NULL, *msg = NULL;
    json_object *o = NULL;
    const char *text;

    /* Even XML the reader refuses must not keep a stopped domain registered:
     * fall back to the name libvirt passed. */
    if (vpack_domxml_identity(xml, len, &name, &uuid, &msg) < 0)
        name = NULL;
    o = json_object_new_object();
    if (!o || vpack_json_add(o, "op", json_object_new_string("forget")) < 0 ||
        vpack_json_add(o, "name", json_object_new_string(name ? name : argname)) < 0 ||
        (uuid ? vpack_json_add(o, "uuid", json_object_new_string(uuid))
              : json_object_object_add(o, "uuid", NULL)) < 0 ||
        !(text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                       JSON_C_TO_STRING_NOSLASHESCAPE))) {
        syslog(LOG_WARNING, "domain '%s': could not tell vpackd to forget it: out of memory",
               argname);
        goto cleanup;
    }
    tell_agent(name ? name : argname, "forget the domain", text);

cleanup:
    json_object_put(o);
    free(name);
    free(uuid);
    free(msg);
}

static int hook_main(const char *argname, const char *op, const char *subop)
{
    bool prepare = strcmp(op, "prepare") == 0;
    bool reg = strcmp(op, "started") == 0 || strcmp(op, "reconnect") == 0;
    bool forget = strcmp(op, "stopped") == 0 || strcmp(op, "release") == 0;
    bool request = (strcmp(op, "restore") == 0 || strcmp(op, "migrate") == 0) &&
                   (!subop || strcmp(subop, "begin") == 0);
    char *xml = NULL;
    size_t len = 0;
    int null_fd, out_fd = -1, r, ret = 0;
    FILE *out = NULL;

    if (!prepare && !reg && !forget && !request)
        return 0;

    /* Nothing but the rewritten XML may reach stdout, not even from a library. */
    if (request && ((out_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3)) < 0 ||
                    !(out = fdopen(out_fd, "w")))) {
        fprintf(stderr, "vpack: domain '%s': cannot use the standard output: %s\n", argname,
                strerror(errno));
        if (out_fd >= 0)
            close(out_fd);
        return 1;
    }
    null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null_fd >= 0) {
        dup2(null_fd, STDOUT_FILENO);
        close(null_fd);
    }
    signal(SIGPIPE, SIG_IGN);
    xmlSetGenericErrorFunc(NULL, quiet_xml_error);
    openlog("vpack-hook", LOG_PID, LOG_DAEMON);

    r = read_stdin(&xml, &len);
    /* A domain larger than that never started with this hook (prepare refuses it), so
     * vpack never placed it: restore and migrate let it through unchanged. */
    if (r == -EFBIG && prepare) {
        fprintf(stderr, "vpack: domain '%s': the domain XML is larger than %u MiB\n", argname,
                VPACK_DOMXML_MAX_SIZE >> 20);
        ret = 1;
        goto cleanup;
    }
    if (r < 0 && r != -EFBIG && request) {
        fprintf(stderr, "vpack: domain '%s': cannot read the domain XML: %s\n", argname,
                strerror(-r));
        ret = 1;
        goto cleanup;
    }
    if (r < 0) {
        syslog(LOG_WARNING, "domain '%s': %s: cannot read the domain XML: %s", argname, op,
               r == -EFBIG ? "larger than 16 MiB" : strerror(-r));
        goto cleanup;
    }
    if (prepare)
        ret = hook_prepare(argname, xml, len);
    else if (request)
        ret = hook_request(argname, xml, len, out);
    else if (reg)
        hook_register(argname, op, xml, len);
    else
        hook_forget(argname, xml, len);

cleanup:
    if (out && fclose(out) != 0 && ret == 0) {
        fprintf(stderr, "vpack: domain '%s': cannot write the domain XML: %s\n", argname,
                strerror(errno));
        ret = 1;
    }
    free(xml);
    closelog();
    return ret;
}

/* ---- Outside libvirt ---- */

static int dump_main(void)
{
    struct vpack_domxml *d = NULL;
    char *xml = NULL, *msg = NULL, *json = NULL;
    size_t len;
    int r, ret = 1;

    xmlSetGenericErrorFunc(NULL, quiet_xml_error);
    r = read_stdin(&xml, &len);
    if (r < 0) {
        fprintf(stderr, "vpack-hook: cannot read standard input: %s\n",
                r == -EFBIG ? "larger than 16 MiB" : strerror(-r));
        goto cleanup;
    }
    r = vpack_domxml_parse(xml, len, &d, &msg);
    if (r < 0) {
        fprintf(stderr, "vpack-hook: %s\n", msg ? msg : strerror(-r));
        goto cleanup;
    }
    for (size_t i = 0; i < d->nwarnings; i++)
        fprintf(stderr, "vpack-hook: warning: %s\n", d->warnings[i]);
    json = vpack_domxml_to_json(d);
    if (!json) {
        fprintf(stderr, "vpack-hook: %s\n", strerror(ENOMEM));
        goto cleanup;
    }
    if (printf("%s\n", json) < 0 || fflush(stdout) != 0) {
        fprintf(stderr, "vpack-hook: cannot write standard output: %s\n", strerror(errno));
        goto cleanup;
    }
    ret = 0;

cleanup:
    free(json);
    free(msg);
    free(xml);
    vpack_domxml_free(d);
    return ret;
}

int main(int argc, char **argv)
{
    /* libvirt always passes four arguments; options come alone, so that a
     * domain named "--dump" is still handled as a hook call. */
    if (argc == 2 && strcmp(argv[1], "--dump") == 0)
        return dump_main();
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("vpack-hook %s\n", VPACK_VERSION);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    if (argc < 3) {
        usage(stderr);
        return 2;
    }
    return hook_main(argv[1], argv[2], argc > 3 ? argv[3] : NULL);
}
