/* columns.h: several continuations of one prompt side by side (or stacked on a narrow screen),
 * each with a title, a line of figures and its word-wrapped text: the REPL's /samples, /compare
 * and the growing beams of /beam. */
#ifndef TOKENTOP_UI_COLUMNS_H
#define TOKENTOP_UI_COLUMNS_H

#include <stdbool.h>

#include "ui/grid.h"

#define UI_COLUMN_MIN_W 24     /* narrower than this, columns are stacked instead */

typedef struct {
    const char *title;         /* first line ("2: temp 0.8", "beam 1"); NULL: none */
    const char *figures;       /* after the title (side by side: on the next line); NULL: none */
    const char *text;          /* UTF-8; '\n' breaks a line; other control characters must be
                                  escaped by the caller */
    bool dim;                  /* drawn dim (a pruned beam) */
    bool highlight;            /* the title drawn bold (the best beam, the kept column) */
    bool tail;                 /* when the text does not fit, show its end (a growing beam) */
} ui_column;

/* Places n columns in area. Side by side when n columns of min_w cells with one-cell gaps fit
 * the width (the gaps hold the dividers; the rightmost column takes the remainder), else stacked:
 * bands of area.h / n rows (the first ones one row taller when it does not divide); when the
 * height is under n rows the bands that do not fit get height 0. Every rectangle lies inside
 * area; n <= 0 or an empty area places nothing. Returns true when side by side. */
bool ui_columns_layout(ui_rect area, int n, int min_w, ui_rect *out);

/* Lines of text wrapped to width w (>= 1) as ui_columns_draw wraps them: at a blank when the
 * line has one, else at w cells, and at every '\n'. */
int ui_columns_wrapped_lines(const char *text, int w);

/* Draws heading (NULL: none; each '\n' starts another row, the rows after the first dimmed) on
 * area's first rows and the columns below it, dividers between them.
 * Any size is safe, also 0 x 0. */
void ui_columns_draw(ui_grid *g, ui_rect area, const char *heading, const ui_column *cols, int n);

#endif
