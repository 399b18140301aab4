/* bench_spec.h: `tokentop bench --draft DIR --gamma 1..8`: speculative against plain decoding
 * per gamma and precision, next to the speed-up predicted from the measured acceptance and the
 * measured draft/target cost ratio. */
#ifndef TOKENTOP_BENCH_SPEC_H
#define TOKENTOP_BENCH_SPEC_H

#include <stdbool.h>

/* argv[0] is "bench". Options:
 *   --model DIR          target (default: the embedded model)
 *   --draft DIR          draft model (same tokenizer and vocab_size)
 *   --random-pair NOISE  instead of --model/--draft: write a random-weight pair to a temporary
 *                        directory: a target with GPT-2 124M shapes and a draft about 10x cheaper
 *                        (C 256, L 2, same vocabulary) whose logits the target's equal plus
 *                        Gaussian noise of NOISE * 1.41 standard deviations (0: identical)
 *   --gamma LIST         "1..8" (default), "4" or "1,2,4"
 *   --dtype LIST         fp32 | fp16 | bf16 | q8, comma-separated (default fp32)
 *   --gen-tokens N       tokens per run (default 128); --reps R runs per row (default 3, median)
 *   --prompt TEXT        the prompt (default: the first verse of Genesis)
 *   --threads N          CPU threads; --temp X (default 0: greedy), --top-k N, --top-p X, --seed
 *   --json               one JSON object per precision instead of the table
 * Returns the exit status (0 ok, 1 failure, 2 usage error). */
int bench_spec_main(int argc, char **argv);

/* True when argv asks for the speculative benchmark (--draft or --random-pair present). */
bool bench_spec_wanted(int argc, char **argv);

#endif
