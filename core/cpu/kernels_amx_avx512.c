/* kernels_amx_avx512.c: the avx512vnni set with BF16 matmuls on AMX tiles (built with the AVX-512
 * flags, -mavx512vnni, -mamx-tile and -mamx-bf16; chosen at run time where kernels.c finds AMX-BF16
 * and the operating system grants the tile state: Intel Sapphire Rapids and later).
 * core/cpu/kernels_simd.h at 16 lanes; its BF16 matmul is core/cpu/kernels_amx.h's. Every other dtype
 * gives the avx512vnni set's bits. */

/* As in kernels_avx512.c: the flags' FP16 and BF16 are not checked for this set. */
#pragma GCC target("no-avx512fp16,no-avx512bf16")

#define KS_VW 16
#define KS_VNNI 1
#define KS_AMX 1
#define KS_SET_NAME "amx"
#define KS_SET_GET kernels_amx_get
#include "core/cpu/kernels_simd.h"
