/* list.h: `tokentop list` (and `tokentop --list-models`): every model tokentop can find, with
 * its architecture, parameter count, quantization and size. */
#ifndef TOKENTOP_LIST_H
#define TOKENTOP_LIST_H

#include <stddef.h>
#include <stdio.h>

/* Writes the table to out: first each model directory under models_dir (the one holding the
 * embedded models; NULL: none), then each model in the Ollama stores stores[0..n). A model that
 * cannot be read is listed with the reason in place of its figures. Returns the number of rows. */
int list_models(FILE *out, const char *models_dir, const char *const *stores, size_t n);

/* argv[0] is "list" (or "--list-models"); no options but --help. Lists the embedded models
 * (beside the default model) and the default Ollama stores' models. Returns the exit status. */
int list_main(int argc, char **argv);

#endif
