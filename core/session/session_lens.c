/* session_lens.c: the logit lens at a position of a conversation (session_lens.h). */
#include "core/session/session_lens.h"

#include <stdlib.h>

/* The lens of the engine's last forward into out, recording the place of the token at pos, or of
 * the output's top-1 when pos is the next token. */
static tt_status layers_at(const session *s, int pos, int k, lens_layer *out, int32_t *chosen,
                           tt_error *err)
{
    const engine *e = s->eng;
    if (pos < s->n_tokens) {
        *chosen = s->tokens[pos];
        return lens_engine_layers(e, k, *chosen, out, NULL, err);
    }
    const int L = e->config->L, V = e->config->V;
    float *p = malloc((size_t)(L + 1) * (size_t)V * sizeof(float));
    if (!p)
        return tt_fail(err, TT_ERR_NOMEM, "lens: out of memory for %d distributions", L + 1);
    tt_status st = lens_engine_layers(e, k, -1, out, p, err);
    if (st == TT_OK) {
        *chosen = out[L].top_id[0];
        for (int l = 0; l <= L; l++)
            lens_layer_summarize(p + (size_t)l * (size_t)V, V, l, k, *chosen, &out[l]);
    }
    free(p);
    return st;
}

tt_status session_lens(session *s, int pos, int k, lens_layer *out, int32_t *chosen,
                       tt_error *err)
{
    const int ws = s->window_start, n = pos - ws;
    if (pos > s->n_tokens)
        return tt_fail(err, TT_ERR_ARG, "lens: token %d is past the conversation (%d tokens)",
                       pos, s->n_tokens);
    if (n < 1)
        return tt_fail(err, TT_ERR_ARG, "lens: token %d is no longer in the context window "
                       "(it starts at token %d)", pos, ws);
    engine *e = s->eng;
    const int32_t *win = s->tokens + ws;
    int wlen = s->n_tokens - ws;
    if (wlen > e->n_ctx)
        wlen = e->n_ctx;
    /* what the cache holds of the window now, and whether its logits are its last position's */
    const int held = engine_cached_prefix(e, win, wlen);
    const bool kept = e->lens != NULL;
    tt_status st = kept ? TT_OK : lens_enable(e, err);
    if (st != TT_OK)
        return st;
    st = engine_sync(e, win, n, true, NULL, NULL, err);
    if (st == TT_OK)
        st = layers_at(s, pos, k, out, chosen, err);
    if (!kept)
        lens_disable(e);
    if (held > n) {   /* back to where the cache was, its last row's logits included */
        tt_error ignored;
        tt_status back = engine_sync(e, win, held, true, NULL, NULL, st == TT_OK ? err : &ignored);
        if (st == TT_OK)
            st = back;
    }
    return st;
}
