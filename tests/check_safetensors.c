/* check_safetensors.c: malformed .safetensors files are refused, each with its own message naming
 * the file, tensor and field; valid ones (scalars, empty tensors, metadata, unaligned data, holes)
 * are read back exactly. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/model/safetensors.h"
#include "tests/testutil.h"

/* ---------------------------------------------------------------------------------------------
 * Building files in memory */

/* 8-byte little-endian n + the header text + data_len bytes (byte i of the data is i & 0xff). */
static unsigned char *make_st(const char *hdr, size_t data_len, size_t *len)
{
    size_t n = strlen(hdr);
    *len = 8 + n + data_len;
    unsigned char *b = malloc(*len ? *len : 1);
    ck_assert_ptr_nonnull(b);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(b + 8, hdr, n);
    for (size_t i = 0; i < data_len; i++)
        b[8 + n + i] = (unsigned char)i;
    return b;
}

/* Opens buf and expects failure with a message containing want; returns nothing, asserts all. */
static void expect_reject(const unsigned char *buf, size_t len, const char *want)
{
    safetensors_file *f = (safetensors_file *)0x1;
    tt_error err = {0};
    tt_status s = safetensors_open_buffer(buf, len, "t.safetensors", &f, &err);
    ck_assert_msg(s == TT_ERR_FORMAT, "expected a format error containing '%s', got status %d (%s)",
                  want, (int)s, err.msg);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(err.msg, want) != NULL, "message '%s' lacks '%s'", err.msg, want);
    ck_assert_msg(strncmp(err.msg, "t.safetensors: ", 15) == 0, "message '%s' does not name the file",
                  err.msg);
}

static safetensors_file *expect_open(const unsigned char *buf, size_t len)
{
    safetensors_file *f = NULL;
    tt_error err = {0};
    tt_status s = safetensors_open_buffer(buf, len, "t.safetensors", &f, &err);
    ck_assert_msg(s == TT_OK, "valid file refused: %s", err.msg);
    ck_assert_ptr_nonnull(f);
    return f;
}

/* ---------------------------------------------------------------------------------------------
 * Malformed headers: one row each, with the substring that tells the user what is wrong. */

static const struct {
    const char *what;
    const char *hdr;
    size_t data_len;
    const char *want;
} bad_headers[] = {
    {"not JSON", "{\"a\": {\"dtype\": ", 0, "header is not valid JSON"},
    {"JSON array", "[1, 2]", 0, "header is an array, not a JSON object"},
    {"JSON string", "\"x\"", 0, "header is a string, not a JSON object"},
    {"trailing garbage", "{}  x", 0, "data after the JSON value"},
    {"NUL inside the header", "{}\0\0", 0, "data after the JSON value"},
    {"entry not an object", "{\"a\": 5}", 0, "tensor a: entry is a number, not a JSON object"},
    {"entry is an array", "{\"a\": [1]}", 0, "tensor a: entry is an array, not a JSON object"},
    {"unknown dtype", "{\"a\": {\"dtype\": \"F128\", \"shape\": [1], \"data_offsets\": [0, 16]}}",
     16, "tensor a: unknown dtype 'F128'"},
    {"lowercase dtype", "{\"a\": {\"dtype\": \"f32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
     4, "tensor a: unknown dtype 'f32'"},
    {"dtype not a string", "{\"a\": {\"dtype\": 4, \"shape\": [1], \"data_offsets\": [0, 4]}}",
     4, "tensor a: dtype is a number, not a string"},
    {"missing dtype", "{\"a\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
     "tensor a: missing dtype"},
    {"missing shape", "{\"a\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 4,
     "tensor a: missing shape"},
    {"missing data_offsets", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4,
     "tensor a: missing data_offsets"},
    {"field twice", "{\"a\": {\"dtype\": \"F32\", \"dtype\": \"F16\", \"shape\": [1], "
     "\"data_offsets\": [0, 4]}}", 4, "tensor a: field dtype appears twice"},
    {"shape not an array", "{\"a\": {\"dtype\": \"F32\", \"shape\": \"4\", \"data_offsets\": [0, 16]}}",
     16, "tensor a: shape is a string, not an array"},
    {"negative dim", "{\"a\": {\"dtype\": \"F32\", \"shape\": [2, -1], \"data_offsets\": [0, 8]}}",
     8, "tensor a: shape[1] = -1 is negative"},
    {"fractional dim", "{\"a\": {\"dtype\": \"F32\", \"shape\": [2.5], \"data_offsets\": [0, 8]}}",
     8, "tensor a: shape[0] = 2.5 is not an integer"},
    {"string dim", "{\"a\": {\"dtype\": \"F32\", \"shape\": [\"2\"], \"data_offsets\": [0, 8]}}",
     8, "tensor a: shape[0] is a string, not an integer"},
    {"dim above 2^53", "{\"a\": {\"dtype\": \"U8\", \"shape\": [1e16], \"data_offsets\": [0, 8]}}",
     8, "tensor a: shape[0] = 10000000000000000 is above 2^53"},
    {"nine dims", "{\"a\": {\"dtype\": \"U8\", \"shape\": [1,1,1,1,1,1,1,1,1], "
     "\"data_offsets\": [0, 1]}}", 1, "tensor a: shape has 9 dimensions (at most 8)"},
    {"element count overflow", "{\"a\": {\"dtype\": \"U8\", \"shape\": [4294967296, 4294967296], "
     "\"data_offsets\": [0, 1]}}", 1,
     "tensor a: shape [4294967296,4294967296] has too many elements"},
    {"byte size overflow", "{\"a\": {\"dtype\": \"F64\", \"shape\": [4294967296, 536870912], "
     "\"data_offsets\": [0, 1]}}", 1, "tensor a: shape [4294967296,536870912] has too many elements"},
    {"data_offsets one integer", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4]}}",
     4, "tensor a: data_offsets is not an array of two integers"},
    {"data_offsets three integers", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], "
     "\"data_offsets\": [0, 4, 8]}}", 8, "tensor a: data_offsets is not an array of two integers"},
    {"data_offsets an object", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], "
     "\"data_offsets\": {\"begin\": 0}}}", 8, "tensor a: data_offsets is not an array of two"},
    {"data_offsets string", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], "
     "\"data_offsets\": [0, \"4\"]}}", 4, "tensor a: data_offsets[1] is a string, not an integer"},
    {"data_offsets negative", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], "
     "\"data_offsets\": [-4, 0]}}", 4, "tensor a: data_offsets[0] = -4 is negative"},
    {"data_offsets fractional", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], "
     "\"data_offsets\": [0, 4.5]}}", 8, "tensor a: data_offsets[1] = 4.5 is not an integer"},
    {"data_offsets huge", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], "
     "\"data_offsets\": [0, 1e300]}}", 8, "tensor a: data_offsets[1] = 1.0000000000000001e+300 is above 2^53"},
    {"begin after end", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]}}",
     8, "tensor a: data_offsets [8, 4]: begin is after end"},
    {"end past the data", "{\"a\": {\"dtype\": \"F32\", \"shape\": [16], \"data_offsets\": [0, 64]}}",
     32, "tensor a: data_offsets [0, 64] end past the data section (32 bytes)"},
    {"size mismatch", "{\"h.0.attn.c_attn.weight\": {\"dtype\": \"F32\", \"shape\": [4, 8], "
     "\"data_offsets\": [0, 100]}}", 128,
     "tensor h.0.attn.c_attn.weight: data_offsets [0, 100] hold 100 bytes, but F32 [4,8] needs 128"},
    {"scalar with no bytes", "{\"s\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [0, 0]}}",
     4, "tensor s: data_offsets [0, 0] hold 0 bytes, but F32 [] needs 4"},
    {"overlap", "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}, "
     "\"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [8, 24]}}", 24,
     "tensors a [0, 16] and b [8, 24] overlap"},
    {"overlap listed out of order", "{\"b\": {\"dtype\": \"U8\", \"shape\": [4], "
     "\"data_offsets\": [12, 16]}, \"a\": {\"dtype\": \"U8\", \"shape\": [8], "
     "\"data_offsets\": [0, 8]}, \"c\": {\"dtype\": \"U8\", \"shape\": [8], "
     "\"data_offsets\": [6, 14]}}", 16, "tensors a [0, 8] and c [6, 14] overlap"},
    {"same range twice", "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}, "
     "\"b\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}}", 4, "overlap"},
    {"duplicate name", "{\"w\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}, "
     "\"w\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [4, 8]}}", 8,
     "tensor w appears twice in the header"},
    {"metadata not an object", "{\"__metadata__\": \"pt\"}", 0,
     "__metadata__ is a string, not a JSON object"},
    {"metadata value not a string", "{\"__metadata__\": {\"format\": \"pt\", \"step\": 3}}", 0,
     "__metadata__: value of 'step' is a number, not a string"},
    {"metadata twice", "{\"__metadata__\": {}, \"__metadata__\": {}}", 0,
     "__metadata__ appears twice"},
};

START_TEST(rejects_malformed_header)
{
    size_t len;
    /* Headers with embedded NULs are spelled with explicit lengths. */
    const char *hdr = bad_headers[_i].hdr;
    size_t hlen = strcmp(bad_headers[_i].what, "NUL inside the header") == 0 ? 4 : strlen(hdr);
    len = 8 + hlen + bad_headers[_i].data_len;
    unsigned char *b = calloc(1, len);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(b + 8, hdr, hlen);
    expect_reject(b, len, bad_headers[_i].want);
    free(b);
}
END_TEST

START_TEST(size_mismatch_message_is_exact)
{
    size_t len;
    unsigned char *b = make_st("{\"h.0.attn.c_attn.weight\": {\"dtype\": \"F32\", \"shape\": [4, 8], "
                               "\"data_offsets\": [0, 100]}}", 128, &len);
    safetensors_file *f;
    tt_error err = {0};
    ck_assert_int_eq(safetensors_open_buffer(b, len, "model.safetensors", &f, &err), TT_ERR_FORMAT);
    ck_assert_str_eq(err.msg, "model.safetensors: tensor h.0.attn.c_attn.weight: data_offsets "
                              "[0, 100] hold 100 bytes, but F32 [4,8] needs 128");
    free(b);
}
END_TEST

START_TEST(rejects_empty_buffer)
{
    unsigned char b[1] = {0};
    expect_reject(b, 0, "empty file");
}
END_TEST

START_TEST(rejects_shorter_than_length_prefix)
{
    unsigned char b[5] = {2, 0, 0, 0, 0};
    expect_reject(b, sizeof b, "file is 5 bytes, shorter than the 8-byte header length");
}
END_TEST

START_TEST(rejects_header_length_over_limit)
{
    unsigned char b[64] = {0};
    uint64_t n = 100000001;
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(n >> (8 * i));
    expect_reject(b, sizeof b, "header length 100000001 exceeds the limit of 100000000 bytes");
    memset(b, 0xff, 8);         /* 2^64 - 1: must not wrap around in the bounds check */
    expect_reject(b, sizeof b, "exceeds the limit");
}
END_TEST

START_TEST(rejects_header_length_past_end)
{
    size_t len;
    unsigned char *b = make_st("{}", 0, &len);
    b[0] = 100;
    expect_reject(b, len, "header length 100 runs past the end of the file (10 bytes)");
    free(b);
}
END_TEST

START_TEST(rejects_empty_header)
{
    size_t len;
    unsigned char *b = make_st("", 16, &len);
    expect_reject(b, len, "header is not valid JSON");
    free(b);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Valid files */

static void put_f32(unsigned char *p, float v) { memcpy(p, &v, 4); }

static float get_f32(const void *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}

START_TEST(reads_scalar_empty_and_metadata)
{
    size_t len;
    unsigned char *b = make_st(
        "{\"__metadata__\": {\"format\": \"pt\"}, "
        "\"scalar\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [0, 4]}, "
        "\"empty\": {\"dtype\": \"F16\", \"shape\": [0, 7], \"data_offsets\": [2, 2]}, "
        "\"m\": {\"dtype\": \"BF16\", \"shape\": [2, 3], \"data_offsets\": [4, 16]}}   ", 16, &len);
    size_t data = len - 16;
    put_f32(b + data, 3.5f);
    safetensors_file *f = expect_open(b, len);
    ck_assert_uint_eq(safetensors_count(f), 3);     /* __metadata__ is not a tensor */
    ck_assert_str_eq(safetensors_at(f, 0)->name, "scalar");
    ck_assert_str_eq(safetensors_at(f, 1)->name, "empty");
    ck_assert_str_eq(safetensors_at(f, 2)->name, "m");
    const st_tensor *s = safetensors_find(f, "scalar");
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->ndim, 0);
    ck_assert_uint_eq(s->numel, 1);
    ck_assert_uint_eq(s->nbytes, 4);
    ck_assert(get_f32(s->data) == 3.5f);
    const st_tensor *e = safetensors_find(f, "empty");
    ck_assert_int_eq(e->dtype, ST_F16);
    ck_assert_int_eq(e->ndim, 2);
    ck_assert_uint_eq(e->shape[1], 7);
    ck_assert_uint_eq(e->numel, 0);
    ck_assert_uint_eq(e->nbytes, 0);
    const st_tensor *m = safetensors_find(f, "m");
    ck_assert_int_eq(m->dtype, ST_BF16);
    ck_assert_uint_eq(m->numel, 6);
    ck_assert_ptr_eq(m->data, b + data + 4);
    ck_assert_ptr_null(safetensors_find(f, "__metadata__"));
    ck_assert_ptr_null(safetensors_find(f, "missing"));
    ck_assert_ptr_null(safetensors_at(f, 3));
    safetensors_close(f);
    free(b);
}
END_TEST

START_TEST(accepts_file_without_tensors)
{
    size_t len;
    unsigned char *b = make_st("{}", 0, &len);
    safetensors_file *f = expect_open(b, len);
    ck_assert_uint_eq(safetensors_count(f), 0);
    ck_assert_ptr_null(safetensors_find(f, "x"));
    ck_assert_ptr_null(safetensors_at(f, 0));
    safetensors_close(f);
    free(b);
    b = make_st("{\"__metadata__\": {}}", 8, &len);     /* data nobody references */
    f = expect_open(b, len);
    ck_assert_uint_eq(safetensors_count(f), 0);
    safetensors_close(f);
    free(b);
}
END_TEST

START_TEST(reads_unaligned_data_exactly)
{
    /* Header of odd length and an odd offset: the F32 values start at an address that is not a
     * multiple of 4, so a float* read would be misaligned (UBSan reports it). */
    size_t len;
    unsigned char *b = make_st("{\"x\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [1, 13]}}",
                               13, &len);
    size_t data = len - 13;
    float want[3] = {1.25f, -2.0f, 1e-30f};
    for (int i = 0; i < 3; i++)
        put_f32(b + data + 1 + 4 * i, want[i]);
    safetensors_file *f = expect_open(b, len);
    const st_tensor *t = safetensors_find(f, "x");
    ck_assert(((uintptr_t)t->data & 3) != 0 || ((uintptr_t)b & 3) != 0);
    for (int i = 0; i < 3; i++)
        ck_assert(get_f32((const unsigned char *)t->data + 4 * i) == want[i]);
    /* the file offset (what rewriting a tensor in place seeks to) is 8 + header + begin */
    ck_assert_uint_eq(t->offset, (uint64_t)data + 1);
    ck_assert_ptr_eq(t->data, b + t->offset);
    safetensors_close(f);
    free(b);
}
END_TEST

START_TEST(accepts_holes_and_zero_size_inside_ranges)
{
    size_t len;
    unsigned char *b = make_st(
        "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}, "
        "\"z\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [2, 2]}, "
        "\"b\": {\"dtype\": \"I16\", \"shape\": [2], \"data_offsets\": [10, 14]}}", 20, &len);
    safetensors_file *f = expect_open(b, len);
    const st_tensor *t = safetensors_find(f, "b");
    ck_assert_uint_eq(((const unsigned char *)t->data)[0], 10);   /* data byte i holds i */
    safetensors_close(f);
    free(b);
}
END_TEST

START_TEST(accepts_every_known_dtype)
{
    static const char *names[] = {"BOOL", "U8", "I8", "I16", "U16", "F16", "BF16", "I32", "U32",
                                  "F32", "F64", "I64", "U64", "F8_E4M3", "F8_E5M2"};
    static const size_t sizes[] = {1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8, 1, 1};
    for (size_t i = 0; i < 15; i++) {
        char hdr[160];
        snprintf(hdr, sizeof hdr, "{\"t\": {\"dtype\": \"%s\", \"shape\": [3], "
                 "\"data_offsets\": [0, %zu]}}", names[i], 3 * sizes[i]);
        size_t len;
        unsigned char *b = make_st(hdr, 3 * sizes[i], &len);
        safetensors_file *f = expect_open(b, len);
        const st_tensor *t = safetensors_find(f, "t");
        ck_assert_int_eq(t->dtype, (int)i);
        ck_assert_str_eq(st_dtype_name(t->dtype), names[i]);
        ck_assert_uint_eq(st_dtype_size(t->dtype), sizes[i]);
        safetensors_close(f);
        free(b);
    }
}
END_TEST

START_TEST(finds_every_tensor_among_many)
{
    /* 300 tensors listed in reverse name order: lookups go through the sorted index. */
    size_t cap = 300 * 96 + 16, k = 0;
    char *hdr = malloc(cap);
    k += (size_t)snprintf(hdr + k, cap - k, "{");
    for (int i = 299; i >= 0; i--)
        k += (size_t)snprintf(hdr + k, cap - k, "%s\"t%03d\": {\"dtype\": \"U8\", \"shape\": [1], "
                              "\"data_offsets\": [%d, %d]}", i == 299 ? "" : ",", i, i, i + 1);
    snprintf(hdr + k, cap - k, "}");
    size_t len;
    unsigned char *b = make_st(hdr, 300, &len);
    safetensors_file *f = expect_open(b, len);
    ck_assert_uint_eq(safetensors_count(f), 300);
    for (int i = 0; i < 300; i++) {
        char nm[8];
        snprintf(nm, sizeof nm, "t%03d", i);
        const st_tensor *t = safetensors_find(f, nm);
        ck_assert_ptr_nonnull(t);
        ck_assert_uint_eq(*(const unsigned char *)t->data, (unsigned)i & 0xffu);
    }
    safetensors_close(f);
    free(b);
    free(hdr);
}
END_TEST

START_TEST(survives_random_corruption)
{
    /* Every mutation is either accepted or refused with a message; ASan/UBSan catch the rest. */
    size_t len;
    unsigned char *orig = make_st(
        "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],"
        "\"data_offsets\":[0,16]},\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[16,24]}}",
        24, &len);
    unsigned char *b = malloc(len);
    rng r;
    rng_seed(&r, 99);
    int accepted = 0;
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(b, orig, len);
        int flips = 1 + (int)(rng_next(&r) % 4);
        for (int k = 0; k < flips; k++) {
            size_t at = (size_t)(rng_next(&r) % len);
            b[at] = (unsigned char)rng_next(&r);
        }
        size_t cut = (rng_next(&r) % 8 == 0) ? (size_t)(rng_next(&r) % len) : len;
        safetensors_file *f = NULL;
        tt_error err = {0};
        if (safetensors_open_buffer(b, cut, "fuzz", &f, &err) == TT_OK) {
            accepted++;
            for (size_t i = 0; i < safetensors_count(f); i++) {
                const st_tensor *t = safetensors_at(f, i);
                const unsigned char *p = t->data;
                ck_assert(p >= b + 8 && p + t->nbytes <= b + cut);
                ck_assert_ptr_eq(safetensors_find(f, t->name), t);
            }
            safetensors_close(f);
        } else {
            ck_assert_ptr_null(f);
            ck_assert(err.msg[0] != 0);
        }
    }
    ck_assert_int_gt(accepted, 0);   /* data-byte mutations keep the file valid */
    free(b);
    free(orig);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Real files */

/* The first n bytes of b written to path: opening the file is a format error saying want. */
static void check_cut_refused(const char *path, const unsigned char *b, size_t n, const char *want)
{
    ck_assert_int_eq(tu_write_file(path, b, n), 0);
    safetensors_file *f = NULL;
    tt_error err = {0};
    ck_assert_int_eq(safetensors_open(path, &f, &err), TT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, want) != NULL, "%s", err.msg);
}

START_TEST(opens_file_and_refuses_truncated_copy)
{
    char *dir = tu_tmpdir();
    size_t len;
    unsigned char *b = make_st("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}  ",
                               24, &len);
    size_t data = len - 24;
    for (int i = 0; i < 6; i++)
        put_f32(b + data + 4 * i, (float)i - 2.5f);
    const char *path = tu_path("%s/ok.safetensors", dir);
    ck_assert_int_eq(tu_write_file(path, b, len), 0);
    safetensors_file *f = NULL;
    tt_error err = {0};
    ck_assert_msg(safetensors_open(path, &f, &err) == TT_OK, "%s", err.msg);
    const st_tensor *t = safetensors_find(f, "w");
    ck_assert_uint_eq(t->shape[0], 2);
    ck_assert_uint_eq(t->shape[1], 3);
    for (int i = 0; i < 6; i++)
        ck_assert(get_f32((const unsigned char *)t->data + 4 * i) == (float)i - 2.5f);
    safetensors_close(f);

    /* The last tensor loses its tail, as after an interrupted download. */
    const char *cut = tu_path("%s/cut.safetensors", dir);
    ck_assert_int_eq(tu_write_file(cut, b, len - 5), 0);
    f = (safetensors_file *)0x1;
    ck_assert_int_eq(safetensors_open(cut, &f, &err), TT_ERR_FORMAT);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(err.msg, "cut.safetensors: tensor w: data_offsets [0, 24] end past the "
                         "data section (19 bytes)") != NULL, "%s", err.msg);

    /* Cut inside the header. */
    check_cut_refused(cut, b, 20, "runs past the end of the file (20 bytes)");

    /* An empty file and a 3-byte file. */
    check_cut_refused(cut, b, 0, "cut.safetensors: empty file");
    check_cut_refused(cut, b, 3, "shorter than the 8-byte header length");
    free(b);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(reports_missing_file_and_directory)
{
    char *dir = tu_tmpdir();
    safetensors_file *f = (safetensors_file *)0x1;
    tt_error err = {0};
    const char *path = tu_path("%s/nope.safetensors", dir);
    ck_assert_int_eq(safetensors_open(path, &f, &err), TT_ERR_IO);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(err.msg, "nope.safetensors: cannot open: No such file") != NULL, "%s",
                  err.msg);
    ck_assert_int_eq(safetensors_open(dir, &f, &err), TT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "not a regular file") != NULL, "%s", err.msg);
    safetensors_close(NULL);
    tu_tmpdir_free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tu_add_loop_case(s, "malformed", (int)(sizeof bad_headers / sizeof bad_headers[0]),
                                 TU_TESTS(rejects_malformed_header));
    tcase_add_test(tc, size_mismatch_message_is_exact);
    tcase_add_test(tc, rejects_empty_buffer);
    tcase_add_test(tc, rejects_shorter_than_length_prefix);
    tcase_add_test(tc, rejects_header_length_over_limit);
    tcase_add_test(tc, rejects_header_length_past_end);
    tcase_add_test(tc, rejects_empty_header);
    tcase_add_test(tc, survives_random_corruption);
    tu_add_case(s, "valid", TU_TESTS(
            reads_scalar_empty_and_metadata, accepts_file_without_tensors,
            reads_unaligned_data_exactly, accepts_holes_and_zero_size_inside_ranges,
            accepts_every_known_dtype, finds_every_tensor_among_many));
    tu_add_case(s, "files", TU_TESTS(
            opens_file_and_refuses_truncated_copy, reports_missing_file_and_directory));
    return tu_run_suite(s);
}
