/* gguf_matmul_bench.c: one kind of a GGUF file's matrices (quantized, F16 or BF16) multiplied
 * alone by the engine's kernels (a set's TT_GGUF matmul over the file's mapping, or over the
 * rows regrouped at load as the engine does), one thread, timed by the thread's CPU clock: time
 * a pass, weight bytes read a second, multiply-adds a second and CPU time a super-block-row, so
 * a kernel is judged from memory (or, with --rows > 1, as a prefill) without the forward pass
 * around it and without the shared machine's other work.
 *
 *   build/tools/gguf_matmul_bench FILE.gguf NAME [--rows T] [--set NAME] [--layout file|groups]
 *                                 [--pages huge|small] [--passes N]
 *
 * NAME is a tensor name; a '*' in it stands for the layer number, and every layer's tensor of
 * the first one's type is taken in turn (blk.*.ffn_down.weight: a decode step's down
 * projections, mostly cold in cache as in the engine). One pass multiplies T activation rows
 * (random; quantized once, or rounded to bf16 once where the set multiplies a BF16 file's rows
 * so) by each matrix, the panels handed out as the engine's one thread
 * takes them (cpu_matmul: a quantized matrix's decode row and a batch of a few rows in one run
 * of all its panels; an F16 or BF16 file's decode row in chunks of about 128 KiB; more rows: one
 * 32-column panel a call). --layout groups (the default) regroups the parts the set reads
 * regrouped, as cpu_pack does, on huge pages as the engine's settled weights are (--pages small:
 * 4 KiB pages, which read Q4_K's decode row at 13-15 GB/s where huge pages read 16-18); file
 * keeps the file's rows. Best of --passes (default 5) after one untimed pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/dtype.h"
#include "core/cpu/kernels.h"
#include "core/cpu/weight_arena.h"
#include "core/model/gguf.h"
#include "core/model/quant.h"

#define GB_MAX_MATS 256

static double gb_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static unsigned long long gb_rng = 88172645463325252ULL;

static float gb_uniform(void)
{
    gb_rng ^= gb_rng << 13;
    gb_rng ^= gb_rng >> 7;
    gb_rng ^= gb_rng << 17;
    return (float)(gb_rng >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}

static void *gb_alloc64(size_t bytes)
{
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "gguf_matmul_bench: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

static int usage(void)
{
    fprintf(stderr, "usage: gguf_matmul_bench FILE.gguf NAME ('*' for the layer) [--rows T] "
                    "[--set NAME] [--layout file|groups] [--pages huge|small] [--passes N]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return usage();
    const char *path = argv[1], *name = argv[2], *set = NULL, *layout = "groups", *pages = "huge";
    int T = 1, passes = 5;
    for (int i = 3; i < argc; i++) {
        if (i + 1 >= argc)
            return usage();
        if (!strcmp(argv[i], "--rows"))
            T = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--set"))
            set = argv[++i];
        else if (!strcmp(argv[i], "--layout"))
            layout = argv[++i];
        else if (!strcmp(argv[i], "--pages"))
            pages = argv[++i];
        else if (!strcmp(argv[i], "--passes"))
            passes = atoi(argv[++i]);
        else
            return usage();
    }
    const bool groups = !strcmp(layout, "groups");
    const bool huge = !strcmp(pages, "huge");
    if (T < 1 || T > 4096 || passes < 1 || (!groups && strcmp(layout, "file")) ||
        (!huge && strcmp(pages, "small")))
        return usage();
    const kernels *k = set ? kernels_by_name(set) : kernels_select();
    if (!k) {
        fprintf(stderr, "gguf_matmul_bench: --set %s: not in this build or not run by this CPU\n",
                set);
        return 2;
    }
    gguf_file *f = NULL;
    tt_error err = {0};
    if (gguf_open(path, &f, &err) != TT_OK) {
        fprintf(stderr, "gguf_matmul_bench: %s\n", err.msg);
        return 1;
    }
    /* the matrices: NAME, or NAME with '*' as 0, 1, 2, ... while they exist */
    const gguf_tensor *ts[GB_MAX_MATS];
    int n = 0;
    const char *star = strchr(name, '*');
    for (int l = 0; n < GB_MAX_MATS; l++) {
        char nm[256];
        if (star)
            snprintf(nm, sizeof nm, "%.*s%d%s", (int)(star - name), name, l, star + 1);
        else
            snprintf(nm, sizeof nm, "%s", name);
        const gguf_tensor *t = gguf_find_tensor(f, nm);
        if (!t && (!star || l > 0))
            break;
        if (t && t->n_dims == 2 && (n == 0 || t->type == ts[0]->type))
            ts[n++] = t;
        if (!star)
            break;
    }
    if (n == 0 || !packed_gguf_type_ok(ts[0]->type, (int)ts[0]->ne[0])) {
        fprintf(stderr, "gguf_matmul_bench: %s: %s: no 2-D tensor of that name the engine holds "
                "as stored\n", path, name);
        gguf_close(f);
        return 1;
    }
    const int K = (int)ts[0]->ne[0], KB = K / TT_Q8_BLOCK;
    packed_matrix *m = calloc((size_t)n, sizeof *m);
    weight_arena *arena = huge ? weight_arena_new(true) : NULL;
    size_t bytes = 0, Nsum = 0;
    for (int i = 0; i < n; i++) {
        const uint32_t ty = ts[i]->type;
        const bool fl = ty == QUANT_F16 || ty == QUANT_BF16;
        const tensor_ref src = {.data = ts[i]->data,
                                .dtype = ty == QUANT_F16 ? TT_F16 : ty == QUANT_BF16 ? TT_BF16 : TT_F32,
                                .quantized = !fl, .quant = fl ? 0 : ty, .row_len = K};
        const int cols = (int)ts[i]->ne[1];
        packed_matrix_gguf(&m[i], K, &src, &cols, 1);
        bytes += gguf_tensor_row_bytes(ts[i]) * (size_t)cols;
        Nsum += (size_t)cols;
        if (groups && k->gguf_groups && packed_gguf_groupable(&m[i], 0) &&
            packed_gguf_group_alloc(&m[i], 0, arena))
            packed_gguf_group(&m[i], 0, 0, cols / KERNELS_GGUF_GROUP);
    }
    /* on 64-byte lines, as the engine's activation rows are */
    float *x = gb_alloc64(sizeof(float) * (size_t)T * (size_t)K);
    for (size_t i = 0; i < (size_t)T * (size_t)K; i++)
        x[i] = gb_uniform();
    kernels_q8_act *xq = gb_alloc64(sizeof *xq * (size_t)T * (size_t)KB);
    k->quantize_rows(x, K, K, 0, T, xq, KB);
    uint16_t *xb = NULL;              /* a BF16 file's rows in a set that reads them in bf16 */
    if (kernels_reads_xb(k, &m[0])) {
        xb = gb_alloc64(sizeof *xb * (size_t)T * (size_t)K);
        k->bf16_rows(x, K, K, 0, T, xb, K);
    }
    size_t Nmax = 0;
    for (int i = 0; i < n; i++)
        Nmax = (size_t)m[i].N > Nmax ? (size_t)m[i].N : Nmax;
    float *out = malloc(sizeof(float) * (size_t)T * Nmax);
    float *scratch = gb_alloc64(KERNELS_MATMUL_SCRATCH(K) * sizeof(float));
    double best = 1e30;
    for (int p = 0; p <= passes; p++) {
        const double t0 = gb_cpu_s();
        for (int i = 0; i < n; i++) {
            const matmul_args a = {.out = out, .ldo = m[i].N, .x = x, .ldx = K, .w = &m[i],
                                   .xq = xq, .ldxq = KB, .xb = xb, .ldxb = K, .T = T,
                                   .epilogue = MM_STORE};
            int ppc = 1;
            if (T < 12 && (T > 1 || !packed_gguf_is_float(&m[i]))) {
                ppc = m[i].n_panels;        /* cpu_matmul's runs, one thread's all */
            } else if (T == 1) {            /* cpu_matmul's decode chunks */
                const size_t pb = packed_matrix_panel_bytes(&m[i]);
                ppc = (int)((((size_t)128 << 10) + pb / 2) / pb);
                ppc = ppc < 1 ? 1 : ppc;
                ppc = (ppc + KERNELS_GEMV_PANELS - 1) / KERNELS_GEMV_PANELS * KERNELS_GEMV_PANELS;
            }
            for (int c = 0; c < m[i].n_panels; c += ppc)
                k->matmul(&a, c, c + ppc < m[i].n_panels ? c + ppc : m[i].n_panels, scratch);
        }
        const double dt = gb_cpu_s() - t0;
        if (p > 0 && dt < best)
            best = dt;
    }
    const int tsb = (int)ts[0]->type == QUANT_Q4_K || (int)ts[0]->type == QUANT_Q6_K ? 256 : 32;
    const bool grouped = groups && k->gguf_groups && !packed_gguf_is_float(&m[0]);
    printf("%s %s %s x%d K %d N %zu rows %d layout %s%s: %.3f ms  %.1f GB/s  %.1f GMAC/s  "
           "%.2f ns/block-row (%d weights)  out[0] %g\n",
           k->name, quant_type_name(ts[0]->type), name, n, K, Nsum / (size_t)n, T,
           grouped ? "groups" : "file", grouped && huge ? " (huge pages)" : "", best * 1e3, (double)bytes / best / 1e9,
           (double)K * (double)Nsum * T / best / 1e9,
           best * 1e9 / ((double)Nsum * K / tsb * T), tsb, out[0]);
    for (int i = 0; i < n; i++)
        packed_matrix_free(&m[i]);
    free(m);
    weight_arena_free(arena);
    free(x);
    free(xq);
    free(xb);
    free(out);
    free(scratch);
    gguf_close(f);
    return 0;
}
