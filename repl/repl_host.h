/* repl_host.h: what the REPL lends its commands (cmd_host, repl/commands.h): a draft model
 * (/draft, --draft) and engines at another precision (/dtype), made with the command line's
 * options over the model, tokenizer and engine the REPL owns (a cli_app). */
#ifndef TOKENTOP_REPL_HOST_H
#define TOKENTOP_REPL_HOST_H

#include <stdbool.h>
#include <stddef.h>

#include "app/cli.h"
#include "app/draft.h"
#include "core/session/session.h"
#include "repl/commands.h"

typedef struct repl_host {
    cli_app *app;              /* the target, not owned */
    const cli_options *o;      /* the command line, not owned */
    session *s;                /* not owned */
    cmd_env *env;              /* not owned; its host is services */
    draft_app draft;           /* the attached draft, owned; empty when none */
    cmd_host services;
} repl_host;

/* Prepares h over the REPL's app, options, session and environment, and lends it to env
 * (env->host = &h->services). h must stay where it is while env uses it. */
void repl_host_init(repl_host *h, cli_app *app, const cli_options *o, session *s, cmd_env *env);

/* Loads dir as the draft (checked against the target: draft_load), replaces the previous one
 * and turns speculative decoding on; on failure the previous draft stays and err says why. */
tt_status repl_host_load_draft(repl_host *h, const char *dir, tt_error *err);

/* Frees the draft (the app, session and environment are the caller's). */
void repl_host_free(repl_host *h);

#endif
