// SPDX-License-Identifier: MIT
/*
 * What a move costs the moved thread (issue 26, item 3: "the moved threads'
 * cache refill: measure it"): a thread walks a working set of W MiB (one
 * read per 64-byte line, over and over) for a window of its own CPU time,
 * once staying on one CPU and once moved between two CPUs every PERIOD ms
 * (sched_setaffinity, as a pin does to a vCPU thread). The lines it read
 * per second of its own CPU time give the rates; each move lost
 *
 *   refill = PERIOD * (1 - rate_moved / rate_stayed)
 *
 * of CPU time (the affinity call itself included). Rounds run in the order
 * stay, move, move, stay, so that a drift of the machine falls on both
 * alike; the report is the median of the rounds and their range. One line
 * per working set:
 *
 *   mib=W period_ms=P moves=N refill_ms=MEDIAN min=MIN max=MAX stay_glines_s=R
 *
 * It measures this machine's two CPUs, whatever they are (two cores, two
 * SMT siblings, or on a virtual machine two vCPUs wherever the hypervisor
 * put them): say which where the figure is used.
 *
 *   bench-refill [MIB,MIB,... [ROUNDS [PERIOD_MS [WINDOW_S]]]]
 *                (default 1,16,64 4 50 2)
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile uint64_t sink;

/* The thread's CPU time (a system call: read at the ends only) or the monotonic clock (vDSO). */
static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int pin_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof(set), &set);
}

/*
 * Walks buf (n bytes) for window seconds; with period > 0, moves between
 * cpus[0] and cpus[1] every period seconds (the monotonic clock: on a quiet
 * machine the thread runs all the time). Returns the lines read per second
 * of the thread's own CPU time, *moves the moves made.
 */
static double walk(const unsigned char *buf, size_t n, double window, double period,
                   const int cpus[2], unsigned *moves)
{
    uint64_t sum = 0, lines = 0;
    int at = 0;
    *moves = 0;
    if (pin_to(cpus[0]) < 0)
        return -1;
    double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    double t0 = clock_s(CLOCK_MONOTONIC), next = t0 + period, now = t0;
    while (now - t0 < window) {
        /* 64 lines (4 KiB) between clock reads: the vDSO's clock, no system call. */
        for (size_t off = 0; off < n && now - t0 < window; off += 4096) {
            for (size_t k = off; k < off + 4096 && k < n; k += 64)
                sum += buf[k];
            lines += 64;
            now = clock_s(CLOCK_MONOTONIC);
            if (period > 0 && now >= next) {
                at ^= 1;
                if (pin_to(cpus[at]) < 0)
                    return -1;
                (*moves)++;
                next = now + period;
            }
        }
    }
    sink = sum;
    return (double)lines / (clock_s(CLOCK_THREAD_CPUTIME_ID) - c0);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *list = argc > 1 ? argv[1] : "1,16,64";
    int rounds = argc > 2 ? atoi(argv[2]) : 4;
    double period = (argc > 3 ? atof(argv[3]) : 50) / 1000;
    double window = argc > 4 ? atof(argv[4]) : 2;
    int cpus[2], found = 0;
    cpu_set_t all;

    if (rounds < 1 || rounds > 100 || period <= 0 || window <= period) {
        fprintf(stderr, "usage: bench-refill [MIB,... [ROUNDS 1-100 [PERIOD_MS [WINDOW_S > PERIOD]]]]\n");
        return 2;
    }
    if (sched_getaffinity(0, sizeof(all), &all) < 0) {
        perror("bench-refill: sched_getaffinity");
        return 1;
    }
    for (int c = 0; c < CPU_SETSIZE && found < 2; c++)
        if (CPU_ISSET(c, &all))
            cpus[found++] = c;
    if (found < 2) {
        fprintf(stderr, "bench-refill: needs two CPUs to move between, has %d\n", found);
        return 1;
    }
    char *copy = strdup(list), *save = NULL;
    if (!copy)
        return 1;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long mib = atol(tok);
        if (mib < 1 || mib > 4096) {
            fprintf(stderr, "bench-refill: working set '%s' MiB: expected 1 to 4096\n", tok);
            free(copy);
            return 2;
        }
        size_t n = (size_t)mib << 20;
        unsigned char *buf = malloc(n);
        double *lost = calloc((size_t)rounds, sizeof(double)), stay_sum = 0;
        unsigned moves = 0, m;
        if (!buf || !lost) {
            fprintf(stderr, "bench-refill: out of memory\n");
            return 1;
        }
        memset(buf, 1, n);
        for (int r = 0; r < rounds; r++) {
            /* stay, move, move, stay: two of each, averaged. */
            double s1 = walk(buf, n, window / 2, 0, cpus, &m);
            double m1 = walk(buf, n, window / 2, period, cpus, &m);
            moves += m;
            double m2 = walk(buf, n, window / 2, period, cpus, &m);
            moves += m;
            double s2 = walk(buf, n, window / 2, 0, cpus, &m);
            if (s1 < 0 || m1 < 0 || m2 < 0 || s2 < 0) {
                fprintf(stderr, "bench-refill: sched_setaffinity: %s\n", strerror(errno));
                return 1;
            }
            double stay = (s1 + s2) / 2, moved = (m1 + m2) / 2;
            stay_sum += stay;
            lost[r] = period * 1000 * (1 - moved / stay);
        }
        qsort(lost, (size_t)rounds, sizeof(double), cmp_double);
        double med = rounds % 2 ? lost[rounds / 2] : (lost[rounds / 2 - 1] + lost[rounds / 2]) / 2;
        printf("mib=%ld period_ms=%.0f moves=%u refill_ms=%.3f min=%.3f max=%.3f "
               "stay_glines_s=%.3f cpus=%d,%d\n",
               mib, period * 1000, moves, med, lost[0], lost[rounds - 1],
               stay_sum / rounds / 1e9, cpus[0], cpus[1]);
        fflush(stdout);
        free(buf);
        free(lost);
    }
    free(copy);
    return 0;
}
