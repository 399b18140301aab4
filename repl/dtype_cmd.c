/* dtype_cmd.c: /dtype: the precision switch and the two-precision comparison (dtype_cmd.h). */
#include "repl/dtype_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/clock.h"
#include "ui/histogram_pair.h"

#define DTYPE_NAMES "fp32, fp16, bf16 or q8"

static double mib(size_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

dtype_cmd_state *dtype_cmd_of(const cmd_env *e)
{
    return cmd_env_state(e, &dtype_cmd_module);
}

void dtype_cmd_compare_off(cmd_env *e)
{
    dtype_cmd_state *ds = dtype_cmd_of(e);
    if (!ds)
        return;
    engine_free(ds->cmp);
    ds->cmp = NULL;
    ds->has_view = false;
}

const char *dtype_cmd_status(const cmd_env *e, char *buf, size_t cap)
{
    const engine *eng = e->s->eng;
    const dtype_cmd_state *ds = dtype_cmd_of(e);
    if (ds && ds->cmp)
        snprintf(buf, cap, "%s vs %s", tt_dtype_name(eng->dtype), tt_dtype_name(ds->cmp->dtype));
    else
        snprintf(buf, cap, "%s", tt_dtype_name(eng->dtype));
    return buf;
}

void dtype_cmd_show(cmd_env *e)
{
    const engine *eng = e->s->eng;
    const dtype_cmd_state *ds = dtype_cmd_of(e);
    cmd_out(e, "precision   %s weights (%.1f MiB held)", tt_dtype_name(eng->dtype),
                mib(eng->memory_bytes));
    if (ds && ds->cmp)
        cmd_out(e, "; compared with %s on a second engine (%.1f MiB more; /dtype compare "
                    "off frees it)\n", tt_dtype_name(ds->cmp->dtype), mib(ds->cmp->memory_bytes));
    else
        cmd_out(e, "; no comparison (/dtype compare T)\n");
}

/* The comparison for the window's first n tokens, the reference's logits there being ref. */
static tt_status track(cmd_env *e, int n, const float *ref, tt_error *err)
{
    dtype_cmd_state *ds = dtype_cmd_of(e);
    if (!ds)
        return TT_OK;
    ds->has_view = false;
    session *s = e->s;
    if (!ds->cmp || !ref || n < 1)
        return TT_OK;
    ds->cmp->interrupt = s->interrupt;   /* a long prefill of the comparison stops on Ctrl-C */
    tt_status st = dtype_compare_at(ds->cmp, s->tokens + s->window_start, n, ref, s->eng->dtype,
                                    &e->hist.snap, &ds->view, err);
    ds->cmp->interrupt = NULL;
    if (st != TT_OK) {
        dtype_cmd_compare_off(e);
        return st;
    }
    ds->has_view = true;
    return TT_OK;
}

tt_status dtype_cmd_track_step(cmd_env *e, const session_event *ev, tt_error *err)
{
    const session *s = e->s;
    return track(e, s->n_tokens - 1 - s->window_start, ev->snap ? ev->logits : NULL, err);
}

tt_status dtype_cmd_track_peek(cmd_env *e, tt_error *err)
{
    const session *s = e->s;
    return track(e, s->n_tokens - s->window_start,
                 engine_logits(s->eng, s->eng->n_logits - 1), err);
}

bool dtype_cmd_draw(const cmd_env *e, ui_grid *g, ui_rect r)
{
    const dtype_cmd_state *ds = dtype_cmd_of(e);
    if (!ds || !ds->cmp || !ds->has_view)
        return false;
    ui_pair_view v = {
        .kind = e->hist.kind,
        .cmp = &ds->view,
        .tok = e->s->tok,
        .bars = e->bars,
        .step = e->hist.step,
        .position = e->hist.pos,
        .chosen = e->hist.kind == UI_HIST_STEP ? e->hist.snap.token : -1,
    };
    ui_histogram_pair_draw(g, r, &v);
    return true;
}

/* The comparison as text (line mode, where there is no histogram pane). */
static void print_table(cmd_env *e)
{
    const dtype_compare *c = &dtype_cmd_of(e)->view;
    const char *ra = tt_dtype_name(c->ref_dtype), *rb = tt_dtype_name(c->dtype);
    enum { TW = 12, BW = 12 };
    cmd_out(e, "\nnext token at %d, raw p: %s vs %s\n", e->hist.pos, ra, rb);
    /* Δ is 2 bytes and 1 column: %8s pads it to 7 columns */
    cmd_out(e, " #  %-*s %*s  %*s  %8s\n", TW, "token", BW + 7, ra, BW + 7, rb, "\xce\x94p");
    int n = e->bars < c->n_top ? e->bars : c->n_top;
    double scale = 0;
    for (int i = 0; i < n; i++)
        scale = c->top_p[i] > scale ? c->top_p[i] : c->top_q[i] > scale ? c->top_q[i] : scale;
    for (int i = 0; i < n; i++) {
        char label[128], ba[128], bb[128], d[32];
        ui_histogram_token_label(e->s->tok, c->top_id[i], TW, label, sizeof label);
        int pad = TW - ui_text_width(label, strlen(label));
        ui_histogram_pair_bar(c->top_p[i], scale, BW, ba, sizeof ba);
        ui_histogram_pair_bar(c->top_q[i], scale, BW, bb, sizeof bb);
        ui_histogram_pair_delta((double)c->top_q[i] - c->top_p[i], d, sizeof d);
        cmd_out(e, "%2d  %s%*s %s %5.1f%%  %s %5.1f%%  %7s\n", i + 1, label,
                    pad > 0 ? pad : 0, "", ba, (double)c->top_p[i] * 100, bb,
                    (double)c->top_q[i] * 100, d);
    }
    char l1[200], l2[200];
    ui_histogram_pair_summary(c, e->s->tok, false, l1, sizeof l1, l2, sizeof l2);
    cmd_out(e, "%s\n%s", l1, l2);
}

/* Runs both engines at the end of the conversation and puts the comparison in the histogram
 * (and, in line mode, the table in the output). */
static int compare_now(cmd_env *e, int flags)
{
    session *s = e->s;
    const dtype_cmd_state *ds = dtype_cmd_of(e);
    if (s->n_tokens == 0) {
        cmd_out(e, " (nothing to compare yet: type a prompt)");
        return flags;
    }
    tt_error err = {0};
    tt_status st = session_peek(s, &e->hist.snap, &err);
    if (st == TT_OK) {
        e->hist.kind = UI_HIST_PEEK;
        e->hist.pos = s->n_tokens;
        e->hist.has_draft = e->hist.bonus = false;
        st = dtype_cmd_track_peek(e, &err);
    }
    if (st != TT_OK)
        return cmd_fail(e, "/dtype compare: %s", err.msg) | flags;
    if (e->line_mode) {
        print_table(e);
    } else {
        char l1[200], l2[200];
        ui_histogram_pair_summary(&ds->view, s->tok, false, l1, sizeof l1, l2, sizeof l2);
        cmd_out(e, "\n%s \xc2\xb7 %s", l1, l2);
    }
    return flags;
}

static int compare_cmd(cmd_env *e, const char *arg)
{
    session *s = e->s;
    dtype_cmd_state *ds = dtype_cmd_of(e);
    if (!arg) {
        if (!ds->cmp)
            return cmd_fail(e, "/dtype compare: no comparison is on (/dtype compare T, T one of "
                            DTYPE_NAMES ")");
        cmd_out(e, "%s compared with %s", tt_dtype_name(s->eng->dtype),
                    tt_dtype_name(ds->cmp->dtype));
        return compare_now(e, CMD_DONE);
    }
    if (strcmp(arg, "off") == 0) {
        if (!ds->cmp) {
            cmd_out(e, "no comparison was on");
            return CMD_DONE;
        }
        double freed = mib(ds->cmp->memory_bytes);
        dtype_cmd_compare_off(e);
        cmd_out(e, "comparison off: the second engine's %.1f MiB are freed", freed);
        return CMD_STATUS | CMD_PEEK;
    }
    tt_dtype d;
    if (tt_dtype_parse(arg, &d) != 0)
        return cmd_fail(e, "/dtype compare: '%s' is not " DTYPE_NAMES " or off (%s)", arg,
                        ds->cmp ? "the comparison stays as it was" : "the comparison stays off");
    if (d == s->eng->dtype)
        return cmd_fail(e, "/dtype compare %s: the weights are %s already; compare with another "
                        "precision (" DTYPE_NAMES ")", arg, tt_dtype_name(d));
    if (!e->host || !e->host->make_engine)
        return cmd_fail(e, "/dtype compare: a second engine cannot be made here");
    if (ds->cmp && ds->cmp->dtype == d) {
        cmd_out(e, "%s compared with %s", tt_dtype_name(s->eng->dtype), tt_dtype_name(d));
        return compare_now(e, CMD_DONE);
    }
    /* The old comparison engine goes first: two comparison engines never coexist. */
    dtype_cmd_compare_off(e);
    engine *ne = NULL;
    tt_error err = {0};
    if (e->host->make_engine(e->host->user, d, &ne, &err) != TT_OK)
        return cmd_fail(e, "/dtype compare %s: %s (the comparison is off)", tt_dtype_name(d),
                        err.msg);
    ds->cmp = ne;
    cmd_out(e, "comparing %s with %s: a second engine holds the weights again (%.1f MiB more; "
                "/dtype compare off frees it)", tt_dtype_name(s->eng->dtype), tt_dtype_name(d),
                mib(ne->memory_bytes));
    return compare_now(e, CMD_STATUS | CMD_PEEK);
}

static int switch_cmd(cmd_env *e, const char *arg)
{
    session *s = e->s;
    dtype_cmd_state *ds = dtype_cmd_of(e);
    engine *old = s->eng;
    const char *was = tt_dtype_name(old->dtype);
    tt_dtype d;
    if (tt_dtype_parse(arg, &d) != 0)
        return cmd_fail(e, "/dtype: '%s' is not " DTYPE_NAMES " (kept %s)", arg, was);
    if (d == old->dtype) {
        cmd_out(e, "the weights are %s already", was);
        return CMD_DONE;
    }
    if (!e->host || !e->host->make_engine || !e->host->adopt_engine)
        return cmd_fail(e, "/dtype: switching precision is not available here (start with --dtype "
                        "%s)", tt_dtype_name(d));
    if (s->gen)   /* step mode keeps a generation open; it ends here like for other edits */
        session_gen_end(s, SESSION_STOP_INTERRUPTED, NULL, NULL);
    engine *ne = NULL;
    tt_error err = {0};
    if (e->host->make_engine(e->host->user, d, &ne, &err) != TT_OK)
        return cmd_fail(e, "/dtype %s: %s (kept %s)", tt_dtype_name(d), err.msg, was);
    double t0 = tt_now_ms();
    int prefilled = 0;
    tt_status st = session_set_engine(s, ne, &prefilled, &err);
    if (st != TT_OK) {
        engine_free(ne);
        return cmd_fail(e, "/dtype %s: %s (kept %s; the conversation and its cache are unchanged)",
                        tt_dtype_name(d), st == TT_ERR_INTERRUPTED ? "interrupted" : err.msg, was);
    }
    double ms = tt_now_ms() - t0;
    e->host->adopt_engine(e->host->user, old, ne);
    e->engine_desc = ne->description;
    e->backend = ne->ops->name;
    ds->has_view = false;
    cmd_out(e, "weights now %s (were %s): %s; the conversation's %d tokens were prefilled "
                "again in %.0f ms", tt_dtype_name(d), was, ne->description, prefilled, ms);
    if (ds->cmp && ds->cmp->dtype == d)
        cmd_out(e, "; the comparison engine is %s too (/dtype compare T for another precision)",
                    tt_dtype_name(d));
    return CMD_STATUS | CMD_PEEK;
}

int dtype_cmd_exec(cmd_env *e, const cmd_entry *c, int argc, char **argv)
{
    if (argc == 0) {
        dtype_cmd_show(e);
        if (e->out_len > 0 && e->out[e->out_len - 1] == '\n')
            e->out[--e->out_len] = 0;    /* no newline at the end of a message */
        return CMD_DONE;
    }
    if (strcmp(argv[0], "compare") == 0)
        return compare_cmd(e, argc > 1 ? argv[1] : NULL);
    if (argc > 1)
        return cmd_fail(e, "/dtype: too many arguments (usage: /dtype %s)", c->args);
    return switch_cmd(e, argv[0]);
}

/* ---------------------------------------------------------------------------------------------
 * The command this module registers (cmd_env_add_module) */

static const cmd_entry dtype_rows[] = {
    {.name = "dtype", .alias = NULL, .args = "[T|compare [T|off]]",
     .usage = "weight precision T (fp32, fp16, bf16, q8): switch, prefilling the conversation "
              "again; compare T: the histogram shows p under both on a second engine (twice "
              "the weight memory; compare off frees it)",
     .min_args = 0, .max_args = 2, .busy_ok = false, .param = NULL,
     .exec = dtype_cmd_exec, .group = CMD_GROUP_SESSION},
};

static void *state_create(void)
{
    return calloc(1, sizeof(dtype_cmd_state));
}

/* The comparison engine holds the old model's weights: it goes with it. */
static void model_changed(cmd_env *e)
{
    dtype_cmd_state *ds = dtype_cmd_of(e);
    if (!ds || !ds->cmp)
        return;
    const char *d = tt_dtype_name(ds->cmp->dtype);
    dtype_cmd_compare_off(e);
    cmd_out(e, "the %s comparison is off: its engine held the old model (/dtype compare %s "
            "compares the new one)", d, d);
}

/* The state and its comparison engine. */
static void state_free(void *state)
{
    dtype_cmd_state *ds = state;
    if (ds)
        engine_free(ds->cmp);
    free(ds);
}

const cmd_module dtype_cmd_module = {
    .name = "dtype",
    .rows = dtype_rows,
    .n_rows = (int)(sizeof dtype_rows / sizeof dtype_rows[0]),
    .show = dtype_cmd_show,
    .env_free = NULL,
    .state_create = state_create,
    .state_free = state_free,
    .model_changed = model_changed,
};
