/* bench_batch.c: batched decode throughput for `tokentop bench --batch`. */
#include "app/bench_batch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/clock.h"
#include "core/base/jsonw.h"
#include "core/base/rng.h"
#include "core/base/util.h"

int bench_batch_parse(const char *s, int *sizes)
{
    int n = 0;
    const char *p = s ? s : "";
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 1 || v > 256 || (*end != ',' && *end != 0) ||
            n == BENCH_BATCH_MAX || *p == ' ' || *p == '+') {
            fprintf(stderr, "tokentop bench: --batch: expected a comma-separated list of up to %d "
                    "batch sizes in [1, 256] (e.g. 1,2,4,8), got %s\n", BENCH_BATCH_MAX,
                    s ? s : "nothing");
            return -1;
        }
        sizes[n++] = (int)v;
        if (*end == 0)
            return n;
        p = end + 1;
    }
}

/* The sizes' steps alternate (one step of each size in turn, the order reversed every other
 * round), so that a change of the machine's load, of the thread count an adaptive pool chooses
 * under it, or of the memory bandwidth during the run falls on every size alike. Timed one size
 * after the other on a loaded 2-vCPU AMD EPYC, batch 1 ran 38% of its pool jobs on both threads
 * and batch 8 none, and five runs read 2.8x to 11.6x (docs/performance.md, Batched decode).
 * Every size runs on sequences 0 .. B-1: before its step of round s each is cut back to N + s
 * positions, so all sizes read caches of the same length and memory holds the largest size's
 * caches only (the tokens a size appends are overwritten by the next size's: the time of a step
 * does not depend on them). */
tt_status bench_batch_run(engine *e, const int *sizes, int n, int prompt_tokens, int gen_tokens,
                          size_t kv_bytes_per_pos, bench_batch_row *rows, tt_error *err)
{
    const model_config *cfg = e->config;
    const int N = prompt_tokens, M = gen_tokens;
    const double per_pos = kv_bytes_per_pos ? (double)kv_bytes_per_pos
                                            : 2.0 * cfg->L * cfg->C * sizeof(float);
    int maxB = 1;
    for (int i = 0; i < n; i++)
        maxB = sizes[i] > maxB ? sizes[i] : maxB;
    tt_status st = engine_seq_reserve(e, maxB, err);
    if (st != TT_OK)
        return st;
    int32_t *ids = malloc((size_t)(N > 1 ? N : 1) * sizeof *ids);
    int *seqs = malloc((size_t)maxB * sizeof *seqs);
    int32_t *next = malloc((size_t)n * (size_t)maxB * sizeof *next);   /* (n, maxB) */
    double *times = malloc((size_t)n * (size_t)M * sizeof *times);     /* (n, M) */
    unsigned long long jobs[BENCH_BATCH_MAX][2] = {{0}};   /* parallel, serial */
    if (!ids || !seqs || !next || !times) {
        st = tt_fail(err, TT_ERR_NOMEM, "bench: out of memory");
        goto out;
    }
    rng g;
    rng_seed(&g, 2);
    for (int i = 0; i < N; i++)
        ids[i] = (int32_t)(rng_next(&g) % (uint64_t)cfg->V);
    if ((st = engine_forward(e, ids, N, 0, false, err)) != TT_OK)
        goto out;
    int32_t first = (int32_t)util_argmax(engine_logits(e, 0), cfg->V);
    for (int b = 0; b < maxB; b++) {
        seqs[b] = b;
        if (b > 0 && (st = engine_seq_copy(e, b, 0, 0, N, err)) != TT_OK)
            goto out;
    }
    for (int i = 0; i < n * maxB; i++)
        next[i] = first;
    for (int s = 0; s < M; s++)
        for (int k = 0; k < n; k++) {
            int i = s % 2 ? n - 1 - k : k;
            int B = sizes[i];
            int32_t *nx = next + (size_t)i * (size_t)maxB;
            for (int b = 0; b < B; b++)
                engine_seq_truncate(e, b, N + s);
            unsigned long long par0, ser0, par1, ser1;
            cpu_engine_thread_jobs(e, &par0, &ser0);
            double t0 = tt_now_s();
            if ((st = engine_forward_batch(e, seqs, nx, B, err)) != TT_OK)
                goto out;
            times[(size_t)i * (size_t)M + (size_t)s] = tt_now_s() - t0;
            cpu_engine_thread_jobs(e, &par1, &ser1);
            jobs[i][0] += par1 - par0;
            jobs[i][1] += ser1 - ser0;
            for (int b = 0; b < B; b++)
                nx[b] = (int32_t)util_argmax(engine_logits(e, b), cfg->V);
        }
    for (int i = 0; i < n; i++) {
        rows[i].batch = sizes[i];
        rows[i].step_s = tt_median(times + (size_t)i * (size_t)M, M);
        rows[i].kv_bytes_per_sequence = per_pos * e->n_ctx;
        rows[i].kv_read_bytes = per_pos * (N + 0.5 * (M + 1));
        unsigned long long all = jobs[i][0] + jobs[i][1];
        rows[i].parallel_share = all ? (double)jobs[i][0] / (double)all : -1.0;
    }
out:
    free(ids);
    free(seqs);
    free(next);
    free(times);
    return st;
}

static double predicted_tok_s(const bench_batch_row *r, size_t weight_bytes, double bandwidth)
{
    if (bandwidth <= 0)
        return 0.0;
    return r->batch * bandwidth / ((double)weight_bytes + r->batch * r->kv_read_bytes);
}

void bench_batch_print(FILE *f, const bench_batch_row *rows, int n, size_t weight_bytes,
                       double bandwidth)
{
    double base = rows[0].batch > 0 ? rows[0].batch / rows[0].step_s : 0.0;
    for (int i = 0; i < n; i++) {
        double agg = rows[i].batch / rows[i].step_s;
        fprintf(f, "  batch %-3d     %.1f tok/s aggregate (%.2fx the first), %.1f tok/s per "
                "sequence, %.1f MB KV cache per sequence; bandwidth model: %.1f tok/s",
                rows[i].batch, agg, base > 0 ? agg / base : 0.0, 1.0 / rows[i].step_s,
                rows[i].kv_bytes_per_sequence * 1e-6,
                predicted_tok_s(&rows[i], weight_bytes, bandwidth));
        if (rows[i].parallel_share >= 0.0)
            fprintf(f, "; %.0f%% of its jobs on all threads", rows[i].parallel_share * 100.0);
        fputc('\n', f);
    }
}

void bench_batch_print_json(FILE *f, const bench_batch_row *rows, int n, size_t weight_bytes,
                            double bandwidth)
{
    fputs("\"batch\":[", f);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s{\"batch\":%d,\"aggregate_tok_s\":", i ? "," : "", rows[i].batch);
        jsonw_number(f, rows[i].batch / rows[i].step_s);
        fputs(",\"per_sequence_tok_s\":", f);
        jsonw_number(f, 1.0 / rows[i].step_s);
        fputs(",\"step_ms\":", f);
        jsonw_number(f, rows[i].step_s * 1e3);
        fprintf(f, ",\"kv_bytes_per_sequence\":%.0f,\"predicted_aggregate_tok_s\":",
                rows[i].kv_bytes_per_sequence);
        jsonw_number(f, predicted_tok_s(&rows[i], weight_bytes, bandwidth));
        if (rows[i].parallel_share >= 0.0) {
            fputs(",\"parallel_job_share\":", f);
            jsonw_number(f, rows[i].parallel_share);
        }
        fputc('}', f);
    }
    fputc(']', f);
}
