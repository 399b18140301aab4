/* kernels_gguf_simd.h: the TT_GGUF matmul (kernels.h) of a SIMD set, included by kernels_simd.h
 * after its helpers. Every set (AVX2 and the AVX-512 ones) computes in 256-bit vectors, one block
 * of 32 weights a vector: the block's integers unpacked to signed bytes, their dot products with
 * the 8-bit activations in 8 lanes of 4 k (vpmaddubsw + vpmaddwd; vpdpbusd in the VNNI sets, the
 * same integers), scaled lane-wise by d * D_lo (lanes 0-3, k < 16) or d * D_hi (lanes 4-7) into
 * an fp32 accumulator, summed across lanes once per output; Q4_K's min term in a scalar chain.
 * A weight row is decoded once per GG_MR activation rows. The AVX-512 sets take Q4_K and Q6_K
 * a super-block at a time in 512-bit vectors instead (gg_wide_rows): activations laid out once a
 * matmul, a super-block's dot products summed in integers before one convert and FMA, four
 * weight rows a pass in a decode step, a weight super-block decoded once per GG_WIDE_MR
 * activation rows in a prefill. */
#include "core/cpu/kernels_gguf_block.h"

#define GG_MR 4
#define GG_PREFETCH 2048
#ifndef GG_WIDE_GROUP
#define GG_WIDE_GROUP 8192
#endif
#ifndef GG_WIDE_HINT
#define GG_WIDE_HINT _MM_HINT_T0
#endif
#ifndef GG_WIDE_AHEAD
#define GG_WIDE_AHEAD 1
#endif

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
 * the upper 8 lanes of a third; one horizontal sum per output. Every row of every batch size
 * takes this chain (mm_gguf does not unpack these types here), so a row's bits do not depend on
 * its batch. The activations come laid out per super-block (gg_xsb, built once a matmul by
 * gg_wide_act), so each vector the inner loop reads is one load: no lane inserts, no gathers,
 * and Q6_K's offset term is the dot product's starting value instead of a second one. */
#define GG_WIDE(t) ((t) == QUANT_Q4_K || (t) == QUANT_Q6_K)
#ifndef GG_WIDE_MR
#define GG_WIDE_MR 8          /* activation rows a weight row is decoded for at a time */
#endif

/* One activation row's super-block of 256 k as gg_wide_rows reads it (832 bytes, 64-aligned). */
typedef struct {
    float xd[8];          /* the 8 blocks' d */
    float xsum[8];        /* d * sum / 128 of each block: Q4_K's min term */
    int8_t q4k[256];      /* the blocks' q in Q4_K's vector order: 0 2 | 1 3 | 4 6 | 5 7 */
    int8_t q[256];        /* in order: Q6_K's vectors 0 1 | 2 3 | 4 5 | 6 7 */
    int32_t off6[64];     /* -(32 * sum of each 4 q) per lane of q's four vectors (Q6_K) */
} gg_xsb;

/* kernels_q8_act's d of 8 consecutive blocks (the struct is 10 floats) */
#define GG_XI _mm256_setr_epi32(0, 10, 20, 30, 40, 50, 60, 70)

/* The dot products of 64 unsigned weights u with 64 signed activations x in 16 lanes of 4, added
 * to c (exact: no lane overflows, the AVX-512BW pair sums of at most 2 * 63 * 127 included). */
static inline __attribute__((always_inline)) __m512i gg_dpbusd(__m512i c, __m512i u, __m512i x)
{
#if KS_VNNI
    return _mm512_dpbusd_epi32(c, u, x);
#else
    return _mm512_add_epi32(c, _mm512_madd_epi16(_mm512_maddubs_epi16(u, x), _mm512_set1_epi16(1)));
#endif
}

/* Activation blocks b and c of one row side by side. */
static inline __attribute__((always_inline)) __m512i gg_x2(const kernels_q8_act *x, int b, int c)
{
    return _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)x[b].q)),
        _mm256_loadu_si256((const __m256i *)x[c].q), 1);
}

/* Rows [0, T) of xq (KB blocks each, KB a multiple of 8) into lay (T rows of KB / 8): the parts
 * Q4_K reads if q4k, those Q6_K reads if q6k (a prefill's matmul calls come a panel at a time,
 * each laying out all its rows again). */
static void gg_wide_act(const kernels_q8_act *xq, size_t ldxq, int T, int KB, bool q4k, bool q6k,
                        gg_xsb *lay)
{
    for (int t = 0; t < T; t++)
        for (int b0 = 0; b0 < KB; b0 += 8) {
            const kernels_q8_act *x = xq + (size_t)t * ldxq + b0;
            gg_xsb *l = lay + (size_t)t * (size_t)(KB / 8) + b0 / 8;
            const __m256 xd = _mm256_i32gather_ps(&x->d, GG_XI, 4);
            /* sum128 / 128 exact: |sum128| < 2^24 */
            const __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_i32gather_epi32(
                                               (const int *)&x->sum128, GG_XI, 4)),
                                           _mm256_set1_ps(0.0078125f));
            _mm256_storeu_ps(l->xd, xd);
            _mm256_storeu_ps(l->xsum, _mm256_mul_ps(xd, s));
            static const int q4k_order[8] = {0, 2, 1, 3, 4, 6, 5, 7};
            for (int v = 0; v < 4; v++) {
                if (q4k)
                    _mm512_storeu_si512((void *)(l->q4k + 64 * v),
                                        gg_x2(x, q4k_order[2 * v], q4k_order[2 * v + 1]));
                if (!q6k)
                    continue;
                const __m512i xv = gg_x2(x, 2 * v, 2 * v + 1);
                _mm512_storeu_si512((void *)(l->q + 64 * v), xv);
                _mm512_storeu_si512((void *)(l->off6 + 16 * v),
                                    _mm512_sub_epi32(_mm512_setzero_si512(),
                                                     gg_dpbusd(_mm512_setzero_si512(),
                                                               _mm512_set1_epi8(32), xv)));
            }
        }
}

/* ab = [a's 8 lanes | b's], cd likewise: the sums of a's, b's, c's and d's lanes into lanes 0-3,
 * each as gg_hsum adds 8 lanes (i and i + 4, then i and i + 2, then 0 and 1). */
static inline __attribute__((always_inline)) __m128 gg_reduce4_halves(__m512 ab, __m512 cd)
{
    const __m512 v = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0xdd),   /* lanes 4-7 of each */
                                   _mm512_shuffle_f32x4(ab, cd, 0x88));  /* lanes 0-3 */
    const __m512 y = _mm512_add_ps(v, _mm512_shuffle_ps(v, v, 0x4e));
    const __m512 z = _mm512_add_ps(y, _mm512_shuffle_ps(y, y, 0xb1));
    return _mm512_castps512_ps128(
        _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), z));
}

/* The sums of the 16 lanes of a, b, c, d into lanes 0-3, each in _mm512_reduce_add_ps's order
 * (the 256-bit halves, then the 128-bit halves, then lanes i and i + 2, then lanes 0 and 1):
 * four outputs' horizontal sums for the price of about one. */
static inline __attribute__((always_inline)) __m128 gg_reduce4(__m512 a, __m512 b, __m512 c,
                                                              __m512 d)
{
    /* [a.lo | b.lo] + [a.hi | b.hi]: a's and b's 8 sums of halves */
    const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0xee),
                                    _mm512_shuffle_f32x4(a, b, 0x44));
    const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0xee),
                                    _mm512_shuffle_f32x4(c, d, 0x44));
    return gg_reduce4_halves(ab, cd);
}

/* R activation rows (row r's super-blocks at lay + r * SB) against W weight rows of type t (Q4_K
 * or Q6_K, KB / 8 super-blocks each; W R <= GG_WIDE_MR): output (w, r) into out[w * R + r]. Each output's
 * arithmetic is the same whatever W and R: the decode's four weight rows a pass only overlap
 * four chains and share one horizontal sum. */
static inline __attribute__((always_inline)) void
gg_wide_rows(uint32_t t, const uint8_t *const *rows, int W, const gg_xsb *lay, size_t SB, int R,
             int KB, float *out)
{
    const __m512i m4 = _mm512_set1_epi8(15);
    __m512 acc[GG_WIDE_MR], mc[GG_WIDE_MR];
#pragma GCC unroll 8
    for (int i = 0; i < GG_WIDE_MR; i++)
        acc[i] = mc[i] = _mm512_setzero_ps();
    const size_t sb_bytes = t == QUANT_Q4_K ? 144 : 210, row_bytes = (size_t)(KB / 8) * sb_bytes;
    for (int s = 0; s < KB / 8; s++) {
        if (W > 1) {
            /* W rows side by side: the rows GG_WIDE_AHEAD groups on (mostly the next ones in
             * memory) as one stream, W super-blocks' bytes an iteration */
            const char *nx = (const char *)rows[0] + (size_t)(GG_WIDE_AHEAD * W) * row_bytes +
                             (size_t)s * (size_t)W * sb_bytes;
            for (size_t j = 0; j < (size_t)W * sb_bytes; j += 64)
                _mm_prefetch(nx + j, GG_WIDE_HINT);
        }
#pragma GCC unroll 4
        for (int w = 0; w < W; w++) {
            const uint8_t *blk = rows[w] + (size_t)s * sb_bytes;
            if (W == 1) {
                const char *pf = (const char *)blk + GG_PREFETCH;
                _mm_prefetch(pf, _MM_HINT_T0);
                _mm_prefetch(pf + 64, _MM_HINT_T0);
                _mm_prefetch(pf + 128, _MM_HINT_T0);
                if (t == QUANT_Q6_K)
                    _mm_prefetch(pf + 192, _MM_HINT_T0);
            }
            __m512i u[4];  /* unsigned weights of sub-blocks (0|2) (1|3) (4|6) (5|7) for Q4_K,
                            * (0|1) (2|3) (4|5) (6|7) for Q6_K */
            __m512i li;    /* lane e of 128-bit lane k -> the scale of vector e's k-th 4 lanes */
            __m512 DM = _mm512_setzero_ps();   /* Q4_K: d * scale (lanes 0-7), -dmin * min */
            __m512 D16 = _mm512_setzero_ps();  /* Q6_K: d * scale of each 16 weights */
            if (t == QUANT_Q4_K) {
                /* the 6-bit scales and mins of kernels_gguf_block.h, four bytes a word */
                uint32_t a, b, c, dd;
                memcpy(&a, blk + 4, 4);
                memcpy(&b, blk + 8, 4);
                memcpy(&c, blk + 12, 4);
                const uint32_t s_lo = a & 0x3f3f3f3fu, m_lo = b & 0x3f3f3f3fu;
                const uint32_t s_hi = (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u);
                const uint32_t m_hi = ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u);
                const __m512 sm = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
                    _mm_set_epi64x((long long)((uint64_t)m_hi << 32 | m_lo),
                                   (long long)((uint64_t)s_hi << 32 | s_lo))));
                /* d and -dmin (the sign flip is exact), each to 8 lanes */
                memcpy(&dd, blk, 4);
                const __m512 d2 = _mm512_castps128_ps512(
                    _mm_cvtph_ps(_mm_cvtsi32_si128((int)(dd ^ 0x80000000u))));
                DM = _mm512_mul_ps(_mm512_permutexvar_ps(
                                       _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1,
                                                         1, 1, 1),
                                       d2),
                                   sm);
                const __m512i q0 = _mm512_loadu_si512((const void *)(blk + 16));
                const __m512i q1 = _mm512_loadu_si512((const void *)(blk + 80));
                u[0] = _mm512_and_si512(q0, m4);
                u[1] = _mm512_and_si512(_mm512_srli_epi16(q0, 4), m4);
                u[2] = _mm512_and_si512(q1, m4);
                u[3] = _mm512_and_si512(_mm512_srli_epi16(q1, 4), m4);
                li = _mm512_setr_epi32(0, 1, 4, 5, 0, 1, 4, 5, 2, 3, 6, 7, 2, 3, 6, 7);
            } else {
                const float d = gg_f16(blk + 208);
                D16 = _mm512_mul_ps(_mm512_set1_ps(d),
                                    _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                        _mm_loadu_si128((const __m128i *)(blk + 192)))));
#pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
                    const __m512i ql = _mm512_loadu_si512((const void *)(blk + 64 * h));
                    const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
                    const __m512i qh2 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), qh, 1);
                    /* bits 2j, 2j+1 to bits 4, 5: j = 0 | 1 (left by 4 | 2), j = 2 | 3 (right
                     * by 0 | 2); the 16-bit shifts' spill across bytes falls outside the mask */
                    const __m512i two = _mm512_inserti64x4(_mm512_setzero_si512(),
                                                           _mm256_set1_epi16(2), 1);
                    const __m512i hA = _mm512_and_si512(
                        _mm512_sllv_epi16(qh2, _mm512_sub_epi16(_mm512_set1_epi16(4), two)),
                        _mm512_set1_epi8(48));
                    const __m512i hB = _mm512_and_si512(_mm512_srlv_epi16(qh2, two),
                                                        _mm512_set1_epi8(48));
                    u[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), hA);
                    u[2 * h + 1] =
                        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), hB);
                }
                li = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
            }
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                const int o = w * R + r;
                const gg_xsb *x = lay + (size_t)r * SB + s;
                __m512 sc; /* per scale index: d[t][b] * D */
                if (t == QUANT_Q4_K) {
                    const __m512 xx = _mm512_load_ps(x->xd);   /* xd | xsum */
                    /* the min term in lanes 8-15 only, lanes 0-7 staying zero */
                    mc[o] = _mm512_mask3_fmadd_ps(xx, DM, mc[o], 0xff00);
                    sc = _mm512_mul_ps(xx, DM);
                } else {
                    /* each block's d twice, for its two scales */
                    sc = _mm512_mul_ps(_mm512_permutexvar_ps(
                                           _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5,
                                                             6, 6, 7, 7),
                                           _mm512_castps256_ps512(_mm256_load_ps(x->xd))),
                                       D16);
                }
                __m512i p[4];
#pragma GCC unroll 4
                for (int v = 0; v < 4; v++)
                    p[v] = t == QUANT_Q4_K
                               ? gg_dpbusd(_mm512_setzero_si512(), u[v],
                                           _mm512_load_si512((const void *)(x->q4k + 64 * v)))
                               : gg_dpbusd(_mm512_load_si512((const void *)(x->off6 + 16 * v)),
                                           u[v], _mm512_load_si512((const void *)(x->q + 64 * v)));
                /* the four vectors' groups of 4 lanes summed (exact): lane e of 128-bit lane k
                 * is vector e's lanes 4k .. 4k+3, all of one sub-block's scale */
                const __m512i p01 = _mm512_add_epi32(_mm512_unpacklo_epi32(p[0], p[1]),
                                                     _mm512_unpackhi_epi32(p[0], p[1]));
                const __m512i p23 = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2], p[3]),
                                                     _mm512_unpackhi_epi32(p[2], p[3]));
                const __m512i q = _mm512_add_epi32(_mm512_unpacklo_epi64(p01, p23),
                                                   _mm512_unpackhi_epi64(p01, p23));
                acc[o] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(q), _mm512_permutexvar_ps(li, sc),
                                         acc[o]);
            }
        }
    }
    /* the dot products' sum plus the min term's (Q4_K: lanes 8-15, in gg_hsum's order; Q6_K:
     * zero) */
#pragma GCC unroll 2
    for (int g = 0; g < W * R; g += 4) {
        const __m128 dot = gg_reduce4(acc[g], acc[g + 1], acc[g + 2], acc[g + 3]);
        const __m128 min = gg_reduce4_halves(_mm512_shuffle_f32x4(mc[g], mc[g + 1], 0xee),
                                             _mm512_shuffle_f32x4(mc[g + 2], mc[g + 3], 0xee));
        float y[4];
        _mm_storeu_ps(y, _mm_add_ps(dot, min));
        for (int i = g; i < W * R && i < g + 4; i++)
            out[i] = y[i - g];
    }
}

static __attribute__((noinline)) void gg_wide_column(uint32_t t, const uint8_t *const *rows,
                                                     int W, const gg_xsb *lay, size_t SB, int R,
                                                     int KB, float *out)
{
#define GG_WIDE_R(T_)                                                                              \
    if (W == 4)                                                                                    \
        gg_wide_rows(T_, rows, 4, lay, SB, 1, KB, out);                                            \
    else if (W == 2)                                                                               \
        gg_wide_rows(T_, rows, 2, lay, SB, R == 1 ? 1 : 2, KB, out);                               \
    else                                                                                           \
        switch (R) {                                                                               \
        case 1: gg_wide_rows(T_, rows, 1, lay, SB, 1, KB, out); break;                             \
        case 2: gg_wide_rows(T_, rows, 1, lay, SB, 2, KB, out); break;                             \
        case 3: gg_wide_rows(T_, rows, 1, lay, SB, 3, KB, out); break;                             \
        case 4: gg_wide_rows(T_, rows, 1, lay, SB, 4, KB, out); break;                             \
        case 5: gg_wide_rows(T_, rows, 1, lay, SB, 5, KB, out); break;                             \
        case 6: gg_wide_rows(T_, rows, 1, lay, SB, 6, KB, out); break;                             \
        case 7: gg_wide_rows(T_, rows, 1, lay, SB, 7, KB, out); break;                             \
        default: gg_wide_rows(T_, rows, 1, lay, SB, GG_WIDE_MR, KB, out); break;                   \
        }
    if (t == QUANT_Q4_K)
        GG_WIDE_R(QUANT_Q4_K)
    else
        GG_WIDE_R(QUANT_Q6_K)
#undef GG_WIDE_R
}

/* Regrouped Q4_K and Q6_K parts (kernels.h, KERNELS_GGUF_GROUP): 16 weight rows in the 16 lanes
 * of a vector, so every vpdpbusd adds 4 products of each of 16 outputs, an activation's 4 bytes
 * broadcast to all lanes; a sub-block's (Q6_K: half sub-block's) integer sums go through one
 * convert and one FMA with d[t][b] * D, Q4_K's min term a second FMA with d[t][b] * sum; no
 * horizontal sums. Each output, from c = 0, for each super-block, for each sub-block (Q6_K: for
 * each half of the super-block, each half of a sub-block, each sub-block of the half) ascending:
 *     c = fma(isum, D * d, c)  [Q4_K then c = fma(M, d * sum, c)]
 * whatever the number of activation rows, which only decides how many reuse a decoded vector. */
#define GG_GROUP_MR 4         /* activation rows a group's weights are decoded for at a time */

/* Per activation row and block, what the Q6_K group kernel adds besides the integer dot products
 * (Q4_K reads d and sum128 from the blocks themselves). */
typedef struct {
    float d;              /* the block's d */
    int32_t off6[2];      /* -32 * the sums of q[0 .. 16) and q[16 .. 32): Q6_K's offset */
} gg_gact;

static void gg_group_act(const kernels_q8_act *xq, size_t ldxq, int T, int KB, gg_gact *ga)
{
    for (int t = 0; t < T; t++)
        for (int b = 0; b < KB; b++) {
            const kernels_q8_act *x = xq + (size_t)t * ldxq + b;
            gg_gact *g = ga + (size_t)t * (size_t)KB + b;
            /* the halves' sums as unsigned sums of q + 128 (vpsadbw, four 8-byte sums), less
             * 16 * 128 */
            const __m256i s8 = _mm256_sad_epu8(
                _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)x->q),
                                 _mm256_set1_epi8((char)0x80)),
                _mm256_setzero_si256());
            const int lo = (int)(_mm256_extract_epi64(s8, 0) + _mm256_extract_epi64(s8, 1)) - 2048,
                      hi = (int)(_mm256_extract_epi64(s8, 2) + _mm256_extract_epi64(s8, 3)) - 2048;
            g->d = x->d;
            g->off6[0] = -32 * lo;
            g->off6[1] = -32 * hi;
        }
}

static inline __attribute__((always_inline)) __m512i gg_bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* How far ahead of its reads a group kernel streams a group's bytes into L2 where the GEMV
 * prefetches (Intel: docs/bench/2026-11-28-xeon.md has the distances measured). */
#define GG_GROUP_AHEAD 8192
/* Q4_0's and Q5_0's distance (1 KiB measured slower, 3-4 KiB no faster, 8 KiB slower) */
#define GG_Q0_AHEAD 2048

/* Step i of n over a super-block of per bytes at sb: the lines GG_GROUP_AHEAD further on whose
 * starts fall in the step's n-th of it, into L2, so that the steps together ask for each line of
 * the stream once, evenly as they go (a burst of them at once measured slower). */
static inline __attribute__((always_inline)) void gg_stream_l2(const char *sb, size_t per, int i,
                                                               int n)
{
    const size_t from = per * (size_t)i / (size_t)n, to = per * (size_t)(i + 1) / (size_t)n;
    for (size_t o = (from + 63) & ~(size_t)63; o < to; o += 64)
        _mm_prefetch(sb + GG_GROUP_AHEAD + o, _MM_HINT_T1);
}

/* R activation rows (blocks xq + r ldxq, per-block terms ga + r KB) against the 16 rows of one
 * regrouped group grp of type t: out[r] lane i = output (r, row i). */
static inline __attribute__((always_inline)) void
gg_group_rows(uint32_t t, const uint8_t *grp, int KB, const kernels_q8_act *xq, size_t ldxq,
              const gg_gact *ga, int R, __m512 *out)
{
    const __m512i m4 = _mm512_set1_epi8(15);
    const size_t gsb = t == QUANT_Q4_K ? GGUF_GQ4_SB : GGUF_GQ6_SB;
    /* Where the GEMV prefetches (Intel), Q4_K's group streams GG_GROUP_AHEAD bytes ahead into
     * L2, a slice with each step of the loop below; Q6_K there, and both elsewhere, ask for each
     * super-block's bytes at once before the loop reads them (docs/bench/2026-11-28-xeon.md) */
    const bool ahead = cpu_features_gemv_prefetch();
    const bool stream = ahead && t == QUANT_Q4_K;
    const size_t per = t == QUANT_Q4_K ? GGUF_GQ4_SB : GGUF_GQ6_SB + GGUF_GQ6_SCALES;
    __m512 acc[GG_GROUP_MR];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        acc[r] = _mm512_setzero_ps();
    for (int s = 0; s < KB / 8; s++) {
        size_t wo = (size_t)s * gsb, so = 0;
        if (t == QUANT_Q6_K)
            gguf_gq6_at((size_t)(KB / 8), (size_t)s, &wo, &so);
        const uint8_t *g = grp + wo;
        const int b0 = 8 * s;
        /* the super-block's bytes in the group's one stream (about s per of them in) */
        const char *sb = (const char *)grp + (size_t)s * per;
        if (!stream) {
            /* the loop body is long enough that its own loads kept few lines in flight (Q6_K
             * decode 10-12 GB/s from memory, one thread, against 22-25 so; fetching 0.6-4 KiB
             * ahead instead, or into L2, measured 10-16) */
            for (size_t j = 0; j < per; j += 64)
                _mm_prefetch(sb + j, _MM_HINT_T0);
            /* Q6_K on Intel: the next super-block into L2 as well, which streams Q6_K about a
             * quarter faster there (Q6_K streamed as Q4_K measured 2-3% slower on two threads) */
            if (ahead && s + 1 < KB / 8)
                for (size_t j = 0; j < per; j += 64)
                    _mm_prefetch(sb + per + j, _MM_HINT_T1);
        }
        if (t == QUANT_Q4_K) {
            const __m512 d = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)g));
            /* -dmin: the sign flip is exact */
            const __m512 mn = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_cvtph_ps(_mm256_load_si256(
                                                 (const __m256i *)(g + GGUF_GQ4_DMIN))));
            const __m512i a = _mm512_load_si512((const void *)(g + GGUF_GQ4_SC));
            const __m512i b = _mm512_load_si512((const void *)(g + GGUF_GQ4_SC + 64));
            const __m512i c = _mm512_load_si512((const void *)(g + GGUF_GQ4_SC + 128));
            const __m512i k3f = _mm512_set1_epi32(0x3f3f3f3f), k0f = _mm512_set1_epi32(0x0f0f0f0f),
                          k30 = _mm512_set1_epi32(0x30303030);
            /* the 6-bit scales and mins of sub-blocks 0-3 (lo) and 4-7 (hi), a byte each */
            const __m512i sw[2] = {_mm512_and_si512(a, k3f),
                                   _mm512_or_si512(_mm512_and_si512(c, k0f),
                                                   _mm512_and_si512(_mm512_srli_epi32(a, 2), k30))};
            const __m512i mw[2] = {_mm512_and_si512(b, k3f),
                                   _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(c, 4), k0f),
                                                   _mm512_and_si512(_mm512_srli_epi32(b, 2), k30))};
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                __m512i ie[GG_GROUP_MR], io[GG_GROUP_MR];
#pragma GCC unroll 4
                for (int r = 0; r < R; r++)
                    ie[r] = io[r] = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int cc = 0; cc < 8; cc++) {
                    if (stream)
                        gg_stream_l2(sb, per, 8 * p + cc, 32);
                    const __m512i v =
                        _mm512_load_si512((const void *)(g + GGUF_GQ4_QS + 64 * (8 * p + cc)));
                    const __m512i lo = _mm512_and_si512(v, m4);
                    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
#pragma GCC unroll 4
                    for (int r = 0; r < R; r++) {
                        const kernels_q8_act *x = xq + (size_t)r * ldxq + b0 + 2 * p;
                        ie[r] = gg_dpbusd(ie[r], lo, gg_bcast4(x[0].q + 4 * cc));
                        io[r] = gg_dpbusd(io[r], hi, gg_bcast4(x[1].q + 4 * cc));
                    }
                }
#pragma GCC unroll 2
                for (int e = 0; e < 2; e++) {
                    const int jb = (2 * p + e) % 4, sh = 8 * jb;
                    const __m512i m255 = _mm512_set1_epi32(255);
                    const __m512 D = _mm512_mul_ps(
                        d, _mm512_cvtepi32_ps(_mm512_and_si512(
                               _mm512_srli_epi32(sw[p / 2], (unsigned)sh), m255)));
                    const __m512 M = _mm512_mul_ps(
                        mn, _mm512_cvtepi32_ps(_mm512_and_si512(
                                _mm512_srli_epi32(mw[p / 2], (unsigned)sh), m255)));
#pragma GCC unroll 4
                    for (int r = 0; r < R; r++) {
                        /* d and d * sum128 / 128 (exact) read straight from the block: nothing
                         * laid out per call */
                        const kernels_q8_act *x = xq + (size_t)r * ldxq + b0 + 2 * p + e;
                        const float dsum = x->d * ((float)x->sum128 * 0.0078125f);
                        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(e ? io[r] : ie[r]),
                                                 _mm512_mul_ps(D, _mm512_set1_ps(x->d)), acc[r]);
                        acc[r] = _mm512_fmadd_ps(M, _mm512_set1_ps(dsum), acc[r]);
                    }
                }
            }
        } else {
            const uint8_t *gs = grp + so;
            const __m512 d = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)gs));
            const __m512i k33 = _mm512_set1_epi8(0x33);
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
                for (int hf = 0; hf < 2; hf++) {
                    /* sub-blocks 4 h + e (e < 4), weights 16 hf .. 16 hf + 15 of each */
                    __m512i ia[4][GG_GROUP_MR];
#pragma GCC unroll 4
                    for (int r = 0; r < R; r++) {
                        const gg_gact *x = ga + (size_t)r * (size_t)KB + b0 + 4 * h;
#pragma GCC unroll 4
                        for (int e = 0; e < 4; e++)
                            ia[e][r] = _mm512_set1_epi32(x[e].off6[hf]);
                    }
#pragma GCC unroll 4
                    for (int cc = 4 * hf; cc < 4 * hf + 4; cc++) {
                        const uint8_t *v = g + 192 * (8 * h + cc);

                        const __m512i qa = _mm512_load_si512((const void *)v);
                        const __m512i qb = _mm512_load_si512((const void *)(v + 64));
                        const __m512i qh = _mm512_load_si512((const void *)(v + 128));
                        /* bits 0-1 of each byte: sub-block 0's two high bits, 2-3: 1's, 4-5: 2's,
                         * 6-7: 3's; q0 holds 0's and 2's, q1 1's and 3's, each at bits 0-1 and
                         * 4-5; a bit select by m4 takes the nibble below and those bits 4-5
                         * (bits 6-7 being zero), whatever the 16-bit shifts moved below them */
                        const __m512i q0 = _mm512_and_si512(qh, k33);
                        const __m512i q1 = _mm512_and_si512(_mm512_srli_epi16(qh, 2), k33);
                        __m512i u[4];
                        u[0] = _mm512_ternarylogic_epi32(m4, qa, _mm512_slli_epi16(q0, 4), 0xca);
                        u[1] = _mm512_ternarylogic_epi32(m4, qb, _mm512_slli_epi16(q1, 4), 0xca);
                        u[2] = _mm512_ternarylogic_epi32(m4, _mm512_srli_epi16(qa, 4), q0, 0xca);
                        u[3] = _mm512_ternarylogic_epi32(m4, _mm512_srli_epi16(qb, 4), q1, 0xca);
#pragma GCC unroll 4
                        for (int r = 0; r < R; r++) {
                            const kernels_q8_act *x = xq + (size_t)r * ldxq + b0 + 4 * h;
#pragma GCC unroll 4
                            for (int e = 0; e < 4; e++)
                                ia[e][r] = gg_dpbusd(ia[e][r], u[e], gg_bcast4(x[e].q + 4 * cc));
                        }
                    }
#pragma GCC unroll 4
                    for (int e = 0; e < 4; e++) {
                        const __m512 D = _mm512_mul_ps(
                            d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_load_si128(
                                   (const __m128i *)(gs + GGUF_GQ6_SC +
                                                     16 * (2 * (4 * h + e) + hf))))));
#pragma GCC unroll 4
                        for (int r = 0; r < R; r++) {
                            const gg_gact *x = ga + (size_t)r * (size_t)KB + b0 + 4 * h + e;
                            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[e][r]),
                                                     _mm512_mul_ps(D, _mm512_set1_ps(x->d)),
                                                     acc[r]);
                        }
                    }
                }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        out[r] = acc[r];
}

/* Regrouped Q4_0 and Q5_0 parts: as above, 16 weight rows in the 16 lanes, the weights kept
 * unsigned (Q4_0's nibbles; Q5_0's five bits, the fifth added to a nibble's byte by a byte mask
 * straight from the group), their offset of 8 (16) the integer sum's starting value,
 * -8 (-16) times the activations' block sum; each block's integer sums through one convert and
 * one FMA. Each output, from c = 0, for each block b ascending:
 *     c = fma(isum, d * d[t][b], c)    (isum exact: sum of (q + 8 or 16) x - (8 or 16) sum x)
 * whatever the number of activation rows. */
static inline __attribute__((always_inline)) void
gg_group_rows_q0(uint32_t t, const uint8_t *grp, int KB, const kernels_q8_act *xq, size_t ldxq,
                 int R, __m512 *out)
{
    const __m512i m4 = _mm512_set1_epi8(15), s16 = _mm512_set1_epi8(16);
    const bool pf = cpu_features_gemv_prefetch();
    const size_t pair = 2 * gguf_gq0_block_bytes(t);   /* a block pair: d d, qh qh, qs qs */
    __m512 acc[GG_GROUP_MR];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        acc[r] = _mm512_setzero_ps();
    for (int b = 0; b < KB; b++) {
        size_t od, oh, oq;
        gguf_gq0_at(t, (size_t)KB, (size_t)b, &od, &oh, &oq);
        /* where the GEMV prefetches (Intel): the group's stream GG_Q0_AHEAD bytes ahead into
         * L2, a line with each 64 bytes the blocks read, evenly as they go (a burst of a block
         * pair's lines 8 pairs ahead read Q4_0 at 14.7 GB/s on one thread, this 16.5-17.3:
         * docs/bench/2026-11-28-xeon.md) */
        if (pf) {
            const size_t from = pair / 2 * (size_t)b, to = from + pair / 2;
            for (size_t o = (from + 63) & ~(size_t)63; o < to; o += 64)
                _mm_prefetch((const char *)grp + GG_Q0_AHEAD + o, _MM_HINT_T1);
        }
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(grp + od)));
        __m512i ia[GG_GROUP_MR], ib[GG_GROUP_MR];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const int32_t s128 = xq[(size_t)r * ldxq + b].sum128;   /* 128 * sum: exact */
            ia[r] = _mm512_set1_epi32(t == QUANT_Q5_0 ? -(s128 / 8) : -(s128 / 16));
            ib[r] = _mm512_setzero_si512();
        }
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m512i v = _mm512_loadu_si512((const void *)(grp + oq + 64 * c));
            __m512i lo = _mm512_and_si512(v, m4);
            __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            if (t == QUANT_Q5_0) {
                uint64_t kl, kh;
                memcpy(&kl, grp + oh + 8 * c, 8);
                memcpy(&kh, grp + oh + 8 * (4 + c), 8);
                lo = _mm512_mask_add_epi8(lo, (__mmask64)kl, lo, s16);
                hi = _mm512_mask_add_epi8(hi, (__mmask64)kh, hi, s16);
            }
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const kernels_q8_act *x = xq + (size_t)r * ldxq + b;
                ia[r] = gg_dpbusd(ia[r], lo, gg_bcast4(x->q + 4 * c));
                ib[r] = gg_dpbusd(ib[r], hi, gg_bcast4(x->q + 16 + 4 * c));
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(ia[r], ib[r])),
                                     _mm512_mul_ps(d, _mm512_set1_ps(xq[(size_t)r * ldxq + b].d)),
                                     acc[r]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        out[r] = acc[r];
}

static __attribute__((noinline)) void gg_group_column_q0(uint32_t t, const uint8_t *grp, int KB,
                                                         const kernels_q8_act *xq, size_t ldxq,
                                                         int R, __m512 *out)
{
#define GG_GROUP_R(T_)                                                                             \
    switch (R) {                                                                                   \
    case 1: gg_group_rows_q0(T_, grp, KB, xq, ldxq, 1, out); break;                                \
    case 2: gg_group_rows_q0(T_, grp, KB, xq, ldxq, 2, out); break;                                \
    case 3: gg_group_rows_q0(T_, grp, KB, xq, ldxq, 3, out); break;                                \
    default: gg_group_rows_q0(T_, grp, KB, xq, ldxq, GG_GROUP_MR, out); break;                     \
    }
    if (t == QUANT_Q4_0)
        GG_GROUP_R(QUANT_Q4_0)
    else
        GG_GROUP_R(QUANT_Q5_0)
#undef GG_GROUP_R
}

static __attribute__((noinline)) void gg_group_column(uint32_t t, const uint8_t *grp, int KB,
                                                      const kernels_q8_act *xq, size_t ldxq,
                                                      const gg_gact *ga, int R, __m512 *out)
{
    if (t == QUANT_Q4_0 || t == QUANT_Q5_0) {
        gg_group_column_q0(t, grp, KB, xq, ldxq, R, out);
        return;
    }
#define GG_GROUP_R(T_)                                                                             \
    switch (R) {                                                                                   \
    case 1: gg_group_rows(T_, grp, KB, xq, ldxq, ga, 1, out); break;                               \
    case 2: gg_group_rows(T_, grp, KB, xq, ldxq, ga, 2, out); break;                               \
    case 3: gg_group_rows(T_, grp, KB, xq, ldxq, ga, 3, out); break;                               \
    default: gg_group_rows(T_, grp, KB, xq, ldxq, ga, GG_GROUP_MR, out); break;                    \
    }
    if (t == QUANT_Q4_K)
        GG_GROUP_R(QUANT_Q4_K)
    else
        GG_GROUP_R(QUANT_Q6_K)
#undef GG_GROUP_R
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
             const kernels_q8_act *xq, size_t ldxq, int R, int KB, float *out)
{
    switch (R) {
    case 1: gg_rows(t, row, qb, sc3, xq, ldxq, 1, KB, out); break;
    case 2: gg_rows(t, row, qb, sc3, xq, ldxq, 2, KB, out); break;
    case 3: gg_rows(t, row, qb, sc3, xq, ldxq, 3, KB, out); break;
    default: gg_rows(t, row, qb, sc3, xq, ldxq, GG_MR, KB, out); break;
    }
}

static __attribute__((noinline)) void gg_column(uint32_t t, const uint8_t *row, const int8_t *qb,
                                                const float *sc3, const kernels_q8_act *xq,
                                                size_t ldxq, int R, int KB,
                                                float *out)
{
    switch (t) {
    case QUANT_Q8_0: gg_rows_type(QUANT_Q8_0, row, qb, sc3, xq, ldxq, R, KB, out); break;
    case QUANT_Q4_0: gg_rows_type(QUANT_Q4_0, row, qb, sc3, xq, ldxq, R, KB, out); break;
    case QUANT_Q5_0: gg_rows_type(QUANT_Q5_0, row, qb, sc3, xq, ldxq, R, KB, out); break;
    case QUANT_Q4_K: gg_rows_type(QUANT_Q4_K, row, qb, sc3, xq, ldxq, R, KB, out); break;
    default: gg_rows_type(QUANT_Q6_K, row, qb, sc3, xq, ldxq, R, KB, out); break;
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

#if KS_VW == 16
/* Output columns [c0, c1) of the matrix, all in regrouped part pt whose first column is col0. */
static void mm_gguf_groups(const matmul_args *a, const packed_gguf_part *pt, int col0, int c0,
                           int c1, float *scratch)
{
    const int KB = a->w->K / TT_Q8_BLOCK;
    const size_t gbytes = gguf_group_stride(pt->row_bytes);
    /* Q6_K: the per-block terms of as many activation rows as the scratch holds (all, mostly);
     * Q4_K reads the blocks as they are, all rows at once (laying them out again for every
     * panel of a prefill cost a quarter of its time) */
    const bool q6 = pt->type == QUANT_Q6_K;
    enum { GG_STACK_BLOCKS = 1024 };
    gg_gact one[GG_STACK_BLOCKS];
    gg_gact *ga = one;
    int chunk = q6 ? GG_STACK_BLOCKS / KB : a->T;
    if (q6 && scratch &&
        KERNELS_MATMUL_SCRATCH(a->w->K) * sizeof(float) / (KB * sizeof(gg_gact)) > (size_t)chunk)
        ga = (gg_gact *)scratch,
        chunk = (int)(KERNELS_MATMUL_SCRATCH(a->w->K) * sizeof(float) / (KB * sizeof(gg_gact)));
    if (chunk < 1) {
        ga = malloc((size_t)KB * sizeof *ga);
        if (!ga)
            return;
        chunk = 1;
    }
    for (int t0 = 0; t0 < a->T; t0 += chunk) {
        const int C = a->T - t0 < chunk ? a->T - t0 : chunk;
        const kernels_q8_act *xq = a->xq + (size_t)t0 * (size_t)a->ldxq;
        if (q6)
            gg_group_act(xq, (size_t)a->ldxq, C, KB, ga);
        for (int g = (c0 - col0) / KERNELS_GGUF_GROUP; col0 + g * KERNELS_GGUF_GROUP < c1; g++) {
            const uint8_t *grp = pt->groups + (size_t)g * gbytes;
            for (int r0 = 0; r0 < C; r0 += GG_GROUP_MR) {
                const int R = C - r0 < GG_GROUP_MR ? C - r0 : GG_GROUP_MR;
                __m512 y[GG_GROUP_MR];
                gg_group_column(pt->type, grp, KB, xq + (size_t)r0 * (size_t)a->ldxq,
                                (size_t)a->ldxq, q6 ? ga + (size_t)r0 * (size_t)KB : NULL, R, y);
                const int g_n = col0 + g * KERNELS_GGUF_GROUP;    /* the group's first column */
                if (g_n >= c0 && g_n + KERNELS_GGUF_GROUP <= c1 &&
                    (a->epilogue == MM_STORE || a->epilogue == MM_ADD)) {
                    /* gg_finish's adds, 16 lanes at once */
                    const __m512 bias =
                        a->bias ? _mm512_loadu_ps(a->bias + g_n) : _mm512_setzero_ps();
                    for (int r = 0; r < R; r++) {
                        float *o = a->out + (size_t)(t0 + r0 + r) * (size_t)a->ldo + g_n;
                        const __m512 v = a->bias ? _mm512_add_ps(y[r], bias) : y[r];
                        _mm512_storeu_ps(o, a->epilogue == MM_ADD
                                                ? _mm512_add_ps(_mm512_loadu_ps(o), v) : v);
                    }
                    continue;
                }
                for (int r = 0; r < R; r++) {
                    float v[KERNELS_GGUF_GROUP];
                    _mm512_storeu_ps(v, y[r]);
                    /* a group a panel split cuts is computed whole, its columns in range kept */
                    for (int i = 0; i < KERNELS_GGUF_GROUP; i++) {
                        const int n = col0 + g * KERNELS_GGUF_GROUP + i;
                        if (n >= c0 && n < c1)
                            gg_finish(a, t0 + r0 + r, n, v[i]);
                    }
                }
            }
        }
    }
    if (ga != one && ga != (gg_gact *)scratch)
        free(ga);
}
#endif

/* Rows past GG_MR decode each weight row once into the scratch (KERNELS_MATMUL_SCRATCH(K) floats
 * hold its K bytes and 3 K / 32 floats many times over) instead of once per GG_MR rows. The
 * AVX-512 sets' K-quants read the activations laid out (gg_xsb) in the scratch past its first K
 * floats, as many rows at a time as fit there (about 38), each weight row streamed once per such
 * chunk; without a scratch, one row at a time from a buffer on the stack. */
static void mm_gguf(const matmul_args *a, int p0, int p1, float *scratch)
{
    const packed_matrix *w = a->w;
    const int KB = w->K / TT_Q8_BLOCK;
    const int n0 = p0 * KERNELS_NR, n1 = p1 * KERNELS_NR < w->N ? p1 * KERNELS_NR : w->N;
    const bool unpack = scratch && a->T > GG_MR;
    float *sc3 = scratch;
    int8_t *qb = scratch ? (int8_t *)(scratch + 3 * (size_t)KB) : NULL;
    bool q4k = false, q6k = false;
    /* each part's columns in [n0, n1): a regrouped part's to mm_gguf_groups whole, with no walk
     * over them (a decode step's matrices are all regrouped, the lm_head's 128K columns among
     * them); the others' one by one, the wide types' left to the loop below */
    for (int i = 0, col0 = 0; i < w->n_parts; col0 += w->parts[i].N, i++) {
        const int c0 = n0 > col0 ? n0 : col0;
        const int c1 = n1 < col0 + w->parts[i].N ? n1 : col0 + w->parts[i].N;
        if (w->parts[i].groups) {
#if KS_VW == 16
            if (c0 < c1)
                mm_gguf_groups(a, &w->parts[i], col0, c0, c1, scratch);
#endif
            continue;
        }
        for (int n = c0; n < c1; n++) {
            uint32_t t;
            const uint8_t *row = packed_gguf_row(w, n, &t);
            if (GG_WIDE(t)) {
                q4k |= t == QUANT_Q4_K;
                q6k |= t == QUANT_Q6_K;
                continue;
            }
            if (unpack) {
                gg_unpack_row(t, row, KB, qb, sc3);
                row = NULL;
            }
            for (int t0 = 0; t0 < a->T; t0 += GG_MR) {
                const int R = a->T - t0 < GG_MR ? a->T - t0 : GG_MR;
                float y[GG_MR];
                gg_column(t, row, qb, sc3, a->xq + (size_t)t0 * (size_t)a->ldxq,
                          (size_t)a->ldxq, R, KB, y);
                for (int r = 0; r < R; r++)
                    gg_finish(a, t0 + r, n, y[r]);
            }
        }
    }
#if KS_VW == 16
    if (!q4k && !q6k)
        return;
    /* the wide types' K is a multiple of 256 (packed_gguf_type_ok) */
    const size_t SB = (size_t)KB / 8;
    enum { GG_STACK_SB = 32 };
    _Alignas(64) gg_xsb one[GG_STACK_SB];
    gg_xsb *lay = one;
    int chunk = 1;
    if (scratch) {
        lay = (gg_xsb *)(scratch + w->K);      /* 64-byte aligned: K is a multiple of 256 */
        chunk = (int)((KERNELS_MATMUL_SCRATCH(w->K) - (size_t)w->K) * sizeof(float) /
                      (SB * sizeof(gg_xsb)));
    } else if (SB > GG_STACK_SB) {
        lay = aligned_alloc(64, SB * sizeof(gg_xsb));
        if (!lay)
            return;
    }
    for (int c0 = 0; c0 < a->T; c0 += chunk) {
        const int C = a->T - c0 < chunk ? a->T - c0 : chunk;
        gg_wide_act(a->xq + (size_t)c0 * (size_t)a->ldxq, (size_t)a->ldxq, C, KB, q4k, q6k, lay);
        /* one activation row: four weight rows of one type a pass (two, one at the end) while
         * four rows' bytes (the next four, prefetched meanwhile) stay well inside L1; more rows:
         * one weight row a pass, GG_WIDE_MR activation rows at a time */
        const int Wmax = C == 1 && (size_t)SB * 210 * 4 <= GG_WIDE_GROUP ? 4 : 1;
        for (int n = n0; n < n1;) {
            uint32_t t, tw;
            const uint8_t *rows[4];
            rows[0] = packed_gguf_row(w, n, &t);
            if (!rows[0] || !GG_WIDE(t)) {
                n++;
                continue;
            }
            int W = 1;
            while (W < Wmax && n + W < n1 && (rows[W] = packed_gguf_row(w, n + W, &tw)) && tw == t)
                W++;
            if (W == 3)
                W = 2;
            for (int t0 = 0; t0 < C; t0 += GG_WIDE_MR) {
                const int R = C - t0 < GG_WIDE_MR ? C - t0 : GG_WIDE_MR;
                float y[GG_WIDE_MR];
                gg_wide_column(t, rows, W, lay + (size_t)t0 * SB, SB, R, KB, y);
                for (int i = 0; i < W; i++)     /* (no i % R, i / R: a division each) */
                    for (int r = 0; r < R; r++)
                        gg_finish(a, c0 + t0 + r, n + i, y[i * R + r]);
            }
            n += W;
        }
    }
    if (lay != one && !scratch)
        free(lay);
#else
    (void)q4k;
    (void)q6k;
#endif
}
