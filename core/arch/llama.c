/* llama.c: Llama (model_type llama; SmolLM2 and TinyLlama are llama too) and the config.json and
 * tensor names the whole family shares (mistral.c, qwen2.c and qwen3.c reuse them): RMSNorm,
 * RoPE with Hugging Face's rotate-half pairing, grouped-query attention, a SwiGLU MLP, separate
 * q, k, v projections stored as nn.Linear [out, in], no biases unless attention_bias. */
#include <cJSON.h>
#include <math.h>
#include <string.h>

#include "core/arch/arch.h"
#include "core/base/jsonr.h"

static bool is_in_open_unit(double x) { return x > 0 && x < 1; }

/* "rope_scaling": null, {"rope_type": "default"} or Llama 3.1's {"rope_type": "llama3", "factor",
 * "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"} (older files say
 * "type"). Any other type is refused by name. */
static tt_status read_rope_scaling(const cJSON *root, const char *name, model_config *c,
                                   tt_error *err)
{
    const cJSON *rs = jsonr_field(root, "rope_scaling");
    if (!rs)
        return TT_OK;
    if (!cJSON_IsObject(rs))
        return tt_fail(err, TT_ERR_CONFIG, "%s: rope_scaling: expected an object or null", name);
    const char *type = NULL;
    tt_status s = jsonr_str(rs, name, "rope_type", &type, err);
    if (s == TT_OK && !type)
        s = jsonr_str(rs, name, "type", &type, err);
    if (s != TT_OK)
        return s;
    if (!type || strcmp(type, "default") == 0)
        return TT_OK;
    if (strcmp(type, "llama3") != 0)
        return tt_fail(err, TT_ERR_UNSUPPORTED, "%s: rope_scaling: type '%.40s' is not supported "
                       "(tokentop supports 'llama3' and 'default')", name, type);
    arch_rope *r = &c->rope;
    bool p1, p2, p3;
    if ((s = jsonr_num(rs, name, "factor", &r->factor, &p1, err)) != TT_OK ||
        (s = jsonr_num(rs, name, "low_freq_factor", &r->low_freq_factor, &p2, err)) != TT_OK ||
        (s = jsonr_num(rs, name, "high_freq_factor", &r->high_freq_factor, &p3, err)) != TT_OK)
        return s;
    if (!p1 || !p2 || !p3)
        return tt_fail(err, TT_ERR_CONFIG, "%s: rope_scaling: type llama3 needs factor, "
                       "low_freq_factor and high_freq_factor", name);
    if ((s = jsonr_int(rs, name, "original_max_position_embeddings", true, 0, 1, 16777216,
                       &r->original_max_positions, err)) != TT_OK)
        return s;
    if (!(r->factor >= 1) || !(r->low_freq_factor > 0) ||
        !(r->high_freq_factor > r->low_freq_factor))
        return tt_fail(err, TT_ERR_CONFIG, "%s: rope_scaling: factor %g, low_freq_factor %g and "
                       "high_freq_factor %g must satisfy factor >= 1 and high > low > 0", name,
                       r->factor, r->low_freq_factor, r->high_freq_factor);
    r->scaling = ARCH_ROPE_SCALING_LLAMA3;
    return TT_OK;
}

tt_status llama_family_parse_config(const cJSON *root, const char *name, unsigned features,
                                    model_config *c, tt_error *err)
{
    tt_status s;
    bool present, b;
    const char *str;

    c->features = features | ARCH_F_RMSNORM | ARCH_F_ROPE | ARCH_F_SWIGLU;
    c->act = ARCH_ACT_SILU;
    if ((s = jsonr_int(root, name, "vocab_size", true, 0, 1, 1000000, &c->V, err)) != TT_OK ||
        (s = jsonr_int(root, name, "hidden_size", true, 0, 1, 65536, &c->C, err)) != TT_OK ||
        (s = jsonr_int(root, name, "intermediate_size", true, 0, 1, 262144, &c->FF, err)) != TT_OK ||
        (s = jsonr_int(root, name, "num_hidden_layers", true, 0, 1, 512, &c->L, err)) != TT_OK ||
        (s = jsonr_int(root, name, "num_attention_heads", true, 0, 1, 512, &c->NH, err)) != TT_OK ||
        (s = jsonr_int(root, name, "num_key_value_heads", false, c->NH, 1, 512, &c->NKV,
                       err)) != TT_OK ||
        (s = jsonr_int(root, name, "max_position_embeddings", false, 2048, 1, 16777216, &c->maxT,
                       err)) != TT_OK)
        return s;
    if (!jsonr_field(root, "head_dim") && c->C % c->NH != 0)
        return tt_fail(err, TT_ERR_CONFIG, "%s: hidden_size %d is not a multiple of "
                       "num_attention_heads %d (and no head_dim)", name, c->C, c->NH);
    if ((s = jsonr_int(root, name, "head_dim", false, c->C / c->NH, 2, 1024, &c->HS, err)) != TT_OK)
        return s;
    if (c->NH % c->NKV != 0)
        return tt_fail(err, TT_ERR_CONFIG, "%s: num_attention_heads %d is not a multiple of "
                       "num_key_value_heads %d", name, c->NH, c->NKV);

    c->norm_eps = 1e-6f;
    if ((s = jsonr_setting(root, name, "rms_norm_eps", is_in_open_unit, "not in (0, 1)",
                           &c->norm_eps, &present, err)) != TT_OK)
        return s;
    c->rope.theta = 10000.0;
    if ((s = jsonr_num(root, name, "rope_theta", &c->rope.theta, &present, err)) != TT_OK)
        return s;
    if (!(c->rope.theta > 1))
        return tt_fail(err, TT_ERR_CONFIG, "%s: rope_theta: %g is not above 1", name,
                       c->rope.theta);
    if ((s = read_rope_scaling(root, name, c, err)) != TT_OK)
        return s;

    if ((s = jsonr_str(root, name, "hidden_act", &str, err)) != TT_OK)
        return s;
    if (str && strcmp(str, "silu") != 0)
        return tt_fail(err, TT_ERR_UNSUPPORTED, "%s: hidden_act: '%.40s' is not supported (silu)",
                       name, str);
    b = false;
    if ((s = jsonr_bool(root, name, "attention_bias", &b, &present, err)) != TT_OK)
        return s;
    if (b)
        c->features |= ARCH_F_QKV_BIAS | ARCH_F_OUT_BIAS;
    b = false;
    if ((s = jsonr_bool(root, name, "mlp_bias", &b, &present, err)) != TT_OK)
        return s;
    if (b)
        return tt_fail(err, TT_ERR_UNSUPPORTED, "%s: mlp_bias: true is not supported", name);
    /* transformers' default for this family is an untied head. */
    b = false;
    if ((s = jsonr_bool(root, name, "tie_word_embeddings", &b, &present, err)) != TT_OK)
        return s;
    if (!b)
        c->features |= ARCH_F_UNTIED;

    /* A sliding window only matters past its length: the context is held to it (attention
     * over a window is not implemented), unless the config turns it off (Qwen2's
     * use_sliding_window: false). */
    b = true;
    if ((s = jsonr_bool(root, name, "use_sliding_window", &b, &present, err)) != TT_OK)
        return s;
    if (b && (s = jsonr_int(root, name, "sliding_window", false, 0, 1, 16777216,
                            &c->sliding_window, err)) != TT_OK)
        return s;
    if (c->sliding_window > 0 && c->sliding_window < c->maxT)
        c->maxT = c->sliding_window;
    return arch_read_token_ids(root, name, c, err);
}

const arch_tensor_desc llama_family_tensors[LLAMA_FAMILY_N_TENSORS] = {
    {ARCH_T_TOKEN_EMBD, 0, 0, {ARCH_DIM_V, ARCH_DIM_C}, false, "model.embed_tokens.weight", "token_embd.weight"},
    {ARCH_T_ATTN_NORM, 0, 0, {ARCH_DIM_C}, false, "model.layers.%d.input_layernorm.weight", "blk.%d.attn_norm.weight"},
    {ARCH_T_Q, 0, 0, {ARCH_DIM_Q, ARCH_DIM_C}, false, "model.layers.%d.self_attn.q_proj.weight", "blk.%d.attn_q.weight"},
    {ARCH_T_K, 0, 0, {ARCH_DIM_KV, ARCH_DIM_C}, false, "model.layers.%d.self_attn.k_proj.weight", "blk.%d.attn_k.weight"},
    {ARCH_T_V, 0, 0, {ARCH_DIM_KV, ARCH_DIM_C}, false, "model.layers.%d.self_attn.v_proj.weight", "blk.%d.attn_v.weight"},
    {ARCH_T_Q_B, ARCH_F_QKV_BIAS, 0, {ARCH_DIM_Q}, false, "model.layers.%d.self_attn.q_proj.bias", "blk.%d.attn_q.bias"},
    {ARCH_T_K_B, ARCH_F_QKV_BIAS, 0, {ARCH_DIM_KV}, false, "model.layers.%d.self_attn.k_proj.bias", "blk.%d.attn_k.bias"},
    {ARCH_T_V_B, ARCH_F_QKV_BIAS, 0, {ARCH_DIM_KV}, false, "model.layers.%d.self_attn.v_proj.bias", "blk.%d.attn_v.bias"},
    {ARCH_T_Q_NORM, ARCH_F_QK_NORM, 0, {ARCH_DIM_HS}, false, "model.layers.%d.self_attn.q_norm.weight", "blk.%d.attn_q_norm.weight"},
    {ARCH_T_K_NORM, ARCH_F_QK_NORM, 0, {ARCH_DIM_HS}, false, "model.layers.%d.self_attn.k_norm.weight", "blk.%d.attn_k_norm.weight"},
    {ARCH_T_O, 0, 0, {ARCH_DIM_C, ARCH_DIM_Q}, false, "model.layers.%d.self_attn.o_proj.weight", "blk.%d.attn_output.weight"},
    {ARCH_T_O_B, ARCH_F_OUT_BIAS, 0, {ARCH_DIM_C}, false, "model.layers.%d.self_attn.o_proj.bias", "blk.%d.attn_output.bias"},
    {ARCH_T_FFN_NORM, 0, 0, {ARCH_DIM_C}, false, "model.layers.%d.post_attention_layernorm.weight", "blk.%d.ffn_norm.weight"},
    {ARCH_T_GATE, 0, 0, {ARCH_DIM_FF, ARCH_DIM_C}, false, "model.layers.%d.mlp.gate_proj.weight", "blk.%d.ffn_gate.weight"},
    {ARCH_T_UP, 0, 0, {ARCH_DIM_FF, ARCH_DIM_C}, false, "model.layers.%d.mlp.up_proj.weight", "blk.%d.ffn_up.weight"},
    {ARCH_T_DOWN, 0, 0, {ARCH_DIM_C, ARCH_DIM_FF}, false, "model.layers.%d.mlp.down_proj.weight", "blk.%d.ffn_down.weight"},
    {ARCH_T_OUT_NORM, 0, 0, {ARCH_DIM_C}, false, "model.norm.weight", "output_norm.weight"},
    {ARCH_T_OUTPUT, ARCH_F_UNTIED, 0, {ARCH_DIM_V, ARCH_DIM_C}, false, "lm_head.weight", "output.weight"},
};

static tt_status llama_parse_config(const cJSON *root, const char *name, model_config *c,
                                    tt_error *err)
{
    return llama_family_parse_config(root, name, 0, c, err);
}

static const char *const llama_model_types[] = {"llama", NULL};

const arch_desc arch_llama = {
    .name = "llama",
    .model_types = llama_model_types,
    .gguf_arch = "llama",
    .parse_config = llama_parse_config,
    .tensors = llama_family_tensors,
    .n_tensors = LLAMA_FAMILY_N_TENSORS,
};
