/* speculative.c: one draft-verify round over two engines, exact by rejection sampling. */
#include "core/base/clock.h"
#include "core/decode/speculative.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/util.h"

struct spec {
    int V;
    sampler *smp;                  /* one chain object; draft and target rows run through it in
                                      turn with the same params */
    float *q;                      /* (q_rows, V) the draft's final distribution per drafted slot */
    int q_rows;
    int32_t *hist;                 /* (hist_cap) window + drafts: the penalties' history */
    size_t hist_cap;
    spec_draft draft[SPEC_GAMMA_MAX];
    sampler_snapshot draft_snap[SPEC_GAMMA_MAX];
    sampler_snapshot target_snap[SPEC_GAMMA_MAX + 1];
    int32_t out[SPEC_GAMMA_MAX + 1];
    spec_round last;
    spec_stats stats;
    spec_variant variant;          /* SPEC_EXACT except in tests */

    /* What spec_round_snapshot needs to rebuild the last round's rows (req->rebuildable): */
    bool rebuildable;
    float *dlogits;                /* (g, V) the draft's logits at each drafted position */
    int dlogits_rows;
    const float *tlogits;          /* (span, V) the target's rows, in its logits (until its next
                                      forward) */
    sampler_params params;         /* the round's settings: the front end may change them while
                                      it shows the round */
    spec_request req;              /* the round's request (key, pos, n, banned; tokens unused) */
    bool greedy;
};

/* ---------------------------------------------------------------------------------------------
 * Figures */

double spec_stats_acceptance(const spec_stats *st)
{
    return st->drafted > 0 ? (double)st->accepted / (double)st->drafted : 0.0;
}

double spec_stats_tokens_per_pass(const spec_stats *st)
{
    return st->target_passes > 0 ? (double)st->produced / (double)st->target_passes : 0.0;
}

double spec_expected_tokens_per_pass(double a, int gamma)
{
    if (gamma < 1)
        return 1.0;                  /* no draft: a plain step */
    if (a >= 1.0)
        return gamma;
    return (1.0 - pow(a, gamma)) / (1.0 - a);
}

double spec_predicted_speedup(double a, int gamma, double c)
{
    return spec_expected_tokens_per_pass(a, gamma) / (gamma * c + 1.0);
}

/* The g in [1, max] with the most expected tokens per ms, E(g) / cost[g]; ties: the smaller. */
static int best_rate_gamma(double alpha, const double *cost, int max)
{
    int best = 1;
    double best_rate = -1;
    for (int g = 1; g <= max; g++) {
        double rate = spec_expected_tokens_per_pass(alpha, g) / cost[g];
        if (rate > best_rate * (1 + 1e-12)) {
            best_rate = rate;
            best = g;
        }
    }
    return best;
}

int spec_best_gamma(double alpha, double a_ms, double b_ms, int max)
{
    double cost[SPEC_GAMMA_MAX + 1];
    max = max < 1 ? 1 : max > SPEC_GAMMA_MAX ? SPEC_GAMMA_MAX : max;
    a_ms = a_ms > 1e-6 ? a_ms : 1e-6;
    b_ms = b_ms > 1e-6 ? b_ms : 1e-6;
    for (int g = 1; g <= max; g++)
        cost[g] = a_ms + b_ms * g;
    return best_rate_gamma(alpha < 0 ? 0 : alpha > 1 ? 1 : alpha, cost, max);
}

void spec_tuner_init(spec_tuner *t, int gamma)
{
    memset(t, 0, sizeof *t);
    t->gamma = t->chosen = gamma < 1 ? 1 : gamma > SPEC_TUNER_MAX ? SPEC_TUNER_MAX : gamma;
}

double spec_tuner_cost(const spec_tuner *t, int gamma)
{
    double line = t->a_ms + t->b_ms * gamma;
    if (gamma < 1 || gamma > SPEC_TUNER_MAX)
        return line;
    return (t->cost_ms[gamma] + line) / (t->cost_w[gamma] + 1);
}

int spec_tuner_update(spec_tuner *t, const spec_round *round)
{
    if (round->n_draft < 1)
        return t->gamma;
    const double d = SPEC_TUNER_DECAY;
    double g = round->n_draft, ms = round->draft_ms + round->target_ms;
    t->acc = d * t->acc + round->n_accepted;
    t->tested = d * t->tested + round->n_accepted + (round->rejected ? 1 : 0);
    t->w = d * t->w + 1;
    t->sg = d * t->sg + g;
    t->st = d * t->st + ms;
    t->sgg = d * t->sgg + g * g;
    t->sgt = d * t->sgt + g * ms;
    t->sdraft = d * t->sdraft + round->draft_ms / g;
    for (int h = 1; h <= SPEC_TUNER_MAX; h++) {
        t->cost_ms[h] *= d;
        t->cost_w[h] *= d;
    }
    if (round->n_draft <= SPEC_TUNER_MAX) {
        t->cost_ms[round->n_draft] += ms;
        t->cost_w[round->n_draft] += 1;
    }
    t->rounds++;
    double var = t->sgg / t->w - (t->sg / t->w) * (t->sg / t->w);
    if (t->tested > 0 && var > 0.05) {
        /* least squares: B = cov(g, time) / var(g), A = mean time - B mean g */
        double b = (t->sgt / t->w - (t->sg / t->w) * (t->st / t->w)) / var;
        double a = t->st / t->w - b * t->sg / t->w;
        double mean = t->st / t->w;
        /* noise can tilt the line: a round never costs less than a small share of its mean,
         * and one more draft at least what a draft cost (its step and chain, measured) */
        double floor_b = t->sdraft / t->w > 0.01 * mean ? t->sdraft / t->w : 0.01 * mean;
        t->b_ms = b > floor_b ? b : floor_b;
        t->a_ms = a > 0.05 * mean ? a : 0.05 * mean;
        t->alpha = t->acc / t->tested;
        double cost[SPEC_TUNER_MAX + 1];
        int reach = 1;               /* one past the largest gamma measured lately */
        for (int h = 1; h <= SPEC_TUNER_MAX; h++) {
            cost[h] = spec_tuner_cost(t, h);
            if (t->cost_w[h] >= SPEC_TUNER_SEEN)
                reach = h + 1;
        }
        if (reach > SPEC_TUNER_MAX)
            reach = SPEC_TUNER_MAX;
        t->chosen = best_rate_gamma(t->alpha, cost, reach);
    }
    int next = t->chosen;
    if (t->rounds % SPEC_TUNER_EXPLORE == 0)
        next += (t->rounds / SPEC_TUNER_EXPLORE) % 2 ? 1 : -1;
    if (next < 1)
        next = 2;
    if (next > SPEC_TUNER_MAX)
        next = SPEC_TUNER_MAX - 1;
    t->gamma = next;
    return next;
}

/* ---------------------------------------------------------------------------------------------
 * Lifetime */

spec *spec_create(int V)
{
    if (V < 1)
        return NULL;
    spec *sp = calloc(1, sizeof *sp);
    if (!sp)
        return NULL;
    sp->V = V;
    sp->smp = sampler_create(V);
    if (!sp->smp) {
        free(sp);
        return NULL;
    }
    sp->last.draft = sp->draft;
    sp->last.draft_snap = sp->draft_snap;
    sp->last.target_snap = sp->target_snap;
    sp->last.out = sp->out;
    sp->last.next = -1;
    return sp;
}

void spec_free(spec *sp)
{
    if (!sp)
        return;
    sampler_free(sp->smp);
    free(sp->q);
    free(sp->dlogits);
    free(sp->hist);
    free(sp);
}

void spec_set_variant(spec *sp, spec_variant v)
{
    sp->variant = v;
}

/* The softmax of raw logits into out (V): only SPEC_WRONG_Q_RAW uses it. */
static void softmax_raw(const float *logits, int V, float *out)
{
    float mx = logits[0];
    for (int v = 1; v < V; v++)
        mx = logits[v] > mx ? logits[v] : mx;
    double sum = 0;
    for (int v = 0; v < V; v++)
        sum += exp((double)logits[v] - mx);
    for (int v = 0; v < V; v++)
        out[v] = (float)(exp((double)logits[v] - mx) / sum);
}

const spec_round *spec_last_round(const spec *sp)
{
    return &sp->last;
}

const spec_stats *spec_get_stats(const spec *sp)
{
    return &sp->stats;
}

void spec_stats_reset(spec *sp)
{
    memset(&sp->stats, 0, sizeof sp->stats);
}

/* ---------------------------------------------------------------------------------------------
 * The round */

static tt_status reserve(spec *sp, int hist, int rows, bool rebuildable)
{
    if (!UTIL_RESERVE(sp->hist, &sp->hist_cap, (size_t)hist, 1024))
        return TT_ERR_NOMEM;
    if (rows > sp->q_rows) {
        float *q = realloc(sp->q, (size_t)rows * (size_t)sp->V * sizeof *q);
        if (!q)
            return TT_ERR_NOMEM;
        sp->q = q;
        sp->q_rows = rows;
    }
    if (rebuildable && rows > sp->dlogits_rows) {
        float *d = realloc(sp->dlogits, (size_t)rows * (size_t)sp->V * sizeof *d);
        if (!d)
            return TT_ERR_NOMEM;
        sp->dlogits = d;
        sp->dlogits_rows = rows;
    }
    return TT_OK;
}

/* A token from normalise(max(0, p - q)), walking ids in ascending order; from p when the residual
 * has no mass (p == q up to rounding: then the rejection itself had probability ~0). */
static int32_t draw_residual(const float *p, const float *q, int V, double u)
{
    double mass = 0;
    for (int v = 0; v < V; v++) {
        double r = (double)p[v] - (double)q[v];
        if (r > 0)
            mass += r;
    }
    bool use_p = !(mass > 1e-12);
    if (use_p) {
        mass = 0;
        for (int v = 0; v < V; v++)
            mass += p[v];
    }
    double target = u * mass, cum = 0;
    int32_t last = -1;
    for (int v = 0; v < V; v++) {
        double r = use_p ? (double)p[v] : (double)p[v] - (double)q[v];
        if (r <= 0)
            continue;
        cum += r;
        last = v;
        if (cum > target)
            return v;
    }
    return last;   /* rounding left target at the very top */
}

/* The snapshot of a produced token that was not drawn on this distribution (an accepted draft, a
 * residual draw): forced fills the token fields; it was not a /pick and had no draw on p. */
static void mark_chosen(sampler *smp, int32_t id, sampler_snapshot *snap)
{
    sampler_force(smp, id, snap);
    snap->forced = false;
    snap->u = -1;
}

/* The uniform of one purpose at one output position (see "Random numbers" in speculative.h). */
static double key_uniform(const spec_request *req, int i, uint64_t stream)
{
    return rng_keyed_uniform(req->key, (uint64_t)(req->pos + i), stream, 0);
}

tt_status spec_run_round(spec *sp, engine *target, engine *draft, const sampler_params *params,
                         const spec_request *req, tt_error *err)
{
    const int m = req->n, V = sp->V;
    spec_round *R = &sp->last;
    R->n_draft = R->n_accepted = R->n_out = 0;
    R->rejected = false;
    R->next = -1;
    R->next_u = -1;
    R->draft_ms = R->target_ms = 0;
    R->draft_sync_ms = R->draft_forward_ms = R->draft_chain_ms = 0;
    R->verify_forward_ms = R->verify_chain_ms = 0;
    sp->rebuildable = false;
    if (target->config->V != V || draft->config->V != V)
        return tt_fail(err, TT_ERR_ARG, "speculative: vocab_size %d (target) and %d (draft) must "
                       "both be %d", target->config->V, draft->config->V, V);
    if (m < 1 || m > target->n_ctx)
        return tt_fail(err, TT_ERR_CONTEXT, "speculative: a window of %d tokens does not fit the "
                       "context of %d", m, target->n_ctx);
    if (req->max_tokens < 1)
        return tt_fail(err, TT_ERR_ARG, "speculative: max_tokens %d must be at least 1",
                       req->max_tokens);
    if (req->pos < 0)
        return tt_fail(err, TT_ERR_ARG, "speculative: position %lld must not be negative",
                       (long long)req->pos);

    int g = req->gamma < 0 ? 0 : req->gamma > SPEC_GAMMA_MAX ? SPEC_GAMMA_MAX : req->gamma;
    if (g > req->max_tokens)
        g = req->max_tokens;
    if (g > target->n_ctx - m + 1)
        g = target->n_ctx - m + 1;
    if (g > draft->n_ctx - m + 1)
        g = draft->n_ctx - m + 1;
    if (m > draft->n_ctx)
        g = 0;
    if (reserve(sp, m + g + 1, g, req->lean && req->rebuildable) != TT_OK)
        return tt_fail(err, TT_ERR_NOMEM, "speculative: out of memory for %d tokens", m + g + 1);
    int32_t *hist = sp->hist;
    memcpy(hist, req->tokens, (size_t)m * sizeof *hist);
    const bool greedy = params->greedy || params->temperature <= 0;
    const bool lean = req->lean;
    tt_status st;

    /* 1. Draft: g proposals, each drawn with its position's draft uniform. */
    double t0 = tt_now_ms(), t_fwd = 0, t_chain = 0;
    if (g > 0 && (st = engine_sync(draft, hist, m, true, NULL, NULL, err)) != TT_OK)
        return st;
    R->draft_sync_ms = tt_now_ms() - t0;
    for (int i = 0; i < g; i++) {
        double tc = tt_now_ms();
        sampler_context ctx = {.history = hist, .n_history = m + i,
                               .banned = i < req->n_banned ? req->banned : -1};
        sampler_snapshot *dsnap = lean ? NULL : &sp->draft_snap[i];
        st = sampler_apply(sp->smp, params, engine_logits(draft, draft->n_logits - 1), &ctx,
                           dsnap, err);
        if (st != TT_OK)
            return st;
        double u = key_uniform(req, i, SPEC_STREAM_DRAFT);
        int32_t d = sampler_draw(sp->smp, u, dsnap);
        if (lean && req->rebuildable)
            memcpy(sp->dlogits + (size_t)i * V, engine_logits(draft, draft->n_logits - 1),
                   (size_t)V * sizeof *sp->dlogits);
        float *q = sp->q + (size_t)i * V;
        if (sp->variant == SPEC_WRONG_Q_RAW)
            softmax_raw(engine_logits(draft, draft->n_logits - 1), V, q);
        else
            memcpy(q, sampler_probs(sp->smp), (size_t)V * sizeof *q);
        if (lean)
            sampler_snapshot_token_only(&sp->draft_snap[i], d, q[d], greedy ? -1 : u);
        hist[m + i] = d;
        sp->draft[i] = (spec_draft){.token = d, .q = q[d], .p = 0, .u = -1, .accepted = false};
        double tf = tt_now_ms();
        t_chain += tf - tc;
        if (d == req->stop_id || i == g - 1) {
            g = i + 1;
            break;
        }
        if ((st = engine_forward(draft, &d, 1, m + i, false, err)) != TT_OK)
            return st;
        t_fwd += tt_now_ms() - tf;
    }
    double t1 = tt_now_ms();
    R->draft_forward_ms = t_fwd;
    R->draft_chain_ms = t_chain;

    /* 2. Target: w[m-1] and the first g-1 drafts in one span, all rows: row i verifies d_{i+1}. */
    const int span = g > 0 ? g : 1;
    if ((st = engine_sync(target, hist, m - 1, false, NULL, NULL, err)) != TT_OK)
        return st;
    if ((st = engine_forward(target, hist + m - 1, span, m - 1, span > 1, err)) != TT_OK)
        return st;
    int row0 = target->n_logits - span;
    double t_verified = tt_now_ms();
    R->verify_forward_ms = t_verified - t1;

    /* 3. Accept/reject each draft; at the first rejection the residual draw ends the round. With
     * no draft (g 0) the one row is a plain draw from p with the residual stream's uniform. */
    int k = 0;
    int32_t next = -1;
    double next_u = -1;
    bool rejected = false;
    for (; k < span; k++) {
        sampler_snapshot *snap = &sp->target_snap[k];
        sampler_snapshot *fsnap = lean ? NULL : snap;   /* the full one, when someone shows it */
        sampler_context ctx = {.history = hist, .n_history = m + k,
                               .banned = k < req->n_banned ? req->banned : -1};
        if (sp->variant == SPEC_WRONG_HISTORY)
            ctx.n_history = m;
        st = sampler_apply(sp->smp, params, engine_logits(target, row0 + k), &ctx, fsnap, err);
        if (st != TT_OK) {
            engine_truncate(target, m - 1);  /* keep the cache a prefix of the window */
            return st;
        }
        if (g == 0) {                        /* no draft: a plain step */
            next_u = key_uniform(req, 0, SPEC_STREAM_RESIDUAL);
            next = sampler_draw(sp->smp, next_u, fsnap);
            if (lean)
                sampler_snapshot_token_only(snap, next, sampler_probs(sp->smp)[next],
                                            greedy ? -1 : next_u);
            break;
        }
        const float *p = sampler_probs(sp->smp);
        spec_draft *D = &sp->draft[k];
        D->p = p[D->token];
        int32_t t = -1;
        if (greedy) {
            t = sampler_draw(sp->smp, 0.5, fsnap);
            D->accepted = t == D->token;
        } else {
            D->u = key_uniform(req, k, SPEC_STREAM_ACCEPT);
            D->accepted = D->u * (double)D->q < (double)D->p;
        }
        if (D->accepted) {
            if (lean)
                sampler_snapshot_token_only(snap, D->token, D->p, -1);
            else if (!greedy)
                mark_chosen(sp->smp, D->token, snap);
            continue;
        }
        rejected = true;
        if (greedy) {
            next = t;
        } else {
            next_u = key_uniform(req, k, SPEC_STREAM_RESIDUAL);
            if (sp->variant == SPEC_WRONG_RESIDUAL_P)
                next = sampler_draw(sp->smp, next_u, NULL);
            else
                next = draw_residual(p, sp->q + (size_t)k * V, V, next_u);
            if (!lean)
                mark_chosen(sp->smp, next, snap);
        }
        if (lean)
            sampler_snapshot_token_only(snap, next, p[next], -1);
        break;
    }
    /* 4. Both caches keep the window plus the accepted drafts. */
    engine_truncate(target, m + k);
    engine_truncate(draft, m + k);
    double t2 = tt_now_ms();

    for (int i = 0; i < k; i++)
        sp->out[i] = hist[m + i];
    R->n_draft = g;
    R->n_accepted = k;
    R->rejected = rejected;
    R->n_out = k;
    if (next >= 0)
        sp->out[R->n_out++] = next;
    R->next = next;
    R->next_u = next_u;
    R->draft_ms = t1 - t0;
    R->target_ms = t2 - t1;
    R->verify_chain_ms = t2 - t_verified;
    if (lean && req->rebuildable) {
        sp->rebuildable = true;
        sp->tlogits = engine_logits(target, row0);
        sp->params = *params;
        sp->req = *req;
        sp->req.tokens = NULL;
        sp->greedy = greedy;
    }

    spec_stats *S = &sp->stats;
    S->rounds++;
    S->drafted += g;
    S->accepted += k;
    S->rejections += rejected;
    S->produced += R->n_out;
    S->target_passes++;
    S->draft_ms += R->draft_ms;
    S->target_ms += R->target_ms;
    S->draft_sync_ms += R->draft_sync_ms;
    S->draft_forward_ms += R->draft_forward_ms;
    S->draft_chain_ms += R->draft_chain_ms;
    S->verify_forward_ms += R->verify_forward_ms;
    S->verify_chain_ms += R->verify_chain_ms;
    return TT_OK;
}

tt_status spec_round_snapshot(spec *sp, bool draft_row, int i, sampler_snapshot *out,
                              tt_error *err)
{
    const spec_round *R = &sp->last;
    const int span = R->n_draft > 0 ? R->n_draft : 1;
    if (!sp->rebuildable || i < 0 || i >= (draft_row ? R->n_draft : span) ||
        (!draft_row && i >= R->n_out))
        return tt_fail(err, TT_ERR_ARG, "speculative: no %s row %d to rebuild in the last round",
                       draft_row ? "draft" : "target", i);
    const spec_request *req = &sp->req;
    const int m = req->n, V = sp->V;
    sampler_context ctx = {.history = sp->hist, .n_history = m + i,
                           .banned = i < req->n_banned ? req->banned : -1};
    tt_status st;
    if (draft_row) {
        if ((st = sampler_apply(sp->smp, &sp->params, sp->dlogits + (size_t)i * V, &ctx, out,
                                err)) != TT_OK)
            return st;
        sampler_draw(sp->smp, key_uniform(req, i, SPEC_STREAM_DRAFT), out);
        return TT_OK;
    }
    if (sp->variant == SPEC_WRONG_HISTORY)
        ctx.n_history = m;
    if ((st = sampler_apply(sp->smp, &sp->params, sp->tlogits + (size_t)i * V, &ctx, out,
                            err)) != TT_OK)
        return st;
    /* The same marks the round put on the full row (spec_run_round, step 3). */
    if (R->n_draft == 0)
        sampler_draw(sp->smp, R->next_u, out);
    else if (sp->greedy)
        sampler_draw(sp->smp, 0.5, out);
    else
        mark_chosen(sp->smp, R->out[i], out);
    return TT_OK;
}
