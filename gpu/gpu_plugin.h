/* gpu_plugin.h: the GPU backend as a plugin: the function table its shared object exports, and the
 * loader tokentop uses to find and open it only when a GPU is asked for. Plain C, no CUDA header.
 *
 * tokentop itself never links CUDA: `--backend cpu` (and `auto` where no driver is installed) maps
 * no CUDA library, so CPU runs start as fast and as small as a build without CUDA, and one binary
 * runs on machines with and without CUDA. The backend is a shared object (gpu/gpu.mk):
 *
 *   tokentop-cuda.so      the CUDA backend (nvcc + cudart + cuBLAS)
 *   tokentop-cuda-emu.so  the same gpu/ source over the host emulation (gpu/emu): for tests and
 *                         demos on machines without a GPU
 *
 * whose one exported symbol, tokentop_gpu_plugin, returns the table below. The plugin resolves the
 * few core/ functions it calls (gpu/host.exports) against the tokentop binary that opens it. */
#ifndef TOKENTOP_GPU_PLUGIN_H
#define TOKENTOP_GPU_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>

#include "gpu/cuda_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever gpu_plugin or a type it passes (cuda_engine_options, cuda_device_info_t,
 * cuda_engine_stats, engine, model, engine_options) changes layout: a plugin from another build is
 * refused with both numbers instead of crashing. */
#define GPU_PLUGIN_ABI 6   /* 2: engine_ops.seq, engine.seq_tokens; 3: cuda_engine_stats.sequences,
                              .sequence_bytes, .batch_steps (the CUDA engine has sequences);
                              4: engine.attention (the attention capture); 5: engine.lens,
                              .lens_pos (the logit lens's rows); 6: cuda_engine_options.profile */
#define GPU_PLUGIN_ENTRY "tokentop_gpu_plugin"

/* The functions of gpu/cuda_engine.h, as one table; see there for each contract. */
typedef struct gpu_plugin {
    int abi;                       /* GPU_PLUGIN_ABI of the build that made the plugin */
    size_t size;                   /* sizeof (gpu_plugin) there */
    const char *build_info;        /* cuda_build_info(): "cuda (nvcc 13.0, sm_90)", "cuda-emu (...)" */
    void (*engine_options_default)(cuda_engine_options *co);
    bool (*backend_available)(char *why, size_t cap);
    tt_status (*engine_create)(const model *m, const engine_options *o, const cuda_engine_options *co,
                               engine **out, tt_error *err);
    tt_status (*device_info)(cuda_device_info_t *info, tt_error *err);
    bool (*engine_get_stats)(const engine *e, cuda_engine_stats *out);
    size_t (*engine_decode_bytes)(const engine *e, int pos);
    void (*bench_format)(const engine *e, double decode_tokens_per_s, int pos, char *buf, size_t cap);
} gpu_plugin;

/* The plugin's entry point (gpu/plugin_entry.c): the table, static, never NULL. */
const gpu_plugin *tokentop_gpu_plugin(void);

/* ---------------------------------------------------------------------------------------------
 * The loader (gpu/gpu_plugin.c, linked into tokentop). */

#define GPU_PLUGIN_FILE     "tokentop-cuda.so"
#define GPU_PLUGIN_EMU_FILE "tokentop-cuda-emu.so"
#define GPU_PLUGIN_ENV      "TOKENTOP_GPU_PLUGIN"
#define GPU_DRIVER_LIB      "libcuda.so.1"

/* Finds and opens the GPU plugin, once per process: later calls return the first answer (call it
 * from one thread); the library stays loaded, as CUDA libraries expect. Where it looks:
 *   1. $TOKENTOP_GPU_PLUGIN, a file path: opened as named, with no driver probe (that is how the
 *      tests open the emulated plugin);
 *   2. in exe_dir (the directory of the running binary; NULL: skipped), then in
 *      exe_dir/../lib/tokentop (an installed tree, $PREFIX/bin + $PREFIX/lib/tokentop):
 *      tokentop-cuda.so, opened only when the CUDA driver (libcuda.so.1) can be loaded, so a
 *      machine without a driver maps neither cudart nor cuBLAS; when neither directory holds
 *      one, tokentop-cuda-emu.so there (make CUDA=emu puts it beside the binary).
 * Returns the table, or NULL with one line in why (cap bytes; may be NULL) that a user can act on:
 * "no CUDA driver (libcuda.so.1: cannot open shared object file: ...)", "no GPU plugin
 * (tokentop-cuda.so is neither in DIR nor in DIR/../lib/tokentop; ...)", "cannot load PATH
 * (<dlerror>)", "PATH: plugin ABI 2, this tokentop expects 3 (...)".
 * A table returned does not mean a device is usable: ask its backend_available. */
const gpu_plugin *gpu_plugin_load(const char *exe_dir, char *why, size_t cap);

/* The path the plugin was loaded from ("" before a successful gpu_plugin_load). */
const char *gpu_plugin_path(void);

#ifdef __cplusplus
}
#endif

#endif
