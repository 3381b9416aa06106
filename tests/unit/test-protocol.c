// SPDX-License-Identifier: MIT
/*
 * lib/format/protocol.c: one control-socket request line in, a checked request or
 * the exact error text of the answer out; the permission rule (writes need
 * a privileged peer, except a dry-run rebalance; register and forget need
 * root) before the arguments.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vpack/protocol.h"

#define UUID "c7a5fdbd-edaf-9455-926a-d65c16db1809"

/*
 * Parses line from root (privileged) or uid 1000 (not); on failure *err is
 * the message, which the caller frees.
 */
static int parse_err(const char *line, bool privileged, struct vpack_ctl_request *req, char **err)
{
    *err = (char *)line; /* must be replaced: NULL on success */
    return vpack_ctl_request_parse(line, strlen(line), privileged, privileged ? 0 : 1000, req, err);
}

/* For the lines that parse: no message is made. */
static int parse(const char *line, bool privileged, struct vpack_ctl_request *req)
{
    char *err;
    int r = parse_err(line, privileged, req, &err);
    if (r == 0)
        assert_null(err);
    free(err);
    return r;
}

static void expect_error(const char *line, bool privileged, int code, const char *msg)
{
    struct vpack_ctl_request req;
    char *err;
    assert_int_equal(parse_err(line, privileged, &req, &err), code);
    assert_non_null(err);
    assert_string_equal(err, msg);
    free(err);
    assert_null(req.obj);
}

static void test_ops(void **state)
{
    (void)state;
    struct vpack_ctl_request req;
    const struct {
        const char *line;
        enum vpack_ctl_op op;
    } ok[] = {
        {"{\"op\": \"version\"}", VPACK_CTL_VERSION},
        {"{\"op\": \"status\", \"extra\": [1, 2]}", VPACK_CTL_STATUS},
        {" {\"op\":\"snapshot\"} ", VPACK_CTL_SNAPSHOT},
        {"{\"op\": \"explain\", \"domain\": \"web1\"}", VPACK_CTL_EXPLAIN},
        {"{\"op\": \"rebalance\"}", VPACK_CTL_REBALANCE},
        {"{\"op\": \"forget\", \"uuid\": \"" UUID "\", \"name\": \"web1\"}", VPACK_CTL_FORGET},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        assert_int_equal(parse(ok[i].line, true, &req), 0);
        assert_int_equal(req.op, ok[i].op);
        assert_non_null(req.obj);
        vpack_ctl_request_clear(&req);
        assert_null(req.obj);
    }
    assert_int_equal(parse("{\"op\": \"explain\", \"domain\": \"web1\"}", false, &req), 0);
    assert_string_equal(req.domain, "web1");
    assert_string_equal(req.op_name, "explain");
    vpack_ctl_request_clear(&req);

    assert_int_equal(parse("{\"op\": \"register\", \"event\": \"reconnect\", \"domain\": "
                           "{\"name\": \"web1\", \"uuid\": \"" UUID "\", \"vcpupin\": {}}}",
                           true, &req), 0);
    assert_int_equal(req.op, VPACK_CTL_REGISTER);
    assert_string_equal(req.name, "web1");
    assert_string_equal(req.uuid, UUID);
    assert_true(req.reconnect);
    assert_true(json_object_is_type(req.record, json_type_object));
    vpack_ctl_request_clear(&req);
    assert_int_equal(parse("{\"op\": \"register\", \"event\": \"prepare\", \"domain\": "
                           "{\"name\": \"web1\", \"uuid\": \"" UUID "\"}}", true, &req), 0);
    assert_false(req.reconnect);
    vpack_ctl_request_clear(&req);

    assert_int_equal(parse("{\"op\": \"hold-level\", \"level\": 0, \"seconds\": 90.5}", true,
                           &req), 0);
    assert_int_equal(req.op, VPACK_CTL_HOLD_LEVEL);
    assert_int_equal(req.hold_level, 0);
    assert_true(req.hold_seconds == 90.5);
    vpack_ctl_request_clear(&req);
    /* The edges: level 2 and the longest lease; 0 s drops the hold. */
    assert_int_equal(parse("{\"op\": \"hold-level\", \"level\": 2, \"seconds\": 3600}", true,
                           &req), 0);
    assert_int_equal(req.hold_level, 2);
    assert_true(req.hold_seconds == 3600);
    vpack_ctl_request_clear(&req);
    assert_int_equal(parse("{\"op\": \"hold-level\", \"level\": 1, \"seconds\": 0}", true,
                           &req), 0);
    assert_int_equal(req.hold_level, 1);
    assert_true(req.hold_seconds == 0);
    vpack_ctl_request_clear(&req);
}

static void test_permission(void **state)
{
    (void)state;
    struct vpack_ctl_request req;
    expect_error("{\"op\": \"rebalance\"}", false, -EPERM,
                 "permission denied: 'rebalance' needs root or the vpack control group (uid 1000)");
    expect_error("{\"op\": \"rebalance\", \"dry_run\": false}", false, -EPERM,
                 "permission denied: 'rebalance' needs root or the vpack control group (uid 1000)");
    /* Refused before the arguments are looked at. */
    expect_error("{\"op\": \"register\"}", false, -EPERM,
                 "permission denied: 'register' needs root, as the hook runs (uid 1000)");
    expect_error("{\"op\": \"forget\", \"uuid\": \"" UUID "\"}", false, -EPERM,
                 "permission denied: 'forget' needs root, as the hook runs (uid 1000)");
    /* The control group may rebalance, but not make or remove a guest's
     * record (issue 27, item 4: a record ties a guest to its pins). */
    const char *line = "{\"op\": \"rebalance\"}";
    char *err = NULL;
    assert_int_equal(vpack_ctl_request_parse(line, strlen(line), true, 1000, &req, &err), 0);
    vpack_ctl_request_clear(&req);
    line = "{\"op\": \"register\", \"domain\": {\"name\": \"w\", \"uuid\": \"" UUID "\"}}";
    assert_int_equal(vpack_ctl_request_parse(line, strlen(line), true, 1000, &req, &err), -EPERM);
    assert_string_equal(err, "permission denied: 'register' needs root, as the hook runs (uid 1000)");
    free(err);
    line = "{\"op\": \"forget\", \"uuid\": \"" UUID "\"}";
    assert_int_equal(vpack_ctl_request_parse(line, strlen(line), true, 1000, &req, &err), -EPERM);
    free(err);
    /* A hold moves every guest: root only, not the control group, arguments unread. */
    expect_error("{\"op\": \"hold-level\", \"level\": 0, \"seconds\": 60}", false, -EPERM,
                 "permission denied: 'hold-level' needs root: it changes every domain's "
                 "placement (uid 1000)");
    expect_error("{\"op\": \"hold-level\", \"level\": \"x\"}", false, -EPERM,
                 "permission denied: 'hold-level' needs root: it changes every domain's "
                 "placement (uid 1000)");
    line = "{\"op\": \"hold-level\", \"level\": 0, \"seconds\": 60}";
    assert_int_equal(vpack_ctl_request_parse(line, strlen(line), true, 1000, &req, &err), -EPERM);
    assert_string_equal(err, "permission denied: 'hold-level' needs root: it changes every "
                             "domain's placement (uid 1000)");
    free(err);
    /* A dry run changes nothing: anyone. */
    assert_int_equal(parse("{\"op\": \"rebalance\", \"dry_run\": true}", false, &req), 0);
    assert_true(req.dry_run);
    vpack_ctl_request_clear(&req);
    assert_int_equal(parse("{\"op\": \"rebalance\", \"dry_run\": 0}", true, &req), 0);
    assert_false(req.dry_run);
    vpack_ctl_request_clear(&req);
}

/*
 * On the read-only socket every change is refused, root's too, naming the
 * admin socket, before the arguments or the peer's own rights are looked
 * at; reads and a dry run are answered (issue 27, item 1).
 */
static void test_read_only_socket(void **state)
{
    static const char *const changes[] = {
        "{\"op\": \"rebalance\"}",
        "{\"op\": \"rebalance\", \"dry_run\": false}",
        "{\"op\": \"register\"}",
        "{\"op\": \"forget\", \"uuid\": \"" UUID "\"}",
        "{\"op\": \"hold-level\", \"level\": 0, \"seconds\": 60}",
    };
    static const char *const reads[] = {
        "{\"op\": \"status\"}", "{\"op\": \"version\"}", "{\"op\": \"snapshot\"}",
        "{\"op\": \"explain\", \"domain\": \"w\"}",
        "{\"op\": \"rebalance\", \"dry_run\": true}",
    };
    struct vpack_ctl_request req;
    char *err = NULL;
    (void)state;
    for (unsigned root = 0; root < 2; root++) {
        struct vpack_ctl_peer peer = {.privileged = root, .uid = root ? 0 : 1000,
                                      .admin_socket = "/run/vpack/vpackd-admin.sock"};
        for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++) {
            assert_int_equal(vpack_ctl_request_parse_peer(changes[i], strlen(changes[i]), &peer,
                                                          &req, &err),
                             -EPERM);
            assert_non_null(strstr(err, "permission denied: '"));
            assert_non_null(strstr(err, "' changes the agent: this socket serves read-only "
                                        "requests; root and the vpack control group send it on "
                                        "the admin socket /run/vpack/vpackd-admin.sock"));
            free(err);
            err = NULL;
        }
        for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
            assert_int_equal(vpack_ctl_request_parse_peer(reads[i], strlen(reads[i]), &peer, &req,
                                                          &err),
                             0);
            vpack_ctl_request_clear(&req);
        }
    }
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("{\"op\": \"version\"", true, -EINVAL, "invalid JSON: incomplete");
    expect_error("{\"op\": \"version\"} {}", true, -EINVAL, "invalid JSON: trailing data");
    expect_error("{op: version}", true, -EINVAL, "invalid JSON: quoted object property name expected");
    expect_error("[1]", true, -EINVAL, "a request is an object with a string \"op\"");
    expect_error("{\"op\": 7}", true, -EINVAL, "a request is an object with a string \"op\"");
    expect_error("{\"op\": \"reboot\"}", true, -EINVAL, "unknown op 'reboot'");
    expect_error("{\"op\": \"VERSION\"}", true, -EINVAL, "unknown op 'VERSION'");
    /* A NUL inside the op is not the op before it; control characters are quoted. */
    expect_error("{\"op\": \"version\\u0000x\"}", true, -EINVAL, "unknown op 'version?x'");
    expect_error("{\"op\": \"a\\nb\"}", true, -EINVAL, "unknown op 'a?b'");
    expect_error("{\"op\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
                 true, -EINVAL,
                 "unknown op 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...'");
    expect_error("{\"op\": \"explain\"}", false, -EINVAL, "explain needs a string \"domain\"");
    expect_error("{\"op\": \"explain\", \"domain\": 3}", false, -EINVAL,
                 "explain needs a string \"domain\"");
    expect_error("{\"op\": \"explain\", \"domain\": \"web1\\u0000x\"}", false, -EINVAL,
                 "explain needs a string \"domain\"");
    expect_error("{\"op\": \"register\"}", true, -EINVAL, "register: needs a \"domain\" object");
    expect_error("{\"op\": \"register\", \"domain\": \"web1\"}", true, -EINVAL,
                 "register: needs a \"domain\" object");
    expect_error("{\"op\": \"register\", \"domain\": {\"name\": \"web1\"}}", true, -EINVAL,
                 "register: the domain record needs a \"name\" and a valid \"uuid\"");
    expect_error("{\"op\": \"register\", \"domain\": {\"uuid\": \"" UUID "\"}}", true, -EINVAL,
                 "register: the domain record needs a \"name\" and a valid \"uuid\"");
    expect_error("{\"op\": \"register\", \"domain\": {\"name\": \"w\", \"uuid\": \"../../etc/passwd\"}}",
                 true, -EINVAL, "register: the domain record needs a \"name\" and a valid \"uuid\"");
    /* A name that would forge a log line of its own (issue 27, item E). */
    expect_error("{\"op\": \"register\", \"domain\": {\"name\": \"w\\n<0>kernel: x\", \"uuid\": \"" UUID
                 "\"}}",
                 true, -EINVAL, "register: the domain's name is empty or holds a control character");
    expect_error("{\"op\": \"register\", \"domain\": {\"name\": \"\\u001b[2J\", \"uuid\": \"" UUID "\"}}",
                 true, -EINVAL, "register: the domain's name is empty or holds a control character");
    expect_error("{\"op\": \"register\", \"domain\": {\"name\": \"\", \"uuid\": \"" UUID "\"}}",
                 true, -EINVAL, "register: the domain's name is empty or holds a control character");
    expect_error("{\"op\": \"forget\"}", true, -EINVAL, "forget: needs a valid \"uuid\"");
    expect_error("{\"op\": \"forget\", \"uuid\": \"" UUID "\\u0000/x\"}", true, -EINVAL,
                 "forget: needs a valid \"uuid\"");
    /* hold-level: a bad level, a bad lease, garbage. */
    static const char *const bad_level[] = {
        "{\"op\": \"hold-level\", \"seconds\": 60}",
        "{\"op\": \"hold-level\", \"level\": 3, \"seconds\": 60}",
        "{\"op\": \"hold-level\", \"level\": -1, \"seconds\": 60}",
        "{\"op\": \"hold-level\", \"level\": 0.5, \"seconds\": 60}",
        "{\"op\": \"hold-level\", \"level\": \"0\", \"seconds\": 60}",
        "{\"op\": \"hold-level\", \"level\": null, \"seconds\": 60}",
        "{\"op\": \"hold-level\", \"level\": 4294967296, \"seconds\": 60}",
    };
    for (size_t i = 0; i < sizeof(bad_level) / sizeof(bad_level[0]); i++)
        expect_error(bad_level[i], true, -EINVAL,
                     "hold-level: needs a \"level\" of 0, 1 or 2 (an integer)");
    static const char *const bad_lease[] = {
        "{\"op\": \"hold-level\", \"level\": 0}",
        "{\"op\": \"hold-level\", \"level\": 0, \"seconds\": -1}",
        "{\"op\": \"hold-level\", \"level\": 0, \"seconds\": 3600.5}",
        "{\"op\": \"hold-level\", \"level\": 0, \"seconds\": \"60\"}",
        "{\"op\": \"hold-level\", \"level\": 0, \"seconds\": [60]}",
        "{\"op\": \"hold-level\", \"level\": 0, \"seconds\": true}",
        "{\"op\": \"hold-level\", \"level\": 0, \"seconds\": 1e400}",
        /* json-c reads these words as numbers: NaN fails every comparison. */
        "{\"op\": \"hold-level\", \"level\": 0, \"seconds\": NaN}",
        "{\"op\": \"hold-level\", \"level\": 0, \"seconds\": Infinity}",
    };
    for (size_t i = 0; i < sizeof(bad_lease) / sizeof(bad_lease[0]); i++)
        expect_error(bad_lease[i], true, -EINVAL,
                     "hold-level: needs \"seconds\" from 0 (drop the hold) to 3600");
    expect_error("{\"op\": \"hold-level\", \"level\": 0, \"seconds\": 6", true, -EINVAL,
                 "invalid JSON: incomplete");
    /* Without errmsg: the same answer, and no message is made. */
    struct vpack_ctl_request req;
    assert_int_equal(vpack_ctl_request_parse("[", 1, true, 0, &req, NULL), -EINVAL);
    assert_null(req.obj);
    const char *line = "{\"op\": \"rebalance\"}";
    assert_int_equal(vpack_ctl_request_parse(line, strlen(line), false, 1000, &req, NULL), -EPERM);
}

static void test_uuid(void **state)
{
    (void)state;
    assert_true(vpack_ctl_uuid_ok(UUID));
    assert_true(vpack_ctl_uuid_ok("C7A5FDBD-EDAF-9455-926A-D65C16DB1809"));
    assert_false(vpack_ctl_uuid_ok(NULL));
    assert_false(vpack_ctl_uuid_ok(""));
    assert_false(vpack_ctl_uuid_ok("c7a5fdbd-edaf-9455-926a-d65c16db180"));
    assert_false(vpack_ctl_uuid_ok("c7a5fdbd-edaf-9455-926a-d65c16db18090"));
    assert_false(vpack_ctl_uuid_ok("c7a5fdbd/edaf-9455-926a-d65c16db1809"));
    assert_false(vpack_ctl_uuid_ok("g7a5fdbd-edaf-9455-926a-d65c16db1809"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops),
        cmocka_unit_test(test_permission),
        cmocka_unit_test(test_read_only_socket),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_uuid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
