/* gguf_info.c: prints what core/model/gguf.c reads from GGUF files: version, alignment, the
 * listing's summary, every key/value (arrays by type and length, with their first elements) and
 * every tensor (type, shape, offset), then checks every tensor as a loader would (supported type,
 * finite block scales) and dequantizes each supported row. Exit status 1 when a file is refused
 * or a tensor fails its check.
 *
 *     build/tools/gguf_info FILE.gguf... [--quiet]     (--quiet: the summary and problems only) */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/model/gguf.h"

static void print_str(gguf_str s, size_t max)
{
    putchar('"');
    for (uint64_t i = 0; i < s.len && i < max; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        if (c == '\n')
            fputs("\\n", stdout);
        else if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    printf(s.len > max ? "\"... (%llu bytes)" : "\"", (unsigned long long)s.len);
}

/* Bytes of a scalar of type t (not a string or an array). */
static size_t scalar_size(gguf_type t)
{
    switch (t) {
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    default: return 1;
    }
}

static void print_scalar(gguf_type t, const uint8_t *v)
{
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            float f32; uint64_t u64; int64_t i64; double f64; } x;
    memcpy(&x, v, scalar_size(t));
    switch (t) {
    case GGUF_TYPE_UINT8: printf("%u", x.u8); break;
    case GGUF_TYPE_INT8: printf("%d", x.i8); break;
    case GGUF_TYPE_UINT16: printf("%u", x.u16); break;
    case GGUF_TYPE_INT16: printf("%d", x.i16); break;
    case GGUF_TYPE_UINT32: printf("%u", x.u32); break;
    case GGUF_TYPE_INT32: printf("%d", x.i32); break;
    case GGUF_TYPE_FLOAT32: printf("%g", x.f32); break;
    case GGUF_TYPE_BOOL: printf("%s", x.u8 ? "true" : "false"); break;
    case GGUF_TYPE_UINT64: printf("%llu", (unsigned long long)x.u64); break;
    case GGUF_TYPE_INT64: printf("%lld", (long long)x.i64); break;
    case GGUF_TYPE_FLOAT64: printf("%g", x.f64); break;
    default: printf("?"); break;
    }
}

static int info(const char *path, bool quiet)
{
    gguf_file *f = NULL;
    tt_error err = {0};
    if (gguf_open(path, &f, &err) != TT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("%s: GGUF v%u, %s, %s, %llu parameters, %zu tensors, %zu keys, alignment %u, data "
           "at %llu\n", path, gguf_version(f), gguf_architecture(f), gguf_quantization(f),
           (unsigned long long)gguf_parameter_count(f), gguf_tensor_count(f), gguf_kv_count(f),
           gguf_alignment(f), (unsigned long long)gguf_data_offset(f));
    for (size_t i = 0; !quiet && i < gguf_kv_count(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        printf("  %-40s %-8s ", kv->key, gguf_type_name(kv->type));
        if (kv->type == GGUF_TYPE_STRING) {
            print_str(kv->str, 60);
        } else if (kv->type == GGUF_TYPE_ARRAY) {
            printf("[%llu x %s]", (unsigned long long)kv->arr.n, gguf_type_name(kv->arr.type));
            for (uint64_t k = 0; k < kv->arr.n && k < 4; k++) {
                putchar(' ');
                if (kv->arr.type == GGUF_TYPE_STRING)
                    print_str(gguf_array_str(&kv->arr, k), 20);
                else
                    print_scalar(kv->arr.type, kv->arr.data + k * scalar_size(kv->arr.type));
            }
        } else {
            print_scalar(kv->type, kv->value);
        }
        putchar('\n');
    }
    int bad = 0;
    size_t counts[QUANT_TYPE_END] = {0};
    float *row = NULL;
    for (size_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        char shape[96];
        counts[t->type]++;
        if (!quiet)
            printf("  %-32s %-6s %-22s offset %llu\n", t->name, quant_type_name(t->type),
                   gguf_shape_str(t->ne, t->n_dims, shape, sizeof shape),
                   (unsigned long long)t->offset);
        if (gguf_tensor_check(f, t->name, t->n_dims, t->ne, NULL, &err) != TT_OK) {
            printf("  problem: %s\n", err.msg);
            bad = 1;
            continue;
        }
        float *grown = realloc(row, (t->ne[0] ? t->ne[0] : 1) * sizeof *row);
        if (!grown) {
            fprintf(stderr, "%s: out of memory\n", path);
            bad = 1;
            break;
        }
        row = grown;
        for (uint64_t r = 0; t->ne[0] && r < t->numel / t->ne[0]; r++)
            quant_dequantize_row(t->type, gguf_tensor_row(t, r), row, t->ne[0]);
    }
    printf("  tensor types:");
    for (int t = 0; t < QUANT_TYPE_END; t++)
        if (counts[t])
            printf(" %s %zu", quant_type_name((uint32_t)t), counts[t]);
    printf("; every supported tensor %s\n", bad ? "checked, with problems above"
                                                 : "checked and dequantized");
    free(row);
    gguf_close(f);
    return bad;
}

int main(int argc, char **argv)
{
    bool quiet = false;
    int status = 0, files = 0;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--quiet") == 0)
            quiet = true;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quiet") == 0)
            continue;
        files++;
        status |= info(argv[i], quiet);
    }
    if (!files) {
        fprintf(stderr, "usage: gguf_info FILE.gguf... [--quiet]\n");
        return 2;
    }
    return status;
}
