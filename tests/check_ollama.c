/* check_ollama.c: names resolved in fake Ollama stores built in a temporary directory: the model
 * blob and the params, template and system layers found; stores searched in order; missing
 * manifests and blobs, size mismatches and malformed manifests refused with messages naming them
 * and nothing loaded; listing; the params layer's options. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/model/ollama.h"
#include "tests/testutil.h"

/* ---------------------------------------------------------------------------------------------
 * Fake stores */

static void mkdirs(const char *path)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(buf, 0755);
            *p = '/';
        }
    mkdir(buf, 0755);
}

/* 64 hex digits made from c (a '0'-'9' or 'a'-'f'), in one of 8 rotating buffers. */
static const char *hex64(char c)
{
    static char buf[8][65];
    static int k;
    char *s = buf[k++ % 8];
    memset(s, c, 64);
    s[64] = 0;
    return s;
}

static void write_blob(const char *store, char c, const char *data, size_t len)
{
    mkdirs(tu_path("%s/blobs", store));
    ck_assert_int_eq(tu_write_file(tu_path("%s/blobs/sha256-%s", store, hex64(c)), data, len), 0);
}

static void write_manifest(const char *store, const char *rel, const char *json)
{
    const char *path = tu_path("%s/manifests/%s", store, rel);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    mkdirs(dir);
    ck_assert_int_eq(tu_write_file(path, json, strlen(json)), 0);
}

static const char MODEL_BYTES[] = "GGUF-not-really-but-twenty-seven";
#define MODEL_LEN 32

/* A manifest with a model layer (blob 'a', 32 bytes), params ('b'), template ('c'), system ('d')
 * and a license layer tokentop does not use ('e'). */
static char *full_manifest(uint64_t model_size)
{
    char *s = malloc(2048);
    snprintf(s, 2048,
             "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.docker.distribution.manifest"
             ".v2+json\",\"config\":{\"mediaType\":\"application/vnd.docker.container.image.v1+"
             "json\",\"digest\":\"sha256:%s\",\"size\":10},\"layers\":["
             "{\"mediaType\":\"application/vnd.ollama.image.model\",\"digest\":\"sha256:%s\","
             "\"size\":%llu},"
             "{\"mediaType\":\"application/vnd.ollama.image.params\",\"digest\":\"sha256:%s\","
             "\"size\":%zu},"
             "{\"mediaType\":\"application/vnd.ollama.image.template\",\"digest\":\"sha256:%s\","
             "\"size\":%zu},"
             "{\"mediaType\":\"application/vnd.ollama.image.system\",\"digest\":\"sha256:%s\","
             "\"size\":%zu},"
             "{\"mediaType\":\"application/vnd.ollama.image.license\",\"digest\":\"sha256:%s\","
             "\"size\":3}]}",
             hex64('9'), hex64('a'), (unsigned long long)model_size, hex64('b'),
             strlen("{\"stop\":[\"<|eot_id|>\"],\"temperature\":0.6}"), hex64('c'),
             strlen("{{ .Prompt }}"), hex64('d'), strlen("Be brief."), hex64('e'));
    return s;
}

static char *full_store(void)
{
    char *store = tu_tmpdir();
    write_blob(store, 'a', MODEL_BYTES, MODEL_LEN);
    const char *params = "{\"stop\":[\"<|eot_id|>\"],\"temperature\":0.6}";
    write_blob(store, 'b', params, strlen(params));
    write_blob(store, 'c', "{{ .Prompt }}", strlen("{{ .Prompt }}"));
    write_blob(store, 'd', "Be brief.", strlen("Be brief."));
    char *m = full_manifest(MODEL_LEN);
    write_manifest(store, "registry.ollama.ai/library/llama3.2/1b", m);
    free(m);
    return store;
}

static void model_only(const char *store, const char *rel, char blob, size_t size)
{
    char json[512];
    snprintf(json, sizeof json,
             "{\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.model\",\"digest\":"
             "\"sha256:%s\",\"size\":%zu}]}", hex64(blob), size);
    write_manifest(store, rel, json);
}

/* ---------------------------------------------------------------------------------------------
 * Resolving */

START_TEST(resolves_a_name_to_its_blob_and_text_layers)
{
    char *store = full_store();
    const char *stores[] = {store};
    ollama_model m;
    tt_error err = {0};
    ck_assert_msg(ollama_resolve("llama3.2:1b", stores, 1, &m, &err) == TT_OK, "%s", err.msg);
    ck_assert_str_eq(m.name, "llama3.2:1b");
    ck_assert_str_eq(m.store, store);
    ck_assert_str_eq(m.model_path, tu_path("%s/blobs/sha256-%s", store, hex64('a')));
    ck_assert_str_eq(m.manifest_path,
                     tu_path("%s/manifests/registry.ollama.ai/library/llama3.2/1b", store));
    ck_assert_uint_eq(m.model_size, MODEL_LEN);
    ck_assert_str_eq(m.params, "{\"stop\":[\"<|eot_id|>\"],\"temperature\":0.6}");
    ck_assert_str_eq(m.template_text, "{{ .Prompt }}");
    ck_assert_str_eq(m.system, "Be brief.");
    ck_assert_int_eq(m.n_unused_layers, 1);
    ollama_model_free(&m);
    ck_assert_ptr_null(m.name);
    ollama_model_free(&m);              /* twice is safe */
    tu_tmpdir_free(store);
}
END_TEST

START_TEST(fills_in_the_default_tag_namespace_and_host)
{
    char *store = tu_tmpdir();
    write_blob(store, 'a', MODEL_BYTES, MODEL_LEN);
    model_only(store, "registry.ollama.ai/library/qwen3/latest", 'a', MODEL_LEN);
    model_only(store, "registry.ollama.ai/me/tiny/q8", 'a', MODEL_LEN);
    model_only(store, "example.com:5000/team/m/v1", 'a', MODEL_LEN);
    const char *stores[] = {store};
    ollama_model m;
    tt_error err = {0};
    ck_assert_int_eq(ollama_resolve("qwen3", stores, 1, &m, &err), TT_OK);
    ck_assert_str_eq(m.name, "qwen3:latest");
    ck_assert_ptr_null(m.params);
    ck_assert_ptr_null(m.template_text);
    ollama_model_free(&m);
    ck_assert_int_eq(ollama_resolve("me/tiny:q8", stores, 1, &m, &err), TT_OK);
    ck_assert_str_eq(m.name, "me/tiny:q8");
    ollama_model_free(&m);
    ck_assert_int_eq(ollama_resolve("example.com:5000/team/m:v1", stores, 1, &m, &err), TT_OK);
    ck_assert_str_eq(m.name, "example.com:5000/team/m:v1");
    ollama_model_free(&m);
    ck_assert_int_eq(ollama_resolve("registry.ollama.ai/library/qwen3:latest", stores, 1, &m,
                                    &err), TT_OK);
    ck_assert_str_eq(m.name, "qwen3:latest");
    ollama_model_free(&m);
    tu_tmpdir_free(store);
}
END_TEST

START_TEST(searches_stores_in_order_and_says_where_it_looked)
{
    char *first = tu_tmpdir(), *second = tu_tmpdir();
    write_blob(first, 'a', MODEL_BYTES, MODEL_LEN);
    write_blob(second, 'a', MODEL_BYTES, MODEL_LEN);
    model_only(first, "registry.ollama.ai/library/both/latest", 'a', MODEL_LEN);
    model_only(second, "registry.ollama.ai/library/both/latest", 'a', MODEL_LEN);
    model_only(second, "registry.ollama.ai/library/later/latest", 'a', MODEL_LEN);
    const char *stores[] = {first, second};
    ollama_model m;
    tt_error err = {0};
    ck_assert_int_eq(ollama_resolve("both", stores, 2, &m, &err), TT_OK);
    ck_assert_str_eq(m.store, first);
    ollama_model_free(&m);
    ck_assert_int_eq(ollama_resolve("later", stores, 2, &m, &err), TT_OK);
    ck_assert_str_eq(m.store, second);
    ollama_model_free(&m);
    ck_assert_int_eq(ollama_resolve("llama3.2:1b", stores, 2, &m, &err), TT_ERR_IO);
    ck_assert_ptr_null(m.name);
    char want[1024];
    snprintf(want, sizeof want, "llama3.2:1b: not in the Ollama store (looked for "
             "%s/manifests/registry.ollama.ai/library/llama3.2/1b, "
             "%s/manifests/registry.ollama.ai/library/llama3.2/1b)", first, second);
    ck_assert_str_eq(err.msg, want);
    tu_tmpdir_free(first);
    tu_tmpdir_free(second);
}
END_TEST

START_TEST(names_a_missing_blob_and_loads_nothing)
{
    char *store = full_store();
    remove(tu_path("%s/blobs/sha256-%s", store, hex64('a')));
    const char *stores[] = {store};
    ollama_model m;
    tt_error err = {0};
    ck_assert_int_eq(ollama_resolve("llama3.2:1b", stores, 1, &m, &err), TT_ERR_FORMAT);
    ck_assert_ptr_null(m.name);
    ck_assert_ptr_null(m.model_path);
    ck_assert_ptr_null(m.params);
    char want[512];
    snprintf(want, sizeof want, "llama3.2:1b: the model layer's blob %s/blobs/sha256-%s is "
             "missing: No such file or directory", store, hex64('a'));
    ck_assert_str_eq(err.msg, want);
    /* A text layer's blob missing is refused the same way. */
    write_blob(store, 'a', MODEL_BYTES, MODEL_LEN);
    remove(tu_path("%s/blobs/sha256-%s", store, hex64('c')));
    ck_assert_int_eq(ollama_resolve("llama3.2:1b", stores, 1, &m, &err), TT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "the template layer's blob") != NULL, "%s", err.msg);
    ck_assert_ptr_null(m.params);
    tu_tmpdir_free(store);
}
END_TEST

START_TEST(refuses_a_blob_whose_size_differs_from_the_manifest)
{
    char *store = full_store();
    char *mf = full_manifest(MODEL_LEN + 1);
    write_manifest(store, "registry.ollama.ai/library/llama3.2/1b", mf);
    free(mf);
    const char *stores[] = {store};
    ollama_model m;
    tt_error err = {0};
    ck_assert_int_eq(ollama_resolve("llama3.2:1b", stores, 1, &m, &err), TT_ERR_FORMAT);
    ck_assert_ptr_null(m.model_path);
    char want[512];
    snprintf(want, sizeof want, "llama3.2:1b: the model layer's blob %s/blobs/sha256-%s is 32 "
             "bytes, the manifest says 33", store, hex64('a'));
    ck_assert_str_eq(err.msg, want);
    tu_tmpdir_free(store);
}
END_TEST

static const struct {
    const char *manifest, *want;
} bad_manifests[] = {
    {"not json", "not a JSON object"},
    {"{}", "layers: expected an array, got nothing"},
    {"{\"layers\":{}}", "layers: expected an array, got an object"},
    {"{\"layers\":[]}", "layers: no layer of media type application/vnd.ollama.image.model"},
    {"{\"layers\":[1]}", "layers[0]: expected an object, got a number"},
    {"{\"layers\":[{\"digest\":\"sha256:00\",\"size\":1}]}",
     "layers[0].mediaType: expected a string, got nothing"},
    {"{\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.model\",\"digest\":"
     "\"sha256:../../../../etc/passwd\",\"size\":1}]}",
     "layers[0].digest: expected \"sha256:\" and 64 lowercase hex digits, got sha256:../../"},
    {"{\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.model\",\"digest\":"
     "\"sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"size\":-1}]}",
     "layers[0].size: expected a non-negative integer, got a number"},
    {"{\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.model\",\"digest\":"
     "\"sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"size\":32},"
     "{\"mediaType\":\"application/vnd.ollama.image.model\",\"digest\":"
     "\"sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"size\":32}]}",
     "layers[1]: a second layer of media type application/vnd.ollama.image.model"},
};

START_TEST(refuses_malformed_manifest)
{
    char *store = tu_tmpdir();
    write_blob(store, 'a', MODEL_BYTES, MODEL_LEN);
    write_manifest(store, "registry.ollama.ai/library/m/latest", bad_manifests[_i].manifest);
    const char *stores[] = {store};
    ollama_model m;
    tt_error err = {0};
    ck_assert_int_eq(ollama_resolve("m", stores, 1, &m, &err), TT_ERR_FORMAT);
    ck_assert_ptr_null(m.model_path);
    ck_assert_msg(strstr(err.msg, bad_manifests[_i].want) != NULL, "'%s' lacks '%s'", err.msg,
                  bad_manifests[_i].want);
    ck_assert_msg(strstr(err.msg, "manifests/registry.ollama.ai/library/m/latest") != NULL,
                  "'%s' does not name the manifest", err.msg);
    tu_tmpdir_free(store);
}
END_TEST

START_TEST(refuses_names_that_are_not_names)
{
    const char *bad[] = {"", "../x", "a/../b", "x:", ":tag", "a/b/c/d", "a b", "m:t:u", "/abs",
                         "a//b", "./m", "m:..", "ns/.."};
    const char *good[] = {"llama3.2", "llama3.2:1b", "me/m", "host:1/ns/m:t", "Qwen_3-x.y:Q4_K_M"};
    ollama_model m;
    tt_error err = {0};
    const char *stores[] = {"/nonexistent"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(!ollama_is_name(bad[i]), "%s", bad[i]);
        ck_assert_int_eq(ollama_resolve(bad[i], stores, 1, &m, &err), TT_ERR_ARG);
        ck_assert_msg(strstr(err.msg, "not a model name") != NULL, "%s", err.msg);
    }
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        ck_assert_msg(ollama_is_name(good[i]), "%s", good[i]);
}
END_TEST

START_TEST(default_stores_follow_ollama_models_then_home)
{
    char *stores[3];
    setenv("OLLAMA_MODELS", "/x/models", 1);
    setenv("HOME", "/home/u", 1);
    size_t n = ollama_default_stores(stores, 3);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(stores[0], "/x/models");
    ck_assert_str_eq(stores[1], "/home/u/.ollama/models");
    ck_assert_str_eq(stores[2], "/usr/share/ollama/.ollama/models");
    ollama_stores_free(stores, n);
    unsetenv("OLLAMA_MODELS");
    n = ollama_default_stores(stores, 3);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(stores[0], "/home/u/.ollama/models");
    ollama_stores_free(stores, n);

    char *store = full_store();
    setenv("OLLAMA_MODELS", store, 1);
    ollama_model m;
    tt_error err = {0};
    ck_assert_int_eq(ollama_resolve_default("llama3.2:1b", &m, &err), TT_OK);
    ck_assert_str_eq(m.store, store);
    ollama_model_free(&m);
    unsetenv("OLLAMA_MODELS");
    tu_tmpdir_free(store);
}
END_TEST

START_TEST(lists_every_model_once_sorted)
{
    char *first = full_store(), *second = tu_tmpdir();
    model_only(first, "registry.ollama.ai/me/tiny/q8", 'a', MODEL_LEN);
    model_only(second, "registry.ollama.ai/library/llama3.2/1b", 'a', MODEL_LEN);   /* again */
    model_only(second, "example.com/team/m/v1", 'a', MODEL_LEN);
    mkdirs(tu_path("%s/manifests/registry.ollama.ai/library/empty", second));     /* no tags */
    const char *stores[] = {first, second, "/nonexistent/store"};
    char **names;
    size_t n = ollama_list(stores, 3, &names);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(names[0], "example.com/team/m:v1");
    ck_assert_str_eq(names[1], "llama3.2:1b");
    ck_assert_str_eq(names[2], "me/tiny:q8");
    ollama_names_free(names, n);
    tu_tmpdir_free(first);
    tu_tmpdir_free(second);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * The params layer */

START_TEST(parses_params_options_and_stop_strings)
{
    const char *json = "{\"stop\":[\"<|start_header_id|>\",\"<|eot_id|>\"],\"temperature\":0.6,"
                       "\"top_p\":0.9,\"top_k\":40,\"min_p\":0.05,\"repeat_penalty\":1.1,"
                       "\"num_ctx\":4096,\"seed\":-1,\"mirostat\":0}";
    ollama_params p;
    tt_error err = {0};
    ck_assert_int_eq(ollama_params_parse(json, strlen(json), "params", &p, &err), TT_OK);
    ck_assert(p.has_temperature && p.has_top_p && p.has_top_k && p.has_min_p &&
              p.has_repeat_penalty && p.has_num_ctx && p.has_seed);
    ck_assert(!p.has_num_predict && !p.has_repeat_last_n);
    ck_assert_float_eq(p.temperature, 0.6f);
    ck_assert_float_eq(p.top_p, 0.9f);
    ck_assert_int_eq(p.top_k, 40);
    ck_assert_int_eq(p.num_ctx, 4096);
    ck_assert_int_eq(p.seed, -1);
    ck_assert_int_eq(p.n_stop, 2);
    ck_assert_str_eq(p.stop[1], "<|eot_id|>");
    ollama_params_free(&p);
    ck_assert_int_eq(ollama_params_parse("{\"stop\":\"</s>\"}", 15, "params", &p, &err), TT_OK);
    ck_assert_int_eq(p.n_stop, 1);
    ck_assert_str_eq(p.stop[0], "</s>");
    ollama_params_free(&p);
}
END_TEST

START_TEST(refuses_params_of_the_wrong_type_or_range)
{
    const struct { const char *json, *want; } bad[] = {
        {"[]", "p: not a JSON object"},
        {"{\"temperature\":\"hot\"}", "p: temperature: expected a number, got a string"},
        {"{\"top_p\":1.5}", "p: top_p: 1.5 is not a number in [0, 1]"},
        {"{\"top_k\":2.5}", "p: top_k: 2.5 is not an integer"},
        {"{\"stop\":[\"a\",3]}", "p: stop[1]: expected a string, got a number"},
        {"{\"stop\":[\"\"]}", "p: stop[0]: an empty stop string"},
        {"{\"stop\":{}}", "p: stop: expected a string or an array of strings, got an object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ollama_params p;
        tt_error err = {0};
        ck_assert_int_eq(ollama_params_parse(bad[i].json, strlen(bad[i].json), "p", &p, &err),
                         TT_ERR_FORMAT);
        ck_assert_msg(strstr(err.msg, bad[i].want) != NULL, "'%s' lacks '%s'", err.msg,
                      bad[i].want);
        ck_assert_ptr_null(p.stop);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ollama");
    tu_add_case(s, "resolve", TU_TESTS(
            resolves_a_name_to_its_blob_and_text_layers,
            fills_in_the_default_tag_namespace_and_host,
            searches_stores_in_order_and_says_where_it_looked,
            names_a_missing_blob_and_loads_nothing,
            refuses_a_blob_whose_size_differs_from_the_manifest,
            refuses_names_that_are_not_names, default_stores_follow_ollama_models_then_home,
            lists_every_model_once_sorted));
    tu_add_loop_case(s, "manifests", (int)(sizeof bad_manifests / sizeof bad_manifests[0]),
                     TU_TESTS(refuses_malformed_manifest));
    tu_add_case(s, "params", TU_TESTS(parses_params_options_and_stop_strings,
                                      refuses_params_of_the_wrong_type_or_range));
    return tu_run_suite(s);
}
