/* check_sampler.c: the sampler chain matches the peer vectors (llama.cpp, Hugging Face) where our
 * documented semantics agree, shows where they differ, agrees with a naive reference chain, and
 * draws exactly the distribution it reports. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/rng.h"
#include "core/decode/sampler.h"
#include "tests/testutil.h"

/* ---------------------------------------------------------------------------------------------
 * Helpers */

static sampler_params params(void)
{
    sampler_params p;
    sampler_params_default(&p);
    return p;
}

/* logits = ln(probs), as the peer vectors define them */
static void logits_of(const double *probs, int n, float *out)
{
    for (int i = 0; i < n; i++)
        out[i] = (float)log(probs[i]);
}

/* Applies the chain to n logits and copies the final distribution to out; returns the status. */
static tt_status run(int n, const float *logits, const sampler_params *p,
                     const sampler_context *ctx, float *out, sampler_snapshot *snap)
{
    sampler *s = sampler_create(n);
    ck_assert_ptr_nonnull(s);
    tt_error err = {0};
    tt_status st = sampler_apply(s, p, logits, ctx, snap, &err);
    if (st == TT_OK)
        memcpy(out, sampler_probs(s), (size_t)n * sizeof *out);
    sampler_free(s);
    return st;
}

static void assert_probs(const float *got, const double *want, int n, double tol)
{
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= tol, "token %d: p = %.7f, expected %.7f", i,
                      (double)got[i], want[i]);
}

/* Applies the chain to ln(probs) and compares with want. */
static void check_vector(const double *probs, int n, const sampler_params *p,
                         const sampler_context *ctx, const double *want, double tol)
{
    float logits[16], got[16];
    ck_assert_int_le(n, 16);
    logits_of(probs, n, logits);
    ck_assert_int_eq(run(n, logits, p, ctx, got, NULL), TT_OK);
    assert_probs(got, want, n, tol);
}

static const double P4[4] = {0.1, 0.2, 0.3, 0.4};

/* Logits shaped like a language model's: a few large ones over a broad, dense bulk, plus ties. */
static void lm_like_logits(rng *r, int V, float *x)
{
    for (int i = 0; i < V; i++) {
        double a = rng_uniform(r), b = rng_uniform(r);
        x[i] = (float)(sqrt(-2 * log(1 - a)) * cos(2 * M_PI * b) * 2.5 - 3);
    }
    for (int i = 0; i < 20 && i < V; i++)
        x[rng_next(r) % (uint64_t)V] += (float)(rng_uniform(r) * 12);
    for (int i = 0; i < V / 50; i++)   /* duplicated values: ties inside buckets */
        x[rng_next(r) % (uint64_t)V] = x[rng_next(r) % (uint64_t)V];
}

/* V such logits from a generator seeded with seed, malloc'd (the caller frees). */
static float *new_lm_like_logits(int V, uint64_t seed)
{
    float *x = malloc((size_t)V * sizeof *x);
    ck_assert_ptr_nonnull(x);
    rng r;
    rng_seed(&r, seed);
    lm_like_logits(&r, V, x);
    return x;
}

/* ---------------------------------------------------------------------------------------------
 * llama.cpp vectors (tests/test-sampling.cpp) */

START_TEST(temperature_one_keeps_distribution_and_zero_is_greedy)
{
    sampler_params p = params();
    check_vector(P4, 4, &p, NULL, P4, 1e-6);
    p.temperature = 0;
    const double greedy[4] = {0, 0, 0, 1};
    check_vector(P4, 4, &p, NULL, greedy, 0);
}
END_TEST

/* The snapshot's temp_p is temperature alone, before truncation: over P4 at temperature 0.5 and
 * top-k 2 it is p^2 normalised over all four tokens (the cut ones keep theirs), while p is the
 * kept two renormalised; greedy puts it all on the argmax. */
START_TEST(snapshot_temp_p_is_the_tempered_distribution_before_truncation)
{
    sampler_params p = params();
    p.temperature = 0.5f;
    p.top_k = 2;
    float logits[4], got[4];
    logits_of(P4, 4, logits);
    sampler_snapshot snap;
    ck_assert_int_eq(run(4, logits, &p, NULL, got, &snap), TT_OK);
    double z = 0;
    for (int i = 0; i < 4; i++)
        z += P4[i] * P4[i];
    ck_assert_int_eq(snap.n_top, 4);
    for (int k = 0; k < snap.n_top; k++) {
        const sampler_entry *e = &snap.top[k];
        ck_assert_msg(fabs(e->temp_p - P4[e->id] * P4[e->id] / z) < 1e-6, "token %d: %g",
                      (int)e->id, (double)e->temp_p);
        if (e->id < 2)
            ck_assert(e->temp_p > 0 && e->p == 0);   /* cut by top-k, tempered all the same */
    }
    p.greedy = true;
    ck_assert_int_eq(run(4, logits, &p, NULL, got, &snap), TT_OK);
    for (int k = 0; k < snap.n_top; k++)
        ck_assert_float_eq(snap.top[k].temp_p, snap.top[k].id == 3 ? 1.0f : 0.0f);
}
END_TEST

/* llama.cpp's vectors for the filters over P4: a setting's value (the rest at their defaults)
 * and the distribution it leaves. */
static const struct {
    const char *setting, *value;
    double want[4];
    double tol;
} llama_filter_cases[] = {
    {"top_k", "1", {0, 0, 0, 1}, 1e-6},
    {"top_k", "3", {0, 0.222222, 0.333333, 0.444444}, 1e-5},
    {"top_k", "4", {0.1, 0.2, 0.3, 0.4}, 1e-6},
    {"top_k", "0", {0.1, 0.2, 0.3, 0.4}, 1e-6},   /* disabled */
    {"top_p", "0", {0, 0, 0, 1}, 1e-6},
    {"top_p", "0.7", {0, 0, 0.428571, 0.571429}, 1e-5},
    {"top_p", "0.8", {0, 0.222222, 0.333333, 0.444444}, 1e-5},
    {"top_p", "1", {0.1, 0.2, 0.3, 0.4}, 1e-6},
    {"min_p", "0", {0.1, 0.2, 0.3, 0.4}, 1e-5},
    {"min_p", "0.24", {0.1, 0.2, 0.3, 0.4}, 1e-5},
    {"min_p", "0.26", {0, 0.2 / 0.9, 0.3 / 0.9, 0.4 / 0.9}, 1e-5},
    {"min_p", "0.49", {0, 0.2 / 0.9, 0.3 / 0.9, 0.4 / 0.9}, 1e-5},
    {"min_p", "0.51", {0, 0, 0.3 / 0.7, 0.4 / 0.7}, 1e-5},
    {"min_p", "0.74", {0, 0, 0.3 / 0.7, 0.4 / 0.7}, 1e-5},
    {"min_p", "0.76", {0, 0, 0, 1}, 1e-5},
    {"min_p", "1", {0, 0, 0, 1}, 1e-5},
};

#define N_LLAMA_FILTER_CASES ((int)(sizeof llama_filter_cases / sizeof llama_filter_cases[0]))

/* Looped over llama_filter_cases (_i; a failure names the case's number). */
START_TEST(a_filter_matches_its_llama_vector)
{
    sampler_params p = params();
    tt_error err = {0};
    ck_assert_msg(sampler_params_set(&p, llama_filter_cases[_i].setting,
                                     llama_filter_cases[_i].value, &err) == TT_OK, "%s", err.msg);
    check_vector(P4, 4, &p, NULL, llama_filter_cases[_i].want, llama_filter_cases[_i].tol);
}
END_TEST

/* llama.cpp clamps min_p 1.05 to "keep the top token"; our parameters are probabilities, so a
 * value above 1 is a user error (probably a typo) and is refused rather than reinterpreted. The
 * same answer as llama's {1.0} comes from 1.00, tested above. */
START_TEST(min_p_above_one_is_rejected_unlike_llama)
{
    sampler_params p = params();
    p.min_p = 1.05f;
    float logits[4], got[4];
    logits_of(P4, 4, logits);
    ck_assert_int_eq(run(4, logits, &p, NULL, got, NULL), TT_ERR_ARG);
    tt_error err = {0};
    ck_assert_int_eq(sampler_params_validate(&p, &err), TT_ERR_ARG);
    ck_assert_str_eq(err.msg, "min_p: 1.05 is outside [0, 1]");
}
END_TEST

/* Typical-p (llama.cpp's {0.97,0.01,0.01,0.01} -> {0.97} and {0.4,0.2,0.2,0.2} -> the three 0.2
 * tokens) is not implemented: it is the one filter that can drop the most likely token, which
 * the histogram could not explain in one line. Asking for it is an error, not a silent no-op. */
START_TEST(typical_p_is_not_implemented)
{
    sampler_params p = params(), before = p;
    tt_error err = {0};
    ck_assert_int_eq(sampler_params_set(&p, "typical", "0.5", &err), TT_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(err.msg, "unknown sampler setting \"typical\""));
    ck_assert(tu_same_sampler_params(&p, &before));
}
END_TEST

START_TEST(penalties_match_llama_vectors)
{
    static const double flat[5] = {0.2, 0.2, 0.2, 0.2, 0.2};
    static const int32_t h0[] = {0}, h012[] = {0, 1, 2}, h01200[] = {0, 1, 2, 0, 0};
    sampler_context c0 = {h0, 1, -1}, c012 = {h012, 3, -1}, c01200 = {h01200, 5, -1};

    sampler_params rep = params();
    rep.repetition_penalty = 50;
    const double r0[5] = {0, 0.25, 0.25, 0.25, 0.25};
    const double r012[5] = {0, 0, 0, 0.5, 0.5};
    check_vector(flat, 5, &rep, &c0, r0, 1e-6);
    check_vector(flat, 5, &rep, &c012, r012, 1e-6);
    check_vector(flat, 5, &rep, &c01200, r012, 1e-6);

    sampler_params fp = params();
    fp.frequency_penalty = 5;
    fp.presence_penalty = 5;
    const double f0[5] = {0.000011, 0.249997, 0.249997, 0.249997, 0.249997};
    const double f012[5] = {0.000023, 0.000023, 0.000023, 0.499966, 0.499966};
    const double f01200[5] = {0.000000, 0.000023, 0.000023, 0.499977, 0.499977};
    check_vector(flat, 5, &fp, &c0, f0, 1e-6);
    check_vector(flat, 5, &fp, &c012, f012, 1e-6);
    check_vector(flat, 5, &fp, &c01200, f01200, 1e-6);
}
END_TEST

START_TEST(penalized_tokens_are_marked_in_snapshot)
{
    float logits[5] = {0, 0, 0, 0, 0}, got[5];
    static const int32_t h[] = {1, 3};
    sampler_context c = {h, 2, -1};
    sampler_params p = params();
    p.presence_penalty = 1;
    sampler_snapshot snap;
    ck_assert_int_eq(run(5, logits, &p, &c, got, &snap), TT_OK);
    ck_assert_int_eq(snap.n_top, 5);
    for (int k = 0; k < snap.n_top; k++) {
        int id = snap.top[k].id;
        ck_assert_msg(snap.top[k].penalized == (id == 1 || id == 3), "token %d", id);
        ck_assert_int_eq(snap.top[k].cut, SAMPLER_CUT_NONE);
        ck_assert_float_eq(snap.top[k].logit, 0.0f);   /* the raw logit, not the penalized one */
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Hugging Face vectors (tests/generation/test_logits_process.py) */

START_TEST(top_p_matches_hf_vectors)
{
    sampler_params p = params();
    p.top_p = 0.8f;
    const double a[4] = {0.3, 0.1, 0.1, 0.5};
    const double a_want[4] = {0.3 / 0.8, 0, 0, 0.5 / 0.8};
    check_vector(a, 4, &p, NULL, a_want, 1e-6);
    const double b[4] = {0.15, 0.3, 0.3, 0.25};
    const double b_want[4] = {0, 0.3 / 0.85, 0.3 / 0.85, 0.25 / 0.85};
    check_vector(b, 4, &p, NULL, b_want, 1e-6);
}
END_TEST

/* The cumulative sum 0.5 + 0.3 lands on either side of 0.8 depending on float rounding; shifting
 * every logit by a constant changes the rounding but not the distribution, and the answer must
 * not change: the sum is within the documented 1e-6 of p, so it reaches p. */
START_TEST(top_p_boundary_does_not_depend_on_rounding)
{
    const double a[4] = {0.3, 0.1, 0.1, 0.5};
    sampler_params p = params();
    p.top_p = 0.8f;
    for (int c = -50; c <= 50; c++) {
        float logits[4], got[4];
        for (int i = 0; i < 4; i++)
            logits[i] = (float)(log(a[i]) + c * 0.173);
        ck_assert_int_eq(run(4, logits, &p, NULL, got, NULL), TT_OK);
        ck_assert_msg(got[1] == 0 && got[2] == 0 && got[0] > 0 && got[3] > 0,
                      "shift %d kept {%g %g %g %g}", c, (double)got[0], (double)got[1],
                      (double)got[2], (double)got[3]);
    }
}
END_TEST

START_TEST(min_p_matches_hf_vectors)
{
    sampler_params p = params();
    p.min_p = 0.05f;
    const double a[4] = {0.9, 0.0274, 0.047, 0.0274};
    const double a_want[4] = {0.9 / 0.947, 0, 0.047 / 0.947, 0};
    check_vector(a, 4, &p, NULL, a_want, 1e-6);
    const double b[4] = {0.97, 0.01, 0.01, 0.01};
    const double b_want[4] = {1, 0, 0, 0};
    check_vector(b, 4, &p, NULL, b_want, 1e-6);
}
END_TEST

/* HF: repetition 2.0 turns a raw score -0.1 into -0.2 (multiplied) and 0.1 into 0.05 (divided).
 * Seen through probabilities: ln(p_i / p_ref) is the penalized logit minus the reference's 0. */
START_TEST(repetition_penalty_on_raw_scores_matches_hf)
{
    float logits[3] = {0.1f, -0.1f, 0.0f}, got[3];
    static const int32_t h[] = {0, 1};
    sampler_context c = {h, 2, -1};
    sampler_params p = params();
    p.repetition_penalty = 2;
    ck_assert_int_eq(run(3, logits, &p, &c, got, NULL), TT_OK);
    ck_assert_double_eq_tol(log(got[0] / got[2]), 0.05, 1e-6);
    ck_assert_double_eq_tol(log(got[1] / got[2]), -0.2, 1e-6);
}
END_TEST

/* HF keeps every token tied with the k-th value; we keep exactly k (ties to the lower id), like
 * llama.cpp, so "top-k 1" always shows one row and the count in the status bar is the truth. */
START_TEST(top_k_keeps_exactly_k_on_ties_unlike_hf)
{
    float logits[4] = {1, 2, 2, 0}, got[4];
    sampler_params p = params();
    p.top_k = 1;
    sampler_snapshot snap;
    ck_assert_int_eq(run(4, logits, &p, NULL, got, &snap), TT_OK);
    ck_assert_float_eq(got[1], 1.0f);   /* HF would give {0, 0.5, 0.5, 0} */
    ck_assert_float_eq(got[2], 0.0f);
    ck_assert_int_eq(snap.n_kept, 1);
    ck_assert_int_eq(snap.top[1].id, 2);
    ck_assert_int_eq(snap.top[1].cut, SAMPLER_CUT_TOP_K);
    p.top_k = 2;
    ck_assert_int_eq(run(4, logits, &p, NULL, got, NULL), TT_OK);
    ck_assert_float_eq(got[1], 0.5f);
    ck_assert_float_eq(got[2], 0.5f);
}
END_TEST

/* sampling-vectors.md, "Why order matters": logits [3,2,1], top-p 0.8, temperature 0.5. */
START_TEST(chain_order_changes_what_top_p_keeps)
{
    float logits[3] = {3, 2, 1}, got[3];
    sampler_params p = params();
    p.top_p = 0.8f;
    p.temperature = 0.5f;
    sampler_snapshot snap;

    p.order = SAMPLER_ORDER_LLAMA;
    ck_assert_int_eq(run(3, logits, &p, NULL, got, &snap), TT_OK);
    const double llama[3] = {0.880797, 0.119203, 0};
    assert_probs(got, llama, 3, 1e-6);
    ck_assert_int_eq(snap.top[2].cut, SAMPLER_CUT_TOP_P);

    p.order = SAMPLER_ORDER_HF;
    ck_assert_int_eq(run(3, logits, &p, NULL, got, &snap), TT_OK);
    const double hf[3] = {1, 0, 0};
    assert_probs(got, hf, 3, 0);
    ck_assert_int_eq(snap.top[1].cut, SAMPLER_CUT_TOP_P);
    ck_assert_int_eq(snap.n_kept, 1);
}
END_TEST

/* Each token is attributed to the first stage, in chain order, that removed it. */
START_TEST(snapshot_names_the_stage_that_cut_each_token)
{
    /* probabilities ~ {0.4, 0.3, 0.15, 0.1, 0.05} at T = 1 */
    const double pr[6] = {0.4, 0.3, 0.15, 0.1, 0.04, 0.01};
    float logits[6], got[6];
    logits_of(pr, 6, logits);
    static const int32_t h[] = {5};
    sampler_context c = {h, 1, 0};   /* token 0 banned, token 5 penalized */
    sampler_params p = params();
    p.top_k = 4;      /* of {1,2,3,4,5}: cuts 5 */
    p.top_p = 0.9f;   /* of {1,2,3,4} renormalised {.508,.254,.169,.068}: cuts 4 */
    p.min_p = 0.4f;   /* of {1,2,3}: 0.1/0.3 < 0.4 cuts 3 */
    p.presence_penalty = 0.1f;
    sampler_snapshot snap;
    ck_assert_int_eq(run(6, logits, &p, &c, got, &snap), TT_OK);
    const uint8_t want[6] = {SAMPLER_CUT_BANNED, SAMPLER_CUT_NONE,  SAMPLER_CUT_NONE,
                             SAMPLER_CUT_MIN_P,  SAMPLER_CUT_TOP_P, SAMPLER_CUT_TOP_K};
    ck_assert_int_eq(snap.n_top, 6);
    for (int k = 0; k < 6; k++) {
        ck_assert_int_eq(snap.top[k].id, k);   /* raw order */
        ck_assert_msg(snap.top[k].cut == want[k], "token %d cut %s", k,
                      sampler_cut_name((sampler_cut)snap.top[k].cut));
        ck_assert_int_eq(snap.top[k].penalized, k == 5);
    }
    ck_assert_int_eq(snap.n_kept, 2);
    ck_assert_double_eq_tol(got[1], 2.0 / 3.0, 1e-6);
    ck_assert_str_eq(sampler_cut_name(SAMPLER_CUT_TOP_P), "top_p");
    ck_assert_ptr_null(sampler_cut_name(SAMPLER_CUT_NONE));
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Edge cases */

START_TEST(every_token_masked_fails_numeric_and_draws_nothing)
{
    sampler *s = sampler_create(3);
    sampler_params p = params();
    tt_error err = {0};
    float ok[3] = {0, 1, 2};
    ck_assert_int_eq(sampler_apply(s, &p, ok, NULL, NULL, &err), TT_OK);
    float masked[3] = {-INFINITY, -INFINITY, -INFINITY};
    ck_assert_int_eq(sampler_apply(s, &p, masked, NULL, NULL, &err), TT_ERR_NUMERIC);
    ck_assert_ptr_nonnull(strstr(err.msg, "-inf"));
    ck_assert_ptr_null(sampler_probs(s));
    ck_assert_int_eq(sampler_draw(s, 0.5, NULL), -1);
    ck_assert_int_eq(sampler_force(s, 1, NULL), -1);

    /* the only finite token banned */
    float one[3] = {-INFINITY, 1, -INFINITY};
    sampler_context c = {NULL, 0, 1};
    ck_assert_int_eq(sampler_apply(s, &p, one, &c, NULL, &err), TT_ERR_NUMERIC);
    ck_assert_ptr_nonnull(strstr(err.msg, "masking token 1"));
    p.greedy = true;
    ck_assert_int_eq(sampler_apply(s, &p, one, &c, NULL, &err), TT_ERR_NUMERIC);
    sampler_free(s);
}
END_TEST

START_TEST(nan_and_plus_inf_logits_are_rejected_naming_the_first)
{
    sampler *s = sampler_create(20);
    sampler_params p = params();
    tt_error err = {0};
    float x[20] = {0};
    x[3] = -INFINITY;   /* legal */
    x[9] = INFINITY;
    x[13] = NAN;
    ck_assert_int_eq(sampler_apply(s, &p, x, NULL, NULL, &err), TT_ERR_NUMERIC);
    ck_assert_str_eq(err.msg, "sampler: logits[9] is +inf");
    x[7] = -NAN;
    ck_assert_int_eq(sampler_apply(s, &p, x, NULL, NULL, &err), TT_ERR_NUMERIC);
    ck_assert_str_eq(err.msg, "sampler: logits[7] is NaN");
    ck_assert_ptr_null(sampler_probs(s));
    ck_assert_int_eq(sampler_draw(s, 0.1, NULL), -1);
    /* also in the scalar tail and in greedy mode */
    float y[19] = {0};
    y[18] = NAN;
    p.greedy = true;
    sampler *t = sampler_create(19);
    ck_assert_int_eq(sampler_apply(t, &p, y, NULL, NULL, &err), TT_ERR_NUMERIC);
    ck_assert_str_eq(err.msg, "sampler: logits[18] is NaN");
    sampler_free(t);
    sampler_free(s);
}
END_TEST

START_TEST(minus_inf_logit_is_a_legal_mask)
{
    float logits[5] = {1, -INFINITY, 1, 1, -INFINITY}, got[5];
    sampler_params p = params();
    sampler_snapshot snap;
    ck_assert_int_eq(run(5, logits, &p, NULL, got, &snap), TT_OK);
    const double want[5] = {1.0 / 3, 0, 1.0 / 3, 1.0 / 3, 0};
    assert_probs(got, want, 5, 1e-6);
    ck_assert_int_eq(snap.n_kept, 3);
    ck_assert_int_eq(snap.top[3].id, 1);
    ck_assert_int_eq(snap.top[3].cut, SAMPLER_CUT_BANNED);
    ck_assert_float_eq(snap.top[3].raw_p, 0.0f);
}
END_TEST

START_TEST(banned_token_is_masked_before_everything)
{
    float logits[4] = {0, 5, 1, 0}, got[4];
    sampler_context c = {NULL, 0, 1};   /* the argmax is banned */
    sampler_params p = params();
    p.top_k = 1;
    sampler_snapshot snap;
    ck_assert_int_eq(run(4, logits, &p, &c, got, &snap), TT_OK);
    ck_assert_float_eq(got[1], 0.0f);
    ck_assert_float_eq(got[2], 1.0f);   /* top-k 1 sees the next one */
    ck_assert_int_eq(snap.top[0].id, 1);
    ck_assert_int_eq(snap.top[0].cut, SAMPLER_CUT_BANNED);
    ck_assert_float_gt(snap.top[0].raw_p, 0.9f);   /* raw_p is the model's, before the mask */
    p.greedy = true;
    ck_assert_int_eq(run(4, logits, &p, &c, got, &snap), TT_OK);
    ck_assert_float_eq(got[2], 1.0f);
    ck_assert_int_eq(snap.top[0].cut, SAMPLER_CUT_BANNED);
    ck_assert_int_eq(snap.top[2].cut, SAMPLER_CUT_GREEDY);
}
END_TEST

START_TEST(empty_history_applies_no_penalty)
{
    float logits[4], got[4];
    logits_of(P4, 4, logits);
    sampler_params p = params();
    p.repetition_penalty = 50;
    p.frequency_penalty = 3;
    sampler_context c = {NULL, 0, -1};
    ck_assert_int_eq(run(4, logits, &p, &c, got, NULL), TT_OK);
    assert_probs(got, P4, 4, 1e-6);
    ck_assert_int_eq(run(4, logits, &p, NULL, got, NULL), TT_OK);
    assert_probs(got, P4, 4, 1e-6);
}
END_TEST

/* Frequency 1 with flat logits: a token's logit drops by its count in the window. */
static void window_counts(int window, const int *want_counts)
{
    float logits[5] = {0, 0, 0, 0, 0}, got[5];
    static const int32_t h[] = {0, 0, 1, 2, 3, 3};
    sampler_context c = {h, 6, -1};
    sampler_params p = params();
    p.frequency_penalty = 1;
    p.penalty_window = window;
    ck_assert_int_eq(run(5, logits, &p, &c, got, NULL), TT_OK);
    for (int i = 0; i < 5; i++)
        ck_assert_msg(fabs(log(got[i] / got[4]) + want_counts[i]) < 1e-5,
                      "window %d token %d: log ratio %g, count %d", window, i,
                      log(got[i] / got[4]), want_counts[i]);
}

START_TEST(penalty_window_counts_only_the_last_tokens)
{
    const int none[5] = {0, 0, 0, 0, 0};
    const int last3[5] = {0, 0, 1, 2, 0};
    const int all[5] = {2, 1, 1, 2, 0};
    window_counts(0, none);
    window_counts(3, last3);
    window_counts(-1, all);
    window_counts(6, all);
    window_counts(1000, all);   /* longer than the history */
}
END_TEST

START_TEST(out_of_range_ids_in_context_are_rejected)
{
    sampler *s = sampler_create(4);
    sampler_params p = params();
    p.presence_penalty = 1;
    float logits[4] = {0, 0, 0, 0};
    tt_error err = {0};
    static const int32_t h[] = {0, 4, 1};
    sampler_context c = {h, 3, -1};
    ck_assert_int_eq(sampler_apply(s, &p, logits, &c, NULL, &err), TT_ERR_ARG);
    ck_assert_str_eq(err.msg, "sampler: history[1]: token 4 is outside the vocabulary [0, 4)");
    c.n_history = 1;   /* the bad id is outside the window now: fine */
    p.penalty_window = 1;
    c.history = h + 2;
    ck_assert_int_eq(sampler_apply(s, &p, logits, &c, NULL, &err), TT_OK);
    sampler_context b = {NULL, 0, 7};
    ck_assert_int_eq(sampler_apply(s, &p, logits, &b, NULL, &err), TT_ERR_ARG);
    ck_assert_str_eq(err.msg, "sampler: banned token 7 is outside [0, 4)");
    /* a failed apply does not leave counts behind: the next penalties are the same */
    float got[4];
    c.history = h;
    c.n_history = 1;
    ck_assert_int_eq(sampler_apply(s, &p, logits, &c, NULL, &err), TT_OK);
    memcpy(got, sampler_probs(s), sizeof got);
    ck_assert_double_eq_tol(log(got[0] / got[1]), -1.0, 1e-6);
    sampler_free(s);
}
END_TEST

/* 50257 equal logits: the tie rule keeps the lowest ids, and a draw walks them in id order.
 * k = 10 goes through the heap selection; with k = 2000 one bucket holds everything, too many
 * for the short list, so the full pass handles the cut. */
START_TEST(top_k_on_equal_logits_keeps_the_lowest_ids)
{
    int V = 50257;
    float *x = calloc((size_t)V, sizeof *x);
    sampler *s = sampler_create(V);
    sampler_params p = params();
    sampler_snapshot snap;
    const int ks[] = {10, 2000};
    for (int t = 0; t < 2; t++) {
        int k = ks[t];
        p.top_k = k;
        ck_assert_int_eq(sampler_apply(s, &p, x, NULL, &snap, NULL), TT_OK);
        const float *pr = sampler_probs(s);
        for (int i = 0; i < V; i++)
            if (pr[i] != (i < k ? 1.0f / k : 0.0f))
                ck_abort_msg("k %d token %d: p = %g", k, i, (double)pr[i]);
        ck_assert_int_eq(snap.n_kept, k);
        ck_assert_int_eq(snap.top[10].cut, k == 10 ? SAMPLER_CUT_TOP_K : SAMPLER_CUT_NONE);
        ck_assert_int_eq(sampler_draw(s, 0.55, &snap), (int)(0.55 * k));
        ck_assert_int_eq(sampler_force(s, k - 1, &snap), k - 1);
        ck_assert_int_eq(snap.token_rank, k - 1);
        ck_assert_int_eq(sampler_force(s, k, &snap), k);
        ck_assert_int_eq(snap.token_rank, -1);
    }
    p.top_k = 0;   /* and without top-k: the draw sorts one bucket of 50257 */
    ck_assert_int_eq(sampler_apply(s, &p, x, NULL, &snap, NULL), TT_OK);
    ck_assert_int_eq(sampler_draw(s, 0.5, &snap), V / 2);
    ck_assert_int_eq(snap.token_rank, V / 2);
    sampler_free(s);
    free(x);
}
END_TEST

START_TEST(top_k_larger_than_vocab_is_capped)
{
    sampler_params p = params();
    p.top_k = 1000;
    check_vector(P4, 4, &p, NULL, P4, 1e-6);
}
END_TEST

START_TEST(single_token_vocabulary_always_draws_it)
{
    sampler *s = sampler_create(1);
    sampler_params p = params();
    p.top_p = 0.5f;
    p.min_p = 0.5f;
    p.top_k = 3;
    float x[1] = {-3};
    sampler_snapshot snap;
    ck_assert_int_eq(sampler_apply(s, &p, x, NULL, &snap, NULL), TT_OK);
    ck_assert_float_eq(sampler_probs(s)[0], 1.0f);
    ck_assert_float_eq(snap.entropy_final, 0.0f);
    ck_assert_float_eq(snap.entropy_raw, 0.0f);
    ck_assert_int_eq(sampler_draw(s, 0.0, &snap), 0);
    ck_assert_int_eq(sampler_draw(s, 0.9999999, &snap), 0);
    ck_assert_int_eq(snap.n_top, 1);
    ck_assert_int_eq(snap.token_rank, 0);
    ck_assert_ptr_null(sampler_create(0));
    sampler_free(s);
    sampler_free(NULL);
}
END_TEST

/* A sampler that has applied the default settings to the logits of P4. */
static sampler *p4_sampler(void)
{
    sampler *s = sampler_create(4);
    sampler_params p = params();
    float logits[4];
    logits_of(P4, 4, logits);
    ck_assert_int_eq(sampler_apply(s, &p, logits, NULL, NULL, NULL), TT_OK);
    return s;
}

START_TEST(u_close_to_one_never_runs_off_the_end)
{
    sampler *s = p4_sampler();
    sampler_snapshot snap;
    const double us[] = {0.9999999, nextafter(1.0, 0.0), 1.0, 2.0};
    for (size_t i = 0; i < sizeof us / sizeof us[0]; i++) {
        ck_assert_int_eq(sampler_draw(s, us[i], &snap), 0);   /* the least likely kept token */
        ck_assert_int_eq(snap.token_rank, 3);
        ck_assert_double_eq_tol(snap.cum_lo, 0.9, 1e-6);
    }
    ck_assert_int_eq(sampler_draw(s, NAN, NULL), 3);
    ck_assert_int_eq(sampler_draw(s, -0.5, NULL), 3);

    /* and on a large vocabulary with a long tail, with and without filters */
    int V = 50257;
    sampler *t = sampler_create(V);
    float *x = malloc((size_t)V * sizeof *x);
    rng r;
    rng_seed(&r, 5);
    for (int i = 0; i < V; i++)
        x[i] = (float)(rng_uniform(&r) * 30 - 20);
    for (int f = 0; f < 3; f++) {
        sampler_params p = params();
        if (f == 1)
            p.top_p = 0.9f;
        if (f == 2)
            p.top_k = 100;
        ck_assert_int_eq(sampler_apply(t, &p, x, NULL, &snap, NULL), TT_OK);
        int32_t id = sampler_draw(t, 0.9999999, &snap);
        ck_assert_int_ge(id, 0);
        ck_assert_float_gt(sampler_probs(t)[id], 0.0f);
        ck_assert_int_lt(snap.token_rank, snap.n_kept);
        ck_assert(snap.cum_lo <= 0.9999999 && 0.9999999 < snap.cum_lo + snap.token_p + 1e-12);
        id = sampler_draw(t, nextafter(1.0, 0.0), &snap);
        ck_assert_int_eq(snap.token_rank, snap.n_kept - 1);
    }
    free(x);
    sampler_free(t);
    sampler_free(s);
}
END_TEST

START_TEST(greedy_takes_the_lower_id_on_ties_and_ignores_u)
{
    float logits[4] = {1, 3, 3, 2};
    sampler *s = sampler_create(4);
    sampler_params p = params();
    sampler_snapshot snap;
    for (int mode = 0; mode < 2; mode++) {
        p = params();
        if (mode == 0)
            p.greedy = true;
        else
            p.temperature = 0;
        ck_assert_int_eq(sampler_apply(s, &p, logits, NULL, &snap, NULL), TT_OK);
        ck_assert_int_eq(snap.n_kept, 1);
        ck_assert_float_eq(snap.entropy_final, 0.0f);
        for (double u = 0; u < 1; u += 0.1) {
            ck_assert_int_eq(sampler_draw(s, u, &snap), 1);
            ck_assert_double_eq(snap.u, -1);
            ck_assert_float_eq(snap.token_p, 1.0f);
        }
        ck_assert_int_eq(snap.top[1].id, 2);
        ck_assert_int_eq(snap.top[1].cut, SAMPLER_CUT_GREEDY);
    }
    sampler_free(s);
}
END_TEST

START_TEST(draw_walks_descending_probability_and_reports_the_interval)
{
    sampler *s = p4_sampler();
    const struct {
        double u;
        int id, rank;
        double cum_lo;
    } cases[] = {{0.0, 3, 0, 0},   {0.39, 3, 0, 0},  {0.41, 2, 1, 0.4},
                 {0.69, 2, 1, 0.4}, {0.71, 1, 2, 0.7}, {0.95, 0, 3, 0.9}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sampler_snapshot snap;
        ck_assert_int_eq(sampler_draw(s, cases[i].u, &snap), cases[i].id);
        ck_assert_int_eq(snap.token, cases[i].id);
        ck_assert_int_eq(snap.token_rank, cases[i].rank);
        ck_assert_double_eq_tol(snap.cum_lo, cases[i].cum_lo, 1e-6);
        ck_assert_double_eq(snap.u, cases[i].u);
        ck_assert(snap.u >= snap.cum_lo && snap.u < snap.cum_lo + snap.token_p);
        ck_assert(!snap.forced);
        ck_assert_double_eq_tol(snap.token_raw_p, P4[cases[i].id], 1e-6);
    }
    sampler_free(s);
}
END_TEST

/* Entropy of a distribution given as doubles, in bits. */
static double entropy_bits(const double *pr, int n)
{
    double h = 0;
    for (int i = 0; i < n; i++)
        if (pr[i] > 0)
            h -= pr[i] * log2(pr[i]);
    return h;
}

START_TEST(snapshot_lists_top_raw_tokens_and_always_the_chosen_one)
{
    int V = 100;
    float x[100];
    rng r;
    rng_seed(&r, 11);
    for (int i = 0; i < V; i++)
        x[i] = (float)(rng_uniform(&r) * 8);
    x[40] = x[41] = 9;   /* a tie at the top: lower id first */
    sampler *s = sampler_create(V);
    sampler_params p = params();
    p.temperature = 0.7f;
    p.top_k = 50;
    sampler_snapshot snap;
    ck_assert_int_eq(sampler_apply(s, &p, x, NULL, &snap, NULL), TT_OK);
    ck_assert_int_eq(snap.n_top, SAMPLER_TOP_MAX);
    ck_assert_int_eq(snap.top[0].id, 40);
    ck_assert_int_eq(snap.top[1].id, 41);
    ck_assert_int_eq(snap.token, -1);
    for (int k = 1; k < snap.n_top; k++)
        ck_assert(snap.top[k - 1].raw_p > snap.top[k].raw_p ||
                  (snap.top[k - 1].raw_p == snap.top[k].raw_p &&
                   snap.top[k - 1].id < snap.top[k].id));
    /* the 32nd entry is really the 32nd largest raw logit */
    int above = 0;
    for (int i = 0; i < V; i++)
        above += x[i] > snap.top[SAMPLER_TOP_MAX - 1].logit;
    ck_assert_int_le(above, SAMPLER_TOP_MAX - 1);

    /* entropies against a double-precision reference */
    double raw[100], fin[100], mx = 9, z = 0;
    for (int i = 0; i < V; i++)
        z += exp(x[i] - mx);
    for (int i = 0; i < V; i++) {
        raw[i] = exp(x[i] - mx) / z;
        fin[i] = sampler_probs(s)[i];
    }
    ck_assert_double_eq_tol(snap.entropy_raw, entropy_bits(raw, V), 1e-4);
    ck_assert_double_eq_tol(snap.entropy_final, entropy_bits(fin, V), 1e-4);
    ck_assert_int_eq(snap.n_kept, 50);
    for (int k = 0; k < snap.n_top; k++)
        ck_assert_double_eq_tol(snap.top[k].raw_p, raw[snap.top[k].id], 1e-6);

    /* force the least likely token: appended, cut by top-k, rank -1 */
    int low = 0;
    for (int i = 0; i < V; i++)
        if (x[i] < x[low])
            low = i;
    ck_assert_int_eq(sampler_force(s, low, &snap), low);
    ck_assert_int_eq(snap.n_top, SAMPLER_TOP_MAX + 1);
    ck_assert_int_eq(snap.top[SAMPLER_TOP_MAX].id, low);
    ck_assert_int_eq(snap.top[SAMPLER_TOP_MAX].cut, SAMPLER_CUT_TOP_K);
    ck_assert(snap.forced);
    ck_assert_double_eq(snap.u, -1);
    ck_assert_int_eq(snap.token_rank, -1);
    ck_assert_float_eq(snap.token_p, 0.0f);
    ck_assert_int_eq(sampler_force(s, V, &snap), -1);
    ck_assert_int_eq(sampler_force(s, -1, &snap), -1);

    /* force the argmax: rank 0; a draw after it is unaffected and reuses the same snapshot */
    ck_assert_int_eq(sampler_force(s, 40, &snap), 40);
    ck_assert_int_eq(snap.token_rank, 0);
    ck_assert_int_eq(snap.n_top, SAMPLER_TOP_MAX);
    ck_assert_double_eq(snap.cum_lo, 0);
    sampler_snapshot d;
    int32_t id = sampler_draw(s, 0.5, &d);
    ck_assert_int_eq(sampler_force(s, id, &snap), id);
    ck_assert_int_eq(snap.token_rank, d.token_rank);
    ck_assert_double_eq_tol(snap.cum_lo, d.cum_lo, 1e-12);
    ck_assert(!d.forced);
    sampler_free(s);
}
END_TEST

static bool same_entries(const sampler_entry *a, const sampler_entry *b, int n)
{
    for (int k = 0; k < n; k++)
        if (a[k].id != b[k].id || a[k].logit != b[k].logit || a[k].raw_p != b[k].raw_p ||
            a[k].p != b[k].p || a[k].cut != b[k].cut || a[k].penalized != b[k].penalized)
            return false;
    return true;
}

/* apply without a snapshot (speculative verification does) defers the raw statistics and the
 * top list; a later draw or force must still report exactly what an apply with one would. */
START_TEST(snapshot_requested_late_is_the_same)
{
    int V = 5000;
    float *x = new_lm_like_logits(V, 8);
    sampler *s = sampler_create(V);
    for (int mode = 0; mode < 3; mode++) {
        sampler_params p = params();
        p.temperature = mode == 0 ? 1.0f : 0.6f;   /* 1 shares the raw pass with the chain */
        p.greedy = mode == 2;
        sampler_snapshot early, late_draw, late_force, d;
        ck_assert_int_eq(sampler_apply(s, &p, x, NULL, &early, NULL), TT_OK);
        int32_t id = sampler_draw(s, 0.3, &d);
        ck_assert_int_eq(sampler_apply(s, &p, x, NULL, NULL, NULL), TT_OK);
        ck_assert_int_eq(sampler_draw(s, 0.3, &late_draw), id);
        ck_assert_int_eq(sampler_apply(s, &p, x, NULL, NULL, NULL), TT_OK);
        ck_assert_int_eq(sampler_force(s, id, &late_force), id);
        ck_assert_float_eq(late_draw.entropy_raw, early.entropy_raw);
        ck_assert_float_eq(late_force.entropy_raw, early.entropy_raw);
        ck_assert_float_gt(early.entropy_raw, 0.0f);
        ck_assert_int_eq(late_draw.n_top, d.n_top);
        ck_assert(same_entries(late_draw.top, d.top, d.n_top));
        ck_assert(same_entries(late_force.top, early.top, SAMPLER_TOP_MAX));
        ck_assert_float_eq(late_draw.token_raw_p, d.token_raw_p);
    }
    sampler_free(s);
    free(x);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * A naive reference chain (double precision, a full sort) for randomized comparison */

static const double *ref_z;
static int ref_cmp(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    if (ref_z[i] != ref_z[j])
        return ref_z[i] > ref_z[j] ? -1 : 1;
    return i - j;
}

/* out: final probabilities; order: kept tokens in draw order; returns how many were kept. */
static int ref_chain(int V, const float *logits, const sampler_params *p,
                     const sampler_context *c, double *out, int *order)
{
    double *z = malloc((size_t)V * sizeof *z);
    for (int i = 0; i < V; i++)
        z[i] = logits[i];
    if (c && c->banned >= 0)
        z[c->banned] = -INFINITY;
    if (c && p->penalty_window != 0) {
        int from = p->penalty_window < 0 || p->penalty_window >= c->n_history
                       ? 0
                       : c->n_history - p->penalty_window;
        int *cnt = calloc((size_t)V, sizeof *cnt);
        for (int i = from; i < c->n_history; i++)
            cnt[c->history[i]]++;
        for (int t = 0; t < V; t++) {
            if (!cnt[t] || z[t] == -INFINITY)
                continue;
            double r = p->repetition_penalty;
            float v = (float)(z[t] > 0 ? z[t] / r : z[t] * r);   /* the sampler works in float */
            z[t] = (float)(v - (cnt[t] * (double)p->frequency_penalty + p->presence_penalty));
        }
        free(cnt);
    }
    int n = 0;
    for (int i = 0; i < V; i++)
        if (z[i] != -INFINITY)
            order[n++] = i;
    ref_z = z;
    qsort(order, (size_t)n, sizeof *order, ref_cmp);
    for (int i = 0; i < V; i++)
        out[i] = 0;
    double zmax = z[order[0]];
    if (p->greedy || p->temperature == 0) {
        out[order[0]] = 1;
        free(z);
        return 1;
    }
    double t_stage = p->order == SAMPLER_ORDER_HF ? p->temperature : 1;
    int k = p->top_k > 0 && p->top_k < n ? p->top_k : n;
    double *w = malloc((size_t)k * sizeof *w), total = 0;
    for (int j = 0; j < k; j++)
        total += w[j] = exp((z[order[j]] - zmax) / t_stage);
    int kept = k;
    if (p->top_p < 1) {
        double cum = 0;
        for (int j = 0; j < k; j++) {
            if (j > 0 && cum >= (p->top_p - 1e-6) * total) {
                kept = j;
                break;
            }
            cum += w[j];
        }
    }
    if (p->min_p > 0) {
        int m = 0;
        while (m < kept && w[m] >= p->min_p)
            m++;
        kept = m > 0 ? m : 1;
    }
    free(w);
    double sum = 0;
    for (int j = 0; j < kept; j++)
        sum += out[order[j]] = exp((z[order[j]] - zmax) / p->temperature);
    for (int j = 0; j < kept; j++)
        out[order[j]] /= sum;
    free(z);
    return kept;
}


/* Is u within float-rounding reach of the cumulative boundary c? Single-precision weights move a
 * cumulative sum by about 1e-7 of the smaller of the mass before and after it. */
static bool near_boundary(double u, double c)
{
    return fabs(u - c) < 1e-6 * fmin(c, 1 - c) + 1e-12;
}

/* The vector-pass sets; the reference and selection tests run once per set (a set this CPU lacks
 * is skipped). */
static const char *const kernel_sets[] = {"vec4", "avx2", "avx512"};

/* The small top-k selection (a threshold bisected by vector counts, the tokens at or above it
 * sorted) keeps the same tokens in the same order as a full sort: on logits with many ties (a
 * handful of distinct values, so the k-th token ties with many), -inf masks, k tying at the top,
 * and k one short of the finite tokens. Seen through the kept set (p > 0 at temperature 1 over
 * values a few nats apart), each kept token's rank (sampler_force) and the snapshot's top list
 * (the same selection over the raw logits); the full sort is the reference chain's (ref_cmp). */
START_TEST(small_top_k_and_top_list_selections_match_a_full_sort_with_ties)
{
    sampler *probe = sampler_create_with(1, kernel_sets[_i]);
    if (!probe)
        return;   /* not this CPU */
    sampler_free(probe);
    static const int Vs[] = {3, 100, 4096, 50257};
    rng r;
    rng_seed(&r, 77);
    for (size_t vi = 0; vi < sizeof Vs / sizeof Vs[0]; vi++) {
        int V = Vs[vi];
        float *x = malloc((size_t)V * sizeof *x);
        int *order = malloc((size_t)V * sizeof *order);
        double *zd = malloc((size_t)V * sizeof *zd);
        sampler *s = sampler_create_with(V, kernel_sets[_i]);
        ck_assert_ptr_nonnull(s);
        for (int trial = 0; trial < 24; trial++) {
            int levels = 1 + trial % 6;        /* 1 .. 6 distinct values */
            int n_finite = 0;
            for (int i = 0; i < V; i++) {
                x[i] = (float)(rng_next(&r) % (uint64_t)levels) * 0.5f - 1.0f;
                if (trial % 3 == 2 && rng_next(&r) % 4 == 0)
                    x[i] = -INFINITY;
                n_finite += x[i] != -INFINITY;
            }
            if (trial % 5 == 4 && V > 2)       /* a few tie at a top of their own */
                for (int i = 0; i < V; i += V / 3)
                    x[i] = 2.0f;
            if (n_finite < 2)
                continue;
            sampler_params p = params();
            int ks[] = {1, 2, 1 + (int)(rng_next(&r) % 200), n_finite - 1, 1024};
            int k = ks[trial % 5];
            if (k < 1 || k >= n_finite)
                k = n_finite - 1 > 0 ? n_finite - 1 : 1;
            p.top_k = k;
            sampler_snapshot top;
            ck_assert_int_eq(sampler_apply(s, &p, x, NULL, &top, NULL), TT_OK);
            int n = 0;
            for (int i = 0; i < V; i++)
                if (x[i] != -INFINITY)
                    order[n++] = i;
            for (int i = 0; i < V; i++)
                zd[i] = x[i];   /* exact: the same order as the floats */
            ref_z = zd;
            qsort(order, (size_t)n, sizeof *order, ref_cmp);
            /* the snapshot's top list (raw logits: here the same order) by the same selection */
            ck_assert_int_eq(top.n_top, V < SAMPLER_TOP_MAX ? V : SAMPLER_TOP_MAX);
            for (int j = 0; j < top.n_top && j < n; j++)
                if (top.top[j].id != order[j])
                    ck_abort_msg("V %d trial %d: top list %d is token %d, full sort %d", V, trial,
                                 j, top.top[j].id, order[j]);
            const float *pr = sampler_probs(s);
            int kept = 0;
            for (int i = 0; i < V; i++)
                kept += pr[i] > 0;
            ck_assert_msg(kept == k, "V %d trial %d k %d: kept %d", V, trial, k, kept);
            for (int j = 0; j < n; j++) {
                int id = order[j];
                if ((pr[id] > 0) != (j < k))
                    ck_abort_msg("V %d trial %d k %d: token %d at rank %d kept %d", V, trial, k,
                                 id, j, pr[id] > 0);
                if (j < k && (j < 64 || j == k - 1)) {   /* a force walks the list: O(k) */
                    sampler_snapshot snap;
                    sampler_force(s, id, &snap);
                    if (snap.token_rank != j)
                        ck_abort_msg("V %d trial %d k %d: token %d ranks %d, full sort %d", V,
                                     trial, k, id, snap.token_rank, j);
                }
            }
            /* the next apply (greedy, the logits reversed) lists its own top tokens, not the
             * top-k list the last one left behind */
            for (int i = 0; i < V / 2; i++) {
                float t = x[i];
                x[i] = x[V - 1 - i];
                x[V - 1 - i] = t;
            }
            p.greedy = true;
            ck_assert_int_eq(sampler_apply(s, &p, x, NULL, &top, NULL), TT_OK);
            for (int i = 0; i < V; i++)
                zd[i] = x[i];
            n = 0;
            for (int i = 0; i < V; i++)
                if (x[i] != -INFINITY)
                    order[n++] = i;
            qsort(order, (size_t)n, sizeof *order, ref_cmp);
            for (int j = 0; j < top.n_top && j < n; j++)
                if (top.top[j].id != order[j])
                    ck_abort_msg("V %d trial %d greedy: top list %d is token %d, full sort %d",
                                 V, trial, j, top.top[j].id, order[j]);
        }
        sampler_free(s);
        free(order);
        free(zd);
        free(x);
    }
}
END_TEST

START_TEST(random_chains_match_a_naive_reference)
{
    static const int Vs[] = {1, 2, 7, 33, 1000, 50257};
    const char *set = kernel_sets[_i];
    sampler *probe = sampler_create_with(1, set);
    if (!probe)
        return;   /* not this CPU */
    sampler_free(probe);
    rng r;
    rng_seed(&r, 2024);
    int max_v = 50257;
    float *x = malloc((size_t)max_v * sizeof *x);
    double *want = malloc((size_t)max_v * sizeof *want);
    int *order = malloc((size_t)max_v * sizeof *order);
    int32_t hist[300];
    int n_draws = 0, n_ambiguous = 0;
    for (size_t vi = 0; vi < sizeof Vs / sizeof Vs[0]; vi++) {
        int V = Vs[vi];
        sampler *s = sampler_create_with(V, set);
        ck_assert_str_eq(sampler_kernels_name(s), set);
        /* every combination of order, top-k, top-p, min-p and penalties (bits of trial), over
         * temperatures that include 1 (weights shared with the raw pass) and extremes */
        int trials = V > 10000 ? 32 : 64;
        for (int trial = 0; trial < trials; trial++) {
            lm_like_logits(&r, V, x);
            sampler_params p = params();
            const float temps[] = {1, 0.7f, 1.6f, 0.05f, 30};
            p.temperature = temps[(trial + trial / 32) % 5];
            p.order = trial & 1 ? SAMPLER_ORDER_LLAMA : SAMPLER_ORDER_HF;
            if (trial & 2) {   /* each top-k regime: heap (<= 1024), short list, full */
                uint64_t kind = rng_next(&r) % 3;
                p.top_k = kind == 0   ? 1 + (int)(rng_next(&r) % 200)
                          : kind == 1 ? 1025 + (int)(rng_next(&r) % 3072)
                                      : 1 + (int)(rng_next(&r) % (uint64_t)V);
            }
            if (trial & 4)
                p.top_p = (float)(0.5 + 0.5 * rng_uniform(&r));
            if (trial & 8)
                p.min_p = (float)(0.2 * rng_uniform(&r));
            if (trial % 11 == 10)
                p.greedy = true;
            sampler_context c = {hist, 0, -1};
            if (trial & 16) {
                c.n_history = 300;
                for (int i = 0; i < 300; i++)
                    hist[i] = (int32_t)(rng_next(&r) % (uint64_t)V);
                p.repetition_penalty = 1.3f;
                p.frequency_penalty = 0.2f;
                p.presence_penalty = 0.4f;
                p.penalty_window = rng_next(&r) % 2 ? -1 : 64;
                c.banned = (int32_t)(rng_next(&r) % (uint64_t)V);
                if (V == 1)
                    c.banned = -1;
            }
            tt_error err = {0};
            sampler_snapshot snap;
            ck_assert_msg(sampler_apply(s, &p, x, &c, &snap, &err) == TT_OK, "%s", err.msg);
            int kept = ref_chain(V, x, &p, &c, want, order);
            const float *got = sampler_probs(s);
            int n_pos = 0;
            for (int i = 0; i < V; i++) {
                /* plain ifs: a ck_assert per token would log a mark point per token */
                if ((got[i] > 0) != (want[i] > 0) && !(want[i] < 1e-30 && got[i] == 0))
                    ck_abort_msg("V %d trial %d token %d: kept differs: got %g want %g", V,
                                 trial, i, (double)got[i], want[i]);
                if (fabs(got[i] - want[i]) > 2e-6 + 2e-5 * want[i])
                    ck_abort_msg("V %d trial %d token %d: got %.9g want %.9g", V, trial, i,
                                 (double)got[i], want[i]);
                n_pos += got[i] > 0;
            }
            ck_assert_int_eq(snap.n_kept, n_pos);
            ck_assert_int_le(n_pos, kept);
            /* the draw walks the reference order; when u is about as close to a boundary of
             * the reference walk as float rounding reaches, either side is right and only the
             * interval the sampler reports is checked */
            for (int d = 0; d < 40; d++) {
                double u = d < 20 ? rng_uniform(&r) : 1 - pow(10, -(d - 19) * 0.4);
                int32_t id = sampler_draw(s, u, &snap);
                if (p.greedy) {
                    ck_assert_int_eq(id, order[0]);
                    continue;
                }
                double cum = 0;
                int j = 0;
                while (j < n_pos - 1 && cum + want[order[j]] <= u)
                    cum += want[order[j++]];
                ck_assert(u >= snap.cum_lo - 1e-12 &&
                          (u < snap.cum_lo + snap.token_p + 1e-6 || snap.token_rank == n_pos - 1));
                ck_assert_double_eq_tol(snap.cum_lo, cum, 2e-5);
                n_draws++;
                if (near_boundary(u, cum) || near_boundary(u, cum + want[order[j]])) {
                    n_ambiguous++;
                    continue;
                }
                ck_assert_msg(id == order[j], "V %d trial %d u %.17g: drew %d (rank %d), "
                              "reference %d (rank %d)", V, trial, u, id, snap.token_rank,
                              order[j], j);
                ck_assert_int_eq(snap.token_rank, j);
            }
        }
        sampler_free(s);
    }
    ck_assert_msg(n_ambiguous * 50 < n_draws, "%d of %d draws too close to call", n_ambiguous,
                  n_draws);
    free(order);
    free(want);
    free(x);
}
END_TEST

/* Every set this CPU runs gives the same kept sets, draws and (to float rounding) probabilities;
 * the default is the widest; an unknown name is refused. */
START_TEST(kernel_sets_agree_and_unknown_ones_are_refused)
{
    ck_assert_ptr_null(sampler_create_with(10, "avx9000"));
    int V = 50257;
    sampler *def = sampler_create(V);
    ck_assert_ptr_nonnull(def);
    float *x = malloc((size_t)V * sizeof *x);
    rng r;
    rng_seed(&r, 31);
    lm_like_logits(&r, V, x);
    sampler_params p = params();
    p.temperature = 0.9f;
    p.top_p = 0.97f;
    ck_assert_int_eq(sampler_apply(def, &p, x, NULL, NULL, NULL), TT_OK);
    int n_sets = 0;
    for (size_t k = 0; k < sizeof kernel_sets / sizeof kernel_sets[0]; k++) {
        sampler *s = sampler_create_with(V, kernel_sets[k]);
        if (!s)
            continue;
        n_sets++;
        if (k > 0)   /* a wider set runs, so the default is not the 4-lane one */
            ck_assert_str_ne(sampler_kernels_name(def), "vec4");
        ck_assert_int_eq(sampler_apply(s, &p, x, NULL, NULL, NULL), TT_OK);
        const float *a = sampler_probs(s), *b = sampler_probs(def);
        for (int i = 0; i < V; i++)
            if ((a[i] > 0) != (b[i] > 0) || fabsf(a[i] - b[i]) > 1e-6f * b[i] + 1e-12f)
                ck_abort_msg("%s vs %s, token %d: %g vs %g", kernel_sets[k],
                             sampler_kernels_name(def), i, (double)a[i], (double)b[i]);
        rng_seed(&r, 5);
        for (int d = 0; d < 200; d++) {
            double u = rng_uniform(&r);
            ck_assert_int_eq(sampler_draw(s, u, NULL), sampler_draw(def, u, NULL));
        }
        sampler_free(s);
    }
    ck_assert_int_ge(n_sets, 1);
    sampler_free(def);
    free(x);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Determinism and the drawn distribution */

START_TEST(same_logits_params_and_seed_give_the_same_tokens)
{
    int V = 50257;
    float *x = new_lm_like_logits(V, 77);
    sampler *a = sampler_create(V), *b = sampler_create(V);
    sampler_params p = params();
    p.temperature = 1.3f;
    p.top_p = 0.95f;
    rng ra, rb;
    rng_seed(&ra, 9);
    rng_seed(&rb, 9);
    int distinct = 0, last = -1;
    for (int i = 0; i < 300; i++) {
        ck_assert_int_eq(sampler_apply(a, &p, x, NULL, NULL, NULL), TT_OK);
        if (i % 2 == 0)   /* b re-applies only every other step: draws do not depend on it */
            ck_assert_int_eq(sampler_apply(b, &p, x, NULL, NULL, NULL), TT_OK);
        int32_t ta = sampler_draw(a, rng_uniform(&ra), NULL);
        int32_t tb = sampler_draw(b, rng_uniform(&rb), NULL);
        ck_assert_int_eq(ta, tb);
        distinct += ta != last;
        last = ta;
    }
    ck_assert_int_gt(distinct, 50);   /* it really sampled */
    sampler_free(a);
    sampler_free(b);
    free(x);
}
END_TEST

/* Over N draws each token's count is Binomial(N, p): every count must sit within 5 standard
 * deviations (a false alarm about once in 10^5 runs; with a fixed seed, never), and the
 * chi-square statistic below its 0.999 quantile. */
static void check_frequencies(sampler *s, int V, int N, uint64_t seed)
{
    const float *pr = sampler_probs(s);
    int *cnt = calloc((size_t)V, sizeof *cnt);
    rng r;
    rng_seed(&r, seed);
    for (int i = 0; i < N; i++) {
        int32_t id = sampler_draw(s, rng_uniform(&r), NULL);
        if (id < 0 || pr[id] <= 0)
            ck_abort_msg("draw %d gave token %d with p %g", i, id, id < 0 ? 0.0 : pr[id]);
        cnt[id]++;
    }
    double chi2 = 0;
    int bins = 0;
    for (int i = 0; i < V; i++) {
        double e = (double)N * pr[i];
        if (pr[i] == 0) {
            if (cnt[i] != 0)
                ck_abort_msg("token %d was cut but drawn %d times", i, cnt[i]);
            continue;
        }
        double sd = sqrt(e * (1 - pr[i]));
        if (fabs(cnt[i] - e) > 5 * sd + 1)
            ck_abort_msg("token %d: %d draws, expected %.1f", i, cnt[i], e);
        if (e >= 5) {
            chi2 += (cnt[i] - e) * (cnt[i] - e) / e;
            bins++;
        }
    }
    /* 0.999 quantile of chi-square with df = bins - 1, Wilson-Hilferty approximation */
    double df = bins - 1, zq = 3.090;
    double q = df * pow(1 - 2 / (9 * df) + zq * sqrt(2 / (9 * df)), 3);
    ck_assert_msg(chi2 < q, "chi-square %.1f over %d bins exceeds %.1f", chi2, bins, q);
    free(cnt);
}

START_TEST(draw_frequencies_match_final_probabilities)
{
    float x[20];
    rng r;
    rng_seed(&r, 3);
    for (int i = 0; i < 20; i++)
        x[i] = (float)(rng_uniform(&r) * 4);
    sampler *s = sampler_create(20);
    sampler_params p = params();
    p.temperature = 0.8f;
    p.top_p = 0.97f;
    ck_assert_int_eq(sampler_apply(s, &p, x, NULL, NULL, NULL), TT_OK);
    check_frequencies(s, 20, 200000, 1);
    sampler_free(s);

    /* a large vocabulary, where the draw goes through lazily sorted buckets */
    int V = 50257;
    float *y = malloc((size_t)V * sizeof *y);
    lm_like_logits(&r, V, y);
    s = sampler_create(V);
    p = params();
    p.temperature = 1.5f;
    p.top_k = 400;
    ck_assert_int_eq(sampler_apply(s, &p, y, NULL, NULL, NULL), TT_OK);
    check_frequencies(s, V, 200000, 2);
    sampler_free(s);
    free(y);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Parameters */

START_TEST(default_params_format_as_one_line)
{
    sampler_params p = params();
    ck_assert_int_eq(sampler_params_validate(&p, NULL), TT_OK);
    char buf[160];
    size_t n = sampler_params_format(&p, buf, sizeof buf);
    ck_assert_str_eq(buf, "temp 1 top-k 0 top-p 1 min-p 0 rep 1 pres 0 freq 0 win 64 hf");
    ck_assert_uint_eq(n, strlen(buf));
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.penalty_window = -1;
    p.order = SAMPLER_ORDER_LLAMA;
    sampler_params_format(&p, buf, sizeof buf);
    ck_assert_str_eq(buf, "temp 0.8 top-k 40 top-p 0.95 min-p 0 rep 1 pres 0 freq 0 win all llama");
    p.greedy = true;
    sampler_params_format(&p, buf, sizeof buf);
    ck_assert_str_eq(buf, "greedy top-k 40 top-p 0.95 min-p 0 rep 1 pres 0 freq 0 win all llama");
    char small[8];
    n = sampler_params_format(&p, small, sizeof small);
    ck_assert_str_eq(small, "greedy ");
    ck_assert_uint_eq(n, strlen(buf));
}
END_TEST

START_TEST(params_set_accepts_valid_values)
{
    sampler_params p = params();
    tt_error err = {0};
    const struct {
        const char *name, *value;
    } ok[] = {{"temp", "0.8"},      {"top_k", "40"},      {"top_p", "0.95"},
              {"min_p", "0.05"},    {"repeat", "1.1"},    {"presence", "-0.5"},
              {"frequency", "0.2"}, {"window", "-1"},     {"order", "llama"},
              {"greedy", "on"},     {"top-k", "41"},      {"temperature", "1e-1"}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        ck_assert_msg(sampler_params_set(&p, ok[i].name, ok[i].value, &err) == TT_OK,
                      "%s %s: %s", ok[i].name, ok[i].value, err.msg);
    ck_assert_float_eq(p.temperature, 0.1f);
    ck_assert_int_eq(p.top_k, 41);
    ck_assert_float_eq(p.top_p, 0.95f);
    ck_assert_float_eq(p.min_p, 0.05f);
    ck_assert_float_eq(p.repetition_penalty, 1.1f);
    ck_assert_float_eq(p.presence_penalty, -0.5f);
    ck_assert_float_eq(p.frequency_penalty, 0.2f);
    ck_assert_int_eq(p.penalty_window, -1);
    ck_assert_int_eq(p.order, SAMPLER_ORDER_LLAMA);
    ck_assert(p.greedy);
    ck_assert_int_eq(sampler_params_set(&p, "greedy", "off", &err), TT_OK);
    ck_assert(!p.greedy);
    ck_assert_int_eq(sampler_params_set(&p, "order", "hf", &err), TT_OK);
    ck_assert_int_eq(p.order, SAMPLER_ORDER_HF);
    ck_assert_int_eq(sampler_params_set(&p, "top_p", "0", &err), TT_OK);
    ck_assert_int_eq(sampler_params_set(&p, "top_p", "1", &err), TT_OK);
    ck_assert_int_eq(sampler_params_set(&p, "temp", "0", &err), TT_OK);
}
END_TEST

START_TEST(params_set_rejects_invalid_values_and_leaves_params_unchanged)
{
    const struct {
        const char *name, *value, *msg;
    } bad[] = {
        {"temp", "abc", "temp: \"abc\" is not a number"},
        {"temp", "1.5x", "temp: \"1.5x\" is not a number"},
        {"temp", "", "temp: \"\" is not a number"},
        {"temp", " 1", "temp: \" 1\" is not a number"},
        {"temp", "1 ", "temp: \"1 \" is not a number"},
        {"temp", "nan", "temp: \"nan\" is not a finite number"},
        {"temp", "inf", "temp: \"inf\" is not a finite number"},
        {"presence", "-infinity", "presence: \"-infinity\" is not a finite number"},
        {"temp", "1e999", "temp: \"1e999\" is out of range"},
        {"frequency", "1e39", "frequency: \"1e39\" is out of range"},
        {"temp", "-1", "temp: -1 is not a finite number >= 0 (0 means greedy)"},
        {"top_p", "1.5", "top_p: 1.5 is outside [0, 1]"},
        {"min_p", "-0.1", "min_p: -0.1 is outside [0, 1]"},
        {"repeat", "0", "repeat: 0 is not a finite number > 0 (1 disables)"},
        {"window", "-2", "window: -2 is below -1 (-1 means the whole context)"},
        {"window", "64.5", "window: \"64.5\" is not an integer"},
        {"top_k", "1.5", "top_k: \"1.5\" is not an integer"},
        {"top_k", "99999999999", "top_k: \"99999999999\" is out of range"},
        {"top_k", "0x10", "top_k: \"0x10\" is not an integer"},
        {"order", "gpt", "order: \"gpt\" is neither hf nor llama"},
        {"greedy", "maybe", "greedy: \"maybe\" is not on or off"},
        {"topp", "0.5", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sampler_params p = params();
        p.temperature = 0.7f;   /* non-default, so "unchanged" is not "reset" */
        p.top_k = 5;
        sampler_params before = p;
        tt_error err = {0};
        ck_assert_msg(sampler_params_set(&p, bad[i].name, bad[i].value, &err) == TT_ERR_ARG,
                      "%s \"%s\" was accepted", bad[i].name, bad[i].value);
        ck_assert(tu_same_sampler_params(&p, &before));
        if (bad[i].msg)
            ck_assert_str_eq(err.msg, bad[i].msg);
        else
            ck_assert_ptr_nonnull(strstr(err.msg, "unknown sampler setting \"topp\""));
    }
    sampler_params p = params();
    ck_assert_int_eq(sampler_params_set(&p, NULL, "1", NULL), TT_ERR_ARG);
    ck_assert_int_eq(sampler_params_set(&p, "temp", NULL, NULL), TT_ERR_ARG);
}
END_TEST

START_TEST(validate_and_apply_refuse_bad_fields)
{
    tt_error err = {0};
    sampler_params p = params();
    p.temperature = NAN;
    ck_assert_int_eq(sampler_params_validate(&p, &err), TT_ERR_ARG);
    ck_assert_str_eq(err.msg, "temp: nan is not a finite number >= 0 (0 means greedy)");
    p = params();
    p.frequency_penalty = INFINITY;
    ck_assert_int_eq(sampler_params_validate(&p, &err), TT_ERR_ARG);
    ck_assert_str_eq(err.msg, "frequency: inf is not a finite number");
    p = params();
    p.order = (sampler_order)7;
    ck_assert_int_eq(sampler_params_validate(&p, &err), TT_ERR_ARG);
    ck_assert_str_eq(err.msg, "order: 7 is neither hf (0) nor llama (1)");
    float x[2] = {0, 0};
    sampler *s = sampler_create(2);
    ck_assert_int_eq(sampler_apply(s, &p, x, NULL, NULL, &err), TT_ERR_ARG);
    ck_assert_ptr_null(sampler_probs(s));
    sampler_free(s);
}
END_TEST

/* Extreme but valid settings stay finite: a tiny temperature is greedy in the limit, a huge
 * penalty pushes a logit to -FLT_MAX but never to NaN or -inf. */
START_TEST(extreme_settings_stay_finite)
{
    float x[4] = {1, 2, 3, 3.0001f}, got[4];
    sampler_params p = params();
    p.temperature = 1e-30f;
    ck_assert_int_eq(run(4, x, &p, NULL, got, NULL), TT_OK);
    ck_assert_float_eq(got[3], 1.0f);
    p = params();
    p.temperature = 1e30f;
    ck_assert_int_eq(run(4, x, &p, NULL, got, NULL), TT_OK);
    ck_assert_double_eq_tol(got[0], 0.25, 1e-6);
    p = params();
    p.frequency_penalty = 3e38f;
    p.repetition_penalty = 1e-30f;
    static const int32_t h[] = {3, 3, 3, 2};
    sampler_context c = {h, 4, -1};
    sampler_snapshot snap;
    ck_assert_int_eq(run(4, x, &p, &c, got, &snap), TT_OK);
    ck_assert_float_eq(got[2], 0.0f);
    ck_assert_float_eq(got[3], 0.0f);
    ck_assert_double_eq_tol(got[1], 1 / (1 + exp(-1.0)), 1e-6);
    ck_assert_int_eq(snap.n_kept, 2);
    ck_assert(isfinite(snap.entropy_final));
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Benchmark (not a test): SAMPLER_BENCH=N [SAMPLER_KERNELS=vec4|avx2|avx512] check_sampler
 * prints the median and 99th percentile of N apply + draw calls per setting for V = 50257 on
 * language-model-like logits, in thread CPU time, settings interleaved in rounds so that load
 * from other processes hits them alike. "snapshot" asks for the histogram's snapshot (the UI
 * does); "probs only" does not (speculative verification). */

static double cpu_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int run_benchmark(int n_calls, const char *kernels)
{
    enum { V = 50257, NL = 8, ROUNDS = 20 };
    static const struct {
        const char *name, *settings;
        bool penalties;
    } cases[] = {
        {"defaults (T 1, no filter)", "", false},
        {"T 0.8, no filter", "temp=0.8", false},
        {"T 0.8 top-p 0.95", "temp=0.8 top_p=0.95", false},
        {"T 0.8 top-k 40", "temp=0.8 top_k=40", false},
        {"T 0.8 top-k 40 top-p 0.95", "temp=0.8 top_k=40 top_p=0.95", false},
        {"min-p 0.05", "min_p=0.05", false},
        {"llama order T 0.7 top-p 0.9", "temp=0.7 top_p=0.9 order=llama", false},
        {"T 0.8 top-p 0.95, penalties win 64", "temp=0.8 top_p=0.95 repeat=1.1 presence=0.3",
         true},
        {"greedy", "greedy=on", false},
    };
    enum { NC = sizeof cases / sizeof cases[0] };
    sampler *s = sampler_create_with(V, kernels);
    if (!s) {
        fprintf(stderr, "no kernel set \"%s\" on this CPU\n", kernels);
        return 1;
    }
    rng r;
    rng_seed(&r, 1);
    float *x[NL];
    for (int k = 0; k < NL; k++) {
        x[k] = malloc(V * sizeof *x[k]);
        lm_like_logits(&r, V, x[k]);
    }
    int32_t hist[1024];
    for (int i = 0; i < 1024; i++)
        hist[i] = (int32_t)(rng_next(&r) % V);
    sampler_context ctx = {hist, 1024, -1};
    sampler_params ps[NC];
    for (int c = 0; c < NC; c++) {
        sampler_params_default(&ps[c]);
        char buf[128];
        snprintf(buf, sizeof buf, "%s", cases[c].settings);
        for (char *save, *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
            char *eq = strchr(t, '=');
            *eq = '\0';
            tt_error err;
            if (sampler_params_set(&ps[c], t, eq + 1, &err) != TT_OK) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
            }
        }
    }
    int per = n_calls / ROUNDS > 0 ? n_calls / ROUNDS : 1, n = per * ROUNDS;
    double *t = malloc(sizeof *t * 2 * NC * (size_t)n);
    for (int round = 0; round < ROUNDS; round++)
        for (int mode = 0; mode < 2; mode++)
            for (int c = 0; c < NC; c++)
                for (int q = 0; q < per; q++) {
                    int i = round * per + q;
                    sampler_snapshot snap;
                    double t0 = cpu_us();
                    sampler_apply(s, &ps[c], x[i % NL], cases[c].penalties ? &ctx : NULL,
                                  mode ? &snap : NULL, NULL);
                    sampler_draw(s, rng_uniform(&r), mode ? &snap : NULL);
                    t[((size_t)mode * NC + c) * n + i] = cpu_us() - t0;
                }
    printf("sampler_apply + sampler_draw, V = %d, kernels %s, %d calls each (median / p99, us)\n",
           V, sampler_kernels_name(s), n);
    printf("%-36s %18s %18s\n", "", "probs only", "snapshot");
    for (int c = 0; c < NC; c++) {
        printf("%-36s", cases[c].name);
        for (int mode = 0; mode < 2; mode++) {
            double *m = t + ((size_t)mode * NC + c) * n;
            qsort(m, (size_t)n, sizeof *m, cmp_double);
            printf(" %8.1f / %7.1f", m[n / 2], m[n * 99 / 100]);
        }
        printf("\n");
    }
    free(t);
    for (int k = 0; k < NL; k++)
        free(x[k]);
    sampler_free(s);
    return 0;
}

int main(void)
{
    const char *bench = getenv("SAMPLER_BENCH");
    if (bench)
        return run_benchmark(atoi(bench), getenv("SAMPLER_KERNELS"));
    Suite *s = suite_create("sampler");
    tu_add_case(s, "peer_vectors", TU_TESTS(
            temperature_one_keeps_distribution_and_zero_is_greedy,
            snapshot_temp_p_is_the_tempered_distribution_before_truncation,
            min_p_above_one_is_rejected_unlike_llama, typical_p_is_not_implemented,
            penalties_match_llama_vectors, penalized_tokens_are_marked_in_snapshot,
            top_p_matches_hf_vectors, top_p_boundary_does_not_depend_on_rounding,
            min_p_matches_hf_vectors, repetition_penalty_on_raw_scores_matches_hf,
            top_k_keeps_exactly_k_on_ties_unlike_hf, chain_order_changes_what_top_p_keeps,
            snapshot_names_the_stage_that_cut_each_token));
    tu_add_loop_case(s, "llama_filter_vectors", N_LLAMA_FILTER_CASES, TU_TESTS(
            a_filter_matches_its_llama_vector));

    tu_add_case(s, "edge_cases", TU_TESTS(
            every_token_masked_fails_numeric_and_draws_nothing,
            nan_and_plus_inf_logits_are_rejected_naming_the_first, minus_inf_logit_is_a_legal_mask,
            banned_token_is_masked_before_everything, empty_history_applies_no_penalty,
            penalty_window_counts_only_the_last_tokens, out_of_range_ids_in_context_are_rejected,
            top_k_larger_than_vocab_is_capped, top_k_on_equal_logits_keeps_the_lowest_ids,
            single_token_vocabulary_always_draws_it, u_close_to_one_never_runs_off_the_end,
            greedy_takes_the_lower_id_on_ties_and_ignores_u,
            draw_walks_descending_probability_and_reports_the_interval,
            snapshot_lists_top_raw_tokens_and_always_the_chosen_one, extreme_settings_stay_finite,
            snapshot_requested_late_is_the_same));

    /* The three heavy tests, and the selection test (a full sort of up to 50,257 tokens per
     * trial), get a case each, so CK_RUN_CASE can pick one and each has its own (generous:
     * sanitizers and a shared machine) timeout. */
    TCase *ref = tcase_create("reference");
    tcase_set_timeout(ref, 120);
    tcase_add_loop_test(ref, random_chains_match_a_naive_reference, 0,
                        (int)(sizeof kernel_sets / sizeof kernel_sets[0]));
    tcase_add_test(ref, kernel_sets_agree_and_unknown_ones_are_refused);
    suite_add_tcase(s, ref);
    TCase *sel = tcase_create("selection");
    tcase_set_timeout(sel, 60);
    tcase_add_loop_test(sel, small_top_k_and_top_list_selections_match_a_full_sort_with_ties, 0,
                        (int)(sizeof kernel_sets / sizeof kernel_sets[0]));
    suite_add_tcase(s, sel);
    TCase *det = tu_add_case(s, "determinism", TU_TESTS(
            same_logits_params_and_seed_give_the_same_tokens));
    tcase_set_timeout(det, 120);
    TCase *freq = tu_add_case(s, "frequencies", TU_TESTS(
            draw_frequencies_match_final_probabilities));
    tcase_set_timeout(freq, 120);

    tu_add_case(s, "params", TU_TESTS(
            default_params_format_as_one_line, params_set_accepts_valid_values,
            params_set_rejects_invalid_values_and_leaves_params_unchanged,
            validate_and_apply_refuse_bad_fields));
    return tu_run_suite(s);
}
