/* fuzz_tokenizer_files.c: a model directory's tokenizer files into the loaders.
 * - An input starting "tokenizer.json\n" is the rest: tokenizer.json's text, then optionally a
 *   NUL byte and tokenizer_config.json's, into tokenizer_load_json_buffers. Invariant: a tokenizer
 *   that loads encodes a fixed text (ASCII, UTF-8, invalid bytes, special-token spellings) into
 *   ids it can decode and display, and equals itself.
 * - Any other input is the vocab text, a NUL byte, then the merges text (no NUL: all of it is
 *   vocab.json and merges.txt is empty), into tokenizer_load_buffers, what tokenizer_load runs
 *   over the two files. Invariant: a tokenizer that loads encodes the fixed text and decodes it
 *   back exactly, and every token's bytes are available.
 * Either way a refusal names the file. */
#include <stdlib.h>
#include <string.h>

#include "core/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzzutil.h"

static const char sample[] = "Hello, world! It's 2024: \xc3\xa9t\xc3\xa9 \xe2\x82\xac 42\n\n"
                             "\xff\xc0 <|endoftext|>  \t end <s></s>[INST] 12345 \xe2\x96\x81x";

static void fuzz_json(const char *data, size_t size)
{
    const char *nul = memchr(data, 0, size);
    size_t json_len = nul ? (size_t)(nul - data) : size;
    const char *config = nul ? nul + 1 : NULL;
    size_t config_len = nul ? size - json_len - 1 : 0;
    tokenizer *t = NULL;
    tt_error err = {0};
    if (tokenizer_load_json_buffers(data, json_len, "tokenizer.json", config, config_len,
                                    "tokenizer_config.json", &t, &err) != TT_OK) {
        FUZZ_CHECK(t == NULL, "a refused tokenizer was returned");
        FUZZ_CHECK(strncmp(err.msg, "tokenizer", 9) == 0,
                   "message without the file's name: '%s'", err.msg);
        return;
    }
    int V = tokenizer_vocab_size(t);
    int32_t *ids = NULL;
    int n = 0;
    FUZZ_CHECK(tokenizer_encode(t, sample, sizeof sample - 1, &ids, &n, &err) == TT_OK, "%s",
               err.msg);
    char shown[64];
    for (int i = 0; i < n; i++) {
        FUZZ_CHECK(ids[i] >= 0 && ids[i] < V, "id %d out of [0, %d)", (int)ids[i], V);
        tokenizer_token_display(t, ids[i], 1, shown, sizeof shown);
    }
    char *back = NULL;
    FUZZ_CHECK(tokenizer_decode_text(t, ids, n, &back, NULL, &err) == TT_OK, "%s", err.msg);
    FUZZ_CHECK(tokenizer_equal(t, t), "a tokenizer differs from itself");
    free(back);
    free(ids);
    tokenizer_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char json_tag[] = "tokenizer.json\n";
    if (size >= sizeof json_tag - 1 && memcmp(data, json_tag, sizeof json_tag - 1) == 0) {
        fuzz_json((const char *)data + sizeof json_tag - 1, size - (sizeof json_tag - 1));
        return 0;
    }
    const uint8_t *nul = memchr(data, 0, size);
    size_t vocab_len = nul ? (size_t)(nul - data) : size;
    const char *merges = nul ? (const char *)nul + 1 : "";
    size_t merges_len = nul ? size - vocab_len - 1 : 0;
    tokenizer *t = NULL;
    tt_error err = {0};
    if (tokenizer_load_buffers((const char *)data, vocab_len, "vocab.json", merges, merges_len,
                               "merges.txt", &t, &err) != TT_OK) {
        FUZZ_CHECK(t == NULL, "a refused tokenizer was returned");
        FUZZ_CHECK(strncmp(err.msg, "vocab.json", 10) == 0 ||
                   strncmp(err.msg, "merges.txt", 10) == 0 || strncmp(err.msg, "tokenizer", 9) == 0,
                   "message without the file's name: '%s'", err.msg);
        return 0;
    }
    int V = tokenizer_vocab_size(t);
    for (int32_t id = 0; id < V; id++) {
        size_t len = 0;
        const char *b = tokenizer_token_bytes(t, id, &len);
        FUZZ_CHECK((b == NULL) == (tokenizer_token_str(t, id) == NULL), "id %d", id);
        FUZZ_CHECK(b == NULL || len > 0, "id %d has no bytes", id);
    }
    int32_t *ids = NULL;
    int n = 0;
    FUZZ_CHECK(tokenizer_encode(t, sample, sizeof sample - 1, &ids, &n, &err) == TT_OK, "%s",
               err.msg);
    char *back = NULL;
    size_t back_len = 0;
    FUZZ_CHECK(tokenizer_decode(t, ids, n, &back, &back_len, &err) == TT_OK, "%s", err.msg);
    FUZZ_CHECK(back_len == sizeof sample - 1 && memcmp(back, sample, back_len) == 0,
               "decode(encode(sample)) differs (%zu bytes back)", back_len);
    free(back);
    free(ids);
    tokenizer_free(t);
    return 0;
}
