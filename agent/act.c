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
    if (kind == VPACK_THREAD_EMULATOR)
        snprintf(label, sizeof(label), "emulator");
    else
        snprintf(label, sizeof(label), "%s %d", kind_name(kind), t->id);
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
        struct pin_round pr = {PIN_PLAN, pd->reason, out};
        changed += act_domain(a, d, pd, &pr);
        if (!out->dry_run && pd->level >= 1 && !d->managed) {
            d->managed = true;
            /* Kept in its record: after any restart its threads are checked. */
            vpack__dom_narrowed(a, d);
        }
    }
    return changed;
}

/*
 * Gives d's threads their unrestricted mask (the guest's pin, or the
 * domain's bound, or every online CPU); only those whose applied mask is
 * unknown when only_unknown. Returns the number moved.
 */
static unsigned restore_domain(struct vpack_agent *a, struct agent_dom *d, bool only_unknown,
                               const struct pin_round *pr)
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
            n += apply_thread(a, d, t, groups[g].kind, &want, pr) > 0;
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
            restore_domain(a, d, true, &pr);
    }
}

void vpack__act_restore_all(struct vpack_agent *a)
{
    static const struct pin_round pr = {PIN_STOP, "agent stopping", NULL};
    unsigned n = 0;
    for (unsigned i = 0; i < a->ndoms; i++) {
        struct agent_dom *d = &a->doms[i];
        if (d->known && d->name && (vpack__dom_level(a, d) >= 1 || d->managed))
            n += restore_domain(a, d, false, &pr);
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
