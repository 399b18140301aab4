/* check_kvcache.c: the KV cache gives the logits a full recompute gives, to the bit: decoding one
 * token at a time, prefilling in pieces or across chunk boundaries, continuing after a rollback,
 * and after a span that does not fit the context (refused, cache untouched); for every kernel set,
 * weight dtype and thread count, the cache contents too. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine/engine.h"
#include "core/cpu/kernels.h"
#include "core/cpu/kvcache.h"
#include "core/model/model.h"
#include "core/model/modelgen.h"
#include "tests/testutil.h"

typedef struct {
    char *dir;
    model *m;
} fixture_model;

/* modelgen's tiny model (maxT 0), or one of C 32, NH 2, L 2 with the given context and
 * vocabulary. */
static void model_open(fixture_model *f, int maxT, int V, uint64_t seed)
{
    tu_model_spec spec = {TT_F32, .seed = seed};
    if (maxT)
        spec = (tu_model_spec){TT_F32, .seed = seed, .V = V, .maxT = maxT, .C = 32, .NH = 2,
                               .L = 2};
    f->m = tu_load_model(&spec, &f->dir);
}

static void model_close(fixture_model *f)
{
    model_free(f->m);
    tu_tmpdir_free(f->dir);
}

/* The tests' engines run on 2 threads unless they say otherwise. */
static engine *make_engine(const model *m, tt_dtype d, int n_ctx)
{
    return tu_cpu_engine(m, d, 2, n_ctx);
}

static void fill_ids(int32_t *ids, int n, int V, int salt)
{
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)((i * 131 + salt * 17 + 5) % V);
}

/* The logits of a position do not depend on how it was computed (alone, in a span of any length,
 * after a rollback): the kernels sum every output in one fixed order. So rows are compared with
 * memcmp; the message shows the first logit that differs. */
static void assert_rows_equal(const float *got, const float *want, int V, const char *what,
                              int row)
{
    if (memcmp(got, want, (size_t)V * sizeof *got) == 0)
        return;
    int i = 0;
    while (i < V && memcmp(&got[i], &want[i], sizeof *got) == 0)
        i++;
    ck_abort_msg("%s: position %d logit %d: %.9g vs %.9g (difference %.3g)", what, row, i,
                 got[i], want[i], (double)got[i] - (double)want[i]);
}

/* ---------------------------------------------------------------------------------------------
 * The cache structure */

START_TEST(cache_stores_rows_by_layer_head_and_position)
{
    kvcache c;
    ck_assert_int_eq(kvcache_init(&c, 2, 3, 4, 5, NULL), TT_OK);
    ck_assert_int_ge(c.ldk, 5);
    ck_assert_int_eq(c.ldk % KERNELS_KEY_BLOCK, 0);
    ck_assert_uint_eq(kvcache_bytes(&c), 2 * 3 * 4 * (5 + (size_t)c.ldk) * sizeof(float));
    float k[4] = {1, 2, 3, 4}, v[4] = {5, 6, 7, 8};
    kvcache_store(&c, 1, 2, 3, k, v);
    /* Keys transposed in blocks of positions (NH, ldk / 16, HS, 16) per layer, values
     * (NH, n_ctx, HS). */
    const float *kl = kvcache_k(&c, 1), *vl = kvcache_v(&c, 1);
    for (int d = 0; d < 4; d++) {
        ck_assert(kl[(size_t)2 * 4 * c.ldk + (size_t)d * KERNELS_KEY_BLOCK + 3] == k[d]);
        ck_assert(kl[kernels_key_at(4, c.ldk, 2, d, 3)] == k[d]);
    }
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
    for (tt_dtype d = TT_F32; d <= TT_Q8; d++) {
        float *full = tu_all_logits(f.m, d, 2, ids, n);
        engine *e = make_engine(f.m, d, 0);
        tt_error err;
        for (int i = 0; i < n; i++) {
            ck_assert(engine_forward(e, ids + i, 1, i, false, &err) == TT_OK);
            ck_assert_int_eq(e->n_past, i + 1);
            ck_assert_int_eq(e->n_logits, 1);
            assert_rows_equal(engine_logits(e, 0), full + (size_t)i * V, V, tt_dtype_name(d), i);
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
    float *full = tu_all_logits(f.m, TT_F32, 2, ids, n);
    engine *e = make_engine(f.m, TT_F32, 0);
    tt_error err;
    static const int pieces[] = {1, 12, 13, 200, 70, 1, 1, 2};
    int pos = 0;
    for (size_t p = 0; p < sizeof pieces / sizeof pieces[0]; p++) {
        ck_assert(engine_forward(e, ids + pos, pieces[p], pos, true, &err) == TT_OK);
        ck_assert_int_eq(e->n_logits, pieces[p]);
        for (int i = 0; i < pieces[p]; i++)
            assert_rows_equal(engine_logits(e, i), full + (size_t)(pos + i) * V, V, "pieces",
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
    float *fresh = tu_all_logits(f.m, TT_F32, 2, b, 30);

    engine *e = make_engine(f.m, TT_F32, 0);
    tt_error err;
    ck_assert(engine_forward(e, a, 30, 0, false, &err) == TT_OK);
    engine_truncate(e, 10);
    ck_assert_int_eq(e->n_past, 10);
    ck_assert(engine_forward(e, b + 10, 20, 10, true, &err) == TT_OK);
    for (int i = 0; i < 20; i++)
        assert_rows_equal(engine_logits(e, i), fresh + (size_t)(10 + i) * V, V, "truncate",
                          10 + i);

    /* A forward at pos < n_past rolls back implicitly (rejected drafts, prefix reuse). */
    ck_assert(engine_forward(e, b + 25, 5, 25, true, &err) == TT_OK);
    ck_assert_int_eq(e->n_past, 30);
    for (int i = 0; i < 5; i++)
        assert_rows_equal(engine_logits(e, i), fresh + (size_t)(25 + i) * V, V, "rollback",
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
    float *full = tu_all_logits(f.m, TT_F32, 2, ids, n_ctx);
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
    assert_rows_equal(engine_logits(e, 0), full + (size_t)14 * V, V, "after failure", 14);
    assert_rows_equal(engine_logits(e, 1), full + (size_t)15 * V, V, "after failure", 15);

    /* The session's context shift: start over from position 0 with the newest tokens. */
    engine_truncate(e, 0);
    ck_assert(engine_forward(e, ids + 4, 16, 0, true, &err) == TT_OK);
    float *shifted = tu_all_logits(f.m, TT_F32, 2, ids + 4, 16);
    for (int i = 0; i < 16; i++)
        assert_rows_equal(engine_logits(e, i), shifted + (size_t)i * V, V, "re-prefill", i);
    free(shifted);
    engine_free(e);
    free(full);
    model_close(&f);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Batch invariance: every kernel set, dtype and thread count */

/* The models: the odd-shape golden model (V 301, C 36, HS 12, FF 99) and one whose 300 tokens
 * cross the engine's 256-token chunk. */
static const struct {
    const char *name;
    tu_model_spec model;
    int n;                         /* tokens */
} inv_models[] = {
    {"odd", {TT_F32, .seed = 5, .V = 301, .maxT = 40, .C = 36, .NH = 3, .L = 3, .FF = 99}, 40},
    {"long", {TT_F32, .seed = 9, .V = 300, .maxT = 320, .C = 32, .NH = 2, .L = 2}, 300},
};

/* Span lengths, taken in turn until the sequence is covered: decode steps, a verification-sized
 * span, a 12-row tile plus one, and one full chunk (crossing its boundary at an odd offset). */
static const int inv_pieces[] = {1, 2, 7, 1, 13, 256, 5, 12, 3};

/* Positions 0 .. n-1 of the cache: keys (L, NH, HS, n) then values (L, NH, n, HS). */
static float *kv_snapshot(const engine *e, int n)
{
    const kvcache *c = cpu_engine_kvcache(e);
    ck_assert_int_ge(c->n, n);
    const size_t HS = (size_t)c->HS, rows = (size_t)c->L * (size_t)c->NH;
    float *out = malloc(2 * rows * HS * (size_t)n * sizeof(float));
    float *o = out;
    for (size_t lh = 0; lh < rows; lh++)
        for (int d = 0; d < (int)HS; d++)
            for (int t = 0; t < n; t++)
                *o++ = c->k[kernels_key_at((int)HS, c->ldk, (int)lh, d, t)];
    for (size_t lh = 0; lh < rows; lh++, o += (size_t)n * HS)
        memcpy(o, c->v + lh * (size_t)c->n_ctx * HS, (size_t)n * HS * sizeof(float));
    return out;
}

static void assert_cache_equal(const engine *e, const float *want, int n, const char *what)
{
    const kvcache *c = cpu_engine_kvcache(e);
    size_t len = 2 * (size_t)c->L * (size_t)c->NH * (size_t)c->HS * (size_t)n;
    float *got = kv_snapshot(e, n);
    ck_assert_msg(memcmp(got, want, len * sizeof(float)) == 0,
                  "%s: the KV cache of positions 0..%d differs from one-at-a-time decoding",
                  what, n - 1);
    free(got);
}

START_TEST(positions_get_the_same_bits_alone_in_spans_and_after_rollbacks)
{
    static const char *sets[] = {"reference",  "avx2", "avx512", "avx512vnni",
                                 "avx512bf16", "amx"};
    static const int threads[] = {1, 3};
    const int mi = _i;
    fixture_model f;
    f.m = tu_load_model(&inv_models[mi].model, &f.dir);
    tt_error err;
    const int n = inv_models[mi].n, V = f.m->config.V;
    int32_t *ids = malloc((size_t)n * sizeof *ids), *branch = malloc((size_t)n * sizeof *ids);
    fill_ids(ids, n, V, 11);
    fill_ids(branch, n, V, 12);
    float *dec = malloc((size_t)n * (size_t)V * sizeof(float));
    int n_sets = 0;
    for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++) {
        if (!kernels_by_name(sets[si]))
            continue;
        n_sets++;
        setenv("TOKENTOP_KERNELS", sets[si], 1);
        for (tt_dtype d = TT_F32; d <= TT_Q8; d++) {
            char what[128];
            /* The reference history: one token at a time on one thread. */
            engine *e = tu_cpu_engine(f.m, d, 1, 0);
            ck_assert_msg(strstr(e->description, sets[si]) != NULL, "%s", e->description);
            for (int i = 0; i < n; i++) {
                ck_assert(engine_forward(e, ids + i, 1, i, false, &err) == TT_OK);
                memcpy(dec + (size_t)i * V, engine_logits(e, 0), (size_t)V * sizeof(float));
            }
            float *kv = kv_snapshot(e, n);
            engine_free(e);

            for (size_t ti = 0; ti < sizeof threads / sizeof threads[0]; ti++) {
                e = tu_cpu_engine(f.m, d, threads[ti], 0);
                /* 1. The whole sequence in one span (two chunks for the long model). */
                snprintf(what, sizeof what, "%s %s %s, %d threads, one span", inv_models[mi].name,
                         sets[si], tt_dtype_name(d), threads[ti]);
                ck_assert(engine_forward(e, ids, n, 0, true, &err) == TT_OK);
                for (int i = 0; i < n; i++)
                    assert_rows_equal(engine_logits(e, i), dec + (size_t)i * V, V, what, i);
                assert_cache_equal(e, kv, n, what);

                /* 2. From scratch in pieces of every length, at every kind of offset. */
                snprintf(what, sizeof what, "%s %s %s, %d threads, pieces", inv_models[mi].name,
                         sets[si], tt_dtype_name(d), threads[ti]);
                engine_truncate(e, 0);
                for (int pos = 0, pi = 0; pos < n; pi++) {
                    int len = inv_pieces[pi % 9] < n - pos ? inv_pieces[pi % 9] : n - pos;
                    ck_assert(engine_forward(e, ids + pos, len, pos, true, &err) == TT_OK);
                    for (int i = 0; i < len; i++)
                        assert_rows_equal(engine_logits(e, i), dec + (size_t)(pos + i) * V, V,
                                          what, pos + i);
                    pos += len;
                }
                assert_cache_equal(e, kv, n, what);

                /* 3. A branch computed and rolled back, then the rest recomputed in one span
                 * (what a rejected draft and prefix reuse do). */
                snprintf(what, sizeof what, "%s %s %s, %d threads, after a rollback",
                         inv_models[mi].name, sets[si], tt_dtype_name(d), threads[ti]);
                const int mid = n / 3;
                ck_assert(engine_forward(e, branch + mid, n - mid, mid, false, &err) == TT_OK);
                engine_truncate(e, mid);
                ck_assert(engine_forward(e, ids + mid, n - mid, mid, true, &err) == TT_OK);
                for (int i = 0; i < n - mid; i++)
                    assert_rows_equal(engine_logits(e, i), dec + (size_t)(mid + i) * V, V, what,
                                      mid + i);
                assert_cache_equal(e, kv, n, what);
                engine_free(e);
            }
            free(kv);
        }
    }
    unsetenv("TOKENTOP_KERNELS");
    ck_assert_int_ge(n_sets, 1);
    free(ids);
    free(branch);
    free(dec);
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
    tc = tcase_create("invariance");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, positions_get_the_same_bits_alone_in_spans_and_after_rollbacks, 0, 2);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
