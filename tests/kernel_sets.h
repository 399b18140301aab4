/* kernel_sets.h: the CPU kernel sets a Check suite runs its cases over (tests/testutil.c), for
 * the suites that test every set: check_kernels and check_kernels_gguf. */
#ifndef TOKENTOP_TESTS_KERNEL_SETS_H
#define TOKENTOP_TESTS_KERNEL_SETS_H

#include <stdbool.h>

#include "core/cpu/kernels.h"

/* The kernel sets this build and CPU have into out (room for every name in kernels_set_names):
 * the reference first when with_reference, then the SIMD sets. Returns how many. */
int tu_kernel_sets(const kernels **out, bool with_reference);

/* Names on stderr, once per suite ("SUITE: SKIPPED the S kernel set: REASON"), each set of
 * kernels_set_names that tu_kernel_sets leaves out. */
void tu_report_skipped_sets(const char *suite);

#endif
