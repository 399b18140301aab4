/* lens_pane.h: the logit lens as a table, one row per layer (core/engine/lens.h): the tokens each
 * layer's residual stream would predict, and the probability and rank of the token finally drawn,
 * so that one sees in which layer the answer appears. Reads the rows; changes nothing. */
#ifndef TOKENTOP_UI_LENS_PANE_H
#define TOKENTOP_UI_LENS_PANE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/engine/lens.h"
#include "core/tokenizer/tokenizer.h"
#include "ui/grid.h"

typedef struct {
    const lens_layer *layers;   /* (n_layers) layer 0 (the embeddings) .. L; not owned */
    int n_layers;
    const tokenizer *tok;       /* not owned */
    bool drawn;                 /* a step: chosen is the token drawn there; else the position's
                                   next token, not drawn yet, and chosen is the output's top-1 */
    int32_t chosen;
    int step;                   /* 0-based step within its generation (drawn) */
    int position;               /* the token's index in the conversation */
} ui_lens_view;

/* Rows the pane wants: title, header, a row per layer, the legend. */
int ui_lens_pane_height(int n_layers);

/* Draws v into r. A pane with fewer rows than layers shows the embeddings, the last layer and
 * layers evenly spaced between (the title says how many); a narrow one lists fewer tokens per
 * layer (at least one). */
void ui_lens_pane_draw(ui_grid *g, ui_rect r, const ui_lens_view *v);

/* The layer from which on the chosen token is every layer's top-1 (1 .. L, 0: from the
 * embeddings), or -1 when the last layer does not rank it first. */
int ui_lens_first_top1(const ui_lens_view *v);

#endif
