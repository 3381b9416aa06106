// SPDX-License-Identifier: MIT
/*
 * The floor under the agent's cost on this machine: a process that does
 * nothing but wake once per interval (and, with --proc-stat, read
 * /proc/stat as vpackd does every interval: pread from a descriptor held
 * open) costs this much CPU per wake, from its own /proc/self/schedstat.
 * Printed as one line, "wake_ns=N stat_ns=N wakes=N", for bench-report.py.
 *
 * A process's first wakes cost several times the later ones (measured here:
 * 260-560 us against 80-110 us, page faults and cold caches), so two wakes
 * are spent first and not counted, and the two kinds are measured in the
 * order A B B A, half the wakes each time, so that a drift of the machine
 * over the run falls on both alike.
 *
 *   bench-wake [WAKES [INTERVAL_MS]]       (default 10 wakes of 1000 ms)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* This thread's run time in ns, or -1. */
static long long run_ns(void)
{
    char b[128];
    int fd = open("/proc/self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, b, sizeof(b) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    b[n] = '\0';
    return atoll(b);
}

/* Run time per wake over wakes sleeps of interval_ms, reading /proc/stat each time if asked. */
static long long per_wake(int wakes, long interval_ms, int read_stat)
{
    static int stat_fd = -1;
    struct timespec next;
    if (read_stat && stat_fd < 0 && (stat_fd = open("/proc/stat", O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    long long r0 = run_ns();
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (int i = 0; i < wakes; i++) {
        next.tv_nsec += (interval_ms % 1000) * 1000000L;
        next.tv_sec += interval_ms / 1000 + next.tv_nsec / 1000000000L;
        next.tv_nsec %= 1000000000L;
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
            ;
        if (read_stat) {
            static char buf[1 << 16];
            ssize_t n;
            off_t off = 0;
            while ((n = pread(stat_fd, buf, sizeof(buf), off)) > 0)
                off += n;
        }
    }
    long long r1 = run_ns();
    return r0 < 0 || r1 < 0 ? -1 : (r1 - r0) / wakes;
}

int main(int argc, char **argv)
{
    int wakes = argc > 1 ? atoi(argv[1]) : 10;
    long interval = argc > 2 ? atol(argv[2]) : 1000;
    if (wakes <= 0 || interval <= 0) {
        fprintf(stderr, "usage: bench-wake [WAKES [INTERVAL_MS]]\n");
        return 2;
    }
    int half = wakes / 2 > 0 ? wakes / 2 : 1;
    per_wake(2, interval, 1); /* warm-up, not counted */
    long long wa = per_wake(half, interval, 0), sa = per_wake(half, interval, 1);
    long long sb = per_wake(half, interval, 1), wb = per_wake(half, interval, 0);
    long long w = wa < 0 || wb < 0 ? -1 : (wa + wb) / 2;
    long long s = sa < 0 || sb < 0 ? -1 : (sa + sb) / 2;
    printf("wake_ns=%lld stat_ns=%lld wakes=%d interval_ms=%ld\n", w, s, 2 * half, interval);
    return w < 0 || s < 0;
}
