/* chat.h: chat formats of instruct models: rendering a conversation as the model's chat template
 * would, its end-of-turn strings and BOS handling, and choosing the format from a Jinja template
 * string (tokenizer_config.json's chat_template, a chat_template.jinja file, and later GGUF's
 * tokenizer.chat_template or Ollama's template layer) by distinctive substrings.
 *
 * Built in: chatml (Qwen2.5, Qwen3 and other <|im_start|> models; Qwen2.5's default system
 * message when none is given), llama3 (Llama 3 Instruct), llama2 (Llama 2 chat: [INST] with the
 * system message in <<SYS>> inside the first turn, BOS before every turn, stripped content),
 * mistral (Mistral/Mixtral Instruct's v1 template: " [INST] ", the system message before the
 * first user message, BOS once), zephyr (TinyLlama-Chat, Zephyr: <|user|> ... </s>), and raw (no
 * format: plain continuation).
 *
 * Not supported, and rendered as the plain conversation of the family instead: tool definitions
 * and tool calls or results, any other branch a template takes on its variables (Qwen3's
 * enable_thinking=false and its stripping of <think> blocks from earlier replies, Llama 3.1+'s
 * "Cutting Knowledge Date" system preamble, Mistral v0.2/v0.3's system message in the last
 * user turn and the tekken spacing), a system message anywhere but first, and templates that
 * match none of the families (detection then says so and the caller falls back to raw). Jinja is
 * never interpreted. */
#ifndef TOKENTOP_CHAT_H
#define TOKENTOP_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/base/status.h"

typedef enum {
    CHAT_RAW = 0,      /* no chat format: plain continuation */
    CHAT_CHATML,
    CHAT_LLAMA3,
    CHAT_LLAMA2,
    CHAT_MISTRAL,
    CHAT_ZEPHYR,
    CHAT_FORMAT_COUNT,
} chat_format;

/* "raw", "chatml", "llama3", "llama2", "mistral", "zephyr". */
const char *chat_format_name(chat_format f);

/* The format named name (exactly one of the names above); false for any other name. */
bool chat_format_from_name(const char *name, chat_format *out);

/* "chatml, llama3, llama2, mistral, zephyr, raw": for messages. */
const char *chat_format_list(void);

/* The string that ends an assistant turn, as the model generates it ("<|im_end|>", "<|eot_id|>",
 * "</s>"); NULL for raw. */
const char *chat_format_eot(chat_format f);

/* Whether the format's own text starts the conversation with the BOS token ("<|begin_of_text|>"
 * for llama3, "<s>" for llama2 and mistral). When it does not (chatml, zephyr), a BOS token comes
 * only from the tokenizer's own rule. */
bool chat_format_emits_bos(chat_format f);

/* A format and what the template added to it. */
typedef struct {
    chat_format format;
    const char *default_system;  /* static; the system message rendered when none is given
                                    (Qwen2.5's "You are Qwen, ..."), or NULL */
} chat_spec;

/* The spec of a format with no template behind it (--chat-template NAME): no default system. */
chat_spec chat_spec_of(chat_format f);

/* Rendered text with the places of the template's special-token candidates: text[0..len) is
 * NUL-terminated; specials[i] are byte ranges (in order, not overlapping) that the template
 * wrote as markers ("<|im_start|>", "<s>", "[INST]" ...), which a tokenizer maps to single
 * tokens where its vocabulary has them; everything else (the messages' contents included) is
 * plain text. The caller owns it: chat_text_init / chat_text_free (NULL-safe). */
typedef struct {
    size_t off, len;
} chat_span;

typedef struct {
    char *text;
    size_t len, cap;
    chat_span *specials;
    size_t n_specials, specials_cap;
} chat_text;

void chat_text_init(chat_text *t);
void chat_text_free(chat_text *t);

typedef enum { CHAT_ROLE_SYSTEM = 0, CHAT_ROLE_USER, CHAT_ROLE_ASSISTANT } chat_role;

/* "system", "user", "assistant". */
const char *chat_role_name(chat_role r);

typedef struct {
    chat_role role;
    const char *content;         /* NUL-terminated */
} chat_message;

/* Appends the whole conversation msgs[0..n) to out as the template renders it
 * (add_generation_prompt: the assistant's header after the last message, as transformers'
 * apply_chat_template(add_generation_prompt=True)). An optional system message comes first, then
 * user and assistant messages alternate starting with a user message: any other order fails with
 * TT_ERR_ARG naming the message (out keeps what was appended before it). raw renders the
 * contents one after another. */
tt_status chat_render(const chat_spec *spec, const chat_message *msgs, int n,
                      bool add_generation_prompt, chat_text *out, tt_error *err);

/* Appends what one more user turn adds to a conversation, so that a conversation rendered turn by
 * turn is the text chat_render gives for it (with the model's replies as generated): first: the
 * conversation is empty (the format's BOS text and the system message, system or the spec's
 * default, go first; system may be NULL); otherwise reply_closed says whether the last reply
 * ended with the end-of-turn token (when not, its end-of-turn text is written first, so the
 * reply is closed as the template would close it). Then the user message and the generation
 * prompt. */
tt_status chat_render_turn(const chat_spec *spec, const char *system, const char *user,
                           bool first, bool reply_closed, chat_text *out, tt_error *err);

/* Chooses the format from a chat template's text: a template that is exactly a format's name
 * gives that format; otherwise distinctive substrings (<|im_start|> → chatml; <|start_header_id|>
 * and <|end_header_id|> → llama3; [INST] with <<SYS>> → llama2, without → mistral; <|user|> and
 * <|assistant|> ending turns with the eos token → zephyr). False (and *out raw) when none
 * matches. */
bool chat_detect(const char *template_text, chat_spec *out);

/* The chat template of a model directory: chat_template.jinja when it exists, else
 * tokenizer_config.json's "chat_template" (a string, or a list of {"name", "template"} of which
 * the one named "default" is taken). *template_text (malloc'd) is NULL when the directory has no
 * template (no file, no key, or a null value); *source (malloc'd, may be NULL to skip) names
 * where it came from ("DIR/tokenizer_config.json"). A file that cannot be read or parsed, or a
 * chat_template of another type, fails naming the file, the field and what it holds. */
tt_status chat_template_from_dir(const char *dir, char **template_text, char **source,
                                 tt_error *err);

/* chat_template_from_dir, then chat_detect: *spec is raw when the directory has no template or
 * when the template matches no format; in that last case warning (cap bytes, may be NULL)
 * receives "SOURCE: chat_template matches no built-in chat format (...): raw continuation",
 * else an empty string. */
tt_status chat_spec_from_dir(const char *dir, chat_spec *spec, char *warning, size_t cap,
                             tt_error *err);

#endif
