/* matmul_bench.c: the decode GEMVs of GPT-2 124M alone, per matrix shape, per dtype and kernel
 * set: time, bytes streamed and GB/s against a read of the same size, so a kernel can be judged
 * against the memory limit without the rest of the forward pass around it.
 *
 *   build/tools/matmul_bench [--dtype fp32,fp16,bf16,q8] [--set NAME] [--threads 1|2]
 *                            [--steps N] [--rows T] [--layers N] [--clock cpu|wall]
 *
 * One "step" multiplies one activation row (--rows T: T rows, a batched decode) by every weight
 * matrix of the model in forward order (12 x {c_attn 768x2304, attn c_proj 768x768, c_fc
 * 768x3072, mlp c_proj 3072x768}, then the lm_head 768x50257), each matrix cold in cache as in
 * a real step (the set is 0.5 GB at fp32); --layers 1 reuses one layer's matrices, which then
 * come from cache: the kernel's own speed, without memory's limit. Threads split every matrix into two panel ranges cut
 * at KERNELS_GEMV_PANELS, plain pthreads with a barrier between matrices (the engine's pool and
 * its load rule are left out). Q8 rows are quantized once per matrix (timed with it). The read
 * bandwidth is the best of 4 passes of a 4-accumulator read over 512 MiB with the same threads
 * and a prefetch 4 KiB ahead, like `tokentop bench`'s. Random weights in [-1, 1]. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/clock.h"
#include "core/base/dtype.h"
#include "core/cpu/kernels.h"

#define MB_KINDS 5
static const char *const kind_names[MB_KINDS] = {"c_attn", "attn.c_proj", "c_fc", "mlp.c_proj",
                                                 "lm_head"};
static const int kind_K[MB_KINDS] = {768, 768, 768, 3072, 768};
static const int kind_N[MB_KINDS] = {2304, 768, 3072, 768, 50257};
#define MB_LAYERS 12
#define MB_MATS (MB_LAYERS * 4 + 1)

typedef struct {
    const kernels *kern;
    packed_matrix mats[MB_MATS];
    int kind[MB_MATS];
    float *x, *out;                /* (T, 3072), (T, 50257) */
    kernels_q8_act *xq;
    uint16_t *xb;
    int T, n_threads, steps, layers;
    pthread_barrier_t bar;
    double kind_s[MB_KINDS];       /* summed over steps, thread 0's view */
    float *scratch[2];
} mb_state;

/* --clock cpu: the calling thread's CPU time instead of the wall clock (one thread only): on a
 * machine shared with other work, time spent descheduled is left out. */
static bool mb_cpu_clock;

static double mb_now(void)
{
    if (!mb_cpu_clock)
        return tt_now_s();
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t mb_rng = 0x9e3779b97f4a7c15ull;
static float mb_rand(void)
{
    mb_rng ^= mb_rng << 13;
    mb_rng ^= mb_rng >> 7;
    mb_rng ^= mb_rng << 17;
    return (float)((mb_rng >> 40) & 0xffffff) / (float)0x800000 - 1.0f;
}

/* Random packed weights written straight into every byte of the panels (packing 124M values
 * through packed_matrix_pack takes longer than the measurement), from an arena as the engine's
 * (weight_arena.h: on huge pages). */
static int mb_fill(packed_matrix *m, weight_arena *arena, tt_dtype dt, int K, int N)
{
    tt_error err;
    if (packed_matrix_alloc(m, arena, dt, K, N, &err) != TT_OK) {
        fprintf(stderr, "matmul_bench: %s\n", err.msg);
        return -1;
    }
    const size_t bytes = packed_matrix_bytes(dt, K, N);
    if (dt == TT_F32) {
        float *f = m->data;
        for (size_t i = 0; i < bytes / 4; i++)
            f[i] = mb_rand();
    } else if (dt == TT_F16 || dt == TT_BF16) {
        uint16_t *h = m->data;
        for (size_t i = 0; i < bytes / 2; i++)
            h[i] = dt == TT_F16 ? tt_f32_to_f16(mb_rand()) : tt_f32_to_bf16(mb_rand());
    } else {
        uint8_t *b = m->data;
        for (size_t blk = 0; blk < bytes / KERNELS_Q8_BLOCK_BYTES; blk++) {
            uint8_t *p = b + blk * KERNELS_Q8_BLOCK_BYTES;
            for (int j = 0; j < KERNELS_NR; j++) {
                uint16_t s = tt_f32_to_f16(0.01f * (1.5f + mb_rand()));
                memcpy(p + 2 * j, &s, 2);
            }
            for (int i = 2 * KERNELS_NR; i < KERNELS_Q8_BLOCK_BYTES; i++)
                p[i] = (uint8_t)(128 + (int)(127.0f * mb_rand()));
        }
    }
    return 0;
}

typedef struct {
    mb_state *s;
    int ith;
} mb_thread;

static void *mb_run(void *varg)
{
    mb_thread *th = varg;
    mb_state *s = th->s;
    for (int step = 0; step < s->steps; step++) {
        for (int i = 0; i < MB_MATS; i++) {
            /* --layers N < 12: layer l reads layer l % N's matrices (warm in cache for small N) */
            const int src = i == MB_MATS - 1 ? i : (i / 4 % s->layers) * 4 + i % 4;
            const packed_matrix *w = &s->mats[src];
            double t0 = 0;
            pthread_barrier_wait(&s->bar);
            if (th->ith == 0)
                t0 = mb_now();
            if (w->dtype == TT_Q8) {
                /* the rows split between the threads like the engine's cpu_rows (one row: one) */
                if (th->ith == 0)
                    s->kern->quantize_rows(s->x, 3072, w->K, 0, s->T, s->xq, 96);
                pthread_barrier_wait(&s->bar);
            } else if (w->dtype == TT_BF16 && s->kern->bf16_rows) {
                if (th->ith == 0)
                    s->kern->bf16_rows(s->x, 3072, w->K, 0, s->T, s->xb, 3072);
                pthread_barrier_wait(&s->bar);
            }
            matmul_args a = {.out = s->out, .ldo = 50257 + 32, .x = s->x, .ldx = 3072, .w = w,
                             .xq = s->xq, .ldxq = 96, .xb = s->xb, .ldxb = 3072, .T = s->T,
                             .epilogue = MM_STORE};
            int np = w->n_panels, cut = np;
            if (s->n_threads == 2)
                cut = (np / 2 + KERNELS_GEMV_PANELS - 1) / KERNELS_GEMV_PANELS * KERNELS_GEMV_PANELS;
            int p0 = th->ith == 0 ? 0 : cut, p1 = th->ith == 0 ? cut : np;
            if (p0 < p1)
                s->kern->matmul(&a, p0, p1, s->scratch[th->ith]);
            pthread_barrier_wait(&s->bar);
            if (th->ith == 0)
                s->kind_s[s->kind[i]] += mb_now() - t0;
        }
    }
    return NULL;
}

typedef struct {
    const unsigned long long *buf;
    size_t n;
    unsigned long long sink;
} mb_read;

static void *mb_read_run(void *varg)
{
    mb_read *r = varg;
    unsigned long long s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 8 <= r->n; i += 8) {
        __builtin_prefetch(r->buf + i + 512);
        s0 += r->buf[i] ^ r->buf[i + 4];
        s1 += r->buf[i + 1] ^ r->buf[i + 5];
        s2 += r->buf[i + 2] ^ r->buf[i + 6];
        s3 += r->buf[i + 3] ^ r->buf[i + 7];
    }
    r->sink = s0 + s1 + s2 + s3;
    return NULL;
}

/* Best of 4 passes over 512 MiB split between n_threads, in bytes per second; on huge pages as
 * the weights are. */
static double mb_bandwidth(int n_threads)
{
    const size_t bytes = (size_t)512 << 20;
    weight_arena *arena = weight_arena_new(true);
    unsigned long long *buf = arena ? weight_arena_alloc(arena, bytes) : NULL;
    if (!buf) {
        weight_arena_free(arena);
        return 0;
    }
    memset(buf, 1, bytes);
    double best = 0;
    for (int pass = 0; pass < 4; pass++) {
        mb_read r[2];
        pthread_t tid;
        const size_t n = bytes / 8 / (size_t)n_threads;
        for (int t = 0; t < n_threads; t++)
            r[t] = (mb_read){.buf = buf + (size_t)t * n, .n = n};
        double t0 = mb_now();
        if (n_threads == 2)
            pthread_create(&tid, NULL, mb_read_run, &r[1]);
        mb_read_run(&r[0]);
        if (n_threads == 2)
            pthread_join(tid, NULL);
        double bw = (double)bytes / (mb_now() - t0);
        best = bw > best ? bw : best;
    }
    weight_arena_free(arena);
    return best;
}

static int mb_one(const kernels *kern, tt_dtype dt, int n_threads, int steps, int T, int layers,
                  double bw)
{
    mb_state s = {.kern = kern, .T = T, .n_threads = n_threads, .steps = steps, .layers = layers};
    for (int l = 0, i = 0; l < MB_LAYERS; l++)
        for (int k = 0; k < 4; k++, i++)
            s.kind[i] = k;
    s.kind[MB_MATS - 1] = 4;
    weight_arena *arena = weight_arena_new(true);
    if (!arena)
        return -1;
    for (int i = 0; i < MB_MATS; i++)
        if ((i == MB_MATS - 1 || i < 4 * layers) &&
            mb_fill(&s.mats[i], arena, dt, kind_K[s.kind[i]], kind_N[s.kind[i]]) != 0)
            return -1;
    s.x = malloc((size_t)T * 3072 * sizeof *s.x);
    s.out = malloc((size_t)T * (50257 + 32) * sizeof *s.out);
    s.xq = malloc((size_t)T * 96 * sizeof *s.xq);
    s.xb = malloc((size_t)T * 3072 * sizeof *s.xb);
    for (int t = 0; t < 2; t++)
        if (posix_memalign((void **)&s.scratch[t], 64, KERNELS_MATMUL_SCRATCH(3072) * sizeof(float)))
            return -1;
    for (size_t i = 0; i < (size_t)T * 3072; i++)
        s.x[i] = mb_rand();
    pthread_barrier_init(&s.bar, NULL, (unsigned)n_threads);
    mb_thread th[2] = {{&s, 0}, {&s, 1}};
    pthread_t tid;
    /* one warm-up step, then the timed ones */
    int timed = s.steps;
    s.steps = 1;
    if (n_threads == 2)
        pthread_create(&tid, NULL, mb_run, &th[1]);
    mb_run(&th[0]);
    if (n_threads == 2)
        pthread_join(tid, NULL);
    memset(s.kind_s, 0, sizeof s.kind_s);
    s.steps = timed;
    if (n_threads == 2)
        pthread_create(&tid, NULL, mb_run, &th[1]);
    mb_run(&th[0]);
    if (n_threads == 2)
        pthread_join(tid, NULL);

    double total_s = 0, total_b = 0;
    for (int k = 0; k < MB_KINDS; k++) {
        const double per = k == 4 ? 1 : MB_LAYERS;
        const double bytes = per * (double)packed_matrix_bytes(dt, kind_K[k], kind_N[k]);
        const double sec = s.kind_s[k] / steps;
        total_s += sec;
        total_b += bytes;
        printf("%-10s %-5s %-5d %-11s %5dx%-5d %8.2f MB %8.3f ms %6.1f GB/s %5.2f of read\n",
               kern->name, tt_dtype_name(dt), T, kind_names[k], kind_K[k], kind_N[k], bytes / 1e6,
               sec * 1e3, bytes / sec / 1e9, bytes / sec / bw);
    }
    printf("%-10s %-5s %-5d %-11s %11s %8.2f MB %8.3f ms %6.1f GB/s %5.2f of read  %.1f steps/s\n",
           kern->name, tt_dtype_name(dt), T, "all", "", total_b / 1e6, total_s * 1e3,
           total_b / total_s / 1e9, total_b / total_s / bw, 1.0 / total_s);
    fflush(stdout);
    pthread_barrier_destroy(&s.bar);
    for (int i = 0; i < MB_MATS; i++)
        packed_matrix_free(&s.mats[i]);
    weight_arena_free(arena);
    free(s.x);
    free(s.out);
    free(s.xq);
    free(s.xb);
    free(s.scratch[0]);
    free(s.scratch[1]);
    return 0;
}

int main(int argc, char **argv)
{
    const char *dtypes = "fp32,fp16,bf16,q8", *set = NULL;
    int n_threads = 1, steps = 10, T = 1, layers = MB_LAYERS;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!val) {
            fprintf(stderr, "matmul_bench: %s needs a value\n", arg);
            return 2;
        }
        if (strcmp(arg, "--dtype") == 0)
            dtypes = val;
        else if (strcmp(arg, "--set") == 0)
            set = val;
        else if (strcmp(arg, "--threads") == 0)
            n_threads = atoi(val);
        else if (strcmp(arg, "--steps") == 0)
            steps = atoi(val);
        else if (strcmp(arg, "--rows") == 0)
            T = atoi(val);
        else if (strcmp(arg, "--layers") == 0)
            layers = atoi(val);
        else if (strcmp(arg, "--clock") == 0 && (strcmp(val, "cpu") == 0 || strcmp(val, "wall") == 0))
            mb_cpu_clock = strcmp(val, "cpu") == 0;
        else {
            fprintf(stderr, "matmul_bench: unknown option %s\n", arg);
            return 2;
        }
        i++;
    }
    if (n_threads < 1 || n_threads > 2 || steps < 1 || T < 1 || T > 64 || layers < 1 ||
        layers > MB_LAYERS || (mb_cpu_clock && n_threads != 1)) {
        fprintf(stderr, "matmul_bench: --threads 1|2, --steps >= 1, --rows 1..64, --layers 1..12, --clock cpu|wall (cpu: one thread)\n");
        return 2;
    }
    const kernels *kern = set ? kernels_by_name(set) : kernels_select();
    if (!kern) {
        fprintf(stderr, "matmul_bench: --set %s: not in this build or not run by this CPU\n", set);
        return 2;
    }
    const double bw = mb_bandwidth(n_threads);
    printf("read bandwidth %.1f GB/s (%d thread%s, best of 4 passes of 512 MiB, %s clock)\n",
           bw / 1e9, n_threads, n_threads > 1 ? "s" : "", mb_cpu_clock ? "cpu" : "wall");
    char buf[64];
    snprintf(buf, sizeof buf, "%s", dtypes);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        tt_dtype dt;
        if (tt_dtype_parse(tok, &dt) != 0) {
            fprintf(stderr, "matmul_bench: --dtype: unknown dtype %s\n", tok);
            return 2;
        }
        if (mb_one(kern, dt, n_threads, steps, T, layers, bw) != 0)
            return 1;
    }
    return 0;
}
