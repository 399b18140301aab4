/* threads.c: the fork-join pool: a generation counter announces a job, workers poll it for a
 * short while and then sleep on a condition variable; a job-state word counts the workers inside
 * a job and closes it to latecomers once the caller's share is done. An adaptive pool times its
 * jobs and runs them on the caller alone while the workers do not pay (threads.h). */
#include "core/threads.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
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

    /* Adaptive pools only; touched by the submitting thread alone, except job_claims. */
    bool adaptive;
    bool watch_load;                /* also look at the machine's runnable threads */
    _Atomic unsigned job_claims;    /* chunks the workers claimed in the current job */
    bool serial;                    /* jobs run on the caller alone until resume_us */
    double resume_us;               /* ... until then, when it looks at the load again */
    double probe_us;                /* from then, a busy machine does not stop a parallel window */
    double backoff_us;              /* the next back-off's length */
    double window_us, window_serial_us; /* the current window: measured, one-thread estimate */
    int window_jobs;
    double gain;                    /* of the last full window (0: none yet) */
    int others;                     /* runnable threads not ours at the last look (-1: unknown) */
    bool load_limited;              /* the last look left fewer cores than threads */
    int cores;                      /* the cores this process may run on */
    int cores_online;               /* the machine's: /proc/loadavg counts threads on all */
    _Atomic int active;             /* threads that take part in jobs; workers with ith >= active
                                       wait on parked instead of polling for jobs */
    _Atomic int parked_n;           /* workers waiting on parked */
    pthread_cond_t parked;
    unsigned long long jobs_parallel, jobs_serial;
};

#define JOB_CLOSED 0x40000000

typedef struct {
    threadpool *pool;
    int ith;
} worker_arg;

/* Chunks this thread has claimed with threadpool_next_chunk, ever: the difference over a job is
 * this thread's share of it. */
static _Thread_local unsigned chunks_claimed;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cores_online(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

int threadpool_cores(void)
{
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
#endif
    return cores_online();
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
        if (ith >= atomic_load(&p->active)) {
            /* Not wanted now (its core belongs to another process): block until that changes,
             * rather than poll for every job. pool_set_active raises active under the lock. */
            pthread_mutex_lock(&p->lock);
            atomic_fetch_add(&p->parked_n, 1);
            while (ith >= atomic_load(&p->active) && !atomic_load(&p->stop))
                pthread_cond_wait(&p->parked, &p->lock);
            atomic_fetch_sub(&p->parked_n, 1);
            pthread_mutex_unlock(&p->lock);
            continue;
        }
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
        unsigned claimed0 = chunks_claimed;
        p->fn(p->arg, ith, p->n);
        atomic_fetch_add_explicit(&p->job_claims, chunks_claimed - claimed0,
                                  memory_order_relaxed);   /* read after job_state drops */
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

static tt_status pool_start(int n_threads, bool adaptive, bool watch_load, threadpool **out,
                            tt_error *err)
{
    *out = NULL;
    if (n_threads > 1024)
        return tt_fail(err, TT_ERR_ARG, "threads: %d threads requested, at most 1024", n_threads);
    threadpool *p = calloc(1, sizeof *p);
    if (!p)
        return tt_fail(err, TT_ERR_NOMEM, "threads: cannot allocate the pool");
    p->n = n_threads;
    p->adaptive = adaptive;
    p->watch_load = watch_load;
    p->backoff_us = THREADPOOL_BACKOFF_MS * 1e3;
    p->others = -1;
    p->cores = threadpool_cores();
    p->cores_online = cores_online();
    p->serial = adaptive;           /* resume_us, probe_us 0: the first job runs a window */
    atomic_store(&p->active, n_threads);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->finished, NULL);
    pthread_cond_init(&p->parked, NULL);
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

tt_status threadpool_create(int n_threads, threadpool **out, tt_error *err)
{
    if (n_threads <= 0)
        return pool_start(threadpool_cores(), true, true, out, err);
    return pool_start(n_threads, false, false, out, err);
}

tt_status threadpool_create_adaptive(int n_threads, bool watch_load, threadpool **out,
                                    tt_error *err)
{
    if (n_threads < 1) {
        *out = NULL;
        return tt_fail(err, TT_ERR_ARG, "threads: %d threads requested, at least 1", n_threads);
    }
    return pool_start(n_threads, true, watch_load, out, err);
}

/* Threads that want a core right now (the fourth field of /proc/loadavg counts every runnable
 * thread on the machine), or -1 where that cannot be read. A few microseconds: read once per
 * window, not per job. */
static int running_threads(void)
{
    int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[128];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    double l1, l5, l15;
    int running;
    if (sscanf(buf, "%lf %lf %lf %d/", &l1, &l5, &l15, &running) != 4)
        return -1;
    return running;
}

/* How many of the pool's threads can each have a core of their own: the cores the runnable
 * threads of other processes leave, between 1 and n. A worker that must share its core with
 * another process is descheduled for whole time slices while the caller waits for its chunk:
 * that made two threads 1.5-2x slower than one with a single busy process beside them on 2
 * cores. n where the count cannot be read (the window's gain still decides). */
static int pool_free_threads(threadpool *p)
{
    int running = p->watch_load ? running_threads() : -1;
    p->load_limited = false;
    if (running < 0) {
        p->others = -1;
        return p->n;
    }
    /* ours among the runnable: the caller (it is reading) and the workers neither asleep nor
     * parked */
    int awake = p->n - 1 - atomic_load(&p->sleepers) - atomic_load(&p->parked_n);
    p->others = running - 1 - (awake > 0 ? awake : 0);
    if (p->others < 0)
        p->others = 0;
    if (p->cores < p->cores_online)  /* the others' share of our cores, spread evenly */
        p->others = (p->others * p->cores + p->cores_online / 2) / p->cores_online;
    int k = p->cores - p->others;
    if (k >= p->n)
        return p->n;
    p->load_limited = true;
    return k < 1 ? 1 : k;
}

static void pool_set_active(threadpool *p, int k)
{
    if (k > atomic_load(&p->active)) {
        pthread_mutex_lock(&p->lock);
        atomic_store(&p->active, k);
        pthread_cond_broadcast(&p->parked);
        pthread_mutex_unlock(&p->lock);
    } else {
        atomic_store(&p->active, k);
    }
}

/* One parallel job's accounting: it took job_us; the caller's own share took caller_us for
 * caller_chunks of the job's caller_chunks + worker_chunks. The caller alone would have taken
 * about caller_us per chunk times all of them (when it claimed none, the job counts as even).
 * The estimate is generous to the workers when threads share a saturated memory bus, which
 * only keeps a pool parallel where that costs nothing; what it catches is a worker kept off its
 * core while it holds a chunk, which makes the caller wait a scheduler time slice. */
static void pool_account(threadpool *p, double end_us, double job_us, double caller_us,
                         unsigned caller_chunks, unsigned worker_chunks)
{
    double serial_us = caller_chunks > 0
                           ? caller_us * (double)(caller_chunks + worker_chunks) / caller_chunks
                           : job_us;
    p->window_us += job_us;
    p->window_serial_us += serial_us;
    p->window_jobs++;
    /* A window closes when it is long enough to judge a gain, or as soon as it has lost more
     * than THREADPOOL_LOSS_MS against the caller alone, and a third of its time: one worker
     * descheduled for a time slice is enough evidence, and waiting for the full window would
     * only lose more. */
    bool full = p->window_us >= THREADPOOL_WINDOW_MS * 1e3 &&
                p->window_jobs >= THREADPOOL_WINDOW_JOBS;
    double loss_us = p->window_us - p->window_serial_us;
    if (!full && (loss_us < THREADPOOL_LOSS_MS * 1e3 || loss_us < 0.5 * p->window_serial_us))
        return;
    p->gain = p->window_serial_us / p->window_us;
    p->window_us = p->window_serial_us = 0.0;
    p->window_jobs = 0;
    int k = pool_free_threads(p);
    if ((p->gain >= THREADPOOL_MIN_GAIN && k > 1) || p->gain >= THREADPOOL_MIN_GAIN_BUSY) {
        /* Paying, on free cores; or paying so well beside other runnable threads that the
         * workers evidently get their share (long jobs, or others of lower priority). */
        p->backoff_us = THREADPOOL_BACKOFF_MS * 1e3;
        pool_set_active(p, k > 1 ? k : p->n);
        return;
    }
    p->serial = true;
    /* Busy (but paying a little): look at the load again soon, and try a parallel window
     * despite it after the back-off. Not paying: neither before the back-off. */
    p->resume_us = end_us + (p->gain >= THREADPOOL_MIN_GAIN ? THREADPOOL_RECHECK_MS * 1e3
                                                              : p->backoff_us);
    p->probe_us = end_us + p->backoff_us;
    p->backoff_us *= 2.0;
    if (p->backoff_us > THREADPOOL_BACKOFF_MAX_MS * 1e3)
        p->backoff_us = THREADPOOL_BACKOFF_MAX_MS * 1e3;
}

void threadpool_run(threadpool *p, threadpool_fn fn, void *arg)
{
    if (p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    double t0 = 0.0;
    if (p->adaptive) {
        t0 = now_us();
        int k = 0;
        if (p->serial && (t0 < p->resume_us ||
                          ((k = pool_free_threads(p)) == 1 && t0 < p->probe_us))) {
            if (k == 1)                  /* still busy: no parallel window, look again later */
                p->resume_us = t0 + THREADPOOL_RECHECK_MS * 1e3;
            p->jobs_serial++;
            fn(arg, 0, p->n);
            return;
        }
        if (p->serial)                   /* free cores, or a probe despite the load: all */
            pool_set_active(p, k > 1 ? k : p->n);
        p->serial = false;
        p->jobs_parallel++;
    }
    unsigned claimed0 = chunks_claimed;
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->job_state, 0);
    atomic_store_explicit(&p->job_claims, 0, memory_order_relaxed);
    atomic_fetch_add(&p->generation, 1);       /* seq_cst: publishes fn, arg, job_state */
    wake_workers(p);
    fn(arg, 0, p->n);
    double t1 = p->adaptive ? now_us() : 0.0;
    /* Our part returned, so every chunk has been claimed: workers that have not joined yet have
     * nothing left to do and must not start now; wait only for those inside. On a busy machine
     * a descheduled worker thus costs nothing instead of a scheduler time slice per job. */
    atomic_fetch_or(&p->job_state, JOB_CLOSED);
    double spin0 = 0.0;
    for (int i = 0; atomic_load(&p->job_state) != JOB_CLOSED; i++) {
        cpu_relax();
        if ((i & 255) != 255)
            continue;
        if (spin0 == 0.0) {
            spin0 = now_us();
        } else if (now_us() - spin0 > THREADPOOL_SPIN_US) {
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
    if (p->adaptive) {
        double t2 = now_us();
        pool_account(p, t2, t2 - t0, t1 - t0, chunks_claimed - claimed0,
                     atomic_load_explicit(&p->job_claims, memory_order_relaxed));
    }
}

int threadpool_size(const threadpool *p)
{
    return p->n;
}

void threadpool_get_stats(const threadpool *p, threadpool_stats *out)
{
    out->threads = p->n;
    out->adaptive = p->adaptive && p->n > 1;
    out->active = p->serial ? 1 : atomic_load(&p->active);
    out->gain = p->gain;
    out->others = p->others;
    out->load_limited = p->load_limited;
    out->jobs_parallel = p->jobs_parallel;
    out->jobs_serial = p->jobs_serial;
}

void threadpool_describe(const threadpool *p, char *out, size_t cap)
{
    threadpool_stats st;
    threadpool_get_stats(p, &st);
    const char *s = st.threads == 1 ? "" : "s";
    if (!p->adaptive)
        snprintf(out, cap, "%d thread%s (--threads)", st.threads, s);
    else if (st.threads == 1)
        snprintf(out, cap, "1 thread (auto: one core)");
    else if (st.load_limited)
        snprintf(out, cap, "%d threads (auto), %d in use: %d other thread%s running on %d "
                 "cores", st.threads, st.active, st.others, st.others == 1 ? "" : "s", p->cores);
    else if (st.gain == 0.0)
        snprintf(out, cap, "%d threads (auto: one per core; falls back to 1 while %d do not "
                 "pay)", st.threads, st.threads);
    else if (st.active > 1)
        snprintf(out, cap, "%d threads (auto), %d in use: %.2fx one thread's speed", st.threads,
                 st.active, st.gain);
    else
        snprintf(out, cap, "%d threads (auto), 1 in use: %d ran at %.2fx one thread's speed "
                 "(jobs too small to split, or a worker kept off its core)", st.threads,
                 st.threads, st.gain);
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
        pthread_cond_broadcast(&p->parked);
        pthread_mutex_unlock(&p->lock);
        for (int i = 0; i < p->started; i++)
            pthread_join(p->workers[i], NULL);
    }
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->finished);
    pthread_cond_destroy(&p->parked);
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
    if (i >= c->end)
        return -1;
    chunks_claimed++;
    return i;
}
