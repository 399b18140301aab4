/* model.c: a Hugging Face model directory: config.json through core/arch/, generation_config.json,
 * and the safetensors weights (one file or shards) bound to the roles the architecture names. */
#include "core/model/model.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/base/jsonr.h"
#include "core/base/util.h"

#define JSON_FILE_MAX (64u << 20) /* config files larger than this are not configs */

static bool is_non_negative(double x) { return x >= 0; }
static bool is_probability(double x) { return x >= 0 && x <= 1; }
static bool is_positive(double x) { return x > 0; }

/* ---------------------------------------------------------------------------------------------
 * generation_config.json */

tt_status model_generation_parse(const char *json, size_t len, const char *name, int V,
                                 model_generation_defaults *out, tt_error *err)
{
    cJSON *root;
    model_generation_defaults g = {0};
    tt_status s = jsonr_parse_object(json, len, name, &root, err);
    if (s != TT_OK)
        return s;
    bool present;
    if ((s = jsonr_setting(root, name, "temperature", is_non_negative, "negative",
                          &g.temperature, &g.has_temperature, err)) != TT_OK)
        goto out;
    if ((s = jsonr_setting(root, name, "top_p", is_probability, "not in [0, 1]", &g.top_p,
                          &g.has_top_p, err)) != TT_OK)
        goto out;
    if ((s = jsonr_setting(root, name, "repetition_penalty", is_positive, "not positive",
                          &g.repetition_penalty, &g.has_rep_penalty, err)) != TT_OK)
        goto out;
    g.has_top_k = jsonr_field(root, "top_k") != NULL;
    if ((s = jsonr_int(root, name, "top_k", false, 0, 0, INT_MAX, &g.top_k, err)) != TT_OK)
        goto out;
    g.has_max_new_tokens = jsonr_field(root, "max_new_tokens") != NULL;
    if ((s = jsonr_int(root, name, "max_new_tokens", false, 0, 0, INT_MAX, &g.max_new_tokens,
                      err)) != TT_OK)
        goto out;
    bool b = false;
    if ((s = jsonr_bool(root, name, "do_sample", &b, &present, err)) != TT_OK)
        goto out;
    g.has_do_sample = present;
    g.do_sample = b;
    s = jsonr_token_ids(root, name, "eos_token_id", V, g.eos_ids, ARCH_MAX_EOS, &g.n_eos, err);
out:
    cJSON_Delete(root);
    if (s == TT_OK)
        *out = g;
    return s;
}

/* ---------------------------------------------------------------------------------------------
 * Files */

static bool file_exists(const char *dir, const char *file)
{
    char *p = util_path_join(dir, file);
    struct stat st;
    bool ok = p && stat(p, &st) == 0;
    free(p);
    return ok;
}

static bool has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* The first pickle checkpoint in dir (pytorch_model.bin preferred), copied into buf; false if none. */
static bool find_pickle(const char *dir, char *buf, size_t cap)
{
    if (file_exists(dir, "pytorch_model.bin")) {
        snprintf(buf, cap, "pytorch_model.bin");
        return true;
    }
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL)
        if (has_suffix(e->d_name, ".bin") || has_suffix(e->d_name, ".pt") ||
            has_suffix(e->d_name, ".pth") || has_suffix(e->d_name, ".ckpt")) {
            snprintf(buf, cap, "%s", e->d_name);
            found = true;
        }
    closedir(d);
    return found;
}

/* ---------------------------------------------------------------------------------------------
 * Binding tensors */

typedef struct {
    model *m;
    const char *path;            /* of model.safetensors (or the index), for messages */
    tt_error *err;
} binder;

static tt_dtype st_to_tt(st_dtype d)
{
    return d == ST_F32 ? TT_F32 : d == ST_F16 ? TT_F16 : TT_BF16;
}

/* The tensor called name in any of the model's files, or NULL. */
static const st_tensor *find_tensor(const model *m, const char *name)
{
    for (int i = 0; i < m->n_files; i++) {
        const st_tensor *t = safetensors_find(m->files[i], name);
        if (t)
            return t;
    }
    return NULL;
}

static void shape_str(char *buf, size_t cap, int ndim, const uint64_t *shape)
{
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%llu", i ? "," : "",
                              (unsigned long long)shape[i]);
    if (k < cap)
        snprintf(buf + k, cap - k, "]");
}

/* Binds one role of the description (layer l, or -1 for a model-wide role) into *out: looks up
 * its Hugging Face name (and the optional prefix unless it is the output head), checks its dtype
 * and its shape. */
static tt_status bind_role(binder *b, const arch_tensor_desc *td, int l, tensor_ref *out)
{
    const model_config *c = &b->m->config;
    const char *prefix = c->arch->hf_optional_prefix;
    char name[320], pref[352];
    snprintf(name, sizeof name, td->hf, l);
    bool bare = !prefix || td->role == ARCH_T_OUTPUT;
    snprintf(pref, sizeof pref, "%s%s", prefix ? prefix : "", name);
    const st_tensor *t = find_tensor(b->m, name);
    const st_tensor *tp = bare ? NULL : find_tensor(b->m, pref);
    if (t && tp)
        return tt_fail(b->err, TT_ERR_FORMAT,
                       "%s: tensor %s is present both with and without the '%s' prefix; which "
                       "one to use is ambiguous", b->path, name, prefix);
    if (!t)
        t = tp;
    if (!t) {
        if (td->role == ARCH_T_OUTPUT)
            return tt_fail(b->err, TT_ERR_FORMAT, "%s: missing tensor %s (config.json sets "
                           "tie_word_embeddings to false)", b->path, name);
        return tt_fail(b->err, TT_ERR_FORMAT, "%s: missing tensor %s%s%s%s", b->path, name,
                       bare ? "" : " (looked for it with and without the '",
                       bare ? "" : prefix, bare ? "" : "' prefix)");
    }
    if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16)
        return tt_fail(b->err, TT_ERR_UNSUPPORTED,
                       "%s: tensor %s: dtype %s is not a weight type (F32, F16 or BF16)", b->path,
                       t->name, st_dtype_name(t->dtype));
    int ndim = td->dims[1] ? 2 : 1;
    uint64_t want[2] = {arch_dim_value(c, td->dims[0]),
                        td->dims[1] ? arch_dim_value(c, td->dims[1]) : 0};
    bool ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = t->shape[i] == want[i];
    if (!ok) {
        char ws[64], gs[256];
        shape_str(ws, sizeof ws, ndim, want);
        shape_str(gs, sizeof gs, t->ndim, t->shape);
        return tt_fail(b->err, TT_ERR_FORMAT, "%s: tensor %s: expected %s, got %s", b->path,
                       t->name, ws, gs);
    }
    out->data = t->data;
    out->dtype = st_to_tt(t->dtype);
    out->in_out = td->in_out;
    return TT_OK;
}

tt_status model_bind_roles(model *m, model_bind_fn bind, void *ctx)
{
    const model_config *c = &m->config;
    model_tensors *w = &m->tensors;
    for (int i = 0; i < c->arch->n_tensors; i++) {
        const arch_tensor_desc *td = &c->arch->tensors[i];
        if (!arch_tensor_used(td, c->features))
            continue;
        for (int l = 0; l < (td->role >= ARCH_T_FIRST_LAYER ? c->L : 1); l++) {
            tensor_ref *dst = td->role >= ARCH_T_FIRST_LAYER
                                  ? &w->layers[(size_t)l * ARCH_T_COUNT + td->role]
                                  : &w->global[td->role];
            tt_status s = bind(ctx, td, l, dst);
            if (s != TT_OK)
                return s;
        }
    }
    /* With tied embeddings transformers points the output head at the token embedding after
     * loading, whatever the file holds: a stray lm_head.weight is left unused, so both programs
     * compute the same. */
    w->lm_head_tied = !(c->features & ARCH_F_UNTIED);
    if (w->lm_head_tied)
        w->global[ARCH_T_OUTPUT] = w->global[ARCH_T_TOKEN_EMBD];
    return TT_OK;
}

static tt_status bind_hf_role(void *b, const arch_tensor_desc *td, int l, tensor_ref *out)
{
    return bind_role(b, td, l, out);
}

static tt_status bind_all(binder *b)
{
    return model_bind_roles(b->m, bind_hf_role, b);
}

bool model_is_eos(const model *m, int32_t id)
{
    const int *ids = m->gen.n_eos ? m->gen.eos_ids : m->config.eos_ids;
    int n = m->gen.n_eos ? m->gen.n_eos : m->config.n_eos;
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

int32_t model_eos(const model *m)
{
    return m->gen.n_eos ? m->gen.eos_ids[0] : model_config_eos(&m->config);
}

/* ---------------------------------------------------------------------------------------------
 * Load / free */

static char *base_name(const char *dir)
{
    /* "." and ".." say nothing on a status bar: name the directory they stand for. */
    const char *last = strrchr(dir, '/');
    last = last && last[1] ? last + 1 : dir;
    if (strcmp(last, ".") == 0 || strcmp(last, "..") == 0 || strcmp(last, "./") == 0 ||
        strcmp(last, "../") == 0) {
        char *real = realpath(dir, NULL);
        if (real && strcmp(real, "/") != 0) {
            char *b = strdup(strrchr(real, '/') + 1);
            free(real);
            return b;
        }
        free(real);
    }
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/')
        b--;
    if (n == b)                  /* "/" */
        return strdup(dir);
    return strndup(dir + b, n - b);
}

/* Opens the shards dir/model.safetensors.index.json names (its weight_map's distinct files, in
 * their first appearance's order). */
static tt_status open_shards(model *m, const char *dir, const char *index_path, tt_error *err)
{
    char *text = NULL;
    size_t len = 0;
    cJSON *root = NULL;
    tt_status s = util_read_file(index_path, JSON_FILE_MAX, &text, &len, NULL, err);
    if (s == TT_OK)
        s = jsonr_parse_object(text, len, index_path, &root, err);
    free(text);
    if (s != TT_OK)
        return s;
    const cJSON *map = jsonr_field(root, "weight_map");
    if (!cJSON_IsObject(map) || !map->child) {
        cJSON_Delete(root);
        return tt_fail(err, TT_ERR_FORMAT, "%s: weight_map: expected an object naming the shard "
                       "of every tensor", index_path);
    }
    const char *names[MODEL_MAX_SHARDS];
    int n = 0;
    for (const cJSON *e = map->child; e && s == TT_OK; e = e->next) {
        if (!cJSON_IsString(e)) {
            s = tt_fail(err, TT_ERR_FORMAT, "%s: weight_map: %.80s: expected a file name",
                        index_path, e->string);
            break;
        }
        const char *f = e->valuestring;
        if (!f[0] || strchr(f, '/') || strcmp(f, "..") == 0) {
            s = tt_fail(err, TT_ERR_FORMAT, "%s: weight_map: %.80s: '%.80s' is not a file in "
                        "the model directory", index_path, e->string, f);
            break;
        }
        int k = 0;
        while (k < n && strcmp(names[k], f) != 0)
            k++;
        if (k < n)
            continue;
        if (n == MODEL_MAX_SHARDS) {
            s = tt_fail(err, TT_ERR_UNSUPPORTED, "%s: weight_map names more than %d shards",
                        index_path, MODEL_MAX_SHARDS);
            break;
        }
        names[n++] = f;
    }
    for (int i = 0; i < n && s == TT_OK; i++) {
        char *p = util_path_join(dir, names[i]);
        if (!p) {
            s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
            break;
        }
        s = safetensors_open(p, &m->files[m->n_files], err);
        if (s == TT_OK)
            m->n_files++;
        free(p);
    }
    cJSON_Delete(root);
    return s;
}

static tt_status load_weights(model *m, binder *b, const char *dir, tt_error *err)
{
    char *path = util_path_join(dir, "model.safetensors");
    char *index = util_path_join(dir, "model.safetensors.index.json");
    if (!path || !index) {
        free(path);
        free(index);
        return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    }
    tt_status s;
    struct stat st;
    const char *named = path;
    if (stat(path, &st) != 0 && errno == ENOENT) {
        char pk[256];
        if (file_exists(dir, "model.safetensors.index.json")) {
            s = open_shards(m, dir, index, err);
            named = index;
        } else if (find_pickle(dir, pk, sizeof pk)) {
            s = tt_fail(err, TT_ERR_UNSUPPORTED,
                        "%s: only %s found; tokentop reads model.safetensors only, because pickle "
                        "checkpoints execute code when loaded. Convert with: python3 -c 'from "
                        "transformers import AutoModelForCausalLM as M; M.from_pretrained(\"%s\")"
                        ".save_pretrained(\"%s\", safe_serialization=True)'", dir, pk, dir, dir);
        } else {
            s = tt_fail(err, TT_ERR_IO, "%s: missing model.safetensors (the weights of a Hugging "
                        "Face model directory)", dir);
        }
    } else {
        s = safetensors_open(path, &m->files[0], err);
        m->n_files = s == TT_OK;
    }
    if (s == TT_OK) {
        b->path = named;
        s = bind_all(b);
        b->path = NULL;
    }
    free(path);
    free(index);
    return s;
}

tt_status model_load_dir(const char *dir, model **out, tt_error *err)
{
    *out = NULL;
    struct stat st;
    if (stat(dir, &st) != 0)
        return tt_fail(err, TT_ERR_IO, "%s: cannot open model directory: %s", dir,
                       strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return tt_fail(err, TT_ERR_IO, "%s: not a directory or a GGUF file (a model is a Hugging "
                       "Face directory with config.json and model.safetensors, or a .gguf file)",
                       dir);

    model *m = calloc(1, sizeof *m);
    if (!m)
        return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    m->dir = strdup(dir);
    m->name = base_name(dir);
    tt_status s = TT_OK;
    char *text = NULL, *path = NULL;
    size_t len = 0;
    bool missing = false;
    if (!m->dir || !m->name || !(path = util_path_join(dir, "config.json"))) {
        s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
        goto fail;
    }

    s = util_read_file(path, JSON_FILE_MAX, &text, &len, &missing, err);
    if (s != TT_OK) {
        if (missing)
            s = tt_fail(err, TT_ERR_IO, "%s: missing config.json (a Hugging Face model directory "
                        "holds config.json and model.safetensors)", dir);
        goto fail;
    }
    if ((s = model_config_parse(text, len, path, &m->config, err)) != TT_OK)
        goto fail;
    free(text);
    text = NULL;
    free(path);
    path = NULL;

    m->tensors.layers = calloc((size_t)m->config.L * ARCH_T_COUNT, sizeof *m->tensors.layers);
    if (!m->tensors.layers) {
        s = tt_fail(err, TT_ERR_NOMEM, "out of memory for %d layers", m->config.L);
        goto fail;
    }
    binder b = {.m = m, .err = err};
    if ((s = load_weights(m, &b, dir, err)) != TT_OK)
        goto fail;
    m->file_dtype = m->tensors.global[ARCH_T_TOKEN_EMBD].dtype;
    m->n_params = (size_t)model_config_n_params(&m->config);

    if (!(path = util_path_join(dir, "generation_config.json"))) {
        s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
        goto fail;
    }
    tt_error gerr = {0};
    s = util_read_file(path, JSON_FILE_MAX, &text, &len, &missing, &gerr);
    if (s == TT_OK)
        s = model_generation_parse(text, len, path, m->config.V, &m->gen, &gerr);
    if (s == TT_ERR_NOMEM) {
        *err = gerr;
        goto fail;
    }
    if (s != TT_OK && !missing)
        snprintf(m->gen_warning, sizeof m->gen_warning, "%s", gerr.msg);
    s = TT_OK;
    free(text);
    free(path);
    *out = m;
    return TT_OK;
fail:
    free(text);
    free(path);
    model_free(m);
    return s;
}

void model_free(model *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_files; i++)
        safetensors_close(m->files[i]);
    gguf_close(m->gguf);
    free(m->tensors.layers);
    free(m->chat_template);
    for (int i = 0; i < m->n_stop_strings; i++)
        free(m->stop_strings[i]);
    free(m->stop_strings);
    free(m->dir);
    free(m->name);
    free(m);
}

/* ---------------------------------------------------------------------------------------------
 * Reading weights */

/* Bytes of one stored row of t (tensor_ref_is_plain(t) false). */
static size_t ref_row_bytes(tensor_ref t)
{
    uint64_t b = 0;
    if (t.quantized)
        quant_row_bytes(t.quant, (uint64_t)t.row_len, &b);
    else
        b = (uint64_t)t.row_len * tt_dtype_size(t.dtype);
    return (size_t)b;
}

const void *tensor_ref_row(tensor_ref t, size_t r)
{
    if (t.head_rows) {
        /* llama.cpp's permute made stored row 2i + j of a head out of rotate-half row
         * j * HS/2 + i: row r of the rotate-half order is stored at 2 (r % half) + r / half. */
        const size_t hs = (size_t)t.head_rows, half = hs / 2, in = r % hs;
        r = r - in + 2 * (in % half) + in / half;
    }
    return (const unsigned char *)t.data + r * ref_row_bytes(t);
}

/* Elements [c, c + n) of one stored row (quantized or not) as float. */
static void row_to_f32(tensor_ref t, const unsigned char *row, size_t c, size_t n, float *dst)
{
    if (!t.quantized) {
        tensor_ref plain = {.data = row, .dtype = t.dtype};
        tensor_ref_to_f32(plain, c, n, dst);
        return;
    }
    const size_t bs = quant_block_size(t.quant), bb = quant_block_bytes(t.quant);
    float block[QUANT_QK_K];
    while (n > 0) {
        size_t b = c / bs, in = c % bs, cnt = bs - in < n ? bs - in : n;
        quant_dequantize_row(t.quant, row + b * bb, block, bs);
        memcpy(dst, block + in, cnt * sizeof *dst);
        dst += cnt;
        c += cnt;
        n -= cnt;
    }
}

void tensor_ref_to_f32(tensor_ref t, size_t offset, size_t n, float *dst)
{
    const unsigned char *p = t.data;
    if (!tensor_ref_is_plain(t)) {
        const size_t K = (size_t)t.row_len;
        while (n > 0) {
            size_t r = offset / K, c = offset % K, cnt = K - c < n ? K - c : n;
            row_to_f32(t, tensor_ref_row(t, r), c, cnt, dst);
            dst += cnt;
            offset += cnt;
            n -= cnt;
        }
        return;
    }
    if (t.dtype == TT_F32) {
        memcpy(dst, p + offset * 4, n * 4);
        return;
    }
    p += offset * 2;
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        dst[i] = t.dtype == TT_F16 ? tt_f16_to_f32(h) : tt_bf16_to_f32(h);
    }
}

size_t model_weight_bytes(const model *m, tt_dtype d)
{
    const model_config *c = &m->config;
    uint64_t n = model_config_step_params(c) + (uint64_t)c->C *
                 (c->features & ARCH_F_LEARNED_POS ? 2 : 1);
    return (size_t)(n * tt_dtype_size(d));
}
