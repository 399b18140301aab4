/* jsonr.h: reading typed fields of a parsed JSON object (cJSON) with messages that name the file
 * and the field: "config.json: n_head: expected an integer, got a string ("12")". Every reader
 * treats an absent member and a null one alike. */
#ifndef TOKENTOP_JSONR_H
#define TOKENTOP_JSONR_H

#include <stdbool.h>
#include <stddef.h>

#include "core/base/status.h"

struct cJSON;

/* Parses len bytes of text that must be one JSON object (trailing whitespace allowed) into *out
 * (the caller frees it with cJSON_Delete). Errors name the file (name) and the line. */
tt_status jsonr_parse_object(const char *json, size_t len, const char *name, struct cJSON **out,
                             tt_error *err);

/* The member called key (case-sensitive); NULL when absent or null. */
const struct cJSON *jsonr_field(const struct cJSON *obj, const char *key);

/* An integer member within [lo, hi] into *out. Absent: *out = dflt, or an error when required. */
tt_status jsonr_int(const struct cJSON *obj, const char *name, const char *key, bool required,
                    int dflt, int lo, int hi, int *out, tt_error *err);

/* A finite number member that fits a float (absent: *present = false, *out untouched). */
tt_status jsonr_num(const struct cJSON *obj, const char *name, const char *key, double *out,
                    bool *present, tt_error *err);

/* A boolean member (absent: *present = false, *out untouched). */
tt_status jsonr_bool(const struct cJSON *obj, const char *name, const char *key, bool *out,
                     bool *present, tt_error *err);

/* A string member (absent: *out = NULL); the string belongs to obj. */
tt_status jsonr_str(const struct cJSON *obj, const char *name, const char *key, const char **out,
                    tt_error *err);

/* An optional number held as a float: absent leaves *has false; present, valid(x) must hold,
 * else "NAME: KEY: X is NOT_WHAT", and it must not round to a float 0 that is not valid ("is too
 * small"). */
tt_status jsonr_setting(const struct cJSON *obj, const char *name, const char *key,
                        bool (*valid)(double), const char *not_what, float *out, bool *has,
                        tt_error *err);

/* Token ids: an integer in [0, V) (V <= 0: no upper bound), or an array of them (Hugging Face
 * allows several end tokens). Up to cap ids go to ids[0 ..], their count to *n (0 when absent,
 * null or an empty array); more than cap is an error. */
tt_status jsonr_token_ids(const struct cJSON *obj, const char *name, const char *key, int V,
                          int *ids, int cap, int *n, tt_error *err);

#endif
