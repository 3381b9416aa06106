// SPDX-License-Identifier: MIT
/* vpackctl doctor's checks over a host's facts; see vpack/doctor.h. */
#include "vpack/doctor.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vpack/config.h"
#include "vpack/grow.h"

void vpack_doctor_facts_clear(struct vpack_doctor_facts *f)
{
    for (size_t i = 0; i < f->ncpus; i++)
        free(f->cpus[i].states);
    free(f->cpus);
    free(f->holders);
    free(f->irqs);
    *f = (struct vpack_doctor_facts){0};
}

const char *vpack_doctor_severity_name(enum vpack_doctor_severity s)
{
    static const char *const names[] = {"ok", "info", "warning", "cancels"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

int vpack_doctor_parse_qos(const char *text, enum vpack_doctor_qos *qos, unsigned *us)
{
    char *end;
    size_t len = strcspn(text, "\n");

    *us = 0;
    if (len == 3 && !strncmp(text, "n/a", 3)) {
        *qos = VPACK_QOS_ZERO;
        return 0;
    }
    if (len == 0 || text[0] < '0' || text[0] > '9')
        return -EINVAL;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (errno || (size_t)(end - text) != len || v > UINT_MAX)
        return -EINVAL;
    *qos = v == 0 ? VPACK_QOS_NO_CONSTRAINT : VPACK_QOS_LIMIT;
    *us = (unsigned)v;
    return 0;
}

int vpack_doctor_home_package(const struct vpack_doctor_facts *f)
{
    int best = -1, pkg = -1;
    for (size_t i = 0; i < f->ncpus; i++)
        if (f->cpus[i].package >= 0 && (best < 0 || f->cpus[i].id < best)) {
            best = f->cpus[i].id;
            pkg = f->cpus[i].package;
        }
    return pkg;
}

enum vpack_doctor_severity vpack_doctor_worst(const struct vpack_doctor_finding *v, size_t n)
{
    enum vpack_doctor_severity w = VPACK_DOCTOR_OK;
    for (size_t i = 0; i < n; i++)
        if (v[i].severity > w)
            w = v[i].severity;
    return w;
}

/* The findings being built. */
struct out {
    struct vpack_doctor_finding *v;
    size_t n, cap;
    bool nomem;
};

static struct vpack_doctor_finding *add(struct out *o, const char *check,
                                        enum vpack_doctor_severity sev, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Appends a finding with its what; the caller says why and fix (say()). */
static struct vpack_doctor_finding *add(struct out *o, const char *check,
                                        enum vpack_doctor_severity sev, const char *fmt, ...)
{
    static struct vpack_doctor_finding sink; /* written when out of memory, never read */
    va_list ap;

    struct vpack_doctor_finding *grown = o->nomem ? NULL : vpack_grow(o->v, o->n, &o->cap, sizeof(*o->v));
    if (!grown) {
        o->nomem = true;
        return &sink;
    }
    o->v = grown;
    struct vpack_doctor_finding *f = &o->v[o->n++];
    *f = (struct vpack_doctor_finding){.check = check, .severity = sev};
    va_start(ap, fmt);
    vsnprintf(f->what, sizeof(f->what), fmt, ap);
    va_end(ap);
    return f;
}

/* Writes why it matters or how to fix it: say(x->why, ...), say(x->fix, ...). */
static void say(char dst[512], const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(char dst[512], const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, 512, fmt, ap);
    va_end(ap);
}

static bool no_driver(const struct vpack_doctor_facts *f)
{
    return !f->driver[0] || !strcmp(f->driver, "none");
}

static void check_driver(const struct vpack_doctor_facts *f, struct out *o)
{
    struct vpack_doctor_finding *x;

    if (no_driver(f)) {
        x = add(o, "cpuidle-driver", VPACK_DOCTOR_CANCELS, "no cpuidle driver (current_driver: %s)",
                f->driver[0] ? f->driver : "missing");
        say(x->why, "idle CPUs only halt (the architecture's default idle): no core or package "
               "C-state deeper than C1 is entered, so a package vpack parks draws nearly what "
               "an idle awake one does");
        say(x->fix, "on bare metal, boot with intel_idle (Intel) or acpi_idle (ACPI _CST, AMD) and "
               "without idle=poll, idle=halt or intel_idle.max_cstate=0, and enable C-states in "
               "the firmware; in a virtual machine the saving is the hypervisor's: run vpack "
               "there");
    } else if (!strcmp(f->driver, "haltpoll")) {
        x = add(o, "cpuidle-driver", VPACK_DOCTOR_WARNING, "cpuidle driver haltpoll");
        say(x->why, "cpuidle-haltpoll is a guest's driver: this host is a virtual machine, whose "
               "CPUs' power is the hypervisor's to save");
        say(x->fix, "run vpack on the hypervisor");
    } else if (!strcmp(f->driver, "acpi_idle")) {
        x = add(o, "cpuidle-driver", VPACK_DOCTOR_INFO, "cpuidle driver acpi_idle");
        say(x->why, "the C-states are the firmware's _CST list; on Intel CPUs intel_idle knows "
               "deeper ones");
        say(x->fix, "on Intel, check that intel_idle is not disabled (intel_idle.max_cstate=0)");
    } else {
        add(o, "cpuidle-driver", VPACK_DOCTOR_OK, "cpuidle driver %s", f->driver);
    }

    if (no_driver(f))
        return;
    if (!f->governor[0]) {
        x = add(o, "cpuidle-governor", VPACK_DOCTOR_INFO, "cpuidle governor not known");
    } else if (!strcmp(f->governor, "menu") || !strcmp(f->governor, "teo")) {
        add(o, "cpuidle-governor", VPACK_DOCTOR_OK, "cpuidle governor %s", f->governor);
    } else if (!strcmp(f->governor, "ladder") || !strcmp(f->governor, "haltpoll")) {
        x = add(o, "cpuidle-governor", VPACK_DOCTOR_WARNING, "cpuidle governor %s", f->governor);
        say(x->why, "%s", !strcmp(f->governor, "ladder")
                         ? "ladder steps one state deeper at a time and, on a tickless kernel, "
                           "rarely reaches the deepest state of a long idle"
                         : "haltpoll polls before it halts: it is meant for guests");
        say(x->fix, "use menu or teo: echo menu > /sys/devices/system/cpu/cpuidle/current_governor, "
               "or cpuidle.governor=menu on the kernel command line");
    } else {
        x = add(o, "cpuidle-governor", VPACK_DOCTOR_INFO, "cpuidle governor %s", f->governor);
    }
}

/* The deepest state of cpu c (the last), or NULL without states. */
static const struct vpack_doctor_cstate *deepest(const struct vpack_doctor_cpu *c)
{
    return c->nstates ? &c->states[c->nstates - 1] : NULL;
}

/* The deepest state c may enter (not disabled, not POLL), or NULL. */
static const struct vpack_doctor_cstate *deepest_enabled(const struct vpack_doctor_cpu *c)
{
    for (size_t i = c->nstates; i-- > 0;)
        if (!c->states[i].disabled && strcmp(c->states[i].name, "POLL"))
            return &c->states[i];
    return NULL;
}

/* Formats the CPUs of s into buf as "0-3,8". */
static const char *cpus_text(const vpack_cpuset *s, char *buf, size_t size)
{
    if (vpack_cpuset_format_buf(s, buf, size) >= size && size > 4)
        strcpy(buf + size - 4, "...");
    return buf;
}

static void check_cstates(const struct vpack_doctor_facts *f, struct out *o)
{
    vpack_cpuset deep_off, some_off, with;
    char a[128], b[128];
    const char *deep_name = NULL, *off_name = NULL;
    struct vpack_doctor_finding *x;

    vpack_cpuset_zero(&deep_off);
    vpack_cpuset_zero(&some_off);
    vpack_cpuset_zero(&with);
    if (no_driver(f))
        return;
    for (size_t i = 0; i < f->ncpus; i++) {
        const struct vpack_doctor_cpu *c = &f->cpus[i];
        const struct vpack_doctor_cstate *d = deepest(c);
        if (!d)
            continue;
        vpack_cpuset_set(&with, (unsigned)c->id);
        if (d->disabled) {
            vpack_cpuset_set(&deep_off, (unsigned)c->id);
            deep_name = d->name;
        }
        for (size_t k = 0; k + 1 < c->nstates; k++)
            if (c->states[k].disabled && strcmp(c->states[k].name, "POLL")) {
                vpack_cpuset_set(&some_off, (unsigned)c->id);
                off_name = c->states[k].name;
            }
    }
    if (vpack_cpuset_empty(&with)) {
        x = add(o, "c-states", VPACK_DOCTOR_WARNING, "cpuidle driver %s but no CPU lists a state",
                f->driver);
        say(x->why, "without states no CPU enters a C-state deeper than C1");
        say(x->fix, "check the firmware's C-state settings and the driver's messages (dmesg)");
        return;
    }
    if (!vpack_cpuset_empty(&deep_off)) {
        x = add(o, "c-states", VPACK_DOCTOR_CANCELS, "the deepest state %s is disabled on CPUs %s",
                deep_name, cpus_text(&deep_off, a, sizeof(a)));
        say(x->why, "a package reaches its deep package C-state only when all its cores are in their "
               "deepest state: one CPU kept out of it keeps its whole package awake, parked or not");
        say(x->fix, "echo 0 > /sys/devices/system/cpu/cpuN/cpuidle/stateM/disable for those CPUs, and "
               "find what disabled it (tuned, a boot script, cpupower idle-set -d)");
    }
    if (!vpack_cpuset_empty(&some_off)) {
        x = add(o, "c-states", VPACK_DOCTOR_WARNING, "state %s (not the deepest) is disabled on CPUs %s",
                off_name, cpus_text(&some_off, b, sizeof(b)));
        say(x->why, "a short idle that would have used it stays in a shallower state: awake packages "
               "draw more");
        say(x->fix, "echo 0 > /sys/devices/system/cpu/cpuN/cpuidle/stateM/disable, or cpupower idle-set -E");
    }
    if (vpack_cpuset_empty(&deep_off) && vpack_cpuset_empty(&some_off)) {
        const struct vpack_doctor_cstate *d = NULL;
        for (size_t i = 0; i < f->ncpus && !d; i++)
            d = deepest(&f->cpus[i]);
        add(o, "c-states", VPACK_DOCTOR_OK, "every state enabled on CPUs %s, the deepest %s (%u us)",
            cpus_text(&with, a, sizeof(a)), d->name, d->latency_us);
    }
}

/* The exit latency of the deepest state over the CPUs, 0 when none has states. */
static unsigned deepest_latency(const struct vpack_doctor_facts *f)
{
    unsigned lat = 0;
    for (size_t i = 0; i < f->ncpus; i++) {
        const struct vpack_doctor_cstate *d = deepest_enabled(&f->cpus[i]);
        if (d && d->latency_us > lat)
            lat = d->latency_us;
    }
    return lat;
}

static void check_resume_qos(const struct vpack_doctor_facts *f, struct out *o)
{
    vpack_cpuset zero, below, above;
    unsigned lowest = UINT_MAX, known = 0;
    const char *state = NULL;
    unsigned state_lat = 0;
    char a[128];
    struct vpack_doctor_finding *x;

    vpack_cpuset_zero(&zero);
    vpack_cpuset_zero(&below);
    vpack_cpuset_zero(&above);
    for (size_t i = 0; i < f->ncpus; i++) {
        const struct vpack_doctor_cpu *c = &f->cpus[i];
        const struct vpack_doctor_cstate *d = deepest_enabled(c);
        if (c->qos != VPACK_QOS_UNKNOWN)
            known++;
        if (c->qos == VPACK_QOS_ZERO) {
            vpack_cpuset_set(&zero, (unsigned)c->id);
        } else if (c->qos == VPACK_QOS_LIMIT) {
            if (c->qos_us < lowest)
                lowest = c->qos_us;
            if (d && c->qos_us < d->latency_us) {
                vpack_cpuset_set(&below, (unsigned)c->id);
                state = d->name;
                state_lat = d->latency_us;
            } else {
                vpack_cpuset_set(&above, (unsigned)c->id);
            }
        }
    }
    if (!known) {
        add(o, "pm-qos-resume", VPACK_DOCTOR_OK, "no CPU has pm_qos_resume_latency_us (not checked)");
        return;
    }
    bool states = !no_driver(f) && deepest_latency(f) > 0;
    if (!vpack_cpuset_empty(&zero)) {
        x = add(o, "pm-qos-resume", states ? VPACK_DOCTOR_CANCELS : VPACK_DOCTOR_WARNING,
                "pm_qos_resume_latency_us is n/a (no latency tolerated) on CPUs %s",
                cpus_text(&zero, a, sizeof(a)));
        say(x->why, "the cpuidle governor then uses no C-state on those CPUs: they poll, and keep "
               "their package awake%s", states ? "" : " (once a cpuidle driver runs)");
        say(x->fix, "echo 0 > /sys/devices/system/cpu/cpuN/power/pm_qos_resume_latency_us (0: no "
               "constraint), and find what wrote it (tuned, a boot script)");
    }
    if (!vpack_cpuset_empty(&below)) {
        x = add(o, "pm-qos-resume", VPACK_DOCTOR_CANCELS,
                "pm_qos_resume_latency_us limits CPUs %s to %u us, below %s's exit latency (%u us)",
                cpus_text(&below, a, sizeof(a)), lowest, state, state_lat);
        say(x->why, "the cpuidle governor skips every state whose exit latency is above the limit: "
               "those CPUs never reach their deepest state, and their package stays awake");
        say(x->fix, "echo 0 > /sys/devices/system/cpu/cpuN/power/pm_qos_resume_latency_us, or a "
               "limit above the deepest state's latency on the CPUs vpack may park");
    }
    if (!vpack_cpuset_empty(&above) && vpack_cpuset_empty(&below) && vpack_cpuset_empty(&zero)) {
        x = add(o, "pm-qos-resume", states ? VPACK_DOCTOR_INFO : VPACK_DOCTOR_WARNING,
                "pm_qos_resume_latency_us limits CPUs %s to %u us%s", cpus_text(&above, a, sizeof(a)),
                lowest, states ? ", above the deepest state's exit latency" : "");
        if (!states)
            say(x->why, "no cpuidle state to compare it with: once a driver runs, states above %u us "
                   "are not used", lowest);
    }
    if (vpack_cpuset_empty(&zero) && vpack_cpuset_empty(&below) && vpack_cpuset_empty(&above))
        add(o, "pm-qos-resume", VPACK_DOCTOR_OK, "no CPU has a resume latency limit");
}

static void check_dma_latency(const struct vpack_doctor_facts *f, struct out *o)
{
    char who[256] = "";
    size_t len = 0;
    struct vpack_doctor_finding *x;
    unsigned lat = no_driver(f) ? 0 : deepest_latency(f);

    if (!f->nholders && f->procs_unreadable) {
        x = add(o, "cpu-dma-latency", VPACK_DOCTOR_WARNING,
                "no process seen holding /dev/cpu_dma_latency, but %zu processes' descriptors "
                "could not be read", f->procs_unreadable);
        say(x->why, "a hold among them would go unseen: it applies to every CPU");
        say(x->fix, "run vpackctl doctor as root");
        return;
    }
    if (!f->nholders) {
        add(o, "cpu-dma-latency", VPACK_DOCTOR_OK, "no process holds /dev/cpu_dma_latency open");
        return;
    }
    for (size_t i = 0; i < f->nholders && len < sizeof(who); i++) {
        int w = snprintf(who + len, sizeof(who) - len, "%s%s (pid %d)", i ? ", " : "",
                         f->holders[i].comm[0] ? f->holders[i].comm : "?", f->holders[i].pid);
        if (w > 0)
            len += (size_t)w;
    }
    const char *fixtext = "stop the holder, or have it write a limit above the deepest state's "
                          "exit latency (tuned: a profile without force_latency); the hold ends "
                          "when it closes the file";
    if (!f->dma_limit_known) {
        x = add(o, "cpu-dma-latency", VPACK_DOCTOR_WARNING,
                "/dev/cpu_dma_latency is held open by %s; its limit could not be read", who);
        say(x->why, "a PM QoS CPU latency limit applies to every CPU: states above it are not used "
               "anywhere, parked packages included (reading the limit needs root)");
        say(x->fix, "%s", fixtext);
    } else if (lat > 0 && f->dma_limit_us >= 0 && (unsigned)f->dma_limit_us < lat) {
        x = add(o, "cpu-dma-latency", VPACK_DOCTOR_CANCELS,
                "/dev/cpu_dma_latency is held open by %s: limit %d us, below the deepest state's "
                "exit latency (%u us)", who, (int)f->dma_limit_us, lat);
        say(x->why, "a PM QoS CPU latency limit applies to every CPU: no CPU enters a state above "
               "it, so no package reaches its deep C-state, parked or not");
        say(x->fix, "%s", fixtext);
    } else if (lat == 0) {
        x = add(o, "cpu-dma-latency", VPACK_DOCTOR_WARNING,
                "/dev/cpu_dma_latency is held open by %s: limit %d us", who, (int)f->dma_limit_us);
        say(x->why, "no cpuidle state to compare it with: once a driver runs, no CPU enters a state "
               "whose exit latency is above %d us", (int)f->dma_limit_us);
        say(x->fix, "%s", fixtext);
    } else {
        add(o, "cpu-dma-latency", VPACK_DOCTOR_INFO,
            "/dev/cpu_dma_latency is held open by %s: limit %d us, not below the deepest state's "
            "exit latency (%u us)", who, (int)f->dma_limit_us, lat);
    }
}

/* Whether word w is one of the space-separated words of list. */
static bool has_word(const char *list, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = list; (p = strstr(p, w)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
            return true;
    return false;
}

static void check_tuned(const struct vpack_doctor_facts *f, struct out *o)
{
    /* The profiles that set force_latency (a /dev/cpu_dma_latency hold) or disable C-states. */
    static const char *const latency[] = {"latency-performance", "network-latency",
                                          "realtime", "realtime-virtual-host",
                                          "realtime-virtual-guest", "cpu-partitioning",
                                          "hpc-compute", "accelerator-performance"};
    /* Those that raise the awake packages' power (performance governor, EPB). */
    static const char *const throughput[] = {"throughput-performance", "virtual-host",
                                             "network-throughput", "intel-sst"};
    struct vpack_doctor_finding *x;
    const char *running = f->tuned_running ? "" : " (tuned is not running: the profile applies "
                                                  "when it starts)";

    if (!f->tuned_profile[0]) {
        add(o, "tuned", VPACK_DOCTOR_OK, "no tuned profile active");
        return;
    }
    for (size_t i = 0; i < sizeof(latency) / sizeof(latency[0]); i++)
        if (has_word(f->tuned_profile, latency[i])) {
            x = add(o, "tuned", f->tuned_running ? VPACK_DOCTOR_CANCELS : VPACK_DOCTOR_WARNING,
                    "tuned profile %s%s", f->tuned_profile, running);
            say(x->why, "%s holds a low CPU latency limit (force_latency, /dev/cpu_dma_latency) or "
                   "disables C-states: no package reaches its deep C-state", latency[i]);
            say(x->fix, "tuned-adm profile virtual-host (or balanced, powersave); keep the latency "
                   "profile for hosts that do not pack");
            return;
        }
    for (size_t i = 0; i < sizeof(throughput) / sizeof(throughput[0]); i++)
        if (has_word(f->tuned_profile, throughput[i])) {
            x = add(o, "tuned", VPACK_DOCTOR_WARNING, "tuned profile %s%s", f->tuned_profile,
                    running);
            say(x->why, "%s sets the performance governor and energy bias: the packages that stay "
                   "awake draw more, which takes part of the saving back (parked ones still idle "
                   "deeply)", throughput[i]);
            say(x->fix, "tuned-adm profile balanced or powersave where latency allows");
            return;
        }
    add(o, "tuned", VPACK_DOCTOR_OK, "tuned profile %s%s", f->tuned_profile, running);
}

/* The packages of the CPUs, as a set of package ids. */
static void packages_of(const struct vpack_doctor_facts *f, const vpack_cpuset *cpus,
                        vpack_cpuset *pkgs)
{
    vpack_cpuset_zero(pkgs);
    for (size_t i = 0; i < f->ncpus; i++)
        if (f->cpus[i].package >= 0 && (!cpus || vpack_cpuset_isset(cpus, (unsigned)f->cpus[i].id)))
            vpack_cpuset_set(pkgs, (unsigned)f->cpus[i].package);
}

static void check_irqs(const struct vpack_doctor_facts *f, struct out *o)
{
    vpack_cpuset pkgs, home_cpus, off;
    int home = vpack_doctor_home_package(f);
    char list[256] = "", a[64];
    size_t len = 0, count = 0;
    struct vpack_doctor_finding *x;

    packages_of(f, NULL, &pkgs);
    if (vpack_cpuset_count(&pkgs) < 2) {
        add(o, "irq-affinity", VPACK_DOCTOR_OK, "one package: no package to park, IRQs not checked");
        if (f->irqbalance_running)
            add(o, "irqbalance", VPACK_DOCTOR_OK, "irqbalance runs (one package)");
        return;
    }
    vpack_cpuset_zero(&home_cpus);
    vpack_cpuset_zero(&off);
    for (size_t i = 0; i < f->ncpus; i++)
        if (f->cpus[i].package == home)
            vpack_cpuset_set(&home_cpus, (unsigned)f->cpus[i].id);
    for (size_t i = 0; i < f->nirqs; i++) {
        const struct vpack_doctor_irq *q = &f->irqs[i];
        vpack_cpuset p;
        if (vpack_cpuset_empty(&q->cpus) || vpack_cpuset_intersects(&q->cpus, &home_cpus))
            continue;
        packages_of(f, &q->cpus, &p);
        vpack_cpuset_or(&off, &off, &p);
        count++;
        if (len < sizeof(list) - 1) {
            int w = snprintf(list + len, sizeof(list) - len, "%s%d%s%s%s", count > 1 ? ", " : "",
                             q->irq, q->name[0] ? " (" : "", q->name, q->name[0] ? ")" : "");
            if (w > 0)
                len += (size_t)w;
        }
    }
    if (len >= sizeof(list) - 1)
        strcpy(list + sizeof(list) - 5, "...");
    if (count) {
        x = add(o, "irq-affinity", VPACK_DOCTOR_WARNING,
                "%zu IRQ%s only on package%s %s, none on package %d (where the host's own work "
                "stays): %s", count, count > 1 ? "s" : "",
                vpack_cpuset_count(&off) > 1 ? "s" : "", cpus_text(&off, a, sizeof(a)), home, list);
        say(x->why, "an interrupt wakes the CPU it is routed to: each one that fires wakes a package "
               "vpack has parked (how often depends on the device)");
        say(x->fix, "route them to package %d: echo CPUS > /proc/irq/N/smp_affinity_list (CPUS: "
               "package %d's), and keep irqbalance off the other packages "
               "(IRQBALANCE_BANNED_CPULIST)", home, home);
    } else {
        add(o, "irq-affinity", VPACK_DOCTOR_OK, "every IRQ can run on package %d (%zu read)", home,
            f->nirqs);
    }
    if (f->irqbalance_running) {
        vpack_cpuset others;
        vpack_cpuset_zero(&others);
        for (size_t i = 0; i < f->ncpus; i++)
            if (f->cpus[i].package != home)
                vpack_cpuset_set(&others, (unsigned)f->cpus[i].id);
        x = add(o, "irqbalance", VPACK_DOCTOR_WARNING, "irqbalance runs on a %u-package host",
                vpack_cpuset_count(&pkgs));
        say(x->why, "irqbalance spreads interrupts by load over every package, the ones vpack parks "
               "included, and moves them back after each change by hand");
        say(x->fix, "IRQBALANCE_BANNED_CPULIST=%s in /etc/default/irqbalance (irqbalance 1.8 and "
               "later), then restart irqbalance; or stop it and route IRQs to package %d",
            cpus_text(&others, a, sizeof(a)), home);
    } else {
        add(o, "irqbalance", VPACK_DOCTOR_OK, "irqbalance not running");
    }
}

static void check_power(const struct vpack_doctor_facts *f, struct out *o)
{
    struct vpack_doctor_finding *x;
    if (!f->power_checked)
        return;
    if (f->rapl_package) {
        add(o, "measure-rapl", VPACK_DOCTOR_OK, "RAPL package energy readable");
    } else {
        x = add(o, "measure-rapl", VPACK_DOCTOR_WARNING, "no RAPL package energy: %s", f->rapl_why);
        say(x->why, "vpackctl measure and the metrics cannot give watts here: the saving is shown "
               "only as idle shares, so it can be there unseen");
        say(x->fix, "on bare metal: modprobe intel_rapl_msr (Intel) or the AMD RAPL driver, and read "
               "as root; a virtual machine has none");
    }
    if (f->cstate_pkg) {
        add(o, "measure-cstate", VPACK_DOCTOR_OK, "package C-state counters readable");
    } else {
        x = add(o, "measure-cstate", VPACK_DOCTOR_INFO, "no package C-state counters: %s",
                f->cstate_why);
        say(x->why, "they would show whether parked packages reach their deep package state");
        say(x->fix, "the kernel's cstate_pkg PMU (intel_cstate), read as root");
    }
}

/*
 * Package C6's scope on this CPU against vpackd.conf's pc6_scope (issue 26,
 * item 6): where it is system-wide (vpack_pc6_system_wide()), a parked
 * socket reaches no deep state while another works.
 */
static void check_pc6(const struct vpack_doctor_facts *f, struct out *o)
{
    struct vpack_doctor_finding *x;
    char cpu[64];
    if (!f->cpu_known)
        return;
    snprintf(cpu, sizeof(cpu), "%s family %d model %d", f->cpu.vendor[0] ? f->cpu.vendor : "CPU",
             f->cpu.family, f->cpu.model);
    bool wide = vpack_pc6_system_wide(&f->cpu);
    if (wide == f->pc6_system_conf) {
        add(o, "pc6-scope", VPACK_DOCTOR_OK, "%s: package C6 %s; pc6_scope = %s (%s)", cpu,
            wide ? "is system-wide" : "not known to be system-wide", wide ? "system" : "package",
            f->conf_note);
    } else if (wide) {
        x = add(o, "pc6-scope", VPACK_DOCTOR_WARNING,
                "%s: package C6 is system-wide, but pc6_scope = package (%s)", cpu, f->conf_note);
        say(x->why, "a socket vpack parks reaches package C6 only while every other socket idles "
               "too: packing saves only what a parked socket's uncore draws less, and a domain "
               "packed off its memory's socket pays for it with remote memory");
        say(x->fix, "set pc6_scope = system under [policy] in %s (each domain then stays on its "
               "memory's socket: vpackd.conf(5)), or measure what parking saves here "
               "(vpackctl measure)", VPACK_DEFAULT_CONFIG);
    } else {
        x = add(o, "pc6-scope", VPACK_DOCTOR_INFO,
                "%s: pc6_scope = system (%s), but this CPU is not one Intel documents with "
                "system-wide package C6", cpu, f->conf_note);
        say(x->why, "domains stay on their memory's socket even where a parked socket could reach "
               "package C6 on its own");
        say(x->fix, "pc6_scope = package, unless a measurement (vpackctl measure) shows parking "
               "saves nothing here");
    }
}

static void check_cgroup(const struct vpack_doctor_facts *f, struct out *o)
{
    struct vpack_doctor_finding *x;
    if (!f->cgroup_mode[0])
        return;
    if (!strcmp(f->cgroup_mode, "none")) {
        x = add(o, "cgroup", VPACK_DOCTOR_WARNING, "no cgroup hierarchy with cpuset found");
        say(x->why, "libvirt then does not confine QEMU's threads: vpack's pins hold, but vpackd "
               "cannot repair cpusets after CPU hotplug or see iothreads' groups");
        say(x->fix, "mount cgroup v2 (systemd.unified_cgroup_hierarchy=1) or v1's cpuset");
        return;
    }
    if (f->partition[0])
        add(o, "cgroup", VPACK_DOCTOR_OK, "cgroup %s, libvirt's partition %s", f->cgroup_mode,
            f->partition);
    else {
        x = add(o, "cgroup", VPACK_DOCTOR_INFO, "cgroup %s, no libvirt partition yet",
                f->cgroup_mode);
        say(x->why, "libvirt makes machine/ or machine.slice/ when it starts its first guest");
    }
}

static void check_libvirt(const struct vpack_doctor_facts *f, struct out *o)
{
    struct vpack_doctor_finding *x;
    unsigned long v = f->libvirt_version;
    if (!f->libvirt_checked)
        return;
    if (!v) {
        x = add(o, "libvirt", VPACK_DOCTOR_WARNING, "libvirt's version not known: %s",
                f->libvirt_why);
        say(x->why, "vpack needs libvirt 6.5 or later (the hooks in qemu.d/)");
        say(x->fix, "start libvirtd (or virtqemud), or run as a user it lets connect");
        return;
    }
    char ver[48];
    snprintf(ver, sizeof(ver), "%lu.%lu.%lu", v / 1000000, v / 1000 % 1000, v % 1000);
    if (v < 6005000) {
        x = add(o, "libvirt", VPACK_DOCTOR_WARNING, "libvirt %s", ver);
        say(x->why, "libvirt before 6.5 runs only /etc/libvirt/hooks/qemu, not qemu.d/: vpack-hook "
               "is never run");
        say(x->fix, "upgrade libvirt to 6.5 or later");
    } else if (!f->libvirt_daemon) {
        x = add(o, "libvirt", VPACK_DOCTOR_INFO, "libvirt %s (the library; the daemon: %s)", ver,
                f->libvirt_why);
        say(x->why, "vpackd needs the daemon (libvirtd or virtqemud) to place guests");
    } else {
        add(o, "libvirt", VPACK_DOCTOR_OK, "libvirt %s", ver);
    }
}

static void check_hook(const struct vpack_doctor_facts *f, struct out *o)
{
    struct vpack_doctor_finding *x;
    if (f->hook == VPACK_HOOK_OK) {
        add(o, "hook", VPACK_DOCTOR_OK, "%s installed and executable", f->hook_path);
        return;
    }
    bool missing = f->hook == VPACK_HOOK_MISSING;
    x = add(o, "hook", VPACK_DOCTOR_WARNING, "%s %s", f->hook_path,
            missing ? "is not installed" : "is not executable");
    say(x->why, "without vpack-hook an invalid power policy starts anyway, vpackd learns of a guest "
           "only from its live XML at first sight, and a restored or migrated guest is not put "
           "back to its own pins");
    say(x->fix, "%s, then restart libvirtd (it looks for hooks when it starts)",
        missing ? "install it (the package's conffile, or meson install: a script running "
                  "vpack-hook)"
                : "chmod 0755 it");
}

int vpack_doctor_check(const struct vpack_doctor_facts *f, struct vpack_doctor_finding **out,
                       size_t *n)
{
    struct out o = {0};

    check_driver(f, &o);
    check_cstates(f, &o);
    check_resume_qos(f, &o);
    check_dma_latency(f, &o);
    check_tuned(f, &o);
    check_irqs(f, &o);
    check_power(f, &o);
    check_pc6(f, &o);
    check_cgroup(f, &o);
    check_libvirt(f, &o);
    check_hook(f, &o);
    if (o.nomem) {
        free(o.v);
        *out = NULL;
        *n = 0;
        return -ENOMEM;
    }
    *out = o.v;
    *n = o.n;
    return 0;
}
