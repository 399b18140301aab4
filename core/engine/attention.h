/* attention.h: the attention capture: the softmax rows an engine keeps when asked (the attention
 * view, `generate --attention`), and the reductions front ends show (mean over layers and heads,
 * the top attended positions).
 *
 * Off by default: an engine holds a capture only after engine_set_attention(e, true), and a
 * backend costs nothing more while e->attention is NULL. When on, every engine_forward (any
 * sequence) keeps, for each layer l and query head h, the softmax row of the query positions
 * whose logits it returns: the last position of the span, or with all_logits the last
 * ENGINE_ATTENTION_ROWS of them (a speculative round's verification rows, SPEC_GAMMA_MAX + 1:
 * the row of every token the round emits). A batched step (engine_forward_batch) keeps none.
 *
 * Which row a token's step is: the token drawn at position p comes from the logits of the query
 * at position p - 1, so its attention is row p - 1 (keys 0 .. p - 1). Positions are the
 * engine's cache positions; e->tokens (engine_seq_tokens) names the token at each. */
#ifndef TOKENTOP_ATTENTION_H
#define TOKENTOP_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>

/* Query rows one forward keeps at most (with all_logits): SPEC_GAMMA_MAX + 1. */
#define ENGINE_ATTENTION_ROWS 65

typedef struct engine_attention {
    int L, NH, NKV;            /* the model's layers, query heads and KV heads */
    int seq;                   /* the sequence the rows belong to */
    int first_pos;             /* the query position of row 0 */
    int n_rows;                /* rows kept by the last forward (0: none) */
    int ld;                    /* floats per (layer, row, head): first_pos + n_rows */
    float *w;                  /* (L, n_rows, NH, ld): layer l, row r (query first_pos + r), head
                                  h holds the softmax over keys 0 .. first_pos + r, zero after */
    size_t cap;                /* floats allocated in w */
} engine_attention;

/* A capture for a model of L layers, NH query heads and NKV KV heads; NULL without memory.
 * engine_attention_free(NULL) is safe. */
engine_attention *engine_attention_create(int L, int NH, int NKV);
void engine_attention_free(engine_attention *a);

/* For backends, before a forward of n tokens at pos on sequence seq: chooses the rows the forward
 * keeps (see the header comment; none for n < 1) and makes room for them, zeroed. Returns the
 * rows to fill (0 when memory failed: the forward goes on, the capture stays empty). */
int engine_attention_begin(engine_attention *a, int seq, int pos, int n, bool all_logits);

/* For backends: marks the capture empty (a batched step). */
void engine_attention_clear(engine_attention *a);

/* The row to fill or read for query position qpos, layer l, head h (qpos + 1 floats), or NULL
 * when the last forward kept no row of qpos (or of another sequence than seq). */
float *engine_attention_slot(const engine_attention *a, int seq, int qpos, int l, int h);

/* The KV head query head h reads (grouped-query attention: h / (NH / NKV)). */
static inline int engine_attention_kv_head(const engine_attention *a, int h)
{
    return a->NKV > 0 && a->NKV < a->NH ? h / (a->NH / a->NKV) : h;
}

/* The k largest of w[0 .. n-1], best first (ties: the earlier position first), into pos[] and
 * val[]; returns how many (min(k, n)). */
int engine_attention_top(const float *w, int n, int k, int *pos, float *val);

#endif
