/* sampler_avx2.c: the sampler's vector passes at 8 lanes (AVX2 + FMA); sampler.c uses them when
 * the CPU has both. The passes themselves are in sampler_kernels.h. */
#define SAMPLER_VW 8
#define SAMPLER_KERNELS kernels_avx2
#include "core/decode/sampler_kernels.h"

const sampler_kernels *sampler_kernels_avx2(void) { return &kernels_avx2; }
