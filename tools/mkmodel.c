/* mkmodel.c: writes a random model directory of any architecture tokentop runs (modelgen) for
 * tests, demos and benchmarks. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/model/model.h"
#include "core/model/modelgen.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: mkmodel DIR [options]\n"
        "Writes a model with random weights (config.json, model.safetensors,\n"
        "generation_config.json, vocab.json, merges.txt) into DIR, which is created.\n"
        "\n"
        "  --size NAME       shapes of tiny (default) | gpt2 | gpt2-medium | gpt2-large |\n"
        "                    gpt2-xl | distilgpt2 | llama-3.2-1b | llama-3.2-3b |\n"
        "                    llama-3.1-8b | qwen2.5-0.5b | qwen2.5-1.5b | qwen3-0.6b |\n"
        "                    smollm2-135m | tinyllama-1.1b; the options below override them\n"
        "  --arch TYPE       gpt2 (default) | llama | mistral | qwen2 | qwen3\n"
        "  --kv-heads N      key/value heads (not gpt2; default: --heads)\n"
        "  --head-dim N      head size (not gpt2; default: C / heads)\n"
        "  --vocab V         vocabulary size (>= 257 unless --tokenizer is given)\n"
        "  --ctx T           context length (n_positions)\n"
        "  --embd C          embedding width\n"
        "  --heads NH        attention heads (must divide C)\n"
        "  --layers L        transformer blocks\n"
        "  --inner FF        MLP width (default 4*C)\n"
        "  --dtype D         fp32 (default) | fp16 | bf16\n"
        "  --prefix          name tensors transformer.* (default)\n"
        "  --no-prefix       name tensors without the transformer. prefix\n"
        "  --mask-buffers    also write h.N.attn.bias and h.N.attn.masked_bias\n"
        "  --untied          write a separate lm_head.weight\n"
        "  --seed S          random seed (default 1)\n"
        "  --scale X         spread of the random matrices (default 1)\n"
        "  --exact           values exactly representable in fp32, fp16 and bf16\n"
        "  --tokenizer DIR   copy vocab.json and merges.txt from DIR (its size sets --vocab\n"
        "                    unless given)\n"
        "  --eos ID          end-of-text id (default V-1)\n"
        "  -h, --help        this message\n");
}

static int die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mkmodel: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(mkmodel --help for usage)\n");
    va_end(ap);
    return 2;
}

/* Parses a decimal integer in [lo, hi]; 0 on success. */
static int parse_long(const char *s, long lo, long hi, long *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* Number of entries in dir/vocab.json, counted as JSON object members at depth 1 cheaply: the
 * generator validates the file properly; here it only fills in a default. */
static long vocab_entries(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    long n = 0;
    int ch, in_str = 0, esc = 0, depth = 0;
    while ((ch = fgetc(f)) != EOF) {
        if (in_str) {
            if (esc) esc = 0;
            else if (ch == '\\') esc = 1;
            else if (ch == '"') in_str = 0;
        } else if (ch == '"') {
            in_str = 1;
        } else if (ch == '{') {
            depth++;
        } else if (ch == '}') {
            depth--;
        } else if (ch == ':' && depth == 1) {
            n++;
        }
    }
    fclose(f);
    return n;
}

int main(int argc, char **argv)
{
    modelgen_options o;
    modelgen_options_default(&o);
    const char *dir = NULL;
    long v, V = -1, T = -1, C = -1, NH = -1, L = -1, FF = -1, eos = -2, NKV = -1, HS = -1;
    const char *size = NULL;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDS_VALUE() do { if (!val) return die("%s needs a value", a); i++; } while (0)
#define INT_OPT(flag, var, lo, hi)                                                          \
        if (strcmp(a, flag) == 0) {                                                         \
            NEEDS_VALUE();                                                                  \
            if (parse_long(val, lo, hi, &v) != 0)                                           \
                return die("%s: '%s' is not an integer in [%ld, %ld]", a, val, (long)(lo), (long)(hi)); \
            var = v;                                                                        \
            continue;                                                                       \
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        INT_OPT("--vocab", V, 1, 1000000)
        INT_OPT("--ctx", T, 1, 1 << 20)
        INT_OPT("--embd", C, 1, 65536)
        INT_OPT("--heads", NH, 1, 512)
        INT_OPT("--kv-heads", NKV, 1, 512)
        INT_OPT("--head-dim", HS, 2, 1024)
        INT_OPT("--layers", L, 1, 512)
        INT_OPT("--inner", FF, 1, 262144)
        INT_OPT("--eos", eos, 0, 999999)
        if (strcmp(a, "--size") == 0) {
            NEEDS_VALUE();
            size = val;
            modelgen_options tmp = o;
            if (modelgen_options_gpt2(&tmp, size) != 0 && modelgen_options_llama(&tmp, size) != 0)
                return die("--size: unknown size '%s' (tiny, gpt2, gpt2-medium, gpt2-large, "
                           "gpt2-xl, distilgpt2, llama-3.2-1b, llama-3.2-3b, llama-3.1-8b, "
                           "qwen2.5-0.5b, qwen2.5-1.5b, qwen3-0.6b, smollm2-135m, "
                           "tinyllama-1.1b)", val);
        } else if (strcmp(a, "--arch") == 0) {
            NEEDS_VALUE();
            o.arch = val;
        } else if (strcmp(a, "--dtype") == 0) {
            NEEDS_VALUE();
            if (tt_dtype_parse(val, &o.dtype) != 0)
                return die("--dtype: unknown dtype '%s' (fp32, fp16, bf16)", val);
            if (!tt_dtype_is_file_type(o.dtype))
                return die("--dtype: %s is not a file dtype (fp32, fp16, bf16); tokentop "
                           "--dtype %s quantizes a model at load", val, val);
        } else if (strcmp(a, "--seed") == 0) {
            NEEDS_VALUE();
            char *end;
            errno = 0;
            unsigned long long s = strtoull(val, &end, 0);
            if (errno || *end || !*val || val[0] == '-')
                return die("--seed: '%s' is not a non-negative integer", val);
            o.seed = s;
        } else if (strcmp(a, "--scale") == 0) {
            NEEDS_VALUE();
            char *end;
            double x = strtod(val, &end);
            if (*end || !*val || !(x > 0 && x < 1e6))
                return die("--scale: '%s' is not a positive number", val);
            o.scale = (float)x;
        } else if (strcmp(a, "--tokenizer") == 0) {
            NEEDS_VALUE();
            o.tokenizer_dir = val;
        } else if (strcmp(a, "--prefix") == 0) {
            o.prefix = true;
        } else if (strcmp(a, "--no-prefix") == 0) {
            o.prefix = false;
        } else if (strcmp(a, "--mask-buffers") == 0) {
            o.mask_buffers = true;
        } else if (strcmp(a, "--untied") == 0) {
            o.untied_lm_head = true;
        } else if (strcmp(a, "--exact") == 0) {
            o.exact = true;
        } else if (a[0] == '-') {
            return die("unknown option '%s'", a);
        } else if (dir) {
            return die("more than one directory given ('%s' and '%s')", dir, a);
        } else {
            dir = a;
        }
#undef INT_OPT
#undef NEEDS_VALUE
    }
    if (!dir) {
        usage(stderr);
        return 2;
    }
    if (size && modelgen_options_gpt2(&o, size) != 0)
        modelgen_options_llama(&o, size);
    if (o.tokenizer_dir && V < 0) {
        V = vocab_entries(o.tokenizer_dir);
        if (V <= 0)
            return die("--tokenizer: cannot read %s/vocab.json", o.tokenizer_dir);
    }
    if (V > 0) o.V = (int)V;
    if (T > 0) o.maxT = (int)T;
    if (C > 0) o.C = (int)C;
    if (NH > 0) o.NH = (int)NH;
    if (L > 0) o.L = (int)L;
    if (FF > 0) o.FF = (int)FF;
    if (NKV > 0) o.NKV = (int)NKV;
    if (HS > 0) o.HS = (int)HS;
    if (eos >= 0) o.eos_id = (int)eos;

    tt_error err = {0};
    if (modelgen_write(dir, &o, &err) != TT_OK) {
        fprintf(stderr, "mkmodel: %s\n", err.msg);
        return 1;
    }
    model *m = NULL;
    if (model_load(dir, &m, &err) != TT_OK) {
        fprintf(stderr, "mkmodel: wrote %s, but it does not load: %s\n", dir, err.msg);
        return 1;
    }
    const model_config *c = &m->config;
    printf("%s: %s, V %d, maxT %d, C %d, NH %d, NKV %d, HS %d, L %d, FF %d, %s, %zu "
           "parameters%s\n", dir, c->arch->name, c->V, c->maxT, c->C, c->NH, c->NKV, c->HS, c->L,
           c->FF, tt_dtype_name(o.dtype), m->n_params,
           m->tensors.lm_head_tied ? "" : " (untied lm_head)");
    model_free(m);
    return 0;
}
