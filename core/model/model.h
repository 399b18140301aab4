/* model.h: a model directory (Hugging Face layout) of any architecture core/arch/ describes:
 * config, validated tensors bound by their roles, generation defaults. Loading maps the weights read-only; backends build their own copies from the views. */
#ifndef TOKENTOP_MODEL_H
#define TOKENTOP_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arch/arch.h"
#include "core/base/dtype.h"
#include "core/model/gguf.h"
#include "core/model/safetensors.h"
#include "core/base/status.h"

/* The model's shape and recipe: model_config (core/arch/arch.h), parsed from config.json by
 * model_config_parse through the architecture model_type names. */

/* Optional generation_config.json values (absent fields keep has_* false). */
typedef struct {
    bool has_temperature, has_top_k, has_top_p, has_do_sample, has_max_new_tokens, has_rep_penalty;
    float temperature;
    int top_k;
    float top_p;
    bool do_sample;
    int max_new_tokens;
    float repetition_penalty;
    int eos_ids[ARCH_MAX_EOS]; /* every end token; n_eos 0 when absent; overrides the config's */
    int n_eos;
} model_generation_defaults;

/* Parses generation_config.json text into out (every has_* false and n_eos 0 first). Types are
 * checked per field (temperature >= 0, top_k >= 0, 0 <= top_p <= 1, do_sample a boolean,
 * max_new_tokens >= 0, repetition_penalty > 0, eos_token_id an integer in [0, V) or an array of them,
 * every one an end token); null counts as absent; other fields are ignored. V <= 0 skips the
 * vocabulary check. Errors name the file (name) and the field. */
tt_status model_generation_parse(const char *json, size_t len, const char *name, int V,
                                 model_generation_defaults *out, tt_error *err);

/* A view of one weight tensor inside the mapping, row-major with the shape its field states.
 * data may be unaligned for its dtype (safetensors offsets are byte offsets): read it with
 * tensor_ref_to_f32 or memcpy, never through a float or uint16_t pointer. Files written by Hugging
 * Face and by modelgen are aligned in practice. */
typedef struct {
    const void *data;                     /* NULL: the role is not bound */
    tt_dtype dtype;                       /* the file's dtype; TT_F32 (what it reads as) when quantized */
    bool in_out;                          /* a matrix stored (K, N) (GPT-2's Conv1D), else (N, K) */
    /* GGUF tensors: quantized data is rows of ggml blocks of type quant (Q8_0, Q4_K, ...) that
     * tensor_ref_to_f32 dequantizes; head_rows HS: the rows are llama.cpp's adjacent-pair RoPE
     * order within each head of HS rows (a GGUF llama's Q and K), read back in Hugging Face's
     * rotate-half order. row_len: elements of a row (K; 1 for a vector) when either is set. */
    bool quantized;
    uint32_t quant;                       /* a quant_type when quantized */
    int row_len;
    int head_rows;                        /* 0: rows as stored */
} tensor_ref;

/* Whether t's bytes are plain row-major elements of t.dtype (so they can be copied as they are). */
static inline bool tensor_ref_is_plain(tensor_ref t) { return !t.quantized && !t.head_rows; }

/* Row r of t's (N, K) matrix as its file stores it (after undoing head_rows' order): row_len
 * elements of t.dtype, or quant_row_bytes of blocks when quantized. */
const void *tensor_ref_row(tensor_ref t, size_t r);

/* Every role the architecture binds (arch_tensor): model-wide roles in global, layer l's in
 * layers[l * ARCH_T_COUNT + role]; a role the recipe does not use has data NULL. */
typedef struct {
    tensor_ref global[ARCH_T_COUNT];
    tensor_ref *layers;                   /* (L, ARCH_T_COUNT) */
    bool lm_head_tied;                    /* global[ARCH_T_OUTPUT] is the token embedding */
} model_tensors;

#define MODEL_MAX_SHARDS 64

typedef struct model {
    char *dir;                            /* as given */
    char *name;                           /* last path component, for display */
    model_config config;
    model_generation_defaults gen;
    char gen_warning[TT_ERROR_MAX];       /* why generation_config.json was ignored; "" if not */
    model_tensors tensors;
    tt_dtype file_dtype;                  /* dtype of the token embedding in the file */
    size_t n_params;                      /* parameters, a tied output head counted once */
    safetensors_file *files[MODEL_MAX_SHARDS]; /* model.safetensors, or the shards */
    int n_files;
    gguf_file *gguf;                      /* a GGUF model's file (then n_files is 0), else NULL */
    char quantization[16];                /* the file's: "Q4_K_M", "F16" ...; "" for safetensors */
    /* What converting a quantized GGUF file's weights with --dtype costs ("--dtype converts the
     * Q4_K_M weights ... at load: about 2471 MB in fp16 ..."); "" for F32/F16/BF16 files. */
    char load_note[TT_ERROR_MAX];
    char *chat_template;                  /* a template given beside the file (an Ollama template
                                           * layer: model_apply_ollama), else NULL; owned */
    char **stop_strings;                  /* (n_stop_strings) the params layer's "stop"; owned */
    int n_stop_strings;
} model;

/* Layer l's tensors, indexed by arch_tensor. */
static inline const tensor_ref *model_layer_tensors(const model *m, int l)
{
    return m->tensors.layers + (size_t)l * ARCH_T_COUNT;
}

/* Whether token id ends a reply: generation_config.json's end tokens when it names any, else
 * config.json's. */
bool model_is_eos(const model *m, int32_t id);

/* The first end token (the one beams and /show name), or -1. */
int32_t model_eos(const model *m);

/* Loads a model: a GGUF file (any regular file starting with the GGUF magic, whatever its
 * name: model_load_gguf) or a Hugging Face directory (model_load_dir). On failure *out is NULL
 * and err names the file and the field. */
tt_status model_load(const char *path, model **out, tt_error *err);

/* model_load_dir: loads dir/config.json (model_type picks the architecture, core/arch/), the weights and the
 * optional dir/generation_config.json: one that cannot be read or has an invalid field is ignored
 * as a whole, with the reason (file and field) left in m->gen_warning, since the model itself is
 * usable without it. The weights are dir/model.safetensors, or the shards that
 * dir/model.safetensors.index.json's weight_map names; every tensor the architecture binds is
 * checked against the config (GPT-2's names with or without "transformer."; extra tensors such
 * as h.N.attn.bias ignored; the output head tied to the token embedding unless the config says
 * otherwise, as transformers does). Weight tensors must be F32, F16 or BF16 (they may differ
 * from each other); shapes must match exactly ("DIR/model.safetensors: tensor
 * h.3.mlp.c_fc.weight: expected [768,3072], got [3072,768]"). A directory with only
 * pytorch_model.bin (or another .bin, .pt, .pth or .ckpt file) is refused with
 * TT_ERR_UNSUPPORTED and a message saying how to convert to safetensors. The tokenizer is loaded
 * separately (tokenizer.h). On failure *out is NULL. */
tt_status model_load_dir(const char *dir, model **out, tt_error *err);

/* For the loaders: bind(ctx, role, layer, &slot) fills every tensor slot m->config's
 * architecture uses (each layer's for a per-layer role, layer 0 otherwise); then a tied output
 * head is pointed at the token embedding. The first failure is returned. */
typedef tt_status (*model_bind_fn)(void *ctx, const arch_tensor_desc *td, int layer,
                                   tensor_ref *dst);
tt_status model_bind_roles(model *m, model_bind_fn bind, void *ctx);

/* Loads a GGUF file (model_gguf.c): general.architecture picks the architecture, the
 * {arch}.* keys make the config, the tensors are bound by their GGUF names with their shapes
 * checked (every type quant_type_supported names; quantized ones dequantize on reading). A
 * llama file's Q and K rows are read back in rotate-half order. file_dtype is TT_F32 for an F32
 * file, TT_Q8 for Q8_0, or TT_GGUF for any other (F16, BF16 or quantized: its tensors held as
 * stored; load_note then says what converting them with --dtype costs). Errors name the file and the key or
 * tensor. On failure *out is NULL. */
tt_status model_load_gguf(const char *path, model **out, tt_error *err);

struct tokenizer;

/* The model's tokenizer: a GGUF model's from its tokenizer.ggml.* metadata
 * (tokenizer_load_gguf_arrays; array lengths and ids checked, "m.gguf: key
 * tokenizer.ggml.scores: 100 values for 323 tokens"), else the directory's (tokenizer_load_dir).
 * On failure *out is NULL. */
tt_status model_tokenizer_load(const model *m, struct tokenizer **out, tt_error *err);

/* The chat template given beside the file (m->chat_template), else a GGUF model's
 * tokenizer.chat_template, as a malloc'd string (caller frees); NULL when there is none (and for
 * a directory: core/session reads its files). */
char *model_chat_template(const model *m);

/* An Ollama store entry's layers applied to a model loaded from its blob: name becomes the
 * model's display name, the params layer's JSON (NULL: none) fills m->gen the way
 * generation_config.json does (temperature, top_k, top_p, repeat_penalty, num_predict, and its
 * stop strings into m->stop_strings; a layer
 * that does not parse is ignored as a whole, with the reason in m->gen_warning), and the
 * template layer's text (NULL: none) becomes m->chat_template. Fails only when out of memory. */
tt_status model_apply_ollama(model *m, const char *name, const char *params_json,
                             const char *template_text, tt_error *err);

/* NULL is safe. Engines created from the model must be freed first. */
void model_free(model *m);

/* Converts n elements starting at element offset of t into dst as float, exactly (F16 and BF16
 * widen without rounding); the source may be unaligned. */
void tensor_ref_to_f32(tensor_ref t, size_t offset, size_t n, float *dst);

/* Bytes of weights one decode step reads when every weight is held in dtype d: all layer tensors
 * (matrices, biases and norm parameters), the final norm, the output head once (tied or not),
 * and one row of each embedding table. Backends that keep small vectors in F32 read a few
 * kilobytes more; the figure is for bandwidth estimates (tokens/s ceilings), not for allocation. */
size_t model_weight_bytes(const model *m, tt_dtype d);

#endif
