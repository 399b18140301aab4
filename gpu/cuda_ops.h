/* cuda_ops.h: each GPU operation of the backend run once on host arrays, for the per-op tests
 * (tests/check_gpu_*.c). Inputs are uploaded (rounded to the dtype where the backend holds them in
 * it), the backend's own launcher from gpu/cuda_kernels.cu runs on the context's stream, and the outputs
 * come back as floats. Runs on a real device or on the host emulation alike.
 *
 * Every function returns TT_OK, or TT_ERR_DEVICE with the failing call in err (a bad launch, a
 * cuBLAS error) and TT_ERR_UNSUPPORTED in a build without CUDA. Output arrays are written only on
 * success. Shapes use the letters of core/model/model.h. */
#ifndef TOKENTOP_GPU_CUDA_OPS_H
#define TOKENTOP_GPU_CUDA_OPS_H

#include <stdbool.h>
#include <stddef.h>

#include "gpu/core_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuda_ops cuda_ops;

/* A stream and a cuBLAS handle on the current device. */
tt_status cuda_ops_create(cuda_ops **out, tt_error *err);
void cuda_ops_free(cuda_ops *c);   /* NULL is safe */

/* x (T, C) = wte[ids[t]] + wpe[pos + t]; wte (V, C) and wpe (maxT, C) held in d. */
tt_status cuda_ops_embed(cuda_ops *c, float *x, const int *ids, int T, int pos, const float *wte, int V,
                         const float *wpe, int maxT, int C, tt_dtype d, tt_error *err);

/* x (T, C) += bias (when not NULL; x is in/out), then out (T, C) = LayerNorm(x) w + b, out rounded
 * to d as the backend holds it. */
tt_status cuda_ops_layernorm(cuda_ops *c, float *out, float *x, const float *bias, const float *w,
                             const float *b, int T, int C, float eps, tt_dtype d, tt_error *err);

/* out (T, N) = x (T, K) W (K, N), or out += x W when accumulate (out is in/out); x and W held in d.
 * W is laid out as the engine holds a Conv1D weight (cuda_transpose to (N, K)), then multiplied by
 * the kernel the engine uses for T rows (cuda_gemv for T <= CUDA_GEMV_MAX_T, else cuBLAS). */
tt_status cuda_ops_matmul(cuda_ops *c, float *out, const float *x, const float *w, int T, int K, int N,
                          bool accumulate, tt_dtype d, tt_error *err);

/* logits (T, V) = x (T, C) lm_head^T, lm_head (V, C); x and lm_head held in d; the kernel as for
 * cuda_ops_matmul. */
tt_status cuda_ops_lm_head(cuda_ops *c, float *logits, const float *x, const float *lm_head, int T, int C,
                           int V, tt_dtype d, tt_error *err);

/* out (T, FF) = the FFN's first matmul and its activation in one kernel, as a step of T <=
 * CUDA_GEMV_MAX_T rows runs them (cuda_gemv_ffn_up): gelu(x W + bias) with W (K, FF), or, when
 * swiglu, silu(x W_gate) * (x W_up) with W (K, 2 FF) holding [gate | up] side by side (bias
 * unused); x and W held in d, W laid out by the upload's transpose, out rounded to d. */
tt_status cuda_ops_ffn_up(cuda_ops *c, float *out, const float *x, const float *w, const float *bias, int T, int K,
                          int FF, arch_activation act, bool swiglu, tt_dtype d, tt_error *err);

/* out (T, FF) = gelu(x + bias), rounded to d. */
tt_status cuda_ops_gelu(cuda_ops *c, float *out, const float *x, const float *bias, int T, int FF,
                        arch_activation act, tt_dtype d, tt_error *err);

/* probs (NH, T, pos + T) = causal softmax of scores (NH, T, pos + T), rounded to d. */
tt_status cuda_ops_softmax_causal(cuda_ops *c, float *probs, const float *scores, int pos, int T, int NH,
                                  tt_dtype d, tt_error *err);

/* One attention step as the engine runs it: qkv (T, 3C) + bias (3C) split into q and the cache at
 * positions pos .. pos+T-1, then attention of the T queries over keys 0 .. pos+t. k_cache and
 * v_cache (NH, n_ctx, HS) are in/out (rows past pos + T untouched); out (T, C). decode selects the
 * one-token kernels (T must be 1: cuda_qkv_store_rows, cuda_attention_decode), otherwise
 * cuda_qkv_store and the cuBLAS path (scores, causal softmax, values). */
tt_status cuda_ops_attention(cuda_ops *c, float *out, float *k_cache, float *v_cache, const float *qkv,
                             const float *bias, int pos, int T, int C, int NH, int n_ctx, bool decode,
                             tt_dtype d, tt_error *err);

#ifdef __cplusplus
}
#endif

#endif
