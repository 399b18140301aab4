/* kvcache.c: allocation and bookkeeping of the CPU attention cache. */
#include "core/cpu/kvcache.h"

#include "core/cpu/kernels.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* n zeroed bytes; an array of several MiB asks for transparent huge pages over its 2 MiB-aligned
 * interior. Attention streams each head's keys and values, one 4 KiB page after another: on
 * 4 KiB pages every page is a TLB miss, and a batched decode step reads the caches of all its
 * sequences (on AMD Zen 4, 8 sequences' attention at 320 positions took 12% less time on huge
 * pages: docs/performance.md). The pages are still faulted in on first touch, but 2 MiB at a time:
 * the cache is soon resident in full rather than growing with the context. */
static void *kv_alloc(size_t n)
{
    void *p = calloc(n, 1);
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    if (p && n >= 2 * huge) {
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
