/* kvcache.h: the CPU backend's per-engine attention cache: fp32 keys and values for every layer,
 * preallocated for n_ctx positions.
 *
 * Layout: keys transposed in blocks of positions, each layer as kernels.h's attention reads it
 * (kernels_key_at; ldk is n_ctx rounded up to a whole block). Values (L, NH, n_ctx, HS): the
 * weighted sum adds whole rows. Positions 0 .. n-1 are valid. Rolling back (truncate) only
 * lowers n: the stale rows past n are overwritten by the next append, never read. GPT-2's positions are absolute, so a full cache
 * cannot be shifted; the session keeps the newest part of the text and re-prefills it from
 * position 0 (truncate(0), then a forward), which this layout makes no harder than any other. */
#ifndef TOKENTOP_KVCACHE_H
#define TOKENTOP_KVCACHE_H

#include <stddef.h>

#include "core/base/status.h"

typedef struct {
    float *k;                /* (L, NH, ldk / KERNELS_KEY_BLOCK, HS, KERNELS_KEY_BLOCK) */
    float *v;                /* (L, NH, n_ctx, HS) */
    int L, NH, HS, n_ctx;
    int ldk;                 /* positions a head's keys hold (>= n_ctx, whole blocks) */
    int n;                   /* positions held: 0 .. n-1 */
} kvcache;

/* Allocates the cache (zeroed, n = 0). On failure (TT_ERR_NOMEM, or TT_ERR_ARG for a
 * non-positive size) c is left zeroed. */
tt_status kvcache_init(kvcache *c, int L, int NH, int HS, int n_ctx, tt_error *err);

/* Frees the buffers; a zeroed cache is safe. */
void kvcache_free(kvcache *c);

/* Bytes held. */
size_t kvcache_bytes(const kvcache *c);

/* Layer l's keys (kernels_key_at) / values (NH, n_ctx, HS). */
static inline float *kvcache_k(const kvcache *c, int l)
{
    return c->k + (size_t)l * (size_t)c->NH * (size_t)c->HS * (size_t)c->ldk;
}
static inline float *kvcache_v(const kvcache *c, int l)
{
    return c->v + (size_t)l * (size_t)c->NH * (size_t)c->n_ctx * (size_t)c->HS;
}

/* Writes the key and value rows of head h, layer l, position t (t < n_ctx). k and v are (HS). */
void kvcache_store(kvcache *c, int l, int h, int t, const float *k, const float *v);

/* Keeps positions 0 .. pos-1 (pos >= n is a no-op; pos < 0 is taken as 0). */
void kvcache_truncate(kvcache *c, int pos);

struct engine;

/* The cache a CPU engine (cpu_engine_create, cpu.c) holds, read-only: tests compare its contents
 * after different histories. e must be a CPU engine. */
const kvcache *cpu_engine_kvcache(const struct engine *e);

#endif
