/* check_kernels_gguf.c: GGUF weights held as stored (TT_GGUF, kernels.h): a block's D * q + M is
 * the dequantized block bit for bit, and every kernel set's matmul (decode and prefill rows, odd
 * shapes, mixed types side by side, llama's permuted q/k rows) is the dequantize-then-fp32 matmul
 * over the 8-bit activations, each row the same bits whatever rows come with it; F16 and BF16
 * rows are the fp64 matmul over the fp32 activations, the same bits in every set. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/cpu/kernels.h"
#include "core/model/quant.h"
#include "tests/kernel_sets.h"
#include "tests/testutil.h"

static const uint32_t TYPES[] = {QUANT_Q8_0, QUANT_Q4_0, QUANT_Q5_0, QUANT_Q4_K, QUANT_Q6_K};
#define N_TYPES ((int)(sizeof TYPES / sizeof TYPES[0]))

static float urand(rng *g, float lo, float hi)
{
    return lo + (hi - lo) * (float)rng_uniform(g);
}

/* n values uniform in [-1, 1), malloc'd: activations or a bias. */
static float *urand_vec(rng *g, size_t n)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; v && i < n; i++)
        v[i] = urand(g, -1.0f, 1.0f);
    return v;
}

static void put_f16(uint8_t *p, float v)
{
    uint16_t h = tt_f32_to_f16(v);
    memcpy(p, &h, 2);
}

/* n rows of K weights of type t: random bytes, then every fp16 scale made a small finite value
 * (Q4_K's d and dmin, Q6_K's d at the block's end) so the rows dequantize to numbers of about
 * one. The caller frees. */
static uint8_t *rand_rows(rng *g, uint32_t t, int K, int n, size_t *row_bytes)
{
    uint64_t rb = 0;
    ck_assert(quant_row_bytes(t, (uint64_t)K, &rb));
    uint8_t *p = malloc(rb * (size_t)n);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < rb * (size_t)n; i++)
        p[i] = (uint8_t)(rng_uniform(g) * 256.0);
    const size_t bb = quant_block_bytes(t), nb = rb * (size_t)n / bb;
    for (size_t b = 0; b < nb; b++) {
        uint8_t *blk = p + b * bb;
        switch (t) {
        case QUANT_Q8_0: put_f16(blk, urand(g, 0.002f, 0.01f)); break;
        case QUANT_Q4_0: case QUANT_Q5_0: put_f16(blk, urand(g, 0.02f, 0.1f)); break;
        case QUANT_Q4_K:
            put_f16(blk, urand(g, 0.001f, 0.005f));
            put_f16(blk + 2, urand(g, 0.001f, 0.005f));
            break;
        case QUANT_Q6_K: put_f16(blk + 208, urand(g, 0.0002f, 0.001f)); break;
        }
    }
    *row_bytes = (size_t)rb;
    return p;
}

/* ---------------------------------------------------------------------------------------------
 * Blocks */

START_TEST(gguf_blocks_are_the_dequantized_rows_bit_for_bit)
{
    rng g;
    rng_seed(&g, 7);
    for (int ti = 0; ti < N_TYPES; ti++) {
        const uint32_t t = TYPES[ti];
        const int K = 512, N = 3;
        size_t rb;
        uint8_t *rows = rand_rows(&g, t, K, N, &rb);
        packed_matrix m;
        tensor_ref src = {.data = rows, .dtype = TT_F32, .quantized = true, .quant = t,
                          .row_len = K};
        int cols = N;
        packed_matrix_gguf(&m, K, &src, &cols, 1);
        ck_assert_int_eq(m.dtype, TT_GGUF);
        ck_assert_int_eq(m.N, N);
        ck_assert_uint_eq(packed_matrix_size(&m), rb * (size_t)N);
        float want[512];
        for (int n = 0; n < N; n++) {
            ck_assert(quant_dequantize_row(t, rows + (size_t)n * rb, want, (uint64_t)K));
            for (int k = 0; k < K; k++) {
                float got = packed_matrix_get(&m, k, n);
                ck_assert_msg(got == want[k], "%s row %d k %d: block %.9g, dequantized %.9g",
                              quant_type_name(t), n, k, got, want[k]);
            }
        }
        packed_matrix_free(&m);
        free(rows);
    }
}
END_TEST

START_TEST(gguf_types_with_kernels_and_their_row_lengths)
{
    ck_assert(packed_gguf_type_ok(QUANT_Q4_0, 32));
    ck_assert(packed_gguf_type_ok(QUANT_Q5_0, 96));
    ck_assert(packed_gguf_type_ok(QUANT_Q8_0, 64));
    ck_assert(packed_gguf_type_ok(QUANT_Q4_K, 256));
    ck_assert(packed_gguf_type_ok(QUANT_Q6_K, 512));
    ck_assert(!packed_gguf_type_ok(QUANT_Q4_K, 128));
    ck_assert(!packed_gguf_type_ok(QUANT_Q4_0, 48));
    ck_assert(!packed_gguf_type_ok(QUANT_Q5_K, 256));
    ck_assert(packed_gguf_type_ok(QUANT_F16, 37));
    ck_assert(packed_gguf_type_ok(QUANT_BF16, 1));
    ck_assert(!packed_gguf_type_ok(QUANT_F32, 256));
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Matmuls */

typedef struct {
    packed_matrix m;
    void *rows[KERNELS_GGUF_PARTS]; /* the parts' tensors: blocks, or F16 / BF16 rows */
    float *w;                       /* (N, K) dequantized, in output column order */
} gguf_case;

/* A (K, N) matrix of n_parts tensors of the given types and column counts; head_rows applies
 * to every part. */
static void case_init(gguf_case *c, rng *g, int K, const uint32_t *types, const int *cols,
                      int n_parts, int head_rows)
{
    tensor_ref src[KERNELS_GGUF_PARTS] = {0};
    int N = 0;
    for (int i = 0; i < n_parts; i++) {
        size_t rb;
        c->rows[i] = rand_rows(g, types[i], K, cols[i], &rb);
        src[i] = (tensor_ref){.data = c->rows[i], .dtype = TT_F32, .quantized = true,
                              .quant = types[i], .row_len = K, .head_rows = head_rows};
        N += cols[i];
    }
    packed_matrix_gguf(&c->m, K, src, cols, n_parts);
    c->w = malloc((size_t)N * (size_t)K * sizeof *c->w);
    ck_assert_ptr_nonnull(c->w);
    for (int n = 0, n0 = 0, i = 0; n < N; n++) {
        if (n - n0 >= cols[i])
            n0 += cols[i++];
        /* the reading tensor_ref_row does: through head_rows' order */
        const void *row = tensor_ref_row(src[i], (size_t)(n - n0));
        ck_assert(quant_dequantize_row(types[i], row, c->w + (size_t)n * K, (uint64_t)K));
    }
}

static void case_free(gguf_case *c)
{
    for (int i = 0; i < c->m.n_parts; i++)
        free(c->rows[i]);
    packed_matrix_free(&c->m);
    free(c->w);
}

/* Runs set k over all panels of c for T rows of x into out (T, N), with bias and epilogue; the
 * rows laid out as 8-bit blocks for quantized parts, rounded to bf16 for BF16 rows in a set that
 * reads them so (kernels_reads_xb); F16 and other BF16 rows read x itself. */
static void run_set(const kernels *k, const gguf_case *c, const float *x, int T, float *out,
                    const float *bias, mm_epilogue ep)
{
    const int K = c->m.K, KB = packed_gguf_is_float(&c->m) ? 0 : KERNELS_Q8_ACT_BLOCKS(K);
    kernels_q8_act *xq = NULL;
    if (KB) {
        xq = malloc((size_t)T * (size_t)KB * sizeof *xq);
        ck_assert_ptr_nonnull(xq);
        k->quantize_rows(x, K, K, 0, T, xq, KB);
    }
    uint16_t *xb = NULL;
    if (kernels_reads_xb(k, &c->m)) {      /* a BF16 file's rows on vdpbf16ps */
        xb = malloc((size_t)T * (size_t)K * sizeof *xb);
        ck_assert_ptr_nonnull(xb);
        k->bf16_rows(x, K, K, 0, T, xb, K);
    }
    matmul_args a = {.out = out, .ldo = c->m.N, .x = x, .ldx = K, .w = &c->m, .xq = xq,
                     .ldxq = KB, .xb = xb, .ldxb = K, .bias = bias, .T = T, .epilogue = ep};
    /* two calls over a split of the panels, as two threads would: one with the scratch the
     * engine gives (many rows decode each weight row into it once), one without */
    const int mid = c->m.n_panels / 2;
    float *scratch = aligned_alloc(64, (KERNELS_MATMUL_SCRATCH(K) * sizeof(float) + 63) / 64 * 64);
    ck_assert_ptr_nonnull(scratch);
    k->matmul(&a, 0, mid, scratch);
    k->matmul(&a, mid, c->m.n_panels, NULL);
    free(scratch);
    free(xq);
    free(xb);
}

/* Each of the T rows of x run alone (decode) gives the bits it has among all T (prefill,
 * verification), in every set; what names the case in a failure. */
static void check_rows_alone(const kernels *const *sets, int ns, const gguf_case *c,
                             const float *x, int T, const char *what)
{
    const int K = c->m.K, N = c->m.N;
    float *all = malloc((size_t)T * N * sizeof *all), *one = malloc((size_t)N * sizeof *one);
    ck_assert(all && one);
    for (int s = 0; s < ns; s++) {
        run_set(sets[s], c, x, T, all, NULL, MM_STORE);
        for (int t = 0; t < T; t++) {
            run_set(sets[s], c, x + (size_t)t * K, 1, one, NULL, MM_STORE);
            ck_assert_msg(memcmp(one, all + (size_t)t * N, (size_t)N * sizeof *one) == 0,
                          "%s set, %s: row %d alone differs from row %d of %d", sets[s]->name,
                          what, t, t, T);
        }
    }
    free(one);
    free(all);
}

/* Output (t, n) against the fp64 sum of the dequantized weights times the 8-bit activations
 * (kernels_quantize_rows' blocks): the difference is the fp32 rounding of a sum of K terms. The
 * fp32 matmul over x itself is near too (the activations' 8 bits). */
static void check_outputs(const char *what, const gguf_case *c, const float *x, int T,
                          const float *out, const float *bias)
{
    const int K = c->m.K, N = c->m.N, KB = KERNELS_Q8_ACT_BLOCKS(K);
    kernels_q8_act *xq = malloc((size_t)T * (size_t)KB * sizeof *xq);
    kernels_quantize_rows(x, K, K, 0, T, xq, KB);
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            double sq = 0, sx = 0, mag = 0, magx = 0;
            const float *w = c->w + (size_t)n * K;
            for (int k = 0; k < K; k++) {
                const kernels_q8_act *b = &xq[(size_t)t * KB + k / 32];
                double xv = (double)b->d * b->q[k % 32];
                sq += (double)w[k] * xv;
                sx += (double)w[k] * x[(size_t)t * K + k];
                mag += fabs((double)w[k] * xv);
                magx += fabs((double)w[k] * x[(size_t)t * K + k]);
            }
            double want = sq + (bias ? bias[n] : 0.0), got = out[(size_t)t * N + n];
            ck_assert_msg(fabs(got - want) <= 1e-5 * mag + 1e-6,
                          "%s: (t %d, n %d): got %.9g, fp64 over the 8-bit activations %.9g", what,
                          t, n, got, want);
            ck_assert_msg(fabs(got - sx - (bias ? bias[n] : 0.0)) <= 0.02 * magx + 1e-4,
                          "%s: (t %d, n %d): got %.9g, fp32 matmul %.9g", what, t, n, got, sx);
        }
    free(xq);
}

START_TEST(gguf_matmul_is_the_dequantized_matmul_in_every_set)
{
    const kernels *sets[8];
    const int ns = tu_kernel_sets(sets, true);
    rng g;
    rng_seed(&g, 11);
    static const int Ns[] = {1, 37, 67};
    for (int ti = 0; ti < N_TYPES; ti++) {
        const uint32_t t = TYPES[ti];
        const bool k_quant = t == QUANT_Q4_K || t == QUANT_Q6_K;
        const int Ks[] = {k_quant ? 256 : 32, k_quant ? 512 : 96};
        for (int ki = 0; ki < 2; ki++)
            for (int ni = 0; ni < 3; ni++) {
                const int K = Ks[ki], N = Ns[ni];
                gguf_case c;
                case_init(&c, &g, K, &t, &N, 1, 0);
                for (int T = 1; T <= 17; T += (T < 6 ? 1 : 5)) {
                    float *x = urand_vec(&g, (size_t)T * K);
                    float *out = malloc((size_t)T * N * sizeof *out);
                    for (int s = 0; s < ns; s++) {
                        char what[96];
                        snprintf(what, sizeof what, "%s set, %s, K %d, N %d, T %d", sets[s]->name,
                                 quant_type_name(t), K, N, T);
                        run_set(sets[s], &c, x, T, out, NULL, MM_STORE);
                        check_outputs(what, &c, x, T, out, NULL);
                    }
                    free(out);
                    free(x);
                }
                case_free(&c);
            }
    }
}
END_TEST

/* Q4_K_M's layers: q | k | v of different types side by side (v in Q6_K), llama's permuted q/k
 * rows; a bias and the residual epilogue. */
START_TEST(gguf_matmul_reads_mixed_parts_and_permuted_rows)
{
    const kernels *sets[8];
    const int ns = tu_kernel_sets(sets, true);
    rng g;
    rng_seed(&g, 12);
    const uint32_t types[] = {QUANT_Q4_K, QUANT_Q5_0, QUANT_Q6_K};
    const int cols[] = {128, 64, 64}, K = 256, N = 256, T = 9;
    gguf_case c;
    case_init(&c, &g, K, types, cols, 3, 64);
    float *x = urand_vec(&g, (size_t)T * K), *bias = urand_vec(&g, (size_t)N);
    float *out = malloc((size_t)T * N * sizeof *out);
    for (int s = 0; s < ns; s++) {
        for (int i = 0; i < T * N; i++)
            out[i] = 0.0f;
        run_set(sets[s], &c, x, T, out, bias, MM_ADD);
        check_outputs(sets[s]->name, &c, x, T, out, bias);
    }
    free(out);
    free(bias);
    free(x);
    case_free(&c);
}
END_TEST

START_TEST(gguf_matmul_rows_do_not_depend_on_the_rows_beside_them)
{
    const kernels *sets[8];
    const int ns = tu_kernel_sets(sets, true);
    rng g;
    rng_seed(&g, 13);
    for (int ti = 0; ti < N_TYPES; ti++) {
        const int K = 512, N = 45, T = 17;
        gguf_case c;
        case_init(&c, &g, K, &TYPES[ti], &N, 1, 0);
        float *x = urand_vec(&g, (size_t)T * K);
        check_rows_alone(sets, ns, &c, x, T, quant_type_name(TYPES[ti]));
        free(x);
        case_free(&c);
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * F16 and BF16 rows (a float file's matrices): fp32 activations, the same bits in every set, but
 * for BF16 rows in the avx512bf16 set, which multiplies them by bf16 activations (gguf_bf16_rows) */

/* A (K, N) matrix of n_parts F16 or BF16 tensors (type t) of random weights in [-1, 1), their
 * widened values in w (N, K) in output column order. */
static void float_case_init(gguf_case *c, rng *g, uint32_t t, int K, const int *cols,
                            int n_parts, int head_rows)
{
    tensor_ref src[KERNELS_GGUF_PARTS] = {0};
    int N = 0;
    for (int i = 0; i < n_parts; i++) {
        uint16_t *rows = malloc((size_t)cols[i] * (size_t)K * sizeof *rows);
        ck_assert_ptr_nonnull(rows);
        for (size_t e = 0; e < (size_t)cols[i] * (size_t)K; e++) {
            const float v = urand(g, -1.0f, 1.0f);
            rows[e] = t == QUANT_F16 ? tt_f32_to_f16(v) : tt_f32_to_bf16(v);
        }
        c->rows[i] = rows;
        src[i] = (tensor_ref){.data = c->rows[i], .dtype = t == QUANT_F16 ? TT_F16 : TT_BF16,
                              .row_len = K, .head_rows = head_rows};
        N += cols[i];
    }
    packed_matrix_gguf(&c->m, K, src, cols, n_parts);
    ck_assert(packed_gguf_is_float(&c->m));
    c->w = malloc((size_t)N * (size_t)K * sizeof *c->w);
    ck_assert_ptr_nonnull(c->w);
    for (int n = 0, n0 = 0, i = 0; n < N; n++) {
        if (n - n0 >= cols[i])
            n0 += cols[i++];
        const uint16_t *row = tensor_ref_row(src[i], (size_t)(n - n0));
        for (int k = 0; k < K; k++)
            c->w[(size_t)n * K + k] =
                t == QUANT_F16 ? tt_f16_to_f32(row[k]) : tt_bf16_to_f32(row[k]);
    }
}

/* Output (t, n) against the fp64 matmul of the widened weights and the activations the set
 * reads: fp32 x itself, or x rounded to bf16 (bf16_x): only the fp32 sum's rounding apart. */
static void float_check(const char *what, const gguf_case *c, const float *x, int T,
                        const float *out, const float *bias, const float *before, bool bf16_x)
{
    const int K = c->m.K, N = c->m.N;
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            double s = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                const float xv = x[(size_t)t * K + k];
                const double p = (double)c->w[(size_t)n * K + k] *
                                 (bf16_x ? tt_bf16_to_f32(tt_f32_to_bf16(xv)) : xv);
                s += p;
                mag += fabs(p);
            }
            const double want = s + (bias ? bias[n] : 0.0) +
                                (before ? before[(size_t)t * N + n] : 0.0);
            const double got = out[(size_t)t * N + n];
            ck_assert_msg(fabs(got - want) <= 2e-6 * mag + 1e-6,
                          "%s: (t %d, n %d): got %.9g, fp64 %.9g", what, t, n, got, want);
        }
}

START_TEST(gguf_f16_and_bf16_matmuls_are_the_fp64_matmul_and_the_same_bits_in_every_fp32_set)
{
    const kernels *sets[8];
    const int ns = tu_kernel_sets(sets, true);
    const kernels *ref = kernels_reference();
    rng g;
    rng_seed(&g, 21);
    static const uint32_t ftypes[] = {QUANT_F16, QUANT_BF16};
    /* K 4100: a decode row long enough for GF_DECODE_WIDE rows a pass, plus a tail */
    static const int Ks[] = {16, 37, 300, 2048, 4100}, Ns[] = {1, 37, 67};
    for (int ti = 0; ti < 2; ti++)
        for (int ki = 0; ki < 5; ki++)
            for (int ni = 0; ni < 3; ni++) {
                const int K = Ks[ki], N = Ns[ni];
                gguf_case c;
                float_case_init(&c, &g, ftypes[ti], K, &N, 1, 0);
                /* T 30: a prefill whose panels are widened to fp32 first (K % 16 == 0) */
                for (int T = 1; T <= 30; T += (T < 8 ? 1 : T < 17 ? 9 : 13)) {
                    float *x = urand_vec(&g, (size_t)T * K);
                    float *want = malloc((size_t)T * N * sizeof *want);
                    float *out = malloc((size_t)T * N * sizeof *out);
                    run_set(ref, &c, x, T, want, NULL, MM_STORE);
                    for (int s = 0; s < ns; s++) {
                        char what[96];
                        snprintf(what, sizeof what, "%s set, %s, K %d, N %d, T %d",
                                 sets[s]->name, quant_type_name(ftypes[ti]), K, N, T);
                        run_set(sets[s], &c, x, T, out, NULL, MM_STORE);
                        /* the avx512bf16 set multiplies a BF16 file's rows by bf16 activations
                         * (kernels.h: gguf_bf16_rows): its own bits; the others the reference's */
                        const bool bx = kernels_reads_xb(sets[s], &c.m);
                        float_check(what, &c, x, T, out, NULL, NULL, bx);
                        ck_assert_msg(bx || memcmp(out, want, (size_t)T * N * sizeof *out) == 0,
                                      "%s: not the reference set's bits", what);
                    }
                    free(out);
                    free(want);
                    free(x);
                }
                case_free(&c);
            }
}
END_TEST

/* A float llama's q | k | v: three F16 parts, q and k in llama.cpp's permuted row order, odd
 * K; a bias and the residual epilogue. */
START_TEST(gguf_f16_matmul_reads_several_parts_and_permuted_rows)
{
    const kernels *sets[8];
    const int ns = tu_kernel_sets(sets, true);
    rng g;
    rng_seed(&g, 22);
    const int cols[] = {128, 64, 64}, K = 200, N = 256, T = 9;
    gguf_case c;
    float_case_init(&c, &g, QUANT_F16, K, cols, 3, 64);
    float *x = urand_vec(&g, (size_t)T * K), *bias = urand_vec(&g, (size_t)N);
    float *before = urand_vec(&g, (size_t)T * N);
    float *out = malloc((size_t)T * N * sizeof *out);
    for (int s = 0; s < ns; s++) {
        memcpy(out, before, (size_t)T * N * sizeof *out);
        run_set(sets[s], &c, x, T, out, bias, MM_ADD);
        float_check(sets[s]->name, &c, x, T, out, bias, before, false);
    }
    for (int n = 0; n < N; n += 17)       /* packed_matrix_get reads through the order too */
        ck_assert(packed_matrix_get(&c.m, 5, n) == c.w[(size_t)n * K + 5]);
    free(out);
    free(before);
    free(bias);
    free(x);
    case_free(&c);
}
END_TEST

START_TEST(gguf_f16_and_bf16_rows_are_bit_identical_alone_or_among_30)
{
    const kernels *sets[8];
    const int ns = tu_kernel_sets(sets, true);
    rng g;
    rng_seed(&g, 23);
    static const uint32_t ftypes[] = {QUANT_F16, QUANT_BF16};
    /* a decode row 4 and 8 weight rows a pass; K 1024: the 30 rows' panels widened to fp32 */
    static const int Ks[] = {333, 4100, 1024};
    for (int ti = 0; ti < 6; ti++) {
        const int K = Ks[ti / 2], N = 45, T = 30;
        gguf_case c;
        float_case_init(&c, &g, ftypes[ti % 2], K, &N, 1, 0);
        float *x = urand_vec(&g, (size_t)T * K);
        char what[48];
        snprintf(what, sizeof what, "%s, K %d", quant_type_name(ftypes[ti % 2]), K);
        check_rows_alone(sets, ns, &c, x, T, what);
        free(x);
        case_free(&c);
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Regrouped parts (packed_gguf_group) */

/* Regroups every part of c that can be, as the engine does for a set with gguf_groups. */
static void case_regroup(gguf_case *c)
{
    for (int i = 0; i < c->m.n_parts; i++)
        if (packed_gguf_groupable(&c->m, i)) {
            ck_assert(packed_gguf_group_alloc(&c->m, i, NULL));
            packed_gguf_group(&c->m, i, 0, c->m.parts[i].N / KERNELS_GGUF_GROUP);
        }
}

/* The sets that multiply regrouped matrices: those with gguf_groups, and the reference. */
static int group_sets(const kernels **out)
{
    const kernels *all[8];
    const int n = tu_kernel_sets(all, true);
    int m = 0;
    for (int s = 0; s < n; s++)
        if (all[s]->gguf_groups || all[s] == kernels_reference())
            out[m++] = all[s];
    return m;
}

START_TEST(gguf_regrouped_rows_read_back_as_the_file_rows)
{
    rng g;
    rng_seed(&g, 21);
    /* Q4_K and Q6_K regrouped (one with llama's permuted rows), a Q6_K part of 24 rows kept;
     * then Q4_0 and Q5_0 likewise, K 96 leaving a last block unpaired */
    const uint32_t all_types[2][3] = {{QUANT_Q4_K, QUANT_Q6_K, QUANT_Q6_K},
                                      {QUANT_Q4_0, QUANT_Q5_0, QUANT_Q4_0}};
    const int cols[] = {64, 32, 24};
    for (int hr = 0; hr <= 24; hr += 8) {
        const uint32_t *types = all_types[hr / 16];
        const int K = hr == 16 ? 96 : 512;
        gguf_case c;
        case_init(&c, &g, K, types, cols, 3, hr % 16);
        case_regroup(&c);
        ck_assert_ptr_nonnull(c.m.parts[0].groups);
        ck_assert_ptr_nonnull(c.m.parts[1].groups);
        ck_assert_ptr_null(c.m.parts[2].groups);
        for (int n = 0; n < c.m.N; n++)
            for (int k = 0; k < K; k++)
                ck_assert_msg(packed_matrix_get(&c.m, k, n) == c.w[(size_t)n * K + k],
                              "%s, head_rows %d: (k %d, n %d): regrouped %.9g, file %.9g",
                              quant_type_name(types[0]), hr % 16, k, n,
                              packed_matrix_get(&c.m, k, n), c.w[(size_t)n * K + k]);
        /* a whole row at once (a tied embedding's lookup): the same floats */
        float row[512];
        for (int n = 0; n < c.m.N; n++) {
            packed_gguf_row_f32(&c.m, n, row);
            ck_assert_msg(memcmp(row, c.w + (size_t)n * K, (size_t)K * sizeof *row) == 0,
                          "%s, head_rows %d: row %d read whole differs from the file's",
                          quant_type_name(types[0]), hr % 16, n);
        }
        case_free(&c);
    }
}
END_TEST

START_TEST(gguf_regrouped_matmul_is_the_dequantized_matmul)
{
    const kernels *sets[8];
    const int ns = group_sets(sets);
    rng g;
    rng_seed(&g, 22);
    /* groups cut by the panel split (the Q4_K part starts at column 8), a part left as rows,
     * permuted rows, bias and the residual epilogue */
    const uint32_t k_types[] = {QUANT_Q5_0, QUANT_Q4_K, QUANT_Q6_K};
    /* and Q4_0 and Q5_0 groups (the Q5_0 part starting at column 8), K 96 and 800 leaving a last
     * block unpaired */
    const uint32_t q0_types[] = {QUANT_Q4_0, QUANT_Q5_0, QUANT_Q4_0};
    const int cols[] = {8, 48, 32};
    static const int Ks[] = {256, 512, 96, 800, 1024};
    for (int ki = 0; ki < 5; ki++)
        for (int T = 1; T <= 17; T += (T < 6 ? 1 : 5)) {
            const int K = Ks[ki];
            const uint32_t *types = ki < 2 ? k_types : q0_types;
            gguf_case c;
            case_init(&c, &g, K, types, cols, 3, K == 256 || K == 96 ? 0 : 8);
            case_regroup(&c);
            ck_assert_ptr_null(c.m.parts[0].groups);     /* 8 rows: no group, the row kernel */
            ck_assert_ptr_nonnull(c.m.parts[1].groups);
            const int N = c.m.N;
            float *x = urand_vec(&g, (size_t)T * K), *bias = urand_vec(&g, (size_t)N);
            float *out = malloc((size_t)T * N * sizeof *out);
            for (int s = 0; s < ns; s++) {
                char what[96];
                snprintf(what, sizeof what, "%s set, regrouped %s, K %d, T %d", sets[s]->name,
                         quant_type_name(types[1]), K, T);
                for (int i = 0; i < T * N; i++)
                    out[i] = 0.0f;
                run_set(sets[s], &c, x, T, out, bias, MM_ADD);
                check_outputs(what, &c, x, T, out, bias);
            }
            free(out);
            free(bias);
            free(x);
            case_free(&c);
        }
}
END_TEST

START_TEST(gguf_regrouped_rows_do_not_depend_on_the_rows_beside_them)
{
    const kernels *sets[8];
    const int ns = group_sets(sets);
    rng g;
    rng_seed(&g, 23);
    /* Q4_K | Q6_K; Q4_0 | Q5_0 | a Q4_0 tail of 8 rows (K 800: a last block unpaired) */
    const uint32_t types[2][3] = {{QUANT_Q4_K, QUANT_Q6_K}, {QUANT_Q4_0, QUANT_Q5_0, QUANT_Q4_0}};
    const int cols[2][3] = {{32, 48}, {32, 48, 8}}, Ks[] = {768, 800}, T = 17;
    for (int i = 0; i < 2; i++) {
        gguf_case c;
        case_init(&c, &g, Ks[i], types[i], cols[i], 2 + i, 0);
        case_regroup(&c);
        ck_assert_ptr_nonnull(c.m.parts[0].groups);
        ck_assert_ptr_nonnull(c.m.parts[1].groups);
        float *x = urand_vec(&g, (size_t)T * Ks[i]);
        check_rows_alone(sets, ns, &c, x, T, i ? "regrouped Q4_0 | Q5_0" : "regrouped Q4_K | Q6_K");
        free(x);
        case_free(&c);
    }
}
END_TEST

int main(void)
{
    tu_report_skipped_sets("check_kernels_gguf");
    Suite *s = suite_create("kernels_gguf");
    TCase *tc = tcase_create("kernels_gguf");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, gguf_blocks_are_the_dequantized_rows_bit_for_bit);
    tcase_add_test(tc, gguf_types_with_kernels_and_their_row_lengths);
    tcase_add_test(tc, gguf_matmul_is_the_dequantized_matmul_in_every_set);
    tcase_add_test(tc, gguf_matmul_reads_mixed_parts_and_permuted_rows);
    tcase_add_test(tc, gguf_matmul_rows_do_not_depend_on_the_rows_beside_them);
    tcase_add_test(tc,
                   gguf_f16_and_bf16_matmuls_are_the_fp64_matmul_and_the_same_bits_in_every_fp32_set);
    tcase_add_test(tc, gguf_f16_matmul_reads_several_parts_and_permuted_rows);
    tcase_add_test(tc, gguf_f16_and_bf16_rows_are_bit_identical_alone_or_among_30);
    tcase_add_test(tc, gguf_regrouped_rows_read_back_as_the_file_rows);
    tcase_add_test(tc, gguf_regrouped_matmul_is_the_dequantized_matmul);
    tcase_add_test(tc, gguf_regrouped_rows_do_not_depend_on_the_rows_beside_them);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
