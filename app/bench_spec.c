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

#include "core/clock.h"
#include "core/engine.h"
#include "core/model.h"
#include "core/modelgen.h"
#include "core/speculative.h"
#include "core/threads.h"
#include "core/tokenizer.h"
#include "app/cli.h"
#include "core/jsonw.h"
#include "core/session.h"
#include "core/util.h"

#define DEFAULT_PROMPT "In the beginning God created the heaven and the earth."
#define COST_STEPS 16      /* single-token forwards timed per engine and repetition */
#define VERIFY_REPS 5      /* verification spans timed per gamma and repetition */

typedef struct {
    const char *model_dir, *draft_dir;
    bool random_pair;
    double noise;
    const char *pair_dir;          /* --pair-dir: write the random pair here and keep it */
    int gammas[SPEC_GAMMA_MAX];
    int n_gammas;
    tt_dtype dtypes[4];
    int n_dtypes;
    int gen_tokens, reps, n_threads;
    const char *prompt;
    sampler_params sampler;
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
    double predicted;              /* (1 - a^(g+1)) / ((1 - a)(g c + 1)) */
    double predicted_verify;       /* tokens_per_pass * t_target / (t_draft' + (g-1) t_draft +
                                      t_verify(g)) */
    double verify_ms;              /* one (g+1)-token verification forward */
    double loop_ms, loop_draft_ms, loop_target_ms;  /* in the generation loop, summed over runs */
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

/* "1..8", "4" or "1,2,4" into o->gammas; -1 on a malformed list. */
static int parse_gammas(sb_options *o, const char *s)
{
    o->n_gammas = 0;
    char *end;
    long a = strtol(s, &end, 10);
    if (end != s && strncmp(end, "..", 2) == 0) {
        const char *p = end + 2;
        long b = strtol(p, &end, 10);
        if (end == p || *end || a < 1 || b < a || b > SPEC_GAMMA_MAX)
            return -1;
        for (long g = a; g <= b; g++)
            o->gammas[o->n_gammas++] = (int)g;
        return 0;
    }
    const char *p = s;
    while (*p) {
        long g = strtol(p, &end, 10);
        if (end == p || g < 1 || g > SPEC_GAMMA_MAX || o->n_gammas == SPEC_GAMMA_MAX)
            return -1;
        o->gammas[o->n_gammas++] = (int)g;
        if (*end == ',')
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
"usage: tokentop bench --draft DIR [--model DIR] [--gamma 1..8] [options]\n"
"       tokentop bench --random-pair NOISE [--gamma 1..8] [options]\n"
"Speculative decoding against plain decoding: tokens/s, speed-up, acceptance and tokens per\n"
"target pass for each gamma and precision, and the speed-up predicted from the measured\n"
"acceptance a and draft/target cost ratio c: S = (1 - a^(g+1)) / ((1 - a)(g c + 1)).\n"
"  --model DIR          target (default: the embedded model)\n"
"  --draft DIR          draft model (same tokenizer and vocab_size as the target)\n"
"  --random-pair NOISE  write a random pair instead: target with GPT-2 124M shapes, draft with\n"
"                       C 256, L 2; the target's logits are the draft's plus noise (0: equal)\n"
"  --pair-dir DIR       write that pair to DIR/target and DIR/draft and keep it (DIR must exist)\n"
"  --gamma LIST         1..8 (default) | 4 | 1,2,4\n"
"  --dtype LIST         fp32 (default) | fp16 | bf16 | q8, comma-separated\n"
"  --gen-tokens N       tokens per run (default 128)    --reps R  runs per row (default 3)\n"
"  --prompt TEXT        prompt (default: Genesis 1:1)   --threads N  CPU threads\n"
"  --temp X --top-k N --top-p X --seed N   sampler (default greedy)\n"
"  --json               one JSON object per precision\n");
}

enum { SB_MODEL = 256, SB_DRAFT, SB_RANDOM, SB_PAIR_DIR, SB_GAMMA, SB_DTYPE, SB_GEN, SB_REPS, SB_PROMPT,
       SB_THREADS, SB_TEMP, SB_TOPK, SB_TOPP, SB_SEED, SB_JSON, SB_HELP };

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
                fprintf(stderr, "tokentop bench: --gamma: '%s' is not N, A..B or a list, each in "
                        "[1, %d]\n", a, SPEC_GAMMA_MAX);
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
        case SB_PROMPT: o->prompt = a; break;
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

/* Median time of the verification forward: g + 1 tokens with all logits, after the prompt. */
static double time_verify(engine *e, const int32_t *ids, int n, int g, tt_error *err)
{
    double t[VERIFY_REPS];
    int32_t span[SPEC_GAMMA_MAX + 1];
    for (int i = 0; i <= g; i++)
        span[i] = ids[i % n];
    if (engine_forward(e, ids, n, 0, false, err) != TT_OK)
        return -1;
    for (int i = 0; i < VERIFY_REPS; i++) {
        double t0 = tt_now_ms();
        if (engine_forward(e, span, g + 1, n - 1, true, err) != TT_OK)
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
 * length); tokens/s over the generation itself (prefill excluded). */
static int run_once(const sb_options *o, const model *m, const tokenizer *tok, engine *te,
                    engine *de, int gamma, sb_run *out, tt_error *err)
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
               session_set_gamma(&s, gamma, false, err) != TT_OK))
        goto out;
    if (session_add_user_text(&s, o->prompt, strlen(o->prompt), err) != TT_OK ||
        session_generate(&s, NULL, NULL, err) != TT_OK)
        goto out;
    const session_stats *st = &s.last;
    double gen_ms = st->ttft_ms - st->prefill_ms + st->decode_ms;
    out->tok_s = gen_ms > 0 ? st->generated_tokens / (gen_ms / 1e3) : 0;
    out->gen_ms = gen_ms;
    memset(&out->spec, 0, sizeof out->spec);
    if (de)
        out->spec = *spec_get_stats(s.spec);
    rc = 0;
out:
    session_free(&s);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * One precision */

typedef struct {
    tt_dtype dtype;
    char target_desc[160];
    double t_target_ms, t_draft_ms, c;
    double t_draft_after_ms;       /* a draft step right after a target step (t_draft') */
    double baseline_tok_s;
    double load_before, load_after;
    sb_row rows[SPEC_GAMMA_MAX];
    int n_rows;
} sb_result;

/* Runs are interleaved: each repetition measures the costs, the baseline and every gamma in turn,
 * so a change in the machine's load hits all of them alike; speed-ups are medians of the
 * per-repetition ratios. */
static int bench_dtype(const sb_options *o, const model *tm, const model *dm,
                       const tokenizer *tok, tt_dtype dtype, sb_result *res, tt_error *err)
{
    memset(res, 0, sizeof *res);
    res->dtype = dtype;
    res->load_before = loadavg();
    int32_t *ids = NULL;
    int n = 0;
    if (tokenizer_encode(tok, o->prompt, strlen(o->prompt), &ids, &n, err) != TT_OK)
        return -1;
    int gmax = 1;
    for (int i = 0; i < o->n_gammas; i++)
        gmax = o->gammas[i] > gmax ? o->gammas[i] : gmax;
    int n_ctx = n + (o->gen_tokens > COST_STEPS ? o->gen_tokens : COST_STEPS) + gmax + 2;
    if (n_ctx > tm->config.maxT || n_ctx > dm->config.maxT || n < 1) {
        tt_fail(err, TT_ERR_ARG, "bench: the prompt (%d tokens) and --gen-tokens %d do not fit "
                "the models' contexts (%d, %d)", n, o->gen_tokens, tm->config.maxT,
                dm->config.maxT);
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
    engine_options eo;
    engine_options_default(&eo);
    eo.dtype = dtype;
    eo.n_threads = o->n_threads;
    eo.n_ctx = n_ctx;
    engine *te = NULL, *de = NULL;
    int R = o->reps, G = o->n_gammas, rc = -1;
    /* (R) per repetition; (G, R) per gamma and repetition */
    double *t_t = calloc((size_t)R, sizeof(double)), *t_d = calloc((size_t)R, sizeof(double));
    double *t_da = calloc((size_t)R, sizeof(double));
    double *base = calloc((size_t)R, sizeof(double));
    double *spec_ts = calloc((size_t)(G * R), sizeof(double));
    double *ratio = calloc((size_t)(G * R), sizeof(double));
    double *ver = calloc((size_t)(G * R), sizeof(double));
    if (!t_t || !t_d || !t_da || !base || !spec_ts || !ratio || !ver) {
        tt_fail(err, TT_ERR_NOMEM, "bench: out of memory");
        goto out;
    }
    if (cpu_engine_create(tm, &eo, &te, err) != TT_OK || cpu_engine_create(dm, &eo, &de, err))
        goto out;
    snprintf(res->target_desc, sizeof res->target_desc, "%s", te->description);
    /* warm both engines once (page faults, thread start) before timing */
    if (time_decode(te, cost_ids, n_cost, err) < 0 || time_decode(de, cost_ids, n_cost, err) < 0)
        goto out;
    res->n_rows = G;
    for (int gi = 0; gi < G; gi++) {
        memset(&res->rows[gi], 0, sizeof res->rows[gi]);
        res->rows[gi].gamma = o->gammas[gi];
    }
    sb_run run;
    for (int r = 0; r < R; r++) {
        if (!o->json)
            fprintf(stderr, "tokentop bench: %s: repetition %d of %d ...\n", tt_dtype_name(dtype),
                    r + 1, R);
        t_t[r] = time_decode(te, cost_ids, n_cost, err);
        t_d[r] = time_decode(de, cost_ids, n_cost, err);
        t_da[r] = time_decode_after(de, te, cost_ids, n_cost, err);
        if (t_t[r] < 0 || t_d[r] < 0 || t_da[r] < 0 || run_once(o, tm, tok, te, NULL, 0, &run, err) != 0)
            goto out;
        base[r] = run.tok_s;
        for (int gi = 0; gi < G; gi++) {
            sb_row *row = &res->rows[gi];
            if (run_once(o, tm, tok, te, de, row->gamma, &run, err) != 0)
                goto out;
            spec_ts[gi * R + r] = run.tok_s;
            ratio[gi * R + r] = run.tok_s / base[r];
            row->drafted += run.spec.drafted;
            row->accepted += run.spec.accepted;
            row->rejections += run.spec.rejections;
            row->rounds += run.spec.rounds;
            row->produced += run.spec.produced;
            row->loop_ms += run.gen_ms;
            row->loop_draft_ms += run.spec.draft_ms;
            row->loop_target_ms += run.spec.target_ms;
            if ((ver[gi * R + r] = time_verify(te, cost_ids, n_cost, row->gamma, err)) < 0)
                goto out;
        }
    }
    res->t_target_ms = tt_median(t_t, R);
    res->t_draft_ms = tt_median(t_d, R);
    res->t_draft_after_ms = tt_median(t_da, R);
    res->c = res->t_draft_ms / res->t_target_ms;
    res->baseline_tok_s = tt_median(base, R);
    for (int gi = 0; gi < G; gi++) {
        sb_row *row = &res->rows[gi];
        row->tok_s = tt_median(spec_ts + gi * R, R);
        row->speedup = tt_median(ratio + gi * R, R);
        row->verify_ms = tt_median(ver + gi * R, R);
        row->acceptance = row->drafted ? (double)row->accepted / row->drafted : 0;
        row->alpha = row->accepted + row->rejections
                         ? (double)row->accepted / (row->accepted + row->rejections) : 0;
        row->tokens_per_pass = row->rounds ? (double)row->produced / row->rounds : 0;
        row->predicted = spec_predicted_speedup(row->alpha, row->gamma, res->c);
        /* a round's first draft step follows the target's pass, the others follow the draft */
        row->predicted_verify = row->tokens_per_pass * res->t_target_ms /
                                (res->t_draft_after_ms + (row->gamma - 1) * res->t_draft_ms +
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

static void print_table(const sb_options *o, const model *tm, const model *dm, const char *tname,
                        const char *dname, const sb_result *r)
{
    char chain[160];
    sampler_params_format(&o->sampler, chain, sizeof chain);
    printf("\nspeculative decoding, %s: target %s (%.1fM params), draft %s (%.1fM params)\n",
           tt_dtype_name(r->dtype), tname, tm->n_params / 1e6, dname, dm->n_params / 1e6);
    printf("  %s | %s | %d tokens x %d runs (medians) | load %.2f -> %.2f on %d cores\n",
           r->target_desc, chain, o->gen_tokens, o->reps, r->load_before, r->load_after,
           threadpool_cores());
    printf("  decode cost per token: target %.2f ms, draft %.2f ms (%.2f ms right after a target "
           "step) -> c = %.3f | baseline %.2f tok/s | speed-up: median of per-run ratios to the "
           "baseline run next to it\n",
           r->t_target_ms, r->t_draft_ms, r->t_draft_after_ms, r->c, r->baseline_tok_s);
    printf("  gamma  tok/s    speed-up  accept  alpha  tok/pass  verify ms  predicted  "
           "meas/pred  pred(verify)  meas/pred(v)\n");
    for (int i = 0; i < r->n_rows; i++) {
        const sb_row *w = &r->rows[i];
        printf("  %5d  %7.2f  %7.2fx  %6.3f  %5.3f  %8.2f  %9.2f  %8.2fx  %9.2f  %11.2fx  %12.2f\n",
               w->gamma, w->tok_s, w->speedup, w->acceptance, w->alpha, w->tokens_per_pass,
               w->verify_ms, w->predicted, w->speedup / w->predicted, w->predicted_verify,
               w->speedup / w->predicted_verify);
    }
    printf("  accept: accepted / drafted; alpha: accepted / tested drafts (the per-token rate);\n"
           "  predicted: (1 - alpha^(g+1)) / ((1 - alpha)(g c + 1)) (Leviathan et al.; assumes a\n"
           "  verification pass costs one decode step); pred(verify): tok/pass x target step /\n"
           "  (a draft step right after a target step + g-1 draft steps + the measured verification\n"
           "  pass of g+1 tokens)\n");
    printf("  where a round's time goes, measured in the loop (ms per round, all runs): draft =\n"
           "  catching up + proposing + its sampler chains; target = the verification pass +\n"
           "  acceptance tests and the last draw; rest = the session's bookkeeping\n"
           "  gamma  rounds  draft ms  target ms  rest ms  total ms  draft %%\n");
    for (int i = 0; i < r->n_rows; i++) {
        const sb_row *w = &r->rows[i];
        double n = w->rounds > 0 ? (double)w->rounds : 1.0;
        double rest = (w->loop_ms - w->loop_draft_ms - w->loop_target_ms) / n;
        printf("  %5d  %6ld  %8.3f  %9.3f  %7.3f  %8.3f  %6.1f%%\n", w->gamma, w->rounds,
               w->loop_draft_ms / n, w->loop_target_ms / n, rest, w->loop_ms / n,
               w->loop_ms > 0 ? 100.0 * w->loop_draft_ms / w->loop_ms : 0.0);
    }
    fflush(stdout);
}

static void print_json(const sb_options *o, const char *tname, const char *dname,
                       const sb_result *r)
{
    printf("{\"precision\":\"%s\",\"target\":", tt_dtype_name(r->dtype));
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
        printf("%s{\"gamma\":%d,\"tok_s\":%.4f,\"speedup\":%.4f,\"drafted\":%ld,\"accepted\":%ld,"
               "\"acceptance_rate\":%.4f,\"alpha\":%.4f,\"tokens_per_target_pass\":%.4f,"
               "\"verify_ms\":%.4f,\"predicted_speedup\":%.4f,\"predicted_speedup_verify\":%.4f,"
               "\"rounds\":%ld,\"round_draft_ms\":%.4f,\"round_target_ms\":%.4f,"
               "\"round_ms\":%.4f}",
               i ? "," : "", w->gamma, w->tok_s, w->speedup, w->drafted, w->accepted,
               w->acceptance, w->alpha, w->tokens_per_pass, w->verify_ms, w->predicted,
               w->predicted_verify, w->rounds, w->rounds ? w->loop_draft_ms / w->rounds : 0.0,
               w->rounds ? w->loop_target_ms / w->rounds : 0.0,
               w->rounds ? w->loop_ms / w->rounds : 0.0);
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
    o.sampler.greedy = true;
    o.sampler.temperature = 0;
    o.gen_tokens = 128;
    o.reps = 3;
    o.prompt = DEFAULT_PROMPT;
    o.dtypes[0] = TT_F32;
    o.n_dtypes = 1;
    parse_gammas(&o, "1..8");
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
    if (cli_load_tokenizer(dir, &tok, &err) != TT_OK ||
        cli_load_tokenizer(draft_dir, &dtok, &err) != TT_OK ||
        model_load(dir, &tm, &err) != TT_OK || model_load(draft_dir, &dm, &err) != TT_OK) {
        fprintf(stderr, "tokentop bench: %s\n", err.msg);
        goto out;
    }
    if (!tokenizer_equal(tok, dtok) || tm->config.V != dm->config.V) {
        fprintf(stderr, "tokentop bench: draft model %s: its tokenizer or vocab_size differs from "
                "the target's\n", draft_dir);
        goto out;
    }
    const char *tname = o.random_pair ? "gpt2-random" : tm->name;
    const char *dname = o.random_pair ? "gpt2-random-draft" : dm->name;
    for (int i = 0; i < o.n_dtypes; i++) {
        sb_result *res = malloc(sizeof *res);
        if (!res || bench_dtype(&o, tm, dm, tok, o.dtypes[i], res, &err) != 0) {
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
