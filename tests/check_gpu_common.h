/* check_gpu_common.h: the GPU backend's tests that run wherever the backend runs: on the host
 * emulation (tests/check_gpu_emu.c, every build) and on a real device (tests/check_gpu_cuda.c when
 * one is present). Included by those two files only; every case is static.
 *
 *  - semantics: the column-major GEMM arguments, block reductions, graph replay
 *  - per op: each launcher of gpu/cuda_kernels.cu on random inputs against a float64 loop over the same
 *    held (dtype-rounded) inputs: |got - ref| <= tol + eps |ref|, per dtype
 *  - end to end: the GPU engine against the CPU engine on small random models, logits over prefill,
 *    decode, truncate and continue, greedy generations, graphs on and off, chunked prefill
 *  - sequences (gt_add_sequences): batched rows against the same rows run alone, copies, beam
 *    search against the CPU's, the samples contract, bad input.
 *  - the Llama family (gt_add_families): the committed Hugging Face fixtures (tests/fixtures/llama)
 *    and random llama/mistral/qwen2/qwen3 models against the CPU engine: sessions, greedy tokens
 *    and top probabilities, batches, speculative decoding.
 *
 * A file that includes this one defines GT_BATCH_BITWISE when its backend's batched rows must equal
 * rows run alone bit for bit (the emulation: every kernel is row-independent and its GEMM sums each
 * element in k order whatever the rows); on a device cuBLAS may choose another algorithm for B rows,
 * so they are held to the logits tolerance instead. */
#ifndef TOKENTOP_CHECK_GPU_COMMON_H
#define TOKENTOP_CHECK_GPU_COMMON_H

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/decode/beam.h"
#include "core/decode/speculative.h"
#include "core/engine/attention.h"
#include "core/engine/engine.h"
#include "core/engine/lens.h"
#include "core/arch/block_math.h"
#include "core/cpu/kernels.h"
#include "core/model/model.h"
#include "core/model/modelgen.h"
#include "core/base/rng.h"
#include "core/session/samples.h"
#include "core/tokenizer/tokenizer.h"
#include "core/base/util.h"
#include "gpu/cuda_engine.h"
#include "gpu/cuda_ops.h"
#include "gpu/cuda_selftest.h"
#include "tests/testutil.h"

static const tt_dtype gt_dtypes[3] = {TT_F32, TT_F16, TT_BF16};

/* ---------------------------------------------------------------------------------------------
 * Helpers */

/* n uniform values in [lo, hi), held in d. */
static float *gt_random(rng *r, size_t n, float lo, float hi, tt_dtype d)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++)
        p[i] = tt_held_f32(d, lo + (hi - lo) * (float)rng_uniform(r));
    return p;
}

/* Relative rounding of one value held in d (half an ulp): what an output stored in d may lose.
 * Bounds use two of them where a device's last-bit difference in fp32 (tanhf, expf, a sum order)
 * may tip the rounding the other way. */
static double gt_unit(tt_dtype d)
{
    return d == TT_F32 ? 6e-8 : d == TT_F16 ? 4.9e-4 : 3.9e-3;
}

/* The reference x (T, K) times w in double: ref[t, n] = init[t, n] (0 where init is NULL) plus the
 * sum over k of x[t, k] * w[k * wk + n * wn], k in order (wk, wn: w's strides). */
static void gt_ref_matmul(double *ref, const float *init, const float *x, const float *w, int T, int K,
                          int N, int wk, int wn)
{
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            double s = init ? init[t * N + n] : 0;
            for (int k = 0; k < K; k++)
                s += (double)x[t * K + k] * w[k * wk + n * wn];
            ref[t * N + n] = s;
        }
}

/* Asserts |got - ref| <= tol + eps |ref| everywhere, naming the worst element. */
static void gt_close(const char *what, tt_dtype d, const float *got, const double *ref, size_t n,
                     double tol, double eps)
{
    size_t worst = 0;
    double worst_excess = -1e300, worst_frac = 0, max_diff = 0;
    for (size_t i = 0; i < n; i++) {
        double lim = tol + eps * fabs(ref[i]);
        double diff = fabs(got[i] - ref[i]);
        double excess = isfinite(got[i]) ? diff - lim : 1e300;
        if (excess > worst_excess) {
            worst_excess = excess;
            worst = i;
        }
        if (lim > 0 && diff / lim > worst_frac)
            worst_frac = diff / lim;
        if (diff > max_diff)
            max_diff = diff;
    }
    if (getenv("TT_GPU_TEST_VERBOSE"))   /* how much of each bound is used, to keep them honest */
        printf("%-60s %-4s max |diff| %.3g, %.0f%% of the bound\n", what, tt_dtype_name(d), max_diff,
               100 * worst_frac);
    ck_assert_msg(worst_excess <= 0, "%s (%s): element %zu is %.9g, reference %.9g (allowed %.3g + "
                  "%.3g * |ref|)", what, tt_dtype_name(d), worst, (double)got[worst], ref[worst], tol,
                  eps);
}

static cuda_ops *gt_ops(void)
{
    cuda_ops *c;
    tt_error err = {0};
    ck_assert_msg(cuda_ops_create(&c, &err) == TT_OK, "%s", err.msg);
    return c;
}

/* ---------------------------------------------------------------------------------------------
 * Semantics the backend relies on */

/* Element (i, j) of op(X) for a column-major X with leading dimension ld. */
static double gt_op(const float *X, int trans, int i, int j, int ld)
{
    return trans ? X[(size_t)j + (size_t)i * ld] : X[(size_t)i + (size_t)j * ld];
}

START_TEST(gemm_follows_column_major_semantics)
{
    /* Random op / size / leading dimension / stride / batch / type combinations; the reference is
     * the BLAS definition written out. Padding between columns and matrices holds sentinels that
     * must come back untouched. */
    rng r;
    rng_seed(&r, 100 + (uint64_t)_i);
    for (int it = 0; it < 60; it++) {
        int ta = rng_next(&r) & 1, tb = rng_next(&r) & 1;
        int m = 1 + (int)(rng_next(&r) % 9), n = 1 + (int)(rng_next(&r) % 9), k = 1 + (int)(rng_next(&r) % 9);
        int batch = (rng_next(&r) & 1) ? 1 : 1 + (int)(rng_next(&r) % 3);
        tt_dtype ab = gt_dtypes[rng_next(&r) % 3];
        tt_dtype ct = (rng_next(&r) & 1) ? TT_F32 : ab;
        int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
        int lda = ar + (int)(rng_next(&r) % 3), ldb = br + (int)(rng_next(&r) % 3), ldc = m + (int)(rng_next(&r) % 3);
        long long sa = (long long)lda * ac + (long long)(rng_next(&r) % 4);
        long long sb = (long long)ldb * bc + (long long)(rng_next(&r) % 4);
        long long sc = (long long)ldc * n + (long long)(rng_next(&r) % 4);
        size_t alen = (size_t)(sa * (batch - 1) + (long long)lda * (ac - 1) + ar);
        size_t blen = (size_t)(sb * (batch - 1) + (long long)ldb * (bc - 1) + br);
        size_t clen = (size_t)(sc * (batch - 1) + (long long)ldc * (n - 1) + m);
        float alpha = (rng_next(&r) & 1) ? 1.0f : tt_held_f32(TT_BF16, 0.25f + (float)rng_uniform(&r));
        float beta = (rng_next(&r) & 1) ? 0.0f : tt_held_f32(TT_BF16, (float)rng_uniform(&r) - 0.5f);
        float *A = gt_random(&r, alen, -1, 1, ab), *B = gt_random(&r, blen, -1, 1, ab);
        float *C = gt_random(&r, clen, -1, 1, ct);
        double *ref = malloc(clen * sizeof(double));
        for (size_t i = 0; i < clen; i++)
            ref[i] = C[i];         /* padding stays as it was */
        for (int b = 0; b < batch; b++)
            for (int j = 0; j < n; j++)
                for (int i = 0; i < m; i++)
                    if (beta == 0)     /* then C is not read: NaN must not leak through */
                        C[(size_t)(b * sc) + (size_t)i + (size_t)j * ldc] = NAN;
        for (int b = 0; b < batch; b++)
            for (int j = 0; j < n; j++)
                for (int i = 0; i < m; i++) {
                    double acc = 0;
                    for (int l = 0; l < k; l++)
                        acc += gt_op(A + b * sa, ta, i, l, lda) * gt_op(B + b * sb, tb, l, j, ldb);
                    size_t ci = (size_t)(b * sc) + (size_t)i + (size_t)j * ldc;
                    ref[ci] = alpha * acc + (beta != 0 ? beta * (double)C[ci] : 0.0);
                }
        int rc = cuda_selftest_gemm(ta, tb, m, n, k, alpha, A, alen, lda, sa, B, blen, ldb, sb, beta, C,
                                    clen, ldc, sc, batch, ab, ct);
        ck_assert_msg(rc == 0, "gemm %c%c m=%d n=%d k=%d lda=%d ldb=%d ldc=%d batch=%d: status %d",
                      ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, lda, ldb, ldc, batch, rc);
        char what[160];
        snprintf(what, sizeof what, "gemm %c%c m=%d n=%d k=%d lda=%d ldb=%d ldc=%d strides %lld/%lld/%lld "
                 "batch=%d C=%s", ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, lda, ldb, ldc, sa, sb, sc, batch,
                 tt_dtype_name(ct));
        gt_close(what, ab, C, ref, clen, 1e-5, 2 * gt_unit(ct));
        free(A);
        free(B);
        free(C);
        free(ref);
    }
}
END_TEST

START_TEST(gemm_rejects_leading_dimension_smaller_than_rows)
{
#ifdef GT_QUIET
    GT_QUIET();                    /* the emulation's diagnostic is expected */
#endif
    float A[16] = {0}, B[16] = {0}, C[16] = {0};
    /* m = 4 rows of op(A) = A (N), but lda = 3: cuBLAS answers CUBLAS_STATUS_INVALID_VALUE (7).
     * A real cuBLAS also prints "On entry to GEMM_EX parameter number 9 (then 16) had an illegal
     * value" on stderr: expected here. */
    ck_assert_int_eq(cuda_selftest_gemm(0, 0, 4, 2, 2, 1.0f, A, 16, 3, 0, B, 16, 2, 0, 0.0f, C, 16, 4, 0, 1,
                                        TT_F32, TT_F32), 7);
    /* ldc < m likewise. */
    ck_assert_int_eq(cuda_selftest_gemm(0, 0, 4, 2, 2, 1.0f, A, 16, 4, 0, B, 16, 2, 0, 0.0f, C, 16, 3, 0, 1,
                                        TT_F32, TT_F32), 7);
}
END_TEST

START_TEST(block_reductions_sum_and_max)
{
    static const int threads[] = {32, 64, 96, 256, 1024};
    rng r;
    rng_seed(&r, 7);
    const int n = 1000, blocks = 3;
    float *in = gt_random(&r, (size_t)n * blocks, -1, 1, TT_F32);
    in[517] = 5.0f;                /* a known maximum in block 0 */
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        float sums[3], maxes[3];
        ck_assert_int_eq(cuda_selftest_block_reduce(in, n, blocks, threads[t], sums, maxes), 0);
        for (int b = 0; b < blocks; b++) {
            double s = 0, m = -INFINITY;
            for (int i = 0; i < n; i++) {
                s += in[b * n + i];
                m = fmax(m, in[b * n + i]);
            }
            ck_assert_msg(fabs(sums[b] - s) < 1e-4, "%d threads: block %d sum %g, expected %g", threads[t], b,
                          sums[b], s);
            ck_assert_msg(maxes[b] == (float)m, "%d threads: block %d max %g, expected %g", threads[t], b,
                          maxes[b], m);
        }
        ck_assert(maxes[0] == 5.0f);
    }
    free(in);
}
END_TEST

START_TEST(graph_replay_keeps_launch_arguments_and_reads_pinned_input)
{
    int res[2] = {0, 0};
    ck_assert_int_eq(cuda_selftest_graph_replay(7, 100, 200, res), 0);
    ck_assert_int_eq(res[0], 107);
    ck_assert_int_eq(res[1], 207);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Per op */

START_TEST(embed_adds_token_and_position_rows)
{
    tt_dtype d = gt_dtypes[_i];
    rng r;
    rng_seed(&r, 11);
    const int V = 50, maxT = 20, C = 70, T = 5, pos = 3;
    float *wte = gt_random(&r, (size_t)V * C, -2, 2, d), *wpe = gt_random(&r, (size_t)maxT * C, -2, 2, d);
    int ids[5] = {49, 0, 17, 17, 3};
    float x[5 * 70];
    double ref[5 * 70];
    for (int t = 0; t < T; t++)
        for (int i = 0; i < C; i++)
            ref[t * C + i] = (double)(wte[ids[t] * C + i] + wpe[(pos + t) * C + i]);   /* one fp32 add */
    cuda_ops *c = gt_ops();
    tt_error err = {0};
    ck_assert_msg(cuda_ops_embed(c, x, ids, T, pos, wte, V, wpe, maxT, C, d, &err) == TT_OK, "%s", err.msg);
    gt_close("embed", d, x, ref, (size_t)T * C, 0, 0);
    cuda_ops_free(c);
    free(wte);
    free(wpe);
}
END_TEST

START_TEST(layernorm_adds_pending_bias_and_normalizes)
{
    tt_dtype d = gt_dtypes[_i % 3];
    static const int Cs[] = {64, 200, 1600};
    const int C = Cs[_i / 3], T = 3;
    rng r;
    rng_seed(&r, 12 + (uint64_t)C);
    float *x = gt_random(&r, (size_t)T * C, -3, 5, TT_F32), *bias = gt_random(&r, (size_t)C, -1, 1, d);
    float *w = gt_random(&r, (size_t)C, 0.5f, 1.5f, d), *b = gt_random(&r, (size_t)C, -0.5f, 0.5f, d);
    float *out = malloc((size_t)T * C * sizeof(float));
    double *ref = malloc((size_t)T * C * sizeof(double)), *xref = malloc((size_t)T * C * sizeof(double));
    for (int t = 0; t < T; t++) {
        double mean = 0, var = 0;
        for (int i = 0; i < C; i++) {
            xref[t * C + i] = (double)(x[t * C + i] + bias[i]);        /* x += bias in fp32 */
            mean += xref[t * C + i];
        }
        mean /= C;
        for (int i = 0; i < C; i++)
            var += (xref[t * C + i] - mean) * (xref[t * C + i] - mean);
        double rstd = 1.0 / sqrt(var / C + 1e-5);
        for (int i = 0; i < C; i++)
            ref[t * C + i] = (xref[t * C + i] - mean) * rstd * w[i] + b[i];
    }
    cuda_ops *c = gt_ops();
    tt_error err = {0};
    ck_assert_msg(cuda_ops_layernorm(c, out, x, bias, w, b, T, C, 1e-5f, d, &err) == TT_OK, "%s", err.msg);
    gt_close("layernorm residual", TT_F32, x, xref, (size_t)T * C, 0, 0);
    gt_close("layernorm", d, out, ref, (size_t)T * C, 2e-5, 2e-5 + 2 * gt_unit(d));
    cuda_ops_free(c);
    free(x);
    free(bias);
    free(w);
    free(b);
    free(out);
    free(ref);
    free(xref);
}
END_TEST

START_TEST(gelu_adds_bias_then_activates)
{
    tt_dtype d = gt_dtypes[_i % 3];
    arch_activation act = _i < 3 ? ARCH_ACT_GELU_TANH : ARCH_ACT_GELU_ERF;
    rng r;
    rng_seed(&r, 13);
    const int T = 3, FF = 300;
    float *x = gt_random(&r, (size_t)T * FF, -6, 6, TT_F32), *bias = gt_random(&r, FF, -1, 1, d);
    float out[900];
    double ref[900];
    for (int t = 0; t < T; t++)
        for (int i = 0; i < FF; i++) {
            double y = (double)(x[t * FF + i] + bias[i]);
            ref[t * FF + i] = act == ARCH_ACT_GELU_ERF ? 0.5 * y * (1 + erf(y / sqrt(2.0)))
                              : 0.5 * y * (1 + tanh(0.7978845608028654 * (y + 0.044715 * y * y * y)));
        }
    cuda_ops *c = gt_ops();
    tt_error err = {0};
    ck_assert_msg(cuda_ops_gelu(c, out, x, bias, T, FF, act, d, &err) == TT_OK, "%s", err.msg);
    gt_close(act == ARCH_ACT_GELU_ERF ? "gelu erf" : "gelu tanh", d, out, ref, (size_t)T * FF, 2e-6,
             4e-6 + 2 * gt_unit(d));
    cuda_ops_free(c);
    free(x);
    free(bias);
}
END_TEST

START_TEST(matmul_is_x_times_conv1d_weight)
{
    /* Inputs are held in the dtype, products are exact in fp32 and accumulation is fp32: the same
     * bound holds for every dtype, and a transposed or mis-strided operand is far outside it. T = 1
     * and 7 run the gemv kernel (K = 96, 2600: 16-byte loads, one lane looping more than once over
     * its unrolled loads at 2600; K = 37: element by element), T = 12 cuBLAS;
     * the weight goes through the upload's transpose first. */
    tt_dtype d = gt_dtypes[_i % 3];
    bool acc = _i >= 3;
    rng r;
    rng_seed(&r, 14 + (uint64_t)_i);
    static const int shapes[][2] = {{1, 96}, {7, 96}, {1, 37}, {8, 37}, {12, 96}, {2, 2600}};   /* T, K */
    for (int si = 0; si < 6; si++) {
        const int T = shapes[si][0], K = shapes[si][1], N = 130;
        float *x = gt_random(&r, (size_t)T * K, -1, 1, d), *w = gt_random(&r, (size_t)K * N, -1, 1, d);
        float *out = gt_random(&r, (size_t)T * N, -4, 4, TT_F32);
        double *ref = malloc((size_t)T * N * sizeof(double));
        gt_ref_matmul(ref, acc ? out : NULL, x, w, T, K, N, N, 1);
        cuda_ops *c = gt_ops();
        tt_error err = {0};
        ck_assert_msg(cuda_ops_matmul(c, out, x, w, T, K, N, acc, d, &err) == TT_OK, "%s", err.msg);
        char what[64];
        snprintf(what, sizeof what, "matmul%s T %d K %d", acc ? " accumulate" : "", T, K);
        gt_close(what, d, out, ref, (size_t)T * N, 2e-5, 1e-5);
        cuda_ops_free(c);
        free(x);
        free(w);
        free(out);
        free(ref);
    }
}
END_TEST

START_TEST(fused_ffn_up_equals_matmul_then_activation)
{
    /* GELU (tanh, erf) with its bias: the bits of the matmul and cuda_gelu run one after the other.
     * SwiGLU over [gate | up]: silu(gate) * up of the matmul's sums, rounded to d. T = 1 and 5
     * (both gemv kernels), K = 64 (16-byte loads) and 30 (element by element). */
    tt_dtype d = gt_dtypes[_i % 3];
    const int variant = _i / 3;    /* 0 gelu tanh, 1 gelu erf, 2 swiglu */
    const bool swiglu = variant == 2;
    const arch_activation act = variant == 1 ? ARCH_ACT_GELU_ERF : ARCH_ACT_GELU_TANH;
    rng r;
    rng_seed(&r, 18 + (uint64_t)_i);
    static const int shapes[][2] = {{1, 64}, {5, 64}, {1, 30}, {5, 30}};   /* T, K */
    for (int si = 0; si < 4; si++) {
        const int T = shapes[si][0], K = shapes[si][1], FF = 75, FFW = swiglu ? 2 * FF : FF;
        float *x = gt_random(&r, (size_t)T * K, -1, 1, d), *w = gt_random(&r, (size_t)K * FFW, -1, 1, d);
        float *bias = gt_random(&r, (size_t)FF, -0.5f, 0.5f, d);
        float *fused = malloc((size_t)T * FF * sizeof(float)), *fc = malloc((size_t)T * FFW * sizeof(float));
        float *act_out = malloc((size_t)T * FF * sizeof(float));
        cuda_ops *c = gt_ops();
        tt_error err = {0};
        ck_assert_msg(cuda_ops_ffn_up(c, fused, x, w, bias, T, K, FF, act, swiglu, d, &err) == TT_OK, "%s", err.msg);
        ck_assert_msg(cuda_ops_matmul(c, fc, x, w, T, K, FFW, false, d, &err) == TT_OK, "%s", err.msg);
        if (!swiglu) {
            ck_assert_msg(cuda_ops_gelu(c, act_out, fc, bias, T, FF, act, d, &err) == TT_OK, "%s", err.msg);
            for (int i = 0; i < T * FF; i++)
                ck_assert_msg(memcmp(&fused[i], &act_out[i], sizeof(float)) == 0, "%s T %d K %d: element %d is "
                              "%.9g fused, %.9g unfused", variant ? "gelu erf" : "gelu tanh", T, K, i, fused[i],
                              act_out[i]);
        } else {
            double *ref = malloc((size_t)T * FF * sizeof(double));
            for (int t = 0; t < T; t++)
                for (int j = 0; j < FF; j++) {
                    const double g = fc[(size_t)t * FFW + j], u = fc[(size_t)t * FFW + FF + j];
                    ref[(size_t)t * FF + j] = g / (1.0 + exp(-g)) * u;
                }
            gt_close("fused matmul + swiglu", d, fused, ref, (size_t)T * FF, 1e-6, 4e-6 + 2 * gt_unit(d));
            free(ref);
        }
        cuda_ops_free(c);
        free(x);
        free(w);
        free(bias);
        free(fused);
        free(fc);
        free(act_out);
    }
}
END_TEST

START_TEST(gemv_rows_do_not_depend_on_the_other_rows)
{
    /* The decode step's batch contract on the device too: row t of T rows has the bits of the
     * same row run alone, for every T the gemv kernel takes. */
    tt_dtype d = gt_dtypes[_i];
    rng r;
    rng_seed(&r, 17);
    const int K = 200, N = 67, TM = 8;
    float *x = gt_random(&r, (size_t)TM * K, -1, 1, d), *w = gt_random(&r, (size_t)K * N, -1, 1, d);
    float *alone = malloc((size_t)TM * N * sizeof(float)), *all = malloc((size_t)TM * N * sizeof(float));
    cuda_ops *c = gt_ops();
    tt_error err = {0};
    for (int t = 0; t < TM; t++)
        ck_assert_msg(cuda_ops_matmul(c, alone + (size_t)t * N, x + (size_t)t * K, w, 1, K, N, false, d, &err)
                      == TT_OK, "%s", err.msg);
    for (int T = 2; T <= TM; T++) {
        ck_assert_msg(cuda_ops_matmul(c, all, x, w, T, K, N, false, d, &err) == TT_OK, "%s", err.msg);
        for (int i = 0; i < T * N; i++)
            ck_assert_msg(memcmp(&all[i], &alone[i], sizeof(float)) == 0, "T %d: row %d column %d is %.9g, "
                          "alone %.9g", T, i / N, i % N, all[i], alone[i]);
    }
    cuda_ops_free(c);
    free(x);
    free(w);
    free(alone);
    free(all);
}
END_TEST

START_TEST(lm_head_uses_the_embedding_transposed)
{
    tt_dtype d = gt_dtypes[_i];
    rng r;
    rng_seed(&r, 15);
    const int T = 3, C = 64, V = 257;
    float *x = gt_random(&r, (size_t)T * C, -1, 1, d), *wte = gt_random(&r, (size_t)V * C, -1, 1, d);
    float *logits = malloc((size_t)T * V * sizeof(float));
    double *ref = malloc((size_t)T * V * sizeof(double));
    gt_ref_matmul(ref, NULL, x, wte, T, C, V, 1, C);
    cuda_ops *c = gt_ops();
    tt_error err = {0};
    ck_assert_msg(cuda_ops_lm_head(c, logits, x, wte, T, C, V, d, &err) == TT_OK, "%s", err.msg);
    gt_close("lm_head", d, logits, ref, (size_t)T * V, 2e-5, 1e-5);
    cuda_ops_free(c);
    free(x);
    free(wte);
    free(logits);
    free(ref);
}
END_TEST

START_TEST(causal_softmax_masks_the_future)
{
    tt_dtype d = gt_dtypes[_i];
    rng r;
    rng_seed(&r, 16);
    const int NH = 3, T = 4, pos = 5, nk = pos + T;
    float *scores = gt_random(&r, (size_t)NH * T * nk, -8, 8, TT_F32);
    float probs[3 * 4 * 9];
    double ref[3 * 4 * 9];
    for (int h = 0; h < NH; h++)
        for (int t = 0; t < T; t++) {
            const float *s = scores + (h * T + t) * nk;
            double mx = -INFINITY, z = 0;
            for (int j = 0; j <= pos + t; j++)
                mx = fmax(mx, s[j]);
            for (int j = 0; j <= pos + t; j++)
                z += exp(s[j] - mx);
            for (int j = 0; j < nk; j++)
                ref[(h * T + t) * nk + j] = j <= pos + t ? exp(s[j] - mx) / z : 0.0;
        }
    cuda_ops *c = gt_ops();
    tt_error err = {0};
    ck_assert_msg(cuda_ops_softmax_causal(c, probs, scores, pos, T, NH, d, &err) == TT_OK, "%s", err.msg);
    gt_close("causal softmax", d, probs, ref, (size_t)NH * T * nk, 1e-7, 4e-6 + 2 * gt_unit(d));
    for (int i = 0; i < NH * T * nk; i++)
        if (ref[i] == 0)
            ck_assert_msg(probs[i] == 0.0f, "masked probability %d is %g", i, probs[i]);
    cuda_ops_free(c);
    free(scores);
}
END_TEST

START_TEST(ops_match_their_cpu_twins)
{
    /* The same random inputs through the CPU backend's kernels (core/cpu/kernels.h, reference set) and
     * the GPU launchers: LayerNorm, and a projection with its bias and GELU (the CPU fuses them in
     * the matmul epilogue, the GPU runs cuBLAS then cuda_gelu). The GPU also rounds its outputs to
     * the dtype (2u). */
    tt_dtype d = gt_dtypes[_i];
    rng r;
    rng_seed(&r, 18);
    const int T = 4, C = 768, K = 96, N = 200;
    float *x = gt_random(&r, (size_t)T * C, -2, 3, TT_F32), *bias = gt_random(&r, C, -1, 1, d);
    float *w = gt_random(&r, C, 0.5f, 1.5f, d), *b = gt_random(&r, C, -0.5f, 0.5f, d);
    float *xb = malloc((size_t)T * C * sizeof(float)), *cpu = malloc((size_t)T * C * sizeof(float));
    float *gpu = malloc((size_t)T * C * sizeof(float));
    double *ref = malloc((size_t)T * C * sizeof(double));
    for (int t = 0; t < T; t++)
        for (int i = 0; i < C; i++)
            xb[t * C + i] = x[t * C + i] + bias[i];
    kernels_layernorm(cpu, xb, w, b, C, 1e-5f, 0, T);
    cuda_ops *c = gt_ops();
    tt_error err = {0};
    ck_assert_msg(cuda_ops_layernorm(c, gpu, x, bias, w, b, T, C, 1e-5f, d, &err) == TT_OK, "%s", err.msg);
    for (int i = 0; i < T * C; i++)
        ref[i] = cpu[i];
    gt_close("layernorm vs kernels_layernorm", d, gpu, ref, (size_t)T * C, 2e-5, 2e-5 + 2 * gt_unit(d));

    float *xm = gt_random(&r, (size_t)T * K, -1, 1, d), *wm = gt_random(&r, (size_t)K * N, -1, 1, d);
    float *bm = gt_random(&r, N, -1, 1, d);
    float *fc = malloc((size_t)T * N * sizeof(float)), *act = malloc((size_t)T * N * sizeof(float));
    float *cpu_act = malloc((size_t)T * N * sizeof(float));
    packed_matrix pm;
    ck_assert_msg(packed_matrix_init(&pm, d, K, N, &err) == TT_OK, "%s", err.msg);
    tensor_ref src = {.data = wm, .dtype = TT_F32};
    packed_matrix_pack(&pm, src, false, 0, N);
    for (int e = 0; e < 2; e++) {
        matmul_args ma = {.out = cpu_act, .ldo = N, .x = xm, .ldx = K, .w = &pm, .bias = bm, .T = T,
                          .epilogue = e ? MM_GELU_ERF : MM_GELU_TANH};
        kernels_reference()->matmul(&ma, 0, pm.n_panels, NULL);
        ck_assert_msg(cuda_ops_matmul(c, fc, xm, wm, T, K, N, false, d, &err) == TT_OK, "%s", err.msg);
        ck_assert_msg(cuda_ops_gelu(c, act, fc, bm, T, N, e ? ARCH_ACT_GELU_ERF : ARCH_ACT_GELU_TANH, d, &err) == TT_OK,
                      "%s", err.msg);
        for (int i = 0; i < T * N; i++)
            ref[i] = cpu_act[i];
        gt_close(e ? "matmul + bias + gelu erf vs the CPU epilogue" : "matmul + bias + gelu tanh vs the CPU epilogue",
                 d, act, ref, (size_t)T * N, 2e-5, 2e-5 + 2 * gt_unit(d));
    }
    packed_matrix_free(&pm);
    cuda_ops_free(c);
    free(x);
    free(bias);
    free(w);
    free(b);
    free(xb);
    free(cpu);
    free(gpu);
    free(ref);
    free(xm);
    free(wm);
    free(bm);
    free(fc);
    free(act);
    free(cpu_act);
}
END_TEST

/* Attention over a cache that holds positions 0 .. pos-1 (random, held in d) and sentinels after:
 * out, the new cache rows and the untouched tail against a float64 reference. */
static void gt_attention_case(tt_dtype d, int C, int NH, int n_ctx, int pos, int T, bool decode)
{
    const int HS = C / NH;
    rng r;
    rng_seed(&r, 17 + (uint64_t)(pos * 31 + T));
    size_t cache_n = (size_t)NH * n_ctx * HS;
    float *k = gt_random(&r, cache_n, -1, 1, d), *v = gt_random(&r, cache_n, -1, 1, d);
    for (int h = 0; h < NH; h++)
        for (int p = pos; p < n_ctx; p++)
            for (int i = 0; i < HS; i++) {
                k[((size_t)h * n_ctx + p) * HS + i] = 1000.0f;    /* sentinel: must stay or be replaced */
                v[((size_t)h * n_ctx + p) * HS + i] = -1000.0f;
            }
    float *qkv = gt_random(&r, (size_t)T * 3 * C, -2, 2, TT_F32), *bias = gt_random(&r, (size_t)3 * C, -1, 1, d);
    /* The reference holds q, k, v as the backend does: qkv + bias rounded to d. */
    double *kr = malloc(cache_n * sizeof(double)), *vr = malloc(cache_n * sizeof(double));
    for (size_t i = 0; i < cache_n; i++) {
        kr[i] = k[i];
        vr[i] = v[i];
    }
    float *q = malloc((size_t)T * C * sizeof(float));
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            int h = c / HS, i = c % HS;
            q[t * C + c] = tt_held_f32(d, qkv[t * 3 * C + c] + bias[c]);
            kr[((size_t)h * n_ctx + pos + t) * HS + i] = tt_held_f32(d, qkv[t * 3 * C + C + c] + bias[C + c]);
            vr[((size_t)h * n_ctx + pos + t) * HS + i] = tt_held_f32(d, qkv[t * 3 * C + 2 * C + c] + bias[2 * C + c]);
        }
    double *ref = calloc((size_t)T * C, sizeof(double));
    double *p = malloc((size_t)(pos + T) * sizeof(double));
    for (int t = 0; t < T; t++)
        for (int h = 0; h < NH; h++) {
            double mx = -INFINITY, z = 0;
            for (int j = 0; j <= pos + t; j++) {
                double s = 0;
                for (int i = 0; i < HS; i++)
                    s += (double)q[t * C + h * HS + i] * kr[((size_t)h * n_ctx + j) * HS + i];
                p[j] = s / sqrt((double)HS);
                mx = fmax(mx, p[j]);
            }
            for (int j = 0; j <= pos + t; j++)
                z += (p[j] = exp(p[j] - mx));
            for (int j = 0; j <= pos + t; j++)
                for (int i = 0; i < HS; i++)
                    ref[t * C + h * HS + i] += p[j] / z * vr[((size_t)h * n_ctx + j) * HS + i];
        }
    float *out = malloc((size_t)T * C * sizeof(float));
    cuda_ops *c = gt_ops();
    tt_error err = {0};
    ck_assert_msg(cuda_ops_attention(c, out, k, v, qkv, bias, pos, T, C, NH, n_ctx, decode, d, &err) == TT_OK,
                  "%s", err.msg);
    char what[96];
    snprintf(what, sizeof what, "%s attention C=%d NH=%d pos=%d T=%d", decode ? "decode" : "prefill", C, NH,
             pos, T);
    /* The output is rounded to d once (half an ulp, u); the prefill path also rounds q k^T's
     * probabilities to d before the values GEMM, which moves each output by up to about u of its
     * largest contribution. */
    double u = gt_unit(d);
    if (decode)
        gt_close(what, d, out, ref, (size_t)T * C, 1e-6, 1e-6 + 2 * u);
    else
        gt_close(what, d, out, ref, (size_t)T * C, 1e-6 + 2 * u, 1e-6 + 2 * u);
    snprintf(what, sizeof what, "%s: key cache", decode ? "decode" : "prefill");
    gt_close(what, d, k, kr, cache_n, 0, 0);
    snprintf(what, sizeof what, "%s: value cache", decode ? "decode" : "prefill");
    gt_close(what, d, v, vr, cache_n, 0, 0);
    cuda_ops_free(c);
    free(k);
    free(v);
    free(kr);
    free(vr);
    free(qkv);
    free(bias);
    free(q);
    free(ref);
    free(p);
    free(out);
}

START_TEST(prefill_attention_matches_reference)
{
    tt_dtype d = gt_dtypes[_i];
    gt_attention_case(d, 96, 4, 40, 0, 6, false);       /* HS 24: lanes past the head size idle */
    gt_attention_case(d, 96, 4, 40, 13, 5, false);      /* continuing after cached positions */
    gt_attention_case(d, 64, 2, 12, 7, 5, false);       /* filling the cache to its last row */
}
END_TEST

/* HS 64 and 128 run the kernel's unrolled head loops (scores from 16-byte loads), HS 24 and 48
 * its general ones. */
START_TEST(decode_attention_matches_reference)
{
    tt_dtype d = gt_dtypes[_i];
    gt_attention_case(d, 96, 4, 40, 0, 1, true);        /* the first token attends to itself */
    gt_attention_case(d, 96, 4, 40, 17, 1, true);
    gt_attention_case(d, 128, 2, 300, 299, 1, true);    /* HS 64 (GPT-2's), the last cache row */
    gt_attention_case(d, 48, 1, 8, 5, 1, true);
    /* n_ctx 1024: 16 blocks of 4 warps per head, a warp's tiles of 16 keys 64 apart */
    gt_attention_case(d, 128, 2, 1024, 700, 1, true);   /* 44 tiles, 11 of 16 blocks */
    gt_attention_case(d, 128, 2, 1024, 15, 1, true);    /* exactly one full tile (16 keys) */
    gt_attention_case(d, 128, 2, 1024, 16, 1, true);    /* one key into the second */
    gt_attention_case(d, 128, 2, 1024, 63, 1, true);    /* exactly one block's 64 keys */
    gt_attention_case(d, 128, 2, 1024, 64, 1, true);    /* one key into the second block */
    gt_attention_case(d, 128, 2, 1024, 1023, 1, true);  /* every warp one full tile */
    gt_attention_case(d, 128, 2, 2048, 1500, 1, true);  /* warps take two tiles: the running softmax */
    gt_attention_case(d, 256, 2, 600, 520, 1, true);    /* HS 128 (Qwen3's) */
    gt_attention_case(d, 256, 2, 2048, 1100, 1, true);  /* HS 128, two tiles for some warps */
    gt_attention_case(d, 96, 2, 1024, 530, 1, true);    /* HS 48: the lanes' elements 8 apart */
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * End to end: the GPU engine against the CPU engine */

typedef struct {
    const char *name;
    tu_model_spec model;           /* its seed is not read: gt_load writes every case with 41 */
    const char *fixture;           /* a committed model (tests/fixtures/<fixture>) instead */
} gt_model_case;

/* Logits tolerance per held dtype (logits of magnitude about 3). fp32: both engines compute in
 * fp32, summing in other orders: measured differences reach 2e-6 on the emulation. A logit's
 * rounding follows the size of its row, not its own value (a logit near 0 is a sum of terms as
 * large as the others'), so gt_pair_forward scales the fp32 absolute bound by max|logit| / 3 for
 * larger rows: the Llama fixtures' rows reach 10, where against llama_ref.py's float64 logits the
 * CPU engine's own error reaches 1.15e-5 and the GPU's 8.4e-6 (llama-untied-rope3, positions
 * 22..28), and the two differ by up to 1.6e-5. fp16/bf16: the GPU also rounds the matmul inputs
 * and the cache to the dtype (the CPU keeps them fp32), a relative 2^-11 / 2^-8 per rounding, a
 * few per layer: measured 2.5e-3 / 1.9e-2. The bounds leave a factor of about 3
 * (TT_GPU_TEST_VERBOSE=1 prints how much of each bound a run uses). */
static void gt_logit_tol(tt_dtype d, double *tol, double *eps)
{
    *tol = d == TT_F32 ? 1e-5 : d == TT_F16 ? 4e-3 : 3e-2;
    *eps = d == TT_F32 ? 1e-5 : d == TT_F16 ? 2e-3 : 1.5e-2;
}

/* The same for a model of config c. The Llama family's fp16/bf16 bounds are 6 times GPT-2's: on
 * the fixtures and random models of gt_add_families the GPU, which also rounds the norm, RoPE'd
 * q/k, SwiGLU and attention outputs to the dtype, used up to 3.2 (fp16) and 3.4 (bf16) times
 * GPT-2's bound (TT_GPU_TEST_VERBOSE=1, emulation); fp32 keeps GPT-2's. */
static void gt_logit_tol_for(const model_config *c, tt_dtype d, double *tol, double *eps)
{
    gt_logit_tol(d, tol, eps);
    if (d != TT_F32 && (c->features & ARCH_F_RMSNORM)) {
        *tol *= 6;
        *eps *= 6;
    }
}

/* Model case mc written to a new directory (*dir, removed by tu_free_model) and loaded. */
static model *gt_load(const gt_model_case *mc, char **dir)
{
    if (mc->fixture) {
        model *m = NULL;
        tt_error err = {0};
        *dir = NULL;
        ck_assert_msg(model_load(tu_path("%s/%s", TU_FIXTURES, mc->fixture), &m, &err) == TT_OK, "%s: %s",
                      mc->fixture, err.msg);
        return m;
    }
    tu_model_spec ms = mc->model;
    ms.seed = 41;
    return tu_load_model(&ms, dir);
}

/* A CUDA engine for m that must open (eo, co as cuda_engine_create takes them). */
static engine *gt_engine(model *m, const engine_options *eo, const cuda_engine_options *co)
{
    engine *e;
    tt_error err = {0};
    ck_assert_msg(cuda_engine_create(m, eo, co, &e, &err) == TT_OK, "%s", err.msg);
    return e;
}

/* The default engine options computing in d. */
static engine_options gt_engine_options(tt_dtype d)
{
    engine_options eo;
    engine_options_default(&eo);
    eo.dtype = d;
    return eo;
}

typedef struct {
    char *dir;
    model *m;
    engine *cpu, *gpu;
    tt_dtype d;
    double tol, eps;
} gt_pair;

static void gt_pair_open(gt_pair *p, const gt_model_case *mc, tt_dtype d, const cuda_engine_options *co)
{
    memset(p, 0, sizeof *p);
    p->m = gt_load(mc, &p->dir);
    p->d = d;
    gt_logit_tol_for(&p->m->config, d, &p->tol, &p->eps);
    tt_error err = {0};
    engine_options eo = gt_engine_options(d);
    eo.n_threads = 1;
    ck_assert_msg(cpu_engine_create(p->m, &eo, &p->cpu, &err) == TT_OK, "%s", err.msg);
    p->gpu = gt_engine(p->m, &eo, co);
    ck_assert_str_eq(p->gpu->ops->name, "cuda");
    ck_assert_int_eq(p->gpu->n_ctx, p->cpu->n_ctx);
}

static void gt_pair_close(gt_pair *p)
{
    engine_free(p->gpu);
    engine_free(p->cpu);
    tu_free_model(p->m, p->dir);
}

/* The same span on both engines; every logits row compared. */
static void gt_pair_forward(gt_pair *p, const int32_t *ids, int n, int pos, bool all, const char *what)
{
    tt_error err = {0};
    ck_assert_msg(engine_forward(p->cpu, ids, n, pos, all, &err) == TT_OK, "cpu %s: %s", what, err.msg);
    ck_assert_msg(engine_forward(p->gpu, ids, n, pos, all, &err) == TT_OK, "gpu %s: %s", what, err.msg);
    ck_assert_int_eq(p->gpu->n_past, p->cpu->n_past);
    ck_assert_int_eq(p->gpu->n_logits, p->cpu->n_logits);
    const int V = p->cpu->config->V;
    double *ref = malloc((size_t)V * sizeof(double));
    for (int row = 0; row < p->cpu->n_logits; row++) {
        const float *c = engine_logits(p->cpu, row), *g = engine_logits(p->gpu, row);
        double scale = 1.0;        /* fp32: the bound is for rows of magnitude about 3 */
        for (int v = 0; v < V; v++) {
            ref[v] = c[v];
            if (p->d == TT_F32 && fabs(ref[v]) / 3.0 > scale)
                scale = fabs(ref[v]) / 3.0;
        }
        char msg[128];
        snprintf(msg, sizeof msg, "%s, logits row %d", what, row);
        gt_close(msg, p->d, g, ref, (size_t)V, p->tol * scale, p->eps);
    }
    free(ref);
}

/* Prefill, decode, truncate and continue, re-prefill from 0: logits equal within the tolerance. */
static void gt_compare_session(const gt_model_case *mc, tt_dtype d, const cuda_engine_options *co)
{
    gt_pair p;
    gt_pair_open(&p, mc, d, co);
    const int V = p.cpu->config->V;
    int32_t ids[64];
    for (int i = 0; i < 64; i++)
        ids[i] = (int32_t)((i * 37 + 11) % V);
    char what[96];
    gt_pair_forward(&p, ids, 9, 0, true, "prefill of 9 (all rows)");
    int pos = 9;
    for (int s = 0; s < 6; s++, pos++) {
        int32_t next = util_argmax(engine_logits(p.cpu, 0), V);
        snprintf(what, sizeof what, "decode step %d", s);
        gt_pair_forward(&p, &next, 1, pos, false, what);
    }
    /* Back to 7 tokens (a rejected draft, an edited turn) and on with 3 new ones. */
    gt_pair_forward(&p, ids + 20, 3, 7, false, "continue at 7 after truncation");
    pos = 10;
    for (int s = 0; s < 3; s++, pos++) {
        int32_t next = util_argmax(engine_logits(p.cpu, 0), V);
        snprintf(what, sizeof what, "decode step %d after truncation", s);
        gt_pair_forward(&p, &next, 1, pos, false, what);
    }
    engine_truncate(p.cpu, 0);
    engine_truncate(p.gpu, 0);
    ck_assert_int_eq(p.gpu->n_past, 0);
    gt_pair_forward(&p, ids + 30, 4, 0, false, "re-prefill from 0");
    gt_pair_forward(&p, ids + 40, 1, 4, true, "one-token span with all rows");
    gt_pair_close(&p);
}

static const gt_model_case gt_tiny = {"tiny", {TT_F32, .exact = false}, NULL};

START_TEST(engine_matches_cpu_over_a_session)
{
    cuda_engine_options co;
    cuda_engine_options_default(&co);
    gt_compare_session(&gt_tiny, gt_dtypes[_i], &co);
}
END_TEST

START_TEST(engine_matches_cpu_without_graphs_and_with_small_chunks)
{
    cuda_engine_options co;
    cuda_engine_options_default(&co);
    co.use_graphs = false;
    co.max_chunk = 4;              /* the 9-token prefill runs as 4 + 4 + 1 */
    gt_compare_session(&gt_tiny, gt_dtypes[_i], &co);
}
END_TEST

START_TEST(engine_matches_cpu_on_other_model_shapes)
{
    static const gt_model_case cases[] = {
        {"untied, masks, f16 file", {TT_F16, .untied = true, .mask_buffers = true}, NULL},
        {"erf", {TT_BF16, .erf = true}, NULL},
        {"odd", {TT_F32, .V = 301, .maxT = 40, .C = 36, .NH = 3, .L = 3, .FF = 99}, NULL},
    };
    cuda_engine_options co;
    cuda_engine_options_default(&co);
    gt_compare_session(&cases[_i], _i == 1 ? TT_BF16 : TT_F32, &co);
}
END_TEST

/* Greedy generation, each engine fed its own choices: the same tokens. */
START_TEST(greedy_generations_are_identical)
{
    tt_dtype d = gt_dtypes[_i];
    const gt_model_case mc = {"tiny exact", {TT_F32, .exact = true}, NULL};
    cuda_engine_options co;
    cuda_engine_options_default(&co);
    gt_pair p;
    gt_pair_open(&p, &mc, d, &co);
    const int V = p.cpu->config->V, n_prompt = 5, n_gen = 24;
    int32_t prompt[5] = {3, 141, 59, 265, 358};
    engine *es[2] = {p.cpu, p.gpu};
    int32_t out[2][24];
    tt_error err = {0};
    for (int k = 0; k < 2; k++) {
        ck_assert_msg(engine_forward(es[k], prompt, n_prompt, 0, false, &err) == TT_OK, "%s", err.msg);
        for (int s = 0; s < n_gen; s++) {
            out[k][s] = util_argmax(engine_logits(es[k], 0), V);
            ck_assert_msg(engine_forward(es[k], &out[k][s], 1, n_prompt + s, false, &err) == TT_OK, "%s",
                          err.msg);
        }
    }
    for (int s = 0; s < n_gen; s++)
        ck_assert_msg(out[0][s] == out[1][s], "%s: token %d differs: cpu %d, gpu %d", tt_dtype_name(d), s,
                      out[0][s], out[1][s]);
    gt_pair_close(&p);
}
END_TEST

/* co.profile times every op of the decode steps that run without a graph, changes no logit, and
 * leaves steps replayed from a graph untimed. */
START_TEST(profile_times_each_op_of_steps_without_a_graph)
{
    char *dir;
    model *m = gt_load(&gt_tiny, &dir);
    tt_error err = {0};
    engine_options eo = gt_engine_options(TT_F16);
    cuda_engine_options prof, plain, graphs;
    cuda_engine_options_default(&plain);
    plain.use_graphs = false;
    plain.profile = false;
    prof = plain;
    prof.profile = true;
    graphs = prof;
    graphs.use_graphs = true;
    engine *es[3] = {gt_engine(m, &eo, &prof), gt_engine(m, &eo, &plain), gt_engine(m, &eo, &graphs)};
    const int V = m->config.V, steps = 5;
    int32_t prompt[4] = {5, 6, 7, 8};
    for (int k = 0; k < 3; k++)
        ck_assert_msg(engine_forward(es[k], prompt, 4, 0, false, &err) == TT_OK, "%s", err.msg);
    for (int s = 0; s < steps; s++) {
        int32_t next = (int32_t)(11 + 3 * s);
        for (int k = 0; k < 3; k++)
            ck_assert_msg(engine_forward(es[k], &next, 1, 4 + s, false, &err) == TT_OK, "%s", err.msg);
        ck_assert_msg(memcmp(engine_logits(es[0], 0), engine_logits(es[1], 0), (size_t)V * sizeof(float)) == 0,
                      "step %d: profiling changed the logits", s);
    }
    /* The prompt's last token is a step of one row too: steps + 1 timed steps. */
    char table[4096], want[64];
    ck_assert_uint_gt(cuda_engine_profile_format(es[0], table, sizeof table), 0);
    snprintf(want, sizeof want, " %d decode steps without a graph", steps + 1);
    ck_assert_msg(strstr(table, want), "no '%s' in:\n%s", want, table);
    static const char *const ops[] = {"rows to device", "embedding", "norm", "matmul qkv", "qkv heads",
                                      "attention", "matmul o", "matmul up + gelu/swiglu", "matmul down", "lm_head",
                                      "logits to host", "device total", "host wall time"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        ck_assert_msg(strstr(table, ops[i]), "no '%s' in:\n%s", ops[i], table);
    /* L layers: norm twice a layer and once before the lm_head. */
    const char *nl = strstr(table, "norm (+ pending bias)");
    ck_assert_double_eq_tol(strtod(nl + strlen("norm (+ pending bias)"), NULL), 2.0 * m->config.L + 1, 1e-9);
    ck_assert_uint_eq(cuda_engine_profile_format(es[1], table, sizeof table), 0);
    ck_assert_uint_eq(cuda_engine_profile_format(es[2], table, sizeof table), 0);
    ck_assert_str_eq(table, "");
    /* Profile on: freeing the engine prints the table to stderr (caught here in a file). */
    FILE *caught = tmpfile();
    ck_assert_ptr_nonnull(caught);
    fflush(stderr);
    const int saved = dup(2);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_ge(dup2(fileno(caught), 2), 0);
    engine_free(es[0]);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(caught);
    const size_t got = fread(table, 1, sizeof table - 1, caught);
    table[got] = 0;
    fclose(caught);
    ck_assert_msg(strstr(table, "cuda profile:") && strstr(table, "matmul qkv"), "stderr at free: '%s'", table);
    engine_free(es[1]);
    engine_free(es[2]);
    tu_free_model(m, dir);
}
END_TEST

/* The graph replays the same kernels as the direct launches: identical logits, bit for bit. */
START_TEST(graphs_on_and_off_give_identical_logits)
{
    tt_dtype d = gt_dtypes[_i];
    char *dir;
    model *m = gt_load(&gt_tiny, &dir);
    tt_error err = {0};
    engine_options eo = gt_engine_options(d);
    cuda_engine_options on, off;
    cuda_engine_options_default(&on);
    cuda_engine_options_default(&off);
    off.use_graphs = false;
    engine *a, *b;
    a = gt_engine(m, &eo, &on);
    b = gt_engine(m, &eo, &off);
    const int V = m->config.V;
    int32_t prompt[3] = {5, 6, 7};
    ck_assert(engine_forward(a, prompt, 3, 0, false, &err) == TT_OK);
    ck_assert(engine_forward(b, prompt, 3, 0, false, &err) == TT_OK);
    int pos = 3;
    for (int s = 0; s < 8; s++, pos++) {
        int32_t next = util_argmax(engine_logits(a, 0), V);
        if (s == 5)                /* rewind: the replayed graph must follow the new position */
            pos = 2;
        ck_assert(engine_forward(a, &next, 1, pos, false, &err) == TT_OK);
        ck_assert(engine_forward(b, &next, 1, pos, false, &err) == TT_OK);
        ck_assert_msg(memcmp(engine_logits(a, 0), engine_logits(b, 0), (size_t)V * sizeof(float)) == 0,
                      "step %d: graph and direct logits differ", s);
    }
    cuda_engine_stats st;
    ck_assert(cuda_engine_get_stats(a, &st));
    ck_assert(st.graphs);
    ck_assert_int_eq(st.graph_replays, 9);   /* 8 steps, and the prompt's last token (a one-row step) */
    ck_assert(cuda_engine_get_stats(b, &st));
    ck_assert(!st.graphs);
    ck_assert_int_eq(st.graph_replays, 0);
    engine_free(a);
    engine_free(b);
    tu_free_model(m, dir);
}
END_TEST

START_TEST(all_rows_of_a_span_equal_step_by_step_logits)
{
    /* Prefill (GEMM attention) of n tokens with every row kept equals n decode steps (the decode
     * kernel), within the dtype's tolerance. */
    tt_dtype d = gt_dtypes[_i];
    char *dir;
    model *m = gt_load(&gt_tiny, &dir);
    tt_error err = {0};
    engine_options eo = gt_engine_options(d);
    engine *a, *b;
    a = gt_engine(m, &eo, NULL);
    b = gt_engine(m, &eo, NULL);
    const int V = m->config.V, n = 7;
    int32_t ids[7] = {1, 2, 3, 400, 5, 6, 7};
    ck_assert(engine_forward(a, ids, n, 0, true, &err) == TT_OK);
    double tol, eps;
    gt_logit_tol(d, &tol, &eps);
    double *ref = malloc((size_t)V * sizeof(double));
    for (int t = 0; t < n; t++) {
        ck_assert(engine_forward(b, ids + t, 1, t, false, &err) == TT_OK);
        for (int v = 0; v < V; v++)
            ref[v] = engine_logits(b, 0)[v];
        char what[64];
        snprintf(what, sizeof what, "row %d of the span vs step %d", t, t);
        gt_close(what, d, engine_logits(a, t), ref, (size_t)V, tol, eps);
    }
    free(ref);
    engine_free(a);
    engine_free(b);
    tu_free_model(m, dir);
}
END_TEST

/* A model with an 8-position context, for the refusals at its end. */
#define GT_SHORT_CASE {"short", {TT_F32, .V = 300, .maxT = 8, .C = 32, .NH = 2, .L = 1, .FF = 0}, NULL}

START_TEST(full_context_is_refused_and_the_engine_goes_on)
{
    const gt_model_case mc = GT_SHORT_CASE;
    char *dir;
    model *m = gt_load(&mc, &dir);
    tt_error err = {0};
    engine *g = gt_engine(m, NULL, NULL);
    int32_t ids[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    ck_assert(engine_forward(g, ids, 8, 0, false, &err) == TT_OK);     /* exactly full */
    ck_assert_int_eq(engine_forward(g, ids + 8, 1, 8, false, &err), TT_ERR_CONTEXT);
    ck_assert(engine_forward(g, ids + 8, 1, 7, false, &err) == TT_OK);  /* replace the last one */
    ck_assert_int_eq(g->n_past, 8);
    engine_free(g);
    tu_free_model(m, dir);
}
END_TEST

START_TEST(long_context_decode_crosses_key_chunks)
{
    /* 250 tokens of prefill (chunks of 256 and the cuBLAS attention), then decode steps across the
     * decode kernel's block boundary at 256 (5 blocks of 64 keys at n_ctx 320), then a rewind. */
    const gt_model_case mc = {"long", {TT_F32, .V = 300, .maxT = 320, .C = 32, .NH = 2, .L = 2}, NULL};
    cuda_engine_options co;
    cuda_engine_options_default(&co);
    gt_pair p;
    gt_pair_open(&p, &mc, gt_dtypes[_i], &co);
    int32_t ids[300];
    for (int i = 0; i < 300; i++)
        ids[i] = (int32_t)((i * 53 + 7) % 300);
    gt_pair_forward(&p, ids, 250, 0, false, "prefill of 250");
    char what[64];
    for (int pos = 250; pos < 262; pos++) {
        snprintf(what, sizeof what, "decode at position %d", pos);
        gt_pair_forward(&p, ids + pos, 1, pos, false, what);
    }
    gt_pair_forward(&p, ids + 100, 1, 200, false, "decode after a rewind to 200");
    gt_pair_close(&p);
}
END_TEST

START_TEST(two_engines_interleave_like_draft_and_target)
{
    /* Speculative decoding keeps two engines on one device: nothing may be shared between them. */
    const gt_model_case odd = {"odd", {TT_F32, .V = 512, .maxT = 40, .C = 36, .NH = 3, .L = 3, .FF = 99}, NULL};
    cuda_engine_options co;
    cuda_engine_options_default(&co);
    gt_pair a, b;
    gt_pair_open(&a, &gt_tiny, TT_F16, &co);
    gt_pair_open(&b, &odd, TT_F32, &co);
    int32_t ids[16] = {5, 9, 200, 31, 77, 400, 2, 8, 13, 21, 34, 55, 89, 144, 233, 377};
    gt_pair_forward(&a, ids, 4, 0, false, "target prefill");
    gt_pair_forward(&b, ids, 4, 0, false, "draft prefill");
    for (int s = 0; s < 6; s++) {
        gt_pair_forward(&b, ids + 4 + s, 1, 4 + s, false, "draft step");
        gt_pair_forward(&a, ids + 4 + s, 1, 4 + s, false, "target step");
    }
    gt_pair_forward(&a, ids + 10, 3, 7, true, "target verifies 3 after a rejection");
    gt_pair_forward(&b, ids + 10, 1, 7, false, "draft rolls back");
    gt_pair_close(&a);
    gt_pair_close(&b);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Sequences: batched decoding (engine_seq_*, engine_forward_batch) */

#define GT_SEQS 6
#define GT_SEQ_STEPS 4

/* Row got against want: bit for bit where GT_BATCH_BITWISE, else within the logits tolerance. */
static void gt_same_row(const char *what, tt_dtype d, const float *got, const float *want, int V)
{
#ifdef GT_BATCH_BITWISE
    (void)d;
    ck_assert_msg(memcmp(got, want, (size_t)V * sizeof(float)) == 0, "%s: not bit for bit", what);
#else
    double tol, eps;
    gt_logit_tol(d, &tol, &eps);
    double *ref = malloc((size_t)V * sizeof(double));
    for (int v = 0; v < V; v++)
        ref[v] = want[v];
    gt_close(what, d, got, ref, (size_t)V, tol, eps);
    free(ref);
#endif
}

/* The logits of sequence b's decode steps run alone on a fresh GPU engine (prompt as a span, then
 * one token at a time): (GT_SEQ_STEPS, V). */
static float *gt_seq_alone(model *m, const engine_options *eo, const cuda_engine_options *co, int b)
{
    engine *e = gt_engine(m, eo, co);
    float *out = tu_seq_alone(e, b, GT_SEQ_STEPS);
    engine_free(e);
    return out;
}

/* Batches of 1, 3 and 6 sequences, rows in a permuted order, against each sequence run alone. */
static void gt_batch_vs_alone(const gt_model_case *mc, tt_dtype d, const cuda_engine_options *co_in)
{
    cuda_engine_options co = *co_in;
    char *dir;
    model *m = gt_load(mc, &dir);
    engine_options eo = gt_engine_options(d);
    const int V = m->config.V;
    float *want[GT_SEQS];
    for (int b = 0; b < GT_SEQS; b++)
        want[b] = gt_seq_alone(m, &eo, &co, b);
    static const int batches[] = {1, 3, GT_SEQS};
    for (int k = 0; k < 3; k++) {
        const int B = batches[k];
        engine *e = gt_engine(m, &eo, &co);
        tu_seq_prefill(e, B);
        int order[GT_SEQS];
        for (int r = 0; r < B; r++)
            order[r] = (r * 5 + 2) % B;    /* 5 is prime to every B here: a permutation */
        for (int s = 0; s < GT_SEQ_STEPS; s++) {
            tu_seq_step(e, order, B, s);
            for (int r = 0; r < B; r++) {
                const int b = order[r];
                char what[128];
                snprintf(what, sizeof what, "batch %d, step %d, row %d (sequence %d at position %d) vs alone",
                         B, s, r, b, tu_seq_prompt_len(b) + s);
                gt_same_row(what, d, engine_logits(e, r), want[b] + (size_t)s * (size_t)V, V);
            }
        }
        ck_assert_int_eq(e->n_past, tu_seq_prompt_len(0) + GT_SEQ_STEPS);   /* sequence 0 is the plain cache */
        cuda_engine_stats st;
        ck_assert(cuda_engine_get_stats(e, &st));
        ck_assert_int_eq(st.sequences, B);
        ck_assert_int_eq(st.batch_steps, GT_SEQ_STEPS);
        engine_free(e);
    }
    for (int b = 0; b < GT_SEQS; b++)
        free(want[b]);
    tu_free_model(m, dir);
}

START_TEST(gpu_batched_rows_equal_the_same_rows_run_alone)
{
    /* Loop index: dtype x {graphs, small chunks without graphs}. With max_chunk 4 a batch of 6
     * runs as 4 + 2 rows. */
    cuda_engine_options co;
    cuda_engine_options_default(&co);
    if (_i >= 3) {
        co.use_graphs = false;
        co.max_chunk = 4;
    }
    gt_batch_vs_alone(&gt_tiny, gt_dtypes[_i % 3], &co);
}
END_TEST

/* The same batch on the CPU engine (batch-invariant) and the GPU engine: every row within the
 * logits tolerance, so a batch is the model's forward and not just self-consistent. */
static void gt_batch_vs_cpu(const gt_model_case *mc, tt_dtype d)
{
    gt_pair p;
    cuda_engine_options co;
    cuda_engine_options_default(&co);
    gt_pair_open(&p, mc, d, &co);
    const int V = p.m->config.V, B = 4;
    engine *es[2] = {p.cpu, p.gpu};
    tt_error err = {0};
    int seqs[4] = {3, 0, 2, 1};
    for (int k = 0; k < 2; k++)
        tu_seq_prefill(es[k], B);
    double *ref = malloc((size_t)V * sizeof(double));
    for (int s = 0; s < 3; s++) {
        int32_t ids[4];
        for (int r = 0; r < B; r++)
            ids[r] = tu_seq_token(p.m, seqs[r], 20 + s);
        for (int k = 0; k < 2; k++)
            ck_assert_msg(engine_forward_batch(es[k], seqs, ids, B, &err) == TT_OK, "%s", err.msg);
        for (int r = 0; r < B; r++) {
            for (int v = 0; v < V; v++)
                ref[v] = engine_logits(p.cpu, r)[v];
            char what[96];
            snprintf(what, sizeof what, "batched step %d, row %d (sequence %d) vs the CPU", s, r, seqs[r]);
            gt_close(what, p.d, engine_logits(p.gpu, r), ref, (size_t)V, p.tol, p.eps);
        }
    }
    free(ref);
    gt_pair_close(&p);
}

START_TEST(gpu_batched_rows_match_the_cpu_batch)
{
    gt_batch_vs_cpu(&gt_tiny, gt_dtypes[_i]);
}
END_TEST

START_TEST(gpu_copied_sequence_continues_exactly_like_its_source)
{
    /* A beam fork: sequence 2 takes sequence 1's rows (all of them, then only the ones past a
     * shared prefix), and both continue with the same tokens: the same logits, row for row (bit for
     * bit where GT_BATCH_BITWISE). */
    char *dir;
    model *m = gt_load(&gt_tiny, &dir);
    engine_options eo = gt_engine_options(gt_dtypes[_i]);
    engine *e = gt_engine(m, &eo, NULL);
    const int V = m->config.V;
    tt_error err = {0};
    ck_assert_msg(engine_seq_reserve(e, 3, &err) == TT_OK, "%s", err.msg);
    int32_t ids[24];
    for (int t = 0; t < 24; t++)
        ids[t] = tu_seq_token(m, 4, t);
    ck_assert(engine_seq_forward(e, 1, ids, 9, 0, false, &err) == TT_OK);
    ck_assert(engine_seq_forward(e, 2, ids + 12, 5, 0, false, &err) == TT_OK);   /* other rows, replaced */
    ck_assert_msg(engine_seq_copy(e, 2, 1, 0, 9, &err) == TT_OK, "%s", err.msg);
    ck_assert_int_eq(engine_seq_len(e, 2), 9);
    ck_assert(memcmp(engine_seq_tokens(e, 2), ids, 9 * sizeof(int32_t)) == 0);
    int pair[2] = {1, 2};
    for (int s = 0; s < 3; s++) {
        int32_t two[2] = {ids[9 + s], ids[9 + s]};
        ck_assert_msg(engine_forward_batch(e, pair, two, 2, &err) == TT_OK, "%s", err.msg);
        char what[64];
        snprintf(what, sizeof what, "step %d after a full copy: the copy's row vs its source's", s);
        gt_same_row(what, eo.dtype, engine_logits(e, 1), engine_logits(e, 0), V);
    }
    /* Sequence 2 diverges, then takes positions 9 .. 11 back from sequence 1 (0 .. 8 are shared). */
    engine_seq_truncate(e, 2, 9);
    int32_t other[3] = {1, 2, 3};
    ck_assert(engine_seq_forward(e, 2, other, 3, 9, false, &err) == TT_OK);
    ck_assert_msg(engine_seq_copy(e, 2, 1, 9, 12, &err) == TT_OK, "%s", err.msg);
    ck_assert(memcmp(engine_seq_tokens(e, 2), ids, 12 * sizeof(int32_t)) == 0);
    int32_t two[2] = {ids[12], ids[12]};
    ck_assert(engine_forward_batch(e, pair, two, 2, &err) == TT_OK);
    gt_same_row("after a copy past a shared prefix: the copy's row vs its source's", eo.dtype,
                engine_logits(e, 1), engine_logits(e, 0), V);
    /* Copying into sequence 0 moves the plain cache too. */
    ck_assert(engine_seq_copy(e, 0, 1, 0, 13, &err) == TT_OK);
    ck_assert_int_eq(e->n_past, 13);
    engine_free(e);
    tu_free_model(m, dir);
}
END_TEST

START_TEST(gpu_empty_sequence_in_a_batch_starts_at_position_zero)
{
    char *dir;
    model *m = gt_load(&gt_tiny, &dir);
    engine *e = gt_engine(m, NULL, NULL), *alone = gt_engine(m, NULL, NULL);
    tt_error err = {0};
    ck_assert(engine_seq_reserve(e, 2, &err) == TT_OK);
    int32_t ids[4] = {5, 6, 7, 8};
    ck_assert(engine_seq_forward(e, 1, ids, 3, 0, false, &err) == TT_OK);
    int seqs[2] = {1, 0};
    int32_t step[2] = {8, 9};
    ck_assert_msg(engine_forward_batch(e, seqs, step, 2, &err) == TT_OK, "%s", err.msg);
    ck_assert_int_eq(e->n_past, 1);
    ck_assert(engine_forward(alone, &step[1], 1, 0, false, &err) == TT_OK);
    gt_same_row("an empty sequence's first row vs alone", TT_F32, engine_logits(e, 1), engine_logits(alone, 0),
                m->config.V);
    engine_free(e);
    engine_free(alone);
    tu_free_model(m, dir);
}
END_TEST

START_TEST(gpu_bad_batches_are_refused_and_change_nothing)
{
    const gt_model_case mc = GT_SHORT_CASE;
    char *dir;
    model *m = gt_load(&mc, &dir);
    engine *e = gt_engine(m, NULL, NULL);
    tu_assert_sequence_refusals(e);
    /* The engine goes on. */
    tt_error err = {0};
    int fine[2] = {0, 2};
    int32_t ids[2] = {4, 5};
    ck_assert_msg(engine_forward_batch(e, fine, ids, 2, &err) == TT_OK, "%s", err.msg);
    ck_assert_int_eq(engine_seq_len(e, 0), 4);
    ck_assert_int_eq(engine_seq_len(e, 2), 1);
    engine_free(e);
    tu_free_model(m, dir);
}
END_TEST

/* Beam search from prompt on e (sequence 0 prefilled here). */
static void gt_beams(engine *e, const int32_t *prompt, int n_prompt, const beam_options *o, beam_result *r)
{
    tt_error err = {0};
    sampler *smp = sampler_create(e->config->V);
    ck_assert_msg(engine_forward(e, prompt, n_prompt, 0, false, &err) == TT_OK, "%s", err.msg);
    ck_assert_msg(beam_search(e, smp, prompt, n_prompt, o, r, &err) == TT_OK, "%s: %s", e->ops->name, err.msg);
    ck_assert_int_eq(e->n_past, n_prompt);
    sampler_free(smp);
}

START_TEST(gpu_beam_search_gives_the_cpu_beams)
{
    /* fp32 on an exact model (weights exact in every dtype): the GPU's logits are within 1e-5 of
     * the CPU's, far below the gaps between candidates, so the beams are the same ids; the summed
     * log-probabilities agree to the logits tolerance times the tokens summed. Cases: plain, and
     * EOS early (a frequent token) with a length penalty, n-gram blocking and early stopping. */
    const gt_model_case mc = {"tiny exact", {TT_F32, .exact = true}, NULL};
    cuda_engine_options co;
    cuda_engine_options_default(&co);
    if (_i == 1)
        co.use_graphs = false;
    gt_pair p;
    gt_pair_open(&p, &mc, TT_F32, &co);
    const int32_t prompt[4] = {3, 141, 59, 265};
    beam_options o;
    beam_options_default(&o);
    o.num_beams = 4;
    o.max_new_tokens = 10;
    if (_i == 1) {
        /* The CPU's greedy third token as EOS, so hypotheses end early and compete. */
        engine *c = p.cpu;
        tt_error err = {0};
        ck_assert(engine_forward(c, prompt, 4, 0, false, &err) == TT_OK);
        o.eos = util_argmax(engine_logits(c, 0), c->config->V);
        o.length_penalty = 0.5f;   /* short hypotheses rank well: the EOS ones are returned */
        o.no_repeat_ngram = 2;
        o.early_stopping = true;
        o.num_return = 3;
    }
    beam_result rc, rg;
    gt_beams(p.cpu, prompt, 4, &o, &rc);
    gt_beams(p.gpu, prompt, 4, &o, &rg);
    ck_assert_int_eq(rg.n_hyps, rc.n_hyps);
    ck_assert_int_eq(rg.steps, rc.steps);
    bool any_eos = false;
    for (int h = 0; h < rc.n_hyps; h++) {
        const beam_hypothesis *a = &rc.hyps[h], *b = &rg.hyps[h];
        ck_assert_msg(a->n == b->n && memcmp(a->ids, b->ids, (size_t)a->n * sizeof(int32_t)) == 0,
                      "beam %d: the GPU's ids differ from the CPU's (%d vs %d tokens)", h, b->n, a->n);
        ck_assert_int_eq(a->eos, b->eos);
        any_eos |= a->eos;
        ck_assert_msg(fabs(a->logprob - b->logprob) <= 1e-4 * a->n, "beam %d: logprob %.9g on the GPU, %.9g on "
                      "the CPU", h, b->logprob, a->logprob);
        ck_assert_msg(fabs(a->score - b->score) <= 1e-4 * a->n, "beam %d: score %.9g vs %.9g", h, b->score,
                      a->score);
    }
    if (_i == 1)
        ck_assert_msg(any_eos, "the EOS case ended no hypothesis with EOS");
    beam_result_free(&rc);
    beam_result_free(&rg);
    gt_pair_close(&p);
}
END_TEST

typedef struct {
    int32_t ids[GT_SEQS][64];
    int n[GT_SEQS];
} gt_sample_tokens;

static bool gt_sample_event(void *user, int sample, const session_event *ev)
{
    gt_sample_tokens *t = user;
    if (!ev->flush && ev->token >= 0 && t->n[sample] < 64)
        t->ids[sample][t->n[sample]++] = ev->token;
    return true;
}

static bool gt_single_event(void *user, const session_event *ev)
{
    return gt_sample_event(user, 0, ev);
}

START_TEST(gpu_samples_follow_the_seed_contract)
{
    /* samples_generate on the GPU engine: sample i is, token for token, the same settings with
     * seed S + i run alone (a session on the same engine's plain cache). On a device this relies on
     * no draw landing within the batched GEMM's rounding of a boundary between two tokens. */
    char *dir;
    model *m = gt_load(&gt_tiny, &dir);
    tokenizer *tok;
    tt_error err = {0};
    ck_assert_msg(tokenizer_load_dir(dir, &tok, &err) == TT_OK, "%s", err.msg);
    cuda_engine_options co;
    cuda_engine_options_default(&co);
    co.max_chunk = 2;              /* 3 samples run as 2 + 1 rows */
    engine_options eo = gt_engine_options(gt_dtypes[_i]);
    engine *e = gt_engine(m, &eo, &co);
    session_settings set;
    session_settings_default(&set);
    set.max_new_tokens = 12;
    set.seed = 40;
    set.sampler.temperature = 1.2f;
    set.stop_at_eos = false;
    const char *text = "Hello there";
    const int N = 3;
    gt_sample_tokens batched = {0}, alone = {0};
    samples_result res;
    ck_assert_msg(samples_generate(e, m, tok, &set, NULL, text, strlen(text), N, gt_sample_event, &batched, NULL,
                                   &res, &err) == TT_OK, "%s", err.msg);
    ck_assert_int_eq(res.n, N);
    ck_assert(res.steps >= set.max_new_tokens - 1);
    samples_result_free(&res);
    for (int i = 0; i < N; i++) {
        session s;
        session_settings si = set;
        si.seed = set.seed + (uint64_t)i;
        ck_assert_msg(session_init(&s, m, tok, e, &si, &err) == TT_OK, "%s", err.msg);
        ck_assert(session_add_user_text(&s, text, strlen(text), &err) == TT_OK);
        alone.n[0] = 0;
        ck_assert_msg(session_generate(&s, gt_single_event, &alone, &err) == TT_OK, "%s", err.msg);
        ck_assert_int_eq(batched.n[i], alone.n[0]);
        ck_assert_int_eq(batched.n[i], set.max_new_tokens);
        for (int t = 0; t < alone.n[0]; t++)
            ck_assert_msg(batched.ids[i][t] == alone.ids[0][t], "sample %d, token %d: %d in the batch, %d with seed "
                          "%d alone", i, t, batched.ids[i][t], alone.ids[0][t], (int)si.seed);
        session_free(&s);
    }
    engine_free(e);
    tokenizer_free(tok);
    tu_free_model(m, dir);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * The Llama family */

/* The committed Hugging Face fixtures (tools/ref/mkllama.py): GQA, untied with llama3 RoPE
 * scaling, sharded MHA with attention biases (BF16 file), mistral, qwen2 (q|k|v biases), qwen3
 * (q/k norms, head_dim != hidden / heads). Each has 128 positions. */
static const gt_model_case gt_fixtures[] = {
    {"llama-gqa", {TT_F32}, "llama/llama-gqa"},
    {"llama-untied-rope3", {TT_F32}, "llama/llama-untied-rope3"},
    {"llama-mha-sharded", {TT_F32}, "llama/llama-mha-sharded"},
    {"mistral", {TT_F32}, "llama/mistral"},
    {"qwen2", {TT_F32}, "llama/qwen2"},
    {"qwen3", {TT_F32}, "llama/qwen3"},
};
#define GT_N_FIXTURES ((int)(sizeof gt_fixtures / sizeof gt_fixtures[0]))

/* Random models modelgen writes, as tests/check_arch.c's: GQA, one KV head and an untied head
 * from an F16 file, biases from a BF16 file, q/k norms with HS 24 != C / NH. */
static const gt_model_case gt_families[] = {
    {"llama gqa", {TT_F32, .V = 300, .maxT = 48, .C = 64, .NH = 4, .L = 2, .FF = 96, .arch = "llama", .NKV = 2}, NULL},
    {"mistral 1 kv head, untied", {TT_F16, .V = 301, .maxT = 48, .C = 48, .NH = 6, .L = 2, .FF = 80,
                                   .arch = "mistral", .NKV = 1, .untied = true}, NULL},
    {"qwen2 biases", {TT_BF16, .V = 300, .maxT = 48, .C = 64, .NH = 4, .L = 3, .FF = 96, .arch = "qwen2",
                      .NKV = 2}, NULL},
    {"qwen3 q/k norms, HS 24", {TT_F32, .V = 299, .maxT = 48, .C = 64, .NH = 4, .L = 2, .FF = 96,
                                .arch = "qwen3", .NKV = 2, .HS = 24}, NULL},
};
#define GT_N_FAMILIES ((int)(sizeof gt_families / sizeof gt_families[0]))

START_TEST(llama_fixtures_match_the_cpu_over_a_session)
{
    /* Loop index: fixture x dtype. */
    cuda_engine_options co;
    cuda_engine_options_default(&co);
    gt_compare_session(&gt_fixtures[_i / 3], gt_dtypes[_i % 3], &co);
}
END_TEST

/* Softmax of logits (V) into p (V), in double. */
static void gt_softmax(const float *logits, int V, double *p)
{
    double mx = -INFINITY, z = 0;
    for (int v = 0; v < V; v++)
        mx = fmax(mx, logits[v]);
    for (int v = 0; v < V; v++)
        z += (p[v] = exp((double)logits[v] - mx));
    for (int v = 0; v < V; v++)
        p[v] /= z;
}

START_TEST(llama_fixtures_greedy_tokens_and_top_probabilities_equal_the_cpu)
{
    /* fp32: a prompt of 90 ids (a prefill of two chunks when max_chunk is 64), then 30 greedy
     * tokens, each engine fed its own choices, up to position 119 of 128, where RoPE turns
     * fastest: the same tokens, and at every step the CPU's top-5 tokens have the same
     * probabilities on the GPU within 1e-5. */
    const gt_model_case *mc = &gt_fixtures[_i];
    cuda_engine_options co;
    cuda_engine_options_default(&co);
    co.max_chunk = 64;
    gt_pair p;
    gt_pair_open(&p, mc, TT_F32, &co);
    const int V = p.cpu->config->V, n_prompt = 90, n_gen = 30;
    int32_t prompt[90], out[2][30];
    for (int i = 0; i < n_prompt; i++)
        prompt[i] = (int32_t)((i * 61 + 17) % V);
    engine *es[2] = {p.cpu, p.gpu};
    double *pc = malloc((size_t)V * sizeof(double)), *pg = malloc((size_t)V * sizeof(double));
    double worst = 0;
    tt_error err = {0};
    for (int k = 0; k < 2; k++)
        ck_assert_msg(engine_forward(es[k], prompt, n_prompt, 0, false, &err) == TT_OK, "%s", err.msg);
    for (int s = 0; s < n_gen; s++) {
        gt_softmax(engine_logits(p.cpu, 0), V, pc);
        gt_softmax(engine_logits(p.gpu, 0), V, pg);
        bool taken[4096] = {false};
        for (int r = 0; r < 5 && V <= 4096; r++) {
            int best = -1;
            for (int v = 0; v < V; v++)
                if (!taken[v] && (best < 0 || pc[v] > pc[best]))
                    best = v;
            taken[best] = true;
            worst = fmax(worst, fabs(pg[best] - pc[best]));
            ck_assert_msg(fabs(pg[best] - pc[best]) <= 1e-5, "%s, step %d: top-%d token %d has probability %.8f "
                          "on the GPU, %.8f on the CPU", mc->name, s, r + 1, best, pg[best], pc[best]);
        }
        for (int k = 0; k < 2; k++) {
            out[k][s] = util_argmax(engine_logits(es[k], 0), V);
            ck_assert_msg(engine_forward(es[k], &out[k][s], 1, n_prompt + s, false, &err) == TT_OK, "%s",
                          err.msg);
        }
        ck_assert_msg(out[0][s] == out[1][s], "%s: greedy token %d differs: cpu %d, gpu %d", mc->name, s,
                      out[0][s], out[1][s]);
    }
    if (getenv("TT_GPU_TEST_VERBOSE"))
        fprintf(stderr, "%s: greedy equal over %d tokens, top-5 probabilities within %.2g\n", mc->name, n_gen,
                worst);
    free(pc);
    free(pg);
    gt_pair_close(&p);
}
END_TEST

START_TEST(llama_family_random_models_match_the_cpu_over_a_session)
{
    /* Loop index: model x dtype; every third without graphs and with chunks of 4. */
    cuda_engine_options co;
    cuda_engine_options_default(&co);
    if (_i % 3 == 2) {
        co.use_graphs = false;
        co.max_chunk = 4;
    }
    gt_compare_session(&gt_families[_i / 3], gt_dtypes[_i % 3], &co);
}
END_TEST

START_TEST(llama_family_batched_rows_match_the_cpu_and_rows_run_alone)
{
    cuda_engine_options co;
    cuda_engine_options_default(&co);
    gt_batch_vs_cpu(&gt_families[_i], TT_F32);
    gt_batch_vs_alone(&gt_families[_i], TT_F16, &co);
}
END_TEST

START_TEST(llama_family_speculative_greedy_on_the_gpu_gives_the_cpu_greedy)
{
    /* The GPU engine as target and as its own draft (two engines of one model), speculative
     * greedy with gamma 1 and 5 over the fixture: the CPU's plain greedy tokens; the draft's
     * decode-kernel choices agree with the target's verification span, so nothing is rejected. */
    const gt_model_case *mc = &gt_fixtures[_i];
    char *dir;
    model *m = gt_load(mc, &dir);
    const int V = m->config.V, NP = 4, N = 40;
    sampler_params params;
    sampler_params_default(&params);
    params.greedy = true;
    engine *cpu = tu_cpu_engine(m, TT_F32, 1, 48);
    engine_options eo = gt_engine_options(TT_F32);
    eo.n_ctx = 48;
    engine *target = gt_engine(m, &eo, NULL), *draft = gt_engine(m, &eo, NULL);
    int32_t plain[40], w[40];
    for (int i = 0; i < NP; i++)
        plain[i] = (int32_t)((i * 53 + 7) % V);
    tu_greedy(cpu, plain, NP, N);
    spec *sp = spec_create(V);
    for (int gamma = 1; gamma <= 6; gamma += 5) {
        memcpy(w, plain, NP * sizeof *w);
        int rejected = tu_spec_greedy(sp, target, draft, &params, w, NP, N, gamma);
        for (int i = 0; i < N; i++)
            ck_assert_msg(w[i] == plain[i], "%s gamma %d: token %d is %d speculatively on the GPU, %d in the "
                          "CPU's plain greedy", mc->name, gamma, i, w[i], plain[i]);
        ck_assert_msg(rejected == 0, "%s gamma %d: %d draft tokens rejected", mc->name, gamma, rejected);
    }
    spec_free(sp);
    engine_free(target);
    engine_free(draft);
    engine_free(cpu);
    tu_free_model(m, dir);
}
END_TEST

START_TEST(llama_kv_cache_holds_key_value_heads_only)
{
    /* 4 query heads, 2 KV heads of 16 (llama-gqa): bench and /show's bytes per token, and a
     * sequence's cache, are 2 L NKV HS elements a position, half of what NH heads would take. */
    char *dir;
    model *m = gt_load(&gt_fixtures[0], &dir);
    engine_options eo = gt_engine_options(TT_F16);
    eo.n_ctx = 32;
    engine *e = gt_engine(m, &eo, NULL);
    cuda_engine_stats st;
    ck_assert(cuda_engine_get_stats(e, &st));
    ck_assert_uint_eq(st.kv_bytes_per_pos, 2u * 2 * 2 * 16 * 2);
    ck_assert_uint_eq(st.kv_bytes_per_pos, model_config_kv_bytes_per_token(&m->config, 2));
    ck_assert_uint_eq(st.weight_bytes, model_weight_bytes(m, TT_F16));
    tt_error err = {0};
    ck_assert(engine_seq_reserve(e, 2, &err) == TT_OK);
    ck_assert(cuda_engine_get_stats(e, &st));
    ck_assert_uint_ge(st.sequence_bytes, 32 * st.kv_bytes_per_pos);
    ck_assert_uint_lt(st.sequence_bytes, 32 * st.kv_bytes_per_pos + 1024);
    engine_free(e);
    tu_free_model(m, dir);
}
END_TEST

/* The attention capture's rows on both engines (both fill them from the same cache: the CPU from
 * fp32 keys, the GPU from keys held in d), every layer and head: within 1e-5 in fp32, 2e-2 in
 * fp16/bf16 (q and the keys rounded to 8 or 11 bits). */
static void gt_compare_attention(gt_pair *p, int first, int n, const char *what)
{
    const engine_attention *ac = p->cpu->attention, *ag = p->gpu->attention;
    const double tol = p->d == TT_F32 ? 1e-5 : 2e-2;
    ck_assert_int_eq(ag->n_rows, ac->n_rows);
    ck_assert_int_eq(ag->first_pos, ac->first_pos);
    for (int q = first; q < first + n; q++)
        for (int l = 0; l < ac->L; l++)
            for (int h = 0; h < ac->NH; h++) {
                const float *c = engine_attention_slot(ac, 0, q, l, h), *g = engine_attention_slot(ag, 0, q, l, h);
                ck_assert_msg(c && g, "%s: row %d not kept (cpu %p, gpu %p)", what, q, (const void *)c,
                              (const void *)g);
                for (int t = 0; t < ac->ld; t++)
                    ck_assert_msg(fabs((double)g[t] - c[t]) <= tol, "%s: row %d layer %d head %d key %d: gpu %.8f, "
                                  "cpu %.8f", what, q, l, h, t, (double)g[t], (double)c[t]);
            }
}

START_TEST(attention_capture_matches_the_cpu_in_prefill_decode_and_verification)
{
    /* Loop index: fixture x (fp32, fp16). Chunks of 8, so a prefill's kept row is in its last
     * chunk and a verification span of 12 crosses a chunk; decode steps without graphs (capture
     * on), then with them again once the capture is off. */
    const gt_model_case *mc = &gt_fixtures[_i / 2];
    cuda_engine_options co;
    cuda_engine_options_default(&co);
    co.max_chunk = 8;
    gt_pair p;
    gt_pair_open(&p, mc, _i % 2 ? TT_F16 : TT_F32, &co);
    tt_error err = {0};
    ck_assert(engine_set_attention(p.cpu, true, &err) == TT_OK);
    ck_assert(engine_set_attention(p.gpu, true, &err) == TT_OK);
    const int V = p.cpu->config->V;
    int32_t ids[40];
    for (int i = 0; i < 40; i++)
        ids[i] = (int32_t)((i * 37 + 11) % V);
    gt_pair_forward(&p, ids, 19, 0, false, "prefill of 19");
    gt_compare_attention(&p, 18, 1, "prefill of 19");
    for (int pos = 19; pos < 22; pos++) {
        gt_pair_forward(&p, ids + pos, 1, pos, false, "decode");
        gt_compare_attention(&p, pos, 1, "decode");
    }
    gt_pair_forward(&p, ids + 22, 12, 22, true, "verification span of 12");
    gt_compare_attention(&p, 22, 12, "verification span of 12");
    ck_assert(engine_set_attention(p.gpu, false, &err) == TT_OK);
    ck_assert(engine_set_attention(p.cpu, false, &err) == TT_OK);
    for (int pos = 34; pos < 37; pos++)
        gt_pair_forward(&p, ids + pos, 1, pos, false, "decode after the capture was turned off");
    gt_pair_close(&p);
}
END_TEST

/* A quantized GGUF file's default dtype (TT_GGUF: its blocks held as stored by the CPU engine)
 * is dequantized to fp16 at upload: the same logits as asking for fp16, bit for bit, and the
 * engine line says so. */
START_TEST(gguf_blocks_are_dequantized_to_fp16_at_upload)
{
    model *m;
    tt_error err = {0};
    ck_assert_msg(model_load(tu_path("%s/gguf/tiny-llama-256-q4_k_m.gguf", TU_FIXTURES), &m, &err) ==
                  TT_OK, "%s", err.msg);
    ck_assert_int_eq(m->file_dtype, TT_GGUF);
    cuda_engine_options co;
    cuda_engine_options_default(&co);
    engine_options eg = gt_engine_options(TT_GGUF), e16 = gt_engine_options(TT_F16);
    engine *g = gt_engine(m, &eg, &co), *h = gt_engine(m, &e16, &co);
    ck_assert_int_eq(g->dtype, TT_F16);
    ck_assert_msg(strstr(g->description, "Q4_K_M dequantized at upload"), "%s", g->description);
    const int32_t ids[] = {1, 17, 250, 3, 99, 100, 42};
    const int n = (int)(sizeof ids / sizeof ids[0]), V = m->config.V;
    ck_assert_msg(engine_forward(g, ids, n, 0, true, &err) == TT_OK, "%s", err.msg);
    ck_assert_msg(engine_forward(h, ids, n, 0, true, &err) == TT_OK, "%s", err.msg);
    ck_assert(memcmp(g->logits, h->logits, (size_t)n * (size_t)V * sizeof(float)) == 0);
    engine_free(g);
    engine_free(h);
    model_free(m);
}
END_TEST

/* Adds the Llama-family cases to s. */
static void gt_add_families(Suite *s)
{
    TCase *tc = tcase_create("families");
    tcase_add_loop_test(tc, llama_fixtures_match_the_cpu_over_a_session, 0, 3 * GT_N_FIXTURES);
    tcase_add_loop_test(tc, llama_fixtures_greedy_tokens_and_top_probabilities_equal_the_cpu, 0, GT_N_FIXTURES);
    tcase_add_loop_test(tc, llama_family_random_models_match_the_cpu_over_a_session, 0, 3 * GT_N_FAMILIES);
    tcase_add_loop_test(tc, llama_family_batched_rows_match_the_cpu_and_rows_run_alone, 0, GT_N_FAMILIES);
    tcase_add_loop_test(tc, llama_family_speculative_greedy_on_the_gpu_gives_the_cpu_greedy, 0, GT_N_FIXTURES);
    tcase_add_test(tc, llama_kv_cache_holds_key_value_heads_only);
    tcase_add_loop_test(tc, attention_capture_matches_the_cpu_in_prefill_decode_and_verification, 0,
                        2 * GT_N_FIXTURES);
    tcase_add_test(tc, gguf_blocks_are_dequantized_to_fp16_at_upload);
    tcase_set_timeout(tc, 300);
    suite_add_tcase(s, tc);
}

/* Adds the sequence cases to s (a separate function: other parts of this file change on their own). */
static void gt_add_sequences(Suite *s)
{
    TCase *tc = tcase_create("sequences");
    tcase_add_loop_test(tc, gpu_batched_rows_equal_the_same_rows_run_alone, 0, 6);
    tcase_add_loop_test(tc, gpu_batched_rows_match_the_cpu_batch, 0, 3);
    tcase_add_loop_test(tc, gpu_copied_sequence_continues_exactly_like_its_source, 0, 3);
    tcase_add_test(tc, gpu_empty_sequence_in_a_batch_starts_at_position_zero);
    tcase_add_test(tc, gpu_bad_batches_are_refused_and_change_nothing);
    tcase_add_loop_test(tc, gpu_beam_search_gives_the_cpu_beams, 0, 2);
    tcase_add_loop_test(tc, gpu_samples_follow_the_seed_contract, 0, 3);
    tcase_set_timeout(tc, 300);
    suite_add_tcase(s, tc);
}

/* The logit lens (core/engine/lens.h) of a GPU engine: its residual rows match the CPU engine's
 * after a prefill, a decode step (which then runs without its graph) and a span with all rows,
 * the last layer's lens is the GPU's own distribution, and every layer's lens the CPU's. Cases
 * 0-2: gt_tiny in each dtype; 3-6: the families in fp32. */
START_TEST(gpu_lens_rows_match_the_cpu_and_end_at_the_gpus_distribution)
{
    const gt_model_case *mc = _i < 3 ? &gt_tiny : &gt_families[_i - 3];
    cuda_engine_options co;
    cuda_engine_options_default(&co);
    gt_pair p;
    gt_pair_open(&p, mc, _i < 3 ? gt_dtypes[_i] : TT_F32, &co);
    const int V = p.cpu->config->V, C = p.cpu->config->C, L = p.cpu->config->L;
    tt_error err = {0};
    ck_assert(lens_enable(p.cpu, &err) == TT_OK);
    ck_assert(lens_enable(p.gpu, &err) == TT_OK);
    int32_t ids[24];
    for (int i = 0; i < 24; i++)
        ids[i] = (int32_t)((i * 37 + 11) % V);
    float *pg = malloc((size_t)(L + 1) * V * sizeof(float)), *pc = malloc((size_t)(L + 1) * V * sizeof(float));
    double *ref = malloc((size_t)(L + 1) * C * sizeof(double));
    double *own = malloc((size_t)V * sizeof(double));
    lens_layer *ly = malloc((size_t)(L + 1) * sizeof *ly);
    struct { int pos, n; bool all; const char *what; } spans[] = {
        {0, 12, false, "prefill"}, {12, 1, false, "decode step"}, {13, 5, true, "span, all rows"}};
    for (int s = 0; s < 3; s++) {
        gt_pair_forward(&p, ids + spans[s].pos, spans[s].n, spans[s].pos, spans[s].all, spans[s].what);
        ck_assert_int_eq(p.gpu->lens_pos, spans[s].pos + spans[s].n - 1);
        for (size_t i = 0; i < (size_t)(L + 1) * C; i++)
            ref[i] = p.cpu->lens[i];
        char msg[128];
        snprintf(msg, sizeof msg, "%s %s: residual rows", mc->name, spans[s].what);
        gt_close(msg, p.d, p.gpu->lens, ref, (size_t)(L + 1) * C, p.tol, p.eps);
        ck_assert(lens_engine_layers(p.gpu, 5, -1, ly, pg, &err) == TT_OK);
        ck_assert(lens_engine_layers(p.cpu, 5, -1, ly, pc, &err) == TT_OK);
        gt_softmax(engine_logits(p.gpu, p.gpu->n_logits - 1), V, own);
        double worst_own = 0, worst_cpu = 0;
        for (int v = 0; v < V; v++) {
            double d = fabs(pg[(size_t)L * V + v] - own[v]);
            worst_own = d > worst_own ? d : worst_own;
        }
        for (size_t i = 0; i < (size_t)(L + 1) * V; i++) {
            double d = fabs((double)pg[i] - pc[i]);
            worst_cpu = d > worst_cpu ? d : worst_cpu;
        }
        /* fp32: both lenses read the same rows; fp16/bf16: the GPU rounds its final norm's output
         * to the dtype before its head, the lens does not */
        double bound = p.d == TT_F32 ? 1e-5 : p.d == TT_F16 ? 1e-3 : 1e-2;
        ck_assert_msg(worst_own <= bound, "%s %s: the last layer's lens is %.3g from the GPU's "
                      "distribution", mc->name, spans[s].what, worst_own);
        ck_assert_msg(worst_cpu <= bound, "%s %s: the GPU's lens is %.3g from the CPU's", mc->name,
                      spans[s].what, worst_cpu);
    }
    free(pg);
    free(pc);
    free(ref);
    free(own);
    free(ly);
    gt_pair_close(&p);
}
END_TEST

/* Adds the shared cases to s (timeouts generous: the emulation and sanitizers are slow). Loop
 * tests of 3 run once per dtype of gt_dtypes. */
static void gt_add_common(Suite *s)
{
    TCase *tc = tu_add_case(s, "semantics", TU_TESTS(
            gemm_rejects_leading_dimension_smaller_than_rows, block_reductions_sum_and_max,
            graph_replay_keeps_launch_arguments_and_reads_pinned_input));
    tcase_add_loop_test(tc, gemm_follows_column_major_semantics, 0, 4);
    tcase_set_timeout(tc, 120);

    tc = tu_add_loop_case(s, "ops", 3, TU_TESTS(
            embed_adds_token_and_position_rows, lm_head_uses_the_embedding_transposed,
            causal_softmax_masks_the_future, prefill_attention_matches_reference,
            gemv_rows_do_not_depend_on_the_other_rows,
            decode_attention_matches_reference, ops_match_their_cpu_twins));
    tcase_add_loop_test(tc, layernorm_adds_pending_bias_and_normalizes, 0, 9);
    tcase_add_loop_test(tc, gelu_adds_bias_then_activates, 0, 6);
    tcase_add_loop_test(tc, matmul_is_x_times_conv1d_weight, 0, 6);
    tcase_add_loop_test(tc, fused_ffn_up_equals_matmul_then_activation, 0, 9);
    tcase_set_timeout(tc, 120);

    tc = tu_add_loop_case(s, "engine", 3, TU_TESTS(
            engine_matches_cpu_over_a_session,
            engine_matches_cpu_without_graphs_and_with_small_chunks,
            engine_matches_cpu_on_other_model_shapes, greedy_generations_are_identical,
            graphs_on_and_off_give_identical_logits, all_rows_of_a_span_equal_step_by_step_logits,
            long_context_decode_crosses_key_chunks));
    tcase_add_test(tc, full_context_is_refused_and_the_engine_goes_on);
    tcase_add_test(tc, profile_times_each_op_of_steps_without_a_graph);
    tcase_add_test(tc, two_engines_interleave_like_draft_and_target);
    tcase_add_loop_test(tc, gpu_lens_rows_match_the_cpu_and_end_at_the_gpus_distribution, 0,
                        3 + GT_N_FAMILIES);
    tcase_set_timeout(tc, 300);
}

#endif
