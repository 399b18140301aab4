/* pace.c: the token pacing clock (see pace.h). */
#include "core/decode/pace.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/clock.h"

#define PACE_SLICE_MS 20.0         /* the longest sleep between checks of the stop flag */

static double clock_now(void *user)
{
    (void)user;
    return tt_now_ms();
}

static void clock_sleep(void *user, double ms)
{
    (void)user;
    struct timespec ts = {.tv_sec = (time_t)(ms / 1e3),
                          .tv_nsec = (long)(fmod(ms, 1e3) * 1e6)};
    nanosleep(&ts, NULL);          /* a signal ends it early: the caller checks its flag */
}

void pace_init(pace_clock *pc)
{
    pc->rate = 0;
    pc->due_ms = -1;
    pace_set_clock(pc, clock_now, clock_sleep, NULL);
}

void pace_set_clock(pace_clock *pc, pace_now_fn now, pace_sleep_fn sleep, void *user)
{
    pc->now = now;
    pc->sleep = sleep;
    pc->user = user;
}

tt_status pace_parse(const char *text, double *out, tt_error *err)
{
    char *end;
    errno = 0;
    double v = text ? strtod(text, &end) : 0;
    if (!text || !*text || strspn(text, "0123456789.") != strlen(text) || errno || *end ||
        end == text || !isfinite(v) || v < 0 || v > PACE_MAX)
        return tt_fail(err, TT_ERR_ARG, "pace: \"%s\" is not a number of tokens per second in "
                       "[0, %g] (0: as fast as the engine goes)", text ? text : "", PACE_MAX);
    *out = v;
    return TT_OK;
}

void pace_set_rate(pace_clock *pc, double rate)
{
    pc->rate = rate > 0 ? (rate < PACE_MAX ? rate : PACE_MAX) : 0;
    pc->due_ms = -1;
}

void pace_restart(pace_clock *pc)
{
    pc->due_ms = -1;
}

double pace_delay_ms(const pace_clock *pc)
{
    if (pc->rate <= 0 || pc->due_ms < 0)
        return 0;
    double d = pc->due_ms - pc->now(pc->user);
    return d > 0 ? d : 0;
}

void pace_mark(pace_clock *pc)
{
    if (pc->rate <= 0)
        return;
    double now = pc->now(pc->user), slot = 1e3 / pc->rate;
    /* on time, or late by less than a slot: keep the schedule (no drift); later: restart it */
    if (pc->due_ms < 0 || now - pc->due_ms > slot)
        pc->due_ms = now + slot;
    else
        pc->due_ms += slot;
}

double pace_wait(pace_clock *pc, volatile sig_atomic_t *stop)
{
    double held = 0;
    for (;;) {
        if (stop && *stop)
            return held;
        double d = pace_delay_ms(pc);
        if (d <= 0)
            break;
        double t0 = pc->now(pc->user);
        pc->sleep(pc->user, d < PACE_SLICE_MS ? d : PACE_SLICE_MS);
        held += pc->now(pc->user) - t0;
    }
    pace_mark(pc);
    return held;
}
