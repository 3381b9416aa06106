// SPDX-License-Identifier: MIT
/* vpackctl set-policy: write a domain's power policy level through libvirt. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "virt.h"
#include "vpack/domxml.h"
#include "vpackctl.h"

enum { OPT_LIVE = 256, OPT_CONFIG, OPT_CONNECT };

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: vpackctl set-policy DOMAIN LEVEL [--live] [--config] [--connect URI]\n"
            "\n"
            "Set a domain's power policy level (0, 1 or 2) in its metadata, in vpack's\n"
            "namespace " VPACK_XML_NS ", through libvirt. Works without the\n"
            "agent; a running vpackd follows the change within one interval.\n"
            "DOMAIN is a name, UUID or id.\n"
            "\n"
            "Options:\n"
            "  --live            change the running domain\n"
            "  --config          change the persistent definition\n"
            "                    (neither: whichever is current; both: both)\n"
            VPACKCTL_HELP_CONNECT
            "  -h, --help        show this help\n");
}

int set_policy_main(int argc, char **argv)
{
    /* A getopt table: its rows look alike because they are one kind of data. */
    static const struct option opts[] = {
        {"live", no_argument, NULL, OPT_LIVE},
        {"config", no_argument, NULL, OPT_CONFIG},
        {"connect", required_argument, NULL, OPT_CONNECT},
        VPACKCTL_OPTIONS_END,
    };
    struct vpackctl_getopt g = {.cmd = "set-policy", .usage = usage, .options = opts};
    bool live = false, config = false;
    const char *uri = VPACKCTL_DEFAULT_URI;
    struct vpack_virt *v = NULL;
    char *err = NULL;
    int c, ret = VPACKCTL_EXIT_FAIL;

    /* The getopt loop: alike in shape on purpose (vpackctl.h, struct vpackctl_getopt). */
    while ((c = vpackctl_getopt(&g, argc, argv)) >= 0) {
        if (c == OPT_LIVE)
            live = true;
        else if (c == OPT_CONFIG)
            config = true;
        else
            uri = optarg;
    }
    if (c == VPACKCTL_OPT_EXIT)
        return g.exit_code;
    if (argc - optind != 2) {
        vpackctl_err("set-policy: expected DOMAIN LEVEL (see 'vpackctl set-policy --help')");
        return VPACKCTL_EXIT_USAGE;
    }
    const char *dom = argv[optind], *lvl = argv[optind + 1];
    int level = vpack_domxml_level_parse(lvl);
    if (level < 0) {
        vpackctl_err("set-policy: '%s' is not a power policy level (0, 1 or 2)", lvl);
        return VPACKCTL_EXIT_USAGE;
    }
    if ((ret = vpackctl_virt_open(uri, &v)))
        return ret;
    ret = VPACKCTL_EXIT_FAIL;
    if (vpack_virt_set_level(v, dom, level, live, config, &err) < 0) {
        vpackctl_err("set-policy %s: %s", dom, err ? err : "out of memory");
        goto cleanup;
    }
    printf("domain %s: power policy level %d (%s)\n", dom, level,
           live && config ? "live and persistent"
           : live         ? "live"
           : config       ? "persistent"
                          : "current");
    ret = VPACKCTL_EXIT_OK;
cleanup:
    free(err);
    vpack_virt_free(v);
    return ret;
}
