/* SPDX-License-Identifier: MIT */
/*
 * The statistics and the verdict of `vpackctl measure` (ctl/ctl-measure.c),
 * an A/B run on the live host: level 0 (A: every domain held at level 0)
 * and the configured levels (B) alternated in rounds A B A B ..., as
 * MMTests compares two kernels, the first part of each round left out as
 * warm-up. Round 2i and round 2i+1 are pair i: a figure's difference is
 * taken pair by pair, so that a drift of the host's load over the run
 * (which both rounds of a pair share) does not widen it.
 *
 * Pure: numbers and /proc/cpuinfo's text in, numbers and words out.
 */
#ifndef VPACK_MEASURE_H
#define VPACK_MEASURE_H

#include <stdbool.h>
#include <stddef.h>

/*
 * A mean and the half-width of its two-sided 95 % confidence interval:
 * mean ± half. Student's t with n - 1 degrees of freedom over n values
 * taken as independent and normally distributed (ASSUMPTION: rounds long
 * enough to settle are close to that; a figure whose rounds drift shows a
 * wide interval rather than a wrong one only as far as that holds).
 */
struct vpack_interval {
    double mean;
    double half;   /* INFINITY for n = 1: one value bounds nothing */
    unsigned n;
};

/*
 * t(0.975, df), the 97.5th percentile of Student's t with df degrees of
 * freedom: the two-sided 95 % factor. df 1 to 30 from the table of the
 * NIST/SEMATECH e-Handbook of Statistical Methods (section 1.3.6.7.2,
 * four decimals); above, the Cornish-Fisher expansion in 1/df of
 * Abramowitz and Stegun 26.7.5 (within 1e-4 of the table at df 30). df 0:
 * INFINITY.
 */
double vpack_t975(unsigned df);

/* The interval of x[0..n). -EINVAL for n = 0 or a value that is not finite. */
int vpack_interval_of(const double *x, unsigned n, struct vpack_interval *out);

/* True when the interval lies wholly above or wholly below 0. */
bool vpack_interval_excludes_zero(const struct vpack_interval *i);

/* One figure over n pairs of rounds: a[i] (level 0) and b[i] (configured). */
struct vpack_ab {
    struct vpack_interval a, b;
    struct vpack_interval diff; /* over the pairs' a[i] - b[i]: level 0 minus configured */
};

/* -EINVAL as vpack_interval_of() for any of the three. */
int vpack_ab_of(const double *a, const double *b, unsigned n, struct vpack_ab *out);

/*
 * The share of a window in which a whole package was idle, from the idle
 * shares of its n CPUs over that window (/proc/stat, one number per CPU,
 * not when each was idle): at most the least idle CPU's share, *hi; at
 * least 1 - the sum of the CPUs' busy shares (every CPU busy at a
 * different time), *lo, 0 if that is below 0. Equal when n is 1. n 0:
 * both 0.
 */
void vpack_package_idle_bounds(const double *idle, unsigned n, double *lo, double *hi);

/* The CPU of /proc/cpuinfo's first processor. */
struct vpack_cpu_model {
    char vendor[16]; /* "GenuineIntel", "AuthenticAMD"; "" when not said */
    int family;      /* -1 when not said */
    int model;       /* -1 when not said */
};

/*
 * Reads vendor_id, cpu family and model of the first processor from a
 * /proc/cpuinfo text of len bytes (x86's keys; other architectures leave
 * them unset). Returns 0, or -EINVAL when no processor names a vendor.
 */
int vpack_cpuinfo_model(const char *text, size_t len, struct vpack_cpu_model *out);

/*
 * Whether package C6 has system-wide scope on this CPU: entered only when
 * every core of every socket is in core C6, so that a parked package next
 * to a busy one stays out of it. True for the Intel Xeon server models
 * Intel's pepc documentation (docs/misc-c6p-c6sp.md, 2025: "Package C6 has
 * global system scope on Intel Xeons") names: Skylake/Cascade
 * Lake/Cooper Lake-SP (family 6 model 85), Ice Lake-SP and -D (106, 108),
 * Sapphire Rapids (143), Emerald Rapids (207), Granite Rapids (173, 174)
 * and Sierra Forest (175); model numbers from the kernel's
 * arch/x86/include/asm/intel-family.h. False for every other CPU: not
 * known to be so, which is not known to be otherwise.
 */
bool vpack_pc6_system_wide(const struct vpack_cpu_model *m);

/* Why no saving could be told (flags). */
enum {
    VPACK_WHY_NO_ENERGY = 1u << 0, /* no RAPL package energy: cannot be measured here */
    VPACK_WHY_OVERLAP = 1u << 1,   /* the saving's interval holds 0 */
    VPACK_WHY_PC6_WIDE = 1u << 2,  /* package C6 is system-wide on this CPU */
};

enum vpack_verdict_kind {
    VPACK_VERDICT_SAVED,  /* packing used less energy: the interval is above 0 */
    VPACK_VERDICT_COST,   /* packing used more: the interval is below 0 */
    VPACK_VERDICT_NONE,   /* no measurable saving: see why */
};

struct vpack_verdict_in {
    bool has_energy;               /* RAPL gave the host's package energy in every round */
    struct vpack_ab energy_w;      /* the host's package power, W (diff: the saving) */
    bool pc6_system_wide;          /* vpack_pc6_system_wide() of this host */
    const struct vpack_cpu_model *cpu; /* for the words; may be NULL */
    unsigned npackages;
    const int *package_ids;        /* [npackages] */
    const struct vpack_ab *idle;   /* [npackages]: whole-package idle share, 0 to 1 */
};

struct vpack_verdict {
    enum vpack_verdict_kind kind;
    unsigned why;                  /* VPACK_WHY_* flags, for VPACK_VERDICT_NONE */
    double watts, half;            /* the saving (level 0 minus configured), W, when has_energy */
};

/*
 * The verdict: SAVED or COST when the saving's interval excludes 0, else
 * NONE with why: no energy (then the idle-residency difference is what
 * the text gives), or the intervals overlap; PC6_WIDE is added to NONE
 * when the CPU says so (a reason the saving may be small, not proof).
 */
void vpack_verdict_decide(const struct vpack_verdict_in *in, struct vpack_verdict *out);

/*
 * The verdict in words, one line without newline: "packing saved X ± Y W
 * here (...)", "packing cost X ± Y W here (...)" or "no measurable saving:
 * REASON; REASON", the idle-residency difference per package (configured
 * minus level 0, percentage points) when energy cannot be measured. NULL
 * when out of memory; the caller frees it.
 */
char *vpack_verdict_text(const struct vpack_verdict_in *in, const struct vpack_verdict *v);

#endif
