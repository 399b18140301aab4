/* kernels_avx512.c: the AVX-512 kernel set (AVX-512 F/BW/VL/DQ + FMA, built with AVX-512 flags,
 * chosen at run time): core/cpu/kernels_simd.h at 16 lanes. */

/* The Makefile's AVX-512 flags include FP16 and BF16, which kernels.c does not check for this set:
 * keep the compiler from using their instructions here. */
#pragma GCC target("no-avx512fp16,no-avx512bf16")

#define KS_VW 16
#define KS_SET_NAME "avx512"
#define KS_SET_GET kernels_avx512_get
#include "core/cpu/kernels_simd.h"
