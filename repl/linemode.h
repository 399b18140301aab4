/* linemode.h: the REPL without a terminal UI (stdin or stdout not a terminal, or TERM=dumb):
 * prompts from stdin, generated text to stdout, slash-commands still work. */
#ifndef TOKENTOP_LINEMODE_H
#define TOKENTOP_LINEMODE_H

#include <signal.h>
#include <stdio.h>

#include "repl/commands.h"
#include "core/session/session.h"

/* Reads lines from in until end of file or /quit. Text lines (and """ blocks) become turns whose
 * generated text goes to out, followed by one newline; command messages, stop notes and errors
 * go to msg. first, when not NULL, is sent as the first prompt. interrupt is the session's Ctrl-C
 * flag; quit is set by SIGTERM/SIGHUP. Returns 0, or 1 when a generation failed. */
int linemode_run(session *s, cmd_env *env, const char *first, FILE *in, FILE *out, FILE *msg,
                 volatile sig_atomic_t *interrupt, volatile sig_atomic_t *quit);

#endif
