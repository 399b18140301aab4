/* check_diversity.c: the figures /samples, /compare and /beam put under each column
 * (core/decode/diversity.c): repeated 3-grams counted as defined (positions starting an n-gram seen
 * earlier), distinct-2 as the share of distinct bigrams, the mean raw log-probability, and the
 * short texts that have no n-grams at all. */
#include <check.h>
#include <math.h>
#include <stdint.h>

#include "core/decode/diversity.h"
#include "tests/testutil.h"

START_TEST(a_loop_counts_every_repeated_trigram_after_the_first_pass)
{
    /* a b c a b c a b c: 7 trigrams, the first 3 new, the other 4 repeats */
    const int32_t ids[] = {1, 2, 3, 1, 2, 3, 1, 2, 3};
    ck_assert_int_eq(diversity_repeated(ids, 9, 3), 4);
    /* bigrams: ab bc ca ab bc ca ab bc: 3 distinct of 8 */
    ck_assert_double_eq_tol(diversity_distinct(ids, 9, 2), 3.0 / 8.0, 1e-12);
}
END_TEST

START_TEST(text_without_repeats_scores_distinct_one_and_no_repeated_trigrams)
{
    const int32_t ids[] = {5, 6, 7, 8, 9, 10};
    ck_assert_int_eq(diversity_repeated(ids, 6, 3), 0);
    ck_assert_double_eq_tol(diversity_distinct(ids, 6, 2), 1.0, 1e-12);
}
END_TEST

START_TEST(a_trigram_repeated_far_apart_counts_once_per_repeat)
{
    /* "1 2 3" at 0, 7 and 11: the last two are repeats; "1 2 4" shares only a bigram with it */
    const int32_t ids[] = {1, 2, 3, 9, 1, 2, 4, 1, 2, 3, 8, 1, 2, 3};
    ck_assert_int_eq(diversity_repeated(ids, 14, 3), 2);
}
END_TEST

START_TEST(short_texts_have_no_ngrams_to_measure)
{
    const int32_t one[] = {42};
    ck_assert_double_eq(diversity_distinct(one, 1, 2), -1.0);
    ck_assert_int_eq(diversity_repeated(one, 1, 3), 0);
    ck_assert_int_eq(diversity_repeated(one, 0, 3), 0);
    diversity_figures f;
    diversity_compute(&f, one, NULL, 0);
    ck_assert_int_eq(f.tokens, 0);
    ck_assert_double_eq(f.mean_logprob, 0.0);
    ck_assert_double_eq(f.distinct2, -1.0);
}
END_TEST

START_TEST(mean_logprob_is_the_mean_of_the_token_log_probabilities)
{
    const int32_t ids[] = {1, 2, 1, 2};
    const double lp[] = {log(0.5), log(0.25), log(0.5), log(0.125)};
    diversity_figures f;
    diversity_compute(&f, ids, lp, 4);
    ck_assert_int_eq(f.tokens, 4);
    ck_assert_double_eq_tol(f.mean_logprob, (log(0.5) * 2 + log(0.25) + log(0.125)) / 4, 1e-12);
    ck_assert_double_eq_tol(f.distinct2, 2.0 / 3.0, 1e-12);   /* 12 21 12 */
    ck_assert_int_eq(f.repeated3, 0);                          /* 121 212 */
}
END_TEST

int main(void)
{
    return tu_run_tests("diversity", TU_TESTS(
        a_loop_counts_every_repeated_trigram_after_the_first_pass,
        text_without_repeats_scores_distinct_one_and_no_repeated_trigrams,
        a_trigram_repeated_far_apart_counts_once_per_repeat,
        short_texts_have_no_ngrams_to_measure,
        mean_logprob_is_the_mean_of_the_token_log_probabilities));
}
