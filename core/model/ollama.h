/* ollama.h: models pulled by Ollama, found in its store: NAME[:TAG] -> manifest -> the GGUF blob
 * and the params, template and system layers.
 *
 * A store is a models directory: manifests/HOST/NAMESPACE/MODEL/TAG (JSON, Docker's v2 manifest
 * format) and blobs/sha256-HEX (content-addressed layers). "llama3.2" means
 * registry.ollama.ai/library/llama3.2:latest; "me/m:q4" registry.ollama.ai/me/m:q4; "host/ns/m:t"
 * names all three. Stores are searched in order: $OLLAMA_MODELS, ~/.ollama/models,
 * /usr/share/ollama/.ollama/models (ollama_default_stores). Layers are checked by size against
 * the manifest, not by digest (hashing gigabytes at every start is what Ollama's own pull does
 * once). */
#ifndef TOKENTOP_OLLAMA_H
#define TOKENTOP_OLLAMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/status.h"

#define OLLAMA_MEDIA_MODEL "application/vnd.ollama.image.model"
#define OLLAMA_MEDIA_PARAMS "application/vnd.ollama.image.params"
#define OLLAMA_MEDIA_TEMPLATE "application/vnd.ollama.image.template"
#define OLLAMA_MEDIA_SYSTEM "application/vnd.ollama.image.system"

/* A resolved model; every string malloc'd, freed by ollama_model_free. */
typedef struct {
    char *name;             /* the short form: "llama3.2:1b", "me/m:q4", "host/ns/m:t" */
    char *store;            /* the models directory it was found in */
    char *manifest_path;
    char *model_path;       /* STORE/blobs/sha256-HEX: the GGUF file */
    uint64_t model_size;    /* bytes, as the manifest says and the blob is */
    char *params;           /* the params layer's JSON text, NULL when there is none */
    char *template_text;    /* the template layer (Go template text), or NULL */
    char *system;           /* the system layer, or NULL */
    int n_unused_layers;    /* layers of other media types (adapters, projectors, license...) */
} ollama_model;

/* Whether s has the shape of a model name ([HOST/][NS/]NAME[:TAG], parts of letters, digits,
 * '.', '_', '-', no "." or ".." part): what a caller checks before looking in the store for a
 * --model argument that is not an existing path. */
bool ollama_is_name(const char *s);

/* The stores to search, in order: $OLLAMA_MODELS (when set and not empty), $HOME/.ollama/models
 * (when HOME is set), /usr/share/ollama/.ollama/models. Returns how many were written to
 * stores[0..max) (malloc'd; ollama_stores_free them). */
size_t ollama_default_stores(char **stores, size_t max);
void ollama_stores_free(char **stores, size_t n);

/* Resolves ref in the first of stores[0..n) that has its manifest: the manifest parsed (a JSON
 * object with a "layers" array, each layer a mediaType, a "sha256:" + 64-hex digest and a size),
 * exactly one model layer, and every layer used present as a blob of the manifest's size; the
 * text layers are read (at most 1 MiB each). Nothing is loaded on failure (out zeroed): a name
 * no store has says where it looked ("llama3.2:1b: not in the Ollama store (looked for
 * /a/manifests/registry.ollama.ai/library/llama3.2/1b, ...)"), TT_ERR_IO; a malformed manifest
 * names it and the field (TT_ERR_FORMAT); a missing blob or one whose size differs names the
 * blob, the layer and both sizes (TT_ERR_FORMAT). A bad name is TT_ERR_ARG. */
tt_status ollama_resolve(const char *ref, const char *const *stores, size_t n, ollama_model *out,
                         tt_error *err);

/* ollama_resolve over ollama_default_stores. */
tt_status ollama_resolve_default(const char *ref, ollama_model *out, tt_error *err);

/* Frees the strings and zeroes m; safe on a zeroed model. */
void ollama_model_free(ollama_model *m);

/* Every model name (short form) in stores[0..n) with a manifest file, sorted, a name in two
 * stores listed once (the first store's). *names is malloc'd (ollama_names_free); returns the
 * count. Stores that do not exist are skipped. */
size_t ollama_list(const char *const *stores, size_t n, char ***names);
void ollama_names_free(char **names, size_t n);

/* The params layer's sampler settings (Ollama's option names). */
typedef struct {
    bool has_temperature, has_top_k, has_top_p, has_min_p, has_repeat_penalty,
         has_repeat_last_n, has_num_ctx, has_num_predict, has_seed;
    float temperature, top_p, min_p, repeat_penalty;
    int top_k, repeat_last_n, num_ctx, num_predict;
    int64_t seed;
    char **stop;            /* (n_stop) stop strings, malloc'd */
    int n_stop;
} ollama_params;

/* Parses params JSON text (name: for messages) into out: numbers where numbers belong ("params:
 * temperature: expected a number, got a string"), temperature, top_p, min_p >= 0 (top_p, min_p
 * <= 1), top_k, num_ctx >= 0, "stop" a string or an array of strings; unknown options ignored.
 * On failure out holds nothing (freed). */
tt_status ollama_params_parse(const char *json, size_t len, const char *name, ollama_params *out,
                              tt_error *err);
void ollama_params_free(ollama_params *p);

#endif
