/* fuzz_command_line.c: a typed line into what the REPL and line mode do with it: cmd_execute for
 * a slash-command (quoting, escapes, prefixes, every handler's argument checks) on a session over
 * a tiny model, cmd_prompt_text for text. /save, /load and /draft are left out (they touch the
 * file system; the session file has its own target). The first byte chooses line mode or not and
 * whether a generation is running. Invariants: a failed command answers with a message and leaves
 * the settings and the conversation as they were; cmd_split_args reads back the same words from
 * its words written quoted and escaped. */
#include <string.h>

#include "repl/commands.h"
#include "repl/compare.h"
#include "repl/dtype_cmd.h"
#include "tests/fuzz/fuzzutil.h"
#include "tests/testutil.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_tiny_model();
    return 0;
}

/* The words of argv written as one line that cmd_split_args reads back to the same words. */
static char *quote_words(char **argv, int argc)
{
    size_t cap = 1;
    for (int i = 0; i < argc; i++)
        cap += 4 * strlen(argv[i]) + 3;
    char *line = malloc(cap), *w = line;
    FUZZ_CHECK(line != NULL, "out of memory");
    for (int i = 0; i < argc; i++) {
        *w++ = ' ';
        *w++ = '"';
        for (const char *p = argv[i]; *p; p++) {
            if (*p == '"' || *p == '\\')
                *w++ = '\\';
            *w++ = *p;
        }
        *w++ = '"';
    }
    *w = 0;
    return line;
}

static void check_split(const char *line)
{
    char **argv = NULL, **argv2 = NULL;
    char msg[512];
    int argc = cmd_split_args(line, &argv, msg, sizeof msg);
    if (argc < 0) {
        FUZZ_CHECK(msg[0] != 0, "refused without a message");
        return;
    }
    char *again = quote_words(argv, argc);
    int argc2 = cmd_split_args(again, &argv2, msg, sizeof msg);
    FUZZ_CHECK(argc2 == argc, "%d words, then %d: %s", argc, argc2, argc2 < 0 ? msg : again);
    for (int i = 0; i < argc; i++)
        FUZZ_CHECK(strcmp(argv[i], argv2[i]) == 0, "word %d: '%s' then '%s'", i, argv[i],
                   argv2[i]);
    cmd_free_args(argv, argc);
    cmd_free_args(argv2, argc2);
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned mode = data[0];
    char *line = fuzz_cstr(data + 1, size - 1);   /* a typed line ends at a NUL */
    check_split(line);
    session s;
    fuzz_session_init(&s);
    if (!cmd_is_command(line)) {
        size_t len = 0;
        char *text = cmd_prompt_text(&s, line, &len);
        FUZZ_CHECK(text != NULL, "out of memory");
        const char *sent = line[0] == '/' ? line + 1 : line;
        size_t n = strlen(sent);
        FUZZ_CHECK(len >= n && memcmp(text + len - n, sent, n) == 0, "the prompt text lost bytes");
        free(text);
        session_free(&s);
        free(line);
        return 0;
    }
    char name[64], msg[512];
    size_t nlen = strcspn(line + 1, " \t");
    snprintf(name, sizeof name, "%.*s", (int)(nlen < 63 ? nlen : 63), line + 1);
    const cmd_entry *c = cmd_lookup(name, msg, sizeof msg);
    if (c && (!strcmp(c->name, "save") || !strcmp(c->name, "load") || !strcmp(c->name, "draft"))) {
        session_free(&s);
        free(line);
        return 0;
    }
    cmd_env e;
    cmd_env_init(&e, &s);
    cmd_env_add_module(&e, &compare_cmd_module);
    cmd_env_add_module(&e, &dtype_cmd_module);
    e.line_mode = mode & 1;
    e.busy = mode & 2;
    /* A conversation to undo, regenerate and list. */
    int32_t ids[] = {1, 2, 3, 4, 5};
    tt_error err = {0};
    FUZZ_CHECK(session_set_tokens(&s, ids, NULL, 5, &err) == TT_OK, "%s", err.msg);
    sampler_params before = s.set.sampler;
    int n_before = s.n_tokens, max_before = s.set.max_new_tokens;
    int r = cmd_execute(&e, line);
    if (r & CMD_ERROR) {
        FUZZ_CHECK(e.out && e.out[0], "'%s' failed without a message", line);
        FUZZ_CHECK(tu_same_sampler_params(&before, &s.set.sampler),
                   "'%s' failed but changed the sampler", line);
        FUZZ_CHECK(s.n_tokens == n_before && s.set.max_new_tokens == max_before,
                   "'%s' failed but changed the session", line);
    }
    cmd_env_free(&e);
    session_free(&s);
    free(line);
    return 0;
}
