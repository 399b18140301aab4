/* check_util.c: the helpers with one home: whole-file reads (contents, the missing flag, the
 * size limit, messages naming the file), mapping a file, path joining, JSON type names, strict integer parsing
 * and the argmax; and the two shared alphabets: UTF-8 encoding (text.c) and GPT-2's byte
 * alphabet (tokenizer.c). */
#include <cJSON.h>
#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/base/text.h"
#include "core/tokenizer/tokenizer.h"
#include "core/base/util.h"
#include "tests/testutil.h"

START_TEST(read_file_returns_the_bytes_nul_terminated)
{
    char *dir = tu_tmpdir();
    const char *path = tu_path("%s/f.bin", dir);
    const char data[5] = {'a', 0, 'b', '\n', 'c'};
    ck_assert_int_eq(tu_write_file(path, data, sizeof data), 0);
    char *buf = NULL;
    size_t len = 0;
    bool missing = true;
    tt_error err = {0};
    ck_assert_int_eq(util_read_file(path, 0, &buf, &len, &missing, &err), TT_OK);
    ck_assert_uint_eq(len, 5);
    ck_assert(memcmp(buf, data, 5) == 0);
    ck_assert_int_eq(buf[5], 0);
    ck_assert(!missing);
    free(buf);
    /* with a limit: the same bytes when it is not exceeded, refused naming the file when it is */
    ck_assert_int_eq(util_read_file(path, 5, &buf, &len, NULL, &err), TT_OK);
    ck_assert_uint_eq(len, 5);
    free(buf);
    ck_assert_int_eq(util_read_file(path, 4, &buf, &len, NULL, &err), TT_ERR_FORMAT);
    ck_assert_ptr_null(buf);
    ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "5 bytes"), "%s", err.msg);
    /* an empty file is an empty string */
    ck_assert_int_eq(tu_write_file(path, "", 0), 0);
    ck_assert_int_eq(util_read_file(path, 10, &buf, &len, NULL, &err), TT_OK);
    ck_assert_uint_eq(len, 0);
    ck_assert_str_eq(buf, "");
    free(buf);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(read_file_grows_past_its_first_buffer)
{
    char *dir = tu_tmpdir();
    const char *path = tu_path("%s/big.txt", dir);
    size_t n = 100000;
    char *data = malloc(n);
    ck_assert_ptr_nonnull(data);
    for (size_t i = 0; i < n; i++)
        data[i] = (char)('a' + i % 26);
    ck_assert_int_eq(tu_write_file(path, data, n), 0);
    char *buf = NULL;
    size_t len = 0;
    tt_error err = {0};
    ck_assert_int_eq(util_read_file(path, 0, &buf, &len, NULL, &err), TT_OK);
    ck_assert_uint_eq(len, n);
    ck_assert(memcmp(buf, data, n) == 0);
    free(buf);
    free(data);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(read_file_names_a_missing_file_and_says_it_is_missing)
{
    char *buf = (char *)1;
    bool missing = false;
    tt_error err = {0};
    ck_assert_int_eq(util_read_file("/nonexistent/x.json", 0, &buf, NULL, &missing, &err),
                     TT_ERR_IO);
    ck_assert_ptr_null(buf);
    ck_assert(missing);
    ck_assert_msg(strstr(err.msg, "/nonexistent/x.json: cannot open: No such file"), "%s",
                  err.msg);
    /* a directory is not a file: with a limit it is refused before reading */
    char *dir = tu_tmpdir();
    ck_assert_int_eq(util_read_file(dir, 100, &buf, NULL, &missing, &err), TT_ERR_IO);
    ck_assert(!missing);
    ck_assert_msg(strstr(err.msg, "not a regular file"), "%s", err.msg);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(map_file_maps_a_regular_file_and_names_what_it_refuses)
{
    char *dir = tu_tmpdir();
    const char *path = tu_path("%s/f.bin", dir);
    ck_assert_int_eq(tu_write_file(path, "tokentop", 8), 0);
    void *map = NULL;
    size_t len = 0;
    tt_error err = {0};
    ck_assert_int_eq(util_map_file(path, &map, &len, &err), TT_OK);
    ck_assert_uint_eq(len, 8);
    ck_assert_int_eq(memcmp(map, "tokentop", 8), 0);
    munmap(map, len);
    const char *empty = tu_path("%s/empty", dir);
    ck_assert_int_eq(tu_write_file(empty, "", 0), 0);
    ck_assert_int_eq(util_map_file(empty, &map, &len, &err), TT_OK);
    ck_assert_ptr_null(map);
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(util_map_file(dir, &map, &len, &err), TT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "not a regular file"), "%s", err.msg);
    ck_assert_int_eq(util_map_file("/nonexistent/m.gguf", &map, &len, &err), TT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "/nonexistent/m.gguf: cannot open: No such file"), "%s",
                  err.msg);
    ck_assert_ptr_null(map);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(path_join_puts_one_slash_between)
{
    char *p = util_path_join("models/kjv", "config.json");
    ck_assert_str_eq(p, "models/kjv/config.json");
    free(p);
    p = util_path_join("models/kjv/", "config.json");
    ck_assert_str_eq(p, "models/kjv/config.json");
    free(p);
    p = util_path_join("", "config.json");
    ck_assert_str_eq(p, "config.json");
    free(p);
}
END_TEST

START_TEST(json_type_names_read_as_english)
{
    cJSON *j = cJSON_Parse("[\"s\", 1, true, null, [], {}]");
    ck_assert_ptr_nonnull(j);
    const char *want[] = {"a string", "a number", "a boolean", "null", "an array", "an object"};
    for (int i = 0; i < 6; i++)
        ck_assert_str_eq(util_json_type_name(cJSON_GetArrayItem(j, i)), want[i]);
    cJSON_Delete(j);
}
END_TEST

START_TEST(parse_long_takes_whole_integers_in_range_only)
{
    long v = 7;
    ck_assert_int_eq(util_parse_long("42", 0, 100, &v), UTIL_PARSE_OK);
    ck_assert_int_eq(v, 42);
    ck_assert_int_eq(util_parse_long("-3", -5, 5, &v), UTIL_PARSE_OK);
    ck_assert_int_eq(v, -3);
    v = 7;
    const char *bad[] = {"", "x", "12x", "1.5", "0x10", " ", NULL};
    for (int i = 0; i < 7; i++)
        ck_assert_msg(util_parse_long(bad[i], 0, 100, &v) == UTIL_PARSE_NOT_INTEGER, "%s",
                      bad[i] ? bad[i] : "NULL");
    ck_assert_int_eq(util_parse_long("101", 0, 100, &v), UTIL_PARSE_OUT_OF_RANGE);
    ck_assert_int_eq(util_parse_long("-1", 0, 100, &v), UTIL_PARSE_OUT_OF_RANGE);
    ck_assert_int_eq(util_parse_long("99999999999999999999999", LONG_MIN, LONG_MAX, &v),
                     UTIL_PARSE_OUT_OF_RANGE);
    ck_assert_int_eq(v, 7);   /* untouched by every failure */
}
END_TEST

START_TEST(argmax_takes_the_lowest_index_on_ties)
{
    const float v[] = {-1.0f, 3.0f, 0.5f, 3.0f, -INFINITY};
    ck_assert_int_eq(util_argmax(v, 5), 1);
    ck_assert_int_eq(util_argmax(v + 2, 3), 1);
    ck_assert_int_eq(util_argmax(v + 4, 1), 0);
}
END_TEST

START_TEST(reserve_doubles_from_the_initial_size_and_keeps_the_contents)
{
    char *buf = NULL;
    size_t cap = 0;
    ck_assert(util_reserve(&buf, &cap, 10, 16));
    ck_assert_uint_eq(cap, 16);
    memcpy(buf, "abcdefghi", 10);
    ck_assert(util_reserve(&buf, &cap, 16, 16));   /* enough already: unchanged */
    ck_assert_uint_eq(cap, 16);
    ck_assert(util_reserve(&buf, &cap, 70, 16));
    ck_assert_uint_eq(cap, 128);
    ck_assert_str_eq(buf, "abcdefghi");
    free(buf);
}
END_TEST

START_TEST(reserve_items_counts_elements_and_refuses_an_overflowing_size)
{
    int64_t *v = NULL;
    size_t cap = 0;
    ck_assert(UTIL_RESERVE(v, &cap, 5, 4));
    ck_assert_uint_eq(cap, 8);
    for (int i = 0; i < 8; i++)
        v[i] = (int64_t)i << 40;
    ck_assert(UTIL_RESERVE(v, &cap, 9, 4));
    ck_assert_uint_eq(cap, 16);
    ck_assert(v[7] == (int64_t)7 << 40);
    int64_t *before = v;
    ck_assert(!UTIL_RESERVE(v, &cap, SIZE_MAX / 4, 4));   /* bytes overflow size_t */
    ck_assert(v == before);
    ck_assert_uint_eq(cap, 16);
    free(v);
}
END_TEST

START_TEST(utf8_encode_round_trips_through_decode)
{
    const uint32_t cps[] = {0, 'A', 0x7f, 0x80, 0x120, 0x7ff, 0x800, 0x2423, 0xffff, 0x10000,
                            0x1f600, 0x10ffff};
    const int lens[] = {1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4};
    for (size_t i = 0; i < sizeof cps / sizeof cps[0]; i++) {
        char buf[4];
        int n = text_utf8_encode(cps[i], buf);
        ck_assert_int_eq(n, lens[i]);
        uint32_t back = 0xdeadbeef;
        ck_assert_int_eq(text_utf8_decode((const unsigned char *)buf, (size_t)n, &back), n);
        ck_assert_uint_eq(back, cps[i]);
    }
    char buf[4];
    ck_assert_int_eq(text_utf8_encode(0x120, buf), 2);   /* "Ġ", GPT-2's space */
    ck_assert(memcmp(buf, "\xc4\xa0", 2) == 0);
}
END_TEST

START_TEST(byte_alphabet_is_gpt2s_bytes_to_unicode)
{
    uint32_t cp[256];
    tokenizer_byte_alphabet(cp);
    int printable = 0;
    for (int b = 0; b < 256; b++)
        printable += cp[b] == (uint32_t)b;
    ck_assert_int_eq(printable, 188);
    ck_assert_uint_eq(cp['A'], 'A');
    ck_assert_uint_eq(cp[0], 0x100);
    ck_assert_uint_eq(cp[' '], 0x120);     /* Ġ */
    ck_assert_uint_eq(cp['\n'], 0x10a);    /* Ċ */
    ck_assert_uint_eq(cp[0xad], 0x143);    /* the soft hyphen: the last of the 68 */
    bool seen[324] = {false};
    for (int b = 0; b < 256; b++) {
        ck_assert_uint_lt(cp[b], 324);
        ck_assert(!seen[cp[b]]);
        seen[cp[b]] = true;
    }
}
END_TEST

int main(void)
{
    return tu_run_tests("util", TU_TESTS(
            read_file_returns_the_bytes_nul_terminated, read_file_grows_past_its_first_buffer,
            read_file_names_a_missing_file_and_says_it_is_missing,
            map_file_maps_a_regular_file_and_names_what_it_refuses, path_join_puts_one_slash_between,
            json_type_names_read_as_english, parse_long_takes_whole_integers_in_range_only,
            argmax_takes_the_lowest_index_on_ties,
            reserve_doubles_from_the_initial_size_and_keeps_the_contents,
            reserve_items_counts_elements_and_refuses_an_overflowing_size,
            utf8_encode_round_trips_through_decode,
            byte_alphabet_is_gpt2s_bytes_to_unicode));
}
