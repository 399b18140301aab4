/* llama_bench.c: prefill, time to first token and decode speed of llama.cpp, measured the way
 * `tokentop bench` measures tokentop, so the two can be compared on one machine.
 *
 * Not part of the build: compile it by hand against llama.cpp's libllama (see README.md).
 *
 *   llama_bench MODEL.gguf [-t THREADS] [-p PROMPT_TOKENS] [-n GEN_TOKENS] [--ctx N]
 *               [--fa auto|on|off] [--libdir DIR] [--no-extra-bufts] [--json] [--verbose]
 *   llama_bench MODEL.gguf --text TEXT [-n GEN_TOKENS]     greedy continuation, token ids
 *
 * Bench protocol (app/bench.c's): N random prompt ids (seeded), a 16-token warm-up, then the
 * median of three prefills of N tokens (each from an empty cache, logits of the last row only);
 * time to first token is that prefill plus reading the logits and taking the argmax. Then M
 * greedy decode steps after the last prefill, one token per llama_decode; the reported figure
 * is the median step time, argmax excluded as in tokentop.
 *
 * --no-extra-bufts keeps the weights in plain CPU buffers: no AMX tiles, no repacked layouts
 * (llama_model_params.use_extra_bufts = false). On the Xeon of tools/peer/README.md the AMX path
 * of a native build dies with SIGILL on Q8_0 weights.
 */
#include "llama_common.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ----------------------------------------------------------------------------------------- */
/* small helpers */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* splitmix64, only to spread the prompt ids over the vocabulary */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* one llama_decode of n tokens continuing the sequence; logits for the last one only */
static int decode_tokens(struct llama_context *ctx, llama_token *ids, int n)
{
    int rc = llama_decode(ctx, llama_batch_get_one(ids, n));
    if (rc != 0) {
        fprintf(stderr, "llama_decode: %d tokens: returned %d\n", n, rc);
        return 1;
    }
    llama_synchronize(ctx);
    return 0;
}

/* ----------------------------------------------------------------------------------------- */
/* modes */

static int run_text(struct llama_context *ctx, const struct llama_vocab *vocab, const char *text,
                    int M)
{
    int V = llama_vocab_n_tokens(vocab);
    int cap = (int)strlen(text) + 8;
    llama_token *ids = malloc((size_t)(cap + M) * sizeof *ids);
    if (!ids)
        return 1;
    int N = llama_tokenize(vocab, text, (int32_t)strlen(text), ids, cap, false, false);
    if (N <= 0) {
        fprintf(stderr, "llama_tokenize: \"%s\": returned %d\n", text, N);
        free(ids);
        return 1;
    }
    printf("prompt_ids:");
    for (int i = 0; i < N; i++)
        printf(" %d", ids[i]);
    printf("\ngen_ids:");
    if (decode_tokens(ctx, ids, N)) {
        free(ids);
        return 1;
    }
    for (int i = 0; i < M; i++) {
        ids[N + i] = argmax(llama_get_logits_ith(ctx, -1), V);
        printf(" %d", ids[N + i]);
        if (decode_tokens(ctx, ids + N + i, 1)) {
            free(ids);
            return 1;
        }
    }
    printf("\ngen_text: ");
    for (int i = 0; i < M; i++) {
        char piece[256];
        int n = llama_token_to_piece(vocab, ids[N + i], piece, sizeof piece, 0, true);
        if (n > 0)
            fwrite(piece, 1, (size_t)n, stdout);
    }
    printf("\n");
    free(ids);
    return 0;
}

static int run_bench(struct llama_context *ctx, const struct llama_vocab *vocab, int N, int M,
                     int threads, const char *model_path, int json)
{
    int V = llama_vocab_n_tokens(vocab);
    llama_token *ids = malloc((size_t)(N + M) * sizeof *ids);
    double *times = malloc((size_t)(M > 3 ? M : 3) * sizeof *times);
    if (!ids || !times) {
        free(ids);
        free(times);
        return 1;
    }
    uint64_t s = 1;
    for (int i = 0; i < N; i++)
        ids[i] = (llama_token)(rng_next(&s) % (uint64_t)V);
    llama_memory_t mem = llama_get_memory(ctx);

    /* warm-up: thread start, first touch of the compute buffers */
    int warm = N < 16 ? N : 16;
    if (decode_tokens(ctx, ids, warm))
        goto fail;

    /* prefill: the median of three, each from an empty cache */
    double ttft[3];
    for (int k = 0; k < 3; k++) {
        llama_memory_clear(mem, true);
        double t0 = now_s();
        if (decode_tokens(ctx, ids, N))
            goto fail;
        times[k] = now_s() - t0;
        ids[N] = argmax(llama_get_logits_ith(ctx, -1), V);
        ttft[k] = now_s() - t0;
    }
    double prefill_s = median(times, 3);
    double ttft_s = median(ttft, 3);

    /* decode: greedy, one token per call, after the last prefill */
    for (int i = 0; i < M; i++) {
        if (i > 0)
            ids[N + i] = argmax(llama_get_logits_ith(ctx, -1), V);
        double t0 = now_s();
        if (decode_tokens(ctx, ids + N + i, 1))
            goto fail;
        times[i] = now_s() - t0;
    }
    double decode_s = M > 0 ? median(times, M) : 0.0;

    if (json) {
        printf("{\"engine\":\"llama.cpp\",\"model\":\"%s\",\"threads\":%d,\"prompt_tokens\":%d,"
               "\"gen_tokens\":%d,\"prefill_tok_s\":%.3f,\"prefill_ms\":%.3f,\"ttft_ms\":%.3f,"
               "\"decode_tok_s\":%.3f,\"decode_ms_median\":%.4f}\n",
               model_path, threads, N, M, N / prefill_s, prefill_s * 1e3, ttft_s * 1e3,
               decode_s > 0 ? 1.0 / decode_s : 0.0, decode_s * 1e3);
    } else {
        printf("llama.cpp %s, %d threads\n", model_path, threads);
        printf("  prefill   %d tokens: %.1f tok/s (%.1f ms)\n", N, N / prefill_s, prefill_s * 1e3);
        printf("  first token %.1f ms\n", ttft_s * 1e3);
        printf("  decode    %d tokens: %.1f tok/s (median %.2f ms/token)\n", M,
               decode_s > 0 ? 1.0 / decode_s : 0.0, decode_s * 1e3);
    }
    free(ids);
    free(times);
    return 0;
fail:
    free(ids);
    free(times);
    return 1;
}

/* ----------------------------------------------------------------------------------------- */
/* main */

int main(int argc, char **argv)
{
    const char *model_path = NULL, *text = NULL, *libdir = NULL, *fa = "auto";
    int threads = 2, N = 256, M = 128, n_ctx = 0, json = 0, extra_bufts = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-t") && v)
            threads = atoi(argv[++i]);
        else if (!strcmp(a, "-p") && v)
            N = atoi(argv[++i]);
        else if (!strcmp(a, "-n") && v)
            M = atoi(argv[++i]);
        else if (!strcmp(a, "--ctx") && v)
            n_ctx = atoi(argv[++i]);
        else if (!strcmp(a, "--fa") && v)
            fa = argv[++i];
        else if (!strcmp(a, "--text") && v)
            text = argv[++i];
        else if (!strcmp(a, "--libdir") && v)
            libdir = argv[++i];
        else if (!strcmp(a, "--no-extra-bufts"))
            extra_bufts = 0;
        else if (!strcmp(a, "--json"))
            json = 1;
        else if (!strcmp(a, "--verbose"))
            verbose = 1;
        else if (a[0] != '-' && !model_path)
            model_path = a;
        else {
            fprintf(stderr, "llama_bench: unknown or incomplete option: %s\n", a);
            return 2;
        }
    }
    if (!model_path || threads < 1 || N < 1 || M < 0) {
        fprintf(stderr, "usage: llama_bench MODEL.gguf [-t N] [-p N] [-n N] [--ctx N] "
                        "[--fa auto|on|off] [--libdir DIR] [--no-extra-bufts] [--text TEXT] "
                        "[--json] [--verbose]\n");
        return 2;
    }

    struct llama_model *model = load_model("llama_bench", model_path, libdir, extra_bufts);
    if (!model)
        return 1;
    const struct llama_vocab *vocab = llama_model_get_vocab(model);

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx > 0 ? (uint32_t)n_ctx : (uint32_t)llama_model_n_ctx_train(model);
    cp.n_batch = cp.n_ubatch = (uint32_t)(N > 512 ? N : 512);   /* the prompt is one ubatch */
    cp.n_threads = cp.n_threads_batch = threads;
    cp.flash_attn_type = flash_attn_of(fa);
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "%s: llama_init_from_model failed\n", model_path);
        llama_model_free(model);
        return 1;
    }
    if (verbose)
        fprintf(stderr, "system_info: %s\n", llama_print_system_info());

    int rc = text ? run_text(ctx, vocab, text, M)
                  : run_bench(ctx, vocab, N, M, threads, model_path, json);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
