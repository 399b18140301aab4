/* arch.h: model families as data. One description per architecture (arch/gpt2.c, arch/llama.c,
 * arch/mistral.c, arch/qwen2.c, arch/qwen3.c): how its config.json reads into a model_config, the
 * block recipe as feature flags, and the name of every tensor per file format. The loaders
 * (model/), both backends, modelgen and the benches walk it; adding a family of this shape is one
 * file and a row in arch_registry (arch.c).
 *
 * Dimension letters (as in llm.c), used everywhere:
 *   T tokens in a span, C hidden size, V vocabulary, L layers, NH query heads, NKV key/value heads
 *   (NH % NKV == 0; NH / NKV query heads share one KV head), HS head size (C / NH unless the
 *   config says head_dim), maxT positions the model was trained for, FF MLP width. */
#ifndef TOKENTOP_ARCH_H
#define TOKENTOP_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/status.h"

struct cJSON;

/* The block recipe. A block is: x += attn(norm(x)); x += mlp(norm(x)), with
 *   norm     LayerNorm (w, b) or RMSNorm (w): ARCH_F_RMSNORM
 *   attn     q, k, v = x Wq, x Wk, x Wv (+ biases: ARCH_F_QKV_BIAS), held fused as one (C, QKV)
 *            matrix [q | k | v]; per-head RMSNorm of q and k (ARCH_F_QK_NORM); positions as a
 *            learned table added to the embedding (ARCH_F_LEARNED_POS) or RoPE on q and k
 *            (ARCH_F_ROPE, Hugging Face's rotate-half pairing (i, i + HS/2)); causal softmax
 *            attention, NH / NKV query heads a KV head; x Wo (+ bias: ARCH_F_OUT_BIAS)
 *   mlp      GELU: gelu(x Wup + b) Wdown + b; SwiGLU (ARCH_F_SWIGLU): (silu(x Wg) * x Wu) Wd
 *            (biases with ARCH_F_MLP_BIAS)
 * then a final norm and the output head (the token embedding itself when tied). */
enum {
    ARCH_F_RMSNORM = 1u << 0,
    ARCH_F_LEARNED_POS = 1u << 1,
    ARCH_F_ROPE = 1u << 2,
    ARCH_F_QKV_FUSED = 1u << 3,  /* the file holds one q|k|v matrix (GPT-2's c_attn) */
    ARCH_F_QKV_BIAS = 1u << 4,
    ARCH_F_QK_NORM = 1u << 5,
    ARCH_F_OUT_BIAS = 1u << 6,
    ARCH_F_SWIGLU = 1u << 7,
    ARCH_F_MLP_BIAS = 1u << 8,
    ARCH_F_NORM_BIAS = 1u << 9,  /* LayerNorm's bias vectors */
    ARCH_F_UNTIED = 1u << 10,    /* a separate output head */
};

typedef enum { ARCH_ACT_GELU_TANH = 0, ARCH_ACT_GELU_ERF = 1, ARCH_ACT_SILU = 2 } arch_activation;

/* RoPE frequencies: inv_freq[i] = theta^(-2i / HS), then optionally rescaled the way Llama 3.1
 * does ("rope_scaling": {"rope_type": "llama3", ...}). */
typedef enum { ARCH_ROPE_SCALING_NONE = 0, ARCH_ROPE_SCALING_LLAMA3 = 1 } arch_rope_scaling;

typedef struct {
    double theta;               /* rope_theta */
    arch_rope_scaling scaling;
    double factor, low_freq_factor, high_freq_factor;
    int original_max_positions; /* original_max_position_embeddings */
} arch_rope;

#define ARCH_MAX_EOS 8

struct arch_desc;

typedef struct model_config {
    const struct arch_desc *arch;
    unsigned features;          /* ARCH_F_* */
    int V;                      /* vocab_size */
    int maxT;                   /* positions the model was trained for */
    int C;                      /* hidden size */
    int NH;                     /* query heads */
    int NKV;                    /* key/value heads */
    int HS;                     /* head size */
    int L;                      /* layers */
    int FF;                     /* MLP width */
    float norm_eps;             /* LayerNorm or RMSNorm epsilon */
    arch_activation act;
    arch_rope rope;             /* ARCH_F_ROPE only */
    int sliding_window;         /* 0: none; else attention sees the last sliding_window keys */
    int bos_id;                 /* -1 when the config has none */
    int eos_ids[ARCH_MAX_EOS];  /* every token that ends a reply; n_eos may be 0 */
    int n_eos;
} model_config;

/* The first end token, or -1. */
static inline int model_config_eos(const model_config *c) { return c->n_eos ? c->eos_ids[0] : -1; }

/* Query, key/value and fused q|k|v widths. */
static inline int model_config_qdim(const model_config *c) { return c->NH * c->HS; }
static inline int model_config_kvdim(const model_config *c) { return c->NKV * c->HS; }
static inline int model_config_qkvdim(const model_config *c)
{
    return (c->NH + 2 * c->NKV) * c->HS;
}

/* ---------------------------------------------------------------------------------------------
 * Tensors: each role a description binds, with its shape in dimension letters and its name per
 * file format. */

typedef enum {
    ARCH_DIM_0 = 0,             /* unused (a vector has one dimension) */
    ARCH_DIM_V, ARCH_DIM_MAXT, ARCH_DIM_C, ARCH_DIM_FF, ARCH_DIM_HS,
    ARCH_DIM_Q,                 /* NH * HS */
    ARCH_DIM_KV,                /* NKV * HS */
    ARCH_DIM_QKV,               /* (NH + 2 NKV) * HS */
} arch_dim;

typedef enum {
    /* model-wide */
    ARCH_T_TOKEN_EMBD, ARCH_T_POS_EMBD, ARCH_T_OUT_NORM, ARCH_T_OUT_NORM_B, ARCH_T_OUTPUT,
    /* per layer */
    ARCH_T_ATTN_NORM, ARCH_T_ATTN_NORM_B,
    ARCH_T_QKV, ARCH_T_QKV_B,   /* fused (GPT-2) */
    ARCH_T_Q, ARCH_T_K, ARCH_T_V, ARCH_T_Q_B, ARCH_T_K_B, ARCH_T_V_B,
    ARCH_T_Q_NORM, ARCH_T_K_NORM,
    ARCH_T_O, ARCH_T_O_B,
    ARCH_T_FFN_NORM, ARCH_T_FFN_NORM_B,
    ARCH_T_GATE, ARCH_T_UP, ARCH_T_UP_B, ARCH_T_DOWN, ARCH_T_DOWN_B,
    ARCH_T_COUNT
} arch_tensor;

#define ARCH_T_FIRST_LAYER ARCH_T_ATTN_NORM

typedef struct {
    arch_tensor role;
    unsigned needs;             /* bound when every one of these features is on ... */
    unsigned unless;            /* ... and none of these */
    arch_dim dims[2];           /* the shape as the file stores it; dims[1] 0 for a vector */
    /* A matrix multiplies activations x (T, K) from the right as y = x W with W (K, N). in_out:
     * the file stores it (K, N) (GPT-2's Conv1D); else (N, K) (nn.Linear, GGUF). */
    bool in_out;
    const char *hf;             /* Hugging Face name; "%d" stands for the layer */
    const char *gguf;           /* GGUF name, or NULL where the format has none */
} arch_tensor_desc;

/* One architecture. */
typedef struct arch_desc {
    const char *name;           /* "gpt2", "llama", ... (shown by /show and bench) */
    const char *const *model_types; /* config.json model_type values it reads, NULL-terminated */
    const char *gguf_arch;      /* general.architecture in a GGUF file */
    /* Reads root (a parsed config.json, named name in messages) into c: dimensions, features,
     * rope, token ids. Every field is checked; unsupported options are refused by name. */
    tt_status (*parse_config)(const struct cJSON *root, const char *name, model_config *c,
                              tt_error *err);
    const arch_tensor_desc *tensors;
    int n_tensors;
    /* A prefix some checkpoints put before every name but lm_head ("transformer." for GPT-2),
     * accepted with or without; NULL: names are exact. */
    const char *hf_optional_prefix;
} arch_desc;

/* The architecture whose model_types include model_type, or NULL. */
const arch_desc *arch_by_model_type(const char *model_type);

/* The architecture with this GGUF general.architecture, or NULL. */
const arch_desc *arch_by_gguf(const char *gguf_arch);

/* "gpt2, llama, mistral, qwen2, qwen3": the model_types tokentop reads, for messages. */
const char *arch_supported_list(void);

/* Parses config.json text (named name in messages): model_type picks the architecture (absent:
 * gpt2, as GPT-2's early configs have none); an unknown one is refused by name with the list
 * above. Limits (checked before anything is allocated): V <= 1,000,000, maxT <= 16,777,216,
 * C <= 65,536, L <= 512, NH <= 512, FF <= 262,144, HS <= 1024, at most 1e12 parameters. On
 * failure *out is unspecified. */
tt_status model_config_parse(const char *json, size_t len, const char *name, model_config *out,
                             tt_error *err);

/* Whether a description's tensor role is bound under c's features. */
static inline bool arch_tensor_used(const arch_tensor_desc *t, unsigned features)
{
    return (t->needs & features) == t->needs && (t->unless & features) == 0;
}

/* The value of dimension d under c. */
uint64_t arch_dim_value(const model_config *c, arch_dim d);

/* Parameters of a model with config c: every tensor its description binds (the output head
 * counted only when untied). */
uint64_t model_config_n_params(const model_config *c);

/* Parameters a decode step reads, besides one row of each embedding table: every layer
 * tensor, the final norm and the output head (counted even when tied). */
uint64_t model_config_step_params(const model_config *c);

/* Bytes of keys and values one position holds in a KV cache of elem_size-byte elements:
 * 2 * L * NKV * HS * elem_size. */
static inline size_t model_config_kv_bytes_per_token(const model_config *c, size_t elem_size)
{
    return 2 * (size_t)c->L * (size_t)c->NKV * (size_t)c->HS * elem_size;
}

/* RoPE's frequencies for c (ARCH_F_ROPE): inv_freq[i], i < HS / 2, theta^(-2i / HS) rescaled as
 * c->rope.scaling says (llama3: transformers' _compute_llama3_parameters), in double. Both
 * backends build their cos/sin tables from it. */
void arch_rope_inv_freq(const model_config *c, double *inv_freq);

/* The tables both backends rotate with: cos_out and sin_out (n_ctx, HS / 2) hold cos and sin of
 * p * inv_freq[i] for positions p < n_ctx, computed in double, stored as float. */
void arch_rope_tables(const model_config *c, int n_ctx, float *cos_out, float *sin_out);

/* Multiply-adds of one position's forward at context length n (the matrices, the head, and
 * attention's q.k and p.v over n keys). */
double model_config_macs_per_token(const model_config *c, int n);

/* ---------------------------------------------------------------------------------------------
 * For the descriptions (the files of core/arch): config readers shared by the families. */

/* The limits above, checked on a filled config, and the parameter count. */
tt_status arch_check_config(const model_config *c, const char *name, tt_error *err);

/* bos_token_id and eos_token_id (an integer or a list) within [0, V). */
tt_status arch_read_token_ids(const struct cJSON *root, const char *name, model_config *c,
                              tt_error *err);

/* The Llama family's config.json (llama, mistral, qwen2, qwen3 share it): hidden_size,
 * intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
 * max_position_embeddings, rms_norm_eps, rope_theta, rope_scaling, hidden_act, attention_bias,
 * mlp_bias, tie_word_embeddings, sliding_window, token ids. features: the recipe's fixed flags
 * (ARCH_F_QKV_BIAS for qwen2, ARCH_F_QK_NORM for qwen3), to which the config adds its own. */
tt_status llama_family_parse_config(const struct cJSON *root, const char *name,
                                    unsigned features, model_config *c, tt_error *err);

/* The Llama family's tensors (Hugging Face and GGUF names). */
#define LLAMA_FAMILY_N_TENSORS 18
extern const arch_tensor_desc llama_family_tensors[LLAMA_FAMILY_N_TENSORS];

#endif
