/* layout.c: pane geometry for a screen size. */
#include "ui/layout.h"

#include <stdio.h>
#include <string.h>

#include "ui/status.h"

void ui_layout_compute(ui_layout *l, int rows, int cols, int input_h, int hist_h)
{
    memset(l, 0, sizeof *l);
    if (rows < UI_MIN_ROWS || cols < UI_MIN_COLS) {
        l->too_small = true;
        return;
    }
    int status_h = ui_status_height(rows);
    if (input_h < 1)
        input_h = 1;
    if (input_h > rows / 3)
        input_h = rows / 3;
    int top = rows - status_h - input_h;          /* rows for transcript + histogram */
    l->input = (ui_rect){rows - input_h, 0, input_h, cols};
    l->status = (ui_rect){top, 0, status_h, cols};
    if (cols >= UI_SIDE_MIN_COLS) {
        int hw = cols * 38 / 100;
        if (hw < 44)
            hw = 44;
        if (hw > 64)
            hw = 64;
        l->side = true;
        l->transcript = (ui_rect){0, 0, top, cols - hw - 1};
        l->divider = (ui_rect){0, cols - hw - 1, top, 1};
        l->histogram = (ui_rect){0, cols - hw, top, hw};
        return;
    }
    /* Below: the histogram gets what it wants up to half the space, the transcript the rest. */
    int hh = hist_h;
    if (hh > top / 2)
        hh = top / 2;
    if (hh < 3)
        hh = top >= 6 ? 3 : 0;
    int th = top - hh - (hh > 0 ? 1 : 0);
    l->transcript = (ui_rect){0, 0, th, cols};
    if (hh > 0) {
        l->divider = (ui_rect){th, 0, 1, cols};
        l->histogram = (ui_rect){th + 1, 0, hh, cols};
    }
}

void ui_layout_draw_divider(ui_grid *g, const ui_layout *l)
{
    const ui_rect *d = &l->divider;
    if (d->w <= 0 || d->h <= 0)
        return;
    if (l->side) {
        for (int y = d->y; y < d->y + d->h; y++)
            ui_grid_set(g, y, d->x, 0x2502, 1, UI_STYLE_BORDER, 0);   /* │ */
    } else {
        ui_grid_fill(g, d->y, d->x, d->x + d->w, 0x2500, UI_STYLE_BORDER, 0);   /* ─ */
    }
}

void ui_layout_draw_too_small(ui_grid *g)
{
    ui_grid_clear(g);
    char a[64], b[64];
    snprintf(a, sizeof a, "terminal too small");
    snprintf(b, sizeof b, "%dx%d, need %dx%d", g->cols, g->rows, UI_MIN_COLS, UI_MIN_ROWS);
    int y = g->rows / 2 - 1;
    if (y < 0)
        y = 0;
    int xa = (g->cols - (int)strlen(a)) / 2, xb = (g->cols - (int)strlen(b)) / 2;
    ui_grid_puts(g, y, xa < 0 ? 0 : xa, g->cols, a, UI_STYLE_ERROR, UI_ATTR_BOLD);
    ui_grid_puts(g, y + 1, xb < 0 ? 0 : xb, g->cols, b, UI_STYLE_DIM, 0);
}
