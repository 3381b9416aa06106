/* SPDX-License-Identifier: MIT */
/* Helpers the policy's unit tests share (test-policy-audit.c, test-policy-invariants.c). */
#ifndef VPACK_POLICY_TEST_UTIL_H
#define VPACK_POLICY_TEST_UTIL_H

#include "vpack/policy.h"

/*
 * The plan as one line of JSON, for a failure message. The text lives in a
 * static buffer (cut at 8 KiB) until the next call.
 */
const char *plan_text(const struct vpack_plan *p);

/* The plan's domain of that name; fails the test when there is none. */
const struct vpack_plan_domain *plan_domain(const struct vpack_plan *p, const char *name);

#endif
