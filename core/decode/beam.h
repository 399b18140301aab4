/* beam.h: beam search over the engine's sequences (engine.h), with Hugging Face's semantics.
 *
 * Semantics (docs/beams-and-samples.md says the same):
 * - A token's score is its log-softmax (in double) over the logits after the sampler's mask and
 *   penalties (sampler_penalized_logits: repetition, presence, frequency over each beam's own
 *   history, the prompt included; EOS masked before min_tokens), with tokens that would repeat an
 *   n-gram of the beam's history (no_repeat_ngram) masked too. Temperature and truncation do not
 *   apply. A beam's logprob is the sum of its generated tokens' scores.
 * - Step 1 expands the prompt alone; every later step expands all N running beams. The
 *   candidates (beam, token) are ranked by summed logprob, ties to the lower token id, then the
 *   lower beam index, and the best 2N are walked in rank order: an EOS candidate among the first
 *   N ends a hypothesis (an EOS ranked lower is dropped); any other token continues as a running
 *   beam until N are found.
 * - A finished hypothesis scores logprob / len ** length_penalty, len = its generated tokens with
 *   the EOS. At most N are kept: once full, a new one enters only with a higher score than the
 *   worst, which it replaces.
 * - Done when N hypotheses are finished and either early_stopping, or no running beam can do
 *   better: the best running logprob / t ** length_penalty (t = tokens generated so far) is not
 *   above the worst finished score. At max_new_tokens the running beams are scored as
 *   hypotheses of length max_new_tokens (without EOS) and compete with the finished ones.
 * - The result: the hypotheses by score, best first (ties: the one finished first), the first
 *   num_return of them.
 * Hugging Face's `generate(num_beams=N, do_sample=False)` differs in one place: it applies its
 * logits processors to the log-softmax instead of before it, which changes the numbers (not the
 * ranking of a step) when a penalty is on.
 *
 * Memory: sequence 0 holds the prompt and is not changed; beams run on sequences 1 .. N. A beam
 * continued by several children keeps its sequence for the first and the others copy its
 * generated rows (the prompt's rows are shared by every beam from step 1 on, and not copied). */
#ifndef TOKENTOP_BEAM_H
#define TOKENTOP_BEAM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/engine/engine.h"
#include "core/decode/sampler.h"
#include "core/base/status.h"

#define BEAM_MAX 64                /* num_beams at most */

typedef struct beam_hypothesis beam_hypothesis;

/* The search after one step, for a front end that shows the beams growing. Pointers are valid
 * only during the call. */
typedef struct {
    int step;                      /* tokens each running beam has now (1 after the first step) */
    int n_run;                     /* running beams, best first */
    const int32_t *ids;            /* (n_run, stride) their generated tokens, step of each */
    int stride;                    /* = max_new_tokens */
    const double *logprob;         /* (n_run) summed log-probabilities */
    const int *parent;             /* (n_run) the index, among the previous step's n_prev running
                                      beams, each one continues; a previous beam no index names
                                      was pruned at this step */
    int n_prev;
    const beam_hypothesis *finished; /* (n_finished) ended by EOS so far, in the order they ended */
    int n_finished;
    const sampler_snapshot *snaps; /* (n_prev) with beam_options.snapshots (else NULL): the
                                      distribution each previous beam was expanded from at this
                                      step: top[] as sampler_apply orders it (descending raw_p),
                                      p and temp_p the beam's token scores exp(log-softmax after
                                      the penalties and the n-gram ban), cut BANNED where that
                                      is 0, entropy_final theirs; the token fields empty (-1) */
} beam_progress;

/* Return false to stop the search after this step: the running beams are then scored as
 * hypotheses of their length, as at max_new_tokens, and beam_result.stopped is set. */
typedef bool (*beam_progress_fn)(void *user, const beam_progress *p);

typedef struct {
    int num_beams;                 /* N, 1 .. BEAM_MAX */
    float length_penalty;          /* finite; default 1 */
    int no_repeat_ngram;           /* n-gram size that may not repeat; 0 off */
    bool early_stopping;
    int num_return;                /* 1 .. num_beams; 0 means num_beams */
    int max_new_tokens;            /* >= 1 */
    int min_tokens;                /* EOS is masked until this many tokens were generated */
    int32_t eos;                   /* the end token; -1: none (--ignore-eos) */
    sampler_params penalties;      /* only repetition, presence, frequency and window are used */
    beam_progress_fn progress;     /* NULL: none */
    bool snapshots;                /* fill beam_progress.snaps (a raw softmax pass and a top list
                                      per beam and step more) */
    void *progress_user;
} beam_options;

/* length_penalty 1, no_repeat_ngram 0, no early stopping, num_return = num_beams, max 32 new
 * tokens, penalties off, eos -1. */
void beam_options_default(beam_options *o);

/* Checks every field against the model (V) and the context: the prompt plus max_new_tokens must
 * fit n_ctx (beams do not shift the context), 2N candidates must exist (2N <= V). TT_ERR_ARG with
 * a message naming the option (--num-beams, --num-return, ...) and the value. */
tt_status beam_options_validate(const beam_options *o, int V, int n_prompt, int n_ctx,
                                tt_error *err);

struct beam_hypothesis {
    int32_t *ids;                  /* (n) generated ids, the EOS included when it ended it */
    float *token_logprob;          /* (n) each token's score (its log-softmax, see above) */
    int n;
    double logprob;                /* sum of the generated tokens' scores */
    double score;                  /* logprob / n ** length_penalty */
    bool eos;                      /* ended by EOS (else by max_new_tokens) */
};

typedef struct {
    beam_hypothesis *hyps;         /* (n_hyps) best first */
    int n_hyps;
    int steps;                     /* batched steps taken */
    double decode_ms;              /* from the first expansion to the end */
    double copy_ms;                /* of which copying sequences for forked beams */
    long copied_positions;         /* KV positions copied for forked beams (after step 1) */
    bool stopped;                  /* the progress callback stopped the search early */
} beam_result;

/* Runs beam search from the prompt that sequence 0 of e holds (prompt[0 .. n_prompt), whose last
 * position's logits are engine_logits(e, e->n_logits - 1)); reserves sequences 1 .. N. smp is
 * used for the penalties (any sampler of V tokens; its last distribution is overwritten). Fills
 * out (free with beam_result_free). On failure out is empty and the engine's sequence 0 still
 * holds the prompt. */
tt_status beam_search(engine *e, sampler *smp, const int32_t *prompt, int n_prompt,
                      const beam_options *o, beam_result *out, tt_error *err);

void beam_result_free(beam_result *r);

#endif
