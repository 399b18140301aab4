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

/* Loads dir as a draft for target: its tokenizer must equal the target's (vocab.json and
 * merges.txt identical: tokenizer_equal), its vocab_size must equal the target's and its
 * n_positions must cover the target engine's context. The engine uses o's backend, dtype and
 * threads (an F16/BF16 --dtype applies to both models) and the target engine's n_ctx.
 * On failure err names the directory and the mismatch, and *d is left empty. */
tt_status draft_load(draft_app *d, const char *dir, const cli_app *target, const cli_options *o,
                     tt_error *err);

/* Frees what draft_load made; an empty or zeroed d is safe. */
void draft_free(draft_app *d);

#endif
