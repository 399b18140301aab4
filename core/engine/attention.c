/* attention.c: the attention capture's storage and reductions (attention.h). */
#include "core/engine/attention.h"

#include <stdlib.h>
#include <string.h>

engine_attention *engine_attention_create(int L, int NH, int NKV)
{
    if (L < 1 || NH < 1)
        return NULL;
    engine_attention *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->L = L;
    a->NH = NH;
    a->NKV = NKV > 0 ? NKV : NH;
    return a;
}

void engine_attention_free(engine_attention *a)
{
    if (!a)
        return;
    free(a->w);
    free(a);
}

void engine_attention_clear(engine_attention *a)
{
    a->n_rows = 0;
}

int engine_attention_begin(engine_attention *a, int seq, int pos, int n, bool all_logits)
{
    a->n_rows = 0;
    if (n < 1)
        return 0;
    int rows = all_logits ? (n < ENGINE_ATTENTION_ROWS ? n : ENGINE_ATTENTION_ROWS) : 1;
    int first = pos + n - rows, ld = first + rows;
    size_t need = (size_t)a->L * (size_t)rows * (size_t)a->NH * (size_t)ld;
    if (need > a->cap) {
        float *w = realloc(a->w, need * sizeof *w);
        if (!w)
            return 0;
        a->w = w;
        a->cap = need;
    }
    memset(a->w, 0, need * sizeof *a->w);
    a->seq = seq;
    a->first_pos = first;
    a->ld = ld;
    a->n_rows = rows;
    return rows;
}

float *engine_attention_slot(const engine_attention *a, int seq, int qpos, int l, int h)
{
    int r = qpos - a->first_pos;
    if (!a->n_rows || seq != a->seq || r < 0 || r >= a->n_rows || l < 0 || l >= a->L || h < 0 ||
        h >= a->NH)
        return NULL;
    return a->w + (((size_t)l * (size_t)a->n_rows + (size_t)r) * (size_t)a->NH + (size_t)h) *
                      (size_t)a->ld;
}

int engine_attention_top(const float *w, int n, int k, int *pos, float *val)
{
    int m = 0;
    if (k < 1)
        return 0;
    for (int t = 0; t < n; t++) {
        /* insertion into the sorted list of the m best so far; equal weights keep their order */
        if (m == k && !(w[t] > val[m - 1]))
            continue;
        int i = m < k ? m++ : m - 1;
        while (i > 0 && w[t] > val[i - 1]) {
            pos[i] = pos[i - 1];
            val[i] = val[i - 1];
            i--;
        }
        pos[i] = t;
        val[i] = w[t];
    }
    return m;
}
