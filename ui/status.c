/* status.c: formatting and drawing the status bar. */
#include "ui/status.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/base/text.h"

#define SEP " \xe2\x94\x82 "   /* │ */

int ui_status_height(int screen_rows)
{
    return screen_rows >= 16 ? 2 : 1;
}

/* One field of a status line; fields with a higher drop rank go first when the line is too wide
 * (the cache figures never do); a field with a shorter form (alt) takes it before it goes. */
typedef struct {
    char text[128];
    char alt[64];
    int drop;
} piece;

/* The width of the kept pieces, joined. */
static int joined_width(const piece *p, const bool *keep, int n)
{
    int w = 1;   /* the leading blank */
    for (int i = 0, k = 0; i < n; i++)
        if (keep[i])
            w += (k++ ? 3 : 0) + ui_text_width(p[i].text, strlen(p[i].text));
    return w;
}

/* Joins the pieces that fit in width columns (all when width <= 0) with separators. */
static size_t join_fitting(piece *p, int n, int width, char *out, size_t cap)
{
    bool keep[16];
    for (int i = 0; i < n; i++)
        keep[i] = p[i].text[0] != 0;
    for (int rank = 9; rank > 0 && width > 0; rank--) {
        if (joined_width(p, keep, n) <= width)
            break;
        bool shortened = false;
        for (int i = 0; i < n; i++)
            if (keep[i] && p[i].drop == rank && p[i].alt[0]) {
                memcpy(p[i].text, p[i].alt, strlen(p[i].alt) + 1);   /* alt is the shorter */
                p[i].alt[0] = 0;
                shortened = true;
            }
        if (shortened && joined_width(p, keep, n) <= width)
            break;
        for (int i = 0; i < n; i++)
            if (p[i].drop == rank)
                keep[i] = false;
    }
    size_t o = 0;
    out[0] = 0;
    for (int i = 0, k = 0; i < n && o + 1 < cap; i++)
        if (keep[i]) {
            int r = snprintf(out + o, cap - o, "%s%s", k++ ? SEP : " ", p[i].text);
            o = r > 0 && o + (size_t)r < cap ? o + (size_t)r : cap - 1;
        }
    return o;
}

/* Cuts line to at most width columns at a field separator or a blank, never inside a word (a
 * status bar cut mid-word at 40 columns read "temp 0.8 top-k 4"). */
static void fit_words(char *line, int width)
{
    size_t n = strlen(line);
    if (width <= 0) {
        line[0] = 0;
        return;
    }
    if (ui_text_width(line, n) <= width)
        return;
    size_t o = 0, last_blank = 0;
    bool have_blank = false;
    int cols = 0;
    while (o < n) {
        int l = text_utf8_seq_len((const unsigned char *)line + o, n - o);
        if (l == 0)
            l = 1;
        int w = ui_text_width(line + o, (size_t)l);
        if (cols + w > width)
            break;
        /* a blank before a name ("top-k"), not before a value: a name keeps its value */
        if (line[o] == ' ' && o + 1 < n && !(line[o + 1] >= '0' && line[o + 1] <= '9')) {
            last_blank = o;
            have_blank = true;
        }
        cols += w;
        o += (size_t)l;
    }
    size_t cut = have_blank ? last_blank : o;   /* no blank: a word wider than the row */
    while (cut > 0 && (line[cut - 1] == ' ' || (unsigned char)line[cut - 1] >= 0x80))
        cut--;   /* no trailing blank or separator */
    line[cut] = 0;
}

static size_t format_first(const ui_status_view *v, int width, char *out, size_t cap)
{
    piece p[10];
    int n = 0;
    memset(p, 0, sizeof p);
    snprintf(p[n].text, sizeof p[n].text, "%s", v->model ? v->model : "?");
    p[n++].drop = 3;
    if (v->chat) {
        snprintf(p[n].text, sizeof p[n].text, "chat %s", v->chat);
        p[n++].drop = 3;
    }
    snprintf(p[n].text, sizeof p[n].text, "%s %s", v->backend ? v->backend : "?",
             v->precision ? v->precision : "?");
    p[n++].drop = 4;       /* the precision stays longer than the time to first token */
    snprintf(p[n].text, sizeof p[n].text, "%s", v->mode ? v->mode : "?");
    p[n++].drop = 2;
    if (v->busy)
        snprintf(p[n].text, sizeof p[n].text, "generating %d", v->generated);
    else if (v->has_turn && v->generated > 1)
        snprintf(p[n].text, sizeof p[n].text, "%.1f tok/s", v->tok_s);
    else
        snprintf(p[n].text, sizeof p[n].text, "- tok/s");
    p[n++].drop = 1;
    if (!v->busy) {
        if (v->has_turn)
            snprintf(p[n].text, sizeof p[n].text, "ttft %.0f ms", v->ttft_ms);
        else
            snprintf(p[n].text, sizeof p[n].text, "ttft -");
        p[n++].drop = 5;
    }
    if (v->spec) {
        int k = snprintf(p[n].text, sizeof p[n].text, "accept %.0f%% %.2f tok/pass",
                         v->acceptance * 100, v->tokens_per_pass);
        if (v->speedup > 0 && k > 0) {
            int k2 = snprintf(p[n].text + k, sizeof p[n].text - (size_t)k, " %.2fx plain",
                              v->speedup);
            /* the spread goes first when the row is short */
            if (k2 > 0 && v->speedup_hi > v->speedup_lo && v->speedup_lo > 0) {
                size_t len = strlen(p[n].text);
                if (len < sizeof p[n].alt)
                    memcpy(p[n].alt, p[n].text, len + 1);
                snprintf(p[n].text + k + k2, sizeof p[n].text - (size_t)(k + k2), " [%.2f-%.2f]",
                         v->speedup_lo, v->speedup_hi);
            }
        } else if (v->speedup_measuring && k > 0) {
            snprintf(p[n].text + k, sizeof p[n].text - (size_t)k, " x plain measuring...");
        }
        p[n++].drop = 1;   /* what speculative decoding is for: as long as the speed stays */
    }
    if (v->kv_mib > 0)
        snprintf(p[n].text, sizeof p[n].text, v->kv_mib < 10 ? "KV %d/%d %.1f MiB"
                                                              : "KV %d/%d %.0f MiB",
                 v->kv_used, v->kv_total, v->kv_mib);
    else
        snprintf(p[n].text, sizeof p[n].text, "KV %d/%d", v->kv_used, v->kv_total);
    p[n++].drop = 0;
    if (v->has_turn || v->busy) {
        snprintf(p[n].text, sizeof p[n].text, "reused %d prefilled %d", v->reused, v->prefilled);
        p[n++].drop = 0;
    }
    return join_fitting(p, n, width, out, cap);
}

static size_t format_second(const ui_status_view *v, int width, char *out, size_t cap)
{
    piece p[3];
    memset(p, 0, sizeof p);
    snprintf(p[0].text, sizeof p[0].text, "%s", v->sampler ? v->sampler : "");
    snprintf(p[1].text, sizeof p[1].text, "seed %llu", (unsigned long long)v->seed);
    p[1].drop = 2;
    snprintf(p[2].text, sizeof p[2].text, "max %d", v->max_new);
    p[2].drop = 1;
    return join_fitting(p, 3, width, out, cap);
}

size_t ui_status_format(const ui_status_view *v, char *out, size_t cap)
{
    if (cap == 0)
        return 0;
    return format_first(v, 0, out, cap);
}

void ui_status_draw(ui_grid *g, ui_rect r, const ui_status_view *v)
{
    ui_grid_fill_rect(g, r, UI_STYLE_STATUS);
    if (r.h <= 0 || r.w <= 0)
        return;
    /* A message takes the right end of the last row; the fields there make room for it (they
     * drop whole, never cut mid-word under it). */
    int mw = v->message && *v->message ? ui_text_width(v->message, strlen(v->message)) + 2 : 0;
    if (mw > r.w)
        mw = r.w;
    char line[512], second[512];
    int x1 = r.x + r.w;
    if (r.h >= 2) {
        format_first(v, r.w, line, sizeof line);
        format_second(v, r.w - mw > 1 ? r.w - mw : 1, second, sizeof second);
        fit_words(line, r.w);
        fit_words(second, r.w - mw);
        ui_grid_puts(g, r.y, r.x, x1, line, UI_STYLE_STATUS, 0);
        ui_grid_puts(g, r.y + 1, r.x, x1 - mw, second, UI_STYLE_STATUS, 0);
    } else {
        /* One row: the cache figures and the sampler first, the rest as room allows. */
        int w = r.w - mw;
        format_first(v, w / 2 > 1 ? w / 2 : 1, line, sizeof line);
        size_t n = strlen(line);
        format_second(v, w - ui_text_width(line, n) - 2, second, sizeof second);
        snprintf(line + n, sizeof line - n, SEP "%.300s", second + 1);
        fit_words(line, w);
        ui_grid_puts(g, r.y, r.x, x1 - mw, line, UI_STYLE_STATUS, 0);
    }
    if (mw > 0) {
        int x = x1 - mw;
        int y = r.y + r.h - 1;
        ui_grid_fill(g, y, x, x1, ' ', UI_STYLE_STATUS, UI_ATTR_BOLD);
        ui_grid_puts(g, y, x + 1, x1, v->message, UI_STYLE_STATUS, UI_ATTR_BOLD);
    }
}
