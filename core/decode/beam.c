/* beam.c: beam search (beam.h) over the engine's batched forward. */
#include "core/decode/beam.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/clock.h"

void beam_options_default(beam_options *o)
{
    memset(o, 0, sizeof *o);
    o->num_beams = 4;
    o->length_penalty = 1.0f;
    o->max_new_tokens = 32;
    o->eos = -1;
    sampler_params_default(&o->penalties);
}

tt_status beam_options_validate(const beam_options *o, int V, int n_prompt, int n_ctx,
                                tt_error *err)
{
    if (o->num_beams < 1 || o->num_beams > BEAM_MAX)
        return tt_fail(err, TT_ERR_ARG, "--num-beams: %d is outside [1, %d]", o->num_beams,
                       BEAM_MAX);
    if (2 * o->num_beams > V)
        return tt_fail(err, TT_ERR_ARG, "--num-beams: %d beams need %d candidates, the vocabulary "
                       "has %d tokens", o->num_beams, 2 * o->num_beams, V);
    if (o->num_return < 0 || o->num_return > o->num_beams)
        return tt_fail(err, TT_ERR_ARG, "--num-return: %d is outside [1, %d] (the number of "
                       "beams)", o->num_return, o->num_beams);
    if (!isfinite(o->length_penalty))
        return tt_fail(err, TT_ERR_ARG, "--length-penalty: %g is not a finite number",
                       (double)o->length_penalty);
    if (o->no_repeat_ngram < 0)
        return tt_fail(err, TT_ERR_ARG, "--no-repeat-ngram: %d is negative", o->no_repeat_ngram);
    if (o->max_new_tokens < 1)
        return tt_fail(err, TT_ERR_ARG, "--max-tokens: %d is not positive", o->max_new_tokens);
    if (o->eos < -1 || o->eos >= V)
        return tt_fail(err, TT_ERR_ARG, "beam search: end token %d is outside the vocabulary",
                       (int)o->eos);
    if (n_prompt < 1)
        return tt_fail(err, TT_ERR_ARG, "beam search: the prompt is empty");
    if ((long)n_prompt + o->max_new_tokens > n_ctx)
        return tt_fail(err, TT_ERR_CONTEXT, "--num-beams: the prompt (%d tokens) + --max-tokens "
                       "%d exceed the context of %d positions, and beams do not shift the context "
                       "(lower -n or raise --ctx)", n_prompt, o->max_new_tokens, n_ctx);
    return sampler_params_validate(&o->penalties, err);
}

/* ---------------------------------------------------------------------------------------------
 * State */

typedef struct {
    double score;
    int32_t token;
    int beam;
} beam_candidate;

/* The ranking of candidates: summed logprob, then the lower token id, then the lower beam. */
static bool candidate_better(const beam_candidate *a, const beam_candidate *b)
{
    if (a->score != b->score)
        return a->score > b->score;
    if (a->token != b->token)
        return a->token < b->token;
    return a->beam < b->beam;
}

/* Per-beam rows; a step fills `next` from `run`, then the two swap. */
typedef struct {
    int32_t *gen;                  /* (N, T) generated tokens */
    float *gsc;                    /* (N, T) their scores */
    double *logprob;               /* (N) */
    int *slot;                     /* (N) the engine sequence of each */
} beam_rows;

static bool rows_alloc(beam_rows *r, size_t N, size_t T)
{
    r->gen = malloc(N * T * sizeof *r->gen);
    r->gsc = malloc(N * T * sizeof *r->gsc);
    r->logprob = calloc(N, sizeof *r->logprob);
    r->slot = calloc(N, sizeof *r->slot);
    return r->gen && r->gsc && r->logprob && r->slot;
}

static void rows_free(beam_rows *r)
{
    free(r->gen);
    free(r->gsc);
    free(r->logprob);
    free(r->slot);
}

typedef struct {
    const beam_options *o;
    int N, V, P, T;                /* beams, vocabulary, prompt length, max new tokens */
    int32_t *hist;                 /* (P + T) prompt, then the beam being scored */
    float *z;                      /* (V) masked logits of one beam */
    double *lp;                    /* (V) their log-softmax */
    beam_candidate *cand;          /* (2N) the best so far, best first */
    int n_cand;
    /* running beams, best first */
    int n_run;
    beam_rows run, next;           /* this step's beams and the ones being chosen */
    int32_t *tok_next;             /* (N) the token each new beam appends */
    int *parent;                   /* (N) */
    int *children;                 /* (N) per old beam */
    float *first_logits;           /* (V) the prompt's */
    sampler_snapshot *snaps;       /* (N) with o->snapshots: each running beam's distribution */
    /* finished hypotheses, at most N, in insertion order */
    beam_hypothesis *fin;
    int n_fin;
    int fin_serial[BEAM_MAX];      /* insertion order of each, for ties */
    int serial;
} beam_state;

static void state_free(beam_state *b)
{
    free(b->hist);
    free(b->z);
    free(b->lp);
    free(b->cand);
    rows_free(&b->run);
    rows_free(&b->next);
    free(b->tok_next);
    free(b->parent);
    free(b->children);
    free(b->first_logits);
    free(b->snaps);
    if (b->fin)
        for (int i = 0; i < b->n_fin; i++) {
            free(b->fin[i].ids);
            free(b->fin[i].token_logprob);
        }
    free(b->fin);
}

static tt_status state_init(beam_state *b, const beam_options *o, int V, const int32_t *prompt,
                            int P, tt_error *err)
{
    memset(b, 0, sizeof *b);
    b->o = o;
    b->N = o->num_beams;
    b->V = V;
    b->P = P;
    b->T = o->max_new_tokens;
    size_t N = (size_t)b->N, T = (size_t)b->T;
    b->hist = malloc(((size_t)P + T) * sizeof *b->hist);
    b->z = malloc((size_t)V * sizeof *b->z);
    b->lp = malloc((size_t)V * sizeof *b->lp);
    b->cand = malloc(2 * N * sizeof *b->cand);
    bool rows_ok = rows_alloc(&b->run, N, T);
    rows_ok = rows_alloc(&b->next, N, T) && rows_ok;
    b->tok_next = calloc(N, sizeof *b->tok_next);
    b->parent = calloc(N, sizeof *b->parent);
    b->children = calloc(N, sizeof *b->children);
    b->first_logits = malloc((size_t)V * sizeof *b->first_logits);
    b->fin = calloc(N, sizeof *b->fin);
    b->snaps = o->snapshots ? calloc(N, sizeof *b->snaps) : NULL;
    if ((o->snapshots && !b->snaps) || !b->hist || !b->z || !b->lp || !b->cand || !rows_ok || !b->tok_next || !b->parent ||
        !b->children || !b->first_logits || !b->fin) {
        state_free(b);
        return tt_fail(err, TT_ERR_NOMEM, "beam search: out of memory for %d beams", b->N);
    }
    memcpy(b->hist, prompt, (size_t)P * sizeof *prompt);
    return TT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Scoring */

/* Masks in b->z every token that would complete an n-gram already in hist[0 .. L). */
static void ban_repeated_ngrams(beam_state *b, int L)
{
    const int n = b->o->no_repeat_ngram;
    if (n <= 0 || L < n - 1)
        return;
    const int32_t *h = b->hist;
    const int32_t *prefix = h + L - (n - 1);
    for (int i = 0; i + n <= L; i++)
        if (memcmp(h + i, prefix, (size_t)(n - 1) * sizeof *h) == 0)
            b->z[h[i + n - 1]] = -INFINITY;
}

static void candidate_offer(beam_state *b, beam_candidate c)
{
    int cap = 2 * b->N;
    if (b->n_cand == cap && !candidate_better(&c, &b->cand[cap - 1]))
        return;
    int i = b->n_cand < cap ? b->n_cand++ : cap - 1;
    while (i > 0 && candidate_better(&c, &b->cand[i - 1])) {
        b->cand[i] = b->cand[i - 1];
        i--;
    }
    b->cand[i] = c;
}

/* The final side of a beam's snapshot: the beam's token scores (b->z's softmax, lse its
 * log-sum-exp) instead of the greedy one-hot that sampler_apply left. */
static void beam_snapshot_scores(const beam_state *b, sampler_snapshot *snap, double lse)
{
    for (int i = 0; i < snap->n_top; i++) {
        sampler_entry *en = &snap->top[i];
        float z = b->z[en->id];
        en->p = en->temp_p = z == -INFINITY ? 0.0f : (float)exp((double)z - lse);
        en->cut = z == -INFINITY ? SAMPLER_CUT_BANNED : SAMPLER_CUT_NONE;
    }
    int kept = 0;
    double h = 0.0;
    for (int i = 0; i < b->V; i++) {
        if (b->z[i] == -INFINITY)
            continue;
        double lp = (double)b->z[i] - lse;
        kept++;
        h -= exp(lp) * lp;
    }
    snap->n_kept = kept;
    snap->entropy_final = (float)(h / log(2.0));
}

/* Offers beam k's candidates: its masked logits' log-softmax plus its logprob. t tokens were
 * generated so far. */
static tt_status expand_beam(beam_state *b, sampler *smp, int k, const float *logits, int t,
                             tt_error *err)
{
    const beam_options *o = b->o;
    memcpy(b->hist + b->P, b->run.gen + (size_t)k * (size_t)b->T, (size_t)t * sizeof *b->hist);
    int L = b->P + t;
    sampler_params p = o->penalties;
    p.greedy = true;               /* only the mask and the penalties are wanted: the cheapest */
    sampler_context ctx = {.history = b->hist, .n_history = L,
                           .banned = t < o->min_tokens ? o->eos : -1};
    sampler_snapshot *snap = b->snaps ? &b->snaps[k] : NULL;
    tt_status st = sampler_apply(smp, &p, logits, &ctx, snap, err);
    if (st != TT_OK)
        return st;
    memcpy(b->z, sampler_penalized_logits(smp), (size_t)b->V * sizeof *b->z);
    ban_repeated_ngrams(b, L);
    float zmax = -INFINITY;
    for (int i = 0; i < b->V; i++)
        zmax = b->z[i] > zmax ? b->z[i] : zmax;
    if (zmax == -INFINITY)
        return TT_OK;              /* every continuation of this beam is banned */
    double sum = 0.0;
    for (int i = 0; i < b->V; i++)
        if (b->z[i] != -INFINITY)
            sum += exp((double)b->z[i] - (double)zmax);
    double lse = (double)zmax + log(sum);
    if (snap)
        beam_snapshot_scores(b, snap, lse);
    double base = b->run.logprob[k];
    double worst = -INFINITY;
    int cap = 2 * b->N;
    for (int i = 0; i < b->V; i++) {
        if (b->z[i] == -INFINITY)
            continue;
        double s = base + ((double)b->z[i] - lse);
        if (b->n_cand == cap) {
            worst = b->cand[cap - 1].score;
            if (s < worst)
                continue;
        }
        candidate_offer(b, (beam_candidate){.score = s, .token = i, .beam = k});
    }
    return TT_OK;
}

static double length_score(const beam_state *b, double logprob, int len)
{
    return logprob / pow((double)len, (double)b->o->length_penalty);
}

/* Index of the worst finished hypothesis: the lowest score, and of those the latest. */
static int worst_finished(const beam_state *b)
{
    int w = 0;
    for (int i = 1; i < b->n_fin; i++)
        if (b->fin[i].score < b->fin[w].score ||
            (b->fin[i].score == b->fin[w].score && b->fin_serial[i] > b->fin_serial[w]))
            w = i;
    return w;
}

/* Adds a hypothesis: the parent's t tokens and their scores (+ last, scored last_score, when
 * last >= 0). */
static tt_status add_finished(beam_state *b, const int32_t *ids, const float *scores, int t,
                              int32_t last, float last_score, double logprob, tt_error *err)
{
    int len = t + (last >= 0);
    double score = length_score(b, logprob, len);
    int at = b->n_fin;
    if (b->n_fin == b->N) {
        at = worst_finished(b);
        if (!(score > b->fin[at].score))
            return TT_OK;
        free(b->fin[at].ids);
        free(b->fin[at].token_logprob);
    } else {
        b->n_fin++;
    }
    beam_hypothesis *h = &b->fin[at];
    h->ids = malloc((size_t)(len > 0 ? len : 1) * sizeof *h->ids);
    h->token_logprob = malloc((size_t)(len > 0 ? len : 1) * sizeof *h->token_logprob);
    if (!h->ids || !h->token_logprob) {
        free(h->ids);
        free(h->token_logprob);
        h->ids = NULL;
        h->token_logprob = NULL;
        h->n = 0;
        return tt_fail(err, TT_ERR_NOMEM, "beam search: out of memory");
    }
    memcpy(h->ids, ids, (size_t)t * sizeof *ids);
    memcpy(h->token_logprob, scores, (size_t)t * sizeof *scores);
    if (last >= 0) {
        h->ids[t] = last;
        h->token_logprob[t] = last_score;
    }
    h->n = len;
    h->logprob = logprob;
    h->score = score;
    h->eos = last >= 0;
    b->fin_serial[at] = b->serial++;
    return TT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * The search */

tt_status beam_search(engine *e, sampler *smp, const int32_t *prompt, int n_prompt,
                      const beam_options *o, beam_result *out, tt_error *err)
{
    memset(out, 0, sizeof *out);
    const int V = e->config->V;
    tt_status st = beam_options_validate(o, V, n_prompt, e->n_ctx, err);
    if (st != TT_OK)
        return st;
    if (e->n_past != n_prompt || e->n_logits < 1)
        return tt_fail(err, TT_ERR_ARG, "beam search: sequence 0 holds %d tokens, not the "
                       "prompt's %d with its logits", e->n_past, n_prompt);
    if ((st = engine_seq_reserve(e, o->num_beams + 1, err)) != TT_OK)
        return st;
    beam_state b;
    if ((st = state_init(&b, o, V, prompt, n_prompt, err)) != TT_OK)
        return st;
    memcpy(b.first_logits, engine_logits(e, e->n_logits - 1), (size_t)V * sizeof(float));
    const int N = b.N, T = b.T, P = b.P;
    double t0 = tt_now_ms();
    b.n_run = 1;                   /* the prompt, on sequence 0 */
    b.run.slot[0] = 0;
    b.run.logprob[0] = 0.0;
    bool done = false;
    int t = 0;
    while (!done) {
        /* Candidates from every running beam. */
        b.n_cand = 0;
        for (int k = 0; k < b.n_run; k++) {
            const float *lg = t == 0 ? b.first_logits : engine_logits(e, k);
            if ((st = expand_beam(&b, smp, k, lg, t, err)) != TT_OK)
                goto fail;
        }
        /* Walk them in rank order: EOS among the first N finishes a hypothesis. */
        int n_next = 0;
        for (int r = 0; r < b.n_cand && n_next < N; r++) {
            const beam_candidate *c = &b.cand[r];
            const int32_t *pg = b.run.gen + (size_t)c->beam * (size_t)T;
            const float *ps = b.run.gsc + (size_t)c->beam * (size_t)T;
            float token_score = (float)(c->score - b.run.logprob[c->beam]);
            if (o->eos >= 0 && c->token == o->eos) {
                if (r < N && (st = add_finished(&b, pg, ps, t, c->token, token_score, c->score,
                                                err)) != TT_OK)
                    goto fail;
                continue;
            }
            int32_t *ng = b.next.gen + (size_t)n_next * (size_t)T;
            float *ns = b.next.gsc + (size_t)n_next * (size_t)T;
            memcpy(ng, pg, (size_t)t * sizeof *ng);
            memcpy(ns, ps, (size_t)t * sizeof *ns);
            ng[t] = c->token;
            ns[t] = token_score;
            b.next.logprob[n_next] = c->score;
            b.tok_next[n_next] = c->token;
            b.parent[n_next] = c->beam;
            n_next++;
        }
        t++;
        if (b.n_fin == N) {
            double best = n_next > 0 ? length_score(&b, b.next.logprob[0], t) : -INFINITY;
            done = o->early_stopping || best <= b.fin[worst_finished(&b)].score;
        }
        if (n_next == 0)
            done = true;
        if (o->progress) {
            beam_progress pr = {.step = t, .n_run = n_next, .ids = b.next.gen, .stride = T,
                                .logprob = b.next.logprob, .parent = b.parent,
                                .n_prev = b.n_run, .finished = b.fin, .n_finished = b.n_fin,
                                .snaps = b.snaps};
            if (!o->progress(o->progress_user, &pr) && !done && t < T)
                out->stopped = true;
        }
        if (done || t == T || out->stopped) {
            if (!done)
                for (int k = 0; k < n_next; k++)
                    if ((st = add_finished(&b, b.next.gen + (size_t)k * (size_t)T,
                                           b.next.gsc + (size_t)k * (size_t)T, t, -1, 0.0f,
                                           b.next.logprob[k], err)) != TT_OK)
                        goto fail;
            break;
        }
        /* Sequences: the first child of a beam keeps the beam's; the other children copy its
         * generated rows into the sequences of beams that had no child. Step 1's beams all copy
         * the prompt from sequence 0, which stays as it is. */
        double c0 = tt_now_ms();
        if (t == 1) {
            for (int k = 0; k < n_next; k++) {
                b.next.slot[k] = 1 + k;
                if ((st = engine_seq_copy(e, 1 + k, 0, 0, P, err)) != TT_OK)
                    goto fail;
                out->copied_positions += P;
            }
        } else {
            bool used[BEAM_MAX + 1] = {false};
            memset(b.children, 0, (size_t)N * sizeof *b.children);
            for (int k = 0; k < n_next; k++) {
                b.next.slot[k] = b.children[b.parent[k]]++ == 0 ? b.run.slot[b.parent[k]] : -1;
                if (b.next.slot[k] >= 0)
                    used[b.next.slot[k]] = true;
            }
            int free_slot = 1;
            for (int k = 0; k < n_next; k++) {
                if (b.next.slot[k] >= 0)
                    continue;
                while (used[free_slot])
                    free_slot++;
                used[free_slot] = true;
                b.next.slot[k] = free_slot;
                int src = b.run.slot[b.parent[k]];
                if ((st = engine_seq_copy(e, b.next.slot[k], src, P, P + t - 1, err)) != TT_OK)
                    goto fail;
                out->copied_positions += t - 1;
            }
        }
        out->copy_ms += tt_now_ms() - c0;
        if ((st = engine_forward_batch(e, b.next.slot, b.tok_next, n_next, err)) != TT_OK)
            goto fail;
        out->steps++;
        /* The new beams become the running ones. */
        beam_rows ran = b.run;
        b.run = b.next;
        b.next = ran;
        b.n_run = n_next;
    }
    out->decode_ms = tt_now_ms() - t0;

    /* Best first; ties to the one finished first. */
    for (int i = 1; i < b.n_fin; i++)
        for (int j = i; j > 0; j--) {
            beam_hypothesis *x = &b.fin[j - 1], *y = &b.fin[j];
            bool swap = y->score > x->score ||
                        (y->score == x->score && b.fin_serial[j] < b.fin_serial[j - 1]);
            if (!swap)
                break;
            beam_hypothesis h = *x;
            *x = *y;
            *y = h;
            int s = b.fin_serial[j - 1];
            b.fin_serial[j - 1] = b.fin_serial[j];
            b.fin_serial[j] = s;
        }
    int want = o->num_return > 0 ? o->num_return : N;
    out->n_hyps = b.n_fin < want ? b.n_fin : want;
    out->hyps = b.fin;
    for (int i = out->n_hyps; i < b.n_fin; i++) {
        free(b.fin[i].ids);
        free(b.fin[i].token_logprob);
    }
    b.fin = NULL;
    b.n_fin = 0;
    state_free(&b);
    return TT_OK;
fail:
    state_free(&b);
    memset(out, 0, sizeof *out);
    return st;
}

void beam_result_free(beam_result *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n_hyps; i++) {
        free(r->hyps[i].ids);
        free(r->hyps[i].token_logprob);
    }
    free(r->hyps);
    memset(r, 0, sizeof *r);
}
