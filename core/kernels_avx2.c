/* kernels_avx2.c: the AVX2 + FMA + F16C kernel set (built with AVX2 flags, chosen at run time on
 * CPUs without AVX-512): core/kernels_simd.h at 8 lanes. */
#define KS_VW 8
#include "core/kernels_simd.h"

static const kernels avx2_set = {
    .name = "avx2",
    .matmul = simd_matmul,
    .attention = simd_attention,
};

/* The CPU check is the caller's (kernels.c, built without AVX2 flags). */
const kernels *kernels_avx2_get(void)
{
    return &avx2_set;
}
