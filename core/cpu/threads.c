/* threads.c: the fork-join pool: a generation counter announces a job, workers poll it for a
 * short while and then sleep on a condition variable; a job-state word counts the workers inside
 * a job and closes it to latecomers once the caller's share is done. An adaptive pool times its
 * jobs and runs them on the caller alone while the workers do not pay, or while other processes
 * take the cores' time (/proc/stat less its own threads' CPU clocks; threads.h). */
#include "core/cpu/threads.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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
    bool solo;                      /* threadpool_set_solo: the caller alone, nothing measured */
    double resume_us;               /* ... until then, when it looks at the load again */
    double probe_us;                /* from then, a busy machine does not stop a parallel window */
    double backoff_us;              /* the next back-off's length */
    double window_us, window_serial_us; /* the current window: measured, one-thread estimate */
    int window_jobs;
    double gain;                    /* of the last full window (0: none yet) */
    double others;                  /* cores' worth of CPU time other processes' non-niced
                                       threads took over the last interval (-1: unknown) */
    bool load_limited;              /* the last look left fewer cores than threads */
    clockid_t *clocks;              /* (n - 1) the workers' CPU-time clocks */
    double stat_us;                 /* the last /proc/stat sample: when (0: none), the busy time */
    double stat_busy_us, stat_ours_us; /* it counted and our threads' CPU time then */
    unsigned looks;                 /* estimates of others taken */
    unsigned window_chunks;         /* chunks the current window's jobs handed out */
    int serial_jobs;                /* jobs run on the caller alone in the current serial */
    double serial_us;               /* stretch: their count, time and chunks */
    unsigned serial_chunks;
    double lone_chunk_us;           /* time per chunk on the caller alone, measured in the last
                                       serial stretch of THREADPOOL_WINDOW_JOBS jobs or more
                                       (0: none) */
    int cores;                      /* the cores this process may run on */
    int cores_online;               /* the machine's: /proc/stat counts time on all */
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

static double clock_us(clockid_t clk)
{
    struct timespec ts;
    if (clock_gettime(clk, &ts) != 0)
        return 0.0;
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static double now_us(void)
{
    return clock_us(CLOCK_MONOTONIC);
}

/* The first line of path, or false. */
static bool read_head(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    return true;
}

/* CPU time spent by threads not niced (user, system, irq, softirq of the "cpu" line of
 * /proc/stat; niced processes count under "nice" and are left out: they yield their core to
 * ours), in microseconds, or -1. A process niced itself (`nice make test`) counts the niced time
 * too: those threads, its own kind, take their share of a core from it. Clock-tick resolution
 * (10 ms per core), so only differences over THREADPOOL_LOAD_INTERVAL_MS or more mean much. */
static double busy_cpu_us(void)
{
    char buf[256];
    unsigned long long user, nice, sys, idle, iowait, irq, softirq;
    if (!read_head("/proc/stat", buf, sizeof buf) ||
        sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &sys, &idle, &iowait,
               &irq, &softirq) != 7)
        return -1.0;
    errno = 0;
    const int own_nice = getpriority(PRIO_PROCESS, 0);
    if (errno != 0 || own_nice <= 0)
        nice = 0;
    long hz = sysconf(_SC_CLK_TCK);
    return (double)(user + nice + sys + irq + softirq) * 1e6 / (double)(hz > 0 ? hz : 100);
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

static void pool_sample_load(threadpool *p, double t);

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
    p->others = -1.0;
    p->probe_us = -1.0;             /* no look yet: the first busy one starts a back-off */
    p->cores = threadpool_cores();
    p->cores_online = cores_online();
    p->serial = adaptive;           /* resume_us 0: the first job looks at the load */
    atomic_store(&p->active, n_threads);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->finished, NULL);
    pthread_cond_init(&p->parked, NULL);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        p->clocks = calloc((size_t)n_threads - 1, sizeof *p->clocks);
        if (!p->workers || !p->clocks) {
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
        if (adaptive && pthread_getcpuclockid(p->workers[i - 1], &p->clocks[i - 1]) != 0)
            p->clocks[i - 1] = (clockid_t)-1;
        p->started++;
    }
    if (adaptive && watch_load)
        pool_sample_load(p, now_us());
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

/* The CPU time our pool's threads have used: the calling thread's and the workers'. */
static double ours_cpu_us(const threadpool *p)
{
    double t = clock_us(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < p->started; i++)
        if (p->clocks[i] != (clockid_t)-1)
            t += clock_us(p->clocks[i]);
    return t;
}

/* Takes a /proc/stat sample; with an earlier one at least THREADPOOL_LOAD_INTERVAL_MS old (or
 * THREADPOOL_LOAD_FIRST_MS for the first estimate, and for the second where the first found a
 * core taken), p->others becomes the cores' worth of CPU time the others took in between: the
 * machine's busy time less our threads'. Over the first interval's 20 ms a single 10 ms burst
 * of another process (a kernel thread, the terminal drawing the output) reads as half a core:
 * confirmed or cleared as quickly, a short run on an idle machine does not spend the whole
 * interval on one thread for it. */
static void pool_sample_load(threadpool *p, double t)
{
    double elapsed = t - p->stat_us;
    const bool quick = p->looks == 0 || (p->looks == 1 && p->others >= THREADPOOL_CORE_TAKEN);
    if (p->stat_us > 0.0 &&
        elapsed < (quick ? THREADPOOL_LOAD_FIRST_MS : THREADPOOL_LOAD_INTERVAL_MS) * 1e3)
        return;
    double busy = busy_cpu_us(), ours = ours_cpu_us(p);
    if (busy < 0.0) {
        p->others = -1.0;
        return;
    }
    if (p->stat_us > 0.0) {
        double others = (busy - p->stat_busy_us - (ours - p->stat_ours_us)) / elapsed;
        p->others = others > 0.0 ? others : 0.0;
        p->looks++;
    }
    p->stat_us = t;
    p->stat_busy_us = busy;
    p->stat_ours_us = ours;
}

/* How many of the pool's threads can each have a core of their own: the cores whose time other
 * processes' non-niced threads leave, between 1 and n. A worker that must share its core with
 * another process is descheduled for whole time slices while the caller waits for its chunk:
 * with a single busy process beside them on 2 cores, two threads ran slower than one. Niced work
 * (a background build or training run) does not count: it yields the core.
 * n where the time cannot be read (the window's gain still decides). */
static int pool_free_threads(threadpool *p, double t)
{
    p->load_limited = false;
    if (!p->watch_load)
        return p->n;
    pool_sample_load(p, t);
    if (p->others < 0.0)
        return p->n;
    double others = p->others;
    if (p->cores < p->cores_online)  /* the others' share of our cores, spread evenly */
        others = others * p->cores / p->cores_online;
    int k = p->cores - (int)(others + 1.0 - THREADPOOL_CORE_TAKEN);
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
 * core while it holds a chunk, which makes the caller wait a scheduler time slice. It also
 * flatters the workers whenever the caller itself is descheduled mid-share (its chunks look
 * slow): beside a busy process, windows of kjv-target scored 5-8x on 2 threads. So when other
 * processes leave no core free, a window is judged instead by its time per chunk against the
 * caller's own, measured on the jobs it ran alone just before (the same jobs, under the same
 * load): what the workers actually bought. */
static void pool_account(threadpool *p, double end_us, double job_us, double caller_us,
                         unsigned caller_chunks, unsigned worker_chunks)
{
    double serial_us = caller_chunks > 0
                           ? caller_us * (double)(caller_chunks + worker_chunks) / caller_chunks
                           : job_us;
    p->window_us += job_us;
    p->window_serial_us += serial_us;
    p->window_chunks += caller_chunks + worker_chunks;
    p->window_jobs++;
    /* A probe despite the load is judged against the caller's measured time per chunk. */
    bool measured = p->load_limited && p->lone_chunk_us > 0.0 && p->window_chunks > 0;
    double alone_us = measured ? p->lone_chunk_us * p->window_chunks : p->window_serial_us;
    /* A window closes when it is long enough to judge a gain, or as soon as it has lost more
     * than THREADPOOL_LOSS_MS against the caller alone, and a third of its time: one worker
     * descheduled for a time slice is enough evidence, and waiting for the full window would
     * only lose more. */
    bool full = p->window_us >= THREADPOOL_WINDOW_MS * 1e3 &&
                p->window_jobs >= THREADPOOL_WINDOW_JOBS;
    double loss_us = p->window_us - alone_us;
    if (!full && (loss_us < THREADPOOL_LOSS_MS * 1e3 || loss_us < 0.5 * alone_us))
        return;
    int k = pool_free_threads(p, end_us);
    p->gain = (k == 1 && p->lone_chunk_us > 0.0 && p->window_chunks > 0
                   ? p->lone_chunk_us * p->window_chunks
                   : p->window_serial_us) / p->window_us;
    p->window_us = p->window_serial_us = 0.0;
    p->window_chunks = 0;
    p->window_jobs = 0;
    if ((p->gain >= THREADPOOL_MIN_GAIN && k > 1) || p->gain >= THREADPOOL_MIN_GAIN_BUSY) {
        /* Paying, on free cores; or paying so well beside other busy processes that the workers
         * evidently get their share (long jobs, or many others sharing the cores). */
        p->backoff_us = THREADPOOL_BACKOFF_MS * 1e3;
        pool_set_active(p, k > 1 ? k : p->n);
        return;
    }
    p->serial = true;
    p->serial_us = 0.0;
    p->serial_chunks = 0;
    p->serial_jobs = 0;
    /* Busy (but paying a little): look at the load again soon, and try a parallel window
     * despite it after the back-off (at least THREADPOOL_PROBE_MS: each such window costs).
     * Not paying: neither before the back-off. */
    p->resume_us = end_us + (p->gain >= THREADPOOL_MIN_GAIN ? THREADPOOL_RECHECK_MS * 1e3
                                                              : p->backoff_us);
    p->probe_us = end_us + (p->backoff_us > THREADPOOL_PROBE_MS * 1e3 ? p->backoff_us
                                                                      : THREADPOOL_PROBE_MS * 1e3);
    p->backoff_us *= 2.0;
    if (p->backoff_us > THREADPOOL_BACKOFF_MAX_MS * 1e3)
        p->backoff_us = THREADPOOL_BACKOFF_MAX_MS * 1e3;
}

/* A job run on the caller alone in a serial stretch: it took job_us for chunks. */
static void pool_account_serial(threadpool *p, double job_us, unsigned chunks)
{
    p->serial_us += job_us;
    p->serial_chunks += chunks;
    p->serial_jobs++;
}

void threadpool_run(threadpool *p, threadpool_fn fn, void *arg)
{
    if (p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    if (p->solo) {
        fn(arg, 0, p->n);
        return;
    }
    double t0 = 0.0;
    unsigned claimed0 = chunks_claimed;
    if (p->adaptive) {
        t0 = now_us();
        if (p->serial) {
            /* No look at the load yet (the first needs THREADPOOL_LOAD_FIRST_MS of /proc/stat):
             * the caller alone until there is one. Started parallel, a short run beside a busy
             * process waits for a descheduled worker from its first job (chosen by measurement:
             * docs/performance.md); on free cores this costs the start's few milliseconds at one
             * thread's speed. */
            const bool unlooked = p->watch_load && p->others < 0.0 && p->stat_us > 0.0 &&
                                  t0 < p->stat_us + THREADPOOL_LOAD_FIRST_MS * 1e3;
            int k = 0;
            if (!unlooked && t0 >= p->resume_us && (k = pool_free_threads(p, t0)) == 1 &&
                p->probe_us < 0.0)
                p->probe_us = t0 + THREADPOOL_PROBE_MS * 1e3; /* busy at the first look */
            if (unlooked || t0 < p->resume_us || (k == 1 && t0 < p->probe_us)) {
                if (k == 1)              /* still busy: no parallel window, look again later */
                    p->resume_us = t0 + THREADPOOL_RECHECK_MS * 1e3;
                p->jobs_serial++;
                fn(arg, 0, p->n);
                pool_account_serial(p, now_us() - t0, chunks_claimed - claimed0);
                return;
            }
            /* free cores, or a probe despite the load: all */
            pool_set_active(p, k > 1 ? k : p->n);
            if (p->serial_jobs >= THREADPOOL_WINDOW_JOBS && p->serial_chunks > 0)
                p->lone_chunk_us = p->serial_us / p->serial_chunks;
            p->serial = false;
        }
    }
    p->jobs_parallel++;
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

void threadpool_set_solo(threadpool *p, bool solo)
{
    p->solo = solo;
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
    out->looks = p->looks;
    out->lone_chunk_us = p->lone_chunk_us;
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
    else if (st.load_limited && st.gain > 0.0)
        snprintf(out, cap, "%d threads (auto), %d in use: other processes busy on %.1f of %d "
                 "cores; %d together ran at %.2fx one thread's speed", st.threads, st.active, st.others,
                 p->cores, st.threads, st.gain);
    else if (st.load_limited)
        snprintf(out, cap, "%d threads (auto), %d in use: other processes busy on %.1f of %d "
                 "cores", st.threads, st.active, st.others, p->cores);
    else if (st.gain == 0.0)
        snprintf(out, cap, "%d threads (auto: one per core; falls back to 1 while %d do not "
                 "pay)", st.threads, st.threads);
    else if (st.active > 1)
        snprintf(out, cap, "%d threads (auto), %d in use: %.2fx one thread's speed", st.threads,
                 st.active, st.gain);
    else
        snprintf(out, cap, "%d threads (auto), 1 in use: %d together ran at %.2fx one thread's speed "
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
    free(p->clocks);
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

int threadpool_next_run(threadpool_chunks *c, int min, int div, int *len)
{
    int i = __atomic_load_n(&c->next, __ATOMIC_RELAXED);
    for (;;) {
        if (i >= c->end)
            return -1;
        int left = c->end - i, n = div > 1 ? left / div : left;
        n = n < min ? min : n;
        n = n < 1 ? 1 : n > left ? left : n;
        if (__atomic_compare_exchange_n(&c->next, &i, i + n, true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            chunks_claimed += (unsigned)n;
            *len = n;
            return i;
        }
    }
}
