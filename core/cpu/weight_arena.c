/* weight_arena.c: packed weights carved from large blocks on huge pages (weight_arena.h). */
#include "core/cpu/weight_arena.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

/* Linux's synchronous collapse (6.1 on; EINVAL before), which glibc's headers do not name yet;
 * 25 where the kernel's asm-generic numbers apply. */
#if !defined(MADV_COLLAPSE) && defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
#define MADV_COLLAPSE 25
#endif

#define ARENA_HUGE ((size_t)2 << 20)
#define ARENA_BLOCK ((size_t)64 << 20)
#define ARENA_ALIGN ((size_t)64)

#if defined(__SANITIZE_ADDRESS__)
#define ARENA_SHARED_BLOCKS 0      /* each allocation its own block: overreads stay visible */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_SHARED_BLOCKS 0
#endif
#endif
#ifndef ARENA_SHARED_BLOCKS
#define ARENA_SHARED_BLOCKS 1
#endif

typedef struct arena_block {
    struct arena_block *next;
    unsigned char *base;
    size_t used, size;
} arena_block;

struct weight_arena {
    pthread_mutex_t lock;
    arena_block *blocks;           /* the newest first: allocations are carved from it */
    size_t reserved;
    bool huge;                     /* new blocks ask for huge pages (huge_now, or settled) */
};

weight_arena *weight_arena_new(bool huge_now)
{
    weight_arena *a = calloc(1, sizeof *a);
    if (a) {
        pthread_mutex_init(&a->lock, NULL);
        a->huge = huge_now;
    }
    return a;
}

/* A new block of at least bytes, or NULL: at the head of a's list, where the next allocations
 * are carved, unless it is a block of its own for one allocation larger than a new block (then
 * the current block goes on serving the smaller ones). A new block is as large as all before
 * it (at least ARENA_BLOCK): few blocks, so few partly filled last huge pages. */
static arena_block *arena_grow(weight_arena *a, size_t bytes)
{
    arena_block *b = malloc(sizeof *b);
    if (!b)
        return NULL;
    const size_t grow = a->reserved > ARENA_BLOCK ? a->reserved : ARENA_BLOCK;
    size_t size = bytes, align = ARENA_ALIGN;
    if (ARENA_SHARED_BLOCKS) {
        size = (bytes + ARENA_HUGE - 1) & ~(ARENA_HUGE - 1);
        size = size < grow ? grow : size;
        align = ARENA_HUGE;
    }
    void *p = NULL;
    if (posix_memalign(&p, align, size) != 0) {
        /* no room for a block that large (a strict overcommit limit): one just for this */
        size = (bytes + align - 1) & ~(align - 1);
        if (posix_memalign(&p, align, size) != 0) {
            free(b);
            return NULL;
        }
    }
#ifdef MADV_HUGEPAGE
    if (ARENA_SHARED_BLOCKS && a->huge)
        madvise(p, size, MADV_HUGEPAGE);      /* a hint: failure only costs speed */
#endif
    *b = (arena_block){.base = p, .size = size};
    arena_block **at = a->blocks && size > grow ? &a->blocks->next : &a->blocks;
    b->next = *at;
    *at = b;
    a->reserved += size;
    return b;
}

void *weight_arena_alloc(weight_arena *a, size_t bytes)
{
    if (bytes == 0 || bytes > SIZE_MAX - ARENA_HUGE)
        return NULL;
    bytes = (bytes + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1);
    pthread_mutex_lock(&a->lock);
    arena_block *b = a->blocks;
    if (!b || b->size - b->used < bytes)
        b = arena_grow(a, bytes);
    void *p = NULL;
    if (b) {
        p = b->base + b->used;
        b->used += bytes;
    }
    pthread_mutex_unlock(&a->lock);
    return p;
}

#define ARENA_SETTLE_MAX 64        /* blocks settled in one call (doubling: far more than needed) */

static bool arena_not_cancelled(void *cancel)
{
    return !cancel || !atomic_load_explicit((atomic_bool *)cancel, memory_order_relaxed);
}

size_t weight_arena_settle(weight_arena *a, atomic_bool *cancel)
{
    return weight_arena_settle_paced(a, arena_not_cancelled, cancel);
}

size_t weight_arena_settle_paced(weight_arena *a, bool (*wait)(void *user), void *user)
{
    if (!ARENA_SHARED_BLOCKS)
        return 0;
    arena_block bl[ARENA_SETTLE_MAX];  /* copies: the list may grow meanwhile */
    int n = 0;
    pthread_mutex_lock(&a->lock);
    a->huge = true;
    for (arena_block *b = a->blocks; b && n < ARENA_SETTLE_MAX; b = b->next)
        bl[n++] = *b;
    pthread_mutex_unlock(&a->lock);
    size_t moved = 0;
    bool collapse = true;
    for (int i = n - 1; i >= 0; i--) {    /* the oldest first: the order they were filled */
#ifdef MADV_HUGEPAGE
        madvise(bl[i].base, bl[i].size, MADV_HUGEPAGE);   /* later touches, and the scan */
#endif
#ifdef MADV_COLLAPSE
        for (size_t off = 0; collapse && off + ARENA_HUGE <= bl[i].used; off += ARENA_HUGE) {
            if (!wait(user))
                return moved;
            if (madvise(bl[i].base + off, ARENA_HUGE, MADV_COLLAPSE) == 0)
                moved += ARENA_HUGE;
            else if (errno != EAGAIN)     /* ENOMEM: no huge page now; EINVAL: no collapse */
                collapse = false;
        }
#endif
    }
    (void)collapse;
    return moved;
}

size_t weight_arena_reserved(const weight_arena *a)
{
    return a ? a->reserved : 0;
}

void weight_arena_free(weight_arena *a)
{
    if (!a)
        return;
    for (arena_block *b = a->blocks, *next; b; b = next) {
        next = b->next;
        free(b->base);
        free(b);
    }
    pthread_mutex_destroy(&a->lock);
    free(a);
}
