/* fuzz_tokenizer_text.c: any bytes into tokenizer_encode with OpenAI's GPT-2 tokenizer, what every
 * prompt goes through. Invariants: decode(encode(bytes)) == bytes; the PCRE2 interpreter path
 * gives the same ids as the JIT path; the streaming decoder, fed token by token, writes valid
 * UTF-8 within its documented bound, and exactly the input when the input is valid UTF-8. */
#include <string.h>

#include "core/base/text.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzzutil.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_gpt2_tokenizer(true);
    fuzz_gpt2_tokenizer(false);
    return 0;
}

/* True when s[0..n) is valid UTF-8 (core/base/text.c's definition). */
static bool valid_utf8(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        int k = text_utf8_seq_len(s + i, n - i);
        if (k == 0)
            return false;
        i += (size_t)k;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const tokenizer *t = fuzz_gpt2_tokenizer(true);
    const tokenizer *interp = fuzz_gpt2_tokenizer(false);
    const char *text = (const char *)data;
    int32_t *ids = NULL, *ids2 = NULL;
    int n = 0, n2 = 0;
    tt_error err = {0};
    FUZZ_CHECK(tokenizer_encode(t, text, size, &ids, &n, &err) == TT_OK, "%s", err.msg);
    FUZZ_CHECK(tokenizer_encode(interp, text, size, &ids2, &n2, &err) == TT_OK, "%s", err.msg);
    FUZZ_CHECK(n == n2 && (n == 0 || memcmp(ids, ids2, (size_t)n * sizeof *ids) == 0),
               "JIT gives %d ids, the interpreter %d (or different ones)", n, n2);
    FUZZ_CHECK(n <= (int)size, "%d ids for %zu bytes", n, size);
    char *back = NULL;
    size_t back_len = 0;
    FUZZ_CHECK(tokenizer_decode(t, ids, n, &back, &back_len, &err) == TT_OK, "%s", err.msg);
    FUZZ_CHECK(back_len == size && memcmp(back, data, size) == 0,
               "decode(encode(%zu bytes)) gives %zu bytes, not the same", size, back_len);
    free(back);

    /* The streaming decoder, as the transcript uses it. */
    size_t cap = 3 * (size + 4) + 16, w = 0;
    char *out = malloc(cap);
    FUZZ_CHECK(out != NULL, "out of memory");
    utf8_stream us;
    utf8_stream_init(&us);
    for (int i = 0; i < n; i++) {
        size_t len = 0;
        const char *b = tokenizer_token_bytes(t, ids[i], &len);
        size_t room = 3 * (len + 4);
        FUZZ_CHECK(w + room <= cap, "stream output past its bound");
        size_t k = utf8_stream_push(&us, b, len, out + w, room);
        FUZZ_CHECK(k <= room, "push wrote %zu of %zu", k, room);
        w += k;
    }
    w += utf8_stream_flush(&us, out + w, cap - w);
    FUZZ_CHECK(valid_utf8((const unsigned char *)out, w), "stream wrote invalid UTF-8");
    if (valid_utf8(data, size))
        FUZZ_CHECK(w == size && memcmp(out, data, size) == 0, "stream changed valid UTF-8");
    free(out);
    free(ids);
    free(ids2);
    return 0;
}
