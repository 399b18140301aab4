/* repl_host.h: what the REPL lends its commands (cmd_host, repl/commands.h): a draft model
 * (/draft, --draft), engines at another precision (/dtype) and another model (/model), made with
 * the command line's options over the model, tokenizer and engine the REPL owns (a cli_app). */
#ifndef TOKENTOP_REPL_HOST_H
#define TOKENTOP_REPL_HOST_H

#include <stdbool.h>
#include <stddef.h>

#include "app/cli.h"
#include "app/draft.h"
#include "core/session/session.h"
#include "repl/commands.h"

typedef struct repl_host {
    cli_app *app;              /* the target, not owned: /model replaces what it holds, in place
                                  (the session's device fall-back and the front end point at it) */
    const cli_options *o;      /* the command line, not owned */
    session *s;                /* not owned */
    cmd_env *env;              /* not owned; its host is services */
    draft_app draft;           /* the attached draft, owned; empty when none */
    bool dtype_chosen;         /* --dtype or /dtype chose the precision: /model keeps it */
    cmd_host services;
} repl_host;

/* Prepares h over the REPL's app, options, session and environment, and lends it to env
 * (env->host = &h->services). h must stay where it is while env uses it. */
void repl_host_init(repl_host *h, cli_app *app, const cli_options *o, session *s, cmd_env *env);

/* Loads dir as the draft (checked against the target: draft_load), replaces the previous one
 * and turns speculative decoding on; on failure the previous draft stays and err says why. */
tt_status repl_host_load_draft(repl_host *h, const char *dir, tt_error *err);

/* Opens ref (a model directory, a GGUF file or an Ollama NAME[:TAG], as --model) on the backend
 * the session runs on, at the precision --dtype or /dtype chose (else the file's), and moves the
 * session onto it (session_set_model: the conversation is cleared), with the new model's chat
 * format (--chat-template off stays off). The draft is loaded again against the new model, or
 * detached when it no longer fits (said in notes). The environment hears of it
 * (cmd_env_model_changed) before the old model is freed. Warnings go to notes (one line each,
 * ending in a newline; notes_cap bytes). On failure nothing changed: err names what was tried
 * and why. */
tt_status repl_host_load_model(repl_host *h, const char *ref, char *notes, size_t notes_cap,
                               tt_error *err);

/* Frees the draft (the app, session and environment are the caller's). */
void repl_host_free(repl_host *h);

#endif
