// SPDX-License-Identifier: MIT
/* vpackctl version: our version, and the agent's when it answers. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vpack-build.h"
#include "client.h"
#include "ctl-client.h"
#include "vpack/config.h"
#include "vpackctl.h"

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
            "                    else " VPACK_DEFAULT_SOCKET ")\n"
            "  -h, --help        show this help\n");
}

/* Prints both versions, agent NULL when it did not answer with one. */
static int print_versions(const struct vpackctl_args *a, const char *agent, bool away,
                          const char *why)
{
    struct json_object *out;
    int ret;

    if (!a->json) {
        printf("vpackctl %s\n", VPACK_VERSION);
        if (agent)
            printf("vpackd %s\n", agent);
        else if (away)
            printf("vpackd not reachable at %s: %s\n", a->socket, why);
        return vpackctl_flush();
    }
    if (!(out = json_object_new_object()) ||
        vpack_json_add(out, "vpackctl", json_object_new_string(VPACK_VERSION)) < 0 ||
        (agent ? vpack_json_add(out, "vpackd", json_object_new_string(agent))
               : json_object_object_add(out, "vpackd", NULL)) < 0) {
        vpackctl_err("version: out of memory");
        ret = VPACKCTL_EXIT_FAIL;
    } else {
        ret = vpackctl_print_json(out);
    }
    json_object_put(out);
    return ret;
}

int version_main(int argc, char **argv)
{
    static const struct vpackctl_cmdline cl = {.cmd = "version", .usage = usage};
    struct vpackctl_args a;
    struct json_object *req = NULL, *ans = NULL;
    const char *agent = NULL;
    char *why = NULL;
    bool away;
    int ret, r;

    if ((ret = vpackctl_parse_args(argc, argv, &cl, &a)) != VPACKCTL_PROCEED)
        return ret;
    ret = VPACKCTL_EXIT_FAIL;
    if (!(req = vpackctl_new_request(&a, "version", NULL)))
        goto cleanup;
    /* Not vpackctl_call(): an agent that is away is not an error here. */
    r = vpackctl_request(a.socket, req, VPACKCTL_TIMEOUT_MS, &ans, &why);
    away = r < 0 && vpack_client_unreachable(r);
    if (r == 0 && vpack_json_bool(ans, "ok", false))
        agent = vpack_json_str(ans, "version", NULL);
    if ((ret = print_versions(&a, agent, away, why ? why : strerror(-r))))
        goto cleanup;
    if (!agent && !away) {
        /* It answered, or something is at that path, but no version came back. */
        vpackctl_err("cannot read vpackd's version at %s: %s", a.socket,
                     r == 0 ? vpack_json_str(ans, "error", "no version in its answer")
                     : why  ? why
                            : strerror(-r));
        ret = VPACKCTL_EXIT_FAIL;
    }
/* A cleanup tail puts this command's own objects: alike in shape only. */
cleanup:
    json_object_put(ans);
    json_object_put(req);
    free(why);
    return ret;
}
