/* session.h: one conversation: the token sequence, the engine cache kept in step with it, the
 * sampler settings, turns (undo/regen) and generation one token (or one speculative round) at a
 * time. The REPL, line mode and `tokentop generate` all drive generation through this. */
#ifndef TOKENTOP_SESSION_H
#define TOKENTOP_SESSION_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/engine/engine.h"
#include "core/session/chat.h"
#include "core/model/model.h"
#include "core/base/rng.h"
#include "core/decode/sampler.h"
#include "core/decode/speculative.h"
#include "core/base/status.h"
#include "core/tokenizer/tokenizer.h"

#define SESSION_MAX_STOPS 8
#define SESSION_MAX_EOT 8

/* The id of the special token spelled text[0..len) (not NUL-terminated), or -1 when the
 * tokenizer has none by that spelling (the text is then tokenized as text). */
typedef int32_t (*session_special_fn)(void *user, const char *text, size_t len);

/* Chat mode (session_set_chat): how user turns are wrapped and where replies end. */
typedef struct {
    chat_spec spec;            /* format CHAT_RAW: chat mode off (plain continuation) */
    chat_spec model_spec;      /* the model's own format (its template's; raw when it has none):
                                  not used by the session, kept for a front end that turns chat
                                  mode back on */
    session_special_fn special;/* maps the template's markers to token ids; NULL: none are */
    void *special_user;
    int32_t bos_id;            /* put first in a conversation whose format writes no BOS text
                                  itself (chatml, zephyr), when the tokenizer adds one; -1: none */
    int32_t eot_ids[SESSION_MAX_EOT]; /* more end-of-turn ids (e.g. generation_config.json's
                                  eos list); the format's own end-of-turn token is looked up */
    int n_eot;
} session_chat;

/* Why a generation ended. */
typedef enum {
    SESSION_STOP_NONE = 0,
    SESSION_STOP_EOS,          /* the model produced its end-of-text token */
    SESSION_STOP_MAX_TOKENS,   /* max_new_tokens reached */
    SESSION_STOP_STRING,       /* a stop string appeared (it is not part of the output) */
    SESSION_STOP_CONTEXT,      /* the context is full and context shifting is off */
    SESSION_STOP_INTERRUPTED,  /* Ctrl-C, or a callback asked to stop */
    SESSION_STOP_ERROR,        /* engine or sampler failure: see the turn's error */
} session_stop;

/* "eos", "max_tokens", "stop_string", "context", "interrupted", "error" (or "none"). */
const char *session_stop_name(session_stop s);

/* Where a token came from. */
typedef enum {
    TOKEN_USER = 0,            /* typed by the user (prompt) */
    TOKEN_SAMPLED,             /* drawn from the target (plain decoding) */
    TOKEN_FORCED,              /* chosen with /pick in step mode */
    TOKEN_DRAFT_ACCEPTED,      /* speculative: a draft token the target accepted */
    TOKEN_TARGET_RESAMPLE,     /* speculative: drawn from the residual after a rejection */
    TOKEN_BONUS,               /* speculative: drawn from p with no draft at this position (a
                                  round of gamma 0 or a window longer than the draft's context,
                                  which the session never runs: it refuses a shorter draft).
                                  Rounds no longer draw a bonus after their drafts
                                  (speculative.h); kept so that /save files of earlier versions
                                  load and the JSON origins stay the same list. */
} token_origin;

/* "user", "sampled", "forced", "draft_accepted", "target_resample", "bonus". */
const char *token_origin_name(token_origin o);

typedef struct {
    sampler_params sampler;
    int max_new_tokens;        /* per turn; > 0 */
    int min_tokens;            /* EOS is masked until this many were generated */
    bool stop_at_eos;          /* default true */
    char *stops[SESSION_MAX_STOPS]; /* owned (session_set_stop / session_clear_stops) */
    int n_stops;
    uint64_t seed;
    float context_keep;        /* fraction of n_ctx kept when the context fills (0 < f < 1) */
    bool context_shift;        /* false: stop with SESSION_STOP_CONTEXT instead */
} session_settings;

void session_settings_default(session_settings *s);

/* Per-token metadata, parallel to the token sequence. */
typedef struct {
    uint8_t origin;            /* token_origin */
    float p;                   /* final probability it was drawn with (1 for user tokens) */
    int turn;                  /* index of the turn it belongs to */
} token_info;

/* What one generated token looks like to a front end. */
typedef struct {
    int step;                       /* 0-based index within this generation */
    int32_t token;
    token_origin origin;
    const sampler_snapshot *snap;   /* the chain's view of this step (NULL for some spec tokens) */
    const float *logits;            /* the raw logits snap was computed from (V floats, valid
                                       during the call); NULL for speculative rounds' tokens */
    bool flush;                     /* the last event of a generation: token -1, only text */
    const char *text;               /* output bytes this step adds (complete UTF-8, stop strings
                                       held back until resolved); not NUL-terminated */
    size_t text_len;
    bool context_shifted;           /* the context was full and got re-prefilled before this step */
    int shift_dropped;              /* tokens dropped from the window by that shift */
    /* Speculative rounds (all zero/NULL for plain tokens): */
    int round;                      /* 1-based round within this generation */
    bool rejected;                  /* a draft token the target rejected: not part of the output
                                       (no text, not appended, step = its replacement's, origin
                                       not meaningful, snap = the draft's chain); the next event
                                       is the replacement (TOKEN_TARGET_RESAMPLE) */
    const spec_draft *draft;        /* this position's draft record (q, p, acceptance u); NULL for
                                       a bonus token */
    const sampler_snapshot *draft_snap; /* the draft's chain at this position (q); NULL for bonus */
    /* With snapshots_on_demand: snap and draft_snap hold the token fields only, and
     * session_event_snapshots builds the full ones. */
    bool partial;
    int row;                        /* for session_event_snapshots: the row of the round */
} session_event;

/* Called for every generated token (and, for speculative rounds, also for rejected drafts, see
 * speculative.h). Return false to stop the generation (SESSION_STOP_INTERRUPTED). */
typedef bool (*session_event_fn)(void *user, const session_event *ev);

typedef struct {
    int prompt_tokens;         /* tokens in the window when generation began */
    int reused_tokens;         /* of those, already in the KV cache */
    int prefilled_tokens;      /* of those, computed now */
    int generated_tokens;
    double ttft_ms;            /* from the call to the first sampled token */
    double prefill_ms;
    double decode_ms;          /* all generation after the first token (wall time) */
    double front_ms;           /* of that, the front end's: its event callbacks (pacing holds,
                                  drawing, printing) and its time between steps, and the engines'
                                  warm-ups after such a wait (engine_warm) */
    int warmups;               /* steps that began with a warm-up (the front end held them) */
    double prefill_tok_s;
    double decode_tok_s;       /* the engine's own decode speed: tokens after the first over
                                  decode_ms - front_ms, so paced, drawn, printed and stepped turns
                                  compare with each other and with `generate` */
    int context_shifts;
    int device_fallbacks;      /* engines replaced after a device error (cache re-prefilled) */
    /* Speculative decoding (zero when the generation ran without a draft): */
    bool speculative;
    long spec_rounds;          /* = target verification passes */
    long drafted, accepted;    /* draft tokens proposed / accepted */
    long spec_tokens;          /* tokens produced by rounds */
    int gamma;                 /* draft length at the end (the adaptive schedule changes it) */
    double draft_ms, target_ms;/* time in the draft and in verification */
    /* Plain-decoding probes of a speculative turn (plain_probe): before rounds after the first
     * (every other one until SESSION_PROBE_MIN pairs, then within SESSION_PROBE_SHARE), one
     * plain step (a one-row target forward at the round's position and the sampler over its
     * logits, the last of three back to back, then rolled back) is timed, and paired with the
     * round after the one that follows it (that one runs on the weights the probe warmed), so
     * each pair sees one moment's load (session_plain_speedup). Their time is left out of
     * decode_ms's busy part, as the front end's is. */
    int plain_probes;          /* pairs so far (the figure needs SESSION_PROBE_MIN) */
    double probe_ms;           /* all the probes' wall time */
    double plain_step_ms;      /* the probes' median (CPU time on the CPU; 0: no probe) */
    double round_ms;           /* the paired rounds' median, on the same clock */
    session_stop stop;
    tt_error error;            /* when stop == SESSION_STOP_ERROR */
} session_stats;

struct session;

/* Called when the target engine fails with TT_ERR_DEVICE (a sticky GPU error): returns an engine
 * to continue on (e.g. the CPU; same n_ctx), or NULL to give up. The failed engine is no longer
 * used by the session once this returns, so the callee may free it. Speculative decoding is
 * switched off first (its draft lives on the same device); the callee may set a new draft. */
typedef engine *(*session_fallback_fn)(void *user, struct session *s, engine *failed,
                                       const tt_error *why);

typedef struct session {
    const model *model;        /* not owned */
    const tokenizer *tok;      /* not owned */
    engine *eng;               /* not owned */
    sampler *smp;              /* owned */
    rng rng;
    session_settings set;

    int32_t *tokens;           /* (n_tokens) the whole conversation, oldest first */
    token_info *info;          /* (n_tokens) */
    int n_tokens, cap;
    int window_start;          /* tokens[window_start ..] are the model's view (positions 0 ..) */
    int n_turns;
    int *turn_start;           /* (n_turns) index in tokens where each turn began */

    /* Speculative decoding (session_set_draft): */
    engine *draft;             /* not owned; NULL when none */
    spec *spec;                /* owned; created with the draft */
    bool spec_on;
    int gamma;                 /* draft tokens per round (the next round's, when adaptive) */
    bool gamma_adaptive;       /* gamma chosen from measured costs and acceptance (tuner) */
    spec_tuner tuner;          /* its estimates; kept across turns, restarted by set_gamma */
    uint64_t spec_turns;       /* generations begun since the seed was set: with the seed, the
                                  key of a generation's speculative random numbers, so that
                                  /regen draws anew and a replayed session repeats itself */
    bool lean;                 /* the front end shows no snapshot (no histogram, no --json):
                                  events carry snapshots with the token fields only (see
                                  sampler_snapshot_token_only), which saves the raw pass and the
                                  top list on every row; tokens and random stream unchanged */
    bool snapshots_on_demand;  /* the front end shows some events' snapshots, not all (a terminal
                                  draws one event a frame): steps and rounds run lean, events come
                                  partial, and the front end builds the full snapshots of those it
                                  shows with session_event_snapshots, in its own time (the decode
                                  speed leaves it out with the drawing) */
    struct session_rebuild *rebuild;   /* (session.c) what session_event_snapshots needs */
    bool plain_probe;          /* a speculative turn also times plain steps (session_stats: the
                                  REPL's "x plain"); tokens and random streams unchanged */
    struct session_pairs *pairs;   /* (session.c) those of the last or running turn */

    session_stats last;        /* the last generation */
    struct session_gen *gen;   /* the generation in progress (session.c), NULL between turns */
    volatile sig_atomic_t *interrupt;  /* set by a signal handler; checked every step */
    session_fallback_fn device_fallback;  /* optional: see session_fallback_fn */
    void *fallback_user;

    /* Chat mode (session_set_chat; all zero: raw): */
    session_chat chat;
    int32_t eot[SESSION_MAX_EOT + 1];  /* ids that end a reply: chat.eot_ids and the format's */
    int n_eot;
    char *system;              /* owned; the system message of the next conversation, or NULL */
} session;

/* The full snapshots of ev, a partial event of the step or round now being reported (during its
 * callback; the last step's also after the generation ended, until the engines run again), as a
 * session without snapshots_on_demand gives them: into snap, and the draft's chain into
 * draft_snap where the position had a draft (draft_snap may be NULL to skip it). ev may be a
 * copy whose pointers were cleared. An event that is not partial is copied. TT_ERR_ARG for an
 * event of an earlier step. */
tt_status session_event_snapshots(session *s, const session_event *ev, sampler_snapshot *snap,
                                  sampler_snapshot *draft_snap, tt_error *err);

/* Prepares a session over an engine and tokenizer (not owned; they outlive it). */
tt_status session_init(session *s, const model *m, const tokenizer *tok, engine *eng,
                       const session_settings *set, tt_error *err);
void session_free(session *s);

/* Attaches a draft engine for speculative decoding (not owned: it outlives the session, or is
 * detached with NULL first) and turns speculative decoding on. Refused (TT_ERR_CONFIG, nothing
 * changed) unless its vocab_size equals the target's and its n_ctx is at least the target's; the
 * caller checks the tokenizers (tokenizer_equal). NULL detaches and turns it off. */
tt_status session_set_draft(session *s, engine *draft, tt_error *err);

/* Turns speculative decoding on (needs a draft: TT_ERR_ARG otherwise) or off; takes effect at the
 * next step. Step mode's forced tokens (/pick) always take a plain step. */
tt_status session_set_speculative(session *s, bool on, tt_error *err);

/* Draft tokens per round, 1 .. SPEC_GAMMA_MAX (default: adaptive from 4); adaptive starts from
 * gamma (capped to SPEC_TUNER_MAX) and lets spec_tuner choose after every round. */
tt_status session_set_gamma(session *s, int gamma, bool adaptive, tt_error *err);

/* Moves the conversation onto engine ne (same model and vocabulary; not owned, like eng), e.g.
 * the same model at another precision (/dtype): the window is prefilled again on ne the way a
 * generation brings the cache in line (stopped by s->interrupt with TT_ERR_INTERRUPTED; a window
 * longer than ne->n_ctx shifts, or fails with TT_ERR_CONTEXT when shifting is off), so ne's cache
 * and token mirror hold exactly the window and its logits are those of the last token. Refused
 * while a generation is open (TT_ERR_ARG) and for another vocabulary size (TT_ERR_CONFIG). On
 * success s->eng == ne and the caller may free the old engine; on any failure nothing in the
 * session changed (s->eng is the old engine, with its cache; the window as it was) and ne holds
 * a prefix of the window. prefilled (may be NULL) receives the tokens forwarded. */
tt_status session_set_engine(session *s, engine *ne, int *prefilled, tt_error *err);

/* Runs the session on another model: m, its tokenizer tok and an engine eng over m (none owned;
 * they outlive the session, or the next session_set_model). The conversation is cleared (its
 * tokens are the old vocabulary's), the draft detached (speculative decoding off: the caller
 * attaches one that matches the new model), chat mode raw (the caller sets the new model's with
 * session_set_chat) and the last generation's figures zeroed; the settings, the stop strings,
 * the system message, gamma and the random stream stay. Refused while a generation is open
 * (TT_ERR_ARG); TT_ERR_NOMEM when out of memory. On failure nothing changed. */
tt_status session_set_model(session *s, const model *m, const tokenizer *tok, engine *eng,
                            tt_error *err);

/* Adds a stop string (copied); fails when empty or SESSION_MAX_STOPS are set. */
tt_status session_add_stop(session *s, const char *stop, tt_error *err);
void session_clear_stops(session *s);

/* Reseeds the PRNG. */
void session_set_seed(session *s, uint64_t seed);

/* Chat mode: user turns are wrapped in chat->spec's format from the next one on (raw: plain
 * continuation, as without chat mode), and a generation stops at an end-of-turn token (the
 * format's, looked up through chat->special, and chat->eot_ids), or, when neither gives one, at
 * the end-of-turn text as if it were a stop string. The conversation is not changed: already
 * rendered turns stay as they are. TT_ERR_ARG for an id outside the vocabulary or more than
 * SESSION_MAX_EOT of them (nothing changed). */
tt_status session_set_chat(session *s, const session_chat *chat, tt_error *err);

/* The format in use (CHAT_RAW when chat mode is off). */
chat_format session_chat_format(const session *s);

/* The system message (copied; NULL or "" clears it) of a conversation: it is rendered at the
 * start of the first chat turn, so it applies to the conversation from its start (after
 * session_reset, or now when the conversation is empty). A format's default system message
 * (Qwen2.5's) stands when none is set. */
tt_status session_set_system(session *s, const char *text, tt_error *err);

/* Appends text (tokenized) to the conversation as a new user turn. Empty text starts a turn that
 * continues from the current context (in chat mode too: the reply goes on). Otherwise, in chat
 * mode the turn is wrapped in the format: the reply
 * before it closed with the end-of-turn text when the model did not end it, the BOS and the
 * system message at a conversation's start, the user message and the assistant's header (the
 * template's markers become special tokens through the chat's lookup; the user's text stays
 * text). Each turn only appends, so the KV cache keeps the whole conversation. The engine is not
 * run until generation. In raw mode a conversation's first text starts with the tokenizer's BOS
 * when it adds one (tokenizer_adds_bos: Llama, Mistral), as Hugging Face's tokenizer(text) does. */
tt_status session_add_user_text(session *s, const char *text, size_t len, tt_error *err);

/* Appends token ids as a new user turn (ids checked against the vocabulary). */
tt_status session_add_user_tokens(session *s, const int32_t *ids, int n, tt_error *err);

/* Generates until a stop condition, calling fn for every token. Prefill reuses the longest prefix
 * the cache already holds. Fills s->last. Returns TT_OK unless the engine or sampler failed
 * (then s->last.stop == SESSION_STOP_ERROR and the cache is consistent with s->tokens). */
tt_status session_generate(session *s, session_event_fn fn, void *user, tt_error *err);

/* Step-wise generation for step mode: begin prefills; each step produces exactly one token
 * (force_id >= 0 chooses it instead of drawing, as /pick does); end finishes the turn.
 * With speculative decoding on (and force_id < 0) a step is one round: events for each produced
 * token in order (accepted drafts, then the rejected draft and its replacement),
 * stopping early at a stop condition (the rest of the round is dropped). */
tt_status session_gen_begin(session *s, tt_error *err);
tt_status session_gen_step(session *s, int32_t force_id, session_event_fn fn, void *user,
                           session_stop *stop, tt_error *err);
void session_gen_end(session *s, session_stop stop, session_event_fn fn, void *user);

/* After a hold of the front end (pacing, step mode) an engine whose decode step reads at most this
 * many bytes of weights computes its next step on one thread; a larger one keeps all its threads
 * (session.c, warm_if_idle). Chosen by measurement: docs/performance.md. */
#define SESSION_SOLO_MAX_BYTES ((size_t)64 << 20)

/* Pairs a speculative turn needs before it shows "x plain", and the most it times (a probe
 * costs a plain step's time; past this many the figure moves no more). */
#define SESSION_PROBE_MIN 6
#define SESSION_PROBE_MAX 1024
/* After SESSION_PROBE_MIN pairs a round gets a probe while the probes' wall time stays within
 * this share of the turn's. */
#define SESSION_PROBE_SHARE 0.15
/* Pairs in a block of the spread (session_speedup_of_pairs). */
#define SESSION_PROBE_BLOCK 3

/* A plain step timed two speculative rounds before one, and that round, in ms (the calling
 * thread's CPU time where both engines run on the CPU, else wall time), and the tokens the
 * round produced. */
typedef struct {
    double probe_ms, round_ms;
    int tokens;
} session_pair;

/* The last (or running) turn's speed over plain decoding's, measured in the same turn
 * (plain_probe; session_speedup_of_pairs over its pairs), and in *lo and *hi (either may be
 * NULL) its spread. 0 (and *lo, *hi 0) when the turn was not speculative or has fewer than
 * SESSION_PROBE_MIN pairs (the front end says "measuring"). Measured so because one earlier
 * plain turn, run under another load, was no baseline, and a mean of a few plain steps' wall
 * times no better: on 2 loaded cores a step is either quick or descheduled (0.5 against 10 ms),
 * so a handful of probes moved the figure from 0.5x to 2.3x. */
double session_plain_speedup(const session *s, double *lo, double *hi);

/* "x plain" from n pairs in the order they ran: the tokens of the rounds over their time, times
 * the mean plain step, i.e. a plain step's cost over a round's per token. Ratios of sums, not a
 * median of each pair's ratio: a round's time goes with its tokens (gamma, acceptance), so the
 * pairs' median ran 10% above alternated runs. CPU times leave out descheduling, which a plain
 * and a speculative run meet in proportion to their CPU time; a pair with a probe or a round
 * over 3 times its kind's median (a page fault storm, a cold cache after a long wait) is left
 * out, as are pairs with a time <= 0. *lo and *hi: the quartiles of the same figure over
 * consecutive blocks of SESSION_PROBE_BLOCK pairs (how much it moved across the turn). 0 (and
 * *lo, *hi 0) with fewer than SESSION_PROBE_MIN usable pairs or on a failed allocation. */
double session_speedup_of_pairs(const session_pair *pairs, int n, double *lo, double *hi);
double session_plain_speedup(const session *s, double *lo, double *hi);

/* The next-token distribution at the current end of the conversation without drawing (for the
 * histogram before a step): fills snap. On success engine_logits(s->eng, s->eng->n_logits - 1)
 * holds the raw logits snap was computed from (until the engine runs again). */
tt_status session_peek(session *s, sampler_snapshot *snap, tt_error *err);

/* Appends ids as the model's reply in the last turn (a new turn when there is none), with
 * info[i].origin and info[i].p (info[i].turn is ignored): how a continuation chosen outside
 * session_generate (a beam, one of several samples) joins the conversation, so undo, regen and
 * the transcript treat it as a generated reply. The cache is not run: the next generation or
 * session_peek syncs it. Ids outside the vocabulary: TT_ERR_ARG, nothing appended. */
tt_status session_append_reply(session *s, const int32_t *ids, const token_info *info, int n,
                               tt_error *err);

/* Drops the last turn (user text and reply); returns tokens dropped. */
int session_undo_turn(session *s);
/* Drops the last n tokens (turn boundaries adjusted); returns tokens dropped. */
int session_undo_tokens(session *s, int n);
/* Drops the model's reply of the last turn so it can be generated again; returns tokens dropped. */
int session_drop_reply(session *s);
/* Clears the conversation and the cache. */
void session_reset(session *s);

/* Replaces the conversation with ids (e.g. /load); the cache keeps the longest common prefix. */
tt_status session_set_tokens(session *s, const int32_t *ids, const token_info *info, int n,
                             tt_error *err);

/* Decoded text of tokens[from .. to) (malloc'd, NUL-terminated). */
char *session_text(const session *s, int from, int to);

/* The token that ends a generation: generation_config.json's eos_token_id, else config.json's,
 * else the tokenizer's <|endoftext|>; -1 when none. */
int32_t session_eos_id(const session *s);

/* The token a reply ends with: in chat mode the end-of-turn token when one is known (the first of
 * session_set_chat's), else session_eos_id. For drivers that stop at one token (beam search);
 * the session itself stops at either. */
int32_t session_end_id(const session *s);

/* Number of leading positions the engine cache shares with the current window. */
int session_cached_prefix(const session *s);

#endif
