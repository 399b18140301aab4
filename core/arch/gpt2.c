/* gpt2.c: GPT-2 (model_type gpt2): LayerNorm with biases, learned positions, one fused q|k|v
 * Conv1D (stored [in, out]), GELU MLP, every projection with a bias, the output head tied to the
 * token embedding unless the config says otherwise. */
#include <cJSON.h>
#include <string.h>

#include "core/arch/arch.h"
#include "core/base/jsonr.h"

static bool is_in_open_unit(double x) { return x > 0 && x < 1; }

static tt_status gpt2_parse_config(const cJSON *root, const char *name, model_config *c,
                                   tt_error *err)
{
    tt_status s;
    const char *str;
    bool present, b;

    c->features = ARCH_F_LEARNED_POS | ARCH_F_QKV_FUSED | ARCH_F_QKV_BIAS | ARCH_F_OUT_BIAS |
                  ARCH_F_MLP_BIAS | ARCH_F_NORM_BIAS;
    if ((s = jsonr_int(root, name, "vocab_size", true, 0, 1, 1000000, &c->V, err)) != TT_OK ||
        (s = jsonr_int(root, name, "n_embd", true, 0, 1, 16384, &c->C, err)) != TT_OK ||
        (s = jsonr_int(root, name, "n_head", true, 0, 1, 512, &c->NH, err)) != TT_OK ||
        (s = jsonr_int(root, name, "n_layer", true, 0, 1, 512, &c->L, err)) != TT_OK)
        return s;
    if (jsonr_field(root, "n_positions"))
        s = jsonr_int(root, name, "n_positions", true, 0, 1, 65536, &c->maxT, err);
    else if (jsonr_field(root, "n_ctx"))
        s = jsonr_int(root, name, "n_ctx", true, 0, 1, 65536, &c->maxT, err);
    else
        s = tt_fail(err, TT_ERR_CONFIG, "%s: missing n_positions (and no n_ctx)", name);
    if (s != TT_OK)
        return s;
    if ((s = jsonr_int(root, name, "n_inner", false, 4 * c->C, 1, 131072, &c->FF, err)) != TT_OK)
        return s;
    if (c->C % c->NH != 0)
        return tt_fail(err, TT_ERR_CONFIG, "%s: n_embd %d is not a multiple of n_head %d", name,
                       c->C, c->NH);
    c->NKV = c->NH;
    c->HS = c->C / c->NH;

    /* A float 0 (from 1e-50, say) would be a division by zero in LayerNorm: "too small". */
    c->norm_eps = 1e-5f;
    if ((s = jsonr_setting(root, name, "layer_norm_epsilon", is_in_open_unit, "not in (0, 1)",
                           &c->norm_eps, &present, err)) != TT_OK)
        return s;

    if ((s = jsonr_str(root, name, "activation_function", &str, err)) != TT_OK)
        return s;
    if (!str || strcmp(str, "gelu_new") == 0 || strcmp(str, "gelu_pytorch_tanh") == 0 ||
        strcmp(str, "gelu_fast") == 0)
        c->act = ARCH_ACT_GELU_TANH;
    else if (strcmp(str, "gelu") == 0)
        c->act = ARCH_ACT_GELU_ERF;
    else
        return tt_fail(err, TT_ERR_UNSUPPORTED,
                       "%s: activation_function: '%.40s' is not supported (gelu_new, "
                       "gelu_pytorch_tanh, gelu_fast or gelu)", name, str);

    b = true;
    if ((s = jsonr_bool(root, name, "scale_attn_weights", &b, &present, err)) != TT_OK)
        return s;
    if (present && !b)
        return tt_fail(err, TT_ERR_UNSUPPORTED,
                       "%s: scale_attn_weights: false is not supported (attention is always "
                       "scaled by 1/sqrt(head size))", name);
    b = false;
    if ((s = jsonr_bool(root, name, "scale_attn_by_inverse_layer_idx", &b, &present, err)) != TT_OK)
        return s;
    if (present && b)
        return tt_fail(err, TT_ERR_UNSUPPORTED,
                       "%s: scale_attn_by_inverse_layer_idx: true is not supported", name);

    b = true;
    if ((s = jsonr_bool(root, name, "tie_word_embeddings", &b, &present, err)) != TT_OK)
        return s;
    if (!b)
        c->features |= ARCH_F_UNTIED;
    return arch_read_token_ids(root, name, c, err);
}

/* Hugging Face's GPT-2 names (optionally under "transformer.", lm_head never); GGUF's as
 * llama.cpp's converter writes them. */
static const arch_tensor_desc gpt2_tensors[] = {
    {ARCH_T_TOKEN_EMBD, 0, 0, {ARCH_DIM_V, ARCH_DIM_C}, false, "wte.weight", "token_embd.weight"},
    {ARCH_T_POS_EMBD, 0, 0, {ARCH_DIM_MAXT, ARCH_DIM_C}, false, "wpe.weight", "position_embd.weight"},
    {ARCH_T_ATTN_NORM, 0, 0, {ARCH_DIM_C}, false, "h.%d.ln_1.weight", "blk.%d.attn_norm.weight"},
    {ARCH_T_ATTN_NORM_B, 0, 0, {ARCH_DIM_C}, false, "h.%d.ln_1.bias", "blk.%d.attn_norm.bias"},
    {ARCH_T_QKV, 0, 0, {ARCH_DIM_C, ARCH_DIM_QKV}, true, "h.%d.attn.c_attn.weight", "blk.%d.attn_qkv.weight"},
    {ARCH_T_QKV_B, 0, 0, {ARCH_DIM_QKV}, false, "h.%d.attn.c_attn.bias", "blk.%d.attn_qkv.bias"},
    {ARCH_T_O, 0, 0, {ARCH_DIM_Q, ARCH_DIM_C}, true, "h.%d.attn.c_proj.weight", "blk.%d.attn_output.weight"},
    {ARCH_T_O_B, 0, 0, {ARCH_DIM_C}, false, "h.%d.attn.c_proj.bias", "blk.%d.attn_output.bias"},
    {ARCH_T_FFN_NORM, 0, 0, {ARCH_DIM_C}, false, "h.%d.ln_2.weight", "blk.%d.ffn_norm.weight"},
    {ARCH_T_FFN_NORM_B, 0, 0, {ARCH_DIM_C}, false, "h.%d.ln_2.bias", "blk.%d.ffn_norm.bias"},
    {ARCH_T_UP, 0, 0, {ARCH_DIM_C, ARCH_DIM_FF}, true, "h.%d.mlp.c_fc.weight", "blk.%d.ffn_up.weight"},
    {ARCH_T_UP_B, 0, 0, {ARCH_DIM_FF}, false, "h.%d.mlp.c_fc.bias", "blk.%d.ffn_up.bias"},
    {ARCH_T_DOWN, 0, 0, {ARCH_DIM_FF, ARCH_DIM_C}, true, "h.%d.mlp.c_proj.weight", "blk.%d.ffn_down.weight"},
    {ARCH_T_DOWN_B, 0, 0, {ARCH_DIM_C}, false, "h.%d.mlp.c_proj.bias", "blk.%d.ffn_down.bias"},
    {ARCH_T_OUT_NORM, 0, 0, {ARCH_DIM_C}, false, "ln_f.weight", "output_norm.weight"},
    {ARCH_T_OUT_NORM_B, 0, 0, {ARCH_DIM_C}, false, "ln_f.bias", "output_norm.bias"},
    {ARCH_T_OUTPUT, ARCH_F_UNTIED, 0, {ARCH_DIM_V, ARCH_DIM_C}, false, "lm_head.weight", "output.weight"},
};

static const char *const gpt2_model_types[] = {"gpt2", NULL};

const arch_desc arch_gpt2 = {
    .name = "gpt2",
    .model_types = gpt2_model_types,
    .gguf_arch = "gpt2",
    .parse_config = gpt2_parse_config,
    .tensors = gpt2_tensors,
    .n_tensors = (int)(sizeof gpt2_tensors / sizeof gpt2_tensors[0]),
    .hf_optional_prefix = "transformer.",
};
