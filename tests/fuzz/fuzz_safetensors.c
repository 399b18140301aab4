/* fuzz_safetensors.c: model.safetensors bytes into safetensors_open_buffer, the validation
 * safetensors_open runs over the mapped file. Invariant: a file the validator accepts has every
 * tensor inside the data section, nbytes = numel x element size, no two non-empty tensors
 * overlapping, and every name found by safetensors_find. */
#include <string.h>

#include "core/model/safetensors.h"
#include "tests/fuzz/fuzzutil.h"

typedef struct {
    const uint8_t *begin, *end;
} span;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    safetensors_file *f = NULL;
    tt_error err = {0};
    if (safetensors_open_buffer(data, size, "fuzz.safetensors", &f, &err) != TT_OK) {
        FUZZ_CHECK(f == NULL, "a refused file was returned");
        FUZZ_CHECK(err.msg[0] != 0, "refused without a message");
        FUZZ_CHECK(strncmp(err.msg, "fuzz.safetensors", 16) == 0, "message without the name: %s",
                   err.msg);
        return 0;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | data[i];
    const uint8_t *lo = data + 8 + hlen, *hi = data + size;
    size_t n = safetensors_count(f);
    span *spans = malloc((n ? n : 1) * sizeof *spans);
    FUZZ_CHECK(spans != NULL, "out of memory");
    size_t m = 0;
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < n; i++) {
        const st_tensor *t = safetensors_at(f, i);
        FUZZ_CHECK(t->ndim >= 0 && t->ndim <= ST_MAX_DIMS, "ndim %d", t->ndim);
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++)
            numel *= t->shape[d];   /* the validator refused overflow, so this cannot wrap */
        FUZZ_CHECK(numel == t->numel, "%s: numel %llu, shape gives %llu", t->name,
                   (unsigned long long)t->numel, (unsigned long long)numel);
        FUZZ_CHECK(t->nbytes == numel * st_dtype_size(t->dtype), "%s: nbytes %llu", t->name,
                   (unsigned long long)t->nbytes);
        const uint8_t *b = t->data;
        FUZZ_CHECK(b >= lo && b <= hi && t->nbytes <= (uint64_t)(hi - b),
                   "%s: [%td, +%llu) outside the data section [%td, %td)", t->name, b - data,
                   (unsigned long long)t->nbytes, lo - data, hi - data);
        for (uint64_t k = 0; k < t->nbytes; k++)
            sink ^= b[k];               /* ASan sees any byte outside the input */
        if (t->nbytes)
            spans[m++] = (span){b, b + t->nbytes};
        FUZZ_CHECK(safetensors_find(f, t->name) == t, "%s: not found by name", t->name);
    }
    qsort(spans, m, sizeof *spans, cmp_span);
    for (size_t i = 1; i < m; i++)
        FUZZ_CHECK(spans[i].begin >= spans[i - 1].end, "tensors overlap at byte %td",
                   spans[i].begin - data);
    (void)sink;
    free(spans);
    safetensors_close(f);
    return 0;
}
