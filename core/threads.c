/* threads.c: the fork-join pool: a generation counter announces a job, workers poll it for a
 * short while and then sleep on a condition variable; a job-state word counts the workers inside
 * a job and closes it to latecomers once the caller's share is done. */
#include "core/threads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* How long an idle worker polls before it sleeps. Long enough to bridge the serial gaps of a
 * decode step (LayerNorm, bookkeeping: microseconds), short enough not to burn a shared core
 * between turns. */
#define THREADPOOL_SPIN_US 200

struct threadpool {
    int n;                          /* threads, the caller's included */
    pthread_t *workers;             /* (n - 1) */
    int started;                    /* workers created (for cleanup after a partial start) */

    threadpool_fn fn;
    void *arg;
    _Atomic unsigned generation;    /* bumped once per job (and once to stop) */
    _Atomic int job_state;          /* workers inside the current job, | JOB_CLOSED once the
                                       caller has finished its part: late workers stay out */
    _Atomic int sleepers;           /* workers blocked (or about to block) on wake */
    _Atomic int stop;

    pthread_mutex_t lock;
    pthread_cond_t wake;            /* workers wait here for a new generation */
    pthread_cond_t finished;        /* the caller waits here for the last worker to leave */
    _Atomic int caller_sleeping;
};

#define JOB_CLOSED 0x40000000

typedef struct {
    threadpool *pool;
    int ith;
} worker_arg;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

int threadpool_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

/* Waits until the generation differs from seen; returns the new one. */
static unsigned wait_generation(threadpool *p, unsigned seen)
{
    unsigned g;
    double t0 = 0.0;
    for (int i = 0;; i++) {
        g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g != seen)
            return g;
        cpu_relax();
        if ((i & 255) == 255) {
            if (t0 == 0.0)
                t0 = now_us();
            else if (now_us() - t0 > THREADPOOL_SPIN_US)
                break;
        }
    }
    /* Dekker-style handshake with threadpool_run: we publish sleepers before re-reading the
     * generation; the caller publishes the generation before reading sleepers, so at least one
     * of us sees the other (both seq_cst) and the wake-up cannot be lost. */
    pthread_mutex_lock(&p->lock);
    atomic_fetch_add(&p->sleepers, 1);
    while ((g = atomic_load(&p->generation)) == seen)
        pthread_cond_wait(&p->wake, &p->lock);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->lock);
    return g;
}

static void *worker_main(void *varg)
{
    worker_arg *wa = varg;
    threadpool *p = wa->pool;
    int ith = wa->ith;
    free(wa);
    unsigned seen = 0;
    for (;;) {
        seen = wait_generation(p, seen);
        if (atomic_load(&p->stop))
            return NULL;
        /* Join unless the caller already closed the job. fn and arg are read after joining:
         * they belong to the job joined (the caller rewrites them only once it has closed the
         * previous job and every worker inside has left). */
        int st = atomic_load(&p->job_state);
        bool joined = false;
        while (!(st & JOB_CLOSED))
            if (atomic_compare_exchange_weak(&p->job_state, &st, st + 1)) {
                joined = true;
                break;
            }
        if (!joined)
            continue;
        p->fn(p->arg, ith, p->n);
        if (atomic_fetch_sub(&p->job_state, 1) - 1 == JOB_CLOSED &&
            atomic_load(&p->caller_sleeping)) {
            pthread_mutex_lock(&p->lock);
            pthread_cond_signal(&p->finished);
            pthread_mutex_unlock(&p->lock);
        }
    }
}

static void wake_workers(threadpool *p)
{
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
    }
}

tt_status threadpool_create(int n_threads, threadpool **out, tt_error *err)
{
    *out = NULL;
    if (n_threads <= 0)
        n_threads = threadpool_cores();
    if (n_threads > 1024)
        return tt_fail(err, TT_ERR_ARG, "threads: %d threads requested, at most 1024", n_threads);
    threadpool *p = calloc(1, sizeof *p);
    if (!p)
        return tt_fail(err, TT_ERR_NOMEM, "threads: cannot allocate the pool");
    p->n = n_threads;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->finished, NULL);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            threadpool_free(p);
            return tt_fail(err, TT_ERR_NOMEM, "threads: cannot allocate %d workers", n_threads - 1);
        }
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (wa) {
            wa->pool = p;
            wa->ith = i;
        }
        int rc = wa ? pthread_create(&p->workers[i - 1], NULL, worker_main, wa) : -1;
        if (rc != 0) {
            free(wa);
            threadpool_free(p);
            return tt_fail(err, TT_ERR_NOMEM, "threads: cannot start worker %d of %d", i,
                           n_threads - 1);
        }
        p->started++;
    }
    *out = p;
    return TT_OK;
}

void threadpool_run(threadpool *p, threadpool_fn fn, void *arg)
{
    if (p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->job_state, 0);
    atomic_fetch_add(&p->generation, 1);       /* seq_cst: publishes fn, arg, job_state */
    wake_workers(p);
    fn(arg, 0, p->n);
    /* Our part returned, so every chunk has been claimed: workers that have not joined yet have
     * nothing left to do and must not start now; wait only for those inside. On a busy machine
     * a descheduled worker thus costs nothing instead of a scheduler time slice per job. */
    atomic_fetch_or(&p->job_state, JOB_CLOSED);
    double t0 = 0.0;
    for (int i = 0; atomic_load(&p->job_state) != JOB_CLOSED; i++) {
        cpu_relax();
        if ((i & 255) != 255)
            continue;
        if (t0 == 0.0) {
            t0 = now_us();
        } else if (now_us() - t0 > THREADPOOL_SPIN_US) {
            /* A worker inside was descheduled mid-chunk: stop burning our core. */
            pthread_mutex_lock(&p->lock);
            atomic_store(&p->caller_sleeping, 1);
            while (atomic_load(&p->job_state) != JOB_CLOSED)
                pthread_cond_wait(&p->finished, &p->lock);
            atomic_store(&p->caller_sleeping, 0);
            pthread_mutex_unlock(&p->lock);
            break;
        }
    }
}

int threadpool_size(const threadpool *p)
{
    return p->n;
}

void threadpool_free(threadpool *p)
{
    if (!p)
        return;
    if (p->started > 0) {
        atomic_store(&p->stop, 1);
        atomic_fetch_add(&p->generation, 1);
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
        for (int i = 0; i < p->started; i++)
            pthread_join(p->workers[i], NULL);
    }
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->finished);
    free(p->workers);
    free(p);
}

void threadpool_chunks_init(threadpool_chunks *c, int n_chunks)
{
    __atomic_store_n(&c->next, 0, __ATOMIC_RELAXED);
    c->end = n_chunks;
}

int threadpool_next_chunk(threadpool_chunks *c)
{
    int i = __atomic_fetch_add(&c->next, 1, __ATOMIC_RELAXED);
    return i < c->end ? i : -1;
}
