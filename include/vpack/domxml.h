/* SPDX-License-Identifier: MIT */
/*
 * The domain-XML reader: what vpack needs from a libvirt domain definition
 * (name, uuid, power policy level, vCPUs, guest-requested pins, iothreads,
 * numatune), read from a buffer the way libvirt 9.0 reads it, plus the
 * rewrite that `vpackctl define` applies to turn the short policy form into
 * the namespaced element libvirt keeps.
 *
 * Nothing here does I/O. Every function takes the XML as a buffer of len
 * bytes (no NUL needed) and never loads external entities or DTDs; a
 * document with a DOCTYPE is refused.
 *
 * Ownership: a returned `char *` is the caller's to free() (error messages
 * included); a record from vpack_domxml_parse() is released with
 * vpack_domxml_free(), which frees every array in it.
 */
#ifndef VPACK_DOMXML_H
#define VPACK_DOMXML_H

#include <stdbool.h>
#include <stddef.h>

#include "vpack/cpuset.h"

/* vpack's metadata namespace: fixed for good, never change it. */
#define VPACK_XML_NS "urn:vpack:powerpolicy:1"
/* The prefix vpack writes (virsh metadata --key, virDomainSetMetadata key). */
#define VPACK_XML_NS_PREFIX "vpack"
/* The element's local name and its one attribute. */
#define VPACK_XML_POLICY_ELEMENT "powerpolicy"
#define VPACK_XML_POLICY_LEVEL "level"

/*
 * vpack's record of what a guest asked for, kept by vpackd in the running
 * domain's live metadata while it narrows the guest (a namespace of its
 * own: libvirt keeps one element per namespace, and the policy's holds the
 * user's level). It travels with the live XML into a save image, a managed
 * save and a migration, so that vpack's pins there are told from the
 * guest's own.
 */
#define VPACK_XML_REQUEST_NS "urn:vpack:request:1"
#define VPACK_XML_REQUEST_NS_PREFIX "vpackreq"
#define VPACK_XML_REQUEST_ELEMENT "request"

/* Largest document the reader accepts (the hook's stdin cap as well). */
#define VPACK_DOMXML_MAX_SIZE (16u * 1024u * 1024u)
/*
 * Most elements a document may have (counted before libxml2 builds its
 * tree, some 400 bytes each): four times vpack's limits of 16,384 below
 * (vCPUs and their pins, iothreads and their pins, cells and memnodes)
 * fit, with room for the devices.
 */
#define VPACK_DOMXML_MAX_ELEMENTS 262144u
/* vCPU ids must fit a vpack_cpuset; libvirt has no such limit of its own. */
#define VPACK_DOMXML_MAX_VCPUS VPACK_CPUSET_MAX
/* More iothreads than this is refused (libvirt would try to allocate them). */
#define VPACK_DOMXML_MAX_IOTHREADS 16384u
/* More guest NUMA cells than this is refused (QEMU 7.2 takes at most 128). */
#define VPACK_DOMXML_MAX_CELLS 16384u

enum vpack_vcpu_placement {
    VPACK_VCPU_PLACEMENT_STATIC = 0,
    VPACK_VCPU_PLACEMENT_AUTO,      /* numad's advice decides the CPUs */
};

enum vpack_numa_mode {
    VPACK_NUMA_MODE_STRICT = 0,
    VPACK_NUMA_MODE_PREFERRED,
    VPACK_NUMA_MODE_INTERLEAVE,
    VPACK_NUMA_MODE_RESTRICTIVE,
};

/* Resolved as libvirt resolves it: never "default" after parsing. */
enum vpack_numa_placement {
    VPACK_NUMA_PLACEMENT_STATIC = 1, /* nodeset is valid */
    VPACK_NUMA_PLACEMENT_AUTO,       /* numad's advice; no nodeset */
};

struct vpack_vcpupin {
    unsigned vcpu;
    vpack_cpuset cpus;
};

struct vpack_iothreadpin {
    unsigned iothread;
    vpack_cpuset cpus;
};

/*
 * A guest NUMA cell's memory binding. Its host nodes are kept as text: a
 * domain may have many cells, and a vpack_cpuset per cell (2 KiB) made a
 * domain of 360,000 cells cost the hook more than a gigabyte.
 */
struct vpack_memnode {
    unsigned cellid;            /* guest NUMA cell */
    enum vpack_numa_mode mode;
    char *nodeset;              /* host NUMA nodes, libvirt's canonical syntax ("0-1,4") */
};

struct vpack_numatune {
    /* True when libvirt would format a <numatune> element: memory is
     * specified (possibly implied by <vcpu placement='auto'>) or a memnode
     * exists. Everything below is meaningless when false. */
    bool present;
    bool memory_specified;
    enum vpack_numa_mode memory_mode;
    enum vpack_numa_placement memory_placement;
    vpack_cpuset memory_nodeset; /* only with VPACK_NUMA_PLACEMENT_STATIC */
    size_t nmemnodes;
    struct vpack_memnode *memnodes; /* ascending cellid */
};

/*
 * One domain as vpack sees it. Every array is sorted by id and owned by the
 * record. A vpack_cpuset is 2 KiB, so the arrays are only as long as the
 * XML asks for.
 */
struct vpack_domxml {
    char *name;
    bool has_uuid;               /* false when <uuid> is absent or empty */
    char uuid[37];               /* canonical lower-case 8-4-4-4-12 form */
    int level;                   /* 0, 1, 2; or -1 without a policy element */
    unsigned vcpus;              /* maximum vCPU count, the <vcpu> text */
    unsigned vcpus_current;      /* vCPUs online at start */
    vpack_cpuset online;         /* ids of the online vCPUs */
    enum vpack_vcpu_placement placement;
    bool has_cpuset;             /* <vcpu cpuset> (never with placement auto) */
    vpack_cpuset cpuset;
    size_t nvcpupin;
    struct vpack_vcpupin *vcpupin;       /* ascending vcpu */
    bool has_emulatorpin;
    vpack_cpuset emulatorpin;
    size_t niothreads;
    unsigned *iothreads;                 /* ascending iothread ids */
    size_t niothreadpin;
    struct vpack_iothreadpin *iothreadpin; /* ascending iothread */
    struct vpack_numatune numatune;
    /* Things libvirt accepts with a warning (a <vcpupin> for a vCPU the
     * domain does not have): one line each, no newline. */
    size_t nwarnings;
    char **warnings;
};

/*
 * Parses a power policy level exactly: "0", "1" or "2" and nothing else (no
 * blanks, no sign, no leading zero). Returns the level or -EINVAL.
 */
int vpack_domxml_level_parse(const char *text);

/*
 * Reads a domain definition. Returns 0 with *out set (free it with
 * vpack_domxml_free()), -EINVAL for XML that libvirt (or vpack's policy
 * check) rejects, or -ENOMEM. On failure *errmsg (if errmsg is non-NULL) is
 * a one-line message the caller frees: "domain 'NAME': DETAIL" once the
 * domain's name is known, "domain XML: DETAIL" before that (malformed XML,
 * wrong root element, missing name). DETAIL names the element and the bad
 * value, e.g. "<vcpu cpuset='aaa'>: invalid cpuset 'aaa': expected a CPU
 * number at character 1".
 */
int vpack_domxml_parse(const char *buf, size_t len, struct vpack_domxml **out,
                       char **errmsg);
void vpack_domxml_free(struct vpack_domxml *d);

/*
 * Reads only the name and the uuid, for callers that must identify a domain
 * whose definition may otherwise be invalid. Returns 0 with *name (caller
 * frees) and *uuid (caller frees; NULL when the XML has no usable uuid), or
 * -EINVAL / -ENOMEM with *errmsg as for vpack_domxml_parse().
 */
int vpack_domxml_identity(const char *buf, size_t len, char **name, char **uuid,
                          char **errmsg);

const char *vpack_numa_mode_name(enum vpack_numa_mode mode);

/*
 * The request element vpackd writes (virDomainSetMetadata with
 * VPACK_XML_REQUEST_NS): req's pins, e.g.
 *
 *   <request><vcpupin vcpu='1' cpuset='1'/><emulatorpin cpuset='0'/>
 *            <iothreadpin iothread='1' cpuset='0-1'/></request>
 *
 * and <request></request> for a guest that pins nothing. Returns a string
 * the caller frees, or NULL when out of memory.
 */
char *vpack_domxml_request_format(const struct vpack_domxml *req);

/*
 * Puts a domain XML's cputune back to the guest's own request: when
 * <metadata> holds vpack's request element (the first element in
 * VPACK_XML_REQUEST_NS, as libvirt keeps it), every <vcpupin>,
 * <emulatorpin> and <iothreadpin> of the XML is replaced by the request's
 * and the request element is removed. The rest of the document is left as
 * it is. The request is read strictly (only those three elements, each
 * thread once, a vCPU or iothread the domain has, valid CPU sets): anything
 * else is an error and nothing is rewritten, so that no pin is ever taken
 * from metadata vpackd did not write.
 *
 * Returns 1 with *out_xml (caller frees), 0 when there is no request
 * element (*out_xml NULL: the XML is the guest's as it is), -EINVAL with
 * *errmsg (caller frees; "domain 'NAME': vpack's request in <metadata>
 * (urn:vpack:request:1): DETAIL") or -ENOMEM.
 */
int vpack_domxml_request_restore(const char *buf, size_t len, char **out_xml, char **errmsg);

/*
 * The rewrite behind `vpackctl define FILE`. Finds the power policy in any
 * of its three forms:
 *
 *   <domain><powerpolicy level='N'/>...               (short, under domain)
 *   <metadata><powerpolicy level='N'/></metadata>      (short, un-namespaced)
 *   <metadata><vpack:powerpolicy xmlns:vpack="urn:vpack:powerpolicy:1"
 *                                level="N"/></metadata> (namespaced)
 *
 * validates every level found before changing anything (an invalid level,
 * a missing level attribute or two different levels are errors), removes
 * them all and writes one namespaced element into <metadata>, creating
 * <metadata> after <name>/<uuid>/<title>/<description> when the domain has
 * none.
 *
 * Returns 0 with *out_xml (caller frees; the input unchanged when the
 * domain has no policy element) and *out_level (-1 for none), or -EINVAL
 * with *errmsg as for vpack_domxml_parse(), or -ENOMEM. Only the policy is
 * checked here: libvirt validates the rest when the domain is defined.
 */
int vpack_domxml_define_rewrite(const char *buf, size_t len, char **out_xml,
                                int *out_level, char **errmsg);

#endif
