/* llama_common.h: what tools/peer's two llama.cpp drivers (llama_bench.c, llama_logits.c) share:
 * quiet logging, the argmax, loading a model into plain CPU buffers, the flash-attention option.
 * Header-only: build_native.sh compiles each driver as one file. */
#ifndef TOKENTOP_PEER_LLAMA_COMMON_H
#define TOKENTOP_PEER_LLAMA_COMMON_H

#include <ggml-backend.h>
#include <llama.h>

#include <stdio.h>
#include <string.h>

static int verbose;

static bool progress_quiet(float progress, void *user)
{
    (void)progress;
    (void)user;
    return true;
}

static void log_quiet(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (verbose || level >= GGML_LOG_LEVEL_WARN)
        fputs(text, stderr);
}

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* --fa auto|on|off as llama.cpp's flash-attention setting (anything else: auto). */
static enum llama_flash_attn_type flash_attn_of(const char *fa)
{
    return !strcmp(fa, "on")    ? LLAMA_FLASH_ATTN_TYPE_ENABLED
           : !strcmp(fa, "off") ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                : LLAMA_FLASH_ATTN_TYPE_AUTO;
}

/* The backends (from libdir when given: the npm build loads its CPU kernels at run time) and
 * MODEL on the CPU, quietly unless verbose; NULL with a message naming tool and file. */
static struct llama_model *load_model(const char *tool, const char *path, const char *libdir,
                                      int extra_bufts)
{
    llama_log_set(log_quiet, NULL);
    if (libdir)
        ggml_backend_load_all_from_path(libdir);
    else
        ggml_backend_load_all();
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.use_extra_bufts = extra_bufts;
    if (!verbose)
        mp.progress_callback = progress_quiet;   /* the default prints dots on stderr */
    struct llama_model *model = llama_model_load_from_file(path, mp);
    if (!model)
        fprintf(stderr, "%s: %s: llama_model_load_from_file failed\n", tool, path);
    return model;
}

#endif
