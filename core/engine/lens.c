/* lens.c: the logit lens (lens.h): the final norm and the output head over kept residual rows. */
#include "core/engine/lens.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/arch/block_math.h"

/* Head rows converted at a time by each thread: a block of 16 rows of C floats stays in L2 while
 * every residual row is multiplied with it. */
#define LENS_BLOCK 16

#define LENS_THREADS_MAX 8

tt_status lens_enable(engine *e, tt_error *err)
{
    if (e->lens)
        return TT_OK;
    size_t n = (size_t)(e->config->L + 1) * (size_t)e->config->C;
    e->lens = calloc(n, sizeof(float));
    e->lens_logits = calloc((size_t)e->config->V, sizeof(float));
    if (!e->lens || !e->lens_logits) {
        lens_disable(e);
        return tt_fail(err, TT_ERR_NOMEM, "lens: cannot allocate %zu bytes for the residual "
                       "stream of %d layers and the logits",
                       (n + (size_t)e->config->V) * sizeof(float), e->config->L + 1);
    }
    e->lens_pos = -1;
    return TT_OK;
}

void lens_disable(engine *e)
{
    free(e->lens);
    e->lens = NULL;
    free(e->lens_logits);
    e->lens_logits = NULL;
    e->lens_pos = -1;
}

/* ---------------------------------------------------------------------------------------------
 * The final norm */

/* out (C) = the architecture's final norm of x, with the norm's vectors w and b (b NULL for
 * RMSNorm) already in float. */
static void lens_norm(const model_config *cfg, const float *x, const float *w, const float *b,
                      float *out)
{
    const int C = cfg->C;
    if (cfg->features & ARCH_F_RMSNORM) {
        double ss = 0;
        for (int i = 0; i < C; i++)
            ss += (double)x[i] * x[i];
        float rstd = arch_rmsnorm_rstd((float)(ss / C), cfg->norm_eps);
        for (int i = 0; i < C; i++)
            out[i] = arch_rmsnorm_apply(x[i], rstd, w[i]);
        return;
    }
    double sum = 0, sq = 0;
    for (int i = 0; i < C; i++)
        sum += x[i];
    double mean = sum / C;
    for (int i = 0; i < C; i++)
        sq += ((double)x[i] - mean) * ((double)x[i] - mean);
    float rstd = gpt2_layernorm_rstd((float)(sq / C), cfg->norm_eps);
    for (int i = 0; i < C; i++)
        out[i] = gpt2_layernorm_apply(x[i], (float)mean, rstd, w[i], b ? b[i] : 0.0f);
}

/* Whether values read from a tensor of dtype d are already as an engine holding held keeps them. */
static bool lens_exact(tensor_ref t, tt_dtype held)
{
    return (held != TT_F16 && held != TT_BF16) || (!t.quantized && t.dtype == held);
}

/* Reading the head is most of the lens' time on a large vocabulary (a Llama-3.2-1B shape: 262M
 * elements, read once for the 17 rows): on x86-64 the head's loop is compiled twice, for
 * x86-64-v3 (AVX2, FMA) and for the baseline, and the loader picks the one the CPU runs (GCC's
 * target_clones), and an fp16 head is widened 8 values at a time by F16C where the CPU has it
 * (the same values tt_f16_to_f32 gives: the conversion is exact). Elsewhere, and in sanitizer
 * builds (an ifunc resolver runs before the sanitizer is set up): plain C. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#include <immintrin.h>
#define LENS_X86 1
#define LENS_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))

__attribute__((target("avx,f16c"))) static void lens_f16_f16c(const unsigned char *p, size_t n,
                                                               float *dst)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 2 * i))));
    for (; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        dst[i] = tt_f16_to_f32(h);
    }
}
#else
#define LENS_X86 0
#define LENS_CLONES
#endif

/* n floats of t from element offset, rounded to held. */
static void lens_read(tensor_ref t, size_t offset, size_t n, tt_dtype held, bool f16c,
                      float *dst)
{
#if LENS_X86
    if (f16c && tensor_ref_is_plain(t) && t.dtype == TT_F16)
        lens_f16_f16c((const unsigned char *)t.data + offset * 2, n, dst);
    else
#endif
        tensor_ref_to_f32(t, offset, n, dst);
    (void)f16c;
    if (!lens_exact(t, held))
        for (size_t i = 0; i < n; i++)
            dst[i] = tt_held_f32(held, dst[i]);
}

/* ---------------------------------------------------------------------------------------------
 * The head: logits (n_rows, V) = xn (n_rows, C) head^T, head rows v0 .. v1-1 per thread */

typedef struct {
    tensor_ref head;               /* (V, C) */
    tt_dtype held;
    bool f16c;                     /* the CPU converts fp16 (lens_read) */
    const float *xn;               /* (n_rows, C) */
    float *logits;                 /* (n_rows, V) */
    int n_rows, C, V, v0, v1;
    float *buf;                    /* (LENS_BLOCK, C) */
} lens_job;

/* The dot product in four vectors of 8 independent sums (GCC's vector extension: 8-wide in the
 * x86-64-v3 clone, pairs of 4 in the baseline), so that the multiply-adds do not wait on each
 * other. */
typedef float lens_v8 __attribute__((vector_size(32)));

/* a (p: 8 floats, any alignment) times b, as a vector */
#define LENS_MUL8(p, q)                                                                           \
    ({                                                                                            \
        lens_v8 x_, y_;                                                                           \
        memcpy(&x_, (p), sizeof x_);                                                              \
        memcpy(&y_, (q), sizeof y_);                                                              \
        x_ * y_;                                                                                  \
    })

static inline float lens_dot(const float *a, const float *b, int n)
{
    lens_v8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 += LENS_MUL8(a + i, b + i);
        s1 += LENS_MUL8(a + i + 8, b + i + 8);
        s2 += LENS_MUL8(a + i + 16, b + i + 16);
        s3 += LENS_MUL8(a + i + 24, b + i + 24);
    }
    lens_v8 v = (s0 + s1) + (s2 + s3);
    float s = ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

LENS_CLONES static void *lens_job_run(void *varg)
{
    lens_job *j = varg;
    const size_t C = (size_t)j->C;
    for (int v = j->v0; v < j->v1; v += LENS_BLOCK) {
        int nb = j->v1 - v < LENS_BLOCK ? j->v1 - v : LENS_BLOCK;
        lens_read(j->head, (size_t)v * C, (size_t)nb * C, j->held, j->f16c, j->buf);
        for (int r = 0; r < j->n_rows; r++) {
            const float *x = j->xn + (size_t)r * C;
            float *out = j->logits + (size_t)r * (size_t)j->V + (size_t)v;
            for (int k = 0; k < nb; k++)
                out[k] = lens_dot(x, j->buf + (size_t)k * C, j->C);
        }
    }
    return NULL;
}

static int lens_threads(int n_threads)
{
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    return n_threads < LENS_THREADS_MAX ? n_threads : LENS_THREADS_MAX;
}

/* In place: each row of p (n_rows, V) from logits to probabilities. */
static void lens_softmax(float *p, int n_rows, int V)
{
    for (int r = 0; r < n_rows; r++) {
        float *row = p + (size_t)r * (size_t)V;
        float mx = row[0];
        for (int v = 1; v < V; v++)
            mx = row[v] > mx ? row[v] : mx;
        double sum = 0;
        for (int v = 0; v < V; v++)
            sum += (double)(row[v] = expf(row[v] - mx));
        float inv = (float)(1.0 / sum);
        for (int v = 0; v < V; v++)
            row[v] *= inv;
    }
}

tt_status lens_probs(const model *m, tt_dtype held, const float *resid, int n_rows, float *probs,
                     int n_threads, tt_error *err)
{
    const model_config *cfg = &m->config;
    const int C = cfg->C, V = cfg->V;
    const tensor_ref nw = m->tensors.global[ARCH_T_OUT_NORM];
    const tensor_ref nb = m->tensors.global[ARCH_T_OUT_NORM_B];
    int nth = lens_threads(n_threads);
    if (nth > (V + LENS_BLOCK - 1) / LENS_BLOCK)
        nth = (V + LENS_BLOCK - 1) / LENS_BLOCK;
    float *vec = malloc((size_t)C * 2 * sizeof(float));
    float *xn = malloc((size_t)n_rows * (size_t)C * sizeof(float));
    float *bufs = malloc((size_t)nth * LENS_BLOCK * (size_t)C * sizeof(float));
    lens_job *jobs = calloc((size_t)nth, sizeof *jobs);
    pthread_t *tids = calloc((size_t)nth, sizeof *tids);
    tt_status st = TT_OK;
    if (!vec || !xn || !bufs || !jobs || !tids) {
        st = tt_fail(err, TT_ERR_NOMEM, "lens: cannot allocate the work space for %d rows of %d",
                     n_rows, C);
        goto out;
    }
    float *w = vec, *b = NULL;
    lens_read(nw, 0, (size_t)C, held, false, w);
    if (nb.data) {
        b = vec + C;
        lens_read(nb, 0, (size_t)C, held, false, b);
    }
#if LENS_X86
    const bool f16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
#else
    const bool f16c = false;
#endif
    for (int r = 0; r < n_rows; r++)
        lens_norm(cfg, resid + (size_t)r * C, w, b, xn + (size_t)r * C);
    /* Shares in whole blocks, so that no two threads convert the same rows. */
    int blocks = (V + LENS_BLOCK - 1) / LENS_BLOCK;
    for (int t = 0; t < nth; t++) {
        lens_job *j = &jobs[t];
        *j = (lens_job){.head = m->tensors.global[ARCH_T_OUTPUT], .held = held, .f16c = f16c, .xn = xn,
                        .logits = probs, .n_rows = n_rows, .C = C, .V = V,
                        .buf = bufs + (size_t)t * LENS_BLOCK * (size_t)C};
        j->v0 = (int)((long)blocks * t / nth) * LENS_BLOCK;
        j->v1 = (int)((long)blocks * (t + 1) / nth) * LENS_BLOCK;
        if (j->v1 > V)
            j->v1 = V;
    }
    /* Job 0 runs on the calling thread; a thread that cannot start leaves its job to it too. */
    bool running[LENS_THREADS_MAX] = {false};
    for (int t = 1; t < nth; t++)
        running[t] = pthread_create(&tids[t], NULL, lens_job_run, &jobs[t]) == 0;
    lens_job_run(&jobs[0]);
    for (int t = 1; t < nth; t++) {
        if (running[t])
            pthread_join(tids[t], NULL);
        else
            lens_job_run(&jobs[t]);
    }
    lens_softmax(probs, n_rows, V);
out:
    free(vec);
    free(xn);
    free(bufs);
    free(jobs);
    free(tids);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * Summaries */

void lens_layer_summarize(const float *probs, int V, int layer, int k, int32_t token,
                          lens_layer *out)
{
    if (k < 1)
        k = 1;
    if (k > LENS_TOP_MAX)
        k = LENS_TOP_MAX;
    if (k > V)
        k = V;
    memset(out, 0, sizeof *out);
    out->layer = layer;
    out->p_token = -1;
    /* insertion into a short sorted list: V passes of at most k comparisons */
    int n = 0;
    double h = 0;
    for (int v = 0; v < V; v++) {
        float p = probs[v];
        if (p > 0)
            h -= (double)p * log2((double)p);
        if (n == k && p <= out->top_p[k - 1])
            continue;
        int i = n < k ? n++ : k - 1;
        while (i > 0 && out->top_p[i - 1] < p) {
            out->top_p[i] = out->top_p[i - 1];
            out->top_id[i] = out->top_id[i - 1];
            i--;
        }
        out->top_p[i] = p;
        out->top_id[i] = v;
    }
    out->n_top = n;
    out->entropy_bits = (float)h;
    if (token >= 0 && token < V) {
        float pt = probs[token];
        int rank = 1;
        for (int v = 0; v < V; v++)
            if (probs[v] > pt || (probs[v] == pt && v < token))
                rank++;
        out->p_token = pt;
        out->rank_token = rank;
    }
}

tt_status lens_engine_layers(const engine *e, int k, int32_t token, lens_layer *out, float *probs,
                             tt_error *err)
{
    const model_config *cfg = e->config;
    const int rows = cfg->L + 1;
    if (!e->lens)
        return tt_fail(err, TT_ERR_ARG, "lens: the engine kept no residual stream (the lens was "
                       "off during the forward)");
    if (e->lens_pos < 0)
        return tt_fail(err, TT_ERR_ARG, "lens: the engine kept no residual stream yet (no "
                       "forward since the lens was turned on)");
    float *p = probs ? probs : malloc((size_t)rows * (size_t)cfg->V * sizeof(float));
    if (!p)
        return tt_fail(err, TT_ERR_NOMEM, "lens: cannot allocate %d distributions of %d",
                       rows, cfg->V);
    /* Rows 0 .. L-1 through the final norm and head; row L is the engine's own output. */
    tt_status st = lens_probs(e->model, e->dtype, e->lens, rows - 1, p, e->threads, err);
    if (st == TT_OK) {
        float *out_row = p + (size_t)(rows - 1) * (size_t)cfg->V;
        memcpy(out_row, e->lens_logits, (size_t)cfg->V * sizeof(float));
        lens_softmax(out_row, 1, cfg->V);
        for (int l = 0; l < rows; l++)
            lens_layer_summarize(p + (size_t)l * (size_t)cfg->V, cfg->V, l, k, token, &out[l]);
    }
    if (!probs)
        free(p);
    return st;
}
