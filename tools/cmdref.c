/* cmdref.c: prints the slash-command reference from the command table (repl/commands.c and the
 * modules the REPL registers), as Markdown for docs/repl.md or as roff for doc/tokentop.1.
 * tools/docs_sync.sh puts it in place (make docs) and checks it is there (tests/e2e/docs.sh). */
#include <stdio.h>
#include <string.h>

#include "repl/attn_cmd.h"
#include "repl/commands.h"
#include "repl/chat_cmd.h"
#include "repl/compare.h"
#include "repl/dtype_cmd.h"
#include "repl/model_cmd.h"
#include "repl/lens_cmd.h"

#define ROWS_MAX 128

static void md_cell(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", f);
        else
            fputc(*s, f);
    }
}

static void roff_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\e", f);
        else if (*s == '-')
            fputs("\\-", f);
        else
            fputc(*s, f);
    }
}

int main(int argc, char **argv)
{
    const char *fmt = argc == 2 ? argv[1] : "";
    if (strcmp(fmt, "markdown") != 0 && strcmp(fmt, "man") != 0) {
        fprintf(stderr, "usage: cmdref markdown|man\n");
        return 2;
    }
    cmd_env e;
    cmd_env_init(&e, NULL);
    cmd_env_add_module(&e, &compare_cmd_module);
    cmd_env_add_module(&e, &dtype_cmd_module);
    cmd_env_add_module(&e, &chat_cmd_module);
    cmd_env_add_module(&e, &model_cmd_module);
    cmd_env_add_module(&e, &lens_cmd_module);
    cmd_env_add_module(&e, &attn_cmd_module);
    const cmd_entry *rows[ROWS_MAX];
    int n = cmd_env_list(&e, rows, ROWS_MAX);
    if (n > ROWS_MAX) {
        fprintf(stderr, "cmdref: %d commands, more than %d\n", n, ROWS_MAX);
        return 1;
    }
    int group = -1;
    for (int i = 0; i < n; i++) {
        const cmd_entry *c = rows[i];
        const char *heading = *cmd_group_name(c->group) ? cmd_group_name(c->group) : "other";
        if (strcmp(fmt, "markdown") == 0) {
            if ((int)c->group != group)
                fprintf(stdout, "%s#### %s\n\n| command | what it does |\n|---|---|\n",
                        group < 0 ? "" : "\n", heading);
            fputs("| `/", stdout);
            md_cell(stdout, c->name);
            if (*c->args) {
                fputc(' ', stdout);
                md_cell(stdout, c->args);
            }
            fputs("` | ", stdout);
            md_cell(stdout, c->usage);
            if (c->alias)
                fprintf(stdout, " (also `/%s`)", c->alias);
            fputs(" |\n", stdout);
        } else {
            if ((int)c->group != group)
                fprintf(stdout, ".SS %s\n", heading);
            fputs(".TP\n.B \"/", stdout);
            roff_text(stdout, c->name);
            if (*c->args) {
                fputc(' ', stdout);
                roff_text(stdout, c->args);
            }
            fputs("\"\n", stdout);
            roff_text(stdout, c->usage);
            if (c->alias)
                fprintf(stdout, " (also /%s)", c->alias);
            fputs(".\n", stdout);
        }
        group = (int)c->group;
    }
    cmd_env_free(&e);
    return 0;
}
