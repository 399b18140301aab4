/* check_arch.c: the Llama family as data (core/arch/): config.json read into a model_config for
 * llama, mistral, qwen2 and qwen3, unsupported options refused by name, RoPE's frequencies with
 * llama3 scaling, the KV cache sized by KV heads; and on random models of each family the CPU
 * engine's promises: a row has the same bits decoded alone, in a prefill and in a batch, so
 * speculative greedy with the model as its own draft rejects nothing and equals plain greedy. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arch/arch.h"
#include "core/base/util.h"
#include "core/cpu/kernels.h"
#include "core/cpu/kvcache.h"
#include "core/decode/sampler.h"
#include "core/decode/speculative.h"
#include "core/engine/engine.h"
#include "core/model/model.h"
#include "tests/testutil.h"

/* ---------------------------------------------------------------------------------------------
 * config.json */

static const char *llama_base =
    "{\"model_type\": \"llama\", \"vocab_size\": 1000, \"hidden_size\": 256, "
    "\"intermediate_size\": 512, \"num_hidden_layers\": 4, \"num_attention_heads\": 8, "
    "\"num_key_value_heads\": 2, \"max_position_embeddings\": 131072, \"rms_norm_eps\": 1e-05, "
    "\"rope_theta\": 500000.0, \"tie_word_embeddings\": true, \"bos_token_id\": 1, "
    "\"eos_token_id\": [2, 3, 4], \"hidden_act\": \"silu\"%s}";

/* llama_base with extra (", KEY: VALUE, ...") put first: cJSON reads the first of two equal
 * keys, so extra's values win over the base's. */
static tt_status parse_llama(const char *extra, model_config *c, tt_error *err)
{
    char buf[2048], json[2400];
    snprintf(buf, sizeof buf, llama_base, "");
    if (extra[0])
        snprintf(json, sizeof json, "{%s, %s", extra + 2, buf + 1);
    else
        snprintf(json, sizeof json, "%s", buf);
    return model_config_parse(json, strlen(json), "config.json", c, err);
}

START_TEST(reads_a_llama_config_with_grouped_query_attention)
{
    model_config c;
    tt_error err;
    ck_assert_msg(parse_llama("", &c, &err) == TT_OK, "%s", err.msg);
    ck_assert_str_eq(c.arch->name, "llama");
    ck_assert_int_eq(c.C, 256);
    ck_assert_int_eq(c.NH, 8);
    ck_assert_int_eq(c.NKV, 2);
    ck_assert_int_eq(c.HS, 32);
    ck_assert_int_eq(c.FF, 512);
    ck_assert_int_eq(c.maxT, 131072);
    ck_assert(c.rope.theta == 500000.0);
    ck_assert(c.features & ARCH_F_RMSNORM);
    ck_assert(c.features & ARCH_F_ROPE);
    ck_assert(c.features & ARCH_F_SWIGLU);
    ck_assert(!(c.features & (ARCH_F_UNTIED | ARCH_F_QKV_BIAS | ARCH_F_QK_NORM)));
    ck_assert_int_eq(c.bos_id, 1);
    ck_assert_int_eq(c.n_eos, 3);                 /* every listed id ends a reply */
    ck_assert_int_eq(c.eos_ids[2], 4);
    ck_assert_uint_eq(model_config_kv_bytes_per_token(&c, 4), 2 * 4 * 2 * 32 * 4);
}
END_TEST

START_TEST(each_family_sets_its_recipe)
{
    static const struct { const char *type; unsigned on, off; int HS; } cases[] = {
        {"mistral", 0, ARCH_F_QKV_BIAS | ARCH_F_QK_NORM, 32},
        {"qwen2", ARCH_F_QKV_BIAS, ARCH_F_OUT_BIAS | ARCH_F_QK_NORM, 32},
        {"qwen3", ARCH_F_QK_NORM, ARCH_F_QKV_BIAS, 128},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[2048], extra[128];
        snprintf(extra, sizeof extra, ", \"head_dim\": %d", cases[i].HS);
        snprintf(buf, sizeof buf, llama_base, extra);
        char *mt = strstr(buf, "\"llama\"");
        char json[2100];
        snprintf(json, sizeof json, "%.*s\"%s\"%s", (int)(mt - buf), buf, cases[i].type,
                 mt + strlen("\"llama\""));
        model_config c;
        tt_error err;
        ck_assert_msg(model_config_parse(json, strlen(json), "config.json", &c, &err) == TT_OK,
                      "%s: %s", cases[i].type, err.msg);
        ck_assert_str_eq(c.arch->name, cases[i].type);
        ck_assert_msg((c.features & cases[i].on) == cases[i].on, "%s", cases[i].type);
        ck_assert_msg(!(c.features & cases[i].off), "%s", cases[i].type);
        ck_assert_int_eq(c.HS, cases[i].HS);      /* head_dim, not hidden / heads */
    }
}
END_TEST

START_TEST(attention_bias_and_untied_heads_and_sliding_windows_are_read)
{
    model_config c;
    tt_error err;
    ck_assert(parse_llama(", \"attention_bias\": true, \"tie_word_embeddings\": false", &c,
                          &err) == TT_OK);
    ck_assert((c.features & (ARCH_F_QKV_BIAS | ARCH_F_OUT_BIAS | ARCH_F_UNTIED)) ==
              (ARCH_F_QKV_BIAS | ARCH_F_OUT_BIAS | ARCH_F_UNTIED));
    /* A window shorter than the positions holds the context to it. */
    ck_assert(parse_llama(", \"sliding_window\": 4096", &c, &err) == TT_OK);
    ck_assert_int_eq(c.maxT, 4096);
    ck_assert(parse_llama(", \"sliding_window\": 4096, \"use_sliding_window\": false", &c,
                          &err) == TT_OK);
    ck_assert_int_eq(c.maxT, 131072);
}
END_TEST

START_TEST(refuses_what_it_cannot_run_by_name)
{
    static const struct { const char *extra; const char *msg; } cases[] = {
        {", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}",
         "config.json: rope_scaling: type 'yarn' is not supported (tokentop supports 'llama3' and "
         "'default')"},
        {", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}", "type 'linear' is not supported"},
        {", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0}",
         "rope_scaling: type llama3 needs factor, low_freq_factor and high_freq_factor"},
        {", \"rope_scaling\": 3", "config.json: rope_scaling: expected an object or null"},
        {", \"hidden_act\": \"gelu\"", "config.json: hidden_act: 'gelu' is not supported (silu)"},
        {", \"mlp_bias\": true", "config.json: mlp_bias: true is not supported"},
        {", \"num_key_value_heads\": 3", "num_attention_heads 8 is not a multiple of "
                                         "num_key_value_heads 3"},
        {", \"head_dim\": 33", "head size 33 is odd; RoPE rotates pairs"},
        {", \"rope_theta\": 0.5", "config.json: rope_theta: 0.5 is not above 1"},
        {", \"eos_token_id\": [2, 5000]", "config.json: eos_token_id: token id 5000 is outside "
                                         "the vocabulary [0, 1000)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        model_config c;
        tt_error err = {0};
        ck_assert_msg(parse_llama(cases[i].extra, &c, &err) != TT_OK, "accepted %s",
                      cases[i].extra);
        ck_assert_msg(strstr(err.msg, cases[i].msg), "'%s' lacks '%s'", err.msg, cases[i].msg);
    }
    const char *bert = "{\"model_type\": \"bert\", \"vocab_size\": 10}";
    model_config c;
    tt_error err;
    ck_assert(model_config_parse(bert, strlen(bert), "config.json", &c, &err) ==
              TT_ERR_UNSUPPORTED);
    ck_assert_str_eq(err.msg, "config.json: model_type: 'bert' is not an architecture tokentop "
                              "runs (it runs gpt2, llama, mistral, qwen2, qwen3)");
}
END_TEST

START_TEST(llama3_rope_scaling_keeps_high_frequencies_and_divides_low_ones)
{
    model_config c;
    tt_error err;
    ck_assert(parse_llama(", \"head_dim\": 128, \"rope_scaling\": {\"rope_type\": \"llama3\", "
                          "\"factor\": 32.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": "
                          "4.0, \"original_max_position_embeddings\": 8192}", &c, &err) == TT_OK);
    double inv[64];
    arch_rope_inv_freq(&c, inv);
    /* Wavelength 2 pi / f below 8192 / 4 = 2048: unchanged; above 8192: divided by 32;
     * between: (1 - s) f / 32 + s f with s = (8192 / wavelength - 1) / 3. */
    int seen[3] = {0};
    for (int i = 0; i < 64; i++) {
        double f = pow(500000.0, -2.0 * i / 128), wl = 2 * M_PI / f, want;
        if (wl < 2048) {
            want = f;
            seen[0]++;
        } else if (wl > 8192) {
            want = f / 32;
            seen[1]++;
        } else {
            double s = (8192 / wl - 1) / 3;
            want = (1 - s) * f / 32 + s * f;
            seen[2]++;
        }
        ck_assert_msg(fabs(inv[i] - want) <= 1e-15 * want, "inv_freq[%d] %.17g, want %.17g", i,
                      inv[i], want);
    }
    ck_assert(seen[0] && seen[1] && seen[2]);   /* all three bands occur */
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Random models of each family */

static const tu_model_spec family_specs[] = {
    {TT_F32, .seed = 11, .V = 300, .maxT = 48, .C = 64, .NH = 4, .L = 2, .FF = 96, .arch = "llama",
     .NKV = 2},
    {TT_F16, .seed = 12, .V = 301, .maxT = 48, .C = 48, .NH = 6, .L = 2, .FF = 80, .arch = "mistral",
     .NKV = 1, .untied = true},
    {TT_BF16, .seed = 13, .V = 300, .maxT = 48, .C = 64, .NH = 4, .L = 3, .FF = 96, .arch = "qwen2",
     .NKV = 2},
    {TT_F32, .seed = 14, .V = 299, .maxT = 48, .C = 64, .NH = 4, .L = 2, .FF = 96, .arch = "qwen3",
     .NKV = 2, .HS = 24},
};
#define N_FAMILY ((int)(sizeof family_specs / sizeof family_specs[0]))

START_TEST(a_row_has_the_same_bits_decoded_alone_in_a_prefill_and_in_a_batch)
{
    static const char *sets[] = {"reference", "avx2", "avx512", "avx512vnni", "amx"};
    const tu_model_spec *ms = &family_specs[_i];
    char *dir;
    model *m = tu_load_model(ms, &dir);
    const int V = m->config.V, N = 20;
    int32_t ids[20];
    for (int i = 0; i < N; i++)
        ids[i] = (int32_t)((i * 37 + 11) % V);
    tt_error err;
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        if (!kernels_by_name(sets[k]))
            continue;
        setenv("TOKENTOP_KERNELS", sets[k], 1);
        for (tt_dtype d = TT_F32; d <= TT_Q8; d++) {
            float *span = tu_all_logits(m, d, 2, ids, N);
            engine *e = tu_cpu_engine(m, d, 1, 0);
            for (int i = 0; i < N; i++) {
                ck_assert(engine_forward(e, &ids[i], 1, i, false, &err) == TT_OK);
                ck_assert_msg(memcmp(engine_logits(e, 0), span + (size_t)i * V,
                                     (size_t)V * sizeof(float)) == 0,
                              "%s %s %s: position %d decoded alone differs from the prefill",
                              ms->arch, sets[k], tt_dtype_name(d), i);
            }
            engine_free(e);
            /* Three sequences at different positions in one batched step. */
            e = tu_cpu_engine(m, d, 2, 0);
            ck_assert(engine_seq_reserve(e, 3, &err) == TT_OK);
            for (int s = 0; s < 3; s++)
                ck_assert(engine_seq_forward(e, s, ids, 5 + 4 * s, 0, false, &err) == TT_OK);
            int seqs[3] = {2, 0, 1};
            int32_t next[3] = {ids[13], ids[5], ids[9]};
            ck_assert(engine_forward_batch(e, seqs, next, 3, &err) == TT_OK);
            for (int r = 0; r < 3; r++) {
                int pos = 5 + 4 * seqs[r];
                ck_assert_msg(memcmp(engine_logits(e, r), span + (size_t)pos * V,
                                     (size_t)V * sizeof(float)) == 0,
                              "%s %s %s: batch row %d (position %d) differs from the prefill",
                              ms->arch, sets[k], tt_dtype_name(d), r, pos);
            }
            engine_free(e);
            free(span);
        }
    }
    unsetenv("TOKENTOP_KERNELS");
    tu_free_model(m, dir);
}
END_TEST

START_TEST(speculative_greedy_with_the_model_as_its_own_draft_equals_plain_greedy)
{
    const tu_model_spec *ms = &family_specs[_i];
    char *dir;
    model *m = tu_load_model(ms, &dir);
    const int V = m->config.V, NP = 4, N = 40;
    sampler_params params;
    sampler_params_default(&params);
    params.greedy = true;
    spec *sp = spec_create(V);
    engine *target = tu_cpu_engine(m, TT_F32, 2, 48), *draft = tu_cpu_engine(m, TT_F32, 1, 48);
    int32_t plain[40], w[40];
    for (int i = 0; i < NP; i++)
        plain[i] = (int32_t)((i * 53 + 7) % V);
    tu_greedy(target, plain, NP, N);
    for (int gamma = 1; gamma <= 6; gamma += 5) {
        memcpy(w, plain, NP * sizeof *w);
        int rejected = tu_spec_greedy(sp, target, draft, &params, w, NP, N, gamma);
        ck_assert_int_eq(rejected, 0);
        ck_assert_msg(memcmp(w, plain, sizeof w) == 0, "%s gamma %d: speculative greedy differs "
                      "from plain greedy", ms->arch, gamma);
    }
    engine_free(target);
    engine_free(draft);
    spec_free(sp);
    tu_free_model(m, dir);
}
END_TEST

START_TEST(the_kv_cache_holds_key_value_heads_only)
{
    char *dir;
    model *m = tu_load_model(&family_specs[0], &dir);   /* 4 heads, 2 KV heads, HS 16 */
    engine *e = tu_cpu_engine(m, TT_F32, 1, 32);
    const kvcache *kv = cpu_engine_kvcache(e);
    ck_assert_int_eq(kv->NH, 2);
    ck_assert_int_eq(kv->HS, 16);
    ck_assert_uint_eq(model_config_kv_bytes_per_token(&m->config, sizeof(float)),
                      2 * 2 * 2 * 16 * 4);
    engine_free(e);
    tu_free_model(m, dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("arch");
    tu_add_case(s, "config", TU_TESTS(
            reads_a_llama_config_with_grouped_query_attention,
            each_family_sets_its_recipe,
            attention_bias_and_untied_heads_and_sliding_windows_are_read,
            refuses_what_it_cannot_run_by_name,
            llama3_rope_scaling_keeps_high_frequencies_and_divides_low_ones,
            the_kv_cache_holds_key_value_heads_only));
    TCase *tc = tu_add_loop_case(s, "family", N_FAMILY, TU_TESTS(
            a_row_has_the_same_bits_decoded_alone_in_a_prefill_and_in_a_batch,
            speculative_greedy_with_the_model_as_its_own_draft_equals_plain_greedy));
    tcase_set_timeout(tc, 300);
    return tu_run_suite(s);
}
