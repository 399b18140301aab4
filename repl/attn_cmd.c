/* attn_cmd.c: /attn, the attention view (attn_cmd.h). */
#include "repl/attn_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/text.h"
#include "core/base/util.h"
#include "core/engine/engine.h"
#include "core/tokenizer/tokenizer.h"

void attn_state_init(attn_state *a)
{
    memset(a, 0, sizeof *a);
    a->layer = a->head = -1;
    ui_doc_init(&a->overlay);
}

static void forget_steps(attn_state *a)
{
    for (int i = 0; i < a->n_steps; i++)
        attention_view_free(&a->steps[i]);
    a->n_steps = 0;
    a->back = 0;
}

void attn_state_free(attn_state *a)
{
    if (!a)
        return;
    forget_steps(a);
    free(a->w);
    ui_doc_free(&a->overlay);
    memset(a, 0, sizeof *a);
}

/* The module's state (made by cmd_env_add_module, freed by cmd_env_free); NULL when the module
 * is not added. */
static attn_state *state_of(const cmd_env *e)
{
    return cmd_env_state(e, &attn_cmd_module);
}

static void *state_create(void)
{
    attn_state *a = malloc(sizeof *a);
    if (a)
        attn_state_init(a);
    return a;
}

static void state_free(void *p)
{
    attn_state_free(p);
    free(p);
}

/* Another model: the steps kept describe the old one's tokens and layers; the view stays on
 * (capture_on turns the new engine's capture on) over the whole of the new model. */
static void model_changed(cmd_env *e)
{
    attn_state *a = state_of(e);
    if (!a)
        return;
    forget_steps(a);
    a->layer = a->head = -1;
}

/* ---------------------------------------------------------------------------------------------
 * The steps kept */

static size_t view_bytes(const attention_view *v)
{
    return (size_t)v->L * (size_t)v->NH * (size_t)v->n * sizeof(float);
}

/* Keeps v (taken over) as the latest step: it replaces the latest when both are the same step (a
 * rejected draft and its replacement, a peek after the last token); the oldest go while more
 * than ATTN_KEEP_STEPS or ATTN_KEEP_BYTES would be kept. */
static void keep(attn_state *a, attention_view *v)
{
    if (a->n_steps > 0 && a->steps[a->n_steps - 1].at == v->at &&
        a->steps[a->n_steps - 1].first == v->first) {
        attention_view_free(&a->steps[a->n_steps - 1]);
        a->steps[a->n_steps - 1] = *v;
        return;
    }
    size_t total = view_bytes(v);
    for (int i = 0; i < a->n_steps; i++)
        total += view_bytes(&a->steps[i]);
    int drop = 0;
    while (a->n_steps - drop > 0 &&
           (a->n_steps - drop >= ATTN_KEEP_STEPS || total > ATTN_KEEP_BYTES)) {
        total -= view_bytes(&a->steps[drop]);
        attention_view_free(&a->steps[drop++]);
    }
    memmove(a->steps, a->steps + drop, (size_t)(a->n_steps - drop) * sizeof a->steps[0]);
    a->n_steps -= drop;
    a->steps[a->n_steps++] = *v;
    a->back = 0;                   /* a new step: the view follows it */
}

/* The engine may have changed (/dtype, a device fallback): its capture goes on with the view. */
static bool capture_on(cmd_env *e)
{
    tt_error err;
    return e->s->eng->attention || engine_set_attention(e->s->eng, true, &err) == TT_OK;
}

void attn_cmd_track_step(cmd_env *e, const session_event *ev)
{
    attn_state *a = state_of(e);
    if (!a || !a->on || !capture_on(e))
        return;
    attention_view v;
    attention_view_init(&v);
    if (attention_view_take_event(&v, e->s, ev))
        keep(a, &v);
    else
        attention_view_free(&v);
}

void attn_cmd_track_peek(cmd_env *e)
{
    attn_state *a = state_of(e);
    if (!a || !a->on || !capture_on(e))
        return;
    attention_view v;
    attention_view_init(&v);
    if (attention_view_take_peek(&v, e->s))
        keep(a, &v);
    else
        attention_view_free(&v);
}

/* The step shown and its weights under the selection (a->w), or NULL. */
static const attention_view *shown(attn_state *a)
{
    if (!a || !a->on || a->n_steps == 0)
        return NULL;
    const attention_view *v = &a->steps[a->n_steps - 1 - a->back];
    if ((size_t)v->n > a->cap_w) {
        float *w = realloc(a->w, (size_t)v->n * sizeof *w);
        if (!w)
            return NULL;
        a->w = w;
        a->cap_w = (size_t)v->n;
    }
    int layer = a->layer < v->L ? a->layer : -1, head = a->head < v->NH ? a->head : -1;
    return attention_view_mean(v, layer, head, a->w) ? v : NULL;
}

bool attn_cmd_showing(const cmd_env *e)
{
    const attn_state *a = state_of(e);
    return a && a->on && a->n_steps > 0;
}

/* ---------------------------------------------------------------------------------------------
 * Drawing */

/* "mean of 6 layers x 12 heads", "layer 3, mean of 12 heads", "head 5 (KV head 1), mean of 6
 * layers", "layer 3, head 5". */
static void selection_name(const attn_state *a, const model_config *c, char *buf, size_t cap)
{
    char kv[32] = "";
    if (a->head >= 0 && c->NKV > 0 && c->NKV < c->NH)
        snprintf(kv, sizeof kv, " (KV head %d)", a->head / (c->NH / c->NKV));
    if (a->layer < 0 && a->head < 0)
        snprintf(buf, cap, "mean of %d layers x %d heads", c->L, c->NH);
    else if (a->head < 0)
        snprintf(buf, cap, "layer %d, mean of %d heads", a->layer, c->NH);
    else if (a->layer < 0)
        snprintf(buf, cap, "head %d%s, mean of %d layers", a->head, kv, c->L);
    else
        snprintf(buf, cap, "layer %d, head %d%s", a->layer, a->head, kv);
}

static size_t token_text(const session *s, int32_t id, char *buf, size_t cap)
{
    size_t nb = 0;
    const char *b = tokenizer_token_bytes(s->tok, id, &nb);
    return text_token_display(b ? b : "", b ? nb : 0, TEXT_ESCAPE_WHITESPACE, buf, cap);
}

int attn_cmd_pane_height(const cmd_env *e, int avail)
{
    const attn_state *a = state_of(e);
    if (!a || !a->on)
        return 0;
    int want = 2 + ATTN_PANE_TOP;      /* title, selection, the list */
    return want < avail / 2 ? want : avail / 2;
}

void attn_cmd_draw(cmd_env *e, ui_grid *g, ui_rect r, const session *s)
{
    attn_state *a = state_of(e);
    if (!a || r.h < 1 || r.w < 10)
        return;
    ui_grid_fill_rect(g, r, UI_STYLE_NORMAL);
    char sel[96];
    selection_name(a, &s->model->config, sel, sizeof sel);
    const attention_view *v = shown(a);
    if (r.h > 1)
        ui_grid_printf(g, r.y + 1, r.x, r.x + r.w, UI_STYLE_DIM, 0, " %s", sel);
    if (!v) {
        ui_grid_puts(g, r.y, r.x, r.x + r.w, "Attention", UI_STYLE_TITLE, 0);
        if (r.h > 2)
            ui_grid_puts(g, r.y + 2, r.x, r.x + r.w, " (shown from the next step on)",
                         UI_STYLE_DIM, 0);
        return;
    }
    char tok[64];
    size_t n = v->at < s->n_tokens ? token_text(s, s->tokens[v->at], tok, sizeof tok - 1) : 0;
    tok[n] = 0;
    int x = ui_grid_printf(g, r.y, r.x, r.x + r.w, UI_STYLE_TITLE, 0, "Attention \xc2\xb7 token %d",
                           v->at);
    if (n)
        x = ui_grid_printf(g, r.y, x, r.x + r.w, UI_STYLE_CHOSEN, 0, " %s", tok);
    else
        x = ui_grid_puts(g, r.y, x, r.x + r.w, " (next)", UI_STYLE_DIM, 0);
    if (a->back > 0)
        ui_grid_printf(g, r.y, x, r.x + r.w, UI_STYLE_DIM, 0, "  %d step%s back", a->back,
                       a->back == 1 ? "" : "s");
    int idx[ATTN_PANE_TOP];
    float w[ATTN_PANE_TOP];
    int rows = r.h - 2 < ATTN_PANE_TOP ? r.h - 2 : ATTN_PANE_TOP;
    int m = attention_view_top(v, a->w, rows, idx, w);
    for (int i = 0; i < m; i++) {
        int y = r.y + 2 + i;
        n = token_text(s, v->tokens[idx[i] - v->first], tok, sizeof tok - 1);
        tok[n] = 0;
        x = ui_grid_printf(g, y, r.x, r.x + r.w, UI_STYLE_DIM, 0, "%6d ", idx[i]);
        x = ui_grid_put(g, y, x, r.x + 18 < r.x + r.w ? r.x + 18 : r.x + r.w, tok, n,
                        UI_STYLE_NORMAL, 0);
        x = r.x + 19;
        x = ui_grid_printf(g, y, x, r.x + r.w, UI_STYLE_NORMAL, 0, "%5.3f ", (double)w[i]);
        int bar = (int)((double)w[i] * (r.x + r.w - x) + 0.5);
        if (bar > 0)
            ui_grid_fill(g, y, x, x + bar < r.x + r.w ? x + bar : r.x + r.w, 0x2588,
                         UI_STYLE_BAR, 0);
    }
}

const ui_doc *attn_cmd_overlay(cmd_env *e, const transcript_doc *tr)
{
    attn_state *a = state_of(e);
    const attention_view *v = shown(a);
    if (!v)
        return &tr->doc;
    ui_doc *o = &a->overlay;
    ui_doc_clear(o);
    if (!UTIL_RESERVE(o->chars, &o->cap, tr->doc.n, 1024))
        return &tr->doc;
    memcpy(o->chars, tr->doc.chars, tr->doc.n * sizeof *o->chars);
    o->n = tr->doc.n;
    const session *s = e->s;
    size_t b, end;
    for (int t = 0; t < v->n; t++) {
        int i = v->first + t;
        if (i >= s->n_tokens || s->tokens[i] != v->tokens[t] ||
            !transcript_doc_token_span(tr, i, &b, &end))
            continue;                  /* the conversation changed since (undo, regen) */
        float w = a->w[t];
        uint8_t style = w >= 0.2f ? UI_STYLE_ATTN_HOT : w >= 0.08f ? UI_STYLE_ATTN_WARM
                      : w >= 0.03f ? UI_STYLE_ATTN_MILD : 0;
        for (size_t c = b; c < end; c++) {
            if (style) {
                o->chars[c].style = style;
                o->chars[c].attr = 0;
            } else {
                o->chars[c].attr |= UI_ATTR_DIM;
            }
        }
    }
    if (v->at < s->n_tokens && transcript_doc_token_span(tr, v->at, &b, &end))
        for (size_t c = b; c < end; c++) {
            o->chars[c].style = UI_STYLE_CHOSEN;
            o->chars[c].attr = UI_ATTR_UNDERLINE;
        }
    return o;
}

/* ---------------------------------------------------------------------------------------------
 * The command */

tt_status attn_cmd_set(cmd_env *e, bool on, tt_error *err)
{
    attn_state *a = state_of(e);
    if (!a)
        return tt_fail(err, TT_ERR_UNSUPPORTED, "/attn: the attention view is not available here");
    tt_status st = engine_set_attention(e->s->eng, on, err);
    if (st != TT_OK)
        return st;
    a->on = on;
    if (!on)
        forget_steps(a);
    return TT_OK;
}

/* An index in [0, n) from s, or -1. */
static int parse_index(const char *s, int n)
{
    long v;
    if (util_parse_long(s, 0, n - 1, &v) != UTIL_PARSE_OK)
        return -1;
    return (int)v;
}

static int exec_attn(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    (void)c;
    attn_state *a = state_of(e);
    const model_config *cfg = &e->s->model->config;
    if (!a || e->line_mode)
        return cmd_fail(e, "/attn: the attention view is drawn in the terminal UI; line mode has "
                        "none (tokentop generate --json --attention lists the same)");
    const char *what = argc ? argv[0] : (a->on ? "off" : "on");
    bool two = strcmp(what, "layer") == 0 || strcmp(what, "head") == 0 || strcmp(what, "back") == 0;
    if (argc > (two ? 2 : 1))
        return cmd_fail(e, "/attn %s: too many arguments", what);
    bool turn_on = true;
    if (strcmp(what, "off") == 0) {
        turn_on = false;
    } else if (strcmp(what, "on") == 0) {
    } else if (strcmp(what, "avg") == 0) {
        a->layer = a->head = -1;
    } else if (strcmp(what, "layer") == 0 || strcmp(what, "head") == 0) {
        bool layer = what[0] == 'l';
        int n = layer ? cfg->L : cfg->NH;
        int v = argc == 2 ? parse_index(argv[1], n) : -1;
        if (v < 0)
            return cmd_fail(e, "/attn %s %s: this model's %s are 0 .. %d", what,
                            argc == 2 ? argv[1] : "(none)", layer ? "layers" : "heads", n - 1);
        if (layer)
            a->layer = v;
        else
            a->head = v;
    } else if (strcmp(what, "back") == 0 || strcmp(what, "latest") == 0) {
        int by = 0;
        if (what[0] == 'b') {
            long k = 1;
            if (argc == 2 && util_parse_long(argv[1], 1, ATTN_KEEP_STEPS, &k) != UTIL_PARSE_OK)
                return cmd_fail(e, "/attn back %s: give a number of steps, 1 .. %d", argv[1],
                                ATTN_KEEP_STEPS);
            by = a->back + (int)k;
            if (!a->on || by >= a->n_steps)
                return cmd_fail(e, "/attn back: %d earlier step%s kept (the view keeps the last "
                                "%d while it is on)", a->n_steps > 0 ? a->n_steps - 1 : 0,
                                a->n_steps == 2 ? " is" : "s are", ATTN_KEEP_STEPS);
        }
        a->back = by;
        cmd_out(e, "attention view: %s\n", by ? "an earlier step" : "the latest step");
        return CMD_DONE;
    } else if (strchr(what, '.')) {
        /* N.H: head H of layer N */
        char *dot = strchr(what, '.');
        *dot = 0;
        int l = parse_index(what, cfg->L), h = parse_index(dot + 1, cfg->NH);
        *dot = '.';
        if (l < 0 || h < 0)
            return cmd_fail(e, "/attn %s: layer.head, layers 0 .. %d, heads 0 .. %d", what,
                            cfg->L - 1, cfg->NH - 1);
        a->layer = l;
        a->head = h;
    } else {
        return cmd_fail(e, "/attn %s: give on, off, avg, layer N, head N, N.H, back [N] or "
                        "latest", what);
    }
    tt_error err = {0};
    if (turn_on != a->on && attn_cmd_set(e, turn_on, &err) != TT_OK)
        return cmd_fail(e, "/attn: %s", err.msg);
    if (!turn_on) {
        cmd_out(e, "attention view off\n");
        return CMD_STATUS | CMD_LAYOUT;
    }
    char sel[96];
    selection_name(a, cfg, sel, sizeof sel);
    cmd_out(e, "attention view on: %s%s\n", sel,
            a->n_steps ? "" : " (from the next step on)");
    /* the histogram stays on its step; with no step kept yet, the next position's gives one */
    return CMD_STATUS | CMD_LAYOUT | (a->n_steps ? 0 : CMD_PEEK);
}

static const cmd_entry attn_rows[] = {
    {.name = "attn", .alias = NULL,
     .args = "[on|off|avg|layer N|head N|N.H|back [N]|latest]",
     .usage = "attention view: colour the transcript by what the step shown attended to, list "
              "the top earlier tokens (mean of layers and heads, or one layer, head, or N.H)",
     .min_args = 0, .max_args = 2, .busy_ok = true, .param = NULL,
     .exec = exec_attn, .group = CMD_GROUP_DISPLAY},
};

const cmd_module attn_cmd_module = {
    .name = "attn",
    .rows = attn_rows,
    .n_rows = (int)(sizeof attn_rows / sizeof attn_rows[0]),
    .show = NULL,
    .env_free = NULL,
    .state_create = state_create,
    .state_free = state_free,
    .model_changed = model_changed,
};
