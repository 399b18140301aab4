/* sampler.c: the logit-processing chain (mask, penalties, temperature, top-k, top-p, min-p), the
 * draw, and the per-step snapshot. Semantics are stated in sampler.h. */
#include "core/sampler.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------------------------------------
 * Parameters */

void sampler_params_default(sampler_params *p)
{
    *p = (sampler_params){
        .temperature = 1.0f,
        .top_k = 0,
        .top_p = 1.0f,
        .min_p = 0.0f,
        .repetition_penalty = 1.0f,
        .presence_penalty = 0.0f,
        .frequency_penalty = 0.0f,
        .penalty_window = 64,
        .greedy = false,
        .order = SAMPLER_ORDER_HF,
    };
}

tt_status sampler_params_validate(const sampler_params *p, tt_error *err)
{
    if (!p)
        return tt_fail(err, TT_ERR_ARG, "sampler: no parameters");
    if (!isfinite(p->temperature) || p->temperature < 0)
        return tt_fail(err, TT_ERR_ARG, "temp: %g is not a finite number >= 0 (0 means greedy)",
                       (double)p->temperature);
    if (!(p->top_p >= 0 && p->top_p <= 1))
        return tt_fail(err, TT_ERR_ARG, "top_p: %g is outside [0, 1]", (double)p->top_p);
    if (!(p->min_p >= 0 && p->min_p <= 1))
        return tt_fail(err, TT_ERR_ARG, "min_p: %g is outside [0, 1]", (double)p->min_p);
    if (!isfinite(p->repetition_penalty) || p->repetition_penalty <= 0)
        return tt_fail(err, TT_ERR_ARG, "repeat: %g is not a finite number > 0 (1 disables)",
                       (double)p->repetition_penalty);
    if (!isfinite(p->presence_penalty))
        return tt_fail(err, TT_ERR_ARG, "presence: %g is not a finite number",
                       (double)p->presence_penalty);
    if (!isfinite(p->frequency_penalty))
        return tt_fail(err, TT_ERR_ARG, "frequency: %g is not a finite number",
                       (double)p->frequency_penalty);
    if (p->penalty_window < -1)
        return tt_fail(err, TT_ERR_ARG, "window: %d is below -1 (-1 means the whole context)",
                       p->penalty_window);
    if (p->order != SAMPLER_ORDER_HF && p->order != SAMPLER_ORDER_LLAMA)
        return tt_fail(err, TT_ERR_ARG, "order: %d is neither hf (0) nor llama (1)",
                       (int)p->order);
    return TT_OK;
}

typedef enum { PARAM_FLOAT, PARAM_INT, PARAM_ORDER, PARAM_BOOL } param_kind;

/* One row per settable field; the first name is the canonical one used in messages. */
static const struct {
    const char *name;
    const char *alias[2];
    param_kind kind;
    size_t offset;
} param_table[] = {
    {"temp", {"temperature", NULL}, PARAM_FLOAT, offsetof(sampler_params, temperature)},
    {"top_k", {"top-k", NULL}, PARAM_INT, offsetof(sampler_params, top_k)},
    {"top_p", {"top-p", NULL}, PARAM_FLOAT, offsetof(sampler_params, top_p)},
    {"min_p", {"min-p", NULL}, PARAM_FLOAT, offsetof(sampler_params, min_p)},
    {"repeat", {"rep", "repetition"}, PARAM_FLOAT, offsetof(sampler_params, repetition_penalty)},
    {"presence", {"pres", NULL}, PARAM_FLOAT, offsetof(sampler_params, presence_penalty)},
    {"frequency", {"freq", NULL}, PARAM_FLOAT, offsetof(sampler_params, frequency_penalty)},
    {"window", {"win", NULL}, PARAM_INT, offsetof(sampler_params, penalty_window)},
    {"order", {NULL, NULL}, PARAM_ORDER, offsetof(sampler_params, order)},
    {"greedy", {NULL, NULL}, PARAM_BOOL, offsetof(sampler_params, greedy)},
};
#define PARAM_COUNT (sizeof param_table / sizeof param_table[0])

static int param_find(const char *name)
{
    for (size_t i = 0; i < PARAM_COUNT; i++) {
        if (strcmp(name, param_table[i].name) == 0)
            return (int)i;
        for (int a = 0; a < 2; a++)
            if (param_table[i].alias[a] && strcmp(name, param_table[i].alias[a]) == 0)
                return (int)i;
    }
    return -1;
}

/* strtod/strtol accept leading blanks; a value typed by a user should not silently do so. */
static bool starts_like_number(const char *v)
{
    return v[0] != '\0' && !isspace((unsigned char)v[0]);
}

static tt_status parse_float(const char *field, const char *v, float *out, tt_error *err)
{
    if (!starts_like_number(v))
        return tt_fail(err, TT_ERR_ARG, "%s: \"%s\" is not a number", field, v);
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || *end != '\0')
        return tt_fail(err, TT_ERR_ARG, "%s: \"%s\" is not a number", field, v);
    if (isnan(d) || (isinf(d) && errno != ERANGE))
        return tt_fail(err, TT_ERR_ARG, "%s: \"%s\" is not a finite number", field, v);
    if (errno == ERANGE || fabs(d) > FLT_MAX)
        return tt_fail(err, TT_ERR_ARG, "%s: \"%s\" is out of range", field, v);
    *out = (float)d;
    return TT_OK;
}

static tt_status parse_int(const char *field, const char *v, int *out, tt_error *err)
{
    if (!starts_like_number(v))
        return tt_fail(err, TT_ERR_ARG, "%s: \"%s\" is not an integer", field, v);
    char *end;
    errno = 0;
    long l = strtol(v, &end, 10);
    if (end == v || *end != '\0')
        return tt_fail(err, TT_ERR_ARG, "%s: \"%s\" is not an integer", field, v);
    if (errno == ERANGE || l < INT_MIN || l > INT_MAX)
        return tt_fail(err, TT_ERR_ARG, "%s: \"%s\" is out of range", field, v);
    *out = (int)l;
    return TT_OK;
}

tt_status sampler_params_set(sampler_params *p, const char *name, const char *value,
                             tt_error *err)
{
    if (!p || !name || !value)
        return tt_fail(err, TT_ERR_ARG, "sampler: missing parameter name or value");
    int i = param_find(name);
    if (i < 0)
        return tt_fail(err, TT_ERR_ARG,
                       "unknown sampler setting \"%s\" (temp, top_k, top_p, min_p, repeat, "
                       "presence, frequency, window, order, greedy)", name);
    const char *field = param_table[i].name;
    sampler_params q = *p;   /* edited copy: *p changes only if everything passes */
    char *slot = (char *)&q + param_table[i].offset;
    tt_status st = TT_OK;
    switch (param_table[i].kind) {
    case PARAM_FLOAT:
        st = parse_float(field, value, (float *)slot, err);
        break;
    case PARAM_INT:
        st = parse_int(field, value, (int *)slot, err);
        break;
    case PARAM_ORDER:
        if (strcasecmp(value, "hf") == 0)
            q.order = SAMPLER_ORDER_HF;
        else if (strcasecmp(value, "llama") == 0)
            q.order = SAMPLER_ORDER_LLAMA;
        else
            st = tt_fail(err, TT_ERR_ARG, "order: \"%s\" is neither hf nor llama", value);
        break;
    case PARAM_BOOL:
        if (!strcasecmp(value, "on") || !strcasecmp(value, "true") || !strcmp(value, "1") ||
            !strcasecmp(value, "yes"))
            q.greedy = true;
        else if (!strcasecmp(value, "off") || !strcasecmp(value, "false") ||
                 !strcmp(value, "0") || !strcasecmp(value, "no"))
            q.greedy = false;
        else
            st = tt_fail(err, TT_ERR_ARG, "%s: \"%s\" is not on or off", field, value);
        break;
    }
    if (st == TT_OK)
        st = sampler_params_validate(&q, err);
    if (st == TT_OK)
        *p = q;
    return st;
}

size_t sampler_params_format(const sampler_params *p, char *buf, size_t cap)
{
    char temp[48], win[24];
    if (p->greedy || p->temperature == 0)
        snprintf(temp, sizeof temp, "greedy");
    else
        snprintf(temp, sizeof temp, "temp %g", (double)p->temperature);
    if (p->penalty_window < 0)
        snprintf(win, sizeof win, "all");
    else
        snprintf(win, sizeof win, "%d", p->penalty_window);
    int n = snprintf(buf, cap, "%s top-k %d top-p %g min-p %g rep %g pres %g freq %g win %s %s",
                     temp, p->top_k, (double)p->top_p, (double)p->min_p,
                     (double)p->repetition_penalty, (double)p->presence_penalty,
                     (double)p->frequency_penalty, win,
                     p->order == SAMPLER_ORDER_LLAMA ? "llama" : "hf");
    return n < 0 ? 0 : (size_t)n;
}

const char *sampler_cut_name(sampler_cut c)
{
    switch (c) {
    case SAMPLER_CUT_NONE: return NULL;
    case SAMPLER_CUT_BANNED: return "banned";
    case SAMPLER_CUT_TOP_K: return "top_k";
    case SAMPLER_CUT_TOP_P: return "top_p";
    case SAMPLER_CUT_MIN_P: return "min_p";
    case SAMPLER_CUT_GREEDY: return "greedy";
    }
    return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Four-wide vector helpers (GCC/Clang vector extensions: SSE2 on any x86-64, NEON on arm64).
 * The passes over V run every token, and scalar expf alone would take most of the time budget.
 */

typedef float f4 __attribute__((vector_size(16)));
typedef int32_t i4 __attribute__((vector_size(16)));
typedef double d4 __attribute__((vector_size(32)));

static inline f4 f4_load(const float *p)
{
    f4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void f4_store(float *p, f4 v) { memcpy(p, &v, sizeof v); }
static inline f4 f4_splat(float x) { return (f4){x, x, x, x}; }
static inline f4 f4_select(i4 m, f4 a, f4 b) { return (f4)(((i4)a & m) | ((i4)b & ~m)); }

#define EXP_LO -87.33654f   /* below this exp() is not a normal float: the result is 0 */

/* exp(x) for x <= 0 (Cephes expf: range reduction by ln 2 and a degree-6 polynomial, ~1 ulp);
 * exactly 1 at 0 and exactly 0 below EXP_LO, -inf included. */
static inline f4 exp4(f4 x)
{
    i4 under = x < f4_splat(EXP_LO);
    x = f4_select(under, f4_splat(EXP_LO), x);
    f4 t = x * f4_splat(1.44269504088896341f) + f4_splat(0.5f);
    i4 n = __builtin_convertvector(t, i4);              /* truncates toward 0 ... */
    n += (i4)(__builtin_convertvector(n, f4) > t);       /* ... so step down to floor(t) */
    f4 fn = __builtin_convertvector(n, f4);
    f4 r = x - fn * f4_splat(0.693359375f) - fn * f4_splat(-2.12194440e-4f);
    f4 y = f4_splat(1.9875691500e-4f);
    y = y * r + f4_splat(1.3981999507e-3f);
    y = y * r + f4_splat(8.3334519073e-3f);
    y = y * r + f4_splat(4.1665795894e-2f);
    y = y * r + f4_splat(1.6666665459e-1f);
    y = y * r + f4_splat(5.0000001201e-1f);
    y = y * r * r + r + f4_splat(1.0f);
    f4 pow2n = (f4)((n + 127) << 23);
    return (f4)((i4)(y * pow2n) & ~under);
}

static inline float exp1(float x) { return exp4(f4_splat(x))[0]; }

/* 1 / T, finite even for a denormal T (0 * inf would make NaN of the top token's weight). */
static inline float inv_temp(float t) { return 1.0f / t < FLT_MAX ? 1.0f / t : FLT_MAX; }

/* w[j] = exp(s_j) with s_j = (src[j] - shift) * scale <= 0, for j < n (w may be NULL); adds
 * sum(w) to *sum_w and sum(w * s) to *sum_ws in double (the entropy needs the second). */
static void exp_pass(float *w, const float *src, int n, float shift, float scale, double *sum_w,
                     double *sum_ws)
{
    const f4 vshift = f4_splat(shift), vscale = f4_splat(scale), lo = f4_splat(EXP_LO);
    d4 aw = {0, 0, 0, 0}, aws = {0, 0, 0, 0};
    int j = 0;
    for (;; j += 4) {
        f4 x;
        int m = n - j;
        if (m >= 4) {
            x = f4_load(src + j);
        } else if (m > 0) {   /* pad with -inf: weight 0, contributes nothing */
            float tail[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
            memcpy(tail, src + j, (size_t)m * sizeof(float));
            x = f4_load(tail);
        } else {
            break;
        }
        f4 s = (x - vshift) * vscale;
        f4 e = exp4(s);
        f4 sc = f4_select(s < lo, lo, s);   /* keeps 0 * -inf out of the sum */
        aw += __builtin_convertvector(e, d4);
        aws += __builtin_convertvector(e * sc, d4);
        if (w) {
            if (m >= 4) {
                f4_store(w + j, e);
            } else {
                float tail[4];
                f4_store(tail, e);
                memcpy(w + j, tail, (size_t)m * sizeof(float));
            }
        }
    }
    *sum_w += (aw[0] + aw[1]) + (aw[2] + aw[3]);
    *sum_ws += (aws[0] + aws[1]) + (aws[2] + aws[3]);
}

/* Copies x to a and b, returns max(x) and whether any value is NaN or +inf. */
static float scan_logits(const float *x, int V, float *a, float *b, bool *bad_out)
{
    const i4 absmask = {0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff};
    const i4 maxfinite = {0x7f7fffff, 0x7f7fffff, 0x7f7fffff, 0x7f7fffff};
    const i4 neginf = (i4)f4_splat(-INFINITY);
    f4 m = f4_splat(-INFINITY);
    i4 bad = {0, 0, 0, 0};
    int j = 0;
    for (; j + 4 <= V; j += 4) {
        f4 v = f4_load(x + j);
        f4_store(a + j, v);
        f4_store(b + j, v);
        i4 bits = (i4)v;
        bad |= ((bits & absmask) > maxfinite) & (bits != neginf);
        m = f4_select(v > m, v, m);
    }
    float mx = fmaxf(fmaxf(m[0], m[1]), fmaxf(m[2], m[3]));
    bool any = bad[0] | bad[1] | bad[2] | bad[3];
    for (; j < V; j++) {
        float v = x[j];
        a[j] = b[j] = v;
        any |= isnan(v) || v == INFINITY;
        mx = v > mx ? v : mx;
    }
    *bad_out = any;
    return mx;
}

/* max, min over finite values, and the number of finite values (no NaN or +inf present). */
static void scan_range(const float *z, int V, float *zmax, float *zmin, int *n_finite)
{
    const f4 ninf = f4_splat(-INFINITY), pinf = f4_splat(INFINITY);
    f4 mx = ninf, mn = pinf;
    i4 cnt = {0, 0, 0, 0};
    int j = 0;
    for (; j + 4 <= V; j += 4) {
        f4 v = f4_load(z + j);
        i4 fin = v != ninf;
        cnt -= fin;
        mx = f4_select(v > mx, v, mx);
        mn = f4_select(fin & (v < mn), v, mn);
    }
    float hi = fmaxf(fmaxf(mx[0], mx[1]), fmaxf(mx[2], mx[3]));
    float lo = fminf(fminf(mn[0], mn[1]), fminf(mn[2], mn[3]));
    int n = cnt[0] + cnt[1] + cnt[2] + cnt[3];
    for (; j < V; j++) {
        float v = z[j];
        if (v == -INFINITY)
            continue;
        n++;
        hi = v > hi ? v : hi;
        lo = v < lo ? v : lo;
    }
    *zmax = hi;
    *zmin = lo;
    *n_finite = n;
}

/* ---------------------------------------------------------------------------------------------
 * The sampler: token order by buckets, sorted lazily.
 *
 * Every filter keeps a prefix of one order (descending logit, ties by lower id), and the draw
 * walks that order. A full sort of 50257 tokens per step is too slow, so finite tokens go into
 * NB buckets by their distance below the top logit (a monotone map, so the bucket order agrees
 * with the token order), are scattered in bucket order, and a bucket is sorted only when a
 * boundary or a draw falls inside it. Per-bucket masses let a walk skip whole buckets. */

#define NB 4096                 /* buckets */
#define SPAN_NATS 32.0f         /* buckets cover this many nats (at the flattest temperature)
                                   below the top logit; the rest shares the last bucket, whose
                                   mass is below V * e^-32 */
#define TOP_P_SLACK 1e-6        /* a cumulative sum within this of top_p counts as reaching it */
#define INSERTION_MAX 48        /* buckets up to this size use insertion sort, larger ones radix */

struct sampler {
    int V;
    /* Indexed by token id: */
    float *raw;          /* (V) the caller's logits of the last apply */
    float *z;            /* (V) logits after mask and penalties, untempered */
    float *probs;        /* (V) the final distribution */
    uint16_t *bucket;    /* (V) bucket of each finite token; NB for -inf */
    int32_t *count;      /* (V) occurrences in the penalty window; all 0 between calls */
    uint8_t *penalized;  /* (V) a penalty changed this logit in the last apply */
    int32_t *touched;    /* (V) distinct ids of the last penalty window, to reset the two above */
    int n_touched;
    /* Indexed by position in the token order (valid for positions < n_pos): */
    int32_t *ids;        /* (V) token at each position; within an unsorted bucket, ascending id */
    float *zpos;         /* (V) z[ids[j]] */
    float *wpos;         /* (V) stage weight exp((z - zmax) / t_stage) of ids[j] */
    float *fpos;         /* (V) final weight exp((z - zmax) / t_final) of ids[j] */
    /* Radix sort scratch for large buckets: */
    uint32_t *key_a, *key_b;
    int32_t *id_b;
    /* Buckets: */
    int32_t start[NB + 2];   /* first position of each bucket, for buckets <= last_bucket + 1 */
    int32_t fill[NB + 1];
    int32_t cnt[NB + 1];
    uint8_t sorted[NB + 1];
    double smass[NB + 1];    /* stage weight of each bucket's positions below len_k */
    double fmass[NB + 1];    /* final probability of each bucket's positions below kept */
    int last_bucket;         /* buckets 0..last_bucket are scattered */
    int n_pos;               /* positions scattered */
    bool wpos_live;          /* re-derive wpos when a bucket is sorted */
    /* The last apply: */
    bool valid, greedy;
    int32_t argmax;
    float zmax, xmax, t_stage, t_final;
    double z_raw;            /* softmax normaliser of the raw logits (shifted by xmax) */
    int n_finite, len_k, len_p, len_m, kept, n_kept;
    int32_t edge_k, edge_p, edge_m;   /* last token a stage kept, -1 when it cut nothing */
    double mass_total;       /* sum of fmass */
    sampler_snapshot snap;   /* pre-draw fields */
};

sampler *sampler_create(int V)
{
    if (V < 1 || V > (1 << 28))
        return NULL;
    sampler *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    size_t n = (size_t)V;
    s->V = V;
    s->raw = malloc(n * sizeof *s->raw);
    s->z = malloc(n * sizeof *s->z);
    s->probs = malloc(n * sizeof *s->probs);
    s->bucket = malloc(n * sizeof *s->bucket);
    s->count = calloc(n, sizeof *s->count);
    s->penalized = calloc(n, sizeof *s->penalized);
    s->touched = malloc(n * sizeof *s->touched);
    s->ids = malloc(n * sizeof *s->ids);
    s->zpos = malloc(n * sizeof *s->zpos);
    s->wpos = malloc(n * sizeof *s->wpos);
    s->fpos = malloc(n * sizeof *s->fpos);
    s->key_a = malloc(n * sizeof *s->key_a);
    s->key_b = malloc(n * sizeof *s->key_b);
    s->id_b = malloc(n * sizeof *s->id_b);
    if (!s->raw || !s->z || !s->probs || !s->bucket || !s->count || !s->penalized ||
        !s->touched || !s->ids || !s->zpos || !s->wpos || !s->fpos || !s->key_a || !s->key_b ||
        !s->id_b) {
        sampler_free(s);
        return NULL;
    }
    return s;
}

void sampler_free(sampler *s)
{
    if (!s)
        return;
    free(s->raw);
    free(s->z);
    free(s->probs);
    free(s->bucket);
    free(s->count);
    free(s->penalized);
    free(s->touched);
    free(s->ids);
    free(s->zpos);
    free(s->wpos);
    free(s->fpos);
    free(s->key_a);
    free(s->key_b);
    free(s->id_b);
    free(s);
}

const float *sampler_probs(const sampler *s) { return s && s->valid ? s->probs : NULL; }

/* Does token a come after token b in the order? */
static inline bool ranks_after(const sampler *s, int32_t a, int32_t b)
{
    float za = s->z[a], zb = s->z[b];
    return za < zb || (za == zb && a > b);
}

/* A key whose ascending order is descending z (+0 and -0 are the same logit). */
static inline uint32_t order_key(float f)
{
    if (f == 0)
        f = 0.0f;
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
    return ~b;
}

/* Stable LSD radix sort of ids[lo, hi) by key (11-bit digits); input is in ascending id, so ties
 * stay by lower id. Passes whose digit is the same for every key are skipped. */
static void radix_sort_range(sampler *s, int lo, int hi)
{
    int n = hi - lo;
    uint32_t *ka = s->key_a, *kb = s->key_b;
    int32_t *ia = s->ids + lo, *ib = s->id_b;
    for (int j = 0; j < n; j++)
        ka[j] = order_key(s->zpos[lo + j]);
    static const int shift[3] = {0, 11, 22};
    for (int pass = 0; pass < 3; pass++) {
        int32_t h[2048] = {0};
        int sh = shift[pass];
        for (int j = 0; j < n; j++)
            h[(ka[j] >> sh) & 2047]++;
        if (h[(ka[0] >> sh) & 2047] == n)
            continue;
        int32_t sum = 0;
        for (int d = 0; d < 2048; d++) {
            int32_t c = h[d];
            h[d] = sum;
            sum += c;
        }
        for (int j = 0; j < n; j++) {
            int32_t at = h[(ka[j] >> sh) & 2047]++;
            kb[at] = ka[j];
            ib[at] = ia[j];
        }
        uint32_t *tk = ka;
        ka = kb;
        kb = tk;
        int32_t *ti = ia;
        ia = ib;
        ib = ti;
    }
    if (ia != s->ids + lo)
        memcpy(s->ids + lo, ia, (size_t)n * sizeof *ia);
    for (int j = 0; j < n; j++)
        s->zpos[lo + j] = s->z[s->ids[lo + j]];
}

static void sort_bucket(sampler *s, int b)
{
    if (s->sorted[b])
        return;
    s->sorted[b] = 1;
    int lo = s->start[b], hi = s->start[b + 1];
    if (hi - lo <= 1)
        return;
    if (hi - lo <= INSERTION_MAX) {
        for (int j = lo + 1; j < hi; j++) {
            int32_t id = s->ids[j];
            float zj = s->zpos[j];
            int k = j;
            /* ids arrive ascending, so "strictly greater z" keeps ties by lower id */
            while (k > lo && zj > s->zpos[k - 1]) {
                s->ids[k] = s->ids[k - 1];
                s->zpos[k] = s->zpos[k - 1];
                k--;
            }
            s->ids[k] = id;
            s->zpos[k] = zj;
        }
    } else {
        radix_sort_range(s, lo, hi);
    }
    if (s->wpos_live) {
        double unused_w = 0, unused_ws = 0;
        exp_pass(s->wpos + lo, s->zpos + lo, hi - lo, s->zmax, inv_temp(s->t_stage), &unused_w,
                 &unused_ws);
    }
}

/* The bucket holding position pos (< n_pos). */
static int bucket_of_pos(const sampler *s, int pos)
{
    int lo = 0, hi = s->last_bucket;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (s->start[mid] <= pos)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Sorts the bucket holding position len - 1 and returns that token: the last one of a prefix. */
static int32_t prefix_edge(sampler *s, int len)
{
    sort_bucket(s, bucket_of_pos(s, len - 1));
    return s->ids[len - 1];
}

/* Number of positions j < len whose stage mass before j is below target (at least 1). */
static int top_p_len(sampler *s, int len, double target)
{
    double cum = 0;
    for (int b = 0; b <= s->last_bucket; b++) {
        int lo = s->start[b], hi = s->start[b + 1] < len ? s->start[b + 1] : len;
        if (lo >= len)
            break;
        if (lo == hi)
            continue;
        if (cum + s->smass[b] < target) {
            cum += s->smass[b];
            continue;
        }
        sort_bucket(s, b);
        for (int j = lo; j < hi; j++) {
            if (cum >= target)
                return j > 0 ? j : 1;
            cum += s->wpos[j];
        }
        /* rounding: the bucket sum reached target but the walk did not; go on walking */
    }
    return len;
}

static sampler_cut cut_of(const sampler *s, int32_t id)
{
    if (s->z[id] == -INFINITY)
        return SAMPLER_CUT_BANNED;
    if (s->greedy)
        return id == s->argmax ? SAMPLER_CUT_NONE : SAMPLER_CUT_GREEDY;
    if (s->edge_k >= 0 && ranks_after(s, id, s->edge_k))
        return SAMPLER_CUT_TOP_K;
    if (s->edge_p >= 0 && ranks_after(s, id, s->edge_p))
        return SAMPLER_CUT_TOP_P;
    if (s->edge_m >= 0 && ranks_after(s, id, s->edge_m))
        return SAMPLER_CUT_MIN_P;
    return SAMPLER_CUT_NONE;
}

static float raw_prob(const sampler *s, int32_t id)
{
    return (float)(exp1(s->raw[id] - s->xmax) / s->z_raw);
}

static sampler_entry make_entry(const sampler *s, int32_t id)
{
    return (sampler_entry){
        .id = id,
        .logit = s->raw[id],
        .raw_p = raw_prob(s, id),
        .p = s->probs[id],
        .cut = (uint8_t)cut_of(s, id),
        .penalized = s->penalized[id] != 0,
    };
}

/* The SAMPLER_TOP_MAX most probable raw tokens, descending, ties by lower id. */
static void fill_top(sampler *s, sampler_snapshot *snap)
{
    int32_t id[SAMPLER_TOP_MAX];
    float x[SAMPLER_TOP_MAX];
    int n = 0;
    for (int i = 0; i < s->V; i++) {
        float v = s->raw[i];
        if (n == SAMPLER_TOP_MAX && !(v > x[n - 1]))
            continue;   /* the common case: one compare per token */
        int k = n < SAMPLER_TOP_MAX ? n++ : n - 1;
        while (k > 0 && v > x[k - 1]) {
            x[k] = x[k - 1];
            id[k] = id[k - 1];
            k--;
        }
        x[k] = v;
        id[k] = i;
    }
    snap->n_top = n;
    for (int k = 0; k < n; k++)
        snap->top[k] = make_entry(s, id[k]);
}

/* Mask and penalties over z; fails (counts reset) on a history id outside [0, V). */
static tt_status apply_penalties(sampler *s, const sampler_params *p, const sampler_context *ctx,
                                 tt_error *err)
{
    if (p->repetition_penalty == 1 && p->presence_penalty == 0 && p->frequency_penalty == 0)
        return TT_OK;
    if (!ctx || ctx->n_history <= 0 || p->penalty_window == 0)
        return TT_OK;
    int n = ctx->n_history;
    int from = (p->penalty_window < 0 || p->penalty_window >= n) ? 0 : n - p->penalty_window;
    for (int i = from; i < n; i++)
        if (ctx->history[i] < 0 || ctx->history[i] >= s->V)
            return tt_fail(err, TT_ERR_ARG,
                           "sampler: history[%d]: token %d is outside the vocabulary [0, %d)", i,
                           (int)ctx->history[i], s->V);
    for (int i = from; i < n; i++) {
        int32_t t = ctx->history[i];
        if (s->count[t]++ == 0)
            s->touched[s->n_touched++] = t;
    }
    double r = p->repetition_penalty;
    for (int k = 0; k < s->n_touched; k++) {
        int32_t t = s->touched[k];
        double c = s->count[t];
        s->count[t] = 0;
        float old = s->z[t];
        if (old == -INFINITY)
            continue;   /* masked stays masked */
        double v = old;
        if (r != 1)
            v = v > 0 ? v / r : v * r;
        v -= c * p->frequency_penalty + p->presence_penalty;
        v = v > FLT_MAX ? FLT_MAX : v < -FLT_MAX ? -FLT_MAX : v;
        if ((float)v != old) {
            s->z[t] = (float)v;
            s->penalized[t] = 1;
        }
    }
    return TT_OK;
}

/* The non-greedy chain over z: top-k, top-p, min-p, temperature; fills probs. */
static void run_chain(sampler *s, const sampler_params *p, float zmin)
{
    const bool use_p = p->top_p < 1, use_m = p->min_p > 0;
    s->t_final = p->temperature;
    s->t_stage = p->order == SAMPLER_ORDER_HF ? p->temperature : 1.0f;
    float t_flat = (use_p || use_m) ? fmaxf(s->t_stage, s->t_final) : s->t_final;

    /* Buckets: distance below zmax, linear, over the actual range up to SPAN_NATS * t_flat. */
    float span = fminf(s->zmax - zmin, SPAN_NATS * t_flat);
    double scale = span > 0 ? (NB - 1) / (double)span : 0;
    memset(s->cnt, 0, sizeof s->cnt);
    for (int i = 0; i < s->V; i++) {
        float zi = s->z[i];
        if (zi == -INFINITY) {
            s->bucket[i] = NB;
            continue;
        }
        double q = (double)(s->zmax - zi) * scale;
        int b = q < NB - 1 ? (int)q : NB - 1;
        s->bucket[i] = (uint16_t)b;
        s->cnt[b]++;
    }

    /* top-k decides how many buckets need scattering at all. */
    s->len_k = (p->top_k > 0 && p->top_k < s->n_finite) ? p->top_k : s->n_finite;
    int last = 0, acc = 0;
    for (int b = 0; b < NB; b++) {
        s->start[b] = acc;
        s->fill[b] = acc;
        s->sorted[b] = 0;
        acc += s->cnt[b];
        last = b;
        if (acc >= s->len_k)
            break;
    }
    s->start[last + 1] = acc;
    s->last_bucket = last;
    s->n_pos = acc;
    for (int i = 0; i < s->V; i++) {
        int b = s->bucket[i];
        if (b <= last) {
            int j = s->fill[b]++;
            s->ids[j] = i;
            s->zpos[j] = s->z[i];
        }
    }
    s->edge_k = s->len_k < s->n_finite ? prefix_edge(s, s->len_k) : -1;

    /* top-p and min-p on the stage distribution (tempered in HF order, untempered in llama). */
    s->len_p = s->len_m = s->len_k;
    s->edge_p = s->edge_m = -1;
    if (use_p || use_m) {
        double w = 0, ws = 0;
        exp_pass(s->wpos, s->zpos, s->n_pos, s->zmax, inv_temp(s->t_stage), &w, &ws);
        s->wpos_live = true;
        double total = 0;
        for (int b = 0; b <= last; b++) {
            int lo = s->start[b], hi = s->start[b + 1] < s->len_k ? s->start[b + 1] : s->len_k;
            double m = 0;
            for (int j = lo; j < hi; j++)
                m += s->wpos[j];
            s->smass[b] = m;
            total += m;
        }
        if (use_p) {
            s->len_p = top_p_len(s, s->len_k, ((double)p->top_p - TOP_P_SLACK) * total);
            if (s->len_p < s->len_k)
                s->edge_p = prefix_edge(s, s->len_p);
        }
        s->len_m = s->len_p;
        if (use_m) {
            /* p_i >= min_p * p_max with p_max's weight exactly 1 (s = 0 at zmax) */
            int keep = 0;
            for (int j = 0; j < s->len_p; j++)
                keep += s->wpos[j] >= p->min_p;
            if (keep < 1)
                keep = 1;
            if (keep < s->len_p) {
                s->len_m = keep;
                s->edge_m = prefix_edge(s, keep);
            }
        }
        s->wpos_live = false;
    }
    s->kept = s->len_m;

    /* Temperature and normalisation over the kept prefix. */
    double w = 0, ws = 0;
    exp_pass(s->fpos, s->zpos, s->kept, s->zmax, inv_temp(s->t_final), &w, &ws);
    memset(s->probs, 0, (size_t)s->V * sizeof *s->probs);
    double inv = 1.0 / w;
    int n_kept = 0;
    double total = 0;
    int kb = bucket_of_pos(s, s->kept - 1);
    for (int b = 0; b <= kb; b++) {
        int lo = s->start[b], hi = s->start[b + 1] < s->kept ? s->start[b + 1] : s->kept;
        double m = 0;
        for (int j = lo; j < hi; j++) {
            float pj = (float)(s->fpos[j] * inv);
            s->probs[s->ids[j]] = pj;
            m += pj;
            n_kept += pj > 0;
        }
        s->fmass[b] = m;
        total += m;
    }
    s->n_kept = n_kept;
    s->mass_total = total;
    double h = (log(w) - ws / w) / M_LN2;
    s->snap.entropy_final = (float)(h > 0 ? h : 0);
}

tt_status sampler_apply(sampler *s, const sampler_params *p, const float *logits,
                        const sampler_context *ctx, sampler_snapshot *snap, tt_error *err)
{
    s->valid = false;
    for (int k = 0; k < s->n_touched; k++)
        s->penalized[s->touched[k]] = 0;
    s->n_touched = 0;
    tt_status st = sampler_params_validate(p, err);
    if (st != TT_OK)
        return st;
    int32_t banned = ctx ? ctx->banned : -1;
    if (banned < -1 || banned >= s->V)
        return tt_fail(err, TT_ERR_ARG, "sampler: banned token %d is outside [0, %d)",
                       (int)banned, s->V);
    if (ctx && ctx->n_history > 0 && !ctx->history)
        return tt_fail(err, TT_ERR_ARG, "sampler: history of %d tokens is NULL",
                       ctx->n_history);

    bool bad;
    s->xmax = scan_logits(logits, s->V, s->raw, s->z, &bad);
    if (bad) {
        for (int i = 0; i < s->V; i++)
            if (isnan(logits[i]) || logits[i] == INFINITY)
                return tt_fail(err, TT_ERR_NUMERIC, "sampler: logits[%d] is %s", i,
                               isnan(logits[i]) ? "NaN" : "+inf");
    }
    if (s->xmax == -INFINITY)
        return tt_fail(err, TT_ERR_NUMERIC, "sampler: every logit is -inf (%d tokens)", s->V);
    double z_raw = 0, zs_raw = 0;
    exp_pass(NULL, s->raw, s->V, s->xmax, 1.0f, &z_raw, &zs_raw);
    s->z_raw = z_raw;

    if (banned >= 0)
        s->z[banned] = -INFINITY;
    if ((st = apply_penalties(s, p, ctx, err)) != TT_OK)
        return st;
    float zmin;
    scan_range(s->z, s->V, &s->zmax, &zmin, &s->n_finite);
    if (s->n_finite == 0)
        return tt_fail(err, TT_ERR_NUMERIC,
                       "sampler: no token left: every logit is -inf after masking token %d",
                       (int)banned);

    memset(&s->snap, 0, sizeof s->snap);
    s->greedy = p->greedy || p->temperature == 0;
    s->edge_k = s->edge_p = s->edge_m = -1;
    if (s->greedy) {
        int32_t a = 0;
        while (s->z[a] != s->zmax)
            a++;
        s->argmax = a;
        memset(s->probs, 0, (size_t)s->V * sizeof *s->probs);
        s->probs[a] = 1;
        s->n_kept = s->kept = 1;
        s->mass_total = 1;
        s->snap.entropy_final = 0;
    } else {
        run_chain(s, p, zmin);
    }
    s->valid = true;

    double h_raw = (log(z_raw) - zs_raw / z_raw) / M_LN2;
    s->snap.entropy_raw = (float)(h_raw > 0 ? h_raw : 0);
    s->snap.n_kept = s->n_kept;
    s->snap.token = -1;
    s->snap.token_rank = -1;
    s->snap.u = -1;
    fill_top(s, &s->snap);
    if (snap)
        *snap = s->snap;
    return TT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Draw and force */

static void fill_choice(sampler *s, int32_t id, int rank, double u, double cum_lo, bool forced,
                        sampler_snapshot *snap)
{
    if (!snap)
        return;
    *snap = s->snap;
    snap->token = id;
    snap->token_p = s->probs[id];
    snap->token_raw_p = raw_prob(s, id);
    snap->token_rank = rank;
    snap->u = u;
    snap->cum_lo = cum_lo;
    snap->forced = forced;
    for (int k = 0; k < snap->n_top; k++)
        if (snap->top[k].id == id)
            return;
    snap->top[snap->n_top++] = make_entry(s, id);
}

int32_t sampler_draw(sampler *s, double u, sampler_snapshot *snap)
{
    if (!s || !s->valid)
        return -1;
    if (s->greedy) {
        fill_choice(s, s->argmax, 0, -1, 0, false, snap);
        return s->argmax;
    }
    if (!(u >= 0))
        u = 0;
    if (u >= 1)
        u = nextafter(1.0, 0.0);
    double cum = 0;
    int kb = bucket_of_pos(s, s->kept - 1);
    for (int b = 0; b <= kb; b++) {
        int lo = s->start[b], hi = s->start[b + 1] < s->kept ? s->start[b + 1] : s->kept;
        if (lo == hi || cum + s->fmass[b] <= u) {
            cum += s->fmass[b];
            continue;
        }
        sort_bucket(s, b);
        for (int j = lo; j < hi; j++) {
            double next = cum + s->probs[s->ids[j]];
            if (next > u) {
                fill_choice(s, s->ids[j], j, u, cum, false, snap);
                return s->ids[j];
            }
            cum = next;
        }
        /* rounding: the bucket sum exceeded u but the walk did not; go on walking */
    }
    /* u beyond the summed mass (float rounding): the last token with p > 0 takes it. */
    int32_t id = prefix_edge(s, s->n_kept);
    fill_choice(s, id, s->n_kept - 1, u, cum - s->probs[id], false, snap);
    return id;
}

int32_t sampler_force(sampler *s, int32_t id, sampler_snapshot *snap)
{
    if (!s || !s->valid || id < 0 || id >= s->V)
        return -1;
    int rank = -1;
    double cum_lo = 0;
    if (s->greedy) {
        rank = id == s->argmax ? 0 : -1;
    } else if (s->probs[id] > 0) {
        int b = s->bucket[id];
        sort_bucket(s, b);
        for (int k = 0; k < b; k++)
            cum_lo += s->fmass[k];
        for (int j = s->start[b]; j < s->start[b + 1]; j++) {
            if (s->ids[j] == id) {
                rank = j;
                break;
            }
            cum_lo += s->probs[s->ids[j]];
        }
    }
    fill_choice(s, id, rank, -1, cum_lo, true, snap);
    return id;
}
