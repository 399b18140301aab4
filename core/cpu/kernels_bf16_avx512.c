/* kernels_bf16_avx512.c: the avx512vnni set with BF16 matmuls on vdpbf16ps (built with the AVX-512
 * flags, which include AVX512-BF16, and -mavx512vnni; chosen at run time on CPUs with AVX512-BF16
 * and AVX512-VNNI where the amx set does not run: AMD Zen 4 and later, Intel Cooper Lake, Sapphire
 * Rapids with TOKENTOP_NO_AMX). core/cpu/kernels_simd.h at 16 lanes; its BF16 matmuls read
 * activations rounded to bf16 (bf16_rows), in decode, prefill and verification rows alike. Every
 * other dtype gives the avx512vnni set's bits. */

/* As in kernels_avx512.c: the flags' FP16 is not checked for this set. */
#pragma GCC target("no-avx512fp16")

#define KS_VW 16
#define KS_VNNI 1
#define KS_BF16DP 1
#define KS_SET_NAME "avx512bf16"
#define KS_SET_GET kernels_avx512bf16_get
#include "core/cpu/kernels_simd.h"
