/* transcript_pane.c: word-wrapping and drawing the transcript document, bottom-up with scrolling. */
#include "ui/transcript_pane.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/text.h"
#include "core/base/util.h"

#define TAB_WIDTH 4

/* ---------------------------------------------------------------------------------------------
 * The document */

void ui_doc_init(ui_doc *d)
{
    memset(d, 0, sizeof *d);
}

void ui_doc_free(ui_doc *d)
{
    if (!d)
        return;
    free(d->chars);
    memset(d, 0, sizeof *d);
}

void ui_doc_clear(ui_doc *d)
{
    d->n = 0;
}

void ui_doc_truncate(ui_doc *d, size_t n)
{
    if (n < d->n)
        d->n = n;
}

bool ui_doc_append_cp(ui_doc *d, uint32_t cp, uint8_t style, uint8_t attr)
{
    if (!UTIL_RESERVE(d->chars, &d->cap, d->n + 1, 1024))
        return false;
    int w = (cp == '\n' || cp == '\t') ? 1 : ui_char_width(cp);
    d->chars[d->n++] = (ui_doc_char){.cp = cp, .width = (uint8_t)w, .style = style, .attr = attr};
    return true;
}

bool ui_doc_append(ui_doc *d, const char *s, size_t n, uint8_t style, uint8_t attr)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int len = text_utf8_decode((const unsigned char *)s + i, n - i, &cp);
        if (len == 0) {
            cp = 0xfffd;
            len = 1;
        }
        i += (size_t)len;
        if (!ui_doc_append_cp(d, cp, style, attr))
            return false;
    }
    return true;
}

bool ui_doc_at_line_start(const ui_doc *d)
{
    return d->n == 0 || d->chars[d->n - 1].cp == '\n';
}

/* ---------------------------------------------------------------------------------------------
 * Wrapping */

static int char_cols(const ui_doc_char *c, int col)
{
    if (c->cp == '\t')
        return TAB_WIDTH - col % TAB_WIDTH;
    return c->width;
}

static bool is_space(uint32_t cp)
{
    return cp == ' ' || cp == '\t';
}

void ui_transcript_pane_wrap(const ui_doc_char *chars, size_t n, int w,
                        void (*fn)(void *user, size_t start, size_t end), void *user)
{
    ui_transcript_pane_wrap_hanging(chars, n, w, 0, fn, user);
}

int ui_transcript_pane_hang(const ui_doc_char *chars, size_t n, int w)
{
    if (n < 3 || chars[0].cp != ' ' || chars[1].cp != ' ' || chars[0].style != UI_STYLE_NOTICE)
        return 0;
    int col = 0;
    size_t i = 0;
    while (i < n && chars[i].cp == ' ') {
        col++;
        i++;
    }
    int lead = col;
    /* The column after the first gap of two or more spaces that follows text. */
    while (i < n) {
        if (chars[i].cp == ' ' && i + 1 < n && chars[i + 1].cp == ' ') {
            while (i < n && chars[i].cp == ' ') {
                col++;
                i++;
            }
            lead = col;
            break;
        }
        col += chars[i].cp == '\t' ? 1 : chars[i].width;
        i++;
    }
    return lead <= w / 2 ? lead : 0;
}

void ui_transcript_pane_wrap_hanging(const ui_doc_char *chars, size_t n, int w, int hang,
                                     void (*fn)(void *user, size_t start, size_t end), void *user)
{
    if (w < 1)
        w = 1;
    if (hang < 0 || hang >= w)
        hang = 0;
    if (n == 0) {
        fn(user, 0, 0);
        return;
    }
    size_t start = 0;
    while (start < n) {
        int col = 0;
        int lw = start == 0 ? w : w - hang;   /* continuation lines start at column hang */
        size_t i = start, brk = start;   /* brk: just after the last space that fits */
        while (i < n) {
            int cw = char_cols(&chars[i], col);
            if (col + cw > lw)
                break;
            col += cw;
            if (is_space(chars[i].cp))
                brk = i + 1;
            i++;
        }
        if (i == n) {
            fn(user, start, n);
            return;
        }
        if (is_space(chars[i].cp)) {
            fn(user, start, i);
            start = i + 1;
        } else if (brk > start) {
            fn(user, start, brk);
            start = brk;
        } else {
            if (i == start)
                i = start + 1;   /* a character wider than the pane: show what fits */
            fn(user, start, i);
            start = i;
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Drawing */

typedef struct {
    size_t a, b;
    int indent;         /* columns before the line (a hanging indent) */
} line_span;

typedef struct {
    line_span *v;       /* lines collected, newest first */
    size_t n, cap;
    line_span *par;     /* one paragraph's lines in order */
    size_t np, capp;
    size_t base;        /* offset of the paragraph in the document */
    int hang;           /* the paragraph's hanging indent */
    bool oom;
} line_acc;

/* Appends l to the array *v of *n spans (room for *cap), which grows from first_cap by doubling;
 * out of memory, l is dropped and acc->oom set. */
static void push_span(line_acc *acc, line_span **v, size_t *n, size_t *cap, size_t first_cap,
                      line_span l)
{
    if (!UTIL_RESERVE(*v, cap, *n + 1, first_cap)) {
        acc->oom = true;
        return;
    }
    (*v)[(*n)++] = l;
}

static void push_par_line(void *user, size_t start, size_t end)
{
    line_acc *acc = user;
    push_span(acc, &acc->par, &acc->np, &acc->capp, 64,
              (line_span){acc->base + start, acc->base + end, start > 0 ? acc->hang : 0});
}

static void push_line(line_acc *acc, line_span l)
{
    push_span(acc, &acc->v, &acc->n, &acc->cap, 128, l);
}

void ui_transcript_pane_draw(ui_grid *g, ui_rect r, const ui_doc *d, ui_scroll *sc, bool caret)
{
    ui_grid_fill_rect(g, r, UI_STYLE_NORMAL);
    if (r.h <= 0 || r.w <= 0)
        return;
    if (sc->scroll < 0)
        sc->scroll = 0;
    size_t want = (size_t)sc->scroll + (size_t)r.h;
    line_acc acc = {0};
    /* Paragraphs from the end until enough lines are known. The caret needs a cell after the
     * last character, so the last paragraph is wrapped one column narrower when it is shown. */
    size_t doc_end = d->n;
    if (sc->scroll > 0 && sc->anchor > 0 && sc->anchor < d->n)
        doc_end = sc->anchor;
    size_t end = doc_end;
    bool first = true, at_top = false;
    /* A long answer opens at its top: collect lines back to sc->top_at too. */
    bool open = sc->open_top && sc->scroll == 0 && sc->top_at < doc_end;
    sc->open_top = false;
    size_t reached = doc_end;
    while ((acc.n < want + 1 || (open && reached > sc->top_at)) && !acc.oom) {
        size_t start = end;
        while (start > 0 && d->chars[start - 1].cp != '\n')
            start--;
        acc.np = 0;
        acc.base = start;
        int w = (first && caret && r.w > 1) ? r.w - 1 : r.w;
        acc.hang = ui_transcript_pane_hang(d->chars + start, end - start, w);
        ui_transcript_pane_wrap_hanging(d->chars + start, end - start, w, acc.hang, push_par_line,
                                        &acc);
        reached = start;
        for (size_t i = acc.np; i-- > 0;)
            push_line(&acc, acc.par[i]);
        first = false;
        if (start == 0) {
            at_top = true;
            break;
        }
        end = start - 1;   /* skip the '\n' */
    }
    size_t total = acc.n;
    if (open) {
        size_t below = 0;   /* lines from top_at to the end */
        while (below < total && acc.v[below].a >= sc->top_at)
            below++;
        if (below > (size_t)r.h) {
            sc->scroll = (int)(below - (size_t)r.h);
            sc->anchor = doc_end;
            want = (size_t)sc->scroll + (size_t)r.h;
        }
    }
    if (at_top && total < want) {
        size_t max_scroll = total > (size_t)r.h ? total - (size_t)r.h : 0;
        if ((size_t)sc->scroll > max_scroll)
            sc->scroll = (int)max_scroll;
    }
    size_t scroll = (size_t)sc->scroll;
    size_t shown = total > scroll ? total - scroll : 0;
    if (shown > (size_t)r.h)
        shown = (size_t)r.h;
    sc->more_above = total > scroll + shown || !at_top;
    sc->lines_below = sc->scroll;
    /* Lines fill from the top when the document is shorter than the pane. */
    for (size_t k = 0; k < shown; k++) {
        line_span l = acc.v[scroll + shown - 1 - k];
        int y = r.y + (int)k;
        int x = r.x + l.indent, col = l.indent;
        for (size_t i = l.a; i < l.b && col < r.w; i++) {
            const ui_doc_char *c = &d->chars[i];
            int cw = char_cols(c, col);
            if (col + cw > r.w)
                break;
            if (c->cp == '\t')
                ui_grid_fill(g, y, x, x + cw, ' ', c->style, c->attr);
            else
                ui_grid_set(g, y, x, c->cp, cw, c->style, c->attr);
            x += cw;
            col += cw;
        }
        if (caret && scroll == 0 && k == shown - 1 && col < r.w)
            ui_grid_set(g, y, x, 0x258c, 1, UI_STYLE_DIM, 0);   /* ▌ */
    }
    if (sc->scroll > 0) {
        char note[64];
        int n = doc_end < d->n
                    ? snprintf(note, sizeof note, " \xe2\x96\xbc %d more lines and new text (PgDn) ",
                               sc->scroll)
                    : snprintf(note, sizeof note, " \xe2\x96\xbc %d more lines (PgDn) ", sc->scroll);
        int w = ui_text_width(note, (size_t)n);
        int x = r.x + r.w - w;
        ui_grid_put(g, r.y + r.h - 1, x < r.x ? r.x : x, r.x + r.w, note, (size_t)n,
                    UI_STYLE_STATUS, 0);
    }
    free(acc.v);
    free(acc.par);
}
