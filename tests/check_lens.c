/* check_lens.c: the logit lens (core/engine/lens.h): off until asked and then free of side
 * effects on the logits; the last layer's lens is the model's own distribution for every
 * architecture and span shape; every layer's lens agrees with an independent float64 reference
 * (tools/ref/mklens_golden.sh, committed in tests/golden/lens-*.txt) within 1e-4; the summaries
 * rank and count as they say. The CUDA backend's rows are checked in check_gpu_common.h. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cpu/kernels.h"
#include "core/engine/engine.h"
#include "core/engine/lens.h"
#include "core/model/model.h"
#include "core/session/session.h"
#include "core/session/session_lens.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/testutil.h"
#include "ui/grid.h"
#include "ui/lens_pane.h"

/* ---------------------------------------------------------------------------------------------
 * Helpers */

/* softmax of V logits into p (double sums, as lens.c). */
static void softmax(const float *logits, int V, float *p)
{
    float mx = logits[0];
    for (int v = 1; v < V; v++)
        mx = logits[v] > mx ? logits[v] : mx;
    double sum = 0;
    for (int v = 0; v < V; v++)
        sum += exp((double)logits[v] - mx);
    for (int v = 0; v < V; v++)
        p[v] = (float)(exp((double)logits[v] - mx) / sum);
}

/* Largest |a - b| over n. */
static double max_diff(const float *a, const float *b, int n)
{
    double w = 0;
    for (int i = 0; i < n; i++)
        w = fabs((double)a[i] - b[i]) > w ? fabs((double)a[i] - b[i]) : w;
    return w;
}

/* The lens of e's last forward: (L + 1, V) probabilities, caller frees. */
static float *lens_all(const engine *e)
{
    const int rows = e->config->L + 1, V = e->config->V;
    float *p = malloc((size_t)rows * (size_t)V * sizeof(float));
    lens_layer *ly = malloc((size_t)rows * sizeof *ly);
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(ly);
    tt_error err = {0};
    ck_assert_msg(lens_engine_layers(e, 5, -1, ly, p, &err) == TT_OK, "%s", err.msg);
    free(ly);
    return p;
}

/* The random models of each family (check_arch's shapes) and GPT-2. */
static const tu_model_spec lens_specs[] = {
    {TT_F32, .seed = 1},
    {TT_F16, .seed = 2, .untied = true, .L = 3},
    {TT_F32, .seed = 11, .V = 300, .maxT = 48, .C = 64, .NH = 4, .L = 2, .FF = 96, .arch = "llama",
     .NKV = 2},
    {TT_F16, .seed = 12, .V = 301, .maxT = 48, .C = 48, .NH = 6, .L = 2, .FF = 80,
     .arch = "mistral", .NKV = 1, .untied = true},
    {TT_BF16, .seed = 13, .V = 300, .maxT = 48, .C = 64, .NH = 4, .L = 3, .FF = 96, .arch = "qwen2",
     .NKV = 2},
    {TT_F32, .seed = 14, .V = 299, .maxT = 48, .C = 64, .NH = 4, .L = 2, .FF = 96, .arch = "qwen3",
     .NKV = 2, .HS = 24},
};
#define N_SPECS ((int)(sizeof lens_specs / sizeof lens_specs[0]))

/* ---------------------------------------------------------------------------------------------
 * Off by default; no effect on the logits */

START_TEST(an_engine_keeps_no_residual_stream_until_asked)
{
    char *dir;
    model *m = tu_load_model(&lens_specs[0], &dir);
    engine *e = tu_cpu_engine(m, TT_F32, 1, 0);
    ck_assert_ptr_null(e->lens);
    int32_t ids[4] = {1, 2, 3, 4};
    tt_error err = {0};
    ck_assert(engine_forward(e, ids, 4, 0, false, &err) == TT_OK);
    lens_layer ly[8];
    ck_assert(lens_engine_layers(e, 5, -1, ly, NULL, &err) == TT_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "kept no residual stream") != NULL, "%s", err.msg);
    /* on, but before a forward */
    ck_assert(lens_enable(e, &err) == TT_OK);
    ck_assert(lens_engine_layers(e, 5, -1, ly, NULL, &err) == TT_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "no forward since") != NULL, "%s", err.msg);
    ck_assert(engine_forward(e, ids, 1, 4, false, &err) == TT_OK);
    ck_assert_int_eq(e->lens_pos, 4);
    ck_assert(lens_engine_layers(e, 5, -1, ly, NULL, &err) == TT_OK);
    /* a failed forward leaves no rows to read */
    int32_t bad = m->config.V;
    ck_assert(engine_forward(e, &bad, 1, 5, false, &err) != TT_OK);
    ck_assert(engine_forward(e, ids, 1, 99, false, &err) != TT_OK);
    lens_disable(e);
    ck_assert_ptr_null(e->lens);
    engine_free(e);
    tu_free_model(m, dir);
}
END_TEST

START_TEST(keeping_the_residual_stream_changes_no_logit)
{
    const tu_model_spec *ms = &lens_specs[_i];
    char *dir;
    model *m = tu_load_model(ms, &dir);
    const int V = m->config.V;
    int32_t ids[12];
    for (int i = 0; i < 12; i++)
        ids[i] = (int32_t)((i * 37 + 11) % V);
    engine *off = tu_cpu_engine(m, ms->file_dtype, 2, 0);
    engine *on = tu_cpu_engine(m, ms->file_dtype, 2, 0);
    tt_error err = {0};
    ck_assert(lens_enable(on, &err) == TT_OK);
    ck_assert(engine_forward(off, ids, 11, 0, true, &err) == TT_OK);
    ck_assert(engine_forward(on, ids, 11, 0, true, &err) == TT_OK);
    ck_assert_msg(memcmp(off->logits, on->logits, (size_t)11 * V * sizeof(float)) == 0,
                  "spec %d: the logits of a prefill differ with the lens on", _i);
    ck_assert(engine_forward(off, ids + 11, 1, 11, false, &err) == TT_OK);
    ck_assert(engine_forward(on, ids + 11, 1, 11, false, &err) == TT_OK);
    ck_assert_msg(memcmp(off->logits, on->logits, (size_t)V * sizeof(float)) == 0,
                  "spec %d: the logits of a decode step differ with the lens on", _i);
    engine_free(off);
    engine_free(on);
    tu_free_model(m, dir);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * The last layer is the model */

START_TEST(the_last_layers_lens_is_the_models_distribution)
{
    const tu_model_spec *ms = &lens_specs[_i];
    char *dir;
    model *m = tu_load_model(ms, &dir);
    const int V = m->config.V, L = m->config.L;
    /* fp32, the file's dtype and q8: the last row is the engine's own logits through the
     * softmax, kept at the forward, so it is the model's distribution to float rounding even
     * where the engine's head is not the lens' fp32 product (q8 rows quantized to 8 bits, bf16
     * activations in a kernel set that rounds them: kernels.h) */
    tt_dtype held[3] = {TT_F32, ms->file_dtype, TT_Q8};
    int32_t ids[40];
    for (int i = 0; i < 40; i++)
        ids[i] = (int32_t)((i * 37 + 11) % V);
    float *p = malloc((size_t)V * sizeof(float));
    for (int h = 0; h < 3; h++) {
        engine *e = tu_cpu_engine(m, held[h], 2, 0);
        tt_error err = {0};
        ck_assert(lens_enable(e, &err) == TT_OK);
        const double tol = 1e-6;
        /* a prefill (last row only), a decode step, a span with every row's logits */
        struct { int pos, n; bool all; } spans[] = {{0, 30, false}, {30, 1, false}, {31, 9, true}};
        for (int s = 0; s < 3; s++) {
            ck_assert(engine_forward(e, ids + spans[s].pos, spans[s].n, spans[s].pos, spans[s].all,
                                     &err) == TT_OK);
            ck_assert_int_eq(e->lens_pos, spans[s].pos + spans[s].n - 1);
            softmax(engine_logits(e, e->n_logits - 1), V, p);
            float *lens = lens_all(e);
            double d = max_diff(lens + (size_t)L * V, p, V);
            ck_assert_msg(d <= tol, "spec %d held %s span %d: the last layer's lens is %.3g from "
                          "the model's distribution", _i, tt_dtype_name(held[h]), s, d);
            /* and an earlier layer is something else */
            ck_assert_msg(max_diff(lens, p, V) > 10 * tol, "spec %d: layer 0 equals the output", _i);
            free(lens);
        }
        engine_free(e);
    }
    free(p);
    tu_free_model(m, dir);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Against the float64 reference */

typedef struct {
    const char *name;              /* tests/golden/lens-<name>.txt */
    tt_dtype held;
    tu_model_spec model;           /* modelgen's, as tools/ref/mklens_golden.sh writes it */
    const char *fixture;           /* or a committed model */
} lens_case;

static const lens_case lens_cases[] = {
    {"tiny-f32", TT_F32, {TT_F32, .seed = 1}, NULL},
    {"tiny-f32-as-fp16", TT_F16, {TT_F32, .seed = 1}, NULL},
    {"untied", TT_F32, {TT_F32, .untied = true, .seed = 2}, NULL},
    {"odd", TT_F32, {TT_F32, .seed = 5, .V = 301, .maxT = 40, .C = 36, .NH = 3, .L = 3, .FF = 99},
     NULL},
    {"llama-gqa", TT_F32, {0}, "llama/llama-gqa"},
    {"llama-untied-rope3", TT_F32, {0}, "llama/llama-untied-rope3"},
    {"llama-mha-sharded", TT_F32, {0}, "llama/llama-mha-sharded"},
    {"mistral", TT_F32, {0}, "llama/mistral"},
    {"qwen2", TT_F32, {0}, "llama/qwen2"},
    {"qwen3", TT_F32, {0}, "llama/qwen3"},
    {"qwen3-as-fp16", TT_F16, {0}, "llama/qwen3"},
};
#define N_CASES ((int)(sizeof lens_cases / sizeof lens_cases[0]))

/* The float64 lens against tokentop's: |got - ref| <= LENS_TOL everywhere (the bound),
 * and <= LENS_REL_TOL + LENS_REL_EPS * ref, which holds the many small probabilities of a random
 * model to their relative size as well. Observed: up to 3e-7 absolute. */
#define LENS_TOL 1e-4
#define LENS_REL_TOL 1e-6
#define LENS_REL_EPS 1e-3

START_TEST(every_layers_lens_matches_the_float64_reference)
{
    const lens_case *lc = &lens_cases[_i];
    char gname[64];
    snprintf(gname, sizeof gname, "lens-%s", lc->name);
    char *text = tu_read_golden(gname);
    int32_t ids[64];
    int n_ids = 0, V = 0, L = -1, n_lens = 0;
    unsigned long long fnv = 0;
    char dtype[16] = "";
    float *ref = NULL;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "ids ", 4) == 0) {
            n_ids = tu_golden_ids(line, ids, 64);
        } else if (sscanf(line, "safetensors_fnv1a64 %llx", &fnv) == 1 ||
                   sscanf(line, "dtype %15s", dtype) == 1 || sscanf(line, "V %d", &V) == 1) {
        } else if (sscanf(line, "L %d", &L) == 1) {
            ck_assert(V > 0 && L > 0);
            ref = malloc((size_t)(L + 1) * V * sizeof(float));
        } else if (strncmp(line, "lens ", 5) == 0) {
            int l, a, off;
            ck_assert_msg(ref && sscanf(line, "lens %d argmax %d probs %n", &l, &a, &off) == 2 &&
                          l == n_lens && l <= L, "%s.txt: bad lens line %d", gname, n_lens);
            char *p = line + off;
            for (int v = 0; v < V; v++) {
                char *end;
                ref[(size_t)l * V + v] = strtof(p, &end);
                ck_assert_msg(end != p, "%s.txt: layer %d has fewer than %d probabilities", gname,
                              l, V);
                p = end;
            }
            n_lens++;
        }
    }
    ck_assert_msg(n_ids > 0 && fnv && n_lens == L + 1, "%s.txt: incomplete", gname);
    ck_assert_str_eq(dtype, tt_dtype_name(lc->held));

    char *dir = lc->fixture ? strdup(tu_path("%s/%s", TU_FIXTURES, lc->fixture))
                            : tu_write_model(&lc->model);
    const char *st = tu_path("%s/model.safetensors", dir);
    if (access(st, R_OK) != 0)
        st = tu_path("%s/model-00001-of-00002.safetensors", dir);
    size_t len;
    char *blob = tu_read_file(st, &len);
    ck_assert_ptr_nonnull(blob);
    ck_assert_msg(tu_fnv1a64(blob, len) == fnv, "%s: %s is another model than the golden's: "
                  "regenerate with tools/ref/mklens_golden.sh", gname, dir);
    free(blob);
    model *m;
    tt_error err = {0};
    ck_assert_msg(model_load(dir, &m, &err) == TT_OK, "%s", err.msg);
    ck_assert_int_eq(m->config.V, V);
    ck_assert_int_eq(m->config.L, L);
    engine *e = tu_cpu_engine(m, lc->held, 2, 0);
    ck_assert(lens_enable(e, &err) == TT_OK);
    /* the prompt in two spans, so the rows come from a decode step */
    ck_assert(engine_forward(e, ids, n_ids - 1, 0, false, &err) == TT_OK);
    ck_assert(engine_forward(e, ids + n_ids - 1, 1, n_ids - 1, false, &err) == TT_OK);
    float *got = lens_all(e);
    double worst = 0;
    for (int l = 0; l <= L; l++)
        for (int v = 0; v < V; v++) {
            double r = ref[(size_t)l * V + v], g = got[(size_t)l * V + v], d = fabs(g - r);
            worst = d > worst ? d : worst;
            ck_assert_msg(d <= LENS_TOL && d <= LENS_REL_TOL + LENS_REL_EPS * r,
                          "%s: layer %d token %d: lens p %.7g, the reference's %.7g", gname, l, v,
                          g, r);
        }
    fprintf(stderr, "  %s: largest lens error %.3g\n", gname, worst);
    free(got);
    engine_free(e);
    model_free(m);
    if (lc->fixture)
        free(dir);
    else
        tu_tmpdir_free(dir);
    free(ref);
    free(text);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Summaries */

START_TEST(a_summary_ranks_the_tokens_and_places_the_one_asked_about)
{
    const float p[8] = {0.05f, 0.30f, 0.10f, 0.30f, 0.0f, 0.15f, 0.05f, 0.05f};
    lens_layer ly;
    lens_layer_summarize(p, 8, 3, 4, 6, &ly);
    ck_assert_int_eq(ly.layer, 3);
    ck_assert_int_eq(ly.n_top, 4);
    /* equal probabilities: the lower id first */
    int32_t want[4] = {1, 3, 5, 2};
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(ly.top_id[i], want[i]);
    ck_assert_float_eq(ly.top_p[0], 0.30f);
    ck_assert_float_eq(ly.top_p[3], 0.10f);
    ck_assert_float_eq(ly.p_token, 0.05f);
    ck_assert_int_eq(ly.rank_token, 6);   /* behind 1, 3, 5, 2 and 0 (same p, lower id) */
    double h = 0;
    for (int v = 0; v < 8; v++)
        if (p[v] > 0)
            h -= p[v] * log2(p[v]);
    ck_assert_double_eq_tol(ly.entropy_bits, h, 1e-5);
    /* no token asked about; k clamped to V */
    lens_layer_summarize(p, 8, 0, 99, -1, &ly);
    ck_assert_int_eq(ly.n_top, 8);
    ck_assert_float_eq(ly.p_token, -1.0f);
    ck_assert_int_eq(ly.rank_token, 0);
    ck_assert_int_eq(ly.top_id[7], 4);
    lens_layer_summarize(p, 8, 0, 0, 8, &ly);
    ck_assert_int_eq(ly.n_top, 1);
    ck_assert_int_eq(ly.rank_token, 0);
}
END_TEST

START_TEST(the_lens_uses_any_thread_count_to_the_same_bits)
{
    char *dir;
    model *m = tu_load_model(&lens_specs[2], &dir);
    const int V = m->config.V, C = m->config.C, rows = m->config.L + 1;
    engine *e = tu_cpu_engine(m, TT_F32, 1, 0);
    tt_error err = {0};
    ck_assert(lens_enable(e, &err) == TT_OK);
    int32_t ids[5] = {3, 1, 4, 1, 5};
    ck_assert(engine_forward(e, ids, 5, 0, false, &err) == TT_OK);
    float *a = malloc((size_t)rows * V * sizeof(float)), *b = malloc((size_t)rows * V * sizeof(float));
    ck_assert(lens_probs(m, TT_F32, e->lens, rows, a, 1, &err) == TT_OK);
    for (int nth = 2; nth <= 9; nth += 7) {
        ck_assert(lens_probs(m, TT_F32, e->lens, rows, b, nth, &err) == TT_OK);
        ck_assert_msg(memcmp(a, b, (size_t)rows * V * sizeof(float)) == 0, "%d threads", nth);
    }
    /* each row's distribution sums to 1 */
    for (int r = 0; r < rows; r++) {
        double s = 0;
        for (int v = 0; v < V; v++)
            s += a[(size_t)r * V + v];
        ck_assert_double_eq_tol(s, 1.0, 1e-5);
    }
    (void)C;
    free(a);
    free(b);
    engine_free(e);
    tu_free_model(m, dir);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * At a position of a conversation (session_lens) */

typedef struct {
    int32_t token[64];
    float raw_p[64];
    int n;
} step_log;

static bool log_event(void *user, const session_event *ev)
{
    step_log *l = user;
    if (!ev->flush && ev->snap && l->n < 64) {
        l->token[l->n] = ev->token;
        l->raw_p[l->n++] = ev->snap->token_raw_p;
    }
    return true;
}

/* Step mode with sampling: 12 steps, with or without session_lens of each step in between. */
static void steps_with_lens(const model *m, const tokenizer *tok, bool lens, step_log *log)
{
    engine *e = tu_cpu_engine(m, TT_F32, 1, 0);
    session s;
    tu_session_init(&s, m, tok, e, 7, 12, false);
    const int L = m->config.L;
    int32_t prompt[6] = {5, 17, 29, 41, 53, 65};
    tt_error err = {0};
    ck_assert(session_add_user_tokens(&s, prompt, 6, &err) == TT_OK);
    ck_assert_msg(session_gen_begin(&s, &err) == TT_OK, "%s", err.msg);
    lens_layer ly[16];
    int32_t chosen;
    if (lens) {
        /* the next token, not drawn yet: the output's top-1 stands for it */
        ck_assert_msg(session_lens(&s, s.n_tokens, 5, ly, &chosen, &err) == TT_OK, "%s", err.msg);
        ck_assert_int_eq(chosen, ly[L].top_id[0]);
        ck_assert_int_eq(ly[L].rank_token, 1);
        ck_assert_ptr_null(e->lens);   /* nothing kept while generating */
    }
    memset(log, 0, sizeof *log);
    session_stop stop = SESSION_STOP_NONE;
    while (stop == SESSION_STOP_NONE) {
        ck_assert_msg(session_gen_step(&s, -1, log_event, log, &stop, &err) == TT_OK, "%s",
                      err.msg);
        if (!lens)
            continue;
        int pos = s.n_tokens - 1;
        ck_assert_msg(session_lens(&s, pos, 5, ly, &chosen, &err) == TT_OK, "%s", err.msg);
        ck_assert_int_eq(chosen, log->token[log->n - 1]);
        ck_assert_msg(fabs(ly[L].p_token - log->raw_p[log->n - 1]) < 1e-5,
                      "step %d: the last layer's p of the drawn token %.7g, the step's raw p %.7g",
                      log->n, ly[L].p_token, log->raw_p[log->n - 1]);
        /* an earlier step of the same turn too */
        ck_assert(session_lens(&s, pos - 1 > 6 ? pos - 1 : pos, 5, ly, &chosen, &err) == TT_OK);
    }
    ck_assert_int_eq(log->n, 12);
    /* outside the window or past the conversation: refused, and the session goes on */
    ck_assert(session_lens(&s, 0, 5, ly, &chosen, &err) == TT_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "no longer in the context window") != NULL, "%s", err.msg);
    ck_assert(session_lens(&s, s.n_tokens + 1, 5, ly, &chosen, &err) == TT_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "past the conversation") != NULL, "%s", err.msg);
    session_gen_end(&s, stop, NULL, NULL);
    session_free(&s);
    engine_free(e);
}

START_TEST(looking_through_the_lens_between_steps_changes_no_token)
{
    const tu_model_spec *ms = &lens_specs[_i == 0 ? 0 : 2];
    char *dir;
    model *m = tu_load_model(ms, &dir);
    tokenizer *tok;
    tt_error err = {0};
    ck_assert_msg(tokenizer_load_dir(dir, &tok, &err) == TT_OK, "%s", err.msg);
    step_log with, without;
    steps_with_lens(m, tok, true, &with);
    steps_with_lens(m, tok, false, &without);
    ck_assert_msg(memcmp(with.token, without.token, sizeof with.token) == 0,
                  "spec %d: the tokens differ when the lens runs between steps", _i);
    tokenizer_free(tok);
    tu_free_model(m, dir);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * The table (ui/lens_pane.c) */

/* n layers of made-up lenses: layer l ranks token 100 + l first, the chosen token 7 rises from
 * rank 50 to the top at layer 3. */
static void fake_layers(lens_layer *ly, int n)
{
    for (int l = 0; l < n; l++) {
        memset(&ly[l], 0, sizeof ly[l]);
        ly[l].layer = l;
        ly[l].n_top = 4;
        bool top = l >= 3;
        for (int i = 0; i < 4; i++) {
            ly[l].top_id[i] = top && i == 0 ? 7 : 100 + l + i;
            ly[l].top_p[i] = 0.4f / (float)(i + 1);
        }
        ly[l].p_token = top ? 0.4f : 0.01f;
        ly[l].rank_token = top ? 1 : 50 - l;
    }
}

static char *pane_text(const ui_lens_view *v, int h, int w)
{
    ui_grid g;
    ck_assert(ui_grid_init(&g, h, w));
    ui_lens_pane_draw(&g, (ui_rect){0, 0, h, w}, v);
    char *t = ui_grid_text(&g);
    ui_grid_free(&g);
    return t;
}

START_TEST(the_table_lists_every_layer_and_where_the_token_becomes_top_1)
{
    char *dir;
    model *m = tu_load_model(&lens_specs[0], &dir);
    tokenizer *tok;
    tt_error err = {0};
    ck_assert_msg(tokenizer_load_dir(dir, &tok, &err) == TT_OK, "%s", err.msg);
    lens_layer ly[17];
    fake_layers(ly, 7);
    ui_lens_view v = {.layers = ly, .n_layers = 7, .tok = tok, .drawn = true, .chosen = 7,
                      .step = 4, .position = 12};
    ck_assert_int_eq(ui_lens_first_top1(&v), 3);
    ck_assert_int_eq(ui_lens_pane_height(7), 10);
    /* the side pane of a 120-column terminal: 45 wide, room for every layer */
    char *t = pane_text(&v, 10, 45);
    ck_assert_msg(strstr(t, "Lens \xc2\xb7 step 5 \xc2\xb7 token 12\n") != NULL, "%s", t);
    ck_assert_msg(strstr(t, "\nemb ") && strstr(t, "\n  6 ") && strstr(t, "rank"), "%s", t);
    ck_assert_msg(strstr(t, "drawn: top-1 from layer 3 of 6 on") != NULL, "%s", t);
    ck_assert_msg(strstr(t, " 40.0%      1\n") != NULL, "%s", t);
    ck_assert_msg(strstr(t, "  1.0%     50\n") != NULL, "%s", t);
    free(t);
    /* 80 columns list four tokens per layer, 45 two */
    t = pane_text(&v, 10, 80);
    char *row = strstr(t, "\n  5 ");
    ck_assert_ptr_nonnull(row);
    int pct = 0;
    for (char *p = row + 1; *p && *p != '\n'; p++)
        pct += *p == '%';
    ck_assert_msg(pct == 5, "a row of the 80-column table has %d percentages: %s", pct, t);
    free(t);
    /* 17 layers in 8 rows: the embeddings, the last layer and layers between */
    fake_layers(ly, 17);
    v.n_layers = 17;
    t = pane_text(&v, 8, 45);
    ck_assert_msg(strstr(t, "\xc2\xb7 4 of 16 layers") != NULL, "%s", t);
    ck_assert_msg(strstr(t, "\nemb ") && strstr(t, "\n 16 "), "%s", t);
    int rows = 0;
    for (char *p = t; (p = strchr(p, '\n')) != NULL; p++)
        rows++;
    ck_assert_int_le(rows, 8);
    free(t);
    /* not drawn yet: the output's top-1 stands for the token */
    v.drawn = false;
    t = pane_text(&v, 21, 45);
    ck_assert_msg(strstr(t, "Lens \xc2\xb7 next token at 12") != NULL, "%s", t);
    ck_assert_msg(strstr(t, "output's top-1: top-1 from layer 3 of 16 on") != NULL, "%s", t);
    free(t);
    tokenizer_free(tok);
    tu_free_model(m, dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lens");
    tu_add_case(s, "off", TU_TESTS(an_engine_keeps_no_residual_stream_until_asked,
                                   a_summary_ranks_the_tokens_and_places_the_one_asked_about,
                                   the_lens_uses_any_thread_count_to_the_same_bits,
                                   the_table_lists_every_layer_and_where_the_token_becomes_top_1));
    tu_add_loop_case(s, "logits", N_SPECS,
                     TU_TESTS(keeping_the_residual_stream_changes_no_logit,
                              the_last_layers_lens_is_the_models_distribution));
    tu_add_loop_case(s, "session", 2, TU_TESTS(looking_through_the_lens_between_steps_changes_no_token));
    TCase *tc = tu_add_loop_case(s, "reference", N_CASES,
                                 TU_TESTS(every_layers_lens_matches_the_float64_reference));
    tcase_set_timeout(tc, 60);
    return tu_run_suite(s);
}
