/* cpu.c: the CPU backend: the forward pass of any architecture core/arch/ describes (the block
 * recipe walked from the model's config) over a token span with a KV cache, multithreaded,
 * on the kernel set kernels_select() picks (SIMD when the CPU has it, the portable reference
 * otherwise).
 *
 * The weights are repacked at creation into the dtype asked for (fp32, fp16 or bf16: every
 * parameter, biases and LayerNorm included, is rounded to it once; q8: the matrices are quantized,
 * the vectors stay fp32) and the layout the kernels
 * stream (kernels.h); a GGUF Q8_0 file's q8 matrices are repacked after the first step instead
 * (see "Deferred repacking"); everything is computed and accumulated in fp32, except that a q8
 * matmul quantizes its input rows to 8 bits too (cpu_act_rows) and sums each block of 32 exactly in
 * integers, and a bf16 matmul in the amx and avx512bf16 kernel sets (in avx512bf16 a BF16 GGUF
 * file's too: kernels_reads_xb) rounds them to bf16 (cpu_act_rows) for the AMX tiles or
 * vdpbf16ps. A span is processed in
 * chunks of at most TB tokens: prefill is matrix-matrix over a chunk, decode is the same code with
 * T = 1, and the lm_head runs only for the rows whose logits are wanted. */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/base/clock.h"
#include "core/base/util.h"
#include "core/engine/attention.h"
#include "core/engine/engine.h"
#include "core/cpu/kernels.h"
#include "core/cpu/kvcache.h"
#include "core/cpu/threads.h"
#include "core/model/gguf.h"
#include "core/model/quant.h"

/* Tokens per chunk: enough rows that each weight panel, once in L2, is reused 256 times; the
 * activations of a chunk stay a few MB whatever the span's length. */
#define CPU_CHUNK 256

/* Models with fewer multiply-adds per decoded token run on one thread when the count is left to
 * the engine: their jobs last a few microseconds, about what handing a job to a worker costs,
 * and a second pool's spinning worker (a draft model's beside its target) takes the core the
 * other engine runs on. Chosen by measurement on the embedded pair (tools/peer/README.md,
 * docs/performance.md): the draft is faster alone on one thread, the target on two. */
#define CPU_SPLIT_MIN_MACS 2e6

/* A matrix packed at each use (see "Deferred repacking") is packed in windows of about this many
 * bytes per thread: a few of its panels, which stay in L2 while the kernel reads them. */
#define CPU_DEFER_BYTES ((size_t)512 << 10)

/* ---------------------------------------------------------------------------------------------
 * State */

/* A matrix is packed from up to three tensors side by side (q | k | v, gate | up), each a run of
 * its output columns. */
typedef struct {
    tensor_ref src;
    int cols;
} pack_part;

/* A q8 matrix whose GGUF Q8_0 tensors are repacked after the first step, not at creation (see
 * "Deferred repacking"): until adopted, m->data is NULL and each matmul packs the panels it
 * reads into a per-thread window. */
typedef struct {
    packed_matrix *m;              /* the engine's matrix (shape only until adopted) */
    pack_part parts[KERNELS_GGUF_PARTS];
    int n_parts;
    packed_matrix packed;          /* the repacking thread's copy; owned here until adopted */
    atomic_int panels_done;        /* panels [0, panels_done) of packed are complete (release) */
    atomic_int ready;              /* 1 once packed is complete (stored with release) */
    bool adopted;                  /* packed moved into *m */
} cpu_deferred;

/* A part of a TT_GGUF matrix that the kernels read where the file stores it (F16, BF16, and a
 * quantized part not regrouped), copied onto huge pages after the first step (see "Copies onto
 * huge pages"). */
typedef struct {
    packed_matrix *m;              /* the engine's matrix */
    int part;                      /* m->parts[part] */
    const uint8_t *file;           /* its rows in the mapping */
    int N;                         /* its rows */
    int unit;                      /* rows copied at a time are a multiple of this (a step may
                                      read the part split there: whole panels and heads) */
    size_t row_bytes;
    uint8_t *copy;                 /* the copying thread's, from the huge-page arena */
    atomic_int rows_done;          /* rows [0, rows_done) of copy complete (stored with release) */
    bool adopted;                  /* copy is m->parts[part].data */
} cpu_copied;

typedef enum { CPU_REPACK_IDLE, CPU_REPACK_RUNNING, CPU_REPACK_JOINED } cpu_repack_state;

/* One layer. Q = NH HS, KV = NKV HS, QKV = Q + 2 KV; a vector the recipe lacks is NULL. */
typedef struct {
    float *attn_norm_w, *attn_norm_b;  /* (C) */
    float *qkv_b;                  /* (QKV) */
    float *q_norm, *k_norm;        /* (HS) */
    float *o_b;                    /* (C) */
    float *ffn_norm_w, *ffn_norm_b;    /* (C) */
    float *up_b;                   /* (FF) */
    float *down_b;                 /* (C) */
    packed_matrix qkv;             /* (C, QKV): [q | k | v] */
    packed_matrix o;               /* (Q, C) */
    packed_matrix up;              /* (C, FF), or (C, 2 FF) [gate | up] for SwiGLU */
    packed_matrix down;            /* (FF, C) */
} cpu_layer;

typedef struct {
    engine base;                   /* first: an engine * is a cpu_engine * */
    const kernels *kern;
    threadpool *pool;
    weight_arena *arena;           /* every packed matrix (weight_arena.h) */
    kvcache cache;                 /* sequence 0 */
    kvcache *more;                 /* (n_seqs - 1) sequences 1 .. n_seqs-1, engine_seq_reserve */
    int n_seqs;

    cpu_layer *layers;             /* (L) */
    float *out_norm_w, *out_norm_b;    /* (C) */
    packed_matrix lm_head;         /* (C, V) */
    float *vectors;                /* one block holding every bias and LayerNorm vector above */
    size_t vectors_len;

    /* Activations for one chunk of up to TB tokens. */
    int TB;
    float *x;                      /* (TB, C) the residual stream */
    float *xn;                     /* (TB, C) norm output */
    float *qkv;                    /* (TB, QKV) */
    float *att;                    /* (TB, Q) attention output, heads side by side */
    float *fc;                     /* (TB, FF), or (TB, 2 FF) with SwiGLU */
    float *rope_cos, *rope_sin;    /* (n_ctx, HS / 2) cos and sin of pos * inv_freq[i] */
    float *scratch;                /* (nth, KERNELS_ATTN_SCRATCH(n_ctx)) attention scores */
    float *mm_scratch;             /* (nth, mm_stride) matmul scratch, 64-byte aligned rows */
    kernels_q8_act *xq;            /* (TB, ldxq) a Q8 matmul's activations, quantized */
    int ldxq;
    uint16_t *xb;                  /* (TB, ldxb) a BF16 matmul's activations in bf16, where the
                                      kernel set reads them (kernels.h: bf16_rows) */
    int ldxb;
    bool gguf_xb;                  /* a GGUF matrix reads xb (kernels_reads_xb) */
    size_t mm_stride;
    float *embed_row;              /* (C) */
    bool head_tied;                /* lm_head is a TT_GGUF matrix over the token table as stored */
    int logits_rows;               /* rows allocated in base.logits */
    double small_macs;             /* nonzero: one thread chosen, model too small to split */
    struct cpu_seg *segs;          /* (TB) the sequences of a chunk */

    /* Deferred repacking: n_deferred matrices, n_adopted of them repacked and in use. */
    cpu_deferred *deferred;        /* (4 L + 1) */
    int n_deferred, n_adopted;
    unsigned char *defer_buf;      /* (nth, defer_stride) windows of panels packed at each use */
    size_t defer_stride;
    cpu_repack_state repack;
    pthread_t repacker;
    atomic_bool repack_cancel;
    /* Whether a forward is computing, and when the last one ended (tt_now_ms): the settling
     * waits for a pause of the steps (cpu_settle_wait). */
    atomic_bool stepping;
    _Atomic double step_end_ms;
    double settle_go_ms;           /* the repacking thread's: when a pause last let 2 MiB go */
    /* Copies onto huge pages: n_copied parts, those before copy_next taken by the copying
     * (repacking) thread, n_copies_adopted of them read from their copy by every step. */
    cpu_copied *copied;            /* (KERNELS_GGUF_PARTS (4 L + 1)), NULL: nothing is copied */
    int n_copied, copy_next, n_copies_adopted;
    weight_arena *copies;          /* huge pages from the start (the copying is off the steps) */
} cpu_engine;

static void cpu_defer_adopt(cpu_engine *ce);
static void cpu_defer_start(cpu_engine *ce);
static void cpu_stepping(cpu_engine *ce, bool on);
static void cpu_defer_free(cpu_engine *ce);

/* Rows row .. row+T-1 of a chunk are one sequence's positions pos .. pos+T-1, whose keys and
 * values go to cache. A span is one segment; a batched decode step is one segment per row. */
typedef struct cpu_seg {
    kvcache *cache;
    int row, T, pos;
} cpu_seg;

static kvcache *cpu_seq_cache(cpu_engine *ce, int seq)
{
    return seq == 0 ? &ce->cache : &ce->more[seq - 1];
}

/* ---------------------------------------------------------------------------------------------
 * Parallel jobs */

typedef struct {
    matmul_args args;
    const kernels *kern;
    float *scratch;
    size_t scratch_stride;
    cpu_deferred *deferred;        /* w not adopted yet: its panels the repacking thread has
                                      done are read there, each thread packs the others in
                                      windows of defer_panels panels into its defer_buf row */
    unsigned char *defer_buf;
    size_t defer_stride;
    int defer_panels;
    threadpool_chunks chunks;
    int panels_per_chunk;
    bool runs;                     /* chunks are panels, claimed in equal shares, one per thread
                                      (threadpool_next_run); else chunks of panels_per_chunk */
} matmul_job;

static void pack_panels(packed_matrix *dst, int first, const pack_part *parts, int n_parts,
                        int N, int p0, int p1, const gguf_file *release);

/* Panels [p0, p1) of the job's matmul on thread ith. A matrix not adopted yet is read from the
 * repacking thread's copy as far as that is done (not from the file, whose pages of it are
 * released), and packed a window at a time into the thread's buffer beyond, which the kernel
 * then reads as a matrix of its own whose column 0 is the window's first: the same panel bytes
 * the repacked matrix holds, each column computed alone (kernels.h), so the same bits. */
static void matmul_panels(const matmul_job *j, int ith, int p0, int p1)
{
    float *scratch = j->scratch + (size_t)ith * j->scratch_stride;
    cpu_deferred *d = j->deferred;
    if (!d) {
        j->kern->matmul(&j->args, p0, p1, scratch);
        return;
    }
    const packed_matrix *w = j->args.w;
    const int done = atomic_load_explicit(&d->panels_done, memory_order_acquire);
    if (p0 < done) {
        packed_matrix copy = *w;
        copy.data = d->packed.data;
        matmul_args a = j->args;
        a.w = &copy;
        const int q1 = p1 < done ? p1 : done;
        j->kern->matmul(&a, p0, q1, scratch);
        p0 = q1;
    }
    packed_matrix window = *w;
    window.data = j->defer_buf + (size_t)ith * j->defer_stride;
    for (int q0 = p0; q0 < p1; q0 += j->defer_panels) {
        const int q1 = q0 + j->defer_panels < p1 ? q0 + j->defer_panels : p1;
        const int shift = q0 * KERNELS_NR;
        window.N = w->N - shift;
        window.n_panels = w->n_panels - q0;
        pack_panels(&window, q0, d->parts, d->n_parts, w->N, q0, q1, NULL);
        matmul_args a = j->args;
        a.w = &window;
        a.out += shift;
        if (a.bias)
            a.bias += shift;
        j->kern->matmul(&a, 0, q1 - q0, scratch);
    }
}

static void matmul_job_run(void *varg, int ith, int nth)
{
    matmul_job *j = varg;
    int c, n;
    if (j->runs) {
        const int share = (j->args.w->n_panels + nth - 1) / nth;
        const int head = share - share / 4, tail = share / 16 > 0 ? share / 16 : 1;
        for (int run = head; (c = threadpool_next_run(&j->chunks, run, INT_MAX, &n)) >= 0;
             run = tail)
            matmul_panels(j, ith, c, c + n);
        return;
    }
    while ((c = threadpool_next_chunk(&j->chunks)) >= 0) {
        int p0 = c * j->panels_per_chunk;
        int p1 = p0 + j->panels_per_chunk;
        if (p1 > j->args.w->n_panels)
            p1 = j->args.w->n_panels;
        matmul_panels(j, ith, p0, p1);
    }
}

/* A job over rows in blocks of 16: rows(ctx, t0, t1) for each. */
typedef struct {
    void (*rows)(const void *ctx, int t0, int t1);
    const void *ctx;
    int T;
    threadpool_chunks blocks;
} rows_job;

static void rows_job_run(void *varg, int ith, int nth)
{
    rows_job *j = varg;
    int c;
    while ((c = threadpool_next_chunk(&j->blocks)) >= 0)
        j->rows(j->ctx, c * 16, c * 16 + 16 < j->T ? c * 16 + 16 : j->T);
}

/* rows(ctx, 0, T) on the calling thread for a few rows (a decode row: a microsecond, not worth a
 * wake-up), over the pool in blocks of 16 for a prefill. */
static void cpu_rows(cpu_engine *ce, int T, void (*rows)(const void *, int, int), const void *ctx)
{
    if (T < 32) {
        rows(ctx, 0, T);
        return;
    }
    rows_job j = {.rows = rows, .ctx = ctx, .T = T};
    threadpool_chunks_init(&j.blocks, (T + 15) / 16);
    threadpool_run(ce->pool, rows_job_run, &j);
}

/* The rows a matmul over w reads besides x (kernels.h): quantized for Q8 weights (into ce->xq),
 * rounded to bf16 for BF16 weights in a set with bf16_rows (into ce->xb). */
typedef struct {
    const kernels *kern;
    const float *x;
    int ldx, K;
    tt_dtype dtype;
    void *out;
    int ldo;
} act_rows_ctx;

static void act_rows(const void *varg, int t0, int t1)
{
    const act_rows_ctx *q = varg;
    if (q->dtype == TT_Q8 || q->dtype == TT_GGUF)
        q->kern->quantize_rows(q->x, q->ldx, q->K, t0, t1, q->out, q->ldo);
    else
        q->kern->bf16_rows(q->x, q->ldx, q->K, t0, t1, q->out, q->ldo);
}

static void cpu_act_rows(cpu_engine *ce, const float *x, int ldx, const packed_matrix *w, int T)
{
    act_rows_ctx q = {.kern = ce->kern, .x = x, .ldx = ldx, .K = w->K, .dtype = w->dtype};
    if (kernels_reads_xb(ce->kern, w)) {
        q.dtype = TT_BF16;         /* rounded by bf16_rows, a BF16 file's rows as well */
        q.out = ce->xb;
        q.ldo = ce->ldxb;
    } else if (packed_gguf_is_float(w)) {
        return;                    /* F16, BF16 rows as stored read x itself */
    } else if (w->dtype == TT_Q8 || w->dtype == TT_GGUF) {
        q.out = ce->xq;
        q.ldo = ce->ldxq;
    } else {
        return;
    }
    cpu_rows(ce, T, act_rows, &q);
}

/* Panels of w in one window of a matmul that packs it at each use: about CPU_DEFER_BYTES, whole
 * groups of the GEMV's side-by-side panels where that is more than one group. */
static int cpu_defer_panels(const packed_matrix *w)
{
    size_t n = CPU_DEFER_BYTES / packed_matrix_panel_bytes(w);
    if (n >= KERNELS_GEMV_PANELS)
        n -= n % KERNELS_GEMV_PANELS;
    return n < 1 ? 1 : (int)n;
}

/* w as a step reads it while its parts are being copied onto huge pages (see "Copies onto huge
 * pages"): each part whose copy is complete and not adopted yet read from the copy, a part being
 * copied split in two where the matrix has room for another part (its rows done from the copy,
 * the rest from the file, whose pages of the rows done are released), else read from the file
 * (its released pages fault back in from the page cache: a 3-part q | k | v, whose parts are
 * small). Each output is computed alone (kernels.h), whichever part holds its row: the same bits.
 * Returns w itself where nothing changes. */
static const packed_matrix *cpu_copy_view(const cpu_engine *ce, const packed_matrix *w,
                                          packed_matrix *view)
{
    if (w->dtype != TT_GGUF || ce->n_copies_adopted == ce->n_copied)
        return w;
    packed_gguf_part parts[KERNELS_GGUF_PARTS];
    int n = 0;
    bool changed = false;
    for (int i = 0; i < w->n_parts; i++) {
        packed_gguf_part pt = w->parts[i];
        const cpu_copied *c = NULL;
        for (int k = 0; k < ce->n_copied && !c; k++)
            if (ce->copied[k].m == w && ce->copied[k].part == i && !ce->copied[k].adopted)
                c = &ce->copied[k];
        const int done = c ? atomic_load_explicit(&c->rows_done, memory_order_acquire) : 0;
        if (done == pt.N && c) {
            pt.data = c->copy;
            changed = true;
        } else if (done > 0 && n + 2 + (w->n_parts - 1 - i) <= KERNELS_GGUF_PARTS) {
            parts[n] = pt;
            parts[n].data = c->copy;
            parts[n++].N = done;
            pt.data = c->file + (size_t)done * c->row_bytes;
            pt.N -= done;
            changed = true;
        }
        parts[n++] = pt;
    }
    if (!changed)
        return w;
    *view = *w;
    memcpy(view->parts, parts, (size_t)n * sizeof *parts);
    view->n_parts = n;
    return view;
}

/* out (T, ldo) = epilogue(x (T, ldx) W + bias) over all threads, chunks of panels handed out
 * dynamically. With many rows a panel is a lot of arithmetic: one panel per chunk balances the
 * threads best (fp32: the pair of panels the kernels compute side by side). With few rows
 * (decode) the work is streaming the weights: chunks of about 128 KiB keep each stream long
 * enough for the prefetchers while the last chunk, which one thread may finish alone, stays
 * short; one row takes whole groups of the panels the GEMV streams side by side. A batch of a
 * few rows streams one panel at a time, prefetching far ahead, past the panel's end into the
 * next one: it takes runs of neighbouring panels (threadpool_next_run), so that each thread's
 * next panel is the one it prefetched, not one the other thread took (with panels handed out one
 * by one, two threads each started every panel cold and fetched a piece of the other's, which
 * measured slower). The runs are sized by a thread's equal share (three quarters of it first,
 * then sixteenths: a thread that streams faster takes more of the tail, where equal halves left
 * the faster one waiting), not runs of 128 KiB: a small model's matrices hold few panels, and
 * 128 KiB runs gave a whole matrix to one thread or split it unevenly (chosen by measurement,
 * see docs/performance.md#why-the-kernels-are-as-they-are). Which thread computes a panel never
 * changes its bits (kernels.h). */
static void cpu_matmul(cpu_engine *ce, float *out, int ldo, const float *x, int ldx,
                       const packed_matrix *w, const float *bias, int T, mm_epilogue ep)
{
    packed_matrix view;
    w = cpu_copy_view(ce, w, &view);
    matmul_job j = {
        .args = {.out = out, .ldo = ldo, .x = x, .ldx = ldx, .w = w, .bias = bias, .T = T,
                 .epilogue = ep, .xq = ce->xq, .ldxq = ce->ldxq, .xb = ce->xb, .ldxb = ce->ldxb},
        .kern = ce->kern,
        .scratch = ce->mm_scratch,
        .scratch_stride = ce->mm_stride,
    };
    if (w->dtype == TT_Q8 && !w->data) {
        for (int i = 0; i < ce->n_deferred && !j.deferred; i++)
            if (ce->deferred[i].m == w)
                j.deferred = &ce->deferred[i];
        j.defer_buf = ce->defer_buf;
        j.defer_stride = ce->defer_stride;
        j.defer_panels = cpu_defer_panels(w);
    }
    cpu_act_rows(ce, x, ldx, w, T);
    /* panels in runs sized by a thread's share (matmul_job_run): a batch of a few rows, and a
     * quantized GGUF matrix's decode row, whose group kernels stream each thread's run ahead */
    j.runs = T < 12 && (T > 1 || (w->dtype == TT_GGUF && !packed_gguf_is_float(w)));
    if (j.runs) {
        threadpool_chunks_init(&j.chunks, w->n_panels);
    } else {
        size_t ppc = w->dtype == TT_F32 ? KERNELS_ROWS_PANELS : 1;
        if (T == 1) {              /* about 128 KiB, whole groups of the GEMV's side-by-side panels */
            size_t panel_bytes = packed_matrix_panel_bytes(w);
            ppc = (((size_t)128 << 10) + panel_bytes / 2) / panel_bytes;
            if (ppc < 1)
                ppc = 1;
            ppc = (ppc + KERNELS_GEMV_PANELS - 1) / KERNELS_GEMV_PANELS * KERNELS_GEMV_PANELS;
        }
        j.panels_per_chunk = (int)ppc;
        threadpool_chunks_init(&j.chunks, (w->n_panels + j.panels_per_chunk - 1) /
                                              j.panels_per_chunk);
    }
    threadpool_run(ce->pool, matmul_job_run, &j);
}

/* Before attention, on each row of q|k|v: the per-head q and k norms (ARCH_F_QK_NORM), RoPE at
 * the row's position (ARCH_F_ROPE), then the row's keys and values stored in its sequence's
 * cache. Rows r0 .. r1-1 of the chunk, whichever segments they fall in. */
typedef struct {
    cpu_engine *ce;
    const cpu_layer *ly;
    int layer;
    float *qkv;
    const cpu_seg *segs;
    int n_segs;
    int rows_per_chunk;
    threadpool_chunks work;        /* blocks of rows_per_chunk rows */
} prepare_job;

static void prepare_rows(const prepare_job *j, int r0, int r1)
{
    const model_config *cfg = j->ce->base.config;
    const int HS = cfg->HS, NH = cfg->NH, NKV = cfg->NKV, QKV = model_config_qkvdim(cfg);
    const int Q = model_config_qdim(cfg), KV = model_config_kvdim(cfg);
    const cpu_layer *ly = j->ly;
    for (int sg = 0; sg < j->n_segs; sg++) {
        const cpu_seg *s = &j->segs[sg];
        const int a = r0 > s->row ? r0 : s->row, b = r1 < s->row + s->T ? r1 : s->row + s->T;
        for (int r = a; r < b; r++) {
            float *row = j->qkv + (size_t)r * (size_t)QKV;
            const int pos = s->pos + (r - s->row);
            if (ly->q_norm) {
                kernels_rmsnorm(row, HS, row, HS, ly->q_norm, HS, cfg->norm_eps, 0, NH);
                kernels_rmsnorm(row + Q, HS, row + Q, HS, ly->k_norm, HS, cfg->norm_eps, 0, NKV);
            }
            if (j->ce->rope_cos) {
                kernels_rope(row, NH, HS, j->ce->rope_cos, j->ce->rope_sin, pos);
                kernels_rope(row + Q, NKV, HS, j->ce->rope_cos, j->ce->rope_sin, pos);
            }
        }
        /* Head by head: a block of rows fills the HS lines of its key block while they stay
         * in L1 (row by row, every head's lines were evicted between two rows' stores). */
        for (int h = 0; h < NKV; h++)
            for (int r = a; r < b; r++) {
                const float *row = j->qkv + (size_t)r * (size_t)QKV;
                kvcache_store(s->cache, j->layer, h, s->pos + (r - s->row),
                              row + Q + (size_t)h * HS, row + Q + KV + (size_t)h * HS);
            }
    }
}

static void prepare_job_run(void *varg, int ith, int nth)
{
    (void)ith;
    (void)nth;
    prepare_job *j = varg;
    int c, T = j->segs[j->n_segs - 1].row + j->segs[j->n_segs - 1].T;
    while ((c = threadpool_next_chunk(&j->work)) >= 0) {
        int r0 = c * j->rows_per_chunk, r1 = r0 + j->rows_per_chunk;
        prepare_rows(j, r0, r1 < T ? r1 : T);
    }
}

/* prepare_rows over all T rows of the chunk, before any head reads the cache (with grouped-query
 * attention several heads read one KV head). A key's store writes one float into each of HS
 * cache lines (the keys are transposed, kernels_key_at), lines the rest of a step has evicted:
 * about 60 us a layer for 8 rows on one Zen 4 core, bound by how many misses one core keeps in
 * flight, so two or more rows run on all threads, a row (a batched step) or a block of 16 (a
 * prefill: a key block's 16 positions) per chunk. One row stays on the calling thread. Which
 * thread stores a row changes no bits. */
static void cpu_attention_prepare(cpu_engine *ce, const cpu_layer *ly, int layer, float *qkv,
                                  const cpu_seg *segs, int n_segs, int T)
{
    prepare_job j = {.ce = ce, .ly = ly, .layer = layer, .qkv = qkv, .segs = segs,
                     .n_segs = n_segs, .rows_per_chunk = T >= 32 ? 16 : 1};
    if (T < 2) {
        prepare_rows(&j, 0, T);
        return;
    }
    threadpool_chunks_init(&j.work, (T + j.rows_per_chunk - 1) / j.rows_per_chunk);
    threadpool_run(ce->pool, prepare_job_run, &j);
}

typedef struct {
    cpu_engine *ce;
    int layer;
    const float *qkv;              /* (T, QKV) */
    const cpu_seg *segs;
    int n_segs;
    int G;                         /* query heads a unit of work: 1, or a key/value head's
                                      group (attention_group) */
    int div, min_run;              /* runs of (segment, unit) pairs (attention_runs) */
    threadpool_chunks work;        /* (n_segs * NH / G) pairs, segment-major */
} attention_job;

/* Query heads the kernel computes together: a key/value head's group of G (kernels.
 * attention_heads: each of its key and value rows read once for the G), where every segment is
 * one row (a decode step, batched or not) and no row's weights are captured; else 1. */
static int attention_group(const cpu_engine *ce, const cpu_seg *segs, int n_segs)
{
    const model_config *cfg = ce->base.config;
    const int G = cfg->NKV > 0 && cfg->NH % cfg->NKV == 0 ? cfg->NH / cfg->NKV : 1;
    const engine_attention *c = ce->base.attention;
    if (G < 2 || G > 8 || !ce->kern->attention_heads || (c && c->n_rows))
        return 1;
    for (int s = 0; s < n_segs; s++)
        if (segs[s].T != 1)
            return 1;
    return G;
}

/* How a layer's attention is handed out: runs of consecutive (segment, unit) pairs, a unit one
 * query head or one key/value head's group of G (attention_group), each head but a run's last
 * telling the kernel that the next one comes on the same thread
 * (attention_args.next_head: its keys are on their way while the values are weighted). Several
 * sequences (a batched step): a div-th of the pairs left and at least min_run ("guided",
 * threadpool_next_run), first one sequence's heads, last 2, so that the threads finish together
 * even when one streams faster or joins late (equal chunks of 6 heads at batch 8 left one thread
 * waiting for the other's last chunk). One sequence: runs of NH / (8 nth) heads (at least one),
 * 8 or more a thread. */
static void attention_runs(attention_job *j, int NH, int nth)
{
    NH /= j->G;                    /* units of work a segment */
    const int pairs = NH * j->n_segs;
    nth = nth > 0 ? nth : 1;
    if (j->n_segs == 1) {
        j->div = INT_MAX;
        j->min_run = NH / (8 * nth) > 1 ? NH / (8 * nth) : 1;
    } else {
        j->div = 4 * nth;
        j->min_run = pairs >= 16 * nth ? 2 : 1;
    }
    threadpool_chunks_init(&j->work, pairs);
}

/* The attention capture (core/engine/attention.h): the kernel writes the softmax of the kept
 * rows that fall in a's segment (a span forward has one segment; a batched step keeps none) for
 * head h of layer l as it weights the values with it. */
static void capture_rows(const cpu_engine *ce, attention_args *a, int l, int h)
{
    const engine_attention *c = ce->base.attention;
    if (!c || !c->n_rows)
        return;
    int r0 = c->first_pos - a->pos;            /* the first kept row within the segment */
    r0 = r0 < 0 ? 0 : r0;
    if (r0 >= a->T || a->pos + r0 >= c->first_pos + c->n_rows)
        return;
    a->probs = engine_attention_slot(c, c->seq, a->pos + r0, l, h);
    a->probs_row = r0;
    a->ld_probs = (size_t)c->NH * (size_t)c->ld;
}

/* One query head (or a key/value head's group, attention_group) of one sequence at a time,
 * over that sequence's cache. */
static void attention_job_run(void *varg, int ith, int nth)
{
    (void)nth;
    attention_job *j = varg;
    cpu_engine *ce = j->ce;
    const model_config *cfg = ce->base.config;
    const int NH = cfg->NH, QKV = model_config_qkvdim(cfg), Q = model_config_qdim(cfg);
    float *scratch = ce->scratch + (size_t)ith * KERNELS_ATTN_SCRATCH(ce->cache.n_ctx);
    const int units = NH / j->G;
    int c, n;
    while ((c = threadpool_next_run(&j->work, j->min_run, j->div, &n)) >= 0)
        for (int i = c; i < c + n; i++) {
            const cpu_seg *sg = &j->segs[i / units];
            const int h = i % units * j->G;
            kvcache *kv = sg->cache;
            attention_args a = {.q = j->qkv + (size_t)sg->row * (size_t)QKV, .ldq = QKV,
                                .k = kvcache_k(kv, j->layer), .v = kvcache_v(kv, j->layer),
                                .n_ctx = kv->n_ctx, .ldk = kv->ldk,
                                .out = ce->att + (size_t)sg->row * (size_t)Q, .ldo = Q,
                                .T = sg->T, .pos = sg->pos, .NH = NH, .HS = cfg->HS,
                                .NKV = cfg->NKV, .next_head = i + 1 < c + n && h + 1 < NH};
            if (j->G > 1) {
                ce->kern->attention_heads(&a, h, j->G, 0, scratch);
                continue;
            }
            capture_rows(ce, &a, j->layer, h);
            ce->kern->attention(&a, h, 0, sg->T, scratch);
        }
}

typedef struct {
    float *out;
    const float *x, *w, *b;
    int C;
    float eps;
    bool rms;
} norm_ctx;

static void norm_rows(const void *varg, int t0, int t1)
{
    const norm_ctx *l = varg;
    if (l->rms)
        kernels_rmsnorm(l->out, l->C, l->x, l->C, l->w, l->C, l->eps, t0, t1);
    else
        kernels_layernorm(l->out, l->x, l->w, l->b, l->C, l->eps, t0, t1);
}

/* The architecture's norm (LayerNorm or RMSNorm) of T rows of x into out. */
static void cpu_norm(cpu_engine *ce, float *out, const float *x, const float *w, const float *b,
                     int T)
{
    const model_config *cfg = ce->base.config;
    norm_ctx l = {.out = out, .x = x, .w = w, .b = b, .C = cfg->C, .eps = cfg->norm_eps,
                  .rms = (cfg->features & ARCH_F_RMSNORM) != 0};
    cpu_rows(ce, T, norm_rows, &l);
}

typedef struct {
    const kernels *kern;
    float *gu;
    int ld, FF;
} swiglu_ctx;

static void swiglu_rows(const void *varg, int t0, int t1)
{
    const swiglu_ctx *g = varg;
    g->kern->swiglu(g->gu, g->ld, g->FF, t0, t1);
}

/* ---------------------------------------------------------------------------------------------
 * Forward */

/* x[t] = token_embd[id] (+ pos_embd[pos] with learned positions) for every row of the segments,
 * read from the model's mapping (one row each) and rounded to the held dtype like every other
 * parameter (tt_held_f32; with Q8 weight matrices the vectors stay fp32, as llama.cpp keeps them:
 * they are a sliver of the bytes). */
static void cpu_embed(cpu_engine *ce, const int32_t *ids, const cpu_seg *segs, int n_segs)
{
    const model *m = ce->base.model;
    const int C = ce->base.config->C;
    const tt_dtype d = ce->base.dtype;
    float *pe = ce->embed_row;
    const tensor_ref wte = m->tensors.global[ARCH_T_TOKEN_EMBD];
    const tensor_ref wpe = m->tensors.global[ARCH_T_POS_EMBD];
    /* Values read from a table of the held dtype are held already (an fp16 model held in fp16:
     * rounding them again is most of a row's work). */
    const bool exact = (wte.dtype == d && (!wpe.data || wpe.dtype == d)) ||
                       (d != TT_F16 && d != TT_BF16);
    /* a table tied to a regrouped lm_head, or one copied onto huge pages: its file pages were
     * released (cpu_pack, cpu_copy), so the rows come from the lm_head (the same floats) instead
     * of faulting the file back in (a 2 MiB page cache folio a row, where the file's are large) */
    const bool tied_groups = ce->head_tied && (ce->lm_head.parts[0].groups ||
                                               ce->lm_head.parts[0].data != wte.data);
    for (int sg = 0; sg < n_segs; sg++)
        for (int t = segs[sg].row; t < segs[sg].row + segs[sg].T; t++) {
            int pos = segs[sg].pos + (t - segs[sg].row);
            float *x = ce->x + (size_t)t * (size_t)C;
            if (tied_groups)
                packed_gguf_row_f32(&ce->lm_head, ids[t], x);
            else
                tensor_ref_to_f32(wte, (size_t)ids[t] * (size_t)C, (size_t)C, x);
            if (!wpe.data) {
                if (!exact)
                    for (int i = 0; i < C; i++)
                        x[i] = tt_held_f32(d, x[i]);
                continue;
            }
            tensor_ref_to_f32(wpe, (size_t)pos * (size_t)C, (size_t)C, pe);
            if (exact)
                for (int i = 0; i < C; i++)
                    x[i] += pe[i];
            else
                for (int i = 0; i < C; i++)
                    x[i] = tt_held_f32(d, x[i]) + tt_held_f32(d, pe[i]);
        }
}

/* The logit lens (engine.h: lens): row T - 1 of the residual stream into row r of lens (L + 1, C),
 * when the caller keeps it. */
static void cpu_lens_keep(const cpu_engine *ce, float *lens, int r, int T)
{
    const size_t C = (size_t)ce->base.config->C;
    if (lens)
        memcpy(lens + (size_t)r * C, ce->x + (size_t)(T - 1) * C, C * sizeof(float));
}

/* T rows (ids) split into segments, each one sequence's consecutive positions; logits for rows
 * [lo, T) into out (T - lo, V); lens: NULL, or where the last row's residual stream goes after the
 * embeddings and each block (cpu_lens_keep). False when stop (the engine's interrupt flag, passed
 * for spans of more than one token) stopped it between layers. */
static bool cpu_forward_chunk(cpu_engine *ce, const int32_t *ids, int T, const cpu_seg *segs,
                              int n_segs, int lo, float *out, float *lens,
                              const volatile sig_atomic_t *stop)
{
    const model_config *cfg = ce->base.config;
    const int C = cfg->C, FF = cfg->FF, NH = cfg->NH;
    const int Q = model_config_qdim(cfg), QKV = model_config_qkvdim(cfg);
    const bool swiglu = (cfg->features & ARCH_F_SWIGLU) != 0;
    const int ldfc = swiglu ? 2 * FF : FF;
    cpu_embed(ce, ids, segs, n_segs);
    cpu_lens_keep(ce, lens, 0, T);
    for (int l = 0; l < cfg->L; l++) {
        if (stop && *stop)
            return false;
        const cpu_layer *ly = &ce->layers[l];
        cpu_norm(ce, ce->xn, ce->x, ly->attn_norm_w, ly->attn_norm_b, T);
        cpu_matmul(ce, ce->qkv, QKV, ce->xn, C, &ly->qkv, ly->qkv_b, T, MM_STORE);
        cpu_attention_prepare(ce, ly, l, ce->qkv, segs, n_segs, T);
        attention_job aj = {.ce = ce, .layer = l, .qkv = ce->qkv, .segs = segs,
                            .n_segs = n_segs, .G = attention_group(ce, segs, n_segs)};
        attention_runs(&aj, NH, threadpool_size(ce->pool));
        threadpool_run(ce->pool, attention_job_run, &aj);
        cpu_matmul(ce, ce->x, C, ce->att, Q, &ly->o, ly->o_b, T, MM_ADD);
        cpu_norm(ce, ce->xn, ce->x, ly->ffn_norm_w, ly->ffn_norm_b, T);
        if (swiglu) {
            cpu_matmul(ce, ce->fc, ldfc, ce->xn, C, &ly->up, NULL, T, MM_STORE);
            swiglu_ctx g = {.kern = ce->kern, .gu = ce->fc, .ld = ldfc, .FF = FF};
            cpu_rows(ce, T, swiglu_rows, &g);
        } else {
            cpu_matmul(ce, ce->fc, ldfc, ce->xn, C, &ly->up, ly->up_b, T,
                       cfg->act == ARCH_ACT_GELU_ERF ? MM_GELU_ERF : MM_GELU_TANH);
        }
        cpu_matmul(ce, ce->x, C, ce->fc, ldfc, &ly->down, ly->down_b, T, MM_ADD);
        cpu_lens_keep(ce, lens, l + 1, T);
    }
    if (lo >= T)
        return true;
    const float *xl = ce->x + (size_t)lo * (size_t)C;
    float *xnl = ce->xn + (size_t)lo * (size_t)C;
    cpu_norm(ce, xnl, xl, ce->out_norm_w, ce->out_norm_b, T - lo);
    cpu_matmul(ce, out, cfg->V, xnl, C, &ce->lm_head, NULL, T - lo, MM_STORE);
    return true;
}

static tt_status cpu_reserve_logits(cpu_engine *ce, int rows, tt_error *err)
{
    if (rows <= ce->logits_rows)
        return TT_OK;
    size_t bytes = (size_t)rows * (size_t)ce->base.config->V * sizeof(float);
    float *p = malloc(bytes);
    if (!p)
        return tt_fail(err, TT_ERR_NOMEM, "cpu: cannot allocate %zu bytes of logits for %d rows",
                       bytes, rows);
    free(ce->base.logits);
    ce->base.logits = p;
    ce->base.memory_bytes += (size_t)(rows - ce->logits_rows) * (size_t)ce->base.config->V *
                             sizeof(float);
    ce->logits_rows = rows;
    return TT_OK;
}

static tt_status cpu_seq_forward(engine *e, int seq, const int32_t *ids, int n, int pos,
                                 bool all_logits, tt_error *err)
{
    cpu_engine *ce = (cpu_engine *)e;
    const int V = e->config->V;
    kvcache *kv = cpu_seq_cache(ce, seq);
    e->n_logits = 0;
    tt_status s = cpu_reserve_logits(ce, all_logits ? n : 1, err);
    if (s != TT_OK)
        return s;
    cpu_defer_adopt(ce);
    cpu_stepping(ce, true);
    kvcache_truncate(kv, pos);
    for (int s0 = 0; s0 < n; s0 += ce->TB) {
        int T = n - s0 < ce->TB ? n - s0 : ce->TB;
        bool last = s0 + T == n;
        int lo = all_logits ? 0 : last ? T - 1 : T;
        float *out = all_logits ? e->logits + (size_t)s0 * (size_t)V : e->logits;
        cpu_seg sg = {.cache = kv, .row = 0, .T = T, .pos = pos + s0};
        float *lens = seq == 0 && last ? e->lens : NULL;
        if (!cpu_forward_chunk(ce, ids + s0, T, &sg, 1, lo, out, lens,
                               T > 1 ? e->interrupt : NULL)) {
            cpu_stepping(ce, false);
            return tt_fail(err, TT_ERR_INTERRUPTED, "interrupted during prefill");
        }
        kv->n = pos + s0 + T;
        if (seq == 0)
            e->n_past = kv->n;
    }
    e->n_logits = all_logits ? n : 1;
    cpu_stepping(ce, false);
    cpu_defer_start(ce);
    return TT_OK;
}

static tt_status cpu_forward(engine *e, const int32_t *ids, int n, int pos, bool all_logits,
                             tt_error *err)
{
    return cpu_seq_forward(e, 0, ids, n, pos, all_logits, err);
}

static void cpu_seq_truncate(engine *e, int seq, int pos)
{
    cpu_engine *ce = (cpu_engine *)e;
    kvcache *kv = cpu_seq_cache(ce, seq);
    kvcache_truncate(kv, pos);
    if (seq == 0)
        e->n_past = kv->n;
}

static void cpu_truncate(engine *e, int pos)
{
    cpu_seq_truncate(e, 0, pos);
}

/* Rows of up to TB sequences at a time, one token each: every matmul streams the weights once for
 * the whole group. */
static tt_status cpu_forward_batch(engine *e, const int *seqs, const int32_t *ids, int B,
                                   tt_error *err)
{
    cpu_engine *ce = (cpu_engine *)e;
    const int V = e->config->V;
    e->n_logits = 0;
    tt_status s = cpu_reserve_logits(ce, B, err);
    if (s != TT_OK)
        return s;
    cpu_defer_adopt(ce);
    cpu_stepping(ce, true);
    for (int b0 = 0; b0 < B; b0 += ce->TB) {
        int T = B - b0 < ce->TB ? B - b0 : ce->TB;
        for (int b = 0; b < T; b++) {
            kvcache *kv = cpu_seq_cache(ce, seqs[b0 + b]);
            ce->segs[b] = (cpu_seg){.cache = kv, .row = b, .T = 1, .pos = kv->n};
        }
        cpu_forward_chunk(ce, ids + b0, T, ce->segs, T, 0, e->logits + (size_t)b0 * (size_t)V,
                          NULL, NULL);
        for (int b = 0; b < T; b++)
            ce->segs[b].cache->n++;
    }
    e->n_past = ce->cache.n;
    e->n_logits = B;
    cpu_stepping(ce, false);
    cpu_defer_start(ce);
    return TT_OK;
}

static tt_status cpu_seq_reserve(engine *e, int n, tt_error *err)
{
    cpu_engine *ce = (cpu_engine *)e;
    if (n <= ce->n_seqs)
        return TT_OK;
    kvcache *more = realloc(ce->more, (size_t)(n - 1) * sizeof *more);
    if (!more)
        return tt_fail(err, TT_ERR_NOMEM, "cpu: cannot allocate %d sequences", n);
    ce->more = more;
    const kvcache *c0 = &ce->cache;
    for (int i = ce->n_seqs; i < n; i++) {
        tt_status s = kvcache_init(&more[i - 1], c0->L, c0->NH, c0->HS, c0->n_ctx, err);
        if (s != TT_OK) {
            for (int k = ce->n_seqs; k < i; k++) {
                e->memory_bytes -= kvcache_bytes(&more[k - 1]);
                kvcache_free(&more[k - 1]);
            }
            return s;
        }
        e->memory_bytes += kvcache_bytes(&more[i - 1]);
    }
    ce->n_seqs = n;
    return TT_OK;
}

static int cpu_seq_count(const engine *e)
{
    return ((const cpu_engine *)e)->n_seqs;
}

static int cpu_seq_len(const engine *e, int seq)
{
    return cpu_seq_cache((cpu_engine *)e, seq)->n;
}

/* Keys are transposed in blocks of positions (kernels_key_at): a whole block is one copy, the
 * part of a block at either end one per dimension; values are whole position rows. */
static void cpu_seq_copy(engine *e, int dst, int src, int from, int n)
{
    cpu_engine *ce = (cpu_engine *)e;
    kvcache *d = cpu_seq_cache(ce, dst);
    const kvcache *s = cpu_seq_cache(ce, src);
    const int HS = s->HS, KB = KERNELS_KEY_BLOCK;
    size_t len = (size_t)(n - from);
    for (int l = 0; l < s->L && len > 0; l++)
        for (int h = 0; h < s->NH; h++) {
            for (int t = from, t1; t < n; t = t1) {
                t1 = (t / KB + 1) * KB < n ? (t / KB + 1) * KB : n;
                size_t koff = kernels_key_at(HS, s->ldk, h, 0, t);
                float *dk = kvcache_k(d, l) + koff;
                const float *sk = kvcache_k(s, l) + koff;
                if (t1 - t == KB)
                    memcpy(dk, sk, (size_t)HS * KB * sizeof(float));
                else
                    for (int k = 0; k < HS; k++)
                        memcpy(dk + (size_t)k * KB, sk + (size_t)k * KB,
                               (size_t)(t1 - t) * sizeof(float));
            }
            size_t voff = ((size_t)h * (size_t)s->n_ctx + (size_t)from) * (size_t)s->HS;
            memcpy(kvcache_v(d, l) + voff, kvcache_v(s, l) + voff,
                   len * (size_t)s->HS * sizeof(float));
        }
    d->n = n;
    if (dst == 0)
        e->n_past = n;
}

const kvcache *cpu_engine_kvcache(const engine *e)
{
    return &((const cpu_engine *)e)->cache;
}

/* ---------------------------------------------------------------------------------------------
 * Creation */

static void cpu_destroy(engine *e)
{
    cpu_engine *ce = (cpu_engine *)e;
    if (!ce)
        return;
    cpu_defer_free(ce);
    threadpool_free(ce->pool);
    if (ce->layers) {
        for (int l = 0; l < e->config->L; l++) {
            cpu_layer *ly = &ce->layers[l];
            packed_matrix_free(&ly->qkv);
            packed_matrix_free(&ly->o);
            packed_matrix_free(&ly->up);
            packed_matrix_free(&ly->down);
        }
        free(ce->layers);
    }
    packed_matrix_free(&ce->lm_head);
    weight_arena_free(ce->arena);  /* after the repacking thread (cpu_defer_free) and matrices */
    weight_arena_free(ce->copies);
    free(ce->copied);
    free(ce->vectors);
    kvcache_free(&ce->cache);
    for (int i = 1; i < ce->n_seqs; i++)
        kvcache_free(&ce->more[i - 1]);
    free(ce->more);
    free(ce->segs);
    free(ce->x);
    free(ce->xn);
    free(ce->qkv);
    free(ce->att);
    free(ce->fc);
    free(ce->scratch);
    free(ce->mm_scratch);
    free(ce->xq);
    free(ce->xb);
    free(ce->embed_row);
    free(ce->rope_cos);
    free(ce->rope_sin);
    free(e->logits);
    free(ce);
}

static const engine_seq_ops cpu_seq_ops = {
    .reserve = cpu_seq_reserve,
    .count = cpu_seq_count,
    .len = cpu_seq_len,
    .forward = cpu_seq_forward,
    .forward_batch = cpu_forward_batch,
    .copy = cpu_seq_copy,
    .truncate = cpu_seq_truncate,
};

/* engine_warm: the calling thread reads what a step reads, one load per cache line, pass after
 * pass until the deadline. For a small model it runs where the step will: the session makes such
 * an engine solo (engine_set_solo) for the step after a hold, which the caller computes alone; a
 * larger one reads the start of its weights and wakes the memory system for all its threads.
 *
 * Region r of what a decode step reads: the layers' four matrices (each up to KERNELS_GGUF_PARTS
 * spans: a TT_GGUF matrix is its tensors in the mapping), the LM head, the vectors, then per
 * layer and head the keys and the values of the positions held. Returns its bytes (0: none). */
static size_t warm_region(const cpu_engine *ce, int r, const unsigned char **p)
{
    const int L = ce->base.config->L, NP = KERNELS_GGUF_PARTS;
    const kvcache *c = &ce->cache;
    const packed_matrix *m = NULL;
    if (r < 5 * L * NP) {
        const int mi = r / NP, part = r % NP;
        if (mi < 4 * L) {
            const cpu_layer *ly = &ce->layers[mi / 4];
            const packed_matrix *ms[] = {&ly->qkv, &ly->o, &ly->up, &ly->down};
            m = ms[mi % 4];
        } else if (mi == 4 * L) {
            m = &ce->lm_head;
        } else {
            return 0;
        }
        if (m->dtype == TT_GGUF) {
            if (part >= m->n_parts)
                return 0;
            *p = m->parts[part].data;
            return m->parts[part].row_bytes * (size_t)m->parts[part].N;
        }
        *p = m->data;
        return part == 0 && m->data ? packed_matrix_bytes(m->dtype, m->K, m->N) : 0;
    }
    r -= 5 * L * NP - 4 * L - 1;
    if (r == 4 * L + 1) {
        *p = (const unsigned char *)ce->vectors;
        return ce->vectors_len * sizeof(float);
    }
    r -= 4 * L + 2;
    int lh = r / 2, l = lh / c->NH, h = lh % c->NH;
    if (r % 2 == 0) {
        size_t blocks = ((size_t)c->n + KERNELS_KEY_BLOCK - 1) / KERNELS_KEY_BLOCK;
        *p = (const unsigned char *)(kvcache_k(c, l) + (size_t)h * c->HS * c->ldk);
        return blocks * KERNELS_KEY_BLOCK * (size_t)c->HS * sizeof(float);
    }
    *p = (const unsigned char *)(kvcache_v(c, l) + (size_t)h * c->n_ctx * c->HS);
    return (size_t)c->n * (size_t)c->HS * sizeof(float);
}

static void cpu_warm(engine *e, double ms)
{
    cpu_engine *ce = (cpu_engine *)e;
    const kvcache *c = &ce->cache;
    const int n_regions = 5 * e->config->L * KERNELS_GGUF_PARTS + 1 + 2 * c->L * c->NH;
    const double until_ms = tt_now_ms() + ms;
    do {
        for (int r = 0; r < n_regions; r++) {
            const unsigned char *p;
            size_t n = warm_region(ce, r, &p);
            for (size_t i = 0; i < n; i += 64) {
                (void)*(const volatile unsigned char *)(p + i);
                if ((i & 16383) == 0 && tt_now_ms() >= until_ms)
                    return;
            }
        }
    } while (tt_now_ms() < until_ms);
}

static void cpu_set_solo(engine *e, bool solo)
{
    threadpool_set_solo(((cpu_engine *)e)->pool, solo);
}

static const engine_ops cpu_ops = {
    .name = "cpu",
    .forward = cpu_forward,
    .truncate = cpu_truncate,
    .destroy = cpu_destroy,
    .seq = &cpu_seq_ops,
    .warm = cpu_warm,
    .set_solo = cpu_set_solo,
};

/* Packing, spread over the pool: a 124M model is 124M conversions. */

/* The bytes of a bound tensor of n rows of K in the file. */
static size_t tensor_file_bytes(tensor_ref t, int K, int n)
{
    uint64_t row = (uint64_t)K * tt_dtype_size(t.dtype);
    if (t.quantized && !quant_row_bytes(t.quant, (uint64_t)K, &row))
        return 0;
    return (size_t)row * (size_t)n;
}

typedef struct {
    packed_matrix *m;
    const pack_part *parts;
    int n_parts;
    const gguf_file *gguf;         /* the mapping the parts lie in, or NULL */
    threadpool_chunks panels;      /* blocks of 8 panels */
} pack_job;

/* Releases the mapped pages of rows [a, b) of an (N, K) part once they are packed, so that the
 * file's pages and the packed copy are not resident together (peak: the copy plus the chunks in
 * flight). Rows in llama.cpp's q/k order come from the whole head; gguf_release keeps the pages
 * a neighbouring chunk's rows share (and a page released early is only read again). */
static void pack_release_rows(const gguf_file *gguf, int K, const pack_part *part, int a, int b)
{
    const int hs = part->src.head_rows;
    if (!gguf || part->src.in_out)
        return;
    if (hs > 1) {
        a = a / hs * hs;
        b = (b + hs - 1) / hs * hs;
        if (b > part->cols)
            b = part->cols;
    }
    const size_t row = tensor_file_bytes(part->src, K, 1);
    gguf_release(gguf, (const unsigned char *)part->src.data + (size_t)a * row,
                 (size_t)(b - a) * row);
}

/* Panels [p0, p1) of the (K, N) matrix over parts into dst, whose panel 0 is the matrix's panel
 * first (0: dst is the whole matrix; else a window of it, its columns shifted by 32 first).
 * release: the mapping whose pages of the packed rows are released (pack_release_rows), or
 * NULL to keep them. */
static void pack_panels(packed_matrix *dst, int first, const pack_part *parts, int n_parts,
                        int N, int p0, int p1, const gguf_file *release)
{
    const int shift = first * KERNELS_NR, n0 = p0 * KERNELS_NR;
    const int n1 = p1 * KERNELS_NR < N ? p1 * KERNELS_NR : N;
    packed_matrix_clear_panels(dst, p0 - first, p1 - first);
    for (int i = 0, col0 = 0; i < n_parts; col0 += parts[i].cols, i++) {
        int a = n0 > col0 ? n0 : col0;
        int b = n1 < col0 + parts[i].cols ? n1 : col0 + parts[i].cols;
        if (a < b) {
            packed_matrix_pack_at(dst, parts[i].src, !parts[i].src.in_out, parts[i].cols,
                                  col0 - shift, a - col0, b - col0);
            pack_release_rows(release, dst->K, &parts[i], a - col0, b - col0);
        }
    }
}

static void pack_job_run(void *varg, int ith, int nth)
{
    pack_job *j = varg;
    int c;
    while ((c = threadpool_next_chunk(&j->panels)) >= 0) {
        int p1 = (c + 1) * 8 < j->m->n_panels ? (c + 1) * 8 : j->m->n_panels;
        pack_panels(j->m, 0, j->parts, j->n_parts, j->m->N, c * 8, p1, j->gguf);
    }
}

/* Regrouping a TT_GGUF part for a set with gguf_groups (kernels.h, packed_gguf_group), in blocks
 * of about 1 MiB of groups (64 of a K 2048 Q4_K part), each block's file pages released once
 * copied: what the copy holds beyond the file's size at any time is a block a thread. */
typedef struct {
    pack_job pack;                 /* the matrix, its parts and the mapping */
    int part;
    int block;                     /* groups a block */
    threadpool_chunks groups;
} group_job;

static void group_job_run(void *varg, int ith, int nth)
{
    group_job *j = varg;
    const int G = j->pack.m->parts[j->part].N / KERNELS_GGUF_GROUP;
    int c;
    while ((c = threadpool_next_chunk(&j->groups)) >= 0) {
        const int g0 = c * j->block, g1 = g0 + j->block < G ? g0 + j->block : G;
        packed_gguf_group(j->pack.m, j->part, g0, g1);
        pack_release_rows(j->pack.gguf, j->pack.m->K, &j->pack.parts[j->part],
                          g0 * KERNELS_GGUF_GROUP,
                          g1 * KERNELS_GGUF_GROUP);
    }
}

/* The dtype a matrix over parts is held in by an engine of dtype d: d, except under TT_GGUF,
 * where tensors the GGUF kernels read are used in place (TT_GGUF: all quantized, or all F16, or
 * all BF16) and any other matrix is packed as close to its file as the kernels go: F16 when every
 * part is F16 (or a quantized type without a kernel), else F32. */
static tt_dtype cpu_matrix_dtype(tt_dtype d, int K, const pack_part *parts, int n_parts)
{
    if (d != TT_GGUF)
        return d;
    bool in_place = true, f16 = true;
    const uint32_t t0 = packed_gguf_tensor_type(&parts[0].src);
    for (int i = 0; i < n_parts; i++) {
        const tensor_ref *t = &parts[i].src;
        const uint32_t q = packed_gguf_tensor_type(t);
        in_place &= packed_gguf_type_ok(q, K) && !t->in_out &&
                    (t->quantized ? parts[0].src.quantized : q == t0);
        f16 &= t->quantized || t->dtype == TT_F16;
    }
    return in_place ? TT_GGUF : f16 ? TT_F16 : TT_F32;
}

/* ---------------------------------------------------------------------------------------------
 * Deferred repacking
 *
 * A GGUF Q8_0 file held in q8 is the q8 layout's blocks already, one row a column: repacking is a
 * reshuffle of its bytes (q8_repack). Done at creation it was most of a cold start (2.4 s for a
 * 1.3 GB file against llama.cpp's 0.8 s, docs/performance.md), and not for the copying: the
 * first touch of a gigabyte of fresh anonymous memory, which a virtual machine may back page by
 * page at a fraction of memory's speed. So the engine starts from the file's pages (in the page
 * cache, backed already): until a matrix is repacked, each matmul packs the panels it reads into
 * a small per-thread window (matmul_panels), the same bytes through the same kernel. After the
 * first step (the first token is out), or as soon as the caller waits for a person
 * (cpu_engine_load_in_background: the REPL's prompt), one thread repacks the matrices in order,
 * releasing the file's pages as it goes (peak memory as before); each step starts by adopting
 * those finished (cpu_defer_adopt), so a later step is as fast as a repacked engine's. Then the
 * same thread copies a GGUF file's rows read in place onto huge pages ("Copies onto huge pages")
 * and moves the engine's weights onto huge pages (weight_arena_settle: packed on 4 KiB pages at
 * creation, where fresh huge pages would cost the first token as much again), every engine's,
 * deferred matrices or not. cpu_engine_finish_load waits for it all (bench: the figures of the
 * settled engine). */

/* Whether a matrix of dtype d over parts is repacked later: q8 from Q8_0 rows of K in a GGUF
 * mapping (the case q8_repack copies as they are). */
static bool cpu_pack_deferrable(const cpu_engine *ce, tt_dtype d, int K, const pack_part *parts,
                                int n_parts)
{
    if (d != TT_Q8 || !ce->deferred || !ce->base.model->gguf || K % TT_Q8_BLOCK != 0)
        return false;
    for (int i = 0; i < n_parts; i++) {
        const tensor_ref *t = &parts[i].src;
        if (!t->quantized || t->quant != QUANT_Q8_0 || t->in_out || t->row_len != K)
            return false;
    }
    return true;
}

/* Each deferred matrix in turn into its own copy, published by ready. */
static void cpu_repack(cpu_engine *ce)
{
    const gguf_file *g = ce->base.model->gguf;
    for (int i = 0; i < ce->n_deferred; i++) {
        cpu_deferred *d = &ce->deferred[i];
        const int K = d->m->K, N = d->m->N;  /* the shape cpu_pack gave it (adoption keeps it) */
        if (packed_matrix_alloc(&d->packed, ce->arena, TT_Q8, K, N, NULL) != TT_OK)
            return;                /* the rest stay packed at each use: slower, the same bits */
        const int np = d->packed.n_panels;
        for (int p = 0; p < np; p += 8) {
            if (atomic_load_explicit(&ce->repack_cancel, memory_order_relaxed))
                return;            /* cpu_defer_free frees d->packed */
            const int p1 = p + 8 < np ? p + 8 : np;
            pack_panels(&d->packed, 0, d->parts, d->n_parts, N, p, p1, g);
            atomic_store_explicit(&d->panels_done, p1, memory_order_release);
        }
        for (int k = 0; k < d->n_parts; k++)
            gguf_release(g, d->parts[k].src.data,
                         tensor_file_bytes(d->parts[k].src, K, d->parts[k].cols));
        atomic_store_explicit(&d->ready, 1, memory_order_release);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Copies onto huge pages
 *
 * The parts of a GGUF file's matrices that the kernels read where the file stores them (F16 and
 * BF16 files' matrices, a quantized part not regrouped) are read from the page cache's 4 KiB
 * pages: a TLB miss every 64 lines, the prefetchers stopping at every page. On 2 MiB pages a
 * Llama-3.2-1B F16 file decodes 6-8% and prefills 9-14% faster on the Xeon (docs/performance.md).
 * Copying them at creation would cost the first token the first touch of gigabytes of fresh
 * memory (see "Deferred repacking"), so the repacking thread copies them after the first step (or
 * while the REPL's prompt waits), in the order a step reads them, 2 MiB of rows at a time into an
 * arena on huge pages: each run is published (rows_done), then its file pages released, so that
 * resident memory stays about the file's size. A step reads what is done from the copy
 * (cpu_copy_view) and adopts each complete copy as the part's rows (cpu_defer_adopt).
 *
 * Only where the steps pause (cpu_pause_wait, with no limit; a person reading or typing, the wait
 * of cpu_engine_finish_load), on a niced thread: beside back-to-back steps of an unpaced
 * generation the copy of that file took 10-20 s of 2 vCPUs' gaps and made steps of 95 ms take
 * 130-170 ms now and then, a loss the faster steps after it took a minute to repay; in a pause it
 * takes 0.7-0.8 s. Skipped where the kernel gives no huge pages (transparent huge pages
 * "never"). */

#define CPU_COPY_BYTES ((size_t)2 << 20)   /* a run of rows copied, then published and released */

/* Whether the kernel gives this process transparent huge pages when asked (madvise or always). */
static bool cpu_huge_pages(void)
{
    char *text = NULL;
    if (util_read_file("/sys/kernel/mm/transparent_hugepage/enabled", 0, &text, NULL, NULL,
                       NULL) != TT_OK)
        return false;
    const bool on = !strstr(text, "[never]");
    free(text);
    return on;
}

static int cpu_gcd(int a, int b)
{
    while (b) {
        const int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Part i of m, read where the file stores it, to be copied: one entry. */
static void cpu_copy_register(cpu_engine *ce, packed_matrix *m, int i)
{
    const packed_gguf_part *pt = &m->parts[i];
    if (!ce->copied || pt->groups || !pt->data || pt->N <= 0)
        return;
    int unit = KERNELS_NR;         /* whole panels; with llama.cpp's q/k order, whole heads */
    if (pt->head_rows > 0)
        unit = unit / cpu_gcd(unit, pt->head_rows) * pt->head_rows;
    ce->copied[ce->n_copied++] = (cpu_copied){.m = m, .part = i, .file = pt->data, .N = pt->N,
                                             .unit = unit, .row_bytes = pt->row_bytes};
}

static bool cpu_pause_wait(cpu_engine *ce, double max_ms);

/* Copies up to *rows rows (INT64_MAX: all) of the parts from copy_next on, publishing each run and
 * releasing its file pages, each run once the steps pause where paced; false once cancelled or
 * out of memory (the rest stay read from the file: slower, the same bits). */
static bool cpu_copy(cpu_engine *ce, int64_t *rows, bool paced)
{
    const gguf_file *g = ce->base.model->gguf;
    for (; ce->copy_next < ce->n_copied; ce->copy_next++) {
        cpu_copied *c = &ce->copied[ce->copy_next];
        const size_t bytes = (size_t)c->N * c->row_bytes;
        if (!c->copy && !(c->copy = weight_arena_alloc(ce->copies, bytes)))
            return false;
        int step = (int)(CPU_COPY_BYTES / c->row_bytes) / c->unit * c->unit;
        step = step < c->unit ? c->unit : step;
        for (int r = atomic_load_explicit(&c->rows_done, memory_order_relaxed); r < c->N;) {
            if (atomic_load_explicit(&ce->repack_cancel, memory_order_relaxed))
                return false;
            if (*rows <= 0)
                return true;
            if (paced && !cpu_pause_wait(ce, INFINITY))
                return false;
            int n = step;
            if (n > *rows)         /* a caller's limit: whole units, at least one */
                n = *rows < c->unit ? c->unit : (int)(*rows / c->unit * c->unit);
            n = c->N - r < n ? c->N - r : n;
            const size_t off = (size_t)r * c->row_bytes, len = (size_t)n * c->row_bytes;
            memcpy(c->copy + off, c->file + off, len);
            r += n;
            *rows -= n;
            atomic_store_explicit(&c->rows_done, r, memory_order_release);
            gguf_release(g, c->file + off, len);
        }
    }
    return true;
}

static void cpu_stepping(cpu_engine *ce, bool on)
{
    if (!on)
        atomic_store_explicit(&ce->step_end_ms, tt_now_ms(), memory_order_relaxed);
    atomic_store_explicit(&ce->stepping, on, memory_order_relaxed);
}

/* The background work's wait before each piece (a copy's run, a settling's 2 MiB): until no step
 * has run for CPU_SETTLE_IDLE_MS (a pacing hold, a person typing, cpu_engine_finish_load),
 * checking every millisecond; false once the engine is being freed. Steps that run back to back
 * without such a pause for max_ms are not waited for any longer. */
#define CPU_SETTLE_IDLE_MS 5.0

static bool cpu_pause_wait(cpu_engine *ce, double max_ms)
{
    if (ce->settle_go_ms == 0)
        ce->settle_go_ms = tt_now_ms();
    for (;;) {
        if (atomic_load_explicit(&ce->repack_cancel, memory_order_relaxed))
            return false;
        const double now = tt_now_ms();
        const double idle_ms =
            now - atomic_load_explicit(&ce->step_end_ms, memory_order_relaxed);
        if (!atomic_load_explicit(&ce->stepping, memory_order_relaxed) &&
            idle_ms >= CPU_SETTLE_IDLE_MS) {
            ce->settle_go_ms = now;
            return true;
        }
        if (now - ce->settle_go_ms >= max_ms)
            return true;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
}

/* The settling's wait (weight_arena_settle_paced). A collapse while the steps run stalls them (a
 * background thread collapsing between a Llama-3.2-1B Q4_K_M's steps on a 2-core VM took the
 * decode from 30 to 7-15 tok/s for the 1-2 s it took); after CPU_SETTLE_WAIT_MAX_MS of steps
 * without a pause (a long unpaced generation) it goes ahead: the stall once, then the speed of
 * huge pages (docs/bench/2026-11-28-xeon.md). */
#define CPU_SETTLE_WAIT_MAX_MS 10000.0

static bool cpu_settle_wait(void *arg)
{
    return cpu_pause_wait(arg, CPU_SETTLE_WAIT_MAX_MS);
}

/* What the repacking thread does after the first step: each deferred matrix in turn into its own
 * copy, published by ready; then, niced (on its own thread: when steps start again during a run
 * of rows, a thread of its own kind would take a core from them, and the thread pool, which
 * leaves niced time out of the load it watches (threads.h), would count it as another process's
 * and use fewer threads; unpaced beside the steps, unniced, it took them from 10.3 to 7.4 tok/s),
 * the copies onto huge pages in the pauses; then the arena settled onto huge pages while the
 * steps pause. */
static void cpu_background(cpu_engine *ce, bool own_thread)
{
    cpu_repack(ce);
#ifdef SYS_gettid
    if (own_thread && ce->n_copied > 0)
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);   /* failure costs speed */
#endif
    int64_t all = INT64_MAX;
    cpu_copy(ce, &all, own_thread);
    weight_arena_settle_paced(ce->arena, cpu_settle_wait, ce);
}

static void *cpu_repack_main(void *arg)
{
    cpu_background(arg, true);
    return NULL;
}

/* Starts the repacking thread, once; where no thread can start, matrices stay packed at each use
 * and the weights on 4 KiB pages until cpu_engine_finish_load. */
static void cpu_defer_start(cpu_engine *ce)
{
    if (ce->repack != CPU_REPACK_IDLE)
        return;
    if (pthread_create(&ce->repacker, NULL, cpu_repack_main, ce) == 0)
        ce->repack = CPU_REPACK_RUNNING;
}

static void cpu_defer_join(cpu_engine *ce)
{
    if (ce->repack == CPU_REPACK_RUNNING)
        pthread_join(ce->repacker, NULL);
    ce->repack = CPU_REPACK_JOINED;
}

/* Between steps (the pool idle): the matrices repacked since replace their shapes; once all are,
 * the windows are freed (the thread, settling the arena, is joined by cpu_engine_finish_load or
 * at the end). */
static void cpu_defer_adopt(cpu_engine *ce)
{
    for (int i = 0; ce->n_copies_adopted < ce->n_copied && i < ce->n_copied; i++) {
        cpu_copied *c = &ce->copied[i];
        if (!c->adopted && atomic_load_explicit(&c->rows_done, memory_order_acquire) == c->N) {
            c->m->parts[c->part].data = c->copy;
            c->adopted = true;
            ce->n_copies_adopted++;
            /* pages a step faulted back in while reading the file's rows (cpu_copy_view) */
            gguf_release(ce->base.model->gguf, c->file, (size_t)c->N * c->row_bytes);
        }
    }
    if (ce->n_adopted == ce->n_deferred)
        return;
    for (int i = 0; i < ce->n_deferred; i++) {
        cpu_deferred *d = &ce->deferred[i];
        if (!d->adopted && atomic_load_explicit(&d->ready, memory_order_acquire)) {
            *d->m = d->packed;
            memset(&d->packed, 0, sizeof d->packed);
            d->adopted = true;
            ce->n_adopted++;
        }
    }
    if (ce->n_adopted == ce->n_deferred) {
        free(ce->defer_buf);
        ce->defer_buf = NULL;
    }
}

void cpu_engine_load_in_background(engine *e)
{
    if (e && e->ops == &cpu_ops)
        cpu_defer_start((cpu_engine *)e);
}

int cpu_engine_copy_ahead(engine *e, int64_t rows)
{
    if (!e || e->ops != &cpu_ops)
        return -1;
    cpu_engine *ce = (cpu_engine *)e;
    if (!ce->copied || ce->repack != CPU_REPACK_IDLE)
        return -1;
    cpu_copy(ce, &rows, false);
    int left = 0;
    for (int i = 0; i < ce->n_copied; i++)
        left += atomic_load_explicit(&ce->copied[i].rows_done, memory_order_relaxed) <
                ce->copied[i].N;
    return left;
}

int cpu_engine_finish_load(engine *e)
{
    if (!e || e->ops != &cpu_ops)
        return 0;
    cpu_engine *ce = (cpu_engine *)e;
    const int waiting = ce->n_deferred - ce->n_adopted;
    if (ce->repack == CPU_REPACK_IDLE)
        cpu_defer_start(ce);
    if (ce->repack == CPU_REPACK_IDLE) {   /* no thread: here */
        cpu_background(ce, false);
        ce->repack = CPU_REPACK_JOINED;
    }
    cpu_defer_join(ce);
    cpu_defer_adopt(ce);
    return waiting;
}

static void cpu_defer_free(cpu_engine *ce)
{
    atomic_store(&ce->repack_cancel, true);
    cpu_defer_join(ce);
    for (int i = 0; ce->deferred && i < ce->n_deferred; i++)
        if (!ce->deferred[i].adopted)
            packed_matrix_free(&ce->deferred[i].packed);
    free(ce->deferred);
    free(ce->defer_buf);
}

static tt_status cpu_pack(cpu_engine *ce, packed_matrix *m, int K, const pack_part *parts,
                          int n_parts, tt_error *err)
{
    int N = 0;
    for (int i = 0; i < n_parts; i++)
        N += parts[i].cols;
    const tt_dtype d = cpu_matrix_dtype(ce->base.dtype, K, parts, n_parts);
    if (d == TT_GGUF) {
        tensor_ref src[KERNELS_GGUF_PARTS];
        int cols[KERNELS_GGUF_PARTS];
        for (int i = 0; i < n_parts; i++) {
            src[i] = parts[i].src;
            cols[i] = parts[i].cols;
        }
        packed_matrix_gguf(m, K, src, cols, n_parts);
        ce->base.weight_bytes += packed_matrix_size(m);
        ce->gguf_xb |= kernels_reads_xb(ce->kern, m);
        /* Q4_K, Q6_K, Q4_0 and Q5_0 regrouped for the kernels that read them so (out of memory:
         * left as they are): decode, prefill and verification then read the same layout, each
         * output one chain (kernels_gguf_simd.h, gg_group_rows and gg_group_rows_q0). */
        for (int i = 0; ce->kern->gguf_groups && i < n_parts; i++) {
            if (!packed_gguf_groupable(m, i) || !packed_gguf_group_alloc(m, i, ce->arena))
                continue;
            group_job j = {.pack = {.m = m, .parts = parts, .n_parts = n_parts,
                                    .gguf = ce->base.model->gguf},
                           .part = i};
            const size_t stride = (size_t)KERNELS_GGUF_GROUP * m->parts[i].row_bytes;
            j.block = stride >= ((size_t)1 << 20) ? 1 : (int)(((size_t)1 << 20) / stride);
            const int G = m->parts[i].N / KERNELS_GGUF_GROUP;
            threadpool_chunks_init(&j.groups, (G + j.block - 1) / j.block);
            threadpool_run(ce->pool, group_job_run, &j);
        }
        for (int i = 0; i < m->n_parts; i++)
            cpu_copy_register(ce, m, i);
        return TT_OK;
    }
    if (cpu_pack_deferrable(ce, d, K, parts, n_parts)) {
        cpu_deferred *def = &ce->deferred[ce->n_deferred++];
        packed_matrix_shape(m, TT_Q8, K, N);
        def->m = m;
        memcpy(def->parts, parts, (size_t)n_parts * sizeof *parts);
        def->n_parts = n_parts;
        ce->base.weight_bytes += packed_matrix_bytes(TT_Q8, K, N);
        return TT_OK;
    }
    tt_status s = packed_matrix_alloc(m, ce->arena, d, K, N, err);
    if (s != TT_OK)
        return s;
    pack_job j = {.m = m, .parts = parts, .n_parts = n_parts, .gguf = ce->base.model->gguf};
    threadpool_chunks_init(&j.panels, (m->n_panels + 7) / 8);
    threadpool_run(ce->pool, pack_job_run, &j);
    ce->base.weight_bytes += packed_matrix_bytes(m->dtype, K, N);
    /* The copy is what the kernels read: the file's pages of it need not stay resident. */
    for (int i = 0; ce->base.model->gguf && i < n_parts; i++)
        gguf_release(ce->base.model->gguf, parts[i].src.data,
                     tensor_file_bytes(parts[i].src, K, parts[i].cols));
    return TT_OK;
}

/* Copies a vector parameter out of the mapping, rounded to the held dtype; NULL when the recipe
 * has none (src.data NULL). parts: up to three tensors side by side (q | k | v biases). */
static float *cpu_vector_parts(cpu_engine *ce, size_t *used, const pack_part *parts, int n_parts)
{
    if (!parts[0].src.data)
        return NULL;
    float *dst = ce->vectors + *used;
    for (int i = 0; i < n_parts; i++) {
        float *p = ce->vectors + *used;
        tensor_ref_to_f32(parts[i].src, 0, (size_t)parts[i].cols, p);
        for (int k = 0; k < parts[i].cols; k++)
            p[k] = tt_held_f32(ce->base.dtype, p[k]);
        *used += (size_t)parts[i].cols;
    }
    return dst;
}

static float *cpu_vector(cpu_engine *ce, size_t *used, tensor_ref src, int n)
{
    pack_part part = {src, n};
    return cpu_vector_parts(ce, used, &part, 1);
}

/* The longest row a matmul reads: C, the feed-forward width or the query width. */
static size_t cpu_kmax(const model_config *cfg)
{
    const size_t C = (size_t)cfg->C, Q = (size_t)model_config_qdim(cfg);
    const size_t FF = (size_t)cfg->FF * (cfg->features & ARCH_F_SWIGLU ? 2 : 1);
    return C > FF ? (C > Q ? C : Q) : (FF > Q ? FF : Q);
}

/* Bytes on 64-byte lines (NULL when out of memory; free() frees them), for activation rows,
 * scratch and panel windows: malloc's large blocks start 16 bytes into a page, which splits every
 * 64-byte load of a row across two lines (prefill of F16 and BF16 GGUF files and of bf16 on AMX
 * measured 7-15% slower so: the dated bench file of 2026-11-28 in docs/bench). */
static void *cpu_alloc_rows(size_t bytes)
{
    void *p = NULL;
    return posix_memalign(&p, 64, bytes ? bytes : 64) == 0 ? p : NULL;
}

/* The bf16 activation rows of the matmuls that read them (kernels_reads_xb). */
static tt_status cpu_alloc_xb(cpu_engine *ce, tt_error *err)
{
    const size_t kmax = cpu_kmax(ce->base.config), bytes = (size_t)ce->TB * kmax * sizeof *ce->xb;
    ce->ldxb = (int)kmax;
    ce->xb = cpu_alloc_rows(bytes);
    if (!ce->xb)
        return tt_fail(err, TT_ERR_NOMEM, "cpu: cannot allocate %zu bytes of bf16 activations",
                       bytes);
    ce->base.memory_bytes += bytes;
    return TT_OK;
}

static tt_status cpu_alloc_activations(cpu_engine *ce, tt_error *err)
{
    const model_config *cfg = ce->base.config;
    const size_t TB = (size_t)ce->TB, C = (size_t)cfg->C;
    const size_t FF = (size_t)cfg->FF * (cfg->features & ARCH_F_SWIGLU ? 2 : 1);
    const size_t Q = (size_t)model_config_qdim(cfg), QKV = (size_t)model_config_qkvdim(cfg);
    const size_t KMAX = cpu_kmax(cfg);
    int nth = threadpool_size(ce->pool);
    size_t elems = TB * C * 2 + TB * QKV + TB * Q + TB * FF +
                   (size_t)nth * KERNELS_ATTN_SCRATCH(ce->cache.n_ctx) + C;
    ce->x = cpu_alloc_rows(TB * C * sizeof(float));
    ce->xn = cpu_alloc_rows(TB * C * sizeof(float));
    ce->qkv = cpu_alloc_rows(TB * QKV * sizeof(float));
    ce->att = cpu_alloc_rows(TB * Q * sizeof(float));
    ce->fc = cpu_alloc_rows(TB * FF * sizeof(float));
    ce->scratch =
        cpu_alloc_rows((size_t)nth * KERNELS_ATTN_SCRATCH(ce->cache.n_ctx) * sizeof(float));
    ce->embed_row = malloc(C * sizeof(float));
    ce->segs = malloc(TB * sizeof *ce->segs);
    ce->mm_stride = (KERNELS_MATMUL_SCRATCH(KMAX) + 15) & ~(size_t)15;
    if (ce->base.dtype == TT_Q8 || ce->base.dtype == TT_GGUF) {
        ce->ldxq = KERNELS_Q8_ACT_BLOCKS(KMAX);
        ce->xq = cpu_alloc_rows(TB * (size_t)ce->ldxq * sizeof *ce->xq);
        if (!ce->xq)
            return tt_fail(err, TT_ERR_NOMEM, "cpu: cannot allocate %zu bytes of quantized "
                           "activations", TB * (size_t)ce->ldxq * sizeof *ce->xq);
        ce->base.memory_bytes += TB * (size_t)ce->ldxq * sizeof *ce->xq;
    }
    tt_status s;
    if (ce->base.dtype == TT_BF16 && ce->kern->bf16_rows && (s = cpu_alloc_xb(ce, err)) != TT_OK)
        return s;
    if (cfg->features & ARCH_F_ROPE) {
        const int n_ctx = ce->cache.n_ctx, half = cfg->HS / 2;
        ce->rope_cos = malloc((size_t)n_ctx * (size_t)half * sizeof(float));
        ce->rope_sin = malloc((size_t)n_ctx * (size_t)half * sizeof(float));
        if (!ce->rope_cos || !ce->rope_sin)
            return tt_fail(err, TT_ERR_NOMEM, "cpu: cannot allocate the RoPE tables");
        arch_rope_tables(cfg, n_ctx, ce->rope_cos, ce->rope_sin);
        ce->base.memory_bytes += 2 * (size_t)n_ctx * (size_t)half * sizeof(float);
    }
    elems += (size_t)nth * ce->mm_stride;
    ce->mm_scratch = cpu_alloc_rows((size_t)nth * ce->mm_stride * sizeof(float));
    if (!ce->x || !ce->xn || !ce->qkv || !ce->att || !ce->fc || !ce->scratch || !ce->embed_row ||
        !ce->mm_scratch || !ce->segs)
        return tt_fail(err, TT_ERR_NOMEM, "cpu: cannot allocate %zu bytes of activations",
                       elems * sizeof(float));
    ce->base.memory_bytes += elems * sizeof(float);
    return TT_OK;
}

/* Every layer's matrices packed, fused where the kernels want one matmul (q | k | v,
 * gate | up), and its vectors copied, walking the roles the architecture bound. */
static tt_status cpu_load_weights(cpu_engine *ce, tt_error *err)
{
    const model *m = ce->base.model;
    const model_config *cfg = &m->config;
    const int C = cfg->C, FF = cfg->FF, L = cfg->L, HS = cfg->HS;
    const int Q = model_config_qdim(cfg), KV = model_config_kvdim(cfg);
    const int QKV = model_config_qkvdim(cfg);
    tt_status s;

    ce->vectors_len = (size_t)L * (6 * (size_t)C + (size_t)QKV + 2 * (size_t)HS + (size_t)FF) +
                      2 * (size_t)C;
    ce->vectors = malloc(ce->vectors_len * sizeof(float));
    ce->layers = calloc((size_t)L, sizeof *ce->layers);
    ce->deferred = calloc(4 * (size_t)L + 1, sizeof *ce->deferred);
    if (!ce->vectors || !ce->layers || !ce->deferred)
        return tt_fail(err, TT_ERR_NOMEM, "cpu: cannot allocate the parameter vectors");
    if (ce->base.dtype == TT_GGUF && m->gguf && cpu_huge_pages()) {
        ce->copied = calloc(KERNELS_GGUF_PARTS * (4 * (size_t)L + 1), sizeof *ce->copied);
        ce->copies = weight_arena_new(true);
        if (!ce->copied || !ce->copies)
            return tt_fail(err, TT_ERR_NOMEM, "cpu: cannot allocate the engine");
    }
    size_t used = 0;
    for (int l = 0; l < L; l++) {
        const tensor_ref *t = model_layer_tensors(m, l);
        cpu_layer *ly = &ce->layers[l];
        ly->attn_norm_w = cpu_vector(ce, &used, t[ARCH_T_ATTN_NORM], C);
        ly->attn_norm_b = cpu_vector(ce, &used, t[ARCH_T_ATTN_NORM_B], C);
        ly->q_norm = cpu_vector(ce, &used, t[ARCH_T_Q_NORM], HS);
        ly->k_norm = cpu_vector(ce, &used, t[ARCH_T_K_NORM], HS);
        ly->o_b = cpu_vector(ce, &used, t[ARCH_T_O_B], C);
        ly->ffn_norm_w = cpu_vector(ce, &used, t[ARCH_T_FFN_NORM], C);
        ly->ffn_norm_b = cpu_vector(ce, &used, t[ARCH_T_FFN_NORM_B], C);
        ly->up_b = cpu_vector(ce, &used, t[ARCH_T_UP_B], FF);
        ly->down_b = cpu_vector(ce, &used, t[ARCH_T_DOWN_B], C);
        const bool fused = (cfg->features & ARCH_F_QKV_FUSED) != 0;
        const pack_part qkv_b[] = {{t[ARCH_T_QKV_B], QKV}, {t[ARCH_T_Q_B], Q},
                                   {t[ARCH_T_K_B], KV}, {t[ARCH_T_V_B], KV}};
        ly->qkv_b = fused ? cpu_vector_parts(ce, &used, qkv_b, 1)
                          : cpu_vector_parts(ce, &used, qkv_b + 1, 3);
        const pack_part qkv[] = {{t[ARCH_T_QKV], QKV}, {t[ARCH_T_Q], Q}, {t[ARCH_T_K], KV},
                                 {t[ARCH_T_V], KV}};
        const pack_part o[] = {{t[ARCH_T_O], C}};
        const pack_part up[] = {{t[ARCH_T_GATE], FF}, {t[ARCH_T_UP], FF}};
        const pack_part down[] = {{t[ARCH_T_DOWN], C}};
        const bool swiglu = (cfg->features & ARCH_F_SWIGLU) != 0;
        if ((s = cpu_pack(ce, &ly->qkv, C, fused ? qkv : qkv + 1, fused ? 1 : 3, err)) !=
                TT_OK ||
            (s = cpu_pack(ce, &ly->o, Q, o, 1, err)) != TT_OK ||
            (s = cpu_pack(ce, &ly->up, C, swiglu ? up : up + 1, swiglu ? 2 : 1, err)) != TT_OK ||
            (s = cpu_pack(ce, &ly->down, FF, down, 1, err)) != TT_OK)
            return s;
    }
    ce->out_norm_w = cpu_vector(ce, &used, m->tensors.global[ARCH_T_OUT_NORM], C);
    ce->out_norm_b = cpu_vector(ce, &used, m->tensors.global[ARCH_T_OUT_NORM_B], C);
    const pack_part head[] = {{m->tensors.global[ARCH_T_OUTPUT], cfg->V}};
    s = cpu_pack(ce, &ce->lm_head, C, head, 1, err);
    if (s != TT_OK)
        return s;
    const tensor_ref wte = m->tensors.global[ARCH_T_TOKEN_EMBD];
    ce->head_tied = ce->lm_head.dtype == TT_GGUF && ce->lm_head.n_parts == 1 &&
                    ce->lm_head.parts[0].data == wte.data;
    if (ce->gguf_xb && !ce->xb && (s = cpu_alloc_xb(ce, err)) != TT_OK)
        return s;
    if (ce->n_deferred > 0) {
        for (int i = 0; i < ce->n_deferred; i++) {
            const packed_matrix *w = ce->deferred[i].m;
            size_t bytes = (size_t)cpu_defer_panels(w) * packed_matrix_panel_bytes(w);
            if (bytes > ce->defer_stride)
                ce->defer_stride = (bytes + 63) & ~(size_t)63;
        }
        const size_t bytes = (size_t)threadpool_size(ce->pool) * ce->defer_stride;
        ce->defer_buf = cpu_alloc_rows(bytes);
        if (!ce->defer_buf)
            return tt_fail(err, TT_ERR_NOMEM, "cpu: cannot allocate %zu bytes of panels", bytes);
        ce->base.memory_bytes += bytes;
    }
    /* A decode step also reads every vector and one row of each embedding table. */
    ce->base.weight_bytes += used * sizeof(float) +
                             (cfg->features & ARCH_F_LEARNED_POS ? 2 : 1) * (size_t)C *
                                 tt_dtype_size(m->file_dtype);
    ce->base.memory_bytes += ce->base.weight_bytes;
    return TT_OK;
}

tt_status cpu_engine_create(const model *m, const engine_options *o, engine **out, tt_error *err)
{
    *out = NULL;
    const model_config *cfg = &m->config;
    engine_options def;
    if (!o) {
        engine_options_default(&def);
        o = &def;
    }
    if (o->dtype != TT_F32 && o->dtype != TT_F16 && o->dtype != TT_BF16 && o->dtype != TT_Q8 &&
        o->dtype != TT_GGUF)
        return tt_fail(err, TT_ERR_ARG, "cpu: unknown weight dtype %d", (int)o->dtype);
    int n_ctx = engine_options_ctx(o, cfg);
    if (n_ctx > cfg->maxT)
        return tt_fail(err, TT_ERR_ARG, "cpu: context of %d tokens is longer than the model's "
                       "%d positions", n_ctx, cfg->maxT);

    cpu_engine *ce = calloc(1, sizeof *ce);
    if (!ce)
        return tt_fail(err, TT_ERR_NOMEM, "cpu: cannot allocate the engine");
    engine *e = &ce->base;
    engine_init(e, &cpu_ops, m, n_ctx, o->dtype);
    ce->kern = kernels_select();
    ce->TB = n_ctx < CPU_CHUNK ? n_ctx : CPU_CHUNK;
    ce->n_seqs = 1;

    int n_threads = o->n_threads;
    double macs = model_config_macs_per_token(cfg, 0);
    if (n_threads <= 0 && macs < CPU_SPLIT_MIN_MACS) {
        n_threads = 1;
        ce->small_macs = macs;
    }
    tt_status s = threadpool_create(n_threads, &ce->pool, err);
    if (s == TT_OK && !(ce->arena = weight_arena_new(false)))
        s = tt_fail(err, TT_ERR_NOMEM, "cpu: cannot allocate the engine");
    if (s == TT_OK)
        s = kvcache_init(&ce->cache, cfg->L, cfg->NKV, cfg->HS, n_ctx, err);
    if (s == TT_OK) {
        e->memory_bytes += kvcache_bytes(&ce->cache);
        s = cpu_alloc_activations(ce, err);
    }
    if (s == TT_OK)
        s = cpu_load_weights(ce, err);
    if (s == TT_OK)
        s = cpu_reserve_logits(ce, 1, err);
    if (s != TT_OK) {
        cpu_destroy(e);
        return s;
    }
    int nth = threadpool_size(ce->pool);
    e->threads = nth;
    char held[96];
    if (e->dtype == TT_GGUF && m->gguf)     /* "Q4_K_M (4.89 bits a weight) as stored" */
        snprintf(held, sizeof held, "%s (%.2f bits a weight) as stored", m->quantization,
                 gguf_bits_per_weight(m->gguf));
    else
        snprintf(held, sizeof held, "%s", tt_dtype_name(e->dtype));
    snprintf(e->description, sizeof e->description, "cpu: %d thread%s%s, %s, %s weights", nth,
             nth == 1 ? "" : "s", o->n_threads <= 0 ? " (auto)" : "", ce->kern->name, held);
    *out = e;
    return TT_OK;
}

const char *cpu_engine_describe_threads(const engine *e, char *out, size_t cap)
{
    const cpu_engine *ce = (const cpu_engine *)e;
    if (e->ops != &cpu_ops)
        snprintf(out, cap, "none: the %s engine computes", e->ops->name);
    else if (ce->small_macs > 0)
        snprintf(out, cap, "1 thread (auto: model too small to split, %.1fM multiply-adds per "
                 "token)", ce->small_macs * 1e-6);
    else
        threadpool_describe(ce->pool, out, cap);
    return out;
}

bool cpu_engine_thread_jobs(const engine *e, unsigned long long *parallel,
                            unsigned long long *serial)
{
    *parallel = *serial = 0;
    if (e->ops != &cpu_ops)
        return false;
    threadpool_stats st;
    threadpool_get_stats(((const cpu_engine *)e)->pool, &st);
    if (st.threads == 1)
        return true;       /* threadpool_run calls the job directly: neither count moves */
    *parallel = st.jobs_parallel;
    *serial = st.jobs_serial;
    return true;
}
