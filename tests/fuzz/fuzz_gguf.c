/* fuzz_gguf.c: GGUF bytes into gguf_open_buffer, the validation gguf_open runs over the mapped
 * file. Invariant: a file the validator accepts has every tensor inside the buffer at an aligned
 * offset after the header, nbytes matching its type and shape, no two non-empty tensors
 * overlapping, every key and tensor found by name, every array element readable (ASan watches),
 * and every supported tensor's rows dequantizable; a refused file leaves nothing behind and says
 * why, naming the file. */
#include <string.h>

#include "core/model/gguf.h"
#include "tests/fuzz/fuzzutil.h"

typedef struct {
    const uint8_t *begin, *end;
} span;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static void touch_kv(const gguf_file *f, const gguf_kv *kv)
{
    volatile uint8_t sink = 0;
    FUZZ_CHECK(gguf_find_kv(f, kv->key) == kv, "key %s not found by name", kv->key);
    if (kv->type == GGUF_TYPE_STRING)
        for (uint64_t i = 0; i < kv->str.len; i++)
            sink ^= (uint8_t)kv->str.ptr[i];
    if (kv->type == GGUF_TYPE_ARRAY) {
        const gguf_array *a = &kv->arr;
        FUZZ_CHECK(a->type != GGUF_TYPE_ARRAY, "%s: nested array accepted", kv->key);
        for (uint64_t i = 0; i < a->n; i++) {
            if (a->type == GGUF_TYPE_STRING) {
                gguf_str s = gguf_array_str(a, i);
                for (uint64_t k = 0; k < s.len; k++)
                    sink ^= (uint8_t)s.ptr[k];
            } else if (a->type == GGUF_TYPE_FLOAT32) {
                float x = gguf_array_f32(a, i);     /* any bits: NaN, inf, -1 */
                uint32_t bits;
                memcpy(&bits, &x, 4);
                sink ^= (uint8_t)bits;
            } else if (a->type == GGUF_TYPE_INT32) {
                sink ^= (uint8_t)gguf_array_i32(a, i);
            }
        }
    }
    uint32_t u;
    float x;
    gguf_str s;
    tt_error err = {0};
    (void)gguf_get_u32(f, kv->key, &u, &err);
    (void)gguf_get_f32(f, kv->key, &x, &err);
    (void)gguf_get_string(f, kv->key, &s, &err);
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gguf_file *f = NULL;
    tt_error err = {0};
    if (gguf_open_buffer(data, size, "fuzz.gguf", &f, &err) != TT_OK) {
        FUZZ_CHECK(f == NULL, "a refused file was returned");
        FUZZ_CHECK(err.msg[0] != 0, "refused without a message");
        FUZZ_CHECK(strncmp(err.msg, "fuzz.gguf: ", 11) == 0, "message without the name: %s",
                   err.msg);
        return 0;
    }
    for (size_t i = 0; i < gguf_kv_count(f); i++)
        touch_kv(f, gguf_kv_at(f, i));
    const uint8_t *lo = data + gguf_data_offset(f), *hi = data + size;
    size_t n = gguf_tensor_count(f);
    span *spans = malloc((n ? n : 1) * sizeof *spans);
    FUZZ_CHECK(spans != NULL, "out of memory");
    size_t m = 0;
    volatile uint8_t sink = 0;
    float *row = NULL;
    for (size_t i = 0; i < n; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        FUZZ_CHECK(t->n_dims >= 1 && t->n_dims <= GGUF_MAX_DIMS, "n_dims %d", t->n_dims);
        uint64_t numel = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];  /* cannot wrap: checked */
        FUZZ_CHECK(numel == t->numel, "%s: numel", t->name);
        uint64_t nbytes = 0;
        FUZZ_CHECK(quant_row_bytes(t->type, numel, &nbytes) && nbytes == t->nbytes,
                   "%s: nbytes %llu", t->name, (unsigned long long)t->nbytes);
        const uint8_t *b = t->data;
        FUZZ_CHECK(t->offset % gguf_alignment(f) == 0, "%s: misaligned", t->name);
        FUZZ_CHECK(b >= lo && b <= hi && t->nbytes <= (uint64_t)(hi - b), "%s: outside the data",
                   t->name);
        for (uint64_t k = 0; k < t->nbytes; k++)
            sink ^= b[k];
        if (t->nbytes)
            spans[m++] = (span){b, b + t->nbytes};
        FUZZ_CHECK(gguf_find_tensor(f, t->name) == t, "%s: not found by name", t->name);
        /* What a loader does next: the check, then every row read as floats. */
        if (gguf_tensor_check(f, t->name, t->n_dims, t->ne, NULL, &err) == TT_OK &&
            t->ne[0] <= 4096) {
            row = realloc(row, (t->ne[0] ? t->ne[0] : 1) * sizeof *row);
            FUZZ_CHECK(row != NULL, "out of memory");
            for (uint64_t r = 0; t->ne[0] && r < t->numel / t->ne[0]; r++)
                FUZZ_CHECK(quant_dequantize_row(t->type, gguf_tensor_row(t, r), row, t->ne[0]),
                           "%s: row %llu", t->name, (unsigned long long)r);
        }
    }
    qsort(spans, m, sizeof *spans, cmp_span);
    for (size_t i = 1; i < m; i++)
        FUZZ_CHECK(spans[i].begin >= spans[i - 1].end, "tensors overlap at byte %td",
                   spans[i].begin - data);
    (void)gguf_architecture(f);
    (void)gguf_parameter_count(f);
    FUZZ_CHECK(gguf_quantization(f)[0] != 0, "no quantization name");
    (void)sink;
    free(row);
    free(spans);
    gguf_close(f);
    return 0;
}
