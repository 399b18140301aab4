/* attention_bench.c: the decode attention of a batched step alone: B sequences, each with its own
 * KV cache (GPT-2 124M's shapes: 12 layers, 12 heads of 64), one query row per sequence at
 * position P, every layer and head in the order the engine runs them; time and the cache bytes
 * read against that time, so the attention's share of a batched decode step can be judged
 * against memory's limit without the matmuls around it.
 *
 *   build/tools/attention_bench [--pos P] [--seqs B] [--reps N] [--set NAME]
 *
 * One thread, its CPU time (a shared machine's descheduled time left out); the caches come from
 * kvcache_init as the engine's do, filled with deterministic values up to P + N positions, and
 * each repetition moves one position on (as decode does). The caches of 8 sequences at a few
 * hundred positions are far larger than the last-level cache, so every repetition reads them from
 * memory. Prints the best and the mean repetition. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cpu/kernels.h"
#include "core/cpu/kvcache.h"

#define AB_L 12
#define AB_NH 12
#define AB_HS 64
#define AB_CTX 1024

static double ab_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int ab_int(const char *flag, const char *v, int lo, int hi)
{
    char *end;
    long n = v ? strtol(v, &end, 10) : 0;
    if (!v || *end || n < lo || n > hi) {
        fprintf(stderr, "attention_bench: %s: expected an integer in [%d, %d], got %s\n", flag, lo,
                hi, v ? v : "nothing");
        exit(2);
    }
    return (int)n;
}

int main(int argc, char **argv)
{
    int P = 320, B = 8, reps = 20;
    const char *set = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--pos"))
            P = ab_int("--pos", v, 0, AB_CTX - 2);
        else if (!strcmp(argv[i], "--seqs"))
            B = ab_int("--seqs", v, 1, 64);
        else if (!strcmp(argv[i], "--reps"))
            reps = ab_int("--reps", v, 1, 1000);
        else if (!strcmp(argv[i], "--set"))
            set = v;
        else {
            fprintf(stderr, "usage: attention_bench [--pos P] [--seqs B] [--reps N] [--set NAME]\n");
            return 2;
        }
        i++;
    }
    if (P + reps > AB_CTX) {
        fprintf(stderr, "attention_bench: --pos %d + --reps %d exceed the cache's %d positions\n",
                P, reps, AB_CTX);
        return 2;
    }
    const kernels *k = set ? kernels_by_name(set) : kernels_select();
    if (!k) {
        fprintf(stderr, "attention_bench: --set %s: no such kernel set on this CPU\n", set);
        return 2;
    }
    const int C = AB_NH * AB_HS;
    kvcache *kv = calloc((size_t)B, sizeof *kv);
    float *q = malloc((size_t)B * C * sizeof *q), *out = malloc((size_t)B * C * sizeof *out);
    float *scratch = malloc(KERNELS_ATTN_SCRATCH(AB_CTX) * sizeof(float));
    if (!kv || !q || !out || !scratch) {
        fprintf(stderr, "attention_bench: out of memory\n");
        return 1;
    }
    for (int i = 0; i < B * C; i++)
        q[i] = (float)(i * 37 % 101) / 101.0f - 0.5f;
    float kr[AB_HS], vr[AB_HS];
    for (int b = 0; b < B; b++) {
        tt_error err;
        if (kvcache_init(&kv[b], AB_L, AB_NH, AB_HS, AB_CTX, &err) != TT_OK) {
            fprintf(stderr, "attention_bench: %s\n", err.msg);
            return 1;
        }
        for (int l = 0; l < AB_L; l++)
            for (int h = 0; h < AB_NH; h++)
                for (int t = 0; t < P + reps; t++) {
                    for (int d = 0; d < AB_HS; d++) {
                        kr[d] = (float)((t * 7 + d * 3 + h) % 97) / 97.0f - 0.5f;
                        vr[d] = (float)((t * 5 + d + l) % 89) / 89.0f - 0.5f;
                    }
                    kvcache_store(&kv[b], l, h, t, kr, vr);
                }
    }
    double best = 1e30, sum = 0.0, bytes = 0.0;
    for (int r = 0; r < reps; r++) {
        const double t0 = ab_cpu_s();
        for (int l = 0; l < AB_L; l++)
            for (int b = 0; b < B; b++)
                for (int h = 0; h < AB_NH; h++) {
                    attention_args a = {.q = q + (size_t)b * C, .ldq = C,
                                        .k = kvcache_k(&kv[b], l), .v = kvcache_v(&kv[b], l),
                                        .n_ctx = kv[b].n_ctx, .ldk = kv[b].ldk,
                                        .out = out + (size_t)b * C, .ldo = C, .T = 1,
                                        .pos = P + r, .NH = AB_NH, .HS = AB_HS, .NKV = AB_NH,
                                        .next_head = h + 1 < AB_NH};
                    k->attention(&a, h, 0, 1, scratch);
                }
        const double dt = ab_cpu_s() - t0;
        sum += dt;
        if (dt < best) {
            best = dt;
            bytes = 2.0 * B * AB_L * AB_NH * (double)(P + r + 1) * AB_HS * sizeof(float);
        }
    }
    printf("%s: attention of %d sequences at position %d (%d reps, 1 thread, cpu clock): best "
           "%.3f ms (%.1f GB/s of keys and values), mean %.3f ms\n",
           k->name, B, P, reps, best * 1e3, bytes / best / 1e9, sum / reps * 1e3);
    for (int b = 0; b < B; b++)
        kvcache_free(&kv[b]);
    free(kv);
    free(q);
    free(out);
    free(scratch);
    return 0;
}
