/* check_dtype_compare.c: one position under two precisions (core/decode/dtype_compare.c) against a
 * hand-computed case, and the precision switch (session_set_engine) on real CPU engines: the
 * conversation and its cache move to an engine at another dtype and give, bit for bit, what a
 * fresh engine at that dtype gives on the same tokens; a failed switch changes nothing; and /dtype
 * (repl/dtype_cmd.c) with its messages for bad input. */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli.h"
#include "core/decode/dtype_compare.h"
#include "core/engine/engine.h"
#include "core/model/model.h"
#include "core/model/modelgen.h"
#include "core/session/session.h"
#include "core/tokenizer/tokenizer.h"
#include "repl/commands.h"
#include "repl/dtype_cmd.h"
#include "tests/testutil.h"
#include "ui/grid.h"
#include "ui/histogram_pair.h"

/* ---------------------------------------------------------------------------------------------
 * The figures */

START_TEST(kl_max_change_and_top1_match_a_hand_computed_case)
{
    /* p = softmax(ln 2, 0, 0) = (1/2, 1/4, 1/4); q = softmax(0, ln 2, 0) = (1/4, 1/2, 1/4).
     * KL(p||q) = 1/2 ln 2 + 1/4 ln(1/2) + 0 = ln(2)/4; the largest change is 1/4 (tokens 0 and
     * 1: the lower id is named); the argmaxes are 0 and 1. */
    const float ref[3] = {logf(2.0f), 0, 0}, cmp[3] = {0, logf(2.0f), 0};
    const int32_t ids[3] = {1, 2, 7};
    dtype_compare c;
    memset(&c, 0, sizeof c);
    dtype_compare_logits(ref, cmp, 3, ids, 3, &c);
    ck_assert_double_eq_tol(c.kl, log(2.0) / 4, 1e-7);
    ck_assert_float_eq_tol(c.max_dp, 0.25f, 1e-6f);
    ck_assert_int_eq(c.max_dp_id, 0);
    ck_assert_int_eq(c.top1_ref, 0);
    ck_assert_int_eq(c.top1_cmp, 1);
    ck_assert(!c.top1_agree);
    ck_assert_float_eq_tol(c.top1_cmp_p, 0.5f, 1e-6f);
    ck_assert_int_eq(c.n_top, 3);
    ck_assert_int_eq(c.top_id[0], 1);
    ck_assert_float_eq_tol(c.top_p[0], 0.25f, 1e-6f);
    ck_assert_float_eq_tol(c.top_q[0], 0.5f, 1e-6f);
    ck_assert_float_eq_tol(c.top_p[1], 0.25f, 1e-6f);
    ck_assert_float_eq_tol(c.top_q[1], 0.25f, 1e-6f);
    ck_assert_float_eq(c.top_p[2], 0.0f);   /* an id outside the vocabulary */
    ck_assert_float_eq(c.top_q[2], 0.0f);
}
END_TEST

START_TEST(equal_logits_give_zero_kl_and_agree)
{
    const float x[4] = {1.5f, -2, 0.25f, 3};
    dtype_compare c;
    dtype_compare_logits(x, x, 4, NULL, 0, &c);
    ck_assert(c.kl == 0.0);
    ck_assert(c.max_dp == 0.0f);
    ck_assert(c.top1_agree);
    ck_assert_int_eq(c.top1_ref, 3);
    ck_assert_int_eq(c.n_top, 0);
}
END_TEST

START_TEST(kl_stays_finite_when_the_comparison_underflows_a_token)
{
    /* q of token 1 is about e^-1000: 0 in double, but its log is exact. KL = p1 * 1000 ~ 0.5 *
     * 1000 minus the small remainder. */
    const float ref[2] = {0, 0}, cmp[2] = {0, -1000};
    dtype_compare c;
    dtype_compare_logits(ref, cmp, 2, NULL, 0, &c);
    ck_assert(isfinite(c.kl));
    ck_assert_double_eq_tol(c.kl, 0.5 * 1000 - log(2.0), 1e-6);
    ck_assert_float_eq_tol(c.max_dp, 0.5f, 1e-6f);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * On engines */

static char *model_dir;
static model *mdl;
static tokenizer *tok;

static void files_setup(void)
{
    model_dir = tu_tmpdir();
    modelgen_options mo;
    modelgen_options_default(&mo);
    tt_error err = {0};
    ck_assert_msg(modelgen_write(model_dir, &mo, &err) == TT_OK, "%s", err.msg);
}

static void files_teardown(void)
{
    tu_tmpdir_free(model_dir);
}

static void model_setup(void)
{
    tt_error err = {0};
    ck_assert_msg(model_load(model_dir, &mdl, &err) == TT_OK, "%s", err.msg);
    ck_assert_msg(tokenizer_load_dir(model_dir, &tok, &err) == TT_OK, "%s", err.msg);
}

static void model_teardown(void)
{
    tokenizer_free(tok);
    model_free(mdl);
}

static const int32_t TOKENS[] = {5, 77, 300, 12, 9, 401, 33, 2, 250, 17, 64, 128};
#define N_TOKENS ((int)(sizeof TOKENS / sizeof TOKENS[0]))

/* The logits row after tokens[0 .. n-1] on a fresh engine at dtype d (caller frees). */
static float *fresh_logits(tt_dtype d, const int32_t *tokens, int n)
{
    engine *e = tu_cpu_engine(mdl, d, 1, 0);
    tt_error err = {0};
    ck_assert_msg(engine_sync(e, tokens, n, true, NULL, NULL, &err) == TT_OK, "%s", err.msg);
    int V = mdl->config.V;
    float *row = malloc((size_t)V * sizeof *row);
    memcpy(row, engine_logits(e, e->n_logits - 1), (size_t)V * sizeof *row);
    engine_free(e);
    return row;
}

START_TEST(compare_at_runs_the_comparison_engine_on_the_same_tokens)
{
    int V = mdl->config.V;
    float *ref = fresh_logits(TT_F32, TOKENS, N_TOKENS);
    sampler_snapshot snap;
    memset(&snap, 0, sizeof snap);
    snap.n_top = 3;
    snap.top[0].id = 40;
    snap.top[1].id = 2;
    snap.top[2].id = 300;
    tt_error err = {0};
    /* The same precision on another engine: the same bits, so nothing differs. */
    engine *same = tu_cpu_engine(mdl, TT_F32, 1, 0);
    dtype_compare c;
    ck_assert_msg(dtype_compare_at(same, TOKENS, N_TOKENS, ref, TT_F32, &snap, &c, &err) == TT_OK,
                  "%s", err.msg);
    ck_assert(c.kl == 0.0 && c.max_dp == 0.0f && c.top1_agree);
    ck_assert_int_eq(same->n_past, N_TOKENS);
    ck_assert_mem_eq(same->tokens, TOKENS, sizeof TOKENS);
    engine_free(same);
    /* q8: a small, nonzero change; the listed tokens keep the snapshot's order. */
    engine *q8 = tu_cpu_engine(mdl, TT_Q8, 1, 0);
    ck_assert(dtype_compare_at(q8, TOKENS, N_TOKENS, ref, TT_F32, &snap, &c, &err) == TT_OK);
    ck_assert_int_eq(c.dtype, TT_Q8);
    ck_assert_int_eq(c.ref_dtype, TT_F32);
    ck_assert_msg(c.kl > 0 && c.kl < 0.05, "kl %g", c.kl);
    ck_assert(c.max_dp > 0 && c.max_dp < 0.1f);
    ck_assert_int_eq(c.n_top, 3);
    ck_assert_int_eq(c.top_id[0], 40);
    ck_assert_int_eq(c.top_id[2], 300);
    /* One more token: the comparison engine keeps the prefix and forwards only it. */
    int32_t more[N_TOKENS + 1];
    memcpy(more, TOKENS, sizeof TOKENS);
    more[N_TOKENS] = 99;
    float *ref2 = fresh_logits(TT_F32, more, N_TOKENS + 1);
    float *q2 = fresh_logits(TT_Q8, more, N_TOKENS + 1);
    ck_assert(dtype_compare_at(q8, more, N_TOKENS + 1, ref2, TT_F32, NULL, &c, &err) == TT_OK);
    ck_assert_mem_eq(engine_logits(q8, q8->n_logits - 1), q2, (size_t)V * sizeof *q2);
    ck_assert_int_eq(q8->n_past, N_TOKENS + 1);
    /* Bad input: no tokens. */
    ck_assert_int_eq(dtype_compare_at(q8, more, 0, ref2, TT_F32, NULL, &c, &err), TT_ERR_ARG);
    engine_free(q8);
    free(ref);
    free(ref2);
    free(q2);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * The switch */

/* A session on e with TOKENS as the prompt and a greedy reply of max_new tokens. */
static void start_session(session *s, engine *e, int max_new)
{
    tu_session_init(s, mdl, tok, e, 7, max_new, true);
    tt_error err = {0};
    ck_assert(session_add_user_tokens(s, TOKENS, N_TOKENS, &err) == TT_OK);
    ck_assert_msg(session_generate(s, NULL, NULL, &err) == TT_OK, "%s", err.msg);
}

START_TEST(switching_precision_keeps_the_conversation_and_matches_a_fresh_engine)
{
    static const tt_dtype to[] = {TT_Q8, TT_F16, TT_BF16, TT_F32};
    engine *e = tu_cpu_engine(mdl, TT_F32, 1, 0);
    session s;
    start_session(&s, e, 6);
    int n = s.n_tokens;
    int32_t *before = malloc((size_t)n * sizeof *before);
    memcpy(before, s.tokens, (size_t)n * sizeof *before);
    int V = mdl->config.V;
    for (size_t k = 0; k < sizeof to / sizeof to[0]; k++) {
        engine *ne = tu_cpu_engine(mdl, to[k], 1, 0);
        tt_error err = {0};
        int prefilled = -1;
        ck_assert_msg(session_set_engine(&s, ne, &prefilled, &err) == TT_OK, "%s", err.msg);
        ck_assert_ptr_eq(s.eng, ne);
        ck_assert_int_eq(prefilled, n);
        ck_assert_int_eq(s.n_tokens, n);
        ck_assert_mem_eq(s.tokens, before, (size_t)n * sizeof *before);
        ck_assert_int_eq(ne->n_past, n);                          /* the cache ... */
        ck_assert_mem_eq(ne->tokens, before, (size_t)n * sizeof *before);   /* ... its mirror */
        ck_assert_int_eq(session_cached_prefix(&s), n);
        float *want = fresh_logits(to[k], before, n);
        ck_assert_msg(memcmp(engine_logits(ne, ne->n_logits - 1), want,
                             (size_t)V * sizeof *want) == 0,
                      "%s: the next-token logits differ from a fresh engine's",
                      tt_dtype_name(to[k]));
        free(want);
        engine_free(e);
        e = ne;
    }
    /* And the conversation goes on from there. */
    tt_error err = {0};
    ck_assert(session_add_user_tokens(&s, TOKENS, 2, &err) == TT_OK);
    ck_assert_msg(session_generate(&s, NULL, NULL, &err) == TT_OK, "%s", err.msg);
    ck_assert_int_eq(s.last.reused_tokens, n);
    session_free(&s);
    engine_free(e);
    free(before);
}
END_TEST

START_TEST(a_switch_after_the_context_filled_shifts_the_window_as_a_step_would)
{
    /* A context of 16: the generation's last token can leave the window one past it (the next
     * step would shift); the switch shifts the same way and the new engine holds the window. */
    engine *e = tu_cpu_engine(mdl, TT_F32, 1, 16);
    session s;
    start_session(&s, e, 16 + 1 - N_TOKENS);
    int wlen = s.n_tokens - s.window_start;
    ck_assert_int_eq(wlen, 17);
    engine *ne = tu_cpu_engine(mdl, TT_Q8, 1, 16);
    tt_error err = {0};
    ck_assert_msg(session_set_engine(&s, ne, NULL, &err) == TT_OK, "%s", err.msg);
    wlen = s.n_tokens - s.window_start;
    ck_assert_int_le(wlen, 16);
    ck_assert_int_eq(ne->n_past, wlen);
    ck_assert_mem_eq(ne->tokens, s.tokens + s.window_start, (size_t)wlen * sizeof *s.tokens);
    float *want = fresh_logits(TT_Q8, s.tokens + s.window_start, wlen);
    ck_assert_mem_eq(engine_logits(ne, ne->n_logits - 1), want,
                     (size_t)mdl->config.V * sizeof *want);
    free(want);
    session_free(&s);
    engine_free(e);
    engine_free(ne);
}
END_TEST

START_TEST(a_failed_switch_changes_nothing)
{
    engine *e = tu_cpu_engine(mdl, TT_F32, 1, 0);
    session s;
    start_session(&s, e, 6);
    int n = s.n_tokens, past = e->n_past;
    tt_error err = {0};
    /* A context too small for the window, with context shifting off. */
    s.set.context_shift = false;
    engine *small = tu_cpu_engine(mdl, TT_Q8, 1, 4);
    ck_assert_int_eq(session_set_engine(&s, small, NULL, &err), TT_ERR_CONTEXT);
    ck_assert_msg(strstr(err.msg, "does not fit") != NULL, "%s", err.msg);
    engine_free(small);
    s.set.context_shift = true;
    /* Ctrl-C during the prefill. */
    volatile sig_atomic_t stop = 1;
    s.interrupt = &stop;
    engine *q8 = tu_cpu_engine(mdl, TT_Q8, 1, 0);
    ck_assert_int_eq(session_set_engine(&s, q8, NULL, &err), TT_ERR_INTERRUPTED);
    ck_assert(q8->interrupt == NULL);
    s.interrupt = NULL;
    ck_assert_int_eq(e->n_past, past);
    /* An open generation (it brings the cache up to the last token). */
    ck_assert(session_gen_begin(&s, &err) == TT_OK);
    ck_assert_int_eq(session_set_engine(&s, q8, NULL, &err), TT_ERR_ARG);
    session_gen_end(&s, SESSION_STOP_INTERRUPTED, NULL, NULL);
    engine_free(q8);
    ck_assert_ptr_eq(s.eng, e);
    ck_assert_int_eq(s.n_tokens, n);
    session_free(&s);
    engine_free(e);
}
END_TEST


/* ---------------------------------------------------------------------------------------------
 * /dtype */

static engine *cmd_eng;        /* the session's engine: the tests' own, swapped by adopt */
static session S;
static cmd_env E;
static cmd_host H;             /* the engines the tests lend E */
static bool refuse_q8;         /* make_engine acts as a backend without q8 (the GPU's) */

static tt_status test_make_engine(void *user, tt_dtype d, engine **out, tt_error *err)
{
    if (refuse_q8 && d == TT_Q8)
        return tt_fail(err, TT_ERR_UNSUPPORTED, "cuda: --dtype q8 runs on the CPU only (the GPU "
                       "engine holds fp32, fp16 or bf16)");
    engine_options eo;
    engine_options_default(&eo);
    eo.dtype = d;
    eo.n_threads = 1;
    eo.n_ctx = S.eng->n_ctx;
    return cpu_engine_create(mdl, &eo, out, err);
}

static void test_adopt_engine(void *user, engine *old, engine *now)
{
    ck_assert_ptr_eq(old, cmd_eng);
    engine_free(old);
    cmd_eng = now;
}

static void cmd_setup(void)
{
    model_setup();
    cmd_eng = tu_cpu_engine(mdl, TT_F32, 1, 0);
    start_session(&S, cmd_eng, 6);
    cmd_env_init(&E, &S);
    cmd_env_add_module(&E, &dtype_cmd_module);
    E.line_mode = true;
    H = (cmd_host){.make_engine = test_make_engine, .adopt_engine = test_adopt_engine};
    E.host = &H;
    refuse_q8 = false;
}

static void cmd_teardown(void)
{
    cmd_env_free(&E);
    session_free(&S);
    engine_free(cmd_eng);
    model_teardown();
}

static const char *out(void)
{
    return E.out ? E.out : "";
}

#define ck_out_has(s) ck_assert_msg(strstr(out(), (s)) != NULL, "message \"%s\" lacks \"%s\"", \
                                    out(), (s))

/* Runs the slash-command line: its status must be status and its message must contain s. */
#define ck_cmd_says(line, status, s)                                                              \
    do {                                                                                          \
        ck_assert_int_eq(cmd_execute(&E, (line)), (status));                                      \
        ck_out_has(s);                                                                            \
    } while (0)

START_TEST(dtype_switch_keeps_the_conversation_and_matches_a_fresh_engine)
{
    int n = S.n_tokens;
    int32_t before[64];
    memcpy(before, S.tokens, (size_t)n * sizeof *before);
    ck_cmd_says("/dtype q8", CMD_STATUS | CMD_PEEK, "weights now q8 (were fp32)");
    ck_assert_int_eq(S.eng->dtype, TT_Q8);
    ck_assert_ptr_eq(S.eng, cmd_eng);
    ck_assert_str_eq(E.engine_desc, cmd_eng->description);
    ck_assert_int_eq(S.n_tokens, n);
    ck_assert_mem_eq(S.tokens, before, (size_t)n * sizeof *before);
    sampler_snapshot snap;
    tt_error err = {0};
    ck_assert(session_peek(&S, &snap, &err) == TT_OK);
    float *want = fresh_logits(TT_Q8, before, n);
    ck_assert_mem_eq(engine_logits(S.eng, S.eng->n_logits - 1), want,
                     (size_t)mdl->config.V * sizeof *want);
    free(want);
    ck_cmd_says("/show", CMD_DONE, "precision   q8 weights");
    ck_cmd_says("/dtype", CMD_DONE, "q8 weights");
    ck_cmd_says("/dtype q8", CMD_DONE, "already");
}
END_TEST

START_TEST(dtype_refuses_bad_input_and_keeps_everything)
{
    int n = S.n_tokens, past = S.eng->n_past;
    engine *before = S.eng;
    ck_assert_int_eq(cmd_execute(&E, "/dtype fp8"), CMD_ERROR);
    ck_assert_str_eq(out(), "/dtype: 'fp8' is not fp32, fp16, bf16 or q8 (kept fp32)");
    ck_cmd_says("/dtype q8 fp16", CMD_ERROR, "too many arguments");
    refuse_q8 = true;          /* a backend without q8 */
    ck_assert_int_eq(cmd_execute(&E, "/dtype q8"), CMD_ERROR);
    ck_assert_str_eq(out(), "/dtype q8: cuda: --dtype q8 runs on the CPU only (the GPU engine "
                     "holds fp32, fp16 or bf16) (kept fp32)");
    ck_cmd_says("/dtype compare q8", CMD_ERROR, "the comparison is off");
    ck_assert_ptr_null(dtype_cmd_of(&E)->cmp);
    H.make_engine = NULL;      /* a front end that cannot make engines */
    ck_cmd_says("/dtype bf16", CMD_ERROR, "not available here");
    ck_assert_ptr_eq(S.eng, before);
    ck_assert_int_eq(S.eng->dtype, TT_F32);
    ck_assert_int_eq(S.n_tokens, n);
    ck_assert_int_eq(S.eng->n_past, past);
}
END_TEST

START_TEST(dtype_compare_shows_both_precisions_and_off_frees_the_engine)
{
    const dtype_cmd_state *D = dtype_cmd_of(&E);   /* what /dtype keeps */
    ck_cmd_says("/dtype compare", CMD_ERROR, "no comparison is on");
    ck_cmd_says("/dtype compare fp32", CMD_ERROR, "the weights are fp32 already");
    ck_cmd_says("/dtype compare fp8", CMD_ERROR, "'fp8' is not fp32, fp16, bf16 or q8 or off");
    ck_assert_int_eq(cmd_execute(&E, "/dtype compare q8"), CMD_STATUS | CMD_PEEK);
    ck_assert_ptr_nonnull(D->cmp);
    ck_assert_int_eq(D->cmp->dtype, TT_Q8);
    ck_out_has("comparing fp32 with q8");
    ck_out_has("next token at");
    ck_out_has("KL(fp32\xe2\x80\x96q8)");
    ck_out_has("top-1 ");
    /* The histogram's comparison lists the histogram's tokens, in its order. */
    ck_assert(D->has_view);
    ck_assert_int_eq(E.hist.kind, UI_HIST_PEEK);
    ck_assert_int_eq(D->view.n_top, E.hist.snap.n_top);
    for (int i = 0; i < E.hist.snap.n_top; i++)
        ck_assert_int_eq(D->view.top_id[i], E.hist.snap.top[i].id);
    ck_assert_int_eq(D->cmp->n_past, S.n_tokens);    /* the same tokens */
    ck_assert_mem_eq(D->cmp->tokens, S.tokens, (size_t)S.n_tokens * sizeof *S.tokens);
    ck_cmd_says("/show", CMD_DONE, "compared with q8 on a second engine");
    ck_cmd_says("/help dtype", CMD_DONE, "twice the weight memory");
    ck_cmd_says("/dtype compare off", CMD_STATUS | CMD_PEEK, "freed");
    ck_assert_ptr_null(D->cmp);
    ck_assert(!D->has_view);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * The two-precision view (ui/histogram_pair.c) */

/* p 0.40 0.30 0.10 under fp32, q 0.38 0.33 0.09 under q8; the argmaxes differ (token 30 leads
 * under q8 elsewhere in the vocabulary). */
static dtype_compare pair_case(void)
{
    dtype_compare c;
    memset(&c, 0, sizeof c);
    c.ref_dtype = TT_F32;
    c.dtype = TT_Q8;
    c.kl = 0.0123;
    c.max_dp = 0.03f;
    c.max_dp_id = 'b' - 33;
    c.top1_ref = 'a' - 33;
    c.top1_cmp = 'b' - 33;
    c.top1_agree = false;
    c.n_top = 3;
    const int32_t ids[3] = {'a' - 33, 'b' - 33, 'c' - 33};
    const float p[3] = {0.40f, 0.30f, 0.10f}, q[3] = {0.38f, 0.33f, 0.09f};
    for (int i = 0; i < 3; i++) {
        c.top_id[i] = ids[i];
        c.top_p[i] = p[i];
        c.top_q[i] = q[i];
    }
    return c;
}

static char rowbuf[1024];
static const char *row_text(const ui_grid *g, int y)
{
    ui_grid_row_text(g, y, rowbuf, sizeof rowbuf);
    return rowbuf;
}

START_TEST(pair_view_puts_both_precisions_on_each_token_row)
{
    dtype_compare c = pair_case();
    for (int w = 30; w <= 70; w += 20) {     /* narrow (no bars), side pane, wide */
        ui_grid g;
        ck_assert(ui_grid_init(&g, 16, 80));
        for (int y = 0; y < 16; y++)
            ui_grid_fill(&g, y, 0, 80, 'X', UI_STYLE_NORMAL, 0);
        ui_pair_view v = {.kind = UI_HIST_STEP, .cmp = &c, .tok = tok, .bars = 10, .step = 2,
                          .position = 9, .chosen = 'b' - 33};
        ui_rect r = {1, 2, ui_histogram_pair_height(10), w};
        ui_histogram_pair_draw(&g, r, &v);
        ck_assert_msg(strstr(row_text(&g, 1), "fp32 vs q8"), "w %d: %s", w, rowbuf);
        const char *want[3][3] = {{"40.0%", "38.0%", "-2.00%"}, {"30.0%", "33.0%", "+3.00%"},
                                  {"10.0%", " 9.0%", "-1.00%"}};
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 3; k++)
                ck_assert_msg(strstr(row_text(&g, 3 + i), want[i][k]),
                              "w %d row %d lacks %s: %s", w, i, want[i][k], rowbuf);
        ck_assert_msg(strstr(row_text(&g, 4), "\xe2\x96\xb6"), "the drawn token is marked");
        if (w == 50) {         /* two bars: the drawn token (third) takes the second row */
            ui_pair_view two = v;
            two.bars = 2;
            two.chosen = 'c' - 33;
            ui_histogram_pair_draw(&g, r, &two);
            ck_assert_msg(strstr(row_text(&g, 4), " 3\xe2\x96\xb6") &&
                          strstr(rowbuf, "10.0%"), "the drawn token is not shown: %s", rowbuf);
            ui_histogram_pair_draw(&g, r, &v);
        }
        /* bars only where there is room for them */
        ck_assert_int_eq(strstr(row_text(&g, 3), "\xe2\x96\x88") != NULL, w >= 50);
        ck_assert_msg(strstr(row_text(&g, 6), "KL"), "w %d: %s", w, rowbuf);
        ck_assert_msg(strstr(row_text(&g, 7), "top-1 differs"), "w %d: %s", w, rowbuf);
        for (int y = 0; y < 16; y++)
            for (int x = 0; x < 80; x++)
                if (!(y >= r.y && y < r.y + r.h && x >= r.x && x < r.x + r.w))
                    ck_assert_msg(ui_grid_cell(&g, y, x)->cp == 'X', "w %d: (%d,%d) drawn", w,
                                  y, x);
        ui_grid_free(&g);
    }
}
END_TEST

START_TEST(pair_bars_are_proportional_and_padded)
{
    char b[128];
    ui_histogram_pair_bar(0.5, 1.0, 10, b, sizeof b);
    ck_assert_str_eq(b, "\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88     ");
    ui_histogram_pair_bar(0.0001, 1.0, 4, b, sizeof b);    /* a sliver, not nothing */
    ck_assert_str_eq(b, "\xe2\x96\x8f   ");
    ui_histogram_pair_bar(0, 1.0, 3, b, sizeof b);
    ck_assert_str_eq(b, "   ");
    char d[16];
    ui_histogram_pair_delta(-0.0123, d, sizeof d);
    ck_assert_str_eq(d, "-1.23%");
    ui_histogram_pair_delta(0.00001, d, sizeof d);
    ck_assert_str_eq(d, "0");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dtype_compare");
    tu_add_case(s, "figures", TU_TESTS(kl_max_change_and_top1_match_a_hand_computed_case,
                                       equal_logits_give_zero_kl_and_agree,
                                       kl_stays_finite_when_the_comparison_underflows_a_token));
    TCase *tc = tu_add_case(s, "engines", TU_TESTS(
            compare_at_runs_the_comparison_engine_on_the_same_tokens,
            switching_precision_keeps_the_conversation_and_matches_a_fresh_engine,
            a_switch_after_the_context_filled_shifts_the_window_as_a_step_would,
            a_failed_switch_changes_nothing));
    tcase_set_timeout(tc, 60);
    tcase_add_unchecked_fixture(tc, files_setup, files_teardown);
    tcase_add_checked_fixture(tc, model_setup, model_teardown);
    tc = tu_add_case(s, "commands", TU_TESTS(
            dtype_switch_keeps_the_conversation_and_matches_a_fresh_engine,
            dtype_refuses_bad_input_and_keeps_everything,
            dtype_compare_shows_both_precisions_and_off_frees_the_engine,
            pair_view_puts_both_precisions_on_each_token_row, pair_bars_are_proportional_and_padded));
    tcase_set_timeout(tc, 60);
    tcase_add_unchecked_fixture(tc, files_setup, files_teardown);
    tcase_add_checked_fixture(tc, cmd_setup, cmd_teardown);
    return tu_run_suite(s);
}
