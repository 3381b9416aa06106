// SPDX-License-Identifier: MIT
/* vpackctl set-policy: write a domain's power policy level through libvirt. */
#include <getopt.h>
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
            "  --connect URI     libvirt connection (default qemu:///system)\n"
            "  -h, --help        show this help\n");
}

int set_policy_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"live", no_argument, NULL, OPT_LIVE},
        {"config", no_argument, NULL, OPT_CONFIG},
        {"connect", required_argument, NULL, OPT_CONNECT},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    bool live = false, config = false;
    const char *uri = "qemu:///system";
    struct vpack_virt *v = NULL;
    char err[1024];
    int c, ret = VPACKCTL_EXIT_FAIL;

    optind = 0; /* 0: a full reset, so GNU getopt permutes the operands */
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case OPT_LIVE:
            live = true;
            break;
        case OPT_CONFIG:
            config = true;
            break;
        case OPT_CONNECT:
            uri = optarg;
            break;
        case 'h':
            usage(stdout);
            return VPACKCTL_EXIT_OK;
        default:
            vpackctl_err("set-policy: unknown option '%s' (see 'vpackctl set-policy --help')",
                         argv[optind - 1]);
            return VPACKCTL_EXIT_USAGE;
        }
    }
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
    if (vpack_virt_open_sync(uri, &v, err, sizeof(err)) < 0) {
        vpackctl_err("cannot connect to libvirt at %s: %s", uri, err);
        return VPACKCTL_EXIT_FAIL;
    }
    if (vpack_virt_set_level(v, dom, level, live, config, err, sizeof(err)) < 0) {
        vpackctl_err("set-policy %s: %s", dom, err);
        goto cleanup;
    }
    printf("domain %s: power policy level %d (%s)\n", dom, level,
           live && config ? "live and persistent"
           : live         ? "live"
           : config       ? "persistent"
                          : "current");
    ret = VPACKCTL_EXIT_OK;
cleanup:
    vpack_virt_free(v);
    return ret;
}
