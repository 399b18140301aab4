/* kernels.h: the CPU backend's compute kernels: packed weight matrices, the portable reference
 * kernels and the SIMD sets chosen at run time (kernels_avx512.c, kernels_vnni_avx512.c,
 * kernels_bf16_avx512.c, kernels_amx_avx512.c, kernels_avx2.c).
 *
 * Every set computes in fp32 and accumulates in fp32 whatever the dtype the weights are held in,
 * except Q8, whose block sums are exact integer dot products (below), and the amx and avx512bf16
 * sets' BF16 matmuls, which multiply activations rounded to bf16 (below);
 * the sets differ in speed and in rounding order (tests/check_kernels.c holds them to a
 * tolerance). The reference set is plain C that any compiler can run; it is also what
 * TOKENTOP_KERNELS=reference forces, so a test can compare both paths through the whole engine.
 *
 * Batch invariance, in every set: the result for one row (one token) is the same bits whatever
 * other rows are computed in the same call, whatever its row offset, and however the callers
 * split panels or heads among threads. Each matmul output is one sum over k in a fixed order, and
 * each attention row computes its scores, softmax and weighted sum in a fixed order, whether it
 * is alone (decode) or in a tile (prefill). Speculative verification, prefix reuse across turns
 * and scoring rely on it: a position's logits do not depend on how it was computed. */
#ifndef TOKENTOP_KERNELS_H
#define TOKENTOP_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/dtype.h"
#include "core/model/model.h"
#include "core/base/status.h"
#include "core/cpu/weight_arena.h"

/* ---------------------------------------------------------------------------------------------
 * Packed weights
 *
 * A weight matrix W (K, N) multiplies activations from the right, y = x W, as GPT-2's Conv1D
 * does (c_attn, c_proj, c_fc are stored [in, out] = [K, N]; the lm_head is wte (V, C) used
 * transposed, K = C, N = V). Packed, W is a row of ceil(N / 32) panels of 32 output columns each,
 * the columns past N zero-filled, every panel 64-byte aligned and contiguous, so one pass over the
 * matrix is one sequential stream and a panel's k-th row is one or two cache lines:
 *   F32, F16: panel (K, 32)              element (k, j) at k * 32 + j
 *   BF16:     panel (K2 / 2, 32, 2)      element (k, j) at (k / 2) * 64 + j * 2 + k % 2
 *             (K2 = K rounded up to even, the odd row zero) -- pairs along k share a 32-bit lane,
 *             so a shift and a mask turn them into fp32, and it is the operand vdpbf16ps takes.
 *   Q8:       panel (KB, KERNELS_Q8_BLOCK_BYTES) bytes, KB = ceil(K / 32) blocks of 32 k rows:
 *             32 fp16 scales s[j] (one per column, 64 bytes), then 1024 bytes of integers q + 128
 *             (unsigned: the operand vpdpbusd multiplies unsigned) in groups of 4 along k: byte
 *             (k % 32 / 4) * 128 + j * 4 + k % 4, so one 32-bit lane holds 4 consecutive k of one
 *             column (the rows past K hold q = 0). Element (k, j) is q * s. Packing picks
 *             s = fp16(max |w| / 127) over the block's 32 k of a column and q = round-to-nearest
 *             (w / s) in [-127, 127] (llama.cpp's Q8_0 per column).
 *             A Q8 matmul quantizes the activations too (kernels_quantize_rows: each row's blocks
 *             of 32 to 8 bits with one fp32 scale d, as llama.cpp's Q8_0 dot products do) and
 *             computes, per output (t, j), from c = 0 over the blocks b ascending:
 *                 c = fma(s[b][j] * d[t][b], (float)sum_{k in b} q[k][j] xq[t][k], c)
 *             then bias and epilogue. The integer block sums are exact (|sum| < 2^24, so the
 *             conversion is exact too) whatever order or instruction computes them (vpdpbusd,
 *             vpmaddubsw, scalar), so every set gives the same bits, and one row's result never
 *             depends on the rows beside it.
 * Decode (one row) streams it once as a GEMV; prefill (T rows) reuses each panel for all T rows. */
#define KERNELS_NR 32
#define KERNELS_Q8_BLOCK_BYTES (KERNELS_NR * 2 + TT_Q8_BLOCK * KERNELS_NR)

/* Panels a one-row matmul (decode) streams side by side, for the instruction-level parallelism
 * its one FMA chain per output lane lacks: a caller that splits such a matmul into panel ranges
 * should cut them at multiples of this (other cuts give the same results, more slowly). */
#define KERNELS_GEMV_PANELS 4

/* Panels a many-row fp32 matmul (a prefill) computes side by side, for the loads a wider tile
 * saves: a caller that splits such a matmul into panel ranges should cut them at multiples of
 * this (other cuts give the same results, more slowly). */
#define KERNELS_ROWS_PANELS 2

/* Floats of per-thread scratch an attention call over keys 0 .. n-1 may use (scores of a tile of
 * up to 8 query rows). */
#define KERNELS_ATTN_SCRATCH(n) ((size_t)8 * (size_t)(n))

/* Floats of per-thread scratch a matmul over K rows may use (one panel widened to fp32). */
#define KERNELS_MATMUL_SCRATCH(K) ((size_t)((K) + 1) * KERNELS_NR)

/* GGUF weights held as the file stores them (TT_GGUF): not packed at all. GGUF keeps a matrix
 * (N, K): output column n is row n, K / block_size ggml blocks laid end to end (quant.h), so one
 * output is one pass along one row. A TT_GGUF matrix is up to three such tensors side by side
 * (q | k | v, gate | up), each with its own block type, read in place from the mapping (nothing
 * is copied: resident memory is the file's pages). Its "panels" are runs of 32 output columns,
 * the unit callers split the work by. Its matmul quantizes the activations to 8 bits in blocks of
 * 32 (kernels_quantize_rows, as for Q8) and computes, per output (t, n), from c = 0 over the
 * weight row's blocks of 32 b ascending, with the block's weights w[k] = D * q[k] + M (q small
 * integers, D and M floats from the block's scales; Q6_K has a second D for its second 16):
 *     c += d[t][b] * (D_lo * sum_{k < 16} q[k] xq[t][k] + D_hi * sum_{k >= 16} ... + M * sum xq)
 * the integer sums exact. The sets add these terms in their own order (the reference scalar,
 * SIMD lane-wise then a horizontal sum), so their bits differ by rounding, and every row runs
 * the same chain however many rows come with it (batch invariance).
 * F16 and BF16 rows (a float file's matrices) take fp32 activations as they are, not quantized:
 * per output (t, n), 16 lane sums l[j] = fma chains over k = j, j + 16, j + 32, ... ascending of
 * w[k] * x[t][k] (the weights widened exactly; k past K adds 0 * 0), then one fixed reduction
 *     s8[i] = l[i] + l[i + 8],  s4[i] = s8[i] + s8[i + 4],  s2[i] = s4[i] + s4[i + 2],
 *     y = s2[0] + s2[1]
 * then bias and epilogue. Every set (AVX-512: one 16-lane vector, AVX2: two of 8, the reference:
 * 16 scalars) computes exactly this, so all give the same bits, whatever the rows beside; but
 * BF16 rows in a set with gguf_bf16_rows (avx512bf16) take bf16 activations, on vdpbf16ps (the
 * chain is there). */
#define KERNELS_GGUF_PARTS 3
#define KERNELS_GGUF_LANES 16

typedef struct {
    const void *data;        /* row 0 of the tensor, in the model's mapping (not owned) */
    uint32_t type;           /* a quant_type with a kernel: Q8_0, Q4_0, Q5_0, Q4_K, Q6_K, or
                                F16, BF16 (then every part of the matrix is that one type) */
    int N;                   /* output columns (rows of the tensor) */
    size_t row_bytes;
    int head_rows;           /* 0, or HS: llama.cpp's adjacent-pair order of q/k rows
                                (tensor_ref.head_rows), undone on reading */
    uint8_t *groups;         /* NULL, or the rows regrouped (packed_gguf_group), owned (unless
                                the matrix's in_arena): then data is no longer read */
} packed_gguf_part;

typedef struct {
    void *data;              /* (n_panels, panel_elems) in dtype, owned (unless in_arena);
                                64-byte aligned; NULL for TT_GGUF */
    tt_dtype dtype;
    int K, N;
    int n_panels;            /* ceil(N / 32) */
    size_t panel_elems;      /* K * 32, K2 * 32 for BF16, KB * KERNELS_Q8_BLOCK_BYTES for Q8;
                                for TT_GGUF the bytes of 32 rows of its first part */
    packed_gguf_part parts[KERNELS_GGUF_PARTS];   /* TT_GGUF: parts[0 .. n_parts) */
    int n_parts;
    bool in_arena;           /* data and groups belong to a weight_arena, freed with it */
} packed_matrix;

/* Whether a GGUF tensor of quant type t can be held as stored (TT_GGUF) with K weights a row:
 * Q8_0, Q4_0, Q5_0 (K a multiple of 32), Q4_K, Q6_K (of 256), F16 and BF16 (any K). */
bool packed_gguf_type_ok(uint32_t t, int K);

/* The quant_type of a bound tensor: its quant when quantized, else QUANT_F16, QUANT_BF16 or
 * QUANT_F32 after its dtype. */
uint32_t packed_gguf_tensor_type(const tensor_ref *t);

/* Whether m is a TT_GGUF matrix of F16 or BF16 rows: its matmul reads matmul_args.x, not xq. */
bool packed_gguf_is_float(const packed_matrix *m);

/* A TT_GGUF (K, N) matrix over n_parts tensors bound from a GGUF file (each of a type
 * packed_gguf_type_ok takes, stored (N_i, K); all quantized or all one float type), side by side in the given order: borrows their
 * data, which must outlive m. packed_matrix_free is safe on it. */
void packed_matrix_gguf(packed_matrix *m, int K, const tensor_ref *src, const int *cols,
                        int n_parts);

struct matmul_args;

/* The reference set's TT_GGUF matmul (kernels_gguf.c): panels [p0, p1), each row's outputs
 * handed to finish(a, t, n0, nc, acc) for bias and epilogue. */
void kernels_gguf_ref_matmul(const struct matmul_args *a, int p0, int p1,
                             void (*finish)(const struct matmul_args *, int, int, int,
                                            const float *));

/* Q4_K, Q6_K, Q4_0 and Q5_0 parts regrouped: each 16 output rows (KERNELS_GGUF_GROUP) in one
 * run of 16 * row_bytes bytes, super-block (Q4_0, Q5_0: block) by super-block, each one's 16
 * rows interleaved 4 bytes of weights at a time (kernels_gguf_block.h lays it out), so that a
 * 512-bit vector holds 4 weights of each of 16 rows: a kernel sums 16 outputs lane-wise, without
 * horizontal sums, and decodes each weight once for all the activation rows it is given. The
 * same bytes as the file's rows, rearranged. */
#define KERNELS_GGUF_GROUP 16

/* Whether part i of m can be regrouped: Q4_K, Q6_K, Q4_0 or Q5_0 with N a multiple of
 * KERNELS_GGUF_GROUP (other parts stay rows, read by the row kernels). */
bool packed_gguf_groupable(const packed_matrix *m, int i);

/* Allocates part i's regrouped copy (packed_gguf_groupable), 64-byte aligned, from arena (the
 * same for every part of m; NULL: an allocation of its own); false when out of memory (the part
 * stays as it was). Fill it with packed_gguf_group before any matmul. */
bool packed_gguf_group_alloc(packed_matrix *m, int i, weight_arena *arena);

/* Fills groups [g0, g1) (output rows 16 g0 .. 16 g1 - 1) of part i's regrouped copy from its
 * file rows; disjoint ranges may run on different threads at once. Only a set whose
 * gguf_groups is true multiplies a matrix with regrouped parts; packed_gguf_block and
 * packed_matrix_get read either form. */
void packed_gguf_group(packed_matrix *m, int i, int g0, int g1);

/* Element (k, n) of a TT_GGUF matrix (packed_matrix_get). */
float kernels_gguf_get(const packed_matrix *m, int k, int n);

/* Bytes of weights one panel (32 output columns) of m streams, for sizing work chunks. */
size_t packed_matrix_panel_bytes(const packed_matrix *m);

/* Bytes m's weights take (packed, or in the file for TT_GGUF). */
size_t packed_matrix_size(const packed_matrix *m);

/* The 32 weights of block b (k = 32 b ..) of row (output column) n of a TT_GGUF matrix as
 * w[k] = D * q[k] + M (D = D_lo for k < 16, D_hi after): what every set's kernel computes with
 * (tests compare it with quant_dequantize_row). */
void packed_gguf_block(const packed_matrix *m, int n, int b, int8_t q[32], float *D_lo,
                       float *D_hi, float *M);

/* Row (output column) n of a quantized TT_GGUF matrix as K floats into y: quant_dequantize_row of
 * the file's row, the same floats whether the row is regrouped or not (the engine reads a tied
 * embedding so once its file pages are released). */
void packed_gguf_row_f32(const packed_matrix *m, int n, float *y);

/* Bytes packed_matrix_init allocates for a (K, N) matrix held in dtype. */
size_t packed_matrix_bytes(tt_dtype dtype, int K, int N);

/* Allocates a zeroed (K, N) matrix in dtype. On failure (TT_ERR_NOMEM) m->data is NULL. */
tt_status packed_matrix_init(packed_matrix *m, tt_dtype dtype, int K, int N, tt_error *err);

/* packed_matrix_init without the clearing: the caller clears every panel (or packs over it)
 * before a kernel reads it, so that the first touch of each page happens once, in the thread
 * that packs it. From arena (an engine's weights: weight_arena.h, on huge pages), or NULL: an
 * allocation of its own (tests). */
tt_status packed_matrix_alloc(packed_matrix *m, weight_arena *arena, tt_dtype dtype, int K, int N,
                              tt_error *err);

/* The shape fields of a (K, N) matrix in dtype, data NULL: nothing allocated (a matrix whose
 * panels are packed elsewhere, or later). */
void packed_matrix_shape(packed_matrix *m, tt_dtype dtype, int K, int N);

/* Zeroes panels [p0, p1) of m (padding included). */
void packed_matrix_clear_panels(packed_matrix *m, int p0, int p1);

/* NULL data is safe; leaves m zeroed. */
void packed_matrix_free(packed_matrix *m);

/* Packs output columns [n0, n1) of W from a row-major source tensor, converting each value to
 * m->dtype (round to nearest even, as dtype.h does; Q8 as described above). transposed = false: the source is (K, N)
 * (Conv1D); true: it is (N, K) (the lm_head / wte). Split [n0, n1) over threads at multiples of 32. */
void packed_matrix_pack(packed_matrix *m, tensor_ref src, bool transposed, int n0, int n1);

/* The same for a source holding src_N of m's output columns, which land at columns col0 ..
 * col0 + src_N - 1 (a fused q|k|v or gate|up matrix from separate tensors): source columns
 * [n0, n1) are packed. Columns are independent (Q8 scales too), so col0 need not be a multiple
 * of 32. */
void packed_matrix_pack_at(packed_matrix *m, tensor_ref src, bool transposed, int src_N, int col0,
                           int n0, int n1);

/* Element (k, n) as float (tests, the tied token embedding). */
float packed_matrix_get(const packed_matrix *m, int k, int n);

/* Row (output column) n of a TT_GGUF matrix: its part's tensor row in the mapping, and the part's
 * block type in *type. */
const uint8_t *packed_gguf_row(const packed_matrix *m, int n, uint32_t *type);

/* ---------------------------------------------------------------------------------------------
 * Kernel arguments */

/* One block of 32 activations quantized for a Q8 matmul: x[k] ~ d * q[k] with d = max|x| / 127
 * and q = round-to-nearest-even(x * (1 / d)) (all zero when the block is; a block holding an inf
 * or a NaN gets d = NaN and q = 0, so its outputs are NaN); sum128 = 128 * sum q,
 * what the unsigned weights' offset adds to a vpdpbusd sum. A row of K activations is
 * KERNELS_Q8_ACT_BLOCKS(K) of them, the values past K zero. */
typedef struct kernels_q8_act {
    float d;
    int32_t sum128;
    int8_t q[32];
} kernels_q8_act;

#define KERNELS_Q8_ACT_BLOCKS(K) (((K) + TT_Q8_BLOCK - 1) / TT_Q8_BLOCK)

/* Rounds rows [t0, t1) of x (T, ldx), K columns each, to bf16 (round to nearest even, NaN kept a
 * quiet NaN: dtype.h's tt_f32_to_bf16) into xb (row t at xb + t * ldxb, ldxb >= K): the
 * activations of a BF16 matmul in a set with bf16_rows (the amx set). The portable version; every
 * set's bf16_rows gives its bits. */
void kernels_bf16_rows(const float *x, int ldx, int K, int t0, int t1, uint16_t *xb, int ldxb);

/* Quantizes rows [t0, t1) of x (T, ldx), K columns each, into xq (row t at xq + t * ldxq, at least
 * KERNELS_Q8_ACT_BLOCKS(K) blocks). Deterministic and per row: the same row gives the same blocks
 * whatever rows come with it. The portable version; every set's quantize_rows gives its bits. */
void kernels_quantize_rows(const float *x, int ldx, int K, int t0, int t1, kernels_q8_act *xq,
                           int ldxq);

typedef enum {
    MM_STORE = 0,            /* out = x W + b */
    MM_ADD,                  /* out += x W + b (the residual stream) */
    MM_GELU_TANH,            /* out = gelu_tanh(x W + b) */
    MM_GELU_ERF,             /* out = gelu_erf(x W + b) */
} mm_epilogue;

typedef struct matmul_args {
    float *out;              /* (T, ldo), columns 0 .. N-1 written */
    int ldo;
    const float *x;          /* (T, ldx), columns 0 .. K-1 read */
    int ldx;
    const packed_matrix *w;  /* (K, N) */
    /* Q8 and quantized GGUF weights only: x's rows quantized by kernels_quantize_rows, row t
     * at xq + t * ldxq. */
    const struct kernels_q8_act *xq;
    int ldxq;
    /* BF16 weights in a set with bf16_rows only: x's rows rounded by kernels_bf16_rows, row t at
     * xb + t * ldxb; such a matmul reads them instead of x. */
    const uint16_t *xb;
    int ldxb;
    const float *bias;       /* (N) or NULL */
    int T;
    mm_epilogue epilogue;
} matmul_args;

/* Keys are stored transposed in blocks of KERNELS_KEY_BLOCK positions: one layer is
 * (NH, ldk / KERNELS_KEY_BLOCK, HS, KERNELS_KEY_BLOCK), so dimension d of KERNELS_KEY_BLOCK
 * consecutive positions is one vector (a query's scores against them are one FMA per dimension,
 * no horizontal sums), and all of a block's dimensions are one contiguous 4 KiB (HS 64). A head's
 * first n keys are thus one contiguous run that the hardware prefetchers stream. With rows of
 * ldk positions instead (HS rows a head, each a few lines long and on its own page), a batched
 * decode step's attention and key stores wait on a miss at every row's start (chosen by
 * measurement, see docs/performance.md#why-the-kernels-are-as-they-are). */
#define KERNELS_KEY_BLOCK 16

/* The offset of head h's key for dimension d at position t in one layer's keys. */
static inline size_t kernels_key_at(int HS, int ldk, int h, int d, int t)
{
    return ((size_t)h * (size_t)ldk + (size_t)(t - t % KERNELS_KEY_BLOCK)) * (size_t)HS +
           (size_t)d * KERNELS_KEY_BLOCK + (size_t)(t % KERNELS_KEY_BLOCK);
}

/* Causal attention of T query rows at positions pos .. pos+T-1 over the cache (keys 0 .. pos+i
 * for query i), one head at a time. q and out are rows of the activation buffers. */
typedef struct {
    const float *q;          /* (T, ldq); head h at columns h*HS .. h*HS+HS-1 */
    int ldq;
    const float *k;          /* one layer of the cache's keys (kernels_key_at) */
    const float *v;          /* (NH, n_ctx, HS) */
    int n_ctx;
    int ldk;                 /* positions a head's keys hold: >= n_ctx, a multiple of
                                KERNELS_KEY_BLOCK */
    float *out;              /* (T, ldo); head h at columns h*HS .. */
    int ldo;
    int T, pos, NH, HS;
    int NKV;                 /* key/value heads the cache holds (0: NH); query head h reads KV
                                head h / (NH / NKV) (grouped-query attention) */
    /* The attention capture (core/engine/attention.h), for the one head h the call computes:
     * NULL, or query rows i >= probs_row write the softmax they weight the values with (keys
     * 0 .. pos+i) to probs + (i - probs_row) * ld_probs. Only read by the kernels otherwise: the
     * outputs do not change. */
    float *probs;
    int probs_row;
    size_t ld_probs;
    /* A hint: the calling thread runs head h + 1 of these same arguments next, so a one-row call
     * may start its keys on their way from memory while it weights head h's values. Moves loads
     * only, never a result's bits. */
    bool next_head;
} attention_args;

/* For the kernels: row i's probabilities e[t] * inv (t < n, e the exponentials the row's sum
 * normalises) into the capture when a->probs asks for row i. */
static inline void kernels_attention_keep(const attention_args *a, int i, const float *e, float inv,
                                          int n)
{
    if (!a->probs || i < a->probs_row)
        return;
    float *p = a->probs + (size_t)(i - a->probs_row) * a->ld_probs;
    for (int t = 0; t < n; t++)
        p[t] = e[t] * inv;
}

/* The KV head query head h reads. */
static inline int kernels_kv_head(const attention_args *a, int h)
{
    return a->NKV > 0 ? h / (a->NH / a->NKV) : h;
}

typedef struct {
    const char *name;        /* "reference", "avx2", "avx512", "avx512vnni", "avx512bf16", "amx" */
    /* Computes output panels [p0, p1) of a->w (columns 32*p0 .. min(32*p1, N)-1) for all T rows:
     * disjoint panel ranges may run on different threads at once. scratch: NULL, or
     * KERNELS_MATMUL_SCRATCH(K) floats, 64-byte aligned, private to the calling thread. */
    void (*matmul)(const matmul_args *a, int p0, int p1, float *scratch);
    /* kernels_quantize_rows, vectorized: the same bits. */
    void (*quantize_rows)(const float *x, int ldx, int K, int t0, int t1, kernels_q8_act *xq,
                          int ldxq);
    /* NULL, or kernels_bf16_rows vectorized (the same bits): then this set's BF16 matmuls read
     * their activations from matmul_args.xb, rounded by it, and the caller must supply them
     * (the amx and avx512bf16 sets).
     * The amx set (AMX tiles, tdpbf16ps): every BF16 output is, from c = 0, for each whole block
     * of 32 k ascending c += the block's 32 products of bf16 values (one tdpbf16ps step, summed
     * in the hardware's own fixed way, which is not the sequential FMA chain's; denormal inputs
     * read as zero, fp32 results), then the K % 32 k left one fp32 FMA each, ascending; then
     * bias and epilogue. The avx512bf16 set (vdpbf16ps, no AMX): every BF16 output is, from
     * c = 0, for each pair of k ascending c = vdpbf16ps(c, the pair's weights, the pair's bf16
     * activations) (two exact products added to c in the instruction's own way; denormal inputs
     * read as zero), an odd K's last pair with a zero odd activation; then bias and epilogue.
     * In both, every row runs that chain however many rows come with it (decode, prefill and
     * verification rows alike), so batch invariance holds; their bits differ from the other
     * sets' (fp32 activations) by the activations' rounding, and from each other's. */
    void (*bf16_rows)(const float *x, int ldx, int K, int t0, int t1, uint16_t *xb, int ldxb);
    /* Attention for head h, query rows [t0, t1). scratch: KERNELS_ATTN_SCRATCH(pos + t1)
     * floats private to the calling thread. */
    void (*attention)(const attention_args *a, int h, int t0, int t1, float *scratch);
    /* Query heads h0 .. h0+G-1 (2 <= G <= 8, heads that read one key/value head) of query row i
     * together, without the capture (a->probs unread): the bits of attention(a, h, i, i + 1) for
     * each, each key and value row read once for all G. NULL where a set has none. scratch:
     * KERNELS_ATTN_SCRATCH(pos + i + 1) floats. */
    void (*attention_heads)(const attention_args *a, int h0, int G, int i, float *scratch);
    /* kernels_swiglu's rows (the SIMD sets: silu's e^-x by the vector exp the softmax uses,
     * within a few ulp of expf's). */
    void (*swiglu)(float *gu, int ld, int FF, int t0, int t1);
    /* Its TT_GGUF matmul reads regrouped parts (packed_gguf_group), and gains from them. */
    bool gguf_groups;
    /* Its TT_GGUF matmul over BF16 rows (a BF16 file's matrices) reads the activations rounded
     * by bf16_rows (matmul_args.xb, which the caller must supply: kernels_reads_xb) and
     * multiplies them on vdpbf16ps (the avx512bf16 set): every output is 16 lane chains, lane j
     * from 0: for each block of 32 k ascending c_j = vdpbf16ps(c_j, the weights at 32b + 2j and
     * 32b + 2j + 1, the activations there) (denormal inputs read as zero), the last K % 32 k a
     * block of their own zero-filled; then the 16 lanes summed in the fp32 route's fixed tree.
     * Every row runs that chain however many come with it; the bits differ from the other
     * sets' (fp32 activations, the same bits in each) by the activations' rounding. F16 rows
     * and every other set read x. */
    bool gguf_bf16_rows;
} kernels;

/* Whether set k's matmul over w reads matmul_args.xb: BF16 weights in a set with bf16_rows, or
 * a BF16 file's rows in a set with gguf_bf16_rows. */
bool kernels_reads_xb(const kernels *k, const packed_matrix *w);

/* The names of every set some build may have, best first, NULL-terminated ("reference" last). */
extern const char *const kernels_set_names[];

/* The portable set (always available). */
const kernels *kernels_reference(void);

/* The best set this CPU runs, unless the environment variable TOKENTOP_KERNELS names one
 * ("reference", "avx2", "avx512", "avx512vnni", "avx512bf16", "amx"; a set the CPU or the build
 * lacks falls back to the best one available). Never NULL. The amx set runs where the CPU has
 * AMX-BF16 and AVX512-VNNI, the OS enables the tile state and grants this process its use (Linux:
 * arch_prctl(ARCH_REQ_XCOMP_PERM), asked once), and TOKENTOP_NO_AMX is unset or empty; otherwise
 * avx512bf16 (AVX512-BF16 and AVX512-VNNI), then avx512vnni, is the best. */
const kernels *kernels_select(void);

/* The set called name if this build has it and this CPU runs it, else NULL. */
const kernels *kernels_by_name(const char *name);

/* Whether this CPU has the instructions the set called name needs, whether or not this build
 * includes the set (so a test can tell "skipped: the CPU lacks it" from "the build left it out"). */
bool kernels_cpu_runs(const char *name);

/* Replaces the request for the AMX tile state (NULL: the operating system's, the default) and
 * forgets the answer kept from the last one: a test makes it refuse, to see the fallback. */
void kernels_set_tile_request(bool (*request)(void));

/* LayerNorm of rows [t0, t1) of x (T, C): out = (x - mean) * rstd * w + b, biased variance.
 * Shared by every set: it is a sliver of the work, and one formula keeps the sets comparable. */
void kernels_layernorm(float *out, const float *x, const float *w, const float *b, int C,
                       float eps, int t0, int t1);

/* RMSNorm of rows [t0, t1) of x (rows ldx apart, C columns): out = x * rstd * w with
 * rstd = 1 / sqrt(mean(x^2) + eps) (block_math.h), rows ldo apart; out may be x. The per-head
 * q and k norms of Qwen3 are the same with C = HS, one head a row. */
void kernels_rmsnorm(float *out, int ldo, const float *x, int ldx, const float *w, int C,
                     float eps, int t0, int t1);

/* RoPE, Hugging Face's rotate-half form, on n_heads heads of HS columns each in a row x: for
 * i < HS/2, with (c, s) = cs[pos * HS/2 + i] (cos and sin of pos * inv_freq[i]):
 *   x[i] = x[i] c - x[i + HS/2] s,   x[i + HS/2] = x[i + HS/2] c + x[i] s. */
void kernels_rope(float *x, int n_heads, int HS, const float *cs_cos, const float *cs_sin, int pos);

/* SwiGLU of rows [t0, t1) of gu (rows ld apart, [gate | up] of FF columns each): gate[i] =
 * silu(gate[i]) * up[i], in place (the first FF columns of each row). The reference set's
 * kernels.swiglu. */
void kernels_swiglu(float *gu, int ld, int FF, int t0, int t1);

#endif
