/* weight_arena.h: one engine's packed weights, carved from a few large blocks, on transparent
 * huge pages.
 *
 * A decode step streams every weight matrix once. On 4 KiB pages each stream misses the TLB
 * every 64 cache lines and the hardware prefetchers stop at every page boundary; a small model's
 * matrices (GPT-2 124M at q8: 0.6 to 2.5 MB each, Llama-3.2-1B's regrouped Q4_K parts) are each
 * too small for huge pages of their own without rounding every one up to 2 MiB. Carved one after
 * another from 2 MiB-aligned blocks (64 MiB, then each as large as all before it), they cost at
 * most the unfilled part of each block's last huge page (pages never touched cost nothing).
 *
 * When: a fresh huge page is costly to fault in on some machines (on this project's Zen 4 VM a
 * Llama-3.2-1B Q4_K_M load spent 0.4-1.7 s of system time zeroing them, against 0.4-0.6 s on
 * 4 KiB pages), which would fall on the time to first token. So an engine's arena starts on
 * 4 KiB pages and weight_arena_settle_paced moves what it has handed out onto huge pages
 * afterwards, on a background thread once the first token is out, in the pauses between the
 * steps (cpu.c); a benchmark waits for all of it (weight_arena_settle where nothing runs).
 *
 * Thread-safe (the engine's repacking thread allocates while the engine runs). In a build with
 * AddressSanitizer each allocation is a block of its own, so that a kernel reading past its
 * matrix is still caught. */
#ifndef TOKENTOP_WEIGHT_ARENA_H
#define TOKENTOP_WEIGHT_ARENA_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct weight_arena weight_arena;

/* An empty arena, or NULL when out of memory. huge_now: its memory asks for huge pages as it is
 * first touched; else it starts on 4 KiB pages (weight_arena_settle). */
weight_arena *weight_arena_new(bool huge_now);

/* bytes (> 0) of uninitialized memory, 64-byte aligned, valid until weight_arena_free; NULL when
 * out of memory. */
void *weight_arena_alloc(weight_arena *a, size_t bytes);

/* Moves the memory handed out so far onto huge pages, 2 MiB at a time (MADV_COLLAPSE: the same
 * bytes at the same addresses, readable throughout, so other threads may compute on them
 * meanwhile), and asks for huge pages for what comes later; stops early once *cancel is set
 * (NULL: never) or the kernel has no huge page to give. Returns the bytes it moved. Where the
 * kernel cannot collapse (before Linux 6.1), only asks (the kernel's background scan may move
 * them later). */
size_t weight_arena_settle(weight_arena *a, atomic_bool *cancel);

/* weight_arena_settle, calling wait(user) before each 2 MiB: it returns once the next may be moved
 * (true) or the settling is to stop (false). A collapse under threads that read the same pages
 * stalls them, so an engine's settling waits for its steps to pause (cpu.c). */
size_t weight_arena_settle_paced(weight_arena *a, bool (*wait)(void *user), void *user);

/* Bytes of blocks the arena holds (address space, not all of it resident). */
size_t weight_arena_reserved(const weight_arena *a);

/* Frees every allocation at once; NULL is safe. */
void weight_arena_free(weight_arena *a);

#endif
