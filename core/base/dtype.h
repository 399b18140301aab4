/* dtype.h: the weight precisions tokentop holds (F32, F16, BF16, Q8, GGUF blocks as stored) and exact
 * scalar conversions.
 * Header-only and usable from CUDA device code (TT_HOSTDEV), so the CPU and GPU backends round the
 * same way: float -> half/bfloat16 rounds to nearest, ties to even, like PyTorch's .half()/.bfloat16(). */
#ifndef TOKENTOP_DTYPE_H
#define TOKENTOP_DTYPE_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define TT_HOSTDEV __host__ __device__
#else
#define TT_HOSTDEV
#endif

/* TT_Q8 exists only in memory, for the CPU engine's weight matrices: 8-bit integers with one fp16
 * scale per block of TT_Q8_BLOCK weights along K (llama.cpp's Q8_0, 8.5 bits per weight), made
 * at load from an F32/F16/BF16 file (kernels.h holds the layout). It is never a file's dtype and
 * tt_load_f32/tt_store_f32 do not read or write it. */
/* TT_GGUF is the CPU engine's weight matrices held as a GGUF file stores them: each matrix in its
 * tensors' own ggml block type (Q8_0, Q4_0, Q5_0, Q4_K, Q6_K; one model may mix them), read in
 * place from the file's mapping (kernels.h); the vectors stay fp32. It is the default of a
 * quantized GGUF file, never a tensor's dtype, and tt_load_f32/tt_store_f32 do not read it. */
typedef enum { TT_F32 = 0, TT_F16 = 1, TT_BF16 = 2, TT_Q8 = 3, TT_GGUF = 4 } tt_dtype;

#define TT_Q8_BLOCK 32

/* "fp32", "fp16", "bf16", "q8", "gguf" (the spellings --dtype accepts). */
static inline const char *tt_dtype_name(tt_dtype d)
{
    return d == TT_F32 ? "fp32" : d == TT_F16 ? "fp16" : d == TT_BF16 ? "bf16" : d == TT_Q8 ? "q8"
           : d == TT_GGUF ? "gguf" : "?";
}

/* Bytes of one element: for TT_Q8 the integer alone (its block scales come on top); for TT_GGUF,
 * whose types differ, 1 (a rough figure: 4.5 to 8.5 bits). */
static inline size_t tt_dtype_size(tt_dtype d)
{
    return d == TT_F32 ? 4 : d == TT_Q8 || d == TT_GGUF ? 1 : 2;
}

/* Whether d can be a tensor's dtype in a file (F32, F16, BF16; not Q8). */
static inline int tt_dtype_is_file_type(tt_dtype d)
{
    return d == TT_F32 || d == TT_F16 || d == TT_BF16;
}

/* Parses "fp32|f32|float32", "fp16|f16|float16|half", "bf16|bfloat16", "q8|q8_0", "gguf" (held as
 * the file stores them); returns 0 on success. */
static inline int tt_dtype_parse(const char *s, tt_dtype *out)
{
    static const struct { const char *name; tt_dtype d; } names[] = {
        {"fp32", TT_F32}, {"f32", TT_F32}, {"float32", TT_F32},
        {"fp16", TT_F16}, {"f16", TT_F16}, {"float16", TT_F16}, {"half", TT_F16},
        {"bf16", TT_BF16}, {"bfloat16", TT_BF16}, {"q8", TT_Q8}, {"q8_0", TT_Q8},
        {"gguf", TT_GGUF},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) { *out = names[i].d; return 0; }
    return -1;
}

TT_HOSTDEV static inline uint32_t tt_f32_bits(float f) { uint32_t x; memcpy(&x, &f, 4); return x; }
TT_HOSTDEV static inline float tt_bits_f32(uint32_t x) { float f; memcpy(&f, &x, 4); return f; }

TT_HOSTDEV static inline float tt_bf16_to_f32(uint16_t h) { return tt_bits_f32((uint32_t)h << 16); }

TT_HOSTDEV static inline uint16_t tt_f32_to_bf16(float f)
{
    uint32_t x = tt_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)          /* NaN: keep it a quiet NaN */
        return (uint16_t)((x >> 16) | 0x0040u);
    x += 0x7fffu + ((x >> 16) & 1u);               /* round to nearest, ties to even */
    return (uint16_t)(x >> 16);
}

TT_HOSTDEV static inline float tt_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {                                  /* zero or subnormal: m * 2^-24 */
        float f = (float)m * 5.9604644775390625e-08f;
        return tt_bits_f32(tt_f32_bits(f) | sign);
    }
    if (e == 31)                                   /* inf or NaN */
        return tt_bits_f32(sign | 0x7f800000u | (m << 13));
    return tt_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

TT_HOSTDEV static inline uint16_t tt_f32_to_f16(float f)
{
    uint32_t x = tt_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)                         /* inf, NaN */
        return (uint16_t)(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (ax >= 0x477ff000u)                         /* >= 65520 rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) {                        /* below 2^-14: a half subnormal (or zero) */
        uint32_t e = ax >> 23;
        if (e < 102)                               /* below 2^-25: rounds to zero */
            return (uint16_t)sign;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e;                  /* 14..24 */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1u)))
            r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = (ax >> 13) - (112u << 10);        /* rebias the exponent from 127 to 15 */
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u)))
        r++;
    return (uint16_t)(sign | r);
}

/* v as a weight held in d reads back: rounded through F16 or BF16 (to nearest even), unchanged
 * for F32, Q8 and GGUF (whose vectors stay fp32). */
TT_HOSTDEV static inline float tt_held_f32(tt_dtype d, float v)
{
    if (d == TT_F16)
        return tt_f16_to_f32(tt_f32_to_f16(v));
    if (d == TT_BF16)
        return tt_bf16_to_f32(tt_f32_to_bf16(v));
    return v;
}

/* Reads element i of a buffer of dtype d as float. */
TT_HOSTDEV static inline float tt_load_f32(const void *p, tt_dtype d, size_t i)
{
    if (d == TT_F32) return ((const float *)p)[i];
    if (d == TT_F16) return tt_f16_to_f32(((const uint16_t *)p)[i]);
    return tt_bf16_to_f32(((const uint16_t *)p)[i]);
}

/* Writes v as element i of a buffer of dtype d (rounding to nearest even). */
TT_HOSTDEV static inline void tt_store_f32(void *p, tt_dtype d, size_t i, float v)
{
    if (d == TT_F32) ((float *)p)[i] = v;
    else if (d == TT_F16) ((uint16_t *)p)[i] = tt_f32_to_f16(v);
    else ((uint16_t *)p)[i] = tt_f32_to_bf16(v);
}

#endif
