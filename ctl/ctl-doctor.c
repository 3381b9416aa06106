// SPDX-License-Identifier: MIT
/*
 * vpackctl doctor: what on this host can cancel or hide the saving of
 * packing. The facts come from adapters/doctor.c (under --root, "/" by
 * default) and libvirt; the checks are lib/doctor.c's.
 */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"
#include "virt.h"
#include "vpack/doctor.h"
#include "vpack/json.h"
#include "vpackctl.h"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: vpackctl doctor [--json] [--root DIR] [--connect URI]\n"
            "\n"
            "Check what on this host can cancel or hide the saving of packing: the\n"
            "cpuidle driver and governor, disabled C-states, PM QoS latency limits\n"
            "(pm_qos_resume_latency_us, /dev/cpu_dma_latency held open), the tuned\n"
            "profile, IRQs routed off the package that stays awake and irqbalance,\n"
            "the RAPL and C-state counters vpackctl measure reads, the cgroup mode\n"
            "and libvirt's partition, libvirt's version, and vpack-hook. Each\n"
            "finding says what, why it matters and how to fix it, with a severity:\n"
            "ok, info, warning (hides or reduces the saving) or cancels (parked\n"
            "packages cannot reach their deep C-state). Reading everything needs root.\n"
            "Exit status: 0 when nothing cancels the saving (warnings may be\n"
            "printed), 1 when a finding cancels it or the host could not be read,\n"
            "2 on a usage error.\n"
            "\n"
            "Options:\n"
            "  --json            print JSON instead of text\n"
            "  --root DIR        read /sys, /proc, /dev and /etc under DIR (a copy of a\n"
            "                    host's tree); libvirt is then asked only with --connect\n"
            "  --connect URI     libvirt connection for its version (default " VPACKCTL_DEFAULT_URI ")\n"
            "  -h, --help        show this help\n");
}

/* Adds libvirt's version to f, from uri. */
static void add_libvirt(struct vpack_doctor_facts *f, const char *uri)
{
    unsigned long library, daemon;
    char *msg = NULL;
    int r = vpack_virt_versions(uri, &library, &daemon, &msg);

    f->libvirt_checked = true;
    f->libvirt_daemon = r == 0 && daemon;
    f->libvirt_version = f->libvirt_daemon ? daemon : library;
    if (r < 0)
        snprintf(f->libvirt_why, sizeof(f->libvirt_why), "%s", msg ? msg : strerror(-r));
    free(msg);
}

static int print_json(const struct vpack_doctor_finding *v, size_t n)
{
    struct json_object *root = json_object_new_object(), *arr = json_object_new_array();
    unsigned count[VPACK_DOCTOR_CANCELS + 1] = {0};
    bool ok = true;

    for (size_t i = 0; i < n; i++) {
        struct json_object *o = json_object_new_object();
        count[v[i].severity]++;
        vpack_json_set_str(o, "check", v[i].check, &ok);
        vpack_json_set_str(o, "severity", vpack_doctor_severity_name(v[i].severity), &ok);
        vpack_json_set_str(o, "what", v[i].what, &ok);
        if (v[i].why[0])
            vpack_json_set_str(o, "why", v[i].why, &ok);
        else
            vpack_json_set_null(o, "why", &ok);
        if (v[i].fix[0])
            vpack_json_set_str(o, "fix", v[i].fix, &ok);
        else
            vpack_json_set_null(o, "fix", &ok);
        vpack_json_append(arr, o, &ok);
    }
    vpack_json_set(root, "findings", arr, &ok);
    vpack_json_set_int(root, "cancels", count[VPACK_DOCTOR_CANCELS], &ok);
    vpack_json_set_int(root, "warnings", count[VPACK_DOCTOR_WARNING], &ok);
    vpack_json_set_bool(root, "saving_cancelled", count[VPACK_DOCTOR_CANCELS] > 0, &ok);
    if (!(root = vpack_json_finish(root, ok))) {
        vpackctl_err("doctor: out of memory");
        return VPACKCTL_EXIT_FAIL;
    }
    int ret = vpackctl_print_json(root);
    json_object_put(root);
    return ret;
}

static int print_text(const struct vpack_doctor_finding *v, size_t n)
{
    unsigned count[VPACK_DOCTOR_CANCELS + 1] = {0};
    for (size_t i = 0; i < n; i++) {
        count[v[i].severity]++;
        printf("%-8s %-17s %s\n", vpack_doctor_severity_name(v[i].severity), v[i].check,
               v[i].what);
        if (v[i].why[0])
            printf("%-26s why: %s\n", "", v[i].why);
        if (v[i].fix[0])
            printf("%-26s fix: %s\n", "", v[i].fix);
    }
    printf("\ncancels: %u, warnings: %u, info: %u, ok: %u\n", count[VPACK_DOCTOR_CANCELS],
           count[VPACK_DOCTOR_WARNING], count[VPACK_DOCTOR_INFO], count[VPACK_DOCTOR_OK]);
    return vpackctl_flush();
}

int doctor_main(int argc, char **argv)
{
    enum { OPT_JSON = 256, OPT_ROOT, OPT_CONNECT };
    static const struct option options[] = {
        {"json", no_argument, NULL, OPT_JSON},
        {"root", required_argument, NULL, OPT_ROOT},
        {"connect", required_argument, NULL, OPT_CONNECT},
        VPACKCTL_OPTIONS_END,
    };
    struct vpackctl_getopt g = {.cmd = "doctor", .usage = usage, .options = options};
    const char *root = NULL, *uri = NULL;
    bool json = false;
    int c;

    while ((c = vpackctl_getopt(&g, argc, argv)) >= 0) {
        switch (c) {
        case OPT_JSON:
            json = true;
            break;
        case OPT_ROOT:
            root = optarg;
            break;
        case OPT_CONNECT:
            uri = optarg;
            break;
        }
    }
    if (c == VPACKCTL_OPT_EXIT)
        return g.exit_code;
    if (optind < argc) {
        vpackctl_err("doctor: unexpected argument '%s' (see 'vpackctl doctor --help')", argv[optind]);
        return VPACKCTL_EXIT_USAGE;
    }
    if (root && !*root) {
        vpackctl_err("doctor: --root needs a directory");
        return VPACKCTL_EXIT_USAGE;
    }

    struct vpack_doctor_facts f;
    struct vpack_doctor_finding *v = NULL;
    size_t n = 0;
    int r = vpack_doctor_read(root ? root : "/", &f);
    if (r < 0) {
        vpackctl_err("doctor: %s: %s", root ? root : "/", strerror(-r));
        return VPACKCTL_EXIT_FAIL;
    }
    if (!root || uri)
        add_libvirt(&f, uri);
    r = vpack_doctor_check(&f, &v, &n);
    vpack_doctor_facts_clear(&f);
    if (r < 0) {
        vpackctl_err("doctor: %s", strerror(-r));
        return VPACKCTL_EXIT_FAIL;
    }
    int ret = json ? print_json(v, n) : print_text(v, n);
    if (ret == VPACKCTL_EXIT_OK && vpack_doctor_worst(v, n) == VPACK_DOCTOR_CANCELS)
        ret = VPACKCTL_EXIT_FAIL;
    free(v);
    return ret;
}
