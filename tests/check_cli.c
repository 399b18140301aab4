/* check_cli.c: command-line option parsing (app/cli.c). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli.h"
#include "tests/testutil.h"

/* Parses the words after the command name, with stderr (the refusal messages) sent away. */
static int parse(cli_options *o, const char *cmd, char **words, int n)
{
    char *argv[16];
    int argc = 0;
    argv[argc++] = (char *)"tokentop";
    int first = 1;
    if (strcmp(cmd, "tokentop") != 0) {
        argv[argc++] = (char *)cmd;
        first = 2;
    }
    for (int i = 0; i < n; i++)
        argv[argc++] = words[i];
    argv[argc] = NULL;
    cli_options_default(o);
    FILE *saved = stderr;
    stderr = fopen("/dev/null", "w");
    int r = cli_parse(o, cmd, argc, argv, first);
    fclose(stderr);
    stderr = saved;
    return r;
}

/* Found by fuzzing (tests/fuzz/corpus/cli_options/crash-getopt-state): getopt kept its place
 * inside the refused cluster "-Xq" of the previous call, so the next parse read the stale "q"
 * (the fuzzer saw the freed buffer it pointed into). */
START_TEST(parse_after_a_refused_option_cluster_starts_afresh)
{
    cli_options o;
    char *bad[] = {strdup("-Xq")};
    ck_assert_int_eq(parse(&o, "generate", bad, 1), -1);
    free(bad[0]);
    char *good[] = {(char *)"-p", (char *)"hi"};
    ck_assert_int_eq(parse(&o, "generate", good, 2), 0);
    ck_assert_msg(!o.quiet, "-q leaked from the previous command line");
    ck_assert_str_eq(o.prompt, "hi");
}
END_TEST

START_TEST(parses_from_the_first_word_after_the_command)
{
    cli_options o;
    char *words[] = {(char *)"-n", (char *)"7", (char *)"--temp", (char *)"0.5", (char *)"-q"};
    ck_assert_int_eq(parse(&o, "generate", words, 5), 0);
    ck_assert_int_eq(o.set.max_new_tokens, 7);
    ck_assert(o.quiet);
    ck_assert_float_eq_tol(o.set.sampler.temperature, 0.5f, 1e-6f);
    ck_assert_int_eq(parse(&o, "tokentop", words, 5), 0);
    ck_assert_int_eq(o.set.max_new_tokens, 7);
    char *stray[] = {(char *)"word"};
    ck_assert_int_eq(parse(&o, "score", stray, 1), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli");
    tu_add_case(s, "parse", TU_TESTS(
            parse_after_a_refused_option_cluster_starts_afresh,
            parses_from_the_first_word_after_the_command));
    return tu_run_suite(s);
}
