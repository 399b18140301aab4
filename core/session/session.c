/* session.c: the conversation as one token sequence, kept in step with the engine's KV cache. */
#include "core/session/session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/clock.h"
#include "core/base/util.h"

/* ---------------------------------------------------------------------------------------------
 * Names */

const char *session_stop_name(session_stop s)
{
    switch (s) {
    case SESSION_STOP_NONE: return "none";
    case SESSION_STOP_EOS: return "eos";
    case SESSION_STOP_MAX_TOKENS: return "max_tokens";
    case SESSION_STOP_STRING: return "stop_string";
    case SESSION_STOP_CONTEXT: return "context";
    case SESSION_STOP_INTERRUPTED: return "interrupted";
    case SESSION_STOP_ERROR: return "error";
    }
    return "none";
}

const char *token_origin_name(token_origin o)
{
    switch (o) {
    case TOKEN_USER: return "user";
    case TOKEN_SAMPLED: return "sampled";
    case TOKEN_FORCED: return "forced";
    case TOKEN_DRAFT_ACCEPTED: return "draft_accepted";
    case TOKEN_TARGET_RESAMPLE: return "target_resample";
    case TOKEN_BONUS: return "bonus";
    }
    return "user";
}

/* ---------------------------------------------------------------------------------------------
 * Settings and lifetime */

void session_settings_default(session_settings *s)
{
    memset(s, 0, sizeof *s);
    sampler_params_default(&s->sampler);
    s->max_new_tokens = 128;
    s->min_tokens = 0;
    s->stop_at_eos = true;
    s->seed = 0;
    s->context_keep = 0.5f;
    s->context_shift = true;
}

static tt_status grow(session *s, int need, tt_error *err)
{
    if (need <= s->cap)
        return TT_OK;
    int cap = s->cap ? s->cap : 1024;
    while (cap < need)
        cap *= 2;
    int32_t *t = realloc(s->tokens, (size_t)cap * sizeof *t);
    if (!t)
        return tt_fail(err, TT_ERR_NOMEM, "session: out of memory for %d tokens", cap);
    s->tokens = t;
    token_info *in = realloc(s->info, (size_t)cap * sizeof *in);
    if (!in)
        return tt_fail(err, TT_ERR_NOMEM, "session: out of memory for %d tokens", cap);
    s->info = in;
    int *ts = realloc(s->turn_start, (size_t)cap * sizeof *ts);
    if (!ts)
        return tt_fail(err, TT_ERR_NOMEM, "session: out of memory for %d turns", cap);
    s->turn_start = ts;
    s->cap = cap;
    return TT_OK;
}

tt_status session_init(session *s, const model *m, const tokenizer *tok, engine *eng,
                       const session_settings *set, tt_error *err)
{
    memset(s, 0, sizeof *s);
    s->model = m;
    s->tok = tok;
    s->eng = eng;
    if (set) {
        s->set = *set;
        for (int i = 0; i < set->n_stops; i++)
            s->set.stops[i] = NULL;
        s->set.n_stops = 0;
    } else {
        session_settings_default(&s->set);
    }
    s->smp = sampler_create(m->config.V);
    if (!s->smp || grow(s, 1024, err) != TT_OK) {
        session_free(s);
        return tt_fail(err, TT_ERR_NOMEM, "session: out of memory");
    }
    if (set)
        for (int i = 0; i < set->n_stops; i++)
            if (session_add_stop(s, set->stops[i], err) != TT_OK) {
                session_free(s);
                return err ? err->status : TT_ERR_ARG;
            }
    rng_seed(&s->rng, s->set.seed);
    s->gamma = 4;
    s->gamma_adaptive = true;
    spec_tuner_init(&s->tuner, s->gamma);
    engine_truncate(eng, 0);
    return TT_OK;
}

void session_free(session *s)
{
    if (!s)
        return;
    session_clear_stops(s);
    sampler_free(s->smp);
    free(s->tokens);
    free(s->info);
    free(s->turn_start);
    spec_free(s->spec);
    free(s->rebuild);
    free(s->pairs);
    free(s->system);
    memset(s, 0, sizeof *s);
}

/* ---------------------------------------------------------------------------------------------
 * Snapshots on demand */

/* What the last step's or round's partial events need for their full snapshots: a plain step's
 * chain inputs (its logits stay the engine's last row until the next forward), or which round
 * the speculative module holds (spec_round_snapshot). Set as the step reports its events,
 * cleared before the engines run again. */
struct session_rebuild {
    enum { REBUILD_NONE, REBUILD_PLAIN, REBUILD_ROUND } kind;
    int step;                      /* plain: the event's step */
    int round;                     /* round: the generation's round number */
    sampler_params params;         /* plain: the step's settings (a front end may change them
                                      while it shows the step) */
    const float *logits;
    int n_history;                 /* tokens[window_start ..] at the step */
    int32_t banned;
    double u;
};

static void rebuild_clear(session *s)
{
    if (s->rebuild)
        s->rebuild->kind = REBUILD_NONE;
}

tt_status session_event_snapshots(session *s, const session_event *ev, sampler_snapshot *snap,
                                  sampler_snapshot *draft_snap, tt_error *err)
{
    if (!ev->partial) {
        if (ev->snap)
            *snap = *ev->snap;
        if (draft_snap && ev->draft_snap)
            *draft_snap = *ev->draft_snap;
        return TT_OK;
    }
    const struct session_rebuild *r = s->rebuild;
    if (r && r->kind == REBUILD_PLAIN && ev->round == 0 && ev->step == r->step) {
        sampler_context ctx = {.history = s->tokens + s->window_start,
                               .n_history = r->n_history, .banned = r->banned};
        tt_status st = sampler_apply(s->smp, &r->params, r->logits, &ctx, snap, err);
        if (st != TT_OK)
            return st;
        sampler_draw(s->smp, r->u, snap);
        return TT_OK;
    }
    if (r && r->kind == REBUILD_ROUND && ev->round == r->round && s->spec) {
        tt_status st = spec_round_snapshot(s->spec, ev->rejected, ev->row, snap, err);
        if (st != TT_OK || !draft_snap || ev->row >= spec_last_round(s->spec)->n_draft)
            return st;                 /* no draft at this position */
        if (ev->rejected)
            *draft_snap = *snap;       /* a rejected draft's snapshot is the draft's chain */
        else
            st = spec_round_snapshot(s->spec, true, ev->row, draft_snap, err);
        return st;
    }
    return tt_fail(err, TT_ERR_ARG, "no snapshot to build for step %d: it is not the last step's",
                   ev->step);
}

/* ---------------------------------------------------------------------------------------------
 * Speculative decoding settings */

tt_status session_set_draft(session *s, engine *draft, tt_error *err)
{
    if (!draft) {
        spec_free(s->spec);
        s->spec = NULL;
        s->draft = NULL;
        s->spec_on = false;
        return TT_OK;
    }
    if (draft->config->V != s->eng->config->V)
        return tt_fail(err, TT_ERR_CONFIG, "draft model: vocab_size %d differs from the target's "
                       "%d", draft->config->V, s->eng->config->V);
    if (draft->n_ctx < s->eng->n_ctx)
        return tt_fail(err, TT_ERR_CONFIG, "draft model: its context of %d is shorter than the "
                       "target's %d (use --ctx %d)", draft->n_ctx, s->eng->n_ctx, draft->n_ctx);
    spec *sp = spec_create(s->eng->config->V);
    if (!sp)
        return tt_fail(err, TT_ERR_NOMEM, "draft model: out of memory");
    spec_free(s->spec);
    s->spec = sp;
    s->draft = draft;
    engine_truncate(draft, 0);
    s->spec_on = true;
    return TT_OK;
}

tt_status session_set_model(session *s, const model *m, const tokenizer *tok, engine *eng,
                            tt_error *err)
{
    if (s->gen)
        return tt_fail(err, TT_ERR_ARG, "session: cannot change the model while a generation is "
                       "open");
    sampler *smp = sampler_create(m->config.V);
    if (!smp)
        return tt_fail(err, TT_ERR_NOMEM, "session: out of memory");
    rebuild_clear(s);
    session_set_draft(s, NULL, NULL);
    sampler_free(s->smp);
    s->smp = smp;
    s->model = m;
    s->tok = tok;
    s->eng = eng;
    s->n_tokens = s->n_turns = s->window_start = 0;
    engine_truncate(eng, 0);
    memset(&s->chat, 0, sizeof s->chat);
    s->n_eot = 0;
    memset(&s->last, 0, sizeof s->last);
    return TT_OK;
}

tt_status session_set_speculative(session *s, bool on, tt_error *err)
{
    if (on && !s->draft)
        return tt_fail(err, TT_ERR_ARG, "speculative decoding needs a draft model (--draft DIR)");
    s->spec_on = on;
    return TT_OK;
}

tt_status session_set_gamma(session *s, int gamma, bool adaptive, tt_error *err)
{
    if (gamma < 1 || gamma > SPEC_GAMMA_MAX)
        return tt_fail(err, TT_ERR_ARG, "gamma: %d is outside [1, %d]", gamma, SPEC_GAMMA_MAX);
    s->gamma_adaptive = adaptive;
    spec_tuner_init(&s->tuner, gamma);
    s->gamma = adaptive ? s->tuner.gamma : gamma;
    return TT_OK;
}

tt_status session_add_stop(session *s, const char *stop, tt_error *err)
{
    if (!stop || !*stop)
        return tt_fail(err, TT_ERR_ARG, "stop string: must not be empty");
    if (s->set.n_stops >= SESSION_MAX_STOPS)
        return tt_fail(err, TT_ERR_ARG, "stop string: at most %d can be set", SESSION_MAX_STOPS);
    char *c = strdup(stop);
    if (!c)
        return tt_fail(err, TT_ERR_NOMEM, "stop string: out of memory");
    s->set.stops[s->set.n_stops++] = c;
    return TT_OK;
}

void session_clear_stops(session *s)
{
    for (int i = 0; i < s->set.n_stops; i++)
        free(s->set.stops[i]);
    s->set.n_stops = 0;
}

void session_set_seed(session *s, uint64_t seed)
{
    s->set.seed = seed;
    rng_seed(&s->rng, seed);
    s->spec_turns = 0;
}

/* ---------------------------------------------------------------------------------------------
 * The conversation */

static tt_status append_token(session *s, int32_t id, token_origin origin, float p, tt_error *err)
{
    if (grow(s, s->n_tokens + 1, err) != TT_OK)
        return TT_ERR_NOMEM;
    s->tokens[s->n_tokens] = id;
    s->info[s->n_tokens] = (token_info){.origin = (uint8_t)origin, .p = p,
                                        .turn = s->n_turns > 0 ? s->n_turns - 1 : 0};
    s->n_tokens++;
    return TT_OK;
}

static tt_status begin_turn(session *s, tt_error *err)
{
    if (grow(s, s->n_turns + 1, err) != TT_OK)
        return TT_ERR_NOMEM;
    s->turn_start[s->n_turns++] = s->n_tokens;
    return TT_OK;
}

/* TT_ERR_ARG naming the first id outside the vocabulary, else TT_OK. */
static tt_status check_ids(const session *s, const int32_t *ids, int n, tt_error *err)
{
    int V = s->model->config.V;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return tt_fail(err, TT_ERR_ARG, "token id %d is outside the vocabulary [0, %d)",
                           (int)ids[i], V);
    return TT_OK;
}

tt_status session_add_user_tokens(session *s, const int32_t *ids, int n, tt_error *err)
{
    if (check_ids(s, ids, n, err) != TT_OK)
        return TT_ERR_ARG;
    if (grow(s, s->n_tokens + n, err) != TT_OK || begin_turn(s, err) != TT_OK)
        return TT_ERR_NOMEM;
    for (int i = 0; i < n; i++)
        append_token(s, ids[i], TOKEN_USER, 1.0f, NULL);
    return TT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Chat mode */

tt_status session_set_chat(session *s, const session_chat *chat, tt_error *err)
{
    int V = s->model->config.V;
    if (chat->n_eot < 0 || chat->n_eot > SESSION_MAX_EOT)
        return tt_fail(err, TT_ERR_ARG, "chat: %d end-of-turn ids (at most %d)", chat->n_eot,
                       SESSION_MAX_EOT);
    for (int i = 0; i < chat->n_eot; i++)
        if (chat->eot_ids[i] < 0 || chat->eot_ids[i] >= V)
            return tt_fail(err, TT_ERR_ARG, "chat: end-of-turn id %d is outside the vocabulary "
                           "[0, %d)", (int)chat->eot_ids[i], V);
    if (chat->bos_id >= V)
        return tt_fail(err, TT_ERR_ARG, "chat: BOS id %d is outside the vocabulary [0, %d)",
                       (int)chat->bos_id, V);
    s->chat = *chat;
    s->n_eot = 0;
    if (chat->spec.format == CHAT_RAW)
        return TT_OK;
    for (int i = 0; i < chat->n_eot; i++)
        s->eot[s->n_eot++] = chat->eot_ids[i];
    const char *eot = chat_format_eot(chat->spec.format);
    int32_t id = eot && chat->special ? chat->special(chat->special_user, eot, strlen(eot)) : -1;
    if (id >= 0 && id < V)
        s->eot[s->n_eot++] = id;
    return TT_OK;
}

chat_format session_chat_format(const session *s)
{
    return s->chat.spec.format;
}

tt_status session_set_system(session *s, const char *text, tt_error *err)
{
    char *c = NULL;
    if (text && *text && !(c = strdup(text)))
        return tt_fail(err, TT_ERR_NOMEM, "system message: out of memory");
    free(s->system);
    s->system = c;
    return TT_OK;
}

static bool is_eot(const session *s, int32_t tok)
{
    for (int i = 0; i < s->n_eot; i++)
        if (s->eot[i] == tok)
            return true;
    return false;
}

/* Appends the encoding of text[0..len) to *ids (*n of *cap). */
static tt_status encode_append(const session *s, const char *text, size_t len, int32_t **ids,
                               int *n, size_t *cap, tt_error *err)
{
    int32_t *part = NULL;
    int k = 0;
    tt_status st = tokenizer_encode(s->tok, text, len, &part, &k, err);
    if (st != TT_OK)
        return st;
    if (!UTIL_RESERVE(*ids, cap, (size_t)*n + (size_t)k + 1, 64)) {
        free(part);
        return tt_fail(err, TT_ERR_NOMEM, "session: out of memory");
    }
    if (k > 0)
        memcpy(*ids + *n, part, (size_t)k * sizeof *part);
    *n += k;
    free(part);
    return TT_OK;
}

/* The tokens of rendered chat text: each marker the chat's lookup knows is its special token,
 * the text between (markers it does not know included) is tokenized in one piece each, as a
 * tokenizer splits at its special tokens first. */
static tt_status encode_chat(const session *s, const chat_text *t, int32_t **ids, int *n,
                             tt_error *err)
{
    size_t cap = 0, from = 0;
    *ids = NULL;
    *n = 0;
    tt_status st = TT_OK;
    for (size_t i = 0; i < t->n_specials && st == TT_OK; i++) {
        const chat_span *sp = &t->specials[i];
        int32_t id = s->chat.special ? s->chat.special(s->chat.special_user, t->text + sp->off,
                                                       sp->len) : -1;
        if (id < 0)
            continue;
        if ((st = encode_append(s, t->text + from, sp->off - from, ids, n, &cap, err)) != TT_OK)
            break;
        (*ids)[(*n)++] = id;     /* encode_append reserved one more */
        from = sp->off + sp->len;
    }
    if (st == TT_OK)
        st = encode_append(s, t->text + from, t->len - from, ids, n, &cap, err);
    if (st != TT_OK) {
        free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return st;
}

/* Puts bos before the n ids of *ids (malloc'd; replaced). On failure *ids is freed and NULL. */
static tt_status prepend_bos(int32_t **ids, int *n, int32_t bos, tt_error *err)
{
    int32_t *with = realloc(*ids, ((size_t)*n + 1) * sizeof *with);
    if (!with) {
        free(*ids);
        *ids = NULL;
        return tt_fail(err, TT_ERR_NOMEM, "session: out of memory");
    }
    memmove(with + 1, with, (size_t)*n * sizeof *with);
    with[0] = bos;
    *ids = with;
    (*n)++;
    return TT_OK;
}

/* The tokens a chat turn adds for user text: see session_add_user_text. */
static tt_status chat_turn_ids(const session *s, const char *text, size_t len, int32_t **ids,
                               int *n, tt_error *err)
{
    char *user = malloc(len + 1);
    if (!user)
        return tt_fail(err, TT_ERR_NOMEM, "session: out of memory");
    memcpy(user, text, len);
    user[len] = 0;
    bool first = s->n_tokens == 0;
    bool closed = s->n_tokens > 0 && is_eot(s, s->tokens[s->n_tokens - 1]);
    chat_text t;
    chat_text_init(&t);
    tt_status st = chat_render_turn(&s->chat.spec, s->system, user, first, closed, &t, err);
    free(user);
    if (st == TT_OK)
        st = encode_chat(s, &t, ids, n, err);
    chat_text_free(&t);
    if (st != TT_OK || !first || chat_format_emits_bos(s->chat.spec.format) || s->chat.bos_id < 0)
        return st;
    /* The tokenizer's BOS before a format that writes none. */
    return prepend_bos(ids, n, s->chat.bos_id, err);
}

tt_status session_add_user_text(session *s, const char *text, size_t len, tt_error *err)
{
    int32_t *ids = NULL;
    int n = 0;
    bool chat = s->chat.spec.format != CHAT_RAW && len > 0;
    tt_status st = chat ? chat_turn_ids(s, text, len, &ids, &n, err)
                        : tokenizer_encode(s->tok, text, len, &ids, &n, err);
    /* A conversation's first text starts with the BOS when the tokenizer adds one (Llama,
     * Mistral: add_bos_token), as Hugging Face's tokenizer(text) does. */
    if (st == TT_OK && !chat && s->n_tokens == 0 && len > 0 && tokenizer_adds_bos(s->tok) &&
        tokenizer_bos_id(s->tok) >= 0)
        st = prepend_bos(&ids, &n, tokenizer_bos_id(s->tok), err);
    if (st != TT_OK)
        return st;
    st = session_add_user_tokens(s, ids, n, err);
    free(ids);
    return st;
}

tt_status session_append_reply(session *s, const int32_t *ids, const token_info *info, int n,
                               tt_error *err)
{
    if (check_ids(s, ids, n, err) != TT_OK)
        return TT_ERR_ARG;
    if (grow(s, s->n_tokens + n, err) != TT_OK ||
        (s->n_turns == 0 && begin_turn(s, err) != TT_OK))
        return TT_ERR_NOMEM;
    for (int i = 0; i < n; i++)
        append_token(s, ids[i], (token_origin)info[i].origin, info[i].p, NULL);
    return TT_OK;
}

static int keep_count(const session *s)
{
    int keep = (int)((double)s->eng->n_ctx * s->set.context_keep);
    if (keep < 1)
        keep = 1;
    if (keep > s->eng->n_ctx - 1)
        keep = s->eng->n_ctx - 1;
    return keep > 0 ? keep : 1;
}

int session_cached_prefix(const session *s)
{
    return engine_cached_prefix(s->eng, s->tokens + s->window_start,
                                s->n_tokens - s->window_start);
}

/* The target engine failed with a device error: take over the engine the front end offers (the
 * CPU, usually) and let the caller re-prefill the window on it. False when there is none. */
static bool recover_device(session *s, tt_status st, const tt_error *why)
{
    if (st != TT_ERR_DEVICE || !s->device_fallback)
        return false;
    session_set_draft(s, NULL, NULL);
    engine *failed = s->eng;   /* the callee may free it */
    engine *ne = s->device_fallback(s->fallback_user, s, failed, why);
    if (!ne || ne == failed)
        return false;
    s->eng = ne;
    engine_truncate(ne, 0);
    s->last.device_fallbacks++;
    return true;
}

/* Brings the engine cache in line with the window and leaves logits for its last token.
 * reused/prefilled receive the counts. Honors s->interrupt between chunks (engine_sync). */
static tt_status sync_cache(session *s, int *reused, int *prefilled, bool *shifted, int *dropped,
                            tt_error *err)
{
    rebuild_clear(s);   /* the engines run: the last step's logits go */
    *reused = *prefilled = 0;
    if (s->window_start > s->n_tokens)
        s->window_start = s->n_tokens;
    int wlen = s->n_tokens - s->window_start;
    if (wlen > s->eng->n_ctx) {
        if (!s->set.context_shift)
            return tt_fail(err, TT_ERR_CONTEXT, "the conversation (%d tokens) does not fit the "
                           "context of %d and context shifting is off", wlen, s->eng->n_ctx);
        int old = s->window_start;
        s->window_start = s->n_tokens - keep_count(s);
        *shifted = true;
        *dropped += s->window_start - old;
        wlen = s->n_tokens - s->window_start;
    }
    if (wlen == 0)
        return tt_fail(err, TT_ERR_ARG, "nothing to run the model on");
    s->eng->interrupt = s->interrupt;
    tt_status st = engine_sync(s->eng, s->tokens + s->window_start, wlen, true, reused, prefilled,
                               err);
    s->eng->interrupt = NULL;
    if (st != TT_OK && recover_device(s, st, err)) {
        /* Everything again on the replacement engine (its cache is empty). */
        int again_reused, again_prefilled;
        st = sync_cache(s, &again_reused, &again_prefilled, shifted, dropped, err);
        *reused = again_reused;
        *prefilled += again_prefilled;
    }
    return st;
}

tt_status session_set_engine(session *s, engine *ne, int *prefilled, tt_error *err)
{
    rebuild_clear(s);
    if (prefilled)
        *prefilled = 0;
    if (s->gen)
        return tt_fail(err, TT_ERR_ARG, "session: cannot change the engine while a generation is "
                       "open");
    if (ne->config->V != s->eng->config->V)
        return tt_fail(err, TT_ERR_CONFIG, "session: the new engine's vocabulary has %d tokens, "
                       "the conversation's model %d", ne->config->V, s->eng->config->V);
    if (s->n_tokens - s->window_start <= 0) {
        s->eng = ne;
        return TT_OK;
    }
    /* The path every generation takes (sync_cache: a window one token past the context shifts
     * as it would on the old engine), run on ne; a device error here is not the session's
     * engine failing, so no fall-back engine takes over. */
    engine *old = s->eng;
    int old_start = s->window_start;
    session_fallback_fn fallback = s->device_fallback;
    s->device_fallback = NULL;
    s->eng = ne;
    int reused, done, dropped = 0;
    bool shifted = false;
    tt_status st = sync_cache(s, &reused, &done, &shifted, &dropped, err);
    s->device_fallback = fallback;
    if (prefilled)
        *prefilled = done;
    if (st != TT_OK) {
        s->eng = old;
        s->window_start = old_start;
    }
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * Generation */

/* Output text of the running generation: bytes pass the UTF-8 stream, then are held back while
 * they could still become a stop string. */
typedef struct {
    utf8_stream utf8;
    char *buf;              /* all text produced this generation (after the UTF-8 stream) */
    size_t len, cap, emitted;
    bool stopped;           /* a stop string matched: nothing more is emitted */
} out_text;


struct session_gen {
    out_text out;
    int step;                /* events so far */
    int generated;
    double t_begin, t_first;
    double t_returned;       /* when session_gen_step last returned to the front end (0: not yet) */
    double idle_ms;          /* the front end's time since the engines last ran (see warm) */
    bool pending_shift;      /* report a context shift with the next event */
    int pending_dropped;
    bool need_sync;          /* a speculative round left the last token out of the cache: its
                                logits must be computed before a plain step or a peek */
    int rounds;              /* speculative rounds so far */
    double held_probe_ms;    /* a probe waiting for the next round, which runs without one and
                                completes the pair (0: none; see spec_step) */
    uint64_t spec_key;       /* the key of this generation's speculative uniforms: they are
                                rng_keyed(spec_key, output position, purpose), so the tokens do
                                not depend on gamma (speculative.h) */
    struct round_trace *trace;   /* TOKENTOP_PAIR_TRACE only (round_trace_write), else NULL */
};

/* TOKENTOP_PAIR_TRACE=FILE: the timing behind "x plain", one line per speculative round and per
 * plain step, appended to FILE when the generation ends (kept in memory until then, so the writes
 * stay out of the timed windows) after a "#" line with the front end and the sampler. For
 * comparing the REPL's figure with generate's (docs/bench/2026-11-27-repl-x-plain.md); nothing
 * shows it, and without the variable nothing is kept. */
typedef struct {
    int round, pos, n_out;         /* round: the round's number, or the plain step's event */
    char role;                     /* 'P' ran after a probe, 'R' completed a pair, '-' neither;
                                      'S' a plain step (probe_ms: its sampler and forward) */
    bool warmed;
    double front_ms;               /* the front end's time just before (idle_ms) */
    double probe_before_ms;        /* the probe's step before the timed one */
    double probe_ms, round_ms;     /* pair_clock_ms; -1: none */
    double probe_wall_ms, round_wall_ms;
    double probe_fwd_ms;           /* the timed step's forward alone (pair_clock_ms) */
    double draft_fwd_ms, verify_fwd_ms;   /* the round's (spec_round, wall clock) */
} round_trace_row;

struct round_trace {
    size_t n, cap;
    round_trace_row *row;   /* (cap) */
};

static void round_trace_write(const session *s, struct session_gen *g);
static void round_trace_add(struct session_gen *g, const round_trace_row *r);
static double pair_clock_ms(const session *s);

/* The pairs behind "x plain" (session_speedup_of_pairs): kept after the turn for the status bar
 * and /show, cleared when the next generation begins. */
struct session_pairs {
    int n;
    session_pair pair[SESSION_PROBE_MAX];   /* (n) in the order they ran */
};

/* Adds bytes and returns how many bytes from o->emitted may be shown now. *hit is set when a stop
 * string completed: only the text before it is shown, and nothing after. */
static size_t out_push(out_text *o, const char *bytes, size_t n, bool flush, char *const *stops,
                       int n_stops, bool *hit)
{
    *hit = false;
    if (o->stopped || !util_reserve(&o->buf, &o->cap, o->len + 3 * (n + 8) + 1, 256))
        return 0;
    o->len += utf8_stream_push(&o->utf8, bytes, n, o->buf + o->len, o->cap - o->len);
    if (flush)
        o->len += utf8_stream_flush(&o->utf8, o->buf + o->len, o->cap - o->len);
    o->buf[o->len] = 0;
    size_t cut = o->len;
    for (int i = 0; i < n_stops; i++) {
        size_t sl = strlen(stops[i]);
        const char *p = memmem(o->buf + o->emitted, o->len - o->emitted, stops[i], sl);
        if (p && (size_t)(p - o->buf) < cut) {
            cut = (size_t)(p - o->buf);
            *hit = true;
        }
    }
    if (*hit) {
        o->stopped = true;
        return cut - o->emitted;
    }
    if (flush)
        return o->len - o->emitted;
    /* Hold back the longest tail that is a proper prefix of some stop string. */
    size_t hold = 0, avail = o->len - o->emitted;
    for (int i = 0; i < n_stops; i++) {
        size_t sl = strlen(stops[i]);
        for (size_t k = sl - 1 < avail ? sl - 1 : avail; k > hold; k--)
            if (memcmp(o->buf + o->len - k, stops[i], k) == 0) {
                hold = k;
                break;
            }
    }
    return avail - hold;
}

/* Calls the front end's fn; once the first token is out, its time (pacing, drawing, printing,
 * another engine it runs to compare) counts to last.front_ms, not to the decode speed. */
static bool notify(session *s, session_event_fn fn, void *user, const session_event *ev)
{
    if (!fn)
        return true;
    double t0 = tt_now_ms();
    bool go_on = fn(user, ev);
    double held = tt_now_ms() - t0;
    s->gen->idle_ms += held;
    if (s->gen->generated > 0)
        s->last.front_ms += held;
    return go_on;
}

/* The stop strings of a generation: the settings', and in chat mode the end-of-turn text when no
 * end-of-turn token is known (a tokenizer without the format's special tokens). Returns the
 * count; stops has room for SESSION_MAX_STOPS + 1. */
static int gen_stops(const session *s, char **stops)
{
    int n = 0;
    for (int i = 0; i < s->set.n_stops; i++)
        stops[n++] = s->set.stops[i];
    const char *eot = chat_format_eot(s->chat.spec.format);
    if (eot && s->n_eot == 0)
        stops[n++] = (char *)eot;
    return n;
}

/* Sends one event whose text is what out_push releases; returns the callback's answer. */
static bool emit(session *s, session_event_fn fn, void *user, session_event *ev,
                 const char *bytes, size_t n, bool flush, bool *hit)
{
    struct session_gen *g = s->gen;
    char *stops[SESSION_MAX_STOPS + 1];
    int n_stops = gen_stops(s, stops);
    size_t show = out_push(&g->out, bytes, n, flush, stops, n_stops, hit);
    ev->text = g->out.buf ? g->out.buf + g->out.emitted : "";
    ev->text_len = show;
    g->out.emitted += show;
    if (g->pending_shift) {
        ev->context_shifted = true;
        ev->shift_dropped = g->pending_dropped;
        g->pending_shift = false;
        g->pending_dropped = 0;
    }
    ev->step = g->step++;
    return notify(s, fn, user, ev);
}

static int32_t eos_id(const session *s)
{
    int32_t e = model_eos(s->model);
    return e >= 0 ? e : tokenizer_eot_id(s->tok);
}

/* Whether tok ends a reply: any of the model's end tokens (generation_config.json may name
 * several), else the tokenizer's <|endoftext|>. */
static bool is_eos_token(const session *s, int32_t tok)
{
    return model_eos(s->model) >= 0 ? model_is_eos(s->model, tok) : tok == eos_id(s);
}

static int32_t bos_id(const session *s)
{
    if (tokenizer_adds_bos(s->tok) && tokenizer_bos_id(s->tok) >= 0)
        return tokenizer_bos_id(s->tok);
    if (s->model->config.bos_id >= 0)
        return s->model->config.bos_id;
    int32_t eot = tokenizer_eot_id(s->tok);
    return eot >= 0 ? eot : 0;
}

/* Tags the speculative key's derivation apart from any other use of rng_keyed with the seed. */
#define SESSION_SPEC_KEY_TAG 0x5350454355ull

tt_status session_gen_begin(session *s, tt_error *err)
{
    rebuild_clear(s);
    memset(&s->last, 0, sizeof s->last);
    tt_status st = sampler_params_validate(&s->set.sampler, err);
    if (st != TT_OK)
        return st;
    if (s->set.max_new_tokens < 1)
        return tt_fail(err, TT_ERR_ARG, "max new tokens: %d must be at least 1",
                       s->set.max_new_tokens);
    if (s->gen) {
        free(s->gen->out.buf);
        round_trace_write(s, s->gen);
    }
    free(s->gen);
    s->gen = calloc(1, sizeof *s->gen);
    if (!s->gen)
        return tt_fail(err, TT_ERR_NOMEM, "session: out of memory");
    struct session_gen *g = s->gen;
    utf8_stream_init(&g->out.utf8);
    g->t_begin = tt_now_ms();
    if (s->pairs)
        s->pairs->n = 0;
    g->spec_key = rng_keyed(s->set.seed, SESSION_SPEC_KEY_TAG, s->spec_turns++, 0);
    if (getenv("TOKENTOP_PAIR_TRACE"))
        g->trace = calloc(1, sizeof *g->trace);   /* none: no trace, the turn goes on */
    if (s->spec)
        spec_stats_reset(s->spec);
    /* An empty conversation starts from the beginning-of-text token, as GPT-2 was trained. */
    if (s->n_tokens == 0) {
        int32_t bos = bos_id(s);
        if ((st = session_add_user_tokens(s, &bos, 1, err)) != TT_OK)
            return st;
    }
    bool shifted = false;
    int dropped = 0;
    st = sync_cache(s, &s->last.reused_tokens, &s->last.prefilled_tokens, &shifted, &dropped, err);
    s->last.prompt_tokens = s->n_tokens - s->window_start;
    s->last.prefill_ms = tt_now_ms() - g->t_begin;
    if (shifted) {
        g->pending_shift = true;
        g->pending_dropped = dropped;
        s->last.context_shifts++;
    }
    if (st != TT_OK) {
        s->last.stop = st == TT_ERR_INTERRUPTED ? SESSION_STOP_INTERRUPTED
                     : st == TT_ERR_CONTEXT ? SESSION_STOP_CONTEXT : SESSION_STOP_ERROR;
        if (err)
            s->last.error = *err;
    }
    return st;
}

/* Brings the cache in line with the window, shifting the context when it is full (and noting the
 * shift for the next event), or sets *stop to CONTEXT when it is full and shifting is off: after a
 * speculative round (which leaves the last token out) and when a token overflows the window. */
static tt_status resync(session *s, session_stop *stop, tt_error *err)
{
    rebuild_clear(s);   /* the engines run: the last step's logits go */
    struct session_gen *g = s->gen;
    if (s->n_tokens - s->window_start > s->eng->n_ctx && !s->set.context_shift) {
        *stop = SESSION_STOP_CONTEXT;
        return TT_OK;
    }
    int reused, prefilled, dropped = 0;
    bool shifted = false;
    tt_status st = sync_cache(s, &reused, &prefilled, &shifted, &dropped, err);
    if (shifted) {
        g->pending_shift = true;
        g->pending_dropped += dropped;
        s->last.context_shifts++;
    }
    return st;
}

/* After a token was appended: make its logits available (forward it, shifting the window when the
 * context is full). Sets *stop to CONTEXT when full and shifting is off. */
static tt_status advance(session *s, session_stop *stop, tt_error *err)
{
    rebuild_clear(s);   /* the engines run: the last step's logits go */
    int wlen = s->n_tokens - s->window_start;
    if (wlen > s->eng->n_ctx)
        return resync(s, stop, err);
    int pos = wlen - 1;
    int32_t tok = s->tokens[s->n_tokens - 1];
    tt_status st = engine_forward(s->eng, &tok, 1, pos, false, err);
    if (st != TT_OK && recover_device(s, st, err)) {
        int reused, prefilled, dropped = 0;
        bool shifted = false;
        st = sync_cache(s, &reused, &prefilled, &shifted, &dropped, err);
    }
    return st;
}

/* Appends ev->token to the conversation, reports it through fn (text after the UTF-8 stream and
 * the stop-string hold-back) and sets *stop when it ends the generation. */
static tt_status produce(session *s, session_event *ev, session_event_fn fn, void *user,
                         session_stop *stop, tt_error *err)
{
    struct session_gen *g = s->gen;
    int32_t tok = ev->token;
    float p = ev->snap ? ev->snap->token_p : 1.0f;
    tt_status st = append_token(s, tok, ev->origin, p, err);
    if (st != TT_OK) {
        *stop = SESSION_STOP_ERROR;
        return st;
    }
    if (g->generated++ == 0) {
        g->t_first = tt_now_ms();
        s->last.ttft_ms = g->t_first - g->t_begin;
    }
    s->last.generated_tokens = g->generated;
    bool is_eos = s->set.stop_at_eos && (is_eos_token(s, tok) || is_eot(s, tok));
    size_t nb = 0;
    const char *bytes = is_eos ? "" : tokenizer_token_bytes(s->tok, tok, &nb);
    if (!bytes)
        bytes = "";
    bool hit = false;
    bool go_on = emit(s, fn, user, ev, bytes, nb, false, &hit);
    if (hit)
        *stop = SESSION_STOP_STRING;
    else if (is_eos)
        *stop = SESSION_STOP_EOS;
    else if (!go_on)
        *stop = SESSION_STOP_INTERRUPTED;
    else if (g->generated >= s->set.max_new_tokens)
        *stop = SESSION_STOP_MAX_TOKENS;
    return TT_OK;
}

static tt_status spec_step(session *s, session_event_fn fn, void *user, session_stop *stop,
                           tt_error *err);

/* The front end's time since the last step returned (drawing between steps, a person in step
 * mode) counts to last.front_ms once the first token is out. */
static void note_front_gap(session *s)
{
    struct session_gen *g = s->gen;
    if (g->t_returned > 0) {
        double gap = tt_now_ms() - g->t_returned;
        g->idle_ms += gap;
        if (g->generated > 0)
            s->last.front_ms += gap;
    }
    g->t_returned = 0;
}

/* Before the engines' next work: when the front end kept them idle for SESSION_WARM_IDLE_MS or
 * more (a pacing hold, a person in step mode), they read their weights for a moment first, and an
 * engine whose step reads at most SESSION_SOLO_MAX_BYTES of weights computes the step on one
 * thread. After idling, a step is slower (the weights left the caches, the memory system went
 * idle) until the weights have been read a couple of times, and for weights the caches hold a
 * second thread does not pay; for larger ones, which every step streams from memory, it does (two
 * threads read at nearly twice one's rate). The idle threshold, the reading times, the single
 * thread and its size limit were chosen by measurement
 * (docs/performance.md#why-the-kernels-are-as-they-are). The warm-up counts to the
 * front end's time, as the hold that made it necessary does: the decode speed stays the engine's
 * own. It changes no token and no number a step computes. The draft reads last, since a round
 * starts with it: read first, the target's weights evicted it again from the core's L2. */
#define SESSION_WARM_IDLE_MS 5.0
#define SESSION_WARM_MS 2.0
#define SESSION_WARM_DRAFT_MS 0.5

/* solo: the front end kept the engines idle; each goes solo only if its weights are small. */
static void set_solo(session *s, bool solo)
{
    engine_set_solo(s->eng, solo && s->eng->weight_bytes <= SESSION_SOLO_MAX_BYTES);
    if (s->draft)
        engine_set_solo(s->draft, solo && s->draft->weight_bytes <= SESSION_SOLO_MAX_BYTES);
}

/* Returns whether it warmed. */
static bool warm_if_idle(session *s)
{
    struct session_gen *g = s->gen;
    bool idle = g->idle_ms >= SESSION_WARM_IDLE_MS;
    set_solo(s, idle);
    if (idle) {
        double t0 = tt_now_ms();
        engine_warm(s->eng, SESSION_WARM_MS);
        if (s->spec_on && s->draft)        /* last: a round starts with the draft */
            engine_warm(s->draft, SESSION_WARM_DRAFT_MS);
        if (g->generated > 0)
            s->last.front_ms += tt_now_ms() - t0;
        s->last.warmups++;
    }
    g->idle_ms = 0;
    return idle;
}

static tt_status gen_step(session *s, int32_t force_id, session_event_fn fn, void *user,
                          session_stop *stop, tt_error *err);

tt_status session_gen_step(session *s, int32_t force_id, session_event_fn fn, void *user,
                           session_stop *stop, tt_error *err)
{
    *stop = SESSION_STOP_NONE;
    if (!s->gen)
        return tt_fail(err, TT_ERR_ARG, "session: no generation in progress");
    note_front_gap(s);
    tt_status st = gen_step(s, force_id, fn, user, stop, err);
    s->gen->t_returned = tt_now_ms();
    return st;
}

static tt_status gen_step(session *s, int32_t force_id, session_event_fn fn, void *user,
                          session_stop *stop, tt_error *err)
{
    struct session_gen *g = s->gen;
    if (s->interrupt && *s->interrupt) {
        *stop = SESSION_STOP_INTERRUPTED;
        return TT_OK;
    }
    int V = s->model->config.V;
    if (force_id >= V)
        return tt_fail(err, TT_ERR_ARG, "token id %d is outside the vocabulary [0, %d)",
                       (int)force_id, V);
    if (s->spec_on && s->draft && force_id < 0)
        return spec_step(s, fn, user, stop, err);
    if (g->need_sync) {
        tt_status rs = resync(s, stop, err);
        if (rs != TT_OK || *stop != SESSION_STOP_NONE) {
            if (rs == TT_ERR_INTERRUPTED) {
                *stop = SESSION_STOP_INTERRUPTED;
                return TT_OK;
            }
            if (rs != TT_OK)
                *stop = SESSION_STOP_ERROR;
            return rs;
        }
        g->need_sync = false;
    }
    int32_t eos = eos_id(s);
    sampler_context ctx = {
        .history = s->tokens + s->window_start,
        .n_history = s->n_tokens - s->window_start,
        .banned = (g->generated < s->set.min_tokens && eos >= 0) ? eos : -1,
    };
    sampler_snapshot snap;
    bool on_demand = s->snapshots_on_demand && !s->lean && force_id < 0;
    bool lean = (s->lean || on_demand) && force_id < 0;
    rebuild_clear(s);
    if (on_demand && !s->rebuild && !(s->rebuild = calloc(1, sizeof *s->rebuild)))
        return tt_fail(err, TT_ERR_NOMEM, "session: out of memory");
    const float *logits = engine_logits(s->eng, s->eng->n_logits - 1);
    double c0 = g->trace ? pair_clock_ms(s) : 0;
    tt_status st = sampler_apply(s->smp, &s->set.sampler, logits, &ctx, lean ? NULL : &snap, err);
    if (st != TT_OK) {
        *stop = SESSION_STOP_ERROR;
        return st;
    }
    double u = rng_uniform(&s->rng);   /* drawn every step, so modes do not shift the stream */
    int32_t tok;
    token_origin origin;
    if (force_id >= 0) {
        sampler_force(s->smp, force_id, &snap);
        tok = force_id;
        origin = TOKEN_FORCED;
    } else if (lean) {
        tok = sampler_draw(s->smp, u, NULL);
        bool greedy = s->set.sampler.greedy || s->set.sampler.temperature == 0;
        sampler_snapshot_token_only(&snap, tok, sampler_probs(s->smp)[tok], greedy ? -1 : u);
        origin = TOKEN_SAMPLED;
    } else {
        tok = sampler_draw(s->smp, u, &snap);
        origin = TOKEN_SAMPLED;
    }
    double sampler_ms = g->trace ? pair_clock_ms(s) - c0 : 0;
    session_event ev = {.token = tok, .origin = origin, .snap = &snap, .logits = logits,
                        .partial = on_demand, .row = -1};
    if (on_demand)
        *s->rebuild = (struct session_rebuild){
            .kind = REBUILD_PLAIN, .step = g->step, .params = s->set.sampler, .logits = logits,
            .n_history = ctx.n_history, .banned = ctx.banned, .u = u};
    if ((st = produce(s, &ev, fn, user, stop, err)) != TT_OK)
        return st;
    if (*stop != SESSION_STOP_NONE)
        return TT_OK;
    double front_ms = g->idle_ms;
    bool warmed = warm_if_idle(s);
    double c1 = g->trace ? pair_clock_ms(s) : 0;
    st = advance(s, stop, err);
    if (g->trace) {
        double fwd = pair_clock_ms(s) - c1;
        round_trace_add(g, &(round_trace_row){
            .round = g->step, .pos = s->n_tokens - s->window_start, .n_out = 1, .role = 'S',
            .warmed = warmed, .front_ms = front_ms, .probe_before_ms = -1,
            .probe_ms = sampler_ms + fwd, .round_ms = -1, .probe_wall_ms = -1,
            .round_wall_ms = -1, .probe_fwd_ms = fwd, .draft_fwd_ms = -1, .verify_fwd_ms = -1});
    }
    if (st == TT_ERR_INTERRUPTED) {
        *stop = SESSION_STOP_INTERRUPTED;
        return TT_OK;
    }
    if (st != TT_OK)
        *stop = SESSION_STOP_ERROR;
    return st;
}

static void round_trace_add(struct session_gen *g, const round_trace_row *r)
{
    struct round_trace *T = g->trace;
    if (!T || !UTIL_RESERVE(T->row, &T->cap, T->n + 1, 64))
        return;
    T->row[T->n++] = *r;
}

/* Appends g's rows to TOKENTOP_PAIR_TRACE's file, one line each, and frees them. */
static void round_trace_write(const session *s, struct session_gen *g)
{
    struct round_trace *T = g->trace;
    const char *path = getenv("TOKENTOP_PAIR_TRACE");
    FILE *f = T && T->n > 0 && path ? fopen(path, "a") : NULL;
    const sampler_params *sp = &s->set.sampler;
    if (f)
        fprintf(f, "# %s temperature %g top_k %d top_p %g min_p %g repetition %g window %d\n",
                s->snapshots_on_demand ? "repl" : "gen", sp->temperature, sp->top_k, sp->top_p,
                sp->min_p, sp->repetition_penalty, sp->penalty_window);
    for (size_t i = 0; f && i < T->n; i++) {
        const round_trace_row *r = &T->row[i];
        fprintf(f, "%s round %d pos %d out %d role %c warmed %d front %.3f before %.4f "
                "probe %.4f round %.4f probe_wall %.4f round_wall %.4f probe_fwd %.4f "
                "draft_fwd %.4f verify_fwd %.4f\n",
                s->snapshots_on_demand ? "repl" : "gen", r->round, r->pos, r->n_out, r->role,
                r->warmed, r->front_ms, r->probe_before_ms, r->probe_ms, r->round_ms,
                r->probe_wall_ms, r->round_wall_ms, r->probe_fwd_ms, r->draft_fwd_ms,
                r->verify_fwd_ms);
    }
    if (f)
        fclose(f);
    if (T)
        free(T->row);
    free(T);
    g->trace = NULL;
}

/* The clock of the probes and rounds: the calling thread's CPU time when both engines run on
 * the CPU, because on 2 loaded cores half the rounds and a tenth of the plain steps were
 * descheduled for ~10 ms, which made single readings of wall times scatter from 0.5x to 1.7x
 * where CPU times gave 1.2x to 1.6x (the descheduling a plain and a speculative run meet goes
 * with their CPU time, so it leaves their ratio). A GPU engine's host thread may sleep while
 * the device works: the wall clock there. */
static double pair_clock_ms(const session *s)
{
    bool cpu = strcmp(s->eng->ops->name, "cpu") == 0 &&
               (!s->draft || strcmp(s->draft->ops->name, "cpu") == 0);
    return cpu ? tt_thread_cpu_ms() : tt_now_ms();
}

/* Steps a probe computes, timing the last. The first finds the target's weights where the
 * draft's round left them (partly evicted), which a plain turn's steps, one after another, never
 * do; timed, it made the figure 28% above alternated plain and speculative runs on an idle 2-core
 * EPYC. The second still cost 7-11% more CPU time than a plain run's steps next to it (medians of
 * 24 alternated runs, twice), the third 2.5% (mean 0.999x): with the second timed, "x plain" read
 * 5-10% above the alternated runs (docs/bench/2026-11-27-repl-x-plain.md). */
#define SESSION_PROBE_STEPS 3

/* One plain step, timed and rolled back (session.h: plain_probe): the target forwards the token
 * the round will verify from, at its position, on the cache the round will keep, and the
 * sampler runs over its logits, SESSION_PROBE_STEPS times. The round then finds the cache as it
 * was. Returns the last step's time in ms (pair_clock_ms), or -1 when it failed (a failure only
 * costs the sample); *before_ms the step's before it, *fwd_ms the last one's forward alone. */
static double probe_plain(session *s, bool warmed, double *before_ms, double *fwd_ms)
{
    int wlen = s->n_tokens - s->window_start;
    const int32_t *w = s->tokens + s->window_start;
    if (wlen < 1 || wlen > s->eng->n_ctx)
        return -1;
    int c = engine_cached_prefix(s->eng, w, wlen - 1);
    tt_error perr = {0};
    tt_status st = TT_OK;
    double t0 = tt_now_ms(), t_step = 0, t1 = 0;
    for (int k = 0; k < SESSION_PROBE_STEPS && st == TT_OK; k++) {
        *before_ms = t1 - t_step;
        t_step = pair_clock_ms(s);
        st = engine_forward(s->eng, &w[c], 1, c, false, &perr);
        *fwd_ms = pair_clock_ms(s) - t_step;
        if (st == TT_OK) {
            sampler_context ctx = {.history = w, .n_history = c + 1, .banned = -1};
            st = sampler_apply(s->smp, &s->set.sampler,
                               engine_logits(s->eng, s->eng->n_logits - 1), &ctx, NULL, &perr);
            if (st == TT_OK)
                (void)sampler_draw(s->smp, 0.5, NULL);
        }
        t1 = pair_clock_ms(s);
        engine_truncate(s->eng, c);
    }
    if (warmed)   /* the probe read the target after the warm-up: the round starts with the draft */
        engine_warm(s->draft, SESSION_WARM_DRAFT_MS);
    if (s->gen->generated > 0)
        s->last.probe_ms += tt_now_ms() - t0;
    return st == TT_OK ? t1 - t_step : -1;
}

/* The value at quantile q (0..1) of sorted v[0..n-1], interpolated between neighbours. */
static double quantile_of_sorted(const double *v, int n, double q)
{
    double at = q * (n - 1);
    int i = (int)at;
    return i + 1 < n ? v[i] + (at - i) * (v[i + 1] - v[i]) : v[n - 1];
}

/* The median of the positive values of pairs[0..n-1].probe_ms (round: .round_ms), 0 when none. */
static double median_of(const session_pair *pairs, int n, bool round)
{
    double *t = malloc((size_t)(n > 0 ? n : 1) * sizeof *t);
    int m = 0;
    for (int i = 0; t && i < n; i++) {
        double v = round ? pairs[i].round_ms : pairs[i].probe_ms;
        if (v > 0)
            t[m++] = v;
    }
    double mid = m > 0 ? tt_median(t, m) : 0;
    free(t);
    return mid;
}

/* tokens / round time * mean probe over pairs[0..n-1], those flagged in use only. */
static double speedup_of(const session_pair *pairs, const bool *use, int n, int *used)
{
    double probe = 0, round = 0;
    long tokens = 0;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (use[i]) {
            probe += pairs[i].probe_ms;
            round += pairs[i].round_ms;
            tokens += pairs[i].tokens;
            m++;
        }
    if (used)
        *used = m;
    return m > 0 && round > 0 ? (double)tokens / round * (probe / m) : 0;
}

double session_speedup_of_pairs(const session_pair *pairs, int n, double *lo, double *hi)
{
    if (lo)
        *lo = 0;
    if (hi)
        *hi = 0;
    if (n < SESSION_PROBE_MIN)
        return 0;
    double probe_mid = median_of(pairs, n, false), round_mid = median_of(pairs, n, true);
    bool *use = malloc((size_t)n * sizeof *use);
    double *block = malloc((size_t)(n / SESSION_PROBE_BLOCK + 1) * sizeof *block);
    if (!use || !block) {
        free(use);
        free(block);
        return 0;
    }
    for (int i = 0; i < n; i++)
        use[i] = pairs[i].probe_ms > 0 && pairs[i].round_ms > 0 && pairs[i].tokens > 0 &&
                 pairs[i].probe_ms <= 3 * probe_mid && pairs[i].round_ms <= 3 * round_mid;
    int used;
    double x = speedup_of(pairs, use, n, &used);
    if (used < SESSION_PROBE_MIN)
        x = 0;
    int nb = 0;
    for (int b = 0; x > 0 && b + SESSION_PROBE_BLOCK <= n; b += SESSION_PROBE_BLOCK) {
        int m;
        double y = speedup_of(pairs + b, use + b, SESSION_PROBE_BLOCK, &m);
        if (m > 0 && y > 0)
            block[nb++] = y;
    }
    if (nb >= 2) {
        qsort(block, (size_t)nb, sizeof *block, tt_cmp_double);
        if (lo)
            *lo = quantile_of_sorted(block, nb, 0.25);
        if (hi)
            *hi = quantile_of_sorted(block, nb, 0.75);
    }
    free(use);
    free(block);
    return x;
}

/* Keeps one pair (a probe and the round after it). */
static void pairs_add(session *s, double probe_ms, double round_ms, int tokens)
{
    if (!s->pairs && !(s->pairs = calloc(1, sizeof *s->pairs)))
        return;   /* no figure; the turn goes on */
    struct session_pairs *P = s->pairs;
    if (P->n >= SESSION_PROBE_MAX)
        return;
    P->pair[P->n++] = (session_pair){.probe_ms = probe_ms, .round_ms = round_ms, .tokens = tokens};
    s->last.plain_probes = P->n;
}

double session_plain_speedup(const session *s, double *lo, double *hi)
{
    const struct session_pairs *P = s->pairs;
    bool ok = s->last.speculative && P;
    return session_speedup_of_pairs(ok ? P->pair : NULL, ok ? P->n : 0, lo, hi);
}

/* Whether the coming round gets a probe: every other round after the first (the round after a
 * probe completes its pair, spec_step) until SESSION_PROBE_MIN pairs, then while the probes' time
 * stays within SESSION_PROBE_SHARE of the turn's so far. A probe is SESSION_PROBE_STEPS plain
 * steps (probe_plain); with two, probing every round cost a speculative turn 85% more wall time
 * on the embedded pair; the user waits for it, though it stays out of tok/s. */
static bool probe_due(const session *s)
{
    const struct session_gen *g = s->gen;
    int n = s->pairs ? s->pairs->n : 0;
    if (!s->plain_probe || g->rounds < 1 || n >= SESSION_PROBE_MAX || g->held_probe_ms > 0)
        return false;
    if (n < SESSION_PROBE_MIN || g->generated < 1)
        return true;
    return s->last.probe_ms <= SESSION_PROBE_SHARE * (tt_now_ms() - g->t_first);
}

/* One speculative round: the produced tokens are appended and reported one event each, as a plain
 * step reports its token; the stop conditions are checked after every token. With plain_probe
 * a round after the first may begin with a probe (probe_due), paired (pairs_add) with the round
 * after it, which runs without one: the probe's plain steps leave the target's weights warm for
 * the round right after them (on 2 loaded cores its tokens cost 4% less CPU time than other
 * rounds' after a probe of two steps, 16% less after six), which a speculative run without probes
 * never finds, so pairing that round read "x plain" above alternated plain and speculative runs. */
static tt_status spec_step(session *s, session_event_fn fn, void *user, session_stop *stop,
                           tt_error *err)
{
    struct session_gen *g = s->gen;
    tt_status st;
    if (s->n_tokens - s->window_start > s->eng->n_ctx) {
        if ((st = resync(s, stop, err)) != TT_OK || *stop != SESSION_STOP_NONE) {
            if (st == TT_ERR_INTERRUPTED) {
                *stop = SESSION_STOP_INTERRUPTED;
                return TT_OK;
            }
            if (st != TT_OK)
                *stop = SESSION_STOP_ERROR;
            return st;
        }
    }
    int32_t eos = eos_id(s);
    int min_left = s->set.min_tokens - g->generated;
    spec_request req = {
        .key = g->spec_key,
        .pos = g->generated,
        .tokens = s->tokens + s->window_start,
        .n = s->n_tokens - s->window_start,
        .gamma = s->gamma,
        .max_tokens = s->set.max_new_tokens - g->generated,
        .stop_id = s->set.stop_at_eos ? session_end_id(s) : -1,
        .banned = eos,
        .n_banned = eos >= 0 && min_left > 0 ? min_left : 0,
        .lean = s->lean || s->snapshots_on_demand,
        .rebuildable = s->snapshots_on_demand && !s->lean,
    };
    rebuild_clear(s);
    if (req.rebuildable && !s->rebuild && !(s->rebuild = calloc(1, sizeof *s->rebuild))) {
        *stop = SESSION_STOP_ERROR;
        return tt_fail(err, TT_ERR_NOMEM, "session: out of memory");
    }
    double front_ms = g->idle_ms, probe_before_ms = -1, probe_fwd_ms = -1, w0 = tt_now_ms();
    bool warmed = warm_if_idle(s);
    double probe_ms = probe_due(s) ? probe_plain(s, warmed, &probe_before_ms, &probe_fwd_ms) : -1;
    double t_round = pair_clock_ms(s), w1 = tt_now_ms();
    st = spec_run_round(s->spec, s->eng, s->draft, &s->set.sampler, &req, err);
    double round_ms = pair_clock_ms(s) - t_round, w2 = tt_now_ms();
    if (st != TT_OK && recover_device(s, st, err)) {
        g->need_sync = true;   /* the next step re-prefills on the new engine and goes on */
        return TT_OK;
    }
    if (st != TT_OK) {
        *stop = SESSION_STOP_ERROR;
        return st;
    }
    g->need_sync = true;
    g->rounds++;
    const spec_round *R = spec_last_round(s->spec);
    char role = probe_ms > 0 ? 'P' : g->held_probe_ms > 0 ? 'R' : '-';
    if (probe_ms > 0)
        g->held_probe_ms = probe_ms;   /* this round ran warm: the next one completes the pair */
    else if (g->held_probe_ms > 0) {
        if (round_ms > 0)
            pairs_add(s, g->held_probe_ms, round_ms, R->n_out);
        g->held_probe_ms = 0;
    }
    round_trace_add(g, &(round_trace_row){
        .round = g->rounds, .pos = req.n, .n_out = R->n_out, .role = role, .warmed = warmed,
        .front_ms = front_ms, .probe_before_ms = probe_before_ms, .probe_ms = probe_ms,
        .round_ms = round_ms, .probe_wall_ms = probe_ms > 0 ? w1 - w0 : -1,
        .round_wall_ms = w2 - w1, .probe_fwd_ms = probe_fwd_ms,
        .draft_fwd_ms = R->draft_forward_ms, .verify_fwd_ms = R->verify_forward_ms});
    const spec_stats *S = spec_get_stats(s->spec);
    s->last.speculative = true;
    s->last.spec_rounds = S->rounds;
    s->last.drafted = S->drafted;
    s->last.accepted = S->accepted;
    s->last.spec_tokens = S->produced;
    s->last.draft_ms = S->draft_ms;
    s->last.target_ms = S->target_ms;
    if (s->gamma_adaptive)
        s->gamma = spec_tuner_update(&s->tuner, R);
    s->last.gamma = s->gamma;
    if (req.rebuildable)
        *s->rebuild = (struct session_rebuild){.kind = REBUILD_ROUND, .round = g->rounds};

    for (int i = 0; i < R->n_out; i++) {
        bool is_draft = i < R->n_accepted;
        if (!is_draft && R->rejected) {
            session_event rev = {.step = g->step, .token = R->draft[i].token,
                                 .origin = TOKEN_DRAFT_ACCEPTED, .snap = &R->draft_snap[i],
                                 .text = "", .round = g->rounds, .rejected = true,
                                 .draft = &R->draft[i], .draft_snap = &R->draft_snap[i],
                                 .partial = req.rebuildable, .row = i};
            if (!notify(s, fn, user, &rev)) {
                *stop = SESSION_STOP_INTERRUPTED;
                return TT_OK;
            }
        }
        token_origin origin = is_draft ? TOKEN_DRAFT_ACCEPTED
                            : R->rejected ? TOKEN_TARGET_RESAMPLE : TOKEN_BONUS;
        int32_t tok = R->out[i];
        const sampler_snapshot *snap = &R->target_snap[i];
        bool has_draft = i < R->n_draft;
        session_event ev = {.token = tok, .origin = origin, .snap = snap, .round = g->rounds,
                            .draft = has_draft ? &R->draft[i] : NULL,
                            .draft_snap = has_draft ? &R->draft_snap[i] : NULL,
                            .partial = req.rebuildable, .row = i};
        if ((st = produce(s, &ev, fn, user, stop, err)) != TT_OK)
            return st;
        if (*stop != SESSION_STOP_NONE)
            return TT_OK;
    }
    return TT_OK;
}

void session_gen_end(session *s, session_stop stop, session_event_fn fn, void *user)
{
    struct session_gen *g = s->gen;
    if (!g)
        return;
    note_front_gap(s);
    set_solo(s, false);   /* a peek or the next turn: the pool's own choice again */
    if (!g->out.stopped) {
        bool hit;
        session_event ev = {.token = -1, .flush = true};
        size_t before = g->out.emitted;
        char *stops[SESSION_MAX_STOPS + 1];
        int n_stops = gen_stops(s, stops);
        size_t show = out_push(&g->out, "", 0, true, stops, n_stops, &hit);
        if (show > 0 || g->pending_shift) {
            ev.text = g->out.buf + before;
            ev.text_len = show;
            g->out.emitted += show;
            ev.step = g->step++;
            notify(s, fn, user, &ev);
        }
    }
    double t_end = tt_now_ms();
    s->last.stop = stop;
    if (g->generated > 0) {
        s->last.decode_ms = t_end - g->t_first;
        double busy_ms = s->last.decode_ms - s->last.front_ms - s->last.probe_ms;
        if (g->generated > 1 && busy_ms > 0)
            s->last.decode_tok_s = (g->generated - 1) / (busy_ms / 1e3);
    }
    if (s->last.prefill_ms > 0)
        s->last.prefill_tok_s = s->last.prefilled_tokens / (s->last.prefill_ms / 1e3);
    if (s->pairs && s->pairs->n > 0) {
        s->last.plain_step_ms = median_of(s->pairs->pair, s->pairs->n, false);
        s->last.round_ms = median_of(s->pairs->pair, s->pairs->n, true);
    }
    round_trace_write(s, g);
    free(g->out.buf);
    free(g);
    s->gen = NULL;
}

tt_status session_generate(session *s, session_event_fn fn, void *user, tt_error *err)
{
    tt_status st = session_gen_begin(s, err);
    session_stop stop = s->last.stop;
    while (st == TT_OK && stop == SESSION_STOP_NONE)
        st = session_gen_step(s, -1, fn, user, &stop, err);
    if (st != TT_OK && stop == SESSION_STOP_NONE)
        stop = SESSION_STOP_ERROR;
    tt_error keep = s->last.error;
    if (st != TT_OK && err)
        keep = *err;
    session_gen_end(s, stop, fn, user);
    s->last.error = keep;
    return st == TT_ERR_INTERRUPTED ? TT_OK : st;
}

tt_status session_peek(session *s, sampler_snapshot *snap, tt_error *err)
{
    rebuild_clear(s);
    if (!s->gen) {
        if (s->n_tokens == 0)
            return tt_fail(err, TT_ERR_ARG, "nothing to run the model on");
        int reused, prefilled, dropped = 0;
        bool shifted = false;
        tt_status st = sync_cache(s, &reused, &prefilled, &shifted, &dropped, err);
        if (st != TT_OK)
            return st;
    }
    if (s->gen && s->gen->need_sync) {
        session_stop stop = SESSION_STOP_NONE;
        tt_status st = resync(s, &stop, err);
        if (st != TT_OK)
            return st;
        if (stop != SESSION_STOP_NONE)
            return tt_fail(err, TT_ERR_CONTEXT, "the context is full and context shifting is off");
        s->gen->need_sync = false;
    }
    int32_t eos = eos_id(s);
    int generated = s->gen ? s->gen->generated : 0;
    sampler_context ctx = {
        .history = s->tokens + s->window_start,
        .n_history = s->n_tokens - s->window_start,
        .banned = (generated < s->set.min_tokens && eos >= 0) ? eos : -1,
    };
    return sampler_apply(s->smp, &s->set.sampler, engine_logits(s->eng, s->eng->n_logits - 1),
                         &ctx, snap, err);
}

int32_t session_eos_id(const session *s)
{
    return eos_id(s);
}

int32_t session_end_id(const session *s)
{
    return s->chat.spec.format != CHAT_RAW && s->n_eot > 0 ? s->eot[0] : eos_id(s);
}

/* ---------------------------------------------------------------------------------------------
 * Editing the past (the cache is brought back in line lazily, reusing the common prefix) */

/* After the conversation shrank: a window that started at or past its end starts again
 * keep_count tokens before the end, so there is context to run the model on. */
static void window_after_truncate(session *s)
{
    int n = s->n_tokens;
    if (s->window_start >= n) {
        int keep = keep_count(s);
        s->window_start = n > keep ? n - keep : 0;
    }
}

static void truncate_to(session *s, int n)
{
    if (n < 0)
        n = 0;
    if (n >= s->n_tokens)
        return;
    s->n_tokens = n;
    while (s->n_turns > 0 && s->turn_start[s->n_turns - 1] >= n)
        s->n_turns--;
    window_after_truncate(s);
}

int session_undo_turn(session *s)
{
    if (s->n_turns == 0)
        return 0;
    int before = s->n_tokens;
    truncate_to(s, s->turn_start[s->n_turns - 1]);
    return before - s->n_tokens;
}

int session_undo_tokens(session *s, int n)
{
    int before = s->n_tokens;
    truncate_to(s, s->n_tokens - (n < 0 ? 0 : n));
    return before - s->n_tokens;
}

int session_drop_reply(session *s)
{
    if (s->n_turns == 0)
        return 0;
    int i = s->turn_start[s->n_turns - 1];
    while (i < s->n_tokens && s->info[i].origin == TOKEN_USER)
        i++;
    int before = s->n_tokens;
    if (i < s->n_tokens) {
        s->n_tokens = i;   /* the turn stays: its reply is generated again */
        window_after_truncate(s);
    }
    return before - s->n_tokens;
}

void session_reset(session *s)
{
    s->n_tokens = 0;
    s->n_turns = 0;
    s->window_start = 0;
    engine_truncate(s->eng, 0);
    if (s->draft)
        engine_truncate(s->draft, 0);
}

tt_status session_set_tokens(session *s, const int32_t *ids, const token_info *info, int n,
                             tt_error *err)
{
    int V = s->model->config.V;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return tt_fail(err, TT_ERR_ARG, "token %d: id %d is outside the vocabulary [0, %d)",
                           i, (int)ids[i], V);
    if (grow(s, n + 1, err) != TT_OK)
        return TT_ERR_NOMEM;
    if (n > 0)   /* ids may be NULL when n is 0 (an empty file loaded with /load) */
        memcpy(s->tokens, ids, (size_t)n * sizeof *ids);
    s->n_tokens = n;
    s->n_turns = 0;
    for (int i = 0; i < n; i++) {
        s->info[i] = info ? info[i] : (token_info){.origin = TOKEN_USER, .p = 1.0f, .turn = 0};
        if (i == 0 || s->info[i].turn != s->info[i - 1].turn)
            s->turn_start[s->n_turns++] = i;
        s->info[i].turn = s->n_turns - 1;
    }
    int keep = keep_count(s);
    s->window_start = n > s->eng->n_ctx ? n - keep : 0;
    return TT_OK;
}

char *session_text(const session *s, int from, int to)
{
    if (from < 0)
        from = 0;
    if (to > s->n_tokens)
        to = s->n_tokens;
    char *out = NULL;
    size_t len = 0;
    if (from >= to || tokenizer_decode(s->tok, s->tokens + from, to - from, &out, &len, NULL)
                          != TT_OK)
        return strdup("");
    return out;
}
