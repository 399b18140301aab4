/* check_kernels.c: packed weights hold what the tensors hold, every SIMD kernel set computes what
 * the reference kernels compute (on odd shapes, for each dtype and epilogue; the amx set's BF16
 * matmuls against the reference over the same bf16-rounded activations, and against a float64
 * sum), and in every set a row's result is the same bits whatever rows are computed with it. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arch/block_math.h"
#include "core/cpu/kernels.h"
#include "core/base/rng.h"
#include "tests/kernel_sets.h"
#include "tests/testutil.h"

static float urand(rng *g, float lo, float hi)
{
    return lo + (hi - lo) * (float)rng_uniform(g);
}

static float *rand_floats(rng *g, size_t n, float lo, float hi)
{
    float *v = malloc(n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < n; i++)
        v[i] = urand(g, lo, hi);
    return v;
}

/* Under CI a set the CPU runs must be tested, not skipped. */
static bool under_ci(void)
{
    const char *ci = getenv("CI");
    return ci && strcmp(ci, "true") == 0;
}

/* a's rows quantized for a Q8 matmul (kernels_quantize_rows) and rounded to bf16 for a set's
 * BF16 matmul that reads them (kernels_bf16_rows), both in one buffer the caller frees; set for
 * every dtype and set (the others ignore them). */
static kernels_q8_act *quantize_args(matmul_args *a)
{
    const int KB = KERNELS_Q8_ACT_BLOCKS(a->w->K), ldxb = a->w->K + 5;
    kernels_q8_act *xq = malloc((size_t)a->T * (size_t)KB * sizeof *xq +
                                (size_t)a->T * (size_t)ldxb * sizeof(uint16_t));
    ck_assert_ptr_nonnull(xq);
    kernels_quantize_rows(a->x, a->ldx, a->w->K, 0, a->T, xq, KB);
    a->xq = xq;
    a->ldxq = KB;
    uint16_t *xb = (uint16_t *)(xq + (size_t)a->T * (size_t)KB);
    kernels_bf16_rows(a->x, a->ldx, a->w->K, 0, a->T, xb, ldxb);
    a->xb = xb;
    a->ldxb = ldxb;
    return xq;
}

/* Whether set k's matmul over dtype d multiplies bf16-rounded activations (kernels.h). */
static bool rounds_activations(const kernels *k, tt_dtype d)
{
    return d == TT_BF16 && k->bf16_rows;
}

/* ---------------------------------------------------------------------------------------------
 * Packing */

/* The padding columns past N are zero, so the kernels may read whole panels. */
static void assert_padding_zero(const packed_matrix *m, int K, int N)
{
    for (int k = 0; k < K; k++)
        for (int n = N; n < m->n_panels * 32; n++)
            ck_assert(packed_matrix_get(m, k, n) == 0.0f);
}

START_TEST(packed_matrix_holds_rounded_source_values)
{
    static const int shapes[][2] = {{1, 1}, {7, 33}, {64, 64}, {99, 17}, {130, 100}};
    rng g;
    rng_seed(&g, 11);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int K = shapes[s][0], N = shapes[s][1];
        float *w = rand_floats(&g, (size_t)K * (size_t)N, -3.0f, 3.0f);
        for (tt_dtype d = TT_F32; d <= TT_BF16; d++)
            for (int tr = 0; tr < 2; tr++) {
                packed_matrix m;
                ck_assert_int_eq(packed_matrix_init(&m, d, K, N, NULL), TT_OK);
                tensor_ref src = {.data = w, .dtype = TT_F32};
                /* Two calls over a split at a panel boundary, as the threads do. */
                int mid = N > 32 ? 32 : N;
                packed_matrix_pack(&m, src, tr, 0, mid);
                packed_matrix_pack(&m, src, tr, mid, N);
                ck_assert_int_eq(m.n_panels, (N + 31) / 32);
                for (int k = 0; k < K; k++)
                    for (int n = 0; n < N; n++) {
                        float want = tt_held_f32(d, tr ? w[(size_t)n * K + k] : w[(size_t)k * N + n]);
                        ck_assert_msg(packed_matrix_get(&m, k, n) == want,
                                      "%s %dx%d transposed=%d (%d,%d): got %g want %g",
                                      tt_dtype_name(d), K, N, tr, k, n,
                                      packed_matrix_get(&m, k, n), want);
                    }
                assert_padding_zero(&m, K, N);
                packed_matrix_free(&m);
                ck_assert_ptr_null(m.data);
            }
        free(w);
    }
}
END_TEST

/* Raw element (k, column c) of an F16 or F32 matrix's panels. */
static void packed_raw(const packed_matrix *m, int k, int c, void *out)
{
    const size_t es = tt_dtype_size(m->dtype);
    memcpy(out, (const unsigned char *)m->data +
                ((size_t)(c / 32) * m->panel_elems + (size_t)k * 32 + (size_t)(c % 32)) * es, es);
}

/* An F16 or F32 source packed into the same dtype holds exactly the bits converting each element
 * through fp32 gives (the GGUF loader's copy path must not change a weight): NaNs with payloads,
 * infinities, subnormals and negative zero included, at any column offset, transposed or not, and
 * through llama.cpp's q/k row order. */
START_TEST(packing_a_source_in_its_own_dtype_keeps_its_bits)
{
    static const int shapes[][4] = {           /* K, N, src_N, col0 */
        {1, 1, 1, 0}, {7, 33, 33, 0}, {64, 64, 24, 8}, {99, 100, 61, 37}, {130, 96, 64, 32},
        {16, 72, 40, 29},
    };
    static const uint16_t special16[] = {0x7c01, 0xfe37, 0x7fff, 0x7c00, 0xfc00, 0x0001,
                                         0x83ff, 0x8000, 0x7bff, 0x7e00};
    static const uint32_t special32[] = {0x7f800001u, 0xffc01234u, 0x7f800000u, 0x00000001u,
                                         0x80000000u};
    rng g;
    rng_seed(&g, 21);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int K = shapes[s][0], N = shapes[s][1], SN = shapes[s][2], col0 = shapes[s][3];
        for (tt_dtype d = TT_F32; d <= TT_F16; d++)
            for (int tr = 0; tr < 2; tr++)
                for (int hs = 0; hs <= (tr && SN % 8 == 0 ? 8 : 0); hs += 8) {
                    const size_t es = tt_dtype_size(d), n_el = (size_t)K * (size_t)SN;
                    unsigned char *src = malloc(n_el * es);
                    ck_assert_ptr_nonnull(src);
                    for (size_t i = 0; i < n_el; i++) {
                        float v = (float)(rng_uniform(&g) - 0.5) * 8.0f;
                        if (d == TT_F16) {
                            uint16_t h = i % 5 == 0 ? special16[i / 5 % 10] : tt_f32_to_f16(v);
                            memcpy(src + 2 * i, &h, 2);
                        } else {
                            uint32_t b = i % 5 == 0 ? special32[i / 5 % 5] : 0;
                            memcpy(src + 4 * i, i % 5 == 0 ? (void *)&b : (void *)&v, 4);
                        }
                    }
                    tensor_ref t = {.data = src, .dtype = d, .in_out = !tr,
                                    .row_len = tr ? K : 0, .head_rows = hs};
                    packed_matrix m;
                    ck_assert_int_eq(packed_matrix_init(&m, d, K, N, NULL), TT_OK);
                    int mid = SN > 8 ? 8 : SN;    /* two calls, the first ending mid-group */
                    packed_matrix_pack_at(&m, t, tr, SN, col0, 0, mid);
                    packed_matrix_pack_at(&m, t, tr, SN, col0, mid, SN);
                    for (int k = 0; k < K; k++)
                        for (int c = 0; c < m.n_panels * 32; c++) {
                            uint32_t got = 0, want = 0;
                            packed_raw(&m, k, c, &got);
                            int n = c - col0;
                            if (n >= 0 && n < SN) {
                                float f;
                                if (tr)
                                    tensor_ref_to_f32(t, (size_t)n * K + (size_t)k, 1, &f);
                                else
                                    tensor_ref_to_f32(t, (size_t)k * SN + (size_t)n, 1, &f);
                                if (d == TT_F16) {
                                    uint16_t h = tt_f32_to_f16(f);
                                    memcpy(&want, &h, 2);
                                } else {
                                    memcpy(&want, &f, 4);
                                }
                            }
                            ck_assert_msg(got == want, "%s %dx%d (src %d at %d) transposed=%d "
                                          "head_rows=%d (%d,%d): got 0x%x want 0x%x",
                                          tt_dtype_name(d), K, N, SN, col0, tr, hs, k, c, got,
                                          want);
                        }
                    packed_matrix_free(&m);
                    free(src);
                }
    }
}
END_TEST

/* A GGUF Q8_0 tensor (N, K) packed into Q8 keeps every block's scale and integers as stored. */
START_TEST(q8_0_tensors_pack_into_q8_as_stored)
{
    enum { K = 96, SN = 40, N = 77, COL0 = 21, BB = 34 };
    uint8_t src[SN * (K / 32) * BB];
    rng g;
    rng_seed(&g, 22);
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (uint8_t)(rng_next(&g) >> 56);
    for (int hs = 0; hs <= 8; hs += 8) {
        tensor_ref t = {.data = src, .dtype = TT_F32, .quantized = true, .quant = QUANT_Q8_0,
                        .row_len = K, .head_rows = hs};
        packed_matrix m;
        ck_assert_int_eq(packed_matrix_init(&m, TT_Q8, K, N, NULL), TT_OK);
        packed_matrix_pack_at(&m, t, true, SN, COL0, 0, 13);
        packed_matrix_pack_at(&m, t, true, SN, COL0, 13, SN);
        for (int n = 0; n < SN; n++) {
            const uint8_t *row = tensor_ref_row(t, (size_t)n);
            for (int k = 0; k < K; k++) {
                const uint8_t *blk = row + (size_t)(k / 32) * BB;
                uint16_t h;
                memcpy(&h, blk, 2);
                float want = (float)(int8_t)blk[2 + k % 32] * tt_f16_to_f32(h);
                float got = packed_matrix_get(&m, k, COL0 + n);
                ck_assert_msg(got == want || (isnan(got) && isnan(want)),
                              "head_rows=%d (%d,%d): got %g want %g", hs, k, n, got, want);
            }
        }
        for (int k = 0; k < K; k++)
            for (int c = 0; c < m.n_panels * 32; c++)
                if (c < COL0 || c >= COL0 + SN)
                    ck_assert(packed_matrix_get(&m, k, c) == 0.0f);
        packed_matrix_free(&m);
    }
}
END_TEST

/* The Q8 value packing must hold for w, a block's values over k of one column being block[0..n):
 * scale fp16(max |w| / 127), integer round-to-nearest(w / scale) in [-127, 127]. */
static float q8_expected(const float *block, int n, float w)
{
    float amax = 0.0f;
    for (int i = 0; i < n; i++)
        amax = fmaxf(amax, fabsf(block[i]));
    float s = tt_f16_to_f32(tt_f32_to_f16(amax / 127.0f));
    if (s == 0.0f)
        return 0.0f;
    float q = nearbyintf(w / s);
    q = q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
    return q * s;
}

START_TEST(q8_packing_rounds_each_weight_to_its_block_scale)
{
    static const int shapes[][2] = {{1, 1}, {7, 33}, {32, 32}, {33, 17}, {99, 64}, {130, 100}};
    rng g;
    rng_seed(&g, 12);
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        const int K = shapes[sh][0], N = shapes[sh][1];
        float *w = rand_floats(&g, (size_t)K * (size_t)N, -3.0f, 3.0f);
        for (int k = 0; k < K; k += 5)           /* blocks of very different magnitudes */
            for (int n = 0; n < N; n++)
                w[(size_t)k * N + n] *= (float)(1 + (k + n) % 7) * 10.0f;
        float col[32];
        for (int tr = 0; tr < 2; tr++) {
            packed_matrix m;
            ck_assert_int_eq(packed_matrix_init(&m, TT_Q8, K, N, NULL), TT_OK);
            /* (K, N), or the same matrix stored (N, K) */
            float *src = malloc((size_t)K * N * sizeof(float));
            for (int k = 0; k < K; k++)
                for (int n = 0; n < N; n++)
                    src[tr ? (size_t)n * K + k : (size_t)k * N + n] = w[(size_t)k * N + n];
            int mid = N > 32 ? 32 : N;
            packed_matrix_pack(&m, (tensor_ref){.data = src, .dtype = TT_F32}, tr, 0, mid);
            packed_matrix_pack(&m, (tensor_ref){.data = src, .dtype = TT_F32}, tr, mid, N);
            ck_assert_uint_eq(packed_matrix_bytes(TT_Q8, K, N),
                              (size_t)m.n_panels * ((K + 31) / 32) * (64 + 1024));
            for (int n = 0; n < N; n++)
                for (int k0 = 0; k0 < K; k0 += 32) {
                    int kc = K - k0 < 32 ? K - k0 : 32;
                    for (int i = 0; i < kc; i++)
                        col[i] = w[(size_t)(k0 + i) * N + n];
                    for (int i = 0; i < kc; i++) {
                        float got = packed_matrix_get(&m, k0 + i, n);
                        float want = q8_expected(col, kc, col[i]);
                        ck_assert_msg(got == want, "q8 %dx%d transposed=%d (%d,%d): got %g want %g "
                                      "(source %g)", K, N, tr, k0 + i, n, got, want, col[i]);
                    }
                }
            assert_padding_zero(&m, K, N);
            packed_matrix_free(&m);
            free(src);
        }
        free(w);
    }
}
END_TEST

/* Block b of row t quantized as kernels.h defines it: d = max|x| / 127, q = nearest-even(x / d);
 * a block with an inf or a NaN: d NaN, q 0. */
static void q8_act_expected(const float *x, int K, int b, float *d, int8_t *q)
{
    const int k0 = b * 32, kc = K - k0 < 32 ? K - k0 : 32;
    float amax = 0.0f;
    bool finite = true;
    for (int i = 0; i < kc; i++) {
        amax = fmaxf(amax, fabsf(x[k0 + i]));
        finite = finite && isfinite(x[k0 + i]);
    }
    *d = finite ? amax / 127.0f : NAN;
    for (int i = 0; i < 32; i++)
        q[i] = i < kc && *d > 0.0f ? (int8_t)nearbyintf(x[k0 + i] * (1.0f / *d)) : 0;
}

START_TEST(q8_activations_round_each_block_to_its_scale)
{
    const kernels *sets[8];
    int ns = tu_kernel_sets(sets, true);
    static const int Ks[] = {1, 31, 32, 33, 100, 130};
    rng g;
    rng_seed(&g, 32);
    for (int s = 0; s < ns; s++)
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
            const int K = Ks[ki], T = 4, ldx = K + 2, KB = (K + 31) / 32;
            float *x = rand_floats(&g, (size_t)T * ldx, -4.0f, 4.0f);
            for (int i = 0; i < K && i < 32; i++)
                x[i] = 0.0f;                   /* row 0's first block: all zero */
            x[(size_t)1 * ldx + K - 1] = (ki % 2) ? INFINITY : NAN;     /* row 1's last block */
            x[(size_t)2 * ldx + K / 2] = 0.5f + (float)ki;              /* a tie: x / d = n.5 */
            kernels_q8_act *xq = malloc((size_t)T * (KB + 1) * sizeof *xq);
            sets[s]->quantize_rows(x, ldx, K, 0, T, xq, KB + 1);
            for (int t = 0; t < T; t++)
                for (int b = 0; b < KB; b++) {
                    const kernels_q8_act *got = &xq[(size_t)t * (KB + 1) + b];
                    float d;
                    int8_t q[32];
                    q8_act_expected(x + (size_t)t * ldx, K, b, &d, q);
                    int sum = 0;
                    for (int i = 0; i < 32; i++)
                        sum += q[i];
                    ck_assert_msg((got->d == d || (isnan(d) && isnan(got->d))) &&
                                      memcmp(got->q, q, 32) == 0 && got->sum128 == 128 * sum,
                                  "%s K=%d row %d block %d: d %g want %g, sum128 %d want %d",
                                  sets[s]->name, K, t, b, got->d, d, got->sum128, 128 * sum);
                }
            free(x);
            free(xq);
        }
}
END_TEST

START_TEST(q8_matmul_is_the_block_formula_in_every_set)
{
    /* kernels.h's definition, written out here in scalar C: exact integer block sums, one fma per
     * block. Every set must give exactly these bits, one row (decode) or many (tiles). And the
     * result stays close to the fp32 matmul over the dequantized weights (the activations'
     * 8 bits are the only difference). */
    const kernels *sets[8];
    int ns = tu_kernel_sets(sets, true);
    static const int Ts[] = {1, 3, 30};
    static const int Ks[] = {5, 32, 70};
    rng g;
    rng_seed(&g, 31);
    for (int s = 0; s < ns; s++)
        for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++)
            for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
                const int T = Ts[ti], K = Ks[ki], N = 150, ldx = K, ldo = N, KB = (K + 31) / 32;
                float *x = rand_floats(&g, (size_t)T * ldx, -1.0f, 1.0f);
                float *w = rand_floats(&g, (size_t)K * N, -1.0f, 1.0f);
                float *o8 = calloc((size_t)T * ldo, sizeof(float));
                packed_matrix q;
                ck_assert_int_eq(packed_matrix_init(&q, TT_Q8, K, N, NULL), TT_OK);
                packed_matrix_pack(&q, (tensor_ref){.data = w, .dtype = TT_F32}, false, 0, N);
                matmul_args a = {.out = o8, .ldo = ldo, .x = x, .ldx = ldx, .w = &q, .T = T,
                                 .epilogue = MM_STORE};
                kernels_q8_act *xq = quantize_args(&a);
                sets[s]->matmul(&a, 0, q.n_panels, NULL);
                for (int t = 0; t < T; t++)
                    for (int n = 0; n < N; n++) {
                        float c = 0.0f, exact = 0.0f;
                        for (int b = 0; b < KB; b++) {
                            float d;
                            int8_t xi[32];
                            q8_act_expected(x + (size_t)t * ldx, K, b, &d, xi);
                            /* the column's fp16 block scale from the packed bytes; each
                             * weight is its integer times it, exactly */
                            const uint16_t *scales = (const uint16_t *)((const char *)q.data +
                                (size_t)(n / 32) * q.panel_elems + (size_t)b * KERNELS_Q8_BLOCK_BYTES);
                            const float sc = tt_f16_to_f32(scales[n % 32]);
                            int sum = 0;
                            for (int i = 0; i < 32 && b * 32 + i < K; i++) {
                                float wv = packed_matrix_get(&q, b * 32 + i, n);
                                sum += (sc > 0.0f ? (int)(wv / sc) : 0) * xi[i];
                                exact += wv * x[(size_t)t * ldx + b * 32 + i];
                            }
                            c = fmaf(sc * d, (float)sum, c);
                        }
                        float got = o8[(size_t)t * ldo + n];
                        ck_assert_msg(got == c, "%s T=%d K=%d (%d,%d): got %.9g want %.9g",
                                      sets[s]->name, T, K, t, n, got, c);
                        ck_assert_msg(fabsf(got - exact) <= 0.02f * (1.0f + sqrtf((float)K)),
                                      "%s T=%d K=%d (%d,%d): %g far from %g", sets[s]->name, T, K,
                                      t, n, got, exact);
                    }
                packed_matrix_free(&q);
                free(xq);
                free(x);
                free(w);
                free(o8);
            }
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Matmul */

static void check_matmul_case(const kernels *simd, rng *g, int T, int K, int N, tt_dtype d,
                              mm_epilogue ep, bool with_bias, float bias_scale)
{
    int ldx = K + 3, ldo = N + 5;
    float *x = rand_floats(g, (size_t)T * ldx, -1.0f, 1.0f);
    float *w = rand_floats(g, (size_t)K * N, -1.0f, 1.0f);
    float *b = rand_floats(g, (size_t)N, -bias_scale, bias_scale);
    float *init = rand_floats(g, (size_t)T * ldo, -1.0f, 1.0f);
    float *o_ref = malloc((size_t)T * ldo * sizeof(float));
    float *o_simd = malloc((size_t)T * ldo * sizeof(float));
    memcpy(o_ref, init, (size_t)T * ldo * sizeof(float));
    memcpy(o_simd, init, (size_t)T * ldo * sizeof(float));
    packed_matrix m;
    ck_assert_int_eq(packed_matrix_init(&m, d, K, N, NULL), TT_OK);
    packed_matrix_pack(&m, (tensor_ref){.data = w, .dtype = TT_F32}, false, 0, N);

    matmul_args a = {.out = o_ref, .ldo = ldo, .x = x, .ldx = ldx, .w = &m,
                     .bias = with_bias ? b : NULL, .T = T, .epilogue = ep};
    kernels_q8_act *xq = quantize_args(&a);
    /* A set that rounds the activations is held to the reference over the rounded values. */
    float *xr = malloc((size_t)T * ldx * sizeof(float));
    for (size_t i = 0; i < (size_t)T * ldx; i++)
        xr[i] = rounds_activations(simd, d) ? tt_bf16_to_f32(tt_f32_to_bf16(x[i])) : x[i];
    a.x = xr;
    kernels_reference()->matmul(&a, 0, m.n_panels, NULL);
    a.x = x;
    free(xr);
    a.out = o_simd;
    /* Split the panels in two calls, as the threads do; with and without scratch. */
    float *scratch = aligned_alloc(64, (KERNELS_MATMUL_SCRATCH(K) * sizeof(float) + 63) & ~63ul);
    int mid = m.n_panels / 2;
    simd->matmul(&a, 0, mid, scratch);
    simd->matmul(&a, mid, m.n_panels, (T + K) % 2 ? scratch : NULL);
    free(scratch);
    free(xq);

    for (int t = 0; t < T; t++)
        for (int n = 0; n < ldo; n++) {
            float r = o_ref[(size_t)t * ldo + n], s = o_simd[(size_t)t * ldo + n];
            if (n >= N) {               /* columns past N are never written */
                ck_assert_msg(s == init[(size_t)t * ldo + n], "%s wrote past N=%d", simd->name, N);
                continue;
            }
            float tol = 1e-5f * (1.0f + (float)K * 0.1f) + 1e-5f * fabsf(r);
            ck_assert_msg(fabsf(r - s) <= tol && !isnan(s),
                          "%s %s T=%d K=%d N=%d ep=%d bias=%d: (%d,%d) reference %.8g simd %.8g",
                          simd->name, tt_dtype_name(d), T, K, N, (int)ep, with_bias, t, n, r, s);
        }
    packed_matrix_free(&m);
    free(x);
    free(w);
    free(b);
    free(init);
    free(o_ref);
    free(o_simd);
}

START_TEST(simd_matmul_matches_reference_on_odd_shapes)
{
    const kernels *sets[8];
    int ns = tu_kernel_sets(sets, false);
    static const int Ts[] = {1, 2, 5, 12, 13, 25, 37};
    static const int Ks[] = {1, 2, 7, 64, 99, 130};
    static const int Ns[] = {1, 15, 16, 17, 31, 33, 100};
    rng g;
    rng_seed(&g, 5);
    for (int s = 0; s < ns; s++)
        for (tt_dtype d = TT_F32; d <= TT_Q8; d++)
            for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++)
                for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++)
                    for (size_t ni = 0; ni < sizeof Ns / sizeof Ns[0]; ni++) {
                        mm_epilogue ep = (mm_epilogue)((ti + ki + ni) % 4);
                        check_matmul_case(sets[s], &g, Ts[ti], Ks[ki], Ns[ni], d, ep,
                                          (ki + ni) % 2 == 0, 1.0f);
                    }
}
END_TEST

START_TEST(matmul_rows_do_not_depend_on_the_rows_beside_them)
{
    /* Batch invariance: row t of x W + b must be the same bits whether it is computed alone (the
     * decode GEMV), in a tile of any height, at any row offset, and whatever panel ranges the
     * threads take. Speculative verification and prefix reuse rely on it (tokens identical to
     * one-at-a-time decoding), so the comparison is memcmp, not a tolerance. */
    const kernels *sets[8];
    int ns = tu_kernel_sets(sets, true);
    static const int Ks[] = {1, 7, 36, 64, 99, 130};
    static const int Ns[] = {17, 100, 301};
    const int T = 80;   /* 6 tiles of 12 and one of 8; AMX: blocks of 32, 32 and 16 rows */
    rng g;
    rng_seed(&g, 21);
    for (int s = 0; s < ns; s++)
        for (tt_dtype d = TT_F32; d <= TT_Q8; d++)
            for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++)
                for (size_t ni = 0; ni < sizeof Ns / sizeof Ns[0]; ni++) {
                    const int K = Ks[ki], N = Ns[ni], ldx = K + 1, ldo = N + 3;
                    const mm_epilogue ep = (mm_epilogue)((ki + ni + (size_t)d) % 4);
                    float *x = rand_floats(&g, (size_t)T * ldx, -1.0f, 1.0f);
                    float *w = rand_floats(&g, (size_t)K * N, -1.0f, 1.0f);
                    float *b = rand_floats(&g, (size_t)N, -1.0f, 1.0f);
                    float *init = rand_floats(&g, (size_t)T * ldo, -1.0f, 1.0f);
                    float *all = malloc((size_t)T * ldo * sizeof(float));
                    float *part = malloc((size_t)T * ldo * sizeof(float));
                    float *scratch = aligned_alloc(64, (KERNELS_MATMUL_SCRATCH(K) * sizeof(float) +
                                                        63) & ~(size_t)63);
                    packed_matrix m;
                    ck_assert_int_eq(packed_matrix_init(&m, d, K, N, NULL), TT_OK);
                    packed_matrix_pack(&m, (tensor_ref){.data = w, .dtype = TT_F32}, false, 0, N);
                    memcpy(all, init, (size_t)T * ldo * sizeof(float));
                    matmul_args a = {.out = all, .ldo = ldo, .x = x, .ldx = ldx, .w = &m,
                                     .bias = ni % 2 ? NULL : b, .T = T, .epilogue = ep};
                    kernels_q8_act *xq = quantize_args(&a);
                    sets[s]->matmul(&a, 0, m.n_panels, scratch);
                    /* The same rows in groups of 1, 2, 5, 1, 13, ...: each group one call (every
                     * height a batched decode step takes, 1-11 rows below a full AVX-512 tile,
                     * 7, 8 and 9 around the 8-row step), its panels split at an odd place
                     * (single panels, pairs, groups of four). */
                    static const int groups[] = {1, 2, 5, 1, 13, 7, 8, 9, 3, 4, 6, 10, 11};
                    const size_t n_groups = sizeof groups / sizeof groups[0];
                    memcpy(part, init, (size_t)T * ldo * sizeof(float));
                    int t0 = 0;
                    for (size_t gi = 0; t0 < T; gi++) {
                        int rows = groups[gi % n_groups] < T - t0 ? groups[gi % n_groups] : T - t0;
                        matmul_args pa = a;
                        pa.out = part + (size_t)t0 * ldo;
                        pa.x = x + (size_t)t0 * ldx;
                        pa.xq = xq + (size_t)t0 * (size_t)a.ldxq;
                        pa.xb = a.xb + (size_t)t0 * (size_t)a.ldxb;
                        pa.T = rows;
                        int cut = (int)(gi % 3) < m.n_panels ? (int)(gi % 3) : m.n_panels;
                        sets[s]->matmul(&pa, 0, cut, gi % 2 ? scratch : NULL);
                        sets[s]->matmul(&pa, cut, m.n_panels, scratch);
                        t0 += rows;
                    }
                    for (int t = 0; t < T; t++)
                        ck_assert_msg(memcmp(all + (size_t)t * ldo, part + (size_t)t * ldo,
                                             (size_t)ldo * sizeof(float)) == 0,
                                      "%s %s K=%d N=%d ep=%d: row %d differs when computed in "
                                      "smaller groups", sets[s]->name, tt_dtype_name(d), K, N,
                                      (int)ep, t);
                    packed_matrix_free(&m);
                    free(xq);
                    free(x);
                    free(w);
                    free(b);
                    free(init);
                    free(all);
                    free(part);
                    free(scratch);
                }
}
END_TEST

START_TEST(simd_gelu_saturates_like_the_formula)
{
    /* Pre-activations far outside [-10, 10]: the vector exp must saturate, not turn into NaN. */
    const kernels *sets[8];
    int ns = tu_kernel_sets(sets, false);
    rng g;
    rng_seed(&g, 6);
    for (int s = 0; s < ns; s++)
        for (tt_dtype d = TT_F32; d <= TT_Q8; d++) {
            check_matmul_case(sets[s], &g, 3, 8, 40, d, MM_GELU_TANH, true, 200.0f);
            check_matmul_case(sets[s], &g, 1, 8, 40, d, MM_GELU_ERF, true, 200.0f);
        }
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Attention */

/* A head's key positions for a cache of n_ctx: whole blocks (kernels_key_at), and one spare block
 * of random keys past them that no query may read. */
static int key_positions(int n_ctx)
{
    return (n_ctx + KERNELS_KEY_BLOCK - 1) / KERNELS_KEY_BLOCK * KERNELS_KEY_BLOCK +
           KERNELS_KEY_BLOCK;
}

START_TEST(simd_attention_matches_reference)
{
    static const struct { int T, pos, NH, HS; } cases[] = {
        {1, 0, 1, 1}, {1, 37, 2, 64}, {5, 0, 3, 12}, {7, 9, 2, 7}, {17, 30, 4, 16},
        {33, 0, 2, 64}, {3, 100, 1, 40}, {2, 130, 2, 64}, {21, 45, 3, 33}, {16, 0, 1, 80},
    };
    const kernels *sets[8];
    int ns = tu_kernel_sets(sets, false);
    rng g;
    rng_seed(&g, 9);
    for (int s = 0; s < ns; s++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            const int T = cases[c].T, pos = cases[c].pos, NH = cases[c].NH, HS = cases[c].HS;
            const int C = NH * HS, n_ctx = pos + T + 3, ldk = key_positions(n_ctx);
            float *q = rand_floats(&g, (size_t)T * 3 * C, -2.0f, 2.0f);
            float *k = rand_floats(&g, (size_t)NH * ldk * HS, -2.0f, 2.0f);     /* kernels_key_at */
            float *v = rand_floats(&g, (size_t)NH * n_ctx * HS, -2.0f, 2.0f);
            float *o_ref = calloc((size_t)T * C, sizeof(float));
            float *o_simd = calloc((size_t)T * C, sizeof(float));
            float *scratch = malloc(KERNELS_ATTN_SCRATCH(n_ctx) * sizeof(float));
            attention_args a = {.q = q, .ldq = 3 * C, .k = k, .v = v, .n_ctx = n_ctx, .ldk = ldk,
                                .out = o_ref, .ldo = C, .T = T, .pos = pos, .NH = NH, .HS = HS};
            for (int h = 0; h < NH; h++)
                kernels_reference()->attention(&a, h, 0, T, scratch);
            a.out = o_simd;
            for (int h = 0; h < NH; h++) {      /* rows in two pieces */
                sets[s]->attention(&a, h, 0, T / 2, scratch);
                sets[s]->attention(&a, h, T / 2, T, scratch);
            }
            for (int i = 0; i < T * C; i++)
                ck_assert_msg(fabsf(o_ref[i] - o_simd[i]) <= 1e-5f * (1.0f + fabsf(o_ref[i])),
                              "%s T=%d pos=%d NH=%d HS=%d [%d]: reference %.8g simd %.8g",
                              sets[s]->name, T, pos, NH, HS, i, o_ref[i], o_simd[i]);
            free(q);
            free(k);
            free(v);
            free(o_ref);
            free(o_simd);
            free(scratch);
        }
}
END_TEST

/* Random q, keys and values for T query rows at positions pos.. (NH query heads over NKV KV
 * heads of HS), attention by set ks over the whole span, then row by row as decode steps compute
 * them (each head told the next one follows when hint; with grouped, each KV head's query heads
 * together through ks->attention_heads): each row's bits must be the span's. */
static void check_rows_alone_as_in_span(const kernels *ks, rng *g, int T, int pos, int NH,
                                        int NKV, int HS, bool hint, bool grouped)
{
    const int G = NH / NKV;
    const int C = NH * HS, n_ctx = pos + T, ldk = key_positions(n_ctx);
    float *q = rand_floats(g, (size_t)T * C, -2.0f, 2.0f);
    float *k = rand_floats(g, (size_t)NKV * ldk * HS, -2.0f, 2.0f);
    float *v = rand_floats(g, (size_t)NKV * n_ctx * HS, -2.0f, 2.0f);
    float *o_all = calloc((size_t)T * C, sizeof(float));
    float *o_one = calloc((size_t)T * C, sizeof(float));
    float *scratch = malloc(KERNELS_ATTN_SCRATCH(n_ctx) * sizeof(float));
    attention_args a = {.q = q, .ldq = C, .k = k, .v = v, .n_ctx = n_ctx, .ldk = ldk,
                        .out = o_all, .ldo = C, .T = T, .pos = pos, .NH = NH, .HS = HS,
                        .NKV = NKV};
    for (int h = 0; h < NH; h++)
        ks->attention(&a, h, 0, T, scratch);
    /* Row i alone, as the decode step at position pos + i computes it. */
    for (int i = 0; i < T; i++) {
        attention_args one = a;
        one.q = q + (size_t)i * C;
        one.out = o_one + (size_t)i * C;
        one.pos = pos + i;
        one.T = 1;
        if (grouped) {
            for (int h = 0; h < NH; h += G)
                ks->attention_heads(&one, h, G, 0, scratch);
            continue;
        }
        for (int h = 0; h < NH; h++) {
            one.next_head = hint && h + 1 < NH;
            ks->attention(&one, h, 0, 1, scratch);
        }
    }
    for (int i = 0; i < T; i++)
        ck_assert_msg(memcmp(o_all + (size_t)i * C, o_one + (size_t)i * C,
                             (size_t)C * sizeof(float)) == 0,
                      "%s T=%d pos=%d NH=%d NKV=%d HS=%d%s: row %d alone differs from the same "
                      "row in the span", ks->name, T, pos, NH, NKV, HS,
                      grouped ? " (grouped heads)" : hint ? " (hinted)" : "", i);
    free(q);
    free(k);
    free(v);
    free(o_all);
    free(o_one);
    free(scratch);
}

START_TEST(attention_rows_do_not_depend_on_the_rows_beside_them)
{
    /* A query row's output must be the same bits computed alone (decode) or inside a tile of
     * rows (prefill, verification), at any position. Spans of 2-7 rows are the speculative
     * verifications: one tile of that height. */
    static const struct { int T, pos, NH, HS; } cases[] = {
        {19, 0, 2, 12}, {17, 5, 1, 64}, {9, 130, 2, 33}, {24, 1, 1, 7}, {40, 256, 1, 64},
        {2, 37, 2, 64}, {3, 0, 1, 48}, {4, 100, 4, 64}, {5, 17, 2, 33}, {6, 200, 1, 16},
        {7, 3, 3, 64},
    };
    const kernels *sets[8];
    int ns = tu_kernel_sets(sets, true);
    rng g;
    rng_seed(&g, 23);
    for (int s = 0; s < ns; s++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            check_rows_alone_as_in_span(sets[s], &g, cases[c].T, cases[c].pos, cases[c].NH,
                                        cases[c].NH, cases[c].HS, false, false);
}
END_TEST

START_TEST(prefetch_hints_leave_a_decode_rows_bits_unchanged)
{
    /* The one-row attention's hints (cpu_features_attention_prefetch: the values while scoring,
     * the next head's keys while weighting the values) move loads only: a decode row with every
     * head told that the next one follows gives the bits of the same row inside a span, with
     * its own KV heads and with grouped ones, at positions around the score groups' ends. The
     * hints are forced on (each test runs in its own process, before the choice is made). */
    setenv("TOKENTOP_ATTN_PREFETCH", "1", 1);
    static const struct { int T, pos, NH, NKV, HS; } cases[] = {
        {9, 120, 4, 4, 64}, {5, 250, 4, 2, 64}, {3, 0, 3, 3, 16}, {4, 300, 6, 2, 128},
    };
    const kernels *sets[8];
    int ns = tu_kernel_sets(sets, true);
    rng g;
    rng_seed(&g, 41);
    for (int s = 0; s < ns; s++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            check_rows_alone_as_in_span(sets[s], &g, cases[c].T, cases[c].pos, cases[c].NH,
                                        cases[c].NKV, cases[c].HS, true, false);
}
END_TEST

START_TEST(grouped_heads_of_a_decode_row_have_the_bits_of_the_heads_alone)
{
    /* A decode row's query heads that share a key/value head, computed together
     * (kernels.attention_heads: each key and value row read once for the group), give the bits
     * of each head alone, and so of the same row inside a span: groups of 2 to 8 heads, head
     * sizes that are and are not whole vectors, positions around the score vectors' ends. */
    static const struct { int T, pos, NH, NKV, HS; } cases[] = {
        {3, 0, 4, 2, 64}, {4, 29, 8, 2, 64}, {2, 31, 6, 2, 24}, {3, 160, 14, 2, 64},
        {2, 63, 16, 2, 128}, {5, 7, 9, 3, 7}, {2, 300, 8, 1, 64}, {3, 45, 12, 6, 33},
    };
    const kernels *sets[8];
    int ns = tu_kernel_sets(sets, false), grouped = 0;
    rng g;
    rng_seed(&g, 43);
    for (int s = 0; s < ns; s++) {
        if (!sets[s]->attention_heads)
            continue;
        grouped++;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            check_rows_alone_as_in_span(sets[s], &g, cases[c].T, cases[c].pos, cases[c].NH,
                                        cases[c].NKV, cases[c].HS, false, true);
    }
    if (!grouped)
        fprintf(stderr, "check_kernels: no set here computes grouped heads (AVX-512 sets do)\n");
}
END_TEST

START_TEST(reference_attention_is_a_causal_softmax_average)
{
    /* One head, HS 1: query 1 at position 1 sees keys 0 and 1 only. Scores 1*1 and 1*2 (times
     * 1/sqrt(1)) give weights e^1/(e^1+e^2), e^2/(e^1+e^2) over values 10 and 20; the value 1000
     * at position 2 must not leak in. */
    float q[2] = {0.0f, 1.0f}, k[KERNELS_KEY_BLOCK] = {1.0f, 2.0f, 3.0f};
    float v[3] = {10.0f, 20.0f, 1000.0f}, out[2] = {0}, scratch[3];
    attention_args a = {.q = q, .ldq = 1, .k = k, .v = v, .n_ctx = 3, .ldk = KERNELS_KEY_BLOCK,
                        .out = out, .ldo = 1, .T = 2, .pos = 0, .NH = 1, .HS = 1};
    kernels_reference()->attention(&a, 0, 0, 2, scratch);
    double w1 = exp(1.0) / (exp(1.0) + exp(2.0));
    ck_assert_float_eq_tol(out[0], 10.0f, 1e-5f);
    ck_assert_float_eq_tol(out[1], (float)(w1 * 10.0 + (1.0 - w1) * 20.0), 1e-4f);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Choice */

START_TEST(every_set_the_cpu_runs_is_tested_under_ci)
{
    /* Outside CI a missing set is only reported (tu_report_skipped_sets); in CI, where the CPU is
     * known to have it, a build that left it out would let the suite pass without testing it. */
    for (const char *const *name = kernels_set_names; *name; name++) {
        bool cpu = kernels_cpu_runs(*name), built = kernels_by_name(*name) != NULL;
        ck_assert_msg(built || !cpu || !under_ci(),
                      "CI=true: this CPU runs the %s kernel set but this build does not include "
                      "it, so its tests did not run", *name);
        ck_assert_msg(!built || cpu, "%s: the set is offered on a CPU that cannot run it", *name);
    }
    ck_assert_ptr_nonnull(kernels_by_name("reference"));
}
END_TEST

START_TEST(environment_forces_the_reference_set)
{
    setenv("TOKENTOP_KERNELS", "reference", 1);
    ck_assert_str_eq(kernels_select()->name, "reference");
    setenv("TOKENTOP_KERNELS", "no-such-set", 1);
    const kernels *k = kernels_select();
    ck_assert_ptr_nonnull(k);
    unsetenv("TOKENTOP_KERNELS");
    ck_assert_str_eq(kernels_select()->name, k->name);
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
        ck_assert_str_eq(k->name, kernels_cpu_runs("amx")               ? "amx"
                                  : kernels_cpu_runs("avx512bf16")       ? "avx512bf16"
                                  : __builtin_cpu_supports("avx512vnni") ? "avx512vnni"
                                                                         : "avx512");
#endif
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * BF16 activations and the amx set */

START_TEST(bf16_rows_round_like_the_dtype_in_every_set)
{
    /* Every set's bf16_rows gives tt_f32_to_bf16's bits: ties to even, NaN kept quiet, infinities,
     * denormals (which vcvtneps2bf16 would flush) and values that round up to infinity. */
    const kernels *sets[8];
    int ns = tu_kernel_sets(sets, true);
    static const float special[] = {0.0f, -0.0f, 1.0f, 1.00390625f /* tie: 1 + 2^-8 */,
                                    1.01171875f /* tie to even upward */, INFINITY, -INFINITY,
                                    NAN, 1e-40f, -3e-39f, 3.4e38f, -3.3961e38f, 65504.0f};
    const int nspec = (int)(sizeof special / sizeof special[0]);
    rng g;
    rng_seed(&g, 41);
    for (int s = 0; s < ns; s++) {
        if (!sets[s]->bf16_rows)
            continue;
        static const int Ks[] = {1, 15, 16, 17, 64, 99};
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
            const int K = Ks[ki], T = 3, ldx = K + 2, ldxb = K + 1;
            float *x = rand_floats(&g, (size_t)T * ldx, -100.0f, 100.0f);
            for (int i = 0; i < K; i++)
                x[(size_t)ldx + i] = special[i % nspec];
            uint16_t *want = calloc((size_t)T * ldxb, sizeof *want);
            uint16_t *got = calloc((size_t)T * ldxb, sizeof *got);
            kernels_bf16_rows(x, ldx, K, 0, T, want, ldxb);
            sets[s]->bf16_rows(x, ldx, K, 1, T, got, ldxb);   /* rows 1 .. only */
            sets[s]->bf16_rows(x, ldx, K, 0, 1, got, ldxb);
            for (int t = 0; t < T; t++)
                for (int i = 0; i < ldxb; i++) {
                    uint16_t w = i < K ? tt_f32_to_bf16(x[(size_t)t * ldx + i]) : 0;
                    ck_assert_msg(want[(size_t)t * ldxb + i] == w, "portable K=%d (%d,%d)", K, t, i);
                    ck_assert_msg(got[(size_t)t * ldxb + i] == w, "%s K=%d (%d,%d): 0x%04x want "
                                  "0x%04x (from %a)", sets[s]->name, K, t, i,
                                  got[(size_t)t * ldxb + i], w, i < K ? x[(size_t)t * ldx + i] : 0.0f);
                }
            free(x);
            free(want);
            free(got);
        }
    }
}
END_TEST

static void bf16_activation_matmul_check(const kernels *set);

START_TEST(bf16_activation_matmul_is_the_float64_sum_of_the_rounded_inputs)
{
    /* The BF16 matmul of every set that rounds its activations to bf16 (amx, avx512bf16) against
     * a float64 sum of the same bf16 activations and weights (plus the bias): bf16 products are
     * exact in fp32, so the only error is fp32 accumulation, at most 2 K u sum |x w| (u = 2^-24;
     * 2x for the tiles' unspecified order inside a block, and vdpbf16ps's inside a pair) plus
     * the rounding of the final bias add. Heights cover one row (decode), a 16-row tile, two
     * tiles, and a short last block; K whole 32-k blocks, a tail, odd, and a tail alone. */
    const kernels *sets[8];
    const int n_sets = tu_kernel_sets(sets, false);
    int tested = 0;
    for (int s = 0; s < n_sets; s++) {
        if (!sets[s]->bf16_rows)
            continue;
        tested++;
        bf16_activation_matmul_check(sets[s]);
    }
    if (!tested)
        fprintf(stderr, "check_kernels: SKIPPED bf16_activation_matmul_is_the_float64_sum_of_the_"
                        "rounded_inputs: no set here rounds activations to bf16\n");
}
END_TEST

/* One set's BF16 matmuls against the float64 sums (the test above). */
static void bf16_activation_matmul_check(const kernels *set)
{
    static const int Ts[] = {1, 16, 17, 32, 45};
    static const int Ks[] = {20, 32, 96, 77, 768, 1};
    static const int Ns[] = {32, 50};
    rng g;
    rng_seed(&g, 42);
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++)
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++)
            for (size_t ni = 0; ni < sizeof Ns / sizeof Ns[0]; ni++) {
                const int T = Ts[ti], K = Ks[ki], N = Ns[ni], ldx = K + 1, ldo = N;
                float *x = rand_floats(&g, (size_t)T * ldx, -2.0f, 2.0f);
                float *w = rand_floats(&g, (size_t)K * N, -1.0f, 1.0f);
                float *b = rand_floats(&g, (size_t)N, -1.0f, 1.0f);
                float *o = calloc((size_t)T * ldo, sizeof(float));
                packed_matrix m;
                ck_assert_int_eq(packed_matrix_init(&m, TT_BF16, K, N, NULL), TT_OK);
                packed_matrix_pack(&m, (tensor_ref){.data = w, .dtype = TT_F32}, false, 0, N);
                matmul_args a = {.out = o, .ldo = ldo, .x = x, .ldx = ldx, .w = &m, .bias = b,
                                 .T = T, .epilogue = MM_STORE};
                kernels_q8_act *xq = quantize_args(&a);
                set->matmul(&a, 0, m.n_panels, NULL);
                for (int t = 0; t < T; t++)
                    for (int n = 0; n < N; n++) {
                        double sum = 0.0, mag = 0.0;
                        for (int k = 0; k < K; k++) {
                            double p = (double)tt_bf16_to_f32(a.xb[(size_t)t * a.ldxb + k]) *
                                       (double)packed_matrix_get(&m, k, n);
                            sum += p;
                            mag += fabs(p);
                        }
                        const double want = sum + b[n], u = ldexp(1.0, -24);
                        const double tol = 2.0 * K * u * mag + 2.0 * u * (fabs(want) + fabs(b[n]));
                        const double got = o[(size_t)t * ldo + n];
                        ck_assert_msg(fabs(got - want) <= tol, "%s T=%d K=%d N=%d (%d,%d): got "
                                      "%.9g want %.9g (tolerance %.3g)", set->name, T, K, N, t, n,
                                      got, want, tol);
                    }
                packed_matrix_free(&m);
                free(xq);
                free(x);
                free(w);
                free(b);
                free(o);
            }
}

static bool refuse_tiles(void)
{
    return false;
}

START_TEST(amx_set_falls_back_when_the_tile_state_is_refused)
{
    /* Where the operating system refuses the tile state (or TOKENTOP_NO_AMX says no), the amx set
     * is not offered, even when asked for by name, and the choice falls back to the best other
     * set; once the tiles are granted again, it comes back where the CPU has AMX. */
    const char *best_other = NULL;
    for (const char *const *name = kernels_set_names; *name && !best_other; name++)
        if (strcmp(*name, "amx") != 0 && kernels_by_name(*name))
            best_other = *name;
    ck_assert_ptr_nonnull(best_other);
    const bool has_amx = kernels_by_name("amx") != NULL;

    kernels_set_tile_request(refuse_tiles);
    ck_assert(!kernels_cpu_runs("amx"));
    ck_assert_ptr_null(kernels_by_name("amx"));
    ck_assert_str_eq(kernels_select()->name, best_other);
    setenv("TOKENTOP_KERNELS", "amx", 1);
    ck_assert_str_eq(kernels_select()->name, best_other);
    unsetenv("TOKENTOP_KERNELS");
    kernels_set_tile_request(NULL);

    setenv("TOKENTOP_NO_AMX", "1", 1);
    ck_assert_ptr_null(kernels_by_name("amx"));
    ck_assert_str_eq(kernels_select()->name, best_other);
    unsetenv("TOKENTOP_NO_AMX");

    ck_assert_int_eq(kernels_by_name("amx") != NULL, has_amx);
    ck_assert_str_eq(kernels_select()->name, has_amx ? "amx" : best_other);
    if (!has_amx)
        fprintf(stderr, "check_kernels: amx_set_falls_back_when_the_tile_state_is_refused ran "
                        "without an amx set here (only the refusal is seen)\n");
}
END_TEST

START_TEST(layernorm_normalizes_each_row)
{
    float x[2][4] = {{1, 2, 3, 4}, {-5, 0, 5, 10}}, out[2][4];
    float w[4] = {1, 1, 2, 1}, b[4] = {0, 0, 0, 0.5f};
    kernels_layernorm(&out[0][0], &x[0][0], w, b, 4, 1e-5f, 0, 2);
    for (int t = 0; t < 2; t++) {
        double mean = 0, var = 0;
        for (int i = 0; i < 4; i++)
            mean += x[t][i] / 4.0;
        for (int i = 0; i < 4; i++)
            var += (x[t][i] - mean) * (x[t][i] - mean) / 4.0;
        for (int i = 0; i < 4; i++) {
            double want = (x[t][i] - mean) / sqrt(var + 1e-5) * w[i] + b[i];
            ck_assert_double_eq_tol(out[t][i], want, 1e-5);
        }
    }
}
END_TEST

/* Every set's SwiGLU is silu(g) * u against a float64 one, whatever the columns' count past the
 * last whole vector: within 4 float ulps of the result over [-30, 30], and at the extremes the
 * formula's limits (g for a large g, a zero for a large -g, NaN kept). */
START_TEST(swiglu_in_every_set_is_silu_times_up)
{
    const kernels *sets[8];
    int ns = tu_kernel_sets(sets, true);
    enum { FF = 203, LD = 2 * FF + 5, T = 3 };
    for (int s = 0; s < ns; s++) {
        static float gu[T * LD], in[T * LD];
        for (int t = 0; t < T; t++)
            for (int i = 0; i < FF; i++) {
                in[t * LD + i] = -30.0f + 60.0f * (float)(t * FF + i) / (float)(T * FF - 1);
                in[t * LD + FF + i] = 0.25f + 0.01f * (float)i;
            }
        const float extremes[] = {-1e30f, -150.0f, -89.0f, -87.0f, 87.0f, 89.0f, 150.0f, 1e30f};
        for (int k = 0; k < 8; k++)
            in[LD + k] = extremes[k];
        in[LD + 8] = NAN;
        memcpy(gu, in, sizeof gu);
        sets[s]->swiglu(gu, LD, FF, 0, T);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < FF; i++) {
                const double g = in[t * LD + i], u = in[t * LD + FF + i];
                const double want = g / (1.0 + exp(-g)) * u;
                const float got = gu[t * LD + i];
                if (isnan(g)) {
                    ck_assert_msg(isnan(got), "%s: NaN gave %g", sets[s]->name, got);
                } else if (fabs(want) < 1e-30) {
                    ck_assert_msg(fabsf(got) < 1e-30f, "%s: g %g: %g, want %g", sets[s]->name,
                                  g, got, want);
                } else {
                    ck_assert_msg(fabs(got - want) <= 4.0 * FLT_EPSILON * fabs(want),
                                  "%s: g %g u %g: %.9g, want %.9g", sets[s]->name, g, u, got,
                                  want);
                }
                ck_assert(gu[t * LD + FF + i] == in[t * LD + FF + i] ||
                          (isnan(gu[t * LD + FF + i]) && isnan(in[t * LD + FF + i])));
            }
    }
}
END_TEST

int main(void)
{
    tu_report_skipped_sets("check_kernels");
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("kernels");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, packed_matrix_holds_rounded_source_values);
    tcase_add_test(tc, q8_packing_rounds_each_weight_to_its_block_scale);
    tcase_add_test(tc, packing_a_source_in_its_own_dtype_keeps_its_bits);
    tcase_add_test(tc, q8_0_tensors_pack_into_q8_as_stored);
    tcase_add_test(tc, q8_activations_round_each_block_to_its_scale);
    tcase_add_test(tc, q8_matmul_is_the_block_formula_in_every_set);
    tcase_add_test(tc, simd_matmul_matches_reference_on_odd_shapes);
    tcase_add_test(tc, matmul_rows_do_not_depend_on_the_rows_beside_them);
    tcase_add_test(tc, simd_gelu_saturates_like_the_formula);
    tcase_add_test(tc, simd_attention_matches_reference);
    tcase_add_test(tc, attention_rows_do_not_depend_on_the_rows_beside_them);
    tcase_add_test(tc, prefetch_hints_leave_a_decode_rows_bits_unchanged);
    tcase_add_test(tc, grouped_heads_of_a_decode_row_have_the_bits_of_the_heads_alone);
    tcase_add_test(tc, bf16_rows_round_like_the_dtype_in_every_set);
    tcase_add_test(tc, bf16_activation_matmul_is_the_float64_sum_of_the_rounded_inputs);
    tcase_add_test(tc, amx_set_falls_back_when_the_tile_state_is_refused);
    tcase_add_test(tc, reference_attention_is_a_causal_softmax_average);
    tcase_add_test(tc, every_set_the_cpu_runs_is_tested_under_ci);
    tcase_add_test(tc, environment_forces_the_reference_set);
    tcase_add_test(tc, layernorm_normalizes_each_row);
    tcase_add_test(tc, swiglu_in_every_set_is_silu_times_up);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
