/* check_speculative.c: speculative decoding is exact: greedy output equals plain greedy token for
 * token, sampled output follows the target's distribution (and a deliberately wrong variant is
 * caught), and the caches after every round equal a fresh prefill of the accepted sequence. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "core/model.h"
#include "core/modelgen.h"
#include "core/rng.h"
#include "core/sampler.h"
#include "core/speculative.h"
#include "core/tokenizer.h"
#include "repl/session.h"
#include "tests/testutil.h"

/* ---------------------------------------------------------------------------------------------
 * A fake engine: logits are a fixed pseudo-random function of the whole prefix, so the exact
 * distribution of a few generated tokens can be enumerated, and the "cache" is a token array the
 * test can read. A draft mixes the target's logits with its own noise: mix sets the acceptance. */

#define FAKE_CTX 64

typedef struct fake_engine {
    engine base;
    gpt2_config cfg;
    int32_t cache[FAKE_CTX];
    uint64_t seed;
    float scale;
    const struct fake_engine *like;  /* the target this draft imitates, or NULL */
    float mix;                       /* weight of like's logits */
    long forwards;
    float rows[FAKE_CTX * 16];
} fake_engine;

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t prefix_hash(const int32_t *prefix, int n)
{
    uint64_t h = 0;
    for (int i = 0; i < n; i++)
        h = mix64(h ^ (uint64_t)(uint32_t)prefix[i]);
    return h;
}

/* A standard normal value for (seed, prefix hash, v), Box-Muller over two hashed uniforms. */
static float fake_normal(uint64_t seed, uint64_t ph, int v)
{
    uint64_t h = mix64(mix64(seed ^ ph) ^ (0x1000u + (uint64_t)v));
    double u1 = ((h >> 11) + 1) * 0x1.0p-53, u2 = (mix64(h) >> 11) * 0x1.0p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static float fake_logit(const fake_engine *f, uint64_t ph, int v)
{
    float own = f->scale * fake_normal(f->seed, ph, v);
    if (!f->like)
        return own;
    return f->mix * fake_logit(f->like, ph, v) + (1 - f->mix) * own;
}

static tt_status fake_forward(engine *e, const int32_t *ids, int n, int pos, bool all_logits,
                              tt_error *err)
{
    fake_engine *f = (fake_engine *)e;
    const int V = f->cfg.V;
    memcpy(f->cache + pos, ids, (size_t)n * sizeof *ids);
    int lo = all_logits ? 0 : n - 1;
    for (int i = lo; i < n; i++) {
        uint64_t ph = prefix_hash(f->cache, pos + i + 1);
        for (int v = 0; v < V; v++)
            f->rows[(size_t)(i - lo) * V + v] = fake_logit(f, ph, v);
    }
    e->n_past = pos + n;
    e->n_logits = n - lo;
    f->forwards++;
    return TT_OK;
}

static void fake_truncate(engine *e, int pos)
{
    if (pos < e->n_past)
        e->n_past = pos;
}

static void fake_destroy(engine *e)
{
    free(e);
}

static const engine_ops fake_ops = {"fake", fake_forward, fake_truncate, fake_destroy};

static fake_engine *fake_create(int V, uint64_t seed, float scale, const fake_engine *like,
                                float mix)
{
    ck_assert_int_le(V, 16);
    fake_engine *f = calloc(1, sizeof *f);
    f->cfg.V = V;
    f->cfg.maxT = FAKE_CTX;
    f->base.ops = &fake_ops;
    f->base.config = &f->cfg;
    f->base.n_ctx = FAKE_CTX;
    f->base.logits = f->rows;
    f->seed = seed;
    f->scale = scale;
    f->like = like;
    f->mix = mix;
    return f;
}

/* ---------------------------------------------------------------------------------------------
 * The exact distribution of the first N generated tokens under the target alone, by enumeration:
 * P(x1..xN) = prod_i p(x_i | prompt, x_<i) with p the final distribution of the chain. */

#define N_GEN 3
#define MAX_CELLS 4096

typedef struct {
    uint64_t key[MAX_CELLS];     /* x1 * V^2 + x2 * V + x3, ascending */
    double p[MAX_CELLS];
    int n;
    int V;
} dist;

static uint64_t seq_key(const int32_t *x, int V)
{
    uint64_t k = 0;
    for (int i = 0; i < N_GEN; i++)
        k = k * (uint64_t)V + (uint64_t)x[i];
    return k;
}

static void enumerate(engine *target, sampler *smp, const sampler_params *sp, int32_t *seq,
                      int n, int depth, double prob, dist *d)
{
    if (depth == N_GEN) {
        ck_assert_int_lt(d->n, MAX_CELLS);
        d->key[d->n] = seq_key(seq + n - N_GEN, d->V);
        d->p[d->n++] = prob;
        return;
    }
    tt_error err;
    ck_assert_int_eq(engine_forward(target, seq, n, 0, false, &err), TT_OK);
    sampler_context ctx = {.history = seq, .n_history = n, .banned = -1};
    ck_assert_int_eq(sampler_apply(smp, sp, engine_logits(target, 0), &ctx, NULL, &err), TT_OK);
    int V = d->V;
    double *p = malloc((size_t)V * sizeof *p);
    for (int v = 0; v < V; v++)
        p[v] = sampler_probs(smp)[v];
    for (int v = 0; v < V; v++) {
        if (p[v] <= 0)
            continue;
        seq[n] = v;
        enumerate(target, smp, sp, seq, n + 1, depth + 1, prob * p[v], d);
    }
    free(p);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void exact_dist(engine *target, const sampler_params *sp, const int32_t *prompt, int np,
                       dist *d)
{
    d->n = 0;
    d->V = target->config->V;
    sampler *smp = sampler_create(d->V);
    int32_t seq[FAKE_CTX];
    memcpy(seq, prompt, (size_t)np * sizeof *seq);
    enumerate(target, smp, sp, seq, np, 0, 1.0, d);
    sampler_free(smp);
    /* keys come out ascending because the enumeration walks ids in order */
    for (int i = 1; i < d->n; i++)
        ck_assert(d->key[i - 1] < d->key[i]);
    engine_truncate(target, 0);
}

/* ---------------------------------------------------------------------------------------------
 * Sampling with speculative rounds until N_GEN tokens exist; the first N_GEN are the sample. */

typedef struct {
    long drafted, accepted, rounds;
    long forwards_per_round_max;     /* target forwards in one round, after the first */
} run_stats;

static void spec_sample(spec *sp, engine *target, engine *draft, const sampler_params *params,
                        const int32_t *prompt, int np, int gamma, uint64_t seed, int32_t *out,
                        run_stats *rs)
{
    int32_t tmirror[FAKE_CTX], dmirror[FAKE_CTX];
    int32_t w[FAKE_CTX];
    memcpy(w, prompt, (size_t)np * sizeof *w);
    int n = np;
    engine_truncate(target, 0);
    engine_truncate(draft, 0);
    rng r;
    rng_seed(&r, seed);
    tt_error err;
    while (n < np + N_GEN) {
        spec_request req = {.tokens = w, .n = n, .gamma = gamma, .max_tokens = 16,
                            .stop_id = -1, .banned = -1};
        ck_assert_msg(spec_run_round(sp, target, tmirror, draft, dmirror, params, &req, &r,
                                     &err) == TT_OK, "%s", err.msg);
        const spec_round *R = spec_last_round(sp);
        ck_assert_int_ge(R->n_out, 1);
        for (int i = 0; i < R->n_draft; i++)
            ck_assert(R->draft[i].q > 0);          /* a token with q = 0 is never proposed */
        for (int i = 0; i < R->n_out && n < FAKE_CTX; i++)
            w[n++] = R->out[i];
        rs->drafted += R->n_draft;
        rs->accepted += R->n_accepted;
        rs->rounds++;
    }
    memcpy(out, w + np, N_GEN * sizeof *out);
}

/* Pearson chi-square of counts against d over n samples: cells with expected count >= 5, the
 * rest pooled into one cell. A sample outside the support counts as 1e9 (impossible output). */
typedef struct {
    double chi2, tv;
    int df;
    long outside;
} fit;

static fit goodness(const dist *d, const long *counts, long outside, long n)
{
    fit f = {0};
    double pool_e = 0, pool_o = 0;
    int cells = 0;
    for (int i = 0; i < d->n; i++) {
        double e = d->p[i] * n;
        f.tv += fabs((double)counts[i] / n - d->p[i]);
        if (e >= 5) {
            f.chi2 += (counts[i] - e) * (counts[i] - e) / e;
            cells++;
        } else {
            pool_e += e;
            pool_o += counts[i];
        }
    }
    if (pool_e >= 5) {
        f.chi2 += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
        cells++;
    }
    f.tv = (f.tv + (double)outside / n) / 2;
    f.df = cells - 1;
    f.outside = outside;
    if (outside)
        f.chi2 += 1e9;
    return f;
}

/* Rejection threshold: about a 1e-6 false alarm rate for a chi-square with df degrees of freedom
 * (Wilson-Hilferty: chi2_q = df (1 - 2/(9df) + z sqrt(2/(9df)))^3 with z = 4.75). */
static double chi2_limit(int df)
{
    double k = df, z = 4.75;
    double t = 1 - 2 / (9 * k) + z * sqrt(2 / (9 * k));
    return k * t * t * t;
}

static fit sample_fit(spec *sp, engine *target, engine *draft, const sampler_params *params,
                      const int32_t *prompt, int np, int gamma, long n, const dist *d,
                      run_stats *rs)
{
    long *counts = calloc((size_t)d->n, sizeof *counts);
    long outside = 0;
    for (long s = 0; s < n; s++) {
        int32_t x[N_GEN];
        spec_sample(sp, target, draft, params, prompt, np, gamma, 1000003ull * (uint64_t)s + 17,
                    x, rs);
        uint64_t k = seq_key(x, d->V);
        const uint64_t *hit = bsearch(&k, d->key, (size_t)d->n, sizeof k, cmp_u64);
        if (hit)
            counts[hit - d->key]++;
        else
            outside++;
    }
    fit f = goodness(d, counts, outside, n);
    free(counts);
    return f;
}

/* The chain settings the sampling tests run under: each exercises a different part. */
static void params_case(sampler_params *p, int which)
{
    sampler_params_default(p);
    p->penalty_window = -1;
    switch (which) {
    case 0: break;                                              /* plain softmax */
    case 1: p->temperature = 0.7f; p->top_k = 5; p->repetition_penalty = 1.8f; break;
    case 2: p->temperature = 1.3f; p->top_p = 0.85f; p->presence_penalty = 0.8f;
            p->frequency_penalty = 0.4f; break;
    case 3: p->min_p = 0.1f; p->repetition_penalty = 2.5f; p->order = SAMPLER_ORDER_LLAMA;
            p->temperature = 0.8f; break;
    }
}

#define FAKE_V 7
#define FAKE_SAMPLES 6000

static const int32_t fake_prompt[] = {1, 4, 1, 2};

START_TEST(sampled_tokens_follow_the_target_distribution)
{
    /* For four chain settings and gamma 1 and 3: the first three tokens of 6000 seeded runs
     * against the enumerated target distribution (up to 343 cells), chi-square at a 1e-6 level. */
    fake_engine *t = fake_create(FAKE_V, 11, 1.5f, NULL, 0);
    fake_engine *d = fake_create(FAKE_V, 12, 1.5f, t, 0.5f);
    spec *sp = spec_create(FAKE_V);
    static const int gammas[] = {1, 3};
    for (int pc = 0; pc < 4; pc++) {
        sampler_params params;
        params_case(&params, pc);
        dist *D = malloc(sizeof *D);
        exact_dist(&t->base, &params, fake_prompt, 4, D);
        for (int gi = 0; gi < 2; gi++) {
            run_stats rs = {0};
            fit f = sample_fit(sp, &t->base, &d->base, &params, fake_prompt, 4, gammas[gi],
                               FAKE_SAMPLES, D, &rs);
            double a = (double)rs.accepted / rs.drafted;
            fprintf(stderr, "  chain %d gamma %d: chi2 %.1f (df %d, limit %.1f), TV %.4f, "
                    "acceptance %.3f\n", pc, gammas[gi], f.chi2, f.df, chi2_limit(f.df), f.tv, a);
            ck_assert_msg(f.chi2 < chi2_limit(f.df), "chain %d gamma %d: chi2 %.1f >= %.1f "
                          "(df %d, %ld outside the support)", pc, gammas[gi], f.chi2,
                          chi2_limit(f.df), f.df, f.outside);
            /* the draft must be wrong often enough for the residual to matter */
            ck_assert_msg(a > 0.15 && a < 0.95, "acceptance %.3f", a);
        }
        free(D);
    }
    spec_free(sp);
    engine_free(&d->base);
    engine_free(&t->base);
}
END_TEST

/* A wrong variant must fail the test that the exact algorithm passes above (same engines, chain,
 * gamma, seeds and samples). */
static void assert_variant_caught(spec_variant v, int pc, int gamma)
{
    fake_engine *t = fake_create(FAKE_V, 11, 1.5f, NULL, 0);
    fake_engine *d = fake_create(FAKE_V, 12, 1.5f, t, 0.5f);
    spec *sp = spec_create(FAKE_V);
    sampler_params params;
    params_case(&params, pc);
    dist *D = malloc(sizeof *D);
    exact_dist(&t->base, &params, fake_prompt, 4, D);
    run_stats rs = {0};
    spec_set_variant(sp, v);
    fit bad = sample_fit(sp, &t->base, &d->base, &params, fake_prompt, 4, gamma, FAKE_SAMPLES,
                         D, &rs);
    fprintf(stderr, "  variant %d, chain %d gamma %d: chi2 %.1f TV %.4f (limit %.1f, df %d), %ld "
            "outside the support\n", (int)v, pc, gamma, bad.chi2, bad.tv, chi2_limit(bad.df),
            bad.df, bad.outside);
    ck_assert_msg(bad.chi2 > chi2_limit(bad.df), "variant %d passed: chi2 %.1f", (int)v,
                  bad.chi2);
    free(D);
    spec_free(sp);
    engine_free(&d->base);
    engine_free(&t->base);
}

START_TEST(residual_p_instead_of_p_minus_q_is_caught)
{
    assert_variant_caught(SPEC_WRONG_RESIDUAL_P, 0, 3);
}
END_TEST

START_TEST(draft_raw_softmax_instead_of_final_q_is_caught)
{
    assert_variant_caught(SPEC_WRONG_Q_RAW, 1, 3);
}
END_TEST

START_TEST(target_penalties_without_drafted_history_are_caught)
{
    assert_variant_caught(SPEC_WRONG_HISTORY, 1, 3);
}
END_TEST

START_TEST(one_target_pass_per_round_and_caches_hold_the_accepted_prefix)
{
    fake_engine *t = fake_create(FAKE_V, 21, 1.5f, NULL, 0);
    fake_engine *d = fake_create(FAKE_V, 22, 1.5f, t, 0.6f);
    spec *sp = spec_create(FAKE_V);
    sampler_params params;
    params_case(&params, 1);
    int32_t tmirror[FAKE_CTX], dmirror[FAKE_CTX], w[FAKE_CTX] = {3, 1};
    int n = 2;
    rng r;
    rng_seed(&r, 5);
    tt_error err;
    int patterns[SPEC_GAMMA_MAX + 2] = {0};   /* rounds by accepted count, all-accepted last */
    for (int round = 0; n < FAKE_CTX - 1; round++) {
        int gamma = 1 + round % 6;
        long before = t->forwards;
        spec_request req = {.tokens = w, .n = n, .gamma = gamma, .max_tokens = 64,
                            .stop_id = -1, .banned = -1};
        ck_assert_int_eq(spec_run_round(sp, &t->base, tmirror, &d->base, dmirror, &params, &req,
                                        &r, &err), TT_OK);
        const spec_round *R = spec_last_round(sp);
        if (round > 0)
            ck_assert_int_eq(t->forwards - before, 1);
        int k = R->n_accepted;
        patterns[R->rejected ? k : SPEC_GAMMA_MAX + 1]++;
        /* target: window plus the accepted drafts, exactly */
        ck_assert_int_eq(t->base.n_past, n + k);
        for (int i = 0; i < n; i++)
            ck_assert_int_eq(t->cache[i], w[i]);
        for (int i = 0; i < k; i++)
            ck_assert_int_eq(t->cache[n + i], R->draft[i].token);
        /* draft: a prefix of the same */
        ck_assert_int_le(d->base.n_past, n + k);
        ck_assert_int_ge(d->base.n_past, n + k - 1);
        for (int i = 0; i < d->base.n_past; i++)
            ck_assert_int_eq(d->cache[i], i < n ? w[i] : R->draft[i - n].token);
        for (int i = 0; i < R->n_out && n < FAKE_CTX; i++)
            w[n++] = R->out[i];
    }
    ck_assert_int_gt(patterns[0], 0);                 /* first draft rejected */
    ck_assert_int_gt(patterns[1] + patterns[2], 0);   /* rejection after acceptances */
    ck_assert_int_gt(patterns[SPEC_GAMMA_MAX + 1], 0);/* all accepted, bonus */
    spec_free(sp);
    engine_free(&d->base);
    engine_free(&t->base);
}
END_TEST

START_TEST(round_stops_at_max_tokens_context_end_and_stop_token)
{
    fake_engine *t = fake_create(FAKE_V, 31, 1.0f, NULL, 0);
    fake_engine *d = fake_create(FAKE_V, 32, 1.0f, t, 1.0f);   /* q == p: all accepted */
    spec *sp = spec_create(FAKE_V);
    sampler_params params;
    sampler_params_default(&params);
    int32_t tm[FAKE_CTX], dm[FAKE_CTX], w[FAKE_CTX] = {0};
    rng r;
    tt_error err;
    const spec_round *R = spec_last_round(sp);

    /* max_tokens 3 caps gamma 8 at 2 drafts plus the bonus */
    rng_seed(&r, 1);
    spec_request req = {.tokens = w, .n = 5, .gamma = 8, .max_tokens = 3, .stop_id = -1,
                        .banned = -1};
    ck_assert_int_eq(spec_run_round(sp, &t->base, tm, &d->base, dm, &params, &req, &r, &err),
                     TT_OK);
    ck_assert_int_eq(R->n_draft, 2);
    ck_assert_int_eq(R->n_accepted, 2);
    ck_assert_int_eq(R->n_out, 3);
    ck_assert(!R->rejected && R->next >= 0);
    int32_t second = R->out[1];

    /* a drafted stop token ends drafting, and no bonus follows it once accepted */
    rng_seed(&r, 1);
    req.max_tokens = 16;
    req.stop_id = second;
    ck_assert_int_eq(spec_run_round(sp, &t->base, tm, &d->base, dm, &params, &req, &r, &err),
                     TT_OK);
    ck_assert_int_eq(R->out[0] == second ? 1 : R->n_draft, R->out[0] == second ? 1 : 2);
    ck_assert_int_eq(R->out[R->n_out - 1], second);
    ck_assert_int_eq(R->next, -1);

    /* at the end of the context: only as many drafts as positions remain, then plain steps */
    rng_seed(&r, 2);
    req.stop_id = -1;
    req.n = FAKE_CTX - 2;
    ck_assert_int_eq(spec_run_round(sp, &t->base, tm, &d->base, dm, &params, &req, &r, &err),
                     TT_OK);
    ck_assert_int_eq(R->n_draft, 2);
    ck_assert_int_eq(t->base.n_past, FAKE_CTX);
    req.n = FAKE_CTX;
    ck_assert_int_eq(spec_run_round(sp, &t->base, tm, &d->base, dm, &params, &req, &r, &err),
                     TT_OK);
    ck_assert_int_eq(R->n_draft, 0);
    ck_assert_int_eq(R->n_out, 1);
    req.n = FAKE_CTX + 1;
    ck_assert_int_eq(spec_run_round(sp, &t->base, tm, &d->base, dm, &params, &req, &r, &err),
                     TT_ERR_CONTEXT);

    /* the banned token (EOS before --min-tokens) is masked for n_banned positions only */
    params.greedy = true;
    req.n = 5;
    req.max_tokens = 4;
    req.gamma = 3;
    ck_assert_int_eq(spec_run_round(sp, &t->base, tm, &d->base, dm, &params, &req, &r, &err),
                     TT_OK);
    int32_t free_run[4];
    memcpy(free_run, R->out, sizeof free_run);
    ck_assert_int_eq(R->n_out, 4);
    req.banned = free_run[1];
    req.n_banned = 2;
    ck_assert_int_eq(spec_run_round(sp, &t->base, tm, &d->base, dm, &params, &req, &r, &err),
                     TT_OK);
    ck_assert_int_ne(R->out[0], req.banned);
    ck_assert_int_ne(R->out[1], req.banned);
    spec_free(sp);
    engine_free(&d->base);
    engine_free(&t->base);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Figures */

START_TEST(predicted_speedup_matches_the_paper_formula)
{
    /* Leviathan et al.: S = (1 - a^(g+1)) / ((1 - a)(g c + 1)) */
    ck_assert_double_eq_tol(spec_predicted_speedup(0.8, 4, 0.1), 0.67232 / 0.28, 1e-9);
    ck_assert_double_eq_tol(spec_predicted_speedup(1.0, 3, 0.0), 4.0, 1e-12);
    ck_assert_double_eq_tol(spec_predicted_speedup(0.0, 5, 0.05), 1.0 / 1.25, 1e-12);
    ck_assert_double_eq_tol(spec_expected_tokens_per_pass(0.5, 2), 1.75, 1e-12);
}
END_TEST

START_TEST(adaptive_gamma_follows_the_hugging_face_schedule)
{
    spec_round r = {0};
    r.n_draft = 4;
    r.n_accepted = 4;
    ck_assert_int_eq(spec_adapt_gamma(4, &r, 10), 6);        /* all accepted: +2 */
    r.n_draft = r.n_accepted = 9;
    ck_assert_int_eq(spec_adapt_gamma(9, &r, 10), 10);       /* capped */
    r.n_accepted = 2;
    r.rejected = true;
    ck_assert_int_eq(spec_adapt_gamma(4, &r, 10), 3);        /* a rejection: -1 */
    r.n_draft = 1;
    r.n_accepted = 0;
    ck_assert_int_eq(spec_adapt_gamma(1, &r, 10), 1);        /* never below 1 */
    r.n_draft = 2;                                           /* cut short by max_tokens */
    r.n_accepted = 2;
    r.rejected = false;
    ck_assert_int_eq(spec_adapt_gamma(5, &r, 10), 5);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Suite */

int main(void)
{
    Suite *s = suite_create("speculative");
    TCase *tc = tcase_create("fake engines");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, sampled_tokens_follow_the_target_distribution);
    tcase_add_test(tc, residual_p_instead_of_p_minus_q_is_caught);
    tcase_add_test(tc, draft_raw_softmax_instead_of_final_q_is_caught);
    tcase_add_test(tc, target_penalties_without_drafted_history_are_caught);
    tcase_add_test(tc, one_target_pass_per_round_and_caches_hold_the_accepted_prefix);
    tcase_add_test(tc, round_stops_at_max_tokens_context_end_and_stop_token);
    suite_add_tcase(s, tc);
    TCase *tf = tcase_create("figures");
    tcase_add_test(tf, predicted_speedup_matches_the_paper_formula);
    tcase_add_test(tf, adaptive_gamma_follows_the_hugging_face_schedule);
    suite_add_tcase(s, tf);
    return tu_run_suite(s);
}
