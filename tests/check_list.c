/* check_list.c: `tokentop list` shows embedded model directories and the models of an Ollama
 * store (a fake one built here around the committed GGUF fixtures) with architecture,
 * parameters, quantization and size, and names what it cannot read. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app/list.h"
#include "tests/testutil.h"

static char *read_fixture(const char *name, size_t *len)
{
    const char *srcdir = getenv("TOKENTOP_SRCDIR");
    char *b = tu_read_file(tu_path("%s/tests/fixtures/gguf/%s", srcdir ? srcdir : ".", name), len);
    ck_assert_msg(b != NULL, "tests/fixtures/gguf/%s cannot be read (run from the repository root)",
                  name);
    return b;
}

/* Puts data in store as blob sha256-<c x 64> and a manifest for library/NAME/TAG naming it. */
static void add_model(const char *store, const char *name, const char *tag, char c,
                      const char *data, size_t len)
{
    char hex[65];
    memset(hex, c, 64);
    hex[64] = 0;
    mkdir(tu_path("%s/blobs", store), 0755);
    ck_assert_int_eq(tu_write_file(tu_path("%s/blobs/sha256-%s", store, hex), data, len), 0);
    mkdir(tu_path("%s/manifests", store), 0755);
    mkdir(tu_path("%s/manifests/registry.ollama.ai", store), 0755);
    mkdir(tu_path("%s/manifests/registry.ollama.ai/library", store), 0755);
    mkdir(tu_path("%s/manifests/registry.ollama.ai/library/%s", store, name), 0755);
    char json[512];
    snprintf(json, sizeof json, "{\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.model\","
             "\"digest\":\"sha256:%s\",\"size\":%zu}]}", hex, len);
    ck_assert_int_eq(tu_write_file(tu_path("%s/manifests/registry.ollama.ai/library/%s/%s", store,
                                           name, tag), json, strlen(json)), 0);
}

START_TEST(lists_embedded_and_ollama_models_with_their_figures)
{
    char *models = tu_tmpdir(), *store = tu_tmpdir();
    tu_model_spec spec = {.file_dtype = TT_F16};
    char *dir = tu_write_model(&spec);
    ck_assert_int_eq(rename(dir, tu_path("%s/tiny", models)), 0);
    free(dir);
    size_t len;
    char *q3 = read_fixture("tiny-qwen3-q8_0.gguf", &len);
    add_model(store, "tiny-qwen3", "q8", 'a', q3, len);
    free(q3);
    char *l2 = read_fixture("tiny-llama-f16.gguf", &len);
    add_model(store, "tiny-llama", "latest", 'b', l2, len);
    free(l2);
    add_model(store, "broken", "latest", 'c', "not a gguf file at all, really", 30);

    char *text = NULL;
    size_t text_len = 0;
    FILE *out = open_memstream(&text, &text_len);
    const char *stores[] = {store};
    ck_assert_int_eq(list_models(out, models, stores, 1), 4);
    fclose(out);
    char *lines[8] = {0};
    int n = 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l && n < 8;
         l = strtok_r(NULL, "\n", &save))
        lines[n++] = l;
    ck_assert_int_eq(n, 5);
    ck_assert_msg(strstr(lines[0], "NAME") == lines[0] && strstr(lines[0], "QUANT"), "%s",
                  lines[0]);
    ck_assert_msg(strstr(lines[1], "/tiny ") && strstr(lines[1], "embedded  gpt2") &&
                  strstr(lines[1], " F16 "), "%s", lines[1]);
    ck_assert_msg(strstr(lines[2], "broken:latest") == lines[2] &&
                  strstr(lines[2], "cannot be read: ") && strstr(lines[2], "not a GGUF file"),
                  "%s", lines[2]);
    ck_assert_msg(strstr(lines[3], "tiny-llama:latest") == lines[3] &&
                  strstr(lines[3], "ollama    llama") && strstr(lines[3], "39K") &&
                  strstr(lines[3], "F16") && strstr(lines[3], "88 KB"), "%s", lines[3]);
    ck_assert_msg(strstr(lines[4], "tiny-qwen3:q8") == lines[4] && strstr(lines[4], "qwen3") &&
                  strstr(lines[4], "28K") && strstr(lines[4], "Q8_0"), "%s", lines[4]);
    free(text);
    tu_tmpdir_free(models);
    tu_tmpdir_free(store);
}
END_TEST

START_TEST(lists_nothing_but_the_header_without_models)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    const char *stores[] = {"/nonexistent/ollama"};
    ck_assert_int_eq(list_models(out, NULL, stores, 1), 0);
    fclose(out);
    ck_assert_msg(strncmp(text, "NAME", 4) == 0 && strchr(text, '\n') == text + len - 1, "%s",
                  text);
    free(text);
}
END_TEST

int main(void)
{
    return tu_run_tests("list", TU_TESTS(lists_embedded_and_ollama_models_with_their_figures,
                                         lists_nothing_but_the_header_without_models));
}
