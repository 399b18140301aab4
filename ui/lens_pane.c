/* lens_pane.c: the logit lens table (lens_pane.h). */
#include "ui/lens_pane.h"

#include <stdio.h>
#include <string.h>

#include "ui/histogram.h"

#define LENS_CHROME_ROWS 3      /* title, header, legend */

int ui_lens_pane_height(int n_layers)
{
    return n_layers + LENS_CHROME_ROWS;
}

int ui_lens_first_top1(const ui_lens_view *v)
{
    int first = -1;
    for (int l = v->n_layers - 1; l >= 0; l--) {
        const lens_layer *ly = &v->layers[l];
        if (ly->n_top < 1 || ly->top_id[0] != v->chosen)
            break;
        first = l;
    }
    return first;
}

/* A probability in 4 columns: "100%", " 53%", " <1%". */
static void pct4(double p, char *out, size_t cap)
{
    double pc = p * 100.0;
    if (pc < 0.5)
        snprintf(out, cap, " <1%%");
    else
        snprintf(out, cap, "%3.0f%%", pc);
}

/* The rows to show of n layers in m rows (m < n): the first, the last, evenly between. */
static int pick_layer(int i, int m, int n)
{
    if (m <= 1)
        return n - 1;
    return (int)((long)i * (n - 1) * 2 / (m - 1) + 1) / 2;
}

void ui_lens_pane_draw(ui_grid *g, ui_rect r, const ui_lens_view *v)
{
    ui_grid_fill_rect(g, r, UI_STYLE_NORMAL);
    if (r.h <= 0 || r.w < 24 || !v->layers || v->n_layers < 1)
        return;
    const int x0 = r.x, x1 = r.x + r.w, n = v->n_layers;
    char chosen[64], buf[256];
    ui_histogram_token_label(v->tok, v->chosen, 14, chosen, sizeof chosen);

    /* Rows: title, header, layers, legend; the legend goes first when short, then the header. */
    int avail = r.h - 1;
    bool header = avail >= 3, legend = avail - 1 >= n + 1 || avail >= 6;
    avail -= header + legend;
    int m = n < avail ? n : avail;
    if (m < 1)
        m = 1;
    if (v->drawn)
        snprintf(buf, sizeof buf, "Lens \xc2\xb7 step %d \xc2\xb7 token %d", v->step + 1,
                 v->position);
    else
        snprintf(buf, sizeof buf, "Lens \xc2\xb7 next token at %d", v->position);
    int x = ui_grid_puts(g, r.y, x0, x1, buf, UI_STYLE_TITLE, UI_ATTR_BOLD);
    if (m < n) {
        snprintf(buf, sizeof buf, " \xc2\xb7 %d of %d layers", m - 1, n - 1);
        ui_grid_puts(g, r.y, x, x1, buf, UI_STYLE_DIM, 0);
    }

    /* Columns: layer(3) gap(1) k x [token(tw) pct(4) gap(1)] gap p(6) gap(1) rank(6). */
    const int fixed = 3 + 1 + 1 + 6 + 1 + 6;
    int k = (r.w - fixed) / 12;
    if (k > 4)
        k = 4;
    if (k < 1)
        k = 1;
    int tw = (r.w - fixed) / k - 5;
    if (tw > 14)
        tw = 14;
    if (tw < 3)
        tw = 3;
    const int xp = x0 + 4 + k * (tw + 5) + 1, xr = xp + 7;
    int y = r.y + 1;
    if (header) {
        ui_grid_puts(g, y, x0, x1, "lyr", UI_STYLE_DIM, 0);
        ui_grid_puts(g, y, x0 + 4, x1, "top predictions", UI_STYLE_DIM, 0);
        char lab[64];
        ui_histogram_token_label(v->tok, v->chosen, 6, lab, sizeof lab);
        int lw = ui_text_width(lab, strlen(lab));
        ui_grid_puts(g, y, xp + 6 - (lw < 6 ? lw : 6), x1, lab, UI_STYLE_CHOSEN, 0);
        ui_grid_puts(g, y, xr, x1, "  rank", UI_STYLE_DIM, 0);
        y++;
    }
    for (int i = 0; i < m; i++, y++) {
        const lens_layer *ly = &v->layers[m < n ? pick_layer(i, m, n) : i];
        if (ly->layer == 0)
            ui_grid_puts(g, y, x0, x1, "emb", UI_STYLE_DIM, 0);
        else
            ui_grid_printf(g, y, x0, x1, UI_STYLE_DIM, 0, "%3d", ly->layer);
        for (int j = 0; j < k && j < ly->n_top; j++) {
            int xt = x0 + 4 + j * (tw + 5);
            char lab[64], pc[16];
            ui_histogram_token_label(v->tok, ly->top_id[j], tw, lab, sizeof lab);
            bool hit = ly->top_id[j] == v->chosen;
            ui_grid_puts(g, y, xt, xt + tw, lab, hit ? UI_STYLE_CHOSEN : UI_STYLE_NORMAL,
                         hit ? UI_ATTR_BOLD : 0);
            pct4(ly->top_p[j], pc, sizeof pc);
            ui_grid_puts(g, y, xt + tw, xt + tw + 4, pc, UI_STYLE_DIM, 0);
        }
        char pc[16];
        ui_histogram_format_pct(ly->p_token, pc, sizeof pc);
        ui_grid_puts(g, y, xp, x1, pc, ly->rank_token == 1 ? UI_STYLE_CHOSEN : UI_STYLE_NORMAL,
                     ly->rank_token == 1 ? UI_ATTR_BOLD : 0);
        ui_grid_printf(g, y, xr, x1, UI_STYLE_DIM, 0, "%6d", ly->rank_token);
    }
    if (legend && y < r.y + r.h) {
        int first = ui_lens_first_top1(v);
        if (first < 0)
            snprintf(buf, sizeof buf, "%s: p and rank by layer; the output ranks it %d",
                     v->drawn ? "drawn" : "output's top-1", v->layers[n - 1].rank_token);
        else if (first == 0)
            snprintf(buf, sizeof buf, "%s: top-1 from the embeddings on",
                     v->drawn ? "drawn" : "output's top-1");
        else
            snprintf(buf, sizeof buf, "%s: top-1 from layer %d of %d on",
                     v->drawn ? "drawn" : "output's top-1", first, n - 1);
        ui_grid_puts(g, y, x0, x1, buf, UI_STYLE_DIM, 0);
    }
}
