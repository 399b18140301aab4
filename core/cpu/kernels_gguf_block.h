/* kernels_gguf_block.h: one block of 32 weights of a GGUF row as w[k] = D * q[k] + M (kernels.h,
 * TT_GGUF), in scalar C: the scales every kernel set computes with (the same floats in every
 * set) and the reference set's integers. The layouts are quant.c's (ggml-common.h's blocks):
 *   Q8_0  (34 bytes / 32):  D = d, q = qs, M = 0
 *   Q4_0  (18 / 32):        D = d, q = nibble - 8 (low nibbles k < 16, high ones k >= 16), M = 0
 *   Q5_0  (22 / 32):        as Q4_0 with bit k of qh as the fifth bit, q = value - 16
 *   Q4_K  (144 / 256):      sub-block s = b % 8 of super-block b / 8: D = d * sc, M = -dmin * m,
 *                           q = the nibbles of qs[32 (s / 2) ..] (low for even s, high for odd)
 *   Q6_K  (210 / 256):      sub-block s: half h = s / 4, j = s % 4; weights 32 j + l (l < 32) of
 *                           the half: low or high nibble (j >= 2) of ql[64 h + 32 (j & 1) + l],
 *                           bits 2j, 2j+1 of qh[32 h + l]; q = that - 32; D_lo = d * sc[8 h + 2 j],
 *                           D_hi = d * sc[8 h + 2 j + 1] (l >= 16), M = 0. */
#ifndef TOKENTOP_KERNELS_GGUF_BLOCK_H
#define TOKENTOP_KERNELS_GGUF_BLOCK_H

#include <stdint.h>
#include <string.h>

#include "core/base/dtype.h"
#include "core/model/quant.h"

static inline float gguf_f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return tt_f16_to_f32(h);
}

/* Block b of a row of type t at row: its bytes (for Q4_K and Q6_K the super-block's) in *blk and
 * its D_lo, D_hi, M. */
static inline const uint8_t *gguf_block_scales(uint32_t t, const uint8_t *row, int b, float *D_lo,
                                               float *D_hi, float *M)
{
    const uint8_t *blk;
    float d;
    *M = 0.0f;
    switch (t) {
    case QUANT_Q8_0: blk = row + (size_t)b * 34; d = gguf_f16(blk); break;
    case QUANT_Q4_0: blk = row + (size_t)b * 18; d = gguf_f16(blk); break;
    case QUANT_Q5_0: blk = row + (size_t)b * 22; d = gguf_f16(blk); break;
    case QUANT_Q4_K: {
        blk = row + (size_t)(b / 8) * 144;
        const int s = b % 8;
        int scale, min;
        quant_q4_k_scale_min(blk + 4, s, &scale, &min);
        *D_lo = *D_hi = gguf_f16(blk) * (float)scale;
        *M = -(gguf_f16(blk + 2) * (float)min);
        return blk;
    }
    default: {                                   /* QUANT_Q6_K */
        blk = row + (size_t)(b / 8) * 210;
        const int s = b % 8, h = s / 4, j = s % 4;
        const int8_t *sc = (const int8_t *)(blk + 192) + 8 * h + 2 * j;
        d = gguf_f16(blk + 208);
        *D_lo = d * (float)sc[0];
        *D_hi = d * (float)sc[1];
        return blk;
    }
    }
    *D_lo = *D_hi = d;
    return blk;
}

/* The integers q[0 .. 32) of block b. */
static inline void gguf_block_ints(uint32_t t, const uint8_t *blk, int b, int8_t q[32])
{
    switch (t) {
    case QUANT_Q8_0: memcpy(q, blk + 2, 32); return;
    case QUANT_Q4_0:
        for (int k = 0; k < 16; k++) {
            q[k] = (int8_t)((blk[2 + k] & 15) - 8);
            q[k + 16] = (int8_t)((blk[2 + k] >> 4) - 8);
        }
        return;
    case QUANT_Q5_0: {
        uint32_t qh;
        memcpy(&qh, blk + 2, 4);
        for (int k = 0; k < 16; k++) {
            q[k] = (int8_t)(((blk[6 + k] & 15) | (((qh >> k) & 1u) << 4)) - 16);
            q[k + 16] = (int8_t)(((blk[6 + k] >> 4) | (((qh >> (k + 16)) & 1u) << 4)) - 16);
        }
        return;
    }
    case QUANT_Q4_K: {
        const int s = b % 8;
        const uint8_t *qs = blk + 16 + 32 * (s / 2);
        for (int k = 0; k < 32; k++)
            q[k] = (int8_t)(s % 2 ? qs[k] >> 4 : qs[k] & 15);
        return;
    }
    default: {                                   /* QUANT_Q6_K */
        const int s = b % 8, h = s / 4, j = s % 4;
        const uint8_t *ql = blk + 64 * h + 32 * (j & 1), *qh = blk + 128 + 32 * h;
        for (int k = 0; k < 32; k++) {
            int lo = j >= 2 ? ql[k] >> 4 : ql[k] & 15;
            q[k] = (int8_t)((lo | (((qh[k] >> (2 * j)) & 3) << 4)) - 32);
        }
        return;
    }
    }
}

static inline void gguf_block_scalar(uint32_t t, const uint8_t *row, int b, int8_t q[32],
                                     float *D_lo, float *D_hi, float *M)
{
    gguf_block_ints(t, gguf_block_scales(t, row, b, D_lo, D_hi, M), b, q);
}

/* A regrouped group (kernels.h, KERNELS_GGUF_GROUP): the 16 rows' super-blocks s = 0 .. SB-1 in
 * one run of 16 * row_bytes (gguf_group_stride apart), lane i (4 bytes at 4 i of each 64-byte vector) holding row i:
 *   Q4_K: super-block s at 2304 s: d[16] and dmin[16] (fp16), the 12 scale bytes as three
 *     64-byte vectors of their words 0, 1, 2, then vector 8 p + c (p < 4, c < 8) =
 *     qs[32 p + 4 c ..] (low nibbles: sub-block 2 p, high: 2 p + 1, weights 4 c .. 4 c + 3)
 *   Q6_K: super-block s's weights at 3072 s, in the order the kernels read them: for h < 2, c < 8,
 *     vectors 3 (8 h + c) .. + 2 = ql[64 h + 4 c ..] (low nibbles: sub-block 4 h, high: 4 h + 2,
 *     weights 4 c ..), ql[64 h + 32 + 4 c ..] (4 h + 1, 4 h + 3), qh[32 h + 4 c ..] (bits 2 e,
 *     2 e + 1: sub-block 4 h + e); its scales (288 bytes: d[16] (fp16), then scale x (x < 16)
 *     of the 16 rows as 16 bytes) beside them, super-blocks paired (gguf_gq6_at) so that the
 *     group is one sequential stream and every vector 64-byte aligned
 * The same bytes as the rows' super-blocks, rearranged. */
#define GGUF_GQ4_SB 2304
#define GGUF_GQ4_DMIN 32
#define GGUF_GQ4_SC 64
#define GGUF_GQ4_QS 256
#define GGUF_GQ6_SB 3072
#define GGUF_GQ6_SCALES 288
#define GGUF_GQ6_SC 32

/* Where super-block s of a Q6_K group of SB lies: pairs s = 2 p, 2 p + 1 at 6720 p as both
 * scales then both weights; a last one alone (SB odd) as weights then scales. */
static inline void gguf_gq6_at(size_t SB, size_t s, size_t *weights, size_t *scales)
{
    const size_t pair = 2 * (GGUF_GQ6_SB + GGUF_GQ6_SCALES) * (s / 2);
    if (s + 1 == SB && SB % 2) {
        *weights = pair;
        *scales = pair + GGUF_GQ6_SB;
    } else {
        *weights = pair + 2 * GGUF_GQ6_SCALES + GGUF_GQ6_SB * (s % 2);
        *scales = pair + GGUF_GQ6_SCALES * (s % 2);
    }
}

/* A regrouped Q4_0 or Q5_0 group: block b's 16 rows as d[16] (fp16, 32 bytes); Q5_0's qh as 8
 * 64-bit words, word n's nibble i = row i's qh nibble n (the fifth bits of weights 4 n ..
 * 4 n + 3), so that a word is a byte mask over the qs vector holding those weights; then qs as
 * 4 64-byte vectors, vector c's lane i = row i's qs[4 c .. 4 c + 3] (low nibbles: weights 4 c ..,
 * high: 16 + 4 c ..). Blocks paired, as both d, both qh, both qs, so that every qh and qs lies
 * 64-byte aligned; a last block alone (KB odd) as d, qh, qs. The same bits as the rows' blocks,
 * rearranged. */
#define GGUF_GQ0_D 32
#define GGUF_GQ0_QS 256

/* The bytes of one block of a Q4_0 or Q5_0 group (16 rows): d, qh (Q5_0) and qs. */
static inline size_t gguf_gq0_block_bytes(uint32_t t)
{
    return GGUF_GQ0_D + (t == QUANT_Q5_0 ? 64 : 0) + GGUF_GQ0_QS;
}

/* Where block b of a Q4_0 or Q5_0 group of KB blocks lies: its d, qh (Q5_0) and qs. */
static inline void gguf_gq0_at(uint32_t t, size_t KB, size_t b, size_t *d, size_t *qh, size_t *qs)
{
    const size_t qhb = t == QUANT_Q5_0 ? 64 : 0;
    const size_t pair = 2 * gguf_gq0_block_bytes(t) * (b / 2);
    if (b + 1 == KB && KB % 2) {
        *d = pair;
        *qh = pair + GGUF_GQ0_D;
        *qs = pair + GGUF_GQ0_D + qhb;
    } else {
        *d = pair + GGUF_GQ0_D * (b % 2);
        *qh = pair + 2 * GGUF_GQ0_D + qhb * (b % 2);
        *qs = pair + 2 * (GGUF_GQ0_D + qhb) + GGUF_GQ0_QS * (b % 2);
    }
}

/* Row i's block b (the file's 18 or 22 bytes) of the Q4_0 or Q5_0 group grp of KB blocks, into
 * blk. */
static inline void gguf_gq0_get(uint32_t t, const uint8_t *grp, size_t KB, size_t b, int i,
                                uint8_t *blk)
{
    size_t od, oh, oq;
    gguf_gq0_at(t, KB, b, &od, &oh, &oq);
    const int q0 = t == QUANT_Q5_0 ? 6 : 2;
    memcpy(blk, grp + od + 2 * i, 2);
    for (int c = 0; c < 4; c++)
        memcpy(blk + q0 + 4 * c, grp + oq + 64 * c + 4 * i, 4);
    if (t != QUANT_Q5_0)
        return;
    uint32_t qh = 0;
    for (int n = 0; n < 8; n++) {
        uint64_t w;
        memcpy(&w, grp + oh + 8 * n, 8);
        qh |= (uint32_t)((w >> (4 * i)) & 15) << (4 * n);
    }
    memcpy(blk + 2, &qh, 4);
}

/* Block b of the 16 rows (blk[i]: row i's block as the file has it) into the group: written a
 * block at a time, as a Q5_0 block's 8 qh words each hold a nibble of every row (built in
 * registers and stored once; a row at a time rewrote all 8 for each row). */
static inline void gguf_gq0_put(uint32_t t, uint8_t *grp, size_t KB, size_t b,
                                const uint8_t *const blk[16])
{
    size_t od, oh, oq;
    gguf_gq0_at(t, KB, b, &od, &oh, &oq);
    const int q0 = t == QUANT_Q5_0 ? 6 : 2;
    uint64_t words[8] = {0};
    for (int i = 0; i < 16; i++) {
        memcpy(grp + od + 2 * i, blk[i], 2);
        for (int c = 0; c < 4; c++)
            memcpy(grp + oq + 64 * c + 4 * i, blk[i] + q0 + 4 * c, 4);
        if (t == QUANT_Q5_0) {
            uint32_t qh;
            memcpy(&qh, blk[i] + 2, 4);
            for (int n = 0; n < 8; n++)
                words[n] |= (uint64_t)((qh >> (4 * n)) & 15) << (4 * i);
        }
    }
    if (t == QUANT_Q5_0)
        memcpy(grp + oh, words, sizeof words);
}

/* The bytes of the unit a group interleaves: a super-block (Q4_K, Q6_K) or a block (Q4_0,
 * Q5_0). */
static inline size_t gguf_group_unit_bytes(uint32_t t)
{
    return t == QUANT_Q4_K ? 144 : t == QUANT_Q6_K ? 210 : t == QUANT_Q5_0 ? 22 : 18;
}

/* The weights of that unit: 256 (Q4_K, Q6_K) or 32 (Q4_0, Q5_0). */
static inline size_t gguf_group_unit_weights(uint32_t t)
{
    return t == QUANT_Q4_K || t == QUANT_Q6_K ? 256 : 32;
}

/* Bytes from one group to the next: 16 rows' bytes, rounded up to 64 (a Q6_K row of an odd
 * number of super-blocks leaves 32). */
static inline size_t gguf_group_stride(size_t row_bytes)
{
    return (16 * row_bytes + 63) / 64 * 64;
}

/* Row i's super-block s (the file's bytes, 144 or 210; Q4_0 and Q5_0: block s, 18 or 22) of the
 * regrouped group grp of SB super-blocks into sb (dir > 0), or sb into the group (dir < 0: Q4_K
 * and Q6_K; a Q4_0 or Q5_0 group is written a block of its 16 rows at a time, gguf_gq0_put). */
static inline void gguf_group_copy(uint32_t t, uint8_t *grp, size_t SB, size_t s, int i,
                                   uint8_t *sb, int dir)
{
    if (t == QUANT_Q4_0 || t == QUANT_Q5_0) {
        gguf_gq0_get(t, grp, SB, s, i, sb);
        return;
    }
#define GG_MV(dst, src, n) (dir > 0 ? memcpy(sb + (dst), g + (src), n) : memcpy(g + (src), sb + (dst), n))
    if (t == QUANT_Q4_K) {
        uint8_t *g = grp + s * GGUF_GQ4_SB;
        GG_MV(0, 2 * i, 2);
        GG_MV(2, GGUF_GQ4_DMIN + 2 * i, 2);
        for (int w = 0; w < 3; w++)
            GG_MV(4 + 4 * w, GGUF_GQ4_SC + 64 * w + 4 * i, 4);
        for (int v = 0; v < 32; v++)
            GG_MV(16 + 4 * v, GGUF_GQ4_QS + 64 * v + 4 * i, 4);
    } else {
        size_t wo, so;
        gguf_gq6_at(SB, s, &wo, &so);
        uint8_t *g = grp + wo;
        for (int v = 0; v < 32; v++)        /* ql[64 h + 4 c ..]: h = v / 16, c = v % 16 */
            GG_MV(4 * v, 64 * (3 * (v / 16 * 8 + v % 8) + v % 16 / 8) + 4 * i, 4);
        for (int v = 0; v < 16; v++)        /* qh[32 h + 4 c ..]: h = v / 8, c = v % 8 */
            GG_MV(128 + 4 * v, 64 * (3 * v + 2) + 4 * i, 4);
        g = grp + so;
        GG_MV(208, 2 * i, 2);
        for (int x = 0; x < 16; x++)
            GG_MV(192 + x, GGUF_GQ6_SC + 16 * x + i, 1);
    }
#undef GG_MV
}

#endif
