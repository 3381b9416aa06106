// SPDX-License-Identifier: MIT
/*
 * vpackctl record: writes the running agent's snapshots as a trace (one
 * interval per line, vpack/trace.h) for `vpackctl simulate`. It asks the
 * agent for its last snapshot (the control socket's "snapshot" op) four
 * times per interval and writes each new one once.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "client.h"
#include "ctl-client.h"
#include "vpack/config.h"
#include "vpack/snapshot.h"
#include "vpack/trace.h"
#include "vpackctl.h"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: vpackctl record --duration SECONDS --output FILE [--socket PATH]\n"
            "\n"
            "Record the running agent's snapshots for SECONDS as a trace, one interval\n"
            "per line, for 'vpackctl simulate --trace FILE'. A thread's demand is what\n"
            "it ran plus what it waited in the run queue. Needs a running vpackd.\n"
            "\n"
            "Options:\n"
            "  --duration SECONDS  how long to record (up to 604800)\n"
            "  --output FILE       the trace to write ('-': standard output)\n"
            "  --socket PATH       the agent's control socket (default: $VPACK_SOCKET,\n"
            "                      else " VPACK_DEFAULT_SOCKET ")\n"
            "  -h, --help          show this help\n");
}

enum {
    OPT_DURATION = 256,
    OPT_OUTPUT,
    OPT_SOCKET,
};

/*
 * The agent's snapshot, asked on fd (one connection for the whole record:
 * vpackd's cost of an accept per poll is saved), as a trace line (caller
 * frees), or NULL with *none when it has none yet. Returns an exit code.
 */
static int fetch(const struct vpackctl_args *a, int fd, char **line, unsigned *interval_ms,
                 bool *none)
{
    struct json_object *body = NULL, *snap;
    struct vpack_snapshot *s = NULL;
    const char *text;
    char *err = NULL;
    int ret;

    *line = NULL;
    *none = false;
    if ((ret = vpackctl_ask_on(a, fd, VPACKCTL_TIMEOUT_MS, NULL, &body, "snapshot", NULL)))
        return ret;
    if (!json_object_object_get_ex(body, "snapshot", &snap) ||
        !json_object_is_type(snap, json_type_object)) {
        *none = true;
        goto cleanup;
    }
    text = json_object_to_json_string_ext(snap, JSON_C_TO_STRING_PLAIN);
    if (vpack_snapshot_parse(text, strlen(text), &s, &err) < 0) {
        vpackctl_err("record: the agent's snapshot does not read back: %s",
                     err ? err : "out of memory");
        ret = VPACKCTL_EXIT_FAIL;
        goto cleanup;
    }
    vpack_trace_from_observed(s);
    *interval_ms = s->interval_ms;
    *line = vpack_snapshot_to_json(s);
    if (!*line) {
        vpackctl_err("record: out of memory");
        ret = VPACKCTL_EXIT_FAIL;
    }

cleanup:
    free(err);
    vpack_snapshot_free(s);
    json_object_put(body);
    return ret;
}

int record_main(int argc, char **argv)
{
    /* A getopt table: its rows look alike because they are one kind of data. */
    static const struct option options[] = {
        {"duration", required_argument, NULL, OPT_DURATION},
        {"output", required_argument, NULL, OPT_OUTPUT},
        {"socket", required_argument, NULL, OPT_SOCKET},
        VPACKCTL_OPTIONS_END,
    };
    struct vpackctl_getopt g = {.cmd = "record", .usage = usage, .options = options};
    struct vpackctl_args a = {.cmd = "record"};
    const char *output = NULL, *socket = NULL;
    double duration = -1, end;
    unsigned interval_ms = 1000;
    unsigned long written = 0;
    char *last = NULL;
    FILE *out = NULL;
    int c, ret, fd = -1;

    while ((c = vpackctl_getopt(&g, argc, argv)) >= 0) {
        if (c == OPT_DURATION) {
            if ((ret = vpackctl_parse_seconds("record", "--duration", optarg, false, 604800,
                                              &duration)) != VPACKCTL_PROCEED)
                return ret;
        } else if (c == OPT_OUTPUT) {
            output = optarg;
        } else if (c == OPT_SOCKET) {
            socket = optarg;
        }
    }
    if (c == VPACKCTL_OPT_EXIT)
        return g.exit_code;
    if (optind < argc || duration < 0 || !output) {
        if (optind < argc)
            vpackctl_err("record: unexpected argument '%s' (see 'vpackctl record --help')",
                         argv[optind]);
        else
            vpackctl_err("record: --duration SECONDS and --output FILE are required "
                         "(see 'vpackctl record --help')");
        return VPACKCTL_EXIT_USAGE;
    }
    a.socket = vpack_client_socket_path(socket);
    if ((ret = vpackctl_connect(a.socket, VPACKCTL_TIMEOUT_MS, &fd)))
        return ret;
    out = strcmp(output, "-") ? fopen(output, "w") : stdout;
    if (!out) {
        vpackctl_err("record: %s: %s", output, strerror(errno));
        close(fd);
        return VPACKCTL_EXIT_FAIL;
    }
    end = vpackctl_now() + duration;
    ret = VPACKCTL_EXIT_OK;
    while (vpackctl_now() < end) {
        char *line;
        bool none;

        if ((ret = fetch(&a, fd, &line, &interval_ms, &none)))
            break;
        if (line && (!last || strcmp(line, last))) {
            if (fputs(line, out) < 0 || fputc('\n', out) < 0 || fflush(out) != 0) {
                vpackctl_err("record: %s: %s", output, strerror(errno));
                free(line);
                ret = VPACKCTL_EXIT_FAIL;
                break;
            }
            written++;
            free(last);
            last = line;
        } else {
            free(line);
        }
        vpackctl_sleep(interval_ms / 4000.0 < 0.05 ? 0.05 : interval_ms / 4000.0);
    }
    if (ret == VPACKCTL_EXIT_OK && written == 0) {
        vpackctl_err("record: the agent had no snapshot in %g s", duration);
        ret = VPACKCTL_EXIT_FAIL;
    }
    if (out != stdout && fclose(out) != 0 && ret == VPACKCTL_EXIT_OK) {
        vpackctl_err("record: %s: %s", output, strerror(errno));
        ret = VPACKCTL_EXIT_FAIL;
    }
    if (ret == VPACKCTL_EXIT_OK)
        fprintf(stderr, "vpackctl: record: %lu intervals written to %s\n", written, output);
    close(fd);
    free(last);
    return ret;
}
