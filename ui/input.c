/* input.c: the line editor and its pane. */
#include "ui/input.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/text.h"
#include "core/base/util.h"

#define PROMPT ">>> "
#define PROMPT_MORE "... "
#define QUOTES "\"\"\""

void ui_input_init(ui_input *in)
{
    memset(in, 0, sizeof *in);
}

void ui_input_free(ui_input *in)
{
    if (!in)
        return;
    free(in->line);
    free(in->block);
    memset(in, 0, sizeof *in);
}

bool ui_input_insert(ui_input *in, const char *s, size_t n)
{
    if (!util_reserve(&in->line, &in->cap, in->len + n + 1, 128))
        return false;
    memmove(in->line + in->cur + n, in->line + in->cur, in->len - in->cur);
    memcpy(in->line + in->cur, s, n);
    in->len += n;
    in->cur += n;
    in->line[in->len] = 0;
    return true;
}

bool ui_input_set(ui_input *in, const char *text)
{
    in->len = in->cur = 0;
    if (in->line)
        in->line[0] = 0;
    return ui_input_insert(in, text, strlen(text));
}

void ui_input_clear(ui_input *in)
{
    in->len = in->cur = 0;
    if (in->line)
        in->line[0] = 0;
    in->blen = 0;
    in->block_lines = 0;
    in->multiline = false;
    in->block_fresh = false;
}

bool ui_input_empty(const ui_input *in)
{
    return in->len == 0 && !in->multiline;
}

/* ---------------------------------------------------------------------------------------------
 * Cursor motion by character (UTF-8 continuation bytes are skipped) */

static bool is_cont(char c)
{
    return ((unsigned char)c & 0xc0) == 0x80;
}

static size_t prev_char(const ui_input *in, size_t i)
{
    if (i == 0)
        return 0;
    i--;
    while (i > 0 && is_cont(in->line[i]))
        i--;
    return i;
}

static size_t next_char(const ui_input *in, size_t i)
{
    if (i >= in->len)
        return in->len;
    i++;
    while (i < in->len && is_cont(in->line[i]))
        i++;
    return i;
}

void ui_input_left(ui_input *in) { in->cur = prev_char(in, in->cur); }
void ui_input_right(ui_input *in) { in->cur = next_char(in, in->cur); }
void ui_input_home(ui_input *in) { in->cur = 0; }
void ui_input_end(ui_input *in) { in->cur = in->len; }

static void erase(ui_input *in, size_t a, size_t b)
{
    if (b <= a)
        return;
    memmove(in->line + a, in->line + b, in->len - b);
    in->len -= b - a;
    in->line[in->len] = 0;
    if (in->cur >= b)
        in->cur -= b - a;
    else if (in->cur > a)
        in->cur = a;
}

void ui_input_backspace(ui_input *in) { erase(in, prev_char(in, in->cur), in->cur); }
void ui_input_delete(ui_input *in) { erase(in, in->cur, next_char(in, in->cur)); }
void ui_input_kill_to_end(ui_input *in) { erase(in, in->cur, in->len); }
void ui_input_kill_to_start(ui_input *in) { erase(in, 0, in->cur); }

void ui_input_kill_word(ui_input *in)
{
    size_t i = in->cur;
    while (i > 0 && (in->line[i - 1] == ' ' || in->line[i - 1] == '\t'))
        i--;
    while (i > 0 && in->line[i - 1] != ' ' && in->line[i - 1] != '\t')
        i--;
    erase(in, i, in->cur);
}

/* ---------------------------------------------------------------------------------------------
 * Enter and the """ blocks */

static bool block_add(ui_input *in, const char *s, size_t n, bool newline)
{
    if (!util_reserve(&in->block, &in->bcap, in->blen + n + 2, 128))
        return false;
    if (newline)
        in->block[in->blen++] = '\n';
    memcpy(in->block + in->blen, s, n);
    in->blen += n;
    in->block[in->blen] = 0;
    return true;
}

static char *take_block(ui_input *in)
{
    char *out = malloc(in->blen + 1);
    if (out) {
        memcpy(out, in->block ? in->block : "", in->blen);
        out[in->blen] = 0;
    }
    ui_input_clear(in);
    return out;
}

static bool ends_with_quotes(const char *s, size_t n)
{
    return n >= 3 && memcmp(s + n - 3, QUOTES, 3) == 0;
}

char *ui_input_enter(ui_input *in)
{
    const char *s = in->line ? in->line : "";
    size_t n = in->len;
    if (!in->multiline) {
        if (n >= 3 && memcmp(s, QUOTES, 3) == 0) {
            in->blen = 0;
            in->block_lines = 1;
            if (n >= 6 && ends_with_quotes(s, n)) {        /* """one line""" */
                block_add(in, s + 3, n - 6, false);
                return take_block(in);
            }
            in->multiline = true;
            block_add(in, s + 3, n - 3, false);
            in->block_fresh = n == 3;
            in->len = in->cur = 0;
            in->line[0] = 0;
            return NULL;
        }
        char *out = malloc(n + 1);
        if (out) {
            memcpy(out, s, n);
            out[n] = 0;
        }
        ui_input_clear(in);
        return out;
    }
    bool newline = !in->block_fresh;
    in->block_fresh = false;
    if (ends_with_quotes(s, n)) {
        if (n > 3)   /* """ alone closes the block and adds no empty last line */
            block_add(in, s, n - 3, newline);
        return take_block(in);
    }
    block_add(in, s, n, newline);
    in->block_lines++;
    in->len = in->cur = 0;
    in->line[0] = 0;
    return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Drawing */

int ui_input_height(const ui_input *in, int max_rows)
{
    int h = 1 + (in->multiline ? in->block_lines : 0);
    if (h > max_rows)
        h = max_rows;
    return h < 1 ? 1 : h;
}

/* Draws s[0..n) from column x; '\n' shows as ⏎. Returns the column after it. */
static int put_text(ui_grid *g, int y, int x, int x_end, const char *s, size_t n, uint8_t style)
{
    for (size_t i = 0; i < n && x < x_end;) {
        if (s[i] == '\n') {
            ui_grid_set(g, y, x++, 0x23ce, 1, UI_STYLE_DIM, 0);
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && s[j] != '\n')
            j++;
        x = ui_grid_put(g, y, x, x_end, s + i, j - i, style, 0);
        i = j;
    }
    return x;
}

static int text_cols(const char *s, size_t n)
{
    int w = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '\n') {
            w++;
        } else {
            size_t j = i;
            while (j < n && s[j] != '\n')
                j++;
            w += ui_text_width(s + i, j - i);
            i = j - 1;
        }
    return w;
}

void ui_input_draw(ui_grid *g, ui_rect r, const ui_input *in, const char *placeholder)
{
    ui_grid_fill_rect(g, r, UI_STYLE_NORMAL);
    if (r.h <= 0 || r.w <= 4)
        return;
    int x1 = r.x + r.w;
    int y = r.y;
    /* The tail of an open block, one line per row. */
    if (in->multiline && r.h > 1) {
        const char *b = in->block ? in->block : "";
        int skip = in->block_lines - (r.h - 1);   /* block lines that do not fit */
        size_t pos = 0;
        for (int line = 0; line < in->block_lines && pos <= in->blen; line++) {
            size_t e = pos;
            while (e < in->blen && b[e] != '\n')
                e++;
            if (line >= skip) {
                int x = ui_grid_puts(g, y, r.x, x1, line == 0 ? PROMPT QUOTES : PROMPT_MORE,
                                     UI_STYLE_PROMPT, UI_ATTR_BOLD);
                ui_grid_put(g, y, x, x1, b + pos, e - pos, UI_STYLE_USER, 0);
                y++;
            }
            pos = e + 1;
        }
    }
    y = r.y + r.h - 1;
    const char *prompt = in->multiline ? PROMPT_MORE : PROMPT;
    int x = ui_grid_puts(g, y, r.x, x1, prompt, UI_STYLE_PROMPT, UI_ATTR_BOLD);
    int room = x1 - x - 1;
    if (room < 1)
        return;
    const char *s = in->line ? in->line : "";
    if (in->len == 0 && !in->multiline && placeholder) {
        ui_grid_puts(g, y, x, x1, placeholder, UI_STYLE_DIM, 0);
        g->cursor_y = y;
        g->cursor_x = x;
        g->cursor_visible = true;
        return;
    }
    /* Scroll so the cursor stays on screen: drop characters from the left. */
    size_t from = 0;
    while (text_cols(s + from, in->cur - from) > room && from < in->cur) {
        size_t nx = from + 1;
        while (nx < in->len && is_cont(s[nx]))
            nx++;
        from = nx;
    }
    if (from > 0) {
        ui_grid_set(g, y, x, 0x2026, 1, UI_STYLE_DIM, 0);   /* … */
        x++;
        while (text_cols(s + from, in->cur - from) > room - 1 && from < in->cur) {
            size_t nx = from + 1;
            while (nx < in->len && is_cont(s[nx]))
                nx++;
            from = nx;
        }
    }
    int cx = x + text_cols(s + from, in->cur - from);
    put_text(g, y, x, x1, s + from, in->len - from, UI_STYLE_USER);
    g->cursor_y = y;
    g->cursor_x = cx < x1 ? cx : x1 - 1;
    g->cursor_visible = true;
}
