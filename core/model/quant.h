/* quant.h: ggml's tensor types as GGUF files store them: names, block sizes, bytes per block, and
 * reference (portable C) dequantization of a row to fp32 for the types tokentop holds.
 *
 * A quantized row of n weights is n / block_size blocks laid end to end; a block holds its
 * scale(s) as fp16 and its quants packed (layouts in quant.c, as ggml-common.h defines them).
 * Block data is not aligned in general: every read goes through memcpy. */
#ifndef TOKENTOP_QUANT_H
#define TOKENTOP_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ggml_type values as they appear in GGUF tensor infos (ggml.h). The gaps (4, 5, 31-33, 36-38)
 * are types ggml removed; a file holding one of them is refused as an unknown type. */
typedef enum {
    QUANT_F32 = 0, QUANT_F16 = 1, QUANT_Q4_0 = 2, QUANT_Q4_1 = 3,
    QUANT_Q5_0 = 6, QUANT_Q5_1 = 7, QUANT_Q8_0 = 8, QUANT_Q8_1 = 9,
    QUANT_Q2_K = 10, QUANT_Q3_K = 11, QUANT_Q4_K = 12, QUANT_Q5_K = 13, QUANT_Q6_K = 14,
    QUANT_Q8_K = 15, QUANT_IQ2_XXS = 16, QUANT_IQ2_XS = 17, QUANT_IQ3_XXS = 18, QUANT_IQ1_S = 19,
    QUANT_IQ4_NL = 20, QUANT_IQ3_S = 21, QUANT_IQ2_S = 22, QUANT_IQ4_XS = 23,
    QUANT_I8 = 24, QUANT_I16 = 25, QUANT_I32 = 26, QUANT_I64 = 27, QUANT_F64 = 28,
    QUANT_IQ1_M = 29, QUANT_BF16 = 30, QUANT_TQ1_0 = 34, QUANT_TQ2_0 = 35, QUANT_MXFP4 = 39,
    QUANT_NVFP4 = 40, QUANT_Q1_0 = 41, QUANT_Q2_0 = 42,
    QUANT_TYPE_END = 43,
} quant_type;

/* Weights per block: 32 for the _0/_1 types, 256 (QK_K) for the K and IQ types, 1 for plain
 * numbers. */
#define QUANT_QK 32
#define QUANT_QK_K 256

/* Whether t is a type ggml defines (a value of the enum above, gaps excluded). */
bool quant_type_known(uint32_t t);

/* "F32", "Q4_K", "IQ2_XXS", ...; "?" for an unknown value. */
const char *quant_type_name(uint32_t t);

/* Weights per block and bytes per block of a known type; 0 for an unknown one. */
uint32_t quant_block_size(uint32_t t);
uint32_t quant_block_bytes(uint32_t t);

/* Whether tokentop reads t's data: F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q6_K. */
bool quant_type_supported(uint32_t t);

/* "F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q6_K", for messages refusing another type. */
const char *quant_supported_names(void);

/* Bytes of a row of n weights of type t into *out; false when t is unknown, n is not a multiple
 * of its block size, or the size overflows. */
bool quant_row_bytes(uint32_t t, uint64_t n, uint64_t *out);

/* Dequantizes a row of n weights of supported type t at src (any alignment) into dst[0..n), as
 * ggml's dequantize_row_* do. n must be a multiple of quant_block_size(t); returns false (dst
 * untouched) for an unsupported type or a bad n. */
bool quant_dequantize_row(uint32_t t, const void *src, float *dst, uint64_t n);

/* Checks the fp16 scales (d, and dmin for Q4_K) of every block of a row of n weights of type t:
 * returns the index of the first block whose scale is NaN or infinite, or -1 when all are finite
 * (and for F32, F16, BF16, which have no scales). *which, when not NULL, is set to "d" or "dmin". */
int64_t quant_row_bad_scale(uint32_t t, const void *src, uint64_t n, const char **which);

/* llama_ftype (general.file_type) as llama.cpp names it: 0 "F32", 1 "F16", 2 "Q4_0", 7 "Q8_0",
 * 15 "Q4_K_M", 32 "BF16", ... (up to 41 "Q2_0", llama.cpp of 2026); NULL for a value it does not define. The 1024 bit (guessed) is
 * ignored. */
const char *quant_ftype_name(uint32_t ftype);

/* Sub-block s (0..7) of a Q4_K block: its 6-bit scale and min, packed in 12 bytes: sub-blocks
 * 0-3 keep theirs in the low six bits of bytes s and s+4; 4-7 put their low four bits in byte
 * s+4 (scale low nibble, min high nibble) and their top two in the spare high bits of bytes s-4
 * (scale) and s (min). */
static inline void quant_q4_k_scale_min(const uint8_t *scales, int s, int *sc, int *m)
{
    if (s < 4) {
        *sc = scales[s] & 63;
        *m = scales[s + 4] & 63;
    } else {
        *sc = (scales[s + 4] & 15) | ((scales[s - 4] >> 6) << 4);
        *m = (scales[s + 4] >> 4) | ((scales[s] >> 6) << 4);
    }
}

#endif
