/* engine.h: the backend-agnostic engine interface: span-based forward over a per-engine KV cache.
 * A backend is a table of functions plus its own state (the CPU one in cpu.c, CUDA in gpu/). */
#ifndef TOKENTOP_ENGINE_H
#define TOKENTOP_ENGINE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/model.h"
#include "core/status.h"

typedef struct engine engine;

typedef struct {
    const char *name;   /* "cpu", "cuda" */
    /* See engine_forward. pos <= e->n_past is guaranteed by the wrapper; ids are in range. */
    tt_status (*forward)(engine *e, const int32_t *ids, int n, int pos, bool all_logits,
                         tt_error *err);
    /* Drops cache entries at positions >= pos (pos <= n_past). */
    void (*truncate)(engine *e, int pos);
    void (*destroy)(engine *e);
} engine_ops;

struct engine {
    const engine_ops *ops;
    const struct model *model; /* not owned; must outlive the engine (struct: valid C++ too) */
    const gpt2_config *config; /* == &model->config */
    int n_past;                /* tokens in the KV cache (positions 0 .. n_past-1) */
    int n_ctx;                 /* cache capacity (<= config->maxT) */
    float *logits;             /* (n_logits, V) host memory, owned by the engine */
    int n_logits;              /* rows valid in logits after the last forward */
    tt_dtype dtype;            /* precision the weights are held in */
    char description[160];     /* e.g. "cpu: 2 threads, AVX-512, bf16 weights" */
    int threads;               /* CPU threads the engine was created with; 0 for a GPU engine */
    size_t weight_bytes;       /* bytes of weights one decode step reads */
    size_t memory_bytes;       /* weights + cache + activations this engine holds */
    /* Optional, set by the caller: while it points at a nonzero flag, a forward of more than
     * one token may stop between layers and fail with TT_ERR_INTERRUPTED; the cache then holds
     * only the positions before the span. A long prefill of a large model on the CPU so stops
     * within one layer of Ctrl-C. One-token forwards always finish. */
    const volatile sig_atomic_t *interrupt;
    /* (n_ctx) the token at each cached position: tokens[0 .. n_past-1] is what the cache holds.
     * Written by engine_forward (allocated at the first one), freed by engine_free; backends
     * never touch it. NULL before the first forward. */
    int32_t *tokens;
};

typedef struct {
    tt_dtype dtype;            /* precision to hold weights in */
    int n_threads;             /* CPU threads; <= 0 chooses: one per core the process may use,
                                  used while they pay (threadpool_create), 1 for a model too
                                  small to split */
    int n_ctx;                 /* KV cache positions; <= 0 means the model's maxT */
} engine_options;

void engine_options_default(engine_options *o);

/* Appends the n tokens ids[0..n-1] at positions pos .. pos+n-1 and computes logits for the last
 * position, or for all n when all_logits. If pos < n_past the cache is first truncated to pos
 * (prefix reuse, rejected drafts). Fails without computing when n < 1, pos > n_past,
 * pos + n > n_ctx (TT_ERR_CONTEXT) or an id is outside [0, V); on any failure the cache holds
 * positions 0 .. pos-1 only. Logits stay valid until the next call. */
tt_status engine_forward(engine *e, const int32_t *ids, int n, int pos, bool all_logits,
                         tt_error *err);

/* Logits row i (0 <= i < e->n_logits) of the last forward: V floats. */
static inline const float *engine_logits(const engine *e, int i)
{
    return e->logits + (size_t)i * (size_t)e->config->V;
}

/* Rolls the cache back to pos tokens (pos >= n_past is a no-op). */
void engine_truncate(engine *e, int pos);

/* Positions engine_sync forwards per call: a long prefill so reaches the interrupt check between
 * spans (and the CPU engine also sees Ctrl-C between layers). */
#define ENGINE_SYNC_CHUNK 256

/* Number of leading positions the cache shares with tokens[0 .. n-1] (at most min(n, n_past)). */
int engine_cached_prefix(const engine *e, const int32_t *tokens, int n);

/* Brings the cache to hold tokens[0 .. n-1] (0 <= n <= n_ctx, else TT_ERR_CONTEXT): keeps the
 * longest common prefix, truncates the rest and forwards the remainder in spans of
 * ENGINE_SYNC_CHUNK. With want_logits (n >= 1) at least the last token is computed, so
 * engine_logits(e, e->n_logits - 1) is the row of position n-1. While e->interrupt points at a
 * nonzero flag it stops before the next span with TT_ERR_INTERRUPTED. reused and prefilled (either
 * may be NULL) receive the positions kept and forwarded, also on failure; on failure the cache
 * holds a prefix of tokens (what was forwarded before the error). */
tt_status engine_sync(engine *e, const int32_t *tokens, int n, bool want_logits, int *reused,
                      int *prefilled, tt_error *err);

/* Frees the token mirror, then the backend's state. NULL is safe. */
void engine_free(engine *e);

/* The CPU backend (cpu.c). */
tt_status cpu_engine_create(const model *m, const engine_options *o, engine **out, tt_error *err);

/* The CPU threads e uses and why, for people (threadpool_describe); for another backend, says
 * that it does not use them. Returns out. */
const char *cpu_engine_describe_threads(const engine *e, char *out, size_t cap);

#endif
