/* check_tokenizer_json.c: tokenizer.json tokenizers encode real vocabularies (Qwen3's byte-level
 * BPE, Mistral's SentencePiece BPE) exactly as an independent encoder does, show their tokens as
 * the UI should, and refuse what they do not support by file, field and value. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cJSON.h>

#include "core/base/rng.h"
#include "core/base/text.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/testutil.h"

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ============================================================================================
 * The real vocabularies: tests/fixtures/tokenizers/NAME/tokenizer.json.xz, decompressed into a
 * temporary model directory with tokenizer_config.json beside it. */

static char *real_dir;         /* the temporary directory: qwen3/ and mistral/ */
static tokenizer *qwen3, *mistral;

static tokenizer *load_real(const char *name)
{
    const char *src = tu_path("%s/tokenizers/%s", TU_FIXTURES, name);
    char dst[1024];
    snprintf(dst, sizeof dst, "%s/%s", real_dir, name);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && xz -dc '%s/tokenizer.json.xz' > "
             "'%s/tokenizer.json' && cp '%s/tokenizer_config.json' '%s/'", dst, src, dst, src,
             dst);
    ck_assert_msg(system(cmd) == 0, "could not decompress the %s fixture (is xz installed?): %s",
                  name, cmd);
    tokenizer *t = NULL;
    tt_error err = {0};
    ck_assert_msg(tokenizer_load_dir(dst, &t, &err) == TT_OK, "%s: %s", name, err.msg);
    return t;
}

static void real_setup(void)
{
    real_dir = tu_tmpdir();
    qwen3 = load_real("qwen3");
    mistral = load_real("mistral");
}

static void real_teardown(void)
{
    tokenizer_free(qwen3);
    tokenizer_free(mistral);
    tu_tmpdir_free(real_dir);
}

/* Every line of NAME/cases.jsonl: the ids (no BOS) and the decoded text agree byte for byte. */
static void check_goldens(const tokenizer *t, const char *name)
{
    size_t len = 0;
    char *all = tu_read_file(tu_path("%s/tokenizers/%s/cases.jsonl", TU_FIXTURES, name), &len);
    ck_assert_msg(all, "%s/cases.jsonl missing", name);
    int cases = 0;
    for (char *line = strtok(all, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *c = cJSON_Parse(line);
        ck_assert_ptr_nonnull(c);
        const cJSON *text = cJSON_GetObjectItem(c, "text");
        const cJSON *want = cJSON_GetObjectItem(c, "ids");
        const cJSON *decoded = cJSON_GetObjectItem(c, "decoded");
        int32_t *ids = NULL;
        int n = 0;
        tt_error err = {0};
        ck_assert_msg(tokenizer_encode(t, text->valuestring, strlen(text->valuestring), &ids, &n,
                                       &err) == TT_OK, "%s", err.msg);
        char got[4096] = "", exp[4096] = "";
        size_t gw = 0, ew = 0;
        for (int i = 0; i < n && gw < sizeof got - 16; i++)
            gw += (size_t)snprintf(got + gw, sizeof got - gw, "%d,", (int)ids[i]);
        for (const cJSON *e = want->child; e && ew < sizeof exp - 16; e = e->next)
            ew += (size_t)snprintf(exp + ew, sizeof exp - ew, "%d,", e->valueint);
        ck_assert_msg(strcmp(got, exp) == 0, "%s: %s\n  got  %s\n  want %s", name, line, got, exp);
        char *back = NULL;
        size_t blen = 0;
        ck_assert(tokenizer_decode_text(t, ids, n, &back, &blen, &err) == TT_OK);
        ck_assert_msg(blen == strlen(decoded->valuestring) &&
                      memcmp(back, decoded->valuestring, blen) == 0,
                      "%s: decoding %s gave \"%s\", the reference \"%s\"", name, line, back,
                      decoded->valuestring);
        free(back);
        free(ids);
        cJSON_Delete(c);
        cases++;
    }
    ck_assert_int_ge(cases, 40);
    free(all);
}

START_TEST(qwen3_encodes_every_golden_case_like_the_reference)
{
    check_goldens(qwen3, "qwen3");
}
END_TEST

START_TEST(mistral_encodes_every_golden_case_like_the_reference)
{
    check_goldens(mistral, "mistral");
}
END_TEST

START_TEST(goldens_hold_without_the_pcre2_jit)
{
    setenv("TOKENTOP_PCRE2_JIT", "0", 1);
    tokenizer *t = NULL;
    tt_error err = {0};
    tt_status st = tokenizer_load_dir(tu_path("%s/qwen3", real_dir), &t, &err);
    unsetenv("TOKENTOP_PCRE2_JIT");
    ck_assert_msg(st == TT_OK, "%s", err.msg);
    check_goldens(t, "qwen3");
    ck_assert(tokenizer_equal(t, qwen3));
    tokenizer_free(t);
}
END_TEST

static void assert_display(const tokenizer *t, int32_t id, const char *want)
{
    char buf[128];
    tokenizer_token_display(t, id, TEXT_ESCAPE_WHITESPACE, buf, sizeof buf);
    ck_assert_msg(strcmp(buf, want) == 0, "token %d shows as \"%s\", expected \"%s\"", (int)id,
                  buf, want);
}

START_TEST(qwen3_special_tokens_bos_and_display)
{
    ck_assert_int_eq(tokenizer_vocab_size(qwen3), 151669);
    ck_assert_int_eq(tokenizer_token_id(qwen3, "<|im_end|>"), 151645);
    ck_assert_int_eq(tokenizer_token_id(qwen3, "<|endoftext|>"), 151643);
    /* tokenizer_config.json's eos_token; no BOS (bos_token null, add_bos_token false). */
    ck_assert_int_eq(tokenizer_eot_id(qwen3), 151645);
    ck_assert_int_eq(tokenizer_bos_id(qwen3), -1);
    ck_assert(!tokenizer_adds_bos(qwen3));
    ck_assert(tokenizer_is_special(qwen3, 151645));
    ck_assert(!tokenizer_is_special(qwen3, tokenizer_token_id(qwen3, "<think>")));
    ck_assert(!tokenizer_is_special(qwen3, 9707)); /* "Hello" */
    ck_assert(!tokenizer_is_special(qwen3, -1));
    ck_assert(!tokenizer_is_special(qwen3, 1 << 30));
    assert_display(qwen3, 151645, "\xe2\x9f\xa8<|im_end|>\xe2\x9f\xa9");
    assert_display(qwen3, tokenizer_token_id(qwen3, "<think>"), "<think>");
    assert_display(qwen3, tokenizer_token_id(qwen3, "\xc4\xa0world"), "\xe2\x90\xa3world");
    assert_display(qwen3, tokenizer_token_id(qwen3, "\xc4\x8a"), "\\n");
    assert_display(qwen3, 1 << 30, "#1073741824");
    ck_assert_ptr_nonnull(tokenizer_config_text(qwen3));
    ck_assert_ptr_nonnull(strstr(tokenizer_config_text(qwen3), "chat_template"));
}
END_TEST

START_TEST(mistral_bos_byte_tokens_and_display)
{
    ck_assert_int_eq(tokenizer_vocab_size(mistral), 32000);
    ck_assert_int_eq(tokenizer_bos_id(mistral), 1);
    ck_assert(tokenizer_adds_bos(mistral));
    ck_assert_int_eq(tokenizer_eot_id(mistral), 2);
    ck_assert(tokenizer_is_special(mistral, 0) && tokenizer_is_special(mistral, 1) &&
              tokenizer_is_special(mistral, 2));
    ck_assert(!tokenizer_is_special(mistral, 22557));
    assert_display(mistral, 22557, "\xe2\x90\xa3Hello");       /* "▁Hello" */
    assert_display(mistral, 28705, "\xe2\x90\xa3");            /* "▁" */
    assert_display(mistral, 13, "\\n");                        /* <0x0A> */
    assert_display(mistral, 243, "\\xF0");                     /* <0xF0> */
    assert_display(mistral, 2, "\xe2\x9f\xa8</s>\xe2\x9f\xa9");
    size_t n = 0;
    const char *b = tokenizer_token_bytes(mistral, 243, &n);
    ck_assert_int_eq((int)n, 1);
    ck_assert_int_eq((unsigned char)b[0], 0xF0);
    ck_assert_str_eq(tokenizer_token_str(mistral, 243), "<0xF0>");
}
END_TEST

/* A character Mistral's vocabulary lacks is four <0xNN> tokens; streamed one token at a time,
 * nothing comes out until the character is complete, then the character does. */
START_TEST(byte_fallback_tokens_stream_as_whole_characters)
{
    const char *text = "a\xf0\x9f\xa6\x99 b"; /* "a🦙 b" */
    int32_t *ids = NULL;
    int n = 0;
    tt_error err = {0};
    ck_assert(tokenizer_encode(mistral, text, strlen(text), &ids, &n, &err) == TT_OK);
    int bytes = 0;
    for (int i = 0; i < n; i++)
        bytes += tokenizer_token_str(mistral, ids[i])[0] == '<';
    ck_assert_int_eq(bytes, 4);
    utf8_stream s;
    utf8_stream_init(&s);
    char out[64], all[64];
    size_t w = 0;
    for (int i = 0; i < n; i++) {
        size_t nb = 0;
        const char *b = tokenizer_token_bytes(mistral, ids[i], &nb);
        size_t k = utf8_stream_push(&s, b, nb, out, sizeof out);
        for (size_t j = 0; j < k;) {
            uint32_t cp;
            int l = text_utf8_decode((const unsigned char *)out + j, k - j, &cp);
            ck_assert_msg(l > 0, "token %d streamed invalid UTF-8", i);
            j += (size_t)l;
        }
        memcpy(all + w, out, k);
        w += k;
    }
    all[w] = 0;
    ck_assert_str_eq(all, " a\xf0\x9f\xa6\x99 b"); /* the "▁" SentencePiece prepends */
    free(ids);
}
END_TEST

/* Bytes outside valid UTF-8 and ASCII round-trip through both (NFC leaves ASCII alone). */
START_TEST(random_bytes_round_trip_through_both)
{
    rng r;
    rng_seed(&r, 23);
    const tokenizer *ts[] = {qwen3, mistral};
    for (int round = 0; round < 200; round++) {
        char buf[200];
        size_t len = 1 + (uint32_t)rng_next(&r) % (sizeof buf - 1);
        for (size_t i = 0; i < len; i++) {
            uint32_t v = (uint32_t)rng_next(&r) % 140;
            buf[i] = (char)(v < 128 ? v : 0xF8 + (v - 128) % 8);
        }
        for (int k = 0; k < 2; k++) {
            int32_t *ids = NULL;
            int n = 0;
            tt_error err = {0};
            ck_assert(tokenizer_encode(ts[k], buf, len, &ids, &n, &err) == TT_OK);
            char *back = NULL;
            size_t blen = 0;
            ck_assert(tokenizer_decode_text(ts[k], ids, n, &back, &blen, &err) == TT_OK);
            ck_assert_msg(blen == len && memcmp(back, buf, len) == 0,
                          "round %d: %s changed %zu bytes into %zu", round,
                          k ? "mistral" : "qwen3", len, blen);
            free(back);
            free(ids);
        }
    }
}
END_TEST

/* SentencePiece has no pre-tokenizer: the whole text is one BPE word unless it is cut before
 * each "▁" run (no Mistral token has "▁" after another character). 1 MB of prose took 5 s as
 * one word, and takes about 0.3 s cut. */
START_TEST(long_texts_encode_fast_through_both)
{
    size_t len = 1000000;
    char *s = malloc(len + 1);
    static const char words[] = "In the beginning was the word, and 12 words were with it. ";
    for (size_t i = 0; i < len; i++)
        s[i] = words[i % (sizeof words - 1)];
    const tokenizer *ts[] = {qwen3, mistral};
    for (int k = 0; k < 2; k++) {
        double t0 = seconds_now();
        int32_t *ids = NULL;
        int n = 0;
        tt_error err = {0};
        ck_assert(tokenizer_encode(ts[k], s, len, &ids, &n, &err) == TT_OK);
        double dt = seconds_now() - t0;
        ck_assert_msg(dt < 3.0, "%s: 1 MB took %.2f s to encode", k ? "mistral" : "qwen3", dt);
        ck_assert_int_gt(n, (int)(len / 10));
        char *back = NULL;
        size_t blen = 0;
        ck_assert(tokenizer_decode_text(ts[k], ids, n, &back, &blen, &err) == TT_OK);
        ck_assert(blen == len && memcmp(back, s, len) == 0);
        free(back);
        free(ids);
    }
    free(s);
}
END_TEST

START_TEST(draft_and_target_must_share_a_vocabulary)
{
    ck_assert(tokenizer_equal(qwen3, qwen3));
    ck_assert(!tokenizer_equal(qwen3, mistral));
    tokenizer *gpt2 = NULL;
    tt_error err = {0};
    ck_assert(tokenizer_load_dir(tu_gpt2_dir(), &gpt2, &err) == TT_OK);
    ck_assert(!tokenizer_equal(gpt2, qwen3));
    tokenizer_free(gpt2);
}
END_TEST

/* ============================================================================================
 * Small hand-written tokenizer.json files */

/* A byte-level tokenizer.json: the 256 byte tokens (ids 0..255), extra vocabulary entries
 * (a JSON fragment), merges (a JSON array's insides), and the other top-level fields (a JSON
 * fragment, e.g. "\"added_tokens\": [...]"); model.type and extra model fields given. */
static char *byte_level_json(const char *type, const char *model_extra, const char *vocab_extra,
                             const char *merges, const char *rest)
{
    static const char *hexes = "0123456789abcdef";
    char *json = malloc(1 << 16);
    size_t w = 0;
    w += (size_t)sprintf(json + w, "{\"model\": {\"type\": \"%s\", %s \"vocab\": {", type,
                         model_extra);
    int next = 256;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        int cp = printable ? b : next++;
        w += (size_t)sprintf(json + w, "%s\"\\u%c%c%c%c\": %d", b ? ", " : "",
                             hexes[(cp >> 12) & 15], hexes[(cp >> 8) & 15], hexes[(cp >> 4) & 15],
                             hexes[cp & 15], b);
    }
    w += (size_t)sprintf(json + w, "%s%s}, \"merges\": [%s]},\n"
                         "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false,"
                         " \"use_regex\": true},\n"
                         "\"decoder\": {\"type\": \"ByteLevel\"}%s%s}",
                         *vocab_extra ? ", " : "", vocab_extra, merges, *rest ? ",\n" : "", rest);
    return json;
}

static tt_status load_json_text(const char *json, const char *config, tokenizer **t,
                                tt_error *err)
{
    return tokenizer_load_json_buffers(json, strlen(json), "tokenizer.json", config,
                                       config ? strlen(config) : 0, "tokenizer_config.json", t,
                                       err);
}

/* Loading must fail with status want and a message containing part (and part2). */
static void assert_json_fails(const char *json, const char *config, tt_status want,
                              const char *part, const char *part2)
{
    tokenizer *t = (tokenizer *)1;
    tt_error err = {0};
    tt_status st = load_json_text(json, config, &t, &err);
    ck_assert_msg(st == want, "status %s, expected %s (%s)", tt_status_str(st),
                  tt_status_str(want), err.msg);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(err.msg, part), "message \"%s\" lacks \"%s\"", err.msg, part);
    if (part2)
        ck_assert_msg(strstr(err.msg, part2), "message \"%s\" lacks \"%s\"", err.msg, part2);
}

static void assert_encodes(const tokenizer *t, const char *text, const char *want)
{
    int32_t *ids = NULL;
    int n = 0;
    tt_error err = {0};
    ck_assert_msg(tokenizer_encode(t, text, strlen(text), &ids, &n, &err) == TT_OK, "%s",
                  err.msg);
    char got[512] = "";
    size_t w = 0;
    for (int i = 0; i < n; i++)
        w += (size_t)snprintf(got + w, sizeof got - w, i ? ",%d" : "%d", (int)ids[i]);
    ck_assert_msg(strcmp(got, want) == 0, "\"%s\" encoded to %s, expected %s", text, got, want);
    free(ids);
}

START_TEST(refuses_other_model_types_by_name)
{
    static const char *const types[] = {"Unigram", "WordPiece", "WordLevel"};
    for (size_t i = 0; i < 3; i++) {
        char *json = byte_level_json(types[i], "", "", "", "");
        char want[96];
        snprintf(want, sizeof want, "tokenizer.json: model.type: %s is not supported (BPE only)",
                 types[i]);
        assert_json_fails(json, NULL, TT_ERR_UNSUPPORTED, want, NULL);
        free(json);
    }
}
END_TEST

START_TEST(refuses_malformed_json_naming_the_line)
{
    assert_json_fails("{\"model\":\n {\"type\": \"BPE\",\n ]", NULL, TT_ERR_FORMAT,
                      "tokenizer.json:3: invalid JSON", NULL);
    assert_json_fails("[1, 2]", NULL, TT_ERR_FORMAT, "tokenizer.json: expected a JSON object",
                      "an array");
    assert_json_fails("", NULL, TT_ERR_FORMAT, "tokenizer.json:1: invalid JSON", NULL);
}
END_TEST

START_TEST(refuses_merges_naming_unknown_tokens)
{
    char *json = byte_level_json("BPE", "", "\"ab\": 256", "\"a b\", \"zz q\"", "");
    assert_json_fails(json, NULL, TT_ERR_FORMAT, "tokenizer.json: model.merges[1]: symbol \"zz\"",
                      "not in model.vocab");
    free(json);
    json = byte_level_json("BPE", "", "", "\"a b\"", "");
    assert_json_fails(json, NULL, TT_ERR_FORMAT, "model.merges[0]: merge of \"a\" and \"b\" gives "
                      "\"ab\"", NULL);
    free(json);
    json = byte_level_json("BPE", "", "\"ab\": 256", "\"a b c\"", "");
    assert_json_fails(json, NULL, TT_ERR_FORMAT, "model.merges[0]: expected \"a b\"", NULL);
    free(json);
    json = byte_level_json("BPE", "", "\"ab\": 256", "[\"a\"]", "");
    assert_json_fails(json, NULL, TT_ERR_FORMAT, "model.merges[0]: expected", "an array");
    free(json);
}
END_TEST

START_TEST(refuses_absurd_ids_and_sizes)
{
    char *json = byte_level_json("BPE", "", "\"ab\": 1e12", "", "");
    assert_json_fails(json, NULL, TT_ERR_FORMAT, "tokenizer.json: model.vocab: token \"ab\": id "
                      "must be an integer in [0, 2097152), got 1e+12", NULL);
    free(json);
    json = byte_level_json("BPE", "", "", "",
                           "\"added_tokens\": [{\"id\": 99999999, \"content\": \"<x>\"}]");
    assert_json_fails(json, NULL, TT_ERR_FORMAT, "tokenizer.json: added_tokens[0].id", NULL);
    free(json);
    json = byte_level_json("BPE", "", "", "",
                           "\"added_tokens\": [{\"id\": 300, \"content\": \"\"}]");
    assert_json_fails(json, NULL, TT_ERR_FORMAT, "added_tokens[0].content", NULL);
    free(json);
}
END_TEST

START_TEST(refuses_unsupported_pieces_by_field_and_value)
{
    char *json = byte_level_json("BPE", "", "", "", "\"normalizer\": {\"type\": \"NFKC\"}");
    assert_json_fails(json, NULL, TT_ERR_UNSUPPORTED,
                      "tokenizer.json: normalizer.type: NFKC is not supported", NULL);
    free(json);
    json = byte_level_json("BPE", "\"continuing_subword_prefix\": \"##\",", "", "", "");
    assert_json_fails(json, NULL, TT_ERR_UNSUPPORTED, "model.continuing_subword_prefix: ##",
                      NULL);
    free(json);
    const char *split = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
                        "\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"},"
                        " \"behavior\": \"Removed\"}}";
    assert_json_fails(split, NULL, TT_ERR_UNSUPPORTED,
                      "tokenizer.json: pre_tokenizer.behavior: Removed is not supported", NULL);
    const char *bad_re = "{\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", "
                         "\"vocab\": {\"<unk>\": 0, \"a\": 1}, \"merges\": []},"
                         "\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(a\"},"
                         " \"behavior\": \"Isolated\"}, \"decoder\": {\"type\": \"Metaspace\"}}";
    assert_json_fails(bad_re, NULL, TT_ERR_UNSUPPORTED, "tokenizer.json: pattern \"(a\"", NULL);
    const char *no_bytes = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
                           "\"decoder\": {\"type\": \"Metaspace\"}}";
    assert_json_fails(no_bytes, NULL, TT_ERR_FORMAT, "tokenizer.json: model: no unk_token", NULL);
    json = byte_level_json("BPE", "", "", "", "");
    assert_json_fails(json, "{\"bos_token\": \"<s>\"}", TT_ERR_FORMAT,
                      "tokenizer_config.json: bos_token: \"<s>\" is not in", NULL);
    assert_json_fails(json, "{\"add_bos_token\": true}", TT_ERR_FORMAT,
                      "tokenizer_config.json: add_bos_token: true, but there is no bos_token",
                      NULL);
    assert_json_fails(json, "{\"add_bos_token\": 1", TT_ERR_FORMAT,
                      "tokenizer_config.json:1: invalid JSON", NULL);
    free(json);
}
END_TEST

START_TEST(merges_as_strings_or_pairs_are_the_same_tokenizer)
{
    const char *vocab = "\"ab\": 256, \"abc\": 257";
    char *strings = byte_level_json("BPE", "", vocab, "\"a b\", \"ab c\"", "");
    char *pairs = byte_level_json("BPE", "", vocab, "[\"a\", \"b\"], [\"ab\", \"c\"]", "");
    tokenizer *a = NULL, *b = NULL;
    tt_error err = {0};
    ck_assert_msg(load_json_text(strings, NULL, &a, &err) == TT_OK, "%s", err.msg);
    ck_assert_msg(load_json_text(pairs, NULL, &b, &err) == TT_OK, "%s", err.msg);
    ck_assert(tokenizer_equal(a, b));
    assert_encodes(a, "abcab", "257,256");
    assert_encodes(b, "abcab", "257,256");
    tokenizer_free(a);
    tokenizer_free(b);
    free(strings);
    free(pairs);
}
END_TEST

/* "abcd" is a token but no merge chain builds it: only ignore_merges makes it one token. */
START_TEST(ignore_merges_takes_a_word_in_the_vocabulary_whole)
{
    const char *vocab = "\"ab\": 256, \"abcd\": 257";
    char *off = byte_level_json("BPE", "", vocab, "\"a b\"", "");
    char *on = byte_level_json("BPE", "\"ignore_merges\": true,", vocab, "\"a b\"", "");
    tokenizer *a = NULL, *b = NULL;
    tt_error err = {0};
    ck_assert_msg(load_json_text(off, NULL, &a, &err) == TT_OK, "%s", err.msg);
    ck_assert_msg(load_json_text(on, NULL, &b, &err) == TT_OK, "%s", err.msg);
    assert_encodes(a, "abcd", "256,99,100");
    assert_encodes(b, "abcd", "257");
    assert_encodes(b, "abc", "256,99");
    tokenizer_free(a);
    tokenizer_free(b);
    free(off);
    free(on);
}
END_TEST

/* Added tokens are cut out of the text first, the longest at the leftmost place; lstrip and
 * rstrip take the spaces beside them. A GPT-2 vocab.json tokenizer keeps them plain text. */
START_TEST(added_tokens_match_longest_first_before_bpe)
{
    char *json = byte_level_json("BPE", "", "", "",
        "\"added_tokens\": ["
        "{\"id\": 300, \"content\": \"<a>\", \"special\": true},"
        "{\"id\": 301, \"content\": \"<a>b\", \"special\": true},"
        "{\"id\": 302, \"content\": \"[S]\", \"special\": false, \"lstrip\": true, "
        "\"rstrip\": true}]");
    tokenizer *t = NULL;
    tt_error err = {0};
    ck_assert_msg(load_json_text(json, NULL, &t, &err) == TT_OK, "%s", err.msg);
    assert_encodes(t, "x<a>y", "120,300,121");
    assert_encodes(t, "x<a>by", "120,301,121");
    assert_encodes(t, "<a<a>", "60,97,300");
    assert_encodes(t, "x  [S]  y", "120,302,121");
    ck_assert(tokenizer_is_special(t, 301) && !tokenizer_is_special(t, 302));
    ck_assert_int_eq(tokenizer_token_id(t, "<a>b"), 301);
    ck_assert_int_eq(tokenizer_vocab_size(t), 303);
    char *back = NULL;
    ck_assert(tokenizer_decode(t, (const int32_t[]){120, 301}, 2, &back, NULL, &err) == TT_OK);
    ck_assert_str_eq(back, "x<a>b");
    free(back);
    tokenizer_free(t);
    free(json);
}
END_TEST

/* SmolLM2's pre-tokenizer: digits one by one first, then GPT-2's regex (ByteLevel use_regex). */
START_TEST(digits_split_before_the_byte_level_regex)
{
    char *plain = byte_level_json("BPE", "", "\"12\": 256", "\"1 2\"", "");
    static const char old_pre[] = "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                                  "\"use_regex\": true}";
    char *pos = strstr(plain, old_pre);
    ck_assert_ptr_nonnull(pos);
    char *digits = malloc(strlen(plain) + 256);
    sprintf(digits, "%.*s{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", "
            "\"individual_digits\": true}, %s]}%s", (int)(pos - plain), plain, old_pre,
            pos + strlen(old_pre));
    tokenizer *a = NULL, *b = NULL;
    tt_error err = {0};
    ck_assert_msg(load_json_text(plain, NULL, &a, &err) == TT_OK, "%s", err.msg);
    ck_assert_msg(load_json_text(digits, NULL, &b, &err) == TT_OK, "%s", err.msg);
    assert_encodes(a, "a 12", "97,32,256");
    assert_encodes(b, "a 12", "97,32,49,50");
    tokenizer_free(a);
    tokenizer_free(b);
    free(plain);
    free(digits);
}
END_TEST

START_TEST(template_processing_and_config_decide_the_bos)
{
    const char *tmpl = "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": ["
                       "{\"SpecialToken\": {\"id\": \"<bos>\", \"type_id\": 0}},"
                       "{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}]},"
                       "\"added_tokens\": [{\"id\": 300, \"content\": \"<bos>\", "
                       "\"special\": true}]";
    char *json = byte_level_json("BPE", "", "", "", tmpl);
    tokenizer *t = NULL;
    tt_error err = {0};
    ck_assert_msg(load_json_text(json, NULL, &t, &err) == TT_OK, "%s", err.msg);
    ck_assert_int_eq(tokenizer_bos_id(t), 300);
    ck_assert(tokenizer_adds_bos(t));
    tokenizer_free(t);
    ck_assert_msg(load_json_text(json, "{\"add_bos_token\": false}", &t, &err) == TT_OK, "%s",
                  err.msg);
    ck_assert(!tokenizer_adds_bos(t));
    tokenizer_free(t);
    free(json);
}
END_TEST

START_TEST(load_dir_names_the_files_it_looked_for)
{
    char *dir = tu_tmpdir();
    tokenizer *t = (tokenizer *)1;
    tt_error err = {0};
    ck_assert_int_eq(tokenizer_load_dir(dir, &t, &err), TT_ERR_IO);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(err.msg, dir) && strstr(err.msg, "tokenizer.json") &&
                  strstr(err.msg, "vocab.json with merges.txt"), "%s", err.msg);
    /* Only vocab.json: the missing merges.txt is named. */
    ck_assert_int_eq(tu_write_file(tu_path("%s/vocab.json", dir), "{}", 2), 0);
    ck_assert_int_eq(tokenizer_load_dir(dir, &t, &err), TT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "merges.txt"), "%s", err.msg);
    /* tokenizer.json wins over vocab.json. */
    char *json = byte_level_json("Unigram", "", "", "", "");
    ck_assert_int_eq(tu_write_file(tu_path("%s/tokenizer.json", dir), json, strlen(json)), 0);
    ck_assert_int_eq(tokenizer_load_dir(dir, &t, &err), TT_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "/tokenizer.json: model.type: Unigram"), "%s", err.msg);
    free(json);
    tu_tmpdir_free(dir);
    /* GPT-2's two files load as tokenizer_load does. */
    tokenizer *a = NULL, *b = NULL;
    const char *g = tu_gpt2_dir();
    ck_assert(tokenizer_load_dir(g, &a, &err) == TT_OK);
    ck_assert(tokenizer_load(tu_path("%s/vocab.json", g), tu_path("%s/merges.txt", g), &b,
                             &err) == TT_OK);
    ck_assert(tokenizer_equal(a, b));
    ck_assert(!tokenizer_adds_bos(a));
    ck_assert(tokenizer_is_special(a, 50256));
    tokenizer_free(a);
    tokenizer_free(b);
}
END_TEST

/* GPT-2's vocab.json and merges.txt written as the tokenizer.json Hugging Face ships for gpt2
 * (ByteLevel with use_regex, "<|endoftext|>" an added special token) encode every reference
 * case to the same ids: Hugging Face's merge order (a new pair competes at once) agrees with
 * encoder.py's (one rank a pass) on GPT-2's merges. */
START_TEST(gpt2_as_tokenizer_json_encodes_like_its_vocab_json)
{
    const char *dir = tu_gpt2_dir();
    size_t len = 0;
    char *vocab_text = tu_read_file(tu_path("%s/vocab.json", dir), &len);
    char *merges_text = tu_read_file(tu_path("%s/merges.txt", dir), &len);
    ck_assert(vocab_text && merges_text);
    cJSON *root = cJSON_CreateObject(), *bpe = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(bpe, "type", "BPE");
    cJSON_AddItemToObject(bpe, "vocab", cJSON_Parse(vocab_text));
    cJSON *merges = cJSON_AddArrayToObject(bpe, "merges");
    for (char *line = strtok(merges_text, "\n"); line; line = strtok(NULL, "\n"))
        if (strncmp(line, "#version", 8) != 0)
            cJSON_AddItemToArray(merges, cJSON_CreateString(line));
    cJSON_AddItemToObject(root, "pre_tokenizer", cJSON_Parse(
        "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, "
        "\"use_regex\": true}"));
    cJSON_AddItemToObject(root, "post_processor", cJSON_Parse("{\"type\": \"ByteLevel\"}"));
    cJSON_AddItemToObject(root, "decoder", cJSON_Parse("{\"type\": \"ByteLevel\"}"));
    cJSON_AddItemToObject(root, "added_tokens", cJSON_Parse(
        "[{\"id\": 50256, \"content\": \"<|endoftext|>\", \"special\": true}]"));
    char *json = cJSON_PrintUnformatted(root);
    tokenizer *hf = NULL, *gpt2 = NULL;
    tt_error err = {0};
    ck_assert_msg(load_json_text(json, NULL, &hf, &err) == TT_OK, "%s", err.msg);
    ck_assert(tokenizer_load_dir(dir, &gpt2, &err) == TT_OK);
    ck_assert(tokenizer_equal(hf, gpt2));
    char *cases = tu_read_file(tu_path("%s/tokenizer-cases.jsonl", dir), &len);
    int n_cases = 0;
    for (char *line = strtok(cases, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *c = cJSON_Parse(line);
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        int32_t *a = NULL, *b = NULL;
        int na = 0, nb = 0;
        ck_assert(tokenizer_encode(hf, text, strlen(text), &a, &na, &err) == TT_OK);
        ck_assert(tokenizer_encode(gpt2, text, strlen(text), &b, &nb, &err) == TT_OK);
        /* There "<|endoftext|>" is the special token; here plain text, as encoder.py has it. */
        if (!strstr(text, "<|endoftext|>")) {
            ck_assert_msg(na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof *a) == 0),
                          "tokenizer.json and vocab.json disagree on %s", line);
            n_cases++;
        }
        free(a);
        free(b);
        cJSON_Delete(c);
    }
    ck_assert_int_ge(n_cases, 80);
    int32_t *ids = NULL;
    int n = 0;
    ck_assert(tokenizer_encode(hf, "a<|endoftext|>b", 15, &ids, &n, &err) == TT_OK);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(ids[1], 50256);
    free(ids);
    tokenizer_free(hf);
    tokenizer_free(gpt2);
    free(cases);
    free(json);
    cJSON_Delete(root);
    free(vocab_text);
    free(merges_text);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tokenizer_json");
    TCase *real = tu_add_case(s, "real", TU_TESTS(
            qwen3_encodes_every_golden_case_like_the_reference,
            mistral_encodes_every_golden_case_like_the_reference,
            goldens_hold_without_the_pcre2_jit, qwen3_special_tokens_bos_and_display,
            mistral_bos_byte_tokens_and_display, byte_fallback_tokens_stream_as_whole_characters,
            random_bytes_round_trip_through_both, long_texts_encode_fast_through_both,
            draft_and_target_must_share_a_vocabulary));
    tcase_add_unchecked_fixture(real, real_setup, real_teardown);
    tcase_set_timeout(real, 120);
    tu_add_case(s, "small", TU_TESTS(
            refuses_other_model_types_by_name, refuses_malformed_json_naming_the_line,
            refuses_merges_naming_unknown_tokens, refuses_absurd_ids_and_sizes,
            refuses_unsupported_pieces_by_field_and_value,
            merges_as_strings_or_pairs_are_the_same_tokenizer,
            ignore_merges_takes_a_word_in_the_vocabulary_whole,
            added_tokens_match_longest_first_before_bpe, digits_split_before_the_byte_level_regex,
            template_processing_and_config_decide_the_bos, load_dir_names_the_files_it_looked_for,
            gpt2_as_tokenizer_json_encodes_like_its_vocab_json));
    return tu_run_suite(s);
}
