/* testutil.h: small helpers shared by the Check suites (temp dirs, files, fixture locations, test
 * models and engines). */
#ifndef TOKENTOP_TESTUTIL_H
#define TOKENTOP_TESTUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>

#include <stdint.h>

#include "core/base/dtype.h"
#include "core/engine/engine.h"
#include "core/model/model.h"
#include "core/decode/sampler.h"

/* The GPT-2 tokenizer conformance folder: $TOKENTOP_GPT2_DIR when set, else the repository's
 * tests/fixtures/gpt2. When it is missing the calling test fails with a message saying where the
 * files come from: it never passes silently. */
const char *tu_gpt2_dir(void);

/* A fresh directory under $TMPDIR (or /tmp), malloc'd; tu_tmpdir_free removes the tree and frees
 * the name (NULL: nothing). */
char *tu_tmpdir(void);
void tu_tmpdir_free(char *dir);

/* Whole-file read (NUL-terminated, caller frees; NULL on error) and write (0 on success). */
char *tu_read_file(const char *path, size_t *len);
int tu_write_file(const char *path, const void *data, size_t len);

/* The text of tests/golden/NAME.txt (under $TOKENTOP_SRCDIR, else the working directory),
 * NUL-terminated, caller frees; fails the calling test with the path when it cannot be read. */
char *tu_read_golden(const char *name);

/* printf into a static rotating buffer (8 slots), for building paths in tests. */
const char *tu_path(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A CPU engine over m holding weights in d (n_ctx 0: the model's); fails the calling test when
 * it cannot be made. */
struct engine *tu_cpu_engine(const model *m, tt_dtype d, int n_threads, int n_ctx);

/* session_init over m, tok and e with the default settings but for seed, max_new_tokens and
 * greedy; fails the calling test with the message when it refuses. */
struct session;
struct tokenizer;
void tu_session_init(struct session *s, const model *m, const struct tokenizer *tok,
                     struct engine *e, uint64_t seed, int max_new_tokens, bool greedy);

/* A fresh directory (free with tu_tmpdir_free) holding a tiny random model (modelgen's
 * defaults) with a context of maxT positions; fails the calling test when it cannot be written. */
char *tu_tiny_model_dir(int maxT);

/* All logits of ids[0..n) computed in one span from position 0 by a fresh CPU engine (as
 * tu_cpu_engine makes it, freed before returning): (n, V), caller frees. */
float *tu_all_logits(const model *m, tt_dtype d, int n_threads, const int32_t *ids, int n);

/* The ids of a golden file's line "ids N ID..." into ids[0..N); fails the calling test unless
 * 0 < N <= max and N ids follow. Returns N. */
int tu_golden_ids(const char *line, int32_t *ids, int max);

/* A model for a test: modelgen's options that tests vary, and the one edit they make to a file. */
typedef struct {
    tt_dtype file_dtype;
    bool no_prefix;                /* names without "transformer." */
    bool mask_buffers, untied, exact;
    bool erf;                      /* config.json says "gelu" (the erf form) */
    uint64_t seed;
    int V, maxT, C, NH, L, FF;     /* 0: modelgen's tiny default (V 512, maxT 64, C 64, NH 4, L 2) */
    const char *arch;              /* NULL: gpt2; else a model_type (llama, mistral, qwen2, qwen3) */
    int NKV, HS;                   /* 0: NH and C / NH */
} tu_model_spec;

/* Writes the model spec describes into a fresh tu_tmpdir, returned; fails the calling test when
 * it cannot. */
char *tu_write_model(const tu_model_spec *spec);

/* tu_write_model, then the model loaded from that directory (*dir: for tu_tmpdir_free). */
struct model *tu_load_model(const tu_model_spec *spec, char **dir);

/* Frees a model tu_load_model returned and removes its directory dir (either may be NULL). */
void tu_free_model(struct model *m, char *dir);

/* FNV-1a 64 of p[0..n): the checksum the golden files record of model.safetensors. */
uint64_t tu_fnv1a64(const void *p, size_t n);

/* Sampler settings equal field by field (memcmp would read the struct's padding). */
bool tu_same_sampler_params(const sampler_params *a, const sampler_params *b);

/* Every field of two snapshots, the first n_top entries of their top lists included. */
bool tu_same_snapshot(const sampler_snapshot *a, const sampler_snapshot *b);

/* Runs the suite in a Check runner (CK_VERBOSE output) and returns the process exit status. */
int tu_run_suite(Suite *s);

/* A test case named name holding tests[0..n-1] in order, added to s; returned for fixtures and
 * timeouts. TU_TESTS(a, b, ...) passes a list as tests, n. */
TCase *tu_add_case(Suite *s, const char *name, const TTest *const *tests, size_t n);
#define TU_TESTS(...)                                                                             \
    (const TTest *const[]){__VA_ARGS__},                                                        \
        sizeof((const TTest *const[]){__VA_ARGS__}) / sizeof(const TTest *)

/* tu_add_case for tests that each run n times (_i from 0 to n - 1, as tcase_add_loop_test). */
TCase *tu_add_loop_case(Suite *s, const char *name, int n, const TTest *const *tests,
                        size_t n_tests);

/* A suite of one test case (both named name) run as tu_run_suite does: most suites' main. */
int tu_run_tests(const char *name, const TTest *const *tests, size_t n);

/* Batched decoding in tests. Sequence b starts with a prompt of tu_seq_prompt_len(b) tokens (1 to
 * 11, so sequences stand at different positions) and goes on one token a step; token t of
 * sequence b is tu_seq_token(m, b, t), a different stream per sequence. */
int tu_seq_prompt_len(int b);
int32_t tu_seq_token(const model *m, int b, int t);

/* The logits of sequence b's first steps decode steps (steps <= 16) run alone on e, a fresh
 * engine: the prompt as one span, then one token at a time. (steps, V), caller frees. */
float *tu_seq_alone(engine *e, int b, int steps);

/* Reserves B sequences on e and prefills each one's prompt; fails the calling test when e
 * refuses. */
void tu_seq_prefill(engine *e, int B);

/* Decode step s (from 0) of sequences order[0..B) in one batch, row r being sequence order[r]:
 * runs it and asserts B rows of logits and that each sequence now ends with its step's token. */
void tu_seq_step(engine *e, const int *order, int B, int s);

/* The refusals of the sequences API (engine.c checks them for every backend), asserted with
 * their messages on a fresh engine e with a context of 8 positions: a count of 0 sequences, a span
 * past the context, a batch naming a full, missing or repeated sequence or a token outside the
 * vocabulary, an empty batch, a copy of more positions than the source holds. Each changes
 * nothing: e is left with 3 sequences holding 3, 8 and 0 positions of the ids 1, 2, 3, ... */
void tu_assert_sequence_refusals(engine *e);

/* Fake engines in tests (a struct with the engine first, calloc'd, cache = n_past positions):
 * truncate only lowers n_past, destroy frees the struct. */
void tu_fake_truncate(engine *e, int pos);
void tu_fake_destroy(engine *e);

/* Plain greedy on e from an empty cache: ids[0..np) as the prompt, then ids[np..n) each the
 * argmax of the last row. */
void tu_greedy(engine *e, int32_t *ids, int np, int n);

/* Speculative greedy (params greedy, key 1, gamma) with both engines from an empty cache:
 * ids[0..np) as the prompt, rounds until ids[0..n) is filled. Returns the draft tokens the
 * rounds rejected. */
struct spec;
int tu_spec_greedy(struct spec *sp, engine *target, engine *draft, const sampler_params *params,
                   int32_t *ids, int np, int n, int gamma);

#endif
