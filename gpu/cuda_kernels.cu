/* cuda_kernels.cu: the CUDA backend's kernels (embedding, LayerNorm, RMSNorm, GELU, SwiGLU, q/k/v
 * heads (bias, q/k norm, RoPE) into q and the cache, causal softmax, decode attention) and its cuBLAS
 * calls. Compiled by nvcc, or as C++ against the
 * host emulation (gpu/emu), so the same code is tested without a GPU. */
#include "gpu/cuda_kernels.h"

#include "gpu/reduce.h"

/* =============================================================================================
 * Launch geometry */

/* Threads for one block working on a row of n: whole warps, at most 256. */
static unsigned int row_block(int n)
{
    unsigned int b = (unsigned int)((n + 31) / 32 * 32);
    return b < 32 ? 32 : b > 256 ? 256 : b;
}

/* Blocks of 256 for a grid-stride loop over n elements. */
static unsigned int flat_grid(size_t n)
{
    size_t b = (n + 255) / 256;
    return (unsigned int)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

#define TT_DISPATCH(d, kernel, grid, block, shmem, stream, ...)                          \
    ((d) == TT_F32   ? TT_LAUNCH(kernel<TT_F32>, grid, block, shmem, stream, __VA_ARGS__) \
     : (d) == TT_F16 ? TT_LAUNCH(kernel<TT_F16>, grid, block, shmem, stream, __VA_ARGS__) \
                     : TT_LAUNCH(kernel<TT_BF16>, grid, block, shmem, stream, __VA_ARGS__))

/* =============================================================================================
 * Embedding */

template <tt_dtype D>
__global__ void embed_kernel(float *x, const int *tokens, const void *wte, const void *wpe, int C)
{
    const int t = blockIdx.x;
    const size_t id = (size_t)tokens[1 + t], p = (size_t)(tokens[0] + t);
    float *xr = x + (size_t)t * C;
    for (int i = threadIdx.x; i < C; i += blockDim.x)
        xr[i] = wpe ? tt_load_f32(wte, D, id * C + i) + tt_load_f32(wpe, D, p * C + i)
                    : tt_load_f32(wte, D, id * C + i);
}

cudaError_t cuda_embed(float *x, const int *tokens, const void *wte, const void *wpe, int T, int C,
                       tt_dtype d, cudaStream_t stream)
{
    return TT_DISPATCH(d, embed_kernel, dim3(T), dim3(row_block(C)), 0, stream, x, tokens, wte, wpe, C);
}

template <tt_dtype D>
__global__ void embed_rows_kernel(float *x, const cuda_row *rows, const void *wte, const void *wpe, int C)
{
    const int b = blockIdx.x;
    const size_t id = (size_t)rows[b].id, p = (size_t)rows[b].pos;
    float *xr = x + (size_t)b * C;
    for (int i = threadIdx.x; i < C; i += blockDim.x)
        xr[i] = wpe ? tt_load_f32(wte, D, id * C + i) + tt_load_f32(wpe, D, p * C + i)
                    : tt_load_f32(wte, D, id * C + i);
}

cudaError_t cuda_embed_rows(float *x, const cuda_row *rows, const void *wte, const void *wpe, int B,
                            int C, tt_dtype d, cudaStream_t stream)
{
    return TT_DISPATCH(d, embed_rows_kernel, dim3(B), dim3(row_block(C)), 0, stream, x, rows, wte, wpe, C);
}

/* =============================================================================================
 * LayerNorm (with the pending bias of the residual stream) */

template <tt_dtype D>
__global__ void layernorm_kernel(void *out, float *x, const float *bias, const float *w, const float *b,
                                 int C, float eps)
{
    __shared__ float red[32];
    const int t = blockIdx.x;
    float *xr = x + (size_t)t * C;
    /* Each thread reads back only the elements it wrote: no barrier needed between the passes. */
    float sum = 0.0f;
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        float v = xr[i];
        if (bias) {
            v += bias[i];
            xr[i] = v;
        }
        sum += v;
    }
    const float mean = block_sum(sum, red) / (float)C;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        float dv = xr[i] - mean;
        ss += dv * dv;
    }
    const float rstd = gpt2_layernorm_rstd(block_sum(ss, red) / (float)C, eps);
    for (int i = threadIdx.x; i < C; i += blockDim.x)
        tt_store_f32(out, D, (size_t)t * C + i, gpt2_layernorm_apply(xr[i], mean, rstd, w[i], b[i]));
}

cudaError_t cuda_layernorm(void *out, float *x, const float *bias, const float *w, const float *b,
                           int T, int C, float eps, tt_dtype d, cudaStream_t stream)
{
    return TT_DISPATCH(d, layernorm_kernel, dim3(T), dim3(row_block(C)), 0, stream, out, x, bias, w, b,
                       C, eps);
}

template <tt_dtype D>
__global__ void rmsnorm_kernel(void *out, float *x, const float *bias, const float *w, int C, float eps)
{
    __shared__ float red[32];
    const int t = blockIdx.x;
    float *xr = x + (size_t)t * C;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        float v = xr[i];
        if (bias) {
            v += bias[i];
            xr[i] = v;
        }
        ss += v * v;
    }
    const float rstd = arch_rmsnorm_rstd(block_sum(ss, red) / (float)C, eps);
    for (int i = threadIdx.x; i < C; i += blockDim.x)
        tt_store_f32(out, D, (size_t)t * C + i, arch_rmsnorm_apply(xr[i], rstd, w[i]));
}

cudaError_t cuda_rmsnorm(void *out, float *x, const float *bias, const float *w, int T, int C, float eps,
                         tt_dtype d, cudaStream_t stream)
{
    return TT_DISPATCH(d, rmsnorm_kernel, dim3(T), dim3(row_block(C)), 0, stream, out, x, bias, w, C, eps);
}

/* =============================================================================================
 * Matmuls (cuBLAS, column-major: a row-major (R, S) matrix is a column-major (S, R) one) */

cublasStatus_t cuda_matmul(cublasHandle_t h, float *out, int ldo, const void *x, int ldx, const void *w,
                           int T, int K, int N, bool accumulate, tt_dtype d)
{
    /* out^T (N, T) = W^T (N, K) x^T (K, T): W row-major (K, N) is column-major (N, K) with ld N. */
    const float one = 1.0f, zero = 0.0f;
    return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, T, K, &one, w, tt_cuda_type(d), N,
                        x, tt_cuda_type(d), ldx, accumulate ? &one : &zero, out, CUDA_R_32F, ldo,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t cuda_matmul_linear(cublasHandle_t h, float *out, int ldo, const void *x, int ldx,
                                  const void *w, int T, int K, int N, bool accumulate, tt_dtype d)
{
    /* out^T (N, T) = W (N, K) x^T (K, T): W row-major (N, K) is column-major (K, N) with ld K, so it
     * enters transposed. */
    const float one = 1.0f, zero = 0.0f;
    return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, T, K, &one, w, tt_cuda_type(d), K,
                        x, tt_cuda_type(d), ldx, accumulate ? &one : &zero, out, CUDA_R_32F, ldo,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t cuda_matmul_lm_head(cublasHandle_t h, float *logits, const void *x, int ldx,
                                   const void *lm_head, int T, int C, int V, tt_dtype d)
{
    /* logits^T (V, T) = lm_head (V, C) x^T (C, T): lm_head row-major (V, C) is column-major (C, V),
     * so it enters transposed. */
    const float one = 1.0f, zero = 0.0f;
    return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, V, T, C, &one, lm_head, tt_cuda_type(d), C,
                        x, tt_cuda_type(d), ldx, &zero, logits, CUDA_R_32F, V,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

/* =============================================================================================
 * Bias + GELU */

template <tt_dtype D>
__global__ void gelu_kernel(void *out, const float *x, const float *bias, int FF, size_t N, int erf_act)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < N; i += (size_t)gridDim.x * blockDim.x) {
        float y = x[i] + bias[i % FF];
        tt_store_f32(out, D, i, erf_act ? gpt2_gelu_erf(y) : gpt2_gelu_tanh(y));
    }
}

cudaError_t cuda_gelu(void *out, const float *x, const float *bias, int T, int FF, arch_activation act,
                      tt_dtype d, cudaStream_t stream)
{
    size_t N = (size_t)T * FF;
    return TT_DISPATCH(d, gelu_kernel, dim3(flat_grid(N)), dim3(256), 0, stream, out, x, bias, FF, N,
                       act == ARCH_ACT_GELU_ERF ? 1 : 0);
}

/* =============================================================================================
 * SwiGLU */

template <tt_dtype D>
__global__ void swiglu_kernel(void *out, const float *gu, int FF, size_t N)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < N; i += (size_t)gridDim.x * blockDim.x) {
        const size_t t = i / (size_t)FF, j = i % (size_t)FF;
        const float *row = gu + t * 2 * (size_t)FF;
        tt_store_f32(out, D, i, arch_silu(row[j]) * row[FF + j]);
    }
}

cudaError_t cuda_swiglu(void *out, const float *gu, int T, int FF, tt_dtype d, cudaStream_t stream)
{
    size_t N = (size_t)T * FF;
    return TT_DISPATCH(d, swiglu_kernel, dim3(flat_grid(N)), dim3(256), 0, stream, out, gu, FF, N);
}

/* =============================================================================================
 * Attention */

/* One head of one row of q|k|v (block (head, row), head < NH + 2 NKV): + bias, RMSNorm and RoPE
 * for query and key heads as the recipe says; then a query head goes to q at element q_at + head HS,
 * a key or value head to k or v at element kv_at (its KV head's slab, at the row's position). The
 * head goes through shared memory once: RoPE pairs element i with i + HS/2, which another thread
 * holds. */
template <tt_dtype D>
__device__ static void qkv_head(void *q, size_t q_at, void *k, void *v, size_t kv_at, const float *qkv,
                                int pos, const cuda_attn &a)
{
    __shared__ float hv[CUDA_MAX_HS];
    __shared__ float red[32];
    const int hd = blockIdx.x, HS = a.HS, half = HS / 2;
    const int kind = hd < a.NH ? 0 : hd < a.NH + a.NKV ? 1 : 2;   /* query, key, value */
    const size_t col = (size_t)hd * HS;
    for (int i = threadIdx.x; i < HS; i += blockDim.x)
        hv[i] = a.bias ? qkv[col + i] + a.bias[col + i] : qkv[col + i];
    const float *norm = kind == 0 ? a.q_norm : kind == 1 ? a.k_norm : NULL;
    if (norm) {                                     /* the same for the whole block */
        float ss = 0.0f;
        for (int i = threadIdx.x; i < HS; i += blockDim.x)
            ss += hv[i] * hv[i];
        const float rstd = arch_rmsnorm_rstd(block_sum(ss, red) / (float)HS, a.eps);
        for (int i = threadIdx.x; i < HS; i += blockDim.x)
            hv[i] = arch_rmsnorm_apply(hv[i], rstd, norm[i]);
    }
    __syncthreads();
    void *dst = kind == 0 ? q : kind == 1 ? k : v;
    const size_t at = kind == 0 ? q_at + col : kv_at;
    if (kind == 2 || !a.rope_cos) {
        for (int i = threadIdx.x; i < HS; i += blockDim.x)
            tt_store_f32(dst, D, at + i, hv[i]);
        return;
    }
    const float *cs = a.rope_cos + (size_t)pos * half, *sn = a.rope_sin + (size_t)pos * half;
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        const float x0 = hv[i], x1 = hv[i + half];
        tt_store_f32(dst, D, at + i, arch_rope_first(x0, x1, cs[i], sn[i]));
        tt_store_f32(dst, D, at + i + half, arch_rope_second(x0, x1, cs[i], sn[i]));
    }
}

/* Element offset of KV head hd's row at pos within a layer's cache (hd a key or value head). */
__device__ static inline size_t kv_row(const cuda_attn &a, int hd, int pos)
{
    const int kh = hd < a.NH + a.NKV ? hd - a.NH : hd - a.NH - a.NKV;
    return ((size_t)kh * a.n_ctx + pos) * a.HS;
}

template <tt_dtype D>
__global__ void qkv_store_kernel(void *q, void *k, void *v, const float *qkv, const int *tokens, cuda_attn a)
{
    const int t = blockIdx.y, hd = blockIdx.x, pos = tokens[0] + t;
    const size_t QKV = (size_t)(a.NH + 2 * a.NKV) * a.HS;
    qkv_head<D>(q, (size_t)t * a.NH * a.HS, k, v, hd < a.NH ? 0 : kv_row(a, hd, pos), qkv + t * QKV, pos, a);
}

cudaError_t cuda_qkv_store(void *q, void *k, void *v, const float *qkv, const int *tokens, int T,
                           const cuda_attn *a, tt_dtype d, cudaStream_t stream)
{
    return TT_DISPATCH(d, qkv_store_kernel, dim3(a->NH + 2 * a->NKV, T), dim3(row_block(a->HS)), 0, stream, q,
                       k, v, qkv, tokens, *a);
}

template <tt_dtype D>
__global__ void qkv_store_rows_kernel(void *q, const float *qkv, const cuda_row *rows, size_t layer, cuda_attn a)
{
    const int b = blockIdx.y, hd = blockIdx.x, pos = rows[b].pos;
    const size_t QKV = (size_t)(a.NH + 2 * a.NKV) * a.HS;
    qkv_head<D>(q, (size_t)b * a.NH * a.HS, rows[b].k, rows[b].v, hd < a.NH ? 0 : layer + kv_row(a, hd, pos),
                qkv + b * QKV, pos, a);
}

cudaError_t cuda_qkv_store_rows(void *q, const float *qkv, const cuda_row *rows, size_t layer, int B,
                                const cuda_attn *a, tt_dtype d, cudaStream_t stream)
{
    return TT_DISPATCH(d, qkv_store_rows_kernel, dim3(a->NH + 2 * a->NKV, B), dim3(row_block(a->HS)), 0, stream,
                       q, qkv, rows, layer, *a);
}

cublasStatus_t cuda_attention_scores(cublasHandle_t h, float *scores, const void *q, const void *k,
                                     int pos, int T, int NH, int NKV, int HS, int n_ctx, tt_dtype d)
{
    /* Per query head h = kh G + g (G = NH / NKV), one batch over the KV heads kh for each g:
     * S_h^T (n_keys, T) = K_kh (n_keys, HS) q_h^T (HS, T).
     * K_kh is row-major (n_ctx, HS) = column-major (HS, n_ctx), ld HS, so it enters transposed;
     * q_h is rows of q (T, NH HS) from column h*HS = column-major (HS, T) with ld NH HS. */
    const int n_keys = pos + T, G = NH / NKV, Q = NH * HS;
    const size_t es = tt_dtype_size(d);
    const float scale = gpt2_attn_scale(HS), zero = 0.0f;
    for (int g = 0; g < G; g++) {
        cublasStatus_t st = cublasGemmStridedBatchedEx(
            h, CUBLAS_OP_T, CUBLAS_OP_N, n_keys, T, HS, &scale,
            k, tt_cuda_type(d), HS, (long long)n_ctx * HS,
            (const char *)q + (size_t)g * HS * es, tt_cuda_type(d), Q, (long long)G * HS, &zero,
            scores + (size_t)g * T * n_keys, CUDA_R_32F, n_keys, (long long)G * T * n_keys,
            NKV, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (st != CUBLAS_STATUS_SUCCESS)
            return st;
    }
    return CUBLAS_STATUS_SUCCESS;
}

template <tt_dtype D>
__global__ void softmax_causal_kernel(void *probs, const float *scores, int pos, int T)
{
    __shared__ float red[32];
    const int t = blockIdx.x, hd = blockIdx.y, n_keys = pos + T, valid = pos + t + 1;
    const size_t row = ((size_t)hd * T + t) * n_keys;
    const float *s = scores + row;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < valid; j += blockDim.x)
        mx = fmaxf(mx, s[j]);
    mx = block_max(mx, red);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < valid; j += blockDim.x)
        sum += expf(s[j] - mx);
    const float inv = 1.0f / block_sum(sum, red);
    for (int j = threadIdx.x; j < n_keys; j += blockDim.x)
        tt_store_f32(probs, D, row + j, j < valid ? expf(s[j] - mx) * inv : 0.0f);
}

cudaError_t cuda_softmax_causal(void *probs, const float *scores, int pos, int T, int NH, tt_dtype d,
                                cudaStream_t stream)
{
    return TT_DISPATCH(d, softmax_causal_kernel, dim3(T, NH), dim3(row_block(pos + T)), 0, stream, probs,
                       scores, pos, T);
}

cublasStatus_t cuda_attention_values(cublasHandle_t h, void *out, const void *probs, const void *v,
                                     int pos, int T, int NH, int NKV, int HS, int n_ctx, tt_dtype d)
{
    /* Per query head h = kh G + g, one batch over the KV heads kh for each g:
     * out_h^T (HS, T) = V_kh^T (HS, n_keys) P_h^T (n_keys, T).
     * V_kh row-major (n_ctx, HS) = column-major (HS, n_ctx) with ld HS; P_h row-major (T, n_keys) =
     * column-major (n_keys, T) with ld n_keys; out_h = columns h*HS of out (T, NH HS), ld NH HS. */
    const int n_keys = pos + T, G = NH / NKV, Q = NH * HS;
    const size_t es = tt_dtype_size(d);
    const float one = 1.0f, zero = 0.0f;
    for (int g = 0; g < G; g++) {
        cublasStatus_t st = cublasGemmStridedBatchedEx(
            h, CUBLAS_OP_N, CUBLAS_OP_N, HS, T, n_keys, &one,
            v, tt_cuda_type(d), HS, (long long)n_ctx * HS,
            (const char *)probs + (size_t)g * T * n_keys * es, tt_cuda_type(d), n_keys,
            (long long)G * T * n_keys, &zero,
            (char *)out + (size_t)g * HS * es, tt_cuda_type(d), Q, (long long)G * HS,
            NKV, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (st != CUBLAS_STATUS_SUCCESS)
            return st;
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* Decode attention, split over the keys (flash-decoding): block (h, s, b) handles keys
 * [s*CHUNK, (s+1)*CHUNK) of query head h (KV head h / (NH / NKV)) of row b's sequence and leaves its maximum score m, its sum of
 * exp(score - m) l and its unnormalized output acc in partial; a second kernel combines the chunks.
 * The grid covers the whole cache (n_ctx / CHUNK blocks per head and row) and blocks past their
 * row's position return at once, so the launch is the same at every position and the step can be
 * captured in a graph. A block reads nothing of the other rows: a row's result does not depend on
 * the batch. */
#define DECODE_THREADS 128             /* 4 warps */
#define DECODE_CHUNK 256               /* keys per block */
#define DECODE_KEY_LANES 8             /* lanes per key when scoring: 4 keys per warp at a time */

static int decode_chunks(int n_ctx) { return (n_ctx + DECODE_CHUNK - 1) / DECODE_CHUNK; }

template <tt_dtype D>
__global__ void __launch_bounds__(DECODE_THREADS)
attention_decode_kernel(float *partial, const void *q, const cuda_row *rows, size_t layer, int NH, int NKV,
                        int HS, int n_ctx)
{
    __shared__ float qs[CUDA_MAX_HS];
    __shared__ float att[DECODE_CHUNK];             /* scores, then exp(score - m) */
    __shared__ float part[DECODE_THREADS / 32][CUDA_MAX_HS];
    __shared__ float red[32];
    const int hd = blockIdx.x, chunk = blockIdx.y, row = blockIdx.z;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    const int n = rows[row].pos + 1;                /* keys 0 .. pos, the new one included */
    const int j0 = chunk * DECODE_CHUNK, j1 = j0 + DECODE_CHUNK < n ? j0 + DECODE_CHUNK : n;
    if (j0 >= n)                                    /* the whole block: no barrier is skipped */
        return;
    const void *k = rows[row].k, *v = rows[row].v;
    const size_t base = layer + (size_t)(hd / (NH / NKV)) * n_ctx * HS;
    for (int i = threadIdx.x; i < HS; i += blockDim.x)
        qs[i] = tt_load_f32(q, D, ((size_t)row * NH + hd) * HS + i);
    __syncthreads();

    /* Scores: each warp takes 4 keys at a time, 8 lanes per key; the loop bound is the same for
     * every lane of a warp, so all of them reach the shuffles. */
    const float scale = gpt2_attn_scale(HS);
    const int group = lane / DECODE_KEY_LANES, sub = lane % DECODE_KEY_LANES;
    for (int jb = j0 + warp * (32 / DECODE_KEY_LANES); jb < j1; jb += nwarps * (32 / DECODE_KEY_LANES)) {
        const int j = jb + group;
        float dot = 0.0f;
        if (j < j1)
            for (int i = sub; i < HS; i += DECODE_KEY_LANES)
                dot += qs[i] * tt_load_f32(k, D, base + (size_t)j * HS + i);
        for (int o = DECODE_KEY_LANES / 2; o > 0; o >>= 1)
            dot += __shfl_xor_sync(0xffffffffu, dot, o);
        if (j < j1 && sub == 0)
            att[j - j0] = dot * scale;
    }
    __syncthreads();
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < j1 - j0; j += blockDim.x)
        mx = fmaxf(mx, att[j]);
    mx = block_max(mx, red);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < j1 - j0; j += blockDim.x) {
        float e = expf(att[j] - mx);
        att[j] = e;
        sum += e;
    }
    sum = block_sum(sum, red);                      /* its first barrier publishes att */

    /* Values: one warp per key, each lane owning dimensions lane, lane + 32, ... (coalesced rows). */
    float acc[CUDA_MAX_HS / 32];
    for (int r = 0; r < CUDA_MAX_HS / 32; r++)
        acc[r] = 0.0f;
    for (int j = j0 + warp; j < j1; j += nwarps) {
        const float p = att[j - j0];
        for (int i = lane, r = 0; i < HS; i += 32, r++)
            acc[r] += p * tt_load_f32(v, D, base + (size_t)j * HS + i);
    }
    for (int i = lane, r = 0; i < HS; i += 32, r++)
        part[warp][i] = acc[r];
    __syncthreads();
    float *out = partial + (((size_t)row * NH + hd) * gridDim.y + chunk) * (HS + 2);   /* m, l, acc (HS) */
    for (int i = threadIdx.x; i < HS; i += blockDim.x) {
        float o = 0.0f;
        for (int w = 0; w < nwarps; w++)
            o += part[w][i];
        out[2 + i] = o;
    }
    if (threadIdx.x == 0) {
        out[0] = mx;
        out[1] = sum;
    }
}

template <tt_dtype D>
__global__ void attention_combine_kernel(void *out, const float *partial, const cuda_row *rows, int NH, int HS,
                                         int n_chunks)
{
    const int hd = blockIdx.x, row = blockIdx.y;
    const int used = (rows[row].pos + 1 + DECODE_CHUNK - 1) / DECODE_CHUNK;   /* chunks that ran */
    const float *p = partial + ((size_t)row * NH + hd) * n_chunks * (HS + 2);
    float mx = -INFINITY;
    for (int c = 0; c < used; c++)
        mx = fmaxf(mx, p[(size_t)c * (HS + 2)]);
    float l = 0.0f;
    for (int c = 0; c < used; c++)
        l += expf(p[(size_t)c * (HS + 2)] - mx) * p[(size_t)c * (HS + 2) + 1];
    const float inv = 1.0f / l;
    for (int i = threadIdx.x; i < HS; i += blockDim.x) {
        float o = 0.0f;
        for (int c = 0; c < used; c++)
            o += expf(p[(size_t)c * (HS + 2)] - mx) * p[(size_t)c * (HS + 2) + 2 + i];
        tt_store_f32(out, D, ((size_t)row * NH + hd) * HS + i, o * inv);
    }
}

size_t cuda_attention_decode_partial(int NH, int HS, int n_ctx)
{
    return (size_t)NH * (size_t)decode_chunks(n_ctx) * (size_t)(HS + 2);
}

cudaError_t cuda_attention_decode(void *out, float *partial, const void *q, const cuda_row *rows,
                                  size_t layer, int B, int NH, int NKV, int HS, int n_ctx, tt_dtype d,
                                  cudaStream_t stream)
{
    const int S = decode_chunks(n_ctx);
    cudaError_t e = TT_DISPATCH(d, attention_decode_kernel, dim3(NH, S, B), dim3(DECODE_THREADS), 0, stream,
                                partial, q, rows, layer, NH, NKV, HS, n_ctx);
    if (e != cudaSuccess)
        return e;
    return TT_DISPATCH(d, attention_combine_kernel, dim3(NH, B), dim3(row_block(HS)), 0, stream, out,
                       (const float *)partial, rows, NH, HS, S);
}

/* =============================================================================================
 * Attention capture: block (h, r) scores keys 0 .. pos0 + r into its row of out, then normalizes. */

template <tt_dtype D>
__global__ void attention_probs_kernel(float *out, int ld, const void *q, int q_row0, int pos0, const void *k,
                                       size_t k_off, const cuda_row *rows, int l, int NH, int NKV, int HS, int n_ctx)
{
    __shared__ float qs[CUDA_MAX_HS];
    __shared__ float red[32];
    const int hd = blockIdx.x;
    int r = blockIdx.y;
    if (rows) {                                     /* a decode step: row 0's position and cache; */
        pos0 = rows[0].pos;                         /* blockIdx.y is the layer, its q kept at row */
        k = rows[0].k;                              /* l of q and its keys at l k_off */
        l = r;
        q_row0 = l;
        k_off *= (size_t)l;
        r = 0;
    }
    const int n = pos0 + r + 1;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    const size_t base = k_off + (size_t)(hd / (NH / NKV)) * n_ctx * HS;
    for (int i = threadIdx.x; i < HS; i += blockDim.x)
        qs[i] = tt_load_f32(q, D, ((size_t)(q_row0 + r) * NH + hd) * HS + i);
    __syncthreads();
    /* a decode step's rows are packed at their length: layer l, head hd at (l NH + hd) n */
    float *w = rows ? out + ((size_t)l * NH + hd) * n : out + ((size_t)r * NH + hd) * ld;
    const float scale = gpt2_attn_scale(HS);
    /* scores as the decode kernel takes them: 8 lanes per key, 4 keys per warp at a time
     * (coalesced key rows); the loop bound is the same for every lane of a warp */
    const int group = lane / DECODE_KEY_LANES, sub = lane % DECODE_KEY_LANES;
    for (int jb = warp * (32 / DECODE_KEY_LANES); jb < n; jb += nwarps * (32 / DECODE_KEY_LANES)) {
        const int j = jb + group;
        float dot = 0.0f;
        if (j < n)
            for (int i = sub; i < HS; i += DECODE_KEY_LANES)
                dot += qs[i] * tt_load_f32(k, D, base + (size_t)j * HS + i);
        for (int o = DECODE_KEY_LANES / 2; o > 0; o >>= 1)
            dot += __shfl_xor_sync(0xffffffffu, dot, o);
        if (j < n && sub == 0)
            w[j] = dot * scale;
    }
    __syncthreads();                                /* the scores, written by other threads */
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < n; j += blockDim.x)
        mx = fmaxf(mx, w[j]);
    mx = block_max(mx, red);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        w[j] = expf(w[j] - mx);
        sum += w[j];
    }
    sum = block_sum(sum, red);
    const float inv = 1.0f / sum;
    for (int j = threadIdx.x; j < (rows ? n : ld); j += blockDim.x)
        w[j] = j < n ? w[j] * inv : 0.0f;
}

cudaError_t cuda_attention_probs(float *out, int ld, const void *q, int q_row0, int R, int pos0, const void *k,
                                 int NH, int NKV, int HS, int n_ctx, tt_dtype d, cudaStream_t stream)
{
    return TT_DISPATCH(d, attention_probs_kernel, dim3(NH, R), dim3(256), 0, stream, out, ld, q, q_row0, pos0,
                       k, (size_t)0, (const cuda_row *)NULL, 0, NH, NKV, HS, n_ctx);
}

cudaError_t cuda_attention_probs_row(float *out, int L, const void *q, const cuda_row *rows, size_t layer_elems,
                                     int NH, int NKV, int HS, int n_ctx, tt_dtype d, cudaStream_t stream)
{
    return TT_DISPATCH(d, attention_probs_kernel, dim3(NH, L), dim3(256), 0, stream, out, 0, q, 0, 0,
                       (const void *)NULL, layer_elems, rows, 0, NH, NKV, HS, n_ctx);
}

/* =============================================================================================
 * Sequence copy */

/* Element type of a cache element: its bytes are copied, never converted. */
template <typename E>
__global__ void kv_copy_kernel(E *dk, E *dv, const E *sk, const E *sv, size_t from, size_t len,
                               size_t n_ctx, size_t HS, size_t N)
{
    /* Element i: slab (layer, head) i / (len HS), then the position's row inside it. */
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < N; i += (size_t)gridDim.x * blockDim.x) {
        const size_t slab = i / (len * HS), r = i % (len * HS);
        const size_t at = slab * n_ctx * HS + from * HS + r;
        dk[at] = sk[at];
        dv[at] = sv[at];
    }
}

cudaError_t cuda_kv_copy(void *dst_k, void *dst_v, const void *src_k, const void *src_v, int from,
                         int n, int L, int NKV, int n_ctx, int HS, tt_dtype d, cudaStream_t stream)
{
    if (n <= from)
        return cudaSuccess;
    const size_t len = (size_t)(n - from), N = (size_t)L * NKV * len * HS;
    if (tt_dtype_size(d) == 4)
        return TT_LAUNCH(kv_copy_kernel<uint32_t>, dim3(flat_grid(N)), dim3(256), 0, stream, (uint32_t *)dst_k,
                         (uint32_t *)dst_v, (const uint32_t *)src_k, (const uint32_t *)src_v, (size_t)from, len,
                         (size_t)n_ctx, (size_t)HS, N);
    return TT_LAUNCH(kv_copy_kernel<uint16_t>, dim3(flat_grid(N)), dim3(256), 0, stream, (uint16_t *)dst_k,
                     (uint16_t *)dst_v, (const uint16_t *)src_k, (const uint16_t *)src_v, (size_t)from, len,
                     (size_t)n_ctx, (size_t)HS, N);
}

/* =============================================================================================
 * Probe */

__global__ void probe_kernel(int *buf)
{
    __shared__ float red[32];
    float s = block_sum(1.0f, red);
    if (threadIdx.x == 0)
        buf[0] = (int)s;
}

cudaError_t cuda_kernels_probe(int *buf, cudaStream_t stream)
{
    return TT_LAUNCH(probe_kernel, dim3(1), dim3(64), 0, stream, buf);
}
