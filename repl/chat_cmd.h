/* chat_cmd.h: /chat (the chat format: a name, off, on) and /system (the system message), a
 * command module the REPL registers (cmd_env_add_module). */
#ifndef TOKENTOP_CHAT_CMD_H
#define TOKENTOP_CHAT_CMD_H

#include "repl/commands.h"

/* The /chat and /system rows; the REPL adds this module to its environment with
 * cmd_env_add_module. */
extern const cmd_module chat_cmd_module;

/* /chat [NAME|off|on]: no argument shows the format in use and the model's own. */
int chat_cmd_exec(cmd_env *e, const cmd_entry *c, int argc, char **argv);

/* /system [TEXT|off]: no argument shows the system message. */
int chat_cmd_exec_system(cmd_env *e, const cmd_entry *c, int argc, char **argv);

#endif
