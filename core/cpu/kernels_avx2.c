/* kernels_avx2.c: the AVX2 + FMA + F16C kernel set (built with AVX2 flags, chosen at run time on
 * CPUs without AVX-512): core/cpu/kernels_simd.h at 8 lanes. */
#define KS_VW 8
#define KS_SET_NAME "avx2"
#define KS_SET_GET kernels_avx2_get
#include "core/cpu/kernels_simd.h"
