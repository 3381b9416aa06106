// SPDX-License-Identifier: MIT
/* vpackctl rebalance: asks the agent to plan and apply a placement now. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ctl-client.h"
#include "vpack/config.h"
#include "vpackctl.h"

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
            "                    else " VPACK_DEFAULT_SOCKET ")\n"
            "  -h, --help        show this help\n");
}

/* Column width of key over the moves, at least min. */
static int width(struct json_object *moves, const char *key, int min)
{
    int w = min;

    for (size_t i = 0; i < json_object_array_length(moves); i++) {
        int l = (int)strlen(vpack_json_str(json_object_array_get_idx(moves, i), key, "?"));
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
            const char *reason = vpack_json_str(m, "reason", "");

            printf("%-*s  %-*s  %-*s -> %-*s", wd, vpack_json_str(m, "domain", "?"), wt,
                   vpack_json_str(m, "threads", "?"), wf, vpack_json_str(m, "from", "?"),
                   *reason ? wto : 0, vpack_json_str(m, "to", "?"));
            if (*reason)
                printf("  (%s)", reason);
            putchar('\n');
        }
    }
    if (dry_run)
        printf("(dry run: nothing applied)\n");
}

/* The text form; a is for the dry run when the answer does not say. */
static int print_answer(struct json_object *ans, const struct vpackctl_args *a)
{
    print_moves(vpack_json_array(ans, "moves"), vpack_json_bool(ans, "dry_run", a->dry_run));
    return 0;
}

int rebalance_main(int argc, char **argv)
{
    static const struct vpackctl_cmdline cl = {.cmd = "rebalance", .usage = usage,
                                               .dry_run = true};
    struct vpackctl_args a;
    struct json_object *ans;
    int ret;

    if ((ret = vpackctl_parse_args(argc, argv, &cl, &a)) != VPACKCTL_PROCEED)
        return ret;
    /* With --json, the answer as it came, without the envelope's "ok". */
    if ((ret = vpackctl_ask(&a, VPACKCTL_REBALANCE_TIMEOUT_MS, NULL, &ans, "rebalance", "dry_run",
                            json_object_new_boolean(a.dry_run), NULL)))
        return ret;
    ret = vpackctl_show(&a, ans, print_answer);
    json_object_put(ans);
    return ret;
}
