// SPDX-License-Identifier: MIT
/*
 * The domain records under state_dir/domains/: what each running domain
 * asked for (its request), kept for the run of it that asked.
 *
 * One file per domain, UUID.json: the request as lib/format/domrecord.c writes it
 * (vpack-hook --dump's format), with vpackd's own member in front:
 *
 *   {"vpackd":{"pid":N,"start":T,"origin":"hook"|"live","narrowed":B},
 *    "name":...,"uuid":...,"vcpupin":{...},...}
 *
 * "origin" says where the request came from: the hook's record of the XML
 * the domain was started with, or (without one) the live XML at vpackd's
 * first sight of the domain; never a later definition. "pid" and "start"
 * (QEMU's pid and its start time in clock ticks after boot) name the run:
 * a record of another run is stale and discarded, so a domain re-created
 * with the same uuid never inherits one. "narrowed" says vpack pinned some
 * of the run's threads narrower than the domain's own request: after any
 * restart those threads are checked against what the domain's level allows
 * now. A record without pid and start (written before the run could be
 * named) is bound to the run at the next look.
 */
#include "agent-priv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "host.h"
#include "log.h"
#include "safefs.h"
#include "vpack/domrecord.h"
#include "vpack/domxml.h"
#include "vpack/json.h"

static const char *const origin_names[] = {[REQ_NONE] = "none", [REQ_HOOK] = "hook",
                                           [REQ_LIVE] = "live"};

const char *vpack__origin_name(enum req_origin o)
{
    return (unsigned)o < sizeof(origin_names) / sizeof(origin_names[0]) ? origin_names[o] : "none";
}

/* The name of uuid's record in state_dir/domains/. */
static void record_name(const char *uuid, char *buf, size_t len)
{
    snprintf(buf, len, "%s.json", uuid);
}

bool vpack__run_same(const struct agent_run *x, const struct agent_run *y)
{
    return x->pid > 0 && x->pid == y->pid && x->start == y->start;
}

void vpack__run_of(const struct vpack_agent *a, int pid, struct agent_run *out)
{
    out->pid = 0;
    out->start = 0;
    if (pid > 0 && vpack_host_process_start(a->cfg.sysfs_root, pid, &out->start) == 0)
        out->pid = pid;
}

/* vpackd's member of a record: 0, or -EINVAL when it is there but not one. */
static int meta_read(struct json_object *o, struct record_meta *m)
{
    struct json_object *v = NULL, *x;
    memset(m, 0, sizeof(*m));
    m->origin = REQ_HOOK; /* a record from before vpackd wrote its member: the hook's */
    if (!json_object_object_get_ex(o, "vpackd", &v) || !v)
        return 0;
    if (!json_object_is_type(v, json_type_object))
        return -EINVAL;
    const char *origin = vpack_json_str(v, "origin", "hook");
    if (!strcmp(origin, "live"))
        m->origin = REQ_LIVE;
    else if (strcmp(origin, "hook"))
        return -EINVAL;
    m->narrowed = vpack_json_bool(v, "narrowed", false);
    if (json_object_object_get_ex(v, "pid", &x) && x) {
        int64_t pid = json_object_get_int64(x);
        struct json_object *s = NULL;
        if (!json_object_is_type(x, json_type_int) || pid <= 0 || pid > INT32_MAX ||
            !json_object_object_get_ex(v, "start", &s) || !json_object_is_type(s, json_type_int))
            return -EINVAL;
        m->run.pid = (int)pid;
        m->run.start = (uint64_t)json_object_get_int64(s);
    }
    return 0;
}

int vpack__record_read(const struct vpack_agent *a, const char *uuid, struct vpack_domxml **req,
                       struct record_meta *meta, char **why)
{
    char name[64], *buf = NULL;
    struct json_tokener *tok = NULL;
    struct json_object *o = NULL;
    size_t len;
    int r;

    *req = NULL;
    *why = NULL;
    record_name(uuid, name, sizeof(name));
    r = vpack_safefs_read(a->records_fd, name, VPACK_DOMXML_MAX_SIZE, &buf, &len);
    if (r == -ENOENT)
        return r;
    if (r < 0) {
        vpack__errmsg(why, -EINVAL, "not trusted (%s)",
                      r == -EPERM ? "not root's own, or writable by others"
                      : r == -ELOOP ? "a symbolic link" : strerror(-r));
        return -EINVAL;
    }
    if (!(tok = json_tokener_new())) {
        r = -ENOMEM;
        goto cleanup;
    }
    o = len <= INT32_MAX ? json_tokener_parse_ex(tok, buf, (int)len) : NULL;
    if (!o || json_tokener_get_error(tok) != json_tokener_success) {
        r = vpack__errmsg(why, -EINVAL, "damaged (not JSON)");
        goto cleanup;
    }
    if (meta_read(o, meta) < 0) {
        r = vpack__errmsg(why, -EINVAL, "damaged (its \"vpackd\" member)");
        goto cleanup;
    }
    char *err = NULL;
    r = vpack_domxml_from_json_object(o, req, &err);
    if (r == -EINVAL)
        vpack__errmsg(why, r, "damaged (%s)", err ? err : "?");
    free(err);
cleanup:
    json_object_put(o);
    if (tok)
        json_tokener_free(tok);
    free(buf);
    return r;
}

int vpack__record_write(const struct vpack_agent *a, const char *uuid,
                        const struct vpack_domxml *req, const struct record_meta *meta)
{
    char name[64], run[64] = "";
    char *text = vpack_domxml_to_json(req), *all = NULL;
    int r = -ENOMEM;
    if (!text)
        return -ENOMEM;
    record_name(uuid, name, sizeof(name));
    if (meta->run.pid > 0)
        snprintf(run, sizeof(run), "\"pid\":%d,\"start\":%" PRIu64 ",", meta->run.pid,
                 meta->run.start);
    /* The request is one JSON object: vpackd's member goes first in it. */
    if (text[0] == '{' &&
        asprintf(&all, "{\"vpackd\":{%s\"origin\":\"%s\",\"narrowed\":%s}%s%s", run,
                 vpack__origin_name(meta->origin), meta->narrowed ? "true" : "false",
                 text[1] == '}' ? "" : ",", text + 1) >= 0)
        r = vpack_safefs_write(a->records_fd, name, all, strlen(all), 0600);
    else
        all = NULL;
    free(all);
    free(text);
    return r;
}

void vpack__record_discard(const struct vpack_agent *a, const char *uuid)
{
    char name[64];
    record_name(uuid, name, sizeof(name));
    if (unlinkat(a->records_fd, name, 0) < 0 && errno != ENOENT)
        log_warn("cannot remove the record %s/domains/%s: %s", a->cfg.state_dir, name,
                 strerror(errno));
}

void vpack__record_discard_run(const struct vpack_agent *a, const char *uuid,
                               const struct agent_run *run)
{
    struct vpack_domxml *req = NULL;
    struct record_meta meta;
    char *why = NULL;
    /* Only this run's record: the next run's may be there already. */
    if (vpack__record_read(a, uuid, &req, &meta, &why) == 0 && vpack__run_same(&meta.run, run))
        vpack__record_discard(a, uuid);
    vpack_domxml_free(req);
    free(why);
}

void vpack__records_sweep(const struct vpack_agent *a, char *const *uuids, unsigned n)
{
    int fd = dup(a->records_fd);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *e;
    unsigned dropped = 0;
    if (!dir) {
        if (fd >= 0)
            close(fd);
        log_warn("cannot list %s/domains: %s", a->cfg.state_dir, strerror(errno));
        return;
    }
    rewinddir(dir);
    while ((e = readdir(dir))) {
        char uuid[37];
        size_t len = strlen(e->d_name);
        bool running = false;
        if (len != 36 + 5 || strcmp(e->d_name + 36, ".json"))
            continue;
        snprintf(uuid, sizeof(uuid), "%.36s", e->d_name);
        for (unsigned k = 0; k < n && !running; k++)
            running = !strcmp(uuids[k], uuid);
        if (running)
            continue;
        vpack__record_discard(a, uuid);
        dropped++;
    }
    closedir(dir);
    if (dropped)
        log_info("discarded %u records of domains that are not running", dropped);
}
