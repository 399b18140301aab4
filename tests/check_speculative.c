/* check_speculative.c: speculative decoding is exact: greedy output equals plain greedy token for
 * token, sampled output follows the target's distribution (and a deliberately wrong variant is
 * caught), and the caches after every round equal a fresh prefill of the accepted sequence. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/engine/engine.h"
#include "core/model/model.h"
#include "core/model/modelgen.h"
#include "core/base/rng.h"
#include "core/decode/sampler.h"
#include "core/decode/speculative.h"
#include "core/tokenizer/tokenizer.h"
#include "core/session/session.h"
#include "tests/testutil.h"

/* ---------------------------------------------------------------------------------------------
 * A fake engine: logits are a fixed pseudo-random function of the whole prefix, so the exact
 * distribution of a few generated tokens can be enumerated, and the "cache" is a token array the
 * test can read. A draft mixes the target's logits with its own noise: mix sets the acceptance. */

#define FAKE_CTX 64

typedef struct fake_engine {
    engine base;
    model_config cfg;
    int32_t cache[FAKE_CTX];
    uint64_t seed;
    float scale;
    const struct fake_engine *like;  /* the target this draft imitates, or NULL */
    float mix;                       /* weight of like's logits */
    long forwards;
    float rows[FAKE_CTX * 16];
} fake_engine;

/* A fresh key for each round drawn from the test's own stream (position 0): rounds with
 * independent random numbers, reproducible from the test's seed. */
static const spec_request *keyed(spec_request *req, rng *r)
{
    req->key = rng_next(r);
    return req;
}

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

static const engine_ops fake_ops = {"fake", fake_forward, tu_fake_truncate, tu_fake_destroy,
                                   NULL, NULL, NULL};

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
        ck_assert_msg(spec_run_round(sp, target, draft, params, keyed(&req, &r), &err) == TT_OK, "%s",
                      err.msg);
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
#define FAKE_SAMPLES 4000

static const int32_t fake_prompt[] = {1, 4, 1, 2};

START_TEST(sampled_tokens_follow_the_target_distribution)
{
    /* For four chain settings and gamma 1 and 3: the first three tokens of 4000 seeded runs
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
    int32_t w[FAKE_CTX] = {3, 1};
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
        ck_assert_int_eq(spec_run_round(sp, &t->base, &d->base, &params, keyed(&req, &r), &err), TT_OK);
        const spec_round *R = spec_last_round(sp);
        if (round > 0)
            ck_assert_int_eq(t->forwards - before, 1);
        int k = R->n_accepted;
        patterns[R->rejected ? k : SPEC_GAMMA_MAX + 1]++;
        /* target: window plus the accepted drafts, exactly; when all pass the last one is not
         * in it (no row was computed after it) */
        ck_assert_int_eq(t->base.n_past, R->rejected ? n + k : n + k - 1);
        for (int i = 0; i < n; i++)
            ck_assert_int_eq(t->cache[i], w[i]);
        for (int i = 0; i < t->base.n_past - n; i++)
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
    ck_assert_int_gt(patterns[SPEC_GAMMA_MAX + 1], 0);/* all accepted */
    spec_free(sp);
    engine_free(&d->base);
    engine_free(&t->base);
}
END_TEST

/* Two identical fake pairs with the same seed, for rounds run full (v 0) and lean (v 1) side by
 * side: sampler case pc (4: greedy), window w[v] starting with token 3. */
typedef struct {
    sampler_params params;
    fake_engine *t[2], *d[2];
    spec *sp[2];
    rng r[2];
    int32_t w[2][FAKE_CTX];
} twin_pairs;

static void twins_open(twin_pairs *tw, int pc, uint64_t seed)
{
    params_case(&tw->params, pc < 4 ? pc : 0);
    if (pc == 4)
        tw->params.greedy = true;
    for (int v = 0; v < 2; v++) {
        tw->t[v] = fake_create(FAKE_V, 31, 1.5f, NULL, 0);
        tw->d[v] = fake_create(FAKE_V, 32, 1.5f, tw->t[v], 0.6f);
        tw->sp[v] = spec_create(FAKE_V);
        rng_seed(&tw->r[v], seed);
        tw->w[v][0] = 3;
    }
}

static void twins_close(twin_pairs *tw)
{
    for (int v = 0; v < 2; v++) {
        spec_free(tw->sp[v]);
        engine_free(&tw->d[v]->base);
        engine_free(&tw->t[v]->base);
    }
}

/* One round on each pair over its window's first n tokens: full on pair 0, lean on pair 1 (and
 * rebuildable there when req asks for it). */
static void twins_round(twin_pairs *tw, spec_request req, int n, const spec_round *R[2])
{
    tt_error err;
    bool rebuildable = req.rebuildable;
    for (int v = 0; v < 2; v++) {
        req.tokens = tw->w[v];
        req.n = n;
        req.lean = v == 1;
        req.rebuildable = v == 1 && rebuildable;
        ck_assert_int_eq(spec_run_round(tw->sp[v], &tw->t[v]->base, &tw->d[v]->base, &tw->params,
                                        keyed(&req, &tw->r[v]), &err), TT_OK);
        R[v] = spec_last_round(tw->sp[v]);
    }
}

START_TEST(lean_rounds_give_the_same_tokens_and_draws_as_full_ones)
{
    /* The same seed with and without snapshots: every round's tokens, verdicts, q, p, uniforms
     * and the random stream after it agree, for each sampler case and greedy. */
    for (int pc = 0; pc < 5; pc++) {
        twin_pairs tw;
        twins_open(&tw, pc, 9 + pc);
        int n = 1;
        for (int round = 0; n < FAKE_CTX - 1; round++) {
            const spec_round *R[2];
            twins_round(&tw, (spec_request){.gamma = 1 + round % 5, .max_tokens = 64,
                                            .stop_id = 6, .banned = -1}, n, R);
            ck_assert_int_eq(R[0]->n_out, R[1]->n_out);
            ck_assert_int_eq(R[0]->n_draft, R[1]->n_draft);
            ck_assert_int_eq(R[0]->n_accepted, R[1]->n_accepted);
            ck_assert_int_eq(R[0]->rejected, R[1]->rejected);
            ck_assert_int_eq(R[0]->next, R[1]->next);
            for (int i = 0; i < R[0]->n_draft; i++) {
                ck_assert_int_eq(R[0]->draft[i].token, R[1]->draft[i].token);
                ck_assert_float_eq(R[0]->draft[i].q, R[1]->draft[i].q);
                ck_assert_float_eq(R[0]->draft[i].p, R[1]->draft[i].p);
                ck_assert_double_eq(R[0]->draft[i].u, R[1]->draft[i].u);
                ck_assert_int_eq(R[0]->draft_snap[i].token, R[1]->draft_snap[i].token);
                ck_assert_float_eq(R[0]->draft_snap[i].token_p, R[1]->draft_snap[i].token_p);
                ck_assert_int_eq(R[1]->draft_snap[i].n_top, 0);
                ck_assert_int_gt(R[0]->draft_snap[i].n_top, 0);
            }
            for (int i = 0; i < R[0]->n_out; i++) {
                ck_assert_int_eq(R[0]->out[i], R[1]->out[i]);
                ck_assert_int_eq(R[0]->target_snap[i].token, R[1]->target_snap[i].token);
                ck_assert_float_eq(R[0]->target_snap[i].token_p, R[1]->target_snap[i].token_p);
                ck_assert_double_eq(R[0]->target_snap[i].u, R[1]->target_snap[i].u);
                ck_assert_int_eq(R[1]->target_snap[i].n_top, 0);
            }
            ck_assert_double_eq(rng_uniform(&tw.r[0]), rng_uniform(&tw.r[1]));
            for (int i = 0; i < R[0]->n_out && n < FAKE_CTX; i++, n++)
                tw.w[0][n] = tw.w[1][n] = R[0]->out[i];
            if (R[0]->next < 0)
                break;                        /* an accepted stop token */
        }
        twins_close(&tw);
    }
}
END_TEST

START_TEST(rows_rebuilt_after_a_lean_round_equal_a_full_rounds_snapshots)
{
    /* The same rounds run full and lean with rebuildable rows: every draft row and every produced
     * target row built afterwards equals the full round's snapshot, field for field, in each
     * sampler case and greedy; rows the round did not reach are refused. */
    for (int pc = 0; pc < 5; pc++) {
        twin_pairs tw;
        twins_open(&tw, pc, 19 + pc);
        int n = 1, rebuilt = 0, rejections = 0;
        tt_error err;
        spec **sp = tw.sp;
        for (int round = 0; n < FAKE_CTX - 1; round++) {
            const spec_round *R[2];
            twins_round(&tw, (spec_request){.gamma = 1 + round % 6, .max_tokens = 64,
                                            .stop_id = -1, .banned = 5, .n_banned = round % 3,
                                            .rebuildable = true}, n, R);
            ck_assert_int_eq(R[0]->n_out, R[1]->n_out);
            sampler_snapshot snap;
            for (int i = 0; i < R[0]->n_draft; i++, rebuilt++) {
                ck_assert_int_eq(spec_round_snapshot(sp[1], true, i, &snap, &err), TT_OK);
                ck_assert(tu_same_snapshot(&snap, &R[0]->draft_snap[i]));
            }
            for (int i = 0; i < R[0]->n_out; i++, rebuilt++) {
                ck_assert_int_eq(spec_round_snapshot(sp[1], false, i, &snap, &err), TT_OK);
                ck_assert(tu_same_snapshot(&snap, &R[0]->target_snap[i]));
            }
            rejections += R[0]->rejected;
            ck_assert_int_eq(spec_round_snapshot(sp[1], true, R[0]->n_draft, &snap, &err),
                             TT_ERR_ARG);
            ck_assert_int_eq(spec_round_snapshot(sp[1], false, R[0]->n_out, &snap, &err),
                             TT_ERR_ARG);
            ck_assert_int_eq(spec_round_snapshot(sp[0], false, 0, &snap, &err), TT_ERR_ARG);
            for (int i = 0; i < R[0]->n_out && n < FAKE_CTX; i++, n++)
                tw.w[0][n] = tw.w[1][n] = R[0]->out[i];
        }
        ck_assert_int_gt(rebuilt, 20);
        if (pc < 4)
            ck_assert_int_gt(rejections, 0);
        twins_close(&tw);
    }
}
END_TEST

START_TEST(round_stops_at_max_tokens_context_end_and_stop_token)
{
    fake_engine *t = fake_create(FAKE_V, 31, 1.0f, NULL, 0);
    fake_engine *d = fake_create(FAKE_V, 32, 1.0f, t, 1.0f);   /* q == p: all accepted */
    spec *sp = spec_create(FAKE_V);
    sampler_params params;
    sampler_params_default(&params);
    int32_t w[FAKE_CTX] = {0};
    rng r;
    tt_error err;
    const spec_round *R = spec_last_round(sp);

    /* max_tokens 3 caps gamma 8 at 3 drafts; all pass, nothing more is drawn */
    rng_seed(&r, 1);
    spec_request req = {.tokens = w, .n = 5, .gamma = 8, .max_tokens = 3, .stop_id = -1,
                        .banned = -1};
    ck_assert_int_eq(spec_run_round(sp, &t->base, &d->base, &params, keyed(&req, &r), &err),
                     TT_OK);
    ck_assert_int_eq(R->n_draft, 3);
    ck_assert_int_eq(R->n_accepted, 3);
    ck_assert_int_eq(R->n_out, 3);
    ck_assert(!R->rejected && R->next == -1);
    int32_t second = R->out[1];

    /* a drafted stop token ends drafting, and the round ends with it once accepted */
    rng_seed(&r, 1);
    req.max_tokens = 16;
    req.stop_id = second;
    ck_assert_int_eq(spec_run_round(sp, &t->base, &d->base, &params, keyed(&req, &r), &err),
                     TT_OK);
    ck_assert_int_eq(R->out[0] == second ? 1 : R->n_draft, R->out[0] == second ? 1 : 2);
    ck_assert_int_eq(R->out[R->n_out - 1], second);
    ck_assert_int_eq(R->next, -1);

    /* at the end of the context: only as many drafts as positions remain (the last one needs
     * no row after it) */
    rng_seed(&r, 2);
    req.stop_id = -1;
    req.n = FAKE_CTX - 2;
    ck_assert_int_eq(spec_run_round(sp, &t->base, &d->base, &params, keyed(&req, &r), &err),
                     TT_OK);
    ck_assert_int_eq(R->n_draft, 3);
    ck_assert_int_eq(t->base.n_past, FAKE_CTX);
    req.n = FAKE_CTX;
    ck_assert_int_eq(spec_run_round(sp, &t->base, &d->base, &params, keyed(&req, &r), &err),
                     TT_OK);
    ck_assert_int_eq(R->n_draft, 1);
    ck_assert_int_eq(R->n_out, 1);
    /* gamma 0: one plain step, the one round with no draft (a "bonus" in the session) */
    req.gamma = 0;
    ck_assert_int_eq(spec_run_round(sp, &t->base, &d->base, &params, keyed(&req, &r), &err),
                     TT_OK);
    ck_assert_int_eq(R->n_draft, 0);
    ck_assert_int_eq(R->n_out, 1);
    ck_assert_int_ge(R->next, 0);
    req.gamma = 8;
    req.n = FAKE_CTX + 1;
    ck_assert_int_eq(spec_run_round(sp, &t->base, &d->base, &params, keyed(&req, &r), &err),
                     TT_ERR_CONTEXT);

    /* the banned token (EOS before --min-tokens) is masked for n_banned positions only */
    params.greedy = true;
    req.n = 5;
    req.max_tokens = 4;
    req.gamma = 4;
    ck_assert_int_eq(spec_run_round(sp, &t->base, &d->base, &params, keyed(&req, &r), &err),
                     TT_OK);
    int32_t free_run[4];
    memcpy(free_run, R->out, sizeof free_run);
    ck_assert_int_eq(R->n_out, 4);
    req.banned = free_run[1];
    req.n_banned = 2;
    ck_assert_int_eq(spec_run_round(sp, &t->base, &d->base, &params, keyed(&req, &r), &err),
                     TT_OK);
    ck_assert_int_ne(R->out[0], req.banned);
    ck_assert_int_ne(R->out[1], req.banned);
    spec_free(sp);
    engine_free(&d->base);
    engine_free(&t->base);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Real models on the CPU engine: a target, a draft that is a truncated copy of it (same seed, one
 * layer instead of three: the same embeddings and first block), an unrelated draft, and the
 * target itself as its own draft (everything accepted: long rounds, bonus tokens). */

static char *g_dir;
static model *g_target, *g_trunc, *g_other, *g_wide;
static tokenizer *g_tok;

#define TV 300

static void write_model(const char *name, int V, int C, int L, uint64_t seed)
{
    modelgen_options o;
    modelgen_options_default(&o);
    o.V = V;
    o.maxT = 64;
    o.C = C;
    o.NH = 2;
    o.L = L;
    o.seed = seed;
    o.scale = 0.3f;   /* blocks matter less than the embeddings: the truncated copy agrees often */
    tt_error err;
    ck_assert_msg(modelgen_write(tu_path("%s/%s", g_dir, name), &o, &err) == TT_OK, "%s",
                  err.msg);
}

static model *load(const char *name)
{
    model *m = NULL;
    tt_error err;
    ck_assert_msg(model_load(tu_path("%s/%s", g_dir, name), &m, &err) == TT_OK, "%s", err.msg);
    return m;
}

static void models_setup(void)
{
    g_dir = tu_tmpdir();
    write_model("target", TV, 32, 3, 7);
    write_model("trunc", TV, 32, 1, 7);
    write_model("other", TV, 16, 1, 99);
    write_model("wide", TV + 20, 16, 1, 5);
    g_target = load("target");
    g_trunc = load("trunc");
    g_other = load("other");
    g_wide = load("wide");
    tt_error err;
    ck_assert_msg(tokenizer_load_dir(tu_path("%s/target", g_dir), &g_tok, &err) == TT_OK, "%s",
                  err.msg);
}

static void models_teardown(void)
{
    tokenizer_free(g_tok);
    model_free(g_target);
    model_free(g_trunc);
    model_free(g_other);
    model_free(g_wide);
    tu_tmpdir_free(g_dir);
}

static engine *cpu(const model *m, int n_ctx)
{
    engine_options o;
    engine_options_default(&o);
    o.n_threads = 1;
    o.n_ctx = n_ctx;
    engine *e = NULL;
    tt_error err;
    ck_assert_msg(cpu_engine_create(m, &o, &e, &err) == TT_OK, "%s", err.msg);
    return e;
}

typedef struct {
    int n_events, n_rejected, n_accepted_events, n_resample, n_bonus, n_text_on_rejected;
    int n_full_rounds;           /* rounds (but the last) in which every draft was accepted */
    int bad_order;               /* an origin sequence a round cannot produce */
    int last_round;
    token_origin prev;
    bool prev_rejected;
    long hold_us;                /* > 0: each event holds the session this long (pacing) */
} event_log;

static bool on_event(void *user, const session_event *ev)
{
    event_log *L = user;
    if (!L || ev->flush)
        return true;
    if (L->hold_us > 0) {
        struct timespec ts = {0, L->hold_us * 1000};
        nanosleep(&ts, NULL);
    }
    L->n_events++;
    if (ev->rejected) {
        L->n_rejected++;
        L->n_text_on_rejected += ev->text_len > 0;
        if (!ev->draft || ev->draft->accepted)
            L->bad_order++;
    } else if (ev->origin == TOKEN_DRAFT_ACCEPTED) {
        L->n_accepted_events++;
        if (!ev->draft || !ev->draft->accepted || !ev->draft_snap)
            L->bad_order++;
    } else if (ev->origin == TOKEN_TARGET_RESAMPLE) {
        L->n_resample++;
        if (!L->prev_rejected)
            L->bad_order++;      /* a replacement follows its rejected draft */
    } else if (ev->origin == TOKEN_BONUS) {
        L->n_bonus++;
    }
    if (!ev->rejected && L->last_round != 0 && ev->round != L->last_round &&
        L->prev == TOKEN_DRAFT_ACCEPTED)
        L->n_full_rounds++;      /* the previous round ended on an accepted draft: all passed */
    if (!ev->rejected) {
        L->prev = ev->origin;
        L->last_round = ev->round;
    }
    L->prev_rejected = ev->rejected;
    return true;
}

/* Generates max_new tokens after prompt (greedy unless params given) with the given seed, gamma
 * fixed or adaptive, and copies the reply. */
/* A session over target with settings set; with a draft, speculative at gamma (adaptive or
 * fixed). */
static void open_session(session *s, engine *target, engine *draft, int gamma, bool adaptive,
                         const session_settings *set)
{
    tt_error err;
    ck_assert_int_eq(session_init(s, g_target, g_tok, target, set, &err), TT_OK);
    if (draft) {
        ck_assert_msg(session_set_draft(s, draft, &err) == TT_OK, "%s", err.msg);
        ck_assert_int_eq(session_set_gamma(s, gamma, adaptive, &err), TT_OK);
    }
}

static int generate_seeded(engine *target, engine *draft, int gamma, bool adaptive,
                           const sampler_params *params, uint64_t seed, const int32_t *prompt,
                           int np, int max_new, int32_t *out, event_log *log,
                           session_stats *stats)
{
    session_settings set;
    session_settings_default(&set);
    if (params)
        set.sampler = *params;
    else
        set.sampler.greedy = true;
    set.max_new_tokens = max_new;
    set.seed = seed;
    session s;
    tt_error err;
    open_session(&s, target, draft, gamma, adaptive, &set);
    ck_assert_int_eq(session_add_user_tokens(&s, prompt, np, &err), TT_OK);
    ck_assert_msg(session_generate(&s, on_event, log, &err) == TT_OK, "%s", err.msg);
    int n = s.n_tokens - np;
    memcpy(out, s.tokens + np, (size_t)n * sizeof *out);
    if (stats)
        *stats = s.last;
    session_free(&s);
    return n;
}

/* generate_seeded with seed 3 and a fixed gamma. */
static int generate(engine *target, engine *draft, int gamma, const sampler_params *params,
                    const int32_t *prompt, int np, int max_new, int32_t *out, event_log *log,
                    session_stats *stats)
{
    return generate_seeded(target, draft, gamma, false, params, 3, prompt, np, max_new, out, log,
                           stats);
}

static void random_prompt(rng *r, int32_t *p, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (int32_t)(rng_next(r) % 256);
}

START_TEST(greedy_output_equals_plain_greedy_for_gamma_1_to_8)
{
    /* 10 prompts x gamma 1..8 x three drafts x a context of 64 and one of 20 (so the context
     * shifts, also in the middle of what would have been a round). */
    static const int ctxs[] = {64, 20};
    const model *drafts[] = {g_trunc, g_other, g_target};
    long accepted[3] = {0}, drafted[3] = {0}, shifts = 0;
    rng r;
    rng_seed(&r, 42);
    for (int ci = 0; ci < 2; ci++) {
        engine *t = cpu(g_target, ctxs[ci]);
        for (int di = 0; di < 3; di++) {
            engine *d = cpu(drafts[di], ctxs[ci]);
            for (int pi = 0; pi < 10; pi++) {
                int32_t prompt[12], plain[64], spec_out[64];
                int np = 1 + pi;
                random_prompt(&r, prompt, np);
                session_stats ps;
                int n_plain = generate(t, NULL, 0, NULL, prompt, np, 40, plain, NULL, &ps);
                for (int gamma = 1; gamma <= 8; gamma++) {
                    event_log log = {0};
                    session_stats st;
                    int n = generate(t, d, gamma, NULL, prompt, np, 40, spec_out, &log, &st);
                    ck_assert_msg(n == n_plain && memcmp(plain, spec_out, n * sizeof *plain) == 0,
                                  "ctx %d draft %d prompt %d gamma %d: speculative output "
                                  "differs from plain greedy", ctxs[ci], di, pi, gamma);
                    ck_assert_int_eq(st.stop, ps.stop);
                    ck_assert_int_eq(st.context_shifts, ps.context_shifts);
                    ck_assert_int_eq(log.bad_order, 0);
                    ck_assert_int_eq(log.n_text_on_rejected, 0);
                    accepted[di] += st.accepted;
                    drafted[di] += st.drafted;
                    shifts += st.context_shifts;
                }
            }
            engine_free(d);
        }
        engine_free(t);
    }
    fprintf(stderr, "  greedy: drafts accepted: truncated copy %ld/%ld, unrelated %ld/%ld, "
            "itself %ld/%ld; %ld context shifts\n", accepted[0], drafted[0], accepted[1],
            drafted[1], accepted[2], drafted[2], shifts);
    /* agreement and disagreement both exercised */
    ck_assert_int_gt(accepted[0], drafted[0] / 10);
    ck_assert_int_lt(accepted[0], drafted[0]);
    ck_assert_int_lt(accepted[1], drafted[1]);
    ck_assert_int_eq(accepted[2], drafted[2]);
    ck_assert_int_gt(shifts, 0);
}
END_TEST

/* logits of the next token after seq[0..n) computed by e (whose cache must hold seq[0..n-1))
 * against a fresh engine that prefills seq[0..n-1) and runs the same last step. */
static double cache_error(engine *e, const model *m, const int32_t *seq, int n)
{
    tt_error err;
    engine *f = cpu(m, e->n_ctx);
    if (n > 1)
        ck_assert_int_eq(engine_forward(f, seq, n - 1, 0, false, &err), TT_OK);
    ck_assert_int_eq(engine_forward(f, seq + n - 1, 1, n - 1, false, &err), TT_OK);
    ck_assert_int_eq(engine_forward(e, seq + n - 1, 1, n - 1, false, &err), TT_OK);
    double worst = 0;
    for (int v = 0; v < m->config.V; v++) {
        double dlt = fabs((double)engine_logits(e, 0)[v] - (double)engine_logits(f, 0)[v]);
        worst = dlt > worst ? dlt : worst;
    }
    engine_free(f);
    return worst;
}

START_TEST(caches_equal_a_fresh_prefill_after_every_round)
{
    engine *t = cpu(g_target, 64);
    engine *d = cpu(g_trunc, 64);
    spec *sp = spec_create(TV);
    int32_t w[64] = {5, 17, 200};
    int n = 3;
    sampler_params params;
    sampler_params_default(&params);
    params.temperature = 1.5f;
    rng r;
    rng_seed(&r, 9);
    tt_error err;
    int rejections = 0, full = 0;
    for (int round = 0; n < 56; round++) {
        spec_request req = {.tokens = w, .n = n, .gamma = 1 + round % 5, .max_tokens = 64,
                            .stop_id = -1, .banned = -1};
        ck_assert_int_eq(spec_run_round(sp, t, d, &params, keyed(&req, &r), &err), TT_OK);
        const spec_round *R = spec_last_round(sp);
        rejections += R->rejected;
        full += !R->rejected;
        int k = R->n_accepted;
        int32_t seq[64];
        memcpy(seq, w, (size_t)n * sizeof *seq);
        for (int i = 0; i < R->n_out; i++)
            seq[n + i] = R->out[i];
        /* the engines' token mirrors say what the caches hold: the window and the accepted
         * drafts (the last one left out when all passed: no row was computed after it) */
        int tn = R->rejected ? n + k : n + k - 1;
        ck_assert_int_eq(t->n_past, tn);
        ck_assert_int_le(d->n_past, n + k);
        for (int i = 0; i < t->n_past; i++)
            ck_assert_int_eq(t->tokens[i], seq[i]);
        for (int i = 0; i < d->n_past; i++)
            ck_assert_int_eq(d->tokens[i], seq[i]);
        /* ... and the caches' contents equal a fresh prefill of that sequence: stepping both
         * with the next token gives the same logits (up to kernel rounding) */
        double et = cache_error(t, g_target, seq, tn + 1);
        ck_assert_msg(et < 1e-3, "round %d: target cache differs by %g", round, et);
        int dn = d->n_past;
        double ed = cache_error(d, g_trunc, seq, dn + 1);
        ck_assert_msg(ed < 1e-3, "round %d: draft cache differs by %g", round, ed);
        /* put the caches back where the round left them */
        engine_truncate(t, tn);
        engine_truncate(d, dn);
        for (int i = 0; i < R->n_out; i++)
            w[n++] = R->out[i];
    }
    ck_assert_int_gt(rejections, 2);
    ck_assert_int_gt(full, 0);
    spec_free(sp);
    engine_free(d);
    engine_free(t);
}
END_TEST

START_TEST(sampled_tokens_follow_the_target_distribution_on_real_models)
{
    /* top-k 3 keeps 27 sequences of three tokens; temperature and a repetition penalty make the
     * chain matter; 3000 seeded runs per gamma. */
    engine *t = cpu(g_target, 64);
    engine *d = cpu(g_trunc, 64);
    sampler_params params;
    sampler_params_default(&params);
    params.top_k = 3;
    params.temperature = 1.4f;
    params.repetition_penalty = 1.5f;
    params.penalty_window = -1;
    static const int32_t prompt[] = {10, 65, 66};
    dist *D = malloc(sizeof *D);
    exact_dist(t, &params, prompt, 3, D);
    spec *sp = spec_create(TV);
    for (int gamma = 1; gamma <= 4; gamma += 3) {
        run_stats rs = {0};
        fit f = sample_fit(sp, t, d, &params, prompt, 3, gamma, 3000, D, &rs);
        fprintf(stderr, "  cpu gamma %d: chi2 %.1f (df %d, limit %.1f), TV %.4f, acceptance "
                "%.3f\n", gamma, f.chi2, f.df, chi2_limit(f.df), f.tv,
                (double)rs.accepted / rs.drafted);
        ck_assert_msg(f.chi2 < chi2_limit(f.df), "gamma %d: chi2 %.1f", gamma, f.chi2);
        ck_assert(rs.accepted > 0 && rs.accepted < rs.drafted);
    }
    free(D);
    spec_free(sp);
    engine_free(d);
    engine_free(t);
}
END_TEST

/* Generates n_gen tokens after a fixed prompt by rounds keyed by key, of gamma drafts, or of the
 * gammas a tuner chooses when fed noisy costs (tuner and noise non-NULL). Returns a mask of the
 * gammas the rounds had. */
static unsigned spec_keyed_run(engine *t, engine *d, const sampler_params *params, uint64_t key,
                               int gamma, spec_tuner *tuner, rng *noise, int32_t *out, int n_gen)
{
    spec *sp = spec_create(TV);
    int32_t w[64] = {5, 17, 200};
    const int np = 3;
    int n = np;
    unsigned mask = 0;
    engine_truncate(t, 0);
    engine_truncate(d, 0);
    tt_error err;
    while (n < np + n_gen) {
        spec_request req = {.key = key, .pos = n - np, .tokens = w, .n = n,
                            .gamma = tuner ? tuner->gamma : gamma, .max_tokens = np + n_gen - n,
                            .stop_id = -1, .banned = -1};
        ck_assert_msg(spec_run_round(sp, t, d, params, &req, &err) == TT_OK, "%s", err.msg);
        const spec_round *R = spec_last_round(sp);
        for (int i = 0; i < R->n_out; i++)
            w[n++] = R->out[i];
        mask |= 1u << (R->n_draft < 31 ? R->n_draft : 31);
        if (tuner) {
            spec_round noisy = *R;       /* timings that make the tuner wander */
            noisy.draft_ms = 2 * rng_uniform(noise);
            noisy.target_ms = 3 * rng_uniform(noise);
            spec_tuner_update(tuner, &noisy);
        }
    }
    memcpy(out, w + np, (size_t)n_gen * sizeof *out);
    spec_free(sp);
    return mask;
}

START_TEST(the_same_seed_gives_the_same_tokens_whatever_gamma)
{
    /* Every uniform is keyed by (key, output position, purpose), and every position (the last
     * of a round too) is a draft verified by rejection sampling: the tokens depend on the
     * context, the key and the position, not on how the positions were grouped into rounds. */
    engine *t = cpu(g_target, 64);
    engine *d = cpu(g_trunc, 64);
    sampler_params params;
    sampler_params_default(&params);
    params.temperature = 1.3f;
    params.top_k = 0;
    params.top_p = 1.0f;
    enum { N = 48 };
    int32_t ref[N], got[N];
    spec_keyed_run(t, d, &params, 77, 1, NULL, NULL, ref, N);
    for (int gamma = 2; gamma <= 6; gamma++) {
        spec_keyed_run(t, d, &params, 77, gamma, NULL, NULL, got, N);
        for (int i = 0; i < N; i++)
            ck_assert_msg(got[i] == ref[i], "gamma %d, token %d: %d, with gamma 1 %d", gamma, i,
                          got[i], ref[i]);
    }
    for (int trial = 0; trial < 3; trial++) {
        spec_tuner tu;
        spec_tuner_init(&tu, 4);
        rng noise;
        rng_seed(&noise, 100 + (uint64_t)trial);
        unsigned mask = spec_keyed_run(t, d, &params, 77, 0, &tu, &noise, got, N);
        ck_assert_int_ge(__builtin_popcount(mask), 2);     /* the rounds' gammas did vary */
        for (int i = 0; i < N; i++)
            ck_assert_msg(got[i] == ref[i], "tuner trial %d, token %d: %d, with gamma 1 %d",
                          trial, i, got[i], ref[i]);
    }
    /* ... and the key matters: another one gives other tokens */
    spec_keyed_run(t, d, &params, 78, 4, NULL, NULL, got, N);
    ck_assert(memcmp(got, ref, sizeof ref) != 0);

    /* The session: --seed S gives the same reply whatever gamma, fixed or adaptive (the tuner
     * timing real rounds) */
    static const int32_t prompt[] = {9, 8, 7};
    int32_t sref[64], sgot[64];
    int n_ref = generate_seeded(t, d, 1, false, &params, 11, prompt, 3, 40, sref, NULL, NULL);
    ck_assert_int_eq(n_ref, 40);
    for (int gamma = 2; gamma <= 7; gamma++) {
        bool adaptive = gamma == 7;
        int n = generate_seeded(t, d, adaptive ? 4 : gamma, adaptive, &params, 11, prompt, 3, 40,
                                sgot, NULL, NULL);
        ck_assert_int_eq(n, n_ref);
        ck_assert_msg(memcmp(sgot, sref, (size_t)n * sizeof *sgot) == 0,
                      "gamma %d%s: the reply differs from gamma 1's", gamma,
                      adaptive ? " (adaptive)" : "");
    }
    ck_assert(generate_seeded(t, d, 4, false, &params, 12, prompt, 3, 40, sgot, NULL, NULL) != n_ref ||
              memcmp(sgot, sref, (size_t)n_ref * sizeof *sgot) != 0);
    engine_free(d);
    engine_free(t);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * The session in speculative mode */

START_TEST(session_refuses_a_draft_with_another_vocabulary_or_a_shorter_context)
{
    engine *t = cpu(g_target, 64);
    engine *w = cpu(g_wide, 64);
    engine *short_ctx = cpu(g_trunc, 32);
    session s;
    tt_error err;
    ck_assert_int_eq(session_init(&s, g_target, g_tok, t, NULL, &err), TT_OK);
    ck_assert_int_eq(session_set_draft(&s, w, &err), TT_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(err.msg, "vocab_size 320"));
    ck_assert_int_eq(session_set_draft(&s, short_ctx, &err), TT_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(err.msg, "--ctx 32"));
    ck_assert(!s.spec_on && s.draft == NULL);
    ck_assert_int_eq(session_set_speculative(&s, true, &err), TT_ERR_ARG);
    ck_assert_int_eq(session_set_gamma(&s, 0, false, &err), TT_ERR_ARG);
    ck_assert_int_eq(session_set_gamma(&s, SPEC_GAMMA_MAX + 1, false, &err), TT_ERR_ARG);
    session_free(&s);
    engine_free(short_ctx);
    engine_free(w);
    engine_free(t);
}
END_TEST

/* The default sampler at temperature T. */
static sampler_params sampling_at(float T)
{
    sampler_params p;
    sampler_params_default(&p);
    p.temperature = T;
    return p;
}

START_TEST(session_reports_rounds_and_marks_every_token)
{
    engine *t = cpu(g_target, 64);
    engine *d = cpu(g_trunc, 64);
    sampler_params params = sampling_at(1.3f);
    static const int32_t prompt[] = {1, 2, 3};
    int32_t out[64];
    event_log log = {0};
    session_stats st;
    int n = generate(t, d, 4, &params, prompt, 3, 48, out, &log, &st);
    ck_assert_int_gt(n, 8);                       /* 48 unless the model drew its EOS */
    ck_assert(st.speculative);
    ck_assert_int_eq(st.generated_tokens, n);
    ck_assert_int_eq(log.bad_order, 0);
    ck_assert_int_eq(log.n_text_on_rejected, 0);
    /* every produced token has one event; each rejection is followed by its replacement */
    ck_assert_int_eq(log.n_events - log.n_rejected, n);
    ck_assert_int_eq(log.n_rejected, log.n_resample);
    ck_assert_int_eq(log.n_accepted_events + log.n_resample + log.n_bonus, n);
    /* each round ends with a resample or with all its drafts accepted (the last one may be cut
     * short by max_tokens); there are no bonus draws: the draft fits the context */
    ck_assert_int_ge(st.spec_rounds, log.n_resample + log.n_full_rounds);
    ck_assert_int_le(st.spec_rounds, log.n_resample + log.n_full_rounds + 1);
    ck_assert_int_ge(st.accepted, log.n_accepted_events);
    ck_assert_int_ge(st.spec_tokens, n);
    ck_assert_int_eq(log.n_bonus, 0);
    ck_assert_int_gt(log.n_full_rounds, 0);
    ck_assert_int_gt(log.n_resample, 0);
    ck_assert(st.drafted > st.accepted && st.accepted > 0);
    engine_free(d);
    engine_free(t);
}
END_TEST

/* What a session's callback was shown: each event's snapshots, full or built on demand. */
typedef struct {
    session *s;
    int n;
    sampler_snapshot snap[96], draft[96];
    bool has_draft[96], rejected[96];
    session_event last;            /* the last event, pointers cleared */
    int partial;
} shown_log;

static bool show_event(void *user, const session_event *ev)
{
    shown_log *L = user;
    if (ev->flush || L->n == 96)
        return true;
    int i = L->n++;
    L->has_draft[i] = ev->draft_snap != NULL;
    L->rejected[i] = ev->rejected;
    L->partial += ev->partial;
    tt_error err;
    ck_assert_int_eq(session_event_snapshots(L->s, ev, &L->snap[i],
                                             L->has_draft[i] ? &L->draft[i] : NULL, &err),
                     TT_OK);
    L->last = *ev;
    L->last.snap = L->last.draft_snap = NULL;
    L->last.draft = NULL;
    L->last.logits = NULL;
    L->last.text = NULL;
    return true;
}

START_TEST(snapshots_built_on_demand_are_the_ones_a_session_shows_every_event)
{
    /* Plain and speculative turns, sampling and greedy, run twice: with every snapshot computed
     * and with snapshots on demand (lean steps and rounds). Each event's snapshots built in its
     * callback equal the full ones, rejected drafts included; the last event's can still be
     * built after the turn, and an earlier step's cannot. */
    static const int32_t prompt[] = {1, 2, 3};
    for (int c = 0; c < 4; c++) {
        bool spec_on = c & 1;
        sampler_params params = c < 2 ? sampling_at(1.3f) : (sampler_params){0};
        if (c >= 2) {
            sampler_params_default(&params);
            params.greedy = true;
        }
        static shown_log L[2];
        for (int v = 0; v < 2; v++) {
            engine *t = cpu(g_target, 64);
            engine *d = cpu(g_trunc, 64);
            session_settings set;
            session_settings_default(&set);
            set.sampler = params;
            set.max_new_tokens = 40;
            set.seed = 5;
            session s;
            tt_error err;
            open_session(&s, t, spec_on ? d : NULL, 3, false, &set);
            s.snapshots_on_demand = v == 1;
            memset(&L[v], 0, sizeof L[v]);
            L[v].s = &s;
            ck_assert_int_eq(session_add_user_tokens(&s, prompt, 3, &err), TT_OK);
            ck_assert_msg(session_generate(&s, show_event, &L[v], &err) == TT_OK, "%s", err.msg);
            if (v == 1) {
                ck_assert_int_eq(L[1].partial, L[1].n);
                sampler_snapshot last, last_draft;
                int k = L[1].n - 1;
                ck_assert_int_eq(session_event_snapshots(&s, &L[1].last, &last,
                                                         L[1].has_draft[k] ? &last_draft : NULL,
                                                         &err), TT_OK);
                ck_assert(tu_same_snapshot(&last, &L[0].snap[k]));
                if (L[1].has_draft[k])
                    ck_assert(tu_same_snapshot(&last_draft, &L[0].draft[k]));
                session_event earlier = L[1].last;
                earlier.step -= 1;
                earlier.round -= 1;
                ck_assert_int_eq(session_event_snapshots(&s, &earlier, &last, NULL, &err),
                                 TT_ERR_ARG);
            } else {
                ck_assert_int_eq(L[0].partial, 0);
            }
            session_free(&s);
            engine_free(d);
            engine_free(t);
        }
        ck_assert_int_eq(L[1].n, L[0].n);
        ck_assert_int_ge(L[0].n, 40);
        int rejected = 0;
        for (int i = 0; i < L[0].n; i++) {
            ck_assert_int_eq(L[1].has_draft[i], L[0].has_draft[i]);
            ck_assert_int_eq(L[1].rejected[i], L[0].rejected[i]);
            rejected += L[0].rejected[i];
            ck_assert_msg(tu_same_snapshot(&L[1].snap[i], &L[0].snap[i]), "case %d event %d", c,
                          i);
            ck_assert_int_gt(L[1].snap[i].n_top, 0);
            if (L[0].has_draft[i])
                ck_assert(tu_same_snapshot(&L[1].draft[i], &L[0].draft[i]));
        }
        if (spec_on)
            ck_assert_int_gt(rejected, 0);
    }
}
END_TEST

/* The probes' tests' session: target and truncated draft (gamma 3), temperature 1, 40 tokens,
 * seed 9, plain-step probes on or off. */
static void open_probe_session(session *s, engine **t, engine **d, bool probe)
{
    *t = cpu(g_target, 64);
    *d = cpu(g_trunc, 64);
    session_settings set;
    session_settings_default(&set);
    set.sampler = sampling_at(1.0f);
    set.max_new_tokens = 40;
    set.seed = 9;
    open_session(s, *t, *d, 3, false, &set);
    s->plain_probe = probe;
}

/* The REPL's "x plain": a speculative turn with plain_probe times a plain step before every
 * round after the first (a one-row target forward and the sampler, rolled back) and pairs it
 * with that round, so each pair runs under one moment's load. The probes change no token;
 * their time stays out of the decode speed. The figure leaves out a pair slower than 3x its
 * kind's median and says nothing (0) with fewer than SESSION_PROBE_MIN left: this short turn
 * gives few more than that, so on a loaded machine one preempted step can leave it without a
 * figure (a CI run met it once); the probed turn is run again, up to 3 times, until it has one,
 * each time with the same tokens. */
START_TEST(plain_probes_time_plain_steps_in_the_turn_and_change_no_token)
{
    static const int32_t prompt[] = {1, 2, 3};
    int32_t out[2][64];
    int n[2];
    session_stats st[2];
    for (int v = 0, attempt = 0; v < 2; v++) {
        engine *t, *d;
        session s;
        tt_error err;
        open_probe_session(&s, &t, &d, v == 1);
        s.snapshots_on_demand = true;
        ck_assert_int_eq(session_add_user_tokens(&s, prompt, 3, &err), TT_OK);
        ck_assert_msg(session_generate(&s, NULL, NULL, &err) == TT_OK, "%s", err.msg);
        n[v] = s.n_tokens - 3;
        memcpy(out[v], s.tokens + 3, (size_t)n[v] * sizeof out[v][0]);
        st[v] = s.last;
        double lo, hi, x = session_plain_speedup(&s, &lo, &hi);
        if (v == 1 && x == 0 && ++attempt < 3) {
            /* the tokens are the same whatever the timing */
            ck_assert_int_eq(n[1], n[0]);
            ck_assert_int_eq(memcmp(out[1], out[0], (size_t)n[0] * sizeof out[0][0]), 0);
            session_free(&s);
            engine_free(d);
            engine_free(t);
            v--;
            continue;
        }
        if (v == 0) {
            ck_assert_int_eq(s.last.plain_probes, 0);
            ck_assert_double_eq(x, 0);   /* no probe, no figure */
        } else {
            /* every other round after the first until SESSION_PROBE_MIN pairs, then within the
             * share: a pair's round is the one after the probe's, which the probe warmed */
            ck_assert_int_le(s.last.plain_probes, ((int)s.last.spec_rounds - 1) / 2);
            ck_assert_int_ge(s.last.plain_probes, SESSION_PROBE_MIN);
            ck_assert(s.last.plain_step_ms > 0 && s.last.round_ms > 0);
            ck_assert(s.last.probe_ms > 0);
            ck_assert(x > 0);
            ck_assert(lo > 0 && lo <= hi);
            /* the engine's cache holds a prefix of the conversation, as without probes */
            int cached = engine_cached_prefix(t, s.tokens, s.n_tokens);
            ck_assert_int_eq(cached, t->n_past);
        }
        session_free(&s);
        engine_free(d);
        engine_free(t);
    }
    ck_assert_int_eq(n[0], n[1]);
    for (int i = 0; i < n[0]; i++)
        ck_assert_int_eq(out[0][i], out[1][i]);
    ck_assert_int_eq(st[0].spec_rounds, st[1].spec_rounds);
}
END_TEST

/* TOKENTOP_PAIR_TRACE=FILE, the debug trace behind "x plain" (docs/bench/2026-11-27-repl-x-
 * plain.md): a line per round (P after a probe, with the probe's timed step and the one before
 * it; R completing a pair) and per plain step (S), appended when the generation ends; without
 * the variable nothing is written. */
START_TEST(pair_trace_writes_a_line_per_round_and_marks_the_paired_rounds)
{
    static const int32_t prompt[] = {1, 2, 3};
    char path[] = "/tmp/tokentop-pair-trace-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    enum { SPECULATIVE, PLAIN, UNSET };
    for (int c = SPECULATIVE; c <= UNSET; c++) {
        if (c == UNSET)
            ck_assert_int_eq(unsetenv("TOKENTOP_PAIR_TRACE"), 0);
        else
            ck_assert_int_eq(setenv("TOKENTOP_PAIR_TRACE", path, 1), 0);
        ck_assert_int_eq(truncate(path, 0), 0);
        engine *t, *d;
        session s;
        tt_error err;
        open_probe_session(&s, &t, &d, true);
        if (c == PLAIN)
            session_set_speculative(&s, false, NULL);
        ck_assert_int_eq(session_add_user_tokens(&s, prompt, 3, &err), TT_OK);
        ck_assert_msg(session_generate(&s, NULL, NULL, &err) == TT_OK, "%s", err.msg);
        FILE *f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        char line[512];
        int headers = 0, lines = 0, paired = 0, probed = 0, plain = 0;
        while (fgets(line, sizeof line, f)) {
            if (line[0] == '#') {
                headers++;
                continue;
            }
            char role;
            double before, probe;
            ck_assert_msg(sscanf(line, "%*s round %*d pos %*d out %*d role %c warmed %*d "
                                 "front %*f before %lf probe %lf", &role, &before, &probe) == 3,
                          "%s", line);
            lines++;
            paired += role == 'R';
            plain += role == 'S';
            if (role == 'P') {
                probed++;
                ck_assert(probe > 0 && before > 0);
            }
        }
        fclose(f);
        if (c == SPECULATIVE) {
            ck_assert_int_eq(headers, 1);
            ck_assert_int_eq(lines, (int)s.last.spec_rounds);
            ck_assert_int_ge(s.last.plain_probes, SESSION_PROBE_MIN);
            ck_assert_int_eq(paired, s.last.plain_probes);
            ck_assert_int_ge(probed, paired);
            ck_assert_int_eq(plain, 0);
        } else if (c == PLAIN) {
            ck_assert_int_eq(headers, 1);
            ck_assert_int_eq(plain, s.last.generated_tokens - 1);   /* the last one stops
                                                                        before its forward */
            ck_assert_int_eq(lines, plain);
        } else {
            ck_assert_int_eq(headers + lines, 0);
        }
        session_free(&s);
        engine_free(d);
        engine_free(t);
    }
    unlink(path);
}
END_TEST

/* The figure from injected timings: the rounds' tokens over their time, times the mean plain
 * step, so a round's time counts with the tokens it produced (a median of each pair's ratio
 * read a long round that produced many tokens as a slow one); a probe or round over 3 times
 * its kind's median (a page fault storm) is left out; the spread is the quartiles of the same
 * figure over blocks of SESSION_PROBE_BLOCK pairs. Too few pairs: no figure ("measuring"). */
START_TEST(plain_speedup_weighs_rounds_by_their_tokens_and_leaves_out_outliers)
{
    /* 12 pairs: 1 ms plain steps; rounds of 2 tokens in 1 ms and of 4 tokens in 2 ms alternate:
     * 1 ms a token against 0.5 ms, 2.0x, whatever the mix */
    session_pair p[16];
    for (int i = 0; i < 12; i++)
        p[i] = (session_pair){.probe_ms = 1.0, .round_ms = i % 2 ? 2.0 : 1.0,
                              .tokens = i % 2 ? 4 : 2};
    double lo, hi, x = session_speedup_of_pairs(p, 12, &lo, &hi);
    ck_assert_double_eq_tol(x, 2.0, 1e-12);
    ck_assert_double_eq_tol(lo, 2.0, 1e-12);   /* every block of 4 reads 2.0 */
    ck_assert_double_eq_tol(hi, 2.0, 1e-12);

    /* a probe of 40 ms and a round of 40 ms (over 3x their medians) leave no trace */
    p[3].probe_ms = 40.0;
    p[6].round_ms = 40.0;
    ck_assert_double_eq_tol(session_speedup_of_pairs(p, 12, NULL, NULL), 2.0, 1e-12);

    /* blocks moving across the turn: the first 8 pairs at 2.0x, the next 8 at 3.0x (probes of
     * 1.5 ms): the figure is the whole turn's, the spread the blocks' quartiles */
    for (int i = 0; i < 16; i++)
        p[i] = (session_pair){.probe_ms = i < 8 ? 1.0 : 1.5, .round_ms = 1.0, .tokens = 2};
    x = session_speedup_of_pairs(p, 16, &lo, &hi);
    ck_assert_double_eq_tol(x, 2.0 * 1.25, 1e-12);         /* 32 tokens / 16 ms * 1.25 ms */
    ck_assert_double_eq_tol(lo, 2.0, 1e-12);   /* blocks 2, 2, 3, 3 */
    ck_assert_double_eq_tol(hi, 3.0, 1e-12);

    /* fewer than SESSION_PROBE_MIN usable pairs: no figure */
    ck_assert_double_eq(session_speedup_of_pairs(p, SESSION_PROBE_MIN - 1, &lo, &hi), 0);
    ck_assert_double_eq(lo, 0);
    p[0].round_ms = 0;
    ck_assert_double_eq(session_speedup_of_pairs(p, SESSION_PROBE_MIN, NULL, NULL), 0);
}
END_TEST

START_TEST(rounds_after_a_pacing_hold_warm_up_and_give_the_same_tokens)
{
    engine *t = cpu(g_target, 64);
    engine *d = cpu(g_trunc, 64);
    sampler_params params = sampling_at(1.3f);
    static const int32_t prompt[] = {1, 2, 3};
    int32_t fast[32], held[32];
    event_log log = {0};
    session_stats st;
    int n = generate(t, d, 3, &params, prompt, 3, 24, fast, &log, &st);
    ck_assert_int_eq(st.warmups, 0);
    engine_truncate(t, 0);
    engine_truncate(d, 0);
    event_log slow = {.hold_us = 6000};
    ck_assert_int_eq(generate(t, d, 3, &params, prompt, 3, 24, held, &slow, &st), n);
    ck_assert_mem_eq(held, fast, (size_t)n * sizeof *held);
    /* every round after the first follows a hold (its tokens' events) and warms both engines */
    ck_assert_int_eq(st.warmups, st.spec_rounds - 1);
    engine_free(d);
    engine_free(t);
}
END_TEST

/* Two turns, an undo and a regeneration, with a plain step mixed in: the same tokens as the same
 * script run without a draft. */
static void script(engine *t, engine *d, int32_t *out, int *n_out)
{
    session_settings set;
    session_settings_default(&set);
    set.sampler.greedy = true;
    set.max_new_tokens = 12;
    session s;
    tt_error err;
    open_session(&s, t, d, 3, true, &set);
    static const int32_t a[] = {40, 41, 42}, b[] = {7, 8};
    ck_assert_int_eq(session_add_user_tokens(&s, a, 3, &err), TT_OK);
    ck_assert_int_eq(session_generate(&s, NULL, NULL, &err), TT_OK);
    ck_assert_int_eq(session_add_user_tokens(&s, b, 2, &err), TT_OK);
    ck_assert_int_eq(session_generate(&s, NULL, NULL, &err), TT_OK);
    ck_assert_int_gt(session_undo_turn(&s), 0);
    ck_assert_int_eq(session_add_user_tokens(&s, b, 1, &err), TT_OK);
    /* step-wise: a round, then plain steps (speculation off, and a forced token), then rounds */
    session_stop stop = SESSION_STOP_NONE;
    ck_assert_int_eq(session_gen_begin(&s, &err), TT_OK);
    ck_assert_int_eq(session_gen_step(&s, -1, NULL, NULL, &stop, &err), TT_OK);
    if (d)
        ck_assert_int_eq(session_set_speculative(&s, false, &err), TT_OK);
    ck_assert_int_eq(session_gen_step(&s, -1, NULL, NULL, &stop, &err), TT_OK);
    sampler_snapshot snap;
    ck_assert_int_eq(session_peek(&s, &snap, &err), TT_OK);
    if (d)
        ck_assert_int_eq(session_set_speculative(&s, true, &err), TT_OK);
    ck_assert_int_eq(session_gen_step(&s, 100, NULL, NULL, &stop, &err), TT_OK);
    while (stop == SESSION_STOP_NONE)
        ck_assert_int_eq(session_gen_step(&s, -1, NULL, NULL, &stop, &err), TT_OK);
    session_gen_end(&s, stop, NULL, NULL);
    ck_assert_int_eq(session_drop_reply(&s) > 0, 1);
    ck_assert_int_eq(session_generate(&s, NULL, NULL, &err), TT_OK);
    memcpy(out, s.tokens, (size_t)s.n_tokens * sizeof *out);
    *n_out = s.n_tokens;
    session_free(&s);
}

START_TEST(turns_undo_and_mixed_steps_match_plain_greedy)
{
    engine *t = cpu(g_target, 64);
    engine *d = cpu(g_trunc, 64);
    int32_t plain[256], spec_out[256];
    int np, ns;
    script(t, NULL, plain, &np);
    script(t, d, spec_out, &ns);
    ck_assert_int_eq(np, ns);
    for (int i = 0; i < np; i++)
        ck_assert_msg(plain[i] == spec_out[i], "token %d: %d vs %d", i, plain[i], spec_out[i]);
    engine_free(d);
    engine_free(t);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Figures */

START_TEST(predicted_speedup_matches_the_paper_formula)
{
    /* Leviathan et al.'s S = E / (g c + 1), with E of rounds without a bonus: (1 - a^g) / (1 - a)
     * (k + 1 tokens when the (k+1)-th draft is rejected, g when all pass) */
    ck_assert_double_eq_tol(spec_predicted_speedup(0.8, 4, 0.1), 0.5904 / 0.2 / 1.4, 1e-9);
    ck_assert_double_eq_tol(spec_predicted_speedup(1.0, 3, 0.0), 3.0, 1e-12);
    ck_assert_double_eq_tol(spec_predicted_speedup(0.0, 5, 0.05), 1.0 / 1.25, 1e-12);
    ck_assert_double_eq_tol(spec_expected_tokens_per_pass(0.5, 2), 1.5, 1e-12);
    /* one draft always yields one token; no draft is a plain step */
    ck_assert_double_eq_tol(spec_expected_tokens_per_pass(0.7, 1), 1.0, 1e-12);
    ck_assert_double_eq_tol(spec_expected_tokens_per_pass(0.7, 0), 1.0, 1e-12);
    /* the formula is the mean of the rounds' outcomes: sum_k P(k accepted then a rejection)
     * (k + 1) + P(all g pass) g */
    for (int g = 1; g <= 8; g++) {
        double a = 0.63, mean = 0;
        for (int k = 0; k < g; k++)
            mean += pow(a, k) * (1 - a) * (k + 1);
        mean += pow(a, g) * g;
        ck_assert_double_eq_tol(spec_expected_tokens_per_pass(a, g), mean, 1e-12);
    }
}
END_TEST

START_TEST(best_gamma_maximises_tokens_per_ms_on_synthetic_costs)
{
    /* a memory-bound target: verifying more rows is nearly free, drafts cheap -> long rounds */
    int g = spec_best_gamma(0.8, 17.0, 0.6, SPEC_TUNER_MAX);
    for (int h = 1; h <= SPEC_TUNER_MAX; h++)
        ck_assert_double_le(spec_expected_tokens_per_pass(0.8, h) / (17.0 + 0.6 * h),
                            spec_expected_tokens_per_pass(0.8, g) / (17.0 + 0.6 * g) + 1e-15);
    ck_assert_int_ge(g, 6);
    /* Leviathan et al.'s case (A = a target step, B = c A) picks the argmax of their S(g) */
    int best = 1;
    for (int h = 2; h <= SPEC_TUNER_MAX; h++)
        if (spec_predicted_speedup(0.8, h, 0.05) > spec_predicted_speedup(0.8, best, 0.05))
            best = h;
    ck_assert_int_eq(spec_best_gamma(0.8, 1.0, 0.05, SPEC_TUNER_MAX), best);
    /* a cache-resident target: each draft and verified row costs 0.6 of the fixed part -> short
     * (one draft is never worth it when anything is accepted: it yields one token) */
    ck_assert_int_eq(spec_best_gamma(0.5, 1.0, 0.6, SPEC_TUNER_MAX), 2);
    /* nothing accepted: one draft; everything accepted and free drafts: the cap */
    ck_assert_int_eq(spec_best_gamma(0.0, 1.0, 0.1, SPEC_TUNER_MAX), 1);
    ck_assert_int_eq(spec_best_gamma(1.0, 1.0, 0.0, SPEC_TUNER_MAX), SPEC_TUNER_MAX);
    ck_assert_int_eq(spec_best_gamma(2.0, 1.0, -1.0, 5), 5);    /* clamped inputs */
}
END_TEST

/* Rounds of a simulated pair: per-token acceptance alpha, a round costs a + b g ms. */
static int simulate_tuner(double alpha, double a, double b, int rounds, double *mean_gamma)
{
    spec_tuner t;
    spec_tuner_init(&t, 4);
    rng r;
    rng_seed(&r, 11);
    double sum = 0;
    for (int i = 0; i < rounds; i++) {
        spec_round R = {0};
        R.n_draft = t.gamma;
        while (R.n_accepted < R.n_draft && rng_uniform(&r) < alpha)
            R.n_accepted++;
        R.rejected = R.n_accepted < R.n_draft;
        R.draft_ms = b * R.n_draft * (0.9 + 0.2 * rng_uniform(&r));   /* +-10% noise */
        R.target_ms = a * (0.9 + 0.2 * rng_uniform(&r));
        spec_tuner_update(&t, &R);
        if (i >= rounds / 2)
            sum += t.chosen;
    }
    *mean_gamma = sum / (rounds - rounds / 2);
    return t.chosen;
}

START_TEST(tuner_finds_the_best_gamma_of_a_simulated_pair)
{
    static const struct { double alpha, a, b; } cases[] = {
        {0.5, 1.0, 0.6},      /* the committed pair's shape: short rounds */
        {0.8, 17.0, 0.6},     /* a memory-bound target: long rounds */
        {0.7, 1.0, 0.15},
        {0.95, 2.0, 0.1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int want = spec_best_gamma(cases[i].alpha, cases[i].a, cases[i].b, SPEC_TUNER_MAX);
        double mean;
        int got = simulate_tuner(cases[i].alpha, cases[i].a, cases[i].b, 400, &mean);
        /* the rate is flat near its maximum: within 1 of the truth, and it costs < 3% */
        double rate_want = spec_expected_tokens_per_pass(cases[i].alpha, want) /
                           (cases[i].a + cases[i].b * want);
        double rate_got = spec_expected_tokens_per_pass(cases[i].alpha, got) /
                          (cases[i].a + cases[i].b * got);
        ck_assert_msg(rate_got >= 0.97 * rate_want, "case %zu: chose %d (mean %.2f), best %d",
                      i, got, mean, want);
        ck_assert_msg(fabs(mean - want) <= 1.5, "case %zu: mean %.2f, best %d", i, mean, want);
    }
}
END_TEST

START_TEST(tuner_sees_a_step_in_the_verification_cost)
{
    /* The embedded pair's shape: verifying 5 rows or more (5 drafts) costs a second tile of 4.
     * A line through the rounds would miss the step; the measured means see it. */
    spec_tuner t;
    spec_tuner_init(&t, 4);
    rng r;
    rng_seed(&r, 5);
    double alpha = 0.8, best_rate = 0;
    int best = 1;
    for (int g = 1; g <= SPEC_TUNER_MAX; g++) {
        double cost = 0.55 + 0.12 * g + 0.45 * ((g + 3) / 4 - 1);
        double rate = spec_expected_tokens_per_pass(alpha, g) / cost;
        if (rate > best_rate) {
            best_rate = rate;
            best = g;
        }
    }
    ck_assert_int_eq(best, 4);
    int at_best = 0;
    for (int i = 0; i < 400; i++) {
        spec_round R = {.n_draft = t.gamma};
        while (R.n_accepted < R.n_draft && rng_uniform(&r) < alpha)
            R.n_accepted++;
        R.rejected = R.n_accepted < R.n_draft;
        R.draft_ms = 0.12 * R.n_draft;
        R.target_ms = (0.55 + 0.45 * ((R.n_draft + 3) / 4 - 1)) * (0.95 + 0.1 * rng_uniform(&r));
        spec_tuner_update(&t, &R);
        at_best += i >= 200 && t.chosen == best;
    }
    ck_assert_int_ge(at_best, 160);      /* 80% of the second half */
    ck_assert_double_gt(spec_tuner_cost(&t, 5), spec_tuner_cost(&t, 4) + 0.3);
}
END_TEST

/* A pair whose rounds cost about the same whatever gamma, in heavy noise (a loaded machine), up
 * to a cliff at 8 drafts: the fitted line comes out flat or tilted down, which alone would point
 * at SPEC_TUNER_MAX. The tuner never chooses more than one past the largest gamma it ran, so it
 * climbs one measured step at a time, meets the cliff and stays below it. */
START_TEST(tuner_climbs_one_measured_gamma_at_a_time)
{
    spec_tuner t;
    spec_tuner_init(&t, 3);
    rng r;
    rng_seed(&r, 9);
    int ran = t.gamma, above_cliff = 0;
    for (int i = 0; i < 400; i++) {
        spec_round R = {.n_draft = t.gamma};
        while (R.n_accepted < R.n_draft && rng_uniform(&r) < 0.9)
            R.n_accepted++;
        R.rejected = R.n_accepted < R.n_draft;
        R.draft_ms = 0.001 * R.n_draft;
        R.target_ms = (R.n_draft >= 8 ? 6.0 : 1.0) * (0.5 + rng_uniform(&r));
        ran = R.n_draft > ran ? R.n_draft : ran;
        spec_tuner_update(&t, &R);
        ck_assert_msg(t.chosen <= ran + 1, "round %d: chose %d, largest run %d", i, t.chosen,
                      ran);
        above_cliff += i >= 200 && t.chosen >= 8;
    }
    ck_assert_int_le(above_cliff, 20);   /* 10% of the second half */
}
END_TEST

START_TEST(tuner_starts_from_its_gamma_and_explores_both_sides)
{
    spec_tuner t;
    spec_tuner_init(&t, 99);
    ck_assert_int_eq(t.gamma, SPEC_TUNER_MAX);
    spec_tuner_init(&t, 4);
    ck_assert_int_eq(t.gamma, 4);
    spec_round R = {.n_draft = 0};
    ck_assert_int_eq(spec_tuner_update(&t, &R), 4);    /* a round without drafts: no evidence */
    ck_assert_int_eq(t.rounds, 0);
    bool up = false, down = false;
    for (int i = 0; i < 4 * SPEC_TUNER_EXPLORE; i++) {
        R = (spec_round){.n_draft = t.gamma, .n_accepted = t.gamma - 1, .rejected = true,
                         .draft_ms = 0.05 * t.gamma, .target_ms = 1.0};
        int g = spec_tuner_update(&t, &R);
        up |= g > t.chosen;
        down |= g < t.chosen;
    }
    ck_assert(up && down);
    ck_assert_double_eq_tol(t.a_ms, 1.0, 1e-6);        /* the line was fitted: 1 + 0.05 g */
    ck_assert_double_eq_tol(t.b_ms, 0.05, 1e-6);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Suite */

int main(void)
{
    Suite *s = suite_create("speculative");
    TCase *tc = tu_add_case(s, "fake engines", TU_TESTS(
            sampled_tokens_follow_the_target_distribution,
            residual_p_instead_of_p_minus_q_is_caught,
            draft_raw_softmax_instead_of_final_q_is_caught,
            target_penalties_without_drafted_history_are_caught,
            one_target_pass_per_round_and_caches_hold_the_accepted_prefix,
            lean_rounds_give_the_same_tokens_and_draws_as_full_ones,
            rows_rebuilt_after_a_lean_round_equal_a_full_rounds_snapshots,
            round_stops_at_max_tokens_context_end_and_stop_token));
    tcase_set_timeout(tc, 300);
    TCase *tm = tu_add_case(s, "cpu engines", TU_TESTS(
            greedy_output_equals_plain_greedy_for_gamma_1_to_8,
            caches_equal_a_fresh_prefill_after_every_round,
            sampled_tokens_follow_the_target_distribution_on_real_models,
            session_refuses_a_draft_with_another_vocabulary_or_a_shorter_context,
            session_reports_rounds_and_marks_every_token,
            snapshots_built_on_demand_are_the_ones_a_session_shows_every_event,
            plain_probes_time_plain_steps_in_the_turn_and_change_no_token,
            pair_trace_writes_a_line_per_round_and_marks_the_paired_rounds,
            rounds_after_a_pacing_hold_warm_up_and_give_the_same_tokens,
            turns_undo_and_mixed_steps_match_plain_greedy,
            the_same_seed_gives_the_same_tokens_whatever_gamma));
    tcase_set_timeout(tm, 300);
    tcase_add_unchecked_fixture(tm, models_setup, models_teardown);
    tu_add_case(s, "figures", TU_TESTS(
            predicted_speedup_matches_the_paper_formula,
            plain_speedup_weighs_rounds_by_their_tokens_and_leaves_out_outliers,
            best_gamma_maximises_tokens_per_ms_on_synthetic_costs,
            tuner_finds_the_best_gamma_of_a_simulated_pair,
            tuner_sees_a_step_in_the_verification_cost,
            tuner_starts_from_its_gamma_and_explores_both_sides,
            tuner_climbs_one_measured_gamma_at_a_time));
    return tu_run_suite(s);
}
