/* check_columns.c: the columns of /samples, /compare and /beam (ui/columns.c): side by side when
 * every column gets its minimum width, stacked otherwise, every rectangle inside the area at any
 * size (tiny and zero included), word wrapping, and the drawn board read back as text. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ui/columns.h"
#include "tests/testutil.h"

static void assert_inside(ui_rect area, const ui_rect *r, int n)
{
    for (int i = 0; i < n; i++) {
        if (r[i].h == 0 || r[i].w == 0)
            continue;
        ck_assert_msg(r[i].x >= area.x && r[i].y >= area.y &&
                      r[i].x + r[i].w <= area.x + area.w && r[i].y + r[i].h <= area.y + area.h,
                      "column %d (%d,%d %dx%d) outside the area", i, r[i].y, r[i].x, r[i].h,
                      r[i].w);
    }
}

START_TEST(three_columns_go_side_by_side_when_each_gets_the_minimum_width)
{
    ui_rect area = {0, 0, 20, 3 * UI_COLUMN_MIN_W + 2}, r[3];
    ck_assert(ui_columns_layout(area, 3, UI_COLUMN_MIN_W, r));
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(r[i].h, 20);
        ck_assert_int_ge(r[i].w, UI_COLUMN_MIN_W);
        ck_assert_int_eq(r[i].y, 0);
    }
    ck_assert_int_eq(r[1].x, r[0].x + r[0].w + 1);   /* one cell for the divider */
    ck_assert_int_eq(r[2].x + r[2].w, area.w);        /* the last one takes the remainder */
    assert_inside(area, r, 3);
}
END_TEST

START_TEST(one_cell_too_narrow_stacks_the_columns)
{
    ui_rect area = {2, 1, 21, 3 * UI_COLUMN_MIN_W + 1}, r[3];
    ck_assert(!ui_columns_layout(area, 3, UI_COLUMN_MIN_W, r));
    int y = area.y;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(r[i].w, area.w);
        ck_assert_int_eq(r[i].x, area.x);
        ck_assert_int_eq(r[i].y, y);
        ck_assert_int_eq(r[i].h, 7);
        y += r[i].h;
    }
    assert_inside(area, r, 3);
}
END_TEST

START_TEST(stacked_bands_share_the_height_the_first_ones_taking_the_remainder)
{
    ui_rect area = {0, 0, 10, 30}, r[4];
    ck_assert(!ui_columns_layout(area, 4, UI_COLUMN_MIN_W, r));
    ck_assert_int_eq(r[0].h, 3);
    ck_assert_int_eq(r[1].h, 3);
    ck_assert_int_eq(r[2].h, 2);
    ck_assert_int_eq(r[3].h, 2);
    ck_assert_int_eq(r[3].y + r[3].h, 10);
}
END_TEST

START_TEST(tiny_and_empty_areas_place_nothing_outside)
{
    ui_rect r[16];
    for (int h = 0; h < 6; h++)
        for (int w = 0; w < 60; w += 7) {
            ui_rect area = {1, 1, h, w};
            ui_columns_layout(area, 16, UI_COLUMN_MIN_W, r);
            assert_inside(area, r, 16);
        }
    ui_rect area = {0, 0, 2, 80};
    ui_columns_layout(area, 5, UI_COLUMN_MIN_W, r);   /* 5 bands in 2 rows: 3 get none */
    ck_assert_int_eq(r[0].h + r[1].h + r[2].h + r[3].h + r[4].h, 2);
    ck_assert_int_eq(r[4].h, 0);
}
END_TEST

START_TEST(text_wraps_at_blanks_and_newlines)
{
    ck_assert_int_eq(ui_columns_wrapped_lines("one two three", 7), 2);   /* "one two" "three" */
    ck_assert_int_eq(ui_columns_wrapped_lines("abcdefghij", 4), 3);      /* no blank: hard */
    ck_assert_int_eq(ui_columns_wrapped_lines("a\nb\n", 10), 3);
    ck_assert_int_eq(ui_columns_wrapped_lines("", 10), 1);
}
END_TEST

static char *row(const ui_grid *g, int y)
{
    static char buf[512];
    ui_grid_row_text(g, y, buf, sizeof buf);
    return buf;
}

START_TEST(a_drawn_board_shows_titles_figures_and_text_in_each_column)
{
    ui_grid g;
    ck_assert(ui_grid_init(&g, 8, 80));
    ui_column cols[2] = {
        {.title = "1: temp 0", .figures = "lp -1.05 d2 0.65 rep3 6",
         .text = "of the land of the land"},
        {.title = "2: temp 1.5", .figures = "lp -3.34 d2 1.00 rep3 0", .text = "Thus say more",
         .dim = true},
    };
    ui_columns_draw(&g, (ui_rect){0, 0, 8, 80}, "/compare temp", cols, 2);
    ck_assert_str_eq(row(&g, 0), "/compare temp");
    ck_assert_msg(strstr(row(&g, 1), "1: temp 0") && strstr(row(&g, 1), "│2: temp 1.5"), "%s",
                  row(&g, 1));
    ck_assert_msg(strstr(row(&g, 2), "lp -1.05 d2 0.65 rep3 6"), "%s", row(&g, 2));
    ck_assert_msg(strstr(row(&g, 3), "of the land of the land") &&
                  strstr(row(&g, 3), "Thus say more"), "%s", row(&g, 3));
    /* the dimmed column's text carries the dim attribute */
    const char *r3 = row(&g, 3);
    int x = (int)(strstr(r3, "Thus") - r3) - 2;   /* the divider is 3 bytes, 1 cell */
    ck_assert(ui_grid_cell(&g, 3, x)->attr & UI_ATTR_DIM);
    /* a narrow grid stacks them: the second title below the first text */
    ck_assert(ui_grid_resize(&g, 8, 30));
    ui_grid_clear(&g);
    ui_columns_draw(&g, (ui_rect){0, 0, 8, 30}, NULL, cols, 2);
    ck_assert_msg(strstr(row(&g, 0), "1: temp 0  lp -1.05"), "%s", row(&g, 0));
    ck_assert_msg(strstr(row(&g, 4), "2: temp 1.5"), "%s", row(&g, 4));
    /* and a 1x1 or 0x0 one does not crash */
    ui_columns_draw(&g, (ui_rect){0, 0, 1, 1}, "heading", cols, 2);
    ui_columns_draw(&g, (ui_rect){0, 0, 0, 0}, "heading", cols, 2);
    ui_grid_free(&g);
}
END_TEST

int main(void)
{
    return tu_run_tests("columns", TU_TESTS(
        three_columns_go_side_by_side_when_each_gets_the_minimum_width,
        one_cell_too_narrow_stacks_the_columns,
        stacked_bands_share_the_height_the_first_ones_taking_the_remainder,
        tiny_and_empty_areas_place_nothing_outside,
        text_wraps_at_blanks_and_newlines,
        a_drawn_board_shows_titles_figures_and_text_in_each_column));
}
