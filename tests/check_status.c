/* check_status.c: error messages are formatted, prefixed and truncated safely. */
#include <check.h>
#include <string.h>

#include "core/base/status.h"
#include "tests/testutil.h"

START_TEST(fail_records_status_and_message)
{
    tt_error err = {0};
    ck_assert_int_eq(tt_fail(&err, TT_ERR_FORMAT, "%s: bad %d", "f.json", 3), TT_ERR_FORMAT);
    ck_assert_int_eq(err.status, TT_ERR_FORMAT);
    ck_assert_str_eq(err.msg, "f.json: bad 3");
    ck_assert_int_eq(tt_fail(NULL, TT_ERR_IO, "ignored"), TT_ERR_IO);
}
END_TEST

START_TEST(prefix_puts_the_outer_name_first)
{
    tt_error err = {0};
    tt_fail(&err, TT_ERR_CONFIG, "n_head: 0 is below the minimum 1");
    tt_error_prefix(&err, "config.json");
    ck_assert_str_eq(err.msg, "config.json: n_head: 0 is below the minimum 1");
}
END_TEST

START_TEST(prefix_truncates_long_messages_inside_the_buffer)
{
    tt_error err = {0};
    char long_msg[TT_ERROR_MAX];
    memset(long_msg, 'x', sizeof long_msg - 1);
    long_msg[sizeof long_msg - 1] = 0;
    tt_fail(&err, TT_ERR_ARG, "%s", long_msg);
    tt_error_prefix(&err, "p");
    ck_assert_uint_eq(strlen(err.msg), TT_ERROR_MAX - 1);
    ck_assert(strncmp(err.msg, "p: xxx", 6) == 0);
    char long_prefix[2 * TT_ERROR_MAX];
    memset(long_prefix, 'y', sizeof long_prefix - 1);
    long_prefix[sizeof long_prefix - 1] = 0;
    tt_error_prefix(&err, long_prefix);
    ck_assert_uint_eq(strlen(err.msg), TT_ERROR_MAX - 1);
    ck_assert_int_eq(err.msg[0], 'y');
}
END_TEST

START_TEST(every_status_has_a_name)
{
    for (int s = TT_OK; s <= TT_ERR_INTERRUPTED; s++)
        ck_assert(strcmp(tt_status_str((tt_status)s), "unknown status") != 0);
}
END_TEST

int main(void)
{
    return tu_run_tests("status", TU_TESTS(
            fail_records_status_and_message, prefix_puts_the_outer_name_first,
            prefix_truncates_long_messages_inside_the_buffer, every_status_has_a_name));
}
