/* check_gguf.c: GGUF files built byte by byte here are read back exactly (every value type,
 * arrays, alignment, tensor views), and every kind of malformed file is refused with a message
 * naming the file and the field: truncation at every byte, counts and lengths past the end,
 * unknown and unsupported types, bad dimensions, misaligned, out-of-range and overlapping
 * tensors, duplicates, NaN scales, wrong shapes. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/model/gguf.h"
#include "core/model/safetensors.h"
#include "tests/testutil.h"

/* ---------------------------------------------------------------------------------------------
 * Building files in memory */

typedef struct {
    uint8_t *b;
    size_t len, cap;
} gb;

static void gb_bytes(gb *g, const void *p, size_t n)
{
    if (g->len + n > g->cap) {
        g->cap = (g->len + n) * 2 + 64;
        g->b = realloc(g->b, g->cap);
        ck_assert_ptr_nonnull(g->b);
    }
    if (n)
        memcpy(g->b + g->len, p, n);
    g->len += n;
}

static void gb_u8(gb *g, uint8_t v) { gb_bytes(g, &v, 1); }
static void gb_u32(gb *g, uint32_t v) { gb_bytes(g, &v, 4); }
static void gb_u64(gb *g, uint64_t v) { gb_bytes(g, &v, 8); }
static void gb_f32(gb *g, float v) { gb_bytes(g, &v, 4); }

static void gb_str(gb *g, const char *s)
{
    gb_u64(g, strlen(s));
    gb_bytes(g, s, strlen(s));
}

static void gb_header(gb *g, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    gb_bytes(g, "GGUF", 4);
    gb_u32(g, version);
    gb_u64(g, n_tensors);
    gb_u64(g, n_kv);
}

static void gb_key(gb *g, const char *key, gguf_type t)
{
    gb_str(g, key);
    gb_u32(g, t);
}

static void gb_kv_u32(gb *g, const char *key, uint32_t v)
{
    gb_key(g, key, GGUF_TYPE_UINT32);
    gb_u32(g, v);
}

static void gb_kv_str(gb *g, const char *key, const char *v)
{
    gb_key(g, key, GGUF_TYPE_STRING);
    gb_str(g, v);
}

static void gb_tensor(gb *g, const char *name, int n_dims, const uint64_t *ne, uint32_t type,
                      uint64_t offset)
{
    gb_str(g, name);
    gb_u32(g, (uint32_t)n_dims);
    for (int d = 0; d < n_dims; d++)
        gb_u64(g, ne[d]);
    gb_u32(g, type);
    gb_u64(g, offset);
}

static void gb_align(gb *g, size_t a)
{
    while (g->len % a)
        gb_u8(g, 0);
}

static void gb_zeros(gb *g, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gb_u8(g, 0);
}

/* Opens g and expects status want_status with a message naming the file and containing want. */
static void expect_reject_status(const gb *g, tt_status want_status, const char *want)
{
    gguf_file *f = (gguf_file *)0x1;
    tt_error err = {0};
    tt_status s = gguf_open_buffer(g->b, g->len, "t.gguf", &f, &err);
    ck_assert_msg(s == want_status, "expected status %d containing '%s', got %d (%s)",
                  (int)want_status, want, (int)s, err.msg);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(err.msg, want) != NULL, "message '%s' lacks '%s'", err.msg, want);
    ck_assert_msg(strncmp(err.msg, "t.gguf: ", 8) == 0, "message '%s' does not name the file",
                  err.msg);
}

static void expect_reject(const gb *g, const char *want)
{
    expect_reject_status(g, TT_ERR_FORMAT, want);
}

static gguf_file *expect_open(const gb *g)
{
    gguf_file *f = NULL;
    tt_error err = {0};
    tt_status s = gguf_open_buffer(g->b, g->len, "t.gguf", &f, &err);
    ck_assert_msg(s == TT_OK, "valid file refused: %s", err.msg);
    ck_assert_ptr_nonnull(f);
    return f;
}

/* A valid v3 file: two key/values, tensors "a" F32 [4,2] at 0 and "b" Q8_0 [32,2] at 32, data
 * ending exactly at the last tensor's end (so every shorter prefix is truncated). */
static void gb_valid(gb *g)
{
    gb_header(g, 3, 2, 2);
    gb_kv_str(g, "general.architecture", "llama");
    gb_kv_u32(g, "general.alignment", 32);
    gb_tensor(g, "a", 2, (const uint64_t[]){4, 2}, QUANT_F32, 0);
    gb_tensor(g, "b", 2, (const uint64_t[]){32, 2}, QUANT_Q8_0, 64);
    gb_align(g, 32);
    for (int i = 0; i < 8; i++)
        gb_f32(g, (float)i);
    gb_zeros(g, 32);
    for (int r = 0; r < 2; r++) {
        uint16_t d = 0x3c00;            /* 1.0 */
        gb_bytes(g, &d, 2);
        for (int j = 0; j < 32; j++)
            gb_u8(g, (uint8_t)(int8_t)(j - 16 + r));
    }
}

/* ---------------------------------------------------------------------------------------------
 * Valid files */

START_TEST(reads_every_value_type_and_array)
{
    gb g = {0};
    gb_header(&g, 3, 0, 17);
    gb_key(&g, "u8", GGUF_TYPE_UINT8); gb_u8(&g, 200);
    gb_key(&g, "i8", GGUF_TYPE_INT8); gb_u8(&g, (uint8_t)-5);
    gb_key(&g, "u16", GGUF_TYPE_UINT16); gb_bytes(&g, &(uint16_t){60000}, 2);
    gb_key(&g, "i16", GGUF_TYPE_INT16); gb_bytes(&g, &(int16_t){-300}, 2);
    gb_kv_u32(&g, "u32", 4000000000u);
    gb_key(&g, "i32", GGUF_TYPE_INT32); gb_bytes(&g, &(int32_t){-70000}, 4);
    gb_key(&g, "f32", GGUF_TYPE_FLOAT32); gb_f32(&g, 1e-5f);
    gb_key(&g, "bool", GGUF_TYPE_BOOL); gb_u8(&g, 1);
    gb_kv_str(&g, "str", "héllo");
    gb_key(&g, "u64", GGUF_TYPE_UINT64); gb_u64(&g, 1ull << 40);
    gb_key(&g, "i64", GGUF_TYPE_INT64); gb_bytes(&g, &(int64_t){-3}, 8);
    gb_key(&g, "f64", GGUF_TYPE_FLOAT64); gb_bytes(&g, &(double){0.25}, 8);
    gb_key(&g, "tokens", GGUF_TYPE_ARRAY); gb_u32(&g, GGUF_TYPE_STRING); gb_u64(&g, 3);
    gb_str(&g, "<s>"); gb_str(&g, ""); gb_str(&g, "\xe2\x96\x81the");
    gb_key(&g, "scores", GGUF_TYPE_ARRAY); gb_u32(&g, GGUF_TYPE_FLOAT32); gb_u64(&g, 3);
    gb_f32(&g, 0); gb_f32(&g, -1.5f); gb_f32(&g, -2.5f);
    gb_key(&g, "types", GGUF_TYPE_ARRAY); gb_u32(&g, GGUF_TYPE_INT32); gb_u64(&g, 3);
    gb_u32(&g, 3); gb_u32(&g, 1); gb_u32(&g, (uint32_t)-1);
    gb_key(&g, "empty", GGUF_TYPE_ARRAY); gb_u32(&g, GGUF_TYPE_STRING); gb_u64(&g, 0);
    gb_key(&g, "general.alignment", GGUF_TYPE_UINT32); gb_u32(&g, 8);
    gguf_file *f = expect_open(&g);
    tt_error err = {0};
    ck_assert_uint_eq(gguf_version(f), 3);
    ck_assert_uint_eq(gguf_kv_count(f), 17);
    ck_assert_uint_eq(gguf_alignment(f), 8);
    ck_assert_str_eq(gguf_kv_at(f, 0)->key, "u8");
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    float f32;
    bool b;
    gguf_str s;
    ck_assert_int_eq(gguf_get_u32(f, "u8", &u32, &err), TT_OK);
    ck_assert_uint_eq(u32, 200);
    ck_assert_int_eq(gguf_get_i32(f, "i8", &i32, &err), TT_OK);
    ck_assert_int_eq(i32, -5);
    ck_assert_int_eq(gguf_get_u32(f, "u16", &u32, &err), TT_OK);
    ck_assert_uint_eq(u32, 60000);
    ck_assert_int_eq(gguf_get_i32(f, "i16", &i32, &err), TT_OK);
    ck_assert_int_eq(i32, -300);
    ck_assert_int_eq(gguf_get_u32(f, "u32", &u32, &err), TT_OK);
    ck_assert_uint_eq(u32, 4000000000u);
    ck_assert_int_eq(gguf_get_i32(f, "i32", &i32, &err), TT_OK);
    ck_assert_int_eq(i32, -70000);
    ck_assert_int_eq(gguf_get_f32(f, "f32", &f32, &err), TT_OK);
    ck_assert_float_eq(f32, 1e-5f);
    ck_assert_int_eq(gguf_get_f32(f, "f64", &f32, &err), TT_OK);
    ck_assert_float_eq(f32, 0.25f);
    ck_assert_int_eq(gguf_get_bool(f, "bool", &b, &err), TT_OK);
    ck_assert(b);
    ck_assert_int_eq(gguf_get_string(f, "str", &s, &err), TT_OK);
    ck_assert(gguf_str_eq(s, "héllo"));
    ck_assert_int_eq(gguf_get_u64(f, "u64", &u64, &err), TT_OK);
    ck_assert_uint_eq(u64, 1ull << 40);
    ck_assert_int_eq(gguf_get_i32(f, "i64", &i32, &err), TT_OK);
    ck_assert_int_eq(i32, -3);
    gguf_array a;
    ck_assert_int_eq(gguf_get_array(f, "tokens", GGUF_TYPE_STRING, &a, &err), TT_OK);
    ck_assert_uint_eq(a.n, 3);
    ck_assert(gguf_str_eq(gguf_array_str(&a, 0), "<s>"));
    ck_assert_uint_eq(gguf_array_str(&a, 1).len, 0);
    ck_assert(gguf_str_eq(gguf_array_str(&a, 2), "\xe2\x96\x81the"));
    char *dup = gguf_str_dup(gguf_array_str(&a, 2));
    ck_assert_str_eq(dup, "\xe2\x96\x81the");
    free(dup);
    ck_assert_int_eq(gguf_get_array(f, "scores", GGUF_TYPE_FLOAT32, &a, &err), TT_OK);
    ck_assert_float_eq(gguf_array_f32(&a, 2), -2.5f);
    ck_assert_int_eq(gguf_get_array(f, "types", GGUF_TYPE_INT32, &a, &err), TT_OK);
    ck_assert_int_eq(gguf_array_i32(&a, 2), -1);
    ck_assert_int_eq(gguf_get_array(f, "empty", GGUF_TYPE_END, &a, &err), TT_OK);
    ck_assert_uint_eq(a.n, 0);
    ck_assert_uint_eq(gguf_tensor_count(f), 0);
    ck_assert_str_eq(gguf_architecture(f), "");
    gguf_close(f);
    free(g.b);
}
END_TEST

START_TEST(getters_name_the_key_and_both_types)
{
    gb g = {0};
    gb_header(&g, 2, 0, 4);
    gb_kv_str(&g, "general.name", "x");
    gb_key(&g, "neg", GGUF_TYPE_INT32); gb_bytes(&g, &(int32_t){-1}, 4);
    gb_key(&g, "big", GGUF_TYPE_UINT64); gb_u64(&g, 1ull << 33);
    gb_key(&g, "tokenizer.ggml.scores", GGUF_TYPE_ARRAY); gb_u32(&g, GGUF_TYPE_INT32);
    gb_u64(&g, 1); gb_u32(&g, 7);
    gguf_file *f = expect_open(&g);
    ck_assert_uint_eq(gguf_version(f), 2);
    tt_error err = {0};
    uint32_t u32 = 99;
    int32_t i32;
    float f32;
    bool b;
    gguf_array a;
    gguf_str s;
    ck_assert_int_eq(gguf_get_u32(f, "llama.block_count", &u32, &err), TT_ERR_FORMAT);
    ck_assert_str_eq(err.msg, "t.gguf: key llama.block_count: missing");
    ck_assert_int_eq(gguf_get_u32(f, "general.name", &u32, &err), TT_ERR_FORMAT);
    ck_assert_str_eq(err.msg, "t.gguf: key general.name: expected an integer, got string");
    ck_assert_uint_eq(u32, 99);
    ck_assert_int_eq(gguf_get_u32(f, "neg", &u32, &err), TT_ERR_FORMAT);
    ck_assert_str_eq(err.msg, "t.gguf: key neg: -1 is outside uint32");
    ck_assert_int_eq(gguf_get_i32(f, "big", &i32, &err), TT_ERR_FORMAT);
    ck_assert_str_eq(err.msg, "t.gguf: key big: 8589934592 is outside int32");
    ck_assert_int_eq(gguf_get_f32(f, "neg", &f32, &err), TT_ERR_FORMAT);
    ck_assert_str_eq(err.msg, "t.gguf: key neg: expected a float, got int32");
    ck_assert_int_eq(gguf_get_bool(f, "big", &b, &err), TT_ERR_FORMAT);
    ck_assert_int_eq(gguf_get_string(f, "tokenizer.ggml.scores", &s, &err), TT_ERR_FORMAT);
    ck_assert_str_eq(err.msg,
                     "t.gguf: key tokenizer.ggml.scores: expected string, got an array of int32");
    ck_assert_int_eq(gguf_get_array(f, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &a, &err),
                     TT_ERR_FORMAT);
    ck_assert_str_eq(err.msg, "t.gguf: key tokenizer.ggml.scores: expected an array of float32, "
                              "got an array of int32");
    ck_assert_int_eq(gguf_get_array(f, "general.name", GGUF_TYPE_STRING, &a, &err),
                     TT_ERR_FORMAT);
    ck_assert_str_eq(err.msg, "t.gguf: key general.name: expected an array of string, got string");
    gguf_close(f);
    free(g.b);
}
END_TEST

START_TEST(views_tensors_inside_the_aligned_data_section)
{
    gb g = {0};
    gb_valid(&g);
    gguf_file *f = expect_open(&g);
    ck_assert_str_eq(gguf_architecture(f), "llama");
    ck_assert_uint_eq(gguf_tensor_count(f), 2);
    ck_assert_uint_eq(gguf_data_offset(f) % 32, 0);
    ck_assert_uint_eq(gguf_data_offset(f) + 64 + 68, g.len);
    const gguf_tensor *a = gguf_find_tensor(f, "a"), *b = gguf_find_tensor(f, "b");
    ck_assert_ptr_eq(a, gguf_tensor_at(f, 0));
    ck_assert_ptr_eq(b, gguf_tensor_at(f, 1));
    ck_assert_ptr_null(gguf_find_tensor(f, "c"));
    ck_assert_int_eq(a->n_dims, 2);
    ck_assert_uint_eq(a->ne[0], 4);
    ck_assert_uint_eq(a->ne[1], 2);
    ck_assert_uint_eq(a->ne[2], 1);
    ck_assert_uint_eq(a->numel, 8);
    ck_assert_uint_eq(a->nbytes, 32);
    ck_assert_ptr_eq(a->data, g.b + gguf_data_offset(f));
    ck_assert_uint_eq(b->nbytes, 68);
    ck_assert_uint_eq(gguf_tensor_row_bytes(b), 34);
    ck_assert_ptr_eq(b->data, g.b + gguf_data_offset(f) + 64);
    float row[32];
    ck_assert(quant_dequantize_row(b->type, gguf_tensor_row(b, 1), row, 32));
    ck_assert_float_eq(row[0], -15.0f);
    ck_assert_float_eq(row[31], 16.0f);
    float a7;
    memcpy(&a7, (const uint8_t *)a->data + 28, 4);
    ck_assert_float_eq(a7, 7.0f);
    /* The listing's summary: no file_type, so the type of most weight bytes among matrices. */
    ck_assert_str_eq(gguf_quantization(f), "Q8_0");
    ck_assert_uint_eq(gguf_parameter_count(f), 8 + 64);
    gguf_close(f);
    free(g.b);
}
END_TEST

START_TEST(summary_prefers_the_file_type_and_parameter_count_keys)
{
    gb g = {0};
    gb_header(&g, 3, 0, 2);
    gb_kv_u32(&g, "general.file_type", 15);
    gb_key(&g, "general.parameter_count", GGUF_TYPE_UINT64); gb_u64(&g, 1235814400);
    gguf_file *f = expect_open(&g);
    ck_assert_str_eq(gguf_quantization(f), "Q4_K_M");
    ck_assert_uint_eq(gguf_parameter_count(f), 1235814400);
    gguf_close(f);
    free(g.b);
}
END_TEST

START_TEST(tensor_check_refuses_unsupported_type_wrong_shape_and_nan_scale)
{
    gb g = {0};
    gb_header(&g, 3, 4, 0);
    gb_tensor(&g, "ok", 2, (const uint64_t[]){32, 2}, QUANT_Q8_0, 0);
    gb_tensor(&g, "nan", 2, (const uint64_t[]){32, 2}, QUANT_Q8_0, 96);
    gb_tensor(&g, "q5k", 1, (const uint64_t[]){256}, QUANT_Q5_K, 192);
    gb_tensor(&g, "v", 3, (const uint64_t[]){8, 1, 1}, QUANT_F32, 384);
    gb_align(&g, 32);
    size_t base = g.len;
    gb_zeros(&g, 384 + 32);
    uint16_t one = 0x3c00, nan = 0x7e00;
    memcpy(g.b + base, &one, 2);
    memcpy(g.b + base + 34, &one, 2);
    memcpy(g.b + base + 96, &one, 2);
    memcpy(g.b + base + 96 + 34, &nan, 2);          /* row 1's block */
    gguf_file *f = expect_open(&g);
    tt_error err = {0};
    const gguf_tensor *t = NULL;
    ck_assert_int_eq(gguf_tensor_check(f, "ok", 2, (const uint64_t[]){32, 2}, &t, &err), TT_OK);
    ck_assert_ptr_eq(t, gguf_find_tensor(f, "ok"));
    ck_assert_int_eq(gguf_tensor_check(f, "ok", 2, (const uint64_t[]){2, 32}, NULL, &err),
                     TT_ERR_FORMAT);
    ck_assert_str_eq(err.msg, "t.gguf: tensor ok: expected [2,32], got [32,2]");
    ck_assert_int_eq(gguf_tensor_check(f, "nan", 2, (const uint64_t[]){32, 2}, NULL, &err),
                     TT_ERR_FORMAT);
    ck_assert_str_eq(err.msg, "t.gguf: tensor nan: block 1 (row 1): scale d is NaN");
    ck_assert_int_eq(gguf_tensor_check(f, "q5k", 1, (const uint64_t[]){256}, NULL, &err),
                     TT_ERR_UNSUPPORTED);
    ck_assert_str_eq(err.msg, "t.gguf: tensor q5k: type Q5_K is not supported (supported: F32, "
                              "F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q6_K)");
    ck_assert_int_eq(gguf_tensor_check(f, "missing", 1, (const uint64_t[]){8}, NULL, &err),
                     TT_ERR_FORMAT);
    ck_assert_str_eq(err.msg, "t.gguf: tensor missing: missing");
    /* Trailing 1s are not a different shape. */
    ck_assert_int_eq(gguf_tensor_check(f, "v", 1, (const uint64_t[]){8}, NULL, &err), TT_OK);
    ck_assert_int_eq(gguf_tensor_check(f, "v", 2, (const uint64_t[]){8, 1}, NULL, &err), TT_OK);
    gguf_close(f);
    free(g.b);
}
END_TEST

/* A bad scale deep in a large tensor is found, the first one reported, named by its block and
 * row (d of Q8_0, dmin of Q4_K). */
START_TEST(tensor_check_names_the_first_bad_scale_of_a_large_tensor)
{
    /* Q8_0 [16384, 256]: 512 blocks a row, 131072 of 34 bytes (4.25 MiB); Q4_K [32768, 256]:
     * 128 blocks a row, 32768 of 144 bytes (4.5 MiB) */
    const uint64_t q8[2] = {16384, 256}, q4k[2] = {32768, 256};
    const size_t q8_bytes = 131072 * 34, q4k_bytes = 32768 * 144;
    gb g = {0};
    gb_header(&g, 3, 3, 0);
    gb_tensor(&g, "late", 2, q8, QUANT_Q8_0, 0);
    gb_tensor(&g, "both", 2, q8, QUANT_Q8_0, q8_bytes);
    gb_tensor(&g, "dmin", 2, q4k, QUANT_Q4_K, 2 * q8_bytes);
    gb_align(&g, 32);
    const size_t base = g.len;
    gb_zeros(&g, 2 * q8_bytes + q4k_bytes);
    const uint16_t nan = 0x7e00, inf = 0x7c00;
    memcpy(g.b + base + (size_t)100000 * 34, &nan, 2);
    memcpy(g.b + base + q8_bytes + (size_t)7 * 34, &nan, 2);           /* two: the first */
    memcpy(g.b + base + q8_bytes + (size_t)120000 * 34, &nan, 2);
    memcpy(g.b + base + 2 * q8_bytes + (size_t)30000 * 144 + 2, &inf, 2);
    gguf_file *f = expect_open(&g);
    tt_error err = {0};
    ck_assert_int_eq(gguf_tensor_check(f, "late", 2, q8, NULL, &err), TT_ERR_FORMAT);
    ck_assert_str_eq(err.msg, "t.gguf: tensor late: block 100000 (row 195): scale d is NaN");
    ck_assert_int_eq(gguf_tensor_check(f, "both", 2, q8, NULL, &err), TT_ERR_FORMAT);
    ck_assert_str_eq(err.msg, "t.gguf: tensor both: block 7 (row 0): scale d is NaN");
    ck_assert_int_eq(gguf_tensor_check(f, "dmin", 2, q4k, NULL, &err), TT_ERR_FORMAT);
    ck_assert_str_eq(err.msg, "t.gguf: tensor dmin: block 30000 (row 234): scale dmin is infinite");
    gguf_close(f);
    free(g.b);
}
END_TEST

START_TEST(finds_every_tensor_among_many)
{
    enum { N = 300 };
    gb g = {0};
    gb_header(&g, 3, N, 0);
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "blk.%d.w", (i * 37) % N);
        gb_tensor(&g, name, 1, (const uint64_t[]){8}, QUANT_F32, (uint64_t)i * 32);
    }
    gb_align(&g, 32);
    gb_zeros(&g, N * 32);
    gguf_file *f = expect_open(&g);
    for (int i = 0; i < N; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, (size_t)i);
        ck_assert_ptr_eq(gguf_find_tensor(f, t->name), t);
    }
    gguf_close(f);
    free(g.b);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Malformed files: one builder each, with the words that tell the user what is wrong. */

static void bad_magic(gb *g) { gb_bytes(g, "GGUG", 4); gb_u32(g, 3); gb_u64(g, 0); gb_u64(g, 0); }
static void bad_version1(gb *g) { gb_header(g, 1, 0, 0); }
static void bad_version4(gb *g) { gb_header(g, 4, 0, 0); }
static void bad_big_endian(gb *g) { gb_header(g, 0x03000000u, 0, 0); }
static void bad_n_kv(gb *g) { gb_header(g, 3, 0, 1000); gb_zeros(g, 64); }
static void bad_n_kv_limit(gb *g) { gb_header(g, 3, 0, UINT64_MAX); gb_zeros(g, 64); }
static void bad_n_tensors(gb *g) { gb_header(g, 3, 1000, 0); gb_zeros(g, 64); }
static void bad_n_tensors_limit(gb *g) { gb_header(g, 3, 1ull << 40, 0); gb_zeros(g, 64); }

static void bad_key_length(gb *g)
{
    gb_header(g, 3, 0, 1);
    gb_u64(g, UINT64_MAX - 3);
    gb_zeros(g, 16);
}

static void bad_value_length(gb *g)
{
    gb_header(g, 3, 0, 1);
    gb_key(g, "general.name", GGUF_TYPE_STRING);
    gb_u64(g, 1ull << 62);
    gb_zeros(g, 8);
}

static void bad_value_type(gb *g)
{
    gb_header(g, 3, 0, 1);
    gb_key(g, "general.name", 13);
    gb_zeros(g, 8);
}

static void bad_nested_array(gb *g)
{
    gb_header(g, 3, 0, 1);
    gb_key(g, "x", GGUF_TYPE_ARRAY);
    gb_u32(g, GGUF_TYPE_ARRAY);
    gb_u64(g, 1);
    gb_zeros(g, 16);
}

static void bad_array_count(gb *g)
{
    gb_header(g, 3, 0, 1);
    gb_key(g, "tokenizer.ggml.scores", GGUF_TYPE_ARRAY);
    gb_u32(g, GGUF_TYPE_FLOAT32);
    gb_u64(g, 1ull << 61);
    gb_zeros(g, 16);
}

static void bad_array_count_overflow(gb *g)
{
    gb_header(g, 3, 0, 1);
    gb_key(g, "x", GGUF_TYPE_ARRAY);
    gb_u32(g, GGUF_TYPE_UINT64);
    gb_u64(g, 1ull << 62);
    gb_zeros(g, 16);
}

static void bad_string_array_count(gb *g)
{
    gb_header(g, 3, 0, 1);
    gb_key(g, "tokenizer.ggml.tokens", GGUF_TYPE_ARRAY);
    gb_u32(g, GGUF_TYPE_STRING);
    gb_u64(g, UINT64_MAX);
    gb_zeros(g, 64);
}

static void bad_string_array_left(gb *g)
{
    gb_header(g, 3, 0, 1);
    gb_key(g, "tokenizer.ggml.tokens", GGUF_TYPE_ARRAY);
    gb_u32(g, GGUF_TYPE_STRING);
    gb_u64(g, 1000);
    gb_zeros(g, 64);
}

static void bad_string_element(gb *g)
{
    gb_header(g, 3, 0, 1);
    gb_key(g, "tokenizer.ggml.tokens", GGUF_TYPE_ARRAY);
    gb_u32(g, GGUF_TYPE_STRING);
    gb_u64(g, 3);
    gb_str(g, "a");
    gb_u64(g, 1000);
    gb_zeros(g, 16);
}

static void bad_array_element_type(gb *g)
{
    gb_header(g, 3, 0, 1);
    gb_key(g, "x", GGUF_TYPE_ARRAY);
    gb_u32(g, 77);
    gb_u64(g, 0);
}

static void bad_bool(gb *g)
{
    gb_header(g, 3, 0, 1);
    gb_key(g, "tokenizer.ggml.add_bos_token", GGUF_TYPE_BOOL);
    gb_u8(g, 2);
}

static void bad_empty_key(gb *g)
{
    gb_header(g, 3, 0, 1);
    gb_kv_u32(g, "", 1);
}

static void bad_duplicate_key(gb *g)
{
    gb_header(g, 3, 0, 2);
    gb_kv_u32(g, "llama.block_count", 1);
    gb_kv_u32(g, "llama.block_count", 2);
}

static void bad_alignment_value(gb *g)
{
    gb_header(g, 3, 0, 1);
    gb_kv_u32(g, "general.alignment", 48);
}

static void bad_alignment_type(gb *g)
{
    gb_header(g, 3, 0, 1);
    gb_kv_str(g, "general.alignment", "32");
}

/* One tensor "t" with the given info, followed by a 32-byte-aligned data section of 256 bytes. */
static void one_tensor(gb *g, int n_dims, const uint64_t *ne, uint32_t type, uint64_t offset)
{
    gb_header(g, 3, 1, 0);
    gb_tensor(g, "t", n_dims, ne, type, offset);
    gb_align(g, 32);
    gb_zeros(g, 256);
}

static void bad_unknown_type(gb *g) { one_tensor(g, 1, (const uint64_t[]){8}, 4, 0); }
static void bad_type_beyond(gb *g) { one_tensor(g, 1, (const uint64_t[]){8}, 4000, 0); }
static void bad_zero_dims(gb *g) { one_tensor(g, 0, NULL, QUANT_F32, 0); }
static void bad_five_dims(gb *g) { one_tensor(g, 5, (const uint64_t[]){1, 1, 1, 1, 1}, 0, 0); }
static void bad_dims_overflow(gb *g)
{
    one_tensor(g, 3, (const uint64_t[]){1ull << 32, 1ull << 32, 1}, QUANT_F32, 0);
}
static void bad_dim_above_int64(gb *g) { one_tensor(g, 1, (const uint64_t[]){1ull << 63}, 0, 0); }
static void bad_byte_overflow(gb *g)
{
    one_tensor(g, 2, (const uint64_t[]){1ull << 32, 1ull << 30}, QUANT_F32, 0);
}
static void bad_partial_block(gb *g) { one_tensor(g, 1, (const uint64_t[]){48}, QUANT_Q8_0, 0); }
static void bad_misaligned(gb *g) { one_tensor(g, 1, (const uint64_t[]){8}, QUANT_F32, 4); }
static void bad_past_end(gb *g) { one_tensor(g, 1, (const uint64_t[]){64}, QUANT_F32, 32); }
static void bad_offset_huge(gb *g)
{
    one_tensor(g, 1, (const uint64_t[]){8}, QUANT_F32, UINT64_MAX - 31);
}

static void bad_name(gb *g)
{
    char name[80];
    memset(name, 'x', 70);
    name[70] = 0;
    gb_header(g, 3, 1, 0);
    gb_tensor(g, name, 1, (const uint64_t[]){8}, QUANT_F32, 0);
    gb_align(g, 32);
    gb_zeros(g, 32);
}

static void bad_overlap(gb *g)
{
    gb_header(g, 3, 2, 0);
    gb_tensor(g, "first", 1, (const uint64_t[]){16}, QUANT_F32, 0);
    gb_tensor(g, "second", 1, (const uint64_t[]){8}, QUANT_F32, 32);
    gb_align(g, 32);
    gb_zeros(g, 128);
}

static void bad_duplicate_tensor(gb *g)
{
    gb_header(g, 3, 2, 0);
    gb_tensor(g, "w", 1, (const uint64_t[]){8}, QUANT_F32, 0);
    gb_tensor(g, "w", 1, (const uint64_t[]){8}, QUANT_F32, 32);
    gb_align(g, 32);
    gb_zeros(g, 64);
}

static void bad_data_start(gb *g)
{
    gb_header(g, 3, 1, 0);
    gb_tensor(g, "t", 1, (const uint64_t[]){0}, QUANT_F32, 0);   /* no padding follows */
    if (g->len % 32 == 0)
        gb_u8(g, 0), gb_u8(g, 0);       /* ends just past an alignment: still short of it */
}

static const struct {
    void (*build)(gb *);
    const char *want;
} bad_files[] = {
    {bad_magic, "magic: not a GGUF file"},
    {bad_version1, "version: GGUF version 1 is not supported (2 and 3 are)"},
    {bad_version4, "GGUF version 4 is not supported"},
    {bad_big_endian, "big-endian"},
    {bad_n_kv, "n_kv 1000: the 64 bytes left cannot hold that many key/values"},
    {bad_n_kv_limit, "n_kv 18446744073709551615 is above the limit of 65536"},
    {bad_n_tensors, "n_tensors 1000: the 64 bytes left cannot hold that many tensor infos"},
    {bad_n_tensors_limit, "n_tensors 1099511627776 is above the limit of 262144"},
    {bad_key_length, "key #0: string length 18446744073709551612 at offset 24 runs past the end"},
    {bad_value_length, "key general.name: string length 4611686018427387904"},
    {bad_value_type, "key general.name: unknown value type 13"},
    {bad_nested_array, "key x: nested arrays are not supported"},
    {bad_array_count, "key tokenizer.ggml.scores: 2305843009213693952 elements of float32 need "
                      "9223372036854775808 bytes"},
    {bad_array_count_overflow, "key x: 4611686018427387904 elements of uint64 need more than 2^64"},
    {bad_string_array_count, "key tokenizer.ggml.tokens: 18446744073709551615 strings is above "
                             "the limit of 16777216"},
    {bad_string_array_left, "key tokenizer.ggml.tokens: 1000 strings need at least 8000 bytes, 64 are left"},
    {bad_string_element, "key tokenizer.ggml.tokens: element 1: string length 1000"},
    {bad_array_element_type, "key x: unknown array element type 77"},
    {bad_bool, "key tokenizer.ggml.add_bos_token: bool value 2"},
    {bad_empty_key, "key #0: \"\" is empty"},
    {bad_duplicate_key, "key llama.block_count: the key appears twice"},
    {bad_alignment_value, "key general.alignment: 48 is not a power of two"},
    {bad_alignment_type, "key general.alignment: expected uint32, got string"},
    {bad_unknown_type, "tensor t: unknown ggml type 4"},
    {bad_type_beyond, "tensor t: unknown ggml type 4000"},
    {bad_zero_dims, "tensor t: n_dims 0 (expected 1 to 4)"},
    {bad_five_dims, "tensor t: n_dims 5"},
    {bad_dims_overflow, "tensor t: shape [4294967296,4294967296,1] has more than 2^63 elements"},
    {bad_dim_above_int64, "tensor t: ne[0] = 9223372036854775808 is above 2^63"},
    {bad_byte_overflow, "tensor t: shape [4294967296,1073741824] of F32 overflows"},
    {bad_partial_block, "tensor t: row length ne[0] = 48 is not a multiple of Q8_0's block of 32"},
    {bad_misaligned, "tensor t: offset 4 is not a multiple of the alignment 32"},
    {bad_past_end, "tensor t: offset 32 + 256 bytes runs past the end of the data section (256"},
    {bad_offset_huge, "tensor t: offset 18446744073709551584 + 32 bytes runs past the end"},
    {bad_name, "is not a valid tensor name (1 to 63 bytes"},
    {bad_overlap, "tensor second: offset 32 overlaps tensor first (offset 0, 64 bytes)"},
    {bad_duplicate_tensor, "tensor w: the name appears twice"},
    {bad_data_start, "data section: starts at offset"},
};

START_TEST(rejects_malformed_file)
{
    gb g = {0};
    bad_files[_i].build(&g);
    expect_reject(&g, bad_files[_i].want);
    free(g.b);
}
END_TEST

START_TEST(rejects_every_truncation_of_a_valid_file)
{
    gb g = {0};
    gb_valid(&g);
    for (size_t n = 0; n < g.len; n++) {
        gguf_file *f = NULL;
        tt_error err = {0};
        tt_status s = gguf_open_buffer(g.b, n, "t.gguf", &f, &err);
        ck_assert_msg(s == TT_ERR_FORMAT, "prefix of %zu bytes: status %d (%s)", n, (int)s,
                      err.msg);
        ck_assert_ptr_null(f);
        ck_assert_msg(strncmp(err.msg, "t.gguf: ", 8) == 0, "%s", err.msg);
    }
    gguf_close(expect_open(&g));
    free(g.b);
}
END_TEST

/* Random byte flips of a valid file: opening either succeeds or fails with a message, and
 * whatever opens has every tensor inside the buffer (ASan checks the reads). */
START_TEST(survives_random_corruption)
{
    gb g = {0};
    gb_valid(&g);
    rng r;
    rng_seed(&r, 24);
    uint8_t *copy = malloc(g.len);
    ck_assert_ptr_nonnull(copy);
    for (int round = 0; round < 3000; round++) {
        memcpy(copy, g.b, g.len);
        int flips = 1 + (int)((uint32_t)rng_next(&r) % 4);
        for (int k = 0; k < flips; k++)
            copy[(uint32_t)rng_next(&r) % g.len] = (uint8_t)(uint32_t)rng_next(&r);
        gguf_file *f = NULL;
        tt_error err = {0};
        if (gguf_open_buffer(copy, g.len, "t.gguf", &f, &err) != TT_OK) {
            ck_assert_ptr_null(f);
            ck_assert_msg(strncmp(err.msg, "t.gguf: ", 8) == 0, "%s", err.msg);
            continue;
        }
        volatile uint8_t sink = 0;
        for (size_t i = 0; i < gguf_tensor_count(f); i++) {
            const gguf_tensor *t = gguf_tensor_at(f, i);
            const uint8_t *p = t->data;
            ck_assert(p >= copy && p + t->nbytes <= copy + g.len);
            for (uint64_t b = 0; b < t->nbytes; b++)
                sink ^= p[b];
        }
        (void)sink;
        gguf_close(f);
    }
    free(copy);
    free(g.b);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Files on disk */

START_TEST(maps_a_file_and_refuses_missing_and_directories)
{
    gb g = {0};
    gb_valid(&g);
    char *dir = tu_tmpdir();
    const char *path = tu_path("%s/m.gguf", dir);
    ck_assert_int_eq(tu_write_file(path, g.b, g.len), 0);
    gguf_file *f = NULL;
    tt_error err = {0};
    ck_assert_int_eq(gguf_open(path, &f, &err), TT_OK);
    ck_assert_str_eq(gguf_name(f), path);
    ck_assert_uint_eq(gguf_file_size(f), g.len);
    ck_assert_uint_eq(gguf_find_tensor(f, "b")->nbytes, 68);
    gguf_close(f);
    ck_assert_int_eq(tu_write_file(path, g.b, g.len - 1), 0);
    ck_assert_int_eq(gguf_open(path, &f, &err), TT_ERR_FORMAT);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(err.msg, "m.gguf: tensor b: offset 64 + 68 bytes runs past the end")
                  != NULL, "%s", err.msg);
    ck_assert_int_eq(tu_write_file(path, "", 0), 0);
    ck_assert_int_eq(gguf_open(path, &f, &err), TT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "the file is 0 bytes") != NULL, "%s", err.msg);
    ck_assert_int_eq(gguf_open(tu_path("%s/nope.gguf", dir), &f, &err), TT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "nope.gguf: cannot open: No such file") != NULL, "%s",
                  err.msg);
    ck_assert_int_eq(gguf_open(dir, &f, &err), TT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "not a regular file") != NULL, "%s", err.msg);
    gguf_close(NULL);
    tu_tmpdir_free(dir);
    free(g.b);
}
END_TEST


/* ---------------------------------------------------------------------------------------------
 * The committed fixtures (tests/fixtures/gguf/make.sh: tools/peer/tiny_hf.py + hf_to_gguf.py) */

static const char *fixture(const char *name)
{
    const char *srcdir = getenv("TOKENTOP_SRCDIR");
    return tu_path("%s/tests/fixtures/gguf/%s", srcdir ? srcdir : ".", name);
}

static gguf_file *open_fixture(const char *name)
{
    gguf_file *f = NULL;
    tt_error err = {0};
    ck_assert_msg(gguf_open(fixture(name), &f, &err) == TT_OK, "%s (run from the repository root "
                  "or set TOKENTOP_SRCDIR)", err.msg);
    return f;
}

static uint32_t get_u32(const gguf_file *f, const char *key)
{
    uint32_t v = 0;
    tt_error err = {0};
    ck_assert_msg(gguf_get_u32(f, key, &v, &err) == TT_OK, "%s", err.msg);
    return v;
}

/* Row r of a 2-D tensor as floats (ne[0] of them, at most 256). */
static void tensor_row(const gguf_tensor *t, uint64_t r, float *out)
{
    ck_assert_uint_le(t->ne[0], 256);
    ck_assert(quant_dequantize_row(t->type, gguf_tensor_row(t, r), out, t->ne[0]));
}

START_TEST(llama_fixture_holds_hyperparameters_and_spm_tokenizer)
{
    gguf_file *f = open_fixture("tiny-llama-f16.gguf");
    tt_error err = {0};
    ck_assert_str_eq(gguf_architecture(f), "llama");
    ck_assert_str_eq(gguf_quantization(f), "F16");
    ck_assert_uint_eq(get_u32(f, "llama.block_count"), 2);
    ck_assert_uint_eq(get_u32(f, "llama.embedding_length"), 32);
    ck_assert_uint_eq(get_u32(f, "llama.attention.head_count"), 4);
    ck_assert_uint_eq(get_u32(f, "llama.attention.head_count_kv"), 2);
    ck_assert_uint_eq(get_u32(f, "llama.rope.dimension_count"), 8);
    float eps = 0, base = 0;
    ck_assert_int_eq(gguf_get_f32(f, "llama.attention.layer_norm_rms_epsilon", &eps, &err), TT_OK);
    ck_assert_float_eq(eps, 1e-6f);
    ck_assert_int_eq(gguf_get_f32(f, "llama.rope.freq_base", &base, &err), TT_OK);
    ck_assert_float_eq(base, 10000.0f);
    gguf_str tmodel;
    ck_assert_int_eq(gguf_get_string(f, "tokenizer.ggml.model", &tmodel, &err), TT_OK);
    ck_assert(gguf_str_eq(tmodel, "llama"));
    gguf_array tokens, scores, types;
    ck_assert_int_eq(gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, &err),
                     TT_OK);
    ck_assert_int_eq(gguf_get_array(f, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &scores, &err),
                     TT_OK);
    ck_assert_int_eq(gguf_get_array(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &types,
                                    &err), TT_OK);
    ck_assert_uint_eq(tokens.n, 323);
    ck_assert_uint_eq(scores.n, 323);
    ck_assert_uint_eq(types.n, 323);
    ck_assert(gguf_str_eq(gguf_array_str(&tokens, 1), "<s>"));
    ck_assert_int_eq(gguf_array_i32(&types, 1), 3);                 /* control */
    ck_assert(gguf_str_eq(gguf_array_str(&tokens, 3 + 0x41), "<0x41>"));
    ck_assert_int_eq(gguf_array_i32(&types, 3 + 0x41), 6);          /* byte */
    ck_assert_float_eq(gguf_array_f32(&scores, 300), -300.0f);
    ck_assert_uint_eq(get_u32(f, "tokenizer.ggml.bos_token_id"), 1);
    ck_assert_uint_eq(get_u32(f, "tokenizer.ggml.eos_token_id"), 2);
    bool add_bos = false;
    ck_assert_int_eq(gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &add_bos, &err), TT_OK);
    ck_assert(add_bos);
    gguf_str tmpl;
    ck_assert_int_eq(gguf_get_string(f, "tokenizer.chat_template", &tmpl, &err), TT_OK);
    ck_assert_uint_gt(tmpl.len, 10);
    ck_assert_int_eq(gguf_tensor_check(f, "token_embd.weight", 2, (const uint64_t[]){32, 323},
                                       NULL, &err), TT_OK);
    ck_assert_int_eq(gguf_tensor_check(f, "output.weight", 2, (const uint64_t[]){32, 323}, NULL,
                                       &err), TT_OK);
    ck_assert_int_eq(gguf_tensor_check(f, "blk.1.attn_k.weight", 2, (const uint64_t[]){32, 16},
                                       NULL, &err), TT_OK);
    ck_assert_int_eq(gguf_tensor_check(f, "blk.1.ffn_norm.weight", 1, (const uint64_t[]){32},
                                       NULL, &err), TT_OK);
    ck_assert_uint_eq(gguf_find_tensor(f, "blk.1.ffn_norm.weight")->type, QUANT_F32);
    ck_assert_uint_eq(gguf_parameter_count(f), 39264);
    gguf_close(f);
}
END_TEST

/* llama.cpp's converter permutes the Q and K rows of `llama` models: within each head of HS rows,
 * GGUF row 2i is HF row i and row 2i+1 is HF row HS/2 + i (rotate-half pairs made adjacent). */
START_TEST(llama_fixture_q_k_rows_are_permuted_into_adjacent_pairs)
{
    gguf_file *f = open_fixture("tiny-llama-f16.gguf");
    safetensors_file *st = NULL;
    tt_error err = {0};
    ck_assert_msg(safetensors_open(fixture("tiny-llama/model.safetensors"), &st, &err) == TT_OK,
                  "%s", err.msg);
    const int HS = 8, C = 32;
    const struct { const char *gguf, *hf; int heads; } pairs[] = {
        {"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight", 4},
        {"blk.1.attn_k.weight", "model.layers.1.self_attn.k_proj.weight", 2},
    };
    float g[32], h[32];
    for (size_t p = 0; p < 2; p++) {
        const gguf_tensor *t = gguf_find_tensor(f, pairs[p].gguf);
        const st_tensor *s = safetensors_find(st, pairs[p].hf);
        ck_assert_ptr_nonnull(t);
        ck_assert_ptr_nonnull(s);
        for (int head = 0; head < pairs[p].heads; head++)
            for (int r = 0; r < HS; r++) {
                int hf_row = head * HS + (r % 2 ? HS / 2 + r / 2 : r / 2);
                tensor_row(t, (uint64_t)(head * HS + r), g);
                memcpy(h, (const float *)s->data + (size_t)hf_row * C, sizeof h);
                for (int c = 0; c < C; c++)
                    ck_assert_msg(g[c] == tt_held_f32(TT_F16, h[c]),
                                  "%s head %d row %d col %d: %g, HF row %d has %g", pairs[p].gguf,
                                  head, r, c, g[c], hf_row, h[c]);
            }
    }
    /* V is not permuted. */
    const gguf_tensor *v = gguf_find_tensor(f, "blk.0.attn_v.weight");
    const st_tensor *sv = safetensors_find(st, "model.layers.0.self_attn.v_proj.weight");
    tensor_row(v, 1, g);
    memcpy(h, (const float *)sv->data + C, sizeof h);
    for (int c = 0; c < C; c++)
        ck_assert(g[c] == tt_held_f32(TT_F16, h[c]));
    safetensors_close(st);
    gguf_close(f);
}
END_TEST

/* Q8_0 as ggml quantizes: each weight within half a step (block max / 127) of the F32 original,
 * plus the fp16 rounding of the block scale (2^-11 relative, times at most 127 steps). */
START_TEST(q8_0_fixture_dequantizes_within_one_step_of_the_original)
{
    gguf_file *f = open_fixture("tiny-llama-q8_0.gguf");
    safetensors_file *st = NULL;
    tt_error err = {0};
    ck_assert_msg(safetensors_open(fixture("tiny-llama/model.safetensors"), &st, &err) == TT_OK,
                  "%s", err.msg);
    ck_assert_str_eq(gguf_quantization(f), "Q8_0");
    const struct { const char *gguf, *hf; } pairs[] = {
        {"blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight"},
        {"blk.1.attn_v.weight", "model.layers.1.self_attn.v_proj.weight"},
        {"token_embd.weight", "model.embed_tokens.weight"},
    };
    int checked = 0;
    for (size_t p = 0; p < 3; p++) {
        const gguf_tensor *t = gguf_find_tensor(f, pairs[p].gguf);
        const st_tensor *s = safetensors_find(st, pairs[p].hf);
        ck_assert_uint_eq(t->type, QUANT_Q8_0);
        ck_assert_int_eq(gguf_tensor_check(f, t->name, t->n_dims, t->ne, NULL, &err), TT_OK);
        uint64_t K = t->ne[0];
        float g[256];
        for (uint64_t r = 0; r < t->ne[1]; r++) {
            tensor_row(t, r, g);
            const float *h = (const float *)s->data + r * K;
            for (uint64_t b = 0; b < K; b += 32) {
                float amax = 0;
                for (int j = 0; j < 32; j++)
                    amax = fmaxf(amax, fabsf(h[b + j]));
                for (int j = 0; j < 32; j++, checked++)
                    ck_assert_msg(fabsf(g[b + j] - h[b + j]) <= amax / 127 * 0.5f + amax / 1024,
                                  "%s row %llu col %llu: %g vs %g", t->name,
                                  (unsigned long long)r, (unsigned long long)(b + j), g[b + j],
                                  h[b + j]);
            }
        }
    }
    ck_assert_int_gt(checked, 10000);
    safetensors_close(st);
    gguf_close(f);
}
END_TEST

START_TEST(qwen_fixtures_hold_bpe_tokenizers_biases_and_qk_norms)
{
    gguf_file *f = open_fixture("tiny-qwen2-f16.gguf");
    tt_error err = {0};
    gguf_str s;
    gguf_array merges, tokens;
    ck_assert_str_eq(gguf_architecture(f), "qwen2");
    ck_assert_int_eq(gguf_get_string(f, "tokenizer.ggml.model", &s, &err), TT_OK);
    ck_assert(gguf_str_eq(s, "gpt2"));
    ck_assert_int_eq(gguf_get_string(f, "tokenizer.ggml.pre", &s, &err), TT_OK);
    ck_assert(gguf_str_eq(s, "qwen2"));
    ck_assert_int_eq(gguf_get_array(f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges, &err),
                     TT_OK);
    ck_assert_uint_gt(merges.n, 20);
    ck_assert(gguf_str_eq(gguf_array_str(&merges, 0), "\xc4\xa0 t"));   /* "Ġ t" */
    ck_assert_int_eq(gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, &err),
                     TT_OK);
    ck_assert(gguf_str_eq(gguf_array_str(&tokens, tokens.n - 1), "<|im_end|>"));
    ck_assert_ptr_null(gguf_find_kv(f, "tokenizer.ggml.bos_token_id"));
    ck_assert_int_eq(gguf_tensor_check(f, "blk.0.attn_q.bias", 1, (const uint64_t[]){32}, NULL,
                                       &err), TT_OK);
    ck_assert_ptr_null(gguf_find_tensor(f, "output.weight"));          /* tied */
    gguf_close(f);

    f = open_fixture("tiny-qwen3-q8_0.gguf");
    ck_assert_str_eq(gguf_architecture(f), "qwen3");
    ck_assert_str_eq(gguf_quantization(f), "Q8_0");
    ck_assert_int_eq(gguf_tensor_check(f, "blk.1.attn_k_norm.weight", 1, (const uint64_t[]){8},
                                       NULL, &err), TT_OK);
    ck_assert_int_eq(gguf_tensor_check(f, "blk.1.attn_q.weight", 2, (const uint64_t[]){32, 32},
                                       NULL, &err), TT_OK);
    ck_assert_uint_eq(gguf_find_tensor(f, "blk.1.attn_q.weight")->type, QUANT_Q8_0);
    gguf_close(f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gguf");
    TCase *tc = tu_add_loop_case(s, "malformed", (int)(sizeof bad_files / sizeof bad_files[0]),
                                 TU_TESTS(rejects_malformed_file));
    tcase_add_test(tc, rejects_every_truncation_of_a_valid_file);
    tcase_add_test(tc, survives_random_corruption);
    tu_add_case(s, "valid", TU_TESTS(
            reads_every_value_type_and_array, getters_name_the_key_and_both_types,
            views_tensors_inside_the_aligned_data_section,
            summary_prefers_the_file_type_and_parameter_count_keys,
            tensor_check_refuses_unsupported_type_wrong_shape_and_nan_scale,
            tensor_check_names_the_first_bad_scale_of_a_large_tensor,
            finds_every_tensor_among_many));
    tu_add_case(s, "files", TU_TESTS(maps_a_file_and_refuses_missing_and_directories));
    tu_add_case(s, "fixtures", TU_TESTS(
            llama_fixture_holds_hyperparameters_and_spm_tokenizer,
            llama_fixture_q_k_rows_are_permuted_into_adjacent_pairs,
            q8_0_fixture_dequantizes_within_one_step_of_the_original,
            qwen_fixtures_hold_bpe_tokenizers_biases_and_qk_norms));
    return tu_run_suite(s);
}
