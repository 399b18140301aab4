/* kernels_simd.h: the SIMD kernel sets' matmul and attention, written once over width macros (as
 * ggml's simd-mappings.h and core/decode/sampler_kernels.h do) and compiled once per instruction set:
 * kernels_avx512.c defines KS_VW 16, kernels_avx2.c KS_VW 8, and each includes this file once,
 * also naming its set (KS_SET_NAME) and the function that returns it (KS_SET_GET). Internal to
 * those two files; everything else here is static to the including file.
 *
 * Matmul: a register tile of up to KS_MR rows x 2 vectors (2 KS_VW columns) walks down one packed
 * panel (kernels.h); each k step loads the tile's slice of the panel row once (fp32 direct, fp16
 * through vcvtph2ps, bf16 through a shift and a mask of the pair-interleaved lanes) and broadcasts
 * one activation per tile row. Two FMA ports at 4-cycle latency need at least 8 independent
 * accumulators to stay busy; AVX-512's 32 registers hold 12 x 2, AVX2's 16 hold 6 x 2 (a tile
 * then covers half a panel, and the panel is walked twice). The epilogue adds the bias and
 * applies GELU or the residual add in registers. With many rows, AVX-512 fp32 panels go in pairs
 * under tiles of 6 rows x 4 vectors (mm_tile_pair: fewer loads per FMA, the same chains), and
 * fp16/bf16/Q8 panels are first widened to fp32 in per-thread scratch (once per panel, not once
 * per tile; widening is exact).
 * One row (decode) is a GEMV that streams KS_GEMV_NP whole panels side by side with software
 * prefetch; tiles shorter than KS_MR rows (a batched decode step) prefetch at the same distance.
 *
 * Batch invariance (kernels.h): every output lane is one FMA chain over k ascending, from zero,
 * then bias and epilogue, in the GEMV and in tiles of every height alike; the GEMV gets its
 * parallelism from several panels, never from splitting k.
 *
 * Attention reads keys transposed: scores come out KS_VW positions per vector with no horizontal
 * sums. With tiles of up to KS_ATT_QB rows (AVX-512 only: a tile of 8 needs 16 accumulators), a
 * span of two or more rows (a prefill, a speculative verification) runs tiles so each key and
 * value row loaded serves all the tile's rows; a row alone and a row in a tile run the same
 * chains (scores over d, weighted values over positions, both ascending) and the same softmax
 * code.
 *
 * Every set must keep its summation order bit for bit from one release to the next (a stored
 * conversation replays to the same tokens), so the few places where the two sets sum differently
 * are tuning parameters below, not copies of the code: the value sum's chain count and the
 * softmax tail. */
#ifndef KS_VNNI
#define KS_VNNI 0                  /* 1: AVX512-VNNI's vpdpbusd for the Q8 dot products */
#endif
#ifndef KS_AMX
#define KS_AMX 0                   /* 1: BF16 matmuls on AMX tiles (core/cpu/kernels_amx.h) */
#endif
#ifndef KS_BF16DP
#define KS_BF16DP 0                /* 1: BF16 matmuls on vdpbf16ps over bf16 activations */
#endif
#if !defined(KS_VW) || !defined(KS_SET_NAME) || !defined(KS_SET_GET)
#error "define KS_VW (8 or 16), KS_SET_NAME and KS_SET_GET before including core/cpu/kernels_simd.h"
#endif

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "core/arch/block_math.h"
#include "core/cpu/cpu_features.h"
#include "core/cpu/kernels.h"

/* ---------------------------------------------------------------------------------------------
 * Mappings: one vector of KS_VW floats (vf), a lane mask (vmask), and the operations the kernels
 * use. Tuning parameters:
 *   KS_MR            rows per matmul tile (2 KS_MR accumulators)
 *   KS_GEMV_NP       panels the decode GEMV streams side by side (KS_GEMV_NP * 32 / KS_VW chains)
 *   KS_SCORE_NV      score vectors per step of a one-row attention (independent chains over d)
 *   KS_VALUE_NV      output vectors per step of a one-row weighted value sum
 *   KS_VALUE_CHAINS  interleaved chains over the positions per output vector, added at the end
 *   KS_ATT_QB        query rows per attention tile (0: one row at a time)
 *   KS_SOFTMAX_SCALAR_TAIL  the positions past the last whole vector: 0 = one masked vector in
 *                    the lane sums, 1 = libm expf added one by one after the lane sums
 *   KS_EXP_HI/LO     the range v_exp clamps its argument to */
#if KS_VW == 16

typedef __m512 vf;
typedef __mmask16 vmask;

#define KS_MR 12
#define KS_GEMV_NP KERNELS_GEMV_PANELS
#define KS_SCORE_NV 8
#define KS_VALUE_NV 4
#define KS_VALUE_CHAINS 1
#define KS_ATT_QB 8
#define KS_SOFTMAX_SCALAR_TAIL 0
#define KS_EXP_HI 88.8f            /* scalef makes 2^n exactly: large x gives +inf, small 0 */
#define KS_EXP_LO -104.0f

#define KS_PS(op) _mm512_##op##_ps
#define v_mload(m, p) _mm512_maskz_loadu_ps((m), (p))
#define v_mstore(p, m, v) _mm512_mask_storeu_ps((p), (m), (v))
#define v_round(x) _mm512_roundscale_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define v_scale2(p, n) _mm512_scalef_ps((p), (n))
#define v_hsum(v) _mm512_reduce_add_ps(v)
#define v_hmax(v) _mm512_reduce_max_ps(v)

/* The first n lanes (n clamped to [0, 16]). */
static inline vmask v_mask(int n)
{
    return n <= 0 ? 0 : n >= 16 ? 0xffff : (vmask)((1u << n) - 1);
}

/* acc with the lanes of m replaced by max(acc, x). */
static inline vf v_mmax(vf acc, vmask m, vf x) { return _mm512_mask_max_ps(acc, m, acc, x); }

/* x in the lanes of m, zero elsewhere. */
#define v_keep(m, x) _mm512_maskz_mov_ps((m), (x))

/* Integer vectors: a whole one (vi), and the loads of KS_VW 16-bit or 8-bit values. */
typedef __m512i vi;
#define KS_EPI32(op) _mm512_##op##_epi32
#define KS_SI(op) _mm512_##op##_si512
#define v_iload(p) _mm512_load_si512((const void *)(p))
#define v_iand(a, b) _mm512_and_si512((a), (b))
#define v_icast(a) _mm512_castsi512_ps(a)
#define v_iload_16bit(p) _mm256_load_si256((const __m256i *)(p))

#elif KS_VW == 8

typedef __m256 vf;
typedef __m256i vmask;

#define KS_MR 6
#define KS_GEMV_NP 2
#define KS_SCORE_NV 4
#define KS_VALUE_NV 1
#define KS_VALUE_CHAINS 2
#define KS_ATT_QB 0
#define KS_SOFTMAX_SCALAR_TAIL 1
#define KS_EXP_HI 88.0f            /* 2^n is built in the exponent field: keep it a normal float */
#define KS_EXP_LO -87.0f

#define KS_PS(op) _mm256_##op##_ps
#define v_mload(m, p) _mm256_maskload_ps((p), (m))
#define v_mstore(p, m, v) _mm256_maskstore_ps((p), (m), (v))
#define v_round(x) _mm256_round_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* p * 2^n for integral n in [-127, 128], through the exponent field. */
static inline vf v_scale2(vf p, vf n)
{
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)),
                                  23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)): the tree _mm512_reduce_add_ps uses. */
static inline float v_hsum(vf v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float v_hmax(vf v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The first n lanes (n clamped to [0, 8]). */
static inline vmask v_mask(int n)
{
    n = n < 0 ? 0 : n > 8 ? 8 : n;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline vf v_mmax(vf acc, vmask m, vf x)
{
    return _mm256_blendv_ps(acc, _mm256_max_ps(acc, x), _mm256_castsi256_ps(m));
}

#define v_keep(m, x) _mm256_and_ps(_mm256_castsi256_ps(m), (x))

typedef __m256i vi;
#define KS_EPI32(op) _mm256_##op##_epi32
#define KS_SI(op) _mm256_##op##_si256
#define v_iload(p) _mm256_load_si256((const __m256i *)(p))
#define v_iand(a, b) _mm256_and_si256((a), (b))
#define v_icast(a) _mm256_castsi256_ps(a)
#define v_iload_16bit(p) _mm_load_si128((const __m128i *)(p))

#else
#error "KS_VW must be 8 or 16"
#endif

/* The operations both widths spell alike (_mm512_add_ps, _mm256_add_ps, ...). */
#define v_zero() KS_PS(setzero)()
#define v_set1(x) KS_PS(set1)(x)
#define v_add(a, b) KS_PS(add)((a), (b))
#define v_sub(a, b) KS_PS(sub)((a), (b))
#define v_mul(a, b) KS_PS(mul)((a), (b))
#define v_div(a, b) KS_PS(div)((a), (b))
#define v_min(a, b) KS_PS(min)((a), (b))
#define v_max(a, b) KS_PS(max)((a), (b))
#define v_fma(a, b, c) KS_PS(fmadd)((a), (b), (c))
#define v_fnma(a, b, c) KS_PS(fnmadd)((a), (b), (c))
#define v_load(p) KS_PS(load)(p)
#define v_loadu(p) KS_PS(loadu)(p)
#define v_store(p, v) KS_PS(store)((p), (v))
#define v_storeu(p, v) KS_PS(storeu)((p), (v))

/* KS_VW fp16 values at p (aligned to their size) as fp32. */
static inline vf v_load_f16(const uint16_t *p) { return KS_PS(cvtph)(v_iload_16bit(p)); }

/* KS_VW bf16 pairs at p (aligned to a vector): the even (low) halves into *e, the odd into *o. */
static inline void v_load_bf16_pairs(const uint16_t *p, vf *e, vf *o)
{
    const vi u = v_iload(p);
    *e = v_icast(KS_EPI32(slli)(u, 16));
    *o = v_icast(v_iand(u, KS_EPI32(set1)((int)0xffff0000u)));
}

#define KS_NV (KERNELS_NR / KS_VW)    /* vectors per panel row */
#define KS_GROUPS (KS_NV / 2)          /* column groups of 2 vectors (one tile wide) per panel */
_Static_assert(KS_GEMV_NP >= 1 && KS_GEMV_NP <= 4 && KERNELS_GEMV_PANELS % KS_GEMV_NP == 0,
               "the GEMV holds at most 4 panels and divides the callers' panel cuts");

/* ---------------------------------------------------------------------------------------------
 * Vector math */

/* e^x, Cephes expf's polynomial on [-ln2/2, ln2/2], x clamped to [KS_EXP_LO, KS_EXP_HI]. About
 * 1 ulp. */
static inline vf v_exp(vf x)
{
    x = v_max(v_min(x, v_set1(KS_EXP_HI)), v_set1(KS_EXP_LO));
    vf n = v_round(v_mul(x, v_set1(1.44269504088896341f)));
    vf r = v_fnma(n, v_set1(0.693359375f), x);
    r = v_fnma(n, v_set1(-2.12194440e-4f), r);
    vf p = v_set1(1.9875691500e-4f);
    p = v_fma(p, r, v_set1(1.3981999507e-3f));
    p = v_fma(p, r, v_set1(8.3334519073e-3f));
    p = v_fma(p, r, v_set1(4.1665795894e-2f));
    p = v_fma(p, r, v_set1(1.6666665459e-1f));
    p = v_fma(p, r, v_set1(5.0000001201e-1f));
    p = v_fma(p, v_mul(r, r), v_add(r, v_set1(1.0f)));
    return v_scale2(p, n);
}

/* gelu_tanh(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), with
 * tanh(u) = 1 - 2 / (1 + e^(2u)): the same formula as gpt2_math.h, evaluated in vector form. */
static inline vf v_gelu_tanh(vf x)
{
    vf x3 = v_mul(v_mul(x, x), x);
    vf u = v_mul(v_set1(GPT2_SQRT_2_OVER_PI), v_fma(v_set1(GPT2_GELU_COEF), x3, x));
    vf e = v_exp(v_add(u, u));
    vf th = v_sub(v_set1(1.0f), v_div(v_set1(2.0f), v_add(e, v_set1(1.0f))));
    return v_mul(v_mul(v_set1(0.5f), x), v_add(v_set1(1.0f), th));
}

/* ---------------------------------------------------------------------------------------------
 * Matmul */

/* Bias, activation or residual add, then the store of one vector of output columns n .. n+VW-1
 * of row t (masked past N). MM_GELU_ERF stores the sum with its bias: mm_finish_erf applies the
 * activation once all of a tile's vectors are stored. */
static inline __attribute__((always_inline)) void
mm_finish(const matmul_args *a, int t, int n, vf c)
{
    const vmask m = v_mask(a->w->N - n);
    if (a->bias)
        c = v_add(c, v_mload(m, a->bias + n));
    float *o = a->out + (size_t)t * (size_t)a->ldo + n;
    switch (a->epilogue) {
    case MM_STORE: break;
    case MM_ADD: c = v_add(c, v_mload(m, o)); break;
    case MM_GELU_TANH: c = v_gelu_tanh(c); break;
    case MM_GELU_ERF: break;
    }
    v_mstore(o, m, c);
}

/* The erf GELU (gpt2_math.h, scalar: libm's erff) in place over columns n0 .. n0+width-1 (those
 * below N) of rows t0 .. t0+rows-1, which mm_finish stored. It runs after a tile's stores rather
 * than inside mm_finish because a call while the tile's other accumulators are still live made
 * GCC 12 keep some of them on the stack through the whole k loop, for every epilogue (a store and
 * a reload on every k step). */
static __attribute__((noinline)) void
mm_finish_erf(const matmul_args *a, int t0, int rows, int n0, int width)
{
    const int n1 = n0 + width < a->w->N ? n0 + width : a->w->N;
    for (int t = t0; t < t0 + rows; t++) {
        float *o = a->out + (size_t)t * (size_t)a->ldo;
        for (int n = n0; n < n1; n++)
            o[n] = gpt2_gelu_erf(o[n]);
    }
}

/* Vector v (columns v*VW ..) of row k of a fp32 or fp16 panel, as fp32. */
static inline __attribute__((always_inline)) vf
load_row(tt_dtype dt, const void *panel, int k, int v)
{
    const size_t off = (size_t)k * KERNELS_NR + (size_t)v * KS_VW;
    if (dt == TT_F32)
        return v_load((const float *)panel + off);
    return v_load_f16((const uint16_t *)panel + off);
}

/* Vector v of bf16 pair row kp: the even (k = 2kp) row into *e, the odd (k = 2kp+1) into *o. */
static inline __attribute__((always_inline)) void
load_pair(const void *panel, int kp, int v, vf *e, vf *o)
{
    v_load_bf16_pairs((const uint16_t *)panel + (size_t)kp * 2 * KERNELS_NR + (size_t)v * 2 * KS_VW,
                      e, o);
}

/* Both vectors of column group g (one tile wide) of bf16 pair row kp. */
static inline __attribute__((always_inline)) void
load_pair_group(const void *panel, int kp, int g, vf *e0, vf *o0, vf *e1, vf *o1)
{
    load_pair(panel, kp, 2 * g, e0, o0);
    load_pair(panel, kp, 2 * g + 1, e1, o1);
}

/* Software prefetch distance of the decode GEMV, in bytes ahead of the row being read, where
 * cpu_features_gemv_prefetch() says to prefetch (Intel). There the hardware prefetchers alone leave a
 * core below its streaming rate on the weight panels and prefetching a few KiB ahead lifts it; on
 * AMD Zen 4 the same prefetches slow the stream (both chosen by measurement:
 * docs/performance.md). Prefetches past the end of a matrix are harmless: they never fault. */
#define GEMV_PREFETCH_16 2048
#define GEMV_PREFETCH_32 4096

/* A short fp32 tile prefetches in two steps: from memory into L2 this far ahead, and from L2 into
 * L1 the near distance ahead. Its FMAs take longer per panel row than the GEMV's, and prefetches
 * straight into L1 at the GEMV's distance left the tile's stream slower than the GEMV's: a
 * batched decode step paid the one-row step's streaming time plus most of its arithmetic. The
 * distances were chosen by measurement (docs/performance.md#why-the-kernels-are-as-they-are);
 * neighbouring distances measure alike. */
#define TILE_PREFETCH_FAR_32 16384
#define TILE_PREFETCH_NEAR_32 1024

/* Prefetches what mm_tile reads of column group g in panel row k (bf16: row pair k): a short
 * tile (a decode batch of a few rows) streams the panel like the GEMV, and the hardware
 * prefetchers alone leave it as slow. fp16/bf16 at the GEMV's distance, fp32 in the two steps
 * above. Only loads move: results are unchanged. */
static inline __attribute__((always_inline)) void
mm_tile_prefetch(tt_dtype dt, const void *panel, int k, int g)
{
    const size_t row = dt == TT_F16 ? 2 * KERNELS_NR : 4 * KERNELS_NR; /* bytes per k step */
    const size_t part = row / KS_GROUPS;                                /* group g's share */
    const char *at = (const char *)panel + (size_t)k * row + (size_t)g * part;
    if (dt == TT_F32) {
        _mm_prefetch(at + TILE_PREFETCH_FAR_32, _MM_HINT_T1);
        if (part > 64)
            _mm_prefetch(at + TILE_PREFETCH_FAR_32 + 64, _MM_HINT_T1);
        at += TILE_PREFETCH_NEAR_32;
    } else {
        at += GEMV_PREFETCH_16;
    }
    _mm_prefetch(at, _MM_HINT_T0);
    if (part > 64)
        _mm_prefetch(at + 64, _MM_HINT_T0);
}

/* MR rows t0 .. t0+MR-1 against column group g (vectors 2g, 2g+1) of panel p (its data at panel,
 * in dtype dt). MR is a constant after inlining, so c0/c1 live in registers and the row loops
 * unroll. Short tiles prefetch (mm_tile_prefetch), and so does a prefill's first fp32 tile of a
 * panel, which streams the panel from memory for the tiles below it (they read it from L2; chosen
 * by measurement, see docs/performance.md#why-the-kernels-are-as-they-are). */
static inline __attribute__((always_inline)) void
mm_tile(const matmul_args *a, tt_dtype dt, int MR, int t0, const void *panel, int p, int g)
{
    const int K = a->w->K;
    const float *x = a->x + (size_t)t0 * (size_t)a->ldx;
    const size_t ldx = (size_t)a->ldx;
    vf c0[KS_MR], c1[KS_MR];
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) {
        c0[r] = v_zero();
        c1[r] = v_zero();
    }
    if (dt == TT_BF16) {
        int kp = 0;
        for (; 2 * kp + 1 < K; kp++) {
            vf e0, o0, e1, o1;
            if (MR < KS_MR)
                mm_tile_prefetch(dt, panel, kp, g);
            load_pair_group(panel, kp, g, &e0, &o0, &e1, &o1);
#pragma GCC unroll 16
            for (int r = 0; r < MR; r++) {
                vf xe = v_set1(x[r * ldx + 2 * kp]);
                vf xo = v_set1(x[r * ldx + 2 * kp + 1]);
                c0[r] = v_fma(xe, e0, c0[r]);
                c1[r] = v_fma(xe, e1, c1[r]);
                c0[r] = v_fma(xo, o0, c0[r]);
                c1[r] = v_fma(xo, o1, c1[r]);
            }
        }
        if (2 * kp < K) {                   /* odd K: the last row has no partner */
            vf e0, o0, e1, o1;
            load_pair_group(panel, kp, g, &e0, &o0, &e1, &o1);
#pragma GCC unroll 16
            for (int r = 0; r < MR; r++) {
                vf xe = v_set1(x[r * ldx + 2 * kp]);
                c0[r] = v_fma(xe, e0, c0[r]);
                c1[r] = v_fma(xe, e1, c1[r]);
            }
        }
    } else {
        for (int k = 0; k < K; k++) {
            if (MR < KS_MR || (dt == TT_F32 && t0 == 0))
                mm_tile_prefetch(dt, panel, k, g);
            vf b0 = load_row(dt, panel, k, 2 * g), b1 = load_row(dt, panel, k, 2 * g + 1);
#pragma GCC unroll 16
            for (int r = 0; r < MR; r++) {
                vf xa = v_set1(x[r * ldx + k]);
                c0[r] = v_fma(xa, b0, c0[r]);
                c1[r] = v_fma(xa, b1, c1[r]);
            }
        }
    }
    const int n0 = p * KERNELS_NR + g * 2 * KS_VW;
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) {
        mm_finish(a, t0 + r, n0, c0[r]);
        mm_finish(a, t0 + r, n0 + KS_VW, c1[r]);
    }
    if (a->epilogue == MM_GELU_ERF)
        mm_finish_erf(a, t0, MR, n0, 2 * KS_VW);
}

/* ---------------------------------------------------------------------------------------------
 * Q8 matmul (kernels.h): per block of 32 k, exact int32 dot products of the weights' integers with
 * the row's quantized activations, then one fma per block: c = fma(s * d, (float)sum, c).
 *
 * One step adds, in each int32 lane (one output column), the 4 products of the lane's 4 weight
 * bytes (q + 128) with 4 activations broadcast to every lane:
 *   KS_VNNI:   vpdpbusd (unsigned weight bytes times signed activations); the block's sums start
 *              at -sum128, which takes the offset of 128 out again.
 *   otherwise: the signs moved onto the weights (q = byte ^ 0x80, q * sign(x)) and vpmaddubsw of
 *              |x| with them (pairs of products fit 16 bits: |2 * 127 * 127| < 2^15), then
 *              vpmaddwd with ones; the sums start at 0.
 * Both give the same exact integers, so every set gives the same bits. */
#define Q8_INTS(blk) ((const char *)(blk) + KERNELS_NR * 2)  /* past the block's 32 scales */
#define Q8_STEP_BYTES (4 * KERNELS_NR)                        /* 4 k of 32 columns */

#if KS_VW == 16 && KS_VNNI
typedef struct { vi x; } q8_xs;
static inline __attribute__((always_inline)) q8_xs q8_x(const int8_t *q4)
{
    int32_t v;
    memcpy(&v, q4, 4);
    return (q8_xs){_mm512_set1_epi32(v)};
}
static inline __attribute__((always_inline)) vi q8_dot(vi acc, vi w, q8_xs x)
{
    return _mm512_dpbusd_epi32(acc, w, x.x);
}
#define q8_start(sum128) _mm512_set1_epi32(-(sum128))
#elif KS_VW == 16
typedef struct { vi ax; __mmask64 neg; } q8_xs;
static inline __attribute__((always_inline)) q8_xs q8_x(const int8_t *q4)
{
    int32_t v;
    memcpy(&v, q4, 4);
    const vi x = _mm512_set1_epi32(v);
    return (q8_xs){_mm512_abs_epi8(x), _mm512_movepi8_mask(x)};
}
static inline __attribute__((always_inline)) vi q8_dot(vi acc, vi w, q8_xs x)
{
    const vi q = _mm512_xor_si512(w, _mm512_set1_epi8((char)0x80));
    const vi sq = _mm512_mask_sub_epi8(q, x.neg, _mm512_setzero_si512(), q);
    const vi p16 = _mm512_maddubs_epi16(x.ax, sq);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p16, _mm512_set1_epi16(1)));
}
#define q8_start(sum128) _mm512_setzero_si512()
#else
typedef struct { vi x, ax; } q8_xs;
static inline __attribute__((always_inline)) q8_xs q8_x(const int8_t *q4)
{
    int32_t v;
    memcpy(&v, q4, 4);
    const vi x = _mm256_set1_epi32(v);
    return (q8_xs){x, _mm256_abs_epi8(x)};
}
static inline __attribute__((always_inline)) vi q8_dot(vi acc, vi w, q8_xs x)
{
    const vi q = _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80));
    const vi p16 = _mm256_maddubs_epi16(x.ax, _mm256_sign_epi8(q, x.x));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}
#define q8_start(sum128) _mm256_setzero_si256()
#endif

/* Rows per Q8 prefill tile: 2 x KS_Q8_MR int32 sums and as many fp32 totals in registers. */
#if KS_VW == 16 && KS_VNNI
#define KS_Q8_MR 6
#elif KS_VW == 16
#define KS_Q8_MR 4
#else
#define KS_Q8_MR 2
#endif

/* The epilogue of a GEMV's NP panels' outputs c (panels p ..). */
static inline __attribute__((always_inline)) void
mm_gemv_finish(const matmul_args *a, int NP, int p, vf c[][KS_NV])
{
#pragma GCC unroll 4
    for (int g = 0; g < NP; g++)
#pragma GCC unroll 4
        for (int v = 0; v < KS_NV; v++)
            mm_finish(a, 0, (p + g) * KERNELS_NR + v * KS_VW, c[g][v]);
    if (a->epilogue == MM_GELU_ERF)
        mm_finish_erf(a, 0, 1, p * KERNELS_NR, NP * KERNELS_NR);
}

/* Vector v of the weight integers of step kq of a block. */
static inline __attribute__((always_inline)) vi q8_w(const char *blk, int kq, int v)
{
    return v_iload(Q8_INTS(blk) + (size_t)kq * Q8_STEP_BYTES + (size_t)v * KS_VW * 4);
}

/* c + (scales of vector v of the block * d) * sum: the block's one rounding step. */
static inline __attribute__((always_inline)) vf
q8_block_fma(vf c, const char *blk, int v, float d, vi sum)
{
    const vf s = v_mul(v_load_f16((const uint16_t *)blk + (size_t)v * KS_VW), v_set1(d));
    return v_fma(s, KS_PS(cvtepi32)(sum), c);
}

/* One row against NP Q8 panels side by side (decode): NP * KS_NV independent integer chains per
 * step; with PF every 128-byte step prefetches its two lines GEMV_PREFETCH_16 ahead (and the
 * block's 17th line, its scales' share, once per block). */
static inline __attribute__((always_inline)) void
mm_gemv_q8(const matmul_args *a, int NP, bool PF, const char *panel, size_t panel_bytes, int p)
{
    const kernels_q8_act *xq = a->xq;
    const int KB = KERNELS_Q8_ACT_BLOCKS(a->w->K);
    vf c[KS_GEMV_NP][KS_NV];
#pragma GCC unroll 4
    for (int g = 0; g < NP; g++)
#pragma GCC unroll 4
        for (int v = 0; v < KS_NV; v++)
            c[g][v] = v_zero();
    for (int b = 0; b < KB; b++) {
        const char *blk = panel + (size_t)b * KERNELS_Q8_BLOCK_BYTES;
        vi acc[KS_GEMV_NP][KS_NV];
#pragma GCC unroll 4
        for (int g = 0; g < NP; g++)
#pragma GCC unroll 4
            for (int v = 0; v < KS_NV; v++)
                acc[g][v] = q8_start(xq[b].sum128);
#pragma GCC unroll 8
        for (int kq = 0; kq < TT_Q8_BLOCK / 4; kq++) {
            const q8_xs x = q8_x(xq[b].q + 4 * kq);
#pragma GCC unroll 4
            for (int g = 0; g < NP; g++) {
                const char *bg = blk + (size_t)g * panel_bytes;
                const char *pf = bg + (size_t)kq * Q8_STEP_BYTES + GEMV_PREFETCH_16;
                if (PF) {
                    _mm_prefetch(pf, _MM_HINT_T0);
                    _mm_prefetch(pf + 64, _MM_HINT_T0);
                    if (kq == 0)
                        _mm_prefetch(pf + 8 * Q8_STEP_BYTES, _MM_HINT_T0);
                }
#pragma GCC unroll 4
                for (int v = 0; v < KS_NV; v++)
                    acc[g][v] = q8_dot(acc[g][v], q8_w(bg, kq, v), x);
            }
        }
#pragma GCC unroll 4
        for (int g = 0; g < NP; g++)
#pragma GCC unroll 4
            for (int v = 0; v < KS_NV; v++)
                c[g][v] = q8_block_fma(c[g][v], blk + (size_t)g * panel_bytes, v, xq[b].d,
                                       acc[g][v]);
    }
    mm_gemv_finish(a, NP, p, c);
}

/* MR rows t0 .. against column group g of a Q8 panel: the chains of mm_gemv_q8, MR rows at a time
 * so each weight vector loaded serves MR rows. A short tile prefetches as the GEMV does where
 * prefetch (cpu_features_gemv_prefetch): on Zen 4 an 8-row step of GPT-2 124M's matrices took 8.5-9.2 ms of
 * one core without against 9.7-10.0 with. */
static inline __attribute__((always_inline)) void
mm_tile_q8(const matmul_args *a, int MR, bool prefetch, int t0, const char *panel, int p, int g)
{
    const int KB = KERNELS_Q8_ACT_BLOCKS(a->w->K);
    const kernels_q8_act *xq = a->xq + (size_t)t0 * (size_t)a->ldxq;
    const size_t ldxq = (size_t)a->ldxq;
    vf c0[KS_Q8_MR], c1[KS_Q8_MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
        c0[r] = c1[r] = v_zero();
    for (int b = 0; b < KB; b++) {
        const char *blk = panel + (size_t)b * KERNELS_Q8_BLOCK_BYTES;
        vi i0[KS_Q8_MR], i1[KS_Q8_MR];
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++)
            i0[r] = i1[r] = q8_start(xq[r * ldxq + b].sum128);
#pragma GCC unroll 8
        for (int kq = 0; kq < TT_Q8_BLOCK / 4; kq++) {
            if (MR < KS_Q8_MR && prefetch) { /* a short tile (a decode batch) streams the panel */
                const char *pf = Q8_INTS(blk) + (size_t)kq * Q8_STEP_BYTES +
                                 (size_t)g * 2 * KS_VW * 4 + GEMV_PREFETCH_16;
                _mm_prefetch(pf, _MM_HINT_T0);
                if (2 * KS_VW * 4 > 64)
                    _mm_prefetch(pf + 64, _MM_HINT_T0);
            }
            const vi w0 = q8_w(blk, kq, 2 * g), w1 = q8_w(blk, kq, 2 * g + 1);
#pragma GCC unroll 8
            for (int r = 0; r < MR; r++) {
                const q8_xs x = q8_x(xq[r * ldxq + b].q + 4 * kq);
                i0[r] = q8_dot(i0[r], w0, x);
                i1[r] = q8_dot(i1[r], w1, x);
            }
        }
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            const float d = xq[r * ldxq + b].d;
            c0[r] = q8_block_fma(c0[r], blk, 2 * g, d, i0[r]);
            c1[r] = q8_block_fma(c1[r], blk, 2 * g + 1, d, i1[r]);
        }
    }
    const int n0 = p * KERNELS_NR + g * 2 * KS_VW;
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
        mm_finish(a, t0 + r, n0, c0[r]);
        mm_finish(a, t0 + r, n0 + KS_VW, c1[r]);
    }
    if (a->epilogue == MM_GELU_ERF)
        mm_finish_erf(a, t0, MR, n0, 2 * KS_VW);
}

/* kernels_quantize_rows (kernels.c) vectorized: the block maximum, the scale and the products in
 * vectors (a maximum is exact in any order; the conversion rounds to nearest-even, as lrintf does
 * in the default rounding mode), the narrowing and the sum in vectors too at 16 lanes, in scalar
 * code at 8. The same bits. */
static void simd_quantize_rows(const float *x, int ldx, int K, int t0, int t1, kernels_q8_act *xq,
                               int ldxq)
{
    const int KB = KERNELS_Q8_ACT_BLOCKS(K);
    const vf sign = v_set1(-0.0f), big = v_set1(FLT_MAX);
    for (int t = t0; t < t1; t++) {
        const float *xr = x + (size_t)t * (size_t)ldx;
        kernels_q8_act *row = xq + (size_t)t * (size_t)ldxq;
        for (int b = 0; b < KB; b++) {
            const int k0 = b * TT_Q8_BLOCK;
            vf v[TT_Q8_BLOCK / KS_VW];
            vf vmax = v_zero(), over = v_zero();
#pragma GCC unroll 4
            for (int i = 0; i < TT_Q8_BLOCK / KS_VW; i++) {
                const vmask m = v_mask(K - k0 - i * KS_VW);
                v[i] = v_mload(m, xr + k0 + i * KS_VW);
                const vf a = KS_PS(andnot)(sign, v[i]);
                vmax = v_max(vmax, a);
                /* inf or NaN: max(|x| - FLT_MAX, 0) is positive or NaN; the sum keeps either */
                over = v_add(over, v_max(v_zero(), v_sub(a, big)));
            }
            const float amax = v_hmax(vmax), ov = v_hsum(over);
            const float d = ov == 0.0f ? amax / 127.0f : NAN;
            const float id = d > 0.0f ? 1.0f / d : 0.0f;
            int32_t sum = 0;
#if KS_VW == 16
            vi vsum = _mm512_setzero_si512();
            for (int i = 0; i < TT_Q8_BLOCK / KS_VW; i++) {
                vi q = id > 0.0f ? KS_EPI32(cvtps)(v_mul(v[i], v_set1(id))) : _mm512_setzero_si512();
                q = _mm512_min_epi32(_mm512_max_epi32(q, _mm512_set1_epi32(-127)),
                                     _mm512_set1_epi32(127));
                _mm_storeu_si128((__m128i *)(row[b].q + i * KS_VW), _mm512_cvtepi32_epi8(q));
                vsum = _mm512_add_epi32(vsum, q);
            }
            sum = _mm512_reduce_add_epi32(vsum);
#else
            int32_t qi[TT_Q8_BLOCK];
#pragma GCC unroll 4
            for (int i = 0; i < TT_Q8_BLOCK / KS_VW; i++)
                KS_SI(storeu)((void *)(qi + i * KS_VW), KS_EPI32(cvtps)(v_mul(v[i], v_set1(id))));
            for (int i = 0; i < TT_Q8_BLOCK; i++) {
                int q = id > 0.0f ? qi[i] : 0;
                q = q > 127 ? 127 : q < -127 ? -127 : q;
                row[b].q[i] = (int8_t)q;
                sum += q;
            }
#endif
            row[b].d = d;
            row[b].sum128 = 128 * sum;
        }
    }
}

/* All rows against one Q8 panel, KS_Q8_MR rows at a time and the rest in one smaller tile. */
static inline __attribute__((always_inline)) void
mm_rows_q8(const matmul_args *a, const char *panel, int p)
{
    const bool pf = cpu_features_gemv_prefetch();
    for (int g = 0; g < KS_GROUPS; g++) {
        if (p * KERNELS_NR + g * 2 * KS_VW >= a->w->N)
            break;
        int t = 0;
        for (; t + KS_Q8_MR <= a->T; t += KS_Q8_MR)
            mm_tile_q8(a, KS_Q8_MR, pf, t, panel, p, g);
#define KS_TAIL(n) case n: mm_tile_q8(a, n, pf, t, panel, p, g); break;
        switch (a->T - t) {
        KS_TAIL(1)
#if KS_Q8_MR > 2
        KS_TAIL(2) KS_TAIL(3)
#endif
#if KS_Q8_MR > 4
        KS_TAIL(4) KS_TAIL(5)
#endif
        default: break;
        }
#undef KS_TAIL
    }
}

/* One row against NP panels side by side: the decode GEMV. Each output lane is one FMA chain over
 * k ascending, the chain mm_tile runs for every row of a tile, so a row's result does not depend
 * on how many rows came with it. The latency a single chain would expose is hidden by the
 * NP * KS_NV chains of the NP panels, streamed together (each with its own software prefetch
 * where PF: cpu_features_gemv_prefetch()). */
static inline __attribute__((always_inline)) void
mm_gemv(const matmul_args *a, tt_dtype dt, int NP, bool PF, const void *panel, size_t panel_bytes,
        int p)
{
    if (dt == TT_Q8) {
        mm_gemv_q8(a, NP, PF, panel, panel_bytes, p);
        return;
    }
    const float *x = a->x;
    const int K = a->w->K;
    vf c[KS_GEMV_NP][KS_NV];
#pragma GCC unroll 4
    for (int g = 0; g < NP; g++)
#pragma GCC unroll 4
        for (int v = 0; v < KS_NV; v++)
            c[g][v] = v_zero();
    if (dt == TT_BF16) {
        int kp = 0;
        for (; 2 * kp + 1 < K; kp++) {
            const vf xe = v_set1(x[2 * kp]), xo = v_set1(x[2 * kp + 1]);
#pragma GCC unroll 4
            for (int g = 0; g < NP; g++) {
                const char *pg = (const char *)panel + (size_t)g * panel_bytes;
                const char *pf = pg + (size_t)kp * 128 + GEMV_PREFETCH_16;
                if (PF) {
                    _mm_prefetch(pf, _MM_HINT_T0);
                    _mm_prefetch(pf + 64, _MM_HINT_T0);
                }
#pragma GCC unroll 4
                for (int v = 0; v < KS_NV; v++) {
                    vf e, o;
                    load_pair(pg, kp, v, &e, &o);
                    c[g][v] = v_fma(xe, e, c[g][v]);
                    c[g][v] = v_fma(xo, o, c[g][v]);
                }
            }
        }
        if (2 * kp < K) {                   /* odd K: the last row has no partner */
            const vf xe = v_set1(x[2 * kp]);
#pragma GCC unroll 4
            for (int g = 0; g < NP; g++)
#pragma GCC unroll 4
                for (int v = 0; v < KS_NV; v++) {
                    vf e, o;
                    load_pair((const char *)panel + (size_t)g * panel_bytes, kp, v, &e, &o);
                    c[g][v] = v_fma(xe, e, c[g][v]);
                }
        }
    } else {
        const size_t row_bytes = dt == TT_F32 ? 128 : 64;
        for (int k = 0; k < K; k++) {
            const vf xa = v_set1(x[k]);
#pragma GCC unroll 4
            for (int g = 0; g < NP; g++) {
                const char *pg = (const char *)panel + (size_t)g * panel_bytes;
                const char *pf = pg + (size_t)k * row_bytes +
                                 (dt == TT_F32 ? GEMV_PREFETCH_32 : GEMV_PREFETCH_16);
                if (PF)
                    _mm_prefetch(pf, _MM_HINT_T0);
                if (PF && dt == TT_F32)
                    _mm_prefetch(pf + 64, _MM_HINT_T0);
#pragma GCC unroll 4
                for (int v = 0; v < KS_NV; v++)
                    c[g][v] = v_fma(xa, load_row(dt, pg, k, v), c[g][v]);
            }
        }
    }
    mm_gemv_finish(a, NP, p, c);
}

/* All rows against one panel, one column group at a time, KS_MR rows at a time and the rest in
 * one smaller tile (the same chains whatever the tile's height). */
static inline __attribute__((always_inline)) void
mm_rows(const matmul_args *a, tt_dtype dt, const void *panel, int p)
{
    for (int g = 0; g < KS_GROUPS; g++) {
        if (p * KERNELS_NR + g * 2 * KS_VW >= a->w->N)
            break;
        int t = 0;
        for (; t + KS_MR <= a->T; t += KS_MR)
            mm_tile(a, dt, KS_MR, t, panel, p, g);
#define KS_TAIL(n) case n: mm_tile(a, dt, n, t, panel, p, g); break;
        switch (a->T - t) {
        KS_TAIL(1) KS_TAIL(2) KS_TAIL(3) KS_TAIL(4) KS_TAIL(5)
#if KS_MR > 6
        KS_TAIL(6) KS_TAIL(7) KS_TAIL(8) KS_TAIL(9) KS_TAIL(10) KS_TAIL(11)
#endif
        default: break;
        }
#undef KS_TAIL
    }
}

#if KS_VW == 16
/* Rows per tile of a panel pair: 6 x 4 accumulators, the 4 vectors of the k step's two panel
 * rows and a broadcast fill 29 of the 32 registers. */
#define KS_PAIR_MR 6
_Static_assert(KERNELS_ROWS_PANELS == 2, "mm_rows_pair takes the panels two at a time");

/* MR rows t0 .. t0+MR-1 against the fp32 panels p (at pa) and p + 1 (at pb) side by side: each k
 * step loads 4 weight vectors and broadcasts MR activations for 4 MR FMAs, 10 loads for 24 FMAs
 * where mm_tile's 12 x 2 tile takes 14. Every output lane runs mm_tile's chain (from zero, k
 * ascending, then bias and epilogue), so the bits are the same; it is the faster of the two by
 * measurement (docs/performance.md#why-the-kernels-are-as-they-are). */
static inline __attribute__((always_inline)) void
mm_tile_pair(const matmul_args *a, int MR, int t0, const float *pa, const float *pb, int p)
{
    const int K = a->w->K;
    const float *x = a->x + (size_t)t0 * (size_t)a->ldx;
    const size_t ldx = (size_t)a->ldx;
    vf c[KS_PAIR_MR][4];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
        c[r][0] = c[r][1] = c[r][2] = c[r][3] = v_zero();
    for (int k = 0; k < K; k++) {
        if (t0 == 0) {                      /* the first tile streams both panels (mm_tile) */
            mm_tile_prefetch(TT_F32, pa, k, 0);
            mm_tile_prefetch(TT_F32, pb, k, 0);
        }
        const float *ra = pa + (size_t)k * KERNELS_NR, *rb = pb + (size_t)k * KERNELS_NR;
        const vf b0 = v_load(ra), b1 = v_load(ra + KS_VW);
        const vf b2 = v_load(rb), b3 = v_load(rb + KS_VW);
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            const vf xa = v_set1(x[r * ldx + k]);
            c[r][0] = v_fma(xa, b0, c[r][0]);
            c[r][1] = v_fma(xa, b1, c[r][1]);
            c[r][2] = v_fma(xa, b2, c[r][2]);
            c[r][3] = v_fma(xa, b3, c[r][3]);
        }
    }
    const int n0 = p * KERNELS_NR;
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++)
            mm_finish(a, t0 + r, n0 + v * KS_VW, c[r][v]);
    if (a->epilogue == MM_GELU_ERF)
        mm_finish_erf(a, t0, MR, n0, 2 * KERNELS_NR);
}

/* All rows against the fp32 panels p (at pa) and p + 1 (at pb), KS_PAIR_MR rows at a time and
 * the rest in one smaller tile. Out of line, as mm_rows_widened, so that GCC keeps each tile's
 * 24 accumulators in registers. */
static __attribute__((noinline)) void
mm_rows_pair(const matmul_args *a, const float *pa, const float *pb, int p)
{
    int t = 0;
    for (; t + KS_PAIR_MR <= a->T; t += KS_PAIR_MR)
        mm_tile_pair(a, KS_PAIR_MR, t, pa, pb, p);
#define KS_TAIL(n) case n: mm_tile_pair(a, n, t, pa, pb, p); break;
    switch (a->T - t) {
    KS_TAIL(1) KS_TAIL(2) KS_TAIL(3) KS_TAIL(4) KS_TAIL(5)
    default: break;
    }
#undef KS_TAIL
}
#endif

/* A fp16/bf16 panel widened to fp32 (K, 32) in dst: with many rows the conversion is paid once
 * per panel instead of once per tile, where it would take FMA-port slots. */
static inline __attribute__((always_inline)) void
widen_panel(tt_dtype dt, const void *panel, int K, float *dst)
{
    if (dt == TT_BF16) {
        for (int kp = 0; 2 * kp < K; kp++) {
            float *d = dst + (size_t)2 * kp * KERNELS_NR;
#pragma GCC unroll 4
            for (int v = 0; v < KS_NV; v++) {
                vf e, o;
                load_pair(panel, kp, v, &e, &o);
                v_store(d + v * KS_VW, e);
                if (2 * kp + 1 < K)
                    v_store(d + KERNELS_NR + v * KS_VW, o);
            }
        }
    } else {
        for (int k = 0; k < K; k++)
#pragma GCC unroll 4
            for (int v = 0; v < KS_NV; v++)
                v_store(dst + (size_t)k * KERNELS_NR + v * KS_VW, load_row(dt, panel, k, v));
    }
}

/* The rows against a panel widened to fp32: one function that the fp16 and bf16 matmuls
 * share, kept out of line so that each is small enough for GCC to keep the tile's accumulators in
 * registers (inlined into one of them, GCC 12 spilled them and prefill ran much slower). */
static __attribute__((noinline)) void mm_rows_widened(const matmul_args *a, const float *panel, int p)
{
    mm_rows(a, TT_F32, panel, p);
}

static inline __attribute__((always_inline)) void
mm_panels(const matmul_args *a, tt_dtype dt, int p0, int p1, float *scratch)
{
    const packed_matrix *w = a->w;
    const size_t panel_bytes = w->panel_elems * tt_dtype_size(dt);
    const char *data = (const char *)w->data;
    if (a->T == 1) {
        const bool pf = cpu_features_gemv_prefetch();
        int p = p0;
        for (; p + KS_GEMV_NP <= p1; p += KS_GEMV_NP) {
            const char *at = data + (size_t)p * panel_bytes;
            if (pf)             /* two copies of the loop, neither testing pf inside */
                mm_gemv(a, dt, KS_GEMV_NP, true, at, panel_bytes, p);
            else
                mm_gemv(a, dt, KS_GEMV_NP, false, at, panel_bytes, p);
        }
        switch (p1 - p) {
        case 1: mm_gemv(a, dt, 1, pf, data + (size_t)p * panel_bytes, panel_bytes, p); break;
#if KS_GEMV_NP > 2
        case 2: mm_gemv(a, dt, 2, pf, data + (size_t)p * panel_bytes, panel_bytes, p); break;
        case 3: mm_gemv(a, dt, 3, pf, data + (size_t)p * panel_bytes, panel_bytes, p); break;
#endif
        default: break;
        }
        return;
    }
    for (int p = p0; p < p1; p++) {
        const void *panel = data + (size_t)p * panel_bytes;
#if KS_VW == 16
        if (dt == TT_F32 && p + 1 < p1 && a->T >= KS_MR) {     /* a prefill: panels in pairs */
            mm_rows_pair(a, panel, (const float *)(data + (size_t)(p + 1) * panel_bytes), p);
            p++;
            continue;
        }
#endif
        if (dt == TT_Q8) {
            mm_rows_q8(a, panel, p);
        } else if (dt != TT_F32 && scratch && a->T >= 2 * KS_MR) {
            widen_panel(dt, panel, w->K, scratch);
            mm_rows_widened(a, scratch, p);
        } else {
            mm_rows(a, dt, panel, p);
        }
    }
}

static void mm_f32(const matmul_args *a, int p0, int p1, float *s) { mm_panels(a, TT_F32, p0, p1, s); }
static void mm_f16(const matmul_args *a, int p0, int p1, float *s) { mm_panels(a, TT_F16, p0, p1, s); }
#if KS_AMX || KS_BF16DP
/* kernels_bf16_rows vectorized, the bf16_rows of the sets whose BF16 matmuls read bf16 activations
 * (amx, avx512bf16): tt_f32_to_bf16 in integer lanes (the same bits, denormals and NaNs
 * included; vcvtneps2bf16 would flush denormal inputs). */
static void simd_bf16_rows(const float *x, int ldx, int K, int t0, int t1, uint16_t *xb, int ldxb)
{
    const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff);
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i quiet = _mm512_set1_epi32(0x40);
    for (int t = t0; t < t1; t++) {
        const float *xr = x + (size_t)t * (size_t)ldx;
        uint16_t *o = xb + (size_t)t * (size_t)ldxb;
        for (int k = 0; k < K; k += 16) {
            const vmask m = v_mask(K - k);
            const __m512i u = _mm512_maskz_loadu_epi32(m, xr + k);
            const __m512i hi = _mm512_srli_epi32(u, 16);
            const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), inf);
            __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(half, _mm512_and_si512(hi, one)));
            r = _mm512_srli_epi32(r, 16);
            r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, quiet));
            _mm512_mask_cvtepi32_storeu_epi16(o + k, m, r);
        }
    }
}
#endif
#if KS_AMX
#include "core/cpu/kernels_amx.h"
#define mm_bf16 amx_matmul_bf16
#elif KS_BF16DP
#if KS_BF16DP
/* ---------------------------------------------------------------------------------------------
 * BF16 matmul on vdpbf16ps (the avx512bf16 set: AVX512-BF16 without AMX, as on AMD Zen 4). The
 * packed BF16 panel's pair row kp (kernels.h: k = 2kp and 2kp+1 of each column side by side in
 * one 32-bit lane) is vdpbf16ps's weight operand as it stands; the activations, rounded to bf16
 * once per matmul by the caller (bf16_rows), are broadcast one pair at a time. Every output
 * lane, in every row however many rows come with it (the GEMV, tiles of every height):
 *     c = 0; for kp ascending: c = vdpbf16ps(c, weights of pair kp, activations of pair kp)
 * (the two products are exact; how they are added to c is the instruction's own, denormal
 * inputs read as zero), with an odd K's last pair taking its odd activation as zero (its
 * weight is the packed zero); then bias and epilogue. One instruction per 64 weight bytes
 * where the fp32 route takes a shift, a mask and two FMAs; a prefill tile does twice the
 * multiply-adds per instruction of an fp32 one. */

/* Activation pair kp of a bf16 row, broadcast; the last pair of an odd K has only its even half. */
static inline __attribute__((always_inline)) __m512bh dp_x(const uint16_t *xr, int kp)
{
    int32_t v;
    memcpy(&v, xr + 2 * kp, 4);
    return (__m512bh)_mm512_set1_epi32(v);
}

static inline __attribute__((always_inline)) __m512bh dp_x_last(const uint16_t *xr, int kp)
{
    return (__m512bh)_mm512_set1_epi32((int)xr[2 * kp]);
}

/* Vector v (columns v*16 ..) of pair row kp of a BF16 panel. */
static inline __attribute__((always_inline)) __m512bh dp_w(const void *panel, int kp, int v)
{
    return (__m512bh)v_iload((const uint16_t *)panel + (size_t)kp * 2 * KERNELS_NR +
                             (size_t)v * 2 * KS_VW);
}

/* One row against NP panels side by side (decode): NP * KS_NV chains, software prefetch where
 * PF (cpu_features_gemv_prefetch). */
static inline __attribute__((always_inline)) void
mm_gemv_dp(const matmul_args *a, int NP, bool PF, const char *panel, size_t panel_bytes, int p)
{
    const uint16_t *xr = a->xb;
    const int K = a->w->K, KP = K / 2;
    vf c[KS_GEMV_NP][KS_NV];
#pragma GCC unroll 4
    for (int g = 0; g < NP; g++)
#pragma GCC unroll 4
        for (int v = 0; v < KS_NV; v++)
            c[g][v] = v_zero();
    for (int kp = 0; kp < KP; kp++) {
        const __m512bh x = dp_x(xr, kp);
#pragma GCC unroll 4
        for (int g = 0; g < NP; g++) {
            const char *pg = panel + (size_t)g * panel_bytes;
            if (PF) {
                const char *pf = pg + (size_t)kp * 4 * KERNELS_NR + GEMV_PREFETCH_16;
                _mm_prefetch(pf, _MM_HINT_T0);
                _mm_prefetch(pf + 64, _MM_HINT_T0);
            }
#pragma GCC unroll 4
            for (int v = 0; v < KS_NV; v++)
                c[g][v] = _mm512_dpbf16_ps(c[g][v], dp_w(pg, kp, v), x);
        }
    }
    if (K % 2) {
        const __m512bh x = dp_x_last(xr, KP);
#pragma GCC unroll 4
        for (int g = 0; g < NP; g++)
#pragma GCC unroll 4
            for (int v = 0; v < KS_NV; v++)
                c[g][v] = _mm512_dpbf16_ps(c[g][v], dp_w(panel + (size_t)g * panel_bytes, KP, v),
                                           x);
    }
    mm_gemv_finish(a, NP, p, c);
}

/* MR rows t0 .. against column group g of a BF16 panel: the GEMV's chains, MR rows at a time. */
static inline __attribute__((always_inline)) void
mm_tile_dp(const matmul_args *a, int MR, int t0, const void *panel, int p, int g)
{
    const int K = a->w->K, KP = K / 2;
    const uint16_t *x = a->xb + (size_t)t0 * (size_t)a->ldxb;
    const size_t ldx = (size_t)a->ldxb;
    vf c0[KS_MR], c1[KS_MR];
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++)
        c0[r] = c1[r] = v_zero();
    for (int kp = 0; kp < KP; kp++) {
        if (MR < KS_MR)
            mm_tile_prefetch(TT_BF16, panel, kp, g);
        const __m512bh w0 = dp_w(panel, kp, 2 * g), w1 = dp_w(panel, kp, 2 * g + 1);
#pragma GCC unroll 16
        for (int r = 0; r < MR; r++) {
            const __m512bh xr = dp_x(x + r * ldx, kp);
            c0[r] = _mm512_dpbf16_ps(c0[r], w0, xr);
            c1[r] = _mm512_dpbf16_ps(c1[r], w1, xr);
        }
    }
    if (K % 2) {
        const __m512bh w0 = dp_w(panel, KP, 2 * g), w1 = dp_w(panel, KP, 2 * g + 1);
#pragma GCC unroll 16
        for (int r = 0; r < MR; r++) {
            const __m512bh xr = dp_x_last(x + r * ldx, KP);
            c0[r] = _mm512_dpbf16_ps(c0[r], w0, xr);
            c1[r] = _mm512_dpbf16_ps(c1[r], w1, xr);
        }
    }
    const int n0 = p * KERNELS_NR + g * 2 * KS_VW;
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) {
        mm_finish(a, t0 + r, n0, c0[r]);
        mm_finish(a, t0 + r, n0 + KS_VW, c1[r]);
    }
    if (a->epilogue == MM_GELU_ERF)
        mm_finish_erf(a, t0, MR, n0, 2 * KS_VW);
}

/* All rows against one BF16 panel, KS_MR rows at a time and the rest in one smaller tile; out of
 * line so that GCC keeps a tile's accumulators in registers (mm_rows_widened). */
static __attribute__((noinline)) void mm_rows_dp(const matmul_args *a, const void *panel, int p)
{
    for (int g = 0; g < KS_GROUPS; g++) {
        if (p * KERNELS_NR + g * 2 * KS_VW >= a->w->N)
            break;
        int t = 0;
        for (; t + KS_MR <= a->T; t += KS_MR)
            mm_tile_dp(a, KS_MR, t, panel, p, g);
#define KS_TAIL(n) case n: mm_tile_dp(a, n, t, panel, p, g); break;
        switch (a->T - t) {
        KS_TAIL(1) KS_TAIL(2) KS_TAIL(3) KS_TAIL(4) KS_TAIL(5)
        KS_TAIL(6) KS_TAIL(7) KS_TAIL(8) KS_TAIL(9) KS_TAIL(10) KS_TAIL(11)
        default: break;
        }
#undef KS_TAIL
    }
}

static void mm_bf16(const matmul_args *a, int p0, int p1, float *scratch)
{
    (void)scratch;
    const size_t panel_bytes = a->w->panel_elems * 2;
    const char *data = (const char *)a->w->data;
    if (a->T == 1) {
        const bool pf = cpu_features_gemv_prefetch();
        int p = p0;
        /* Without the prefetch (off Intel: Zen 4), two panels side by side, not four (the bf16
         * pair rows are 128 bytes a panel a step, twice an fp16 row): one core streamed GPT-2
         * 124M's decode matmuls at 26.5-29.0 GB/s against 22.7-28.4 with four, 6 alternated
         * rounds of matmul_bench --dtype bf16 --threads 1 --clock cpu; the whole engine on two
         * threads, bench --dtype bf16 at 42-52 GB/s measured, decoded at 78-84% of that limit
         * against 63-78% (5 alternated rounds) */
        if (pf)
            for (; p + KS_GEMV_NP <= p1; p += KS_GEMV_NP)
                mm_gemv_dp(a, KS_GEMV_NP, true, data + (size_t)p * panel_bytes, panel_bytes, p);
        else
            for (; p + 2 <= p1; p += 2)
                mm_gemv_dp(a, 2, false, data + (size_t)p * panel_bytes, panel_bytes, p);
        switch (p1 - p) {
        case 1: mm_gemv_dp(a, 1, pf, data + (size_t)p * panel_bytes, panel_bytes, p); break;
        case 2: mm_gemv_dp(a, 2, pf, data + (size_t)p * panel_bytes, panel_bytes, p); break;
        case 3: mm_gemv_dp(a, 3, pf, data + (size_t)p * panel_bytes, panel_bytes, p); break;
        default: break;
        }
        return;
    }
    for (int p = p0; p < p1; p++)
        mm_rows_dp(a, data + (size_t)p * panel_bytes, p);
}
#endif
#else
static void mm_bf16(const matmul_args *a, int p0, int p1, float *s) { mm_panels(a, TT_BF16, p0, p1, s); }
#endif
static void mm_q8(const matmul_args *a, int p0, int p1, float *s) { mm_panels(a, TT_Q8, p0, p1, s); }

#include "core/cpu/kernels_gguf_simd.h"
#include "core/cpu/kernels_gguf_f16.h"

static void simd_matmul(const matmul_args *a, int p0, int p1, float *scratch)
{
    switch (a->w->dtype) {
    case TT_GGUF:
        if (packed_gguf_is_float(a->w))
            mm_gguf_f16(a, p0, p1, scratch);
        else
            mm_gguf(a, p0, p1, scratch);
        break;
    case TT_F32: mm_f32(a, p0, p1, scratch); break;
    case TT_F16: mm_f16(a, p0, p1, scratch); break;
    case TT_BF16: mm_bf16(a, p0, p1, scratch); break;
    case TT_Q8: mm_q8(a, p0, p1, scratch); break;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Attention */

/* The softmax numerators exp(s - max) of one query row's scores srow[0..n), in place; returns
 * 1 / their sum. The one-row path and the tiles both call it, so a row's weights are the same
 * bits whichever computed them. */
static inline float softmax_row(float *srow, int n)
{
    vf vmax = v_set1(-INFINITY);
    for (int t = 0; t < n; t += KS_VW) {
        const vmask m = v_mask(n - t);
        vmax = v_mmax(vmax, m, v_mload(m, srow + t));
    }
    const float mx = v_hmax(vmax);
    const vf vmx = v_set1(mx);
    vf vsum = v_zero();
    int t = 0;
    for (; t + KS_VW <= n; t += KS_VW) {
        vf e = v_exp(v_sub(v_loadu(srow + t), vmx));
        v_storeu(srow + t, e);
        vsum = v_add(vsum, e);
    }
#if KS_SOFTMAX_SCALAR_TAIL
    float sum = v_hsum(vsum);
    for (; t < n; t++) {
        srow[t] = expf(srow[t] - mx);
        sum += srow[t];
    }
    return 1.0f / sum;
#else
    if (t < n) {
        const vmask m = v_mask(n - t);
        vf e = v_exp(v_sub(v_mload(m, srow + t), vmx));
        v_mstore(srow + t, m, e);
        vsum = v_add(vsum, v_keep(m, e));
    }
    return 1.0f / v_hsum(vsum);
#endif
}

/* Dimension 0 of head h's keys at positions t .. t+KS_VW-1 (t a multiple of KS_VW, which divides
 * KERNELS_KEY_BLOCK: one block holds them all); dimension d is d KERNELS_KEY_BLOCK floats on. */
static inline __attribute__((always_inline)) const float *
key_vec(const attention_args *a, int h, int t)
{
    _Static_assert(KERNELS_KEY_BLOCK % KS_VW == 0, "a vector of keys lies in one block");
    return a->k + kernels_key_at(a->HS, a->ldk, kernels_kv_head(a, h), 0, t);
}

/* Bytes between the lines a one-row attention hints to the prefetchers
 * (cpu_features_attention_prefetch): one line in 4. A hint on every line measured slower than
 * none; one in 4 is enough to start the hardware's stream on the run read next. */
#ifndef KS_ATT_PF_STEP
#define KS_ATT_PF_STEP 256
#endif

/* Scores of query q against the NB vectors of keys from position t (the last masked at n), into
 * scratch: NB independent chains over d ascending, each then scaled. A row's vectors past its
 * last key are not computed at all, not only masked: their keys lie in the cache's unwritten
 * part, whose pages (calloc) are not mapped yet, and on AMD Zen 4 a masked load whose lanes are
 * all off but whose address is on such a page takes a slow assist every time. One-row decode of
 * GPT-2 124M at positions 8-264 spent 34% of its time there (q8 weights, 2 threads, perf). The
 * same chains, so the same bits. */
static inline __attribute__((always_inline)) void
score_vectors(const attention_args *a, int h, const float *q, int t, int n, vf scale,
              float *scratch, int NB, const char *pf, const char *pf_end)
{
    vmask m[KS_SCORE_NV];
    vf sc[KS_SCORE_NV];
    const float *kr[KS_SCORE_NV];
#pragma GCC unroll 8
    for (int b = 0; b < NB; b++) {
        m[b] = v_mask(n - t - KS_VW * b);
        sc[b] = v_zero();
        kr[b] = key_vec(a, h, t + KS_VW * b);
    }
    for (int d = 0; d < a->HS; d++) {
        /* pf .. pf_end (empty without the hint): this group's values, one line in 4 (at HS 64
         * a group of 8 vectors has 64 d steps for its 32 KiB of values). */
        for (int j = 0; j < (NB * KS_VW >= 128 ? 2 : 1); j++)
            if (pf < pf_end) {
                _mm_prefetch(pf, _MM_HINT_T1);
                pf += KS_ATT_PF_STEP;
            }
        const vf qd = v_set1(q[d]);
#pragma GCC unroll 8
        for (int b = 0; b < NB; b++)
            sc[b] = v_fma(qd, v_mload(m[b], kr[b] + (size_t)d * KERNELS_KEY_BLOCK), sc[b]);
    }
#pragma GCC unroll 8
    for (int b = 0; b < NB; b++)
        v_mstore(scratch + t + KS_VW * b, m[b], v_mul(sc[b], scale));
}

/* One query row at a time (decode, and the rows a tile leaves over). Every score is one FMA chain
 * over d ascending, and every output column KS_VALUE_CHAINS interleaved chains over the keys
 * ascending, added and scaled afterwards: the chains attention_tile runs for each of its rows.
 * Independent chains side by side (KS_SCORE_NV vectors of positions, KS_VALUE_NV of head
 * columns) supply the parallelism. */
static inline __attribute__((always_inline)) void
attention_rows_body(const attention_args *a, int h, int t0, int t1, float *scratch, bool PF)
{
    const int HS = a->HS;
    const vf scale = v_set1(gpt2_attn_scale(HS));
    const float *vh = a->v + (size_t)kernels_kv_head(a, h) * (size_t)a->n_ctx * (size_t)HS;    /* (n_ctx, HS) */
    /* One row alone (decode) hints the run it reads next (cpu_features_attention_prefetch): the
     * values while it scores, then the next head's keys (if they are other keys) while it
     * weights the values. */
    const bool pf = PF;
    const bool pf_next = pf && a->next_head && h + 1 < a->NH &&
                         kernels_kv_head(a, h + 1) != kernels_kv_head(a, h);
    for (int i = t0; i < t1; i++) {
        const float *q = a->q + (size_t)i * (size_t)a->ldq + (size_t)h * (size_t)HS;
        float *o = a->out + (size_t)i * (size_t)a->ldo + (size_t)h * (size_t)HS;
        const int n = a->pos + i + 1;
        const size_t row_bytes = (size_t)HS * sizeof(float);
        const char *vpf_end = pf ? (const char *)(vh + (size_t)n * (size_t)HS) : NULL;
        int t = 0;
        for (; t + KS_SCORE_NV * KS_VW <= n; t += KS_SCORE_NV * KS_VW)
            score_vectors(a, h, q, t, n, scale, scratch, KS_SCORE_NV,
                          pf ? (const char *)vh + (size_t)t * row_bytes : NULL, vpf_end);
        _Static_assert(KS_SCORE_NV == 4 || KS_SCORE_NV == 8, "KS_SCORES names 1 .. KS_SCORE_NV");
        switch ((n - t + KS_VW - 1) / KS_VW) {  /* the vectors left, the last one partial */
#define KS_SCORES(nb) case nb: score_vectors(a, h, q, t, n, scale, scratch, nb, \
                          pf ? (const char *)vh + (size_t)t * row_bytes : NULL, vpf_end); break;
        KS_SCORES(1) KS_SCORES(2) KS_SCORES(3) KS_SCORES(4)
#if KS_SCORE_NV > 4
        KS_SCORES(5) KS_SCORES(6) KS_SCORES(7) KS_SCORES(8)
#endif
#undef KS_SCORES
        default: break;
        }
        const float inv1 = softmax_row(scratch, n);
        kernels_attention_keep(a, i, scratch, inv1, n);
        const vf inv = v_set1(inv1);
        /* The next head's first n keys (whole blocks), one line in 4 (a value row is HS floats). */
        const char *kpf = pf_next ? (const char *)key_vec(a, h + 1, 0) : NULL;
        const char *kpf_end = kpf ? kpf + (size_t)(n - n % KERNELS_KEY_BLOCK) * row_bytes : NULL;
        const size_t kpf_step = row_bytes < KS_ATT_PF_STEP ? KS_ATT_PF_STEP : row_bytes;
        for (int d0 = 0; d0 < HS; d0 += KS_VALUE_NV * KS_VW) {
            vmask m[KS_VALUE_NV];
            vf acc[KS_VALUE_NV][KS_VALUE_CHAINS];
#pragma GCC unroll 4
            for (int b = 0; b < KS_VALUE_NV; b++) {
                m[b] = v_mask(HS - d0 - KS_VW * b);
#pragma GCC unroll 2
                for (int c = 0; c < KS_VALUE_CHAINS; c++)
                    acc[b][c] = v_zero();
            }
            const float *vr = vh + d0;
            int u = 0;
            for (; u + KS_VALUE_CHAINS <= n; u += KS_VALUE_CHAINS)
#pragma GCC unroll 2
                for (int c = 0; c < KS_VALUE_CHAINS; c++) {
                    if (kpf < kpf_end) {      /* the first pass over the values only */
                        _mm_prefetch(kpf, _MM_HINT_T1);
                        kpf += kpf_step;
                    }
                    const vf p = v_set1(scratch[u + c]);
                    const float *vu = vr + (size_t)(u + c) * (size_t)HS;
#pragma GCC unroll 4
                    for (int b = 0; b < KS_VALUE_NV; b++)
                        acc[b][c] = v_fma(p, v_mload(m[b], vu + KS_VW * b), acc[b][c]);
                }
            for (int c = 0; u < n; u++, c++) {       /* fewer keys left than chains */
                const vf p = v_set1(scratch[u]);
                const float *vu = vr + (size_t)u * (size_t)HS;
#pragma GCC unroll 4
                for (int b = 0; b < KS_VALUE_NV; b++)
                    acc[b][c] = v_fma(p, v_mload(m[b], vu + KS_VW * b), acc[b][c]);
            }
#pragma GCC unroll 4
            for (int b = 0; b < KS_VALUE_NV; b++) {
                vf s = acc[b][0];
#pragma GCC unroll 2
                for (int c = 1; c < KS_VALUE_CHAINS; c++)
                    s = v_add(s, acc[b][c]);
                v_mstore(o + d0 + KS_VW * b, m[b], v_mul(s, inv));
            }
        }
    }
}

/* Two copies of the loop, the one without hints as it was before them (Intel, AVX2, spans of
 * rows): neither tests the choice inside. */
static void attention_rows(const attention_args *a, int h, int t0, int t1, float *scratch)
{
    if (KS_VW == 16 && t1 - t0 == 1 && cpu_features_attention_prefetch())
        attention_rows_body(a, h, t0, t1, scratch, true);
    else
        attention_rows_body(a, h, t0, t1, scratch, false);
}

#if KS_ATT_QB

/* A tile has QB rows, 2 <= QB <= KS_ATT_QB: full tiles of KS_ATT_QB in a prefill, and the few rows
 * of a speculative verification or the rows a prefill's tiles leave over in one shorter tile, so
 * each key and value row loaded serves all of them (row by row, each row read the head's keys and
 * values again: a large part of the cost of verifying one more row, by measurement). QB is a
 * constant after inlining; each height is its own out-of-line function (TILE_HEIGHTS). */

/* The tile's 2 x QB accumulators, zeroed. */
static inline __attribute__((always_inline)) void tile_zero(vf *c0, vf *c1, int QB)
{
#pragma GCC unroll 8
    for (int r = 0; r < QB; r++)
        c0[r] = c1[r] = v_zero();
}

/* One step of a tile, for each of its rows r: c0[r] += x[r xs] row0[0 .. KS_VW) (lanes of m0) and
 * c1[r] += x[r xs] row1[0 .. KS_VW) (lanes of m1). Inlined so that the accumulators stay in
 * registers. */
static inline __attribute__((always_inline)) void
tile_fma(vf *c0, vf *c1, const float *x, size_t xs, vmask m0, vmask m1, const float *row0,
         const float *row1, int QB)
{
    vf b0 = v_mload(m0, row0), b1 = v_mload(m1, row1);
#pragma GCC unroll 8
    for (int r = 0; r < QB; r++) {
        vf p = v_set1(x[(size_t)r * xs]);
        c0[r] = v_fma(p, b0, c0[r]);
        c1[r] = v_fma(p, b1, c1[r]);
    }
}

/* Scores of the tile's rows, 2 vectors of positions x QB rows per step (2 QB accumulators),
 * into scratch (QB, n_max): row r's query is q + r qs (a prefill's rows of head h, ldq apart, or
 * one row's query heads sharing h's keys, HS apart). The three steps of a tile are separate
 * functions so that each gets the register file to itself (GCC 12 spilled a key vector of this
 * loop when they were one). */
static inline __attribute__((always_inline)) void
tile_scores(const attention_args *a, int h, const float *q, size_t qs, int n_max, float *scratch,
            int QB)
{
    const int HS = a->HS;
    const vf scale = v_set1(gpt2_attn_scale(HS));
    const size_t ls = (size_t)n_max;
    for (int t = 0; t < n_max; t += 2 * KS_VW) {
        const vmask m0 = v_mask(n_max - t), m1 = v_mask(n_max - t - KS_VW);
        vf c0[KS_ATT_QB], c1[KS_ATT_QB];
        tile_zero(c0, c1, QB);
        const float *k0 = key_vec(a, h, t), *k1 = key_vec(a, h, t + KS_VW);
        for (int d = 0; d < HS; d++)
            tile_fma(c0, c1, q + d, qs, m0, m1, k0 + (size_t)d * KERNELS_KEY_BLOCK,
                     k1 + (size_t)d * KERNELS_KEY_BLOCK, QB);
#pragma GCC unroll 8
        for (int r = 0; r < QB; r++) {
            v_mstore(scratch + r * ls + t, m0, v_mul(c0[r], scale));
            v_mstore(scratch + r * ls + t + KS_VW, m1, v_mul(c1[r], scale));
        }
    }
}

/* Outputs of the tile's rows from the softmax numerators in scratch (QB, ls), 2 vectors of head
 * columns x QB rows per step (2 QB accumulators), each row scaled by its inv, row r's written to
 * out + r os. Every row sees keys 0 .. n_min-1; a prefill's (tri) row r also n_min .. n_min+r-1. */
static inline __attribute__((always_inline)) void
tile_values(const attention_args *a, int h, float *out, size_t os, int n_min, size_t ls, bool tri,
            const float *scratch, const float *inv, int QB)
{
    _Static_assert(KS_VALUE_CHAINS == 1, "a tile runs one chain per output column");
    const int HS = a->HS;
    const float *vh = a->v + (size_t)kernels_kv_head(a, h) * (size_t)a->n_ctx * (size_t)HS;    /* (n_ctx, HS) */
    for (int d0 = 0; d0 < HS; d0 += 2 * KS_VW) {
        const vmask m0 = v_mask(HS - d0), m1 = v_mask(HS - d0 - KS_VW);
        vf c0[KS_ATT_QB], c1[KS_ATT_QB];
        tile_zero(c0, c1, QB);
        const float *vr = vh + d0;
        int u = 0;
        for (; u < n_min; u++, vr += HS)
            tile_fma(c0, c1, scratch + u, ls, m0, m1, vr, vr + KS_VW, QB);
        /* The triangle: row r also sees keys n_min .. n_min + r - 1. */
        if (tri) {
#pragma GCC unroll 8
            for (int r = 1; r < QB; r++) {
                const float *vt = vr;
                for (int j = 0; j < r; j++, vt += HS) {
                    vf p = v_set1(scratch[r * ls + (size_t)(u + j)]);
                    c0[r] = v_fma(p, v_mload(m0, vt), c0[r]);
                    c1[r] = v_fma(p, v_mload(m1, vt + KS_VW), c1[r]);
                }
            }
        }
#pragma GCC unroll 8
        for (int r = 0; r < QB; r++) {
            float *o = out + (size_t)r * os + d0;
            vf sc = v_set1(inv[r]);
            v_mstore(o, m0, v_mul(c0[r], sc));
            v_mstore(o + KS_VW, m1, v_mul(c1[r], sc));
        }
    }
}

/* The scores and the values of a tile of each height, out of line (see tile_scores). */
#define TILE_HEIGHT(QB)                                                                         \
    static __attribute__((noinline)) void                                                      \
    tile_scores_##QB(const attention_args *a, int h, const float *q, size_t qs, int n_max,     \
                     float *scratch)                                                            \
    {                                                                                           \
        tile_scores(a, h, q, qs, n_max, scratch, QB);                                           \
    }                                                                                           \
    static __attribute__((noinline)) void                                                      \
    tile_values_##QB(const attention_args *a, int h, float *out, size_t os, int n_min,          \
                     size_t ls, bool tri, const float *scratch, const float *inv)               \
    {                                                                                           \
        tile_values(a, h, out, os, n_min, ls, tri, scratch, inv, QB);                           \
    }
TILE_HEIGHT(2) TILE_HEIGHT(3) TILE_HEIGHT(4) TILE_HEIGHT(5) TILE_HEIGHT(6) TILE_HEIGHT(7)
TILE_HEIGHT(8)
#undef TILE_HEIGHT
_Static_assert(KS_ATT_QB == 8, "TILE_HEIGHT names every height from 2 to KS_ATT_QB");

/* QB query rows at once (q + r qs, outputs to out + r os): each row of transposed keys and each
 * value row loaded feeds QB rows of scores or outputs instead of one. Every row sees keys
 * 0 .. n_min-1; with tri (a prefill's rows, at consecutive positions) row r also the r after
 * them: the score tile covers the longest, and in the weighted sum the keys a row does not see
 * are skipped for that row (not added with weight zero), so each row runs exactly the chains of
 * attention_rows. Row r's weights go to the capture as query row keep0 + r (keep0 < 0: none).
 * scratch: (QB, ls) with ls = n_min + (QB - 1 with tri). */
static void tile_attend(const attention_args *a, int h, const float *q, size_t qs, float *out,
                        size_t os, int n_min, bool tri, int keep0, float *scratch, int QB)
{
    const size_t ls = (size_t)n_min + (tri ? (size_t)QB - 1 : 0);
    float inv[KS_ATT_QB];
    switch (QB) {
#define TILE_CASE(n) case n: tile_scores_##n(a, h, q, qs, (int)ls, scratch); break;
    TILE_CASE(2) TILE_CASE(3) TILE_CASE(4) TILE_CASE(5) TILE_CASE(6) TILE_CASE(7) TILE_CASE(8)
#undef TILE_CASE
    default: return;
    }
    for (int r = 0; r < QB; r++) {
        const int n = n_min + (tri ? r : 0);
        inv[r] = softmax_row(scratch + r * ls, n);
        if (keep0 >= 0)
            kernels_attention_keep(a, keep0 + r, scratch + r * ls, inv[r], n);
    }
    switch (QB) {
#define TILE_CASE(n) case n: tile_values_##n(a, h, out, os, n_min, ls, tri, scratch, inv); break;
    TILE_CASE(2) TILE_CASE(3) TILE_CASE(4) TILE_CASE(5) TILE_CASE(6) TILE_CASE(7) TILE_CASE(8)
#undef TILE_CASE
    }
}

/* Rows i0 .. i0+QB-1 of head h (a prefill, a verification): a tile of consecutive positions. */
static void attention_tile(const attention_args *a, int h, int i0, float *scratch, int QB)
{
    tile_attend(a, h, a->q + (size_t)i0 * (size_t)a->ldq + (size_t)h * (size_t)a->HS,
                (size_t)a->ldq, a->out + (size_t)i0 * (size_t)a->ldo + (size_t)h * (size_t)a->HS,
                (size_t)a->ldo, a->pos + i0 + 1, true, i0, scratch, QB);
}

/* Query heads h0 .. h0+G-1 of row i, which read the same keys and values (grouped-query
 * attention), as one tile whose rows are the heads: each key and value row loaded serves G heads
 * (head by head, a decode step read each key/value head's run G times). Each head runs exactly
 * the chains of attention_rows, so the same bits. */
static void simd_attention_heads(const attention_args *a, int h0, int G, int i, float *scratch)
{
    const size_t HS = (size_t)a->HS;
    tile_attend(a, h0, a->q + (size_t)i * (size_t)a->ldq + (size_t)h0 * HS, HS,
                a->out + (size_t)i * (size_t)a->ldo + (size_t)h0 * HS, HS, a->pos + i + 1, false,
                -1, scratch, G);
}

#endif

static void simd_attention(const attention_args *a, int h, int t0, int t1, float *scratch)
{
    int i = t0;
#if KS_ATT_QB
    _Static_assert(KERNELS_ATTN_SCRATCH(1) >= KS_ATT_QB, "a tile's scores fit the scratch");
    for (; i + KS_ATT_QB <= t1; i += KS_ATT_QB)
        attention_tile(a, h, i, scratch, KS_ATT_QB);
    if (t1 - i >= 2) {
        attention_tile(a, h, i, scratch, t1 - i);
        i = t1;
    }
#endif
    attention_rows(a, h, i, t1, scratch);
}

/* kernels_swiglu: silu(g) = g / (1 + e^-g) with v_exp (a large g: g over 1; a large -g: over
 * an infinite denominator, as expf's, which AVX2's v_exp, clamped to a normal float, is made
 * to give past its clamp); the columns past the last whole vector by arch_silu. A decode step's
 * 8192 columns took 17.5 us a layer through expf on the caller alone while the workers waited. */
static void simd_swiglu(float *gu, int ld, int FF, int t0, int t1)
{
    for (int t = t0; t < t1; t++) {
        float *g = gu + (size_t)t * (size_t)ld;
        const float *u = g + FF;
        int i = 0;
        for (; i + KS_VW <= FF; i += KS_VW) {
            const vf x = v_loadu(g + i);
            vf e = v_exp(v_sub(v_zero(), x));
#if KS_VW == 8
            e = _mm256_blendv_ps(e, v_set1(INFINITY),
                                 _mm256_cmp_ps(x, v_set1(-KS_EXP_HI), _CMP_LT_OQ));
#endif
            v_storeu(g + i, v_mul(v_div(x, v_add(v_set1(1.0f), e)), v_loadu(u + i)));
        }
        for (; i < FF; i++)
            g[i] = arch_silu(g[i]) * u[i];
    }
}

/* The CPU check is the caller's (kernels.c, built without this set's flags). */
const kernels *KS_SET_GET(void)
{
    static const kernels set = {
        .name = KS_SET_NAME, .matmul = simd_matmul, .quantize_rows = simd_quantize_rows,
#if KS_AMX || KS_BF16DP
        .bf16_rows = simd_bf16_rows,
#endif
        .attention = simd_attention, .swiglu = simd_swiglu, .gguf_groups = KS_VW == 16,
#if KS_ATT_QB
        .attention_heads = simd_attention_heads,
#endif
        .gguf_bf16_rows = KS_BF16DP && !KS_AMX};
    return &set;
}
