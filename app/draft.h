/* draft.h: loading a draft model for speculative decoding next to an already loaded target
 * (shared by `generate`, `bench` and the REPL's --draft / /draft). */
#ifndef TOKENTOP_DRAFT_H
#define TOKENTOP_DRAFT_H

#include "core/engine/engine.h"
#include "core/model/model.h"
#include "core/base/status.h"
#include "core/tokenizer/tokenizer.h"
#include "app/cli.h"

typedef struct {
    char *dir;                 /* owned copy of the directory */
    model *model;
    tokenizer *tok;
    engine *eng;               /* its cache has the target engine's n_ctx */
} draft_app;

/* The precision a draft is held in: --dtype when given (it applies to both models), else
 * draft_default_dtype of its file's, cpu when the draft runs on the CPU. */
tt_dtype draft_dtype(const model *draft, const cli_options *o, bool cpu);

/* A draft's precision changes only q, its own distribution: rejection sampling keeps the output
 * exactly the target's, and greedy output is the target's greedy output whatever the draft. So
 * it is held in the cheapest precision that keeps its guesses: on the CPU q8 (llama.cpp's Q8_0,
 * a quarter of fp32's bytes, integer dot products where the CPU has them; on the embedded pair a
 * draft step 0.011 ms instead of 0.026 in fp16, its first step after a verification 0.033
 * instead of 0.054, for 2-3% fewer accepted drafts: a round ~20% cheaper). On a GPU (which
 * holds no q8) a draft whose file is fp32 is held in fp16, other precisions as the GPU holds the
 * file by default (cli_default_dtype). */
tt_dtype draft_default_dtype(const model *draft, bool cpu);

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
