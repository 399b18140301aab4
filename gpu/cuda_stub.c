/* cuda_stub.c: the GPU entry points of a build without CUDA (make CUDA=0): every call says so, so
 * callers need no #ifdef to fall back to the CPU. */
#include <stdio.h>

#include "gpu/cuda_engine.h"
#include "gpu/cuda_ops.h"
#include "gpu/cuda_selftest.h"

#define NO_CUDA "built without CUDA (rebuild with make CUDA=1)"

void cuda_engine_options_default(cuda_engine_options *co)
{
    co->use_graphs = true;
    co->device = 0;
    co->max_chunk = 0;
}

bool cuda_backend_available(char *why, size_t cap)
{
    if (why && cap)
        snprintf(why, cap, NO_CUDA);
    return false;
}

tt_status cuda_engine_create(const model *m, const engine_options *o, const cuda_engine_options *co,
                             engine **out, tt_error *err)
{
    *out = NULL;
    return tt_fail(err, TT_ERR_UNSUPPORTED, "cuda: " NO_CUDA);
}

tt_status cuda_device_info(cuda_device_info_t *info, tt_error *err)
{
    return tt_fail(err, TT_ERR_UNSUPPORTED, "cuda: " NO_CUDA);
}

bool cuda_engine_get_stats(const engine *e, cuda_engine_stats *out)
{
    return false;
}

size_t cuda_engine_decode_bytes(const engine *e, int pos)
{
    return 0;
}

void cuda_bench_format(const engine *e, double decode_tokens_per_s, int pos, char *buf, size_t cap)
{
    snprintf(buf, cap, "gpu: " NO_CUDA);
}

tt_status cuda_ops_create(cuda_ops **out, tt_error *err)
{
    *out = NULL;
    return tt_fail(err, TT_ERR_UNSUPPORTED, "cuda_ops: " NO_CUDA);
}

void cuda_ops_free(cuda_ops *c)
{
}

static tt_status no_cuda(tt_error *err)
{
    return tt_fail(err, TT_ERR_UNSUPPORTED, "cuda_ops: " NO_CUDA);
}

tt_status cuda_ops_embed(cuda_ops *c, float *x, const int *ids, int T, int pos, const float *wte, int V,
                         const float *wpe, int maxT, int C, tt_dtype d, tt_error *err)
{
    return no_cuda(err);
}

tt_status cuda_ops_layernorm(cuda_ops *c, float *out, float *x, const float *bias, const float *w,
                             const float *b, int T, int C, float eps, tt_dtype d, tt_error *err)
{
    return no_cuda(err);
}

tt_status cuda_ops_matmul(cuda_ops *c, float *out, const float *x, const float *w, int T, int K, int N,
                          bool accumulate, tt_dtype d, tt_error *err)
{
    return no_cuda(err);
}

tt_status cuda_ops_lm_head(cuda_ops *c, float *logits, const float *x, const float *lm_head, int T, int C,
                           int V, tt_dtype d, tt_error *err)
{
    return no_cuda(err);
}

tt_status cuda_ops_gelu(cuda_ops *c, float *out, const float *x, const float *bias, int T, int FF,
                        gpt2_activation act, tt_dtype d, tt_error *err)
{
    return no_cuda(err);
}

tt_status cuda_ops_softmax_causal(cuda_ops *c, float *probs, const float *scores, int pos, int T, int NH,
                                  tt_dtype d, tt_error *err)
{
    return no_cuda(err);
}

tt_status cuda_ops_attention(cuda_ops *c, float *out, float *k_cache, float *v_cache, const float *qkv,
                             const float *bias, int pos, int T, int C, int NH, int n_ctx, bool decode,
                             tt_dtype d, tt_error *err)
{
    return no_cuda(err);
}

int cuda_selftest_gemm(int transa, int transb, int m, int n, int k, float alpha,
                       const float *A, size_t a_len, int lda, long long strideA,
                       const float *B, size_t b_len, int ldb, long long strideB,
                       float beta, float *C, size_t c_len, int ldc, long long strideC, int batch,
                       tt_dtype ab, tt_dtype c_type)
{
    return -1;
}

int cuda_selftest_block_reduce(const float *in, int n, int blocks, int threads, float *sums, float *maxes)
{
    return -1;
}

int cuda_selftest_graph_replay(int k, int in1, int in2, int results[2])
{
    return -1;
}
