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

/* Counter-based draws: 64 random bits that are a function of (seed, a, b, c) alone, so that a
 * value can be looked up by its coordinates (speculative decoding keys its uniforms by output
 * position and purpose, whatever order the positions are visited in). splitmix64's finaliser
 * over the tuple, each coordinate mixed in after the previous one; different tuples give
 * independent-looking values (tests/check_rng.c measures it). */
uint64_t rng_keyed(uint64_t seed, uint64_t a, uint64_t b, uint64_t c);

/* rng_keyed's bits as a uniform double in [0, 1), 53 bits, as rng_uniform. */
double rng_keyed_uniform(uint64_t seed, uint64_t a, uint64_t b, uint64_t c);

/* A seed for a run given none: from the clock and the process id, in [0, 1e9) so that it is easy
 * to type back with --seed. Not reproducible, by design. */
uint64_t rng_clock_seed(void);

#endif
