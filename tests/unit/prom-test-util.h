/* SPDX-License-Identifier: MIT */
/*
 * What test-prom.c and test-hostpower.c share: whole-line checks on
 * rendered text and scratch sysfs trees. Include after cmocka.h.
 */
#ifndef VPACK_PROM_TEST_UTIL_H
#define VPACK_PROM_TEST_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* True when text has a line that is exactly line. */
static inline bool has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, line, n) && (p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

#define assert_line(text, line)                                                                   \
    do {                                                                                          \
        if (!has_line(text, line))                                                                \
            fail_msg("missing line: %s\n---- in:\n%s", line, text);                              \
    } while (0)

/* Writes text to root/rel, making its directories. */
static inline void put_file(const char *root, const char *rel, const char *text)
{
    char path[4096], cmd[4200];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* Removes the tree root and frees its name. */
static inline void remove_root(char *root)
{
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
    free(root);
}

#endif
