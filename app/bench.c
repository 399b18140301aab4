/* bench.c: `tokentop bench`: prefill and decode speed, time to first token, peak memory, the KV
 * cache's gain, and decode speed against the machine's measured read bandwidth. */
#include "app/bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "app/bench_batch.h"
#include "app/cli.h"
#include "core/base/clock.h"
#include "core/engine/engine.h"
#include "core/base/jsonw.h"
#include "core/model/gguf.h"
#include "core/model/model.h"
#include "core/model/modelgen.h"
#include "core/base/util.h"
#include "core/base/rng.h"
#include "core/cpu/threads.h"
#include "core/cpu/weight_arena.h"
#include "gpu/gpu_plugin.h"

typedef struct {
    const char *model_dir;
    const char *size;              /* --size: the random model's shapes (modelgen) */
    tt_dtype dtype;
    bool dtype_set;                /* --dtype given; else --model's file precision, as generate */
    int prompt_tokens;
    int gen_tokens;
    int n_threads;
    bool json;
    bool cuda;                     /* --backend cuda */
    int batch[BENCH_BATCH_MAX];    /* --batch sizes */
    int n_batch;
    bool attention;                /* --attention: decode again with the capture on */
} bench_options;

typedef struct {
    char model_name[256];
    char shapes[64];               /* the random model's --size, or "" */
    char arch[16];                 /* the architecture (core/arch) */
    char quant[16];                /* a GGUF file's quantization ("Q4_K_M"), or "" */
    double bits_per_weight;        /* a GGUF file's (gguf_bits_per_weight), or 0 */
    double kv_per_token;           /* KV cache bytes one position holds */
    bool random_model;
    char description[160];
    int threads;
    char threads_note[200];        /* the threads the engine used and why (CPU) */
    double prefill_s;              /* median of the prefill runs */
    double prefill_min_s, prefill_max_s;
    double prefill_gflop;          /* work in one prefill */
    double decode_median_s;        /* median per-token decode time */
    double decode_q1_s, decode_q3_s; /* quartiles of the per-token decode times */
    double decode_tail_s;          /* median of the last steps (at the longest context) */
    int nocache_ctx;               /* context length of the no-cache comparison */
    double nocache_s;              /* median time of one token recomputed without the cache */
    size_t weight_bytes;
    double kv_bytes;               /* KV cache bytes a decode step reads, mean over the steps */
    double bandwidth;              /* bytes/s: measured host read (the best pass), or the GPU's
                                      peak */
    double bandwidth_min, bandwidth_median, bandwidth_max; /* over the passes (host only) */
    double peak_rss;               /* bytes */
    /* --backend cuda only: */
    char device[320];
    double device_bytes;           /* device memory the engine holds */
    double decode_nograph_s;       /* median per-token decode time without CUDA graphs */
    double attn_off_s, attn_on_s;  /* --attention: the decode steps' median with the capture off
                                      and on, over alternating passes */
    bench_batch_row batch[BENCH_BATCH_MAX];   /* --batch */
} bench_result;

/* ---------------------------------------------------------------------------------------------
 * Read bandwidth: every thread streams its slice of a buffer larger than the caches. */

typedef unsigned long long bench_u64x2 __attribute__((vector_size(16)));

typedef struct {
    const bench_u64x2 *buf;
    size_t n;                      /* vectors */
    bool prefetch;                 /* also prefetch 4 KiB ahead (the GEMV does; so must the limit) */
    threadpool_chunks chunks;      /* 4 MiB each */
    unsigned long long sink[64];   /* per thread, so the sums are not optimized away */
} bandwidth_job;

#define BANDWIDTH_CHUNK ((size_t)(4 << 20) / sizeof(bench_u64x2))

static void bandwidth_run(void *varg, int ith, int nth)
{
    bandwidth_job *j = varg;
    bench_u64x2 s0 = {0, 0}, s1 = s0, s2 = s0, s3 = s0;
    int c;
    while ((c = threadpool_next_chunk(&j->chunks)) >= 0) {
        size_t i0 = (size_t)c * BANDWIDTH_CHUNK, i1 = i0 + BANDWIDTH_CHUNK;
        if (i1 > j->n)
            i1 = j->n;
        for (size_t i = i0; i + 4 <= i1; i += 4) {
            if (j->prefetch)
                __builtin_prefetch(j->buf + i + 256);
            s0 += j->buf[i];
            s1 += j->buf[i + 1];
            s2 += j->buf[i + 2];
            s3 += j->buf[i + 3];
        }
    }
    bench_u64x2 s = s0 + s1 + s2 + s3;
    j->sink[ith % 64] = s[0] + s[1];
}

#define BANDWIDTH_PASSES 6

/* Six passes over 512 MiB (twice a large L3), with and without software prefetch, in bytes per
 * second: the limit decode is compared with is the best this machine showed (r->bandwidth); the
 * least, median and best pass are its spread (on a shared machine they differ by 1.5x from one
 * run to the next). All 0 on failure. */
static void bench_bandwidth(int n_threads, bench_result *r)
{
    const size_t bytes = (size_t)512 << 20;
    threadpool *pool;
    if (threadpool_create(n_threads, &pool, NULL) != TT_OK)
        return;
    bandwidth_job j = {.n = bytes / sizeof(bench_u64x2)};
    /* On huge pages, as the engine's weights are (weight_arena.h): the limit is the best read. */
    weight_arena *arena = weight_arena_new(true);
    void *p = arena ? weight_arena_alloc(arena, bytes) : NULL;
    if (!p) {
        weight_arena_free(arena);
        threadpool_free(pool);
        return;
    }
    memset(p, 1, bytes);
    j.buf = p;
    double bw[BANDWIDTH_PASSES];
    for (int k = 0; k < BANDWIDTH_PASSES; k++) {
        j.prefetch = k % 2 == 1;
        threadpool_chunks_init(&j.chunks, (int)((j.n + BANDWIDTH_CHUNK - 1) / BANDWIDTH_CHUNK));
        double t0 = tt_now_s();
        threadpool_run(pool, bandwidth_run, &j);
        bw[k] = (double)bytes / (tt_now_s() - t0);
    }
    weight_arena_free(arena);
    threadpool_free(pool);
    r->bandwidth_median = tt_median(bw, BANDWIDTH_PASSES);     /* sorts bw */
    r->bandwidth_min = bw[0];
    r->bandwidth = r->bandwidth_max = bw[BANDWIDTH_PASSES - 1];
}

/* ---------------------------------------------------------------------------------------------
 * The measurements */

/* Matrix work of one token (2 flops per multiply-add), without the lm_head. */
static double flops_per_token(const model_config *c)
{
    return 2.0 * (model_config_macs_per_token(c, 0) - (double)c->C * c->V);
}

/* Attention work of n tokens starting at position 0: QK^T and PV over the causal prefix. */
static double attention_flops(const model_config *c, int n)
{
    return 2.0 * 2.0 * c->L * model_config_qdim(c) * ((double)n * (n + 1) / 2.0);
}

/* The median time of three forwards of ids[0..n) into an empty cache, leaving times[0..3) sorted;
 * -1 when the engine fails (err says why). */
static double time_from_empty(engine *e, const int32_t *ids, int n, double *times, tt_error *err)
{
    for (int k = 0; k < 3; k++) {
        engine_truncate(e, 0);
        double t0 = tt_now_s();
        if (engine_forward(e, ids, n, 0, false, err) != TT_OK)
            return -1;
        times[k] = tt_now_s() - t0;
    }
    return tt_median(times, 3);                  /* sorts times */
}

/* The median of the M decode steps ids[N ..] after the prefix of N (the cache already holds it). */
static double decode_pass(engine *e, const int32_t *ids, int N, int M, double *times, tt_error *err)
{
    engine_truncate(e, N);
    for (int i = 0; i < M; i++) {
        double t0 = tt_now_s();
        if (engine_forward(e, ids + N + i, 1, N + i, false, err) != TT_OK)
            return -1;
        times[i] = tt_now_s() - t0;
    }
    return tt_median(times, M);
}

/* --attention: the same decode steps with the attention capture off and on, in alternating
 * passes (so a change of the machine's load falls on both), each side the median of its passes'
 * medians. */
#define BENCH_ATTN_PASSES 5
static tt_status bench_attention(engine *e, const int32_t *ids, int N, int M, double *times,
                                 bench_result *r, tt_error *err)
{
    double off[BENCH_ATTN_PASSES], on[BENCH_ATTN_PASSES];
    for (int p = 0; p < BENCH_ATTN_PASSES; p++) {
        tt_status st = engine_set_attention(e, false, err);
        if (st == TT_OK && (off[p] = decode_pass(e, ids, N, M, times, err)) < 0)
            st = TT_ERR_DEVICE;
        if (st == TT_OK)
            st = engine_set_attention(e, true, err);
        if (st == TT_OK && (on[p] = decode_pass(e, ids, N, M, times, err)) < 0)
            st = TT_ERR_DEVICE;
        if (st != TT_OK) {
            engine_set_attention(e, false, NULL);
            return st;
        }
    }
    engine_set_attention(e, false, NULL);
    r->attn_off_s = tt_median(off, BENCH_ATTN_PASSES);
    r->attn_on_s = tt_median(on, BENCH_ATTN_PASSES);
    return TT_OK;
}

static int bench_run(engine *e, const bench_options *o, bench_result *r, tt_error *err)
{
    const model_config *cfg = e->config;
    const int N = o->prompt_tokens, M = o->gen_tokens, total = N + M;
    int32_t *ids = malloc((size_t)total * sizeof *ids);
    double *times = malloc((size_t)(M > 5 ? M : 5) * sizeof *times);
    int rc = 1;
    if (!ids || !times) {
        tt_fail(err, TT_ERR_NOMEM, "bench: out of memory");
        goto out;
    }
    rng g;
    rng_seed(&g, 1);
    for (int i = 0; i < N; i++)
        ids[i] = (int32_t)(rng_next(&g) % (uint64_t)cfg->V);

    /* Warm-up: first-touch of activations, thread start-up. */
    int warm = N < 16 ? N : 16;
    if (engine_forward(e, ids, warm, 0, false, err) != TT_OK)
        goto out;
    cpu_engine_finish_load(e);     /* the figures are the repacked engine's */

    /* Prefill: the median of three. */
    if ((r->prefill_s = time_from_empty(e, ids, N, times, err)) < 0)
        goto out;
    r->prefill_min_s = times[0];
    r->prefill_max_s = times[2];
    r->prefill_gflop = (flops_per_token(cfg) * N + attention_flops(cfg, N) +
                        2.0 * cfg->C * cfg->V) * 1e-9;

    /* Decode: greedy, one token per call, after the last prefill. */
    for (int i = 0; i < M; i++) {
        ids[N + i] = (int32_t)util_argmax(engine_logits(e, 0), cfg->V);
        double t0 = tt_now_s();
        if (engine_forward(e, ids + N + i, 1, N + i, false, err) != TT_OK)
            goto out;
        times[i] = tt_now_s() - t0;
    }
    /* Each step reads K and V (fp32) of every earlier position in every layer. */
    r->kv_bytes = (double)model_config_kv_bytes_per_token(cfg, sizeof(float)) *
                  (N + 0.5 * (M + 1));
    int tail = M < 8 ? M : 8;
    r->decode_tail_s = M > 0 ? tt_median(times + M - tail, tail) : 0.0;
    r->decode_median_s = M > 0 ? tt_median(times, M) : 0.0;   /* sorts times */
    r->decode_q1_s = M > 0 ? times[(M - 1) / 4] : 0.0;
    r->decode_q3_s = M > 0 ? times[(3 * (M - 1) + 3) / 4] : 0.0;

    /* Without the cache: every new token recomputes the whole context (a few steps only). */
    r->nocache_ctx = total;
    if ((r->nocache_s = time_from_empty(e, ids, total, times, err)) < 0)
        goto out;
    if (o->attention && bench_attention(e, ids, N, M, times, r, err) != TT_OK)
        goto out;
    rc = 0;
out:
    free(ids);
    free(times);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Output */

/* The fraction of the measured read that decoding at tps tokens a second, bytes a token, reads. */
static double bench_read_fraction(const bench_result *r, double bytes, double tps)
{
    return r->bandwidth > 0 ? bytes * tps / r->bandwidth : 0.0;
}

static void bench_print(const bench_options *o, const bench_result *r, FILE *f)
{
    double prefill_tps = o->prompt_tokens / r->prefill_s;
    double decode_tps = r->decode_median_s > 0 ? 1.0 / r->decode_median_s : 0.0;
    double tail_tps = r->decode_tail_s > 0 ? 1.0 / r->decode_tail_s : 0.0;
    double nocache_tps = 1.0 / r->nocache_s;
    double frac = bench_read_fraction(r, (double)r->weight_bytes, decode_tps);
    /* a step reads the KV cache too */
    double frac_kv = bench_read_fraction(r, (double)r->weight_bytes + r->kv_bytes, decode_tps);
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) < 0)
        load[0] = load[1] = load[2] = -1;
    char bpw[32];
    snprintf(bpw, sizeof bpw, ", %.2f bits a weight", r->bits_per_weight);
    if (r->random_model)
        fprintf(f, "tokentop bench: %s (random weights, %s shapes, %s)\n", r->model_name,
                r->shapes, r->arch);
    else
        fprintf(f, "tokentop bench: %s (%s%s%s%s)\n", r->model_name, r->arch,
                r->quant[0] ? ", " : "", r->quant, r->bits_per_weight > 0 ? bpw : "");
    fprintf(f, "  engine        %s\n", r->description);
    if (!o->cuda)
        fprintf(f, "  threads       %s\n", r->threads_note);
    fprintf(f, "  prefill       %d tokens: %.1f tok/s (%.1f ms, %.1f GFLOP/s; 3 runs: %.1f..%.1f "
            "tok/s)\n", o->prompt_tokens, prefill_tps, r->prefill_s * 1e3,
            r->prefill_gflop / r->prefill_s, o->prompt_tokens / r->prefill_max_s,
            o->prompt_tokens / r->prefill_min_s);
    fprintf(f, "  first token   %.1f ms (prefill of %d tokens + logits)\n", r->prefill_s * 1e3,
            o->prompt_tokens);
    fprintf(f, "  decode        %d tokens: %.1f tok/s (median %.2f ms/token; middle half of the "
            "steps %.1f..%.1f tok/s)\n", o->gen_tokens, decode_tps, r->decode_median_s * 1e3,
            r->decode_q3_s > 0 ? 1.0 / r->decode_q3_s : 0.0,
            r->decode_q1_s > 0 ? 1.0 / r->decode_q1_s : 0.0);
    fprintf(f, "  KV cache      at %d tokens: %.1f tok/s with the cache, %.2f tok/s without "
            "(recompute): %.0fx\n", r->nocache_ctx, tail_tps, nocache_tps,
            r->decode_tail_s > 0 ? r->nocache_s / r->decode_tail_s : 0.0);
    fprintf(f, "  weights       %.1f MB read per decoded token (+ %.1f MB of KV cache on average)\n",
            r->weight_bytes * 1e-6, r->kv_bytes * 1e-6);
    fprintf(f, "  KV per token  %.1f KiB (2 x layers x KV heads x head size x 4 bytes)\n",
            r->kv_per_token / 1024.0);
    if (o->cuda) {
        fprintf(f, "  device        %s, %.1f MB of device memory held\n", r->device,
                r->device_bytes * 1e-6);
        fprintf(f, "  CUDA graphs   decode %.1f tok/s replaying the captured step, %.1f tok/s "
                "launching it (%.2fx)\n", decode_tps,
                r->decode_nograph_s > 0 ? 1.0 / r->decode_nograph_s : 0.0,
                r->decode_nograph_s > 0 && r->decode_median_s > 0
                    ? r->decode_nograph_s / r->decode_median_s : 0.0);
        fprintf(f, "  bandwidth     %.1f GB/s device peak: decode runs at %.0f%% of that limit "
                "(%.1f tok/s max)\n", r->bandwidth * 1e-9, frac * 100.0,
                r->weight_bytes ? r->bandwidth / (double)r->weight_bytes : 0.0);
    } else {
        fprintf(f, "  bandwidth     %.1f GB/s measured read (best of %d passes, %d threads; least "
                "%.1f, median %.1f): decode runs at %.0f%% of that limit (%.1f tok/s max); "
                "%.0f%% counting the KV cache's reads too\n",
                r->bandwidth * 1e-9, BANDWIDTH_PASSES, r->threads, r->bandwidth_min * 1e-9,
                r->bandwidth_median * 1e-9, frac * 100.0,
                r->weight_bytes ? r->bandwidth / (double)r->weight_bytes : 0.0, frac_kv * 100.0);
    }
    if (o->n_batch > 0)
        bench_batch_print(f, r->batch, o->n_batch, r->weight_bytes, r->bandwidth);
    if (o->attention && r->attn_on_s > 0 && r->attn_off_s > 0)
        fprintf(f, "  attention     decode %.1f tok/s keeping every layer's and head's softmax row "
                "(--attention), %.1f tok/s without: %+.1f%% time per token (%d passes each)\n",
                1.0 / r->attn_on_s, 1.0 / r->attn_off_s,
                (r->attn_on_s / r->attn_off_s - 1.0) * 100.0, BENCH_ATTN_PASSES);
    fprintf(f, "  peak RSS      %.1f MB\n", r->peak_rss * 1e-6);
    fprintf(f, "  load average  %.2f %.2f %.2f (other work on the machine skews the numbers)\n",
            load[0], load[1], load[2]);
}

static void json_field(FILE *f, const char *key, double v, bool comma)
{
    fprintf(f, "\"%s\":", key);
    jsonw_number(f, v);
    if (comma)
        fputc(',', f);
}

static void bench_print_json(const bench_options *o, const bench_result *r, FILE *f)
{
    double decode_tps = r->decode_median_s > 0 ? 1.0 / r->decode_median_s : 0.0;
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) < 0)
        load[0] = -1;
    fputs("{\"model\":", f);
    jsonw_string(f, r->model_name, strlen(r->model_name));
    fprintf(f, ",\"random_model\":%s,\"engine\":", r->random_model ? "true" : "false");
    jsonw_string(f, r->description, strlen(r->description));
    fprintf(f, ",\"dtype\":\"%s\",\"threads\":%d,\"prompt_tokens\":%d,\"gen_tokens\":%d,",
            tt_dtype_name(o->dtype), r->threads, o->prompt_tokens, o->gen_tokens);
    json_field(f, "prefill_tok_s", o->prompt_tokens / r->prefill_s, true);
    json_field(f, "prefill_ms", r->prefill_s * 1e3, true);
    json_field(f, "prefill_gflop_s", r->prefill_gflop / r->prefill_s, true);
    json_field(f, "prefill_tok_s_min", o->prompt_tokens / r->prefill_max_s, true);
    json_field(f, "prefill_tok_s_max", o->prompt_tokens / r->prefill_min_s, true);
    json_field(f, "ttft_ms", r->prefill_s * 1e3, true);
    json_field(f, "decode_tok_s", decode_tps, true);
    json_field(f, "decode_ms_median", r->decode_median_s * 1e3, true);
    json_field(f, "decode_tok_s_q1", r->decode_q3_s > 0 ? 1.0 / r->decode_q3_s : 0.0, true);
    json_field(f, "decode_tok_s_q3", r->decode_q1_s > 0 ? 1.0 / r->decode_q1_s : 0.0, true);
    fprintf(f, "\"kv_context\":%d,", r->nocache_ctx);
    json_field(f, "kv_cached_tok_s", r->decode_tail_s > 0 ? 1.0 / r->decode_tail_s : 0.0, true);
    json_field(f, "kv_nocache_tok_s", 1.0 / r->nocache_s, true);
    json_field(f, "kv_speedup", r->decode_tail_s > 0 ? r->nocache_s / r->decode_tail_s : 0.0,
               true);
    fprintf(f, "\"weight_bytes_per_token\":%zu,", r->weight_bytes);
    json_field(f, "kv_bytes_per_token", r->kv_bytes, true);
    json_field(f, "kv_bytes_per_position", r->kv_per_token, true);
    fprintf(f, "\"arch\":\"%s\",", r->arch);
    if (r->quant[0])
        fprintf(f, "\"quantization\":\"%s\",", r->quant);
    if (r->bits_per_weight > 0)
        fprintf(f, "\"bits_per_weight\":%.3f,", r->bits_per_weight);
    json_field(f, "bandwidth_gb_s", r->bandwidth * 1e-9, true);
    if (!o->cuda) {
        json_field(f, "bandwidth_gb_s_min", r->bandwidth_min * 1e-9, true);
        json_field(f, "bandwidth_gb_s_median", r->bandwidth_median * 1e-9, true);
        json_field(f, "bandwidth_gb_s_max", r->bandwidth_max * 1e-9, true);
        fprintf(f, "\"bandwidth_passes\":%d,\"threads_note\":", BANDWIDTH_PASSES);
        jsonw_string(f, r->threads_note, strlen(r->threads_note));
        fputc(',', f);
    }
    json_field(f, "bandwidth_fraction", bench_read_fraction(r, (double)r->weight_bytes, decode_tps),
               true);
    json_field(f, "bandwidth_fraction_with_kv",
               bench_read_fraction(r, (double)r->weight_bytes + r->kv_bytes, decode_tps), true);
    json_field(f, "peak_rss_mb", r->peak_rss * 1e-6, true);
    fprintf(f, "\"backend\":\"%s\",", o->cuda ? "cuda" : "cpu");
    if (o->cuda) {
        fputs("\"device\":", f);
        jsonw_string(f, r->device, strlen(r->device));
        fputc(',', f);
        json_field(f, "device_memory_mb", r->device_bytes * 1e-6, true);
        json_field(f, "decode_nograph_tok_s",
                   r->decode_nograph_s > 0 ? 1.0 / r->decode_nograph_s : 0.0, true);
    }
    if (o->attention && r->attn_on_s > 0 && r->attn_off_s > 0) {
        json_field(f, "decode_tok_s_attention", 1.0 / r->attn_on_s, true);
        json_field(f, "decode_tok_s_attention_off", 1.0 / r->attn_off_s, true);
        json_field(f, "attention_overhead", r->attn_on_s / r->attn_off_s - 1.0, true);
    }
    if (o->n_batch > 0) {
        bench_batch_print_json(f, r->batch, o->n_batch, r->weight_bytes, r->bandwidth);
        fputc(',', f);
    }
    json_field(f, "load_average", load[0], false);
    fputs("}\n", f);
}

/* ---------------------------------------------------------------------------------------------
 * Entry */

static void bench_usage(FILE *f)
{
    fputs("usage: tokentop bench [--model DIR | --size NAME] [--dtype fp32|fp16|bf16|q8|gguf]\n"
          "                      [--prompt-tokens N]\n"
          "                      [--gen-tokens M] [--threads N] [--backend cpu|cuda] [--json]\n"
          "                      [--batch B1,B2,...] [--attention]\n"
          "Measures prefill and decode speed, time to first token, peak memory, decode with and\n"
          "without the KV cache, and decode speed against the measured memory read bandwidth.\n"
          "Without --model, a random model is written to a temporary directory and removed\n"
          "afterwards: GPT-2 124M's shapes, or --size NAME's (gpt2, gpt2-medium, gpt2-large,\n"
          "gpt2-xl, llama-3.2-1b, llama-3.2-3b, llama-3.1-8b, qwen2.5-0.5b, qwen2.5-1.5b,\n"
          "qwen3-0.6b, smollm2-135m, tinyllama-1.1b). --backend cuda measures the GPU engine instead:\n"
          "device memory, decode with and without CUDA graphs, and the fraction of the device's\n"
          "peak memory bandwidth. With --draft DIR or --random-pair: the speculative benchmark.\n"
          "--batch 1,2,4,8: decode throughput of B sequences advanced together, per size (the\n"
          "sizes' steps alternate, so a change of load falls on all).\n"
          "--attention: decode with the attention capture on and off (the attention view's cost).\n"
          "--dtype: the precision the weights are held in; default: --model's own (a GGUF's\n"
          "F16, Q8_0 or converted type, a directory's safetensors dtype), fp32 for a random model.\n",
          f);
}

static int parse_int(const char *opt, const char *s, int lo, int hi, int *out)
{
    long v;
    if (util_parse_long(s, lo, hi, &v) != UTIL_PARSE_OK) {
        fprintf(stderr, "tokentop bench: %s: expected an integer in [%d, %d], got %s\n", opt, lo,
                hi, s ? s : "nothing");
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int bench_parse(bench_options *o, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--model") == 0 && v) {
            o->model_dir = v;
            i++;
        } else if (strcmp(a, "--size") == 0 && v) {
            modelgen_options mo;
            modelgen_options_default(&mo);
            if (modelgen_options_gpt2(&mo, v) != 0 && modelgen_options_llama(&mo, v) != 0) {
                fprintf(stderr, "tokentop bench: --size: unknown shapes '%s' (tokentop bench "
                        "--help lists them)\n", v);
                return -1;
            }
            o->size = v;
            i++;
        } else if (strcmp(a, "--dtype") == 0 && v) {
            if (tt_dtype_parse(v, &o->dtype) != 0) {
                fprintf(stderr, "tokentop bench: --dtype: expected fp32, fp16, bf16, q8 or gguf, "
                        "got %s\n", v);
                return -1;
            }
            o->dtype_set = true;
            i++;
        } else if (strcmp(a, "--prompt-tokens") == 0) {
            if (parse_int(a, v, 1, 1 << 20, &o->prompt_tokens))
                return -1;
            i++;
        } else if (strcmp(a, "--gen-tokens") == 0) {
            if (parse_int(a, v, 1, 1 << 20, &o->gen_tokens))
                return -1;
            i++;
        } else if (strcmp(a, "--threads") == 0) {
            if (parse_int(a, v, 0, 1024, &o->n_threads))
                return -1;
            i++;
        } else if (strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (strcmp(a, "--attention") == 0) {
            o->attention = true;
        } else if (strcmp(a, "--batch") == 0) {
            if ((o->n_batch = bench_batch_parse(v, o->batch)) < 0)
                return -1;
            i++;
        } else if (strcmp(a, "--backend") == 0 && v) {
            if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0) {
                fprintf(stderr, "tokentop bench: --backend: expected cpu or cuda, got %s\n", v);
                return -1;
            }
            o->cuda = strcmp(v, "cuda") == 0;
            i++;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            bench_usage(stdout);
            return 1;
        } else {
            fprintf(stderr, "tokentop bench: unknown option or missing value: %s\n", a);
            bench_usage(stderr);
            return -1;
        }
    }
    return 0;
}

int bench_main(int argc, char **argv)
{
    bench_options o = {.dtype = TT_F32, .prompt_tokens = 256, .gen_tokens = 128};
    int rc = bench_parse(&o, argc, argv);
    if (rc != 0)
        return rc < 0 ? 2 : 0;

    bench_result r;
    memset(&r, 0, sizeof r);
    tt_error err = {0};
    char tmp[4096] = "";
    model *m = NULL;
    engine *e = NULL;
    const char *dir = o.model_dir;
    if (!dir) {
        const char *base = getenv("TMPDIR");
        snprintf(tmp, sizeof tmp, "%s/tokentop-bench-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(tmp)) {
            fprintf(stderr, "tokentop bench: cannot create a temporary directory %s: %s\n", tmp,
                    strerror(errno));
            return 1;
        }
        modelgen_options mo;
        modelgen_options_default(&mo);
        const char *size = o.size ? o.size : "gpt2";
        if (modelgen_options_gpt2(&mo, size) != 0)
            modelgen_options_llama(&mo, size);
        mo.dtype = tt_dtype_is_file_type(o.dtype) ? o.dtype : TT_F16;   /* q8: quantized at load */
        /* the other subcommands default to the embedded model; this one measures a released size */
        fprintf(stderr, "tokentop bench: no --model: benchmarking a random model with %s shapes "
                "(%s, in %s), not the embedded model (bench --model DIR for that)\n", size,
                tt_dtype_name(mo.dtype), tmp);
        if (modelgen_write(tmp, &mo, &err) != TT_OK)
            goto fail;
        dir = tmp;
        r.random_model = true;
    }
    if (model_load(dir, &m, &err) != TT_OK)
        goto fail;
    if (!o.dtype_set && !r.random_model)   /* a GGUF is measured as it is held, not as fp32 */
        o.dtype = cli_default_dtype(m, o.cuda);
    snprintf(r.arch, sizeof r.arch, "%s", m->config.arch->name);
    snprintf(r.quant, sizeof r.quant, "%s", m->quantization);
    if (m->gguf)
        r.bits_per_weight = gguf_bits_per_weight(m->gguf);
    snprintf(r.shapes, sizeof r.shapes, "%s", o.size ? o.size : "gpt2");
    r.kv_per_token = (double)model_config_kv_bytes_per_token(&m->config, sizeof(float));
    if (r.random_model)
        snprintf(r.model_name, sizeof r.model_name, "%s-random", o.size ? o.size : "gpt2");
    else
        snprintf(r.model_name, sizeof r.model_name, "%s", m->name);
    if (o.prompt_tokens + o.gen_tokens > m->config.maxT) {
        fprintf(stderr, "tokentop bench: --prompt-tokens %d + --gen-tokens %d exceed the model's "
                "context of %d\n", o.prompt_tokens, o.gen_tokens, m->config.maxT);
        rc = 2;
        goto out;
    }
    engine_options eo;
    engine_options_default(&eo);
    eo.dtype = o.dtype;
    eo.n_threads = o.n_threads;
    size_t kv_bytes_per_pos = 0;   /* 0: the CPU engine's fp32 cache */
    if (o.cuda) {
        char why[400];
        const gpu_plugin *gpu = cli_gpu_plugin(why, sizeof why);
        if (!gpu || !gpu->backend_available(why, sizeof why)) {
            fprintf(stderr, "tokentop bench: --backend cuda: %s\n", why);
            rc = 1;
            goto out;
        }
        cuda_engine_options co;
        gpu->engine_options_default(&co);
        co.use_graphs = false;
        if (gpu->engine_create(m, &eo, &co, &e, &err) != TT_OK)
            goto fail;
        bench_result nograph = r;
        if (!o.json)
            fprintf(stderr, "tokentop bench: %s: without CUDA graphs first ...\n", e->description);
        if (bench_run(e, &o, &nograph, &err) != 0)
            goto fail;
        r.decode_nograph_s = nograph.decode_median_s;
        engine_free(e);
        e = NULL;
        co.use_graphs = true;
        if (gpu->engine_create(m, &eo, &co, &e, &err) != TT_OK)
            goto fail;
        cuda_device_info_t info;
        if (gpu->device_info(&info, &err) != TT_OK)
            goto fail;
        snprintf(r.device, sizeof r.device, "%s%s", info.name,
                 info.emulated ? " (emulated: the figures mean nothing)" : "");
        r.bandwidth = info.peak_bandwidth;
        cuda_engine_stats cs;
        if (gpu->engine_get_stats(e, &cs)) {
            r.device_bytes = (double)cs.device_bytes;
            kv_bytes_per_pos = cs.kv_bytes_per_pos;   /* the cache is in the weight dtype */
        }
    } else if (cpu_engine_create(m, &eo, &e, &err) != TT_OK) {
        goto fail;
    }
    snprintf(r.description, sizeof r.description, "%s", e->description);
    r.weight_bytes = e->weight_bytes;
    r.threads = e->threads > 0 ? e->threads : o.n_threads > 0 ? o.n_threads : threadpool_cores();
    if (!o.json)
        fprintf(stderr, "tokentop bench: %s: prefill %d, decode %d ...\n", e->description,
                o.prompt_tokens, o.gen_tokens);
    if (bench_run(e, &o, &r, &err) != 0)
        goto fail;
    cpu_engine_describe_threads(e, r.threads_note, sizeof r.threads_note);
    if (o.n_batch > 0) {
        if (!o.json)
            fprintf(stderr, "tokentop bench: batched decode ...\n");
        if (bench_batch_run(e, o.batch, o.n_batch, o.prompt_tokens, o.gen_tokens, kv_bytes_per_pos,
                            r.batch, &err)
            != TT_OK)
            goto fail;
    }
    /* Peak RSS before the bandwidth test, whose buffer would otherwise dominate it; the engine
     * and the model (a GGUF file's mapped weights) freed before it, so that the process's peak
     * as others measure it (time -v) is the model's too, not the model's plus the buffer's. */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    r.peak_rss = (double)ru.ru_maxrss * 1024.0;
    engine_free(e);
    e = NULL;
    model_free(m);
    m = NULL;
    if (!o.cuda)
        bench_bandwidth(r.threads, &r);
    if (o.json)
        bench_print_json(&o, &r, stdout);
    else
        bench_print(&o, &r, stdout);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "tokentop bench: %s\n", err.msg);
    rc = 1;
out:
    engine_free(e);
    model_free(m);
    if (tmp[0])
        modelgen_remove_dir(tmp);
    return rc;
}
