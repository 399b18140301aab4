/* jsonr.c: typed JSON field readers whose messages name the file and the field. */
#include "core/base/jsonr.h"

#include <cJSON.h>
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "core/base/util.h"

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

const cJSON *jsonr_field(const cJSON *obj, const char *key)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNull(j) ? NULL : j;
}

/* The member called key in *out: NULL when absent or null, else a value that is_type accepts,
 * or an error "NAME: KEY: expected WANT, got ..." (*out is set either way). */
static tt_status json_typed(const cJSON *obj, const char *name, const char *key,
                            cJSON_bool (*is_type)(const cJSON *), const char *want,
                            const cJSON **out, tt_error *err)
{
    char db[96];
    const cJSON *j = *out = jsonr_field(obj, key);
    if (j && !is_type(j))
        return tt_fail(err, TT_ERR_CONFIG, "%s: %s: expected %s, got %s", name, key, want,
                       json_describe(j, db, sizeof db));
    return TT_OK;
}

static tt_status json_check_integer(const char *name, const char *key, double v, tt_error *err)
{
    if (!isfinite(v) || v != floor(v))
        return tt_fail(err, TT_ERR_CONFIG, "%s: %s: %.17g is not an integer", name, key, v);
    return TT_OK;
}

tt_status jsonr_int(const cJSON *obj, const char *name, const char *key, bool required, int dflt,
                    int lo, int hi, int *out, tt_error *err)
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

tt_status jsonr_num(const cJSON *obj, const char *name, const char *key, double *out,
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

tt_status jsonr_bool(const cJSON *obj, const char *name, const char *key, bool *out,
                     bool *present, tt_error *err)
{
    const cJSON *j;
    tt_status st = json_typed(obj, name, key, cJSON_IsBool, "true or false", &j, err);
    *present = j != NULL;
    if (st == TT_OK && j)
        *out = cJSON_IsTrue(j);
    return st;
}

tt_status jsonr_str(const cJSON *obj, const char *name, const char *key, const char **out,
                    tt_error *err)
{
    const cJSON *j;
    tt_status st = json_typed(obj, name, key, cJSON_IsString, "a string", &j, err);
    *out = st == TT_OK && j ? j->valuestring : NULL;
    return st;
}

tt_status jsonr_setting(const cJSON *obj, const char *name, const char *key,
                        bool (*valid)(double), const char *not_what, float *out, bool *has,
                        tt_error *err)
{
    double x = 0;
    tt_status s = jsonr_num(obj, name, key, &x, has, err);
    if (s != TT_OK || !*has)
        return s;
    if (!valid(x))
        return tt_fail(err, TT_ERR_CONFIG, "%s: %s: %g is %s", name, key, x, not_what);
    if ((float)x == 0 && !valid(0))
        return tt_fail(err, TT_ERR_CONFIG, "%s: %s: %g is too small", name, key, x);
    *out = (float)x;
    return TT_OK;
}

static tt_status json_one_token_id(const cJSON *j, const char *name, const char *key, int V,
                                   int *out, tt_error *err)
{
    char db[96];
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

tt_status jsonr_token_ids(const cJSON *obj, const char *name, const char *key, int V, int *ids,
                          int cap, int *n, tt_error *err)
{
    const cJSON *j = jsonr_field(obj, key);
    *n = 0;
    if (!j)
        return TT_OK;
    if (!cJSON_IsArray(j))
        return json_one_token_id(j, name, key, V, &ids[(*n)++], err);
    int count = cJSON_GetArraySize(j);
    if (count > cap)
        return tt_fail(err, TT_ERR_CONFIG, "%s: %s: %d token ids, more than the %d tokentop "
                       "holds", name, key, count, cap);
    for (const cJSON *e = j->child; e; e = e->next) {
        tt_status s = json_one_token_id(e, name, key, V, &ids[*n], err);
        if (s != TT_OK)
            return s;
        (*n)++;
    }
    return TT_OK;
}

tt_status jsonr_parse_object(const char *json, size_t len, const char *name, cJSON **out,
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
