/* clock.h: the monotonic clock and the median, for the code that times itself (session
 * statistics, speculative rounds, the benchmarks). */
#ifndef TOKENTOP_CLOCK_H
#define TOKENTOP_CLOCK_H

#include <stdlib.h>
#include <time.h>

/* Seconds on the monotonic clock (arbitrary origin). */
static inline double tt_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline double tt_now_ms(void)
{
    return tt_now_s() * 1e3;
}

/* Milliseconds of CPU time the calling thread has run (not the time it waited descheduled). */
static inline double tt_thread_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static inline int tt_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n), n >= 1; sorts v. */
static inline double tt_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, tt_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
