/* sampler.c: the logit-processing chain (mask, penalties, temperature, top-k, top-p, min-p), the
 * draw, and the per-step snapshot. Semantics are stated in sampler.h. */
#include "core/decode/sampler.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/base/util.h"

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
    long l;
    util_parse_result r = starts_like_number(v) ? util_parse_long(v, INT_MIN, INT_MAX, &l)
                                                : UTIL_PARSE_NOT_INTEGER;
    if (r == UTIL_PARSE_NOT_INTEGER)
        return tt_fail(err, TT_ERR_ARG, "%s: \"%s\" is not an integer", field, v);
    if (r == UTIL_PARSE_OUT_OF_RANGE)
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
 * Vector passes: the 4-lane set is compiled here; wider ones come from sampler_avx2.c and
 * sampler_avx512.c (see sampler_kernels.h). */

#define SAMPLER_VW 4
#define SAMPLER_KERNELS kernels_vec4
#include "core/decode/sampler_kernels.h"

/* The widest set this CPU runs, or the one named ("vec4", "avx2", "avx512"); NULL when the name
 * is unknown or the CPU or the build lacks it. */
static const sampler_kernels *kernels_pick(const char *name)
{
    bool any = !name || !*name;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    bool fma = __builtin_cpu_supports("fma");
    bool avx2 = fma && __builtin_cpu_supports("avx2");
    bool avx512 = fma && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    if ((any || strcmp(name, "avx512") == 0) && avx512)
        return sampler_kernels_avx512();
    if ((any || strcmp(name, "avx2") == 0) && avx2)
        return sampler_kernels_avx2();
#endif
    if (any || strcmp(name, "vec4") == 0)
        return &kernels_vec4;
    return NULL;
}

/* exp(x) for x <= 0 with the kernels' formula, for the few scalar uses. */
static inline float exp1(float x) { return sk_exp(sk_splat(x))[0]; }

/* 1 / T, finite even for a denormal T (0 * inf would make NaN of the top token's weight). */
static inline float inv_temp(float t) { return 1.0f / t < FLT_MAX ? 1.0f / t : FLT_MAX; }

#define EXP_LO SK_EXP_LO

/* ---------------------------------------------------------------------------------------------
 * The sampler: one token order, sorted lazily by buckets.
 *
 * Every filter keeps a prefix of one order (descending logit, ties by lower id), and the draw
 * walks that order. Sorting 50257 tokens per step would take most of the budget (a full sort costs
 * many times the whole chain: docs/performance.md), so each finite token gets a bucket by its
 * distance below the top logit (a monotone map: the bucket order agrees with the token order).
 * One scalar pass counts tokens and sums weights per bucket; a bucket's members are gathered (a
 * vector scan) and sorted only when a boundary or a draw falls inside it, and walks skip whole
 * buckets by their sums. Weights and probabilities are computed per token id in vector passes. A
 * position is a token's 0-based rank in the order: bucket b holds positions pstart[b] ..
 * pstart[b] + cnt[b] - 1.
 *
 * Three regimes, by how much top-k leaves:
 *   full        no top-k cut (or a long one): weights for every token, the bucket pass with
 *               sums, normalisation as a vector pass;
 *   short list  k <= SHORT_LIST: the bucket pass only counts, the buckets holding the top k are
 *               gathered and sorted outright, and only those tokens get weights;
 *   tiny        k <= TINY_K: no buckets at all; vector counts bisect for a threshold about k
 *               tokens reach, and those tokens, gathered and sorted, give the
 *               top k, which become bucket 0.
 * The raw distribution (entropy, raw_p, the top list) is computed only when a snapshot is asked
 * for, or for free when its weights are the final ones (temperature 1, nothing masked). */

#define NB 4096                 /* buckets */
#define SPAN_NATS 32.0f         /* buckets cover this many nats (at the flattest temperature in
                                   use) below the top logit; the rest shares the last bucket, whose
                                   mass is below V * e^-32 */
#define TOP_P_SLACK 1e-6        /* a cumulative sum within this of top_p counts as reaching it */
#define INSERTION_MAX 48        /* buckets up to this size use insertion sort, larger ones radix */
#define TINY_K 1024             /* top-k up to this is selected by a threshold and a sort,
                                   without buckets */
#define SHORT_LIST 4096         /* top-k: when the buckets holding the top k have at most this
                                   many tokens, they are sorted outright and only they get
                                   weights (the short-list regime) */
#define TOP_M SAMPLER_TOP_MAX
#define SORT_KEYS_MAX 256       /* the tiny regime's candidates up to this many are sorted as
                                   packed keys by insertion, more (ties) by the radix sort */

struct sampler {
    int V;
    const sampler_kernels *k;
    /* Indexed by token id: */
    float *raw;          /* (V) the caller's logits of the last apply */
    float *z;            /* (V) logits after mask and penalties, untempered: raw itself until a
                            ban or a penalty changes one (see z_writable) */
    float *zbuf;         /* (V) z's own storage once it differs from raw */
    float *wfin;         /* (V) final weight exp((z - zmax) / T), not normalised */
    float *wstage;       /* (V) top-p weight in llama order, when its temperature differs */
    float *probs;        /* (V) the final distribution */
    uint16_t *bucket;    /* (V) bucket of each finite token; NB for -inf */
    int32_t *count;      /* (V) occurrences in the penalty window; all 0 between calls */
    uint8_t *penalized;  /* (V) a penalty changed this logit in the last apply */
    int32_t *touched;    /* (V) distinct ids of the last penalty window, to reset the two above */
    int n_touched;
    /* Gathered buckets, each sorted: */
    int32_t *pool;       /* (V) */
    int pool_n;
    int32_t where[NB + 1];   /* offset of bucket b's members in pool; -1 until gathered */
    bool one_bucket;         /* the tiny regime: every kept token is in bucket 0 and the other
                                buckets' entries are stale (never read) */
    /* Radix sort scratch for large buckets, and the short list's logits and weights: */
    uint32_t *key_a, *key_b;
    int32_t *id_b;
    float *list_z, *list_w;   /* (min(V, 2 * SHORT_LIST)) */
    uint64_t sel[SORT_KEYS_MAX];  /* the tiny regime's candidates as (order key, id) */
    /* Per bucket: */
    int32_t cnt[NB + 1];
    int32_t pstart[NB + 1];
    double fmass[NB + 1];    /* final weight per bucket; after apply, the kept part times inv_w */
    double smass[NB + 1];    /* top-p weight per bucket, when wstage is used */
    /* The last apply: */
    bool valid, greedy;
    int32_t argmax;
    float zmax, xmax;
    float zmin;              /* the smallest finite z */
    float xmin;              /* the smallest finite raw logit */
    int n_finite_raw;        /* finite raw logits */
    double z_raw;            /* softmax normaliser of the raw logits (shifted by xmax) */
    int n_finite, kept, kept_bucket, n_kept;
    double inv_w;            /* 1 / (sum of wfin over the kept tokens): p_i = wfin[i] * inv_w */
    float temp;              /* the temperature of the last apply */
    double z_temp;           /* sum of exp((z - zmax) / temp) over the vocabulary: the
                                snapshot's temp_p normaliser (0 until snapshot() needs it) */
    int32_t edge_k, edge_p, edge_m;   /* last token a stage kept, -1 when it cut nothing */
    sampler_snapshot snap;   /* pre-draw fields; raw ones and the top list once snap_ready */
    bool raw_ready;          /* z_raw and snap.entropy_raw are computed */
    bool snap_ready;
};

sampler *sampler_create(int V) { return sampler_create_with(V, NULL); }

sampler *sampler_create_with(int V, const char *kernels)
{
    const sampler_kernels *k = kernels_pick(kernels);
    if (V < 1 || V > (1 << 28) || !k)
        return NULL;
    sampler *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    size_t n = (size_t)V;
    s->V = V;
    s->k = k;
    s->raw = malloc(n * sizeof *s->raw);
    s->zbuf = malloc(n * sizeof *s->zbuf);
    s->wfin = malloc(n * sizeof *s->wfin);
    s->wstage = malloc(n * sizeof *s->wstage);
    s->probs = malloc(n * sizeof *s->probs);
    s->bucket = malloc(n * sizeof *s->bucket);
    s->count = calloc(n, sizeof *s->count);
    s->penalized = calloc(n, sizeof *s->penalized);
    s->touched = malloc(n * sizeof *s->touched);
    s->pool = malloc(n * sizeof *s->pool);
    s->key_a = malloc(n * sizeof *s->key_a);
    s->key_b = malloc(n * sizeof *s->key_b);
    s->id_b = malloc(n * sizeof *s->id_b);
    size_t list = n < 2 * SHORT_LIST ? n : 2 * SHORT_LIST;   /* the longest short list */
    s->list_z = malloc(list * sizeof *s->list_z);
    s->list_w = malloc(list * sizeof *s->list_w);
    if (!s->raw || !s->zbuf || !s->wfin || !s->wstage || !s->probs || !s->bucket || !s->count ||
        !s->penalized || !s->touched || !s->pool || !s->key_a || !s->key_b || !s->id_b ||
        !s->list_z || !s->list_w) {
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
    free(s->zbuf);
    free(s->wfin);
    free(s->wstage);
    free(s->probs);
    free(s->bucket);
    free(s->count);
    free(s->penalized);
    free(s->touched);
    free(s->pool);
    free(s->key_a);
    free(s->key_b);
    free(s->id_b);
    free(s->list_z);
    free(s->list_w);
    free(s);
}

const float *sampler_probs(const sampler *s) { return s && s->valid ? s->probs : NULL; }

const char *sampler_kernels_name(const sampler *s) { return s->k->name; }

const float *sampler_penalized_logits(const sampler *s) { return s && s->valid ? s->z : NULL; }

/* Does token a come after token b in the order of z? */
static inline bool worse(const float *z, int32_t a, int32_t b)
{
    return z[a] < z[b] || (z[a] == z[b] && a > b);
}

static inline bool ranks_after(const sampler *s, int32_t a, int32_t b) { return worse(s->z, a, b); }

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

/* Sorts ids[0, n) (ascending on entry) into the order. Insertion sort for small n, else a stable
 * LSD radix sort on 11-bit digits of the key, skipping digits that every key shares. Both are
 * stable, so ties stay by lower id. */
static void sort_ids(sampler *s, int32_t *ids, int n)
{
    const float *z = s->z;
    if (n <= INSERTION_MAX) {
        for (int j = 1; j < n; j++) {
            int32_t id = ids[j];
            float zj = z[id];
            int k = j;
            while (k > 0 && zj > z[ids[k - 1]]) {
                ids[k] = ids[k - 1];
                k--;
            }
            ids[k] = id;
        }
        return;
    }
    uint32_t *ka = s->key_a, *kb = s->key_b;
    int32_t *ia = ids, *ib = s->id_b;
    uint32_t differ = 0;   /* the bits in which some key differs from the first */
    for (int j = 0; j < n; j++) {
        ka[j] = order_key(z[ids[j]]);
        differ |= ka[j] ^ ka[0];
    }
    for (int shift = 0; shift < 32; shift += 11) {
        if (((differ >> shift) & 2047) == 0)
            continue;   /* every key has this digit: the pass would not move anything */
        int32_t h[2048] = {0};
        for (int j = 0; j < n; j++)
            h[(ka[j] >> shift) & 2047]++;
        int32_t sum = 0;
        for (int d = 0; d < 2048; d++) {
            int32_t c = h[d];
            h[d] = sum;
            sum += c;
        }
        for (int j = 0; j < n; j++) {
            int32_t at = h[(ka[j] >> shift) & 2047]++;
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
    if (ia != ids)
        memcpy(ids, ia, (size_t)n * sizeof *ids);
}

/* Bucket b's members in order, gathering and sorting them on first use in this apply. */
static const int32_t *bucket_ids(sampler *s, int b)
{
    if (s->where[b] >= 0)
        return s->pool + s->where[b];
    int32_t *out = s->pool + s->pool_n;
    s->where[b] = s->pool_n;
    s->pool_n += s->cnt[b];
    s->k->gather(s->bucket, s->V, b, b, out, s->cnt[b]);
    sort_ids(s, out, s->cnt[b]);
    return out;
}

/* The bucket holding position pos (< n_finite). */
static int bucket_of_pos(const sampler *s, int pos)
{
    if (s->one_bucket)
        return 0;
    int lo = 0, hi = NB - 1;
    while (lo < hi) {   /* the last bucket whose start is <= pos: never an empty one */
        int mid = (lo + hi + 1) / 2;
        if (s->pstart[mid] <= pos)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static int32_t token_at(sampler *s, int pos)
{
    int b = bucket_of_pos(s, pos);
    return bucket_ids(s, b)[pos - s->pstart[b]];
}

/* Assigns every token its bucket and counts them; with wf, also sums the final (and with ws the
 * top-p) weights per bucket. */
static void bucket_pass(sampler *s, float scale, const float *wf, const float *ws)
{
    const uint16_t *bk = s->bucket;
    int32_t *cnt = s->cnt;
    double *fm = s->fmass, *sm = s->smass;
    s->one_bucket = false;
    memset(s->cnt, 0, sizeof s->cnt);
    memset(s->fmass, 0, sizeof s->fmass);
    memset(s->smass, 0, sizeof s->smass);
    s->k->bucket_index(s->bucket, s->z, s->V, s->zmax, scale, NB);
    /* masked tokens (bucket NB, weight 0) land in the spare slot NB: no branch */
    if (!wf) {
        for (int i = 0, V = s->V; i < V; i++)
            cnt[bk[i]]++;
    } else if (!ws) {
        for (int i = 0, V = s->V; i < V; i++) {
            cnt[bk[i]]++;
            fm[bk[i]] += wf[i];
        }
    } else {
        for (int i = 0, V = s->V; i < V; i++) {
            cnt[bk[i]]++;
            fm[bk[i]] += wf[i];
            sm[bk[i]] += ws[i];
        }
    }
    int32_t acc = 0;
    for (int b = 0; b < NB; b++) {
        s->pstart[b] = acc;
        acc += cnt[b];
        s->where[b] = -1;
    }
    s->pool_n = 0;
}

/* Weight of positions [pstart[b], end) of bucket b: the bucket sum, or members when partial. */
static double bucket_mass(sampler *s, int b, int end, const double *mass, const float *w)
{
    int take = end - s->pstart[b];
    if (take >= s->cnt[b])
        return mass[b];
    const int32_t *ids = bucket_ids(s, b);
    double m = 0;
    for (int j = 0; j < take; j++)
        m += w[ids[j]];
    return m;
}

/* top-p over positions [0, len): how many positions have weight before them < target (>= 1). */
static int top_p_len(sampler *s, int len, double target, const double *mass, const float *w)
{
    double cum = 0;
    int last = bucket_of_pos(s, len - 1);
    for (int b = 0; b <= last; b++) {
        if (s->cnt[b] == 0)
            continue;
        int end = b < last ? s->pstart[b] + s->cnt[b] : len;
        double m = bucket_mass(s, b, end, mass, w);
        if (cum + m < target) {
            cum += m;
            continue;
        }
        const int32_t *ids = bucket_ids(s, b);
        for (int pos = s->pstart[b]; pos < end; pos++) {
            if (cum >= target)
                return pos > 0 ? pos : 1;
            cum += w[ids[pos - s->pstart[b]]];
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

/* After mask, penalties and temperature, before any truncation (the histogram's temperature
 * column): greedy is temperature 0, all the mass on the argmax. */
static float temp_prob(const sampler *s, int32_t id)
{
    if (s->greedy)
        return id == s->argmax ? 1.0f : 0.0f;
    if (!(s->z_temp > 0) || s->z[id] == -INFINITY)
        return 0.0f;
    return (float)(exp(((double)s->z[id] - s->zmax) / s->temp) / s->z_temp);
}

static sampler_entry make_entry(const sampler *s, int32_t id)
{
    return (sampler_entry){
        .id = id,
        .logit = s->raw[id],
        .raw_p = raw_prob(s, id),
        .temp_p = temp_prob(s, id),
        .p = s->probs[id],
        .cut = (uint8_t)cut_of(s, id),
        .penalized = s->penalized[id] != 0,
    };
}

/* A vector x over the vocabulary with what a threshold search needs: its largest and smallest
 * finite values and how many are finite. */
typedef struct {
    const float *x;
    float max, min;
    int n_finite;
} order_src;

/* The number of tokens with x >= t (count_at_least with no shift and scale 1 compares x itself:
 * x - 0 and x * 1 are exact). */
static int count_from(const sampler *s, const float *x, float t)
{
    return s->k->count_at_least(x, s->V, 0.0f, 1.0f, t);
}

/* A threshold t with at least k tokens at x >= t (1 <= k < n_finite), and hardly more than k: a
 * bisection on the value between the top (fewer than k there, unless k tie at it) and a point k
 * tokens reach, each step one vector count. It stops once the count is within TOP_SLACK of k, or
 * when the interval cannot shrink (ties: then the count is what it is). Every token tied with the
 * k-th has x >= t, so the tokens at or above t hold exactly the first k of the order (descending,
 * ties by lower id) and more only after them. *n_at gets the count at t. */
#define TOP_SLACK(k) ((k) / 4 + 8)
static float top_threshold(const sampler *s, const order_src *o, int k, int *n_at)
{
    float hi = o->max;
    int c = count_from(s, o->x, hi);
    if (c >= k) {                     /* k or more tie at the top */
        *n_at = c;
        return hi;
    }
    /* hi: fewer than k at or above; lo: k or more. Steps of 1, 4, 16 ... below the top find a lo
     * quickly (a language model's top k lie a few nats down); the smallest finite value always
     * qualifies. */
    float lo = o->min, step = 1.0f;
    int c_lo = o->n_finite;
    for (int i = 0; i < 8; i++, step *= 4.0f) {
        float t = o->max - step;
        if (!(t > o->min))
            break;
        c = count_from(s, o->x, t);
        if (c >= k) {
            lo = t;
            c_lo = c;
            break;
        }
        hi = t;
    }
    for (int i = 0; i < 64 && c_lo > k + TOP_SLACK(k); i++) {
        float mid = lo * 0.5f + hi * 0.5f;   /* no overflow across the whole range */
        if (!(mid > lo && mid < hi))
            break;                   /* adjacent floats: the count at lo is all ties */
        c = count_from(s, o->x, mid);
        if (c >= k) {
            lo = mid;
            c_lo = c;
        } else {
            hi = mid;
        }
    }
    *n_at = c_lo;
    return lo;
}

/* The n tokens with x >= t into ids, ascending (a vector scan). */
static int gather_from(const sampler *s, const float *x, float t, int n, int32_t *ids)
{
    float above = nextafterf(t, -INFINITY);   /* x > above is x >= t */
    int m = 0;
    for (int i = 0; m < n && (i = s->k->find_above(x, i, s->V, above)) < s->V; i++)
        ids[m++] = i;
    return m;
}

/* ids[0, n) (n <= SORT_KEYS_MAX) put in the order of x (descending, ties by lower id), the first k
 * into out (which may be ids): packed keys, (order_key(x) << 32 | id), sorted by insertion (n is
 * about k here). */
static void sort_first_k(sampler *s, const float *x, const int32_t *ids, int n, int k,
                         int32_t *out)
{
    uint64_t *sel = s->sel;
    for (int j = 0; j < n; j++)
        sel[j] = (uint64_t)order_key(x[ids[j]]) << 32 | (uint32_t)ids[j];
    for (int j = 1; j < n; j++) {
        uint64_t v = sel[j];
        int i = j;
        while (i > 0 && sel[i - 1] > v) {
            sel[i] = sel[i - 1];
            i--;
        }
        sel[i] = v;
    }
    for (int j = 0; j < k; j++)
        out[j] = (int32_t)(uint32_t)sel[j];
}

/* Inserts (v, i) into the descending list x/id of n (<= TOP_M) entries; ties stay by lower id
 * because ids arrive ascending and only a strictly larger value moves up. */
static int top_insert(float *x, int32_t *id, int n, float v, int32_t i)
{
    int k = n < TOP_M ? n++ : n - 1;
    while (k > 0 && v > x[k - 1]) {
        x[k] = x[k - 1];
        id[k] = id[k - 1];
        k--;
    }
    x[k] = v;
    id[k] = i;
    return n;
}

/* The TOP_M (or V) most probable raw tokens into id, descending, ties by lower id; returns how
 * many. The head of the tiny regime's top-k list when that is the same order; else when more
 * than TOP_M raw logits are finite, by a threshold (top_threshold) and a sort of
 * the few tokens reaching it; else (or when ties bring more than SORT_KEYS_MAX to the
 * threshold) by insertion into a list of TOP_M fed by a scan for tokens above its last. */
static int select_top(sampler *s, int32_t *id)
{
    const float *raw = s->raw;
    if (s->z == raw && s->one_bucket && s->cnt[0] >= TOP_M) {
        /* nothing changed a logit and the tiny top-k list (sorted, in pool) is at least as long:
         * its head is the answer */
        memcpy(id, s->pool, TOP_M * sizeof *id);
        return TOP_M;
    }
    if (s->V > TOP_M && s->n_finite_raw > TOP_M) {
        order_src o = {raw, s->xmax, s->xmin, s->n_finite_raw};
        int n_at;
        float t = top_threshold(s, &o, TOP_M, &n_at);
        if (n_at <= SORT_KEYS_MAX) {
            int32_t cand[SORT_KEYS_MAX];
            int n = gather_from(s, raw, t, n_at, cand);
            sort_first_k(s, raw, cand, n, TOP_M, id);
            return TOP_M;
        }
    }
    float x[TOP_M];
    int n = 0, i = 0, V = s->V;
    for (; i < V && n < TOP_M; i++)
        n = top_insert(x, id, n, raw[i], i);
    /* then only tokens above the current 32nd, found a vector at a time */
    while (n == TOP_M && (i = s->k->find_above(raw, i, V, x[TOP_M - 1])) < V) {
        n = top_insert(x, id, n, raw[i], i);
        i++;
    }
    return n;
}

/* The raw distribution's normaliser and entropy (and exp(raw - xmax) into w when not NULL). */
static void raw_pass(sampler *s, float *w)
{
    double z_raw = 0, zs_raw = 0;
    s->k->exp_pass(w, s->raw, s->V, s->xmax, 1.0f, &z_raw, &zs_raw);
    s->z_raw = z_raw;
    double h = (log(z_raw) - zs_raw / z_raw) / M_LN2;
    s->snap.entropy_raw = (float)(h > 0 ? h : 0);
    s->raw_ready = true;
}

/* The pre-draw snapshot of the last apply, completed on first use: callers that only need the
 * distribution (speculative verification) skip the raw pass and the top list. */
static const sampler_snapshot *snapshot(sampler *s)
{
    if (s->snap_ready)
        return &s->snap;
    if (!s->raw_ready)
        raw_pass(s, NULL);
    if (!s->greedy && !(s->z_temp > 0)) {   /* one pass over V, for the shown snapshots only */
        double zt = 0, inv = 1.0 / s->temp;
        for (int i = 0; i < s->V; i++)
            if (s->z[i] != -INFINITY)
                zt += exp(((double)s->z[i] - s->zmax) * inv);
        s->z_temp = zt;
    }
    int32_t top[TOP_M];
    int n_top = select_top(s, top);
    s->snap.n_top = n_top;
    for (int k = 0; k < n_top; k++)
        s->snap.top[k] = make_entry(s, top[k]);
    s->snap_ready = true;
    return &s->snap;
}

/* z, made a copy of raw first if it still is raw: most steps change no logit and skip the copy. */
static float *z_writable(sampler *s)
{
    if (s->z == s->raw) {
        memcpy(s->zbuf, s->raw, (size_t)s->V * sizeof *s->zbuf);
        s->z = s->zbuf;
    }
    return s->z;
}

/* Penalties over z; fails (and counts nothing) on a history id outside [0, V). Sets *changed when
 * a logit changed. */
static tt_status apply_penalties(sampler *s, const sampler_params *p, const sampler_context *ctx,
                                 bool *changed, tt_error *err)
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
            z_writable(s)[t] = (float)v;
            s->penalized[t] = 1;
            *changed = true;
        }
    }
    return TT_OK;
}

/* Sums wf (and ws) per bucket over every token, for buckets already assigned. */
static void bucket_mass_pass(sampler *s, const float *wf, const float *ws)
{
    const uint16_t *bk = s->bucket;
    double *fm = s->fmass, *sm = s->smass;
    for (int i = 0, V = s->V; i < V; i++) {
        int b = bk[i];
        if (b == NB)
            continue;
        fm[b] += wf[i];
        if (ws)
            sm[b] += ws[i];
    }
}

/* Weights (wfin unless have_wf; ws unless have_ws) and per-bucket sums (of wfin, and of ws when
 * not NULL) of the short list: pool[0, n), sorted, covering buckets 0..last. */
static void short_list_weights(sampler *s, int n, int last, bool have_wf, float *ws, bool have_ws,
                               float inv_final, float inv_stage)
{
    const int32_t *ids = s->pool;
    for (int j = 0; j < n; j++)
        s->list_z[j] = s->z[ids[j]];
    double unused_w = 0, unused_ws = 0;
    float *out[2] = {have_wf ? NULL : s->wfin, have_ws ? NULL : ws};
    float inv[2] = {inv_final, inv_stage};
    double *mass[2] = {s->fmass, s->smass};
    for (int k = 0; k < 2; k++) {
        if (!out[k])
            continue;
        s->k->exp_pass(s->list_w, s->list_z, n, s->zmax, inv[k], &unused_w, &unused_ws);
        for (int j = 0; j < n; j++)
            out[k][ids[j]] = s->list_w[j];
    }
    for (int k = 0; k < 2; k++) {
        const float *w = k == 0 ? s->wfin : ws;
        if (!w)
            continue;
        for (int b = 0; b <= last; b++) {
            double m = 0;
            for (int j = s->pstart[b]; j < s->pstart[b] + s->cnt[b]; j++)
                m += w[ids[j]];
            mass[k][b] = m;
        }
    }
}

/* Short list from buckets: gathers buckets 0..last (positions 0..n-1) into the pool, sorted. */
static int short_list_gather(sampler *s, int last)
{
    int n = s->pstart[last] + s->cnt[last];
    s->k->gather(s->bucket, s->V, 0, last, s->pool, n);
    sort_ids(s, s->pool, n);
    for (int b = 0; b <= last; b++)
        s->where[b] = s->pstart[b];
    s->pool_n = n;
    return n;
}

/* Short list without buckets, for k <= TINY_K: the top k of z into pool[0, k) in order. A
 * threshold that about k tokens reach (top_threshold) is found by vector counts, the tokens at
 * or above it are gathered by a vector scan and sorted (few more than k), and the first k kept:
 * the same tokens in the same order as a full sort of the vocabulary. The whole list is one
 * bucket, 0; no other bucket is used in this regime (one_bucket). */
static void tiny_top_k(sampler *s, int k)
{
    order_src o = {s->z, s->zmax, s->zmin, s->n_finite};
    int n_at;
    float t = top_threshold(s, &o, k, &n_at);
    int32_t *ids = s->pool;
    int n = gather_from(s, s->z, t, n_at, ids);
    if (n <= SORT_KEYS_MAX)
        sort_first_k(s, s->z, ids, n, k, ids);
    else
        sort_ids(s, ids, n);        /* many ties at the threshold: the radix sort */
    n = k;
    /* bucket 0 alone: bucket_of_pos answers 0 without reading the other buckets, so only
     * bucket 0's entries are set (clearing all NB of them took a fifth of a chain at V 4096) */
    s->one_bucket = true;
    s->cnt[0] = n;
    s->pstart[0] = 0;
    s->where[0] = 0;
    s->fmass[0] = s->smass[0] = 0;
    s->pool_n = n;
    for (int j = 0; j < n; j++)
        s->bucket[ids[j]] = 0;   /* other tokens' buckets are stale: only kept ones are looked up */
}

/* wfin (unless have_wf) and ws (when not NULL, unless have_ws) for every token. */
static void full_weights(sampler *s, bool have_wf, float *ws, bool have_ws, float inv_final,
                         float inv_stage)
{
    double unused_w = 0, unused_ws = 0;
    if (!have_wf)
        s->k->exp_pass(s->wfin, s->z, s->V, s->zmax, inv_final, &unused_w, &unused_ws);
    if (ws && !have_ws)
        s->k->exp_pass(ws, s->z, s->V, s->zmax, inv_stage, &unused_w, &unused_ws);
}

/* The sampling chain after mask and penalties: top-k, top-p, min-p, temperature; fills probs.
 * When z is the raw logits and a temperature is 1, the raw pass already stored those weights. */
static void run_chain(sampler *s, const sampler_params *p, bool z_changed)
{
    const bool use_p = p->top_p < 1, use_m = p->min_p > 0;
    const float t_final = p->temperature;
    const float t_stage = p->order == SAMPLER_ORDER_HF ? t_final : 1.0f;
    const bool own_stage = use_p && t_stage != t_final;   /* top-p needs its own weights */
    const float inv_final = inv_temp(t_final), inv_stage = inv_temp(t_stage);
    const bool have_wf = t_final == 1 && !z_changed;              /* from the raw pass */
    const bool have_ws = own_stage && t_stage == 1 && !z_changed; /* from the raw pass */
    float *ws = own_stage ? s->wstage : NULL;
    const float *w_top_p = own_stage ? s->wstage : s->wfin;
    const double *m_top_p = own_stage ? s->smass : s->fmass;

    /* Buckets: distance below zmax, linear, over the actual range up to SPAN_NATS * t_flat. */
    float t_flat = own_stage ? fmaxf(t_stage, t_final) : t_final;
    float span = fminf(s->zmax - s->zmin, SPAN_NATS * t_flat);
    float scale = span > 0 ? fminf((float)(NB - 1) / span, FLT_MAX) : 0;

    /* top-k: exactly k positions. A short top-k list gets weights for its tokens only. */
    int len = (p->top_k > 0 && p->top_k < s->n_finite) ? p->top_k : s->n_finite;
    bool short_regime = false;
    if (len < s->n_finite && len <= TINY_K) {
        tiny_top_k(s, len);
        short_regime = true;
        short_list_weights(s, len, 0, have_wf, ws, have_ws, inv_final, inv_stage);
    } else if (len < s->n_finite && len <= SHORT_LIST) {
        bucket_pass(s, scale, NULL, NULL);
        int last = bucket_of_pos(s, len - 1);
        short_regime = s->pstart[last] + s->cnt[last] <= 2 * SHORT_LIST;
        if (short_regime) {
            int n = short_list_gather(s, last);
            short_list_weights(s, n, last, have_wf, ws, have_ws, inv_final, inv_stage);
        } else {   /* ties or a flat stretch put too many tokens there: weigh them all */
            full_weights(s, have_wf, ws, have_ws, inv_final, inv_stage);
            bucket_mass_pass(s, s->wfin, ws);
        }
    } else {
        full_weights(s, have_wf, ws, have_ws, inv_final, inv_stage);
        bucket_pass(s, scale, s->wfin, ws);
    }
    s->edge_k = len < s->n_finite ? token_at(s, len - 1) : -1;

    /* top-p over the top-k positions, on its stage's weights. */
    s->edge_p = -1;
    if (use_p) {
        int last = bucket_of_pos(s, len - 1);
        double total = 0;
        for (int b = 0; b < last; b++)
            total += m_top_p[b];
        total += bucket_mass(s, last, len, m_top_p, w_top_p);
        int len_p = top_p_len(s, len, ((double)p->top_p - TOP_P_SLACK) * total, m_top_p,
                              w_top_p);
        if (len_p < len) {
            len = len_p;
            s->edge_p = token_at(s, len - 1);
        }
    }

    /* min-p: p_i >= min_p * p_max, i.e. (z_i - zmax) / t_stage >= ln(min_p); the tokens passing
     * are a prefix of the order, so the kept prefix is the shorter of the two, and in the short
     * regimes counting over the first len positions is enough. */
    s->edge_m = -1;
    if (use_m) {
        float thr = logf(p->min_p);
        int n_m = 0;
        if (short_regime) {
            for (int j = 0; j < len; j++)
                n_m += (s->z[s->pool[j]] - s->zmax) * inv_stage >= thr;
        } else {
            n_m = s->k->count_at_least(s->z, s->V, s->zmax, inv_stage, thr);
        }
        if (n_m < 1)
            n_m = 1;
        if (n_m < len) {
            len = n_m;
            s->edge_m = token_at(s, len - 1);
        }
    }

    /* Temperature and normalisation over the kept positions [0, len). */
    int kb = bucket_of_pos(s, len - 1);
    int take = len - s->pstart[kb];
    bool partial = take < s->cnt[kb];
    double w = 0;
    for (int b = 0; b < kb; b++)
        w += s->fmass[b];
    double w_kb = bucket_mass(s, kb, len, s->fmass, s->wfin);
    w += w_kb;
    double inv = 1.0 / w, sum_ps = 0;
    float finv = (float)inv;   /* p = w * finv in float, the same in every lane and the tail */
    int n_kept = 0;
    int first = 0;   /* kept positions from here on are written one by one */
    if (short_regime) {
        memset(s->probs, 0, (size_t)s->V * sizeof *s->probs);
    } else {
        n_kept = s->k->normalize(s->probs, s->wfin, s->bucket, s->z, s->V,
                                 partial ? kb : kb + 1, finv, s->zmax, inv_final, &sum_ps);
        first = partial ? s->pstart[kb] : len;
    }
    for (int pos = first; pos < len; pos++) {
        int32_t id = short_regime ? s->pool[pos] : token_at(s, pos);
        float pj = s->wfin[id] * finv;
        float sj = (s->z[id] - s->zmax) * inv_final;
        s->probs[id] = pj;
        sum_ps += (double)pj * (sj < EXP_LO ? EXP_LO : sj);
        n_kept += pj > 0;
    }
    for (int b = 0; b < kb; b++)
        s->fmass[b] *= inv;
    s->fmass[kb] = w_kb * inv;
    s->inv_w = inv;
    s->kept = len;
    s->kept_bucket = kb;
    s->n_kept = n_kept;
    double h = (log(w) - sum_ps) / M_LN2;
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

    sampler_range r = s->k->scan(logits, s->V, s->raw, NULL);
    s->z = s->raw;
    if (r.bad) {
        for (int i = 0; i < s->V; i++)
            if (isnan(logits[i]) || logits[i] == INFINITY)
                return tt_fail(err, TT_ERR_NUMERIC, "sampler: logits[%d] is %s", i,
                               isnan(logits[i]) ? "NaN" : "+inf");
    }
    if (r.n_finite == 0)
        return tt_fail(err, TT_ERR_NUMERIC, "sampler: every logit is -inf (%d tokens)", s->V);
    s->xmax = r.max;
    s->xmin = r.min_finite;
    s->n_finite_raw = r.n_finite;

    bool z_changed = false;
    if (banned >= 0 && s->z[banned] != -INFINITY) {
        z_writable(s)[banned] = -INFINITY;
        z_changed = true;
    }
    if ((st = apply_penalties(s, p, ctx, &z_changed, err)) != TT_OK)
        return st;
    if (z_changed)
        r = s->k->scan(s->z, s->V, NULL, NULL);
    if (r.n_finite == 0)
        return tt_fail(err, TT_ERR_NUMERIC,
                       "sampler: no token left: every logit is -inf after masking token %d",
                       (int)banned);
    s->zmax = r.max;
    s->zmin = r.min_finite;
    s->n_finite = r.n_finite;

    /* exp(raw - xmax) is kept where the chain would compute it again; its sums are the raw
     * statistics of the snapshot, which otherwise waits until someone asks for it. */
    memset(&s->snap, 0, sizeof s->snap);
    s->snap_ready = false;
    s->raw_ready = false;
    s->greedy = p->greedy || p->temperature == 0;
    s->temp = p->temperature;
    s->z_temp = 0;
    float *keep_raw = NULL;
    if (!s->greedy && !z_changed) {
        if (p->temperature == 1)
            keep_raw = s->wfin;
        else if (p->top_p < 1 && p->order == SAMPLER_ORDER_LLAMA)
            keep_raw = s->wstage;
    }
    if (keep_raw)
        raw_pass(s, keep_raw);

    s->edge_k = s->edge_p = s->edge_m = -1;
    s->one_bucket = false;   /* until the tiny regime makes it so */
    if (s->greedy) {
        /* the first token at zmax: ties go to the lower id */
        int32_t a = s->k->find_above(s->z, 0, s->V, nextafterf(s->zmax, -INFINITY));
        s->argmax = a;
        memset(s->probs, 0, (size_t)s->V * sizeof *s->probs);
        s->probs[a] = 1;
        s->n_kept = s->kept = 1;
        s->snap.entropy_final = 0;
    } else {
        run_chain(s, p, z_changed);
    }
    s->valid = true;
    s->snap.n_kept = s->n_kept;
    s->snap.token = -1;
    s->snap.token_rank = -1;
    s->snap.u = -1;
    if (snap)
        *snap = *snapshot(s);
    return TT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Draw and force */

static void fill_choice(sampler *s, int32_t id, int rank, double u, double cum_lo, bool forced,
                        sampler_snapshot *snap)
{
    if (!snap)
        return;
    *snap = *snapshot(s);
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
    for (int b = 0; b <= s->kept_bucket; b++) {
        if (s->cnt[b] == 0 || cum + s->fmass[b] <= u) {
            cum += s->fmass[b];
            continue;
        }
        const int32_t *ids = bucket_ids(s, b);
        int end = b < s->kept_bucket ? s->pstart[b] + s->cnt[b] : s->kept;
        for (int pos = s->pstart[b]; pos < end; pos++) {
            int32_t id = ids[pos - s->pstart[b]];
            double next = cum + s->wfin[id] * s->inv_w;
            if (next > u) {
                fill_choice(s, id, pos, u, cum, false, snap);
                return id;
            }
            cum = next;
        }
        /* rounding: the bucket sum exceeded u but the walk did not; go on walking */
    }
    /* u beyond the summed mass (float rounding): the last token with p > 0 takes it. */
    int32_t id = token_at(s, s->n_kept - 1);
    fill_choice(s, id, s->n_kept - 1, u, cum - s->wfin[id] * s->inv_w, false, snap);
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
        for (int k = 0; k < b; k++)
            cum_lo += s->fmass[k];
        const int32_t *ids = bucket_ids(s, b);
        for (int j = 0; j < s->cnt[b]; j++) {
            if (ids[j] == id) {
                rank = s->pstart[b] + j;
                break;
            }
            cum_lo += s->wfin[ids[j]] * s->inv_w;
        }
    }
    fill_choice(s, id, rank, -1, cum_lo, true, snap);
    return id;
}

void sampler_snapshot_token_only(sampler_snapshot *snap, int32_t id, float p, double u)
{
    snap->n_top = 0;
    snap->n_kept = 0;
    snap->entropy_raw = snap->entropy_final = 0;
    snap->token = id;
    snap->token_p = p;
    snap->token_raw_p = 0;
    snap->token_rank = -1;
    snap->u = u;
    snap->cum_lo = 0;
    snap->forced = false;
}
