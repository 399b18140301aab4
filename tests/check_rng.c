/* check_rng.c: the PRNG is deterministic per seed and uniform draws stay in [0, 1). */
#include <check.h>
#include <stdlib.h>

#include "core/rng.h"
#include "tests/testutil.h"

START_TEST(same_seed_gives_same_stream)
{
    rng a, b;
    rng_seed(&a, 7);
    rng_seed(&b, 7);
    for (int i = 0; i < 1000; i++)
        ck_assert_uint_eq(rng_next(&a), rng_next(&b));
}
END_TEST

START_TEST(different_seeds_give_different_streams)
{
    rng a, b;
    rng_seed(&a, 0);
    rng_seed(&b, 1);
    int same = 0;
    for (int i = 0; i < 100; i++)
        same += rng_next(&a) == rng_next(&b);
    ck_assert_int_eq(same, 0);
}
END_TEST

START_TEST(stream_is_pinned_across_builds)
{
    /* First output for seed 42, computed independently (Python, from the published algorithm):
     * a seed must give the same tokens on every machine and release. */
    rng r;
    rng_seed(&r, 42);
    double u = rng_uniform(&r);
    ck_assert(u >= 0.0 && u < 1.0);
    rng_seed(&r, 42);
    uint64_t first = rng_next(&r);
    ck_assert_uint_eq(first, 0x15780b2e0c2ec716ull);
}
END_TEST

START_TEST(uniform_draws_are_in_unit_interval_with_mean_half)
{
    rng r;
    rng_seed(&r, 123);
    double sum = 0;
    for (int i = 0; i < 100000; i++) {
        double u = rng_uniform(&r);
        ck_assert(u >= 0.0 && u < 1.0);
        sum += u;
    }
    ck_assert(sum / 100000 > 0.49 && sum / 100000 < 0.51);
}
END_TEST

int main(void)
{
    return tu_run_tests("rng", TU_TESTS(
            same_seed_gives_same_stream, different_seeds_give_different_streams,
            stream_is_pinned_across_builds, uniform_draws_are_in_unit_interval_with_mean_half));
}
