/* model.h: a GPT-2 model directory (Hugging Face layout): config, validated tensors, generation
 * defaults. Loading maps the weights read-only; backends build their own copies from the views. */
#ifndef TOKENTOP_MODEL_H
#define TOKENTOP_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/safetensors.h"
#include "core/status.h"

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
} gpt2_config;

/* Parses and validates config.json text: required fields present with the right JSON types,
 * positive and below sanity limits, C % NH == 0, unsupported options refused by name. Nothing is
 * allocated before validation succeeds. name is used in messages ("config.json: n_head: ..."). */
tt_status gpt2_config_parse(const char *json, size_t len, const char *name, gpt2_config *out,
                            tt_error *err);

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

/* A view of one weight tensor inside the mapping, row-major with the shape its field states. */
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
    gpt2_tensors tensors;
    tt_dtype file_dtype;                  /* dtype of wte in the file */
    size_t n_params;                      /* parameters, tied lm_head counted once */
    safetensors_file *file;
} model;

/* Loads dir/config.json, dir/model.safetensors (validated, then every tensor GPT-2 needs checked
 * against the config: names with or without "transformer.", extra buffers such as h.N.attn.bias
 * ignored, lm_head tied to wte when absent) and the optional dir/generation_config.json.
 * A directory with only pytorch_model.bin is refused with a message saying to use safetensors.
 * The tokenizer files are loaded separately (tokenizer.h). On failure *out is NULL. */
tt_status model_load(const char *dir, model **out, tt_error *err);

/* NULL is safe. Engines created from the model must be freed first. */
void model_free(model *m);

/* Converts n elements starting at element offset of t into dst as float. */
void tensor_ref_to_f32(tensor_ref t, size_t offset, size_t n, float *dst);

/* Bytes of weights one decode step reads when held in dtype d (all matrices, the lm_head once). */
size_t model_weight_bytes(const model *m, tt_dtype d);

#endif
