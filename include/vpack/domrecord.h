/* SPDX-License-Identifier: MIT */
/*
 * The hook's record of a domain (lib/format/domrecord.c): struct
 * vpack_domxml (vpack/domxml.h, what the domain XML reader gives) as one
 * line of JSON, read back strictly, and a request it holds checked against
 * the live domain. vpackd keeps these records under its state_dir.
 *
 * Ownership as in vpack/domxml.h: a returned `char *` is the caller's to
 * free() (error messages included), a record is released with
 * vpack_domxml_free().
 */
#ifndef VPACK_DOMRECORD_H
#define VPACK_DOMRECORD_H

#include <stddef.h>

#include "vpack/domxml.h"

/*
 * The record as one line of JSON (no newline), the format of
 * `vpack-hook --dump` and of the "domain" member of the hook's register
 * message:
 *
 * {"name":S,"uuid":S|null,"level":0|1|2|null,"vcpus":N,"vcpus_current":N,
 *  "online":CPUSET,"placement":"static"|"auto","cpuset":CPUSET|null,
 *  "vcpupin":{"ID":CPUSET,...},"emulatorpin":CPUSET|null,
 *  "iothreads":[ID,...],"iothreadpin":{"ID":CPUSET,...},
 *  "numatune":{"memory":{"mode":M,"placement":"static","nodeset":CPUSET}
 *                       | {"mode":M,"placement":"auto"},
 *              "memnode":{"CELL":{"mode":M,"nodeset":CPUSET},...}}}
 *
 * CPUSET is libvirt's canonical syntax ("0-2,5"); M is "strict",
 * "preferred", "interleave" or "restrictive". "vcpupin" and "iothreadpin"
 * list only what the XML pins ({} when nothing); "numatune" is present only
 * when libvirt would format one, and within it "memory" and "memnode" only
 * when they exist. Returns a string the caller frees, or NULL when out of
 * memory.
 */
char *vpack_domxml_to_json(const struct vpack_domxml *d);

/*
 * Reads that JSON back (the hook's records under vpackd's state_dir): len
 * bytes of buf, no NUL needed. Keys may be absent (a null or absent CPU set
 * is none, an absent count 0); "name" is required. Returns 0 with *out
 * (free with vpack_domxml_free()), -EINVAL for text that is not such a
 * record, with *errmsg (if errmsg is non-NULL; caller frees) naming the
 * path of the bad member in json.h's checked reader's words ("domain
 * record: vcpupin.3: expected a CPU set, got 5"), or -ENOMEM.
 */
int vpack_domxml_from_json(const char *buf, size_t len, struct vpack_domxml **out,
                           char **errmsg);
/*
 * The same from a parsed JSON object o (borrowed), which may carry other
 * members (vpackd's own, in its record files). A record that pins a vCPU
 * beyond "vcpus" or an iothread not in "iothreads", or one thread twice,
 * is refused as a whole (no reader output has one: it is damaged).
 */
struct json_object;
int vpack_domxml_from_json_object(struct json_object *o, struct vpack_domxml **out,
                                  char **errmsg);

/*
 * Checks that req (what the guest asked for, from a record) fits the
 * running domain live: every pinned vCPU and iothread exists there.
 * Returns 0, or -EINVAL with *errmsg (caller frees; may be NULL) saying
 * which does not: the record is then not the domain's, and is damaged.
 */
int vpack_domxml_request_check(const struct vpack_domxml *req, const struct vpack_domxml *live,
                               char **errmsg);

#endif
