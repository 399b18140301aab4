/* check_weight_arena.c: the arena an engine's packed weights come from hands out aligned,
 * disjoint memory across blocks, from several threads at once, refuses impossible sizes, keeps
 * filling its current block around an allocation too large for it, falls back to smaller blocks
 * when address space runs short, and keeps every byte when settled onto huge pages. */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cpu/weight_arena.h"
#include "tests/testutil.h"

#define MIB ((size_t)1 << 20)

typedef struct {
    unsigned char *p;
    size_t n;
} span;

/* Fills each span with its own byte, then checks every span still holds it: overlapping spans
 * would have overwritten one another. */
static void assert_disjoint(const span *s, int n)
{
    for (int i = 0; i < n; i++)
        memset(s[i].p, (i % 251) + 1, s[i].n);
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < s[i].n; k += 4093) {
            ck_assert_int_eq(s[i].p[k], (i % 251) + 1);
            ck_assert_int_eq(s[i].p[s[i].n - 1], (i % 251) + 1);
        }
}

START_TEST(allocations_are_aligned_and_disjoint_across_blocks)
{
    weight_arena *a = weight_arena_new(true);
    ck_assert_ptr_nonnull(a);
    enum { N = 120 };
    span s[N];
    size_t total = 0;
    for (int i = 0; i < N; i++) {       /* 1 byte to 3 MiB: about 180 MiB, several blocks */
        s[i].n = i % 3 == 0 ? (size_t)(i + 1) : (size_t)(i % 7 + 1) * MIB / 2 + (size_t)i * 17;
        s[i].p = weight_arena_alloc(a, s[i].n);
        ck_assert_ptr_nonnull(s[i].p);
        ck_assert_uint_eq((uintptr_t)s[i].p % 64, 0);
        total += s[i].n;
    }
    ck_assert_uint_ge(weight_arena_reserved(a), total);
    assert_disjoint(s, N);
    weight_arena_free(a);
}
END_TEST

START_TEST(a_large_allocation_leaves_the_current_block_in_use)
{
    weight_arena *a = weight_arena_new(true);
    span s[4];
    s[0] = (span){weight_arena_alloc(a, MIB), MIB};
    const size_t first = weight_arena_reserved(a);
    s[1] = (span){weight_arena_alloc(a, 300 * MIB), 300 * MIB};   /* a block of its own */
    ck_assert_uint_ge(weight_arena_reserved(a), first + 300 * MIB);
    const size_t after = weight_arena_reserved(a);
    s[2] = (span){weight_arena_alloc(a, MIB), MIB};
    s[3] = (span){weight_arena_alloc(a, 5 * MIB), 5 * MIB};
    for (int i = 0; i < 4; i++)
        ck_assert_ptr_nonnull(s[i].p);
#if !defined(__SANITIZE_ADDRESS__)      /* there every allocation is a block of its own */
    ck_assert_uint_eq(weight_arena_reserved(a), after);   /* carved from the first block */
    ck_assert_ptr_eq(s[2].p, s[0].p + MIB);
#else
    (void)after;
#endif
    assert_disjoint(s, 4);
    weight_arena_free(a);
}
END_TEST

START_TEST(impossible_sizes_are_refused_and_the_arena_stays_usable)
{
    weight_arena *a = weight_arena_new(true);
    ck_assert_ptr_null(weight_arena_alloc(a, 0));
    ck_assert_ptr_null(weight_arena_alloc(a, SIZE_MAX));
    ck_assert_ptr_null(weight_arena_alloc(a, SIZE_MAX - 100));
    unsigned char *p = weight_arena_alloc(a, 4096);
    ck_assert_ptr_nonnull(p);
    memset(p, 7, 4096);
    weight_arena_free(a);
    weight_arena_free(NULL);
    ck_assert_uint_eq(weight_arena_reserved(NULL), 0);
}
END_TEST

/* In a child limited to 120 MiB more address space than it has: after two 64 MiB blocks the next
 * would be 128 MiB, which does not fit; the arena falls back to a block just for each request. */
START_TEST(a_block_too_large_for_the_address_space_falls_back_to_the_request)
{
#if defined(__SANITIZE_ADDRESS__)
    return;                        /* its shadow memory needs more address space than any limit */
#endif
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        weight_arena *a = weight_arena_new(true);
        void *first = weight_arena_alloc(a, 60 * MIB), *second = weight_arena_alloc(a, 60 * MIB);
        if (!first || !second)
            _exit(2);
        char line[256];
        unsigned long long vm = 0;
        FILE *f = fopen("/proc/self/status", "r");
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "VmSize: %llu kB", &vm) == 1)
                break;
        if (f)
            fclose(f);
        if (!vm)
            _exit(0);              /* no /proc: nothing to limit against */
        struct rlimit rl = {.rlim_cur = vm * 1024 + 120 * MIB, .rlim_max = vm * 1024 + 120 * MIB};
        if (setrlimit(RLIMIT_AS, &rl) != 0)
            _exit(0);
        for (int i = 0; i < 3; i++) {
            unsigned char *p = weight_arena_alloc(a, 30 * MIB);
            if (!p)
                _exit(3);
            memset(p, i + 1, 30 * MIB);
        }
        _exit(weight_arena_alloc(a, 200 * MIB) == NULL ? 0 : 4);   /* past the limit: NULL */
    }
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), 0);
}
END_TEST

/* An arena that started on 4 KiB pages keeps its bytes and addresses when settled onto huge
 * pages, moves no more than it handed out in whole 2 MiB units, and nothing once cancelled. */
START_TEST(settling_onto_huge_pages_keeps_every_byte)
{
    weight_arena *a = weight_arena_new(false);
    span s[6];
    size_t used = 0;
    for (int i = 0; i < 6; i++) {
        s[i].n = (size_t)(i + 1) * MIB + 4096 * (size_t)i;
        s[i].p = weight_arena_alloc(a, s[i].n);
        ck_assert_ptr_nonnull(s[i].p);
        used += s[i].n;
    }
    for (int i = 0; i < 6; i++)
        for (size_t k = 0; k < s[i].n; k++)
            s[i].p[k] = (unsigned char)(k * 31 + (size_t)i);
    atomic_bool cancel = true;
    ck_assert_uint_eq(weight_arena_settle(a, &cancel), 0);
    const size_t moved = weight_arena_settle(a, NULL);
    ck_assert_uint_le(moved, used);
    ck_assert_uint_eq(moved % (2 * MIB), 0);
    for (int i = 0; i < 6; i++)
        for (size_t k = 0; k < s[i].n; k++)
            if (s[i].p[k] != (unsigned char)(k * 31 + (size_t)i))
                ck_abort_msg("allocation %d byte %zu changed by the settle", i, k);
    unsigned char *later = weight_arena_alloc(a, MIB);    /* still serves after settling */
    ck_assert_ptr_nonnull(later);
    memset(later, 9, MIB);
    assert_disjoint(s, 6);
    weight_arena_free(a);
}
END_TEST

/* The paced settling asks before each 2 MiB, and stops when told: one allowed, then none. */
static bool allow_one(void *user)
{
    return (*(int *)user)++ < 1;
}

START_TEST(paced_settling_asks_before_each_2_mib_and_stops_when_told)
{
    weight_arena *a = weight_arena_new(false);
    unsigned char *p = weight_arena_alloc(a, 16 * MIB);
    ck_assert_ptr_nonnull(p);
    memset(p, 5, 16 * MIB);
    int asked = 0;
    const size_t moved = weight_arena_settle_paced(a, allow_one, &asked);
    ck_assert_uint_le(moved, 2 * MIB);   /* at most the one it was allowed */
    if (moved > 0)                       /* a kernel that collapses (an ASan build: nothing to do) */
        ck_assert_int_eq(asked, 2);      /* asked again before the second, which it did not move */
    else
        ck_assert_int_le(asked, 2);
    for (size_t k = 0; k < 16 * MIB; k += 4093)
        ck_assert_int_eq(p[k], 5);
    weight_arena_free(a);
}
END_TEST

typedef struct {
    weight_arena *a;
    span s[64];
} thread_job;

static void *alloc_many(void *arg)
{
    thread_job *j = arg;
    for (int i = 0; i < 64; i++) {
        j->s[i].n = (size_t)(i % 5 + 1) * 300000;
        j->s[i].p = weight_arena_alloc(j->a, j->s[i].n);
    }
    return NULL;
}

START_TEST(threads_allocating_at_once_get_disjoint_memory)
{
    weight_arena *a = weight_arena_new(true);
    thread_job j[2] = {{.a = a}, {.a = a}};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, alloc_many, &j[1]), 0);
    alloc_many(&j[0]);
    pthread_join(t, NULL);
    span all[128];
    for (int i = 0; i < 64; i++) {
        ck_assert_ptr_nonnull(j[0].s[i].p);
        ck_assert_ptr_nonnull(j[1].s[i].p);
        all[i] = j[0].s[i];
        all[64 + i] = j[1].s[i];
    }
    assert_disjoint(all, 128);
    weight_arena_free(a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("weight_arena");
    TCase *tc = tcase_create("weight_arena");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, allocations_are_aligned_and_disjoint_across_blocks);
    tcase_add_test(tc, a_large_allocation_leaves_the_current_block_in_use);
    tcase_add_test(tc, impossible_sizes_are_refused_and_the_arena_stays_usable);
    tcase_add_test(tc, threads_allocating_at_once_get_disjoint_memory);
    tcase_add_test(tc, settling_onto_huge_pages_keeps_every_byte);
    tcase_add_test(tc, paced_settling_asks_before_each_2_mib_and_stops_when_told);
    tcase_add_test(tc, a_block_too_large_for_the_address_space_falls_back_to_the_request);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
