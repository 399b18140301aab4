/* bench.h: `tokentop bench`: prefill and decode speed, time to first token, peak memory, the
 * KV cache's gain, and decode speed as a fraction of the machine's measured read bandwidth. */
#ifndef TOKENTOP_BENCH_H
#define TOKENTOP_BENCH_H

/* argv[0] is "bench". Options:
 *   --model DIR          model directory; without it a random model with GPT-2 124M shapes is
 *                        written to a temporary directory (and removed afterwards)
 *   --dtype D            fp32 (default) | fp16 | bf16: precision the engine holds weights in
 *   --prompt-tokens N    prefill length (default 256)
 *   --gen-tokens M       decode steps (default 128)
 *   --threads N          CPU threads (default: one per core)
 *   --json               one JSON object on stdout instead of the table
 *   --batch 1,2,4,8      also batched decode at each size (bench_batch.h)
 *   --attention          also decode with the attention capture on and off (its cost)
 * Returns the process exit status (0 ok, 1 failure, 2 usage error). */
int bench_main(int argc, char **argv);

#endif
