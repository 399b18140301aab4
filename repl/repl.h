/* repl.h: the interactive REPL, as the command-line program enters it. */
#ifndef TOKENTOP_REPL_H
#define TOKENTOP_REPL_H

/* Runs the REPL with the command line's options (argv as main gets it, without a subcommand): the
 * full-screen terminal UI, or line mode when standard input or output is not a terminal. Returns
 * the process exit status. */
int repl_main(int argc, char **argv);

#endif
