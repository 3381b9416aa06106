// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the HTTP request path of the metrics endpoint: the
 * real adapters/metrics.c (libmicrohttpd on a libuv loop, as in vpackd) serves
 * on a loopback port; each input is sent as the raw bytes of one client
 * connection (then the client half-closes), and the reply is read until the
 * server closes or has nothing more to say. So MHD's request parsing, our request handler with any
 * method, URL and headers, the connection tracking and eviction and the
 * scrape itself (lib/format/prom.c over a stub agent's metrics and a small /sys
 * tree) all run on fuzzed input. Checked on every input:
 *
 *  - the endpoint never crashes, leaks or hangs (ASan, LeakSanitizer, the
 *    -timeout), and every 256 inputs a fresh GET /metrics still gets 200
 *    (however many connections the inputs left open) and the open
 *    descriptors stay within the endpoint's connection limit;
 *  - a reply, if any, starts with an HTTP/1.x status line;
 *  - a 200 only answers GET or HEAD of "/" or "/metrics" (the first request
 *    line, percent-decoded, query string ignored), with the Prometheus
 *    content type for /metrics and no body for HEAD;
 *  - a 405 carries "Allow: GET, HEAD"; a 2xx is never given to another method.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "log.h"
#include "metrics.h"
#include "vpack/config.h"
#include "vpack/prom.h"

#define CHECK(cond) ((cond) ? (void)0 : abort())
#define MAX_REPLY (4u << 20)

/* The stub agent: the metrics the endpoint renders (a fresh copy each scrape). */
static struct vpack_prom_metrics *collect(void *ud)
{
    static const struct vpack_prom_package pkg = {0, 0.5, 12.5, true, true};
    static const struct vpack_prom_thread vcpu = {VPACK_PROM_VCPU, 0, 12.5, 0.25, true};
    static const struct vpack_prom_count reb = {"pack", NULL, 2}, op = {"plan", "ok", 7};
    struct vpack_prom_metrics *m = calloc(1, sizeof(*m));
    (void)ud;
    if (!m)
        return NULL;
    *m = (struct vpack_prom_metrics){.version = "0.1.0", .connected = true,
                                     .demand = 0.75, .counters = {.samples = 42, .connects = 1}};
    m->packages = malloc(sizeof(pkg));
    m->domains = calloc(1, sizeof(*m->domains));
    m->rebalances = malloc(sizeof(reb));
    m->pin_ops = malloc(sizeof(op));
    if (!m->packages || !m->domains || !m->rebalances || !m->pin_ops) {
        vpack_prom_metrics_free(m);
        return NULL;
    }
    *m->packages = pkg;
    m->npackages = 1;
    *m->rebalances = reb;
    m->nrebalances = 1;
    *m->pin_ops = op;
    m->npin_ops = 1;
    m->ndomains = 1;
    m->domains[0] = (struct vpack_prom_domain){strdup("web1"), 2, true, malloc(sizeof(int)), 1,
                                               malloc(sizeof(vcpu)), 1, -1};
    if (!m->domains[0].name || !m->domains[0].packages || !m->domains[0].threads) {
        vpack_prom_metrics_free(m);
        return NULL;
    }
    m->domains[0].packages[0] = 0;
    m->domains[0].threads[0] = vcpu;
    vpack_prom_observe(&m->plan_duration, 0.0007);
    vpack_prom_observe(&m->cycle_duration, 0.0045);
    return m;
}

static uv_loop_t loop;
static struct vpack_metrics *endpoint;
static unsigned port;
static char root[] = "/tmp/vpack-fuzz-metrics-XXXXXX";
static int base_fds;
static unsigned long runs, slow;

static void put(const char *rel, const char *text)
{
    char path[512], cmd[600];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
    CHECK(system(cmd) == 0);
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

static void remove_root(void)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", root);
}

static int count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL);
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Lets the endpoint work: one pass of the loop, then a look at fd. */
static void turn(int fd, short events, int wait_ms)
{
    struct pollfd p = {fd, events, 0};
    uv_run(&loop, UV_RUN_NOWAIT);
    poll(&p, 1, wait_ms);
}

/*
 * One client connection: sends req, half-closes, returns what came back
 * (NUL-terminated). MHD keeps a keep-alive connection open after the
 * client's half-close, so the exchange also ends once the endpoint has had
 * IDLE_TURNS passes of the loop with nothing new to send: everything here is
 * on one thread and loopback, so by then it has answered all it will.
 */
#define IDLE_TURNS 12
static char *exchange(const uint8_t *req, size_t len, size_t *out_len)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    CHECK(fd >= 0);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
        CHECK(errno == EINPROGRESS);
    char *buf = malloc(MAX_REPLY + 1);
    CHECK(buf != NULL);
    size_t off = 0, got = 0;
    bool shut = false;
    int idle = 0;
    double deadline = now_s() + 5;
    for (;;) {
        if (off < len) {
            ssize_t n = send(fd, req + off, len - off, MSG_NOSIGNAL);
            if (n > 0)
                off += (size_t)n;
            else if (n < 0 && errno != EAGAIN && errno != EINPROGRESS && errno != ENOTCONN)
                off = len; /* the server answered and closed before reading it all */
        }
        if (off == len && !shut) {
            shutdown(fd, SHUT_WR);
            shut = true;
        }
        ssize_t n = recv(fd, buf + got, MAX_REPLY - got, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN) || got == MAX_REPLY)
            break;
        if (n > 0) {
            got += (size_t)n;
            idle = 0;
            continue;
        }
        if (shut && ++idle > IDLE_TURNS)
            break;
        if (now_s() > deadline) {
            slow++; /* still busy after 5 s: counted, the -timeout catches a hang */
            break;
        }
        turn(fd, off < len ? POLLIN | POLLOUT : POLLIN, shut ? 0 : 1);
    }
    close(fd);
    /* Let MHD see the close and free the connection. */
    for (int i = 0; i < 4; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    buf[got] = '\0';
    *out_len = got;
    return buf;
}

static int status_of(const char *r, size_t len)
{
    if (len < 12 || (memcmp(r, "HTTP/1.1 ", 9) && memcmp(r, "HTTP/1.0 ", 9)) ||
        !isdigit((unsigned char)r[9]) || !isdigit((unsigned char)r[10]) ||
        !isdigit((unsigned char)r[11]))
        return -1;
    return (r[9] - '0') * 100 + (r[10] - '0') * 10 + (r[11] - '0');
}

/* The end of a line at d[i]: "\n" or "\r\n" (a lone '\r' is part of the line for MHD). */
static bool eol(const uint8_t *d, size_t len, size_t i)
{
    return d[i] == '\n' || (d[i] == '\r' && i + 1 < len && d[i + 1] == '\n');
}

static int hexval(char c)
{
    return isdigit((unsigned char)c) ? c - '0' : isxdigit((unsigned char)c) ? (tolower(c) - 'a' + 10) : -1;
}

/* The method and the percent-decoded path (without query) of the first request line. */
static void request_line(const uint8_t *d, size_t len, char *method, size_t mlen,
                         size_t *method_bytes, char *path, size_t plen)
{
    size_t i = 0, k = 0, start;
    /* Lines before the request line that are empty as C strings are skipped, as MHD does. */
    while (i < len && (d[i] == '\r' || d[i] == '\n' || d[i] == '\0')) {
        if (d[i] == '\0') {
            const uint8_t *nl = memchr(d + i, '\n', len - i);
            i = nl ? (size_t)(nl - d) : len;
        }
        i++;
    }
    /* (A NUL ends the method for libmicrohttpd as for strcmp: "GET\0\0 /" is a GET.) */
    for (start = i; i < len && d[i] != ' ' && !eol(d, len, i); i++)
        if (k + 1 < mlen)
            method[k++] = (char)d[i];
    method[k] = '\0';
    *method_bytes = i - start;
    while (i < len && d[i] == ' ')
        i++;
    k = 0;
    for (; i < len && d[i] != ' ' && d[i] != '?' && !eol(d, len, i) && k + 1 < plen; i++) {
        /* (a path longer than plen cannot decode to "/" or "/metrics": cut, it fails) */
        if (d[i] == '%' && i + 2 < len && hexval((char)d[i + 1]) >= 0 && hexval((char)d[i + 2]) >= 0) {
            path[k++] = (char)(hexval((char)d[i + 1]) * 16 + hexval((char)d[i + 2]));
            i += 2;
        } else {
            path[k++] = (char)d[i];
        }
    }
    path[k] = '\0';
}

static void check_alive(void)
{
    static const char get[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    size_t len;
    char *r = exchange((const uint8_t *)get, sizeof(get) - 1, &len);
    CHECK(status_of(r, len) == 200);
    CHECK(strstr(r, "\nvpack_domain_level{domain=\"web1\"} 2\n") != NULL);
    free(r);
    /*
     * libmicrohttpd (0.9.75) does not notice that a client which half-closed
     * after a keep-alive request has gone: it keeps the connection until its
     * 10 s timeout. The endpoint's limit (64, evicting idle ones above 56)
     * bounds them, which is what this checks, with the scrape above.
     */
    CHECK(count_fds() <= base_fds + 64 + 4);
}

static void at_exit(void)
{
    fprintf(stderr, "fuzz-metrics: %lu inputs, %lu still busy after 5 s\n", runs, slow);
    vpack_metrics_stop(endpoint);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    remove_root();
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct vpack_config cfg;
    char *err = NULL;
    (void)argc;
    (void)argv;
    vpack_log_set_level(getenv("VPACK_FUZZ_LOG") ? getenv("VPACK_FUZZ_LOG") : "error");
    CHECK(mkdtemp(root) != NULL);
    put("sys/devices/system/cpu/cpu0/cpuidle/state0/name", "POLL\n");
    put("sys/devices/system/cpu/cpu0/cpuidle/state0/time", "10\n");
    put("sys/devices/system/cpu/cpu0/cpuidle/state1/name", "C1\n");
    put("sys/devices/system/cpu/cpu0/cpuidle/state1/time", "2500000\n");
    put("sys/class/powercap/intel-rapl:0/name", "package-0\n");
    put("sys/class/powercap/intel-rapl:0/energy_uj", "900\n");
    put("sys/class/powercap/intel-rapl:0/max_energy_range_uj", "1000\n");
    CHECK(uv_loop_init(&loop) == 0);
    CHECK(vpack_config_init(&cfg) == 0);
    cfg.metrics_port = 0;
    free(cfg.sysfs_root);
    cfg.sysfs_root = strdup(root);
    if (vpack_metrics_start(&loop, &cfg, collect, NULL, &endpoint, &err) < 0) {
        fprintf(stderr, "vpack_metrics_start: %s\n", err ? err : "?");
        abort();
    }
    vpack_config_clear(&cfg);
    port = vpack_metrics_port(endpoint);
    base_fds = count_fds();
    atexit(at_exit);
    check_alive();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t len;
    char method[16], path[64];
    size_t method_bytes;
    char *r = exchange(data, size, &len);
    int st = status_of(r, len);

    if (getenv("VPACK_FUZZ_VERBOSE"))
        fprintf(stderr, "reply: %d, %zu bytes, %d fds open: %.*s\n", st, len, count_fds() - base_fds,
                (int)(strchr(r, '\r') ? strchr(r, '\r') - r : 0), r);
    CHECK(len == 0 || st >= 100);
    if (st >= 200 && st < 300) {
        request_line(data, size, method, sizeof(method), &method_bytes, path, sizeof(path));
        bool head = !strcmp(method, "HEAD");
        CHECK(head || !strcmp(method, "GET"));
        CHECK(!strcmp(path, "/") || !strcmp(path, "/metrics"));
        CHECK(st == 200);
        const char *body = strstr(r, "\r\n\r\n");
        CHECK(body != NULL);
        if (!strcmp(path, "/metrics"))
            CHECK(strstr(r, "\r\nContent-Type: " VPACK_PROM_CONTENT_TYPE "\r\n") != NULL);
        /*
         * HEAD: the headers only (a pipelined second reply may follow). But
         * for "HEAD\0\0" MHD hands the handler "HEAD" while it decides
         * itself, on the whole token, that this is not HEAD and sends the
         * body: harmless, and nothing the handler can see.
         */
        if (head && method_bytes == 4)
            CHECK(body[4] == '\0' || !strncmp(body + 4, "HTTP/1.", 7));
    }
    if (st == 405)
        CHECK(strstr(r, "\r\nAllow: GET, HEAD\r\n") != NULL);
    free(r);
    if (++runs % 256 == 0)
        check_alive();
    return 0;
}
