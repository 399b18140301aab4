/* ollama.c: names -> manifests -> blobs in Ollama's store; the params layer's options.
 *
 * Layout of a store (Ollama's server/images.go and types/model/name.go):
 *   manifests/registry.ollama.ai/library/llama3.2/1b   {"schemaVersion": 2, "config": {...},
 *       "layers": [{"mediaType": "application/vnd.ollama.image.model",
 *                   "digest": "sha256:<64 hex>", "size": 1321082688}, ...]}
 *   blobs/sha256-<64 hex>                              each layer's bytes
 * Everything read from a manifest is untrusted: a digest is used as a file name only after it
 * has been checked to be "sha256:" and 64 hex digits, so it cannot leave blobs/. */
#include "core/model/ollama.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/base/util.h"

#define OLLAMA_HOST "registry.ollama.ai"
#define OLLAMA_NAMESPACE "library"
#define OLLAMA_TAG "latest"
#define OLLAMA_MANIFEST_MAX (1u << 20)
#define OLLAMA_TEXT_MAX (1u << 20)
#define OLLAMA_PART_MAX 255

/* ---------------------------------------------------------------------------------------------
 * Names */

typedef struct {
    char host[OLLAMA_PART_MAX + 1], ns[OLLAMA_PART_MAX + 1], model[OLLAMA_PART_MAX + 1],
         tag[OLLAMA_PART_MAX + 1];
} ref_parts;

/* One part: 1..255 of [A-Za-z0-9._-] (and ':' for a host's port), not "." or "..". */
static bool part_ok(const char *s, size_t n, bool host)
{
    if (n == 0 || n > OLLAMA_PART_MAX)
        return false;
    if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-' || (host && c == ':');
        if (!ok)
            return false;
    }
    return true;
}

static bool parse_ref(const char *ref, ref_parts *p)
{
    const char *slash = strrchr(ref, '/');
    const char *last = slash ? slash + 1 : ref;
    const char *colon = strchr(last, ':');
    size_t model_len = colon ? (size_t)(colon - last) : strlen(last);
    if (!part_ok(last, model_len, false))
        return false;
    memcpy(p->model, last, model_len);
    p->model[model_len] = 0;
    if (colon) {
        if (!part_ok(colon + 1, strlen(colon + 1), false))
            return false;
        strcpy(p->tag, colon + 1);
    } else {
        strcpy(p->tag, OLLAMA_TAG);
    }
    strcpy(p->host, OLLAMA_HOST);
    strcpy(p->ns, OLLAMA_NAMESPACE);
    if (!slash)
        return true;
    /* ref[0 .. slash) is NS or HOST/NS */
    const char *first = strchr(ref, '/');
    if (first == slash) {
        size_t n = (size_t)(slash - ref);
        if (!part_ok(ref, n, false))
            return false;
        memcpy(p->ns, ref, n);
        p->ns[n] = 0;
        return true;
    }
    size_t hn = (size_t)(first - ref), nn = (size_t)(slash - first - 1);
    if (!part_ok(ref, hn, true) || !part_ok(first + 1, nn, false) ||
        memchr(first + 1, '/', nn))
        return false;
    memcpy(p->host, ref, hn);
    p->host[hn] = 0;
    memcpy(p->ns, first + 1, nn);
    p->ns[nn] = 0;
    return true;
}

bool ollama_is_name(const char *s)
{
    ref_parts p;
    return s && parse_ref(s, &p);
}

/* The short form Ollama prints: host and namespace left out when they are the defaults. */
static char *short_name(const ref_parts *p)
{
    char buf[4 * (OLLAMA_PART_MAX + 1) + 8];
    if (strcmp(p->host, OLLAMA_HOST) != 0)
        snprintf(buf, sizeof buf, "%s/%s/%s:%s", p->host, p->ns, p->model, p->tag);
    else if (strcmp(p->ns, OLLAMA_NAMESPACE) != 0)
        snprintf(buf, sizeof buf, "%s/%s:%s", p->ns, p->model, p->tag);
    else
        snprintf(buf, sizeof buf, "%s:%s", p->model, p->tag);
    return strdup(buf);
}

static char *manifest_path(const char *store, const ref_parts *p)
{
    size_t n = strlen(store) + strlen(p->host) + strlen(p->ns) + strlen(p->model) +
               strlen(p->tag) + 32;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s/manifests/%s/%s/%s/%s", store, p->host, p->ns, p->model, p->tag);
    return s;
}

/* ---------------------------------------------------------------------------------------------
 * Stores */

size_t ollama_default_stores(char **stores, size_t max)
{
    size_t n = 0;
    const char *env = getenv("OLLAMA_MODELS");
    const char *home = getenv("HOME");
    if (env && *env && n < max && (stores[n] = strdup(env)))
        n++;
    if (home && *home && n < max && (stores[n] = util_path_join(home, ".ollama/models")))
        n++;
    if (n < max && (stores[n] = strdup("/usr/share/ollama/.ollama/models")))
        n++;
    return n;
}

void ollama_stores_free(char **stores, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(stores[i]);
}

/* ---------------------------------------------------------------------------------------------
 * Manifests */

typedef struct {
    const char *media;
    char hex[65];
    uint64_t size;
} layer;

static bool digest_hex(const char *d, char hex[65])
{
    if (strncmp(d, "sha256:", 7) != 0 || strlen(d) != 7 + 64)
        return false;
    for (int i = 0; i < 64; i++) {
        char c = d[7 + i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
        hex[i] = c;
    }
    hex[64] = 0;
    return true;
}

/* Checks layer i of the manifest; fills *l. */
static tt_status parse_layer(const cJSON *j, int i, const char *mpath, layer *l, tt_error *err)
{
    if (!cJSON_IsObject(j))
        return tt_fail(err, TT_ERR_FORMAT, "%s: layers[%d]: expected an object, got %s", mpath,
                       i, util_json_type_name(j));
    const cJSON *media = cJSON_GetObjectItemCaseSensitive(j, "mediaType");
    const cJSON *digest = cJSON_GetObjectItemCaseSensitive(j, "digest");
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(j, "size");
    if (!cJSON_IsString(media))
        return tt_fail(err, TT_ERR_FORMAT, "%s: layers[%d].mediaType: expected a string, got %s",
                       mpath, i, media ? util_json_type_name(media) : "nothing");
    if (!cJSON_IsString(digest) || !digest_hex(digest->valuestring, l->hex))
        return tt_fail(err, TT_ERR_FORMAT,
                       "%s: layers[%d].digest: expected \"sha256:\" and 64 lowercase hex digits, "
                       "got %.80s", mpath, i,
                       cJSON_IsString(digest) ? digest->valuestring
                                              : digest ? util_json_type_name(digest) : "nothing");
    if (!cJSON_IsNumber(size) || !isfinite(size->valuedouble) || size->valuedouble < 0 ||
        size->valuedouble != floor(size->valuedouble) || size->valuedouble > 9007199254740992.0)
        return tt_fail(err, TT_ERR_FORMAT,
                       "%s: layers[%d].size: expected a non-negative integer, got %s", mpath, i,
                       size ? util_json_type_name(size) : "nothing");
    l->media = media->valuestring;
    l->size = (uint64_t)size->valuedouble;
    return TT_OK;
}

static char *blob_path(const char *store, const layer *l)
{
    char rel[128];
    snprintf(rel, sizeof rel, "blobs/sha256-%s", l->hex);
    return util_path_join(store, rel);
}

/* The blob of l exists as a regular file of the manifest's size; what = "model", "params"... */
static tt_status check_blob(const char *name, const char *path, const layer *l, const char *what,
                            tt_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return tt_fail(err, TT_ERR_FORMAT, "%s: the %s layer's blob %s is missing: %s", name, what,
                       path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return tt_fail(err, TT_ERR_FORMAT, "%s: the %s layer's blob %s is not a regular file",
                       name, what, path);
    if ((uint64_t)st.st_size != l->size)
        return tt_fail(err, TT_ERR_FORMAT,
                       "%s: the %s layer's blob %s is %llu bytes, the manifest says %llu", name,
                       what, path, (unsigned long long)st.st_size, (unsigned long long)l->size);
    return TT_OK;
}

static tt_status read_text_layer(const char *name, const char *store, const layer *l,
                                 const char *what, char **out, tt_error *err)
{
    char *path = blob_path(store, l);
    if (!path)
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", name);
    tt_status s = check_blob(name, path, l, what, err);
    size_t len;
    if (s == TT_OK && l->size > OLLAMA_TEXT_MAX)
        s = tt_fail(err, TT_ERR_FORMAT, "%s: the %s layer's blob %s is %llu bytes (at most %u)",
                    name, what, path, (unsigned long long)l->size, OLLAMA_TEXT_MAX);
    if (s == TT_OK)
        s = util_read_file(path, OLLAMA_TEXT_MAX, out, &len, NULL, err);
    free(path);
    return s;
}

static tt_status load_manifest(const char *name, const char *store, const char *mpath,
                               ollama_model *out, tt_error *err)
{
    char *text = NULL;
    size_t len = 0;
    tt_status s = util_read_file(mpath, OLLAMA_MANIFEST_MAX, &text, &len, NULL, err);
    if (s != TT_OK)
        return s;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return tt_fail(err, TT_ERR_FORMAT, "%s: not a JSON object", mpath);
    }
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(root, "layers");
    if (!cJSON_IsArray(layers)) {
        s = tt_fail(err, TT_ERR_FORMAT, "%s: layers: expected an array, got %s", mpath,
                    layers ? util_json_type_name(layers) : "nothing");
        cJSON_Delete(root);
        return s;
    }
    layer model = {0}, params = {0}, tmpl = {0}, sys = {0};
    bool have_model = false, have_params = false, have_tmpl = false, have_sys = false;
    int i = 0;
    const cJSON *j;
    cJSON_ArrayForEach(j, layers) {
        layer l;
        if ((s = parse_layer(j, i, mpath, &l, err)) != TT_OK)
            break;
        struct { const char *media; layer *slot; bool *have; } kinds[] = {
            {OLLAMA_MEDIA_MODEL, &model, &have_model},
            {OLLAMA_MEDIA_PARAMS, &params, &have_params},
            {OLLAMA_MEDIA_TEMPLATE, &tmpl, &have_tmpl},
            {OLLAMA_MEDIA_SYSTEM, &sys, &have_sys},
        };
        bool used = false;
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            if (strcmp(l.media, kinds[k].media) != 0)
                continue;
            if (*kinds[k].have) {
                s = tt_fail(err, TT_ERR_FORMAT, "%s: layers[%d]: a second layer of media type %s",
                            mpath, i, l.media);
                break;
            }
            *kinds[k].slot = l;
            *kinds[k].have = true;
            used = true;
        }
        if (s != TT_OK)
            break;
        if (!used)
            out->n_unused_layers++;
        i++;
    }
    if (s == TT_OK && !have_model)
        s = tt_fail(err, TT_ERR_FORMAT, "%s: layers: no layer of media type %s", mpath,
                    OLLAMA_MEDIA_MODEL);
    if (s == TT_OK) {
        out->model_path = blob_path(store, &model);
        out->model_size = model.size;
        s = out->model_path ? check_blob(name, out->model_path, &model, "model", err)
                            : tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", name);
    }
    if (s == TT_OK && have_params)
        s = read_text_layer(name, store, &params, "params", &out->params, err);
    if (s == TT_OK && have_tmpl)
        s = read_text_layer(name, store, &tmpl, "template", &out->template_text, err);
    if (s == TT_OK && have_sys)
        s = read_text_layer(name, store, &sys, "system", &out->system, err);
    cJSON_Delete(root);
    return s;
}

tt_status ollama_resolve(const char *ref, const char *const *stores, size_t n, ollama_model *out,
                         tt_error *err)
{
    memset(out, 0, sizeof *out);
    ref_parts p;
    if (!parse_ref(ref, &p))
        return tt_fail(err, TT_ERR_ARG,
                       "%.200s: not a model name ([HOST/][NAMESPACE/]NAME[:TAG], each part of "
                       "letters, digits, '.', '_' or '-')", ref);
    char looked[TT_ERROR_MAX] = "";
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char *mpath = manifest_path(stores[i], &p);
        if (!mpath)
            return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", ref);
        struct stat st;
        if (stat(mpath, &st) != 0 || !S_ISREG(st.st_mode)) {
            if (k < sizeof looked)
                k += (size_t)snprintf(looked + k, sizeof looked - k, "%s%s", i ? ", " : "", mpath);
            free(mpath);
            continue;
        }
        out->name = short_name(&p);
        out->store = strdup(stores[i]);
        out->manifest_path = mpath;
        tt_status s = out->name && out->store
                          ? load_manifest(out->name, stores[i], mpath, out, err)
                          : tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", ref);
        if (s != TT_OK)
            ollama_model_free(out);
        return s;
    }
    char *name = short_name(&p);
    tt_status s = tt_fail(err, TT_ERR_IO, "%s: not in the Ollama store (looked for %s)",
                          name ? name : ref, n ? looked : "no store: set OLLAMA_MODELS");
    free(name);
    return s;
}

tt_status ollama_resolve_default(const char *ref, ollama_model *out, tt_error *err)
{
    char *stores[3];
    size_t n = ollama_default_stores(stores, 3);
    tt_status s = ollama_resolve(ref, (const char *const *)stores, n, out, err);
    ollama_stores_free(stores, n);
    return s;
}

void ollama_model_free(ollama_model *m)
{
    free(m->name);
    free(m->store);
    free(m->manifest_path);
    free(m->model_path);
    free(m->params);
    free(m->template_text);
    free(m->system);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------------------------------------
 * Listing */

typedef struct {
    char **names;
    size_t n, cap;
} name_list;

/* Subdirectories (or, at the last level, regular files) of dir whose names are valid parts. */
static size_t list_dir(const char *dir, bool files, bool host, char ***out)
{
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!part_ok(e->d_name, strlen(e->d_name), host))
            continue;
        char *path = util_path_join(dir, e->d_name);
        struct stat st;
        bool ok = path && stat(path, &st) == 0 && (files ? S_ISREG(st.st_mode)
                                                         : S_ISDIR(st.st_mode));
        free(path);
        if (!ok || !UTIL_RESERVE(*out, &cap, n + 1, 16))
            continue;
        if (((*out)[n] = strdup(e->d_name)) != NULL)
            n++;
    }
    closedir(d);
    return n;
}

static void add_name(name_list *l, const ref_parts *p)
{
    char *s = short_name(p);
    if (!s)
        return;
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->names[i], s) == 0) {
            free(s);
            return;
        }
    if (!UTIL_RESERVE(l->names, &l->cap, l->n + 1, 16)) {
        free(s);
        return;
    }
    l->names[l->n++] = s;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

size_t ollama_list(const char *const *stores, size_t n, char ***names)
{
    name_list l = {0};
    for (size_t i = 0; i < n; i++) {
        char *root = util_path_join(stores[i], "manifests");
        char **hosts;
        size_t nh = root ? list_dir(root, false, true, &hosts) : 0;
        for (size_t h = 0; h < nh; h++) {
            char *hdir = util_path_join(root, hosts[h]);
            char **nss;
            size_t nn = hdir ? list_dir(hdir, false, false, &nss) : 0;
            for (size_t s = 0; s < nn; s++) {
                char *ndir = util_path_join(hdir, nss[s]);
                char **models;
                size_t nm = ndir ? list_dir(ndir, false, false, &models) : 0;
                for (size_t m = 0; m < nm; m++) {
                    char *mdir = util_path_join(ndir, models[m]);
                    char **tags;
                    size_t nt = mdir ? list_dir(mdir, true, false, &tags) : 0;
                    for (size_t t = 0; t < nt; t++) {
                        ref_parts p;
                        snprintf(p.host, sizeof p.host, "%s", hosts[h]);
                        snprintf(p.ns, sizeof p.ns, "%s", nss[s]);
                        snprintf(p.model, sizeof p.model, "%s", models[m]);
                        snprintf(p.tag, sizeof p.tag, "%s", tags[t]);
                        add_name(&l, &p);
                    }
                    ollama_names_free(tags, nt);
                    free(mdir);
                }
                ollama_names_free(models, nm);
                free(ndir);
            }
            ollama_names_free(nss, nn);
            free(hdir);
        }
        ollama_names_free(hosts, nh);
        free(root);
    }
    if (l.n)
        qsort(l.names, l.n, sizeof *l.names, cmp_str);
    *names = l.names;
    return l.n;
}

void ollama_names_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* ---------------------------------------------------------------------------------------------
 * The params layer */

void ollama_params_free(ollama_params *p)
{
    for (int i = 0; i < p->n_stop; i++)
        free(p->stop[i]);
    free(p->stop);
    memset(p, 0, sizeof *p);
}

static tt_status get_number(const cJSON *root, const char *key, const char *name, double lo,
                            double hi, bool integer, bool *has, double *out, tt_error *err)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!j || cJSON_IsNull(j))
        return TT_OK;
    if (!cJSON_IsNumber(j))
        return tt_fail(err, TT_ERR_FORMAT, "%s: %s: expected a number, got %s", name, key,
                       util_json_type_name(j));
    double v = j->valuedouble;
    if (!isfinite(v) || v < lo || v > hi || (integer && v != floor(v)))
        return tt_fail(err, TT_ERR_FORMAT, "%s: %s: %g is not %s in [%g, %g]", name, key, v,
                       integer ? "an integer" : "a number", lo, hi);
    *has = true;
    *out = v;
    return TT_OK;
}

static tt_status add_stop(ollama_params *p, const cJSON *s, const char *name, int i,
                          tt_error *err)
{
    if (!cJSON_IsString(s))
        return tt_fail(err, TT_ERR_FORMAT, "%s: stop[%d]: expected a string, got %s", name, i,
                       util_json_type_name(s));
    if (!s->valuestring[0])
        return tt_fail(err, TT_ERR_FORMAT, "%s: stop[%d]: an empty stop string", name, i);
    char **grown = realloc(p->stop, (size_t)(p->n_stop + 1) * sizeof *grown);
    if (!grown)
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", name);
    p->stop = grown;
    if (!(p->stop[p->n_stop] = strdup(s->valuestring)))
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", name);
    p->n_stop++;
    return TT_OK;
}

tt_status ollama_params_parse(const char *json, size_t len, const char *name, ollama_params *out,
                              tt_error *err)
{
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return tt_fail(err, TT_ERR_FORMAT, "%s: not a JSON object", name);
    }
    double v;
    tt_status s = TT_OK;
#define NUM(key, lo, hi, integer, field, cast)                                                  \
    if (s == TT_OK && (s = get_number(root, #key, name, lo, hi, integer, &out->has_##key, &v,    \
                                      err)) == TT_OK && out->has_##key)                          \
        out->field = (cast)v;
    NUM(temperature, 0, 1e6, false, temperature, float)
    NUM(top_k, 0, 1e9, true, top_k, int)
    NUM(top_p, 0, 1, false, top_p, float)
    NUM(min_p, 0, 1, false, min_p, float)
    NUM(repeat_penalty, 0, 1e6, false, repeat_penalty, float)
    NUM(repeat_last_n, -1, 1e9, true, repeat_last_n, int)
    NUM(num_ctx, 0, 1e9, true, num_ctx, int)
    NUM(num_predict, -2, 1e9, true, num_predict, int)
    NUM(seed, -9007199254740992.0, 9007199254740992.0, true, seed, int64_t)
#undef NUM
    const cJSON *stop = cJSON_GetObjectItemCaseSensitive(root, "stop");
    if (s == TT_OK && stop && !cJSON_IsNull(stop)) {
        if (cJSON_IsString(stop)) {
            s = add_stop(out, stop, name, 0, err);
        } else if (cJSON_IsArray(stop)) {
            int i = 0;
            const cJSON *j;
            cJSON_ArrayForEach(j, stop) {
                if ((s = add_stop(out, j, name, i++, err)) != TT_OK)
                    break;
            }
        } else {
            s = tt_fail(err, TT_ERR_FORMAT, "%s: stop: expected a string or an array of strings, "
                        "got %s", name, util_json_type_name(stop));
        }
    }
    cJSON_Delete(root);
    if (s != TT_OK)
        ollama_params_free(out);
    return s;
}
