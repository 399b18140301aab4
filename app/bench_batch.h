/* bench_batch.h: `tokentop bench --batch 1,2,4,8`: decode throughput of B sequences advanced
 * together (one batched step per token) against one sequence, next to what the bandwidth model
 * predicts. */
#ifndef TOKENTOP_BENCH_BATCH_H
#define TOKENTOP_BENCH_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "core/engine/engine.h"
#include "core/base/status.h"

#define BENCH_BATCH_MAX 16         /* batch sizes one --batch list may hold */

typedef struct {
    int batch;                     /* B */
    double step_s;                 /* median time of one batched step (B tokens) */
    double kv_bytes_per_sequence;  /* KV cache memory one sequence holds (n_ctx positions) */
    double kv_read_bytes;          /* KV cache bytes one sequence's step reads, on average */
    double parallel_share;         /* of its steps' CPU thread-pool jobs, those the workers joined
                                      (an adaptive pool under load runs some on one thread);
                                      -1 where no count was kept */
} bench_batch_row;

/* Parses "1,2,4,8" (each in [1, 256], at most BENCH_BATCH_MAX, no blanks) into sizes; returns the
 * count, or -1 after a message on stderr naming the option and the value. */
int bench_batch_parse(const char *s, int *sizes);

/* The prompt (prompt_tokens random ids) is prefilled on sequence 0 and copied to sequences 1 ..
 * B-1 of the largest size, then gen_tokens rounds each run one batched step of every size in turn
 * on sequences 0 .. B-1, cut back to the round's length first; each row appends its greedy token.
 * Fills rows[i] for sizes[i]. kv_bytes_per_pos: cache bytes one position of one sequence holds (K
 * and V of every layer; the GPU engine's are in the weight dtype), 0 for the CPU engine's fp32
 * cache. Fails on an engine without sequences. */
tt_status bench_batch_run(engine *e, const int *sizes, int n, int prompt_tokens, int gen_tokens,
                          size_t kv_bytes_per_pos, bench_batch_row *rows, tt_error *err);

/* The table, and the JSON array ("batch":[...], no trailing comma). weight_bytes and bandwidth
 * (bytes/s, 0 when unknown) give the prediction: a step reads the weights once and every row's
 * KV cache, so B rows take (weight_bytes + B * kv_read) / bandwidth seconds at best. */
void bench_batch_print(FILE *f, const bench_batch_row *rows, int n, size_t weight_bytes,
                       double bandwidth);
void bench_batch_print_json(FILE *f, const bench_batch_row *rows, int n, size_t weight_bytes,
                            double bandwidth);

#endif
