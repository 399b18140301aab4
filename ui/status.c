/* status.c: formatting and drawing the status bar. */
#include "ui/status.h"

#include <stdio.h>
#include <string.h>

#define SEP " \xe2\x94\x82 "   /* │ */

int ui_status_height(int screen_rows)
{
    return screen_rows >= 16 ? 2 : 1;
}

size_t ui_status_format(const ui_status_view *v, char *out, size_t cap)
{
    size_t o = 0;
#define ADD(...)                                                              \
    do {                                                                      \
        int n_ = snprintf(out + o, o < cap ? cap - o : 0, __VA_ARGS__);       \
        if (n_ > 0)                                                           \
            o = o + (size_t)n_ < cap ? o + (size_t)n_ : (cap ? cap - 1 : 0);  \
    } while (0)
    if (cap == 0)
        return 0;
    out[0] = 0;
    ADD(" %s" SEP "%s %s" SEP "%s", v->model ? v->model : "?", v->backend ? v->backend : "?",
        v->precision ? v->precision : "?", v->mode ? v->mode : "?");
    if (v->busy)
        ADD(SEP "generating %d", v->generated);
    else if (v->has_turn)
        ADD(SEP "%.1f tok/s" SEP "ttft %.0f ms", v->tok_s, v->ttft_ms);
    else
        ADD(SEP "- tok/s" SEP "ttft -");
    if (v->spec) {
        ADD(SEP "accept %.0f%% %.2f tok/pass", v->acceptance * 100, v->tokens_per_pass);
        if (v->speedup > 0 && !v->busy)
            ADD(" %.2fx plain", v->speedup);
    }
    ADD(SEP "KV %d/%d", v->kv_used, v->kv_total);
    if (v->has_turn || v->busy)
        ADD(SEP "reused %d prefilled %d", v->reused, v->prefilled);
#undef ADD
    return o;
}

void ui_status_draw(ui_grid *g, ui_rect r, const ui_status_view *v)
{
    ui_grid_fill_rect(g, r, UI_STYLE_STATUS);
    if (r.h <= 0 || r.w <= 0)
        return;
    char line[512], second[512];
    ui_status_format(v, line, sizeof line);
    snprintf(second, sizeof second, " %s" SEP "seed %llu" SEP "max %d", v->sampler ? v->sampler : "",
             (unsigned long long)v->seed, v->max_new);
    int x1 = r.x + r.w;
    if (r.h >= 2) {
        ui_grid_puts(g, r.y, r.x, x1, line, UI_STYLE_STATUS, 0);
        ui_grid_puts(g, r.y + 1, r.x, x1, second, UI_STYLE_STATUS, 0);
    } else {
        size_t n = strlen(line);
        snprintf(line + n, sizeof line - n, SEP "%.300s", second + 1);
        ui_grid_puts(g, r.y, r.x, x1, line, UI_STYLE_STATUS, 0);
    }
    if (v->message && *v->message) {
        int w = ui_text_width(v->message, strlen(v->message)) + 2;
        int x = x1 - w;
        int y = r.y + r.h - 1;
        if (x < r.x)
            x = r.x;
        ui_grid_fill(g, y, x, x1, ' ', UI_STYLE_STATUS, UI_ATTR_BOLD);
        ui_grid_puts(g, y, x + 1, x1, v->message, UI_STYLE_STATUS, UI_ATTR_BOLD);
    }
}
