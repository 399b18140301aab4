/* cuda_emu.h: a host emulation of the CUDA runtime + cuBLAS subset the GPU backend uses, so the
 * backend's own source (kernels, launch code, cuBLAS arguments, memory management, graphs) runs and
 * is tested on machines without a GPU. Included instead of <cuda_runtime.h>/<cublas_v2.h> when the
 * .cu files are compiled as C++ with -DTT_EMU (see gpu/cuda_common.h and gpu/README.md).
 *
 * What is emulated, and how faithfully:
 * - Device memory: every cudaMalloc is its own mmap with guard pages; it is PROT_NONE while host code
 *   runs and readable only while emulated device work executes, so a host dereference of a device
 *   pointer crashes here as it would be wrong there. cudaMallocHost memory is ordinary host memory.
 *   A memory capacity is configurable (cuda_emu_set_memory) to exercise out-of-memory paths.
 * - Streams: work is queued and executed only when the host synchronizes (stream/event/device
 *   synchronize, a synchronous cudaMemcpy, cudaFree), so a host read of a pinned buffer before its
 *   copy was synchronized sees stale data, as on a device. Copies from/to pageable host memory are
 *   synchronous with respect to the host, as the CUDA documentation specifies.
 * - Graphs: stream capture records launches (arguments by value), copies, memsets and cuBLAS calls
 *   (scalars by value); replays run the recorded nodes. Synchronizing a capturing stream, or a copy
 *   with pageable host memory during capture, invalidates the capture.
 * - Kernels: TT_LAUNCH checks the configuration (<= 1024 threads, grid limits, dynamic shared memory
 *   <= 48 KiB unless raised with cudaFuncSetAttribute) and that every pointer argument points into a
 *   device allocation (or is NULL). Blocks run one after another; inside a block, every CUDA thread is
 *   its own cooperative fiber, so __syncthreads, __syncwarp and the warp shuffles have their real
 *   barrier semantics. The thread order can be reversed (cuda_emu_set_thread_order) to expose missing
 *   barriers. Divergent barriers and shuffles with exited lanes abort with a message.
 * - cuBLAS: cublasGemmEx and cublasGemmStridedBatchedEx with the exact column-major semantics
 *   (op, m, n, k, lda, ldb, ldc, strides, batch count), argument validation like cuBLAS's
 *   (CUBLAS_STATUS_INVALID_VALUE for bad sizes/leading dimensions), the type combinations cuBLAS
 *   supports for CUBLAS_COMPUTE_32F (A/B f32, f16, bf16; C f32 or = A) and a bounds check of every
 *   operand against its allocation. Accumulation is fp32 in k order.
 * - Errors: the codes and strings of the real API; a sticky error (cudaErrorIllegalAddress, from a
 *   bounds violation or cuda_emu_inject_fault) makes every later call fail, as a corrupted context.
 *
 * Limits (not emulated): concurrency between streams or blocks (execution is sequential and
 * deterministic), timing (events measure host time), atomics, cooperative groups, texture/constant
 * memory, device printf, device pointer mode in cuBLAS, warp shuffles on values wider than 8 bytes,
 * partial shuffle masks, memory consistency effects of missing __threadfence. */
#ifndef TOKENTOP_CUDA_EMU_H
#define TOKENTOP_CUDA_EMU_H

#ifndef __cplusplus
#error "cuda_emu.h is C++ (the .cu sources are compiled with g++ -x c++ -DTT_EMU)"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "gpu/emu/cuda_emu_ctl.h"

/* ---------------------------------------------------------------------------------------------
 * Device-code keywords and built-in variables */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
/* Static shared memory is shared by the emulated threads of the block that is running: blocks run
 * one at a time, and device work only ever runs inside a runtime call holding the emulation's lock,
 * so plain statics (and plain globals for the built-in indices) are enough. Shared memory contents
 * at block start are undefined, as on a device. */
#define __shared__ static

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};
typedef dim3 uint3;

/* The 16-byte vector type kernels load whole; aligned as on the device, so a misaligned load is
 * as wrong here (undefined behaviour, UBSan) as it is there (a misaligned-address fault). */
struct alignas(16) uint4 {
    unsigned int x, y, z, w;
};

extern dim3 threadIdx, blockIdx, blockDim, gridDim;
static constexpr int warpSize = 32;

void __syncthreads(void);
void __syncwarp(unsigned int mask = 0xffffffffu);

/* Exchange of one value per lane through the running block's slots; returns lane src's value. */
uint64_t emu_warp_exchange(uint64_t bits, int src_lane, unsigned int mask, const char *what);
int emu_lane_id(void);

template <typename T> static inline T emu_shfl_value(T v, int src_lane, unsigned int mask, const char *what)
{
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a wide value");
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof v);
    bits = emu_warp_exchange(bits, src_lane, mask, what);
    T out;
    memcpy(&out, &bits, sizeof out);
    return out;
}

template <typename T> static inline T __shfl_xor_sync(unsigned int mask, T v, int lane_mask, int width = 32)
{
    int lane = emu_lane_id();
    int src = (lane & ~(width - 1)) | ((lane ^ lane_mask) & (width - 1));
    return emu_shfl_value(v, src, mask, "__shfl_xor_sync");
}

template <typename T> static inline T __shfl_down_sync(unsigned int mask, T v, unsigned int delta, int width = 32)
{
    int lane = emu_lane_id();
    int src = lane + (int)delta;
    if ((src & ~(width - 1)) != (lane & ~(width - 1)))   /* past the segment: own value */
        src = lane;
    return emu_shfl_value(v, src, mask, "__shfl_down_sync");
}

template <typename T> static inline T __shfl_sync(unsigned int mask, T v, int src_lane, int width = 32)
{
    int lane = emu_lane_id();
    int src = (lane & ~(width - 1)) + (src_lane & (width - 1));
    return emu_shfl_value(v, src, mask, "__shfl_sync");
}

/* The launch's dynamic shared memory (filled with 0xff bytes, NaN as floats, at every block start). */
void *emu_dynamic_shared(void);

/* ---------------------------------------------------------------------------------------------
 * Runtime API subset (same names, types and error codes as the CUDA runtime) */
typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchFailure = 719,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureUnmatched = 903,
    cudaErrorUnknown = 999,
} cudaError_t;

typedef enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
} cudaMemcpyKind;

enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2,
};

enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2,
};

enum cudaDeviceAttr {
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrMemoryClockRate = 36,
    cudaDevAttrGlobalMemoryBusWidth = 37,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
};

enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
};

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01

/* Only the fields the backend reads. */
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    int major, minor;
    int multiProcessorCount;
    size_t sharedMemPerBlock;
    int maxThreadsPerBlock;
};

typedef struct emu_stream *cudaStream_t;
typedef struct emu_event *cudaEvent_t;
typedef struct emu_graph *cudaGraph_t;
typedef struct emu_graph_exec *cudaGraphExec_t;

const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaRuntimeGetVersion(int *version);
cudaError_t cudaDriverGetVersion(int *version);
cudaError_t cudaDeviceSynchronize(void);

cudaError_t cudaMalloc(void **ptr, size_t size);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMallocHost(void **ptr, size_t size);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream = 0);
cudaError_t cudaMemset(void *ptr, int value, size_t count);
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t stream = 0);

template <typename T> static inline cudaError_t cudaMalloc(T **ptr, size_t size)
{
    return cudaMalloc((void **)ptr, size);
}
template <typename T> static inline cudaError_t cudaMallocHost(T **ptr, size_t size)
{
    return cudaMallocHost((void **)ptr, size);
}

cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status);

cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

cudaError_t emu_func_set_attribute(const void *func, enum cudaFuncAttribute attr, int value);
template <typename F> static inline cudaError_t cudaFuncSetAttribute(F *func, enum cudaFuncAttribute attr, int value)
{
    return emu_func_set_attribute((const void *)func, attr, value);
}

/* ---------------------------------------------------------------------------------------------
 * Kernel launches: TT_LAUNCH (gpu/cuda_common.h) expands to emu_launch here, to <<<>>> under nvcc. */
cudaError_t emu_launch_check(const char *kernel, const void *func, dim3 grid, dim3 block, size_t shmem,
                             cudaStream_t stream);
bool emu_kernel_pointer_ok(const char *kernel, int index, const void *p);
cudaError_t emu_launch_bad_pointer(const char *kernel);
cudaError_t emu_launch_enqueue(const char *kernel, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                               std::function<void()> body);

template <typename T> static inline bool emu_arg_ok(const char *kernel, int index, const T &v)
{
    if constexpr (std::is_pointer<T>::value)
        return emu_kernel_pointer_ok(kernel, index, (const void *)v);
    else
        return true;
}

/* Converts the arguments as a call would, checks the launch, and queues one execution of the grid
 * with the arguments captured by value (as a real launch, and as a graph node, captures them). */
template <typename... P, typename... A>
static inline cudaError_t emu_launch(const char *name, void (*kernel)(P...), dim3 grid, dim3 block,
                                     size_t shmem, cudaStream_t stream, A &&... args)
{
    static_assert(sizeof...(P) == sizeof...(A), "wrong number of kernel arguments");
    std::tuple<typename std::decay<P>::type...> params(static_cast<P>(std::forward<A>(args))...);
    cudaError_t e = emu_launch_check(name, (const void *)kernel, grid, block, shmem, stream);
    if (e != cudaSuccess)
        return e;
    int index = 0;
    bool ok = true;
    std::apply([&](const auto &... p) { ((ok = emu_arg_ok(name, index++, p) && ok), ...); }, params);
    if (!ok)
        return emu_launch_bad_pointer(name);
    return emu_launch_enqueue(name, grid, block, shmem, stream,
                              [kernel, params]() { std::apply(kernel, params); });
}

/* ---------------------------------------------------------------------------------------------
 * cuBLAS subset */
typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
} cublasStatus_t;

typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType;
typedef cudaDataType cudaDataType_t;
typedef enum {
    CUBLAS_COMPUTE_16F = 64,
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_PEDANTIC = 69,
    CUBLAS_COMPUTE_32F_FAST_16F = 74,
    CUBLAS_COMPUTE_32F_FAST_16BF = 75,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
} cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 } cublasGemmAlgo_t;
typedef enum {
    CUBLAS_DEFAULT_MATH = 0,
    CUBLAS_TENSOR_OP_MATH = 1,
    CUBLAS_PEDANTIC_MATH = 2,
    CUBLAS_TF32_TENSOR_OP_MATH = 3,
} cublasMath_t;
typedef enum { CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_POINTER_MODE_DEVICE = 1 } cublasPointerMode_t;

typedef struct emu_cublas *cublasHandle_t;

cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void *workspace, size_t bytes);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasSetPointerMode(cublasHandle_t handle, cublasPointerMode_t mode);
const char *cublasGetStatusString(cublasStatus_t status);
const char *cublasGetStatusName(cublasStatus_t status);

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                            int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType Atype, int lda,
                            const void *B, cudaDataType Btype, int ldb,
                            const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo);

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void *alpha,
                                          const void *A, cudaDataType Atype, int lda, long long int strideA,
                                          const void *B, cudaDataType Btype, int ldb, long long int strideB,
                                          const void *beta,
                                          void *C, cudaDataType Ctype, int ldc, long long int strideC,
                                          int batchCount, cublasComputeType_t computeType,
                                          cublasGemmAlgo_t algo);

#endif
