/* fuzz_session_file.c: /load file text through session_file_parse and session_file_apply (what
 * /load runs over the file) on a session over a tiny model. Invariants: a refused file leaves the
 * session as it was and says why, naming the file; a file that loads serializes back
 * (session_file_serialize, what /save writes) to text that loads into a fresh session and
 * serializes back byte for byte the same, with the same tokens. */
#include <string.h>

#include "repl/session_file.h"
#include "tests/fuzz/fuzzutil.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_tiny_model();
    return 0;
}

/* What /save writes for s, malloc'd, *len bytes. */
static char *saved_text(const session *s, size_t *len)
{
    char *buf = session_file_serialize(s, "fuzz", len);
    FUZZ_CHECK(buf != NULL, "session_file_serialize: out of memory");
    return buf;
}

/* Parses and applies buf to s as /load does; err names the failure. */
static tt_status load_buffer(session *s, const char *buf, size_t len, const char *name, int *n,
                             tt_error *err)
{
    session_file f;
    tt_status st = session_file_parse(buf, len, name, s->model->config.V, &s->set, &f, err);
    if (st == TT_OK)
        st = session_file_apply(s, &f, n, err);
    session_file_free(&f);
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    session s;
    fuzz_session_init(&s);
    size_t before_len;
    char *before = saved_text(&s, &before_len);
    int n = -1;
    tt_error err = {0};
    if (load_buffer(&s, (const char *)data, size, "fuzz.json", &n, &err) != TT_OK) {
        FUZZ_CHECK(strncmp(err.msg, "fuzz.json", 9) == 0 || strncmp(err.msg, "tokenizer", 9) == 0,
                   "message without the file's name: '%s'", err.msg);
        size_t after_len;
        char *after = saved_text(&s, &after_len);
        FUZZ_CHECK(after_len == before_len && memcmp(before, after, after_len) == 0,
                   "a refused file changed the session");
        free(after);
        free(before);
        session_free(&s);
        return 0;
    }
    free(before);
    FUZZ_CHECK(n == s.n_tokens, "loaded %d, the session holds %d", n, s.n_tokens);
    size_t a_len;
    char *a = saved_text(&s, &a_len);
    session s2;
    fuzz_session_init(&s2);
    int n2 = -1;
    FUZZ_CHECK(load_buffer(&s2, a, a_len, "saved.json", &n2, &err) == TT_OK,
               "what /save wrote does not load: %s\n%s", err.msg, a);
    FUZZ_CHECK(s2.n_tokens == s.n_tokens &&
               memcmp(s2.tokens, s.tokens, (size_t)s.n_tokens * sizeof *s.tokens) == 0,
               "the tokens differ after save + load");
    size_t b_len;
    char *b = saved_text(&s2, &b_len);
    FUZZ_CHECK(a_len == b_len && memcmp(a, b, a_len) == 0,
               "save + load + save differs:\n%s\n----\n%s", a, b);
    free(a);
    free(b);
    session_free(&s2);
    session_free(&s);
    return 0;
}
