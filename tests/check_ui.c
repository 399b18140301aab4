/* check_ui.c: the panes render into the in-memory grid as a user would read them: wide characters,
 * word wrapping, scrolling, histogram bars, cut markers, the draw, the status bar, the layout and
 * the line editor. No terminal involved. */
#include <check.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/model/modelgen.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/testutil.h"
#include "ui/grid.h"
#include "ui/histogram.h"
#include "ui/input.h"
#include "ui/layout.h"
#include "ui/status.h"
#include "ui/transcript_pane.h"

static char row_buf[4096];

static const char *row(const ui_grid *g, int y)
{
    ui_grid_row_text(g, y, row_buf, sizeof row_buf);
    return row_buf;
}

/* Asserts that rows 0 .. n-1 of g read want[0 .. n-1], naming the first row that differs. */
static void assert_rows(const ui_grid *g, const char *const *want, int n)
{
    for (int y = 0; y < n; y++)
        ck_assert_msg(strcmp(row(g, y), want[y]) == 0, "row %d: '%s', want '%s'", y, row(g, y),
                      want[y]);
}
#define ASSERT_ROWS(g, ...)                                                                       \
    assert_rows((g), (const char *const[]){__VA_ARGS__},                                        \
                (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)))

/* Counts code point cp in row y between columns [x0, x1). */
static int count_cp(const ui_grid *g, int y, int x0, int x1, uint32_t cp)
{
    int n = 0;
    for (int x = x0; x < x1; x++) {
        const ui_cell *c = ui_grid_cell(g, y, x);
        if (c && c->width && c->cp == cp)
            n++;
    }
    return n;
}

/* The row of the grid whose text contains s, or -1. */
static int find_row(const ui_grid *g, const char *s)
{
    for (int y = 0; y < g->rows; y++)
        if (strstr(row(g, y), s))
            return y;
    return -1;
}

/* The row whose text starts with s, or -1. */
static int find_row_start(const ui_grid *g, const char *s)
{
    for (int y = 0; y < g->rows; y++)
        if (strncmp(row(g, y), s, strlen(s)) == 0)
            return y;
    return -1;
}

/* Column of the first cell holding cp in row y, or -1. */
static int find_cp(const ui_grid *g, int y, uint32_t cp)
{
    for (int x = 0; x < g->cols; x++) {
        const ui_cell *c = ui_grid_cell(g, y, x);
        if (c->width && c->cp == cp)
            return x;
    }
    return -1;
}

/* ---------------------------------------------------------------------------------------------
 * Grid */

START_TEST(wide_character_takes_two_cells)
{
    ui_grid g;
    ck_assert(ui_grid_init(&g, 2, 10));
    int x = ui_grid_puts(&g, 0, 0, 10, "\xe4\xb8\xad" "a", UI_STYLE_USER, 0);   /* 中a */
    ck_assert_int_eq(x, 3);
    ck_assert_int_eq(ui_grid_cell(&g, 0, 0)->width, 2);
    ck_assert_int_eq(ui_grid_cell(&g, 0, 0)->cp, 0x4e2d);
    ck_assert_int_eq(ui_grid_cell(&g, 0, 1)->width, 0);
    ck_assert_int_eq(ui_grid_cell(&g, 0, 2)->cp, 'a');
    ck_assert_str_eq(row(&g, 0), "\xe4\xb8\xad" "a");
    ck_assert_int_eq(ui_text_width("\xe4\xb8\xad\xe6\x96\x87" "ab", 8), 6);
    ui_grid_free(&g);
}
END_TEST

START_TEST(wide_character_never_straddles_the_edge)
{
    ui_grid g;
    ck_assert(ui_grid_init(&g, 1, 5));
    int x = ui_grid_puts(&g, 0, 0, 5, "abcd\xe4\xb8\xad", UI_STYLE_NORMAL, 0);
    ck_assert_int_eq(x, 5);
    ck_assert_int_eq(ui_grid_cell(&g, 0, 4)->cp, ' ');
    ck_assert_int_eq(ui_grid_cell(&g, 0, 4)->width, 1);
    ck_assert_str_eq(row(&g, 0), "abcd");
    /* And at a clip column inside the row. */
    ui_grid_clear(&g);
    ui_grid_puts(&g, 0, 0, 3, "a\xe4\xb8\xad\xe4\xb8\xad", UI_STYLE_NORMAL, 0);
    ck_assert_str_eq(row(&g, 0), "a\xe4\xb8\xad");
    ui_grid_clear(&g);
    ui_grid_puts(&g, 0, 0, 2, "a\xe4\xb8\xad", UI_STYLE_NORMAL, 0);
    ck_assert_str_eq(row(&g, 0), "a");
    ck_assert_int_eq(ui_grid_cell(&g, 0, 2)->cp, ' ');
    ui_grid_free(&g);
}
END_TEST

START_TEST(overwriting_half_a_wide_character_blanks_the_other_half)
{
    ui_grid g;
    ck_assert(ui_grid_init(&g, 1, 6));
    ui_grid_puts(&g, 0, 0, 6, "\xe4\xb8\xad\xe6\x96\x87", UI_STYLE_NORMAL, 0);   /* 中文 */
    ui_grid_set(&g, 0, 1, 'x', 1, UI_STYLE_NORMAL, 0);    /* right half of 中 */
    ck_assert_int_eq(ui_grid_cell(&g, 0, 0)->cp, ' ');
    ck_assert_int_eq(ui_grid_cell(&g, 0, 0)->width, 1);
    ui_grid_set(&g, 0, 2, 'y', 1, UI_STYLE_NORMAL, 0);    /* left half of 文 */
    ck_assert_int_eq(ui_grid_cell(&g, 0, 3)->cp, ' ');
    ck_assert_int_eq(ui_grid_cell(&g, 0, 3)->width, 1);
    ck_assert_str_eq(row(&g, 0), " xy");
    ui_grid_free(&g);
}
END_TEST

START_TEST(combining_mark_joins_the_previous_cell)
{
    ui_grid g;
    ck_assert(ui_grid_init(&g, 1, 6));
    int x = ui_grid_puts(&g, 0, 0, 6, "e\xcc\x81x", UI_STYLE_NORMAL, 0);   /* e + U+0301, x */
    ck_assert_int_eq(x, 2);
    ck_assert_int_eq(ui_grid_cell(&g, 0, 0)->mark, 0x301);
    ck_assert_str_eq(row(&g, 0), "e\xcc\x81x");
    ui_grid_free(&g);
}
END_TEST

START_TEST(invalid_utf8_shows_as_replacement_character)
{
    ui_grid g;
    ck_assert(ui_grid_init(&g, 1, 6));
    ui_grid_put(&g, 0, 0, 6, "a\xff" "b", 3, UI_STYLE_NORMAL, 0);
    ck_assert_str_eq(row(&g, 0), "a\xef\xbf\xbd" "b");
    ui_grid_free(&g);
}
END_TEST

/* A binary file's bytes (ESC, backspace, C1 controls, a private-use character) take the one
 * column the grid counted, so a pane border after them stays where it is drawn. */
START_TEST(control_characters_take_one_column_as_replacement_characters)
{
    ui_grid g;
    ck_assert(ui_grid_init(&g, 1, 8));
    const char text[] = "a\x1b\x08\xc2\x85\xee\x80\x80" "b|";
    int x = ui_grid_put(&g, 0, 0, 8, text, sizeof text - 1, UI_STYLE_NORMAL, 0);
    ck_assert_int_eq(x, 7);
    ck_assert_str_eq(row(&g, 0), "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xee\x80\x80" "b|");
    ck_assert_int_eq(ui_grid_cell(&g, 0, 6)->cp, '|');
    ui_grid_free(&g);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Transcript */

/* A transcript pane of rows x cols over a document of its own, scrolled to the end. */
typedef struct {
    ui_grid g;
    ui_doc d;
    ui_rect r;
    ui_scroll sc;
} pane;

static void pane_open(pane *p, int rows, int cols, const char *text)
{
    ck_assert(ui_grid_init(&p->g, rows, cols));
    ui_doc_init(&p->d);
    if (text)
        ck_assert(ui_doc_append(&p->d, text, strlen(text), UI_STYLE_NORMAL, 0));
    p->r = (ui_rect){0, 0, rows, cols};
    p->sc = (ui_scroll){0};
}

/* Appends the lines "line FROM" .. "line TO-1", each after a newline but the very first. */
static void pane_append_lines(pane *p, int from, int to)
{
    char line[32];
    for (int i = from; i < to; i++) {
        int n = snprintf(line, sizeof line, "%sline %d", i ? "\n" : "", i);
        ck_assert(ui_doc_append(&p->d, line, (size_t)n, UI_STYLE_NORMAL, 0));
    }
}

static void pane_draw(pane *p, bool caret)
{
    ui_transcript_pane_draw(&p->g, p->r, &p->d, &p->sc, caret);
}

static void pane_close(pane *p)
{
    ui_doc_free(&p->d);
    ui_grid_free(&p->g);
}

START_TEST(transcript_wraps_at_spaces_and_cuts_long_words)
{
    pane p;
    pane_open(&p, 6, 10, "the quick brown fox abcdefghijklmn");
    pane_draw(&p, false);
    ASSERT_ROWS(&p.g, "the quick", "brown fox", "abcdefghij", "klmn", "");
    pane_close(&p);
}
END_TEST

START_TEST(transcript_wraps_wide_characters_by_width)
{
    pane p;
    /* 中文字符测试: six wide characters, two per 5-column line (a third would need 6). */
    pane_open(&p, 4, 5, "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97\xe7\xac\xa6\xe6\xb5\x8b\xe8\xaf\x95");
    pane_draw(&p, false);
    ASSERT_ROWS(&p.g, "\xe4\xb8\xad\xe6\x96\x87", "\xe5\xad\x97\xe7\xac\xa6",
                "\xe6\xb5\x8b\xe8\xaf\x95");
    for (int y = 0; y < 3; y++)
        ck_assert_int_eq(ui_grid_cell(&p.g, y, 4)->cp, ' ');
    pane_close(&p);
}
END_TEST

START_TEST(transcript_keeps_paragraphs_and_styles)
{
    pane p;
    pane_open(&p, 4, 20, NULL);
    ui_doc_append(&p.d, "Hello", 5, UI_STYLE_USER, 0);
    ui_doc_append(&p.d, " world\n\tx", 9, UI_STYLE_P_RARE, UI_ATTR_UNDERLINE);
    pane_draw(&p, false);
    ASSERT_ROWS(&p.g, "Hello world", "    x");   /* a tab to column 4 */
    ck_assert_int_eq(ui_grid_cell(&p.g, 0, 0)->style, UI_STYLE_USER);
    ck_assert_int_eq(ui_grid_cell(&p.g, 0, 6)->style, UI_STYLE_P_RARE);
    ck_assert_int_eq(ui_grid_cell(&p.g, 0, 6)->attr, UI_ATTR_UNDERLINE);
    pane_close(&p);
}
END_TEST

START_TEST(transcript_shows_the_end_and_scrolls_back)
{
    pane p;
    pane_open(&p, 5, 30, NULL);
    pane_append_lines(&p, 0, 20);
    pane_draw(&p, false);
    ck_assert_str_eq(row(&p.g, 0), "line 15");
    ck_assert_str_eq(row(&p.g, 4), "line 19");
    ck_assert(p.sc.more_above);
    p.sc.scroll = 3;
    pane_draw(&p, false);
    ck_assert_str_eq(row(&p.g, 0), "line 12");
    ck_assert(strstr(row(&p.g, 4), "3 more lines") != NULL);
    p.sc.scroll = 1000;   /* clamps to the top */
    pane_draw(&p, false);
    ck_assert_int_eq(p.sc.scroll, 15);
    ck_assert_str_eq(row(&p.g, 0), "line 0");
    ck_assert(!p.sc.more_above);
    pane_close(&p);
}
END_TEST

START_TEST(a_view_scrolled_back_holds_still_while_text_arrives)
{
    pane p;
    pane_open(&p, 5, 30, NULL);
    pane_append_lines(&p, 0, 20);
    p.sc = (ui_scroll){.scroll = 3, .anchor = p.d.n};   /* PageUp remembered where the end was */
    pane_draw(&p, false);
    ck_assert_str_eq(row(&p.g, 0), "line 12");
    pane_append_lines(&p, 20, 30);   /* the model keeps writing */
    pane_draw(&p, true);
    ck_assert_str_eq(row(&p.g, 0), "line 12");
    ck_assert(strstr(row(&p.g, 4), "new text") != NULL);
    p.sc.scroll = 0;   /* back at the end: the anchor no longer applies */
    pane_draw(&p, false);
    ck_assert_str_eq(row(&p.g, 4), "line 29");
    pane_close(&p);
}
END_TEST

/* /help's lines: "  /name ARGS   usage" wraps with the usage column kept (issue 25); the
 * conversation's own text keeps wrapping from the left edge. */
START_TEST(a_listed_notice_line_wraps_under_its_description)
{
    pane p;
    pane_open(&p, 6, 30, NULL);
    const char *help = "  /topp [X]   keep the smallest set with mass >= X\n";
    ui_doc_append(&p.d, help, strlen(help), UI_STYLE_NOTICE, 0);
    const char *text = "  two spaces   then a long conversation line";
    ui_doc_append(&p.d, text, strlen(text), UI_STYLE_NORMAL, 0);
    pane_draw(&p, false);
    ASSERT_ROWS(&p.g, "  /topp [X]   keep the", "              smallest set",
                "              with mass >= X", "  two spaces   then a long", "conversation line");
    ck_assert_int_eq(ui_grid_cell(&p.g, 1, 14)->style, UI_STYLE_NOTICE);
    pane_close(&p);
}
END_TEST

/* A command's answer taller than the pane opens at its first line (not at its end), with the
 * "more lines" note; the next answer that fits shows the end as before. */
START_TEST(a_long_answer_opens_at_its_top)
{
    pane p;
    pane_open(&p, 5, 30, NULL);
    pane_append_lines(&p, 0, 3);
    ui_doc_append(&p.d, "\n", 1, UI_STYLE_NORMAL, 0);
    size_t at = p.d.n;
    for (int i = 0; i < 12; i++) {
        char line[32];
        int n = snprintf(line, sizeof line, "answer %d\n", i);
        ui_doc_append(&p.d, line, (size_t)n, UI_STYLE_NOTICE, 0);
    }
    p.sc.open_top = true;
    p.sc.top_at = at;
    pane_draw(&p, false);
    ck_assert_str_eq(row(&p.g, 0), "answer 0");
    ck_assert(strstr(row(&p.g, 4), "more lines") != NULL);
    ck_assert(!p.sc.open_top);   /* used once */
    p.sc.scroll = 0;             /* PgDn to the end */
    pane_draw(&p, false);
    ck_assert_str_eq(row(&p.g, 3), "answer 11");
    /* A short answer: the end shows, nothing scrolls. */
    at = p.d.n;
    ui_doc_append(&p.d, "short\n", 6, UI_STYLE_NOTICE, 0);
    p.sc.open_top = true;
    p.sc.top_at = at;
    pane_draw(&p, false);
    ck_assert_int_eq(p.sc.scroll, 0);
    ck_assert_str_eq(row(&p.g, 3), "short");
    pane_close(&p);
}
END_TEST

START_TEST(transcript_caret_follows_the_last_character)
{
    pane p;
    pane_open(&p, 3, 12, "abc");
    pane_draw(&p, true);
    ck_assert_int_eq(ui_grid_cell(&p.g, 0, 3)->cp, 0x258c);
    pane_close(&p);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Histogram */

static tokenizer *tok;
static char *tok_dir;
static int32_t id_space_word = -1;   /* a token that starts with a space */

static void tokenizer_setup(void)
{
    tok_dir = tu_tmpdir();
    tt_error err = {0};
    ck_assert_msg(modelgen_write_tokenizer(tok_dir, 512, &err) == TT_OK, "%s", err.msg);
    ck_assert_msg(tokenizer_load_dir(tok_dir, &tok, &err) == TT_OK, "%s", err.msg);
    for (int32_t id = 256; id < 511 && id_space_word < 0; id++) {
        size_t n = 0;
        const char *b = tokenizer_token_bytes(tok, id, &n);
        if (b && n >= 2 && b[0] == ' ' && b[1] >= 'a' && b[1] <= 'z')
            id_space_word = id;
    }
}

static void tokenizer_teardown(void)
{
    tokenizer_free(tok);
    tu_tmpdir_free(tok_dir);
}

#define ID_NEWLINE 198   /* GPT-2's byte order: '\n' is the 199th byte symbol */

static sampler_entry entry(int32_t id, float raw, float p, sampler_cut cut)
{
    return (sampler_entry){.id = id, .logit = 0, .raw_p = raw, .p = p, .cut = (uint8_t)cut};
}

/* Raw 0.4 0.2 0.1 0.1 0.05 0.05 ...: top-k 4 removes the rest, then top-p cut the 4th, min-p
 * nothing. The second token is sampled with u = 0.75. */
static sampler_snapshot snapshot(void)
{
    sampler_snapshot s;
    memset(&s, 0, sizeof s);
    float raw[8] = {0.4f, 0.2f, 0.1f, 0.1f, 0.05f, 0.05f, 0.04f, 0.03f};
    float fin[8] = {4.0f / 7, 2.0f / 7, 1.0f / 7, 0, 0, 0, 0, 0};
    sampler_cut cut[8] = {0, 0, 0, SAMPLER_CUT_TOP_P, SAMPLER_CUT_TOP_K, SAMPLER_CUT_TOP_K,
                          SAMPLER_CUT_MIN_P, SAMPLER_CUT_TOP_K};
    int32_t ids[8] = {'a' - 33, ID_NEWLINE, id_space_word, 'b' - 33, 'c' - 33, 'd' - 33,
                      'e' - 33, 'f' - 33};
    for (int i = 0; i < 8; i++)
        s.top[i] = entry(ids[i], raw[i], fin[i], cut[i]);
    s.top[4].penalized = true;
    s.n_top = 8;
    s.n_kept = 3;
    s.entropy_raw = 2.5f;
    s.entropy_final = 1.38f;
    s.token = ID_NEWLINE;
    s.token_p = 2.0f / 7;
    s.token_raw_p = 0.2f;
    s.token_rank = 1;
    s.u = 0.75;
    s.cum_lo = 4.0 / 7;
    return s;
}

static ui_hist_view view(const sampler_snapshot *s, int bars)
{
    return (ui_hist_view){.kind = UI_HIST_STEP, .snap = s, .tok = tok, .bars = bars, .step = 4,
                          .position = 12, .vocab = 512};
}

/* v drawn into a fresh 20x50 grid. */
static void draw_view(ui_grid *g, const ui_hist_view *v)
{
    ck_assert(ui_grid_init(g, 20, 50));
    ui_histogram_draw(g, (ui_rect){0, 0, 20, 50}, v);
}

/* The step of snapshot() drawn with 8 bars into a fresh 20x50 grid; returns the first row's y. */
static int draw_step(ui_grid *g)
{
    sampler_snapshot s = snapshot();
    ui_hist_view v = view(&s, 8);
    draw_view(g, &v);
    int r1 = find_row_start(g, " 1 ");
    ck_assert_int_ge(r1, 0);
    return r1;
}

START_TEST(histogram_marks_every_cut_stage_and_the_penalty)
{
    ui_grid g;
    draw_step(&g);
    ck_assert(strstr(row(&g, 0), "Step 5") != NULL);
    int r4 = find_row_start(&g, " 4 ");
    ck_assert_int_ge(r4, 0);
    ck_assert_msg(strstr(row(&g, r4), "top-p") != NULL, "%s", row(&g, r4));
    ck_assert(strstr(row(&g, r4 + 1), "top-k") != NULL);
    ck_assert(strstr(row(&g, r4 + 3), "min-p") != NULL);
    /* The penalized token carries the arrow; the kept ones show their final percentage. */
    ck_assert_int_ge(find_cp(&g, r4 + 1, 0x2193), 0);
    ck_assert_int_lt(find_cp(&g, r4, 0x2193), 0);
    ck_assert(strstr(row(&g, r4 - 3), "57.1%") != NULL);   /* 4/7 */
    ck_assert(strstr(row(&g, r4 - 3), "40.0%") != NULL);   /* raw */
    ui_grid_free(&g);
}
END_TEST

START_TEST(histogram_bars_are_proportional)
{
    ui_grid g;
    int r1 = draw_step(&g);
    int full1 = count_cp(&g, r1, 0, 50, 0x2588), full2 = count_cp(&g, r1 + 1, 0, 50, 0x2588);
    int full3 = count_cp(&g, r1 + 2, 0, 50, 0x2588);
    ck_assert_int_gt(full1, 8);
    /* 4/7 : 2/7 : 1/7, within a cell of rounding. */
    ck_assert_int_le(abs(full1 - 2 * full2), 2);
    ck_assert_int_le(abs(full2 - 2 * full3), 2);
    /* A cut token has no final bar, only its raw shade. */
    int r4 = r1 + 3;
    ck_assert_int_eq(count_cp(&g, r4, 0, 50, 0x2588), 0);
    ck_assert_int_gt(count_cp(&g, r4, 0, 50, 0x2591), 0);
    int x = find_cp(&g, r4, 0x2591);
    ck_assert_int_eq(ui_grid_cell(&g, r4, x)->style, UI_STYLE_BAR_CUT);
    ui_grid_free(&g);
}
END_TEST

/* /column temp: a third number, temperature alone, between raw and final, under its header. */
START_TEST(histogram_temp_column_sits_between_raw_and_final)
{
    ui_grid g;
    ck_assert(ui_grid_init(&g, 20, 60));
    sampler_snapshot p = snapshot();
    p.top[0].temp_p = 0.625f;
    ui_hist_view v = view(&p, 8);
    v.temp_column = true;
    ui_histogram_draw(&g, (ui_rect){0, 0, 20, 60}, &v);
    int hdr = find_row_start(&g, " #");
    ck_assert_int_ge(hdr, 0);
    const char *h = row(&g, hdr);
    const char *a = strstr(h, " raw "), *b = a ? strstr(a, "temp") : NULL,
               *c = b ? strstr(b, "final") : NULL;
    ck_assert_msg(a && b && c, "%s", h);
    const char *r = row(&g, hdr + 1);
    const char *raw = strstr(r, "40.0%"), *tp = raw ? strstr(raw, "62.5%") : NULL,
               *fin = tp ? strstr(tp, "57.1%") : NULL;
    ck_assert_msg(raw && tp && fin, "%s", r);
    ui_grid_free(&g);
}
END_TEST

/* Without a UTF-8 terminal (LANG=C) curses shows each cell as ui_ascii_fallback's character:
 * the histogram must stay readable, every drawing character with its own ASCII look-alike. */
START_TEST(histogram_reads_in_ascii_without_a_utf8_terminal)
{
    ui_grid g;
    int r1 = draw_step(&g);
    char row[51];
    for (int x = 0; x < 50; x++)
        row[x] = ui_ascii_fallback(ui_grid_cell(&g, r1, x)->cp);
    row[50] = 0;
    ck_assert_msg(strstr(row, "########") != NULL, "no bar in '%s'", row);
    ck_assert_msg(strchr(row, '?') == NULL, "an unmapped character in '%s'", row);
    static const uint32_t drawn[] = {0x2588, 0x2589, 0x258a, 0x258b, 0x258c, 0x258d, 0x258e,
                                     0x258f, 0x2591, 0x2592, 0x2595, 0x25b2, 0x25b6, 0x2193,
                                     0x2192, 0x2423, 0x2502, 0x2500, 0x2026, 0x00b7};
    for (size_t i = 0; i < sizeof drawn / sizeof drawn[0]; i++) {
        char c = ui_ascii_fallback(drawn[i]);
        ck_assert_msg(c > 0x20 && c < 0x7f && c != '?', "U+%04X has no look-alike", drawn[i]);
    }
    ck_assert_int_eq(ui_ascii_fallback('A'), 'A');
    ck_assert_int_eq(ui_ascii_fallback(0x4e2d), '?');
    ui_grid_free(&g);
}
END_TEST

START_TEST(histogram_highlights_the_sampled_token_and_the_draw)
{
    ui_grid g;
    int r1 = draw_step(&g);
    int r2 = r1 + 1;
    ck_assert_int_eq(ui_grid_cell(&g, r2, 2)->cp, 0x25b6);   /* ▶ on the sampled row */
    ck_assert_int_ne(ui_grid_cell(&g, r1, 2)->cp, 0x25b6);
    ck_assert(strstr(row(&g, r2), "\\n") != NULL);           /* newline token escaped */
    /* The cumulative bar, then the marker at u = 0.75 of its width. */
    int rc = find_row(&g, "\xe2\x96\x95");   /* ▕ */
    ck_assert_int_gt(rc, r1);
    int rm = rc + 1;
    int mx = find_cp(&g, rm, 0x25b2);
    int bw = 50 - 2;
    ck_assert_int_eq(mx, 1 + (int)(0.75 * bw));
    ck_assert(strstr(row(&g, rm), "u=0.750") != NULL);
    ck_assert(strstr(row(&g, rm), "rank 2") != NULL);
    /* Cells of the cumulative bar under the marker belong to the sampled token. */
    ck_assert_int_eq(ui_grid_cell(&g, rc, mx)->style, UI_STYLE_CHOSEN);
    ck_assert(strstr(row(&g, rm + 1), "H 2.50\xe2\x86\x92" "1.38 bits") != NULL);
    ck_assert(strstr(row(&g, rm + 1), "kept 3 of 512") != NULL);
    ui_grid_free(&g);
}
END_TEST

START_TEST(histogram_escapes_a_leading_space)
{
    ck_assert_int_ge(id_space_word, 0);
    char label[64];
    ui_histogram_token_label(tok, id_space_word, 12, label, sizeof label);
    ck_assert_msg(strncmp(label, "\xe2\x90\xa3", 3) == 0, "%s", label);   /* ␣ */
    ui_histogram_token_label(tok, ID_NEWLINE, 12, label, sizeof label);
    ck_assert_str_eq(label, "\\n");
    /* A long label is cut with an ellipsis within its columns. */
    ui_histogram_token_label(tok, id_space_word, 2, label, sizeof label);
    ck_assert_int_le(ui_text_width(label, strlen(label)), 2);
    ck_assert(strstr(label, "\xe2\x80\xa6") != NULL);
    /* A special token is a marker, not text: ⟨<|endoftext|>⟩. */
    ui_histogram_token_label(tok, tokenizer_eot_id(tok), 40, label, sizeof label);
    ck_assert_str_eq(label, "\xe2\x9f\xa8<|endoftext|>\xe2\x9f\xa9");
}
END_TEST

START_TEST(histogram_keeps_the_sampled_token_when_it_ranks_below_the_bars)
{
    sampler_snapshot s = snapshot();
    s.token = s.top[6].id;   /* rank 7, cut by min-p (forced) */
    s.forced = true;
    s.u = -1;
    ui_hist_view v = view(&s, 3);
    ui_grid g;
    draw_view(&g, &v);
    int r = find_row_start(&g, " 7");
    ck_assert_int_ge(r, 0);
    ck_assert_int_eq(ui_grid_cell(&g, r, 2)->cp, 0x25b6);
    ck_assert_int_ge(find_row_start(&g, " 2 "), 0);
    ck_assert_int_lt(find_row_start(&g, " 3 "), 0);   /* the third slot went to the sampled one */
    ck_assert_int_ge(find_row(&g, "forced by /pick"), 0);
    ui_grid_free(&g);
}
END_TEST

START_TEST(histogram_shows_a_sampled_token_ranked_below_the_top_list)
{
    /* The sampler appends the chosen token after the SAMPLER_TOP_MAX most probable ones. */
    sampler_snapshot s;
    memset(&s, 0, sizeof s);
    for (int i = 0; i < SAMPLER_TOP_MAX; i++)
        s.top[i] = entry(300 + i, 0.02f, 0.02f, SAMPLER_CUT_NONE);
    s.top[SAMPLER_TOP_MAX] = entry(290, 0.001f, 0.001f, SAMPLER_CUT_NONE);
    s.n_top = SAMPLER_TOP_MAX + 1;
    s.n_kept = 500;
    s.token = 290;
    s.token_p = 0.001f;
    s.token_rank = 120;
    s.u = 0.99;
    s.cum_lo = 0.989;
    ui_hist_view v = view(&s, 10);
    ui_grid g;
    draw_view(&g, &v);
    int r = find_row_start(&g, "33");
    ck_assert_int_ge(r, 0);
    ck_assert_int_eq(ui_grid_cell(&g, r, 2)->cp, 0x25b6);
    ck_assert_int_ge(find_row(&g, "rank 121"), 0);
    ui_grid_free(&g);
}
END_TEST

START_TEST(histogram_stays_inside_its_rectangle)
{
    for (int w = 10; w <= 60; w += 7) {
        ui_grid g;
        ck_assert(ui_grid_init(&g, 24, 80));
        ui_grid_fill_rect(&g, (ui_rect){0, 0, 24, 80}, UI_STYLE_NORMAL);
        for (int y = 0; y < 24; y++)
            ui_grid_fill(&g, y, 0, 80, 'X', UI_STYLE_NORMAL, 0);
        sampler_snapshot s = snapshot();
        ui_hist_view v = view(&s, 10);
        ui_rect r = {3, 5, 9, w};
        ui_histogram_draw(&g, r, &v);
        for (int y = 0; y < 24; y++)
            for (int x = 0; x < 80; x++) {
                bool inside = y >= r.y && y < r.y + r.h && x >= r.x && x < r.x + r.w;
                if (!inside)
                    ck_assert_msg(ui_grid_cell(&g, y, x)->cp == 'X', "w %d: (%d,%d) drawn", w, y,
                                  x);
            }
        ui_grid_free(&g);
    }
}
END_TEST

START_TEST(histogram_peek_says_nothing_was_drawn)
{
    sampler_snapshot s = snapshot();
    ui_hist_view v = view(&s, 8);
    v.kind = UI_HIST_PEEK;
    v.step_mode = true;
    ui_grid g;
    draw_view(&g, &v);
    ck_assert(strstr(row(&g, 0), "not drawn") != NULL);
    ck_assert_int_ge(find_row(&g, "/pick N"), 0);
    for (int y = 0; y < 20; y++)
        ck_assert_int_lt(find_cp(&g, y, 0x25b6), 0);   /* nothing is marked as sampled */
    ui_grid_free(&g);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Status bar and layout */

/* A speculative step: the target's snapshot (p) with the draft's (q) beside it. The draft listed
 * 'a' (q 0.5) and the newline token (q 0.3) but not the third token. */
static sampler_snapshot draft_snapshot(void)
{
    sampler_snapshot q;
    memset(&q, 0, sizeof q);
    q.top[0] = entry('a' - 33, 0.5f, 0.5f, 0);
    q.top[1] = entry(ID_NEWLINE, 0.3f, 0.3f, 0);
    q.n_top = 2;
    q.token = 'a' - 33;
    return q;
}

START_TEST(histogram_speculative_shows_q_beside_p_and_the_acceptance_test)
{
    ui_grid g;
    ck_assert(ui_grid_init(&g, 20, 60));
    sampler_snapshot p = snapshot(), q = draft_snapshot();
    /* the draft proposed 'a' with q 0.5; the target gives it 4/7 >= q: accepted */
    p.token = 'a' - 33;
    p.u = -1;
    spec_draft d = {.token = 'a' - 33, .q = 0.5f, .p = 4.0f / 7, .u = 0.25, .accepted = true};
    ui_hist_view v = view(&p, 8);
    v.draft = &q;
    v.spec = &d;
    ui_histogram_draw(&g, (ui_rect){0, 0, 20, 60}, &v);
    ck_assert_msg(strstr(row(&g, 0), "draft accepted") != NULL, "%s", row(&g, 0));
    int hdr = find_row_start(&g, " #");
    ck_assert_int_ge(hdr, 0);
    ck_assert(strstr(row(&g, hdr), " q ") || strstr(row(&g, hdr), " q"));
    int r1 = find_row_start(&g, " 1\xe2\x96\xb6");           /* the chosen row: rank 1 */
    ck_assert_int_ge(r1, 0);
    ck_assert_msg(strstr(row(&g, r1), "50.0%") && strstr(row(&g, r1), "57.1%"), "%s",
                  row(&g, r1));                            /* q beside p */
    ck_assert(strstr(row(&g, r1 + 1), "30.0%") != NULL);   /* the newline token's q */
    ck_assert_msg(strstr(row(&g, r1 + 2), "\xc2\xb7") != NULL, "%s",
                  row(&g, r1 + 2));                        /* not in the draft's list */
    /* the ratio itself (4/7 / 0.5 = 1.14), not p and q as a fraction that reads as a number */
    int rt = find_row(&g, "u 0.250 < p/q 1.14");
    ck_assert_int_gt(rt, r1);
    ck_assert_msg(strstr(row(&g, rt), "(p .571 q .5)") != NULL, "%s", row(&g, rt));
    ck_assert(strstr(row(&g, rt), "\xe2\x9c\x93") != NULL);   /* ✓ */

    /* rejected: the target resampled the newline token from max(0, p - q) */
    p.token = ID_NEWLINE;
    d = (spec_draft){.token = 'a' - 33, .q = 0.9f, .p = 0.2f, .u = 0.6, .accepted = false};
    ui_histogram_draw(&g, (ui_rect){0, 0, 20, 60}, &v);
    ck_assert(strstr(row(&g, 0), "draft rejected") != NULL);
    rt = find_row(&g, "u 0.600 \xe2\x89\xa5 p/q 0.22");
    ck_assert_int_gt(rt, r1);
    ck_assert_msg(strstr(row(&g, rt), "\xe2\x86\x92 \\n ~ (p") != NULL, "%s", row(&g, rt));

    /* no draft at this position (origin "bonus"): a plain draw from p, no draft column */
    p = snapshot();
    v = view(&p, 8);
    v.bonus = true;
    ui_histogram_draw(&g, (ui_rect){0, 0, 20, 60}, &v);
    ck_assert(strstr(row(&g, 0), "no draft, drawn from p") != NULL);
    ck_assert_int_ge(find_row(&g, "u=0.750"), 0);
    ui_grid_free(&g);
}
END_TEST

/* The header's key to the bars names them in the order of the numbers after them, and each mode
 * has its own: raw then final; a speculative step's bars are the target's p, its numbers q
 * (the draft's) then p; before the first token, the legend explains the mode's columns. */
START_TEST(histogram_headers_and_legends_follow_the_mode)
{
    ui_grid g;
    ck_assert(ui_grid_init(&g, 20, 60));
    sampler_snapshot p = snapshot(), q = draft_snapshot();
    ui_hist_view v = view(&p, 8);
    ui_histogram_draw(&g, (ui_rect){0, 0, 20, 60}, &v);
    int hdr = find_row_start(&g, " #");
    ck_assert_int_ge(hdr, 0);
    const char *h = row(&g, hdr);
    const char *kr = strstr(h, "raw\xe2\x96\x91"), *kf = strstr(h, "final\xe2\x96\x88");
    ck_assert_msg(kr && kf && kr < kf, "%s", h);                 /* raw░ final█ */
    const char *nr = strstr(kf, " raw"), *nf = nr ? strstr(nr, "final") : NULL;
    ck_assert_msg(nr && nf, "%s", h);                            /* ... raw  final */
    p.token = 'a' - 33;
    spec_draft d = {.token = 'a' - 33, .q = 0.5f, .p = 4.0f / 7, .u = 0.25, .accepted = true};
    v.draft = &q;
    v.spec = &d;
    ui_histogram_draw(&g, (ui_rect){0, 0, 20, 60}, &v);
    h = row(&g, hdr);
    ck_assert_msg(strstr(h, "p\xe2\x96\x88 raw p\xe2\x96\x91") && !strstr(h, "final"), "%s", h);
    /* the legends before any token */
    sampler_snapshot none = snapshot();
    ui_hist_view n = view(&none, 8);
    n.kind = UI_HIST_NONE;
    ui_histogram_draw(&g, (ui_rect){0, 0, 20, 60}, &n);
    ck_assert_int_ge(find_row(&g, "final p (after the chain)"), 0);
    ck_assert_int_lt(find_row(&g, "q: the draft's p"), 0);
    n.speculative = true;
    ui_histogram_draw(&g, (ui_rect){0, 0, 20, 60}, &n);
    ck_assert_int_ge(find_row(&g, "q: the draft's p, p: the target's"), 0);
    ck_assert_int_ge(find_row(&g, "not among the draft's tokens"), 0);
    ck_assert_int_ge(find_row(&g, "rejected: redrawn from (p"), 0);
    ui_grid_free(&g);
    /* a pane too short for the long legend (80x24, 40x12) gets the short one, whole: its last
     * line (the entropy's key) is there and no line is cut at 40 columns */
    for (int sp = 0; sp < 2; sp++) {
        ck_assert(ui_grid_init(&g, 6, 40));
        n.speculative = sp;
        ui_histogram_draw(&g, (ui_rect){0, 0, 6, 40}, &n);
        ck_assert_int_ge(find_row(&g, "H: entropy in bits, raw \xe2\x86\x92 final"), 0);
        for (int y = 1; y < 5; y++)
            ck_assert_msg(ui_text_width(row(&g, y), strlen(row(&g, y))) < 40, "cut: %s",
                          row(&g, y));
        ui_grid_free(&g);
    }
}
END_TEST

START_TEST(status_bar_shows_speculative_acceptance_and_speedup)
{
    ui_status_view v = {.model = "kjv-target", .backend = "cpu", .precision = "fp32",
                        .mode = "speculative \xce\xb3=4", .has_turn = true, .tok_s = 90,
                        .spec = true, .acceptance = 0.78, .tokens_per_pass = 3.1,
                        .speedup = 2.05, .kv_total = 512};
    char line[512];
    ui_status_format(&v, line, sizeof line);
    ck_assert_msg(strstr(line, "accept 78% 3.10 tok/pass 2.05x plain") != NULL, "%s", line);
    v.speedup_lo = 1.91;                /* the spread, shown while the turn runs too */
    v.speedup_hi = 2.17;
    v.busy = true;
    ui_status_format(&v, line, sizeof line);
    ck_assert_msg(strstr(line, "2.05x plain [1.91-2.17]") != NULL, "%s", line);
    v.speedup = 0;                      /* too few rounds timed yet */
    v.speedup_measuring = true;
    ui_status_format(&v, line, sizeof line);
    ck_assert_msg(strstr(line, "tok/pass x plain measuring...") != NULL, "%s", line);
    v.speedup_measuring = false;        /* not measured */
    ui_status_format(&v, line, sizeof line);
    ck_assert(strstr(line, "x plain") == NULL);
    v.spec = false;
    ui_status_format(&v, line, sizeof line);
    ck_assert(strstr(line, "accept") == NULL);
}
END_TEST

START_TEST(status_bar_names_the_chat_format_and_nothing_for_plain_continuation)
{
    ui_status_view v = {.model = "qwen", .backend = "cpu", .precision = "fp32",
                        .mode = "sample", .kv_total = 512, .chat = "chatml"};
    char line[512];
    ui_status_format(&v, line, sizeof line);
    ck_assert_msg(strstr(line, "qwen \xe2\x94\x82 chat chatml \xe2\x94\x82") != NULL, "%s", line);
    v.chat = NULL;
    ui_status_format(&v, line, sizeof line);
    ck_assert_msg(strstr(line, "chat") == NULL, "%s", line);
}
END_TEST

START_TEST(status_bar_shows_speed_cache_and_reuse)
{
    ui_status_view v = {.model = "kjv-target", .backend = "cpu", .precision = "bf16",
                        .sampler = "temp 0.8 top-k 40", .mode = "sample", .has_turn = true,
                        .tok_s = 45.25, .ttft_ms = 12.4, .reused = 100, .prefilled = 20,
                        .generated = 30,
                        .kv_used = 120, .kv_total = 1024, .seed = 7, .max_new = 128};
    ui_grid g;
    ck_assert(ui_grid_init(&g, 2, 140));
    ui_status_draw(&g, (ui_rect){0, 0, 2, 140}, &v);
    const char *r0 = row(&g, 0);
    ck_assert(strstr(r0, "kjv-target") && strstr(r0, "cpu bf16") && strstr(r0, "sample"));
    ck_assert(strstr(r0, "45.2 tok/s") || strstr(r0, "45.3 tok/s"));
    ck_assert(strstr(r0, "ttft 12 ms"));
    ck_assert(strstr(r0, "KV 120/1024"));
    ck_assert(strstr(r0, "reused 100 prefilled 20"));
    ck_assert(strstr(row(&g, 1), "temp 0.8 top-k 40"));
    ck_assert(strstr(row(&g, 1), "seed 7"));
    ck_assert_int_eq(ui_grid_cell(&g, 0, 0)->style, UI_STYLE_STATUS);
    v.message = "press Ctrl-C again to quit";
    ui_status_draw(&g, (ui_rect){0, 0, 2, 140}, &v);
    ck_assert(strstr(row(&g, 1), "press Ctrl-C again to quit"));
    ui_grid_free(&g);
}
END_TEST

/* At 100 columns, after a turn, the fall-back note and the precision stay; the time to first
 * token goes first. */
START_TEST(a_100_column_status_bar_keeps_the_backend_and_precision)
{
    ui_status_view v = {.model = "kjv-target", .backend = "cpu (no GPU)", .precision = "fp16",
                        .sampler = "temp 0.8", .mode = "sample", .has_turn = true,
                        .tok_s = 2101.9, .ttft_ms = 2.0, .reused = 0, .prefilled = 3,
                        .generated = 200, .kv_used = 202, .kv_total = 256, .seed = 7,
                        .max_new = 200};
    ui_grid g;
    ck_assert(ui_grid_init(&g, 2, 100));
    ui_status_draw(&g, (ui_rect){0, 0, 2, 100}, &v);
    const char *r0 = row(&g, 0);
    ck_assert_msg(strstr(r0, "cpu (no GPU) fp16") && strstr(r0, "KV 202/256"), "%s", r0);
    ck_assert_msg(strstr(r0, "ttft") == NULL, "%s", r0);
    ui_grid_free(&g);
}
END_TEST

/* At 100 columns (make run's terminal) a speculative turn's status keeps its speed-up over plain
 * decoding: the mode, model and backend go first. */
START_TEST(a_100_column_status_bar_keeps_the_speculative_speedup)
{
    ui_status_view v = {.model = "kjv-target", .backend = "cpu (no GPU)", .precision = "fp16",
                        .mode = "speculative \xce\xb3=4", .has_turn = true, .tok_s = 1234.5,
                        .ttft_ms = 12.4, .spec = true, .acceptance = 0.49,
                        .tokens_per_pass = 2.45, .speedup = 1.52, .speedup_lo = 1.38,
                        .speedup_hi = 1.71, .reused = 248, .prefilled = 5, .generated = 200,
                        .kv_used = 194, .kv_total = 256};
    ui_grid g;
    ck_assert(ui_grid_init(&g, 2, 100));
    ui_status_draw(&g, (ui_rect){0, 0, 2, 100}, &v);
    const char *r0 = row(&g, 0);
    ck_assert_msg(strstr(r0, "1234.5 tok/s") && strstr(r0, "accept 49% 2.45 tok/pass 1.52x plain") &&
                  strstr(r0, "KV 194/256") && strstr(r0, "reused 248 prefilled 5"), "%s", r0);
    ui_grid_free(&g);
    /* at 120 columns its spread too; at 100 the spread goes first, not the figure */
    ck_assert(ui_grid_init(&g, 2, 120));
    ui_status_draw(&g, (ui_rect){0, 0, 2, 120}, &v);
    r0 = row(&g, 0);
    ck_assert_msg(strstr(r0, "1.52x plain [1.38-1.71]") && strstr(r0, "1234.5 tok/s"), "%s", r0);
    ui_grid_free(&g);
}
END_TEST

START_TEST(a_narrow_status_bar_keeps_the_cache_figures)
{
    ui_status_view v = {.model = "kjv-target", .backend = "cpu", .precision = "bf16",
                        .sampler = "temp 0.8 top-k 40 top-p 0.95 min-p 0 rep 1 pres 0 freq 0",
                        .mode = "sample", .has_turn = true, .tok_s = 45.25, .ttft_ms = 12.4,
                        .reused = 100, .prefilled = 20, .generated = 30, .kv_used = 120,
                        .kv_total = 1024, .seed = 7, .max_new = 128};
    ui_grid g;
    ck_assert(ui_grid_init(&g, 2, 64));
    ui_status_draw(&g, (ui_rect){0, 0, 2, 64}, &v);
    const char *r0 = row(&g, 0);
    ck_assert_msg(strstr(r0, "KV 120/1024") && strstr(r0, "reused 100 prefilled 20"), "%s", r0);
    ck_assert_msg(strstr(r0, "cpu bf16") == NULL, "%s", r0);   /* dropped first */
    ck_assert(strstr(row(&g, 1), "temp 0.8 top-k 40"));
    /* A turn of one token has no decode speed yet. */
    v.generated = 1;
    ui_grid_free(&g);
    ck_assert(ui_grid_init(&g, 2, 140));
    ui_status_draw(&g, (ui_rect){0, 0, 2, 140}, &v);
    ck_assert_msg(strstr(row(&g, 0), "- tok/s"), "%s", row(&g, 0));
    /* One row: both lines share it, the cache figures still there. */
    ui_grid_free(&g);
    ck_assert(ui_grid_init(&g, 1, 100));
    ui_status_draw(&g, (ui_rect){0, 0, 1, 100}, &v);
    ck_assert_msg(strstr(row(&g, 0), "reused 100 prefilled 20") && strstr(row(&g, 0), "temp 0.8"),
                  "%s", row(&g, 0));
    ui_grid_free(&g);
}
END_TEST

/* A message (the Ctrl-C notice) takes the end of the last row: the fields make room, and no field
 * shows cut under it ("max 2 press Ctrl-C again to quit" for max 200); at 40 columns the one-row
 * bar ends at a word. */
START_TEST(a_status_message_does_not_cut_the_fields_under_it)
{
    ui_status_view v = {.model = "kjv-target", .backend = "cpu", .precision = "fp32",
                        .sampler = "temp 0.8 top-k 40 top-p 0.95 min-p 0.05 rep 1.1",
                        .mode = "sample", .has_turn = true, .tok_s = 45.25, .ttft_ms = 12.4,
                        .reused = 100, .prefilled = 20, .generated = 30, .kv_used = 120,
                        .kv_total = 1024, .seed = 7, .max_new = 200,
                        .message = "press Ctrl-C again to quit"};
    ui_grid g;
    ck_assert(ui_grid_init(&g, 2, 80));
    ui_status_draw(&g, (ui_rect){0, 0, 2, 80}, &v);
    const char *r1 = row(&g, 1);
    ck_assert_msg(strstr(r1, "press Ctrl-C again to quit") != NULL, "%s", r1);
    ck_assert_msg(strstr(r1, "max 2 ") == NULL && strstr(r1, "max 20 ") == NULL, "%s", r1);
    ck_assert_msg(strstr(r1, "temp 0.8 top-k 40") != NULL, "%s", r1);
    ui_grid_free(&g);
    /* 40 columns, one row: it ends at a whole word */
    v.message = NULL;
    ck_assert(ui_grid_init(&g, 1, 40));
    ui_status_draw(&g, (ui_rect){0, 0, 1, 40}, &v);
    const char *r0 = row(&g, 0);
    size_t n = strlen(r0);
    ck_assert_msg(n > 0 && r0[n - 1] != ' ', "%s", r0);
    static const char *words[] = {"KV", "120/1024", "reused", "100", "prefilled", "20", "temp",
                                  "0.8", "top-k", "40", "top-p", "0.95", "min-p", "0.05", "rep",
                                  "1.1"};
    const char *last = strrchr(r0, ' ');
    last = last ? last + 1 : r0;
    bool whole = false;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        whole |= strcmp(last, words[i]) == 0;
    ck_assert_msg(whole, "the bar ends mid-word: \"%s\"", r0);
    ui_grid_free(&g);
    /* a message that leaves room for less than the first figure: the figure goes whole */
    v.message = "done: output after the reply";
    ck_assert(ui_grid_init(&g, 1, 40));
    ui_status_draw(&g, (ui_rect){0, 0, 1, 40}, &v);
    ck_assert_msg(strstr(row(&g, 0), "KV 120/102 ") == NULL, "%s", row(&g, 0));
    ck_assert(strstr(row(&g, 0), "done: output after the reply") != NULL);
    ui_grid_free(&g);
}
END_TEST

static bool inside(ui_rect r, int rows, int cols)
{
    return r.y >= 0 && r.x >= 0 && r.y + r.h <= rows && r.x + r.w <= cols;
}

START_TEST(layout_puts_the_histogram_beside_or_below)
{
    ui_layout l;
    ui_layout_compute(&l, 40, 140, 1, 15);
    ck_assert(!l.too_small && l.side);
    ck_assert_int_eq(l.transcript.x + l.transcript.w + 1, l.histogram.x);
    ck_assert_int_eq(l.histogram.x + l.histogram.w, 140);
    ck_assert_int_eq(l.input.y, 39);
    ck_assert(inside(l.transcript, 40, 140) && inside(l.histogram, 40, 140));
    ui_layout_compute(&l, 40, 80, 1, 15);
    ck_assert(!l.too_small && !l.side);
    ck_assert_int_eq(l.histogram.w, 80);
    ck_assert_int_gt(l.histogram.y, l.transcript.y + l.transcript.h - 1);
    ck_assert_int_eq(l.histogram.h, 15);
    ck_assert_int_le(l.histogram.y + l.histogram.h, l.status.y);
    /* Short screens give the histogram at most half. */
    ui_layout_compute(&l, 14, 80, 1, 15);
    ck_assert_int_le(l.histogram.h, (14 - 2) / 2);
    ck_assert_int_ge(l.transcript.h, 3);
}
END_TEST

START_TEST(small_terminal_shows_a_notice)
{
    ui_layout l;
    ui_layout_compute(&l, 8, 30, 1, 15);
    ck_assert(l.too_small);
    ui_grid g;
    ck_assert(ui_grid_init(&g, 8, 30));
    ui_layout_draw_too_small(&g);
    ck_assert_int_ge(find_row(&g, "terminal too small"), 0);
    ck_assert_int_ge(find_row(&g, "30x8"), 0);
    ui_grid_free(&g);
    ui_grid g1;
    ck_assert(ui_grid_init(&g1, 1, 4));   /* tiny: no crash, whatever fits */
    ui_layout_draw_too_small(&g1);
    ui_grid_free(&g1);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Input line */

START_TEST(input_moves_and_deletes_by_character)
{
    ui_input in;
    ui_input_init(&in);
    ui_input_set(&in, "h\xc3\xa9llo");   /* héllo */
    ui_input_home(&in);
    ui_input_right(&in);
    ui_input_right(&in);                   /* after é */
    ui_input_backspace(&in);
    ck_assert_str_eq(in.line, "hllo");
    ui_input_insert(&in, "\xe4\xb8\xad", 3);
    ck_assert_str_eq(in.line, "h\xe4\xb8\xadllo");
    ui_input_left(&in);
    ui_input_delete(&in);
    ck_assert_str_eq(in.line, "hllo");
    ui_input_end(&in);
    ui_input_left(&in);
    ui_input_kill_to_end(&in);
    ck_assert_str_eq(in.line, "hll");
    ui_input_kill_to_start(&in);
    ck_assert_str_eq(in.line, "");
    ui_input_set(&in, "one two  three");
    ui_input_kill_word(&in);
    ck_assert_str_eq(in.line, "one two  ");
    ui_input_kill_word(&in);
    ck_assert_str_eq(in.line, "one ");
    ui_input_free(&in);
}
END_TEST

START_TEST(input_triple_quotes_make_one_multiline_entry)
{
    ui_input in;
    ui_input_init(&in);
    ui_input_set(&in, "\"\"\"first line");
    ck_assert_ptr_null(ui_input_enter(&in));
    ck_assert(in.multiline);
    ui_input_set(&in, "second");
    ck_assert_ptr_null(ui_input_enter(&in));
    ck_assert_int_eq(ui_input_height(&in, 10), 3);
    ui_input_set(&in, "end\"\"\"");
    char *t = ui_input_enter(&in);
    ck_assert_str_eq(t, "first line\nsecond\nend");
    free(t);
    ck_assert(!in.multiline && ui_input_empty(&in));
    /* """ alone on the first line: the block starts with the next line, not an empty one */
    ui_input_set(&in, "\"\"\"");
    ck_assert_ptr_null(ui_input_enter(&in));
    ui_input_set(&in, "alpha");
    ck_assert_ptr_null(ui_input_enter(&in));
    ui_input_set(&in, "\"\"\"");
    t = ui_input_enter(&in);
    ck_assert_str_eq(t, "alpha");
    free(t);
    ui_input_set(&in, "\"\"\"one\"\"\"");
    t = ui_input_enter(&in);
    ck_assert_str_eq(t, "one");
    free(t);
    ui_input_set(&in, "plain");
    t = ui_input_enter(&in);
    ck_assert_str_eq(t, "plain");
    free(t);
    ui_input_free(&in);
}
END_TEST

START_TEST(input_pane_scrolls_to_keep_the_cursor_visible)
{
    ui_grid g;
    ck_assert(ui_grid_init(&g, 3, 20));
    ui_input in;
    ui_input_init(&in);
    ui_input_draw(&g, (ui_rect){2, 0, 1, 20}, &in, "Send a message");
    ck_assert_str_eq(row(&g, 2), ">>> Send a message");
    ck_assert_int_eq(g.cursor_x, 4);
    ui_input_set(&in, "abcdefghijklmnopqrstuvwxyz");
    ui_input_draw(&g, (ui_rect){2, 0, 1, 20}, &in, NULL);
    ck_assert(g.cursor_visible);
    ck_assert_int_lt(g.cursor_x, 20);
    ck_assert(strstr(row(&g, 2), "xyz") != NULL);
    ck_assert(strstr(row(&g, 2), "\xe2\x80\xa6") != NULL);   /* … marks the hidden start */
    ui_input_home(&in);
    ui_input_draw(&g, (ui_rect){2, 0, 1, 20}, &in, NULL);
    ck_assert_int_eq(g.cursor_x, 4);
    ck_assert(strstr(row(&g, 2), ">>> abcdefghijklmno") != NULL);
    ui_input_free(&in);
    ui_grid_free(&g);
}
END_TEST

int main(void)
{
    /* Widths come from wcwidth in a UTF-8 locale (the built-in table otherwise). */
    setlocale(LC_CTYPE, "C.UTF-8");
    Suite *s = suite_create("ui");
    tu_add_case(s, "grid", TU_TESTS(
            wide_character_takes_two_cells, wide_character_never_straddles_the_edge,
            overwriting_half_a_wide_character_blanks_the_other_half,
            combining_mark_joins_the_previous_cell, invalid_utf8_shows_as_replacement_character,
            control_characters_take_one_column_as_replacement_characters));
    tu_add_case(s, "transcript", TU_TESTS(
            transcript_wraps_at_spaces_and_cuts_long_words,
            transcript_wraps_wide_characters_by_width, transcript_keeps_paragraphs_and_styles,
            transcript_shows_the_end_and_scrolls_back,
            a_view_scrolled_back_holds_still_while_text_arrives,
            a_listed_notice_line_wraps_under_its_description, a_long_answer_opens_at_its_top,
            transcript_caret_follows_the_last_character));
    TCase *hist = tu_add_case(s, "histogram", TU_TESTS(
            histogram_marks_every_cut_stage_and_the_penalty, histogram_bars_are_proportional,
            histogram_reads_in_ascii_without_a_utf8_terminal,
            histogram_highlights_the_sampled_token_and_the_draw, histogram_escapes_a_leading_space,
            histogram_keeps_the_sampled_token_when_it_ranks_below_the_bars,
            histogram_shows_a_sampled_token_ranked_below_the_top_list,
            histogram_stays_inside_its_rectangle, histogram_peek_says_nothing_was_drawn,
            histogram_speculative_shows_q_beside_p_and_the_acceptance_test,
            histogram_headers_and_legends_follow_the_mode,
            histogram_temp_column_sits_between_raw_and_final));
    tcase_add_unchecked_fixture(hist, tokenizer_setup, tokenizer_teardown);
    tu_add_case(s, "status_layout_input", TU_TESTS(
            status_bar_shows_speed_cache_and_reuse,
            status_bar_names_the_chat_format_and_nothing_for_plain_continuation, a_narrow_status_bar_keeps_the_cache_figures,
            a_100_column_status_bar_keeps_the_backend_and_precision,
            status_bar_shows_speculative_acceptance_and_speedup,
            a_100_column_status_bar_keeps_the_speculative_speedup,
            a_status_message_does_not_cut_the_fields_under_it,
            layout_puts_the_histogram_beside_or_below, small_terminal_shows_a_notice,
            input_moves_and_deletes_by_character, input_triple_quotes_make_one_multiline_entry,
            input_pane_scrolls_to_keep_the_cursor_visible));
    return tu_run_suite(s);
}
