/* check_engine.c: the backend-independent half of the engine (engine.c) over a fake backend that
 * records every span it is asked to forward: the token mirror follows the cache through forwards
 * and truncations, engine_sync keeps the longest common prefix, truncates, forwards the rest in
 * spans of ENGINE_SYNC_CHUNK, reports reused/prefilled, and an interrupt or a failing forward
 * leaves the cache holding a prefix of the tokens with the mirror in step. */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine/engine.h"
#include "tests/testutil.h"

#define VOCAB 64
#define CTX 1024
#define MAX_SPANS 64

typedef struct {
    engine base;
    model_config cfg;
    float logits[VOCAB];
    int32_t kv[CTX];               /* what the fake cache holds, by position */
    int span_pos[MAX_SPANS], span_n[MAX_SPANS];
    int n_spans;                   /* forwards since the last reset of the record */
    volatile sig_atomic_t *raise_after;  /* set *this after every successful forward */
    int fail_at_pos;               /* >= 0: a span starting here fails with TT_ERR_DEVICE */
} fake_engine;

static tt_status fake_forward(engine *e, const int32_t *ids, int n, int pos, bool all,
                              tt_error *err)
{
    fake_engine *f = (fake_engine *)e;
    if (f->fail_at_pos >= 0 && pos == f->fail_at_pos)
        return tt_fail(err, TT_ERR_DEVICE, "fake device: failed at position %d", pos);
    ck_assert_int_lt(f->n_spans, MAX_SPANS);
    f->span_pos[f->n_spans] = pos;
    f->span_n[f->n_spans] = n;
    f->n_spans++;
    memcpy(f->kv + pos, ids, (size_t)n * sizeof *ids);
    e->n_past = pos + n;
    e->n_logits = 1;
    for (int v = 0; v < VOCAB; v++)
        f->logits[v] = v == ids[n - 1] ? 1.0f : 0.0f;   /* the row says which token it is for */
    if (f->raise_after)
        *f->raise_after = 1;
    return TT_OK;
}

static const engine_ops fake_ops = {"fake", fake_forward, tu_fake_truncate, tu_fake_destroy,
                                   NULL, NULL, NULL};

static fake_engine *F;

static void setup(void)
{
    F = calloc(1, sizeof *F);
    ck_assert_ptr_nonnull(F);
    F->cfg.V = VOCAB;
    F->cfg.maxT = CTX;
    F->base.ops = &fake_ops;
    F->base.config = &F->cfg;
    F->base.n_ctx = CTX;
    F->base.logits = F->logits;
    F->fail_at_pos = -1;
}

static void teardown(void)
{
    engine_free(&F->base);
    F = NULL;
}

/* ids[i] = a token that depends on i and salt, so sequences with another salt differ at once. */
static void fill(int32_t *ids, int n, int salt)
{
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)((i * 7 + salt) % VOCAB);
}

/* The fake cache, the engine's mirror and tokens agree on positions 0 .. n_past-1. */
static void assert_cache_holds_prefix_of(const int32_t *ids, int n)
{
    ck_assert_int_le(F->base.n_past, n);
    for (int i = 0; i < F->base.n_past; i++) {
        ck_assert_int_eq(F->kv[i], ids[i]);
        ck_assert_int_eq(F->base.tokens[i], ids[i]);
    }
}

START_TEST(the_mirror_follows_forwards_and_truncations)
{
    int32_t ids[8];
    fill(ids, 8, 1);
    tt_error err = {0};
    ck_assert_int_eq(engine_forward(&F->base, ids, 5, 0, false, &err), TT_OK);
    ck_assert_int_eq(engine_cached_prefix(&F->base, ids, 8), 5);
    engine_truncate(&F->base, 3);
    ck_assert_int_eq(engine_cached_prefix(&F->base, ids, 8), 3);
    int32_t other = (ids[3] + 1) % VOCAB;
    ck_assert_int_eq(engine_forward(&F->base, &other, 1, 3, false, &err), TT_OK);
    ck_assert_int_eq(F->base.tokens[3], other);
    ck_assert_int_eq(engine_cached_prefix(&F->base, ids, 8), 3);
    /* a refused forward (id out of range) changes neither the cache nor the mirror's prefix */
    int32_t bad = VOCAB;
    ck_assert_int_eq(engine_forward(&F->base, &bad, 1, 4, false, &err), TT_ERR_ARG);
    ck_assert_int_eq(F->base.n_past, 4);
    ck_assert_int_eq(F->base.tokens[3], other);
}
END_TEST

START_TEST(sync_forwards_a_long_prompt_in_spans_of_the_chunk_size)
{
    enum { N = 2 * ENGINE_SYNC_CHUNK + 88 };
    int32_t ids[N];
    fill(ids, N, 3);
    int reused = -1, prefilled = -1;
    tt_error err = {0};
    ck_assert_int_eq(engine_sync(&F->base, ids, N, true, &reused, &prefilled, &err), TT_OK);
    ck_assert_int_eq(reused, 0);
    ck_assert_int_eq(prefilled, N);
    ck_assert_int_eq(F->n_spans, 3);
    ck_assert_int_eq(F->span_pos[0], 0);
    ck_assert_int_eq(F->span_n[0], ENGINE_SYNC_CHUNK);
    ck_assert_int_eq(F->span_pos[1], ENGINE_SYNC_CHUNK);
    ck_assert_int_eq(F->span_n[1], ENGINE_SYNC_CHUNK);
    ck_assert_int_eq(F->span_pos[2], 2 * ENGINE_SYNC_CHUNK);
    ck_assert_int_eq(F->span_n[2], 88);
    ck_assert_int_eq(F->base.n_past, N);
    assert_cache_holds_prefix_of(ids, N);
    ck_assert_float_eq(engine_logits(&F->base, 0)[ids[N - 1]], 1.0f);
}
END_TEST

START_TEST(sync_keeps_the_common_prefix_and_truncates_the_rest)
{
    enum { N = 300 };
    int32_t a[N], b[N + 20];
    fill(a, N, 5);
    memcpy(b, a, 200 * sizeof *b);
    fill(b + 200, N + 20 - 200, 11);   /* differs from position 200 on */
    ck_assert_int_ne(a[200], b[200]);
    tt_error err = {0};
    ck_assert_int_eq(engine_sync(&F->base, a, N, true, NULL, NULL, &err), TT_OK);
    F->n_spans = 0;
    int reused = -1, prefilled = -1;
    ck_assert_int_eq(engine_sync(&F->base, b, N + 20, true, &reused, &prefilled, &err), TT_OK);
    ck_assert_int_eq(reused, 200);
    ck_assert_int_eq(prefilled, N + 20 - 200);
    ck_assert_int_eq(F->n_spans, 1);
    ck_assert_int_eq(F->span_pos[0], 200);
    ck_assert_int_eq(F->base.n_past, N + 20);
    assert_cache_holds_prefix_of(b, N + 20);

    /* a shorter sequence that the cache holds entirely: truncated to it, nothing forwarded */
    F->n_spans = 0;
    ck_assert_int_eq(engine_sync(&F->base, b, 150, false, &reused, &prefilled, &err), TT_OK);
    ck_assert_int_eq(reused, 150);
    ck_assert_int_eq(prefilled, 0);
    ck_assert_int_eq(F->n_spans, 0);
    ck_assert_int_eq(F->base.n_past, 150);
}
END_TEST

START_TEST(sync_with_logits_computes_the_last_token_again_when_all_are_cached)
{
    int32_t ids[40];
    fill(ids, 40, 2);
    tt_error err = {0};
    ck_assert_int_eq(engine_sync(&F->base, ids, 40, true, NULL, NULL, &err), TT_OK);
    F->n_spans = 0;
    int reused = -1, prefilled = -1;
    ck_assert_int_eq(engine_sync(&F->base, ids, 40, true, &reused, &prefilled, &err), TT_OK);
    ck_assert_int_eq(reused, 39);
    ck_assert_int_eq(prefilled, 1);
    ck_assert_int_eq(F->n_spans, 1);
    ck_assert_int_eq(F->span_pos[0], 39);
    ck_assert_float_eq(engine_logits(&F->base, 0)[ids[39]], 1.0f);
}
END_TEST

START_TEST(interrupted_sync_leaves_a_consistent_prefix)
{
    enum { N = 3 * ENGINE_SYNC_CHUNK };
    int32_t ids[N];
    fill(ids, N, 7);
    static volatile sig_atomic_t flag;
    flag = 0;
    F->raise_after = &flag;          /* Ctrl-C arrives during the first span */
    F->base.interrupt = &flag;
    int reused = -1, prefilled = -1;
    tt_error err = {0};
    ck_assert_int_eq(engine_sync(&F->base, ids, N, true, &reused, &prefilled, &err),
                     TT_ERR_INTERRUPTED);
    ck_assert_int_eq(reused, 0);
    ck_assert_int_eq(prefilled, ENGINE_SYNC_CHUNK);
    ck_assert_int_eq(F->n_spans, 1);
    ck_assert_int_eq(F->base.n_past, ENGINE_SYNC_CHUNK);
    assert_cache_holds_prefix_of(ids, N);

    /* once the flag is clear, the next sync goes on from there */
    flag = 0;
    F->raise_after = NULL;
    ck_assert_int_eq(engine_sync(&F->base, ids, N, true, &reused, &prefilled, &err), TT_OK);
    ck_assert_int_eq(reused, ENGINE_SYNC_CHUNK);
    ck_assert_int_eq(prefilled, N - ENGINE_SYNC_CHUNK);
    assert_cache_holds_prefix_of(ids, N);
    ck_assert_int_eq(F->base.n_past, N);
}
END_TEST

START_TEST(a_failing_span_leaves_the_spans_before_it)
{
    enum { N = 2 * ENGINE_SYNC_CHUNK + 10 };
    int32_t ids[N];
    fill(ids, N, 9);
    F->fail_at_pos = ENGINE_SYNC_CHUNK;
    int reused = -1, prefilled = -1;
    tt_error err = {0};
    ck_assert_int_eq(engine_sync(&F->base, ids, N, true, &reused, &prefilled, &err),
                     TT_ERR_DEVICE);
    ck_assert(strstr(err.msg, "position 256") != NULL);
    ck_assert_int_eq(prefilled, ENGINE_SYNC_CHUNK);
    ck_assert_int_eq(F->base.n_past, ENGINE_SYNC_CHUNK);
    assert_cache_holds_prefix_of(ids, N);
}
END_TEST

START_TEST(sync_refuses_more_tokens_than_the_context)
{
    static int32_t ids[CTX + 1];
    fill(ids, CTX + 1, 1);
    int reused = -1, prefilled = -1;
    tt_error err = {0};
    ck_assert_int_eq(engine_sync(&F->base, ids, CTX + 1, true, &reused, &prefilled, &err),
                     TT_ERR_CONTEXT);
    ck_assert(strstr(err.msg, "1025 tokens do not fit the context of 1024") != NULL);
    ck_assert_int_eq(reused, 0);
    ck_assert_int_eq(prefilled, 0);
    ck_assert_int_eq(F->n_spans, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("engine");
    TCase *tc = tu_add_case(s, "sync", TU_TESTS(
            the_mirror_follows_forwards_and_truncations,
            sync_forwards_a_long_prompt_in_spans_of_the_chunk_size,
            sync_keeps_the_common_prefix_and_truncates_the_rest,
            sync_with_logits_computes_the_last_token_again_when_all_are_cached,
            interrupted_sync_leaves_a_consistent_prefix, a_failing_span_leaves_the_spans_before_it,
            sync_refuses_more_tokens_than_the_context));
    tcase_add_checked_fixture(tc, setup, teardown);
    return tu_run_suite(s);
}
