/* cuda_engine.h: the CUDA backend behind the core engine interface (core/engine/engine.h), and what the
 * REPL and the benchmark ask of the GPU. Plain C: no CUDA header is needed to call it.
 *
 * Two builds provide these functions (gpu/gpu.mk): the real backend (nvcc + cuBLAS) and the same
 * source over the host emulation (the device is "host emulation (gpu/emu)"). Each is a plugin
 * (tokentop-cuda.so, tokentop-cuda-emu.so) that hands them to tokentop as one table
 * (gpu/gpu_plugin.h); tokentop never calls them by name. The GPU test suites and cuda-bench link
 * one build in and call them directly. */
#ifndef TOKENTOP_GPU_CUDA_ENGINE_H
#define TOKENTOP_GPU_CUDA_ENGINE_H

#include <stdbool.h>
#include <stddef.h>

#include "gpu/core_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    bool use_graphs;     /* capture the decode step once as a CUDA graph and replay it (default true) */
    int device;          /* device index (default 0) */
    int max_chunk;       /* tokens per prefill chunk; <= 0: min(n_ctx, 256). Tests use small ones. */
    bool profile;        /* time each op of the decode steps that run without a graph with CUDA
                            events (cuda_engine_profile_format); the table goes to stderr when the
                            engine is freed. Default: $TOKENTOP_CUDA_PROFILE set, not "0" */
} cuda_engine_options;

void cuda_engine_options_default(cuda_engine_options *co);

/* True when a CUDA device is usable; otherwise false and why in why (cap bytes, may be NULL):
 * "no CUDA device (...)", "built without CUDA (rebuild with make CUDA=1)". Never fails otherwise. */
bool cuda_backend_available(char *why, size_t cap);

/* Creates an engine on the GPU: weights uploaded once in o->dtype (every parameter rounded to it,
 * as the CPU engine does), a device-resident KV cache of o->n_ctx positions (<= 0: maxT), logits
 * copied to host memory (e->logits) by every forward. co may be NULL (defaults).
 * Fails with TT_ERR_DEVICE when there is no usable device, when the device lacks the memory
 * ("... needs N MiB of device memory ..., M MiB free of T MiB on <device>": the caller falls back
 * to the CPU with that one message), or on any CUDA/cuBLAS error (the message names the call, the
 * file and the line); TT_ERR_ARG for bad options. On failure *out is NULL and nothing is held.
 * After a device error during forward (a sticky error poisons the CUDA context) every later forward
 * fails at once with TT_ERR_DEVICE and the first error's message: the GPU is not retried. */
tt_status cuda_engine_create(const model *m, const engine_options *o, const cuda_engine_options *co,
                             engine **out, tt_error *err);

typedef struct {
    char name[256];            /* "NVIDIA H100 80GB HBM3", "host emulation (gpu/emu)" */
    int index;                 /* the current device (the one the last engine was created on) */
    int count;                 /* devices present */
    int cc_major, cc_minor;    /* compute capability */
    int sm_count;
    size_t total_bytes, free_bytes;
    int memory_clock_khz;      /* peak memory clock */
    int bus_width_bits;
    double peak_bandwidth;     /* bytes/s: 2 (double data rate) * memory clock * bus width / 8 */
    int runtime_version;       /* e.g. 13000 */
    int driver_version;        /* 0 when emulated */
    bool emulated;             /* the host emulation: names and numbers are nominal */
} cuda_device_info_t;

/* Describes the current device. TT_ERR_DEVICE when none is usable, TT_ERR_UNSUPPORTED in a build
 * without CUDA. */
tt_status cuda_device_info(cuda_device_info_t *info, tt_error *err);

/* What the benchmark reports besides tokens/s (app/bench.c). */
typedef struct {
    size_t device_bytes;       /* device memory this engine holds (weights, cache, activations) */
    size_t weight_bytes;       /* bytes of weights a decode step reads */
    size_t kv_bytes_per_pos;   /* cache bytes a decode step reads per position already cached */
    bool graphs;               /* decode steps replay a captured CUDA graph */
    long graph_replays;        /* decode steps run as graph replays so far */
    long steps;                /* forward calls so far (batched steps included) */
    int sequences;             /* KV-cache slots (engine_seq_reserve); 1 until sequences are used */
    size_t sequence_bytes;     /* device memory of one slot (K and V for n_ctx positions) */
    long batch_steps;          /* engine_forward_batch calls so far */
} cuda_engine_stats;

/* False (and *out untouched) when e is not a CUDA engine. */
bool cuda_engine_get_stats(const engine *e, cuda_engine_stats *out);

/* Bytes a decode step at position pos reads from device memory (weights + the cache so far). */
size_t cuda_engine_decode_bytes(const engine *e, int pos);

/* A bench line: "gpu: <device>, <used> of <total> MiB; decode reads <x> MB/token -> <y> GB/s =
 * <z>% of the <p> GB/s peak" for a measured decode rate at mean position pos. */
void cuda_bench_format(const engine *e, double decode_tokens_per_s, int pos, char *buf, size_t cap);

/* The profile of e's decode steps so far (co.profile; steps replayed from a graph are not timed,
 * so run with use_graphs false): per kind of op, its launches per step, device time per step, share
 * and, for matmuls and attention, the bytes it reads as GB/s and share of the device's peak; then
 * the device total and the host's wall time per step. Writes at most cap bytes (always
 * terminated) and returns the length; "" (0) when e is not a CUDA engine or nothing was timed. */
size_t cuda_engine_profile_format(const engine *e, char *buf, size_t cap);

/* One line naming this build's GPU support: "cuda (nvcc 13.0, sm_80 sm_86 sm_89 sm_90)",
 * "cuda-emu (host emulation)", "none (built without CUDA)". */
const char *cuda_build_info(void);

#ifdef __cplusplus
}
#endif

#endif
