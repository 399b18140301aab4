/* model.h: a GPT-2 model directory (Hugging Face layout): config, validated tensors, generation
 * defaults. Loading maps the weights read-only; backends build their own copies from the views. */
#ifndef TOKENTOP_MODEL_H
#define TOKENTOP_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/dtype.h"
#include "core/model/safetensors.h"
#include "core/base/status.h"

/* Dimension letters, used everywhere (as in llm.c):
 *   B batch (always 1 here), T tokens in a span, C n_embd, V vocab_size, L n_layer,
 *   NH n_head, HS head size = C / NH, maxT n_positions, FF MLP width (n_inner, default 4C). */

typedef enum { GPT2_GELU_TANH = 0, GPT2_GELU_ERF = 1 } gpt2_activation;

typedef struct {
    int V;                  /* vocab_size */
    int maxT;               /* n_positions (n_ctx) */
    int C;                  /* n_embd */
    int NH;                 /* n_head */
    int L;                  /* n_layer */
    int FF;                 /* n_inner, or 4 * C when null/absent */
    float ln_eps;           /* layer_norm_epsilon */
    gpt2_activation act;    /* "gelu_new"/"gelu_pytorch_tanh" -> TANH, "gelu" -> ERF */
    int bos_id, eos_id;     /* -1 when the config has none */
    bool tie_word_embeddings; /* true (the default): lm_head is wte, as in transformers, even if
                                 the file holds an lm_head.weight; false: lm_head.weight required */
} gpt2_config;

/* Parses and validates config.json text: required fields present with the right JSON types,
 * positive and below sanity limits, C % NH == 0, unsupported options refused by name. Nothing is
 * allocated before validation succeeds. name is used in messages ("config.json: n_head: ...").
 * Limits: V <= 1,000,000, maxT <= 65,536, C <= 16,384, L <= 512, NH <= 512, FF <= 131,072, and
 * at most 20e9 parameters in all. Missing n_positions falls back to n_ctx; n_inner null/absent
 * means 4C; layer_norm_epsilon defaults to 1e-5 and must be finite, > 0 and < 1. On failure *out
 * is left unspecified. */
tt_status gpt2_config_parse(const char *json, size_t len, const char *name, gpt2_config *out,
                            tt_error *err);

/* Parameters of a model with config c (wte, wpe, L layers, ln_f, plus V*C more when the lm_head
 * is not tied). c must have passed gpt2_config_parse (or hold values within its limits). */
uint64_t gpt2_config_n_params(const gpt2_config *c, bool lm_head_tied);

/* Optional generation_config.json values (absent fields keep has_* false). */
typedef struct {
    bool has_temperature, has_top_k, has_top_p, has_do_sample, has_max_new_tokens, has_rep_penalty;
    float temperature;
    int top_k;
    float top_p;
    bool do_sample;
    int max_new_tokens;
    float repetition_penalty;
    int eos_id;             /* -1 when absent; overrides the config's when present */
} gpt2_generation_defaults;

/* Parses generation_config.json text into out (every has_* false and eos_id -1 first). Types are
 * checked per field (temperature >= 0, top_k >= 0, 0 <= top_p <= 1, do_sample a boolean,
 * max_new_tokens >= 0, repetition_penalty > 0, eos_token_id an integer in [0, V) or an array whose
 * first element is taken); null counts as absent; other fields are ignored. V <= 0 skips the
 * vocabulary check. Errors name the file (name) and the field. */
tt_status gpt2_generation_parse(const char *json, size_t len, const char *name, int V,
                                gpt2_generation_defaults *out, tt_error *err);

/* A view of one weight tensor inside the mapping, row-major with the shape its field states.
 * data may be unaligned for its dtype (safetensors offsets are byte offsets): read it with
 * tensor_ref_to_f32 or memcpy, never through a float or uint16_t pointer. Files written by Hugging
 * Face and by modelgen are aligned in practice. */
typedef struct {
    const void *data;
    tt_dtype dtype;         /* the file's dtype */
} tensor_ref;

/* Conv1D weights are stored [in, out], as in the checkpoints. */
typedef struct {
    tensor_ref ln_1_w, ln_1_b;            /* (C) */
    tensor_ref attn_w;                    /* (C, 3C)  c_attn.weight: q, k, v concatenated on out */
    tensor_ref attn_b;                    /* (3C) */
    tensor_ref attn_proj_w;               /* (C, C)   attn.c_proj.weight */
    tensor_ref attn_proj_b;               /* (C) */
    tensor_ref ln_2_w, ln_2_b;            /* (C) */
    tensor_ref fc_w;                      /* (C, FF)  mlp.c_fc.weight */
    tensor_ref fc_b;                      /* (FF) */
    tensor_ref fc_proj_w;                 /* (FF, C)  mlp.c_proj.weight */
    tensor_ref fc_proj_b;                 /* (C) */
} gpt2_layer_tensors;

typedef struct {
    tensor_ref wte;                       /* (V, C) */
    tensor_ref wpe;                       /* (maxT, C) */
    gpt2_layer_tensors *h;                /* (L) */
    tensor_ref ln_f_w, ln_f_b;            /* (C) */
    tensor_ref lm_head;                   /* (V, C); the same data as wte when tied */
    bool lm_head_tied;
} gpt2_tensors;

typedef struct model {
    char *dir;                            /* as given */
    char *name;                           /* last path component, for display */
    gpt2_config config;
    gpt2_generation_defaults gen;
    char gen_warning[TT_ERROR_MAX];       /* why generation_config.json was ignored; "" if not */
    gpt2_tensors tensors;
    tt_dtype file_dtype;                  /* dtype of wte in the file */
    size_t n_params;                      /* parameters, tied lm_head counted once */
    safetensors_file *file;
} model;

/* Loads dir/config.json, dir/model.safetensors (validated, then every tensor GPT-2 needs checked
 * against the config: names with or without "transformer.", extra buffers such as h.N.attn.bias
 * ignored, lm_head tied to wte unless config.json says "tie_word_embeddings": false, which is
 * what transformers does) and the optional dir/generation_config.json: one that cannot be read
 * or has an invalid field is ignored as a whole, with the reason (file and field) left in
 * m->gen_warning, since the model itself is usable without it.
 * Weight tensors must be F32, F16 or BF16 (they may differ from each other); shapes must match
 * the config exactly ("DIR/model.safetensors: tensor h.3.mlp.c_fc.weight: expected [768,3072],
 * got [3072,768]"). A directory with only pytorch_model.bin (or another .bin, .pt, .pth or
 * .ckpt file) is refused with TT_ERR_UNSUPPORTED and a message saying how to convert to
 * safetensors; a sharded checkpoint (model.safetensors.index.json) is refused the same way.
 * The tokenizer files are loaded separately (tokenizer.h). On failure *out is NULL. */
tt_status model_load(const char *dir, model **out, tt_error *err);

/* NULL is safe. Engines created from the model must be freed first. */
void model_free(model *m);

/* Converts n elements starting at element offset of t into dst as float, exactly (F16 and BF16
 * widen without rounding); the source may be unaligned. */
void tensor_ref_to_f32(tensor_ref t, size_t offset, size_t n, float *dst);

/* Bytes of weights one decode step reads when every weight is held in dtype d: all layer tensors
 * (matrices, biases and LayerNorm parameters), ln_f, the lm_head once (tied or not), and one row
 * each of wte and wpe (the token's embedding). Backends that keep small vectors in F32 read a few
 * kilobytes more; the figure is for bandwidth estimates (tokens/s ceilings), not for allocation. */
size_t model_weight_bytes(const model *m, tt_dtype d);

#endif
