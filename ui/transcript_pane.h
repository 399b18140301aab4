/* transcript_pane.h: the transcript pane: a document of styled characters (the conversation and the
 * notices between its turns), word-wrapped to the pane width and drawn from the bottom up, with
 * scrolling. The REPL keeps the document (repl/transcript_doc.c builds it from the session);
 * this file only lays it out and draws it. */
#ifndef TOKENTOP_UI_TRANSCRIPT_PANE_H
#define TOKENTOP_UI_TRANSCRIPT_PANE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ui/grid.h"

typedef struct {
    uint32_t cp;        /* '\n' ends a paragraph; '\t' advances to the next multiple of 4 */
    uint8_t width;      /* ui_char_width(cp) (tabs: 1, resolved at layout) */
    uint8_t style;      /* ui_style */
    uint8_t attr;       /* UI_ATTR_* */
} ui_doc_char;

/* A growable document; the caller owns it (ui_doc_init / ui_doc_free). */
typedef struct {
    ui_doc_char *chars;     /* (n) */
    size_t n, cap;
} ui_doc;

void ui_doc_init(ui_doc *d);
void ui_doc_free(ui_doc *d);      /* NULL is safe */
void ui_doc_clear(ui_doc *d);
/* Drops everything from character n on. */
void ui_doc_truncate(ui_doc *d, size_t n);

/* Appends UTF-8 text (invalid bytes become U+FFFD). Returns false when out of memory (the
 * document then holds a prefix of the text). */
bool ui_doc_append(ui_doc *d, const char *s, size_t n, uint8_t style, uint8_t attr);
bool ui_doc_append_cp(ui_doc *d, uint32_t cp, uint8_t style, uint8_t attr);

/* True when the document is empty or its last character is a newline. */
bool ui_doc_at_line_start(const ui_doc *d);

/* Scroll state: lines above the bottom. ui_transcript_pane_draw clamps it to what exists. */
typedef struct {
    int scroll;             /* in/out: 0 shows the end of the document */
    size_t anchor;          /* in: while scroll > 0, the document length the view counts from
                               (0: the current end), so text arriving meanwhile does not move
                               what the reader is looking at */
    bool open_top;          /* in: open the view at character top_at when the text from there to
                               the end is taller than the view (a long command answer opens at
                               its top); the draw clears it */
    size_t top_at;
    bool more_above;        /* out: lines exist above the view */
    int lines_below;        /* out: == scroll after clamping */
} ui_scroll;

/* Draws the document into r, word-wrapped at r.w columns (breaking after spaces; words longer
 * than a line are cut; a wide character never straddles the edge). When caret is set, a block
 * caret is drawn after the last character (the model is writing). Only the paragraphs needed for
 * the view are laid out. */
void ui_transcript_pane_draw(ui_grid *g, ui_rect r, const ui_doc *d, ui_scroll *sc, bool caret);

/* Splits the paragraph chars[0..n) (no '\n' inside) into lines of at most w columns, calling
 * fn(user, start, end) for each line in order (end exclusive; a break at a space skips that
 * space). An empty paragraph is one empty line. Exposed for tests. */
void ui_transcript_pane_wrap(const ui_doc_char *chars, size_t n, int w,
                        void (*fn)(void *user, size_t start, size_t end), void *user);
/* The same with lines after the first hang columns narrower (they are drawn indented by hang). */
void ui_transcript_pane_wrap_hanging(const ui_doc_char *chars, size_t n, int w, int hang,
                                     void (*fn)(void *user, size_t start, size_t end), void *user);
/* The hanging indent of a paragraph: for a notice line that starts with two spaces (a list such as
 * /help's), the column after its first gap of two or more spaces that follows text (or its leading
 * spaces when there is no gap); 0 for anything else, or when that column is past half of w. */
int ui_transcript_pane_hang(const ui_doc_char *chars, size_t n, int w);

#endif
