/* check_beam.c: beam search (core/decode/beam.c) gives the hypotheses an independent float64 beam search
 * gives (tools/ref/beam_ref.py, stored in tests/golden/beam-*.txt) on random models: the same ids
 * in the same order, EOS endings, the length penalty (positive, large, negative), early stopping,
 * no-repeat n-grams, penalties and --min-tokens; bad options are refused with the option named. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/decode/beam.h"
#include "core/engine/engine.h"
#include "core/model/model.h"
#include "core/model/modelgen.h"
#include "core/decode/sampler.h"
#include "tests/testutil.h"

/* float logits against float64: a summed logprob of 10 tokens is off by about 1e-5 */
#define BEAM_TOL 1e-3

typedef struct {
    int32_t ids[BEAM_MAX + 1][64];
    int n[BEAM_MAX + 1];
    double score[BEAM_MAX + 1], logprob[BEAM_MAX + 1];
    int eos[BEAM_MAX + 1];
    int n_hyps;
} expected;

typedef struct {
    unsigned long long fnv;
    int32_t prompt[64];
    int n_prompt;
    beam_options o;
    expected want;
} beam_case;

static const char *const cases[] = {
    "beam-eos", "beam-lp2", "beam-lp-negative", "beam-early-ngram", "beam-penalties",
    "beam-no-eos", "beam-one",
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))
static const uint64_t case_seeds[N_CASES] = {21, 22, 23, 24, 25, 26, 27};

static void case_read(const char *name, beam_case *c)
{
    memset(c, 0, sizeof *c);
    char *text = tu_read_golden(name);
    beam_options_default(&c->o);
    char *save = NULL;
    bool have_options = false;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *p;
        int off = 0;
        if (sscanf(line, "safetensors_fnv1a64 %16llx", &c->fnv) == 1)
            continue;
        if (strncmp(line, "ids ", 4) == 0) {
            c->n_prompt = tu_golden_ids(line, c->prompt, 64);
        } else if (strncmp(line, "options ", 8) == 0) {
            int early, eos;
            ck_assert_int_eq(sscanf(line, "options beams %d lp %f ngram %d early %d return %d "
                                    "max_new %d min_tokens %d repeat %f presence %f frequency %f "
                                    "window %d eos %d", &c->o.num_beams, &c->o.length_penalty,
                                    &c->o.no_repeat_ngram, &early, &c->o.num_return,
                                    &c->o.max_new_tokens, &c->o.min_tokens,
                                    &c->o.penalties.repetition_penalty,
                                    &c->o.penalties.presence_penalty,
                                    &c->o.penalties.frequency_penalty,
                                    &c->o.penalties.penalty_window, &eos), 12);
            c->o.early_stopping = early != 0;
            c->o.eos = eos;
            have_options = true;
        } else if (strncmp(line, "hyp ", 4) == 0) {
            expected *w = &c->want;
            int h = w->n_hyps++;
            ck_assert(h < BEAM_MAX);
            ck_assert_int_eq(sscanf(line, "hyp score %lf logprob %lf eos %d n %d %n", &w->score[h],
                                    &w->logprob[h], &w->eos[h], &w->n[h], &off), 4);
            ck_assert(w->n[h] > 0 && w->n[h] <= 64);
            p = line + off;
            for (int i = 0; i < w->n[h]; i++)
                w->ids[h][i] = (int32_t)strtol(p, &p, 10);
        }
    }
    free(text);
    ck_assert_msg(c->fnv && c->n_prompt && have_options && c->want.n_hyps,
                  "tests/golden/%s.txt: incomplete beam file", name);
}

static uint64_t file_fnv(const char *path)
{
    size_t n = 0;
    char *data = tu_read_file(path, &n);
    ck_assert(data != NULL);
    uint64_t h = tu_fnv1a64(data, n);
    free(data);
    return h;
}

/* Reads the case called name and writes the model mkbeams.sh wrote for it (mkmodel's tiny
 * shapes with the case's seed, checked against the reference's checksum) into *dir; case_close
 * frees both. */
static model *case_open(const char *name, beam_case *c, char **dir)
{
    int i = 0;
    while (i < N_CASES && strcmp(cases[i], name) != 0)
        i++;
    ck_assert_msg(i < N_CASES, "no beam case %s", name);
    case_read(name, c);
    *dir = tu_tmpdir();
    modelgen_options mo;
    modelgen_options_default(&mo);
    mo.seed = case_seeds[i];
    tt_error err;
    ck_assert_msg(modelgen_write(*dir, &mo, &err) == TT_OK, "%s", err.msg);
    ck_assert_msg(file_fnv(tu_path("%s/model.safetensors", *dir)) == c->fnv,
                  "the model differs from the one the reference ran on: regenerate with "
                  "tools/ref/mkbeams.sh");
    model *m;
    ck_assert_msg(model_load(*dir, &m, &err) == TT_OK, "%s", err.msg);
    return m;
}

static void case_close(model *m, char *dir)
{
    tu_free_model(m, dir);
}

static void run_case(const model *m, const beam_case *c, int n_threads, beam_result *r)
{
    engine *e = tu_cpu_engine(m, TT_F32, n_threads, 0);
    sampler *smp = sampler_create(m->config.V);
    tt_error err;
    ck_assert_int_eq(engine_forward(e, c->prompt, c->n_prompt, 0, false, &err), TT_OK);
    ck_assert_msg(beam_search(e, smp, c->prompt, c->n_prompt, &c->o, r, &err) == TT_OK, "%s",
                  err.msg);
    ck_assert_int_eq(e->n_past, c->n_prompt);   /* sequence 0 still holds the prompt */
    sampler_free(smp);
    engine_free(e);
}

START_TEST(beams_match_the_float64_reference)
{
    beam_case c;
    char *dir;
    model *m = case_open(cases[_i], &c, &dir);
    beam_result r;
    run_case(m, &c, 2, &r);
    const expected *w = &c.want;
    ck_assert_msg(r.n_hyps == w->n_hyps, "%s: %d hypotheses, the reference has %d", cases[_i],
                  r.n_hyps, w->n_hyps);
    for (int h = 0; h < w->n_hyps; h++) {
        const beam_hypothesis *g = &r.hyps[h];
        ck_assert_msg(g->n == w->n[h] && memcmp(g->ids, w->ids[h], (size_t)g->n * 4) == 0,
                      "%s: hypothesis %d: %d ids (first %d), the reference has %d (first %d)",
                      cases[_i], h, g->n, g->n ? (int)g->ids[0] : -1, w->n[h], (int)w->ids[h][0]);
        ck_assert_int_eq(g->eos, w->eos[h]);
        ck_assert_msg(fabs(g->logprob - w->logprob[h]) <= BEAM_TOL &&
                      fabs(g->score - w->score[h]) <= BEAM_TOL,
                      "%s: hypothesis %d: logprob %.9g score %.9g, reference %.9g %.9g", cases[_i],
                      h, g->logprob, g->score, w->logprob[h], w->score[h]);
    }
    beam_result_free(&r);
    case_close(m, dir);
}
END_TEST

START_TEST(the_cases_cover_eos_endings_and_every_length_penalty)
{
    /* A guard on the fixtures: regenerating them must keep what the cases are there to test. */
    int eos_hyps = 0, mixed = 0;
    for (int i = 0; i < N_CASES; i++) {
        beam_case c;
        case_read(cases[i], &c);
        int e = 0;
        for (int h = 0; h < c.want.n_hyps; h++)
            e += c.want.eos[h];
        eos_hyps += e;
        mixed += e > 0 && e < c.want.n_hyps;
    }
    ck_assert_int_gt(eos_hyps, 3);
    ck_assert_int_gt(mixed, 0);   /* EOS and max-length hypotheses ranked together */
}
END_TEST

START_TEST(threads_do_not_change_the_beams)
{
    beam_case c;
    char *dir;
    model *m = case_open("beam-lp2", &c, &dir);
    beam_result a, b;
    run_case(m, &c, 1, &a);
    run_case(m, &c, 3, &b);
    ck_assert_int_eq(a.n_hyps, b.n_hyps);
    for (int h = 0; h < a.n_hyps; h++) {
        ck_assert_int_eq(a.hyps[h].n, b.hyps[h].n);
        ck_assert(memcmp(a.hyps[h].ids, b.hyps[h].ids, (size_t)a.hyps[h].n * 4) == 0);
        ck_assert(a.hyps[h].logprob == b.hyps[h].logprob);
    }
    beam_result_free(&a);
    beam_result_free(&b);
    case_close(m, dir);
}
END_TEST

START_TEST(bad_options_are_refused_with_the_option_named)
{
    beam_options o;
    beam_options_default(&o);
    tt_error err;
    ck_assert_int_eq(beam_options_validate(&o, 512, 10, 64, &err), TT_OK);
    o.num_beams = 0;
    ck_assert_int_eq(beam_options_validate(&o, 512, 10, 64, &err), TT_ERR_ARG);
    ck_assert_str_eq(err.msg, "--num-beams: 0 is outside [1, 64]");
    o.num_beams = 40;
    ck_assert_int_eq(beam_options_validate(&o, 60, 10, 64, &err), TT_ERR_ARG);
    ck_assert_str_eq(err.msg, "--num-beams: 40 beams need 80 candidates, the vocabulary has 60 "
                     "tokens");
    o.num_beams = 4;
    o.num_return = 5;
    ck_assert_int_eq(beam_options_validate(&o, 512, 10, 64, &err), TT_ERR_ARG);
    ck_assert_str_eq(err.msg, "--num-return: 5 is outside [1, 4] (the number of beams)");
    o.num_return = 0;
    o.length_penalty = NAN;
    ck_assert_int_eq(beam_options_validate(&o, 512, 10, 64, &err), TT_ERR_ARG);
    o.length_penalty = 1;
    o.max_new_tokens = 60;
    ck_assert_int_eq(beam_options_validate(&o, 512, 10, 64, &err), TT_ERR_CONTEXT);
    ck_assert_str_eq(err.msg, "--num-beams: the prompt (10 tokens) + --max-tokens 60 exceed the "
                     "context of 64 positions, and beams do not shift the context (lower -n or "
                     "raise --ctx)");
    o.max_new_tokens = 8;
    o.penalties.repetition_penalty = -1;
    ck_assert_int_eq(beam_options_validate(&o, 512, 10, 64, &err), TT_ERR_ARG);
}
END_TEST

START_TEST(a_search_that_does_not_fit_runs_nothing)
{
    beam_case c;
    char *dir;
    model *m = case_open("beam-one", &c, &dir);
    engine *e = tu_cpu_engine(m, TT_F32, 1, 0);
    sampler *smp = sampler_create(m->config.V);
    tt_error err;
    ck_assert_int_eq(engine_forward(e, c.prompt, c.n_prompt, 0, false, &err), TT_OK);
    c.o.max_new_tokens = m->config.maxT;
    beam_result r;
    ck_assert_int_eq(beam_search(e, smp, c.prompt, c.n_prompt, &c.o, &r, &err), TT_ERR_CONTEXT);
    ck_assert_int_eq(r.n_hyps, 0);
    ck_assert_int_eq(engine_seq_count(e), 1);      /* no sequence was even reserved */
    ck_assert_int_eq(e->n_past, c.n_prompt);
    sampler_free(smp);
    engine_free(e);
    case_close(m, dir);
}
END_TEST

typedef struct {
    int calls, last_step, stop_at;
    bool parents_ok, pruned_seen;
    double best_logprob;
} progress_log;

static bool log_progress(void *user, const beam_progress *p)
{
    progress_log *l = user;
    l->calls++;
    if (p->step != l->last_step + 1)
        l->parents_ok = false;
    l->last_step = p->step;
    bool named[BEAM_MAX] = {false};
    for (int k = 0; k < p->n_run; k++) {
        if (p->parent[k] < 0 || p->parent[k] >= p->n_prev)
            l->parents_ok = false;
        else
            named[p->parent[k]] = true;
        if (k > 0 && p->logprob[k] > p->logprob[k - 1])
            l->parents_ok = false;                 /* best first */
    }
    for (int k = 0; k < p->n_prev; k++)
        l->pruned_seen |= !named[k] && p->step > 1;
    l->best_logprob = p->n_run > 0 ? p->logprob[0] : l->best_logprob;
    return p->step != l->stop_at;
}

START_TEST(progress_shows_every_step_and_can_stop_the_search)
{
    beam_case c;
    char *dir;
    model *m = case_open("beam-no-eos", &c, &dir);
    beam_result full, stopped;
    progress_log l = {.parents_ok = true, .stop_at = -1};
    c.o.progress = log_progress;
    c.o.progress_user = &l;
    run_case(m, &c, 1, &full);
    /* one call a step, steps 1, 2, ..., parents among the previous step's beams, best first;
     * with several beams some are pruned on the way */
    ck_assert_int_eq(l.calls, c.o.max_new_tokens);
    ck_assert(l.parents_ok);
    ck_assert(!full.stopped);
    if (c.o.num_beams > 1)
        ck_assert(l.pruned_seen);
    /* the hypotheses carry each token's score, summing to the logprob */
    for (int h = 0; h < full.n_hyps; h++) {
        double sum = 0;
        for (int k = 0; k < full.hyps[h].n; k++)
            sum += full.hyps[h].token_logprob[k];
        ck_assert_double_eq_tol(sum, full.hyps[h].logprob, 1e-4);
    }
    /* false after step 2: the running beams become hypotheses of 2 tokens */
    progress_log l2 = {.parents_ok = true, .stop_at = 2};
    c.o.progress_user = &l2;
    run_case(m, &c, 1, &stopped);
    ck_assert(stopped.stopped);
    ck_assert_int_eq(l2.calls, 2);
    ck_assert_int_gt(stopped.n_hyps, 0);
    for (int h = 0; h < stopped.n_hyps; h++)
        ck_assert_int_le(stopped.hyps[h].n, 2);
    beam_result_free(&full);
    beam_result_free(&stopped);
    case_close(m, dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("beam");
    TCase *tc = tu_add_case(s, "reference", TU_TESTS(
            the_cases_cover_eos_endings_and_every_length_penalty,
            threads_do_not_change_the_beams,
            bad_options_are_refused_with_the_option_named,
            a_search_that_does_not_fit_runs_nothing,
            progress_shows_every_step_and_can_stop_the_search));
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, beams_match_the_float64_reference, 0, N_CASES);
    return tu_run_suite(s);
}
