/* kernels_avx512.c: the AVX-512 kernel set (built with AVX-512 flags, chosen at run time).
 *
 * Matmul: a register tile of up to 12 rows x 32 columns (24 zmm accumulators) walks down one
 * packed panel; each k step loads the panel row once (fp32 direct, fp16 through vcvtph2ps, bf16
 * through a shift and a mask of the pair-interleaved lanes) and broadcasts one activation per
 * tile row. Two FMA ports at 4-cycle latency need at least 8 independent accumulators to stay
 * busy; 24 leave room for the loads. The epilogue adds the bias and applies GELU or the residual
 * add in registers. With many rows, fp16/bf16 panels are first widened to fp32 in per-thread
 * scratch (once per panel, not once per tile; widening is exact). One row (decode) is a GEMV that
 * streams KERNELS_GEMV_PANELS panels side by side with software prefetch.
 *
 * Batch invariance (kernels.h): every output lane is one FMA chain over k ascending, from zero,
 * then bias and epilogue, in the GEMV and in tiles of every height alike; the GEMV gets its
 * parallelism from several panels, never from splitting k.
 *
 * Attention reads keys transposed: scores come out 16 positions per vector with no horizontal
 * sums. Prefill runs tiles of 8 query rows so each key and value row loaded serves 8 rows; a row
 * alone and a row in a tile run the same chains (scores over d, weighted values over positions,
 * both ascending) and the same softmax code. */
#include "core/kernels.h"

#include <immintrin.h>
#include <math.h>

#include "core/gpt2_math.h"

#define MR_MAX 12
#define GEMV_NP KERNELS_GEMV_PANELS
_Static_assert(GEMV_NP >= 1 && GEMV_NP <= 4, "mm_gemv holds at most 4 panels");

/* ---------------------------------------------------------------------------------------------
 * Vector math */

/* e^x, Cephes expf's polynomial on [-ln2/2, ln2/2]; scalef applies 2^n without overflow tricks
 * (large x gives +inf, very negative x gives 0). About 1 ulp. */
static inline __m512 v_exp(__m512 x)
{
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.8f)), _mm512_set1_ps(-104.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* gelu_tanh(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), with
 * tanh(u) = 1 - 2 / (1 + e^(2u)): the same formula as gpt2_math.h, evaluated in vector form. */
static inline __m512 v_gelu_tanh(__m512 x)
{
    __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
    __m512 u = _mm512_mul_ps(_mm512_set1_ps(GPT2_SQRT_2_OVER_PI),
                             _mm512_fmadd_ps(_mm512_set1_ps(GPT2_GELU_COEF), x3, x));
    __m512 e = v_exp(_mm512_add_ps(u, u));
    __m512 th = _mm512_sub_ps(_mm512_set1_ps(1.0f),
                              _mm512_div_ps(_mm512_set1_ps(2.0f),
                                            _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x),
                         _mm512_add_ps(_mm512_set1_ps(1.0f), th));
}

static inline __m512 v_gelu_erf(__m512 x)
{
    float t[16];
    _mm512_storeu_ps(t, x);
    for (int i = 0; i < 16; i++)
        t[i] = gpt2_gelu_erf(t[i]);
    return _mm512_loadu_ps(t);
}

static inline float v_hsum(__m512 v)
{
    return _mm512_reduce_add_ps(v);
}

/* ---------------------------------------------------------------------------------------------
 * Matmul */

/* Bias, activation or residual add, then the store of one tile row's 32 columns (masked past N). */
static inline __attribute__((always_inline)) void
mm_finish(const matmul_args *a, int t, int n0, __mmask16 m0, __mmask16 m1, __m512 c0, __m512 c1)
{
    if (a->bias) {
        c0 = _mm512_add_ps(c0, _mm512_maskz_loadu_ps(m0, a->bias + n0));
        c1 = _mm512_add_ps(c1, _mm512_maskz_loadu_ps(m1, a->bias + n0 + 16));
    }
    float *o = a->out + (size_t)t * (size_t)a->ldo + n0;
    switch (a->epilogue) {
    case MM_STORE:
        break;
    case MM_ADD:
        c0 = _mm512_add_ps(c0, _mm512_maskz_loadu_ps(m0, o));
        c1 = _mm512_add_ps(c1, _mm512_maskz_loadu_ps(m1, o + 16));
        break;
    case MM_GELU_TANH:
        c0 = v_gelu_tanh(c0);
        c1 = v_gelu_tanh(c1);
        break;
    case MM_GELU_ERF:
        c0 = v_gelu_erf(c0);
        c1 = v_gelu_erf(c1);
        break;
    }
    _mm512_mask_storeu_ps(o, m0, c0);
    _mm512_mask_storeu_ps(o + 16, m1, c1);
}

/* The panel row k (or rows k, k+1 for bf16) as fp32 vectors: b0 = columns 0-15, b1 = 16-31. */
static inline __attribute__((always_inline)) void
load_row(tt_dtype dt, const void *panel, int k, __m512 *b0, __m512 *b1)
{
    if (dt == TT_F32) {
        const float *w = (const float *)panel + (size_t)k * KERNELS_NR;
        *b0 = _mm512_load_ps(w);
        *b1 = _mm512_load_ps(w + 16);
    } else {
        const uint16_t *w = (const uint16_t *)panel + (size_t)k * KERNELS_NR;
        *b0 = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)w));
        *b1 = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(w + 16)));
    }
}

/* bf16 pair row kp: even (k = 2kp) and odd (k = 2kp+1) rows for columns 0-15 and 16-31. */
static inline __attribute__((always_inline)) void
load_pair_bf16(const void *panel, int kp, __m512 *e0, __m512 *o0, __m512 *e1, __m512 *o1)
{
    const uint16_t *w = (const uint16_t *)panel + (size_t)kp * 2 * KERNELS_NR;
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    __m512i u0 = _mm512_load_si512((const void *)w);
    __m512i u1 = _mm512_load_si512((const void *)(w + 32));
    *e0 = _mm512_castsi512_ps(_mm512_slli_epi32(u0, 16));
    *o0 = _mm512_castsi512_ps(_mm512_and_si512(u0, hi));
    *e1 = _mm512_castsi512_ps(_mm512_slli_epi32(u1, 16));
    *o1 = _mm512_castsi512_ps(_mm512_and_si512(u1, hi));
}

/* Software prefetch distance of the decode GEMV, in bytes ahead of the row being read. The
 * hardware prefetchers alone left a core at about 11 GB/s on fp16/bf16 panels (14 on fp32);
 * prefetching 2-4 KiB ahead (measured 1, 2 and 4 KiB) lifts both to the core's streaming rate.
 * Prefetches past the end of a matrix are harmless: they never fault. */
#define GEMV_PREFETCH_16 2048
#define GEMV_PREFETCH_32 4096

/* MR rows t0 .. t0+MR-1 against panel p (its data at panel, in dtype dt). MR is a constant after
 * inlining, so c0/c1 live in registers and the row loops unroll. */
static inline __attribute__((always_inline)) void
mm_tile(const matmul_args *a, tt_dtype dt, int MR, int t0, const void *panel, int p)
{
    const packed_matrix *w = a->w;
    const float *x = a->x + (size_t)t0 * (size_t)a->ldx;
    const size_t ldx = (size_t)a->ldx;
    const int K = w->K;
    __m512 c0[MR_MAX], c1[MR_MAX];
#pragma GCC unroll 12
    for (int r = 0; r < MR; r++) {
        c0[r] = _mm512_setzero_ps();
        c1[r] = _mm512_setzero_ps();
    }
    if (dt == TT_BF16) {
        int kp = 0;
        for (; 2 * kp + 1 < K; kp++) {
            __m512 e0, o0, e1, o1;
            if (MR < MR_MAX) {           /* a short tile (a decode batch) streams like the GEMV */
                const char *pf = (const char *)panel + (size_t)kp * 128 + GEMV_PREFETCH_16;
                _mm_prefetch(pf, _MM_HINT_T0);
                _mm_prefetch(pf + 64, _MM_HINT_T0);
            }
            load_pair_bf16(panel, kp, &e0, &o0, &e1, &o1);
#pragma GCC unroll 12
            for (int r = 0; r < MR; r++) {
                __m512 xe = _mm512_set1_ps(x[r * ldx + 2 * kp]);
                __m512 xo = _mm512_set1_ps(x[r * ldx + 2 * kp + 1]);
                c0[r] = _mm512_fmadd_ps(xe, e0, c0[r]);
                c1[r] = _mm512_fmadd_ps(xe, e1, c1[r]);
                c0[r] = _mm512_fmadd_ps(xo, o0, c0[r]);
                c1[r] = _mm512_fmadd_ps(xo, o1, c1[r]);
            }
        }
        if (2 * kp < K) {                   /* odd K: the last row has no partner */
            __m512 e0, o0, e1, o1;
            load_pair_bf16(panel, kp, &e0, &o0, &e1, &o1);
#pragma GCC unroll 12
            for (int r = 0; r < MR; r++) {
                __m512 xe = _mm512_set1_ps(x[r * ldx + 2 * kp]);
                c0[r] = _mm512_fmadd_ps(xe, e0, c0[r]);
                c1[r] = _mm512_fmadd_ps(xe, e1, c1[r]);
            }
        }
    } else {
        const size_t row_bytes = dt == TT_F32 ? 128 : 64;
        for (int k = 0; k < K; k++) {
            __m512 b0, b1;
            if (MR < MR_MAX) {           /* a short tile (a decode batch) streams like the GEMV */
                const char *pf = (const char *)panel + (size_t)k * row_bytes +
                                 (dt == TT_F32 ? GEMV_PREFETCH_32 : GEMV_PREFETCH_16);
                _mm_prefetch(pf, _MM_HINT_T0);
                if (dt == TT_F32)
                    _mm_prefetch(pf + 64, _MM_HINT_T0);
            }
            load_row(dt, panel, k, &b0, &b1);
#pragma GCC unroll 12
            for (int r = 0; r < MR; r++) {
                __m512 xa = _mm512_set1_ps(x[r * ldx + k]);
                c0[r] = _mm512_fmadd_ps(xa, b0, c0[r]);
                c1[r] = _mm512_fmadd_ps(xa, b1, c1[r]);
            }
        }
    }
    int n0 = p * KERNELS_NR;
    int nc = w->N - n0 < KERNELS_NR ? w->N - n0 : KERNELS_NR;
    __mmask16 m0 = nc >= 16 ? 0xffff : (__mmask16)((1u << nc) - 1);
    __mmask16 m1 = nc >= 32 ? 0xffff : nc <= 16 ? 0 : (__mmask16)((1u << (nc - 16)) - 1);
#pragma GCC unroll 12
    for (int r = 0; r < MR; r++)
        mm_finish(a, t0 + r, n0, m0, m1, c0[r], c1[r]);
}


/* One row against NP panels side by side: the decode GEMV. Each output lane is one FMA chain over
 * k ascending, the chain mm_tile runs for every row of a tile, so a row's result does not depend
 * on how many rows came with it. The latency a single chain would expose is hidden by the 2 NP
 * chains of the NP panels, streamed together (each with its own software prefetch). */
static inline __attribute__((always_inline)) void
mm_gemv(const matmul_args *a, tt_dtype dt, int NP, const void *panel, size_t panel_bytes, int p)
{
    const packed_matrix *w = a->w;
    const float *x = a->x;
    const int K = w->K;
    __m512 c0[4], c1[4];                 /* NP <= 4 */
#pragma GCC unroll 4
    for (int g = 0; g < NP; g++)
        c0[g] = c1[g] = _mm512_setzero_ps();
    if (dt == TT_BF16) {
        int kp = 0;
        for (; 2 * kp + 1 < K; kp++) {
            const __m512 xe = _mm512_set1_ps(x[2 * kp]), xo = _mm512_set1_ps(x[2 * kp + 1]);
#pragma GCC unroll 4
            for (int g = 0; g < NP; g++) {
                const char *pg = (const char *)panel + (size_t)g * panel_bytes;
                const char *pf = pg + (size_t)kp * 128 + GEMV_PREFETCH_16;
                _mm_prefetch(pf, _MM_HINT_T0);
                _mm_prefetch(pf + 64, _MM_HINT_T0);
                __m512 e0, o0, e1, o1;
                load_pair_bf16(pg, kp, &e0, &o0, &e1, &o1);
                c0[g] = _mm512_fmadd_ps(xe, e0, c0[g]);
                c1[g] = _mm512_fmadd_ps(xe, e1, c1[g]);
                c0[g] = _mm512_fmadd_ps(xo, o0, c0[g]);
                c1[g] = _mm512_fmadd_ps(xo, o1, c1[g]);
            }
        }
        if (2 * kp < K) {                   /* odd K: the last row has no partner */
            const __m512 xe = _mm512_set1_ps(x[2 * kp]);
#pragma GCC unroll 4
            for (int g = 0; g < NP; g++) {
                __m512 e0, o0, e1, o1;
                load_pair_bf16((const char *)panel + (size_t)g * panel_bytes, kp, &e0, &o0, &e1,
                               &o1);
                c0[g] = _mm512_fmadd_ps(xe, e0, c0[g]);
                c1[g] = _mm512_fmadd_ps(xe, e1, c1[g]);
            }
        }
    } else {
        const size_t row_bytes = dt == TT_F32 ? 128 : 64;
        for (int k = 0; k < K; k++) {
            const __m512 xa = _mm512_set1_ps(x[k]);
#pragma GCC unroll 4
            for (int g = 0; g < NP; g++) {
                const char *pg = (const char *)panel + (size_t)g * panel_bytes;
                const char *pf = pg + (size_t)k * row_bytes +
                                 (dt == TT_F32 ? GEMV_PREFETCH_32 : GEMV_PREFETCH_16);
                _mm_prefetch(pf, _MM_HINT_T0);
                if (dt == TT_F32)
                    _mm_prefetch(pf + 64, _MM_HINT_T0);
                __m512 b0, b1;
                load_row(dt, pg, k, &b0, &b1);
                c0[g] = _mm512_fmadd_ps(xa, b0, c0[g]);
                c1[g] = _mm512_fmadd_ps(xa, b1, c1[g]);
            }
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < NP; g++) {
        int n0 = (p + g) * KERNELS_NR;
        int nc = w->N - n0 < KERNELS_NR ? w->N - n0 : KERNELS_NR;
        __mmask16 m0 = nc >= 16 ? 0xffff : (__mmask16)((1u << nc) - 1);
        __mmask16 m1 = nc >= 32 ? 0xffff : nc <= 16 ? 0 : (__mmask16)((1u << (nc - 16)) - 1);
        mm_finish(a, 0, n0, m0, m1, c0[g], c1[g]);
    }
}

/* All rows against one panel, 12 rows at a time, the rest in one smaller tile (the same chains
 * whatever the tile's height). */
static inline __attribute__((always_inline)) void
mm_rows(const matmul_args *a, tt_dtype dt, const void *panel, int p)
{
    int t = 0;
    for (; t + MR_MAX <= a->T; t += MR_MAX)
        mm_tile(a, dt, MR_MAX, t, panel, p);
    switch (a->T - t) {
    case 0: break;
    case 1: mm_tile(a, dt, 1, t, panel, p); break;
    case 2: mm_tile(a, dt, 2, t, panel, p); break;
    case 3: mm_tile(a, dt, 3, t, panel, p); break;
    case 4: mm_tile(a, dt, 4, t, panel, p); break;
    case 5: mm_tile(a, dt, 5, t, panel, p); break;
    case 6: mm_tile(a, dt, 6, t, panel, p); break;
    case 7: mm_tile(a, dt, 7, t, panel, p); break;
    case 8: mm_tile(a, dt, 8, t, panel, p); break;
    case 9: mm_tile(a, dt, 9, t, panel, p); break;
    case 10: mm_tile(a, dt, 10, t, panel, p); break;
    default: mm_tile(a, dt, 11, t, panel, p); break;
    }
}

/* A fp16/bf16 panel widened to fp32 (K, 32) in scratch: with many rows the conversion is paid
 * once per panel instead of once per 12-row tile, where it would take FMA-port slots. */
static inline __attribute__((always_inline)) void
widen_panel(tt_dtype dt, const void *panel, int K, float *dst)
{
    if (dt == TT_BF16) {
        int kp = 0;
        for (; 2 * kp < K; kp++) {
            __m512 e0, o0, e1, o1;
            load_pair_bf16(panel, kp, &e0, &o0, &e1, &o1);
            float *d = dst + (size_t)2 * kp * KERNELS_NR;
            _mm512_store_ps(d, e0);
            _mm512_store_ps(d + 16, e1);
            if (2 * kp + 1 < K) {
                _mm512_store_ps(d + 32, o0);
                _mm512_store_ps(d + 48, o1);
            }
        }
    } else {
        for (int k = 0; k < K; k++) {
            __m512 b0, b1;
            load_row(dt, panel, k, &b0, &b1);
            _mm512_store_ps(dst + (size_t)k * KERNELS_NR, b0);
            _mm512_store_ps(dst + (size_t)k * KERNELS_NR + 16, b1);
        }
    }
}

static inline __attribute__((always_inline)) void
mm_panels(const matmul_args *a, tt_dtype dt, int p0, int p1, float *scratch)
{
    const packed_matrix *w = a->w;
    const size_t panel_bytes = w->panel_elems * tt_dtype_size(dt);
    const char *data = (const char *)w->data;
    if (a->T == 1) {
        int p = p0;
        for (; p + GEMV_NP <= p1; p += GEMV_NP)
            mm_gemv(a, dt, GEMV_NP, data + (size_t)p * panel_bytes, panel_bytes, p);
        switch (p1 - p) {
        case 0: break;
        case 1: mm_gemv(a, dt, 1, data + (size_t)p * panel_bytes, panel_bytes, p); break;
        case 2: mm_gemv(a, dt, 2, data + (size_t)p * panel_bytes, panel_bytes, p); break;
        default: mm_gemv(a, dt, 3, data + (size_t)p * panel_bytes, panel_bytes, p); break;
        }
        return;
    }
    for (int p = p0; p < p1; p++) {
        const void *panel = data + (size_t)p * panel_bytes;
        if (dt != TT_F32 && scratch && a->T >= 2 * MR_MAX) {
            widen_panel(dt, panel, w->K, scratch);
            mm_rows(a, TT_F32, scratch, p);
        } else {
            mm_rows(a, dt, panel, p);
        }
    }
}

static void mm_f32(const matmul_args *a, int p0, int p1, float *s) { mm_panels(a, TT_F32, p0, p1, s); }
static void mm_f16(const matmul_args *a, int p0, int p1, float *s) { mm_panels(a, TT_F16, p0, p1, s); }
static void mm_bf16(const matmul_args *a, int p0, int p1, float *s) { mm_panels(a, TT_BF16, p0, p1, s); }

static void avx512_matmul(const matmul_args *a, int p0, int p1, float *scratch)
{
    switch (a->w->dtype) {
    case TT_F32: mm_f32(a, p0, p1, scratch); break;
    case TT_F16: mm_f16(a, p0, p1, scratch); break;
    case TT_BF16: mm_bf16(a, p0, p1, scratch); break;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Attention */

static inline __mmask16 lanes16(int n)
{
    return n <= 0 ? 0 : n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
}

/* The softmax numerators exp(s - max) of one query row's scores srow[0..n), in place; returns
 * 1 / their sum. The one-row path and the tiles both call it, so a row's weights are the same
 * bits whichever computed them. */
static inline float softmax_row(float *srow, int n)
{
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (int t = 0; t < n; t += 16) {
        const __mmask16 m = lanes16(n - t);
        vmax = _mm512_mask_max_ps(vmax, m, vmax, _mm512_maskz_loadu_ps(m, srow + t));
    }
    const __m512 vmx = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
    __m512 vsum = _mm512_setzero_ps();
    for (int t = 0; t < n; t += 16) {
        const __mmask16 m = lanes16(n - t);
        __m512 e = v_exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, srow + t), vmx));
        e = _mm512_maskz_mov_ps(m, e);
        _mm512_mask_storeu_ps(srow + t, m, e);
        vsum = _mm512_add_ps(vsum, e);
    }
    return 1.0f / v_hsum(vsum);
}

/* One query row at a time (decode, and the rows a tile leaves over). Every score is one FMA chain
 * over d ascending and every output column one chain over the keys ascending, scaled afterwards:
 * the chains attention_tile runs for each of its rows. Independent chains side by side (128
 * positions, 64 head columns) supply the parallelism instead of split accumulators. */
static void attention_rows(const attention_args *a, int h, int t0, int t1, float *scratch)
{
    const int HS = a->HS;
    const size_t ldk = (size_t)a->ldk;
    const __m512 scale = _mm512_set1_ps(gpt2_attn_scale(HS));
    const float *kh = a->k + (size_t)h * (size_t)HS * ldk;                 /* (HS, ldk) */
    const float *vh = a->v + (size_t)h * (size_t)a->n_ctx * (size_t)HS;    /* (n_ctx, HS) */
    for (int i = t0; i < t1; i++) {
        const float *q = a->q + (size_t)i * (size_t)a->ldq + (size_t)h * (size_t)HS;
        float *o = a->out + (size_t)i * (size_t)a->ldo + (size_t)h * (size_t)HS;
        const int n = a->pos + i + 1;
        for (int t = 0; t < n; t += 128) {
            __mmask16 m[8];
            __m512 sc[8];
#pragma GCC unroll 8
            for (int b = 0; b < 8; b++) {
                m[b] = lanes16(n - t - 16 * b);
                sc[b] = _mm512_setzero_ps();
            }
            const float *kr = kh + t;
            for (int d = 0; d < HS; d++, kr += ldk) {
                const __m512 qd = _mm512_set1_ps(q[d]);
#pragma GCC unroll 8
                for (int b = 0; b < 8; b++)
                    sc[b] = _mm512_fmadd_ps(qd, _mm512_maskz_loadu_ps(m[b], kr + 16 * b), sc[b]);
            }
#pragma GCC unroll 8
            for (int b = 0; b < 8; b++)
                _mm512_mask_storeu_ps(scratch + t + 16 * b, m[b], _mm512_mul_ps(sc[b], scale));
        }
        const __m512 inv = _mm512_set1_ps(softmax_row(scratch, n));
        for (int d0 = 0; d0 < HS; d0 += 64) {
            __mmask16 m[4];
            __m512 acc[4];
#pragma GCC unroll 4
            for (int b = 0; b < 4; b++) {
                m[b] = lanes16(HS - d0 - 16 * b);
                acc[b] = _mm512_setzero_ps();
            }
            const float *vr = vh + d0;
            for (int u = 0; u < n; u++, vr += HS) {
                const __m512 p = _mm512_set1_ps(scratch[u]);
#pragma GCC unroll 4
                for (int b = 0; b < 4; b++)
                    acc[b] = _mm512_fmadd_ps(p, _mm512_maskz_loadu_ps(m[b], vr + 16 * b), acc[b]);
            }
#pragma GCC unroll 4
            for (int b = 0; b < 4; b++)
                _mm512_mask_storeu_ps(o + d0 + 16 * b, m[b], _mm512_mul_ps(acc[b], inv));
        }
    }
}

/* Query rows per prefill tile. */
#define ATT_QB 8

/* Scores of the tile's rows, 32 positions x ATT_QB rows per step (16 accumulators), into
 * scratch (ATT_QB, ls). The three steps of a tile are separate functions so that each gets the
 * register file to itself (GCC 12 spilled a key vector of this loop when they were one). */
static __attribute__((noinline)) void
tile_scores(const attention_args *a, int h, int i0, float *scratch)
{
    const int HS = a->HS;
    const size_t ldk = (size_t)a->ldk;
    const __m512 scale = _mm512_set1_ps(gpt2_attn_scale(HS));
    const float *kh = a->k + (size_t)h * (size_t)HS * ldk;                 /* (HS, ldk) */
    const int n_max = a->pos + i0 + ATT_QB;
    const size_t ls = (size_t)n_max;
    const float *q[ATT_QB];
#pragma GCC unroll 8
    for (int r = 0; r < ATT_QB; r++)
        q[r] = a->q + (size_t)(i0 + r) * (size_t)a->ldq + (size_t)h * (size_t)HS;
    for (int t = 0; t < n_max; t += 32) {
        const __mmask16 m0 = lanes16(n_max - t), m1 = lanes16(n_max - t - 16);
        __m512 c0[ATT_QB], c1[ATT_QB];
#pragma GCC unroll 8
        for (int r = 0; r < ATT_QB; r++)
            c0[r] = c1[r] = _mm512_setzero_ps();
        const float *kr = kh + t;
        for (int d = 0; d < HS; d++, kr += ldk) {
            __m512 b0 = _mm512_maskz_loadu_ps(m0, kr), b1 = _mm512_maskz_loadu_ps(m1, kr + 16);
#pragma GCC unroll 8
            for (int r = 0; r < ATT_QB; r++) {
                __m512 qd = _mm512_set1_ps(q[r][d]);
                c0[r] = _mm512_fmadd_ps(qd, b0, c0[r]);
                c1[r] = _mm512_fmadd_ps(qd, b1, c1[r]);
            }
        }
#pragma GCC unroll 8
        for (int r = 0; r < ATT_QB; r++) {
            _mm512_mask_storeu_ps(scratch + r * ls + t, m0, _mm512_mul_ps(c0[r], scale));
            _mm512_mask_storeu_ps(scratch + r * ls + t + 16, m1, _mm512_mul_ps(c1[r], scale));
        }
    }
}

/* Outputs of the tile's rows from the softmax numerators in scratch (ATT_QB, ls), 32 head
 * columns x ATT_QB rows per step (16 accumulators), each row scaled by its inv. */
static __attribute__((noinline)) void
tile_values(const attention_args *a, int h, int i0, const float *scratch, const float *inv)
{
    const int HS = a->HS;
    const float *vh = a->v + (size_t)h * (size_t)a->n_ctx * (size_t)HS;    /* (n_ctx, HS) */
    const int n_min = a->pos + i0 + 1;        /* keys every row of the tile sees */
    const size_t ls = (size_t)(a->pos + i0 + ATT_QB);
    for (int d0 = 0; d0 < HS; d0 += 32) {
        const __mmask16 m0 = lanes16(HS - d0), m1 = lanes16(HS - d0 - 16);
        __m512 c0[ATT_QB], c1[ATT_QB];
#pragma GCC unroll 8
        for (int r = 0; r < ATT_QB; r++)
            c0[r] = c1[r] = _mm512_setzero_ps();
        const float *vr = vh + d0;
        int u = 0;
        for (; u < n_min; u++, vr += HS) {
            __m512 b0 = _mm512_maskz_loadu_ps(m0, vr), b1 = _mm512_maskz_loadu_ps(m1, vr + 16);
#pragma GCC unroll 8
            for (int r = 0; r < ATT_QB; r++) {
                __m512 p = _mm512_set1_ps(scratch[r * ls + u]);
                c0[r] = _mm512_fmadd_ps(p, b0, c0[r]);
                c1[r] = _mm512_fmadd_ps(p, b1, c1[r]);
            }
        }
        /* The triangle: row r also sees keys n_min .. n_min + r - 1. */
#pragma GCC unroll 8
        for (int r = 1; r < ATT_QB; r++) {
            const float *vt = vr;
            for (int j = 0; j < r; j++, vt += HS) {
                __m512 p = _mm512_set1_ps(scratch[r * ls + (size_t)(u + j)]);
                c0[r] = _mm512_fmadd_ps(p, _mm512_maskz_loadu_ps(m0, vt), c0[r]);
                c1[r] = _mm512_fmadd_ps(p, _mm512_maskz_loadu_ps(m1, vt + 16), c1[r]);
            }
        }
#pragma GCC unroll 8
        for (int r = 0; r < ATT_QB; r++) {
            float *o = a->out + (size_t)(i0 + r) * (size_t)a->ldo + (size_t)h * (size_t)HS + d0;
            __m512 sc = _mm512_set1_ps(inv[r]);
            _mm512_mask_storeu_ps(o, m0, _mm512_mul_ps(c0[r], sc));
            _mm512_mask_storeu_ps(o + 16, m1, _mm512_mul_ps(c1[r], sc));
        }
    }
}

/* ATT_QB query rows at once (prefill): each row of transposed keys and each value row loaded
 * feeds ATT_QB rows of scores or outputs instead of one. Rows i0 .. i0+ATT_QB-1 see keys up to
 * pos+i0+r; the score tile covers the longest, and in the weighted sum the keys a row does not
 * see are skipped for that row (not added with weight zero), so each row runs exactly the chains
 * of attention_rows. scratch: (ATT_QB, ls) with ls = pos + i0 + ATT_QB. */
static void attention_tile(const attention_args *a, int h, int i0, float *scratch)
{
    const int n_min = a->pos + i0 + 1;
    const size_t ls = (size_t)(a->pos + i0 + ATT_QB);
    float inv[ATT_QB];
    tile_scores(a, h, i0, scratch);
    for (int r = 0; r < ATT_QB; r++)
        inv[r] = softmax_row(scratch + r * ls, n_min + r);
    tile_values(a, h, i0, scratch, inv);
}

static void avx512_attention(const attention_args *a, int h, int t0, int t1, float *scratch)
{
    int i = t0;
    for (; i + ATT_QB <= t1; i += ATT_QB)
        attention_tile(a, h, i, scratch);
    attention_rows(a, h, i, t1, scratch);
}

/* ---------------------------------------------------------------------------------------------
 * The set */

static const kernels avx512_set = {
    .name = "avx512",
    .matmul = avx512_matmul,
    .attention = avx512_attention,
};

/* The CPU check is the caller's (kernels.c, built without AVX-512 flags). */
const kernels *kernels_avx512_get(void)
{
    return &avx512_set;
}
