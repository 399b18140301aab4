/* cuda_emu_ctl.h: the knobs and counters of the host emulation (gpu/emu), for tests. C linkage; only
 * the emulated build defines these functions (a real CUDA build has no emulation to control). */
#ifndef TOKENTOP_CUDA_EMU_CTL_H
#define TOKENTOP_CUDA_EMU_CTL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Device memory is PROT_NONE while host code runs (a host dereference of a device pointer faults);
 * TT_EMU_PROTECT=0 in the environment turns that off, e.g. under a debugger. */

/* Devices cudaGetDeviceCount reports (default 1; 0 emulates a machine without a GPU). */
void cuda_emu_set_device_count(int n);

/* Device memory capacity in bytes (default 16 GiB; cudaMalloc past it fails with
 * cudaErrorMemoryAllocation). */
void cuda_emu_set_memory(size_t total_bytes);

/* Order in which a block's emulated threads run between barriers: 0 ascending (default), 1
 * descending. Running a kernel both ways exposes reads of shared memory that miss a barrier. */
void cuda_emu_set_thread_order(int descending);

/* The n-th device operation executed from now (1 = the next one) fails with a sticky
 * cudaErrorIllegalAddress, like a kernel fault on a device; 0 disables. TT_EMU_FAULT_AFTER=N in
 * the environment does the same from the start of the process. */
void cuda_emu_inject_fault(long n);

/* Clears a sticky error (what a process restart does on a device); allocations stay. */
void cuda_emu_clear_sticky_error(void);

/* 1: diagnostics are only recorded (cuda_emu_last_diagnostic), not printed to stderr; for tests
 * that provoke them on purpose. */
void cuda_emu_set_quiet(int quiet);

/* The last problem the emulation reported (also printed to stderr): a bad pointer, copy direction,
 * launch configuration or GEMM operand, an injected fault. "" when none. */
const char *cuda_emu_last_diagnostic(void);

typedef struct {
    long api_calls;          /* runtime + cuBLAS entry points called */
    long kernel_launches;    /* launches accepted (queued or captured) */
    long kernels_run;        /* grids executed */
    long blocks_run;
    long threads_run;
    long barriers;           /* __syncthreads / warp barriers passed (per thread) */
    long gemms_run;          /* cuBLAS GEMMs executed (a batched call counts once) */
    long graph_launches;
    long graph_nodes_run;    /* nodes executed by graph replays */
    long memcpys_run;
    size_t bytes_in_use;     /* device memory currently allocated */
    size_t peak_bytes;
} cuda_emu_stats;

void cuda_emu_get_stats(cuda_emu_stats *out);

#ifdef __cplusplus
}
#endif

#endif
