/* llama_logits.c: llama.cpp's next-token logits for given token ids, teacher-forced, and its
 * greedy continuation: the reference side of tools/peer/gguf_compare.sh.
 *
 * Not part of the build: compile it against llama.cpp's libllama (tools/peer/build_native.sh).
 *
 *   llama_logits MODEL.gguf (--ids 1,2,3 | --ids-file FILE | --text-file FILE)
 *                [--logits OUT.f32] [--gen N] [-t THREADS] [--kv f32|f16] [--fa auto|on|off]
 *                [--extra-bufts] [--verbose]
 *
 * The ids (--ids-file: a JSON array or ids separated by commas or white space, as `tokentop
 * tokenize --json` prints them; --text-file: tokenized by llama.cpp, special tokens parsed, its
 * BOS added where the vocabulary says so) run as one llama_decode with logits for every row.
 * --logits writes the F32 logits of the rows 0 .. n-2 (each predicting the next id: the rows
 * `tokentop score --dump-logits` writes for the same ids), n_vocab little-endian floats a row.
 * --gen N then continues greedily (argmax, lowest id on ties, one token per llama_decode).
 * Standard output is one JSON line: n_vocab, the ids, the mean negative log-likelihood of ids
 * 1 .. n-1 and, with --gen, the generated ids.
 *
 * Defaults chosen for comparison rather than speed: an F32 KV cache (--kv f16 is llama.cpp's
 * default), weights in plain CPU buffers (no AMX or repacked layouts; --extra-bufts allows
 * them: on the Xeon of README.md the AMX path dies with SIGILL on Q8_0), the model's training
 * context (at least the ids plus N).
 */
#include "llama_common.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whole file into a NUL-terminated malloc'd buffer; NULL with a message on failure. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "llama_logits: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b)
                free(buf);
            buf = b;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "llama_logits: %s: out of memory\n", path);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

/* Ids from "[1, 2, 3]", "1,2,3" or "1 2 3" into a malloc'd array; -1 with a message naming
 * what (the option or file) and the offending text. */
static int parse_ids(const char *what, const char *s, int V, llama_token **out, int *n_out)
{
    size_t cap = strlen(s) / 2 + 2;
    llama_token *ids = malloc(cap * sizeof *ids);
    int n = 0;
    if (!ids)
        return -1;
    for (const char *p = s; *p;) {
        if (strchr("[], \t\r\n", *p)) {
            p++;
            continue;
        }
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v >= V) {
            fprintf(stderr, "llama_logits: %s: \"%.20s\" is not a token id in [0, %d)\n", what,
                    p, V);
            free(ids);
            return -1;
        }
        ids[n++] = (llama_token)v;
        p = end;
    }
    if (n < 2) {
        fprintf(stderr, "llama_logits: %s: %d id(s); at least 2 are needed\n", what, n);
        free(ids);
        return -1;
    }
    *out = ids;
    *n_out = n;
    return 0;
}

int main(int argc, char **argv)
{
    const char *model_path = NULL, *ids_arg = NULL, *ids_file = NULL, *text_file = NULL;
    const char *logits_path = NULL, *fa = "off", *kv = "f32";
    int threads = 2, gen = 0, extra_bufts = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-t") && v)
            threads = atoi(argv[++i]);
        else if (!strcmp(a, "--ids") && v)
            ids_arg = argv[++i];
        else if (!strcmp(a, "--ids-file") && v)
            ids_file = argv[++i];
        else if (!strcmp(a, "--text-file") && v)
            text_file = argv[++i];
        else if (!strcmp(a, "--logits") && v)
            logits_path = argv[++i];
        else if (!strcmp(a, "--gen") && v)
            gen = atoi(argv[++i]);
        else if (!strcmp(a, "--kv") && v)
            kv = argv[++i];
        else if (!strcmp(a, "--fa") && v)
            fa = argv[++i];
        else if (!strcmp(a, "--extra-bufts"))
            extra_bufts = 1;
        else if (!strcmp(a, "--verbose"))
            verbose = 1;
        else if (a[0] != '-' && !model_path)
            model_path = a;
        else {
            fprintf(stderr, "llama_logits: unknown or incomplete option: %s\n", a);
            return 2;
        }
    }
    if (!model_path || threads < 1 || gen < 0 || (!!ids_arg + !!ids_file + !!text_file) != 1 ||
        (strcmp(kv, "f32") && strcmp(kv, "f16"))) {
        fprintf(stderr, "usage: llama_logits MODEL.gguf (--ids 1,2,3 | --ids-file FILE | "
                        "--text-file FILE) [--logits OUT.f32] [--gen N] [-t THREADS] "
                        "[--kv f32|f16] [--fa auto|on|off] [--extra-bufts] [--verbose]\n");
        return 2;
    }

    struct llama_model *model = load_model("llama_logits", model_path, NULL, extra_bufts);
    if (!model)
        return 1;
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int V = llama_vocab_n_tokens(vocab);

    int rc = 1, n = 0;
    llama_token *ids = NULL;
    char *buf = NULL;
    struct llama_context *ctx = NULL;
    FILE *out = NULL;
    if (ids_arg) {
        if (parse_ids("--ids", ids_arg, V, &ids, &n) != 0)
            goto done;
    } else {
        size_t len;
        if (!(buf = read_file(ids_file ? ids_file : text_file, &len)))
            goto done;
        if (ids_file) {
            if (parse_ids(ids_file, buf, V, &ids, &n) != 0)
                goto done;
        } else {
            int cap = (int)len + 8;
            ids = malloc((size_t)cap * sizeof *ids);
            n = ids ? llama_tokenize(vocab, buf, (int32_t)len, ids, cap, true, true) : -1;
            if (n < 2) {
                fprintf(stderr, "llama_logits: %s: llama_tokenize gave %d tokens\n", text_file,
                        n);
                goto done;
            }
        }
    }
    llama_token *all = realloc(ids, ((size_t)n + (size_t)gen + 1) * sizeof *ids);
    if (!all)
        goto done;
    ids = all;

    struct llama_context_params cp = llama_context_default_params();
    uint32_t need = (uint32_t)(n + gen + 1), train = (uint32_t)llama_model_n_ctx_train(model);
    cp.n_ctx = need > train ? need : train;
    cp.n_batch = cp.n_ubatch = (uint32_t)n;          /* the ids are one ubatch */
    cp.n_threads = cp.n_threads_batch = threads;
    cp.type_k = cp.type_v = !strcmp(kv, "f32") ? GGML_TYPE_F32 : GGML_TYPE_F16;
    cp.flash_attn_type = flash_attn_of(fa);
    if (!(ctx = llama_init_from_model(model, cp))) {
        fprintf(stderr, "llama_logits: %s: llama_init_from_model failed\n", model_path);
        goto done;
    }
    if (verbose)
        fprintf(stderr, "system_info: %s\n", llama_print_system_info());

    struct llama_batch batch = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        batch.token[i] = ids[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = n;
    int dr = llama_decode(ctx, batch);
    llama_batch_free(batch);
    if (dr != 0) {
        fprintf(stderr, "llama_logits: llama_decode of %d ids returned %d\n", n, dr);
        goto done;
    }
    if (logits_path && !(out = fopen(logits_path, "wb"))) {
        fprintf(stderr, "llama_logits: %s: %s\n", logits_path, strerror(errno));
        goto done;
    }
    double nll = 0;
    for (int i = 0; i + 1 < n; i++) {
        const float *l = llama_get_logits_ith(ctx, i);
        double mx = -INFINITY, sum = 0;
        for (int v = 0; v < V; v++)
            mx = l[v] > mx ? l[v] : mx;
        for (int v = 0; v < V; v++)
            sum += exp((double)l[v] - mx);
        nll -= (double)l[ids[i + 1]] - mx - log(sum);
        if (out && fwrite(l, sizeof *l, (size_t)V, out) != (size_t)V) {
            fprintf(stderr, "llama_logits: %s: write error\n", logits_path);
            goto done;
        }
    }
    if (out) {
        int cr = fclose(out);
        out = NULL;
        if (cr != 0) {
            fprintf(stderr, "llama_logits: %s: write error\n", logits_path);
            goto done;
        }
    }
    printf("{\"model\":\"%s\",\"n_vocab\":%d,\"n_ids\":%d,\"mean_nll\":%.9g,\"ids\":[",
           model_path, V, n, nll / (n - 1));
    for (int i = 0; i < n; i++)
        printf(i ? ",%d" : "%d", ids[i]);
    printf("]");
    if (gen > 0) {
        printf(",\"gen_ids\":[");
        for (int k = 0; k < gen; k++) {
            ids[n + k] = argmax(llama_get_logits_ith(ctx, -1), V);
            printf(k ? ",%d" : "%d", ids[n + k]);
            dr = llama_decode(ctx, llama_batch_get_one(ids + n + k, 1));
            if (dr != 0) {
                fprintf(stderr, "llama_logits: llama_decode of generated id %d returned %d\n",
                        k, dr);
                goto done;
            }
        }
        printf("]");
    }
    printf("}\n");
    rc = 0;
done:
    if (out)
        fclose(out);
    free(buf);
    free(ids);
    if (ctx)
        llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
