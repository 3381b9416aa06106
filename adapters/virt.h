/* SPDX-License-Identifier: MIT */
/*
 * The libvirt adapter: the only part of vpackd that includes libvirt.h.
 * Everything is keyed by domain UUID (string form). Errors come back as
 * negative errno values, sorted so the caller knows what to do:
 *
 *   -ENOENT    the domain is gone (stopped or undefined): forget it
 *   -EINVAL    the CPU set was refused (a CPU went offline or is outside the
 *              domain's cgroup): re-read the topology, re-plan
 *   -EBUSY     transient (the domain has a job running, timeout): retry later
 *   -ENOTCONN  no connection to libvirtd: wait for the reconnect
 *   -EACCES    libvirt refused us (authentication, access control)
 *   -EIO       anything else: log it, drop this change
 *
 * and, where the caller wants to log it, a message in *errmsg: every
 * function here with a char **errmsg follows vpack/errmsg.h (the caller
 * frees the message; NULL when out of memory; pass NULL for none).
 */
#ifndef VPACK_VIRT_H
#define VPACK_VIRT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "vpack/cpuset.h"

struct vpack_virt;

enum vpack_virt_event {
    VPACK_VIRT_STARTED,      /* started, resumed from save/migration */
    VPACK_VIRT_STOPPED,      /* stopped, crashed, destroyed */
    VPACK_VIRT_METADATA,     /* a namespaced metadata element changed (any namespace) */
    VPACK_VIRT_DEFINED,      /* persistent definition changed or undefined */
};

struct vpack_virt_cbs {
    /* Called on the loop after every successful (re)connect. */
    void (*connected)(void *opaque);
    /* Called on the loop when the connection is lost; a reconnect follows. */
    void (*disconnected)(void *opaque);
    /* Called on the loop from libvirt's event dispatch; may call the
     * functions below (except vpack_virt_free). */
    void (*domain_event)(void *opaque, const char *uuid, enum vpack_virt_event ev);
};

/*
 * Creates the adapter and starts connecting to uri (NULL: qemu:///system).
 * vpack_virt_event_register() must have been called first. Connection
 * attempts retry with backoff (0.5 s doubling to 30 s) until one succeeds;
 * keepalive is enabled, and a lost connection is retried the same way.
 */
int vpack_virt_new(uv_loop_t *loop, const char *uri, const struct vpack_virt_cbs *cbs,
                   void *opaque, struct vpack_virt **out);
/*
 * Opens a connection without a loop, events or reconnects, for short-lived
 * tools (vpackctl). Returns -ENOTCONN when libvirtd cannot be reached,
 * -EACCES when it refuses us; *errmsg says why.
 */
int vpack_virt_open_sync(const char *uri, struct vpack_virt **out, char **errmsg);
/*
 * libvirt's versions, as libvirt encodes them (major * 1000000 + minor *
 * 1000 + micro; 0 not known): the library's (virGetVersion) and, through a
 * read-only connection to uri (NULL: qemu:///system) opened and closed here,
 * the daemon's (vpackctl doctor). Returns 0, or a negative errno with
 * *errmsg saying why the daemon's is not known.
 */
int vpack_virt_versions(const char *uri, unsigned long *library, unsigned long *daemon,
                        char **errmsg);
/*
 * Deregisters events, closes the connection and frees; safe with NULL.
 * Callbacks never run after it returns. For an adapter made by
 * vpack_virt_new() the memory goes when the loop has run the close
 * callbacks of its two handles: run the loop (uv_run) before
 * uv_loop_close(). May be called from the connected and disconnected
 * callbacks, not from domain_event.
 */
void vpack_virt_free(struct vpack_virt *v);
bool vpack_virt_connected(const struct vpack_virt *v);
/*
 * The version of the libvirt vpackd is or was last connected to
 * (virConnectGetLibVersion(): libvirtd's own, not the client library's),
 * "MAJOR.MINOR.MICRO"; NULL before the first connection. Kept across a
 * disconnection; replaced at the next connection.
 */
const char *vpack_virt_lib_version(const struct vpack_virt *v);
/*
 * How many calls vpack made into libvirt that libvirtd answers (each API
 * call is one round trip to libvirtd; libvirt's own keepalive probes are
 * not counted), since the adapter was created.
 */
uint64_t vpack_virt_calls(const struct vpack_virt *v);
/* Why the last connection attempt failed or the connection was lost; ""
 * while connected. Borrowed: valid until the next call on v. */
const char *vpack_virt_last_error(const struct vpack_virt *v);

/*
 * Resolves what a user typed (a name, a UUID or a numeric id, tried in that
 * order) to the domain's UUID. -ENOENT when nothing matches.
 */
int vpack_virt_lookup(struct vpack_virt *v, const char *ident, char uuid[37], char **errmsg);

struct vpack_virt_domain {
    char uuid[37];
    char *name;
    int id;              /* libvirt domain id (running domains) */
    bool persistent;
    char *live_xml;      /* virDomainGetXMLDesc(0) */
    char *inactive_xml;  /* VIR_DOMAIN_XML_INACTIVE; NULL for transient domains */
    int pid;             /* QEMU's pid, or -1 when unknown */
};
void vpack_virt_domain_clear(struct vpack_virt_domain *d);

/* UUIDs of all running domains; free with free() each and the array. */
int vpack_virt_list_running(struct vpack_virt *v, char ***uuids, unsigned *n, char **errmsg);
/* Name, XML (live and inactive) and pid of one running domain. */
int vpack_virt_domain_get(struct vpack_virt *v, const char *uuid, struct vpack_virt_domain *out,
                          char **errmsg);

struct vpack_virt_stats {
    char uuid[37];
    uint64_t cpu_time_ns;     /* cpu.time: every thread of the domain */
    unsigned nvcpus;          /* vcpu.maximum */
    unsigned nvcpus_current;  /* vcpu.current: vCPUs online now */
    bool has_delay;           /* libvirt reported vcpu.N.delay */
    uint64_t *vcpu_time_ns;   /* vcpu.N.time; indexed by vCPU id (10 ms steps:
                                 libvirt reads /proc/PID/task/TID/stat) */
    uint64_t *vcpu_delay_ns;  /* vcpu.N.delay (0 if libvirt lacks it) */
    bool *vcpu_online;        /* vcpu.N.state == running/blocked */
};
/* One bulk stats call for all running domains (VCPU and CPU_TOTAL groups);
 * it does not wait for a domain whose job lock is held. Free with
 * vpack_virt_stats_free(). */
int vpack_virt_stats_all(struct vpack_virt *v, struct vpack_virt_stats **recs, unsigned *n,
                         char **errmsg);
void vpack_virt_stats_free(struct vpack_virt_stats *recs, unsigned n);

/* Live pins as libvirt reports them now (what is applied). */
struct vpack_virt_pins {
    unsigned nvcpus;
    vpack_cpuset *vcpus;      /* [nvcpus] */
    vpack_cpuset emulator;
    unsigned niothreads;
    int *iothread_ids;
    vpack_cpuset *iothreads;  /* [niothreads] */
};
int vpack_virt_pins_get(struct vpack_virt *v, const char *uuid, struct vpack_virt_pins *out,
                        char **errmsg);
void vpack_virt_pins_clear(struct vpack_virt_pins *p);

/*
 * The host NUMA nodes of a running domain's memory placement as libvirt
 * applied it (virDomainGetNumaParameters, live): numad's advice for
 * placement='auto', else the <numatune> nodeset, else every node. Returns 0,
 * or -errno (-EINVAL when libvirt gives no nodeset).
 */
int vpack_virt_numa_nodeset(struct vpack_virt *v, const char *uuid, vpack_cpuset *nodes,
                            char **errmsg);

/*
 * QEMU's pid for the running domain name, from the system driver's pid
 * file (a file read, no libvirt call: safe while libvirtd waits for the
 * hook); -1 when there is none.
 */
int vpack_virt_qemu_pid(const char *name);

enum vpack_thread_kind { VPACK_THREAD_VCPU, VPACK_THREAD_EMULATOR, VPACK_THREAD_IOTHREAD };
/*
 * Pins one thread with VIR_DOMAIN_AFFECT_LIVE only; never the persistent
 * definition. CPUs the host does not have are dropped; if none is left the
 * result is -EINVAL and libvirt is not called. id is ignored for the
 * emulator.
 */
int vpack_virt_pin(struct vpack_virt *v, const char *uuid, enum vpack_thread_kind kind, int id,
                   const vpack_cpuset *cpus, char **errmsg);

/*
 * Writes xml (vpack_domxml_request_format()) as vpack's request element
 * in the running domain's live metadata (VPACK_XML_REQUEST_NS, live only,
 * replacing any earlier one). vpackd keeps it there when it stops (a
 * restore or migration reads it: vpackd(8)); the hook strips it from a
 * migration's XML. -EINVAL when xml is NULL.
 */
int vpack_virt_set_request(struct vpack_virt *v, const char *uuid, const char *xml,
                           char **errmsg);

/*
 * For vpackctl. ident as for vpack_virt_lookup().
 *
 * vpack_virt_set_level() writes <vpack:powerpolicy level='N'/> in vpack's
 * metadata namespace (replacing any earlier one) to the running domain
 * (live), its persistent definition (config), both, or whichever is current
 * when neither is set. A negative level removes the element.
 *
 * vpack_virt_define_xml() defines (or redefines) a persistent domain from
 * xml as given; *name_out (if name_out is non-NULL) is the caller's to free.
 */
int vpack_virt_set_level(struct vpack_virt *v, const char *ident, int level, bool live,
                         bool config, char **errmsg);
int vpack_virt_define_xml(struct vpack_virt *v, const char *xml, char **name_out, char **errmsg);

#endif
