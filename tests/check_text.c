/* check_text.c: token bytes are shown as valid UTF-8, whatever they hold. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/text.h"
#include "core/base/jsonw.h"
#include "tests/testutil.h"

static const char *show(const char *bytes, size_t n, int flags)
{
    static char buf[256];
    text_token_display(bytes, n, flags, buf, sizeof buf);
    return buf;
}

START_TEST(complete_characters_pass_through)
{
    ck_assert_str_eq(show("caf\xc3\xa9", 5, TEXT_ESCAPE_BYTES), "caf\xc3\xa9");
    ck_assert_str_eq(show("\xf0\x9f\x98\x80", 4, TEXT_ESCAPE_BYTES), "\xf0\x9f\x98\x80");
}
END_TEST

START_TEST(partial_character_is_shown_as_hex_escapes)
{
    /* The first two bytes of U+1F600: a token may end mid-character. */
    ck_assert_str_eq(show("\xf0\x9f", 2, TEXT_ESCAPE_BYTES), "\\xF0\\x9F");
    ck_assert_str_eq(show("a\x80", 2, TEXT_ESCAPE_BYTES), "a\\x80");
}
END_TEST

START_TEST(invalid_sequences_are_escaped_not_decoded)
{
    ck_assert_str_eq(show("\xc0\xaf", 2, TEXT_ESCAPE_BYTES), "\\xC0\\xAF");         /* overlong */
    ck_assert_str_eq(show("\xed\xa0\x80", 3, TEXT_ESCAPE_BYTES), "\\xED\\xA0\\x80"); /* surrogate */
    ck_assert_str_eq(show("\xf4\x90\x80\x80", 4, TEXT_ESCAPE_BYTES),
                     "\\xF4\\x90\\x80\\x80");                                       /* > U+10FFFF */
}
END_TEST

START_TEST(whitespace_mode_marks_leading_space_and_escapes_controls)
{
    ck_assert_str_eq(show(" The", 4, TEXT_ESCAPE_WHITESPACE), "\xe2\x90\xa3The");
    ck_assert_str_eq(show("\n\n", 2, TEXT_ESCAPE_WHITESPACE), "\\n\\n");
    ck_assert_str_eq(show("a\tb\r", 4, TEXT_ESCAPE_WHITESPACE), "a\\tb\\r");
    ck_assert_str_eq(show("a b", 3, TEXT_ESCAPE_WHITESPACE), "a b");
    ck_assert_str_eq(show("\x01", 1, TEXT_ESCAPE_WHITESPACE), "\\x01");
    /* Without the flag, whitespace is left alone. */
    ck_assert_str_eq(show(" a\n", 3, TEXT_ESCAPE_BYTES), " a\n");
}
END_TEST

START_TEST(output_is_truncated_at_character_boundaries)
{
    char buf[6];
    size_t n = text_token_display("ab\xc3\xa9\xc3\xa9", 6, TEXT_ESCAPE_BYTES, buf, sizeof buf);
    ck_assert_uint_eq(n, 4);
    ck_assert_str_eq(buf, "ab\xc3\xa9");
}
END_TEST

START_TEST(json_strings_escape_quotes_and_controls)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    jsonw_string(f, "a\"b\\c\n\x01", 7);
    fputc(' ', f);
    jsonw_number(f, 0.5);
    fputc(' ', f);
    jsonw_number(f, 1.0 / 0.0);
    fclose(f);
    ck_assert_str_eq(out, "\"a\\\"b\\\\c\\n\\u0001\" 0.5 null");
    free(out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("text");
    tu_add_case(s, "display", TU_TESTS(
            complete_characters_pass_through, partial_character_is_shown_as_hex_escapes,
            invalid_sequences_are_escaped_not_decoded,
            whitespace_mode_marks_leading_space_and_escapes_controls,
            output_is_truncated_at_character_boundaries, json_strings_escape_quotes_and_controls));
    return tu_run_suite(s);
}
