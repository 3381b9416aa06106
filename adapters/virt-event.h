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

#endif
