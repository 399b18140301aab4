/* cpu_features.c: run-time CPU facts the kernel sets ask for (cpu_features.h). */
#include "core/cpu/cpu_features.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* CPUID leaf 0's vendor string is "GenuineIntel". */
static bool cpu_is_intel(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(0, &a, &b, &c, &d) && b == 0x756e6547u && d == 0x49656e69u &&
           c == 0x6c65746eu;
}
#else
static bool cpu_is_intel(void)
{
    return false;
}
#endif

static int gemv_prefetch = -1;          /* the answer: -1 not decided yet */

bool cpu_features_gemv_prefetch(void)
{
    int v = __atomic_load_n(&gemv_prefetch, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("TOKENTOP_GEMV_PREFETCH");
        v = e && *e ? strcmp(e, "0") != 0 : cpu_is_intel();
        __atomic_store_n(&gemv_prefetch, v, __ATOMIC_RELAXED);
    }
    return v == 1;
}

static int attention_prefetch = -1;     /* the answer: -1 not decided yet */

bool cpu_features_attention_prefetch(void)
{
    int v = __atomic_load_n(&attention_prefetch, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("TOKENTOP_ATTN_PREFETCH");
        v = e && *e ? strcmp(e, "0") != 0 : !cpu_is_intel();
        __atomic_store_n(&attention_prefetch, v, __ATOMIC_RELAXED);
    }
    return v == 1;
}
