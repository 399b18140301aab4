/* safetensors.c: mmap and validate .safetensors files before anything reads a tensor.
 *
 * Format (https://github.com/huggingface/safetensors): an 8-byte little-endian header length n,
 * n bytes of JSON (an object: tensor name -> {"dtype", "shape", "data_offsets": [begin, end]},
 * plus an optional "__metadata__" object of strings), then the data section; offsets are relative
 * to the start of the data section. Writers pad the header with spaces to a multiple of 8.
 *
 * What this reader accepts beyond the reference implementation, on purpose:
 *   - holes between tensors and unused bytes after the last one (the reference requires the
 *     tensors to tile the data section exactly); they cost nothing to allow and cannot make a
 *     read go out of bounds, because every range is checked against the data section;
 *   - unknown keys inside a tensor entry are ignored (a future field should not break loading).
 * What it refuses that a lenient JSON reader would let through: duplicate names (cJSON keeps
 * duplicate keys as separate items), duplicate fields in an entry, non-integral or negative
 * numbers, numbers above 2^53 (a double can no longer hold every integer there), and any bytes
 * other than JSON whitespace after the header object.
 *
 * Tensor data is not aligned in general (an offset only has to be a byte offset): readers copy it
 * with memcpy or the tensor_ref_to_f32 conversion, never through a float pointer. */
#include "core/model/safetensors.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/util.h"

#define ST_HEADER_MAX 100000000ull
#define ST_INT_MAX 9007199254740992.0 /* 2^53: above it a JSON number may not be the integer written */

struct safetensors_file {
    const char *name;            /* for messages (owned copy in name_buf) */
    char *name_buf;
    void *map;                   /* the mapping, NULL for a caller's buffer */
    size_t map_len;
    st_tensor *tensors;          /* (n) in header order */
    size_t n;
    size_t *by_name;             /* (n) indices sorted by name, for bsearch */
};

/* ---------------------------------------------------------------------------------------------
 * dtype table */

static const struct {
    const char *name;
    size_t size;
} st_dtypes[] = {
    [ST_BOOL] = {"BOOL", 1},  [ST_U8] = {"U8", 1},     [ST_I8] = {"I8", 1},
    [ST_I16] = {"I16", 2},    [ST_U16] = {"U16", 2},   [ST_F16] = {"F16", 2},
    [ST_BF16] = {"BF16", 2},  [ST_I32] = {"I32", 4},   [ST_U32] = {"U32", 4},
    [ST_F32] = {"F32", 4},    [ST_F64] = {"F64", 8},   [ST_I64] = {"I64", 8},
    [ST_U64] = {"U64", 8},    [ST_F8_E4M3] = {"F8_E4M3", 1}, [ST_F8_E5M2] = {"F8_E5M2", 1},
};
#define ST_N_DTYPES (sizeof st_dtypes / sizeof st_dtypes[0])

const char *st_dtype_name(st_dtype d)
{
    return (unsigned)d < ST_N_DTYPES ? st_dtypes[d].name : "?";
}

size_t st_dtype_size(st_dtype d)
{
    return (unsigned)d < ST_N_DTYPES ? st_dtypes[d].size : 0;
}

static int st_dtype_parse(const char *s, st_dtype *out)
{
    for (size_t i = 0; i < ST_N_DTYPES; i++)
        if (strcmp(s, st_dtypes[i].name) == 0) {
            *out = (st_dtype)i;
            return 0;
        }
    return -1;
}

/* ---------------------------------------------------------------------------------------------
 * Validation helpers */

/* Reads a JSON number that must be a non-negative integer <= 2^53. Returns 0, or -1 with why set
 * to a short reason. */
static int json_to_u64(const cJSON *j, uint64_t *out, const char **why)
{
    if (!cJSON_IsNumber(j)) { *why = "is not a number"; return -1; }
    double v = j->valuedouble;
    if (!isfinite(v)) { *why = "is not finite"; return -1; }
    if (v < 0) { *why = "is negative"; return -1; }
    if (v != floor(v)) { *why = "is not an integer"; return -1; }
    if (v > ST_INT_MAX) { *why = "is above 2^53"; return -1; }
    *out = (uint64_t)v;
    return 0;
}

/* "[4,8]" into buf. */
static const char *shape_str(const st_tensor *t, char *buf, size_t cap)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, cap - k, "[");
    for (int d = 0; d < t->ndim && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%llu", d ? "," : "",
                              (unsigned long long)t->shape[d]);
    if (k < cap)
        snprintf(buf + k, cap - k, "]");
    return buf;
}

typedef struct {
    uint64_t begin, end;
} st_range;

typedef struct {
    const char *fname;           /* file name for messages */
    tt_error *err;
    st_range *ranges;            /* (n) data_offsets per tensor */
} st_ctx;

/* Parses one tensor entry into t (name already set). */
static tt_status st_parse_entry(st_ctx *c, const cJSON *e, st_tensor *t, st_range *r,
                                uint64_t data_len)
{
    const char *fn = c->fname, *tn = t->name;
    if (!cJSON_IsObject(e))
        return tt_fail(c->err, TT_ERR_FORMAT, "%s: tensor %s: entry is %s, not a JSON object", fn,
                       tn, util_json_type_name(e));
    const cJSON *jd = NULL, *js = NULL, *jo = NULL;
    for (const cJSON *f = e->child; f; f = f->next) {
        const cJSON **slot = strcmp(f->string, "dtype") == 0 ? &jd
                           : strcmp(f->string, "shape") == 0 ? &js
                           : strcmp(f->string, "data_offsets") == 0 ? &jo : NULL;
        if (!slot)
            continue;
        if (*slot)
            return tt_fail(c->err, TT_ERR_FORMAT, "%s: tensor %s: field %s appears twice", fn, tn,
                           f->string);
        *slot = f;
    }
    if (!jd) return tt_fail(c->err, TT_ERR_FORMAT, "%s: tensor %s: missing dtype", fn, tn);
    if (!js) return tt_fail(c->err, TT_ERR_FORMAT, "%s: tensor %s: missing shape", fn, tn);
    if (!jo) return tt_fail(c->err, TT_ERR_FORMAT, "%s: tensor %s: missing data_offsets", fn, tn);

    if (!cJSON_IsString(jd))
        return tt_fail(c->err, TT_ERR_FORMAT, "%s: tensor %s: dtype is %s, not a string", fn, tn,
                       util_json_type_name(jd));
    if (st_dtype_parse(jd->valuestring, &t->dtype) != 0)
        return tt_fail(c->err, TT_ERR_FORMAT, "%s: tensor %s: unknown dtype '%.40s'", fn, tn,
                       jd->valuestring);

    if (!cJSON_IsArray(js))
        return tt_fail(c->err, TT_ERR_FORMAT, "%s: tensor %s: shape is %s, not an array", fn, tn,
                       util_json_type_name(js));
    int ndim = cJSON_GetArraySize(js);
    if (ndim > ST_MAX_DIMS)
        return tt_fail(c->err, TT_ERR_FORMAT, "%s: tensor %s: shape has %d dimensions (at most %d)",
                       fn, tn, ndim, ST_MAX_DIMS);
    t->ndim = ndim;
    t->numel = 1;
    bool overflow = false;
    int d = 0;
    for (const cJSON *x = js->child; x; x = x->next, d++) {
        const char *why;
        if (json_to_u64(x, &t->shape[d], &why) != 0) {
            if (cJSON_IsNumber(x))
                return tt_fail(c->err, TT_ERR_FORMAT, "%s: tensor %s: shape[%d] = %.17g %s", fn,
                               tn, d, x->valuedouble, why);
            return tt_fail(c->err, TT_ERR_FORMAT, "%s: tensor %s: shape[%d] is %s, not an integer",
                           fn, tn, d, util_json_type_name(x));
        }
        uint64_t dim = t->shape[d];
        if (dim != 0 && t->numel > UINT64_MAX / dim)
            overflow = true;
        else
            t->numel *= dim;
    }
    size_t esize = st_dtype_size(t->dtype);
    /* A zero dimension makes the product 0 whatever else overflowed. */
    bool has_zero = false;
    for (int k = 0; k < ndim; k++)
        has_zero |= t->shape[k] == 0;
    if (has_zero)
        t->numel = 0;
    else if (overflow || t->numel > UINT64_MAX / esize) {
        char sb[256];
        return tt_fail(c->err, TT_ERR_FORMAT, "%s: tensor %s: shape %s has too many elements "
                       "(the byte size overflows 64 bits)", fn, tn, shape_str(t, sb, sizeof sb));
    }
    t->nbytes = t->numel * esize;

    if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2)
        return tt_fail(c->err, TT_ERR_FORMAT,
                       "%s: tensor %s: data_offsets is not an array of two integers [begin, end]",
                       fn, tn);
    uint64_t be[2];
    d = 0;
    for (const cJSON *x = jo->child; x; x = x->next, d++) {
        const char *why;
        if (json_to_u64(x, &be[d], &why) != 0) {
            if (cJSON_IsNumber(x))
                return tt_fail(c->err, TT_ERR_FORMAT, "%s: tensor %s: data_offsets[%d] = %.17g %s",
                               fn, tn, d, x->valuedouble, why);
            return tt_fail(c->err, TT_ERR_FORMAT,
                           "%s: tensor %s: data_offsets[%d] is %s, not an integer", fn, tn, d,
                           util_json_type_name(x));
        }
    }
    r->begin = be[0];
    r->end = be[1];
    if (r->begin > r->end)
        return tt_fail(c->err, TT_ERR_FORMAT,
                       "%s: tensor %s: data_offsets [%llu, %llu]: begin is after end", fn, tn,
                       (unsigned long long)r->begin, (unsigned long long)r->end);
    if (r->end > data_len)
        return tt_fail(c->err, TT_ERR_FORMAT,
                       "%s: tensor %s: data_offsets [%llu, %llu] end past the data section "
                       "(%llu bytes)", fn, tn, (unsigned long long)r->begin,
                       (unsigned long long)r->end, (unsigned long long)data_len);
    if (r->end - r->begin != t->nbytes) {
        char sb[256];
        return tt_fail(c->err, TT_ERR_FORMAT,
                       "%s: tensor %s: data_offsets [%llu, %llu] hold %llu bytes, but %s %s needs "
                       "%llu", fn, tn, (unsigned long long)r->begin, (unsigned long long)r->end,
                       (unsigned long long)(r->end - r->begin), st_dtype_name(t->dtype),
                       shape_str(t, sb, sizeof sb), (unsigned long long)t->nbytes);
    }
    return TT_OK;
}

static tt_status st_check_metadata(st_ctx *c, const cJSON *m)
{
    if (!cJSON_IsObject(m))
        return tt_fail(c->err, TT_ERR_FORMAT, "%s: __metadata__ is %s, not a JSON object",
                       c->fname, util_json_type_name(m));
    for (const cJSON *x = m->child; x; x = x->next)
        if (!cJSON_IsString(x))
            return tt_fail(c->err, TT_ERR_FORMAT,
                           "%s: __metadata__: value of '%.60s' is %s, not a string", c->fname,
                           x->string, util_json_type_name(x));
    return TT_OK;
}

/* qsort has no context argument, so the sorted arrays hold pointers to the records compared. */
static int cmp_name(const void *a, const void *b)
{
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    return strcmp(x->name, y->name);
}

typedef struct {
    st_range r;
    const char *name;
} st_span;

static int cmp_span(const void *a, const void *b)
{
    const st_span *x = a, *y = b;
    if (x->r.begin != y->r.begin)
        return x->r.begin < y->r.begin ? -1 : 1;
    if (x->r.end != y->r.end)
        return x->r.end < y->r.end ? -1 : 1;
    return 0;
}

/* Names unique (via a sorted copy, which then serves lookups) and non-empty ranges disjoint. */
static tt_status st_check_layout(st_ctx *c, safetensors_file *f)
{
    size_t n = f->n;
    if (n == 0)
        return TT_OK;
    const st_tensor **byname = malloc(n * sizeof *byname);
    st_span *spans = malloc(n * sizeof *spans);
    f->by_name = malloc(n * sizeof *f->by_name);
    if (!byname || !spans || !f->by_name) {
        free(byname);
        free(spans);
        return tt_fail(c->err, TT_ERR_NOMEM, "%s: out of memory indexing %zu tensors", c->fname,
                       n);
    }
    for (size_t i = 0; i < n; i++)
        byname[i] = &f->tensors[i];
    qsort(byname, n, sizeof *byname, cmp_name);
    tt_status s = TT_OK;
    for (size_t i = 0; i < n; i++) {
        f->by_name[i] = (size_t)(byname[i] - f->tensors);
        if (i > 0 && strcmp(byname[i - 1]->name, byname[i]->name) == 0 && s == TT_OK)
            s = tt_fail(c->err, TT_ERR_FORMAT, "%s: tensor %s appears twice in the header",
                        c->fname, byname[i]->name);
    }
    size_t m = 0;
    for (size_t i = 0; i < n && s == TT_OK; i++)
        if (c->ranges[i].end > c->ranges[i].begin)
            spans[m++] = (st_span){c->ranges[i], f->tensors[i].name};
    qsort(spans, m, sizeof *spans, cmp_span);
    for (size_t i = 1; i < m && s == TT_OK; i++)
        if (spans[i].r.begin < spans[i - 1].r.end)
            s = tt_fail(c->err, TT_ERR_FORMAT,
                        "%s: tensors %s [%llu, %llu] and %s [%llu, %llu] overlap", c->fname,
                        spans[i - 1].name, (unsigned long long)spans[i - 1].r.begin,
                        (unsigned long long)spans[i - 1].r.end, spans[i].name,
                        (unsigned long long)spans[i].r.begin, (unsigned long long)spans[i].r.end);
    free(byname);
    free(spans);
    return s;
}

static bool is_json_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

/* ---------------------------------------------------------------------------------------------
 * Open / close */

static tt_status st_parse(safetensors_file *f, const unsigned char *buf, size_t len,
                          tt_error *err)
{
    const char *fn = f->name;
    if (len == 0)
        return tt_fail(err, TT_ERR_FORMAT, "%s: empty file (no safetensors header)", fn);
    if (len < 8)
        return tt_fail(err, TT_ERR_FORMAT,
                       "%s: file is %zu bytes, shorter than the 8-byte header length", fn, len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | buf[i];
    if (hlen > ST_HEADER_MAX)
        return tt_fail(err, TT_ERR_FORMAT,
                       "%s: header length %llu exceeds the limit of %llu bytes", fn,
                       (unsigned long long)hlen, ST_HEADER_MAX);
    if (hlen > len - 8)
        return tt_fail(err, TT_ERR_FORMAT,
                       "%s: header length %llu runs past the end of the file (%zu bytes)", fn,
                       (unsigned long long)hlen, len);
    uint64_t data_len = len - 8 - hlen;

    /* A NUL-terminated private copy: cJSON never reads past it, whatever the bytes are. */
    char *hdr = malloc(hlen + 1);
    if (!hdr)
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for a %llu-byte header", fn,
                       (unsigned long long)hlen);
    memcpy(hdr, buf + 8, hlen);
    hdr[hlen] = 0;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, hlen, &end, 0);
    tt_status s = TT_OK;
    if (!root) {
        size_t at = end && end >= hdr && end <= hdr + hlen ? (size_t)(end - hdr) : 0;
        s = tt_fail(err, TT_ERR_FORMAT, "%s: header is not valid JSON (error near byte %zu of %llu)",
                    fn, at, (unsigned long long)hlen);
        goto out;
    }
    for (const char *p = end; p < hdr + hlen; p++)
        if (!is_json_space(*p)) {
            s = tt_fail(err, TT_ERR_FORMAT,
                        "%s: header has data after the JSON value (byte %zu of %llu: 0x%02x)", fn,
                        (size_t)(p - hdr), (unsigned long long)hlen, (unsigned char)*p);
            goto out;
        }
    if (!cJSON_IsObject(root)) {
        s = tt_fail(err, TT_ERR_FORMAT, "%s: header is %s, not a JSON object", fn,
                    util_json_type_name(root));
        goto out;
    }

    size_t n = 0;
    const cJSON *meta = NULL;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (meta) {
                s = tt_fail(err, TT_ERR_FORMAT, "%s: __metadata__ appears twice", fn);
                goto out;
            }
            meta = e;
        } else {
            n++;
        }
    }
    st_ctx c = {.fname = fn, .err = err};
    if (meta && (s = st_check_metadata(&c, meta)) != TT_OK)
        goto out;

    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    c.ranges = calloc(n ? n : 1, sizeof *c.ranges);
    if (!f->tensors || !c.ranges) {
        free(c.ranges);
        s = tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for %zu tensors", fn, n);
        goto out;
    }
    size_t i = 0;
    for (const cJSON *e = root->child; e && s == TT_OK; e = e->next) {
        if (e == meta)
            continue;
        st_tensor *t = &f->tensors[i];
        t->name = strdup(e->string);
        f->n = i + 1;                          /* so close frees the name */
        if (!t->name)
            s = tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", fn);
        else
            s = st_parse_entry(&c, e, t, &c.ranges[i], data_len);
        i++;
    }
    if (s == TT_OK)
        s = st_check_layout(&c, f);
    if (s == TT_OK)
        for (size_t k = 0; k < n; k++)
        {
            f->tensors[k].data = buf + 8 + hlen + c.ranges[k].begin;
            f->tensors[k].offset = 8 + hlen + c.ranges[k].begin;
        }
    free(c.ranges);
out:
    cJSON_Delete(root);
    free(hdr);
    return s;
}

static safetensors_file *st_new(const char *name)
{
    safetensors_file *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->name_buf = strdup(name ? name : "(buffer)");
    if (!f->name_buf) {
        free(f);
        return NULL;
    }
    f->name = f->name_buf;
    return f;
}

tt_status safetensors_open_buffer(const void *buf, size_t len, const char *name,
                                  safetensors_file **out, tt_error *err)
{
    *out = NULL;
    safetensors_file *f = st_new(name);
    if (!f)
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", name ? name : "(buffer)");
    tt_status s = st_parse(f, buf, len, err);
    if (s != TT_OK) {
        safetensors_close(f);
        return s;
    }
    *out = f;
    return TT_OK;
}

tt_status safetensors_open(const char *path, safetensors_file **out, tt_error *err)
{
    *out = NULL;
    void *map;
    size_t len;
    tt_status ms = util_map_file(path, &map, &len, err);
    if (ms != TT_OK)
        return ms;
    safetensors_file *f = st_new(path);
    if (!f) {
        if (map)
            munmap(map, len);
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", path);
    }
    f->map = map;
    f->map_len = len;
    tt_status s = st_parse(f, f->map, len, err);
    if (s != TT_OK) {
        safetensors_close(f);
        return s;
    }
    *out = f;
    return TT_OK;
}

void safetensors_close(safetensors_file *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++)
        free((char *)f->tensors[i].name);
    free(f->tensors);
    free(f->by_name);
    if (f->map)
        munmap(f->map, f->map_len);
    free(f->name_buf);
    free(f);
}

/* ---------------------------------------------------------------------------------------------
 * Lookup */

size_t safetensors_count(const safetensors_file *f)
{
    return f->n;
}

const st_tensor *safetensors_at(const safetensors_file *f, size_t i)
{
    return i < f->n ? &f->tensors[i] : NULL;
}

const st_tensor *safetensors_find(const safetensors_file *f, const char *name)
{
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const st_tensor *t = &f->tensors[f->by_name[mid]];
        int c = strcmp(name, t->name);
        if (c == 0)
            return t;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}
