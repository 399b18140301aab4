/* kernels_gguf.c: GGUF weight matrices held as the file stores them (TT_GGUF, kernels.h): their
 * description, the scalar view of one block of 32 weights, and the portable reference matmul.
 * The SIMD sets' kernels are core/cpu/kernels_gguf_simd.h (quantized rows) and
 * core/cpu/kernels_gguf_f16.h (F16 and BF16 rows). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/cpu/kernels.h"
#include "core/cpu/kernels_gguf_block.h"
#include "core/model/quant.h"

bool packed_gguf_type_ok(uint32_t t, int K)
{
    switch (t) {
    case QUANT_Q8_0: case QUANT_Q4_0: case QUANT_Q5_0: return K > 0 && K % QUANT_QK == 0;
    case QUANT_Q4_K: case QUANT_Q6_K: return K > 0 && K % QUANT_QK_K == 0;
    case QUANT_F16: case QUANT_BF16: return K > 0;
    default: return false;
    }
}

void packed_matrix_gguf(packed_matrix *m, int K, const tensor_ref *src, const int *cols,
                        int n_parts)
{
    memset(m, 0, sizeof *m);
    m->dtype = TT_GGUF;
    m->K = K;
    for (int i = 0; i < n_parts && i < KERNELS_GGUF_PARTS; i++) {
        const uint32_t type = packed_gguf_tensor_type(&src[i]);
        uint64_t rb = 2 * (uint64_t)K;              /* F16, BF16 */
        if (src[i].quantized)
            quant_row_bytes(type, (uint64_t)K, &rb);
        m->parts[i] = (packed_gguf_part){.data = src[i].data, .type = type,
                                         .N = cols[i], .row_bytes = (size_t)rb,
                                         .head_rows = src[i].head_rows};
        m->N += cols[i];
        m->n_parts++;
    }
    m->n_panels = (m->N + KERNELS_NR - 1) / KERNELS_NR;
    m->panel_elems = m->parts[0].row_bytes * KERNELS_NR;
}

uint32_t packed_gguf_tensor_type(const tensor_ref *t)
{
    if (t->quantized)
        return t->quant;
    return t->dtype == TT_F16 ? QUANT_F16 : t->dtype == TT_BF16 ? QUANT_BF16 : QUANT_F32;
}

bool packed_gguf_is_float(const packed_matrix *m)
{
    return m->dtype == TT_GGUF && m->n_parts > 0 &&
           (m->parts[0].type == QUANT_F16 || m->parts[0].type == QUANT_BF16);
}

bool kernels_reads_xb(const kernels *k, const packed_matrix *w)
{
    if (w->dtype == TT_BF16)
        return k->bf16_rows != NULL;
    return k->gguf_bf16_rows && packed_gguf_is_float(w) && w->parts[0].type == QUANT_BF16;
}

/* Row n of part pt in the file. */
static const uint8_t *part_file_row(const packed_gguf_part *pt, int n)
{
    size_t r = (size_t)n;
    if (pt->head_rows) {            /* as tensor_ref_row: rotate-half row r is stored at ... */
        const size_t hs = (size_t)pt->head_rows, half = hs / 2, in = r % hs;
        r = r - in + 2 * (in % half) + in / half;
    }
    return (const uint8_t *)pt->data + r * pt->row_bytes;
}

/* The part output column n lies in, n made relative to it. */
static const packed_gguf_part *part_of(const packed_matrix *m, int *n)
{
    int i = 0;
    while (i + 1 < m->n_parts && *n >= m->parts[i].N)
        *n -= m->parts[i++].N;
    return &m->parts[i];
}

const uint8_t *packed_gguf_row(const packed_matrix *m, int n, uint32_t *type)
{
    const packed_gguf_part *pt = part_of(m, &n);
    *type = pt->type;
    return pt->groups ? NULL : part_file_row(pt, n);
}

bool packed_gguf_groupable(const packed_matrix *m, int i)
{
    const packed_gguf_part *pt = &m->parts[i];
    return m->dtype == TT_GGUF && i < m->n_parts &&
           (pt->type == QUANT_Q4_K || pt->type == QUANT_Q6_K || pt->type == QUANT_Q4_0 ||
            pt->type == QUANT_Q5_0) &&
           pt->N % KERNELS_GGUF_GROUP == 0;
}

bool packed_gguf_group_alloc(packed_matrix *m, int i, weight_arena *arena)
{
    packed_gguf_part *pt = &m->parts[i];
    const size_t bytes = gguf_group_stride(pt->row_bytes) * (size_t)(pt->N / KERNELS_GGUF_GROUP);
    pt->groups = arena ? weight_arena_alloc(arena, bytes) : aligned_alloc(64, bytes);
    if (pt->groups && arena)
        m->in_arena = true;
    return pt->groups != NULL;
}

/* Group g of a Q4_0 or Q5_0 part, a block of its 16 rows at a time (gguf_gq0_put), each row's
 * reads prefetched 8 blocks ahead (16 streams). */
static void group_q0(const packed_gguf_part *pt, int g, size_t KB)
{
    const uint8_t *rows[KERNELS_GGUF_GROUP], *blk[KERNELS_GGUF_GROUP];
    for (int r = 0; r < KERNELS_GGUF_GROUP; r++)
        rows[r] = part_file_row(pt, KERNELS_GGUF_GROUP * g + r);
    uint8_t *grp = pt->groups + (size_t)g * gguf_group_stride(pt->row_bytes);
    const size_t unit = gguf_group_unit_bytes(pt->type);
    for (size_t b = 0; b < KB; b++) {
        for (int r = 0; r < KERNELS_GGUF_GROUP; r++) {
            blk[r] = rows[r] + b * unit;
            __builtin_prefetch(blk[r] + 8 * unit);
        }
        gguf_gq0_put(pt->type, grp, KB, b, blk);
    }
}

void packed_gguf_group(packed_matrix *m, int i, int g0, int g1)
{
    packed_gguf_part *pt = &m->parts[i];
    const size_t sb_bytes = gguf_group_unit_bytes(pt->type), SB = pt->row_bytes / sb_bytes;
#ifdef MADV_POPULATE_WRITE
    {
        /* the fresh pages in one call, not one fault each (a hint: failure only costs time) */
        const size_t stride = gguf_group_stride(pt->row_bytes), page = 4096;
        const uintptr_t a = ((uintptr_t)pt->groups + (size_t)g0 * stride + page - 1) & ~(page - 1),
                        e = ((uintptr_t)pt->groups + (size_t)g1 * stride) & ~(page - 1);
        if (e > a)
            madvise((void *)a, e - a, MADV_POPULATE_WRITE);
    }
#endif
    if (pt->type == QUANT_Q4_0 || pt->type == QUANT_Q5_0) {
        for (int g = g0; g < g1; g++)
            group_q0(pt, g, SB);
        return;
    }
    for (int g = g0; g < g1; g++)
        for (int r = 0; r < KERNELS_GGUF_GROUP; r++) {
            uint8_t *row = (uint8_t *)part_file_row(pt, KERNELS_GGUF_GROUP * g + r);
            for (size_t s = 0; s < SB; s++)
                gguf_group_copy(pt->type, pt->groups + (size_t)g * gguf_group_stride(pt->row_bytes),
                                SB, s, r, row + s * sb_bytes, -1);
        }
}

/* Row n's unit s (super-block or block: gguf_group_unit_bytes) of a regrouped part, as the
 * file has it, into sb. */
static void part_group_unit(const packed_gguf_part *pt, int n, size_t s, uint8_t sb[210])
{
    gguf_group_copy(pt->type,
                    pt->groups + (size_t)(n / KERNELS_GGUF_GROUP) * gguf_group_stride(pt->row_bytes),
                    pt->row_bytes / gguf_group_unit_bytes(pt->type), s, n % KERNELS_GGUF_GROUP, sb,
                    1);
}

void packed_gguf_row_f32(const packed_matrix *m, int n, float *y)
{
    const packed_gguf_part *pt = part_of(m, &n);
    if (!pt->groups) {
        quant_dequantize_row(pt->type, part_file_row(pt, n), y, (uint64_t)m->K);
        return;
    }
    const size_t per = gguf_group_unit_weights(pt->type);
    uint8_t sb[210];
    for (size_t s = 0; s < (size_t)m->K / per; s++) {
        part_group_unit(pt, n, s, sb);
        quant_dequantize_row(pt->type, sb, y + per * s, per);
    }
}

void packed_gguf_block(const packed_matrix *m, int n, int b, int8_t q[32], float *D_lo,
                       float *D_hi, float *M)
{
    const packed_gguf_part *pt = part_of(m, &n);
    if (!pt->groups) {
        gguf_block_scalar(pt->type, part_file_row(pt, n), b, q, D_lo, D_hi, M);
        return;
    }
    /* the row's super-block (or block) as the file has it, from the group */
    const int per = (int)(gguf_group_unit_weights(pt->type) / 32);   /* blocks a unit */
    uint8_t sb[210];
    part_group_unit(pt, n, (size_t)(b / per), sb);
    gguf_block_scalar(pt->type, sb, b % per, q, D_lo, D_hi, M);
}

/* One output: the chain kernels.h describes, in scalar fp32 (fmaf, so no contraction changes
 * it). */
static float ref_gguf_dot(const packed_matrix *m, int n, const kernels_q8_act *xq, int KB)
{
    float c = 0.0f;
    for (int b = 0; b < KB; b++) {
        int8_t q[32];
        float dlo, dhi, mm;
        packed_gguf_block(m, n, b, q, &dlo, &dhi, &mm);
        int32_t lo = 0, hi = 0;
        for (int k = 0; k < 16; k++) {
            lo += q[k] * xq[b].q[k];
            hi += q[k + 16] * xq[b].q[k + 16];
        }
        float v = (float)lo * dlo;
        v = fmaf((float)hi, dhi, v);
        v = fmaf((float)(xq[b].sum128 / 128), mm, v);
        c = fmaf(xq[b].d, v, c);
    }
    return c;
}

/* Element k of an F16 or BF16 row, widened (exact). */
static float float_row_elem(uint32_t type, const uint8_t *row, int k)
{
    uint16_t h;
    memcpy(&h, row + 2 * (size_t)k, 2);
    return type == QUANT_F16 ? tt_f16_to_f32(h) : tt_bf16_to_f32(h);
}

/* One output of an F16 or BF16 row against fp32 activations x: the chain kernels.h describes,
 * the SIMD sets' 16 lanes one scalar each (fmaf), then their fixed reduction tree. */
static float ref_float_dot(uint32_t type, const uint8_t *row, const float *x, int K)
{
    float lane[KERNELS_GGUF_LANES] = {0};
    for (int k0 = 0; k0 < K; k0 += KERNELS_GGUF_LANES)
        for (int j = 0; j < KERNELS_GGUF_LANES; j++) {
            const int k = k0 + j;   /* past K: 0 * 0 added, as the sets' zero-filled tail */
            lane[j] = fmaf(k < K ? float_row_elem(type, row, k) : 0.0f, k < K ? x[k] : 0.0f,
                           lane[j]);
        }
    float s8[8], s4[4], s2[2];
    for (int i = 0; i < 8; i++)
        s8[i] = lane[i] + lane[i + 8];
    for (int i = 0; i < 4; i++)
        s4[i] = s8[i] + s8[i + 4];
    for (int i = 0; i < 2; i++)
        s2[i] = s4[i] + s4[i + 2];
    return s2[0] + s2[1];
}

void kernels_gguf_ref_matmul(const matmul_args *a, int p0, int p1,
                             void (*finish)(const matmul_args *, int, int, int, const float *))
{
    const packed_matrix *w = a->w;
    const int KB = w->K / TT_Q8_BLOCK;
    for (int p = p0; p < p1; p++) {
        const int n0 = p * KERNELS_NR;
        const int nc = w->N - n0 < KERNELS_NR ? w->N - n0 : KERNELS_NR;
        for (int t = 0; t < a->T; t++) {
            float acc[KERNELS_NR];
            for (int j = 0; j < nc; j++) {
                uint32_t type;
                const uint8_t *row = packed_gguf_row(w, n0 + j, &type);
                if (type == QUANT_F16 || type == QUANT_BF16)
                    acc[j] = ref_float_dot(type, row, a->x + (size_t)t * (size_t)a->ldx, w->K);
                else
                    acc[j] = ref_gguf_dot(w, n0 + j, a->xq + (size_t)t * (size_t)a->ldxq, KB);
            }
            finish(a, t, n0, nc, acc);
        }
    }
}

float kernels_gguf_get(const packed_matrix *m, int k, int n)
{
    if (packed_gguf_is_float(m)) {
        uint32_t type;
        const uint8_t *row = packed_gguf_row(m, n, &type);
        return float_row_elem(type, row, k);
    }
    int8_t q[32];
    float dlo, dhi, mm;
    packed_gguf_block(m, n, k / 32, q, &dlo, &dhi, &mm);
    int i = k % 32;
    return (i < 16 ? dlo : dhi) * (float)q[i] + mm;
}
