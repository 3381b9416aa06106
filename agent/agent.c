// SPDX-License-Identifier: MIT
/*
 * The agent's loop, after irqbalance's scan(): every interval, sample
 * (sample.c: /proc/stat and each QEMU thread's schedstat), plan (the pure
 * policy), act (act.c: pin what differs, LIVE only). An interval whose
 * input stayed within agent.steady_band of the last plan's, with nothing
 * counting down in the policy, plans nothing and calls nothing (the
 * Linux scheduler's idea: skip balancing that cannot change anything).
 * Everything runs on the one libuv loop; libvirt's events only mark domains
 * (domains.c) for a refresh that the next cycle does. vpackd's own threads
 * stay on the plan's wake-up package.
 */
#include "agent-priv.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cgroup.h"
#include "log.h"
#include "virt-event.h"

/* own_package when the affinity must be set again whatever the package. */
#define OWN_AGAIN (-2)

int vpack__errmsg(char **errmsg, int r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(errmsg, fmt, ap) < 0)
        *errmsg = NULL;
    va_end(ap);
    return r;
}

/* Reads the online CPUs and the topology on them. Returns 0 or -errno with *errmsg. */
static int load_topology(struct vpack_agent *a, char **errmsg)
{
    struct vpack_topology *t = NULL;
    vpack_cpuset online;
    int r = vpack_host_online_cpus(a->cfg.sysfs_root, &online);
    if (r < 0) {
        vpack__errmsg(errmsg, r, "cannot read the online CPUs: %s", strerror(-r));
        return r;
    }
    r = vpack_topology_load(a->cfg.topology, a->cfg.has_reserved ? &a->cfg.reserved_cpus : NULL,
                            &online, &t, errmsg);
    if (r < 0)
        return r;
    vpack_topology_free(a->topo);
    a->topo = t;
    a->online = online;
    return 0;
}

/*
 * The partitions the guests' groups are in, each once, NULL-terminated (a
 * custom libvirt <partition> as well as machine or machine.slice); the
 * caller frees it with free_partitions(). NULL when there are none or
 * memory is short: the walks then cover libvirt's default partitions.
 */
static char **guest_partitions(const struct vpack_agent *a)
{
    char **list = calloc((size_t)a->ndoms + 1, sizeof(*list));
    unsigned n = 0;
    for (unsigned i = 0; list && i < a->ndoms; i++) {
        char *p = vpack_cgroup_partition_of(&a->cgroup, &a->doms[i].cg);
        for (unsigned j = 0; p && j < n; j++)
            if (!strcmp(list[j], p)) {
                free(p);
                p = NULL;
            }
        if (p)
            list[n++] = p;
    }
    return list;
}

static void free_partitions(char **list)
{
    for (unsigned i = 0; list && list[i]; i++)
        free(list[i]);
    free(list);
}

/*
 * cgroup v2 after a CPU came or went: the kernel gives a CPU that comes back
 * to every group whose cpuset.cpus allows it, unless a partition is invalid.
 * Every partition a guest is in is checked, not only libvirt's defaults.
 * vpack writes nothing there (libvirt's groups are systemd's or libvirt's to
 * configure); it says which group did not get a CPU back, and counts it.
 */
static void check_effective(struct vpack_agent *a)
{
    struct vpack_cgroup_stale *st = NULL;
    unsigned n = 0;
    char **parts = guest_partitions(a);
    int r = vpack_cgroup_check_effective(a->cfg.sysfs_root, &a->cgroup, &a->online,
                                         (const char *const *)parts, &st, &n);
    free_partitions(parts);
    if (r < 0) {
        log_warn("cannot check the cgroup v2 cpusets: %s", strerror(-r));
        return;
    }
    for (unsigned i = 0; i < n; i++) {
        char cpus[256];
        vpack_cpuset_format_buf(&st[i].missing, cpus, sizeof(cpus));
        log_warn("cgroup %s: CPUs %s are online and allowed by its cpuset.cpus, but not in its "
                 "cpuset.cpus.effective (partition: %s): its threads cannot run there and pins "
                 "to them fail; vpack does not write cgroup v2 files", st[i].group, cpus,
                 st[i].partition ? st[i].partition : "none");
    }
    a->ctr.cgroup_stale += n;
    vpack_cgroup_stale_free(st, n);
}

/*
 * cgroup v1: gives libvirt's cpuset groups back what CPU hotplug took from
 * them (CPUs that went offline and are back), and notes what each has now.
 */
static void walk_cpusets(struct vpack_agent *a)
{
    unsigned fixed = 0;
    char **parts = guest_partitions(a);
    int r = vpack_cgroup_repair(a->cfg.sysfs_root, &a->cpusets, &a->online, &a->cpus_gone,
                                (const char *const *)parts, &fixed);
    free_partitions(parts);
    a->cpusets_look = false;
    if (r < 0)
        log_warn("cannot repair the cpuset cgroups: %s", strerror(-r));
    else
        vpack_cpuset_zero(&a->cpus_gone);
    if (fixed) {
        a->ctr.cgroup_repairs += fixed;
        log_info("repaired %u cpuset cgroups after a CPU came back", fixed);
        /* A write to a group's cpuset.cpus sets the affinity of every task in it. */
        vpack__act_check_kernel_soon(a, true);
    }
}

/*
 * Without hotplug events (no netlink socket, or the socket overflowed and
 * events were lost): the online CPUs as sysfs has them now; a change is
 * handled as an event would have been.
 */
static void check_online(struct vpack_agent *a)
{
    vpack_cpuset now, gone;
    char list[256];
    a->online_check = false;
    if (vpack_host_online_cpus(a->cfg.sysfs_root, &now) < 0 || vpack_cpuset_equal(&now, &a->online))
        return;
    vpack_cpuset_andnot(&gone, &a->online, &now);
    vpack_cpuset_or(&a->cpus_gone, &a->cpus_gone, &gone);
    vpack_cpuset_format_buf(&now, list, sizeof(list));
    log_info("online CPUs changed to %s (read from sysfs)", list);
    a->ctr.hotplug_events++;
    a->hotplug_pending = true;
}

/*
 * After a CPU came or went: re-read the topology, repair libvirt's v1 cpusets
 * (check the v2 ones), re-pin all.
 */
static void handle_hotplug(struct vpack_agent *a)
{
    char *err = NULL;
    a->hotplug_pending = false;
    if (load_topology(a, &err) < 0) {
        log_err("cannot re-read the topology: %s", err ? err : "?");
        free(err);
        return;
    }
    if (a->cgroup.cpuset == VPACK_CGROUP_V2)
        check_effective(a);
    else
        walk_cpusets(a);
    /* The kernel moved threads and libvirt's view may be stale: pin everything again,
     * then see that the kernel has what was pinned. */
    vpack__act_forget_applied(a);
    vpack__act_check_kernel_soon(a, true);
    a->replan = true;
    a->own_package = OWN_AGAIN; /* the package's CPUs may have changed */
    char *cpus = vpack_cpuset_format(&a->online);
    log_info("CPUs online now: %s; re-applying guest pins and the plan", cpus ? cpus : "?");
    free(cpus);
}

/*
 * Plans on snap with the policy state pstate; timed and counted unless it
 * is a dry run (which status and the metrics never see).
 */
static int plan(struct vpack_agent *a, const struct vpack_snapshot *snap,
                struct vpack_policy_state *pstate, bool dry_run, struct vpack_plan **out)
{
    uint64_t t0 = uv_hrtime();
    int r = vpack_plan_compute(a->topo, &a->cfg.policy, snap, pstate, out);
    if (r < 0)
        log_err("planning failed: %s", strerror(-r));
    else if (!dry_run)
        a->ctr.plans++;
    if (!dry_run)
        vpack_prom_observe(&a->plan_hist, (double)(uv_hrtime() - t0) / 1e9);
    return r;
}

/* Drops the dry run answer kept for the interval (a real plan changed what it would be). */
static void dry_forget(struct vpack_agent *a)
{
    vpack_moves_free(a->dry.moves, a->dry.nmoves);
    a->dry.moves = NULL;
    a->dry.nmoves = 0;
    a->dry.valid = false;
}

/* A copy of n moves into *out. Returns 0 or -ENOMEM. */
static int moves_dup(const struct vpack_move *m, unsigned n, struct vpack_move **out)
{
    struct vpack_move *c = n ? calloc(n, sizeof(*c)) : NULL;
    *out = NULL;
    if (n && !c)
        return -ENOMEM;
    for (unsigned i = 0; i < n; i++) {
        c[i] = (struct vpack_move){strdup(m[i].domain), strdup(m[i].threads), strdup(m[i].from),
                                   strdup(m[i].to), strdup(m[i].reason)};
        if (!c[i].domain || !c[i].threads || !c[i].from || !c[i].to || !c[i].reason) {
            vpack_moves_free(c, i + 1);
            return -ENOMEM;
        }
    }
    *out = c;
    return 0;
}

/* Counts a plan that moved something, by its why. */
static void count_rebalance(struct vpack_agent *a, const struct vpack_plan *p)
{
    a->ctr.rebalances++;
    a->rebalances[p->why < VPACK_WHY_N ? p->why : VPACK_WHY_HOLD]++;
    log_info("plan: %s", p->reason);
}

/*
 * Brings the domain table up to date, then snapshot -> plan -> act. A dry
 * run plans on a copy of the policy state, pins nothing and keeps neither
 * its plan nor its snapshot: status, explain and the metrics show the
 * agent's own plans only.
 */
static int cycle(struct vpack_agent *a, const struct vpack__act_out *out)
{
    struct vpack_snapshot *snap = NULL;
    struct vpack_policy_state *pstate = a->pstate;
    struct vpack_plan *p = NULL;
    unsigned *map = NULL;
    int r;

    if (!vpack_virt_connected(a->virt))
        return -ENOTCONN;
    if (a->hotplug_pending && !out->dry_run)
        handle_hotplug(a);
    if (a->need_list)
        vpack__doms_list_running(a);
    vpack__doms_refresh(a);
    if (a->cpusets_look && !out->dry_run && a->cgroup.cpuset == VPACK_CGROUP_V1)
        walk_cpusets(a);

    if (out->dry_run && !(pstate = vpack_policy_state_dup(a->pstate))) {
        r = -ENOMEM;
        goto cleanup;
    }
    if ((r = vpack__sample_snapshot(a, &snap, &map)) < 0 ||
        (r = plan(a, snap, pstate, out->dry_run, &p)) < 0)
        goto cleanup;
    if (!out->dry_run)
        a->replan = false; /* a pin that fails below leaves its mask unknown: act again */
    unsigned moved = vpack__act(a, p, map, out);
    if (out->dry_run)
        goto cleanup;
    vpack__act_restore_after_hotplug(a, p, map);
    if (moved > 0)
        count_rebalance(a, p);
    dry_forget(a);
    vpack_plan_free(a->plan);
    a->plan = p;
    p = NULL;
    vpack_snapshot_free(a->snap);
    a->snap = snap;
    snap = NULL;
cleanup:
    if (pstate != a->pstate)
        vpack_policy_state_free(pstate);
    vpack_plan_free(p);
    vpack_snapshot_free(snap);
    free(map);
    return r;
}

/*
 * vpackd's own threads (the loop's, libvirt's, the metrics endpoint's: all
 * of /proc/self/task) follow the plan's wake-up package, within the
 * affinity vpackd started with, so that its own work does not wake a
 * parked package. Set again when the wake-up package changes and when a
 * thread was started or ended since (own_threads_changed(): a thread
 * started by one not yet set, or between the listing and the set, would
 * otherwise stay free); the start affinity comes back when the plan names
 * none (restrictions lifted) and at stop. why is for the log.
 */
static void own_affinity(struct vpack_agent *a, int package, const char *why)
{
    vpack_cpuset m;
    int idx = package >= 0 ? vpack_topology_package_index(a->topo, package) : -1;
    if (package == a->own_package || (!a->own_known && package < 0))
        return;
    if (!a->own_known) {
        int r = vpack_host_own_affinity(&a->own_mask);
        if (r < 0) {
            log_warn("cannot read vpackd's CPU affinity: %s; its threads stay where they are",
                     strerror(-r));
            a->own_package = package;
            return;
        }
        a->own_known = true;
    }
    m = a->own_mask;
    if (idx >= 0)
        vpack_cpuset_and(&m, &m, &a->topo->packages[idx].cpus);
    if (idx < 0 || vpack_cpuset_empty(&m)) {
        m = a->own_mask;
        package = -1;
    }
    /* The agent's threads are its own process's: always the live /proc. */
    if (a->own_task_fd < 0) {
        int fd = vpack_host_task_dir_open(NULL, (int)getpid());
        a->own_task_fd = fd < 0 ? -1 : fd;
    }
    int n = vpack_host_set_own_affinity(NULL, &m);
    /* Counted after the set: a thread started during it is set at the next interval. */
    a->own_nthreads = a->own_task_fd >= 0 ? vpack_host_task_count(a->own_task_fd) : -1;
    char cpus[256];
    vpack_cpuset_format_buf(&m, cpus, sizeof(cpus));
    if (n < 0)
        log_warn("cannot set vpackd's CPU affinity to %s: %s", cpus, strerror(-n));
    else if (package >= 0)
        log_info("%s: vpackd's %d threads follow wake-up package %d (CPUs %s)", why, n, package,
                 cpus);
    else
        log_info("%s: vpackd's %d threads on CPUs %s again", why, n, cpus);
    a->own_package = package;
}

/*
 * True when vpackd's threads are confined and their number changed since
 * they were set: one fstat() of the held /proc/self/task. Asked only in the
 * intervals that read the domains (at least every VPACK__LIGHT_MAX): a
 * light interval makes one system call, the read of /proc/stat, and a
 * thread vpackd starts (libuv's pool, at a reload) is confined that much
 * later.
 */
static bool own_threads_changed(const struct vpack_agent *a)
{
    return a->own_package >= 0 && a->own_task_fd >= 0 &&
           vpack_host_task_count(a->own_task_fd) != a->own_nthreads;
}

/*
 * True when this interval need not plan (vpack__sample_steady); the
 * policy's clock still advances. Out of memory plans, to be safe.
 */
static bool steady(struct vpack_agent *a)
{
    struct vpack_snapshot *snap = NULL;
    unsigned *map = NULL;
    if (a->replan || !a->plan || vpack__sample_snapshot(a, &snap, &map) < 0)
        return false;
    bool s = vpack__sample_steady(a, snap);
    vpack_snapshot_free(snap);
    free(map);
    if (s) {
        a->ctr.plans_skipped++;
        vpack_policy_state_advance(a->pstate, a->cfg.interval_ms);
    }
    return s;
}

/*
 * Adds the time since `since` to phase p (uv_hrtime(): the vDSO's clock, no
 * system call); returns now.
 */
static uint64_t phase_end(struct vpack_agent *a, enum agent_phase p, uint64_t since)
{
    uint64_t now = uv_hrtime();
    a->phase_ns[p] += now - since;
    return now;
}

uint64_t vpack_agent_epoch(void *agent)
{
    return ((const struct vpack_agent *)agent)->epoch;
}

void vpack_agent_changed(struct vpack_agent *a)
{
    a->epoch++;
}

void vpack_agent_hold(struct vpack_agent *a, int level, double seconds)
{
    if (seconds <= 0) {
        if (a->hold_level >= 0)
            log_info("hold-level %d dropped: every domain at its own level again", a->hold_level);
        a->hold_level = -1;
    } else {
        log_info("hold-level %d for %.1f s: every domain planned at level %d at most", level,
                 seconds, level);
        a->hold_level = level;
        a->hold_until_ms = uv_now(a->loop) + (uint64_t)(seconds * 1000 + 0.5);
    }
    a->replan = true;
}

/* A hold whose lease ran out drops by itself: a killed client cannot keep it. */
static void hold_expire(struct vpack_agent *a)
{
    if (a->hold_level < 0 || uv_now(a->loop) < a->hold_until_ms)
        return;
    log_info("hold-level %d: its lease ran out: every domain at its own level again",
             a->hold_level);
    a->hold_level = -1;
    a->replan = true;
}

/*
 * libvirt's socket is read at the tick (vpack_virt_event_defer_reads()):
 * a domain event only sets what the next tick acts on, and libvirtd's
 * keepalive probe, every 5 s, then costs vpackd no wake-up of its own
 * (issue 24: a fifth of its wake-ups with no guest). Only with an interval
 * of at most 1 s: an answer read up to an interval late must still reach
 * libvirtd before vpackd's own probe after 7 s of silence (virt.c), and an
 * event must not wait longer for the tick than it did for the plan.
 */
#define DEFER_READS_MAX_MS 1000

static void defer_libvirt_reads(const struct vpack_agent *a)
{
    vpack_virt_event_defer_reads(!a->stopping && a->cfg.interval_ms <= DEFER_READS_MAX_MS);
}

static void on_tick(uv_timer_t *timer)
{
    static const struct vpack__act_out out = {false, NULL, NULL};
    struct vpack_agent *a = timer->data;
    if (a->stopping)
        return;
    vpack_virt_event_check();
    hold_expire(a);
    uint64_t t0 = uv_hrtime(), t;
    double last = a->tick_ns ? (double)(t0 - a->tick_ns) : 0;
    a->tick_ns = t0;
    a->ctr.samples++;
    a->epoch++;
    if (a->watch_online || a->online_check)
        check_online(a);
    vpack__sample_cpus(a);
    t = phase_end(a, PHASE_CPUS, t0);
    if (!vpack_virt_connected(a->virt))
        return;
    if (a->need_list)
        vpack__doms_list_running(a);
    /* A light interval reads /proc/stat alone and is steady (vpack__sample_read()). */
    enum vpack__read rd = vpack__sample_read(a);
    bool light = rd == READ_LIGHT || rd == READ_WAIT, skip = light;
    double waited = a->wait_ns;
    a->wait_ns = rd == READ_WAIT ? last : 0;
    if (light) {
        a->light_streak++;
        a->ctr.reads_skipped++;
        a->ctr.plans_skipped++;
        vpack_policy_state_advance(a->pstate, a->cfg.interval_ms);
    } else {
        /* After light intervals, a read that something moved: the move is in the last one,
         * or in the last two where the one before waited to see it last. */
        bool step = a->light_streak > 0 && rd == READ_MOVED;
        a->light_streak = 0;
        vpack__sample_domains(a, step ? last + waited : 0, rd == READ_DUE);
    }
    t = phase_end(a, PHASE_DOMAINS, t);
    if (!light)
        skip = steady(a);
    t = phase_end(a, PHASE_STEADY, t);
    if (!skip) {
        int r = cycle(a, &out);
        if (r < 0 && r != -ENOTCONN)
            log_warn("cycle failed: %s", strerror(-r));
        t = phase_end(a, PHASE_PLAN, t);
    }
    if (a->kernel_checks > 0) {
        vpack__act_check_kernel(a);
        t = phase_end(a, PHASE_PLAN, t);
    }
    const char *why = "wake-up package";
    if (!light && own_threads_changed(a)) {
        a->own_package = OWN_AGAIN;
        why = "threads started or ended";
    }
    own_affinity(a, a->plan && !a->plan->lifted ? a->plan->wakeup_package : -1, why);
    phase_end(a, PHASE_OWN, t);
    vpack_prom_observe(&a->cycle_hist, (double)(uv_hrtime() - t0) / 1e9);
}

static void on_connected(void *opaque)
{
    struct vpack_agent *a = opaque;
    a->ctr.connects++;
    a->epoch++;
    a->need_list = true;
    a->replan = true;
    a->prev_ns = 0;
    /* The refresh takes libvirt's view of every pin as applied: see that the kernel agrees. */
    vpack__act_check_kernel_soon(a, false);
    for (unsigned i = 0; i < a->ndoms; i++) {
        a->doms[i].refresh = true;
        a->doms[i].have_prev_cpu = false;
        a->doms[i].read_ns = 0;
        a->doms[i].usage = (struct vpack_usage_watch){0};
        for (unsigned v = 0; v < a->doms[i].nvcpus; v++)
            a->doms[i].vcpus[v].have_prev = false;
    }
    log_info("connected to libvirt (%s)", a->cfg.libvirt_uri);
}

static void on_disconnected(void *opaque)
{
    ((struct vpack_agent *)opaque)->epoch++;
    log_warn("lost the connection to libvirt; reconnecting");
}

static void on_domain_event(void *opaque, const char *uuid, enum vpack_virt_event ev)
{
    struct vpack_agent *a = opaque;
    struct agent_dom *d;
    a->epoch++;
    switch (ev) {
    case VPACK_VIRT_STARTED:
    case VPACK_VIRT_METADATA:
    case VPACK_VIRT_DEFINED:
        d = vpack__dom_find(a, uuid);
        if (d)
            d->refresh = true;
        else if (ev == VPACK_VIRT_STARTED)
            vpack__dom_add(a, uuid);
        break;
    case VPACK_VIRT_STOPPED:
        vpack__dom_remove(a, uuid);
        break;
    }
}

static void on_hotplug(void *opaque, int cpu, int online)
{
    struct vpack_agent *a = opaque;
    a->epoch++;
    if (cpu < 0) {
        log_warn("CPU hotplug events were lost (the uevent socket overflowed): reading the "
                 "online CPUs instead");
        a->online_check = true;
        return;
    }
    a->ctr.hotplug_events++;
    log_info("CPU %d went %s", cpu, online ? "online" : "offline");
    if (!online)
        vpack_cpuset_set(&a->cpus_gone, (unsigned)cpu);
    a->hotplug_pending = true;
}

/* A deep copy of cfg into a->cfg (the caller keeps its own). Returns 0 or -ENOMEM. */
static int copy_config(struct vpack_agent *a, const struct vpack_config *cfg)
{
    a->cfg = *cfg;
    /* Nothing of cfg's may stay shared, even when a copy below fails. */
    a->cfg.rules = (struct vpack_rules){0};
    if (vpack_rules_copy(&a->cfg.rules, &cfg->rules) < 0)
        return -ENOMEM;
    a->cfg.libvirt_uri = strdup(cfg->libvirt_uri);
    a->cfg.topology = strdup(cfg->topology);
    a->cfg.state_dir = strdup(cfg->state_dir);
    a->cfg.sysfs_root = strdup(cfg->sysfs_root);
    a->cfg.log_level = strdup(cfg->log_level);
    a->cfg.socket_path = strdup(cfg->socket_path);
    a->cfg.control_group = strdup(cfg->control_group);
    a->cfg.metrics_listen = strdup(cfg->metrics_listen);
    a->cfg.metrics_web_config = strdup(cfg->metrics_web_config);
    if (!a->cfg.libvirt_uri || !a->cfg.topology || !a->cfg.state_dir || !a->cfg.sysfs_root ||
        !a->cfg.log_level || !a->cfg.socket_path || !a->cfg.control_group ||
        !a->cfg.metrics_listen || !a->cfg.metrics_web_config)
        return -ENOMEM;
    return 0;
}

static void agent_free(struct vpack_agent *a)
{
    for (unsigned i = 0; i < a->ndoms; i++)
        vpack__dom_free(&a->doms[i]);
    free(a->doms);
    vpack_host_held_close(&a->proc_stat);
    free(a->prev_times);
    free(a->cpu_busy);
    free(a->cpu_busy_now);
    free(a->cpu_busy_last);
    free(a->cpu_noise);
    free(a->cpu_band);
    if (a->own_task_fd >= 0)
        close(a->own_task_fd);
    vpack_plan_free(a->plan);
    vpack_snapshot_free(a->snap);
    dry_forget(a);
    vpack_policy_state_free(a->pstate);
    vpack_topology_free(a->topo);
    vpack_cgroup_host_clear(&a->cgroup);
    vpack_cgroup_memo_clear(&a->cpusets);
    vpack_config_clear(&a->cfg);
    if (a->records_fd >= 0)
        close(a->records_fd);
    free(a);
}

/*
 * vpackd holds a few files open per guest thread (their schedstat): the
 * soft limit on descriptors goes up to the hard one, so that a host with
 * hundreds of guests does not run out.
 */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            log_warn("cannot raise the open files limit: %s", strerror(errno));
    }
}

int vpack_agent_start(uv_loop_t *loop, const struct vpack_config *cfg, struct vpack_agent **out,
                      char **errmsg)
{
    static const struct vpack_virt_cbs cbs = {
        .connected = on_connected,
        .disconnected = on_disconnected,
        .domain_event = on_domain_event,
    };
    struct vpack_agent *a = calloc(1, sizeof(*a));
    int r = -ENOMEM;

    *errmsg = NULL;
    if (!a)
        return -ENOMEM;
    a->loop = loop;
    a->own_package = -1;
    a->hold_level = -1;
    a->own_task_fd = -1;
    a->records_fd = -1;
    a->proc_stat = (struct vpack_host_held)VPACK_HOST_HELD_INIT;
    raise_nofile();
    if ((r = copy_config(a, cfg)) < 0 || (r = vpack__records_open(a, errmsg)) < 0 ||
        (r = load_topology(a, errmsg)) < 0 ||
        (r = vpack_cgroup_detect(a->cfg.sysfs_root, &a->cgroup)) < 0)
        goto fail;
    log_info("cgroup %s: cpuset %s, memory %s", vpack_cgroup_version(&a->cgroup),
             vpack_cgroup_ver_name(a->cgroup.cpuset), vpack_cgroup_ver_name(a->cgroup.memory));
    if (!(a->pstate = vpack_policy_state_new())) {
        r = -ENOMEM;
        goto fail;
    }
    vpack__sample_cpus(a);
    /* What libvirt's cpuset groups have now: hotplug gives back only that. */
    if (a->cgroup.cpuset == VPACK_CGROUP_V1)
        walk_cpusets(a);
    r = vpack_hotplug_start(loop, on_hotplug, a, &a->hotplug);
    if (r < 0) {
        log_warn("cannot watch CPU hotplug events: %s; reading the online CPUs each interval "
                 "instead", strerror(-r));
        a->watch_online = true;
    }
    r = vpack_virt_new(loop, a->cfg.libvirt_uri, &cbs, a, &a->virt);
    if (r < 0) {
        vpack__errmsg(errmsg, r, "cannot start the libvirt adapter: %s", strerror(-r));
        goto fail;
    }
    uv_timer_init(loop, &a->tick);
    a->tick.data = a;
    uv_timer_start(&a->tick, on_tick, a->cfg.interval_ms, a->cfg.interval_ms);
    defer_libvirt_reads(a);
    *out = a;
    return 0;
fail:
    if (!*errmsg)
        vpack__errmsg(errmsg, r, "%s", strerror(-r));
    if (a->hotplug)
        vpack_hotplug_stop(a->hotplug);
    agent_free(a);
    return r;
}

int vpack_agent_reload(struct vpack_agent *a, const struct vpack_config *cfg, char **errmsg)
{
    char *topo = strdup(cfg->topology);
    char *level = strdup(cfg->log_level);
    struct vpack_config old = a->cfg;
    struct vpack_rules rules;
    *errmsg = NULL;
    if (!topo || !level || vpack_rules_copy(&rules, &cfg->rules) < 0) {
        free(topo);
        free(level);
        return -ENOMEM;
    }
    a->cfg.topology = topo;
    a->cfg.has_reserved = cfg->has_reserved;
    a->cfg.reserved_cpus = cfg->reserved_cpus;
    int r = load_topology(a, errmsg);
    if (r < 0) {
        a->cfg.topology = old.topology;
        a->cfg.has_reserved = old.has_reserved;
        a->cfg.reserved_cpus = old.reserved_cpus;
        free(topo);
        free(level);
        vpack_rules_clear(&rules);
        return r;
    }
    free(old.topology);
    a->cfg.policy = cfg->policy;
    a->cfg.smoothing_rise = cfg->smoothing_rise;
    a->cfg.smoothing_fall = cfg->smoothing_fall;
    a->cfg.steady_band = cfg->steady_band;
    a->replan = true;
    a->own_package = OWN_AGAIN;
    a->cfg.keep_placement = cfg->keep_placement;
    /* The rules are matched against each domain's XML: read them all again. */
    vpack_rules_clear(&a->cfg.rules);
    a->cfg.rules = rules;
    for (unsigned i = 0; i < a->ndoms; i++)
        a->doms[i].refresh = true;
    if (cfg->interval_ms != a->cfg.interval_ms) {
        a->cfg.interval_ms = cfg->interval_ms;
        uv_timer_start(&a->tick, on_tick, a->cfg.interval_ms, a->cfg.interval_ms);
        defer_libvirt_reads(a);
    }
    free(a->cfg.log_level);
    a->cfg.log_level = level;
    vpack_log_set_level(cfg->log_level);
    a->epoch++;
    log_info("configuration reloaded (%u power policy rules)", a->cfg.rules.n);
    return 0;
}

static void on_tick_closed(uv_handle_t *h)
{
    agent_free(h->data);
}

void vpack_agent_stop(struct vpack_agent *a)
{
    if (!a || a->stopping)
        return;
    a->stopping = true;
    defer_libvirt_reads(a); /* no tick from here on: libvirt's socket is the loop's again */
    if (!a->cfg.keep_placement && vpack_virt_connected(a->virt)) {
        /* Re-read what is applied, so nothing pinned by us is missed. */
        for (unsigned i = 0; i < a->ndoms; i++)
            if (a->doms[i].refresh)
                vpack__dom_refresh(a, &a->doms[i]);
        vpack__act_restore_all(a);
    } else if (a->cfg.keep_placement) {
        log_info("stopping: keeping the current placement (keep_placement)");
    } else {
        log_warn("stopping without libvirt: the threads vpack narrowed stay so until vpackd "
                 "starts again (their records say so, and it releases them then)");
    }
    uv_timer_stop(&a->tick);
    own_affinity(a, -1, "stopping");
    if (a->hotplug)
        vpack_hotplug_stop(a->hotplug);
    vpack_virt_free(a->virt);
    a->virt = NULL;
    uv_close((uv_handle_t *)&a->tick, on_tick_closed);
}

/*
 * A dry run: planned at most once per interval. Dry runs that come within
 * an interval of the one that planned (and before the next real plan) get
 * its moves: a burst of them, from any number of clients, costs one plan.
 */
static int dry_rebalance(struct vpack_agent *a, struct vpack_move **moves, unsigned *nmoves)
{
    uint64_t now = uv_now(a->loop);
    if (!a->dry.valid || now - a->dry.at_ms >= a->cfg.interval_ms) {
        const struct vpack__act_out out = {true, moves, nmoves};
        int r = cycle(a, &out);
        if (r < 0)
            return r;
        dry_forget(a);
        if (moves_dup(*moves, *nmoves, &a->dry.moves) == 0) {
            a->dry.nmoves = *nmoves;
            a->dry.at_ms = now;
            a->dry.valid = true;
        }
        log_debug("dry run: planned (%u moves); dry runs in the next %u ms get the same",
                  *nmoves, a->cfg.interval_ms);
        return 0;
    }
    int r = moves_dup(a->dry.moves, a->dry.nmoves, moves);
    if (r == 0)
        *nmoves = a->dry.nmoves;
    return r;
}

int vpack_agent_rebalance(struct vpack_agent *a, bool dry_run, struct vpack_move **moves,
                          unsigned *nmoves, char **errmsg)
{
    const struct vpack__act_out out = {dry_run, moves, nmoves};
    *moves = NULL;
    *nmoves = 0;
    *errmsg = NULL;
    int r = !vpack_virt_connected(a->virt) ? -ENOTCONN
            : dry_run                       ? dry_rebalance(a, moves, nmoves)
                                            : cycle(a, &out);
    if (r == -ENOTCONN) {
        if (!(*errmsg = strdup("not connected to libvirt")))
            r = -ENOMEM;
    } else if (r < 0) {
        vpack__errmsg(errmsg, r, "%s", strerror(-r));
    }
    return r;
}
