/* list.c: `tokentop list`: the embedded model directories and Ollama's models in one table. */
#include "app/list.h"

#include <dirent.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app/cli.h"
#include "core/base/util.h"
#include "core/model/gguf.h"
#include "core/model/model.h"
#include "core/model/ollama.h"

/* "124M", "1.24B", "39K". */
static const char *human_count(uint64_t n, char *buf, size_t cap)
{
    if (n >= 1000000000ull)
        snprintf(buf, cap, "%.2fB", (double)n / 1e9);
    else if (n >= 1000000ull)
        snprintf(buf, cap, "%.1fM", (double)n / 1e6);
    else if (n >= 1000ull)
        snprintf(buf, cap, "%.0fK", (double)n / 1e3);
    else
        snprintf(buf, cap, "%llu", (unsigned long long)n);
    return buf;
}

/* "1.3 GB", "88 KB" (powers of 1000, as Ollama prints). */
static const char *human_bytes(uint64_t n, char *buf, size_t cap)
{
    if (n >= 1000000000ull)
        snprintf(buf, cap, "%.1f GB", (double)n / 1e9);
    else if (n >= 1000000ull)
        snprintf(buf, cap, "%.0f MB", (double)n / 1e6);
    else
        snprintf(buf, cap, "%.0f KB", (double)n / 1e3);
    return buf;
}

/* A safetensors dtype as GGUF files name their types. */
static const char *file_dtype_name(tt_dtype d)
{
    return d == TT_F16 ? "F16" : d == TT_BF16 ? "BF16" : "F32";
}

/* One line of the table, kept until every name is known (the first column is as wide as the
 * longest). */
typedef struct {
    char *name;
    const char *source;
    char arch[32], quant[16];
    uint64_t params, bytes;
    char *error;                        /* instead of the figures, when not NULL */
} list_row;

typedef struct {
    list_row *rows;
    size_t n, cap;
} list_table;

static list_row *add_row(list_table *t, const char *name, const char *source)
{
    if (!UTIL_RESERVE(t->rows, &t->cap, t->n + 1, 8))
        return NULL;
    list_row *r = &t->rows[t->n];
    memset(r, 0, sizeof *r);
    if (!(r->name = strdup(name)))
        return NULL;
    r->source = source;
    t->n++;
    return r;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every subdirectory of dir holding a config.json, sorted; *names malloc'd. */
static size_t model_dirs(const char *dir, char ***names)
{
    *names = NULL;
    size_t n = 0, cap = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s/config.json", dir, e->d_name);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (!UTIL_RESERVE(*names, &cap, n + 1, 8))
            break;
        if (((*names)[n] = strdup(e->d_name)) != NULL)
            n++;
    }
    closedir(d);
    if (n)
        qsort(*names, n, sizeof **names, cmp_str);
    return n;
}

static void add_embedded(list_table *t, const char *models_dir)
{
    char **dirs = NULL;
    size_t nd = model_dirs(models_dir, &dirs);
    for (size_t i = 0; i < nd; i++) {
        char path[PATH_MAX], weights[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/%s", models_dir, dirs[i]);
        snprintf(weights, sizeof weights, "%s/model.safetensors", path);
        list_row *r = add_row(t, path, "embedded");
        if (!r)
            break;
        model *m = NULL;
        tt_error err = {0};
        if (model_load(path, &m, &err) != TT_OK) {
            r->error = strdup(err.msg);
            continue;
        }
        struct stat st;
        snprintf(r->arch, sizeof r->arch, "gpt2");
        snprintf(r->quant, sizeof r->quant, "%s", file_dtype_name(m->file_dtype));
        r->params = m->n_params;
        r->bytes = stat(weights, &st) == 0 ? (uint64_t)st.st_size : 0;
        model_free(m);
    }
    ollama_names_free(dirs, nd);
}

static void add_ollama(list_table *t, const char *const *stores, size_t n_stores)
{
    char **names = NULL;
    size_t nn = ollama_list(stores, n_stores, &names);
    for (size_t i = 0; i < nn; i++) {
        list_row *r = add_row(t, names[i], "ollama");
        if (!r)
            break;
        ollama_model om;
        tt_error err = {0};
        gguf_file *f = NULL;
        if (ollama_resolve(names[i], stores, n_stores, &om, &err) != TT_OK ||
            gguf_open(om.model_path, &f, &err) != TT_OK) {
            r->error = strdup(err.msg);
        } else {
            const char *arch = gguf_architecture(f);
            snprintf(r->arch, sizeof r->arch, "%s", arch[0] ? arch : "?");
            snprintf(r->quant, sizeof r->quant, "%s", gguf_quantization(f));
            r->params = gguf_parameter_count(f);
            r->bytes = om.model_size;
        }
        gguf_close(f);
        ollama_model_free(&om);
    }
    ollama_names_free(names, nn);
}

int list_models(FILE *out, const char *models_dir, const char *const *stores, size_t n_stores)
{
    list_table t = {0};
    if (models_dir)
        add_embedded(&t, models_dir);
    add_ollama(&t, stores, n_stores);
    int w = 4;
    for (size_t i = 0; i < t.n; i++)
        if ((int)strlen(t.rows[i].name) > w)
            w = (int)strlen(t.rows[i].name);
    fprintf(out, "%-*s  %-8s  %-8s  %7s  %-8s  %8s\n", w, "NAME", "SOURCE", "ARCH", "PARAMS",
            "QUANT", "SIZE");
    for (size_t i = 0; i < t.n; i++) {
        const list_row *r = &t.rows[i];
        if (r->error) {
            fprintf(out, "%-*s  %-8s  cannot be read: %s\n", w, r->name, r->source, r->error);
        } else {
            char p[32], b[32];
            fprintf(out, "%-*s  %-8s  %-8s  %7s  %-8s  %8s\n", w, r->name, r->source, r->arch,
                    human_count(r->params, p, sizeof p), r->quant,
                    human_bytes(r->bytes, b, sizeof b));
        }
        free(r->name);
        free(r->error);
    }
    free(t.rows);
    return (int)t.n;
}

int list_main(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: tokentop list    (or tokentop --list-models)\n"
               "Lists the models tokentop can open: the embedded model directories and the\n"
               "models Ollama has pulled ($OLLAMA_MODELS, ~/.ollama/models,\n"
               "/usr/share/ollama/.ollama/models), with architecture, parameters,\n"
               "quantization and size. An Ollama model opens with --model NAME[:TAG].\n");
        return 0;
    }
    if (argc >= 2) {
        fprintf(stderr, "tokentop list: unexpected argument '%s' (tokentop list --help)\n",
                argv[1]);
        return 2;
    }
    cli_options o;
    cli_options_default(&o);
    const char *def = cli_model_dir(&o);
    char *models_dir = NULL;
    if (def) {
        char *copy = strdup(def);
        if (copy)
            models_dir = realpath(dirname(copy), NULL);
        free(copy);
    }
    char *stores[3];
    size_t n = ollama_default_stores(stores, 3);
    list_models(stdout, models_dir, (const char *const *)stores, n);
    ollama_stores_free(stores, n);
    free(models_dir);
    return 0;
}
