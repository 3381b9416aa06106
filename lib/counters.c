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
