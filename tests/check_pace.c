/* check_pace.c: the token pacing clock, on a fake clock whose sleeps advance it. */
#include <check.h>
#include <signal.h>
#include <string.h>

#include "core/decode/pace.h"
#include "tests/testutil.h"

typedef struct {
    double now;                /* ms */
    double slept;              /* total asked */
    int sleeps;
    double engine_ms;          /* how much the clock moves between tokens (the engine's work) */
    volatile sig_atomic_t *stop_after;   /* set this flag after stop_sleeps sleeps */
    int stop_sleeps;
} fake;

static double fake_now(void *user) { return ((fake *)user)->now; }

static void fake_sleep(void *user, double ms)
{
    fake *f = user;
    f->now += ms;
    f->slept += ms;
    if (++f->sleeps == f->stop_sleeps && f->stop_after)
        *f->stop_after = 1;
}

static void setup(pace_clock *pc, fake *f, double rate)
{
    pace_init(pc);
    pace_set_clock(pc, fake_now, fake_sleep, f);
    pace_set_rate(pc, rate);
}

START_TEST(unpaced_tokens_are_never_held)
{
    fake f = {.now = 1000};
    pace_clock pc;
    setup(&pc, &f, 0);
    for (int i = 0; i < 5; i++)
        ck_assert_double_eq(pace_wait(&pc, NULL), 0);
    ck_assert_int_eq(f.sleeps, 0);
}
END_TEST

START_TEST(paced_tokens_come_one_slot_apart_in_short_sleeps)
{
    fake f = {.now = 1000};
    pace_clock pc;
    setup(&pc, &f, 20);               /* 50 ms a token */
    double shown[6];
    for (int i = 0; i < 6; i++) {
        f.now += 1;                   /* the engine's work for the token */
        pace_wait(&pc, NULL);
        shown[i] = f.now;
    }
    ck_assert_double_eq(shown[0], 1001);   /* the first token of a reply at once */
    for (int i = 1; i < 6; i++)
        ck_assert_double_eq_tol(shown[i] - shown[i - 1], 50, 1e-9);
    ck_assert_int_ge(f.sleeps, 5 * 3);     /* slices of at most 20 ms: Ctrl-C is seen soon */
    ck_assert_double_eq_tol(f.slept, 5 * 49, 1e-9);
}
END_TEST

START_TEST(a_slow_engine_is_not_followed_by_a_burst)
{
    fake f = {.now = 0};
    pace_clock pc;
    setup(&pc, &f, 10);               /* 100 ms a token */
    pace_wait(&pc, NULL);             /* shown at 0, next due at 100 */
    f.now += 350;                     /* a context re-prefill: 3.5 slots late */
    ck_assert_double_eq(pace_wait(&pc, NULL), 0);   /* late: shown at once */
    double t = f.now;
    f.now += 1;
    pace_wait(&pc, NULL);             /* the next one a full slot later, not at once */
    ck_assert_double_eq_tol(f.now - t, 100, 1e-9);
}
END_TEST

START_TEST(a_token_a_little_late_keeps_the_schedule)
{
    fake f = {.now = 0};
    pace_clock pc;
    setup(&pc, &f, 10);
    pace_wait(&pc, NULL);             /* at 0 */
    f.now = 130;                      /* 30 ms late for the one due at 100 */
    pace_wait(&pc, NULL);
    ck_assert_double_eq(pace_delay_ms(&pc), 70);   /* the third is due at 200, no drift */
}
END_TEST

START_TEST(restart_and_rate_changes_show_the_next_token_at_once)
{
    fake f = {.now = 0};
    pace_clock pc;
    setup(&pc, &f, 5);
    pace_wait(&pc, NULL);
    ck_assert_double_eq(pace_delay_ms(&pc), 200);
    pace_restart(&pc);                /* a new reply */
    ck_assert_double_eq(pace_delay_ms(&pc), 0);
    pace_wait(&pc, NULL);
    pace_set_rate(&pc, 50);
    ck_assert_double_eq(pace_delay_ms(&pc), 0);
    pace_set_rate(&pc, 1e9);          /* clamped */
    ck_assert_double_eq(pc.rate, PACE_MAX);
    pace_set_rate(&pc, -3);
    ck_assert_double_eq(pc.rate, 0);
}
END_TEST

START_TEST(a_stop_flag_ends_the_wait_promptly)
{
    volatile sig_atomic_t stop = 0;
    fake f = {.now = 0, .stop_after = &stop, .stop_sleeps = 2};
    pace_clock pc;
    setup(&pc, &f, 1);                /* a token a second */
    pace_wait(&pc, &stop);
    double held = pace_wait(&pc, &stop);
    ck_assert(stop);
    ck_assert_double_le(held, 40);    /* two 20 ms slices, not the second */
    ck_assert_int_eq(f.sleeps, 2);
}
END_TEST

START_TEST(parse_takes_plain_rates_and_names_bad_text)
{
    double v = 7;
    tt_error err;
    ck_assert_int_eq(pace_parse("0", &v, &err), TT_OK);
    ck_assert_double_eq(v, 0);
    ck_assert_int_eq(pace_parse("12.5", &v, &err), TT_OK);
    ck_assert_double_eq(v, 12.5);
    ck_assert_int_eq(pace_parse("1000", &v, &err), TT_OK);
    const char *bad[] = {"-1", "abc", "", "1e9", "1000.5", "nan", "inf", "5 ", " 5", "+5", "0x10"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 3;
        ck_assert_int_eq(pace_parse(bad[i], &v, &err), TT_ERR_ARG);
        ck_assert_double_eq(v, 3);
        ck_assert_msg(strstr(err.msg, "is not a number of tokens per second in [0, 1000]"),
                      "%s: %s", bad[i], err.msg);
    }
    ck_assert_int_eq(pace_parse("abc", &v, &err), TT_ERR_ARG);
    ck_assert_str_eq(err.msg, "pace: \"abc\" is not a number of tokens per second in [0, 1000] "
                     "(0: as fast as the engine goes)");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pace");
    tu_add_case(s, "pace", TU_TESTS(
            unpaced_tokens_are_never_held, paced_tokens_come_one_slot_apart_in_short_sleeps,
            a_slow_engine_is_not_followed_by_a_burst, a_token_a_little_late_keeps_the_schedule,
            restart_and_rate_changes_show_the_next_token_at_once,
            a_stop_flag_ends_the_wait_promptly, parse_takes_plain_rates_and_names_bad_text));
    return tu_run_suite(s);
}
