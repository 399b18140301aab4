/* engine.c: argument checks and dispatch shared by every backend. */
#include "core/engine.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void engine_options_default(engine_options *o)
{
    o->dtype = TT_F32;
    o->n_threads = 0;
    o->n_ctx = 0;
}

tt_status engine_forward(engine *e, const int32_t *ids, int n, int pos, bool all_logits,
                         tt_error *err)
{
    if (pos < 0 || pos > e->n_past) {
        int n_past = e->n_past;
        return tt_fail(err, TT_ERR_ARG, "forward: position %d is past the cache (%d tokens)",
                       pos, n_past);
    }
    if (pos < e->n_past)
        e->ops->truncate(e, pos);
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
    if (!e->tokens && !(e->tokens = calloc((size_t)e->n_ctx, sizeof *e->tokens)))
        return tt_fail(err, TT_ERR_NOMEM, "forward: out of memory for the tokens of %d positions",
                       e->n_ctx);
    tt_status s = e->ops->forward(e, ids, n, pos, all_logits, err);
    if (s != TT_OK) {
        e->ops->truncate(e, pos);
        e->n_logits = 0;
        return s;
    }
    memcpy(e->tokens + pos, ids, (size_t)n * sizeof *ids);
    return TT_OK;
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

void engine_free(engine *e)
{
    if (!e)
        return;
    free(e->tokens);
    e->tokens = NULL;
    e->ops->destroy(e);
}
