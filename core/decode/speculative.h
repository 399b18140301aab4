/* speculative.h: draft-verify speculative decoding over two engines (Leviathan et al. 2023, Chen
 * et al. 2023): the draft proposes gamma tokens, the target scores them all in one span forward,
 * and rejection sampling keeps the output distribution exactly the target's.
 *
 * One round, for a window w[0..m-1] (positions 0..m-1, m >= 1):
 *   1. The draft's cache is brought to w[0..m-1] (engine_sync: prefix reuse), then it
 *      forwards d_1, ..., d_{g-1} one at a time; at each position it runs the sampler chain
 *      (history = w plus the drafts so far) to get q_i and draws d_i from q_i.
 *   2. The target's cache is brought to w[0..m-2]; one forward of [w[m-1], d_1 .. d_{g-1}] at
 *      position m-1 gives g logit rows. Row i-1 goes through the same chain (history = w,
 *      d_1 .. d_{i-1}) to give p_i. So q and p are final distributions: temperature, top-k/p,
 *      min-p and penalties (each position with its own history, drafts included) all applied.
 *   3. d_i is accepted when u_i * q_i(d_i) < p_i(d_i) (probability min(1, p/q)). At the first
 *      rejection a token is drawn from normalise(max(0, p_i - q_i)) (from p_i if that is all
 *      zero) and the round ends. If all g are accepted the round produced g tokens: there is no
 *      "bonus" draw from a further row of p, the last verified slot is a draft like the others.
 *      Greedy: d_i is the draft's argmax, accepted while it equals the target's argmax; at the
 *      first disagreement the target's argmax is taken.
 *   4. The target cache is truncated to w plus the accepted drafts; the draft's likewise. The
 *      last produced token is not in the target's cache: the next round feeds it first.
 * A round of g drafts therefore produces k + 1 tokens when d_{k+1} is rejected, g when all pass:
 * E = (1 - a^g) / (1 - a) for a per-token acceptance a (spec_expected_tokens_per_pass).
 *
 * Random numbers (so a seed reproduces a run whatever gamma was): every uniform is a function of
 * (req->key, output position, purpose) alone (rng_keyed_uniform(key, pos + i, stream, 0)), the
 * position i counted from req->pos, the index of the round's first produced token: the draft's
 * draw at i, the acceptance test at i and the residual draw at i each have their own stream
 * (SPEC_STREAM_*). So the token at a position depends on the tokens before it, the key and the
 * position, not on how positions were grouped into rounds: rounds of any gamma produce the same
 * tokens: bit for bit on the CPU, whose kernels give a row the same bits in a span of any length;
 * on the GPU a span of another length may change a logit's last bits, which changes a token
 * only at a near-tie (an acceptance or draw boundary). Each position is still exactly
 * one speculative-sampling step (accept with min(1, p/q), else the residual), so its
 * distribution is p. Greedy draws nothing. The residual draw walks token ids in ascending order.
 *
 * g = min(gamma, max_tokens, target n_ctx - m + 1, draft n_ctx - m + 1); drafting also stops after
 * a drafted stop_id (EOS). g = 0 (gamma 0, or a window longer than the draft's context) makes the
 * round one plain target step, drawn with the residual stream's uniform at its position: the
 * only case in which a token is not a draft's or a residual (TOKEN_BONUS; the session never asks
 * for it: gamma >= 1 and the draft's context is at least the target's). */
#ifndef TOKENTOP_SPECULATIVE_H
#define TOKENTOP_SPECULATIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/engine/engine.h"
#include "core/base/rng.h"
#include "core/decode/sampler.h"
#include "core/base/status.h"

#define SPEC_GAMMA_MAX 64

/* What the caller asks of one round. */
/* The purposes of the keyed uniforms (the third coordinate of rng_keyed). */
enum { SPEC_STREAM_DRAFT = 1, SPEC_STREAM_ACCEPT = 2, SPEC_STREAM_RESIDUAL = 3 };

typedef struct {
    uint64_t key;              /* the random numbers' key (the session derives it from the seed) */
    int64_t pos;               /* the output position of the round's first token (>= 0) */
    const int32_t *tokens;     /* (n) the window: the tokens at positions 0 .. n-1 */
    int n;                     /* >= 1 and <= the target's n_ctx */
    int gamma;                 /* drafts to propose, 0 .. SPEC_GAMMA_MAX (capped, see above) */
    int max_tokens;            /* produce at most this many tokens; >= 1 */
    int32_t stop_id;           /* a token that ends generation (EOS), or -1 */
    int32_t banned;            /* masked for the first n_banned produced positions (EOS before
                                  --min-tokens), or -1 */
    int n_banned;
    bool lean;                 /* nobody shows this round's snapshots (no histogram, no --json):
                                  they hold only the token fields (token, token_p, u; n_top 0,
                                  token_rank -1, token_raw_p and entropies 0), which skips the
                                  raw pass and the top list on each of the 2g+1 rows. The tokens
                                  and the random stream are the same either way. */
    bool rebuildable;          /* with lean: the round keeps what spec_round_snapshot needs to
                                  build a row's full snapshot afterwards (a copy of the draft's
                                  logits at each drafted position, the settings): for a front end
                                  that shows some rows only (core/session/session.h:
                                  snapshots_on_demand) */
} spec_request;

/* One drafted position. */
typedef struct {
    int32_t token;             /* the draft's proposal d_i */
    float q;                   /* q_i(d_i): draft probability after the chain (> 0) */
    float p;                   /* p_i(d_i): target probability after the chain */
    double u;                  /* the acceptance uniform; accepted when u * q < p (greedy: -1) */
    bool accepted;
} spec_draft;

/* The outcome of the last round; every pointer stays valid until the next round or spec_free. */
typedef struct {
    int n_draft;                    /* drafts proposed (g) */
    int n_accepted;                 /* leading drafts accepted (k) */
    bool rejected;                  /* k < g: draft[k] was rejected */
    const spec_draft *draft;        /* (n_draft) */
    const sampler_snapshot *draft_snap;  /* (n_draft) the draft's chain at each drafted position,
                                            with its draw */
    const sampler_snapshot *target_snap; /* (max(n_draft, 1)) the target's chain at each
                                            position; rows 0 .. n_out-1 have the produced token's
                                            fields (u = -1 except for a draw with no draft) */
    int n_out;                      /* tokens produced: k accepted drafts, then next when >= 0 */
    const int32_t *out;             /* (n_out) */
    int32_t next;                   /* the resampled token after a rejection, or the plain draw of
                                       a round with no draft; -1 when every draft was accepted */
    double next_u;                  /* the uniform of that draw */
    double draft_ms, target_ms;     /* wall time of the draft and target work in this round */
    /* where those went: draft_ms = draft_sync_ms (catching the draft's cache up to the window: a
     * token or two, or the whole window after a context shift) + draft_forward_ms (its g-1
     * single-token forwards) + draft_chain_ms (its g sampler chains and draws); target_ms =
     * verify_forward_ms (the target's catch-up and its (g+1)-row span forward) + verify_chain_ms
     * (the chains on those rows, the acceptance tests and the last draw) */
    double draft_sync_ms, draft_forward_ms, draft_chain_ms;
    double verify_forward_ms, verify_chain_ms;
} spec_round;

/* Totals since creation or spec_stats_reset. */
typedef struct {
    long rounds;
    long drafted;              /* draft tokens proposed */
    long accepted;             /* of those, accepted */
    long rejections;           /* rounds that ended with a rejection */
    long produced;             /* tokens produced by rounds */
    long target_passes;        /* verification forwards of the target */
    double draft_ms, target_ms;
    double draft_sync_ms, draft_forward_ms, draft_chain_ms;   /* the sums of spec_round's */
    double verify_forward_ms, verify_chain_ms;
} spec_stats;

/* accepted / drafted (0 when nothing was drafted). */
double spec_stats_acceptance(const spec_stats *st);
/* produced / target_passes. */
double spec_stats_tokens_per_pass(const spec_stats *st);

/* The expected speed-up of speculative decoding over plain decoding, after Leviathan et al. (eq. 1
 * and theorem 3.8, whose rounds add a bonus token) with this file's rounds: S = E(g) / (g c + 1)
 * = (1 - a^g) / ((1 - a)(g c + 1)), with per-token acceptance a, gamma g and the draft/target
 * cost ratio c. a = 1 gives g / (g c + 1). */
double spec_predicted_speedup(double a, int gamma, double c);
/* Expected tokens per target pass of a round of g >= 1 drafts: (1 - a^g) / (1 - a) (k + 1 tokens
 * when the (k+1)-th draft is rejected, g when all pass); g when a = 1; 1 for g < 1. */
double spec_expected_tokens_per_pass(double a, int gamma);

typedef struct spec spec;

/* Scratch for a vocabulary of V tokens (the draft's and the target's vocab_size must be equal:
 * every token either can produce must be one the other can embed). NULL when out of memory. */
spec *spec_create(int V);
void spec_free(spec *sp);   /* NULL is safe */

/* Runs one round (see the top of this file). Each engine's cache keeps the longest prefix it
 * shares with the window (engine_sync, through the engine's token mirror). params must be the
 * session's sampler settings: the draft and target share them. Uniforms are keyed by req->key
 * and the output position (see the top of this file).
 * On failure (engine error, non-finite logits: TT_ERR_NUMERIC, n outside [1, n_ctx]) nothing was
 * produced, the stats are unchanged and both caches hold a prefix of the window plus drafts. */
tt_status spec_run_round(spec *sp, engine *target, engine *draft, const sampler_params *params,
                         const spec_request *req, tt_error *err);

/* The full snapshot of row i of the last round, which ran lean and rebuildable, as a round that
 * was not lean fills it: the draft's chain at drafted position i with its draw (draft_row,
 * i < n_draft), or the target's chain at position i with the produced token marked (i < n_out).
 * It reads the target's logits of that round, so it must come before the target's next forward.
 * TT_ERR_ARG when there is no such row to rebuild. Uses the round's scratch: spec_last_round's
 * pointers stay valid; the chain's own output (sampler_probs) is this row's afterwards. */
tt_status spec_round_snapshot(spec *sp, bool draft_row, int i, sampler_snapshot *out,
                              tt_error *err);

/* The last round's outcome (n_out 0 before the first). */
const spec_round *spec_last_round(const spec *sp);

const spec_stats *spec_get_stats(const spec *sp);
void spec_stats_reset(spec *sp);

/* Deliberately wrong variants, for tests only: they show that the exactness tests can fail. */
typedef enum {
    SPEC_EXACT = 0,
    SPEC_WRONG_RESIDUAL_P,     /* after a rejection, draw from p instead of max(0, p - q) */
    SPEC_WRONG_Q_RAW,          /* accept and resample with the draft's raw softmax instead of the
                                  q it drew from (the chain forgotten on the draft side) */
    SPEC_WRONG_HISTORY,        /* the target's penalties do not see the drafted tokens */
} spec_variant;
void spec_set_variant(spec *sp, spec_variant v);


/* ---------------------------------------------------------------------------------------------
 * Choosing gamma from measured costs (the default: /gamma auto)
 *
 * A round with g drafts produces E(g) = spec_expected_tokens_per_pass(alpha, g) tokens on average
 * and costs about A + B g ms: B is a draft step (forward and chain) plus one more verified row,
 * A the rest (the verification's fixed part, the acceptance tests' fixed part). The speed-up
 * (1 - a^g) / ((1 - a)(g c + 1)) is the case A = a target step, B = c A; measuring A
 * and B covers the targets for which verifying g rows costs more than one step (a small model
 * that lives in the CPU's cache). The tuner keeps a running per-token acceptance, a decayed
 * least-squares line of the rounds' engine time (draft_ms + target_ms) against g, and the decayed
 * mean time of the rounds of each g; it picks the g that maximises E(g) / cost(g), where cost(g)
 * is that mean pulled toward the line (spec_tuner_cost): the measured means catch steps the line
 * cannot (a verification's cost is not linear in its rows: on the embedded pair up to 4 rows
 * cost little more than one, the weights' streaming dominating, and each row past that adds its
 * arithmetic). Every SPEC_TUNER_EXPLORE-th round it tries one more or one fewer, so the line
 * has two points to stand on and the neighbours get measured. It never chooses more than one
 * past the largest gamma measured lately (a cost weight of SPEC_TUNER_SEEN or more): a line
 * fitted over gammas near one value comes out nearly flat when the machine's load swings, and
 * would send the choice straight to SPEC_TUNER_MAX, whose cost nobody measured (seen: gamma 15-16
 * on the embedded pair, whose verification costs each row's arithmetic); stepping up one at a
 * time, each gamma is measured before the next is weighed. And B is never below the measured
 * draft time per draft (one more draft costs at least its step and chain). */

#define SPEC_TUNER_MAX 16          /* the largest gamma the tuner chooses */
#define SPEC_TUNER_EXPLORE 8       /* every 8th round tries gamma + 1 or gamma - 1 */
#define SPEC_TUNER_DECAY 0.97      /* weight of the past per round (a memory of ~33 rounds) */
#define SPEC_TUNER_SEEN 0.05       /* a gamma counts as measured while its rounds weigh this much
                                      (one round within the last ~100) */

/* The g in [1, max] (max capped to SPEC_GAMMA_MAX) that maximises E(g) / (a_ms + b_ms g) for
 * per-token acceptance alpha in [0, 1]; ties go to the smaller g. a_ms and b_ms are clamped to at
 * least 1e-6. */
int spec_best_gamma(double alpha, double a_ms, double b_ms, int max);

typedef struct {
    double acc, tested;            /* decayed accepted drafts and tested drafts */
    double w, sg, st, sgg, sgt;    /* decayed sums for the line time = A + B g */
    double sdraft;                 /* decayed sum of the rounds' draft time per draft: B's floor */
    double cost_ms[SPEC_TUNER_MAX + 1], cost_w[SPEC_TUNER_MAX + 1];  /* per g: decayed sums of
                                      the rounds' times and of their count */
    long rounds;
    int chosen;                    /* the tuner's own choice (gamma before exploration) */
    int gamma;                     /* what the next round uses */
    double alpha, a_ms, b_ms;      /* the estimates behind chosen; 0 until two gammas were seen */
} spec_tuner;

/* Starts from gamma (clamped to [1, SPEC_TUNER_MAX]) with nothing measured. */
void spec_tuner_init(spec_tuner *t, int gamma);

/* The cost the tuner expects of a round of gamma drafts (ms): the decayed mean of the rounds of
 * that gamma, with the line's a_ms + b_ms gamma counted as one more round (the line alone for a
 * gamma never run). */
double spec_tuner_cost(const spec_tuner *t, int gamma);

/* Feeds one finished round (spec_round: n_draft, n_accepted, rejected, draft_ms + target_ms)
 * and returns the gamma for the next one (also t->gamma). Rounds with n_draft 0 teach nothing. */
int spec_tuner_update(spec_tuner *t, const spec_round *round);

#endif
