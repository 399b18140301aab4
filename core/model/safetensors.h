/* safetensors.h: read-only, validated access to .safetensors files (mmap). */
#ifndef TOKENTOP_SAFETENSORS_H
#define TOKENTOP_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/status.h"

/* Every dtype the format defines; only F32, F16 and BF16 hold weights tokentop uses, the rest are
 * known (so a file holding them is valid) but refused where a weight is expected. */
typedef enum {
    ST_BOOL, ST_U8, ST_I8, ST_I16, ST_U16, ST_F16, ST_BF16, ST_I32, ST_U32, ST_F32,
    ST_F64, ST_I64, ST_U64, ST_F8_E4M3, ST_F8_E5M2,
} st_dtype;

#define ST_MAX_DIMS 8

typedef struct {
    const char *name;            /* owned by the file */
    st_dtype dtype;
    int ndim;
    uint64_t shape[ST_MAX_DIMS];
    uint64_t numel;              /* product of shape (1 for a scalar) */
    uint64_t nbytes;             /* numel * element size == end - begin */
    uint64_t offset;             /* where data starts, in bytes from the start of the file */
    const void *data;            /* inside the read-only mapping; do not free */
} st_tensor;

typedef struct safetensors_file safetensors_file;

/* Maps and validates path: header length (8-byte little-endian, <= 100,000,000 and inside the
 * file), the header is a JSON object, every dtype known, shapes without overflow, data_offsets in
 * bounds, matching dtype x shape, without overlaps and without duplicate names. On failure *out is
 * NULL, nothing stays mapped, and err names the file and the offending tensor/field. */
tt_status safetensors_open(const char *path, safetensors_file **out, tt_error *err);

/* The same validation over a caller-owned buffer (tests, fuzzing). The buffer must outlive the
 * returned file; name is used in messages. */
tt_status safetensors_open_buffer(const void *buf, size_t len, const char *name,
                                  safetensors_file **out, tt_error *err);

/* Closes and unmaps; NULL is safe. */
void safetensors_close(safetensors_file *f);

/* Number of tensors, and the i-th in the file's header order (0 <= i < count). */
size_t safetensors_count(const safetensors_file *f);
const st_tensor *safetensors_at(const safetensors_file *f, size_t i);

/* The tensor named name, or NULL. */
const st_tensor *safetensors_find(const safetensors_file *f, const char *name);

/* "F32", "BF16", ... and the element size in bytes (F8 types: 1; BOOL: 1). */
const char *st_dtype_name(st_dtype d);
size_t st_dtype_size(st_dtype d);

#endif
