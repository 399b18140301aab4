/* status.h: status codes and error messages shared by every module. */
#ifndef TOKENTOP_STATUS_H
#define TOKENTOP_STATUS_H

#include <stddef.h>

/* Every fallible function in core/ and gpu/ returns a tt_status and, when it fails, fills the
 * caller's tt_error (if not NULL) with one line that names the file, the field and the value,
 * e.g. "model.safetensors: tensor h.3.mlp.c_fc.weight: expected [768,3072], got [3072,768]". */
typedef enum {
    TT_OK = 0,
    TT_ERR_IO,          /* a file could not be opened, read or mapped */
    TT_ERR_FORMAT,      /* a file's contents are malformed (safetensors, JSON, merges) */
    TT_ERR_CONFIG,      /* a config value is missing, invalid or unsupported */
    TT_ERR_ARG,         /* a caller-supplied argument or user value is invalid */
    TT_ERR_NOMEM,       /* an allocation failed */
    TT_ERR_NUMERIC,     /* non-finite values where finite ones are required (logits) */
    TT_ERR_CONTEXT,     /* a span does not fit in the context window */
    TT_ERR_UNSUPPORTED, /* valid input this build cannot handle (a pickle checkpoint, a dtype) */
    TT_ERR_DEVICE,      /* the GPU failed (no device, out of memory, sticky error) */
    TT_ERR_INTERRUPTED, /* stopped by the user (Ctrl-C) */
} tt_status;

#define TT_ERROR_MAX 512

typedef struct {
    tt_status status;
    char msg[TT_ERROR_MAX];
} tt_error;

/* A short fixed name for a status ("format error"); never NULL. */
const char *tt_status_str(tt_status s);

/* Records status s and a printf-style message in err (when err is not NULL); returns s, so a
 * failing function can `return tt_fail(err, TT_ERR_FORMAT, "%s: ...", path);`. */
tt_status tt_fail(tt_error *err, tt_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes err->msg with "prefix: " (for adding a file name at an outer layer). */
void tt_error_prefix(tt_error *err, const char *prefix);

#endif
