/* fuzz_tokenizer_files.c: vocab.json and merges.txt into tokenizer_load_buffers, what
 * tokenizer_load runs over the two files. The input is the vocab text, a NUL byte, then the merges
 * text (no NUL: all of it is vocab.json and merges.txt is empty). Invariant: a tokenizer that
 * loads encodes a fixed text (ASCII, UTF-8, invalid bytes) and decodes it back exactly, and every
 * token's bytes are available. */
#include <string.h>

#include "core/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzzutil.h"

static const char sample[] = "Hello, world! It's 2024: \xc3\xa9t\xc3\xa9 \xe2\x82\xac 42\n\n"
                             "\xff\xc0 <|endoftext|>  \t end";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
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
