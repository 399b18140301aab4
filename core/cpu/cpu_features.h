/* cpu_features.h: run-time facts about the CPU that the kernel sets ask for while they run, kept
 * apart from kernels.c (which picks a set) so that the sets and the chooser do not call each
 * other round a loop. */
#ifndef TOKENTOP_CPU_FEATURES_H
#define TOKENTOP_CPU_FEATURES_H

#include <stdbool.h>

/* Whether a one-row matmul (decode) and a Q8 batch of a few rows issue software prefetches ahead
 * of the panels they stream: yes on Intel CPUs, whose hardware prefetchers alone leave a core
 * short of its streaming rate; no elsewhere (on AMD Zen 4 the same prefetches slow the stream;
 * chosen by measurement: docs/performance.md). TOKENTOP_GEMV_PREFETCH=1 or 0 overrides the
 * choice (to measure it). Decided once; it moves loads only, never a result's bits. */
bool cpu_features_gemv_prefetch(void);

/* Whether a one-row attention (decode) hints the stream it reads next to the hardware
 * prefetchers while it reads the current one: the values while it scores the keys, the next
 * head's keys (attention_args.next_head) while it weights the values, one line in four. On AMD
 * Zen 4 a core then streams the caches as two runs at once instead of one after the other (8
 * sequences at 320 positions: docs/performance.md); Intel CPUs keep the loop as it was measured
 * there (not measured with the hints). TOKENTOP_ATTN_PREFETCH=1 or 0 overrides the choice.
 * Decided once; it moves loads only, never a result's bits. */
bool cpu_features_attention_prefetch(void);

#endif
