/* weight_arena.h: one engine's packed weights, carved from a few large blocks on transparent
 * huge pages.
 *
 * A decode step streams every weight matrix once. On 4 KiB pages each stream misses the TLB
 * every 64 cache lines and the hardware prefetchers stop at every page boundary; a small model's
 * matrices (GPT-2 124M at q8: 0.6 to 2.5 MB each, Llama-3.2-1B's regrouped Q4_K parts) are each
 * too small for huge pages of their own without rounding every one up to 2 MiB. Carved one after
 * another from 2 MiB-aligned blocks of 64 MiB asking for huge pages, they cost at most the
 * unfilled part of each block's last huge page (pages never touched cost nothing).
 *
 * Thread-safe (the engine's repacking thread allocates while the engine runs). In a build with
 * AddressSanitizer each allocation is a block of its own, so that a kernel reading past its
 * matrix is still caught. */
#ifndef TOKENTOP_WEIGHT_ARENA_H
#define TOKENTOP_WEIGHT_ARENA_H

#include <stddef.h>

typedef struct weight_arena weight_arena;

/* An empty arena, or NULL when out of memory. */
weight_arena *weight_arena_new(void);

/* bytes (> 0) of uninitialized memory, 64-byte aligned, valid until weight_arena_free; NULL when
 * out of memory. */
void *weight_arena_alloc(weight_arena *a, size_t bytes);

/* Bytes of blocks the arena holds (address space, not all of it resident). */
size_t weight_arena_reserved(const weight_arena *a);

/* Frees every allocation at once; NULL is safe. */
void weight_arena_free(weight_arena *a);

#endif
