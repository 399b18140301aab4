/* histogram.c: drawing one sampler snapshot as bars, cut markers, the draw and the entropy. */
#include "ui/histogram.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/text.h"

#define CHROME_ROWS 5   /* title, header, cumulative bar, draw line, entropy line */

int ui_histogram_height(int bars)
{
    return bars + CHROME_ROWS;
}

/* ---------------------------------------------------------------------------------------------
 * Labels */

void ui_histogram_token_label(const tokenizer *tok, int32_t id, int max_cols, char *out,
                              size_t cap)
{
    char full[256];
    if (tok)
        tokenizer_token_display(tok, id, TEXT_ESCAPE_WHITESPACE, full, sizeof full);
    else
        snprintf(full, sizeof full, "#%d", (int)id);
    size_t len = strlen(full);
    if (ui_text_width(full, len) <= max_cols) {
        snprintf(out, cap, "%s", full);
        return;
    }
    /* Cut at a character boundary, leaving a column for the ellipsis. */
    size_t o = 0;
    int cols = 0;
    while (o < len) {
        int l = text_utf8_seq_len((const unsigned char *)full + o, len - o);
        if (l == 0)
            l = 1;
        int w = ui_text_width(full + o, (size_t)l);
        if (cols + w > max_cols - 1)
            break;
        cols += w;
        o += (size_t)l;
    }
    snprintf(out, cap, "%.*s\xe2\x80\xa6", (int)o, full);   /* … */
}

void ui_histogram_format_pct(double p, char *out, size_t cap)
{
    if (p <= 0)
        snprintf(out, cap, "%6s", "0");
    else if (p < 0.001)
        snprintf(out, cap, "%6s", "<0.1%");
    else
        snprintf(out, cap, "%5.1f%%", (double)p * 100.0);
}

static const char *cut_label(uint8_t cut)
{
    switch ((sampler_cut)cut) {
    case SAMPLER_CUT_TOP_K: return "top-k";
    case SAMPLER_CUT_TOP_P: return "top-p";
    case SAMPLER_CUT_MIN_P: return "min-p";
    case SAMPLER_CUT_GREEDY: return "greedy";
    case SAMPLER_CUT_BANNED: return "banned";
    case SAMPLER_CUT_NONE: break;
    }
    return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Pieces */

/* Room in sampler_snapshot.top: the top tokens plus a chosen one ranked below them. */
#define TOP_CAP ((int)(sizeof ((sampler_snapshot *)0)->top / sizeof ((sampler_snapshot *)0)->top[0]))

static int top_count(const sampler_snapshot *s)
{
    return s->n_top < 0 ? 0 : s->n_top > TOP_CAP ? TOP_CAP : s->n_top;
}

/* Eighth blocks: index 1..7 → ▏▎▍▌▋▊▉ */
static const uint32_t eighths[8] = {0, 0x258f, 0x258e, 0x258d, 0x258c, 0x258b, 0x258a, 0x2589};

/* One bar of bw cells: final probability solid, raw probability beyond it shaded. */
static void draw_bar(ui_grid *g, int y, int x, int bw, float p, float raw, float scale, bool cut,
                     uint8_t attr)
{
    double fin = scale > 0 ? (double)p / scale * bw : 0;
    double rw = scale > 0 ? (double)raw / scale * bw : 0;
    for (int i = 0; i < bw; i++) {
        uint32_t cp = ' ';
        uint8_t st = UI_STYLE_NORMAL;
        if (fin >= i + 1) {
            cp = 0x2588;   /* █ */
            st = UI_STYLE_BAR;
        } else if (fin > i && (int)((fin - i) * 8) > 0) {
            cp = eighths[(int)((fin - i) * 8)];
            st = UI_STYLE_BAR;
        } else if (rw > i + 0.25) {
            cp = 0x2591;   /* ░ */
            st = cut ? UI_STYLE_BAR_CUT : UI_STYLE_BAR_RAW;
        } else if (i == 0 && raw > 0 && p <= 0) {
            cp = 0x258f;   /* a sliver so a cut token's bar is visible */
            st = UI_STYLE_BAR_CUT;
        }
        ui_grid_set(g, y, x + i, cp, 1, st, attr);
    }
}

typedef struct {
    int idx;         /* index in snap->top */
    double lo, hi;   /* cumulative final mass */
} cum_seg;

static int cmp_seg(const void *a, const void *b, void *ctx)
{
    const sampler_snapshot *s = ctx;
    const sampler_entry *x = &s->top[((const cum_seg *)a)->idx];
    const sampler_entry *y = &s->top[((const cum_seg *)b)->idx];
    if (x->p != y->p)
        return x->p > y->p ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* A probability in 3 significant digits without the leading zero (".548", ".0123", "1"): the
 * acceptance line must fit a pane of 40-odd columns. */
static void short_prob(double p, char *out, size_t cap)
{
    char b[32];
    snprintf(b, sizeof b, "%.3g", p);
    snprintf(out, cap, "%s", strncmp(b, "0.", 2) == 0 ? b + 1 : b);
}

/* The acceptance test's ratio p/q (q > 0 for a drafted token; 0 guards a corrupt one). */
static double spec_ratio(const spec_draft *d)
{
    return d->q > 0 ? (double)d->p / d->q : 0;
}

/* The cumulative bar of final mass in draw order, and the row under it with the draw marker. */
static void draw_cumulative(ui_grid *g, int y, int x, int w, const ui_hist_view *v, int chosen_idx)
{
    const sampler_snapshot *s = v->snap;
    cum_seg seg[TOP_CAP];
    int n = 0;
    for (int i = 0; i < top_count(s); i++)
        if (s->top[i].p > 0)
            seg[n++] = (cum_seg){.idx = i};
    qsort_r(seg, (size_t)n, sizeof seg[0], cmp_seg, (void *)s);
    double acc = 0;
    for (int i = 0; i < n; i++) {
        seg[i].lo = acc;
        acc += s->top[seg[i].idx].p;
        seg[i].hi = acc;
    }
    int bw = w - 2;
    if (bw < 4)
        return;
    ui_grid_set(g, y, x, 0x2595, 1, UI_STYLE_DIM, 0);            /* ▕ */
    ui_grid_set(g, y, x + 1 + bw, 0x258f, 1, UI_STYLE_DIM, 0);   /* ▏ */
    int k = 0;
    for (int j = 0; j < bw; j++) {
        double m = (j + 0.5) / bw;
        while (k < n && seg[k].hi <= m)
            k++;
        uint32_t cp = 0x2591;   /* ░ mass outside the tokens listed */
        uint8_t st = UI_STYLE_DIM;
        if (k < n && m >= seg[k].lo) {
            cp = (k % 2) ? 0x2592 : 0x2588;   /* ▒ / █ alternate so neighbours differ */
            st = seg[k].idx == chosen_idx ? UI_STYLE_CHOSEN : UI_STYLE_BAR;
        }
        ui_grid_set(g, y, x + 1 + j, cp, 1, st, 0);
    }
    /* The draw line. */
    int y2 = y + 1;
    char label[256];
    if (v->spec) {
        /* Speculative: the proposal's test, then what replaced it if it failed. */
        const spec_draft *d = v->spec;
        char dt[64], tok[64];
        ui_histogram_token_label(v->tok, d->token, 10, dt, sizeof dt);
        ui_histogram_token_label(v->tok, s->token, 10, tok, sizeof tok);
        if (d->u < 0)
            snprintf(label, sizeof label, "draft %s: q %.2f p %.2f", dt, (double)d->q,
                     (double)d->p);
        else {
            char ps[32], qs[32];
            short_prob(d->p, ps, sizeof ps);
            short_prob(d->q, qs, sizeof qs);
            if (d->accepted)    /* ✓ accepted when u < p/q: the ratio itself, then p and q */
                snprintf(label, sizeof label, "draft %s \xe2\x9c\x93 u %.3f < p/q %.2f (p %s q %s)",
                         dt, d->u, spec_ratio(d), ps, qs);
            else                /* ✗ rejected, then a draw from the residual (p - q)+ */
                snprintf(label, sizeof label, "draft %s \xe2\x9c\x97 u %.3f \xe2\x89\xa5 p/q %.2f "
                         "\xe2\x86\x92 %s ~ (p\xe2\x88\x92q)+ (p %s q %s)", dt, d->u,
                         spec_ratio(d), tok, ps, qs);
        }
        ui_grid_puts(g, y2, x + 1, x + w, label, UI_STYLE_DRAW, 0);
        return;
    }
    if (v->kind == UI_HIST_PEEK) {
        const char *t = v->step_mode ? "not drawn yet: Enter draws, /pick N chooses"
                                     : "not drawn yet";
        ui_grid_puts(g, y2, x + 1, x + w, t, UI_STYLE_DIM, 0);
        return;
    }
    if (v->draw_note) {
        ui_grid_puts(g, y2, x + 1, x + w, v->draw_note, UI_STYLE_DRAW, 0);
        return;
    }
    if (s->forced) {
        snprintf(label, sizeof label, "forced by /pick (p %.3f)", (double)s->token_p);
        ui_grid_puts(g, y2, x + 1, x + w, label, UI_STYLE_DRAW, 0);
        return;
    }
    if (s->u < 0) {
        const char *t = "greedy: the argmax, no draw";
        ui_grid_puts(g, y2, x + 1, x + w, t, UI_STYLE_DRAW, 0);
        return;
    }
    int cx = (int)(s->u * bw);
    if (cx >= bw)
        cx = bw - 1;
    ui_grid_set(g, y2, x + 1 + cx, 0x25b2, 1, UI_STYLE_DRAW, UI_ATTR_BOLD);   /* ▲ */
    char tok[64];
    ui_histogram_token_label(v->tok, s->token, 12, tok, sizeof tok);
    snprintf(label, sizeof label, "u=%.3f \xe2\x86\x92 %s (rank %d)", s->u, tok, s->token_rank + 1);
    int lw = ui_text_width(label, strlen(label));
    /* Text on the side of the marker with more room. */
    int lx = cx + 3 + lw <= bw ? x + 1 + cx + 2 : x + 1 + cx - 1 - lw;
    if (lx < x)
        lx = x;
    ui_grid_puts(g, y2, lx, x + w, label, UI_STYLE_DRAW, 0);
}

/* ---------------------------------------------------------------------------------------------
 * The pane */

static void draw_legend(ui_grid *g, ui_rect r, bool speculative)
{
    static const char *spec_lines[] = {
        "Speculative decoding: the draft",
        "  proposes, the target checks.",
        "q: the draft's p, p: the target's",
        "\xc2\xb7 not among the draft's tokens",
        "\xe2\x9c\x93 accepted when u < p/q",
        "\xe2\x9c\x97 rejected: redrawn from (p\xe2\x88\x92q)+",
        "\xe2\x96\x88 p after the chain, \xe2\x96\x91 raw p",
        "\xe2\x96\xb6 the token kept",
        "H: entropy in bits, raw \xe2\x86\x92 final",
    };
    static const char *lines[] = {
        "Each generated token shows here:",
        "\xe2\x96\x88 final p (after the chain)",
        "\xe2\x96\x91 raw p (the model's softmax)",
        "top-k/top-p/min-p: the stage",
        "  that removed the token",
        "\xe2\x86\x93 lowered by a penalty",
        "\xe2\x96\xb6 the sampled token",
        "\xe2\x96\xb2 where the uniform draw u landed",
        "  on the cumulative bar",
        "H: entropy in bits, raw \xe2\x86\x92 final",
    };
    /* the same in fewer lines, for a pane too short for the long form (80x24) */
    static const char *spec_short[] = {
        "q: draft's p, p: target's (\xc2\xb7 unlisted)",
        "\xe2\x9c\x93 u < p/q kept, \xe2\x9c\x97 redrawn from (p\xe2\x88\x92q)+",
        "\xe2\x96\x88 p, \xe2\x96\x91 raw p, \xe2\x96\xb6 the token kept",
        "H: entropy in bits, raw \xe2\x86\x92 final",
    };
    static const char *lines_short[] = {
        "\xe2\x96\x88 final p, \xe2\x96\x91 raw p (softmax)",
        "top-k/top-p/min-p: which cut it",
        "\xe2\x86\x93 penalty, \xe2\x96\xb6 sampled, \xe2\x96\xb2 the draw u",
        "H: entropy in bits, raw \xe2\x86\x92 final",
    };
    const char *const *l = speculative ? spec_lines : lines;
    int n = speculative ? (int)(sizeof spec_lines / sizeof spec_lines[0])
                        : (int)(sizeof lines / sizeof lines[0]);
    if (1 + n > r.h) {
        l = speculative ? spec_short : lines_short;
        n = 4;
    }
    for (int i = 0; i < n && 1 + i < r.h; i++)
        ui_grid_puts(g, r.y + 1 + i, r.x + 1, r.x + r.w, l[i], UI_STYLE_DIM, 0);
}

void ui_histogram_draw(ui_grid *g, ui_rect r, const ui_hist_view *v)
{
    ui_grid_fill_rect(g, r, UI_STYLE_NORMAL);
    if (r.h <= 0 || r.w < 8)
        return;
    const sampler_snapshot *s = v->snap;
    char buf[160];
    int x0 = r.x, x1 = r.x + r.w;
    if (v->kind == UI_HIST_NONE || !s) {
        ui_grid_puts(g, r.y, x0, x1, "Next token", UI_STYLE_TITLE, UI_ATTR_BOLD);
        draw_legend(g, r, v->speculative);
        return;
    }
    /* Title */
    if (v->kind == UI_HIST_PEEK)
        snprintf(buf, sizeof buf, "Next token at %d (not drawn)", v->position);
    else if (v->label)
        snprintf(buf, sizeof buf, "%s \xc2\xb7 step %d \xc2\xb7 token %d", v->label, v->step + 1,
                 v->position);
    else
        snprintf(buf, sizeof buf, "Step %d \xc2\xb7 token %d%s", v->step + 1, v->position,
                 v->bonus ? " \xc2\xb7 no draft, drawn from p"
                 : !v->spec ? ""
                 : v->spec->accepted ? " \xc2\xb7 draft accepted"
                 : " \xc2\xb7 draft rejected, redrawn");
    ui_grid_puts(g, r.y, x0, x1, buf, UI_STYLE_TITLE, UI_ATTR_BOLD);

    /* Which rows: the first n entries, the chosen one always among them. */
    int avail = r.h - CHROME_ROWS;
    bool chrome = avail >= 1;
    if (!chrome)
        avail = r.h - 1;
    int n_top = top_count(s);
    int n = v->bars < n_top ? v->bars : n_top;
    if (n > avail)
        n = avail;
    if (n < 1)
        return;
    int chosen = -1;
    if (v->kind == UI_HIST_STEP)
        for (int i = 0; i < n_top; i++)
            if (s->top[i].id == s->token) {
                chosen = i;
                break;
            }
    int rows[TOP_CAP];
    for (int i = 0; i < n; i++)
        rows[i] = i;
    if (chosen >= n)
        rows[n - 1] = chosen;

    /* Columns: rank(2) marker(1) gap(1) token(tw) flag(1) gap(1) bar(bw) gap(1) raw(6) gap(1)
     * [temp(6) gap(1)] final(6). */
    bool tcol = v->temp_column && !v->draft;
    int extra = tcol ? 7 : 0;
    int tw = r.w >= 44 + extra ? 12 : r.w >= 36 + extra ? 9 : 6;
    int bw = r.w - (tw + 20 + extra);
    if (bw < 3) {
        tw = r.w - 23 - extra > 3 ? r.w - 23 - extra : 3;
        bw = r.w - (tw + 20 + extra);
    }
    int xt = x0 + 4, xf = xt + tw, xb = xf + 2, xr = xb + (bw > 0 ? bw : 0) + 1;
    int xtp = xr + 7, xp = xr + 7 + extra;
    int y = r.y + 1;
    if (chrome) {
        ui_grid_puts(g, y, x0, x1, " #", UI_STYLE_DIM, 0);
        ui_grid_puts(g, y, xt, x1, "token", UI_STYLE_DIM, 0);
        /* the bars' key in the order of the numbers after them: raw, then final (a speculative
         * step: the draft's q, then the target's p, whose final and raw values the bars show) */
        if (v->draft && bw >= 20)
            ui_grid_puts(g, y, xb, x1, "p\xe2\x96\x88 raw p\xe2\x96\x91 (q: draft)",
                         UI_STYLE_DIM, 0);
        else if (v->draft && bw >= 10)
            ui_grid_puts(g, y, xb, x1, "p\xe2\x96\x88 raw p\xe2\x96\x91", UI_STYLE_DIM, 0);
        else if (!v->draft && bw >= 11)
            ui_grid_puts(g, y, xb, x1, "raw\xe2\x96\x91 final\xe2\x96\x88", UI_STYLE_DIM, 0);
        ui_grid_puts(g, y, xr + (v->draft ? 5 : 3), x1, v->draft ? "q" : "raw", UI_STYLE_DIM, 0);
        if (tcol)
            ui_grid_puts(g, y, xtp + 2, x1, "temp", UI_STYLE_DIM, 0);
        ui_grid_puts(g, y, xp + (v->draft ? 5 : 1), x1, v->draft ? "p" : "final", UI_STYLE_DIM, 0);
        y++;
    }
    float scale = 0;
    for (int i = 0; i < n; i++) {
        const sampler_entry *e = &s->top[rows[i]];
        if (e->raw_p > scale)
            scale = e->raw_p;
        if (e->p > scale)
            scale = e->p;
    }
    for (int i = 0; i < n; i++, y++) {
        const sampler_entry *e = &s->top[rows[i]];
        bool is_chosen = rows[i] == chosen;
        uint8_t st = is_chosen ? UI_STYLE_CHOSEN : UI_STYLE_NORMAL;
        uint8_t at = is_chosen ? UI_ATTR_BOLD : 0;
        ui_grid_printf(g, y, x0, x0 + 2, UI_STYLE_DIM, 0, "%2d", rows[i] + 1);
        if (is_chosen)
            ui_grid_set(g, y, x0 + 2, 0x25b6, 1, UI_STYLE_CHOSEN, UI_ATTR_BOLD);   /* ▶ */
        char label[128];
        ui_histogram_token_label(v->tok, e->id, tw, label, sizeof label);
        ui_grid_puts(g, y, xt, xf, label, e->cut ? UI_STYLE_DIM : st, at);
        if (e->penalized)
            ui_grid_set(g, y, xf, 0x2193, 1, UI_STYLE_CUT, 0);   /* ↓ */
        if (bw > 0)
            draw_bar(g, y, xb, bw, e->p, e->raw_p, scale, e->cut != SAMPLER_CUT_NONE, 0);
        char pct[16];
        if (v->draft) {
            /* q of this token when it is among the draft's listed tokens, else a dot */
            const sampler_entry *q = NULL;
            for (int j = 0; j < v->draft->n_top && j < SAMPLER_TOP_MAX + 1; j++)
                if (v->draft->top[j].id == e->id)
                    q = &v->draft->top[j];
            if (q)
                ui_histogram_format_pct(q->p, pct, sizeof pct);
            else
                snprintf(pct, sizeof pct, "%6s", "\xc2\xb7");
        } else {
            ui_histogram_format_pct(e->raw_p, pct, sizeof pct);
        }
        ui_grid_puts(g, y, xr, x1, pct, UI_STYLE_DIM, 0);
        if (tcol) {
            ui_histogram_format_pct(e->temp_p, pct, sizeof pct);
            ui_grid_puts(g, y, xtp, x1, pct, UI_STYLE_DIM, 0);
        }
        const char *cut = cut_label(e->cut);
        if (cut)
            ui_grid_printf(g, y, xp, x1, UI_STYLE_CUT, 0, "%6s", cut);
        else {
            ui_histogram_format_pct(e->p, pct, sizeof pct);
            ui_grid_puts(g, y, xp, x1, pct, st, at);
        }
    }
    if (!chrome)
        return;
    draw_cumulative(g, y, x0, r.w, v, chosen);
    y += 2;
    snprintf(buf, sizeof buf, "H %.2f\xe2\x86\x92%.2f bits \xc2\xb7 kept %d of %d",
             (double)s->entropy_raw, (double)s->entropy_final, s->n_kept, v->vocab);
    ui_grid_puts(g, y, x0 + 1, x1, buf, UI_STYLE_DIM, 0);
}
