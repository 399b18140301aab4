/* attention_view.c: one step's attention, copied from the engine's capture (attention_view.h). */
#include "core/session/attention_view.h"

#include <stdlib.h>
#include <string.h>

#include "core/engine/attention.h"

void attention_view_init(attention_view *v)
{
    memset(v, 0, sizeof *v);
}

void attention_view_free(attention_view *v)
{
    if (!v)
        return;
    free(v->w);
    free(v->tokens);
    attention_view_init(v);
}

/* Copies the engine's row of query position q (window coordinates) into v. */
static bool take(attention_view *v, const session *s, int q)
{
    const engine *e = s->eng;
    const engine_attention *a = e->attention;
    if (!a || q < 0 || !engine_attention_slot(a, 0, q, 0, 0) || !e->tokens)
        return false;
    const int n = q + 1;
    size_t need = (size_t)a->L * (size_t)a->NH * (size_t)n;
    if (need > v->cap_w) {
        float *w = realloc(v->w, need * sizeof *w);
        if (!w)
            return false;
        v->w = w;
        v->cap_w = need;
    }
    if ((size_t)n > v->cap_tokens) {
        int32_t *t = realloc(v->tokens, (size_t)n * sizeof *t);
        if (!t)
            return false;
        v->tokens = t;
        v->cap_tokens = (size_t)n;
    }
    for (int l = 0; l < a->L; l++)
        for (int h = 0; h < a->NH; h++)
            memcpy(v->w + ((size_t)l * (size_t)a->NH + (size_t)h) * (size_t)n,
                   engine_attention_slot(a, 0, q, l, h), (size_t)n * sizeof(float));
    memcpy(v->tokens, e->tokens, (size_t)n * sizeof(int32_t));
    v->L = a->L;
    v->NH = a->NH;
    v->NKV = a->NKV;
    v->first = s->window_start;
    v->n = n;
    v->at = s->window_start + n;
    return true;
}

bool attention_view_take_event(attention_view *v, const session *s, const session_event *ev)
{
    if (ev->flush || ev->token < 0)
        return false;
    /* A generated token is appended before its event: it sits at n_tokens - 1, its query one
     * before. A rejected draft is not appended: it would have sat at n_tokens. */
    int at = ev->rejected ? s->n_tokens : s->n_tokens - 1;
    return take(v, s, at - 1 - s->window_start);
}

bool attention_view_take_peek(attention_view *v, const session *s)
{
    return take(v, s, s->n_tokens - 1 - s->window_start);
}

bool attention_view_mean(const attention_view *v, int layer, int head, float *out)
{
    if (v->n < 1 || layer >= v->L || head >= v->NH)
        return false;
    int l0 = layer < 0 ? 0 : layer, l1 = layer < 0 ? v->L : layer + 1;
    int h0 = head < 0 ? 0 : head, h1 = head < 0 ? v->NH : head + 1;
    for (int t = 0; t < v->n; t++)
        out[t] = 0.0f;
    for (int l = l0; l < l1; l++)
        for (int h = h0; h < h1; h++) {
            const float *w = v->w + ((size_t)l * (size_t)v->NH + (size_t)h) * (size_t)v->n;
            for (int t = 0; t < v->n; t++)
                out[t] += w[t];
        }
    const float inv = 1.0f / (float)((l1 - l0) * (h1 - h0));
    for (int t = 0; t < v->n; t++)
        out[t] *= inv;
    return true;
}

int attention_view_top(const attention_view *v, const float *out, int k, int *idx, float *w)
{
    int m = engine_attention_top(out, v->n, k, idx, w);
    for (int i = 0; i < m; i++)
        idx[i] += v->first;
    return m;
}
