/* check_quant.c: ggml's block formats read back as the format defines them. Each test builds a
 * block by hand and compares with values worked out on paper from the layout (quant.c's header
 * comment), not with another implementation's output. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/model/quant.h"
#include "tests/testutil.h"

#define H_ONE 0x3c00       /* fp16 1.0 */
#define H_HALF 0x3800      /* 0.5 */
#define H_QUARTER 0x3400   /* 0.25 */
#define H_TWO 0x4000       /* 2.0 */
#define H_NAN 0x7e00
#define H_INF 0x7c00

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

START_TEST(names_sizes_and_support_follow_ggml)
{
    ck_assert_str_eq(quant_type_name(QUANT_Q4_K), "Q4_K");
    ck_assert_str_eq(quant_type_name(QUANT_IQ2_XXS), "IQ2_XXS");
    ck_assert_str_eq(quant_type_name(4), "?");            /* Q4_2, removed */
    ck_assert_str_eq(quant_type_name(31), "?");
    ck_assert_str_eq(quant_type_name(QUANT_NVFP4), "NVFP4");
    ck_assert_uint_eq(quant_block_bytes(QUANT_Q1_0), 18);
    ck_assert(!quant_type_known(QUANT_TYPE_END));
    ck_assert_uint_eq(quant_block_bytes(QUANT_Q8_0), 34);
    ck_assert_uint_eq(quant_block_bytes(QUANT_Q4_0), 18);
    ck_assert_uint_eq(quant_block_bytes(QUANT_Q5_0), 22);
    ck_assert_uint_eq(quant_block_bytes(QUANT_Q4_K), 144);
    ck_assert_uint_eq(quant_block_bytes(QUANT_Q6_K), 210);
    ck_assert_uint_eq(quant_block_size(QUANT_Q6_K), 256);
    ck_assert_uint_eq(quant_block_size(QUANT_BF16), 1);
    const uint32_t yes[] = {QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q8_0, QUANT_Q4_0, QUANT_Q5_0,
                            QUANT_Q4_K, QUANT_Q6_K};
    const uint32_t no[] = {QUANT_Q4_1, QUANT_Q5_1, QUANT_Q2_K, QUANT_Q3_K, QUANT_Q5_K,
                           QUANT_IQ4_XS, QUANT_I32, QUANT_F64, 5, 99};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        ck_assert_msg(quant_type_supported(yes[i]), "%s", quant_type_name(yes[i]));
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        ck_assert_msg(!quant_type_supported(no[i]), "%s", quant_type_name(no[i]));
    uint64_t b = 0;
    ck_assert(quant_row_bytes(QUANT_Q4_K, 512, &b));
    ck_assert_uint_eq(b, 288);
    ck_assert(!quant_row_bytes(QUANT_Q4_K, 100, &b));        /* not whole blocks */
    ck_assert(!quant_row_bytes(QUANT_Q8_0, UINT64_MAX / 32 * 32, &b));   /* overflows */
    ck_assert(!quant_row_bytes(5, 32, &b));
}
END_TEST

START_TEST(file_types_are_named_as_llama_cpp_names_them)
{
    ck_assert_str_eq(quant_ftype_name(0), "F32");
    ck_assert_str_eq(quant_ftype_name(1), "F16");
    ck_assert_str_eq(quant_ftype_name(7), "Q8_0");
    ck_assert_str_eq(quant_ftype_name(15), "Q4_K_M");
    ck_assert_str_eq(quant_ftype_name(15 | 1024), "Q4_K_M");   /* "guessed" */
    ck_assert_str_eq(quant_ftype_name(14), "Q4_K_S");
    ck_assert_str_eq(quant_ftype_name(18), "Q6_K");
    ck_assert_str_eq(quant_ftype_name(32), "BF16");
    ck_assert_ptr_null(quant_ftype_name(5));
    ck_assert_ptr_null(quant_ftype_name(500));
}
END_TEST

START_TEST(dequantizes_q8_0)
{
    uint8_t b[2 * 34] = {0};
    put16(b, H_HALF);
    const int8_t q[5] = {-128, -1, 0, 1, 127};
    memcpy(b + 2, q, 5);
    put16(b + 34, H_TWO);
    b[34 + 2 + 31] = 3;
    float y[64];
    ck_assert(quant_dequantize_row(QUANT_Q8_0, b, y, 64));
    const float want[5] = {-64, -0.5f, 0, 0.5f, 63.5f};
    for (int j = 0; j < 5; j++)
        ck_assert_float_eq(y[j], want[j]);
    ck_assert_float_eq(y[63], 6.0f);
    ck_assert_float_eq(y[40], 0.0f);
}
END_TEST

START_TEST(dequantizes_q4_0_low_nibbles_first)
{
    uint8_t b[18] = {0};
    put16(b, H_TWO);
    b[2] = 0x1f;            /* j 0: low 15 -> (15-8)*2 = 14; high 1 -> (1-8)*2 = -14 at 16 */
    b[3] = 0x80;            /* j 1: low 0 -> -16; high 8 -> 0 at 17 */
    for (int j = 2; j < 16; j++)
        b[2 + j] = 0x88;    /* zeros */
    float y[32];
    ck_assert(quant_dequantize_row(QUANT_Q4_0, b, y, 32));
    ck_assert_float_eq(y[0], 14.0f);
    ck_assert_float_eq(y[16], -14.0f);
    ck_assert_float_eq(y[1], -16.0f);
    ck_assert_float_eq(y[17], 0.0f);
    for (int j = 2; j < 16; j++) {
        ck_assert_float_eq(y[j], 0.0f);
        ck_assert_float_eq(y[j + 16], 0.0f);
    }
}
END_TEST

START_TEST(dequantizes_q5_0_with_the_fifth_bit)
{
    uint8_t b[22] = {0};
    put16(b, H_ONE);
    uint32_t qh = (1u << 0) | (1u << (16 + 1));   /* bit 0 -> y[0]; bit 17 -> y[17] */
    memcpy(b + 2, &qh, 4);
    b[6] = 0x00;            /* y[0] = (0|16)-16 = 0, y[16] = 0-16 = -16 */
    b[7] = 0xff;            /* y[1] = 15-16 = -1, y[17] = (15|16)-16 = 15 */
    float y[32];
    ck_assert(quant_dequantize_row(QUANT_Q5_0, b, y, 32));
    ck_assert_float_eq(y[0], 0.0f);
    ck_assert_float_eq(y[16], -16.0f);
    ck_assert_float_eq(y[1], -1.0f);
    ck_assert_float_eq(y[17], 15.0f);
    ck_assert_float_eq(y[2], -16.0f);
}
END_TEST

START_TEST(dequantizes_q4_k_with_six_bit_scales_and_mins)
{
    uint8_t b[144] = {0};
    put16(b, H_ONE);                    /* d */
    put16(b + 2, H_HALF);               /* dmin */
    uint8_t *sc = b + 4, *qs = b + 16;
    /* sub-block 0: scale 3, min 2; sub-block 1: scale 5, min 1 (low six bits of bytes s, s+4) */
    sc[0] = 3;
    sc[4] = 2;
    sc[1] = 5;
    sc[5] = 1;
    /* sub-block 4: scale 37 = 0b10_0101, min 49 = 0b11_0001: low nibbles in byte 8, top two bits
     * in the spare bits 6-7 of bytes 0 (scale) and 4 (min) */
    sc[8] = 0x15;
    sc[0] |= 2 << 6;
    sc[4] |= 3 << 6;
    qs[0] = 0x7a;                       /* y[0]: 10 (sub-block 0); y[32]: 7 (sub-block 1) */
    qs[64] = 0x09;                      /* group 2, low nibble: y[128], sub-block 4 */
    float y[256];
    ck_assert(quant_dequantize_row(QUANT_Q4_K, b, y, 256));
    ck_assert_float_eq(y[0], 1.0f * 3 * 10 - 0.5f * 2);      /* 29 */
    ck_assert_float_eq(y[1], -1.0f);                          /* q 0: -dmin * m */
    ck_assert_float_eq(y[32], 1.0f * 5 * 7 - 0.5f * 1);       /* 34.5 */
    ck_assert_float_eq(y[128], 37.0f * 9 - 0.5f * 49);        /* 308.5 */
    ck_assert_float_eq(y[129], -24.5f);
    ck_assert_float_eq(y[64], 0.0f);                          /* sub-block 2: scale 0, min 0 */
}
END_TEST

START_TEST(dequantizes_q6_k_with_signed_scales)
{
    uint8_t b[210] = {0};
    uint8_t *ql = b, *qh = b + 128;
    int8_t *sc = (int8_t *)(b + 192);
    put16(b + 208, H_QUARTER);
    sc[0] = 2; sc[1] = 0; sc[2] = -3; sc[4] = 4; sc[6] = 1; sc[8] = -1;
    ql[0] = 0x21;                       /* y[0] low 1, y[64] high 2 */
    qh[0] = 0xe4;                       /* bits 0-1: 0 (y[0]), 2-3: 1 (y[32]), 4-5: 2 (y[64]),
                                           6-7: 3 (y[96]) */
    ql[32] = 0x0f;                      /* y[32] low 15, y[96] high 0 */
    ql[64] = 0x0f;                      /* second half: y[128] low 15 */
    qh[32] = 0x03;                      /* its high bits 3 */
    float y[256];
    ck_assert(quant_dequantize_row(QUANT_Q6_K, b, y, 256));
    ck_assert_float_eq(y[0], 0.25f * 2 * (1 - 32));           /* -15.5 */
    ck_assert_float_eq(y[32], 0.25f * -3 * ((15 | 16) - 32)); /* 0.75 */
    ck_assert_float_eq(y[64], 0.25f * 4 * ((2 | 32) - 32));   /* 2 */
    ck_assert_float_eq(y[96], 0.25f * 1 * ((0 | 48) - 32));   /* 4 */
    ck_assert_float_eq(y[128], 0.25f * -1 * ((15 | 48) - 32)); /* -7.75 */
    ck_assert_float_eq(y[1], 0.25f * 2 * -32);                /* -16 */
    ck_assert_float_eq(y[16], 0.0f);                          /* sub-block 1: scale 0 */
}
END_TEST

START_TEST(dequantizes_plain_floats_exactly)
{
    uint8_t b[8];
    put16(b, H_HALF);
    put16(b + 2, 0xc000);               /* -2 */
    float y[2];
    ck_assert(quant_dequantize_row(QUANT_F16, b, y, 2));
    ck_assert_float_eq(y[0], 0.5f);
    ck_assert_float_eq(y[1], -2.0f);
    put16(b, 0x3f80);                   /* bf16 1.0 */
    put16(b + 2, 0xc040);               /* bf16 -3.0 */
    ck_assert(quant_dequantize_row(QUANT_BF16, b, y, 2));
    ck_assert_float_eq(y[0], 1.0f);
    ck_assert_float_eq(y[1], -3.0f);
    float f[2] = {1.25f, -7.5f};
    memcpy(b, f, 8);
    ck_assert(quant_dequantize_row(QUANT_F32, b, y, 2));
    ck_assert_float_eq(y[1], -7.5f);
}
END_TEST

START_TEST(refuses_unsupported_types_and_partial_blocks)
{
    uint8_t b[64] = {0};
    float y[64] = {42};
    ck_assert(!quant_dequantize_row(QUANT_Q4_1, b, y, 32));
    ck_assert(!quant_dequantize_row(QUANT_Q8_0, b, y, 31));
    ck_assert(!quant_dequantize_row(5, b, y, 32));
    ck_assert_float_eq(y[0], 42.0f);
}
END_TEST

START_TEST(finds_the_first_block_with_a_nan_or_infinite_scale)
{
    const char *which = NULL;
    uint8_t q8[3 * 34] = {0};
    put16(q8, H_ONE);
    put16(q8 + 34, H_ONE);
    put16(q8 + 68, H_ONE);
    ck_assert_int_eq(quant_row_bad_scale(QUANT_Q8_0, q8, 96, &which), -1);
    put16(q8 + 68, 0xfbff);             /* -65504, the largest finite: fine */
    ck_assert_int_eq(quant_row_bad_scale(QUANT_Q8_0, q8, 96, &which), -1);
    put16(q8 + 68, H_NAN);
    ck_assert_int_eq(quant_row_bad_scale(QUANT_Q8_0, q8, 96, &which), 2);
    ck_assert_str_eq(which, "d");

    uint8_t k4[2 * 144] = {0};
    put16(k4 + 144 + 2, H_INF);         /* block 1's dmin */
    ck_assert_int_eq(quant_row_bad_scale(QUANT_Q4_K, k4, 512, &which), 1);
    ck_assert_str_eq(which, "dmin");

    uint8_t k6[210] = {0};
    put16(k6, H_NAN);                   /* ql, not a scale: fine */
    ck_assert_int_eq(quant_row_bad_scale(QUANT_Q6_K, k6, 256, &which), -1);
    put16(k6 + 208, 0xfc00);            /* -inf */
    ck_assert_int_eq(quant_row_bad_scale(QUANT_Q6_K, k6, 256, &which), 0);

    uint8_t f16[2];
    put16(f16, H_NAN);                  /* no scales to check in plain floats */
    ck_assert_int_eq(quant_row_bad_scale(QUANT_F16, f16, 1, &which), -1);
}
END_TEST

int main(void)
{
    return tu_run_tests("quant", TU_TESTS(
            names_sizes_and_support_follow_ggml, file_types_are_named_as_llama_cpp_names_them,
            dequantizes_q8_0, dequantizes_q4_0_low_nibbles_first,
            dequantizes_q5_0_with_the_fifth_bit, dequantizes_q4_k_with_six_bit_scales_and_mins,
            dequantizes_q6_k_with_signed_scales, dequantizes_plain_floats_exactly,
            refuses_unsupported_types_and_partial_blocks,
            finds_the_first_block_with_a_nan_or_infinite_scale));
}
