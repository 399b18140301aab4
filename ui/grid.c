/* grid.c: the in-memory cell grid: wide-character aware drawing and read-back as text. */
#include "ui/grid.h"

#include <langinfo.h>
#include <locale.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "core/base/text.h"

/* ---------------------------------------------------------------------------------------------
 * Character widths */

typedef struct {
    uint32_t lo, hi;
} cp_range;

/* East Asian Wide and Fullwidth blocks, plus the emoji blocks terminals draw two cells wide. */
static const cp_range wide_ranges[] = {
    {0x1100, 0x115f}, {0x231a, 0x231b}, {0x2329, 0x232a}, {0x23e9, 0x23ec}, {0x23f0, 0x23f0},
    {0x23f3, 0x23f3}, {0x25fd, 0x25fe}, {0x2614, 0x2615}, {0x2648, 0x2653}, {0x267f, 0x267f},
    {0x2693, 0x2693}, {0x26a1, 0x26a1}, {0x26aa, 0x26ab}, {0x26bd, 0x26be}, {0x26c4, 0x26c5},
    {0x26ce, 0x26ce}, {0x26d4, 0x26d4}, {0x26ea, 0x26ea}, {0x26f2, 0x26f3}, {0x26f5, 0x26f5},
    {0x26fa, 0x26fa}, {0x26fd, 0x26fd}, {0x2705, 0x2705}, {0x270a, 0x270b}, {0x2728, 0x2728},
    {0x274c, 0x274c}, {0x274e, 0x274e}, {0x2753, 0x2755}, {0x2757, 0x2757}, {0x2795, 0x2797},
    {0x27b0, 0x27b0}, {0x27bf, 0x27bf}, {0x2b1b, 0x2b1c}, {0x2b50, 0x2b50}, {0x2b55, 0x2b55},
    {0x2e80, 0x303e}, {0x3041, 0x33ff}, {0x3400, 0x4dbf}, {0x4e00, 0x9fff}, {0xa000, 0xa4cf},
    {0xa960, 0xa97f}, {0xac00, 0xd7a3}, {0xf900, 0xfaff}, {0xfe10, 0xfe19}, {0xfe30, 0xfe6f},
    {0xff00, 0xff60}, {0xffe0, 0xffe6}, {0x16fe0, 0x16fe4}, {0x17000, 0x18cff},
    {0x1b000, 0x1b2ff}, {0x1f004, 0x1f004}, {0x1f0cf, 0x1f0cf}, {0x1f18e, 0x1f18e},
    {0x1f191, 0x1f19a}, {0x1f200, 0x1f251}, {0x1f300, 0x1f64f}, {0x1f680, 0x1f6ff},
    {0x1f7e0, 0x1f7eb}, {0x1f90c, 0x1f9ff}, {0x1fa70, 0x1faff}, {0x20000, 0x3fffd},
};

/* Combining marks and other zero-width characters (the common blocks). */
static const cp_range zero_ranges[] = {
    {0x0300, 0x036f}, {0x0483, 0x0489}, {0x0591, 0x05bd}, {0x0610, 0x061a}, {0x064b, 0x065f},
    {0x0900, 0x0902}, {0x093a, 0x093a}, {0x093c, 0x093c}, {0x0941, 0x0948}, {0x094d, 0x094d},
    {0x0e31, 0x0e31}, {0x0e34, 0x0e3a}, {0x0e47, 0x0e4e}, {0x1ab0, 0x1aff}, {0x1dc0, 0x1dff},
    {0x200b, 0x200f}, {0x20d0, 0x20ff}, {0xfe00, 0xfe0f}, {0xfe20, 0xfe2f}, {0xe0100, 0xe01ef},
};

static bool in_ranges(uint32_t cp, const cp_range *r, size_t n)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid].lo)
            hi = mid;
        else if (cp > r[mid].hi)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

static int locale_is_utf8(void)
{
    static int cached = -1;
    static char cached_locale[64];
    const char *cur = setlocale(LC_CTYPE, NULL);
    if (cached < 0 || !cur || strncmp(cur, cached_locale, sizeof cached_locale - 1) != 0) {
        const char *cs = nl_langinfo(CODESET);
        cached = cs && (strcmp(cs, "UTF-8") == 0 || strcmp(cs, "utf8") == 0);
        snprintf(cached_locale, sizeof cached_locale, "%s", cur ? cur : "");
    }
    return cached;
}

int ui_char_width(uint32_t cp)
{
    if (cp < 0x7f)
        return 1;
    if (locale_is_utf8()) {
        int w = wcwidth((wchar_t)cp);
        if (w >= 0)
            return w > 2 ? 2 : w;
        return 1;
    }
    if (in_ranges(cp, zero_ranges, sizeof zero_ranges / sizeof zero_ranges[0]))
        return 0;
    if (in_ranges(cp, wide_ranges, sizeof wide_ranges / sizeof wide_ranges[0]))
        return 2;
    return 1;
}

/* Next code point of s[0..n): returns bytes consumed (>= 1); invalid bytes give U+FFFD. */
static int next_cp(const char *s, size_t n, uint32_t *cp)
{
    int len = text_utf8_decode((const unsigned char *)s, n, cp);
    if (len == 0) {
        *cp = 0xfffd;
        return 1;
    }
    return len;
}

int ui_text_width(const char *s, size_t n)
{
    int w = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += (size_t)next_cp(s + i, n - i, &cp);
        w += ui_char_width(cp);
    }
    return w;
}

char ui_ascii_fallback(uint32_t cp)
{
    static const struct {
        uint32_t cp;
        char c;
    } map[] = {
        {0x00a0, ' '}, {0x00b7, '.'}, {0x03b3, 'g'}, {0x2026, '~'}, {0x2192, '>'}, {0x2193, 'v'},
        {0x2212, '-'}, {0x2265, '>'}, {0x23ce, '<'}, {0x2423, '_'}, {0x2500, '-'}, {0x2502, '|'},
        {0x2588, '#'}, {0x2589, '#'}, {0x258a, '#'}, {0x258b, '#'}, {0x258c, '#'}, {0x258d, '+'},
        {0x258e, '+'}, {0x258f, '|'}, {0x2591, '.'}, {0x2592, ':'}, {0x2593, '%'}, {0x2595, '|'},
        {0x25b2, '^'}, {0x25b6, '>'}, {0x25bc, 'v'}, {0x2713, '+'}, {0x2717, 'x'},
    };
    if (cp >= 0x20 && cp < 0x7f)
        return (char)cp;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].cp == cp)
            return map[i].c;
    return '?';
}

/* ---------------------------------------------------------------------------------------------
 * Lifetime */

static const ui_cell blank = {.cp = ' ', .width = 1};

bool ui_grid_init(ui_grid *g, int rows, int cols)
{
    memset(g, 0, sizeof *g);
    return ui_grid_resize(g, rows, cols);
}

bool ui_grid_resize(ui_grid *g, int rows, int cols)
{
    if (rows < 0)
        rows = 0;
    if (cols < 0)
        cols = 0;
    size_t n = (size_t)rows * (size_t)cols;
    ui_cell *c = n ? malloc(n * sizeof *c) : NULL;
    if (n && !c) {
        free(g->cells);
        memset(g, 0, sizeof *g);
        return false;
    }
    free(g->cells);
    g->cells = c;
    g->rows = rows;
    g->cols = cols;
    ui_grid_clear(g);
    return true;
}

void ui_grid_free(ui_grid *g)
{
    if (!g)
        return;
    free(g->cells);
    memset(g, 0, sizeof *g);
}

void ui_grid_clear(ui_grid *g)
{
    size_t n = (size_t)g->rows * (size_t)g->cols;
    for (size_t i = 0; i < n; i++)
        g->cells[i] = blank;
    g->cursor_visible = false;
    g->cursor_y = g->cursor_x = 0;
}

/* ---------------------------------------------------------------------------------------------
 * Drawing */

const ui_cell *ui_grid_cell(const ui_grid *g, int y, int x)
{
    if (y < 0 || y >= g->rows || x < 0 || x >= g->cols)
        return NULL;
    return &g->cells[(size_t)y * (size_t)g->cols + (size_t)x];
}

static ui_cell *cell_at(ui_grid *g, int y, int x)
{
    return (ui_cell *)ui_grid_cell(g, y, x);
}

/* Blanks the other half of a wide character that covers (y, x), keeping its style. */
static void break_wide(ui_grid *g, int y, int x)
{
    ui_cell *c = cell_at(g, y, x);
    if (!c)
        return;
    if (c->width == 0) {
        ui_cell *left = cell_at(g, y, x - 1);
        if (left && left->width == 2) {
            left->cp = ' ';
            left->width = 1;
            left->mark = 0;
        }
    } else if (c->width == 2) {
        ui_cell *right = cell_at(g, y, x + 1);
        if (right && right->width == 0) {
            right->cp = ' ';
            right->width = 1;
            right->mark = 0;
        }
    }
}

/* Whether a terminal draws cp as one character of the width ui_char_width gives: control
 * characters (C0, DEL, C1), surrogates and code points wcwidth does not know would be drawn as
 * ^X, moved over or left out, shifting what follows (a pane border, the legend). */
static bool drawable(uint32_t cp)
{
    if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0) || (cp >= 0xd800 && cp < 0xe000) || cp > 0x10ffff)
        return false;
    return cp < 0x7f || !locale_is_utf8() || wcwidth((wchar_t)cp) >= 0;
}

void ui_grid_set(ui_grid *g, int y, int x, uint32_t cp, int w, uint8_t style, uint8_t attr)
{
    ui_cell *c = cell_at(g, y, x);
    if (!c)
        return;
    if (!drawable(cp)) {
        cp = 0xfffd;   /* the replacement character, one column, where the grid counted one */
        w = 1;
    }
    if (w == 2 && x + 1 >= g->cols) {
        cp = ' ';   /* half a wide character cannot be shown */
        w = 1;
    }
    break_wide(g, y, x);
    *c = (ui_cell){.cp = cp, .width = (uint8_t)(w == 2 ? 2 : 1), .style = style, .attr = attr};
    if (w == 2) {
        break_wide(g, y, x + 1);
        ui_cell *r = cell_at(g, y, x + 1);
        *r = (ui_cell){.cp = 0, .width = 0, .style = style, .attr = attr};
    }
}

void ui_grid_fill(ui_grid *g, int y, int x0, int x1, uint32_t cp, uint8_t style, uint8_t attr)
{
    if (x0 < 0)
        x0 = 0;
    if (x1 > g->cols)
        x1 = g->cols;
    for (int x = x0; x < x1; x++)
        ui_grid_set(g, y, x, cp, 1, style, attr);
}

void ui_grid_fill_rect(ui_grid *g, ui_rect r, uint8_t style)
{
    for (int y = r.y; y < r.y + r.h; y++)
        ui_grid_fill(g, y, r.x, r.x + r.w, ' ', style, 0);
}

int ui_grid_put(ui_grid *g, int y, int x, int x_end, const char *s, size_t n, uint8_t style,
                uint8_t attr)
{
    if (x_end > g->cols)
        x_end = g->cols;
    for (size_t i = 0; i < n && x < x_end;) {
        uint32_t cp;
        i += (size_t)next_cp(s + i, n - i, &cp);
        int w = ui_char_width(cp);
        if (w == 0) {
            ui_cell *prev = cell_at(g, y, x - 1);
            if (prev && prev->width == 0)
                prev = cell_at(g, y, x - 2);
            if (prev && !prev->mark)
                prev->mark = cp;
            continue;
        }
        if (x + w > x_end) {
            ui_grid_fill(g, y, x, x_end, ' ', style, attr);
            return x_end;
        }
        ui_grid_set(g, y, x, cp, w, style, attr);
        x += w;
    }
    return x;
}

int ui_grid_puts(ui_grid *g, int y, int x, int x_end, const char *s, uint8_t style, uint8_t attr)
{
    return ui_grid_put(g, y, x, x_end, s, strlen(s), style, attr);
}

int ui_grid_printf(ui_grid *g, int y, int x, int x_end, uint8_t style, uint8_t attr,
                   const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0)
        return x;
    if ((size_t)n >= sizeof buf)
        n = sizeof buf - 1;
    return ui_grid_put(g, y, x, x_end, buf, (size_t)n, style, attr);
}

/* ---------------------------------------------------------------------------------------------
 * Read-back */

size_t ui_grid_row_text(const ui_grid *g, int y, char *out, size_t cap)
{
    if (cap == 0)
        return 0;
    size_t o = 0, keep = 0;
    for (int x = 0; x < g->cols && y >= 0 && y < g->rows; x++) {
        const ui_cell *c = ui_grid_cell(g, y, x);
        if (c->width == 0)
            continue;
        char enc[8];
        int len = text_utf8_encode(c->cp, enc);
        if (c->mark)
            len += text_utf8_encode(c->mark, enc + len);
        if (o + (size_t)len >= cap)
            break;
        memcpy(out + o, enc, (size_t)len);
        o += (size_t)len;
        if (c->cp != ' ' || c->mark)
            keep = o;
    }
    out[keep] = 0;
    return keep;
}

char *ui_grid_text(const ui_grid *g)
{
    size_t cap = (size_t)g->rows * ((size_t)g->cols * 8 + 1) + 1;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    size_t o = 0;
    for (int y = 0; y < g->rows; y++) {
        o += ui_grid_row_text(g, y, out + o, cap - o);
        out[o++] = '\n';
    }
    out[o] = 0;
    return out;
}
