/* kernels_avx2.c: the AVX2 + FMA + F16C kernel set (built with AVX2 flags, chosen at run time on
 * CPUs without AVX-512), the same algorithms as kernels_avx512.c in 8-lane vectors.
 *
 * With 16 ymm registers a tile covers half a panel: up to 6 rows x 16 columns (12 accumulators,
 * two panel loads and a broadcast per k step). One row (decode) streams two whole panels side by
 * side (8 accumulators). As in kernels_avx512.c every output lane is one FMA chain over k
 * ascending in both, so a row gives the same bits alone or in a tile. Attention runs one query
 * row at a time, prefill or decode, so its order cannot depend on the span either. Tails use
 * maskload/maskstore with lane masks. */
#include "core/kernels.h"

#include <immintrin.h>
#include <math.h>

#include "core/gpt2_math.h"

#define MR2 6

/* ---------------------------------------------------------------------------------------------
 * Vector math */

/* e^x, Cephes expf's polynomial; x is clamped to [-87, 88] so 2^n stays a normal float (the
 * results there, about 1e-38 and 1.7e38, act as 0 and infinity for softmax and tanh). */
static inline __m256 v8_exp(__m256 x)
{
    x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.0f)), _mm256_set1_ps(-87.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)),
                                  23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static inline __m256 v8_gelu_tanh(__m256 x)
{
    __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
    __m256 u = _mm256_mul_ps(_mm256_set1_ps(GPT2_SQRT_2_OVER_PI),
                             _mm256_fmadd_ps(_mm256_set1_ps(GPT2_GELU_COEF), x3, x));
    __m256 e = v8_exp(_mm256_add_ps(u, u));
    __m256 th = _mm256_sub_ps(_mm256_set1_ps(1.0f),
                              _mm256_div_ps(_mm256_set1_ps(2.0f),
                                            _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x),
                         _mm256_add_ps(_mm256_set1_ps(1.0f), th));
}

static inline __m256 v8_gelu_erf(__m256 x)
{
    float t[8];
    _mm256_storeu_ps(t, x);
    for (int i = 0; i < 8; i++)
        t[i] = gpt2_gelu_erf(t[i]);
    return _mm256_loadu_ps(t);
}

static inline float v8_hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Lane mask for the first n lanes (n clamped to [0, 8]). */
static inline __m256i v8_mask(int n)
{
    n = n < 0 ? 0 : n > 8 ? 8 : n;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* ---------------------------------------------------------------------------------------------
 * Matmul */

/* Bias, activation or residual add, then the masked store of 8 columns starting at column n. */
static inline __attribute__((always_inline)) void
mm8_finish(const matmul_args *a, int t, int n, __m256i m, __m256 c)
{
    if (a->bias)
        c = _mm256_add_ps(c, _mm256_maskload_ps(a->bias + n, m));
    float *o = a->out + (size_t)t * (size_t)a->ldo + n;
    switch (a->epilogue) {
    case MM_STORE: break;
    case MM_ADD: c = _mm256_add_ps(c, _mm256_maskload_ps(o, m)); break;
    case MM_GELU_TANH: c = v8_gelu_tanh(c); break;
    case MM_GELU_ERF: c = v8_gelu_erf(c); break;
    }
    _mm256_maskstore_ps(o, m, c);
}

/* Panel row k, columns h*16 .. h*16+15, as two fp32 vectors (fp32 or fp16 panels). */
static inline __attribute__((always_inline)) void
load_half(tt_dtype dt, const void *panel, int k, int h, __m256 *b0, __m256 *b1)
{
    size_t off = (size_t)k * KERNELS_NR + (size_t)h * 16;
    if (dt == TT_F32) {
        *b0 = _mm256_load_ps((const float *)panel + off);
        *b1 = _mm256_load_ps((const float *)panel + off + 8);
    } else {
        const uint16_t *w = (const uint16_t *)panel + off;
        *b0 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)w));
        *b1 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(w + 8)));
    }
}

/* bf16 pair row kp, columns h*16 .. h*16+15: even (k = 2kp) and odd rows, 8 columns each. */
static inline __attribute__((always_inline)) void
load_pair_half(const void *panel, int kp, int h, __m256 *e0, __m256 *o0, __m256 *e1, __m256 *o1)
{
    const uint16_t *w = (const uint16_t *)panel + (size_t)kp * 2 * KERNELS_NR + (size_t)h * 32;
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    __m256i u0 = _mm256_load_si256((const __m256i *)w);
    __m256i u1 = _mm256_load_si256((const __m256i *)(w + 16));
    *e0 = _mm256_castsi256_ps(_mm256_slli_epi32(u0, 16));
    *o0 = _mm256_castsi256_ps(_mm256_and_si256(u0, hi));
    *e1 = _mm256_castsi256_ps(_mm256_slli_epi32(u1, 16));
    *o1 = _mm256_castsi256_ps(_mm256_and_si256(u1, hi));
}

/* MR rows t0 .. against half h of panel p (data at panel, in dt). */
static inline __attribute__((always_inline)) void
mm8_tile(const matmul_args *a, tt_dtype dt, int MR, int t0, const void *panel, int p, int h)
{
    const int K = a->w->K;
    const float *x = a->x + (size_t)t0 * (size_t)a->ldx;
    const size_t ldx = (size_t)a->ldx;
    __m256 c0[MR2], c1[MR2];
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) {
        c0[r] = _mm256_setzero_ps();
        c1[r] = _mm256_setzero_ps();
    }
    if (dt == TT_BF16) {
        int kp = 0;
        for (; 2 * kp + 1 < K; kp++) {
            __m256 e0, o0, e1, o1;
            load_pair_half(panel, kp, h, &e0, &o0, &e1, &o1);
#pragma GCC unroll 6
            for (int r = 0; r < MR; r++) {
                __m256 xe = _mm256_set1_ps(x[r * ldx + 2 * kp]);
                __m256 xo = _mm256_set1_ps(x[r * ldx + 2 * kp + 1]);
                c0[r] = _mm256_fmadd_ps(xe, e0, c0[r]);
                c1[r] = _mm256_fmadd_ps(xe, e1, c1[r]);
                c0[r] = _mm256_fmadd_ps(xo, o0, c0[r]);
                c1[r] = _mm256_fmadd_ps(xo, o1, c1[r]);
            }
        }
        if (2 * kp < K) {
            __m256 e0, o0, e1, o1;
            load_pair_half(panel, kp, h, &e0, &o0, &e1, &o1);
#pragma GCC unroll 6
            for (int r = 0; r < MR; r++) {
                __m256 xe = _mm256_set1_ps(x[r * ldx + 2 * kp]);
                c0[r] = _mm256_fmadd_ps(xe, e0, c0[r]);
                c1[r] = _mm256_fmadd_ps(xe, e1, c1[r]);
            }
        }
    } else {
        for (int k = 0; k < K; k++) {
            __m256 b0, b1;
            load_half(dt, panel, k, h, &b0, &b1);
#pragma GCC unroll 6
            for (int r = 0; r < MR; r++) {
                __m256 xa = _mm256_set1_ps(x[r * ldx + k]);
                c0[r] = _mm256_fmadd_ps(xa, b0, c0[r]);
                c1[r] = _mm256_fmadd_ps(xa, b1, c1[r]);
            }
        }
    }
    int n0 = p * KERNELS_NR + h * 16;
    __m256i m0 = v8_mask(a->w->N - n0), m1 = v8_mask(a->w->N - n0 - 8);
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) {
        mm8_finish(a, t0 + r, n0, m0, c0[r]);
        mm8_finish(a, t0 + r, n0 + 8, m1, c1[r]);
    }
}

/* Software prefetch distance of the decode GEMV (see kernels_avx512.c). */
#define GEMV_PREFETCH_16 2048
#define GEMV_PREFETCH_32 4096

/* One row against NP panels side by side: the decode GEMV. Each output lane is one FMA chain over
 * k ascending, the chain mm8_tile runs for every row of a tile, so a row's result does not depend
 * on how many rows came with it; the 4 NP chains of the NP panels hide the FMA latency. */
static inline __attribute__((always_inline)) void
mm8_gemv(const matmul_args *a, tt_dtype dt, int NP, const void *panel, size_t panel_bytes, int p)
{
    const int K = a->w->K;
    const float *x = a->x;
    __m256 c[2][4];                      /* (NP <= 2, 32 columns / 8) */
#pragma GCC unroll 2
    for (int g = 0; g < NP; g++)
        for (int i = 0; i < 4; i++)
            c[g][i] = _mm256_setzero_ps();
    if (dt == TT_BF16) {
        int kp = 0;
        for (; 2 * kp + 1 < K; kp++) {
            const __m256 xe = _mm256_set1_ps(x[2 * kp]), xo = _mm256_set1_ps(x[2 * kp + 1]);
#pragma GCC unroll 2
            for (int g = 0; g < NP; g++) {
                const char *pg = (const char *)panel + (size_t)g * panel_bytes;
                const char *pf = pg + (size_t)kp * 128 + GEMV_PREFETCH_16;
                _mm_prefetch(pf, _MM_HINT_T0);
                _mm_prefetch(pf + 64, _MM_HINT_T0);
                for (int h = 0; h < 2; h++) {
                    __m256 e0, o0, e1, o1;
                    load_pair_half(pg, kp, h, &e0, &o0, &e1, &o1);
                    c[g][2 * h] = _mm256_fmadd_ps(xe, e0, c[g][2 * h]);
                    c[g][2 * h + 1] = _mm256_fmadd_ps(xe, e1, c[g][2 * h + 1]);
                    c[g][2 * h] = _mm256_fmadd_ps(xo, o0, c[g][2 * h]);
                    c[g][2 * h + 1] = _mm256_fmadd_ps(xo, o1, c[g][2 * h + 1]);
                }
            }
        }
        if (2 * kp < K) {                   /* odd K: the last row has no partner */
            const __m256 xe = _mm256_set1_ps(x[2 * kp]);
#pragma GCC unroll 2
            for (int g = 0; g < NP; g++)
                for (int h = 0; h < 2; h++) {
                    __m256 e0, o0, e1, o1;
                    load_pair_half((const char *)panel + (size_t)g * panel_bytes, kp, h, &e0, &o0,
                                   &e1, &o1);
                    c[g][2 * h] = _mm256_fmadd_ps(xe, e0, c[g][2 * h]);
                    c[g][2 * h + 1] = _mm256_fmadd_ps(xe, e1, c[g][2 * h + 1]);
                }
        }
    } else {
        const size_t row_bytes = dt == TT_F32 ? 128 : 64;
        for (int k = 0; k < K; k++) {
            const __m256 xa = _mm256_set1_ps(x[k]);
#pragma GCC unroll 2
            for (int g = 0; g < NP; g++) {
                const char *pg = (const char *)panel + (size_t)g * panel_bytes;
                const char *pf = pg + (size_t)k * row_bytes +
                                 (dt == TT_F32 ? GEMV_PREFETCH_32 : GEMV_PREFETCH_16);
                _mm_prefetch(pf, _MM_HINT_T0);
                if (dt == TT_F32)
                    _mm_prefetch(pf + 64, _MM_HINT_T0);
                for (int h = 0; h < 2; h++) {
                    __m256 b0, b1;
                    load_half(dt, pg, k, h, &b0, &b1);
                    c[g][2 * h] = _mm256_fmadd_ps(xa, b0, c[g][2 * h]);
                    c[g][2 * h + 1] = _mm256_fmadd_ps(xa, b1, c[g][2 * h + 1]);
                }
            }
        }
    }
#pragma GCC unroll 2
    for (int g = 0; g < NP; g++)
        for (int i = 0; i < 4; i++) {
            int n = (p + g) * KERNELS_NR + 8 * i;
            mm8_finish(a, 0, n, v8_mask(a->w->N - n), c[g][i]);
        }
}

static inline __attribute__((always_inline)) void
mm8_rows(const matmul_args *a, tt_dtype dt, const void *panel, int p)
{
    for (int h = 0; h < 2; h++) {
        if (p * KERNELS_NR + h * 16 >= a->w->N)
            break;
        int t = 0;
        for (; t + MR2 <= a->T; t += MR2)
            mm8_tile(a, dt, MR2, t, panel, p, h);
        switch (a->T - t) {
        case 0: break;
        case 1: mm8_tile(a, dt, 1, t, panel, p, h); break;
        case 2: mm8_tile(a, dt, 2, t, panel, p, h); break;
        case 3: mm8_tile(a, dt, 3, t, panel, p, h); break;
        case 4: mm8_tile(a, dt, 4, t, panel, p, h); break;
        default: mm8_tile(a, dt, 5, t, panel, p, h); break;
        }
    }
}

/* A fp16/bf16 panel widened to fp32 (K, 32) in scratch (see kernels_avx512.c). */
static inline __attribute__((always_inline)) void
widen8_panel(tt_dtype dt, const void *panel, int K, float *dst)
{
    for (int h = 0; h < 2; h++) {
        if (dt == TT_BF16) {
            for (int kp = 0; 2 * kp < K; kp++) {
                __m256 e0, o0, e1, o1;
                load_pair_half(panel, kp, h, &e0, &o0, &e1, &o1);
                float *d = dst + (size_t)2 * kp * KERNELS_NR + (size_t)h * 16;
                _mm256_store_ps(d, e0);
                _mm256_store_ps(d + 8, e1);
                if (2 * kp + 1 < K) {
                    _mm256_store_ps(d + 32, o0);
                    _mm256_store_ps(d + 40, o1);
                }
            }
        } else {
            for (int k = 0; k < K; k++) {
                __m256 b0, b1;
                load_half(dt, panel, k, h, &b0, &b1);
                _mm256_store_ps(dst + (size_t)k * KERNELS_NR + (size_t)h * 16, b0);
                _mm256_store_ps(dst + (size_t)k * KERNELS_NR + (size_t)h * 16 + 8, b1);
            }
        }
    }
}

static inline __attribute__((always_inline)) void
mm8_panels(const matmul_args *a, tt_dtype dt, int p0, int p1, float *scratch)
{
    const packed_matrix *w = a->w;
    const size_t panel_bytes = w->panel_elems * tt_dtype_size(dt);
    const char *data = (const char *)w->data;
    if (a->T == 1) {
        int p = p0;
        for (; p + 2 <= p1; p += 2)
            mm8_gemv(a, dt, 2, data + (size_t)p * panel_bytes, panel_bytes, p);
        if (p < p1)
            mm8_gemv(a, dt, 1, data + (size_t)p * panel_bytes, panel_bytes, p);
        return;
    }
    for (int p = p0; p < p1; p++) {
        const void *panel = data + (size_t)p * panel_bytes;
        if (dt != TT_F32 && scratch && a->T >= 2 * MR2) {
            widen8_panel(dt, panel, w->K, scratch);
            mm8_rows(a, TT_F32, scratch, p);
        } else {
            mm8_rows(a, dt, panel, p);
        }
    }
}

static void mm8_f32(const matmul_args *a, int p0, int p1, float *s) { mm8_panels(a, TT_F32, p0, p1, s); }
static void mm8_f16(const matmul_args *a, int p0, int p1, float *s) { mm8_panels(a, TT_F16, p0, p1, s); }
static void mm8_bf16(const matmul_args *a, int p0, int p1, float *s) { mm8_panels(a, TT_BF16, p0, p1, s); }

static void avx2_matmul(const matmul_args *a, int p0, int p1, float *scratch)
{
    switch (a->w->dtype) {
    case TT_F32: mm8_f32(a, p0, p1, scratch); break;
    case TT_F16: mm8_f16(a, p0, p1, scratch); break;
    case TT_BF16: mm8_bf16(a, p0, p1, scratch); break;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Attention */

static void avx2_attention(const attention_args *a, int h, int t0, int t1, float *scratch)
{
    const int HS = a->HS;
    const size_t ldk = (size_t)a->ldk;
    const __m256 scale = _mm256_set1_ps(gpt2_attn_scale(HS));
    const float *kh = a->k + (size_t)h * (size_t)HS * ldk;                 /* (HS, ldk) */
    const float *vh = a->v + (size_t)h * (size_t)a->n_ctx * (size_t)HS;    /* (n_ctx, HS) */
    const int nv = (HS + 7) / 8;
    const __m256i tail = v8_mask(HS - (nv - 1) * 8), full = v8_mask(8);
    for (int i = t0; i < t1; i++) {
        const float *q = a->q + (size_t)i * (size_t)a->ldq + (size_t)h * (size_t)HS;
        float *o = a->out + (size_t)i * (size_t)a->ldo + (size_t)h * (size_t)HS;
        const int n = a->pos + i + 1;
        /* Scores of 32 positions per step against the transposed keys (see kernels_avx512.c). */
        float mx = -INFINITY;
        for (int t = 0; t < n; t += 32) {
            const __m256i m0 = v8_mask(n - t), m1 = v8_mask(n - t - 8);
            const __m256i m2 = v8_mask(n - t - 16), m3 = v8_mask(n - t - 24);
            __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
            const float *kr = kh + t;
            for (int d = 0; d < HS; d++, kr += ldk) {
                __m256 qd = _mm256_set1_ps(q[d]);
                s0 = _mm256_fmadd_ps(qd, _mm256_maskload_ps(kr, m0), s0);
                s1 = _mm256_fmadd_ps(qd, _mm256_maskload_ps(kr + 8, m1), s1);
                s2 = _mm256_fmadd_ps(qd, _mm256_maskload_ps(kr + 16, m2), s2);
                s3 = _mm256_fmadd_ps(qd, _mm256_maskload_ps(kr + 24, m3), s3);
            }
            _mm256_maskstore_ps(scratch + t, m0, _mm256_mul_ps(s0, scale));
            _mm256_maskstore_ps(scratch + t + 8, m1, _mm256_mul_ps(s1, scale));
            _mm256_maskstore_ps(scratch + t + 16, m2, _mm256_mul_ps(s2, scale));
            _mm256_maskstore_ps(scratch + t + 24, m3, _mm256_mul_ps(s3, scale));
        }
        for (int t = 0; t < n; t++)
            mx = scratch[t] > mx ? scratch[t] : mx;
        __m256 vmx = _mm256_set1_ps(mx), vsum = _mm256_setzero_ps();
        int t = 0;
        for (; t + 8 <= n; t += 8) {
            __m256 e = v8_exp(_mm256_sub_ps(_mm256_loadu_ps(scratch + t), vmx));
            _mm256_storeu_ps(scratch + t, e);
            vsum = _mm256_add_ps(vsum, e);
        }
        float sum = v8_hsum(vsum);
        for (; t < n; t++) {
            scratch[t] = expf(scratch[t] - mx);
            sum += scratch[t];
        }
        const float inv = 1.0f / sum;
        for (int d = 0; d < nv; d++) {
            __m256i m = d == nv - 1 ? tail : full;
            __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
            int u = 0;
            for (; u + 1 < n; u += 2) {
                acc0 = _mm256_fmadd_ps(_mm256_set1_ps(scratch[u]),
                                       _mm256_maskload_ps(vh + (size_t)u * HS + 8 * d, m), acc0);
                acc1 = _mm256_fmadd_ps(_mm256_set1_ps(scratch[u + 1]),
                                       _mm256_maskload_ps(vh + (size_t)(u + 1) * HS + 8 * d, m),
                                       acc1);
            }
            if (u < n)
                acc0 = _mm256_fmadd_ps(_mm256_set1_ps(scratch[u]),
                                       _mm256_maskload_ps(vh + (size_t)u * HS + 8 * d, m), acc0);
            _mm256_maskstore_ps(o + 8 * d, m,
                                _mm256_mul_ps(_mm256_add_ps(acc0, acc1), _mm256_set1_ps(inv)));
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * The set */

static const kernels avx2_set = {
    .name = "avx2",
    .matmul = avx2_matmul,
    .attention = avx2_attention,
};

/* The CPU check is the caller's (kernels.c, built without AVX2 flags). */
const kernels *kernels_avx2_get(void)
{
    return &avx2_set;
}
