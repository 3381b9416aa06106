// SPDX-License-Identifier: MIT
/*
 * The libvirt adapter (see virt.h): the only file of vpackd that includes
 * libvirt.h. Every libvirt failure is turned into a negative errno and a
 * message once, in virt_error(); nothing above this file sees a
 * virErrorPtr.
 *
 * Connection life cycle, all on the loop thread:
 *
 *   vpack_virt_new ──timer 0──> open thread ──async──> attach ──ok──> connected()
 *                                   │ fails                              │ close callback, or
 *                                   v                                    │ a call finds it dead
 *                         timer 0.5 s, 1 s, ... 5 s                      v
 *                                                               async ──> teardown, disconnected(),
 *                                                                         timer 0 ──> open thread
 *
 * virConnectOpen() runs on a thread of its own (struct opener): it has no
 * timeout, and keepalive starts only once it has returned, so against a
 * libvirtd that accepts a connection but never answers (stopped, hung) it
 * never returns. On the loop it would stop vpackd whole: no control
 * socket, no SIGTERM. A call on a connection that is open is bounded by
 * keepalive (below).
 *
 * libvirt's close callback may run nested inside one of our own calls (the
 * remote driver notices EOF while waiting for a reply) or, with another
 * event implementation, on a libvirt thread. So it only marks the
 * connection dead and wakes the loop with uv_async_send(); the teardown
 * and the reconnect happen from the async callback, on a clean stack.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "virt.h"
#include "vpack/domxml.h"
#include "vpack/errmsg.h"

#define DEFAULT_URI "qemu:///system"
#define BACKOFF_FIRST_MS 500
#define BACKOFF_MAX_MS 5000 /* a failed connect costs little; placement resumes soon */
/*
 * Keepalive: a probe after 7 s of silence from libvirtd, the connection is
 * dead after 3 unanswered probes (about 28 s). libvirtd probes its clients
 * itself, 5 s after the last message it had from one (libvirtd.conf
 * keepalive_interval, default 5): those probes and vpackd's answers keep
 * the line from ever being 7 s silent, so vpackd sends none of its own
 * while libvirtd is alive. At 5 s both sides probed, often at once: about
 * 1.5 exchanges per 5 s instead of 1, each a wake-up of both (issue 24:
 * libvirtd spent 0.1 ms a second on vpackd with no call made). A libvirtd
 * configured not to probe gets vpackd's probes every 7 s.
 */
#define KEEPALIVE_INTERVAL 7
#define KEEPALIVE_COUNT 3
/* Where the system QEMU driver keeps each running domain's pid file. */
#define QEMU_PID_DIR "/run/libvirt/qemu"

struct vpack_virt {
    uv_loop_t *loop;          /* NULL for vpack_virt_open_sync() */
    char *uri;
    struct vpack_virt_cbs cbs;
    void *opaque;

    virConnectPtr conn;
    /* False from the moment libvirt reports the connection closed; read by
     * vpack_virt_connected(), written from libvirt's close callback. */
    atomic_bool alive;
    bool close_cb_registered;
    int lifecycle_cb_id;      /* -1: not registered */
    int metadata_cb_id;
    bool is_qemu;             /* the driver is QEMU: pid files exist */
    char lib_version[32];     /* libvirtd's, "9.0.0", from the last connection; "" none yet */
    bool ever_connected;

    uv_timer_t retry;         /* connect attempts with backoff */
    uv_async_t wake;          /* "the connection died", from any thread */
    uv_async_t opened;        /* "the open thread has an answer" */
    struct opener *opener;    /* the attempt in flight, or NULL */
    unsigned backoff_ms;
    int open_handles;         /* handles still to close before free() */
    bool freeing;

    char last_error[512];
    uint64_t calls;           /* libvirt calls answered by libvirtd (RPC()) */
};

/*
 * Counts one libvirt call that goes to libvirtd, then makes it: every call
 * vpack makes into libvirt's API that libvirtd answers (an RPC) is counted
 * in v->calls (vpack_virt_calls()); keepalive probes are libvirt's own.
 */
#define RPC(v, call) ((v)->calls++, (call))

static void silent_error(void *opaque, virErrorPtr err)
{
    /* libvirt's default handler prints every error on stderr; ours are
     * returned to the caller instead. */
    (void)opaque;
    (void)err;
}

static void conn_lost(struct vpack_virt *v);

/*
 * The one place a libvirt error becomes ours. Codes checked against
 * libvirt 9.0 with QEMU 7.2 on cgroup v1:
 *
 *   pin on a stopped domain            OPERATION_INVALID "domain is not running"
 *   unknown UUID or name               NO_DOMAIN
 *   vCPU pin to a CPU the host lacks   SYSTEM_ERROR (from cgroup, ERANGE)
 *                                      "Unable to write to '.../vcpuN/cpuset.cpus'"
 *   vCPU pin to a CPU the domain's     SYSTEM_ERROR (from cgroup, EACCES)
 *   parent cpuset lost (hotplug)       "Unable to write to '.../cpuset.cpus'"
 *   emulator pin, either case          OPERATION_INVALID "failed to set
 *                                      cpuset.cpus in cgroup for emulator threads"
 *   empty map, vCPU or iothread id     INVALID_ARG
 *   out of range
 *   QEMU died while pinning            SYSTEM_ERROR (ESRCH) "cannot set CPU
 *                                      affinity on process N: No such process"
 *   a job holds the domain (30 s)      OPERATION_TIMEOUT "cannot acquire state
 *                                      change lock (held by ...)"
 */
static int classify(int code, int domain, int int1, const char *msg, bool alive)
{
    if (!msg)
        msg = "";
    switch (code) {
    case VIR_ERR_NO_DOMAIN:
        /* Undefined, or a transient domain that stopped: forget it. */
        return -ENOENT;
    case VIR_ERR_OPERATION_INVALID:
        if (strstr(msg, "not running"))
            return -ENOENT; /* stopped between our lookup and the call */
        if (strstr(msg, "cpuset"))
            return -EINVAL; /* the emulator/iothread cgroup refused the set */
        return -EIO;
    case VIR_ERR_INVALID_ARG:
    case VIR_ERR_CONFIG_UNSUPPORTED:
    case VIR_ERR_XML_ERROR:
    case VIR_ERR_XML_DETAIL:
    case VIR_ERR_XML_INVALID_SCHEMA:
        return -EINVAL;
    case VIR_ERR_OPERATION_TIMEOUT:
    case VIR_ERR_AGENT_UNRESPONSIVE:
        return -EBUSY; /* another job holds the domain: retry later */
    case VIR_ERR_OPERATION_FAILED:
        if (strstr(msg, "state change lock"))
            return -EBUSY;
        return -EIO;
    case VIR_ERR_NO_CONNECT:
    case VIR_ERR_RPC:
        return -ENOTCONN;
    case VIR_ERR_AUTH_FAILED:
    case VIR_ERR_AUTH_CANCELLED:
    case VIR_ERR_AUTH_UNAVAILABLE:
    case VIR_ERR_ACCESS_DENIED:
        return -EACCES;
    case VIR_ERR_SYSTEM_ERROR:
        if (domain == VIR_FROM_RPC || !alive)
            return -ENOTCONN; /* socket errors, "connection closed" */
        if (int1 == ESRCH)
            return -ENOENT; /* "cannot set CPU affinity on process N": QEMU died */
        /* The cgroup write (ERANGE: no such CPU; EACCES on cgroup v1 and
         * EINVAL: not in the parent's cpuset) or sched_setaffinity
         * (EINVAL: outside the thread's cpuset) refused the set. */
        if (strstr(msg, "cpuset.cpus") || strstr(msg, "affinity") || int1 == EINVAL ||
            int1 == ERANGE)
            return -EINVAL;
        return -EIO;
    default:
        return alive ? -EIO : -ENOTCONN;
    }
}

/*
 * Sets *errmsg (if errmsg is non-NULL) to "WHAT: libvirt's message" and
 * returns the class of the last libvirt error of this thread. Call it right
 * after the failing call: any libvirt call, even a successful one, resets
 * the error. A connection found dead here is torn down and retried from the
 * loop.
 */
static int virt_error_what(struct vpack_virt *v, char **errmsg, const char *what)
{
    virError err;
    bool alive = true;
    int r;

    memset(&err, 0, sizeof(err));
    if (virCopyLastError(&err) <= 0 || err.code == VIR_ERR_OK) {
        /* libvirt failed without saying why. */
        virResetError(&err);
        return vpack_errmsg_set(-EIO, errmsg, "%s: unknown libvirt error", what);
    }
    if (v && v->conn && virConnectIsAlive(v->conn) == 0)
        alive = false;
    r = classify(err.code, err.domain, err.int1, err.message, alive);
    vpack_errmsg_set(r, errmsg, "%s: %s", what, err.message ? err.message : "(no message)");
    virResetError(&err);
    virResetLastError();
    if (r == -ENOTCONN && v)
        conn_lost(v);
    return r;
}

/* virt_error_what() with WHAT formatted from fmt. */
static int virt_error(struct vpack_virt *v, char **errmsg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int virt_error(struct vpack_virt *v, char **errmsg, const char *fmt, ...)
{
    char what[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return virt_error_what(v, errmsg, what);
}

/* virt_error() for a connection attempt: the message goes to v->last_error
 * (the bare WHAT when there is no memory for the whole of it). */
static int connect_error(struct vpack_virt *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int connect_error(struct vpack_virt *v, const char *fmt, ...)
{
    char what[256], *msg = NULL;
    va_list ap;
    int r;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    r = virt_error_what(NULL, &msg, what);
    snprintf(v->last_error, sizeof(v->last_error), "%s", msg ? msg : what);
    free(msg);
    return r;
}

static int need_conn(struct vpack_virt *v, char **errmsg)
{
    if (!v || !v->conn || !atomic_load(&v->alive))
        return vpack_errmsg_set(-ENOTCONN, errmsg, "not connected to libvirt");
    return 0;
}

/* ------------------------------------------------------------ connection */

static void on_lifecycle(virConnectPtr conn, virDomainPtr dom, int event, int detail,
                         void *opaque)
{
    struct vpack_virt *v = opaque;
    char uuid[VIR_UUID_STRING_BUFLEN];
    enum vpack_virt_event ev;

    (void)conn;
    switch (event) {
    case VIR_DOMAIN_EVENT_STARTED:
    case VIR_DOMAIN_EVENT_RESUMED:
        ev = VPACK_VIRT_STARTED;
        break;
    case VIR_DOMAIN_EVENT_STOPPED:
    case VIR_DOMAIN_EVENT_SHUTDOWN: /* every detail means "finished"; STOPPED follows */
        ev = VPACK_VIRT_STOPPED;
        break;
    case VIR_DOMAIN_EVENT_CRASHED:
        /* After a crashloaded (kdump) event the guest keeps running. */
        if (detail == VIR_DOMAIN_EVENT_CRASHED_CRASHLOADED)
            return;
        ev = VPACK_VIRT_STOPPED;
        break;
    case VIR_DOMAIN_EVENT_DEFINED:
    case VIR_DOMAIN_EVENT_UNDEFINED:
        ev = VPACK_VIRT_DEFINED;
        break;
    default: /* suspended, pmsuspended: the threads stay where they are */
        return;
    }
    if (!v->cbs.domain_event || virDomainGetUUIDString(dom, uuid) < 0)
        return;
    v->cbs.domain_event(v->opaque, uuid, ev);
}

static void on_metadata(virConnectPtr conn, virDomainPtr dom, int type, const char *nsuri,
                        void *opaque)
{
    struct vpack_virt *v = opaque;
    char uuid[VIR_UUID_STRING_BUFLEN];

    (void)conn;
    /* Every namespace, not only vpack's: the configuration's rules may
     * read another manager's metadata (Nova's flavor). */
    if (type != VIR_DOMAIN_METADATA_ELEMENT || !nsuri)
        return;
    /* vpackd's own record of a guest's request changes nothing it reads. */
    if (strcmp(nsuri, VPACK_XML_REQUEST_NS) == 0)
        return;
    if (!v->cbs.domain_event || virDomainGetUUIDString(dom, uuid) < 0)
        return;
    v->cbs.domain_event(v->opaque, uuid, VPACK_VIRT_METADATA);
}

/* libvirt's close callback: may run nested in our calls or on another
 * thread, so it only records and wakes the loop. */
static void on_conn_closed(virConnectPtr conn, int reason, void *opaque)
{
    struct vpack_virt *v = opaque;
    (void)conn;
    (void)reason;
    atomic_store(&v->alive, false);
    uv_async_send(&v->wake);
}

static void conn_lost(struct vpack_virt *v)
{
    atomic_store(&v->alive, false);
    if (v->loop && !v->freeing)
        uv_async_send(&v->wake);
}

/* Undoes every registration, then closes; errors from a dead connection
 * are expected and ignored. */
static void conn_teardown(struct vpack_virt *v)
{
    if (!v->conn)
        return;
    if (v->lifecycle_cb_id >= 0)
        virConnectDomainEventDeregisterAny(v->conn, v->lifecycle_cb_id);
    if (v->metadata_cb_id >= 0)
        virConnectDomainEventDeregisterAny(v->conn, v->metadata_cb_id);
    if (v->close_cb_registered)
        virConnectUnregisterCloseCallback(v->conn, on_conn_closed);
    virConnectClose(v->conn);
    virResetLastError();
    v->conn = NULL;
    v->lifecycle_cb_id = -1;
    v->metadata_cb_id = -1;
    v->close_cb_registered = false;
    atomic_store(&v->alive, false);
}

static bool driver_is_qemu(virConnectPtr conn)
{
    const char *type = virConnectGetType(conn);
    return type && strcmp(type, "QEMU") == 0;
}

/* After the open: keepalive, close callback, domain events. On failure the
 * reason is in v->last_error and nothing stays registered. */
static int attach(struct vpack_virt *v)
{
    int r;

    v->is_qemu = driver_is_qemu(v->conn);
    /* The version of the libvirt that answers (the daemon's, on a remote or
     * local daemon connection), for vpack_build_info. */
    unsigned long lib;
    if (RPC(v, virConnectGetLibVersion(v->conn, &lib)) == 0)
        snprintf(v->lib_version, sizeof(v->lib_version), "%lu.%lu.%lu", lib / 1000000,
                 lib / 1000 % 1000, lib % 1000);
    else
        virResetLastError();
    atomic_store(&v->alive, true);
    if (!v->loop)
        return 0;

    /* Not fatal: a local socket still reports EOF when libvirtd dies. */
    if (RPC(v, virConnectSetKeepAlive(v->conn, KEEPALIVE_INTERVAL, KEEPALIVE_COUNT)) < 0)
        virResetLastError();

    if (virConnectRegisterCloseCallback(v->conn, on_conn_closed, v, NULL) < 0) {
        r = connect_error(v, "registering the close callback");
        goto fail;
    }
    v->close_cb_registered = true;
    v->lifecycle_cb_id = RPC(v, virConnectDomainEventRegisterAny(
        v->conn, NULL, VIR_DOMAIN_EVENT_ID_LIFECYCLE, VIR_DOMAIN_EVENT_CALLBACK(on_lifecycle), v,
        NULL));
    if (v->lifecycle_cb_id < 0) {
        r = connect_error(v, "registering lifecycle events");
        goto fail;
    }
    v->metadata_cb_id = RPC(v, virConnectDomainEventRegisterAny(
        v->conn, NULL, VIR_DOMAIN_EVENT_ID_METADATA_CHANGE,
        VIR_DOMAIN_EVENT_CALLBACK(on_metadata), v, NULL));
    if (v->metadata_cb_id < 0) {
        r = connect_error(v, "registering metadata events");
        goto fail;
    }
    return 0;

fail:
    conn_teardown(v);
    return r;
}

/* One attempt on the calling thread (vpack_virt_open_sync()). */
static int try_connect(struct vpack_virt *v)
{
    v->conn = virConnectOpen(v->uri);
    if (!v->conn)
        return connect_error(v, "connecting to %s", v->uri);
    return attach(v);
}

/*
 * An open in flight on its own thread. Two owners, the thread and v; the
 * last to let go frees it (and closes a connection nobody took). v lets go
 * when it takes the answer or when it is freed first: a thread still
 * waiting on a libvirtd that never answers outlives v, and then vpackd's
 * exit.
 */
struct opener {
    pthread_mutex_t lock;
    int refs;
    char *uri;
    struct vpack_virt *v;     /* NULL once v let go; under lock */
    bool done;                /* under lock, as are the three below */
    virConnectPtr conn;       /* the answer: a connection, or NULL and ... */
    int ret;                  /* ... the error's class and */
    char err[512];            /* ... its message */
};

/* Drops one owner's hold (o->lock held); frees o when it was the last. */
static void opener_put_locked(struct opener *o)
{
    bool last = --o->refs == 0;
    pthread_mutex_unlock(&o->lock);
    if (!last)
        return;
    if (o->conn)
        virConnectClose(o->conn);
    pthread_mutex_destroy(&o->lock);
    free(o->uri);
    free(o);
}

static void *opener_main(void *arg)
{
    struct opener *o = arg;
    char *msg = NULL, what[300];
    virConnectPtr conn = virConnectOpen(o->uri);
    int r = 0;

    if (!conn) {
        snprintf(what, sizeof(what), "connecting to %s", o->uri);
        r = virt_error_what(NULL, &msg, what);
    }
    pthread_mutex_lock(&o->lock);
    o->conn = conn;
    o->ret = r;
    snprintf(o->err, sizeof(o->err), "%s", msg ? msg : conn ? "" : what);
    o->done = true;
    /* Under the lock: v cannot let go (and close the handle) meanwhile. */
    if (o->v)
        uv_async_send(&o->v->opened);
    opener_put_locked(o);
    free(msg);
    return NULL;
}

/* Starts an open on a thread of its own: 0, or -errno (nothing started). */
static int opener_start(struct vpack_virt *v)
{
    struct opener *o = calloc(1, sizeof(*o));
    pthread_attr_t attr;
    sigset_t all, old;
    pthread_t tid;
    int r;

    if (!o || !(o->uri = strdup(v->uri))) {
        free(o);
        return -ENOMEM;
    }
    pthread_mutex_init(&o->lock, NULL);
    o->refs = 2;
    o->v = v;
    if ((r = pthread_attr_init(&attr)) == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        /* vpackd's signals stay the loop's. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        r = pthread_create(&tid, &attr, opener_main, o);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
    }
    if (r != 0) {
        pthread_mutex_destroy(&o->lock);
        free(o->uri);
        free(o);
        return -r;
    }
    v->opener = o;
    return 0;
}

/* v lets go of its open in flight; the connection, if any, goes in *conn. */
static void opener_release(struct vpack_virt *v, virConnectPtr *conn)
{
    struct opener *o = v->opener;

    if (!o)
        return;
    v->opener = NULL;
    pthread_mutex_lock(&o->lock);
    o->v = NULL;
    if (conn) {
        *conn = o->conn;
        o->conn = NULL;
    }
    opener_put_locked(o);
}

static void on_retry_cb(uv_timer_t *t);

/* A failed attempt: the next one after the backoff, which grows. */
static void retry_later(struct vpack_virt *v)
{
    uv_timer_start(&v->retry, on_retry_cb, v->backoff_ms, 0);
    v->backoff_ms = v->backoff_ms >= BACKOFF_MAX_MS / 2 ? BACKOFF_MAX_MS : v->backoff_ms * 2;
}

static void on_retry_cb(uv_timer_t *t)
{
    struct vpack_virt *v = t->data;
    int r;

    if (v->freeing || v->conn || v->opener)
        return;
    if ((r = opener_start(v)) < 0) {
        snprintf(v->last_error, sizeof(v->last_error), "connecting to %s: no thread: %s",
                 v->uri, strerror(-r));
        retry_later(v);
    }
}

/* The open thread has an answer: attach, or try again later. */
static void on_opened(uv_async_t *a)
{
    struct vpack_virt *v = a->data;
    struct opener *o = v->opener;
    virConnectPtr conn = NULL;
    bool done;

    if (v->freeing || !o)
        return;
    pthread_mutex_lock(&o->lock);
    done = o->done;
    if (done && !o->conn)
        snprintf(v->last_error, sizeof(v->last_error), "%s", o->err);
    pthread_mutex_unlock(&o->lock);
    if (!done)
        return;
    opener_release(v, &conn);
    if (!conn) {
        retry_later(v);
        return;
    }
    v->conn = conn;
    if (attach(v) < 0) {
        retry_later(v);
        return;
    }
    v->backoff_ms = BACKOFF_FIRST_MS;
    v->last_error[0] = '\0';
    v->ever_connected = true;
    if (v->cbs.connected)
        v->cbs.connected(v->opaque);
}

static void on_wake(uv_async_t *a)
{
    struct vpack_virt *v = a->data;

    if (v->freeing || !v->conn || atomic_load(&v->alive))
        return;
    snprintf(v->last_error, sizeof(v->last_error), "connection to %s lost", v->uri);
    conn_teardown(v);
    if (v->cbs.disconnected)
        v->cbs.disconnected(v->opaque);
    /* The caller may have freed us from its callback. */
    if (v->freeing)
        return;
    /* Retry at once (libvirtd may be back already), then back off. */
    v->backoff_ms = BACKOFF_FIRST_MS;
    uv_timer_start(&v->retry, on_retry_cb, 0, 0);
}

static void on_handle_closed(uv_handle_t *h)
{
    struct vpack_virt *v = h->data;
    if (--v->open_handles == 0) {
        free(v->uri);
        free(v);
    }
}

static struct vpack_virt *virt_alloc(uv_loop_t *loop, const char *uri)
{
    struct vpack_virt *v = calloc(1, sizeof(*v));
    if (!v)
        return NULL;
    v->uri = strdup(uri ? uri : DEFAULT_URI);
    if (!v->uri) {
        free(v);
        return NULL;
    }
    v->loop = loop;
    v->lifecycle_cb_id = -1;
    v->metadata_cb_id = -1;
    v->backoff_ms = BACKOFF_FIRST_MS;
    atomic_init(&v->alive, false);
    return v;
}

static int lib_init(void)
{
    if (virInitialize() < 0)
        return -EIO;
    virSetErrorFunc(NULL, silent_error);
    return 0;
}

int vpack_virt_new(uv_loop_t *loop, const char *uri, const struct vpack_virt_cbs *cbs,
                   void *opaque, struct vpack_virt **out)
{
    struct vpack_virt *v = NULL;
    int r;

    *out = NULL;
    if (!loop)
        return -EINVAL;
    if ((r = lib_init()) < 0)
        return r;
    v = virt_alloc(loop, uri);
    if (!v)
        return -ENOMEM;
    if (cbs)
        v->cbs = *cbs;
    v->opaque = opaque;
    if ((r = uv_async_init(loop, &v->wake, on_wake)) < 0) {
        free(v->uri);
        free(v);
        return r;
    }
    v->wake.data = v;
    if ((r = uv_async_init(loop, &v->opened, on_opened)) < 0) {
        v->open_handles = 1;
        uv_close((uv_handle_t *)&v->wake, on_handle_closed);
        return r;
    }
    v->opened.data = v;
    /* Only a pending retry should keep the loop running. */
    uv_unref((uv_handle_t *)&v->wake);
    uv_unref((uv_handle_t *)&v->opened);
    uv_timer_init(loop, &v->retry);
    v->retry.data = v;
    v->open_handles = 3;
    snprintf(v->last_error, sizeof(v->last_error), "connecting to %s", v->uri);
    /* The first attempt runs from the loop, so callbacks never run inside
     * this function. */
    uv_timer_start(&v->retry, on_retry_cb, 0, 0);
    *out = v;
    return 0;
}

int vpack_virt_open_sync(const char *uri, struct vpack_virt **out, char **errmsg)
{
    struct vpack_virt *v;
    int r;

    if (errmsg)
        *errmsg = NULL;
    *out = NULL;
    if ((r = lib_init()) < 0)
        return vpack_errmsg_set(r, errmsg, "cannot initialise libvirt");
    v = virt_alloc(NULL, uri);
    if (!v)
        return vpack_errmsg_set(-ENOMEM, errmsg, "out of memory");
    if ((r = try_connect(v)) < 0) {
        vpack_errmsg_set(r, errmsg, "%s", v->last_error);
        free(v->uri);
        free(v);
        return r;
    }
    v->ever_connected = true;
    *out = v;
    return 0;
}

void vpack_virt_free(struct vpack_virt *v)
{
    if (!v || v->freeing)
        return;
    v->freeing = true;
    conn_teardown(v);
    if (!v->loop) {
        free(v->uri);
        free(v);
        return;
    }
    /* The memory goes in the last close callback: the owner runs the loop
     * after this until it has no handles left. */
    /* An open in flight is left to its thread, which closes what it gets. */
    opener_release(v, NULL);
    uv_timer_stop(&v->retry);
    uv_close((uv_handle_t *)&v->retry, on_handle_closed);
    uv_close((uv_handle_t *)&v->wake, on_handle_closed);
    uv_close((uv_handle_t *)&v->opened, on_handle_closed);
}

const char *vpack_virt_lib_version(const struct vpack_virt *v)
{
    return v && v->lib_version[0] ? v->lib_version : NULL;
}

bool vpack_virt_connected(const struct vpack_virt *v)
{
    return v && v->conn && atomic_load(&((struct vpack_virt *)v)->alive);
}

uint64_t vpack_virt_calls(const struct vpack_virt *v)
{
    return v ? v->calls : 0;
}

const char *vpack_virt_last_error(const struct vpack_virt *v)
{
    return v ? v->last_error : "";
}

/* ---------------------------------------------------------------- domains */

/* Lets go of dom (NULL is fine) and passes r on: every lookup's last step. */
static int put_domain(virDomainPtr dom, int r)
{
    if (dom)
        virDomainFree(dom);
    return r;
}

static int lookup_uuid(struct vpack_virt *v, const char *uuid, virDomainPtr *dom, char **errmsg)
{
    int r;

    *dom = NULL;
    if ((r = need_conn(v, errmsg)) < 0)
        return r;
    *dom = RPC(v, virDomainLookupByUUIDString(v->conn, uuid));
    if (!*dom)
        return virt_error(v, errmsg, "domain %s", uuid);
    return 0;
}

static bool all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

/* 32 hex digits, with or without the four dashes libvirt prints. */
static bool uuid_like(const char *s)
{
    size_t len = strlen(s), digits = 0;
    if (len != 32 && len != 36)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (isxdigit((unsigned char)s[i]))
            digits++;
        else if (s[i] != '-' || len != 36 || (i != 8 && i != 13 && i != 18 && i != 23))
            return false;
    }
    return digits == 32;
}

static bool last_error_is_no_domain(void)
{
    virErrorPtr e = virGetLastError();
    return e && e->code == VIR_ERR_NO_DOMAIN;
}

/* Name first (what users type), then UUID, then numeric id, as virsh
 * accepts them. Only "no such domain" moves on to the next form. */
static int lookup_ident(struct vpack_virt *v, const char *ident, virDomainPtr *dom,
                        char **errmsg)
{
    int r;

    *dom = NULL;
    if ((r = need_conn(v, errmsg)) < 0)
        return r;
    if (!ident || !*ident)
        return vpack_errmsg_set(-EINVAL, errmsg, "empty domain name");
    *dom = RPC(v, virDomainLookupByName(v->conn, ident));
    if (!*dom && last_error_is_no_domain() && uuid_like(ident))
        *dom = RPC(v, virDomainLookupByUUIDString(v->conn, ident));
    if (!*dom && last_error_is_no_domain() && all_digits(ident) && strlen(ident) < 10)
        *dom = RPC(v, virDomainLookupByID(v->conn, atoi(ident)));
    if (!*dom) {
        if (last_error_is_no_domain()) {
            virResetLastError();
            return vpack_errmsg_set(-ENOENT, errmsg, "domain '%s' not found", ident);
        }
        return virt_error(v, errmsg, "domain '%s'", ident);
    }
    return 0;
}

int vpack_virt_lookup(struct vpack_virt *v, const char *ident, char uuid[37], char **errmsg)
{
    virDomainPtr dom = NULL;
    int r;

    if (errmsg)
        *errmsg = NULL;
    if ((r = lookup_ident(v, ident, &dom, errmsg)) < 0)
        goto cleanup;
    if (virDomainGetUUIDString(dom, uuid) < 0) {
        r = virt_error(v, errmsg, "domain '%s'", ident);
        goto cleanup;
    }
    r = 0;
cleanup:
    return put_domain(dom, r);
}

int vpack_virt_list_running(struct vpack_virt *v, char ***uuids, unsigned *n, char **errmsg)
{
    virDomainPtr *doms = NULL;
    char **list = NULL;
    int ndoms = 0, i, r;
    unsigned count = 0;

    if (errmsg)
        *errmsg = NULL;
    *uuids = NULL;
    *n = 0;
    if ((r = need_conn(v, errmsg)) < 0)
        return r;
    ndoms = RPC(v, virConnectListAllDomains(v->conn, &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE));
    if (ndoms < 0) {
        ndoms = 0;
        r = virt_error(v, errmsg, "listing running domains");
        goto cleanup;
    }
    list = calloc(ndoms ? (size_t)ndoms : 1, sizeof(*list));
    if (!list) {
        r = vpack_errmsg_set(-ENOMEM, errmsg, "out of memory");
        goto cleanup;
    }
    for (i = 0; i < ndoms; i++) {
        char uuid[VIR_UUID_STRING_BUFLEN];
        if (virDomainGetUUIDString(doms[i], uuid) < 0)
            continue; /* cannot fail for a domain object we hold */
        list[count] = strdup(uuid);
        if (!list[count]) {
            r = vpack_errmsg_set(-ENOMEM, errmsg, "out of memory");
            goto cleanup;
        }
        count++;
    }
    *uuids = list;
    *n = count;
    list = NULL;
    r = 0;
cleanup:
    if (list) {
        for (unsigned k = 0; k < count; k++)
            free(list[k]);
        free(list);
    }
    for (i = 0; i < ndoms; i++)
        virDomainFree(doms[i]);
    free(doms);
    return r;
}

/* QEMU's pid from the system driver's pid file, or -1. */
int vpack_virt_qemu_pid(const char *name)
{
    char path[4096], buf[32];
    FILE *f;
    long pid = -1;

    if (strchr(name, '/'))
        return -1;
    snprintf(path, sizeof(path), "%s/%s.pid", QEMU_PID_DIR, name);
    f = fopen(path, "re");
    if (!f)
        return -1;
    if (fgets(buf, sizeof(buf), f)) {
        char *end;
        errno = 0;
        pid = strtol(buf, &end, 10);
        if (errno || end == buf || pid <= 0 || pid > INT32_MAX)
            pid = -1;
    }
    fclose(f);
    return (int)pid;
}

/* The _clear() functions free their struct's members: alike in shape only. */
void vpack_virt_domain_clear(struct vpack_virt_domain *d)
{
    if (!d)
        return;
    free(d->name);
    free(d->live_xml);
    free(d->inactive_xml);
    memset(d, 0, sizeof(*d));
    d->id = -1;
    d->pid = -1;
}

int vpack_virt_domain_get(struct vpack_virt *v, const char *uuid, struct vpack_virt_domain *out,
                          char **errmsg)
{
    virDomainPtr dom = NULL;
    struct vpack_virt_domain d = {.id = -1, .pid = -1};
    const char *name;
    unsigned id;
    int persistent, r;

    if (errmsg)
        *errmsg = NULL;
    memset(out, 0, sizeof(*out));
    out->id = -1;
    out->pid = -1;
    if ((r = lookup_uuid(v, uuid, &dom, errmsg)) < 0)
        goto cleanup;
    if (virDomainGetUUIDString(dom, d.uuid) < 0 || !(name = virDomainGetName(dom))) {
        r = virt_error(v, errmsg, "domain %s", uuid);
        goto cleanup;
    }
    if (!(d.name = strdup(name))) {
        r = vpack_errmsg_set(-ENOMEM, errmsg, "out of memory");
        goto cleanup;
    }
    id = virDomainGetID(dom);
    d.id = id == (unsigned)-1 ? -1 : (int)id;
    if ((persistent = RPC(v, virDomainIsPersistent(dom))) < 0) {
        r = virt_error(v, errmsg, "domain %s", d.name);
        goto cleanup;
    }
    d.persistent = persistent == 1;
    if (!(d.live_xml = RPC(v, virDomainGetXMLDesc(dom, 0)))) {
        r = virt_error(v, errmsg, "reading the XML of %s", d.name);
        goto cleanup;
    }
    if (d.persistent && !(d.inactive_xml = RPC(v, virDomainGetXMLDesc(dom, VIR_DOMAIN_XML_INACTIVE)))) {
        r = virt_error(v, errmsg, "reading the persistent XML of %s", d.name);
        goto cleanup;
    }
    if (d.id >= 0 && v->is_qemu)
        d.pid = vpack_virt_qemu_pid(d.name);
    *out = d;
    memset(&d, 0, sizeof(d));
    r = 0;
cleanup:
    vpack_virt_domain_clear(&d);
    if (dom)
        virDomainFree(dom);
    return r;
}

/* ------------------------------------------------------------------ stats */

static bool param_u64(const virTypedParameter *p, uint64_t *out)
{
    switch (p->type) {
    case VIR_TYPED_PARAM_INT:
        if (p->value.i < 0)
            return false;
        *out = (uint64_t)p->value.i;
        return true;
    case VIR_TYPED_PARAM_UINT:
        *out = p->value.ui;
        return true;
    case VIR_TYPED_PARAM_LLONG:
        if (p->value.l < 0)
            return false;
        *out = (uint64_t)p->value.l;
        return true;
    case VIR_TYPED_PARAM_ULLONG:
        *out = p->value.ul;
        return true;
    default:
        return false;
    }
}

static void stats_clear_one(struct vpack_virt_stats *s)
{
    free(s->vcpu_time_ns);
    free(s->vcpu_delay_ns);
    free(s->vcpu_online);
    memset(s, 0, sizeof(*s));
}

void vpack_virt_stats_free(struct vpack_virt_stats *recs, unsigned n)
{
    if (!recs)
        return;
    for (unsigned i = 0; i < n; i++)
        stats_clear_one(&recs[i]);
    free(recs);
}

/* Reads one record in two passes over its parameters: vcpu.maximum sizes
 * the arrays, then every field is matched once (no per-vCPU lookups, which
 * would be quadratic in the number of vCPUs). */
static int stats_parse(virDomainStatsRecordPtr rec, struct vpack_virt_stats *s)
{
    uint64_t val;

    if (virDomainGetUUIDString(rec->dom, s->uuid) < 0)
        return -EIO;
    for (int i = 0; i < rec->nparams; i++) {
        const virTypedParameter *p = &rec->params[i];
        if (strcmp(p->field, "vcpu.maximum") == 0 && param_u64(p, &val) && val <= UINT32_MAX)
            s->nvcpus = (unsigned)val;
        else if (strcmp(p->field, "vcpu.current") == 0 && param_u64(p, &val) &&
                 val <= UINT32_MAX)
            s->nvcpus_current = (unsigned)val;
        else if (strcmp(p->field, "cpu.time") == 0 && param_u64(p, &val))
            s->cpu_time_ns = val;
    }
    if (s->nvcpus == 0)
        return 0;
    s->vcpu_time_ns = calloc(s->nvcpus, sizeof(*s->vcpu_time_ns));
    s->vcpu_delay_ns = calloc(s->nvcpus, sizeof(*s->vcpu_delay_ns));
    s->vcpu_online = calloc(s->nvcpus, sizeof(*s->vcpu_online));
    if (!s->vcpu_time_ns || !s->vcpu_delay_ns || !s->vcpu_online)
        return -ENOMEM;
    for (int i = 0; i < rec->nparams; i++) {
        const virTypedParameter *p = &rec->params[i];
        const char *f = p->field, *field;
        char *end;
        unsigned long id;

        if (strncmp(f, "vcpu.", 5) != 0 || !isdigit((unsigned char)f[5]))
            continue;
        errno = 0;
        id = strtoul(f + 5, &end, 10);
        if (errno || *end != '.' || id >= s->nvcpus)
            continue;
        field = end + 1;
        if (!param_u64(p, &val))
            continue;
        if (strcmp(field, "time") == 0) {
            s->vcpu_time_ns[id] = val;
        } else if (strcmp(field, "delay") == 0) {
            s->vcpu_delay_ns[id] = val;
            s->has_delay = true;
        } else if (strcmp(field, "state") == 0) {
            s->vcpu_online[id] = val == VIR_VCPU_RUNNING || val == VIR_VCPU_BLOCKED;
        }
    }
    return 0;
}

int vpack_virt_stats_all(struct vpack_virt *v, struct vpack_virt_stats **recs, unsigned *n,
                         char **errmsg)
{
    virDomainStatsRecordPtr *records = NULL;
    struct vpack_virt_stats *out = NULL;
    int nrec = 0, r;

    if (errmsg)
        *errmsg = NULL;
    *recs = NULL;
    *n = 0;
    if ((r = need_conn(v, errmsg)) < 0)
        return r;
    /* NOWAIT: a domain whose job lock is held (a long monitor command, a
     * migration) would otherwise stall this call, and the whole loop, for
     * libvirt's 30 s job timeout; without the job libvirt skips only what
     * needs the monitor (vcpu.N.halted), not the fields we read. */
    nrec = RPC(v, virConnectGetAllDomainStats(v->conn, VIR_DOMAIN_STATS_VCPU | VIR_DOMAIN_STATS_CPU_TOTAL,
                                       &records,
                                       VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE |
                                           VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT));
    if (nrec < 0) {
        records = NULL;
        r = virt_error(v, errmsg, "reading domain statistics");
        goto cleanup;
    }
    out = calloc(nrec ? (size_t)nrec : 1, sizeof(*out));
    if (!out) {
        r = vpack_errmsg_set(-ENOMEM, errmsg, "out of memory");
        goto cleanup;
    }
    for (int i = 0; i < nrec; i++) {
        if ((r = stats_parse(records[i], &out[i])) < 0) {
            vpack_errmsg_set(r, errmsg, "%s", r == -ENOMEM ? "out of memory" : "bad stats record");
            vpack_virt_stats_free(out, (unsigned)i + 1);
            out = NULL;
            goto cleanup;
        }
    }
    *recs = out;
    *n = (unsigned)nrec;
    out = NULL;
    r = 0;
cleanup:
    if (records)
        virDomainStatsRecordListFree(records);
    return r;
}

/* ------------------------------------------------------------------- pins */

/* Number of host CPUs libvirt knows (highest id + 1, offline ones too). */
static int host_cpus(struct vpack_virt *v, char **errmsg)
{
    int n = RPC(v, virNodeGetCPUMap(v->conn, NULL, NULL, 0));
    if (n < 0)
        return virt_error(v, errmsg, "reading the host CPU map");
    if (n == 0)
        return vpack_errmsg_set(-EIO, errmsg, "libvirt reports no host CPU");
    return n;
}

static void map_to_cpuset(const unsigned char *map, int maplen, vpack_cpuset *out)
{
    vpack_cpuset_zero(out);
    for (int i = 0; i < maplen * 8 && i < VPACK_CPUSET_MAX; i++)
        if (map[i / 8] & (1u << (i % 8)))
            vpack_cpuset_set(out, (unsigned)i);
}

void vpack_virt_pins_clear(struct vpack_virt_pins *p)
{
    if (!p)
        return;
    free(p->vcpus);
    free(p->iothread_ids);
    free(p->iothreads);
    memset(p, 0, sizeof(*p));
}

int vpack_virt_pins_get(struct vpack_virt *v, const char *uuid, struct vpack_virt_pins *out,
                        char **errmsg)
{
    virDomainPtr dom = NULL;
    virDomainIOThreadInfoPtr *info = NULL;
    unsigned char *maps = NULL;
    struct vpack_virt_pins p = {0};
    int ncpus, maplen, nmax, nv, ninfo = 0, r;

    if (errmsg)
        *errmsg = NULL;
    memset(out, 0, sizeof(*out));
    if ((r = lookup_uuid(v, uuid, &dom, errmsg)) < 0)
        goto cleanup;
    if ((r = ncpus = host_cpus(v, errmsg)) < 0)
        goto cleanup;
    maplen = VIR_CPU_MAPLEN(ncpus);

    nmax = RPC(v, virDomainGetVcpusFlags(dom, VIR_DOMAIN_AFFECT_LIVE | VIR_DOMAIN_VCPU_MAXIMUM));
    if (nmax < 0) {
        r = virt_error(v, errmsg, "reading the vCPU count of %s", uuid);
        goto cleanup;
    }
    maps = calloc(nmax ? (size_t)nmax : 1, (size_t)maplen);
    p.vcpus = calloc(nmax ? (size_t)nmax : 1, sizeof(*p.vcpus));
    if (!maps || !p.vcpus) {
        r = vpack_errmsg_set(-ENOMEM, errmsg, "out of memory");
        goto cleanup;
    }
    nv = nmax ? RPC(v, virDomainGetVcpuPinInfo(dom, nmax, maps, maplen, VIR_DOMAIN_AFFECT_LIVE)) : 0;
    if (nv < 0) {
        r = virt_error(v, errmsg, "reading the vCPU pins of %s", uuid);
        goto cleanup;
    }
    for (int i = 0; i < nv && i < nmax; i++)
        map_to_cpuset(VIR_GET_CPUMAP(maps, maplen, i), maplen, &p.vcpus[i]);
    p.nvcpus = (unsigned)(nv < nmax ? nv : nmax);

    memset(maps, 0, (size_t)maplen);
    r = RPC(v, virDomainGetEmulatorPinInfo(dom, maps, maplen, VIR_DOMAIN_AFFECT_LIVE));
    if (r < 0) {
        r = virt_error(v, errmsg, "reading the emulator pin of %s", uuid);
        goto cleanup;
    }
    map_to_cpuset(maps, maplen, &p.emulator);
    if (r == 0 || vpack_cpuset_empty(&p.emulator)) /* "not pinned": every host CPU */
        vpack_cpuset_set_range(&p.emulator, 0, (unsigned)ncpus - 1);

    ninfo = RPC(v, virDomainGetIOThreadInfo(dom, &info, VIR_DOMAIN_AFFECT_LIVE));
    if (ninfo < 0) {
        ninfo = 0;
        info = NULL;
        r = virt_error(v, errmsg, "reading the iothreads of %s", uuid);
        goto cleanup;
    }
    if (ninfo > 0) {
        p.iothread_ids = calloc((size_t)ninfo, sizeof(*p.iothread_ids));
        p.iothreads = calloc((size_t)ninfo, sizeof(*p.iothreads));
        if (!p.iothread_ids || !p.iothreads) {
            r = vpack_errmsg_set(-ENOMEM, errmsg, "out of memory");
            goto cleanup;
        }
        for (int i = 0; i < ninfo; i++) {
            p.iothread_ids[i] = (int)info[i]->iothread_id;
            map_to_cpuset(info[i]->cpumap, info[i]->cpumaplen, &p.iothreads[i]);
        }
        p.niothreads = (unsigned)ninfo;
    }
    *out = p;
    memset(&p, 0, sizeof(p));
    r = 0;
cleanup:
    vpack_virt_pins_clear(&p);
    for (int i = 0; i < ninfo; i++)
        virDomainIOThreadInfoFree(info[i]);
    free(info);
    free(maps);
    if (dom)
        virDomainFree(dom);
    return r;
}

int vpack_virt_numa_nodeset(struct vpack_virt *v, const char *uuid, vpack_cpuset *nodes,
                            char **errmsg)
{
    virDomainPtr dom = NULL;
    virTypedParameterPtr params = NULL;
    int n = 0, r;
    const char *text = NULL;

    if (errmsg)
        *errmsg = NULL;
    vpack_cpuset_zero(nodes);
    if ((r = lookup_uuid(v, uuid, &dom, errmsg)) < 0)
        return r;
    if (virDomainGetNumaParameters(dom, NULL, &n, VIR_DOMAIN_AFFECT_LIVE) < 0 || n <= 0 ||
        !(params = calloc((size_t)n, sizeof(*params))) ||
        virDomainGetNumaParameters(dom, params, &n, VIR_DOMAIN_AFFECT_LIVE) < 0) {
        r = params || n <= 0 ? virt_error(v, errmsg, "reading the NUMA placement of %s", uuid)
                             : vpack_errmsg_set(-ENOMEM, errmsg, "out of memory");
        goto cleanup;
    }
    for (int i = 0; i < n; i++)
        if (!strcmp(params[i].field, VIR_DOMAIN_NUMA_NODESET) &&
            params[i].type == VIR_TYPED_PARAM_STRING)
            text = params[i].value.s;
    if (!text || !*text || vpack_cpuset_parse(nodes, text, NULL) < 0)
        r = vpack_errmsg_set(-EINVAL, errmsg, "no NUMA nodeset for %s (libvirt said '%s')", uuid,
                             text ? text : "nothing");
cleanup:
    if (params)
        virTypedParamsClear(params, n);
    free(params);
    if (dom)
        virDomainFree(dom);
    return r;
}

int vpack_virt_pin(struct vpack_virt *v, const char *uuid, enum vpack_thread_kind kind, int id,
                   const vpack_cpuset *cpus, char **errmsg)
{
    virDomainPtr dom = NULL;
    unsigned char *map = NULL;
    int ncpus, maplen, r;
    bool any = false;
    const unsigned flags = VIR_DOMAIN_AFFECT_LIVE; /* never the persistent definition */

    if (errmsg)
        *errmsg = NULL;
    if ((r = need_conn(v, errmsg)) < 0)
        return r;
    if (kind != VPACK_THREAD_EMULATOR && id < 0)
        return vpack_errmsg_set(-EINVAL, errmsg, "invalid thread id %d", id);
    if ((r = ncpus = host_cpus(v, errmsg)) < 0)
        return r;
    maplen = VIR_CPU_MAPLEN(ncpus);
    if (!(map = calloc(1, (size_t)maplen)))
        return vpack_errmsg_set(-ENOMEM, errmsg, "out of memory");
    /* CPUs the host does not have are dropped. */
    VPACK_CPUSET_FOREACH(cpu, cpus) {
        if (cpu >= ncpus)
            break;
        VIR_USE_CPU(map, cpu);
        any = true;
    }
    if (!any) {
        r = vpack_errmsg_set(-EINVAL, errmsg, "no CPU of the set exists on this host (%d CPUs)",
                             ncpus);
        goto cleanup;
    }
    if ((r = lookup_uuid(v, uuid, &dom, errmsg)) < 0)
        goto cleanup;
    switch (kind) {
    case VPACK_THREAD_VCPU:
        if (RPC(v, virDomainPinVcpuFlags(dom, (unsigned)id, map, maplen, flags)) < 0)
            r = virt_error(v, errmsg, "pinning vCPU %d", id);
        break;
    case VPACK_THREAD_EMULATOR:
        if (RPC(v, virDomainPinEmulator(dom, map, maplen, flags)) < 0)
            r = virt_error(v, errmsg, "pinning the emulator");
        break;
    case VPACK_THREAD_IOTHREAD:
        if (RPC(v, virDomainPinIOThread(dom, (unsigned)id, map, maplen, flags)) < 0)
            r = virt_error(v, errmsg, "pinning iothread %d", id);
        break;
    default:
        r = vpack_errmsg_set(-EINVAL, errmsg, "unknown thread kind %d", (int)kind);
        break;
    }
cleanup:
    free(map);
    if (dom)
        virDomainFree(dom);
    return r;
}

int vpack_virt_set_request(struct vpack_virt *v, const char *uuid, const char *xml,
                           char **errmsg)
{
    virDomainPtr dom = NULL;
    int r;

    if (errmsg)
        *errmsg = NULL;
    if (!xml)
        return vpack_errmsg_set(-EINVAL, errmsg, "no request to write");
    if ((r = lookup_uuid(v, uuid, &dom, errmsg)) < 0)
        return put_domain(dom, r);
    /* Live only: the persistent definition is the user's, and a next start has no vpack pin. */
    if (RPC(v, virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, xml,
                                    VPACK_XML_REQUEST_NS_PREFIX, VPACK_XML_REQUEST_NS,
                                    VIR_DOMAIN_AFFECT_LIVE)) < 0)
        r = virt_error(v, errmsg, "writing the guest's request to its live metadata");
    return put_domain(dom, r);
}

/* --------------------------------------------------- tools (vpackctl) */

int vpack_virt_set_level(struct vpack_virt *v, const char *ident, int level, bool live,
                         bool config, char **errmsg)
{
    virDomainPtr dom = NULL;
    char xml[64];
    unsigned flags = VIR_DOMAIN_AFFECT_CURRENT;
    int r;

    if (errmsg)
        *errmsg = NULL;
    if (level > 2)
        return vpack_errmsg_set(-EINVAL, errmsg, "invalid power policy level %d (0, 1 or 2)",
                                level);
    if (live)
        flags |= VIR_DOMAIN_AFFECT_LIVE;
    if (config)
        flags |= VIR_DOMAIN_AFFECT_CONFIG;
    if ((r = lookup_ident(v, ident, &dom, errmsg)) < 0)
        goto cleanup;
    snprintf(xml, sizeof(xml), "<%s %s='%d'/>", VPACK_XML_POLICY_ELEMENT, VPACK_XML_POLICY_LEVEL,
             level);
    /* The element replaces any earlier one in our namespace; NULL removes it. */
    if (RPC(v, virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, level >= 0 ? xml : NULL,
                             level >= 0 ? VPACK_XML_NS_PREFIX : NULL, VPACK_XML_NS, flags)) < 0) {
        r = virt_error(v, errmsg, "setting the power policy of '%s'", ident);
        goto cleanup;
    }
    r = 0;
cleanup:
    return put_domain(dom, r);
}

int vpack_virt_define_xml(struct vpack_virt *v, const char *xml, char **name_out, char **errmsg)
{
    virDomainPtr dom = NULL;
    const char *name;
    int r;

    if (errmsg)
        *errmsg = NULL;
    if (name_out)
        *name_out = NULL;
    if ((r = need_conn(v, errmsg)) < 0)
        return r;
    if (!(dom = RPC(v, virDomainDefineXML(v->conn, xml)))) {
        r = virt_error(v, errmsg, "defining the domain");
        goto cleanup;
    }
    if (name_out) {
        if (!(name = virDomainGetName(dom))) {
            r = virt_error(v, errmsg, "reading the new domain's name");
            goto cleanup;
        }
        if (!(*name_out = strdup(name))) {
            r = vpack_errmsg_set(-ENOMEM, errmsg, "out of memory");
            goto cleanup;
        }
    }
    r = 0;
cleanup:
    return put_domain(dom, r);
}

int vpack_virt_versions(const char *uri, unsigned long *library, unsigned long *daemon,
                        char **errmsg)
{
    virConnectPtr conn;
    int r;

    *library = *daemon = 0;
    if ((r = lib_init()) < 0)
        return vpack_errmsg_set(r, errmsg, "libvirt could not be initialised");
    if (virGetVersion(library, NULL, NULL) < 0)
        *library = 0;
    /* Read-only: the version needs no more, and a user libvirtd refuses a
     * read-write connection may still ask. */
    conn = virConnectOpenReadOnly(uri ? uri : DEFAULT_URI);
    if (!conn)
        return virt_error_what(NULL, errmsg, "connecting");
    r = virConnectGetLibVersion(conn, daemon) < 0 ? virt_error_what(NULL, errmsg, "version") : 0;
    if (r < 0)
        *daemon = 0;
    virConnectClose(conn);
    return r;
}
