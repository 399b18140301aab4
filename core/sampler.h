/* sampler.h: the logit-processing chain and the draw. Runs on the host over a float logits
 * vector for every backend; produces a per-step snapshot for the histogram and --json. */
#ifndef TOKENTOP_SAMPLER_H
#define TOKENTOP_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* Chain order presets. HF (default): penalties -> temperature -> top-k -> top-p -> min-p -> draw.
 * LLAMA: penalties -> top-k -> top-p -> min-p -> temperature -> draw (filters see untempered
 * probabilities, as in llama.cpp's default chain). */
typedef enum { SAMPLER_ORDER_HF = 0, SAMPLER_ORDER_LLAMA = 1 } sampler_order;

typedef struct {
    float temperature;         /* >= 0; 0 means greedy */
    int top_k;                 /* <= 0 disables; > V is capped to V */
    float top_p;               /* [0, 1]; 1 disables; 0 keeps the single most likely token */
    float min_p;               /* [0, 1]; 0 disables */
    float repetition_penalty;  /* > 0; 1 disables (HF: positive logits divided, others multiplied) */
    float presence_penalty;    /* finite; 0 disables (OpenAI: logit -= presence if count > 0) */
    float frequency_penalty;   /* finite; 0 disables (OpenAI: logit -= count * frequency) */
    int penalty_window;        /* penalties look at the last N context tokens; -1 all; 0 none */
    bool greedy;               /* argmax after penalties; also implied by temperature == 0 */
    sampler_order order;
} sampler_params;

/* temperature 1, top_k 0, top_p 1, min_p 0, penalties off, window 64, sampling, HF order. */
void sampler_params_default(sampler_params *p);

/* Checks every field; on failure err names the field and value ("top_p: 1.5 is outside [0, 1]"). */
tt_status sampler_params_validate(const sampler_params *p, tt_error *err);

/* Sets one parameter from text, the way --flags and /commands give it. Names: temp, top_k, top_p,
 * min_p, repeat, presence, frequency, window, order (hf|llama). Rejects non-numbers, trailing
 * junk, NaN, inf and out-of-range values; on failure *p is unchanged. */
tt_status sampler_params_set(sampler_params *p, const char *name, const char *value,
                             tt_error *err);

/* One line: "temp 0.8 top-k 40 top-p 0.95 min-p 0 rep 1 pres 0 freq 0 win 64 hf" (or "greedy ..."). */
size_t sampler_params_format(const sampler_params *p, char *buf, size_t cap);

/* Which stage removed a token (a penalty lowers a logit but removes nothing: see penalized). */
typedef enum {
    SAMPLER_CUT_NONE = 0,
    SAMPLER_CUT_BANNED,   /* masked by the caller, e.g. EOS before --min-tokens */
    SAMPLER_CUT_TOP_K,
    SAMPLER_CUT_TOP_P,
    SAMPLER_CUT_MIN_P,
    SAMPLER_CUT_GREEDY,   /* not the argmax in greedy mode */
} sampler_cut;

/* NULL for NONE, else "banned", "top_k", "top_p", "min_p", "greedy". */
const char *sampler_cut_name(sampler_cut c);

#define SAMPLER_TOP_MAX 32

typedef struct {
    int32_t id;
    float logit;       /* raw logit from the model */
    float raw_p;       /* softmax of the raw logits */
    float p;           /* final probability after the chain (0 when cut) */
    uint8_t cut;       /* sampler_cut */
    bool penalized;    /* a penalty changed this token's logit */
} sampler_entry;

typedef struct {
    int n_top;                          /* entries in top */
    sampler_entry top[SAMPLER_TOP_MAX]; /* the most probable raw tokens, descending raw_p (ties:
                                           lower id first); the chosen token is always included */
    int n_kept;                         /* tokens with final p > 0 */
    float entropy_raw;                  /* bits, of the raw distribution */
    float entropy_final;                /* bits, of the final distribution */
    /* Filled by sampler_draw / sampler_force: */
    int32_t token;
    float token_p, token_raw_p;
    int token_rank;                     /* 0-based rank in descending final p */
    double u;                           /* the uniform draw; -1 when greedy or forced */
    double cum_lo;                      /* final mass ranked before the token: u is in
                                           [cum_lo, cum_lo + token_p) */
    bool forced;                        /* chosen by sampler_force (/pick) */
} sampler_snapshot;

/* What the penalties and masks see for this position. */
typedef struct {
    const int32_t *history;   /* the context so far, oldest first (prompt included) */
    int n_history;
    int32_t banned;           /* a token to mask (EOS before --min-tokens), or -1 */
} sampler_context;

typedef struct sampler sampler;

/* Scratch for a vocabulary of V tokens; NULL when out of memory. */
sampler *sampler_create(int V);
void sampler_free(sampler *s);   /* NULL is safe */

/* Runs the chain over logits (V floats, unchanged). Afterwards sampler_probs() is the final
 * distribution and snap (when not NULL) holds the pre-draw fields. Non-finite logits, or a chain
 * that leaves nothing, fail with TT_ERR_NUMERIC and no distribution. */
tt_status sampler_apply(sampler *s, const sampler_params *p, const float *logits,
                        const sampler_context *ctx, sampler_snapshot *snap, tt_error *err);

/* The final distribution of the last apply: V floats summing to 1, 0 for cut tokens. */
const float *sampler_probs(const sampler *s);

/* Draws from the last applied distribution with u in [0, 1): walks kept tokens in descending final
 * probability (ties: lower id first) and picks the first whose cumulative mass exceeds u. Greedy
 * ignores u. Fills the draw fields of snap (when not NULL). Callers draw u every step, greedy or
 * not, so switching modes does not shift the random stream. */
int32_t sampler_draw(sampler *s, double u, sampler_snapshot *snap);

/* Chooses id instead of drawing (step mode's /pick); fills snap like a draw with forced = true. */
void sampler_force(sampler *s, int32_t id, sampler_snapshot *snap);

#endif
