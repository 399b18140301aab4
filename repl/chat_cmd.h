/* chat_cmd.h: /chat (the chat format: a name, off, on) and /system (the system message). The
 * rows are at the end of commands.c's table. */
#ifndef TOKENTOP_CHAT_CMD_H
#define TOKENTOP_CHAT_CMD_H

#include "repl/commands.h"

/* /chat [NAME|off|on]: no argument shows the format in use and the model's own. */
int chat_cmd_exec(cmd_env *e, const cmd_entry *c, int argc, char **argv);

/* /system [TEXT|off]: no argument shows the system message. */
int chat_cmd_exec_system(cmd_env *e, const cmd_entry *c, int argc, char **argv);

#endif
