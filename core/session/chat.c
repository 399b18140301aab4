/* chat.c: the built-in chat formats, their detection from template text, and where a model
 * directory keeps its template. */
#include "core/session/chat.h"

#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/util.h"

/* ---------------------------------------------------------------------------------------------
 * Formats */

static const char *const FORMAT_NAMES[CHAT_FORMAT_COUNT] = {
    [CHAT_RAW] = "raw",         [CHAT_CHATML] = "chatml",   [CHAT_LLAMA3] = "llama3",
    [CHAT_LLAMA2] = "llama2",   [CHAT_MISTRAL] = "mistral", [CHAT_ZEPHYR] = "zephyr",
};

static const char *const FORMAT_EOT[CHAT_FORMAT_COUNT] = {
    [CHAT_RAW] = NULL,          [CHAT_CHATML] = "<|im_end|>", [CHAT_LLAMA3] = "<|eot_id|>",
    [CHAT_LLAMA2] = "</s>",     [CHAT_MISTRAL] = "</s>",      [CHAT_ZEPHYR] = "</s>",
};

/* Template text after the end-of-turn token, before the next message. */
static const char *const FORMAT_AFTER_EOT[CHAT_FORMAT_COUNT] = {
    [CHAT_CHATML] = "\n", [CHAT_ZEPHYR] = "\n",
};

/* Qwen2.5's system message when the conversation has none (its template's else branch). */
static const char QWEN_DEFAULT_SYSTEM[] =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

const char *chat_format_name(chat_format f)
{
    return (unsigned)f < CHAT_FORMAT_COUNT ? FORMAT_NAMES[f] : "raw";
}

bool chat_format_from_name(const char *name, chat_format *out)
{
    for (int f = 0; name && f < CHAT_FORMAT_COUNT; f++)
        if (strcmp(name, FORMAT_NAMES[f]) == 0) {
            *out = (chat_format)f;
            return true;
        }
    return false;
}

const char *chat_format_list(void)
{
    return "chatml, llama3, llama2, mistral, zephyr, raw";
}

const char *chat_format_eot(chat_format f)
{
    return (unsigned)f < CHAT_FORMAT_COUNT ? FORMAT_EOT[f] : NULL;
}

bool chat_format_emits_bos(chat_format f)
{
    return f == CHAT_LLAMA3 || f == CHAT_LLAMA2 || f == CHAT_MISTRAL;
}

chat_spec chat_spec_of(chat_format f)
{
    return (chat_spec){.format = f, .default_system = NULL};
}

const char *chat_role_name(chat_role r)
{
    switch (r) {
    case CHAT_ROLE_SYSTEM: return "system";
    case CHAT_ROLE_USER: return "user";
    case CHAT_ROLE_ASSISTANT: return "assistant";
    }
    return "user";
}

/* ---------------------------------------------------------------------------------------------
 * Rendered text */

void chat_text_init(chat_text *t)
{
    memset(t, 0, sizeof *t);
}

void chat_text_free(chat_text *t)
{
    if (!t)
        return;
    free(t->text);
    free(t->specials);
    memset(t, 0, sizeof *t);
}

static tt_status put_n(chat_text *t, const char *s, size_t n, bool special, tt_error *err)
{
    if (!util_reserve(&t->text, &t->cap, t->len + n + 1, 256))
        return tt_fail(err, TT_ERR_NOMEM, "chat: out of memory");
    if (special && n > 0) {
        if (!UTIL_RESERVE(t->specials, &t->specials_cap, t->n_specials + 1, 16))
            return tt_fail(err, TT_ERR_NOMEM, "chat: out of memory");
        t->specials[t->n_specials++] = (chat_span){.off = t->len, .len = n};
    }
    memcpy(t->text + t->len, s, n);
    t->len += n;
    t->text[t->len] = 0;
    return TT_OK;
}

/* Template text. */
static tt_status put(chat_text *t, const char *s, tt_error *err)
{
    return put_n(t, s, strlen(s), false, err);
}

/* A special-token candidate. */
static tt_status mark(chat_text *t, const char *s, tt_error *err)
{
    return put_n(t, s, strlen(s), true, err);
}

/* Python's str.isspace() for a code point: what Jinja's trim filter and str.strip() remove. */
static bool py_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
           c == 0x202f || c == 0x205f || c == 0x3000;
}

/* The code point starting at s[i] (n bytes in all) and its length; an invalid byte is itself. */
static uint32_t decode_at(const unsigned char *s, size_t i, size_t n, size_t *len)
{
    unsigned char b = s[i];
    int k = b < 0x80 ? 0 : (b & 0xe0) == 0xc0 ? 1 : (b & 0xf0) == 0xe0 ? 2 : (b & 0xf8) == 0xf0 ? 3 : -1;
    *len = 1;
    if (k == 0)
        return b;
    if (k < 0 || i + (size_t)k >= n)
        return 0xfffd;
    uint32_t c = b & (0x3f >> k);
    for (int j = 1; j <= k; j++) {
        if ((s[i + j] & 0xc0) != 0x80)
            return 0xfffd;
        c = (c << 6) | (s[i + j] & 0x3f);
    }
    *len = (size_t)k + 1;
    return c;
}

/* Content as str.strip() leaves it (the leading and trailing whitespace removed). */
static tt_status put_stripped(chat_text *t, const char *s, tt_error *err)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s), a = 0, b = n;
    while (a < n) {
        size_t l;
        if (!py_space(decode_at(u, a, n, &l)))
            break;
        a += l;
    }
    while (b > a) {
        size_t start = b - 1;    /* back to the start of the last code point */
        while (start > a && (u[start] & 0xc0) == 0x80 && b - start < 4)
            start--;
        size_t l;
        uint32_t c = decode_at(u, start, n, &l);
        if (start + l != b)
            break;
        if (!py_space(c))
            break;
        b = start;
    }
    return put_n(t, s + a, b - a, false, err);
}

/* ---------------------------------------------------------------------------------------------
 * Rendering: a conversation is its user turns (each with the format's BOS text and the system
 * message on the first), the generation prompt, and replies closed by the end-of-turn token and
 * the text after it. */

static tt_status render_user(const chat_spec *spec, const char *system, const char *user,
                             bool first, chat_text *t, tt_error *err)
{
    tt_status st = TT_OK;
    if (first && !system)
        system = spec->default_system;
    switch (spec->format) {
    case CHAT_RAW:
        return put(t, user, err);
    case CHAT_CHATML:
        if (first && system && ((st = mark(t, "<|im_start|>", err)) || (st = put(t, "system\n", err))
                                || (st = put(t, system, err)) || (st = mark(t, "<|im_end|>", err))
                                || (st = put(t, "\n", err))))
            return st;
        if ((st = mark(t, "<|im_start|>", err)) || (st = put(t, "user\n", err))
            || (st = put(t, user, err)) || (st = mark(t, "<|im_end|>", err))
            || (st = put(t, "\n", err)))
            return st;
        return TT_OK;
    case CHAT_LLAMA3:
        if (first && (st = mark(t, "<|begin_of_text|>", err)))
            return st;
        if (first && system && ((st = mark(t, "<|start_header_id|>", err))
                                || (st = put(t, "system", err))
                                || (st = mark(t, "<|end_header_id|>", err))
                                || (st = put(t, "\n\n", err)) || (st = put_stripped(t, system, err))
                                || (st = mark(t, "<|eot_id|>", err))))
            return st;
        if ((st = mark(t, "<|start_header_id|>", err)) || (st = put(t, "user", err))
            || (st = mark(t, "<|end_header_id|>", err)) || (st = put(t, "\n\n", err))
            || (st = put_stripped(t, user, err)) || (st = mark(t, "<|eot_id|>", err)))
            return st;
        return TT_OK;
    case CHAT_LLAMA2: {
        /* The template strips the whole content, the <<SYS>> block included. */
        chat_text c;
        chat_text_init(&c);
        if (first && system && ((st = put(&c, "<<SYS>>\n", err)) || (st = put(&c, system, err))
                                || (st = put(&c, "\n<</SYS>>\n\n", err)))) {
            chat_text_free(&c);
            return st;
        }
        if ((st = put(&c, user, err)) == TT_OK
            && (st = mark(t, "<s>", err)) == TT_OK && (st = mark(t, "[INST]", err)) == TT_OK
            && (st = put(t, " ", err)) == TT_OK && (st = put_stripped(t, c.text, err)) == TT_OK
            && (st = put(t, " ", err)) == TT_OK)
            st = mark(t, "[/INST]", err);
        chat_text_free(&c);
        return st;
    }
    case CHAT_MISTRAL:
        if (first && (st = mark(t, "<s>", err)))
            return st;
        if ((st = put(t, " ", err)) || (st = mark(t, "[INST]", err)) || (st = put(t, " ", err)))
            return st;
        if (first && system && ((st = put(t, system, err)) || (st = put(t, "\n\n", err))))
            return st;
        if ((st = put(t, user, err)) || (st = put(t, " ", err)) || (st = mark(t, "[/INST]", err)))
            return st;
        return TT_OK;
    case CHAT_ZEPHYR:
        if (first && system && ((st = mark(t, "<|system|>", err)) || (st = put(t, "\n", err))
                                || (st = put(t, system, err)) || (st = mark(t, "</s>", err))
                                || (st = put(t, "\n", err))))
            return st;
        if ((st = mark(t, "<|user|>", err)) || (st = put(t, "\n", err)) || (st = put(t, user, err))
            || (st = mark(t, "</s>", err)) || (st = put(t, "\n", err)))
            return st;
        return TT_OK;
    case CHAT_FORMAT_COUNT:
        break;
    }
    return tt_fail(err, TT_ERR_ARG, "chat: format %d is not a chat format", (int)spec->format);
}

/* The assistant's header: what the generation prompt adds. */
static tt_status render_prompt(chat_format f, chat_text *t, tt_error *err)
{
    tt_status st = TT_OK;
    switch (f) {
    case CHAT_CHATML:
        if ((st = mark(t, "<|im_start|>", err)) == TT_OK)
            st = put(t, "assistant\n", err);
        return st;
    case CHAT_LLAMA3:
        if ((st = mark(t, "<|start_header_id|>", err)) || (st = put(t, "assistant", err))
            || (st = mark(t, "<|end_header_id|>", err)))
            return st;
        return put(t, "\n\n", err);
    case CHAT_ZEPHYR:
        if ((st = mark(t, "<|assistant|>", err)) == TT_OK)
            st = put(t, "\n", err);
        return st;
    default:
        return TT_OK;   /* raw, llama2, mistral: the user turn ends where the reply begins */
    }
}

/* The end of a reply: the end-of-turn token and the template's text after it. */
static tt_status render_close(chat_format f, bool with_eot, chat_text *t, tt_error *err)
{
    tt_status st;
    if (with_eot && FORMAT_EOT[f] && (st = mark(t, FORMAT_EOT[f], err)) != TT_OK)
        return st;
    return FORMAT_AFTER_EOT[f] ? put(t, FORMAT_AFTER_EOT[f], err) : TT_OK;
}

/* An earlier reply as the template writes it into the conversation. */
static tt_status render_reply(chat_format f, const char *content, chat_text *t, tt_error *err)
{
    tt_status st;
    if ((st = render_prompt(f, t, err)) != TT_OK)
        return st;
    switch (f) {
    case CHAT_LLAMA3:
        st = put_stripped(t, content, err);
        break;
    case CHAT_LLAMA2:
        if ((st = put(t, " ", err)) || (st = put_stripped(t, content, err)))
            return st;
        st = put(t, " ", err);
        break;
    case CHAT_MISTRAL:
        if ((st = put(t, " ", err)) == TT_OK)
            st = put(t, content, err);
        break;
    default:
        st = put(t, content, err);
        break;
    }
    return st != TT_OK ? st : render_close(f, true, t, err);
}

tt_status chat_render(const chat_spec *spec, const chat_message *msgs, int n,
                      bool add_generation_prompt, chat_text *out, tt_error *err)
{
    const char *system = NULL;
    int i = 0;
    if (n > 0 && msgs[0].role == CHAT_ROLE_SYSTEM) {
        system = msgs[0].content;
        i = 1;
    }
    if (spec->format == CHAT_RAW) {
        tt_status st;
        for (int k = 0; k < n; k++)
            if ((st = put(out, msgs[k].content, err)) != TT_OK)
                return st;
        return TT_OK;
    }
    bool first = true;
    for (int turn = 0; i < n; i++, turn++) {
        chat_role want = turn % 2 == 0 ? CHAT_ROLE_USER : CHAT_ROLE_ASSISTANT;
        if (msgs[i].role != want)
            return tt_fail(err, TT_ERR_ARG, "chat: message %d: expected a %s message, got %s "
                           "(after an optional first system message, user and assistant "
                           "messages alternate)", i, chat_role_name(want),
                           chat_role_name(msgs[i].role));
        tt_status st = want == CHAT_ROLE_USER
                     ? render_user(spec, system, msgs[i].content, first, out, err)
                     : render_reply(spec->format, msgs[i].content, out, err);
        if (st != TT_OK)
            return st;
        first = false;
    }
    if (first && system) {
        /* Only a system message: the templates write it alone. */
        return tt_fail(err, TT_ERR_ARG, "chat: a conversation needs a user message after the "
                       "system message");
    }
    if (add_generation_prompt && n > 0)
        return render_prompt(spec->format, out, err);
    return TT_OK;
}

tt_status chat_render_turn(const chat_spec *spec, const char *system, const char *user,
                           bool first, bool reply_closed, chat_text *out, tt_error *err)
{
    tt_status st;
    if (spec->format == CHAT_RAW)
        return put(out, user, err);
    if (!first && (st = render_close(spec->format, !reply_closed, out, err)) != TT_OK)
        return st;
    if ((st = render_user(spec, system, user, first, out, err)) != TT_OK)
        return st;
    return render_prompt(spec->format, out, err);
}

/* ---------------------------------------------------------------------------------------------
 * Detection */

bool chat_detect(const char *tmpl, chat_spec *out)
{
    *out = chat_spec_of(CHAT_RAW);
    if (!tmpl)
        return false;
    chat_format named;
    if (chat_format_from_name(tmpl, &named)) {
        *out = chat_spec_of(named);
        return true;
    }
#define HAS(s) (strstr(tmpl, (s)) != NULL)
    if (HAS("<|im_start|>")) {
        /* Phi-4 (<|im_sep|>) and SmolVLM (<end_of_utterance>) use the markers otherwise. */
        if (HAS("<|im_sep|>") || HAS("<end_of_utterance>"))
            return false;
        out->format = CHAT_CHATML;
        if (HAS(QWEN_DEFAULT_SYSTEM))
            out->default_system = QWEN_DEFAULT_SYSTEM;
        return true;
    }
    if (HAS("<|start_header_id|>") && HAS("<|end_header_id|>")) {
        out->format = CHAT_LLAMA3;
        return true;
    }
    if (HAS("[INST]")) {
        /* Mistral's v7 ([SYSTEM_PROMPT]) is another format. */
        if (HAS("[SYSTEM_PROMPT]"))
            return false;
        out->format = HAS("<<SYS>>") ? CHAT_LLAMA2 : CHAT_MISTRAL;
        return true;
    }
    if (HAS("<|user|>") && HAS("<|assistant|>") && !HAS("<|end|>")
        && (HAS("eos_token") || HAS("</s>"))) {
        out->format = CHAT_ZEPHYR;
        return true;
    }
#undef HAS
    return false;
}

/* ---------------------------------------------------------------------------------------------
 * Where a model directory keeps its template */

/* Largest template file read: real ones are a few kilobytes, tool-heavy ones tens. */
#define CHAT_TEMPLATE_MAX_BYTES (4u << 20)
#define CHAT_CONFIG_MAX_BYTES (64u << 20)

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

tt_status chat_template_from_dir(const char *dir, char **template_text, char **source,
                                 tt_error *err)
{
    *template_text = NULL;
    if (source)
        *source = NULL;
    char *path = util_path_join(dir, "chat_template.jinja");
    if (!path)
        return tt_fail(err, TT_ERR_NOMEM, "chat: out of memory");
    char *buf = NULL;
    size_t len = 0;
    bool missing = false;
    tt_status st = util_read_file(path, CHAT_TEMPLATE_MAX_BYTES, &buf, &len, &missing, err);
    if (st == TT_OK) {
        if (strlen(buf) != len) {
            free(buf);
            st = tt_fail(err, TT_ERR_FORMAT, "%s: holds a NUL byte at %zu", path, strlen(buf));
            free(path);
            return st;
        }
        *template_text = buf;
        if (source)
            *source = path;
        else
            free(path);
        return TT_OK;
    }
    free(path);
    if (!missing)
        return st;

    if (!(path = util_path_join(dir, "tokenizer_config.json")))
        return tt_fail(err, TT_ERR_NOMEM, "chat: out of memory");
    st = util_read_file(path, CHAT_CONFIG_MAX_BYTES, &buf, &len, &missing, err);
    if (st != TT_OK) {
        free(path);
        return missing ? TT_OK : st;    /* no tokenizer_config.json: no template */
    }
    cJSON *root = cJSON_ParseWithLength(buf, len);
    free(buf);
    if (!root || !cJSON_IsObject(root)) {
        st = tt_fail(err, TT_ERR_FORMAT, "%s: not a JSON object%s", path,
                     root ? "" : " (invalid JSON)");
        cJSON_Delete(root);
        free(path);
        return st;
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "chat_template");
    st = TT_OK;
    if (cJSON_IsString(t)) {
        *template_text = strdup(t->valuestring);
    } else if (cJSON_IsArray(t)) {
        const cJSON *item;
        int i = 0;
        cJSON_ArrayForEach(item, t) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(item, "name");
            const cJSON *text = cJSON_GetObjectItemCaseSensitive(item, "template");
            if (!cJSON_IsString(name) || !cJSON_IsString(text)) {
                st = tt_fail(err, TT_ERR_FORMAT, "%s: chat_template[%d]: expected an object with "
                             "string \"name\" and \"template\", got %s", path, i,
                             cJSON_IsObject(item) ? "an object without them"
                                                  : util_json_type_name(item));
                break;
            }
            if (strcmp(name->valuestring, "default") == 0) {
                *template_text = strdup(text->valuestring);
                break;
            }
            i++;
        }
    } else if (t && !cJSON_IsNull(t)) {
        st = tt_fail(err, TT_ERR_FORMAT, "%s: chat_template: expected a string or a list of "
                     "named templates, got %s", path, util_json_type_name(t));
    }
    cJSON_Delete(root);
    if (st == TT_OK && *template_text && source)
        *source = dup_or_null(path);
    free(path);
    return st;
}

tt_status chat_spec_from_dir(const char *dir, chat_spec *spec, char *warning, size_t cap,
                             tt_error *err)
{
    *spec = chat_spec_of(CHAT_RAW);
    if (warning && cap)
        warning[0] = 0;
    char *text = NULL, *source = NULL;
    tt_status st = chat_template_from_dir(dir, &text, &source, err);
    if (st != TT_OK || !text)
        return st;
    if (!chat_detect(text, spec) && warning && cap)
        snprintf(warning, cap, "%s: chat_template matches no built-in chat format (%s): raw "
                 "continuation", source ? source : dir, chat_format_list());
    free(text);
    free(source);
    return TT_OK;
}
