/* dtype_compare.h: one position's next-token distribution under two weight precisions: the
 * session's engine (the reference, p) and a second engine over the same model at another dtype
 * (the comparison, q), run on the same tokens. Both are the model's raw distribution, the
 * softmax of the logits, before penalties, temperature and truncation: what quantization
 * changes. */
#ifndef TOKENTOP_DTYPE_COMPARE_H
#define TOKENTOP_DTYPE_COMPARE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/base/dtype.h"
#include "core/engine/engine.h"
#include "core/decode/sampler.h"
#include "core/base/status.h"

#define DTYPE_COMPARE_TOP (SAMPLER_TOP_MAX + 1)

typedef struct {
    tt_dtype ref_dtype, dtype;     /* the reference's and the comparison's precision */
    double kl;                     /* KL(p || q) in nats, summed over the whole vocabulary */
    float max_dp;                  /* max over the vocabulary of |p(x) - q(x)| */
    int32_t max_dp_id;             /* the token with that change (the lowest id on ties) */
    int32_t top1_ref, top1_cmp;    /* argmax of p and of q (the lowest id on ties) */
    float top1_cmp_p;              /* q of the comparison's argmax */
    bool top1_agree;               /* top1_ref == top1_cmp: greedy picks the same token */
    int n_top;                     /* entries below */
    int32_t top_id[DTYPE_COMPARE_TOP];  /* the tokens asked for, in the order given (the
                                           reference snapshot's top tokens) */
    float top_p[DTYPE_COMPARE_TOP];     /* p of each: the reference */
    float top_q[DTYPE_COMPARE_TOP];     /* q of each: the comparison */
} dtype_compare;

/* Compares softmax(ref) with softmax(cmp), V logits each (computed in double; a -inf logit is a
 * zero probability), and lists p and q of ids[0 .. n_ids-1] (n_ids is cut to DTYPE_COMPARE_TOP;
 * ids outside [0, V) get 0). The dtype fields are left as they were. */
void dtype_compare_logits(const float *ref, const float *cmp, int V, const int32_t *ids,
                          int n_ids, dtype_compare *out);

/* Brings cmp's cache to hold tokens[0 .. n-1] (engine_sync: the common prefix is kept, so a
 * comparison that follows a generation forwards one token per step), then compares ref_logits
 * (the reference engine's logits after the same tokens, V floats) with cmp's, listing the
 * tokens of ref_snap's top list (NULL: none). ref_dtype names the reference's precision. On
 * failure out is unchanged and cmp holds a prefix of tokens. */
tt_status dtype_compare_at(engine *cmp, const int32_t *tokens, int n, const float *ref_logits,
                           tt_dtype ref_dtype, const sampler_snapshot *ref_snap,
                           dtype_compare *out, tt_error *err);

#endif
