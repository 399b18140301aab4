/* blas_gpt2.c: how fast OpenBLAS runs the matrix work of GPT-2 124M on this machine, for the
 * README's comparison with tokentop's own kernels. Not part of the build (CI does not need
 * OpenBLAS); see tools/peer/README.md:
 *
 *   cc -O2 -o /tmp/blas_gpt2 tools/peer/blas_gpt2.c -lopenblas
 *   OPENBLAS_NUM_THREADS=2 /tmp/blas_gpt2 [prompt_tokens]
 *
 * Prefill: per layer the four products of a T-token span (QKV, attention output, MLP up and down)
 * with cblas_sgemm, 12 layers, the median of 5 passes, as GFLOP/s and as tokens/s of the matrix
 * work alone (attention, LayerNorm, GELU and the lm_head not included, so an engine built on it
 * would be slower than this). Decode: the same products for one token with cblas_sgemv over fp32
 * weights (the weights streamed once per token, like tokentop's fp32 decode), plus the lm_head. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { C = 768, L = 12, V = 50257, REPS = 5 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static float *rand_buf(size_t n)
{
    float *p = malloc(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "blas_gpt2: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    return p;
}

int main(int argc, char **argv)
{
    int T = argc > 1 ? atoi(argv[1]) : 256;
    if (T < 1 || T > 4096) {
        fprintf(stderr, "blas_gpt2: prompt tokens must be in [1, 4096]\n");
        return 2;
    }
    /* (k, n) of each product: x[T,k] @ W[k,n] */
    const int shapes[4][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}};
    float *w[L][4];
    for (int l = 0; l < L; l++)
        for (int i = 0; i < 4; i++)
            w[l][i] = rand_buf((size_t)shapes[i][0] * shapes[i][1]);
    float *wte = rand_buf((size_t)V * C);
    float *x = rand_buf((size_t)T * 4 * C), *y = rand_buf((size_t)T * 4 * C);
    float *logits = rand_buf(V);
    double flops = 0;
    for (int i = 0; i < 4; i++)
        flops += 2.0 * shapes[i][0] * shapes[i][1];
    flops *= L;

    double t[REPS];
    for (int r = 0; r < REPS + 1; r++) {
        double t0 = now_s();
        for (int l = 0; l < L; l++)
            for (int i = 0; i < 4; i++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, shapes[i][1],
                            shapes[i][0], 1.0f, x, shapes[i][0], w[l][i], shapes[i][1], 0.0f, y,
                            shapes[i][1]);
        if (r > 0) /* the first pass warms up the threads and pages */
            t[r - 1] = now_s() - t0;
    }
    qsort(t, REPS, sizeof t[0], cmp);
    double tp = t[REPS / 2];
    printf("openblas %s\n", openblas_get_config());
    printf("prefill  %d tokens, matrix work only: %.1f ms, %.1f GFLOP/s, %.1f tok/s\n", T,
           tp * 1e3, flops * T / tp * 1e-9, T / tp);

    double td[REPS * 4];
    int nd = 0;
    for (int r = 0; r < REPS * 4 + 1; r++) {
        double t0 = now_s();
        for (int l = 0; l < L; l++)
            for (int i = 0; i < 4; i++)
                cblas_sgemv(CblasRowMajor, CblasTrans, shapes[i][0], shapes[i][1], 1.0f, w[l][i],
                            shapes[i][1], x, 1, 0.0f, y, 1);
        cblas_sgemv(CblasRowMajor, CblasNoTrans, V, C, 1.0f, wte, C, x, 1, 0.0f, logits, 1);
        if (r > 0)
            td[nd++] = now_s() - t0;
    }
    qsort(td, nd, sizeof td[0], cmp);
    double tdm = td[nd / 2];
    double bytes = (flops / 2 + (double)V * C) * sizeof(float);
    printf("decode   1 token, matrix work + lm_head, fp32 weights: %.2f ms, %.1f tok/s, "
           "%.1f GB/s of weights\n", tdm * 1e3, 1 / tdm, bytes / tdm * 1e-9);
    return 0;
}
