/* tokenizer_json.c: Hugging Face tokenizer.json (and tokenizer_config.json) into a tokenizer, and
 * a model directory's tokenizer, whichever files it has.
 *
 * The pieces of tokenizer.json tokentop understands are listed in tokenizer.h; the rest is
 * refused by name ("tokenizer.json: model.type: Unigram is not supported (BPE only)") rather
 * than encoded differently from the model's own tokenizer. Two families come out of it:
 * byte-level BPE (decoder ByteLevel: bytes spelled in GPT-2's alphabet, the pre-tokenizer's
 * regexes) and SentencePiece-style BPE (characters, "▁" for a space, <0xNN> byte tokens, the
 * decoder's strip of the leading space). */
#include "core/tokenizer/tokenizer_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/base/util.h"

#define GPT2_PATTERN \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* Metaspace's split: each piece starts at a "▁" (behaviour MergedWithNext). */
#define METASPACE_PATTERN "\\x{2581}[^\\x{2581}]*|[^\\x{2581}]+"

/* Longest added token accepted (bytes); real ones are a few dozen. */
#define ADDED_TOKEN_MAX_LEN 1024

typedef struct {
    tokenizer *t;
    const char *path;                    /* the file, for messages */
    char *patterns[TOKENIZER_MAX_SPLITS]; /* the pre-tokenizer's splits, in order */
    int n_patterns;
    bool byte_level_pre;                 /* a ByteLevel pre-tokenizer step was seen */
    tt_error *err;
} json_loader;

/* A value's JSON type for messages, "nothing (the field is missing)" for an absent one. */
static const char *kind_of(const cJSON *v)
{
    return v ? util_json_type_name(v) : "nothing (the field is missing)";
}

static const char *type_of(const cJSON *o)
{
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(ty) ? ty->valuestring : NULL;
}

/* A boolean field, def when absent or null; false with a message when of another type. */
static bool get_bool(json_loader *L, const cJSON *o, const char *field, const char *name,
                     bool def, bool *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return true;
    }
    if (!cJSON_IsBool(v)) {
        tt_fail(L->err, TT_ERR_FORMAT, "%s: %s.%s: expected true or false, got %s", L->path,
                field, name, kind_of(v));
        return false;
    }
    *out = cJSON_IsTrue(v);
    return true;
}

static tt_status unsupported(json_loader *L, const char *field, const cJSON *o, const char *what)
{
    const char *ty = type_of(o);
    if (!cJSON_IsObject(o))
        return tt_fail(L->err, TT_ERR_FORMAT, "%s: %s: expected an object, got %s", L->path,
                       field, kind_of(o));
    if (!ty)
        return tt_fail(L->err, TT_ERR_FORMAT, "%s: %s.type: missing", L->path, field);
    return tt_fail(L->err, TT_ERR_UNSUPPORTED, "%s: %s.type: %s is not supported (%s)", L->path,
                   field, ty, what);
}

static tt_status add_pattern(json_loader *L, const char *field, const char *pattern, size_t len)
{
    if (L->n_patterns == TOKENIZER_MAX_SPLITS)
        return tt_fail(L->err, TT_ERR_UNSUPPORTED, "%s: %s: more than %d splits", L->path, field,
                       TOKENIZER_MAX_SPLITS);
    char *p = malloc(len + 1);
    if (!p)
        return tt_fail(L->err, TT_ERR_NOMEM, "%s: out of memory", L->path);
    memcpy(p, pattern, len);
    p[len] = 0;
    L->patterns[L->n_patterns++] = p;
    return TT_OK;
}

/* A String pattern as a regex: every ASCII punctuation escaped. */
static tt_status add_literal_pattern(json_loader *L, const char *field, const char *s)
{
    size_t n = strlen(s);
    char *p = malloc(2 * n + 1);
    if (!p)
        return tt_fail(L->err, TT_ERR_NOMEM, "%s: out of memory", L->path);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80 && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                          (c >= 'A' && c <= 'Z') || c == ' '))
            p[w++] = '\\';
        p[w++] = (char)c;
    }
    tt_status st = add_pattern(L, field, p, w);
    free(p);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * Sequence: the one composite of normalizers, pre-tokenizers and post-processors */

typedef tt_status (*json_step_loader)(json_loader *L, const cJSON *n, const char *field,
                                      int depth);

/* A "Sequence" node's array KEY, each element loaded by load as FIELD.KEY[i] one level deeper. */
static tt_status load_sequence(json_loader *L, const cJSON *n, const char *field, const char *key,
                               int depth, json_step_loader load)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, key);
    if (!cJSON_IsArray(list))
        return tt_fail(L->err, TT_ERR_FORMAT, "%s: %s.%s: expected an array, got %s", L->path,
                       field, key, kind_of(list));
    char sub[96];
    int i = 0;
    for (const cJSON *e = list->child; e; e = e->next, i++) {
        snprintf(sub, sizeof sub, "%s.%s[%d]", field, key, i);
        tt_status st = load(L, e, sub, depth + 1);
        if (st != TT_OK)
            return st;
    }
    return TT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * normalizer */

static tt_status add_norm(json_loader *L, const char *field, norm_kind kind, const char *from,
                          const char *to)
{
    tokenizer *t = L->t;
    if (t->n_norms == TOKENIZER_MAX_NORMS)
        return tt_fail(L->err, TT_ERR_UNSUPPORTED, "%s: %s: more than %d steps", L->path, field,
                       TOKENIZER_MAX_NORMS);
    norm_step *s = &t->norms[t->n_norms++];
    *s = (norm_step){.kind = kind};
    if ((from && !(s->from = strdup(from))) || (to && !(s->to = strdup(to))))
        return tt_fail(L->err, TT_ERR_NOMEM, "%s: out of memory", L->path);
    s->from_len = from ? strlen(from) : 0;
    s->to_len = to ? strlen(to) : 0;
    return TT_OK;
}

static tt_status load_normalizer(json_loader *L, const cJSON *n, const char *field, int depth)
{
    if (!n || cJSON_IsNull(n))
        return TT_OK;
    const char *ty = type_of(n);
    if (ty && strcmp(ty, "Sequence") == 0 && depth < 4)
        return load_sequence(L, n, field, "normalizers", depth, load_normalizer);
    if (ty && strcmp(ty, "NFC") == 0)
        return add_norm(L, field, NORM_NFC, NULL, NULL);
    if (ty && strcmp(ty, "Prepend") == 0) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(n, "prepend");
        if (!cJSON_IsString(p))
            return tt_fail(L->err, TT_ERR_FORMAT, "%s: %s.prepend: expected a string, got %s",
                           L->path, field, kind_of(p));
        return add_norm(L, field, NORM_PREPEND, NULL, p->valuestring);
    }
    if (ty && strcmp(ty, "Replace") == 0) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(n, "pattern");
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(pat, "String");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(n, "content");
        if (!cJSON_IsString(s) || !s->valuestring[0])
            return tt_fail(L->err, TT_ERR_UNSUPPORTED,
                           "%s: %s.pattern: only a non-empty String pattern is supported",
                           L->path, field);
        if (!cJSON_IsString(c))
            return tt_fail(L->err, TT_ERR_FORMAT, "%s: %s.content: expected a string, got %s",
                           L->path, field, kind_of(c));
        return add_norm(L, field, NORM_REPLACE, s->valuestring, c->valuestring);
    }
    return unsupported(L, field, n, "NFC, Prepend, Replace and Sequence are");
}

/* ---------------------------------------------------------------------------------------------
 * pre_tokenizer */

static tt_status load_pre_tokenizer(json_loader *L, const cJSON *p, const char *field, int depth)
{
    if (!p || cJSON_IsNull(p))
        return TT_OK;
    tokenizer *t = L->t;
    const char *ty = type_of(p);
    if (ty && strcmp(ty, "Sequence") == 0 && depth < 4)
        return load_sequence(L, p, field, "pretokenizers", depth, load_pre_tokenizer);
    if (ty && strcmp(ty, "ByteLevel") == 0) {
        bool prefix, use_regex;
        if (!get_bool(L, p, field, "add_prefix_space", false, &prefix) ||
            !get_bool(L, p, field, "use_regex", true, &use_regex))
            return TT_ERR_FORMAT;
        if (prefix)
            return tt_fail(L->err, TT_ERR_UNSUPPORTED,
                           "%s: %s.add_prefix_space: true is not supported", L->path, field);
        L->byte_level_pre = true;
        return use_regex ? add_pattern(L, field, GPT2_PATTERN, strlen(GPT2_PATTERN)) : TT_OK;
    }
    if (ty && strcmp(ty, "Split") == 0) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(p, "pattern");
        const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(pat, "String");
        const cJSON *behavior = cJSON_GetObjectItemCaseSensitive(p, "behavior");
        bool invert;
        if (!get_bool(L, p, field, "invert", false, &invert))
            return TT_ERR_FORMAT;
        if (!cJSON_IsString(behavior) || strcmp(behavior->valuestring, "Isolated") != 0)
            return tt_fail(L->err, TT_ERR_UNSUPPORTED,
                           "%s: %s.behavior: %s is not supported (Isolated only)", L->path, field,
                           cJSON_IsString(behavior) ? behavior->valuestring
                                                    : kind_of(behavior));
        if (invert)
            return tt_fail(L->err, TT_ERR_UNSUPPORTED, "%s: %s.invert: true is not supported",
                           L->path, field);
        if (cJSON_IsString(re) && re->valuestring[0])
            return add_pattern(L, field, re->valuestring, strlen(re->valuestring));
        if (cJSON_IsString(s) && s->valuestring[0])
            return add_literal_pattern(L, field, s->valuestring);
        return tt_fail(L->err, TT_ERR_FORMAT,
                       "%s: %s.pattern: expected {\"Regex\": ...} or {\"String\": ...}", L->path,
                       field);
    }
    if (ty && strcmp(ty, "Digits") == 0) {
        bool individual;
        if (!get_bool(L, p, field, "individual_digits", false, &individual))
            return TT_ERR_FORMAT;
        const char *pattern = individual ? "\\p{N}" : "\\p{N}+";
        return add_pattern(L, field, pattern, strlen(pattern));
    }
    if (ty && strcmp(ty, "Metaspace") == 0) {
        const cJSON *rep = cJSON_GetObjectItemCaseSensitive(p, "replacement");
        if (rep && !(cJSON_IsString(rep) && strcmp(rep->valuestring, "\xe2\x96\x81") == 0))
            return tt_fail(L->err, TT_ERR_UNSUPPORTED,
                           "%s: %s.replacement: only \"\xe2\x96\x81\" is supported", L->path,
                           field);
        const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(p, "prepend_scheme");
        bool prefix, split;
        if (!get_bool(L, p, field, "add_prefix_space", true, &prefix) ||
            !get_bool(L, p, field, "split", true, &split))
            return TT_ERR_FORMAT;
        t->metaspace = prefix ? 2 : 3;
        if (cJSON_IsString(scheme)) {
            const char *v = scheme->valuestring;
            if (strcmp(v, "always") == 0)
                t->metaspace = 2;
            else if (strcmp(v, "first") == 0)
                t->metaspace = 1;
            else if (strcmp(v, "never") == 0)
                t->metaspace = 3;
            else
                return tt_fail(L->err, TT_ERR_UNSUPPORTED,
                               "%s: %s.prepend_scheme: %s is not supported (always, first, "
                               "never)", L->path, field, v);
        }
        return split ? add_pattern(L, field, METASPACE_PATTERN, strlen(METASPACE_PATTERN))
                     : TT_OK;
    }
    return unsupported(L, field, p, "ByteLevel, Split, Digits, Metaspace and Sequence are");
}

/* ---------------------------------------------------------------------------------------------
 * decoder: decides how a spelling decodes (the tokenizer's kind) and the leading-space strip */

static tt_status load_decoder(json_loader *L, const cJSON *d, bool byte_fallback)
{
    tokenizer *t = L->t;
    const char *ty = d && !cJSON_IsNull(d) ? type_of(d) : NULL;
    if (!d || cJSON_IsNull(d)) {
        /* No decoder: the tokens' spellings are what the pre-tokenizer made of the text. */
        t->kind = L->byte_level_pre || !byte_fallback ? TOKENIZER_BYTE_LEVEL : TOKENIZER_SPM;
        return TT_OK;
    }
    if (ty && strcmp(ty, "ByteLevel") == 0) {
        t->kind = TOKENIZER_BYTE_LEVEL;
        return TT_OK;
    }
    if (ty && strcmp(ty, "Metaspace") == 0) {
        t->kind = TOKENIZER_SPM;
        const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(d, "prepend_scheme");
        bool prefix;
        if (!get_bool(L, d, "decoder", "add_prefix_space", true, &prefix))
            return TT_ERR_FORMAT;
        t->strip_leading_space = cJSON_IsString(scheme) ? strcmp(scheme->valuestring, "never") != 0
                                                        : prefix;
        return TT_OK;
    }
    if (ty && strcmp(ty, "Sequence") == 0) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(d, "decoders");
        if (!cJSON_IsArray(list))
            return tt_fail(L->err, TT_ERR_FORMAT, "%s: decoder.decoders: expected an array, got %s",
                           L->path, kind_of(list));
        t->kind = TOKENIZER_SPM;
        int i = 0;
        for (const cJSON *e = list->child; e; e = e->next, i++) {
            const char *et = type_of(e);
            char field[64];
            snprintf(field, sizeof field, "decoder.decoders[%d]", i);
            if (et && (strcmp(et, "ByteFallback") == 0 || strcmp(et, "Fuse") == 0))
                continue;
            if (et && strcmp(et, "Replace") == 0) {
                const cJSON *s = cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(e, "pattern"), "String");
                const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
                if (cJSON_IsString(s) && strcmp(s->valuestring, "\xe2\x96\x81") == 0 &&
                    cJSON_IsString(c) && strcmp(c->valuestring, " ") == 0)
                    continue;
                return tt_fail(L->err, TT_ERR_UNSUPPORTED,
                               "%s: %s: only Replace \"\xe2\x96\x81\" -> \" \" is supported",
                               L->path, field);
            }
            if (et && strcmp(et, "Strip") == 0) {
                const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
                const cJSON *start = cJSON_GetObjectItemCaseSensitive(e, "start");
                const cJSON *stop = cJSON_GetObjectItemCaseSensitive(e, "stop");
                if (!cJSON_IsString(c) || strcmp(c->valuestring, " ") != 0 ||
                    !cJSON_IsNumber(start) || start->valuedouble > 1 ||
                    (stop && !(cJSON_IsNumber(stop) && stop->valuedouble == 0)))
                    return tt_fail(L->err, TT_ERR_UNSUPPORTED,
                                   "%s: %s: only Strip of one leading \" \" is supported",
                                   L->path, field);
                t->strip_leading_space = start->valuedouble == 1;
                continue;
            }
            return unsupported(L, field, e, "Replace, ByteFallback, Fuse and Strip are");
        }
        return TT_OK;
    }
    return unsupported(L, "decoder", d, "ByteLevel, Metaspace and Sequence are");
}

/* ---------------------------------------------------------------------------------------------
 * post_processor: the BOS the model sees first */

static tt_status load_post_processor(json_loader *L, const cJSON *p, const char *field,
                                     int depth)
{
    if (!p || cJSON_IsNull(p))
        return TT_OK;
    tokenizer *t = L->t;
    const char *ty = type_of(p);
    if (ty && strcmp(ty, "Sequence") == 0 && depth < 4)
        return load_sequence(L, p, field, "processors", depth, load_post_processor);
    if (ty && strcmp(ty, "ByteLevel") == 0)
        return TT_OK;
    if (ty && strcmp(ty, "TemplateProcessing") == 0) {
        const cJSON *single = cJSON_GetObjectItemCaseSensitive(p, "single");
        if (!cJSON_IsArray(single))
            return tt_fail(L->err, TT_ERR_FORMAT, "%s: %s.single: expected an array, got %s",
                           L->path, field, kind_of(single));
        /* Special tokens before the text ($A) are what a prompt starts with: the BOS. */
        for (const cJSON *e = single->child; e; e = e->next) {
            const cJSON *sp = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
            if (!sp)
                break;
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(sp, "id");
            if (!cJSON_IsString(id))
                return tt_fail(L->err, TT_ERR_FORMAT,
                               "%s: %s.single: SpecialToken.id: expected a string, got %s",
                               L->path, field, kind_of(id));
            int32_t bos = tokenizer_token_id(t, id->valuestring);
            char q[96];
            if (bos < 0)
                return tt_fail(L->err, TT_ERR_FORMAT,
                               "%s: %s.single: special token %s is not in the vocabulary",
                               L->path, field,
                               tokenizer_quote(q, sizeof q, id->valuestring,
                                               strlen(id->valuestring)));
            t->bos_id = bos;
            t->add_bos = true;
            break;
        }
        return TT_OK;
    }
    return unsupported(L, field, p, "TemplateProcessing, ByteLevel and Sequence are");
}

/* ---------------------------------------------------------------------------------------------
 * model: BPE's fields, vocabulary and merges */

static tt_status check_model(json_loader *L, const cJSON *m, bool *byte_fallback)
{
    if (!cJSON_IsObject(m))
        return tt_fail(L->err, TT_ERR_FORMAT, "%s: model: expected an object, got %s", L->path,
                       kind_of(m));
    const char *ty = type_of(m);
    const cJSON *tyj = cJSON_GetObjectItemCaseSensitive(m, "type");
    if (tyj && !ty)
        return tt_fail(L->err, TT_ERR_FORMAT, "%s: model.type: expected a string, got %s",
                       L->path, kind_of(tyj));
    if (!ty && !cJSON_GetObjectItemCaseSensitive(m, "merges"))
        return tt_fail(L->err, TT_ERR_FORMAT, "%s: model.type: missing (and no model.merges)",
                       L->path);
    if (ty && strcmp(ty, "BPE") != 0)
        return tt_fail(L->err, TT_ERR_UNSUPPORTED, "%s: model.type: %s is not supported (BPE only)",
                       L->path, ty);
    static const char *const empty_fields[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (size_t i = 0; i < sizeof empty_fields / sizeof *empty_fields; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, empty_fields[i]);
        if (v && !cJSON_IsNull(v) && !(cJSON_IsString(v) && !v->valuestring[0]))
            return tt_fail(L->err, TT_ERR_UNSUPPORTED, "%s: model.%s: %s is not supported "
                           "(only \"\" or null)", L->path, empty_fields[i],
                           cJSON_IsString(v) ? v->valuestring : kind_of(v));
    }
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(m, "dropout");
    if (dropout && !cJSON_IsNull(dropout) &&
        !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0))
        return tt_fail(L->err, TT_ERR_UNSUPPORTED,
                       "%s: model.dropout: BPE dropout is not supported (only null or 0)",
                       L->path);
    tokenizer *t = L->t;
    if (!get_bool(L, m, "model", "byte_fallback", false, byte_fallback) ||
        !get_bool(L, m, "model", "fuse_unk", false, &t->fuse_unk) ||
        !get_bool(L, m, "model", "ignore_merges", false, &t->ignore_merges))
        return TT_ERR_FORMAT;
    return TT_OK;
}

/* A merge as "a b" or ["a", "b"]: the two halves. */
static bool merge_halves(const cJSON *e, const char **a, size_t *la, const char **b, size_t *lb)
{
    if (cJSON_IsString(e)) {
        const char *s = e->valuestring, *sp = strchr(s, ' ');
        if (!sp || sp == s || !sp[1] || strchr(sp + 1, ' '))
            return false;
        *a = s;
        *la = (size_t)(sp - s);
        *b = sp + 1;
        *lb = strlen(sp + 1);
        return true;
    }
    if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(e->child) &&
        cJSON_IsString(e->child->next) && e->child->valuestring[0] &&
        e->child->next->valuestring[0]) {
        *a = e->child->valuestring;
        *la = strlen(*a);
        *b = e->child->next->valuestring;
        *lb = strlen(*b);
        return true;
    }
    return false;
}

static tt_status load_merges_json(json_loader *L, const cJSON *merges)
{
    tokenizer *t = L->t;
    if (!cJSON_IsArray(merges))
        return tt_fail(L->err, TT_ERR_FORMAT, "%s: model.merges: expected an array, got %s",
                       L->path, kind_of(merges));
    size_t n = 0;
    for (const cJSON *e = merges->child; e; e = e->next)
        n++;
    char where[300];
    snprintf(where, sizeof where, "%s: model.merges", L->path);
    tt_status st = tokenizer_merges_init(t, n, where, L->err);
    if (st != TT_OK)
        return st;
    size_t max_sym = 0;
    for (int id = 0; id < t->vocab_size; id++)
        if (t->tok_str_len[id] > max_sym)
            max_sym = t->tok_str_len[id];
    char *joined = malloc(2 * max_sym + 1);
    if (!joined)
        return tt_fail(L->err, TT_ERR_NOMEM, "%s: out of memory", L->path);
    char q[96], q2[96], q3[96];
    int i = 0;
    for (const cJSON *e = merges->child; e; e = e->next, i++) {
        const char *a, *b;
        size_t la, lb;
        if (!merge_halves(e, &a, &la, &b, &lb)) {
            st = tt_fail(L->err, TT_ERR_FORMAT,
                         "%s: model.merges[%d]: expected \"a b\" or [\"a\", \"b\"], got %s",
                         L->path, i, cJSON_IsString(e) ? tokenizer_quote(q, sizeof q,
                                                                         e->valuestring,
                                                                         strlen(e->valuestring))
                                                       : kind_of(e));
            break;
        }
        if (la > max_sym || lb > max_sym) {
            st = tt_fail(L->err, TT_ERR_FORMAT, "%s: model.merges[%d]: symbol %s is not in "
                         "model.vocab", L->path, i,
                         la > max_sym ? tokenizer_quote(q, sizeof q, a, la)
                                      : tokenizer_quote(q, sizeof q, b, lb));
            break;
        }
        int bad = tokenizer_add_merge(t, a, la, b, lb, joined);
        if (bad == 1 || bad == 2) {
            st = tt_fail(L->err, TT_ERR_FORMAT,
                         "%s: model.merges[%d]: symbol %s is not in model.vocab", L->path, i,
                         bad == 1 ? tokenizer_quote(q, sizeof q, a, la)
                                  : tokenizer_quote(q, sizeof q, b, lb));
            break;
        }
        if (bad == 3) {
            st = tt_fail(L->err, TT_ERR_FORMAT,
                         "%s: model.merges[%d]: merge of %s and %s gives %s, which is not in "
                         "model.vocab", L->path, i, tokenizer_quote(q, sizeof q, a, la),
                         tokenizer_quote(q2, sizeof q2, b, lb),
                         tokenizer_quote(q3, sizeof q3, joined, la + lb));
            break;
        }
    }
    free(joined);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * added_tokens */

static int added_cmp(const void *pa, const void *pb)
{
    const added_token *a = pa, *b = pb;
    unsigned char ca = (unsigned char)a->content[0], cb = (unsigned char)b->content[0];
    if (ca != cb)
        return ca < cb ? -1 : 1;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Pass 1: checks each entry; *max_id and *arena are what the vocabulary must make room for. */
static tt_status scan_added(json_loader *L, const cJSON *list, int *max_id, size_t *arena,
                            int *n)
{
    *max_id = -1;
    *arena = 0;
    *n = 0;
    if (!list || cJSON_IsNull(list))
        return TT_OK;
    if (!cJSON_IsArray(list))
        return tt_fail(L->err, TT_ERR_FORMAT, "%s: added_tokens: expected an array, got %s",
                       L->path, kind_of(list));
    int i = 0;
    for (const cJSON *e = list->child; e; e = e->next, i++) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!cJSON_IsNumber(id) || !isfinite(id->valuedouble) ||
            id->valuedouble != floor(id->valuedouble) || id->valuedouble < 0 ||
            id->valuedouble >= TOKENIZER_MAX_ID)
            return tt_fail(L->err, TT_ERR_FORMAT,
                           "%s: added_tokens[%d].id: expected an integer in [0, %d), got %s",
                           L->path, i, TOKENIZER_MAX_ID,
                           cJSON_IsNumber(id) ? "a number out of range" : kind_of(id));
        size_t len = cJSON_IsString(c) ? strlen(c->valuestring) : 0;
        if (!cJSON_IsString(c) || len == 0 || len > ADDED_TOKEN_MAX_LEN)
            return tt_fail(L->err, TT_ERR_FORMAT,
                           "%s: added_tokens[%d].content: expected a string of 1 to %d bytes, "
                           "got %s%s", L->path, i, ADDED_TOKEN_MAX_LEN,
                           kind_of(c), len ? " (too long)" : "");
        if ((int)id->valuedouble > *max_id)
            *max_id = (int)id->valuedouble;
        *arena += 2 * (len + 1);
        (*n)++;
    }
    return TT_OK;
}

/* Pass 2, after the vocabulary: each added token takes its id (or agrees with the vocabulary's
 * spelling there) and joins the table matched in text. */
static tt_status load_added(json_loader *L, const cJSON *list, int n)
{
    tokenizer *t = L->t;
    if (n == 0)
        return TT_OK;
    t->added = calloc((size_t)n, sizeof *t->added);
    if (!t->added)
        return tt_fail(L->err, TT_ERR_NOMEM, "%s: out of memory", L->path);
    char q[96], q2[96];
    int i = 0;
    for (const cJSON *e = list->child; e; e = e->next, i++) {
        int32_t id = (int32_t)cJSON_GetObjectItemCaseSensitive(e, "id")->valuedouble;
        const char *c = cJSON_GetObjectItemCaseSensitive(e, "content")->valuestring;
        uint32_t len = (uint32_t)strlen(c);
        char field[48];
        snprintf(field, sizeof field, "added_tokens[%d]", i);
        added_token *a = &t->added[t->n_added];
        if (!get_bool(L, e, field, "special", false, &a->special) ||
            !get_bool(L, e, field, "lstrip", false, &a->lstrip) ||
            !get_bool(L, e, field, "rstrip", false, &a->rstrip))
            return TT_ERR_FORMAT;
        if (t->tok_str[id]) {
            if (t->tok_str_len[id] != len || memcmp(t->tok_str[id], c, len) != 0)
                return tt_fail(L->err, TT_ERR_FORMAT,
                               "%s: added_tokens[%d]: id %d is %s here but %s in model.vocab",
                               L->path, i, id, tokenizer_quote(q, sizeof q, c, len),
                               tokenizer_quote(q2, sizeof q2, t->tok_str[id],
                                               t->tok_str_len[id]));
        } else {
            int32_t other = tokenizer_vocab_lookup(t, c, len);
            if (other >= 0)
                return tt_fail(L->err, TT_ERR_FORMAT,
                               "%s: added_tokens[%d]: %s has id %d here but %d already",
                               L->path, i, tokenizer_quote(q, sizeof q, c, len), id, other);
            /* An added token decodes to its own text. */
            tokenizer_set_token(t, id, c, len, c, len);
        }
        if (a->special)
            t->tok_flags[id] |= TOKENIZER_FLAG_SPECIAL;
        a->id = id;
        a->content = t->tok_str[id];
        a->len = len;
        t->n_added++;
    }
    qsort(t->added, (size_t)t->n_added, sizeof *t->added, added_cmp);
    int k = 0;
    for (int b = 0; b <= 256; b++) {
        while (k < t->n_added && (unsigned char)t->added[k].content[0] < b)
            k++;
        t->added_start[b] = k;
    }
    return TT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * tokenizer_config.json */

/* bos_token / eos_token: a string, {"content": "..."}, or null. */
static tt_status config_token(const char *path, const cJSON *cfg, const char *name,
                              const tokenizer *t, int32_t *id, tt_error *err)
{
    *id = -2; /* absent */
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, name);
    if (!v || cJSON_IsNull(v))
        return TT_OK;
    if (cJSON_IsObject(v))
        v = cJSON_GetObjectItemCaseSensitive(v, "content");
    if (!cJSON_IsString(v))
        return tt_fail(err, TT_ERR_FORMAT, "%s: %s: expected a string or {\"content\": ...}, "
                       "got %s", path, name, kind_of(v));
    *id = tokenizer_token_id(t, v->valuestring);
    char q[96];
    if (*id < 0)
        return tt_fail(err, TT_ERR_FORMAT, "%s: %s: %s is not in the tokenizer's vocabulary",
                       path, name, tokenizer_quote(q, sizeof q, v->valuestring,
                                                   strlen(v->valuestring)));
    return TT_OK;
}

static tt_status apply_config(tokenizer *t, const char *text, size_t len, const char *path,
                              tt_error *err)
{
    cJSON *cfg = tokenizer_parse_json(path, text, len, err);
    if (!cfg)
        return TT_ERR_FORMAT;
    tt_status st = TT_OK;
    int32_t bos, eos;
    if (!cJSON_IsObject(cfg)) {
        st = tt_fail(err, TT_ERR_FORMAT, "%s: expected a JSON object, got %s", path,
                     kind_of(cfg));
        goto done;
    }
    if ((st = config_token(path, cfg, "bos_token", t, &bos, err)) != TT_OK ||
        (st = config_token(path, cfg, "eos_token", t, &eos, err)) != TT_OK)
        goto done;
    if (bos >= 0)
        t->bos_id = bos;
    if (eos >= 0)
        t->eot_id = eos;
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token");
    if (add && !cJSON_IsNull(add)) {
        if (!cJSON_IsBool(add)) {
            st = tt_fail(err, TT_ERR_FORMAT, "%s: add_bos_token: expected true or false, got %s",
                         path, kind_of(add));
            goto done;
        }
        t->add_bos = cJSON_IsTrue(add);
        if (t->add_bos && t->bos_id < 0) {
            st = tt_fail(err, TT_ERR_FORMAT, "%s: add_bos_token: true, but there is no bos_token",
                         path);
            goto done;
        }
    }
    t->config_json = malloc(len + 1);
    if (!t->config_json) {
        st = tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    memcpy(t->config_json, text, len);
    t->config_json[len] = 0;
done:
    cJSON_Delete(cfg);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * tokenizer.json */

static tt_status load_json(json_loader *L, const cJSON *root)
{
    tokenizer *t = L->t;
    if (!cJSON_IsObject(root))
        return tt_fail(L->err, TT_ERR_FORMAT, "%s: expected a JSON object, got %s", L->path,
                       kind_of(root));
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    bool byte_fallback = false;
    tt_status st = check_model(L, model, &byte_fallback);
    if (st == TT_OK)
        st = load_normalizer(L, cJSON_GetObjectItemCaseSensitive(root, "normalizer"),
                             "normalizer", 0);
    if (st == TT_OK)
        st = load_pre_tokenizer(L, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"),
                                "pre_tokenizer", 0);
    if (st == TT_OK)
        st = load_decoder(L, cJSON_GetObjectItemCaseSensitive(root, "decoder"), byte_fallback);
    if (st != TT_OK)
        return st;
    if (t->kind == TOKENIZER_BYTE_LEVEL && !L->byte_level_pre)
        return tt_fail(L->err, TT_ERR_UNSUPPORTED,
                       "%s: pre_tokenizer: no ByteLevel step, and neither model.byte_fallback nor "
                       "a SentencePiece decoder: byte-level BPE needs ByteLevel", L->path);
    t->byte_fallback = byte_fallback;

    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    int max_added = -1, n_added = 0;
    size_t added_arena = 0;
    if ((st = scan_added(L, added, &max_added, &added_arena, &n_added)) != TT_OK)
        return st;
    char where[300];
    snprintf(where, sizeof where, "%s: model.vocab", L->path);
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    if ((st = tokenizer_vocab_from_json(t, where, vocab, max_added + 1, added_arena, L->err)) !=
            TT_OK ||
        (st = load_added(L, added, n_added)) != TT_OK ||
        (st = load_merges_json(L, cJSON_GetObjectItemCaseSensitive(model, "merges"))) != TT_OK)
        return st;

    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    char q[96];
    if (cJSON_IsString(unk)) {
        t->unk_id = tokenizer_token_id(t, unk->valuestring);
        if (t->unk_id < 0)
            return tt_fail(L->err, TT_ERR_FORMAT, "%s: model.unk_token: %s is not in model.vocab",
                           L->path, tokenizer_quote(q, sizeof q, unk->valuestring,
                                                    strlen(unk->valuestring)));
    } else if (unk && !cJSON_IsNull(unk)) {
        return tt_fail(L->err, TT_ERR_FORMAT, "%s: model.unk_token: expected a string, got %s",
                       L->path, kind_of(unk));
    }
    if (t->kind == TOKENIZER_SPM) {
        int missing = -1;
        for (int b = 0; b < 256 && missing < 0; b++)
            if (t->byte_id[b] < 0)
                missing = b;
        if (!t->byte_fallback)
            for (int b = 0; b < 256; b++)
                t->byte_id[b] = -1;
        if ((!t->byte_fallback || missing >= 0) && t->unk_id < 0)
            return tt_fail(L->err, TT_ERR_FORMAT,
                           "%s: model: no unk_token and %s: some text could not be encoded",
                           L->path, t->byte_fallback ? "a byte token is missing from model.vocab"
                                                     : "byte_fallback is false");
    }
    if (t->kind == TOKENIZER_SPM) {
        t->spm_words = true;
        for (int id = 0; id < t->vocab_size && t->spm_words; id++) {
            const char *s = t->tok_str[id];
            for (uint32_t i = 1; s && i + 3 <= t->tok_str_len[id]; i++)
                if (memcmp(s + i, "\xe2\x96\x81", 3) == 0 &&
                    !(i >= 3 && memcmp(s + i - 3, "\xe2\x96\x81", 3) == 0)) {
                    t->spm_words = false;
                    break;
                }
        }
    }
    if ((st = load_post_processor(L, cJSON_GetObjectItemCaseSensitive(root, "post_processor"),
                                  "post_processor", 0)) != TT_OK)
        return st;
    if (t->eot_id < 0)
        t->eot_id = tokenizer_token_id(t, "</s>");
    t->from_json = true;
    return tokenizer_compile_splits(t, (const char *const *)L->patterns, L->n_patterns,
                                    L->path, L->err);
}

tt_status tokenizer_load_json_buffers(const char *json, size_t json_len, const char *json_name,
                                      const char *config, size_t config_len,
                                      const char *config_name, tokenizer **out, tt_error *err)
{
    *out = NULL;
    if (!json && json_len)
        return tt_fail(err, TT_ERR_ARG, "tokenizer: the tokenizer.json buffer is NULL");
    cJSON *root = tokenizer_parse_json(json_name, json, json_len, err);
    if (!root)
        return TT_ERR_FORMAT;
    json_loader L = {.t = tokenizer_new(), .path = json_name, .err = err};
    tt_status st = L.t ? load_json(&L, root)
                       : tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", json_name);
    cJSON_Delete(root);
    for (int i = 0; i < L.n_patterns; i++)
        free(L.patterns[i]);
    if (st == TT_OK && config)
        st = apply_config(L.t, config, config_len, config_name, err);
    if (st != TT_OK) {
        tokenizer_free(L.t);
        return st;
    }
    *out = L.t;
    return TT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * A model directory */

static bool file_exists(const char *path)
{
    struct stat sb;
    return path && stat(path, &sb) == 0;
}

tt_status tokenizer_load_dir(const char *dir, tokenizer **out, tt_error *err)
{
    *out = NULL;
    char *json_path = util_path_join(dir, "tokenizer.json");
    char *vocab_path = util_path_join(dir, "vocab.json");
    char *merges_path = util_path_join(dir, "merges.txt");
    char *config_path = util_path_join(dir, "tokenizer_config.json");
    char *json = NULL, *config = NULL;
    size_t json_len = 0, config_len = 0;
    tt_status st = TT_OK;
    if (!json_path || !vocab_path || !merges_path || !config_path) {
        st = tt_fail(err, TT_ERR_NOMEM, "tokenizer: out of memory");
        goto done;
    }
    if (file_exists(config_path) &&
        (st = util_read_file(config_path, 0, &config, &config_len, NULL, err)) != TT_OK)
        goto done;
    if (file_exists(json_path)) {
        if ((st = util_read_file(json_path, 0, &json, &json_len, NULL, err)) == TT_OK)
            st = tokenizer_load_json_buffers(json, json_len, json_path, config, config_len,
                                             config_path, out, err);
    } else if (file_exists(vocab_path) || file_exists(merges_path)) {
        st = tokenizer_load(vocab_path, merges_path, out, err);
        if (st == TT_OK && config) {
            st = apply_config(*out, config, config_len, config_path, err);
            if (st != TT_OK) {
                tokenizer_free(*out);
                *out = NULL;
            }
        }
    } else {
        st = tt_fail(err, TT_ERR_IO, "%s: no tokenizer: looked for tokenizer.json, and for "
                     "vocab.json with merges.txt", dir);
    }
done:
    free(json);
    free(config);
    free(json_path);
    free(vocab_path);
    free(merges_path);
    free(config_path);
    return st;
}
