/* SPDX-License-Identifier: MIT */
/*
 * The metrics endpoint: Prometheus text on HTTP (libmicrohttpd) at
 * http://[metrics] listen:port/metrics, run from the agent's libuv loop (no
 * thread of its own). GET and HEAD of /metrics and of / (a page linking
 * /metrics) are answered; other paths get 404, other methods 405. Each scrape
 * renders what the collect callback returns plus the host's power readings
 * under [agent] sysfs_root (hostpower.h: cpuidle residency, RAPL package
 * energy) and vpackd's own process figures (host.h,
 * vpack_host_self_process(): the process_* families); lib/format/prom.c does
 * the text.
 *
 * Limits: 64 connections, 10 s of inactivity, 32 KiB of request per
 * connection (a larger request gets 431 or 414). Above 56 connections a new
 * one makes room by closing the least recently active connection that is
 * not being answered, so idle connections cannot lock scrapers out.
 */
#ifndef VPACK_METRICS_H
#define VPACK_METRICS_H

#include <stdint.h>

#include <uv.h>

#include "vpack/config.h"
#include "vpack/prom.h"

struct vpack_metrics;

/*
 * What is served: the metrics as they are now, freed by the endpoint with
 * vpack_prom_metrics_free(); NULL (out of memory) gets a 500 answer.
 */
typedef struct vpack_prom_metrics *(*vpack_metrics_collect_fn)(void *ud);

/*
 * Listens on cfg->metrics_listen (an IPv4 or IPv6 address) port
 * cfg->metrics_port (0: any free port, see vpack_metrics_port()) and serves
 * collect(ud) at each scrape, from loop. ud must outlive the endpoint.
 * Returns 0, or a negative errno with *errmsg (caller frees).
 */
int vpack_metrics_start(uv_loop_t *loop, const struct vpack_config *cfg,
                        vpack_metrics_collect_fn collect, void *ud, struct vpack_metrics **out,
                        char **errmsg);

/*
 * The same with the web configuration web (webconfig.h; NULL: plain HTTP as
 * vpack_metrics_start()), which must outlive the endpoint: with TLS, HTTPS
 * only (libmicrohttpd on GnuTLS; a plain HTTP request on the port gets no
 * answer); with client certificates required, a request without one that
 * client_ca_file's CAs signed gets 403 (and the connection's end); with users, every request needs basic authentication (401 and
 * WWW-Authenticate without it or with a wrong one). A check that bcrypt
 * must run (not one already answered yes) counts against a budget of
 * CRYPT_PER_S per second for the endpoint; past it the request gets 503
 * with Retry-After: bcrypt costs about 60 ms of the agent's loop at cost 10.
 */
struct vpack_web;
int vpack_metrics_start_web(uv_loop_t *loop, const struct vpack_config *cfg, struct vpack_web *web,
                            vpack_metrics_collect_fn collect, void *ud, struct vpack_metrics **out,
                            char **errmsg);

/* bcrypt runs refused for the budget so far (a 503 each). */
unsigned long long vpack_metrics_crypt_refused(const struct vpack_metrics *m);

/*
 * Closes the listening socket and every connection now; the memory is freed
 * once the loop has closed the handles. NULL is fine.
 */
void vpack_metrics_stop(struct vpack_metrics *m);

/*
 * What counts the changes of what collect(ud) shows (the agent's epoch: one
 * per sampling interval and one per change in between). The page is
 * rendered once per epoch and served from that copy (for a second at most);
 * without it, the copy lasts a second.
 */
typedef uint64_t (*vpack_metrics_epoch_fn)(void *ud);
void vpack_metrics_set_epoch(struct vpack_metrics *m, vpack_metrics_epoch_fn epoch);

/* The TCP port the endpoint listens on (the one picked when configured 0). */
unsigned vpack_metrics_port(const struct vpack_metrics *m);

#endif
