// SPDX-License-Identifier: MIT
/*
 * libvirt's event loop on libuv: timeouts and handles through libvirt's
 * public virEvent* calls, from the loop thread and from other threads, and
 * domain lifecycle events from libvirt's test:///default driver.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <uv.h>

#include "virt-event.h"

static uv_loop_t loop;
static uv_thread_t loop_thread;
static uv_timer_t deadline;
static bool expired;
static bool loop_closed; /* the test closed the loop itself */

static bool on_loop(void)
{
    uv_thread_t self = uv_thread_self();
    return uv_thread_equal(&self, &loop_thread);
}

static void expire_cb(uv_timer_t *t)
{
    expired = true;
}

/* Runs the loop until done(arg) holds or ms pass; returns done(arg). */
static bool run_until(bool (*done)(void *), void *arg, unsigned ms)
{
    expired = false;
    uv_timer_start(&deadline, expire_cb, ms, 0);
    while (!(done && done(arg)) && !expired)
        uv_run(&loop, UV_RUN_ONCE);
    uv_timer_stop(&deadline);
    return done && done(arg);
}

static void run_for(unsigned ms)
{
    run_until(NULL, NULL, ms);
}

static void print_handle(uv_handle_t *h, void *arg)
{
    fprintf(stderr, "open handle: %s active=%d\n", uv_handle_type_name(h->type),
            uv_is_active(h));
}

/* The shutdown sequence of the agent; returns uv_loop_close()'s result. */
static int close_loop(void)
{
    int r;

    loop_closed = true;
    vpack_virt_event_close();
    uv_close((uv_handle_t *)&deadline, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    r = uv_loop_close(&loop);
    if (r != 0)
        uv_walk(&loop, print_handle, NULL);
    return r;
}

static int setup(void **state)
{
    if (uv_loop_init(&loop) != 0)
        return -1;
    loop_thread = uv_thread_self();
    loop_closed = false;
    uv_timer_init(&loop, &deadline);
    return vpack_virt_event_register(&loop) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    if (loop_closed)
        return 0;
    return close_loop() == 0 ? 0 : -1;
}

/* ---- timeouts ---- */

struct tstate {
    int fired;
    int want;            /* run_until target for fired */
    int stop_at;         /* on this fire, set the period to -1 */
    int remove_at;       /* on this fire, remove the timeout */
    int remove_ret;
    int freed;
    int freed_at_remove; /* freed, read right after remove returned */
    bool in_cb;
    bool freed_in_cb;
    bool wrong_thread;
};

static void t_cb(int id, void *opaque)
{
    struct tstate *s = opaque;

    s->in_cb = true;
    if (!on_loop())
        s->wrong_thread = true;
    s->fired++;
    if (s->fired == s->stop_at)
        virEventUpdateTimeout(id, -1);
    if (s->fired == s->remove_at) {
        s->remove_ret = virEventRemoveTimeout(id);
        s->freed_at_remove = s->freed;
    }
    s->in_cb = false;
}

static void t_ff(void *opaque)
{
    struct tstate *s = opaque;

    if (!on_loop())
        s->wrong_thread = true;
    if (s->in_cb)
        s->freed_in_cb = true;
    s->freed++;
}

static bool t_fired(void *arg)
{
    struct tstate *s = arg;
    return s->fired >= s->want;
}

static bool t_freed(void *arg)
{
    struct tstate *s = arg;
    return s->freed > 0;
}

static void test_timeout_period(void **state)
{
    struct tstate s = {0};
    uint64_t t0;
    int id, n;

    uv_update_time(&loop);
    t0 = uv_now(&loop);
    id = virEventAddTimeout(20, t_cb, &s, t_ff);
    assert_true(id > 0);

    /* Fires repeatedly at its period. */
    s.want = 3;
    assert_true(run_until(t_fired, &s, 2000));
    assert_true(uv_now(&loop) - t0 >= 55);

    /* -1 disables it; nothing keeps the loop alive or spinning. */
    virEventUpdateTimeout(id, -1);
    n = s.fired;
    run_for(100);
    assert_int_equal(s.fired, n);
    assert_false(uv_loop_alive(&loop));

    /* Enabled again with another period. */
    virEventUpdateTimeout(id, 10);
    s.want = n + 2;
    assert_true(run_until(t_fired, &s, 2000));

    /* Remove returns at once; the free callback runs later, on the loop. */
    assert_int_equal(virEventRemoveTimeout(id), 0);
    assert_int_equal(s.freed, 0);
    assert_int_equal(virEventRemoveTimeout(id), -1);
    virEventUpdateTimeout(id, 5); /* unknown id: ignored */
    assert_true(run_until(t_freed, &s, 1000));
    n = s.fired;
    run_for(40);
    assert_int_equal(s.fired, n);
    assert_int_equal(s.freed, 1);
    assert_false(s.wrong_thread);
}

static void test_timeout_zero(void **state)
{
    struct tstate s = {0};
    int id;

    /* 0 fires on every loop iteration, once per iteration. */
    s.stop_at = 5;
    id = virEventAddTimeout(0, t_cb, &s, t_ff);
    assert_true(id > 0);
    uv_run(&loop, UV_RUN_NOWAIT);
    assert_int_equal(s.fired, 1);
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_run(&loop, UV_RUN_NOWAIT);
    assert_int_equal(s.fired, 3);

    /* The callback set -1 on its 5th call: it stops and the loop rests. */
    s.want = 5;
    assert_true(run_until(t_fired, &s, 1000));
    run_for(50);
    assert_int_equal(s.fired, 5);
    assert_false(uv_loop_alive(&loop));

    /* 0 again, this time the callback removes its own timeout. */
    s.remove_at = 8;
    virEventUpdateTimeout(id, 0);
    assert_true(run_until(t_freed, &s, 1000));
    assert_int_equal(s.remove_ret, 0);
    assert_int_equal(s.fired, 8);
    assert_int_equal(s.freed_at_remove, 0);
    assert_false(s.freed_in_cb);
    run_for(30);
    assert_int_equal(s.fired, 8);
    assert_int_equal(s.freed, 1);
    assert_false(s.wrong_thread);
    assert_false(uv_loop_alive(&loop));
}

static void test_timeout_remove_in_cb(void **state)
{
    struct tstate s = {0};

    s.remove_at = 1;
    assert_true(virEventAddTimeout(5, t_cb, &s, t_ff) > 0);
    assert_true(run_until(t_freed, &s, 1000));
    assert_int_equal(s.remove_ret, 0);
    assert_int_equal(s.freed_at_remove, 0);
    assert_false(s.freed_in_cb);
    run_for(30);
    assert_int_equal(s.fired, 1);
    assert_false(s.wrong_thread);
}

static void test_timeout_ids(void **state)
{
    struct tstate s = {0};
    int a, b, c, d;

    a = virEventAddTimeout(-1, t_cb, &s, t_ff);
    b = virEventAddTimeout(-1, t_cb, &s, t_ff);
    c = virEventAddTimeout(-1, t_cb, &s, t_ff);
    assert_true(a > 0 && b > 0 && c > 0);
    assert_true(a != b && b != c && a != c);
    assert_int_equal(virEventRemoveTimeout(b), 0);
    d = virEventAddTimeout(-1, t_cb, &s, t_ff);
    assert_true(d > 0 && d != a && d != b && d != c);
    assert_int_equal(virEventRemoveTimeout(a), 0);
    assert_int_equal(virEventRemoveTimeout(c), 0);
    assert_int_equal(virEventRemoveTimeout(d), 0);
    run_for(20);
    assert_int_equal(s.freed, 4);
    assert_int_equal(s.fired, 0);
}

/* ---- handles ---- */

struct hstate {
    int fired;
    int want;
    int last_watch;
    int last_fd;
    int last_events;
    int all_events;      /* OR of every events seen */
    bool drain;          /* read everything available in the callback */
    bool remove_in_cb;
    int remove_ret;
    int freed;
    int freed_at_remove;
    bool in_cb;
    bool freed_in_cb;
    bool wrong_thread;
};

static void h_cb(int watch, int fd, int events, void *opaque)
{
    struct hstate *h = opaque;

    h->in_cb = true;
    if (!on_loop())
        h->wrong_thread = true;
    h->fired++;
    h->last_watch = watch;
    h->last_fd = fd;
    h->last_events = events;
    h->all_events |= events;
    if (h->drain) {
        char buf[64];
        while (read(fd, buf, sizeof(buf)) > 0)
            ;
    }
    if (h->remove_in_cb) {
        h->remove_in_cb = false;
        h->remove_ret = virEventRemoveHandle(watch);
        h->freed_at_remove = h->freed;
    }
    h->in_cb = false;
}

static void h_ff(void *opaque)
{
    struct hstate *h = opaque;

    if (!on_loop())
        h->wrong_thread = true;
    if (h->in_cb)
        h->freed_in_cb = true;
    h->freed++;
}

static bool h_fired(void *arg)
{
    struct hstate *h = arg;
    return h->fired >= h->want;
}

static bool h_freed(void *arg)
{
    struct hstate *h = arg;
    return h->freed > 0;
}

static bool h_hangup(void *arg)
{
    struct hstate *h = arg;
    return h->all_events & VIR_EVENT_HANDLE_HANGUP;
}

static void test_handle_pipe(void **state)
{
    struct hstate h = {0};
    int fds[2];
    int id, n;

    assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
    id = virEventAddHandle(fds[0], VIR_EVENT_HANDLE_READABLE, h_cb, &h, h_ff);
    assert_true(id > 0);
    run_for(30);
    assert_int_equal(h.fired, 0);

    /* Readable fires, and keeps firing while data waits (level-triggered). */
    assert_int_equal(write(fds[1], "x", 1), 1);
    h.want = 3;
    assert_true(run_until(h_fired, &h, 1000));
    assert_int_equal(h.last_watch, id);
    assert_int_equal(h.last_fd, fds[0]);
    assert_int_equal(h.last_events, VIR_EVENT_HANDLE_READABLE);

    /* Events 0: no more callbacks, and the loop has nothing to wait for. */
    virEventUpdateHandle(id, 0);
    n = h.fired;
    run_for(50);
    assert_int_equal(h.fired, n);
    assert_false(uv_loop_alive(&loop));

    /* Back on; then the callback removes its own watch. */
    h.remove_in_cb = true;
    virEventUpdateHandle(id, VIR_EVENT_HANDLE_READABLE);
    assert_true(run_until(h_freed, &h, 1000));
    assert_int_equal(h.fired, n + 1);
    assert_int_equal(h.remove_ret, 0);
    assert_int_equal(h.freed_at_remove, 0);
    assert_false(h.freed_in_cb);
    run_for(30);
    assert_int_equal(h.fired, n + 1);
    assert_int_equal(h.freed, 1);
    assert_int_equal(virEventRemoveHandle(id), -1);
    virEventUpdateHandle(id, VIR_EVENT_HANDLE_READABLE); /* unknown: ignored */
    assert_false(h.wrong_thread);

    /* The same fd can be watched again once its watch is gone. */
    memset(&h, 0, sizeof(h));
    id = virEventAddHandle(fds[0], VIR_EVENT_HANDLE_READABLE, h_cb, &h, h_ff);
    assert_true(id > 0);
    h.want = 1;
    assert_true(run_until(h_fired, &h, 1000));
    assert_int_equal(virEventRemoveHandle(id), 0);
    assert_int_equal(h.freed, 0);
    assert_true(run_until(h_freed, &h, 1000));

    close(fds[0]);
    close(fds[1]);
}

static void test_handle_shared_fd(void **state)
{
    struct hstate r = {0}, w = {0};
    int sv[2];
    int rid, wid, n;

    /* libvirt allows several watches on one fd with disjoint events. */
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    r.drain = true;
    rid = virEventAddHandle(sv[0], VIR_EVENT_HANDLE_READABLE | VIR_EVENT_HANDLE_HANGUP,
                            h_cb, &r, h_ff);
    wid = virEventAddHandle(sv[0], VIR_EVENT_HANDLE_WRITABLE, h_cb, &w, h_ff);
    assert_true(rid > 0 && wid > 0 && rid != wid);

    w.want = 1;
    assert_true(run_until(h_fired, &w, 1000));
    assert_int_equal(w.last_events, VIR_EVENT_HANDLE_WRITABLE);
    assert_int_equal(w.last_watch, wid);
    assert_int_equal(r.fired, 0);

    virEventUpdateHandle(wid, 0);
    n = w.fired;
    assert_int_equal(write(sv[1], "ping", 4), 4);
    r.want = 1;
    assert_true(run_until(h_fired, &r, 1000));
    assert_int_equal(r.last_events, VIR_EVENT_HANDLE_READABLE);
    assert_int_equal(r.last_watch, rid);
    run_for(20);
    assert_int_equal(w.fired, n);
    assert_int_equal(r.fired, 1); /* drained: no second call */

    /* Dropping one watch leaves the other working; hang-up is reported. */
    assert_int_equal(virEventRemoveHandle(wid), 0);
    close(sv[1]);
    assert_true(run_until(h_hangup, &r, 1000));
    assert_int_equal(virEventRemoveHandle(rid), 0);
    assert_true(run_until(h_freed, &r, 1000));
    assert_int_equal(w.freed, 1);
    assert_false(r.wrong_thread || w.wrong_thread);
    close(sv[0]);
}

static void test_handle_bad(void **state)
{
    struct hstate h = {0};
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

    /* epoll cannot watch /dev/null: refused at once on the loop thread. */
    assert_true(fd >= 0);
    assert_int_equal(virEventAddHandle(fd, VIR_EVENT_HANDLE_READABLE, h_cb, &h, h_ff), -1);
    assert_int_equal(virEventRemoveHandle(123456), -1);
    assert_int_equal(virEventRemoveTimeout(123456), -1);
    close(fd);
    run_for(10);
    assert_int_equal(h.freed, 0);
}

static bool h_error(void *arg)
{
    struct hstate *h = arg;
    return h->all_events & VIR_EVENT_HANDLE_ERROR;
}

static void test_handle_error(void **state)
{
    struct hstate h = {0};
    int fds[2];
    int id, n;

    /* A pipe's write end reports an error once its read end is closed. */
    assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
    id = virEventAddHandle(fds[1], VIR_EVENT_HANDLE_WRITABLE, h_cb, &h, h_ff);
    assert_true(id > 0);
    h.want = 1;
    assert_true(run_until(h_fired, &h, 1000));
    assert_int_equal(h.last_events, VIR_EVENT_HANDLE_WRITABLE);
    close(fds[0]);
    assert_true(run_until(h_error, &h, 1000));
    assert_int_equal(h.last_events, VIR_EVENT_HANDLE_ERROR);

    /* Reported once; the next update re-arms the watch and it comes again. */
    n = h.fired;
    run_for(30);
    assert_int_equal(h.fired, n);
    h.all_events = 0;
    virEventUpdateHandle(id, VIR_EVENT_HANDLE_WRITABLE);
    assert_true(run_until(h_error, &h, 1000));
    assert_int_equal(virEventRemoveHandle(id), 0);
    assert_true(run_until(h_freed, &h, 1000));
    assert_false(h.wrong_thread);
    close(fds[1]);
}

/* ---- deferred reads ---- */

/* A peer that answers each message, as libvirt answers a keepalive probe. */
struct pstate {
    int id;
    int reads, writes, hangups;
    int due;             /* answers queued */
    int timer;           /* set to period 0 on each read, as libvirt queues an event */
    int timer_fired;
    bool wrong_thread;
    int freed;
};

static void p_timer_cb(int id, void *opaque)
{
    ((struct pstate *)opaque)->timer_fired++;
    virEventUpdateTimeout(id, -1);
}

static void p_cb(int watch, int fd, int events, void *opaque)
{
    struct pstate *p = opaque;
    char buf[64];

    if (!on_loop())
        p->wrong_thread = true;
    if (events & VIR_EVENT_HANDLE_HANGUP) {
        p->hangups++;
        virEventRemoveHandle(watch);
        return;
    }
    if (events & VIR_EVENT_HANDLE_READABLE) {
        while (read(fd, buf, sizeof(buf)) > 0)
            p->due++;
        p->reads++;
        virEventUpdateTimeout(p->timer, 0);
    }
    if ((events & VIR_EVENT_HANDLE_WRITABLE) && p->due > 0) {
        if (write(fd, "pong", 4) == 4)
            p->due--;
        p->writes++;
    }
    virEventUpdateHandle(watch, VIR_EVENT_HANDLE_READABLE |
                                    (p->due > 0 ? VIR_EVENT_HANDLE_WRITABLE : 0));
}

static void p_ff(void *opaque)
{
    ((struct pstate *)opaque)->freed++;
}

static bool p_wrote(void *arg)
{
    struct pstate *p = arg;
    return p->writes >= 2;
}

static bool p_read(void *arg)
{
    struct pstate *p = arg;
    return p->reads >= 2;
}

static bool p_freed(void *arg)
{
    return ((struct pstate *)arg)->freed > 0;
}

static void test_deferred_reads(void **state)
{
    struct pstate p = {0};
    char buf[16];
    int sv[2];

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    p.timer = virEventAddTimeout(-1, p_timer_cb, &p, NULL);
    assert_true(p.timer > 0);
    p.id = virEventAddHandle(sv[0], VIR_EVENT_HANDLE_READABLE, p_cb, &p, p_ff);
    assert_true(p.id > 0);
    assert_int_equal(vpack_virt_event_check(), 0); /* not deferred yet */
    vpack_virt_event_defer_reads(true);

    /* A message does not wake the loop: the watch is in nobody's poll set. */
    assert_int_equal(write(sv[1], "ping", 4), 4);
    run_for(50);
    assert_int_equal(p.reads, 0);
    assert_false(uv_loop_alive(&loop));

    /* One check reads it and sends the answer it queued: no pass of the loop;
     * what the read queued for "the next iteration" (an event) has run too. */
    assert_int_equal(vpack_virt_event_check(), 2);
    assert_int_equal(p.reads, 1);
    assert_int_equal(p.writes, 1);
    assert_int_equal(p.timer_fired, 1);
    assert_int_equal(read(sv[1], buf, sizeof(buf)), 4);
    assert_memory_equal(buf, "pong", 4);
    assert_int_equal(vpack_virt_event_check(), 0);
    assert_false(uv_loop_alive(&loop));

    /* A write asked for outside a check is the loop's at once. */
    p.due = 1;
    virEventUpdateHandle(p.id, VIR_EVENT_HANDLE_READABLE | VIR_EVENT_HANDLE_WRITABLE);
    assert_true(uv_loop_alive(&loop));
    assert_true(run_until(p_wrote, &p, 1000));
    assert_int_equal(read(sv[1], buf, sizeof(buf)), 4);
    run_for(20);
    assert_false(uv_loop_alive(&loop)); /* reading only again: deferred again */

    /* Deferral off: the loop serves what waits. */
    assert_int_equal(write(sv[1], "ping", 4), 4);
    run_for(20);
    assert_int_equal(p.reads, 1);
    vpack_virt_event_defer_reads(false);
    assert_true(run_until(p_read, &p, 1000));
    run_for(20);
    assert_int_equal(read(sv[1], buf, sizeof(buf)), 4);

    /* Deferred again: the peer's hangup comes with the next check. */
    vpack_virt_event_defer_reads(true);
    close(sv[1]);
    run_for(20);
    assert_int_equal(p.hangups, 0);
    assert_int_equal(vpack_virt_event_check(), 1);
    assert_int_equal(p.hangups, 1);
    assert_true(run_until(p_freed, &p, 1000));
    assert_int_equal(vpack_virt_event_check(), 0);
    assert_false(p.wrong_thread);
    vpack_virt_event_defer_reads(false);
    assert_int_equal(virEventRemoveTimeout(p.timer), 0);
    close(sv[0]);
}

/* ---- other threads ---- */

struct xthread {
    int fds[2];
    atomic_int timer_id;
    atomic_int watch_id;
    atomic_bool step1_done;
    atomic_bool go_remove;
    atomic_bool done;
    struct tstate t;     /* touched by callbacks, on the loop thread */
    struct hstate h;
};

static void xthread_main(void *arg)
{
    struct xthread *x = arg;

    atomic_store(&x->timer_id, virEventAddTimeout(5, t_cb, &x->t, t_ff));
    atomic_store(&x->watch_id, virEventAddHandle(x->fds[0], VIR_EVENT_HANDLE_READABLE,
                                                 h_cb, &x->h, h_ff));
    if (write(x->fds[1], "x", 1) != 1)
        abort();
    atomic_store(&x->step1_done, true);
    while (!atomic_load(&x->go_remove))
        uv_sleep(1);
    virEventUpdateTimeout(atomic_load(&x->timer_id), -1);
    virEventUpdateHandle(atomic_load(&x->watch_id), 0);
    if (virEventRemoveTimeout(atomic_load(&x->timer_id)) != 0 ||
        virEventRemoveHandle(atomic_load(&x->watch_id)) != 0)
        abort();
    atomic_store(&x->done, true);
}

static bool x_fired(void *arg)
{
    struct xthread *x = arg;
    return atomic_load(&x->step1_done) && x->t.fired >= 3 && x->h.fired >= 3;
}

static bool x_freed(void *arg)
{
    struct xthread *x = arg;
    return atomic_load(&x->done) && x->t.freed == 1 && x->h.freed == 1;
}

static void test_other_thread(void **state)
{
    static struct xthread x; /* static: atomics zeroed without memset */
    uv_thread_t th;

    memset(&x.t, 0, sizeof(x.t));
    memset(&x.h, 0, sizeof(x.h));
    atomic_store(&x.step1_done, false);
    atomic_store(&x.go_remove, false);
    atomic_store(&x.done, false);
    assert_int_equal(pipe2(x.fds, O_CLOEXEC), 0);
    assert_int_equal(uv_thread_create(&th, xthread_main, &x), 0);
    assert_true(run_until(x_fired, &x, 5000));
    assert_true(atomic_load(&x.timer_id) > 0);
    assert_true(atomic_load(&x.watch_id) > 0);
    atomic_store(&x.go_remove, true);
    assert_true(run_until(x_freed, &x, 5000));
    assert_int_equal(uv_thread_join(&th), 0);
    assert_false(x.t.wrong_thread);
    assert_false(x.h.wrong_thread);
    close(x.fds[0]);
    close(x.fds[1]);
}

struct early {
    int fd;              /* unpollable */
    int pipe_rd;
    int timer_id;
    int watch_id;
    int bad_id;
    struct tstate t;
    struct hstate h;
    struct hstate bad;
};

static void early_main(void *arg)
{
    struct early *e = arg;

    e->timer_id = virEventAddTimeout(0, t_cb, &e->t, t_ff);
    e->watch_id = virEventAddHandle(e->pipe_rd, VIR_EVENT_HANDLE_READABLE, h_cb, &e->h, h_ff);
    /* Off the loop thread the fd cannot be checked yet: ERROR comes later. */
    e->bad_id = virEventAddHandle(e->fd, VIR_EVENT_HANDLE_READABLE, h_cb, &e->bad, h_ff);
}

static void count_handle(uv_handle_t *h, void *arg)
{
    (*(int *)arg)++;
}

static bool early_fired(void *arg)
{
    struct early *e = arg;
    return e->t.fired > 0 && e->h.fired > 0 && e->bad.fired > 0;
}

static bool early_freed(void *arg)
{
    struct early *e = arg;
    return e->t.freed && e->h.freed && e->bad.freed;
}

/* Calls from another thread leave libuv alone until the loop runs. */
static void test_other_thread_deferred(void **state)
{
    struct early e = {0};
    uv_thread_t th;
    int fds[2];
    int before = 0, after = 0;

    assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
    assert_int_equal(write(fds[1], "x", 1), 1);
    e.pipe_rd = fds[0];
    e.fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(e.fd >= 0);
    uv_walk(&loop, count_handle, &before);
    assert_int_equal(uv_thread_create(&th, early_main, &e), 0);
    assert_int_equal(uv_thread_join(&th), 0);
    assert_true(e.timer_id > 0 && e.watch_id > 0 && e.bad_id > 0);
    uv_walk(&loop, count_handle, &after);
    assert_int_equal(after, before);

    assert_true(run_until(early_fired, &e, 1000));
    assert_int_equal(e.bad.fired, 1);
    assert_int_equal(e.bad.last_events, VIR_EVENT_HANDLE_ERROR);
    assert_int_equal(e.bad.last_watch, e.bad_id);
    assert_int_equal(virEventRemoveTimeout(e.timer_id), 0);
    assert_int_equal(virEventRemoveHandle(e.watch_id), 0);
    assert_int_equal(virEventRemoveHandle(e.bad_id), 0);
    assert_true(run_until(early_freed, &e, 1000));
    assert_int_equal(e.bad.fired, 1);
    assert_false(e.t.wrong_thread || e.h.wrong_thread || e.bad.wrong_thread);
    close(e.fd);
    close(fds[0]);
    close(fds[1]);
}

/* Threads add, change and remove while the loop runs; every ff runs once. */
#define STRESS_THREADS 3
#define STRESS_ROUNDS 300

struct stress {
    int fd;
    atomic_int added;
    atomic_int running;
    int freed;           /* loop thread only */
    bool wrong_thread;
};

static void stress_ff(void *opaque)
{
    struct stress *s = opaque;
    if (!on_loop())
        s->wrong_thread = true;
    s->freed++;
}

static void stress_tcb(int id, void *opaque)
{
    /* Remove from inside the callback, racing the adding thread's remove. */
    if (id % 3 == 0)
        virEventRemoveTimeout(id);
}

static void stress_hcb(int watch, int fd, int events, void *opaque)
{
    if (watch % 2 == 0)
        virEventUpdateHandle(watch, 0);
}

static void stress_main(void *arg)
{
    struct stress *s = arg;

    for (int i = 0; i < STRESS_ROUNDS; i++) {
        int t = virEventAddTimeout(i % 3 == 0 ? 0 : 1, stress_tcb, s, stress_ff);
        int w = virEventAddHandle(s->fd, VIR_EVENT_HANDLE_WRITABLE, stress_hcb, s, stress_ff);
        if (t < 0 || w < 0)
            abort();
        atomic_fetch_add(&s->added, 2);
        if (i % 4 == 0)
            uv_sleep(1);
        virEventUpdateTimeout(t, i % 2 ? 0 : 2);
        virEventUpdateHandle(w, VIR_EVENT_HANDLE_WRITABLE);
        virEventRemoveTimeout(t); /* may already be gone: callback removed it */
        if (virEventRemoveHandle(w) != 0)
            abort();
    }
    atomic_fetch_sub(&s->running, 1);
}

static bool stress_done(void *arg)
{
    struct stress *s = arg;
    return atomic_load(&s->running) == 0 && s->freed == atomic_load(&s->added);
}

static void test_stress(void **state)
{
    static struct stress s;
    uv_thread_t th[STRESS_THREADS];
    int sv[2];

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    s.fd = sv[0];
    s.freed = 0;
    s.wrong_thread = false;
    atomic_store(&s.added, 0);
    atomic_store(&s.running, STRESS_THREADS);
    for (int i = 0; i < STRESS_THREADS; i++)
        assert_int_equal(uv_thread_create(&th[i], stress_main, &s), 0);
    assert_true(run_until(stress_done, &s, 30000));
    for (int i = 0; i < STRESS_THREADS; i++)
        assert_int_equal(uv_thread_join(&th[i]), 0);
    assert_int_equal(s.freed, STRESS_THREADS * STRESS_ROUNDS * 2);
    assert_false(s.wrong_thread);
    close(sv[0]);
    close(sv[1]);
}

/* ---- registration ---- */

static void test_register_twice(void **state)
{
    assert_int_equal(vpack_virt_event_register(&loop), -EBUSY);
    assert_int_equal(vpack_virt_event_register(NULL), -EINVAL);
}

/* After close, libvirt's calls fail cleanly until the next register. */
static void test_after_close(void **state)
{
    struct tstate s = {0};

    assert_true(virEventAddTimeout(-1, t_cb, &s, t_ff) > 0); /* left registered */
    assert_int_equal(close_loop(), 0);
    assert_int_equal(virEventAddTimeout(10, t_cb, &s, t_ff), -1);
    assert_int_equal(virEventAddHandle(0, VIR_EVENT_HANDLE_READABLE, h_cb, NULL, NULL), -1);
    assert_int_equal(s.freed, 0); /* dropped without its free callback */
}

/* ---- libvirt's test driver ---- */

#define DOM_NAME "vpack-virt-event-test"

struct devents {
    int events[8];
    int details[8];
    int count;
    bool wrong_thread;
    int freed;
};

struct dworker {
    atomic_int failed;   /* step that failed, 0 = none */
    atomic_bool done;
};

static int lifecycle_cb(virConnectPtr conn, virDomainPtr dom, int event, int detail,
                        void *opaque)
{
    struct devents *d = opaque;

    if (!on_loop())
        d->wrong_thread = true;
    if (strcmp(virDomainGetName(dom), DOM_NAME) != 0 || d->count == 8)
        return 0;
    d->events[d->count] = event;
    d->details[d->count] = detail;
    d->count++;
    return 0;
}

static void devents_ff(void *opaque)
{
    struct devents *d = opaque;
    d->freed++;
}

static void dworker_main(void *arg)
{
    static const char xml[] =
        "<domain type='test'><name>" DOM_NAME "</name>"
        "<memory unit='MiB'>64</memory><vcpu>1</vcpu>"
        "<os><type>hvm</type></os></domain>";
    struct dworker *w = arg;
    virConnectPtr conn = virConnectOpen("test:///default");
    virDomainPtr dom = NULL;
    int failed = 0;

    if (!conn) {
        failed = 1;
        goto cleanup;
    }
    dom = virDomainDefineXML(conn, xml);
    if (!dom) {
        failed = 2;
        goto cleanup;
    }
    if (virDomainCreate(dom) < 0) {
        failed = 3;
        goto cleanup;
    }
    if (virDomainDestroy(dom) < 0) {
        failed = 4;
        goto cleanup;
    }
    if (virDomainUndefine(dom) < 0)
        failed = 5;

cleanup:
    if (dom)
        virDomainFree(dom);
    if (conn && virConnectClose(conn) < 0 && !failed)
        failed = 6;
    atomic_store(&w->failed, failed);
    atomic_store(&w->done, true);
}

static bool d_done(void *arg)
{
    struct devents *d = arg;
    return d->count >= 4;
}

static void quiet_error(void *opaque, virErrorPtr err)
{
}

static void test_domain_events(void **state)
{
    static struct dworker w;
    struct devents d = {0};
    static const int want[4][2] = {
        {VIR_DOMAIN_EVENT_DEFINED, VIR_DOMAIN_EVENT_DEFINED_ADDED},
        {VIR_DOMAIN_EVENT_STARTED, VIR_DOMAIN_EVENT_STARTED_BOOTED},
        {VIR_DOMAIN_EVENT_STOPPED, VIR_DOMAIN_EVENT_STOPPED_DESTROYED},
        {VIR_DOMAIN_EVENT_UNDEFINED, VIR_DOMAIN_EVENT_UNDEFINED_REMOVED},
    };
    virConnectPtr conn;
    uv_thread_t th;
    int cbid;

    conn = virConnectOpen("test:///default");
    assert_non_null(conn);
    /* The test driver has no keepalive ("not supported"); remote ones do. */
    if (virConnectSetKeepAlive(conn, 5, 3) < 0)
        virResetLastError();
    cbid = virConnectDomainEventRegisterAny(conn, NULL, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                            VIR_DOMAIN_EVENT_CALLBACK(lifecycle_cb),
                                            &d, devents_ff);
    assert_true(cbid >= 0);

    atomic_store(&w.failed, 0);
    atomic_store(&w.done, false);
    assert_int_equal(uv_thread_create(&th, dworker_main, &w), 0);
    assert_true(run_until(d_done, &d, 10000));
    assert_int_equal(uv_thread_join(&th), 0);
    assert_int_equal(atomic_load(&w.failed), 0);

    assert_int_equal(d.count, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(d.events[i], want[i][0]);
        assert_int_equal(d.details[i], want[i][1]);
    }
    assert_false(d.wrong_thread);

    assert_int_equal(virConnectDomainEventDeregisterAny(conn, cbid), 0);
    assert_int_equal(virConnectClose(conn), 0);
    assert_int_equal(close_loop(), 0);
    assert_int_equal(d.freed, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_timeout_period, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_zero, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_remove_in_cb, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_ids, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handle_pipe, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handle_shared_fd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handle_bad, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handle_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deferred_reads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_thread_deferred, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_thread, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stress, setup, teardown),
        cmocka_unit_test_setup_teardown(test_register_twice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_after_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_domain_events, setup, teardown),
    };

    virSetErrorFunc(NULL, quiet_error);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
