/* engine.c: argument checks and dispatch shared by every backend. */
#include "core/engine.h"

#include <unistd.h>

void engine_options_default(engine_options *o)
{
    o->dtype = TT_F32;
    o->n_threads = 0;
    o->n_ctx = 0;
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

tt_status engine_forward(engine *e, const int32_t *ids, int n, int pos, bool all_logits,
                         tt_error *err)
{
    tt_status s = span_check(e, 0, e->n_past, ids, n, pos, err);
    if (s != TT_OK)
        return s;
    s = e->ops->forward(e, ids, n, pos, all_logits, err);
    if (s != TT_OK) {
        e->ops->truncate(e, pos);
        e->n_logits = 0;
    }
    return s;
}

void engine_truncate(engine *e, int pos)
{
    if (pos < 0)
        pos = 0;
    if (pos < e->n_past)
        e->ops->truncate(e, pos);
}

void engine_free(engine *e)
{
    if (e)
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
    return e->ops->seq->reserve(e, n, err);
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
    s = e->ops->seq->forward(e, seq, ids, n, pos, all_logits, err);
    if (s != TT_OK) {
        e->ops->seq->truncate(e, seq, pos);
        e->n_logits = 0;
    }
    return s;
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
    return e->ops->seq->forward_batch(e, seqs, ids, B, err);
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
    if (dst != src)
        e->ops->seq->copy(e, dst, src, from, n);
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
