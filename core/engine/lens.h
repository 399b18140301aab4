/* lens.h: the logit lens: what the residual stream after each layer would predict if it went
 * straight to the final norm and the output head, softmax(head(final_norm(h_l))), at the last
 * position of an engine's forward. The engine keeps the rows when asked (engine.lens, filled by
 * each backend); the distributions are computed here, on the CPU, from the model's own final norm
 * and head (whatever backend ran the forward), only when someone looks. The lens of the last
 * layer is the model's own distribution: the softmax of the logits the forward gave (kept in
 * engine.lens_logits), so a quantized engine's too, whose head the fp32 one of the earlier rows
 * is not. */
#ifndef TOKENTOP_LENS_H
#define TOKENTOP_LENS_H

#include <stdint.h>

#include "core/base/dtype.h"
#include "core/base/status.h"
#include "core/engine/engine.h"
#include "core/model/model.h"

/* Tokens a lens_layer lists at most. */
#define LENS_TOP_MAX 16

/* Makes e keep the residual stream of each forward's last position in e->lens ((L + 1, C),
 * engine.h), from the next engine_forward on; a no-op when it does already. Fails with
 * TT_ERR_NOMEM, nothing changed. engine_free frees the rows. */
tt_status lens_enable(engine *e, tt_error *err);

/* Stops keeping them and frees the rows (a no-op when off). */
void lens_disable(engine *e);

/* probs (n_rows, V) = softmax(head(final_norm(resid[r]))) for each row r of resid (n_rows, C):
 * m's final norm (LayerNorm or RMSNorm, as its architecture says) and output head, read from the
 * mapping in any file dtype (GGUF's quantized types dequantized) and rounded to held as an engine
 * holding the weights in held rounds them (fp16, bf16; fp32 and q8 keep the file's values), in
 * fp32 arithmetic with each row's norm statistics in double. The head is read once for all rows,
 * split over n_threads threads (<= 0: one per CPU the process may use, at most 8). Fails with
 * TT_ERR_NOMEM (probs unspecified). */
tt_status lens_probs(const model *m, tt_dtype held, const float *resid, int n_rows, float *probs,
                     int n_threads, tt_error *err);

/* One layer's lens, summarized: its k most probable tokens and where a given token stands. */
typedef struct {
    int layer;                     /* 0: the embeddings; l: after block l */
    int n_top;
    int32_t top_id[LENS_TOP_MAX];  /* most probable first; equal probabilities: lower id first */
    float top_p[LENS_TOP_MAX];
    float p_token;                 /* the probability of the token asked about; -1: none asked */
    int rank_token;                /* its rank from 1 (1 + the tokens more probable); 0: none */
    float entropy_bits;            /* of the whole distribution */
} lens_layer;

/* Summarizes probs (V) as layer `layer`'s row: the k (clamped to [1, LENS_TOP_MAX]) most
 * probable tokens, and token's probability and rank (token < 0 or >= V: none). */
void lens_layer_summarize(const float *probs, int V, int layer, int k, int32_t token,
                          lens_layer *out);

/* The lens of e's last forward (e->lens_pos >= 0): out[l] for l = 0 .. L, each with its k most
 * probable tokens and token's place (token < 0: none), on e's threads (a GPU engine's: the CPU's).
 * probs: NULL, or (L + 1, V) floats that receive the full distributions. Fails with TT_ERR_ARG
 * when e keeps no rows or they hold no forward ("the engine kept no residual stream: ..."), with
 * TT_ERR_NOMEM. */
tt_status lens_engine_layers(const engine *e, int k, int32_t token, lens_layer *out, float *probs,
                             tt_error *err);

#endif
