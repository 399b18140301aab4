/* layout.h: where the panes go for a screen size: the histogram beside the transcript on wide
 * screens, below it on narrow ones; a notice instead of panes below the minimum size. */
#ifndef TOKENTOP_UI_LAYOUT_H
#define TOKENTOP_UI_LAYOUT_H

#include <stdbool.h>

#include "ui/grid.h"

#define UI_MIN_ROWS 10
#define UI_MIN_COLS 40
#define UI_SIDE_MIN_COLS 100   /* from this width on the histogram goes beside the transcript */

typedef struct {
    bool too_small;
    bool side;                 /* histogram beside (true) or below (false) the transcript */
    ui_rect transcript, histogram, divider, status, input;
} ui_layout;

/* Computes the panes for a rows x cols screen, an input pane of input_h rows (capped) and a
 * histogram that wants hist_h rows. Every rectangle lies inside the screen. */
void ui_layout_compute(ui_layout *l, int rows, int cols, int input_h, int hist_h);

/* The "terminal too small" screen. */
void ui_layout_draw_too_small(ui_grid *g);

/* The divider between transcript and histogram (a vertical or horizontal line). */
void ui_layout_draw_divider(ui_grid *g, const ui_layout *l);

#endif
