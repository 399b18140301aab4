/* chat_cmd.c: /chat and /system over the session's chat mode (core/session/chat.h). */
#include "repl/chat_cmd.h"

#include <stdlib.h>
#include <string.h>

#include "core/session/chat.h"

/* What the model's template chose, for messages. */
static const char *model_format(const session *s)
{
    return s->chat.model_spec.format == CHAT_RAW ? "none (no chat template)"
                                                 : chat_format_name(s->chat.model_spec.format);
}

static int set_format(cmd_env *e, chat_spec want)
{
    session_chat c = e->s->chat;
    c.spec = want;
    tt_error err = {0};
    if (session_set_chat(e->s, &c, &err) != TT_OK)
        return cmd_fail(e, "/chat: %s", err.msg);
    if (want.format == CHAT_RAW)
        cmd_out(e, "chat off: what you send continues the text as it is");
    else
        cmd_out(e, "chat %s: your next turns are wrapped in it; replies end at %s",
                chat_format_name(want.format), chat_format_eot(want.format));
    if (e->s->n_tokens > 0)
        cmd_out(e, " (the turns so far stay as they were)");
    return CMD_STATUS;
}

int chat_cmd_exec(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    (void)c;
    session *s = e->s;
    if (argc == 0) {
        cmd_out(e, "chat %s; the model's format: %s",
                s->chat.spec.format == CHAT_RAW ? "off (plain continuation)"
                                                : chat_format_name(s->chat.spec.format),
                model_format(s));
        return CMD_DONE;
    }
    if (strcmp(argv[0], "off") == 0)
        return set_format(e, chat_spec_of(CHAT_RAW));
    if (strcmp(argv[0], "on") == 0) {
        if (s->chat.model_spec.format == CHAT_RAW)
            return cmd_fail(e, "/chat on: the model has no chat template; /chat NAME picks a "
                            "format (%s)", chat_format_list());
        return set_format(e, s->chat.model_spec);
    }
    chat_format f;
    if (!chat_format_from_name(argv[0], &f))
        return cmd_fail(e, "/chat: \"%s\" is not a chat format (%s, or on, off)", argv[0],
                        chat_format_list());
    /* The model's own format keeps what its template adds (a default system message). */
    return set_format(e, f == s->chat.model_spec.format ? s->chat.model_spec : chat_spec_of(f));
}

int chat_cmd_exec_system(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    (void)c;
    session *s = e->s;
    if (argc == 0) {
        const char *def = s->chat.spec.default_system;
        if (s->system)
            cmd_out(e, "system: %s", s->system);
        else
            cmd_out(e, "system: none%s%s%s", def ? " (the template's default: " : "",
                    def ? def : "", def ? ")" : "");
        return CMD_DONE;
    }
    /* The words again with one space between them, as they were typed */
    size_t len = 0;
    for (int i = 0; i < argc; i++)
        len += strlen(argv[i]) + 1;
    char *text = malloc(len + 1);
    if (!text)
        return cmd_fail(e, "/system: out of memory");
    text[0] = 0;
    for (int i = 0; i < argc; i++) {
        if (i)
            strcat(text, " ");
        strcat(text, argv[i]);
    }
    bool off = argc == 1 && strcmp(argv[0], "off") == 0;
    tt_error err = {0};
    tt_status st = session_set_system(s, off ? NULL : text, &err);
    free(text);
    if (st != TT_OK)
        return cmd_fail(e, "/system: %s", err.msg);
    cmd_out(e, off ? "system message cleared" : "system message set");
    if (s->chat.spec.format == CHAT_RAW)
        cmd_out(e, "; it is used in chat mode only (/chat on or /chat NAME)");
    else if (s->n_tokens > 0)
        cmd_out(e, "; it opens a conversation: /reset to start this one over with it");
    return CMD_STATUS;
}

/* ---------------------------------------------------------------------------------------------
 * The commands this module registers (cmd_env_add_module) */

static const cmd_entry chat_rows[] = {
    {.name = "chat", .alias = NULL, .args = "[NAME|off|on]",
     .usage = "chat format of your turns (chatml, llama3, llama2, mistral, zephyr), off: plain "
              "continuation, on: the model's",
     .min_args = 0, .max_args = 1, .busy_ok = false, .param = NULL,
     .exec = chat_cmd_exec, .group = CMD_GROUP_SESSION},
    {.name = "system", .alias = NULL, .args = "[TEXT|off]",
     .usage = "the system message that opens a chat conversation",
     .min_args = 0, .max_args = 64, .busy_ok = false, .param = NULL,
     .exec = chat_cmd_exec_system, .group = CMD_GROUP_SESSION},
};

const cmd_module chat_cmd_module = {
    .name = "chat",
    .rows = chat_rows,
    .n_rows = (int)(sizeof chat_rows / sizeof chat_rows[0]),
    .show = NULL,
    .env_free = NULL,
};
