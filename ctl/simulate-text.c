// SPDX-License-Identifier: MIT
/*
 * vpackctl simulate's table: the figures of the three levels side by side,
 * and where each thread ended up for a small trace.
 */
#include <stddef.h>
#include <stdio.h>

#include "simulate.h"
#include "vpack/cpuset.h"
#include "vpackctl.h"

/* Traces of at most this many domains get their placement in the text output. */
#define PLACEMENT_DOMAINS 8

/* What a row of the table shows. */
enum row {
    ROW_KWH,
    ROW_SAVING,
    ROW_SERVED,
    ROW_DELAY,
    ROW_ESV,
    ROW_MOVES,
    ROW_PINS,
    ROW_PIN_CPU,
    ROW_ACTIVE,
    ROW_AWAKE,
    ROW_BOUND,
    ROW_TARGET,
    ROW_DELAY_OPT,
    ROW_REFILL,
    ROW_SMT,
    ROW_WAKE,
    ROW_EXITS,
    ROW_HELD,
    ROW_REMOTE,
};

static void print_row(const char *label, const struct figures *f, enum row what)
{
    printf("%-26s", label);
    for (int l = 0; l < NLEVELS; l++) {
        const struct figures *x = &f[l];
        char cell[64];

        /* One cell format a row: the cases look alike because they are one kind of data. */
        switch (what) {
        case ROW_KWH:
            snprintf(cell, sizeof(cell), "%.4f", x->kwh);
            break;
        case ROW_SAVING:
            snprintf(cell, sizeof(cell), "%.1f%%", x->saving * 100);
            break;
        case ROW_SERVED:
            snprintf(cell, sizeof(cell), "%.4f", x->served_ratio);
            break;
        case ROW_DELAY:
            snprintf(cell, sizeof(cell), "%.2f%%", x->t.delay_p99 * 100);
            break;
        case ROW_ESV:
            snprintf(cell, sizeof(cell), "%.3g", x->esv);
            break;
        case ROW_MOVES:
            snprintf(cell, sizeof(cell), "%.1f", x->moves_per_hour);
            break;
        case ROW_PINS:
            snprintf(cell, sizeof(cell), "%lu", x->t.pin_ops);
            break;
        case ROW_PIN_CPU:
            snprintf(cell, sizeof(cell), "%.2f", x->t.pin_cpu_s);
            break;
        case ROW_ACTIVE:
            snprintf(cell, sizeof(cell), "%.0f", x->t.active_pkg_s);
            break;
        case ROW_AWAKE:
            snprintf(cell, sizeof(cell), "%.0f", x->awake_pkg_s);
            break;
        case ROW_BOUND:
            snprintf(cell, sizeof(cell), "%+.1f%%", x->vs_bound * 100);
            break;
        case ROW_DELAY_OPT:
            snprintf(cell, sizeof(cell), "%+.1f%%", x->vs_delay * 100);
            break;
        case ROW_REFILL:
            snprintf(cell, sizeof(cell), "%.2f", x->t.refill_s);
            break;
        case ROW_SMT:
            snprintf(cell, sizeof(cell), "%.0f", x->t.smt_slow_s);
            break;
        case ROW_WAKE:
            snprintf(cell, sizeof(cell), "%.1f", x->t.wake_delay_s);
            break;
        case ROW_EXITS:
            snprintf(cell, sizeof(cell), "%.0f", x->t.deep_wakes);
            break;
        case ROW_HELD:
            snprintf(cell, sizeof(cell), "%.0f", x->t.held_pkg_s);
            break;
        case ROW_REMOTE:
            snprintf(cell, sizeof(cell), "%.1f", x->t.remote_delay_s);
            break;
        default:
            snprintf(cell, sizeof(cell), "%+.1f%%", x->vs_target * 100);
            break;
        }
        printf(" %12s", cell);
    }
    putchar('\n');
}

/* A row of shares: the double at offset off of each level's figures, as a percentage. */
static void print_share_row(const char *label, const struct figures *f, size_t off, int digits)
{
    printf("%-26s", label);
    for (int l = 0; l < NLEVELS; l++) {
        char cell[64];

        snprintf(cell, sizeof(cell), "%.*f%%", digits,
                 *(const double *)((const char *)&f[l] + off) * 100);
        printf(" %12s", cell);
    }
    putchar('\n');
}

/* Where thread k of the model's i-th domain ended up, as a CPU list in *buf. */
static int thread_cpus_text(const struct vpack_model *m, unsigned i, unsigned k, char *buf,
                            size_t len)
{
    vpack_cpuset cpus;
    int nv = vpack_model_thread_cpus(m, i, k, &cpus);

    if (nv >= 0)
        vpack_cpuset_format_buf(&cpus, buf, len);
    return nv;
}

/* "vcpu0=0 vcpu1=0-1 emulator=0 iothread1=1" for the model's i-th domain. */
static void placement_line(const struct vpack_model *m, unsigned i, char *buf, size_t len)
{
    size_t used = 0;
    char cpus[256];
    int nv;

    buf[0] = '\0';
    for (unsigned k = 0; used < len && (nv = thread_cpus_text(m, i, k, cpus, sizeof(cpus))) >= 0;
         k++) {
        int n;

        if (k < (unsigned)nv)
            n = snprintf(buf + used, len - used, "%svcpu%u=%s", k ? " " : "", k, cpus);
        else if (k == (unsigned)nv)
            n = snprintf(buf + used, len - used, " emulator=%s", cpus);
        else
            n = snprintf(buf + used, len - used, " iothread%u=%s", k - (unsigned)nv, cpus);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

/* The power model's platform and the figures the costs take from it. */
static void platform_line(const struct sim *sim)
{
    const struct vpack_power_params *p = &sim->power;

    printf("platform %s: PC6 %s, exit %.0f us, residency %.0f us, busy period %g ms, "
           "refill %g ms, remote memory %s\n\n",
           sim->platform, vpack_pc6_scope_name(p->pc6_scope), p->exit_us, p->residency_us,
           p->busy_period_ms, p->refill_ms, p->remote == VPACK_REMOTE_HOLDS ? "holds" : "free");
}

/* The saving with each cost assumption varied (sensitivity, model.h step 8). */
static void cost_saving_rows(const struct figures *f)
{
    for (unsigned v = 0; v < VPACK_COST_VARIANTS; v++) {
        printf("  ... %-20s", vpack_cost_variant_name(v));
        for (int l = 0; l < NLEVELS; l++) {
            char cell[32];
            snprintf(cell, sizeof(cell), "%.1f%%", f[l].saving_var[v] * 100);
            printf(" %12s", cell);
        }
        putchar('\n');
    }
}

/* Served work with the refill assumption varied. */
static void cost_served_rows(const struct figures *f)
{
    static const char *const label[2] = {"  ... refill 0", "  ... refill x 2"};

    for (int r = 0; r < 2; r++) {
        printf("%-26s", label[r]);
        for (int l = 0; l < NLEVELS; l++)
            printf(" %12.4f", r ? f[l].served_refill2 : f[l].served_refill0);
        putchar('\n');
    }
}

int simulate_print_text(const struct sim *sim, const struct figures *f)
{
    const struct vpack_topology *t = sim->topo;

    printf("%lu intervals (%.2f h), up to %lu domains, on %s (%u packages)\n\n",
           f[0].t.intervals, f[0].t.seconds / 3600, sim->ndomains,
           t->source ? t->source : "host", t->npackages);
    platform_line(sim);
    printf("%-26s %12s %12s %12s\n", "", "level 0", "level 1", "level 2");
    for (unsigned p = 0; p < t->npackages; p++) {
        char label[64];

        snprintf(label, sizeof(label), "package %d whole-idle", t->packages[p].id);
        printf("%-26s", label);
        for (int l = 0; l < NLEVELS; l++) {
            char cell[32];
            snprintf(cell, sizeof(cell), "%.1f%%",
                     f[l].t.seconds > 0 ? 100 * f[l].t.pkg_idle_s[p] / f[l].t.seconds : 0);
            printf(" %12s", cell);
        }
        putchar('\n');
    }
    print_row("energy (kWh)", f, ROW_KWH);
    print_row("saving vs level 0", f, ROW_SAVING);
    /* The same run with the deep package C-state held elsewhere (sensitivity). */
    for (unsigned s = 0; s < VPACK_PC6_SCOPES; s++) {
        char label[64];

        snprintf(label, sizeof(label), "  ... PC6 scope %s%s", vpack_pc6_scope_name(s),
                 s == sim->pc6_scope ? "*" : "");
        printf("%-26s", label);
        for (int l = 0; l < NLEVELS; l++) {
            char cell[32];
            snprintf(cell, sizeof(cell), "%.1f%%", f[l].saving_scope[s] * 100);
            printf(" %12s", cell);
        }
        putchar('\n');
    }
    printf("%-26s", "  ... idle_w as deep_w");
    for (int l = 0; l < NLEVELS; l++) {
        char cell[32];
        snprintf(cell, sizeof(cell), "%.1f%%", f[l].saving_idle_deep * 100);
        printf(" %12s", cell);
    }
    putchar('\n');
    cost_saving_rows(f);
    print_row("served work ratio", f, ROW_SERVED);
    cost_served_rows(f);
    print_row("p99 vCPU delay", f, ROW_DELAY);
    /* Per VM, then across VMs: the VM that suffers is not hidden in a pooled figure. */
    print_share_row("per-VM delay p50", f, offsetof(struct figures, vm.delay_p50), 2);
    print_share_row("per-VM delay p99", f, offsetof(struct figures, vm.delay_p99), 2);
    print_share_row("per-VM delay max", f, offsetof(struct figures, vm.delay_max), 2);
    print_share_row("per-VM unserved p99", f, offsetof(struct figures, vm.unserved_p99), 4);
    print_share_row("per-VM unserved max", f, offsetof(struct figures, vm.unserved_max), 4);
    print_share_row("saturation share", f, offsetof(struct figures, saturation), 2);
    print_row("energy x violation", f, ROW_ESV);
    print_row("moves per hour", f, ROW_MOVES);
    print_row("pin operations", f, ROW_PINS);
    print_row("pin CPU-seconds", f, ROW_PIN_CPU);
    print_row("awake package-seconds", f, ROW_AWAKE);
    print_row("package-seconds with work", f, ROW_ACTIVE);
    print_row("vs capacity bound", f, ROW_BOUND);
    print_row("vs policy target", f, ROW_TARGET);
    print_row("vs delay-bounded optimum", f, ROW_DELAY_OPT);
    print_row("refill CPU-seconds", f, ROW_REFILL);
    print_row("SMT slowdown CPU-seconds", f, ROW_SMT);
    print_row("exit delay vCPU-seconds", f, ROW_WAKE);
    print_row("deep-state exits", f, ROW_EXITS);
    print_row("memory-held package-s", f, ROW_HELD);
    print_row("remote-memory vCPU-s", f, ROW_REMOTE);
    printf("%-26s", "intervals under the bound");
    for (int l = 0; l < NLEVELS; l++)
        printf(" %12lu", sim->under_bound[l]);
    putchar('\n');
    printf("%-26s %12.0f (%s)\n", "capacity bound pkg-s", sim->bound.package_s,
           sim->bound.exact ? "exact" : "lower bound");
    printf("%-26s %12.0f (%s)\n", "policy target pkg-s", sim->target.package_s,
           sim->target.exact ? "exact" : "lower bound");
    printf("%-26s %s\n", "work lost to moves",
           "the refill CPU-seconds row (moved threads' cache refill; pin work is libvirtd's CPU)");
    printf("%-26s %12u (with vCPU work; per-VM delay: wait per CPU-second wanted)\n",
           "VMs in the per-VM figures", f[0].vm.n);
    printf("%-26s %12.0f (%s, p99 delay <= %.1f%%)\n", "delay-bounded opt pkg-s",
           sim->delay.package_s, sim->delay.exact ? "exact" : "lower bound",
           sim->delay.delay_bound * 100);
    if (f[0].t.foreign_s > 0)
        printf("%-26s %12.1f (--host-burst)\n", "CPU-seconds outside guests", f[0].t.foreign_s);
    /* Where each thread ended up, for a trace small enough to read. */
    if (sim->ndomains <= PLACEMENT_DOMAINS) {
        const struct vpack_model_domain *d;

        printf("\nplacement at the end:\n");
        for (int l = 0; l < NLEVELS; l++) {
            printf("  level %d:", l);
            for (unsigned i = 0; (d = vpack_model_domain_get(sim->model[l], i)); i++) {
                char line[1024];

                placement_line(sim->model[l], i, line, sizeof(line));
                printf("%s %s: %s", i ? ";" : "", d->name, line);
            }
            putchar('\n');
        }
    }
    return vpackctl_flush();
}

