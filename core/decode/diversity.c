/* diversity.c: mean log-probability, distinct-n and repeated n-grams (diversity.h). */
#include "core/decode/diversity.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* True when the n-gram at i occurred at an earlier position. Quadratic: continuations are a few
 * hundred tokens at most, and this keeps the definition readable next to its statement. */
static bool seen_before(const int32_t *ids, int i, int order)
{
    for (int j = 0; j < i; j++)
        if (memcmp(ids + j, ids + i, (size_t)order * sizeof *ids) == 0)
            return true;
    return false;
}

int diversity_repeated(const int32_t *ids, int n, int order)
{
    if (order < 1 || n < order)
        return 0;
    int repeated = 0;
    for (int i = 0; i + order <= n; i++)
        repeated += seen_before(ids, i, order);
    return repeated;
}

double diversity_distinct(const int32_t *ids, int n, int order)
{
    if (order < 1 || n < order)
        return -1.0;
    int total = n - order + 1;
    return (double)(total - diversity_repeated(ids, n, order)) / total;
}

void diversity_compute(diversity_figures *f, const int32_t *ids, const double *raw_logprob,
                       int n)
{
    memset(f, 0, sizeof *f);
    f->tokens = n;
    double sum = 0.0;
    for (int i = 0; raw_logprob && i < n; i++)
        sum += raw_logprob[i];
    f->mean_logprob = n > 0 && raw_logprob ? sum / n : 0.0;
    f->distinct2 = diversity_distinct(ids, n, 2);
    f->repeated3 = diversity_repeated(ids, n, 3);
}
