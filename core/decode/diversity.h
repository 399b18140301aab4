/* diversity.h: the figures a teacher points at when continuations are put side by side: how
 * probable the model found the tokens, and how much a text repeats itself.
 *
 * Definitions (over token ids, not words; the REPL's /help and docs/beams-and-samples.md say the same):
 * - mean log-probability: the mean over the generated tokens of ln p_raw(token), p_raw being the
 *   softmax of the model's raw logits at that position (before penalties, temperature and
 *   truncation), so columns sampled with different settings are measured with one ruler;
 * - distinct-2: distinct token bigrams / all token bigrams of the text (1 = no bigram repeats);
 * - repeated 3-grams: how many positions i start a token 3-gram that already started at some
 *   position j < i ("a b c a b c a b c" has 7 3-grams, 4 of them repeats). */
#ifndef TOKENTOP_DIVERSITY_H
#define TOKENTOP_DIVERSITY_H

#include <stdint.h>

typedef struct {
    int tokens;                /* generated tokens measured */
    double mean_logprob;       /* nats; 0 when tokens == 0 */
    double distinct2;          /* in [0, 1]; -1 when there are fewer than 2 tokens */
    int repeated3;             /* repeated 3-grams as defined above */
} diversity_figures;

/* Fraction of distinct n-grams among the n-grams of ids[0 .. n) (order >= 1); -1 when there are
 * none (n < order). */
double diversity_distinct(const int32_t *ids, int n, int order);

/* Positions of ids[0 .. n) that start an n-gram (of size order >= 1) seen at an earlier
 * position; 0 when n < order. */
int diversity_repeated(const int32_t *ids, int n, int order);

/* All figures of a continuation: ids[0 .. n) and, for each, ln p_raw (raw_logprob may be NULL:
 * mean_logprob is then 0). */
void diversity_compute(diversity_figures *f, const int32_t *ids, const double *raw_logprob,
                       int n);

#endif
