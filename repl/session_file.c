/* session_file.c: the /save and /load conversation file (JSON, or plain text as one turn). */
#include "repl/session_file.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/jsonw.h"
#include "core/base/text.h"
#include "core/tokenizer/tokenizer.h"
#include "core/base/util.h"

/* ---------------------------------------------------------------------------------------------
 * Writing */

static void write_text_json(FILE *f, const char *s, size_t n)
{
    /* Display form: invalid UTF-8 (a reply cut inside a character) becomes \xNN text. */
    size_t cap = 4 * n + 1;
    char *buf = malloc(cap);
    if (!buf) {
        fputs("\"\"", f);
        return;
    }
    size_t len = text_token_display(s, n, TEXT_ESCAPE_BYTES, buf, cap);
    jsonw_string(f, buf, len);
    free(buf);
}

/* The shortest decimal that reads back as the same float (0.7, not 0.699999988). */
static const char *short_float(float v, char buf[32])
{
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, 32, "%.*g", prec, (double)v);
        if ((float)strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

char *session_file_serialize(const session *s, const char *model_name, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f)
        return NULL;
    const sampler_params *p = &s->set.sampler;
    fprintf(f, "{\n  \"format\": \"%s\",\n  \"version\": %d,\n  \"model\": ", SESSION_FILE_FORMAT,
            SESSION_FILE_VERSION);
    const char *name = model_name ? model_name : "";
    jsonw_string(f, name, strlen(name));
    fprintf(f, ",\n  \"vocab_size\": %d,\n  \"settings\": {\n", s->model->config.V);
    char t[32], tp[32], mp[32], rp[32], pp[32], fp[32];
    fprintf(f, "    \"temperature\": %s,\n    \"top_k\": %d,\n    \"top_p\": %s,\n"
            "    \"min_p\": %s,\n    \"repetition_penalty\": %s,\n"
            "    \"presence_penalty\": %s,\n    \"frequency_penalty\": %s,\n"
            "    \"penalty_window\": %d,\n    \"greedy\": %s,\n    \"order\": \"%s\",\n",
            short_float(p->temperature, t), p->top_k, short_float(p->top_p, tp),
            short_float(p->min_p, mp), short_float(p->repetition_penalty, rp),
            short_float(p->presence_penalty, pp), short_float(p->frequency_penalty, fp),
            p->penalty_window, p->greedy ? "true" : "false",
            p->order == SAMPLER_ORDER_LLAMA ? "llama" : "hf");
    if (s->set.seed < (1ull << 53))
        fprintf(f, "    \"seed\": %llu,\n", (unsigned long long)s->set.seed);
    else
        fprintf(f, "    \"seed\": \"%llu\",\n", (unsigned long long)s->set.seed);
    fprintf(f, "    \"max_new_tokens\": %d,\n    \"stop\": [", s->set.max_new_tokens);
    for (int i = 0; i < s->set.n_stops; i++) {
        if (i)
            fputs(", ", f);
        write_text_json(f, s->set.stops[i], strlen(s->set.stops[i]));
    }
    fputs("]\n  },\n  \"text\": ", f);
    char *text = session_text(s, 0, s->n_tokens);
    write_text_json(f, text ? text : "", text ? strlen(text) : 0);
    free(text);
    fputs(",\n  \"tokens\": [", f);
    for (int i = 0; i < s->n_tokens; i++) {
        size_t nb = 0;
        const char *b = tokenizer_token_bytes(s->tok, s->tokens[i], &nb);
        fprintf(f, "%s\n    {\"id\": %d, \"origin\": \"%s\", \"p\": %.6g, \"turn\": %d, \"text\": ",
                i ? "," : "", (int)s->tokens[i],
                token_origin_name((token_origin)s->info[i].origin), (double)s->info[i].p,
                s->info[i].turn);
        write_text_json(f, b ? b : "", b ? nb : 0);
        fputc('}', f);
    }
    fputs(s->n_tokens ? "\n  ]\n}\n" : "]\n}\n", f);
    bool bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

tt_status session_file_save(const session *s, const char *path, const char *model_name,
                            tt_error *err)
{
    size_t len = 0;
    char *buf = session_file_serialize(s, model_name, &len);
    if (!buf)
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", path);
    FILE *f = fopen(path, "w");
    if (!f) {
        int e = errno;
        free(buf);
        return tt_fail(err, TT_ERR_IO, "%s: %s", path, strerror(e));
    }
    bool bad = fwrite(buf, 1, len, f) != len;
    free(buf);
    if (fclose(f) != 0 || bad)
        return tt_fail(err, TT_ERR_IO, "%s: write error", path);
    return TT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Reading */

/* Reads one number field; absent or null leaves *found false. */
static tt_status json_number(const cJSON *obj, const char *key, const char *path, double *out,
                             bool *found, tt_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *found = false;
    if (!v || cJSON_IsNull(v))
        return TT_OK;
    if (!cJSON_IsNumber(v))
        return tt_fail(err, TT_ERR_FORMAT, "%s: settings.%s: expected a number", path, key);
    *out = v->valuedouble;
    *found = true;
    return TT_OK;
}

static tt_status parse_settings(const cJSON *set, const char *path, session_file *out,
                                tt_error *err)
{
    static const struct {
        const char *key, *param;
        bool integer;
    } fields[] = {
        {"temperature", "temp", false},       {"top_k", "top_k", true},
        {"top_p", "top_p", false},            {"min_p", "min_p", false},
        {"repetition_penalty", "repeat", false}, {"presence_penalty", "presence", false},
        {"frequency_penalty", "frequency", false}, {"penalty_window", "window", true},
    };
    if (!set)
        return TT_OK;
    if (!cJSON_IsObject(set))
        return tt_fail(err, TT_ERR_FORMAT, "%s: settings: expected an object", path);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        double v;
        bool found;
        tt_status st = json_number(set, fields[i].key, path, &v, &found, err);
        if (st != TT_OK)
            return st;
        if (!found)
            continue;
        char buf[64];
        if (fields[i].integer)
            snprintf(buf, sizeof buf, v == floor(v) && fabs(v) < 1e9 ? "%.0f" : "%.17g", v);
        else
            snprintf(buf, sizeof buf, "%.9g", v);
        tt_error e2 = {0};
        if (sampler_params_set(&out->sampler, fields[i].param, buf, &e2) != TT_OK)
            return tt_fail(err, TT_ERR_FORMAT, "%s: settings.%s: %s", path, fields[i].key,
                           e2.msg);
    }
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(set, "greedy");
    if (g && !cJSON_IsNull(g)) {
        if (!cJSON_IsBool(g))
            return tt_fail(err, TT_ERR_FORMAT, "%s: settings.greedy: expected true or false",
                           path);
        out->sampler.greedy = cJSON_IsTrue(g);
    }
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(set, "order");
    if (o && !cJSON_IsNull(o)) {
        tt_error e2 = {0};
        if (!cJSON_IsString(o) ||
            sampler_params_set(&out->sampler, "order", o->valuestring, &e2) != TT_OK)
            return tt_fail(err, TT_ERR_FORMAT, "%s: settings.order: expected \"hf\" or \"llama\"",
                           path);
    }
    double v;
    bool found;
    tt_status st = json_number(set, "max_new_tokens", path, &v, &found, err);
    if (st != TT_OK)
        return st;
    if (found) {
        if (v != floor(v) || v < 1 || v > (1 << 24))
            return tt_fail(err, TT_ERR_FORMAT, "%s: settings.max_new_tokens: %g is not an "
                           "integer in [1, %d]", path, v, 1 << 24);
        out->max_new_tokens = (int)v;
    }
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(set, "seed");
    if (seed && !cJSON_IsNull(seed)) {
        if (cJSON_IsNumber(seed) && seed->valuedouble >= 0 &&
            seed->valuedouble < 9007199254740992.0 && seed->valuedouble == floor(seed->valuedouble)) {
            out->seed = (uint64_t)seed->valuedouble;
        } else if (cJSON_IsString(seed) && seed->valuestring[0] >= '0' &&
                   seed->valuestring[0] <= '9') {
            char *end;
            errno = 0;
            out->seed = strtoull(seed->valuestring, &end, 10);
            if (errno || *end)
                return tt_fail(err, TT_ERR_FORMAT, "%s: settings.seed: \"%s\" is not an "
                               "unsigned 64-bit integer", path, seed->valuestring);
        } else {
            return tt_fail(err, TT_ERR_FORMAT, "%s: settings.seed: expected a non-negative "
                           "integer", path);
        }
        out->has_seed = true;
    }
    const cJSON *stops = cJSON_GetObjectItemCaseSensitive(set, "stop");
    if (stops && !cJSON_IsNull(stops)) {
        if (!cJSON_IsArray(stops) || cJSON_GetArraySize(stops) > SESSION_MAX_STOPS)
            return tt_fail(err, TT_ERR_FORMAT, "%s: settings.stop: expected an array of at most "
                           "%d strings", path, SESSION_MAX_STOPS);
        const cJSON *it;
        cJSON_ArrayForEach(it, stops) {
            if (!cJSON_IsString(it) || !it->valuestring[0])
                return tt_fail(err, TT_ERR_FORMAT, "%s: settings.stop: every stop must be a "
                               "non-empty string", path);
            if (!(out->stops[out->n_stops] = strdup(it->valuestring)))
                return tt_fail(err, TT_ERR_NOMEM, "%s: settings.stop: out of memory", path);
            out->n_stops++;
        }
        out->has_stops = true;
    }
    return TT_OK;
}

static tt_status parse_tokens(const cJSON *toks, const char *path, int V, int32_t **ids_out,
                              token_info **info_out, int *n_out, tt_error *err)
{
    if (!cJSON_IsArray(toks))
        return tt_fail(err, TT_ERR_FORMAT, "%s: tokens: expected an array", path);
    int n = cJSON_GetArraySize(toks);
    int32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
    token_info *info = malloc(((size_t)n + 1) * sizeof *info);
    if (!ids || !info) {
        free(ids);
        free(info);
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for %d tokens", path, n);
    }
    int i = 0, last_turn = 0;
    const cJSON *t;
    tt_status st = TT_OK;
    cJSON_ArrayForEach(t, toks) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(t, "id");
        const cJSON *origin = cJSON_GetObjectItemCaseSensitive(t, "origin");
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(t, "p");
        const cJSON *turn = cJSON_GetObjectItemCaseSensitive(t, "turn");
        if (!cJSON_IsObject(t) || !cJSON_IsNumber(id) || id->valuedouble != floor(id->valuedouble)
            || id->valuedouble < 0 || id->valuedouble >= V) {
            st = tt_fail(err, TT_ERR_FORMAT, "%s: tokens[%d].id: expected an integer in [0, %d)",
                         path, i, V);
            break;
        }
        ids[i] = (int32_t)id->valuedouble;
        token_info in = {.origin = TOKEN_USER, .p = 1.0f, .turn = last_turn};
        if (origin) {
            int o = -1;
            for (int k = TOKEN_USER; k <= TOKEN_BONUS && cJSON_IsString(origin); k++)
                if (strcmp(origin->valuestring, token_origin_name((token_origin)k)) == 0)
                    o = k;
            if (o < 0) {
                st = tt_fail(err, TT_ERR_FORMAT, "%s: tokens[%d].origin: expected user, sampled, "
                             "forced, draft_accepted, target_resample or bonus", path, i);
                break;
            }
            in.origin = (uint8_t)o;
        }
        if (p) {
            if (!cJSON_IsNumber(p) || !(p->valuedouble >= 0 && p->valuedouble <= 1)) {
                st = tt_fail(err, TT_ERR_FORMAT, "%s: tokens[%d].p: expected a number in [0, 1]",
                             path, i);
                break;
            }
            in.p = (float)p->valuedouble;
        }
        if (turn) {
            if (!cJSON_IsNumber(turn) || turn->valuedouble != floor(turn->valuedouble) ||
                turn->valuedouble < last_turn || turn->valuedouble > 1e9) {
                st = tt_fail(err, TT_ERR_FORMAT, "%s: tokens[%d].turn: expected an integer, not "
                             "below the previous token's", path, i);
                break;
            }
            in.turn = (int)turn->valuedouble;
            last_turn = in.turn;
        }
        info[i++] = in;
    }
    if (st != TT_OK) {
        free(ids);
        free(info);
        return st;
    }
    *ids_out = ids;
    *info_out = info;
    *n_out = n;
    return TT_OK;
}

void session_file_free(session_file *f)
{
    if (!f)
        return;
    free(f->text);
    free(f->ids);
    free(f->info);
    for (int i = 0; i < f->n_stops; i++)
        free(f->stops[i]);
    memset(f, 0, sizeof *f);
}

static tt_status copy_text(session_file *out, const char *text, size_t len, const char *path,
                           tt_error *err)
{
    if (!(out->text = malloc(len + 1)))
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for %zu bytes of text", path, len);
    memcpy(out->text, text, len);
    out->text[len] = 0;
    out->text_len = len;
    return TT_OK;
}

tt_status session_file_parse(const char *buf, size_t len, const char *name, int V,
                             const session_settings *base, session_file *out, tt_error *err)
{
    memset(out, 0, sizeof *out);
    session_settings defaults;
    if (!base) {
        session_settings_default(&defaults);
        base = &defaults;
    }
    out->sampler = base->sampler;
    out->max_new_tokens = base->max_new_tokens;
    size_t k = 0;
    while (k < len && (buf[k] == ' ' || buf[k] == '\t' || buf[k] == '\n' || buf[k] == '\r'))
        k++;
    if (k >= len || buf[k] != '{') {
        /* Plain text: the whole file is one user turn. A file that is neither this nor a
         * session file (a binary, another encoding) is refused rather than tokenized. */
        for (size_t i = 0; i < len;) {
            if (buf[i] == 0)
                return tt_fail(err, TT_ERR_FORMAT, "%s: neither a session file nor text: a NUL "
                               "byte at offset %zu", name, i);
            int l = text_utf8_seq_len((const unsigned char *)buf + i, len - i);
            if (l == 0)
                return tt_fail(err, TT_ERR_FORMAT, "%s: neither a session file nor UTF-8 text: "
                               "byte 0x%02x at offset %zu", name, (unsigned char)buf[i], i);
            i += (size_t)l;
        }
        out->plain = true;
        tt_status st = copy_text(out, buf, len, name, err);
        if (st == TT_OK) {   /* CRLF line ends (a file from Windows) read as LF */
            size_t o = 0;
            for (size_t i = 0; i < out->text_len; i++)
                if (!(out->text[i] == '\r' && i + 1 < out->text_len && out->text[i + 1] == '\n'))
                    out->text[o++] = out->text[i];
            out->text[o] = 0;
            out->text_len = o;
        }
        return st;
    }
    cJSON *root = cJSON_ParseWithLength(buf, len);
    if (!root)
        return tt_fail(err, TT_ERR_FORMAT, "%s: not valid JSON", name);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(root, "vocab_size");
    const cJSON *toks = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    const cJSON *txt = cJSON_GetObjectItemCaseSensitive(root, "text");
    tt_status st;
    if (!cJSON_IsObject(root) || !cJSON_IsString(fmt) ||
        strcmp(fmt->valuestring, SESSION_FILE_FORMAT))
        st = tt_fail(err, TT_ERR_FORMAT, "%s: format: expected \"%s\"", name,
                     SESSION_FILE_FORMAT);
    else if (!cJSON_IsNumber(ver) || ver->valuedouble != SESSION_FILE_VERSION)
        st = tt_fail(err, TT_ERR_UNSUPPORTED, "%s: version: this build reads version %d", name,
                     SESSION_FILE_VERSION);
    else if (vocab && (!cJSON_IsNumber(vocab) || vocab->valuedouble != V))
        st = tt_fail(err, TT_ERR_FORMAT, "%s: vocab_size: %g does not match the model's %d",
                     name, cJSON_IsNumber(vocab) ? vocab->valuedouble : -1.0, V);
    else
        st = parse_settings(cJSON_GetObjectItemCaseSensitive(root, "settings"), name, out, err);
    if (st == TT_OK) {
        if (toks)
            st = parse_tokens(toks, name, V, &out->ids, &out->info, &out->n, err);
        else if (cJSON_IsString(txt))
            st = copy_text(out, txt->valuestring, strlen(txt->valuestring), name, err);
        else
            st = tt_fail(err, TT_ERR_FORMAT, "%s: neither tokens nor text", name);
    }
    cJSON_Delete(root);
    if (st != TT_OK)
        session_file_free(out);
    return st;
}

tt_status session_file_apply(session *s, const session_file *f, int *n_loaded, tt_error *err)
{
    int32_t *encoded = NULL;
    const int32_t *ids = f->ids;
    int n = f->n;
    if (f->text) {
        tt_status st = tokenizer_encode(s->tok, f->text, f->text_len, &encoded, &n, err);
        if (st != TT_OK)
            return st;
        ids = encoded;
    }
    tt_status st = session_set_tokens(s, ids, f->info, n, err);
    free(encoded);
    if (st != TT_OK)
        return st;
    if (!f->plain) {
        s->set.sampler = f->sampler;
        s->set.max_new_tokens = f->max_new_tokens;
        if (f->has_seed)
            session_set_seed(s, f->seed);
        if (f->has_stops) {
            session_clear_stops(s);
            for (int i = 0; i < f->n_stops; i++)
                session_add_stop(s, f->stops[i], NULL);
        }
    }
    *n_loaded = n;
    return TT_OK;
}

tt_status session_file_load(session *s, const char *path, int *n_loaded, tt_error *err)
{
    size_t len = 0;
    char *text;
    tt_status st = util_read_file(path, 0, &text, &len, NULL, err);
    if (st != TT_OK)
        return st;
    session_file f;
    st = session_file_parse(text, len, path, s->model->config.V, &s->set, &f, err);
    free(text);
    if (st == TT_OK)
        st = session_file_apply(s, &f, n_loaded, err);
    session_file_free(&f);
    return st;
}
