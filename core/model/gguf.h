/* gguf.h: read-only, validated access to GGUF files (v2 and v3, mapped, never copied): metadata
 * key/values with typed accessors, tensor infos, and each tensor's bytes inside the mapping.
 *
 * Every number in a GGUF file is untrusted. gguf_open checks the whole header before anything is
 * handed out: counts against the bytes left and the limits below, string and array lengths, nested arrays (refused),
 * duplicate keys and tensor names, general.alignment (a u32, a power of two), each tensor's
 * dimensions (1..4, no overflow, ne[0] a multiple of its type's block), type (one ggml defines),
 * offset (a multiple of the alignment) and extent (inside the file, no two overlapping). Tensors of
 * a type tokentop cannot read (Q4_1, Q5_K, IQ2_XXS, ...) are still listed, so a file can be
 * described (`tokentop list`); gguf_tensor_check refuses them by name before their data is used. */
#ifndef TOKENTOP_GGUF_H
#define TOKENTOP_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/status.h"
#include "core/model/quant.h"

/* GGUF metadata value types (gguf.h's gguf_type). */
typedef enum {
    GGUF_TYPE_UINT8 = 0, GGUF_TYPE_INT8 = 1, GGUF_TYPE_UINT16 = 2, GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4, GGUF_TYPE_INT32 = 5, GGUF_TYPE_FLOAT32 = 6, GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8, GGUF_TYPE_ARRAY = 9, GGUF_TYPE_UINT64 = 10, GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12, GGUF_TYPE_END = 13,
} gguf_type;

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_NAME 64           /* a tensor name is shorter (ggml's GGML_MAX_NAME) */
/* Limits far above real files (tens of keys, a few thousand tensors, vocabularies of 262,144),
 * so a forged count cannot make the reader allocate more than a few hundred megabytes however
 * large the file: the key and tensor tables and a string array's offsets are the only
 * allocations that grow with the file. */
#define GGUF_MAX_KV (1u << 16)
#define GGUF_MAX_TENSORS (1u << 18)
#define GGUF_MAX_STRINGS (1u << 24)  /* elements of one string array */

/* A string inside the mapping: len bytes at ptr, not NUL-terminated, not checked for UTF-8. */
typedef struct {
    const char *ptr;
    uint64_t len;
} gguf_str;

/* An array value inside the mapping. data is the first element's bytes (little-endian, any
 * alignment: read with the gguf_array_* accessors); string arrays also carry each element's
 * offset from data (the only allocation an array costs: 8 bytes an element). */
typedef struct {
    gguf_type type;                 /* element type; never GGUF_TYPE_ARRAY */
    uint64_t n;
    const uint8_t *data;
    const uint64_t *str_offsets;    /* (n) for GGUF_TYPE_STRING, else NULL; owned by the file */
} gguf_array;

typedef struct {
    const char *key;                /* NUL-terminated copy (keys hold no NUL); owned by the file */
    gguf_type type;
    const uint8_t *value;           /* the value's bytes in the mapping (scalars, strings' bytes) */
    gguf_str str;                   /* GGUF_TYPE_STRING */
    gguf_array arr;                 /* GGUF_TYPE_ARRAY */
} gguf_kv;

typedef struct {
    const char *name;               /* NUL-terminated copy; owned by the file */
    uint32_t type;                  /* a quant_type ggml defines (maybe one tokentop cannot read) */
    int n_dims;                     /* 1..4 */
    uint64_t ne[GGUF_MAX_DIMS];     /* ne[0] is the innermost (row length); 1 beyond n_dims */
    uint64_t numel;                 /* ne[0] * ne[1] * ne[2] * ne[3] */
    uint64_t nbytes;                /* numel / block size * block bytes */
    uint64_t offset;                /* from the start of the data section */
    const void *data;               /* inside the read-only mapping; do not free */
} gguf_tensor;

typedef struct gguf_file gguf_file;

/* Maps path read-only and validates it as above. On failure *out is NULL, nothing stays mapped,
 * and err names the file and the field ("m.gguf: tensor blk.0.attn_q.weight: offset 96 + 4096
 * bytes runs past the end of the file (4000 bytes)"): TT_ERR_IO when it cannot be read,
 * TT_ERR_FORMAT for anything malformed. */
tt_status gguf_open(const char *path, gguf_file **out, tt_error *err);

/* The same over a caller-owned buffer (tests, fuzzing), which must outlive the file; name is used
 * in messages. */
tt_status gguf_open_buffer(const void *buf, size_t len, const char *name, gguf_file **out,
                           tt_error *err);

/* Unmaps and frees; NULL is safe. */
void gguf_close(gguf_file *f);

/* Hands the pages wholly inside [p, p + n) of f's mapping back to the kernel (madvise
 * MADV_DONTNEED), for data a caller copied and will not read again soon: resident memory stops
 * counting them, and a later read faults them back in from the file. Nothing for a file opened
 * from a buffer, or a range outside the mapping. */
void gguf_release(const gguf_file *f, const void *p, size_t n);

const char *gguf_name(const gguf_file *f);      /* the path (or name) it was opened with */
uint32_t gguf_version(const gguf_file *f);      /* 2 or 3 */
uint32_t gguf_alignment(const gguf_file *f);    /* general.alignment, default 32 */
uint64_t gguf_data_offset(const gguf_file *f);  /* where the data section starts in the file */
uint64_t gguf_file_size(const gguf_file *f);

/* ---- metadata */

size_t gguf_kv_count(const gguf_file *f);
const gguf_kv *gguf_kv_at(const gguf_file *f, size_t i);   /* in file order */
const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key);  /* NULL when absent */

/* "uint32", "string", "array", ... */
const char *gguf_type_name(uint32_t t);

/* Typed getters. Each fails with TT_ERR_FORMAT and a message naming the file and key when the
 * key is absent ("m.gguf: key llama.block_count: missing") or holds another type ("m.gguf: key
 * llama.block_count: expected an integer, got string"); *out is untouched then. Integers accept
 * any integer type whose value fits (writers differ: u32 or i32 or u64); floats accept float32
 * and float64; bool only bool. gguf_find_kv first for an optional key. */
tt_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, tt_error *err);
tt_status gguf_get_i32(const gguf_file *f, const char *key, int32_t *out, tt_error *err);
tt_status gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out, tt_error *err);
tt_status gguf_get_f32(const gguf_file *f, const char *key, float *out, tt_error *err);
tt_status gguf_get_bool(const gguf_file *f, const char *key, bool *out, tt_error *err);
tt_status gguf_get_string(const gguf_file *f, const char *key, gguf_str *out, tt_error *err);

/* An array of elements of type elem ("m.gguf: key tokenizer.ggml.scores: expected an array of
 * float32, got an array of int32"). elem GGUF_TYPE_END accepts any element type. */
tt_status gguf_get_array(const gguf_file *f, const char *key, gguf_type elem, gguf_array *out,
                         tt_error *err);

/* Element i (< a->n) of an array of the matching type. */
float gguf_array_f32(const gguf_array *a, uint64_t i);
int32_t gguf_array_i32(const gguf_array *a, uint64_t i);
uint32_t gguf_array_u32(const gguf_array *a, uint64_t i);
gguf_str gguf_array_str(const gguf_array *a, uint64_t i);

/* A malloc'd NUL-terminated copy of s (NULL when out of memory). */
char *gguf_str_dup(gguf_str s);

/* Whether s equals the C string c. */
bool gguf_str_eq(gguf_str s, const char *c);

/* ---- tensors */

size_t gguf_tensor_count(const gguf_file *f);
const gguf_tensor *gguf_tensor_at(const gguf_file *f, size_t i);   /* in file order */
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);  /* NULL if absent */

/* Checks what binding a tensor needs: it exists, its type is one tokentop reads (else "m.gguf:
 * tensor blk.0.ffn_down.weight: type Q5_K is not supported (supported: F32, ...)"), its shape is
 * ne[0..n_dims) (trailing 1s ignored on both sides: "expected [2048,512], got [512,2048]"), and
 * every block scale is finite ("block 17 (row 0): scale d is NaN"). Fills *out when not NULL. The
 * scale check reads every block of the tensor. */
tt_status gguf_tensor_check(const gguf_file *f, const char *name, int n_dims, const uint64_t *ne,
                            const gguf_tensor **out, tt_error *err);

/* Bytes of one row (ne[0] weights) of t, and a pointer to row r (< numel / ne[0]). */
uint64_t gguf_tensor_row_bytes(const gguf_tensor *t);
const void *gguf_tensor_row(const gguf_tensor *t, uint64_t r);

/* "[2048,512]" (ne order) into buf. */
const char *gguf_shape_str(const uint64_t *ne, int n_dims, char *buf, size_t cap);

/* ---- what a listing shows */

/* general.architecture, or "" when absent or not a string (NUL-terminated copy owned by f). */
const char *gguf_architecture(const gguf_file *f);

/* general.parameter_count when present, else the sum of every tensor's numel. */
uint64_t gguf_parameter_count(const gguf_file *f);

/* The file's quantization: general.file_type named as llama.cpp does ("Q4_K_M"), else the type of
 * most weights (by bytes) among 2-D tensors ("Q8_0"), else "?". */
const char *gguf_quantization(const gguf_file *f);

/* Bits a weight over every tensor of f (their bytes * 8 / their elements), as llama.cpp reports
 * it ("4.89" for a Q4_K_M Llama); 0 for a file without tensors. */
double gguf_bits_per_weight(const gguf_file *f);

#endif
