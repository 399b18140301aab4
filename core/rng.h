/* rng.h: the one PRNG tokentop draws with: xoshiro256** (Blackman & Vigna), seeded through
 * splitmix64. The same seed gives the same stream on every machine and backend. */
#ifndef TOKENTOP_RNG_H
#define TOKENTOP_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s[4];
} rng;

/* Seeds the generator; any 64-bit seed (0 included) gives a valid, distinct state. */
void rng_seed(rng *r, uint64_t seed);

/* The next 64 random bits. */
uint64_t rng_next(rng *r);

/* A uniform double in [0, 1) with 53 random bits: (next >> 11) * 2^-53. */
double rng_uniform(rng *r);

/* A seed for a run given none: from the clock and the process id, in [0, 1e9) so that it is easy
 * to type back with --seed. Not reproducible, by design. */
uint64_t rng_clock_seed(void);

#endif
