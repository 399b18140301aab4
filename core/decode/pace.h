/* pace.h: holding generated tokens back to a chosen rate (tokens per second), so that a class can
 * follow them and the histogram of each step can be read; the engine still runs at its own speed
 * and the session's statistics leave the held time out (it passes in an event callback: the front
 * end's time, session_stats.front_ms). The clock and the sleep are injectable, so the arithmetic
 * is tested without waiting. */
#ifndef TOKENTOP_PACE_H
#define TOKENTOP_PACE_H

#include <signal.h>
#include <stdbool.h>

#include "core/base/status.h"

#define PACE_MAX 1000.0            /* tokens per second; beyond this nobody follows anyway */

typedef double (*pace_now_fn)(void *user);                 /* ms on a monotonic clock */
typedef void (*pace_sleep_fn)(void *user, double ms);      /* may return early (a signal) */

typedef struct {
    double rate;               /* tokens per second; 0: no pacing */
    double due_ms;             /* when the next token may be shown; < 0: at once */
    pace_now_fn now;
    pace_sleep_fn sleep;
    void *user;
} pace_clock;

/* rate 0 (off), the monotonic clock and nanosleep. */
void pace_init(pace_clock *pc);
/* The clock and sleep to use instead (tests). */
void pace_set_clock(pace_clock *pc, pace_now_fn now, pace_sleep_fn sleep, void *user);

/* Parses a rate as /pace and --pace take it: a plain decimal number in [0, PACE_MAX] (0: as fast
 * as the engine goes). TT_ERR_ARG with a message naming the text otherwise; *out unchanged. */
tt_status pace_parse(const char *text, double *out, tt_error *err);

/* Sets the rate (clamped to [0, PACE_MAX]) and forgets the schedule. */
void pace_set_rate(pace_clock *pc, double rate);

/* A new reply: its first token is shown at once. */
void pace_restart(pace_clock *pc);

/* How long the next token must still be held back, in ms (0 when due or unpaced). */
double pace_delay_ms(const pace_clock *pc);

/* The token is shown now: the next one is due 1/rate later. A token that came late (the engine
 * was slower than the pace) starts the schedule again from now, so a slow stretch is never
 * followed by a burst. */
void pace_mark(pace_clock *pc);

/* Holds the next token back until it is due, in sleeps of at most 20 ms, returning early when
 * *stop becomes non-zero (Ctrl-C); then marks it shown unless stopped. Returns the ms held. */
double pace_wait(pace_clock *pc, volatile sig_atomic_t *stop);

#endif
