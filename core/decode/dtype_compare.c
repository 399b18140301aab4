/* dtype_compare.c: KL divergence, the largest probability change and top-1 agreement between the
 * distributions of two engines (dtype_compare.h). */
#include "core/decode/dtype_compare.h"

#include <math.h>
#include <string.h>

/* max and log(sum(exp(x - max))) of V logits: the log-softmax of x_i is x_i - max - lse. */
static void log_norm(const float *x, int V, double *max, double *lse)
{
    double m = -INFINITY;
    for (int i = 0; i < V; i++)
        if (x[i] > m)
            m = x[i];
    double s = 0;
    for (int i = 0; i < V; i++)
        s += exp((double)x[i] - m);
    *max = m;
    *lse = log(s);
}

void dtype_compare_logits(const float *ref, const float *cmp, int V, const int32_t *ids,
                          int n_ids, dtype_compare *out)
{
    double mr, lr, mc, lc;
    log_norm(ref, V, &mr, &lr);
    log_norm(cmp, V, &mc, &lc);
    double kl = 0, max_dp = -1;
    int32_t max_id = 0, top_r = 0, top_c = 0;
    for (int i = 0; i < V; i++) {
        double lp = (double)ref[i] - mr - lr, lq = (double)cmp[i] - mc - lc;
        double p = exp(lp), q = exp(lq);
        /* Written with log-probabilities, a q that underflows to 0 still gives a finite term. */
        if (p > 0)
            kl += p * (lp - lq);
        double d = fabs(p - q);
        if (d > max_dp) {
            max_dp = d;
            max_id = i;
        }
        if (ref[i] > ref[top_r])
            top_r = i;
        if (cmp[i] > cmp[top_c])
            top_c = i;
    }
    out->kl = kl > 0 ? kl : 0;    /* rounding can leave -1e-17 for equal distributions */
    out->max_dp = (float)max_dp;
    out->max_dp_id = max_id;
    out->top1_ref = top_r;
    out->top1_cmp = top_c;
    out->top1_cmp_p = (float)exp((double)cmp[top_c] - mc - lc);
    out->top1_agree = top_r == top_c;
    out->n_top = n_ids < 0 ? 0 : n_ids > DTYPE_COMPARE_TOP ? DTYPE_COMPARE_TOP : n_ids;
    for (int k = 0; k < out->n_top; k++) {
        int32_t id = ids[k];
        bool in = id >= 0 && id < V;
        out->top_id[k] = id;
        out->top_p[k] = in ? (float)exp((double)ref[id] - mr - lr) : 0.0f;
        out->top_q[k] = in ? (float)exp((double)cmp[id] - mc - lc) : 0.0f;
    }
}

tt_status dtype_compare_at(engine *cmp, const int32_t *tokens, int n, const float *ref_logits,
                           tt_dtype ref_dtype, const sampler_snapshot *ref_snap,
                           dtype_compare *out, tt_error *err)
{
    if (n < 1)
        return tt_fail(err, TT_ERR_ARG, "compare: no tokens to run the model on");
    tt_status st = engine_sync(cmp, tokens, n, true, NULL, NULL, err);
    if (st != TT_OK)
        return st;
    int32_t ids[DTYPE_COMPARE_TOP];
    int n_ids = 0;
    if (ref_snap)
        for (; n_ids < ref_snap->n_top && n_ids < DTYPE_COMPARE_TOP; n_ids++)
            ids[n_ids] = ref_snap->top[n_ids].id;
    dtype_compare_logits(ref_logits, engine_logits(cmp, cmp->n_logits - 1), cmp->config->V, ids,
                         n_ids, out);
    out->ref_dtype = ref_dtype;
    out->dtype = cmp->dtype;
    return TT_OK;
}
