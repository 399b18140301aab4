/* check_attention.c: the attention capture (core/engine/attention.h): the CPU engine's rows equal
 * an independent float64 reference (tools/ref/gpt2_ref.py and llama_ref.py --attention, committed
 * as tests/golden/attn-*.txt by tools/ref/mkattn_golden.sh) on random models of every
 * architecture, whether the row came from a prefill, a decode step or a span with all logits (a
 * speculative verification); the capture is off by default, changes no logit, keeps no row of a
 * batched step, and its reductions (mean, top) are what a front end shows. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/engine/attention.h"
#include "core/engine/engine.h"
#include "core/model/model.h"
#include "core/session/attention_view.h"
#include "tests/testutil.h"

/* fp32 against float64: probabilities are at most 1; observed errors are about 1e-7, a wrong
 * head, a missed RoPE or a scale off by a factor gives 1e-2 or more. */
#define ATTN_TOL 1e-4

/* ---------------------------------------------------------------------------------------------
 * The goldens */

typedef struct {
    const char *name;              /* tests/golden/attn-<name>.txt */
    tu_model_spec model;           /* modelgen's GPT-2 (as tools/ref/mkattn_golden.sh) */
    const char *fixture;           /* or a committed Llama-family fixture */
} attn_case;

static const attn_case attn_cases[] = {
    {"gpt2-tiny", {TT_F32, .seed = 1}, NULL},
    {"gpt2-odd", {TT_F32, .seed = 5, .V = 301, .maxT = 40, .C = 36, .NH = 3, .L = 3, .FF = 99}, NULL},
    {"llama-gqa", {0}, "llama/llama-gqa"},
    {"qwen2", {0}, "llama/qwen2"},
    {"qwen3", {0}, "llama/qwen3"},
    {"mistral", {0}, "llama/mistral"},
};
#define N_CASES ((int)(sizeof attn_cases / sizeof attn_cases[0]))

#define MAX_ROWS 8

typedef struct {
    int n_ids;
    int32_t ids[64];
    int L, NH, NKV;
    int n_rows;
    int rows[MAX_ROWS];
    double *p[MAX_ROWS];           /* (L, NH, rows[r] + 1) */
} attn_golden;

static void golden_read(const char *name, attn_golden *g)
{
    memset(g, 0, sizeof *g);
    char *text = tu_read_golden(tu_path("attn-%s", name));
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "ids ", 4) == 0) {
            g->n_ids = tu_golden_ids(line, g->ids, 64);
        } else if (sscanf(line, "L %d NH %d NKV %d", &g->L, &g->NH, &g->NKV) == 3) {
            continue;
        } else if (strncmp(line, "attn ", 5) == 0) {
            int row, l, h, kh, off = 0;
            ck_assert(sscanf(line, "attn %d %d %d %d %n", &row, &l, &h, &kh, &off) == 4);
            ck_assert(g->L > 0 && l < g->L && h < g->NH);
            ck_assert_int_eq(kh, h / (g->NH / g->NKV));
            int r = 0;
            while (r < g->n_rows && g->rows[r] != row)
                r++;
            if (r == g->n_rows) {
                ck_assert(r < MAX_ROWS);
                g->rows[g->n_rows++] = row;
                g->p[r] = calloc((size_t)g->L * (size_t)g->NH * (size_t)(row + 1), sizeof(double));
            }
            double *p = g->p[r] + ((size_t)l * (size_t)g->NH + (size_t)h) * (size_t)(row + 1);
            char *s = line + off;
            for (int t = 0; t <= row; t++) {
                char *end;
                p[t] = strtod(s, &end);
                ck_assert_msg(end != s, "tests/golden/attn-%s.txt: row %d layer %d head %d has "
                              "fewer than %d probabilities", name, row, l, h, row + 1);
                s = end;
            }
        }
    }
    free(text);
    ck_assert_msg(g->n_ids && g->L && g->n_rows, "tests/golden/attn-%s.txt: incomplete", name);
}

static void golden_free(attn_golden *g)
{
    for (int r = 0; r < g->n_rows; r++)
        free(g->p[r]);
}

static model *case_model(const attn_case *c, char **dir)
{
    if (!c->fixture)
        return tu_load_model(&c->model, dir);
    *dir = NULL;
    model *m = NULL;
    tt_error err;
    tt_status s = model_load(tu_path("%s/%s", TU_FIXTURES, c->fixture), &m, &err);
    ck_assert_msg(s == TT_OK, "%s: %s", c->fixture, err.msg);
    return m;
}

/* Compares the capture's row of golden row r (which the last forward must have kept); returns
 * the largest error. */
static double compare_row(const engine *e, const attn_golden *g, int r, const char *what)
{
    const int row = g->rows[r];
    double worst = 0;
    for (int l = 0; l < g->L; l++)
        for (int h = 0; h < g->NH; h++) {
            const float *w = engine_attention_slot(e->attention, 0, row, l, h);
            ck_assert_msg(w != NULL, "%s: row %d layer %d head %d was not kept", what, row, l, h);
            const double *p = g->p[r] + ((size_t)l * (size_t)g->NH + (size_t)h) * (size_t)(row + 1);
            for (int t = 0; t <= row; t++) {
                double err = fabs((double)w[t] - p[t]);
                ck_assert_msg(err <= ATTN_TOL, "%s: row %d layer %d head %d key %d: %.8f, "
                              "reference %.8f", what, row, l, h, t, (double)w[t], p[t]);
                worst = err > worst ? err : worst;
            }
        }
    return worst;
}

static void forward_ok(engine *e, const int32_t *ids, int n, int pos, bool all)
{
    tt_error err;
    tt_status s = engine_forward(e, ids, n, pos, all, &err);
    ck_assert_msg(s == TT_OK, "forward: %s", err.msg);
}

/* ---------------------------------------------------------------------------------------------
 * Tests */

START_TEST(captured_rows_match_the_float64_reference)
{
    const attn_case *c = &attn_cases[_i];
    attn_golden g;
    golden_read(c->name, &g);
    char *dir;
    model *m = case_model(c, &dir);
    ck_assert_int_eq(m->config.L, g.L);
    ck_assert_int_eq(m->config.NH, g.NH);
    ck_assert_int_eq(m->config.NKV, g.NKV);
    engine *e = tu_cpu_engine(m, TT_F32, 2, 0);
    tt_error err;
    ck_assert_int_eq(engine_set_attention(e, true, &err), TT_OK);
    for (int h = 0; h < g.NH; h++)
        ck_assert_int_eq(engine_attention_kv_head(e->attention, h), h / (g.NH / g.NKV));
    double worst = 0, w;

    /* a span with all logits (a speculative verification): every row kept */
    forward_ok(e, g.ids, g.n_ids, 0, true);
    for (int r = 0; r < g.n_rows; r++)
        if ((w = compare_row(e, &g, r, tu_path("%s, span with all logits", c->name))) > worst)
            worst = w;

    /* a prefill without all logits keeps its last row only; a decode step its one row */
    for (int r = 0; r < g.n_rows; r++) {
        const int row = g.rows[r];
        engine_truncate(e, 0);
        forward_ok(e, g.ids, row + 1, 0, false);
        compare_row(e, &g, r, tu_path("%s, prefill of %d", c->name, row + 1));
        if (row > 0)
            ck_assert_ptr_null(engine_attention_slot(e->attention, 0, row - 1, 0, 0));
        if (row > 0) {
            engine_truncate(e, row);
            forward_ok(e, g.ids + row, 1, row, false);
            compare_row(e, &g, r, tu_path("%s, decode step at %d", c->name, row));
        }
    }
    fprintf(stderr, "attention %s: largest error %.2e\n", c->name, worst);
    engine_free(e);
    golden_free(&g);
    if (dir)
        tu_free_model(m, dir);
    else
        model_free(m);
}
END_TEST

/* With the capture on, a decode row's heads run one at a time (the kernel writes each head's
 * weights); off, a grouped-query model's heads that share a key/value head run together
 * (kernels.attention_heads): the same logits either way. GPT-2 and a Llama fixture with 2 query
 * heads a key/value head. */
START_TEST(capture_is_off_by_default_and_changes_no_logit)
{
    const attn_case *c = &attn_cases[_i == 0 ? 0 : 2];
    char *dir;
    model *m = case_model(c, &dir);
    ck_assert(_i == 0 || m->config.NKV < m->config.NH);
    const int V = m->config.V;
    int32_t ids[12];
    for (int i = 0; i < 12; i++)
        ids[i] = (i * 37 + 11) % V;
    engine *off = tu_cpu_engine(m, TT_F32, 1, 0), *on = tu_cpu_engine(m, TT_F32, 1, 0);
    ck_assert_ptr_null(off->attention);
    tt_error err;
    ck_assert_int_eq(engine_set_attention(on, true, &err), TT_OK);
    ck_assert_int_eq(on->attention->n_rows, 0);
    forward_ok(off, ids, 11, 0, false);
    forward_ok(on, ids, 11, 0, false);
    ck_assert_mem_eq(off->logits, on->logits, (size_t)V * sizeof(float));
    forward_ok(off, ids + 11, 1, 11, false);
    forward_ok(on, ids + 11, 1, 11, false);
    ck_assert_mem_eq(off->logits, on->logits, (size_t)V * sizeof(float));
    ck_assert_ptr_nonnull(engine_attention_slot(on->attention, 0, 11, 0, 0));
    ck_assert_int_eq(engine_set_attention(on, false, &err), TT_OK);
    ck_assert_ptr_null(on->attention);
    forward_ok(on, ids + 11, 1, 11, false);     /* off again: nothing kept, nothing breaks */
    ck_assert_mem_eq(off->logits, on->logits, (size_t)V * sizeof(float));
    engine_free(off);
    engine_free(on);
    if (dir)
        tu_free_model(m, dir);
    else
        model_free(m);
}
END_TEST

START_TEST(a_long_verification_span_keeps_its_last_rows_and_a_batch_keeps_none)
{
    char *dir;
    tu_model_spec ms = {TT_F32, .seed = 3, .V = 300, .maxT = 128, .C = 32, .NH = 2, .L = 2, .FF = 64};
    model *m = tu_load_model(&ms, &dir);
    const int n = ENGINE_ATTENTION_ROWS + 10;
    int32_t ids[ENGINE_ATTENTION_ROWS + 10];
    for (int i = 0; i < n; i++)
        ids[i] = (i * 37 + 11) % m->config.V;
    engine *e = tu_cpu_engine(m, TT_F32, 2, 0);
    tt_error err;
    ck_assert_int_eq(engine_set_attention(e, true, &err), TT_OK);
    forward_ok(e, ids, n, 0, true);
    ck_assert_int_eq(e->attention->n_rows, ENGINE_ATTENTION_ROWS);
    ck_assert_ptr_null(engine_attention_slot(e->attention, 0, n - ENGINE_ATTENTION_ROWS - 1, 0, 0));
    for (int q = n - ENGINE_ATTENTION_ROWS; q < n; q++)
        for (int l = 0; l < m->config.L; l++)
            for (int h = 0; h < m->config.NH; h++) {
                const float *w = engine_attention_slot(e->attention, 0, q, l, h);
                ck_assert_ptr_nonnull(w);
                double sum = 0;
                for (int t = 0; t <= q; t++)
                    sum += w[t];
                ck_assert_msg(fabs(sum - 1) < 1e-5, "row %d layer %d head %d sums to %f", q, l,
                              h, sum);
                for (int t = q + 1; t < e->attention->ld; t++)
                    ck_assert(w[t] == 0.0f);   /* later keys are not seen */
            }
    /* the rows of a forward on sequence 1 are sequence 1's */
    ck_assert_int_eq(engine_seq_reserve(e, 2, &err), TT_OK);
    ck_assert_int_eq(engine_seq_forward(e, 1, ids, 5, 0, false, &err), TT_OK);
    ck_assert_ptr_null(engine_attention_slot(e->attention, 0, 4, 0, 0));
    ck_assert_ptr_nonnull(engine_attention_slot(e->attention, 1, 4, 0, 0));
    int seqs[2] = {0, 1};
    int32_t next[2] = {1, 2};
    engine_truncate(e, 5);
    ck_assert_int_eq(engine_forward_batch(e, seqs, next, 2, &err), TT_OK);
    ck_assert_int_eq(e->attention->n_rows, 0);
    ck_assert_ptr_null(engine_attention_slot(e->attention, 0, 5, 0, 0));
    engine_free(e);
    tu_free_model(m, dir);
}
END_TEST

START_TEST(mean_and_top_reduce_what_was_kept)
{
    engine_attention *a = engine_attention_create(2, 2, 1);
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(engine_attention_kv_head(a, 1), 0);
    ck_assert_int_eq(engine_attention_begin(a, 0, 3, 1, false), 1);   /* query 3, keys 0..3 */
    ck_assert_ptr_null(engine_attention_slot(a, 0, 2, 0, 0));           /* row 2 not kept */
    ck_assert_ptr_null(engine_attention_slot(a, 1, 3, 0, 0));           /* another sequence */
    ck_assert_ptr_null(engine_attention_slot(a, 0, 3, 2, 0));           /* no layer 2 */
    engine_attention_clear(a);
    ck_assert_ptr_null(engine_attention_slot(a, 0, 3, 0, 0));
    engine_attention_free(a);
    engine_attention_free(NULL);

    /* a view of 4 keys, 2 layers, 2 heads, the window starting at conversation index 10 */
    float rows[16] = {0.1f, 0.2f, 0.3f, 0.4f, 0.4f, 0.3f, 0.2f, 0.1f,
                      0.0f, 1.0f, 0.0f, 0.0f, 0.25f, 0.25f, 0.25f, 0.25f};
    attention_view v = {.L = 2, .NH = 2, .NKV = 1, .first = 10, .n = 4, .at = 14, .w = rows};
    float out[4];
    ck_assert(attention_view_mean(&v, -1, -1, out));
    ck_assert_float_eq_tol(out[1], (0.2f + 0.3f + 1.0f + 0.25f) / 4, 1e-6);
    ck_assert(attention_view_mean(&v, 1, -1, out));
    ck_assert_float_eq_tol(out[1], 0.625f, 1e-6);
    ck_assert(attention_view_mean(&v, 0, 1, out));
    ck_assert_float_eq_tol(out[0], 0.4f, 1e-6);
    ck_assert(!attention_view_mean(&v, 2, -1, out));   /* no layer 2 */
    ck_assert(!attention_view_mean(&v, -1, 2, out));   /* no head 2 */
    int idx[3];
    float val[3];
    ck_assert(attention_view_mean(&v, 1, 0, out));     /* 0, 1, 0, 0 */
    ck_assert_int_eq(attention_view_top(&v, out, 3, idx, val), 3);
    ck_assert_int_eq(idx[0], 11);                      /* conversation indices */
    ck_assert_float_eq(val[0], 1.0f);

    const float w[6] = {0.1f, 0.3f, 0.05f, 0.3f, 0.2f, 0.05f};
    int pos[3];
    ck_assert_int_eq(engine_attention_top(w, 6, 3, pos, val), 3);
    ck_assert_int_eq(pos[0], 1);   /* equal weights: the earlier position first */
    ck_assert_int_eq(pos[1], 3);
    ck_assert_int_eq(pos[2], 4);
    ck_assert_int_eq(engine_attention_top(w, 2, 3, pos, val), 2);
    ck_assert_int_eq(pos[0], 1);
    ck_assert_int_eq(pos[1], 0);
    ck_assert_int_eq(engine_attention_top(w, 6, 0, pos, val), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, captured_rows_match_the_float64_reference, 0, N_CASES);
    suite_add_tcase(s, tc);
    tc = tu_add_case(s, "engine", TU_TESTS(
            a_long_verification_span_keeps_its_last_rows_and_a_batch_keeps_none,
            mean_and_top_reduce_what_was_kept));
    tcase_add_loop_test(tc, capture_is_off_by_default_and_changes_no_logit, 0, 2);
    tcase_set_timeout(tc, 60);
    return tu_run_suite(s);
}
