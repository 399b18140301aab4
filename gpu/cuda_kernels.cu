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

/* Threads for one block normalizing a row of C: at most 4 elements each (up to C = 4096), so the
 * chain of dependent loads per pass is short when a decode step's one row is one block. */
static unsigned int norm_block(int C)
{
    unsigned int b = (unsigned int)((C + 3) / 4 + 31) / 32 * 32;
    return b < 32 ? 32 : b > 1024 ? 1024 : b;
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
    return TT_DISPATCH(d, layernorm_kernel, dim3(T), dim3(norm_block(C)), 0, stream, out, x, bias, w, b,
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
    return TT_DISPATCH(d, rmsnorm_kernel, dim3(T), dim3(norm_block(C)), 0, stream, out, x, bias, w, C, eps);
}

/* =============================================================================================
 * Matmuls: W^T (N, K) row-major in d (see cuda_kernels.h) */

#define GEMV_THREADS 256               /* 8 warps: 8 output columns per block */
/* 16-byte loads of W each lane has in flight: 8 for one row; 4 for several, whose loads of x add
 * to them (and whose registers would otherwise spill). */
#define GEMV_UNROLL(TT) ((TT) == 1 ? 8 : 4)

/* fp16 -> fp32 exactly: one conversion instruction on the device (the bit-exact twin of
 * tt_f16_to_f32, which the host and the emulation use). */
__device__ static inline float gemv_f16(uint32_t h)
{
#ifdef __CUDA_ARCH__
    float f;
    unsigned short u = (unsigned short)h;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(u));
    return f;
#else
    return tt_f16_to_f32((uint16_t)h);
#endif
}

/* The E elements of d in 16 bytes, as floats, in memory order. */
template <tt_dtype D> struct gemv_vec {
    static constexpr int E = D == TT_F32 ? 4 : 8;
    __device__ static inline void unpack(const uint4 &v, float *f)
    {
        const uint32_t u[4] = {v.x, v.y, v.z, v.w};
        for (int i = 0; i < 4; i++) {
            if (D == TT_F32) {
                f[i] = tt_bits_f32(u[i]);
            } else if (D == TT_BF16) {
                f[2 * i] = tt_bits_f32(u[i] << 16);
                f[2 * i + 1] = tt_bits_f32(u[i] & 0xffff0000u);
            } else {
                f[2 * i] = gemv_f16(u[i] & 0xffffu);
                f[2 * i + 1] = gemv_f16(u[i] >> 16);
            }
        }
    }
};

/* What a gemv does with its sums (one per row t and output column n). */
enum {
    GEMV_STORE,                    /* out (fp32) = sum */
    GEMV_ADD,                      /* out (fp32) += sum */
    GEMV_GELU_TANH,                /* out (d) = gelu_tanh(sum + bias[n]) */
    GEMV_GELU_ERF,                 /* out (d) = gelu_erf(sum + bias[n]) */
    GEMV_SWIGLU,                   /* out (d) = silu(sum) * (the sum of W's row N + n) */
};

/* The sums of TT rows of x with W's row n, in every lane: lane l sums the 16-byte pieces l, l + 32,
 * ... of the row (or, when vec is false, the elements l, l + 32, ...) in k order, then the warp adds
 * its lanes' sums. The same steps for every TT, so a row's sum does not depend on how many rows run
 * with it. */
template <tt_dtype D, int TT>
__device__ static void gemv_dot(float *acc, const void *x, int ldx, const void *w, int K, size_t n, bool vec)
{
    const int lane = threadIdx.x % 32;
    for (int t = 0; t < TT; t++)
        acc[t] = 0.0f;
    if (vec) {
        typedef gemv_vec<D> V;
        const int nv = K / V::E;                    /* 16-byte pieces per row */
        const uint4 *wr = (const uint4 *)w + n * (size_t)nv, *xv = (const uint4 *)x;
        const int xs = ldx / V::E;
        constexpr int U = GEMV_UNROLL(TT);
        for (int c0 = lane; c0 < nv; c0 += 32 * U) {
            /* All loads first: U of W in flight, and for one row its U pieces of x too (several
             * rows load x as they go, which their registers allow). */
            uint4 wq[U], xq[TT == 1 ? U : 1];
            TT_UNROLL
            for (int u = 0; u < U; u++)
                if (c0 + 32 * u < nv) {
                    wq[u] = wr[c0 + 32 * u];
                    if (TT == 1)
                        xq[u] = xv[c0 + 32 * u];
                }
            TT_UNROLL
            for (int u = 0; u < U; u++) {
                if (c0 + 32 * u >= nv)
                    break;
                float wf[V::E];
                V::unpack(wq[u], wf);
                TT_UNROLL
                for (int t = 0; t < TT; t++) {
                    float xf[V::E];
                    V::unpack(TT == 1 ? xq[u] : xv[(size_t)t * xs + c0 + 32 * u], xf);
                    TT_UNROLL
                    for (int e = 0; e < V::E; e++)
                        acc[t] = fmaf(wf[e], xf[e], acc[t]);
                }
            }
        }
    } else {
        for (int k = lane; k < K; k += 32) {
            const float wv = tt_load_f32(w, D, n * (size_t)K + k);
            for (int t = 0; t < TT; t++)
                acc[t] = fmaf(wv, tt_load_f32(x, D, (size_t)t * ldx + k), acc[t]);
        }
    }
    for (int t = 0; t < TT; t++)
        acc[t] = warp_sum(acc[t]);
}

/* Output column n of TT rows, written as mode says. The activations use cuda_gelu's and
 * cuda_swiglu's formulas on the same sums, so a fused step gives their bits. */
template <tt_dtype D, int TT>
__device__ static void gemv_column(void *out, int ldo, const void *x, int ldx, const void *w, const float *bias,
                                   int K, int N, int n, int mode, bool vec)
{
    float acc[TT], up[TT];
    gemv_dot<D, TT>(acc, x, ldx, w, K, (size_t)n, vec);
    if (mode == GEMV_SWIGLU)
        gemv_dot<D, TT>(up, x, ldx, w, K, (size_t)N + n, vec);
    if (threadIdx.x % 32 != 0)
        return;
    const float b = bias ? bias[n] : 0.0f;
    for (int t = 0; t < TT; t++) {
        const size_t at = (size_t)t * ldo + n;
        switch (mode) {
        case GEMV_STORE: ((float *)out)[at] = acc[t]; break;
        case GEMV_ADD: ((float *)out)[at] += acc[t]; break;
        case GEMV_GELU_TANH: tt_store_f32(out, D, at, gpt2_gelu_tanh(acc[t] + b)); break;
        case GEMV_GELU_ERF: tt_store_f32(out, D, at, gpt2_gelu_erf(acc[t] + b)); break;
        default: tt_store_f32(out, D, at, arch_silu(acc[t]) * up[t]); break;
        }
    }
}

/* One row (a decode step of one sequence), in a kernel of its own: the registers the T-row cases
 * need would otherwise lower how many warps an SM holds. */
template <tt_dtype D>
__global__ void __launch_bounds__(GEMV_THREADS)
gemv1_kernel(void *out, int ldo, const void *x, int ldx, const void *w, const float *bias, int K, int N, int mode,
             int vec)
{
    const int n = blockIdx.x * (GEMV_THREADS / 32) + threadIdx.x / 32;
    if (n >= N)                                     /* the whole warp: no shuffle is left alone */
        return;
    gemv_column<D, 1>(out, ldo, x, ldx, w, bias, K, N, n, mode, vec != 0);
}

template <tt_dtype D>
__global__ void __launch_bounds__(GEMV_THREADS)
gemv_kernel(void *out, int ldo, const void *x, int ldx, const void *w, const float *bias, int T, int K, int N,
            int mode, int vec)
{
    const int n = blockIdx.x * (GEMV_THREADS / 32) + threadIdx.x / 32;
    if (n >= N)
        return;
    const bool v = vec != 0;
    switch (T) {                                    /* the same for the whole grid */
    case 2: gemv_column<D, 2>(out, ldo, x, ldx, w, bias, K, N, n, mode, v); break;
    case 3: gemv_column<D, 3>(out, ldo, x, ldx, w, bias, K, N, n, mode, v); break;
    case 4: gemv_column<D, 4>(out, ldo, x, ldx, w, bias, K, N, n, mode, v); break;
    case 5: gemv_column<D, 5>(out, ldo, x, ldx, w, bias, K, N, n, mode, v); break;
    case 6: gemv_column<D, 6>(out, ldo, x, ldx, w, bias, K, N, n, mode, v); break;
    case 7: gemv_column<D, 7>(out, ldo, x, ldx, w, bias, K, N, n, mode, v); break;
    default: gemv_column<D, CUDA_GEMV_MAX_T>(out, ldo, x, ldx, w, bias, K, N, n, mode, v); break;
    }
}

/* N output columns of T rows of x (T, ldx) times W held (N, K) (2N rows for GEMV_SWIGLU). */
static cudaError_t gemv(void *out, int ldo, const void *x, int ldx, const void *w, const float *bias, int T,
                        int K, int N, int mode, tt_dtype d, cudaStream_t stream)
{
    if (T < 1 || T > CUDA_GEMV_MAX_T)
        return cudaErrorInvalidValue;
    /* 16-byte loads need every row of W and of x to start on a 16-byte boundary. */
    const size_t E = 16 / tt_dtype_size(d);
    const int vec = K % E == 0 && ldx % E == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)w % 16 == 0;
    const dim3 grid(tt_ceil_div((size_t)N, GEMV_THREADS / 32));
    if (T == 1)
        return TT_DISPATCH(d, gemv1_kernel, grid, dim3(GEMV_THREADS), 0, stream, out, ldo, x, ldx, w, bias, K, N,
                           mode, vec);
    return TT_DISPATCH(d, gemv_kernel, grid, dim3(GEMV_THREADS), 0, stream, out, ldo, x, ldx, w, bias, T, K, N,
                       mode, vec);
}

cudaError_t cuda_gemv(float *out, int ldo, const void *x, int ldx, const void *w, int T, int K, int N,
                      bool accumulate, tt_dtype d, cudaStream_t stream)
{
    return gemv(out, ldo, x, ldx, w, NULL, T, K, N, accumulate ? GEMV_ADD : GEMV_STORE, d, stream);
}

cudaError_t cuda_gemv_ffn_up(void *out, const void *x, int ldx, const void *w, const float *bias, int T, int K,
                             int FF, arch_activation act, bool swiglu, tt_dtype d, cudaStream_t stream)
{
    const int mode = swiglu ? GEMV_SWIGLU : act == ARCH_ACT_GELU_ERF ? GEMV_GELU_ERF : GEMV_GELU_TANH;
    return gemv(out, FF, x, ldx, w, swiglu ? NULL : bias, T, K, FF, mode, d, stream);
}

cublasStatus_t cuda_matmul(cublasHandle_t h, float *out, int ldo, const void *x, int ldx, const void *w,
                           int T, int K, int N, bool accumulate, tt_dtype d)
{
    /* out^T (N, T) = W (N, K) x^T (K, T): W row-major (N, K) is column-major (K, N) with ld K, so it
     * enters transposed. */
    const float one = 1.0f, zero = 0.0f;
    return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, T, K, &one, w, tt_cuda_type(d), K,
                        x, tt_cuda_type(d), ldx, accumulate ? &one : &zero, out, CUDA_R_32F, ldo,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

/* 32 x 32 tiles through shared memory, so both the reads and the writes are coalesced; E is the
 * element's type (its bytes are moved, never converted). */
#define TRANSPOSE_TILE 32
#define TRANSPOSE_ROWS 8

template <typename E>
__global__ void transpose_kernel(E *dst, int ldd, const E *src, int R, int S)
{
    __shared__ E tile[TRANSPOSE_TILE][TRANSPOSE_TILE + 1];
    const int s0 = blockIdx.x * TRANSPOSE_TILE, r0 = blockIdx.y * TRANSPOSE_TILE;
    for (int i = threadIdx.y; i < TRANSPOSE_TILE; i += TRANSPOSE_ROWS) {
        const int r = r0 + i, s = s0 + threadIdx.x;
        if (r < R && s < S)
            tile[i][threadIdx.x] = src[(size_t)r * S + s];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < TRANSPOSE_TILE; i += TRANSPOSE_ROWS) {
        const int s = s0 + i, r = r0 + threadIdx.x;
        if (s < S && r < R)
            dst[(size_t)s * ldd + r] = tile[threadIdx.x][i];
    }
}

cudaError_t cuda_transpose(void *dst, int ldd, const void *src, int R, int S, tt_dtype d, cudaStream_t stream)
{
    const dim3 grid(tt_ceil_div((size_t)S, TRANSPOSE_TILE), tt_ceil_div((size_t)R, TRANSPOSE_TILE));
    const dim3 block(TRANSPOSE_TILE, TRANSPOSE_ROWS);
    if (tt_dtype_size(d) == 4)
        return TT_LAUNCH(transpose_kernel<uint32_t>, grid, block, 0, stream, (uint32_t *)dst, ldd,
                         (const uint32_t *)src, R, S);
    return TT_LAUNCH(transpose_kernel<uint16_t>, grid, block, 0, stream, (uint16_t *)dst, ldd,
                     (const uint16_t *)src, R, S);
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

/* Decode attention, split over the keys (flash-decoding). Block (h, s, b) is S * 4 warps' share
 * of query head h (KV head h / (NH / NKV)) of row b's sequence: warp w of block s takes the tiles
 * of DECODE_TILE keys numbered s * 4 + w, that + 4 S, ... A warp scores 4 keys at a time, 8 lanes
 * per key, each lane holding an eighth of the head (its q elements in registers); it loads the
 * keys' K and V pieces together, all of a tile's loads in flight before the first is used, and
 * keeps a running softmax per lane (max m, sum l, the unnormalized output of its elements): no
 * pass over the keys waits for another. The warp's 4 key groups are merged by shuffles, the
 * block's warps through shared memory, and the block leaves m, l and the output in partial (m
 * -inf, l 0 when it had no keys); a second kernel merges the S blocks. S depends on n_ctx only
 * (at most DECODE_SPLITS), so the launch is the same at every position and the step can be
 * captured in a graph, and about as many warps are busy at any length as there are tiles (at
 * 600 keys, 38 warps per head, each with one round trip to memory). A block reads nothing of the
 * other rows: a row's result does not depend on the batch. */
#define DECODE_THREADS 128             /* 4 warps */
#define DECODE_KEY_LANES 8             /* lanes per key: 4 keys per warp at a time */
#define DECODE_TILE 16                 /* keys a warp takes at a time */
#define DECODE_SPLITS 16               /* blocks per head and row at most */

static int decode_splits(int n_ctx)
{
    const int per_block = DECODE_THREADS / 32 * DECODE_TILE;
    const int s = (n_ctx + per_block - 1) / per_block;
    return s < 1 ? 1 : s > DECODE_SPLITS ? DECODE_SPLITS : s;
}

typedef struct {
    float part[DECODE_THREADS / 32][CUDA_MAX_HS];   /* each warp's output */
    float m[DECODE_THREADS / 32], l[DECODE_THREADS / 32];
} decode_shared;

/* Merges (m2, l2, acc2) into (m, l, acc), either side possibly empty (m -inf). */
template <int NE>
__device__ static inline void decode_merge(float &m, float &l, float *acc, float m2, float l2, const float *acc2)
{
    const float mn = fmaxf(m, m2);
    const float a = m == -INFINITY ? 0.0f : expf(m - mn), b = m2 == -INFINITY ? 0.0f : expf(m2 - mn);
    l = l * a + l2 * b;
    TT_UNROLL
    for (int e = 0; e < NE; e++)
        acc[e] = acc[e] * a + acc2[e] * b;
    m = mn;
}

/* One block of the decode attention kernel. HSC is the head size when it is one the models use
 * (64, 128: the loops over a head unroll), else 0 (HS at run time). When a lane's eighth of a
 * key is whole 16-byte pieces, lane `sub` holds elements sub NE .. sub NE + NE - 1 and loads them
 * so; otherwise it holds elements sub, sub + 8, ... */
template <tt_dtype D, int HSC>
__device__ static void attention_decode_block(decode_shared &sh, float *partial, const void *q, const cuda_row *rows,
                                              size_t layer, int NH, int NKV, int HS_run, int n_ctx)
{
    typedef gemv_vec<D> V;
    constexpr int NW = DECODE_THREADS / 32;
    constexpr int NE = (HSC > 0 ? HSC : CUDA_MAX_HS) / DECODE_KEY_LANES;    /* elements per lane */
    constexpr bool VEC = HSC > 0 && HSC % DECODE_KEY_LANES == 0 && NE % V::E == 0;
    constexpr int PIECES = VEC ? NE / V::E : 1;                            /* 16-byte loads per key */
    constexpr int U = VEC ? (PIECES == 1 ? 4 : PIECES == 2 ? 2 : 1) : 1;   /* keys per lane in flight */
    const int HS = HSC > 0 ? HSC : HS_run;
    const int hd = blockIdx.x, split = blockIdx.y, row = blockIdx.z, S = gridDim.y;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int group = lane / DECODE_KEY_LANES, sub = lane % DECODE_KEY_LANES;
    const int n = rows[row].pos + 1;                /* keys 0 .. pos, the new one included */
    const void *k = rows[row].k, *v = rows[row].v;
    const size_t base = layer + (size_t)(hd / (NH / NKV)) * n_ctx * HS;
    const size_t q0 = ((size_t)row * NH + hd) * HS;
    const float scale = gpt2_attn_scale(HS);
    /* element e of this lane */
#define DECODE_ELEM(e) (VEC ? sub * NE + (e) : sub + DECODE_KEY_LANES * (e))
    float qf[NE], acc[NE];
    TT_UNROLL
    for (int e = 0; e < NE; e++) {
        qf[e] = DECODE_ELEM(e) < HS ? tt_load_f32(q, D, q0 + DECODE_ELEM(e)) : 0.0f;
        acc[e] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    const int stride = S * NW * DECODE_TILE;
    for (int t0 = (split * NW + warp) * DECODE_TILE; t0 < n; t0 += stride)          /* the warp's */
        for (int jb = t0; jb < t0 + DECODE_TILE && jb < n; jb += 4 * U) {         /* bounds */
            float kf[U][NE], vf[U][NE];
            if constexpr (VEC) {
                uint4 kr[U][PIECES], vr[U][PIECES];
                TT_UNROLL
                for (int u = 0; u < U; u++) {
                    const int j = jb + 4 * u + group;
                    const size_t at = (base + (size_t)j * HS) / V::E + (size_t)sub * PIECES;
                    TT_UNROLL
                    for (int p = 0; p < PIECES; p++) {    /* zeros past the last key: p 0 x finite */
                        kr[u][p] = j < n ? ((const uint4 *)k)[at + p] : uint4{0, 0, 0, 0};
                        vr[u][p] = j < n ? ((const uint4 *)v)[at + p] : uint4{0, 0, 0, 0};
                    }
                }
                TT_UNROLL
                for (int u = 0; u < U; u++)
                    TT_UNROLL
                    for (int p = 0; p < PIECES; p++) {
                        V::unpack(kr[u][p], &kf[u][p * V::E]);
                        V::unpack(vr[u][p], &vf[u][p * V::E]);
                    }
            } else {
                const int j = jb + group;
                TT_UNROLL
                for (int e = 0; e < NE; e++) {
                    const bool in = j < n && DECODE_ELEM(e) < HS;
                    kf[0][e] = in ? tt_load_f32(k, D, base + (size_t)j * HS + DECODE_ELEM(e)) : 0.0f;
                    vf[0][e] = in ? tt_load_f32(v, D, base + (size_t)j * HS + DECODE_ELEM(e)) : 0.0f;
                }
            }
            float s[U], mb = m;
            TT_UNROLL
            for (int u = 0; u < U; u++) {
                float dot = 0.0f;
                TT_UNROLL
                for (int e = 0; e < NE; e++)
                    dot += qf[e] * kf[u][e];
                for (int o = DECODE_KEY_LANES / 2; o > 0; o >>= 1)   /* every lane: the bound is the warp's */
                    dot += __shfl_xor_sync(0xffffffffu, dot, o);
                s[u] = jb + 4 * u + group < n ? dot * scale : -INFINITY;
                mb = fmaxf(mb, s[u]);
            }
            if (mb == -INFINITY)                    /* no key yet for this group */
                continue;
            const float c = expf(m - mb);           /* 0 while m is -inf */
            l *= c;
            TT_UNROLL
            for (int e = 0; e < NE; e++)
                acc[e] *= c;
            TT_UNROLL
            for (int u = 0; u < U; u++) {
                const float p = s[u] == -INFINITY ? 0.0f : expf(s[u] - mb);
                l += p;
                TT_UNROLL
                for (int e = 0; e < NE; e++)
                    acc[e] = fmaf(p, vf[u][e], acc[e]);
            }
            m = mb;
        }
    /* The warp's 4 key groups into every lane, then the block's warps. */
    for (int o = DECODE_KEY_LANES; o < 32; o <<= 1) {
        float acc2[NE];
        TT_UNROLL
        for (int e = 0; e < NE; e++)
            acc2[e] = __shfl_xor_sync(0xffffffffu, acc[e], o);
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o), l2 = __shfl_xor_sync(0xffffffffu, l, o);
        decode_merge<NE>(m, l, acc, m2, l2, acc2);
    }
    if (group == 0) {
        TT_UNROLL
        for (int e = 0; e < NE; e++)
            if (DECODE_ELEM(e) < HS)
                sh.part[warp][DECODE_ELEM(e)] = acc[e];
        if (sub == 0) {
            sh.m[warp] = m;
            sh.l[warp] = l;
        }
    }
#undef DECODE_ELEM
    __syncthreads();
    float mx = -INFINITY, w[NW];
    for (int i = 0; i < NW; i++)
        mx = fmaxf(mx, sh.m[i]);
    for (int i = 0; i < NW; i++)
        w[i] = sh.m[i] == -INFINITY ? 0.0f : expf(sh.m[i] - mx);
    float *out = partial + (((size_t)row * NH + hd) * S + split) * (HS + 2);   /* m, l, acc (HS) */
    for (int i = threadIdx.x; i < HS; i += blockDim.x) {
        float o = 0.0f;
        for (int x = 0; x < NW; x++)
            o += w[x] * sh.part[x][i];
        out[2 + i] = o;
    }
    if (threadIdx.x == 0) {
        float sum = 0.0f;
        for (int x = 0; x < NW; x++)
            sum += w[x] * sh.l[x];
        out[0] = mx;
        out[1] = sum;
    }
}

/* A kernel per head size (64, 128, any other): each gets the registers its own loops need (the
 * general one holds CUDA_MAX_HS / 8 elements per lane), so the common sizes keep more blocks per SM. */
#define DECODE_KERNEL(name, HSC)                                                                          \
    template <tt_dtype D>                                                                                 \
    __global__ void __launch_bounds__(DECODE_THREADS)                                                     \
    name(float *partial, const void *q, const cuda_row *rows, size_t layer, int NH, int NKV, int HS, int n_ctx) \
    {                                                                                                     \
        __shared__ decode_shared sh;                                                                      \
        attention_decode_block<D, HSC>(sh, partial, q, rows, layer, NH, NKV, HS, n_ctx);                  \
    }
DECODE_KERNEL(attention_decode64_kernel, 64)
DECODE_KERNEL(attention_decode128_kernel, 128)
DECODE_KERNEL(attention_decode_kernel, 0)
#undef DECODE_KERNEL

/* Block (h, b): merges the S blocks' (m, l, output) of head h of row b; the first warp weighs
 * them once. */
template <tt_dtype D>
__global__ void attention_combine_kernel(void *out, const float *partial, int NH, int HS, int S)
{
    __shared__ float wt[DECODE_SPLITS];
    __shared__ float inv_l;
    const int hd = blockIdx.x, row = blockIdx.y;
    const float *p = partial + ((size_t)row * NH + hd) * S * (HS + 2);
    if (threadIdx.x < 32) {
        const int c = threadIdx.x;
        const float mc = c < S ? p[(size_t)c * (HS + 2)] : -INFINITY;
        float mx = mc;
        for (int o = 16; o > 0; o >>= 1)
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        const float w = mc == -INFINITY ? 0.0f : expf(mc - mx);
        const float l = warp_sum(c < S ? w * p[(size_t)c * (HS + 2) + 1] : 0.0f);
        if (c < S)
            wt[c] = w;
        if (c == 0)
            inv_l = 1.0f / l;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < HS; i += blockDim.x) {
        float o = 0.0f;
        for (int c = 0; c < S; c++)
            o += wt[c] * p[(size_t)c * (HS + 2) + 2 + i];
        tt_store_f32(out, D, ((size_t)row * NH + hd) * HS + i, o * inv_l);
    }
}

size_t cuda_attention_decode_partial(int NH, int HS, int n_ctx)
{
    return (size_t)NH * (size_t)decode_splits(n_ctx) * (size_t)(HS + 2);
}

cudaError_t cuda_attention_decode(void *out, float *partial, const void *q, const cuda_row *rows,
                                  size_t layer, int B, int NH, int NKV, int HS, int n_ctx, tt_dtype d,
                                  cudaStream_t stream)
{
    const dim3 grid(NH, decode_splits(n_ctx), B), block(DECODE_THREADS);
    const int S = (int)grid.y;
    cudaError_t e =
        HS == 64    ? TT_DISPATCH(d, attention_decode64_kernel, grid, block, 0, stream, partial, q, rows, layer, NH,
                                  NKV, HS, n_ctx)
        : HS == 128 ? TT_DISPATCH(d, attention_decode128_kernel, grid, block, 0, stream, partial, q, rows, layer,
                                  NH, NKV, HS, n_ctx)
                    : TT_DISPATCH(d, attention_decode_kernel, grid, block, 0, stream, partial, q, rows, layer, NH,
                                  NKV, HS, n_ctx);
    if (e != cudaSuccess)
        return e;
    return TT_DISPATCH(d, attention_combine_kernel, dim3(NH, B), dim3(row_block(HS)), 0, stream, out,
                       (const float *)partial, NH, HS, S);
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
