/* cuda_engine.cu: the CUDA backend: the forward pass of any architecture core/arch/ describes (GPT-2,
 * the Llama family) over a token span on the GPU, behind the engine interface (core/engine/engine.h).
 * It walks the same recipe as the CPU backend (core/cpu/cpu.c): LayerNorm or RMSNorm, learned
 * positions or RoPE, per-head q/k norms, q|k|v with or without biases, grouped-query attention,
 * GELU or SwiGLU, a tied or separate output head.
 *
 * Weights are uploaded once in the dtype asked for (every parameter rounded to it, as the CPU engine
 * does; the bias and norm vectors are kept as fp32 arrays of those rounded values), each matrix held
 * as nn.Linear holds it, [out, in] (GPT-2's Conv1D [in, out] matrices are transposed once at
 * upload); separate q, k, v (and gate, up) tensors are uploaded side by side into one matrix, so
 * each is one matmul as on the CPU. The KV cache lives on the device, (L, NKV, n_ctx, HS) per K and
 * V like the CPU's, in the weight dtype; truncate only lowers a length. A span runs in chunks of up
 * to TB tokens: matmuls of up to CUDA_GEMV_MAX_T rows through the gemv kernel, larger ones through
 * cuBLAS, both with fp32 accumulation; attention through strided batched GEMMs and a causal softmax.
 *
 * Sequences (core/engine/engine.h): slot 0 is the cache above; engine_seq_reserve adds slots, each one
 * device allocation (K then V) of the same shape. A decode step is B rows, one token of each of B
 * sequences (a plain one-token forward is a step of one row): the matmuls are one gemv (or, past
 * CUDA_GEMV_MAX_T rows, cuBLAS GEMM) over the B rows, so the weights are read once, the first FFN
 * matmul with its activation in the same kernel, and attention runs per row over that row's sequence at
 * its own position (cuda_attention_decode). Every kernel of the step reads the rows (token,
 * position, cache) from a device array, so the step of B rows is captured once as a CUDA graph and
 * replayed for any sequences at any positions, only the rows being copied in before each replay.
 * A row's result does not depend on the other rows in the kernels here (the gemv included); cuBLAS,
 * past CUDA_GEMV_MAX_T rows, may pick another algorithm (summation order) for B rows than for one,
 * so on a device a row of a larger batch equals the row run alone within the backend's rounding
 * tolerance, not bit for bit (the emulation's GEMM is bitwise the same for any B). Logits always come back to host memory (pinned, e->logits);
 * sampling stays on the host.
 *
 * Every CUDA and cuBLAS call is checked (GPU_CHECK/BLAS_CHECK: the call, the file, the line). The
 * first error during a forward stops the engine: a sticky error poisons the CUDA context, so the
 * engine answers every later forward with that first message instead of retrying. */
#include "gpu/cuda_engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/cuda_kernels.h"

#define CUDA_CHUNK 256                       /* default tokens per prefill chunk */
#define CUDA_WORKSPACE ((size_t)32 << 20)    /* cuBLAS workspace (what Hopper wants) */
#define CUDA_ALIGN 256

/* =============================================================================================
 * State */

/* One layer. Q = NH HS, KV = NKV HS, QKV = Q + 2 KV; a vector the recipe lacks is NULL. A weight
 * matrix of y = x W, W (K, N), is held as W^T (N, K) in dtype, whatever the file's layout
 * (cuda_kernels.h). */
typedef struct {
    const void *qkv;               /* (QKV, C): [q | k | v] */
    const void *o;                 /* (C, Q) */
    const void *up;                /* (FF, C), or (2 FF, C) [gate | up] for SwiGLU */
    const void *down;              /* (C, FF) */
    const float *attn_norm_w, *attn_norm_b;   /* (C) */
    const float *qkv_b;            /* (QKV) */
    const float *q_norm, *k_norm;  /* (HS) */
    const float *o_b;              /* (C) */
    const float *ffn_norm_w, *ffn_norm_b;     /* (C) */
    const float *up_b;             /* (FF) */
    const float *down_b;           /* (C) */
} cuda_layer;

/* One sequence's KV cache: K and V (L, NKV, n_ctx, HS) in the weight dtype. */
typedef struct {
    char *k, *v;
    int len;                       /* tokens held; sequence 0 keeps its length in base.n_past */
} cuda_seq;

/* What a decode step's ops are, for the profile (cuda_engine_options.profile). */
typedef enum {
    PROF_ROWS_IN, PROF_EMBED, PROF_NORM, PROF_QKV, PROF_HEADS, PROF_ATTENTION, PROF_O, PROF_UP, PROF_DOWN,
    PROF_LM_HEAD, PROF_LOGITS_OUT, PROF_KINDS
} prof_kind;

static const char *const prof_names[PROF_KINDS] = {
    "rows to device", "embedding", "norm (+ pending bias)", "matmul qkv", "qkv heads (bias, norm, rope)",
    "attention (2 kernels)", "matmul o (+= x)", "matmul up + gelu/swiglu", "matmul down (+= x)", "lm_head",
    "logits to host",
};

/* One event after each op of a step run without a graph; summed per kind once the step is done. */
typedef struct {
    cudaEvent_t *ev;               /* (cap) ev[0] before the step, ev[i] after its i-th op */
    unsigned char *kind;           /* (cap) the kind of op ev[i] ends */
    double *bytes;                 /* (cap) bytes that op reads from device memory (matmuls, attention) */
    int cap, n;
    bool on;                       /* recording the step being queued */
    double ms[PROF_KINDS], gb[PROF_KINDS];
    long calls[PROF_KINDS];
    double wall_ms;                /* host: first launch to the end of the synchronize */
    long steps, rows;
} cuda_profile;

typedef struct {
    engine base;                   /* first: an engine * is a cuda_engine * */
    cuda_engine_options co;
    int device;
    char device_name[256];
    cudaStream_t stream;
    cublasHandle_t cublas;

    /* Device memory: three allocations, carved into the buffers below. */
    char *weights, *cache, *acts;
    size_t weights_bytes, cache_bytes, acts_bytes;

    cuda_layer *layers;            /* (L) host array of device pointers */
    const void *wte;               /* (V, C) in dtype */
    const void *wpe;               /* (maxT, C), NULL without learned positions */
    const void *lm_head;           /* (V, C); wte when tied */
    const float *ln_f_w, *ln_f_b;  /* (C) */
    float *rope_cos, *rope_sin;    /* (n_ctx, HS / 2), NULL without RoPE */
    char *k_cache, *v_cache;       /* (L, NKV, n_ctx, HS) in dtype */

    int TB;                        /* tokens per chunk, rows per decode step */
    int *d_tokens;                 /* (1 + TB): position, then ids (a prefill chunk) */
    cuda_row *d_rows;              /* (TB) the rows of a decode step */
    float *x;                      /* (TB, C) residual stream */
    char *xn;                      /* (TB, C) norm output, dtype */
    float *qkv;                    /* (TB, QKV) */
    char *q;                       /* (TB, Q) dtype, after q norm and RoPE */
    char *att;                     /* (TB, Q) attention output, heads side by side, dtype */
    float *scores;                 /* (NH, TB, n_ctx) */
    float *partial;                /* decode attention's per-chunk results, TB rows */
    char *probs;                   /* (NH, TB, n_ctx) dtype */
    float *fc;                     /* (TB, FF), or (TB, 2 FF) [gate | up] with SwiGLU */
    char *fc_act;                  /* (TB, FF) dtype */
    float *logits;                 /* (TB, V) */
    void *workspace;               /* cuBLAS */

    int *h_tokens;                 /* (1 + TB) pinned host: what d_tokens is copied from */
    cuda_row *h_rows;              /* (TB) pinned host: what d_rows is copied from */
    int logits_rows;               /* rows of pinned host memory at base.logits */

    cuda_seq *seqs;                /* (n_seqs) seqs[0] is k_cache/v_cache */
    int n_seqs;
    size_t seq_bytes;              /* device memory of one added sequence */

    cudaGraphExec_t *graphs;       /* (TB + 1) the decode step of B rows at [B], captured on first use */
    bool graph_failed;             /* capture failed once: steps run without a graph */
    bool capturing;                /* errors while capturing fall back instead of stopping */
    bool dead;                     /* a device error stopped the engine */
    char dead_msg[TT_ERROR_MAX];
    long steps, replays, batch_steps;

    /* The attention capture (core/engine/attention.h), while base.attention keeps rows: */
    float *cap;                    /* (L, rows, NH, ld) a span's rows, as base.attention->w */
    size_t cap_floats;             /* floats allocated at cap */
    float *cap_dec;                /* (L NH n_ctx) a decode step's row at position pos, packed as
                                      (L, NH, pos + 1): the layout of base.attention->w then */
    char *cap_q;                   /* (L, Q) in dtype: each layer's query of that step */
    cudaGraphExec_t graph_attn;    /* the one-row decode step with the capture, captured on use */
    int cap_r0, cap_nr;            /* the kept rows of the chunk being queued (0: none) */
    int cap_q_row, cap_pos;        /* its first kept row's row in q and position */
    char *cap_k;                   /* the forwarded sequence's key cache */
    cuda_profile prof;             /* co.profile only */
} cuda_engine;

static int seq_len(const cuda_engine *g, int seq)
{
    return seq == 0 ? g->base.n_past : g->seqs[seq].len;
}

static void seq_set_len(cuda_engine *g, int seq, int n)
{
    if (seq == 0)
        g->base.n_past = n;
    else
        g->seqs[seq].len = n;
}

/* =============================================================================================
 * Error checks */

/* "cuda_layernorm(g->xn, g->x, ...)" is plenty to find the line. */
static void short_call(char *out, size_t cap, const char *call)
{
    size_t n = strlen(call);
    if (n < 72) {
        snprintf(out, cap, "%s", call);
        return;
    }
    snprintf(out, cap, "%.64s...)", call);
}

static tt_status gpu_fail(cuda_engine *g, tt_error *err, const char *call, const char *what,
                          const char *file, int line)
{
    char c[96];
    short_call(c, sizeof c, call);
    tt_error local;
    if (!err)
        err = &local;
    tt_fail(err, TT_ERR_DEVICE, "cuda: %s failed at %s:%d: %s", c, file, line, what);
    if (g && !g->capturing && !g->dead) {
        g->dead = true;
        snprintf(g->dead_msg, sizeof g->dead_msg, "%s", err->msg);
    }
    return TT_ERR_DEVICE;
}

static bool gpu_ok(cudaError_t e) { return e == cudaSuccess; }
static bool gpu_ok(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; }

static tt_status gpu_fail_status(cuda_engine *g, tt_error *err, cudaError_t e, const char *call,
                                 const char *file, int line)
{
    char what[192];
    snprintf(what, sizeof what, "%s (%s)%s", cudaGetErrorString(e), cudaGetErrorName(e),
             strncmp(call, "cudaStreamSynchronize", 21) == 0 || strncmp(call, "cudaGraphLaunch", 15) == 0
                 ? "; an asynchronous error from an earlier launch may be reported here" : "");
    cudaGetLastError();            /* a non-sticky error must not resurface in a later check */
    return gpu_fail(g, err, call, what, file, line);
}

static tt_status gpu_fail_status(cuda_engine *g, tt_error *err, cublasStatus_t s, const char *call,
                                 const char *file, int line)
{
    char what[192];
    snprintf(what, sizeof what, "%s (%s)", cublasGetStatusString(s), cublasGetStatusName(s));
    return gpu_fail(g, err, call, what, file, line);
}

/* In functions with `cuda_engine *g` (may be NULL) and `tt_error *err` in scope; call returns a
 * cudaError_t (GPU_CHECK) or a cublasStatus_t (BLAS_CHECK), told apart by overloading. */
#define GPU_CHECK(call)                                                        \
    do {                                                                       \
        const auto r_ = (call);                                                \
        if (!gpu_ok(r_))                                                       \
            return gpu_fail_status(g, err, r_, #call, __FILE__, __LINE__);     \
    } while (0)

#define BLAS_CHECK(call) GPU_CHECK(call)

/* For a helper that returns a tt_status, its message already in err. */
#define MATMUL_CHECK(call)                                                     \
    do {                                                                       \
        const tt_status s_ = (call);                                           \
        if (s_ != TT_OK)                                                       \
            return s_;                                                         \
    } while (0)

/* =============================================================================================
 * Availability and device information */

extern "C" void cuda_engine_options_default(cuda_engine_options *co)
{
    co->use_graphs = true;
    co->device = 0;
    co->max_chunk = 0;
    const char *p = getenv("TOKENTOP_CUDA_PROFILE");
    co->profile = p && p[0] && strcmp(p, "0") != 0;
}

extern "C" bool cuda_backend_available(char *why, size_t cap)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        cudaGetLastError();
        if (why && cap) {
            if (e == cudaSuccess || e == cudaErrorNoDevice)
                snprintf(why, cap, "no CUDA device");
            else if (e == cudaErrorInsufficientDriver)
                snprintf(why, cap, "no CUDA device (no NVIDIA driver loaded, or one older than this "
                         "CUDA runtime)");
            else
                snprintf(why, cap, "no CUDA device (cudaGetDeviceCount: %s)", cudaGetErrorString(e));
        }
        return false;
    }
    if (why && cap)
        why[0] = 0;
    return true;
}

static tt_status device_info(int dev, cuda_device_info_t *info, tt_error *err)
{
    cuda_engine *g = NULL;
    memset(info, 0, sizeof *info);
    GPU_CHECK(cudaGetDeviceCount(&info->count));
    cudaDeviceProp prop;
    GPU_CHECK(cudaGetDeviceProperties(&prop, dev));
    info->index = dev;
    snprintf(info->name, sizeof info->name, "%s", prop.name);
    info->cc_major = prop.major;
    info->cc_minor = prop.minor;
    info->sm_count = prop.multiProcessorCount;
    info->total_bytes = prop.totalGlobalMem;
    GPU_CHECK(cudaDeviceGetAttribute(&info->memory_clock_khz, cudaDevAttrMemoryClockRate, dev));
    GPU_CHECK(cudaDeviceGetAttribute(&info->bus_width_bits, cudaDevAttrGlobalMemoryBusWidth, dev));
    info->peak_bandwidth = 2.0 * (double)info->memory_clock_khz * 1e3 * (double)info->bus_width_bits / 8.0;
    cudaRuntimeGetVersion(&info->runtime_version);
    cudaDriverGetVersion(&info->driver_version);
#ifdef TT_EMU
    info->emulated = true;
#endif
    return TT_OK;
}

extern "C" tt_status cuda_device_info(cuda_device_info_t *info, tt_error *err)
{
    char why[160];
    if (!cuda_backend_available(why, sizeof why))
        return tt_fail(err, TT_ERR_DEVICE, "cuda: %s", why);
    cuda_engine *g = NULL;
    int dev = 0;
    GPU_CHECK(cudaGetDevice(&dev));
    tt_status s = device_info(dev, info, err);
    if (s != TT_OK)
        return s;
    size_t total = 0;
    GPU_CHECK(cudaMemGetInfo(&info->free_bytes, &total));
    return TT_OK;
}

/* =============================================================================================
 * Memory plan */

static size_t align_up(size_t n) { return (n + CUDA_ALIGN - 1) / CUDA_ALIGN * CUDA_ALIGN; }

/* Hands out aligned pieces of one allocation (base NULL: only counts). */
typedef struct {
    char *base;
    size_t used;
} carver;

static void *carve(carver *c, size_t bytes)
{
    void *p = c->base ? c->base + c->used : NULL;
    c->used += align_up(bytes);
    return p;
}

/* A vector parameter's place when the model binds role t (else NULL). */
static const float *carve_vector(carver *w, tensor_ref t, size_t n)
{
    return t.data ? (const float *)carve(w, n * 4) : NULL;
}

/* Layer l's separate or fused q|k|v, and gate|up or up: the tensors each fused matrix is uploaded
 * from, side by side along N, with their widths. */
typedef struct {
    tensor_ref t;
    size_t cols;
} upload_part;

static int qkv_parts(const model *m, const tensor_ref *t, bool bias, upload_part *p)
{
    const model_config *c = &m->config;
    if (c->features & ARCH_F_QKV_FUSED) {
        p[0] = upload_part{t[bias ? ARCH_T_QKV_B : ARCH_T_QKV], (size_t)model_config_qkvdim(c)};
        return 1;
    }
    const size_t Q = (size_t)model_config_qdim(c), KV = (size_t)model_config_kvdim(c);
    p[0] = upload_part{t[bias ? ARCH_T_Q_B : ARCH_T_Q], Q};
    p[1] = upload_part{t[bias ? ARCH_T_K_B : ARCH_T_K], KV};
    p[2] = upload_part{t[bias ? ARCH_T_V_B : ARCH_T_V], KV};
    return 3;
}

static int up_parts(const model *m, const tensor_ref *t, upload_part *p)
{
    const size_t FF = (size_t)m->config.FF;
    if (m->config.features & ARCH_F_SWIGLU) {
        p[0] = upload_part{t[ARCH_T_GATE], FF};
        p[1] = upload_part{t[ARCH_T_UP], FF};
        return 2;
    }
    p[0] = upload_part{t[ARCH_T_UP], FF};
    return 1;
}

static const void *carve_matrix(carver *w, size_t elems, size_t ds)
{
    return carve(w, elems * ds);
}

/* Lays out (or, with NULL bases, measures) the weights, the cache and the activations. */
static void plan(cuda_engine *g, carver *w, carver *kv, carver *a)
{
    const model *m = g->base.model;
    const model_config *cfg = g->base.config;
    const size_t C = (size_t)cfg->C, FF = (size_t)cfg->FF, V = (size_t)cfg->V, L = (size_t)cfg->L;
    const size_t NH = (size_t)cfg->NH, NKV = (size_t)cfg->NKV, HS = (size_t)cfg->HS;
    const size_t Q = (size_t)model_config_qdim(cfg), QKV = (size_t)model_config_qkvdim(cfg);
    const size_t FFW = (cfg->features & ARCH_F_SWIGLU ? 2 : 1) * FF;
    const size_t TB = (size_t)g->TB, n_ctx = (size_t)g->base.n_ctx;
    const size_t ds = tt_dtype_size(g->base.dtype);
    for (size_t l = 0; l < L; l++) {
        const tensor_ref *t = model_layer_tensors(m, (int)l);
        upload_part qb[3];
        qkv_parts(m, t, true, qb);
        cuda_layer y;              /* one statement each: the order of the carves is the layout */
        y.qkv = carve_matrix(w, C * QKV, ds);
        y.o = carve_matrix(w, Q * C, ds);
        y.up = carve_matrix(w, C * FFW, ds);
        y.down = carve_matrix(w, FF * C, ds);
        y.attn_norm_w = carve_vector(w, t[ARCH_T_ATTN_NORM], C);
        y.attn_norm_b = carve_vector(w, t[ARCH_T_ATTN_NORM_B], C);
        y.qkv_b = carve_vector(w, qb[0].t, QKV);
        y.q_norm = carve_vector(w, t[ARCH_T_Q_NORM], HS);
        y.k_norm = carve_vector(w, t[ARCH_T_K_NORM], HS);
        y.o_b = carve_vector(w, t[ARCH_T_O_B], C);
        y.ffn_norm_w = carve_vector(w, t[ARCH_T_FFN_NORM], C);
        y.ffn_norm_b = carve_vector(w, t[ARCH_T_FFN_NORM_B], C);
        y.up_b = carve_vector(w, t[ARCH_T_UP_B], FF);
        y.down_b = carve_vector(w, t[ARCH_T_DOWN_B], C);
        if (g->layers)
            g->layers[l] = y;
    }
    const tensor_ref *tw = m->tensors.global;
    g->wte = carve(w, V * C * ds);
    g->wpe = tw[ARCH_T_POS_EMBD].data ? carve(w, (size_t)cfg->maxT * C * ds) : NULL;
    g->lm_head = m->tensors.lm_head_tied ? g->wte : carve_matrix(w, V * C, ds);
    g->ln_f_w = carve_vector(w, tw[ARCH_T_OUT_NORM], C);
    g->ln_f_b = carve_vector(w, tw[ARCH_T_OUT_NORM_B], C);
    const bool rope = (cfg->features & ARCH_F_ROPE) != 0;
    g->rope_cos = rope ? (float *)carve(w, n_ctx * (HS / 2) * 4) : NULL;
    g->rope_sin = rope ? (float *)carve(w, n_ctx * (HS / 2) * 4) : NULL;

    g->k_cache = (char *)carve(kv, L * NKV * n_ctx * HS * ds);
    g->v_cache = (char *)carve(kv, L * NKV * n_ctx * HS * ds);

    g->d_tokens = (int *)carve(a, (1 + TB) * sizeof(int));
    g->d_rows = (cuda_row *)carve(a, TB * sizeof(cuda_row));
    g->x = (float *)carve(a, TB * C * 4);
    g->xn = (char *)carve(a, TB * C * ds);
    g->qkv = (float *)carve(a, TB * QKV * 4);
    g->q = (char *)carve(a, TB * Q * ds);
    g->att = (char *)carve(a, TB * Q * ds);
    g->scores = (float *)carve(a, NH * TB * n_ctx * 4);
    g->partial = (float *)carve(a, TB * cuda_attention_decode_partial(cfg->NH, cfg->HS, g->base.n_ctx) * 4);
    g->probs = (char *)carve(a, NH * TB * n_ctx * ds);
    g->fc = (float *)carve(a, TB * FFW * 4);
    g->fc_act = (char *)carve(a, TB * FF * ds);
    g->logits = (float *)carve(a, TB * V * 4);
    g->workspace = carve(a, CUDA_WORKSPACE);
}

static double mib(size_t b) { return (double)b / (1024.0 * 1024.0); }

static tt_status out_of_memory(cuda_engine *g, tt_error *err, const char *what)
{
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    cudaGetLastError();
    size_t need = g->weights_bytes + g->cache_bytes + g->acts_bytes;
    return tt_fail(err, TT_ERR_DEVICE,
                   "cuda: %s in %s needs %.0f MiB of device memory (weights %.0f, KV cache %.0f, "
                   "activations %.0f), %.0f MiB free of %.0f MiB on %s%s%s",
                   g->base.model->name ? g->base.model->name : "the model",
                   tt_dtype_name(g->base.dtype), mib(need), mib(g->weights_bytes), mib(g->cache_bytes),
                   mib(g->acts_bytes), mib(free_b), mib(total_b), g->device_name, what ? ": " : "",
                   what ? what : "");
}

/* =============================================================================================
 * Weights upload */

typedef struct {
    char *buf;                     /* host staging */
    size_t cap;
    float tmp[4096];
} stager;

/* Copies elements from .. from+n-1 of t to device memory dst in dtype d. */
static tt_status upload_matrix(cuda_engine *g, stager *st, const void *dst, tensor_ref t, size_t from, size_t n,
                               tt_dtype d, tt_error *err)
{
    if (t.dtype == d && tensor_ref_is_plain(t)) {   /* same bytes: straight from the mapping */
        GPU_CHECK(cudaMemcpy((void *)dst, (const char *)t.data + from * tt_dtype_size(d), n * tt_dtype_size(d),
                             cudaMemcpyHostToDevice));
        return TT_OK;
    }
    size_t per = st->cap / tt_dtype_size(d);
    for (size_t off = 0; off < n; off += per) {
        size_t cnt = n - off < per ? n - off : per;
        for (size_t i = 0; i < cnt; i += 4096) {
            size_t c = cnt - i < 4096 ? cnt - i : 4096;
            tensor_ref_to_f32(t, from + off + i, c, st->tmp);
            for (size_t j = 0; j < c; j++)
                tt_store_f32(st->buf, d, i + j, st->tmp[j]);
        }
        GPU_CHECK(cudaMemcpy((char *)dst + off * tt_dtype_size(d), st->buf, cnt * tt_dtype_size(d),
                             cudaMemcpyHostToDevice));
    }
    return TT_OK;
}

static tt_status upload_vector(cuda_engine *g, stager *st, const float *dst, tensor_ref t, size_t n,
                               tt_error *err)
{
    float *f = (float *)st->buf;
    tensor_ref_to_f32(t, 0, n, f);
    for (size_t i = 0; i < n; i++)
        f[i] = tt_held_f32(g->base.dtype, f[i]);   /* rounded once, as core/cpu/cpu.c does */
    GPU_CHECK(cudaMemcpy((void *)dst, f, n * sizeof(float), cudaMemcpyHostToDevice));
    return TT_OK;
}

/* A Conv1D matrix t, (K, N) in the file, into dst as (N, K): slabs of its rows go through the
 * activations' memory (unused until the first forward), and cuda_transpose puts each slab's rows in
 * as columns of dst. Every launch is on the legacy stream, behind the copy it reads. */
static tt_status upload_transposed(cuda_engine *g, stager *st, const void *dst, tensor_ref t, size_t K, size_t N,
                                   tt_error *err)
{
    const tt_dtype d = g->base.dtype;
    const size_t slab = g->acts_bytes / (N * tt_dtype_size(d));
    if (slab == 0)
        return tt_fail(err, TT_ERR_DEVICE, "cuda: a row of %zu weights does not fit the %zu bytes of scratch "
                       "memory", N, g->acts_bytes);
    for (size_t k0 = 0; k0 < K; k0 += slab) {
        const size_t rows = K - k0 < slab ? K - k0 : slab;
        tt_status s = upload_matrix(g, st, g->acts, t, k0 * N, rows * N, d, err);
        if (s != TT_OK)
            return s;
        GPU_CHECK(cuda_transpose((char *)dst + k0 * tt_dtype_size(d), (int)K, g->acts, (int)rows, (int)N, d, 0));
        GPU_CHECK(cudaDeviceSynchronize());
    }
    return TT_OK;
}

/* The parts side by side along N into one matrix at m, held (N, K) (in_out parts: one only,
 * checked at creation, transposed), with K rows of input, or into one vector (K 0; dst NULL: the
 * recipe has none). */
static tt_status upload_parts(cuda_engine *g, stager *st, const void *dst, const upload_part *p, int n,
                              size_t K, tt_error *err)
{
    if (!dst)
        return TT_OK;
    const size_t ds = K ? tt_dtype_size(g->base.dtype) : sizeof(float);
    size_t off = 0;
    tt_status s = TT_OK;
    for (int i = 0; i < n && s == TT_OK; i++) {
        const size_t elems = (K ? K : 1) * p[i].cols;
        const char *at = (const char *)dst + off * ds;
        s = !K ? upload_vector(g, st, (const float *)at, p[i].t, elems, err)
            : p[i].t.in_out ? upload_transposed(g, st, at, p[i].t, K, p[i].cols, err)
                            : upload_matrix(g, st, at, p[i].t, 0, elems, g->base.dtype, err);
        off += elems;
    }
    return s;
}

static tt_status upload_one(cuda_engine *g, stager *st, const void *dst, tensor_ref t, size_t cols, size_t K,
                            tt_error *err)
{
    const upload_part p = {t, cols};
    return upload_parts(g, st, dst, &p, 1, K, err);
}

static tt_status upload_weights(cuda_engine *g, tt_error *err)
{
    const model *m = g->base.model;
    const model_config *cfg = &m->config;
    const tensor_ref *tw = m->tensors.global;
    const size_t C = (size_t)cfg->C, FF = (size_t)cfg->FF, V = (size_t)cfg->V, HS = (size_t)cfg->HS;
    const size_t Q = (size_t)model_config_qdim(cfg), QKV = (size_t)model_config_qkvdim(cfg);
    const tt_dtype d = g->base.dtype;
    stager *st = (stager *)malloc(sizeof *st);
    if (!st)
        return tt_fail(err, TT_ERR_NOMEM, "cuda: cannot allocate the upload buffer");
    /* Room for the longest vector (and, for RoPE, both tables at once). */
    size_t vec = FF > QKV ? FF : QKV;
    if (vec < C)
        vec = C;
    if (g->rope_cos && vec < (size_t)g->base.n_ctx * HS)
        vec = (size_t)g->base.n_ctx * HS;
    st->cap = (size_t)16 << 20;
    if (st->cap < vec * 4 + 64)
        st->cap = vec * 4 + 64;
    st->buf = (char *)malloc(st->cap);
    if (!st->buf) {
        free(st);
        return tt_fail(err, TT_ERR_NOMEM, "cuda: cannot allocate the upload buffer");
    }
    tt_status s = TT_OK;
    for (int l = 0; l < cfg->L && s == TT_OK; l++) {
        const tensor_ref *t = model_layer_tensors(m, l);
        const cuda_layer *ly = &g->layers[l];
        upload_part qkv[3], qkv_b[3], up[2];
        const int n_qkv = qkv_parts(m, t, false, qkv), n_up = up_parts(m, t, up);
        qkv_parts(m, t, true, qkv_b);
        if ((s = upload_parts(g, st, ly->qkv, qkv, n_qkv, C, err)) != TT_OK ||
            (s = upload_one(g, st, ly->o, t[ARCH_T_O], C, Q, err)) != TT_OK ||
            (s = upload_parts(g, st, ly->up, up, n_up, C, err)) != TT_OK ||
            (s = upload_one(g, st, ly->down, t[ARCH_T_DOWN], C, FF, err)) != TT_OK ||
            (s = upload_one(g, st, ly->attn_norm_w, t[ARCH_T_ATTN_NORM], C, 0, err)) != TT_OK ||
            (s = upload_one(g, st, ly->attn_norm_b, t[ARCH_T_ATTN_NORM_B], C, 0, err)) != TT_OK ||
            (s = upload_parts(g, st, ly->qkv_b, qkv_b, n_qkv, 0, err)) != TT_OK ||
            (s = upload_one(g, st, ly->q_norm, t[ARCH_T_Q_NORM], HS, 0, err)) != TT_OK ||
            (s = upload_one(g, st, ly->k_norm, t[ARCH_T_K_NORM], HS, 0, err)) != TT_OK ||
            (s = upload_one(g, st, ly->o_b, t[ARCH_T_O_B], C, 0, err)) != TT_OK ||
            (s = upload_one(g, st, ly->ffn_norm_w, t[ARCH_T_FFN_NORM], C, 0, err)) != TT_OK ||
            (s = upload_one(g, st, ly->ffn_norm_b, t[ARCH_T_FFN_NORM_B], C, 0, err)) != TT_OK ||
            (s = upload_one(g, st, ly->up_b, t[ARCH_T_UP_B], FF, 0, err)) != TT_OK ||
            (s = upload_one(g, st, ly->down_b, t[ARCH_T_DOWN_B], C, 0, err)) != TT_OK)
            break;
    }
    if (s == TT_OK)
        s = upload_matrix(g, st, g->wte, tw[ARCH_T_TOKEN_EMBD], 0, V * C, d, err);
    if (s == TT_OK && g->wpe)
        s = upload_matrix(g, st, g->wpe, tw[ARCH_T_POS_EMBD], 0, (size_t)cfg->maxT * C, d, err);
    if (s == TT_OK && !m->tensors.lm_head_tied)
        s = upload_matrix(g, st, g->lm_head, tw[ARCH_T_OUTPUT], 0, V * C, d, err);
    if (s == TT_OK)
        s = upload_one(g, st, g->ln_f_w, tw[ARCH_T_OUT_NORM], C, 0, err);
    if (s == TT_OK)
        s = upload_one(g, st, g->ln_f_b, tw[ARCH_T_OUT_NORM_B], C, 0, err);
    if (s == TT_OK && g->rope_cos) {
        /* The CPU's tables, from the same function (core/arch/arch.h). */
        const size_t n = (size_t)g->base.n_ctx * (HS / 2);
        float *cs = (float *)st->buf, *sn = cs + n;
        arch_rope_tables(cfg, g->base.n_ctx, cs, sn);
        cudaError_t r = cudaMemcpy(g->rope_cos, cs, n * sizeof(float), cudaMemcpyHostToDevice);
        if (r == cudaSuccess)
            r = cudaMemcpy(g->rope_sin, sn, n * sizeof(float), cudaMemcpyHostToDevice);
        if (r != cudaSuccess)
            s = gpu_fail_status(g, err, r, "cudaMemcpy(g->rope_cos / g->rope_sin)", __FILE__, __LINE__);
    }
    free(st->buf);
    free(st);
    return s;
}

/* =============================================================================================
 * Profile (co.profile): device time per kind of op over the decode steps run without a graph */

static double host_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Room for one step's events: the start, rows in, the embedding, 8 ops per layer, the final norm,
 * the lm_head and the logits copy (and a spare). */
static tt_status prof_setup(cuda_engine *g, tt_error *err)
{
    cuda_profile *p = &g->prof;
    p->cap = 8 * g->base.config->L + 8;
    p->ev = (cudaEvent_t *)calloc((size_t)p->cap, sizeof *p->ev);
    p->kind = (unsigned char *)calloc((size_t)p->cap, 1);
    p->bytes = (double *)calloc((size_t)p->cap, sizeof *p->bytes);
    if (!p->ev || !p->kind || !p->bytes)
        return tt_fail(err, TT_ERR_NOMEM, "cuda: cannot allocate the profile's tables");
    for (int i = 0; i < p->cap; i++)
        GPU_CHECK(cudaEventCreate(&p->ev[i]));
    return TT_OK;
}

static void prof_free(cuda_profile *p)
{
    for (int i = 0; p->ev && i < p->cap; i++)
        if (p->ev[i])
            cudaEventDestroy(p->ev[i]);
    free(p->ev);
    free(p->kind);
    free(p->bytes);
}

/* Marks the end of an op of kind k that read `bytes` of device memory (0: not counted). */
static void prof_mark(cuda_engine *g, prof_kind k, double bytes)
{
    cuda_profile *p = &g->prof;
    if (!p->on || p->n >= p->cap)
        return;
    p->kind[p->n] = (unsigned char)k;
    p->bytes[p->n] = bytes;
    if (cudaEventRecord(p->ev[p->n], g->stream) == cudaSuccess)
        p->n++;
    else
        cudaGetLastError();
}

/* Starts timing a step of B rows when profiling (and not capturing). */
static void prof_begin(cuda_engine *g)
{
    cuda_profile *p = &g->prof;
    p->n = 0;
    p->on = g->co.profile && !g->capturing && p->ev;
    if (!p->on)
        return;
    p->wall_ms -= host_ms();
    if (cudaEventRecord(p->ev[0], g->stream) == cudaSuccess)
        p->n = 1;
    else
        cudaGetLastError();
}

/* After the step's synchronize: each interval between consecutive events goes to its op's kind. */
static void prof_end(cuda_engine *g, int B)
{
    cuda_profile *p = &g->prof;
    if (!p->on)
        return;
    p->on = false;
    p->wall_ms += host_ms();
    for (int i = 1; i < p->n; i++) {
        float ms = 0.0f;
        if (cudaEventElapsedTime(&ms, p->ev[i - 1], p->ev[i]) != cudaSuccess) {
            cudaGetLastError();
            continue;
        }
        p->ms[p->kind[i]] += ms;
        p->gb[p->kind[i]] += p->bytes[i] * 1e-9;
        p->calls[p->kind[i]]++;
    }
    p->steps++;
    p->rows += B;
}

/* =============================================================================================
 * Forward */

/* The architecture's norm (LayerNorm or RMSNorm) of T rows of x into out, after adding the pending
 * bias (may be NULL) to x. */
static cudaError_t norm(cuda_engine *g, void *out, float *x, const float *pending, const float *w, const float *b,
                        int T)
{
    const model_config *cfg = g->base.config;
    if (cfg->features & ARCH_F_RMSNORM)
        return cuda_rmsnorm(out, x, pending, w, T, cfg->C, cfg->norm_eps, g->base.dtype, g->stream);
    return cuda_layernorm(out, x, pending, w, b, T, cfg->C, cfg->norm_eps, g->base.dtype, g->stream);
}

/* out (T, ldo) = x (T, ldx) W, or += when accumulate, W held (N, K): the gemv kernel for a few
 * rows, cuBLAS for more. */
static tt_status matmul(cuda_engine *g, float *out, int ldo, const void *x, int ldx, const void *w, int T, int K,
                        int N, bool accumulate, tt_error *err)
{
    if (cuda_matmul_uses_gemv(T))
        GPU_CHECK(cuda_gemv(out, ldo, x, ldx, w, T, K, N, accumulate, g->base.dtype, g->stream));
    else
        BLAS_CHECK(cuda_matmul(g->cublas, out, ldo, x, ldx, w, T, K, N, accumulate, g->base.dtype));
    return TT_OK;
}

/* Queues a forward of T rows: a prefill chunk of sequence sq (positions pos .. pos+T-1, the ids
 * already in d_tokens), or, with sq NULL, a decode step of T rows (already in d_rows: one token of
 * one sequence each). When lo < T, the logits of rows lo .. T-1 go to out (pinned host memory). A
 * decode step queues nothing that depends on positions or sequences: the device reads them from
 * d_rows, so the step of T rows can be captured once. lens: NULL, or (L + 1, C) host floats that
 * receive row T - 1 of the residual stream after the embeddings and each block (engine.h: lens;
 * then lo < T): a block's output is read once the next norm has added its pending bias. */
static tt_status enqueue_forward(cuda_engine *g, const cuda_seq *sq, int T, int pos, int lo, float *out,
                                 float *lens, tt_error *err)
{
    const model_config *cfg = g->base.config;
    const int C = cfg->C, FF = cfg->FF, NH = cfg->NH, NKV = cfg->NKV, HS = cfg->HS, V = cfg->V;
    const int Q = model_config_qdim(cfg), QKV = model_config_qkvdim(cfg), n_ctx = g->base.n_ctx;
    const bool swiglu = (cfg->features & ARCH_F_SWIGLU) != 0;
    const int FFW = swiglu ? 2 * FF : FF;
    const tt_dtype d = g->base.dtype;
    const size_t ds = tt_dtype_size(d), layer_elems = (size_t)NKV * (size_t)n_ctx * (size_t)HS;
    cudaStream_t s = g->stream;
    cublasHandle_t h = g->cublas;
    /* What the profile counts as read: each matrix once, and the rows' keys and values. */
    double kv_read = 0;
    if (g->prof.on)
        for (int b = 0; b < T; b++)
            kv_read += (double)(g->h_rows[b].pos + 1) * 2.0 * NKV * HS * (double)ds;
    const double qkv_b = (double)QKV * C * ds, o_b = (double)C * Q * ds, up_b = (double)FFW * C * ds;
    const double down_b = (double)C * FF * ds;

    if (sq)
        GPU_CHECK(cuda_embed(g->x, g->d_tokens, g->wte, g->wpe, T, C, d, s));
    else
        GPU_CHECK(cuda_embed_rows(g->x, g->d_rows, g->wte, g->wpe, T, C, d, s));
    const size_t row_bytes = (size_t)C * sizeof(float);
    const float *lens_x = g->x + (size_t)(T - 1) * (size_t)C;
    if (lens)
        GPU_CHECK(cudaMemcpyAsync(lens, lens_x, row_bytes, cudaMemcpyDeviceToHost, s));
    prof_mark(g, PROF_EMBED, 0);
    const float *pending = NULL;   /* the bias of the last matmul added into x */
    for (int l = 0; l < cfg->L; l++) {
        const cuda_layer *ly = &g->layers[l];
        const size_t layer = (size_t)l * layer_elems;
        const cuda_attn at = {NH, NKV, HS, n_ctx, ly->qkv_b, ly->q_norm, ly->k_norm, cfg->norm_eps,
                              g->rope_cos, g->rope_sin};
        GPU_CHECK(norm(g, g->xn, g->x, pending, ly->attn_norm_w, ly->attn_norm_b, T));
        prof_mark(g, PROF_NORM, 0);
        if (lens && l > 0)
            GPU_CHECK(cudaMemcpyAsync(lens + (size_t)l * C, lens_x, row_bytes, cudaMemcpyDeviceToHost, s));
        MATMUL_CHECK(matmul(g, g->qkv, QKV, g->xn, C, ly->qkv, T, C, QKV, false, err));
        prof_mark(g, PROF_QKV, qkv_b);
        if (!sq) {
            GPU_CHECK(cuda_qkv_store_rows(g->q, g->qkv, g->d_rows, layer, T, &at, d, s));
            prof_mark(g, PROF_HEADS, 0);
            GPU_CHECK(cuda_attention_decode(g->att, g->partial, g->q, g->d_rows, layer, T, NH, NKV, HS, n_ctx, d, s));
            if (g->cap_nr > 0)     /* one row (T 1): its query kept for the capture after the layers */
                GPU_CHECK(cudaMemcpyAsync(g->cap_q + (size_t)l * Q * ds, g->q, (size_t)Q * ds,
                                          cudaMemcpyDeviceToDevice, s));
            prof_mark(g, PROF_ATTENTION, kv_read);
        } else {
            char *kc = sq->k + layer * ds, *vc = sq->v + layer * ds;
            GPU_CHECK(cuda_qkv_store(g->q, kc, vc, g->qkv, g->d_tokens, T, &at, d, s));
            BLAS_CHECK(cuda_attention_scores(h, g->scores, g->q, kc, pos, T, NH, NKV, HS, n_ctx, d));
            GPU_CHECK(cuda_softmax_causal(g->probs, g->scores, pos, T, NH, d, s));
            BLAS_CHECK(cuda_attention_values(h, g->att, g->probs, vc, pos, T, NH, NKV, HS, n_ctx, d));
        }
        if (g->cap_nr > 0 && sq) {
            const engine_attention *a = g->base.attention;
            float *rows = g->cap + ((size_t)l * (size_t)a->n_rows + (size_t)g->cap_r0) * (size_t)NH * (size_t)a->ld;
            GPU_CHECK(cuda_attention_probs(rows, a->ld, g->q, g->cap_q_row, g->cap_nr, g->cap_pos,
                                           g->cap_k + layer * ds, NH, NKV, HS, n_ctx, d, s));
        }
        MATMUL_CHECK(matmul(g, g->x, C, g->att, Q, ly->o, T, Q, C, true, err));
        prof_mark(g, PROF_O, o_b);
        GPU_CHECK(norm(g, g->xn, g->x, ly->o_b, ly->ffn_norm_w, ly->ffn_norm_b, T));
        prof_mark(g, PROF_NORM, 0);
        if (cuda_matmul_uses_gemv(T)) {
            GPU_CHECK(cuda_gemv_ffn_up(g->fc_act, g->xn, C, ly->up, ly->up_b, T, C, FF, cfg->act, swiglu, d, s));
            prof_mark(g, PROF_UP, up_b);
        } else {
            MATMUL_CHECK(matmul(g, g->fc, FFW, g->xn, C, ly->up, T, C, FFW, false, err));
            if (swiglu)
                GPU_CHECK(cuda_swiglu(g->fc_act, g->fc, T, FF, d, s));
            else
                GPU_CHECK(cuda_gelu(g->fc_act, g->fc, ly->up_b, T, FF, cfg->act, d, s));
        }
        MATMUL_CHECK(matmul(g, g->x, C, g->fc_act, FF, ly->down, T, FF, C, true, err));
        prof_mark(g, PROF_DOWN, down_b);
        pending = ly->down_b;
    }
    if (!sq && g->cap_nr > 0)      /* every layer's row at once, position and cache from d_rows */
        GPU_CHECK(cuda_attention_probs_row(g->cap_dec, cfg->L, g->cap_q, g->d_rows, layer_elems, NH, NKV, HS,
                                           n_ctx, d, s));
    if (lo >= T)
        return TT_OK;
    const int R = T - lo;
    char *xnl = g->xn + (size_t)lo * (size_t)C * ds;
    GPU_CHECK(norm(g, xnl, g->x + (size_t)lo * (size_t)C, pending, g->ln_f_w, g->ln_f_b, R));
    if (lens)
        GPU_CHECK(cudaMemcpyAsync(lens + (size_t)cfg->L * C, lens_x, row_bytes, cudaMemcpyDeviceToHost, s));
    prof_mark(g, PROF_NORM, 0);
    MATMUL_CHECK(matmul(g, g->logits, V, xnl, C, g->lm_head, R, C, V, false, err));
    prof_mark(g, PROF_LM_HEAD, (double)V * C * ds);
    GPU_CHECK(cudaMemcpyAsync(out, g->logits, (size_t)R * (size_t)V * sizeof(float), cudaMemcpyDeviceToHost, s));
    prof_mark(g, PROF_LOGITS_OUT, 0);
    return TT_OK;
}

/* Runs one prefill chunk of sequence sq without a graph. */
static tt_status run_chunk(cuda_engine *g, const cuda_seq *sq, const int32_t *ids, int T, int pos, int lo,
                           float *out, float *lens, tt_error *err)
{
    /* h_tokens is pinned: the copy reads it when the stream gets there, and the previous chunk's
     * copy has completed (every chunk ends with a synchronize). */
    g->h_tokens[0] = pos;
    memcpy(g->h_tokens + 1, ids, (size_t)T * sizeof(int));
    GPU_CHECK(cudaMemcpyAsync(g->d_tokens, g->h_tokens, (size_t)(1 + T) * sizeof(int), cudaMemcpyHostToDevice,
                              g->stream));
    tt_status s = enqueue_forward(g, sq, T, pos, lo, out, lens, err);
    if (s != TT_OK)
        return s;
    GPU_CHECK(cudaStreamSynchronize(g->stream));
    return TT_OK;
}

/* Captures the decode step of B rows (copy in the rows, the layers, the logits copy out to rows
 * 0 .. B-1 of base.logits) into graphs[B]. A failure leaves graphs off for this engine; it is not a
 * device error. */
static void capture_rows(cuda_engine *g, int B, cudaGraphExec_t *slot)
{
    tt_error err;
    cudaGraph_t graph = NULL;
    g->capturing = true;
    cudaError_t e = cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal);
    if (e == cudaSuccess) {
        e = cudaMemcpyAsync(g->d_rows, g->h_rows, (size_t)B * sizeof(cuda_row), cudaMemcpyHostToDevice,
                            g->stream);
        tt_status s = e == cudaSuccess ? enqueue_forward(g, NULL, B, 0, 0, g->base.logits, NULL, &err) : TT_ERR_DEVICE;
        cudaError_t end = cudaStreamEndCapture(g->stream, &graph);
        if (s != TT_OK || end != cudaSuccess)
            e = cudaErrorUnknown;
    }
    if (e == cudaSuccess)
        e = cudaGraphInstantiate(slot, graph, 0);
    if (graph)
        cudaGraphDestroy(graph);
    g->capturing = false;
    if (e != cudaSuccess) {
        cudaGetLastError();
        *slot = NULL;
        g->graph_failed = true;
        size_t n = strlen(g->base.description);
        snprintf(g->base.description + n, sizeof g->base.description - n, " (graph capture failed)");
    }
}

/* Runs a decode step of the B rows in h_rows (B <= TB), logits to out: by replaying the step's
 * graph when out is base.logits (where the graph writes), else, and when the step keeps the lens
 * rows (lens not NULL, enqueue_forward), by direct launches. */
static tt_status run_rows(cuda_engine *g, int B, float *out, float *lens, tt_error *err)
{
    /* with the attention capture (one row), its own graph: the step and the capture kernels */
    cudaGraphExec_t *slot = g->cap_nr > 0 ? &g->graph_attn : &g->graphs[B];
    if (g->co.use_graphs && !g->graph_failed && out == g->base.logits && !lens &&
        (g->cap_nr == 0 || B == 1)) {
        if (!*slot)
            capture_rows(g, B, slot);
        if (*slot) {
            GPU_CHECK(cudaGraphLaunch(*slot, g->stream));
            GPU_CHECK(cudaStreamSynchronize(g->stream));
            g->replays++;
            return TT_OK;
        }
    }
    prof_begin(g);
    GPU_CHECK(cudaMemcpyAsync(g->d_rows, g->h_rows, (size_t)B * sizeof(cuda_row), cudaMemcpyHostToDevice,
                              g->stream));
    prof_mark(g, PROF_ROWS_IN, 0);
    tt_status s = enqueue_forward(g, NULL, B, 0, 0, out, lens, err);
    if (s != TT_OK) {
        g->prof.on = false;
        return s;
    }
    GPU_CHECK(cudaStreamSynchronize(g->stream));
    prof_end(g, B);
    return TT_OK;
}

/* Destroys every captured step (they write to the old logits buffer). */
static void drop_graphs(cuda_engine *g)
{
    if (g->graph_attn) {
        cudaGraphExecDestroy(g->graph_attn);
        g->graph_attn = NULL;
    }
    for (int b = 0; g->graphs && b <= g->TB; b++)
        if (g->graphs[b]) {
            cudaGraphExecDestroy(g->graphs[b]);
            g->graphs[b] = NULL;
        }
}

/* Grows the pinned logits to rows rows. A captured graph writes to the old buffer: it goes too. */
static tt_status reserve_logits(cuda_engine *g, int rows, tt_error *err)
{
    if (rows <= g->logits_rows)
        return TT_OK;
    size_t bytes = (size_t)rows * (size_t)g->base.config->V * sizeof(float);
    float *p = NULL;
    if (cudaMallocHost((void **)&p, bytes) != cudaSuccess) {
        cudaGetLastError();
        return tt_fail(err, TT_ERR_NOMEM, "cuda: cannot allocate %zu bytes of pinned host memory for "
                       "%d rows of logits", bytes, rows);
    }
    drop_graphs(g);
    cudaFreeHost(g->base.logits);
    g->base.memory_bytes += (size_t)(rows - g->logits_rows) * (size_t)g->base.config->V * sizeof(float);
    g->base.logits = p;
    g->logits_rows = rows;
    return TT_OK;
}

static tt_status stopped(const cuda_engine *g, tt_error *err)
{
    return tt_fail(err, TT_ERR_DEVICE, "cuda: the GPU backend stopped after an earlier error: %s", g->dead_msg);
}

static tt_status alloc_device(cuda_engine *g, char **p, size_t bytes, tt_error *err);

/* Makes room on the device for the rows the wrapper chose for this forward: a decode step's in
 * cap_dec (made once), a span's in cap (grown by doubling: a span's rows grow with its position). */
static tt_status capture_reserve(cuda_engine *g, bool decode, tt_error *err)
{
    const engine_attention *a = g->base.attention;
    if (decode) {
        if (g->cap_dec)
            return TT_OK;
        tt_status s = alloc_device(g, &g->cap_q, (size_t)a->L * (size_t)model_config_qdim(g->base.config) *
                                                     tt_dtype_size(g->base.dtype), err);
        if (s != TT_OK)
            return s;
        return alloc_device(g, (char **)&g->cap_dec,
                            (size_t)a->L * (size_t)a->NH * (size_t)g->base.n_ctx * sizeof(float), err);
    }
    size_t floats = (size_t)a->L * (size_t)a->n_rows * (size_t)a->NH * (size_t)a->ld;
    if (floats <= g->cap_floats)
        return TT_OK;
    if (floats < 2 * g->cap_floats)
        floats = 2 * g->cap_floats;
    cudaFree(g->cap);
    g->cap = NULL;
    g->cap_floats = 0;
    tt_status s = alloc_device(g, (char **)&g->cap, floats * sizeof(float), err);
    if (s == TT_OK)
        g->cap_floats = floats;
    return s;
}

/* Chooses the kept rows among the T positions pos .. pos+T-1 about to be queued (none: cap_nr 0);
 * q holds them from row 0 of the chunk. */
static void capture_chunk(cuda_engine *g, const cuda_seq *sq, int pos, int T)
{
    const engine_attention *a = g->base.attention;
    g->cap_nr = 0;
    if (!a || !a->n_rows)
        return;
    int p0 = a->first_pos > pos ? a->first_pos : pos;
    int p1 = a->first_pos + a->n_rows < pos + T ? a->first_pos + a->n_rows : pos + T;
    if (p0 >= p1)
        return;
    g->cap_r0 = p0 - a->first_pos;
    g->cap_nr = p1 - p0;
    g->cap_q_row = p0 - pos;
    g->cap_pos = p0;
    g->cap_k = (char *)sq->k;
}

static tt_status cuda_seq_forward(engine *e, int seq, const int32_t *ids, int n, int pos, bool all_logits,
                                  tt_error *err)
{
    cuda_engine *g = (cuda_engine *)e;
    const int V = e->config->V;
    const cuda_seq *sq = &g->seqs[seq];
    e->n_logits = 0;
    if (g->dead)
        return stopped(g, err);
    tt_status s = reserve_logits(g, all_logits ? n : 1, err);
    if (s != TT_OK)
        return s;
    g->steps++;
    /* The last token, when only its logits are wanted, runs as a decode step of one row: its logits
     * then come from the kernels of a row of a batch (the decode attention kernel, not the prefill
     * GEMMs, which round the probabilities to the dtype), so a sample that recomputes a copied
     * prompt's last token in a batch (core/session/samples.c) gets what the prompt run alone gets. It costs
     * one more read of the weights per span. */
    const bool last_row = !all_logits || n == 1;
    const int span = last_row ? n - 1 : n;
    const bool capture = e->attention && e->attention->n_rows > 0;
    if (capture && (s = capture_reserve(g, last_row, err)) != TT_OK)
        return s;
    for (int s0 = 0; s0 < span && s == TT_OK; s0 += g->TB) {
        int T = span - s0 < g->TB ? span - s0 : g->TB;
        float *out = last_row ? e->logits : e->logits + (size_t)s0 * (size_t)V;
        bool lens_here = seq == 0 && !last_row && s0 + T == span;   /* the span's last row */
        capture_chunk(g, sq, pos + s0, T);
        s = run_chunk(g, sq, ids + s0, T, pos + s0, last_row ? T : 0, out, lens_here ? e->lens : NULL, err);
    }
    if (s == TT_OK && last_row) {
        g->h_rows[0] = cuda_row{pos + n - 1, ids[n - 1], sq->k, sq->v};
        capture_chunk(g, sq, pos + n - 1, 1);
        s = run_rows(g, 1, e->logits, seq == 0 ? e->lens : NULL, err);
    }
    g->cap_nr = 0;
    if (s == TT_OK && capture) {
        const engine_attention *a = e->attention;
        size_t floats = (size_t)a->L * (size_t)a->n_rows * (size_t)a->NH * (size_t)a->ld;
        /* a decode step's row comes packed as the host holds it (one row: ld = pos + 1) */
        cudaError_t r = cudaMemcpy(a->w, last_row ? g->cap_dec : g->cap, floats * sizeof(float),
                                   cudaMemcpyDeviceToHost);
        if (!gpu_ok(r))
            s = gpu_fail_status(g, err, r, "cudaMemcpy(attention capture)", __FILE__, __LINE__);
    }
    if (s != TT_OK)
        return s;
    seq_set_len(g, seq, pos + n);
    e->n_logits = all_logits ? n : 1;
    return TT_OK;
}

static tt_status cuda_forward(engine *e, const int32_t *ids, int n, int pos, bool all_logits, tt_error *err)
{
    return cuda_seq_forward(e, 0, ids, n, pos, all_logits, err);
}

static void cuda_seq_truncate(engine *e, int seq, int pos)
{
    /* The stale rows past pos are overwritten by the next append and never read before. */
    cuda_engine *g = (cuda_engine *)e;
    if (pos < seq_len(g, seq))
        seq_set_len(g, seq, pos < 0 ? 0 : pos);
}

static void cuda_truncate(engine *e, int pos)
{
    cuda_seq_truncate(e, 0, pos);
}

/* Rows of up to TB sequences per step (the engine wrapper checked them: distinct, room left, ids in
 * range). Lengths grow only once every row has run, so a failure leaves them as they were. */
static tt_status cuda_forward_batch(engine *e, const int *seqs, const int32_t *ids, int B, tt_error *err)
{
    cuda_engine *g = (cuda_engine *)e;
    const size_t V = (size_t)e->config->V;
    e->n_logits = 0;
    if (g->dead)
        return stopped(g, err);
    tt_status s = reserve_logits(g, B, err);
    if (s != TT_OK)
        return s;
    g->steps++;
    g->batch_steps++;
    for (int b0 = 0; b0 < B; b0 += g->TB) {
        int T = B - b0 < g->TB ? B - b0 : g->TB;
        for (int b = 0; b < T; b++) {
            const int q = seqs[b0 + b];
            g->h_rows[b] = cuda_row{seq_len(g, q), ids[b0 + b], g->seqs[q].k, g->seqs[q].v};
        }
        if ((s = run_rows(g, T, e->logits + (size_t)b0 * V, NULL, err)) != TT_OK)
            return s;
    }
    for (int b = 0; b < B; b++)
        seq_set_len(g, seqs[b], seq_len(g, seqs[b]) + 1);
    e->n_logits = B;
    return TT_OK;
}

/* K then V of one sequence in one allocation at base (NULL: only measures), as plan() lays out
 * sequence 0's. */
static size_t carve_seq(cuda_engine *g, char *base, cuda_seq *out)
{
    const model_config *cfg = g->base.config;
    const size_t bytes = (size_t)g->base.n_ctx * model_config_kv_bytes_per_token(cfg, tt_dtype_size(g->base.dtype)) / 2;
    carver c = {base, 0};
    out->k = (char *)carve(&c, bytes);
    out->v = (char *)carve(&c, bytes);
    out->len = 0;
    return c.used;
}

static tt_status cuda_seq_reserve(engine *e, int n, tt_error *err)
{
    cuda_engine *g = (cuda_engine *)e;
    if (n <= g->n_seqs)
        return TT_OK;
    if (g->dead)
        return stopped(g, err);
    cuda_seq *seqs = (cuda_seq *)realloc(g->seqs, (size_t)n * sizeof *seqs);
    if (!seqs)
        return tt_fail(err, TT_ERR_NOMEM, "cuda: cannot allocate the table of %d sequences", n);
    g->seqs = seqs;
    const int had = g->n_seqs;
    for (int i = had; i < n; i++) {
        size_t free_b = 0, total_b = 0;
        cudaError_t r = cudaMemGetInfo(&free_b, &total_b);
        char *p = NULL;
        if (r == cudaSuccess && free_b >= g->seq_bytes)
            r = cudaMalloc((void **)&p, g->seq_bytes);
        if (r == cudaSuccess && p)
            r = cudaMemsetAsync(p, 0, g->seq_bytes, g->stream);   /* as sequence 0: deterministic */
        if (r != cudaSuccess || !p) {
            cudaGetLastError();
            if (p)
                cudaFree(p);
            for (int k = had; k < i; k++) {
                cudaFree(g->seqs[k].k);
                e->memory_bytes -= g->seq_bytes;
            }
            cudaGetLastError();
            if (r != cudaSuccess && r != cudaErrorMemoryAllocation)
                return gpu_fail_status(g, err, r, "cudaMalloc/cudaMemsetAsync(sequence cache)", __FILE__,
                                       __LINE__);
            return tt_fail(err, TT_ERR_NOMEM, "cuda: %d sequences need %.1f MiB more device memory for "
                           "their KV caches (%.1f MiB each, %d positions in %s); sequence %d does not fit: "
                           "%.0f MiB free of %.0f MiB on %s", n, mib(g->seq_bytes * (size_t)(n - had)),
                           mib(g->seq_bytes), e->n_ctx, tt_dtype_name(e->dtype), i, mib(free_b),
                           mib(total_b), g->device_name);
        }
        carve_seq(g, p, &g->seqs[i]);
        e->memory_bytes += g->seq_bytes;
    }
    g->n_seqs = n;
    return TT_OK;
}

static int cuda_seq_count(const engine *e)
{
    return ((const cuda_engine *)e)->n_seqs;
}

static int cuda_seq_len(const engine *e, int seq)
{
    return seq_len((const cuda_engine *)e, seq);
}

/* Queued on the engine's stream, so the next forward sees the rows. A launch error stops the engine
 * like one in a forward: the next forward reports it (the interface's copy cannot fail). */
static void cuda_seq_copy(engine *e, int dst, int src, int from, int n)
{
    cuda_engine *g = (cuda_engine *)e;
    const model_config *cfg = e->config;
    if (g->dead)
        return;
    const cuda_seq *d = &g->seqs[dst], *sq = &g->seqs[src];
    cudaError_t r = cuda_kv_copy(d->k, d->v, sq->k, sq->v, from, n, cfg->L, cfg->NKV, e->n_ctx, cfg->HS, e->dtype,
                                 g->stream);
    if (r != cudaSuccess)
        gpu_fail_status(g, NULL, r, "cuda_kv_copy(d->k, d->v, sq->k, sq->v, ...)", __FILE__, __LINE__);
    seq_set_len(g, dst, n);
}

/* =============================================================================================
 * Creation */

static void cuda_destroy(engine *e)
{
    cuda_engine *g = (cuda_engine *)e;
    if (!g)
        return;
    if (g->co.profile) {
        char table[4096];
        if (cuda_engine_profile_format(e, table, sizeof table) > 0)
            fputs(table, stderr);
    }
    prof_free(&g->prof);
    /* After a sticky error these calls fail too; the memory goes with the context either way. */
    drop_graphs(g);
    free(g->graphs);
    for (int i = 1; i < g->n_seqs; i++)
        cudaFree(g->seqs[i].k);
    free(g->seqs);
    if (g->cublas)
        cublasDestroy(g->cublas);
    if (g->stream)
        cudaStreamDestroy(g->stream);
    cudaFree(g->weights);
    cudaFree(g->cache);
    cudaFree(g->acts);
    cudaFree(g->cap);
    cudaFree(g->cap_dec);
    cudaFree(g->cap_q);
    cudaFreeHost(g->h_tokens);
    cudaFreeHost(g->h_rows);
    cudaFreeHost(e->logits);
    cudaGetLastError();
    free(g->layers);
    free(g);
}

static const engine_seq_ops cuda_seq_ops = {
    cuda_seq_reserve,
    cuda_seq_count,
    cuda_seq_len,
    cuda_seq_forward,
    cuda_forward_batch,
    cuda_seq_copy,
    cuda_seq_truncate,
};

static const engine_ops cuda_ops = {
    "cuda",
    cuda_forward,
    cuda_truncate,
    cuda_destroy,
    &cuda_seq_ops,
    NULL,   /* warm: the weights stay in the GPU's memory */
    NULL,   /* set_solo */
};

static tt_status alloc_device(cuda_engine *g, char **p, size_t bytes, tt_error *err)
{
    cudaError_t e = cudaMalloc((void **)p, bytes);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        *p = NULL;
        return out_of_memory(g, err, "cudaMalloc failed");
    }
    GPU_CHECK(e);
    return TT_OK;
}

static tt_status setup(cuda_engine *g, tt_error *err)
{
    const model_config *cfg = g->base.config;
    engine *e = &g->base;

    GPU_CHECK(cudaSetDevice(g->device));
    cudaDeviceProp prop;
    GPU_CHECK(cudaGetDeviceProperties(&prop, g->device));
    snprintf(g->device_name, sizeof g->device_name, "%s", prop.name);

    carver w = {NULL, 0}, kv = {NULL, 0}, a = {NULL, 0};
    plan(g, &w, &kv, &a);
    g->weights_bytes = w.used;
    g->cache_bytes = kv.used;
    g->acts_bytes = a.used;
    size_t free_b = 0, total_b = 0;
    GPU_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (w.used + kv.used + a.used > free_b)
        return out_of_memory(g, err, NULL);

    GPU_CHECK(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    BLAS_CHECK(cublasCreate(&g->cublas));
    BLAS_CHECK(cublasSetStream(g->cublas, g->stream));   /* before the workspace: it resets it */
    tt_status s;
    if ((s = alloc_device(g, &g->weights, w.used, err)) != TT_OK ||
        (s = alloc_device(g, &g->cache, kv.used, err)) != TT_OK ||
        (s = alloc_device(g, &g->acts, a.used, err)) != TT_OK)
        return s;
    g->layers = (cuda_layer *)calloc((size_t)cfg->L, sizeof *g->layers);
    if (!g->layers)
        return tt_fail(err, TT_ERR_NOMEM, "cuda: cannot allocate the layer table");
    w.base = g->weights;
    w.used = 0;
    kv.base = g->cache;
    kv.used = 0;
    a.base = g->acts;
    a.used = 0;
    plan(g, &w, &kv, &a);
    BLAS_CHECK(cublasSetWorkspace(g->cublas, g->workspace, CUDA_WORKSPACE));

    if ((s = upload_weights(g, err)) != TT_OK)
        return s;
    /* The uploads ran on the legacy default stream, which a non-blocking stream does not wait
     * for: the last copy from pageable memory may still be in flight. */
    GPU_CHECK(cudaDeviceSynchronize());
    /* Never read before written, but a zeroed cache keeps stale-read bugs deterministic. */
    GPU_CHECK(cudaMemsetAsync(g->cache, 0, g->cache_bytes, g->stream));
    /* Fails here, once, when this build holds no code for the device. */
    GPU_CHECK(cuda_kernels_probe(g->d_tokens, g->stream));
    GPU_CHECK(cudaStreamSynchronize(g->stream));

    GPU_CHECK(cudaMallocHost((void **)&g->h_tokens, (size_t)(1 + g->TB) * sizeof(int)));
    GPU_CHECK(cudaMallocHost((void **)&g->h_rows, (size_t)g->TB * sizeof(cuda_row)));
    g->graphs = (cudaGraphExec_t *)calloc((size_t)g->TB + 1, sizeof *g->graphs);
    g->seqs = (cuda_seq *)calloc(1, sizeof *g->seqs);
    if (!g->graphs || !g->seqs)
        return tt_fail(err, TT_ERR_NOMEM, "cuda: cannot allocate the engine's tables");
    cuda_seq measured;
    g->seq_bytes = carve_seq(g, NULL, &measured);
    g->seqs[0] = cuda_seq{g->k_cache, g->v_cache, 0};
    g->n_seqs = 1;
    if ((s = reserve_logits(g, 1, err)) != TT_OK)
        return s;
    if (g->co.profile && (s = prof_setup(g, err)) != TT_OK)
        return s;

    /* Read per decode step: every matrix once (the lm_head included), the vectors, a row of each
     * embedding table (the model's count; the vectors are fp32 here, a few kilobytes more). */
    e->weight_bytes = model_weight_bytes(e->model, e->dtype);
    e->memory_bytes += g->weights_bytes + g->cache_bytes + g->acts_bytes;
    snprintf(e->description, sizeof e->description, "cuda: %.100s, %s weights, graphs %s", g->device_name,
             tt_dtype_name(e->dtype), g->co.use_graphs ? "on" : "off");
    return TT_OK;
}

extern "C" tt_status cuda_engine_create(const model *m, const engine_options *o, const cuda_engine_options *co,
                                        engine **out, tt_error *err)
{
    *out = NULL;
    const model_config *cfg = &m->config;
    engine_options def;
    cuda_engine_options cdef;
    if (!o) {
        engine_options_default(&def);
        o = &def;
    }
    /* GGUF blocks held as stored (the CPU engine's TT_GGUF, a quantized file's default): the GPU
     * engine has no kernels for them and dequantizes them to fp16 at upload. */
    engine_options gguf_o;
    const bool from_gguf = o->dtype == TT_GGUF;
    if (from_gguf) {
        gguf_o = *o;
        gguf_o.dtype = TT_F16;
        o = &gguf_o;
    }
    if (!co) {
        cuda_engine_options_default(&cdef);
        co = &cdef;
    }
    /* Separate q, k, v (or gate, up) tensors are uploaded side by side into one matrix: as rows
     * when the file stores nn.Linear (N, K) matrices; Conv1D (K, N) ones would interleave. */
    const tensor_ref *t0 = model_layer_tensors(m, 0);
    if ((!(cfg->features & ARCH_F_QKV_FUSED) && t0[ARCH_T_Q].in_out) ||
        ((cfg->features & ARCH_F_SWIGLU) && t0[ARCH_T_GATE].in_out))
        return tt_fail(err, TT_ERR_UNSUPPORTED, "cuda: %s: separate q/k/v or gate/up matrices stored "
                       "[in, out] are not supported by the GPU engine; use --backend cpu", cfg->arch->name);
    if (o->dtype == TT_Q8)
        return tt_fail(err, TT_ERR_ARG, "cuda: --dtype q8 runs on the CPU only (the GPU engine "
                       "holds fp32, fp16 or bf16): use --backend cpu or another --dtype");
    if (o->dtype != TT_F32 && o->dtype != TT_F16 && o->dtype != TT_BF16)
        return tt_fail(err, TT_ERR_ARG, "cuda: unknown weight dtype %d", (int)o->dtype);
    /* The CPU engine's default (core/cpu/cpu.c): the model's context, up to 4,096 positions. */
    int n_ctx = engine_options_ctx(o, cfg);
    if (n_ctx > cfg->maxT)
        return tt_fail(err, TT_ERR_ARG, "cuda: context of %d tokens is longer than the model's "
                       "%d positions", n_ctx, cfg->maxT);
    if (cfg->HS > CUDA_MAX_HS)
        return tt_fail(err, TT_ERR_UNSUPPORTED, "cuda: head size %d is larger than the %d the "
                       "attention kernels handle", cfg->HS, CUDA_MAX_HS);
    char why[160];
    if (!cuda_backend_available(why, sizeof why))
        return tt_fail(err, TT_ERR_DEVICE, "cuda: %s", why);
    int count = 0;
    cudaGetDeviceCount(&count);
    if (co->device < 0 || co->device >= count)
        return tt_fail(err, TT_ERR_ARG, "cuda: device %d requested, %d present", co->device, count);

    cuda_engine *g = (cuda_engine *)calloc(1, sizeof *g);
    if (!g)
        return tt_fail(err, TT_ERR_NOMEM, "cuda: cannot allocate the engine");
    engine *e = &g->base;
    engine_init(e, &cuda_ops, m, n_ctx, o->dtype);
    g->co = *co;
    g->device = co->device;
    int tb = co->max_chunk > 0 ? co->max_chunk : CUDA_CHUNK;
    g->TB = n_ctx < tb ? n_ctx : tb;
    g->capturing = true;           /* errors during setup do not mark a half-built engine dead */
    tt_status s = setup(g, err);
    g->capturing = false;
    if (s != TT_OK) {
        cuda_destroy(e);
        return s;
    }
    if (from_gguf) {
        size_t n = strlen(e->description);
        snprintf(e->description + n, sizeof e->description - n, ", %s dequantized at upload",
                 m->quantization);
    }
    *out = e;
    return TT_OK;
}

/* =============================================================================================
 * Statistics and the benchmark line */

extern "C" bool cuda_engine_get_stats(const engine *e, cuda_engine_stats *out)
{
    if (!e || e->ops != &cuda_ops)
        return false;
    const cuda_engine *g = (const cuda_engine *)e;
    out->device_bytes = g->weights_bytes + g->cache_bytes + g->acts_bytes +
                        (size_t)(g->n_seqs - 1) * g->seq_bytes;
    out->weight_bytes = e->weight_bytes;
    out->kv_bytes_per_pos = model_config_kv_bytes_per_token(e->config, tt_dtype_size(e->dtype));
    out->graphs = g->co.use_graphs && !g->graph_failed;
    out->graph_replays = g->replays;
    out->steps = g->steps;
    out->sequences = g->n_seqs;
    out->sequence_bytes = g->seq_bytes;
    out->batch_steps = g->batch_steps;
    return true;
}

extern "C" size_t cuda_engine_decode_bytes(const engine *e, int pos)
{
    cuda_engine_stats st;
    if (!cuda_engine_get_stats(e, &st))
        return 0;
    return st.weight_bytes + (size_t)(pos < 0 ? 0 : pos + 1) * st.kv_bytes_per_pos;
}

extern "C" void cuda_bench_format(const engine *e, double decode_tokens_per_s, int pos, char *buf, size_t cap)
{
    cuda_engine_stats st;
    cuda_device_info_t info;
    tt_error err;
    if (!cuda_engine_get_stats(e, &st)) {
        snprintf(buf, cap, "gpu: not a CUDA engine");
        return;
    }
    if (cuda_device_info(&info, &err) != TT_OK) {
        snprintf(buf, cap, "gpu: %s", err.msg);
        return;
    }
    double bytes = (double)cuda_engine_decode_bytes(e, pos);
    double bw = bytes * decode_tokens_per_s;
    snprintf(buf, cap, "gpu: %s%s, engine holds %.0f MiB (%.0f of %.0f MiB in use on the device); decode "
             "reads %.1f MB/token -> %.1f GB/s = %.1f%% of the %.0f GB/s peak; graphs %s",
             info.name, info.emulated ? " (numbers are nominal)" : "", mib(st.device_bytes),
             mib(info.total_bytes - info.free_bytes), mib(info.total_bytes), bytes / 1e6, bw / 1e9,
             info.peak_bandwidth > 0 ? 100.0 * bw / info.peak_bandwidth : 0.0, info.peak_bandwidth / 1e9,
             st.graphs ? "on" : "off");
}

extern "C" size_t cuda_engine_profile_format(const engine *e, char *buf, size_t cap)
{
    if (cap)
        buf[0] = 0;
    if (!e || e->ops != &cuda_ops || !cap)
        return 0;
    const cuda_engine *g = (const cuda_engine *)e;
    const cuda_profile *p = &g->prof;
    if (p->steps == 0)
        return 0;
    cuda_device_info_t info;
    tt_error err;
    const double peak = cuda_device_info(&info, &err) == TT_OK ? info.peak_bandwidth : 0.0;
    double total = 0;
    for (int k = 0; k < PROF_KINDS; k++)
        total += p->ms[k];
    const double n = (double)p->steps;
    size_t len = 0;
#define PROF_PRINT(...)                                                                         \
    do {                                                                                        \
        int w_ = snprintf(buf + len, cap - len, __VA_ARGS__);                                   \
        if (w_ > 0)                                                                             \
            len = len + (size_t)w_ < cap ? len + (size_t)w_ : cap - 1;                          \
    } while (0)
    PROF_PRINT("cuda profile: %s, %s weights; %ld decode steps without a graph (%.2f rows a step)\n"
               "  device time between events recorded after each op (an op's time includes the device's idle\n"
               "  time before it)%s\n", g->device_name, tt_dtype_name(e->dtype), p->steps, (double)p->rows / n,
               info.emulated ? "; emulated: the times mean nothing" : "");
    PROF_PRINT("  %-30s %8s %10s %7s %9s %8s\n", "op", "per step", "us/step", "share", "GB/s", "of peak");
    for (int k = 0; k < PROF_KINDS; k++) {
        if (!p->calls[k])
            continue;
        PROF_PRINT("  %-30s %8.1f %10.1f %6.1f%%", prof_names[k], (double)p->calls[k] / n, 1e3 * p->ms[k] / n,
                   total > 0 ? 100.0 * p->ms[k] / total : 0.0);
        if (p->gb[k] > 0 && p->ms[k] > 0) {
            const double gbs = p->gb[k] / (p->ms[k] * 1e-3);
            PROF_PRINT(" %9.1f", gbs);
            if (peak > 0)
                PROF_PRINT(" %7.0f%%", 100.0 * gbs * 1e9 / peak);
        }
        PROF_PRINT("\n");
    }
    PROF_PRINT("  %-30s %8s %10.1f %6.1f%%\n", "device total", "", 1e3 * total / n, 100.0);
    PROF_PRINT("  %-30s %8s %10.1f  (launches, then the synchronize)\n", "host wall time", "",
               1e3 * p->wall_ms / n);
#undef PROF_PRINT
    return len;
}
