// SPDX-License-Identifier: MIT
/*
 * Act: pin what differs from the plan (LIVE only), sort failed pins into
 * transient and permanent, and give threads their intent back when vpack
 * stops or a hotplug cycle has narrowed them.
 */
#include "agent-priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* One round of pins: why (for the metrics), the reason text, and where the moves go. */
struct pin_round {
    enum pin_why why;
    const char *reason;        /* the policy's reason, or the restore's */
    const struct vpack__act_out *out;
};

static const char *kind_name(enum vpack_thread_kind k)
{
    return k == VPACK_THREAD_VCPU ? "vcpu" : k == VPACK_THREAD_EMULATOR ? "emulator" : "iothread";
}

static void move_clear(struct vpack_move *m)
{
    free(m->domain);
    free(m->threads);
    free(m->from);
    free(m->to);
    free(m->reason);
}

static int move_add(struct vpack_move **moves, unsigned *n, const char *dom, const char *threads,
                    const vpack_cpuset *from, const vpack_cpuset *to, const char *reason)
{
    struct vpack_move m = {
        .domain = strdup(dom),
        .threads = strdup(threads),
        .from = from ? vpack_cpuset_format(from) : strdup("?"),
        .to = vpack_cpuset_format(to),
        .reason = strdup(reason ? reason : ""),
    };
    struct vpack_move *grown = NULL;
    if (m.domain && m.threads && m.from && m.to && m.reason)
        grown = realloc(*moves, (*n + 1) * sizeof(*grown));
    if (!grown) {
        move_clear(&m);
        return -ENOMEM;
    }
    grown[(*n)++] = m;
    *moves = grown;
    return 0;
}

void vpack_moves_free(struct vpack_move *moves, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        move_clear(&moves[i]);
    free(moves);
}

static enum pin_result pin_result(int r)
{
    switch (r) {
    case 0:
        return RES_OK;
    case -ENOENT:
        return RES_GONE;
    case -EINVAL:
        return RES_INVALID;
    case -EBUSY:
    case -ENOTCONN:
        return RES_TRANSIENT;
    default:
        return RES_ERROR;
    }
}

static void pinned(struct agent_dom *d, struct agent_thread *t, const char *label,
                   const vpack_cpuset *have, const vpack_cpuset *want, const char *reason)
{
    char *from = have ? vpack_cpuset_format(have) : NULL;
    char *to = vpack_cpuset_format(want);
    log_info("domain %s: %s %s -> %s (%s)", d->name, label, from ? from : "?", to ? to : "?",
             reason ? reason : "restore");
    free(from);
    free(to);
    t->applied = *want;
    t->applied_known = true;
}

/* A failed pin, one case per kind of failure. */
static void pin_failed(struct vpack_agent *a, struct agent_dom *d, struct agent_thread *t,
                       const char *label, int r, const char *err)
{
    a->ctr.pins_failed++;
    switch (r) {
    case -ENOENT: /* the domain is gone: the stop event will forget it */
        d->refresh = true;
        log_info("domain %s: gone while pinning %s", d->name, label);
        break;
    case -EINVAL: /* a CPU went away (read the online CPUs now) or the cgroup lacks it */
        a->online_check = true;
        t->applied_known = false;
        log_warn("domain %s: %s refused: %s", d->name, label, err);
        break;
    case -EBUSY: /* a job holds the domain: the next cycle retries */
    case -ENOTCONN:
        t->applied_known = false;
        log_info("domain %s: %s not pinned now (%s); retrying", d->name, label, err);
        break;
    default: /* unknown: re-read the domain before trying again */
        t->applied_known = false;
        d->refresh = true;
        log_warn("domain %s: pinning %s failed: %s", d->name, label, err);
        break;
    }
}

/* "vcpu 3", "iothread 1" or "emulator": a thread's name in the log and in moves. */
static void thread_label(enum vpack_thread_kind kind, const struct agent_thread *t, char *buf,
                         size_t len)
{
    if (kind == VPACK_THREAD_EMULATOR)
        snprintf(buf, len, "emulator");
    else
        snprintf(buf, len, "%s %d", kind_name(kind), t->id);
}

/*
 * Pins one thread to want if it differs from what is applied. Returns 1
 * when it pinned (or would, in a dry run), 0 when nothing changed, <0 on
 * failure (already logged and counted).
 */
static int apply_thread(struct vpack_agent *a, struct agent_dom *d, struct agent_thread *t,
                        enum vpack_thread_kind kind, const vpack_cpuset *want_in,
                        const struct pin_round *pr)
{
    vpack_cpuset want, have;
    char *err = NULL, label[64];
    vpack_cpuset_and(&want, want_in, &a->online);
    if (vpack_cpuset_empty(&want))
        return 0; /* every CPU it may use is offline: nothing to do until one returns */
    if (t->applied_known) {
        vpack_cpuset_and(&have, &t->applied, &a->online);
        if (vpack_cpuset_equal(&have, &want))
            return 0;
    }
    thread_label(kind, t, label, sizeof(label));
    if (pr->out && pr->out->moves &&
        move_add(pr->out->moves, pr->out->nmoves, d->name, label,
                 t->applied_known ? &have : NULL, &want, pr->reason) < 0)
        log_warn("domain %s: out of memory listing the move of %s", d->name, label);
    if (pr->out && pr->out->dry_run)
        return 1;
    int r = vpack_virt_pin(a->virt, d->uuid, kind, t->id, &want, &err);
    a->pin_ops[pr->why][pin_result(r)]++;
    if (r < 0) {
        pin_failed(a, d, t, label, r, err ? err : "?");
        free(err);
        return r;
    }
    pinned(d, t, label, t->applied_known ? &have : NULL, &want, pr->reason);
    a->ctr.pins_ok++;
    return 1;
}

/* Pins every thread of d to the plan's CPU sets; the number moved. */
static unsigned act_domain(struct vpack_agent *a, struct agent_dom *d,
                           const struct vpack_plan_domain *pd, const struct pin_round *pr)
{
    unsigned changed = 0, j = 0;
    for (unsigned v = 0; v < d->nvcpus; v++) {
        if (!d->vcpu_online[v])
            continue;
        const struct vpack_plan_thread *pt = &pd->vcpus[j++];
        changed += apply_thread(a, d, &d->vcpus[v], VPACK_THREAD_VCPU, pt->cpus, pr) > 0;
    }
    changed += apply_thread(a, d, &d->emulator, VPACK_THREAD_EMULATOR, pd->emulator.cpus, pr) > 0;
    for (unsigned t = 0; t < d->niothreads && t < pd->niothreads; t++)
        changed += apply_thread(a, d, &d->iothreads[t], VPACK_THREAD_IOTHREAD,
                                pd->iothreads[t].cpus, pr) > 0;
    return changed;
}

unsigned vpack__act(struct vpack_agent *a, const struct vpack_plan *plan, const unsigned *map,
                    const struct vpack__act_out *out)
{
    unsigned changed = 0;
    for (unsigned i = 0; i < plan->ndomains; i++) {
        const struct vpack_plan_domain *pd = &plan->domains[i];
        struct agent_dom *d = &a->doms[map[i]];
        if (!out->dry_run && vpack__dom_set_placement(d, pd) < 0)
            log_warn("domain %s: out of memory keeping the plan's reason", d->name);
        /* Level 0 and unknown domains are never touched. */
        if ((pd->level < 1 && !d->managed) || !d->known)
            continue;
        /* Its request goes into its live metadata before any pin of vpack's does: a
         * save or a migration of the live XML must tell them apart (issue 28). */
        if (!out->dry_run && pd->level >= 1 && !d->marked &&
            (!vpack__dom_mark_due(a, d) || vpack__dom_mark(a, d) < 0))
            continue; /* not placed until its request is written; retried when due */
        if (!out->dry_run && pd->level >= 1 && !d->managed) {
            d->managed = true;
            /* Kept in its record before the first pin: killed after that pin,
             * the next vpackd still gives the threads back (issue 27, G). */
            vpack__dom_narrowed(a, d);
        }
        struct pin_round pr = {PIN_PLAN, pd->reason, out};
        changed += act_domain(a, d, pd, &pr);
    }
    return changed;
}

/*
 * Gives d's threads their unrestricted mask (the guest's pin, or the
 * domain's bound, or every online CPU); only those whose applied mask is
 * unknown when only_unknown. Returns the number moved; *failed (if not
 * NULL) counts the pins that failed.
 */
static unsigned restore_domain(struct vpack_agent *a, struct agent_dom *d, bool only_unknown,
                               const struct pin_round *pr, unsigned *failed)
{
    struct {
        struct agent_thread *t;
        unsigned n;
        enum vpack_thread_kind kind;
    } groups[] = {
        {d->vcpus, d->nvcpus, VPACK_THREAD_VCPU},
        {&d->emulator, 1, VPACK_THREAD_EMULATOR},
        {d->iothreads, d->niothreads, VPACK_THREAD_IOTHREAD},
    };
    unsigned n = 0;
    vpack_cpuset want;
    for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++)
        for (unsigned i = 0; i < groups[g].n; i++) {
            struct agent_thread *t = &groups[g].t[i];
            if (groups[g].kind == VPACK_THREAD_VCPU && !d->vcpu_online[i])
                continue;
            if (only_unknown && t->applied_known)
                continue;
            vpack__dom_free_mask(a, d, t, &want);
            int r = apply_thread(a, d, t, groups[g].kind, &want, pr);
            n += r > 0;
            if (r < 0 && failed)
                (*failed)++;
        }
    return n;
}

/*
 * Threads of domains that vpack does not place keep whatever they have; but
 * after a hotplug cycle the kernel has narrowed them (a thread whose CPU went
 * away stays on the CPUs left, and its cgroup keeps the CPU removed). Their
 * intent is restored: the guest's pin, or the domain's full bound. Only
 * threads whose mask is unknown since the hotplug are touched.
 */
void vpack__act_restore_after_hotplug(struct vpack_agent *a, const struct vpack_plan *plan,
                                      const unsigned *map)
{
    static const struct pin_round pr = {PIN_HOTPLUG, "restore after hotplug", NULL};
    for (unsigned i = 0; i < plan->ndomains; i++) {
        struct agent_dom *d = &a->doms[map[i]];
        if (d->known && plan->domains[i].level < 1 && !d->managed)
            restore_domain(a, d, true, &pr, NULL);
    }
}

void vpack__act_restore_all(struct vpack_agent *a)
{
    static const struct pin_round pr = {PIN_STOP, "agent stopping", NULL};
    unsigned n = 0;
    for (unsigned i = 0; i < a->ndoms; i++) {
        struct agent_dom *d = &a->doms[i];
        if (!d->known || !d->name || (vpack__dom_level(a, d) < 1 && !d->managed))
            continue;
        n += restore_domain(a, d, false, &pr, NULL);
        /*
         * Its request stays in its live metadata for the rest of the run:
         * libvirt (9.0) has no call that removes a live pin, so a full mask
         * given back is an explicit pin to every CPU in the live XML, which
         * a save or a migration would carry as the guest's own (to a larger
         * host: a guest held to this one's CPUs). The request says which
         * pins are the guest's; the hook strips the rest at restore and
         * migrate, and a vpackd started later reads it (issue 28).
         */
    }
    log_info("stopping: restored %u thread masks", n);
}

void vpack__act_forget_applied(struct vpack_agent *a)
{
    for (unsigned i = 0; i < a->ndoms; i++) {
        struct agent_dom *d = &a->doms[i];
        for (unsigned v = 0; v < d->nvcpus; v++)
            d->vcpus[v].applied_known = false;
        d->emulator.applied_known = false;
        for (unsigned t = 0; t < d->niothreads; t++)
            d->iothreads[t].applied_known = false;
    }
}

void vpack__act_check_kernel_soon(struct vpack_agent *a, bool hotplug)
{
    /* A reconnect during a hotplug's checks does not narrow them. */
    a->kernel_checks_unplaced = hotplug || (a->kernel_checks > 0 && a->kernel_checks_unplaced);
    a->kernel_checks = VPACK__KERNEL_CHECKS;
    a->kernel_checks_max = VPACK__KERNEL_CHECKS_MAX;
}

/*
 * Compares thread tid's kernel affinity with t's applied mask, both within
 * the online CPUs; when they differ, logs it and forgets the mask. Returns
 * 1 when they differ; *checked counts the threads compared.
 */
static unsigned check_thread(struct vpack_agent *a, struct agent_dom *d, struct agent_thread *t,
                             enum vpack_thread_kind kind, int tid, unsigned *checked)
{
    vpack_cpuset kernel, want;
    char label[64], has[256], applied[256];
    if (tid <= 0 || !t->applied_known)
        return 0;
    vpack_cpuset_and(&want, &t->applied, &a->online);
    if (vpack_cpuset_empty(&want))
        return 0; /* every CPU it may use is offline: apply_thread() leaves it so too */
    int r = vpack_host_thread_affinity(tid, &kernel);
    if (r < 0) {
        /* A thread that ended: the domain's threads are sorted again at the next read. */
        if (r != -ESRCH)
            log_debug("domain %s: cannot read the affinity of thread %d: %s", d->name, tid,
                      strerror(-r));
        return 0;
    }
    (*checked)++;
    if (vpack_cpuset_equal_within(&kernel, &want, &a->online))
        return 0;
    thread_label(kind, t, label, sizeof(label));
    vpack_cpuset_and(&kernel, &kernel, &a->online);
    vpack_cpuset_format_buf(&kernel, has, sizeof(has));
    vpack_cpuset_format_buf(&want, applied, sizeof(applied));
    log_warn("domain %s: %s (thread %d) may run on CPUs %s by the kernel, but %s by what vpack "
             "applied through libvirt: pinning it again", d->name, label, tid, has, applied);
    t->applied_known = false;
    return 1;
}

/* The checks read the live kernel: never with a fixture tree as the root. */
static bool live_root(const char *root)
{
    return !root || !*root || !strcmp(root, "/");
}

unsigned vpack__act_check_kernel(struct vpack_agent *a)
{
    unsigned n = 0, checked = 0;
    vpack_cpuset now;
    if (!a->kernel_checks)
        return 0;
    a->kernel_checks--;
    a->kernel_checks_max--;
    if (!live_root(a->cfg.sysfs_root)) {
        a->kernel_checks = 0;
        return 0;
    }
    /* A CPU that came or went since the last interval, its event not handled yet: the
     * kernel's masks are of the new set, vpack's of the old. The hotplug's own checks
     * follow (they start again); this interval compares nothing. */
    if (vpack_host_online_cpus(a->cfg.sysfs_root, &now) == 0 &&
        !vpack_cpuset_equal(&now, &a->online)) {
        a->online_check = true;
        return 0;
    }
    for (unsigned i = 0; i < a->ndoms; i++) {
        struct agent_dom *d = &a->doms[i];
        if (!d->known || !d->name || d->refresh ||
            (!a->kernel_checks_unplaced && !d->managed && !vpack__dom_placed(a, d)))
            continue;
        /* The threads libvirt pins by their own id: vCPUs and iothreads (one thread
         * each), and QEMU's main thread for the emulator (its other threads follow
         * the emulator's cgroup, which libvirt's emulator pin writes). */
        for (unsigned v = 0; v < d->nvcpus; v++) {
            struct agent_thread *t = &d->vcpus[v];
            if (d->vcpu_online[v] && t->ntids == 1)
                n += check_thread(a, d, t, VPACK_THREAD_VCPU, t->tids[0].tid, &checked);
        }
        n += check_thread(a, d, &d->emulator, VPACK_THREAD_EMULATOR, d->pid, &checked);
        for (unsigned k = 0; k < d->niothreads; k++) {
            struct agent_thread *t = &d->iothreads[k];
            if (t->ntids == 1)
                n += check_thread(a, d, t, VPACK_THREAD_IOTHREAD, t->tids[0].tid, &checked);
        }
    }
    if (n > 0) {
        /* Pinned again at the next cycle; checked again after it. */
        a->replan = true;
        a->kernel_checks = VPACK__KERNEL_CHECKS < a->kernel_checks_max ? VPACK__KERNEL_CHECKS
                                                                        : a->kernel_checks_max;
        if (!a->kernel_checks)
            log_warn("the kernel still disagrees on %u threads after %u intervals of checks: "
                     "they are pinned once more, and checked again after the next hotplug",
                     n, VPACK__KERNEL_CHECKS_MAX);
    } else if (a->kernel_differ > 0) {
        log_info("the kernel's affinity of every thread checked (%u) is as vpack applied again",
                 checked);
    }
    a->kernel_differ = n;
    if (!a->kernel_checks)
        a->kernel_checks_unplaced = false;
    return n;
}
