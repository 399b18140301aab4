/* tokenizer.h: BPE tokenizers: GPT-2's byte-level BPE from vocab.json + merges.txt, and Hugging
 * Face tokenizer.json files (byte-level BPE as in Llama 3, Qwen and SmolLM2; SentencePiece-style
 * BPE with byte fallback as in Llama 2, TinyLlama and Mistral): encode, decode, display, and a
 * streaming decoder that never emits a partial UTF-8 sequence. */
#ifndef TOKENTOP_TOKENIZER_H
#define TOKENTOP_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/status.h"

typedef struct tokenizer tokenizer;

/* Loads a model directory's tokenizer: DIR/tokenizer.json when present, else DIR/vocab.json +
 * DIR/merges.txt; and DIR/tokenizer_config.json when present (add_bos_token, bos_token,
 * eos_token; its text stays readable through tokenizer_config_text). A directory with neither
 * fails with TT_ERR_IO naming the files it looked for. */
tt_status tokenizer_load_dir(const char *dir, tokenizer **out, tt_error *err);

/* tokenizer.json (json_len bytes, named json_name in messages) and optionally
 * tokenizer_config.json (config may be NULL), from caller-owned buffers (tests, fuzzing).
 * Supported: model.type BPE (merges as "a b" strings or [a, b] pairs, byte_fallback,
 * ignore_merges, unk_token, fuse_unk); normalizers NFC, Prepend, Replace (a string pattern) and
 * Sequences of them; pre-tokenizers Split (a Regex or String pattern, behaviour Isolated),
 * Digits, ByteLevel (use_regex), Metaspace and Sequences of them; decoders ByteLevel, Metaspace
 * and the SentencePiece Sequence (Replace, ByteFallback, Fuse, Strip); post-processors
 * TemplateProcessing (its first special token is the BOS), ByteLevel, and Sequences of them;
 * added_tokens. Anything else is refused naming the file, the field and the value. */
tt_status tokenizer_load_json_buffers(const char *json, size_t json_len, const char *json_name,
                                      const char *config, size_t config_len,
                                      const char *config_name, tokenizer **out, tt_error *err);

/* A GGUF file's tokenizer.ggml.* values, as plain arrays (core/model/ reads the file). */
typedef struct {
    const char *model;          /* tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece) */
    const char *pre;            /* tokenizer.ggml.pre (gpt2): llama-bpe, qwen2, smollm, gpt2, default; NULL: default */
    int n_tokens;
    const char *const *tokens;  /* (n_tokens) NUL-terminated spellings */
    const float *scores;        /* (n_tokens); needed by llama, which ranks its merges by them */
    const int32_t *types;       /* (n_tokens) llama.cpp token types (3 control, 4 user-defined, 6 byte), or NULL */
    int n_merges;
    const char *const *merges;  /* (n_merges) "a b", gpt2 */
    int bos_id, eos_id, unk_id; /* -1 when absent */
    int add_bos;                /* tokenizer.ggml.add_bos_token: 1, 0, or -1 when absent (llama: yes) */
    bool add_space_prefix;      /* llama: SentencePiece's dummy prefix (tokenizer.ggml.add_space_prefix) */
} tokenizer_gguf_arrays;

/* A tokenizer from GGUF arrays (the buffers may be freed afterwards). gpt2: the vocabulary, the
 * merges and the pre-tokenizer pre names (its regex, as the model's tokenizer.json has it); an
 * unknown pre or model is refused by name. llama: SentencePiece BPE with byte fallback, merges
 * recovered from the scores (transformers' SentencePieceExtractor order). Control, unknown and
 * user-defined tokens are added tokens (the first two special). name (the file) is used in
 * messages. On failure *out is NULL. */
tt_status tokenizer_load_gguf_arrays(const tokenizer_gguf_arrays *a, const char *name,
                                     tokenizer **out, tt_error *err);

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

/* The end-of-text token: tokenizer_config.json's eos_token, else "<|endoftext|>", else "</s>";
 * -1 when there is none. */
int tokenizer_eot_id(const tokenizer *t);

/* The beginning-of-text token (tokenizer_config.json's bos_token or the post-processor's), or -1.
 * GPT-2's vocab.json path has none of its own (-1): callers use the end-of-text token. */
int tokenizer_bos_id(const tokenizer *t);

/* True when the model expects tokenizer_bos_id first (add_bos_token, or the post-processor's
 * template; false for GPT-2's files and byte-level tokenizers without a template). */
bool tokenizer_adds_bos(const tokenizer *t);

/* True for a special token (tokenizer.json added_tokens with "special": true; GPT-2's
 * "<|endoftext|>"). Out-of-range ids are not special. */
bool tokenizer_is_special(const tokenizer *t, int32_t id);

/* The id spelled exactly so (a special token such as "<|im_end|>" or "<|eot_id|>", or any
 * vocabulary entry in the file's spelling), or -1. */
int32_t tokenizer_token_id(const tokenizer *t, const char *spelling);

/* tokenizer_config.json's text as read (NUL-terminated; owned by the tokenizer), or NULL. */
const char *tokenizer_config_text(const tokenizer *t);

/* Encodes len bytes of text, without the BOS (see tokenizer_adds_bos). vocab.json path:
 * "<|endoftext|>" in text is plain text (split into ordinary tokens). tokenizer.json path: added
 * tokens in the text are matched first (the longest at the leftmost place), as Hugging Face's
 * tokenizer(text) does.
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

/* Decodes ids into a malloc'd NUL-terminated byte string (*len excludes the NUL): the tokens'
 * bytes one after another, so decoding a continuation gives exactly its text. Unknown ids fail
 * with TT_ERR_ARG. */
tt_status tokenizer_decode(const tokenizer *t, const int32_t *ids, int n, char **out,
                           size_t *len, tt_error *err);

/* The same for ids that start a text: the decoder's strip of the leading space SentencePiece
 * prepends is applied too, so decode_text(encode(x)) == x for text without added tokens. */
tt_status tokenizer_decode_text(const tokenizer *t, const int32_t *ids, int n, char **out,
                                size_t *len, tt_error *err);

/* A token shown as the UI shows it: text_token_display (flags TEXT_ESCAPE_*) of its bytes, so a
 * leading space (GPT-2's "Ġ", SentencePiece's "▁") is "␣" and a lone byte (<0xNN>, a partial
 * UTF-8 character) is "\xNN"; a special token is wrapped in ⟨ ⟩ ("⟨<|im_end|>⟩"); an unknown id
 * is "#id". Writes at most cap bytes, NUL included; returns the length. */
size_t tokenizer_token_display(const tokenizer *t, int32_t id, int flags, char *out, size_t cap);

/* True when both have the same vocabulary, special tokens and merges (a draft model must match
 * its target). */
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
