/* fuzzutil.c: see fuzzutil.h. */
#include "tests/fuzz/fuzzutil.h"

#include <string.h>
#include <unistd.h>

#include "app/cli.h"
#include "core/model/modelgen.h"

char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    FUZZ_CHECK(s != NULL, "out of memory for %zu bytes", size);
    if (size)
        memcpy(s, data, size);
    s[size] = 0;
    return s;
}

const tokenizer *fuzz_gpt2_tokenizer(bool jit)
{
    static tokenizer *with_jit, *without_jit;
    tokenizer **slot = jit ? &with_jit : &without_jit;
    if (*slot)
        return *slot;
    const char *dir = getenv("TOKENTOP_GPT2_DIR");
    if (!dir || !*dir)
        dir = TU_FIXTURES "/gpt2";
    char vocab[4096], merges[4096];
    snprintf(vocab, sizeof vocab, "%s/vocab.json", dir);
    snprintf(merges, sizeof merges, "%s/merges.txt", dir);
    if (!jit)
        setenv("TOKENTOP_PCRE2_JIT", "0", 1);
    tt_error err = {0};
    tt_status st = tokenizer_load(vocab, merges, slot, &err);
    if (!jit)
        unsetenv("TOKENTOP_PCRE2_JIT");
    FUZZ_CHECK(st == TT_OK, "%s", err.msg);
    return *slot;
}

static tt_status parse_only_forward(engine *e, const int32_t *ids, int n, int pos,
                                    bool all_logits, tt_error *err)
{
    return tt_fail(err, TT_ERR_UNSUPPORTED, "the fuzzing engine does not run the model");
}

static void parse_only_truncate(engine *e, int pos)
{
    (void)e;
    (void)pos;
}

static void parse_only_destroy(engine *e)
{
    (void)e;
}

static const engine_ops parse_only_ops = {
    .name = "parse-only",
    .forward = parse_only_forward,
    .truncate = parse_only_truncate,
    .destroy = parse_only_destroy,
};

static char *tiny_dir;

static void tiny_remove(void)
{
    if (tiny_dir)
        modelgen_remove_dir(tiny_dir);
}

const fuzz_model *fuzz_tiny_model(void)
{
    static fuzz_model fm;
    if (fm.eng)
        return &fm;
    static char dir[] = "/tmp/tokentop-fuzz-XXXXXX";
    FUZZ_CHECK(mkdtemp(dir) != NULL, "mkdtemp failed");
    tiny_dir = dir;
    atexit(tiny_remove);
    modelgen_options mo;
    modelgen_options_default(&mo);
    tt_error err = {0};
    FUZZ_CHECK(modelgen_write(dir, &mo, &err) == TT_OK, "%s", err.msg);
    FUZZ_CHECK(model_load(dir, &fm.m, &err) == TT_OK, "%s", err.msg);
    FUZZ_CHECK(tokenizer_load_dir(dir, &fm.tok, &err) == TT_OK, "%s", err.msg);
    /* Parsing never runs the model: an engine that only keeps its cache count is enough, and
     * avoids the CPU engine's worker thread, whose hand-offs made every input cost milliseconds
     * on a loaded machine. */
    static engine parse_only = {.ops = &parse_only_ops};
    parse_only.model = fm.m;
    parse_only.config = &fm.m->config;
    parse_only.n_ctx = fm.m->config.maxT;
    snprintf(parse_only.description, sizeof parse_only.description, "parse-only (fuzzing)");
    fm.eng = &parse_only;
    return &fm;
}

void fuzz_session_init(session *s)
{
    const fuzz_model *fm = fuzz_tiny_model();
    session_settings set;
    session_settings_default(&set);
    set.seed = 42;
    set.max_new_tokens = 8;
    tt_error err = {0};
    FUZZ_CHECK(session_init(s, fm->m, fm->tok, fm->eng, &set, &err) == TT_OK, "%s", err.msg);
}
