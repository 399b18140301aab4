/* histogram.h: the histogram pane: the sampler's view of one step (top tokens with raw and final
 * probability bars, the stage that cut each removed token, the sampled token, where the uniform
 * draw landed on the cumulative bar, entropy). Reads a snapshot; changes nothing. */
#ifndef TOKENTOP_UI_HISTOGRAM_H
#define TOKENTOP_UI_HISTOGRAM_H

#include <stdbool.h>

#include "core/decode/sampler.h"
#include "core/decode/speculative.h"
#include "core/tokenizer/tokenizer.h"
#include "ui/grid.h"

typedef enum {
    UI_HIST_NONE = 0,   /* nothing generated yet */
    UI_HIST_STEP,       /* a token was just chosen from this distribution */
    UI_HIST_PEEK,       /* the next position's distribution, nothing drawn yet */
} ui_hist_kind;

typedef struct {
    ui_hist_kind kind;
    const sampler_snapshot *snap;   /* not owned */
    const tokenizer *tok;           /* token text; not owned */
    int bars;                       /* rows of tokens to show (the k on screen) */
    int step;                       /* 0-based step within the generation (STEP) */
    int position;                   /* position of the token in the conversation */
    int vocab;                      /* V, for "kept N of V" */
    bool step_mode;                 /* show the /pick hint */
    /* A speculative step (both NULL otherwise): snap is the target's chain (p) there. */
    const sampler_snapshot *draft;  /* the draft's chain at this position (q): the raw column
                                       shows q instead; not owned */
    const spec_draft *spec;         /* the draft's proposal and its test (u * q < p): the draw
                                       line shows it; NULL for a bonus token */
    bool bonus;                     /* a speculative token with no draft at its position, drawn
                                       from p (TOKEN_BONUS: see core/session/session.h) */
    bool speculative;               /* speculative decoding is on: the legend before the first
                                       token explains the q and p columns */
    bool temp_column;               /* a column for temperature alone (sampler_entry.temp_p)
                                       between raw and final; not in a speculative step */
    const char *label;              /* NULL, or whose step this is ("2: seed 43", a /samples
                                       column): the title starts with it; not owned */
    const char *draw_note;          /* NULL, or what the draw line says instead of the draw
                                       ("kept by beam search"); not owned */
} ui_hist_view;

/* Rows the pane needs to show v->bars tokens (title, header, bars, cumulative bar, draw line,
 * entropy line). */
int ui_histogram_height(int bars);

/* Draws v into r. Narrow panes shorten the token column and the bars; short panes show fewer
 * tokens (the sampled one is always shown). */
void ui_histogram_draw(ui_grid *g, ui_rect r, const ui_hist_view *v);

/* A probability in 6 columns: "  0", " <0.1%", " 41.2%". */
void ui_histogram_format_pct(double p, char *out, size_t cap);

/* The display form of a token for the pane: escaped (leading space as U+2423, newline as \n,
 * partial UTF-8 as \xNN) and cut to at most max_cols columns with a trailing ellipsis. */
void ui_histogram_token_label(const tokenizer *tok, int32_t id, int max_cols, char *out,
                              size_t cap);

#endif
