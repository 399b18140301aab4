/* util.h: small helpers with one home: reading or mapping a whole file, joining paths, naming a JSON value's
 * type in messages, parsing an integer option strictly, the argmax of a row of logits and growing
 * an array by doubling. */
#ifndef TOKENTOP_UTIL_H
#define TOKENTOP_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/base/status.h"

struct cJSON;

/* Reads all of path ("-": standard input) into *out (malloc'd, NUL-terminated; *len bytes, the
 * NUL not counted). max_bytes > 0 also requires a regular file of at most that many bytes
 * (TT_ERR_FORMAT otherwise). Failures name the file: "PATH: cannot open: REASON" (TT_ERR_IO;
 * *missing, when not NULL, says whether the file does not exist), "PATH: read error: REASON",
 * TT_ERR_NOMEM. On failure *out is NULL. */
tt_status util_read_file(const char *path, size_t max_bytes, char **out, size_t *len,
                         bool *missing, tt_error *err);

/* Maps the regular file path read-only and private: *map (NULL for an empty file) and its *len
 * bytes, to be released with munmap. Failures name the file: "PATH: cannot open: REASON",
 * "PATH: cannot stat: REASON", "PATH: not a regular file", "PATH: cannot map N bytes: REASON"
 * (TT_ERR_IO). */
tt_status util_map_file(const char *path, void **map, size_t *len, tt_error *err);

/* "dir/file" (one slash between them whether or not dir ends in one), malloc'd; NULL when out of
 * memory. */
char *util_path_join(const char *dir, const char *file);

/* "a string", "a number", "a boolean", "null", "an array", "an object" (or "invalid JSON"), for
 * messages such as "config.json: n_embd: expected a number, got a string". */
const char *util_json_type_name(const struct cJSON *j);

typedef enum {
    UTIL_PARSE_OK = 0,
    UTIL_PARSE_NOT_INTEGER,    /* empty, or anything but a base-10 integer (with optional sign
                                  and leading blanks), such as "12x" or "1.5" */
    UTIL_PARSE_OUT_OF_RANGE,   /* an integer outside [lo, hi] (or outside long) */
} util_parse_result;

/* Parses s as a whole base-10 integer in [lo, hi] into *out (untouched on failure). */
util_parse_result util_parse_long(const char *s, long lo, long hi, long *out);

/* Index of the largest of v[0..n) (n >= 1), the lowest index on ties: the token greedy decoding
 * takes. */
int util_argmax(const float *v, int n);

/* Makes the array *items (a pointer to the array's pointer, e.g. &v->ids; capacity *cap
 * elements of item_size bytes, 0 with the array NULL at first) hold at least need elements: from
 * initial elements, doubling. False when memory runs out (or the size overflows), leaving the
 * array and *cap as they were. UTIL_RESERVE(v->ids, &v->cap, need, initial) passes the size. */
bool util_reserve_items(void *items, size_t *cap, size_t need, size_t initial, size_t item_size);
#define UTIL_RESERVE(items, cap, need, initial)                                                \
    util_reserve_items(&(items), cap, need, initial, sizeof *(items))

/* util_reserve_items for a byte buffer. */
bool util_reserve(char **buf, size_t *cap, size_t need, size_t initial);

#endif
