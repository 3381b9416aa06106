// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the domain-XML reader: the parser, the JSON dump,
 * the identity reader and the define rewrite, with the properties that tie
 * them together checked on every input:
 *
 *  - an error comes with a one-line message of bounded length;
 *  - a record's JSON is valid JSON;
 *  - the rewrite gives the input back untouched when there is no policy;
 *  - a rewritten document rewrites again to the same level, and reads the
 *    same as the original (apart from the level it now carries).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <libxml/parser.h>

#include "vpack/domrecord.h"
#include "vpack/domxml.h"

static void quiet(void *ctx, const char *msg, ...)
{
    (void)ctx;
    (void)msg;
}

static void check_msg(int r, const char *msg)
{
    if (r == -EINVAL && (!msg || strchr(msg, '\n') || strlen(msg) > 500))
        abort();
    if (r == 0 && msg)
        abort();
}

/* The record's JSON without "level", for comparing a document with its
 * rewrite. NULL when the document does not parse. */
static json_object *record_without_level(const char *buf, size_t len)
{
    struct vpack_domxml *d = NULL;
    char *msg = NULL, *text;
    json_object *o;
    int r = vpack_domxml_parse(buf, len, &d, &msg);

    check_msg(r, msg);
    free(msg);
    if (r < 0)
        return NULL;
    text = vpack_domxml_to_json(d);
    vpack_domxml_free(d);
    if (!text)
        abort();
    o = json_tokener_parse(text);
    free(text);
    if (!o || !json_object_is_type(o, json_type_object))
        abort();
    json_object_object_del(o, "level");
    return o;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    xmlInitParser();
    xmlSetGenericErrorFunc(NULL, quiet);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    struct vpack_domxml *d = NULL;
    char *msg = NULL, *out = NULL, *again = NULL, *name = NULL, *uuid = NULL;
    json_object *before = NULL, *after = NULL;
    int r, level = -2, level2 = -2;

    r = vpack_domxml_parse(buf, size, &d, &msg);
    check_msg(r, msg);
    if (r == 0) {
        char *json = vpack_domxml_to_json(d);
        json_object *o;
        if (!json || !(o = json_tokener_parse(json)))
            abort();
        json_object_put(o);
        free(json);
        /* A parsed record always has a consistent online set. */
        if (d->vcpus_current == 0 || d->vcpus_current > d->vcpus ||
            vpack_cpuset_last(&d->online) >= (int)d->vcpus)
            abort();
    }
    vpack_domxml_free(d);
    free(msg);
    msg = NULL;

    r = vpack_domxml_identity(buf, size, &name, &uuid, &msg);
    check_msg(r, msg);
    free(name);
    free(uuid);
    free(msg);
    msg = NULL;

    r = vpack_domxml_define_rewrite(buf, size, &out, &level, &msg);
    check_msg(r, msg);
    if (r == 0) {
        if (level == -1) {
            if (strlen(out) != strnlen(buf, size) || strncmp(out, buf, strlen(out)) != 0)
                abort();
        } else {
            /* The output is a document the rewrite accepts again. */
            free(msg);
            msg = NULL;
            if (vpack_domxml_define_rewrite(out, strlen(out), &again, &level2, &msg) != 0 ||
                level2 != level)
                abort();
            /* The rest of the domain reads the same. */
            before = record_without_level(buf, size);
            after = record_without_level(out, strlen(out));
            if (before && (!after || !json_object_equal(before, after)))
                abort();
            if (after) {
                d = NULL;
                free(msg);
                msg = NULL;
                if (vpack_domxml_parse(out, strlen(out), &d, &msg) != 0 || d->level != level)
                    abort();
                vpack_domxml_free(d);
            }
        }
    }
    json_object_put(before);
    json_object_put(after);
    free(again);
    free(out);
    free(msg);
    return 0;
}
