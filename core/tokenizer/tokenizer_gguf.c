/* tokenizer_gguf.c: a tokenizer from a GGUF file's tokenizer.ggml.* arrays, handed over as plain
 * C arrays (core/model reads the file; this room does not include it). The arrays are written as
 * the tokenizer.json and tokenizer_config.json Hugging Face would have (llama.cpp's `gpt2` model:
 * byte-level BPE with the pre-tokenizer tokenizer.ggml.pre names; `llama`: SentencePiece BPE,
 * its merges recovered from the scores as transformers' SentencePieceExtractor does) and loaded
 * by tokenizer_load_json_buffers, so one loader builds every table. */
#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tokenizer/tokenizer.h"

/* llama.cpp's token types (llama_token_type). */
enum { TYPE_NORMAL = 1, TYPE_UNKNOWN = 2, TYPE_CONTROL = 3, TYPE_USER_DEFINED = 4,
       TYPE_UNUSED = 5, TYPE_BYTE = 6 };

/* tokenizer.ggml.pre values and the pre-tokenizers Hugging Face's files for them hold. */
#define LLAMA3_PATTERN "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN2_PATTERN "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

static cJSON *byte_level(bool use_regex)
{
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", "ByteLevel");
    cJSON_AddBoolToObject(b, "add_prefix_space", false);
    cJSON_AddBoolToObject(b, "trim_offsets", true);
    cJSON_AddBoolToObject(b, "use_regex", use_regex);
    return b;
}

static cJSON *split_regex(const char *pattern)
{
    cJSON *s = cJSON_CreateObject(), *p = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "type", "Split");
    cJSON_AddStringToObject(p, "Regex", pattern);
    cJSON_AddItemToObject(s, "pattern", p);
    cJSON_AddStringToObject(s, "behavior", "Isolated");
    cJSON_AddBoolToObject(s, "invert", false);
    return s;
}

static cJSON *sequence(const char *type, const char *list, cJSON *a, cJSON *b)
{
    cJSON *s = cJSON_CreateObject(), *arr = cJSON_CreateArray();
    cJSON_AddStringToObject(s, "type", type);
    cJSON_AddItemToArray(arr, a);
    if (b)
        cJSON_AddItemToArray(arr, b);
    cJSON_AddItemToObject(s, list, arr);
    return s;
}

/* Sets root's pre_tokenizer (and normalizer, ignore_merges) for pre; false for an unknown one. */
static bool add_pre(cJSON *root, cJSON *model, const char *pre)
{
    cJSON *p;
    if (strcmp(pre, "llama-bpe") == 0 || strcmp(pre, "llama3") == 0) {
        p = sequence("Sequence", "pretokenizers", split_regex(LLAMA3_PATTERN), byte_level(false));
        cJSON_AddBoolToObject(model, "ignore_merges", true);
    } else if (strcmp(pre, "qwen2") == 0) {
        p = sequence("Sequence", "pretokenizers", split_regex(QWEN2_PATTERN), byte_level(false));
        cJSON *n = cJSON_CreateObject();
        cJSON_AddStringToObject(n, "type", "NFC");
        cJSON_AddItemToObject(root, "normalizer", n);
    } else if (strcmp(pre, "smollm") == 0) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "type", "Digits");
        cJSON_AddBoolToObject(d, "individual_digits", true);
        p = sequence("Sequence", "pretokenizers", d, byte_level(true));
    } else if (strcmp(pre, "gpt2") == 0 || strcmp(pre, "gpt-2") == 0 ||
               strcmp(pre, "default") == 0) {
        p = byte_level(true);
    } else {
        return false;
    }
    cJSON_AddItemToObject(root, "pre_tokenizer", p);
    return true;
}

/* ---------------------------------------------------------------------------------------------
 * SentencePiece merges from scores */

typedef struct {
    const char *const *keys;
    int *slots;                   /* token id + 1; 0 empty */
    size_t mask;
} str_index;

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static bool index_init(str_index *x, const char *const *keys, int n)
{
    size_t cap = 16;
    while (cap < (size_t)n * 2)
        cap *= 2;
    x->keys = keys;
    x->mask = cap - 1;
    x->slots = calloc(cap, sizeof *x->slots);
    if (!x->slots)
        return false;
    for (int i = 0; i < n; i++) {
        size_t h = hash_bytes(keys[i], strlen(keys[i])) & x->mask;
        while (x->slots[h])
            h = (h + 1) & x->mask;
        x->slots[h] = i + 1;
    }
    return true;
}

/* The first id spelled s[0..n), or -1. */
static int index_find(const str_index *x, const char *s, size_t n)
{
    int best = -1;
    for (size_t h = hash_bytes(s, n) & x->mask; x->slots[h]; h = (h + 1) & x->mask) {
        const char *k = x->keys[x->slots[h] - 1];
        if (strlen(k) == n && memcmp(k, s, n) == 0 && (best < 0 || x->slots[h] - 1 < best))
            best = x->slots[h] - 1;
    }
    return best;
}

typedef struct {
    float score;
    int id, left, right;
    int split;                    /* bytes of the left piece */
} spm_merge;

static int merge_cmp(const void *pa, const void *pb)
{
    const spm_merge *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    if (a->left != b->left)
        return a->left < b->left ? -1 : 1;
    return (a->right > b->right) - (a->right < b->right);
}

static bool merge_candidate(const tokenizer_gguf_arrays *a, int i)
{
    return !a->types || a->types[i] == TYPE_NORMAL || a->types[i] == TYPE_USER_DEFINED;
}

/* Every split of every normal token into two tokens, ranked by the whole's score (highest
 * first), then by the ids: transformers' SentencePieceExtractor order. */
static tt_status spm_merges(const tokenizer_gguf_arrays *a, const char *name, cJSON *out,
                            tt_error *err)
{
    str_index x;
    if (!index_init(&x, a->tokens, a->n_tokens))
        return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    size_t n = 0, cap = 1024;
    spm_merge *m = malloc(cap * sizeof *m);
    tt_status s = m ? TT_OK : tt_fail(err, TT_ERR_NOMEM, "out of memory");
    for (int i = 0; i < a->n_tokens && s == TT_OK; i++) {
        const char *t = a->tokens[i];
        size_t len = strlen(t);
        if (!merge_candidate(a, i))
            continue;
        for (size_t k = 1; k < len && s == TT_OK; k++) {
            if (((unsigned char)t[k] & 0xC0) == 0x80)   /* inside a character */
                continue;
            int l = index_find(&x, t, k), r = index_find(&x, t + k, len - k);
            if (l < 0 || r < 0)
                continue;
            if (n == cap) {
                spm_merge *g = realloc(m, 2 * cap * sizeof *m);
                if (!g) {
                    s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
                    break;
                }
                m = g;
                cap *= 2;
            }
            m[n++] = (spm_merge){a->scores[i], i, l, r, (int)k};
        }
    }
    if (s == TT_OK) {
        qsort(m, n, sizeof *m, merge_cmp);
        for (size_t i = 0; i < n; i++) {
            cJSON *pair = cJSON_CreateArray();
            cJSON_AddItemToArray(pair, cJSON_CreateString(a->tokens[m[i].left]));
            cJSON_AddItemToArray(pair, cJSON_CreateString(a->tokens[m[i].right]));
            cJSON_AddItemToArray(out, pair);
        }
    }
    (void)name;
    free(m);
    free(x.slots);
    return s;
}

/* ---------------------------------------------------------------------------------------------
 * Loading */

static cJSON *spm_decoder(void)
{
    cJSON *rep = cJSON_CreateObject(), *pat = cJSON_CreateObject();
    cJSON_AddStringToObject(rep, "type", "Replace");
    cJSON_AddStringToObject(pat, "String", "\xe2\x96\x81");
    cJSON_AddItemToObject(rep, "pattern", pat);
    cJSON_AddStringToObject(rep, "content", " ");
    cJSON *bf = cJSON_CreateObject(), *fuse = cJSON_CreateObject(), *strip = cJSON_CreateObject();
    cJSON_AddStringToObject(bf, "type", "ByteFallback");
    cJSON_AddStringToObject(fuse, "type", "Fuse");
    cJSON_AddStringToObject(strip, "type", "Strip");
    cJSON_AddStringToObject(strip, "content", " ");
    cJSON_AddNumberToObject(strip, "start", 1);
    cJSON_AddNumberToObject(strip, "stop", 0);
    cJSON *d = sequence("Sequence", "decoders", rep, bf);
    cJSON *arr = cJSON_GetObjectItemCaseSensitive(d, "decoders");
    cJSON_AddItemToArray(arr, fuse);
    cJSON_AddItemToArray(arr, strip);
    return d;
}

static cJSON *spm_normalizer(bool prefix)
{
    cJSON *rep = cJSON_CreateObject(), *pat = cJSON_CreateObject();
    cJSON_AddStringToObject(rep, "type", "Replace");
    cJSON_AddStringToObject(pat, "String", " ");
    cJSON_AddItemToObject(rep, "pattern", pat);
    cJSON_AddStringToObject(rep, "content", "\xe2\x96\x81");
    if (!prefix)
        return rep;
    cJSON *pre = cJSON_CreateObject();
    cJSON_AddStringToObject(pre, "type", "Prepend");
    cJSON_AddStringToObject(pre, "prepend", "\xe2\x96\x81");
    return sequence("Sequence", "normalizers", pre, rep);
}

tt_status tokenizer_load_gguf_arrays(const tokenizer_gguf_arrays *a, const char *name,
                                     tokenizer **out, tt_error *err)
{
    *out = NULL;
    const bool spm = a->model && strcmp(a->model, "llama") == 0;
    if (!a->model || (!spm && strcmp(a->model, "gpt2") != 0))
        return tt_fail(err, TT_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model: '%.40s' is not "
                       "supported (gpt2, llama)", name, a->model ? a->model : "(missing)");
    if (a->n_tokens < 1)
        return tt_fail(err, TT_ERR_FORMAT, "%s: tokenizer.ggml.tokens: missing or empty", name);
    if (spm && !a->scores)
        return tt_fail(err, TT_ERR_FORMAT, "%s: tokenizer.ggml.scores: missing (a llama "
                       "tokenizer ranks its merges by them)", name);
    for (int i = 0; i < a->n_tokens; i++)
        if (!a->tokens[i] || !a->tokens[i][0])
            return tt_fail(err, TT_ERR_FORMAT, "%s: tokenizer.ggml.tokens: token %d is empty",
                           name, i);
    cJSON *root = cJSON_CreateObject(), *model = cJSON_CreateObject();
    cJSON *vocab = cJSON_CreateObject(), *merges = cJSON_CreateArray(),
          *added = cJSON_CreateArray();
    tt_status s = TT_OK;
    cJSON_AddStringToObject(model, "type", "BPE");
    if (spm) {
        cJSON_AddItemToObject(root, "normalizer", spm_normalizer(a->add_space_prefix));
        cJSON_AddItemToObject(root, "pre_tokenizer", cJSON_CreateNull());
        cJSON_AddItemToObject(root, "decoder", spm_decoder());
        cJSON_AddBoolToObject(model, "byte_fallback", true);
        cJSON_AddBoolToObject(model, "fuse_unk", true);
        if (a->unk_id >= 0 && a->unk_id < a->n_tokens)
            cJSON_AddStringToObject(model, "unk_token", a->tokens[a->unk_id]);
        s = spm_merges(a, name, merges, err);
    } else {
        cJSON *dec = cJSON_CreateObject();
        cJSON_AddStringToObject(dec, "type", "ByteLevel");
        cJSON_AddItemToObject(root, "decoder", dec);
        const char *pre = a->pre ? a->pre : "default";
        if (!add_pre(root, model, pre))
            s = tt_fail(err, TT_ERR_UNSUPPORTED, "%s: tokenizer.ggml.pre: '%.40s' is not "
                        "supported (llama-bpe, qwen2, smollm, gpt2, default)", name, pre);
        for (int i = 0; i < a->n_merges && s == TT_OK; i++)
            cJSON_AddItemToArray(merges, cJSON_CreateString(a->merges[i]));
    }
    for (int i = 0; i < a->n_tokens && s == TT_OK; i++) {
        cJSON_AddNumberToObject(vocab, a->tokens[i], i);
        int ty = a->types ? a->types[i] : TYPE_NORMAL;
        if (ty == TYPE_CONTROL || ty == TYPE_UNKNOWN || ty == TYPE_USER_DEFINED) {
            cJSON *t = cJSON_CreateObject();
            cJSON_AddNumberToObject(t, "id", i);
            cJSON_AddStringToObject(t, "content", a->tokens[i]);
            cJSON_AddBoolToObject(t, "normalized", false);
            cJSON_AddBoolToObject(t, "special", ty != TYPE_USER_DEFINED);
            cJSON_AddItemToArray(added, t);
        }
    }
    cJSON_AddItemToObject(model, "vocab", vocab);
    cJSON_AddItemToObject(model, "merges", merges);
    cJSON_AddItemToObject(root, "model", model);
    cJSON_AddItemToObject(root, "added_tokens", added);

    cJSON *cfg = cJSON_CreateObject();
    if (a->bos_id >= 0 && a->bos_id < a->n_tokens)
        cJSON_AddStringToObject(cfg, "bos_token", a->tokens[a->bos_id]);
    if (a->eos_id >= 0 && a->eos_id < a->n_tokens)
        cJSON_AddStringToObject(cfg, "eos_token", a->tokens[a->eos_id]);
    bool add_bos = a->add_bos >= 0 ? a->add_bos : spm;
    cJSON_AddBoolToObject(cfg, "add_bos_token", add_bos && a->bos_id >= 0);
    char *json = s == TT_OK ? cJSON_PrintUnformatted(root) : NULL;
    char *config = s == TT_OK ? cJSON_PrintUnformatted(cfg) : NULL;
    if (s == TT_OK && (!json || !config))
        s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
    if (s == TT_OK)
        s = tokenizer_load_json_buffers(json, strlen(json), name, config, strlen(config), name,
                                        out, err);
    cJSON_free(json);
    cJSON_free(config);
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    return s;
}
