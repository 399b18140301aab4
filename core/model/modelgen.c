/* modelgen.c: random model directories in the Hugging Face layout, for tests and benchmarks: the
 * tensors the architecture's description (core/arch/) binds, walked in its order.
 *
 * The safetensors file is written streaming: the header is computed from the shapes alone, then
 * each tensor is generated in chunks straight into the file, so gpt2-xl (1.5e9 parameters) needs
 * a few hundred kilobytes of memory. Values are drawn from one xoshiro stream in file order, and
 * each element takes exactly one draw whatever the dtype, so:
 *   - the same seed gives byte-identical files;
 *   - names with or without "transformer.", mask buffers present or not, and F32/F16/BF16 files all
 *     hold the same values (F16/BF16 rounded to nearest even; in exact mode nothing rounds);
 *   - an untied lm_head is drawn last, so every other tensor equals the tied model's. */
#include "core/model/modelgen.h"

#include <cJSON.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/model/model.h"
#include "core/base/rng.h"
#include "core/model/safetensors.h"
#include "core/base/text.h"
#include "core/tokenizer/tokenizer.h"
#include "core/base/util.h"

/* ---------------------------------------------------------------------------------------------
 * Options */

void modelgen_options_default(modelgen_options *o)
{
    *o = (modelgen_options){
        .arch = "gpt2", .V = 512, .maxT = 64, .C = 64, .NH = 4, .L = 2, .FF = 0,
        .dtype = TT_F32, .prefix = true, .mask_buffers = false, .untied_lm_head = false,
        .seed = 1, .scale = 1.0f, .exact = false, .tokenizer_dir = NULL, .eos_id = -1,
    };
}

int modelgen_options_llama(modelgen_options *o, const char *size)
{
    static const struct {
        const char *name, *arch;
        int V, C, NH, NKV, HS, L, FF;
        bool untied;
        double theta;
    } sizes[] = {
        {"llama-3.2-1b", "llama", 128256, 2048, 32, 8, 64, 16, 8192, false, 500000},
        {"llama-3.2-3b", "llama", 128256, 3072, 24, 8, 128, 28, 8192, false, 500000},
        {"llama-3.1-8b", "llama", 128256, 4096, 32, 8, 128, 32, 14336, true, 500000},
        {"qwen2.5-0.5b", "qwen2", 151936, 896, 14, 2, 64, 24, 4864, false, 1000000},
        {"qwen2.5-1.5b", "qwen2", 151936, 1536, 12, 2, 128, 28, 8960, false, 1000000},
        {"qwen3-0.6b", "qwen3", 151936, 1024, 16, 8, 128, 28, 3072, false, 1000000},
        {"smollm2-135m", "llama", 49152, 576, 9, 3, 64, 30, 1536, false, 100000},
        {"tinyllama-1.1b", "llama", 32000, 2048, 32, 4, 64, 22, 5632, true, 10000},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (strcmp(size, sizes[i].name) == 0) {
            o->arch = sizes[i].arch;
            o->V = sizes[i].V;
            o->maxT = 4096;
            o->C = sizes[i].C;
            o->NH = sizes[i].NH;
            o->NKV = sizes[i].NKV;
            o->HS = sizes[i].HS;
            o->L = sizes[i].L;
            o->FF = sizes[i].FF;
            o->untied_lm_head = sizes[i].untied;
            o->rope_theta = sizes[i].theta;
            o->prefix = false;
            return 0;
        }
    return -1;
}

int modelgen_options_gpt2(modelgen_options *o, const char *size)
{
    static const struct { const char *name; int V, maxT, C, NH, L; } sizes[] = {
        {"tiny", 512, 64, 64, 4, 2},
        {"gpt2", 50257, 1024, 768, 12, 12},
        {"gpt2-medium", 50257, 1024, 1024, 16, 24},
        {"gpt2-large", 50257, 1024, 1280, 20, 36},
        {"gpt2-xl", 50257, 1024, 1600, 25, 48},
        {"distilgpt2", 50257, 1024, 768, 12, 6},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (strcmp(size, sizes[i].name) == 0) {
            o->V = sizes[i].V;
            o->maxT = sizes[i].maxT;
            o->C = sizes[i].C;
            o->NH = sizes[i].NH;
            o->L = sizes[i].L;
            o->FF = 0;
            o->arch = "gpt2";
            o->NKV = o->HS = 0;
            return 0;
        }
    return -1;
}

/* ---------------------------------------------------------------------------------------------
 * Small file helpers */

/* A growable string for the JSON/text files. */
typedef struct {
    char *s;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_add(sbuf *b, const char *p, size_t n)
{
    if (b->oom)
        return;
    if (!util_reserve(&b->s, &b->cap, b->len + n + 1, 4096)) {
        b->oom = true;
        return;
    }
    memcpy(b->s + b->len, p, n);
    b->len += n;
    b->s[b->len] = 0;
}

static void sb_str(sbuf *b, const char *p) { sb_add(b, p, strlen(p)); }

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        sb_add(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A JSON string literal of UTF-8 text (only '"', '\\' and control bytes need escapes). */
static void sb_json_str(sbuf *b, const char *p, size_t n)
{
    sb_add(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch == '"' || ch == '\\') {
            char e[2] = {'\\', (char)ch};
            sb_add(b, e, 2);
        } else if (ch < 0x20) {
            sb_printf(b, "\\u%04x", ch);
        } else {
            sb_add(b, (const char *)&ch, 1);
        }
    }
    sb_add(b, "\"", 1);
}

static tt_status write_file(const char *dir, const char *file, const void *data, size_t len,
                            tt_error *err)
{
    char *path = util_path_join(dir, file);
    if (!path)
        return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    FILE *f = fopen(path, "wb");
    tt_status s = TT_OK;
    if (!f) {
        s = tt_fail(err, TT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    } else {
        size_t w = fwrite(data, 1, len, f);
        if (fclose(f) != 0 || w != len)
            s = tt_fail(err, TT_ERR_IO, "%s: write error", path);
    }
    free(path);
    return s;
}

static tt_status write_sbuf(const char *dir, const char *file, sbuf *b, tt_error *err)
{
    if (b->oom)
        return tt_fail(err, TT_ERR_NOMEM, "out of memory writing %s", file);
    return write_file(dir, file, b->s ? b->s : "", b->len, err);
}

static tt_status copy_file(const char *from_dir, const char *to_dir, const char *file,
                           tt_error *err)
{
    char *src = util_path_join(from_dir, file);
    if (!src)
        return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    char *data;
    size_t len;
    tt_status s = util_read_file(src, 0, &data, &len, NULL, err);
    if (s == TT_OK)
        s = write_file(to_dir, file, data, len, err);
    free(data);
    free(src);
    return s;
}

/* ---------------------------------------------------------------------------------------------
 * The synthesized tokenizer */

/* GPT-2's bytes_to_unicode() (tokenizer_byte_alphabet), numbered as GPT-2's vocab.json numbers
 * it: the printable bytes take ids 0..187 in byte order, the other 68 ids 188..255. */
static void gpt2_byte_symbols(int byte_of_id[256], uint32_t cp_of_id[256])
{
    uint32_t cp_of_byte[256];
    tokenizer_byte_alphabet(cp_of_byte);
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int b = 0; b < 256; b++)
            if ((cp_of_byte[b] == (uint32_t)b) == (pass == 0)) {
                byte_of_id[n] = b;
                cp_of_id[n++] = cp_of_byte[b];
            }
}

/* Open-addressing set of token strings -> id. */
typedef struct {
    char **tok;                  /* (n) by id, NUL-terminated UTF-8 */
    int n, cap;
    int *slots;                  /* (nslots) id or -1 */
    size_t nslots;
} vocab_set;

static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int vs_find(const vocab_set *v, const char *s)
{
    size_t i = str_hash(s) & (v->nslots - 1);
    while (v->slots[i] >= 0) {
        if (strcmp(v->tok[v->slots[i]], s) == 0)
            return v->slots[i];
        i = (i + 1) & (v->nslots - 1);
    }
    return -1;
}

/* Adds s (copied); returns its id, or -1 when out of memory. The set is sized up front. */
static int vs_add(vocab_set *v, const char *s)
{
    char *c = strdup(s);
    if (!c)
        return -1;
    size_t i = str_hash(s) & (v->nslots - 1);
    while (v->slots[i] >= 0)
        i = (i + 1) & (v->nslots - 1);
    v->slots[i] = v->n;
    v->tok[v->n] = c;
    return v->n++;
}

/* Frequent English words, most frequent first; merges spell them out with and without the
 * leading-space marker, shortest prefixes first (the order real BPE training tends to give). */
static const char *const gen_words[] = {
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by",
    "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an",
    "had", "they", "you", "were", "their", "one", "all", "we", "can", "her", "has", "there",
    "been", "if", "more", "when", "will", "would", "who", "so", "no", "she", "other", "its",
    "time", "what", "about", "up", "out", "them", "into", "some", "then", "only", "could",
    "than", "first", "new", "these", "two", "may", "any", "like", "now", "my", "over", "such",
    "our", "man", "me", "even", "most", "made", "after", "also", "did", "many", "before",
    "must", "through", "back", "years", "where", "much", "your", "way", "well", "down",
    "should", "because", "each", "just", "those", "people", "how", "too", "little", "state",
    "good", "very", "make", "world", "still", "own", "see", "men", "work", "long", "get",
    "here", "between", "both", "life", "being", "under", "never", "day", "same", "another",
    "know", "while", "last", "might", "us", "great", "old", "year", "off", "come", "since",
    "against", "go", "came", "right", "used", "take", "three", "house", "place", "water",
    "light", "night", "small", "large", "number", "word", "every", "found", "still", "again",
    "thing", "think", "point", "school", "model", "token", "text", "data", "system", "language",
    "question", "answer", "story", "once", "upon", "king", "queen", "city", "river", "mountain",
    "morning", "evening", "because", "something", "nothing", "everything", "together", "without",
    "around", "should", "really", "always", "happy", "friend", "little", "girl", "boy", "dog",
    "cat", "tree", "sun", "moon", "star", "book", "read", "write", "play", "ing", "ed", "er",
    "ly", "tion", "ment", "ness", "able", "ous", "ive", "al", "es", "s",
};
#define N_GEN_WORDS (sizeof gen_words / sizeof gen_words[0])

typedef struct {
    int *sym;                    /* token ids of the word's current segmentation */
    int n;
    uint64_t weight;
} train_word;

typedef struct {
    int a, b;
    uint64_t weight;
} train_pair;

static int cmp_pair(const void *x, const void *y)
{
    const train_pair *p = x, *q = y;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    return p->b < q->b ? -1 : p->b > q->b;
}

static tt_status train_words(vocab_set *v, int want, char sym_of_byte[256][3], sbuf *m,
                             tt_error *err)
{
    size_t nw = 2 * N_GEN_WORDS, total = 0;
    train_word *w = calloc(nw, sizeof *w);
    train_pair *pairs = NULL, *banned = NULL;
    size_t nbanned = 0;
    tt_status s = TT_OK;
    if (!w)
        return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < nw; i++) {
        const char *word = gen_words[i / 2];
        bool spaced = i % 2 == 0;
        w[i].sym = malloc((strlen(word) + 1) * sizeof *w[i].sym);
        if (!w[i].sym) {
            s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
            goto out;
        }
        if (spaced)
            w[i].sym[w[i].n++] = vs_find(v, sym_of_byte[' ']);
        for (const char *c = word; *c; c++)
            w[i].sym[w[i].n++] = vs_find(v, sym_of_byte[(unsigned char)*c]);
        w[i].weight = (spaced ? 3u : 1u) * (1000000u / (uint64_t)(i / 2 + 1));
        total += (size_t)w[i].n;
    }
    pairs = malloc((total + 1) * sizeof *pairs);
    banned = malloc((total + 1) * sizeof *banned);
    if (!pairs || !banned) {
        s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
        goto out;
    }
    while (v->n < want) {
        /* Weighted counts of adjacent pairs; the heaviest wins, ties to the smallest ids. */
        size_t np = 0;
        for (size_t i = 0; i < nw; i++)
            for (int k = 0; k + 1 < w[i].n; k++)
                pairs[np++] = (train_pair){w[i].sym[k], w[i].sym[k + 1], w[i].weight};
        if (np == 0)
            break;
        qsort(pairs, np, sizeof *pairs, cmp_pair);
        train_pair best = {-1, -1, 0};
        for (size_t i = 0; i < np; ) {
            train_pair p = pairs[i];
            size_t j = i + 1;
            for (; j < np && pairs[j].a == p.a && pairs[j].b == p.b; j++)
                p.weight += pairs[j].weight;
            i = j;
            bool is_banned = false;
            for (size_t k = 0; k < nbanned && !is_banned; k++)
                is_banned = banned[k].a == p.a && banned[k].b == p.b;
            if (!is_banned && p.weight > best.weight)
                best = p;
        }
        if (best.a < 0)
            break;
        char joined[256];
        snprintf(joined, sizeof joined, "%s%s", v->tok[best.a], v->tok[best.b]);
        if (vs_find(v, joined) >= 0) {
            banned[nbanned++] = best;
            continue;
        }
        sb_str(m, v->tok[best.a]);
        sb_str(m, " ");
        sb_str(m, v->tok[best.b]);
        sb_str(m, "\n");
        int id = vs_add(v, joined);
        if (id < 0) {
            s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (size_t i = 0; i < nw; i++) {
            int o = 0;
            for (int k = 0; k < w[i].n; k++) {
                if (k + 1 < w[i].n && w[i].sym[k] == best.a && w[i].sym[k + 1] == best.b) {
                    w[i].sym[o++] = id;
                    k++;
                } else {
                    w[i].sym[o++] = w[i].sym[k];
                }
            }
            w[i].n = o;
        }
    }
out:
    for (size_t i = 0; i < nw; i++)
        free(w[i].sym);
    free(w);
    free(pairs);
    free(banned);
    return s;
}

/* Builds the vocabulary in v (V-1 tokens; <|endoftext|> is added by the caller) and the merges
 * in m ("left right\n" lines). */
static tt_status gen_vocab(vocab_set *v, int V, sbuf *m, tt_error *err)
{
    int byte_of_id[256];
    uint32_t cp_of_id[256];
    gpt2_byte_symbols(byte_of_id, cp_of_id);
    char sym_of_byte[256][3];
    for (int id = 0; id < 256; id++) {
        char u[3] = {0};
        text_utf8_encode(cp_of_id[id], u);   /* below U+0800: 2 bytes at most */
        memcpy(sym_of_byte[byte_of_id[id]], u, 3);
        if (vs_add(v, u) < 0)
            return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    }
    int want = V - 1;                       /* tokens before <|endoftext|> */
    char buf[512];

#define ADD_MERGE(left, right)                                                        \
    do {                                                                              \
        snprintf(buf, sizeof buf, "%s%s", left, right);                               \
        if (vs_find(v, buf) < 0) {                                                    \
            sb_str(m, left); sb_str(m, " "); sb_str(m, right); sb_str(m, "\n");       \
            if (vs_add(v, buf) < 0) return tt_fail(err, TT_ERR_NOMEM, "out of memory"); \
        }                                                                             \
    } while (0)

    /* Phase 1: BPE training on the word list (Zipf weights, the spaced form three times as
     * frequent), so encoding replays the merges in the order they were learned and a listed word
     * becomes one token. A merge whose result already exists through another split is banned
     * instead, keeping "merge k makes token 256 + k" as in GPT-2's files. */
    tt_status s = train_words(v, want, sym_of_byte, m, err);
    if (s != TT_OK)
        return s;

    /* Phase 2: extend merged tokens (in id order, the list growing as it goes) by frequent
     * letters; there is always a next one, so any V is reached. */
    static const char letters[] = "etaoinshrdlcumwfgypbvkjxqz";
    for (int a = 256; v->n < want; a++) {
        if (a >= v->n)           /* cannot happen: every token can grow by a letter */
            return tt_fail(err, TT_ERR_ARG, "modelgen: ran out of merges at %d tokens", v->n);
        for (const char *l = letters; *l && v->n < want; l++) {
            char right[2] = {*l, 0};
            if (strlen(v->tok[a]) + 2 > 64)
                break;
            ADD_MERGE(v->tok[a], right);
        }
    }
#undef ADD_MERGE
    return TT_OK;
}

tt_status modelgen_write_tokenizer(const char *dir, int V, tt_error *err)
{
    if (V < 257)
        return tt_fail(err, TT_ERR_ARG, "modelgen: vocab size %d is below 257 (256 byte tokens "
                       "and <|endoftext|>)", V);
    vocab_set v = {0};
    v.cap = V;
    v.tok = calloc((size_t)V, sizeof *v.tok);
    v.nslots = 1;
    while (v.nslots < 2 * (size_t)V)
        v.nslots *= 2;
    v.slots = malloc(v.nslots * sizeof *v.slots);
    sbuf merges = {0}, vocab = {0};
    tt_status s = TT_OK;
    if (!v.tok || !v.slots) {
        s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < v.nslots; i++)
        v.slots[i] = -1;
    sb_str(&merges, "#version: 0.2\n");
    if ((s = gen_vocab(&v, V, &merges, err)) != TT_OK)
        goto out;
    if (vs_add(&v, "<|endoftext|>") < 0) {
        s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
        goto out;
    }
    sb_str(&vocab, "{");
    for (int i = 0; i < v.n; i++) {
        if (i)
            sb_str(&vocab, ", ");
        sb_json_str(&vocab, v.tok[i], strlen(v.tok[i]));
        sb_printf(&vocab, ": %d", i);
    }
    sb_str(&vocab, "}");
    if ((s = write_sbuf(dir, "vocab.json", &vocab, err)) == TT_OK)
        s = write_sbuf(dir, "merges.txt", &merges, err);
out:
    for (int i = 0; i < v.n; i++)
        free(v.tok[i]);
    free(v.tok);
    free(v.slots);
    free(merges.s);
    free(vocab.s);
    return s;
}

/* Entries in dir/vocab.json (must be V, ids 0..V-1). */
static tt_status check_tokenizer_dir(const char *tdir, int V, tt_error *err)
{
    char *path = util_path_join(tdir, "vocab.json");
    if (!path)
        return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    char *text;
    size_t len;
    tt_error read_err = {0};
    if (util_read_file(path, 0, &text, &len, NULL, &read_err) != TT_OK) {
        free(path);
        return tt_fail(err, TT_ERR_ARG, "%s", read_err.msg);   /* a bad option, not I/O */
    }
    cJSON *root = cJSON_ParseWithLength(text, len);
    tt_status s = TT_OK;
    if (!cJSON_IsObject(root)) {
        s = tt_fail(err, TT_ERR_ARG, "%s: not a JSON object", path);
    } else {
        int count = cJSON_GetArraySize(root);
        double max_id = -1;
        for (const cJSON *e = root->child; e; e = e->next)
            if (cJSON_IsNumber(e) && e->valuedouble > max_id)
                max_id = e->valuedouble;
        if (count != V || max_id + 1 != V)
            s = tt_fail(err, TT_ERR_ARG, "%s: %d entries (largest id %.0f), but the model's vocab "
                        "size is %d", path, count, max_id, V);
    }
    cJSON_Delete(root);
    free(text);
    free(path);
    return s;
}

/* ---------------------------------------------------------------------------------------------
 * Tensors */

typedef enum {
    INIT_MATRIX,                 /* uniform, standard deviation scale / sqrt(fan_in) */
    INIT_BIAS,                   /* uniform in +-0.05 */
    INIT_LN_W,                   /* 1 + uniform in +-0.1 */
    INIT_LN_B,                   /* uniform in +-0.05 */
    INIT_MASK,                   /* causal mask: 1 on and below the diagonal, 0 above (no draws) */
    INIT_MASKED_BIAS,            /* -1e4 (no draws) */
} init_kind;

typedef struct {
    char name[128];
    int ndim;
    uint64_t shape[4];
    uint64_t numel;
    init_kind init;
    uint64_t fan_in;
} gen_tensor;

typedef struct {
    gen_tensor *t;
    int n, cap;
} gen_list;

static int gl_add(gen_list *g, const char *prefix, const char *name, init_kind init,
                  uint64_t fan_in, int ndim, uint64_t d0, uint64_t d1, uint64_t d2, uint64_t d3)
{
    if (g->n == g->cap)
        return -1;
    gen_tensor *t = &g->t[g->n++];
    snprintf(t->name, sizeof t->name, "%s%s", prefix, name);
    t->ndim = ndim;
    uint64_t d[4] = {d0, d1, d2, d3};
    t->numel = 1;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = d[i];
        t->numel *= d[i];
    }
    t->init = init;
    t->fan_in = fan_in;
    return 0;
}

/* The model_config the options describe (validated by check_options first). */
static model_config options_config(const modelgen_options *o)
{
    const arch_desc *a = arch_by_model_type(o->arch ? o->arch : "gpt2");
    bool gpt2 = strcmp(a->name, "gpt2") == 0;
    model_config c = {.arch = a, .V = o->V, .maxT = o->maxT, .C = o->C, .NH = o->NH,
                      .NKV = o->NKV && !gpt2 ? o->NKV : o->NH,
                      .HS = o->HS && !gpt2 ? o->HS : o->C / o->NH, .L = o->L,
                      .FF = o->FF ? o->FF : 4 * o->C};
    if (gpt2)
        c.features = ARCH_F_LEARNED_POS | ARCH_F_QKV_FUSED | ARCH_F_QKV_BIAS | ARCH_F_OUT_BIAS |
                     ARCH_F_MLP_BIAS | ARCH_F_NORM_BIAS;
    else
        c.features = ARCH_F_RMSNORM | ARCH_F_ROPE | ARCH_F_SWIGLU |
                     (strcmp(a->name, "qwen2") == 0 ? ARCH_F_QKV_BIAS : 0) |
                     (strcmp(a->name, "qwen3") == 0 ? ARCH_F_QK_NORM : 0);
    if (o->untied_lm_head)
        c.features |= ARCH_F_UNTIED;
    return c;
}

static init_kind role_init(arch_tensor role)
{
    switch (role) {
    case ARCH_T_ATTN_NORM: case ARCH_T_FFN_NORM: case ARCH_T_OUT_NORM:
    case ARCH_T_Q_NORM: case ARCH_T_K_NORM:
        return INIT_LN_W;
    case ARCH_T_ATTN_NORM_B: case ARCH_T_FFN_NORM_B: case ARCH_T_OUT_NORM_B:
        return INIT_LN_B;
    case ARCH_T_QKV_B: case ARCH_T_Q_B: case ARCH_T_K_B: case ARCH_T_V_B: case ARCH_T_O_B:
    case ARCH_T_UP_B: case ARCH_T_DOWN_B:
        return INIT_BIAS;
    default:
        return INIT_MATRIX;
    }
}

static void gl_add_role(gen_list *g, const model_config *c, const arch_tensor_desc *td, int l,
                        const char *prefix)
{
    char nm[128];
    snprintf(nm, sizeof nm, td->hf, l);
    uint64_t d0 = arch_dim_value(c, td->dims[0]);
    uint64_t d1 = td->dims[1] ? arch_dim_value(c, td->dims[1]) : 0;
    init_kind init = role_init(td->role);
    uint64_t fan_in = init != INIT_MATRIX ? 0
                      : td->role == ARCH_T_TOKEN_EMBD || td->role == ARCH_T_POS_EMBD
                          ? (uint64_t)c->C
                          : td->in_out ? d0 : d1;
    gl_add(g, td->role == ARCH_T_OUTPUT ? "" : prefix, nm, init, fan_in, td->dims[1] ? 2 : 1, d0,
           d1, 0, 0);
}

/* The tensors in file (= draw) order: the description's order, every layer's roles where the
 * first layer role stands; GPT-2's optional mask buffers after each layer. */
static void gen_tensor_list(const modelgen_options *o, int FF, gen_list *g)
{
    const model_config c = options_config(o);
    const arch_desc *a = c.arch;
    const uint64_t T = (uint64_t)o->maxT;
    const char *p = o->prefix && a->hf_optional_prefix ? a->hf_optional_prefix : "";
    (void)FF;
    for (int i = 0; i < a->n_tensors; i++) {
        const arch_tensor_desc *td = &a->tensors[i];
        if (td->role < ARCH_T_FIRST_LAYER) {
            if (arch_tensor_used(td, c.features))
                gl_add_role(g, &c, td, 0, p);
            continue;
        }
        int j = i;
        while (j < a->n_tensors && a->tensors[j].role >= ARCH_T_FIRST_LAYER)
            j++;
        for (int l = 0; l < c.L; l++) {
            for (int k = i; k < j; k++)
                if (arch_tensor_used(&a->tensors[k], c.features))
                    gl_add_role(g, &c, &a->tensors[k], l, p);
            if (o->mask_buffers) {
                char nm[64];
                snprintf(nm, sizeof nm, "h.%d.attn.bias", l);
                gl_add(g, p, nm, INIT_MASK, 0, 4, 1, 1, T, T);
                snprintf(nm, sizeof nm, "h.%d.attn.masked_bias", l);
                gl_add(g, p, nm, INIT_MASKED_BIAS, 0, 0, 0, 0, 0, 0);
            }
        }
        i = j - 1;
    }
}

/* How a tensor's values come from draws u in [0, 1): uniform in center +- a, or, in exact mode,
 * center + k * step with k drawn uniformly from [-K, K] (floor of u * (2K+1), exact in double),
 * so no rounding happens anywhere. Computed once per tensor. */
typedef struct {
    double a, center, step;
    int K;
    bool exact;
} gen_dist;

static gen_dist gen_dist_of(const gen_tensor *t, const modelgen_options *o)
{
    gen_dist d = {.center = t->init == INIT_LN_W ? 1.0 : 0.0, .exact = o->exact};
    switch (t->init) {
    case INIT_MATRIX: d.a = (double)o->scale * sqrt(3.0 / (double)t->fan_in); break;
    case INIT_LN_W: d.a = 0.1; break;
    default: d.a = 0.05; break;
    }
    d.step = t->init == INIT_LN_W ? 1.0 / 128 : 1.0 / 1024;
    int kmax = t->init == INIT_LN_W ? 16 : 255;
    double kf = floor(d.a / d.step);
    d.K = kf > kmax ? kmax : (int)kf;
    return d;
}

static inline float gen_value(const gen_dist *d, double u)
{
    if (d->exact) {
        int k = (int)(u * (2 * d->K + 1)) - d->K;
        return (float)(d->center + k * d->step);
    }
    return (float)(d->center + (2.0 * u - 1.0) * d->a);
}

static const char *st_name_of(tt_dtype d)
{
    return d == TT_F32 ? "F32" : d == TT_F16 ? "F16" : "BF16";
}

/* Streams one tensor's values into f. */
static int gen_write_tensor(FILE *f, const gen_tensor *t, const modelgen_options *o, rng *r,
                            unsigned char *chunk, size_t chunk_elems)
{
    size_t es = tt_dtype_size(o->dtype);
    uint64_t T = t->ndim == 4 ? t->shape[3] : 0;
    gen_dist dist = gen_dist_of(t, o);
    for (uint64_t i = 0; i < t->numel; ) {
        size_t n = t->numel - i < chunk_elems ? (size_t)(t->numel - i) : chunk_elems;
        for (size_t j = 0; j < n; j++) {
            float v;
            if (t->init == INIT_MASK) {
                uint64_t e = i + j, row = e / T, col = e % T;
                v = col <= row ? 1.0f : 0.0f;
            } else if (t->init == INIT_MASKED_BIAS) {
                v = -1e4f;
            } else {
                v = gen_value(&dist, rng_uniform(r));
            }
            /* Stored through a byte buffer: tt_store_f32 wants an aligned element pointer. */
            unsigned char el[4];
            if (o->dtype == TT_F32) {
                memcpy(el, &v, 4);
            } else {
                uint16_t h = o->dtype == TT_F16 ? tt_f32_to_f16(v) : tt_f32_to_bf16(v);
                memcpy(el, &h, 2);
            }
            memcpy(chunk + j * es, el, es);
        }
        if (fwrite(chunk, es, n, f) != n)
            return -1;
        i += n;
    }
    return 0;
}

static tt_status write_safetensors(const char *dir, const modelgen_options *o, int FF,
                                   tt_error *err)
{
    gen_list g = {0};
    g.cap = 4 + 20 * o->L + 4;
    g.t = calloc((size_t)g.cap, sizeof *g.t);
    if (!g.t)
        return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    gen_tensor_list(o, FF, &g);

    /* Header: metadata first, as the safetensors library writes it, then the tensors in order. */
    sbuf h = {0};
    size_t es = tt_dtype_size(o->dtype);
    uint64_t off = 0;
    sb_str(&h, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < g.n; i++) {
        const gen_tensor *t = &g.t[i];
        sb_str(&h, ",");
        sb_json_str(&h, t->name, strlen(t->name));
        sb_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", st_name_of(o->dtype));
        for (int d = 0; d < t->ndim; d++)
            sb_printf(&h, "%s%llu", d ? "," : "", (unsigned long long)t->shape[d]);
        uint64_t end = off + t->numel * es;
        sb_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                  (unsigned long long)end);
        off = end;
    }
    sb_str(&h, "}");
    while (h.len % 8 != 0)       /* data starts 8-aligned, as Hugging Face pads it */
        sb_str(&h, " ");

    char *path = util_path_join(dir, "model.safetensors");
    char *tmp = util_path_join(dir, "model.safetensors.tmp");
    unsigned char *chunk = malloc(65536 * 4);
    tt_status s = TT_OK;
    FILE *f = NULL;
    if (h.oom || !path || !tmp || !chunk) {
        s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
        goto out;
    }
    f = fopen(tmp, "wb");
    if (!f) {
        s = tt_fail(err, TT_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        goto out;
    }
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
    rng r;
    rng_seed(&r, o->seed);
    bool bad = fwrite(le, 1, 8, f) != 8 || fwrite(h.s, 1, h.len, f) != h.len;
    for (int i = 0; i < g.n && !bad; i++)
        bad = gen_write_tensor(f, &g.t[i], o, &r, chunk, 65536) != 0;
    int e = errno;
    if (fclose(f) != 0 || bad) {
        s = tt_fail(err, TT_ERR_IO, "%s: write error: %s", tmp, strerror(e ? e : EIO));
        remove(tmp);
        goto out;
    }
    if (rename(tmp, path) != 0) {
        s = tt_fail(err, TT_ERR_IO, "%s: cannot rename to %s: %s", tmp, path, strerror(errno));
        remove(tmp);
    }
out:
    free(chunk);
    free(path);
    free(tmp);
    free(h.s);
    free(g.t);
    return s;
}

/* ---------------------------------------------------------------------------------------------
 * config.json, generation_config.json */

/* config.json of a Llama-family model, as transformers writes it for the model_type. */
static void llama_config_json(sbuf *b, const modelgen_options *o, const model_config *c, int eos)
{
    static const char *torch_dtype[] = {"float32", "float16", "bfloat16"};
    const char *mt = o->arch;
    const char *cls = strcmp(mt, "qwen2") == 0 ? "Qwen2ForCausalLM"
                      : strcmp(mt, "qwen3") == 0 ? "Qwen3ForCausalLM"
                      : strcmp(mt, "mistral") == 0 ? "MistralForCausalLM" : "LlamaForCausalLM";
    sb_printf(b, "{\n  \"architectures\": [\n    \"%s\"\n  ],\n", cls);
    sb_str(b, "  \"attention_dropout\": 0.0,\n");
    sb_printf(b, "  \"bos_token_id\": %d,\n", eos);
    sb_printf(b, "  \"eos_token_id\": %d,\n", eos);
    if (o->HS)
        sb_printf(b, "  \"head_dim\": %d,\n", c->HS);
    sb_str(b, "  \"hidden_act\": \"silu\",\n");
    sb_printf(b, "  \"hidden_size\": %d,\n", c->C);
    sb_str(b, "  \"initializer_range\": 0.02,\n");
    sb_printf(b, "  \"intermediate_size\": %d,\n", c->FF);
    sb_printf(b, "  \"max_position_embeddings\": %d,\n", c->maxT);
    sb_printf(b, "  \"model_type\": \"%s\",\n", mt);
    sb_printf(b, "  \"num_attention_heads\": %d,\n", c->NH);
    sb_printf(b, "  \"num_hidden_layers\": %d,\n", c->L);
    sb_printf(b, "  \"num_key_value_heads\": %d,\n", c->NKV);
    sb_str(b, "  \"rms_norm_eps\": 1e-05,\n");
    sb_str(b, "  \"rope_scaling\": null,\n");
    sb_printf(b, "  \"rope_theta\": %.1f,\n", o->rope_theta > 0 ? o->rope_theta : 10000.0);
    sb_printf(b, "  \"tie_word_embeddings\": %s,\n", o->untied_lm_head ? "false" : "true");
    sb_printf(b, "  \"torch_dtype\": \"%s\",\n", torch_dtype[o->dtype]);
    sb_str(b, "  \"transformers_version\": \"4.51.0\",\n");
    sb_str(b, "  \"use_cache\": true,\n");
    sb_printf(b, "  \"vocab_size\": %d\n}\n", c->V);
}

static tt_status write_configs(const char *dir, const modelgen_options *o, int eos,
                               tt_error *err)
{
    static const char *torch_dtype[] = {"float32", "float16", "bfloat16"};
    sbuf b = {0};
    const model_config c = options_config(o);
    if (strcmp(c.arch->name, "gpt2") != 0) {
        llama_config_json(&b, o, &c, eos);
        goto write;
    }
    sb_str(&b, "{\n");
    sb_str(&b, "  \"activation_function\": \"gelu_new\",\n");
    sb_str(&b, "  \"architectures\": [\n    \"GPT2LMHeadModel\"\n  ],\n");
    sb_str(&b, "  \"attn_pdrop\": 0.1,\n");
    sb_printf(&b, "  \"bos_token_id\": %d,\n", eos);
    sb_str(&b, "  \"embd_pdrop\": 0.1,\n");
    sb_printf(&b, "  \"eos_token_id\": %d,\n", eos);
    sb_str(&b, "  \"initializer_range\": 0.02,\n");
    sb_str(&b, "  \"layer_norm_epsilon\": 1e-05,\n");
    sb_str(&b, "  \"model_type\": \"gpt2\",\n");
    sb_printf(&b, "  \"n_ctx\": %d,\n", o->maxT);
    sb_printf(&b, "  \"n_embd\": %d,\n", o->C);
    sb_printf(&b, "  \"n_head\": %d,\n", o->NH);
    if (o->FF)
        sb_printf(&b, "  \"n_inner\": %d,\n", o->FF);
    else
        sb_str(&b, "  \"n_inner\": null,\n");
    sb_printf(&b, "  \"n_layer\": %d,\n", o->L);
    sb_printf(&b, "  \"n_positions\": %d,\n", o->maxT);
    sb_str(&b, "  \"reorder_and_upcast_attn\": false,\n");
    sb_str(&b, "  \"resid_pdrop\": 0.1,\n");
    sb_str(&b, "  \"scale_attn_by_inverse_layer_idx\": false,\n");
    sb_str(&b, "  \"scale_attn_weights\": true,\n");
    sb_str(&b, "  \"summary_activation\": null,\n");
    sb_str(&b, "  \"summary_first_dropout\": 0.1,\n");
    sb_str(&b, "  \"summary_proj_to_labels\": true,\n");
    sb_str(&b, "  \"summary_type\": \"cls_index\",\n");
    sb_str(&b, "  \"summary_use_proj\": true,\n");
    if (o->untied_lm_head)
        sb_str(&b, "  \"tie_word_embeddings\": false,\n");
    sb_printf(&b, "  \"torch_dtype\": \"%s\",\n", torch_dtype[o->dtype]);
    sb_str(&b, "  \"transformers_version\": \"4.44.2\",\n");
    sb_str(&b, "  \"use_cache\": true,\n");
    sb_printf(&b, "  \"vocab_size\": %d\n", o->V);
    sb_str(&b, "}\n");
write:;
    tt_status s = write_sbuf(dir, "config.json", &b, err);
    free(b.s);
    if (s != TT_OK)
        return s;

    sbuf g = {0};
    sb_str(&g, "{\n  \"_from_model_config\": true,\n");
    sb_printf(&g, "  \"bos_token_id\": %d,\n", eos);
    sb_printf(&g, "  \"eos_token_id\": %d,\n", eos);
    sb_str(&g, "  \"transformers_version\": \"4.44.2\"\n}\n");
    s = write_sbuf(dir, "generation_config.json", &g, err);
    free(g.s);
    return s;
}

/* ---------------------------------------------------------------------------------------------
 * Entry point */

static tt_status check_range(const char *field, long v, long lo, long hi, tt_error *err)
{
    if (v < lo || v > hi)
        return tt_fail(err, TT_ERR_ARG, "modelgen: %s %ld is outside [%ld, %ld]", field, v, lo, hi);
    return TT_OK;
}

static tt_status check_options(const modelgen_options *o, tt_error *err)
{
    tt_status s;
    const arch_desc *a = arch_by_model_type(o->arch ? o->arch : "gpt2");
    if (!a)
        return tt_fail(err, TT_ERR_ARG, "modelgen: architecture '%s' is not one tokentop runs "
                       "(%s)", o->arch, arch_supported_list());
    if ((s = check_range("vocab size", o->V, o->tokenizer_dir ? 1 : 257, 1000000, err)) ||
        (s = check_range("context", o->maxT, 1, 1 << 20, err)) ||
        (s = check_range("embedding width", o->C, 1, 65536, err)) ||
        (s = check_range("heads", o->NH, 1, 512, err)) ||
        (s = check_range("key/value heads", o->NKV, 0, 512, err)) ||
        (s = check_range("head size", o->HS, 0, 1024, err)) ||
        (s = check_range("layers", o->L, 1, 512, err)) ||
        (s = check_range("inner width", o->FF ? o->FF : 4L * o->C, 1, 262144, err)))
        return s;
    if (o->C % o->NH != 0 && !(o->HS && strcmp(a->name, "gpt2") != 0))
        return tt_fail(err, TT_ERR_ARG, "modelgen: embedding width %d is not a multiple of %d heads",
                       o->C, o->NH);
    if (o->dtype != TT_F32 && o->dtype != TT_F16 && o->dtype != TT_BF16)
        return tt_fail(err, TT_ERR_ARG, "modelgen: unknown dtype %d", (int)o->dtype);
    if (!(o->scale > 0 && isfinite(o->scale)))
        return tt_fail(err, TT_ERR_ARG, "modelgen: scale %g is not a positive number",
                       (double)o->scale);
    if (o->eos_id < -1 || o->eos_id >= o->V)
        return tt_fail(err, TT_ERR_ARG, "modelgen: eos id %d is outside the vocabulary [0, %d)",
                       o->eos_id, o->V);
    model_config c = options_config(o);
    if ((s = arch_check_config(&c, "modelgen", err)) != TT_OK)
        return tt_fail(err, TT_ERR_ARG, "%s", err->msg);
    return TT_OK;
}

tt_status modelgen_write(const char *dir, const modelgen_options *o, tt_error *err)
{
    tt_status s = check_options(o, err);
    if (s != TT_OK)
        return s;
    if (o->tokenizer_dir && (s = check_tokenizer_dir(o->tokenizer_dir, o->V, err)) != TT_OK)
        return s;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return tt_fail(err, TT_ERR_IO, "%s: cannot create directory: %s", dir, strerror(errno));
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return tt_fail(err, TT_ERR_IO, "%s: not a directory", dir);
    int eos = o->eos_id >= 0 ? o->eos_id : o->V - 1;
    int FF = o->FF ? o->FF : 4 * o->C;
    if ((s = write_configs(dir, o, eos, err)) != TT_OK)
        return s;
    if (o->tokenizer_dir) {
        if ((s = copy_file(o->tokenizer_dir, dir, "vocab.json", err)) != TT_OK ||
            (s = copy_file(o->tokenizer_dir, dir, "merges.txt", err)) != TT_OK)
            return s;
    } else if ((s = modelgen_write_tokenizer(dir, o->V, err)) != TT_OK) {
        return s;
    }
    return write_safetensors(dir, o, FF, err);
}

/* ---------------------------------------------------------------------------------------------
 * The random speculative pair (tokentop bench --random-pair). Both models get inert blocks (c_proj
 * weights and biases zero: the blocks still run, so every matmul costs what it costs in GPT-2, but
 * they add nothing) and a plain ln_f, so a model's logits are LN(wte[t] + wpe[pos]) . lm_head[v].
 * The target's 768 dimensions are the draft's 256 followed by 512 of its own: its embeddings repeat
 * the draft's on the first 256 and its lm_head too, and the lm_head's other 512 columns are
 * noise-scaled, so the target's logits are the draft's (up to LayerNorm's per-token scale) plus
 * Gaussian noise of about noise * sqrt(512/256) standard deviations (the draft's logits have about
 * 1). An untied lm_head keeps the logits from favouring the current token (x . wte[x] would
 * dominate a tied head). Written by modelgen_write, then rewritten in place where the validated
 * header (core/safetensors) says each tensor lies. */

typedef struct {
    char *path;                /* dir/model.safetensors */
    safetensors_file *st;      /* its validated header: where each tensor is, dtype and shape */
    FILE *f;                   /* the same file, opened for rewriting tensors in place */
} pair_file;

static tt_status pair_open(pair_file *p, const char *dir, tt_error *err)
{
    memset(p, 0, sizeof *p);
    if (!(p->path = util_path_join(dir, "model.safetensors")))
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", dir);
    tt_status s = safetensors_open(p->path, &p->st, err);
    if (s != TT_OK)
        return s;
    if (!(p->f = fopen(p->path, "r+b")))
        return tt_fail(err, TT_ERR_IO, "%s: %s", p->path, strerror(errno));
    return TT_OK;
}

static void pair_close(pair_file *p)
{
    if (p->f)
        fclose(p->f);
    safetensors_close(p->st);
    free(p->path);
}

/* File offset of element 0 of tensor name, which must be F32 with numel elements. */
static tt_status pair_tensor(const pair_file *p, const char *name, uint64_t numel, long *at,
                             tt_error *err)
{
    const st_tensor *t = safetensors_find(p->st, name);
    if (!t)
        return tt_fail(err, TT_ERR_FORMAT, "%s: no tensor %s", p->path, name);
    if (t->dtype != ST_F32 || t->numel != numel)
        return tt_fail(err, TT_ERR_FORMAT, "%s: tensor %s: expected F32 with %llu elements, got "
                       "%s with %llu", p->path, name, (unsigned long long)numel,
                       st_dtype_name(t->dtype), (unsigned long long)t->numel);
    *at = (long)t->offset;
    return TT_OK;
}

static tt_status pair_io_error(const pair_file *p, const char *name, tt_error *err)
{
    return tt_fail(err, TT_ERR_IO, "%s: tensor %s: cannot rewrite it: %s", p->path, name,
                   strerror(errno ? errno : EIO));
}

static tt_status pair_fill(pair_file *p, const char *name, size_t n, float value, tt_error *err)
{
    long at;
    tt_status s = pair_tensor(p, name, n, &at, err);
    if (s != TT_OK)
        return s;
    if (fseek(p->f, at, SEEK_SET) != 0)
        return pair_io_error(p, name, err);
    for (size_t i = 0; i < n; i++)
        if (fwrite(&value, sizeof value, 1, p->f) != 1)
            return pair_io_error(p, name, err);
    return TT_OK;
}

/* Zeroes every block's output projections and sets ln_f to the identity. */
static tt_status pair_inert(pair_file *p, int L, int C, tt_error *err)
{
    char nm[96];
    static const char *zero[] = {"attn.c_proj.weight", "attn.c_proj.bias", "mlp.c_proj.weight",
                                 "mlp.c_proj.bias"};
    tt_status s = TT_OK;
    for (int l = 0; l < L && s == TT_OK; l++)
        for (int k = 0; k < 4 && s == TT_OK; k++) {
            snprintf(nm, sizeof nm, "transformer.h.%d.%s", l, zero[k]);
            size_t n = k == 0 ? (size_t)C * C : k == 2 ? (size_t)4 * C * C : (size_t)C;
            s = pair_fill(p, nm, n, 0.0f, err);
        }
    if (s == TT_OK)
        s = pair_fill(p, "transformer.ln_f.weight", (size_t)C, 1.0f, err);
    if (s == TT_OK)
        s = pair_fill(p, "transformer.ln_f.bias", (size_t)C, 0.0f, err);
    return s;
}

/* Subtracts each row's mean from a (rows, C) tensor. Zero-sum lm_head rows make a logit blind to
 * LayerNorm's mean, which differs between the 256- and 768-wide models; the target's logits are
 * then the draft's times a per-token scale (LayerNorm's), plus the noise. */
static tt_status pair_center(pair_file *p, const char *name, int rows, int C, tt_error *err)
{
    long at;
    tt_status s = pair_tensor(p, name, (uint64_t)rows * C, &at, err);
    if (s != TT_OK)
        return s;
    float *row = malloc((size_t)C * sizeof *row);
    if (!row)
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", p->path);
    for (int i = 0; i < rows && s == TT_OK; i++) {
        if (fseek(p->f, at + (long)i * C * 4, SEEK_SET) != 0 ||
            fread(row, sizeof *row, (size_t)C, p->f) != (size_t)C) {
            s = pair_io_error(p, name, err);
            break;
        }
        double mean = 0;
        for (int j = 0; j < C; j++)
            mean += row[j];
        mean /= C;
        for (int j = 0; j < C; j++)
            row[j] = (float)(row[j] - mean);
        if (fseek(p->f, at + (long)i * C * 4, SEEK_SET) != 0 ||
            fwrite(row, sizeof *row, (size_t)C, p->f) != (size_t)C)
            s = pair_io_error(p, name, err);
    }
    free(row);
    return s;
}

/* Target rows [draft row (Cd) | own (Ct - Cd) with spread sd] for a (rows, Ct) tensor. */
static tt_status pair_extend(pair_file *t, pair_file *d, const char *name, int rows, int Ct,
                             int Cd, double sd, rng *r, tt_error *err)
{
    long at, from;
    tt_status s = pair_tensor(t, name, (uint64_t)rows * Ct, &at, err);
    if (s == TT_OK)
        s = pair_tensor(d, name, (uint64_t)rows * Cd, &from, err);
    if (s != TT_OK)
        return s;
    float *row = malloc((size_t)Ct * sizeof *row);
    if (!row)
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", t->path);
    double a = sd * sqrt(3.0) / 16;     /* uniform with standard deviation sd / 16 */
    for (int i = 0; i < rows && s == TT_OK; i++) {
        if (fseek(d->f, from + (long)i * Cd * 4, SEEK_SET) != 0 ||
            fread(row, sizeof *row, (size_t)Cd, d->f) != (size_t)Cd) {
            s = pair_io_error(d, name, err);
            break;
        }
        for (int j = Cd; j < Ct; j++)
            row[j] = (float)((2 * rng_uniform(r) - 1) * a);
        if (fseek(t->f, at + (long)i * Ct * 4, SEEK_SET) != 0 ||
            fwrite(row, sizeof *row, (size_t)Ct, t->f) != (size_t)Ct)
            s = pair_io_error(t, name, err);
    }
    free(row);
    return s;
}

tt_status modelgen_write_pair(const char *target_dir, const char *draft_dir, double noise,
                              uint64_t seed, tt_error *err)
{
    modelgen_options d, t;
    modelgen_options_default(&d);
    modelgen_options_gpt2(&d, "gpt2");
    d.C = 256;
    d.NH = 4;
    d.L = 2;
    d.untied_lm_head = true;
    d.seed = seed;
    modelgen_options_default(&t);
    modelgen_options_gpt2(&t, "gpt2");
    t.untied_lm_head = true;
    t.seed = seed + 1;
    tt_status s;
    if ((s = modelgen_write(draft_dir, &d, err)) != TT_OK ||
        (s = modelgen_write(target_dir, &t, err)) != TT_OK)
        return s;
    pair_file pd, pt;
    s = pair_open(&pd, draft_dir, err);
    tt_status s2 = pair_open(&pt, target_dir, s == TT_OK ? err : NULL);
    if (s == TT_OK)
        s = s2;
    rng r;
    rng_seed(&r, seed + 2);
    if (s == TT_OK)
        s = pair_inert(&pd, d.L, d.C, err);
    if (s == TT_OK)
        s = pair_inert(&pt, t.L, t.C, err);
    if (s == TT_OK)
        s = pair_extend(&pt, &pd, "transformer.wte.weight", t.V, t.C, d.C, 1.0, &r, err);
    if (s == TT_OK)
        s = pair_extend(&pt, &pd, "transformer.wpe.weight", t.maxT, t.C, d.C, 1.0, &r, err);
    if (s == TT_OK)
        s = pair_center(&pd, "lm_head.weight", d.V, d.C, err);
    if (s == TT_OK)
        s = pair_extend(&pt, &pd, "lm_head.weight", t.V, t.C, d.C, noise, &r, err);
    if (s == TT_OK && ((pt.f && fflush(pt.f) != 0) || (pd.f && fflush(pd.f) != 0)))
        s = tt_fail(err, TT_ERR_IO, "%s: cannot rewrite the random pair's tensors: %s",
                    target_dir, strerror(errno));
    pair_close(&pd);
    pair_close(&pt);
    return s;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void modelgen_remove_dir(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
