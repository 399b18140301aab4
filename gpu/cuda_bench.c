/* cuda_bench.c: cuda-bench, the GPU backend's own benchmark: prefill and decode speed with CUDA
 * graphs on and off, device memory, and the fraction of the device's memory bandwidth decode
 * reaches. Standalone (public gpu/ and core/ interfaces only), so a machine with a GPU can measure
 * the backend whatever state `tokentop bench` is in. Built by gpu/gpu.mk as $(BUILD)/gpu/cuda-bench.
 *
 *   cuda-bench [--model DIR | --size gpt2|...|gpt2-xl|tiny|llama-3.2-1b|qwen3-0.6b|...] [--dtype fp16]
 *              [--prompt N] [--gen N] [--runs N]
 *
 * Without --model a random model of the given size (default gpt2) is written to a temporary
 * directory first (gpt2-xl in fp16: 3.1 GB). Decode feeds fixed token ids, so the work is the same
 * whatever the weights. Exit status 0, 1 on a failure (no device included), 2 for bad usage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/base/clock.h"
#include "core/engine/engine.h"
#include "core/model/model.h"
#include "core/model/modelgen.h"
#include "gpu/cuda_engine.h"

typedef struct {
    const char *model_dir, *size;
    tt_dtype dtype;
    int prompt, gen, runs;
} bench_opts;

typedef struct {
    double prefill_s;              /* median over the runs */
    double decode_s;               /* median per-token time over all steps of all runs */
    cuda_engine_stats st;
} bench_out;

/* One engine (graphs on or off): a warm-up, then runs x (prefill of prompt, gen decode steps). */
static int bench_engine(const model *m, const bench_opts *o, bool graphs, bench_out *out, tt_error *err)
{
    engine_options eo;
    engine_options_default(&eo);
    eo.dtype = o->dtype;
    cuda_engine_options co;
    cuda_engine_options_default(&co);
    co.use_graphs = graphs;
    engine *e;
    if (cuda_engine_create(m, &eo, &co, &e, err) != TT_OK)
        return 1;
    const int V = m->config.V, n = o->prompt + o->gen;
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    double *pre = malloc((size_t)o->runs * sizeof *pre), *dec = malloc((size_t)o->runs * o->gen * sizeof *dec);
    int rc = 1;
    if (!ids || !pre || !dec)
        goto done;
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)((i * 7919 + 13) % V);
    /* Warm-up: the first decode step captures the graph; cuBLAS picks its kernels. */
    if (engine_forward(e, ids, o->prompt, 0, false, err) != TT_OK ||
        engine_forward(e, ids + o->prompt, 1, o->prompt, false, err) != TT_OK)
        goto done;
    for (int r = 0; r < o->runs; r++) {
        double t0 = tt_now_s();
        if (engine_forward(e, ids, o->prompt, 0, false, err) != TT_OK)
            goto done;
        pre[r] = tt_now_s() - t0;
        for (int s = 0; s < o->gen; s++) {
            t0 = tt_now_s();
            if (engine_forward(e, ids + o->prompt + s, 1, o->prompt + s, false, err) != TT_OK)
                goto done;
            dec[r * o->gen + s] = tt_now_s() - t0;
        }
    }
    out->prefill_s = tt_median(pre, o->runs);
    out->decode_s = tt_median(dec, o->runs * o->gen);
    cuda_engine_get_stats(e, &out->st);
    if (graphs) {
        char line[512];
        cuda_bench_format(e, 1.0 / out->decode_s, o->prompt + o->gen / 2, line, sizeof line);
        printf("%s\n", line);
    }
    rc = 0;
done:
    free(ids);
    free(pre);
    free(dec);
    engine_free(e);
    return rc;
}

static int usage(FILE *f, int rc)
{
    fprintf(f, "usage: cuda-bench [--model DIR | --size gpt2|gpt2-medium|gpt2-large|gpt2-xl|tiny|\n"
               "                   llama-3.2-1b|llama-3.2-3b|llama-3.1-8b|qwen2.5-0.5b|qwen2.5-1.5b|\n"
               "                   qwen3-0.6b|smollm2-135m|tinyllama-1.1b]\n"
               "                  [--dtype fp32|fp16|bf16] [--prompt N] [--gen N] [--runs N]\n"
               "Prefill and decode speed of the CUDA backend with graphs on and off, device memory,\n"
               "and decode's share of the device's peak memory bandwidth. Defaults: --size gpt2\n"
               "--dtype fp16 --prompt 128 --gen 128 --runs 3.\n");
    return rc;
}

int main(int argc, char **argv)
{
    bench_opts o = {NULL, "gpt2", TT_F16, 128, 128, 3};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return usage(stdout, 0);
        if (!v)
            return usage(stderr, 2);
        if (!strcmp(a, "--model"))
            o.model_dir = v;
        else if (!strcmp(a, "--size"))
            o.size = v;
        else if (!strcmp(a, "--dtype")) {
            if (tt_dtype_parse(v, &o.dtype) != 0)
                return usage(stderr, 2);
        } else if (!strcmp(a, "--prompt"))
            o.prompt = atoi(v);
        else if (!strcmp(a, "--gen"))
            o.gen = atoi(v);
        else if (!strcmp(a, "--runs"))
            o.runs = atoi(v);
        else
            return usage(stderr, 2);
        i++;
    }
    if (o.prompt < 2 || o.gen < 1 || o.runs < 1)
        return usage(stderr, 2);

    char why[200];
    if (!cuda_backend_available(why, sizeof why)) {
        fprintf(stderr, "cuda-bench: %s\n", why);
        return 1;
    }
    cuda_device_info_t info;
    tt_error err = {0};
    if (cuda_device_info(&info, &err) != TT_OK) {
        fprintf(stderr, "cuda-bench: %s\n", err.msg);
        return 1;
    }
    printf("device: %s, compute capability %d.%d, %d SMs, %.0f MiB, %.0f GB/s peak (%d MHz x %d bit)%s\n",
           info.name, info.cc_major, info.cc_minor, info.sm_count, (double)info.total_bytes / (1 << 20),
           info.peak_bandwidth / 1e9, info.memory_clock_khz / 1000, info.bus_width_bits,
           info.emulated ? " [host emulation: numbers are nominal]" : "");
    printf("build: %s\n", cuda_build_info());

    char tmp[4096] = "";
    const char *dir = o.model_dir;
    model *m = NULL;
    int rc = 1;
    if (!dir) {
        modelgen_options mo;
        modelgen_options_default(&mo);
        if (modelgen_options_gpt2(&mo, o.size) != 0 && modelgen_options_llama(&mo, o.size) != 0)
            return usage(stderr, 2);
        mo.dtype = o.dtype;
        const char *base = getenv("TMPDIR");
        snprintf(tmp, sizeof tmp, "%s/cuda-bench-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(tmp)) {
            fprintf(stderr, "cuda-bench: cannot create %s: %s\n", tmp, strerror(errno));
            return 1;
        }
        fprintf(stderr, "cuda-bench: writing a random %s model (%s) to %s\n", o.size, tt_dtype_name(o.dtype), tmp);
        if (modelgen_write(tmp, &mo, &err) != TT_OK)
            goto fail;
        dir = tmp;
    }
    if (model_load(dir, &m, &err) != TT_OK)
        goto fail;
    if (o.prompt + o.gen > m->config.maxT) {
        fprintf(stderr, "cuda-bench: --prompt + --gen exceed the context of %d\n", m->config.maxT);
        rc = 2;
        goto out;
    }
    printf("model: %s (%s), %zu parameters, held in %s; prompt %d, decode %d, %d runs\n",
           o.model_dir ? m->name : o.size, o.model_dir ? "file" : "random", m->n_params, tt_dtype_name(o.dtype),
           o.prompt, o.gen, o.runs);
    bench_out with, without;
    if (bench_engine(m, &o, true, &with, &err) != 0 || bench_engine(m, &o, false, &without, &err) != 0)
        goto fail;
    printf("prefill: %.1f ms for %d tokens = %.0f tokens/s\n", with.prefill_s * 1e3, o.prompt,
           o.prompt / with.prefill_s);
    printf("decode, graphs on:  %.3f ms/token = %.1f tokens/s\n", with.decode_s * 1e3, 1.0 / with.decode_s);
    printf("decode, graphs off: %.3f ms/token = %.1f tokens/s (graphs: %.2fx)\n", without.decode_s * 1e3,
           1.0 / without.decode_s, without.decode_s / with.decode_s);
    printf("device memory held by the engine: %.0f MiB; weights read per step %.1f MB\n",
           (double)with.st.device_bytes / (1 << 20), (double)with.st.weight_bytes / 1e6);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "cuda-bench: %s\n", err.msg);
    rc = 1;
out:
    model_free(m);
    if (tmp[0])
        modelgen_remove_dir(tmp);
    return rc;
}
