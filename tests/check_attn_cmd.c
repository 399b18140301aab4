/* check_attn_cmd.c: /attn, the attention view (repl/attn_cmd.c): bad input is refused in one line
 * naming the range and changes nothing; the view turns the engine's capture on and off; it keeps
 * the steps of a generation (the last ATTN_KEEP_STEPS), /attn back and latest move along them;
 * the pane names the step and lists its most attended tokens; the transcript overlay restyles the
 * attended tokens and marks the drawn one, leaving the document itself as it was. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "repl/attn_cmd.h"
#include "repl/transcript_doc.h"
#include "ui/grid.h"
#include "tests/cmd_session.h"

static attn_state *A;   /* the module's state in E */

static void files_setup(void)
{
    model_dir = tu_tiny_model_dir(128);
}

static void files_teardown(void)
{
    tu_tmpdir_free(model_dir);
}

static void session_setup(void)
{
    cmd_session_open();
    cmd_env_add_module(&E, &attn_cmd_module);
    A = cmd_env_state(&E, &attn_cmd_module);
    ck_assert_ptr_nonnull(A);
}

static void session_teardown(void)
{
    cmd_session_close();
}

static bool track(void *user, const session_event *ev)
{
    (void)user;
    if (!ev->flush)
        attn_cmd_track_step(&E, ev);
    return true;
}

static void generate(const char *prompt, int n)
{
    tt_error err = {0};
    S.set.max_new_tokens = n;
    S.set.stop_at_eos = false;
    ck_assert_msg(session_add_user_text(&S, prompt, strlen(prompt), &err) == TT_OK, "%s", err.msg);
    ck_assert_msg(session_generate(&S, track, NULL, &err) == TT_OK, "%s", err.msg);
}

START_TEST(bad_input_gets_one_line_naming_the_range_and_changes_nothing)
{
    const model_config *c = &mdl->config;
    char want[128];
    const struct {
        const char *line, *says;
    } bad[] = {
        {"/attn layer 99", "this model's layers are 0 .. "},
        {"/attn layer", "this model's layers are 0 .. "},
        {"/attn head -1", "this model's heads are 0 .. "},
        {"/attn 9.9", "layer.head"},
        {"/attn 1.x", "layer.head"},
        {"/attn sideways", "give on, off, avg"},
        {"/attn avg now", "too many arguments"},
        {"/attn back 0", "give a number of steps"},
        {"/attn back", "earlier step"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(run(bad[i].line) & CMD_ERROR, "%s was accepted", bad[i].line);
        ck_assert_msg(strstr(E.out, bad[i].says), "%s: %s", bad[i].line, E.out);
        const char *nl = strchr(E.out, '\n');
        ck_assert_msg(!nl || !nl[1], "%s: more than one line: %s", bad[i].line, E.out);
        ck_assert(!A->on && A->layer == -1 && A->head == -1);
        ck_assert_ptr_null(eng->attention);
    }
    snprintf(want, sizeof want, "0 .. %d", c->L - 1);
    run("/attn layer 99");
    ck_assert_msg(strstr(E.out, want), "%s", E.out);
    E.line_mode = true;
    ck_assert(run("/attn") & CMD_ERROR);
    ck_assert_msg(strstr(E.out, "generate --json --attention"), "%s", E.out);
    E.line_mode = false;
}
END_TEST

START_TEST(the_view_turns_the_capture_on_and_off_and_chooses_layers_and_heads)
{
    ck_assert(!(run("/attn") & CMD_ERROR));
    ck_assert(A->on);
    ck_assert_ptr_nonnull(eng->attention);
    ck_assert_msg(strstr(E.out, "mean of 2 layers x 4 heads"), "%s", E.out);
    ck_assert(!(run("/attn 1.3") & CMD_ERROR));
    ck_assert(A->layer == 1 && A->head == 3);
    ck_assert_msg(strstr(E.out, "layer 1, head 3"), "%s", E.out);
    ck_assert(!(run("/attn head 2") & CMD_ERROR));
    ck_assert(A->layer == 1 && A->head == 2);
    ck_assert(!(run("/attn avg") & CMD_ERROR));
    ck_assert(A->layer == -1 && A->head == -1);
    ck_assert(!(run("/attn") & CMD_ERROR));
    ck_assert(!A->on);
    ck_assert_ptr_null(eng->attention);
    ck_assert_msg(strstr(E.out, "attention view off"), "%s", E.out);
}
END_TEST

START_TEST(steps_are_kept_and_back_moves_the_pane_and_the_overlay)
{
    ck_assert(!(run("/attn on") & CMD_ERROR));
    generate("Hello there", 5);
    ck_assert_int_eq(A->n_steps, 5);
    ck_assert_int_eq(A->back, 0);
    const attention_view *last = &A->steps[A->n_steps - 1];
    ck_assert_int_eq(last->at, S.n_tokens - 1);        /* the step that drew the last token */
    ck_assert_int_eq(last->n, S.n_tokens - 1 - S.window_start);

    ui_grid g;
    ck_assert(ui_grid_init(&g, 12, 60));
    attn_cmd_draw(&E, &g, (ui_rect){0, 0, 12, 60}, &S);
    char row[256], want[64];
    ui_grid_row_text(&g, 0, row, sizeof row);
    snprintf(want, sizeof want, "Attention · token %d", S.n_tokens - 1);
    ck_assert_msg(strstr(row, want), "%s", row);
    ui_grid_row_text(&g, 1, row, sizeof row);
    ck_assert_msg(strstr(row, "mean of 2 layers x 4 heads"), "%s", row);
    ui_grid_row_text(&g, 2, row, sizeof row);
    ck_assert_msg(strstr(row, "0."), "the pane lists no weight: %s", row);

    ck_assert(!(run("/attn back 2") & CMD_ERROR));
    ck_assert_int_eq(A->back, 2);
    ui_grid_clear(&g);
    attn_cmd_draw(&E, &g, (ui_rect){0, 0, 12, 60}, &S);
    ui_grid_row_text(&g, 0, row, sizeof row);
    snprintf(want, sizeof want, "Attention · token %d", S.n_tokens - 3);
    ck_assert_msg(strstr(row, want) && strstr(row, "2 steps back"), "%s", row);

    /* the overlay: the document itself unchanged, the drawn token marked in the copy */
    transcript_doc tr;
    transcript_doc_init(&tr);
    transcript_doc_sync(&tr, &S);
    const ui_doc *o = attn_cmd_overlay(&E, &tr);
    ck_assert_ptr_ne(o, &tr.doc);
    ck_assert_uint_eq(o->n, tr.doc.n);
    size_t b, end;
    ck_assert(transcript_doc_token_span(&tr, S.n_tokens - 3, &b, &end));
    /* (a random model's token may be part of a character another token completes: no span) */
    for (size_t i = b; i < end; i++) {
        ck_assert_int_eq(o->chars[i].style, UI_STYLE_CHOSEN);
        ck_assert_int_ne(tr.doc.chars[i].style, UI_STYLE_CHOSEN);
    }
    int restyled = 0;
    for (size_t i = 0; i < o->n; i++)
        if (i < b || i >= end)
            restyled += o->chars[i].style != tr.doc.chars[i].style ||
                        o->chars[i].attr != tr.doc.chars[i].attr;
    ck_assert_int_gt(restyled, 0);                     /* the keys too, not only the drawn token */

    ck_assert(!(run("/attn latest") & CMD_ERROR));
    ck_assert_int_eq(A->back, 0);
    ck_assert(!(run("/attn off") & CMD_ERROR));
    ck_assert_ptr_eq(attn_cmd_overlay(&E, &tr), &tr.doc);   /* off: the document as it is */
    ck_assert_int_eq(attn_cmd_pane_height(&E, 30), 0);
    transcript_doc_free(&tr);
    ui_grid_free(&g);
}
END_TEST

START_TEST(only_the_last_steps_are_kept)
{
    ck_assert(!(run("/attn on") & CMD_ERROR));
    generate("Once", ATTN_KEEP_STEPS + 6);
    ck_assert_int_eq(A->n_steps, ATTN_KEEP_STEPS);
    ck_assert_int_eq(A->steps[A->n_steps - 1].at, S.n_tokens - 1);
    ck_assert_int_eq(A->steps[0].at, S.n_tokens - ATTN_KEEP_STEPS);
    ck_assert(run("/attn back 64") & CMD_ERROR);
    ck_assert(!(run("/attn back 63") & CMD_ERROR));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("attn_cmd");
    TCase *tc = tu_add_case(s, "attn", TU_TESTS(
            bad_input_gets_one_line_naming_the_range_and_changes_nothing,
            the_view_turns_the_capture_on_and_off_and_chooses_layers_and_heads,
            steps_are_kept_and_back_moves_the_pane_and_the_overlay,
            only_the_last_steps_are_kept));
    tcase_add_unchecked_fixture(tc, files_setup, files_teardown);
    tcase_add_checked_fixture(tc, session_setup, session_teardown);
    tcase_set_timeout(tc, 60);
    return tu_run_suite(s);
}
