/* check_model_gguf.c: a GGUF file loads as a model (core/model/model_gguf.c): the config from its
 * metadata, its tensors bound with a llama's q/k rows back in rotate-half order (the same logits
 * as its Hugging Face directory), quantized tensors read through dequantization, Q8_0 repacked
 * into the CPU's Q8 layout bit for bit, and broken files refused by name. */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/util.h"
#include "core/cpu/kernels.h"
#include "core/engine/engine.h"
#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/kernel_sets.h"
#include "tests/testutil.h"

static const char *fixture(const char *name)
{
    const char *srcdir = getenv("TOKENTOP_SRCDIR");
    return tu_path("%s/tests/fixtures/gguf/%s", srcdir ? srcdir : ".", name);
}

static model *load_ok(const char *path)
{
    model *m = NULL;
    tt_error err = {0};
    tt_status s = model_load(path, &m, &err);
    ck_assert_msg(s == TT_OK, "%s: %s (the fixtures: tests/fixtures/gguf/make.sh)", path, err.msg);
    return m;
}

static void expect_refused(const char *path, const char *needle)
{
    model *m = (model *)1;
    tt_error err = {0};
    ck_assert_int_ne(model_load(path, &m, &err), TT_OK);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(err.msg, needle), "message '%s' lacks '%s'", err.msg, needle);
}

/* Ids inside the tiny vocabularies (323 tokens), a sentence's worth. */
static const int32_t IDS[] = {1, 17, 250, 3, 99, 100, 42, 7, 311, 64, 5, 200};
#define N_IDS ((int)(sizeof IDS / sizeof IDS[0]))

/* IDS folded into a vocabulary of V tokens. */
static void ids_in(int V, int32_t ids[N_IDS])
{
    for (int i = 0; i < N_IDS; i++)
        ids[i] = IDS[i] % V;
}

START_TEST(gguf_llama_reads_the_config_of_its_hf_directory)
{
    model *hf = load_ok(fixture("tiny-llama"));
    model *g = load_ok(fixture("tiny-llama-f16.gguf"));
    const model_config *a = &hf->config, *b = &g->config;
    ck_assert_ptr_eq(b->arch, a->arch);
    ck_assert_int_eq(b->features, a->features);
    ck_assert_int_eq(b->V, a->V);
    ck_assert_int_eq(b->maxT, a->maxT);
    ck_assert_int_eq(b->C, a->C);
    ck_assert_int_eq(b->NH, a->NH);
    ck_assert_int_eq(b->NKV, a->NKV);
    ck_assert_int_eq(b->HS, a->HS);
    ck_assert_int_eq(b->L, a->L);
    ck_assert_int_eq(b->FF, a->FF);
    ck_assert_float_eq(b->norm_eps, a->norm_eps);
    ck_assert(b->rope.theta == a->rope.theta);
    ck_assert_int_eq(b->bos_id, a->bos_id);
    ck_assert_int_eq(model_eos(g), model_eos(hf));
    ck_assert_int_eq(g->n_params, hf->n_params);
    ck_assert_int_eq(g->file_dtype, TT_GGUF);
    ck_assert_str_eq(g->quantization, "F16");
    ck_assert_str_eq(g->name, "tiny-llama-f16.gguf");
    model_free(g);
    model_free(hf);
}
END_TEST

/* The converter rounds the directory's fp32 weights to fp16 as the engine's fp16 does, so an
 * fp16 engine over either computes the same bits, and the F32 file is the directory's weights:
 * a q or k row out of place (the adjacent-pair order llama.cpp writes) would change every logit. */
START_TEST(gguf_llama_f16_and_f32_give_the_logits_of_its_hf_directory)
{
    model *hf = load_ok(fixture("tiny-llama"));
    model *g = load_ok(fixture("tiny-llama-f16.gguf"));
    const int V = hf->config.V;
    float *a = tu_all_logits(hf, TT_F16, 1, IDS, N_IDS);
    float *b = tu_all_logits(g, TT_F16, 1, IDS, N_IDS);
    for (int i = 0; i < N_IDS * V; i++)
        ck_assert_msg(a[i] == b[i], "logit %d (position %d): HF fp16 %.9g, GGUF F16 %.9g", i % V,
                      i / V, a[i], b[i]);
    free(a);
    free(b);
    model_free(g);
    /* The F32 file holds the directory's weights exactly: the same fp32 logits, bit for bit. */
    g = load_ok(fixture("tiny-llama-f32.gguf"));
    ck_assert_int_eq(g->file_dtype, TT_F32);
    a = tu_all_logits(hf, TT_F32, 1, IDS, N_IDS);
    b = tu_all_logits(g, TT_F32, 1, IDS, N_IDS);
    for (int i = 0; i < N_IDS * V; i++)
        ck_assert_msg(a[i] == b[i], "logit %d (position %d): HF fp32 %.9g, GGUF F32 %.9g", i % V,
                      i / V, a[i], b[i]);
    free(a);
    free(b);
    model_free(g);
    model_free(hf);
}
END_TEST

START_TEST(gguf_q8_0_is_held_as_q8_by_default_and_repacked_bit_for_bit)
{
    model *g = load_ok(fixture("tiny-llama-q8_0.gguf"));
    ck_assert_int_eq(g->file_dtype, TT_Q8);
    ck_assert_str_eq(g->quantization, "Q8_0");
    const int roles[] = {ARCH_T_Q, ARCH_T_K, ARCH_T_UP, ARCH_T_DOWN};
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++) {
        tensor_ref t = model_layer_tensors(g, 1)[roles[i]];
        ck_assert(t.quantized);
        ck_assert_int_eq(t.quant, QUANT_Q8_0);
        const int K = t.row_len;
        const int N = roles[i] == ARCH_T_Q ? model_config_qdim(&g->config)
                      : roles[i] == ARCH_T_K ? model_config_kvdim(&g->config)
                      : roles[i] == ARCH_T_UP ? g->config.FF : g->config.C;
        packed_matrix pm;
        tt_error err = {0};
        ck_assert(packed_matrix_init(&pm, TT_Q8, K, N, &err) == TT_OK);
        packed_matrix_pack(&pm, t, true, 0, N);
        float *row = malloc((size_t)K * sizeof *row);
        for (int n = 0; n < N; n++) {
            tensor_ref_to_f32(t, (size_t)n * (size_t)K, (size_t)K, row);
            for (int k = 0; k < K; k++)
                ck_assert_msg(packed_matrix_get(&pm, k, n) == row[k],
                              "role %d (%d, %d): packed %.9g, file %.9g", roles[i], k, n,
                              packed_matrix_get(&pm, k, n), row[k]);
        }
        /* The scales are the file's bits: column n's first block is row n's first 2 bytes. */
        for (int n = 0; n < N; n++) {
            uint16_t want, got;
            memcpy(&want, tensor_ref_row(t, (size_t)n), 2);
            const uint8_t *panel = (const uint8_t *)pm.data + (size_t)(n / KERNELS_NR) * pm.panel_elems;
            memcpy(&got, panel + 2 * (n % KERNELS_NR), 2);
            ck_assert_uint_eq(got, want);
        }
        free(row);
        packed_matrix_free(&pm);
    }
    model_free(g);
}
END_TEST

/* A Q8_0 file's q8 engine repacks its matrices after the first step (cpu.c, "Deferred
 * repacking"); until then each matmul packs the panels it reads into a window. Spans of 1, 5 and
 * 12 tokens (the decode, few-rows and many-rows matmuls, 1 and 2 threads) give the same logits
 * as the first step of a fresh engine, with the windows, as the steps beside its repacking
 * thread, and after the repack; an engine freed while its repacking thread runs stops it. */
START_TEST(gguf_q8_0_gives_the_same_logits_before_and_after_its_deferred_repack)
{
    const char *files[] = {"tiny-llama-q8_0.gguf", "tiny-qwen3-q8_0.gguf"};
    const int spans[] = {1, 5, N_IDS};
    tt_error err = {0};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        model *g = load_ok(fixture(files[f]));
        const int V = g->config.V, L = g->config.L;
        int32_t ids[N_IDS];
        ids_in(V, ids);
        for (int threads = 1; threads <= 2; threads++)
            for (size_t s = 0; s < sizeof spans / sizeof spans[0]; s++) {
                const int n = spans[s];
                engine *fresh = tu_cpu_engine(g, TT_Q8, threads, 0);
                ck_assert_msg(engine_forward(fresh, ids, n, 0, true, &err) == TT_OK, "%s", err.msg);
                engine *e = tu_cpu_engine(g, TT_Q8, threads, 0);
                ck_assert_int_eq(cpu_engine_finish_load(e), 4 * L + 1);
                ck_assert_int_eq(cpu_engine_finish_load(e), 0);
                ck_assert(engine_forward(e, ids, n, 0, true, &err) == TT_OK);
                ck_assert_msg(memcmp(engine_logits(fresh, 0), engine_logits(e, 0),
                                     (size_t)n * (size_t)V * sizeof(float)) == 0,
                              "%s, %d threads, %d tokens: logits differ before the repack",
                              files[f], threads, n);
                /* Its repacking thread started after that step: steps beside it read the panels
                 * done from its copy, the rest from windows. */
                for (int k = 0; k < 3; k++) {
                    ck_assert(engine_forward(fresh, ids, n, 0, true, &err) == TT_OK);
                    ck_assert_msg(memcmp(engine_logits(fresh, 0), engine_logits(e, 0),
                                         (size_t)n * (size_t)V * sizeof(float)) == 0,
                                  "%s, %d threads, %d tokens: logits differ during the repack",
                                  files[f], threads, n);
                }
                engine_free(fresh);    /* its repacking thread may be running */
                engine_free(e);
            }
        model_free(g);
    }
    model *f16 = load_ok(fixture("tiny-llama-f16.gguf"));
    engine *e = tu_cpu_engine(f16, TT_Q8, 1, 0);
    ck_assert_int_eq(cpu_engine_finish_load(e), 0);    /* quantized at creation: nothing waits */
    engine_free(e);
    model_free(f16);
}
END_TEST

/* A float file's matrices (and a quantized part not regrouped: Q8_0 held as stored) are read
 * where the file stores them, and copied onto huge pages after the first step (cpu.c, "Copies
 * onto huge pages"); a step meanwhile reads the rows done from the copy, a part being copied
 * split where its matrix has room (the lm_head, gate | up), the rest from the file. Copied that
 * far ahead (one run of rows, parts cut in the middle, all), spans of 1, 5 and 12 tokens on 1 and
 * 2 threads give the logits of an engine that copies nothing yet, bit for bit; so do steps beside
 * its own copying thread, and after cpu_engine_finish_load. */
START_TEST(gguf_float_rows_give_the_same_logits_before_during_and_after_their_copy)
{
    const char *files[] = {"tiny-llama-f16.gguf", "tiny-llama-bf16.gguf", "tiny-qwen2-f16.gguf",
                           "tiny-llama-q8_0.gguf", "tiny-llama-256-q4_k_m.gguf"};
    const int spans[] = {1, 5, N_IDS};
    const int64_t aheads[] = {1, 40, 100, 333, 1000, 5000, INT64_MAX};
    tt_error err = {0};
    int copying = 0, copiers = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        model *g = load_ok(fixture(files[f]));
        const int V = g->config.V;
        int32_t ids[N_IDS];
        ids_in(V, ids);
        for (int threads = 1; threads <= 2; threads++)
            for (size_t s = 0; s < sizeof spans / sizeof spans[0]; s++) {
                const int n = spans[s];
                const size_t bytes = (size_t)n * (size_t)V * sizeof(float);
                engine *ref = tu_cpu_engine(g, TT_GGUF, threads, 0);
                ck_assert_msg(engine_forward(ref, ids, n, 0, true, &err) == TT_OK, "%s", err.msg);
                int before = INT_MAX;
                for (size_t a = 0; a < sizeof aheads / sizeof aheads[0]; a++) {
                    engine *e = tu_cpu_engine(g, TT_GGUF, threads, 0);
                    const int left = cpu_engine_copy_ahead(e, aheads[a]);
                    if (left < 0) {            /* nothing to copy: no huge pages, or none read
                                                  from the file (the quantized file's regrouped) */
                        engine_free(e);
                        break;
                    }
                    ck_assert_int_le(left, before);
                    before = left;
                    copiers++;
                    copying += left > 0;
                    ck_assert(engine_forward(e, ids, n, 0, true, &err) == TT_OK);
                    ck_assert_msg(memcmp(engine_logits(ref, 0), engine_logits(e, 0), bytes) == 0,
                                  "%s, %d threads, %d tokens, %lld rows copied ahead: logits "
                                  "differ", files[f], threads, n, (long long)aheads[a]);
                    if (aheads[a] == INT64_MAX)
                        ck_assert_int_eq(left, 0);
                    /* its copying thread started after that step, and goes on in the pauses */
                    nanosleep(&(struct timespec){0, 20 * 1000000}, NULL);
                    ck_assert(engine_forward(e, ids, n, 0, true, &err) == TT_OK);
                    ck_assert_msg(memcmp(engine_logits(ref, 0), engine_logits(e, 0), bytes) == 0,
                                  "%s, %d threads, %d tokens: logits differ beside the copying",
                                  files[f], threads, n);
                    ck_assert_int_eq(cpu_engine_copy_ahead(e, 1), -1);   /* its thread's now */
                    if (a == 0) {
                        cpu_engine_finish_load(e);
                        ck_assert(engine_forward(e, ids, n, 0, true, &err) == TT_OK);
                        ck_assert_msg(memcmp(engine_logits(ref, 0), engine_logits(e, 0), bytes) ==
                                          0,
                                      "%s, %d threads, %d tokens: logits differ after the copy",
                                      files[f], threads, n);
                    }
                    engine_free(e);            /* its copying thread may be running */
                }
                engine_free(ref);
            }
        model_free(g);
    }
    /* where the kernel gives huge pages, steps ran on parts copied in part */
    ck_assert_msg(!copiers || copying > 0, "no step ran on a part copied in part");
    ck_assert_int_eq(cpu_engine_copy_ahead(NULL, 1), -1);
}
END_TEST

/* A caller about to wait for a person starts the engine's background loading before the first
 * step (cpu_engine_load_in_background: the REPL at its prompt): the copies are done by the time
 * cpu_engine_finish_load returns, nothing is left to copy ahead, and the first step's logits are
 * the bits of an engine that copied nothing. */
START_TEST(gguf_float_rows_are_copied_before_the_first_step_when_asked)
{
    model *g = load_ok(fixture("tiny-llama-f16.gguf"));
    int32_t ids[N_IDS];
    ids_in(g->config.V, ids);
    const size_t bytes = (size_t)N_IDS * (size_t)g->config.V * sizeof(float);
    tt_error err = {0};
    engine *ref = tu_cpu_engine(g, TT_GGUF, 2, 0);
    ck_assert_msg(engine_forward(ref, ids, N_IDS, 0, true, &err) == TT_OK, "%s", err.msg);
    engine *e = tu_cpu_engine(g, TT_GGUF, 2, 0);
    const int left = cpu_engine_copy_ahead(e, 0);   /* 0 rows: asks; -1: no huge pages */
    cpu_engine_load_in_background(e);
    cpu_engine_load_in_background(e);                /* once */
    if (left >= 0)
        ck_assert_int_eq(cpu_engine_copy_ahead(e, 1), -1);   /* its thread's now */
    cpu_engine_finish_load(e);
    ck_assert(engine_forward(e, ids, N_IDS, 0, true, &err) == TT_OK);
    ck_assert_msg(memcmp(engine_logits(ref, 0), engine_logits(e, 0), bytes) == 0,
                  "logits differ after a copy before the first step");
    engine_free(e);
    engine_free(ref);
    cpu_engine_load_in_background(NULL);
    model_free(g);
}
END_TEST

static double max_diff(const float *a, const float *b, int n)
{
    double w = 0;
    for (int i = 0; i < n; i++)
        w = fmax(w, fabs((double)a[i] - b[i]));
    return w;
}

/* The Q8_0 file's weights are the directory's quantized by llama.cpp's rounding: a Q8 engine
 * over it is as far from the directory's fp32 logits as a Q8 engine over the directory (which
 * quantizes at load), and the dequantized file read in fp32 is near both. */
START_TEST(gguf_q8_0_stays_within_quantization_noise_of_its_hf_directory)
{
    model *hf = load_ok(fixture("tiny-llama"));
    model *g = load_ok(fixture("tiny-llama-q8_0.gguf"));
    const int n = N_IDS * hf->config.V;
    float *ref = tu_all_logits(hf, TT_F32, 1, IDS, N_IDS);
    float *hf8 = tu_all_logits(hf, TT_Q8, 1, IDS, N_IDS);
    float *g8 = tu_all_logits(g, TT_Q8, 1, IDS, N_IDS);
    float *g32 = tu_all_logits(g, TT_F32, 1, IDS, N_IDS);
    double own = max_diff(ref, hf8, n), file = max_diff(ref, g8, n), deq = max_diff(ref, g32, n);
    ck_assert_msg(file <= 1.5 * own + 1e-3 && deq <= 1.5 * own + 1e-3,
                  "largest logit difference from the directory's fp32: its own q8 %g, the Q8_0 "
                  "file's q8 %g, the Q8_0 file in fp32 %g", own, file, deq);
    free(ref);
    free(hf8);
    free(g8);
    free(g32);
    model_free(g);
    model_free(hf);
}
END_TEST

/* A Q4_0, Q5_0 or Q4_K_M file (llama.cpp's llama-quantize; Q4_K_M mixes Q4_K and Q6_K) is held
 * as stored: the engine reads its blocks in place (its weight bytes are the file's tensors, no
 * copy), names the quantization, and its logits are as near the dequantized weights' fp32 logits
 * as a q8 engine's over the same weights (both quantize the activations to 8 bits; q8 rounds the
 * weights again on top). */
START_TEST(gguf_quantized_files_are_held_as_stored_near_their_fp32_logits)
{
    static const struct { const char *file, *quant; } files[] = {
        {"tiny-llama-256-q4_0.gguf", "Q4_0"},
        {"tiny-llama-256-q5_0.gguf", "Q5_0"},
        {"tiny-llama-256-q4_k_m.gguf", "Q4_K_M"},
    };
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        model *g = load_ok(fixture(files[f].file));
        ck_assert_int_eq(g->file_dtype, TT_GGUF);
        ck_assert_str_eq(g->quantization, files[f].quant);
        engine *e = tu_cpu_engine(g, TT_GGUF, 1, 0);
        ck_assert_msg(strstr(e->description, files[f].quant) && strstr(e->description, "as stored"),
                      "%s", e->description);
        size_t tensors = 0;
        for (size_t i = 0; i < gguf_tensor_count(g->gguf); i++)
            tensors += (size_t)gguf_tensor_at(g->gguf, i)->nbytes;
        ck_assert_msg(e->weight_bytes <= tensors, "%s: weight bytes %zu, the file's tensors %zu",
                      files[f].file, e->weight_bytes, tensors);
        engine_free(e);
        const int n = N_IDS * g->config.V;
        float *ref = tu_all_logits(g, TT_F32, 1, IDS, N_IDS);
        float *q8 = tu_all_logits(g, TT_Q8, 1, IDS, N_IDS);
        float *held = tu_all_logits(g, TT_GGUF, 2, IDS, N_IDS);
        double d8 = max_diff(ref, q8, n), dg = max_diff(ref, held, n);
        ck_assert_msg(dg <= 1.5 * d8 + 1e-4 && dg > 0.0,
                      "%s: largest logit difference from fp32: held as stored %g, q8 %g",
                      files[f].file, dg, d8);
        free(ref);
        free(q8);
        free(held);
        model_free(g);
    }
}
END_TEST

/* Logits of ids fed one token a forward (decode steps), (n, V): caller frees. */
static float *step_logits(const model *m, int n_threads, const int32_t *ids, int n)
{
    engine *e = tu_cpu_engine(m, TT_GGUF, n_threads, 0);
    const size_t V = (size_t)m->config.V;
    float *out = malloc((size_t)n * V * sizeof *out);
    ck_assert_ptr_nonnull(out);
    for (int t = 0; t < n; t++) {
        tt_error err = {0};
        ck_assert_msg(engine_forward(e, ids + t, 1, t, false, &err) == TT_OK, "%s", err.msg);
        memcpy(out + (size_t)t * V, e->logits, V * sizeof *out);
    }
    engine_free(e);
    return out;
}

/* A Q4_0 or Q5_0 file on a set that regroups those tensors at load (gguf_groups: the AVX-512
 * sets) gives, in a prefill and in decode steps, the greedy tokens of the row kernels (the avx2
 * set) and their logits within the fp32 rounding of the sums; the tiny model's output matrix
 * (V = 323 rows: no whole group at the end) mixes both. */
START_TEST(gguf_q4_0_and_q5_0_regrouped_give_the_row_kernels_tokens)
{
    static const char *const files[] = {"tiny-llama-256-q4_0.gguf", "tiny-llama-256-q5_0.gguf"};
    static const char *const sets[] = {"avx512", "avx512vnni", "avx512bf16", "amx"};
    if (!kernels_by_name("avx2")) {
        fprintf(stderr, "check_model_gguf: regrouped Q4_0/Q5_0 engines SKIPPED: no avx2 set\n");
        return;
    }
    int compared = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        model *g = load_ok(fixture(files[f]));
        const int V = g->config.V, n = N_IDS * V;
        setenv("TOKENTOP_KERNELS", "avx2", 1);
        float *rows = tu_all_logits(g, TT_GGUF, 2, IDS, N_IDS);
        for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
            const kernels *k = kernels_by_name(sets[s]);
            if (!k || !k->gguf_groups)
                continue;
            setenv("TOKENTOP_KERNELS", sets[s], 1);
            float *got[2] = {tu_all_logits(g, TT_GGUF, 2, IDS, N_IDS),
                             step_logits(g, 1, IDS, N_IDS)};
            for (int w = 0; w < 2; w++) {
                const double d = max_diff(rows, got[w], n);
                ck_assert_msg(d <= 1e-3 && (w == 1 || d > 0.0),
                              "%s, %s set, %s: largest logit difference from the row kernels %g",
                              files[f], sets[s], w ? "decode steps" : "prefill", d);
                for (int t = 0; t < N_IDS; t++) {
                    const float *a = rows + (size_t)t * V, *b = got[w] + (size_t)t * V;
                    int ia = 0, ib = 0, second = -1;
                    for (int v = 1; v < V; v++) {
                        ia = a[v] > a[ia] ? v : ia;
                        ib = b[v] > b[ib] ? v : ib;
                    }
                    for (int v = 0; v < V; v++)
                        if (v != ia && (second < 0 || a[v] > a[second]))
                            second = v;
                    /* a near tie may go either way within the rounding */
                    if (a[ia] - a[second] > 2e-3)
                        ck_assert_msg(ia == ib, "%s, %s set, %s, position %d: greedy %d, rows %d",
                                      files[f], sets[s], w ? "decode steps" : "prefill", t, ib,
                                      ia);
                }
                free(got[w]);
            }
            compared++;
        }
        unsetenv("TOKENTOP_KERNELS");
        free(rows);
        model_free(g);
    }
    if (!compared)
        fprintf(stderr, "check_model_gguf: regrouped Q4_0/Q5_0 engines SKIPPED: this CPU runs no "
                        "AVX-512 set\n");
}
END_TEST

/* A quantized file's decode row goes to the threads in runs of each one's share (cpu_matmul),
 * the group kernels streaming ahead of each run: which thread computes a row, and how far ahead
 * it prefetched, change no bits, so decode steps on one and on two threads give the same logits
 * on every set this CPU runs. */
START_TEST(gguf_quantized_decode_gives_the_same_logits_on_one_and_two_threads)
{
    static const char *const files[] = {"tiny-llama-256-q4_0.gguf", "tiny-llama-256-q5_0.gguf",
                                        "tiny-llama-256-q4_k_m.gguf"};
    const kernels *sets[8];
    const int ns = tu_kernel_sets(sets, false);
    int compared = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        model *g = load_ok(fixture(files[f]));
        const size_t n = (size_t)N_IDS * (size_t)g->config.V;
        for (int s = 0; s < ns; s++) {
            setenv("TOKENTOP_KERNELS", sets[s]->name, 1);
            float *one = step_logits(g, 1, IDS, N_IDS), *two = step_logits(g, 2, IDS, N_IDS);
            ck_assert_msg(memcmp(one, two, n * sizeof *one) == 0,
                          "%s, %s set: decode logits differ between 1 and 2 threads "
                          "(largest difference %g)", files[f], sets[s]->name,
                          max_diff(one, two, (int)n));
            free(one);
            free(two);
            compared++;
        }
        unsetenv("TOKENTOP_KERNELS");
        model_free(g);
    }
    ck_assert_int_gt(compared, 0);
}
END_TEST

/* An F16 file (llama with its permuted q/k rows, qwen2 with q/k/v biases) is held as stored by
 * default: the engine reads its rows in place (weight bytes the file's tensors, no copy) with fp32
 * activations, so its logits are nearer the fp32 engine's over the same weights than the
 * repacked fp16 engine's (which rounds the vectors to fp16), and each position's greedy token is
 * the fp16 engine's. */
START_TEST(gguf_f16_files_are_held_as_stored_near_their_fp32_logits)
{
    static const char *const files[] = {"tiny-llama-f16.gguf", "tiny-qwen2-f16.gguf"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        model *g = load_ok(fixture(files[f]));
        ck_assert_int_eq(g->file_dtype, TT_GGUF);
        engine *e = tu_cpu_engine(g, TT_GGUF, 1, 0);
        ck_assert_msg(strstr(e->description, "F16 (") && strstr(e->description, "as stored"),
                      "%s", e->description);
        size_t tensors = 0;
        for (size_t i = 0; i < gguf_tensor_count(g->gguf); i++)
            tensors += (size_t)gguf_tensor_at(g->gguf, i)->nbytes;
        /* the file's tensors, and the vectors (biases, norms) copied out as fp32 */
        ck_assert_msg(e->weight_bytes <= tensors + tensors / 50,
                      "%s: weight bytes %zu, the file's tensors %zu", files[f], e->weight_bytes,
                      tensors);
        engine_free(e);
        const int V = g->config.V, n = N_IDS * V;
        int32_t ids[N_IDS];
        ids_in(V, ids);
        float *ref = tu_all_logits(g, TT_F32, 1, ids, N_IDS);
        float *f16 = tu_all_logits(g, TT_F16, 1, ids, N_IDS);
        float *held = tu_all_logits(g, TT_GGUF, 2, ids, N_IDS);
        double d16 = max_diff(ref, f16, n), dg = max_diff(ref, held, n);
        ck_assert_msg(dg <= 1e-4 && dg < d16, "%s: largest logit difference from fp32: held as "
                      "stored %g, fp16 %g", files[f], dg, d16);
        for (int t = 0; t < N_IDS; t++) {
            int a = 0, b = 0;
            for (int v = 1; v < V; v++) {
                a = held[(size_t)t * V + v] > held[(size_t)t * V + a] ? v : a;
                b = f16[(size_t)t * V + v] > f16[(size_t)t * V + b] ? v : b;
            }
            ck_assert_msg(a == b, "%s position %d: greedy %d as stored, %d in fp16", files[f], t,
                          a, b);
        }
        free(ref);
        free(f16);
        free(held);
        model_free(g);
    }
}
END_TEST

/* A BF16 file is held as stored too. The sets with AVX512-BF16 and no AMX (avx512bf16) multiply
 * its rows by activations rounded to bf16 on vdpbf16ps (kernels.h: gguf_bf16_rows), as the held
 * bf16 engine does; the others by fp32 activations. In every set a prefill and decode steps give
 * the same bits, and the logits stay near the fp32 engine's over the same weights: within 1e-4
 * with fp32 activations, within twice the held bf16 engine's difference with bf16 ones. */
START_TEST(gguf_bf16_files_are_held_as_stored_with_the_same_bits_in_prefill_and_decode)
{
    static const char *const sets[] = {"avx2", "avx512", "avx512vnni", "avx512bf16"};
    model *g = load_ok(fixture("tiny-llama-bf16.gguf"));
    ck_assert_int_eq(g->file_dtype, TT_GGUF);
    engine *e = tu_cpu_engine(g, TT_GGUF, 1, 0);
    ck_assert_msg(strstr(e->description, "BF16 (") && strstr(e->description, "as stored"), "%s",
                  e->description);
    engine_free(e);
    const int V = g->config.V, n = N_IDS * V;
    float *ref = tu_all_logits(g, TT_F32, 1, IDS, N_IDS);
    int bf16_sets = 0;
    for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
        const kernels *k = kernels_by_name(sets[s]);
        if (!k)
            continue;
        setenv("TOKENTOP_KERNELS", sets[s], 1);
        float *pre = tu_all_logits(g, TT_GGUF, 2, IDS, N_IDS);
        float *steps = step_logits(g, 1, IDS, N_IDS);
        ck_assert_msg(memcmp(pre, steps, (size_t)n * sizeof *pre) == 0,
                      "%s set: decode steps differ from the prefill", sets[s]);
        const double d = max_diff(ref, pre, n);
        if (k->gguf_bf16_rows) {
            float *held = tu_all_logits(g, TT_BF16, 1, IDS, N_IDS);
            const double db = max_diff(ref, held, n);
            ck_assert_msg(d > 0.0 && d <= 2.0 * db + 1e-4, "%s set: largest logit difference "
                          "from fp32 %g, the held bf16 engine's %g", sets[s], d, db);
            free(held);
            bf16_sets++;
        } else {
            ck_assert_msg(d <= 1e-4, "%s set: largest logit difference from fp32 %g", sets[s], d);
        }
        free(pre);
        free(steps);
    }
    unsetenv("TOKENTOP_KERNELS");
    if (!bf16_sets)
        fprintf(stderr, "check_model_gguf: BF16 rows on vdpbf16ps SKIPPED: this CPU runs no "
                        "avx512bf16 set\n");
    free(ref);
    model_free(g);
}
END_TEST

START_TEST(gguf_qwen2_and_qwen3_load_with_their_recipes)
{
    model *q2 = load_ok(fixture("tiny-qwen2-f16.gguf"));
    ck_assert_str_eq(q2->config.arch->name, "qwen2");
    ck_assert(q2->config.features & ARCH_F_QKV_BIAS);
    ck_assert(!(q2->config.features & ARCH_F_QK_NORM));
    ck_assert_int_eq(model_layer_tensors(q2, 0)[ARCH_T_Q].head_rows, 0);
    model *q3 = load_ok(fixture("tiny-qwen3-q8_0.gguf"));
    ck_assert_str_eq(q3->config.arch->name, "qwen3");
    ck_assert(q3->config.features & ARCH_F_QK_NORM);
    ck_assert_int_eq(model_layer_tensors(q3, 0)[ARCH_T_K].head_rows, 0);
    model *ms[] = {q2, q3};
    for (int i = 0; i < 2; i++) {
        const int V = ms[i]->config.V;
        int32_t ids[N_IDS];
        ids_in(V, ids);
        float *l = tu_all_logits(ms[i], ms[i]->file_dtype, 1, ids, N_IDS);
        for (int j = 0; j < N_IDS * V; j++)
            ck_assert(isfinite(l[j]));
        free(l);
    }
    model_free(q3);
    model_free(q2);
}
END_TEST

/* A 2-head (HS 4) q matrix written in llama.cpp's order reads back in rotate-half order. */
START_TEST(head_rows_undo_the_adjacent_pair_permutation)
{
    /* Rotate-half rows r0..r7 (value = 10 r + k); llama.cpp stores, per head, r0 r2 r1 r3. */
    const int stored[8] = {0, 2, 1, 3, 4, 6, 5, 7};
    float w[8][3];
    for (int s = 0; s < 8; s++)
        for (int k = 0; k < 3; k++)
            w[s][k] = (float)(10 * stored[s] + k);
    tensor_ref t = {.data = w, .dtype = TT_F32, .row_len = 3, .head_rows = 4};
    float out[24];
    tensor_ref_to_f32(t, 0, 24, out);
    for (int i = 0; i < 24; i++)
        ck_assert_float_eq(out[i], (float)(10 * (i / 3) + i % 3));
    tensor_ref_to_f32(t, 4, 5, out);   /* across rows */
    ck_assert_float_eq(out[0], 11.0f);
    ck_assert_float_eq(out[2], 20.0f);
    ck_assert_float_eq(out[4], 22.0f);
}
END_TEST

/* Every quantized type reads through quant_dequantize_row, from any element offset: two rows of
 * 512 weights of random blocks (scales set to small finite fp16 values). */
START_TEST(quantized_tensors_read_as_their_dequantized_rows)
{
    const uint32_t types[] = {QUANT_Q4_0, QUANT_Q5_0, QUANT_Q8_0, QUANT_Q4_K, QUANT_Q6_K};
    const int K = 512;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const uint32_t qt = types[ti];
        uint64_t rb;
        ck_assert(quant_row_bytes(qt, (uint64_t)K, &rb));
        unsigned char *buf = malloc(2 * rb);
        uint32_t x = 12345 + (uint32_t)ti;
        for (uint64_t i = 0; i < 2 * rb; i++) {
            x = x * 1664525u + 1013904223u;
            buf[i] = (unsigned char)(x >> 24);
        }
        /* Scales: every fp16 at a block's start (and Q4_K's dmin, Q6_K's d at its end) made
         * 0x2c00-ish, finite. */
        const size_t bb = quant_block_bytes(qt);
        for (uint64_t b = 0; b < 2 * rb / bb; b++) {
            unsigned char *blk = buf + b * bb;
            if (qt == QUANT_Q6_K) {
                blk[bb - 1] = 0x2c;
            } else {
                blk[1] = 0x2c;
                if (qt == QUANT_Q4_K)
                    blk[3] = 0x2c;
            }
        }
        float want[1024], got[1024];
        ck_assert(quant_dequantize_row(qt, buf, want, (uint64_t)K));
        ck_assert(quant_dequantize_row(qt, buf + rb, want + K, (uint64_t)K));
        tensor_ref t = {.data = buf, .dtype = TT_F32, .quantized = true, .quant = qt, .row_len = K};
        tensor_ref_to_f32(t, 0, 1024, got);
        ck_assert(memcmp(got, want, sizeof got) == 0);
        tensor_ref_to_f32(t, 300, 400, got);   /* mid-block, across the row boundary */
        ck_assert_msg(memcmp(got, want + 300, 400 * sizeof *got) == 0, "%s", quant_type_name(qt));
        free(buf);
    }
}
END_TEST

static const char *const TEXTS[] = {
    "hello world", "the cat sat on the mat", " leading space", "Hello, World! 123",
    "caf\xc3\xa9 na\xc3\xafve \xe2\x82\xac 10", "new\nlines\n\n and  two  spaces", "x",
};

static tokenizer *gguf_tokenizer(const model *m)
{
    tokenizer *t = NULL;
    tt_error err = {0};
    ck_assert_msg(model_tokenizer_load(m, &t, &err) == TT_OK, "%s", err.msg);
    return t;
}

/* The llama (SentencePiece) tokenizer rebuilt from tokenizer.ggml.tokens/scores/token_type
 * encodes as the directory's tokenizer.json does, and decodes back to the text. */
START_TEST(gguf_llama_tokenizer_encodes_as_the_hf_directory)
{
    model *hf = load_ok(fixture("tiny-llama"));
    model *g = load_ok(fixture("tiny-llama-q8_0.gguf"));
    tokenizer *a = gguf_tokenizer(hf), *b = gguf_tokenizer(g);
    ck_assert_int_eq(tokenizer_bos_id(b), tokenizer_bos_id(a));
    ck_assert_int_eq(tokenizer_adds_bos(b), tokenizer_adds_bos(a));
    ck_assert_int_eq(tokenizer_eot_id(b), tokenizer_eot_id(a));
    ck_assert(tokenizer_is_special(b, 2));
    for (size_t i = 0; i < sizeof TEXTS / sizeof TEXTS[0]; i++) {
        int32_t *x, *y;
        int nx, ny;
        tt_error err = {0};
        ck_assert(tokenizer_encode(a, TEXTS[i], strlen(TEXTS[i]), &x, &nx, &err) == TT_OK);
        ck_assert(tokenizer_encode(b, TEXTS[i], strlen(TEXTS[i]), &y, &ny, &err) == TT_OK);
        ck_assert_msg(nx == ny && memcmp(x, y, (size_t)nx * sizeof *x) == 0,
                      "'%s': %d ids from tokenizer.json, %d from the GGUF", TEXTS[i], nx, ny);
        char *back;
        size_t len;
        ck_assert(tokenizer_decode_text(b, y, ny, &back, &len, &err) == TT_OK);
        ck_assert_str_eq(back, TEXTS[i]);
        free(back);
        free(x);
        free(y);
    }
    tokenizer_free(a);
    tokenizer_free(b);
    model_free(g);
    model_free(hf);
}
END_TEST

/* The byte-level (gpt2 model, pre qwen2) tokenizer of the qwen fixtures round-trips text. */
START_TEST(gguf_byte_level_tokenizer_round_trips_text)
{
    const char *files[] = {"tiny-qwen2-f16.gguf", "tiny-qwen3-q8_0.gguf"};
    for (int f = 0; f < 2; f++) {
        model *g = load_ok(fixture(files[f]));
        tokenizer *t = gguf_tokenizer(g);
        ck_assert_int_eq(tokenizer_vocab_size(t), g->config.V);
        for (size_t i = 0; i < sizeof TEXTS / sizeof TEXTS[0]; i++) {
            int32_t *y;
            int ny;
            char *back;
            size_t len;
            tt_error err = {0};
            ck_assert(tokenizer_encode(t, TEXTS[i], strlen(TEXTS[i]), &y, &ny, &err) == TT_OK);
            ck_assert(tokenizer_decode(t, y, ny, &back, &len, &err) == TT_OK);
            ck_assert_str_eq(back, TEXTS[i]);
            free(back);
            free(y);
        }
        tokenizer_free(t);
        model_free(g);
    }
}
END_TEST

/* GPT-2's vocab.json and merges.txt handed over as GGUF arrays (pre "gpt2") encode as the files
 * do; an unknown pre-tokenizer or model is refused by name. */
START_TEST(gguf_arrays_of_gpt2_encode_as_its_files_and_unknown_pre_is_refused)
{
    tokenizer *ref;
    tt_error err = {0};
    ck_assert_msg(tokenizer_load_dir(tu_gpt2_dir(), &ref, &err) == TT_OK, "%s", err.msg);
    const int V = tokenizer_vocab_size(ref);
    const char **tokens = malloc((size_t)V * sizeof *tokens);
    for (int i = 0; i < V; i++)
        tokens[i] = tokenizer_token_str(ref, i);
    size_t len;
    char *text = tu_read_file(tu_path("%s/merges.txt", tu_gpt2_dir()), &len);
    ck_assert_ptr_nonnull(text);
    const char **merges = malloc(60000 * sizeof *merges);
    int n = 0;
    for (char *line = strtok(text, "\n"); line && n < 60000; line = strtok(NULL, "\n"))
        if (line[0] != '#')
            merges[n++] = line;
    tokenizer_gguf_arrays a = {.model = "gpt2", .pre = "gpt2", .n_tokens = V, .tokens = tokens,
                               .n_merges = n, .merges = merges, .bos_id = -1, .eos_id = V - 1,
                               .unk_id = -1, .add_bos = 0};
    tokenizer *t;
    ck_assert_msg(tokenizer_load_gguf_arrays(&a, "gpt2.gguf", &t, &err) == TT_OK, "%s", err.msg);
    for (size_t i = 0; i < sizeof TEXTS / sizeof TEXTS[0]; i++) {
        int32_t *x, *y;
        int nx, ny;
        ck_assert(tokenizer_encode(ref, TEXTS[i], strlen(TEXTS[i]), &x, &nx, &err) == TT_OK);
        ck_assert(tokenizer_encode(t, TEXTS[i], strlen(TEXTS[i]), &y, &ny, &err) == TT_OK);
        ck_assert_msg(nx == ny && memcmp(x, y, (size_t)nx * sizeof *x) == 0, "'%s'", TEXTS[i]);
        free(x);
        free(y);
    }
    tokenizer_free(t);
    a.pre = "deepseek-coder";
    ck_assert_int_ne(tokenizer_load_gguf_arrays(&a, "gpt2.gguf", &t, &err), TT_OK);
    ck_assert_msg(strstr(err.msg, "tokenizer.ggml.pre: 'deepseek-coder'"), "%s", err.msg);
    a.pre = "gpt2";
    a.model = "bert";
    ck_assert_int_ne(tokenizer_load_gguf_arrays(&a, "gpt2.gguf", &t, &err), TT_OK);
    ck_assert_msg(strstr(err.msg, "tokenizer.ggml.model: 'bert'"), "%s", err.msg);
    free(merges);
    free(text);
    free(tokens);
    tokenizer_free(ref);
}
END_TEST

START_TEST(a_gguf_file_without_the_suffix_loads_by_its_magic)
{
    char *dir = tu_tmpdir();
    size_t len;
    char *bytes = tu_read_file(fixture("tiny-qwen2-f16.gguf"), &len);
    ck_assert_ptr_nonnull(bytes);
    const char *p = tu_path("%s/model", dir);
    ck_assert_int_eq(tu_write_file(p, bytes, len), 0);
    model *m = load_ok(p);
    ck_assert_str_eq(m->config.arch->name, "qwen2");
    model_free(m);
    free(bytes);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(a_truncated_gguf_is_refused_naming_the_file)
{
    char *dir = tu_tmpdir();
    size_t len;
    char *bytes = tu_read_file(fixture("tiny-llama-f16.gguf"), &len);
    ck_assert_ptr_nonnull(bytes);
    const char *p = tu_path("%s/cut.gguf", dir);
    ck_assert_int_eq(tu_write_file(p, bytes, len - 100), 0);
    expect_refused(p, "cut.gguf");
    ck_assert_int_eq(tu_write_file(p, bytes, 40), 0);
    expect_refused(p, "cut.gguf");
    free(bytes);
    tu_tmpdir_free(dir);
}
END_TEST

static Suite *model_gguf_suite(void)
{
    Suite *s = suite_create("model_gguf");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, gguf_llama_reads_the_config_of_its_hf_directory);
    tcase_add_test(tc, gguf_llama_f16_and_f32_give_the_logits_of_its_hf_directory);
    tcase_add_test(tc, gguf_q8_0_is_held_as_q8_by_default_and_repacked_bit_for_bit);
    tcase_add_test(tc, gguf_q8_0_gives_the_same_logits_before_and_after_its_deferred_repack);
    tcase_add_test(tc, gguf_float_rows_give_the_same_logits_before_during_and_after_their_copy);
    tcase_add_test(tc, gguf_float_rows_are_copied_before_the_first_step_when_asked);
    tcase_add_test(tc, gguf_q8_0_stays_within_quantization_noise_of_its_hf_directory);
    tcase_add_test(tc, gguf_quantized_files_are_held_as_stored_near_their_fp32_logits);
    tcase_add_test(tc, gguf_q4_0_and_q5_0_regrouped_give_the_row_kernels_tokens);
    tcase_add_test(tc, gguf_quantized_decode_gives_the_same_logits_on_one_and_two_threads);
    tcase_add_test(tc, gguf_f16_files_are_held_as_stored_near_their_fp32_logits);
    tcase_add_test(tc, gguf_bf16_files_are_held_as_stored_with_the_same_bits_in_prefill_and_decode);
    tcase_add_test(tc, gguf_qwen2_and_qwen3_load_with_their_recipes);
    tcase_add_test(tc, head_rows_undo_the_adjacent_pair_permutation);
    tcase_add_test(tc, quantized_tensors_read_as_their_dequantized_rows);
    tcase_add_test(tc, gguf_llama_tokenizer_encodes_as_the_hf_directory);
    tcase_add_test(tc, gguf_byte_level_tokenizer_round_trips_text);
    tcase_add_test(tc, gguf_arrays_of_gpt2_encode_as_its_files_and_unknown_pre_is_refused);
    tcase_add_test(tc, a_gguf_file_without_the_suffix_loads_by_its_magic);
    tcase_add_test(tc, a_truncated_gguf_is_refused_naming_the_file);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(model_gguf_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
