/* gguf.c: map and validate GGUF files before anything reads a value or a tensor.
 *
 * Format (ggml's docs/gguf.md), all little-endian:
 *   "GGUF", u32 version (2 or 3; 1 had 32-bit counts and is refused), u64 n_tensors, u64 n_kv;
 *   n_kv times: string key, u32 value type, value;
 *   n_tensors times: string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset;
 *   padding to general.alignment (default 32); the data section, tensor offsets relative to it.
 * A string is a u64 length and that many bytes (no NUL); an array is a u32 element type, a u64
 * count and the elements.
 *
 * The reader walks the header once with a cursor that refuses to step past the end, so no count
 * or length is trusted before the bytes it claims have been seen to exist: an array of n strings
 * needs 8n bytes at least, which bounds the one allocation per array (its offsets) by the file's
 * size, as it does the key and tensor tables. */
#include "core/model/gguf.h"

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

struct gguf_file {
    char *name;
    void *map;                      /* the mapping, NULL for a caller's buffer */
    size_t map_len;
    const uint8_t *base;
    uint64_t size;
    uint32_t version, alignment;
    uint64_t data_offset;
    gguf_kv *kvs;                   /* (n_kv) in file order */
    size_t n_kv;
    size_t *kv_by_key;              /* (n_kv) indices sorted by key */
    gguf_tensor *tensors;           /* (n_tensors) in file order */
    size_t n_tensors;
    size_t *tensor_by_name;         /* (n_tensors) indices sorted by name */
    char *architecture;
    char quantization[32];
};

/* ---------------------------------------------------------------------------------------------
 * Value types */

static const struct {
    const char *name;
    uint32_t size;                  /* bytes of a scalar; 0 for string and array */
} gguf_types[GGUF_TYPE_END] = {
    [GGUF_TYPE_UINT8] = {"uint8", 1},     [GGUF_TYPE_INT8] = {"int8", 1},
    [GGUF_TYPE_UINT16] = {"uint16", 2},   [GGUF_TYPE_INT16] = {"int16", 2},
    [GGUF_TYPE_UINT32] = {"uint32", 4},   [GGUF_TYPE_INT32] = {"int32", 4},
    [GGUF_TYPE_FLOAT32] = {"float32", 4}, [GGUF_TYPE_BOOL] = {"bool", 1},
    [GGUF_TYPE_STRING] = {"string", 0},   [GGUF_TYPE_ARRAY] = {"array", 0},
    [GGUF_TYPE_UINT64] = {"uint64", 8},   [GGUF_TYPE_INT64] = {"int64", 8},
    [GGUF_TYPE_FLOAT64] = {"float64", 8},
};

const char *gguf_type_name(uint32_t t)
{
    return t < GGUF_TYPE_END ? gguf_types[t].name : "?";
}

/* ---------------------------------------------------------------------------------------------
 * The cursor */

typedef struct {
    const uint8_t *p;
    uint64_t pos, size;
    const char *fname;
    tt_error *err;
} cursor;

/* what: the field, for the message ("key general.name: value"). */
static bool cur_take(cursor *c, uint64_t n, const uint8_t **out, const char *what)
{
    if (n > c->size - c->pos) {
        tt_fail(c->err, TT_ERR_FORMAT,
                "%s: %s: %llu bytes at offset %llu run past the end of the file (%llu bytes)",
                c->fname, what, (unsigned long long)n, (unsigned long long)c->pos,
                (unsigned long long)c->size);
        return false;
    }
    *out = c->p + c->pos;
    c->pos += n;
    return true;
}

static bool cur_u32(cursor *c, uint32_t *v, const char *what)
{
    const uint8_t *b;
    if (!cur_take(c, 4, &b, what))
        return false;
    memcpy(v, b, 4);
    return true;
}

static bool cur_u64(cursor *c, uint64_t *v, const char *what)
{
    const uint8_t *b;
    if (!cur_take(c, 8, &b, what))
        return false;
    memcpy(v, b, 8);
    return true;
}

static bool cur_str(cursor *c, gguf_str *s, const char *what)
{
    uint64_t len;
    const uint8_t *b;
    if (!cur_u64(c, &len, what))
        return false;
    if (len > c->size - c->pos) {
        tt_fail(c->err, TT_ERR_FORMAT,
                "%s: %s: string length %llu at offset %llu runs past the end of the file "
                "(%llu bytes)", c->fname, what, (unsigned long long)len,
                (unsigned long long)(c->pos - 8), (unsigned long long)c->size);
        return false;
    }
    cur_take(c, len, &b, what);
    s->ptr = (const char *)b;
    s->len = len;
    return true;
}

/* ---------------------------------------------------------------------------------------------
 * Small helpers */

char *gguf_str_dup(gguf_str s)
{
    if (s.len >= SIZE_MAX)
        return NULL;
    char *out = malloc((size_t)s.len + 1);
    if (out) {
        memcpy(out, s.ptr, (size_t)s.len);
        out[s.len] = 0;
    }
    return out;
}

bool gguf_str_eq(gguf_str s, const char *c)
{
    size_t n = strlen(c);
    return s.len == n && memcmp(s.ptr, c, n) == 0;
}

/* A printable, shortened form of a name from the file for messages (it may hold anything). */
static const char *printable(gguf_str s, char *buf, size_t cap)
{
    size_t k = 0;
    for (uint64_t i = 0; i < s.len; i++) {
        if (k + 8 >= cap) {                 /* room for "\\xNN" or "..." and the NUL */
            memcpy(buf + k, "...", 3);
            k += 3;
            break;
        }
        unsigned char ch = (unsigned char)s.ptr[i];
        if (ch >= 0x20 && ch < 0x7f)
            buf[k++] = (char)ch;
        else
            k += (size_t)snprintf(buf + k, cap - k, "\\x%02x", ch);
    }
    buf[k] = 0;
    return buf;
}

const char *gguf_shape_str(const uint64_t *ne, int n_dims, char *buf, size_t cap)
{
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < n_dims && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%llu", d ? "," : "",
                              (unsigned long long)ne[d]);
    if (k < cap)
        snprintf(buf + k, cap - k, "]");
    return buf;
}

/* qsort_r comparators over indices into the file's tables. */
static int cmp_kv_key(const void *a, const void *b, void *ctx)
{
    const gguf_file *f = ctx;
    return strcmp(f->kvs[*(const size_t *)a].key, f->kvs[*(const size_t *)b].key);
}

static int cmp_tensor_name(const void *a, const void *b, void *ctx)
{
    const gguf_file *f = ctx;
    return strcmp(f->tensors[*(const size_t *)a].name, f->tensors[*(const size_t *)b].name);
}

static int cmp_tensor_offset(const void *a, const void *b, void *ctx)
{
    const gguf_file *f = ctx;
    const gguf_tensor *x = &f->tensors[*(const size_t *)a], *y = &f->tensors[*(const size_t *)b];
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* ---------------------------------------------------------------------------------------------
 * Parsing */

static bool parse_array(cursor *c, gguf_kv *kv, const char *what)
{
    uint32_t et;
    uint64_t n;
    if (!cur_u32(c, &et, what) || !cur_u64(c, &n, what))
        return false;
    if (et == GGUF_TYPE_ARRAY)
        return tt_fail(c->err, TT_ERR_FORMAT, "%s: %s: nested arrays are not supported",
                       c->fname, what), false;
    if (et >= GGUF_TYPE_END)
        return tt_fail(c->err, TT_ERR_FORMAT, "%s: %s: unknown array element type %u", c->fname,
                       what, et), false;
    kv->arr.type = (gguf_type)et;
    kv->arr.n = n;
    kv->arr.data = c->p + c->pos;
    uint64_t left = c->size - c->pos;
    if (et != GGUF_TYPE_STRING) {
        uint32_t es = gguf_types[et].size;
        if (n > left / es) {
            char need[32] = "more than 2^64";
            if (n <= UINT64_MAX / es)
                snprintf(need, sizeof need, "%llu", (unsigned long long)(n * es));
            return tt_fail(c->err, TT_ERR_FORMAT,
                           "%s: %s: %llu elements of %s need %s bytes, %llu are left in the file",
                           c->fname, what, (unsigned long long)n, gguf_types[et].name, need,
                           (unsigned long long)left), false;
        }
        const uint8_t *b;
        return cur_take(c, n * es, &b, what);
    }
    if (n > GGUF_MAX_STRINGS)
        return tt_fail(c->err, TT_ERR_FORMAT, "%s: %s: %llu strings is above the limit of %u",
                       c->fname, what, (unsigned long long)n, GGUF_MAX_STRINGS), false;
    if (n > left / 8)
        return tt_fail(c->err, TT_ERR_FORMAT,
                       "%s: %s: %llu strings need at least %llu bytes, %llu are left in the file",
                       c->fname, what, (unsigned long long)n, (unsigned long long)(n * 8),
                       (unsigned long long)left), false;
    uint64_t *offs = malloc((n ? n : 1) * sizeof *offs);
    if (!offs)
        return tt_fail(c->err, TT_ERR_NOMEM, "%s: %s: out of memory for %llu strings", c->fname,
                       what, (unsigned long long)n), false;
    kv->arr.str_offsets = offs;
    uint64_t start = c->pos;
    for (uint64_t i = 0; i < n; i++) {
        offs[i] = c->pos - start;
        uint64_t rest = c->size - c->pos, len = 0;
        if (rest >= 8)
            memcpy(&len, c->p + c->pos, 8);
        if (rest < 8 || len > rest - 8) {   /* the common path formats no message */
            char elem[300];
            snprintf(elem, sizeof elem, "%.200s: element %llu", what, (unsigned long long)i);
            gguf_str s;
            cur_str(c, &s, elem);       /* fails, with the message */
            return false;
        }
        c->pos += 8 + len;
    }
    return true;
}

static bool parse_kv(cursor *c, gguf_kv *kv, uint64_t index)
{
    char what[200], shown[120];
    snprintf(what, sizeof what, "key #%llu", (unsigned long long)index);
    gguf_str key;
    if (!cur_str(c, &key, what))
        return false;
    if (key.len == 0 || memchr(key.ptr, 0, (size_t)key.len))
        return tt_fail(c->err, TT_ERR_FORMAT, "%s: key #%llu: \"%s\" is %s", c->fname,
                       (unsigned long long)index, printable(key, shown, sizeof shown),
                       key.len ? "not a valid key (it holds a NUL byte)" : "empty"), false;
    kv->key = gguf_str_dup(key);
    if (!kv->key)
        return tt_fail(c->err, TT_ERR_NOMEM, "%s: key #%llu: out of memory", c->fname,
                       (unsigned long long)index), false;
    snprintf(what, sizeof what, "key %s", printable(key, shown, sizeof shown));
    uint32_t t;
    if (!cur_u32(c, &t, what))
        return false;
    if (t >= GGUF_TYPE_END)
        return tt_fail(c->err, TT_ERR_FORMAT, "%s: %s: unknown value type %u", c->fname, what,
                       t), false;
    kv->type = (gguf_type)t;
    kv->value = c->p + c->pos;
    if (t == GGUF_TYPE_STRING)
        return cur_str(c, &kv->str, what);
    if (t == GGUF_TYPE_ARRAY)
        return parse_array(c, kv, what);
    const uint8_t *b;
    if (!cur_take(c, gguf_types[t].size, &b, what))
        return false;
    if (t == GGUF_TYPE_BOOL && *b > 1)
        return tt_fail(c->err, TT_ERR_FORMAT, "%s: %s: bool value %u (expected 0 or 1)",
                       c->fname, what, *b), false;
    return true;
}

static bool parse_tensor_info(cursor *c, gguf_tensor *t, uint64_t index)
{
    char what[200], shown[120];
    snprintf(what, sizeof what, "tensor #%llu", (unsigned long long)index);
    gguf_str name;
    if (!cur_str(c, &name, what))
        return false;
    if (name.len == 0 || name.len >= GGUF_MAX_NAME || memchr(name.ptr, 0, (size_t)name.len))
        return tt_fail(c->err, TT_ERR_FORMAT,
                       "%s: tensor #%llu: name \"%s\" (%llu bytes) is not a valid tensor name "
                       "(1 to %d bytes, no NUL)", c->fname, (unsigned long long)index,
                       printable(name, shown, sizeof shown), (unsigned long long)name.len,
                       GGUF_MAX_NAME - 1), false;
    t->name = gguf_str_dup(name);
    if (!t->name)
        return tt_fail(c->err, TT_ERR_NOMEM, "%s: %s: out of memory", c->fname, what), false;
    snprintf(what, sizeof what, "tensor %s", t->name);
    uint32_t n_dims;
    if (!cur_u32(c, &n_dims, what))
        return false;
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return tt_fail(c->err, TT_ERR_FORMAT, "%s: %s: n_dims %u (expected 1 to %d)", c->fname,
                       what, n_dims, GGUF_MAX_DIMS), false;
    t->n_dims = (int)n_dims;
    uint64_t numel = 1;
    bool overflow = false;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims)
            continue;
        if (!cur_u64(c, &t->ne[d], what))
            return false;
        if (t->ne[d] > (uint64_t)INT64_MAX)
            return tt_fail(c->err, TT_ERR_FORMAT, "%s: %s: ne[%d] = %llu is above 2^63",
                           c->fname, what, d, (unsigned long long)t->ne[d]), false;
        if (t->ne[d] && numel > (uint64_t)INT64_MAX / t->ne[d])
            overflow = true;
        numel *= t->ne[d];
    }
    char shape[128];
    gguf_shape_str(t->ne, t->n_dims, shape, sizeof shape);
    if (overflow)
        return tt_fail(c->err, TT_ERR_FORMAT, "%s: %s: shape %s has more than 2^63 elements",
                       c->fname, what, shape), false;
    t->numel = numel;
    if (!cur_u32(c, &t->type, what))
        return false;
    if (!quant_type_known(t->type))
        return tt_fail(c->err, TT_ERR_FORMAT, "%s: %s: unknown ggml type %u", c->fname, what,
                       t->type), false;
    uint32_t blk = quant_block_size(t->type);
    if (t->ne[0] % blk != 0)
        return tt_fail(c->err, TT_ERR_FORMAT,
                       "%s: %s: row length ne[0] = %llu is not a multiple of %s's block of %u",
                       c->fname, what, (unsigned long long)t->ne[0], quant_type_name(t->type),
                       blk), false;
    if (!quant_row_bytes(t->type, numel, &t->nbytes))
        return tt_fail(c->err, TT_ERR_FORMAT, "%s: %s: shape %s of %s overflows its byte size",
                       c->fname, what, shape, quant_type_name(t->type)), false;
    return cur_u64(c, &t->offset, what);
}

/* Everything after the key/values: alignment, tensor infos, the data section's bounds. */
static bool parse_tensors(cursor *c, gguf_file *f, uint64_t n_tensors)
{
    const gguf_kv *al = gguf_find_kv(f, "general.alignment");
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (al) {
        uint32_t a;
        if (al->type != GGUF_TYPE_UINT32)
            return tt_fail(c->err, TT_ERR_FORMAT,
                           "%s: key general.alignment: expected uint32, got %s", c->fname,
                           gguf_type_name(al->type)), false;
        memcpy(&a, al->value, 4);
        if (a == 0 || (a & (a - 1)) != 0)
            return tt_fail(c->err, TT_ERR_FORMAT,
                           "%s: key general.alignment: %u is not a power of two", c->fname, a),
                   false;
        f->alignment = a;
    }
    /* The smallest tensor info: an empty name (refused later, but it bounds the count), one
     * dimension, the type and the offset. */
    uint64_t left = c->size - c->pos;
    if (n_tensors > GGUF_MAX_TENSORS)
        return tt_fail(c->err, TT_ERR_FORMAT, "%s: n_tensors %llu is above the limit of %u",
                       c->fname, (unsigned long long)n_tensors, GGUF_MAX_TENSORS), false;
    if (n_tensors > left / (8 + 4 + 8 + 4 + 8))
        return tt_fail(c->err, TT_ERR_FORMAT,
                       "%s: n_tensors %llu: the %llu bytes left cannot hold that many tensor "
                       "infos", c->fname, (unsigned long long)n_tensors,
                       (unsigned long long)left), false;
    f->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *f->tensors);
    f->tensor_by_name = malloc((n_tensors ? n_tensors : 1) * sizeof *f->tensor_by_name);
    if (!f->tensors || !f->tensor_by_name)
        return tt_fail(c->err, TT_ERR_NOMEM, "%s: out of memory for %llu tensors", c->fname,
                       (unsigned long long)n_tensors), false;
    for (uint64_t i = 0; i < n_tensors; i++) {
        f->n_tensors = i + 1;
        if (!parse_tensor_info(c, &f->tensors[i], i))
            return false;
        f->tensor_by_name[i] = i;
    }
    uint64_t pad = (f->alignment - c->pos % f->alignment) % f->alignment;
    f->data_offset = c->pos + pad;
    if (n_tensors == 0)
        return true;
    if (f->data_offset > c->size)
        return tt_fail(c->err, TT_ERR_FORMAT,
                       "%s: data section: starts at offset %llu, past the end of the file (%llu "
                       "bytes)", c->fname, (unsigned long long)f->data_offset,
                       (unsigned long long)c->size), false;
    uint64_t data_size = c->size - f->data_offset;
    for (size_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (t->offset % f->alignment != 0)
            return tt_fail(c->err, TT_ERR_FORMAT,
                           "%s: tensor %s: offset %llu is not a multiple of the alignment %u",
                           c->fname, t->name, (unsigned long long)t->offset, f->alignment),
                   false;
        if (t->offset > data_size || t->nbytes > data_size - t->offset)
            return tt_fail(c->err, TT_ERR_FORMAT,
                           "%s: tensor %s: offset %llu + %llu bytes runs past the end of the data "
                           "section (%llu bytes)", c->fname, t->name,
                           (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                           (unsigned long long)data_size), false;
        t->data = c->p + f->data_offset + t->offset;
    }
    qsort_r(f->tensor_by_name, f->n_tensors, sizeof *f->tensor_by_name, cmp_tensor_name, f);
    for (size_t i = 1; i < f->n_tensors; i++)
        if (strcmp(f->tensors[f->tensor_by_name[i]].name,
                   f->tensors[f->tensor_by_name[i - 1]].name) == 0)
            return tt_fail(c->err, TT_ERR_FORMAT, "%s: tensor %s: the name appears twice",
                           c->fname, f->tensors[f->tensor_by_name[i]].name), false;
    size_t *by_off = malloc(f->n_tensors * sizeof *by_off);
    if (!by_off)
        return tt_fail(c->err, TT_ERR_NOMEM, "%s: out of memory", c->fname), false;
    size_t m = 0;
    for (size_t i = 0; i < f->n_tensors; i++)
        if (f->tensors[i].nbytes)
            by_off[m++] = i;
    qsort_r(by_off, m, sizeof *by_off, cmp_tensor_offset, f);
    for (size_t i = 1; i < m; i++) {
        const gguf_tensor *a = &f->tensors[by_off[i - 1]], *b = &f->tensors[by_off[i]];
        if (b->offset < a->offset + a->nbytes) {
            tt_fail(c->err, TT_ERR_FORMAT,
                    "%s: tensor %s: offset %llu overlaps tensor %s (offset %llu, %llu bytes)",
                    c->fname, b->name, (unsigned long long)b->offset, a->name,
                    (unsigned long long)a->offset, (unsigned long long)a->nbytes);
            free(by_off);
            return false;
        }
    }
    free(by_off);
    return true;
}

static void find_quantization(gguf_file *f);

static bool parse(gguf_file *f, tt_error *err)
{
    cursor c = {.p = f->base, .pos = 0, .size = f->size, .fname = f->name, .err = err};
    const uint8_t *magic;
    if (f->size < 4 + 4 + 8 + 8)
        return tt_fail(err, TT_ERR_FORMAT,
                       "%s: header: the file is %llu bytes, too short for a GGUF header (24)",
                       f->name, (unsigned long long)f->size), false;
    cur_take(&c, 4, &magic, "magic");
    if (memcmp(magic, "GGUF", 4) != 0)
        return tt_fail(err, TT_ERR_FORMAT,
                       "%s: magic: not a GGUF file (it starts with %02x %02x %02x %02x, not "
                       "\"GGUF\")", f->name, magic[0], magic[1], magic[2], magic[3]), false;
    cur_u32(&c, &f->version, "version");
    if (f->version != 2 && f->version != 3) {
        if (f->version != 0 && (f->version & 0xffffu) == 0)
            return tt_fail(err, TT_ERR_FORMAT,
                           "%s: version: a big-endian GGUF file (version 0x%08x) is not supported",
                           f->name, f->version), false;
        return tt_fail(err, TT_ERR_FORMAT,
                       "%s: version: GGUF version %u is not supported (2 and 3 are)", f->name,
                       f->version), false;
    }
    uint64_t n_tensors, n_kv;
    cur_u64(&c, &n_tensors, "n_tensors");
    cur_u64(&c, &n_kv, "n_kv");
    uint64_t left = c.size - c.pos;
    if (n_kv > GGUF_MAX_KV)
        return tt_fail(err, TT_ERR_FORMAT, "%s: n_kv %llu is above the limit of %u", f->name,
                       (unsigned long long)n_kv, GGUF_MAX_KV), false;
    if (n_kv > left / (8 + 4 + 1))
        return tt_fail(err, TT_ERR_FORMAT,
                       "%s: n_kv %llu: the %llu bytes left cannot hold that many key/values",
                       f->name, (unsigned long long)n_kv, (unsigned long long)left), false;
    f->kvs = calloc(n_kv ? n_kv : 1, sizeof *f->kvs);
    f->kv_by_key = malloc((n_kv ? n_kv : 1) * sizeof *f->kv_by_key);
    if (!f->kvs || !f->kv_by_key)
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for %llu key/values", f->name,
                       (unsigned long long)n_kv), false;
    for (uint64_t i = 0; i < n_kv; i++) {
        f->n_kv = i + 1;
        if (!parse_kv(&c, &f->kvs[i], i))
            return false;
        f->kv_by_key[i] = i;
    }
    qsort_r(f->kv_by_key, f->n_kv, sizeof *f->kv_by_key, cmp_kv_key, f);
    for (size_t i = 1; i < f->n_kv; i++)
        if (strcmp(f->kvs[f->kv_by_key[i]].key, f->kvs[f->kv_by_key[i - 1]].key) == 0)
            return tt_fail(err, TT_ERR_FORMAT, "%s: key %s: the key appears twice", f->name,
                           f->kvs[f->kv_by_key[i]].key), false;
    if (!parse_tensors(&c, f, n_tensors))
        return false;
    const gguf_kv *arch = gguf_find_kv(f, "general.architecture");
    f->architecture = arch && arch->type == GGUF_TYPE_STRING ? gguf_str_dup(arch->str)
                                                             : strdup("");
    if (!f->architecture)
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", f->name), false;
    find_quantization(f);
    return true;
}

/* ---------------------------------------------------------------------------------------------
 * Open and close */

static tt_status open_common(gguf_file *f, gguf_file **out, tt_error *err)
{
    if (!f->name || !parse(f, err)) {
        if (!f->name)
            tt_fail(err, TT_ERR_NOMEM, "gguf: out of memory");
        tt_status s = err ? err->status : TT_ERR_FORMAT;
        gguf_close(f);
        return s == TT_OK ? TT_ERR_FORMAT : s;
    }
    *out = f;
    return TT_OK;
}

tt_status gguf_open_buffer(const void *buf, size_t len, const char *name, gguf_file **out,
                           tt_error *err)
{
    *out = NULL;
    gguf_file *f = calloc(1, sizeof *f);
    if (!f)
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", name);
    f->name = strdup(name);
    f->base = buf;
    f->size = len;
    return open_common(f, out, err);
}

tt_status gguf_open(const char *path, gguf_file **out, tt_error *err)
{
    *out = NULL;
    void *map;
    size_t len;
    tt_status s = util_map_file(path, &map, &len, err);
    if (s != TT_OK)
        return s;
    gguf_file *f = calloc(1, sizeof *f);
    if (!f || !(f->name = strdup(path))) {
        if (map)
            munmap(map, len);
        free(f);
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", path);
    }
    f->size = len;
    f->map = map;
    f->map_len = len;
    f->base = map ? map : (const uint8_t *)"";
    return open_common(f, out, err);
}

void gguf_release(const gguf_file *f, const void *p, size_t n)
{
    if (!f || !f->map || n == 0)
        return;
    const uintptr_t lo = (uintptr_t)f->map, hi = lo + f->map_len, a = (uintptr_t)p;
    if (a < lo || a > hi || n > hi - a)
        return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (a + page - 1) & ~(page - 1), end = (a + n) & ~(page - 1);
    if (end > start)
        madvise((void *)start, end - start, MADV_DONTNEED);
}

void gguf_close(gguf_file *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n_kv; i++) {
        free((char *)f->kvs[i].key);
        free((uint64_t *)f->kvs[i].arr.str_offsets);
    }
    for (size_t i = 0; i < f->n_tensors; i++)
        free((char *)f->tensors[i].name);
    free(f->kvs);
    free(f->kv_by_key);
    free(f->tensors);
    free(f->tensor_by_name);
    free(f->architecture);
    if (f->map)
        munmap(f->map, f->map_len);
    free(f->name);
    free(f);
}

const char *gguf_name(const gguf_file *f) { return f->name; }
uint32_t gguf_version(const gguf_file *f) { return f->version; }
uint32_t gguf_alignment(const gguf_file *f) { return f->alignment; }
uint64_t gguf_data_offset(const gguf_file *f) { return f->data_offset; }
uint64_t gguf_file_size(const gguf_file *f) { return f->size; }

/* ---------------------------------------------------------------------------------------------
 * Metadata */

size_t gguf_kv_count(const gguf_file *f) { return f->n_kv; }
const gguf_kv *gguf_kv_at(const gguf_file *f, size_t i) { return &f->kvs[i]; }

/* The index i of the item named name in items (n of stride bytes, each with its name as a
 * const char * at name_off), searched through order (the indices sorted by name); n if none. */
static size_t find_sorted(const void *items, size_t stride, size_t name_off, const size_t *order,
                          size_t n, const char *name)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *at;
        memcpy(&at, (const char *)items + order[mid] * stride + name_off, sizeof at);
        int c = strcmp(name, at);
        if (c == 0)
            return order[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return n;
}

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key)
{
    size_t i = find_sorted(f->kvs, sizeof *f->kvs, offsetof(gguf_kv, key), f->kv_by_key, f->n_kv,
                           key);
    return i < f->n_kv ? &f->kvs[i] : NULL;
}

static const gguf_kv *need_kv(const gguf_file *f, const char *key, tt_error *err)
{
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv)
        tt_fail(err, TT_ERR_FORMAT, "%s: key %s: missing", f->name, key);
    return kv;
}

static tt_status wrong_type(const gguf_file *f, const gguf_kv *kv, const char *expected,
                            tt_error *err)
{
    if (kv->type == GGUF_TYPE_ARRAY)
        return tt_fail(err, TT_ERR_FORMAT, "%s: key %s: expected %s, got an array of %s",
                       f->name, kv->key, expected, gguf_type_name(kv->arr.type));
    return tt_fail(err, TT_ERR_FORMAT, "%s: key %s: expected %s, got %s", f->name, kv->key,
                   expected, gguf_type_name(kv->type));
}

/* An integer value as (negative?, magnitude); false when kv is not an integer. */
static bool kv_integer(const gguf_kv *kv, bool *neg, uint64_t *mag)
{
    const uint8_t *v = kv->value;
    int64_t s = 0;
    uint64_t u = 0;
    switch (kv->type) {
    case GGUF_TYPE_UINT8: u = v[0]; break;
    case GGUF_TYPE_UINT16: { uint16_t x; memcpy(&x, v, 2); u = x; break; }
    case GGUF_TYPE_UINT32: { uint32_t x; memcpy(&x, v, 4); u = x; break; }
    case GGUF_TYPE_UINT64: memcpy(&u, v, 8); break;
    case GGUF_TYPE_INT8: s = (int8_t)v[0]; goto sgn;
    case GGUF_TYPE_INT16: { int16_t x; memcpy(&x, v, 2); s = x; goto sgn; }
    case GGUF_TYPE_INT32: { int32_t x; memcpy(&x, v, 4); s = x; goto sgn; }
    case GGUF_TYPE_INT64: memcpy(&s, v, 8); goto sgn;
    default: return false;
    }
    *neg = false;
    *mag = u;
    return true;
sgn:
    *neg = s < 0;
    *mag = s < 0 ? (uint64_t)(-(s + 1)) + 1 : (uint64_t)s;
    return true;
}

static tt_status get_integer(const gguf_file *f, const char *key, bool *neg, uint64_t *mag,
                             const gguf_kv **kvp, tt_error *err)
{
    const gguf_kv *kv = need_kv(f, key, err);
    if (!kv)
        return TT_ERR_FORMAT;
    if (!kv_integer(kv, neg, mag))
        return wrong_type(f, kv, "an integer", err);
    *kvp = kv;
    return TT_OK;
}

static tt_status out_of_range(const gguf_file *f, const char *key, bool neg, uint64_t mag,
                              const char *range, tt_error *err)
{
    return tt_fail(err, TT_ERR_FORMAT, "%s: key %s: %s%llu is outside %s", f->name, key,
                   neg ? "-" : "", (unsigned long long)mag, range);
}

tt_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, tt_error *err)
{
    bool neg;
    uint64_t mag;
    const gguf_kv *kv;
    tt_status s = get_integer(f, key, &neg, &mag, &kv, err);
    if (s != TT_OK)
        return s;
    if (neg || mag > UINT32_MAX)
        return out_of_range(f, key, neg, mag, "uint32", err);
    *out = (uint32_t)mag;
    return TT_OK;
}

tt_status gguf_get_i32(const gguf_file *f, const char *key, int32_t *out, tt_error *err)
{
    bool neg;
    uint64_t mag;
    const gguf_kv *kv;
    tt_status s = get_integer(f, key, &neg, &mag, &kv, err);
    if (s != TT_OK)
        return s;
    if (neg ? mag > (uint64_t)INT32_MAX + 1 : mag > INT32_MAX)
        return out_of_range(f, key, neg, mag, "int32", err);
    *out = neg ? (int32_t)(-(int64_t)mag) : (int32_t)mag;
    return TT_OK;
}

tt_status gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out, tt_error *err)
{
    bool neg;
    uint64_t mag;
    const gguf_kv *kv;
    tt_status s = get_integer(f, key, &neg, &mag, &kv, err);
    if (s != TT_OK)
        return s;
    if (neg)
        return out_of_range(f, key, neg, mag, "uint64", err);
    *out = mag;
    return TT_OK;
}

tt_status gguf_get_f32(const gguf_file *f, const char *key, float *out, tt_error *err)
{
    const gguf_kv *kv = need_kv(f, key, err);
    if (!kv)
        return TT_ERR_FORMAT;
    if (kv->type == GGUF_TYPE_FLOAT32) {
        memcpy(out, kv->value, 4);
    } else if (kv->type == GGUF_TYPE_FLOAT64) {
        double d;
        memcpy(&d, kv->value, 8);
        *out = (float)d;
    } else {
        return wrong_type(f, kv, "a float", err);
    }
    return TT_OK;
}

tt_status gguf_get_bool(const gguf_file *f, const char *key, bool *out, tt_error *err)
{
    const gguf_kv *kv = need_kv(f, key, err);
    if (!kv)
        return TT_ERR_FORMAT;
    if (kv->type != GGUF_TYPE_BOOL)
        return wrong_type(f, kv, "bool", err);
    *out = kv->value[0] != 0;
    return TT_OK;
}

tt_status gguf_get_string(const gguf_file *f, const char *key, gguf_str *out, tt_error *err)
{
    const gguf_kv *kv = need_kv(f, key, err);
    if (!kv)
        return TT_ERR_FORMAT;
    if (kv->type != GGUF_TYPE_STRING)
        return wrong_type(f, kv, "string", err);
    *out = kv->str;
    return TT_OK;
}

tt_status gguf_get_array(const gguf_file *f, const char *key, gguf_type elem, gguf_array *out,
                         tt_error *err)
{
    const gguf_kv *kv = need_kv(f, key, err);
    if (!kv)
        return TT_ERR_FORMAT;
    char expected[64];
    snprintf(expected, sizeof expected, "an array of %s",
             elem == GGUF_TYPE_END ? "any type" : gguf_type_name(elem));
    if (kv->type != GGUF_TYPE_ARRAY || (elem != GGUF_TYPE_END && kv->arr.type != elem))
        return wrong_type(f, kv, expected, err);
    *out = kv->arr;
    return TT_OK;
}

float gguf_array_f32(const gguf_array *a, uint64_t i)
{
    float v;
    memcpy(&v, a->data + 4 * i, 4);
    return v;
}

int32_t gguf_array_i32(const gguf_array *a, uint64_t i)
{
    int32_t v;
    memcpy(&v, a->data + 4 * i, 4);
    return v;
}

uint32_t gguf_array_u32(const gguf_array *a, uint64_t i)
{
    uint32_t v;
    memcpy(&v, a->data + 4 * i, 4);
    return v;
}

gguf_str gguf_array_str(const gguf_array *a, uint64_t i)
{
    const uint8_t *p = a->data + a->str_offsets[i];
    uint64_t len;
    memcpy(&len, p, 8);
    return (gguf_str){(const char *)p + 8, len};
}

/* ---------------------------------------------------------------------------------------------
 * Tensors */

size_t gguf_tensor_count(const gguf_file *f) { return f->n_tensors; }
const gguf_tensor *gguf_tensor_at(const gguf_file *f, size_t i) { return &f->tensors[i]; }

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name)
{
    size_t i = find_sorted(f->tensors, sizeof *f->tensors, offsetof(gguf_tensor, name),
                           f->tensor_by_name, f->n_tensors, name);
    return i < f->n_tensors ? &f->tensors[i] : NULL;
}

uint64_t gguf_tensor_row_bytes(const gguf_tensor *t)
{
    uint64_t b = 0;
    quant_row_bytes(t->type, t->ne[0], &b);
    return b;
}

const void *gguf_tensor_row(const gguf_tensor *t, uint64_t r)
{
    return (const uint8_t *)t->data + r * gguf_tensor_row_bytes(t);
}

static int trimmed_dims(const uint64_t *ne, int n)
{
    while (n > 1 && ne[n - 1] == 1)
        n--;
    return n;
}

tt_status gguf_tensor_check(const gguf_file *f, const char *name, int n_dims, const uint64_t *ne,
                            const gguf_tensor **out, tt_error *err)
{
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t)
        return tt_fail(err, TT_ERR_FORMAT, "%s: tensor %s: missing", f->name, name);
    if (!quant_type_supported(t->type))
        return tt_fail(err, TT_ERR_UNSUPPORTED,
                       "%s: tensor %s: type %s is not supported (supported: %s)", f->name, name,
                       quant_type_name(t->type), quant_supported_names());
    int want = trimmed_dims(ne, n_dims), have = trimmed_dims(t->ne, t->n_dims);
    bool same = want == have;
    for (int d = 0; same && d < want; d++)
        same = ne[d] == t->ne[d];
    if (!same) {
        char a[128], b[128];
        return tt_fail(err, TT_ERR_FORMAT, "%s: tensor %s: expected %s, got %s", f->name, name,
                       gguf_shape_str(ne, want, a, sizeof a),
                       gguf_shape_str(t->ne, have, b, sizeof b));
    }
    const char *which = "d";
    int64_t bad = quant_row_bad_scale(t->type, t->data, t->numel, &which);
    if (bad >= 0) {
        uint64_t per_row = t->ne[0] / quant_block_size(t->type);
        uint16_t h;
        const uint8_t *blk = (const uint8_t *)t->data + (uint64_t)bad * quant_block_bytes(t->type);
        memcpy(&h, blk + (t->type == QUANT_Q6_K ? 208 : 0) + (which[1] ? 2 : 0), 2);
        return tt_fail(err, TT_ERR_FORMAT, "%s: tensor %s: block %lld (row %llu): scale %s is %s",
                       f->name, name, (long long)bad,
                       (unsigned long long)((uint64_t)bad / per_row), which,
                       (h & 0x3ff) ? "NaN" : "infinite");
    }
    if (out)
        *out = t;
    return TT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * What a listing shows */

const char *gguf_architecture(const gguf_file *f) { return f->architecture; }

uint64_t gguf_parameter_count(const gguf_file *f)
{
    uint64_t n = 0;
    const gguf_kv *kv = gguf_find_kv(f, "general.parameter_count");
    bool neg;
    if (kv && kv_integer(kv, &neg, &n) && !neg && n > 0)
        return n;
    n = 0;
    for (size_t i = 0; i < f->n_tensors; i++)
        n += f->tensors[i].numel;
    return n;
}

const char *gguf_quantization(const gguf_file *f) { return f->quantization; }

double gguf_bits_per_weight(const gguf_file *f)
{
    double bytes = 0, n = 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        bytes += (double)f->tensors[i].nbytes;
        n += (double)f->tensors[i].numel;
    }
    return n > 0 ? 8.0 * bytes / n : 0.0;
}

static void find_quantization(gguf_file *f)
{
    const gguf_kv *kv = gguf_find_kv(f, "general.file_type");
    bool neg;
    uint64_t ft;
    if (kv && kv_integer(kv, &neg, &ft) && !neg && ft <= UINT32_MAX &&
        quant_ftype_name((uint32_t)ft)) {
        snprintf(f->quantization, sizeof f->quantization, "%s", quant_ftype_name((uint32_t)ft));
        return;
    }
    uint64_t bytes[QUANT_TYPE_END] = {0};
    for (size_t i = 0; i < f->n_tensors; i++)
        if (f->tensors[i].n_dims >= 2)
            bytes[f->tensors[i].type] += f->tensors[i].nbytes;
    int best = -1;
    for (int t = 0; t < QUANT_TYPE_END; t++)
        if (bytes[t] && (best < 0 || bytes[t] > bytes[best]))
            best = t;
    snprintf(f->quantization, sizeof f->quantization, "%s",
             best >= 0 ? quant_type_name((uint32_t)best) : "?");
}
