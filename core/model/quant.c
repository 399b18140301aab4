/* quant.c: ggml's tensor type table and reference dequantization (the layouts of ggml-common.h,
 * the arithmetic of ggml-quants.c's dequantize_row_*; written from the format, scalar C only).
 *
 * Block layouts of the types read here (little-endian, packed, d = fp16 scale):
 *   Q8_0 (32 weights, 34 bytes):  d, int8 qs[32];              x[j] = d * qs[j]
 *   Q4_0 (32, 18):                d, uint8 qs[16];             x[j] = d * ((qs[j] & 15) - 8),
 *                                                              x[j+16] = d * ((qs[j] >> 4) - 8)
 *   Q5_0 (32, 22):                d, uint32 qh, uint8 qs[16];  as Q4_0 with a fifth bit from qh
 *                                 (bit j for x[j], bit j+16 for x[j+16]) and an offset of 16
 *   Q4_K (256, 144):              d, dmin, uint8 scales[12], uint8 qs[128]; eight sub-blocks of
 *                                 32 with a 6-bit scale sc and min m each:
 *                                 x = d * sc * q - dmin * m, q a nibble
 *   Q6_K (256, 210):              uint8 ql[128], uint8 qh[64], int8 scales[16], d; sixteen
 *                                 sub-blocks of 16: x = d * scales[s] * (q - 32), q six bits
 *                                 (four low ones in ql, two high ones in qh) */
#include "core/model/quant.h"

#include <math.h>
#include <string.h>

#include "core/base/dtype.h"

/* ---------------------------------------------------------------------------------------------
 * The type table (block sizes and bytes: ggml-common.h's block_* structs) */

static const struct {
    const char *name;
    uint32_t block, bytes;
    bool supported;
} quant_types[QUANT_TYPE_END] = {
    [QUANT_F32] = {"F32", 1, 4, true},          [QUANT_F16] = {"F16", 1, 2, true},
    [QUANT_Q4_0] = {"Q4_0", 32, 18, true},      [QUANT_Q4_1] = {"Q4_1", 32, 20, false},
    [QUANT_Q5_0] = {"Q5_0", 32, 22, true},      [QUANT_Q5_1] = {"Q5_1", 32, 24, false},
    [QUANT_Q8_0] = {"Q8_0", 32, 34, true},      [QUANT_Q8_1] = {"Q8_1", 32, 36, false},
    [QUANT_Q2_K] = {"Q2_K", 256, 84, false},    [QUANT_Q3_K] = {"Q3_K", 256, 110, false},
    [QUANT_Q4_K] = {"Q4_K", 256, 144, true},    [QUANT_Q5_K] = {"Q5_K", 256, 176, false},
    [QUANT_Q6_K] = {"Q6_K", 256, 210, true},    [QUANT_Q8_K] = {"Q8_K", 256, 292, false},
    [QUANT_IQ2_XXS] = {"IQ2_XXS", 256, 66, false}, [QUANT_IQ2_XS] = {"IQ2_XS", 256, 74, false},
    [QUANT_IQ3_XXS] = {"IQ3_XXS", 256, 98, false}, [QUANT_IQ1_S] = {"IQ1_S", 256, 50, false},
    [QUANT_IQ4_NL] = {"IQ4_NL", 32, 18, false}, [QUANT_IQ3_S] = {"IQ3_S", 256, 110, false},
    [QUANT_IQ2_S] = {"IQ2_S", 256, 82, false},  [QUANT_IQ4_XS] = {"IQ4_XS", 256, 136, false},
    [QUANT_I8] = {"I8", 1, 1, false},           [QUANT_I16] = {"I16", 1, 2, false},
    [QUANT_I32] = {"I32", 1, 4, false},         [QUANT_I64] = {"I64", 1, 8, false},
    [QUANT_F64] = {"F64", 1, 8, false},         [QUANT_IQ1_M] = {"IQ1_M", 256, 56, false},
    [QUANT_BF16] = {"BF16", 1, 2, true},        [QUANT_TQ1_0] = {"TQ1_0", 256, 54, false},
    [QUANT_TQ2_0] = {"TQ2_0", 256, 66, false},  [QUANT_MXFP4] = {"MXFP4", 32, 17, false},
    [QUANT_NVFP4] = {"NVFP4", 64, 36, false},   [QUANT_Q1_0] = {"Q1_0", 128, 18, false},
    [QUANT_Q2_0] = {"Q2_0", 64, 18, false},
};

bool quant_type_known(uint32_t t)
{
    return t < QUANT_TYPE_END && quant_types[t].name != NULL;
}

const char *quant_type_name(uint32_t t)
{
    return quant_type_known(t) ? quant_types[t].name : "?";
}

uint32_t quant_block_size(uint32_t t)
{
    return quant_type_known(t) ? quant_types[t].block : 0;
}

uint32_t quant_block_bytes(uint32_t t)
{
    return quant_type_known(t) ? quant_types[t].bytes : 0;
}

bool quant_type_supported(uint32_t t)
{
    return quant_type_known(t) && quant_types[t].supported;
}

const char *quant_supported_names(void)
{
    return "F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q6_K";
}

bool quant_row_bytes(uint32_t t, uint64_t n, uint64_t *out)
{
    uint32_t blk = quant_block_size(t);
    if (blk == 0 || n % blk != 0)
        return false;
    uint64_t blocks = n / blk, bytes = quant_types[t].bytes;
    if (blocks > UINT64_MAX / bytes)
        return false;
    *out = blocks * bytes;
    return true;
}

const char *quant_ftype_name(uint32_t ftype)
{
    static const char *const names[] = {
        [0] = "F32",      [1] = "F16",      [2] = "Q4_0",     [3] = "Q4_1",
        [4] = "Q4_1_SOME_F16", [7] = "Q8_0", [8] = "Q5_0",    [9] = "Q5_1",
        [10] = "Q2_K",    [11] = "Q3_K_S",  [12] = "Q3_K_M",  [13] = "Q3_K_L",
        [14] = "Q4_K_S",  [15] = "Q4_K_M",  [16] = "Q5_K_S",  [17] = "Q5_K_M",
        [18] = "Q6_K",    [19] = "IQ2_XXS", [20] = "IQ2_XS",  [21] = "Q2_K_S",
        [22] = "IQ3_XS",  [23] = "IQ3_XXS", [24] = "IQ1_S",   [25] = "IQ4_NL",
        [26] = "IQ3_S",   [27] = "IQ3_M",   [28] = "IQ2_S",   [29] = "IQ2_M",
        [30] = "IQ4_XS",  [31] = "IQ1_M",   [32] = "BF16",    [36] = "TQ1_0",
        [37] = "TQ2_0",   [38] = "MXFP4_MOE", [39] = "NVFP4",   [40] = "Q1_0",
        [41] = "Q2_0",
    };
    ftype &= ~1024u;                    /* LLAMA_FTYPE_GUESSED */
    return ftype < sizeof names / sizeof names[0] ? names[ftype] : NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Dequantization */

static float load_f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return tt_f16_to_f32(h);
}

static void dequant_q8_0(const uint8_t *b, float *y)
{
    float d = load_f16(b);
    for (int j = 0; j < 32; j++)
        y[j] = d * (float)(int8_t)b[2 + j];
}

static void dequant_q4_0(const uint8_t *b, float *y)
{
    float d = load_f16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((qs[j] & 15) - 8);
        y[j + 16] = d * (float)((qs[j] >> 4) - 8);
    }
}

static void dequant_q5_0(const uint8_t *b, float *y)
{
    float d = load_f16(b);
    uint32_t qh;
    memcpy(&qh, b + 2, 4);
    const uint8_t *qs = b + 6;
    for (int j = 0; j < 16; j++) {
        int lo = (qs[j] & 15) | (int)(((qh >> j) & 1u) << 4);
        int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
        y[j] = d * (float)(lo - 16);
        y[j + 16] = d * (float)(hi - 16);
    }
}

static void dequant_q4_k(const uint8_t *b, float *y)
{
    float d = load_f16(b), dmin = load_f16(b + 2);
    const uint8_t *scales = b + 4, *qs = b + 16;
    /* Four groups of 32 bytes; each holds sub-block 2g in its low nibbles, 2g+1 in its high. */
    for (int g = 0; g < 4; g++) {
        int sc0, m0, sc1, m1;
        quant_q4_k_scale_min(scales, 2 * g, &sc0, &m0);
        quant_q4_k_scale_min(scales, 2 * g + 1, &sc1, &m1);
        float d0 = d * (float)sc0, min0 = dmin * (float)m0;
        float d1 = d * (float)sc1, min1 = dmin * (float)m1;
        for (int l = 0; l < 32; l++) {
            y[64 * g + l] = d0 * (float)(qs[32 * g + l] & 15) - min0;
            y[64 * g + 32 + l] = d1 * (float)(qs[32 * g + l] >> 4) - min1;
        }
    }
}

static void dequant_q6_k(const uint8_t *b, float *y)
{
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = load_f16(b + 208);
    /* Two halves of 128 weights: ql[64 bytes], qh[32 bytes], scales[8] each. Within a half,
     * weight l + 32k (k = 0..3) takes the low or high nibble of ql[l] or ql[l+32] and bits 2k,
     * 2k+1 of qh[l]; sub-block (l / 16) + 2k of the half's scales. */
    for (int h = 0; h < 2; h++) {
        for (int l = 0; l < 32; l++) {
            int s = l / 16;
            int q0 = ((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32;
            int q1 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * (float)sc[s] * (float)q0;
            y[l + 32] = d * (float)sc[s + 2] * (float)q1;
            y[l + 64] = d * (float)sc[s + 4] * (float)q2;
            y[l + 96] = d * (float)sc[s + 6] * (float)q3;
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
    }
}

bool quant_dequantize_row(uint32_t t, const void *src, float *dst, uint64_t n)
{
    if (!quant_type_supported(t) || n % quant_types[t].block != 0)
        return false;
    const uint8_t *p = src;
    uint32_t blk = quant_types[t].block, bytes = quant_types[t].bytes;
    switch (t) {
    case QUANT_F32: memcpy(dst, p, n * sizeof(float)); return true;
    case QUANT_F16:
        for (uint64_t i = 0; i < n; i++)
            dst[i] = load_f16(p + 2 * i);
        return true;
    case QUANT_BF16:
        for (uint64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = tt_bf16_to_f32(h);
        }
        return true;
    default: break;
    }
    void (*block_fn)(const uint8_t *, float *) =
        t == QUANT_Q8_0 ? dequant_q8_0 : t == QUANT_Q4_0 ? dequant_q4_0 :
        t == QUANT_Q5_0 ? dequant_q5_0 : t == QUANT_Q4_K ? dequant_q4_k : dequant_q6_k;
    for (uint64_t i = 0; i < n / blk; i++)
        block_fn(p + i * bytes, dst + i * blk);
    return true;
}

int64_t quant_row_bad_scale(uint32_t t, const void *src, uint64_t n, const char **which)
{
    if (!quant_type_known(t) || n % quant_types[t].block != 0)
        return -1;
    size_t at;                          /* where d lies in the block; dmin follows for Q4_K */
    switch (t) {
    case QUANT_Q8_0: case QUANT_Q4_0: case QUANT_Q5_0: case QUANT_Q4_K: at = 0; break;
    case QUANT_Q6_K: at = 208; break;
    default: return -1;
    }
    const uint8_t *p = src;
    uint32_t bytes = quant_types[t].bytes;
    /* an fp16 is an infinity or a NaN when its exponent bits are all set: the bits alone, as
     * this pass touches every block of the file at load */
#define F16_NONFINITE(b) ((((b)[1] << 8) & 0x7c00) == 0x7c00)
    for (uint64_t i = 0; i < n / quant_types[t].block; i++) {
        const uint8_t *b = p + i * bytes + at;
        if (F16_NONFINITE(b)) {
            if (which)
                *which = "d";
            return (int64_t)i;
        }
        if (t == QUANT_Q4_K && F16_NONFINITE(b + 2)) {
            if (which)
                *which = "dmin";
            return (int64_t)i;
        }
    }
#undef F16_NONFINITE
    return -1;
}
