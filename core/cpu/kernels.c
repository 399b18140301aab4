/* kernels.c: packed weight matrices, the portable reference kernels and run-time kernel choice. */
#include "core/cpu/kernels.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/arch/block_math.h"

/* The SIMD sets live in files built with their own flags (see the Makefile), so the CPU check
 * happens here, in code that any x86-64 runs. */
#if defined(__x86_64__)
#include <cpuid.h>
#define KERNELS_X86 1
const kernels *kernels_avx512_get(void);
const kernels *kernels_avx512vnni_get(void);
const kernels *kernels_avx512bf16_get(void);
const kernels *kernels_amx_get(void);
const kernels *kernels_avx2_get(void);

/* F16C (vcvtph2ps) from CPUID leaf 1, ECX bit 29: not every compiler's __builtin_cpu_supports
 * knows the name. */
static bool cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && ((c >> 29) & 1u);
}

static bool cpu_runs_avx512(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("fma");
}

static bool cpu_runs_avx512vnni(void)
{
    return cpu_runs_avx512() && __builtin_cpu_supports("avx512vnni");
}

/* AVX512-BF16 (vdpbf16ps): CPUID leaf 7 subleaf 1, EAX bit 5. */
static bool cpu_runs_avx512bf16(void)
{
    unsigned a, b, c, d;
    return cpu_runs_avx512vnni() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 5) & 1u);
}

/* The operating system's grant of the AMX tile data (8 KiB of state per thread, which Linux 5.16+
 * gives a process only when it asks: ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA). */
static bool tile_request_os(void)
{
#if defined(__linux__) && defined(SYS_arch_prctl)
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */,
                   18 /* XFEATURE_XTILEDATA */) == 0;
#else
    return false;
#endif
}

static bool (*tile_request)(void) = tile_request_os;
static int tile_granted = -1;          /* the last answer: -1 not asked yet, 0 refused, 1 granted */

void kernels_set_tile_request(bool (*request)(void))
{
    __atomic_store_n(&tile_request, request ? request : tile_request_os, __ATOMIC_SEQ_CST);
    __atomic_store_n(&tile_granted, -1, __ATOMIC_SEQ_CST);
}

/* AMX-BF16 and AMX-TILE (CPUID leaf 7: EDX bits 22 and 24), the tile state enabled in XCR0 (bits
 * 17 and 18, which OSXSAVE lets us read), and the grant (asked once: two threads asking at once
 * both get the same answer). TOKENTOP_NO_AMX=1 says no without asking. */
static bool cpu_runs_amx(void)
{
    const char *no = getenv("TOKENTOP_NO_AMX");
    if ((no && *no) || !cpu_runs_avx512vnni())
        return false;
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((d >> 22) & 1u) || !((d >> 24) & 1u))
        return false;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1u))
        return false;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17))
        return false;
    int g = __atomic_load_n(&tile_granted, __ATOMIC_SEQ_CST);
    if (g < 0) {
        g = __atomic_load_n(&tile_request, __ATOMIC_SEQ_CST)() ? 1 : 0;
        __atomic_store_n(&tile_granted, g, __ATOMIC_SEQ_CST);
    }
    return g == 1;
}

static bool cpu_runs_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
}

#endif

/* ---------------------------------------------------------------------------------------------
 * Packed matrices */

static size_t packed_panel_elems(tt_dtype dtype, int K)
{
    size_t k = (size_t)K;
    if (dtype == TT_Q8)
        return (k + TT_Q8_BLOCK - 1) / TT_Q8_BLOCK * KERNELS_Q8_BLOCK_BYTES;
    if (dtype == TT_BF16)
        k = (k + 1) & ~(size_t)1;
    return k * KERNELS_NR;
}

size_t packed_matrix_bytes(tt_dtype dtype, int K, int N)
{
    size_t n_panels = ((size_t)N + KERNELS_NR - 1) / KERNELS_NR;
    return n_panels * packed_panel_elems(dtype, K) * tt_dtype_size(dtype);
}

tt_status packed_matrix_init(packed_matrix *m, tt_dtype dtype, int K, int N, tt_error *err)
{
    tt_status s = packed_matrix_alloc(m, NULL, dtype, K, N, err);
    if (s == TT_OK)
        packed_matrix_clear_panels(m, 0, m->n_panels);
    return s;
}

void packed_matrix_clear_panels(packed_matrix *m, int p0, int p1)
{
    const size_t panel = packed_matrix_panel_bytes(m);
    memset((unsigned char *)m->data + (size_t)p0 * panel, 0, (size_t)(p1 - p0) * panel);
}

void packed_matrix_shape(packed_matrix *m, tt_dtype dtype, int K, int N)
{
    memset(m, 0, sizeof *m);
    m->dtype = dtype;
    m->K = K;
    m->N = N;
    m->n_panels = (N + KERNELS_NR - 1) / KERNELS_NR;
    m->panel_elems = packed_panel_elems(dtype, K);
}

tt_status packed_matrix_alloc(packed_matrix *m, weight_arena *arena, tt_dtype dtype, int K, int N,
                              tt_error *err)
{
    memset(m, 0, sizeof *m);
    size_t bytes = packed_matrix_bytes(dtype, K, N);
    void *p = NULL;
    if (arena)
        p = weight_arena_alloc(arena, bytes);
    else if (bytes == 0 || posix_memalign(&p, 64, bytes) != 0)
        p = NULL;
    if (!p)
        return tt_fail(err, TT_ERR_NOMEM, "cpu: cannot allocate %zu bytes for a %dx%d %s matrix",
                       bytes, K, N, tt_dtype_name(dtype));
    packed_matrix_shape(m, dtype, K, N);
    m->data = p;
    m->in_arena = arena != NULL;
    return TT_OK;
}

size_t packed_matrix_panel_bytes(const packed_matrix *m)
{
    if (m->dtype == TT_GGUF)
        return m->panel_elems;
    return m->panel_elems * tt_dtype_size(m->dtype);
}

size_t packed_matrix_size(const packed_matrix *m)
{
    if (m->dtype != TT_GGUF)
        return packed_matrix_bytes(m->dtype, m->K, m->N);
    size_t bytes = 0;
    for (int i = 0; i < m->n_parts; i++)
        bytes += m->parts[i].row_bytes * (size_t)m->parts[i].N;
    return bytes;
}

void packed_matrix_free(packed_matrix *m)
{
    if (!m->in_arena) {
        for (int i = 0; m->dtype == TT_GGUF && i < m->n_parts; i++)
            free(m->parts[i].groups);
        free(m->data);
    }
    memset(m, 0, sizeof *m);
}

/* Block k / 32 of a Q8 panel: its 32 scales and its 1024 integer bytes. */
static inline const uint16_t *q8_scales(const packed_matrix *m, int p, int k)
{
    return (const uint16_t *)((const uint8_t *)m->data + (size_t)p * m->panel_elems +
                              (size_t)(k / TT_Q8_BLOCK) * KERNELS_Q8_BLOCK_BYTES);
}

/* The integer of (k, column j of panel p), stored as q + 128 in groups of 4 along k. */
static inline const uint8_t *q8_byte(const packed_matrix *m, int p, int k, int j)
{
    const int r = k % TT_Q8_BLOCK;
    return (const uint8_t *)(q8_scales(m, p, k) + KERNELS_NR) + (size_t)(r / 4) * 4 * KERNELS_NR +
           (size_t)j * 4 + (size_t)(r % 4);
}

static inline int q8_int(const packed_matrix *m, int p, int k, int j)
{
    return (int)*q8_byte(m, p, k, j) - 128;
}

static inline size_t packed_index(const packed_matrix *m, int k, int n)
{
    size_t base = (size_t)(n / KERNELS_NR) * m->panel_elems;
    size_t j = (size_t)(n % KERNELS_NR);
    if (m->dtype == TT_BF16)
        return base + (size_t)(k / 2) * 2 * KERNELS_NR + j * 2 + (size_t)(k & 1);
    return base + (size_t)k * KERNELS_NR + j;
}

float packed_matrix_get(const packed_matrix *m, int k, int n)
{
    if (m->dtype == TT_GGUF)
        return kernels_gguf_get(m, k, n);
    if (m->dtype == TT_Q8) {
        int p = n / KERNELS_NR, j = n % KERNELS_NR;
        return (float)q8_int(m, p, k, j) * tt_f16_to_f32(q8_scales(m, p, k)[j]);
    }
    return tt_load_f32(m->data, m->dtype, packed_index(m, k, n));
}

/* Quantizes one column of one block: w (32 k; rows past K zero) into column j of block kb of
 * panel p. Columns are independent: each has its own scale. */
static void q8_pack_column(packed_matrix *m, int p, int kb, int j, const float *w)
{
    uint16_t *sc = (uint16_t *)q8_scales(m, p, kb * TT_Q8_BLOCK);
    float amax = 0.0f;
    for (int r = 0; r < TT_Q8_BLOCK; r++)
        amax = fmaxf(amax, fabsf(w[r]));
    uint16_t h = tt_f32_to_f16(amax / 127.0f);
    if (h == 0x7c00u)                     /* past fp16's range: the largest finite scale */
        h = 0x7bffu;
    sc[j] = h;
    const float s = tt_f16_to_f32(h);
    for (int r = 0; r < TT_Q8_BLOCK; r++) {
        float v = s > 0.0f ? nearbyintf(w[r] / s) : 0.0f;
        v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;   /* s rounded down: |v| 128 */
        *(uint8_t *)q8_byte(m, p, kb * TT_Q8_BLOCK + r, j) = (uint8_t)((int)v + 128);
    }
}

/* A GGUF Q8_0 source (N, K) is this layout's blocks already, one row a column: its scales and
 * integers are copied as they are (no requantization, so nothing is lost), four integers a word
 * (q + 128 is q with its top bit flipped). The copy is most of a cold start's work once the file
 * is mapped, and its reads come from memory: a panel's rows (up to 32) are copied block by block,
 * each destination block written whole (with SSE2 four rows at a time, their words transposed
 * in registers), and the source of the next panel's rows (the rows that follow these in the
 * file, src_N in all) is prefetched at the pace these are read: 32 short strided streams
 * outrun the hardware prefetchers (measured: twice the copy's speed with it). */
enum { Q8_0_BLOCK_BYTES = 2 + TT_Q8_BLOCK, Q8_WORDS = TT_Q8_BLOCK / 4 };

#if defined(__SSE2__)
/* Words 0 .. 7 of block off of rows r[0..4) into q (the block's words of its first column). */
static void q8_repack_4rows(unsigned char *q, const unsigned char *const r[4], size_t off)
{
    const __m128i flip = _mm_set1_epi8((char)0x80);
    for (int h = 0; h < 2; h++) {                      /* words 4h .. 4h + 3 of each row */
        __m128i a[4];
        for (int k = 0; k < 4; k++)
            a[k] = _mm_loadu_si128((const __m128i *)(r[k] + off + 2 + 16 * h));
        const __m128i t0 = _mm_unpacklo_epi32(a[0], a[1]);
        const __m128i t1 = _mm_unpacklo_epi32(a[2], a[3]);
        const __m128i t2 = _mm_unpackhi_epi32(a[0], a[1]);
        const __m128i t3 = _mm_unpackhi_epi32(a[2], a[3]);
        const __m128i g[4] = {_mm_unpacklo_epi64(t0, t1), _mm_unpackhi_epi64(t0, t1),
                              _mm_unpacklo_epi64(t2, t3), _mm_unpackhi_epi64(t2, t3)};
        for (int k = 0; k < 4; k++)
            _mm_storeu_si128((__m128i *)(q + (size_t)(4 * h + k) * 4 * KERNELS_NR),
                             _mm_xor_si128(g[k], flip));
    }
}
#endif

/* Rows r[0..cnt) into columns j0 .. j0 + cnt - 1 of the panel at dst (KB blocks), prefetching
 * the same bytes from next on (NULL: none). Not inlined: inlined into packed_matrix_pack_at it
 * ran at less than half the speed (2.7 against 6.6 GB/s of the file's bytes, one thread). */
__attribute__((noinline))
static void q8_repack_panel(unsigned char *dst, const unsigned char *const *r, int cnt, int j0,
                            int KB, const unsigned char *next)
{
    for (int kb = 0; kb < KB; kb++, dst += KERNELS_Q8_BLOCK_BYTES) {
        const size_t off = (size_t)kb * Q8_0_BLOCK_BYTES;
        for (int b = 0; next && b < KERNELS_NR * Q8_0_BLOCK_BYTES; b += 64)
            __builtin_prefetch(next + KERNELS_NR * off + (size_t)b);
        for (int i = 0; i < cnt; i++)
            memcpy(dst + 2 * (j0 + i), r[i] + off, 2);
        unsigned char *q = dst + 2 * KERNELS_NR;      /* word g of column j: q + 4 (32 g + j) */
        int i = 0;
#if defined(__SSE2__)
        for (; i + 4 <= cnt; i += 4)
            q8_repack_4rows(q + 4 * (size_t)(j0 + i), r + i, off);
#endif
        for (; i < cnt; i++)
            for (int g = 0; g < Q8_WORDS; g++) {
                uint32_t w;
                memcpy(&w, r[i] + off + 2 + 4 * g, 4);
                w ^= 0x80808080u;
                memcpy(q + 4 * ((size_t)g * KERNELS_NR + (size_t)(j0 + i)), &w, 4);
            }
    }
}

static void q8_repack(packed_matrix *m, tensor_ref src, int src_N, int col0, int n0, int n1)
{
    for (int n = n0; n < n1;) {
        const int c = col0 + n, j0 = c % KERNELS_NR;
        const int cnt = KERNELS_NR - j0 < n1 - n ? KERNELS_NR - j0 : n1 - n;
        const unsigned char *r[KERNELS_NR];
        for (int i = 0; i < cnt; i++)
            r[i] = tensor_ref_row(src, (size_t)(n + i));
        q8_repack_panel((unsigned char *)m->data + (size_t)(c / KERNELS_NR) * m->panel_elems, r,
                        cnt, j0, m->K / TT_Q8_BLOCK,
                        n + cnt + KERNELS_NR <= src_N ? tensor_ref_row(src, (size_t)(n + cnt))
                                                      : NULL);
        n += cnt;
    }
}

static void q8_pack(packed_matrix *m, tensor_ref src, bool transposed, int src_N, int col0,
                    int n0, int n1)
{
    if (transposed && src.quantized && src.quant == QUANT_Q8_0 &&
        m->K % TT_Q8_BLOCK == 0 && src.row_len == m->K) {
        q8_repack(m, src, src_N, col0, n0, n1);
        return;
    }
    float blk[TT_Q8_BLOCK][KERNELS_NR], col[TT_Q8_BLOCK];
    for (int n = n0; n < n1; n += KERNELS_NR) {
        const int nc = n1 - n < KERNELS_NR ? n1 - n : KERNELS_NR;
        for (int k0 = 0; k0 < m->K; k0 += TT_Q8_BLOCK) {
            const int kc = m->K - k0 < TT_Q8_BLOCK ? m->K - k0 : TT_Q8_BLOCK;
            memset(blk, 0, sizeof blk);
            for (int r = 0; r < kc && !transposed; r++)
                tensor_ref_to_f32(src, (size_t)(k0 + r) * (size_t)src_N + (size_t)n, (size_t)nc,
                                  blk[r]);
            for (int j = 0; j < nc && transposed; j++) {
                tensor_ref_to_f32(src, (size_t)(n + j) * (size_t)m->K + (size_t)k0, (size_t)kc, col);
                for (int r = 0; r < kc; r++)
                    blk[r][j] = col[r];
            }
            for (int j = 0; j < nc; j++) {
                float w[TT_Q8_BLOCK];
                for (int r = 0; r < TT_Q8_BLOCK; r++)
                    w[r] = blk[r][j];
                int c = col0 + n + j;
                q8_pack_column(m, c / KERNELS_NR, k0 / TT_Q8_BLOCK, c % KERNELS_NR, w);
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Packing a source already in the held dtype, or a GGUF Q8_0 one: a copy, not a conversion
 *
 * Loading a GGUF F16 or Q8_0 file packs gigabytes: every element through fp32 and back, with
 * its address computed alone, took seconds. These paths move the bits as they are (the same
 * bits the conversion gives: fp16 -> fp32 -> fp16 is exact, and a NaN comes out as the
 * conversion's quiet NaN, 0x7e00 with its sign), reading each source row front to back. */

static inline uint16_t row_f16(const uint16_t *row, int k)
{
    uint16_t h;
    memcpy(&h, row + k, 2);
    return h;
}

/* h as tt_f32_to_f16(tt_f16_to_f32(h)) gives it: itself, or a NaN's canonical quiet NaN. */
static inline uint16_t f16_canonical(uint16_t h)
{
    return (h & 0x7fffu) > 0x7c00u ? (uint16_t)((h & 0x8000u) | 0x7e00u) : h;
}

/* Element (k, column c) of an F16 or F32 matrix's panels. */
static inline void *plain_at(const packed_matrix *m, size_t es, int k, int c)
{
    return (unsigned char *)m->data +
           ((size_t)(c / KERNELS_NR) * m->panel_elems + (size_t)k * KERNELS_NR +
            (size_t)(c % KERNELS_NR)) * es;
}

#if defined(__SSE2__)
/* Eight F16 source rows' k .. k+7 into columns c .. c+7 (c a multiple of 8) of rows k .. k+7:
 * an 8x8 transpose of 16-bit lanes, NaNs made canonical. */
static inline void f16_transpose8(const packed_matrix *m, const uint16_t *const rows[8], int k,
                                  int c)
{
    __m128i r[8], t[8];
    for (int i = 0; i < 8; i++)
        r[i] = _mm_loadu_si128((const __m128i *)(rows[i] + k));
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
    }
    /* t[0] = a0 b0 a1 b1 a2 b2 a3 b3, t[1] = a4 b4 .., t[2] = c0 d0 .., t[3] = c4 d4 .. */
    r[0] = _mm_unpacklo_epi32(t[0], t[2]);   /* a0 b0 c0 d0 a1 b1 c1 d1 */
    r[1] = _mm_unpackhi_epi32(t[0], t[2]);   /* a2 b2 c2 d2 a3 b3 c3 d3 */
    r[2] = _mm_unpacklo_epi32(t[1], t[3]);   /* a4 .. */
    r[3] = _mm_unpackhi_epi32(t[1], t[3]);   /* a6 .. */
    r[4] = _mm_unpacklo_epi32(t[4], t[6]);   /* e0 f0 g0 h0 e1 f1 g1 h1 */
    r[5] = _mm_unpackhi_epi32(t[4], t[6]);
    r[6] = _mm_unpacklo_epi32(t[5], t[7]);
    r[7] = _mm_unpackhi_epi32(t[5], t[7]);
    const __m128i abs = _mm_set1_epi16(0x7fff), inf = _mm_set1_epi16(0x7c00),
                  sign = _mm_set1_epi16((short)0x8000), qnan = _mm_set1_epi16(0x7e00);
    for (int i = 0; i < 4; i++) {
        __m128i lo = _mm_unpacklo_epi64(r[i], r[i + 4]);   /* k + 2i: columns c .. c+7 */
        __m128i hi = _mm_unpackhi_epi64(r[i], r[i + 4]);   /* k + 2i + 1 */
        for (int h = 0; h < 2; h++) {
            __m128i v = h ? hi : lo;
            __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(v, abs), inf);
            __m128i fix = _mm_or_si128(_mm_and_si128(v, sign), qnan);
            v = _mm_or_si128(_mm_andnot_si128(nan, v), _mm_and_si128(nan, fix));
            _mm_storeu_si128((__m128i *)plain_at(m, 2, k + 2 * i + h, c), v);
        }
    }
}
#endif

/* Source rows [n0, n1) of an (src_N, K) tensor of m's dtype (F16 or F32) into columns col0 + n. */
static void pack_plain_rows(packed_matrix *m, tensor_ref src, int col0, int n0, int n1)
{
    const size_t es = tt_dtype_size(m->dtype);
    if (!src.row_len)
        src.row_len = m->K;
    int n = n0;
#if defined(__SSE2__)
    /* Groups of 8 columns on a multiple of 8, up to a whole panel at once, so that every k's
     * cache line of the panel is written in one go. */
    while (m->dtype == TT_F16 && n < n1) {
        if ((col0 + n) % 8 != 0 || n1 - n < 8)
            break;
        int g = (n1 - n) / 8, room = (KERNELS_NR - (col0 + n) % KERNELS_NR) / 8;
        g = g < room ? g : room;
        const uint16_t *rows[KERNELS_NR];
        for (int i = 0; i < 8 * g; i++)
            rows[i] = tensor_ref_row(src, (size_t)(n + i));
        int k = 0;
        for (; k + 8 <= m->K; k += 8)
            for (int i = 0; i < g; i++)
                f16_transpose8(m, rows + 8 * i, k, col0 + n + 8 * i);
        for (; k < m->K; k++)
            for (int i = 0; i < 8 * g; i++)
                *(uint16_t *)plain_at(m, 2, k, col0 + n + i) = f16_canonical(row_f16(rows[i], k));
        n += 8 * g;
    }
#endif
    for (; n < n1; n++) {
        const unsigned char *row = tensor_ref_row(src, (size_t)n);
        if (m->dtype == TT_F16) {
            for (int k = 0; k < m->K; k++) {
                uint16_t h;
                memcpy(&h, row + 2 * (size_t)k, 2);
                *(uint16_t *)plain_at(m, 2, k, col0 + n) = f16_canonical(h);
            }
        } else {
            for (int k = 0; k < m->K; k++)
                memcpy(plain_at(m, es, k, col0 + n), row + es * (size_t)k, es);
        }
    }
}

/* Source columns [n0, n1) of a (K, src_N) tensor of m's dtype (F16 or F32) into col0 + n. */
static void pack_plain_cols(packed_matrix *m, tensor_ref src, int src_N, int col0, int n0, int n1)
{
    const size_t es = tt_dtype_size(m->dtype);
    const unsigned char *p = src.data;
    for (int k = 0; k < m->K; k++) {
        const unsigned char *row = p + (size_t)k * (size_t)src_N * es;
        for (int n = n0; n < n1; n++) {
            if (m->dtype == TT_F16) {
                uint16_t h;
                memcpy(&h, row + 2 * (size_t)n, 2);
                *(uint16_t *)plain_at(m, 2, k, col0 + n) = f16_canonical(h);
            } else {
                memcpy(plain_at(m, es, k, col0 + n), row + es * (size_t)n, es);
            }
        }
    }
}

void packed_matrix_pack_at(packed_matrix *m, tensor_ref src, bool transposed, int src_N, int col0,
                           int n0, int n1)
{
    if ((m->dtype == TT_F16 || m->dtype == TT_F32) && !src.quantized && src.dtype == m->dtype) {
        if (transposed)
            pack_plain_rows(m, src, col0, n0, n1);
        else
            pack_plain_cols(m, src, src_N, col0, n0, n1);
        return;
    }
    float buf[256];
    if (m->dtype == TT_Q8) {
        q8_pack(m, src, transposed, src_N, col0, n0, n1);
        return;
    }
    if (!transposed) {
        /* (K, src_N): row k holds every output column; copy 32 at a time into the panels. */
        for (int k = 0; k < m->K; k++)
            for (int n = n0; n < n1; n += KERNELS_NR) {
                int cnt = n1 - n < KERNELS_NR ? n1 - n : KERNELS_NR;
                tensor_ref_to_f32(src, (size_t)k * (size_t)src_N + (size_t)n, (size_t)cnt, buf);
                for (int j = 0; j < cnt; j++)
                    tt_store_f32(m->data, m->dtype, packed_index(m, k, col0 + n + j), buf[j]);
            }
    } else {
        /* (src_N, K): source row n is output column col0 + n. */
        for (int n = n0; n < n1; n++)
            for (int k = 0; k < m->K; k += 256) {
                int cnt = m->K - k < 256 ? m->K - k : 256;
                tensor_ref_to_f32(src, (size_t)n * (size_t)m->K + (size_t)k, (size_t)cnt, buf);
                for (int i = 0; i < cnt; i++)
                    tt_store_f32(m->data, m->dtype, packed_index(m, k + i, col0 + n), buf[i]);
            }
    }
}

void packed_matrix_pack(packed_matrix *m, tensor_ref src, bool transposed, int n0, int n1)
{
    packed_matrix_pack_at(m, src, transposed, m->N, 0, n0, n1);
}

/* ---------------------------------------------------------------------------------------------
 * Shared row kernels */

/* Sums in 8 interleaved lanes: a fixed order that compilers vectorize without -ffast-math, about
 * eight times faster than one serial chain of adds. */
static float sum_lanes(const float *x, int n)
{
    float lane[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            lane[l] += x[i + l];
    float tail = 0.0f;
    for (; i < n; i++)
        tail += x[i];
    return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7])) +
           tail;
}

static float sumsq_lanes(const float *x, int n, float mean)
{
    float lane[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) {
            float d = x[i + l] - mean;
            lane[l] += d * d;
        }
    float tail = 0.0f;
    for (; i < n; i++) {
        float d = x[i] - mean;
        tail += d * d;
    }
    return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7])) +
           tail;
}

void kernels_layernorm(float *out, const float *x, const float *w, const float *b, int C,
                       float eps, int t0, int t1)
{
    for (int t = t0; t < t1; t++) {
        const float *xr = x + (size_t)t * (size_t)C;
        float *o = out + (size_t)t * (size_t)C;
        float mean = sum_lanes(xr, C) / (float)C;
        float rstd = gpt2_layernorm_rstd(sumsq_lanes(xr, C, mean) / (float)C, eps);
        for (int i = 0; i < C; i++)
            o[i] = gpt2_layernorm_apply(xr[i], mean, rstd, w[i], b[i]);
    }
}

void kernels_rmsnorm(float *out, int ldo, const float *x, int ldx, const float *w, int C,
                     float eps, int t0, int t1)
{
    for (int t = t0; t < t1; t++) {
        const float *xr = x + (size_t)t * (size_t)ldx;
        float *o = out + (size_t)t * (size_t)ldo;
        float rstd = arch_rmsnorm_rstd(sumsq_lanes(xr, C, 0.0f) / (float)C, eps);
        for (int i = 0; i < C; i++)
            o[i] = arch_rmsnorm_apply(xr[i], rstd, w[i]);
    }
}

void kernels_rope(float *x, int n_heads, int HS, const float *cs_cos, const float *cs_sin, int pos)
{
    const int half = HS / 2;
    const float *c = cs_cos + (size_t)pos * (size_t)half;
    const float *sn = cs_sin + (size_t)pos * (size_t)half;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * (size_t)HS;
        for (int i = 0; i < half; i++) {
            float a = v[i], b = v[i + half];
            v[i] = arch_rope_first(a, b, c[i], sn[i]);
            v[i + half] = arch_rope_second(a, b, c[i], sn[i]);
        }
    }
}

void kernels_swiglu(float *gu, int ld, int FF, int t0, int t1)
{
    for (int t = t0; t < t1; t++) {
        float *g = gu + (size_t)t * (size_t)ld;
        const float *u = g + FF;
        for (int i = 0; i < FF; i++)
            g[i] = arch_silu(g[i]) * u[i];
    }
}

/* ---------------------------------------------------------------------------------------------
 * Reference kernels: plain C, the order of every sum fixed and obvious. */

/* Row k of panel p as 32 floats (the columns past N are the packed zeros). */
static void panel_row(const packed_matrix *w, int p, int k, float *row)
{
    const size_t base = (size_t)p * w->panel_elems;
    if (w->dtype == TT_F32) {
        memcpy(row, (const float *)w->data + base + (size_t)k * KERNELS_NR,
               KERNELS_NR * sizeof(float));
    } else if (w->dtype == TT_F16) {
        const uint16_t *h = (const uint16_t *)w->data + base + (size_t)k * KERNELS_NR;
        for (int j = 0; j < KERNELS_NR; j++)
            row[j] = tt_f16_to_f32(h[j]);
    } else {
        const uint16_t *h = (const uint16_t *)w->data + base + (size_t)(k / 2) * 2 * KERNELS_NR +
                            (size_t)(k & 1);
        for (int j = 0; j < KERNELS_NR; j++)
            row[j] = tt_bf16_to_f32(h[2 * j]);
    }
}

/* Bias and epilogue of row t's outputs acc[0 .. nc) at columns n0 .. */
static void ref_finish(const matmul_args *a, int t, int n0, int nc, const float *acc)
{
    float *o = a->out + (size_t)t * (size_t)a->ldo + n0;
    for (int j = 0; j < nc; j++) {
        float y = acc[j] + (a->bias ? a->bias[n0 + j] : 0.0f);
        switch (a->epilogue) {
        case MM_STORE: o[j] = y; break;
        case MM_ADD: o[j] += y; break;
        case MM_GELU_TANH: o[j] = gpt2_gelu_tanh(y); break;
        case MM_GELU_ERF: o[j] = gpt2_gelu_erf(y); break;
        }
    }
}

/* Q8 (kernels.h): per row, per block, the exact integer sum, then one fma per block. */
static void ref_matmul_q8(const matmul_args *a, int p0, int p1)
{
    const packed_matrix *w = a->w;
    const int KB = KERNELS_Q8_ACT_BLOCKS(w->K);
    for (int p = p0; p < p1; p++) {
        const int n0 = p * KERNELS_NR;
        const int nc = w->N - n0 < KERNELS_NR ? w->N - n0 : KERNELS_NR;
        for (int t = 0; t < a->T; t++) {
            const kernels_q8_act *xq = a->xq + (size_t)t * (size_t)a->ldxq;
            float acc[KERNELS_NR] = {0};
            for (int b = 0; b < KB; b++) {
                const int k0 = b * TT_Q8_BLOCK;
                const uint16_t *sc = q8_scales(w, p, k0);
                for (int j = 0; j < KERNELS_NR; j++) {
                    int32_t sum = 0;
                    for (int r = 0; r < TT_Q8_BLOCK; r++)
                        sum += q8_int(w, p, k0 + r, j) * xq[b].q[r];
                    acc[j] = fmaf(tt_f16_to_f32(sc[j]) * xq[b].d, (float)sum, acc[j]);
                }
            }
            ref_finish(a, t, n0, nc, acc);
        }
    }
}

/* Each output is one fp32 sum over k in order, bias added last. Rows go 8 at a time so a panel
 * row is converted once per 8 rows; the j loops have a fixed trip count and vectorize. */
static void ref_matmul(const matmul_args *a, int p0, int p1, float *scratch)
{
    (void)scratch;
    const packed_matrix *w = a->w;
    if (w->dtype == TT_Q8) {
        ref_matmul_q8(a, p0, p1);
        return;
    }
    if (w->dtype == TT_GGUF) {
        kernels_gguf_ref_matmul(a, p0, p1, ref_finish);
        return;
    }
    for (int p = p0; p < p1; p++) {
        int n0 = p * KERNELS_NR;
        int nc = w->N - n0 < KERNELS_NR ? w->N - n0 : KERNELS_NR;
        for (int t0 = 0; t0 < a->T; t0 += 8) {
            int rows = a->T - t0 < 8 ? a->T - t0 : 8;
            float acc[8][KERNELS_NR];
            memset(acc, 0, sizeof acc);
            for (int k = 0; k < w->K; k++) {
                float row[KERNELS_NR];
                panel_row(w, p, k, row);
                for (int r = 0; r < rows; r++) {
                    float xv = a->x[(size_t)(t0 + r) * (size_t)a->ldx + (size_t)k];
                    for (int j = 0; j < KERNELS_NR; j++)
                        acc[r][j] += xv * row[j];
                }
            }
            for (int r = 0; r < rows; r++)
                ref_finish(a, t0 + r, n0, nc, acc[r]);
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * BF16 and Q8 activations */

void kernels_bf16_rows(const float *x, int ldx, int K, int t0, int t1, uint16_t *xb, int ldxb)
{
    for (int t = t0; t < t1; t++)
        for (int k = 0; k < K; k++)
            xb[(size_t)t * (size_t)ldxb + (size_t)k] = tt_f32_to_bf16(x[(size_t)t * (size_t)ldx + k]);
}

void kernels_quantize_rows(const float *x, int ldx, int K, int t0, int t1, kernels_q8_act *xq,
                           int ldxq)
{
    const int KB = KERNELS_Q8_ACT_BLOCKS(K);
    for (int t = t0; t < t1; t++) {
        const float *xr = x + (size_t)t * (size_t)ldx;
        kernels_q8_act *row = xq + (size_t)t * (size_t)ldxq;
        for (int b = 0; b < KB; b++) {
            const int k0 = b * TT_Q8_BLOCK;
            const int kc = K - k0 < TT_Q8_BLOCK ? K - k0 : TT_Q8_BLOCK;
            float amax = 0.0f;
            bool finite = true;
            for (int i = 0; i < kc; i++) {
                float v = fabsf(xr[k0 + i]);
                finite = finite && v <= FLT_MAX;
                amax = v > amax ? v : amax;
            }
            const float d = finite ? amax / 127.0f : NAN;
            const float id = d > 0.0f ? 1.0f / d : 0.0f;
            int32_t sum = 0;
            for (int i = 0; i < TT_Q8_BLOCK; i++) {
                /* lrintf: the current rounding mode, nearest-even, as the vector conversions */
                int v = i < kc && id > 0.0f ? (int)lrintf(xr[k0 + i] * id) : 0;
                v = v > 127 ? 127 : v < -127 ? -127 : v;
                row[b].q[i] = (int8_t)v;
                sum += v;
            }
            row[b].d = d;
            row[b].sum128 = 128 * sum;
        }
    }
}

static void ref_attention(const attention_args *a, int h, int t0, int t1, float *scratch)
{
    const int HS = a->HS;
    const float scale = gpt2_attn_scale(HS);
    const float *vh = a->v + (size_t)kernels_kv_head(a, h) * (size_t)a->n_ctx * (size_t)HS; /* (n_ctx, HS) */
    for (int i = t0; i < t1; i++) {
        const float *q = a->q + (size_t)i * (size_t)a->ldq + (size_t)h * (size_t)HS;
        float *o = a->out + (size_t)i * (size_t)a->ldo + (size_t)h * (size_t)HS;
        int n = a->pos + i + 1;             /* keys 0 .. pos+i */
        float mx = -INFINITY;
        for (int t = 0; t < n; t++) {
            float s = 0.0f;
            for (int d = 0; d < HS; d++)
                s += q[d] * a->k[kernels_key_at(HS, a->ldk, kernels_kv_head(a, h), d, t)];
            s *= scale;
            scratch[t] = s;
            if (s > mx)
                mx = s;
        }
        float sum = 0.0f;
        for (int t = 0; t < n; t++) {
            scratch[t] = expf(scratch[t] - mx);
            sum += scratch[t];
        }
        float inv = 1.0f / sum;
        kernels_attention_keep(a, i, scratch, inv, n);
        for (int d = 0; d < HS; d++)
            o[d] = 0.0f;
        for (int t = 0; t < n; t++) {
            const float *vr = vh + (size_t)t * (size_t)HS;
            float p = scratch[t] * inv;
            for (int d = 0; d < HS; d++)
                o[d] += p * vr[d];
        }
    }
}

static const kernels reference_set = {
    .name = "reference",
    .matmul = ref_matmul,
    .quantize_rows = kernels_quantize_rows,
    .attention = ref_attention,
    .swiglu = kernels_swiglu,
};

const kernels *kernels_reference(void)
{
    return &reference_set;
}

/* ---------------------------------------------------------------------------------------------
 * Choice */

const char *const kernels_set_names[] = {"amx",  "avx512bf16", "avx512vnni", "avx512",
                                         "avx2", "reference",  NULL};

static bool cpu_runs_always(void) { return true; }

/* Every set this build has, best first: whether this CPU runs it, and the set. */
static const struct {
    const char *name;
    bool (*cpu_runs)(void);
    const kernels *(*get)(void);
} kernels_sets[] = {
#ifdef KERNELS_X86
    {"amx", cpu_runs_amx, kernels_amx_get},
    {"avx512bf16", cpu_runs_avx512bf16, kernels_avx512bf16_get},
    {"avx512vnni", cpu_runs_avx512vnni, kernels_avx512vnni_get},
    {"avx512", cpu_runs_avx512, kernels_avx512_get},
    {"avx2", cpu_runs_avx2, kernels_avx2_get},
#endif
    {"reference", cpu_runs_always, kernels_reference},
};
#define KERNELS_N_SETS (sizeof kernels_sets / sizeof kernels_sets[0])

/* The index of the set called name in kernels_sets, or -1. */
static int kernels_find(const char *name)
{
    for (size_t i = 0; i < KERNELS_N_SETS; i++)
        if (strcmp(name, kernels_sets[i].name) == 0)
            return (int)i;
    return -1;
}

const kernels *kernels_by_name(const char *name)
{
    int i = kernels_find(name);
    return i >= 0 && kernels_sets[i].cpu_runs() ? kernels_sets[i].get() : NULL;
}

bool kernels_cpu_runs(const char *name)
{
    int i = kernels_find(name);
    return i >= 0 && kernels_sets[i].cpu_runs();
}

const kernels *kernels_select(void)
{
    const char *want = getenv("TOKENTOP_KERNELS");
    if (want && *want) {
        const kernels *k = kernels_by_name(want);
        if (k)
            return k;
    }
    for (size_t i = 0;; i++)          /* the last, the reference set, runs everywhere */
        if (kernels_sets[i].cpu_runs())
            return kernels_sets[i].get();
}
