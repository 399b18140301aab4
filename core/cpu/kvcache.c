/* kvcache.c: allocation and bookkeeping of the CPU attention cache. */
#include "core/cpu/kvcache.h"

#include "core/cpu/kernels.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* The largest array kv_alloc puts on huge pages: each head's run of positions is shorter than
 * 2 MiB, so the first positions written touch every huge page and the whole array is resident
 * at once. For GPT-2 124M's 1,024 positions (36 MiB an array) that costs little; a Llama-3.2-1B
 * cache of 4,096 positions (128 MiB an array) stays on 4 KiB pages, resident as the context
 * grows (on huge pages it took a GGUF Q8_0 run's peak RSS from 1,399 to 1,687 MB for 17 tokens,
 * 1.14x llama.cpp's). */
#define KV_HUGE_MAX ((size_t)64 << 20)

/* n zeroed bytes; an array of several MiB, up to KV_HUGE_MAX, asks for transparent huge pages
 * over its 2 MiB-aligned interior. Attention streams each head's keys and values, one 4 KiB page
 * after another: on 4 KiB pages every page is a TLB miss, and a batched decode step reads the
 * caches of all its sequences (on AMD Zen 4, 8 sequences' attention at 320 positions took 12%
 * less time on huge pages: docs/performance.md). */
static void *kv_alloc(size_t n)
{
    void *p = calloc(n, 1);
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    if (p && n >= 2 * huge && n <= KV_HUGE_MAX) {
        uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1);
        uintptr_t e = ((uintptr_t)p + n) & ~(huge - 1);
        if (e > a)
            madvise((void *)a, e - a, MADV_HUGEPAGE);    /* a hint: failure only costs speed */
    }
#endif
    return p;
}

tt_status kvcache_init(kvcache *c, int L, int NH, int HS, int n_ctx, tt_error *err)
{
    memset(c, 0, sizeof *c);
    if (L <= 0 || NH <= 0 || HS <= 0 || n_ctx <= 0)
        return tt_fail(err, TT_ERR_ARG, "kvcache: invalid shape L=%d NH=%d HS=%d n_ctx=%d", L, NH,
                       HS, n_ctx);
    int ldk = (n_ctx + KERNELS_KEY_BLOCK - 1) / KERNELS_KEY_BLOCK * KERNELS_KEY_BLOCK;
    size_t elems = (size_t)L * (size_t)NH * (size_t)ldk * (size_t)HS;
    if (elems > SIZE_MAX / sizeof(float) / 2)
        return tt_fail(err, TT_ERR_NOMEM, "kvcache: %zu elements do not fit in memory", elems);
    c->k = kv_alloc(elems * sizeof(float));
    c->v = kv_alloc(elems * sizeof(float));
    if (!c->k || !c->v) {
        kvcache_free(c);
        return tt_fail(err, TT_ERR_NOMEM, "kvcache: cannot allocate 2 x %zu bytes for %d positions",
                       elems * sizeof(float), n_ctx);
    }
    c->L = L;
    c->NH = NH;
    c->HS = HS;
    c->n_ctx = n_ctx;
    c->ldk = ldk;
    c->n = 0;
    return TT_OK;
}

void kvcache_free(kvcache *c)
{
    free(c->k);
    free(c->v);
    memset(c, 0, sizeof *c);
}

size_t kvcache_bytes(const kvcache *c)
{
    return (size_t)c->L * (size_t)c->NH * (size_t)c->HS * ((size_t)c->ldk + (size_t)c->n_ctx) *
           sizeof(float);
}

void kvcache_store(kvcache *c, int l, int h, int t, const float *k, const float *v)
{
    size_t off = ((size_t)h * (size_t)c->n_ctx + (size_t)t) * (size_t)c->HS;
    float *kt = kvcache_k(c, l) + kernels_key_at(c->HS, c->ldk, h, 0, t);
    for (int d = 0; d < c->HS; d++)
        kt[(size_t)d * KERNELS_KEY_BLOCK] = k[d];
    memcpy(kvcache_v(c, l) + off, v, (size_t)c->HS * sizeof(float));
}

void kvcache_truncate(kvcache *c, int pos)
{
    if (pos < 0)
        pos = 0;
    if (pos < c->n)
        c->n = pos;
}
