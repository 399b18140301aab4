/* compare.c: /beam, /samples, /compare and /keep (compare.h). */
#include "repl/compare.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/decode/beam.h"
#include "core/session/samples.h"
#include "core/base/text.h"
#include "core/tokenizer/tokenizer.h"
#include "core/base/util.h"

/* ---------------------------------------------------------------------------------------------
 * Columns */

void compare_init(compare_state *c)
{
    memset(c, 0, sizeof *c);
    c->kept = -1;
}

void compare_free(compare_state *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->cols_cap; i++) {
        free(c->cols[i].ids);
        free(c->cols[i].info);
        free(c->cols[i].raw_logprob);
        free(c->cols[i].text);
    }
    free(c->cols);
    free(c->base);
    compare_init(c);
}

static void columns_clear(compare_state *c)
{
    for (int i = 0; i < c->cols_cap; i++) {
        compare_column *col = &c->cols[i];
        col->n = 0;
        col->len = 0;
        if (col->text)
            col->text[0] = 0;
        memset(&col->fig, 0, sizeof col->fig);
        col->label[0] = col->figures[0] = 0;
        col->logprob = col->score = 0;
        col->end = NULL;
        col->dim = false;
        col->last_step = -1;
    }
    c->n_cols = 0;
}

/* Makes n columns exist (cleared); false when out of memory. */
static bool columns_open(compare_state *c, int n)
{
    if (n > c->cols_cap) {
        compare_column *m = realloc(c->cols, (size_t)n * sizeof *m);
        if (!m)
            return false;
        memset(m + c->cols_cap, 0, (size_t)(n - c->cols_cap) * sizeof *m);
        c->cols = m;
        c->cols_cap = n;
    }
    columns_clear(c);
    c->n_cols = n;
    return true;
}

static bool column_push(compare_column *col, int32_t id, token_origin origin, float p,
                        double raw_logprob)
{
    if (col->n == col->cap) {
        int cap = col->cap ? 2 * col->cap : 64;
        int32_t *ids = realloc(col->ids, (size_t)cap * sizeof *ids);
        if (ids)
            col->ids = ids;
        token_info *info = realloc(col->info, (size_t)cap * sizeof *info);
        if (info)
            col->info = info;
        double *lp = realloc(col->raw_logprob, (size_t)cap * sizeof *lp);
        if (lp)
            col->raw_logprob = lp;
        if (!ids || !info || !lp)
            return false;
        col->cap = cap;
    }
    col->ids[col->n] = id;
    col->info[col->n] = (token_info){.origin = (uint8_t)origin, .p = p};
    col->raw_logprob[col->n] = raw_logprob;
    col->n++;
    return true;
}

/* Appends text for the screen: control characters other than newline become blanks. */
static void column_text_add(compare_column *col, const char *s, size_t n)
{
    if (!util_reserve(&col->text, &col->text_cap, col->len + n + 1, 256))
        return;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        col->text[col->len++] = (ch < 0x20 && ch != '\n') || ch == 0x7f ? ' ' : (char)ch;
    }
    col->text[col->len] = 0;
}

/* The column's text from its ids (the end token left out), bytes outside characters as \xNN. */
static void column_text_from_ids(compare_column *col, const tokenizer *tok, int32_t eos)
{
    col->len = 0;
    column_text_add(col, "", 0);
    int n = col->n;
    if (n > 0 && col->ids[n - 1] == eos)
        n--;
    char *raw = NULL;
    size_t raw_len = 0;
    if (n <= 0 || tokenizer_decode(tok, col->ids, n, &raw, &raw_len, NULL) != TT_OK)
        return;
    size_t cap = 4 * raw_len + 1;
    char *shown = malloc(cap);
    if (shown) {
        size_t len = text_token_display(raw, raw_len, TEXT_ESCAPE_BYTES, shown, cap);
        column_text_add(col, shown, len);
    }
    free(shown);
    free(raw);
}

static void column_figures(compare_column *col)
{
    diversity_compute(&col->fig, col->ids, col->raw_logprob, col->n);
    if (col->fig.tokens == 0)
        snprintf(col->figures, sizeof col->figures, "no tokens");
    else if (col->fig.distinct2 < 0)
        snprintf(col->figures, sizeof col->figures, "lp %.2f d2 - rep3 0", col->fig.mean_logprob);
    else
        snprintf(col->figures, sizeof col->figures, "lp %.2f d2 %.2f rep3 %d",
                 col->fig.mean_logprob, col->fig.distinct2, col->fig.repeated3);
}

/* ---------------------------------------------------------------------------------------------
 * The commands that arm a request */

static const char *kind_command(compare_kind k)
{
    return k == COMPARE_BEAM ? "/beam" : k == COMPARE_SAMPLES ? "/samples" : "/compare";
}

const char *compare_pending_line(const compare_state *c, char *buf, size_t cap)
{
    if (!c || c->pending == COMPARE_NONE)
        return NULL;
    if (c->pending == COMPARE_BEAM)
        snprintf(buf, cap, "next line: beam search with %d beams (/beam off cancels)", c->n);
    else if (c->pending == COMPARE_SAMPLES)
        snprintf(buf, cap, "next line: %d samples (/samples off cancels)", c->n);
    else
        snprintf(buf, cap, "next line: /compare %s over %d value%s (/compare off cancels)",
                 c->setting->name, c->n, c->n == 1 ? "" : "s");
    return buf;
}

/* What every arming command does first: no arguments shows what is armed, "off" disarms.
 * Returns -1 when the arguments are for the command itself. */
static int show_or_cancel(cmd_env *e, compare_kind kind, int argc, char **argv)
{
    compare_state *c = compare_cmd_of(e);
    if (!c)
        return cmd_fail(e, "%s: not available here", kind_command(kind));
    char line[160];
    if (argc == 0) {
        const char *p = compare_pending_line(c, line, sizeof line);
        cmd_out(e, "%s", p ? p : "nothing armed");
        if (!p && kind == COMPARE_BEAM)
            cmd_out(e, " (/beam N: beam search with N beams on the next line you send)");
        else if (!p && kind == COMPARE_SAMPLES)
            cmd_out(e, " (/samples N: N samples of the next line you send)");
        else if (!p)
            cmd_out(e, " (/compare SETTING V1 V2 ...: one column per value on the next line)");
        return CMD_DONE;
    }
    if (strcmp(argv[0], "off") != 0)
        return -1;
    if (c->pending == COMPARE_NONE)
        cmd_out(e, "%s: nothing was armed", kind_command(kind));
    else
        cmd_out(e, "%s cancelled: the next line is a plain turn", kind_command(c->pending));
    c->pending = COMPARE_NONE;
    return CMD_STATUS;
}

/* show_or_cancel, then the count N of "/beam N" or "/samples N" (what: "beams", "samples") in
 * [1, max] into *n. Returns -1 when *n is set, else the command's status. */
static int show_cancel_or_count(cmd_env *e, compare_kind kind, const char *what, int max, int argc,
                                char **argv, long *n)
{
    int r = show_or_cancel(e, kind, argc, argv);
    if (r >= 0)
        return r;
    if (util_parse_long(argv[0], 1, max, n) != UTIL_PARSE_OK)   /* and why it is less than
                                                                  generate's limit */
        return cmd_fail(e, "%s: \"%s\" is not a number of %s in [1, %d] (or off): the screen "
                        "shows at most %d %s; generate %s takes up to %d", kind_command(kind),
                        argv[0], what, max, max, kind == COMPARE_BEAM ? "rows" : "columns",
                        kind == COMPARE_BEAM ? "--num-beams" : "--samples",
                        kind == COMPARE_BEAM ? BEAM_MAX : SAMPLES_MAX);
    return -1;
}

/* "/samples show [K|off]": which column's latest step the histogram pane shows beside the
 * columns. K counts the last run's columns when there is one, else the armed request's, else up
 * to COMPARE_MAX_COLUMNS (the run to come). */
static int show_column(cmd_env *e, compare_kind kind, int argc, char **argv)
{
    compare_state *c = compare_cmd_of(e);
    const char *name = kind_command(kind);
    if (!c)
        return cmd_fail(e, "%s: not available here", name);
    bool have_run = c->n_cols > 0 && c->kind != COMPARE_NONE;
    if (argc > 1)
        return cmd_fail(e, "%s show: too many arguments (usage: %s show [K|off])", name, name);
    if (argc == 0) {
        if (c->show == 0)
            cmd_out(e, "%s show: off: the columns cover the histogram pane (%s show K: the pane "
                    "shows column K's next-token distribution at its latest step)", name, name);
        else
            cmd_out(e, "%s show: column %d (%s show off: the columns cover the pane again)", name,
                    c->show, name);
        return CMD_DONE;
    }
    if (strcmp(argv[0], "off") == 0) {
        c->show = 0;
        c->reopen = have_run;
        cmd_out(e, "%s show: off: the columns cover the histogram pane", name);
        return CMD_STATUS;
    }
    int max = have_run ? c->n_cols : c->pending != COMPARE_NONE ? c->n
              : kind == COMPARE_BEAM ? COMPARE_MAX_BEAMS : COMPARE_MAX_COLUMNS;
    long k;
    if (util_parse_long(argv[0], 1, max, &k) != UTIL_PARSE_OK)
        return cmd_fail(e, "%s show: \"%s\" is not a column in [1, %d] (or off): %s", name,
                        argv[0], max,
                        have_run ? "the last run has that many columns"
                        : c->pending != COMPARE_NONE ? "the armed request makes that many"
                        : "the screen shows at most that many");
    c->show = (int)k;
    c->reopen = have_run;
    if (have_run)
        cmd_out(e, "%s show: the histogram pane shows %s at its latest step", name,
                c->cols[k - 1].label);
    else
        cmd_out(e, "%s show: the histogram pane will show column %ld of the next run", name, k);
    return CMD_STATUS;
}

static int check_sequences(cmd_env *e, const char *name)
{
    if (!engine_has_seqs(e->s->eng))
        return cmd_fail(e, "%s: the %s engine has no batched sequences yet (start tokentop with "
                        "--backend cpu)", name, e->s->eng->ops->name);
    return CMD_DONE;
}

/* "show ..." goes to show_column; otherwise one argument at most, as the row's usage says. */
static int show_or_too_many(cmd_env *e, compare_kind kind, int argc, char **argv)
{
    if (argc >= 1 && strcmp(argv[0], "show") == 0)
        return show_column(e, kind, argc - 1, argv + 1);
    if (argc > 1)
        return cmd_fail(e, "%s: too many arguments (usage: %s [N|off|show K])",
                        kind_command(kind), kind_command(kind));
    return -1;
}

int compare_exec_beam(cmd_env *e, const cmd_entry *cmd, int argc, char **argv)
{
    long n;
    int shown = show_or_too_many(e, COMPARE_BEAM, argc, argv);
    if (shown >= 0)
        return shown;
    int r = show_cancel_or_count(e, COMPARE_BEAM, "beams", COMPARE_MAX_BEAMS, argc, argv, &n);
    if (r >= 0)
        return r;
    compare_state *c = compare_cmd_of(e);
    session *s = e->s;
    int V = s->model->config.V;
    if (2 * n > V)
        return cmd_fail(e, "/beam: %ld beams need %ld candidates a step; the vocabulary has %d "
                        "tokens", n, 2 * n, V);
    if (check_sequences(e, "/beam") == CMD_ERROR)
        return CMD_ERROR;
    int wlen = s->n_tokens - s->window_start;
    if ((long)wlen + 1 + s->set.max_new_tokens > s->eng->n_ctx)
        return cmd_fail(e, "/beam: the conversation (%d tokens) + /max %d new tokens exceed the "
                        "context of %d positions, and beams do not shift the context (/max fewer, "
                        "/undo or /reset)", wlen, s->set.max_new_tokens, s->eng->n_ctx);
    c->pending = COMPARE_BEAM;
    c->n = (int)n;
    cmd_out(e, "beam search with %ld beams on the next line you send (Enter alone: continue the "
            "text; /beam off cancels)", n);
    return CMD_STATUS;
}

int compare_exec_samples(cmd_env *e, const cmd_entry *cmd, int argc, char **argv)
{
    long n;
    int shown = show_or_too_many(e, COMPARE_SAMPLES, argc, argv);
    if (shown >= 0)
        return shown;
    int r = show_cancel_or_count(e, COMPARE_SAMPLES, "samples", COMPARE_MAX_COLUMNS, argc, argv,
                                 &n);
    if (r >= 0)
        return r;
    compare_state *c = compare_cmd_of(e);
    if (check_sequences(e, "/samples") == CMD_ERROR)
        return CMD_ERROR;
    c->pending = COMPARE_SAMPLES;
    c->n = (int)n;
    unsigned long long seed = (unsigned long long)e->s->set.seed;
    cmd_out(e, "%ld samples (seeds %llu..%llu) of the next line you send (Enter alone: continue "
            "the text; /samples off cancels)", n, seed, seed + (unsigned long long)n - 1);
    return CMD_STATUS;
}

/* The sampler settings /compare accepts: the rows of the command table with a parameter. */
static void list_settings(char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < cmd_count && o < cap; i++)
        if (cmd_table[i].param)
            o += (size_t)snprintf(buf + o, cap - o, "%s%s", o ? ", " : "", cmd_table[i].name);
}

int compare_exec_compare(cmd_env *e, const cmd_entry *cmd, int argc, char **argv)
{
    int r = show_or_cancel(e, COMPARE_SETTING, argc, argv);
    if (r >= 0)
        return r;
    compare_state *c = compare_cmd_of(e);
    char names[200];
    list_settings(names, sizeof names);
    const char *name = argv[0][0] == '/' ? argv[0] + 1 : argv[0];
    char msg[256];
    const cmd_entry *set = cmd_lookup(name, msg, sizeof msg);
    if (!set || !set->param)
        return cmd_fail(e, "/compare: unknown setting \"%s\" (one of: %s)", argv[0], names);
    if (argc < 2)
        return cmd_fail(e, "/compare %s: give at least one value (e.g. /compare temp 0.3 0.8 "
                        "1.5)", set->name);
    if (argc - 1 > COMPARE_MAX_COLUMNS)
        return cmd_fail(e, "/compare %s: %d values; at most %d columns", set->name, argc - 1,
                        COMPARE_MAX_COLUMNS);
    for (int i = 1; i < argc; i++) {
        sampler_params p = e->s->set.sampler;
        tt_error err = {0};
        if (strlen(argv[i]) >= sizeof c->values[0])
            return cmd_fail(e, "/compare %s: value %d is too long", set->name, i);
        if (sampler_params_set(&p, set->param, argv[i], &err) != TT_OK)
            return cmd_fail(e, "/compare %s: value \"%s\": %s (nothing armed)", set->name,
                            argv[i], err.msg);
    }
    if (check_sequences(e, "/compare") == CMD_ERROR)
        return CMD_ERROR;
    c->pending = COMPARE_SETTING;
    c->setting = set;
    c->n = argc - 1;
    for (int i = 1; i < argc; i++)
        snprintf(c->values[i - 1], sizeof c->values[0], "%s", argv[i]);
    cmd_out(e, "/compare %s over %d value%s, seed %llu, on the next line you send (Enter alone: "
            "continue the text; /compare off cancels)", set->name, c->n, c->n == 1 ? "" : "s",
            (unsigned long long)e->s->set.seed);
    const sampler_params *sp = &e->s->set.sampler;
    bool truncation = !strcmp(set->param, "top_k") || !strcmp(set->param, "top_p") ||
                      !strcmp(set->param, "min_p");
    if ((!strcmp(set->param, "temp") && sp->greedy) ||
        (truncation && (sp->greedy || sp->temperature == 0)))
        cmd_out(e, "; greedy is on, so every column will be greedy: /sample (or /temp X) first");
    return CMD_STATUS;
}

/* ---------------------------------------------------------------------------------------------
 * /keep */

/* True when the conversation is the run's base plus the kept column (if any). */
static bool conversation_is_base(const compare_state *c, const session *s)
{
    int extra = c->kept >= 0 ? c->cols[c->kept].n : 0;
    if (!c->base || s->n_tokens != c->n_base + extra)
        return false;
    if (memcmp(s->tokens, c->base, (size_t)c->n_base * sizeof *c->base) != 0)
        return false;
    return extra == 0 ||
           memcmp(s->tokens + c->n_base, c->cols[c->kept].ids, (size_t)extra * sizeof *s->tokens)
               == 0;
}

/* Makes column k the reply (replacing the one kept before) and brings the cache to it (the
 * next-token view in e->hist.snap shows where the conversation goes on). */
static int keep_column(cmd_env *e, int k)
{
    compare_state *c = compare_cmd_of(e);
    session *s = e->s;
    if (c->kept >= 0)
        session_undo_tokens(s, c->cols[c->kept].n);
    tt_error err = {0};
    compare_column *col = &c->cols[k];
    if (session_append_reply(s, col->ids, col->info, col->n, &err) != TT_OK) {
        c->kept = -1;
        return cmd_fail(e, "/keep: %s", err.msg);
    }
    c->kept = k;
    if (s->n_tokens > 0 && session_peek(s, &e->hist.snap, &err) == TT_OK) {
        e->hist.kind = UI_HIST_PEEK;
        e->hist.pos = s->n_tokens;
        e->hist.has_draft = e->hist.bonus = false;
    }
    return CMD_CONV | CMD_STATUS;
}

int compare_exec_keep(cmd_env *e, const cmd_entry *cmd, int argc, char **argv)
{
    compare_state *c = compare_cmd_of(e);
    if (!c || c->kind == COMPARE_NONE || c->n_cols == 0)
        return cmd_fail(e, "/keep: nothing to keep (run /samples, /compare or /beam first)");
    long k;
    if (util_parse_long(argv[0], 1, c->n_cols, &k) != UTIL_PARSE_OK)
        return cmd_fail(e, "/keep: \"%s\" is not a column of the last %s (1 to %d)", argv[0],
                        kind_command(c->kind), c->n_cols);
    if (!conversation_is_base(c, e->s))
        return cmd_fail(e, "/keep: the conversation changed since the last %s; run it again",
                        kind_command(c->kind));
    if (c->kept == k - 1) {
        cmd_out(e, "column %ld is already the reply", k);
        return CMD_DONE;
    }
    int r = keep_column(e, (int)k - 1);
    if (!(r & CMD_ERROR))
        cmd_out(e, "kept %s (%d tokens) as the reply", c->cols[k - 1].label, c->cols[k - 1].n);
    return r;
}

/* ---------------------------------------------------------------------------------------------
 * Running */

typedef struct {
    compare_state *c;
    session *s;
    const compare_hooks *h;
    bool stop_asked;
    /* beam search: the previous step's beams, for the ones pruned at this step */
    int32_t *prev;                 /* (COMPARE_MAX_BEAMS, stride) */
    double prev_logprob[COMPARE_MAX_BEAMS];
    int n_prev, prev_len, stride;
    int32_t eos;
    int paced_step;                /* samples: the step the last event belonged to (-1: none) */
    /* beam search with /beam show K: the latest step of every beam on the board, by its tokens
     * (NULL: the view is off, the search computes no distributions) */
    struct beam_seen *seen, *seen_next;   /* (BEAM_SEEN_MAX) */
    int n_seen;
    int pos0;                      /* the conversation position of the first generated token */
} run_ctx;

/* A beam's latest step: the distribution it was drawn from, the token marked. */
typedef struct beam_seen {
    uint64_t key;                  /* beam_key of its tokens */
    int n;                         /* its tokens */
    sampler_snapshot snap;
} beam_seen;

#define BEAM_SEEN_MAX (3 * COMPARE_MAX_BEAMS)   /* running, ended and pruned on one board */

/* FNV-1a over the tokens and their count: the beams on a board differ in their tokens. */
static uint64_t beam_key(const int32_t *ids, int n)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)ids[i];
        h *= 1099511628211ull;
    }
    return h;
}

static const beam_seen *seen_find(const beam_seen *v, int n, uint64_t key)
{
    for (int i = 0; i < n; i++)
        if (v[i].key == key)
            return &v[i];
    return NULL;
}

/* snap (a beam's distribution, token fields empty) with id marked as the token drawn from it. */
static void seen_mark(sampler_snapshot *snap, int32_t id)
{
    snap->token = id;
    snap->token_rank = -1;
    snap->token_p = snap->token_raw_p = 0.0f;
    snap->u = -1.0;
    snap->cum_lo = 0.0;
    for (int i = 0; i < snap->n_top; i++)
        if (snap->top[i].id == id) {
            snap->token_p = snap->top[i].p;
            snap->token_raw_p = snap->top[i].raw_p;
        }
    int rank = 0;
    for (int i = 0; i < snap->n_top; i++)
        if (snap->top[i].id != id && snap->top[i].p > snap->token_p) {
            rank++;
            snap->cum_lo += snap->top[i].p;
        }
    snap->token_rank = rank;
}

static void seen_add(beam_seen *v, int *n, const int32_t *ids, int len,
                     const sampler_snapshot *snap, bool mark)
{
    if (*n >= BEAM_SEEN_MAX || seen_find(v, *n, beam_key(ids, len)))
        return;
    v[*n] = (beam_seen){.key = beam_key(ids, len), .n = len, .snap = *snap};
    if (mark)
        seen_mark(&v[*n].snap, ids[len - 1]);
    (*n)++;
}

/* After a step: the running beams (drawn from their parents' distributions), the beams that
 * ended (kept from before, or drawn from a parent at this step) and the previous step's beams
 * (the pruned ones among them). x->prev still holds the previous step's beams. */
static void seen_step(run_ctx *x, const beam_progress *p)
{
    beam_seen *nx = x->seen_next;
    int n = 0;
    for (int k = 0; k < p->n_run; k++)
        seen_add(nx, &n, p->ids + (size_t)k * (size_t)p->stride, p->step,
                 &p->snaps[p->parent[k]], true);
    for (int k = 0; k < p->n_finished; k++) {
        const beam_hypothesis *f = &p->finished[k];
        const beam_seen *old = seen_find(x->seen, x->n_seen, beam_key(f->ids, f->n));
        if (old) {
            seen_add(nx, &n, f->ids, f->n, &old->snap, false);
            continue;
        }
        if (f->n != p->step)
            continue;
        uint64_t parent = beam_key(f->ids, f->n - 1);
        for (int j = 0; j < p->n_prev; j++) {
            const int32_t *pid = x->prev + (size_t)j * (size_t)x->stride;
            if (beam_key(pid, p->step - 1) == parent) {
                seen_add(nx, &n, f->ids, f->n, &p->snaps[j], true);
                break;
            }
        }
    }
    for (int i = 0; i < x->n_seen; i++)
        if (x->seen[i].n == p->step - 1 && n < BEAM_SEEN_MAX && !seen_find(nx, n, x->seen[i].key))
            nx[n++] = x->seen[i];
    x->seen_next = x->seen;
    x->seen = nx;
    x->n_seen = n;
}

/* The column's latest step from what seen_step kept, when the view is on. */
static void seen_column(const run_ctx *x, compare_column *col)
{
    if (!x->seen || col->n < 1)
        return;
    const beam_seen *e = seen_find(x->seen, x->n_seen, beam_key(col->ids, col->n));
    if (!e)
        return;
    col->last = e->snap;
    col->last_step = col->n - 1;
    col->last_pos = x->pos0 + col->n - 1;
}

static bool asked_to_stop(run_ctx *x)
{
    if (!x->stop_asked && x->h && x->h->stop && x->h->stop(x->h->user))
        x->stop_asked = true;
    return x->stop_asked;
}

static void frame(run_ctx *x)
{
    if (x->h && x->h->frame)
        x->h->frame(x->h->user);
}

static void pace_step(run_ctx *x)
{
    if (x->h && x->h->pace && !x->stop_asked)
        x->h->pace(x->h->user);
}

/* A live column for a beam: its tokens so far. */
static void live_column(run_ctx *x, compare_column *col, const int32_t *ids, int n)
{
    for (int i = 0; i < n; i++)
        column_push(col, ids[i], TOKEN_SAMPLED, 1.0f, 0.0);
    column_text_from_ids(col, x->s->tok, x->eos);
}

static bool on_beam_progress(void *user, const beam_progress *p)
{
    run_ctx *x = user;
    compare_state *c = x->c;
    c->step = p->step;
    if (x->seen && p->snaps)
        seen_step(x, p);
    if (x->h && x->h->frame) {
        bool named[COMPARE_MAX_BEAMS] = {false};
        for (int k = 0; k < p->n_run; k++)
            named[p->parent[k]] = true;
        int n_pruned = 0;
        for (int k = 0; k < x->n_prev && p->step > 1; k++)
            n_pruned += !named[k];
        if (columns_open(c, p->n_run + p->n_finished + n_pruned)) {
            int at = 0;
            for (int k = 0; k < p->n_run; k++, at++) {
                compare_column *col = &c->cols[at];
                snprintf(col->label, sizeof col->label, "beam %d", k + 1);
                snprintf(col->figures, sizeof col->figures, "logprob %.2f", p->logprob[k]);
                live_column(x, col, p->ids + (size_t)k * (size_t)p->stride, p->step);
            }
            for (int k = 0; k < p->n_finished; k++, at++) {
                compare_column *col = &c->cols[at];
                snprintf(col->label, sizeof col->label, "ended (EOS)");
                snprintf(col->figures, sizeof col->figures, "logprob %.2f",
                         p->finished[k].logprob);
                live_column(x, col, p->finished[k].ids, p->finished[k].n);
            }
            for (int k = 0; k < x->n_prev && p->step > 1; k++) {
                if (named[k])
                    continue;
                compare_column *col = &c->cols[at++];
                snprintf(col->label, sizeof col->label, "pruned at step %d", p->step);
                snprintf(col->figures, sizeof col->figures, "logprob %.2f at step %d",
                         x->prev_logprob[k], x->prev_len);
                col->dim = true;
                live_column(x, col, x->prev + (size_t)k * (size_t)x->stride, x->prev_len);
            }
        }
        for (int i = 0; i < c->n_cols; i++)
            seen_column(x, &c->cols[i]);
        snprintf(c->heading, sizeof c->heading, "beam search, %d beams: step %d (Ctrl-C stops)",
                 c->n, p->step);
        frame(x);
        pace_step(x);
    }
    /* this step's beams are the next step's previous ones */
    x->n_prev = p->n_run;
    x->prev_len = p->step;
    for (int k = 0; k < p->n_run; k++) {
        memcpy(x->prev + (size_t)k * (size_t)x->stride, p->ids + (size_t)k * (size_t)p->stride,
               (size_t)p->step * sizeof *x->prev);
        x->prev_logprob[k] = p->logprob[k];
    }
    return !asked_to_stop(x);
}

static int run_beam(cmd_env *e, run_ctx *x)
{
    compare_state *c = compare_cmd_of(e);
    session *s = e->s;
    tt_error err = {0};
    beam_options bo;
    beam_options_default(&bo);
    bo.num_beams = c->n;
    bo.max_new_tokens = s->set.max_new_tokens;
    bo.min_tokens = s->set.min_tokens;
    bo.eos = s->set.stop_at_eos ? session_end_id(s) : -1;   /* in chat mode: end of turn */
    bo.penalties = s->set.sampler;
    bo.progress = on_beam_progress;
    bo.progress_user = x;
    bo.snapshots = c->show > 0;    /* the distributions cost a pass a beam: only when shown */
    if (bo.snapshots) {
        x->seen = malloc(2 * BEAM_SEEN_MAX * sizeof *x->seen);
        if (!x->seen)
            return cmd_fail(e, "/beam: out of memory");
        x->seen_next = x->seen + BEAM_SEEN_MAX;
    }
    x->eos = session_eos_id(s);
    x->stride = bo.max_new_tokens;
    x->prev = malloc((size_t)COMPARE_MAX_BEAMS * (size_t)x->stride * sizeof *x->prev);
    if (!x->prev)
        return cmd_fail(e, "/beam: out of memory");
    int wlen = s->n_tokens - s->window_start + (s->n_tokens == 0);
    if ((long)wlen + bo.max_new_tokens > s->eng->n_ctx)
        return cmd_fail(e, "/beam: the conversation with this line (%d tokens) + /max %d new "
                        "tokens exceed the context of %d positions, and beams do not shift the "
                        "context (/max fewer, /undo or /reset)", wlen, bo.max_new_tokens,
                        s->eng->n_ctx);
    if (session_gen_begin(s, &err) != TT_OK) {
        session_gen_end(s, SESSION_STOP_ERROR, NULL, NULL);
        return cmd_fail(e, "/beam: %s", err.msg);
    }
    wlen = s->n_tokens - s->window_start;
    x->pos0 = s->n_tokens;
    beam_result res;
    c->running = true;
    tt_status st = beam_search(s->eng, s->smp, s->tokens + s->window_start, wlen, &bo, &res,
                               &err);
    c->running = false;
    session_gen_end(s, st != TT_OK ? SESSION_STOP_ERROR
                       : res.stopped ? SESSION_STOP_INTERRUPTED : SESSION_STOP_MAX_TOKENS,
                    NULL, NULL);
    if (st != TT_OK)
        return cmd_fail(e, "/beam: %s", err.msg);
    if (!columns_open(c, res.n_hyps)) {
        beam_result_free(&res);
        return cmd_fail(e, "/beam: out of memory");
    }
    for (int i = 0; i < res.n_hyps; i++) {
        const beam_hypothesis *hy = &res.hyps[i];
        compare_column *col = &c->cols[i];
        for (int k = 0; k < hy->n; k++)
            column_push(col, hy->ids[k], TOKEN_SAMPLED, expf(hy->token_logprob[k]),
                        hy->token_logprob[k]);
        column_text_from_ids(col, s->tok, x->eos);
        seen_column(x, col);
        col->logprob = hy->logprob;
        col->score = hy->score;
        col->end = hy->eos ? "eos" : res.stopped ? "interrupted" : "max_tokens";
        column_figures(col);
        snprintf(col->label, sizeof col->label, "beam %d, score %.3f", i + 1, hy->score);
    }
    snprintf(c->heading, sizeof c->heading, "beam search: %d beams, %d steps%s, ranked by "
             "logprob/length^%g; beam 1 is the reply (/keep K: another)",
             bo.num_beams, res.steps, res.stopped ? " (stopped)" : "", (double)bo.length_penalty);
    c->n_base = s->n_tokens;
    int r = res.n_hyps > 0 ? keep_column(e, 0) : CMD_CONV | CMD_STATUS;
    for (int i = 0; i < res.n_hyps && !(r & CMD_ERROR); i++) {
        const compare_column *col = &c->cols[i];
        cmd_out(e, "%sbeam %d: score %.4f | logprob %.4f | %d tokens, %s | mean logprob %.3f | "
                "distinct-2 %.3f | repeated 3-grams %d%s", i ? "\n" : "", i + 1, col->score,
                col->logprob, col->n, col->end, col->fig.mean_logprob, col->fig.distinct2,
                col->fig.repeated3, i == 0 ? " (the reply)" : "");
    }
    beam_result_free(&res);
    return r;
}

static bool on_sample_event(void *user, int sample, const session_event *ev)
{
    run_ctx *x = user;
    compare_column *col = &x->c->cols[sample];
    if (!ev->flush && ev->step != x->paced_step) {   /* the first event of the next step: the
                                                        last one is complete, shown and held */
        if (x->paced_step >= 0)
            pace_step(x);
        x->paced_step = ev->step;
    }
    if (!ev->flush && !ev->rejected && ev->token >= 0) {
        if (ev->snap) {            /* the pane's /samples show K */
            col->last = *ev->snap;
            col->last_step = ev->step;
            col->last_pos = x->s->n_tokens + ev->step;
        }
        double p = ev->snap ? (double)ev->snap->token_raw_p : 1.0;
        column_push(col, ev->token, ev->origin, ev->snap ? ev->snap->token_p : 1.0f,
                    log(p > FLT_TRUE_MIN ? p : FLT_TRUE_MIN));
    }
    if (ev->text_len)
        column_text_add(col, ev->text, ev->text_len);
    snprintf(col->figures, sizeof col->figures, "%d tokens", col->n);
    frame(x);
    if (asked_to_stop(x) && x->s->interrupt)
        *x->s->interrupt = 1;
    return !x->stop_asked;
}

static int run_samples(cmd_env *e, run_ctx *x)
{
    compare_state *c = compare_cmd_of(e);
    session *s = e->s;
    const char *cmd = kind_command(c->kind);
    tt_error err = {0};
    session_settings per[COMPARE_MAX_COLUMNS];
    for (int i = 0; i < c->n; i++) {
        per[i] = s->set;
        if (c->kind == COMPARE_SETTING &&
            sampler_params_set(&per[i].sampler, c->setting->param, c->values[i], &err) != TT_OK)
            return cmd_fail(e, "%s: %s", cmd, err.msg);
    }
    /* The conversation's cache (sequence 0) takes the prompt as a turn would; an empty
     * conversation gets its beginning-of-text token here. */
    if (session_gen_begin(s, &err) != TT_OK) {
        session_gen_end(s, SESSION_STOP_ERROR, NULL, NULL);
        return cmd_fail(e, "%s: %s", cmd, err.msg);
    }
    session_gen_end(s, SESSION_STOP_NONE, NULL, NULL);
    if (!columns_open(c, c->n))
        return cmd_fail(e, "%s: out of memory", cmd);
    unsigned long long seed = (unsigned long long)s->set.seed;
    for (int i = 0; i < c->n; i++) {
        if (c->kind == COMPARE_SETTING)
            snprintf(c->cols[i].label, sizeof c->cols[i].label, "%d: %s %s", i + 1,
                     c->setting->name, c->values[i]);
        else
            snprintf(c->cols[i].label, sizeof c->cols[i].label, "%d: seed %llu", i + 1,
                     seed + (unsigned long long)i);
    }
    /* the other settings are the status bar's */
    if (c->kind == COMPARE_SETTING)
        snprintf(c->heading, sizeof c->heading, "/compare %s, seed %llu: /keep K makes one the "
                 "reply", c->setting->name, seed);
    else
        snprintf(c->heading, sizeof c->heading, "%d samples, seeds %llu..%llu: /keep K makes one "
                 "the reply", c->n, seed, seed + (unsigned long long)c->n - 1);
    samples_result res;
    c->running = true;
    tt_status st = samples_generate_ids(s->eng, s->model, s->tok, &s->set,
                                        c->kind == COMPARE_SETTING ? per : NULL, &s->chat,
                                        s->tokens + s->window_start,
                                        s->n_tokens - s->window_start, c->n, on_sample_event, x,
                                        s->interrupt, &res, &err);
    c->running = false;
    if (s->interrupt)
        *s->interrupt = 0;
    if (st != TT_OK)
        return cmd_fail(e, "%s: %s", cmd, err.msg);
    for (int i = 0; i < c->n; i++) {
        compare_column *col = &c->cols[i];
        /* the session's tokens are the reply /keep appends; the events gave the raw figures */
        int n = res.n_gen[i];
        int have = col->n;
        col->n = 0;
        for (int k = 0; k < n; k++)
            column_push(col, res.gen[i][k], (token_origin)res.gen_info[i][k].origin,
                        res.gen_info[i][k].p, k < have ? col->raw_logprob[k] : 0.0);
        col->end = session_stop_name(res.stats[i].stop);
        column_figures(col);
    }
    samples_result_free(&res);
    c->n_base = s->n_tokens;
    cmd_out(e, "%s", c->heading);
    for (int i = 0; i < c->n; i++)
        cmd_out(e, "\n%s: %d tokens, %s | mean logprob %.3f | distinct-2 %.3f | repeated "
                "3-grams %d", c->cols[i].label, c->cols[i].n, c->cols[i].end,
                c->cols[i].fig.mean_logprob, c->cols[i].fig.distinct2, c->cols[i].fig.repeated3);
    return CMD_CONV | CMD_STATUS;
}

/* The heading's second row: the end of the text the columns continue, on one line. */
static void add_prompt_line(compare_state *c, const session *s)
{
    char *tail = session_text(s, c->n_base > 12 ? c->n_base - 12 : 0, c->n_base);
    if (!tail)
        return;
    for (char *p = tail; *p; p++)
        if ((unsigned char)*p < 0x20)
            *p = ' ';
    size_t o = strlen(c->heading);
    snprintf(c->heading + o, sizeof c->heading - o, "\ncontinuing: ...%s", tail);
    free(tail);
}

int compare_run(cmd_env *e, const char *text, const compare_hooks *h)
{
    compare_state *c = compare_cmd_of(e);
    session *s = e->s;
    e->out_len = 0;
    if (e->out)
        e->out[0] = 0;
    compare_kind kind = c->pending;
    c->pending = COMPARE_NONE;
    if (kind == COMPARE_NONE)
        return cmd_fail(e, "nothing armed");
    int turns = s->n_turns;
    size_t len = 0;
    char *t = cmd_prompt_text(s, text, &len);
    tt_error err = {0};
    if (!t || session_add_user_text(s, t, len, &err) != TT_OK) {
        free(t);
        return cmd_fail(e, "%s: %s", kind_command(kind), t ? err.msg : "out of memory");
    }
    free(t);
    columns_clear(c);
    c->kind = kind;
    c->kept = -1;
    c->step = 0;
    c->heading[0] = 0;
    free(c->base);
    c->base = NULL;
    c->n_base = 0;
    run_ctx x = {.c = c, .s = s, .h = h, .paced_step = -1};
    int r = kind == COMPARE_BEAM ? run_beam(e, &x) : run_samples(e, &x);
    free(x.prev);
    free(x.seen < x.seen_next ? x.seen : x.seen_next);
    if (r & CMD_ERROR) {
        /* nothing lost, nothing added: the line leaves the conversation again */
        if (s->n_turns > turns)
            session_undo_turn(s);
        engine_truncate(s->eng, session_cached_prefix(s));
        columns_clear(c);
        c->kind = COMPARE_NONE;
        return r | CMD_CONV;
    }
    /* the base: the conversation the columns continue (before the kept one) */
    int extra = c->kept >= 0 ? c->cols[c->kept].n : 0;
    c->n_base = s->n_tokens - extra;
    add_prompt_line(c, s);
    c->base = malloc((size_t)(c->n_base > 0 ? c->n_base : 1) * sizeof *c->base);
    if (c->base)
        memcpy(c->base, s->tokens, (size_t)c->n_base * sizeof *c->base);
    return r;
}

/* ---------------------------------------------------------------------------------------------
 * Showing */

bool compare_shown(const compare_state *c, const sampler_snapshot **snap, int *step, int *pos,
                   const char **label)
{
    if (!c || c->show < 1 || c->show > c->n_cols)
        return false;
    const compare_column *col = &c->cols[c->show - 1];
    if (col->last_step < 0)
        return false;
    *snap = &col->last;
    *step = col->last_step;
    *pos = col->last_pos;
    *label = col->label;
    return true;
}

bool compare_take_reopen(compare_state *c)
{
    bool r = c && c->reopen;
    if (c)
        c->reopen = false;
    return r;
}

int compare_board(const compare_state *c, ui_column *cols, int cap, const char **heading)
{
    *heading = c->heading[0] ? c->heading : NULL;
    int n = c->n_cols < cap ? c->n_cols : cap;
    for (int i = 0; i < n; i++) {
        const compare_column *col = &c->cols[i];
        cols[i] = (ui_column){
            .title = col->label,
            .figures = col->figures[0] ? col->figures : NULL,
            .text = col->text ? col->text : "",
            .dim = col->dim,
            .highlight = c->kept == i,
            .tail = c->running,
        };
    }
    return n;
}

void compare_print(const compare_state *c, FILE *out)
{
    for (int i = 0; i < c->n_cols; i++) {
        const compare_column *col = &c->cols[i];
        fprintf(out, "=== %s | %d tokens, %s | mean logprob %.3f | distinct-2 ", col->label,
                col->n, col->end ? col->end : "?", col->fig.mean_logprob);
        if (col->fig.distinct2 < 0)
            fputs("-", out);
        else
            fprintf(out, "%.3f", col->fig.distinct2);
        fprintf(out, " | repeated 3-grams %d", col->fig.repeated3);
        if (c->kind == COMPARE_BEAM)
            fprintf(out, " | logprob %.4f", col->logprob);
        fprintf(out, "%s\n%s\n", c->kept == i ? " | the reply" : "", col->text ? col->text : "");
    }
    fflush(out);
}

/* ---------------------------------------------------------------------------------------------
 * The commands this module registers (cmd_env_add_module) */

static const cmd_entry compare_rows[] = {
    {.name = "beam", .alias = NULL, .args = "[N|off|show [K|off]]",
     .usage = "beam search with N beams on the next line you send: the beams grow live, the "
              "best becomes the reply; show K: the histogram pane shows beam K's latest step",
     .min_args = 0, .max_args = 2, .busy_ok = false, .param = NULL,
     .exec = compare_exec_beam, .group = CMD_GROUP_COMPARE},
    {.name = "samples", .alias = NULL, .args = "[N|off|show [K|off]]",
     .usage = "N samples of the next line (seeds S..S+N-1) side by side, with their figures; "
              "show K: the histogram pane shows column K's latest step",
     .min_args = 0, .max_args = 2, .busy_ok = false, .param = NULL,
     .exec = compare_exec_samples, .group = CMD_GROUP_COMPARE},
    {.name = "compare", .alias = NULL, .args = "[SETTING V1 V2 ...|off]",
     .usage = "one column per value of a sampler setting (/compare temp 0.3 0.8 1.5), one seed",
     .min_args = 0, .max_args = 64, .busy_ok = false, .param = NULL,
     .exec = compare_exec_compare, .group = CMD_GROUP_COMPARE},
    {.name = "keep", .alias = NULL, .args = "K",
     .usage = "make column (or beam) K of the last /samples, /compare or /beam the reply",
     .min_args = 1, .max_args = 1, .busy_ok = false, .param = NULL,
     .exec = compare_exec_keep, .group = CMD_GROUP_COMPARE},
};

static void model_changed(cmd_env *e);

static void *state_create(void)
{
    compare_state *c = malloc(sizeof *c);
    if (c)
        compare_init(c);
    return c;
}

static void state_free(void *state)
{
    compare_free(state);
    free(state);
}

const cmd_module compare_cmd_module = {
    .name = "compare",
    .rows = compare_rows,
    .n_rows = (int)(sizeof compare_rows / sizeof compare_rows[0]),
    .show = NULL,
    .env_free = NULL,
    .state_create = state_create,
    .state_free = state_free,
    .model_changed = model_changed,
};

/* The last run's columns are the old model's tokens: they go; an armed request stays (it names
 * settings, not tokens). */
static void model_changed(cmd_env *e)
{
    compare_state *c = compare_cmd_of(e);
    if (!c)
        return;
    compare_state armed = *c;
    compare_free(c);
    c->pending = armed.pending;
    c->n = armed.n;
    c->setting = armed.setting;
    memcpy(c->values, armed.values, sizeof c->values);
}

compare_state *compare_cmd_of(const cmd_env *e)
{
    return cmd_env_state(e, &compare_cmd_module);
}
