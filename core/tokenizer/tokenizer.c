/* tokenizer.c: BPE encode and decode for both loaders (GPT-2's vocab.json/merges.txt here,
 * tokenizer.json in tokenizer_json.c), token display, and the streaming UTF-8 decoder.
 *
 * tokenizer.json tokenizers first cut added tokens out of the text (the longest at the leftmost
 * place), normalize each stretch between them (NFC through utf8proc, Prepend, Replace,
 * Metaspace's "▁"), and run the pre-tokenizer's splits one after another; a piece's first
 * symbols are its bytes (byte-level) or its characters with <0xNN> byte fallback
 * (SentencePiece), and a new pair competes at once, as in Hugging Face's BPE.
 *
 * GPT-2's files encode as OpenAI's encoder.py does, exactly: the pre-tokenizer regex splits the
 * text into pieces, each piece's bytes become byte-level symbols (bytes_to_unicode), and merges
 * are applied by rank: the lowest-ranked adjacent pair first, all its occurrences left to right
 * in one pass, before the next rank is considered. A binary heap over a linked list of symbols
 * makes this O(n log n) in the piece length, so one huge piece (100,000 copies of a letter) stays
 * fast.
 *
 * Invalid UTF-8 policy (lossless): an invalid sequence (a truncated sequence, a stray continuation
 * byte, an overlong form, a surrogate, a code point above U+10FFFF, the bytes 0xC0, 0xC1,
 * 0xF5..0xFF) is a barrier no regex match crosses, and every byte of it becomes a piece of its
 * own, so it encodes to its single-byte token. With the JIT, PCRE2_MATCH_INVALID_UTF does the
 * skipping; without it encode finds the valid fragments itself (same pieces; a test compares the
 * two). Nothing is replaced or dropped: decoding the ids gives back the exact input bytes, valid
 * or not, and the valid text between invalid bytes encodes as it would on its own. Valid UTF-8
 * encodes exactly as in the reference (which only ever sees valid text). The streaming decoder,
 * not the encoder, is where invalid bytes turn into U+FFFD.
 *
 * vocab.json path: "<|endoftext|>" in the text is plain text: it goes through the regex like
 * anything else.
 *
 * TOKENTOP_PCRE2_JIT=0 in the environment disables the PCRE2 JIT (tests use it to exercise the
 * interpreter fallback, which is also taken when JIT compilation is unavailable). */
#include "core/tokenizer/tokenizer_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/base/text.h"
#include "core/base/util.h"

#define GPT2_PATTERN \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* Pieces up to this many bytes are remembered per encode call (repeated words are common). */
#define PIECE_CACHE_MAX_LEN 64

#define PAIR_EMPTY UINT64_MAX

/* ============================================================================================
 * The byte-level alphabet (bytes_to_unicode): printable bytes stand for themselves, the other 68
 * map to U+0100, U+0101, ... in byte order, so every token is printable text. */

void tokenizer_byte_alphabet(uint32_t cp_of_byte[256])
{
    int next = 256;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                         (b >= 0xAE && b <= 0xFF);
        cp_of_byte[b] = printable ? (uint32_t)b : (uint32_t)next++;
    }
}

void tokenizer_byte_alphabet_inverse(int16_t byte_of_cp[324])
{
    uint32_t cp_of_byte[256];
    for (int cp = 0; cp < 324; cp++)
        byte_of_cp[cp] = -1;
    tokenizer_byte_alphabet(cp_of_byte);
    for (int b = 0; b < 256; b++)
        byte_of_cp[cp_of_byte[b]] = (int16_t)b;
}

/* Undoes the byte-level mapping of a spelling into out (capacity >= len). Characters outside the
 * alphabet (an added token such as "<|im_start|>" is plain ASCII and inside it; others are rare)
 * and invalid UTF-8 keep their own bytes, so every token still decodes to something. */
uint32_t tokenizer_spelling_to_bytes(const char *s, uint32_t len, const int16_t byte_of_cp[324],
                                     char *out)
{
    const unsigned char *u = (const unsigned char *)s;
    uint32_t i = 0, w = 0;
    while (i < len) {
        uint32_t cp;
        int k = text_utf8_decode(u + i, len - i, &cp);
        if (k == 0) {
            out[w++] = (char)u[i++];
            continue;
        }
        if (cp < 324 && byte_of_cp[cp] >= 0) {
            out[w++] = (char)byte_of_cp[cp];
        } else {
            memcpy(out + w, u + i, (size_t)k);
            w += (uint32_t)k;
        }
        i += (uint32_t)k;
    }
    return w;
}

/* ============================================================================================
 * Small helpers: files, quoting for messages, hashing */

const char *tokenizer_quote(char *out, size_t cap, const char *s, size_t len)
{
    size_t w = 0;
    out[w++] = '"';
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (w + 8 >= cap) {
            memcpy(out + w, "...", 3);
            w += 3;
            break;
        }
        if (c == '"' || c == '\\')
            w += (size_t)snprintf(out + w, cap - w, "\\%c", c);
        else if (c < 0x20 || c == 0x7F)
            w += (size_t)snprintf(out + w, cap - w, "\\x%02x", c);
        else
            out[w++] = (char)c;
    }
    out[w++] = '"';
    out[w] = 0;
    return out;
}

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, then a final mix for the low bits */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static uint64_t hash_pair(uint64_t key)
{
    key *= 0x9e3779b97f4a7c15ull;
    return key ^ (key >> 32);
}

static uint32_t table_capacity(size_t n)
{
    uint32_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    return cap;
}

int32_t tokenizer_vocab_lookup(const tokenizer *t, const char *s, size_t len)
{
    for (uint32_t i = (uint32_t)hash_bytes(s, len) & t->str_mask;; i = (i + 1) & t->str_mask) {
        int32_t id = t->str_slots[i];
        if (id < 0)
            return -1;
        if (t->tok_str_len[id] == len && memcmp(t->tok_str[id], s, len) == 0)
            return id;
    }
}

static const pair_slot *pair_lookup(const tokenizer *t, int32_t left, int32_t right)
{
    uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    for (uint32_t i = (uint32_t)hash_pair(key) & t->pair_mask;; i = (i + 1) & t->pair_mask) {
        const pair_slot *p = &t->pair_slots[i];
        if (p->key == key)
            return p;
        if (p->key == PAIR_EMPTY)
            return NULL;
    }
}

/* ============================================================================================
 * Loading vocab.json */

cJSON *tokenizer_parse_json(const char *path, const char *buf, size_t len, tt_error *err)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(buf ? buf : "", buf ? len : 0, &end, false);
    if (root)
        return root;
    size_t off = buf && end && end >= buf && end <= buf + len ? (size_t)(end - buf) : 0;
    int line = 1;
    for (size_t i = 0; i < off; i++)
        line += buf[i] == '\n';
    tt_fail(err, TT_ERR_FORMAT, "%s:%d: invalid JSON (near byte %zu)", path, line, off);
    return NULL;
}

static void set_token(tokenizer *t, int32_t id, char **arena, const char *s, uint32_t len,
                      const char *bytes, uint32_t bytes_len)
{
    char *a = *arena;
    memcpy(a, s, len);
    a[len] = 0;
    t->tok_str[id] = a;
    t->tok_str_len[id] = len;
    a += len + 1;
    memcpy(a, bytes, bytes_len);
    a[bytes_len] = 0;
    t->tok_bytes[id] = a;
    t->tok_bytes_len[id] = bytes_len;
    *arena = a + bytes_len + 1;
}

/* The spelling's slot in the hash table: the one holding it, or the empty one it would take. */
static int32_t *str_slot(tokenizer *t, const char *s, size_t len)
{
    for (uint32_t i = (uint32_t)hash_bytes(s, len) & t->str_mask;; i = (i + 1) & t->str_mask) {
        int32_t *slot = &t->str_slots[i];
        if (*slot < 0 || (t->tok_str_len[*slot] == len && memcmp(t->tok_str[*slot], s, len) == 0))
            return slot;
    }
}

/* The bytes a spelling decodes to: the byte-level alphabet undone, or SentencePiece's "▁" as a
 * space and <0xNN> as the byte. out has room for len bytes. */
static uint32_t decoded_bytes(const tokenizer *t, const char *s, uint32_t len,
                              const int16_t byte_of_cp[324], char *out)
{
    if (t->kind == TOKENIZER_BYTE_LEVEL)
        return tokenizer_spelling_to_bytes(s, len, byte_of_cp, out);
    unsigned hi, lo;
    if (len == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' &&
        sscanf(s + 3, "%1x%1x", &hi, &lo) == 2) {
        out[0] = (char)(hi * 16 + lo);
        return 1;
    }
    uint32_t w = 0;
    for (uint32_t i = 0; i < len;) {
        if (i + 3 <= len && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
            out[w++] = ' ';
            i += 3;
        } else {
            out[w++] = s[i++];
        }
    }
    return w;
}

void tokenizer_set_token(tokenizer *t, int32_t id, const char *s, uint32_t len,
                         const char *bytes, uint32_t bytes_len)
{
    /* The arena's tail past the vocabulary was sized by the caller (extra_arena). */
    char *a = t->arena_end;
    set_token(t, id, &a, s, len, bytes, bytes_len);
    t->arena_end = a;
    int32_t *slot = str_slot(t, s, len);
    if (*slot < 0)
        *slot = id;
    t->n_tokens++;
}

tt_status tokenizer_vocab_from_json(tokenizer *t, const char *path, const cJSON *root,
                                    int min_vocab_size, size_t extra_arena, tt_error *err)
{
    char q[96];
    if (!cJSON_IsObject(root))
        return tt_fail(err, TT_ERR_FORMAT, "%s: expected a JSON object of token -> id, got %s",
                       path, root ? util_json_type_name(root) : "nothing (the field is missing)");

    /* Pass 1: ids are integers in range; find the largest and the arena size. */
    int max_id = -1, n = 0;
    size_t arena_size = extra_arena;
    for (const cJSON *e = root->child; e; e = e->next, n++) {
        const char *key = e->string;
        if (!key)
            return tt_fail(err, TT_ERR_FORMAT, "%s: entry %d has no string key", path, n);
        size_t klen = strlen(key);
        if (klen == 0)
            return tt_fail(err, TT_ERR_FORMAT, "%s: entry %d: empty token string (id %g)", path,
                           n, cJSON_IsNumber(e) ? e->valuedouble : -1.0);
        if (klen > UINT32_MAX / 4)
            return tt_fail(err, TT_ERR_FORMAT, "%s: entry %d: token too long (%zu bytes)", path,
                           n, klen);
        if (!cJSON_IsNumber(e))
            return tt_fail(err, TT_ERR_FORMAT, "%s: token %s: id must be an integer, got %s",
                           path, tokenizer_quote(q, sizeof q, key, klen),
                           util_json_type_name(e));
        double v = e->valuedouble;
        if (!isfinite(v) || v != floor(v) || v < 0 || v >= TOKENIZER_MAX_ID)
            return tt_fail(err, TT_ERR_FORMAT,
                           "%s: token %s: id must be an integer in [0, %d), got %g", path,
                           tokenizer_quote(q, sizeof q, key, klen), TOKENIZER_MAX_ID, v);
        if ((int)v > max_id)
            max_id = (int)v;
        arena_size += 2 * (klen + 1);
    }
    if (n == 0)
        return tt_fail(err, TT_ERR_FORMAT, "%s: the vocabulary is empty", path);

    /* Pass 2: fill the per-id arrays; catch repeated ids and repeated tokens. */
    t->vocab_size = max_id + 1 > min_vocab_size ? max_id + 1 : min_vocab_size;
    t->n_tokens = n;
    t->tok_str = calloc((size_t)t->vocab_size, sizeof *t->tok_str);
    t->tok_str_len = calloc((size_t)t->vocab_size, sizeof *t->tok_str_len);
    t->tok_bytes = calloc((size_t)t->vocab_size, sizeof *t->tok_bytes);
    t->tok_bytes_len = calloc((size_t)t->vocab_size, sizeof *t->tok_bytes_len);
    t->tok_flags = calloc((size_t)t->vocab_size, sizeof *t->tok_flags);
    t->arena = malloc(arena_size);
    uint32_t cap = table_capacity((size_t)t->vocab_size);
    t->str_slots = malloc(cap * sizeof *t->str_slots);
    t->str_mask = cap - 1;
    if (!t->tok_str || !t->tok_str_len || !t->tok_bytes || !t->tok_bytes_len || !t->tok_flags ||
        !t->arena || !t->str_slots)
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for %d tokens", path, n);
    memset(t->str_slots, 0xFF, cap * sizeof *t->str_slots);
    int16_t byte_of_cp[324];
    tokenizer_byte_alphabet_inverse(byte_of_cp);
    char *a = t->arena;
    for (const cJSON *e = root->child; e; e = e->next) {
        const char *key = e->string;
        uint32_t klen = (uint32_t)strlen(key);
        int32_t id = (int32_t)e->valuedouble;
        if (t->tok_str[id]) {
            char q2[96];
            return tt_fail(err, TT_ERR_FORMAT, "%s: id %d is used twice: by %s and by %s", path,
                           id, tokenizer_quote(q, sizeof q, t->tok_str[id], t->tok_str_len[id]),
                           tokenizer_quote(q2, sizeof q2, key, klen));
        }
        int32_t *slot = str_slot(t, key, klen);
        if (*slot >= 0)
            return tt_fail(err, TT_ERR_FORMAT, "%s: token %s appears twice (ids %d and %d)", path,
                           tokenizer_quote(q, sizeof q, key, klen), *slot, id);
        *slot = id;
        char *bytes = a + klen + 1; /* decoded in place after the spelling: never longer */
        uint32_t blen = decoded_bytes(t, key, klen, byte_of_cp, bytes);
        set_token(t, id, &a, key, klen, bytes, blen);
    }
    t->arena_end = a;

    for (int b = 0; b < 256; b++) {
        char s[8];
        int slen;
        if (t->kind == TOKENIZER_BYTE_LEVEL) {
            uint32_t cp_of_byte[256];
            tokenizer_byte_alphabet(cp_of_byte);
            slen = text_utf8_encode(cp_of_byte[b], s);
        } else {
            slen = snprintf(s, sizeof s, "<0x%02X>", b);
        }
        t->byte_id[b] = tokenizer_vocab_lookup(t, s, (size_t)slen);
        /* Byte-level BPE needs every single byte as a token, or some text could not be
         * encoded; SentencePiece falls back to the unknown token (checked by its loader). */
        if (t->byte_id[b] < 0 && t->kind == TOKENIZER_BYTE_LEVEL)
            return tt_fail(err, TT_ERR_FORMAT,
                           "%s: no token for byte 0x%02x (spelled %s): not a byte-level BPE "
                           "vocabulary", path, b, tokenizer_quote(q, sizeof q, s, (size_t)slen));
    }
    t->eot_id = tokenizer_vocab_lookup(t, "<|endoftext|>", 13);
    return TT_OK;
}

/* path names the text in messages; buf holds len bytes of it. */
static tt_status load_vocab(tokenizer *t, const char *path, const char *buf, size_t len,
                            tt_error *err)
{
    cJSON *root = tokenizer_parse_json(path, buf, len, err);
    if (!root)
        return TT_ERR_FORMAT;
    tt_status st = tokenizer_vocab_from_json(t, path, root, 0, 0, err);
    cJSON_Delete(root);
    return st;
}

/* ============================================================================================
 * Merges */

tt_status tokenizer_merges_init(tokenizer *t, size_t n, const char *where, tt_error *err)
{
    if (n > (size_t)INT32_MAX / 2)
        return tt_fail(err, TT_ERR_FORMAT, "%s: too many merges (%zu)", where, n);
    t->merges = malloc((n ? n : 1) * sizeof *t->merges);
    uint32_t cap = table_capacity(n);
    t->pair_slots = malloc(cap * sizeof *t->pair_slots);
    t->pair_mask = cap - 1;
    if (!t->merges || !t->pair_slots)
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for %zu merges", where, n);
    for (uint32_t i = 0; i < cap; i++)
        t->pair_slots[i].key = PAIR_EMPTY;
    return TT_OK;
}

int tokenizer_add_merge(tokenizer *t, const char *a, size_t la, const char *b, size_t lb,
                        char *joined)
{
    int32_t left = tokenizer_vocab_lookup(t, a, la);
    if (left < 0)
        return 1;
    int32_t right = tokenizer_vocab_lookup(t, b, lb);
    if (right < 0)
        return 2;
    memcpy(joined, a, la);
    memcpy(joined + la, b, lb);
    int32_t result = tokenizer_vocab_lookup(t, joined, la + lb);
    if (result < 0)
        return 3;
    int rank = t->n_merges++;
    t->merges[rank] = (tokenizer_merge){left, right, result};
    /* A repeated pair takes its later rank, as the dict in encoder.py does. */
    uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    for (uint32_t i = (uint32_t)hash_pair(key) & t->pair_mask;; i = (i + 1) & t->pair_mask) {
        pair_slot *p = &t->pair_slots[i];
        if (p->key == key || p->key == PAIR_EMPTY) {
            *p = (pair_slot){key, rank, result};
            return 0;
        }
    }
}

/* path names the text in messages; buf holds len bytes of it. */
static tt_status load_merges(tokenizer *t, const char *path, const char *buf, size_t len,
                             tt_error *err)
{
    size_t n_lines = 1;
    for (size_t i = 0; i < len; i++)
        n_lines += buf[i] == '\n';
    tt_status st = tokenizer_merges_init(t, n_lines, path, err);
    if (st != TT_OK)
        return st;
    size_t max_sym = 0;
    for (int id = 0; id < t->vocab_size; id++)
        if (t->tok_str_len[id] > max_sym)
            max_sym = t->tok_str_len[id];
    char *joined = malloc(2 * max_sym + 1);
    if (!joined)
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", path);

    char q[96], q2[96], q3[96];
    int line_no = 0;
    st = TT_OK;
    for (const char *line = buf; line < buf + len;) {
        const char *nl = memchr(line, '\n', (size_t)(buf + len - line));
        const char *next = nl ? nl + 1 : buf + len;
        size_t llen = (size_t)((nl ? nl : buf + len) - line);
        line_no++;
        if (llen > 0 && line[llen - 1] == '\r')
            llen--;
        if (llen == 0 || (line_no == 1 && llen >= 8 && memcmp(line, "#version", 8) == 0)) {
            line = next;
            continue;
        }
        const char *sp = memchr(line, ' ', llen);
        size_t l1 = sp ? (size_t)(sp - line) : llen;
        size_t l2 = sp ? llen - l1 - 1 : 0;
        if (!sp || l1 == 0 || l2 == 0 || memchr(sp + 1, ' ', l2)) {
            st = tt_fail(err, TT_ERR_FORMAT,
                         "%s:%d: expected two symbols separated by one space, got %s", path,
                         line_no, tokenizer_quote(q, sizeof q, line, llen));
            break;
        }
        int bad = tokenizer_add_merge(t, line, l1, sp + 1, l2, joined);
        if (bad == 1 || bad == 2) {
            st = tt_fail(err, TT_ERR_FORMAT, "%s:%d: symbol %s is not in the vocabulary", path,
                         line_no, bad == 1 ? tokenizer_quote(q, sizeof q, line, l1)
                                           : tokenizer_quote(q, sizeof q, sp + 1, l2));
            break;
        }
        if (bad == 3) {
            st = tt_fail(err, TT_ERR_FORMAT,
                         "%s:%d: merge of %s and %s gives %s, which is not in the vocabulary",
                         path, line_no, tokenizer_quote(q, sizeof q, line, l1),
                         tokenizer_quote(q2, sizeof q2, sp + 1, l2),
                         tokenizer_quote(q3, sizeof q3, joined, l1 + l2));
            break;
        }
        line = next;
    }
    free(joined);
    return st;
}

/* ============================================================================================
 * Load, free, accessors */

static pcre2_code *compile_pattern(const char *pattern, uint32_t options, const char *where,
                                   tt_error *err)
{
    int code;
    PCRE2_SIZE offset;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | options, &code, &offset, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        char q[96];
        pcre2_get_error_message(code, msg, sizeof msg);
        tt_fail(err, TT_ERR_UNSUPPORTED,
                "%s: pattern %s: PCRE2 cannot compile it at offset %zu: %s", where,
                tokenizer_quote(q, sizeof q, pattern, strlen(pattern)), (size_t)offset,
                (const char *)msg);
    }
    return re;
}

/* With JIT, PCRE2_MATCH_INVALID_UTF lets one pass over the whole text skip invalid sequences.
 * The interpreter re-validates the rest of the subject on every call in that mode (quadratic
 * over a long text), so without JIT encode splits the text into valid fragments itself and
 * matches them with PCRE2_NO_UTF_CHECK: the same pieces, since an invalid sequence is a barrier
 * no match crosses in either case. */
tt_status tokenizer_compile_splits(tokenizer *t, const char *const *patterns, int n,
                                   const char *where, tt_error *err)
{
    if (n > TOKENIZER_MAX_SPLITS)
        return tt_fail(err, TT_ERR_UNSUPPORTED, "%s: %d splits (at most %d)", where, n,
                       TOKENIZER_MAX_SPLITS);
    const char *env = getenv("TOKENTOP_PCRE2_JIT");
    bool try_jit = !(env && strcmp(env, "0") == 0);
    for (int i = 0; try_jit && i < n; i++) {
        t->re[i] = compile_pattern(patterns[i], PCRE2_MATCH_INVALID_UTF, where, err);
        t->n_re = i + 1;
        if (!t->re[i])
            return TT_ERR_UNSUPPORTED;
        if (pcre2_jit_compile(t->re[i], PCRE2_JIT_COMPLETE) != 0)
            try_jit = false;
    }
    if (try_jit) {
        t->jit = true;
        return TT_OK;
    }
    for (int i = 0; i < t->n_re; i++)
        pcre2_code_free(t->re[i]);
    t->n_re = 0;
    t->jit = false;
    for (int i = 0; i < n; i++) {
        t->re[i] = compile_pattern(patterns[i], 0, where, err);
        if (!t->re[i])
            return TT_ERR_UNSUPPORTED;
        t->n_re = i + 1;
    }
    return TT_OK;
}

tt_status tokenizer_load(const char *vocab_path, const char *merges_path, tokenizer **out,
                         tt_error *err)
{
    *out = NULL;
    if (!vocab_path || !merges_path)
        return tt_fail(err, TT_ERR_ARG, "tokenizer: vocab and merges paths are required");
    char *vocab = NULL, *merges = NULL;
    size_t vocab_len = 0, merges_len = 0;
    tt_status st = util_read_file(vocab_path, 0, &vocab, &vocab_len, NULL, err);
    if (st == TT_OK)
        st = util_read_file(merges_path, 0, &merges, &merges_len, NULL, err);
    if (st == TT_OK)
        st = tokenizer_load_buffers(vocab, vocab_len, vocab_path, merges, merges_len,
                                    merges_path, out, err);
    free(vocab);
    free(merges);
    return st;
}

tt_status tokenizer_load_buffers(const char *vocab, size_t vocab_len, const char *vocab_name,
                                 const char *merges, size_t merges_len, const char *merges_name,
                                 tokenizer **out, tt_error *err)
{
    *out = NULL;
    if ((!vocab && vocab_len) || (!merges && merges_len))
        return tt_fail(err, TT_ERR_ARG, "tokenizer: vocab or merges buffer is NULL");
    tokenizer *t = tokenizer_new();
    if (!t)
        return tt_fail(err, TT_ERR_NOMEM, "tokenizer: out of memory");
    tt_status st = load_vocab(t, vocab_name, vocab ? vocab : "", vocab_len, err);
    if (st == TT_OK)
        st = load_merges(t, merges_name, merges ? merges : "", merges_len, err);
    if (st == TT_OK) {
        const char *pattern = GPT2_PATTERN;
        st = tokenizer_compile_splits(t, &pattern, 1, "tokenizer: the GPT-2 pre-tokenizer", err);
    }
    if (st != TT_OK) {
        tokenizer_free(t);
        return st;
    }
    /* GPT-2 was trained with "<|endoftext|>" between documents: it is the one special token. */
    if (t->eot_id >= 0)
        t->tok_flags[t->eot_id] |= TOKENIZER_FLAG_SPECIAL;
    *out = t;
    return TT_OK;
}

tokenizer *tokenizer_new(void)
{
    tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->eot_id = -1;
    t->bos_id = -1;
    t->unk_id = -1;
    return t;
}

void tokenizer_free(tokenizer *t)
{
    if (!t)
        return;
    free(t->tok_str);
    free(t->tok_str_len);
    free(t->tok_bytes);
    free(t->tok_bytes_len);
    free(t->tok_flags);
    free(t->arena);
    free(t->str_slots);
    free(t->merges);
    free(t->pair_slots);
    for (int i = 0; i < t->n_norms; i++) {
        free(t->norms[i].from);
        free(t->norms[i].to);
    }
    free(t->added);
    free(t->config_json);
    for (int i = 0; i < t->n_re; i++)
        pcre2_code_free(t->re[i]);
    free(t);
}

int tokenizer_vocab_size(const tokenizer *t) { return t->vocab_size; }

int tokenizer_eot_id(const tokenizer *t) { return t->eot_id; }

int tokenizer_bos_id(const tokenizer *t) { return t->bos_id; }

bool tokenizer_adds_bos(const tokenizer *t) { return t->add_bos && t->bos_id >= 0; }

const char *tokenizer_config_text(const tokenizer *t) { return t->config_json; }

bool tokenizer_is_special(const tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->vocab_size && (t->tok_flags[id] & TOKENIZER_FLAG_SPECIAL);
}

int32_t tokenizer_token_id(const tokenizer *t, const char *spelling)
{
    return spelling ? tokenizer_vocab_lookup(t, spelling, strlen(spelling)) : -1;
}

const char *tokenizer_token_bytes(const tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->vocab_size || !t->tok_bytes[id]) {
        if (len)
            *len = 0;
        return NULL;
    }
    if (len)
        *len = t->tok_bytes_len[id];
    return t->tok_bytes[id];
}

const char *tokenizer_token_str(const tokenizer *t, int32_t id)
{
    if (id < 0 || id >= t->vocab_size)
        return NULL;
    return t->tok_str[id];
}

size_t tokenizer_token_display(const tokenizer *t, int32_t id, int flags, char *out, size_t cap)
{
    if (cap == 0)
        return 0;
    size_t nb = 0;
    const char *b = t ? tokenizer_token_bytes(t, id, &nb) : NULL;
    if (!b)
        return (size_t)snprintf(out, cap, "#%d", (int)id) < cap ? strlen(out) : cap - 1;
    if (!tokenizer_is_special(t, id))
        return text_token_display(b, nb, flags, out, cap);
    /* ⟨name⟩: a special token is a marker, not text the model could have spelled. */
    static const char open[] = "\xe2\x9f\xa8", close[] = "\xe2\x9f\xa9";
    if (cap < 7)
        return text_token_display(b, nb, flags, out, cap);
    memcpy(out, open, 3);
    size_t k = text_token_display(b, nb, flags & ~TEXT_ESCAPE_WHITESPACE, out + 3, cap - 6);
    memcpy(out + 3 + k, close, 3);
    out[6 + k] = 0;
    return 6 + k;
}

bool tokenizer_equal(const tokenizer *a, const tokenizer *b)
{
    if (a == b)
        return true;
    if (!a || !b || a->kind != b->kind || a->vocab_size != b->vocab_size ||
        a->n_tokens != b->n_tokens || a->n_merges != b->n_merges)
        return false;
    for (int id = 0; id < a->vocab_size; id++) {
        if (!a->tok_str[id] != !b->tok_str[id] || a->tok_flags[id] != b->tok_flags[id])
            return false;
        if (a->tok_str[id] && (a->tok_str_len[id] != b->tok_str_len[id] ||
                               memcmp(a->tok_str[id], b->tok_str[id], a->tok_str_len[id]) != 0))
            return false;
    }
    for (int i = 0; i < a->n_merges; i++)
        if (a->merges[i].left != b->merges[i].left || a->merges[i].right != b->merges[i].right)
            return false;
    return true;
}

/* ============================================================================================
 * BPE over one piece: symbols in a linked list, candidate pairs in a min-heap on (rank, left
 * position). Entries are never removed when a merge invalidates them; a popped entry is checked
 * against the current symbols instead (ids only grow by merging, so a match is never stale). */

typedef struct {
    int32_t rank;
    int32_t pos;      /* left symbol's index */
    int32_t right;    /* right symbol's index */
    int32_t left_id, right_id, result;
} bpe_pair;

typedef struct {
    int32_t *sym;     /* (n) token id of each symbol, -1 once merged away */
    int32_t *prev, *next; /* (n) neighbours, -1 at the ends */
    bpe_pair *heap;   /* (3n) */
    bpe_pair *deferred; /* (2n) pairs made during the current rank's pass */
    char *spelling;   /* (2n) a byte-level piece spelled in the alphabet (ignore_merges) */
    size_t cap;
} bpe_scratch;

typedef struct {
    int32_t *ids;
    size_t n, cap;
} id_vec;

static bool id_vec_reserve(id_vec *v, size_t extra)
{
    return UTIL_RESERVE(v->ids, &v->cap, v->n + extra, 64);
}

static bool bpe_scratch_reserve(bpe_scratch *w, size_t n)
{
    if (n <= w->cap)
        return true;
    size_t cap = w->cap ? w->cap : 64;
    while (cap < n)
        cap *= 2;
    free(w->sym); free(w->prev); free(w->next); free(w->heap); free(w->deferred);
    free(w->spelling);
    w->sym = malloc(cap * sizeof *w->sym);
    w->prev = malloc(cap * sizeof *w->prev);
    w->next = malloc(cap * sizeof *w->next);
    w->heap = malloc(3 * cap * sizeof *w->heap);
    w->deferred = malloc(2 * cap * sizeof *w->deferred);
    w->spelling = malloc(2 * cap);
    w->cap = cap;
    if (!w->sym || !w->prev || !w->next || !w->heap || !w->deferred || !w->spelling) {
        w->cap = 0;
        return false;
    }
    return true;
}

static void bpe_scratch_free(bpe_scratch *w)
{
    free(w->sym); free(w->prev); free(w->next); free(w->heap); free(w->deferred);
    free(w->spelling);
}

static bool pair_before(const bpe_pair *a, const bpe_pair *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(bpe_pair *h, size_t *n, bpe_pair p)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!pair_before(&p, &h[up]))
            break;
        h[i] = h[up];
        i = up;
    }
    h[i] = p;
}

static bpe_pair heap_pop(bpe_pair *h, size_t *n)
{
    bpe_pair top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && pair_before(&h[c + 1], &h[c]))
            c++;
        if (!pair_before(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = last;
    return top;
}

/* Fills *p for the symbols at i and j; false when they have no merge. */
static bool bpe_make_pair(const tokenizer *t, const bpe_scratch *w, int32_t i, int32_t j,
                          bpe_pair *p)
{
    const pair_slot *m = pair_lookup(t, w->sym[i], w->sym[j]);
    if (!m)
        return false;
    *p = (bpe_pair){m->rank, i, j, w->sym[i], w->sym[j], m->result};
    return true;
}

/* The id of the piece as one token (ignore_merges), or -1. */
static int32_t whole_piece_id(const tokenizer *t, const unsigned char *s, size_t n,
                              bpe_scratch *w)
{
    if (t->kind != TOKENIZER_BYTE_LEVEL)
        return tokenizer_vocab_lookup(t, (const char *)s, n);
    uint32_t cp_of_byte[256];
    tokenizer_byte_alphabet(cp_of_byte);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += (size_t)text_utf8_encode(cp_of_byte[s[i]], w->spelling + k);
    return tokenizer_vocab_lookup(t, w->spelling, k);
}

/* The first symbols of a piece: one per byte (byte-level), or one per character that is a token,
 * else its <0xNN> bytes (byte_fallback), else the unknown token (once for a run with fuse_unk).
 * Returns how many. */
static size_t bpe_initial_symbols(const tokenizer *t, const unsigned char *s, size_t n,
                                  int32_t *sym)
{
    size_t m = 0;
    if (t->kind == TOKENIZER_BYTE_LEVEL) {
        for (size_t i = 0; i < n; i++)
            sym[m++] = t->byte_id[s[i]];
        return m;
    }
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = text_utf8_decode(s + i, n - i, &cp);
        if (k == 0)
            k = 1;
        int32_t id = tokenizer_vocab_lookup(t, (const char *)s + i, (size_t)k);
        bool bytes = id < 0 && t->byte_fallback;
        for (int j = 0; bytes && j < k; j++)
            bytes = t->byte_id[s[i + j]] >= 0;
        if (id >= 0) {
            sym[m++] = id;
        } else if (bytes) {
            for (int j = 0; j < k; j++)
                sym[m++] = t->byte_id[s[i + j]];
        } else if (!(t->fuse_unk && m > 0 && sym[m - 1] == t->unk_id)) {
            sym[m++] = t->unk_id;
        }
        i += (size_t)k;
    }
    return m;
}

/* Appends the ids of piece s[0..n) (n >= 1) to out. */
static bool bpe_encode_piece(const tokenizer *t, const unsigned char *s, size_t n,
                             bpe_scratch *w, id_vec *out)
{
    if (n == 1 && t->kind == TOKENIZER_BYTE_LEVEL) {
        if (!id_vec_reserve(out, 1))
            return false;
        out->ids[out->n++] = t->byte_id[s[0]];
        return true;
    }
    if (!bpe_scratch_reserve(w, n) || !id_vec_reserve(out, n))
        return false;
    if (t->ignore_merges) {
        int32_t id = whole_piece_id(t, s, n, w);
        if (id >= 0) {
            out->ids[out->n++] = id;
            return true;
        }
    }
    int32_t *sym = w->sym, *prev = w->prev, *next = w->next;
    size_t m = bpe_initial_symbols(t, s, n, sym);
    size_t hn = 0, nd = 0;
    bpe_pair p;
    for (size_t i = 0; i < m; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < m ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < m; i++)
        if (sym[i] >= 0 && sym[i + 1] >= 0 && bpe_make_pair(t, w, (int32_t)i, (int32_t)i + 1, &p))
            heap_push(w->heap, &hn, p);

    /* encoder.py merges every occurrence of the best pair in one left-to-right pass before it
     * looks at the pairs that pass created; deferring new pairs to the end of the pass keeps
     * that order even for merge lists whose ranks are not monotone. Hugging Face's BPE (the
     * tokenizer.json path) lets a new pair compete at once: it goes straight into the heap. */
    bool defer = !t->from_json;
    int32_t cur_rank = -1;
    for (;;) {
        if (hn == 0 || w->heap[0].rank != cur_rank) {
            for (size_t k = 0; k < nd; k++)
                heap_push(w->heap, &hn, w->deferred[k]);
            nd = 0;
            if (hn == 0)
                break;
            cur_rank = w->heap[0].rank;
        }
        bpe_pair e = heap_pop(w->heap, &hn);
        int32_t i = e.pos, j = e.right;
        if (sym[i] != e.left_id || next[i] != j || sym[j] != e.right_id)
            continue; /* stale: one side was merged since this entry was pushed */
        sym[i] = e.result;
        sym[j] = -2;
        int32_t after = next[j];
        next[i] = after;
        if (after >= 0)
            prev[after] = i;
        if (prev[i] >= 0 && bpe_make_pair(t, w, prev[i], i, &p)) {
            if (defer)
                w->deferred[nd++] = p;
            else
                heap_push(w->heap, &hn, p);
        }
        if (after >= 0 && bpe_make_pair(t, w, i, after, &p)) {
            if (defer)
                w->deferred[nd++] = p;
            else
                heap_push(w->heap, &hn, p);
        }
    }
    for (int32_t i = m ? 0 : -1; i >= 0; i = next[i])
        if (sym[i] >= 0)
            out->ids[out->n++] = sym[i];
    return true;
}

/* ============================================================================================
 * Encode: added tokens, the normalizer, the pre-tokenizer's splits, bytes outside valid UTF-8
 * as single-byte pieces, and a per-call cache of short pieces whose ids are already in the
 * output. */

typedef struct {
    uint64_t hash;
    size_t text_off, out_off;
    uint32_t len, n_ids; /* len == 0: unused */
} piece_entry;

typedef struct {
    piece_entry *slots;
    size_t cap, used;
} piece_cache;

static piece_entry *piece_cache_find(piece_cache *c, const char *text, size_t off, size_t len,
                                     uint64_t h)
{
    for (size_t i = h & (c->cap - 1);; i = (i + 1) & (c->cap - 1)) {
        piece_entry *e = &c->slots[i];
        if (e->len == 0 ||
            (e->hash == h && e->len == len && memcmp(text + e->text_off, text + off, len) == 0))
            return e;
    }
}

static bool piece_cache_grow(piece_cache *c)
{
    size_t cap = c->cap ? 2 * c->cap : 1024;
    piece_entry *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return false;
    for (size_t k = 0; k < c->cap; k++) {
        piece_entry *e = &c->slots[k];
        if (e->len == 0)
            continue;
        size_t i = e->hash & (cap - 1);
        while (slots[i].len != 0)
            i = (i + 1) & (cap - 1);
        slots[i] = *e;
    }
    free(c->slots);
    c->slots = slots;
    c->cap = cap;
    return true;
}

static bool encode_piece_cached(const tokenizer *t, const char *text, size_t off, size_t len,
                                piece_cache *c, bpe_scratch *w, id_vec *out)
{
    const unsigned char *s = (const unsigned char *)text + off;
    if (len < 2 || len > PIECE_CACHE_MAX_LEN)
        return bpe_encode_piece(t, s, len, w, out);
    if (2 * (c->used + 1) > c->cap && !piece_cache_grow(c))
        return bpe_encode_piece(t, s, len, w, out); /* still correct, only slower */
    uint64_t h = hash_bytes(text + off, len);
    piece_entry *e = piece_cache_find(c, text, off, len, h);
    if (e->len != 0) {
        if (!id_vec_reserve(out, e->n_ids))
            return false;
        memcpy(out->ids + out->n, out->ids + e->out_off, e->n_ids * sizeof *out->ids);
        out->n += e->n_ids;
        return true;
    }
    size_t before = out->n;
    if (!bpe_encode_piece(t, s, len, w, out))
        return false;
    *e = (piece_entry){h, off, before, (uint32_t)len, (uint32_t)(out->n - before)};
    c->used++;
    return true;
}

typedef struct {
    const tokenizer *t;
    const char *text;  /* what the pieces are cut from (the normalized text, when normalizing) */
    id_vec out;
    bpe_scratch w;
    piece_cache cache;
    pcre2_match_data *md;
} encode_state;

static tt_status encode_nomem(tt_error *err, size_t len)
{
    return tt_fail(err, TT_ERR_NOMEM, "tokenizer: out of memory encoding %zu bytes", len);
}

/* A byte outside valid UTF-8: its own single-byte token (or the unknown token). */
static bool emit_byte(encode_state *es, unsigned char b)
{
    int32_t id = es->t->byte_id[b] >= 0 ? es->t->byte_id[b] : es->t->unk_id;
    if (id < 0)
        return true;
    if (!id_vec_reserve(&es->out, 1))
        return false;
    es->out.ids[es->out.n++] = id;
    return true;
}

static tt_status split_span(encode_state *es, int level, size_t from, size_t to,
                            uint32_t options, tt_error *err);

/* Text no split matched: valid runs go on to the next split, invalid bytes are pieces alone. */
static tt_status split_gap(encode_state *es, int level, size_t from, size_t to, tt_error *err)
{
    const unsigned char *u = (const unsigned char *)es->text;
    for (size_t pos = from; pos < to;) {
        size_t end = pos;
        uint32_t cp;
        int k;
        while (end < to && (k = text_utf8_decode(u + end, to - end, &cp)) > 0)
            end += (size_t)k;
        if (end > pos) {
            tt_status st = split_span(es, level, pos, end, PCRE2_NO_UTF_CHECK, err);
            if (st != TT_OK)
                return st;
        }
        pos = end;
        for (; pos < to && text_utf8_decode(u + pos, to - pos, &cp) == 0; pos++)
            if (!emit_byte(es, u[pos]))
                return encode_nomem(err, to);
    }
    return TT_OK;
}

/* Cuts text[from, to) with split `level` (Isolated: matches and the text between them are
 * pieces) and hands each piece to the next split; past the last, the piece is BPE-encoded. */
static tt_status split_span(encode_state *es, int level, size_t from, size_t to,
                            uint32_t options, tt_error *err)
{
    const tokenizer *t = es->t;
    if (level == t->n_re) {
        /* Words: no token has a "▁" after another character, so no merge crosses the start of
         * a run of "▁" and the pieces between them encode alone (and hit the cache). */
        size_t start = from;
        for (size_t p = from + 1; t->spm_words && p + 3 <= to; p++)
            if (memcmp(es->text + p, "\xe2\x96\x81", 3) == 0 &&
                !(p >= from + 3 && memcmp(es->text + p - 3, "\xe2\x96\x81", 3) == 0)) {
                if (!encode_piece_cached(t, es->text, start, p - start, &es->cache, &es->w,
                                         &es->out))
                    return encode_nomem(err, to);
                start = p;
            }
        if (to > start &&
            !encode_piece_cached(t, es->text, start, to - start, &es->cache, &es->w, &es->out))
            return encode_nomem(err, to);
        return TT_OK;
    }
    PCRE2_SPTR subject = (PCRE2_SPTR)es->text + from;
    size_t len = to - from, pos = 0;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(es->md);
    while (pos < len) {
        int rc = pcre2_match(t->re[level], subject, len, pos, options, es->md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(t->re[level], subject, len, pos, options | PCRE2_NO_JIT, es->md,
                             NULL);
        size_t start = len, end = len;
        if (rc >= 0) {
            start = ov[0];
            end = ov[1];
        } else if (rc != PCRE2_ERROR_NOMATCH) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return tt_fail(err, TT_ERR_ARG, "tokenizer: pre-tokenizer failed at byte %zu: %s",
                           from + pos, (const char *)msg);
        }
        if (start < pos || end < start || end > len)
            return tt_fail(err, TT_ERR_ARG, "tokenizer: pre-tokenizer returned [%zu, %zu) at %zu",
                           from + start, from + end, from + pos);
        if (end == start && start < len) {
            /* An empty match cuts nothing: step over one character and look again. */
            int k = text_utf8_seq_len(subject + start, len - start);
            end = start + (k > 0 ? (size_t)k : 1);
        }
        tt_status st = split_gap(es, level + 1, from + pos, from + start, err);
        if (st == TT_OK && end > start)
            st = split_span(es, level + 1, from + start, from + end, PCRE2_NO_UTF_CHECK, err);
        if (st != TT_OK)
            return st;
        pos = end;
    }
    return TT_OK;
}

/* Encodes es->text[from, to) without added tokens: the splits (one JIT pass that skips invalid
 * UTF-8, or valid fragments one by one), invalid bytes as single-byte pieces. */
static tt_status encode_range(encode_state *es, size_t from, size_t to, tt_error *err)
{
    if (es->t->jit && es->t->n_re > 0)
        return split_span(es, 0, from, to, 0, err);
    return split_gap(es, 0, from, to, err);
}

/* ---------------------------------------------------------------------------------------------
 * tokenizer.json: added tokens matched first, then each stretch between them normalized. */

typedef struct {
    char *buf;
    size_t n, cap;
} byte_vec;

static bool byte_vec_put(byte_vec *v, const void *s, size_t n)
{
    if (!UTIL_RESERVE(v->buf, &v->cap, v->n + n + 1, 256))
        return false;
    memcpy(v->buf + v->n, s, n);
    v->n += n;
    return true;
}

/* Replaces every `from` in v[start..) by `to`. */
static bool replace_all(byte_vec *v, size_t start, const norm_step *r)
{
    byte_vec tmp = {0};
    bool ok = true;
    size_t i = start;
    while (ok && i < v->n) {
        if (i + r->from_len <= v->n && memcmp(v->buf + i, r->from, r->from_len) == 0) {
            ok = byte_vec_put(&tmp, r->to, r->to_len);
            i += r->from_len;
        } else {
            ok = byte_vec_put(&tmp, v->buf + i, 1);
            i++;
        }
    }
    if (ok) {
        v->n = start;
        ok = byte_vec_put(v, tmp.buf ? tmp.buf : "", tmp.n);
    }
    free(tmp.buf);
    return ok;
}

/* NFC over the valid stretches of v[start..); invalid bytes are kept as they are. */
static bool nfc_range(byte_vec *v, size_t start)
{
    byte_vec tmp = {0};
    const unsigned char *u;
    bool ok = true;
    for (size_t pos = start; ok && pos < v->n;) {
        u = (const unsigned char *)v->buf;
        size_t end = pos;
        uint32_t cp;
        int k;
        while (end < v->n && (k = text_utf8_decode(u + end, v->n - end, &cp)) > 0)
            end += (size_t)k;
        if (end > pos) {
            utf8proc_uint8_t *dst = NULL;
            utf8proc_ssize_t m = utf8proc_map(u + pos, (utf8proc_ssize_t)(end - pos), &dst,
                                              UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            if (m >= 0)
                ok = byte_vec_put(&tmp, dst, (size_t)m);
            else
                ok = byte_vec_put(&tmp, u + pos, end - pos);
            free(dst);
        }
        pos = end;
        for (; ok && pos < v->n && text_utf8_decode(u + pos, v->n - pos, &cp) == 0; pos++)
            ok = byte_vec_put(&tmp, u + pos, 1);
    }
    if (ok) {
        v->n = start;
        ok = byte_vec_put(v, tmp.buf ? tmp.buf : "", tmp.n);
    }
    free(tmp.buf);
    return ok;
}

/* Appends text[0, len) normalized (and Metaspace's spaces and prefix) to v. first: the stretch
 * starts the text (Metaspace's prepend_scheme "first"). */
static bool normalize_into(const tokenizer *t, const char *text, size_t len, bool first,
                           byte_vec *v)
{
    size_t start = v->n;
    if (!byte_vec_put(v, text, len))
        return false;
    if (len == 0)
        return true;
    for (int i = 0; i < t->n_norms; i++) {
        const norm_step *s = &t->norms[i];
        bool ok = true;
        if (s->kind == NORM_NFC) {
            ok = nfc_range(v, start);
        } else if (s->kind == NORM_REPLACE) {
            ok = replace_all(v, start, s);
        } else if (v->n > start) { /* Prepend, to a stretch that is not empty */
            size_t n = v->n - start;
            ok = UTIL_RESERVE(v->buf, &v->cap, v->n + s->to_len + 1, 256);
            if (ok) {
                memmove(v->buf + start + s->to_len, v->buf + start, n);
                memcpy(v->buf + start, s->to, s->to_len);
                v->n += s->to_len;
            }
        }
        if (!ok)
            return false;
    }
    if (t->metaspace) {
        static const norm_step space = {NORM_REPLACE, " ", "\xe2\x96\x81", 1, 3};
        if (!replace_all(v, start, &space))
            return false;
        bool prepend = t->metaspace == 2 || (t->metaspace == 1 && first);
        if (prepend && v->n > start &&
            !(v->n - start >= 3 && memcmp(v->buf + start, "\xe2\x96\x81", 3) == 0)) {
            size_t n = v->n - start;
            if (!UTIL_RESERVE(v->buf, &v->cap, v->n + 4, 256))
                return false;
            memmove(v->buf + start + 3, v->buf + start, n);
            memcpy(v->buf + start, "\xe2\x96\x81", 3);
            v->n += 3;
        }
    }
    return true;
}

/* The longest added token at text[i..len), or NULL. */
static const added_token *added_at(const tokenizer *t, const char *text, size_t i, size_t len)
{
    unsigned char b = (unsigned char)text[i];
    for (int k = t->added_start[b]; k < t->added_start[b + 1]; k++) {
        const added_token *a = &t->added[k];
        if (a->len <= len - i && memcmp(text + i, a->content, a->len) == 0)
            return a;
    }
    return NULL;
}

static bool is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* One stretch of the text, normalized: [from, to) of the work buffer, or an added token. */
typedef struct {
    size_t from, to;
    int32_t id; /* >= 0: an added token */
} stretch;

static tt_status encode_json(encode_state *es, const char *text, size_t len, tt_error *err)
{
    const tokenizer *t = es->t;
    byte_vec work = {0};
    stretch *parts = NULL;
    size_t n_parts = 0, cap_parts = 0;
    tt_status st = TT_OK;
    size_t seg = 0; /* start of the text not yet cut */
    for (size_t i = 0; i <= len; i++) {
        const added_token *a = i < len && t->n_added ? added_at(t, text, i, len) : NULL;
        if (!a && i < len)
            continue;
        size_t seg_end = i, next = a ? i + a->len : len;
        if (a && a->lstrip)
            while (seg_end > seg && is_space((unsigned char)text[seg_end - 1]))
                seg_end--;
        if (a && a->rstrip)
            while (next < len && is_space((unsigned char)text[next]))
                next++;
        if (!UTIL_RESERVE(parts, &cap_parts, n_parts + 2, 16))
            goto nomem;
        if (seg_end > seg) {
            size_t w0 = work.n;
            if (!normalize_into(t, text + seg, seg_end - seg, seg == 0, &work))
                goto nomem;
            parts[n_parts++] = (stretch){w0, work.n, -1};
        }
        if (a)
            parts[n_parts++] = (stretch){0, 0, a->id};
        seg = next;
        i = next - 1; /* the loop's i++ lands on next */
        if (!a)
            break;
    }
    es->text = work.buf ? work.buf : "";
    for (size_t k = 0; st == TT_OK && k < n_parts; k++) {
        if (parts[k].id >= 0) {
            if (!id_vec_reserve(&es->out, 1))
                goto nomem;
            es->out.ids[es->out.n++] = parts[k].id;
        } else {
            st = encode_range(es, parts[k].from, parts[k].to, err);
        }
    }
    free(parts);
    free(work.buf);
    return st;
nomem:
    free(parts);
    free(work.buf);
    return encode_nomem(err, len);
}

tt_status tokenizer_encode(const tokenizer *t, const char *text, size_t len, int32_t **ids,
                           int *n, tt_error *err)
{
    *ids = NULL;
    *n = 0;
    if (!text && len > 0)
        return tt_fail(err, TT_ERR_ARG, "tokenizer: text is NULL but its length is %zu", len);
    /* Every byte gives at most one id (a normalizer may add a few), and the count must fit an
     * int. */
    if (len > (size_t)INT32_MAX / 8)
        return tt_fail(err, TT_ERR_ARG, "tokenizer: text too long to encode (%zu bytes)", len);
    if (len == 0)
        return TT_OK;

    tt_status st = TT_OK;
    encode_state es = {.t = t, .text = text};
    es.md = pcre2_match_data_create(1, NULL);
    if (!es.md || !id_vec_reserve(&es.out, len / 3 + 16)) {
        st = encode_nomem(err, len);
        goto done;
    }
    st = t->from_json ? encode_json(&es, text, len, err) : encode_range(&es, 0, len, err);
    if (st == TT_OK && es.out.n > (size_t)INT32_MAX)
        st = tt_fail(err, TT_ERR_ARG, "tokenizer: text too long to encode (%zu bytes)", len);
    if (st == TT_OK) {
        *ids = es.out.ids;
        *n = (int)es.out.n;
        es.out.ids = NULL;
    }
done:
    free(es.out.ids);
    free(es.cache.slots);
    bpe_scratch_free(&es.w);
    pcre2_match_data_free(es.md);
    return st;
}

/* ============================================================================================
 * Decode */

tt_status tokenizer_decode(const tokenizer *t, const int32_t *ids, int n, char **out,
                           size_t *len, tt_error *err)
{
    *out = NULL;
    if (len)
        *len = 0;
    if (n < 0 || (!ids && n > 0))
        return tt_fail(err, TT_ERR_ARG, "tokenizer: invalid id array (n = %d)", n);
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab_size || !t->tok_bytes[ids[i]])
            return tt_fail(err, TT_ERR_ARG,
                           "tokenizer: unknown token id %d at position %d (vocab size %d)",
                           (int)ids[i], i, t->vocab_size);
        total += t->tok_bytes_len[ids[i]];
    }
    char *s = malloc(total + 1);
    if (!s)
        return tt_fail(err, TT_ERR_NOMEM, "tokenizer: out of memory decoding %d ids", n);
    size_t w = 0;
    for (int i = 0; i < n; i++) {
        memcpy(s + w, t->tok_bytes[ids[i]], t->tok_bytes_len[ids[i]]);
        w += t->tok_bytes_len[ids[i]];
    }
    s[w] = 0;
    *out = s;
    if (len)
        *len = w;
    return TT_OK;
}

tt_status tokenizer_decode_text(const tokenizer *t, const int32_t *ids, int n, char **out,
                                size_t *len, tt_error *err)
{
    size_t w = 0;
    tt_status st = tokenizer_decode(t, ids, n, out, &w, err);
    if (st == TT_OK && t->strip_leading_space && w > 0 && (*out)[0] == ' ') {
        memmove(*out, *out + 1, w);
        w--;
    }
    if (len)
        *len = st == TT_OK ? w : 0;
    return st;
}

/* ============================================================================================
 * Streaming UTF-8 decoder. "Maximal subpart" as in Unicode ch. 3 (U+FFFD substitution): a lead
 * byte followed by valid continuations that stops short is one U+FFFD; a byte that cannot start
 * a sequence (80..BF, C0, C1, F5..FF) is one U+FFFD on its own; the byte that broke a sequence is
 * looked at again as a possible start. */

static const char REPLACEMENT[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

static int utf8_lead_len(unsigned char c)
{
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

/* Valid range of the byte after lead (excludes overlongs, surrogates, > U+10FFFF). */
static void utf8_second_range(unsigned char lead, unsigned char *lo, unsigned char *hi)
{
    *lo = 0x80;
    *hi = 0xBF;
    if (lead == 0xE0) *lo = 0xA0;
    else if (lead == 0xED) *hi = 0x9F;
    else if (lead == 0xF0) *lo = 0x90;
    else if (lead == 0xF4) *hi = 0x8F;
}

/* Output that does not fit in cap is dropped, never written past the end. */
static void stream_emit(char *out, size_t cap, size_t *w, const void *bytes, size_t k)
{
    if (*w + k > cap)
        return;
    memcpy(out + *w, bytes, k);
    *w += k;
}

void utf8_stream_init(utf8_stream *s)
{
    memset(s, 0, sizeof *s);
}

size_t utf8_stream_push(utf8_stream *s, const char *bytes, size_t n, char *out, size_t cap)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)bytes[i];
        if (s->n_pending > 0) {
            unsigned char lo = 0x80, hi = 0xBF;
            if (s->n_pending == 1)
                utf8_second_range(s->pending[0], &lo, &hi);
            if (c >= lo && c <= hi) {
                s->pending[s->n_pending++] = c;
                if (s->n_pending == utf8_lead_len(s->pending[0])) {
                    stream_emit(out, cap, &w, s->pending, (size_t)s->n_pending);
                    s->n_pending = 0;
                }
                continue;
            }
            stream_emit(out, cap, &w, REPLACEMENT, 3);
            s->n_pending = 0; /* and c starts afresh below */
        }
        if (c < 0x80)
            stream_emit(out, cap, &w, &c, 1);
        else if (utf8_lead_len(c) > 0)
            s->pending[s->n_pending++] = c;
        else
            stream_emit(out, cap, &w, REPLACEMENT, 3);
    }
    return w;
}

size_t utf8_stream_flush(utf8_stream *s, char *out, size_t cap)
{
    size_t w = 0;
    if (s->n_pending > 0)
        stream_emit(out, cap, &w, REPLACEMENT, 3);
    s->n_pending = 0;
    return w;
}
