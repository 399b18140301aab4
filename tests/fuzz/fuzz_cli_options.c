/* fuzz_cli_options.c: a command line into cli_parse, what main and the REPL run over argv. The
 * input's bytes are the arguments, separated by NUL bytes; the first byte picks the command
 * (tokentop, generate, tokenize, score). Invariants: a refused command line prints a message
 * naming the command; an accepted one has valid sampler settings and values in their ranges. */
#include <string.h>

#include "app/cli.h"
#include "core/decode/sampler.h"
#include "tests/fuzz/fuzzutil.h"

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const char *const cmds[] = {"tokentop", "generate", "tokenize", "score"};
    const char *cmd = cmds[data[0] % 4];
    char *buf = fuzz_cstr(data + 1, size - 1);
    char *argv[MAX_ARGS + 3];
    int argc = 0, first = strcmp(cmd, "tokentop") == 0 ? 1 : 2;
    argv[argc++] = (char *)"tokentop";
    if (first == 2)
        argv[argc++] = (char *)cmd;
    for (size_t i = 0; i < size - 1 && argc < MAX_ARGS;) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    argv[argc] = NULL;

    cli_options o;
    cli_options_default(&o);
    char *out = NULL, *errs = NULL;
    size_t out_len = 0, errs_len = 0;
    FILE *saved_out = stdout, *saved_err = stderr;
    stdout = open_memstream(&out, &out_len);
    stderr = open_memstream(&errs, &errs_len);
    FUZZ_CHECK(stdout && stderr, "open_memstream failed");
    int r = cli_parse(&o, cmd, argc, argv, first);
    fclose(stdout);
    fclose(stderr);
    stdout = saved_out;
    stderr = saved_err;
    char prefix[32];
    snprintf(prefix, sizeof prefix, "tokentop %s: ", cmd);
    if (r < 0) {
        FUZZ_CHECK(errs_len > 0 && strncmp(errs, prefix, strlen(prefix)) == 0,
                   "refused with the message '%s'", errs);
    } else if (r == 0) {
        FUZZ_CHECK(errs_len == 0, "accepted, with the message '%s'", errs);
        tt_error err = {0};
        FUZZ_CHECK(sampler_params_validate(&o.set.sampler, &err) == TT_OK, "%s", err.msg);
        FUZZ_CHECK(o.n_stops >= 0 && o.n_stops <= SESSION_MAX_STOPS, "%d stops", o.n_stops);
        for (int i = 0; i < o.n_stops; i++)
            FUZZ_CHECK(o.stops[i][0] != 0, "an empty stop string");
        FUZZ_CHECK(!(o.prompt && o.prompt_file), "both -p and -f");
        FUZZ_CHECK(o.set.max_new_tokens >= 1, "max_new_tokens %d", o.set.max_new_tokens);
    } else {
        FUZZ_CHECK(r == 1 && out_len > 0, "--help printed nothing (r = %d)", r);
    }
    free(out);
    free(errs);
    free(buf);
    return 0;
}
