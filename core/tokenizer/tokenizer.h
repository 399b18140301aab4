/* tokenizer.h: GPT-2 byte-level BPE (vocab.json + merges.txt): encode, decode, and a streaming
 * decoder that never emits a partial UTF-8 sequence. */
#ifndef TOKENTOP_TOKENIZER_H
#define TOKENTOP_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/status.h"

typedef struct tokenizer tokenizer;

/* Loads vocab.json and merges.txt (GPT-2 format, "#version" line optional). Validates: vocab is a
 * JSON object of string -> unique non-negative ids (below 2^21), with a token for every single
 * byte; every merge names two strings and its result is in the vocabulary (a repeated merge keeps
 * its later rank, as in encoder.py). On failure *out is NULL and err names the file and
 * line/entry. A loaded tokenizer is read-only: encode/decode may run from several threads. */
tt_status tokenizer_load(const char *vocab_path, const char *merges_path, tokenizer **out,
                         tt_error *err);

/* The same over caller-owned text (tests, fuzzing): vocab_len bytes of vocab.json and
 * merges_len bytes of merges.txt (no NUL needed), named vocab_name and merges_name in messages.
 * tokenizer_load reads the two files and calls this; the buffers may be freed afterwards. */
tt_status tokenizer_load_buffers(const char *vocab, size_t vocab_len, const char *vocab_name,
                                 const char *merges, size_t merges_len, const char *merges_name,
                                 tokenizer **out, tt_error *err);

/* NULL is safe. */
void tokenizer_free(tokenizer *t);

/* Largest id + 1. */
int tokenizer_vocab_size(const tokenizer *t);

/* The id of "<|endoftext|>", or -1. */
int tokenizer_eot_id(const tokenizer *t);

/* Encodes len bytes of text. "<|endoftext|>" in text is plain text (split into ordinary tokens).
 * Invalid UTF-8 (policy in tokenizer.c and docs/models.md): each byte outside a valid sequence becomes
 * its own single-byte token, so decoding always gives back the exact input bytes. On success *ids
 * is malloc'd (caller frees; may be NULL when *n == 0); on failure *ids is NULL and *n is 0. */
tt_status tokenizer_encode(const tokenizer *t, const char *text, size_t len, int32_t **ids,
                           int *n, tt_error *err);

/* The raw bytes a token stands for (the byte-level mapping undone), or NULL for an unknown id.
 * Not NUL-terminated; *len (when len is not NULL) receives the length. Owned by the tokenizer. */
const char *tokenizer_token_bytes(const tokenizer *t, int32_t id, size_t *len);

/* The token's vocab.json spelling (byte-level alphabet, e.g. "\u0120The"), or NULL. */
const char *tokenizer_token_str(const tokenizer *t, int32_t id);

/* Decodes ids into a malloc'd NUL-terminated byte string (*len excludes the NUL). Unknown ids
 * fail with TT_ERR_ARG. */
tt_status tokenizer_decode(const tokenizer *t, const int32_t *ids, int n, char **out,
                           size_t *len, tt_error *err);

/* True when both have the same vocabulary and merges (a draft model must match its target). */
bool tokenizer_equal(const tokenizer *a, const tokenizer *b);

/* GPT-2's byte-level alphabet (bytes_to_unicode): cp_of_byte[b] is the character that spells byte
 * b in vocab.json: the printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for themselves,
 * the other 68 are U+0100, U+0101, ... in byte order. */
void tokenizer_byte_alphabet(uint32_t cp_of_byte[256]);

/* Streaming decoder: push token bytes as they are generated; complete UTF-8 characters come out,
 * an incomplete trailing sequence is held back until it completes. Bytes that can never form valid
 * UTF-8 are emitted as U+FFFD (one per maximal invalid subpart). */
typedef struct {
    unsigned char pending[4];
    int n_pending;
} utf8_stream;

void utf8_stream_init(utf8_stream *s);

/* Appends the printable result of pushing n bytes to out (capacity cap; needs at most
 * 3 * (n + 4) bytes) and returns the number of bytes written. Never writes more than cap bytes:
 * output that does not fit is dropped. */
size_t utf8_stream_push(utf8_stream *s, const char *bytes, size_t n, char *out, size_t cap);

/* Emits whatever is held back (as U+FFFD) and resets; returns bytes written. */
size_t utf8_stream_flush(utf8_stream *s, char *out, size_t cap);

#endif
