/* model.c: GPT-2 config.json / generation_config.json parsing and binding the safetensors
 * weights of a Hugging Face model directory to the gpt2_tensors views. */
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

#include "core/base/util.h"

/* Sanity limits, checked before anything is allocated. They are far above every GPT-2 release
 * (gpt2-xl: V 50257, maxT 1024, C 1600, L 48, NH 25, FF 6400) and low enough that every size
 * product below fits in 64 bits. */
#define LIMIT_V 1000000
#define LIMIT_MAXT 65536
#define LIMIT_C 16384
#define LIMIT_L 512
#define LIMIT_NH 512
#define LIMIT_FF 131072
#define LIMIT_PARAMS 20000000000ull

#define JSON_FILE_MAX (64u << 20) /* config files larger than this are not configs */

/* ---------------------------------------------------------------------------------------------
 * JSON field helpers: each failure names the file and the field. */

/* Describes a wrongly typed value for a message: 'a string ("12")', 'a boolean (true)'. */
static const char *json_describe(const cJSON *j, char *buf, size_t cap)
{
    if (cJSON_IsString(j))
        snprintf(buf, cap, "a string (\"%.40s\")", j->valuestring);
    else if (cJSON_IsBool(j))
        snprintf(buf, cap, "a boolean (%s)", cJSON_IsTrue(j) ? "true" : "false");
    else if (cJSON_IsNumber(j))
        snprintf(buf, cap, "a number (%.17g)", j->valuedouble);
    else
        snprintf(buf, cap, "%s", util_json_type_name(j));
    return buf;
}

/* The member called key, compared case-sensitively; NULL when absent or null. */
static const cJSON *json_field(const cJSON *obj, const char *key)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNull(j) ? NULL : j;
}

/* The member called key (see json_field) in *out: NULL when absent or null, else a value that
 * is_type accepts, or an error "NAME: KEY: expected WANT, got ..." (*out is set either way). */
static tt_status json_typed(const cJSON *obj, const char *name, const char *key,
                            cJSON_bool (*is_type)(const cJSON *), const char *want,
                            const cJSON **out, tt_error *err)
{
    char db[96];
    const cJSON *j = *out = json_field(obj, key);
    if (j && !is_type(j))
        return tt_fail(err, TT_ERR_CONFIG, "%s: %s: expected %s, got %s", name, key, want,
                       json_describe(j, db, sizeof db));
    return TT_OK;
}

/* v is a whole number (for the message: the field is NAME: KEY). */
static tt_status json_check_integer(const char *name, const char *key, double v, tt_error *err)
{
    if (!isfinite(v) || v != floor(v))
        return tt_fail(err, TT_ERR_CONFIG, "%s: %s: %.17g is not an integer", name, key, v);
    return TT_OK;
}

/* An integer field within [lo, hi]. Absent (or null): *out = dflt, or an error when required. */
static tt_status json_int(const cJSON *obj, const char *name, const char *key, bool required,
                          int dflt, int lo, int hi, int *out, tt_error *err)
{
    const cJSON *j;
    tt_status st = json_typed(obj, name, key, cJSON_IsNumber, "an integer", &j, err);
    if (st != TT_OK)
        return st;
    if (!j) {
        if (required)
            return tt_fail(err, TT_ERR_CONFIG, "%s: missing %s", name, key);
        *out = dflt;
        return TT_OK;
    }
    double v = j->valuedouble;
    if ((st = json_check_integer(name, key, v, err)) != TT_OK)
        return st;
    if (v < (double)lo)
        return tt_fail(err, TT_ERR_CONFIG, "%s: %s: %.17g is below the minimum %d", name, key,
                       v, lo);
    if (v > (double)hi)
        return tt_fail(err, TT_ERR_CONFIG, "%s: %s: %.17g exceeds the limit %d", name, key, v,
                       hi);
    *out = (int)v;
    return TT_OK;
}

/* A finite number field (absent or null: *present = false). */
static tt_status json_num(const cJSON *obj, const char *name, const char *key, double *out,
                          bool *present, tt_error *err)
{
    const cJSON *j;
    tt_status st = json_typed(obj, name, key, cJSON_IsNumber, "a number", &j, err);
    *present = j != NULL;
    if (st != TT_OK || !j)
        return st;
    if (!isfinite(j->valuedouble))
        return tt_fail(err, TT_ERR_CONFIG, "%s: %s: %g is not finite", name, key, j->valuedouble);
    /* Every such field is held as a float: 1e300 would become infinity there. */
    if (fabs(j->valuedouble) > FLT_MAX)
        return tt_fail(err, TT_ERR_CONFIG, "%s: %s: %g is too large", name, key, j->valuedouble);
    *out = j->valuedouble;
    return TT_OK;
}

static tt_status json_bool(const cJSON *obj, const char *name, const char *key, bool *out,
                           bool *present, tt_error *err)
{
    const cJSON *j;
    tt_status st = json_typed(obj, name, key, cJSON_IsBool, "true or false", &j, err);
    *present = j != NULL;
    if (st == TT_OK && j)
        *out = cJSON_IsTrue(j);
    return st;
}

static tt_status json_str(const cJSON *obj, const char *name, const char *key, const char **out,
                          tt_error *err)
{
    const cJSON *j;
    tt_status st = json_typed(obj, name, key, cJSON_IsString, "a string", &j, err);
    *out = st == TT_OK && j ? j->valuestring : NULL;
    return st;
}

/* A token id field: an integer in [0, V), or an array whose first element is one (Hugging Face
 * allows several end tokens; the first is the one tokentop stops on). Absent/null/empty: -1. */
static tt_status json_token_id(const cJSON *obj, const char *name, const char *key, int V,
                               int *out, tt_error *err)
{
    const cJSON *j = json_field(obj, key);
    char db[96];
    *out = -1;
    if (!j)
        return TT_OK;
    if (cJSON_IsArray(j)) {
        if (!j->child)
            return TT_OK;
        j = j->child;
    }
    if (!cJSON_IsNumber(j))
        return tt_fail(err, TT_ERR_CONFIG, "%s: %s: expected a token id (integer), got %s", name,
                       key, json_describe(j, db, sizeof db));
    double v = j->valuedouble;
    tt_status st = json_check_integer(name, key, v, err);
    if (st != TT_OK)
        return st;
    if (v < 0 || (V > 0 && v >= V))
        return tt_fail(err, TT_ERR_CONFIG, "%s: %s: token id %.17g is outside the vocabulary "
                       "[0, %d)", name, key, v, V);
    if (v > 2147483647.0)
        return tt_fail(err, TT_ERR_CONFIG, "%s: %s: token id %.17g is too large", name, key, v);
    *out = (int)v;
    return TT_OK;
}

/* Parses text that must be one JSON object (trailing whitespace allowed). */
static tt_status json_parse_object(const char *json, size_t len, const char *name, cJSON **out,
                                   tt_error *err)
{
    const char *end = NULL;
    *out = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root) {
        size_t at = end && end >= json && end <= json + len ? (size_t)(end - json) : 0;
        size_t line = 1;
        for (size_t i = 0; i < at; i++)
            line += json[i] == '\n';
        return tt_fail(err, TT_ERR_FORMAT, "%s: not valid JSON (error at line %zu, byte %zu)",
                       name, line, at);
    }
    for (const char *p = end; p < json + len; p++)
        if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t' && *p != '\0') {
            cJSON_Delete(root);
            return tt_fail(err, TT_ERR_FORMAT, "%s: data after the JSON value (byte %zu)", name,
                           (size_t)(p - json));
        }
    if (!cJSON_IsObject(root)) {
        const char *t = util_json_type_name(root);
        cJSON_Delete(root);
        return tt_fail(err, TT_ERR_FORMAT, "%s: expected a JSON object, got %s", name, t);
    }
    *out = root;
    return TT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * config.json */

uint64_t gpt2_config_n_params(const gpt2_config *c, bool lm_head_tied)
{
    uint64_t V = (uint64_t)c->V, C = (uint64_t)c->C, FF = (uint64_t)c->FF;
    uint64_t layer = 2 * C                 /* ln_1 */
                   + C * 3 * C + 3 * C     /* c_attn */
                   + C * C + C             /* attn.c_proj */
                   + 2 * C                 /* ln_2 */
                   + C * FF + FF           /* c_fc */
                   + FF * C + C;           /* mlp.c_proj */
    uint64_t n = V * C + (uint64_t)c->maxT * C + (uint64_t)c->L * layer + 2 * C;
    return lm_head_tied ? n : n + V * C;
}

static bool is_non_negative(double x) { return x >= 0; }
static bool is_probability(double x) { return x >= 0 && x <= 1; }
static bool is_positive(double x) { return x > 0; }
static bool is_in_open_unit(double x) { return x > 0 && x < 1; }

/* An optional setting held as a float: absent (or null) leaves *has false; present, it must be
 * valid, else "NAME: KEY: X is NOT_WHAT", and not round to a float 0 that is not valid ("is too
 * small": 1e-300 for a positive setting). */
static tt_status json_setting(const cJSON *obj, const char *name, const char *key,
                              bool (*valid)(double), const char *not_what, float *out, bool *has,
                              tt_error *err)
{
    double x = 0;
    tt_status s = json_num(obj, name, key, &x, has, err);
    if (s != TT_OK || !*has)
        return s;
    if (!valid(x))
        return tt_fail(err, TT_ERR_CONFIG, "%s: %s: %g is %s", name, key, x, not_what);
    if ((float)x == 0 && !valid(0))
        return tt_fail(err, TT_ERR_CONFIG, "%s: %s: %g is too small", name, key, x);
    *out = (float)x;
    return TT_OK;
}

static tt_status config_from_json(const cJSON *root, const char *name, gpt2_config *c,
                                  tt_error *err)
{
    tt_status s;
    const char *str;

    /* Refuse other architectures by name before complaining about their field names. */
    if ((s = json_str(root, name, "model_type", &str, err)) != TT_OK)
        return s;
    if (str && strcmp(str, "gpt2") != 0)
        return tt_fail(err, TT_ERR_UNSUPPORTED, "%s: model_type: '%.40s' is not a GPT-2 model",
                       name, str);

    if ((s = json_int(root, name, "vocab_size", true, 0, 1, LIMIT_V, &c->V, err)) != TT_OK ||
        (s = json_int(root, name, "n_embd", true, 0, 1, LIMIT_C, &c->C, err)) != TT_OK ||
        (s = json_int(root, name, "n_head", true, 0, 1, LIMIT_NH, &c->NH, err)) != TT_OK ||
        (s = json_int(root, name, "n_layer", true, 0, 1, LIMIT_L, &c->L, err)) != TT_OK)
        return s;
    if (json_field(root, "n_positions"))
        s = json_int(root, name, "n_positions", true, 0, 1, LIMIT_MAXT, &c->maxT, err);
    else if (json_field(root, "n_ctx"))
        s = json_int(root, name, "n_ctx", true, 0, 1, LIMIT_MAXT, &c->maxT, err);
    else
        s = tt_fail(err, TT_ERR_CONFIG, "%s: missing n_positions (and no n_ctx)", name);
    if (s != TT_OK)
        return s;
    if ((s = json_int(root, name, "n_inner", false, 4 * c->C, 1, LIMIT_FF, &c->FF, err)) != TT_OK)
        return s;
    if (c->C % c->NH != 0)
        return tt_fail(err, TT_ERR_CONFIG, "%s: n_embd %d is not a multiple of n_head %d", name,
                       c->C, c->NH);

    /* A float 0 (from 1e-50, say) would be a division by zero in LayerNorm: "too small". */
    bool present;
    c->ln_eps = 1e-5f;
    if ((s = json_setting(root, name, "layer_norm_epsilon", is_in_open_unit, "not in (0, 1)",
                          &c->ln_eps, &present, err)) != TT_OK)
        return s;

    if ((s = json_str(root, name, "activation_function", &str, err)) != TT_OK)
        return s;
    if (!str || strcmp(str, "gelu_new") == 0 || strcmp(str, "gelu_pytorch_tanh") == 0 ||
        strcmp(str, "gelu_fast") == 0)
        c->act = GPT2_GELU_TANH;
    else if (strcmp(str, "gelu") == 0)
        c->act = GPT2_GELU_ERF;
    else
        return tt_fail(err, TT_ERR_UNSUPPORTED,
                       "%s: activation_function: '%.40s' is not supported (gelu_new, "
                       "gelu_pytorch_tanh, gelu_fast or gelu)", name, str);

    bool b = true;
    if ((s = json_bool(root, name, "scale_attn_weights", &b, &present, err)) != TT_OK)
        return s;
    if (present && !b)
        return tt_fail(err, TT_ERR_UNSUPPORTED,
                       "%s: scale_attn_weights: false is not supported (attention is always "
                       "scaled by 1/sqrt(head size))", name);
    b = false;
    if ((s = json_bool(root, name, "scale_attn_by_inverse_layer_idx", &b, &present, err)) != TT_OK)
        return s;
    if (present && b)
        return tt_fail(err, TT_ERR_UNSUPPORTED,
                       "%s: scale_attn_by_inverse_layer_idx: true is not supported", name);

    c->tie_word_embeddings = true;
    if ((s = json_bool(root, name, "tie_word_embeddings", &c->tie_word_embeddings, &present,
                       err)) != TT_OK)
        return s;

    if ((s = json_token_id(root, name, "bos_token_id", c->V, &c->bos_id, err)) != TT_OK)
        return s;
    if ((s = json_token_id(root, name, "eos_token_id", c->V, &c->eos_id, err)) != TT_OK)
        return s;

    uint64_t np = gpt2_config_n_params(c, false);
    if (np > LIMIT_PARAMS)
        return tt_fail(err, TT_ERR_CONFIG,
                       "%s: %llu parameters (with an untied lm_head) exceed the limit of %llu",
                       name, (unsigned long long)np, LIMIT_PARAMS);
    return TT_OK;
}

tt_status gpt2_config_parse(const char *json, size_t len, const char *name, gpt2_config *out,
                            tt_error *err)
{
    cJSON *root;
    tt_status s = json_parse_object(json, len, name, &root, err);
    if (s != TT_OK)
        return s;
    gpt2_config c = {0};
    s = config_from_json(root, name, &c, err);
    cJSON_Delete(root);
    if (s == TT_OK)
        *out = c;
    return s;
}

/* ---------------------------------------------------------------------------------------------
 * generation_config.json */

tt_status gpt2_generation_parse(const char *json, size_t len, const char *name, int V,
                                gpt2_generation_defaults *out, tt_error *err)
{
    cJSON *root;
    gpt2_generation_defaults g = {.eos_id = -1};
    tt_status s = json_parse_object(json, len, name, &root, err);
    if (s != TT_OK)
        return s;
    bool present;
    if ((s = json_setting(root, name, "temperature", is_non_negative, "negative",
                          &g.temperature, &g.has_temperature, err)) != TT_OK)
        goto out;
    if ((s = json_setting(root, name, "top_p", is_probability, "not in [0, 1]", &g.top_p,
                          &g.has_top_p, err)) != TT_OK)
        goto out;
    if ((s = json_setting(root, name, "repetition_penalty", is_positive, "not positive",
                          &g.repetition_penalty, &g.has_rep_penalty, err)) != TT_OK)
        goto out;
    g.has_top_k = json_field(root, "top_k") != NULL;
    if ((s = json_int(root, name, "top_k", false, 0, 0, INT_MAX, &g.top_k, err)) != TT_OK)
        goto out;
    g.has_max_new_tokens = json_field(root, "max_new_tokens") != NULL;
    if ((s = json_int(root, name, "max_new_tokens", false, 0, 0, INT_MAX, &g.max_new_tokens,
                      err)) != TT_OK)
        goto out;
    bool b = false;
    if ((s = json_bool(root, name, "do_sample", &b, &present, err)) != TT_OK)
        goto out;
    g.has_do_sample = present;
    g.do_sample = b;
    s = json_token_id(root, name, "eos_token_id", V, &g.eos_id, err);
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
    const char *path;            /* of model.safetensors, for messages */
    tt_error *err;
} binder;

static tt_dtype st_to_tt(st_dtype d)
{
    return d == ST_F32 ? TT_F32 : d == ST_F16 ? TT_F16 : TT_BF16;
}

/* Looks up name (and "transformer." + name unless bare), checks dtype and shape [d0] or [d0,d1]. */
static tt_status bind(binder *b, const char *name, bool bare, bool optional, int ndim,
                      uint64_t d0, uint64_t d1, tensor_ref *out)
{
    char pref[320];
    snprintf(pref, sizeof pref, "transformer.%s", name);
    const st_tensor *t = safetensors_find(b->m->file, name);
    const st_tensor *tp = bare ? NULL : safetensors_find(b->m->file, pref);
    if (t && tp)
        return tt_fail(b->err, TT_ERR_FORMAT,
                       "%s: tensor %s is present both with and without the 'transformer.' "
                       "prefix; which one to use is ambiguous", b->path, name);
    if (!t)
        t = tp;
    if (!t) {
        if (optional)
            return TT_OK;
        return tt_fail(b->err, TT_ERR_FORMAT, "%s: missing tensor %s%s", b->path, name,
                       bare ? "" : " (looked for it with and without the 'transformer.' prefix)");
    }
    if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16)
        return tt_fail(b->err, TT_ERR_UNSUPPORTED,
                       "%s: tensor %s: dtype %s is not a weight type (F32, F16 or BF16)", b->path,
                       t->name, st_dtype_name(t->dtype));
    uint64_t want[2] = {d0, d1};
    bool ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = t->shape[i] == want[i];
    if (!ok) {
        char ws[64], gs[256];
        if (ndim == 1)
            snprintf(ws, sizeof ws, "[%llu]", (unsigned long long)d0);
        else
            snprintf(ws, sizeof ws, "[%llu,%llu]", (unsigned long long)d0, (unsigned long long)d1);
        size_t k = (size_t)snprintf(gs, sizeof gs, "[");
        for (int i = 0; i < t->ndim && k < sizeof gs; i++)
            k += (size_t)snprintf(gs + k, sizeof gs - k, "%s%llu", i ? "," : "",
                                  (unsigned long long)t->shape[i]);
        if (k < sizeof gs)
            snprintf(gs + k, sizeof gs - k, "]");
        return tt_fail(b->err, TT_ERR_FORMAT, "%s: tensor %s: expected %s, got %s", b->path,
                       t->name, ws, gs);
    }
    out->data = t->data;
    out->dtype = st_to_tt(t->dtype);
    return TT_OK;
}

static tt_status bind_all(binder *b)
{
    model *m = b->m;
    const gpt2_config *c = &m->config;
    uint64_t V = (uint64_t)c->V, C = (uint64_t)c->C, FF = (uint64_t)c->FF;
    gpt2_tensors *w = &m->tensors;
    tt_status s;
#define BIND1(name, n0, dst) \
    if ((s = bind(b, name, false, false, 1, n0, 0, dst)) != TT_OK) return s
#define BIND2(name, n0, n1, dst) \
    if ((s = bind(b, name, false, false, 2, n0, n1, dst)) != TT_OK) return s

    BIND2("wte.weight", V, C, &w->wte);
    BIND2("wpe.weight", (uint64_t)c->maxT, C, &w->wpe);
    for (int l = 0; l < c->L; l++) {
        gpt2_layer_tensors *h = &w->h[l];
        char nm[128];
#define LNAME(suffix) (snprintf(nm, sizeof nm, "h.%d.%s", l, suffix), nm)
        BIND1(LNAME("ln_1.weight"), C, &h->ln_1_w);
        BIND1(LNAME("ln_1.bias"), C, &h->ln_1_b);
        BIND2(LNAME("attn.c_attn.weight"), C, 3 * C, &h->attn_w);
        BIND1(LNAME("attn.c_attn.bias"), 3 * C, &h->attn_b);
        BIND2(LNAME("attn.c_proj.weight"), C, C, &h->attn_proj_w);
        BIND1(LNAME("attn.c_proj.bias"), C, &h->attn_proj_b);
        BIND1(LNAME("ln_2.weight"), C, &h->ln_2_w);
        BIND1(LNAME("ln_2.bias"), C, &h->ln_2_b);
        BIND2(LNAME("mlp.c_fc.weight"), C, FF, &h->fc_w);
        BIND1(LNAME("mlp.c_fc.bias"), FF, &h->fc_b);
        BIND2(LNAME("mlp.c_proj.weight"), FF, C, &h->fc_proj_w);
        BIND1(LNAME("mlp.c_proj.bias"), C, &h->fc_proj_b);
#undef LNAME
    }
    BIND1("ln_f.weight", C, &w->ln_f_w);
    BIND1("ln_f.bias", C, &w->ln_f_b);
#undef BIND1
#undef BIND2
    /* Hugging Face never prefixes lm_head (it belongs to GPT2LMHeadModel, not GPT2Model). With
     * tied embeddings transformers points lm_head at wte after loading, whatever the file holds;
     * a stray lm_head.weight is still checked, then unused, so both programs compute the same. */
    bool tied = c->tie_word_embeddings;
    if (!tied && !safetensors_find(m->file, "lm_head.weight"))
        return tt_fail(b->err, TT_ERR_FORMAT, "%s: missing tensor lm_head.weight (config.json sets "
                       "tie_word_embeddings to false)", b->path);
    if ((s = bind(b, "lm_head.weight", true, true, 2, V, C, &w->lm_head)) != TT_OK)
        return s;
    w->lm_head_tied = tied;
    if (tied)
        w->lm_head = w->wte;
    return TT_OK;
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

static tt_status load_weights(model *m, binder *b, const char *dir, tt_error *err)
{
    char *path = util_path_join(dir, "model.safetensors");
    if (!path)
        return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    tt_status s;
    struct stat st;
    if (stat(path, &st) != 0 && errno == ENOENT) {
        char pk[256];
        if (file_exists(dir, "model.safetensors.index.json"))
            s = tt_fail(err, TT_ERR_UNSUPPORTED,
                        "%s: the weights are sharded (model.safetensors.index.json); tokentop reads "
                        "one model.safetensors file. Re-save with a larger max_shard_size, e.g. "
                        "save_pretrained(\"%s\", max_shard_size=\"100GB\")", dir, dir);
        else if (find_pickle(dir, pk, sizeof pk))
            s = tt_fail(err, TT_ERR_UNSUPPORTED,
                        "%s: only %s found; tokentop reads model.safetensors only, because pickle "
                        "checkpoints execute code when loaded. Convert with: python3 -c 'from "
                        "transformers import GPT2LMHeadModel as M; M.from_pretrained(\"%s\")"
                        ".save_pretrained(\"%s\", safe_serialization=True)'", dir, pk, dir, dir);
        else
            s = tt_fail(err, TT_ERR_IO, "%s: missing model.safetensors (the weights of a Hugging "
                        "Face model directory)", dir);
        free(path);
        return s;
    }
    s = safetensors_open(path, &m->file, err);
    if (s == TT_OK) {
        b->path = path;
        s = bind_all(b);
        b->path = NULL;
    }
    free(path);
    return s;
}

tt_status model_load(const char *dir, model **out, tt_error *err)
{
    *out = NULL;
    struct stat st;
    if (stat(dir, &st) != 0)
        return tt_fail(err, TT_ERR_IO, "%s: cannot open model directory: %s", dir,
                       strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return tt_fail(err, TT_ERR_IO, "%s: not a directory (a model is a Hugging Face directory "
                       "with config.json and model.safetensors)", dir);

    model *m = calloc(1, sizeof *m);
    if (!m)
        return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    m->dir = strdup(dir);
    m->name = base_name(dir);
    m->gen.eos_id = -1;
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
    if ((s = gpt2_config_parse(text, len, path, &m->config, err)) != TT_OK)
        goto fail;
    free(text);
    text = NULL;
    free(path);
    path = NULL;

    m->tensors.h = calloc((size_t)m->config.L, sizeof *m->tensors.h);
    if (!m->tensors.h) {
        s = tt_fail(err, TT_ERR_NOMEM, "out of memory for %d layers", m->config.L);
        goto fail;
    }
    binder b = {.m = m, .err = err};
    if ((s = load_weights(m, &b, dir, err)) != TT_OK)
        goto fail;
    m->file_dtype = m->tensors.wte.dtype;
    m->n_params = (size_t)gpt2_config_n_params(&m->config, m->tensors.lm_head_tied);

    if (!(path = util_path_join(dir, "generation_config.json"))) {
        s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
        goto fail;
    }
    tt_error gerr = {0};
    s = util_read_file(path, JSON_FILE_MAX, &text, &len, &missing, &gerr);
    if (s == TT_OK)
        s = gpt2_generation_parse(text, len, path, m->config.V, &m->gen, &gerr);
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
    safetensors_close(m->file);
    free(m->tensors.h);
    free(m->dir);
    free(m->name);
    free(m);
}

/* ---------------------------------------------------------------------------------------------
 * Reading weights */

void tensor_ref_to_f32(tensor_ref t, size_t offset, size_t n, float *dst)
{
    const unsigned char *p = t.data;
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
    const gpt2_config *c = &m->config;
    uint64_t C = (uint64_t)c->C;
    /* Every parameter except the embedding tables, read once per step... */
    uint64_t n = gpt2_config_n_params(c, true) - (uint64_t)c->V * C - (uint64_t)c->maxT * C;
    /* ... plus the lm_head (tied or not) and the token's rows of wte and wpe. */
    n += (uint64_t)c->V * C + 2 * C;
    return (size_t)(n * tt_dtype_size(d));
}
