/* reduce.h: warp and block reductions for the CUDA kernels (device code; every block size that uses
 * them is a whole number of warps). Shared by gpu/cuda_kernels.cu and gpu/cuda_selftest.cu. */
#ifndef TOKENTOP_GPU_REDUCE_H
#define TOKENTOP_GPU_REDUCE_H

#include "gpu/cuda_common.h"

__device__ static inline float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ static inline float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Every thread gets the block's sum; red holds 32 floats of shared memory. */
__device__ static inline float block_sum(float v, float *red)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    v = warp_sum(v);
    __syncthreads();               /* red may still be read by the previous reduction */
    if (lane == 0)
        red[warp] = v;
    __syncthreads();
    v = lane < nwarps ? red[lane] : 0.0f;
    return warp_sum(v);
}

__device__ static inline float block_max(float v, float *red)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0)
        red[warp] = v;
    __syncthreads();
    v = lane < nwarps ? red[lane] : -INFINITY;
    return warp_max(v);
}

#endif
