/* check_threads.c: the pool hands out each work chunk exactly once whoever joins, the caller
 * always takes part, workers share long jobs, and sleeping workers wake for the next job. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/threads.h"
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

START_TEST(every_chunk_runs_once_and_the_caller_always_joins)
{
    threadpool *p;
    ck_assert_int_eq(threadpool_create(3, &p, NULL), TT_OK);
    ck_assert_int_eq(threadpool_size(p), 3);
    count_job j;
    count_job_init(&j, 64, 0);
    for (int r = 0; r < 2000; r++) {
        threadpool_chunks_init(&j.chunks, 64);
        threadpool_run(p, count_run, &j);
    }
    for (int c = 0; c < 64; c++)
        ck_assert_int_eq(j.claimed[c], 2000);
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
    threadpool *p;
    ck_assert_int_eq(threadpool_create(2, &p, NULL), TT_OK);
    count_job j;
    count_job_init(&j, 40, 2000);
    threadpool_chunks_init(&j.chunks, 40);
    threadpool_run(p, count_run, &j);
    ck_assert_int_eq(j.calls[1], 1);
    for (int c = 0; c < 40; c++)
        ck_assert_int_eq(j.claimed[c], 1);
    free(j.claimed);
    threadpool_free(p);
}
END_TEST

START_TEST(sleeping_workers_wake_for_the_next_job)
{
    /* Pauses longer than the spin window put the workers to sleep between jobs; a long job then
     * must still be shared, so the sleepers were woken. */
    threadpool *p;
    ck_assert_int_eq(threadpool_create(2, &p, NULL), TT_OK);
    count_job j;
    count_job_init(&j, 20, 2000);
    for (int r = 0; r < 3; r++) {
        sleep_us(20000);
        threadpool_chunks_init(&j.chunks, 20);
        threadpool_run(p, count_run, &j);
    }
    ck_assert_int_ge(j.calls[1], 1);
    for (int c = 0; c < 20; c++)
        ck_assert_int_eq(j.claimed[c], 3);
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
    threadpool *p;
    ck_assert_int_eq(threadpool_create(4, &p, NULL), TT_OK);
    chunk_job j;
    j.claimed = calloc(1000, sizeof(int));
    for (int r = 0; r < 50; r++) {
        threadpool_chunks_init(&j.chunks, 1000);
        threadpool_run(p, chunk_run, &j);
    }
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(j.claimed[i], 50);
    free(j.claimed);
    threadpool_free(p);
}
END_TEST

START_TEST(default_size_is_one_thread_per_core)
{
    threadpool *p;
    ck_assert_int_eq(threadpool_create(0, &p, NULL), TT_OK);
    ck_assert_int_eq(threadpool_size(p), threadpool_cores());
    threadpool_free(p);
    ck_assert_int_eq(threadpool_create(1, &p, NULL), TT_OK);
    count_job j;
    count_job_init(&j, 5, 0);
    threadpool_chunks_init(&j.chunks, 5);
    threadpool_run(p, count_run, &j);
    ck_assert_int_eq(j.calls[0], 1);
    ck_assert_int_eq(j.claimed[4], 1);
    free(j.claimed);
    threadpool_free(p);
    threadpool_free(NULL);
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
    TCase *tc = tcase_create("threads");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, every_chunk_runs_once_and_the_caller_always_joins);
    tcase_add_test(tc, workers_share_a_long_job);
    tcase_add_test(tc, sleeping_workers_wake_for_the_next_job);
    tcase_add_test(tc, chunks_are_handed_out_exactly_once);
    tcase_add_test(tc, default_size_is_one_thread_per_core);
    tcase_add_test(tc, absurd_thread_counts_are_refused);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
