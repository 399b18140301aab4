/* check_compare.c: /beam, /samples, /compare and /keep (repl/compare.c) on a tiny random model:
 * the best beam becomes the reply and /undo drops the turn like any other, the live beam view
 * fades pruned beams, /keep swaps the reply and refuses after an edit, columns of /compare share
 * one seed (equal values give equal columns, and equal /samples' first column), and every bad
 * value is refused naming it with the conversation and the armed request unchanged. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repl/compare.h"
#include "tests/cmd_session.h"

static compare_state *C;   /* E's (the compare module's state) */

static void files_setup(void)
{
    model_dir = tu_tiny_model_dir(64);
}

static void files_teardown(void)
{
    tu_tmpdir_free(model_dir);
}

static void session_setup(void)
{
    cmd_session_open();
    C = compare_cmd_of(&E);
    ck_assert_ptr_nonnull(C);
}

static void session_teardown(void)
{
    cmd_session_close();
}

/* Arms with line, then runs on text; fails the test when either fails. */
static void arm_and_run(const char *line, const char *text, const compare_hooks *h)
{
    ck_assert_msg(!(run(line) & CMD_ERROR), "%s: %s", line, E.out);
    ck_assert_msg(!(compare_run(&E, text, h) & CMD_ERROR), "%s: %s", line, E.out);
}

START_TEST(the_best_beam_becomes_the_reply_and_undo_drops_the_turn)
{
    arm_and_run("/samples 1", "one", NULL);   /* a first turn, so the beam turn is the second */
    int before = S.n_tokens, turns = S.n_turns;
    arm_and_run("/beam 3", " two", NULL);
    ck_assert_int_eq(C->n_cols, 3);
    ck_assert_int_eq(C->kept, 0);
    ck_assert_int_eq(S.n_turns, turns + 1);
    const compare_column *best = &C->cols[0];
    ck_assert_int_eq(S.n_tokens, C->n_base + best->n);
    ck_assert(memcmp(S.tokens + C->n_base, best->ids, (size_t)best->n * sizeof *best->ids) == 0);
    ck_assert(C->cols[0].score >= C->cols[1].score && C->cols[1].score >= C->cols[2].score);
    /* the cache holds the conversation with the beam, as after a plain turn */
    ck_assert_int_eq(session_cached_prefix(&S), S.n_tokens - S.window_start);
    ck_assert_msg(strstr(E.out, "beam 1: score") && strstr(E.out, "(the reply)"), "%s", E.out);
    ck_assert(!(run("/undo") & CMD_ERROR));
    ck_assert_int_eq(S.n_tokens, before);
    ck_assert_int_eq(S.n_turns, turns);
}
END_TEST

typedef struct {
    int frames;
    bool pruned_dim;
} board_log;

static void log_frame(void *user)
{
    board_log *l = user;
    ui_column cols[2 * COMPARE_MAX_BEAMS + COMPARE_MAX_COLUMNS];
    const char *heading;
    int n = compare_board(C, cols, (int)(sizeof cols / sizeof cols[0]), &heading);
    l->frames++;
    for (int i = 0; i < n; i++)
        if (strstr(cols[i].title, "pruned at step") && cols[i].dim)
            l->pruned_dim = true;
}

START_TEST(the_live_beam_view_shows_every_step_and_fades_pruned_beams)
{
    board_log l = {0};
    compare_hooks h = {.frame = log_frame, .user = &l};
    arm_and_run("/beam 4", "the", &h);
    ck_assert_int_ge(l.frames, 2);
    ck_assert(l.pruned_dim);
    /* afterwards the board is the ranking, nothing dim */
    for (int i = 0; i < C->n_cols; i++)
        ck_assert(!C->cols[i].dim);
}
END_TEST

START_TEST(keep_swaps_the_reply_and_refuses_after_an_edit)
{
    arm_and_run("/samples 3", "abc", NULL);
    ck_assert_int_eq(C->kept, -1);
    int base = S.n_tokens;
    ck_assert(!(run("/keep 2") & CMD_ERROR));
    ck_assert_int_eq(S.n_tokens, base + C->cols[1].n);
    ck_assert(!(run("/keep 3") & CMD_ERROR));   /* replaces column 2 */
    ck_assert_int_eq(S.n_tokens, base + C->cols[2].n);
    ck_assert(memcmp(S.tokens + base, C->cols[2].ids, (size_t)C->cols[2].n * 4) == 0);
    ck_assert(run("/keep 4") & CMD_ERROR);
    ck_assert_msg(strstr(E.out, "\"4\"") && strstr(E.out, "1 to 3"), "%s", E.out);
    ck_assert(!(run("/undo 1") & CMD_ERROR));
    int n = S.n_tokens;
    ck_assert(run("/keep 1") & CMD_ERROR);
    ck_assert_msg(strstr(E.out, "changed"), "%s", E.out);
    ck_assert_int_eq(S.n_tokens, n);
}
END_TEST

START_TEST(compare_columns_share_one_seed)
{
    arm_and_run("/compare temp 0.9 0.9 0", "xyz", NULL);
    ck_assert_int_eq(C->n_cols, 3);
    ck_assert_int_eq(C->cols[0].n, C->cols[1].n);
    ck_assert(memcmp(C->cols[0].ids, C->cols[1].ids, (size_t)C->cols[0].n * 4) == 0);
    int32_t first[64];
    int n_first = C->cols[0].n;
    memcpy(first, C->cols[0].ids, (size_t)n_first * 4);
    ck_assert(!(run("/undo") & CMD_ERROR));
    /* /samples' first column has the same seed and settings: the same tokens */
    ck_assert(!(run("/temp 0.9") & CMD_ERROR));
    arm_and_run("/samples 2", "xyz", NULL);
    ck_assert_int_eq(C->cols[0].n, n_first);
    ck_assert(memcmp(C->cols[0].ids, first, (size_t)n_first * 4) == 0);
    ck_assert_msg(strstr(C->cols[1].label, "seed 43"), "%s", C->cols[1].label);
    /* the figures are there and the plain-text rendering names them */
    ck_assert_int_eq(C->cols[0].fig.tokens, n_first);
    ck_assert(C->cols[0].fig.mean_logprob < 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    compare_print(C, f);
    fclose(f);
    ck_assert_msg(strstr(buf, "=== 1: seed 42") && strstr(buf, "mean logprob") &&
                  strstr(buf, "distinct-2") && strstr(buf, "repeated 3-grams"), "%s", buf);
    free(buf);
}
END_TEST

/* cmd is refused with a message containing says, and nothing is left pending. */
static void assert_refused(const char *cmd, const char *says)
{
    ck_assert_msg(run(cmd) & CMD_ERROR, "%s was accepted", cmd);
    ck_assert_msg(strstr(E.out, says), "%s: %s", cmd, E.out);
    ck_assert_int_eq(C->pending, COMPARE_NONE);
}

START_TEST(bad_values_are_refused_naming_them_and_change_nothing)
{
    arm_and_run("/samples 1", "start", NULL);
    int n = S.n_tokens;
    const char *bad[][2] = {
        {"/beam 0", "\"0\""},
        {"/beam 17", "\"17\""},
        {"/beam many", "\"many\""},
        {"/samples 0", "\"0\""},
        {"/samples 1000", "\"1000\""},
        {"/compare foo 1 2", "unknown setting \"foo\""},
        {"/compare temp -1", "\"-1\""},
        {"/compare topp 0.5 1.5", "\"1.5\""},
        {"/compare topk 2.5", "\"2.5\""},
        {"/compare order hf gpt", "\"gpt\""},
        {"/compare temp", "at least one value"},
        {"/compare temp 1 2 3 4 5 6 7 8 9", "at most 8"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_refused(bad[i][0], bad[i][1]);
        ck_assert_int_eq(S.n_tokens, n);
    }
    /* more than the context allows: the conversation plus /max must fit 64 positions */
    ck_assert(!(run("/max 62") & CMD_ERROR));
    ck_assert_msg(run("/beam 2") & CMD_ERROR, "%d tokens, n_ctx %d: %s", S.n_tokens, S.eng->n_ctx, E.out);
    ck_assert_msg(strstr(E.out, "context of 64"), "%s", E.out);
    ck_assert_int_eq(C->pending, COMPARE_NONE);
    /* a request refused when it runs leaves the line out of the conversation */
    ck_assert(!(run("/max 8") & CMD_ERROR));
    ck_assert(!(run("/beam 2") & CMD_ERROR));
    ck_assert(!(run("/max 62") & CMD_ERROR));
    ck_assert(compare_run(&E, " and more", NULL) & CMD_ERROR);
    ck_assert_int_eq(S.n_tokens, n);
    /* /beam off disarms */
    ck_assert(!(run("/max 8") & CMD_ERROR));
    ck_assert(!(run("/beam 2") & CMD_ERROR));
    ck_assert(!(run("/beam off") & CMD_ERROR));
    ck_assert_int_eq(C->pending, COMPARE_NONE);
}
END_TEST

typedef struct {
    int want_step;
    sampler_snapshot snap;
    bool got;
} step_log;

static bool log_step(void *user, const session_event *ev)
{
    step_log *l = user;
    if (!ev->flush && !ev->rejected && ev->token >= 0 && ev->snap && ev->step == l->want_step) {
        l->snap = *ev->snap;
        l->got = true;
    }
    return true;
}

/* The pane shows column 2 at its latest step (its last token, at its position): the snapshot,
 * and *step. */
static const sampler_snapshot *shown_latest_of_column_2(int *step)
{
    const sampler_snapshot *snap;
    int pos;
    const char *label;
    ck_assert(compare_shown(C, &snap, step, &pos, &label));
    const compare_column *col = &C->cols[1];
    ck_assert_str_eq(label, col->label);
    ck_assert_int_eq(*step, col->n - 1);
    ck_assert_int_eq(snap->token, col->ids[*step]);
    ck_assert_int_eq(pos, C->n_base + *step);
    return snap;
}

START_TEST(samples_show_k_keeps_what_a_plain_run_with_that_seed_shows_at_that_step)
{
    ck_assert(!(run("/temp 0.9") & CMD_ERROR));
    ck_assert_msg(!(run("/samples show 2") & CMD_ERROR), "%s", E.out);   /* the run to come */
    ck_assert_int_eq(C->show, 2);
    ck_assert_msg(strstr(E.out, "column 2 of the next run"), "%s", E.out);
    arm_and_run("/samples 3", "xyz", NULL);
    int step;
    const sampler_snapshot *snap = shown_latest_of_column_2(&step);
    ck_assert_msg(strstr(C->cols[1].label, "seed 43"), "%s", C->cols[1].label);
    ck_assert_int_gt(snap->n_top, 1);
    for (int i = 1; i < snap->n_top; i++)          /* the pane's order: descending raw p */
        ck_assert(snap->top[i - 1].raw_p >= snap->top[i].raw_p);
    sampler_snapshot kept = *snap;
    /* the same step of a plain run with seed 43 over the same conversation */
    int n_base = C->n_base;
    int32_t base[64];
    memcpy(base, C->base, (size_t)n_base * sizeof *base);
    ck_assert(!(run("/undo") & CMD_ERROR));
    ck_assert(!(run("/seed 43") & CMD_ERROR));
    tt_error err = {0};
    ck_assert_msg(session_add_user_tokens(&S, base + S.n_tokens, n_base - S.n_tokens, &err) ==
                  TT_OK, "%s", err.msg);
    ck_assert_int_eq(S.n_tokens, n_base);
    step_log l = {.want_step = step};
    ck_assert_msg(session_generate(&S, log_step, &l, &err) == TT_OK, "%s", err.msg);
    ck_assert(l.got);
    ck_assert_int_eq(l.snap.token, kept.token);
    ck_assert_int_eq(l.snap.n_top, kept.n_top);
    for (int i = 0; i < kept.n_top; i++) {
        ck_assert_int_eq(l.snap.top[i].id, kept.top[i].id);
        ck_assert_float_eq_tol(l.snap.top[i].raw_p, kept.top[i].raw_p, 1e-6f);
        ck_assert_float_eq_tol(l.snap.top[i].p, kept.top[i].p, 1e-6f);
    }
    /* no argument names the column; off turns the pane back into columns */
    ck_assert(!(run("/samples show") & CMD_ERROR));
    ck_assert_msg(strstr(E.out, "column 2"), "%s", E.out);
    ck_assert(!(run("/samples show off") & CMD_ERROR));
    ck_assert_int_eq(C->show, 0);
    int pos;
    const char *label;
    ck_assert(!compare_shown(C, &snap, &step, &pos, &label));
}
END_TEST

START_TEST(beam_show_k_keeps_the_distribution_beam_k_took_its_last_token_from)
{
    ck_assert(!(run("/beam show 2") & CMD_ERROR));
    arm_and_run("/beam 3", "xyz", NULL);
    int step;
    const sampler_snapshot *snap = shown_latest_of_column_2(&step);
    const compare_column *col = &C->cols[1];
    /* p is the beam's token score: the drawn token's is the one its column reports */
    ck_assert_float_eq_tol(snap->token_p, expf((float)col->raw_logprob[step]), 1e-5f);
    double sum = 0;
    for (int i = 0; i < snap->n_top; i++)
        sum += snap->top[i].p;
    ck_assert(sum > 0 && sum <= 1.0 + 1e-5);
    for (int i = 1; i < snap->n_top; i++)
        ck_assert(snap->top[i - 1].raw_p >= snap->top[i].raw_p);
    /* every beam has its own */
    for (int k = 0; k < C->n_cols; k++)
        ck_assert_int_eq(C->cols[k].last_step, C->cols[k].n - 1);
}
END_TEST

START_TEST(samples_show_refuses_bad_columns_naming_them_and_keeps_the_choice)
{
    arm_and_run("/samples 3", "xyz", NULL);
    ck_assert(!(run("/samples show 3") & CMD_ERROR));
    ck_assert(compare_take_reopen(C));             /* the last run's columns come back */
    ck_assert(!compare_take_reopen(C));
    const char *bad[][2] = {
        {"/samples show 9", "\"9\" is not a column in [1, 3]"},
        {"/samples show 0", "\"0\""},
        {"/samples show -1", "\"-1\""},
        {"/samples show x", "\"x\""},
        {"/samples show 1 2", "too many arguments"},
        {"/samples 2 3", "too many arguments"},
        {"/beam show 4", "\"4\" is not a column in [1, 3]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_refused(bad[i][0], bad[i][1]);
        ck_assert_int_eq(C->show, 3);
    }
}
END_TEST

START_TEST(help_lists_the_commands_and_defines_the_figures)
{
    ck_assert(!(run("/help") & CMD_ERROR));
    ck_assert_msg(strstr(E.out, "/beam [N|off|show [K|off]]") && strstr(E.out, "/samples [N|off|show [K|off]]") &&
                  strstr(E.out, "/compare [SETTING V1 V2 ...|off]") && strstr(E.out, "/keep K"),
                  "%s", E.out);
    ck_assert_msg(strstr(E.out, "raw distribution") && strstr(E.out, "distinct-2") &&
                  strstr(E.out, "3-grams"), "%s", E.out);
    ck_assert(!(run("/help beam") & CMD_ERROR));
    ck_assert_msg(strstr(E.out, "next line you send"), "%s", E.out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("compare");
    TCase *tc = tu_add_case(s, "compare", TU_TESTS(
            the_best_beam_becomes_the_reply_and_undo_drops_the_turn,
            the_live_beam_view_shows_every_step_and_fades_pruned_beams,
            keep_swaps_the_reply_and_refuses_after_an_edit,
            compare_columns_share_one_seed,
            bad_values_are_refused_naming_them_and_change_nothing,
            samples_show_k_keeps_what_a_plain_run_with_that_seed_shows_at_that_step,
            beam_show_k_keeps_the_distribution_beam_k_took_its_last_token_from,
            samples_show_refuses_bad_columns_naming_them_and_keeps_the_choice,
            help_lists_the_commands_and_defines_the_figures));
    tcase_add_unchecked_fixture(tc, files_setup, files_teardown);
    tcase_add_checked_fixture(tc, session_setup, session_teardown);
    tcase_set_timeout(tc, 60);
    return tu_run_suite(s);
}
