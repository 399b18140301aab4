/* cuda_selftest.cu: device programs that check the CUDA semantics the backend relies on, on a
 * device or the emulation (see cuda_selftest.h). */
#include "gpu/cuda_selftest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cuda_common.h"
#include "gpu/reduce.h"

#define TRY(call)                      \
    do {                               \
        cudaError_t e_ = (call);       \
        if (e_ != cudaSuccess) {       \
            cudaGetLastError();        \
            return (int)e_;            \
        }                              \
    } while (0)

/* Device copy of n host floats held in d (NULL src: filled with NaN). */
static cudaError_t upload(void **dst, const float *src, size_t n, tt_dtype d)
{
    size_t bytes = (n ? n : 1) * tt_dtype_size(d);
    cudaError_t e = cudaMalloc(dst, bytes);
    if (e != cudaSuccess)
        return e;
    char *h = (char *)malloc(bytes);
    for (size_t i = 0; i < n; i++)
        tt_store_f32(h, d, i, src ? src[i] : NAN);
    e = cudaMemcpy(*dst, h, n * tt_dtype_size(d), cudaMemcpyHostToDevice);
    free(h);
    return e;
}

extern "C" int cuda_selftest_gemm(int transa, int transb, int m, int n, int k, float alpha,
                                  const float *A, size_t a_len, int lda, long long strideA,
                                  const float *B, size_t b_len, int ldb, long long strideB,
                                  float beta, float *C, size_t c_len, int ldc, long long strideC, int batch,
                                  tt_dtype ab, tt_dtype c_type)
{
    void *dA = NULL, *dB = NULL, *dC = NULL;
    cublasHandle_t h = NULL;
    int rc = -1;
    if (upload(&dA, A, a_len, ab) == cudaSuccess && upload(&dB, B, b_len, ab) == cudaSuccess &&
        upload(&dC, C, c_len, c_type) == cudaSuccess &&
        cublasCreate(&h) == CUBLAS_STATUS_SUCCESS) {
        cublasOperation_t ta = transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = transb ? CUBLAS_OP_T : CUBLAS_OP_N;
        cublasStatus_t s;
        if (batch == 1)
            s = cublasGemmEx(h, ta, tb, m, n, k, &alpha, dA, tt_cuda_type(ab), lda, dB, tt_cuda_type(ab), ldb,
                             &beta, dC, tt_cuda_type(c_type), ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        else
            s = cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, &alpha, dA, tt_cuda_type(ab), lda, strideA,
                                           dB, tt_cuda_type(ab), ldb, strideB, &beta, dC, tt_cuda_type(c_type),
                                           ldc, strideC, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        rc = (int)s;
        if (s == CUBLAS_STATUS_SUCCESS) {
            char *hc = (char *)malloc(c_len * tt_dtype_size(c_type) + 1);
            if (cudaMemcpy(hc, dC, c_len * tt_dtype_size(c_type), cudaMemcpyDeviceToHost) == cudaSuccess)
                for (size_t i = 0; i < c_len; i++)
                    C[i] = tt_load_f32(hc, c_type, i);
            else
                rc = -1;
            free(hc);
        }
    }
    if (h)
        cublasDestroy(h);
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
    cudaGetLastError();
    return rc;
}

__global__ void reduce_kernel(const float *in, int n, float *sums, float *maxes)
{
    __shared__ float red[32];
    const float *row = in + (size_t)blockIdx.x * n;
    float s = 0.0f, m = -INFINITY;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        s += row[i];
        m = fmaxf(m, row[i]);
    }
    s = block_sum(s, red);
    m = block_max(m, red);
    if (threadIdx.x == 0) {
        sums[blockIdx.x] = s;
        maxes[blockIdx.x] = m;
    }
}

extern "C" int cuda_selftest_block_reduce(const float *in, int n, int blocks, int threads, float *sums,
                                          float *maxes)
{
    void *din = NULL, *ds = NULL, *dm = NULL;
    TRY(upload(&din, in, (size_t)n * blocks, TT_F32));
    TRY(cudaMalloc(&ds, (size_t)blocks * sizeof(float)));
    TRY(cudaMalloc(&dm, (size_t)blocks * sizeof(float)));
    TRY(TT_LAUNCH(reduce_kernel, dim3(blocks), dim3(threads), 0, (cudaStream_t)0, (const float *)din, n,
                  (float *)ds, (float *)dm));
    TRY(cudaMemcpy(sums, ds, (size_t)blocks * sizeof(float), cudaMemcpyDeviceToHost));
    TRY(cudaMemcpy(maxes, dm, (size_t)blocks * sizeof(float), cudaMemcpyDeviceToHost));
    TRY(cudaFree(din));
    TRY(cudaFree(ds));
    TRY(cudaFree(dm));
    return 0;
}

__global__ void neighbour_kernel(int *out, int barrier)
{
    TT_DYNAMIC_SHARED(int, vals);
    const int i = threadIdx.x, n = blockDim.x;
    vals[i] = i * i;
    if (barrier)
        __syncthreads();
    out[i] = vals[(i + 1) % n];
}

extern "C" int cuda_selftest_shared_neighbour(int threads, int barrier, int *out)
{
    int *d = NULL;
    TRY(cudaMalloc((void **)&d, (size_t)threads * sizeof(int)));
    TRY(TT_LAUNCH(neighbour_kernel, dim3(1), dim3(threads), (size_t)threads * sizeof(int), (cudaStream_t)0, d,
                  barrier));
    TRY(cudaMemcpy(out, d, (size_t)threads * sizeof(int), cudaMemcpyDeviceToHost));
    TRY(cudaFree(d));
    return 0;
}

__global__ void add_kernel(int *out, const int *in, int k)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        out[0] = in[0] + k;
}

extern "C" int cuda_selftest_graph_replay(int k, int in1, int in2, int results[2])
{
    cudaStream_t s;
    int *pin = NULL, *d = NULL;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    TRY(cudaStreamCreate(&s));
    TRY(cudaMallocHost((void **)&pin, 2 * sizeof(int)));
    TRY(cudaMalloc((void **)&d, 2 * sizeof(int)));
    int kk = k;
    TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    TRY(cudaMemcpyAsync(d + 1, pin, sizeof(int), cudaMemcpyHostToDevice, s));
    TRY(TT_LAUNCH(add_kernel, dim3(1), dim3(32), 0, s, d, (const int *)(d + 1), kk));
    TRY(cudaMemcpyAsync(pin + 1, d, sizeof(int), cudaMemcpyDeviceToHost, s));
    TRY(cudaStreamEndCapture(s, &graph));
    TRY(cudaGraphInstantiate(&exec, graph, 0));
    kk = k + 1000;                 /* the captured launch keeps k */
    (void)kk;
    int in[2] = {in1, in2};
    for (int r = 0; r < 2; r++) {
        pin[0] = in[r];
        TRY(cudaGraphLaunch(exec, s));
        TRY(cudaStreamSynchronize(s));
        results[r] = pin[1];
    }
    TRY(cudaGraphExecDestroy(exec));
    TRY(cudaGraphDestroy(graph));
    TRY(cudaFree(d));
    TRY(cudaFreeHost(pin));
    TRY(cudaStreamDestroy(s));
    return 0;
}

extern "C" int cuda_selftest_host_pointer_launch(void)
{
    int *host = (int *)malloc(2 * sizeof(int));
    int *d = NULL;
    cudaError_t e = cudaMalloc((void **)&d, 2 * sizeof(int));
    if (e == cudaSuccess)
        e = TT_LAUNCH(add_kernel, dim3(1), dim3(32), 0, (cudaStream_t)0, host, (const int *)d, 1);
    free(host);
    return (int)e;
}

extern "C" int cuda_selftest_host_deref(void)
{
    volatile int *d = NULL;
    TRY(cudaMalloc((void **)&d, sizeof(int)));
    return d[0];                   /* device memory read on the host */
}

__global__ void set_kernel(int *out, int v)
{
    out[0] = v;
}

extern "C" int cuda_selftest_pinned_before_sync(int *before, int *after)
{
    cudaStream_t s;
    int *pin = NULL, *d = NULL;
    TRY(cudaStreamCreate(&s));
    TRY(cudaMallocHost((void **)&pin, sizeof(int)));
    TRY(cudaMalloc((void **)&d, sizeof(int)));
    pin[0] = -1;
    TRY(TT_LAUNCH(set_kernel, dim3(1), dim3(32), 0, s, d, 42));
    TRY(cudaMemcpyAsync(pin, d, sizeof(int), cudaMemcpyDeviceToHost, s));
    *before = ((volatile int *)pin)[0];
    TRY(cudaStreamSynchronize(s));
    *after = ((volatile int *)pin)[0];
    TRY(cudaFree(d));
    TRY(cudaFreeHost(pin));
    TRY(cudaStreamDestroy(s));
    return 0;
}

__global__ void copy_kernel(int *out, const int *in)
{
    out[0] = in[0];
}

extern "C" int cuda_selftest_nonblocking_order(int device_sync, int *seen)
{
    cudaStream_t s;
    int *d = NULL, *pin = NULL, v = 42;
    TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    TRY(cudaMalloc((void **)&d, 2 * sizeof(int)));
    TRY(cudaMallocHost((void **)&pin, sizeof(int)));
    TRY(cudaMemcpy(d, &v, sizeof v, cudaMemcpyHostToDevice));
    if (device_sync)
        TRY(cudaDeviceSynchronize());
    TRY(TT_LAUNCH(copy_kernel, dim3(1), dim3(32), 0, s, d + 1, (const int *)d));
    TRY(cudaMemcpyAsync(pin, d + 1, sizeof(int), cudaMemcpyDeviceToHost, s));
    TRY(cudaStreamSynchronize(s));
    *seen = pin[0];
    TRY(cudaFreeHost(pin));
    TRY(cudaFree(d));
    TRY(cudaStreamDestroy(s));
    return 0;
}

extern "C" int cuda_selftest_bad_config(void)
{
    int *d = NULL;
    TRY(cudaMalloc((void **)&d, sizeof(int)));
    cudaError_t e = TT_LAUNCH(set_kernel, dim3(1), dim3(2048), 0, (cudaStream_t)0, d, 1);
    cudaGetLastError();
    cudaFree(d);
    return (int)e;
}

extern "C" int cuda_selftest_capture_sync(int *sync)
{
    cudaStream_t s;
    int *d = NULL;
    cudaGraph_t graph = NULL;
    TRY(cudaStreamCreate(&s));
    TRY(cudaMalloc((void **)&d, sizeof(int)));
    TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    TRY(TT_LAUNCH(set_kernel, dim3(1), dim3(32), 0, s, d, 1));
    *sync = (int)cudaStreamSynchronize(s);
    cudaError_t e = cudaStreamEndCapture(s, &graph);
    cudaGetLastError();
    if (graph)
        cudaGraphDestroy(graph);
    cudaFree(d);
    cudaStreamDestroy(s);
    return (int)e;
}
