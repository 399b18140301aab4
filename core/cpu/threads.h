/* threads.h: a small fork-join thread pool for the CPU backend: the calling thread takes a share
 * of every job, and idle workers spin briefly and then sleep, so they do not steal cores while
 * nothing runs. A pool whose size was chosen automatically also watches whether its workers pay:
 * while they do not (another process holds a core, or the jobs are too small to split), jobs run
 * on the calling thread alone, and the pool tries the workers again after a back-off.
 *
 * Why spin at all: a decode step runs about five parallel regions per layer separated by a few
 * microseconds of serial work; waking a sleeping thread costs tens of microseconds on a VM, so a
 * worker that polls for a short while catches the next job without a system call. After
 * THREADPOOL_SPIN_US without work it blocks on a condition variable. */
#ifndef TOKENTOP_THREADS_H
#define TOKENTOP_THREADS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/base/status.h"

typedef struct threadpool threadpool;

/* A job. The caller's thread always runs it (ith 0); each worker runs it at most once, if it
 * joins before the caller's call returns (ith 1 .. nth-1, distinct, so per-thread scratch indexed
 * by ith is safe). So a job must hand out its work dynamically (threadpool_chunks below) and
 * never assume every ith shows up: then it completes whoever joins, and a worker that another
 * process keeps off the CPU delays nothing. */
typedef void (*threadpool_fn)(void *arg, int ith, int nth);

/* Starts n_threads - 1 workers. n_threads <= 0 chooses automatically: one thread per core the
 * process may run on, adaptive and watching the load as threadpool_create_adaptive. An explicit
 * count is kept for every job. On failure *out is NULL and no thread is left running. */
tt_status threadpool_create(int n_threads, threadpool **out, tt_error *err);

/* n_threads (>= 1) threads, adaptive. With watch_load, only as many threads take part as can
 * each have a core to itself: the cores left by the CPU time other processes' non-niced threads
 * took (/proc/stat less our own threads' CPU clocks, over THREADPOOL_LOAD_INTERVAL_MS or more,
 * the first look and the one that confirms a busy first look over THREADPOOL_LOAD_FIRST_MS;
 * THREADPOOL_CORE_TAKEN of a core counts as taken; niced work yields its core and does not
 * count). At one, jobs run on the caller alone, the pool looks again after
 * THREADPOOL_RECHECK_MS, and it tries a parallel window despite the load after a back-off (at
 * least THREADPOOL_PROBE_MS), kept while its gain is at least THREADPOOL_MIN_GAIN_BUSY (long
 * jobs, or many other threads sharing the cores). And workers take part only while they pay:
 * after each window of at least THREADPOOL_WINDOW_MS of parallel jobs (and
 * THREADPOOL_WINDOW_JOBS jobs), or as soon as a window has lost THREADPOOL_LOSS_MS, the pool
 * compares the window's time with what the calling thread alone would have taken: on free
 * cores, its own time per chunk in each job times the job's chunks (work handed out with
 * threadpool_next_chunk); in a window tried despite the load, its time per chunk measured on
 * the jobs it ran alone just before (there a caller descheduled mid-share would make the first
 * estimate flatter the workers). Below THREADPOOL_MIN_GAIN, jobs run on the caller alone for a
 * back-off (THREADPOOL_BACKOFF_MS, doubling after each failed retry up to
 * THREADPOOL_BACKOFF_MAX_MS). Results do not depend on it: jobs may never assume any worker
 * joins. */
tt_status threadpool_create_adaptive(int n_threads, bool watch_load, threadpool **out,
                                    tt_error *err);

#define THREADPOOL_LOAD_INTERVAL_MS 100
#define THREADPOOL_LOAD_FIRST_MS 20
#define THREADPOOL_CORE_TAKEN 0.5
#define THREADPOOL_WINDOW_MS 10
#define THREADPOOL_WINDOW_JOBS 32
#define THREADPOOL_LOSS_MS 1
#define THREADPOOL_RECHECK_MS 20
#define THREADPOOL_MIN_GAIN 1.05
#define THREADPOOL_MIN_GAIN_BUSY 1.3
#define THREADPOOL_BACKOFF_MS 50
#define THREADPOOL_PROBE_MS 200
#define THREADPOOL_BACKOFF_MAX_MS 1600

/* Runs fn(arg, ith, nth) as described above and returns when every call that started has
 * returned. Not reentrant: one job at a time, submitted from the thread that created the pool. */
void threadpool_run(threadpool *p, threadpool_fn fn, void *arg);

/* While solo, every job runs on the caller alone (its workers are not woken) and is left out of
 * an adaptive pool's accounting; the pool's own choices resume when it is cleared. For the steps
 * that follow an idle pause (core/session/session.c: a small model's step after one ran faster on one
 * thread than on two). */
void threadpool_set_solo(threadpool *p, bool solo);

/* Threads a job runs on, the caller's included (the pool's size, whether or not the workers
 * currently take part). */
int threadpool_size(const threadpool *p);

typedef struct {
    int threads;                   /* the pool's size */
    bool adaptive;                 /* size chosen automatically; workers used only while they pay */
    int active;                    /* threads the next job uses: threads, fewer while other
                                      processes' threads leave fewer cores, 1 during a back-off */
    double gain;                   /* last full window: estimated one-thread time / its time;
                                      0 before the first window */
    double others;                 /* cores' worth of CPU time other processes' non-niced
                                      threads took at the last look (/proc/stat), -1 unknown */
    unsigned looks;                /* how many looks at the load estimated it */
    bool load_limited;             /* they left fewer cores than threads */
    double lone_chunk_us;          /* time per chunk of the caller alone, measured in the last
                                      serial stretch long enough (0: none) */
    unsigned long long jobs_parallel, jobs_serial;  /* jobs run with the workers / without (a
                                      pool of several threads; threadpool_set_solo's and a
                                      one-thread pool's jobs count in neither) */
} threadpool_stats;

/* Read from the thread that submits jobs. */
void threadpool_get_stats(const threadpool *p, threadpool_stats *out);

/* One line for people: "2 threads (auto), 2 in use: 1.71x one thread's speed", "2 threads
 * (auto), 1 in use: other processes busy on 1.0 of 2 cores; 2 ran at 0.83x one thread's speed"
 * or "2 threads (--threads)". */
void threadpool_describe(const threadpool *p, char *out, size_t cap);

/* The cores this process may run on (its CPU affinity; else the online ones; at least 1). */
int threadpool_cores(void);

/* Stops and joins the workers; NULL is safe. */
void threadpool_free(threadpool *p);

/* An atomic work counter: initialized before threadpool_run, then each thread that runs the job
 * loops on threadpool_next_chunk until it returns -1. */
typedef struct {
    int next;                /* accessed atomically */
    int end;
} threadpool_chunks;

void threadpool_chunks_init(threadpool_chunks *c, int n_chunks);

/* The next unclaimed chunk index, or -1 when none is left. */
int threadpool_next_chunk(threadpool_chunks *c);

/* Claims the next run of consecutive chunks: a div-th of those left, at least min (fewer only at
 * the end); its first index, its length in *len, or -1 when none is left. The runs shrink as the
 * work runs out ("guided" scheduling): each thread gets long runs of neighbouring chunks, and
 * the last runs stay short so the threads still finish together. Each chunk of a run counts as
 * one claimed chunk in the adaptive pool's accounting. */
int threadpool_next_run(threadpool_chunks *c, int min, int div, int *len);

#endif
