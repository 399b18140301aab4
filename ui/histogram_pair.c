/* histogram_pair.c: drawing one position under two precisions as paired bars (histogram_pair.h). */
#include "ui/histogram_pair.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define CHROME_ROWS 5   /* title, header, two summary lines, hint: as ui_histogram_height */

int ui_histogram_pair_height(int bars)
{
    return bars + CHROME_ROWS;
}

void ui_histogram_pair_bar(double p, double scale, int w, char *out, size_t cap)
{
    /* Eighth blocks by width: index 1..7 are U+258F..U+2589 (▏ to ▉), 8 is █. */
    static const char *eighths[9] = {"", "\xe2\x96\x8f", "\xe2\x96\x8e", "\xe2\x96\x8d",
                                     "\xe2\x96\x8c", "\xe2\x96\x8b", "\xe2\x96\x8a",
                                     "\xe2\x96\x89", "\xe2\x96\x88"};
    int units = scale > 0 ? (int)lround(p / scale * w * 8) : 0;
    if (units > w * 8)
        units = w * 8;
    if (units == 0 && p > 0)
        units = 1;              /* a sliver: the token has some mass */
    size_t o = 0;
    int cols = 0;
    while (units > 0 && o + 4 < cap) {
        int k = units >= 8 ? 8 : units;
        size_t l = strlen(eighths[k]);
        memcpy(out + o, eighths[k], l);
        o += l;
        units -= k;
        cols++;
    }
    while (cols < w && o + 1 < cap) {
        out[o++] = ' ';
        cols++;
    }
    out[o] = 0;
}

void ui_histogram_pair_delta(double dp, char *out, size_t cap)
{
    double pct = dp * 100.0;
    if (fabs(pct) < 0.005)
        snprintf(out, cap, "0");
    else
        snprintf(out, cap, "%+.2f%%", pct);
}

void ui_histogram_pair_summary(const dtype_compare *c, const tokenizer *tok, bool compact,
                               char *line1, size_t cap1, char *line2, size_t cap2)
{
    char a[64], b[64];
    ui_histogram_token_label(tok, c->max_dp_id, compact ? 8 : 14, a, sizeof a);
    /* ‖ and Δ: the KL divergence of the comparison from the reference, the largest change */
    if (compact)
        snprintf(line1, cap1, "KL %.2g nats \xc2\xb7 max|\xce\x94p| %.2f%% %s", c->kl,
                 (double)c->max_dp * 100.0, a);
    else
        snprintf(line1, cap1, "KL(%s\xe2\x80\x96%s) %.2g nats \xc2\xb7 max |\xce\x94p| %.2f%% at %s",
                 tt_dtype_name(c->ref_dtype), tt_dtype_name(c->dtype), c->kl,
                 (double)c->max_dp * 100.0, a);
    ui_histogram_token_label(tok, c->top1_ref, 14, a, sizeof a);
    if (c->top1_agree) {
        snprintf(line2, cap2, "top-1 agrees: %s", a);
    } else {
        ui_histogram_token_label(tok, c->top1_cmp, 14, b, sizeof b);
        snprintf(line2, cap2, "top-1 differs: %s (%s) vs %s (%s)", a, tt_dtype_name(c->ref_dtype),
                 b, tt_dtype_name(c->dtype));
    }
}

void ui_histogram_pair_draw(ui_grid *g, ui_rect r, const ui_pair_view *v)
{
    ui_grid_fill_rect(g, r, UI_STYLE_NORMAL);
    if (r.h <= 0 || r.w < 8 || !v->cmp)
        return;
    const dtype_compare *c = v->cmp;
    int x0 = r.x, x1 = r.x + r.w;
    const char *ra = tt_dtype_name(c->ref_dtype), *rb = tt_dtype_name(c->dtype);
    char buf[200];
    if (v->kind == UI_HIST_STEP)
        snprintf(buf, sizeof buf, "Step %d \xc2\xb7 token %d \xc2\xb7 %s vs %s", v->step + 1,
                 v->position, ra, rb);
    else
        snprintf(buf, sizeof buf, "Next token at %d \xc2\xb7 %s vs %s", v->position, ra, rb);
    ui_grid_puts(g, r.y, x0, x1, buf, UI_STYLE_TITLE, UI_ATTR_BOLD);

    int avail = r.h - CHROME_ROWS;
    bool chrome = avail >= 1;
    if (!chrome)
        avail = r.h - 1;
    int n = v->bars < c->n_top ? v->bars : c->n_top;
    if (n > avail)
        n = avail;
    /* Columns: rank(2) marker(1) gap(1) token(tw) gap(1) [bar(bw) gap(1)] p(6) gap(1)
     * [bar(bw) gap(1)] q(6) gap(1) change(7). */
    int tw = r.w >= 60 ? 12 : r.w >= 48 ? 9 : 6;
    int bw = (r.w - (tw + 26)) / 2 - 1;
    if (bw < 3) {              /* no room for bars: the numbers, with a shorter token column */
        bw = 0;
        if (tw > r.w - 26)
            tw = r.w - 26 > 3 ? r.w - 26 : 3;
    }
    int xt = x0 + 4, xa = xt + tw + 1;
    int xpa = xa + (bw ? bw + 1 : 0);
    int xb = xpa + 7;
    int xpb = xb + (bw ? bw + 1 : 0);
    int xd = xpb + 7;
    int y = r.y + 1;
    if (chrome) {
        ui_grid_puts(g, y, x0, x1, " #", UI_STYLE_DIM, 0);
        ui_grid_puts(g, y, xt, x1, "token", UI_STYLE_DIM, 0);
        ui_grid_printf(g, y, bw ? xa : xpa, x1, UI_STYLE_DIM, 0, "%*s", bw ? bw + 7 : 6, ra);
        ui_grid_printf(g, y, bw ? xb : xpb, x1, UI_STYLE_DIM, 0, "%*s", bw ? bw + 7 : 6, rb);
        ui_grid_puts(g, y, xd + 4, x1, "\xce\x94p", UI_STYLE_DIM, 0);
        y++;
    }
    /* The first n tokens; the drawn one takes the last row when it ranks below them. */
    int rows[DTYPE_COMPARE_TOP];
    for (int i = 0; i < n; i++)
        rows[i] = i;
    for (int i = n; i < c->n_top && n > 0; i++)
        if (c->top_id[i] == v->chosen)
            rows[n - 1] = i;
    double scale = 0;
    for (int k = 0; k < n; k++) {
        int i = rows[k];
        if (c->top_p[i] > scale)
            scale = c->top_p[i];
        if (c->top_q[i] > scale)
            scale = c->top_q[i];
    }
    for (int k = 0; k < n; k++, y++) {
        int i = rows[k];
        bool is_chosen = c->top_id[i] == v->chosen;
        uint8_t st = is_chosen ? UI_STYLE_CHOSEN : UI_STYLE_NORMAL;
        uint8_t at = is_chosen ? UI_ATTR_BOLD : 0;
        ui_grid_printf(g, y, x0, x0 + 2, UI_STYLE_DIM, 0, "%2d", i + 1);
        if (is_chosen)
            ui_grid_set(g, y, x0 + 2, 0x25b6, 1, UI_STYLE_CHOSEN, UI_ATTR_BOLD);   /* ▶ */
        char label[128], cell[160];
        ui_histogram_token_label(v->tok, c->top_id[i], tw, label, sizeof label);
        ui_grid_puts(g, y, xt, xt + tw, label, st, at);
        if (bw) {
            ui_histogram_pair_bar(c->top_p[i], scale, bw, cell, sizeof cell);
            ui_grid_puts(g, y, xa, xa + bw, cell, UI_STYLE_BAR, 0);
            ui_histogram_pair_bar(c->top_q[i], scale, bw, cell, sizeof cell);
            ui_grid_puts(g, y, xb, xb + bw, cell, UI_STYLE_BAR_RAW, 0);
        }
        ui_histogram_format_pct(c->top_p[i], cell, sizeof cell);
        ui_grid_puts(g, y, xpa, x1, cell, st, at);
        ui_histogram_format_pct(c->top_q[i], cell, sizeof cell);
        ui_grid_puts(g, y, xpb, x1, cell, st, at);
        ui_histogram_pair_delta((double)c->top_q[i] - c->top_p[i], cell, sizeof cell);
        ui_grid_printf(g, y, xd, x1, UI_STYLE_DIM, 0, "%7s", cell);
    }
    if (!chrome)
        return;
    char l1[200], l2[200];
    ui_histogram_pair_summary(c, v->tok, r.w < 64, l1, sizeof l1, l2, sizeof l2);
    ui_grid_puts(g, y++, x0 + 1, x1, l1, UI_STYLE_NORMAL, 0);
    ui_grid_puts(g, y++, x0 + 1, x1, l2, c->top1_agree ? UI_STYLE_NORMAL : UI_STYLE_CUT,
                 c->top1_agree ? 0 : UI_ATTR_BOLD);
    ui_grid_puts(g, y, x0 + 1, x1, "raw p \xc2\xb7 /dtype compare off: sampler view",
                 UI_STYLE_DIM, 0);
}
