/* check_history.c: the input history: Up/Down browsing keeps the line being typed, entries persist
 * to the file (multi-line ones too) and come back on the next start, the oldest go beyond the
 * limit, and the file's place follows TOKENTOP_HISTORY and the XDG state directory. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "repl/history.h"
#include "tests/testutil.h"

START_TEST(escaping_round_trips_newlines_and_backslashes)
{
    const char *cases[] = {"plain", "two\nlines", "back\\slash", "\\n literally", "", "\n\n\\"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *e = history_escape(cases[i]);
        ck_assert_ptr_null(strchr(e, '\n'));
        char *u = history_unescape(e);
        ck_assert_str_eq(u, cases[i]);
        free(e);
        free(u);
    }
}
END_TEST

START_TEST(up_and_down_browse_and_restore_the_typed_line)
{
    history h;
    history_init(&h, NULL, 100);
    history_add(&h, "first", NULL);
    history_add(&h, "second", NULL);
    history_add(&h, "second", NULL);   /* a repeat is kept once */
    history_add(&h, "", NULL);         /* empty lines are not kept */
    ck_assert_int_eq(h.n, 2);
    ck_assert_str_eq(history_prev(&h, "half typed"), "second");
    ck_assert_str_eq(history_prev(&h, "ignored"), "first");
    ck_assert_ptr_null(history_prev(&h, "ignored"));   /* the oldest */
    ck_assert_str_eq(history_next(&h), "second");
    ck_assert_str_eq(history_next(&h), "half typed");  /* back to what was being typed */
    ck_assert_ptr_null(history_next(&h));
    history_free(&h);
}
END_TEST

START_TEST(entries_persist_across_runs_and_the_oldest_go_first)
{
    char *dir = tu_tmpdir();
    const char *path = tu_path("%s/state/tokentop/history", dir);   /* directories are made */
    history h;
    history_init(&h, path, 3);
    ck_assert_int_eq(history_load(&h, NULL), TT_OK);   /* no file yet: empty */
    ck_assert_int_eq(history_add(&h, "one", NULL), TT_OK);
    ck_assert_int_eq(history_add(&h, "two\nlines", NULL), TT_OK);
    ck_assert_int_eq(history_add(&h, "three", NULL), TT_OK);
    ck_assert_int_eq(history_add(&h, "four", NULL), TT_OK);
    ck_assert_int_eq(h.n, 3);
    history_free(&h);
    char *file = tu_read_file(path, NULL);
    ck_assert_str_eq(file, "one\ntwo\\nlines\nthree\nfour\n");
    free(file);
    history_init(&h, path, 3);
    ck_assert_int_eq(history_load(&h, NULL), TT_OK);
    ck_assert_int_eq(h.n, 3);
    ck_assert_str_eq(h.items[0], "two\nlines");
    ck_assert_str_eq(h.items[2], "four");
    ck_assert_str_eq(history_prev(&h, ""), "four");
    history_free(&h);
    file = tu_read_file(path, NULL);   /* rewritten without the dropped entry */
    ck_assert_str_eq(file, "two\\nlines\nthree\nfour\n");
    free(file);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(the_file_lives_in_the_xdg_state_directory)
{
    unsetenv("TOKENTOP_HISTORY");
    setenv("XDG_STATE_HOME", "/x/state", 1);
    setenv("HOME", "/home/u", 1);
    char *p = history_default_path();
    ck_assert_str_eq(p, "/x/state/tokentop/history");
    free(p);
    unsetenv("XDG_STATE_HOME");
    p = history_default_path();
    ck_assert_str_eq(p, "/home/u/.local/state/tokentop/history");
    free(p);
    setenv("TOKENTOP_HISTORY", "/tmp/h", 1);
    p = history_default_path();
    ck_assert_str_eq(p, "/tmp/h");
    free(p);
    setenv("TOKENTOP_HISTORY", "", 1);   /* empty: no file */
    ck_assert_ptr_null(history_default_path());
}
END_TEST

START_TEST(an_unwritable_file_is_reported_and_the_entry_kept)
{
    history h;
    history_init(&h, "/proc/tokentop-no/history", 10);
    tt_error err = {0};
    ck_assert_int_eq(history_add(&h, "kept", &err), TT_ERR_IO);
    ck_assert(strstr(err.msg, "/proc/tokentop-no/history") != NULL);
    ck_assert_int_eq(h.n, 1);
    history_free(&h);
}
END_TEST

int main(void)
{
    return tu_run_tests("history", TU_TESTS(
            escaping_round_trips_newlines_and_backslashes,
            up_and_down_browse_and_restore_the_typed_line,
            entries_persist_across_runs_and_the_oldest_go_first,
            the_file_lives_in_the_xdg_state_directory,
            an_unwritable_file_is_reported_and_the_entry_kept));
}
