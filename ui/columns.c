/* columns.c: continuations side by side or stacked (columns.h). */
#include "ui/columns.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/text.h"
#include "core/base/util.h"

bool ui_columns_layout(ui_rect area, int n, int min_w, ui_rect *out)
{
    if (n <= 0)
        return false;
    for (int i = 0; i < n; i++)
        out[i] = (ui_rect){.y = area.y, .x = area.x, .h = 0, .w = 0};
    if (area.w <= 0 || area.h <= 0)
        return false;
    if (min_w < 1)
        min_w = 1;
    if ((long)n * min_w + (n - 1) <= area.w) {
        int w = (area.w - (n - 1)) / n;
        for (int i = 0; i < n; i++) {
            int x = area.x + i * (w + 1);
            out[i] = (ui_rect){.y = area.y, .x = x, .h = area.h,
                               .w = i == n - 1 ? area.x + area.w - x : w};
        }
        return true;
    }
    int base = area.h / n, extra = area.h % n, y = area.y;
    for (int i = 0; i < n; i++) {
        int h = base + (i < extra);
        out[i] = (ui_rect){.y = y, .x = area.x, .h = h, .w = area.w};
        y += h;
    }
    return false;
}

/* ---------------------------------------------------------------------------------------------
 * Wrapping */

typedef struct {
    size_t from, to;           /* bytes of the line, the break's blank or newline excluded */
} wrap_line;

/* The lines of text at width w into *lines (malloc'd); returns their count (-1: no memory). */
static int wrap(const char *text, int w, wrap_line **lines)
{
    size_t n = strlen(text), cap = 16;
    int count = 0;
    wrap_line *l = malloc(cap * sizeof *l);
    if (!l)
        return -1;
    size_t start = 0, i = 0, last_blank = (size_t)-1;
    int width = 0;
    while (true) {
        bool end = i >= n;
        bool newline = !end && text[i] == '\n';
        uint32_t cp = 0;
        int len = 1, cw = 0;
        if (!end && !newline) {
            len = text_utf8_decode((const unsigned char *)text + i, n - i, &cp);
            if (len < 1) {
                len = 1;
                cp = 0xfffd;
            }
            cw = ui_char_width(cp);
        }
        bool overflow = !end && !newline && width + cw > w && width > 0;
        if (end || newline || overflow) {
            size_t to = i, next = i + (newline ? 1 : 0);
            if (overflow && cp == ' ') {
                next = i + 1;   /* the blank that overflows is the break */
            } else if (overflow && last_blank != (size_t)-1) {
                to = last_blank;
                next = last_blank + 1;
            }
            if (!UTIL_RESERVE(l, &cap, (size_t)count + 1, 16)) {
                free(l);
                return -1;
            }
            l[count++] = (wrap_line){.from = start, .to = to};
            if (end)
                break;
            start = i = next;
            width = 0;
            last_blank = (size_t)-1;
            continue;
        }
        if (cp == ' ')
            last_blank = i;
        width += cw;
        i += (size_t)len;
    }
    *lines = l;
    return count;
}

int ui_columns_wrapped_lines(const char *text, int w)
{
    wrap_line *l = NULL;
    int n = wrap(text ? text : "", w < 1 ? 1 : w, &l);
    free(l);
    return n < 0 ? 0 : n;
}

/* Rows [y0, y0 + h) of r get the text (its head, or its tail when asked and it is longer). */
static void draw_text(ui_grid *g, ui_rect r, int y0, int h, const ui_column *c)
{
    if (h <= 0 || r.w <= 0 || !c->text)
        return;
    wrap_line *l = NULL;
    int n = wrap(c->text, r.w, &l);
    if (n < 0)
        return;
    int first = c->tail && n > h ? n - h : 0;
    uint8_t attr = c->dim ? UI_ATTR_DIM : 0;
    uint8_t style = c->dim ? UI_STYLE_DIM : UI_STYLE_NORMAL;
    for (int k = 0; k < h && first + k < n; k++)
        ui_grid_put(g, y0 + k, r.x, r.x + r.w, c->text + l[first + k].from,
                    l[first + k].to - l[first + k].from, style, attr);
    free(l);
}

static void draw_title(ui_grid *g, int y, int x, int x_end, const ui_column *c, bool figures)
{
    uint8_t attr = c->dim ? UI_ATTR_DIM : c->highlight ? UI_ATTR_BOLD : 0;
    uint8_t style = c->dim ? UI_STYLE_DIM : UI_STYLE_TITLE;
    if (c->title)
        x = ui_grid_puts(g, y, x, x_end, c->title, style, attr);
    if (figures && c->figures) {
        x = ui_grid_puts(g, y, x, x_end, "  ", style, attr);
        ui_grid_puts(g, y, x, x_end, c->figures, UI_STYLE_DIM, c->dim ? UI_ATTR_DIM : 0);
    }
}

void ui_columns_draw(ui_grid *g, ui_rect area, const char *heading, const ui_column *cols, int n)
{
    if (area.h <= 0 || area.w <= 0)
        return;
    for (const char *h = heading; h && *h && area.h > 0;) {
        size_t len = strcspn(h, "\n");
        ui_grid_put(g, area.y, area.x, area.x + area.w, h, len, h == heading ? UI_STYLE_NOTICE
                                                                            : UI_STYLE_DIM, 0);
        area.y++;
        area.h--;
        h += len + (h[len] == '\n');
    }
    if (n <= 0 || area.h <= 0)
        return;
    ui_rect *r = malloc((size_t)n * sizeof *r);
    if (!r)
        return;
    bool side = ui_columns_layout(area, n, UI_COLUMN_MIN_W, r);
    for (int i = 0; i < n; i++) {
        const ui_column *c = &cols[i];
        if (r[i].h <= 0)
            continue;
        if (side) {
            if (i > 0)
                for (int y = r[i].y; y < r[i].y + r[i].h; y++)
                    ui_grid_set(g, y, r[i].x - 1, 0x2502, 1, UI_STYLE_BORDER, 0);
            draw_title(g, r[i].y, r[i].x, r[i].x + r[i].w, c, false);
            int y = r[i].y + 1;
            if (c->figures && r[i].h > 1) {
                ui_grid_puts(g, y, r[i].x, r[i].x + r[i].w, c->figures, UI_STYLE_DIM,
                             c->dim ? UI_ATTR_DIM : 0);
                y++;
            }
            draw_text(g, r[i], y, r[i].y + r[i].h - y, c);
        } else {
            draw_title(g, r[i].y, r[i].x, r[i].x + r[i].w, c, true);
            draw_text(g, r[i], r[i].y + 1, r[i].h - 1, c);
        }
    }
    free(r);
}
