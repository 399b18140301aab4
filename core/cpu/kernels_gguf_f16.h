/* kernels_gguf_f16.h: the TT_GGUF matmul of a SIMD set over F16 and BF16 rows read where the file
 * stores them (a float GGUF file's matrices), included by kernels_simd.h after
 * kernels_gguf_simd.h. The activations stay fp32. Each output is kernels.h's chain: 16 lane sums
 * along k (one vector on AVX-512, two on AVX2), then gf_hsum's fixed tree, whatever tile computed
 * it. A decode step (one activation row) computes GF_DECODE_W weight rows a pass (GF_DECODE_WIDE
 * when the activation row is too long to stay in L1 beside the streams), sharing each
 * activation load, each from its own run of consecutive rows (so each is a sequential stream);
 * more rows go in register tiles of GF_TILE_W weight rows by GF_TILE_R activation rows (AVX-512:
 * 4 x 6 = 24 accumulators), a group of activation rows against a whole panel (its rows stay in
 * L2) before the next group. */

#if KS_VW == 16
#define GF_DECODE_W 4
#define GF_DECODE_WIDE 8
#define GF_TILE_W 4
#define GF_TILE_R 6
#else
#define GF_DECODE_W 4
#define GF_DECODE_WIDE 4      /* 8 rows x 2 vectors would not fit AVX2's 16 registers */
#define GF_TILE_W 2
#define GF_TILE_R 2
#endif
#define GF_NV (KERNELS_GGUF_LANES / KS_VW)   /* vectors of one 16-lane sum */
#define GF_MAX_W (GF_DECODE_WIDE > GF_TILE_W ? GF_DECODE_WIDE : GF_TILE_W)
/* A decode's activation row of at least this many k (fp32: 16 KiB, half of L1) takes
 * GF_DECODE_WIDE rows a pass: with GF_DECODE_W the row is read again from L2 for every pass
 * (the streams evict it), so that each weight byte costs half a byte of x from L2. One F16 GEMV
 * from the mapping, one thread, AMD EPYC Zen 4 VM, 4 -> 8 streams: K = 8192 21.7 -> 24.8 GB/s,
 * K = 4096 21.9 -> 24.6; K = 2048 (x 8 KiB) 25.5 -> 24.7, so it keeps 4. */
#define GF_DECODE_WIDE_K 4096

/* KS_VW weights of type t (QUANT_F16 or QUANT_BF16) at p, widened to fp32 (exact). */
static inline __attribute__((always_inline)) vf gf_widen(uint32_t t, const uint16_t *p)
{
#if KS_VW == 16
    const __m256i h = _mm256_loadu_si256((const __m256i *)p);
    return t == QUANT_F16 ? _mm512_cvtph_ps(h)
                          : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
#else
    const __m128i h = _mm_loadu_si128((const __m128i *)p);
    return t == QUANT_F16 ? _mm256_cvtph_ps(h)
                          : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
#endif
}

/* The sum of one output's 16 lanes (acc[0 .. GF_NV)) in kernels.h's order: lanes i and i + 8,
 * then gg_hsum's tree over the 8 sums. */
static inline __attribute__((always_inline)) float gf_hsum(const vf *acc)
{
#if KS_VW == 16
    const __m256 lo = _mm512_castps512_ps256(acc[0]);
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[0]), 1));
#else
    const __m256 lo = acc[0], hi = acc[1];
#endif
    return gg_hsum(_mm256_add_ps(lo, hi));
}

/* gf_hsum of each of acc[0 .. n) into out[0 .. n), n <= 16, the same bits: sixteen outputs' trees
 * at once, each level's adds the tree's pairs (lanes i and i + 8, i and i + 4, i and i + 2, 0 and
 * 1), the outputs' lanes brought together by shuffles instead of one output's at a time
 * (AVX-512; a tile's 24 outputs: 30 shuffles and 15 adds a 16, where gf_hsum takes ~7 a output). */
#if KS_VW == 16
static inline __attribute__((always_inline)) void gf_hsum16(const vf *acc, int n, float *out)
{
    vf a[16], c[8], d[4], e[2];
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++)
        a[j] = j < n ? acc[j] : v_zero();
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)      /* c[j]: a[2j]'s 8 sums i + (i + 8), then a[2j + 1]'s */
        c[j] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * j], a[2 * j + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(a[2 * j], a[2 * j + 1], _MM_SHUFFLE(3, 2, 3, 2)));
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)      /* d[j], quarter q: a[4j + q]'s 4 sums i + (i + 4) */
        d[j] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * j], c[2 * j + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(c[2 * j], c[2 * j + 1], _MM_SHUFFLE(3, 1, 3, 1)));
#pragma GCC unroll 2
    for (int j = 0; j < 2; j++)      /* e[j], quarter q: a[8j + q]'s 2 sums i + (i + 2),
                                          then a[8j + 4 + q]'s */
        e[j] = _mm512_add_ps(_mm512_shuffle_ps(d[2 * j], d[2 * j + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(d[2 * j], d[2 * j + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    /* lane 4q + j: a[q + 4j]'s 0 + 1; then lane m: a[m]'s */
    const vf r = _mm512_add_ps(_mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(2, 0, 2, 0)),
                               _mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i idx = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    _mm512_mask_storeu_ps(out, (__mmask16)((1u << n) - 1), _mm512_permutexvar_ps(idx, r));
}
#endif

/* Outputs (i, r) of a tile's accumulators into out[r * W + i], each by gf_hsum's tree (16 at
 * once where there are 8 or more: gf_hsum16). */
static inline __attribute__((always_inline)) void
gf_tile_sums(vf acc[][GF_TILE_R][GF_NV], int W, int R, float *out)
{
#if KS_VW == 16
    if (W * R >= 8) {
        vf flat[GF_MAX_W * GF_TILE_R];
#pragma GCC unroll 8
        for (int i = 0; i < W; i++)
#pragma GCC unroll 6
            for (int r = 0; r < R; r++)
                flat[r * W + i] = acc[i][r][0];
#pragma GCC unroll 2
        for (int j = 0; j < W * R; j += 16)
            gf_hsum16(flat + j, W * R - j < 16 ? W * R - j : 16, out + j);
        return;
    }
#endif
#pragma GCC unroll 8
    for (int i = 0; i < W; i++)
#pragma GCC unroll 6
        for (int r = 0; r < R; r++)
            out[r * W + i] = gf_hsum(acc[i][r]);
}

/* The weights w[i] + k .. K of a tile's last step, zero-filled to n in wt[i] (n a row), wp[i]
 * pointing at them. */
static inline void gf_tail_weights(const uint16_t *const *w, int W, int k, int K, int n,
                                   uint16_t *wt, const uint16_t **wp)
{
    memset(wt, 0, (size_t)W * (size_t)n * sizeof *wt);
    for (int i = 0; i < W; i++) {
        memcpy(wt + (size_t)i * n, w[i] + k, (size_t)(K - k) * sizeof *wt);
        wp[i] = wt + (size_t)i * n;
    }
}

/* One step of 16 k: the W weight rows' 16 weights from w[i] + wk, the R activation rows' from
 * x + r * ldx + xk, into acc. */
static inline __attribute__((always_inline)) void
gf_step(uint32_t t, const uint16_t *const *w, int W, const float *x, size_t ldx, int R,
        vf acc[][GF_TILE_R][GF_NV], size_t wk, size_t xk)
{
#pragma GCC unroll 2
    for (int v = 0; v < GF_NV; v++) {
        vf wv[GF_MAX_W];
#pragma GCC unroll 8
        for (int i = 0; i < W; i++)
            wv[i] = gf_widen(t, w[i] + wk + (size_t)v * KS_VW);
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            const vf xv = v_loadu(x + (size_t)r * ldx + xk + (size_t)v * KS_VW);
#pragma GCC unroll 8
            for (int i = 0; i < W; i++)
                acc[i][r][v] = v_fma(wv[i], xv, acc[i][r][v]);
        }
    }
}

/* W weight rows (w[i]: K elements of type t) against R activation rows (x, rows ldx apart):
 * output (i, r) into out[r * W + i]. One activation row (a decode's runs of rows, each a
 * sequential stream) where ahead (cpu_features_gemv_prefetch: Intel) prefetches each row's line
 * GF_AHEAD bytes on into L2: on the Xeon a Llama-3.2-1B F16 file decodes 10.2 -> 11.1 tok/s from
 * the mapping's 4 KiB pages and 10.7 -> 12.0 on huge pages (cpu.c, "Copies onto huge pages"; 1
 * KiB 12.0, 4 KiB 11.6); on Zen 4 (measured from the mapping) no faster than the hardware's.
 * 8 rows a pass (8 streams) measured slower than 4 below GF_DECODE_WIDE_K. */
#define GF_AHEAD 2048
static inline __attribute__((always_inline)) void
gf_tile(uint32_t t, const uint16_t *const *w, int W, const float *x, size_t ldx, int R, int K,
        bool ahead, float *out)
{
    enum { MW = GF_MAX_W };
    vf acc[MW][GF_TILE_R][GF_NV];
#pragma GCC unroll 8
    for (int i = 0; i < W; i++)
#pragma GCC unroll 6
        for (int r = 0; r < R; r++)
#pragma GCC unroll 2
            for (int v = 0; v < GF_NV; v++)
                acc[i][r][v] = v_zero();
    int k = 0;
    /* 32 k a pass: one cache line of each weight row */
    for (; k + 32 <= K; k += 32) {
        if (R == 1 && ahead)
#pragma GCC unroll 8
            for (int i = 0; i < W; i++)
                _mm_prefetch((const char *)(w[i] + k) + GF_AHEAD, _MM_HINT_T1);
        gf_step(t, w, W, x, ldx, R, acc, (size_t)k, (size_t)k);
        gf_step(t, w, W, x, ldx, R, acc, (size_t)k + 16, (size_t)k + 16);
    }
    if (k + 16 <= K) {
        gf_step(t, w, W, x, ldx, R, acc, (size_t)k, (size_t)k);
        k += 16;
    }
    if (k < K) {
        /* the last K % 16 k, zero-filled to 16 */
        _Alignas(64) uint16_t wt[MW][KERNELS_GGUF_LANES];
        _Alignas(64) float xt[GF_TILE_R][KERNELS_GGUF_LANES];
        const uint16_t *wp[MW];
        gf_tail_weights(w, W, k, K, KERNELS_GGUF_LANES, &wt[0][0], wp);
        memset(xt, 0, sizeof xt);
        for (int r = 0; r < R; r++)
            memcpy(xt[r], x + (size_t)r * ldx + k, (size_t)(K - k) * sizeof(float));
        gf_step(t, wp, W, &xt[0][0], KERNELS_GGUF_LANES, R, acc, 0, 0);
    }
    gf_tile_sums(acc, W, R, out);
}

static __attribute__((noinline)) void gf_decode(uint32_t t, const uint16_t *const *w, int W,
                                                const float *x, int K, bool ahead, float *out)
{
#define GF_T(T_)                                                                                   \
    if (W == GF_DECODE_WIDE)                                                                       \
        gf_tile(T_, w, GF_DECODE_WIDE, x, 0, 1, K, ahead, out);                                    \
    else if (W == GF_DECODE_W)                                                                     \
        gf_tile(T_, w, GF_DECODE_W, x, 0, 1, K, ahead, out);                                       \
    else                                                                                           \
        gf_tile(T_, w, 1, x, 0, 1, K, ahead, out);
    if (t == QUANT_F16)
        GF_T(QUANT_F16)
    else
        GF_T(QUANT_BF16)
#undef GF_T
}

static __attribute__((noinline)) void gf_rows(uint32_t t, const uint16_t *const *w, int W,
                                              const float *x, size_t ldx, int R, int K,
                                              float *out)
{
#define GF_R(T_, W_)                                                                               \
    switch (R) {                                                                                   \
    case 1: gf_tile(T_, w, W_, x, ldx, 1, K, false, out); break;                                   \
    case 2: gf_tile(T_, w, W_, x, ldx, 2, K, false, out); break;                                   \
    case 3: gf_tile(T_, w, W_, x, ldx, GF_TILE_R < 3 ? GF_TILE_R : 3, K, false, out); break;       \
    case 4: gf_tile(T_, w, W_, x, ldx, GF_TILE_R < 4 ? GF_TILE_R : 4, K, false, out); break;       \
    case 5: gf_tile(T_, w, W_, x, ldx, GF_TILE_R < 5 ? GF_TILE_R : 5, K, false, out); break;       \
    default: gf_tile(T_, w, W_, x, ldx, GF_TILE_R, K, false, out); break;                          \
    }
    if (t == QUANT_F16) {
        if (W == GF_TILE_W)
            GF_R(QUANT_F16, GF_TILE_W)
        else
            GF_R(QUANT_F16, 1)
    } else {
        if (W == GF_TILE_W)
            GF_R(QUANT_BF16, GF_TILE_W)
        else
            GF_R(QUANT_BF16, 1)
    }
#undef GF_R
}

#if KS_BF16DP && !KS_AMX
/* BF16 rows on vdpbf16ps (the avx512bf16 set: kernels.h, gguf_bf16_rows). The activations are
 * the caller's bf16 rows (matmul_args.xb, rounded once per matmul by bf16_rows); one step of
 * 32 k is one 64-byte line of each weight row and of each activation row, and one vdpbf16ps per
 * (weight row, activation row): lane j adds k = 32b + 2j and 32b + 2j + 1. The K % 32 k left
 * are one more step over zero-filled copies (zero products add nothing). Then gf_hsum's tree.
 * No conversion: twice the multiply-adds of an fp32 FMA per instruction. */

/* One step of 32 k at k: W weight rows against R activation rows (ldx apart). */
static inline __attribute__((always_inline)) void
gd_step(const uint16_t *const *w, int W, const uint16_t *x, size_t ldx, int R,
        vf acc[][GF_TILE_R][GF_NV], size_t k)
{
    __m512bh wv[GF_MAX_W];
#pragma GCC unroll 8
    for (int i = 0; i < W; i++)
        wv[i] = (__m512bh)_mm512_loadu_si512((const void *)(w[i] + k));
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
        const __m512bh xv = (__m512bh)_mm512_loadu_si512((const void *)(x + (size_t)r * ldx + k));
#pragma GCC unroll 8
        for (int i = 0; i < W; i++)
            acc[i][r][0] = _mm512_dpbf16_ps(acc[i][r][0], wv[i], xv);
    }
}

/* gf_tile's shape on vdpbf16ps: output (i, r) into out[r * W + i]. */
static inline __attribute__((always_inline)) void
gd_tile(const uint16_t *const *w, int W, const uint16_t *x, size_t ldx, int R, int K, float *out)
{
    vf acc[GF_MAX_W][GF_TILE_R][GF_NV];      /* GF_NV = 1: AVX-512 */
#pragma GCC unroll 8
    for (int i = 0; i < W; i++)
#pragma GCC unroll 6
        for (int r = 0; r < R; r++)
            acc[i][r][0] = v_zero();
    int k = 0;
    for (; k + 32 <= K; k += 32)
        gd_step(w, W, x, ldx, R, acc, (size_t)k);
    if (k < K) {
        _Alignas(64) uint16_t wt[GF_MAX_W][32];
        _Alignas(64) uint16_t xt[GF_TILE_R][32];
        const uint16_t *wp[GF_MAX_W];
        gf_tail_weights(w, W, k, K, 32, &wt[0][0], wp);
        memset(xt, 0, sizeof xt);
        for (int r = 0; r < R; r++)
            memcpy(xt[r], x + (size_t)r * ldx + k, (size_t)(K - k) * sizeof(uint16_t));
        gd_step(wp, W, &xt[0][0], 32, R, acc, 0);
    }
    gf_tile_sums(acc, W, R, out);
}

static __attribute__((noinline)) void gd_decode(const uint16_t *const *w, int W, const uint16_t *x,
                                                int K, float *out)
{
    if (W == GF_DECODE_WIDE)
        gd_tile(w, GF_DECODE_WIDE, x, 0, 1, K, out);
    else if (W == GF_DECODE_W)
        gd_tile(w, GF_DECODE_W, x, 0, 1, K, out);
    else
        gd_tile(w, 1, x, 0, 1, K, out);
}

static __attribute__((noinline)) void gd_rows(const uint16_t *const *w, int W, const uint16_t *x,
                                              size_t ldx, int R, int K, float *out)
{
#define GD_R(W_)                                                                                   \
    switch (R) {                                                                                   \
    case 1: gd_tile(w, W_, x, ldx, 1, K, out); break;                                              \
    case 2: gd_tile(w, W_, x, ldx, 2, K, out); break;                                              \
    case 3: gd_tile(w, W_, x, ldx, 3, K, out); break;                                              \
    case 4: gd_tile(w, W_, x, ldx, 4, K, out); break;                                              \
    case 5: gd_tile(w, W_, x, ldx, 5, K, out); break;                                              \
    default: gd_tile(w, W_, x, ldx, GF_TILE_R, K, out); break;                                     \
    }
    if (W == GF_TILE_W)
        GD_R(GF_TILE_W)
    else
        GD_R(1)
#undef GD_R
}
#endif

static inline const uint16_t *gf_row(const packed_matrix *m, int n, uint32_t *t)
{
    return (const uint16_t *)packed_gguf_row(m, n, t);
}

/* W weight rows of type t against activation rows t0 .. t0 + R - 1: fp32 activations (gf_rows),
 * or, where the set multiplies a BF16 file's rows so, the caller's bf16 rows (gd_rows). */
static inline void gf_rows_any(const matmul_args *a, uint32_t t, const uint16_t *const *w, int W,
                               int t0, int R, float *y)
{
    const int K = a->w->K;
#if KS_BF16DP && !KS_AMX
    if (t == QUANT_BF16) {
        gd_rows(w, W, a->xb + (size_t)t0 * (size_t)a->ldxb, (size_t)a->ldxb, R, K, y);
        return;
    }
#endif
    gf_rows(t, w, W, a->x + (size_t)t0 * (size_t)a->ldx, (size_t)a->ldx, R, K, y);
}

/* The same for one activation row, W weight rows a pass (the decode's runs). */
static inline void gf_decode_any(const matmul_args *a, uint32_t t, const uint16_t *const *w,
                                 int W, bool ahead, float *y)
{
#if KS_BF16DP && !KS_AMX
    if (t == QUANT_BF16) {
        gd_decode(w, W, a->xb, a->w->K, y);
        return;
    }
#endif
    gf_decode(t, w, W, a->x, a->w->K, ahead, y);
}

/* gg_finish of a tile's outputs y[r * W + i] (row t0 + r, column n + i): a store or an add of
 * GF_TILE_W columns at once per row where the epilogue is one (the same adds), else one by one
 * (no i % R, i / R: a division each, a quarter of a BF16 tile's time). */
static inline void gf_finish_tile(const matmul_args *a, int t0, int R, int n, int W, const float *y)
{
#if KS_VW == 16 && GF_TILE_W == 4
    if (W == 4 && (a->epilogue == MM_STORE || a->epilogue == MM_ADD)) {
        const __m128 b = a->bias ? _mm_loadu_ps(a->bias + n) : _mm_setzero_ps();
        for (int r = 0; r < R; r++) {
            float *o = a->out + (size_t)(t0 + r) * (size_t)a->ldo + n;
            __m128 v = _mm_loadu_ps(y + (size_t)r * 4);
            if (a->bias)
                v = _mm_add_ps(v, b);
            _mm_storeu_ps(o, a->epilogue == MM_ADD ? _mm_add_ps(_mm_loadu_ps(o), v) : v);
        }
        return;
    }
#endif
    for (int r = 0; r < R; r++)
        for (int i = 0; i < W; i++)
            gg_finish(a, t0 + r, n + i, y[r * W + i]);
}

static void mm_gguf_f16(const matmul_args *a, int p0, int p1, float *scratch)
{
    (void)scratch;
    const packed_matrix *m = a->w;
    const int K = m->K;
    const int n0 = p0 * KERNELS_NR, n1 = p1 * KERNELS_NR < m->N ? p1 * KERNELS_NR : m->N;
    uint32_t t;
    if (a->T == 1) {
        /* W runs of consecutive rows side by side, row q of each a pass: each run is one
         * sequential stream through memory (as the packed GEMV's panels are), the passes' rows
         * are independent FMA chains; the rows left over one at a time */
        const int W = K >= GF_DECODE_WIDE_K ? GF_DECODE_WIDE : GF_DECODE_W;
        const int len = (n1 - n0) / W;
        const bool ahead = cpu_features_gemv_prefetch();
        const uint16_t *w[GF_MAX_W];
        float y[GF_MAX_W];
        for (int q = 0; q < len; q++) {
            for (int i = 0; i < W; i++)
                w[i] = gf_row(m, n0 + i * len + q, &t);
            gf_decode_any(a, t, w, W, ahead, y);
            for (int i = 0; i < W; i++)
                gg_finish(a, 0, n0 + i * len + q, y[i]);
        }
        for (int n = n0 + W * len; n < n1; n++) {
            w[0] = gf_row(m, n, &t);
            gf_decode_any(a, t, w, 1, ahead, y);
            gg_finish(a, 0, n, y[0]);
        }
        return;
    }
    /* a group of GF_TILE_R activation rows against each of the range's panels' rows in tiles of
     * GF_TILE_W, then the next group: a panel's rows (K * 64 bytes) stay in L2 meanwhile */
    for (int p = p0; p < p1; p++) {
        const int pn0 = p * KERNELS_NR;
        const int pn1 = pn0 + KERNELS_NR < m->N ? pn0 + KERNELS_NR : m->N;
        const uint16_t *rows[KERNELS_NR];      /* looked up once a panel, not once a group */
        for (int n = pn0; n < pn1; n++)
            rows[n - pn0] = gf_row(m, n, &t);
        for (int t0 = 0; t0 < a->T; t0 += GF_TILE_R) {
            const int R = a->T - t0 < GF_TILE_R ? a->T - t0 : GF_TILE_R;
            for (int n = pn0; n < pn1;) {
                float y[GF_TILE_W * GF_TILE_R];
                const int W = pn1 - n < GF_TILE_W ? 1 : GF_TILE_W;
                gf_rows_any(a, t, rows + (n - pn0), W, t0, R, y);
                gf_finish_tile(a, t0, R, n, W, y);
                n += W;
            }
        }
    }
}
