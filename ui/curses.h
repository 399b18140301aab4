/* curses.h: the only file that talks to ncurses: starting and restoring the terminal, copying a
 * grid to the screen in one pass, and reading keys as curses-independent codes (so key routing
 * can be tested without a terminal). */
#ifndef TOKENTOP_UI_CURSES_H
#define TOKENTOP_UI_CURSES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ui/grid.h"

typedef enum {
    UI_KEY_NONE = 0,      /* nothing within the timeout (or the read was interrupted) */
    UI_KEY_CHAR,          /* a printable character: cp */
    UI_KEY_CTRL,          /* Ctrl + letter: cp is the letter ('a' .. 'z'), Ctrl-C is 'c' */
    UI_KEY_ENTER,
    UI_KEY_TAB,
    UI_KEY_ESC,
    UI_KEY_BACKSPACE,
    UI_KEY_DELETE,
    UI_KEY_LEFT,
    UI_KEY_RIGHT,
    UI_KEY_UP,
    UI_KEY_DOWN,
    UI_KEY_HOME,
    UI_KEY_END,
    UI_KEY_PAGE_UP,
    UI_KEY_PAGE_DOWN,
    UI_KEY_RESIZE,        /* the terminal changed size */
    UI_KEY_PASTE_BEGIN,   /* bracketed paste: Enter inserts a newline until PASTE_END */
    UI_KEY_PASTE_END,
    UI_KEY_OTHER,         /* a key tokentop does not use */
    UI_KEY_HANGUP,        /* the terminal is gone (its input hung up): nothing more will come */
} ui_key_type;

typedef struct {
    ui_key_type type;
    uint32_t cp;
} ui_key;

/* Saves the terminal state, starts curses (cbreak mode: Ctrl-C stays SIGINT; no echo, keypad, bracketed paste, colors
 * when the terminal has them). Returns false with a message in why when the terminal cannot be
 * driven (the terminal is left as it was). */
bool ui_curses_start(char *why, size_t cap);

/* Restores the terminal (endwin, paste mode off). Safe to call when not started or twice. */
void ui_curses_stop(void);

bool ui_curses_active(void);

/* Repaints the whole screen at the next present (Ctrl-L). */
void ui_curses_force_redraw(void);

/* The screen size as curses knows it (after a resize key). */
void ui_curses_size(int *rows, int *cols);

/* Copies the grid to the screen and places the cursor. */
void ui_curses_present(const ui_grid *g);

/* Waits up to timeout_ms for a key (0 polls, < 0 waits). */
ui_key ui_curses_read_key(int timeout_ms);

/* For fatal-signal handlers only: restores the saved terminal modes and writes the precomputed
 * sequences that leave the alternate screen, reset attributes and show the cursor. Uses only
 * async-signal-safe calls (tcsetattr, write). */
void ui_curses_emergency_restore(void);

#endif
