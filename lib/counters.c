// SPDX-License-Identifier: MIT
/* vpackd's counters as data and as status's JSON; see counters.h. */
#include "vpack/counters.h"

#include <stdbool.h>
#include <string.h>

#include <json-c/json.h>

#include "vpack/json.h"

const struct vpack_counter_def vpack_counter_defs[VPACK_NCOUNTERS] = {
#define VPACK_COUNTER_DEF(name, prom, help)                                                       \
    {#name, prom, help, offsetof(struct vpack_counters, name)},
    VPACK_COUNTERS(VPACK_COUNTER_DEF)
#undef VPACK_COUNTER_DEF
};

uint64_t vpack_counters_get(const struct vpack_counters *c, enum vpack_counter i)
{
    uint64_t v;
    memcpy(&v, (const char *)c + vpack_counter_defs[i].offset, sizeof(v));
    return v;
}

struct json_object *vpack_counters_json(const struct vpack_counters *c)
{
    struct json_object *o = json_object_new_object();
    bool ok = true;
    for (int i = 0; i < VPACK_NCOUNTERS; i++)
        vpack_json_set_int(o, vpack_counter_defs[i].name, (int64_t)vpack_counters_get(c, i), &ok);
    return vpack_json_finish(o, ok);
}

void vpack_thread_time_add(struct vpack_thread_time *t, uint64_t run_ns, uint64_t wait_ns,
                           bool has_wait)
{
    t->run_ns += run_ns;
    t->wait_ns += wait_ns;
    t->counted = true;
    t->wait_known |= has_wait;
}

void vpack_thread_time_take(struct vpack_thread_time *t, struct vpack_thread_reading *last,
                            uint64_t run_ns, uint64_t wait_ns, bool has_wait)
{
    if (last->seen)
        vpack_thread_time_add(t, run_ns >= last->run_ns ? run_ns - last->run_ns : 0,
                              wait_ns >= last->wait_ns ? wait_ns - last->wait_ns : 0, has_wait);
    else if (!t->rebase)
        vpack_thread_time_add(t, run_ns, wait_ns, has_wait);
    *last = (struct vpack_thread_reading){true, run_ns, wait_ns};
}

void vpack_thread_time_rebase(struct vpack_thread_time *t)
{
    t->rebase = t->counted;
}

void vpack_thread_time_reset(struct vpack_thread_time *t)
{
    *t = (struct vpack_thread_time){0};
}
