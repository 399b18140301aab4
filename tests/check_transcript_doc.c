/* check_transcript_doc.c: the REPL's transcript document (repl/transcript_doc.c): token styles by
 * origin and probability, notices between turns that move back when the past is edited, characters
 * split across tokens, escapes; speculative tokens keep their marks, and a rejected draft shows
 * just before its replacement until it is cleared. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "core/model/modelgen.h"
#include "core/tokenizer/tokenizer.h"
#include "core/session/session.h"
#include "repl/transcript_doc.h"
#include "tests/testutil.h"

static tokenizer *tok;
static char *dir;

static void tok_setup(void)
{
    dir = tu_tmpdir();
    tt_error err = {0};
    ck_assert_msg(modelgen_write_tokenizer(dir, 512, &err) == TT_OK, "%s", err.msg);
    ck_assert_msg(tokenizer_load_dir(dir, &tok, &err) == TT_OK, "%s", err.msg);
}

static void tok_teardown(void)
{
    tokenizer_free(tok);
    tu_tmpdir_free(dir);
}

/* The document as UTF-8 (ASCII here), and the style of its character i. */
static char text_buf[1024];
static const char *doc_text(const ui_doc *d)
{
    size_t n = 0;
    for (size_t i = 0; i < d->n && n + 1 < sizeof text_buf; i++)
        text_buf[n++] = d->chars[i].cp < 128 ? (char)d->chars[i].cp : '?';
    text_buf[n] = 0;
    return text_buf;
}

/* GPT-2 byte symbols: id c - 33 is the printable byte c. */
#define ID(c) ((int32_t)((c) - 33))

/* A new document drawn from s. */
static void doc_open(transcript_doc *t, const session *s)
{
    transcript_doc_init(t);
    transcript_doc_sync(t, s);
}

START_TEST(rejected_draft_shows_before_its_replacement_until_cleared)
{
    int32_t ids[] = {ID('a'), ID('b'), ID('c'), ID('d'), ID('e')};
    token_info info[5] = {
        {.origin = TOKEN_USER, .p = 1}, {.origin = TOKEN_USER, .p = 1},
        {.origin = TOKEN_DRAFT_ACCEPTED, .p = 0.9f}, {.origin = TOKEN_TARGET_RESAMPLE, .p = 0.3f},
        {.origin = TOKEN_BONUS, .p = 0.6f},
    };
    session s;
    memset(&s, 0, sizeof s);
    s.tok = tok;
    s.tokens = ids;
    s.info = info;
    s.n_tokens = 5;
    transcript_doc t;
    doc_open(&t, &s);
    ck_assert_str_eq(doc_text(&t.doc), "abcde");
    /* the accepted draft, the replacement and the bonus keep distinct marks */
    uint8_t st, at_acc, at_res, at_bonus;
    transcript_doc_token_style(TOKEN_DRAFT_ACCEPTED, 0.9f, &st, &at_acc);
    transcript_doc_token_style(TOKEN_TARGET_RESAMPLE, 0.3f, &st, &at_res);
    transcript_doc_token_style(TOKEN_BONUS, 0.6f, &st, &at_bonus);
    ck_assert_int_eq(t.doc.chars[2].attr, at_acc);
    ck_assert_int_eq(t.doc.chars[3].attr, at_res);
    ck_assert_int_ne(at_acc, at_res);

    /* the draft 'x' was rejected and 'd' (index 3) replaced it */
    transcript_doc_set_rejected(&t, 3, ID('x'));
    transcript_doc_sync(&t, &s);
    ck_assert_str_eq(doc_text(&t.doc), "abcxde");
    ck_assert_int_eq(t.doc.chars[3].style, UI_STYLE_ERROR);
    ck_assert(t.doc.chars[3].attr & UI_ATTR_DIM);
    ck_assert_int_ne(t.doc.chars[4].style, UI_STYLE_ERROR);

    /* appending more tokens keeps the mark where it is */
    s.n_tokens = 5;
    transcript_doc_sync(&t, &s);
    ck_assert_str_eq(doc_text(&t.doc), "abcxde");

    /* the next round removes it */
    transcript_doc_set_rejected(&t, -1, -1);
    transcript_doc_sync(&t, &s);
    ck_assert_str_eq(doc_text(&t.doc), "abcde");
    /* an undo past the mark drops it with the tokens */
    transcript_doc_set_rejected(&t, 4, ID('y'));
    s.n_tokens = 3;
    transcript_doc_sync(&t, &s);
    ck_assert_str_eq(doc_text(&t.doc), "abc");
    transcript_doc_free(&t);
}
END_TEST

/* A session view over fixed arrays (transcript_doc_sync only reads tokens, info and the
 * tokenizer). */
static session view(int32_t *ids, token_info *info, int n)
{
    session s;
    memset(&s, 0, sizeof s);
    s.tok = tok;
    s.tokens = ids;
    s.info = info;
    s.n_tokens = n;
    return s;
}

START_TEST(token_styles_follow_origin_and_probability)
{
    int32_t ids[] = {ID('u'), ID('a'), ID('b'), ID('c'), ID('d'), ID('e'), ID('f')};
    token_info info[7] = {
        {.origin = TOKEN_USER, .p = 1},     {.origin = TOKEN_SAMPLED, .p = 0.9f},
        {.origin = TOKEN_SAMPLED, .p = 0.6f}, {.origin = TOKEN_SAMPLED, .p = 0.3f},
        {.origin = TOKEN_SAMPLED, .p = 0.1f}, {.origin = TOKEN_SAMPLED, .p = 0.01f},
        {.origin = TOKEN_FORCED, .p = 0.2f},
    };
    session s = view(ids, info, 7);
    transcript_doc t;
    doc_open(&t, &s);
    ck_assert_str_eq(doc_text(&t.doc), "uabcdef");
    const uint8_t want[7] = {UI_STYLE_USER, UI_STYLE_P_HIGH, UI_STYLE_P_MID, UI_STYLE_P_LOW,
                             UI_STYLE_P_VLOW, UI_STYLE_P_RARE, UI_STYLE_P_LOW};
    for (int i = 0; i < 7; i++)
        ck_assert_msg(t.doc.chars[i].style == want[i], "char %d: style %d", i,
                      t.doc.chars[i].style);
    ck_assert_int_eq(t.doc.chars[5].attr, 0);
    ck_assert_int_eq(t.doc.chars[6].attr, UI_ATTR_UNDERLINE);   /* chosen with /pick */
    transcript_doc_free(&t);
}
END_TEST

START_TEST(notices_sit_between_turns_and_move_back_when_the_past_is_edited)
{
    int32_t ids[] = {ID('a'), ID('b'), ID('c'), ID('d')};
    token_info info[4] = {{.origin = TOKEN_USER, .p = 1}, {.origin = TOKEN_SAMPLED, .p = 1},
                          {.origin = TOKEN_USER, .p = 1}, {.origin = TOKEN_SAMPLED, .p = 1}};
    session s = view(ids, info, 2);
    transcript_doc t;
    doc_open(&t, &s);
    transcript_doc_note_add(&t, 2, UI_STYLE_NOTICE, "temp 0.5 (was 1)");
    s.n_tokens = 4;
    transcript_doc_sync(&t, &s);
    ck_assert_str_eq(doc_text(&t.doc), "ab\ntemp 0.5 (was 1)\ncd");
    ck_assert_int_eq(t.doc.chars[3].style, UI_STYLE_NOTICE);
    /* /undo back to one token: the notice moves to the new end, then new text follows it */
    s.n_tokens = 1;
    transcript_doc_sync(&t, &s);
    ck_assert_str_eq(doc_text(&t.doc), "a\ntemp 0.5 (was 1)\n");
    ids[1] = ID('z');
    s.n_tokens = 2;
    transcript_doc_sync(&t, &s);
    ck_assert_str_eq(doc_text(&t.doc), "a\ntemp 0.5 (was 1)\nz");
    /* /reset: notices are forgotten */
    transcript_doc_clear(&t);
    s.n_tokens = 0;
    transcript_doc_sync(&t, &s);
    ck_assert_uint_eq(t.doc.n, 0);
    transcript_doc_free(&t);
}
END_TEST

START_TEST(a_character_split_across_tokens_appears_once_whole)
{
    /* e-acute is C3 A9: two byte tokens (GPT-2 byte symbols 127 and 102) */
    int32_t ids[] = {ID('x'), 127, 102, ID('y')};
    token_info info[4] = {{.origin = TOKEN_USER, .p = 1}, {.origin = TOKEN_SAMPLED, .p = 0.9f},
                          {.origin = TOKEN_SAMPLED, .p = 0.01f}, {.origin = TOKEN_SAMPLED, .p = 1}};
    session s = view(ids, info, 2);
    transcript_doc t;
    doc_open(&t, &s);
    ck_assert_uint_eq(t.doc.n, 1);   /* the lead byte waits for the rest */
    s.n_tokens = 4;
    transcript_doc_sync(&t, &s);
    ck_assert_uint_eq(t.doc.n, 3);
    ck_assert_uint_eq(t.doc.chars[1].cp, 0xe9);
    ck_assert_int_eq(t.doc.chars[1].style, UI_STYLE_P_RARE);   /* the token that completed it */
    transcript_doc_free(&t);
}
END_TEST

START_TEST(control_bytes_are_escaped_and_end_of_text_is_marked)
{
    int32_t eot = tokenizer_eot_id(tok);
    int32_t ids[] = {ID('a'), 195 /* byte 07 */, eot};
    token_info info[3] = {{.origin = TOKEN_USER, .p = 1}, {.origin = TOKEN_SAMPLED, .p = 1},
                          {.origin = TOKEN_SAMPLED, .p = 1}};
    session s = view(ids, info, 3);
    transcript_doc t;
    doc_open(&t, &s);
    ck_assert_str_eq(doc_text(&t.doc), "a\\x07<|endoftext|>");
    ck_assert_int_eq(t.doc.chars[1].style, UI_STYLE_DIM);
    ck_assert_int_eq(t.doc.chars[5].style, UI_STYLE_SPECIAL);
    transcript_doc_free(&t);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("transcript_doc");
    TCase *tc = tcase_create("transcript");
    tcase_add_unchecked_fixture(tc, tok_setup, tok_teardown);
    tcase_add_test(tc, token_styles_follow_origin_and_probability);
    tcase_add_test(tc, notices_sit_between_turns_and_move_back_when_the_past_is_edited);
    tcase_add_test(tc, a_character_split_across_tokens_appears_once_whole);
    tcase_add_test(tc, control_bytes_are_escaped_and_end_of_text_is_marked);
    tcase_add_test(tc, rejected_draft_shows_before_its_replacement_until_cleared);
    suite_add_tcase(su, tc);
    return tu_run_suite(su);
}
