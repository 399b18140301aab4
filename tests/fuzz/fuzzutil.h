/* fuzzutil.h: what the libFuzzer harnesses (tests/fuzz/fuzz_*.c) share: an invariant check that
 * aborts with a message (libFuzzer then saves the input as a crash), NUL-terminated copies of the
 * input, the GPT-2 tokenizer fixture and a session over a tiny random model, each made once per
 * process. */
#ifndef TOKENTOP_FUZZUTIL_H
#define TOKENTOP_FUZZUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/engine/engine.h"
#include "core/model/model.h"
#include "core/session/session.h"
#include "core/tokenizer/tokenizer.h"

/* Aborts (a libFuzzer crash, input saved) when cond is false. */
#define FUZZ_CHECK(cond, ...)                                                           \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: invariant failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                               \
            fputc('\n', stderr);                                                        \
            abort();                                                                    \
        }                                                                               \
    } while (0)

/* A malloc'd copy of size bytes with a NUL after them. */
char *fuzz_cstr(const uint8_t *data, size_t size);

/* OpenAI's GPT-2 tokenizer (TOKENTOP_GPT2_DIR, else tests/fixtures/gpt2), loaded on first use;
 * jit false loads a second copy that uses the PCRE2 interpreter. Aborts when it cannot load. */
const tokenizer *fuzz_gpt2_tokenizer(bool jit);

/* A tiny random model (modelgen's default shapes, synthesized 512-token vocabulary) written to a
 * temporary directory on first use and removed at exit, with its tokenizer and an engine that
 * never runs the model (its forward fails): enough for everything but generation. */
typedef struct {
    model *m;
    tokenizer *tok;
    engine *eng;
} fuzz_model;
const fuzz_model *fuzz_tiny_model(void);

/* A fresh session over the tiny model (seed 42, 8 new tokens); session_free it. */
void fuzz_session_init(session *s);

#endif
