// SPDX-License-Identifier: MIT
/*
 * vpackctl define: define a domain from a file, accepting the short policy
 * form <powerpolicy level='N'/> that virsh define would drop silently.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host.h"
#include "virt.h"
#include "vpack/domxml.h"
#include "vpackctl.h"

enum { OPT_CONNECT = 256, OPT_PRINT };

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: vpackctl define FILE [--connect URI] [--print]\n"
            "\n"
            "Define (or redefine) a persistent domain from FILE ('-': standard input).\n"
            "The power policy may be written in the short form <powerpolicy level='2'/>,\n"
            "directly under <domain> or un-namespaced inside <metadata>: it is checked\n"
            "and rewritten into vpack's namespaced element\n"
            "  <vpack:powerpolicy xmlns:vpack=\"" VPACK_XML_NS "\" level=\"2\"/>\n"
            "inside <metadata>, which libvirt keeps. An invalid level is refused before\n"
            "anything is defined.\n"
            "\n"
            "Options:\n"
            VPACKCTL_HELP_CONNECT
            "  --print           print the rewritten XML instead of defining it\n"
            "  -h, --help        show this help\n");
}

int define_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"connect", required_argument, NULL, OPT_CONNECT},
        {"print", no_argument, NULL, OPT_PRINT},
        VPACKCTL_OPTIONS_END,
    };
    struct vpackctl_getopt g = {.cmd = "define", .usage = usage, .options = opts};
    const char *uri = VPACKCTL_DEFAULT_URI;
    struct vpack_virt *v = NULL;
    char *xml = NULL, *out = NULL, *msg = NULL, *name = NULL;
    size_t len = 0;
    int c, level, r, ret = VPACKCTL_EXIT_FAIL;
    bool print = false;

    while ((c = vpackctl_getopt(&g, argc, argv)) >= 0) {
        if (c == OPT_CONNECT)
            uri = optarg;
        else
            print = true;
    }
    if (c == VPACKCTL_OPT_EXIT)
        return g.exit_code;
    if (argc - optind != 1) {
        vpackctl_err("define: expected FILE (see 'vpackctl define --help')");
        return VPACKCTL_EXIT_USAGE;
    }
    const char *file = argv[optind];
    if (!strcmp(file, "-"))
        r = vpack_host_read_fd(STDIN_FILENO, VPACK_DOMXML_MAX_SIZE, &xml, &len);
    else
        r = vpack_host_read_file(file[0] == '/' ? "/" : ".", file, VPACK_DOMXML_MAX_SIZE, &xml,
                                 &len);
    if (r < 0) {
        vpackctl_err("cannot read %s: %s", file,
                     r == -EFBIG ? "larger than 16 MiB" : strerror(-r));
        goto cleanup;
    }
    if (vpack_domxml_define_rewrite(xml, len, &out, &level, &msg) < 0) {
        vpackctl_err("%s: %s", file, msg ? msg : "out of memory");
        goto cleanup;
    }
    if (print) {
        fputs(out, stdout);
        ret = VPACKCTL_EXIT_OK;
        goto cleanup;
    }
    if (vpackctl_virt_open(uri, &v))
        goto cleanup;
    if (vpack_virt_define_xml(v, out, &name, &msg) < 0) {
        vpackctl_err("cannot define %s: %s", file, msg ? msg : "out of memory");
        goto cleanup;
    }
    if (level >= 0)
        printf("Domain '%s' defined from %s (power policy level %d)\n", name, file, level);
    else
        printf("Domain '%s' defined from %s (no power policy: the default level applies)\n",
               name, file);
    ret = VPACKCTL_EXIT_OK;
cleanup:
    vpack_virt_free(v);
    free(xml);
    free(out);
    free(msg);
    free(name);
    return ret;
}
