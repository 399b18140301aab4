/* samples.c: parallel samples (samples.h): sessions over views of one engine's sequences, their
 * one-token forwards gathered into batched steps. */
#include "core/session/samples.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/clock.h"

/* ---------------------------------------------------------------------------------------------
 * The view: an engine whose cache is sequence `seq` of `under` */

typedef struct {
    engine base;                   /* first: an engine * is a samples_view * */
    engine *under;
    int seq;
    bool deferring;                /* one-token forwards wait for samples_flush */
    bool pending;                  /* a token waits: appended at position base.n_past - 1 */
    int32_t pending_id;
    int logits_rows;               /* rows allocated in base.logits */
} samples_view;

static tt_status view_reserve_logits(samples_view *v, int rows, tt_error *err)
{
    if (rows <= v->logits_rows)
        return TT_OK;
    float *p = realloc(v->base.logits, (size_t)rows * (size_t)v->base.config->V * sizeof *p);
    if (!p)
        return tt_fail(err, TT_ERR_NOMEM, "samples: out of memory for %d rows of logits", rows);
    v->base.logits = p;
    v->logits_rows = rows;
    return TT_OK;
}

static tt_status view_forward(engine *e, const int32_t *ids, int n, int pos, bool all_logits,
                              tt_error *err)
{
    samples_view *v = (samples_view *)e;
    e->n_logits = 0;
    if (n == 1 && !all_logits && v->deferring) {
        v->pending = true;
        v->pending_id = ids[0];
        e->n_past = pos + 1;
        return TT_OK;
    }
    v->under->interrupt = e->interrupt;
    tt_status st = engine_seq_forward(v->under, v->seq, ids, n, pos, all_logits, err);
    v->under->interrupt = NULL;
    if (st == TT_OK)
        st = view_reserve_logits(v, v->under->n_logits, err);
    if (st != TT_OK)
        return st;
    memcpy(e->logits, v->under->logits,
           (size_t)v->under->n_logits * (size_t)e->config->V * sizeof *e->logits);
    e->n_logits = v->under->n_logits;
    e->n_past = pos + n;
    return TT_OK;
}

static void view_truncate(engine *e, int pos)
{
    samples_view *v = (samples_view *)e;
    v->pending = false;            /* pos < n_past: the pending token is dropped too */
    engine_seq_truncate(v->under, v->seq, pos);
    e->n_past = pos < 0 ? 0 : pos;
}

static void view_destroy(engine *e)
{
    (void)e;                       /* views live in the driver's array */
}

static const engine_ops view_ops = {
    .name = "samples",
    .forward = view_forward,
    .truncate = view_truncate,
    .destroy = view_destroy,
};

/* One batched step for every view with a token waiting; their logits become row 0. */
static tt_status samples_flush(engine *e, samples_view *views, int n, int *seqs, int32_t *ids,
                               int *who, int *steps, tt_error *err)
{
    int B = 0;
    for (int i = 0; i < n; i++)
        if (views[i].pending) {
            seqs[B] = views[i].seq;
            ids[B] = views[i].pending_id;
            who[B++] = i;
        }
    if (B == 0)
        return TT_OK;
    tt_status st = engine_forward_batch(e, seqs, ids, B, err);
    if (st != TT_OK)
        return st;
    (*steps)++;
    const size_t V = (size_t)e->config->V;
    for (int b = 0; b < B; b++) {
        samples_view *v = &views[who[b]];
        v->pending = false;
        memcpy(v->base.logits, engine_logits(e, b), V * sizeof(float));
        v->base.n_logits = 1;
    }
    return TT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * The driver */

typedef struct {
    samples_event_fn fn;
    void *user;
    int sample;
} sample_sink;

static bool sample_event(void *user, const session_event *ev)
{
    const sample_sink *k = user;
    return k->fn ? k->fn(k->user, k->sample, ev) : true;
}

/* The prompt: text (tokenized by each session) when ids is NULL, else the ids. */
static tt_status samples_run(engine *e, const model *m, const tokenizer *tok,
                             const session_settings *set, const session_settings *per,
                             const session_chat *chat, const char *text, size_t len, const int32_t *prompt_ids,
                             int n_prompt_ids, int n, samples_event_fn fn, void *user,
                             volatile sig_atomic_t *interrupt, samples_result *out, tt_error *err)
{
    memset(out, 0, sizeof *out);
    if (n < 1 || n > SAMPLES_MAX)
        return tt_fail(err, TT_ERR_ARG, "--samples: %d is outside [1, %d]", n, SAMPLES_MAX);
    tt_status st = engine_seq_reserve(e, n + 1, err);
    if (st != TT_OK)
        return st;
    samples_view *views = calloc((size_t)n, sizeof *views);
    session *ss = calloc((size_t)n, sizeof *ss);
    sample_sink *sinks = calloc((size_t)n, sizeof *sinks);
    bool *active = calloc((size_t)n, sizeof *active);
    int *seqs = calloc((size_t)n, sizeof *seqs), *who = calloc((size_t)n, sizeof *who);
    int32_t *ids = calloc((size_t)n, sizeof *ids);
    out->stats = calloc((size_t)n, sizeof *out->stats);
    out->gen = calloc((size_t)n, sizeof *out->gen);
    out->gen_info = calloc((size_t)n, sizeof *out->gen_info);
    out->n_gen = calloc((size_t)n, sizeof *out->n_gen);
    int *n_prompt = calloc((size_t)n, sizeof *n_prompt);
    int n_init = 0;
    if (!views || !ss || !sinks || !active || !seqs || !who || !ids || !out->stats || !out->gen ||
        !out->gen_info || !out->n_gen || !n_prompt) {
        st = tt_fail(err, TT_ERR_NOMEM, "samples: out of memory for %d samples", n);
        goto out;
    }
    out->n = n;
    for (int i = 0; i < n; i++) {
        samples_view *v = &views[i];
        v->base.ops = &view_ops;
        v->base.model = e->model;
        v->base.config = e->config;
        v->base.n_ctx = e->n_ctx;
        v->base.dtype = e->dtype;
        v->base.weight_bytes = e->weight_bytes;
        memcpy(v->base.description, e->description, sizeof v->base.description);
        v->under = e;
        v->seq = 1 + i;
        /* The view's token mirror is the engine's mirror of its sequence, which the engine keeps
         * in step with every change to the sequence's cache (engine_seq_copy included); the
         * view's own forwards write the same ids at the same positions. */
        v->base.tokens = engine_seq_tokens(e, v->seq);
        if ((st = view_reserve_logits(v, 1, err)) != TT_OK)
            goto out;
        session_settings si = per ? per[i] : *set;
        if (!per)
            si.seed = set->seed + (uint64_t)i;
        if ((st = session_init(&ss[i], m, tok, &v->base, &si, err)) != TT_OK)
            goto out;
        n_init++;
        if (chat && (st = session_set_chat(&ss[i], chat, err)) != TT_OK)
            goto out;
        ss[i].interrupt = interrupt;
        sinks[i] = (sample_sink){.fn = fn, .user = user, .sample = i};
        st = prompt_ids ? session_add_user_tokens(&ss[i], prompt_ids, n_prompt_ids, err)
                        : session_add_user_text(&ss[i], text, len, err);
        if (st != TT_OK)
            goto out;
    }

    /* A prompt given as ids may continue what sequence 0 holds (the REPL's conversation): sample
     * 0 starts from those rows instead of computing them again (batch invariance: the same
     * bits as a prefill of its own). */
    if (prompt_ids) {
        const int32_t *held = engine_seq_tokens(e, 0);
        int k = 0, held_n = engine_seq_len(e, 0);
        while (k < held_n && k < n_prompt_ids && held[k] == prompt_ids[k])
            k++;
        if (k > 0) {
            if ((st = engine_seq_copy(e, views[0].seq, 0, 0, k, err)) != TT_OK)
                goto out;
            views[0].base.n_past = k;
        }
    }

    /* The prompt: prefilled by sample 0, copied to the others, whose sessions then find it in
     * their cache and recompute only its last token (one batched row each). */
    for (int i = 0; i < n; i++) {
        session *s = &ss[i];
        if (i > 0 && views[0].base.n_past > 0) {
            int w = views[0].base.n_past;
            if ((st = engine_seq_copy(e, views[i].seq, views[0].seq, 0, w, err)) != TT_OK)
                goto out;
            views[i].base.n_past = w;
        }
        views[i].deferring = i > 0;
        tt_error serr = {0};
        active[i] = session_gen_begin(s, &serr) == TT_OK;
        n_prompt[i] = s->n_tokens;   /* after the beginning-of-text token an empty one gets */
        if (!active[i])
            session_gen_end(s, s->last.stop, sample_event, &sinks[i]);
        views[i].deferring = true;
    }

    double t0 = tt_now_ms();
    for (;;) {
        if ((st = samples_flush(e, views, n, seqs, ids, who, &out->steps, err)) != TT_OK)
            goto out;
        int running = 0;
        for (int i = 0; i < n; i++) {
            if (!active[i])
                continue;
            session_stop stop = SESSION_STOP_NONE;
            tt_error serr = {0};
            tt_status ss_st = session_gen_step(&ss[i], -1, sample_event, &sinks[i], &stop, &serr);
            if (ss_st != TT_OK && stop == SESSION_STOP_NONE)
                stop = SESSION_STOP_ERROR;
            if (stop != SESSION_STOP_NONE) {
                session_gen_end(&ss[i], stop, sample_event, &sinks[i]);
                if (ss_st != TT_OK)
                    ss[i].last.error = serr;
                active[i] = false;
            } else {
                running++;
            }
        }
        if (running == 0)
            break;
    }
    out->decode_ms = tt_now_ms() - t0;
    for (int i = 0; i < n; i++) {
        out->stats[i] = ss[i].last;
        out->tokens += ss[i].last.generated_tokens;
        int g = ss[i].n_tokens - n_prompt[i];
        out->gen[i] = malloc((size_t)(g > 0 ? g : 1) * sizeof **out->gen);
        out->gen_info[i] = malloc((size_t)(g > 0 ? g : 1) * sizeof **out->gen_info);
        if (!out->gen[i] || !out->gen_info[i]) {
            st = tt_fail(err, TT_ERR_NOMEM, "samples: out of memory for the samples' tokens");
            goto out;
        }
        if (g > 0) {
            memcpy(out->gen[i], ss[i].tokens + n_prompt[i], (size_t)g * sizeof **out->gen);
            memcpy(out->gen_info[i], ss[i].info + n_prompt[i], (size_t)g * sizeof **out->gen_info);
        }
        out->n_gen[i] = g;
    }
    st = TT_OK;
out:
    for (int i = 0; i < n_init; i++)
        session_free(&ss[i]);
    if (views)
        for (int i = 0; i < n; i++)
            free(views[i].base.logits);
    free(views);
    free(ss);
    free(sinks);
    free(active);
    free(seqs);
    free(who);
    free(ids);
    free(n_prompt);
    if (st != TT_OK)
        samples_result_free(out);
    return st;
}

tt_status samples_generate(engine *e, const model *m, const tokenizer *tok,
                           const session_settings *set, const session_chat *chat,
                           const char *text, size_t len, int n,
                           samples_event_fn fn, void *user, volatile sig_atomic_t *interrupt,
                           samples_result *out, tt_error *err)
{
    return samples_run(e, m, tok, set, NULL, chat, text, len, NULL, 0, n, fn, user, interrupt,
                       out, err);
}

tt_status samples_generate_ids(engine *e, const model *m, const tokenizer *tok,
                               const session_settings *set, const session_settings *per,
                               const session_chat *chat,
                               const int32_t *ids, int n_ids, int n, samples_event_fn fn,
                               void *user, volatile sig_atomic_t *interrupt, samples_result *out,
                               tt_error *err)
{
    return samples_run(e, m, tok, set, per, chat, NULL, 0, ids, n_ids, n, fn, user, interrupt,
                       out, err);
}

void samples_result_free(samples_result *r)
{
    if (!r)
        return;
    for (int i = 0; r->gen && i < r->n; i++)
        free(r->gen[i]);
    for (int i = 0; r->gen_info && i < r->n; i++)
        free(r->gen_info[i]);
    free(r->gen);
    free(r->gen_info);
    free(r->n_gen);
    free(r->stats);
    memset(r, 0, sizeof *r);
}
