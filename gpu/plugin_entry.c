/* plugin_entry.c: the one symbol the GPU backend's shared object exports (gpu/gpu_plugin.h), and
 * cuda_build_info. Compiled once per flavour of the backend (gpu/gpu.mk): GPU_BUILD_INFO names it. */
#include "gpu/gpu_plugin.h"

#ifndef GPU_BUILD_INFO
#error "gpu/gpu.mk defines GPU_BUILD_INFO, e.g. \"cuda (nvcc 13.0, sm_90)\""
#endif

const char *cuda_build_info(void)
{
    return GPU_BUILD_INFO;
}

static const gpu_plugin plugin = {
    .abi = GPU_PLUGIN_ABI,
    .size = sizeof(gpu_plugin),
    .build_info = GPU_BUILD_INFO,
    .engine_options_default = cuda_engine_options_default,
    .backend_available = cuda_backend_available,
    .engine_create = cuda_engine_create,
    .device_info = cuda_device_info,
    .engine_get_stats = cuda_engine_get_stats,
    .engine_decode_bytes = cuda_engine_decode_bytes,
    .bench_format = cuda_bench_format,
};

const gpu_plugin *tokentop_gpu_plugin(void)
{
    return &plugin;
}
