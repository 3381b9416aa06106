// SPDX-License-Identifier: MIT
/*
 * duty SHARE [PERIOD_MS]: keeps one CPU's worth of SHARE (0..1) busy, in
 * bursts of SHARE * PERIOD_MS (default 100 ms) of spinning followed by the
 * rest of the period asleep, until killed. Run it under nice -n 19 for a
 * background load the scheduler gives way to. The spin reads the monotonic
 * clock, so the share holds on any CPU speed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: duty SHARE [PERIOD_MS]\n");
        return 2;
    }
    char *end;
    double share = strtod(argv[1], &end);
    if (*end || !(share >= 0 && share <= 1)) {
        fprintf(stderr, "duty: SHARE must be a number from 0 to 1, not '%s'\n", argv[1]);
        return 2;
    }
    double period = argc == 3 ? strtod(argv[2], &end) / 1000 : 0.1;
    if (argc == 3 && (*end || !(period > 0 && period <= 10))) {
        fprintf(stderr, "duty: PERIOD_MS must be from 1 to 10000, not '%s'\n", argv[2]);
        return 2;
    }
    for (;;) {
        double t0 = now_s();
        while (now_s() - t0 < share * period)
            ;
        double rest = period - (now_s() - t0);
        if (rest > 0) {
            struct timespec ts = {(time_t)rest, (long)((rest - (double)(time_t)rest) * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
}
