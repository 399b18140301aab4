/* lens_cmd.c: /lens: the logit lens of the step on screen (lens_cmd.h). */
#include "repl/lens_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/clock.h"
#include "core/session/session_lens.h"
#include "ui/lens_pane.h"

/* Tokens a layer's row keeps (the pane shows as many as its width allows). */
#define LENS_CMD_TOP 4

/* The view: on or off, and the lens of one position. A position is named by what the histogram
 * shows there (its kind, step and index) and by the tokens that decide it, so a lens computed
 * before an edit of the conversation is never shown after it. */
typedef struct lens_state {
    bool on;
    bool valid;                    /* layers describe the position below */
    ui_hist_kind kind;
    int pos, step, n_tokens;
    int32_t chosen;                /* the token drawn at pos, or the output's top-1 */
    bool drawn;
    lens_layer *layers;            /* (n_layers) */
    int n_layers;
    double ms;                     /* what computing it took */
} lens_state;

/* The module's state (made by cmd_env_add_module, freed by cmd_env_free); NULL when the module
 * is not added. */
static lens_state *state_of(const cmd_env *e)
{
    return cmd_env_state(e, &lens_cmd_module);
}

static void *state_create(void)
{
    return calloc(1, sizeof(lens_state));
}

static void state_free(void *p)
{
    lens_state *st = p;
    if (st)
        free(st->layers);
    free(st);
}

/* Another model: a lens computed over the old one describes nothing now. */
static void model_changed(cmd_env *e)
{
    lens_state *st = state_of(e);
    if (st)
        st->valid = false;
}

/* The position the histogram shows; false when it shows none. Line mode keeps no histogram:
 * there it is the last token of a turn that generated, else the next token. */
static bool target(const cmd_env *e, ui_hist_kind *kind, int *pos, int *step)
{
    const session *s = e->s;
    if (e->hist.kind != UI_HIST_NONE) {
        *kind = e->hist.kind;
        *pos = e->hist.pos;
        *step = e->hist.step;
        return *pos <= s->n_tokens;
    }
    if (!e->line_mode || s->n_tokens == 0)
        return false;
    if (s->last.generated_tokens > 0 && !s->gen) {
        *kind = UI_HIST_STEP;
        *pos = s->n_tokens - 1;
        *step = s->last.generated_tokens - 1;
    } else {
        *kind = UI_HIST_PEEK;
        *pos = s->n_tokens;
        *step = 0;
    }
    return true;
}

static bool describes(const lens_state *st, const session *s, ui_hist_kind kind, int pos, int step)
{
    return st->valid && st->kind == kind && st->pos == pos && st->step == step &&
           st->n_tokens == s->n_tokens &&
           (kind != UI_HIST_STEP || (pos < s->n_tokens && s->tokens[pos] == st->chosen));
}

/* Computes the lens at the histogram's position into the state. */
static tt_status compute(cmd_env *e, lens_state *st, ui_hist_kind kind, int pos, int step,
                         tt_error *err)
{
    session *s = e->s;
    const int n = s->model->config.L + 1;
    if (st->n_layers != n) {
        lens_layer *p = realloc(st->layers, (size_t)n * sizeof *p);
        if (!p)
            return tt_fail(err, TT_ERR_NOMEM, "lens: out of memory");
        st->layers = p;
        st->n_layers = n;
    }
    st->valid = false;
    double t0 = tt_now_ms();
    tt_status r = session_lens(s, pos, LENS_CMD_TOP, st->layers, &st->chosen, err);
    if (r != TT_OK)
        return r;
    st->ms = tt_now_ms() - t0;
    st->kind = kind;
    st->pos = pos;
    st->step = step;
    st->n_tokens = s->n_tokens;
    st->drawn = pos < s->n_tokens;   /* else the output's top-1 stands for the next token */
    st->valid = true;
    return TT_OK;
}

static ui_lens_view view_of(const cmd_env *e, const lens_state *st)
{
    return (ui_lens_view){.layers = st->layers, .n_layers = st->n_layers, .tok = e->s->tok,
                          .drawn = st->drawn, .chosen = st->chosen, .step = st->step,
                          .position = st->pos};
}

/* One line: where the chosen token becomes the top prediction. */
static void summary(cmd_env *e, const lens_state *st)
{
    ui_lens_view v = view_of(e, st);
    char tok[64];
    ui_histogram_token_label(e->s->tok, st->chosen, 20, tok, sizeof tok);
    const int L = st->n_layers - 1, first = ui_lens_first_top1(&v);
    if (st->drawn)
        cmd_out(e, "lens at token %d: the drawn %s (p %.1f%% at the output) ", st->pos, tok,
                (double)st->layers[L].p_token * 100.0);
    else
        cmd_out(e, "lens at token %d (not drawn yet): the output's top-1 %s ", st->pos, tok);
    if (first < 0)
        cmd_out(e, "is not the output's top-1 (rank %d)", st->layers[L].rank_token);
    else if (first == 0)
        cmd_out(e, "is the top prediction from the embeddings on");
    else
        cmd_out(e, "is the top prediction from layer %d of %d on", first, L);
    cmd_out(e, " (%d layers, %.1f ms)", L, st->ms);
}

/* The table as text (line mode): the pane drawn into a grid 80 columns wide. */
static void print_table(cmd_env *e, const lens_state *st)
{
    ui_lens_view v = view_of(e, st);
    ui_grid g;
    int rows = ui_lens_pane_height(st->n_layers);
    if (!ui_grid_init(&g, rows, 80))
        return;
    ui_lens_pane_draw(&g, (ui_rect){0, 0, rows, 80}, &v);
    char line[512];
    for (int y = 0; y < rows; y++) {
        ui_grid_row_text(&g, y, line, sizeof line);
        cmd_out(e, "\n%s", line);
    }
    ui_grid_free(&g);
}

int lens_cmd_exec(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    lens_state *st = state_of(e);
    if (!st)
        return cmd_fail(e, "/lens: out of memory");
    if (argc == 1) {
        if (strcmp(argv[0], "off") != 0)
            return cmd_fail(e, "/lens: '%s' is not off (usage: /lens %s)", argv[0], c->args);
        if (!st->on) {
            cmd_out(e, "the lens was off");
            return CMD_DONE;
        }
        st->on = false;
        cmd_out(e, "lens off: the histogram is back");
        return CMD_DONE;
    }
    ui_hist_kind kind;
    int pos, step;
    if (!target(e, &kind, &pos, &step))
        return cmd_fail(e, "/lens: no step on screen yet: type a prompt (the lens shows the "
                        "step the histogram shows)");
    tt_error err = {0};
    if (!describes(st, e->s, kind, pos, step) && compute(e, st, kind, pos, step, &err) != TT_OK) {
        st->on = false;
        return cmd_fail(e, "/lens: %s", err.msg);
    }
    st->on = !e->line_mode;
    summary(e, st);
    if (e->line_mode)
        print_table(e, st);
    return CMD_DONE;
}

tt_status lens_cmd_track(cmd_env *e, tt_error *err)
{
    lens_state *st = state_of(e);
    ui_hist_kind kind;
    int pos, step;
    if (!st || !st->on || e->busy || !target(e, &kind, &pos, &step) ||
        describes(st, e->s, kind, pos, step))
        return TT_OK;
    tt_status r = compute(e, st, kind, pos, step, err);
    if (r != TT_OK)
        st->on = false;
    return r;
}

bool lens_cmd_draw(const cmd_env *e, ui_grid *g, ui_rect r)
{
    const lens_state *st = state_of(e);
    if (!st || !st->on || !describes(st, e->s, e->hist.kind, e->hist.pos, e->hist.step))
        return false;
    ui_lens_view v = view_of(e, st);
    ui_lens_pane_draw(g, r, &v);
    return true;
}

int lens_cmd_height(const cmd_env *e, int hist_rows)
{
    const lens_state *st = state_of(e);
    if (!st || !st->on || !st->valid)
        return hist_rows;
    int h = ui_lens_pane_height(st->n_layers);
    return h > hist_rows ? h : hist_rows;
}

static void lens_cmd_show(cmd_env *e)
{
    const lens_state *st = state_of(e);
    if (st && st->on && st->valid)
        cmd_out(e, "lens        on: the histogram's pane shows the lens of the step on screen "
                   "(last at token %d, %.1f ms; /lens off)\n", st->pos, st->ms);
    else
        cmd_out(e, "lens        off (/lens shows the lens of the step on screen)\n");
}

/* ---------------------------------------------------------------------------------------------
 * The command this module registers (cmd_env_add_module) */

static const cmd_entry lens_rows[] = {
    {.name = "lens", .alias = NULL, .args = "[off]",
     .usage = "logit lens of the step on screen: what each layer alone would predict (top "
              "tokens) and the drawn token's p and rank, layer by layer, in the histogram's "
              "pane; it follows the steps until /lens off",
     .min_args = 0, .max_args = 1, .busy_ok = false, .param = NULL,
     .exec = lens_cmd_exec, .group = CMD_GROUP_DISPLAY},
};

const cmd_module lens_cmd_module = {
    .name = "lens",
    .rows = lens_rows,
    .n_rows = (int)(sizeof lens_rows / sizeof lens_rows[0]),
    .show = lens_cmd_show,
    .state_create = state_create,
    .state_free = state_free,
    .model_changed = model_changed,
};
