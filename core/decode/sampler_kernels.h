/* sampler_kernels.h: the sampler's passes over the vocabulary (scan, exp, counts, normalisation,
 * gathers), written once with GCC/Clang vector extensions for SAMPLER_VW floats per vector and
 * compiled three times: 4 lanes in sampler.c (SSE2, NEON), 8 in sampler_avx2.c, 16 in
 * sampler_avx512.c. sampler.c picks the widest set the CPU runs. Internal to the sampler.
 *
 * The wide sets are built with -mfma, so their multiply-adds may be fused: a probability can
 * differ from the 4-lane set's in the last bit (the tests hold every set to the same reference). */
#ifndef TOKENTOP_SAMPLER_KERNELS_H
#define TOKENTOP_SAMPLER_KERNELS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* max, min over finite values and count of finite values of a logit vector; bad when any value is
 * NaN or +inf. */
typedef struct {
    float max, min_finite;
    int n_finite;
    bool bad;
} sampler_range;

typedef struct {
    const char *name;   /* "vec4", "avx2", "avx512" */
    /* Copies x to a and b (either may be NULL) and measures it. */
    sampler_range (*scan)(const float *x, int V, float *a, float *b);
    /* w[i] = exp(s_i), s_i = (src[i] - shift) * scale <= 0 (w may be NULL); adds sum(w) to
     * *sum_w and sum(w * s) to *sum_ws. exp is exactly 1 at 0 and 0 below -87.33654. */
    void (*exp_pass)(float *w, const float *src, int n, float shift, float scale, double *sum_w,
                     double *sum_ws);
    /* Number of i with (z[i] - zmax) * scale >= thr (-inf never counts). */
    int (*count_at_least)(const float *z, int V, float zmax, float scale, float thr);
    /* bucket[i] = min((zmax - z[i]) * scale, nb - 1) truncated, or nb for -inf. */
    void (*bucket_index)(uint16_t *bucket, const float *z, int V, float zmax, float scale,
                         int nb);
    /* probs[i] = w[i] * inv where bucket[i] < limit, else 0; returns the count of p > 0 and adds
     * sum(p * s), s = (z - zmax) * inv_t, to *sum_ps. */
    int (*normalize)(float *probs, const float *w, const uint16_t *bucket, const float *z, int V,
                     int limit, float inv, float zmax, float inv_t, double *sum_ps);
    /* Writes the ids i (ascending) with lo <= bucket[i] <= hi to out, at most n of them; returns
     * how many. */
    int (*gather)(const uint16_t *bucket, int V, int lo, int hi, int32_t *out, int n);
    /* The first i in [from, V) with x[i] > thr, or V. */
    int (*find_above)(const float *x, int from, int V, float thr);
} sampler_kernels;

/* Defined only in builds for x86-64, which compile sampler_avx2.c and sampler_avx512.c. The
 * caller checks the CPU first. */
const sampler_kernels *sampler_kernels_avx2(void);
const sampler_kernels *sampler_kernels_avx512(void);

#endif

/* ---------------------------------------------------------------------------------------------
 * The template: define SAMPLER_VW (4, 8 or 16) and SAMPLER_KERNELS (the table's name) and include
 * this file once. Everything below is static to the including file. */
#ifdef SAMPLER_VW

#define VW SAMPLER_VW
#define SK_EXP_LO -87.33654f
#define SK_BLOCK (16 * VW)   /* lane sums are float within a block, double across blocks */

typedef float sk_vf __attribute__((vector_size(4 * VW)));
typedef int32_t sk_vi __attribute__((vector_size(4 * VW)));
typedef int16_t sk_vs __attribute__((vector_size(4 * VW)));    /* 2 * VW lanes */
typedef uint16_t sk_vh __attribute__((vector_size(2 * VW)));   /* VW lanes */
typedef uint64_t sk_vq __attribute__((vector_size(4 * VW)));

static inline sk_vf sk_load(const float *p)
{
    sk_vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void sk_store(float *p, sk_vf v) { memcpy(p, &v, sizeof v); }
static inline sk_vf sk_splat(float x) { return (sk_vf){0} + x; }
static inline sk_vf sk_select(sk_vi m, sk_vf a, sk_vf b)
{
    return (sk_vf)(((sk_vi)a & m) | ((sk_vi)b & ~m));
}

static inline bool sk_any(sk_vi m)
{
    sk_vq q = (sk_vq)m;
    uint64_t o = 0;
    for (int k = 0; k < VW / 2; k++)
        o |= q[k];
    return o != 0;
}

static inline double sk_sum(sk_vf v)
{
    double d = 0;
    for (int k = 0; k < VW; k++)
        d += v[k];
    return d;
}

static inline int sk_isum(sk_vi v)
{
    int n = 0;
    for (int k = 0; k < VW; k++)
        n += v[k];
    return n;
}

/* VW floats from p + j with those at or past n replaced by pad. */
static inline sk_vf sk_load_tail(const float *p, int j, int n, float pad)
{
    float t[VW];
    for (int k = 0; k < VW; k++)
        t[k] = j + k < n ? p[j + k] : pad;
    return sk_load(t);
}

/* exp(x) for x <= 0 (Cephes expf: range reduction by ln 2 and a degree-6 polynomial, ~1 ulp);
 * exactly 1 at 0 and exactly 0 below SK_EXP_LO, -inf included, so a weight is 0 only below
 * SK_EXP_LO and the tokens with p > 0 are a prefix of the order. */
static inline sk_vf sk_exp(sk_vf x)
{
    sk_vi under = x < sk_splat(SK_EXP_LO);
    x = sk_select(under, sk_splat(SK_EXP_LO), x);
    sk_vf t = x * sk_splat(1.44269504088896341f) + sk_splat(0.5f);
    sk_vi n = __builtin_convertvector(t, sk_vi);           /* truncates toward 0 ... */
    n += (sk_vi)(__builtin_convertvector(n, sk_vf) > t);    /* ... so step down to floor(t) */
    sk_vf fn = __builtin_convertvector(n, sk_vf);
    sk_vf r = x - fn * sk_splat(0.693359375f) - fn * sk_splat(-2.12194440e-4f);
    sk_vf y = sk_splat(1.9875691500e-4f);
    y = y * r + sk_splat(1.3981999507e-3f);
    y = y * r + sk_splat(8.3334519073e-3f);
    y = y * r + sk_splat(4.1665795894e-2f);
    y = y * r + sk_splat(1.6666665459e-1f);
    y = y * r + sk_splat(5.0000001201e-1f);
    y = y * r * r + r + sk_splat(1.0f);
    sk_vf pow2n = (sk_vf)((n + 127) << 23);
    return (sk_vf)((sk_vi)(y * pow2n) & ~under);
}

static sampler_range sk_scan(const float *x, int V, float *a, float *b)
{
    const sk_vi absmask = (sk_vi){0} + 0x7fffffff, maxfinite = (sk_vi){0} + 0x7f7fffff;
    const sk_vf ninf = sk_splat(-__builtin_inff());
    sk_vf mx = ninf, mn = sk_splat(__builtin_inff());
    sk_vi bad = (sk_vi){0}, cnt = (sk_vi){0};
    const int nv = V - V % VW;
    for (int j = 0; j < V; j += VW) {
        sk_vf v;
        if (j < nv) {
            v = sk_load(x + j);
            if (a)
                sk_store(a + j, v);
            if (b)
                sk_store(b + j, v);
        } else {   /* the ragged tail, padded with -inf */
            v = sk_load_tail(x, j, V, -__builtin_inff());
            for (int k = 0; j + k < V; k++) {
                if (a)
                    a[j + k] = x[j + k];
                if (b)
                    b[j + k] = x[j + k];
            }
        }
        sk_vi fin = v != ninf;
        bad |= (((sk_vi)v & absmask) > maxfinite) & fin;   /* NaN or +inf */
        cnt -= fin;
        mx = sk_select(v > mx, v, mx);
        mn = sk_select(fin & (v < mn), v, mn);
    }
    sampler_range r = {mx[0], mn[0], sk_isum(cnt), sk_any(bad)};
    for (int k = 1; k < VW; k++) {
        r.max = mx[k] > r.max ? mx[k] : r.max;
        r.min_finite = mn[k] < r.min_finite ? mn[k] : r.min_finite;
    }
    return r;
}

static void sk_exp_pass(float *w, const float *src, int n, float shift, float scale,
                        double *sum_w, double *sum_ws)
{
    const sk_vf vshift = sk_splat(shift), vscale = sk_splat(scale), lo = sk_splat(SK_EXP_LO);
    const int nv = n - n % VW;
    double dw = 0, dws = 0;
    for (int j0 = 0; j0 < n; j0 += SK_BLOCK) {
        int j1 = j0 + SK_BLOCK < nv ? j0 + SK_BLOCK : nv;
        sk_vf aw = sk_splat(0), aws = sk_splat(0);
        int j = j0;
        for (; j < j1; j += VW) {
            sk_vf s = (sk_load(src + j) - vshift) * vscale;
            sk_vf e = sk_exp(s);
            aw += e;
            aws += e * sk_select(s < lo, lo, s);   /* keeps 0 * -inf out of the sum */
            if (w)
                sk_store(w + j, e);
        }
        if (j < n && j0 + SK_BLOCK >= n) {   /* the ragged tail, padded with -inf */
            sk_vf s = (sk_load_tail(src, j, n, -__builtin_inff()) - vshift) * vscale;
            sk_vf e = sk_exp(s);
            aw += e;
            aws += e * sk_select(s < lo, lo, s);
            for (int k = 0; w && j + k < n; k++)
                w[j + k] = e[k];
        }
        dw += sk_sum(aw);
        dws += sk_sum(aws);
    }
    *sum_w += dw;
    *sum_ws += dws;
}

static int sk_count_at_least(const float *z, int V, float zmax, float scale, float thr)
{
    const sk_vf vmax = sk_splat(zmax), vscale = sk_splat(scale), vthr = sk_splat(thr);
    sk_vi cnt = (sk_vi){0};
    const int nv = V - V % VW;
    for (int j = 0; j < nv; j += VW)
        cnt -= (sk_load(z + j) - vmax) * vscale >= vthr;
    if (nv < V)
        cnt -= (sk_load_tail(z, nv, V, -__builtin_inff()) - vmax) * vscale >= vthr;
    return sk_isum(cnt);
}

static void sk_bucket_index(uint16_t *bucket, const float *z, int V, float zmax, float scale,
                            int nb)
{
    const sk_vf vmax = sk_splat(zmax), vscale = sk_splat(scale), top = sk_splat((float)(nb - 1));
    const sk_vf ninf = sk_splat(-__builtin_inff());
    const sk_vi vnb = (sk_vi){0} + nb;
    int j = 0;
    for (; j + VW <= V; j += VW) {
        sk_vf v = sk_load(z + j);
        sk_vf q = (vmax - v) * vscale;   /* monotone in z; inf and NaN go to the last bucket */
        q = sk_select(q < top, q, top);
        sk_vi b = __builtin_convertvector(q, sk_vi);
        b = (sk_vi)sk_select(v == ninf, (sk_vf)vnb, (sk_vf)b);
        sk_vh h = __builtin_convertvector(b, sk_vh);
        memcpy(bucket + j, &h, sizeof h);
    }
    for (; j < V; j++) {
        float q = (zmax - z[j]) * scale;
        bucket[j] = (uint16_t)(z[j] == -__builtin_inff() ? nb : q < (float)(nb - 1) ? (int)q
                                                                                  : nb - 1);
    }
}

static int sk_normalize(float *probs, const float *w, const uint16_t *bucket, const float *z,
                        int V, int limit, float inv, float zmax, float inv_t, double *sum_ps)
{
    const sk_vf vinv = sk_splat(inv), vmax = sk_splat(zmax), vt = sk_splat(inv_t);
    const sk_vf lo = sk_splat(SK_EXP_LO), zero = sk_splat(0);
    const sk_vi vlimit = (sk_vi){0} + limit;
    const int nv = V - V % VW;
    sk_vi cnt = (sk_vi){0};
    double acc = 0;
    for (int j0 = 0; j0 < nv; j0 += SK_BLOCK) {
        int j1 = j0 + SK_BLOCK < nv ? j0 + SK_BLOCK : nv;
        sk_vf aps = zero;
        for (int j = j0; j < j1; j += VW) {
            sk_vh h;
            memcpy(&h, bucket + j, sizeof h);
            sk_vi keep = __builtin_convertvector(h, sk_vi) < vlimit;
            sk_vf p = sk_select(keep, sk_load(w + j) * vinv, zero);
            sk_vf s = (sk_load(z + j) - vmax) * vt;
            aps += p * sk_select(s < lo, lo, s);
            cnt -= p > zero;
            sk_store(probs + j, p);
        }
        acc += sk_sum(aps);
    }
    int n = sk_isum(cnt);
    for (int j = nv; j < V; j++) {
        float p = bucket[j] < limit ? w[j] * inv : 0;
        float s = (z[j] - zmax) * inv_t;
        acc += (double)p * (s < SK_EXP_LO ? SK_EXP_LO : s);
        n += p > 0;
        probs[j] = p;
    }
    *sum_ps += acc;
    return n;
}

static int sk_gather(const uint16_t *bucket, int V, int lo, int hi, int32_t *out, int n)
{
    const sk_vs vlo = (sk_vs){0} + (int16_t)lo, vhi = (sk_vs){0} + (int16_t)hi;
    const int lanes = 2 * VW;
    int got = 0, j = 0;
    for (; j + lanes <= V && got < n; j += lanes) {
        sk_vs v;
        memcpy(&v, bucket + j, sizeof v);
        if (!sk_any((sk_vi)((v >= vlo) & (v <= vhi))))
            continue;
        for (int k = 0; k < lanes && got < n; k++)
            if (bucket[j + k] >= lo && bucket[j + k] <= hi)
                out[got++] = j + k;
    }
    for (; j < V && got < n; j++)
        if (bucket[j] >= lo && bucket[j] <= hi)
            out[got++] = j;
    return got;
}

static int sk_find_above(const float *x, int from, int V, float thr)
{
    const sk_vf vthr = sk_splat(thr);
    int j = from;
    for (; j + VW <= V; j += VW)
        if (sk_any(sk_load(x + j) > vthr))
            break;
    for (; j < V; j++)
        if (x[j] > thr)
            return j;
    return V;
}

static const sampler_kernels SAMPLER_KERNELS = {
    .scan = sk_scan,
    .exp_pass = sk_exp_pass,
    .count_at_least = sk_count_at_least,
    .bucket_index = sk_bucket_index,
    .normalize = sk_normalize,
    .gather = sk_gather,
    .find_above = sk_find_above,
#if VW == 16
    .name = "avx512",
#elif VW == 8
    .name = "avx2",
#else
    .name = "vec4",
#endif
};

#undef VW
#undef SK_BLOCK
#endif
