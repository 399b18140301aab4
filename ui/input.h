/* input.h: the input line: a UTF-8 line editor (cursor moves by character, word and line kills)
 * with Ollama-style multi-line entry between triple quotes, and its pane. Key codes are mapped
 * to these operations by the REPL. */
#ifndef TOKENTOP_UI_INPUT_H
#define TOKENTOP_UI_INPUT_H

#include <stdbool.h>
#include <stddef.h>

#include "ui/grid.h"

typedef struct {
    char *line;          /* (len) the line being edited; may hold '\n' when recalled from history */
    size_t len, cap;
    size_t cur;          /* byte offset of the cursor, on a character boundary */
    char *block;         /* (blen) the lines entered so far inside """ ... """, '\n'-joined */
    size_t blen, bcap;
    bool multiline;      /* between the opening and the closing """ */
    int block_lines;     /* lines in block */
    bool block_fresh;    /* """ alone opened the block: the next line is its first (no '\n') */
} ui_input;

void ui_input_init(ui_input *in);
void ui_input_free(ui_input *in);   /* NULL is safe */

/* Replaces the line (the cursor goes to its end). Returns false when out of memory. */
bool ui_input_set(ui_input *in, const char *text);
/* Inserts UTF-8 bytes at the cursor. */
bool ui_input_insert(ui_input *in, const char *s, size_t n);

void ui_input_left(ui_input *in);
void ui_input_right(ui_input *in);
void ui_input_home(ui_input *in);          /* Ctrl-A */
void ui_input_end(ui_input *in);           /* Ctrl-E */
void ui_input_backspace(ui_input *in);
void ui_input_delete(ui_input *in);
void ui_input_kill_to_end(ui_input *in);   /* Ctrl-K */
void ui_input_kill_to_start(ui_input *in); /* Ctrl-U */
void ui_input_kill_word(ui_input *in);     /* Ctrl-W: the word before the cursor and the blanks
                                              after it */
/* Drops the line and any multi-line block (Ctrl-C at a non-empty prompt). */
void ui_input_clear(ui_input *in);

/* True when nothing is typed (no line text, no block). */
bool ui_input_empty(const ui_input *in);

/* Enter. A line starting with """ opens a block, a line ending with """ closes it; inside a block
 * Enter adds the line. Returns the text to send (malloc'd; caller frees) when the entry is
 * complete, or NULL when the block goes on (or when out of memory). The line is cleared either
 * way. */
char *ui_input_enter(ui_input *in);

/* Rows the pane wants: the current line plus up to max_rows - 1 lines of an open block. */
int ui_input_height(const ui_input *in, int max_rows);

/* Draws the pane into r with the prompt (">>> " or "... " inside a block); the cursor goes to the
 * grid. placeholder is shown dimmed when the line is empty. Long lines scroll horizontally to keep
 * the cursor visible. */
void ui_input_draw(ui_grid *g, ui_rect r, const ui_input *in, const char *placeholder);

#endif
