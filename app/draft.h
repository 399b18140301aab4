/* draft.h: loading a draft model for speculative decoding next to an already loaded target
 * (shared by `generate`, `bench` and the REPL's --draft / /draft). */
#ifndef TOKENTOP_DRAFT_H
#define TOKENTOP_DRAFT_H

#include "core/engine.h"
#include "core/model.h"
#include "core/status.h"
#include "core/tokenizer.h"
#include "app/cli.h"

typedef struct {
    char *dir;                 /* owned copy of the directory */
    model *model;
    tokenizer *tok;
    engine *eng;               /* its cache has the target engine's n_ctx */
} draft_app;

/* The precision a draft is held in: --dtype when given (it applies to both models), else
 * draft_default_dtype of its file's. */
tt_dtype draft_dtype(const model *draft, const cli_options *o);

/* A draft whose file is fp32 is held in fp16: half the bytes, so its steps take about half the
 * time and evict less of the target from the caches (on the embedded pair a round's draft steps
 * 2x faster, its verification 10-20% faster). A draft's precision changes only q, its own
 * distribution: rejection sampling keeps the output exactly the target's, and greedy output is
 * the target's greedy output whatever the draft. Other precisions stay as the file has them. */
tt_dtype draft_default_dtype(tt_dtype file_dtype);

/* Loads dir as a draft for target: its tokenizer must equal the target's (vocab.json and
 * merges.txt identical: tokenizer_equal), its vocab_size must equal the target's and its
 * n_positions must cover the target engine's context. The engine uses o's backend and threads,
 * draft_dtype's precision and the target engine's n_ctx.
 * On failure err names the directory and the mismatch, and *d is left empty. */
tt_status draft_load(draft_app *d, const char *dir, const cli_app *target, const cli_options *o,
                     tt_error *err);

/* Frees what draft_load made; an empty or zeroed d is safe. */
void draft_free(draft_app *d);

#endif
