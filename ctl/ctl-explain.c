// SPDX-License-Identifier: MIT
/* vpackctl explain: where one domain's threads are, and why. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-client.h"
#include "vpack/config.h"
#include "vpackctl.h"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: vpackctl explain DOMAIN [--json] [--socket PATH]\n"
            "\n"
            "Say which power policy level applies to a running domain and where it comes\n"
            "from (the domain's own element, a rule of vpackd.conf, or the default), what\n"
            "its bound is, which packages it is placed on and why; then, per thread\n"
            "(vCPUs, emulator, iothreads), the CPUs the guest asked for (GUEST PIN, '-':\n"
            "none), the CPUs it may run on now (CPUS NOW, '?': not read yet), its load in\n"
            "CPUs (UTIL), the share of time it waited to run (DELAY) and where its load\n"
            "is read (LOAD FROM); and where the domain's memory is. Needs a running\n"
            "vpackd.\n"
            "\n"
            "Options:\n"
            "  --json            print the agent's explanation as JSON\n"
            "  --socket PATH     the agent's control socket (default: $VPACK_SOCKET,\n"
            "                    else " VPACK_DEFAULT_SOCKET ")\n"
            "  -h, --help        show this help\n");
}

/* One thread's row of the table; the strings are borrowed from the answer. */
struct row {
    char name[64];
    const char *pin, *cpus;
    double util, delay;
    char source[48];
};

/* label: "vcpu" or "iothread", followed by the id; NULL for the emulator. */
static void row_fill(struct row *r, struct json_object *t, const char *label)
{
    if (label)
        snprintf(r->name, sizeof(r->name), "%s %s", label, vpack_json_text(t, "id", "?"));
    else
        snprintf(r->name, sizeof(r->name), "%s", vpack_json_str(t, "thread", "emulator"));
    r->pin = vpack_json_str(t, "pin", "-");
    r->cpus = vpack_json_str(t, "cpus", "?");
    r->util = vpack_json_double(t, "util", 0);
    r->delay = vpack_json_double(t, "delay", 0);
    /* An iothread found by name shows its thread: "thread-name 4250". */
    if (json_object_object_get_ex(t, "tid", NULL))
        snprintf(r->source, sizeof(r->source), "%s %s", vpack_json_str(t, "source", "?"),
                 vpack_json_text(t, "tid", "?"));
    else
        snprintf(r->source, sizeof(r->source), "%s", vpack_json_str(t, "source", "-"));
}

/* The thread table: vCPUs, the emulator, iothreads. Returns 0 or -1 (out of memory). */
static int print_threads(struct json_object *d)
{
    struct json_object *vcpus = vpack_json_array(d, "vcpus");
    struct json_object *io = vpack_json_array(d, "iothreads"), *emu = NULL;
    size_t nv = vcpus ? json_object_array_length(vcpus) : 0;
    size_t ni = io ? json_object_array_length(io) : 0, n = 0;
    int wname = (int)strlen("THREAD"), wpin = (int)strlen("GUEST PIN");
    int wcpus = (int)strlen("CPUS NOW");
    struct row *rows = calloc(nv + ni + 1, sizeof(*rows));

    if (!rows)
        return -1;
    for (size_t i = 0; i < nv; i++)
        row_fill(&rows[n++], json_object_array_get_idx(vcpus, i), "vcpu");
    if (json_object_object_get_ex(d, "emulator", &emu) && json_object_is_type(emu, json_type_object))
        row_fill(&rows[n++], emu, NULL);
    for (size_t i = 0; i < ni; i++)
        row_fill(&rows[n++], json_object_array_get_idx(io, i), "iothread");
    for (size_t i = 0; i < n; i++) {
        int l;
        if ((l = (int)strlen(rows[i].name)) > wname)
            wname = l;
        if ((l = (int)strlen(rows[i].pin)) > wpin)
            wpin = l;
        if ((l = (int)strlen(rows[i].cpus)) > wcpus)
            wcpus = l;
    }
    printf("\n%-*s  %-*s  %-*s  %5s  %6s  %s\n", wname, "THREAD", wpin, "GUEST PIN", wcpus,
           "CPUS NOW", "UTIL", "DELAY", "LOAD FROM");
    for (size_t i = 0; i < n; i++)
        printf("%-*s  %-*s  %-*s  %5.2f  %5.1f%%  %s\n", wname, rows[i].name, wpin, rows[i].pin,
               wcpus, rows[i].cpus, rows[i].util, rows[i].delay * 100, rows[i].source);
    free(rows);
    return 0;
}

/* "level     2 (WHERE IT COMES FROM)"; an older agent sends only "level_set". */
static void print_level(struct json_object *d)
{
    const char *level = vpack_json_text(d, "level", "?");
    const char *src = vpack_json_str(d, "level_source", NULL);
    const char *rule = vpack_json_str(d, "rule", NULL);

    if (!src)
        src = vpack_json_bool(d, "level_set", false) ? "domain" : "default";
    if (!strcmp(src, "domain"))
        printf("level     %s (set in the domain's metadata)\n", level);
    else if (!strcmp(src, "rule") && rule)
        printf("level     %s (rule \"%s\" in vpackd.conf)\n", level, rule);
    else
        printf("level     %s (the default: the domain has no power policy element and no "
               "rule matches)\n", level);
}

/*
 * "memory    128.0 MiB: node 0 100% (cgroup-v1, /sys/fs/cgroup/memory/...)", or
 * why it is not known.
 */
static void print_memory(struct json_object *d)
{
    struct json_object *m = NULL, *nodes;
    size_t n;

    /* A section an older agent lacks, read as print_cgroup() (ctl-status.c) reads its own. */
    if (!json_object_object_get_ex(d, "memory", &m) || !json_object_is_type(m, json_type_object))
        return; /* an older agent */
    nodes = vpack_json_array(m, "nodes");
    n = nodes ? json_object_array_length(nodes) : 0;
    if (!n) {
        printf("memory    placement unknown (%s)\n",
               vpack_json_str(m, "error", "memory.numa_stat not read yet"));
        return;
    }
    printf("memory    %.1f MiB:", vpack_json_double(m, "bytes", 0) / (1024.0 * 1024.0));
    for (size_t i = 0; i < n; i++) {
        struct json_object *e = json_object_array_get_idx(nodes, i);
        printf("%s node %s %.0f%%", i ? "," : "", vpack_json_text(e, "node", "?"),
               vpack_json_double(e, "share", 0) * 100);
    }
    printf(" (%s, %s)\n", vpack_json_str(m, "source", "?"), vpack_json_str(m, "dir", "?"));
}

/* The text form. Returns 0 or -1 (out of memory). */
static int print_explain(struct json_object *d, const struct vpackctl_args *a)
{
    const char *reason = vpack_json_str(d, "reason", "");
    const char *bound = vpack_json_str(d, "cpuset", NULL);
    char *pk = vpack_json_list(d, "packages", "none");

    (void)a;
    if (!pk)
        return -1;
    printf("domain    %s\n", vpack_json_str(d, "name", "?"));
    printf("uuid      %s\n", vpack_json_str(d, "uuid", "?"));
    print_level(d);
    printf("managed   %s\n", vpack_json_bool(d, "managed", false) ? "yes"
                              : !strcmp(vpack_json_text(d, "level", "?"), "0")
                                  ? "no (level 0: vpack never restricts the domain)"
                                  : "no (what the guest asked for is not known: vpack leaves "
                                    "the domain alone)");
    const char *request = vpack_json_str(d, "request", NULL);
    if (bound)
        printf("bound     %s (%s)\n", bound,
               !strcmp(vpack_json_str(d, "bound_source", "cpuset"), "numad")
                   ? "placement='auto': the CPUs of the NUMA nodes numad chose at start"
                   : "<vcpu cpuset>");
    else
        printf("bound     none (all usable CPUs)\n");
    if (request)
        printf("request   %s\n", !strcmp(request, "hook")   ? "the hook's record of its start"
                                 : !strcmp(request, "live") ? "its live XML at vpackd's first sight"
                                                            : "not known");
    printf("packages  %s\n", pk);
    printf("reason    %s\n", *reason ? reason : "-");
    print_memory(d);
    free(pk);
    return print_threads(d);
}

int explain_main(int argc, char **argv)
{
    static const struct vpackctl_cmdline cl = {.cmd = "explain", .usage = usage,
                                               .arg = "DOMAIN"};
    struct vpackctl_args a;
    struct json_object *d;
    int ret;

    if ((ret = vpackctl_parse_args(argc, argv, &cl, &a)) != VPACKCTL_PROCEED)
        return ret;
    if ((ret = vpackctl_ask(&a, VPACKCTL_TIMEOUT_MS, "domain", &d, "explain", "domain",
                            json_object_new_string(a.arg), NULL)))
        return ret;
    ret = vpackctl_show(&a, d, print_explain);
    json_object_put(d);
    return ret;
}
