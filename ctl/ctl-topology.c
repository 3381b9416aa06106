// SPDX-License-Identifier: MIT
/* vpackctl topology: prints the packages, cores and CPUs the agent would use. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vpack/cpuset.h"
#include "vpack/topology.h"
#include "vpackctl.h"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: vpackctl topology [--topology SPEC] [--reserved CPUS] [--json]\n"
            "\n"
            "Show the CPU topology the agent would use: its usable CPUs and, per\n"
            "package, the CPUs, physical cores, threads per core, NUMA nodes and L3\n"
            "caches.\n"
            "\n"
            "Options:\n"
            "  --topology SPEC   where to read it: host (the default), xml:PATH,\n"
            "                    synthetic:DESC or sysfs:ROOT\n"
            "  --reserved CPUS   leave these CPUs out (libvirt syntax, e.g. 0-1,^1)\n"
            "  --json            print JSON instead of a table\n"
            "  -h, --help        show this help\n");
}

/* Returns the NUMA nodes of p as "0,1" ("-" for none); the caller frees it. */
static char *numa_list(const struct vpack_package *p)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    if (!f)
        return NULL;
    if (p->nnuma == 0)
        fputs("-", f);
    for (unsigned i = 0; i < p->nnuma; i++)
        fprintf(f, "%s%d", i ? "," : "", p->numa_nodes[i]);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* Prints the human-readable form. Returns 0 or -ENOMEM. */
static int print_table(const struct vpack_topology *t)
{
    char **cpus = calloc(t->npackages, sizeof(*cpus));
    char **nodes = calloc(t->npackages, sizeof(*nodes));
    char *all = vpack_cpuset_format(&t->cpus);
    int wcpus = (int)strlen("cpus"), wnodes = (int)strlen("NUMA nodes");
    int ret = -1;

    if (!all || (t->npackages && (!cpus || !nodes)))
        goto cleanup;
    for (unsigned i = 0; i < t->npackages; i++) {
        cpus[i] = vpack_cpuset_format(&t->packages[i].cpus);
        nodes[i] = numa_list(&t->packages[i]);
        if (!cpus[i] || !nodes[i])
            goto cleanup;
        if ((int)strlen(cpus[i]) > wcpus)
            wcpus = (int)strlen(cpus[i]);
        if ((int)strlen(nodes[i]) > wnodes)
            wnodes = (int)strlen(nodes[i]);
    }

    printf("usable CPUs: %s (%u) from %s\n\n", all, vpack_cpuset_count(&t->cpus), t->source);
    printf("%-7s  %-*s  %5s  %12s  %-*s  %3s\n", "package", wcpus, "cpus", "cores",
           "threads/core", wnodes, "NUMA nodes", "L3");
    for (unsigned i = 0; i < t->npackages; i++) {
        const struct vpack_package *p = &t->packages[i];
        printf("%-7d  %-*s  %5u  %12u  %-*s  %3u\n", p->id, wcpus, cpus[i], p->ncores,
               p->threads_per_core, wnodes, nodes[i], p->nl3);
    }
    ret = 0;
cleanup:
    for (unsigned i = 0; i < t->npackages; i++) {
        if (cpus)
            free(cpus[i]);
        if (nodes)
            free(nodes[i]);
    }
    free(cpus);
    free(nodes);
    free(all);
    return ret;
}

enum { OPT_TOPOLOGY = 256, OPT_RESERVED, OPT_JSON };

int topology_main(int argc, char **argv)
{
    static const struct option options[] = {
        {"topology", required_argument, NULL, OPT_TOPOLOGY},
        {"reserved", required_argument, NULL, OPT_RESERVED},
        {"json", no_argument, NULL, OPT_JSON},
        VPACKCTL_OPTIONS_END,
    };
    struct vpackctl_getopt g = {.cmd = "topology", .usage = usage, .options = options};
    struct vpack_topology *t = NULL;
    const char *spec = NULL, *reserved = NULL;
    char *json = NULL;
    bool as_json = false;
    int ret, c;

    /* The getopt loop: alike in shape on purpose (vpackctl.h, struct vpackctl_getopt). */
    while ((c = vpackctl_getopt(&g, argc, argv)) >= 0) {
        if (c == OPT_TOPOLOGY)
            spec = optarg;
        else if (c == OPT_RESERVED)
            reserved = optarg;
        else
            as_json = true;
    }
    if (c == VPACKCTL_OPT_EXIT)
        return g.exit_code;
    if (optind < argc) {
        vpackctl_err("topology: unexpected argument '%s' (see 'vpackctl topology --help')",
                     argv[optind]);
        return VPACKCTL_EXIT_USAGE;
    }
    if ((ret = vpackctl_load_topology("topology", spec, reserved, &t)))
        return ret;
    ret = VPACKCTL_EXIT_FAIL;
    if (as_json) {
        json = vpack_topology_to_json(t);
        if (!json) {
            vpackctl_err("topology: out of memory");
            goto cleanup;
        }
        puts(json);
    } else if (print_table(t) < 0) {
        vpackctl_err("topology: out of memory");
        goto cleanup;
    }
    ret = vpackctl_flush();
cleanup:
    free(json);
    vpack_topology_free(t);
    return ret;
}
