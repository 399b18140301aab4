/* cuda_kernels.h: the CUDA backend's kernels and cuBLAS calls, one launcher per operation (C++, included
 * by gpu/ sources only). Each launcher only queues work on its stream (or the cuBLAS handle's) and
 * returns the launch's or cuBLAS's status; the caller checks it (cuda_engine.cu's GPU_CHECK).
 *
 * The CPU twin (core/cpu/cpu.c, core/cpu/kernels.c) computes the same steps with the same scalar math
 * (core/arch/block_math.h for GELU, LayerNorm, RMSNorm, SiLU, RoPE, the attention scale;
 * core/base/dtype.h for every rounding), walking the same recipe (core/arch/arch.h):
 *     cpu_embed            <-> cuda_embed            x = token_embd[id] (+ pos_embd[pos + t])
 *     kernels_layernorm    <-> cuda_layernorm        (also adds the pending bias of the last matmul)
 *     kernels_rmsnorm      <-> cuda_rmsnorm          (ARCH_F_RMSNORM; the same pending bias)
 *     cpu_matmul           <-> cuda_gemv (a few rows), cuda_matmul (cuBLAS); fp32 accumulation, bias
 *                              in the kernel after; every weight held (N, K) as nn.Linear holds it
 *     MM_GELU_*            <-> cuda_gelu             bias + GELU
 *     kernels_swiglu       <-> cuda_swiglu           silu(gate) * up (ARCH_F_SWIGLU)
 *     cpu_attention_prepare <-> cuda_qkv_store       bias, per-head q/k RMSNorm, RoPE, then q out and
 *                              (prefill), cuda_qkv_store_rows (decode)   k, v into the cache
 *     ref_attention        <-> cuda_attention_scores + cuda_softmax_causal + cuda_attention_values
 *                              (prefill, cuBLAS), or cuda_attention_decode (one token, split over keys)
 * Grouped-query attention: query head h reads KV head h / (NH / NKV), on both.
 * Differences by design: activations that feed a matmul (norm, GELU/SwiGLU and attention outputs, q)
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

/* Largest head size the attention kernels handle (GPT-2 and Llama use 64, Qwen3 128). */
#define CUDA_MAX_HS 256

/* The attention block's shape and what happens to each head of the q|k|v matmul's output before
 * attention (core/arch/arch.h's recipe). q|k|v rows are (QKV) = [q (NH HS) | k (NKV HS) | v (NKV HS)];
 * a KV cache is (NKV, n_ctx, HS) per layer. */
typedef struct {
    int NH, NKV, HS, n_ctx;
    const float *bias;             /* (QKV) q|k|v biases, or NULL */
    const float *q_norm, *k_norm;  /* (HS) per-head RMSNorm weights (ARCH_F_QK_NORM), or NULL */
    float eps;                     /* their epsilon */
    const float *rope_cos, *rope_sin;  /* (n_ctx, HS / 2) cos and sin of pos * inv_freq[i]
                                          (ARCH_F_ROPE), or NULL */
} cuda_attn;

/* One row of a decode step: its token, its position in its sequence, and that sequence's KV
 * cache, (L, NKV, n_ctx, HS) per K and V in the weight dtype (layer l at element l NKV n_ctx HS).
 * Rows of one step belong to distinct sequences. */
typedef struct {
    int pos;
    int id;
    void *k, *v;
} cuda_row;

/* x (T, C) fp32 = wte[tokens[1 + t]] + wpe[tokens[0] + t]; wte (V, C), wpe (maxT, C) in d; wpe
 * NULL (RoPE models): x = wte[tokens[1 + t]]. */
cudaError_t cuda_embed(float *x, const int *tokens, const void *wte, const void *wpe, int T, int C,
                       tt_dtype d, cudaStream_t stream);

/* x (B, C) fp32 = wte[rows[b].id] + wpe[rows[b].pos]: cuda_embed's sum, per row. */
cudaError_t cuda_embed_rows(float *x, const cuda_row *rows, const void *wte, const void *wpe, int B,
                            int C, tt_dtype d, cudaStream_t stream);

/* For each row t of x (T, C) fp32: x[t] += bias (when bias is not NULL; the bias of the matmul that
 * last accumulated into x), then out[t] = LayerNorm(x[t]) * w + b, written in d. */
cudaError_t cuda_layernorm(void *out, float *x, const float *bias, const float *w, const float *b,
                           int T, int C, float eps, tt_dtype d, cudaStream_t stream);

/* cuda_layernorm's twin for RMSNorm: x[t] += bias (when not NULL), then out[t] = x[t] rstd w,
 * rstd = 1 / sqrt(mean(x[t]^2) + eps), written in d. */
cudaError_t cuda_rmsnorm(void *out, float *x, const float *bias, const float *w, int T, int C, float eps,
                         tt_dtype d, cudaStream_t stream);

/* Every weight matrix is held as nn.Linear holds it, W^T (N, K) row-major in d: the Llama family's
 * files store it so, GPT-2's Conv1D [in, out] = (K, N) matrices are transposed once at upload
 * (cuda_transpose), and the lm_head (V, C) is one with N = V, K = C. Two kernels multiply by it:
 *
 * cuda_gemv, for a few rows (T <= CUDA_GEMV_MAX_T: decode steps, short spans): one warp per output
 * column n reads W's row n once with 16-byte loads and keeps one fp32 sum per row of x; each lane
 * sums its own elements in k order, then the warp adds the lanes' sums (shuffles). A row's sum does
 * not depend on T or on the other rows.
 * cuda_matmul, for more rows: cuBLAS (fp32 accumulation), W entering transposed.
 *
 * Both: out (T, ldo) fp32 = x (T, ldx) W, or out += x W when accumulate; x in d. */
#define CUDA_GEMV_MAX_T 8

/* Which of the two the engine (and the per-op tests) use for T rows. */
static inline bool cuda_matmul_uses_gemv(int T) { return T <= CUDA_GEMV_MAX_T; }

cudaError_t cuda_gemv(float *out, int ldo, const void *x, int ldx, const void *w, int T, int K, int N,
                      bool accumulate, tt_dtype d, cudaStream_t stream);

cublasStatus_t cuda_matmul(cublasHandle_t h, float *out, int ldo, const void *x, int ldx, const void *w,
                           int T, int K, int N, bool accumulate, tt_dtype d);

/* The first matmul of the FFN and its activation in one kernel, for T <= CUDA_GEMV_MAX_T rows:
 * out (T, FF) in d = gelu(x W + bias) with W (FF, K) held and bias (FF) or NULL (act says which
 * GELU), or, when swiglu, silu(x W_gate) * (x W_up) with W (2 FF, K) held as [gate | up]. The bits
 * of cuda_gemv followed by cuda_gelu or cuda_swiglu, in one launch and without their fp32 round
 * trip through device memory. */
cudaError_t cuda_gemv_ffn_up(void *out, const void *x, int ldx, const void *w, const float *bias, int T, int K,
                             int FF, arch_activation act, bool swiglu, tt_dtype d, cudaStream_t stream);

/* dst (S, R) with row stride ldd = src (R, S)^T, both in d: dst[s ldd + r] = src[r S + s]. */
cudaError_t cuda_transpose(void *dst, int ldd, const void *src, int R, int S, tt_dtype d, cudaStream_t stream);

/* out (T, FF) in d = gelu(x + bias), x (T, FF) fp32. */
cudaError_t cuda_gelu(void *out, const float *x, const float *bias, int T, int FF, arch_activation act,
                      tt_dtype d, cudaStream_t stream);

/* out (T, FF) in d = silu(gate) * up, gu (T, 2 FF) fp32 holding [gate | up] per row. */
cudaError_t cuda_swiglu(void *out, const float *gu, int T, int FF, tt_dtype d, cudaStream_t stream);

/* qkv (T, QKV) fp32, each head: + bias, RMSNorm (q and k heads, when a.q_norm), RoPE at position
 * tokens[0] + t (q and k heads, when a.rope_cos); then the query heads go to q (T, NH HS) in d,
 * keys and values to the cache k, v (NKV, n_ctx, HS) in d at positions tokens[0] + t. */
cudaError_t cuda_qkv_store(void *q, void *k, void *v, const float *qkv, const int *tokens, int T,
                           const cuda_attn *a, tt_dtype d, cudaStream_t stream);

/* The same for a decode step of B rows, qkv (B, QKV): row b at position rows[b].pos, its keys and
 * values into rows[b]'s cache (layer at element offset `layer`). */
cudaError_t cuda_qkv_store_rows(void *q, const float *qkv, const cuda_row *rows, size_t layer, int B,
                                const cuda_attn *a, tt_dtype d, cudaStream_t stream);

/* Prefill attention of T queries at positions pos .. pos+T-1 over n_keys = pos + T cached keys, q
 * (T, NH HS) in d, the cache k, v (NKV, n_ctx, HS): query head h reads KV head h / (NH / NKV).
 * scores (NH, T, n_keys) fp32 = q k^T / sqrt(HS)  (NH / NKV strided batched GEMMs over the KV
 * heads), */
cublasStatus_t cuda_attention_scores(cublasHandle_t h, float *scores, const void *q, const void *k,
                                     int pos, int T, int NH, int NKV, int HS, int n_ctx, tt_dtype d);
/* probs (NH, T, n_keys) in d = causal softmax of each row (keys past pos + t get 0), */
cudaError_t cuda_softmax_causal(void *probs, const float *scores, int pos, int T, int NH, tt_dtype d,
                                cudaStream_t stream);
/* out (T, NH HS) in d, head h at columns h*HS = probs v  (NH / NKV strided batched GEMMs). */
cublasStatus_t cuda_attention_values(cublasHandle_t h, void *out, const void *probs, const void *v,
                                     int pos, int T, int NH, int NKV, int HS, int n_ctx, tt_dtype d);

/* A decode step of B rows after cuda_qkv_store_rows (q (B, NH HS) in d, the rows' new keys and
 * values already in their caches): for each row b, attention over that sequence's keys
 * 0 .. rows[b].pos (layer at element offset `layer`), query head h reading KV head h / (NH / NKV):
 * out (B, NH HS) in d. Each row is computed as it would be alone (the same blocks, the same order
 * of every sum), whatever B and the other rows. Two kernels: up to 16 blocks per head and row
 * (a split of the keys in tiles of 16, by n_ctx) write partial results (partial: B * cuda_attention_decode_partial floats of device scratch), one
 * block per head and row combines them. Launch shapes depend on B and n_ctx only. */
cudaError_t cuda_attention_decode(void *out, float *partial, const void *q, const cuda_row *rows,
                                  size_t layer, int B, int NH, int NKV, int HS, int n_ctx, tt_dtype d,
                                  cudaStream_t stream);
size_t cuda_attention_decode_partial(int NH, int HS, int n_ctx);   /* floats per row */

/* The attention capture (core/engine/attention.h), R query rows of one sequence: for row r (q row
 * q_row0 + r of q (rows, NH HS) in d, position pos0 + r) and head h, out[(r NH + h) ld + j] (fp32)
 * = the softmax over keys j = 0 .. pos0 + r of q k_j / sqrt(HS) (ref_attention's formula), zero
 * for j up to ld; k is one layer of the sequence's cache (NKV, n_ctx, HS) in d. */
cudaError_t cuda_attention_probs(float *out, int ld, const void *q, int q_row0, int R, int pos0, const void *k,
                                 int NH, int NKV, int HS, int n_ctx, tt_dtype d, cudaStream_t stream);

/* The same for row 0 of a decode step, all L layers in one launch after the step: q (L, NH HS) in d
 * holds each layer's query (kept as the layers ran), the position and cache come from rows[0] on
 * the device (layer l's keys at element l layer_elems), so a captured step is valid at every
 * position: with n = rows[0].pos + 1, out[(l NH + h) n + j] for j < n, the rows packed at their
 * length (out holds L NH n_ctx floats). */
cudaError_t cuda_attention_probs_row(float *out, int L, const void *q, const cuda_row *rows, size_t layer_elems,
                                     int NH, int NKV, int HS, int n_ctx, tt_dtype d, cudaStream_t stream);

/* Positions from .. n-1 of every layer and KV head of one sequence's cache (src_k, src_v) into
 * another's (dst_k, dst_v); caches (L, NKV, n_ctx, HS) in d. One launch (beam search forks). */
cudaError_t cuda_kv_copy(void *dst_k, void *dst_v, const void *src_k, const void *src_v, int from,
                         int n, int L, int NKV, int n_ctx, int HS, tt_dtype d, cudaStream_t stream);

/* A launch that touches every kind of instruction the kernels use, on a one-int buffer: fails with
 * cudaErrorNoKernelImageForDevice (or similar) when the build has no code for this device. */
cudaError_t cuda_kernels_probe(int *buf, cudaStream_t stream);

#endif
