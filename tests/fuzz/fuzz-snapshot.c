// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the snapshot reader (lib/format/snapshot.c): the input as
 * one snapshot (vpack_snapshot_parse) and as a JSON-lines series, read the
 * way `vpackctl plan --replay` reads one: vpack_snapshot_parse_first() from
 * each offset it returns. Checked on every input:
 *
 *  - an error comes with a one-line message without control characters, of
 *    bounded length; success comes without one;
 *  - a parsed snapshot obeys the documented ranges (busy 0..1 or "not
 *    reported", util and delay >= 0, levels -1..2, memory shares 0..1,
 *    non-empty names and pins);
 *  - its JSON is one line, reads back, and writes out identically (the
 *    writer and the reader agree: a fixpoint after one round);
 *  - parse_first's end offset stays within the text and moves forward.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vpack/snapshot.h"

#define CHECK(cond) ((cond) ? (void)0 : abort())

static void check_msg(int r, const char *msg)
{
    if (r == 0) {
        CHECK(msg == NULL);
        return;
    }
    CHECK(r == -EINVAL || r == -ENODATA || r == -ENOMEM);
    if (r == -ENOMEM)
        return;
    CHECK(msg != NULL && msg[0] != '\0' && strlen(msg) < 2048);
    for (const char *p = msg; *p; p++)
        CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
}

static void check_thread(const struct vpack_thread_sample *t)
{
    CHECK(t->util >= 0 && t->delay >= 0);
    CHECK(t->cpu >= -1 && t->cpu < VPACK_CPUSET_MAX);
    CHECK(!t->pin || !vpack_cpuset_empty(t->pin));
}

static void check_snapshot(const struct vpack_snapshot *s)
{
    CHECK(s->ncpus == 0 || s->cpu_busy);
    for (unsigned i = 0; i < s->ncpus; i++)
        CHECK(s->cpu_busy[i] < 0 || s->cpu_busy[i] <= 1);
    for (unsigned i = 0; i < s->ndomains; i++) {
        const struct vpack_domain_sample *d = &s->domains[i];
        CHECK(d->name && d->name[0]);
        CHECK(d->level >= -1 && d->level <= 2);
        CHECK(!d->cpuset || !vpack_cpuset_empty(d->cpuset));
        for (unsigned k = 0; k < d->nvcpus; k++)
            check_thread(&d->vcpus[k]);
        for (unsigned k = 0; k < d->niothreads; k++)
            check_thread(&d->iothreads[k]);
        check_thread(&d->emulator);
        for (unsigned k = 0; k < d->nmemory; k++)
            CHECK(d->memory[k].node >= 0 && d->memory[k].share >= 0 && d->memory[k].share <= 1);
    }

    /* Write, read back, write again: the same text. */
    char *json = vpack_snapshot_to_json(s);
    CHECK(json != NULL && strchr(json, '\n') == NULL);
    struct vpack_snapshot *again = NULL;
    char *msg = NULL;
    int r = vpack_snapshot_parse(json, strlen(json), &again, &msg);
    CHECK(r == 0);
    /* (ncpus may shrink: a trailing CPU given as null is "not reported" and not written.) */
    CHECK(again->ncpus <= s->ncpus && again->ndomains == s->ndomains);
    char *json2 = vpack_snapshot_to_json(again);
    CHECK(json2 != NULL && strcmp(json, json2) == 0);
    free(json2);
    free(json);
    vpack_snapshot_free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A heap copy of exactly size bytes: ASan sees any read past the end. */
    char *buf = malloc(size ? size : 1);
    struct vpack_snapshot *s = NULL;
    char *msg = NULL;
    if (!buf)
        return 0;
    memcpy(buf, data, size);

    int r = vpack_snapshot_parse(buf, size, &s, &msg);
    check_msg(r, msg);
    if (r == 0)
        check_snapshot(s);
    vpack_snapshot_free(s);
    free(msg);

    /* As a series: one value after the other, as far as they are complete. */
    size_t off = 0;
    for (int guard = 0; off < size && guard < 1000; guard++) {
        size_t end = 77, at = 77;
        s = NULL;
        msg = NULL;
        r = vpack_snapshot_parse_first(buf + off, size - off, &end, &at, &s, &msg);
        check_msg(r, msg);
        CHECK(end <= size - off);
        CHECK(at == SIZE_MAX || at <= size - off);
        CHECK(r != 0 || (end > 0 && s != NULL));
        CHECK(r != -ENODATA || end == 0);
        if (r == 0)
            check_snapshot(s);
        vpack_snapshot_free(s);
        free(msg);
        if (end == 0)
            break;
        off += end;
    }
    free(buf);
    return 0;
}
