/* cuda_ops.cu: the per-op test harness of the CUDA backend (see cuda_ops.h): upload, one launcher
 * from gpu/cuda_kernels.cu, download. */
#include "gpu/cuda_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cuda_kernels.h"

struct cuda_ops {
    cudaStream_t stream;
    cublasHandle_t cublas;
    void *bufs[16];                /* device buffers of the op in flight */
    int n_bufs;
};

static tt_status ops_fail(cuda_ops *c, tt_error *err, const char *call, const char *what, int line)
{
    cudaGetLastError();
    return tt_fail(err, TT_ERR_DEVICE, "cuda_ops: %s failed at %s:%d: %s", call, __FILE__, line, what);
}

/* What went wrong, or NULL on success: a cudaError_t (OPS_CHECK), a cublasStatus_t (OPS_BLAS), or
 * a helper's own answer. */
static const char *ops_error(cudaError_t e) { return e == cudaSuccess ? NULL : cudaGetErrorString(e); }
static const char *ops_error(cublasStatus_t s)
{
    return s == CUBLAS_STATUS_SUCCESS ? NULL : cublasGetStatusString(s);
}
static const char *ops_error(const char *what) { return what; }   /* already an answer */

#define OPS_CHECK(call)                                                              \
    do {                                                                             \
        const char *what_ = ops_error(call);                                         \
        if (what_) {                                                                 \
            ops_release(c);                                                          \
            return ops_fail(c, err, #call, what_, __LINE__);                         \
        }                                                                            \
    } while (0)

#define OPS_BLAS(call) OPS_CHECK(call)

static void ops_release(cuda_ops *c)
{
    cudaStreamSynchronize(c->stream);
    for (int i = 0; i < c->n_bufs; i++)
        cudaFree(c->bufs[i]);
    c->n_bufs = 0;
}

extern "C" tt_status cuda_ops_create(cuda_ops **out, tt_error *err)
{
    *out = NULL;
    cuda_ops *c = (cuda_ops *)calloc(1, sizeof *c);
    if (!c)
        return tt_fail(err, TT_ERR_NOMEM, "cuda_ops: out of memory");
    if (cudaStreamCreate(&c->stream) != cudaSuccess || cublasCreate(&c->cublas) != CUBLAS_STATUS_SUCCESS ||
        cublasSetStream(c->cublas, c->stream) != CUBLAS_STATUS_SUCCESS) {
        cuda_ops_free(c);
        return ops_fail(NULL, err, "cuda_ops_create", "no usable device", __LINE__);
    }
    *out = c;
    return TT_OK;
}

extern "C" void cuda_ops_free(cuda_ops *c)
{
    if (!c)
        return;
    if (c->cublas)
        cublasDestroy(c->cublas);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    free(c);
}

/* A device buffer holding n values of src (NULL: uninitialized) in dtype d. */
static void *ops_upload(cuda_ops *c, const float *src, size_t n, tt_dtype d, cudaError_t *e)
{
    void *p = NULL;
    if (*e != cudaSuccess)
        return NULL;
    size_t bytes = (n ? n : 1) * tt_dtype_size(d);
    if ((*e = cudaMalloc(&p, bytes)) != cudaSuccess)
        return NULL;
    c->bufs[c->n_bufs++] = p;
    if (src) {
        char *h = (char *)malloc(bytes);
        for (size_t i = 0; i < n; i++)
            tt_store_f32(h, d, i, src[i]);
        *e = cudaMemcpy(p, h, n * tt_dtype_size(d), cudaMemcpyHostToDevice);
        free(h);
    }
    return p;
}

static cudaError_t ops_download(float *dst, const void *src, size_t n, tt_dtype d)
{
    char *h = (char *)malloc((n ? n : 1) * tt_dtype_size(d));
    cudaError_t e = cudaMemcpy(h, src, n * tt_dtype_size(d), cudaMemcpyDeviceToHost);
    if (e == cudaSuccess)
        for (size_t i = 0; i < n; i++)
            dst[i] = tt_load_f32(h, d, i);
    free(h);
    return e;
}

extern "C" tt_status cuda_ops_embed(cuda_ops *c, float *x, const int *ids, int T, int pos, const float *wte,
                                    int V, const float *wpe, int maxT, int C, tt_dtype d, tt_error *err)
{
    cudaError_t e = cudaSuccess;
    int *tok = (int *)malloc((size_t)(1 + T) * sizeof(int));
    tok[0] = pos;
    memcpy(tok + 1, ids, (size_t)T * sizeof(int));
    float *dx = (float *)ops_upload(c, NULL, (size_t)T * C, TT_F32, &e);
    int *dt = (int *)ops_upload(c, NULL, (size_t)(1 + T), TT_F32, &e);
    void *dwte = ops_upload(c, wte, (size_t)V * C, d, &e);
    void *dwpe = ops_upload(c, wpe, (size_t)maxT * C, d, &e);
    if (e == cudaSuccess)
        e = cudaMemcpy(dt, tok, (size_t)(1 + T) * sizeof(int), cudaMemcpyHostToDevice);
    free(tok);
    OPS_CHECK(e);
    OPS_CHECK(cuda_embed(dx, dt, dwte, dwpe, T, C, d, c->stream));
    OPS_CHECK(ops_download(x, dx, (size_t)T * C, TT_F32));
    ops_release(c);
    return TT_OK;
}

extern "C" tt_status cuda_ops_layernorm(cuda_ops *c, float *out, float *x, const float *bias, const float *w,
                                        const float *b, int T, int C, float eps, tt_dtype d, tt_error *err)
{
    cudaError_t e = cudaSuccess;
    const size_t n = (size_t)T * C;
    void *dout = ops_upload(c, NULL, n, d, &e);
    float *dx = (float *)ops_upload(c, x, n, TT_F32, &e);
    float *dbias = bias ? (float *)ops_upload(c, bias, (size_t)C, TT_F32, &e) : NULL;
    float *dw = (float *)ops_upload(c, w, (size_t)C, TT_F32, &e);
    float *db = (float *)ops_upload(c, b, (size_t)C, TT_F32, &e);
    OPS_CHECK(e);
    OPS_CHECK(cuda_layernorm(dout, dx, dbias, dw, db, T, C, eps, d, c->stream));
    OPS_CHECK(ops_download(out, dout, n, d));
    OPS_CHECK(ops_download(x, dx, n, TT_F32));
    ops_release(c);
    return TT_OK;
}

/* out = x W with W held (N, K) at dw, by the kernel the engine picks for T rows. */
static const char *ops_matmul(cuda_ops *c, float *dout, const void *dx, const void *dw, int T, int K, int N,
                              bool accumulate, tt_dtype d)
{
    if (cuda_matmul_uses_gemv(T))
        return ops_error(cuda_gemv(dout, N, dx, K, dw, T, K, N, accumulate, d, c->stream));
    const char *what = ops_error(cublasSetStream(c->cublas, c->stream));
    return what ? what : ops_error(cuda_matmul(c->cublas, dout, N, dx, K, dw, T, K, N, accumulate, d));
}

extern "C" tt_status cuda_ops_matmul(cuda_ops *c, float *out, const float *x, const float *w, int T, int K,
                                     int N, bool accumulate, tt_dtype d, tt_error *err)
{
    cudaError_t e = cudaSuccess;
    float *dout = (float *)ops_upload(c, accumulate ? out : NULL, (size_t)T * N, TT_F32, &e);
    void *dx = ops_upload(c, x, (size_t)T * K, d, &e);
    void *dw_in = ops_upload(c, w, (size_t)K * N, d, &e);
    void *dw = ops_upload(c, NULL, (size_t)K * N, d, &e);
    OPS_CHECK(e);
    /* As the engine's upload holds a Conv1D weight: (N, K). */
    OPS_CHECK(cuda_transpose(dw, K, dw_in, K, N, d, c->stream));
    OPS_CHECK(ops_matmul(c, dout, dx, dw, T, K, N, accumulate, d));
    OPS_CHECK(ops_download(out, dout, (size_t)T * N, TT_F32));
    ops_release(c);
    return TT_OK;
}

extern "C" tt_status cuda_ops_ffn_up(cuda_ops *c, float *out, const float *x, const float *w, const float *bias,
                                     int T, int K, int FF, arch_activation act, bool swiglu, tt_dtype d,
                                     tt_error *err)
{
    cudaError_t e = cudaSuccess;
    const int FFW = swiglu ? 2 * FF : FF;
    void *dout = ops_upload(c, NULL, (size_t)T * FF, d, &e);
    void *dx = ops_upload(c, x, (size_t)T * K, d, &e);
    void *dw_in = ops_upload(c, w, (size_t)K * FFW, d, &e);
    void *dw = ops_upload(c, NULL, (size_t)K * FFW, d, &e);
    float *db = bias && !swiglu ? (float *)ops_upload(c, bias, (size_t)FF, TT_F32, &e) : NULL;
    OPS_CHECK(e);
    OPS_CHECK(cuda_transpose(dw, K, dw_in, K, FFW, d, c->stream));
    OPS_CHECK(cuda_gemv_ffn_up(dout, dx, K, dw, db, T, K, FF, act, swiglu, d, c->stream));
    OPS_CHECK(ops_download(out, dout, (size_t)T * FF, d));
    ops_release(c);
    return TT_OK;
}

extern "C" tt_status cuda_ops_lm_head(cuda_ops *c, float *logits, const float *x, const float *lm_head, int T,
                                      int C, int V, tt_dtype d, tt_error *err)
{
    cudaError_t e = cudaSuccess;
    float *dl = (float *)ops_upload(c, NULL, (size_t)T * V, TT_F32, &e);
    void *dx = ops_upload(c, x, (size_t)T * C, d, &e);
    void *dw = ops_upload(c, lm_head, (size_t)V * C, d, &e);
    OPS_CHECK(e);
    OPS_CHECK(ops_matmul(c, dl, dx, dw, T, C, V, false, d));
    OPS_CHECK(ops_download(logits, dl, (size_t)T * V, TT_F32));
    ops_release(c);
    return TT_OK;
}

extern "C" tt_status cuda_ops_gelu(cuda_ops *c, float *out, const float *x, const float *bias, int T, int FF,
                                   arch_activation act, tt_dtype d, tt_error *err)
{
    cudaError_t e = cudaSuccess;
    const size_t n = (size_t)T * FF;
    void *dout = ops_upload(c, NULL, n, d, &e);
    float *dx = (float *)ops_upload(c, x, n, TT_F32, &e);
    float *db = (float *)ops_upload(c, bias, (size_t)FF, TT_F32, &e);
    OPS_CHECK(e);
    OPS_CHECK(cuda_gelu(dout, dx, db, T, FF, act, d, c->stream));
    OPS_CHECK(ops_download(out, dout, n, d));
    ops_release(c);
    return TT_OK;
}

extern "C" tt_status cuda_ops_softmax_causal(cuda_ops *c, float *probs, const float *scores, int pos, int T,
                                             int NH, tt_dtype d, tt_error *err)
{
    cudaError_t e = cudaSuccess;
    const size_t n = (size_t)NH * T * (size_t)(pos + T);
    void *dp = ops_upload(c, NULL, n, d, &e);
    float *ds = (float *)ops_upload(c, scores, n, TT_F32, &e);
    OPS_CHECK(e);
    OPS_CHECK(cuda_softmax_causal(dp, ds, pos, T, NH, d, c->stream));
    OPS_CHECK(ops_download(probs, dp, n, d));
    ops_release(c);
    return TT_OK;
}

extern "C" tt_status cuda_ops_attention(cuda_ops *c, float *out, float *k_cache, float *v_cache,
                                        const float *qkv, const float *bias, int pos, int T, int C, int NH,
                                        int n_ctx, bool decode, tt_dtype d, tt_error *err)
{
    if (decode && T != 1)
        return tt_fail(err, TT_ERR_ARG, "cuda_ops_attention: the decode kernel takes one token, not %d", T);
    cudaError_t e = cudaSuccess;
    const size_t cache_n = (size_t)n_ctx * C, n_keys = (size_t)(pos + T);
    int tok[2] = {pos, 0};
    int *dt = (int *)ops_upload(c, NULL, 2, TT_F32, &e);
    void *dk = ops_upload(c, k_cache, cache_n, d, &e);
    void *dv = ops_upload(c, v_cache, cache_n, d, &e);
    float *dqkv = (float *)ops_upload(c, qkv, (size_t)T * 3 * C, TT_F32, &e);
    float *db = (float *)ops_upload(c, bias, (size_t)3 * C, TT_F32, &e);
    void *dq = ops_upload(c, NULL, (size_t)T * C, d, &e);
    void *dout = ops_upload(c, NULL, (size_t)T * C, d, &e);
    float *dscores = decode ? NULL : (float *)ops_upload(c, NULL, (size_t)NH * T * n_keys, TT_F32, &e);
    void *dprobs = decode ? NULL : ops_upload(c, NULL, (size_t)NH * T * n_keys, d, &e);
    float *dpart = decode ? (float *)ops_upload(c, NULL, cuda_attention_decode_partial(NH, C / NH, n_ctx), TT_F32, &e)
                          : NULL;
    /* The decode step's one row: this position, this cache (as one layer of it). */
    cuda_row row = {pos, 0, dk, dv};
    cuda_row *drow = decode ? (cuda_row *)ops_upload(c, NULL, sizeof row / sizeof(float), TT_F32, &e) : NULL;
    if (e == cudaSuccess)
        e = cudaMemcpy(dt, tok, sizeof tok, cudaMemcpyHostToDevice);
    if (e == cudaSuccess && drow)
        e = cudaMemcpy(drow, &row, sizeof row, cudaMemcpyHostToDevice);
    OPS_CHECK(e);
    const int HS = C / NH;
    cuda_attn a = {NH, NH, HS, n_ctx, db, NULL, NULL, 0.0f, NULL, NULL};
    if (decode) {
        OPS_CHECK(cuda_qkv_store_rows(dq, dqkv, drow, 0, 1, &a, d, c->stream));
        OPS_CHECK(cuda_attention_decode(dout, dpart, dq, drow, 0, 1, NH, NH, HS, n_ctx, d, c->stream));
    } else {
        OPS_CHECK(cuda_qkv_store(dq, dk, dv, dqkv, dt, T, &a, d, c->stream));
        OPS_BLAS(cuda_attention_scores(c->cublas, dscores, dq, dk, pos, T, NH, NH, HS, n_ctx, d));
        OPS_CHECK(cuda_softmax_causal(dprobs, dscores, pos, T, NH, d, c->stream));
        OPS_BLAS(cuda_attention_values(c->cublas, dout, dprobs, dv, pos, T, NH, NH, HS, n_ctx, d));
    }
    OPS_CHECK(ops_download(out, dout, (size_t)T * C, d));
    OPS_CHECK(ops_download(k_cache, dk, cache_n, d));
    OPS_CHECK(ops_download(v_cache, dv, cache_n, d));
    ops_release(c);
    return TT_OK;
}
