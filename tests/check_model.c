/* check_model.c: config.json and generation_config.json validation, GPT-2 tensor binding (names,
 * shapes, dtypes, tied/untied lm_head, mask buffers), refusal of pickle checkpoints, and models
 * written by modelgen loading with the same values whatever their dtype or naming. */
#include <check.h>
#include <math.h>
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/model/model.h"
#include "core/model/modelgen.h"
#include "core/model/safetensors.h"
#include "tests/testutil.h"

/* ============================================================================================
 * config.json */

static const char base_config[] =
    "{\"activation_function\": \"gelu_new\", \"architectures\": [\"GPT2LMHeadModel\"], "
    "\"bos_token_id\": 511, \"eos_token_id\": 511, \"layer_norm_epsilon\": 1e-05, "
    "\"model_type\": \"gpt2\", \"n_ctx\": 64, \"n_embd\": 64, \"n_head\": 4, \"n_inner\": null, "
    "\"n_layer\": 2, \"n_positions\": 64, \"scale_attn_weights\": true, \"vocab_size\": 512}";

/* base_config with edits applied: "key=<raw JSON>" sets a field, "-key" removes it. */
static char *config_with(const char *const *edits)
{
    cJSON *root = cJSON_Parse(base_config);
    ck_assert_ptr_nonnull(root);
    for (int i = 0; edits[i]; i++) {
        const char *e = edits[i];
        if (e[0] == '-') {
            cJSON_DeleteItemFromObjectCaseSensitive(root, e + 1);
            continue;
        }
        const char *eq = strchr(e, '=');
        ck_assert_ptr_nonnull(eq);
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)(eq - e), e);
        cJSON *v = cJSON_Parse(eq + 1);
        ck_assert_msg(v != NULL, "bad test edit %s", e);
        if (cJSON_GetObjectItemCaseSensitive(root, key))
            cJSON_ReplaceItemInObjectCaseSensitive(root, key, v);
        else
            cJSON_AddItemToObject(root, key, v);
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

static const struct {
    const char *edits[5];
    tt_status status;
    const char *want;
} bad_configs[] = {
    {{"-vocab_size"}, TT_ERR_CONFIG, "config.json: missing vocab_size"},
    {{"-n_embd"}, TT_ERR_CONFIG, "config.json: missing n_embd"},
    {{"-n_head"}, TT_ERR_CONFIG, "config.json: missing n_head"},
    {{"-n_layer"}, TT_ERR_CONFIG, "config.json: missing n_layer"},
    {{"vocab_size=null"}, TT_ERR_CONFIG, "config.json: missing vocab_size"},
    {{"-n_positions", "-n_ctx"}, TT_ERR_CONFIG, "config.json: missing n_positions (and no n_ctx)"},
    {{"vocab_size=\"512\""}, TT_ERR_CONFIG,
     "config.json: vocab_size: expected an integer, got a string (\"512\")"},
    {{"n_layer=true"}, TT_ERR_CONFIG, "config.json: n_layer: expected an integer, got a boolean"},
    {{"n_embd=[64]"}, TT_ERR_CONFIG, "config.json: n_embd: expected an integer, got an array"},
    {{"n_head=2.5"}, TT_ERR_CONFIG, "config.json: n_head: 2.5 is not an integer"},
    {{"n_layer=0"}, TT_ERR_CONFIG, "config.json: n_layer: 0 is below the minimum 1"},
    {{"n_embd=-64"}, TT_ERR_CONFIG, "config.json: n_embd: -64 is below the minimum 1"},
    {{"vocab_size=2000000"}, TT_ERR_CONFIG,
     "config.json: vocab_size: 2000000 exceeds the limit 1000000"},
    {{"vocab_size=1e300"}, TT_ERR_CONFIG, "config.json: vocab_size: 1.0000000000000001e+300 exceeds"},
    {{"n_positions=100000"}, TT_ERR_CONFIG, "config.json: n_positions: 100000 exceeds the limit 65536"},
    {{"-n_positions", "n_ctx=70000"}, TT_ERR_CONFIG, "config.json: n_ctx: 70000 exceeds the limit"},
    {{"n_embd=20000"}, TT_ERR_CONFIG, "config.json: n_embd: 20000 exceeds the limit 16384"},
    {{"n_layer=1000"}, TT_ERR_CONFIG, "config.json: n_layer: 1000 exceeds the limit 512"},
    {{"n_head=1024"}, TT_ERR_CONFIG, "config.json: n_head: 1024 exceeds the limit 512"},
    {{"n_inner=200000"}, TT_ERR_CONFIG, "config.json: n_inner: 200000 exceeds the limit 131072"},
    {{"n_inner=\"256\""}, TT_ERR_CONFIG, "config.json: n_inner: expected an integer, got a string"},
    {{"n_head=5"}, TT_ERR_CONFIG, "config.json: n_embd 64 is not a multiple of n_head 5"},
    {{"vocab_size=1000000", "n_embd=16384", "n_head=512", "n_layer=512"}, TT_ERR_CONFIG,
     "parameters exceed the limit of 1000000000000"},
    {{"activation_function=\"relu\""}, TT_ERR_UNSUPPORTED,
     "config.json: activation_function: 'relu' is not supported"},
    {{"activation_function=1"}, TT_ERR_CONFIG,
     "config.json: activation_function: expected a string, got a number (1)"},
    {{"model_type=\"bert\""}, TT_ERR_UNSUPPORTED,
     "config.json: model_type: 'bert' is not an architecture tokentop runs (it runs gpt2, llama, "
     "mistral, qwen2, qwen3)"},
    {{"model_type=\"bert\"", "-n_embd"}, TT_ERR_UNSUPPORTED, "'bert' is not an architecture"},
    {{"layer_norm_epsilon=0"}, TT_ERR_CONFIG, "config.json: layer_norm_epsilon: 0 is not in (0, 1)"},
    {{"layer_norm_epsilon=-1e-5"}, TT_ERR_CONFIG, "layer_norm_epsilon: -1e-05 is not in (0, 1)"},
    {{"layer_norm_epsilon=1.5"}, TT_ERR_CONFIG, "layer_norm_epsilon: 1.5 is not in (0, 1)"},
    {{"layer_norm_epsilon=\"1e-5\""}, TT_ERR_CONFIG,
     "config.json: layer_norm_epsilon: expected a number, got a string (\"1e-5\")"},
    {{"scale_attn_weights=false"}, TT_ERR_UNSUPPORTED,
     "config.json: scale_attn_weights: false is not supported"},
    {{"scale_attn_weights=\"yes\""}, TT_ERR_CONFIG,
     "config.json: scale_attn_weights: expected true or false, got a string (\"yes\")"},
    {{"scale_attn_by_inverse_layer_idx=true"}, TT_ERR_UNSUPPORTED,
     "config.json: scale_attn_by_inverse_layer_idx: true is not supported"},
    {{"bos_token_id=600"}, TT_ERR_CONFIG,
     "config.json: bos_token_id: token id 600 is outside the vocabulary [0, 512)"},
    {{"eos_token_id=-1"}, TT_ERR_CONFIG, "eos_token_id: token id -1 is outside the vocabulary"},
    {{"eos_token_id=\"511\""}, TT_ERR_CONFIG,
     "config.json: eos_token_id: expected a token id (integer), got a string (\"511\")"},
    {{"tie_word_embeddings=\"no\""}, TT_ERR_CONFIG,
     "config.json: tie_word_embeddings: expected true or false"},
};

START_TEST(rejects_invalid_config)
{
    char *json = config_with(bad_configs[_i].edits);
    model_config c;
    tt_error err = {0};
    tt_status s = model_config_parse(json, strlen(json), "config.json", &c, &err);
    ck_assert_msg(s == bad_configs[_i].status, "status %d (want %d) for %s: %s", (int)s,
                  (int)bad_configs[_i].status, json, err.msg);
    ck_assert_msg(strstr(err.msg, bad_configs[_i].want) != NULL, "message '%s' lacks '%s'",
                  err.msg, bad_configs[_i].want);
    free(json);
}
END_TEST

START_TEST(rejects_malformed_config_json)
{
    static const struct { const char *text, *want; } cases[] = {
        {"{\"vocab_size\": 512,", "config.json: not valid JSON (error at line 1"},
        {"{\n\"n_embd\": 64\n\"n_head\": 4}", "config.json: not valid JSON (error at line 3"},
        {"", "config.json: not valid JSON"},
        {"[1, 2]", "config.json: expected a JSON object, got an array"},
        {"{} {}", "config.json: data after the JSON value"},
    };
    /* Overflowing numbers parse as infinity (cJSON), which no field accepts. */
    static const struct { const char *text, *want; } inf_cases[] = {
        {"{\"vocab_size\": 512, \"n_positions\": 64, \"n_embd\": 64, \"n_head\": 4, "
         "\"n_layer\": 2, \"layer_norm_epsilon\": 1e999}", "layer_norm_epsilon: inf is not finite"},
        {"{\"vocab_size\": 1e999}", "vocab_size: inf is not an integer"},
    };
    for (size_t i = 0; i < sizeof inf_cases / sizeof inf_cases[0]; i++) {
        model_config c;
        tt_error err = {0};
        tt_status s = model_config_parse(inf_cases[i].text, strlen(inf_cases[i].text),
                                        "config.json", &c, &err);
        ck_assert_int_eq(s, TT_ERR_CONFIG);
        ck_assert_msg(strstr(err.msg, inf_cases[i].want) != NULL, "'%s' lacks '%s'", err.msg,
                      inf_cases[i].want);
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        model_config c;
        tt_error err = {0};
        tt_status s = model_config_parse(cases[i].text, strlen(cases[i].text), "config.json", &c,
                                        &err);
        ck_assert_int_eq(s, TT_ERR_FORMAT);
        ck_assert_msg(strstr(err.msg, cases[i].want) != NULL, "'%s' lacks '%s'", err.msg,
                      cases[i].want);
    }
}
END_TEST

START_TEST(parses_config_with_defaults)
{
    const char *none[] = {NULL};
    char *json = config_with(none);
    model_config c;
    tt_error err = {0};
    ck_assert_msg(model_config_parse(json, strlen(json), "config.json", &c, &err) == TT_OK, "%s",
                  err.msg);
    ck_assert_int_eq(c.V, 512);
    ck_assert_int_eq(c.maxT, 64);
    ck_assert_int_eq(c.C, 64);
    ck_assert_int_eq(c.NH, 4);
    ck_assert_int_eq(c.L, 2);
    ck_assert_int_eq(c.FF, 256);               /* n_inner null -> 4C */
    ck_assert(c.norm_eps == 1e-5f);
    ck_assert_int_eq(c.act, ARCH_ACT_GELU_TANH);
    ck_assert_int_eq(c.bos_id, 511);
    ck_assert_int_eq(model_config_eos(&c), 511);
    ck_assert(!(c.features & ARCH_F_UNTIED));
    ck_assert_str_eq(c.arch->name, "gpt2");
    free(json);

    /* The minimal config: only the five sizes, n_ctx standing in for n_positions. */
    const char *min = "{\"vocab_size\": 300, \"n_ctx\": 16, \"n_embd\": 12, \"n_head\": 3, "
                      "\"n_layer\": 1}";
    ck_assert_msg(model_config_parse(min, strlen(min), "config.json", &c, &err) == TT_OK, "%s",
                  err.msg);
    ck_assert_int_eq(c.maxT, 16);
    ck_assert_int_eq(c.FF, 48);
    ck_assert(c.norm_eps == 1e-5f);
    ck_assert_int_eq(c.act, ARCH_ACT_GELU_TANH);
    ck_assert_int_eq(c.bos_id, -1);
    ck_assert_int_eq(model_config_eos(&c), -1);
}
END_TEST

START_TEST(parses_config_variants)
{
    static const struct { const char *edits[3]; int FF, act, maxT; float eps; } ok[] = {
        {{"n_inner=100"}, 100, ARCH_ACT_GELU_TANH, 64, 1e-5f},
        {{"activation_function=\"gelu\""}, 256, ARCH_ACT_GELU_ERF, 64, 1e-5f},
        {{"activation_function=\"gelu_pytorch_tanh\""}, 256, ARCH_ACT_GELU_TANH, 64, 1e-5f},
        {{"activation_function=\"gelu_fast\""}, 256, ARCH_ACT_GELU_TANH, 64, 1e-5f},
        {{"-activation_function", "layer_norm_epsilon=1e-6"}, 256, ARCH_ACT_GELU_TANH, 64, 1e-6f},
        {{"-n_positions", "n_ctx=32"}, 256, ARCH_ACT_GELU_TANH, 32, 1e-5f},
        {{"n_positions=48", "n_ctx=32"}, 256, ARCH_ACT_GELU_TANH, 48, 1e-5f},
        {{"-model_type", "scale_attn_by_inverse_layer_idx=false"}, 256, ARCH_ACT_GELU_TANH, 64, 1e-5f},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char *json = config_with(ok[i].edits);
        model_config c;
        tt_error err = {0};
        ck_assert_msg(model_config_parse(json, strlen(json), "config.json", &c, &err) == TT_OK,
                      "%s: %s", json, err.msg);
        ck_assert_int_eq(c.FF, ok[i].FF);
        ck_assert_int_eq(c.act, ok[i].act);
        ck_assert_int_eq(c.maxT, ok[i].maxT);
        ck_assert(c.norm_eps == ok[i].eps);
        free(json);
    }
}
END_TEST

START_TEST(counts_parameters_of_released_sizes)
{
    /* The figures transformers' num_parameters() reports (tied lm_head). */
    static const struct { const char *size; unsigned long long n; } sizes[] = {
        {"gpt2", 124439808ull}, {"gpt2-medium", 354823168ull}, {"gpt2-large", 774030080ull},
        {"gpt2-xl", 1557611200ull}, {"distilgpt2", 81912576ull},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        modelgen_options o;
        modelgen_options_default(&o);
        ck_assert_int_eq(modelgen_options_gpt2(&o, sizes[i].size), 0);
        extern const arch_desc arch_gpt2;
        unsigned f = ARCH_F_LEARNED_POS | ARCH_F_QKV_FUSED | ARCH_F_QKV_BIAS | ARCH_F_OUT_BIAS |
                     ARCH_F_MLP_BIAS | ARCH_F_NORM_BIAS;
        model_config c = {.arch = &arch_gpt2, .features = f, .V = o.V, .maxT = o.maxT, .C = o.C,
                          .NH = o.NH, .NKV = o.NH, .HS = o.C / o.NH, .L = o.L, .FF = 4 * o.C};
        ck_assert_uint_eq(model_config_n_params(&c), sizes[i].n);
        c.features |= ARCH_F_UNTIED;
        ck_assert_uint_eq(model_config_n_params(&c), sizes[i].n + (uint64_t)o.V * o.C);
    }
}
END_TEST

/* ============================================================================================
 * generation_config.json */

START_TEST(parses_generation_config)
{
    const char *j = "{\"_from_model_config\": true, \"temperature\": 0.7, \"top_k\": 40, "
                    "\"top_p\": 0.9, \"do_sample\": true, \"max_new_tokens\": 128, "
                    "\"repetition_penalty\": 1.3, \"eos_token_id\": [50, 7], \"pad_token_id\": null}";
    model_generation_defaults g;
    tt_error err = {0};
    ck_assert_msg(model_generation_parse(j, strlen(j), "generation_config.json", 512, &g, &err) ==
                  TT_OK, "%s", err.msg);
    ck_assert(g.has_temperature && g.temperature == 0.7f);
    ck_assert(g.has_top_k && g.top_k == 40);
    ck_assert(g.has_top_p && g.top_p == 0.9f);
    ck_assert(g.has_do_sample && g.do_sample);
    ck_assert(g.has_max_new_tokens && g.max_new_tokens == 128);
    ck_assert(g.has_rep_penalty && g.repetition_penalty == 1.3f);
    ck_assert_int_eq(g.n_eos, 2);             /* every listed id ends a reply */
    ck_assert_int_eq(g.eos_ids[0], 50);
    ck_assert_int_eq(g.eos_ids[1], 7);

    const char *e = "{\"bos_token_id\": 1, \"temperature\": null}";
    ck_assert(model_generation_parse(e, strlen(e), "g", 512, &g, &err) == TT_OK);
    ck_assert(!g.has_temperature && !g.has_top_k && !g.has_top_p && !g.has_do_sample &&
              !g.has_max_new_tokens && !g.has_rep_penalty);
    ck_assert_int_eq(g.n_eos, 0);
}
END_TEST

START_TEST(rejects_invalid_generation_config)
{
    static const struct { const char *text, *want; } cases[] = {
        {"{\"temperature\": \"hot\"}",
         "generation_config.json: temperature: expected a number, got a string (\"hot\")"},
        {"{\"temperature\": -1}", "generation_config.json: temperature: -1 is negative"},
        {"{\"top_p\": 1.5}", "generation_config.json: top_p: 1.5 is not in [0, 1]"},
        {"{\"top_k\": -1}", "generation_config.json: top_k: -1 is below the minimum 0"},
        {"{\"top_k\": 2.5}", "generation_config.json: top_k: 2.5 is not an integer"},
        {"{\"do_sample\": \"yes\"}", "generation_config.json: do_sample: expected true or false"},
        {"{\"max_new_tokens\": \"10\"}", "generation_config.json: max_new_tokens: expected an integer"},
        {"{\"repetition_penalty\": 0}", "generation_config.json: repetition_penalty: 0 is not positive"},
        {"{\"eos_token_id\": 9999}",
         "generation_config.json: eos_token_id: token id 9999 is outside the vocabulary [0, 512)"},
        {"{\"eos_token_id\": [\"x\"]}", "generation_config.json: eos_token_id: expected a token id"},
        {"{\"temperature\": 0.7,}", "generation_config.json: not valid JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        model_generation_defaults g;
        tt_error err = {0};
        tt_status s = model_generation_parse(cases[i].text, strlen(cases[i].text),
                                            "generation_config.json", 512, &g, &err);
        ck_assert_int_ne(s, TT_OK);
        ck_assert_msg(strstr(err.msg, cases[i].want) != NULL, "'%s' lacks '%s'", err.msg,
                      cases[i].want);
    }
}
END_TEST

/* Found by fuzzing (tests/fuzz/corpus/generation_config/crash-float-overflow and
 * crash-float-underflow): a finite double beyond the float range was accepted and became an
 * infinite repetition penalty, and a tiny positive one became a penalty of 0. */
/* Found by fuzzing (tests/fuzz/corpus/config/crash-epsilon-underflow): 1e-50 is in (0, 1) as a
 * double but 0 as the float the model keeps, which LayerNorm then divides by. */
START_TEST(rejects_layer_norm_epsilon_that_is_zero_as_a_float)
{
    const char *json = "{\"vocab_size\":300,\"n_positions\":8,\"n_embd\":4,\"n_head\":2,"
                       "\"n_layer\":1,\"layer_norm_epsilon\":1e-50}";
    model_config c;
    tt_error err = {0};
    ck_assert_int_eq(model_config_parse(json, strlen(json), "config.json", &c, &err),
                     TT_ERR_CONFIG);
    ck_assert_str_eq(err.msg, "config.json: layer_norm_epsilon: 1e-50 is too small");
}
END_TEST

START_TEST(rejects_generation_values_beyond_the_float_range)
{
    static const char *const cases[][2] = {
        {"{\"repetition_penalty\": 1.21e308}", "repetition_penalty: 1.21e+308 is too large"},
        {"{\"temperature\": 1e39}", "temperature: 1e+39 is too large"},
        {"{\"repetition_penalty\": 1.21e-308}", "repetition_penalty: 1.21e-308 is too small"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        model_generation_defaults g;
        tt_error err = {0};
        ck_assert_int_ne(model_generation_parse(cases[i][0], strlen(cases[i][0]),
                                               "generation_config.json", 512, &g, &err), TT_OK);
        ck_assert_msg(strstr(err.msg, cases[i][1]) != NULL, "'%s' lacks '%s'", err.msg,
                      cases[i][1]);
    }
    const char *ok = "{\"repetition_penalty\": 3e38}";
    model_generation_defaults g;
    tt_error err = {0};
    ck_assert_int_eq(model_generation_parse(ok, strlen(ok), "generation_config.json", 512, &g,
                                           &err), TT_OK);
    ck_assert(isfinite(g.repetition_penalty));
}
END_TEST

/* ============================================================================================
 * Model directories */

static char *make_model(const modelgen_options *o)
{
    char *dir = tu_tmpdir();
    tt_error err = {0};
    ck_assert_msg(modelgen_write(dir, o, &err) == TT_OK, "modelgen: %s", err.msg);
    return dir;
}

static model *load_ok(const char *dir)
{
    model *m = NULL;
    tt_error err = {0};
    ck_assert_msg(model_load(dir, &m, &err) == TT_OK, "model_load(%s): %s", dir, err.msg);
    ck_assert_ptr_nonnull(m);
    return m;
}

static tt_status load_fail(const char *dir, tt_error *err)
{
    model *m = (model *)0x1;
    tt_status s = model_load(dir, &m, err);
    ck_assert_msg(s != TT_OK, "model_load(%s) accepted a broken model", dir);
    ck_assert_ptr_null(m);
    return s;
}

/* Loading dir fails with status and a message that contains want. */
static void expect_load_error(const char *dir, tt_status status, const char *want)
{
    tt_error err = {0};
    ck_assert_int_eq(load_fail(dir, &err), status);
    ck_assert_msg(strstr(err.msg, want) != NULL, "'%s' lacks '%s'", err.msg, want);
}

/* Every weight of m in a fixed order, as floats (caller frees). */
static float *model_values(const model *m, size_t *n_out)
{
    const model_config *c = &m->config;
    size_t V = (size_t)c->V, C = (size_t)c->C, T = (size_t)c->maxT, FF = (size_t)c->FF;
    size_t per_layer = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + C * FF + FF + FF * C + C;
    size_t n = 2 * V * C + T * C + (size_t)c->L * per_layer + 2 * C;
    float *v = malloc(n * sizeof *v), *p = v;
#define TAKE(ref, count) (tensor_ref_to_f32((ref), 0, (count), p), p += (count))
    const tensor_ref *g = m->tensors.global;
    TAKE(g[ARCH_T_TOKEN_EMBD], V * C);
    TAKE(g[ARCH_T_POS_EMBD], T * C);
    for (int l = 0; l < c->L; l++) {
        const tensor_ref *h = model_layer_tensors(m, l);
        TAKE(h[ARCH_T_ATTN_NORM], C);
        TAKE(h[ARCH_T_ATTN_NORM_B], C);
        TAKE(h[ARCH_T_QKV], 3 * C * C);
        TAKE(h[ARCH_T_QKV_B], 3 * C);
        TAKE(h[ARCH_T_O], C * C);
        TAKE(h[ARCH_T_O_B], C);
        TAKE(h[ARCH_T_FFN_NORM], C);
        TAKE(h[ARCH_T_FFN_NORM_B], C);
        TAKE(h[ARCH_T_UP], C * FF);
        TAKE(h[ARCH_T_UP_B], FF);
        TAKE(h[ARCH_T_DOWN], FF * C);
        TAKE(h[ARCH_T_DOWN_B], C);
    }
    TAKE(g[ARCH_T_OUT_NORM], C);
    TAKE(g[ARCH_T_OUT_NORM_B], C);
    TAKE(g[ARCH_T_OUTPUT], V * C);
#undef TAKE
    ck_assert_uint_eq((size_t)(p - v), n);
    *n_out = n;
    return v;
}

/* Rewrites dir/model.safetensors tensor by tensor. edit() may rename, retype or reshape a tensor
 * (same byte size) and returns 0 to drop it, 1 to keep it (edited), 2 to keep the original and
 * add the edited copy after it. */
typedef int (*tensor_edit)(const char *name, char *new_name, char *dtype, int *ndim,
                           uint64_t *shape);

static void rewrite_model(const char *dir, tensor_edit edit)
{
    const char *path = tu_path("%s/model.safetensors", dir);
    safetensors_file *f;
    tt_error err = {0};
    ck_assert_msg(safetensors_open(path, &f, &err) == TT_OK, "%s", err.msg);
    size_t n = safetensors_count(f), cap = 256 * (n + 4), hl = 0;
    char *hdr = malloc(cap);
    hl += (size_t)snprintf(hdr, cap, "{");
    struct { const void *data; size_t len; } *parts = calloc(2 * n, sizeof *parts);
    size_t np = 0;
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const st_tensor *t = safetensors_at(f, i);
        for (int pass = 0; pass < 2; pass++) {
            char name[128], dtype[16];
            int ndim = t->ndim;
            uint64_t shape[ST_MAX_DIMS];
            snprintf(name, sizeof name, "%s", t->name);
            snprintf(dtype, sizeof dtype, "%s", st_dtype_name(t->dtype));
            memcpy(shape, t->shape, sizeof shape);
            int keep = edit(name, name, dtype, &ndim, shape);
            if (keep == 0 || (pass == 1 && keep != 2))
                break;
            if (keep == 2 && pass == 0) {   /* the original first, unedited */
                snprintf(name, sizeof name, "%s", t->name);
                snprintf(dtype, sizeof dtype, "%s", st_dtype_name(t->dtype));
                ndim = t->ndim;
                memcpy(shape, t->shape, sizeof shape);
            }
            hl += (size_t)snprintf(hdr + hl, cap - hl, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[",
                                   np ? "," : "", name, dtype);
            for (int d = 0; d < ndim; d++)
                hl += (size_t)snprintf(hdr + hl, cap - hl, "%s%llu", d ? "," : "",
                                       (unsigned long long)shape[d]);
            hl += (size_t)snprintf(hdr + hl, cap - hl, "],\"data_offsets\":[%llu,%llu]}",
                                   (unsigned long long)off, (unsigned long long)(off + t->nbytes));
            parts[np].data = t->data;
            parts[np++].len = t->nbytes;
            off += t->nbytes;
        }
    }
    hl += (size_t)snprintf(hdr + hl, cap - hl, "}");
    ck_assert_uint_lt(hl, cap);
    size_t total = 8 + hl + off, k = 0;
    unsigned char *buf = malloc(total);
    for (int i = 0; i < 8; i++)
        buf[k++] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + k, hdr, hl);
    k += hl;
    for (size_t i = 0; i < np; i++) {
        memcpy(buf + k, parts[i].data, parts[i].len);
        k += parts[i].len;
    }
    safetensors_close(f);
    ck_assert_int_eq(tu_write_file(path, buf, total), 0);
    free(buf);
    free(parts);
    free(hdr);
}

static void write_text(const char *dir, const char *file, const char *text)
{
    ck_assert_int_eq(tu_write_file(tu_path("%s/%s", dir, file), text, strlen(text)), 0);
}

static modelgen_options tiny(void)
{
    modelgen_options o;
    modelgen_options_default(&o);
    return o;
}

/* --- loading what modelgen writes ---------------------------------------------------------- */

START_TEST(loads_generated_model)
{
    modelgen_options o = tiny();
    char *dir = make_model(&o);
    model *m = load_ok(dir);
    ck_assert_int_eq(m->config.V, 512);
    ck_assert_int_eq(m->config.C, 64);
    ck_assert_int_eq(m->config.L, 2);
    ck_assert_int_eq(m->config.FF, 256);
    ck_assert_int_eq(model_config_eos(&m->config), 511);
    ck_assert_int_eq(m->gen.eos_ids[0], 511);
    ck_assert_int_eq(m->file_dtype, TT_F32);
    ck_assert(m->tensors.lm_head_tied);
    ck_assert_ptr_eq(m->tensors.global[ARCH_T_OUTPUT].data,
                     m->tensors.global[ARCH_T_TOKEN_EMBD].data);
    model_config c = m->config;
    ck_assert_uint_eq(m->n_params, model_config_n_params(&c));
    ck_assert_str_eq(m->dir, dir);
    const char *slash = strrchr(dir, '/');
    ck_assert_str_eq(m->name, slash + 1);
    /* Values in the ranges modelgen draws from: LayerNorm weights near 1, biases small. */
    float x[64];
    tensor_ref_to_f32(model_layer_tensors(m, 1)[ARCH_T_FFN_NORM], 0, 64, x);
    for (int i = 0; i < 64; i++)
        ck_assert(x[i] >= 0.9f && x[i] <= 1.1f);
    tensor_ref_to_f32(model_layer_tensors(m, 0)[ARCH_T_QKV_B], 0, 64, x);
    for (int i = 0; i < 64; i++)
        ck_assert(x[i] >= -0.05f && x[i] <= 0.05f);
    model_free(m);
    model_free(NULL);

    /* A trailing slash, or ".", names the same model. */
    m = load_ok(tu_path("%s/", dir));
    ck_assert_str_eq(m->name, slash + 1);
    model_free(m);
    m = load_ok(tu_path("%s/.", dir));
    ck_assert_str_eq(m->name, slash + 1);
    tu_free_model(m, dir);
}
END_TEST

START_TEST(exact_models_hold_identical_values_in_every_dtype)
{
    modelgen_options o = tiny();
    o.exact = true;
    o.untied_lm_head = true;
    float *vals[3];
    size_t n[3];
    for (int d = 0; d < 3; d++) {
        o.dtype = (tt_dtype)d;
        char *dir = make_model(&o);
        model *m = load_ok(dir);
        ck_assert_int_eq(m->file_dtype, (tt_dtype)d);
        ck_assert_int_eq(model_layer_tensors(m, 1)[ARCH_T_UP].dtype, (tt_dtype)d);
        vals[d] = model_values(m, &n[d]);
        tu_free_model(m, dir);
    }
    ck_assert_uint_eq(n[0], n[1]);
    ck_assert_uint_eq(n[0], n[2]);
    ck_assert(memcmp(vals[0], vals[1], n[0] * sizeof(float)) == 0);
    ck_assert(memcmp(vals[0], vals[2], n[0] * sizeof(float)) == 0);
    size_t nonzero = 0;
    for (size_t i = 0; i < n[0]; i++)
        nonzero += vals[0][i] != 0;
    ck_assert_uint_gt(nonzero, n[0] * 9 / 10);
    for (int d = 0; d < 3; d++)
        free(vals[d]);
}
END_TEST

START_TEST(half_models_hold_rounded_fp32_values)
{
    modelgen_options o = tiny();
    float *v32, *v16, *vb16;
    size_t n;
    char *dir = make_model(&o);
    model *m = load_ok(dir);
    v32 = model_values(m, &n);
    tu_free_model(m, dir);
    o.dtype = TT_F16;
    dir = make_model(&o);
    m = load_ok(dir);
    v16 = model_values(m, &n);
    tu_free_model(m, dir);
    o.dtype = TT_BF16;
    dir = make_model(&o);
    m = load_ok(dir);
    vb16 = model_values(m, &n);
    tu_free_model(m, dir);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert(v16[i] == tt_f16_to_f32(tt_f32_to_f16(v32[i])));
        ck_assert(vb16[i] == tt_bf16_to_f32(tt_f32_to_bf16(v32[i])));
        differ += v16[i] != v32[i];
    }
    ck_assert_uint_gt(differ, n / 2);     /* not exact mode: rounding really happened */
    free(v32);
    free(v16);
    free(vb16);
}
END_TEST

START_TEST(prefix_and_mask_buffers_do_not_change_values)
{
    modelgen_options o = tiny();
    o.prefix = false;
    char *plain = make_model(&o);
    o.prefix = true;
    o.mask_buffers = true;
    char *masked = make_model(&o);

    /* The files really differ in naming and extras. */
    safetensors_file *f;
    tt_error err = {0};
    ck_assert(safetensors_open(tu_path("%s/model.safetensors", masked), &f, &err) == TT_OK);
    ck_assert_ptr_nonnull(safetensors_find(f, "transformer.h.1.attn.bias"));
    ck_assert_ptr_nonnull(safetensors_find(f, "transformer.h.1.attn.masked_bias"));
    ck_assert_ptr_null(safetensors_find(f, "wte.weight"));
    safetensors_close(f);
    ck_assert(safetensors_open(tu_path("%s/model.safetensors", plain), &f, &err) == TT_OK);
    ck_assert_ptr_nonnull(safetensors_find(f, "wte.weight"));
    ck_assert_ptr_null(safetensors_find(f, "h.0.attn.bias"));
    safetensors_close(f);

    model *a = load_ok(plain), *b = load_ok(masked);
    size_t na, nb;
    float *va = model_values(a, &na), *vb = model_values(b, &nb);
    ck_assert_uint_eq(na, nb);
    ck_assert(memcmp(va, vb, na * sizeof(float)) == 0);
    ck_assert_uint_eq(a->n_params, b->n_params);   /* buffers are not parameters */
    free(va);
    free(vb);
    tu_free_model(a, plain);
    tu_free_model(b, masked);
}
END_TEST

START_TEST(untied_lm_head_is_its_own_matrix)
{
    modelgen_options o = tiny();
    char *tied = make_model(&o);
    o.untied_lm_head = true;
    char *untied = make_model(&o);
    model *a = load_ok(tied), *b = load_ok(untied);
    ck_assert(a->tensors.lm_head_tied);
    ck_assert(!b->tensors.lm_head_tied);
    ck_assert_ptr_ne(b->tensors.global[ARCH_T_OUTPUT].data, b->tensors.global[ARCH_T_TOKEN_EMBD].data);
    size_t VC = (size_t)a->config.V * (size_t)a->config.C;
    ck_assert_uint_eq(b->n_params, a->n_params + VC);
    size_t na, nb;
    float *va = model_values(a, &na), *vb = model_values(b, &nb);
    /* Everything before lm_head is the same draw; lm_head itself differs from wte. */
    ck_assert(memcmp(va, vb, (na - VC) * sizeof(float)) == 0);
    ck_assert(memcmp(vb + nb - VC, vb, VC * sizeof(float)) != 0);
    ck_assert(memcmp(va + na - VC, va, VC * sizeof(float)) == 0);
    free(va);
    free(vb);
    tu_free_model(a, tied);
    tu_free_model(b, untied);
}
END_TEST

START_TEST(tie_word_embeddings_decides_like_transformers)
{
    /* An lm_head.weight in the file with tie_word_embeddings absent (true): transformers ties it
     * to wte after loading, so tokentop does too. */
    modelgen_options o = tiny();
    o.untied_lm_head = true;
    char *dir = make_model(&o);
    char *cfg = tu_read_file(tu_path("%s/config.json", dir), NULL);
    char *at = strstr(cfg, "  \"tie_word_embeddings\": false,\n");
    ck_assert_ptr_nonnull(at);
    memmove(at, at + 32, strlen(at + 32) + 1);
    write_text(dir, "config.json", cfg);
    model *m = load_ok(dir);
    ck_assert(m->tensors.lm_head_tied);
    ck_assert_ptr_eq(m->tensors.global[ARCH_T_OUTPUT].data, m->tensors.global[ARCH_T_TOKEN_EMBD].data);
    model_free(m);
    free(cfg);
    tu_tmpdir_free(dir);

    /* tie_word_embeddings false without an lm_head.weight: nothing to use. */
    o.untied_lm_head = false;
    dir = make_model(&o);
    cfg = tu_read_file(tu_path("%s/config.json", dir), NULL);
    at = strstr(cfg, "\"use_cache\"");
    ck_assert_ptr_nonnull(at);
    char *edited = malloc(strlen(cfg) + 64);
    sprintf(edited, "%.*s\"tie_word_embeddings\": false, %s", (int)(at - cfg), cfg, at);
    write_text(dir, "config.json", edited);
    tt_error err = {0};
    load_fail(dir, &err);
    ck_assert_msg(strstr(err.msg, "model.safetensors: missing tensor lm_head.weight (config.json "
                         "sets tie_word_embeddings to false)") != NULL, "%s", err.msg);
    free(edited);
    free(cfg);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(reads_generation_config_and_ignores_a_missing_or_invalid_one)
{
    modelgen_options o = tiny();
    char *dir = make_model(&o);
    write_text(dir, "generation_config.json",
               "{\"do_sample\": true, \"temperature\": 0.8, \"top_k\": 20, \"eos_token_id\": 7}");
    model *m = load_ok(dir);
    ck_assert(m->gen.has_temperature && m->gen.temperature == 0.8f);
    ck_assert(m->gen.has_top_k && m->gen.top_k == 20);
    ck_assert(m->gen.has_do_sample && m->gen.do_sample);
    ck_assert(!m->gen.has_top_p);
    ck_assert_int_eq(m->gen.eos_ids[0], 7);
    model_free(m);

    ck_assert_int_eq(remove(tu_path("%s/generation_config.json", dir)), 0);
    m = load_ok(dir);
    ck_assert(!m->gen.has_temperature);
    ck_assert_int_eq(m->gen.n_eos, 0);
    ck_assert_str_eq(m->gen_warning, "");
    model_free(m);

    /* An invalid file is ignored as a whole (the model is usable without it), with the reason. */
    write_text(dir, "generation_config.json", "{\"temperature\": 0.5, \"top_p\": \"high\"}");
    m = load_ok(dir);
    ck_assert(!m->gen.has_temperature && !m->gen.has_top_p);
    ck_assert_msg(strstr(m->gen_warning, "/generation_config.json: top_p: expected a number, got a "
                         "string (\"high\")") != NULL, "%s", m->gen_warning);
    model_free(m);
    write_text(dir, "generation_config.json", "{\"top_p\": 0.5");
    m = load_ok(dir);
    ck_assert_msg(strstr(m->gen_warning, "/generation_config.json: not valid JSON") != NULL, "%s",
                  m->gen_warning);
    tu_free_model(m, dir);
}
END_TEST

/* --- tensor checks ------------------------------------------------------------------------- */

static int edit_transpose_fc(const char *name, char *new_name, char *dtype, int *ndim,
                             uint64_t *shape)
{
    if (strcmp(name, "h.3.mlp.c_fc.weight") == 0) {
        uint64_t t = shape[0];
        shape[0] = shape[1];
        shape[1] = t;
    }
    return 1;
}

START_TEST(wrong_shape_is_named_exactly)
{
    modelgen_options o = tiny();
    o.prefix = false;
    o.L = 4;
    char *dir = make_model(&o);
    rewrite_model(dir, edit_transpose_fc);
    tt_error err = {0};
    ck_assert_int_eq(load_fail(dir, &err), TT_ERR_FORMAT);
    char want[512];
    snprintf(want, sizeof want, "%s/model.safetensors: tensor h.3.mlp.c_fc.weight: expected "
             "[64,256], got [256,64]", dir);
    ck_assert_str_eq(err.msg, want);
    tu_tmpdir_free(dir);
}
END_TEST

static int edit_drop_ln2_bias(const char *name, char *new_name, char *dtype, int *ndim,
                              uint64_t *shape)
{
    return strcmp(name, "transformer.h.1.ln_2.bias") != 0;
}

static int edit_drop_wte(const char *name, char *new_name, char *dtype, int *ndim,
                         uint64_t *shape)
{
    return strcmp(name, "transformer.wte.weight") != 0;
}

static int edit_ln_to_i32(const char *name, char *new_name, char *dtype, int *ndim,
                          uint64_t *shape)
{
    if (strcmp(name, "transformer.h.0.ln_1.weight") == 0)
        strcpy(dtype, "I32");
    return 1;
}

static int edit_bias_to_matrix(const char *name, char *new_name, char *dtype, int *ndim,
                               uint64_t *shape)
{
    if (strcmp(name, "transformer.h.0.attn.c_attn.bias") == 0) {   /* [192] -> [3,64] */
        *ndim = 2;
        shape[0] = 3;
        shape[1] = 64;
    }
    return 1;
}

static int edit_duplicate_unprefixed(const char *name, char *new_name, char *dtype, int *ndim,
                                     uint64_t *shape)
{
    if (strcmp(name, "transformer.ln_f.bias") == 0) {
        strcpy(new_name, "ln_f.bias");
        return 2;
    }
    return 1;
}

static int edit_extras(const char *name, char *new_name, char *dtype, int *ndim, uint64_t *shape)
{
    /* Unknown extras (an optimizer leftover, a value head) are ignored. */
    if (strcmp(name, "transformer.ln_f.bias") == 0) {
        strcpy(new_name, "v_head.summary.bias");
        return 2;
    }
    return 1;
}

START_TEST(refuses_missing_and_mistyped_tensors)
{
    static const struct { tensor_edit edit; tt_status status; const char *want; } cases[] = {
        {edit_drop_ln2_bias, TT_ERR_FORMAT,
         "/model.safetensors: missing tensor h.1.ln_2.bias (looked for it with and without the "
         "'transformer.' prefix)"},
        {edit_drop_wte, TT_ERR_FORMAT, "/model.safetensors: missing tensor wte.weight"},
        {edit_ln_to_i32, TT_ERR_UNSUPPORTED,
         "/model.safetensors: tensor transformer.h.0.ln_1.weight: dtype I32 is not a weight type "
         "(F32, F16 or BF16)"},
        {edit_bias_to_matrix, TT_ERR_FORMAT,
         "/model.safetensors: tensor transformer.h.0.attn.c_attn.bias: expected [192], got [3,64]"},
        {edit_duplicate_unprefixed, TT_ERR_FORMAT,
         "/model.safetensors: tensor ln_f.bias is present both with and without the "
         "'transformer.' prefix"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        modelgen_options o = tiny();
        char *dir = make_model(&o);
        rewrite_model(dir, cases[i].edit);
        tt_error err = {0};
        ck_assert_int_eq(load_fail(dir, &err), cases[i].status);
        ck_assert_msg(strstr(err.msg, cases[i].want) != NULL, "'%s' lacks '%s'", err.msg,
                      cases[i].want);
        ck_assert_msg(strncmp(err.msg, dir, strlen(dir)) == 0, "'%s' does not name the file",
                      err.msg);
        tu_tmpdir_free(dir);
    }
    modelgen_options o = tiny();
    char *dir = make_model(&o);
    rewrite_model(dir, edit_extras);
    model *m = load_ok(dir);
    tu_free_model(m, dir);
}
END_TEST

START_TEST(config_that_disagrees_with_weights_is_named)
{
    modelgen_options o = tiny();
    char *dir = make_model(&o);
    char *cfg = tu_read_file(tu_path("%s/config.json", dir), NULL);
    char *at = strstr(cfg, "\"n_embd\": 64");
    ck_assert_ptr_nonnull(at);
    memcpy(at, "\"n_embd\": 32", 12);
    write_text(dir, "config.json", cfg);
    expect_load_error(dir, TT_ERR_FORMAT, "model.safetensors: tensor transformer.wte.weight: "
                      "expected [512,32], got [512,64]");
    free(cfg);
    tu_tmpdir_free(dir);
}
END_TEST

/* --- directories that are not (loadable) models -------------------------------------------- */

START_TEST(refuses_pickle_checkpoint_with_conversion_hint)
{
    char *dir = tu_tmpdir();
    write_text(dir, "config.json", base_config);
    write_text(dir, "pytorch_model.bin", "PK\003\004 pickle");
    tt_error err = {0};
    ck_assert_int_eq(load_fail(dir, &err), TT_ERR_UNSUPPORTED);
    char want[1024];
    snprintf(want, sizeof want, "%s: only pytorch_model.bin found; tokentop reads "
             "model.safetensors only, because pickle checkpoints execute code when loaded. Convert "
             "with: python3 -c 'from transformers import AutoModelForCausalLM as M; "
             "M.from_pretrained(\"%s\").save_pretrained(\"%s\", safe_serialization=True)'",
             dir, dir, dir);
    ck_assert_str_eq(err.msg, want);

    remove(tu_path("%s/pytorch_model.bin", dir));
    write_text(dir, "model.ckpt", "x");
    expect_load_error(dir, TT_ERR_UNSUPPORTED,
                      "only model.ckpt found; tokentop reads model.safetensors only");
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(names_what_is_wrong_with_a_shard_index)
{
    char *dir = tu_tmpdir();
    write_text(dir, "config.json", base_config);
    write_text(dir, "model.safetensors.index.json", "{\"weight_map\": {}}");
    expect_load_error(dir, TT_ERR_FORMAT, "model.safetensors.index.json: weight_map: expected an "
                      "object naming the shard of every tensor");
    write_text(dir, "model.safetensors.index.json",
               "{\"weight_map\": {\"wte.weight\": \"../x.safetensors\"}}");
    expect_load_error(dir, TT_ERR_FORMAT, "weight_map: wte.weight: '../x.safetensors' is not a "
                      "file in the model directory");
    write_text(dir, "model.safetensors.index.json",
               "{\"weight_map\": {\"wte.weight\": \"model-00001-of-00002.safetensors\"}}");
    expect_load_error(dir, TT_ERR_IO, "model-00001-of-00002.safetensors: cannot open");
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(names_missing_files)
{
    char *dir = tu_tmpdir();
    expect_load_error(dir, TT_ERR_IO, ": missing config.json");

    write_text(dir, "config.json", base_config);
    expect_load_error(dir, TT_ERR_IO, ": missing model.safetensors");

    write_text(dir, "config.json", "{\"vocab_size\": 512");
    expect_load_error(dir, TT_ERR_FORMAT, "/config.json: not valid JSON");

    write_text(dir, "config.json", "{\"model_type\": \"bert\"}");
    expect_load_error(dir, TT_ERR_UNSUPPORTED,
                      "/config.json: model_type: 'bert' is not an architecture tokentop runs");

    write_text(dir, "config.json", base_config);
    write_text(dir, "model.safetensors", "junk");
    expect_load_error(dir, TT_ERR_FORMAT, "/model.safetensors: file is 4 bytes, shorter than");

    const char *nodir = tu_path("%s/absent", dir);
    expect_load_error(nodir, TT_ERR_IO, "absent: cannot open model directory");
    expect_load_error(tu_path("%s/config.json", dir), TT_ERR_IO, "config.json: not a directory");
    tu_tmpdir_free(dir);
}
END_TEST

/* --- reading weights ----------------------------------------------------------------------- */

START_TEST(converts_unaligned_halves_exactly)
{
    /* Every F16 and BF16 bit pattern, stored at an odd address. */
    unsigned char *buf = malloc(2 * 65536 + 1);
    float *out = malloc(65536 * sizeof *out);
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        memcpy(buf + 1 + 2 * i, &h, 2);
    }
    tensor_ref t = {.data = buf + 1, .dtype = TT_F16};
    tensor_ref_to_f32(t, 0, 65536, out);
    for (uint32_t i = 0; i < 65536; i++) {
        float want = tt_f16_to_f32((uint16_t)i);
        ck_assert(memcmp(&out[i], &want, 4) == 0);
    }
    t.dtype = TT_BF16;
    tensor_ref_to_f32(t, 100, 1000, out);
    for (uint32_t i = 0; i < 1000; i++) {
        float want = tt_bf16_to_f32((uint16_t)(i + 100));
        ck_assert(memcmp(&out[i], &want, 4) == 0);
    }
    float src[5] = {1.0f, -0.0f, 3.25f, 1e-40f, -7.5f};
    memcpy(buf + 3, src, sizeof src);
    t = (tensor_ref){.data = buf + 3, .dtype = TT_F32};
    tensor_ref_to_f32(t, 1, 4, out);
    ck_assert(memcmp(out, src + 1, 4 * sizeof(float)) == 0);
    free(buf);
    free(out);
}
END_TEST

START_TEST(weight_bytes_count_one_decode_step)
{
    modelgen_options o = tiny();
    char *dir = make_model(&o);
    model *m = load_ok(dir);
    size_t C = 64, V = 512, T = 64, FF = 256, L = 2;
    size_t layer = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + C * FF + FF + FF * C + C;
    size_t n = L * layer + 2 * C + V * C + 2 * C;       /* layers, ln_f, lm_head, 2 rows */
    ck_assert_uint_eq(model_weight_bytes(m, TT_F32), 4 * n);
    ck_assert_uint_eq(model_weight_bytes(m, TT_BF16), 2 * n);
    ck_assert_uint_lt(model_weight_bytes(m, TT_F32), 4 * m->n_params);   /* not the wpe table */
    (void)T;
    tu_free_model(m, dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tu_add_case(s, "config", TU_TESTS(
            rejects_malformed_config_json, parses_config_with_defaults, parses_config_variants,
            counts_parameters_of_released_sizes, parses_generation_config,
            rejects_invalid_generation_config, rejects_generation_values_beyond_the_float_range,
            rejects_layer_norm_epsilon_that_is_zero_as_a_float));
    tcase_add_loop_test(tc, rejects_invalid_config, 0,
                        (int)(sizeof bad_configs / sizeof bad_configs[0]));
    tc = tu_add_case(s, "load", TU_TESTS(
            loads_generated_model, exact_models_hold_identical_values_in_every_dtype,
            half_models_hold_rounded_fp32_values, prefix_and_mask_buffers_do_not_change_values,
            untied_lm_head_is_its_own_matrix, tie_word_embeddings_decides_like_transformers,
            reads_generation_config_and_ignores_a_missing_or_invalid_one,
            wrong_shape_is_named_exactly, refuses_missing_and_mistyped_tensors,
            config_that_disagrees_with_weights_is_named,
            refuses_pickle_checkpoint_with_conversion_hint, names_what_is_wrong_with_a_shard_index,
            names_missing_files, converts_unaligned_halves_exactly,
            weight_bytes_count_one_decode_step));
    tcase_set_timeout(tc, 60);
    return tu_run_suite(s);
}
