/* session_file.h: the conversation file of /save and /load: JSON with the format name, version,
 * model, vocab_size, sampler settings, the text and every token with its origin, probability and
 * turn (docs/repl.md, "Saved sessions"); a file that is not JSON is plain text, one user turn.
 * Parsing and serializing work on memory buffers, so they run without a file system. */
#ifndef TOKENTOP_SESSION_FILE_H
#define TOKENTOP_SESSION_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/decode/sampler.h"
#include "core/session/session.h"
#include "core/base/status.h"

#define SESSION_FILE_FORMAT "tokentop-session"
#define SESSION_FILE_VERSION 1

/* What a session file holds, all validated; owned (session_file_free). */
typedef struct {
    bool plain;                /* not JSON: text is the whole buffer and nothing else is set */
    char *text;                /* (text_len) text to tokenize: a plain file, or a JSON file's
                                  "text" when it has no "tokens"; NULL otherwise */
    size_t text_len;
    int32_t *ids;              /* (n) the "tokens" ids when present, else NULL */
    token_info *info;          /* (n) their origin, p and turn, else NULL */
    int n;
    /* Settings: the base settings with the file's fields applied (JSON files only). */
    sampler_params sampler;
    int max_new_tokens;
    bool has_seed;
    uint64_t seed;
    bool has_stops;            /* the file sets the stop strings (possibly none) */
    char *stops[SESSION_MAX_STOPS];   /* (n_stops) owned copies */
    int n_stops;
} session_file;

/* Parses buf[0..len) (need not be NUL-terminated). name is used in messages only ("NAME:
 * settings.top_p: ..."); V is the model's vocabulary size (token ids and vocab_size are checked
 * against it); base gives the settings a field that is absent keeps (NULL: the defaults).
 * On failure out is left empty (session_file_free is still safe) and err names the field. */
tt_status session_file_parse(const char *buf, size_t len, const char *name, int V,
                             const session_settings *base, session_file *out, tt_error *err);
void session_file_free(session_file *f);   /* NULL is safe */

/* Replaces s's conversation with f (tokenizing f->text with s's tokenizer; the cache keeps the
 * longest common prefix), then, for a JSON file, applies its settings. On failure s is as it
 * was. *n_loaded receives the number of tokens. */
tt_status session_file_apply(session *s, const session_file *f, int *n_loaded, tt_error *err);

/* The JSON form of s (malloc'd, *len bytes, NUL-terminated); model_name may be NULL. NULL when
 * out of memory. */
char *session_file_serialize(const session *s, const char *model_name, size_t *len);

/* session_file_serialize written to path. */
tt_status session_file_save(const session *s, const char *path, const char *model_name,
                            tt_error *err);
/* Reads path, parses it against s's model and settings and applies it (session_file_apply):
 * settings are all validated before any is applied. */
tt_status session_file_load(session *s, const char *path, int *n_loaded, tt_error *err);

#endif
