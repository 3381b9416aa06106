// SPDX-License-Identifier: MIT
/*
 * vpackctl wait: blocks until the agent's status meets a condition, like
 * `kubectl wait --for` and `virsh event --timeout`. It connects once and
 * asks for the status on that one connection every POLL_S, so that watching
 * the agent costs one process, one connection and a status answer twice a
 * second: no process started per look.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "ctl-client.h"
#include "vpack/config.h"
#include "vpack/cpuset.h"
#include "vpack/domxml.h"
#include "vpackctl.h"

/*
 * Between two looks. The agent plans once a second by default, so looking
 * more often gains little, and each look costs it: measured on a 2-CPU
 * Debian 12 VM without a cpuidle driver, about 45 us of vpackd's CPU for
 * a status answer when asked back to back, 120 to 230 us when it has been
 * idle in between (looks every 0.2, 0.5 or 1 s). Every 0.5 s that is about
 * 0.035% of one CPU, against vpackd's own 0.04 to 0.05% when idle.
 */
#define POLL_S 0.5
/* --timeout's default and limit, in seconds. */
#define DEFAULT_TIMEOUT_S 30
#define MAX_TIMEOUT_S 604800

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: vpackctl wait --for CONDITION [--timeout SECONDS] [--json] [--socket PATH]\n"
            "\n"
            "Wait until the running agent reports CONDITION, asking it for its status\n"
            "every 0.5 s on one connection, then print the state it reported (one line,\n"
            "or with --json the status object) and exit 0. After --timeout without it,\n"
            "print the last state and exit 1. Conditions on packages hold only once the\n"
            "agent has made its first plan.\n"
            "\n"
            "Conditions:\n"
            "  packed            at least one package is parked\n"
            "  spread            no package is parked\n"
            "  parked=N          exactly N packages are parked\n"
            "  level=DOMAIN:N    the agent reports DOMAIN at effective level N (0, 1 or 2)\n"
            "\n"
            "Options:\n"
            "  --for CONDITION   what to wait for (required)\n"
            "  --timeout SECONDS how long to wait (default %d; 0: look once)\n"
            "  --json            print the last status object as JSON\n"
            "  --socket PATH     the agent's control socket (default: $VPACK_SOCKET,\n"
            "                    else " VPACK_DEFAULT_SOCKET ")\n"
            "  -h, --help        show this help\n"
            "\n"
            "Exit status: 0 the condition holds; 1 timed out (or the agent refused);\n"
            "2 usage error; 3 the agent cannot be reached or dropped the connection.\n",
            DEFAULT_TIMEOUT_S);
}

enum {
    OPT_FOR = 256,
    OPT_TIMEOUT,
    OPT_JSON,
    OPT_SOCKET,
};

/* A parsed --for. */
struct cond {
    enum { COND_PACKED, COND_SPREAD, COND_PARKED, COND_LEVEL } kind;
    unsigned n;          /* parked=N: the packages; level=DOMAIN:N: the level */
    char *domain;        /* level=: the domain's name (owned) */
};

/*
 * Parses text as a condition. Returns VPACKCTL_PROCEED with *c (free
 * c->domain), or VPACKCTL_EXIT_USAGE after one line on stderr naming text.
 */
static int cond_parse(const char *text, struct cond *c)
{
    const char *colon;
    char *end;
    int level;

    *c = (struct cond){0};
    if (!strcmp(text, "packed")) {
        c->kind = COND_PACKED;
    } else if (!strcmp(text, "spread")) {
        c->kind = COND_SPREAD;
    } else if (!strncmp(text, "parked=", 7)) {
        unsigned long n;

        c->kind = COND_PARKED;
        n = strtoul(text + 7, &end, 10);
        if (text[7] < '0' || text[7] > '9' || *end || n > VPACK_CPUSET_MAX) {
            vpackctl_err("wait: --for '%s': N of parked=N must be a number of packages",
                         text);
            return VPACKCTL_EXIT_USAGE;
        }
        c->n = (unsigned)n;
    } else if (!strncmp(text, "level=", 6)) {
        /* The last colon: a domain's name may have one. */
        c->kind = COND_LEVEL;
        colon = strrchr(text + 6, ':');
        if (!colon || colon == text + 6) {
            vpackctl_err("wait: --for '%s': expected level=DOMAIN:N", text);
            return VPACKCTL_EXIT_USAGE;
        }
        if ((level = vpack_domxml_level_parse(colon + 1)) < 0) {
            vpackctl_err("wait: --for '%s': '%s' is not a power policy level (0, 1 or 2)", text,
                         colon + 1);
            return VPACKCTL_EXIT_USAGE;
        }
        c->n = (unsigned)level;
        if (!(c->domain = strndup(text + 6, (size_t)(colon - (text + 6))))) {
            vpackctl_err("wait: out of memory");
            return VPACKCTL_EXIT_FAIL;
        }
    } else {
        vpackctl_err("wait: --for '%s': unknown condition (expected packed, spread, parked=N "
                     "or level=DOMAIN:N)", text);
        return VPACKCTL_EXIT_USAGE;
    }
    return VPACKCTL_PROCEED;
}

/*
 * Whether the status st meets c; writes the state it tells into f, one line
 * without its newline: "packages 0 active, 1 parked; demand 0.41 CPUs", or
 * "domain web1 level 2".
 */
static bool cond_eval(const struct cond *c, struct json_object *st, FILE *f)
{
    struct json_object *arr;
    size_t n;
    unsigned parked = 0;
    bool planned = json_object_object_get_ex(st, "reason", NULL);

    if (c->kind == COND_LEVEL) {
        arr = vpack_json_array(st, "domains");
        n = arr ? json_object_array_length(arr) : 0;
        for (size_t i = 0; i < n; i++) {
            struct json_object *d = json_object_array_get_idx(arr, i);
            struct json_object *lv;

            if (strcmp(vpack_json_str(d, "name", ""), c->domain))
                continue;
            if (!json_object_object_get_ex(d, "level", &lv) ||
                !json_object_is_type(lv, json_type_int))
                break;
            fprintf(f, "domain %s level %d", c->domain, json_object_get_int(lv));
            return json_object_get_int(lv) == (int)c->n;
        }
        fprintf(f, "domain %s not reported by vpackd", c->domain);
        return false;
    }
    arr = vpack_json_array(st, "packages");
    n = arr ? json_object_array_length(arr) : 0;
    fputs("packages", f);
    for (size_t i = 0; i < n; i++) {
        struct json_object *p = json_object_array_get_idx(arr, i);
        const char *state = vpack_json_str(p, "state", "?");

        parked += !strcmp(state, "parked");
        fprintf(f, "%s %s %s", i ? "," : "", vpack_json_text(p, "id", "?"), state);
    }
    if (!n)
        fputs(" none", f);
    if (planned)
        fprintf(f, "; demand %.2f CPUs", vpack_json_double(st, "demand", 0));
    else
        fputs("; no plan yet", f);
    return planned && (c->kind == COND_PACKED   ? parked > 0
                       : c->kind == COND_SPREAD ? parked == 0
                                                : parked == c->n);
}

/* Prints the state: the status object with --json, else line. Returns an exit code. */
static int show(const struct vpackctl_args *a, struct json_object *st, const char *line)
{
    if (a->json)
        return vpackctl_print_json(st);
    puts(line);
    return vpackctl_flush();
}

int wait_main(int argc, char **argv)
{
    /* A getopt table: its rows look alike because they are one kind of data. */
    static const struct option options[] = {
        {"for", required_argument, NULL, OPT_FOR},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"json", no_argument, NULL, OPT_JSON},
        {"socket", required_argument, NULL, OPT_SOCKET},
        VPACKCTL_OPTIONS_END,
    };
    struct vpackctl_getopt g = {.cmd = "wait", .usage = usage, .options = options};
    struct vpackctl_args a = {.cmd = "wait"};
    struct json_object *st = NULL;
    struct cond cond = {0};
    const char *socket = NULL, *cond_text = NULL;
    double timeout = DEFAULT_TIMEOUT_S, deadline;
    char *line = NULL;
    size_t line_len = 0;
    int c, fd = -1, ret;

    while ((c = vpackctl_getopt(&g, argc, argv)) >= 0) {
        if (c == OPT_FOR)
            cond_text = optarg;
        else if (c == OPT_TIMEOUT &&
                 (ret = vpackctl_parse_seconds("wait", "--timeout", optarg, true, MAX_TIMEOUT_S,
                                               &timeout)) != VPACKCTL_PROCEED)
            return ret;
        else if (c == OPT_JSON)
            a.json = true;
        else if (c == OPT_SOCKET)
            socket = optarg;
    }
    if (c == VPACKCTL_OPT_EXIT)
        return g.exit_code;
    if (optind < argc) {
        vpackctl_err("wait: unexpected argument '%s' (see 'vpackctl wait --help')", argv[optind]);
        return VPACKCTL_EXIT_USAGE;
    }
    if (!cond_text) {
        vpackctl_err("wait: --for CONDITION is required (see 'vpackctl wait --help')");
        return VPACKCTL_EXIT_USAGE;
    }
    if (socket && !*socket) {
        vpackctl_err("wait: --socket needs a path");
        return VPACKCTL_EXIT_USAGE;
    }
    if ((ret = cond_parse(cond_text, &cond)) != VPACKCTL_PROCEED)
        return ret;
    a.socket = vpack_client_socket_path(socket);
    deadline = vpackctl_now() + timeout;
    if ((ret = vpackctl_connect(a.socket, VPACKCTL_TIMEOUT_MS, &fd)))
        goto cleanup;
    for (;;) {
        FILE *f;
        bool holds;
        double left;

        json_object_put(st);
        if ((ret = vpackctl_ask_on(&a, fd, VPACKCTL_TIMEOUT_MS, "status", &st, "status", NULL)))
            goto cleanup;
        free(line);
        line = NULL;
        if (!(f = open_memstream(&line, &line_len))) {
            vpackctl_err("wait: out of memory");
            ret = VPACKCTL_EXIT_FAIL;
            goto cleanup;
        }
        holds = cond_eval(&cond, st, f);
        if (fclose(f) != 0) {
            vpackctl_err("wait: out of memory");
            ret = VPACKCTL_EXIT_FAIL;
            goto cleanup;
        }
        if (holds)
            break;
        if ((left = deadline - vpackctl_now()) <= 0) {
            vpackctl_err("wait: %s not reached within %g s", cond_text, timeout);
            ret = show(&a, st, line);
            ret = ret ? ret : VPACKCTL_EXIT_FAIL;
            goto cleanup;
        }
        vpackctl_sleep(left < POLL_S ? left : POLL_S);
    }
    ret = show(&a, st, line);
cleanup:
    if (fd >= 0)
        close(fd);
    json_object_put(st);
    free(line);
    free(cond.domain);
    return ret;
}
