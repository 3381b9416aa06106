// SPDX-License-Identifier: MIT
/* vpackctl: one table of subcommands, each in its own ctl-<name>.c. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "vpack-build.h"
#include "vpackctl.h"

static const struct vpackctl_cmd commands[] = {
    {"status", status_main, "Show the packages, their load and state, and the domains on them"},
    {"rebalance", rebalance_main, "Plan and apply a placement now; print the moves"},
    {"wait", wait_main, "Wait until the agent reports packed, spread, N parked or a level"},
    {"explain", explain_main, "Say where a domain's threads are, and why"},
    {"set-policy", set_policy_main, "Set a domain's power policy level through libvirt"},
    {"define", define_main, "Define a domain, accepting the short <powerpolicy> form"},
    {"topology", topology_main, "Show the CPU topology the agent would use"},
    {"plan", plan_main, "Run the policy offline on a recorded snapshot"},
    {"record", record_main, "Record the running agent's snapshots as a trace"},
    {"simulate", simulate_main, "Model what vpack would save on a host, from a trace"},
    {"measure", measure_main, "Measure what packing saves here: level 0 against the levels, A/B"},
    {"doctor", doctor_main, "Check what on this host cancels or hides the saving, and how to fix it"},
    {"version", version_main, "Print the version of vpackctl and of the running agent"},
};

void vpackctl_err(const char *fmt, ...)
{
    va_list ap;
    fputs("vpackctl: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static void usage(FILE *f)
{
    fprintf(f, "Usage: vpackctl COMMAND [OPTIONS]\n\n"
               "Power-aware vCPU placement for libvirt/QEMU hosts.\n\nCommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nRun 'vpackctl COMMAND --help' for a command's options; see vpackctl(1).\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return VPACKCTL_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return VPACKCTL_EXIT_OK;
    }
    /* The local version only; 'vpackctl version' also asks the agent. */
    if (!strcmp(argv[1], "--version")) {
        printf("vpackctl %s\n", VPACK_VERSION);
        return VPACKCTL_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].main(argc - 1, argv + 1);
    vpackctl_err("unknown command '%s' (see 'vpackctl --help')", argv[1]);
    return VPACKCTL_EXIT_USAGE;
}
