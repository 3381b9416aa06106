// SPDX-License-Identifier: MIT
/* vpackctl status: the packages, their load and state, and the domains on them. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-client.h"
#include "vpack/config.h"
#include "vpackctl.h"

/* Width of the busy bar, in characters. */
#define BAR_WIDTH 20

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: vpackctl status [--json] [--socket PATH]\n"
            "\n"
            "Show what the agent sees and decided: per package, its CPUs, busy and idle\n"
            "share, whether it is ACTIVE or PARKED (left idle to reach its deep C-states)\n"
            "and the domains placed on it; then every domain's level, packages and the\n"
            "reason for its placement. The header names the cgroup version and any\n"
            "feature that is unavailable on this host. Needs a running vpackd.\n"
            "\n"
            "Options:\n"
            "  --json            print the agent's status object as JSON\n"
            "  --socket PATH     the agent's control socket (default: $VPACK_SOCKET,\n"
            "                    else " VPACK_DEFAULT_SOCKET ")\n"
            "  -h, --help        show this help\n");
}

/* A share from 0 to 1 as a whole percentage, clamped. */
static int percent(double share)
{
    double p = share * 100 + 0.5;
    return p < 0 ? 0 : p > 100 ? 100 : (int)p;
}

/* Fills bar (BAR_WIDTH + 1 bytes) with '#' for the busy share and '.' for the rest. */
static void busy_bar(double busy, char *bar)
{
    double f = busy * BAR_WIDTH + 0.5;
    int n = f < 0 ? 0 : f > BAR_WIDTH ? BAR_WIDTH : (int)f;

    memset(bar, '#', (size_t)n);
    memset(bar + n, '.', (size_t)(BAR_WIDTH - n));
    bar[BAR_WIDTH] = '\0';
}

/* The first lines: libvirt, demand, wake-up package, topology, then the plan's reason. */
static void print_header(struct json_object *st)
{
    const char *reason = vpack_json_str(st, "reason", NULL);

    printf("libvirt %s", vpack_json_bool(st, "libvirt_connected", false) ? "connected"
                                                                          : "NOT CONNECTED");
    if (json_object_object_get_ex(st, "demand", NULL))
        printf(", demand %.2f CPUs", vpack_json_double(st, "demand", 0));
    /* null: no package is nominated. */
    if (json_object_object_get_ex(st, "wakeup_package", NULL))
        printf(", wake-up package %s", vpack_json_text(st, "wakeup_package", "none"));
    printf(", topology %s\n", vpack_json_str(st, "topology", "?"));
    if (reason)
        printf("plan: %s%s\n", *reason ? reason : "-",
               vpack_json_bool(st, "lifted", false)
                   ? " (restrictions lifted: the load needs every package)"
                   : "");
    else
        printf("plan: none yet (the agent has not finished its first sample)\n");
}

/*
 * "cgroup hybrid: cpuset v1, memory v1, cgroup2 at /sys/fs/cgroup/unified",
 * then each feature this host or a domain lacks, with why.
 */
static void print_cgroup(struct json_object *st)
{
    struct json_object *cg = NULL, *un;
    size_t n;

    if (!json_object_object_get_ex(st, "cgroup", &cg) || !json_object_is_type(cg, json_type_object))
        return; /* an older agent */
    un = vpack_json_array(cg, "unavailable");
    n = un ? json_object_array_length(un) : 0;
    printf("cgroup %s: cpuset %s, memory %s", vpack_json_str(cg, "version", "?"),
           vpack_json_str(cg, "cpuset", "?"), vpack_json_str(cg, "memory", "?"));
    if (vpack_json_str(cg, "unified", NULL))
        printf(", cgroup2 at %s", vpack_json_str(cg, "unified", "?"));
    printf("; %s\n", n ? "unavailable:" : "every feature available");
    for (size_t i = 0; i < n; i++) {
        struct json_object *u = json_object_array_get_idx(un, i);
        printf("  %s: %s\n", vpack_json_str(u, "feature", "?"), vpack_json_str(u, "why", "?"));
    }
}

/* One block per package: the summary line, then the domains placed on it. */
static void print_packages(struct json_object *pkgs)
{
    size_t n = pkgs ? json_object_array_length(pkgs) : 0;
    int wid = 1, wcpus = 1;

    for (size_t i = 0; i < n; i++) {
        struct json_object *p = json_object_array_get_idx(pkgs, i);
        int l;

        if ((l = (int)strlen(vpack_json_text(p, "id", "?"))) > wid)
            wid = l;
        if ((l = (int)strlen(vpack_json_str(p, "cpus", "?"))) > wcpus)
            wcpus = l;
    }
    for (size_t i = 0; i < n; i++) {
        struct json_object *p = json_object_array_get_idx(pkgs, i);
        const char *state = vpack_json_str(p, "state", "?");
        double busy = vpack_json_double(p, "busy", 0);
        struct json_object *doms = vpack_json_array(p, "domains");
        size_t nd = doms ? json_object_array_length(doms) : 0;
        char bar[BAR_WIDTH + 1];

        busy_bar(busy, bar);
        printf("\npackage %-*s  cpus %-*s  %-6s  busy %3d%%  idle %3d%%  [%s]\n", wid,
               vpack_json_text(p, "id", "?"), wcpus, vpack_json_str(p, "cpus", "?"),
               !strcmp(state, "active")   ? "ACTIVE"
               : !strcmp(state, "parked") ? "PARKED"
                                          : state,
               percent(busy), percent(vpack_json_double(p, "idle", 1 - busy)), bar);
        printf("  domains: %s", nd ? "" : "none");
        for (size_t k = 0; k < nd; k++) {
            const char *name = json_object_get_string(json_object_array_get_idx(doms, k));
            printf("%s%s", k ? ", " : "", name ? name : "?");
        }
        putchar('\n');
    }
}

/* The domain table: name, level, managed, packages, reason. */
static int print_domains(struct json_object *doms)
{
    size_t n = doms ? json_object_array_length(doms) : 0;
    char **pk = NULL;
    int wname = (int)strlen("DOMAIN"), wpk = (int)strlen("PACKAGES");
    int ret = -1;

    if (n == 0) {
        printf("\nno domains\n");
        return 0;
    }
    if (!(pk = calloc(n, sizeof(*pk))))
        return -1;
    for (size_t i = 0; i < n; i++) {
        struct json_object *d = json_object_array_get_idx(doms, i);
        int l;

        if (!(pk[i] = vpack_json_list(d, "packages", "-")))
            goto cleanup;
        if ((l = (int)strlen(pk[i])) > wpk)
            wpk = l;
        if ((l = (int)strlen(vpack_json_str(d, "name", "?"))) > wname)
            wname = l;
    }
    printf("\n%-*s  LEVEL  MANAGED  %-*s  REASON\n", wname, "DOMAIN", wpk, "PACKAGES");
    for (size_t i = 0; i < n; i++) {
        struct json_object *d = json_object_array_get_idx(doms, i);
        const char *reason = vpack_json_str(d, "reason", "");

        printf("%-*s  %-5s  %-7s  %-*s  %s\n", wname, vpack_json_str(d, "name", "?"),
               vpack_json_text(d, "level", "?"),
               vpack_json_bool(d, "managed", false) ? "yes" : "no", wpk, pk[i],
               *reason ? reason : "-");
    }
    ret = 0;
cleanup:
    for (size_t i = 0; i < n; i++)
        free(pk[i]);
    free(pk);
    return ret;
}

/* The text form: header, packages, domains. Returns 0 or -1 (out of memory). */
static int print_status(struct json_object *st, const struct vpackctl_args *a)
{
    (void)a;
    print_header(st);
    print_cgroup(st);
    print_packages(vpack_json_array(st, "packages"));
    return print_domains(vpack_json_array(st, "domains"));
}

int status_main(int argc, char **argv)
{
    static const struct vpackctl_cmdline cl = {.cmd = "status", .usage = usage};
    struct vpackctl_args a;
    struct json_object *st;
    int ret;

    if ((ret = vpackctl_parse_args(argc, argv, &cl, &a)) != VPACKCTL_PROCEED)
        return ret;
    if ((ret = vpackctl_ask(&a, VPACKCTL_TIMEOUT_MS, "status", &st, "status", NULL)))
        return ret;
    ret = vpackctl_show(&a, st, print_status);
    json_object_put(st);
    return ret;
}
