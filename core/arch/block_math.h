/* block_math.h: the scalar math of the blocks core/arch/ describes, written once for the CPU
 * backend and the CUDA backend (TT_HOSTDEV), so the twins compute the same formulas in the same
 * order. */
#ifndef TOKENTOP_BLOCK_MATH_H
#define TOKENTOP_BLOCK_MATH_H

#include <math.h>

#include "core/base/dtype.h"

#define GPT2_SQRT_2_OVER_PI 0.7978845608028654f
#define GPT2_GELU_COEF 0.044715f

/* GELU, tanh approximation ("gelu_new", what GPT-2 was trained with). */
TT_HOSTDEV static inline float gpt2_gelu_tanh(float x)
{
    float cube = GPT2_GELU_COEF * x * x * x;
    return 0.5f * x * (1.0f + tanhf(GPT2_SQRT_2_OVER_PI * (x + cube)));
}

/* GELU, exact ("gelu"): x * Phi(x). */
TT_HOSTDEV static inline float gpt2_gelu_erf(float x)
{
    return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
}

/* LayerNorm of one row, from its mean and reciprocal standard deviation (biased variance):
 * out = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps). */
TT_HOSTDEV static inline float gpt2_layernorm_rstd(float var, float eps)
{
    return 1.0f / sqrtf(var + eps);
}

TT_HOSTDEV static inline float gpt2_layernorm_apply(float x, float mean, float rstd, float w, float b)
{
    return (x - mean) * rstd * w + b;
}

/* RMSNorm of one row: out = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps) (Hugging Face's
 * LlamaRMSNorm in fp32). */
TT_HOSTDEV static inline float arch_rmsnorm_rstd(float mean_sq, float eps)
{
    return 1.0f / sqrtf(mean_sq + eps);
}

TT_HOSTDEV static inline float arch_rmsnorm_apply(float x, float rstd, float w)
{
    return x * rstd * w;
}

/* RoPE, rotate-half pairing: the pair (a, b) = (x[i], x[i + HS/2]) turned by the angle whose cosine
 * and sine are c and s; the new x[i] and x[i + HS/2]. */
TT_HOSTDEV static inline float arch_rope_first(float a, float b, float c, float s)
{
    return a * c - b * s;
}

TT_HOSTDEV static inline float arch_rope_second(float a, float b, float c, float s)
{
    return b * c + a * s;
}

/* SiLU: x * sigmoid(x) (the SwiGLU gate). */
TT_HOSTDEV static inline float arch_silu(float x)
{
    return x / (1.0f + expf(-x));
}

/* Attention scores are scaled by 1 / sqrt(HS). */
TT_HOSTDEV static inline float gpt2_attn_scale(int HS)
{
    return 1.0f / sqrtf((float)HS);
}

#endif
