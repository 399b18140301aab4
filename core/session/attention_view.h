/* attention_view.h: what one step of a session attended to, for front ends (the REPL's /attn,
 * `generate --attention`): a copy of the engine's attention capture (core/engine/attention.h) for
 * the query that drew a token, in conversation indices, and its reductions (the mean over layers
 * and heads, or one layer, one head; the top attended earlier tokens).
 *
 * The step of a token drawn at conversation index i is the query at i - 1: it attends to the
 * tokens of the window up to i - 1 (the token drawn is not yet among them). */
#ifndef TOKENTOP_ATTENTION_VIEW_H
#define TOKENTOP_ATTENTION_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/session/session.h"

typedef struct {
    int L, NH, NKV;
    int first;                 /* conversation index of key 0 (the window's start) */
    int n;                     /* keys 0 .. n-1: conversation indices first .. first+n-1 */
    int at;                    /* conversation index of the token the step drew (first + n) */
    float *w;                  /* (L, NH, n) each layer's and head's softmax row */
    int32_t *tokens;           /* (n) the tokens at the keys */
    size_t cap_w, cap_tokens;
} attention_view;

void attention_view_init(attention_view *v);
void attention_view_free(attention_view *v);   /* NULL is safe */

/* Copies the row of the step that ev reports (during ev's callback: a generated token or a
 * rejected draft; the target engine's capture must be on) into v. False (v unchanged) for a flush
 * event, when the engine kept no such row, or without memory. */
bool attention_view_take_event(attention_view *v, const session *s, const session_event *ev);

/* The same for the next position's distribution after session_peek (the query at the end of the
 * conversation: the token it would draw is at n_tokens). */
bool attention_view_take_peek(attention_view *v, const session *s);

/* out[0 .. n-1] = the mean over layers (layer < 0: all) and heads (head < 0: all). False when
 * layer or head is out of range or the view is empty. */
bool attention_view_mean(const attention_view *v, int layer, int head, float *out);

/* The k most attended keys of out (attention_view_mean's result), best first, as conversation
 * indices (idx) and weights; returns how many. */
int attention_view_top(const attention_view *v, const float *out, int k, int *idx, float *w);

#endif
