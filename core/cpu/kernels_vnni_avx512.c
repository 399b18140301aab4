/* kernels_vnni_avx512.c: the AVX-512 kernel set with AVX512-VNNI (built with the AVX-512 flags
 * and -mavx512vnni, chosen at run time on CPUs that have it: Intel Ice Lake and later, AMD Zen 4):
 * core/cpu/kernels_simd.h at 16 lanes, its Q8 dot products on vpdpbusd. The same bits as the avx512
 * set (kernels.h: Q8 block sums are exact integers). */

/* As in kernels_avx512.c: the flags' FP16 and BF16 are not checked for this set. */
#pragma GCC target("no-avx512fp16,no-avx512bf16")

#define KS_VW 16
#define KS_VNNI 1
#define KS_SET_NAME "avx512vnni"
#define KS_SET_GET kernels_avx512vnni_get
#include "core/cpu/kernels_simd.h"
