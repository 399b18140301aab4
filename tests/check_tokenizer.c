/* check_tokenizer.c: GPT-2 BPE encodes like the reference, round-trips any bytes, loads with
 * clear errors, and the streaming decoder never splits or invents characters. */
#include <check.h>
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/rng.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/testutil.h"

/* ============================================================================================
 * Helpers */

static tokenizer *load_gpt2(void)
{
    const char *dir = tu_gpt2_dir();
    tokenizer *t = NULL;
    tt_error err = {0};
    tt_status st = tokenizer_load(tu_path("%s/vocab.json", dir), tu_path("%s/merges.txt", dir),
                                  &t, &err);
    ck_assert_msg(st == TT_OK, "loading the GPT-2 tokenizer failed: %s", err.msg);
    return t;
}

/* The GPT-2 tokenizer, loaded once per test case by an unchecked fixture for the tests that only
 * read it. */
static tokenizer *gpt2;

static void gpt2_setup(void) { gpt2 = load_gpt2(); }
static void gpt2_teardown(void) { tokenizer_free(gpt2); }

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Encodes text and checks that decoding gives back exactly the same bytes. */
static int32_t *encode_round_trip(const tokenizer *t, const char *text, size_t len, int *n)
{
    int32_t *ids = NULL;
    tt_error err = {0};
    ck_assert_msg(tokenizer_encode(t, text, len, &ids, n, &err) == TT_OK, "encode: %s", err.msg);
    char *back = NULL;
    size_t blen = 0;
    ck_assert_msg(tokenizer_decode(t, ids, *n, &back, &blen, &err) == TT_OK, "decode: %s",
                  err.msg);
    ck_assert_msg(blen == len && memcmp(back, text, len) == 0,
                  "round trip changed the text (%zu bytes in, %zu out)", len, blen);
    ck_assert_int_eq(back[blen], 0);
    free(back);
    return ids;
}

/* Each of texts[] (NULL-terminated) encodes to at least one id and decodes back to the same
 * bytes. */
static void assert_round_trips(const tokenizer *t, const char *const *texts)
{
    for (size_t i = 0; texts[i]; i++) {
        int n_ids = 0;
        free(encode_round_trip(t, texts[i], strlen(texts[i]), &n_ids));
        ck_assert_msg(n_ids > 0, "\"%s\" gave no ids", texts[i]);
    }
}

static void assert_ids(const tokenizer *t, const char *text, const int32_t *want, int n_want)
{
    int n = 0;
    int32_t *ids = encode_round_trip(t, text, strlen(text), &n);
    ck_assert_msg(n == n_want, "\"%s\": %d ids, expected %d", text, n, n_want);
    for (int i = 0; i < n; i++)
        ck_assert_msg(ids[i] == want[i], "\"%s\": id %d is %d, expected %d", text, i, ids[i],
                      want[i]);
    free(ids);
}

/* The single-byte token of byte b, found through the public API. */
static int32_t byte_token(const tokenizer *t, unsigned char b)
{
    int32_t *ids = NULL;
    int n = 0;
    ck_assert(tokenizer_encode(t, (const char *)&b, 1, &ids, &n, NULL) == TT_OK);
    ck_assert_int_eq(n, 1);
    size_t len = 0;
    const char *bytes = tokenizer_token_bytes(t, ids[0], &len);
    ck_assert(bytes && len == 1 && (unsigned char)bytes[0] == b);
    int32_t id = ids[0];
    free(ids);
    return id;
}

/* ============================================================================================
 * Conformance with the reference encoder */

static void check_reference_cases(void)
{
    const char *dir = tu_gpt2_dir();
    tokenizer *t = load_gpt2();
    size_t len = 0;
    char *jsonl = tu_read_file(tu_path("%s/tokenizer-cases.jsonl", dir), &len);
    ck_assert_msg(jsonl, "cannot read %s/tokenizer-cases.jsonl", dir);
    int line_no = 0, n_cases = 0;
    for (char *line = jsonl; *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        line_no++;
        if (*line) {
            cJSON *c = cJSON_Parse(line);
            ck_assert_msg(c, "tokenizer-cases.jsonl:%d: invalid JSON", line_no);
            const cJSON *text = cJSON_GetObjectItemCaseSensitive(c, "text");
            const cJSON *want = cJSON_GetObjectItemCaseSensitive(c, "ids");
            ck_assert(cJSON_IsString(text) && cJSON_IsArray(want));
            int n = 0;
            int32_t *ids = encode_round_trip(t, text->valuestring, strlen(text->valuestring), &n);
            int n_want = cJSON_GetArraySize(want);
            int i = 0;
            for (const cJSON *w = want->child; w && i < n; w = w->next, i++)
                ck_assert_msg(ids[i] == (int32_t)w->valueint,
                              "tokenizer-cases.jsonl:%d: id %d is %d, expected %d (text %.60s)",
                              line_no, i, ids[i], w->valueint, text->valuestring);
            ck_assert_msg(n == n_want, "tokenizer-cases.jsonl:%d: %d ids, expected %d", line_no,
                          n, n_want);
            free(ids);
            cJSON_Delete(c);
            n_cases++;
        }
        if (!nl)
            break;
        line = nl + 1;
    }
    ck_assert_int_eq(n_cases, 85);
    free(jsonl);
    tokenizer_free(t);
}

START_TEST(encodes_every_reference_case_to_its_ids_and_back)
{
    check_reference_cases();
}
END_TEST

START_TEST(encodes_reference_cases_identically_without_pcre2_jit)
{
    setenv("TOKENTOP_PCRE2_JIT", "0", 1);
    check_reference_cases();
    unsetenv("TOKENTOP_PCRE2_JIT");
}
END_TEST

START_TEST(exposes_gpt2_vocabulary_facts)
{
    const tokenizer *t = gpt2;
    ck_assert_int_eq(tokenizer_vocab_size(t), 50257);
    ck_assert_int_eq(tokenizer_eot_id(t), 50256);
    ck_assert_str_eq(tokenizer_token_str(t, 50256), "<|endoftext|>");
    ck_assert_str_eq(tokenizer_token_str(t, 220), "\xc4\xa0"); /* "Ġ" */
    size_t len = 0;
    const char *b = tokenizer_token_bytes(t, 220, &len);
    ck_assert(b && len == 1 && b[0] == ' ');
    b = tokenizer_token_bytes(t, 464, &len); /* "The" */
    ck_assert(b && len == 3 && memcmp(b, "The", 3) == 0);
    b = tokenizer_token_bytes(t, 198, &len);
    ck_assert(b && len == 1 && b[0] == '\n');
    ck_assert_ptr_null(tokenizer_token_bytes(t, 50257, &len));
    ck_assert_ptr_null(tokenizer_token_bytes(t, -1, &len));
    ck_assert_ptr_null(tokenizer_token_str(t, 50257));
    /* Every byte has its own token, so any byte string is encodable. */
    for (int c = 0; c < 256; c++)
        byte_token(t, (unsigned char)c);
}
END_TEST

START_TEST(decode_rejects_unknown_ids)
{
    const tokenizer *t = gpt2;
    int32_t ids[] = {464, 50257};
    char *out = (char *)1;
    tt_error err = {0};
    ck_assert_int_eq(tokenizer_decode(t, ids, 2, &out, NULL, &err), TT_ERR_ARG);
    ck_assert_ptr_null(out);
    ck_assert_msg(strstr(err.msg, "50257") && strstr(err.msg, "position 1"), "%s", err.msg);
    size_t len = 99;
    ck_assert_int_eq(tokenizer_decode(t, NULL, 0, &out, &len, &err), TT_OK);
    ck_assert(out && out[0] == 0 && len == 0);
    free(out);
}
END_TEST

/* ============================================================================================
 * Edge cases */

START_TEST(empty_text_gives_no_ids)
{
    const tokenizer *t = gpt2;
    int32_t *ids = (int32_t *)1;
    int n = -1;
    ck_assert_int_eq(tokenizer_encode(t, "", 0, &ids, &n, NULL), TT_OK);
    ck_assert_int_eq(n, 0);
    ck_assert_ptr_null(ids);
    ck_assert_int_eq(tokenizer_encode(t, NULL, 0, &ids, &n, NULL), TT_OK);
    ck_assert_int_eq(n, 0);
}
END_TEST

START_TEST(whitespace_only_text_round_trips)
{
    const tokenizer *t = gpt2;
    assert_ids(t, "   ", (int32_t[]){220, 220, 220}, 3);
    assert_ids(t, "\n\n\n", (int32_t[]){628, 198}, 2);
    assert_ids(t, " ", (int32_t[]){220}, 1);
    assert_ids(t, "\n", (int32_t[]){198}, 1);
    assert_round_trips(t, (const char *[]){"\t", " \t \n", "\r\n\r\n", "\xc2\xa0\xc2\xa0",
                                           "\xe3\x80\x80 \n \t", NULL});
}
END_TEST

START_TEST(endoftext_in_text_is_plain_text)
{
    const tokenizer *t = gpt2;
    assert_ids(t, "<|endoftext|>", (int32_t[]){27, 91, 437, 1659, 5239, 91, 29}, 7);
    int n = 0;
    const char *s = "a<|endoftext|>b<|endoftext|>";
    int32_t *ids = encode_round_trip(t, s, strlen(s), &n);
    for (int i = 0; i < n; i++)
        ck_assert_int_ne(ids[i], tokenizer_eot_id(t));
    free(ids);
}
END_TEST

START_TEST(contractions_split_like_gpt2)
{
    const tokenizer *t = gpt2;
    /* Lowercase contractions are pieces of their own; uppercase ones are not (GPT-2's regex is
     * case-sensitive), so "DON'T" splits around the apostrophe. */
    assert_ids(t, "don't DON'T Don't", (int32_t[]){9099, 470, 23917, 6, 51, 2094, 470}, 7);
    assert_ids(t, "I'm sure you're right; they've said we'll see, and he'd know.",
               (int32_t[]){40, 1101, 1654, 345, 821, 826, 26, 484, 1053, 531, 356, 1183, 766,
                           11, 290, 339, 1549, 760, 13}, 19);
    assert_ids(t, "It's", (int32_t[]){1026, 338}, 2);
}
END_TEST

START_TEST(crlf_and_tabs_round_trip)
{
    const tokenizer *t = gpt2;
    assert_ids(t, "Tabs\tand\nnewlines\n\nand\r\nCRLF",
               (int32_t[]){51, 8937, 197, 392, 198, 3605, 6615, 198, 198, 392, 201, 198, 34,
                           7836, 37}, 15);
    int n = 0;
    const char *s = "line one\r\nline two\r\n\r\n\r";
    free(encode_round_trip(t, s, strlen(s), &n));
}
END_TEST

START_TEST(unicode_letters_and_numbers_round_trip)
{
    const tokenizer *t = gpt2;
    assert_ids(t, "naïve café résumé façade",
               (int32_t[]){2616, 38776, 40304, 40560, 16345, 2634, 24685, 16175, 671}, 9);
    assert_ids(t, "Ελληνικά και русский текст",
               (int32_t[]){138, 243, 39377, 39377, 138, 115, 26180, 29945, 43000, 138, 105,
                           7377, 118, 17394, 29945, 220, 21169, 35072, 21727, 21727, 31583,
                           18849, 140, 117, 220, 20375, 16843, 31583, 21727, 20375}, 30);
    assert_round_trips(t, (const char *[]){"日本語のテキスト", "١٢٣ ٤٥٦", "x² ½ Ⅻ", "ǅungla ǈ",
                                           "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛", NULL});
}
END_TEST

START_TEST(emoji_sequences_round_trip)
{
    const tokenizer *t = gpt2;
    assert_ids(t, "emoji 😀🎉👍🏽 family 👨‍👩‍👧",
               (int32_t[]){368, 31370, 30325, 222, 8582, 236, 231, 41840, 235, 8582, 237, 121,
                           1641, 50169, 101, 447, 235, 41840, 102, 447, 235, 41840, 100}, 23);
    assert_round_trips(t, (const char *[]){"🇫🇷🇯🇵", "🏳️‍🌈", "❤️‍🔥 ok", "👩🏾‍💻👩🏾‍💻", NULL});
}
END_TEST

START_TEST(invalid_utf8_bytes_become_single_byte_tokens)
{
    const tokenizer *t = gpt2;
    /* Policy: bytes outside valid UTF-8 are pieces of their own; the valid text around them
     * encodes as if they were not there. */
    const struct {
        const char *s;
        size_t len;
        const char *bad;  /* the invalid bytes, each expected as one single-byte token */
    } cases[] = {
        {"a\xff" "b", 3, "\xff"},                 /* lone 0xff */
        {"abc\xe2\x82", 5, "\xe2\x82"},           /* truncated 3-byte sequence at the end */
        {"x\xc0\xaf" "y", 4, "\xc0\xaf"},         /* overlong "/" */
        {"x\xe0\x80\xaf" "y", 5, "\xe0\x80\xaf"}, /* overlong, 3 bytes */
        {"x\xed\xa0\x80" "y", 5, "\xed\xa0\x80"}, /* UTF-16 surrogate */
        {"x\xf4\x90\x80\x80" "y", 6, "\xf4\x90\x80\x80"}, /* above U+10FFFF */
        {"x\x80" "y", 3, "\x80"},                 /* stray continuation byte */
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const char *bad = strstr(cases[k].s, cases[k].bad);
        size_t nbad = strlen(cases[k].bad), before = (size_t)(bad - cases[k].s);
        int n = 0, nb = 0, na = 0;
        int32_t *ids = encode_round_trip(t, cases[k].s, cases[k].len, &n);
        int32_t *b = encode_round_trip(t, cases[k].s, before, &nb);
        int32_t *a = encode_round_trip(t, bad + nbad, cases[k].len - before - nbad, &na);
        ck_assert_msg(n == nb + (int)nbad + na, "case %zu: %d ids, expected %d", k, n,
                      nb + (int)nbad + na);
        ck_assert(nb == 0 || memcmp(ids, b, (size_t)nb * sizeof *ids) == 0);
        for (size_t i = 0; i < nbad; i++)
            ck_assert_int_eq(ids[nb + (int)i], byte_token(t, (unsigned char)bad[i]));
        ck_assert(na == 0 || memcmp(ids + nb + nbad, a, (size_t)na * sizeof *ids) == 0);
        free(ids);
        free(b);
        free(a);
    }

    /* Valid text on both sides keeps the ids it has alone. */
    int na = 0, nb = 0, nm = 0;
    int32_t *a = encode_round_trip(t, "Hello world", 11, &na);
    int32_t *b = encode_round_trip(t, " and more", 9, &nb);
    const char mixed[] = "Hello world\xff\xfe and more";
    int32_t *m = encode_round_trip(t, mixed, sizeof mixed - 1, &nm);
    ck_assert_int_eq(nm, na + 2 + nb);
    ck_assert(memcmp(m, a, (size_t)na * sizeof *a) == 0);
    ck_assert_int_eq(m[na], byte_token(t, 0xff));
    ck_assert_int_eq(m[na + 1], byte_token(t, 0xfe));
    ck_assert(memcmp(m + na + 2, b, (size_t)nb * sizeof *b) == 0);
    free(a);
    free(b);
    free(m);
}
END_TEST

/* Random bytes: fully random, UTF-8-ish (so near-valid sequences occur), or only lead and
 * continuation bytes. Returns the length. */
static size_t random_text(rng *r, char *buf, size_t cap)
{
    static const char alphabet[] = "ab '\n\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x80\xbf\xed\xff";
    size_t len = rng_next(r) % cap;
    uint64_t mode = rng_next(r) % 3;
    for (size_t i = 0; i < len; i++) {
        uint64_t x = rng_next(r);
        if (mode == 0)
            buf[i] = (char)x;
        else if (mode == 1)
            buf[i] = alphabet[x % (sizeof alphabet - 1)];
        else
            buf[i] = (char)(x % 2 ? 0x80 + (x >> 8) % 0x40 : 0xc0 + (x >> 8) % 0x40);
    }
    return len;
}

START_TEST(random_bytes_round_trip_exactly)
{
    const tokenizer *t = gpt2;
    rng r;
    rng_seed(&r, 2024);
    char buf[96];
    for (int iter = 0; iter < 3000; iter++) {
        size_t len = random_text(&r, buf, sizeof buf);
        int n = 0;
        free(encode_round_trip(t, buf, len, &n));
    }
}
END_TEST

START_TEST(interpreter_fallback_gives_the_same_ids_as_jit)
{
    /* Without JIT, encode finds the invalid UTF-8 itself instead of letting PCRE2 skip it: both
     * must cut the same pieces, for valid and invalid input alike. */
    tokenizer *jit = load_gpt2();
    setenv("TOKENTOP_PCRE2_JIT", "0", 1);
    tokenizer *interp = load_gpt2();
    unsetenv("TOKENTOP_PCRE2_JIT");
    rng r;
    rng_seed(&r, 77);
    char buf[128];
    for (int iter = 0; iter < 3000; iter++) {
        size_t len = random_text(&r, buf, sizeof buf);
        int na = 0, nb = 0;
        int32_t *a = encode_round_trip(jit, buf, len, &na);
        int32_t *b = encode_round_trip(interp, buf, len, &nb);
        ck_assert_msg(na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof *a) == 0),
                      "iteration %d: JIT and interpreter disagree (%d vs %d ids)", iter, na, nb);
        free(a);
        free(b);
    }
    tokenizer_free(jit);
    tokenizer_free(interp);
}
END_TEST

static void check_long_inputs(const tokenizer *t, const char *mode)
{
    size_t len = 100000;
    char *s = malloc(len);
    memset(s, 'x', len);
    double t0 = seconds_now();
    int n = 0;
    int32_t *ids = encode_round_trip(t, s, len, &n);
    double dt = seconds_now() - t0;
    ck_assert_msg(dt < 2.0, "%s: 100,000 x's took %.2f s to encode (a quadratic BPE loop?)", mode,
                  dt);
    ck_assert_int_gt(n, 0);
    ck_assert_int_lt(n, 20000); /* merged into long tokens, not left as bytes */
    free(ids);

    /* The whitespace alternatives backtrack ("\s+(?!\S)"); a long run must stay fast too. */
    memset(s, ' ', len);
    s[len - 1] = 'x';
    t0 = seconds_now();
    ids = encode_round_trip(t, s, len, &n);
    dt = seconds_now() - t0;
    ck_assert_msg(dt < 2.0, "%s: 100,000 spaces took %.2f s to encode", mode, dt);
    free(ids);

    /* Many short pieces: the pre-tokenizer must not rescan the rest of the text per match. */
    for (size_t i = 0; i < len; i++)
        s[i] = i % 3 == 2 ? ' ' : (char)('a' + i % 7);
    t0 = seconds_now();
    ids = encode_round_trip(t, s, len, &n);
    dt = seconds_now() - t0;
    ck_assert_msg(dt < 2.0, "%s: 100,000 bytes of short words took %.2f s to encode", mode, dt);
    free(ids);
    free(s);
}

START_TEST(long_inputs_are_fast_and_round_trip)
{
    tokenizer *t = load_gpt2();
    check_long_inputs(t, "JIT");
    tokenizer_free(t);
    setenv("TOKENTOP_PCRE2_JIT", "0", 1);
    t = load_gpt2();
    unsetenv("TOKENTOP_PCRE2_JIT");
    check_long_inputs(t, "interpreter");
    tokenizer_free(t);
}
END_TEST

/* ============================================================================================
 * Streaming decoder */

static size_t push_str(utf8_stream *s, const char *bytes, size_t n, char *out, size_t *w)
{
    size_t k = utf8_stream_push(s, bytes, n, out + *w, 3 * (n + 4));
    *w += k;
    return k;
}

START_TEST(stream_holds_a_split_character_until_it_completes)
{
    const char *chars[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"}; /* é € 😀 */
    for (size_t c = 0; c < 3; c++) {
        size_t len = strlen(chars[c]);
        /* Every way to cut the character into consecutive pushes. */
        for (unsigned cuts = 0; cuts < (1u << (len - 1)); cuts++) {
            utf8_stream s;
            utf8_stream_init(&s);
            char out[64];
            size_t w = 0, start = 0;
            for (size_t i = 1; i <= len; i++) {
                if (i == len || (cuts >> (i - 1)) & 1) {
                    size_t k = push_str(&s, chars[c] + start, i - start, out, &w);
                    if (i < len)
                        ck_assert_msg(k == 0, "partial character leaked out (cut %u)", cuts);
                    start = i;
                }
            }
            ck_assert_uint_eq(w, len);
            ck_assert(memcmp(out, chars[c], len) == 0);
            ck_assert_uint_eq(utf8_stream_flush(&s, out, sizeof out), 0);
        }
    }
}
END_TEST

START_TEST(stream_of_gpt2_tokens_reproduces_the_text)
{
    const tokenizer *t = gpt2;
    const char *text = "emoji 😀🎉👍🏽 family 👨‍👩‍👧 日本語 — “quotes”";
    int n = 0;
    int32_t *ids = encode_round_trip(t, text, strlen(text), &n);
    utf8_stream s;
    utf8_stream_init(&s);
    char out[256];
    size_t w = 0;
    for (int i = 0; i < n; i++) {
        size_t len = 0;
        const char *b = tokenizer_token_bytes(t, ids[i], &len);
        push_str(&s, b, len, out, &w);
    }
    w += utf8_stream_flush(&s, out + w, sizeof out - w);
    ck_assert_uint_eq(w, strlen(text));
    ck_assert(memcmp(out, text, w) == 0);
    free(ids);
}
END_TEST

static void hex(char *dst, const char *bytes, size_t n)
{
    for (size_t i = 0; i < n && i < 160; i++)
        sprintf(dst + 3 * i, "%02x ", (unsigned char)bytes[i]);
    dst[n ? 3 * (n < 160 ? n : 160) - 1 : 0] = 0;
}

static void assert_stream(const char *in, size_t n, const char *want)
{
    utf8_stream s;
    utf8_stream_init(&s);
    char out[256];
    size_t w = 0;
    push_str(&s, in, n, out, &w);
    w += utf8_stream_flush(&s, out + w, sizeof out - w);
    char got_hex[512], want_hex[512];
    hex(got_hex, out, w);
    hex(want_hex, want, strlen(want));
    ck_assert_msg(w == strlen(want) && memcmp(out, want, w) == 0, "got %s, want %s", got_hex,
                  want_hex);
}

#define FFFD "\xef\xbf\xbd"

START_TEST(stream_replaces_invalid_bytes_with_one_fffd_per_maximal_subpart)
{
    assert_stream("a\xff" "b", 3, "a" FFFD "b");
    assert_stream("\x80", 1, FFFD);                         /* stray continuation */
    assert_stream("\xc0\xaf", 2, FFFD FFFD);                /* overlong: C0 never valid */
    assert_stream("\xe0\x80\xaf", 3, FFFD FFFD FFFD);       /* overlong 3-byte */
    assert_stream("\xed\xa0\x80", 3, FFFD FFFD FFFD);       /* surrogate */
    assert_stream("\xf4\x90\x80\x80", 4, FFFD FFFD FFFD FFFD); /* above U+10FFFF */
    assert_stream("\xe2\x82" "a", 3, FFFD "a");             /* truncated: one U+FFFD */
    assert_stream("\xf0\x9f\x98" "\xf0\x9f\x98\x80", 7, FFFD "\xf0\x9f\x98\x80");
    /* The example of Unicode 15, section 3.9 (U+FFFD substitution of maximal subparts). */
    assert_stream("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64", 13,
                  "a" FFFD FFFD FFFD "b" FFFD "c" FFFD FFFD "d");
}
END_TEST

START_TEST(stream_flush_emits_held_bytes_once_and_resets)
{
    utf8_stream s;
    utf8_stream_init(&s);
    char out[32];
    ck_assert_uint_eq(utf8_stream_push(&s, "ok\xe2\x82", 4, out, sizeof out), 2);
    ck_assert(memcmp(out, "ok", 2) == 0);
    ck_assert_uint_eq(utf8_stream_flush(&s, out, sizeof out), 3);
    ck_assert(memcmp(out, FFFD, 3) == 0);
    ck_assert_uint_eq(utf8_stream_flush(&s, out, sizeof out), 0);
    /* After a flush the next byte starts fresh (not a continuation of the dropped bytes). */
    ck_assert_uint_eq(utf8_stream_push(&s, "\xac", 1, out, sizeof out), 3);
    ck_assert(memcmp(out, FFFD, 3) == 0);
    ck_assert_uint_eq(utf8_stream_push(&s, "z", 1, out, sizeof out), 1);
    ck_assert_int_eq(out[0], 'z');
}
END_TEST

START_TEST(stream_never_writes_past_capacity)
{
    utf8_stream s;
    utf8_stream_init(&s);
    char *out = malloc(4); /* ASan catches a write past the end */
    size_t w = utf8_stream_push(&s, "\xff\xff\xff\xff", 4, out, 4);
    ck_assert_uint_le(w, 4);
    free(out);
}
END_TEST

/* ============================================================================================
 * Loading: small hand-made vocabularies */

/* Writes vocab.json with the 256 byte-level tokens (ids 0..255) followed by extra entries
 * (a JSON fragment such as "\"ab\": 256"), and merges.txt. */
static void write_vocab(const char *dir, const char *extra, const char *merges)
{
    static const char *hexes = "0123456789abcdef";
    char *json = malloc(1 << 16);
    size_t w = 0;
    json[w++] = '{';
    int next = 256;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        int cp = printable ? b : next++;
        w += (size_t)sprintf(json + w, "%s\"\\u%c%c%c%c\": %d", b ? ", " : "",
                             hexes[(cp >> 12) & 15], hexes[(cp >> 8) & 15], hexes[(cp >> 4) & 15],
                             hexes[cp & 15], b);
    }
    if (extra && *extra)
        w += (size_t)sprintf(json + w, ", %s", extra);
    json[w++] = '}';
    ck_assert_int_eq(tu_write_file(tu_path("%s/vocab.json", dir), json, w), 0);
    free(json);
    ck_assert_int_eq(tu_write_file(tu_path("%s/merges.txt", dir), merges, strlen(merges)), 0);
}

static tt_status load_dir(const char *dir, tokenizer **t, tt_error *err)
{
    return tokenizer_load(tu_path("%s/vocab.json", dir), tu_path("%s/merges.txt", dir), t, err);
}

/* Loading must fail with status want and a message containing each of the given parts. */
static void assert_load_fails(const char *dir, tt_status want, const char *part1,
                              const char *part2)
{
    tokenizer *t = (tokenizer *)1;
    tt_error err = {0};
    tt_status st = load_dir(dir, &t, &err);
    ck_assert_msg(st == want, "status %s, expected %s (%s)", tt_status_str(st),
                  tt_status_str(want), err.msg);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(err.msg, part1), "message \"%s\" lacks \"%s\"", err.msg, part1);
    if (part2)
        ck_assert_msg(strstr(err.msg, part2), "message \"%s\" lacks \"%s\"", err.msg, part2);
}

static char *tmp;
static void tmp_setup(void) { tmp = tu_tmpdir(); }
static void tmp_teardown(void) { tu_tmpdir_free(tmp); }

START_TEST(rejects_missing_files)
{
    write_vocab(tmp, "", "#version: 0.2\n");
    tokenizer *t = (tokenizer *)1;
    tt_error err = {0};
    const char *missing = tu_path("%s/nope.json", tmp);
    ck_assert_int_eq(tokenizer_load(missing, tu_path("%s/merges.txt", tmp), &t, &err), TT_ERR_IO);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(err.msg, missing) && strstr(err.msg, "cannot open"), "%s", err.msg);
    const char *missing2 = tu_path("%s/nope.txt", tmp);
    ck_assert_int_eq(tokenizer_load(tu_path("%s/vocab.json", tmp), missing2, &t, &err),
                     TT_ERR_IO);
    ck_assert_msg(strstr(err.msg, missing2), "%s", err.msg);
}
END_TEST

START_TEST(rejects_vocab_that_is_not_an_object)
{
    ck_assert_int_eq(tu_write_file(tu_path("%s/vocab.json", tmp), "[1, 2]", 6), 0);
    ck_assert_int_eq(tu_write_file(tu_path("%s/merges.txt", tmp), "", 0), 0);
    assert_load_fails(tmp, TT_ERR_FORMAT, "vocab.json: expected a JSON object", "an array");
    ck_assert_int_eq(tu_write_file(tu_path("%s/vocab.json", tmp), "{\"a\": 0,\n\"b\" 1}", 15), 0);
    assert_load_fails(tmp, TT_ERR_FORMAT, "vocab.json:2: invalid JSON", NULL);
}
END_TEST

START_TEST(rejects_bad_ids)
{
    static const struct { const char *entries, *part1, *part2; } cases[] = {
        {"\"ab\": 65", "id 65 is used twice", "\"ab\""},
        {"\"ab\": -1", "token \"ab\": id must be an integer", "got -1"},
        {"\"ab\": 2.5", "token \"ab\"", "got 2.5"},
        {"\"ab\": \"256\"", "token \"ab\"", "got a string"},
        {"\"ab\": 1e12", "token \"ab\"", "1e+12"},
        {"\"ab\": 256, \"ab\": 257", "token \"ab\" appears twice", "256 and 257"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_vocab(tmp, cases[i].entries, "");
        assert_load_fails(tmp, TT_ERR_FORMAT, cases[i].part1, cases[i].part2);
    }
}
END_TEST

START_TEST(rejects_vocab_without_every_byte)
{
    ck_assert_int_eq(tu_write_file(tu_path("%s/vocab.json", tmp), "{\"a\": 0, \"b\": 1}", 16), 0);
    ck_assert_int_eq(tu_write_file(tu_path("%s/merges.txt", tmp), "", 0), 0);
    assert_load_fails(tmp, TT_ERR_FORMAT, "no token for byte 0x00", "vocab.json");
}
END_TEST

START_TEST(rejects_merges_line_with_one_symbol)
{
    write_vocab(tmp, "\"ab\": 256", "#version: 0.2\na b\nab\n");
    assert_load_fails(tmp, TT_ERR_FORMAT, "merges.txt:3: expected two symbols", "\"ab\"");
    write_vocab(tmp, "\"ab\": 256", "a b c\n");
    assert_load_fails(tmp, TT_ERR_FORMAT, "merges.txt:1: expected two symbols", "\"a b c\"");
}
END_TEST

START_TEST(rejects_merge_whose_symbols_or_result_are_not_in_vocab)
{
    write_vocab(tmp, "\"ab\": 256", "#version: 0.2\na b\na c\n");
    assert_load_fails(tmp, TT_ERR_FORMAT, "merges.txt:3: merge of \"a\" and \"c\" gives \"ac\"",
                      "not in the vocabulary");
    write_vocab(tmp, "\"ab\": 256", "a b\nab zz\n");
    assert_load_fails(tmp, TT_ERR_FORMAT, "merges.txt:2: symbol \"zz\" is not in the vocabulary",
                      NULL);
}
END_TEST

START_TEST(small_vocab_merges_by_rank_then_leftmost)
{
    /* ranks: 0 "b c", 1 "a b", 2 "a a"; "<|endoftext|>" is a token but never produced. */
    write_vocab(tmp, "\"bc\": 256, \"ab\": 257, \"aa\": 258, \"<|endoftext|>\": 300",
                "#version: 0.2\r\nb c\r\na b\r\na a\r\n");
    tokenizer *t = NULL;
    tt_error err = {0};
    ck_assert_msg(load_dir(tmp, &t, &err) == TT_OK, "%s", err.msg);
    ck_assert_int_eq(tokenizer_vocab_size(t), 301);
    ck_assert_int_eq(tokenizer_eot_id(t), 300);
    ck_assert_ptr_null(tokenizer_token_bytes(t, 299, NULL)); /* a gap in the ids */
    assert_ids(t, "abc", (int32_t[]){'a', 256}, 2);          /* "b c" outranks "a b" */
    assert_ids(t, "abab", (int32_t[]){257, 257}, 2);
    assert_ids(t, "aaa", (int32_t[]){258, 'a'}, 2);           /* leftmost occurrence first */
    assert_ids(t, "aaaa", (int32_t[]){258, 258}, 2);
    int n = 0;
    int32_t *ids = encode_round_trip(t, "<|endoftext|>", 13, &n);
    ck_assert_int_eq(n, 13); /* "<|", "endoftext", "|>": no merges apply, one id per byte */
    for (int i = 0; i < n; i++)
        ck_assert_int_ne(ids[i], 300);
    free(ids);
    tokenizer_free(t);
}
END_TEST

START_TEST(merges_apply_one_rank_per_pass_like_encoder_py)
{
    /* "ab a" has the better rank but only exists once "a b" has merged. encoder.py merges every
     * "a b" in "abab" in one pass before it looks at new pairs, giving "ab" "ab"; applying
     * "ab a" as soon as it appears would give "aba" "b". */
    write_vocab(tmp, "\"ab\": 256, \"aba\": 257", "ab a\na b\n");
    tokenizer *t = NULL;
    tt_error err = {0};
    ck_assert_msg(load_dir(tmp, &t, &err) == TT_OK, "%s", err.msg);
    assert_ids(t, "abab", (int32_t[]){256, 256}, 2);
    assert_ids(t, "aba", (int32_t[]){257}, 1);
    tokenizer_free(t);
}
END_TEST

/* tokenizer_load is tokenizer_load_buffers over the files' bytes (the fuzzer's entry point). */
START_TEST(load_from_buffers_matches_load_from_files_and_names_the_buffers)
{
    const char *dir = tu_gpt2_dir();
    size_t vlen = 0, mlen = 0;
    char *vocab = tu_read_file(tu_path("%s/vocab.json", dir), &vlen);
    char *merges = tu_read_file(tu_path("%s/merges.txt", dir), &mlen);
    ck_assert(vocab && merges);
    tokenizer *b = NULL;
    tt_error err = {0};
    ck_assert_msg(tokenizer_load_buffers(vocab, vlen, "v", merges, mlen, "m", &b, &err) == TT_OK,
                  "%s", err.msg);
    ck_assert(tokenizer_equal(gpt2, b));
    tokenizer_free(b);
    b = (tokenizer *)1;
    ck_assert_int_eq(tokenizer_load_buffers(vocab, vlen, "v", "a b c\n", 6, "my-merges", &b, &err),
                     TT_ERR_FORMAT);
    ck_assert_ptr_null(b);
    ck_assert_msg(strncmp(err.msg, "my-merges:1: ", 13) == 0, "%s", err.msg);
    ck_assert_int_eq(tokenizer_load_buffers("{", 1, "my-vocab", "", 0, "m", &b, &err),
                     TT_ERR_FORMAT);
    ck_assert_msg(strncmp(err.msg, "my-vocab:1: invalid JSON", 24) == 0, "%s", err.msg);
    free(vocab);
    free(merges);
}
END_TEST

START_TEST(equal_only_when_vocab_and_merges_match)
{
    tokenizer *b = load_gpt2();   /* a second load equals the first */
    ck_assert(tokenizer_equal(gpt2, b));
    tokenizer_free(b);

    char *dir2 = tu_tmpdir();
    write_vocab(tmp, "\"ab\": 256, \"ba\": 257", "a b\n");
    write_vocab(dir2, "\"ab\": 256, \"ba\": 257", "b a\n");
    tokenizer *x = NULL, *y = NULL, *z = NULL;
    ck_assert(load_dir(tmp, &x, NULL) == TT_OK);
    ck_assert(load_dir(dir2, &y, NULL) == TT_OK);
    ck_assert(!tokenizer_equal(x, y)); /* one merge differs */
    ck_assert(!tokenizer_equal(x, gpt2));
    write_vocab(dir2, "\"ab\": 256, \"ba\": 258", "a b\n");
    ck_assert(load_dir(dir2, &z, NULL) == TT_OK);
    ck_assert(!tokenizer_equal(x, z)); /* same merges, one id differs */
    tokenizer_free(x);
    tokenizer_free(y);
    tokenizer_free(z);
    tu_tmpdir_free(dir2);
}
END_TEST

/* A case of s over the GPT-2 tokenizer, loaded once for it (gpt2); its tests may take 60 s. */
static TCase *gpt2_case(Suite *s, const char *name, const TTest *const *tests, size_t n)
{
    TCase *tc = tu_add_case(s, name, tests, n);
    tcase_add_unchecked_fixture(tc, gpt2_setup, gpt2_teardown);
    tcase_set_timeout(tc, 60);
    return tc;
}

int main(void)
{
    Suite *s = suite_create("tokenizer");
    gpt2_case(s, "gpt2", TU_TESTS(
            encodes_every_reference_case_to_its_ids_and_back,
            encodes_reference_cases_identically_without_pcre2_jit, exposes_gpt2_vocabulary_facts,
            decode_rejects_unknown_ids));
    gpt2_case(s, "edge", TU_TESTS(
            empty_text_gives_no_ids, whitespace_only_text_round_trips,
            endoftext_in_text_is_plain_text, contractions_split_like_gpt2, crlf_and_tabs_round_trip,
            unicode_letters_and_numbers_round_trip, emoji_sequences_round_trip,
            invalid_utf8_bytes_become_single_byte_tokens, random_bytes_round_trip_exactly,
            interpreter_fallback_gives_the_same_ids_as_jit, long_inputs_are_fast_and_round_trip));
    gpt2_case(s, "stream", TU_TESTS(
            stream_holds_a_split_character_until_it_completes,
            stream_of_gpt2_tokens_reproduces_the_text,
            stream_replaces_invalid_bytes_with_one_fffd_per_maximal_subpart,
            stream_flush_emits_held_bytes_once_and_resets, stream_never_writes_past_capacity));
    TCase *tc = gpt2_case(s, "load", TU_TESTS(
            rejects_missing_files, rejects_vocab_that_is_not_an_object, rejects_bad_ids,
            rejects_vocab_without_every_byte, rejects_merges_line_with_one_symbol,
            rejects_merge_whose_symbols_or_result_are_not_in_vocab,
            small_vocab_merges_by_rank_then_leftmost,
            merges_apply_one_rank_per_pass_like_encoder_py, equal_only_when_vocab_and_merges_match,
            load_from_buffers_matches_load_from_files_and_names_the_buffers));
    tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
    return tu_run_suite(s);
}
