// SPDX-License-Identifier: MIT
/* vpackctl version: our version, and the agent's when it answers. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include "config.h"
#include "ctl-client.h"
#include "vpackctl.h"

enum { OPT_JSON = 256, OPT_SOCKET };

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: vpackctl version [--json] [--socket PATH]\n"
            "\n"
            "Print the version of vpackctl and, if the agent answers, of vpackd:\n"
            "  vpackctl VERSION\n"
            "  vpackd VERSION          (or: vpackd not reachable at PATH: REASON)\n"
            "An agent that is not running is not an error here. 'vpackctl --version'\n"
            "prints the first line only, without asking the agent.\n"
            "\n"
            "Options:\n"
            "  --json            print {\"vpackctl\": VERSION, \"vpackd\": VERSION or null}\n"
            "  --socket PATH     the agent's control socket (default: $VPACK_SOCKET,\n"
            "                    else /run/vpack/vpackd.sock)\n"
            "  -h, --help        show this help\n");
}

int version_main(int argc, char **argv)
{
    static const struct option options[] = {
        {"json", no_argument, NULL, OPT_JSON},
        {"socket", required_argument, NULL, OPT_SOCKET},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct json_object *req = NULL, *ans = NULL, *out = NULL;
    const char *socket_opt = NULL, *path, *agent = NULL;
    char why[512];
    bool as_json = false;
    int ret = VPACKCTL_EXIT_FAIL, c, r;

    opterr = 0;
    optind = 0;
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        switch (c) {
        case OPT_JSON:
            as_json = true;
            break;
        case OPT_SOCKET:
            socket_opt = optarg;
            break;
        case 'h':
            usage(stdout);
            return VPACKCTL_EXIT_OK;
        default:
            vpackctl_option_error("version", c, argv);
            return VPACKCTL_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        vpackctl_err("version: unexpected argument '%s' (see 'vpackctl version --help')",
                     argv[optind]);
        return VPACKCTL_EXIT_USAGE;
    }
    if (socket_opt && !*socket_opt) {
        vpackctl_err("version: --socket needs a path");
        return VPACKCTL_EXIT_USAGE;
    }
    path = vpackctl_socket_path(socket_opt);

    if (!(req = json_object_new_object()) ||
        json_object_object_add(req, "op", json_object_new_string("version")) < 0) {
        vpackctl_err("version: out of memory");
        goto cleanup;
    }
    /* Not vpackctl_call(): an agent that is away is not an error here. */
    r = vpackctl_request(path, req, VPACKCTL_TIMEOUT_MS, &ans, why, sizeof(why));
    if (r == 0 && vpackctl_json_bool(ans, "ok", false))
        agent = vpackctl_json_str(ans, "version", NULL);
    if (r == 0 && !agent)
        snprintf(why, sizeof(why), "%s", vpackctl_json_str(ans, "error", "no version in its answer"));

    if (as_json) {
        if (!(out = json_object_new_object()) ||
            json_object_object_add(out, "vpackctl", json_object_new_string(VPACK_VERSION)) < 0 ||
            json_object_object_add(out, "vpackd", agent ? json_object_new_string(agent) : NULL) < 0) {
            vpackctl_err("version: out of memory");
            goto cleanup;
        }
        if ((ret = vpackctl_print_json(out)))
            goto cleanup;
    } else {
        printf("vpackctl %s\n", VPACK_VERSION);
        if (agent)
            printf("vpackd %s\n", agent);
        else if (r < 0 && vpackctl_unreachable(r))
            printf("vpackd not reachable at %s: %s\n", path, why);
        if ((ret = vpackctl_flush()))
            goto cleanup;
    }
    ret = VPACKCTL_EXIT_OK;
    if (!agent && !(r < 0 && vpackctl_unreachable(r))) {
        /* It answered, or something is at that path, but no version came back. */
        vpackctl_err("cannot read vpackd's version at %s: %s", path, why);
        ret = VPACKCTL_EXIT_FAIL;
    }
cleanup:
    json_object_put(out);
    json_object_put(ans);
    json_object_put(req);
    return ret;
}
