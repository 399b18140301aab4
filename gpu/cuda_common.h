/* cuda_common.h: what every gpu/ source includes first: the CUDA runtime + cuBLAS (or, with -DTT_EMU,
 * their host emulation in gpu/emu/), the kernel-launch convention, and small device helpers.
 *
 * Launch convention: kernels are launched only through
 *     cudaError_t e = TT_LAUNCH(kernel, grid, block, shared_bytes, stream, args...);
 * which is `kernel<<<grid, block, shared_bytes, stream>>>(args...)` followed by cudaGetLastError()
 * under nvcc, and emu_launch(...) in the emulation (same checks, same argument capture by value).
 * A kernel that is a template takes one template argument (a macro argument cannot hold a comma).
 * Dynamic shared memory is declared with TT_DYNAMIC_SHARED(type, name); TT_UNROLL before a loop
 * asks nvcc to unroll it, TT_UNROLL_BY(n) n times (nothing in the emulation). */
#ifndef TOKENTOP_GPU_CUDA_COMMON_H
#define TOKENTOP_GPU_CUDA_COMMON_H

/* First: core/base/dtype.h names a local `half`, which cuda_fp16.h's global type would shadow. */
#include "gpu/core_api.h"

#ifdef TT_EMU
#include "gpu/emu/cuda_emu.h"
#define TT_LAUNCH(kernel, grid, block, shmem, stream, ...) \
    emu_launch(#kernel, kernel, grid, block, shmem, stream, __VA_ARGS__)
#define TT_DYNAMIC_SHARED(type, name) type *name = (type *)emu_dynamic_shared()
#define TT_UNROLL
#define TT_UNROLL_BY(n)
#else
#include <cublas_v2.h>
#include <cuda_runtime.h>
#define TT_LAUNCH(kernel, grid, block, shmem, stream, ...) \
    (kernel<<<grid, block, shmem, stream>>>(__VA_ARGS__), cudaGetLastError())
#define TT_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#define TT_UNROLL _Pragma("unroll")
#define TT_PRAGMA(x) _Pragma(#x)
#define TT_UNROLL_BY(n) TT_PRAGMA(unroll n)
#endif

/* The cuBLAS data type holding tensors of dtype d. */
static inline cudaDataType tt_cuda_type(tt_dtype d)
{
    return d == TT_F32 ? CUDA_R_32F : d == TT_F16 ? CUDA_R_16F : CUDA_R_16BF;
}

static inline unsigned int tt_ceil_div(size_t a, size_t b) { return (unsigned int)((a + b - 1) / b); }

#endif
