/* kernels_gguf_simd.h: the TT_GGUF matmul (kernels.h) of a SIMD set, included by kernels_simd.h
 * after its helpers. Every set (AVX2 and the AVX-512 ones) computes in 256-bit vectors, one block
 * of 32 weights a vector: the block's integers unpacked to signed bytes, their dot products with
 * the 8-bit activations in 8 lanes of 4 k (vpmaddubsw + vpmaddwd; vpdpbusd in the VNNI sets, the
 * same integers), scaled lane-wise by d * D_lo (lanes 0-3, k < 16) or d * D_hi (lanes 4-7) into
 * an fp32 accumulator, summed across lanes once per output; Q4_K's min term in a scalar chain.
 * A weight row is decoded once per GG_MR activation rows. The AVX-512 sets take Q4_K and Q6_K
 * a super-block at a time in 512-bit vectors instead (gg_wide_rows). */
#include "core/cpu/kernels_gguf_block.h"

#define GG_MR 4
#define GG_PREFETCH 2048

static inline __attribute__((always_inline)) float gg_f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

static inline __attribute__((always_inline)) __m256i gg_nibbles16(const uint8_t *p)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)p), m = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

/* Block b of a row of constant type t: its integers as 32 signed bytes, its scales (the scalar
 * definitions of kernels_gguf_block.h, F16C for the fp16 loads: the same values). */
static inline __attribute__((always_inline)) __m256i
gg_block(uint32_t t, const uint8_t *row, int b, float *dlo, float *dhi, float *M)
{
    const __m256i m4 = _mm256_set1_epi8(15);
    *M = 0.0f;
    switch (t) {
    case QUANT_Q8_0: {
        const uint8_t *blk = row + (size_t)b * 34;
        *dlo = *dhi = gg_f16(blk);
        return _mm256_loadu_si256((const __m256i *)(blk + 2));
    }
    case QUANT_Q4_0: {
        const uint8_t *blk = row + (size_t)b * 18;
        *dlo = *dhi = gg_f16(blk);
        return _mm256_sub_epi8(gg_nibbles16(blk + 2), _mm256_set1_epi8(8));
    }
    case QUANT_Q5_0: {
        const uint8_t *blk = row + (size_t)b * 22;
        *dlo = *dhi = gg_f16(blk);
        uint32_t qh;
        memcpy(&qh, blk + 2, 4);
        /* bit k of qh to byte k (llama.cpp's bytes_from_bits_32) */
        __m256i bits = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh),
                                           _mm256_set_epi64x(0x0303030303030303LL,
                                                             0x0202020202020202LL,
                                                             0x0101010101010101LL, 0));
        bits = _mm256_cmpeq_epi8(_mm256_or_si256(bits, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfeLL)),
                                 _mm256_set1_epi64x(-1));
        const __m256i q = _mm256_or_si256(gg_nibbles16(blk + 6),
                                          _mm256_and_si256(bits, _mm256_set1_epi8(16)));
        return _mm256_sub_epi8(q, _mm256_set1_epi8(16));
    }
    case QUANT_Q4_K: {
        const uint8_t *blk = row + (size_t)(b / 8) * 144;
        const int s = b % 8;
        int scale, min;
        quant_q4_k_scale_min(blk + 4, s, &scale, &min);
        *dlo = *dhi = gg_f16(blk) * (float)scale;
        *M = -(gg_f16(blk + 2) * (float)min);
        const __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * (s / 2)));
        return s % 2 ? _mm256_and_si256(_mm256_srli_epi16(v, 4), m4) : _mm256_and_si256(v, m4);
    }
    default: {                                   /* QUANT_Q6_K */
        const uint8_t *blk = row + (size_t)(b / 8) * 210;
        const int s = b % 8, h = s / 4, j = s % 4;
        const int8_t *sc = (const int8_t *)(blk + 192) + 8 * h + 2 * j;
        const float d = gg_f16(blk + 208);
        *dlo = d * (float)sc[0];
        *dhi = d * (float)sc[1];
        const __m256i ql = _mm256_loadu_si256((const __m256i *)(blk + 64 * h + 32 * (j & 1)));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
        const __m256i lo = j >= 2 ? _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4)
                                  : _mm256_and_si256(ql, m4);
        const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * j)),
                                            _mm256_set1_epi8(3));
        return _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)),
                               _mm256_set1_epi8(32));
    }
    }
}

/* The dot products of 32 signed weights q with 32 signed activations x in 8 int32 lanes of 4. */
static inline __attribute__((always_inline)) __m256i gg_dot(__m256i q, __m256i x)
{
    const __m256i aq = _mm256_sign_epi8(q, q), sx = _mm256_sign_epi8(x, q);
#if KS_VNNI
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), aq, sx);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(aq, sx), _mm256_set1_epi16(1));
#endif
}

static inline __attribute__((always_inline)) float gg_hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#if KS_VW == 16
/* The AVX-512 sets' Q4_K and Q6_K: a super-block of 256 weights in four 512-bit vectors of two
 * sub-blocks each, the weights kept unsigned (Q4_K's nibbles; Q6_K's six bits, whose offset of 32
 * comes off as 32 times the activations' sums of 4), their dot products with the activations in
 * 16 lanes of 4 k, scaled lane-wise by d[t][b] * D into two fp32 accumulators, Q4_K's min term in
 * an 8-lane one; one horizontal sum per output. Every row of every batch size takes this chain
 * (mm_gguf does not unpack these types here), so a row's bits do not depend on its batch. */
#define GG_WIDE(t) ((t) == QUANT_Q4_K || (t) == QUANT_Q6_K)

static inline __attribute__((always_inline)) __m512i gg_dpbusd(__m512i u, __m512i x)
{
#if KS_VNNI
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, x);
#else
    return _mm512_madd_epi16(_mm512_maddubs_epi16(u, x), _mm512_set1_epi16(1));
#endif
}

/* Activation blocks b and c of one row side by side. */
static inline __attribute__((always_inline)) __m512i gg_x2(const kernels_q8_act *x, int b, int c)
{
    return _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)x[b].q)),
        _mm256_loadu_si256((const __m256i *)x[c].q), 1);
}

/* d * sum / 128 of 8 consecutive activation blocks (sum128 / 128 exact: |sum128| < 2^24) */
static inline __attribute__((always_inline)) __m256 gg_xsum(const kernels_q8_act *x, __m256 xd)
{
    const __m256i xi = _mm256_setr_epi32(0, 10, 20, 30, 40, 50, 60, 70);
    return _mm256_mul_ps(xd, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_i32gather_epi32(
                                               (const int *)&x->sum128, xi, 4)),
                                           _mm256_set1_ps(0.0078125f)));
}

/* The activation scales of rows [0, T), each row's d then d * sum / 128 of its KB blocks, into
 * xs (2 T KB floats): what every weight row's gg_wide_rows reads, computed once a matmul. */
static void gg_wide_act(const kernels_q8_act *xq, size_t ldxq, int T, int KB, float *xs)
{
    const __m256i xi = _mm256_setr_epi32(0, 10, 20, 30, 40, 50, 60, 70);
    for (int t = 0; t < T; t++)
        for (int b0 = 0; b0 < KB; b0 += 8) {
            const kernels_q8_act *x = xq + (size_t)t * ldxq + b0;
            const __m256 xd = _mm256_i32gather_ps(&x->d, xi, 4);
            _mm256_storeu_ps(xs + (size_t)t * 2 * KB + b0, xd);
            _mm256_storeu_ps(xs + (size_t)t * 2 * KB + KB + b0, gg_xsum(x, xd));
        }
}

static inline __attribute__((always_inline)) void
gg_wide_rows(uint32_t t, const uint8_t *row, const kernels_q8_act *xq, size_t ldxq,
             const float *xs, int R, int KB, float *out)
{
    const __m512i m4 = _mm512_set1_epi8(15);
    /* activation d of 8 consecutive blocks (kernels_q8_act is 10 floats) */
    const __m256i xi = _mm256_setr_epi32(0, 10, 20, 30, 40, 50, 60, 70);
    __m512 acc0[GG_MR], acc1[GG_MR];
    __m256 mc[GG_MR];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        acc0[r] = acc1[r] = _mm512_setzero_ps();
        mc[r] = _mm256_setzero_ps();
    }
    const size_t sb_bytes = t == QUANT_Q4_K ? 144 : 210;
    for (int b0 = 0; b0 < KB; b0 += 8) {
        const uint8_t *blk = row + (size_t)(b0 / 8) * sb_bytes;
        _mm_prefetch((const char *)blk + GG_PREFETCH, _MM_HINT_T0);
        _mm_prefetch((const char *)blk + GG_PREFETCH + 64, _MM_HINT_T0);
        _mm_prefetch((const char *)blk + GG_PREFETCH + 128, _MM_HINT_T0);
        __m512i u[4];      /* unsigned weights of sub-blocks (0|2) (1|3) (4|6) (5|7) for Q4_K,
                            * (0|1) (2|3) (4|5) (6|7) for Q6_K */
        __m512i li[4];     /* lane -> scale index, per vector */
        __m256 D8, M8 = _mm256_setzero_ps();
        __m512 D16 = _mm512_setzero_ps();
        if (t == QUANT_Q4_K) {
            /* the 6-bit scales and mins of kernels_gguf_block.h, four bytes a word */
            uint32_t a, b, c;
            memcpy(&a, blk + 4, 4);
            memcpy(&b, blk + 8, 4);
            memcpy(&c, blk + 12, 4);
            const uint32_t s_lo = a & 0x3f3f3f3fu, m_lo = b & 0x3f3f3f3fu;
            const uint32_t s_hi = (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u);
            const uint32_t m_hi = ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u);
            const __m256 scale = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
                _mm_cvtsi64_si128((long long)((uint64_t)s_hi << 32 | s_lo))));
            const __m256 min = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
                _mm_cvtsi64_si128((long long)((uint64_t)m_hi << 32 | m_lo))));
            D8 = _mm256_mul_ps(_mm256_set1_ps(gg_f16(blk)), scale);
            /* -(dmin * min): the sign flip is exact */
            M8 = _mm256_xor_ps(_mm256_mul_ps(_mm256_set1_ps(gg_f16(blk + 2)), min),
                               _mm256_set1_ps(-0.0f));
            const __m512i q0 = _mm512_loadu_si512((const void *)(blk + 16));
            const __m512i q1 = _mm512_loadu_si512((const void *)(blk + 80));
            u[0] = _mm512_and_si512(q0, m4);
            u[1] = _mm512_and_si512(_mm512_srli_epi16(q0, 4), m4);
            u[2] = _mm512_and_si512(q1, m4);
            u[3] = _mm512_and_si512(_mm512_srli_epi16(q1, 4), m4);
            static const int pairs[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
            for (int v = 0; v < 4; v++)
                li[v] = _mm512_inserti64x4(_mm512_set1_epi32(pairs[v][0]),
                                           _mm256_set1_epi32(pairs[v][1]), 1);
        } else {
            const float d = gg_f16(blk + 208);
            D16 = _mm512_mul_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                                       _mm_loadu_si128((const __m128i *)(blk + 192)))));
            D8 = _mm256_setzero_ps();
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m512i ql = _mm512_loadu_si512((const void *)(blk + 64 * h));
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
                const __m512i qh2 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), qh, 1);
                /* bits 2j, 2j+1 to bits 4, 5: j = 0 | 1 (left by 4 | 2), j = 2 | 3 (right by
                 * 0 | 2); the 16-bit shifts' spill across bytes falls outside the mask */
                const __m512i two = _mm512_inserti64x4(_mm512_setzero_si512(),
                                                       _mm256_set1_epi16(2), 1);
                const __m512i hA = _mm512_and_si512(
                    _mm512_sllv_epi16(qh2, _mm512_sub_epi16(_mm512_set1_epi16(4), two)),
                    _mm512_set1_epi8(48));
                const __m512i hB = _mm512_and_si512(_mm512_srlv_epi16(qh2, two),
                                                    _mm512_set1_epi8(48));
                u[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), hA);
                u[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), hB);
            }
            for (int v = 0; v < 4; v++)
                li[v] = _mm512_setr_epi32(4 * v, 4 * v, 4 * v, 4 * v, 4 * v + 1, 4 * v + 1,
                                          4 * v + 1, 4 * v + 1, 4 * v + 2, 4 * v + 2, 4 * v + 2,
                                          4 * v + 2, 4 * v + 3, 4 * v + 3, 4 * v + 3, 4 * v + 3);
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const kernels_q8_act *x = xq + (size_t)r * ldxq + b0;
            __m256 xd;
            if (xs)
                xd = _mm256_loadu_ps(xs + (size_t)r * 2 * KB + b0);
            else
                xd = _mm256_i32gather_ps(&x->d, xi, 4);
            __m512 sc;     /* per scale index: d[t][b] * D */
            if (t == QUANT_Q4_K) {
                mc[r] = _mm256_fmadd_ps(xs ? _mm256_loadu_ps(xs + (size_t)r * 2 * KB + KB + b0)
                                           : gg_xsum(x, xd), M8, mc[r]);
                sc = _mm512_castps256_ps512(_mm256_mul_ps(xd, D8));
            } else {
                /* each block's d twice, for its two scales */
                sc = _mm512_mul_ps(_mm512_permutexvar_ps(
                                       _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6,
                                                         6, 7, 7),
                                       _mm512_castps256_ps512(xd)),
                                   D16);
            }
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++) {
                __m512i xv, p;
                if (t == QUANT_Q4_K) {
                    static const int pb[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
                    xv = gg_x2(x, pb[v][0], pb[v][1]);
                    p = gg_dpbusd(u[v], xv);
                } else {
                    xv = gg_x2(x, 2 * v, 2 * v + 1);
                    p = _mm512_sub_epi32(gg_dpbusd(u[v], xv),
                                         gg_dpbusd(_mm512_set1_epi8(32), xv));
                }
                const __m512 s16 = _mm512_permutexvar_ps(li[v], sc);
                if (v % 2)
                    acc1[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), s16, acc1[r]);
                else
                    acc0[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), s16, acc0[r]);
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r])) + gg_hsum(mc[r]);
}
#else
#define GG_WIDE(t) 0
#endif

/* R rows (R <= GG_MR) of activations, ldxq apart, against one weight row of constant type t:
 * decoded block by block from row, or (row NULL) read from a row gg_unpack_row decoded into qb
 * and sc. Either way the same integers and scales, and the same arithmetic after them, so a
 * row's result does not depend on which path or how many rows came with it. */
static inline __attribute__((always_inline)) void
gg_rows(uint32_t t, const uint8_t *row, const int8_t *qb, const float *sc3,
        const kernels_q8_act *xq, size_t ldxq, int R, int KB, float *out)
{
    __m256 acc[GG_MR];
    float mc[GG_MR];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        acc[r] = _mm256_setzero_ps();
        mc[r] = 0.0f;
    }
    /* K-quants: a super-block's eight sub-blocks unrolled, so each one's place in the scales
     * is a constant */
    const int step = t == QUANT_Q4_K || t == QUANT_Q6_K ? 8 : 1;
    for (int b0 = 0; b0 < KB; b0 += step) {
#pragma GCC unroll 8
        for (int s = 0; s < step; s++) {
            const int b = b0 + s;
            float dlo, dhi, M;
            __m256i q;
            if (row) {
                /* The row streams from memory once (decode): fetch GG_PREFETCH bytes ahead, into
                 * the rows after it; the hardware prefetchers alone left the decode at a quarter
                 * of the bandwidth the fp16 GEMV reaches. */
                const size_t at = (size_t)b * (t == QUANT_Q8_0 ? 34 : t == QUANT_Q4_0 ? 18
                                               : t == QUANT_Q5_0 ? 22 : t == QUANT_Q4_K ? 18 : 0);
                _mm_prefetch((const char *)row + (t == QUANT_Q6_K ? (size_t)b * 210 / 8 : at) +
                                 GG_PREFETCH, _MM_HINT_T0);
                q = gg_block(t, row, b, &dlo, &dhi, &M);
            } else {
                q = _mm256_loadu_si256((const __m256i *)(qb + 32 * (size_t)b));
                dlo = sc3[3 * b];
                dhi = sc3[3 * b + 1];
                M = sc3[3 * b + 2];
            }
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const kernels_q8_act *x = xq + (size_t)r * ldxq + b;
                const __m256i p = gg_dot(q, _mm256_loadu_si256((const __m256i *)x->q));
                /* one scale a block but for Q6_K's two halves */
                const __m256 sc = t == QUANT_Q6_K
                                      ? _mm256_set_m128(_mm_set1_ps(x->d * dhi),
                                                        _mm_set1_ps(x->d * dlo))
                                      : _mm256_set1_ps(x->d * dlo);
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), sc, acc[r]);
                if (t == QUANT_Q4_K)    /* sum128 / 128 exactly: |sum128| < 2^24 */
                    mc[r] = fmaf(x->d * ((float)x->sum128 * 0.0078125f), M, mc[r]);
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        out[r] = gg_hsum(acc[r]) + mc[r];
}

static inline __attribute__((always_inline)) void
gg_rows_type(uint32_t t, const uint8_t *row, const int8_t *qb, const float *sc3,
             const kernels_q8_act *xq, size_t ldxq, const float *xs, int R, int KB, float *out)
{
#if KS_VW == 16
    if (GG_WIDE(t)) {
        switch (R) {
        case 1: gg_wide_rows(t, row, xq, ldxq, xs, 1, KB, out); break;
        case 2: gg_wide_rows(t, row, xq, ldxq, xs, 2, KB, out); break;
        case 3: gg_wide_rows(t, row, xq, ldxq, xs, 3, KB, out); break;
        default: gg_wide_rows(t, row, xq, ldxq, xs, GG_MR, KB, out); break;
        }
        return;
    }
#endif
    switch (R) {
    case 1: gg_rows(t, row, qb, sc3, xq, ldxq, 1, KB, out); break;
    case 2: gg_rows(t, row, qb, sc3, xq, ldxq, 2, KB, out); break;
    case 3: gg_rows(t, row, qb, sc3, xq, ldxq, 3, KB, out); break;
    default: gg_rows(t, row, qb, sc3, xq, ldxq, GG_MR, KB, out); break;
    }
}

static __attribute__((noinline)) void gg_column(uint32_t t, const uint8_t *row, const int8_t *qb,
                                                const float *sc3, const kernels_q8_act *xq,
                                                size_t ldxq, const float *xs, int R, int KB,
                                                float *out)
{
    switch (t) {
    case QUANT_Q8_0: gg_rows_type(QUANT_Q8_0, row, qb, sc3, xq, ldxq, xs, R, KB, out); break;
    case QUANT_Q4_0: gg_rows_type(QUANT_Q4_0, row, qb, sc3, xq, ldxq, xs, R, KB, out); break;
    case QUANT_Q5_0: gg_rows_type(QUANT_Q5_0, row, qb, sc3, xq, ldxq, xs, R, KB, out); break;
    case QUANT_Q4_K: gg_rows_type(QUANT_Q4_K, row, qb, sc3, xq, ldxq, xs, R, KB, out); break;
    default: gg_rows_type(QUANT_Q6_K, row, qb, sc3, xq, ldxq, xs, R, KB, out); break;
    }
}

/* A row of constant type t decoded once: its integers into qb (K bytes) and each block's D_lo,
 * D_hi, M into sc3 (3 KB floats), for the many activation rows of a prefill. */
static inline __attribute__((always_inline)) void
gg_unpack_type(uint32_t t, const uint8_t *row, int KB, int8_t *qb, float *sc3)
{
    for (int b = 0; b < KB; b++)
        _mm256_storeu_si256((__m256i *)(qb + 32 * (size_t)b),
                            gg_block(t, row, b, &sc3[3 * b], &sc3[3 * b + 1], &sc3[3 * b + 2]));
}

static __attribute__((noinline)) void gg_unpack_row(uint32_t t, const uint8_t *row, int KB,
                                                    int8_t *qb, float *sc3)
{
    switch (t) {
    case QUANT_Q8_0: gg_unpack_type(QUANT_Q8_0, row, KB, qb, sc3); break;
    case QUANT_Q4_0: gg_unpack_type(QUANT_Q4_0, row, KB, qb, sc3); break;
    case QUANT_Q5_0: gg_unpack_type(QUANT_Q5_0, row, KB, qb, sc3); break;
    case QUANT_Q4_K: gg_unpack_type(QUANT_Q4_K, row, KB, qb, sc3); break;
    default: gg_unpack_type(QUANT_Q6_K, row, KB, qb, sc3); break;
    }
}

/* Bias and epilogue of output (t, n) = y. */
static inline void gg_finish(const matmul_args *a, int t, int n, float y)
{
    float *o = a->out + (size_t)t * (size_t)a->ldo + n;
    if (a->bias)
        y += a->bias[n];
    switch (a->epilogue) {
    case MM_STORE: *o = y; break;
    case MM_ADD: *o += y; break;
    case MM_GELU_TANH: *o = gpt2_gelu_tanh(y); break;
    case MM_GELU_ERF: *o = gpt2_gelu_erf(y); break;
    }
}

/* Rows past GG_MR decode each weight row once into the scratch (KERNELS_MATMUL_SCRATCH(K) floats
 * hold its K bytes and 3 K / 32 floats many times over) instead of once per GG_MR rows. The
 * AVX-512 sets' K-quants read the activations' scales from the scratch past its first K floats
 * (2 T K / 32 of them) where they fit (T up to about 500), else gather them per weight row. */
static void mm_gguf(const matmul_args *a, int p0, int p1, float *scratch)
{
    const packed_matrix *w = a->w;
    const int KB = w->K / TT_Q8_BLOCK;
    const int n1 = p1 * KERNELS_NR < w->N ? p1 * KERNELS_NR : w->N;
    const bool unpack = scratch && a->T > GG_MR;
    float *sc3 = scratch;
    int8_t *qb = scratch ? (int8_t *)(scratch + 3 * (size_t)KB) : NULL;
    float *xs = NULL;
#if KS_VW == 16
    if (scratch && KB % 8 == 0 && (size_t)w->K + 2 * (size_t)a->T * (size_t)KB <= KERNELS_MATMUL_SCRATCH(w->K)) {
        xs = scratch + w->K;
        gg_wide_act(a->xq, (size_t)a->ldxq, a->T, KB, xs);
    }
#endif
    for (int n = p0 * KERNELS_NR; n < n1; n++) {
        uint32_t t;
        const uint8_t *row = packed_gguf_row(w, n, &t);
        if (unpack && !GG_WIDE(t)) {
            gg_unpack_row(t, row, KB, qb, sc3);
            row = NULL;
        }
        for (int t0 = 0; t0 < a->T; t0 += GG_MR) {
            const int R = a->T - t0 < GG_MR ? a->T - t0 : GG_MR;
            float y[GG_MR];
            gg_column(t, row, qb, sc3, a->xq + (size_t)t0 * (size_t)a->ldxq, (size_t)a->ldxq,
                      xs ? xs + (size_t)t0 * 2 * (size_t)KB : NULL, R, KB, y);
            for (int r = 0; r < R; r++)
                gg_finish(a, t0 + r, n, y[r]);
        }
    }
}
