/* grid.h: the in-memory screen: a grid of styled cells that every pane draws into. Wide
 * characters (CJK, most emoji) take two cells; tests read the grid back as text, and ui/curses.c
 * copies it to the terminal in one pass. */
#ifndef TOKENTOP_UI_GRID_H
#define TOKENTOP_UI_GRID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Semantic styles: panes say what a cell is, ui/curses.c decides how that looks (colors when the
 * terminal has them, attributes otherwise). */
typedef enum {
    UI_STYLE_NORMAL = 0,
    UI_STYLE_USER,          /* text the user typed */
    UI_STYLE_P_HIGH,        /* generated token, final p >= 0.8 */
    UI_STYLE_P_MID,         /* 0.5 <= p < 0.8 */
    UI_STYLE_P_LOW,         /* 0.2 <= p < 0.5 */
    UI_STYLE_P_VLOW,        /* 0.05 <= p < 0.2 */
    UI_STYLE_P_RARE,        /* p < 0.05 */
    UI_STYLE_SPECIAL,       /* <|endoftext|> and other control tokens */
    UI_STYLE_NOTICE,        /* messages from commands */
    UI_STYLE_ERROR,
    UI_STYLE_DIM,           /* secondary text: hints, column headers */
    UI_STYLE_TITLE,         /* pane titles */
    UI_STYLE_BORDER,
    UI_STYLE_STATUS,        /* the status bar */
    UI_STYLE_BAR,           /* histogram: final probability */
    UI_STYLE_BAR_RAW,       /* histogram: raw probability beyond the final one */
    UI_STYLE_BAR_CUT,       /* histogram: raw probability of a token the chain removed */
    UI_STYLE_CUT,           /* histogram: the stage that removed a token */
    UI_STYLE_CHOSEN,        /* histogram: the sampled row */
    UI_STYLE_DRAW,          /* histogram: where the uniform draw landed */
    UI_STYLE_PROMPT,        /* the input prompt */
    UI_STYLE_ATTN_HOT,      /* attention view: a token the step attended to most (w >= 0.2) */
    UI_STYLE_ATTN_WARM,     /* 0.08 <= w < 0.2 */
    UI_STYLE_ATTN_MILD,     /* 0.03 <= w < 0.08 */
    UI_STYLE_COUNT
} ui_style;

/* Attribute bits combined with a style (token origins are shown this way, so probability shading
 * and origin marks can coexist). */
enum {
    UI_ATTR_BOLD = 1,
    UI_ATTR_UNDERLINE = 2,
    UI_ATTR_REVERSE = 4,
    UI_ATTR_DIM = 8,
};

typedef struct {
    uint32_t cp;        /* code point; ' ' for blank; 0 in the right half of a wide character */
    uint32_t mark;      /* one combining mark drawn over cp, or 0 */
    uint8_t width;      /* 1, 2 (left half of a wide character) or 0 (its right half) */
    uint8_t style;      /* ui_style */
    uint8_t attr;       /* UI_ATTR_* */
} ui_cell;

typedef struct {
    int rows, cols;
    ui_cell *cells;     /* (rows, cols) */
    int cursor_y, cursor_x;
    bool cursor_visible;
} ui_grid;

typedef struct {
    int y, x, h, w;
} ui_rect;

/* Display width of a code point: 2 for wide characters, 0 for combining marks, 1 otherwise
 * (unprintable ones count 1; panes escape control characters before they get here). Uses
 * wcwidth when the locale is UTF-8 and a built-in table when it is not, so tests do not depend
 * on the environment. */
int ui_char_width(uint32_t cp);

/* Width in cells of UTF-8 text (invalid bytes count as one cell each, drawn as U+FFFD). */
int ui_text_width(const char *s, size_t n);

/* Allocates rows x cols blank cells (0 sizes give an empty grid). Returns false when out of
 * memory, leaving g empty. ui_grid_free(NULL) is safe. */
bool ui_grid_init(ui_grid *g, int rows, int cols);
bool ui_grid_resize(ui_grid *g, int rows, int cols);
void ui_grid_free(ui_grid *g);

/* Blanks every cell (normal style) and hides the cursor. */
void ui_grid_clear(ui_grid *g);

/* Sets the cell at (y, x) to code point cp of width w, clearing the other half of any wide
 * character it overlaps. Out-of-range coordinates are ignored. */
void ui_grid_set(ui_grid *g, int y, int x, uint32_t cp, int w, uint8_t style, uint8_t attr);

/* Fills columns [x0, x1) of row y with cp (width 1). */
void ui_grid_fill(ui_grid *g, int y, int x0, int x1, uint32_t cp, uint8_t style, uint8_t attr);

/* Fills a rectangle with blanks of the given style. */
void ui_grid_fill_rect(ui_grid *g, ui_rect r, uint8_t style);

/* Draws UTF-8 text at (y, x) without passing column x_end; a wide character that would straddle
 * x_end is replaced by a blank. Returns the column after the last cell written. */
int ui_grid_put(ui_grid *g, int y, int x, int x_end, const char *s, size_t n, uint8_t style,
                uint8_t attr);

/* ui_grid_put of a NUL-terminated string. */
int ui_grid_puts(ui_grid *g, int y, int x, int x_end, const char *s, uint8_t style, uint8_t attr);

/* printf-style ui_grid_put of a NUL-terminated result. */
int ui_grid_printf(ui_grid *g, int y, int x, int x_end, uint8_t style, uint8_t attr,
                   const char *fmt, ...) __attribute__((format(printf, 7, 8)));

/* Row y as UTF-8 (wide characters once, trailing blanks dropped), NUL-terminated, truncated to
 * cap. Returns the length. */
size_t ui_grid_row_text(const ui_grid *g, int y, char *out, size_t cap);

/* The whole grid as text, one line per row (malloc'd, caller frees). */
char *ui_grid_text(const ui_grid *g);

/* Cell access with bounds checks (NULL outside). */
const ui_cell *ui_grid_cell(const ui_grid *g, int y, int x);

/* The ASCII character shown for cp on a terminal that cannot show UTF-8 (ui/curses.c uses it when
 * the environment's locale is not UTF-8): cp itself below 0x7f; for the characters the panes
 * draw, a look-alike (bars '#' over '.', '>' for the drawn token, '^' for u, '|' for borders, '_'
 * for a leading space, ...); '?' for any other character. */
char ui_ascii_fallback(uint32_t cp);

#endif
