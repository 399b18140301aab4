/* model_gguf.c: a GGUF file (llama.cpp's format) as a model: the architecture from
 * general.architecture, the config from the {arch}.* keys, the tensors bound by the
 * descriptions' GGUF names, mapped as they are (quantized ones dequantize on reading). */
#include "core/model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/base/util.h"
#include "core/model/ollama.h"
#include "core/tokenizer/tokenizer.h"

/* ---------------------------------------------------------------------------------------------
 * The config from the metadata */

typedef struct {
    const gguf_file *f;
    const char *arch;            /* general.architecture: the prefix of every hyperparameter */
    tt_error *err;
} kv_reader;

/* {arch}.key as an integer in [lo, hi]; absent: def, or an error when required. */
static tt_status kv_int(const kv_reader *r, const char *key, bool required, int def, int lo,
                        int hi, int *out)
{
    char k[160];
    snprintf(k, sizeof k, "%s.%s", r->arch, key);
    if (!gguf_find_kv(r->f, k)) {
        if (required)
            return tt_fail(r->err, TT_ERR_FORMAT, "%s: key %s: missing", gguf_name(r->f), k);
        *out = def;
        return TT_OK;
    }
    uint64_t v;
    tt_status s = gguf_get_u64(r->f, k, &v, r->err);
    if (s != TT_OK)
        return s;
    if (v < (uint64_t)lo || v > (uint64_t)hi)
        return tt_fail(r->err, TT_ERR_FORMAT, "%s: key %s: %llu is not in [%d, %d]",
                       gguf_name(r->f), k, (unsigned long long)v, lo, hi);
    *out = (int)v;
    return TT_OK;
}

/* {arch}.key as a float in the open interval (lo, hi); absent: def. */
static tt_status kv_float(const kv_reader *r, const char *key, double def, double lo, double hi,
                          double *out)
{
    char k[160];
    snprintf(k, sizeof k, "%s.%s", r->arch, key);
    if (!gguf_find_kv(r->f, k)) {
        *out = def;
        return TT_OK;
    }
    float v;
    tt_status s = gguf_get_f32(r->f, k, &v, r->err);
    if (s != TT_OK)
        return s;
    if (!(v > lo && v < hi))
        return tt_fail(r->err, TT_ERR_FORMAT, "%s: key %s: %g is not in (%g, %g)",
                       gguf_name(r->f), k, (double)v, lo, hi);
    *out = v;
    return TT_OK;
}

/* tokenizer.ggml.KEY_token_id into *id when present and in [0, V). */
static tt_status token_id(const gguf_file *f, const char *key, int V, int *id, bool *present,
                          tt_error *err)
{
    *present = gguf_find_kv(f, key) != NULL;
    if (!*present)
        return TT_OK;
    uint32_t v;
    tt_status s = gguf_get_u32(f, key, &v, err);
    if (s != TT_OK)
        return s;
    if (v >= (uint32_t)V)
        return tt_fail(err, TT_ERR_FORMAT, "%s: key %s: token %u is not below the vocabulary "
                       "size %d", gguf_name(f), key, v, V);
    *id = (int)v;
    return TT_OK;
}

/* llama.cpp writes a Llama 3.1-scaled model's frequencies as the rope_freqs tensor (one divisor
 * per rotary pair) instead of the rope_scaling parameters: the parameters Llama 3.1 and 3.2 use
 * (low 1, high 4, original context 8192, factor the largest divisor) are taken when they give
 * the same frequencies; any other set of divisors is refused. */
static tt_status read_rope_freqs(const gguf_file *f, model_config *c, tt_error *err)
{
    const int half = c->HS / 2;
    const gguf_tensor *t;
    uint64_t ne[1] = {(uint64_t)half};
    tt_status s = gguf_tensor_check(f, "rope_freqs.weight", 1, ne, &t, err);
    if (s != TT_OK)
        return s;
    if (t->type != QUANT_F32)
        return tt_fail(err, TT_ERR_FORMAT, "%s: tensor rope_freqs.weight: type %s (expected F32)",
                       gguf_name(f), quant_type_name(t->type));
    float *div = malloc((size_t)half * sizeof *div);
    double *inv = malloc((size_t)half * sizeof *inv);
    if (!div || !inv) {
        free(div);
        free(inv);
        return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    }
    memcpy(div, t->data, (size_t)half * sizeof *div);
    float factor = 1;
    for (int i = 0; i < half; i++)
        if (div[i] > factor)
            factor = div[i];
    if (factor > 1) {
        c->rope.scaling = ARCH_ROPE_SCALING_LLAMA3;
        c->rope.factor = factor;
        c->rope.low_freq_factor = 1;
        c->rope.high_freq_factor = 4;
        c->rope.original_max_positions = 8192;
    }
    arch_rope_inv_freq(c, inv);
    for (int i = 0; i < half && s == TT_OK; i++) {
        double want = pow(c->rope.theta, -2.0 * i / c->HS) / div[i];
        if (!(div[i] > 0) || fabs(inv[i] - want) > 1e-5 * want)
            s = tt_fail(err, TT_ERR_UNSUPPORTED, "%s: tensor rope_freqs.weight: divisor %d (%g) "
                        "is not Llama 3.1's rope scaling (factor %g, low 1, high 4, original "
                        "context 8192); other scalings are not supported", gguf_name(f), i,
                        (double)div[i], (double)factor);
    }
    free(div);
    free(inv);
    return s;
}

static tt_status read_config(const gguf_file *f, model_config *c, tt_error *err)
{
    const char *name = gguf_name(f);
    const char *arch = gguf_architecture(f);
    memset(c, 0, sizeof *c);
    c->arch = arch_by_gguf(arch);
    if (!c->arch)
        return tt_fail(err, TT_ERR_UNSUPPORTED, "%s: key general.architecture: '%.40s' is not "
                       "supported (llama, qwen2, qwen3, gpt2)", name, arch);
    kv_reader r = {.f = f, .arch = arch, .err = err};
    const bool gpt2 = strcmp(arch, "gpt2") == 0;
    tt_status s;
    if ((s = kv_int(&r, "context_length", true, 0, 1, 16777216, &c->maxT)) != TT_OK ||
        (s = kv_int(&r, "embedding_length", true, 0, 1, 65536, &c->C)) != TT_OK ||
        (s = kv_int(&r, "block_count", true, 0, 1, 512, &c->L)) != TT_OK ||
        (s = kv_int(&r, "feed_forward_length", !gpt2, 4 * c->C, 1, 262144, &c->FF)) != TT_OK ||
        (s = kv_int(&r, "attention.head_count", true, 0, 1, 512, &c->NH)) != TT_OK ||
        (s = kv_int(&r, "attention.head_count_kv", false, c->NH, 1, 512, &c->NKV)) != TT_OK)
        return s;
    if (c->NH % c->NKV != 0)
        return tt_fail(err, TT_ERR_FORMAT, "%s: key %s.attention.head_count %d is not a multiple "
                       "of %s.attention.head_count_kv %d", name, arch, c->NH, arch, c->NKV);
    char k[160];
    snprintf(k, sizeof k, "%s.attention.key_length", arch);
    if (!gguf_find_kv(f, k) && c->C % c->NH != 0)
        return tt_fail(err, TT_ERR_FORMAT, "%s: key %s.embedding_length %d is not a multiple of "
                       "%s.attention.head_count %d (and no %s)", name, arch, c->C, arch, c->NH, k);
    int vlen;
    if ((s = kv_int(&r, "attention.key_length", false, c->C / c->NH, 2, 1024, &c->HS)) != TT_OK ||
        (s = kv_int(&r, "attention.value_length", false, c->HS, 1, 1024, &vlen)) != TT_OK)
        return s;
    if (vlen != c->HS)
        return tt_fail(err, TT_ERR_UNSUPPORTED, "%s: key %s.attention.value_length: %d differs "
                       "from the key length %d (not supported)", name, arch, vlen, c->HS);
    double eps, theta;
    if (gpt2) {
        c->features = ARCH_F_LEARNED_POS | ARCH_F_QKV_FUSED | ARCH_F_QKV_BIAS | ARCH_F_OUT_BIAS |
                      ARCH_F_MLP_BIAS | ARCH_F_NORM_BIAS;
        c->act = ARCH_ACT_GELU_TANH;
        if ((s = kv_float(&r, "attention.layer_norm_epsilon", 1e-5, 0, 1, &eps)) != TT_OK)
            return s;
    } else {
        c->features = ARCH_F_RMSNORM | ARCH_F_ROPE | ARCH_F_SWIGLU;
        c->act = ARCH_ACT_SILU;
        /* The recipe's optional parts, as the file's tensors show them (qwen2's q|k|v biases,
         * qwen3's q/k norms, a llama with attention_bias). */
        if (gguf_find_tensor(f, "blk.0.attn_q.bias"))
            c->features |= ARCH_F_QKV_BIAS;
        if (gguf_find_tensor(f, "blk.0.attn_output.bias"))
            c->features |= ARCH_F_OUT_BIAS;
        if (gguf_find_tensor(f, "blk.0.attn_q_norm.weight"))
            c->features |= ARCH_F_QK_NORM;
        int rot;
        if ((s = kv_float(&r, "attention.layer_norm_rms_epsilon", 1e-5, 0, 1, &eps)) != TT_OK ||
            (s = kv_float(&r, "rope.freq_base", 10000, 1, INFINITY, &theta)) != TT_OK ||
            (s = kv_int(&r, "rope.dimension_count", false, c->HS, 1, 1024, &rot)) != TT_OK)
            return s;
        if (rot != c->HS)
            return tt_fail(err, TT_ERR_UNSUPPORTED, "%s: key %s.rope.dimension_count: %d "
                           "rotary dimensions of %d (partial RoPE is not supported)", name, arch,
                           rot, c->HS);
        c->rope.theta = theta;
        snprintf(k, sizeof k, "%s.rope.scaling.type", arch);
        gguf_str type = {0};
        if (gguf_find_kv(f, k) && (s = gguf_get_string(f, k, &type, err)) != TT_OK)
            return s;
        if (type.len && !gguf_str_eq(type, "none"))
            return tt_fail(err, TT_ERR_UNSUPPORTED, "%s: key %s: '%.*s' is not supported (none, "
                           "or Llama 3.1's scaling as rope_freqs)", name, k,
                           (int)(type.len > 40 ? 40 : type.len), type.ptr);
        if (gguf_find_tensor(f, "rope_freqs.weight") && (s = read_rope_freqs(f, c, err)) != TT_OK)
            return s;
    }
    c->norm_eps = (float)eps;
    if (gguf_find_tensor(f, "output.weight"))
        c->features |= ARCH_F_UNTIED;

    /* V: the tokenizer's tokens (the embedding's shape is then checked against it). */
    const gguf_tensor *emb = gguf_find_tensor(f, "token_embd.weight");
    if (gguf_find_kv(f, "tokenizer.ggml.tokens")) {
        gguf_array a;
        if ((s = gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &a, err)) != TT_OK)
            return s;
        if (a.n < 1 || a.n > 1000000)
            return tt_fail(err, TT_ERR_FORMAT, "%s: key tokenizer.ggml.tokens: %llu tokens (1 .. "
                           "1000000)", name, (unsigned long long)a.n);
        c->V = (int)a.n;
    } else if (emb && emb->n_dims == 2 && emb->ne[1] >= 1 && emb->ne[1] <= 1000000) {
        c->V = (int)emb->ne[1];
    } else {
        return tt_fail(err, TT_ERR_FORMAT, "%s: key tokenizer.ggml.tokens: missing (and no "
                       "token_embd.weight to size the vocabulary)", name);
    }
    c->bos_id = -1;
    bool present;
    int id;
    if ((s = token_id(f, "tokenizer.ggml.bos_token_id", c->V, &c->bos_id, &present, err)) != TT_OK)
        return s;
    static const char *const ends[] = {"tokenizer.ggml.eos_token_id",
                                       "tokenizer.ggml.eot_token_id",
                                       "tokenizer.ggml.eom_token_id"};
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        if ((s = token_id(f, ends[i], c->V, &id, &present, err)) != TT_OK)
            return s;
        bool dup = false;
        for (int j = 0; j < c->n_eos; j++)
            dup |= c->eos_ids[j] == id;
        if (present && !dup)
            c->eos_ids[c->n_eos++] = id;
    }
    return arch_check_config(c, name, err);
}

/* ---------------------------------------------------------------------------------------------
 * Binding tensors */

static tt_status bind_role(model *m, const arch_tensor_desc *td, int l, tensor_ref *out,
                           tt_error *err)
{
    const model_config *c = &m->config;
    const char *path = gguf_name(m->gguf);
    if (!td->gguf)
        return tt_fail(err, TT_ERR_UNSUPPORTED, "%s: %s has no GGUF name for %s", path,
                       c->arch->name, td->hf);
    char name[GGUF_MAX_NAME + 16];
    snprintf(name, sizeof name, td->gguf, l);
    /* GGUF stores every matrix (N, K): ne = {K, N}; a description's in_out matrix says (K, N). */
    const int ndim = td->dims[1] ? 2 : 1;
    uint64_t d0 = arch_dim_value(c, td->dims[0]), d1 = ndim == 2 ? arch_dim_value(c, td->dims[1]) : 0;
    uint64_t ne[2] = {d0, 0};
    if (ndim == 2) {
        ne[0] = td->in_out ? d0 : d1;
        ne[1] = td->in_out ? d1 : d0;
    }
    const gguf_tensor *t;
    tt_status s = gguf_tensor_check(m->gguf, name, ndim, ne, &t, err);
    if (s != TT_OK)
        return s;
    *out = (tensor_ref){.data = t->data, .row_len = (int)t->ne[0]};
    if (t->type == QUANT_F32 || t->type == QUANT_F16 || t->type == QUANT_BF16) {
        out->dtype = t->type == QUANT_F32 ? TT_F32 : t->type == QUANT_F16 ? TT_F16 : TT_BF16;
    } else {
        out->dtype = TT_F32;
        out->quantized = true;
        out->quant = t->type;
    }
    /* llama.cpp's converter permutes a llama's q and k rows (and biases) for its adjacent-pair
     * RoPE; qwen2 and qwen3 files keep Hugging Face's order. */
    bool rotary = td->role == ARCH_T_Q || td->role == ARCH_T_K || td->role == ARCH_T_Q_B ||
                  td->role == ARCH_T_K_B;
    if (rotary && strcmp(c->arch->gguf_arch, "llama") == 0) {
        out->head_rows = c->HS;
        if (ndim == 1)
            out->row_len = 1;
    }
    return TT_OK;
}

typedef struct {
    model *m;
    tt_error *err;
} gguf_binder;

static tt_status bind_gguf_role(void *ctx, const arch_tensor_desc *td, int l, tensor_ref *out)
{
    gguf_binder *b = ctx;
    return bind_role(b->m, td, l, out, b->err);
}

static tt_status bind_all(model *m, tt_error *err)
{
    gguf_binder b = {.m = m, .err = err};
    return model_bind_roles(m, bind_gguf_role, &b);
}

/* The dtype engines hold a file of quantization q in by default: F32 as such, Q8_0 as TT_Q8
 * (repacked bit for bit: its kernels are the faster), any other file's tensors as stored
 * (TT_GGUF): quantized blocks, and F16 or BF16 rows, which the kernels read in place as fast as
 * a repacked copy (so a fresh process starts without writing gigabytes of new memory). */
static tt_dtype held_as(const char *q)
{
    static const struct { const char *name; tt_dtype d; } own[] = {
        {"F32", TT_F32}, {"Q8_0", TT_Q8},
    };
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (strcmp(q, own[i].name) == 0)
            return own[i].d;
    return TT_GGUF;
}

tt_status model_load_gguf(const char *path, model **out, tt_error *err)
{
    *out = NULL;
    model *m = calloc(1, sizeof *m);
    if (!m)
        return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    tt_status s = gguf_open(path, &m->gguf, err);
    if (s != TT_OK)
        goto fail;
    const char *base = strrchr(path, '/');
    m->dir = strdup(path);
    m->name = strdup(base ? base + 1 : path);
    if (!m->dir || !m->name) {
        s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((s = read_config(m->gguf, &m->config, err)) != TT_OK)
        goto fail;
    m->tensors.layers = calloc((size_t)m->config.L * ARCH_T_COUNT, sizeof *m->tensors.layers);
    if (!m->tensors.layers) {
        s = tt_fail(err, TT_ERR_NOMEM, "out of memory for %d layers", m->config.L);
        goto fail;
    }
    if ((s = bind_all(m, err)) != TT_OK)
        goto fail;
    m->n_params = (size_t)model_config_n_params(&m->config);
    snprintf(m->quantization, sizeof m->quantization, "%s", gguf_quantization(m->gguf));
    m->file_dtype = held_as(m->quantization);
    if (m->file_dtype == TT_GGUF || m->file_dtype == TT_Q8)
        snprintf(m->load_note, sizeof m->load_note, "--dtype converts the %s weights (%.2f bits "
                 "a weight, %zu MB as stored) at load: about %zu MB in fp16 or bf16, twice that "
                 "in fp32, half in q8, and slower to load", m->quantization,
                 gguf_bits_per_weight(m->gguf), (size_t)(gguf_file_size(m->gguf) / 1000000),
                 model_weight_bytes(m, TT_F16) / 1000000);
    *out = m;
    return TT_OK;
fail:
    model_free(m);
    return s;
}

/* ---------------------------------------------------------------------------------------------
 * The tokenizer from the metadata */

/* An optional array KEY of n elements of type elem: *present false when absent. */
static tt_status tok_array(const gguf_file *f, const char *key, gguf_type elem, uint64_t n,
                           gguf_array *a, bool *present, tt_error *err)
{
    *present = gguf_find_kv(f, key) != NULL;
    if (!*present)
        return TT_OK;
    tt_status s = gguf_get_array(f, key, elem, a, err);
    if (s == TT_OK && n && a->n != n)
        s = tt_fail(err, TT_ERR_FORMAT, "%s: key %s: %llu values for %llu tokens", gguf_name(f),
                    key, (unsigned long long)a->n, (unsigned long long)n);
    return s;
}

/* The strings of a as malloc'd C strings (NULL when out of memory). */
static char **dup_strings(const gguf_array *a)
{
    char **v = calloc(a->n ? a->n : 1, sizeof *v);
    for (uint64_t i = 0; v && i < a->n; i++)
        if (!(v[i] = gguf_str_dup(gguf_array_str(a, i)))) {
            for (uint64_t j = 0; j < i; j++)
                free(v[j]);
            free(v);
            return NULL;
        }
    return v;
}

static void free_strings(char **v, uint64_t n)
{
    for (uint64_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

tt_status model_tokenizer_load(const model *m, tokenizer **out, tt_error *err)
{
    *out = NULL;
    if (!m->gguf)
        return tokenizer_load_dir(m->dir, out, err);
    const gguf_file *f = m->gguf;
    const char *name = gguf_name(f);
    tokenizer_gguf_arrays a = {.bos_id = -1, .eos_id = -1, .unk_id = -1, .add_bos = -1,
                               .add_space_prefix = true};
    gguf_str str;
    gguf_array toks, scores, types, merges;
    bool has_scores, has_types, has_merges, present;
    char *model_name = NULL, *pre = NULL, **tokens = NULL, **merge_strs = NULL;
    float *sc = NULL;
    int32_t *ty = NULL;
    tt_status s = gguf_get_string(f, "tokenizer.ggml.model", &str, err);
    if (s == TT_OK && !(model_name = gguf_str_dup(str)))
        s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
    if (s == TT_OK && gguf_find_kv(f, "tokenizer.ggml.pre") &&
        (s = gguf_get_string(f, "tokenizer.ggml.pre", &str, err)) == TT_OK &&
        !(pre = gguf_str_dup(str)))
        s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
    if (s == TT_OK)
        s = gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks, err);
    if (s == TT_OK && toks.n != (uint64_t)m->config.V)
        s = tt_fail(err, TT_ERR_FORMAT, "%s: key tokenizer.ggml.tokens: %llu tokens, the "
                    "embedding has %d", name, (unsigned long long)toks.n, m->config.V);
    if (s == TT_OK)
        s = tok_array(f, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, toks.n, &scores, &has_scores,
                      err);
    if (s == TT_OK)
        s = tok_array(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, toks.n, &types,
                      &has_types, err);
    if (s == TT_OK)
        s = tok_array(f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, 0, &merges, &has_merges, err);
    if (s == TT_OK && (!(tokens = dup_strings(&toks)) ||
                       (has_merges && !(merge_strs = dup_strings(&merges))) ||
                       (has_scores && !(sc = malloc(toks.n * sizeof *sc))) ||
                       (has_types && !(ty = malloc(toks.n * sizeof *ty)))))
        s = tt_fail(err, TT_ERR_NOMEM, "out of memory for %llu tokens",
                    (unsigned long long)toks.n);
    for (uint64_t i = 0; s == TT_OK && i < toks.n; i++) {
        if (sc)
            sc[i] = gguf_array_f32(&scores, i);
        if (ty)
            ty[i] = gguf_array_i32(&types, i);
    }
    if (s == TT_OK)
        s = token_id(f, "tokenizer.ggml.bos_token_id", (int)toks.n, &a.bos_id, &present, err);
    if (s == TT_OK)
        s = token_id(f, "tokenizer.ggml.eos_token_id", (int)toks.n, &a.eos_id, &present, err);
    if (s == TT_OK)
        s = token_id(f, "tokenizer.ggml.unknown_token_id", (int)toks.n, &a.unk_id, &present, err);
    bool b;
    if (s == TT_OK && gguf_find_kv(f, "tokenizer.ggml.add_bos_token") &&
        (s = gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &b, err)) == TT_OK)
        a.add_bos = b;
    if (s == TT_OK && gguf_find_kv(f, "tokenizer.ggml.add_space_prefix") &&
        (s = gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", &b, err)) == TT_OK)
        a.add_space_prefix = b;
    if (s == TT_OK) {
        a.model = model_name;
        a.pre = pre;
        a.n_tokens = (int)toks.n;
        a.tokens = (const char *const *)tokens;
        a.scores = sc;
        a.types = ty;
        a.n_merges = has_merges ? (int)merges.n : 0;
        a.merges = (const char *const *)merge_strs;
        s = tokenizer_load_gguf_arrays(&a, name, out, err);
    }
    free_strings(tokens, tokens ? toks.n : 0);
    free_strings(merge_strs, merge_strs ? merges.n : 0);
    free(sc);
    free(ty);
    free(model_name);
    free(pre);
    return s;
}

char *model_chat_template(const model *m)
{
    if (m->chat_template)
        return strdup(m->chat_template);
    const gguf_kv *kv = m->gguf ? gguf_find_kv(m->gguf, "tokenizer.chat_template") : NULL;
    return kv && kv->type == GGUF_TYPE_STRING ? gguf_str_dup(kv->str) : NULL;
}

tt_status model_apply_ollama(model *m, const char *name, const char *params_json,
                             const char *template_text, tt_error *err)
{
    char *n = strdup(name), *t = template_text ? strdup(template_text) : NULL;
    if (!n || (template_text && !t)) {
        free(n);
        free(t);
        return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    }
    free(m->name);
    m->name = n;
    free(m->chat_template);
    m->chat_template = t;
    if (!params_json)
        return TT_OK;
    ollama_params p;
    tt_error perr = {0};
    char label[300];
    snprintf(label, sizeof label, "%s: params", name);
    if (ollama_params_parse(params_json, strlen(params_json), label, &p, &perr) != TT_OK) {
        snprintf(m->gen_warning, sizeof m->gen_warning, "%s", perr.msg);
        return TT_OK;
    }
    model_generation_defaults *g = &m->gen;
    g->has_temperature = p.has_temperature;
    g->temperature = p.temperature;
    g->has_top_k = p.has_top_k;
    g->top_k = p.top_k;
    g->has_top_p = p.has_top_p;
    g->top_p = p.top_p;
    g->has_rep_penalty = p.has_repeat_penalty && p.repeat_penalty > 0;
    g->repetition_penalty = p.repeat_penalty;
    g->has_max_new_tokens = p.has_num_predict && p.num_predict > 0;
    g->max_new_tokens = p.num_predict;
    tt_status s = TT_OK;
    if (p.n_stop > 0) {
        m->stop_strings = calloc((size_t)p.n_stop, sizeof *m->stop_strings);
        for (int i = 0; m->stop_strings && i < p.n_stop; i++)
            if ((m->stop_strings[i] = strdup(p.stop[i])) != NULL)
                m->n_stop_strings++;
        if (m->n_stop_strings < p.n_stop)
            s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
    }
    ollama_params_free(&p);
    return s;
}

/* ---------------------------------------------------------------------------------------------
 * The entry point: a directory or a GGUF file (here, so that model.c, which model_gguf.c uses,
 * does not call back into it) */

/* Whether path starts with "GGUF" (llama.cpp's magic), whatever its name. */
static bool has_gguf_magic(const char *path)
{
    char magic[4] = {0};
    FILE *f = fopen(path, "rb");
    bool ok = f && fread(magic, 1, 4, f) == 4 && memcmp(magic, "GGUF", 4) == 0;
    if (f)
        fclose(f);
    return ok;
}

tt_status model_load(const char *path, model **out, tt_error *err)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && has_gguf_magic(path))
        return model_load_gguf(path, out, err);
    return model_load_dir(path, out, err);
}
