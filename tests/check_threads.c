/* check_threads.c: the pool hands out each work chunk exactly once whoever joins, the caller
 * always takes part, workers share long jobs, sleeping workers wake for the next job, and an
 * automatic pool runs jobs on the caller alone while its workers only slow them down. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/base/clock.h"
#include "core/cpu/threads.h"
#include "tests/testutil.h"

typedef struct {
    threadpool_chunks chunks;
    int calls[16];                 /* per ith; each written by its own thread only */
    int nth_seen[16];
    int *claimed;                  /* (n_chunks) */
    int chunk_sleep_us;
} count_job;

static void sleep_us(int us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000L};
    nanosleep(&ts, NULL);
}

static void count_run(void *varg, int ith, int nth)
{
    count_job *j = varg;
    j->calls[ith]++;
    j->nth_seen[ith] = nth;
    int c;
    while ((c = threadpool_next_chunk(&j->chunks)) >= 0) {
        __atomic_fetch_add(&j->claimed[c], 1, __ATOMIC_RELAXED);
        if (j->chunk_sleep_us)
            sleep_us(j->chunk_sleep_us);
    }
}

static void count_job_init(count_job *j, int n_chunks, int chunk_sleep_us)
{
    memset(j, 0, sizeof *j);
    j->claimed = calloc((size_t)n_chunks, sizeof(int));
    j->chunk_sleep_us = chunk_sleep_us;
}

/* A pool of n threads (0: automatic) that must open. */
static threadpool *pool_open(int n)
{
    threadpool *p;
    ck_assert_int_eq(threadpool_create(n, &p, NULL), TT_OK);
    return p;
}

/* One job of n chunks (counted in *chunks) run by the pool. */
static void run_chunks(threadpool *p, threadpool_chunks *chunks, int n, threadpool_fn fn, void *job)
{
    threadpool_chunks_init(chunks, n);
    threadpool_run(p, fn, job);
}

/* Each of the first n chunks was claimed exactly times times. */
static void assert_claimed(const int *claimed, int n, int times)
{
    for (int c = 0; c < n; c++)
        ck_assert_int_eq(claimed[c], times);
}

START_TEST(every_chunk_runs_once_and_the_caller_always_joins)
{
    threadpool *p = pool_open(3);
    ck_assert_int_eq(threadpool_size(p), 3);
    count_job j;
    count_job_init(&j, 64, 0);
    for (int r = 0; r < 2000; r++)
        run_chunks(p, &j.chunks, 64, count_run, &j);
    assert_claimed(j.claimed, 64, 2000);
    ck_assert_int_eq(j.calls[0], 2000);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_le(j.calls[i], 2000);
        if (j.calls[i])
            ck_assert_int_eq(j.nth_seen[i], 3);
    }
    ck_assert_int_eq(j.calls[3], 0);
    free(j.claimed);
    threadpool_free(p);
}
END_TEST

START_TEST(workers_share_a_long_job)
{
    /* 40 chunks of 2 ms each: the caller alone would need 80 ms; the worker must take some. */
    threadpool *p = pool_open(2);
    count_job j;
    count_job_init(&j, 40, 2000);
    run_chunks(p, &j.chunks, 40, count_run, &j);
    ck_assert_int_eq(j.calls[1], 1);
    assert_claimed(j.claimed, 40, 1);
    free(j.claimed);
    threadpool_free(p);
}
END_TEST

START_TEST(sleeping_workers_wake_for_the_next_job)
{
    /* Pauses longer than the spin window put the workers to sleep between jobs; a long job then
     * must still be shared, so the sleepers were woken. */
    threadpool *p = pool_open(2);
    count_job j;
    count_job_init(&j, 20, 2000);
    for (int r = 0; r < 3; r++) {
        sleep_us(20000);
        run_chunks(p, &j.chunks, 20, count_run, &j);
    }
    ck_assert_int_ge(j.calls[1], 1);
    assert_claimed(j.claimed, 20, 3);
    free(j.claimed);
    threadpool_free(p);
}
END_TEST

typedef struct {
    threadpool_chunks chunks;
    int *claimed;                  /* (n) */
} chunk_job;

static void chunk_run(void *varg, int ith, int nth)
{
    chunk_job *j = varg;
    int c;
    while ((c = threadpool_next_chunk(&j->chunks)) >= 0)
        __atomic_fetch_add(&j->claimed[c], 1, __ATOMIC_RELAXED);
}

START_TEST(chunks_are_handed_out_exactly_once)
{
    threadpool *p = pool_open(4);
    chunk_job j;
    j.claimed = calloc(1000, sizeof(int));
    for (int r = 0; r < 50; r++)
        run_chunks(p, &j.chunks, 1000, chunk_run, &j);
    assert_claimed(j.claimed, 1000, 50);
    free(j.claimed);
    threadpool_free(p);
}
END_TEST

/* Runs of chunks (threadpool_next_run): each claim's first index and length, by claim order. */
typedef struct {
    threadpool_chunks chunks;
    int *claimed;                  /* (n) */
    int min, div;
    int starts[1000], lens[1000];
    int n_runs;                    /* accessed atomically */
} run_job;

static void run_run(void *varg, int ith, int nth)
{
    run_job *j = varg;
    int c, n;
    while ((c = threadpool_next_run(&j->chunks, j->min, j->div, &n)) >= 0) {
        int r = __atomic_fetch_add(&j->n_runs, 1, __ATOMIC_RELAXED);
        j->starts[r] = c;
        j->lens[r] = n;
        for (int i = c; i < c + n; i++)
            __atomic_fetch_add(&j->claimed[i], 1, __ATOMIC_RELAXED);
    }
}

START_TEST(runs_cover_every_chunk_once_and_shrink_to_the_minimum)
{
    threadpool *p = pool_open(2);
    run_job j = {.min = 3, .div = 4};
    j.claimed = calloc(1000, sizeof(int));
    for (int r = 0; r < 20; r++) {
        j.n_runs = 0;
        run_chunks(p, &j.chunks, 1000, run_run, &j);
    }
    assert_claimed(j.claimed, 1000, 20);
    /* On one thread the claims come in order: a quarter of what is left, then never below 3
     * except for the last run, which takes what remains. */
    threadpool *one = pool_open(1);
    j.n_runs = 0;
    memset(j.claimed, 0, 1000 * sizeof(int));
    run_chunks(one, &j.chunks, 1000, run_run, &j);
    assert_claimed(j.claimed, 1000, 1);
    int next = 0;
    for (int r = 0; r < j.n_runs; r++) {
        int left = 1000 - next, want = left / 4 > 3 ? left / 4 : 3;
        ck_assert_int_eq(j.starts[r], next);
        ck_assert_int_eq(j.lens[r], want < left ? want : left);
        next += j.lens[r];
    }
    ck_assert_int_eq(next, 1000);
    ck_assert_int_eq(j.lens[0], 250);
    /* div 1 takes everything at once; an empty job hands out nothing. */
    j.div = 1;
    j.n_runs = 0;
    run_chunks(one, &j.chunks, 7, run_run, &j);
    ck_assert_int_eq(j.n_runs, 1);
    ck_assert_int_eq(j.lens[0], 7);
    j.n_runs = 0;
    run_chunks(one, &j.chunks, 0, run_run, &j);
    ck_assert_int_eq(j.n_runs, 0);
    free(j.claimed);
    threadpool_free(one);
    threadpool_free(p);
}
END_TEST

START_TEST(default_size_is_one_thread_per_core)
{
    threadpool *p = pool_open(0);
    ck_assert_int_eq(threadpool_size(p), threadpool_cores());
    threadpool_stats st;
    threadpool_get_stats(p, &st);
    ck_assert(st.adaptive == (threadpool_cores() > 1));
    threadpool_free(p);
    p = pool_open(1);
    count_job j;
    count_job_init(&j, 5, 0);
    run_chunks(p, &j.chunks, 5, count_run, &j);
    ck_assert_int_eq(j.calls[0], 1);
    ck_assert_int_eq(j.claimed[4], 1);
    free(j.claimed);
    threadpool_free(p);
    threadpool_free(NULL);
}
END_TEST

/* A worker that holds its chunk for 5 ms while the caller's take 100 us each: what a worker
 * descheduled by another process looks like from the caller, which waits for it. */
typedef struct {
    threadpool_chunks chunks;
    int calls[2];
    int caller_us, worker_us;
    int caller_joined_us;          /* if > 0: the caller's chunks take this long in a job the
                                      worker joined (the caller descheduled while it runs) */
    int worker_in;                 /* the worker joined the current job (atomic) */
} stall_job;

static void stall_run(void *varg, int ith, int nth)
{
    stall_job *j = varg;
    j->calls[ith]++;
    if (ith > 0)
        __atomic_store_n(&j->worker_in, 1, __ATOMIC_RELAXED);
    while (threadpool_next_chunk(&j->chunks) >= 0) {
        bool joined = j->caller_joined_us > 0 && __atomic_load_n(&j->worker_in, __ATOMIC_RELAXED);
        sleep_us(ith > 0 ? j->worker_us : joined ? j->caller_joined_us : j->caller_us);
    }
}

/* Runs jobs of 8 chunks until the pool's first window has closed, at most 200 jobs. */
static void run_until_window(threadpool *p, stall_job *j)
{
    threadpool_stats st;
    for (int r = 0; r < 200; r++) {
        run_chunks(p, &j->chunks, 8, stall_run, j);
        threadpool_get_stats(p, &st);
        if (st.gain > 0)
            return;
    }
}

/* Runs jobs of 8 chunks for ms milliseconds; returns how many. */
static int run_jobs_for(threadpool *p, stall_job *j, double ms)
{
    int jobs = 0;
    double t0 = tt_now_s();
    for (; tt_now_s() - t0 < ms * 1e-3; jobs++)
        run_chunks(p, &j->chunks, 8, stall_run, j);
    return jobs;
}

/* An adaptive pool of 2 (the load not watched) after a first window of jobs whose worker
 * chunks stall the caller: it must have dropped to one thread. */
static threadpool *pool_after_stalls(stall_job *j, threadpool_stats *st)
{
    threadpool *p;
    ck_assert_int_eq(threadpool_create_adaptive(2, false, &p, NULL), TT_OK);
    *j = (stall_job){.caller_us = 100, .worker_us = 5000};
    run_until_window(p, j);
    threadpool_get_stats(p, st);
    ck_assert(st->adaptive);
    ck_assert(st->gain > 0 && st->gain < THREADPOOL_MIN_GAIN);
    ck_assert_int_eq(st->active, 1);
    return p;
}

START_TEST(an_automatic_pool_drops_workers_that_only_make_the_caller_wait)
{
    stall_job j;
    threadpool_stats st;
    threadpool *p = pool_after_stalls(&j, &st);
    char line[200];
    threadpool_describe(p, line, sizeof line);
    ck_assert_msg(strstr(line, "1 in use") != NULL, "%s", line);
    /* During the back-off the worker is not even asked: every chunk runs on the caller. (Jobs
     * for half the back-off only: on a loaded machine ten of them can outlast it.) */
    int worker_calls = j.calls[1];
    int jobs = run_jobs_for(p, &j, THREADPOOL_BACKOFF_MS * 0.5);
    ck_assert_int_eq(j.calls[1], worker_calls);
    threadpool_get_stats(p, &st);
    ck_assert_uint_ge(st.jobs_serial, (unsigned)jobs);
    threadpool_free(p);
}
END_TEST

/* While solo, jobs run on the caller alone and are not counted; cleared, the workers join again. */
START_TEST(a_solo_pool_runs_jobs_on_the_caller_alone_and_uncounted)
{
    threadpool *p;
    ck_assert_int_eq(threadpool_create_adaptive(2, false, &p, NULL), TT_OK);
    count_job c;
    count_job_init(&c, 64, 20);
    run_chunks(p, &c.chunks, 64, count_run, &c);       /* measured: the pool goes parallel */
    threadpool_stats st;
    threadpool_get_stats(p, &st);
    unsigned long long par = st.jobs_parallel, ser = st.jobs_serial;
    int worker_calls = c.calls[1];
    threadpool_set_solo(p, true);
    for (int r = 0; r < 20; r++)
        run_chunks(p, &c.chunks, 64, count_run, &c);
    assert_claimed(c.claimed, 64, 21);
    ck_assert_int_eq(c.calls[1], worker_calls);
    threadpool_get_stats(p, &st);
    ck_assert_uint_eq(st.jobs_parallel, par);
    ck_assert_uint_eq(st.jobs_serial, ser);
    threadpool_set_solo(p, false);
    for (int r = 0; r < 20 && c.calls[1] == worker_calls; r++)
        run_chunks(p, &c.chunks, 64, count_run, &c);
    ck_assert_int_gt(c.calls[1], worker_calls);        /* 20 ms of chunks: the worker joins */
    free(c.claimed);
    threadpool_free(p);
}
END_TEST

START_TEST(an_automatic_pool_keeps_workers_that_pay_and_retries_after_the_back_off)
{
    stall_job j;
    threadpool_stats st;
    threadpool *p = pool_after_stalls(&j, &st);
    /* Then jobs whose chunks take 2 ms on either thread (long beside a worker's wake-up): the
     * worker takes about half and a window's gain is near 2. After the back-off the pool must
     * try again, see it and stay parallel (retries allowed: a loaded machine can spoil one
     * window; within 3 s of such jobs one must pass). */
    j.caller_us = j.worker_us = 2000;
    int worker_calls = j.calls[1];
    bool kept = false;
    double t0 = tt_now_s();
    while (!kept && tt_now_s() - t0 < 3.0) {
        double gain0 = st.gain;
        run_chunks(p, &j.chunks, 8, stall_run, &j);
        threadpool_get_stats(p, &st);
        kept = st.gain != gain0 && st.gain >= THREADPOOL_MIN_GAIN && st.active == 2;
    }
    ck_assert_msg(kept, "last window's gain %.2f, %d in use", st.gain, st.active);
    ck_assert_int_gt(j.calls[1], worker_calls);
    threadpool_free(p);
}
END_TEST

static void *spin_until_cleared(void *flag)
{
    while (__atomic_load_n((int *)flag, __ATOMIC_RELAXED))
        ;
    return NULL;
}

/* n threads (not a pool's) spinning until *flag is cleared: one per core keeps every core busy. */
static pthread_t *spin_cores(int *flag, int n)
{
    pthread_t *spinners = calloc((size_t)n, sizeof *spinners);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(pthread_create(&spinners[i], NULL, spin_until_cleared, flag), 0);
    return spinners;
}

/* An adaptive pool of 2 watching the load, opened beside n spinners (spin_cores), once it can
 * have looked at /proc/stat. */
static threadpool *pool_beside_spinners(int *flag, int n, pthread_t **spinners)
{
    *spinners = spin_cores(flag, n);
    threadpool *p;
    ck_assert_int_eq(threadpool_create_adaptive(2, true, &p, NULL), TT_OK);
    sleep_us(5 * THREADPOOL_LOAD_FIRST_MS * 1000);
    return p;
}

static void stop_spinners(pthread_t *spinners, int *flag, int n)
{
    __atomic_store_n(flag, 0, __ATOMIC_RELAXED);
    for (int i = 0; i < n; i++)
        pthread_join(spinners[i], NULL);
    free(spinners);
}

static void pool_sees_no_core_free_beside_spinners(void);

START_TEST(an_automatic_pool_counts_other_busy_threads)
{
    pool_sees_no_core_free_beside_spinners();
}
END_TEST

START_TEST(a_niced_pool_counts_niced_busy_threads_as_others)
{
    /* `nice make test`: the spinners are niced as the pool is, and their time counts under
     * /proc/stat's "nice"; they take their share of a core from the pool all the same. */
    errno = 0;
    if (nice(5) == -1 && errno != 0)
        ck_abort_msg("nice(5): %s", strerror(errno));
    pool_sees_no_core_free_beside_spinners();
}
END_TEST

/* As many spinning threads as cores: no core is free for a worker. The pool must see that at
 * its first look and run jobs on the caller alone, without even a parallel window before
 * THREADPOOL_PROBE_MS, and say so. */
static void pool_sees_no_core_free_beside_spinners(void)
{
    int n = threadpool_cores(), spin = 1;
    pthread_t *spinners;
    threadpool *p = pool_beside_spinners(&spin, n, &spinners);
    stall_job j = {.caller_us = 100, .worker_us = 100};
    run_jobs_for(p, &j, THREADPOOL_PROBE_MS * 0.5);
    threadpool_stats st;
    threadpool_get_stats(p, &st);
    char line[200];
    threadpool_describe(p, line, sizeof line);
    stop_spinners(spinners, &spin, n);
#ifdef __linux__
    ck_assert_msg(st.others >= THREADPOOL_CORE_TAKEN, "others %.2f", st.others);
    ck_assert(st.load_limited);
    ck_assert_int_eq(st.active, 1);
    ck_assert_int_eq(j.calls[1], 0);
    ck_assert_msg(strstr(line, "other processes busy on") != NULL, "%s", line);
#else
    ck_assert(st.others >= 0 || st.others == -1.0);   /* no /proc/stat: the gain alone decides */
#endif
    threadpool_free(p);
}

START_TEST(an_automatic_pool_runs_on_the_caller_alone_until_its_first_look_at_the_load)
{
    /* Spinners on every core, and jobs from the moment the pool starts, before it can have
     * measured the load: the worker must not be asked then either (a short run beside a busy
     * process lost its first THREADPOOL_LOAD_FIRST_MS to a descheduled worker), nor after the
     * first look finds no core free. */
    int n = threadpool_cores(), spin = 1;
    pthread_t *spinners = spin_cores(&spin, n);
    threadpool *p;
    ck_assert_int_eq(threadpool_create_adaptive(2, true, &p, NULL), TT_OK);
    stall_job j = {.caller_us = 100, .worker_us = 100};
    run_jobs_for(p, &j, THREADPOOL_PROBE_MS * 0.5);
    threadpool_stats st;
    threadpool_get_stats(p, &st);
    stop_spinners(spinners, &spin, n);
#ifdef __linux__
    ck_assert_int_eq(j.calls[1], 0);
    ck_assert_uint_eq(st.jobs_parallel, 0);
    ck_assert(st.load_limited);
#else
    (void)st;
#endif
    threadpool_free(p);
}
END_TEST

START_TEST(a_busy_first_look_is_checked_again_after_the_first_interval_not_a_whole_one)
{
    /* A first look (THREADPOOL_LOAD_FIRST_MS of /proc/stat) finds every core taken; the load
     * then stops. The pool must look again THREADPOOL_LOAD_FIRST_MS later, not after
     * THREADPOOL_LOAD_INTERVAL_MS: on an idle machine a 10 ms burst of another process in that
     * first window reads as half a core, and a short run spent its whole first 100 ms on one
     * thread for it. Found free then, the workers take part. */
    int n = threadpool_cores(), spin = 1;
    pthread_t *spinners = spin_cores(&spin, n);
    threadpool *p;
    ck_assert_int_eq(threadpool_create_adaptive(2, true, &p, NULL), TT_OK);
    stall_job j = {.caller_us = 100, .worker_us = 100};
    threadpool_stats st = {0};
    double t0 = tt_now_s();
    while (st.looks == 0 && tt_now_s() - t0 < 1.0) {
        run_chunks(p, &j.chunks, 8, stall_run, &j);
        threadpool_get_stats(p, &st);
    }
    stop_spinners(spinners, &spin, n);
#ifdef __linux__
    ck_assert_uint_eq(st.looks, 1);
    ck_assert_msg(st.others >= THREADPOOL_CORE_TAKEN, "others %.2f", st.others);
    double t1 = tt_now_s();
    while (st.looks == 1 && tt_now_s() - t1 < 1.0) {
        run_chunks(p, &j.chunks, 8, stall_run, &j);
        threadpool_get_stats(p, &st);
    }
    const double again_ms = (tt_now_s() - t1) * 1e3;
    ck_assert_msg(again_ms < 0.8 * THREADPOOL_LOAD_INTERVAL_MS, "looked again after %.1f ms",
                  again_ms);
    if (st.others < THREADPOOL_CORE_TAKEN) {   /* free (a loaded machine may still be busy) */
        run_jobs_for(p, &j, THREADPOOL_WINDOW_MS);
        threadpool_get_stats(p, &st);
        ck_assert_uint_gt(st.jobs_parallel, 0);
    }
#endif
    threadpool_free(p);
}
END_TEST

START_TEST(beside_busy_threads_a_probe_is_judged_by_its_time_per_chunk)
{
    /* Beside spinners on every core, jobs whose caller chunks take 3 ms whenever the worker
     * joins (as a caller descheduled mid-share) and 100 us otherwise: the caller's time per
     * chunk makes the workers look 8x faster, yet the jobs are slower with them. After the
     * probe the pool must be back on one thread, with the gain it measured below the bar. */
    int n = threadpool_cores(), spin = 1;
    pthread_t *spinners;
    threadpool *p = pool_beside_spinners(&spin, n, &spinners);
    stall_job j = {.caller_us = 100, .worker_us = 100, .caller_joined_us = 3000};
    threadpool_stats st = {0};
    double t0 = tt_now_s();
    while (tt_now_s() - t0 < 5.0) {
        __atomic_store_n(&j.worker_in, 0, __ATOMIC_RELAXED);
        run_chunks(p, &j.chunks, 8, stall_run, &j);
        threadpool_get_stats(p, &st);
        if (st.gain > 0 && st.jobs_parallel > 0)
            break;
    }
    stop_spinners(spinners, &spin, n);
#ifdef __linux__
    ck_assert_msg(st.gain > 0 && st.gain < THREADPOOL_MIN_GAIN_BUSY, "gain %.2f", st.gain);
    ck_assert_msg(st.lone_chunk_us > 0, "no serial stretch measured");
    ck_assert_int_eq(st.active, 1);
#endif
    threadpool_free(p);
}
END_TEST

START_TEST(an_explicit_thread_count_is_never_dropped)
{
    threadpool *p = pool_open(2);
    stall_job j = {.caller_us = 100, .worker_us = 2000};
    for (int r = 0; r < 60; r++)
        run_chunks(p, &j.chunks, 8, stall_run, &j);
    threadpool_stats st;
    threadpool_get_stats(p, &st);
    ck_assert(!st.adaptive);
    ck_assert_int_eq(st.active, 2);
    char line[200];
    threadpool_describe(p, line, sizeof line);
    ck_assert_str_eq(line, "2 threads (--threads)");
    threadpool_free(p);
    ck_assert_int_eq(threadpool_create_adaptive(0, false, &p, NULL), TT_ERR_ARG);
    ck_assert_ptr_null(p);
}
END_TEST

START_TEST(absurd_thread_counts_are_refused)
{
    threadpool *p = (threadpool *)1;
    tt_error err;
    ck_assert_int_eq(threadpool_create(100000, &p, &err), TT_ERR_ARG);
    ck_assert_ptr_null(p);
    ck_assert(strstr(err.msg, "100000") != NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("threads");
    TCase *tc = tu_add_case(s, "threads", TU_TESTS(
            every_chunk_runs_once_and_the_caller_always_joins, workers_share_a_long_job,
            sleeping_workers_wake_for_the_next_job, chunks_are_handed_out_exactly_once,
            runs_cover_every_chunk_once_and_shrink_to_the_minimum,
            default_size_is_one_thread_per_core, absurd_thread_counts_are_refused,
            an_automatic_pool_drops_workers_that_only_make_the_caller_wait,
            a_solo_pool_runs_jobs_on_the_caller_alone_and_uncounted,
            an_automatic_pool_keeps_workers_that_pay_and_retries_after_the_back_off,
            an_automatic_pool_counts_other_busy_threads,
            a_busy_first_look_is_checked_again_after_the_first_interval_not_a_whole_one,
            an_automatic_pool_runs_on_the_caller_alone_until_its_first_look_at_the_load,
            beside_busy_threads_a_probe_is_judged_by_its_time_per_chunk,
            an_explicit_thread_count_is_never_dropped,
            a_niced_pool_counts_niced_busy_threads_as_others));   /* last: nice() outlives it unforked */
    tcase_set_timeout(tc, 30);
    return tu_run_suite(s);
}
