/* cuda_selftest.h: small device programs that pin down the CUDA semantics the backend relies on
 * (column-major GEMM arguments, block reductions through shared memory and warp shuffles, graph
 * replay with by-value arguments) and probes of the emulation's own checks. They run on a device
 * or on the host emulation alike, so a GPU machine can confirm that the emulation behaves like the
 * real thing. For tests only (linked from the library only when referenced).
 *
 * Each returns the CUDA error code (cudaError_t as int; 0 = cudaSuccess) of the first failing
 * call, except cuda_selftest_gemm, which returns the cuBLAS status (0 = CUBLAS_STATUS_SUCCESS),
 * or -1 when a CUDA call around it failed. */
#ifndef TOKENTOP_GPU_CUDA_SELFTEST_H
#define TOKENTOP_GPU_CUDA_SELFTEST_H

#include <stddef.h>

#include "gpu/core_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cublasGemmStridedBatchedEx (batch > 1) or cublasGemmEx (batch == 1) on device copies of host
 * arrays of a_len, b_len and c_len elements: C = alpha op(A) op(B) + beta C, column-major, with A
 * and B held in ab and C in c_type (f32, or ab). trans: 0 = N, 1 = T. C (host, in/out) is
 * uploaded, then receives the result converted to float. */
int cuda_selftest_gemm(int transa, int transb, int m, int n, int k, float alpha,
                       const float *A, size_t a_len, int lda, long long strideA,
                       const float *B, size_t b_len, int ldb, long long strideB,
                       float beta, float *C, size_t c_len, int ldc, long long strideC, int batch,
                       tt_dtype ab, tt_dtype c_type);

/* blocks blocks of threads threads (a multiple of 32): block b reduces in[b*n .. b*n+n-1] with
 * block_sum and block_max (gpu/reduce.h), writing sums[b] and maxes[b]. */
int cuda_selftest_block_reduce(const float *in, int n, int blocks, int threads, float *sums, float *maxes);

/* One block: thread i writes i*i to shared memory, then (after __syncthreads when barrier) reads
 * what thread (i+1) % threads wrote into out[i]. Without the barrier the result is a race. */
int cuda_selftest_shared_neighbour(int threads, int barrier, int *out);

/* Captures a graph of {copy a pinned int to the device; kernel out = in + k, k passed by value};
 * replays it with the pinned input set to in1, then in2, while the host variable that was k is
 * changed between captures; results[i] receives out after each replay. */
int cuda_selftest_graph_replay(int k, int in1, int in2, int results[2]);

/* --- Probes of the emulation (gpu/emu): on a device these would fault or race instead. --- */

/* Launches a kernel with a host (malloc) pointer argument: the launch's error code. */
int cuda_selftest_host_pointer_launch(void);

/* Reads a device allocation through its pointer on the host: faults (SIGSEGV) on the emulation. */
int cuda_selftest_host_deref(void);

/* Copies a device int (set to 42) to pinned host memory (holding -1) with cudaMemcpyAsync: *before
 * is what the host sees before cudaStreamSynchronize, *after what it sees after. */
int cuda_selftest_pinned_before_sync(int *before, int *after);

/* cudaMemcpy (legacy default stream, from pageable memory) sets a device int to 42, then a kernel on
 * a cudaStreamNonBlocking stream copies it, with cudaDeviceSynchronize in between when device_sync;
 * *seen receives what the kernel read. Without the synchronize the kernel may run first. */
int cuda_selftest_nonblocking_order(int device_sync, int *seen);

/* Launches with 2048 threads per block: the launch's error code. */
int cuda_selftest_bad_config(void);

/* Synchronizes a capturing stream: *sync gets that call's code, the return value is the code of
 * cudaStreamEndCapture afterwards (the capture is invalidated). */
int cuda_selftest_capture_sync(int *sync);

#ifdef __cplusplus
}
#endif

#endif
