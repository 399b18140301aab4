/* sampler.h: the logit-processing chain and the draw. Runs on the host over a float logits
 * vector for every backend; produces a per-step snapshot for the histogram and --json. */
#ifndef TOKENTOP_SAMPLER_H
#define TOKENTOP_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/status.h"

/* ---------------------------------------------------------------------------------------------
 * Semantics (docs/sampling.md says the same)
 *
 * Order of tokens. Every stage that ranks tokens uses one total order: descending logit after the
 * ban and the penalties, ties broken by the lower token id. Temperature does not change it.
 *
 * 0. Mask: ctx->banned (EOS before --min-tokens) becomes -inf before anything else. A logit that
 *    is already -inf is a legal mask too. Both are reported as SAMPLER_CUT_BANNED.
 *    NaN or +inf anywhere fails with TT_ERR_NUMERIC naming the first bad id; a chain with every
 *    token masked fails the same way. No distribution and no token come out of a failed apply.
 * 1. Penalties look at the last penalty_window tokens of ctx->history (-1 all, 0 none; the prompt
 *    counts). For each distinct token t seen c > 0 times there, once:
 *      repetition (HF/CTRL): l = l > 0 ? l / r : l * r
 *      then OpenAI:          l -= c * frequency + presence
 *    The result is clamped to +-FLT_MAX, so a penalty never makes a logit non-finite.
 * 2. Temperature T: logits / T. T == 0 (or greedy) means argmax after penalties and mask (ties:
 *    lower id); then no other stage runs and every other token is SAMPLER_CUT_GREEDY.
 * 3. top-k: keeps exactly k tokens (llama.cpp), not every token tied with the k-th (HF): the
 *    histogram then shows k rows when k is set; a tie at the k-th value goes to the lower id.
 *    k <= 0 disables; k > V is capped.
 * 4. top-p: keeps the smallest prefix of the order whose cumulative probability reaches p, the
 *    token that crosses p included (HF and llama.cpp agree). Sums are in double, and a sum within
 *    1e-6 of p counts as reaching it: probabilities from float logits carry ~1e-7 of rounding, and
 *    without the allowance [0.5, 0.3, 0.1, 0.1] at p 0.8 would keep a third token on some inputs.
 *    p == 1 disables; p == 0 keeps one token.
 * 5. min-p: keeps tokens with p_i >= min_p * p_max of the distribution at that stage; the most
 *    likely token always stays. min_p == 0 disables.
 *    Orders: SAMPLER_ORDER_HF (default) runs 1 2 3 4 5, so the filters see tempered probabilities;
 *    SAMPLER_ORDER_LLAMA runs 1 3 4 5 2: the filters see untempered ones and temperature reshapes
 *    only the survivors. Each stage renormalises over what the previous one kept.
 * 6. Draw: kept tokens are walked in the order above; the first whose cumulative final probability
 *    exceeds u is chosen. The walk sums the probabilities in double (w_i / W, of which
 *    sampler_probs holds the float roundings), and the last kept token with p > 0 also takes any
 *    rounding remainder, so u close to 1 never runs off the end.
 * --------------------------------------------------------------------------------------------- */

/* Chain order presets. HF (default): penalties -> temperature -> top-k -> top-p -> min-p -> draw.
 * LLAMA: penalties -> top-k -> top-p -> min-p -> temperature -> draw (filters see untempered
 * probabilities, as in llama.cpp's default chain). */
typedef enum { SAMPLER_ORDER_HF = 0, SAMPLER_ORDER_LLAMA = 1 } sampler_order;

typedef struct {
    float temperature;         /* finite, >= 0; 0 means greedy */
    int top_k;                 /* <= 0 disables; > V is capped to V */
    float top_p;               /* [0, 1]; 1 disables; 0 keeps the single most likely token */
    float min_p;               /* [0, 1]; 0 disables */
    float repetition_penalty;  /* finite, > 0; 1 disables (HF: positive logits divided, others
                                  multiplied) */
    float presence_penalty;    /* finite; 0 disables (OpenAI: logit -= presence if count > 0) */
    float frequency_penalty;   /* finite; 0 disables (OpenAI: logit -= count * frequency) */
    int penalty_window;        /* penalties look at the last N context tokens; -1 all; 0 none */
    bool greedy;               /* argmax after penalties; also implied by temperature == 0 */
    sampler_order order;
} sampler_params;

/* temperature 1, top_k 0, top_p 1, min_p 0, penalties off, window 64, sampling, HF order. */
void sampler_params_default(sampler_params *p);

/* Checks every field; on failure err names the field (by its sampler_params_set name) and value
 * ("top_p: 1.5 is outside [0, 1]") and the status is TT_ERR_ARG. */
tt_status sampler_params_validate(const sampler_params *p, tt_error *err);

/* Sets one parameter from text, the way --flags and /commands give it. Names: temp, top_k, top_p,
 * min_p, repeat, presence, frequency, window, order (hf|llama), greedy (on|off|1|0|true|false);
 * also accepted: temperature, top-k, top-p, min-p, rep, pres, freq, win (the spellings of
 * sampler_params_format). The whole text must be the number (strtod/strtol, no blanks, no
 * suffix). Rejects non-numbers, trailing junk, "", NaN, inf, values that do not fit the field
 * and out-of-range values with TT_ERR_ARG and a message naming the field and the text; on failure
 * *p is unchanged. */
tt_status sampler_params_set(sampler_params *p, const char *name, const char *value,
                             tt_error *err);

/* One line: "temp 0.8 top-k 40 top-p 0.95 min-p 0 rep 1 pres 0 freq 0 win 64 hf" ("greedy"
 * replaces "temp X"; "win all" for -1). Returns what snprintf returns (the full length, even when
 * cap truncated it); buf is NUL-terminated when cap > 0. */
size_t sampler_params_format(const sampler_params *p, char *buf, size_t cap);

/* Which stage removed a token (a penalty lowers a logit but removes nothing: see penalized).
 * A token is attributed to the first stage, in chain order, that removed it. */
typedef enum {
    SAMPLER_CUT_NONE = 0,
    SAMPLER_CUT_BANNED,   /* masked: ctx->banned (EOS before --min-tokens) or a -inf logit */
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
    float raw_p;       /* softmax of the raw logits (before mask and penalties) */
    float temp_p;      /* after mask, penalties and temperature, before top-k/top-p/min-p: what
                          temperature alone made of the distribution */
    float p;           /* final probability after the chain (0 when cut; a kept token whose
                          probability underflows float is also 0, with cut NONE) */
    uint8_t cut;       /* sampler_cut */
    bool penalized;    /* a penalty changed this token's logit */
} sampler_entry;

typedef struct {
    int n_top;                              /* entries in top: min(V, SAMPLER_TOP_MAX) after
                                               apply, one more when the drawn token was not
                                               among them */
    sampler_entry top[SAMPLER_TOP_MAX + 1]; /* the most probable raw tokens, descending raw_p
                                               (ties: lower id first); after a draw or force the
                                               chosen token is always included (appended last
                                               when outside the top SAMPLER_TOP_MAX) */
    int n_kept;                         /* tokens with final p > 0 */
    float entropy_raw;                  /* bits, of the raw distribution */
    float entropy_final;                /* bits, of the final distribution */
    /* Filled by sampler_draw / sampler_force (after apply: token -1, token_rank -1, u -1): */
    int32_t token;
    float token_p, token_raw_p;
    int token_rank;                     /* 0-based rank in descending final p (the draw order);
                                           -1 for a forced token that the chain cut */
    double u;                           /* the uniform draw; -1 when greedy or forced */
    double cum_lo;                      /* final mass ranked before the token (in double):
                                           u is in [cum_lo, cum_lo + token_p) up to the float
                                           rounding of token_p (the last kept token also covers
                                           the rounding remainder up to 1) */
    bool forced;                        /* chosen by sampler_force (/pick) */
} sampler_snapshot;

/* What the penalties and masks see for this position. */
typedef struct {
    const int32_t *history;   /* the context so far, oldest first (prompt included) */
    int n_history;
    int32_t banned;           /* a token to mask (EOS before --min-tokens), or -1 */
} sampler_context;

typedef struct sampler sampler;

/* Scratch for a vocabulary of V tokens (about 50 bytes per token: 2.5 MB for GPT-2); NULL when
 * out of memory or V < 1. Uses the widest vector passes the CPU runs (AVX-512, AVX2, else 4-lane
 * SSE2/NEON). Not thread-safe: one sampler per thread. */
sampler *sampler_create(int V);
void sampler_free(sampler *s);   /* NULL is safe */

/* Like sampler_create with a named set of vector passes: "vec4" (SSE2/NEON, every build), "avx2",
 * "avx512"; NULL or "" picks the widest this CPU runs, as sampler_create does. NULL when the name
 * is unknown or the CPU or the build lacks the set. For tests and benchmarks. */
sampler *sampler_create_with(int V, const char *kernels);

/* The set in use: "vec4", "avx2" or "avx512" (s not NULL). */
const char *sampler_kernels_name(const sampler *s);

/* Runs the chain over logits (V floats, not modified, not kept). ctx may be NULL (no history, no
 * ban). Afterwards sampler_probs() is the final distribution and snap (when not NULL) holds the
 * pre-draw fields. Fails with TT_ERR_ARG for invalid params (see validate), a history token in
 * the window or a banned id outside [0, V); with TT_ERR_NUMERIC for NaN/+inf logits or when no
 * token is left. After a failure there is no distribution: sampler_probs returns NULL and
 * sampler_draw / sampler_force return -1 until the next successful apply. */
tt_status sampler_apply(sampler *s, const sampler_params *p, const float *logits,
                        const sampler_context *ctx, sampler_snapshot *snap, tt_error *err);

/* The final distribution of the last apply: V floats summing to 1 (within float rounding), 0 for
 * cut tokens; NULL when the last apply failed or there was none. Owned by the sampler, valid
 * until the next apply. */
const float *sampler_probs(const sampler *s);

/* The logits after the mask and the penalties of the last apply (stages 0 and 1 above: no
 * temperature, no truncation), V floats owned by the sampler, valid until the next apply; NULL
 * when the last apply failed or there was none. Beam search scores tokens by their log-softmax. */
const float *sampler_penalized_logits(const sampler *s);

/* Draws from the last applied distribution with u in [0, 1) (NaN and u < 0 act as 0, u >= 1 as
 * the largest double below 1): walks kept tokens in descending final probability (ties: lower id
 * first) and picks the first whose cumulative mass exceeds u. Greedy ignores u. Fills snap (when
 * not NULL) with the snapshot of the last apply plus the draw fields. Returns the token, or -1
 * when there is no distribution. Callers draw u every step, greedy or not, so switching modes
 * does not shift the random stream. Several draws from one apply are allowed. */
int32_t sampler_draw(sampler *s, double u, sampler_snapshot *snap);

/* Chooses id instead of drawing (step mode's /pick); fills snap like a draw with forced = true,
 * u = -1. Returns id, or -1 (snap untouched) when id is outside [0, V) or there is no
 * distribution. */
int32_t sampler_force(sampler *s, int32_t id, sampler_snapshot *snap);

/* Fills the token fields of snap as a draw of id with final probability p and uniform u (-1: none)
 * would, leaving the rest empty (n_top 0, n_kept 0, token_rank -1, raw_p and entropies 0): the
 * snapshot of a step nobody shows, for callers that pass NULL to sampler_apply and sampler_draw
 * to skip the raw pass and the top list. */
void sampler_snapshot_token_only(sampler_snapshot *snap, int32_t id, float p, double u);

#endif
