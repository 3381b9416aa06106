// SPDX-License-Identifier: MIT
/*
 * vpackd: the vpack agent. One libuv loop runs libvirt's events, the
 * sampling timer, the hotplug watcher, the control socket and signals.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>
#include <uv.h>

#include "agent.h"
#include "vpack-build.h"
#include "control.h"
#include "host.h"
#include "log.h"
#include "metrics.h"
#include "safefs.h"
#include "virt-event.h"
#include "webconfig.h"
#include "vpack/config.h"

/* The fixed directory of root's connection locks: systemd's RuntimeDirectory. */
#define VPACK_CONNECTION_LOCK_DIR "/run/vpack"

struct daemon {
    uv_loop_t loop;
    uv_signal_t sigterm, sigint, sighup;
    struct vpack_agent *agent;
    struct vpack_control *control;
    struct vpack_metrics *metrics;
    struct vpack_web *web;           /* what metrics serves with; NULL: plain HTTP */
    const struct vpack_config *cfg;  /* the configuration vpackd started with */
    char *config_path;
    char **sets;
    unsigned nsets;
    bool keep_placement;
    const char *topology;
    int exit_code;
    /* systemd's STATUS=: sent again only when the figures change. */
    uv_check_t status_check;
    struct vpack_agent_summary status;
};

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: vpackd [OPTIONS]\n\n"
            "The vpack agent: packs the vCPUs of libvirt/QEMU domains that ask for it\n"
            "(power policy level 1 or 2) onto the fewest CPU packages at low load, and\n"
            "spreads them again under load.\n\n"
            "Options:\n"
            "  -c, --config FILE       configuration file (default %s)\n"
            "  -s, --set SECTION.KEY=VALUE\n"
            "                          override one configuration key (repeatable)\n"
            "  -t, --topology SPEC     topology override, e.g. synthetic:\"package:2 core:1 pu:1\"\n"
            "  -k, --keep-placement    keep vpack's pins when stopping\n"
            "      --check-config      read the configuration, print it is fine, exit\n"
            "  -h, --help              this text\n"
            "  -V, --version           print the version\n\n"
            "Signals: SIGTERM and SIGINT stop (lifting vpack's pins), SIGHUP reloads.\n"
            "See vpackd(8) and vpackd.conf(5).\n",
            VPACK_DEFAULT_CONFIG);
}

/*
 * Reads the configuration file (a missing default file is fine) and the
 * overrides, and the web configuration it names into *web (NULL when none).
 */
static int load_config(struct daemon *dm, struct vpack_config *c, bool quiet_missing,
                       struct vpack_web **web)
{
    char *text = NULL, *err = NULL;
    const char *path = dm->config_path ? dm->config_path : VPACK_DEFAULT_CONFIG;
    int r = vpack_host_read_file(NULL, path, 1 << 20, &text, NULL);

    if (r < 0 && !(r == -ENOENT && !dm->config_path && quiet_missing)) {
        log_err("cannot read %s: %s", path, strerror(-r));
        return r;
    }
    r = vpack_config_load(c, text, path, dm->sets, dm->nsets, NULL, &err);
    free(text);
    if (r < 0) {
        log_err("%s", err ? err : "out of memory");
        free(err);
        return r;
    }
    *web = NULL;
    if (*c->metrics_web_config && (r = vpack_web_load(c->metrics_web_config, web, &err)) < 0) {
        log_err("metrics.web_config: %s", err ? err : "out of memory");
        free(err);
        vpack_config_clear(c);
        return r;
    }
    /* Not an error: the operator may mean it (a private cloud). */
    for (unsigned i = 0; i < c->rules.n; i++) {
        const char *field = vpack_rule_tenant_field(&c->rules.v[i]);
        if (field)
            log_warn("%s: line %u: rule \"%s\" matches on %s, which the tenant chooses: every "
                     "tenant can choose their own level (vpackd.conf(5), RULES)",
                     path, c->rules.v[i].line, c->rules.v[i].name, field);
    }
    if (dm->keep_placement)
        c->keep_placement = true;
    if (dm->topology) {
        free(c->topology);
        c->topology = strdup(dm->topology);
        if (!c->topology) {
            vpack_config_clear(c);
            vpack_web_free(*web);
            *web = NULL;
            return -ENOMEM;
        }
    }
    return 0;
}

static void close_walk_cb(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void stop(struct daemon *dm)
{
    if (!dm->agent)
        return;
    uv_signal_stop(&dm->sigterm);
    uv_signal_stop(&dm->sigint);
    uv_signal_stop(&dm->sighup);
    uv_close((uv_handle_t *)&dm->sigterm, NULL);
    uv_close((uv_handle_t *)&dm->sigint, NULL);
    uv_close((uv_handle_t *)&dm->sighup, NULL);
    uv_check_stop(&dm->status_check);
    uv_close((uv_handle_t *)&dm->status_check, NULL);
    sd_notify(0, "STOPPING=1\nSTATUS=stopping: giving the guests their pins back");
    vpack_control_stop(dm->control);
    dm->control = NULL;
    vpack_metrics_stop(dm->metrics);
    dm->metrics = NULL;
    vpack_agent_stop(dm->agent);
    dm->agent = NULL;
    vpack_virt_event_close();
}

static void on_stop_signal(uv_signal_t *h, int signum)
{
    struct daemon *dm = h->data;
    log_info("%s: stopping", strsignal(signum));
    stop(dm);
}

/*
 * Tells systemd (Type=notify; nothing without NOTIFY_SOCKET) what vpackd
 * does, when it changed: "N of M packages active, K domains placed". A
 * uv_check runs after every pass of the loop, so the figures are compared
 * after each interval, event and request; a line goes out only when they
 * differ, not every interval.
 */
static void notify_status(struct daemon *dm, bool force)
{
    struct vpack_agent_summary now;

    if (!dm->agent)
        return;
    vpack_agent_summary(dm->agent, &now);
    if (!force && !memcmp(&now, &dm->status, sizeof(now)))
        return;
    dm->status = now;
    sd_notifyf(0, "STATUS=%u of %u packages active, %u domains placed", now.active,
               now.packages, now.domains);
}

static void on_status_check(uv_check_t *h)
{
    notify_status(h->data, false);
}

/* RELOADING=1 with the time systemd 253+ wants beside it for reloads it
 * tracks (sd_notify(3)); systemd 252 (Debian 12) reads RELOADING=1 alone and
 * ignores the field it does not know. READY=1 ends the reload either way. */
static void notify_reloading(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64 "\nSTATUS=reloading the configuration",
               (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u);
}

/*
 * Serves the metrics with web instead (a reload whose web configuration
 * changed): the endpoint is started again on the same address, which closes
 * its connections (a scraper connects again). Should that fail, the old
 * web configuration is served again. Takes web.
 */
static void restart_metrics(struct daemon *dm, struct vpack_web *web)
{
    char *err = NULL;
    vpack_metrics_stop(dm->metrics);
    dm->metrics = NULL;
    int r = vpack_metrics_start_web(&dm->loop, dm->cfg, web, vpack_agent_metrics, dm->agent,
                                    &dm->metrics, &err);
    if (r == 0) {
        vpack_web_free(dm->web);
        dm->web = web;
    } else {
        log_err("SIGHUP: cannot serve metrics with %s: %s; the old web configuration stays",
                web ? web->path : "no web configuration", err ? err : strerror(-r));
        vpack_web_free(web);
        free(err);
        err = NULL;
        if ((r = vpack_metrics_start_web(&dm->loop, dm->cfg, dm->web, vpack_agent_metrics,
                                         dm->agent, &dm->metrics, &err)) < 0)
            log_err("SIGHUP: metrics endpoint stopped: %s", err ? err : strerror(-r));
    }
    free(err);
    if (dm->metrics)
        vpack_metrics_set_epoch(dm->metrics, vpack_agent_epoch);
}

static void on_hup(uv_signal_t *h, int signum)
{
    struct daemon *dm = h->data;
    struct vpack_config c;
    struct vpack_web *web = NULL;
    char *err = NULL;
    (void)signum;
    notify_reloading();
    if (load_config(dm, &c, true, &web) < 0) {
        log_err("SIGHUP: configuration not reloaded");
    } else {
        if (vpack_agent_reload(dm->agent, &c, &err) < 0)
            log_err("SIGHUP: %s", err ? err : "reload failed");
        free(err);
        vpack_config_clear(&c);
        /* The web configuration is read again (certificates renewed, users
         * changed); listen and port stay as vpackd started. */
        if (dm->cfg->metrics_enabled && !vpack_web_same(dm->web, web))
            restart_metrics(dm, web);
        else
            vpack_web_free(web);
    }
    /* The old configuration stays on a refusal: vpackd still serves. */
    sd_notify(0, "READY=1");
    notify_status(dm, true);
}

/* Reads the command line into dm: -1 to go on, or the exit code (--help, --version, errors). */
static int parse_args(int argc, char **argv, struct daemon *dm, bool *check_only)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"set", required_argument, NULL, 's'},
        {"topology", required_argument, NULL, 't'},
        {"keep-placement", no_argument, NULL, 'k'},
        {"check-config", no_argument, NULL, 'C'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "c:s:t:khV", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            dm->config_path = optarg;
            break;
        case 's': {
            char **n = realloc(dm->sets, (dm->nsets + 1) * sizeof(*n));
            if (!n)
                return 1;
            dm->sets = n;
            dm->sets[dm->nsets++] = optarg;
            break;
        }
        case 't':
            dm->topology = optarg;
            break;
        case 'k':
            dm->keep_placement = true;
            break;
        case 'C':
            *check_only = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("vpackd %s\n", VPACK_VERSION);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        log_err("unexpected argument '%s' (see vpackd --help)", argv[optind]);
        return 2;
    }
    return -1;
}

/*
 * Two agents would fight over the same domains. The state directory's lock
 * keeps two agents off one directory; the connection's lock (below) keeps
 * two off one libvirt connection, whatever their state directories.
 * Returns the locked file's descriptor, or -1 (logged).
 */
static int lock_state_dir(const struct vpack_config *cfg)
{
    char *err = NULL;
    int holder, fd, dfd = vpack_safefs_open_dir(cfg->state_dir, 0755, &err);
    if (dfd < 0) {
        log_err("state directory: %s", err ? err : strerror(-dfd));
        free(err);
        return -1;
    }
    fd = vpack_safefs_lock(dfd, "vpackd.lock", &holder);
    close(dfd);
    if (fd == -EWOULDBLOCK)
        log_err("%s/vpackd.lock: another vpackd (pid %d) is running with this state directory",
                cfg->state_dir, holder);
    else if (fd < 0)
        log_err("%s/vpackd.lock: %s", cfg->state_dir, strerror(-fd));
    return fd < 0 ? -1 : fd;
}

/*
 * Where the connection locks live: a fixed directory, so that agents with
 * different state directories still meet there. Root's is the service's
 * run directory; another user's (tests) is under XDG_RUNTIME_DIR, else its
 * state directory.
 */
static const char *connection_lock_dir(const struct vpack_config *cfg, char *buf, size_t len)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (geteuid() == 0)
        return VPACK_CONNECTION_LOCK_DIR;
    if (xdg && *xdg && snprintf(buf, len, "%s/vpack", xdg) < (int)len)
        return buf;
    return cfg->state_dir;
}

/*
 * One agent per libvirt connection: the lock "libvirt-URI-HASH.lock" (URI
 * with every byte but letters, digits, '.' and '-' as '_', cut at 64; HASH
 * the FNV-1a hash of the whole URI). URIs spelled differently count as
 * different connections (qemu:///system and qemu+unix:///system); the
 * control socket's check catches two such agents on one socket. Returns the
 * locked file's descriptor, or -1 (logged).
 */
static int lock_connection(const struct vpack_config *cfg)
{
    char dirbuf[4096], name[128], *err = NULL;
    const char *dir = connection_lock_dir(cfg, dirbuf, sizeof(dirbuf));
    uint64_t hash = 14695981039346656037ull;
    size_t n = 0;
    n += (size_t)snprintf(name, sizeof(name), "libvirt-");
    for (const char *p = cfg->libvirt_uri; *p; p++) {
        hash = (hash ^ (unsigned char)*p) * 1099511628211ull;
        if (p - cfg->libvirt_uri < 64)
            name[n++] = isalnum((unsigned char)*p) || *p == '.' || *p == '-' ? *p : '_';
    }
    snprintf(name + n, sizeof(name) - n, "-%016" PRIx64 ".lock", hash);
    int holder, fd, dfd = vpack_safefs_open_dir(dir, 0755, &err);
    if (dfd < 0) {
        log_err("the directory of the connection locks: %s", err ? err : strerror(-dfd));
        free(err);
        return -1;
    }
    fd = vpack_safefs_lock(dfd, name, &holder);
    close(dfd);
    if (fd == -EWOULDBLOCK)
        log_err("another vpackd (pid %d) is connected to %s: one agent per libvirt connection "
                "(%s/%s)", holder, cfg->libvirt_uri, dir, name);
    else if (fd < 0)
        log_err("%s/%s: %s", dir, name, strerror(-fd));
    return fd < 0 ? -1 : fd;
}

int main(int argc, char **argv)
{
    struct daemon dm = {.exit_code = 1};
    struct vpack_config cfg;
    bool check_only = false;
    char *err = NULL;
    int r, lockfd, connfd;

    if ((r = parse_args(argc, argv, &dm, &check_only)) >= 0) {
        free(dm.sets);
        return r;
    }
    if (load_config(&dm, &cfg, true, &dm.web) < 0) {
        free(dm.sets);
        return 1;
    }
    dm.cfg = &cfg;
    vpack_log_set_level(cfg.log_level);
    if (check_only) {
        printf("configuration OK\n");
        vpack_web_free(dm.web);
        vpack_config_clear(&cfg);
        free(dm.sets);
        return 0;
    }

    if ((lockfd = lock_state_dir(&cfg)) < 0) {
        vpack_web_free(dm.web);
        vpack_config_clear(&cfg);
        free(dm.sets);
        return 1;
    }
    if ((connfd = lock_connection(&cfg)) < 0) {
        close(lockfd);
        vpack_web_free(dm.web);
        vpack_config_clear(&cfg);
        free(dm.sets);
        return 1;
    }

    signal(SIGPIPE, SIG_IGN);
    uv_loop_init(&dm.loop);
    if ((r = vpack_virt_event_register(&dm.loop)) < 0) {
        log_err("cannot register the libvirt event loop: %s", strerror(-r));
        goto out;
    }
    if ((r = vpack_agent_start(&dm.loop, &cfg, &dm.agent, &err)) < 0) {
        log_err("cannot start: %s", err ? err : strerror(-r));
        goto out;
    }
    if ((r = vpack_control_start(&dm.loop, &cfg, dm.agent, &dm.control, &err)) < 0) {
        log_err("cannot open the control socket %s: %s", cfg.socket_path, err ? err : strerror(-r));
        vpack_agent_stop(dm.agent);
        dm.agent = NULL;
        vpack_virt_event_close();
        uv_run(&dm.loop, UV_RUN_DEFAULT);
        goto out;
    }
    if (cfg.metrics_enabled &&
        (r = vpack_metrics_start_web(&dm.loop, &cfg, dm.web, vpack_agent_metrics, dm.agent,
                                     &dm.metrics, &err)) < 0) {
        log_err("cannot serve metrics on %s port %u: %s", cfg.metrics_listen, cfg.metrics_port,
                err ? err : strerror(-r));
        vpack_control_stop(dm.control);
        dm.control = NULL;
        vpack_agent_stop(dm.agent);
        dm.agent = NULL;
        vpack_virt_event_close();
        uv_run(&dm.loop, UV_RUN_DEFAULT);
        goto out;
    }
    if (dm.metrics)
        vpack_metrics_set_epoch(dm.metrics, vpack_agent_epoch);
    uv_signal_init(&dm.loop, &dm.sigterm);
    uv_signal_init(&dm.loop, &dm.sigint);
    uv_signal_init(&dm.loop, &dm.sighup);
    dm.sigterm.data = dm.sigint.data = dm.sighup.data = &dm;
    uv_signal_start(&dm.sigterm, on_stop_signal, SIGTERM);
    uv_signal_start(&dm.sigint, on_stop_signal, SIGINT);
    uv_signal_start(&dm.sighup, on_hup, SIGHUP);
    log_info("vpackd %s started (topology %s, interval %u ms)", VPACK_VERSION, cfg.topology,
             cfg.interval_ms);
    /* Serving: the control socket listens and the metrics endpoint too. */
    sd_notify(0, "READY=1");
    notify_status(&dm, true);
    uv_check_init(&dm.loop, &dm.status_check);
    dm.status_check.data = &dm;
    uv_check_start(&dm.status_check, on_status_check);

    uv_run(&dm.loop, UV_RUN_DEFAULT);
    dm.exit_code = 0;
out:
    free(err);
    /* Anything still open (a failure path) is closed before the loop is. */
    uv_walk(&dm.loop, close_walk_cb, NULL);
    uv_run(&dm.loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&dm.loop) != 0) {
        log_err("event loop still busy at exit");
        dm.exit_code = 1;
    }
    vpack_web_free(dm.web);
    vpack_config_clear(&cfg);
    free(dm.sets);
    close(connfd);
    close(lockfd);
    log_info("stopped");
    return dm.exit_code;
}
