/* threads.h: a small fork-join thread pool for the CPU backend: the calling thread takes a share
 * of every job, and idle workers spin briefly and then sleep, so they do not steal cores while
 * nothing runs.
 *
 * Why spin at all: a decode step runs about five parallel regions per layer separated by a few
 * microseconds of serial work; waking a sleeping thread costs tens of microseconds on a VM, so a
 * worker that polls for a short while catches the next job without a system call. After
 * THREADPOOL_SPIN_US without work it blocks on a condition variable. */
#ifndef TOKENTOP_THREADS_H
#define TOKENTOP_THREADS_H

#include "core/status.h"

typedef struct threadpool threadpool;

/* A job. The caller's thread always runs it (ith 0); each worker runs it at most once, if it
 * joins before the caller's call returns (ith 1 .. nth-1, distinct, so per-thread scratch indexed
 * by ith is safe). So a job must hand out its work dynamically (threadpool_chunks below) and
 * never assume every ith shows up: then it completes whoever joins, and a worker that another
 * process keeps off the CPU delays nothing. */
typedef void (*threadpool_fn)(void *arg, int ith, int nth);

/* Starts n_threads - 1 workers (n_threads <= 0: one thread per online core). On failure *out is
 * NULL and no thread is left running. */
tt_status threadpool_create(int n_threads, threadpool **out, tt_error *err);

/* Runs fn(arg, ith, nth) as described above and returns when every call that started has
 * returned. Not reentrant: one job at a time, submitted from the thread that created the pool. */
void threadpool_run(threadpool *p, threadpool_fn fn, void *arg);

/* Threads a job runs on, the caller's included. */
int threadpool_size(const threadpool *p);

/* Online cores (at least 1). */
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

#endif
