/* modelgen.h: writes random model directories of any architecture core/arch/ describes
 * (config.json, model.safetensors, generation_config.json, vocab.json, merges.txt) for tests and
 * benchmarks, deterministically from a seed, at any size (written streaming, never held in
 * memory). The tensors are the ones the architecture's description binds, in its order. */
#ifndef TOKENTOP_MODELGEN_H
#define TOKENTOP_MODELGEN_H

#include <stdbool.h>
#include <stdint.h>

#include "core/base/dtype.h"
#include "core/base/status.h"

typedef struct {
    const char *arch;            /* a model_type core/arch/ reads: "gpt2" (default), "llama",
                                    "mistral", "qwen2", "qwen3" */
    int V, maxT, C, NH, L, FF;   /* FF 0 = 4*C */
    int NKV;                     /* key/value heads, 0 = NH (not gpt2) */
    int HS;                      /* head size, 0 = C / NH (not gpt2) */
    double rope_theta;           /* 0 = 10000 (not gpt2) */
    tt_dtype dtype;              /* of every tensor in the file */
    bool prefix;                 /* "transformer." names (what save_pretrained writes today) */
    bool mask_buffers;           /* also write h.N.attn.bias (float [1,1,maxT,maxT], 1 on and below
                                    the diagonal) and h.N.attn.masked_bias (scalar -1e4), as the
                                    original GPT-2 checkpoints hold them */
    bool untied_lm_head;         /* write lm_head.weight (a different random matrix) and
                                    "tie_word_embeddings": false */
    uint64_t seed;
    float scale;                 /* spread of the random matrices and embeddings (1: logits with a
                                    standard deviation of about 1) */
    bool exact;                  /* weights are multiples of 2^-10 with |k| <= 255 (LayerNorm
                                    weights: 1 + k * 2^-7, |k| <= 16): exactly representable in
                                    F32, F16 and BF16, so the three files hold the same numbers */
    const char *tokenizer_dir;   /* copy vocab.json + merges.txt from here (its size must equal V),
                                    or NULL to synthesize a byte-level BPE vocabulary of V entries */
    int eos_id;                  /* -1: V-1 */
} modelgen_options;

/* A tiny model: V 512, maxT 64, C 64, NH 4, L 2, FF 4C, F32, prefixed names, tied lm_head,
 * seed 1, scale 1, not exact, synthesized tokenizer, eos V-1. */
void modelgen_options_default(modelgen_options *o);

/* Sets the architecture and shapes of a released Llama-family model, with its vocabulary size:
 * "llama-3.2-1b" (hidden 2048, 16 layers, 32 heads, 8 KV heads, FF 8192, V 128256, tied),
 * "llama-3.2-3b", "llama-3.1-8b" (untied), "qwen2.5-0.5b" (qwen2, tied), "qwen2.5-1.5b",
 * "qwen3-0.6b" (head_dim 128), "smollm2-135m", "tinyllama-1.1b". maxT is set to 4096. Other
 * fields are kept. Returns 0, or -1 (o unchanged) for an unknown name. */
int modelgen_options_llama(modelgen_options *o, const char *size);

/* Sets the shapes (V, maxT, C, NH, L, FF) of a released GPT-2: "gpt2" (124M), "gpt2-medium",
 * "gpt2-large", "gpt2-xl", "distilgpt2"; "tiny" gives the default shapes. Other fields are kept.
 * Returns 0, or -1 (o unchanged) for an unknown name. */
int modelgen_options_gpt2(modelgen_options *o, const char *size);

/* Creates dir (its parent must exist; an existing dir is reused and its files replaced) and writes
 * the model. Options are validated first (TT_ERR_ARG naming the field: sizes within the limits
 * model_config_parse enforces, C % NH == 0, V >= 257 for a synthesized tokenizer, eos_id in range,
 * a tokenizer_dir whose vocabulary has exactly V entries). Random values come from rng_uniform
 * through IEEE arithmetic only (sqrt, no libm transcendentals), so a seed gives byte-identical
 * files on every machine. On failure the directory may hold some of the files. */
tt_status modelgen_write(const char *dir, const modelgen_options *o, tt_error *err);

/* Writes just the synthesized tokenizer (vocab.json + merges.txt, V entries, V >= 257) into an
 * existing dir: ids 0..255 are GPT-2's byte symbols in GPT-2's order, then V-257 merges building
 * English-looking tokens, then "<|endoftext|>" as id V-1. */
tt_status modelgen_write_tokenizer(const char *dir, int V, tt_error *err);

/* The random speculative pair of `tokentop bench --random-pair NOISE`: a target with GPT-2's
 * (124M) shapes in target_dir and a draft of width 256, 4 heads and 2 layers in draft_dir, both
 * F32 with an untied lm_head and inert blocks (the blocks run at full cost but add nothing), built
 * so that the target's logits are the draft's plus Gaussian noise of about noise * sqrt(2)
 * standard deviations (modelgen.c says how). Deterministic in seed. Both directories are created
 * as modelgen_write does; on failure they may hold some of the files. */
tt_status modelgen_write_pair(const char *target_dir, const char *draft_dir, double noise,
                              uint64_t seed, tt_error *err);

/* Removes a directory tree written here (a temporary model), not following symbolic links.
 * Best effort: what cannot be removed stays. */
void modelgen_remove_dir(const char *dir);

#endif
