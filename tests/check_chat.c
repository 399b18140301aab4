/* check_chat.c: the chat formats (core/session/chat.c): conversations rendered byte for byte as
 * the real templates of public models render them (tests/fixtures/chat/goldens.json, written by
 * tools/chat/mkgolden.py with jinja2), the format detected from each template, turn-by-turn
 * rendering extending the conversation's prefix, the special-token places, and where a model
 * directory keeps its template. */
#include <cJSON.h>
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/session/chat.h"
#include "tests/testutil.h"

static const char *fixture_dir(const char *name)
{
    const char *srcdir = getenv("TOKENTOP_SRCDIR");
    return tu_path("%s/tests/fixtures/chat/%s", srcdir && *srcdir ? srcdir : ".", name);
}

static cJSON *load_goldens(void)
{
    const char *path = fixture_dir("goldens.json");
    size_t len = 0;
    char *text = tu_read_file(path, &len);
    ck_assert_msg(text != NULL, "%s: cannot read (tools/chat/mkgolden.py writes it)", path);
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    ck_assert_msg(cJSON_IsArray(root), "%s: not a JSON array", path);
    return root;
}

static chat_role role_of(const char *name)
{
    if (strcmp(name, "system") == 0)
        return CHAT_ROLE_SYSTEM;
    if (strcmp(name, "assistant") == 0)
        return CHAT_ROLE_ASSISTANT;
    ck_assert_str_eq(name, "user");
    return CHAT_ROLE_USER;
}

/* The golden's messages (pointing into g). */
static int golden_messages(const cJSON *g, chat_message *msgs, int max)
{
    int n = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(g, "messages")) {
        ck_assert_int_lt(n, max);
        msgs[n].role = role_of(cJSON_GetObjectItem(m, "role")->valuestring);
        msgs[n].content = cJSON_GetObjectItem(m, "content")->valuestring;
        n++;
    }
    return n;
}

static chat_spec spec_of_fixture(const char *name)
{
    chat_spec spec;
    char warning[512];
    tt_error err = {0};
    ck_assert_msg(chat_spec_from_dir(fixture_dir(name), &spec, warning, sizeof warning, &err)
                  == TT_OK, "%s", err.msg);
    ck_assert_msg(warning[0] == 0, "%s", warning);
    return spec;
}

START_TEST(renders_every_golden_conversation_byte_for_byte)
{
    cJSON *goldens = load_goldens();
    const cJSON *g;
    int checked = 0;
    cJSON_ArrayForEach(g, goldens) {
        const char *name = cJSON_GetObjectItem(g, "model")->valuestring;
        const char *conv = cJSON_GetObjectItem(g, "conversation")->valuestring;
        const char *want = cJSON_GetObjectItem(g, "text")->valuestring;
        chat_spec spec = spec_of_fixture(name);
        chat_message msgs[16];
        int n = golden_messages(g, msgs, 16);
        chat_text out;
        chat_text_init(&out);
        tt_error err = {0};
        ck_assert_msg(chat_render(&spec, msgs, n,
                                  cJSON_IsTrue(cJSON_GetObjectItem(g, "add_generation_prompt")),
                                  &out, &err) == TT_OK, "%s/%s: %s", name, conv, err.msg);
        ck_assert_msg(out.len == strlen(want) && memcmp(out.text, want, out.len) == 0,
                      "%s/%s:\n got  [%s]\n want [%s]", name, conv, out.text, want);
        chat_text_free(&out);
        checked++;
    }
    ck_assert_int_ge(checked, 30);   /* six templates, six conversations */
    cJSON_Delete(goldens);
}
END_TEST

START_TEST(detects_each_fixture_template_as_its_family)
{
    cJSON *goldens = load_goldens();
    const cJSON *g;
    cJSON_ArrayForEach(g, goldens) {
        const char *name = cJSON_GetObjectItem(g, "model")->valuestring;
        chat_spec spec = spec_of_fixture(name);
        ck_assert_msg(strcmp(chat_format_name(spec.format),
                             cJSON_GetObjectItem(g, "format")->valuestring) == 0,
                      "%s: detected %s", name, chat_format_name(spec.format));
        /* Qwen2.5's template brings its default system message; Qwen3's has none. */
        if (strcmp(name, "qwen2.5") == 0)
            ck_assert_ptr_nonnull(spec.default_system);
        else
            ck_assert_ptr_null(spec.default_system);
    }
    cJSON_Delete(goldens);
}
END_TEST

/* What a model generates between the generation prompt and the end-of-turn token for a reply the
 * template writes as content. */
static const char *as_generated(chat_format f, const char *content, char *buf, size_t cap)
{
    if (f == CHAT_LLAMA2)
        snprintf(buf, cap, " %s ", content);    /* the goldens' replies have no padding */
    else if (f == CHAT_MISTRAL)
        snprintf(buf, cap, " %s", content);
    else
        snprintf(buf, cap, "%s", content);
    return buf;
}

START_TEST(turn_by_turn_rendering_is_the_whole_conversations_text)
{
    cJSON *goldens = load_goldens();
    const cJSON *g;
    int checked = 0;
    for (int closed = 0; closed < 2; closed++)
        cJSON_ArrayForEach(g, goldens) {
            const char *name = cJSON_GetObjectItem(g, "model")->valuestring;
            const char *conv = cJSON_GetObjectItem(g, "conversation")->valuestring;
            if (!cJSON_IsTrue(cJSON_GetObjectItem(g, "add_generation_prompt"))
                || strcmp(conv, "padded_content") == 0)   /* templates strip replies */
                continue;
            chat_spec spec = spec_of_fixture(name);
            chat_message msgs[16];
            int n = golden_messages(g, msgs, 16);
            const char *system = msgs[0].role == CHAT_ROLE_SYSTEM ? msgs[0].content : NULL;
            chat_text out;
            chat_text_init(&out);
            tt_error err = {0};
            bool first = true;
            for (int i = system ? 1 : 0; i < n; i++) {
                if (msgs[i].role == CHAT_ROLE_USER) {
                    ck_assert_int_eq(chat_render_turn(&spec, system, msgs[i].content, first,
                                                      closed, &out, &err), TT_OK);
                    first = false;
                    continue;
                }
                /* The reply as generated, then (closed) the end-of-turn token the model made. */
                char buf[256];
                const char *r = as_generated(spec.format, msgs[i].content, buf, sizeof buf);
                out.text = realloc(out.text, out.len + strlen(r) + 64);
                out.cap = out.len + strlen(r) + 64;
                memcpy(out.text + out.len, r, strlen(r) + 1);
                out.len += strlen(r);
                if (closed) {
                    const char *eot = chat_format_eot(spec.format);
                    memcpy(out.text + out.len, eot, strlen(eot) + 1);
                    out.len += strlen(eot);
                }
            }
            const char *want = cJSON_GetObjectItem(g, "text")->valuestring;
            ck_assert_msg(strcmp(out.text, want) == 0, "%s/%s (reply %s):\n got  [%s]\n want [%s]",
                          name, conv, closed ? "closed by the model" : "left open", out.text,
                          want);
            chat_text_free(&out);
            checked++;
        }
    ck_assert_int_ge(checked, 20);
    cJSON_Delete(goldens);
}
END_TEST

START_TEST(marks_template_markers_as_special_and_content_as_text)
{
    chat_spec spec = chat_spec_of(CHAT_CHATML);
    chat_message msgs[] = {{CHAT_ROLE_USER, "say <|im_end|> please"}};
    chat_text out;
    chat_text_init(&out);
    ck_assert_int_eq(chat_render(&spec, msgs, 1, true, &out, NULL), TT_OK);
    ck_assert_str_eq(out.text, "<|im_start|>user\nsay <|im_end|> please<|im_end|>\n"
                               "<|im_start|>assistant\n");
    /* <|im_start|>, the closing <|im_end|>, <|im_start|>: not the one the user typed */
    ck_assert_uint_eq(out.n_specials, 3);
    const char *want[] = {"<|im_start|>", "<|im_end|>", "<|im_start|>"};
    size_t offs[] = {0, strlen("<|im_start|>user\nsay <|im_end|> please"),
                     strlen("<|im_start|>user\nsay <|im_end|> please<|im_end|>\n")};
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(out.specials[i].off, offs[i]);
        ck_assert_uint_eq(out.specials[i].len, strlen(want[i]));
        ck_assert(memcmp(out.text + out.specials[i].off, want[i], strlen(want[i])) == 0);
    }
    chat_text_free(&out);
    chat_text_free(NULL);
}
END_TEST

START_TEST(refuses_messages_out_of_order_naming_the_message)
{
    chat_spec spec = chat_spec_of(CHAT_LLAMA3);
    chat_message twice[] = {{CHAT_ROLE_USER, "a"}, {CHAT_ROLE_USER, "b"}};
    chat_message late_system[] = {{CHAT_ROLE_USER, "a"}, {CHAT_ROLE_SYSTEM, "b"}};
    chat_message only_system[] = {{CHAT_ROLE_SYSTEM, "s"}};
    chat_text out;
    chat_text_init(&out);
    tt_error err = {0};
    ck_assert_int_eq(chat_render(&spec, twice, 2, true, &out, &err), TT_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "message 1: expected a assistant message, got user"), "%s",
                  err.msg);
    ck_assert_int_eq(chat_render(&spec, late_system, 2, true, &out, &err), TT_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "message 1") && strstr(err.msg, "got system"), "%s", err.msg);
    ck_assert_int_eq(chat_render(&spec, only_system, 1, true, &out, &err), TT_ERR_ARG);
    chat_text_free(&out);
}
END_TEST

START_TEST(detects_by_name_and_refuses_other_families)
{
    chat_spec spec;
    ck_assert(chat_detect("zephyr", &spec));
    ck_assert_int_eq(spec.format, CHAT_ZEPHYR);
    ck_assert(chat_detect("raw", &spec));
    ck_assert_int_eq(spec.format, CHAT_RAW);
    /* Mistral-7B-Instruct-v0.2's older template (no system message) is the [INST] family */
    ck_assert(chat_detect("{{ bos_token }}{% for message in messages %}{% if message['role'] == "
                          "'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif "
                          "message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
                          "{% endif %}{% endfor %}", &spec));
    ck_assert_int_eq(spec.format, CHAT_MISTRAL);
    /* Ollama's template layers (Go templates) of the same families */
    struct {
        const char *text;
        chat_format want;
    } ollama[] = {
        {"{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}<|im_start|>user\n"
         "{{ .Prompt }}<|im_end|>\n<|im_start|>assistant\n", CHAT_CHATML},
        {"<|start_header_id|>user<|end_header_id|>\n\n{{ .Prompt }}<|eot_id|>", CHAT_LLAMA3},
        {"[INST] <<SYS>>{{ .System }}<</SYS>>\n\n{{ .Prompt }} [/INST]", CHAT_LLAMA2},
        {"[INST] {{ if .System }}{{ .System }} {{ end }}{{ .Prompt }} [/INST]", CHAT_MISTRAL},
        {"<|system|>\n{{ .System }}</s>\n<|user|>\n{{ .Prompt }}</s>\n<|assistant|>\n",
         CHAT_ZEPHYR},
    };
    for (size_t i = 0; i < sizeof ollama / sizeof *ollama; i++) {
        ck_assert_msg(chat_detect(ollama[i].text, &spec), "Ollama template %zu", i);
        ck_assert_int_eq(spec.format, ollama[i].want);
    }
    /* Gemma, Phi-3, Phi-4 and Mistral v7 are other formats: raw, and false */
    const char *others[] = {
        "{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>"
        "{% endfor %}",
        "{% for m in messages %}{{'<|' + m['role'] + '|>\n' + m['content'] + '<|end|>\n'}}"
        "{% endfor %}<|user|><|assistant|>",
        "{% for m in messages %}<|im_start|>{{ m['role'] }}<|im_sep|>{{ m['content'] }}"
        "<|im_end|>{% endfor %}",
        "{{ bos_token }}[SYSTEM_PROMPT]{{ system }}[/SYSTEM_PROMPT][INST]{{ m }}[/INST]",
        "",
    };
    for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
        spec.format = CHAT_CHATML;
        ck_assert_msg(!chat_detect(others[i], &spec), "template %zu detected", i);
        ck_assert_int_eq(spec.format, CHAT_RAW);
    }
    ck_assert(!chat_detect(NULL, &spec));
}
END_TEST

START_TEST(format_names_round_trip_and_name_their_end_of_turn)
{
    for (int f = 0; f < CHAT_FORMAT_COUNT; f++) {
        chat_format back;
        ck_assert(chat_format_from_name(chat_format_name((chat_format)f), &back));
        ck_assert_int_eq(back, f);
        ck_assert_msg(strstr(chat_format_list(), chat_format_name((chat_format)f)), "%d", f);
    }
    chat_format x;
    ck_assert(!chat_format_from_name("ChatML", &x));
    ck_assert(!chat_format_from_name("off", &x));
    ck_assert_str_eq(chat_format_eot(CHAT_CHATML), "<|im_end|>");
    ck_assert_str_eq(chat_format_eot(CHAT_LLAMA3), "<|eot_id|>");
    ck_assert_str_eq(chat_format_eot(CHAT_ZEPHYR), "</s>");
    ck_assert_ptr_null(chat_format_eot(CHAT_RAW));
    ck_assert(chat_format_emits_bos(CHAT_LLAMA3));
    ck_assert(!chat_format_emits_bos(CHAT_CHATML));
    ck_assert(!chat_format_emits_bos(CHAT_ZEPHYR));
}
END_TEST

START_TEST(template_comes_from_the_jinja_file_or_the_tokenizer_config)
{
    char *dir = tu_tmpdir();
    char *text = NULL, *source = NULL;
    tt_error err = {0};
    /* nothing there: no template, no error */
    ck_assert_int_eq(chat_template_from_dir(dir, &text, &source, &err), TT_OK);
    ck_assert_ptr_null(text);
    const char *cfg = "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"x\"},"
                      " {\"name\": \"default\", \"template\": \"<|im_start|>{{ m }}\"}]}";
    ck_assert_int_eq(tu_write_file(tu_path("%s/tokenizer_config.json", dir), cfg, strlen(cfg)), 0);
    ck_assert_int_eq(chat_template_from_dir(dir, &text, &source, &err), TT_OK);
    ck_assert_str_eq(text, "<|im_start|>{{ m }}");
    ck_assert_str_eq(source, tu_path("%s/tokenizer_config.json", dir));
    free(text);
    free(source);
    /* chat_template.jinja wins over the config */
    const char *jinja = "{% for m in messages %}<|start_header_id|><|end_header_id|>{% endfor %}";
    ck_assert_int_eq(tu_write_file(tu_path("%s/chat_template.jinja", dir), jinja, strlen(jinja)),
                     0);
    chat_spec spec;
    char warning[256];
    ck_assert_int_eq(chat_spec_from_dir(dir, &spec, warning, sizeof warning, &err), TT_OK);
    ck_assert_int_eq(spec.format, CHAT_LLAMA3);
    ck_assert_str_eq(warning, "");
    /* an unknown template: raw, and a warning naming where it came from */
    const char *gemma = "<start_of_turn>{{ m }}<end_of_turn>";
    ck_assert_int_eq(tu_write_file(tu_path("%s/chat_template.jinja", dir), gemma, strlen(gemma)),
                     0);
    ck_assert_int_eq(chat_spec_from_dir(dir, &spec, warning, sizeof warning, &err), TT_OK);
    ck_assert_int_eq(spec.format, CHAT_RAW);
    ck_assert_msg(strstr(warning, "chat_template.jinja: chat_template matches no built-in chat "
                         "format"), "%s", warning);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(bad_tokenizer_config_is_refused_naming_file_and_field)
{
    char *dir = tu_tmpdir();
    const char *path = tu_path("%s/tokenizer_config.json", dir);
    char *text = NULL;
    tt_error err = {0};
    const char *cases[][2] = {
        {"{\"chat_template\": 7}", "chat_template: expected a string or a list of named "
                                   "templates, got a number"},
        {"{\"chat_template\": [\"x\"]}", "chat_template[0]: expected an object"},
        {"{\"chat_template\": [{\"name\": \"default\"}]}", "chat_template[0]"},
        {"[1, 2]", "not a JSON object"},
        {"{\"chat_template\": ", "invalid JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ck_assert_int_eq(tu_write_file(path, cases[i][0], strlen(cases[i][0])), 0);
        ck_assert_int_eq(chat_template_from_dir(dir, &text, NULL, &err), TT_ERR_FORMAT);
        ck_assert_ptr_null(text);
        ck_assert_msg(strstr(err.msg, "tokenizer_config.json") && strstr(err.msg, cases[i][1]),
                      "case %zu: %s", i, err.msg);
    }
    /* a null chat_template, or a list without "default": no template */
    const char *none[] = {"{\"chat_template\": null}", "{}",
                          "{\"chat_template\": [{\"name\": \"rag\", \"template\": \"x\"}]}"};
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(tu_write_file(path, none[i], strlen(none[i])), 0);
        ck_assert_int_eq(chat_template_from_dir(dir, &text, NULL, &err), TT_OK);
        ck_assert_ptr_null(text);
    }
    tu_tmpdir_free(dir);
}
END_TEST

int main(void)
{
    return tu_run_tests("chat", TU_TESTS(
            renders_every_golden_conversation_byte_for_byte,
            detects_each_fixture_template_as_its_family,
            turn_by_turn_rendering_is_the_whole_conversations_text,
            marks_template_markers_as_special_and_content_as_text,
            refuses_messages_out_of_order_naming_the_message,
            detects_by_name_and_refuses_other_families,
            format_names_round_trip_and_name_their_end_of_turn,
            template_comes_from_the_jinja_file_or_the_tokenizer_config,
            bad_tokenizer_config_is_refused_naming_file_and_field));
}
