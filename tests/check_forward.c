/* check_forward.c: the CPU backend's logits equal an independent float64 reference
 * (tools/ref/gpt2_ref.py, committed in tests/golden/) for every weight dtype, name layout, tied or
 * untied lm_head, GELU variant and odd shape; kernel sets agree within rounding, and within a set
 * threads and span lengths do not change a single bit, so speculative greedy decoding gives the
 * tokens plain greedy decoding gives even where the top two logits are nearly tied. */
#include <check.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/engine/engine.h"
#include "core/cpu/kernels.h"
#include "core/model/model.h"
#include "core/model/modelgen.h"
#include "core/base/rng.h"
#include "core/model/safetensors.h"
#include "core/decode/sampler.h"
#include "core/decode/speculative.h"
#include "core/base/util.h"
#include "tests/testutil.h"

/* fp32 compute against float64: |got - ref| <= GOLDEN_TOL + GOLDEN_EPS * |ref|. Observed errors
 * are about 2e-6 on logits of magnitude 4; a weight rounded the wrong way or a dropped term gives
 * 1e-3 or more. */
#define GOLDEN_TOL 1e-4
#define GOLDEN_EPS 1e-4

/* A kernel set that rounds a BF16 matmul's activations to bf16 too (kernels.h: the amx and
 * avx512bf16 sets) is further from the reference, which keeps them fp32: 8 significant bits per
 * activation (relative error up to 2^-9) through every layer. Observed errors are up to 1.8e-2 on the golden models'
 * logits; the float64 check of the matmul itself is check_kernels'. */
#define GOLDEN_BF16_ACT_TOL 4e-2
#define GOLDEN_BF16_ACT_EPS 1e-2
/* ... and their top probabilities, which then move by up to about 3e-3 on the Llama goldens. The
 * Llama-family fixtures (RMSNorm, larger weights than modelgen's GPT-2s) carry the activations'
 * rounding further: their logits under such a set are held to GOLDEN_BF16_ACT_FAMILY_* instead
 * (observed up to 8.2e-2, avx512bf16 on AMD Zen 4). */
#define GOLDEN_BF16_ACT_TOP 1e-2
#define GOLDEN_BF16_ACT_FAMILY_TOL 1.5e-1
#define GOLDEN_BF16_ACT_FAMILY_EPS 2e-2

/* ---------------------------------------------------------------------------------------------
 * The golden models: the same options as tools/ref/mkgolden.sh (the checksum catches a mismatch). */

typedef struct {
    const char *name;              /* tests/golden/<name>.txt */
    tt_dtype held;                 /* engine_options.dtype */
    tu_model_spec model;
    const char *fixture;           /* a committed model (tests/fixtures/...) instead of modelgen's */
} golden_case;

static const golden_case golden_cases[] = {
    {"tiny-f32", TT_F32, {TT_F32, .seed = 1}, NULL},
    {"tiny-f32-as-bf16", TT_BF16, {TT_F32, .seed = 1}, NULL},
    {"tiny-f32-as-fp16", TT_F16, {TT_F32, .seed = 1}, NULL},
    {"tiny-f16", TT_F16, {TT_F16, .seed = 1}, NULL},
    {"tiny-bf16", TT_BF16, {TT_BF16, .seed = 1}, NULL},
    {"tiny-bf16-as-fp32", TT_F32, {TT_BF16, .seed = 1}, NULL},
    {"noprefix-masks", TT_F32, {TT_F32, .no_prefix = true, .mask_buffers = true, .seed = 7}, NULL},
    {"untied", TT_F32, {TT_F32, .untied = true, .seed = 2}, NULL},
    {"untied-f16-as-bf16", TT_BF16, {TT_F16, .untied = true, .seed = 2}, NULL},
    {"erf", TT_F32, {TT_F32, .erf = true, .seed = 3}, NULL},
    {"odd", TT_F32, {TT_F32, .seed = 5, .V = 301, .maxT = 40, .C = 36, .NH = 3, .L = 3, .FF = 99}, NULL},
    {"odd-bf16", TT_BF16,
     {TT_BF16, .seed = 5, .V = 301, .maxT = 40, .C = 36, .NH = 3, .L = 3, .FF = 99}, NULL},
    {"long", TT_F32, {TT_F32, .seed = 9, .V = 300, .maxT = 320, .C = 32, .NH = 2, .L = 2}, NULL},
    /* The Llama family: random models written in the exact Hugging Face layout by
     * tools/ref/mkllama.py, goldens by tools/ref/llama_ref.py (tools/ref/mkllama_golden.sh). */
    {"llama-gqa", TT_F32, {0}, "llama/llama-gqa"},
    {"llama-gqa-as-bf16", TT_BF16, {0}, "llama/llama-gqa"},
    {"llama-untied-rope3", TT_F32, {0}, "llama/llama-untied-rope3"},
    {"llama-untied-rope3-as-bf16", TT_BF16, {0}, "llama/llama-untied-rope3"},
    {"llama-untied-rope3-long", TT_F32, {0}, "llama/llama-untied-rope3"},
    {"llama-mha-sharded", TT_F32, {0}, "llama/llama-mha-sharded"},
    {"mistral", TT_F32, {0}, "llama/mistral"},
    {"mistral-long", TT_F32, {0}, "llama/mistral"},
    {"qwen2", TT_F32, {0}, "llama/qwen2"},
    {"qwen2-as-fp16", TT_F16, {0}, "llama/qwen2"},
    {"qwen3", TT_F32, {0}, "llama/qwen3"},
    {"qwen3-as-fp16", TT_F16, {0}, "llama/qwen3"},
    {"qwen3-long", TT_F32, {0}, "llama/qwen3"},
};
#define N_GOLDEN ((int)(sizeof golden_cases / sizeof golden_cases[0]))

typedef struct {
    uint64_t fnv;
    char dtype[16];
    int V, n_ids, n_rows;
    int32_t ids[512];
    int rows[8], argmax[8];
    float *logits[8];              /* (V) each */
    int n_greedy;                  /* the reference's own greedy continuation (Llama goldens) */
    int32_t greedy[64];
    int n_top[8];                  /* per row: its top-5 softmax probabilities (Llama goldens) */
    int top_id[8][8];
    double top_p[8][8];
} golden;

static void golden_read(const char *name, golden *g)
{
    memset(g, 0, sizeof *g);
    char *text = tu_read_golden(name);
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *p;
        if (sscanf(line, "safetensors_fnv1a64 %16llx", (unsigned long long *)&g->fnv) == 1)
            continue;
        if (sscanf(line, "dtype %15s", g->dtype) == 1 || sscanf(line, "V %d", &g->V) == 1)
            continue;
        if (strncmp(line, "ids ", 4) == 0) {
            g->n_ids = tu_golden_ids(line, g->ids, 512);
        } else if (strncmp(line, "greedy ", 7) == 0) {
            g->n_greedy = tu_golden_ids(line, g->greedy, 64);
        } else if (strncmp(line, "top ", 4) == 0) {
            int row, k, off = 0;
            ck_assert(sscanf(line, "top %d %d %n", &row, &k, &off) == 2 && k <= 8);
            int r = 0;
            while (r < g->n_rows && g->rows[r] != row && !(row < 0 && g->rows[r] == g->n_ids + row))
                r++;
            ck_assert_msg(r < g->n_rows, "tests/golden/%s.txt: top for row %d before its logits",
                          name, row);
            p = line + off;
            for (int i = 0; i < k; i++) {
                int n = 0;
                ck_assert(sscanf(p, "%d:%lf %n", &g->top_id[r][i], &g->top_p[r][i], &n) == 2);
                p += n;
            }
            g->n_top[r] = k;
        } else if (strncmp(line, "row ", 4) == 0) {
            ck_assert(g->n_rows < 8 && g->V > 0);
            int r = g->n_rows++;
            int off = 0;
            ck_assert(sscanf(line, "row %d argmax %d logits %n", &g->rows[r], &g->argmax[r],
                             &off) == 2);
            g->logits[r] = malloc((size_t)g->V * sizeof(float));
            p = line + off;
            for (int i = 0; i < g->V; i++) {
                char *end;
                g->logits[r][i] = strtof(p, &end);
                ck_assert_msg(end != p, "tests/golden/%s.txt: row %d has fewer than %d logits",
                              name, g->rows[r], g->V);
                p = end;
            }
        }
    }
    free(text);
    ck_assert_msg(g->fnv && g->V && g->n_ids && g->n_rows, "tests/golden/%s.txt: incomplete golden file", name);
}

static void golden_free(golden *g)
{
    for (int r = 0; r < g->n_rows; r++)
        free(g->logits[r]);
}

/* Compares row `row` of the engine's logits with the golden one; returns the largest error.
 * bf16_act: the engine rounds a BF16 matmul's activations (GOLDEN_BF16_ACT_*). */
static double compare_row(const golden *g, int r, const float *got, const char *what, bool bf16_act,
                          bool family)
{
    const float *ref = g->logits[r];
    const double abs_tol = !bf16_act ? GOLDEN_TOL
                           : family ? GOLDEN_BF16_ACT_FAMILY_TOL : GOLDEN_BF16_ACT_TOL;
    const double rel_tol = !bf16_act ? GOLDEN_EPS
                           : family ? GOLDEN_BF16_ACT_FAMILY_EPS : GOLDEN_BF16_ACT_EPS;
    double worst = 0.0;
    int best = 0;
    for (int i = 0; i < g->V; i++) {
        double err = fabs((double)got[i] - (double)ref[i]);
        double tol = abs_tol + rel_tol * fabs((double)ref[i]);
        ck_assert_msg(err <= tol, "%s: row %d logit %d: got %.7g, reference %.7g (error %.3g > %.3g)",
                      what, g->rows[r], i, got[i], ref[i], err, tol);
        worst = err > worst ? err : worst;
        if (got[i] > got[best])
            best = i;
    }
    /* The argmax agrees unless the reference's top two are within the tolerance. */
    double gap = (double)ref[g->argmax[r]] - (double)ref[best];
    ck_assert_msg(best == g->argmax[r] || gap <= 2 * abs_tol,
                  "%s: row %d argmax %d, reference %d", what, g->rows[r], best, g->argmax[r]);
    return worst;
}

/* The row's top softmax probabilities against the reference's, each within tol. */
static void compare_top(const golden *g, int r, const float *got, const char *what, double tol)
{
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < g->V; i++)
        mx = got[i] > mx ? got[i] : mx;
    for (int i = 0; i < g->V; i++)
        sum += exp((double)got[i] - mx);
    for (int k = 0; k < g->n_top[r]; k++) {
        double p = exp((double)got[g->top_id[r][k]] - mx) / sum;
        ck_assert_msg(fabs(p - g->top_p[r][k]) <= tol, "%s: row %d token %d: probability %.7f, "
                      "reference %.7f", what, g->rows[r], g->top_id[r][k], p, g->top_p[r][k]);
    }
}

/* The golden's model: a committed fixture, or modelgen's, checked against the golden's
 * checksum either way. */
static char *golden_model_dir(const golden_case *gc, const golden *g)
{
    char *dir = gc->fixture ? strdup(tu_path("%s/%s", TU_FIXTURES, gc->fixture))
                            : tu_write_model(&gc->model);
    const char *st = tu_path("%s/model.safetensors", dir);
    if (access(st, R_OK) != 0)
        st = tu_path("%s/model-00001-of-00002.safetensors", dir);
    size_t len;
    char *blob = tu_read_file(st, &len);
    ck_assert_ptr_nonnull(blob);
    uint64_t h = tu_fnv1a64(blob, len);
    free(blob);
    ck_assert_msg(h == g->fnv, "%s: %s is a different model.safetensors (FNV %016llx, golden "
                  "%016llx): regenerate tests/golden with tools/ref/%s", gc->name, dir,
                  (unsigned long long)h, (unsigned long long)g->fnv,
                  gc->fixture ? "mkllama_golden.sh" : "mkgolden.sh");
    return dir;
}

static void golden_model_dir_free(const golden_case *gc, char *dir)
{
    if (gc->fixture)
        free(dir);
    else
        tu_tmpdir_free(dir);
}

/* ---------------------------------------------------------------------------------------------
 * Golden comparisons */

START_TEST(logits_match_the_float64_reference)
{
    const golden_case *gc = &golden_cases[_i];
    golden g;
    golden_read(gc->name, &g);
    ck_assert_str_eq(g.dtype, tt_dtype_name(gc->held));

    char *dir = golden_model_dir(gc, &g);
    model *m;
    tt_error err;
    ck_assert_msg(model_load(dir, &m, &err) == TT_OK, "model_load: %s", err.msg);
    ck_assert_int_eq(m->config.V, g.V);
    engine *e = tu_cpu_engine(m, gc->held, 2, 0);
    ck_assert_msg(engine_forward(e, g.ids, g.n_ids, 0, true, &err) == TT_OK, "%s", err.msg);
    ck_assert_int_eq(e->n_logits, g.n_ids);
    ck_assert_int_eq(e->n_past, g.n_ids);
    char what[256];
    snprintf(what, sizeof what, "%s (%s)", gc->name, e->description);
    const bool bf16_act = gc->held == TT_BF16 && kernels_select()->bf16_rows;
    for (int r = 0; r < g.n_rows; r++) {
        double worst = compare_row(&g, r, engine_logits(e, g.rows[r]), what, bf16_act,
                                   gc->fixture != NULL);
        if (bf16_act && gc->fixture)
            fprintf(stderr, "  %s row %d: largest logit error %.3g\n", gc->name, g.rows[r], worst);
        /* The top probabilities (Llama goldens). */
        compare_top(&g, r, engine_logits(e, g.rows[r]), what,
                    bf16_act ? GOLDEN_BF16_ACT_TOP : gc->held == TT_F32 ? 1e-4 : 2e-3);
    }

    /* Last-row-only logits are the same bits. */
    float *last = malloc((size_t)g.V * sizeof(float));
    memcpy(last, engine_logits(e, g.n_ids - 1), (size_t)g.V * sizeof(float));
    ck_assert(engine_forward(e, g.ids, g.n_ids, 0, false, &err) == TT_OK);
    ck_assert_int_eq(e->n_logits, 1);
    ck_assert_msg(memcmp(last, engine_logits(e, 0), (size_t)g.V * sizeof(float)) == 0,
                  "%s: the last row alone differs from the last of all rows", what);
    free(last);

    /* The reference's greedy continuation, token for token. */
    if (g.n_greedy && gc->held == TT_F32) {
        engine_truncate(e, 0);
        int32_t seq[600];
        memcpy(seq, g.ids, (size_t)g.n_ids * sizeof *seq);
        ck_assert(engine_forward(e, seq, g.n_ids, 0, false, &err) == TT_OK);
        for (int i = 0; i < g.n_greedy; i++) {
            int32_t t = (int32_t)util_argmax(engine_logits(e, 0), g.V);
            ck_assert_msg(t == g.greedy[i], "%s: greedy token %d is %d, the reference's %d", what,
                          i, (int)t, (int)g.greedy[i]);
            seq[g.n_ids + i] = t;
            if (i + 1 < g.n_greedy)
                ck_assert(engine_forward(e, &seq[g.n_ids + i], 1, g.n_ids + i, false, &err) ==
                          TT_OK);
        }
    }

    engine_free(e);
    model_free(m);
    golden_free(&g);
    golden_model_dir_free(gc, dir);
}
END_TEST

START_TEST(reference_kernels_match_the_float64_reference)
{
    /* The portable path, forced the way a user would (TOKENTOP_KERNELS), for each dtype. */
    static const int cases[] = {0, 3, 4, 11};        /* tiny-f32, tiny-f16, tiny-bf16, odd-bf16 */
    setenv("TOKENTOP_KERNELS", "reference", 1);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const golden_case *gc = &golden_cases[cases[c]];
        golden g;
        golden_read(gc->name, &g);
        char *dir = tu_write_model(&gc->model);
        model *m;
        tt_error err;
        ck_assert(model_load(dir, &m, &err) == TT_OK);
        engine *e = tu_cpu_engine(m, gc->held, 2, 0);
        ck_assert_msg(strstr(e->description, "reference") != NULL, "%s", e->description);
        ck_assert(engine_forward(e, g.ids, g.n_ids, 0, true, &err) == TT_OK);
        for (int r = 0; r < g.n_rows; r++)
            compare_row(&g, r, engine_logits(e, g.rows[r]), e->description, false, false);
        engine_free(e);
        model_free(m);
        golden_free(&g);
        tu_tmpdir_free(dir);
    }
    unsetenv("TOKENTOP_KERNELS");
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Threads, kernel sets, dtypes */

START_TEST(thread_count_does_not_change_logits)
{
    /* Every output column and head is computed whole by one thread, so the split cannot change
     * the sums: the logits must be bit-identical, in every kernel set. */
    static const char *sets[] = {"reference",  "avx2", "avx512", "avx512vnni",
                                 "avx512bf16", "amx"};
    char *dir;
    model *m = tu_load_model(&golden_cases[10].model, &dir);   /* odd shapes */
    int32_t ids[37];
    for (int i = 0; i < 37; i++)
        ids[i] = (int32_t)((i * 53 + 7) % m->config.V);
    size_t n = (size_t)37 * (size_t)m->config.V;
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        if (!kernels_by_name(sets[k]))
            continue;
        setenv("TOKENTOP_KERNELS", sets[k], 1);
        for (tt_dtype d = TT_F32; d <= TT_Q8; d++) {
            float *one = tu_all_logits(m, d, 1, ids, 37);
            for (int nt = 2; nt <= 4; nt++) {
                float *many = tu_all_logits(m, d, nt, ids, 37);
                ck_assert_msg(memcmp(one, many, n * sizeof *one) == 0,
                              "%s %s: %d threads give other logits than 1", sets[k],
                              tt_dtype_name(d), nt);
                free(many);
            }
            free(one);
        }
    }
    unsetenv("TOKENTOP_KERNELS");
    tu_free_model(m, dir);
}
END_TEST

START_TEST(an_interrupt_stops_a_prefill_between_layers_and_keeps_the_cache_consistent)
{
    char *dir;
    model *m = tu_load_model(&golden_cases[10].model, &dir);
    int32_t ids[37];
    for (int i = 0; i < 37; i++)
        ids[i] = (int32_t)((i * 53 + 7) % m->config.V);
    float *want = tu_all_logits(m, TT_F32, 2, ids, 37);
    engine *e = tu_cpu_engine(m, TT_F32, 2, 0);
    static volatile sig_atomic_t flag;
    tt_error err = {0};
    ck_assert_int_eq(engine_forward(e, ids, 10, 0, false, &err), TT_OK);
    flag = 1;
    e->interrupt = &flag;
    ck_assert_int_eq(engine_forward(e, ids + 10, 27, 10, true, &err), TT_ERR_INTERRUPTED);
    ck_assert_str_eq(err.msg, "interrupted during prefill");
    ck_assert_int_eq(e->n_past, 10);                  /* the span is dropped, the prefix kept */
    ck_assert_int_eq(e->n_logits, 0);
    /* one-token forwards (decode steps) always finish */
    ck_assert_int_eq(engine_forward(e, ids + 10, 1, 10, false, &err), TT_OK);
    ck_assert_int_eq(e->n_past, 11);
    /* with the flag cleared the span runs again and gives what a fresh engine gives */
    flag = 0;
    ck_assert_int_eq(engine_forward(e, ids + 10, 27, 10, true, &err), TT_OK);
    size_t row = (size_t)m->config.V;
    ck_assert(memcmp(e->logits, want + 10 * row, 27 * row * sizeof *want) == 0);
    e->interrupt = NULL;
    engine_free(e);
    free(want);
    tu_free_model(m, dir);
}
END_TEST

START_TEST(simd_and_reference_engines_agree)
{
    /* Every SIMD set this CPU runs, chosen the way a user would (TOKENTOP_KERNELS), against the
     * portable kernels, for each dtype. */
    static const char *sets[] = {"amx", "avx512bf16", "avx512vnni", "avx512", "avx2"};
    char *dir;
    model *m = tu_load_model(&golden_cases[10].model, &dir);
    int32_t ids[33];
    for (int i = 0; i < 33; i++)
        ids[i] = (int32_t)((i * 29 + 3) % m->config.V);
    size_t n = (size_t)33 * (size_t)m->config.V;
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        if (!kernels_by_name(sets[k]))
            continue;
        for (tt_dtype d = TT_F32; d <= TT_Q8; d++) {
            setenv("TOKENTOP_KERNELS", sets[k], 1);
            engine *e = tu_cpu_engine(m, d, 2, 0);
            ck_assert_msg(strstr(e->description, sets[k]) != NULL, "%s", e->description);
            engine_free(e);
            float *fast = tu_all_logits(m, d, 2, ids, 33);
            setenv("TOKENTOP_KERNELS", "reference", 1);
            float *ref = tu_all_logits(m, d, 2, ids, 33);
            unsetenv("TOKENTOP_KERNELS");
            /* bf16 activations (the amx set): the golden models' tolerance for them */
            const bool bf16_act = d == TT_BF16 && kernels_by_name(sets[k])->bf16_rows;
            const float tol = bf16_act ? (float)GOLDEN_BF16_ACT_TOL : 2e-5f;
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(fabsf(fast[i] - ref[i]) <= tol * (1.0f + fabsf(ref[i])),
                              "%s %s [%zu]: simd %.9g reference %.9g", sets[k], tt_dtype_name(d),
                              i, fast[i], ref[i]);
            free(fast);
            free(ref);
        }
    }
    tu_free_model(m, dir);
}
END_TEST

START_TEST(exact_weights_give_the_same_logits_from_every_file_dtype)
{
    /* modelgen's exact weights are representable in all three dtypes: an F32, an F16 and a BF16
     * file held as fp32 are the same model and must give bit-identical logits. */
    float *out[3];
    int32_t ids[20];
    int V = 0;
    for (tt_dtype d = TT_F32; d <= TT_BF16; d++) {
        char *dir = tu_tmpdir();
        modelgen_options o;
        modelgen_options_default(&o);
        o.exact = true;
        o.dtype = d;
        o.seed = 4;
        tt_error err;
        ck_assert(modelgen_write(dir, &o, &err) == TT_OK);
        model *m;
        ck_assert(model_load(dir, &m, &err) == TT_OK);
        V = m->config.V;
        for (int i = 0; i < 20; i++)
            ids[i] = (int32_t)((i * 101 + 1) % V);
        out[d] = tu_all_logits(m, TT_F32, 2, ids, 20);
        tu_free_model(m, dir);
    }
    for (size_t i = 0; i < (size_t)20 * (size_t)V; i++) {
        ck_assert_msg(out[0][i] == out[1][i], "F32 vs F16 file at %zu: %.9g %.9g", i, out[0][i],
                      out[1][i]);
        ck_assert_msg(out[0][i] == out[2][i], "F32 vs BF16 file at %zu: %.9g %.9g", i, out[0][i],
                      out[2][i]);
    }
    for (int d = 0; d < 3; d++)
        free(out[d]);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Speculative greedy decoding on near ties */

/* A model whose top two logits are often closer than the rounding of their sums: modelgen's tiny
 * model with an untied lm_head rewritten as row_i = NEAR_COMMON * row_0 + NEAR_PRIVATE * row_i.
 * Every logit is then a large shared part (about 64, one ulp 7.6e-6) plus a small private one
 * (spread about 1e-3), and summing the same 64 products in another order moves a logit by a few
 * ulps: with the kernels of before (a decode GEMV with split accumulators, span tiles with one
 * chain), a verification span and a decode step disagreed on the argmax every few dozen tokens. */
#define NEAR_COMMON 64.0f
#define NEAR_PRIVATE 0x1p-10f

/* For q8 and bf16 weights the private part must survive the rounding, so it gets k blocks of its
 * own (q8: one scale per 32 k of a row; bf16: 8 significant bits per weight): the first 32 of the 64 columns hold the shared part, the last 32 the
 * private one, and the chain over k still adds a small private sum to a large shared one. */
static model *near_tie_model(char **dir, bool split_blocks)
{
    *dir = tu_tmpdir();
    modelgen_options o;
    modelgen_options_default(&o);
    o.untied_lm_head = true;
    o.seed = 13;
    tt_error err;
    ck_assert_msg(modelgen_write(*dir, &o, &err) == TT_OK, "%s", err.msg);
    const char *path = tu_path("%s/model.safetensors", *dir);
    size_t len;
    char *buf = tu_read_file(path, &len);
    ck_assert_ptr_nonnull(buf);
    safetensors_file *f;
    ck_assert_msg(safetensors_open_buffer(buf, len, path, &f, &err) == TT_OK, "%s", err.msg);
    const st_tensor *t = safetensors_find(f, "lm_head.weight");
    ck_assert_msg(t && t->dtype == ST_F32 && t->ndim == 2, "no F32 lm_head.weight in %s", path);
    const size_t V = (size_t)t->shape[0], C = (size_t)t->shape[1];
    char *data = buf + ((const char *)t->data - buf);
    safetensors_close(f);
    float *w = malloc(V * C * sizeof *w);
    memcpy(w, data, V * C * sizeof *w);
    ck_assert(!split_blocks || C == 2 * TT_Q8_BLOCK);
    for (size_t i = V; i-- > 0;)          /* row 0 last: the others read the original */
        for (size_t c = 0; c < C; c++)
            w[i * C + c] = !split_blocks ? NEAR_COMMON * w[c] + NEAR_PRIVATE * w[i * C + c]
                           : c < C / 2   ? NEAR_COMMON * w[c]
                                         : NEAR_PRIVATE * w[i * C + c];
    memcpy(data, w, V * C * sizeof *w);
    free(w);
    ck_assert_int_eq(tu_write_file(path, buf, len), 0);
    free(buf);
    model *m;
    ck_assert_msg(model_load(*dir, &m, &err) == TT_OK, "%s", err.msg);
    return m;
}

/* Gap between the largest and the second largest logit. */
static float top_gap(const float *v, int n)
{
    float a = -INFINITY, b = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (v[i] > a) {
            b = a;
            a = v[i];
        } else if (v[i] > b) {
            b = v[i];
        }
    }
    return a - b;
}

START_TEST(speculative_greedy_equals_plain_greedy_on_near_ties)
{
    /* Plain greedy decodes one token at a time; speculative greedy (the model as its own draft,
     * so every draft is plain greedy's token) verifies gamma + 1 tokens in one span and keeps
     * the target's argmax. The two outputs are equal only if a span row and a decode step give
     * the same logits: at a near tie any difference in the last bits changes the token and
     * everything after it. gamma 4 verifies in 5-row tiles, gamma 7 in 8-row ones (the
     * attention tile). */
    static const char *sets[] = {"reference",  "avx2", "avx512", "avx512vnni",
                                 "avx512bf16", "amx"};
    static const int gammas[] = {4, 7};
    enum { N_PROMPTS = 6, N_CTX = 64, NP = 5 };
    static const tt_dtype dtypes[] = {TT_F32, TT_Q8, TT_BF16};
    const tt_dtype dt = dtypes[_i];
    char *dir;
    model *m = near_tie_model(&dir, dt != TT_F32);
    const int V = m->config.V;
    sampler_params params;
    sampler_params_default(&params);
    params.greedy = true;
    spec *sp = spec_create(V);
    ck_assert_ptr_nonnull(sp);
    tt_error err;
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        if (!kernels_by_name(sets[k]))
            continue;
        setenv("TOKENTOP_KERNELS", sets[k], 1);
        engine *target = tu_cpu_engine(m, dt, 2, N_CTX), *draft = tu_cpu_engine(m, dt, 1, N_CTX);
        int near = 0, rejected = 0;
        for (int pi = 0; pi < N_PROMPTS; pi++) {
            int32_t plain[N_CTX], w[N_CTX];
            for (int i = 0; i < NP; i++)
                plain[i] = (int32_t)((pi * 97 + i * 31 + 1) % V);
            /* Plain greedy: the prompt in one span, then one token at a time. */
            engine_truncate(target, 0);
            ck_assert(engine_forward(target, plain, NP, 0, false, &err) == TT_OK);
            for (int n = NP; n < N_CTX; n++) {
                const float *l = engine_logits(target, 0);
                float gap = top_gap(l, V);
                near += gap > 0.0f && gap < 1e-5f;
                plain[n] = (int32_t)util_argmax(l, V);
                if (n + 1 < N_CTX)
                    ck_assert(engine_forward(target, &plain[n], 1, n, false, &err) == TT_OK);
            }
            for (size_t gi = 0; gi < sizeof gammas / sizeof gammas[0]; gi++) {
                engine_truncate(target, 0);
                engine_truncate(draft, 0);
                memcpy(w, plain, NP * sizeof *w);
                int n = NP;
                rng r;
                rng_seed(&r, 1);
                while (n < N_CTX) {
                    spec_request req = {.key = rng_next(&r), .pos = n, .tokens = w, .n = n, .gamma = gammas[gi],
                                        .max_tokens = N_CTX - n, .stop_id = -1, .banned = -1};
                    ck_assert_msg(spec_run_round(sp, target, draft, &params, &req,
                                                 &err) == TT_OK, "%s", err.msg);
                    const spec_round *R = spec_last_round(sp);
                    rejected += R->rejected;
                    for (int i = 0; i < R->n_out && n < N_CTX; i++)
                        w[n++] = R->out[i];
                }
                for (int i = NP; i < N_CTX; i++)
                    ck_assert_msg(w[i] == plain[i], "%s %s, prompt %d, gamma %d: speculative "
                                  "greedy gives token %d at position %d, plain greedy %d", sets[k],
                                  tt_dtype_name(dt), pi, gammas[gi], (int)w[i], i, (int)plain[i]);
            }
        }
        /* The case is a real test only if near ties occurred (the draft is the target itself,
         * so a rejection can only come from different logits). */
        ck_assert_msg(near >= 3, "%s %s: only %d steps with the top two logits within 1e-5",
                      sets[k], tt_dtype_name(dt), near);
        ck_assert_int_eq(rejected, 0);
        engine_free(target);
        engine_free(draft);
    }
    unsetenv("TOKENTOP_KERNELS");
    spec_free(sp);
    tu_free_model(m, dir);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Engine bookkeeping */

START_TEST(engine_reports_what_it_holds)
{
    char *dir;
    model *m = tu_load_model(&golden_cases[0].model, &dir);
    engine *e32 = tu_cpu_engine(m, TT_F32, 2, 0);
    engine *e16 = tu_cpu_engine(m, TT_BF16, 1, 16);
    ck_assert_str_eq(e32->ops->name, "cpu");
    ck_assert_int_eq(e32->n_ctx, m->config.maxT);
    ck_assert_int_eq(e16->n_ctx, 16);
    ck_assert_int_eq(e32->n_past, 0);
    ck_assert_msg(strstr(e32->description, "2 threads") && strstr(e32->description, "fp32"),
                  "%s", e32->description);
    ck_assert_msg(strstr(e16->description, "1 thread,") && strstr(e16->description, "bf16"),
                  "%s", e16->description);
    /* The tiny shapes are multiples of the 32-column panels: the bytes a decode step reads are
     * the model's own count (plus fp32 biases), half of it for bf16 matrices. */
    size_t want32 = model_weight_bytes(m, TT_F32);
    ck_assert_msg(e32->weight_bytes >= want32 && e32->weight_bytes <= want32 + want32 / 50,
                  "fp32 weight_bytes %zu, model says %zu", e32->weight_bytes, want32);
    ck_assert_msg(e16->weight_bytes < e32->weight_bytes * 6 / 10, "bf16 %zu vs fp32 %zu",
                  e16->weight_bytes, e32->weight_bytes);
    ck_assert(e32->memory_bytes > e32->weight_bytes);
    /* q8: 34 bytes per 32 weights (8.5 bits), the vectors fp32. */
    engine *e8 = tu_cpu_engine(m, TT_Q8, 1, 16);
    ck_assert_msg(strstr(e8->description, "q8"), "%s", e8->description);
    ck_assert_msg(e8->weight_bytes * 100 > e32->weight_bytes * 26 &&
                  e8->weight_bytes * 100 < e32->weight_bytes * 30, "q8 %zu vs fp32 %zu",
                  e8->weight_bytes, e32->weight_bytes);
    engine_free(e8);
    engine_free(e32);
    engine_free(e16);
    tu_free_model(m, dir);
}
END_TEST

/* engine_warm (before a step that follows a pacing hold) only reads: the logits of every later
 * step are the bits a step without it gives, in every dtype, from an empty cache, one that ends
 * inside a block of keys, and a full one. Under ASan this also checks that it reads nothing
 * outside the weights and the cache. */
START_TEST(a_warm_up_between_steps_changes_no_logit)
{
    char *dir;
    model *m = tu_load_model(&golden_cases[10].model, &dir);   /* odd shapes */
    const int T = m->config.maxT, V = m->config.V;
    int32_t *ids = malloc((size_t)T * sizeof *ids);
    float *want = malloc((size_t)T * (size_t)V * sizeof *want);
    ck_assert_ptr_nonnull(ids);
    ck_assert_ptr_nonnull(want);
    for (int i = 0; i < T; i++)
        ids[i] = (int32_t)((i * 31 + 5) % V);
    tt_error err = {0};
    for (tt_dtype d = TT_F32; d <= TT_Q8; d++) {
        for (int warm = 0; warm <= 1; warm++) {
            engine *e = tu_cpu_engine(m, d, 2, 0);
            if (warm)
                engine_warm(e, 0.2);
            ck_assert_int_eq(engine_forward(e, ids, 19, 0, false, &err), TT_OK);
            for (int t = 19; t < T; t++) {
                if (warm)
                    engine_warm(e, 0.2);
                ck_assert_int_eq(engine_forward(e, ids + t, 1, t, false, &err), TT_OK);
                float *row = want + (size_t)t * (size_t)V;
                if (!warm)
                    memcpy(row, engine_logits(e, 0), (size_t)V * sizeof *row);
                else
                    ck_assert_msg(memcmp(row, engine_logits(e, 0), (size_t)V * sizeof *row) == 0,
                                  "%s: position %d differs after a warm-up", tt_dtype_name(d), t);
            }
            if (warm)
                engine_warm(e, 0.2);   /* the cache full */
            engine_free(e);
        }
    }
    free(want);
    free(ids);
    tu_free_model(m, dir);
}
END_TEST

/* After its first step an engine's background thread moves its weights onto huge pages
 * (weight_arena_settle_paced: MADV_COLLAPSE, 2 MiB at a time, 8.7 MB of fp32 weights here) in the
 * pauses between the next steps (6 ms every fourth step here): every logit equals an engine
 * settled before its first step, and one settled at the end (cpu_engine_finish_load). */
START_TEST(steps_while_the_weights_move_onto_huge_pages_change_no_logit)
{
    char *dir;
    const tu_model_spec shape = {TT_F32, .seed = 7, .V = 4096, .maxT = 64, .C = 256, .NH = 4,
                                 .L = 8};
    model *m = tu_load_model(&shape, &dir);
    const int T = m->config.maxT, V = m->config.V;
    int32_t ids[64];
    for (int i = 0; i < T; i++)
        ids[i] = (int32_t)((i * 131 + 7) % V);
    float *want = malloc((size_t)T * (size_t)V * sizeof *want);
    ck_assert_ptr_nonnull(want);
    tt_error err = {0};
    const tt_dtype dts[] = {TT_F32, TT_Q8};
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
        engine *early = tu_cpu_engine(m, dts[k], 2, 0), *e = tu_cpu_engine(m, dts[k], 2, 0);
        cpu_engine_finish_load(early);     /* settled before any step */
        for (int t = 8; t <= T; t++) {
            const int pos = t == 8 ? 0 : t - 1, n = t == 8 ? 8 : 1;
            ck_assert_int_eq(engine_forward(early, ids + pos, n, pos, false, &err), TT_OK);
            memcpy(want + (size_t)(t - 1) * (size_t)V, engine_logits(early, 0),
                   (size_t)V * sizeof *want);
            ck_assert_int_eq(engine_forward(e, ids + pos, n, pos, false, &err), TT_OK);
            if (t % 4 == 0)
                usleep(6000);              /* a pause: the settling moves 2 MiB or more */
            if (t == T)
                break;
            ck_assert_msg(memcmp(want + (size_t)(t - 1) * (size_t)V, engine_logits(e, 0),
                                 (size_t)V * sizeof *want) == 0,
                          "%s: position %d differs while the weights move",
                          tt_dtype_name(dts[k]), t - 1);
        }
        cpu_engine_finish_load(e);
        engine_truncate(e, T - 1);
        ck_assert_int_eq(engine_forward(e, ids + T - 1, 1, T - 1, false, &err), TT_OK);
        ck_assert(memcmp(want + (size_t)(T - 1) * (size_t)V, engine_logits(e, 0),
                         (size_t)V * sizeof *want) == 0);
        engine_free(early);
        engine_free(e);
    }
    free(want);
    tu_free_model(m, dir);
}
END_TEST

START_TEST(context_longer_than_the_model_is_refused)
{
    char *dir;
    model *m = tu_load_model(&golden_cases[0].model, &dir);
    engine_options o;
    engine_options_default(&o);
    o.n_ctx = m->config.maxT + 1;
    engine *e = (engine *)1;
    tt_error err;
    ck_assert_int_eq(cpu_engine_create(m, &o, &e, &err), TT_ERR_ARG);
    ck_assert_ptr_null(e);
    ck_assert_msg(strstr(err.msg, "65") != NULL, "%s", err.msg);
    tu_free_model(m, dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("forward");
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, logits_match_the_float64_reference, 0, N_GOLDEN);
    tcase_add_test(tc, reference_kernels_match_the_float64_reference);
    suite_add_tcase(s, tc);
    tc = tu_add_case(s, "engine", TU_TESTS(
            thread_count_does_not_change_logits,
            an_interrupt_stops_a_prefill_between_layers_and_keeps_the_cache_consistent,
            simd_and_reference_engines_agree,
            exact_weights_give_the_same_logits_from_every_file_dtype));
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, speculative_greedy_equals_plain_greedy_on_near_ties, 0, 3);
    tcase_add_test(tc, engine_reports_what_it_holds);
    tcase_add_test(tc, a_warm_up_between_steps_changes_no_logit);
    tcase_add_test(tc, context_longer_than_the_model_is_refused);
    tcase_add_test(tc, steps_while_the_weights_move_onto_huge_pages_change_no_logit);
    return tu_run_suite(s);
}
