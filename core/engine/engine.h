/* engine.h: the backend-agnostic engine interface: span-based forward over a per-engine KV cache.
 * A backend is a table of functions plus its own state (the CPU one in cpu.c, CUDA in gpu/). */
#ifndef TOKENTOP_ENGINE_H
#define TOKENTOP_ENGINE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/dtype.h"
#include "core/model/model.h"
#include "core/base/status.h"

typedef struct engine engine;
typedef struct engine_seq_ops engine_seq_ops;

typedef struct {
    const char *name;   /* "cpu", "cuda" */
    /* See engine_forward. pos <= e->n_past is guaranteed by the wrapper; ids are in range. */
    tt_status (*forward)(engine *e, const int32_t *ids, int n, int pos, bool all_logits,
                         tt_error *err);
    /* Drops cache entries at positions >= pos (pos <= n_past). */
    void (*truncate)(engine *e, int pos);
    void (*destroy)(engine *e);
    /* Several sequences (batched decoding, see the section at the end); NULL when the backend
     * has only the one cache. */
    const engine_seq_ops *seq;
    /* See engine_warm and engine_set_solo; NULL where they mean nothing (a GPU engine). */
    void (*warm)(engine *e, double ms);
    void (*set_solo)(engine *e, bool solo);
} engine_ops;

struct engine {
    const engine_ops *ops;
    const struct model *model; /* not owned; must outlive the engine (struct: valid C++ too) */
    const model_config *config; /* == &model->config */
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
    /* The logit lens (core/engine/lens.h): NULL, the default, keeps nothing; else (L + 1, C) host
     * floats, owned by the engine (lens_enable makes them, engine_free frees them), that each
     * engine_forward fills with the residual stream of its span's last position: row 0 the
     * embeddings, row l the output of block l (1 <= l <= L). lens_pos is that position, -1 while
     * the rows hold none (before the first forward, after a failed one). Batched and sequence
     * forwards leave both alone. */
    float *lens;
    int lens_pos;
    /* (V) with lens: that forward's logits at lens_pos (the last row of logits), kept so that
     * the lens' last row is the distribution the engine gave the sampler, bit for bit, whatever
     * forward ran since (a quantized engine's head multiplies 8-bit activations, which the lens'
     * fp32 head of the earlier rows does not). */
    float *lens_logits;
    /* (n_ctx) the token at each cached position: tokens[0 .. n_past-1] is what the cache holds.
     * Written by engine_forward (allocated at the first one), freed by engine_free; backends
     * never touch it. NULL before the first forward. A view engine over one of another engine's
     * sequences (core/session/samples.c) points it at that sequence's mirror (engine_seq_tokens) and is
     * never engine_free'd. */
    int32_t *tokens;
    /* (n_seq_tokens) the mirrors of sequences 1 .. n_seq_tokens-1, like tokens for sequence 0
     * (entry 0 unused): made by engine_seq_reserve, written by whatever changes a sequence's
     * cache (engine_seq_forward, engine_forward_batch, engine_seq_copy), freed by engine_free. */
    int32_t **seq_tokens;
    int n_seq_tokens;
    /* The attention capture (core/engine/attention.h), or NULL (the default: nothing kept, nothing
     * spent). Made and freed by engine_set_attention; the forward wrappers choose its rows and the
     * backend fills them. */
    struct engine_attention *attention;
};

/* For backends: fills the base of a freshly allocated (zeroed) engine: ops, the model and its
 * config, the cache capacity n_ctx and the dtype the weights are held in. */
void engine_init(engine *e, const engine_ops *ops, const struct model *m, int n_ctx,
                 tt_dtype dtype);

typedef struct {
    tt_dtype dtype;            /* precision to hold weights in */
    int n_threads;             /* CPU threads; <= 0 chooses: one per core the process may use,
                                  used while they pay (threadpool_create), 1 for a model too
                                  small to split */
    int n_ctx;                 /* KV cache positions; <= 0: engine_options_ctx's default */
} engine_options;

void engine_options_default(engine_options *o);

/* The context an engine holds when the caller does not say: the model's positions, up to this
 * many (a 128k-token model's cache would take gigabytes; --ctx raises it). */
#define ENGINE_DEFAULT_CTX_MAX 4096

/* The KV-cache positions a backend creates for o and config c: o->n_ctx when given, else
 * min(c->maxT, ENGINE_DEFAULT_CTX_MAX). Both backends use it, so they default alike. */
static inline int engine_options_ctx(const engine_options *o, const model_config *c)
{
    if (o->n_ctx > 0)
        return o->n_ctx;
    return c->maxT < ENGINE_DEFAULT_CTX_MAX ? c->maxT : ENGINE_DEFAULT_CTX_MAX;
}

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

/* Reads what a decode step reads (the weights, the cache in use) on the calling thread, over
 * and over for about ms milliseconds: for a step that follows a pause of the front end (pacing),
 * after which a small model's step is slower, its weights evicted and the memory system idle
 * (core/session/session.c: SESSION_WARM_IDLE_MS; chosen by measurement, see
 * docs/performance.md#why-the-kernels-are-as-they-are). Changes nothing a step computes;
 * a no-op on a backend without it. */
void engine_warm(engine *e, double ms);

/* While solo, the engine computes on the calling thread alone (its other threads sleep): for the
 * steps that follow a pause of the front end, where a small model gains nothing from a second
 * thread (chosen by measurement, see docs/performance.md#why-the-kernels-are-as-they-are). A no-op
 * where it means nothing. */
void engine_set_solo(engine *e, bool solo);

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

/* Turns the attention capture on (e->attention made, empty until the next forward) or off
 * (freed). TT_ERR_NOMEM when it cannot be made (then off). See core/engine/attention.h for the
 * rows each forward keeps. */
tt_status engine_set_attention(engine *e, bool on, tt_error *err);

/* Frees the token mirror, then the backend's state. NULL is safe. */
void engine_free(engine *e);

/* ---------------------------------------------------------------------------------------------
 * Sequences: batched decoding (beam search, parallel samples)
 *
 * A backend with sequences holds several KV-cache slots, numbered from 0, each with the engine's
 * n_ctx positions and its own length. Slot 0 is the cache the single-sequence calls above use
 * (engine_forward, engine_truncate, n_past), so code that knows nothing of sequences is
 * unchanged. Positions are absolute per sequence: no padding, each sequence runs at its own
 * position. A batched step appends one token to each of B sequences and reads the weights once
 * for all B rows. On the CPU, row b of a batch gives the same bits as the same token run alone on
 * its sequence (the kernels are batch-invariant: kernels.h), whatever B, the other rows, the
 * thread count or the order of the sequences; the CUDA engine (gpu/cuda_engine.cu) gives them
 * within its rounding tolerance (cuBLAS may sum B rows in another order than one). */

struct engine_seq_ops {
    /* Makes slots 0 .. n-1 exist (new ones empty); n >= 1. */
    tt_status (*reserve)(engine *e, int n, tt_error *err);
    int (*count)(const engine *e);
    int (*len)(const engine *e, int seq);
    /* engine_forward on slot seq (checked by the wrapper, like forward). */
    tt_status (*forward)(engine *e, int seq, const int32_t *ids, int n, int pos, bool all_logits,
                         tt_error *err);
    /* One token per sequence, appended at its length; logits row b for seqs[b]. */
    tt_status (*forward_batch)(engine *e, const int *seqs, const int32_t *ids, int B,
                               tt_error *err);
    /* Positions from .. n-1 of src into dst; dst's length becomes n. */
    void (*copy)(engine *e, int dst, int src, int from, int n);
    void (*truncate)(engine *e, int seq, int pos);
};

/* True when the backend runs several sequences (the CPU and CUDA ones do; see engine_seq_ops). */
bool engine_has_seqs(const engine *e);

/* Makes sequences 0 .. n-1 exist; new ones are empty and hold n_ctx positions each (memory_bytes
 * grows by their cache). Fails with TT_ERR_ARG when the backend has no sequences or n < 1, with
 * TT_ERR_NOMEM (nothing changed) when the memory is not there. */
tt_status engine_seq_reserve(engine *e, int n, tt_error *err);

/* The engine's mirror of sequence seq (n_ctx entries; positions 0 .. engine_seq_len(e, seq)-1
 * are the tokens its cache holds): e->tokens for sequence 0, NULL for a sequence that
 * engine_seq_reserve did not make. The pointer stays valid until engine_free. */
int32_t *engine_seq_tokens(engine *e, int seq);

/* Sequences that exist (1 for a backend without them). */
int engine_seq_count(const engine *e);

/* Tokens in sequence seq's cache (0 for a sequence that does not exist). */
int engine_seq_len(const engine *e, int seq);

/* engine_forward on sequence seq (same contract; seq 0 is engine_forward itself). */
tt_status engine_seq_forward(engine *e, int seq, const int32_t *ids, int n, int pos,
                             bool all_logits, tt_error *err);

/* Appends ids[b] to sequence seqs[b] at position engine_seq_len(seqs[b]) for b in [0, B) in one
 * step, and leaves logits row b (engine_logits(e, b)) for it. The seqs must exist and be
 * distinct, every sequence must have room (TT_ERR_CONTEXT otherwise; an empty one starts at
 * position 0), ids must be in the vocabulary; nothing runs when a check fails. On any failure
 * every sequence keeps its previous length. */
tt_status engine_forward_batch(engine *e, const int *seqs, const int32_t *ids, int B,
                               tt_error *err);

/* Makes sequence dst hold what src holds at positions 0 .. n-1 (cache rows and token mirror) by
 * copying positions from .. n-1: the caller states that dst already holds src's rows 0 .. from-1
 * (a shared prefix, e.g. the prompt both started from); from = 0 copies everything. Fails with TT_ERR_ARG (nothing changed)
 * for a sequence that does not exist, n > len(src) or from > len(dst). dst == src is a no-op. */
tt_status engine_seq_copy(engine *e, int dst, int src, int from, int n, tt_error *err);

/* Rolls sequence seq back to pos tokens (pos >= its length is a no-op). */
void engine_seq_truncate(engine *e, int seq, int pos);

/* The CPU backend (cpu.c). */
tt_status cpu_engine_create(const model *m, const engine_options *o, engine **out, tt_error *err);

/* Waits until every matrix the CPU engine e repacks after its first step (a GGUF Q8_0 file held
 * in q8: cpu.c, "Deferred repacking") is repacked and in use, and its weights are on huge pages
 * (weight_arena_settle), doing it now if no step has run; then every step runs at the settled
 * speed (bench measures that). Logits are the same bits before and after. Returns how many
 * matrices were still waiting (0 for another backend, or an engine with nothing deferred or all
 * done). */
int cpu_engine_finish_load(engine *e);

/* Starts now, on the CPU engine e's own thread, what it otherwise starts after its first step
 * (cpu.c: the Q8_0 repack, the copies onto huge pages, the settling onto huge pages), for a caller
 * about to wait for a person (the REPL at its prompt); a no-op for another backend or once
 * started. */
void cpu_engine_load_in_background(engine *e);

/* Before the first step of the CPU engine e (tests): copies the next rows (whole runs; all with
 * INT64_MAX) of the parts it reads where a GGUF file stores them onto huge pages, which it does
 * on its own thread after the first step (cpu.c, "Copies onto huge pages"), on the caller.
 * Returns how many parts are not completely copied yet, or -1 where e copies none (another
 * backend, weights packed at creation, no huge pages) or its thread has started. */
int cpu_engine_copy_ahead(engine *e, int64_t rows);

/* The CPU threads e uses and why, for people (threadpool_describe); for another backend, says
 * that it does not use them. Returns out. */
const char *cpu_engine_describe_threads(const engine *e, char *out, size_t cap);

/* The jobs e's CPU threads have run so far with the workers (*parallel) and on the calling thread
 * alone (*serial: one thread, or an adaptive pool's back-off); false, both 0, for another
 * backend. */
bool cpu_engine_thread_jobs(const engine *e, unsigned long long *parallel,
                            unsigned long long *serial);

#endif
