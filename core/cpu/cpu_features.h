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

#endif
