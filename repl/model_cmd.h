/* model_cmd.h: /model NAME[:TAG]|PATH: opening another model in the REPL (a model directory, a
 * GGUF file or a model Ollama pulled, as --model takes them), through the front end's
 * cmd_host.load_model; a command module the REPL registers (cmd_env_add_module). */
#ifndef TOKENTOP_MODEL_CMD_H
#define TOKENTOP_MODEL_CMD_H

#include "repl/commands.h"

/* The /model row; the REPL adds this module to its environment with cmd_env_add_module. */
extern const cmd_module model_cmd_module;

/* /model [NAME[:TAG]|PATH]: no argument shows the model in use. On success the session runs on
 * the new model with its tokenizer, chat format and an engine on the same backend; the
 * conversation is cleared (its tokens belong to the old vocabulary), which the message says.
 * A name, path or file that cannot be opened is refused in one line naming what was tried, and
 * the session keeps its model. */
int model_cmd_exec(cmd_env *e, const cmd_entry *c, int argc, char **argv);

#endif
