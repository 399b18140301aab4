/* check_session.c: the conversation layer over a fake engine that counts what it computes and
 * whose logits depend on everything in its cache: turns prefill only new tokens, undo / regen /
 * load reuse the longest common prefix (reused and prefilled counts asserted), the cache stays
 * consistent (a reused cache gives the same tokens as a fresh one), stop strings, end of text,
 * context shifts, Ctrl-C, forced steps and peeking; chat mode (turns wrapped in the format, replies
 * ending at the end-of-turn token, the cache still reused). */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/clock.h"
#include "core/engine/engine.h"
#include "core/model/model.h"
#include "core/model/modelgen.h"
#include "core/tokenizer/tokenizer.h"
#include "core/session/session.h"
#include "tests/testutil.h"

#define VOCAB 512
#define EOT (VOCAB - 1)     /* the synthesized tokenizer puts <|endoftext|> last */
#define MAX_CTX 1024

/* ---------------------------------------------------------------------------------------------
 * The fake engine: the favoured next token is a hash of the whole cached prefix, so a cache that
 * holds anything other than the conversation changes the output. */

typedef struct {
    engine base;
    int32_t kv[MAX_CTX];       /* token at each cached position */
    uint64_t h[MAX_CTX];       /* hash of kv[0..pos] */
    float logits[MAX_CTX * VOCAB];
    long computed;             /* positions forwarded, all calls */
    long calls;
    const int32_t *script;     /* when set: the token after position p is script[p + 1 - base] */
    int script_n, script_base;
    volatile sig_atomic_t *interrupt_after;   /* set *this after the first forward */
    long fail_at_call;         /* > 0: that forward call (1-based) and all later ones fail with
                                  TT_ERR_DEVICE, like a sticky GPU error */
    double spin_ms;            /* > 0: each forward call takes this long (a slower engine) */
    int warms;                 /* engine_warm calls */
    bool solo;                 /* engine_set_solo */
    int solo_forwards;         /* forwards run while solo */
} fake_engine;

static uint64_t mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 29);
}

static void fake_row(fake_engine *f, int p, float *row)
{
    uint64_t h = f->h[p];
    int32_t fav = (int32_t)(h % (VOCAB - 1));   /* never EOT unless scripted */
    int k = p + 1 - f->script_base;
    if (f->script && k >= 0 && k < f->script_n)
        fav = f->script[k];
    for (int v = 0; v < VOCAB; v++)
        row[v] = (float)(mix(h, (uint64_t)v) % 1000) / 1000.0f;   /* [0, 1) noise */
    row[fav] = f->script ? 50.0f : 4.0f;
}

static tt_status fake_forward(engine *e, const int32_t *ids, int n, int pos, bool all,
                              tt_error *err)
{
    fake_engine *f = (fake_engine *)e;
    for (double t0 = tt_now_ms(); f->spin_ms > 0 && tt_now_ms() - t0 < f->spin_ms;)
        ;
    if (f->fail_at_call > 0 && f->calls + 1 >= f->fail_at_call) {
        f->calls++;
        return tt_fail(err, TT_ERR_DEVICE, "fake device: illegal address");
    }
    for (int i = 0; i < n; i++) {
        int p = pos + i;
        f->kv[p] = ids[i];
        f->h[p] = mix(p ? f->h[p - 1] : 12345, (uint64_t)ids[i]);
    }
    f->computed += n;
    f->calls++;
    f->solo_forwards += f->solo;
    e->n_past = pos + n;
    if (all) {
        for (int i = 0; i < n; i++)
            fake_row(f, pos + i, f->logits + (size_t)i * VOCAB);
        e->n_logits = n;
    } else {
        fake_row(f, pos + n - 1, f->logits);
        e->n_logits = 1;
    }
    if (f->interrupt_after)
        *f->interrupt_after = 1;
    return TT_OK;
}

/* A warm-up (engine_warm) takes the time it is given, as the CPU engine's does. */
static void fake_warm(engine *e, double ms)
{
    fake_engine *f = (fake_engine *)e;
    f->warms++;
    for (double t0 = tt_now_ms(); tt_now_ms() - t0 < ms;)
        ;
}

/* Solo steps are counted where a forward runs while it is set. */
static void fake_set_solo(engine *e, bool solo)
{
    ((fake_engine *)e)->solo = solo;
}

static const engine_ops fake_ops = {"fake", fake_forward, tu_fake_truncate, tu_fake_destroy,
                                   NULL, fake_warm, fake_set_solo};

/* ---------------------------------------------------------------------------------------------
 * Fixtures */

static char *tok_dir;
static tokenizer *tok;
static model M;
static fake_engine *F;
static session S;

static void tokenizer_setup(void)
{
    tok_dir = tu_tmpdir();
    tt_error err = {0};
    ck_assert_msg(modelgen_write_tokenizer(tok_dir, VOCAB, &err) == TT_OK, "%s", err.msg);
    ck_assert_msg(tokenizer_load_dir(tok_dir, &tok, &err) == TT_OK, "%s", err.msg);
    ck_assert_int_eq(tokenizer_eot_id(tok), EOT);
}

static void tokenizer_teardown(void)
{
    tokenizer_free(tok);
    tu_tmpdir_free(tok_dir);
}

static void make_session(int n_ctx, bool greedy, int max_new)
{
    memset(&M, 0, sizeof M);
    M.name = "fake";
    M.dir = "fake";
    M.config.V = VOCAB;
    M.config.maxT = n_ctx;
    M.config.bos_id = -1;
    M.config.n_eos = 0;
    M.gen.n_eos = 0;
    F = calloc(1, sizeof *F);
    ck_assert_ptr_nonnull(F);
    F->base.ops = &fake_ops;
    F->base.model = &M;
    F->base.config = &M.config;
    F->base.n_ctx = n_ctx;
    F->base.logits = F->logits;
    tu_session_init(&S, &M, tok, &F->base, 1, max_new, greedy);
}

static void session_setup(void)
{
    make_session(64, true, 5);
}

static void session_teardown(void)
{
    session_free(&S);
    engine_free(&F->base);
    F = NULL;
}

/* For tests that need another context size, sampling mode or token budget than the fixture's. */
static void remake_session(int n_ctx, bool greedy, int max_new)
{
    session_teardown();
    make_session(n_ctx, greedy, max_new);
}

/* ---------------------------------------------------------------------------------------------
 * Helpers */

typedef struct {
    char text[4096];
    size_t len;
    int events, shifts, shift_dropped, stop_after;
    volatile sig_atomic_t *flag;   /* set when events reaches stop_after */
    bool refuse;                   /* return false at stop_after */
} collected;

static bool collect(void *user, const session_event *ev)
{
    collected *c = user;
    if (ev->text_len && c->len + ev->text_len < sizeof c->text) {
        memcpy(c->text + c->len, ev->text, ev->text_len);
        c->len += ev->text_len;
        c->text[c->len] = 0;
    }
    if (ev->context_shifted) {
        c->shifts++;
        c->shift_dropped += ev->shift_dropped;
    }
    if (!ev->flush)
        c->events++;
    if (c->stop_after && c->events == c->stop_after) {
        if (c->flag)
            *c->flag = 1;
        if (c->refuse)
            return false;
    }
    return true;
}

static void add_text(const char *text)
{
    tt_error err = {0};
    ck_assert_int_eq(session_add_user_text(&S, text, strlen(text), &err), TT_OK);
}

static void generate(collected *c)
{
    tt_error err = {0};
    ck_assert_msg(session_generate(&S, c ? collect : NULL, c, &err) == TT_OK, "%s", err.msg);
}

/* The cache holds exactly the window's tokens at its positions. */
static void assert_cache_consistent(void)
{
    int n = F->base.n_past;
    ck_assert_int_le(n, S.n_tokens - S.window_start);
    for (int i = 0; i < n; i++)
        ck_assert_msg(F->kv[i] == S.tokens[S.window_start + i], "cache position %d holds %d, "
                      "the conversation %d", i, F->kv[i], S.tokens[S.window_start + i]);
    ck_assert_int_eq(session_cached_prefix(&S), n);
}

/* The tokens a fresh session (empty cache) generates after the same conversation. */
static void fresh_continuation(const int32_t *ids, const token_info *info, int n, int max_new,
                               int32_t *out)
{
    session saved = S;
    fake_engine *saved_f = F;
    make_session(64, true, max_new);
    tt_error err = {0};
    ck_assert_int_eq(session_set_tokens(&S, ids, info, n, &err), TT_OK);
    generate(NULL);
    ck_assert_int_eq(S.last.reused_tokens, 0);
    memcpy(out, S.tokens + n, (size_t)max_new * sizeof *out);
    session_free(&S);
    engine_free(&F->base);
    S = saved;
    F = saved_f;
}

/* ---------------------------------------------------------------------------------------------
 * Turns and prefix reuse */

START_TEST(first_turn_prefills_the_prompt_and_computes_each_token_once)
{
    add_text("Hello world");
    int n = S.n_tokens;
    ck_assert_int_gt(n, 1);
    generate(NULL);
    ck_assert_int_eq(S.last.stop, SESSION_STOP_MAX_TOKENS);
    ck_assert_int_eq(S.last.prompt_tokens, n);
    ck_assert_int_eq(S.last.reused_tokens, 0);
    ck_assert_int_eq(S.last.prefilled_tokens, n);
    ck_assert_int_eq(S.last.generated_tokens, 5);
    ck_assert_int_eq(S.n_tokens, n + 5);
    /* The prompt once, then each generated token but the last (nothing needs its logits yet). */
    ck_assert_int_eq(F->computed, n + 4);
    ck_assert_int_eq(S.n_turns, 1);
    for (int i = n; i < S.n_tokens; i++) {
        ck_assert_int_eq(S.info[i].origin, TOKEN_SAMPLED);
        ck_assert_int_eq(S.info[i].turn, 0);
    }
    assert_cache_consistent();
}
END_TEST

START_TEST(second_turn_prefills_only_its_new_tokens)
{
    add_text("Hello world");
    generate(NULL);
    int n1 = S.n_tokens;
    long before = F->computed;
    add_text(" again");
    int m = S.n_tokens - n1;
    generate(NULL);
    ck_assert_int_eq(S.last.prompt_tokens, n1 + m);
    ck_assert_int_eq(S.last.reused_tokens, n1 - 1);
    ck_assert_int_eq(S.last.prefilled_tokens, m + 1);
    ck_assert_int_eq(F->computed - before, (m + 1) + 4);
    ck_assert_int_eq(S.n_turns, 2);
    ck_assert_int_eq(S.turn_start[1], n1);
    assert_cache_consistent();
}
END_TEST

START_TEST(undo_turn_reuses_the_cache_and_gives_what_a_fresh_cache_gives)
{
    add_text("Hello world");
    generate(NULL);
    int n1 = S.n_tokens;
    add_text(" again");
    generate(NULL);
    int before_undo = S.n_tokens;
    ck_assert_int_eq(session_undo_turn(&S), before_undo - n1);
    ck_assert_int_eq(S.n_tokens, n1);
    ck_assert_int_eq(S.n_turns, 1);
    int32_t ids[64];
    token_info info[64];
    memcpy(ids, S.tokens, (size_t)n1 * sizeof *ids);
    memcpy(info, S.info, (size_t)n1 * sizeof *info);
    long before = F->computed;
    generate(NULL);   /* continue the first turn */
    ck_assert_int_eq(S.last.reused_tokens, n1 - 1);
    ck_assert_int_eq(S.last.prefilled_tokens, 1);
    ck_assert_int_eq(F->computed - before, 1 + 4);
    int32_t fresh[5];
    fresh_continuation(ids, info, n1, 5, fresh);
    ck_assert(memcmp(S.tokens + n1, fresh, sizeof fresh) == 0);
    assert_cache_consistent();
}
END_TEST

START_TEST(undo_of_n_tokens_keeps_the_rest_cached)
{
    add_text("Hello world");
    generate(NULL);
    int n = S.n_tokens;
    ck_assert_int_eq(session_undo_tokens(&S, 3), 3);
    ck_assert_int_eq(S.n_tokens, n - 3);
    ck_assert_int_eq(session_undo_tokens(&S, 1000), n - 3);   /* clamps to what there is */
    ck_assert_int_eq(S.n_tokens, 0);
    ck_assert_int_eq(S.n_turns, 0);
    add_text("Hello world");
    generate(NULL);
    session_undo_tokens(&S, 2);
    int left = S.n_tokens;
    generate(NULL);
    ck_assert_int_eq(S.last.reused_tokens, left - 1);
    ck_assert_int_eq(S.last.prefilled_tokens, 1);
    assert_cache_consistent();
}
END_TEST

START_TEST(regen_reuses_the_prompt_and_repeats_a_greedy_reply)
{
    add_text("Hello world");
    int prompt = S.n_tokens;
    generate(NULL);
    int32_t first[5];
    memcpy(first, S.tokens + prompt, sizeof first);
    ck_assert_int_eq(session_drop_reply(&S), 5);
    ck_assert_int_eq(S.n_tokens, prompt);
    ck_assert_int_eq(session_drop_reply(&S), 0);   /* nothing left to drop */
    long before = F->computed;
    generate(NULL);
    ck_assert_int_eq(S.last.reused_tokens, prompt - 1);
    ck_assert_int_eq(S.last.prefilled_tokens, 1);
    ck_assert_int_eq(F->computed - before, 1 + 4);
    ck_assert(memcmp(S.tokens + prompt, first, sizeof first) == 0);
    ck_assert_int_eq(S.n_turns, 1);
}
END_TEST

START_TEST(regen_with_the_same_seed_repeats_a_sampled_reply)
{
    remake_session(64, false, 6);
    add_text("Hello world");
    int prompt = S.n_tokens;
    session_set_seed(&S, 99);
    generate(NULL);
    int32_t first[6];
    memcpy(first, S.tokens + prompt, sizeof first);
    session_drop_reply(&S);
    generate(NULL);   /* the stream moved on: a different draw sequence */
    ck_assert_int_eq(S.n_tokens, prompt + 6);
    ck_assert_msg(memcmp(S.tokens + prompt, first, sizeof first) != 0,
                  "regen without reseeding repeated the reply");
    session_drop_reply(&S);
    session_set_seed(&S, 99);
    generate(NULL);
    ck_assert(memcmp(S.tokens + prompt, first, sizeof first) == 0);
}
END_TEST

START_TEST(loading_tokens_keeps_the_longest_common_prefix)
{
    add_text("Hello world");
    generate(NULL);
    add_text(" again");
    generate(NULL);
    int n = S.n_tokens;
    int32_t ids[64];
    memcpy(ids, S.tokens, (size_t)n * sizeof *ids);
    int k = 7;
    ids[k] = (ids[k] + 1) % (VOCAB - 1);   /* diverge at token k */
    tt_error err = {0};
    ck_assert_int_eq(session_set_tokens(&S, ids, NULL, n, &err), TT_OK);
    ck_assert_int_eq(session_cached_prefix(&S), k);
    ck_assert_int_eq(S.n_turns, 1);
    generate(NULL);
    ck_assert_int_eq(S.last.reused_tokens, k);
    ck_assert_int_eq(S.last.prefilled_tokens, n - k);
    assert_cache_consistent();
    /* Out-of-vocabulary ids are refused and change nothing. */
    int now = S.n_tokens;
    ids[0] = VOCAB;
    ck_assert_int_eq(session_set_tokens(&S, ids, NULL, n, &err), TT_ERR_ARG);
    ck_assert_int_eq(S.n_tokens, now);
}
END_TEST

START_TEST(reset_empties_the_cache)
{
    add_text("Hello world");
    generate(NULL);
    session_reset(&S);
    ck_assert_int_eq(S.n_tokens, 0);
    ck_assert_int_eq(S.n_turns, 0);
    ck_assert_int_eq(F->base.n_past, 0);
    add_text("Hello world");
    generate(NULL);
    ck_assert_int_eq(S.last.reused_tokens, 0);
}
END_TEST

/* /model: the session moves onto another model's engine with an empty conversation and the
 * settings it had; refused, with nothing changed, while a generation is open. */
START_TEST(set_model_clears_the_conversation_and_keeps_the_settings)
{
    tt_error err = {0};
    ck_assert_int_eq(session_add_stop(&S, "zz", &err), TT_OK);
    add_text("Hello world");
    generate(NULL);
    model M2 = M;
    M2.name = "fake2";
    fake_engine *F2 = calloc(1, sizeof *F2);
    ck_assert_ptr_nonnull(F2);
    F2->base.ops = &fake_ops;
    F2->base.model = &M2;
    F2->base.config = &M2.config;
    F2->base.n_ctx = F->base.n_ctx;
    F2->base.logits = F2->logits;
    ck_assert_int_eq(session_gen_begin(&S, &err), TT_OK);
    ck_assert_int_eq(session_set_model(&S, &M2, tok, &F2->base, &err), TT_ERR_ARG);
    ck_assert_ptr_eq(S.eng, &F->base);
    session_gen_end(&S, SESSION_STOP_INTERRUPTED, NULL, NULL);
    int n = S.n_tokens;
    ck_assert_int_gt(n, 0);
    ck_assert_int_eq(session_set_model(&S, &M2, tok, &F2->base, &err), TT_OK);
    ck_assert_ptr_eq(S.model, &M2);
    ck_assert_ptr_eq(S.eng, &F2->base);
    ck_assert_int_eq(S.n_tokens, 0);
    ck_assert_int_eq(S.n_turns, 0);
    ck_assert_int_eq(S.last.generated_tokens, 0);
    ck_assert_int_eq(S.set.n_stops, 1);
    ck_assert_str_eq(S.set.stops[0], "zz");
    add_text("Hello world");
    generate(NULL);
    ck_assert_int_eq(S.last.reused_tokens, 0);
    ck_assert_int_gt(F2->base.n_past, 0);
    ck_assert_int_eq(session_set_model(&S, &M, tok, &F->base, &err), TT_OK);
    engine_free(&F2->base);
}
END_TEST

START_TEST(an_empty_conversation_starts_from_end_of_text)
{
    generate(NULL);
    ck_assert_int_eq(S.tokens[0], EOT);
    ck_assert_int_eq(S.info[0].origin, TOKEN_USER);
    ck_assert_int_eq(S.n_tokens, 6);
    /* An empty turn continues the text; undoing it drops only what it generated. */
    add_text("");
    ck_assert_int_eq(S.n_turns, 2);
    generate(NULL);
    ck_assert_int_eq(S.n_tokens, 11);
    ck_assert_int_eq(session_undo_turn(&S), 5);
    ck_assert_int_eq(S.n_tokens, 6);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Stops */

static int32_t byte_id(unsigned char b)
{
    /* GPT-2's byte order (the synthesized tokenizer's ids 0..255). */
    if (b >= 33 && b <= 126)
        return b - 33;
    if (b >= 161 && b <= 172)
        return 94 + (b - 161);
    if (b >= 174)
        return 106 + (b - 174);
    if (b <= 32)
        return 188 + b;
    if (b >= 127 && b <= 160)
        return 221 + (b - 127);
    return 255;
}

static void script(const char *text, int32_t *buf)
{
    int n = (int)strlen(text);
    for (int i = 0; i < n; i++)
        buf[i] = byte_id((unsigned char)text[i]);
    F->script = buf;
    F->script_n = n;
    F->script_base = S.n_tokens;
}

/* A reply to "Q" scripted as "ab\n\ncd", at most max_new tokens, with the stop string stop; the
 * text shown into c. */
static void generate_scripted_with_stop(int max_new, const char *stop, collected *c)
{
    remake_session(64, true, max_new);
    tt_error err = {0};
    ck_assert_int_eq(session_add_stop(&S, stop, &err), TT_OK);
    add_text("Q");
    static int32_t buf[32];      /* the fake engine reads the script until the next session */
    script("ab\n\ncd", buf);
    generate(c);
}

START_TEST(stop_string_ends_the_reply_before_it)
{
    collected c = {0};
    generate_scripted_with_stop(20, "\n\n", &c);
    ck_assert_int_eq(S.last.stop, SESSION_STOP_STRING);
    ck_assert_str_eq(c.text, "ab");
    ck_assert_int_eq(S.last.generated_tokens, 4);
}
END_TEST

START_TEST(held_back_text_is_released_when_the_stop_does_not_complete)
{
    collected c = {0};
    generate_scripted_with_stop(6, "\n\nX", &c);
    ck_assert_int_eq(S.last.stop, SESSION_STOP_MAX_TOKENS);
    ck_assert_str_eq(c.text, "ab\n\ncd");
}
END_TEST

START_TEST(end_of_text_stops_generation)
{
    remake_session(64, true, 20);
    add_text("Q");
    int32_t buf[4] = {byte_id('a'), EOT};
    F->script = buf;
    F->script_n = 2;
    F->script_base = S.n_tokens;
    collected c = {0};
    generate(&c);
    ck_assert_int_eq(S.last.stop, SESSION_STOP_EOS);
    ck_assert_int_eq(S.last.generated_tokens, 2);
    ck_assert_str_eq(c.text, "a");
    ck_assert_int_eq(S.tokens[S.n_tokens - 1], EOT);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * A full context */

START_TEST(a_full_context_shifts_and_generation_goes_on)
{
    remake_session(16, true, 40);
    add_text("Hello world");
    int prompt = S.n_tokens;
    collected c = {0};
    generate(&c);
    ck_assert_int_eq(S.last.stop, SESSION_STOP_MAX_TOKENS);
    ck_assert_int_eq(S.n_tokens, prompt + 40);
    ck_assert_int_ge(S.last.context_shifts, 1);
    ck_assert_int_eq(c.shifts, S.last.context_shifts);
    ck_assert_int_gt(c.shift_dropped, 0);
    ck_assert_int_gt(S.window_start, 0);
    ck_assert_int_le(S.n_tokens - S.window_start, 16);
    assert_cache_consistent();
}
END_TEST

START_TEST(a_full_context_without_shifting_stops)
{
    remake_session(16, true, 40);
    S.set.context_shift = false;
    add_text("Hello world");
    generate(NULL);
    ck_assert_int_eq(S.last.stop, SESSION_STOP_CONTEXT);
    ck_assert_int_le(S.n_tokens, 17);
    ck_assert_int_eq(S.window_start, 0);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Ctrl-C */

START_TEST(interrupt_stops_after_the_current_token_and_keeps_the_cache_consistent)
{
    static volatile sig_atomic_t flag;
    flag = 0;
    remake_session(64, true, 30);
    S.interrupt = &flag;
    add_text("Hello world");
    collected c = {.stop_after = 3, .flag = &flag};
    generate(&c);
    ck_assert_int_eq(S.last.stop, SESSION_STOP_INTERRUPTED);
    ck_assert_int_eq(S.last.generated_tokens, 3);
    assert_cache_consistent();
    int n = S.n_tokens;
    flag = 0;
    add_text(" more");
    generate(NULL);
    ck_assert_int_eq(S.last.reused_tokens, n);
    ck_assert_int_eq(S.last.stop, SESSION_STOP_MAX_TOKENS);
}
END_TEST

START_TEST(a_callback_can_stop_the_generation)
{
    add_text("Hello world");
    collected c = {.stop_after = 2, .refuse = true};
    generate(&c);
    ck_assert_int_eq(S.last.stop, SESSION_STOP_INTERRUPTED);
    ck_assert_int_eq(S.last.generated_tokens, 2);
    assert_cache_consistent();
}
END_TEST

/* A front end that takes 10 ms over each event (a pacing hold, or a full draw) without telling
 * the session anything. */
static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static bool hold_each_token(void *user, const session_event *ev)
{
    int *events = user;
    if (ev->flush)
        return true;
    ++*events;
    sleep_ms(10);
    return true;
}

START_TEST(the_front_ends_time_in_callbacks_is_left_out_of_the_decode_speed)
{
    remake_session(64, true, 10);
    tt_error err = {0};
    int events = 0;
    add_text("Hello");
    ck_assert_int_eq(session_generate(&S, hold_each_token, &events, &err), TT_OK);
    ck_assert_int_eq(S.last.generated_tokens, 10);
    ck_assert_int_eq(events, 10);
    ck_assert_double_ge(S.last.front_ms, 90);   /* the 9 or 10 holds inside the decode window */
    ck_assert_double_le(S.last.front_ms, S.last.decode_ms);
    ck_assert_double_ge(S.last.decode_ms, 90);
    /* the fake engine takes microseconds: the speed is the engine's, far above 100 tok/s */
    ck_assert_double_gt(S.last.decode_tok_s, 500);
}
END_TEST

START_TEST(the_front_ends_time_between_steps_is_left_out_of_the_decode_speed)
{
    remake_session(64, true, 5);
    tt_error err = {0};
    add_text("Hello");
    ck_assert_int_eq(session_gen_begin(&S, &err), TT_OK);
    session_stop stop = SESSION_STOP_NONE;
    while (stop == SESSION_STOP_NONE) {
        ck_assert_int_eq(session_gen_step(&S, -1, NULL, NULL, &stop, &err), TT_OK);
        sleep_ms(10);   /* drawing, or a person pressing Enter in step mode */
    }
    session_gen_end(&S, stop, NULL, NULL);
    ck_assert_int_eq(S.last.generated_tokens, 5);
    ck_assert_double_ge(S.last.front_ms, 40);
    ck_assert_double_gt(S.last.decode_tok_s, 500);
}
END_TEST

START_TEST(an_engine_the_front_end_held_idle_is_warmed_before_its_next_step)
{
    remake_session(64, true, 6);
    tt_error err = {0};
    int events = 0;
    add_text("Hello");
    ck_assert_int_eq(session_generate(&S, NULL, NULL, &err), TT_OK);
    ck_assert_int_eq(F->warms, 0);             /* no hold: no warm-up, no solo step */
    ck_assert_int_eq(S.last.warmups, 0);
    ck_assert_int_eq(F->solo_forwards, 0);
    int32_t plain[6];
    memcpy(plain, S.tokens + S.n_tokens - 6, sizeof plain);
    session_reset(&S);
    add_text("Hello");
    ck_assert_int_eq(session_generate(&S, hold_each_token, &events, &err), TT_OK);
    /* 10 ms holds after each of the 6 tokens; the 5 forwards after them each come warmed, and
     * run solo; the turn over, the engine is no longer solo */
    ck_assert_int_eq(F->warms, 5);
    ck_assert_int_eq(S.last.warmups, 5);
    ck_assert_int_eq(F->solo_forwards, 5);
    ck_assert(!F->solo);
    ck_assert_mem_eq(S.tokens + S.n_tokens - 6, plain, sizeof plain);
    /* the warm-ups (1.5 ms each on the fake) are the front end's time, not the engine's */
    ck_assert_double_gt(S.last.decode_tok_s, 500);
}
END_TEST

START_TEST(an_engine_too_large_for_the_caches_keeps_its_threads_after_a_hold)
{
    remake_session(64, true, 6);
    F->base.weight_bytes = SESSION_SOLO_MAX_BYTES + 1;  /* streamed from memory: two threads pay */
    tt_error err = {0};
    int events = 0;
    add_text("Hello");
    ck_assert_int_eq(session_generate(&S, hold_each_token, &events, &err), TT_OK);
    ck_assert_int_eq(F->warms, 5);             /* still warmed after each hold */
    ck_assert_int_eq(F->solo_forwards, 0);     /* but never on one thread */
    session_reset(&S);
    F->base.weight_bytes = SESSION_SOLO_MAX_BYTES; /* at the limit: solo, as a small model */
    add_text("Hello");
    ck_assert_int_eq(session_generate(&S, hold_each_token, &events, &err), TT_OK);
    ck_assert_int_eq(F->solo_forwards, 5);
}
END_TEST

/* One turn of max_new tokens on an engine that takes spin_ms per forward; the held front end
 * sleeps 10 ms per event. Returns the decode speed. */
static double turn_speed(bool held, int max_new)
{
    tt_error err = {0};
    int events = 0;
    S.set.max_new_tokens = max_new;
    add_text(" and");
    ck_assert_int_eq(session_generate(&S, held ? hold_each_token : NULL, &events, &err), TT_OK);
    ck_assert_int_eq(S.last.generated_tokens, max_new);
    return S.last.decode_tok_s;
}

START_TEST(a_paced_turn_reports_the_speed_of_an_unpaced_one)
{
    remake_session(MAX_CTX, true, 8);
    F->spin_ms = 2;   /* ~500 tok/s: slow enough that a 10 ms hold would show five times over */
    double plain = turn_speed(false, 8), held = turn_speed(true, 8);
    double plain2 = turn_speed(false, 8), held2 = turn_speed(true, 8);
    /* the better of two against the better of two. Counting the holds would give a sixth of the
     * speed; no upper bound: on a loaded machine the scheduler favours a process that sleeps, so
     * the held turn's spins may be preempted less than the unpaced turn's */
    double a = plain > plain2 ? plain : plain2, b = held > held2 ? held : held2;
    ck_assert_msg(b > 0.5 * a, "paced %.0f tok/s against unpaced %.0f", b, a);
}
END_TEST

typedef struct {
    int n;
    int32_t tok[64];
    float p[64];
    int max_top;
} snaps;

static bool keep_snaps(void *user, const session_event *ev)
{
    snaps *c = user;
    if (ev->flush || !ev->snap || c->n == 64)
        return true;
    c->tok[c->n] = ev->token;
    c->p[c->n++] = ev->snap->token_p;
    c->max_top = ev->snap->n_top > c->max_top ? ev->snap->n_top : c->max_top;
    return true;
}

START_TEST(lean_steps_give_the_same_tokens_and_probabilities)
{
    snaps full = {0}, lean = {0};
    for (int v = 0; v < 2; v++) {
        remake_session(64, false, 30);
        S.set.sampler.temperature = 0.8f;
        S.set.sampler.top_k = 5;
        S.lean = v == 1;
        add_text("Hello");
        tt_error err = {0};
        ck_assert_int_eq(session_generate(&S, keep_snaps, v ? &lean : &full, &err), TT_OK);
    }
    ck_assert_int_eq(full.n, 30);
    ck_assert_int_eq(lean.n, full.n);
    for (int i = 0; i < full.n; i++) {
        ck_assert_int_eq(lean.tok[i], full.tok[i]);
        ck_assert_float_eq(lean.p[i], full.p[i]);
    }
    ck_assert_int_gt(full.max_top, 0);
    ck_assert_int_eq(lean.max_top, 0);            /* nobody shows them: no top list computed */
}
END_TEST

START_TEST(interrupt_during_prefill_leaves_a_consistent_prefix)
{
    static volatile sig_atomic_t flag;
    flag = 0;
    remake_session(MAX_CTX, true, 5);
    S.interrupt = &flag;
    char text[2048];
    for (int i = 0; i < 600; i++)
        text[i] = (char)('a' + i % 26);
    text[600] = 0;
    add_text(text);
    ck_assert_int_gt(S.n_tokens, 256);   /* more than one prefill chunk */
    F->interrupt_after = &flag;          /* Ctrl-C during the first chunk */
    tt_error err = {0};
    ck_assert_int_eq(session_gen_begin(&S, &err), TT_ERR_INTERRUPTED);
    ck_assert_int_eq(S.last.stop, SESSION_STOP_INTERRUPTED);
    session_gen_end(&S, SESSION_STOP_INTERRUPTED, NULL, NULL);
    ck_assert_int_lt(F->base.n_past, S.n_tokens);
    assert_cache_consistent();
    /* The next try picks up where the prefill stopped. */
    F->interrupt_after = NULL;
    flag = 0;
    int had = F->base.n_past;
    generate(NULL);
    ck_assert_int_eq(S.last.reused_tokens, had);
    ck_assert_int_eq(S.last.prefilled_tokens, S.last.prompt_tokens - had);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Step mode and peeking */

/* ---------------------------------------------------------------------------------------------
 * Chat mode */

#define IM_START 500   /* the fake vocabulary's stand-ins for ChatML's special tokens */
#define IM_END 501

static int32_t chatml_special(void *user, const char *text, size_t len)
{
    (void)user;
    if (len == 12 && memcmp(text, "<|im_start|>", 12) == 0)
        return IM_START;
    if (len == 10 && memcmp(text, "<|im_end|>", 10) == 0)
        return IM_END;
    return -1;
}

static void set_chatml(session_special_fn special, int32_t bos)
{
    session_chat chat = {.spec = chat_spec_of(CHAT_CHATML), .special = special, .bos_id = bos};
    tt_error err = {0};
    ck_assert_msg(session_set_chat(&S, &chat, &err) == TT_OK, "%s", err.msg);
}

/* ids[*n ..] += the tokenizer's encoding of text, or the special id when text is NULL. */
static void expect(int32_t *ids, int *n, const char *text, int32_t special)
{
    if (!text) {
        ids[(*n)++] = special;
        return;
    }
    int32_t *e = NULL;
    int k = 0;
    ck_assert_int_eq(tokenizer_encode(tok, text, strlen(text), &e, &k, NULL), TT_OK);
    memcpy(ids + *n, e, (size_t)k * sizeof *e);
    *n += k;
    free(e);
}

static void assert_tokens_from(int from, const int32_t *want, int n)
{
    ck_assert_int_eq(S.n_tokens - from, n);
    for (int i = 0; i < n; i++)
        ck_assert_msg(S.tokens[from + i] == want[i], "token %d: %d, want %d", from + i,
                      S.tokens[from + i], want[i]);
}

static void script_reply(int32_t *buf, int n)
{
    F->script = buf;
    F->script_n = n;
    F->script_base = S.n_tokens;
}

START_TEST(chat_turns_are_wrapped_and_the_next_turn_prefills_only_its_new_tokens)
{
    remake_session(256, true, 20);
    set_chatml(chatml_special, -1);
    ck_assert_int_eq(session_chat_format(&S), CHAT_CHATML);
    ck_assert_int_eq(session_set_system(&S, "Be brief.", NULL), TT_OK);
    add_text("Hi");
    int32_t want[128];
    int n = 0;
    expect(want, &n, NULL, IM_START);
    expect(want, &n, "system\nBe brief.", 0);
    expect(want, &n, NULL, IM_END);
    expect(want, &n, "\n", 0);
    expect(want, &n, NULL, IM_START);
    expect(want, &n, "user\nHi", 0);
    expect(want, &n, NULL, IM_END);
    expect(want, &n, "\n", 0);
    expect(want, &n, NULL, IM_START);
    expect(want, &n, "assistant\n", 0);
    assert_tokens_from(0, want, n);

    /* the reply ends at the end-of-turn token, which stays in the conversation, shown as nothing */
    int32_t reply[] = {byte_id('o'), byte_id('k'), IM_END};
    script_reply(reply, 3);
    collected c = {0};
    generate(&c);
    ck_assert_int_eq(S.last.stop, SESSION_STOP_EOS);
    ck_assert_str_eq(c.text, "ok");
    ck_assert_int_eq(S.tokens[S.n_tokens - 1], IM_END);
    ck_assert_int_eq(session_end_id(&S), IM_END);   /* what beam search stops at */

    /* the next turn: no system message again, only what the turn adds; the cache keeps the rest */
    int n1 = S.n_tokens;
    add_text("More");
    n = 0;
    expect(want, &n, "\n", 0);
    expect(want, &n, NULL, IM_START);
    expect(want, &n, "user\nMore", 0);
    expect(want, &n, NULL, IM_END);
    expect(want, &n, "\n", 0);
    expect(want, &n, NULL, IM_START);
    expect(want, &n, "assistant\n", 0);
    assert_tokens_from(n1, want, n);
    script_reply(reply, 3);
    generate(&c);
    ck_assert_int_eq(S.last.stop, SESSION_STOP_EOS);
    ck_assert_int_eq(S.last.reused_tokens, n1 - 1);     /* all but the end-of-turn token */
    ck_assert_int_eq(S.last.prefilled_tokens, n + 1);
    assert_cache_consistent();
}
END_TEST

START_TEST(a_reply_cut_short_is_closed_before_the_next_turn)
{
    remake_session(256, true, 2);
    set_chatml(chatml_special, -1);
    add_text("Hi");
    int32_t reply[] = {byte_id('a'), byte_id('b'), byte_id('c')};
    script_reply(reply, 3);
    generate(NULL);
    ck_assert_int_eq(S.last.stop, SESSION_STOP_MAX_TOKENS);
    int n1 = S.n_tokens;
    add_text("Go on");
    int32_t want[64];
    int n = 0;
    expect(want, &n, NULL, IM_END);        /* the template's close of the reply */
    expect(want, &n, "\n", 0);
    expect(want, &n, NULL, IM_START);
    expect(want, &n, "user\nGo on", 0);
    expect(want, &n, NULL, IM_END);
    expect(want, &n, "\n", 0);
    expect(want, &n, NULL, IM_START);
    expect(want, &n, "assistant\n", 0);
    assert_tokens_from(n1, want, n);
}
END_TEST

START_TEST(without_special_tokens_the_end_of_turn_text_stops_the_reply)
{
    remake_session(256, true, 30);
    set_chatml(NULL, EOT);   /* a tokenizer without ChatML's tokens; its BOS goes first */
    add_text("Hi");
    ck_assert_int_eq(S.tokens[0], EOT);
    int32_t want[128];
    int n = 0;
    expect(want, &n, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", 0);
    assert_tokens_from(1, want, n);
    const char *text = "ok<|im_end|>\nmore";
    int32_t reply[32];
    for (size_t i = 0; i < strlen(text); i++)
        reply[i] = byte_id((unsigned char)text[i]);
    script_reply(reply, (int)strlen(text));
    collected c = {0};
    generate(&c);
    ck_assert_int_eq(S.last.stop, SESSION_STOP_STRING);
    ck_assert_str_eq(c.text, "ok");
}
END_TEST

START_TEST(chat_off_keeps_plain_continuation)
{
    set_chatml(chatml_special, -1);
    session_chat raw = {.spec = chat_spec_of(CHAT_RAW), .bos_id = -1};
    ck_assert_int_eq(session_set_chat(&S, &raw, NULL), TT_OK);
    ck_assert_int_eq(session_chat_format(&S), CHAT_RAW);
    ck_assert_int_eq(session_end_id(&S), EOT);
    add_text("Hi");
    int32_t want[16];
    int n = 0;
    expect(want, &n, "Hi", 0);
    assert_tokens_from(0, want, n);
    /* an id outside the vocabulary is refused naming it, and nothing changes */
    session_chat bad = {.spec = chat_spec_of(CHAT_LLAMA3), .bos_id = -1, .n_eot = 1,
                        .eot_ids = {VOCAB}};
    tt_error err = {0};
    ck_assert_int_eq(session_set_chat(&S, &bad, &err), TT_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "512"), "%s", err.msg);
    ck_assert_int_eq(session_chat_format(&S), CHAT_RAW);
}
END_TEST

START_TEST(a_forced_step_appends_the_chosen_token)
{
    add_text("Hello");
    tt_error err = {0};
    ck_assert_int_eq(session_gen_begin(&S, &err), TT_OK);
    session_stop stop;
    ck_assert_int_eq(session_gen_step(&S, 77, NULL, NULL, &stop, &err), TT_OK);
    ck_assert_int_eq(stop, SESSION_STOP_NONE);
    ck_assert_int_eq(S.tokens[S.n_tokens - 1], 77);
    ck_assert_int_eq(S.info[S.n_tokens - 1].origin, TOKEN_FORCED);
    ck_assert_int_eq(session_gen_step(&S, -1, NULL, NULL, &stop, &err), TT_OK);
    ck_assert_int_eq(S.info[S.n_tokens - 1].origin, TOKEN_SAMPLED);
    ck_assert_int_eq(session_gen_step(&S, VOCAB, NULL, NULL, &stop, &err), TT_ERR_ARG);
    session_gen_end(&S, SESSION_STOP_INTERRUPTED, NULL, NULL);
    ck_assert_ptr_null(S.gen);
    assert_cache_consistent();
}
END_TEST

/* A session_fallback_fn that hands over a second fake engine of the same shape. */
static fake_engine *G_fallback;
static int fallback_calls;

static engine *to_second_engine(void *user, session *s, engine *failed, const tt_error *why)
{
    (void)user; (void)s;
    ck_assert_ptr_eq(failed, &F->base);
    ck_assert_int_eq(why->status, TT_ERR_DEVICE);
    fallback_calls++;
    G_fallback = calloc(1, sizeof *G_fallback);
    ck_assert_ptr_nonnull(G_fallback);
    G_fallback->base = F->base;      /* same ops, model, context */
    G_fallback->base.n_past = 0;
    G_fallback->base.tokens = NULL;  /* a fresh engine has its own token mirror */
    G_fallback->base.logits = G_fallback->logits;
    return &G_fallback->base;
}

static void check_fallback_at(long fail_call)
{
    /* The reference: the same conversation on an engine that never fails. */
    add_text("In the beginning");
    collected ref = {0};
    generate(&ref);
    int n_ref = S.n_tokens;
    int32_t ref_ids[256];
    memcpy(ref_ids, S.tokens, (size_t)n_ref * sizeof *ref_ids);
    session_reset(&S);
    F->calls = 0;
    F->fail_at_call = fail_call;
    fallback_calls = 0;
    S.device_fallback = to_second_engine;
    add_text("In the beginning");
    collected got = {0};
    generate(&got);
    ck_assert_int_eq(fallback_calls, 1);
    ck_assert_int_eq(S.last.device_fallbacks, 1);
    ck_assert_ptr_eq(S.eng, &G_fallback->base);
    ck_assert_int_eq(S.last.stop, SESSION_STOP_MAX_TOKENS);
    ck_assert_int_eq(S.n_tokens, n_ref);
    for (int i = 0; i < n_ref; i++)
        ck_assert_int_eq(S.tokens[i], ref_ids[i]);
    ck_assert_str_eq(got.text, ref.text);
    /* The replacement's cache holds the conversation (minus the last, unforwarded token). */
    ck_assert_int_eq(session_cached_prefix(&S), G_fallback->base.n_past);
    ck_assert_int_ge(G_fallback->base.n_past, n_ref - 1);
    engine_free(&G_fallback->base);
    G_fallback = NULL;
    S.eng = &F->base;   /* the teardown frees F; the session no longer needs the replacement */
}

START_TEST(a_device_error_in_prefill_moves_to_the_fallback_engine_and_goes_on)
{
    check_fallback_at(1);
}
END_TEST

START_TEST(a_device_error_in_decode_moves_to_the_fallback_engine_with_the_same_tokens)
{
    check_fallback_at(3);
}
END_TEST

START_TEST(a_device_error_without_a_fallback_ends_the_turn_with_the_error)
{
    F->fail_at_call = 3;
    add_text("In the beginning");
    tt_error err = {0};
    ck_assert_int_eq(session_generate(&S, NULL, NULL, &err), TT_ERR_DEVICE);
    ck_assert_int_eq(S.last.stop, SESSION_STOP_ERROR);
    ck_assert(strstr(S.last.error.msg, "illegal address") != NULL);
}
END_TEST

START_TEST(peek_shows_the_next_distribution_without_drawing)
{
    remake_session(64, false, 5);
    add_text("Hello");
    int n = S.n_tokens;
    rng before = S.rng;
    sampler_snapshot snap;
    tt_error err = {0};
    ck_assert_int_eq(session_peek(&S, &snap, &err), TT_OK);
    ck_assert_int_eq(S.n_tokens, n);
    ck_assert(memcmp(&before, &S.rng, sizeof before) == 0);
    ck_assert_int_gt(snap.n_top, 0);
    /* The peeked favourite is what greedy decoding takes next. */
    S.set.sampler.greedy = true;
    generate(NULL);
    ck_assert_int_eq(S.tokens[n], snap.top[0].id);
    /* Peeking prefilled the prompt already: only the last token is run again (for its logits). */
    ck_assert_int_eq(S.last.reused_tokens, n - 1);
    ck_assert_int_eq(S.last.prefilled_tokens, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("session");
    TCase *tc = tu_add_case(s, "session", TU_TESTS(
            first_turn_prefills_the_prompt_and_computes_each_token_once,
            second_turn_prefills_only_its_new_tokens,
            undo_turn_reuses_the_cache_and_gives_what_a_fresh_cache_gives,
            undo_of_n_tokens_keeps_the_rest_cached,
            regen_reuses_the_prompt_and_repeats_a_greedy_reply,
            regen_with_the_same_seed_repeats_a_sampled_reply,
            loading_tokens_keeps_the_longest_common_prefix, reset_empties_the_cache,
            set_model_clears_the_conversation_and_keeps_the_settings,
            an_empty_conversation_starts_from_end_of_text, stop_string_ends_the_reply_before_it,
            held_back_text_is_released_when_the_stop_does_not_complete,
            end_of_text_stops_generation, a_full_context_shifts_and_generation_goes_on,
            a_full_context_without_shifting_stops,
            interrupt_stops_after_the_current_token_and_keeps_the_cache_consistent,
            a_callback_can_stop_the_generation, interrupt_during_prefill_leaves_a_consistent_prefix,
            a_forced_step_appends_the_chosen_token,
            the_front_ends_time_in_callbacks_is_left_out_of_the_decode_speed,
            the_front_ends_time_between_steps_is_left_out_of_the_decode_speed,
            an_engine_the_front_end_held_idle_is_warmed_before_its_next_step,
            an_engine_too_large_for_the_caches_keeps_its_threads_after_a_hold,
            a_paced_turn_reports_the_speed_of_an_unpaced_one,
            lean_steps_give_the_same_tokens_and_probabilities,
            peek_shows_the_next_distribution_without_drawing,
            a_device_error_in_prefill_moves_to_the_fallback_engine_and_goes_on,
            a_device_error_in_decode_moves_to_the_fallback_engine_with_the_same_tokens,
            a_device_error_without_a_fallback_ends_the_turn_with_the_error,
            chat_turns_are_wrapped_and_the_next_turn_prefills_only_its_new_tokens,
            a_reply_cut_short_is_closed_before_the_next_turn,
            without_special_tokens_the_end_of_turn_text_stops_the_reply,
            chat_off_keeps_plain_continuation));
    tcase_add_unchecked_fixture(tc, tokenizer_setup, tokenizer_teardown);
    tcase_add_checked_fixture(tc, session_setup, session_teardown);
    return tu_run_suite(s);
}
