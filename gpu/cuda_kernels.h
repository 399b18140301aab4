/* cuda_kernels.h: the CUDA backend's kernels and cuBLAS calls, one launcher per operation (C++, included
 * by gpu/ sources only). Each launcher only queues work on its stream (or the cuBLAS handle's) and
 * returns the launch's or cuBLAS's status; the caller checks it (cuda_engine.cu's GPU_CHECK).
 *
 * The CPU twin (core/cpu/cpu.c, core/cpu/kernels.c) computes the same steps with the same scalar math
 * (core/arch/block_math.h for GELU, LayerNorm, the attention scale; core/base/dtype.h for every rounding):
 *     cpu_embed            <-> cuda_embed            x = wte[id] + wpe[pos + t]
 *     kernels_layernorm    <-> cuda_layernorm        (also adds the pending bias of the last matmul)
 *     cpu_matmul           <-> cuda_matmul           cuBLAS, fp32 accumulation; bias in the kernel after
 *     MM_GELU_*            <-> cuda_gelu             bias + GELU
 *     kvcache_store        <-> cuda_qkv_store        bias + split into q and the cache (prefill;
 *                              decode does it inside cuda_attention_decode)
 *     ref_attention        <-> cuda_attention_scores + cuda_softmax_causal + cuda_attention_values
 *                              (prefill, cuBLAS), or cuda_attention_decode (one token, split over keys)
 * Differences by design: activations that feed a matmul (LayerNorm, GELU and attention outputs, q)
 * and the KV cache are held in the weight dtype, because cuBLAS multiplies two operands of one type;
 * the residual stream, matmul outputs, scores and logits are fp32, as on the CPU.
 *
 * Dimension letters as in core/model/model.h. A prefill chunk (one sequence, T consecutive positions)
 * passes `tokens`, a device buffer of (1 + T) ints: tokens[0] is the position of the first token,
 * tokens[1 .. T] the ids. A decode step (B rows, one token of each of B sequences) passes `rows`, a
 * device array of cuda_row: kernels read every position and cache from it, so one captured graph
 * per B is valid at every position and for every choice of sequences. Pointers are device
 * pointers. */
#ifndef TOKENTOP_GPU_CUDA_KERNELS_H
#define TOKENTOP_GPU_CUDA_KERNELS_H

#include <stdbool.h>

#include "gpu/cuda_common.h"

/* Largest head size cuda_attention_decode handles (GPT-2 uses 64). */
#define CUDA_MAX_HS 256

/* One row of a decode step: its token, its position in its sequence, and that sequence's KV
 * cache, (L, NH, n_ctx, HS) per K and V in the weight dtype (layer l at element l NH n_ctx HS).
 * Rows of one step belong to distinct sequences. */
typedef struct {
    int pos;
    int id;
    void *k, *v;
} cuda_row;

/* x (T, C) fp32 = wte[tokens[1 + t]] + wpe[tokens[0] + t]; wte (V, C), wpe (maxT, C) in d. */
cudaError_t cuda_embed(float *x, const int *tokens, const void *wte, const void *wpe, int T, int C,
                       tt_dtype d, cudaStream_t stream);

/* x (B, C) fp32 = wte[rows[b].id] + wpe[rows[b].pos]: cuda_embed's sum, per row. */
cudaError_t cuda_embed_rows(float *x, const cuda_row *rows, const void *wte, const void *wpe, int B,
                            int C, tt_dtype d, cudaStream_t stream);

/* For each row t of x (T, C) fp32: x[t] += bias (when bias is not NULL; the bias of the matmul that
 * last accumulated into x), then out[t] = LayerNorm(x[t]) * w + b, written in d. */
cudaError_t cuda_layernorm(void *out, float *x, const float *bias, const float *w, const float *b,
                           int T, int C, float eps, tt_dtype d, cudaStream_t stream);

/* out (T, ldo) fp32 = x (T, ldx) W (K, N), or out += x W when accumulate. x and W in d; W is the
 * row-major Conv1D weight [in, out] = [K, N]. */
cublasStatus_t cuda_matmul(cublasHandle_t h, float *out, int ldo, const void *x, int ldx, const void *w,
                           int T, int K, int N, bool accumulate, tt_dtype d);

/* logits (T, V) fp32 = x (T, ldx) lm_head^T; lm_head (V, C) row-major in d (wte when tied). */
cublasStatus_t cuda_matmul_lm_head(cublasHandle_t h, float *logits, const void *x, int ldx,
                                   const void *lm_head, int T, int C, int V, tt_dtype d);

/* out (T, FF) in d = gelu(x + bias), x (T, FF) fp32. */
cudaError_t cuda_gelu(void *out, const float *x, const float *bias, int T, int FF, arch_activation act,
                      tt_dtype d, cudaStream_t stream);

/* qkv (T, 3C) fp32 + bias (3C): the query part goes to q (T, C) in d, keys and values to the cache
 * k, v (NH, n_ctx, HS) in d at positions tokens[0] + t. */
cudaError_t cuda_qkv_store(void *q, void *k, void *v, const float *qkv, const float *bias,
                           const int *tokens, int T, int C, int NH, int n_ctx, tt_dtype d,
                           cudaStream_t stream);

/* Prefill attention of T queries at positions pos .. pos+T-1 over n_keys = pos + T cached keys:
 * scores (NH, T, n_keys) fp32 = q k^T / sqrt(HS)  (one strided batched GEMM over the heads), */
cublasStatus_t cuda_attention_scores(cublasHandle_t h, float *scores, const void *q, const void *k,
                                     int pos, int T, int C, int NH, int n_ctx, tt_dtype d);
/* probs (NH, T, n_keys) in d = causal softmax of each row (keys past pos + t get 0), */
cudaError_t cuda_softmax_causal(void *probs, const float *scores, int pos, int T, int NH, tt_dtype d,
                                cudaStream_t stream);
/* out (T, C) in d, head h at columns h*HS = probs v  (one strided batched GEMM). */
cublasStatus_t cuda_attention_values(cublasHandle_t h, void *out, const void *probs, const void *v,
                                     int pos, int T, int C, int NH, int n_ctx, tt_dtype d);

/* A decode step of B rows, straight from the qkv matmul (qkv (B, 3C) fp32): for each row b, what
 * cuda_qkv_store does (q, and the key and value into rows[b]'s cache at rows[b].pos, layer at
 * element offset `layer`) fused with attention over that sequence's keys 0 .. rows[b].pos:
 * out (B, C) in d. Each row is computed as it would be alone (the same blocks, the same order of
 * every sum), whatever B and the other rows. Two kernels: blocks of 256 keys per head and row
 * write partial results (partial: B * cuda_attention_decode_partial floats of device scratch), one
 * block per head and row combines them. Launch shapes depend on B and n_ctx only. */
cudaError_t cuda_attention_decode(void *out, float *partial, const float *qkv, const float *bias,
                                  const cuda_row *rows, size_t layer, int B, int C, int NH, int n_ctx,
                                  tt_dtype d, cudaStream_t stream);
size_t cuda_attention_decode_partial(int C, int NH, int n_ctx);   /* floats per row */

/* Positions from .. n-1 of every layer and head of one sequence's cache (src_k, src_v) into
 * another's (dst_k, dst_v); caches (L, NH, n_ctx, HS) in d. One launch (beam search forks). */
cudaError_t cuda_kv_copy(void *dst_k, void *dst_v, const void *src_k, const void *src_v, int from,
                         int n, int L, int NH, int n_ctx, int HS, tt_dtype d, cudaStream_t stream);

/* A launch that touches every kind of instruction the kernels use, on a one-int buffer: fails with
 * cudaErrorNoKernelImageForDevice (or similar) when the build has no code for this device. */
cudaError_t cuda_kernels_probe(int *buf, cudaStream_t stream);

#endif
