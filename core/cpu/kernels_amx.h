/* kernels_amx.h: the amx set's BF16 matmul and activation rounding, on AMX tiles (tdpbf16ps).
 * Included once, by core/cpu/kernels_simd.h when the including file (kernels_amx_avx512.c) defines
 * KS_AMX; uses that file's vector mappings (KS_VW 16) and its mm_finish.
 *
 * The packed BF16 panel (kernels.h: pair row kp holds k = 2kp and 2kp+1 of each of the 32 columns
 * side by side, 128 bytes) is already the layout tdpbf16ps takes for its B operand ("VNNI": pairs
 * of k interleaved): 16 pair rows of 16 columns are one B tile read at a stride of 128 bytes,
 * the panel's other 16 columns the tile 64 bytes on. The activations, rounded to bf16 once per
 * matmul by the caller (bf16_rows), are the A tiles: 16 rows x 32 k, read at the row stride.
 *
 * Tiles, for a block of up to 32 rows against one panel: 0 and 1 accumulate rows 0-15 (columns
 * 0-15, 16-31), 2 and 3 rows 16-31; 4 and 5 hold the two row halves' activations, 6 and 7 the two
 * column halves of the weights. Each step of 32 k loads 4 tiles and runs 4 tdpbf16ps.
 *
 * Batch invariance: a row's sums depend only on that row (tile rows are computed independently),
 * the tiles accumulate the same 32-k steps from zero in the same order however many rows the
 * block holds, the K % 32 tail is the same FMA chain, and the epilogue is mm_finish: one row
 * alone (decode, a 1-row tile) gives the bits it gets in a prefill block. */
#if KS_VW != 16
#error "core/cpu/kernels_amx.h is for the 16-lane set"
#endif

/* ldtilecfg's 64-byte operand (palette 1). */
typedef struct __attribute__((aligned(64))) {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_tilecfg;

/* GCC 12's tile intrinsics tell the compiler nothing of the memory they touch: _tile_loadconfig
 * names only the first 8 bytes of its operand (the rest of a configuration built on the stack
 * could be left unwritten) and _tile_stored no memory at all (a read of the stored sums could be
 * moved before it). So the configuration is loaded through an operand that covers all of it, and
 * amx_stored_barrier tells the compiler that memory at p has been written. */
static inline __attribute__((always_inline)) void amx_stored_barrier(void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

/* Configures the tiles for blocks of rows (1 .. 32). Up to 16 rows: tiles 0, 1 and 2, 3 accumulate
 * two panels side by side (amx_block_pair), 4 holds the activations, 5, 6, 7 weights. 17 to 32:
 * the first 16 rows in tiles 0, 1, 4, the rest in 2, 3, 5 (the file's comment). */
static void amx_configure(int rows)
{
    const bool two = rows > 16;
    const int m0 = two ? 16 : rows, m1 = rows - m0;
    amx_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++)
        cfg.colsb[i] = 64;                  /* 16 fp32, 32 bf16 activations, 16 columns x 2 bf16 */
    cfg.rows[0] = cfg.rows[1] = cfg.rows[4] = (uint8_t)m0;
    cfg.rows[2] = cfg.rows[3] = (uint8_t)(two ? m1 : m0);
    cfg.rows[5] = (uint8_t)(two ? m1 : 16);
    cfg.rows[6] = cfg.rows[7] = 16;         /* 16 pair rows: 32 k */
    __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}

/* Software prefetch distance, in bytes ahead, of blocks of a few rows, which stream the weights
 * (decode): each 32-k step of a panel reads 2 KiB, all of whose lines are prefetched, half a
 * step ahead; nearer or farther, and none, streamed slower on the Xeon measured
 * (docs/bench/2026-11-28-xeon.md). */
#ifndef AMX_PREFETCH
#define AMX_PREFETCH 1024
#endif

static inline __attribute__((always_inline)) void amx_prefetch_step(const uint16_t *b)
{
    const char *pf = (const char *)b + AMX_PREFETCH;
#pragma GCC unroll 32
    for (int l = 0; l < 32; l++)
        _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
}

/* The sums over the whole 32-k blocks of rows t0 .. (two: 17-32 rows, else 1-16) against one
 * panel, into c (row r's 32 columns at c[r]). */
static inline __attribute__((always_inline)) void
amx_block(const matmul_args *a, const uint16_t *panel, int t0, bool two, float (*c)[KERNELS_NR])
{
    const int KB = a->w->K / 32;
    const long xs = (long)a->ldxb * 2;       /* bytes between activation rows */
    const uint16_t *x = a->xb + (size_t)t0 * (size_t)a->ldxb;
    _tile_zero(0);
    _tile_zero(1);
    if (two) {
        _tile_zero(2);
        _tile_zero(3);
    }
    for (int kb = 0; kb < KB; kb++) {
        const uint16_t *b = panel + (size_t)kb * 16 * 2 * KERNELS_NR;
        if (!two)             /* a few rows (decode): the weights stream, as in the GEMV */
            amx_prefetch_step(b);
        _tile_loadd(6, b, 4 * KERNELS_NR);
        _tile_loadd(7, b + KERNELS_NR, 4 * KERNELS_NR);
        _tile_loadd(4, x + (size_t)kb * 32, xs);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        if (two) {
            _tile_loadd(5, x + (size_t)16 * (size_t)a->ldxb + (size_t)kb * 32, xs);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
    _tile_stored(0, &c[0][0], 4 * KERNELS_NR);
    _tile_stored(1, &c[0][16], 4 * KERNELS_NR);
    if (two) {
        _tile_stored(2, &c[16][0], 4 * KERNELS_NR);
        _tile_stored(3, &c[16][16], 4 * KERNELS_NR);
    }
    amx_stored_barrier(c);
}

/* Up to 16 rows (decode, verification) against panels p and q side by side: the steps of
 * amx_block for each, two panels' weights streaming at once and four accumulation chains in
 * flight instead of two. Tile 6 takes the second panel's upper half after the first's is used. */
static inline __attribute__((always_inline)) void
amx_block_pair(const matmul_args *a, const uint16_t *pp, const uint16_t *pq, int t0,
               float (*cp)[KERNELS_NR], float (*cq)[KERNELS_NR])
{
    const int KB = a->w->K / 32;
    const long xs = (long)a->ldxb * 2;
    const uint16_t *x = a->xb + (size_t)t0 * (size_t)a->ldxb;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int kb = 0; kb < KB; kb++) {
        const size_t off = (size_t)kb * 16 * 2 * KERNELS_NR;
        amx_prefetch_step(pp + off);
        amx_prefetch_step(pq + off);
        _tile_loadd(4, x + (size_t)kb * 32, xs);
        _tile_loadd(6, pp + off, 4 * KERNELS_NR);
        _tile_loadd(7, pp + off + KERNELS_NR, 4 * KERNELS_NR);
        _tile_loadd(5, pq + off, 4 * KERNELS_NR);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 4, 5);
        _tile_loadd(6, pq + off + KERNELS_NR, 4 * KERNELS_NR);
        _tile_dpbf16ps(3, 4, 6);
    }
    _tile_stored(0, &cp[0][0], 4 * KERNELS_NR);
    _tile_stored(1, &cp[0][16], 4 * KERNELS_NR);
    _tile_stored(2, &cq[0][0], 4 * KERNELS_NR);
    _tile_stored(3, &cq[0][16], 4 * KERNELS_NR);
    amx_stored_barrier(cp);
    amx_stored_barrier(cq);
}

/* Rows t0 .. t0+rows-1 of panel p from their block sums c: the K % 32 k left, one FMA each in k
 * order (bf16 products are exact in fp32, as in the tiles), then bias and epilogue (the erf GELU
 * over the stored rows, as kernels_simd.h's tiles do). */
static inline __attribute__((always_inline)) void
amx_finish(const matmul_args *a, const uint16_t *panel, int p, int t0, int rows,
           float (*c)[KERNELS_NR])
{
    const int K = a->w->K, k0 = K & ~31, n0 = p * KERNELS_NR;
    for (int r = 0; r < rows; r++) {
        vf c0 = v_load(c[r]), c1 = v_load(c[r] + KS_VW);
        const uint16_t *x = a->xb + (size_t)(t0 + r) * (size_t)a->ldxb;
        for (int k = k0; k < K; k += 2) {
            vf e0, o0, e1, o1;
            load_pair_group(panel, k / 2, 0, &e0, &o0, &e1, &o1);
            const vf xe = v_set1(tt_bf16_to_f32(x[k]));
            c0 = v_fma(xe, e0, c0);
            c1 = v_fma(xe, e1, c1);
            if (k + 1 < K) {
                const vf xo = v_set1(tt_bf16_to_f32(x[k + 1]));
                c0 = v_fma(xo, o0, c0);
                c1 = v_fma(xo, o1, c1);
            }
        }
        mm_finish(a, t0 + r, n0, c0);
        mm_finish(a, t0 + r, n0 + KS_VW, c1);
    }
    if (a->epilogue == MM_GELU_ERF)
        mm_finish_erf(a, t0, rows, n0, KERNELS_NR);
}

/* kernels.h's matmul for BF16 weights: blocks of 32 rows per panel, the last block shorter; the
 * tile configuration is loaded when the block height changes and released at the end, so a
 * thread holds no tile state between calls. */
static void amx_matmul_bf16(const matmul_args *a, int p0, int p1, float *scratch)
{
    (void)scratch;
    const packed_matrix *w = a->w;
    const bool tiles = w->K >= 32;
    float c[32][KERNELS_NR] __attribute__((aligned(64)));
    float cq[16][KERNELS_NR] __attribute__((aligned(64)));
    int configured = 0;                      /* the rows the loaded configuration is for */
    if (tiles && a->T <= 16) {               /* one block: panels in pairs */
        amx_configure(a->T);
        configured = a->T;
        int p = p0;
        for (; p + 2 <= p1; p += 2) {
            const uint16_t *pp = (const uint16_t *)w->data + (size_t)p * w->panel_elems;
            const uint16_t *pq = pp + w->panel_elems;
            amx_block_pair(a, pp, pq, 0, c, cq);
            amx_finish(a, pp, p, 0, a->T, c);
            amx_finish(a, pq, p + 1, 0, a->T, cq);
        }
        p0 = p;                              /* an odd panel left: below */
    }
    for (int p = p0; p < p1; p++) {
        const uint16_t *panel = (const uint16_t *)w->data + (size_t)p * w->panel_elems;
        for (int t = 0; t < a->T; t += 32) {
            const int rows = a->T - t < 32 ? a->T - t : 32;
            if (!tiles) {
                memset(c, 0, sizeof c);
            } else {
                if (rows != configured) {
                    amx_configure(rows);
                    configured = rows;
                }
                amx_block(a, panel, t, rows > 16, c);
            }
            amx_finish(a, panel, p, t, rows, c);
        }
    }
    if (configured)
        _tile_release();
}
