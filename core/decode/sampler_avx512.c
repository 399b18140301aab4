/* sampler_avx512.c: the sampler's vector passes at 16 lanes (AVX-512 F/BW/VL/DQ + FMA); sampler.c
 * uses them when the CPU has those. The passes themselves are in sampler_kernels.h. */

/* The Makefile's AVX-512 flags include FP16 and BF16, which sampler.c does not check for: keep
 * the compiler from using their instructions (vmovw for 16-bit moves, say) here. */
#pragma GCC target("no-avx512fp16,no-avx512bf16")

#define SAMPLER_VW 16
#define SAMPLER_KERNELS kernels_avx512
#include "core/decode/sampler_kernels.h"

const sampler_kernels *sampler_kernels_avx512(void) { return &kernels_avx512; }
