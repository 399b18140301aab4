/* samples.h: N sampled continuations of one prompt, advanced together in one batch.
 *
 * The contract: sample i is, token for token, the generation a session with the same settings and
 * seed + i gives alone (`tokentop generate --seed S+i`): the same tokens, the same per-token
 * records (probabilities, uniform draws, text), the same stop reason. It holds because every
 * sample is an ordinary session (core/session/session.c: penalties, --min-tokens, stop strings, the
 * context shift) over a view of one engine sequence, and the CPU kernels are batch-invariant: a
 * row of a batched step has the bits of the same token run alone. On the CUDA engine a row equals
 * the row run alone within its rounding (bit for bit in the host emulation), so there the contract
 * holds up to near-ties between tokens.
 *
 * How: sample i runs on engine sequence 1 + i (sequence 0 is not touched). A view engine turns
 * the session's one-token forwards into rows of the next batched step (engine_forward_batch);
 * spans (the prompt, a context shift's re-prefill) run on the sequence directly. The prompt is
 * prefilled once, on sample 0's sequence, and copied to the others. */
#ifndef TOKENTOP_SAMPLES_H
#define TOKENTOP_SAMPLES_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/engine/engine.h"
#include "core/session/session.h"

#define SAMPLES_MAX 256

/* Called for every event of sample `sample` (see session_event_fn); false stops that sample. */
typedef bool (*samples_event_fn)(void *user, int sample, const session_event *ev);

typedef struct {
    int n;                         /* samples */
    session_stats *stats;          /* (n) what each sample's session reported (its s->last) */
    int steps;                     /* batched steps */
    double decode_ms;              /* from the first batched step to the end */
    long tokens;                   /* generated over all samples */
    int32_t **gen;                 /* (n) each sample's generated tokens (n_gen[i] of them): what
                                      its session appended after the prompt */
    token_info **gen_info;         /* (n) their origins and final probabilities */
    int *n_gen;                    /* (n) */
} samples_result;

/* Generates n (1 .. SAMPLES_MAX) samples of text[0 .. len) (tokenized as session_add_user_text
 * does) with settings set (stops included), sample i seeded with set->seed + i; with chat (may be
 * NULL: plain continuation) every sample's session is in that chat mode (session_set_chat), so
 * the prompt is a chat turn and the samples end at the end-of-turn token. e must have
 * sequences (engine_has_seqs); n + 1 are reserved. interrupt (may be NULL) stops every sample.
 * Fills out (free with samples_result_free). A failure of one sample's session stops that sample
 * (its stats say why); the call fails only when the engine or memory does. */
tt_status samples_generate(engine *e, const model *m, const tokenizer *tok,
                           const session_settings *set, const session_chat *chat,
                           const char *text, size_t len, int n,
                           samples_event_fn fn, void *user, volatile sig_atomic_t *interrupt,
                           samples_result *out, tt_error *err);

/* Like samples_generate, with the prompt given as token ids (ids[0 .. n_ids), e.g. a
 * conversation's window; an empty prompt starts from the beginning-of-text token) and, when per
 * is not NULL, sample i run with per[i] (its own seed, used as it is) instead of set with
 * set->seed + i: one column per value of a setting. set must still be given (per[0] is fine).
 * The part of the prompt sequence 0 already holds is copied, not computed again. */
tt_status samples_generate_ids(engine *e, const model *m, const tokenizer *tok,
                               const session_settings *set, const session_settings *per,
                               const session_chat *chat,
                               const int32_t *ids, int n_ids, int n, samples_event_fn fn,
                               void *user, volatile sig_atomic_t *interrupt, samples_result *out,
                               tt_error *err);

void samples_result_free(samples_result *r);

#endif
