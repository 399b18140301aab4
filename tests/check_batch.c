/* check_batch.c: the engine's sequences (KV-cache slots) and its batched forward: a row of a batch
 * gives the same bits as the same token run alone on a fresh engine, whatever the batch size, the
 * other rows, each sequence's position, the weight dtype, the thread count and the kernel set;
 * copied sequences continue exactly like their source; bad arguments change nothing. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine/engine.h"
#include "core/cpu/kernels.h"
#include "core/model/model.h"
#include "core/model/modelgen.h"
#include "tests/testutil.h"

/* ---------------------------------------------------------------------------------------------
 * Fixtures */

static char *model_dir;
static model *odd_model;           /* V 301, C 36, NH 3, L 3, FF 99: no shape a multiple of 32 */

static void odd_model_setup(void)
{
    static const tu_model_spec odd = {TT_F32, .seed = 5, .V = 301, .maxT = 40, .C = 36, .NH = 3,
                                      .L = 3, .FF = 99};
    odd_model = tu_load_model(&odd, &model_dir);
}

static void odd_model_teardown(void)
{
    tu_free_model(odd_model, model_dir);
}

/* ---------------------------------------------------------------------------------------------
 * Batch invariance */

#define MAX_SEQS 24
#define STEPS 5

/* The logits of sequence b's STEPS decode steps (testutil's sequences) run alone on a fresh
 * engine. (STEPS, V) */
static float *alone(const model *m, tt_dtype d, int n_threads, int n_ctx, int b)
{
    engine *e = tu_cpu_engine(m, d, n_threads, n_ctx);
    float *out = tu_seq_alone(e, b, STEPS);
    engine_free(e);
    return out;
}

/* B sequences decoded together, in the order of the permutation order[] (row r is sequence
 * order[r]); every row of every step must equal want[order[r]] bit for bit. */
static void check_batched(const model *m, tt_dtype d, int n_threads, int n_ctx, int B,
                          float *const *want, const char *what)
{
    engine *e = tu_cpu_engine(m, d, n_threads, n_ctx);
    const int V = m->config.V;
    tu_seq_prefill(e, B);
    int order[MAX_SEQS];
    for (int r = 0; r < B; r++)
        order[r] = (r * 7 + 3) % B;   /* 7 is prime to every B tested, so this permutes */
    for (int s = 0; s < STEPS; s++) {
        tu_seq_step(e, order, B, s);
        for (int r = 0; r < B; r++) {
            int b = order[r];
            ck_assert_msg(memcmp(engine_logits(e, r), want[b] + (size_t)s * (size_t)V,
                                 (size_t)V * sizeof(float)) == 0,
                          "%s: batch %d, step %d, row %d (sequence %d at position %d) differs "
                          "from the same token run alone", what, B, s, r, b,
                          tu_seq_prompt_len(b) + s);
        }
    }
    ck_assert_int_eq(e->n_past, tu_seq_prompt_len(0) + STEPS);   /* 0 is the single cache */
    engine_free(e);
}

START_TEST(a_batched_row_has_the_bits_of_the_same_token_run_alone)
{
    static const char *sets[] = {"reference",  "avx2", "avx512", "avx512vnni",
                                 "avx512bf16", "amx"};
    static const int batches[] = {1, 2, 3, 8};
    const model *m = odd_model;
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        if (!kernels_by_name(sets[k]))
            continue;
        setenv("TOKENTOP_KERNELS", sets[k], 1);
        for (tt_dtype d = TT_F32; d <= TT_Q8; d++) {
            float *want[MAX_SEQS];
            for (int b = 0; b < 8; b++)
                want[b] = alone(m, d, 1, 0, b);
            for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++)
                for (int nt = 1; nt <= 3; nt += 2) {
                    char what[64];
                    snprintf(what, sizeof what, "%s %s %d threads", sets[k], tt_dtype_name(d), nt);
                    check_batched(m, d, nt, 0, batches[i], want, what);
                }
            for (int b = 0; b < 8; b++)
                free(want[b]);
        }
    }
    unsetenv("TOKENTOP_KERNELS");
}
END_TEST

START_TEST(a_batch_larger_than_a_chunk_runs_in_groups_with_the_same_bits)
{
    /* n_ctx 16 makes the engine's chunk 16 rows: 24 sequences take two groups. */
    const model *m = odd_model;
    float *want[MAX_SEQS];
    for (int b = 0; b < MAX_SEQS; b++)
        want[b] = alone(m, TT_F32, 2, 16, b);
    check_batched(m, TT_F32, 2, 16, MAX_SEQS, want, "n_ctx 16");
    for (int b = 0; b < MAX_SEQS; b++)
        free(want[b]);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Copies */

/* Frees e after checking that its logits row r are, bit for bit, the last-token logits of
 * ids[0..n) run alone on a fresh one-thread engine. */
static void assert_row_is_the_run_alone(engine *e, int r, const int32_t *ids, int n)
{
    const model *m = e->model;
    const size_t bytes = (size_t)m->config.V * sizeof(float);
    float *want = malloc(bytes);
    memcpy(want, engine_logits(e, r), bytes);
    engine_free(e);
    e = tu_cpu_engine(m, TT_F32, 1, 0);
    tt_error err;
    ck_assert_msg(engine_forward(e, ids, n, 0, false, &err) == TT_OK, "%s", err.msg);
    ck_assert(memcmp(engine_logits(e, 0), want, bytes) == 0);
    free(want);
    engine_free(e);
}

START_TEST(a_copied_sequence_continues_exactly_like_its_source)
{
    const model *m = odd_model;
    const int V = m->config.V;
    engine *e = tu_cpu_engine(m, TT_F32, 2, 0);
    tt_error err;
    ck_assert_int_eq(engine_seq_reserve(e, 3, &err), TT_OK);
    int32_t ids[20];
    for (int t = 0; t < 20; t++)
        ids[t] = tu_seq_token(m, 1, t);
    /* sequence 0: a 6-token prompt; 1: a copy of all of it; 2: the prompt, then a copy of the
     * rest after both took 4 more tokens on sequence 0 */
    ck_assert_int_eq(engine_forward(e, ids, 6, 0, false, &err), TT_OK);
    ck_assert_int_eq(engine_seq_copy(e, 1, 0, 0, 6, &err), TT_OK);
    ck_assert_int_eq(engine_seq_copy(e, 2, 0, 0, 6, &err), TT_OK);
    ck_assert_int_eq(engine_seq_len(e, 1), 6);
    ck_assert_int_eq(engine_forward(e, ids + 6, 4, 6, false, &err), TT_OK);
    ck_assert_int_eq(engine_seq_copy(e, 2, 0, 6, 10, &err), TT_OK);   /* shared prefix of 6 */
    ck_assert_int_eq(engine_seq_len(e, 2), 10);
    ck_assert_int_eq(engine_seq_forward(e, 1, ids + 6, 4, 6, false, &err), TT_OK);
    /* all three now hold ids[0..10): the next token must give the same logits on each */
    int seqs[3] = {2, 0, 1};
    int32_t next[3] = {ids[10], ids[10], ids[10]};
    ck_assert_int_eq(engine_forward_batch(e, seqs, next, 3, &err), TT_OK);
    ck_assert(memcmp(engine_logits(e, 0), engine_logits(e, 1), (size_t)V * sizeof(float)) == 0);
    ck_assert(memcmp(engine_logits(e, 2), engine_logits(e, 1), (size_t)V * sizeof(float)) == 0);
    /* and sequence 0 is still the single-sequence cache */
    ck_assert_int_eq(e->n_past, 11);
    assert_row_is_the_run_alone(e, 1, ids, 11);
}
END_TEST

/* Each sequence's token mirror (engine_seq_tokens) holds what its cache holds, whoever changed
 * the cache: a span, a batched step or a copy; a later reserve keeps the mirrors where they are. */
START_TEST(every_sequence_mirror_follows_spans_batches_and_copies)
{
    engine *e = tu_cpu_engine(odd_model, TT_F32, 1, 0);
    tt_error err;
    ck_assert_ptr_null(engine_seq_tokens(e, 1));
    ck_assert_int_eq(engine_seq_reserve(e, 3, &err), TT_OK);
    int32_t *t1 = engine_seq_tokens(e, 1), *t2 = engine_seq_tokens(e, 2);
    ck_assert_ptr_nonnull(t1);
    ck_assert_ptr_nonnull(t2);
    ck_assert_ptr_null(engine_seq_tokens(e, 3));
    int32_t ids[8] = {5, 9, 11, 13, 17, 19, 23, 29};
    ck_assert_int_eq(engine_forward(e, ids, 4, 0, false, &err), TT_OK);
    ck_assert_int_eq(engine_seq_forward(e, 1, ids + 4, 2, 0, false, &err), TT_OK);
    ck_assert_int_eq(engine_seq_copy(e, 2, 0, 0, 3, &err), TT_OK);
    int seqs[3] = {1, 2, 0};
    int32_t next[3] = {ids[6], ids[7], ids[5]};
    ck_assert_int_eq(engine_forward_batch(e, seqs, next, 3, &err), TT_OK);
    const int32_t want0[5] = {5, 9, 11, 13, 19}, want1[3] = {17, 19, 23};
    const int32_t want2[4] = {5, 9, 11, 29};
    ck_assert_ptr_eq(engine_seq_tokens(e, 0), e->tokens);
    ck_assert(memcmp(e->tokens, want0, sizeof want0) == 0);
    ck_assert(memcmp(t1, want1, sizeof want1) == 0);
    ck_assert(memcmp(t2, want2, sizeof want2) == 0);
    /* a copy of the tail only (the first 2 positions shared) rewrites positions 2 .. n-1 */
    ck_assert_int_eq(engine_seq_copy(e, 2, 0, 2, 5, &err), TT_OK);
    ck_assert_int_eq(engine_seq_len(e, 2), 5);
    ck_assert(memcmp(t2, want0, sizeof want0) == 0);
    ck_assert_int_eq(engine_seq_reserve(e, 6, &err), TT_OK);
    ck_assert_ptr_eq(engine_seq_tokens(e, 1), t1);
    ck_assert(memcmp(engine_seq_tokens(e, 1), want1, sizeof want1) == 0);
    engine_free(e);
}
END_TEST

START_TEST(an_empty_sequence_in_a_batch_starts_at_position_zero)
{
    engine *e = tu_cpu_engine(odd_model, TT_F32, 2, 0);
    tt_error err;
    ck_assert_int_eq(engine_seq_reserve(e, 2, &err), TT_OK);
    int32_t ids[4] = {5, 9, 11, 13};
    ck_assert_int_eq(engine_forward(e, ids, 3, 0, false, &err), TT_OK);
    int seqs[2] = {0, 1};
    int32_t next[2] = {ids[3], ids[0]};
    ck_assert_int_eq(engine_forward_batch(e, seqs, next, 2, &err), TT_OK);
    ck_assert_int_eq(engine_seq_len(e, 1), 1);
    assert_row_is_the_run_alone(e, 1, ids, 1);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Bad input */

START_TEST(bad_batches_and_copies_are_refused_and_change_nothing)
{
    engine *e = tu_cpu_engine(odd_model, TT_F32, 1, 8);
    tu_assert_sequence_refusals(e);
    tt_error err;
    int32_t ids[1] = {1};
    ck_assert_int_eq(engine_seq_copy(e, 2, 1, 1, 4, &err), TT_ERR_ARG);
    ck_assert_str_eq(err.msg, "copy: shared prefix of 1 positions, but sequence 2 holds 0");
    ck_assert_int_eq(engine_seq_copy(e, 5, 1, 0, 4, &err), TT_ERR_ARG);
    ck_assert_str_eq(err.msg, "copy: sequence 5 does not exist (3 reserved)");
    ck_assert_int_eq(engine_seq_len(e, 2), 0);
    ck_assert_int_eq(engine_seq_forward(e, 4, ids, 1, 0, false, &err), TT_ERR_ARG);

    /* truncation of one sequence leaves the others */
    engine_seq_truncate(e, 1, 2);
    ck_assert_int_eq(engine_seq_len(e, 1), 2);
    ck_assert_int_eq(engine_seq_len(e, 0), 3);
    engine_seq_truncate(e, 0, 1);
    ck_assert_int_eq(e->n_past, 1);
    ck_assert_int_eq(engine_seq_len(e, 1), 2);
    engine_free(e);
}
END_TEST

START_TEST(reserving_sequences_grows_the_memory_the_engine_reports)
{
    engine *e = tu_cpu_engine(odd_model, TT_F32, 1, 0);
    size_t before = e->memory_bytes;
    tt_error err;
    ck_assert_int_eq(engine_seq_reserve(e, 4, &err), TT_OK);
    ck_assert_int_eq(engine_seq_reserve(e, 2, &err), TT_OK);   /* never shrinks */
    ck_assert_int_eq(engine_seq_count(e), 4);
    const model_config *c = e->config;
    size_t per = 2 * (size_t)c->L * (size_t)c->C * (size_t)e->n_ctx * sizeof(float);
    ck_assert_msg(e->memory_bytes - before >= 3 * per, "grew by %zu, want >= %zu",
                  e->memory_bytes - before, 3 * per);
    engine_free(e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("batch");
    TCase *tc = tu_add_case(s, "sequences", TU_TESTS(
            a_batched_row_has_the_bits_of_the_same_token_run_alone,
            a_batch_larger_than_a_chunk_runs_in_groups_with_the_same_bits,
            a_copied_sequence_continues_exactly_like_its_source,
            every_sequence_mirror_follows_spans_batches_and_copies,
            an_empty_sequence_in_a_batch_starts_at_position_zero,
            bad_batches_and_copies_are_refused_and_change_nothing,
            reserving_sequences_grows_the_memory_the_engine_reports));
    tcase_add_unchecked_fixture(tc, odd_model_setup, odd_model_teardown);
    tcase_set_timeout(tc, 120);
    return tu_run_suite(s);
}
