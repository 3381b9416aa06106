/* SPDX-License-Identifier: MIT */
/*
 * libvirt's event loop on libuv: the agent runs one uv_loop_t for its own
 * work and for libvirt's (connection sockets, keepalive, event dispatch).
 *
 * Usage, all on the thread that runs the loop:
 *
 *     vpack_virt_event_register(loop);     before any virConnectOpen*()
 *     ... uv_run(loop, ...) ...
 *     virConnectClose(conn);                every connection, every ref
 *     vpack_virt_event_close();
 *     uv_run(loop, UV_RUN_DEFAULT);         runs the last free callbacks
 *     uv_loop_close(loop);                  returns 0
 *
 * libvirt may call the implementation from any thread; the loop thread is
 * the only one that touches libuv, and every libvirt callback (handle,
 * timeout and free callbacks) runs on it.
 *
 * The implementation's own wake-up handle is unreferenced: it does not keep
 * uv_run() going. What libvirt registers does, while it is enabled.
 */
#ifndef VPACK_VIRT_EVENT_H
#define VPACK_VIRT_EVENT_H

#include <stdbool.h>

#include <uv.h>

/*
 * Registers the implementation with libvirt (virEventRegisterImpl) and
 * binds it to @loop; the calling thread becomes the loop thread. Calls
 * virInitialize(). Returns 0, -EINVAL for a NULL loop, -EBUSY while a
 * loop is bound (call vpack_virt_event_close() and let the loop run its
 * close callbacks first), -EIO when libvirt fails to initialise, or the
 * negative errno of a failed uv_async_init().
 */
int vpack_virt_event_register(uv_loop_t *loop);

/*
 * Closes every libuv handle the implementation owns; loop thread only.
 * Free callbacks still due run from the loop's close callbacks. Watches and
 * timeouts libvirt has not removed by now (a connection still open) are
 * dropped without their free callbacks, and later calls from libvirt fail
 * (add returns -1, remove returns -1, update does nothing). Once the loop
 * has run the close callbacks, vpack_virt_event_register() may bind a new
 * loop. Calling it twice, or without a registered loop, does nothing.
 */
void vpack_virt_event_close(void);

/*
 * Deferred reads, for a caller that wakes at a steady interval anyway (the
 * agent's sampling tick). While @on, a watch that asks only to read
 * (libvirt's connection socket between messages: domain events, libvirtd's
 * keepalive probes) is not in the loop's poll set, so what arrives on it
 * does not wake the process: vpack_virt_event_check() serves it. A watch
 * that asks to write is served by the loop at once, as without deferral.
 * Off when registered; loop thread only.
 */
void vpack_virt_event_defer_reads(bool on);

/*
 * Serves the deferred watches: polls them (poll(2), no wait) and calls the
 * callbacks of those that are ready, and again until none is (libvirt
 * reads one message a callback; a keepalive probe and its answer take one
 * call, three poll(2)s), up to 16 rounds. A write still due after that
 * goes to the loop. When something was served, libvirt's period-0
 * timeouts then run once (libvirt hands a domain event to its callback from
 * one), so an event read here reaches its callback before this returns.
 * Returns how many times a ready descriptor's watches were called; 0 when
 * deferral is off, off the loop thread, or nothing was ready.
 */
unsigned vpack_virt_event_check(void);

#endif
