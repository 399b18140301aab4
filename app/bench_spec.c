/* bench_spec.c: `tokentop bench --draft DIR --gamma 1..8`: speculative against plain decoding, per
 * gamma and precision, with the speed-up Leviathan et al.'s model predicts from the measured
 * acceptance and draft/target cost ratio next to the measured one. */
#include "app/bench_spec.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/base/clock.h"
#include "core/engine/engine.h"
#include "core/model/model.h"
#include "core/model/modelgen.h"
#include "core/decode/speculative.h"
#include "core/cpu/threads.h"
#include "core/tokenizer/tokenizer.h"
#include "app/cli.h"
#include "app/draft.h"
#include "core/base/jsonw.h"
#include "core/session/session.h"
#include "core/base/util.h"

/* The default prompts: five openings the embedded models know (each run alternates plain and
 * speculative over all of them, as a user's turns would). */
static const char *const default_prompts[] = {
    "In the beginning God created the heaven and the earth.",
    "And it came to pass, when men began to multiply on the face of the earth,",
    "The LORD is my shepherd; I shall not want.",
    "Blessed are the poor in spirit: for theirs is the kingdom of heaven.",
    "And the king said unto Nathan the prophet,",
};
#define N_DEFAULT_PROMPTS 5
#define COST_STEPS 16      /* single-token forwards timed per engine and repetition */
#define VERIFY_REPS 5      /* verification spans timed per gamma and repetition */

typedef struct {
    const char *model_dir, *draft_dir;
    bool random_pair;
    double noise;
    const char *pair_dir;          /* --pair-dir: write the random pair here and keep it */
    int gammas[SPEC_GAMMA_MAX];    /* 0: auto (the tuner, the session's default) */
    int n_gammas;
    tt_dtype dtypes[4];
    int n_dtypes;                  /* 0: each model's file dtype, as generate loads them */
    int gen_tokens, reps, n_threads;
    const char *prompts[N_DEFAULT_PROMPTS];
    int n_prompts;
    sampler_params sampler;
    unsigned given;                /* CLI_GIVEN_TEMP/TOP_K/TOP_P/GREEDY: the rest comes from the
                                      target's generation_config, as in generate and the REPL */
    uint64_t seed;
    bool json;
} sb_options;

typedef struct {
    int gamma;
    double tok_s;                  /* median over the runs */
    double speedup;                /* tok_s / baseline tok_s */
    long drafted, accepted, rejections, rounds, produced;
    double acceptance;             /* accepted / drafted */
    double alpha;                  /* per-token acceptance: accepted / (accepted + rejections) */
    double tokens_per_pass;
    double predicted;              /* (1 - a^g) / ((1 - a)(g c + 1)) */
    double predicted_verify;       /* tokens_per_pass * t_target / (t_draft' + (g-1) t_draft +
                                      t_verify(g)) */
    double verify_ms;              /* one (g+1)-token verification forward */
    double loop_ms, loop_draft_ms, loop_target_ms;  /* in the generation loop, summed over runs */
    spec_stats parts;              /* the per-part times, summed over runs */
    int gamma_last;                /* auto: the gamma the tuner ended on (last run) */
} sb_row;

/* ---------------------------------------------------------------------------------------------
 * Helpers */

static double loadavg(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

bool bench_spec_wanted(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--draft") == 0 || strncmp(argv[i], "--draft=", 8) == 0 ||
            strcmp(argv[i], "--random-pair") == 0 || strncmp(argv[i], "--random-pair=", 14) == 0)
            return true;
    return false;
}

/* A comma-separated list of "auto", "N" and "A..B" ("1..8", "4", "1,2,4,auto") into o->gammas
 * (auto as 0); -1 on a malformed list. */
static int parse_gammas(sb_options *o, const char *s)
{
    o->n_gammas = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long a, b;
        if (strncmp(p, "auto", 4) == 0) {
            a = b = 0;
            end = (char *)p + 4;
        } else {
            a = b = strtol(p, &end, 10);
            if (end == p || a < 1)
                return -1;
            if (strncmp(end, "..", 2) == 0) {
                const char *q = end + 2;
                b = strtol(q, &end, 10);
                if (end == q || b < a)
                    return -1;
            }
            if (b > SPEC_GAMMA_MAX)
                return -1;
        }
        for (long g = a; g <= b; g++) {
            if (o->n_gammas == SPEC_GAMMA_MAX)
                return -1;
            o->gammas[o->n_gammas++] = (int)g;
        }
        if (*end == ',' && end[1])
            end++;
        else if (*end)
            return -1;
        p = end;
    }
    return o->n_gammas > 0 ? 0 : -1;
}

static int parse_dtypes(sb_options *o, const char *s)
{
    o->n_dtypes = 0;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->n_dtypes == 4 || tt_dtype_parse(t, &o->dtypes[o->n_dtypes]) != 0)
            return -1;
        o->n_dtypes++;
    }
    return o->n_dtypes > 0 ? 0 : -1;
}

static int parse_int_arg(const char *name, const char *s, long lo, long hi, int *out)
{
    long v;
    if (util_parse_long(s, lo, hi, &v) != UTIL_PARSE_OK) {
        fprintf(stderr, "tokentop bench: %s: '%s' is not an integer in [%ld, %ld]\n", name, s,
                lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
"usage: tokentop bench --draft DIR [--model DIR] [--gamma auto|1..8] [options]\n"
"       tokentop bench --random-pair NOISE [--gamma auto|1..8] [options]\n"
"Speculative decoding against plain decoding: tokens/s, speed-up, acceptance and tokens per\n"
"target pass for each gamma and precision, and the speed-up predicted from the measured\n"
"acceptance a and draft/target cost ratio c: S = (1 - a^g) / ((1 - a)(g c + 1)).\n"
"  --model DIR          target (default: the embedded model)\n"
"  --draft DIR          draft model (same tokenizer and vocab_size as the target)\n"
"  --random-pair NOISE  write a random pair instead: target with GPT-2 124M shapes, draft with\n"
"                       C 256, L 2; the target's logits are the draft's plus noise (0: equal)\n"
"  --pair-dir DIR       write that pair to DIR/target and DIR/draft and keep it (DIR must exist)\n"
"By default it measures what generate --draft and the REPL do: the models' own precisions, auto\n"
"threads, the target's generation_config sampler, gamma chosen from measured costs, 5 prompts.\n"
"  --gamma LIST         auto (default) | 1..8 | 4 | 1,2,4,auto\n"
"  --dtype LIST         fp32 | fp16 | bf16 | q8, comma-separated (default: each file's)\n"
"  --gen-tokens N       tokens per run (default 200)    --reps R  rounds of prompts (default 1)\n"
"  --prompt TEXT        one prompt instead of the 5     --threads N  CPU threads (default auto)\n"
"  --temp X --top-k N --top-p X --greedy --seed N   sampler (default: generation_config)\n"
"  --json               one JSON object per precision\n");
}

enum { SB_MODEL = 256, SB_DRAFT, SB_RANDOM, SB_PAIR_DIR, SB_GAMMA, SB_DTYPE, SB_GEN, SB_REPS, SB_PROMPT,
       SB_THREADS, SB_TEMP, SB_TOPK, SB_TOPP, SB_GREEDY, SB_SEED, SB_JSON, SB_HELP };

static int parse(sb_options *o, int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, SB_MODEL}, {"draft", required_argument, 0, SB_DRAFT},
        {"random-pair", required_argument, 0, SB_RANDOM},
        {"pair-dir", required_argument, 0, SB_PAIR_DIR},
        {"gamma", required_argument, 0, SB_GAMMA}, {"dtype", required_argument, 0, SB_DTYPE},
        {"gen-tokens", required_argument, 0, SB_GEN}, {"reps", required_argument, 0, SB_REPS},
        {"prompt", required_argument, 0, SB_PROMPT},
        {"threads", required_argument, 0, SB_THREADS}, {"temp", required_argument, 0, SB_TEMP},
        {"top-k", required_argument, 0, SB_TOPK}, {"top-p", required_argument, 0, SB_TOPP},
        {"greedy", no_argument, 0, SB_GREEDY},
        {"seed", required_argument, 0, SB_SEED}, {"json", no_argument, 0, SB_JSON},
        {"help", no_argument, 0, SB_HELP}, {0, 0, 0, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    tt_error err;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        const char *a = optarg;
        switch (c) {
        case SB_MODEL: o->model_dir = a; break;
        case SB_PAIR_DIR: o->pair_dir = a; break;
        case SB_DRAFT: o->draft_dir = a; break;
        case SB_RANDOM: {
            char *end;
            o->noise = strtod(a, &end);
            if (end == a || *end || !(o->noise >= 0 && o->noise <= 100)) {
                fprintf(stderr, "tokentop bench: --random-pair: '%s' is not a noise level in "
                        "[0, 100]\n", a);
                return -1;
            }
            o->random_pair = true;
            break;
        }
        case SB_GAMMA:
            if (parse_gammas(o, a) != 0) {
                fprintf(stderr, "tokentop bench: --gamma: '%s' is not auto, N, A..B or a list of "
                        "them, each N in [1, %d]\n", a, SPEC_GAMMA_MAX);
                return -1;
            }
            break;
        case SB_DTYPE:
            if (parse_dtypes(o, a) != 0) {
                fprintf(stderr, "tokentop bench: --dtype: '%s' is not a list of fp32, fp16, "
                        "bf16, q8\n", a);
                return -1;
            }
            break;
        case SB_GEN:
            if (parse_int_arg("--gen-tokens", a, 2, 100000, &o->gen_tokens))
                return -1;
            break;
        case SB_REPS:
            if (parse_int_arg("--reps", a, 1, 1000, &o->reps))
                return -1;
            break;
        case SB_PROMPT:
            o->prompts[0] = a;
            o->n_prompts = 1;
            break;
        case SB_GREEDY:
            o->sampler.greedy = true;
            o->given |= CLI_GIVEN_GREEDY;
            break;
        case SB_THREADS:
            if (parse_int_arg("--threads", a, 1, 1024, &o->n_threads))
                return -1;
            break;
        case SB_TEMP: case SB_TOPK: case SB_TOPP: {
            const char *name = c == SB_TEMP ? "temp" : c == SB_TOPK ? "top_k" : "top_p";
            if (sampler_params_set(&o->sampler, name, a, &err) != TT_OK) {
                fprintf(stderr, "tokentop bench: %s\n", err.msg);
                return -1;
            }
            if (c == SB_TEMP)
                o->sampler.greedy = o->sampler.temperature == 0;
            o->given |= c == SB_TEMP ? CLI_GIVEN_TEMP : c == SB_TOPK ? CLI_GIVEN_TOP_K
                                                                    : CLI_GIVEN_TOP_P;
            break;
        }
        case SB_SEED: {
            int seed;
            if (parse_int_arg("--seed", a, 0, 2147483647, &seed))
                return -1;
            o->seed = (uint64_t)seed;
            break;
        }
        case SB_JSON: o->json = true; break;
        case SB_HELP: case 'h': usage(stdout); return 1;
        case ':':
            fprintf(stderr, "tokentop bench: %s needs a value\n", argv[optind - 1]);
            return -1;
        default:
            fprintf(stderr, "tokentop bench: unknown option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tokentop bench: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (o->random_pair == (o->draft_dir != NULL)) {
        fprintf(stderr, "tokentop bench: give either --draft DIR or --random-pair NOISE\n");
        return -1;
    }
    if (o->random_pair && o->model_dir) {
        fprintf(stderr, "tokentop bench: --random-pair writes its own target; drop --model\n");
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Measurements */

/* Median time of one single-token forward after the prompt (the decode cost of a token). */
static double time_decode(engine *e, const int32_t *ids, int n, tt_error *err)
{
    double t[COST_STEPS];
    if (engine_forward(e, ids, n, 0, false, err) != TT_OK)
        return -1;
    for (int i = 0; i < COST_STEPS; i++) {
        int32_t tok = ids[i % n];
        double t0 = tt_now_ms();
        if (engine_forward(e, &tok, 1, n + i, false, err) != TT_OK)
            return -1;
        t[i] = tt_now_ms() - t0;
    }
    engine_truncate(e, 0);
    return tt_median(t, COST_STEPS);
}

/* Median time of one draft step taken right after a target decode step, as in a speculative
 * round: the target's pass evicts part of the draft's weights from the core's caches, so a
 * small draft costs more here than alone (on the embedded pair about 25% more). */
static double time_decode_after(engine *e, engine *other, const int32_t *ids, int n,
                                tt_error *err)
{
    double t[COST_STEPS];
    if (engine_forward(e, ids, n, 0, false, err) != TT_OK ||
        engine_forward(other, ids, n, 0, false, err) != TT_OK)
        return -1;
    for (int i = 0; i < COST_STEPS; i++) {
        int32_t tok = ids[i % n];
        engine_truncate(other, n);
        if (engine_forward(other, &tok, 1, n, false, err) != TT_OK)
            return -1;
        double t0 = tt_now_ms();
        if (engine_forward(e, &tok, 1, n + i, false, err) != TT_OK)
            return -1;
        t[i] = tt_now_ms() - t0;
    }
    engine_truncate(e, 0);
    engine_truncate(other, 0);
    return tt_median(t, COST_STEPS);
}

/* Median time of the verification forward: g tokens with all logits (a round of g drafts verifies
 * g positions: the last token of the window and the first g-1 drafts), after the prompt. */
static double time_verify(engine *e, const int32_t *ids, int n, int g, tt_error *err)
{
    double t[VERIFY_REPS];
    int32_t span[SPEC_GAMMA_MAX + 1];
    g = g < 1 ? 1 : g;
    for (int i = 0; i < g; i++)
        span[i] = ids[i % n];
    if (engine_forward(e, ids, n, 0, false, err) != TT_OK)
        return -1;
    for (int i = 0; i < VERIFY_REPS; i++) {
        double t0 = tt_now_ms();
        if (engine_forward(e, span, g, n - 1, true, err) != TT_OK)
            return -1;
        t[i] = tt_now_ms() - t0;
    }
    engine_truncate(e, 0);
    return tt_median(t, VERIFY_REPS);
}

typedef struct {
    double tok_s;
    double gen_ms;                 /* the generation's wall time (prefill excluded) */
    spec_stats spec;
} sb_run;

/* One generation of o->gen_tokens after the prompt (EOS ignored, so every run has the same
 * length), as generate runs it (lean: no snapshots); tokens/s over the generation itself (prefill
 * excluded). gamma 0: auto, the session's default. */
static int run_once(const sb_options *o, const model *m, const tokenizer *tok, engine *te,
                    engine *de, const char *prompt, int gamma, sb_run *out, int *gamma_last,
                    tt_error *err)
{
    session_settings set;
    session_settings_default(&set);
    set.sampler = o->sampler;
    set.max_new_tokens = o->gen_tokens;
    set.stop_at_eos = false;
    set.seed = o->seed;
    session s;
    if (session_init(&s, m, tok, te, &set, err) != TT_OK)
        return -1;
    s.lean = true;                 /* as `generate` without --json */
    int rc = -1;
    if (de && (session_set_draft(&s, de, err) != TT_OK ||
               session_set_gamma(&s, gamma > 0 ? gamma : s.gamma, gamma == 0, err) != TT_OK))
        goto out;
    if (session_add_user_text(&s, prompt, strlen(prompt), err) != TT_OK ||
        session_generate(&s, NULL, NULL, err) != TT_OK)
        goto out;
    const session_stats *st = &s.last;
    double gen_ms = st->ttft_ms - st->prefill_ms + st->decode_ms;
    out->tok_s = gen_ms > 0 ? st->generated_tokens / (gen_ms / 1e3) : 0;
    out->gen_ms = gen_ms;
    memset(&out->spec, 0, sizeof out->spec);
    if (de) {
        out->spec = *spec_get_stats(s.spec);
        *gamma_last = s.gamma;
    }
    rc = 0;
out:
    session_free(&s);
    return rc;
}

static void add_parts(spec_stats *sum, const spec_stats *st)
{
    sum->draft_sync_ms += st->draft_sync_ms;
    sum->draft_forward_ms += st->draft_forward_ms;
    sum->draft_chain_ms += st->draft_chain_ms;
    sum->verify_forward_ms += st->verify_forward_ms;
    sum->verify_chain_ms += st->verify_chain_ms;
}

/* ---------------------------------------------------------------------------------------------
 * One precision */

typedef struct {
    tt_dtype dtype;
    bool file_dtypes;              /* each model in its file's precision (dtype unused) */
    char target_desc[160], draft_desc[160];
    double t_target_ms, t_draft_ms, c;
    double t_draft_after_ms;       /* a draft step right after a target step (t_draft') */
    double baseline_tok_s;
    double load_before, load_after;
    sb_row rows[SPEC_GAMMA_MAX];
    int n_rows;
} sb_result;

/* Runs are interleaved: each repetition measures the costs, then for every prompt the baseline
 * and every gamma in turn, so a change in the machine's load hits all of them alike; speed-ups
 * are medians of the per-run ratios to the baseline run of the same prompt next to them. */
static int bench_dtype(const sb_options *o, const model *tm, const model *dm,
                       const tokenizer *tok, const tt_dtype *dtype, sb_result *res, tt_error *err)
{
    memset(res, 0, sizeof *res);
    res->file_dtypes = !dtype;
    res->dtype = dtype ? *dtype : tm->file_dtype;
    res->load_before = loadavg();
    int32_t *ids = NULL;
    int n = 0;
    if (tokenizer_encode(tok, o->prompts[0], strlen(o->prompts[0]), &ids, &n, err) != TT_OK)
        return -1;
    int gmax = SPEC_TUNER_MAX;
    for (int i = 0; i < o->n_gammas; i++)
        gmax = o->gammas[i] > gmax ? o->gammas[i] : gmax;
    /* the models' own context, as a user runs them (a long run shifts it, as theirs would) */
    int n_ctx = tm->config.maxT < dm->config.maxT ? tm->config.maxT : dm->config.maxT;
    if (n + COST_STEPS + gmax + 2 > n_ctx || n < 1) {
        tt_fail(err, TT_ERR_ARG, "bench: the prompt (%d tokens) does not fit the models' "
                "contexts (%d, %d)", n, tm->config.maxT, dm->config.maxT);
        free(ids);
        return -1;
    }
    /* The costs are timed at the middle of a generation's context (the prompt cycled to
     * n + gen/2 tokens), where attention costs what it costs on average in the runs. */
    int n_cost = n + o->gen_tokens / 2;
    if (n_cost > n_ctx - COST_STEPS - gmax - 2)
        n_cost = n_ctx - COST_STEPS - gmax - 2;
    if (n_cost < n)
        n_cost = n;
    int32_t *cost_ids = malloc((size_t)n_cost * sizeof *cost_ids);
    if (!cost_ids) {
        free(ids);
        tt_fail(err, TT_ERR_NOMEM, "bench: out of memory");
        return -1;
    }
    for (int i = 0; i < n_cost; i++)
        cost_ids[i] = ids[i % n];
    engine_options eo, deo;
    engine_options_default(&eo);
    eo.dtype = dtype ? *dtype : tm->file_dtype;
    eo.n_threads = o->n_threads;
    eo.n_ctx = n_ctx;
    deo = eo;
    deo.dtype = dtype ? *dtype : draft_default_dtype(dm, true);   /* as draft_load */
    engine *te = NULL, *de = NULL;
    int P = o->n_prompts, R = o->reps * P, G = o->n_gammas, rc = -1;
    /* (reps) per repetition; (R) per run of a prompt; (G, R) per gamma and run */
    double *t_t = calloc((size_t)o->reps, sizeof(double));
    double *t_d = calloc((size_t)o->reps, sizeof(double));
    double *t_da = calloc((size_t)o->reps, sizeof(double));
    double *base = calloc((size_t)R, sizeof(double));
    double *spec_ts = calloc((size_t)(G * R), sizeof(double));
    double *ratio = calloc((size_t)(G * R), sizeof(double));
    double *ver = calloc((size_t)(G * o->reps), sizeof(double));
    if (!t_t || !t_d || !t_da || !base || !spec_ts || !ratio || !ver) {
        tt_fail(err, TT_ERR_NOMEM, "bench: out of memory");
        goto out;
    }
    if (cpu_engine_create(tm, &eo, &te, err) != TT_OK || cpu_engine_create(dm, &deo, &de, err))
        goto out;
    snprintf(res->target_desc, sizeof res->target_desc, "%s", te->description);
    snprintf(res->draft_desc, sizeof res->draft_desc, "%s", de->description);
    /* warm both engines once (page faults, thread start) before timing */
    if (time_decode(te, cost_ids, n_cost, err) < 0 || time_decode(de, cost_ids, n_cost, err) < 0)
        goto out;
    res->n_rows = G;
    for (int gi = 0; gi < G; gi++) {
        memset(&res->rows[gi], 0, sizeof res->rows[gi]);
        res->rows[gi].gamma = o->gammas[gi];
    }
    sb_run run;
    for (int r = 0; r < o->reps; r++) {
        if (!o->json)
            fprintf(stderr, "tokentop bench: %s: repetition %d of %d ...\n",
                    dtype ? tt_dtype_name(*dtype) : "default precisions", r + 1, o->reps);
        t_t[r] = time_decode(te, cost_ids, n_cost, err);
        t_d[r] = time_decode(de, cost_ids, n_cost, err);
        t_da[r] = time_decode_after(de, te, cost_ids, n_cost, err);
        if (t_t[r] < 0 || t_d[r] < 0 || t_da[r] < 0)
            goto out;
        for (int p = 0; p < P; p++) {
            int k = r * P + p;
            if (run_once(o, tm, tok, te, NULL, o->prompts[p], 0, &run, NULL, err) != 0)
                goto out;
            base[k] = run.tok_s;
            for (int gi = 0; gi < G; gi++) {
                sb_row *row = &res->rows[gi];
                if (run_once(o, tm, tok, te, de, o->prompts[p], row->gamma, &run,
                             &row->gamma_last, err) != 0)
                    goto out;
                spec_ts[gi * R + k] = run.tok_s;
                ratio[gi * R + k] = run.tok_s / base[k];
                row->drafted += run.spec.drafted;
                row->accepted += run.spec.accepted;
                row->rejections += run.spec.rejections;
                row->rounds += run.spec.rounds;
                row->produced += run.spec.produced;
                row->loop_ms += run.gen_ms;
                row->loop_draft_ms += run.spec.draft_ms;
                row->loop_target_ms += run.spec.target_ms;
                add_parts(&row->parts, &run.spec);
            }
        }
        for (int gi = 0; gi < G; gi++) {
            int g = res->rows[gi].gamma > 0 ? res->rows[gi].gamma : res->rows[gi].gamma_last;
            if ((ver[gi * o->reps + r] = time_verify(te, cost_ids, n_cost, g, err)) < 0)
                goto out;
        }
    }
    res->t_target_ms = tt_median(t_t, o->reps);
    res->t_draft_ms = tt_median(t_d, o->reps);
    res->t_draft_after_ms = tt_median(t_da, o->reps);
    res->c = res->t_draft_ms / res->t_target_ms;
    res->baseline_tok_s = tt_median(base, R);
    for (int gi = 0; gi < G; gi++) {
        sb_row *row = &res->rows[gi];
        row->tok_s = tt_median(spec_ts + gi * R, R);
        row->speedup = tt_median(ratio + gi * R, R);
        row->verify_ms = tt_median(ver + gi * o->reps, o->reps);
        row->acceptance = row->drafted ? (double)row->accepted / row->drafted : 0;
        row->alpha = row->accepted + row->rejections
                         ? (double)row->accepted / (row->accepted + row->rejections) : 0;
        row->tokens_per_pass = row->rounds ? (double)row->produced / row->rounds : 0;
        /* auto: the model at the mean gamma the rounds used */
        int g = row->gamma > 0 ? row->gamma
                               : (int)lround(row->rounds ? (double)row->drafted / row->rounds : 1);
        g = g < 1 ? 1 : g;
        row->predicted = spec_predicted_speedup(row->alpha, g, res->c);
        /* a round's first draft step follows the target's pass, the others follow the draft */
        row->predicted_verify = row->tokens_per_pass * res->t_target_ms /
                                (res->t_draft_after_ms + (g - 1) * res->t_draft_ms +
                                 row->verify_ms);
    }
    res->load_after = loadavg();
    rc = 0;
out:
    free(t_t);
    free(t_d);
    free(t_da);
    free(base);
    free(spec_ts);
    free(ratio);
    free(ver);
    engine_free(de);
    engine_free(te);
    free(cost_ids);
    free(ids);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Output */

/* "4", or "auto" with the gamma the tuner ended on: "auto:3". */
static void gamma_label(const sb_row *w, char *buf, size_t cap)
{
    if (w->gamma > 0)
        snprintf(buf, cap, "%d", w->gamma);
    else
        snprintf(buf, cap, "auto:%d", w->gamma_last);
}

static void print_table(const sb_options *o, const model *tm, const model *dm, const char *tname,
                        const char *dname, const sb_result *r)
{
    char chain[160];
    sampler_params_format(&o->sampler, chain, sizeof chain);
    printf("\nspeculative decoding, %s: target %s (%.1fM params), draft %s (%.1fM params)\n",
           r->file_dtypes ? "default precisions" : tt_dtype_name(r->dtype), tname,
           tm->n_params / 1e6, dname, dm->n_params / 1e6);
    printf("  target %s | draft %s\n  %s | %d prompts x %d tokens x %d reps (medians) | load "
           "%.2f -> %.2f on %d cores\n", r->target_desc, r->draft_desc, chain, o->n_prompts,
           o->gen_tokens, o->reps, r->load_before, r->load_after, threadpool_cores());
    printf("  decode cost per token: target %.2f ms, draft %.2f ms (%.2f ms right after a target "
           "step) -> c = %.3f | baseline %.2f tok/s | speed-up: median of per-run ratios to the "
           "baseline run next to it\n",
           r->t_target_ms, r->t_draft_ms, r->t_draft_after_ms, r->c, r->baseline_tok_s);
    printf("  gamma  tok/s    speed-up  accept  alpha  tok/pass  verify ms  predicted  "
           "meas/pred  pred(verify)  meas/pred(v)\n");
    for (int i = 0; i < r->n_rows; i++) {
        const sb_row *w = &r->rows[i];
        char gname[16];
        gamma_label(w, gname, sizeof gname);
        printf("  %5s  %7.2f  %7.2fx  %6.3f  %5.3f  %8.2f  %9.2f  %8.2fx  %9.2f  %11.2fx  %12.2f\n",
               gname, w->tok_s, w->speedup, w->acceptance, w->alpha, w->tokens_per_pass,
               w->verify_ms, w->predicted, w->speedup / w->predicted, w->predicted_verify,
               w->speedup / w->predicted_verify);
    }
    printf("  accept: accepted / drafted; alpha: accepted / tested drafts (the per-token rate);\n"
           "  predicted: (1 - alpha^g) / ((1 - alpha)(g c + 1)) (Leviathan et al.'s model for rounds\n"
           "  without a bonus token; assumes a\n"
           "  verification pass costs one decode step); pred(verify): tok/pass x target step /\n"
           "  (a draft step right after a target step + g-1 draft steps + the measured verification\n"
           "  pass of g tokens)\n");
    printf("  where a round's time goes, measured in the loop (ms per round, all runs): the draft\n"
           "  catching up (sync: a token or two; its whole window after a context shift), its\n"
           "  forwards and its sampler chains; the target's catch-up and verification forward, and\n"
           "  the chains on its rows with the acceptance tests; rest = the session's bookkeeping\n"
           "  gamma  rounds  d.sync  d.fwd  d.chain  v.fwd  v.chain  rest   total ms\n");
    for (int i = 0; i < r->n_rows; i++) {
        const sb_row *w = &r->rows[i];
        const spec_stats *q = &w->parts;
        double n = w->rounds > 0 ? (double)w->rounds : 1.0;
        double rest = (w->loop_ms - w->loop_draft_ms - w->loop_target_ms) / n;
        char gname[16];
        gamma_label(w, gname, sizeof gname);
        printf("  %5s  %6ld  %6.3f  %5.3f  %7.3f  %5.3f  %7.3f  %5.3f  %8.3f\n", gname, w->rounds,
               q->draft_sync_ms / n, q->draft_forward_ms / n, q->draft_chain_ms / n,
               q->verify_forward_ms / n, q->verify_chain_ms / n, rest, w->loop_ms / n);
    }
    fflush(stdout);
}

static double per_round(const sb_row *w, double ms)
{
    return w->rounds ? ms / w->rounds : 0.0;
}

static void print_json(const sb_options *o, const char *tname, const char *dname,
                       const sb_result *r)
{
    printf("{\"precision\":\"%s\",\"target\":", r->file_dtypes ? "file" : tt_dtype_name(r->dtype));
    jsonw_string(stdout, tname, strlen(tname));
    fputs(",\"draft\":", stdout);
    jsonw_string(stdout, dname, strlen(dname));
    fputs(",\"engine\":", stdout);
    jsonw_string(stdout, r->target_desc, strlen(r->target_desc));
    printf(",\"gen_tokens\":%d,\"reps\":%d,\"target_ms\":%.4f,\"draft_ms\":%.4f,\"draft_after_target_ms\":%.4f,"
           "\"c\":%.5f,\"baseline_tok_s\":%.4f,\"load_before\":%.2f,\"load_after\":%.2f,\"rows\":[",
           o->gen_tokens, o->reps, r->t_target_ms, r->t_draft_ms, r->t_draft_after_ms, r->c,
           r->baseline_tok_s,
           r->load_before, r->load_after);
    for (int i = 0; i < r->n_rows; i++) {
        const sb_row *w = &r->rows[i];
        if (w->gamma > 0)
            printf("%s{\"gamma\":%d,", i ? "," : "", w->gamma);
        else
            printf("%s{\"gamma\":\"auto\",\"gamma_last\":%d,", i ? "," : "", w->gamma_last);
        printf("\"tok_s\":%.4f,\"speedup\":%.4f,\"drafted\":%ld,\"accepted\":%ld,"
               "\"acceptance_rate\":%.4f,\"alpha\":%.4f,\"tokens_per_target_pass\":%.4f,"
               "\"verify_ms\":%.4f,\"predicted_speedup\":%.4f,\"predicted_speedup_verify\":%.4f,"
               "\"rounds\":%ld,\"round_draft_ms\":%.4f,\"round_target_ms\":%.4f,"
               "\"round_ms\":%.4f,\"round_draft_sync_ms\":%.4f,\"round_draft_forward_ms\":%.4f,"
               "\"round_draft_chain_ms\":%.4f,\"round_verify_forward_ms\":%.4f,"
               "\"round_verify_chain_ms\":%.4f}",
               w->tok_s, w->speedup, w->drafted, w->accepted,
               w->acceptance, w->alpha, w->tokens_per_pass, w->verify_ms, w->predicted,
               w->predicted_verify, w->rounds, w->rounds ? w->loop_draft_ms / w->rounds : 0.0,
               w->rounds ? w->loop_target_ms / w->rounds : 0.0,
               w->rounds ? w->loop_ms / w->rounds : 0.0, per_round(w, w->parts.draft_sync_ms),
               per_round(w, w->parts.draft_forward_ms), per_round(w, w->parts.draft_chain_ms),
               per_round(w, w->parts.verify_forward_ms), per_round(w, w->parts.verify_chain_ms));
    }
    puts("]}");
    fflush(stdout);
}

/* ---------------------------------------------------------------------------------------------
 * Entry */

int bench_spec_main(int argc, char **argv)
{
    sb_options o;
    memset(&o, 0, sizeof o);
    sampler_params_default(&o.sampler);
    o.gen_tokens = 200;
    o.reps = 1;
    for (int i = 0; i < N_DEFAULT_PROMPTS; i++)
        o.prompts[i] = default_prompts[i];
    o.n_prompts = N_DEFAULT_PROMPTS;
    parse_gammas(&o, "auto");
    int rc = parse(&o, argc, argv);
    if (rc != 0)
        return rc < 0 ? 2 : 0;

    tt_error err = {0};
    char tmp[4096] = "", tdir[4200], ddir[4200];
    const char *target_dir = o.model_dir, *draft_dir = o.draft_dir;
    if (o.random_pair) {
        const char *base = getenv("TMPDIR");
        snprintf(tmp, sizeof tmp, "%s/tokentop-spec-XXXXXX", base && *base ? base : "/tmp");
        if (o.pair_dir)
            snprintf(tmp, sizeof tmp, "%s", o.pair_dir);
        else if (!mkdtemp(tmp)) {
            fprintf(stderr, "tokentop bench: cannot create %s: %s\n", tmp, strerror(errno));
            return 1;
        }
        snprintf(tdir, sizeof tdir, "%s/target", tmp);
        snprintf(ddir, sizeof ddir, "%s/draft", tmp);
        fprintf(stderr, "tokentop bench: writing a random pair (target GPT-2 124M shapes, draft C "
                "256 L 2, noise %g) to %s\n", o.noise, tmp);
        if (modelgen_write_pair(tdir, ddir, o.noise, o.seed + 1, &err) != TT_OK) {
            fprintf(stderr, "tokentop bench: %s\n", err.msg);
            if (!o.pair_dir)
                modelgen_remove_dir(tmp);
            return 1;
        }
        target_dir = tdir;
        draft_dir = ddir;
    }
    cli_options co;
    cli_options_default(&co);
    co.model_dir = target_dir;
    const char *dir = cli_model_dir(&co);
    model *tm = NULL, *dm = NULL;
    tokenizer *tok = NULL, *dtok = NULL;
    rc = 1;
    if (!dir)
        goto out;
    if (tokenizer_load_dir(dir, &tok, &err) != TT_OK ||
        tokenizer_load_dir(draft_dir, &dtok, &err) != TT_OK ||
        model_load(dir, &tm, &err) != TT_OK || model_load(draft_dir, &dm, &err) != TT_OK) {
        fprintf(stderr, "tokentop bench: %s\n", err.msg);
        goto out;
    }
    if (!tokenizer_equal(tok, dtok) || tm->config.V != dm->config.V) {
        fprintf(stderr, "tokentop bench: draft model %s: its tokenizer or vocab_size differs from "
                "the target %s's\n", draft_dir, dir);
        goto out;
    }
    /* the sampler a user meets: the target's generation_config under what was given */
    cli_options go;
    cli_options_default(&go);
    go.set.sampler = o.sampler;
    go.given = o.given;
    go.seed_set = true;
    cli_apply_generation_defaults(&go, tm);
    o.sampler = go.set.sampler;
    const char *tname = o.random_pair ? "gpt2-random" : tm->name;
    const char *dname = o.random_pair ? "gpt2-random-draft" : dm->name;
    for (int i = 0; i < (o.n_dtypes ? o.n_dtypes : 1); i++) {
        sb_result *res = malloc(sizeof *res);
        if (!res || bench_dtype(&o, tm, dm, tok, o.n_dtypes ? &o.dtypes[i] : NULL, res,
                                &err) != 0) {
            fprintf(stderr, "tokentop bench: %s\n", res ? err.msg : "out of memory");
            free(res);
            goto out;
        }
        if (o.json)
            print_json(&o, tname, dname, res);
        else
            print_table(&o, tm, dm, tname, dname, res);
        free(res);
    }
    rc = 0;
out:
    model_free(dm);
    model_free(tm);
    tokenizer_free(dtok);
    tokenizer_free(tok);
    if (tmp[0] && !o.pair_dir)
        modelgen_remove_dir(tmp);
    return rc;
}
