/* histogram_pair.h: the two-precision view of one position (/dtype compare): for each of the
 * top tokens, its raw probability under the session's engine and under the comparison engine as
 * paired bars, the change, and the position's KL divergence, largest change and top-1 agreement.
 * Reads a dtype_compare; changes nothing. */
#ifndef TOKENTOP_UI_HISTOGRAM_PAIR_H
#define TOKENTOP_UI_HISTOGRAM_PAIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/decode/dtype_compare.h"
#include "core/tokenizer/tokenizer.h"
#include "ui/grid.h"
#include "ui/histogram.h"

typedef struct {
    ui_hist_kind kind;              /* STEP or PEEK (NONE draws the legend) */
    const dtype_compare *cmp;       /* not owned */
    const tokenizer *tok;           /* not owned */
    int bars;                       /* rows of tokens to show */
    int step;                       /* 0-based step within the generation (STEP) */
    int position;                   /* position of the token in the conversation */
    int32_t chosen;                 /* the token drawn there (STEP), else -1 */
} ui_pair_view;

/* Rows the view needs for bars tokens (the same as ui_histogram_height: the panes swap). */
int ui_histogram_pair_height(int bars);

/* Draws v into r (the histogram pane's rectangle, ui_histogram_height rows for v->bars).
 * Narrow panes drop the bars and keep the numbers. */
void ui_histogram_pair_draw(ui_grid *g, ui_rect r, const ui_pair_view *v);

/* A bar of w cells for p against scale (the largest p shown) in UTF-8 block characters (full
 * blocks, then an eighth block), padded with spaces to w columns. */
void ui_histogram_pair_bar(double p, double scale, int w, char *out, size_t cap);

/* The position's figures as two lines: "KL(fp32‖q8) 0.00123 nats · max |Δp| 0.31% at ␣the"
 * (compact: "KL 0.00123 nats · max|Δp| 0.31% ␣the", for a pane that names the precisions in its
 * title) and "top-1 agrees: ␣the" or "top-1 differs: ␣the (fp32) vs ␣a (q8)". */
void ui_histogram_pair_summary(const dtype_compare *c, const tokenizer *tok, bool compact,
                               char *line1, size_t cap1, char *line2, size_t cap2);

/* "+0.31%", "-1.20%", "0" (a percentage-point change in p, signed, 6 columns or fewer). */
void ui_histogram_pair_delta(double dp, char *out, size_t cap);

#endif
