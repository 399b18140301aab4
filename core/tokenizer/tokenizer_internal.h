/* tokenizer_internal.h: the tokenizer's state, shared by tokenizer.c (vocab.json + merges.txt,
 * encode, decode) and tokenizer_json.c (tokenizer.json, tokenizer_config.json). Not for use
 * outside core/tokenizer/. */
#ifndef TOKENTOP_TOKENIZER_INTERNAL_H
#define TOKENTOP_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <cJSON.h>
#include <pcre2.h>

#include "core/tokenizer/tokenizer.h"

/* Ids at or above this are refused: real BPE vocabularies stay far below (GPT-2: 50,257; the
 * largest in common use: ~256k), and a stray huge id would otherwise size every per-id array. */
#define TOKENIZER_MAX_ID (1 << 21)

/* Pre-tokenizer splits one after another (a Sequence of Split, Digits and ByteLevel). */
#define TOKENIZER_MAX_SPLITS 8

/* Steps of a normalizer (a Sequence of NFC, Prepend, Replace). */
#define TOKENIZER_MAX_NORMS 8

typedef enum {
    TOKENIZER_BYTE_LEVEL, /* GPT-2, Llama 3, Qwen: bytes spelled in the byte-level alphabet */
    TOKENIZER_SPM,        /* SentencePiece-style: characters, "▁" for a space, <0xNN> bytes */
} tokenizer_kind;

typedef struct {
    int32_t left, right, result; /* token ids */
} tokenizer_merge;

typedef struct {
    uint64_t key; /* (left << 32) | right; PAIR_EMPTY when unused */
    int32_t rank;
    int32_t result;
} pair_slot;

/* An added token (tokenizer.json added_tokens): matched in the text before pre-tokenization. */
typedef struct {
    int32_t id;
    const char *content; /* points into the tokenizer's arena */
    uint32_t len;
    bool special, lstrip, rstrip;
} added_token;

/* One step of the normalizer (tokenizer.json normalizer, a Sequence of these in order). */
typedef enum { NORM_NFC, NORM_PREPEND, NORM_REPLACE } norm_kind;

typedef struct {
    norm_kind kind;
    char *from, *to; /* REPLACE: from -> to; PREPEND: to */
    size_t from_len, to_len;
} norm_step;

#define TOKENIZER_FLAG_SPECIAL 1

struct tokenizer {
    tokenizer_kind kind;
    int vocab_size;          /* largest id + 1 */
    int n_tokens;            /* ids in use (vocab_size minus gaps) */
    const char **tok_str;    /* (vocab_size) spelling in the file, NUL-terminated; NULL for gaps */
    uint32_t *tok_str_len;   /* (vocab_size) */
    const char **tok_bytes;  /* (vocab_size) raw bytes (what the decoder gives) */
    uint32_t *tok_bytes_len; /* (vocab_size) */
    uint8_t *tok_flags;      /* (vocab_size) TOKENIZER_FLAG_* */
    char *arena;             /* backs tok_str and tok_bytes */
    char *arena_end;         /* where the next token's text goes (tokenizer_set_token) */

    int32_t *str_slots;      /* open addressing: spelling -> id, -1 when unused */
    uint32_t str_mask;

    tokenizer_merge *merges; /* (n_merges) in file order; rank = index */
    int n_merges;
    pair_slot *pair_slots;   /* open addressing: (left, right) -> rank, result */
    uint32_t pair_mask;

    int32_t byte_id[256];    /* the token of each single byte (byte-level, or <0xNN>); -1 none */
    int32_t unk_id;          /* SPM without a byte token: the unknown token, or -1 */
    int eot_id, bos_id;
    bool add_bos;            /* the model sees bos_id first (post-processor, add_bos_token) */

    /* tokenizer.json only */
    bool from_json;          /* added tokens are matched in text, HF merge order */
    bool ignore_merges;      /* a piece that is itself a token is that token */
    bool fuse_unk;
    bool byte_fallback;      /* SPM: a character not in the vocabulary becomes <0xNN> tokens */
    norm_step norms[TOKENIZER_MAX_NORMS];
    int n_norms;
    int metaspace;           /* pre-tokenizer Metaspace: 0 none, 1 prepend "▁" to the first
                              * segment, 2 to every segment, 3 never */
    bool strip_leading_space; /* decoder Strip / Metaspace: one leading space of the text goes */
    bool spm_words;          /* SPM: no token has "▁" after another character, so a piece may
                              * be cut before each run of "▁" (encoding a long text stays fast) */
    added_token *added;      /* (n_added) by first byte, longest first */
    int n_added;
    int added_start[257];    /* added[added_start[b] .. added_start[b + 1]) start with byte b */
    char *config_json;       /* tokenizer_config.json's text, or NULL */

    pcre2_code *re[TOKENIZER_MAX_SPLITS]; /* the pre-tokenizer's splits, applied in order */
    int n_re;
    bool jit;
};

/* A tokenizer with nothing loaded (ids -1), or NULL without memory. */
tokenizer *tokenizer_new(void);

/* Shared by the two loaders (tokenizer.c). where names the vocabulary in messages
 * ("vocab.json", "tokenizer.json: model.vocab"). Fills the per-id tables (t->kind says how a
 * spelling decodes) from a JSON object of spelling -> id, with at least min_vocab_size ids and
 * extra_arena bytes left for tokenizer_set_token (added tokens). */
tt_status tokenizer_vocab_from_json(tokenizer *t, const char *where, const cJSON *root,
                                    int min_vocab_size, size_t extra_arena, tt_error *err);

/* Sets a token's spelling and decoded bytes for an id the vocabulary left free (both copied into
 * the arena: 2 + len + bytes_len bytes of extra_arena). */
void tokenizer_set_token(tokenizer *t, int32_t id, const char *s, uint32_t len,
                         const char *bytes, uint32_t bytes_len);

/* Looks a spelling up: its id, or -1. */
int32_t tokenizer_vocab_lookup(const tokenizer *t, const char *s, size_t len);

/* The merge table: sized for n merges; then tokenizer_add_merge for each in rank order. */
tt_status tokenizer_merges_init(tokenizer *t, size_t n, const char *where, tt_error *err);

/* Adds the merge (a, b) with the next rank. Returns 0, or 1 when a is not a token, 2 when b is
 * not, 3 when a+b is not (joined, of room for both, receives a+b). */
int tokenizer_add_merge(tokenizer *t, const char *a, size_t la, const char *b, size_t lb,
                        char *joined);

/* Compiles the pre-tokenizer's patterns (NUL-terminated) in order, with the JIT when it can. */
tt_status tokenizer_compile_splits(tokenizer *t, const char *const *patterns, int n,
                                   const char *where, tt_error *err);

/* The byte-level alphabet's inverse (byte_of_cp[cp] for cp < 324, else -1), and a spelling
 * turned into its bytes (out: room for len bytes). */
void tokenizer_byte_alphabet_inverse(int16_t byte_of_cp[324]);
uint32_t tokenizer_spelling_to_bytes(const char *s, uint32_t len, const int16_t byte_of_cp[324],
                                     char *out);

/* buf's len bytes parsed as JSON; NULL with "PATH:LINE: invalid JSON (near byte N)" in err. */
cJSON *tokenizer_parse_json(const char *path, const char *buf, size_t len, tt_error *err);

/* A short printable rendering of len bytes for messages, quotes included. */
const char *tokenizer_quote(char *out, size_t cap, const char *s, size_t len);

#endif
