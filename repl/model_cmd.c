/* model_cmd.c: /model: opening another model in the REPL (model_cmd.h). */
#include "repl/model_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/session/chat.h"

/* "NAME (PATH): ARCH, N.NM parameters[, file QUANT]" of the session's model. */
static void describe_model(cmd_env *e)
{
    const model *m = e->s->model;
    cmd_out(e, "%s (%s): %s, %.1fM parameters%s%s", e->model_name, e->model_dir,
            m->config.arch->name, (double)m->n_params / 1e6, m->quantization[0] ? ", file " : "",
            m->quantization);
}

int model_cmd_exec(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    (void)c;
    session *s = e->s;
    if (argc == 0) {
        cmd_out(e, "model ");
        describe_model(e);
        cmd_out(e, "; /model NAME[:TAG]|PATH opens another (a model directory, a GGUF file or a "
                "model Ollama pulled; tokentop list shows them)");
        return CMD_DONE;
    }
    if (!e->host || !e->host->load_model)
        return cmd_fail(e, "/model: opening another model is not available here (start with "
                        "--model %s)", argv[0]);
    if (s->gen)   /* step mode keeps a generation open; it ends here like for other edits */
        session_gen_end(s, SESSION_STOP_INTERRUPTED, NULL, NULL);
    char was[256];
    snprintf(was, sizeof was, "%s", e->model_name);   /* the old model's name goes with it */
    int n = s->n_tokens;
    char *ref = cmd_expand_home(argv[0]);
    if (!ref)
        return cmd_fail(e, "/model: out of memory");
    char notes[2048] = "";
    tt_error err = {0};
    e->out_len = 0;
    tt_status st = e->host->load_model(e->host->user, ref, notes, sizeof notes, &err);
    free(ref);
    if (st != TT_OK)
        return cmd_fail(e, "/model: %s (kept %s)", err.msg, was);
    /* What the modules said (cmd_env_model_changed) comes after the summary. */
    char *said = e->out_len ? strdup(e->out) : NULL;
    e->out_len = 0;
    cmd_out(e, "model ");
    describe_model(e);
    cmd_out(e, "; engine %s; chat %s", e->engine_desc,
            s->chat.spec.format == CHAT_RAW ? "off (plain continuation)"
                                            : chat_format_name(s->chat.spec.format));
    if (n > 0)
        cmd_out(e, "\nthe conversation (%d tokens of %s's vocabulary) is cleared; the sampler "
                "settings stay", n, was);
    size_t k = strlen(notes);
    if (k > 0 && notes[k - 1] == '\n')
        notes[k - 1] = 0;   /* no newline at the end of a message */
    if (notes[0])
        cmd_out(e, "\n%s", notes);
    if (said)
        cmd_out(e, "\n%s", said);
    free(said);
    return CMD_CONV | CMD_CLEAR | CMD_STATUS | CMD_PEEK;
}

/* ---------------------------------------------------------------------------------------------
 * The command this module registers (cmd_env_add_module) */

static const cmd_entry model_rows[] = {
    {.name = "model", .alias = NULL, .args = "[NAME[:TAG]|PATH]",
     .usage = "open another model (a directory, a GGUF file or an Ollama name, as --model) on "
              "the same backend; the conversation is cleared",
     .min_args = 0, .max_args = 1, .busy_ok = false, .param = NULL,
     .exec = model_cmd_exec, .group = CMD_GROUP_SESSION},
};

const cmd_module model_cmd_module = {
    .name = "model",
    .rows = model_rows,
    .n_rows = (int)(sizeof model_rows / sizeof model_rows[0]),
    .show = NULL,
    .env_free = NULL,
    .state_create = NULL,
    .state_free = NULL,
    .model_changed = NULL,
};
