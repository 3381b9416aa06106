/* SPDX-License-Identifier: MIT */
/*
 * The one error convention of vpack's functions that explain a failure:
 *
 *   int f(..., char **errmsg);
 *
 * returns 0 (or a count) on success and a negative errno on failure. On
 * failure *errmsg is a one-line message from malloc() that the caller
 * frees, or NULL when there was no memory for it; on success it is NULL.
 * A caller that does not want the message passes errmsg == NULL, and then
 * nothing is allocated (vpack_cpuset_parse() on the sampling path relies on
 * that). *errmsg need not be initialised on entry.
 */
#ifndef VPACK_ERRMSG_H
#define VPACK_ERRMSG_H

/*
 * For implementing the convention: replaces *errmsg (freeing the earlier
 * message, so *errmsg must be NULL or a message) with the formatted one, or
 * NULL when out of memory; does nothing when errmsg is NULL. Returns ret,
 * so that a failure reads "return vpack_errmsg_set(-EINVAL, errmsg, ...)".
 */
int vpack_errmsg_set(int ret, char **errmsg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
