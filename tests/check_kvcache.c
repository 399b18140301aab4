/* check_kvcache.c: the KV cache gives the logits a full recompute gives: decoding one token at a
 * time, prefilling in pieces or across chunk boundaries, continuing after a rollback, and after a
 * span that does not fit the context (refused, cache untouched). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "core/kvcache.h"
#include "core/model.h"
#include "core/modelgen.h"
#include "tests/testutil.h"

/* Same weights and kernels, different row grouping (a 1-row GEMV vs 12-row tiles) and so a
 * different summation order: the results differ by rounding only. */
#define KV_TOL 2e-5f

typedef struct {
    char *dir;
    model *m;
} fixture_model;

static void model_open(fixture_model *f, int maxT, int V, uint64_t seed)
{
    f->dir = tu_tmpdir();
    modelgen_options o;
    modelgen_options_default(&o);
    o.seed = seed;
    if (maxT) {
        o.maxT = maxT;
        o.V = V;
        o.C = 32;
        o.NH = 2;
        o.L = 2;
    }
    tt_error err;
    ck_assert_msg(modelgen_write(f->dir, &o, &err) == TT_OK, "%s", err.msg);
    ck_assert_msg(model_load(f->dir, &f->m, &err) == TT_OK, "%s", err.msg);
}

static void model_close(fixture_model *f)
{
    model_free(f->m);
    tu_rmtree(f->dir);
    free(f->dir);
}

static engine *make_engine(const model *m, tt_dtype d, int n_ctx)
{
    engine_options o;
    engine_options_default(&o);
    o.dtype = d;
    o.n_threads = 2;
    o.n_ctx = n_ctx;
    engine *e;
    tt_error err;
    ck_assert_msg(cpu_engine_create(m, &o, &e, &err) == TT_OK, "%s", err.msg);
    return e;
}

static void fill_ids(int32_t *ids, int n, int V, int salt)
{
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)((i * 131 + salt * 17 + 5) % V);
}

static void assert_rows_close(const float *a, const float *b, int V, const char *what, int row)
{
    for (int i = 0; i < V; i++)
        ck_assert_msg(fabsf(a[i] - b[i]) <= KV_TOL * (1.0f + fabsf(b[i])),
                      "%s: position %d logit %d: %.9g vs %.9g", what, row, i, a[i], b[i]);
}

/* All logits of ids[0..n) computed in one span from position 0 ((n, V), caller frees). */
static float *full_recompute(const model *m, tt_dtype d, const int32_t *ids, int n)
{
    engine *e = make_engine(m, d, 0);
    tt_error err;
    ck_assert_msg(engine_forward(e, ids, n, 0, true, &err) == TT_OK, "%s", err.msg);
    size_t bytes = (size_t)n * (size_t)m->config.V * sizeof(float);
    float *out = malloc(bytes);
    memcpy(out, e->logits, bytes);
    engine_free(e);
    return out;
}

/* ---------------------------------------------------------------------------------------------
 * The cache structure */

START_TEST(cache_stores_rows_by_layer_head_and_position)
{
    kvcache c;
    ck_assert_int_eq(kvcache_init(&c, 2, 3, 4, 5, NULL), TT_OK);
    ck_assert_int_ge(c.ldk, 5);
    ck_assert_uint_eq(kvcache_bytes(&c), 2 * 3 * 4 * (5 + (size_t)c.ldk) * sizeof(float));
    float k[4] = {1, 2, 3, 4}, v[4] = {5, 6, 7, 8};
    kvcache_store(&c, 1, 2, 3, k, v);
    /* Keys transposed (NH, HS, ldk) per layer, values (NH, n_ctx, HS). */
    const float *kl = kvcache_k(&c, 1), *vl = kvcache_v(&c, 1);
    for (int d = 0; d < 4; d++)
        ck_assert(kl[(size_t)(2 * 4 + d) * c.ldk + 3] == k[d]);
    ck_assert(memcmp(vl + (2 * 5 + 3) * 4, v, sizeof v) == 0);
    ck_assert(kvcache_k(&c, 1) == c.k + (size_t)3 * 4 * c.ldk);
    c.n = 4;
    kvcache_truncate(&c, 9);
    ck_assert_int_eq(c.n, 4);
    kvcache_truncate(&c, 2);
    ck_assert_int_eq(c.n, 2);
    kvcache_truncate(&c, -1);
    ck_assert_int_eq(c.n, 0);
    kvcache_free(&c);
    ck_assert_ptr_null(c.k);
    tt_error err;
    ck_assert_int_eq(kvcache_init(&c, 2, 0, 4, 5, &err), TT_ERR_ARG);
    ck_assert_ptr_null(c.k);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Against a full recompute */

START_TEST(decoding_one_token_at_a_time_matches_a_full_recompute)
{
    fixture_model f;
    model_open(&f, 0, 0, 1);
    const int n = 40, V = f.m->config.V;
    int32_t ids[40];
    fill_ids(ids, n, V, 0);
    for (tt_dtype d = TT_F32; d <= TT_BF16; d++) {
        float *full = full_recompute(f.m, d, ids, n);
        engine *e = make_engine(f.m, d, 0);
        tt_error err;
        for (int i = 0; i < n; i++) {
            ck_assert(engine_forward(e, ids + i, 1, i, false, &err) == TT_OK);
            ck_assert_int_eq(e->n_past, i + 1);
            ck_assert_int_eq(e->n_logits, 1);
            assert_rows_close(engine_logits(e, 0), full + (size_t)i * V, V, tt_dtype_name(d), i);
        }
        engine_free(e);
        free(full);
    }
    model_close(&f);
}
END_TEST

START_TEST(prefill_in_pieces_across_chunks_matches_a_full_recompute)
{
    /* 300 tokens: the engine works in chunks of 256, so a single call crosses a chunk boundary;
     * prefill in uneven pieces, then decode, must give the same logits at every position. */
    fixture_model f;
    model_open(&f, 320, 300, 9);
    const int n = 300, V = f.m->config.V;
    int32_t ids[300];
    fill_ids(ids, n, V, 1);
    float *full = full_recompute(f.m, TT_F32, ids, n);
    engine *e = make_engine(f.m, TT_F32, 0);
    tt_error err;
    static const int pieces[] = {1, 12, 13, 200, 70, 1, 1, 2};
    int pos = 0;
    for (size_t p = 0; p < sizeof pieces / sizeof pieces[0]; p++) {
        ck_assert(engine_forward(e, ids + pos, pieces[p], pos, true, &err) == TT_OK);
        ck_assert_int_eq(e->n_logits, pieces[p]);
        for (int i = 0; i < pieces[p]; i++)
            assert_rows_close(engine_logits(e, i), full + (size_t)(pos + i) * V, V, "pieces",
                              pos + i);
        pos += pieces[p];
    }
    ck_assert_int_eq(pos, n);
    ck_assert_int_eq(e->n_past, n);
    engine_free(e);
    free(full);
    model_close(&f);
}
END_TEST

START_TEST(truncate_then_continue_equals_a_fresh_run)
{
    fixture_model f;
    model_open(&f, 0, 0, 2);
    const int V = f.m->config.V;
    int32_t a[30], b[30];
    fill_ids(a, 30, V, 2);
    memcpy(b, a, 10 * sizeof *b);
    fill_ids(b + 10, 20, V, 3);            /* same first 10 tokens, then a different branch */
    float *fresh = full_recompute(f.m, TT_F32, b, 30);

    engine *e = make_engine(f.m, TT_F32, 0);
    tt_error err;
    ck_assert(engine_forward(e, a, 30, 0, false, &err) == TT_OK);
    engine_truncate(e, 10);
    ck_assert_int_eq(e->n_past, 10);
    ck_assert(engine_forward(e, b + 10, 20, 10, true, &err) == TT_OK);
    for (int i = 0; i < 20; i++)
        assert_rows_close(engine_logits(e, i), fresh + (size_t)(10 + i) * V, V, "truncate",
                          10 + i);

    /* A forward at pos < n_past rolls back implicitly (rejected drafts, prefix reuse). */
    ck_assert(engine_forward(e, b + 25, 5, 25, true, &err) == TT_OK);
    ck_assert_int_eq(e->n_past, 30);
    for (int i = 0; i < 5; i++)
        assert_rows_close(engine_logits(e, i), fresh + (size_t)(25 + i) * V, V, "rollback",
                          25 + i);

    /* Truncating past the end changes nothing. */
    engine_truncate(e, 100);
    ck_assert_int_eq(e->n_past, 30);
    engine_free(e);
    free(fresh);
    model_close(&f);
}
END_TEST

START_TEST(span_past_the_context_fails_and_keeps_the_cache)
{
    fixture_model f;
    model_open(&f, 0, 0, 3);
    const int V = f.m->config.V, n_ctx = 16;
    int32_t ids[20];
    fill_ids(ids, 20, V, 4);
    float *full = full_recompute(f.m, TT_F32, ids, n_ctx);
    engine *e = make_engine(f.m, TT_F32, n_ctx);
    tt_error err;
    ck_assert(engine_forward(e, ids, n_ctx, 0, false, &err) == TT_OK);
    ck_assert_int_eq(e->n_past, n_ctx);

    /* One token past a full cache. */
    ck_assert_int_eq(engine_forward(e, ids + n_ctx, 1, n_ctx, false, &err), TT_ERR_CONTEXT);
    ck_assert_int_eq(e->n_past, n_ctx);
    /* A span that starts inside but ends outside: rolled back to its start, nothing computed. */
    ck_assert_int_eq(engine_forward(e, ids + 14, 3, 14, false, &err), TT_ERR_CONTEXT);
    ck_assert_int_eq(e->n_past, 14);

    /* The cache still holds positions 0..13: the last two tokens give the logits they gave. */
    ck_assert(engine_forward(e, ids + 14, 2, 14, true, &err) == TT_OK);
    assert_rows_close(engine_logits(e, 0), full + (size_t)14 * V, V, "after failure", 14);
    assert_rows_close(engine_logits(e, 1), full + (size_t)15 * V, V, "after failure", 15);

    /* The session's context shift: start over from position 0 with the newest tokens. */
    engine_truncate(e, 0);
    ck_assert(engine_forward(e, ids + 4, 16, 0, true, &err) == TT_OK);
    float *shifted = full_recompute(f.m, TT_F32, ids + 4, 16);
    for (int i = 0; i < 16; i++)
        assert_rows_close(engine_logits(e, i), shifted + (size_t)i * V, V, "re-prefill", i);
    free(shifted);
    engine_free(e);
    free(full);
    model_close(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kvcache");
    TCase *tc = tcase_create("kvcache");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, cache_stores_rows_by_layer_head_and_position);
    tcase_add_test(tc, decoding_one_token_at_a_time_matches_a_full_recompute);
    tcase_add_test(tc, prefill_in_pieces_across_chunks_matches_a_full_recompute);
    tcase_add_test(tc, truncate_then_continue_equals_a_fresh_run);
    tcase_add_test(tc, span_past_the_context_fails_and_keeps_the_cache);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
