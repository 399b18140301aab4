/* history.h: the input history: Up/Down browsing, persisted one entry per line to a file under
 * the XDG state directory ($XDG_STATE_HOME/tokentop/history, ~/.local/state/tokentop/history). */
#ifndef TOKENTOP_HISTORY_H
#define TOKENTOP_HISTORY_H

#include <stdbool.h>

#include "core/base/status.h"

#define HISTORY_MAX 1000

typedef struct {
    char **items;        /* (n) oldest first; owned */
    int n;
    size_t cap;
    int max;             /* entries kept */
    char *path;          /* the file, or NULL to keep the history in memory only */
    int pos;             /* browsing position: n means the line being typed */
    char *draft;         /* that line, saved while browsing */
} history;

/* path NULL: memory only. The path is copied. */
void history_init(history *h, const char *path, int max);
void history_free(history *h);   /* NULL is safe */

/* Reads the file (a missing file is an empty history). Entries beyond max are dropped, oldest
 * first, and the file is rewritten without them. On failure the history stays empty. */
tt_status history_load(history *h, tt_error *err);

/* Appends an entry (not when empty or equal to the previous one) and appends it to the file,
 * creating the directory. Returns the file error, if any; the entry is kept in memory anyway.
 * Browsing restarts at the end. */
tt_status history_add(history *h, const char *line, tt_error *err);

/* Up: the previous entry (current is the line being typed, saved when browsing starts), or NULL
 * at the oldest entry. */
const char *history_prev(history *h, const char *current);
/* Down: the next entry, the saved line when back at the end, or NULL when already there. */
const char *history_next(history *h);

/* The default file: $TOKENTOP_HISTORY when set (empty: no file), else
 * $XDG_STATE_HOME/tokentop/history, else $HOME/.local/state/tokentop/history; NULL when none
 * applies. malloc'd. */
char *history_default_path(void);

/* File encoding of one entry: backslash as \\ and newline as \n (exposed for tests). */
char *history_escape(const char *s);
char *history_unescape(const char *s);

#endif
