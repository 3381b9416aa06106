// SPDX-License-Identifier: MIT
/*
 * libvirt's event loop (virEventRegisterImpl) on libuv.
 *
 * Threads. libvirt calls the six functions from its own threads as well as
 * from inside the callbacks we dispatch, sometimes holding its own locks.
 * All state below is guarded by ev_lock, which is never held while a libvirt
 * callback runs (lock order: libvirt's locks, then ev_lock). Only the loop
 * thread touches libuv. A call from another thread records what it wants
 * (a record's desired events or period, a "dirty" flag, the dead lists) and
 * wakes the loop with uv_async_send(); the async callback applies it. A call
 * on the loop thread applies it at once, the same way (flush_locked()).
 *
 * Records. A timeout is a struct vtimer with its own uv_timer_t; period 0
 * ("every loop iteration") is served by one shared uv_idle_t that runs only
 * while some timeout has period 0, so the loop spins exactly as long as
 * libvirt asks it to. A watch is a struct vwatch; watches hang off one
 * struct vpoller per fd, which owns the uv_poll_t: libvirt allows several
 * watches on one fd, libuv only one poll handle per fd and loop.
 *
 * Removal and free callbacks. Remove unlinks the record at once, so it is
 * never dispatched again, and returns. The user's free callback runs later
 * from a clean stack: a timeout's from its uv_timer_t's close callback (or
 * from the async callback when the timer was never initialised), a watch's
 * from the async callback. A poller is closed when its last watch goes.
 * Memory of a record being dispatched stays valid until after the dispatch:
 * libuv calls close callbacks only at the end of the loop iteration, and
 * dispatch loops look records up again after every callback.
 *
 * Deferred reads (vpack_virt_event_defer_reads()). A poller whose watches
 * ask only to read is then left out of libuv's poll set ("deferred"):
 * nothing it receives wakes the process. vpack_virt_event_check() polls the
 * deferred pollers with poll(2) and dispatches what is ready; a poller it is
 * serving stays deferred even when its watch asks to write (libvirt's answer
 * to a keepalive probe), so the answer goes out in the same call, with no
 * epoll_ctl and no second pass of the loop. Asking to write outside that
 * call puts the poller back in libuv's set at once: a write never waits for
 * the next check.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include <libvirt/libvirt.h>
#include <uv.h>

#include "virt-event.h"

#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

struct vwatch {
    struct vwatch *next;
    int id;
    int fd;
    int events;               /* VIR_EVENT_HANDLE_*; 0 = paused */
    unsigned seen;            /* last dispatch round of its poller that visited it */
    virEventHandleCallback cb;
    void *opaque;
    virFreeCallback ff;
};

struct vpoller {
    struct vpoller *next;
    int fd;
    bool inited;              /* uv_poll_init() done: must be uv_close()d */
    bool dirty;               /* desired events may differ from applied */
    bool failed;              /* libuv refused the fd: report ERROR once */
    int applied;              /* UV_* events the uv_poll_t runs with */
    bool deferred;            /* left to vpack_virt_event_check(), not in libuv's set */
    bool in_check;            /* being served by vpack_virt_event_check() */
    unsigned round;           /* dispatch round counter */
    struct vwatch *watches;
    uv_poll_t poll;
};

struct vtimer {
    struct vtimer *next;
    int id;
    int period;               /* ms; -1 disabled, 0 every loop iteration */
    bool inited;              /* uv_timer_init() done: must be uv_close()d */
    bool dirty;               /* period changed (or re-armed) since applied */
    bool abandoned;           /* dropped by vpack_virt_event_close(): no ff */
    unsigned seen;            /* last idle round that dispatched it */
    virEventTimeoutCallback cb;
    void *opaque;
    virFreeCallback ff;
    uv_timer_t timer;
};

static uv_once_t ev_once = UV_ONCE_INIT;
static uv_mutex_t ev_lock;
static bool ev_impl_registered; /* virEventRegisterImpl() done (once a process) */
static int ev_next_watch = 1;   /* ids keep counting across re-registrations */
static int ev_next_timer = 1;

static struct {
    uv_loop_t *loop;            /* NULL: not bound to a loop */
    uv_thread_t thread;         /* the loop thread */
    bool closing;               /* vpack_virt_event_close() called */
    bool defer_reads;           /* vpack_virt_event_defer_reads() */
    unsigned nopen;             /* our handles whose close callback is due */
    uv_async_t async;
    uv_idle_t idle;
    unsigned idle_round;
    struct vtimer *timers;      /* live */
    struct vpoller *pollers;    /* live: at least one watch */
    struct vtimer *dead_timers; /* removed, not yet handed to uv_close() */
    struct vpoller *dead_pollers;
    struct vtimer *reap_timers; /* never initialised: ff and free from async */
    struct vpoller *reap_pollers;
    struct vwatch *reap_watches;
} ev;

static void init_lock(void)
{
    if (uv_mutex_init(&ev_lock) != 0)
        abort();
}

static bool on_loop_thread_locked(void)
{
    uv_thread_t self = uv_thread_self();
    return uv_thread_equal(&self, &ev.thread);
}

static void wake_locked(void)
{
    if (ev.loop && !ev.closing)
        uv_async_send(&ev.async);
}

/* libvirt's handle events, libuv's poll events and poll(2)'s, row by row.
 * Errors are always reported by libuv and poll(2); neither has a flag to
 * ask for them. */
enum { EV_VIR, EV_UV, EV_POLL };
static const int event_map[][3] = {
    {VIR_EVENT_HANDLE_READABLE, UV_READABLE, POLLIN},
    {VIR_EVENT_HANDLE_WRITABLE, UV_WRITABLE, POLLOUT},
    {VIR_EVENT_HANDLE_HANGUP, UV_DISCONNECT, POLLHUP},
};

/* The events of column from in @in, as those of column to. */
static int map_events(int in, int from, int to)
{
    int out = 0;
    for (size_t i = 0; i < sizeof(event_map) / sizeof(event_map[0]); i++)
        if (in & event_map[i][from])
            out |= event_map[i][to];
    return out;
}

static int events_to_uv(int events)
{
    return map_events(events, EV_VIR, EV_UV);
}

static int events_from_uv(int uv)
{
    return map_events(uv, EV_UV, EV_VIR);
}

/* The three lookups below walk the same lists by different keys. */
static struct vpoller *poller_by_fd_locked(int fd)
{
    for (struct vpoller *p = ev.pollers; p; p = p->next)
        if (p->fd == fd)
            return p;
    return NULL;
}

static struct vwatch *watch_by_id_locked(int id, struct vpoller **pp)
{
    for (struct vpoller *p = ev.pollers; p; p = p->next)
        for (struct vwatch *w = p->watches; w; w = w->next)
            if (w->id == id) {
                if (pp)
                    *pp = p;
                return w;
            }
    return NULL;
}

static struct vtimer *timer_by_id_locked(int id)
{
    for (struct vtimer *t = ev.timers; t; t = t->next)
        if (t->id == id)
            return t;
    return NULL;
}

/* Next id from *counter: positive, wrapping past INT_MAX, skipping live ids. */
static int next_id_locked(int *counter, bool is_timer)
{
    for (;;) {
        int id = *counter;
        *counter = id == INT_MAX ? 1 : id + 1;
        if (is_timer ? !timer_by_id_locked(id) : !watch_by_id_locked(id, NULL))
            return id;
    }
}

static void handle_closed(void)
{
    uv_mutex_lock(&ev_lock);
    if (--ev.nopen == 0 && ev.closing) {
        /* Everything is closed and reaped: ready for another register. */
        ev.loop = NULL;
        ev.closing = false;
    }
    uv_mutex_unlock(&ev_lock);
}

static void timer_close_cb(uv_handle_t *h)
{
    struct vtimer *t = container_of(h, struct vtimer, timer);
    if (!t->abandoned && t->ff)
        t->ff(t->opaque);
    free(t);
    handle_closed();
}

static void poller_close_cb(uv_handle_t *h)
{
    free(container_of(h, struct vpoller, poll));
    handle_closed();
}

static void internal_close_cb(uv_handle_t *h)
{
    handle_closed();
}

static void poll_cb(uv_poll_t *h, int status, int uv_events);
static void timer_cb(uv_timer_t *h);
static void idle_cb(uv_idle_t *h);

static void poller_sync_locked(struct vpoller *p)
{
    int want = 0;
    int r;

    p->dirty = false;
    if (!p->inited) {
        r = uv_poll_init(ev.loop, &p->poll, p->fd);
        if (r < 0) {
            p->failed = true;
            return;
        }
        p->inited = true;
        ev.nopen++;
    }
    for (struct vwatch *w = p->watches; w; w = w->next)
        want |= events_to_uv(w->events);
    /* Reading only, or served by vpack_virt_event_check() now: not libuv's. */
    p->deferred = ev.defer_reads && (p->in_check || !(want & UV_WRITABLE));
    if (p->deferred)
        want = 0;
    if (want == p->applied)
        return;
    if (want == 0) {
        uv_poll_stop(&p->poll);
        p->applied = 0;
        return;
    }
    r = uv_poll_start(&p->poll, want, poll_cb);
    if (r < 0) {
        p->failed = true;
        p->applied = 0;
        return;
    }
    p->applied = want;
}

static void timer_sync_locked(struct vtimer *t)
{
    t->dirty = false;
    if (!t->inited) {
        uv_timer_init(ev.loop, &t->timer);
        t->inited = true;
        ev.nopen++;
    }
    /* libvirt restarts the countdown on every update, even to the same period. */
    if (t->period > 0)
        uv_timer_start(&t->timer, timer_cb, (uint64_t)t->period, (uint64_t)t->period);
    else
        uv_timer_stop(&t->timer);
}

/*
 * Applies every recorded change to libuv; loop thread only. Dead records
 * go first, so that a new poller for a reused fd number never meets the
 * old one's uv_poll_t. Calls no user callback.
 */
static void flush_locked(void)
{
    struct vpoller *p;
    struct vtimer *t;
    bool wake = false;
    bool any_zero = false;

    while ((p = ev.dead_pollers)) {
        ev.dead_pollers = p->next;
        if (p->inited) {
            uv_close((uv_handle_t *)&p->poll, poller_close_cb);
        } else {
            /* Its failure report may be iterating it: free it from async. */
            p->next = ev.reap_pollers;
            ev.reap_pollers = p;
            wake = true;
        }
    }
    while ((t = ev.dead_timers)) {
        ev.dead_timers = t->next;
        if (t->inited) {
            uv_close((uv_handle_t *)&t->timer, timer_close_cb);
        } else {
            t->next = ev.reap_timers;
            ev.reap_timers = t;
            wake = true;
        }
    }
    for (p = ev.pollers; p; p = p->next) {
        if (p->dirty)
            poller_sync_locked(p);
        if (p->failed)
            wake = true;
    }
    for (t = ev.timers; t; t = t->next) {
        if (t->dirty)
            timer_sync_locked(t);
        if (t->period == 0)
            any_zero = true;
    }
    if (!ev.closing) {
        if (any_zero)
            uv_idle_start(&ev.idle, idle_cb);
        else
            uv_idle_stop(&ev.idle);
    }
    if (ev.reap_watches)
        wake = true;
    if (wake)
        wake_locked();
}

/* After a change: apply it now on the loop thread, else wake the loop. */
static void changed_locked(void)
{
    if (on_loop_thread_locked())
        flush_locked();
    else
        wake_locked();
}

/*
 * Calls the callbacks of @p's watches that want @events (ERROR and HANGUP
 * go to every enabled watch, as poll(2) reports them unasked). Each watch
 * at most once; watches added meanwhile wait for the next round. Drops the
 * lock around each callback; @p itself stays allocated meanwhile.
 */
static void dispatch_watches_locked(struct vpoller *p, int events)
{
    unsigned round = ++p->round;

    for (;;) {
        struct vwatch *w;
        virEventHandleCallback cb;
        void *opaque;
        int id, fd, mine;

        for (w = p->watches; w; w = w->next)
            if (w->seen != round && w->events != 0)
                break;
        if (!w)
            return;
        w->seen = round;
        mine = events & (w->events | VIR_EVENT_HANDLE_ERROR | VIR_EVENT_HANDLE_HANGUP);
        if (!mine)
            continue;
        cb = w->cb;
        opaque = w->opaque;
        id = w->id;
        fd = w->fd;
        uv_mutex_unlock(&ev_lock);
        cb(id, fd, mine, opaque);
        uv_mutex_lock(&ev_lock);
    }
}

static void poll_cb(uv_poll_t *h, int status, int uv_events)
{
    struct vpoller *p = container_of(h, struct vpoller, poll);
    int events;

    uv_mutex_lock(&ev_lock);
    if (status < 0) {
        /* libuv has stopped the handle; the next update restarts it. */
        p->applied = 0;
        events = VIR_EVENT_HANDLE_ERROR;
    } else {
        events = events_from_uv(uv_events);
    }
    dispatch_watches_locked(p, events);
    uv_mutex_unlock(&ev_lock);
}

static void timer_cb(uv_timer_t *h)
{
    struct vtimer *t = container_of(h, struct vtimer, timer);
    virEventTimeoutCallback cb;
    void *opaque;
    int id;

    uv_mutex_lock(&ev_lock);
    /* Removed or changed on another thread, not yet applied. */
    if (timer_by_id_locked(t->id) != t || t->period <= 0) {
        uv_mutex_unlock(&ev_lock);
        return;
    }
    cb = t->cb;
    opaque = t->opaque;
    id = t->id;
    uv_mutex_unlock(&ev_lock);
    cb(id, opaque);
}

/* Each period-0 timeout once (a round); drops the lock around each callback. */
static void fire_zero_timeouts_locked(void)
{
    unsigned round;

    round = ++ev.idle_round;
    for (;;) {
        struct vtimer *t;
        virEventTimeoutCallback cb;
        void *opaque;
        int id;

        for (t = ev.timers; t; t = t->next)
            if (t->period == 0 && t->seen != round)
                break;
        if (!t)
            break;
        t->seen = round;
        cb = t->cb;
        opaque = t->opaque;
        id = t->id;
        uv_mutex_unlock(&ev_lock);
        cb(id, opaque);
        uv_mutex_lock(&ev_lock);
    }
}

/* Period-0 timeouts: each fires once per loop iteration. */
static void idle_cb(uv_idle_t *h)
{
    uv_mutex_lock(&ev_lock);
    fire_zero_timeouts_locked();
    uv_mutex_unlock(&ev_lock);
}

/* Runs the free callbacks of detached lists; called without the lock. */
static void reap(struct vwatch *w, struct vtimer *t, struct vpoller *p)
{
    while (w) {
        struct vwatch *next = w->next;
        if (w->ff)
            w->ff(w->opaque);
        free(w);
        w = next;
    }
    while (t) {
        struct vtimer *next = t->next;
        if (!t->abandoned && t->ff)
            t->ff(t->opaque);
        free(t);
        t = next;
    }
    while (p) {
        struct vpoller *next = p->next;
        free(p);
        p = next;
    }
}

static void steal_reap_locked(struct vwatch **w, struct vtimer **t, struct vpoller **p)
{
    *w = ev.reap_watches;
    *t = ev.reap_timers;
    *p = ev.reap_pollers;
    ev.reap_watches = NULL;
    ev.reap_timers = NULL;
    ev.reap_pollers = NULL;
}

static void async_cb(uv_async_t *h)
{
    struct vwatch *w;
    struct vtimer *t;
    struct vpoller *p;

    uv_mutex_lock(&ev_lock);
    flush_locked();
    steal_reap_locked(&w, &t, &p);
    uv_mutex_unlock(&ev_lock);

    reap(w, t, p);

    /* Pollers libuv refused (fd added from another thread): ERROR, once. */
    uv_mutex_lock(&ev_lock);
    for (;;) {
        for (p = ev.pollers; p; p = p->next)
            if (p->failed)
                break;
        if (!p)
            break;
        p->failed = false;
        dispatch_watches_locked(p, VIR_EVENT_HANDLE_ERROR);
    }
    uv_mutex_unlock(&ev_lock);
}

static void async_close_cb(uv_handle_t *h)
{
    struct vwatch *w;
    struct vtimer *t;
    struct vpoller *p;

    uv_mutex_lock(&ev_lock);
    steal_reap_locked(&w, &t, &p);
    uv_mutex_unlock(&ev_lock);
    reap(w, t, p);
    handle_closed();
}

static int add_handle(int fd, int events, virEventHandleCallback cb, void *opaque,
                      virFreeCallback ff)
{
    struct vpoller *p = NULL;
    struct vwatch *w = NULL;
    bool new_poller = false;
    bool on_loop;
    int ret = -1;

    uv_mutex_lock(&ev_lock);
    if (!ev.loop || ev.closing || fd < 0 || !cb)
        goto cleanup;
    on_loop = on_loop_thread_locked();
    if (on_loop)
        flush_locked();
    w = calloc(1, sizeof(*w));
    if (!w)
        goto cleanup;
    p = poller_by_fd_locked(fd);
    if (!p) {
        p = calloc(1, sizeof(*p));
        if (!p)
            goto cleanup;
        p->fd = fd;
        new_poller = true;
        /* On the loop thread, a bad fd fails the call, as it should. */
        if (on_loop) {
            if (uv_poll_init(ev.loop, &p->poll, fd) < 0)
                goto cleanup;
            p->inited = true;
            ev.nopen++;
        }
        p->next = ev.pollers;
        ev.pollers = p;
    }
    w->id = next_id_locked(&ev_next_watch, false);
    w->fd = fd;
    w->events = events;
    w->seen = p->round;
    w->cb = cb;
    w->opaque = opaque;
    w->ff = ff;
    w->next = p->watches;
    p->watches = w;
    p->dirty = true;
    changed_locked();
    ret = w->id;
    w = NULL;
    p = NULL;

cleanup:
    if (new_poller && p)
        free(p);
    free(w);
    uv_mutex_unlock(&ev_lock);
    return ret;
}

static void update_handle(int watch, int events)
{
    struct vpoller *p;
    struct vwatch *w;

    uv_mutex_lock(&ev_lock);
    w = watch_by_id_locked(watch, &p);
    if (w) {
        /* Even unchanged: re-arms a poll handle libuv stopped on an error. */
        w->events = events;
        p->dirty = true;
        changed_locked();
    }
    uv_mutex_unlock(&ev_lock);
}

static int remove_handle(int watch)
{
    struct vpoller *p;
    struct vwatch *w;
    int ret = -1;

    uv_mutex_lock(&ev_lock);
    w = watch_by_id_locked(watch, &p);
    if (!w)
        goto cleanup;
    for (struct vwatch **pw = &p->watches; *pw; pw = &(*pw)->next)
        if (*pw == w) {
            *pw = w->next;
            break;
        }
    if (!p->watches) {
        for (struct vpoller **pp = &ev.pollers; *pp; pp = &(*pp)->next)
            if (*pp == p) {
                *pp = p->next;
                break;
            }
        p->next = ev.dead_pollers;
        ev.dead_pollers = p;
    } else {
        p->dirty = true;
    }
    /* Its free callback runs from the async callback, never from here. */
    w->next = ev.reap_watches;
    ev.reap_watches = w;
    changed_locked();
    ret = 0;

cleanup:
    uv_mutex_unlock(&ev_lock);
    return ret;
}

static int add_timeout(int period, virEventTimeoutCallback cb, void *opaque, virFreeCallback ff)
{
    struct vtimer *t;
    int ret = -1;

    uv_mutex_lock(&ev_lock);
    if (!ev.loop || ev.closing || !cb)
        goto cleanup;
    t = calloc(1, sizeof(*t));
    if (!t)
        goto cleanup;
    t->id = next_id_locked(&ev_next_timer, true);
    t->period = period < 0 ? -1 : period;
    t->seen = ev.idle_round;
    t->cb = cb;
    t->opaque = opaque;
    t->ff = ff;
    t->dirty = true;
    t->next = ev.timers;
    ev.timers = t;
    changed_locked();
    ret = t->id;

cleanup:
    uv_mutex_unlock(&ev_lock);
    return ret;
}

static void update_timeout(int timer, int period)
{
    struct vtimer *t;

    uv_mutex_lock(&ev_lock);
    t = timer_by_id_locked(timer);
    if (t) {
        t->period = period < 0 ? -1 : period;
        /* Set to 0 from a callback: fire next iteration, not this one. */
        if (t->period == 0)
            t->seen = ev.idle_round;
        t->dirty = true;
        changed_locked();
    }
    uv_mutex_unlock(&ev_lock);
}

static int remove_timeout(int timer)
{
    struct vtimer *t;
    int ret = -1;

    uv_mutex_lock(&ev_lock);
    t = timer_by_id_locked(timer);
    if (!t)
        goto cleanup;
    for (struct vtimer **pt = &ev.timers; *pt; pt = &(*pt)->next)
        if (*pt == t) {
            *pt = t->next;
            break;
        }
    t->next = ev.dead_timers;
    ev.dead_timers = t;
    changed_locked();
    ret = 0;

cleanup:
    uv_mutex_unlock(&ev_lock);
    return ret;
}

int vpack_virt_event_register(uv_loop_t *loop)
{
    int ret = -EINVAL;
    int r;

    if (!loop)
        return ret;
    uv_once(&ev_once, init_lock);
    if (virInitialize() < 0)
        return -EIO;

    uv_mutex_lock(&ev_lock);
    if (ev.loop) {
        ret = -EBUSY;
        goto cleanup;
    }
    ev.idle_round = 0;
    r = uv_async_init(loop, &ev.async, async_cb);
    if (r < 0) {
        ret = r;
        goto cleanup;
    }
    /* Wake-ups alone must not keep uv_run() going; libvirt's handles do. */
    uv_unref((uv_handle_t *)&ev.async);
    uv_idle_init(loop, &ev.idle);
    ev.loop = loop;
    ev.thread = uv_thread_self();
    ev.closing = false;
    ev.defer_reads = false;
    ev.nopen = 2;
    if (!ev_impl_registered) {
        /* libvirt keeps the first implementation for the process' life. */
        virEventRegisterImpl(add_handle, update_handle, remove_handle,
                             add_timeout, update_timeout, remove_timeout);
        ev_impl_registered = true;
    }
    ret = 0;

cleanup:
    uv_mutex_unlock(&ev_lock);
    return ret;
}

void vpack_virt_event_close(void)
{
    struct vtimer *t;
    struct vpoller *p;
    struct vwatch *w;

    uv_once(&ev_once, init_lock);
    uv_mutex_lock(&ev_lock);
    if (!ev.loop || ev.closing)
        goto cleanup;
    ev.closing = true;
    /* Still registered: libvirt never removed them; drop without ff. */
    while ((t = ev.timers)) {
        ev.timers = t->next;
        t->abandoned = true;
        t->next = ev.dead_timers;
        ev.dead_timers = t;
    }
    while ((p = ev.pollers)) {
        ev.pollers = p->next;
        while ((w = p->watches)) {
            p->watches = w->next;
            free(w);
        }
        p->next = ev.dead_pollers;
        ev.dead_pollers = p;
    }
    flush_locked();
    uv_idle_stop(&ev.idle);
    uv_close((uv_handle_t *)&ev.idle, internal_close_cb);
    /* Its close callback runs the free callbacks still due. */
    uv_close((uv_handle_t *)&ev.async, async_close_cb);

cleanup:
    uv_mutex_unlock(&ev_lock);
}

void vpack_virt_event_defer_reads(bool on)
{
    uv_once(&ev_once, init_lock);
    uv_mutex_lock(&ev_lock);
    if (ev.loop && !ev.closing && ev.defer_reads != on) {
        ev.defer_reads = on;
        for (struct vpoller *p = ev.pollers; p; p = p->next)
            p->dirty = true;
        changed_locked();
    }
    uv_mutex_unlock(&ev_lock);
}

static bool poller_live_locked(const struct vpoller *q)
{
    for (struct vpoller *p = ev.pollers; p; p = p->next)
        if (p == q)
            return true;
    return false;
}

/* What poll(2) reported, as libvirt's handle events. */
static int events_from_poll(short revents)
{
    return map_events(revents, EV_POLL, EV_VIR) |
           ((revents & (POLLERR | POLLNVAL)) ? VIR_EVENT_HANDLE_ERROR : 0);
}

/*
 * The check's poll set, kept from one call to the next so that a tick does
 * not allocate: grown as needed, loop thread only, held for the process's
 * life (one connection's socket, as a rule).
 */
static struct pollfd *check_fds;
static struct vpoller **check_ps;
static size_t check_cap;

/*
 * The deferred pollers that want something, into check_fds/check_ps;
 * marks them in_check. Returns how many, or -1 without memory.
 */
static int deferred_set_locked(void)
{
    size_t n = 0;
    for (struct vpoller *p = ev.pollers; p; p = p->next) {
        int want = 0;
        if (!p->deferred)
            continue;
        for (struct vwatch *w = p->watches; w; w = w->next)
            want |= w->events;
        if (!(want & (VIR_EVENT_HANDLE_READABLE | VIR_EVENT_HANDLE_WRITABLE)))
            continue;
        if (n == check_cap) {
            size_t c = check_cap ? check_cap * 2 : 4;
            struct pollfd *f = realloc(check_fds, c * sizeof(*f));
            if (!f)
                return -1;
            check_fds = f;
            struct vpoller **q = realloc(check_ps, c * sizeof(*q));
            if (!q)
                return -1;
            check_ps = q;
            check_cap = c;
        }
        check_fds[n] = (struct pollfd){.fd = p->fd, .events = (short)map_events(want, EV_VIR, EV_POLL)};
        check_ps[n++] = p;
        p->in_check = true;
    }
    return (int)n;
}

/* Rounds of one vpack_virt_event_check(): a probe, its answer, then nothing. */
#define CHECK_ROUNDS 16

unsigned vpack_virt_event_check(void)
{
    unsigned ran = 0;

    uv_once(&ev_once, init_lock);
    uv_mutex_lock(&ev_lock);
    if (!ev.loop || ev.closing || !ev.defer_reads || !on_loop_thread_locked())
        goto out;
    flush_locked();
    for (unsigned round = 0; round < CHECK_ROUNDS; round++) {
        int n = deferred_set_locked();
        if (n <= 0)
            break;
        uv_mutex_unlock(&ev_lock);
        int r = poll(check_fds, (nfds_t)n, 0);
        uv_mutex_lock(&ev_lock);
        if (r <= 0)
            break; /* nothing ready; an interrupted poll is the next check's */
        for (int i = 0; i < n; i++) {
            /* Removed by a callback of this round: its memory lives, its watches do not. */
            if (!check_fds[i].revents || !poller_live_locked(check_ps[i]))
                continue;
            dispatch_watches_locked(check_ps[i], events_from_poll(check_fds[i].revents));
            ran++;
        }
        /* libvirt reads one message a callback: poll again until nothing is left. */
    }
    /* What a poller still asks for now goes to libuv (a write still due) or waits. */
    for (struct vpoller *p = ev.pollers; p; p = p->next)
        if (p->in_check) {
            p->in_check = false;
            p->dirty = true;
        }
    flush_locked();
    /*
     * libvirt hands a domain event to its callback from a period-0 timeout:
     * fire those now, so the caller acts on the event in this interval, not
     * at the next.
     */
    if (ran)
        fire_zero_timeouts_locked();
out:
    uv_mutex_unlock(&ev_lock);
    return ran;
}
