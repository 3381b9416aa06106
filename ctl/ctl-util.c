// SPDX-License-Identifier: MIT
/* What every vpackctl subcommand may use: options, output, the topology. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "client.h"
#include "virt.h"
#include "vpack/cpuset.h"
#include "vpack/topology.h"
#include "vpackctl.h"

void vpackctl_option_error(const char *cmd, int c, char **argv)
{
    const char *arg = argv[optind - 1];

    if (c == ':')
        vpackctl_err("%s: option '%s' needs an argument (see 'vpackctl %s --help')", cmd, arg,
                     cmd);
    else if (optopt >= 256 || optopt == 'h')
        /* getopt_long() puts a known option's val here when it got an argument. */
        vpackctl_err("%s: option '%s' takes no argument (see 'vpackctl %s --help')", cmd, arg,
                     cmd);
    else if (optopt)
        vpackctl_err("%s: unknown option '-%c' (see 'vpackctl %s --help')", cmd, optopt, cmd);
    else
        vpackctl_err("%s: unknown option '%s' (see 'vpackctl %s --help')", cmd, arg, cmd);
}

int vpackctl_getopt(struct vpackctl_getopt *g, int argc, char **argv)
{
    int c, index = -1;

    if (!g->started) {
        g->started = true;
        /* Our own messages name the subcommand; getopt's would say "plan:". */
        opterr = 0;
        /* 0, not 1: glibc then resets its state, in case getopt ran before. */
        optind = 0;
    }
    c = getopt_long(argc, argv, ":h", g->options, &index);
    g->option = index >= 0 ? g->options[index].name : NULL;
    if (c == 'h') {
        g->usage(stdout);
        g->exit_code = VPACKCTL_EXIT_OK;
        return VPACKCTL_OPT_EXIT;
    }
    if (c == ':' || c == '?') {
        vpackctl_option_error(g->cmd, c, argv);
        g->exit_code = VPACKCTL_EXIT_USAGE;
        return VPACKCTL_OPT_EXIT;
    }
    return c == -1 ? VPACKCTL_OPT_END : c;
}

int vpackctl_parse_seconds(const char *cmd, const char *opt, const char *text, bool zero_ok,
                           double max, double *out)
{
    char *end;
    double s;

    errno = 0;
    s = strtod(text, &end);
    if (end == text || *end || errno || !isfinite(s) || s < 0 || (s == 0 && !zero_ok) ||
        s > max) {
        vpackctl_err("%s: %s '%s': expected seconds, %s and at most %g", cmd, opt, text,
                     zero_ok ? "0 or more" : "more than 0", max);
        return VPACKCTL_EXIT_USAGE;
    }
    *out = s;
    return VPACKCTL_PROCEED;
}

double vpackctl_now(void)
{
    return (double)vpack_client_now_ms() / 1e3;
}

void vpackctl_sleep(double s)
{
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

int vpackctl_flush(void)
{
    /* A full disk or closed pipe shows up here, not at printf(). */
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        vpackctl_err("cannot write the output%s%s", errno ? ": " : "", errno ? strerror(errno) : "");
        return VPACKCTL_EXIT_FAIL;
    }
    return VPACKCTL_EXIT_OK;
}

int vpackctl_print_json(struct json_object *o)
{
    int flags = JSON_C_TO_STRING_NOSLASHESCAPE;

    if (isatty(STDOUT_FILENO))
        flags |= JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED;
    puts(json_object_to_json_string_ext(o, flags));
    return vpackctl_flush();
}

int vpackctl_load_topology(const char *cmd, const char *spec, const char *reserved,
                           struct vpack_topology **topo)
{
    vpack_cpuset cpus;
    char *errmsg = NULL;

    *topo = NULL;
    if (reserved && vpack_cpuset_parse(&cpus, reserved, &errmsg) < 0) {
        vpackctl_err("%s: --reserved '%s': %s", cmd, reserved, errmsg ? errmsg : "out of memory");
        free(errmsg);
        return VPACKCTL_EXIT_USAGE;
    }
    if (vpack_topology_load(spec, reserved ? &cpus : NULL, NULL, topo, &errmsg) < 0) {
        vpackctl_err("%s", errmsg ? errmsg : "cannot load the topology: out of memory");
        free(errmsg);
        return VPACKCTL_EXIT_FAIL;
    }
    return VPACKCTL_EXIT_OK;
}

int vpackctl_virt_open(const char *uri, struct vpack_virt **v)
{
    char *err = NULL;

    if (vpack_virt_open_sync(uri, v, &err) < 0) {
        vpackctl_err("cannot connect to libvirt at %s: %s", uri, err ? err : "out of memory");
        free(err);
        return VPACKCTL_EXIT_FAIL;
    }
    return VPACKCTL_EXIT_OK;
}
