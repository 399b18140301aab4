/* main.c: tokentop's entry point: subcommands (generate, tokenize, score, bench) and the REPL. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/base/text.h"
#include "app/bench.h"
#include "app/bench_spec.h"
#include "app/cli.h"
#include "app/draft.h"
#include "app/gen_compare.h"
#include "app/list.h"
#include "core/decode/beam.h"
#include "core/engine/lens.h"
#include "core/base/clock.h"
#include "core/session/samples.h"
#include "core/base/jsonw.h"
#include "app/attn_json.h"
#include "core/decode/pace.h"
#include "core/session/session.h"
#include "core/base/util.h"
#include "repl/repl.h"

#define TOKENTOP_VERSION "0.1.0"

static volatile sig_atomic_t g_interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    g_interrupted = 1;
}

static void install_sigint(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

/* ---------------------------------------------------------------------------------------------
 * generate */

typedef struct {
    const cli_options *o;
    const tokenizer *tok;
    int sample;                    /* --samples: the sample an event belongs to; -1 otherwise */
    gen_compare *cmp;              /* --compare-dtype, else NULL */
    session *s;                    /* the session generating (for cmp) */
    pace_clock *pace;              /* --pace, or NULL */
    bool *line_open;               /* text mode: stdout's last byte is not a newline */
    attention_view *attn;          /* --attention: scratch for the records' lists, else NULL */
} gen_ctx;

static void json_token_text(FILE *f, const tokenizer *tok, int32_t id)
{
    size_t n = 0;
    const char *b = tokenizer_token_bytes(tok, id, &n);
    char buf[512];
    size_t len = text_token_display(b ? b : "", b ? n : 0, TEXT_ESCAPE_BYTES, buf, sizeof buf);
    jsonw_string(f, buf, len);
}

/* Tokens each layer of a --lens record lists. */
#define GEN_LENS_TOP 5

/* --lens: ,"lens":[{"layer":l,"top":[{"id":..,"token":..,"p":..},...],"p_chosen":..,
 * "rank_chosen":..},...] for the forward the record's token was drawn from (the engine's rows
 * are still that forward's while the event is reported: the session forwards the token after),
 * or "lens":null with "lens_error" when the engine kept none (after a fallback to another
 * engine, until its first forward). */
static void json_lens(FILE *f, const gen_ctx *g, int32_t token)
{
    engine *e = g->s->eng;
    const int rows = e->config->L + 1;
    lens_layer *ly = malloc((size_t)rows * sizeof *ly);
    tt_error err = {0};
    tt_status st = ly ? lens_engine_layers(e, GEN_LENS_TOP, token, ly, NULL, &err)
                      : tt_fail(&err, TT_ERR_NOMEM, "lens: out of memory");
    if (st != TT_OK) {
        fputs(",\"lens\":null,\"lens_error\":", f);
        jsonw_string(f, err.msg, strlen(err.msg));
        if (!e->lens)
            lens_enable(e, NULL);   /* an engine the session moved to: from its next forward */
        free(ly);
        return;
    }
    fputs(",\"lens\":[", f);
    for (int l = 0; l < rows; l++) {
        fprintf(f, "%s{\"layer\":%d,\"top\":[", l ? "," : "", ly[l].layer);
        for (int i = 0; i < ly[l].n_top; i++) {
            fprintf(f, "%s{\"id\":%d,\"token\":", i ? "," : "", (int)ly[l].top_id[i]);
            json_token_text(f, g->tok, ly[l].top_id[i]);
            fputs(",\"p\":", f);
            jsonw_number(f, ly[l].top_p[i]);
            fputc('}', f);
        }
        fputs("],\"p_chosen\":", f);
        jsonw_number(f, ly[l].p_token);
        fprintf(f, ",\"rank_chosen\":%d,\"entropy\":", ly[l].rank_token);
        jsonw_number(f, ly[l].entropy_bits);
        fputc('}', f);
    }
    fputc(']', f);
    free(ly);
}

static bool on_event_json(const gen_ctx *g, const session_event *ev)
{
    FILE *f = stdout;
    fprintf(f, "{\"step\":%d,", ev->step);
    if (g->sample >= 0)
        fprintf(f, "\"sample\":%d,", g->sample);
    if (ev->flush) {
        fputs("\"id\":null,\"flush\":true,\"text\":", f);
        jsonw_string(f, ev->text, ev->text_len);
        fputs("}\n", f);
        return true;
    }
    const sampler_snapshot *s = ev->snap;
    sampler_snapshot built;
    tt_error err;
    if (ev->partial && session_event_snapshots(g->s, ev, &built, NULL, &err) == TT_OK)
        s = &built;                /* built here, in the front end's time (session.h) */
    fprintf(f, "\"id\":%d,\"token\":", (int)ev->token);
    json_token_text(f, g->tok, ev->token);
    fputs(",\"text\":", f);
    jsonw_string(f, ev->text, ev->text_len);
    fprintf(f, ",\"origin\":\"%s\"",
            ev->rejected ? "draft_rejected" : token_origin_name(ev->origin));
    if (ev->round > 0) {
        /* speculative: q is the draft's probability of its proposal, p_target the target's; the
         * proposal was accepted when accept_u * q < p_target */
        fprintf(f, ",\"round\":%d", ev->round);
        if (ev->rejected)
            fputs(",\"rejected\":true", f);
        if (ev->draft) {
            fputs(",\"draft_id\":", f);
            fprintf(f, "%d,\"q\":", (int)ev->draft->token);
            jsonw_number(f, ev->draft->q);
            fputs(",\"p_target\":", f);
            jsonw_number(f, ev->draft->p);
            fputs(",\"accept_u\":", f);
            jsonw_number(f, ev->draft->u);
        }
    }
    if (s) {
        fputs(",\"p\":", f);
        jsonw_number(f, s->token_p);
        fputs(",\"raw_p\":", f);
        jsonw_number(f, s->token_raw_p);
        fputs(",\"u\":", f);
        if (s->u < 0)
            fputs("null", f);
        else
            jsonw_number(f, s->u);
        fputs(",\"entropy_raw\":", f);
        jsonw_number(f, s->entropy_raw);
        fputs(",\"entropy\":", f);
        jsonw_number(f, s->entropy_final);
        fprintf(f, ",\"kept\":%d,\"top\":[", s->n_kept);
        for (int i = 0; i < s->n_top; i++) {
            const sampler_entry *e = &s->top[i];
            fprintf(f, "%s{\"id\":%d,\"text\":", i ? "," : "", (int)e->id);
            json_token_text(f, g->tok, e->id);
            fputs(",\"logit\":", f);
            jsonw_number(f, e->logit);
            fputs(",\"raw_p\":", f);
            jsonw_number(f, e->raw_p);
            fputs(",\"p\":", f);
            jsonw_number(f, e->p);
            const char *cut = sampler_cut_name((sampler_cut)e->cut);
            if (cut)
                fprintf(f, ",\"cut\":\"%s\"", cut);
            else
                fputs(",\"cut\":null", f);
            if (e->penalized)
                fputs(",\"penalized\":true", f);
            fputc('}', f);
        }
        fputc(']', f);
    }
    if (g->cmp)
        gen_compare_json_record(f, g->cmp, ev->token);
    if (g->o->lens)
        json_lens(f, g, ev->token);
    if (g->attn)
        attn_json_record(f, g->s, ev, g->o->attention, g->attn);
    if (ev->context_shifted)
        fprintf(f, ",\"context_shift\":{\"dropped\":%d}", ev->shift_dropped);
    fputs("}\n", f);
    fflush(f);
    return true;
}

static bool on_event(void *user, const session_event *ev)
{
    const gen_ctx *g = user;
    tt_error err = {0};
    if (g->cmp && gen_compare_event(g->cmp, g->s, ev, &err) != TT_OK) {
        fprintf(stderr, "\ntokentop: --compare-dtype: %s\n", err.msg);
        return false;
    }
    /* text output shows no rejected draft: only --json gives it a slot of its own */
    if (g->pace && g->pace->rate > 0 && !ev->flush && (!ev->rejected || g->o->json)) {
        pace_wait(g->pace, &g_interrupted);   /* callback time: not in the decode speed */
        if (g_interrupted)
            return false;
    }
    if (g->o->json)
        return on_event_json(g, ev);
    if (ev->context_shifted && !g->o->quiet)
        fprintf(stderr, "\n[context full: dropped the oldest %d tokens and re-prefilled the rest]\n",
                ev->shift_dropped);
    if (ev->text_len) {
        fwrite(ev->text, 1, ev->text_len, stdout);
        fflush(stdout);
        if (g->line_open)
            *g->line_open = ev->text[ev->text_len - 1] != '\n';
    }
    return true;
}

static void print_summary(const cli_options *o, const session *s, uint64_t seed,
                          const char *fallback_note, const gen_compare *cmp)
{
    const session_stats *st = &s->last;
    if (o->json) {
        printf("{\"done\":true,\"stop_reason\":\"%s\",\"prompt_tokens\":%d,\"reused_tokens\":%d,"
               "\"prefilled_tokens\":%d,\"generated_tokens\":%d,\"ttft_ms\":",
               session_stop_name(st->stop), st->prompt_tokens, st->reused_tokens,
               st->prefilled_tokens, st->generated_tokens);
        jsonw_number(stdout, st->ttft_ms);
        fputs(",\"prefill_tok_s\":", stdout);
        jsonw_number(stdout, st->prefill_tok_s);
        fputs(",\"decode_tok_s\":", stdout);
        jsonw_number(stdout, st->decode_tok_s);
        printf(",\"context_shifts\":%d,\"seed\":%llu", st->context_shifts,
               (unsigned long long)seed);
        if (st->device_fallbacks) {
            printf(",\"device_fallbacks\":%d,\"device_error\":", st->device_fallbacks);
            jsonw_string(stdout, fallback_note, strlen(fallback_note));
        }
        if (st->speculative) {
            printf(",\"gamma\":%d,\"gamma_mode\":\"%s\",\"rounds\":%ld,\"drafted\":%ld,"
                   "\"accepted\":%ld,\"acceptance_rate\":", st->gamma,
                   s->gamma_adaptive ? "auto" : "fixed", st->spec_rounds, st->drafted,
                   st->accepted);
            jsonw_number(stdout, st->drafted ? (double)st->accepted / st->drafted : 0.0);
            fputs(",\"tokens_per_target_pass\":", stdout);
            jsonw_number(stdout, st->spec_rounds ? (double)st->spec_tokens / st->spec_rounds : 0.0);
            double lo, hi, x = session_plain_speedup(s, &lo, &hi);
            fputs(",\"plain_speedup\":", stdout);
            jsonw_number(stdout, x);
            fputs(",\"plain_speedup_lo\":", stdout);
            jsonw_number(stdout, lo);
            fputs(",\"plain_speedup_hi\":", stdout);
            jsonw_number(stdout, hi);
        }
        if (st->stop == SESSION_STOP_ERROR) {
            fputs(",\"error\":", stdout);
            jsonw_string(stdout, st->error.msg, strlen(st->error.msg));
        }
        gen_compare_summary(stdout, cmp, true);
        fputs("}\n", stdout);
        fflush(stdout);
        return;
    }
    if (o->quiet)
        return;
    fprintf(stderr, "\n[%d tokens, stop: %s | prompt %d tokens (%d reused) | ttft %.1f ms | "
            "prefill %.1f tok/s | decode %.1f tok/s | seed %llu]\n",
            st->generated_tokens, session_stop_name(st->stop), st->prompt_tokens,
            st->reused_tokens, st->ttft_ms, st->prefill_tok_s, st->decode_tok_s,
            (unsigned long long)seed);
    if (st->speculative) {
        double lo, hi, x = session_plain_speedup(s, &lo, &hi);
        char plain[128] = "";
        if (x > 0)
            snprintf(plain, sizeof plain, " | %.2fx plain [%.2f-%.2f]: %d rounds, each paired with "
                     "a plain step timed before it", x, lo, hi, st->plain_probes);
        else if (st->plain_probes < SESSION_PROBE_MIN)
            snprintf(plain, sizeof plain, " | x plain: %d of %d paired rounds, too few",
                     st->plain_probes, SESSION_PROBE_MIN);
        fprintf(stderr, "[speculative: gamma %d%s | %ld drafted, %ld accepted (%.1f%%) | %.2f "
                "tokens per target pass%s]\n", st->gamma, s->gamma_adaptive ? " (auto)" : "",
                st->drafted, st->accepted,
                st->drafted ? 100.0 * st->accepted / st->drafted : 0.0,
                st->spec_rounds ? (double)st->spec_tokens / st->spec_rounds : 0.0, plain);
    }
    gen_compare_summary(stderr, cmp, false);
}

/* ---------------------------------------------------------------------------------------------
 * generate --num-beams */

/* Hypothesis text: its ids without a final EOS, decoded, bytes outside complete characters as
 * \xNN (always valid UTF-8). malloc'd. */
static char *beam_text(const tokenizer *tok, const beam_hypothesis *h, size_t *len)
{
    int n = h->eos ? h->n - 1 : h->n;
    char *raw = NULL;
    size_t raw_len = 0;
    if (n <= 0 || tokenizer_decode(tok, h->ids, n, &raw, &raw_len, NULL) != TT_OK) {
        *len = 0;
        return strdup("");
    }
    size_t cap = 4 * raw_len + 1;
    char *out = malloc(cap);
    *len = out ? text_token_display(raw, raw_len, TEXT_ESCAPE_BYTES, out, cap) : 0;
    free(raw);
    return out ? out : strdup("");
}

static int generate_beams(session *s, const cli_options *o, uint64_t seed)
{
    tt_error err = {0};
    if (!engine_has_seqs(s->eng)) {
        fprintf(stderr, "tokentop generate: --num-beams: the %s backend has no batched forward "
                "yet (use --backend cpu)\n", s->eng->ops->name);
        return 2;
    }
    beam_options bo;
    beam_options_default(&bo);
    bo.num_beams = o->num_beams;
    bo.length_penalty = o->length_penalty;
    bo.no_repeat_ngram = o->no_repeat_ngram;
    bo.early_stopping = o->early_stopping;
    bo.num_return = o->num_return;
    bo.max_new_tokens = s->set.max_new_tokens;
    bo.min_tokens = s->set.min_tokens;
    bo.eos = s->set.stop_at_eos ? session_end_id(s) : -1;   /* in chat mode: end of turn */
    bo.penalties = s->set.sampler;
    int n_prompt = s->n_tokens > 0 ? s->n_tokens : 1;   /* an empty prompt becomes BOS */
    if (beam_options_validate(&bo, s->model->config.V, n_prompt, s->eng->n_ctx, &err) != TT_OK) {
        fprintf(stderr, "tokentop generate: %s\n", err.msg);
        return 2;
    }
    if (session_gen_begin(s, &err) != TT_OK) {
        fprintf(stderr, "tokentop: %s\n", err.msg);
        return 1;
    }
    beam_result res;
    const int32_t *prompt = s->tokens + s->window_start;
    tt_status st = beam_search(s->eng, s->smp, prompt, s->n_tokens - s->window_start, &bo, &res,
                               &err);
    session_gen_end(s, st == TT_OK ? SESSION_STOP_MAX_TOKENS : SESSION_STOP_ERROR, NULL, NULL);
    if (st != TT_OK) {
        fprintf(stderr, "tokentop: %s\n", err.msg);
        return 1;
    }
    const session_stats *ss = &s->last;
    const beam_hypothesis *best = res.n_hyps > 0 ? &res.hyps[0] : NULL;
    double steps_s = res.decode_ms / 1e3;
    if (o->json) {
        printf("{\"done\":true,\"stop_reason\":\"%s\",\"prompt_tokens\":%d,\"reused_tokens\":%d,"
               "\"prefilled_tokens\":%d,\"generated_tokens\":%d,\"prefill_tok_s\":",
               best && best->eos ? "eos" : "max_tokens", ss->prompt_tokens, ss->reused_tokens,
               ss->prefilled_tokens, best ? best->n : 0);
        jsonw_number(stdout, ss->prefill_tok_s);
        printf(",\"num_beams\":%d,\"steps\":%d,\"decode_ms\":", bo.num_beams, res.steps);
        jsonw_number(stdout, res.decode_ms);
        fputs(",\"beam_tok_s\":", stdout);
        jsonw_number(stdout, steps_s > 0 ? res.steps * bo.num_beams / steps_s : 0.0);
        fputs(",\"copy_ms\":", stdout);
        jsonw_number(stdout, res.copy_ms);
        printf(",\"copied_positions\":%ld,\"seed\":%llu,\"beams\":[", res.copied_positions,
               (unsigned long long)seed);
        for (int i = 0; i < res.n_hyps; i++) {
            const beam_hypothesis *h = &res.hyps[i];
            printf("%s{\"ids\":[", i ? "," : "");
            for (int k = 0; k < h->n; k++)
                printf("%s%d", k ? "," : "", (int)h->ids[k]);
            fputs("],\"text\":", stdout);
            size_t len;
            char *text = beam_text(s->tok, h, &len);
            jsonw_string(stdout, text, len);
            free(text);
            fputs(",\"logprob\":", stdout);
            jsonw_number(stdout, h->logprob);
            fputs(",\"score\":", stdout);
            jsonw_number(stdout, h->score);
            printf(",\"eos\":%s}", h->eos ? "true" : "false");
        }
        fputs("]}\n", stdout);
        fflush(stdout);
    } else {
        /* --num-return N (N > 1): the N beams, each under a line with its rank and score;
         * otherwise the best one alone, as a plain generate prints its text */
        int shown = o->num_return > 1 ? res.n_hyps : best ? 1 : 0;
        for (int i = 0; i < shown; i++) {
            const beam_hypothesis *h = &res.hyps[i];
            if (o->num_return > 1)
                printf("%s--- beam %d of %d: score %.4f, logprob %.4f, %d tokens ---\n",
                       i ? "\n" : "", i + 1, res.n_hyps, h->score, h->logprob, h->n);
            size_t len;
            char *text = beam_text(s->tok, h, &len);
            fwrite(text, 1, len, stdout);
            free(text);
            fputc('\n', stdout);
        }
        fflush(stdout);
        if (!o->quiet) {
            for (int i = 0; i < res.n_hyps; i++)
                fprintf(stderr, "[beam %d: score %.4f | logprob %.4f | %d tokens, %s]\n", i + 1,
                        res.hyps[i].score, res.hyps[i].logprob, res.hyps[i].n,
                        res.hyps[i].eos ? "eos" : "max_tokens");
            fprintf(stderr, "[%d beams | %d batched steps in %.1f ms (%.1f beam tokens/s) | "
                    "%ld KV positions copied in %.1f ms]\n", bo.num_beams, res.steps,
                    res.decode_ms, steps_s > 0 ? res.steps * bo.num_beams / steps_s : 0.0,
                    res.copied_positions, res.copy_ms);
        }
    }
    beam_result_free(&res);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * generate --samples */

typedef struct {
    gen_ctx g;
    char **text;                   /* (n) each sample's output, for the plain-text listing */
    size_t *len;
} samples_ctx;

static bool on_sample_event(void *user, int sample, const session_event *ev)
{
    samples_ctx *c = user;
    if (c->g.o->json) {
        c->g.sample = sample;
        return on_event_json(&c->g, ev);
    }
    if (ev->text_len) {
        char *t = realloc(c->text[sample], c->len[sample] + ev->text_len + 1);
        if (!t)
            return false;
        memcpy(t + c->len[sample], ev->text, ev->text_len);
        c->len[sample] += ev->text_len;
        t[c->len[sample]] = 0;
        c->text[sample] = t;
    }
    return true;
}

static int generate_samples(const cli_app *app, const cli_options *o, const char *prompt,
                            size_t plen)
{
    if (!engine_has_seqs(app->eng)) {
        fprintf(stderr, "tokentop generate: --samples: the %s backend has no batched forward yet "
                "(use --backend cpu)\n", app->eng->ops->name);
        return 2;
    }
    session_settings set = o->set;
    for (int i = 0; i < o->n_stops; i++)
        set.stops[i] = (char *)o->stops[i];   /* copied by each sample's session */
    set.n_stops = o->n_stops;
    samples_ctx c = {.g = {.o = o, .tok = app->tok, .sample = -1}};
    session_chat chat;
    cli_chat_config(app, &chat);
    c.text = calloc((size_t)o->samples, sizeof *c.text);
    c.len = calloc((size_t)o->samples, sizeof *c.len);
    samples_result res;
    tt_error err = {0};
    tt_status st = TT_ERR_NOMEM;
    if (c.text && c.len)
        st = samples_generate(app->eng, app->model, app->tok, &set, &chat, prompt, plen,
                              o->samples, on_sample_event, &c, &g_interrupted, &res, &err);
    int rc = 0;
    if (st != TT_OK) {
        fprintf(stderr, "tokentop: %s\n", st == TT_ERR_NOMEM && !err.msg[0] ? "out of memory"
                                                                          : err.msg);
        rc = 1;
    } else {
        double s = res.decode_ms / 1e3;
        double agg = s > 0 ? res.tokens / s : 0.0;
        /* A sample stopped by an error (a device error on the GPU, whose sessions have no engine
         * to fall back to here) says why, once per sample, and the run fails. */
        for (int i = 0; i < res.n; i++)
            if (res.stats[i].stop == SESSION_STOP_ERROR) {
                if (!o->json)
                    fprintf(stderr, "tokentop: sample %d: %s\n", i, res.stats[i].error.msg);
                rc = 1;
            }
        if (o->json) {
            printf("{\"done\":true,\"samples\":%d,\"seed\":%llu,\"steps\":%d,"
                   "\"generated_tokens\":%ld,\"aggregate_tok_s\":", res.n,
                   (unsigned long long)o->set.seed, res.steps, res.tokens);
            jsonw_number(stdout, agg);
            fputs(",\"results\":[", stdout);
            for (int i = 0; i < res.n; i++) {
                const session_stats *st_i = &res.stats[i];
                printf("%s{\"sample\":%d,\"seed\":%llu,\"stop_reason\":\"%s\","
                       "\"generated_tokens\":%d", i ? "," : "", i,
                       (unsigned long long)(o->set.seed + (uint64_t)i),
                       session_stop_name(st_i->stop), st_i->generated_tokens);
                if (st_i->stop == SESSION_STOP_ERROR) {
                    fputs(",\"error\":", stdout);
                    jsonw_string(stdout, st_i->error.msg, strlen(st_i->error.msg));
                }
                fputc('}', stdout);
            }
            fputs("]}\n", stdout);
        } else {
            for (int i = 0; i < res.n; i++) {
                printf("%s--- sample %d (seed %llu, %s) ---\n", i ? "\n" : "", i,
                       (unsigned long long)(o->set.seed + (uint64_t)i),
                       session_stop_name(res.stats[i].stop));
                if (o->echo)
                    fwrite(prompt, 1, plen, stdout);
                if (c.text[i])
                    fwrite(c.text[i], 1, c.len[i], stdout);
                fputc('\n', stdout);
            }
            if (!o->quiet)
                fprintf(stderr, "[%d samples | %ld tokens in %d batched steps, %.1f ms | %.1f "
                        "tok/s aggregate | seeds %llu..%llu]\n", res.n, res.tokens, res.steps,
                        res.decode_ms, agg, (unsigned long long)o->set.seed,
                        (unsigned long long)(o->set.seed + (uint64_t)res.n - 1));
        }
        fflush(stdout);
        samples_result_free(&res);
    }
    for (int i = 0; c.text && i < o->samples; i++)
        free(c.text[i]);
    free(c.text);
    free(c.len);
    return rc;
}

/* The options of `tokentop CMD ...` into *o (defaults, then argv[2..]): -1 to go on, else the
 * exit status (0 after --help, 2 after a usage error cli_parse has reported). */
static int app_parse(cli_options *o, const char *cmd, int argc, char **argv)
{
    cli_options_default(o);
    int r = cli_parse(o, cmd, argc, argv, 2);
    return r == 0 ? -1 : r > 0 ? 0 : 2;
}

static char *read_prompt(const cli_options *o, size_t *len, bool allow_stdin)
{
    tt_error err = {0};
    if (o->prompt) {
        *len = strlen(o->prompt);
        return strdup(o->prompt);
    }
    const char *path = o->prompt_file;
    if (!path && allow_stdin && !isatty(STDIN_FILENO))
        path = "-";
    if (!path)
        return NULL;
    char *text;
    if (util_read_file(path, 0, &text, len, NULL, &err) != TT_OK)
        fprintf(stderr, "tokentop: %s\n", err.msg);
    return text;
}

static int app_generate(cli_options *o)
{
    tt_error err0 = {0};
    if (!o->prompt && !o->prompt_file && !o->prompt_ids && isatty(STDIN_FILENO)) {
        fprintf(stderr, "tokentop generate: give a prompt with -p TEXT, -f FILE or --ids 1,2,3 "
                "(-p \"\" generates from the beginning-of-text token)\n");
        return 2;
    }
    size_t plen = 0;
    char *prompt = o->prompt_ids ? strdup("") : read_prompt(o, &plen, true);
    if (!prompt)
        return 1;
    if (o->lens && (!o->json || o->num_beams || o->samples || o->draft_dir)) {
        fprintf(stderr, "tokentop generate: --lens adds the logit lens to --json records of plain "
                "generation: it needs --json and goes with neither --num-beams, --samples nor "
                "--draft (a speculative round verifies several tokens in one forward)\n");
        free(prompt);
        return 2;
    }
    if (o->compare_set && (o->num_beams || o->samples || o->draft_dir)) {
        fprintf(stderr, "tokentop generate: --compare-dtype compares plain generation, not "
                "--num-beams, --samples or --draft\n");
        free(prompt);
        return 2;
    }
    if (o->attention && (!o->json || o->num_beams || o->samples)) {
        fprintf(stderr, "tokentop generate: --attention adds to the records of --json (plain or "
                "--draft generation, not --num-beams or --samples)\n");
        free(prompt);
        return 2;
    }
    cli_app app;
    if (cli_app_load(&app, o, false) != TT_OK) {
        free(prompt);
        return 1;
    }
    cli_apply_generation_defaults(o, app.model);
    if (o->attention && engine_set_attention(app.eng, true, &err0) != TT_OK) {
        fprintf(stderr, "tokentop: %s\n", err0.msg);
        cli_app_free(&app);
        free(prompt);
        return 1;
    }
    session s;
    tt_error err = {0};
    int rc = 0;
    draft_app draft = {0};
    gen_compare cmp = {0};
    if ((o->draft_dir && draft_load(&draft, o->draft_dir, &app, o, &err) != TT_OK) ||
        (o->compare_set && gen_compare_open(&cmp, app.model, o, app.eng, &err) != TT_OK)) {
        fprintf(stderr, "tokentop: %s\n", err.msg);
        draft_free(&draft);
        cli_app_free(&app);
        free(prompt);
        return 1;
    }
    if ((o->lens && lens_enable(app.eng, &err) != TT_OK) ||
        session_init(&s, app.model, app.tok, app.eng, &o->set, &err) != TT_OK ||
        (draft.eng && (session_set_draft(&s, draft.eng, &err) != TT_OK ||
                       session_set_gamma(&s, o->gamma, o->gamma_adaptive, &err) != TT_OK))) {
        fprintf(stderr, "tokentop: %s\n", err.msg);
        session_free(&s);
        draft_free(&draft);
        gen_compare_close(&cmp);
        cli_app_free(&app);
        free(prompt);
        return 1;
    }
    if (draft.eng && o->spec_off)
        session_set_speculative(&s, false, NULL);
    s.device_fallback = cli_device_fallback;
    s.fallback_user = &app;
    cli_session_chat(&app, &s);     /* before the prompt: a model with a template chats */
    app.fallback_quiet = o->json;   /* JSON output reports it in the summary instead */
    s.lean = !o->json;              /* plain text shows no histogram: skip the snapshots' work */
    s.plain_probe = true;           /* a speculative run's "x plain" (session_plain_speedup) */
    /* JSON shows every event's snapshot, built as it is printed: the decode speed is then the
     * engine's, as the terminal UI's is (--compare-dtype reads the session's own) */
    s.snapshots_on_demand = o->json && !cmp.eng;
    for (int i = 0; i < o->n_stops && rc == 0; i++)
        if (session_add_stop(&s, o->stops[i], &err) != TT_OK) {
            fprintf(stderr, "tokentop: %s\n", err.msg);
            rc = 2;
        }
    if (rc == 0 && o->prompt_ids) {
        int32_t *ids;
        int n;
        char why[160];
        if (cli_parse_ids(o->prompt_ids, app.model->config.V, &ids, &n, why, sizeof why) != 0) {
            fprintf(stderr, "tokentop generate: --ids: %s\n", why);
            rc = 2;
        } else if (session_add_user_tokens(&s, ids, n, &err) != TT_OK) {
            fprintf(stderr, "tokentop: %s\n", err.msg);
            rc = 1;
        }
        free(ids);
    } else if (rc == 0 && session_add_user_text(&s, prompt, plen, &err) != TT_OK) {
        fprintf(stderr, "tokentop: %s\n", err.msg);
        rc = 1;
    }
    if (rc == 0) {
        if (o->echo && !o->json) {
            fwrite(prompt, 1, plen, stdout);
            fflush(stdout);
        }
        install_sigint();
        s.interrupt = &g_interrupted;
        pace_clock pace;
        pace_init(&pace);
        pace_set_rate(&pace, o->pace < 0 ? 0 : o->pace);
        bool line_open = false;
        attention_view attn;
        attention_view_init(&attn);
        gen_ctx g = {.o = o, .tok = app.tok, .sample = -1, .cmp = cmp.eng ? &cmp : NULL,
                     .s = &s, .pace = &pace, .line_open = &line_open,
                     .attn = o->attention ? &attn : NULL};
        if (o->num_beams) {
            rc = generate_beams(&s, o, o->set.seed);
            goto done;
        }
        if (o->samples) {
            rc = generate_samples(&app, o, prompt, plen);
            goto done;
        }
        tt_status st = session_generate(&s, on_event, &g, &err);
        attention_view_free(&attn);
        if (line_open && !o->json) {   /* the text ends its line (generate -q | next tool) */
            putchar('\n');
            fflush(stdout);
        }
        print_summary(o, &s, o->set.seed, app.fallback_note, &cmp);
        if (st != TT_OK) {
            if (!o->json)
                fprintf(stderr, "tokentop: %s\n", err.msg);
            rc = 1;
        }
    }
done:
    session_free(&s);
    draft_free(&draft);
    gen_compare_close(&cmp);
    cli_app_free(&app);
    free(prompt);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * tokenize */

static int app_tokenize(cli_options *o)
{
    size_t len = 0;
    char *text = read_prompt(o, &len, true);
    if (!text) {
        if (!o->prompt_file)
            fprintf(stderr, "tokentop tokenize: give text with -p TEXT, -f FILE or on stdin\n");
        return 2;
    }
    cli_app app;
    if (cli_app_load(&app, o, true) != TT_OK) {
        free(text);
        return 1;
    }
    int32_t *ids = NULL;
    int n = 0;
    tt_error err = {0};
    int rc = 0;
    /* What the model sees: the BOS first when the tokenizer adds one (tokenizer.json's
     * post-processor or tokenizer_config.json's add_bos_token). */
    bool bos = tokenizer_adds_bos(app.tok);
    if (tokenizer_encode(app.tok, text, len, &ids, &n, &err) != TT_OK) {
        fprintf(stderr, "tokentop: %s\n", err.msg);
        rc = 1;
    } else if (o->json) {
        putchar('[');
        if (bos)
            printf("%d%s", tokenizer_bos_id(app.tok), n ? "," : "");
        for (int i = 0; i < n; i++)
            printf(i ? ",%d" : "%d", (int)ids[i]);
        puts("]");
    } else {
        char buf[512];
        if (bos) {
            tokenizer_token_display(app.tok, tokenizer_bos_id(app.tok), TEXT_ESCAPE_WHITESPACE,
                                    buf, sizeof buf);
            printf("%d\t%s\n", tokenizer_bos_id(app.tok), buf);
        }
        for (int i = 0; i < n; i++) {
            tokenizer_token_display(app.tok, ids[i], TEXT_ESCAPE_WHITESPACE, buf, sizeof buf);
            printf("%d\t%s\n", (int)ids[i], buf);
        }
    }
    free(ids);
    free(text);
    cli_app_free(&app);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * score: perplexity of a file */

static int app_score(cli_options *o)
{
    if (!o->prompt_file && !o->prompt && !o->prompt_ids) {
        fprintf(stderr, "tokentop score: give the text with -f FILE or the tokens with --ids\n");
        return 2;
    }
    size_t len = 0;
    char *text = o->prompt_ids ? strdup("") : read_prompt(o, &len, false);
    if (!text)
        return 1;
    cli_app app;
    if (cli_app_load(&app, o, false) != TT_OK) {
        free(text);
        return 1;
    }
    int rc = 0;
    tt_error err = {0};
    int32_t *ids = NULL;
    int n = 0;
    FILE *dump = NULL;
    if (o->prompt_ids) {
        /* the same ids another engine scored: no tokenizer in between */
        char why[160];
        if (cli_parse_ids(o->prompt_ids, app.model->config.V, &ids, &n, why, sizeof why) != 0) {
            fprintf(stderr, "tokentop score: --ids: %s\n", why);
            rc = 2;
            goto done;
        }
    } else if (tokenizer_encode(app.tok, text, len, &ids, &n, &err) != TT_OK) {
        fprintf(stderr, "tokentop: %s\n", err.msg);
        rc = 1;
        goto done;
    }
    if (o->bos) {
        int32_t bos = app.model->config.bos_id >= 0 ? app.model->config.bos_id
                                                    : tokenizer_eot_id(app.tok);
        int32_t *w = malloc(((size_t)n + 1) * sizeof *w);
        if (!w || bos < 0) {
            fprintf(stderr, "tokentop: %s\n", w ? "the model has no beginning-of-text token"
                                                : "out of memory");
            free(w);
            rc = 1;
            goto done;
        }
        w[0] = bos;
        memcpy(w + 1, ids, (size_t)n * sizeof *w);
        free(ids);
        ids = w;
        n++;
    }
    if (n < 2) {
        fprintf(stderr, "tokentop score: %s has %d token(s); at least 2 are needed\n",
                o->prompt_file ? o->prompt_file : o->prompt_ids ? "--ids" : "the text", n);
        rc = 2;
        goto done;
    }
    int chunk = o->window > 0 ? o->window : app.eng->n_ctx;
    if (chunk > app.eng->n_ctx) {
        fprintf(stderr, "tokentop score: --chunk %d is larger than the context (%d)\n", chunk,
                app.eng->n_ctx);
        rc = 2;
        goto done;
    }
    if (o->dump_logits && !(dump = fopen(o->dump_logits, "wb"))) {
        fprintf(stderr, "tokentop: %s: %s\n", o->dump_logits, strerror(errno));
        rc = 1;
        goto done;
    }
    install_sigint();
    int V = app.model->config.V;
    double nll = 0;
    long predicted = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int start = 0; start + 1 < n && !g_interrupted; start += chunk) {
        int len_in = n - 1 - start < chunk ? n - 1 - start : chunk;
        if (engine_forward(app.eng, ids + start, len_in, 0, true, &err) != TT_OK) {
            fprintf(stderr, "tokentop: %s\n", err.msg);
            rc = 1;
            goto done;
        }
        for (int i = 0; i < len_in; i++) {
            const float *l = engine_logits(app.eng, i);
            double mx = -INFINITY;
            for (int v = 0; v < V; v++)
                mx = l[v] > mx ? l[v] : mx;
            double sum = 0;
            for (int v = 0; v < V; v++)
                sum += exp((double)l[v] - mx);
            double lp = (double)l[ids[start + i + 1]] - mx - log(sum);
            if (!isfinite(lp)) {
                fprintf(stderr, "tokentop: non-finite log-probability at token %d\n",
                        start + i + 1);
                rc = 1;
                goto done;
            }
            nll -= lp;
            predicted++;
            if (dump && fwrite(l, sizeof *l, (size_t)V, dump) != (size_t)V) {
                fprintf(stderr, "tokentop: %s: write error\n", o->dump_logits);
                rc = 1;
                goto done;
            }
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    double mean = nll / (double)predicted;
    /* bits per byte: the total NLL in bits over the text's bytes (what a compressor would need;
     * unlike perplexity it does not depend on the tokenizer) */
    double bpb = len > 0 ? nll / log(2.0) / (double)len : 0;   /* --ids: no bytes */
    if (o->json) {
        printf("{\"tokens\":%d,\"predicted\":%ld,\"chunk\":%d,\"mean_nll\":%.9g,"
               "\"perplexity\":%.9g", n, predicted, chunk, mean, exp(mean));
        if (len > 0)
            printf(",\"bytes\":%zu,\"bits_per_byte\":%.9g", len, bpb);
        printf(",\"tok_s\":%.6g%s}\n", predicted / secs,
               g_interrupted ? ",\"interrupted\":true" : "");
    } else {
        printf("tokens %d, predicted %ld (chunks of %d), mean NLL %.6f nats, perplexity %.4f",
               n, predicted, chunk, mean, exp(mean));
        if (len > 0)
            printf(", %.4f bits per byte", bpb);
        printf(" (%.0f tok/s)%s\n", predicted / secs, g_interrupted ? " [interrupted]" : "");
    }
done:
    if (dump && fclose(dump) != 0 && rc == 0) {
        fprintf(stderr, "tokentop: %s: write error\n", o->dump_logits);
        rc = 1;
    }
    free(ids);
    free(text);
    cli_app_free(&app);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * main */

/* The commands that take the common options: run gets them parsed. */
static const struct {
    const char *name;
    int (*run)(cli_options *o);
} app_commands[] = {
    {"generate", app_generate},
    {"tokenize", app_tokenize},
    {"score", app_score},
};

static void usage(FILE *f)
{
    fprintf(f,
"tokentop %s: run GPT-2 and Llama-family models in a terminal and see how they decide.\n"
"\n"
"usage: tokentop [options]                 the interactive REPL (line mode when piped)\n"
"       tokentop generate [options] -p TEXT  generate a continuation (--json: per-token records)\n"
"       tokentop tokenize [-p TEXT|-f FILE]  print token ids\n"
"       tokentop score -f FILE             perplexity of a file\n"
"       tokentop list (or --list-models)   the models it can find (embedded, Ollama's)\n"
"       tokentop bench [options]           prefill/decode speed, memory, bandwidth use\n"
"       tokentop bench --draft DIR --gamma 1..8  speculative decoding: speed-up per gamma\n"
"       tokentop COMMAND --help            options of a command\n"
"       tokentop --version                 the version\n",
            TOKENTOP_VERSION);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && argv[1][0] != '-') {
        const char *cmd = argv[1];
        for (size_t i = 0; i < sizeof app_commands / sizeof app_commands[0]; i++) {
            if (strcmp(cmd, app_commands[i].name) != 0)
                continue;
            cli_options o;
            int status = app_parse(&o, cmd, argc, argv);
            return status >= 0 ? status : app_commands[i].run(&o);
        }
        if (strcmp(cmd, "bench") == 0 && bench_spec_wanted(argc - 1, argv + 1))
            return bench_spec_main(argc - 1, argv + 1);
        if (strcmp(cmd, "bench") == 0) {
            return bench_main(argc - 1, argv + 1);
        }
        if (strcmp(cmd, "list") == 0)
            return list_main(argc - 1, argv + 1);
        if (strcmp(cmd, "help") == 0) {
            usage(stdout);
            return 0;
        }
        fprintf(stderr, "tokentop: unknown command '%s'\n", cmd);
        usage(stderr);
        return 2;
    }
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        fputc('\n', stdout);
        cli_usage(stdout, "");
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "--list-models") == 0)
        return list_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
        printf("tokentop %s\n", TOKENTOP_VERSION);
        return 0;
    }
    return repl_main(argc, argv);
}
