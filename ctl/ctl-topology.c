// SPDX-License-Identifier: MIT
/* vpackctl topology: prints the packages, cores and CPUs the agent would use. */
#include <getopt.h>
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

int topology_main(int argc, char **argv)
{
    static const struct option options[] = {
        {"topology", required_argument, NULL, 't'},
        {"reserved", required_argument, NULL, 'r'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct vpack_topology *t = NULL;
    const char *spec = NULL;
    const char *reserved_text = NULL;
    vpack_cpuset reserved;
    char *errmsg = NULL;
    char *json = NULL;
    bool as_json = false;
    int ret = VPACKCTL_EXIT_USAGE;
    int c;

    /* Our own messages name the subcommand; getopt's would say "topology:". */
    opterr = 0;
    /* 0, not 1: glibc then resets its state, in case getopt ran before. */
    optind = 0;
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        switch (c) {
        case 't':
            spec = optarg;
            break;
        case 'r':
            reserved_text = optarg;
            break;
        case 'j':
            as_json = true;
            break;
        case 'h':
            usage(stdout);
            ret = VPACKCTL_EXIT_OK;
            goto cleanup;
        case ':':
            vpackctl_err("topology: option '%s' needs an argument", argv[optind - 1]);
            goto cleanup;
        default:
            /* getopt sets optopt to a known option's letter when it got an argument it takes none of. */
            if (optopt == 'j' || optopt == 'h')
                vpackctl_err("topology: option '%s' takes no argument", argv[optind - 1]);
            else if (optopt)
                vpackctl_err("topology: unknown option '-%c' (see 'vpackctl topology --help')",
                             optopt);
            else
                vpackctl_err("topology: unknown option '%s' (see 'vpackctl topology --help')",
                             argv[optind - 1]);
            goto cleanup;
        }
    }
    if (optind < argc) {
        vpackctl_err("topology: unexpected argument '%s' (see 'vpackctl topology --help')",
                     argv[optind]);
        goto cleanup;
    }
    if (reserved_text) {
        char err[256];
        if (vpack_cpuset_parse(&reserved, reserved_text, err, sizeof(err)) < 0) {
            vpackctl_err("topology: --reserved: %s", err);
            goto cleanup;
        }
    }

    ret = VPACKCTL_EXIT_FAIL;
    if (vpack_topology_load(spec, reserved_text ? &reserved : NULL, NULL, &t, &errmsg) < 0) {
        vpackctl_err("%s", errmsg ? errmsg : "cannot load the topology: out of memory");
        goto cleanup;
    }
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
    /* A full disk or closed pipe shows up here, not at printf(). */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        vpackctl_err("topology: cannot write the output");
        goto cleanup;
    }
    ret = VPACKCTL_EXIT_OK;
cleanup:
    free(json);
    free(errmsg);
    vpack_topology_free(t);
    return ret;
}
