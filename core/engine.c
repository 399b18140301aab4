/* engine.c: argument checks and dispatch shared by every backend. */
#include "core/engine.h"

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
    tt_status s = e->ops->forward(e, ids, n, pos, all_logits, err);
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
