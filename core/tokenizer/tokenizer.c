/* tokenizer.c: GPT-2 byte-level BPE: vocab.json/merges.txt loading, encode, decode, and the
 * streaming UTF-8 decoder.
 *
 * Encoding follows OpenAI's encoder.py exactly: the pre-tokenizer regex splits the text into
 * pieces, each piece's bytes become byte-level symbols (bytes_to_unicode), and merges are applied
 * by rank: the lowest-ranked adjacent pair first, all its occurrences left to right in one pass,
 * before the next rank is considered. A binary heap over a linked list of symbols makes this
 * O(n log n) in the piece length, so one huge piece (100,000 copies of a letter) stays fast.
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
 * "<|endoftext|>" in the text is plain text: it goes through the regex like anything else.
 *
 * TOKENTOP_PCRE2_JIT=0 in the environment disables the PCRE2 JIT (tests use it to exercise the
 * interpreter fallback, which is also taken when JIT compilation is unavailable). */
#include "core/tokenizer/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/text.h"
#include "core/base/util.h"

/* Ids at or above this are refused: real BPE vocabularies stay far below (GPT-2: 50,257; the
 * largest in common use: ~256k), and a stray huge id would otherwise size every per-id array. */
#define TOKENIZER_MAX_ID (1 << 21)

#define GPT2_PATTERN \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* Pieces up to this many bytes are remembered per encode call (repeated words are common). */
#define PIECE_CACHE_MAX_LEN 64

typedef struct {
    int32_t left, right, result; /* token ids */
} tokenizer_merge;

typedef struct {
    uint64_t key; /* (left << 32) | right; PAIR_EMPTY when unused */
    int32_t rank;
    int32_t result;
} pair_slot;

#define PAIR_EMPTY UINT64_MAX

struct tokenizer {
    int vocab_size;          /* largest id + 1 */
    int n_tokens;            /* ids in use (vocab_size minus gaps) */
    const char **tok_str;    /* (vocab_size) vocab.json spelling, NUL-terminated; NULL for gaps */
    uint32_t *tok_str_len;   /* (vocab_size) */
    const char **tok_bytes;  /* (vocab_size) raw bytes (byte-level mapping undone) */
    uint32_t *tok_bytes_len; /* (vocab_size) */
    char *arena;             /* backs tok_str and tok_bytes */

    int32_t *str_slots;      /* open addressing: spelling -> id, -1 when unused */
    uint32_t str_mask;

    tokenizer_merge *merges; /* (n_merges) in file order; rank = index */
    int n_merges;
    pair_slot *pair_slots;   /* open addressing: (left, right) -> rank, result */
    uint32_t pair_mask;

    int32_t byte_id[256];    /* the single-byte token of each byte */
    int eot_id;

    pcre2_code *re;
    bool jit;
};

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

static void byte_alphabet(uint32_t cp_of_byte[256], int16_t byte_of_cp[324])
{
    for (int cp = 0; cp < 324; cp++)
        byte_of_cp[cp] = -1;
    tokenizer_byte_alphabet(cp_of_byte);
    for (int b = 0; b < 256; b++)
        byte_of_cp[cp_of_byte[b]] = (int16_t)b;
}

/* Undoes the byte-level mapping of a spelling into out (capacity >= len). Characters outside the
 * alphabet (an added token such as "<|im_start|>" is plain ASCII and inside it; others are rare)
 * and invalid UTF-8 keep their own bytes, so every token still decodes to something. */
static uint32_t spelling_to_bytes(const char *s, uint32_t len, const int16_t byte_of_cp[324],
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

/* A short, printable rendering of len bytes for error messages (quotes included). */
static const char *quote(char *out, size_t cap, const char *s, size_t len)
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

/* The id spelled s, or -1. */
static int32_t vocab_lookup(const tokenizer *t, const char *s, size_t len)
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

static int line_of_offset(const char *buf, size_t off)
{
    int line = 1;
    for (size_t i = 0; i < off; i++)
        line += buf[i] == '\n';
    return line;
}

/* path names the text in messages; buf holds len bytes of it. */
static tt_status load_vocab(tokenizer *t, const char *path, const char *buf, size_t len,
                            tt_error *err)
{
    tt_status st;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(buf, len, &end, false);
    if (!root) {
        size_t off = end && end >= buf && end <= buf + len ? (size_t)(end - buf) : 0;
        return tt_fail(err, TT_ERR_FORMAT, "%s:%d: invalid JSON (near byte %zu)", path,
                       line_of_offset(buf, off), off);
    }
    char q[96];
    if (!cJSON_IsObject(root)) {
        st = tt_fail(err, TT_ERR_FORMAT, "%s: expected a JSON object of token -> id, got %s",
                     path, util_json_type_name(root));
        goto done;
    }

    /* Pass 1: ids are integers in range; find the largest and the arena size. */
    int max_id = -1, n = 0;
    size_t arena_size = 0;
    for (const cJSON *e = root->child; e; e = e->next, n++) {
        const char *key = e->string;
        if (!key) {
            st = tt_fail(err, TT_ERR_FORMAT, "%s: entry %d has no string key", path, n);
            goto done;
        }
        size_t klen = strlen(key);
        if (klen == 0) {
            st = tt_fail(err, TT_ERR_FORMAT, "%s: entry %d: empty token string (id %g)", path, n,
                         cJSON_IsNumber(e) ? e->valuedouble : -1.0);
            goto done;
        }
        if (klen > UINT32_MAX / 4) {
            st = tt_fail(err, TT_ERR_FORMAT, "%s: entry %d: token too long (%zu bytes)", path,
                         n, klen);
            goto done;
        }
        if (!cJSON_IsNumber(e)) {
            st = tt_fail(err, TT_ERR_FORMAT, "%s: token %s: id must be an integer, got %s", path,
                         quote(q, sizeof q, key, klen), util_json_type_name(e));
            goto done;
        }
        double v = e->valuedouble;
        if (!isfinite(v) || v != floor(v) || v < 0 || v >= TOKENIZER_MAX_ID) {
            st = tt_fail(err, TT_ERR_FORMAT,
                         "%s: token %s: id must be an integer in [0, %d), got %g", path,
                         quote(q, sizeof q, key, klen), TOKENIZER_MAX_ID, v);
            goto done;
        }
        if ((int)v > max_id)
            max_id = (int)v;
        arena_size += 2 * (klen + 1);
    }
    if (n == 0) {
        st = tt_fail(err, TT_ERR_FORMAT, "%s: the vocabulary is empty", path);
        goto done;
    }

    /* Pass 2: fill the per-id arrays; catch repeated ids and repeated tokens. */
    t->vocab_size = max_id + 1;
    t->n_tokens = n;
    t->tok_str = calloc((size_t)t->vocab_size, sizeof *t->tok_str);
    t->tok_str_len = calloc((size_t)t->vocab_size, sizeof *t->tok_str_len);
    t->tok_bytes = calloc((size_t)t->vocab_size, sizeof *t->tok_bytes);
    t->tok_bytes_len = calloc((size_t)t->vocab_size, sizeof *t->tok_bytes_len);
    t->arena = malloc(arena_size);
    uint32_t cap = table_capacity((size_t)n);
    t->str_slots = malloc(cap * sizeof *t->str_slots);
    t->str_mask = cap - 1;
    if (!t->tok_str || !t->tok_str_len || !t->tok_bytes || !t->tok_bytes_len || !t->arena ||
        !t->str_slots) {
        st = tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for %d tokens", path, n);
        goto done;
    }
    memset(t->str_slots, 0xFF, cap * sizeof *t->str_slots);
    uint32_t cp_of_byte[256];
    int16_t byte_of_cp[324];
    byte_alphabet(cp_of_byte, byte_of_cp);
    char *a = t->arena;
    for (const cJSON *e = root->child; e; e = e->next) {
        const char *key = e->string;
        uint32_t klen = (uint32_t)strlen(key);
        int32_t id = (int32_t)e->valuedouble;
        if (t->tok_str[id]) {
            char q2[96];
            st = tt_fail(err, TT_ERR_FORMAT, "%s: id %d is used twice: by %s and by %s", path,
                         id, quote(q, sizeof q, t->tok_str[id], t->tok_str_len[id]),
                         quote(q2, sizeof q2, key, klen));
            goto done;
        }
        int32_t *slot;
        for (uint32_t i = (uint32_t)hash_bytes(key, klen) & t->str_mask;;
             i = (i + 1) & t->str_mask) {
            slot = &t->str_slots[i];
            if (*slot < 0)
                break;
            if (t->tok_str_len[*slot] == klen && memcmp(t->tok_str[*slot], key, klen) == 0) {
                st = tt_fail(err, TT_ERR_FORMAT, "%s: token %s appears twice (ids %d and %d)",
                             path, quote(q, sizeof q, key, klen), *slot, id);
                goto done;
            }
        }
        *slot = id;
        memcpy(a, key, klen + 1);
        t->tok_str[id] = a;
        t->tok_str_len[id] = klen;
        a += klen + 1;
        uint32_t blen = spelling_to_bytes(key, klen, byte_of_cp, a);
        a[blen] = 0;
        t->tok_bytes[id] = a;
        t->tok_bytes_len[id] = blen;
        a += blen + 1;
    }

    /* Byte-level BPE needs every single byte as a token, or some text could not be encoded. */
    for (int b = 0; b < 256; b++) {
        char s[2];
        int slen = text_utf8_encode(cp_of_byte[b], s);
        t->byte_id[b] = vocab_lookup(t, s, (size_t)slen);
        if (t->byte_id[b] < 0) {
            st = tt_fail(err, TT_ERR_FORMAT,
                         "%s: no token for byte 0x%02x (spelled %s): not a byte-level BPE "
                         "vocabulary", path, b, quote(q, sizeof q, s, (size_t)slen));
            goto done;
        }
    }
    t->eot_id = vocab_lookup(t, "<|endoftext|>", 13);
    st = TT_OK;
done:
    cJSON_Delete(root);
    return st;
}

/* ============================================================================================
 * Loading merges.txt */

/* path names the text in messages; buf holds len bytes of it. */
static tt_status load_merges(tokenizer *t, const char *path, const char *buf, size_t len,
                             tt_error *err)
{
    tt_status st;
    size_t n_lines = 1;
    for (size_t i = 0; i < len; i++)
        n_lines += buf[i] == '\n';
    if (n_lines > (size_t)INT32_MAX / 2)
        return tt_fail(err, TT_ERR_FORMAT, "%s: too many lines (%zu)", path, n_lines);
    t->merges = malloc(n_lines * sizeof *t->merges);
    uint32_t cap = table_capacity(n_lines);
    t->pair_slots = malloc(cap * sizeof *t->pair_slots);
    t->pair_mask = cap - 1;
    size_t max_sym = 0;
    char *joined = NULL;
    if (!t->merges || !t->pair_slots) {
        st = tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for %zu lines", path, n_lines);
        goto done;
    }
    for (uint32_t i = 0; i < cap; i++)
        t->pair_slots[i].key = PAIR_EMPTY;
    for (int id = 0; id < t->vocab_size; id++)
        if (t->tok_str_len[id] > max_sym)
            max_sym = t->tok_str_len[id];
    joined = malloc(2 * max_sym + 1);
    if (!joined) {
        st = tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }

    char q[96], q2[96], q3[96];
    int line_no = 0;
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
                         line_no, quote(q, sizeof q, line, llen));
            goto done;
        }
        int32_t left = vocab_lookup(t, line, l1);
        int32_t right = vocab_lookup(t, sp + 1, l2);
        if (left < 0 || right < 0) {
            st = tt_fail(err, TT_ERR_FORMAT, "%s:%d: symbol %s is not in the vocabulary", path,
                         line_no, left < 0 ? quote(q, sizeof q, line, l1)
                                           : quote(q, sizeof q, sp + 1, l2));
            goto done;
        }
        memcpy(joined, line, l1);
        memcpy(joined + l1, sp + 1, l2);
        int32_t result = vocab_lookup(t, joined, l1 + l2);
        if (result < 0) {
            st = tt_fail(err, TT_ERR_FORMAT,
                         "%s:%d: merge of %s and %s gives %s, which is not in the vocabulary",
                         path, line_no, quote(q, sizeof q, line, l1),
                         quote(q2, sizeof q2, sp + 1, l2), quote(q3, sizeof q3, joined, l1 + l2));
            goto done;
        }
        int rank = t->n_merges++;
        t->merges[rank] = (tokenizer_merge){left, right, result};
        /* A repeated pair takes its later rank, as the dict in encoder.py does. */
        uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
        for (uint32_t i = (uint32_t)hash_pair(key) & t->pair_mask;; i = (i + 1) & t->pair_mask) {
            pair_slot *p = &t->pair_slots[i];
            if (p->key == key || p->key == PAIR_EMPTY) {
                *p = (pair_slot){key, rank, result};
                break;
            }
        }
        line = next;
    }
    st = TT_OK;
done:
    free(joined);
    return st;
}

/* ============================================================================================
 * Load, free, accessors */

static pcre2_code *compile_pattern(uint32_t options, tt_error *err)
{
    int code;
    PCRE2_SIZE offset;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)GPT2_PATTERN, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | options, &code, &offset, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        tt_fail(err, TT_ERR_UNSUPPORTED,
                "tokenizer: PCRE2 cannot compile the GPT-2 pattern at offset %zu: %s "
                "(a PCRE2 without Unicode support?)", (size_t)offset, (const char *)msg);
    }
    return re;
}

/* With JIT, PCRE2_MATCH_INVALID_UTF lets one pass over the whole text skip invalid sequences.
 * The interpreter re-validates the rest of the subject on every call in that mode (quadratic
 * over a long text), so without JIT encode splits the text into valid fragments itself and
 * matches them with PCRE2_NO_UTF_CHECK: the same pieces, since an invalid sequence is a barrier
 * no match crosses in either case. */
static tt_status compile_pretokenizer(tokenizer *t, tt_error *err)
{
    const char *env = getenv("TOKENTOP_PCRE2_JIT");
    if (!(env && strcmp(env, "0") == 0)) {
        t->re = compile_pattern(PCRE2_MATCH_INVALID_UTF, err);
        if (!t->re)
            return TT_ERR_UNSUPPORTED;
        if (pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE) == 0) {
            t->jit = true;
            return TT_OK;
        }
        pcre2_code_free(t->re);
    }
    t->re = compile_pattern(0, err);
    return t->re ? TT_OK : TT_ERR_UNSUPPORTED;
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
    tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return tt_fail(err, TT_ERR_NOMEM, "tokenizer: out of memory");
    t->eot_id = -1;
    tt_status st = load_vocab(t, vocab_name, vocab ? vocab : "", vocab_len, err);
    if (st == TT_OK)
        st = load_merges(t, merges_name, merges ? merges : "", merges_len, err);
    if (st == TT_OK)
        st = compile_pretokenizer(t, err);
    if (st != TT_OK) {
        tokenizer_free(t);
        return st;
    }
    *out = t;
    return TT_OK;
}

void tokenizer_free(tokenizer *t)
{
    if (!t)
        return;
    free(t->tok_str);
    free(t->tok_str_len);
    free(t->tok_bytes);
    free(t->tok_bytes_len);
    free(t->arena);
    free(t->str_slots);
    free(t->merges);
    free(t->pair_slots);
    pcre2_code_free(t->re);
    free(t);
}

int tokenizer_vocab_size(const tokenizer *t) { return t->vocab_size; }

int tokenizer_eot_id(const tokenizer *t) { return t->eot_id; }

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

bool tokenizer_equal(const tokenizer *a, const tokenizer *b)
{
    if (a == b)
        return true;
    if (!a || !b || a->vocab_size != b->vocab_size || a->n_tokens != b->n_tokens ||
        a->n_merges != b->n_merges)
        return false;
    for (int id = 0; id < a->vocab_size; id++) {
        if (!a->tok_str[id] != !b->tok_str[id])
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
    int32_t pos;      /* left symbol's index (its first byte in the piece) */
    int32_t right;    /* right symbol's index */
    int32_t left_id, right_id, result;
} bpe_pair;

typedef struct {
    int32_t *sym;     /* (n) token id of the symbol starting at each byte, -1 once merged away */
    int32_t *prev, *next; /* (n) neighbours, -1 at the ends */
    bpe_pair *heap;   /* (3n) */
    bpe_pair *deferred; /* (2n) pairs made during the current rank's pass */
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
    w->sym = malloc(cap * sizeof *w->sym);
    w->prev = malloc(cap * sizeof *w->prev);
    w->next = malloc(cap * sizeof *w->next);
    w->heap = malloc(3 * cap * sizeof *w->heap);
    w->deferred = malloc(2 * cap * sizeof *w->deferred);
    w->cap = cap;
    if (!w->sym || !w->prev || !w->next || !w->heap || !w->deferred) {
        w->cap = 0;
        return false;
    }
    return true;
}

static void bpe_scratch_free(bpe_scratch *w)
{
    free(w->sym); free(w->prev); free(w->next); free(w->heap); free(w->deferred);
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

/* Appends the ids of piece s[0..n) (n >= 1) to out. */
static bool bpe_encode_piece(const tokenizer *t, const unsigned char *s, size_t n,
                             bpe_scratch *w, id_vec *out)
{
    if (n == 1) {
        if (!id_vec_reserve(out, 1))
            return false;
        out->ids[out->n++] = t->byte_id[s[0]];
        return true;
    }
    if (!bpe_scratch_reserve(w, n) || !id_vec_reserve(out, n))
        return false;
    int32_t *sym = w->sym, *prev = w->prev, *next = w->next;
    size_t hn = 0, nd = 0;
    bpe_pair p;
    for (size_t i = 0; i < n; i++) {
        sym[i] = t->byte_id[s[i]];
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < n; i++)
        if (bpe_make_pair(t, w, (int32_t)i, (int32_t)i + 1, &p))
            heap_push(w->heap, &hn, p);

    /* encoder.py merges every occurrence of the best pair in one left-to-right pass before it
     * looks at the pairs that pass created; deferring new pairs to the end of the pass keeps
     * that order even for merge lists whose ranks are not monotone. */
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
        sym[j] = -1;
        int32_t after = next[j];
        next[i] = after;
        if (after >= 0)
            prev[after] = i;
        if (prev[i] >= 0 && bpe_make_pair(t, w, prev[i], i, &p))
            w->deferred[nd++] = p;
        if (after >= 0 && bpe_make_pair(t, w, i, after, &p))
            w->deferred[nd++] = p;
    }
    for (int32_t i = 0; i >= 0; i = next[i])
        out->ids[out->n++] = sym[i];
    return true;
}

/* ============================================================================================
 * Encode: regex pieces, bytes between matches (invalid UTF-8) as single-byte pieces, and a
 * per-call cache of short pieces whose ids are already in the output. */

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
    const char *text;
    id_vec out;
    bpe_scratch w;
    piece_cache cache;
    pcre2_match_data *md;
} encode_state;

/* Pre-tokenizes text[from, to) and appends the ids of its pieces; bytes that no match covers
 * (invalid UTF-8, in JIT mode) become pieces of one byte each. */
static tt_status encode_span(encode_state *es, size_t from, size_t to, uint32_t options,
                             tt_error *err)
{
    const tokenizer *t = es->t;
    PCRE2_SPTR subject = (PCRE2_SPTR)es->text + from;
    size_t len = to - from, pos = 0;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(es->md);
    while (pos < len) {
        int rc = pcre2_match(t->re, subject, len, pos, options, es->md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(t->re, subject, len, pos, options | PCRE2_NO_JIT, es->md, NULL);
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
        if (end == start && start < len)
            end = start + 1; /* the GPT-2 pattern never matches empty; stay safe if it did */
        if (!id_vec_reserve(&es->out, start - pos))
            goto nomem;
        for (; pos < start; pos++)
            es->out.ids[es->out.n++] = t->byte_id[subject[pos]];
        if (end > start &&
            !encode_piece_cached(t, es->text, from + start, end - start, &es->cache, &es->w,
                                 &es->out))
            goto nomem;
        pos = end;
    }
    return TT_OK;
nomem:
    return tt_fail(err, TT_ERR_NOMEM, "tokenizer: out of memory encoding %zu bytes", to);
}

tt_status tokenizer_encode(const tokenizer *t, const char *text, size_t len, int32_t **ids,
                           int *n, tt_error *err)
{
    *ids = NULL;
    *n = 0;
    if (!text && len > 0)
        return tt_fail(err, TT_ERR_ARG, "tokenizer: text is NULL but its length is %zu", len);
    /* Every byte gives at most one id, and the count must fit an int. */
    if (len > (size_t)INT32_MAX / 2)
        return tt_fail(err, TT_ERR_ARG, "tokenizer: text too long to encode (%zu bytes)", len);
    if (len == 0)
        return TT_OK;

    tt_status st = TT_OK;
    encode_state es = {.t = t, .text = text};
    es.md = pcre2_match_data_create(1, NULL);
    if (!es.md || !id_vec_reserve(&es.out, len / 3 + 16)) {
        st = tt_fail(err, TT_ERR_NOMEM, "tokenizer: out of memory encoding %zu bytes", len);
        goto done;
    }
    if (t->jit) {
        st = encode_span(&es, 0, len, 0, err);
    } else {
        const unsigned char *u = (const unsigned char *)text;
        for (size_t pos = 0; st == TT_OK && pos < len;) {
            size_t end = pos;
            uint32_t cp;
            int k;
            while (end < len && (k = text_utf8_decode(u + end, len - end, &cp)) > 0)
                end += (size_t)k;
            if (end > pos)
                st = encode_span(&es, pos, end, PCRE2_NO_UTF_CHECK, err);
            pos = end;
            /* Invalid UTF-8: one piece per byte (see the policy above). */
            for (; st == TT_OK && pos < len && text_utf8_decode(u + pos, len - pos, &cp) == 0;
                 pos++) {
                if (!id_vec_reserve(&es.out, 1)) {
                    st = tt_fail(err, TT_ERR_NOMEM, "tokenizer: out of memory encoding %zu bytes",
                                 len);
                    break;
                }
                es.out.ids[es.out.n++] = t->byte_id[u[pos]];
            }
        }
    }
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
