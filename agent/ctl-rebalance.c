// SPDX-License-Identifier: MIT
/* vpackctl rebalance: asks the agent to plan and apply a placement now. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ctl-client.h"
#include "vpackctl.h"

enum { OPT_DRY_RUN = 256, OPT_JSON, OPT_SOCKET };

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: vpackctl rebalance [--dry-run] [--json] [--socket PATH]\n"
            "\n"
            "Make the agent sample, plan and pin now instead of at its next interval,\n"
            "and print each thread it moved as\n"
            "  DOMAIN  THREADS  FROM -> TO  (REASON)\n"
            "where FROM and TO are CPU sets ('?': not known before). Applying needs root\n"
            "or the agent's control group; a dry run does not. Needs a running vpackd.\n"
            "\n"
            "Options:\n"
            "  --dry-run         plan and print the moves, but apply nothing\n"
            "  --json            print the agent's answer as JSON\n"
            "  --socket PATH     the agent's control socket (default: $VPACK_SOCKET,\n"
            "                    else /run/vpack/vpackd.sock)\n"
            "  -h, --help        show this help\n");
}

/* Column width of key over the moves, at least min. */
static int width(struct json_object *moves, const char *key, int min)
{
    int w = min;

    for (size_t i = 0; i < json_object_array_length(moves); i++) {
        int l = (int)strlen(vpackctl_json_str(json_object_array_get_idx(moves, i), key, "?"));
        if (l > w)
            w = l;
    }
    return w;
}

static void print_moves(struct json_object *moves, bool dry_run)
{
    size_t n = moves ? json_object_array_length(moves) : 0;

    if (n == 0) {
        printf("no moves\n");
    } else {
        int wd = width(moves, "domain", 1), wt = width(moves, "threads", 1);
        int wf = width(moves, "from", 1), wto = width(moves, "to", 1);

        for (size_t i = 0; i < n; i++) {
            struct json_object *m = json_object_array_get_idx(moves, i);
            const char *reason = vpackctl_json_str(m, "reason", "");

            printf("%-*s  %-*s  %-*s -> %-*s", wd, vpackctl_json_str(m, "domain", "?"), wt,
                   vpackctl_json_str(m, "threads", "?"), wf, vpackctl_json_str(m, "from", "?"),
                   *reason ? wto : 0, vpackctl_json_str(m, "to", "?"));
            if (*reason)
                printf("  (%s)", reason);
            putchar('\n');
        }
    }
    if (dry_run)
        printf("(dry run: nothing applied)\n");
}

int rebalance_main(int argc, char **argv)
{
    static const struct option options[] = {
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {"json", no_argument, NULL, OPT_JSON},
        {"socket", required_argument, NULL, OPT_SOCKET},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct json_object *req = NULL, *ans = NULL;
    const char *socket_opt = NULL;
    bool as_json = false, dry_run = false;
    int ret, c;

    opterr = 0;
    optind = 0;
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        switch (c) {
        case OPT_DRY_RUN:
            dry_run = true;
            break;
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
            vpackctl_option_error("rebalance", c, argv);
            return VPACKCTL_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        vpackctl_err("rebalance: unexpected argument '%s' (see 'vpackctl rebalance --help')",
                     argv[optind]);
        return VPACKCTL_EXIT_USAGE;
    }
    if (socket_opt && !*socket_opt) {
        vpackctl_err("rebalance: --socket needs a path");
        return VPACKCTL_EXIT_USAGE;
    }

    ret = VPACKCTL_EXIT_FAIL;
    if (!(req = json_object_new_object()) ||
        json_object_object_add(req, "op", json_object_new_string("rebalance")) < 0 ||
        json_object_object_add(req, "dry_run", json_object_new_boolean(dry_run)) < 0) {
        vpackctl_err("rebalance: out of memory");
        goto cleanup;
    }
    if ((ret = vpackctl_call(vpackctl_socket_path(socket_opt), req,
                             VPACKCTL_REBALANCE_TIMEOUT_MS, &ans)))
        goto cleanup;
    if (as_json) {
        /* The answer as it came, without the envelope's "ok". */
        json_object_object_del(ans, "ok");
        ret = vpackctl_print_json(ans);
        goto cleanup;
    }
    print_moves(vpackctl_json_array(ans, "moves"), vpackctl_json_bool(ans, "dry_run", dry_run));
    ret = vpackctl_flush();
cleanup:
    json_object_put(ans);
    json_object_put(req);
    return ret;
}
