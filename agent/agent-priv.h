/* SPDX-License-Identifier: MIT */
/*
 * The agent's private state, shared by the files of its pipeline:
 *
 *   domains.c  the domain table: refresh from libvirt, the hook's records
 *   sample.c   observe: CPU and domain load, the policy's snapshot
 *   act.c      apply a plan's pins; restore at stop and after hotplug
 *   views.c    status, explain, snapshot and metrics as JSON
 *   agent.c    the loop: cycle = sample -> plan -> act, timers, reload
 *
 * Nothing outside agent/ includes this; agent.h is the public interface.
 */
#ifndef VPACK_AGENT_PRIV_H
#define VPACK_AGENT_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "agent.h"
#include "cgroup.h"
#include "host.h"
#include "virt.h"
#include "vpack/counters.h"
#include "vpack/cpuset.h"
#include "vpack/domxml.h"
#include "vpack/proc.h"
#include "vpack/qemu-threads.h"
#include "vpack/rules.h"
#include "vpack/snapshot.h"
#include "vpack/topology.h"

/*
 * Where a thread's load or a domain's memory placement was read from
 * (explain's "source"): the schedstat of the thread(s) QEMU named,
 * libvirt's cgroup group, libvirt's bulk stats, or (the emulator, with
 * libvirt's stats) what the domain's cpu.time leaves.
 */
enum load_source { SRC_NONE, SRC_NAME, SRC_CGROUP_V1, SRC_CGROUP_V2, SRC_LIBVIRT, SRC_REMAINDER };

/*
 * One QEMU thread and its schedstat file, held open (adapters/host.h); fd
 * -1: not open. last: its last reading, for its agent_thread's counters.
 */
struct agent_tid {
    int tid;
    int fd;
    struct vpack_thread_reading last;
};

struct agent_thread {
    int id;
    bool has_pin;          /* the guest asked for this pin */
    vpack_cpuset pin;
    bool applied_known;    /* applied holds the live mask */
    vpack_cpuset applied;
    bool have_prev;
    uint64_t prev_time, prev_delay; /* ns run and waiting, summed over its threads */
    double util, delay;    /* smoothed */
    double util_now, delay_now; /* the last reading alone (0: none) */
    enum load_source source; /* where prev_time was read: readings of two sources do not subtract */
    /* The metrics' counters over this run of the domain (vpack/counters.h): its threads
     * read by name count one by one (their tids' last readings), other sources by the
     * growth of their sums; zeroed when a new run starts (domains.c). */
    struct vpack_thread_time time;
    /* Its threads by QEMU's names: one for a vCPU or an iothread (none: not
     * found), every other thread of QEMU for the emulator. */
    unsigned ntids;
    struct agent_tid *tids;
};

/* One run of a domain: its QEMU process (a pid is reused; a pid and its start time are not). */
struct agent_run {
    int pid;               /* 0: not known */
    uint64_t start;        /* clock ticks after boot */
};

/* Where a domain's request comes from (records.c). */
enum req_origin { REQ_NONE, REQ_HOOK, REQ_LIVE };

/* vpackd's own part of a record file. */
struct record_meta {
    struct agent_run run;  /* pid 0: not bound to a run yet */
    enum req_origin origin;
    bool narrowed;         /* vpack pinned some thread of that run narrower than its request */
};

struct agent_dom {
    char uuid[37];
    char *name;
    int level;             /* the domain's own (live metadata), else a rule's; -1: neither */
    char *rule;            /* the rule that gave level (NULL: its own element, or none) */
    bool persistent;
    bool known;            /* requested pins and bound are known */
    struct vpack_domxml *req; /* what this run asked for (records.c); NULL: not known */
    enum req_origin origin;   /* where req came from */
    struct agent_run run;  /* the run req belongs to */
    bool has_bound;
    bool bound_auto;       /* bound is numad's placement (placement='auto'), not <vcpu cpuset> */
    vpack_cpuset bound;    /* <vcpu cpuset> as the guest asked, or the live automatic placement */
    unsigned nvcpus;       /* vcpu maximum */
    struct agent_thread *vcpus;
    bool *vcpu_online;
    struct agent_thread emulator;
    unsigned niothreads;
    struct agent_thread *iothreads;
    bool have_prev_cpu;
    uint64_t prev_cpu_time;
    bool refresh;          /* re-read XML and live pins at the next cycle */
    bool managed;          /* vpack restricted it at some point of this run (kept in its record) */
    bool marked;           /* its live metadata holds its request (urn:vpack:request:1), by this vpackd */
    bool mark_failed;      /* the last try to write that failed (logged once) */
    unsigned mark_tries;   /* failed tries in a row */
    uint64_t mark_next;    /* ... the next try is due at this sample (backing off) */
    char *reason;          /* the policy's last word on it */
    unsigned npackages;
    int *packages;         /* the packages the last plan placed it on */
    struct vpack_cgroup_domain cg; /* its groups: memory.numa_stat, the iothreads' fallback */
    int pid;               /* QEMU's pid */
    int task_fd;           /* QEMU's /proc/PID/task, held: its thread count; -1: not open */
    int stat_fd;           /* QEMU's /proc/PID/stat, held: its CPU time and thread count; -1 */
    struct vpack_usage_watch usage; /* that CPU time, for a due read (sample.c) */
    uint64_t read_ns;      /* when its threads were last read; 0: not since (re)connecting */
    int nthreads;          /* QEMU's threads when they were last sorted */
    bool rescan_threads;   /* a thread is gone or new: sort QEMU's threads again */
    bool stats_libvirt;    /* a vCPU has no thread of its own by name: libvirt's stats read it */
    unsigned nmem;
    struct vpack_mem_share *mem; /* share of its memory per NUMA node */
    uint64_t mem_bytes;    /* its memory on the page lists, from memory.numa_stat */
    enum load_source mem_source; /* SRC_CGROUP_V1/V2 when mem was read, else SRC_NONE */
    int mem_error;         /* -errno of the last failed read of memory.numa_stat, or 0 */
};

/* Why a pin was made, for the metrics ("reason" label). */
enum pin_why { PIN_PLAN, PIN_HOTPLUG, PIN_STOP, PIN_NWHY };
/* How a pin ended ("result" label). */
enum pin_result { RES_OK, RES_GONE, RES_INVALID, RES_TRANSIENT, RES_ERROR, RES_N };


/*
 * The parts of one interval whose time status reports (cycle_ns): reading
 * /proc/stat; reading the domains (schedstat, memory, libvirt's stats for
 * the domains that need them, sorting threads); deciding whether it is
 * steady; planning and acting (with the domain table's refresh); vpackd's
 * own threads' affinity.
 */
enum agent_phase { PHASE_CPUS, PHASE_DOMAINS, PHASE_STEADY, PHASE_PLAN, PHASE_OWN, PHASE_N };

struct vpack_agent {
    uv_loop_t *loop;
    struct vpack_config cfg;
    struct vpack_topology *topo;
    struct vpack_policy_state *pstate;
    struct vpack_virt *virt;
    struct vpack_hotplug *hotplug;
    struct vpack_cgroup_host cgroup; /* the host's cgroup hierarchies, found at start */
    uv_timer_t tick;
    vpack_cpuset online;
    struct vpack_host_held proc_stat; /* /proc/stat, held open */
    struct vpack_cpu_times *prev_times;
    unsigned nprev_times;
    double *cpu_busy;      /* smoothed, by CPU id */
    double *cpu_busy_now;  /* the last interval alone, by CPU id (ncpu_busy entries) */
    double *cpu_busy_last; /* the interval before it alone, by CPU id */
    double *cpu_noise;     /* mean |change of cpu_busy_now| between intervals, by CPU id */
    double *cpu_band;      /* the band a light interval allows it (vpack_cpu_band_update()) */
    unsigned ncpu_busy;
    uint64_t prev_ns;      /* time the domains were last read */
    uint64_t tick_ns;      /* time the last interval began */
    /* The last interval's length (ns) when it was READ_WAIT (a move that may not last),
     * else 0: a move that lasts is read in the next, and both intervals hold it. */
    double wait_ns;
    struct agent_dom *doms;
    unsigned ndoms;
    int records_fd;        /* state_dir/domains/, the hook's records (trusted: adapters/safefs.h) */
    bool need_list;        /* list running domains at the next cycle */
    bool hotplug_pending;  /* a CPU came or went: repair, re-read, re-pin */
    /* Intervals left in which every thread's kernel affinity is compared with what vpack
     * applied (vpack__act_check_kernel()), and the most there may still be; both 0 on a
     * steady host. Set after a hotplug, a cpuset repair and a reconnect to libvirt. */
    unsigned kernel_checks, kernel_checks_max;
    bool kernel_checks_unplaced; /* the domains vpack does not place too (after a hotplug) */
    unsigned kernel_differ; /* threads the last check found the kernel disagreeing on */
    bool watch_online;     /* no hotplug events: read the online CPUs every interval */
    bool online_check;     /* read them at the next interval (events lost, a pin refused) */
    vpack_cpuset cpus_gone; /* CPUs seen going offline since the last cpuset walk */
    struct vpack_cgroup_memo cpusets; /* what libvirt's v1 cpuset groups had (cgroup.h) */
    bool cpusets_look;     /* a domain came: note its cpuset groups at the next cycle */
    struct vpack_plan *plan;
    struct vpack_snapshot *snap;
    struct {               /* the last dry run's answer, given again within an interval */
        bool valid;
        uint64_t at_ms;    /* loop time it was planned */
        struct vpack_move *moves;
        unsigned nmoves;
    } dry;
    /* What status's "counters" and the metrics show, one line each in vpack/counters.h;
     * libvirt_calls stays 0 here (views.c takes adapters/virt.c's count). */
    struct vpack_counters ctr;
    /*
     * One more at each sampling interval and at each change between two
     * that status or the metrics show: their rendered copies are of one
     * epoch (issue 27, C; vpack_agent_epoch()).
     */
    uint64_t epoch;
    uint64_t phase_ns[PHASE_N]; /* wall time spent in each part of the intervals */
    uint64_t pin_ops[PIN_NWHY][RES_N];
    uint64_t rebalances[VPACK_WHY_N];
    struct vpack_prom_histogram plan_hist, cycle_hist;
    bool replan;           /* plan at the next interval whatever the load (topology, failed pin) */
    unsigned light_streak; /* intervals since the domains were last read (sample.c) */
    uint64_t mem_sample;   /* the sample at which memory placement was last read */
    /* vpackd's own threads follow the wake-up package (agent.c, own_affinity()). */
    bool own_known;        /* own_mask holds the affinity vpackd started with */
    vpack_cpuset own_mask;
    int own_package;       /* the package its threads are on now; -1: not confined */
    int own_task_fd;       /* /proc/self/task, held: a new thread shows in its count; -1 */
    int own_nthreads;      /* vpackd's threads when their affinity was last set */
    /* A hold (control op hold-level, issue 26: `vpackctl measure`'s level-0 rounds):
     * every domain is planned at level hold_level at most until loop time hold_until_ms,
     * when the hold drops by itself; -1: no hold. The domains' own levels stay as they are. */
    int hold_level;
    uint64_t hold_until_ms;
    bool stopping;
};

/* agent.c */
/* Sets *errmsg (caller frees; NULL when out of memory) and returns r. */
int vpack__errmsg(char **errmsg, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* domains.c */
/* Opens state_dir/domains/ (created if needed) into a->records_fd. Returns 0 or -errno with *errmsg. */
int vpack__records_open(struct vpack_agent *a, char **errmsg);
struct agent_dom *vpack__dom_find(struct vpack_agent *a, const char *uuid);
/* The domain, added (to be refreshed) if new; NULL when out of memory. */
struct agent_dom *vpack__dom_add(struct vpack_agent *a, const char *uuid);
void vpack__dom_remove(struct vpack_agent *a, const char *uuid);
void vpack__dom_free(struct agent_dom *d);
/* Re-reads a domain from libvirt; -ENOENT when it is gone (logged). */
int vpack__dom_refresh(struct vpack_agent *a, struct agent_dom *d);
/* Refreshes every domain marked for it, forgetting the ones that are gone. */
void vpack__doms_refresh(struct vpack_agent *a);
/* Lists the running domains: adds new ones, forgets the stopped. */
void vpack__doms_list_running(struct vpack_agent *a);
/* The domain's level: its own, else a rule's, else the configured default. */
int vpack__dom_level(const struct vpack_agent *a, const struct agent_dom *d);
/* The level the policy plans it at: its own (vpack__dom_level()) capped by a hold. */
int vpack__dom_plan_level(const struct vpack_agent *a, const struct agent_dom *d);
/* Where that level comes from. */
enum vpack_level_source vpack__dom_level_source(const struct agent_dom *d);
/* True when vpack places it: its request is known and its level is 1 or 2. */
bool vpack__dom_placed(const struct vpack_agent *a, const struct agent_dom *d);
/* The mask a thread has when vpack does not restrict it. */
void vpack__dom_free_mask(const struct vpack_agent *a, const struct agent_dom *d,
                          const struct agent_thread *t, vpack_cpuset *out);
/*
 * Sorts QEMU's threads by the names QEMU gives them ("CPU N/TCG", "IO
 * iothreadN", the rest the emulator's) and opens their schedstat files;
 * iothreads not found are read through their cgroup, and a domain with a
 * vCPU not found through libvirt's stats (stats_libvirt).
 */
void vpack__dom_find_threads(struct vpack_agent *a, struct agent_dom *d);
/* Closes d's schedstat files and its task directory; forgets its threads. */
void vpack__dom_threads_close(struct agent_dom *d);
/* "thread-name", "cgroup-v1", "cgroup-v2", "libvirt", "remainder" or "none". */
const char *vpack__source_name(enum load_source s);
/* Keeps the plan's word on d: its reason and its packages. Returns 0 or -ENOMEM. */
int vpack__dom_set_placement(struct agent_dom *d, const struct vpack_plan_domain *pd);

/* records.c: the records of what each domain's run asked for */
const char *vpack__origin_name(enum req_origin o);
bool vpack__run_same(const struct agent_run *x, const struct agent_run *y);
/* The run of QEMU process pid (pid 0 in *out when it cannot be told). */
void vpack__run_of(const struct vpack_agent *a, int pid, struct agent_run *out);
/*
 * Reads uuid's record: 0 with *req (caller frees) and *meta, -ENOENT when
 * there is none, -EINVAL with *why (caller frees) when it is damaged or not
 * trusted, or -ENOMEM.
 */
int vpack__record_read(const struct vpack_agent *a, const char *uuid, struct vpack_domxml **req,
                       struct record_meta *meta, char **why);
/* Writes uuid's record (atomically). Returns 0 or -errno. */
int vpack__record_write(const struct vpack_agent *a, const char *uuid,
                        const struct vpack_domxml *req, const struct record_meta *meta);
void vpack__record_discard(const struct vpack_agent *a, const char *uuid);
/* Discards uuid's record if it is run's (a stopped run: the next one's may be there already). */
void vpack__record_discard_run(const struct vpack_agent *a, const char *uuid,
                               const struct agent_run *run);
/* Discards the records of every domain not among uuids[0..n) (the running ones). */
void vpack__records_sweep(const struct vpack_agent *a, char *const *uuids, unsigned n);
/* Notes in d's record that vpack narrowed some of its threads (act.c, once per run). */
void vpack__dom_narrowed(struct vpack_agent *a, struct agent_dom *d);
/*
 * Writes d's request into its live metadata (urn:vpack:request:1) before
 * vpack places it, so that a save, a managed save or a migration of the
 * live XML carries the guest's own pins along with vpack's: vpack-hook's
 * restore and migrate put them back, and a vpackd without the run's record
 * reads them (domains.c). Returns 0 or -errno (logged once, retried at the
 * next interval; nothing of d may be narrowed then).
 */
int vpack__dom_mark(struct vpack_agent *a, struct agent_dom *d);
/* Whether writing its request is due: it never failed, or its back-off ran out. */
bool vpack__dom_mark_due(const struct vpack_agent *a, const struct agent_dom *d);
/* Removes it, once d's threads have their own masks back (at stop). */

/* sample.c */
void vpack__sample_cpus(struct vpack_agent *a);
/*
 * last_ns: the last interval's length (ns) when the read follows light
 * intervals and something moved (the gap's steady part is taken out, the
 * rest is the last interval's; a domain a due read left unread counts from
 * that read: vpack_usage_last()); 0: the average over the gap. due: the read
 * is READ_DUE (vpack__sample_read()),
 * so a domain whose process's CPU time (/proc/PID/stat) ran, within
 * agent.steady_band, at its rate up to the last due read that read its
 * threads, and whose thread count is the same, keeps its threads' readings,
 * for at most VPACK__FULL_READ_MAX_NS (a load moved between its threads on
 * one CPU shows by then). The CPU time is read at due reads only (and at a
 * domain's first read); the other reads count threads with an fstat.
 */
#define VPACK__FULL_READ_MAX_NS 60000000000ull
void vpack__sample_domains(struct vpack_agent *a, double last_ns, bool due);
/*
 * Brings the metrics' thread counters up to now (a scrape, views.c): one
 * read of each schedstat file held for a thread read by name; the other
 * sources stay as of the last interval that read the domains. Touches
 * nothing the policy sees.
 */
void vpack__sample_counters(struct vpack_agent *a);
/*
 * True when the interval may skip planning: nothing asks for a plan, the
 * policy state is settled and snap is within agent.steady_band of the last
 * planned snapshot.
 */
bool vpack__sample_steady(const struct vpack_agent *a, const struct vpack_snapshot *snap);
/*
 * Whether this interval reads the domains. READ_LIGHT: no (a light
 * interval): nothing asks for a plan (what vpack__sample_steady() asks but
 * the domains), every CPU's load is within the band of the last plan's, and
 * the domains were read less than VPACK__LIGHT_MAX intervals ago; such an
 * interval is steady, the domains' readings being those of a steady or
 * planned interval. READ_WAIT: no, though a CPU's load left the band: a
 * move of this interval alone, smaller than half the gap between the
 * watermarks (vpack_snapshot_cpus_moved()), is read only when it lasts into
 * the next interval; light otherwise (issue 24 item 6: on a shared machine,
 * most reads of 30 idle guests were such moves, each reading every thread
 * and planning to change nothing). READ_DUE: yes, only because
 * VPACK__LIGHT_MAX intervals went by. READ_MOVED: yes, a CPU's load left the
 * band and the move is large or lasted, or a plan is asked for.
 */
#define VPACK__LIGHT_MAX 10
enum vpack__read { READ_LIGHT, READ_WAIT, READ_DUE, READ_MOVED };
enum vpack__read vpack__sample_read(const struct vpack_agent *a);
/*
 * The policy's input: one snapshot of every domain that is read. (*map)[i]
 * is the index in a->doms of the snapshot's domain i. Returns 0 or -ENOMEM.
 */
int vpack__sample_snapshot(struct vpack_agent *a, struct vpack_snapshot **out, unsigned **map);

/* act.c */
struct vpack__act_out {
    bool dry_run;              /* plan only: record the moves, pin nothing */
    struct vpack_move **moves; /* may be NULL */
    unsigned *nmoves;
};
/* Applies plan (domains in the snapshot's order, map as above); the number of threads moved. */
unsigned vpack__act(struct vpack_agent *a, const struct vpack_plan *plan, const unsigned *map,
                    const struct vpack__act_out *out);
/* After a hotplug: gives unplaced domains' threads their intent back. */
void vpack__act_restore_after_hotplug(struct vpack_agent *a, const struct vpack_plan *plan,
                                      const unsigned *map);
/* At stop: gives every restricted thread its guest-requested or full mask. */
void vpack__act_restore_all(struct vpack_agent *a);
/* Forgets every applied mask (the kernel moved threads): the next plan re-pins all. */
void vpack__act_forget_applied(struct vpack_agent *a);
/*
 * The kernel's word after a hotplug. libvirt's view of a pin is what libvirt
 * last wrote; the kernel changes threads under it when a CPU goes or comes
 * back (cgroup v1 takes the CPU out of every cpuset and gives it back to
 * none of libvirt's per-thread groups; it moves the tasks of a group left
 * empty to its parent; a thread whose every CPU went offline falls back to
 * all CPUs), and a refresh takes libvirt's view as what is applied. For
 * VPACK__KERNEL_CHECKS intervals after a hotplug, a cpuset repair or a
 * reconnect, and again after each disagreement (at most
 * VPACK__KERNEL_CHECKS_MAX in all), each interval compares the affinity of
 * every thread libvirt pins by its own id (vCPUs, iothreads, QEMU's main
 * thread) of every domain vpack knows the request of with the mask vpack
 * applied, both within the online CPUs: one sched_getaffinity() per
 * thread. A thread that disagrees is logged and its mask forgotten, and
 * the next cycle pins it again through libvirt. The domains vpack does not
 * place are checked only after a hotplug or a repair, when their threads
 * get their intent back (vpack__act_restore_after_hotplug()); after a
 * reconnect they are left alone, as always.
 */
#define VPACK__KERNEL_CHECKS 5
#define VPACK__KERNEL_CHECKS_MAX 30
/* Starts the intervals of checks; hotplug: of the domains vpack does not place too. */
void vpack__act_check_kernel_soon(struct vpack_agent *a, bool hotplug);
/* One interval's check; the number of threads that disagree. */
unsigned vpack__act_check_kernel(struct vpack_agent *a);

#endif
