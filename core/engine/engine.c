/* engine.c: argument checks and dispatch shared by every backend. */
#include "core/engine/engine.h"

#include "core/engine/attention.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void engine_options_default(engine_options *o)
{
    o->dtype = TT_F32;
    o->n_threads = 0;
    o->n_ctx = 0;
}

void engine_init(engine *e, const engine_ops *ops, const model *m, int n_ctx, tt_dtype dtype)
{
    e->ops = ops;
    e->model = m;
    e->config = &m->config;
    e->n_ctx = n_ctx;
    e->dtype = dtype;
}

/* The checks engine_forward states, against a cache of len tokens; truncates to pos first. */
static tt_status span_check(engine *e, int seq, int len, const int32_t *ids, int n, int pos,
                            tt_error *err)
{
    if (pos < 0 || pos > len)
        return tt_fail(err, TT_ERR_ARG, "forward: position %d is past the cache (%d tokens)",
                       pos, len);
    if (pos < len)
        engine_seq_truncate(e, seq, pos);
    if (n < 1)
        return tt_fail(err, TT_ERR_ARG, "forward: empty span (n=%d)", n);
    if ((long)pos + n > e->n_ctx)
        return tt_fail(err, TT_ERR_CONTEXT,
                       "forward: %d tokens at position %d do not fit the context of %d", n, pos,
                       e->n_ctx);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= e->config->V)
            return tt_fail(err, TT_ERR_ARG, "forward: token id %d at span index %d is outside "
                           "the vocabulary [0, %d)", (int)ids[i], i, e->config->V);
    return TT_OK;
}

/* The mirror of sequence 0, made at its first forward. */
static tt_status tokens_alloc(engine *e, tt_error *err)
{
    if (!e->tokens && !(e->tokens = calloc((size_t)e->n_ctx, sizeof *e->tokens)))
        return tt_fail(err, TT_ERR_NOMEM, "forward: out of memory for the tokens of %d positions",
                       e->n_ctx);
    return TT_OK;
}

tt_status engine_forward(engine *e, const int32_t *ids, int n, int pos, bool all_logits,
                         tt_error *err)
{
    tt_status s = span_check(e, 0, e->n_past, ids, n, pos, err);
    if (s == TT_OK)
        s = tokens_alloc(e, err);
    if (s != TT_OK)
        return s;
    e->lens_pos = -1;
    if (e->attention)
        engine_attention_begin(e->attention, 0, pos, n, all_logits);
    s = e->ops->forward(e, ids, n, pos, all_logits, err);
    if (s == TT_OK && e->lens) {
        e->lens_pos = pos + n - 1;
        memcpy(e->lens_logits, e->logits + (size_t)(e->n_logits - 1) * (size_t)e->config->V,
               (size_t)e->config->V * sizeof(float));
    }
    if (s != TT_OK) {
        e->ops->truncate(e, pos);
        e->n_logits = 0;
        if (e->attention)
            engine_attention_clear(e->attention);
        return s;
    }
    memcpy(e->tokens + pos, ids, (size_t)n * sizeof *ids);
    return TT_OK;
}

void engine_warm(engine *e, double ms)
{
    if (e && e->ops->warm && ms > 0)
        e->ops->warm(e, ms);
}

void engine_set_solo(engine *e, bool solo)
{
    if (e && e->ops->set_solo)
        e->ops->set_solo(e, solo);
}

void engine_truncate(engine *e, int pos)
{
    if (pos < 0)
        pos = 0;
    if (pos < e->n_past)
        e->ops->truncate(e, pos);
}

int engine_cached_prefix(const engine *e, const int32_t *tokens, int n)
{
    int lim = e->n_past < n ? e->n_past : n;
    int c = 0;
    while (c < lim && e->tokens[c] == tokens[c])
        c++;
    return c;
}

tt_status engine_sync(engine *e, const int32_t *tokens, int n, bool want_logits, int *reused,
                      int *prefilled, tt_error *err)
{
    int kept = 0, done = 0;
    tt_status st = TT_OK;
    if (n < 0 || n > e->n_ctx) {
        st = tt_fail(err, TT_ERR_CONTEXT, "sync: %d tokens do not fit the context of %d", n,
                     e->n_ctx);
        goto out;
    }
    kept = engine_cached_prefix(e, tokens, n);
    if (want_logits && n > 0 && kept == n)
        kept = n - 1;            /* the logits of the last token are wanted: compute it again */
    engine_truncate(e, kept);
    for (int pos = kept; pos < n;) {
        if (e->interrupt && *e->interrupt) {
            st = tt_fail(err, TT_ERR_INTERRUPTED, "interrupted during prefill");
            break;
        }
        int k = n - pos < ENGINE_SYNC_CHUNK ? n - pos : ENGINE_SYNC_CHUNK;
        if ((st = engine_forward(e, tokens + pos, k, pos, false, err)) != TT_OK)
            break;
        pos += k;
        done += k;
    }
out:
    if (reused)
        *reused = kept;
    if (prefilled)
        *prefilled = done;
    return st;
}

tt_status engine_set_attention(engine *e, bool on, tt_error *err)
{
    if (!on) {
        engine_attention_free(e->attention);
        e->attention = NULL;
        return TT_OK;
    }
    if (e->attention)
        return TT_OK;
    e->attention = engine_attention_create(e->config->L, e->config->NH, e->config->NKV);
    if (!e->attention)
        return tt_fail(err, TT_ERR_NOMEM, "%s: cannot allocate the attention capture",
                       e->ops->name);
    return TT_OK;
}

void engine_free(engine *e)
{
    if (!e)
        return;
    free(e->tokens);
    e->tokens = NULL;
    free(e->lens);
    e->lens = NULL;
    free(e->lens_logits);
    e->lens_logits = NULL;
    engine_attention_free(e->attention);
    e->attention = NULL;
    for (int i = 1; i < e->n_seq_tokens; i++)
        free(e->seq_tokens[i]);
    free(e->seq_tokens);
    e->seq_tokens = NULL;
    e->n_seq_tokens = 0;
    e->ops->destroy(e);
}

/* ---------------------------------------------------------------------------------------------
 * Sequences */

bool engine_has_seqs(const engine *e)
{
    return e->ops->seq != NULL;
}

tt_status engine_seq_reserve(engine *e, int n, tt_error *err)
{
    if (!e->ops->seq)
        return tt_fail(err, TT_ERR_ARG, "%s: this backend runs one sequence at a time, not %d",
                       e->ops->name, n);
    if (n < 1)
        return tt_fail(err, TT_ERR_ARG, "sequences: %d is not a positive count", n);
    /* The token mirrors first: once the backend has the slots, every one of them has its mirror.
     * Each is its own allocation, so a pointer from engine_seq_tokens survives a later reserve. */
    tt_status s = tokens_alloc(e, err);
    if (s != TT_OK)
        return s;
    if (n > e->n_seq_tokens) {
        int32_t **t = realloc(e->seq_tokens, (size_t)n * sizeof *t);
        if (!t)
            return tt_fail(err, TT_ERR_NOMEM, "sequences: out of memory for %d token mirrors", n);
        e->seq_tokens = t;
        t[0] = NULL;                   /* sequence 0's mirror is e->tokens */
        if (e->n_seq_tokens == 0)
            e->n_seq_tokens = 1;
        for (; e->n_seq_tokens < n; e->n_seq_tokens++)
            if (!(t[e->n_seq_tokens] = calloc((size_t)e->n_ctx, sizeof **t)))
                return tt_fail(err, TT_ERR_NOMEM, "sequences: out of memory for the tokens of "
                               "sequence %d (%d positions)", e->n_seq_tokens, e->n_ctx);
    }
    return e->ops->seq->reserve(e, n, err);
}

int32_t *engine_seq_tokens(engine *e, int seq)
{
    if (seq == 0)
        return e->tokens;
    return seq > 0 && seq < e->n_seq_tokens ? e->seq_tokens[seq] : NULL;
}

int engine_seq_count(const engine *e)
{
    return e->ops->seq ? e->ops->seq->count(e) : 1;
}

int engine_seq_len(const engine *e, int seq)
{
    if (seq == 0)
        return e->n_past;
    if (seq < 0 || seq >= engine_seq_count(e))
        return 0;
    return e->ops->seq->len(e, seq);
}

static tt_status seq_check(const engine *e, int seq, const char *what, tt_error *err)
{
    if (seq < 0 || seq >= engine_seq_count(e))
        return tt_fail(err, TT_ERR_ARG, "%s: sequence %d does not exist (%d reserved)", what,
                       seq, engine_seq_count(e));
    return TT_OK;
}

tt_status engine_seq_forward(engine *e, int seq, const int32_t *ids, int n, int pos,
                             bool all_logits, tt_error *err)
{
    if (seq == 0)
        return engine_forward(e, ids, n, pos, all_logits, err);
    tt_status s = seq_check(e, seq, "forward", err);
    if (s == TT_OK)
        s = span_check(e, seq, engine_seq_len(e, seq), ids, n, pos, err);
    if (s != TT_OK)
        return s;
    if (e->attention)
        engine_attention_begin(e->attention, seq, pos, n, all_logits);
    s = e->ops->seq->forward(e, seq, ids, n, pos, all_logits, err);
    if (s != TT_OK) {
        e->ops->seq->truncate(e, seq, pos);
        e->n_logits = 0;
        if (e->attention)
            engine_attention_clear(e->attention);
        return s;
    }
    memcpy(engine_seq_tokens(e, seq) + pos, ids, (size_t)n * sizeof *ids);
    return TT_OK;
}

tt_status engine_forward_batch(engine *e, const int *seqs, const int32_t *ids, int B,
                               tt_error *err)
{
    if (!e->ops->seq)
        return tt_fail(err, TT_ERR_ARG, "%s: this backend has no batched forward",
                       e->ops->name);
    if (B < 1)
        return tt_fail(err, TT_ERR_ARG, "forward_batch: empty batch (B=%d)", B);
    for (int b = 0; b < B; b++) {
        tt_status s = seq_check(e, seqs[b], "forward_batch", err);
        if (s != TT_OK)
            return s;
        int len = engine_seq_len(e, seqs[b]);
        if (len >= e->n_ctx)
            return tt_fail(err, TT_ERR_CONTEXT, "forward_batch: sequence %d is full (%d of %d "
                           "positions)", seqs[b], len, e->n_ctx);
        if (ids[b] < 0 || ids[b] >= e->config->V)
            return tt_fail(err, TT_ERR_ARG, "forward_batch: token id %d at row %d is outside the "
                           "vocabulary [0, %d)", (int)ids[b], b, e->config->V);
        for (int c = 0; c < b; c++)
            if (seqs[c] == seqs[b])
                return tt_fail(err, TT_ERR_ARG, "forward_batch: sequence %d appears twice (rows "
                               "%d and %d)", seqs[b], c, b);
    }
    tt_status s = tokens_alloc(e, err);     /* a batch on sequence 0 alone, before any reserve */
    if (s != TT_OK)
        return s;
    if (e->attention)
        engine_attention_clear(e->attention);
    if ((s = e->ops->seq->forward_batch(e, seqs, ids, B, err)) != TT_OK)
        return s;
    for (int b = 0; b < B; b++)    /* each sequence grew by its row's token */
        engine_seq_tokens(e, seqs[b])[engine_seq_len(e, seqs[b]) - 1] = ids[b];
    return TT_OK;
}

tt_status engine_seq_copy(engine *e, int dst, int src, int from, int n, tt_error *err)
{
    tt_status s = seq_check(e, dst, "copy", err);
    if (s == TT_OK)
        s = seq_check(e, src, "copy", err);
    if (s != TT_OK)
        return s;
    if (n < 0 || n > engine_seq_len(e, src))
        return tt_fail(err, TT_ERR_ARG, "copy: %d positions asked, sequence %d holds %d", n, src,
                       engine_seq_len(e, src));
    if (from < 0 || from > n || from > engine_seq_len(e, dst))
        return tt_fail(err, TT_ERR_ARG, "copy: shared prefix of %d positions, but sequence %d "
                       "holds %d", from, dst, engine_seq_len(e, dst));
    if (dst != src) {
        e->ops->seq->copy(e, dst, src, from, n);
        if (n > from)
            memcpy(engine_seq_tokens(e, dst) + from, engine_seq_tokens(e, src) + from,
                   (size_t)(n - from) * sizeof(int32_t));
    }
    return TT_OK;
}

void engine_seq_truncate(engine *e, int seq, int pos)
{
    if (seq == 0) {
        engine_truncate(e, pos);
        return;
    }
    if (seq < 0 || seq >= engine_seq_count(e))
        return;
    if (pos < 0)
        pos = 0;
    if (pos < engine_seq_len(e, seq))
        e->ops->seq->truncate(e, seq, pos);
}
