// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the trace reader (lib/sim/trace.c): the input split into
 * lines, each read with vpack_trace_parse_line() as `vpackctl simulate
 * --trace` reads a file, and the whole input as a PlanetLab file. Checked:
 *
 *  - an error comes with a one-line message that names the line, without
 *    control characters; success and blank lines come without one;
 *  - a parsed interval has no thread demanding more than one CPU and no two
 *    domains of one name; converting it as the recorder does keeps util in
 *    0..1 and clears delay;
 *  - PlanetLab readings are all within 0..100.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vpack/trace.h"

#define CHECK(cond) ((cond) ? (void)0 : abort())

static void check_msg(const char *msg, unsigned long lineno)
{
    char want[32];

    CHECK(msg != NULL && strlen(msg) < 2048);
    for (const char *p = msg; *p; p++)
        CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
    snprintf(want, sizeof(want), "line %lu", lineno);
    CHECK(strncmp(msg, want, strlen(want)) == 0);
}

static void check_thread(const struct vpack_thread_sample *t)
{
    CHECK(t->util >= 0 && t->util <= 1 + 1e-9);
}

static void check_interval(struct vpack_snapshot *s)
{
    for (unsigned i = 0; i < s->ndomains; i++) {
        const struct vpack_domain_sample *d = &s->domains[i];
        for (unsigned j = i + 1; j < s->ndomains; j++)
            CHECK(strcmp(d->name, s->domains[j].name) != 0);
        for (unsigned k = 0; k < d->nvcpus; k++)
            check_thread(&d->vcpus[k]);
        for (unsigned k = 0; k < d->niothreads; k++)
            check_thread(&d->iothreads[k]);
        check_thread(&d->emulator);
    }
    vpack_trace_from_observed(s);
    for (unsigned i = 0; i < s->ndomains; i++)
        for (unsigned k = 0; k < s->domains[i].nvcpus; k++) {
            check_thread(&s->domains[i].vcpus[k]);
            CHECK(s->domains[i].vcpus[k].delay == 0);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    size_t pos = 0;
    unsigned long lineno = 0;
    double *v = NULL;
    char *msg = NULL;
    int n;

    while (pos < size) {
        const char *nl = memchr(buf + pos, '\n', size - pos);
        size_t len = nl ? (size_t)(nl - (buf + pos)) : size - pos;
        struct vpack_snapshot *s = NULL;
        int r;

        lineno++;
        r = vpack_trace_parse_line(buf + pos, len, lineno, &s, &msg);
        if (r == 0) {
            CHECK(s && !msg);
            check_interval(s);
        } else if (r == -ENODATA) {
            CHECK(!s && !msg);
        } else {
            CHECK(r == -EINVAL || r == -ENOMEM);
            CHECK(!s);
            if (r == -EINVAL)
                check_msg(msg, lineno);
        }
        vpack_snapshot_free(s);
        free(msg);
        msg = NULL;
        pos += len + 1;
    }
    n = vpack_planetlab_parse(buf, size, &v, &msg);
    if (n > 0) {
        for (int i = 0; i < n; i++)
            CHECK(v[i] >= 0 && v[i] <= 100);
        CHECK(!msg);
    } else {
        CHECK(!v);
    }
    free(v);
    free(msg);
    return 0;
}
