/* status.h: the status bar: model, backend, precision, sampler settings, mode, speed of the last
 * turn, time to first token, KV cache fill, and reused vs prefilled prompt tokens. */
#ifndef TOKENTOP_UI_STATUS_H
#define TOKENTOP_UI_STATUS_H

#include <stdbool.h>
#include <stdint.h>

#include "ui/grid.h"

/* What the bar shows; the REPL fills it from the session each frame. Strings are not owned. */
typedef struct {
    const char *model;        /* display name */
    const char *backend;      /* "cpu", "cuda" */
    const char *precision;    /* "fp32", "bf16", ... */
    const char *sampler;      /* sampler_params_format() */
    const char *mode;         /* "sample", "greedy", "step", "speculative γ=4" */
    bool busy;                /* a generation is running */
    bool has_turn;            /* the fields of the last turn below are known */
    double tok_s;             /* decode tokens/s of the last turn */
    double ttft_ms;           /* time to first token of the last turn */
    int reused, prefilled;    /* prompt tokens of the last turn: from the cache / computed */
    int generated;            /* tokens generated in the last (or running) turn */
    int kv_used, kv_total;    /* KV cache positions held / capacity */
    double kv_mib;            /* the cache's memory (0: not shown) */
    uint64_t seed;
    int max_new;
    const char *message;      /* a transient note shown at the right, or NULL */
    /* Speculative decoding, for the last (or running) turn when spec is set: */
    bool spec;
    double acceptance;        /* accepted / drafted */
    double tokens_per_pass;   /* tokens per target forward */
    double speedup;           /* tok/s over plain decoding's, measured in the turn (0: none) */
    double speedup_lo, speedup_hi;   /* its spread (the paired samples' quartiles): "[lo-hi]" */
    bool speedup_measuring;   /* the turn measures it but has too few samples yet (speedup 0):
                                 "x plain measuring..." */
    const char *chat;         /* the chat format ("chatml", ...), or NULL: plain continuation */
} ui_status_view;

/* 2 rows when the screen has room for them, else 1. */
int ui_status_height(int screen_rows);

/* Draws the bar into r (1 or 2 rows). Fields that do not fit the width are left out, the least
 * telling first (backend and precision, time to first token, model name, seed); the KV cache
 * fill and the reused / prefilled counts always stay. Tokens/s shows "-" until a turn produced at
 * least two tokens. On one row the sampler line follows the rest. */
void ui_status_draw(ui_grid *g, ui_rect r, const ui_status_view *v);

/* The first row's text (for line mode's /show and for tests). */
size_t ui_status_format(const ui_status_view *v, char *out, size_t cap);

#endif
