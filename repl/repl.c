/* repl.c: the interactive REPL: loading, signals, the main loop (one token per iteration with the
 * keys polled in between, one draw per iteration), key routing, and the choice of line mode. */
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/base/clock.h"
#include "core/base/dtype.h"
#include "core/model/gguf.h"
#include "app/cli.h"
#include "repl/attn_cmd.h"
#include "repl/commands.h"
#include "repl/chat_cmd.h"
#include "repl/compare.h"
#include "repl/dtype_cmd.h"
#include "repl/lens_cmd.h"
#include "repl/history.h"
#include "repl/linemode.h"
#include "repl/model_cmd.h"
#include "repl/repl.h"
#include "repl/repl_host.h"
#include "core/session/session.h"
#include "core/base/text.h"
#include "core/base/util.h"
#include "repl/transcript_doc.h"
#include "ui/columns.h"
#include "ui/curses.h"
#include "ui/grid.h"
#include "ui/histogram.h"
#include "ui/input.h"
#include "ui/layout.h"
#include "ui/status.h"
#include "ui/transcript_pane.h"

#define FRAME_MS 33        /* at most one draw per frame while tokens stream in */
#define IDLE_WAIT_MS 250   /* key wait when idle; signals are noticed at least this often */
/* The terminal UI shows 20 tokens a second unless --pace says otherwise: at engine speed (the
 * embedded pair: 1,000-2,000 tokens/s) a reply lands in one frame and no step's histogram can be
 * read; 20/s (50 ms a token) is about reading speed and keeps each step's histogram on screen
 * 50 ms. Line mode, pipes and generate are for scripts and stay unpaced. */
#define REPL_TERMINAL_PACE 20.0

/* ---------------------------------------------------------------------------------------------
 * Signals: handlers only set flags (and, for crashes, restore the terminal and die) */

static volatile sig_atomic_t g_interrupt;    /* stop the generation: the session checks it */
static volatile sig_atomic_t g_sigint;       /* a Ctrl-C arrived: the loop handles it as a key */
static volatile sig_atomic_t g_quit_signal;  /* SIGTERM, SIGHUP, SIGQUIT: leave cleanly */

static void on_sigint(int sig)
{
    (void)sig;
    g_interrupt = 1;
    g_sigint = 1;
}

static void on_quit_signal(int sig)
{
    g_quit_signal = sig;
    g_interrupt = 1;
}

static void on_fatal_signal(int sig)
{
    /* SA_RESETHAND made the default action current again: restore the terminal, then let the
     * signal take its course (core dump, exit status). */
    ui_curses_emergency_restore();
    raise(sig);
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_sigint;   /* no SA_RESTART: a blocking read returns, the loop sees it */
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = on_quit_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGQUIT, &sa, NULL);
    sa.sa_handler = on_fatal_signal;
    sa.sa_flags = SA_RESETHAND;
    int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
        sigaction(fatal[i], &sa, NULL);
}

/* ---------------------------------------------------------------------------------------------
 * The terminal UI */

typedef struct {
    session *s;
    cmd_env *env;
    transcript_doc tr;
    ui_input in;
    history hist;
    ui_grid grid;
    ui_scroll scroll;
    bool running;          /* a generation is streaming (not step mode) */
    bool have_turn;        /* s->last describes a finished generation */
    bool dirty, quit, pasting;
    bool answer_at_top;    /* the next draw opens the transcript at the last command's answer */
    int ctrl_c;            /* consecutive Ctrl-C at an empty prompt */
    char message[160];     /* transient note in the status bar */
    double last_draw;
    int spec_round;        /* the speculative round the last event belonged to */
    char *fallback_note;   /* cli_app's: set when the engine moved to the CPU after a GPU error */
    bool board;            /* the columns of /beam, /samples or /compare replace the transcript
                              and the histogram until the next line is sent (or Esc) */
    ui_key held[64];       /* keys typed while they ran, handled once they are done */
    int n_held;
    /* The session's snapshots come on demand (session.h): unpaced, the histogram shows one
     * event a frame, and only that one's snapshot is built. */
    bool hist_stale;       /* the last event's snapshot is not built yet: a streaming frame
                              waits for the next event that builds one */
    session_event hist_ev; /* that event (its pointers cleared), for the end of the turn, */
    spec_draft hist_spec;  /* its draft record, */
    bool hist_has_draft;   /* whether it has one, */
    int hist_pos;          /* and its position */
    char *queued;          /* a line sent during a reply: it goes once the reply ends */
    struct {               /* command output during a reply: shown after it, not inside it */
        uint8_t style;
        char *text;
    } deferred[16];
    int n_deferred;
    bool turn_spec;        /* the turn began speculative */
    bool turn_mixed;       /* /spec switched the mode during the turn: no speculative figures */
} tui;

static void draw(tui *t);

static void note(tui *t, uint8_t style, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(tui *t, uint8_t style, const char *fmt, ...)
{
    char *buf = NULL;   /* any length: /help and /show are long */
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&buf, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    transcript_doc_note_add(&t->tr, t->s->n_tokens, style, buf);
    free(buf);
    t->dirty = true;
}

/* Command output while a reply streams waits for its end (note() would place it between the
 * reply's tokens); the status bar says which command's output (or error) is waiting, e.g.
 * "/max: error after the reply". */
static void note_after_reply(tui *t, uint8_t style, const char *line, const char *text)
{
    if (!t->running) {
        note(t, style, "%s", text);
        return;
    }
    if (t->n_deferred == (int)(sizeof t->deferred / sizeof t->deferred[0])) {
        free(t->deferred[0].text);
        memmove(t->deferred, t->deferred + 1, (size_t)(t->n_deferred - 1) * sizeof t->deferred[0]);
        t->n_deferred--;
    }
    char *copy = strdup(text);
    if (!copy)
        return;
    t->deferred[t->n_deferred].style = style;
    t->deferred[t->n_deferred++].text = copy;
    const char *cmd = line + strspn(line, " \t");
    const int len = (int)strcspn(cmd, " \t");
    snprintf(t->message, sizeof t->message, "%.*s: %s after the reply", len > 24 ? 24 : len, cmd,
             style == UI_STYLE_ERROR ? "error" : "output");
}

static void flush_deferred(tui *t)
{
    if (t->n_deferred > 0 && strstr(t->message, " after the reply"))
        t->message[0] = 0;   /* it is there now */
    for (int i = 0; i < t->n_deferred; i++) {
        note(t, t->deferred[i].style, "%s", t->deferred[i].text);
        free(t->deferred[i].text);
    }
    t->n_deferred = 0;
}

/* Back to the end of the transcript (after the user typed something). */
static void scroll_to_end(tui *t)
{
    t->scroll.scroll = 0;
    t->scroll.anchor = 0;
}

static void draw(tui *t);
static void handle_key(tui *t, ui_key k);

/* Handles the keys that arrive within wait_ms (then those already there), as the main loop does
 * between steps: a resize must be read before the next draw, or curses draws at the old size. */
static void pace_keys(tui *t, int wait_ms)
{
    ui_key k = ui_curses_read_key(wait_ms);
    while (k.type != UI_KEY_NONE && !t->quit) {
        handle_key(t, k);
        k = ui_curses_read_key(0);
    }
}

/* Pacing (/pace, --pace): a streamed token or rejected draft waits until it is due. Keys are
 * handled while it waits, as between steps (a resize is drawn, /pace applies at once); Ctrl-C or
 * a quit ends the wait at once and returns false. The session leaves the held time (all of an
 * event callback's) out of the decode speed. */
static bool pace_hold(tui *t, const session_event *ev)
{
    pace_clock *pc = &t->env->pace;
    if (pc->rate <= 0 || !t->running || ev->flush)
        return true;
    double d;
    while (!g_interrupt && !t->quit && (d = pace_delay_ms(pc)) > 0) {
        pace_keys(t, d < 20 ? (int)d + 1 : 20);
        if (t->dirty && tt_now_ms() - t->last_draw >= FRAME_MS) {
            draw(t);
            t->dirty = false;
            t->last_draw = tt_now_ms();
        }
    }
    pace_mark(pc);
    return !g_interrupt && !t->quit;
}

/* A paced event is drawn as it is shown, not at the next frame. */
static void pace_show(tui *t)
{
    if (t->env->pace.rate <= 0 || !t->running)
        return;
    pace_keys(t, 0);
    draw(t);
    t->dirty = false;
    t->last_draw = tt_now_ms();
}

/* ev's snapshots into the histogram (session_event_snapshots), as the token at pos. */
static void hist_show(tui *t, const session_event *ev, const spec_draft *draft, bool has_draft,
                      int pos)
{
    cmd_env *e = t->env;
    e->hist.has_draft = has_draft;
    if (has_draft)
        e->hist.spec = *draft;
    e->hist.bonus = ev->origin == TOKEN_BONUS;
    e->hist.kind = UI_HIST_STEP;
    e->hist.pos = pos;
    e->hist.step = ev->step;
    tt_error err = {0};
    if (session_event_snapshots(t->s, ev, &e->hist.snap, has_draft ? &e->hist.draft : NULL, &err) !=
        TT_OK)
        e->hist.kind = UI_HIST_NONE;   /* not for an event being reported or the last one */
}

/* A paced event is shown first and held after: the session appended its token before calling,
 * so a draw during the hold (a frame, a key) would show the token's text beside the previous
 * step's histogram. */
static bool on_event_show(tui *t, const session_event *ev);

static bool on_event(void *user, const session_event *ev)
{
    tui *t = user;
    if ((t->s->draft && t->s->spec_on) != t->turn_spec)
        t->turn_mixed = true;
    if (!on_event_show(t, ev))
        return false;
    return pace_hold(t, ev);
}

static bool on_event_show(tui *t, const session_event *ev)
{
    if (ev->context_shifted)
        note(t, UI_STYLE_NOTICE, "[context full: dropped the oldest %d tokens and re-prefilled "
             "the rest]", ev->shift_dropped);
    if (ev->round > 0 && ev->round != t->spec_round) {
        /* a new speculative round: the last round's rejected draft leaves the transcript */
        t->spec_round = ev->round;
        transcript_doc_set_rejected(&t->tr, -1, -1);
    }
    if (!ev->flush)
        attn_cmd_track_step(t->env, ev);
    if (ev->rejected) {
        /* shown before its replacement (the next event) until the next round */
        transcript_doc_set_rejected(&t->tr, t->s->n_tokens, ev->token);
        t->dirty = true;
        pace_show(t);
        return true;
    }
    if (ev->flush || !ev->snap)
        return true;
    cmd_env *e = t->env;
    /* Unpaced, a frame shows the first event past its time: the others' snapshots would never
     * be seen, so they are not built (the session's snapshots come on demand). */
    if (ev->partial && e->pace.rate <= 0 && t->running && tt_now_ms() - t->last_draw < FRAME_MS) {
        t->hist_stale = true;
        t->hist_ev = *ev;
        t->hist_ev.snap = t->hist_ev.draft_snap = NULL;
        t->hist_ev.draft = NULL;
        t->hist_ev.logits = NULL;
        t->hist_ev.text = NULL;
        t->hist_spec = ev->draft ? *ev->draft : (spec_draft){0};
        t->hist_has_draft = ev->draft && ev->draft_snap;
        t->hist_pos = t->s->n_tokens - 1;
    } else {
        t->hist_stale = false;
        hist_show(t, ev, ev->draft, ev->draft && ev->draft_snap, t->s->n_tokens - 1);
    }
    tt_error err = {0};
    if (dtype_cmd_track_step(e, ev, &err) != TT_OK)
        note(t, UI_STYLE_ERROR, "comparison off: %s", err.msg);
    t->dirty = true;
    pace_show(t);
    return true;
}

/* The lens view (/lens) follows the histogram to where it is now (no generation streams). */
static void track_lens(tui *t)
{
    tt_error err = {0};
    if (lens_cmd_track(t->env, &err) != TT_OK)
        note(t, UI_STYLE_ERROR, "lens off: %s", err.msg);
}

/* The next position's distribution, when that costs at most one token of compute (the cache
 * holds the conversation, or a step-mode generation is open). */
static void refresh_peek(tui *t)
{
    session *s = t->s;
    if (t->running || s->n_tokens == 0)
        return;
    if (!s->gen) {
        int wlen = s->n_tokens - s->window_start;
        if (wlen > s->eng->n_ctx || session_cached_prefix(s) < wlen - 1)
            return;
    }
    tt_error err = {0};
    if (session_peek(s, &t->env->hist.snap, &err) == TT_OK) {
        t->env->hist.has_draft = t->env->hist.bonus = false;
        t->env->hist.kind = UI_HIST_PEEK;
        t->env->hist.pos = s->n_tokens;
        if (dtype_cmd_track_peek(t->env, &err) != TT_OK)
            note(t, UI_STYLE_ERROR, "comparison off: %s", err.msg);
        track_lens(t);
        attn_cmd_track_peek(t->env);
    }
    t->dirty = true;
}

static void finish_generation(tui *t, session_stop stop, const tt_error *err)
{
    session *s = t->s;
    session_gen_end(s, stop, on_event, t);
    if (t->hist_stale) {           /* the turn's last event: its snapshot shows from now on */
        hist_show(t, &t->hist_ev, &t->hist_spec, t->hist_has_draft, t->hist_pos);
        t->hist_stale = false;
    }
    transcript_doc_set_rejected(&t->tr, -1, -1);
    t->running = false;
    t->env->busy = false;
    t->have_turn = true;
    track_lens(t);
    t->dirty = true;
    switch (stop) {
    case SESSION_STOP_INTERRUPTED:
        g_sigint = 0;   /* that Ctrl-C is used up */
        note(t, UI_STYLE_NOTICE, "[stopped after %d tokens]", s->last.generated_tokens);
        break;
    case SESSION_STOP_STRING:
        note(t, UI_STYLE_NOTICE, "[stop string reached]");
        break;
    case SESSION_STOP_CONTEXT:
        note(t, UI_STYLE_NOTICE, "[the context is full and shifting is off]");
        break;
    case SESSION_STOP_ERROR:
        note(t, UI_STYLE_ERROR, "error: %s", err && err->msg[0] ? err->msg : s->last.error.msg);
        break;
    default:
        break;
    }
    flush_deferred(t);
    g_interrupt = 0;
}

/* Starts a generation: text != NULL adds it as a new turn (empty: a turn that continues);
 * NULL generates into the current turn (/regen, step mode). */
static bool begin_generation(tui *t, const char *text)
{
    session *s = t->s;
    tt_error err = {0};
    if (text) {
        size_t len = 0;
        char *add = cmd_prompt_text(s, text, &len);
        if (!add || session_add_user_text(s, add, len, &err) != TT_OK) {
            note(t, UI_STYLE_ERROR, "error: %s", add ? err.msg : "out of memory");
            free(add);
            return false;
        }
        free(add);
    }
    scroll_to_end(t);
    t->spec_round = 0;
    transcript_doc_sync(&t->tr, s);
    g_interrupt = 0;
    g_sigint = 0;
    pace_restart(&t->env->pace);
    t->turn_spec = s->draft && s->spec_on;
    t->turn_mixed = false;
    tt_status st = session_gen_begin(s, &err);
    if (st != TT_OK) {
        finish_generation(t, s->last.stop != SESSION_STOP_NONE ? s->last.stop
                                                               : SESSION_STOP_ERROR, &err);
        return false;
    }
    t->dirty = true;
    return true;
}

static void run_step(tui *t, int32_t force)
{
    session_stop stop = SESSION_STOP_NONE;
    tt_error err = {0};
    tt_status st = session_gen_step(t->s, force, on_event, t, &stop, &err);
    if (t->fallback_note && t->fallback_note[0]) {
        note(t, UI_STYLE_ERROR, "%s", t->fallback_note);
        t->fallback_note[0] = 0;
    }
    if (st != TT_OK && stop == SESSION_STOP_NONE)
        stop = SESSION_STOP_ERROR;
    if (stop != SESSION_STOP_NONE)
        finish_generation(t, stop, st != TT_OK ? &err : NULL);
    else
        track_lens(t);
    t->dirty = true;
}

static void start_turn(tui *t, const char *text)
{
    if (!begin_generation(t, text))
        return;
    if (t->env->step_mode) {
        refresh_peek(t);   /* show what the first step will choose from */
        return;
    }
    t->running = true;
    t->env->busy = true;
}

/* Step mode: one token per Enter. */
static void step_once(tui *t, int32_t force)
{
    if (!t->s->gen && !begin_generation(t, force >= 0 ? NULL : ""))
        return;
    run_step(t, force);
}

static void run_command(tui *t, const char *line)
{
    cmd_env *e = t->env;
    int flags = cmd_execute(e, line);
    if (compare_take_reopen(compare_cmd_of(e))) {
        t->board = true;   /* /samples show K: the last run's columns, with the pane; the answer
                              where the board leaves it visible */
        snprintf(t->message, sizeof t->message, "%s", e->out_len ? e->out : "");
    }
    scroll_to_end(t);   /* show the answer */
    if (flags & CMD_CLEAR)
        transcript_doc_clear(&t->tr);
    if (e->out_len) {
        note_after_reply(t, (flags & CMD_ERROR) ? UI_STYLE_ERROR : UI_STYLE_NOTICE, line,
                         e->out);
        t->answer_at_top = true;   /* a long answer (/help, /show) opens at its first line */
    }
    if (flags & CMD_QUIT)
        t->quit = true;
    if (flags & CMD_GENERATE)
        start_turn(t, NULL);
    else if (flags & CMD_STEP)
        step_once(t, e->pick_id);
    else if ((flags & (CMD_PEEK | CMD_CONV)) && (e->step_mode || e->hist.kind != UI_HIST_NONE))
        refresh_peek(t);
    t->dirty = true;
}

/* A /beam, /samples or /compare run: the board is drawn at most once a frame while it grows;
 * Ctrl-C (a key, or the signal) stops it. Other keys wait until it is over. */
static void board_frame(void *user)
{
    tui *t = user;
    double now = tt_now_ms();
    if (now - t->last_draw >= FRAME_MS) {
        draw(t);
        t->last_draw = now;
    }
}

static bool board_stop(void *user)
{
    tui *t = user;
    if (g_sigint)
        return true;
    for (ui_key k = ui_curses_read_key(0); k.type != UI_KEY_NONE; k = ui_curses_read_key(0)) {
        if ((k.type == UI_KEY_CTRL && k.cp == 'c') || k.type == UI_KEY_HANGUP)
            g_sigint = 1;
        else if (k.type == UI_KEY_CTRL && k.cp == 'd')   /* not held: it would quit after */
            snprintf(t->message, sizeof t->message,
                     "Ctrl-D quits at an empty prompt after the run; Ctrl-C stops it");
        else if (t->n_held < (int)(sizeof t->held / sizeof t->held[0]))
            t->held[t->n_held++] = k;
    }
    return g_sigint != 0;
}

/* /pace for the board: each step is drawn and held to the rate, as a reply's tokens are; Ctrl-C
 * ends the hold (board_stop). */
static void board_pace(void *user)
{
    tui *t = user;
    pace_clock *pc = &t->env->pace;
    if (pc->rate <= 0)
        return;
    draw(t);
    t->last_draw = tt_now_ms();
    double d;
    while ((d = pace_delay_ms(pc)) > 0 && !board_stop(t)) {
        struct timespec ts = {0, (long)((d < 20 ? d : 20) * 1e6)};
        nanosleep(&ts, NULL);
    }
    pace_mark(pc);
}

static void handle_key(tui *t, ui_key k);

static void run_compare(tui *t, const char *text)
{
    scroll_to_end(t);
    t->board = true;
    t->env->busy = true;
    g_interrupt = 0;
    g_sigint = 0;
    pace_restart(&t->env->pace);
    compare_hooks h = {.frame = board_frame, .stop = board_stop, .pace = board_pace, .user = t};
    int flags = compare_run(t->env, text, &h);
    t->env->busy = false;
    g_interrupt = 0;
    g_sigint = 0;
    transcript_doc_sync(&t->tr, t->s);
    if (flags & CMD_ERROR)
        t->board = false;
    else
        t->have_turn = true;
    if (t->env->out_len)
        note(t, (flags & CMD_ERROR) ? UI_STYLE_ERROR : UI_STYLE_NOTICE, "%s", t->env->out);
    t->dirty = true;
    /* what was typed meanwhile, in order (a held Enter may start the next run: its own keys are
     * held afresh) */
    ui_key held[sizeof t->held / sizeof t->held[0]];
    int n = t->n_held;
    memcpy(held, t->held, (size_t)n * sizeof *held);
    t->n_held = 0;
    for (int i = 0; i < n && !t->quit; i++)
        handle_key(t, held[i]);
}

static void submit(tui *t)
{
    char *text = ui_input_enter(&t->in);
    if (!text)
        return;   /* inside a """ block */
    if (t->board) {
        t->board = false;   /* any line closes the columns; Enter alone does only that */
        t->dirty = true;
        if (!text[0]) {
            free(text);
            return;
        }
    }
    if (text[0]) {
        tt_error err = {0};
        if (history_add(&t->hist, text, &err) != TT_OK)
            snprintf(t->message, sizeof t->message, "history: %.140s", err.msg);
    }
    if (cmd_is_command(text)) {
        run_command(t, text);
    } else if (t->running) {
        /* one line waits for the reply's end; a second replaces it */
        bool replaced = t->queued != NULL;
        free(t->queued);
        t->queued = text;
        text = NULL;
        snprintf(t->message, sizeof t->message, "%s: sent when the reply ends (Ctrl-C: back "
                 "to the input)", replaced ? "queued, replacing the last" : "queued");
    } else if (compare_cmd_of(t->env) && compare_cmd_of(t->env)->pending != COMPARE_NONE) {
        if (t->s->gen) {   /* step mode: new text ends the open generation */
            session_gen_end(t->s, SESSION_STOP_INTERRUPTED, NULL, NULL);
            t->have_turn = true;
        }
        run_compare(t, text);
    } else if (t->env->step_mode && !text[0]) {
        step_once(t, -1);
    } else {
        if (t->s->gen) {   /* step mode: new text ends the open generation */
            session_gen_end(t->s, SESSION_STOP_INTERRUPTED, NULL, NULL);
            t->have_turn = true;
        }
        start_turn(t, text);
    }
    free(text);
}

static void on_ctrl_c(tui *t)
{
    if (t->running) {
        g_interrupt = 1;   /* the next step stops */
        if (t->queued) {   /* a queued line would start a turn right after: it goes back */
            if (ui_input_empty(&t->in))
                ui_input_set(&t->in, t->queued);
            free(t->queued);
            t->queued = NULL;
        }
        return;
    }
    if (t->s->gen) {       /* step mode */
        finish_generation(t, SESSION_STOP_INTERRUPTED, NULL);
        return;
    }
    if (!ui_input_empty(&t->in)) {
        ui_input_clear(&t->in);
        return;
    }
    if (++t->ctrl_c >= 2) {
        t->quit = true;
        return;
    }
    snprintf(t->message, sizeof t->message, "press Ctrl-C again to quit");
}

static void insert_cp(tui *t, uint32_t cp)
{
    char buf[8];
    int n = text_utf8_encode(cp, buf);
    ui_input_insert(&t->in, buf, (size_t)n);
}

static int page_rows(tui *t)
{
    int h = t->grid.rows / 2;
    return h > 1 ? h : 1;
}

static void handle_key(tui *t, ui_key k)
{
    bool is_ctrl_c = k.type == UI_KEY_CTRL && k.cp == 'c';
    if (!is_ctrl_c) {
        t->ctrl_c = 0;
        t->message[0] = 0;
    }
    t->dirty = true;
    switch (k.type) {
    case UI_KEY_ESC:
        t->board = false;
        break;
    case UI_KEY_NONE:
    case UI_KEY_OTHER:
        break;
    case UI_KEY_HANGUP:            /* the terminal is gone: stop and leave */
        g_interrupt = 1;
        t->quit = true;
        break;
    case UI_KEY_RESIZE:
        /* The next draw reads the new size. It repaints every cell: ncurses clears the screen
         * itself only when the size it reads differs from the last one, but a terminal that went
         * through other sizes in between (a resize storm, tmux coalescing them) has cropped or
         * shifted its cells, and ncurses would update only the cells it believes changed. */
        ui_curses_force_redraw();
        break;
    case UI_KEY_CHAR: insert_cp(t, k.cp); break;
    case UI_KEY_TAB:
        if (t->pasting)
            insert_cp(t, '\t');
        else if (t->env->step_mode && ui_input_empty(&t->in) && !t->running)
            step_once(t, -1);
        break;
    case UI_KEY_ENTER:
        if (t->pasting)
            insert_cp(t, '\n');
        else
            submit(t);
        break;
    case UI_KEY_BACKSPACE: ui_input_backspace(&t->in); break;
    case UI_KEY_DELETE: ui_input_delete(&t->in); break;
    case UI_KEY_LEFT: ui_input_left(&t->in); break;
    case UI_KEY_RIGHT: ui_input_right(&t->in); break;
    case UI_KEY_HOME: ui_input_home(&t->in); break;
    case UI_KEY_END: ui_input_end(&t->in); break;
    case UI_KEY_UP: {
        const char *h = history_prev(&t->hist, t->in.line ? t->in.line : "");
        if (h)
            ui_input_set(&t->in, h);
        break;
    }
    case UI_KEY_DOWN: {
        const char *h = history_next(&t->hist);
        if (h)
            ui_input_set(&t->in, h);
        break;
    }
    case UI_KEY_PAGE_UP:
        if (t->scroll.scroll == 0)
            t->scroll.anchor = t->tr.doc.n;   /* hold the view while text arrives */
        t->scroll.scroll += page_rows(t);
        break;
    case UI_KEY_PAGE_DOWN:
        t->scroll.scroll -= page_rows(t);
        if (t->scroll.scroll <= 0)
            scroll_to_end(t);
        break;
    case UI_KEY_PASTE_BEGIN: t->pasting = true; break;
    case UI_KEY_PASTE_END: t->pasting = false; break;
    case UI_KEY_CTRL:
        switch (k.cp) {
        case 'a': ui_input_home(&t->in); break;
        case 'e': ui_input_end(&t->in); break;
        case 'k': ui_input_kill_to_end(&t->in); break;
        case 'u': ui_input_kill_to_start(&t->in); break;
        case 'w': ui_input_kill_word(&t->in); break;
        case 'b': ui_input_left(&t->in); break;
        case 'f': ui_input_right(&t->in); break;
        case 'h': ui_input_backspace(&t->in); break;
        case 'c': on_ctrl_c(t); break;
        case 'd':
            if (t->running) {   /* a reply is not lost to a stray Ctrl-D */
                snprintf(t->message, sizeof t->message,
                         "Ctrl-D quits at an empty prompt after the reply; Ctrl-C stops it");
            } else if (ui_input_empty(&t->in)) {
                t->quit = true;
            } else {
                ui_input_delete(&t->in);
            }
            break;
        case 'l': ui_curses_force_redraw(); break;
        default: break;
        }
        break;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Drawing */

static const char *mode_name(const tui *t, char *buf, size_t cap)
{
    const session *s = t->s;
    const char *base = (s->set.sampler.greedy || s->set.sampler.temperature == 0) ? "greedy"
                                                                                   : "sample";
    if (s->draft && s->spec_on)
        snprintf(buf, cap, "speculative \xce\xb3=%d%s", s->gamma, s->gamma_adaptive ? " auto" : "");
    else if (t->env->step_mode)
        snprintf(buf, cap, "step, %s", base);
    else
        snprintf(buf, cap, "%s", base);
    return buf;
}

/* The transcript, the divider and the histogram. */
static void draw_panes(tui *t, const ui_layout *l)
{
    session *s = t->s;
    ui_transcript_pane_draw(&t->grid, l->transcript, attn_cmd_overlay(t->env, &t->tr), &t->scroll,
                            t->running);
    ui_layout_draw_divider(&t->grid, l);
    ui_rect hr = l->histogram;
    int ah = attn_cmd_pane_height(t->env, hr.h);
    if (ah > 0) {   /* the attention view's list below the histogram */
        hr.h -= ah;
        attn_cmd_draw(t->env, &t->grid, (ui_rect){hr.y + hr.h, hr.x, ah, hr.w}, s);
    }
    ui_hist_view hv = {
        .kind = t->env->hist.kind,
        .snap = &t->env->hist.snap,
        .tok = s->tok,
        .bars = t->env->bars,
        .step = t->env->hist.step,
        .position = t->env->hist.pos,
        .vocab = s->model->config.V,
        .step_mode = t->env->step_mode,
        .draft = t->env->hist.has_draft ? &t->env->hist.draft : NULL,
        .spec = t->env->hist.has_draft ? &t->env->hist.spec : NULL,
        .bonus = t->env->hist.bonus,
        .speculative = s->draft && s->spec_on,
        .temp_column = t->env->temp_column,
    };
    if (!lens_cmd_draw(t->env, &t->grid, hr) &&
        !dtype_cmd_draw(t->env, &t->grid, hr))
        ui_histogram_draw(&t->grid, hr, &hv);
}

/* The columns of /beam, /samples or /compare over the transcript and histogram. */
static void draw_board(tui *t, const ui_layout *l, int cols)
{
    ui_column board[2 * COMPARE_MAX_BEAMS + COMPARE_MAX_COLUMNS];
    const char *heading;
    int n = compare_board(compare_cmd_of(t->env), board, (int)(sizeof board / sizeof board[0]),
                          &heading);
    const compare_state *c = compare_cmd_of(t->env);
    if (!c->show) {
        ui_columns_draw(&t->grid, (ui_rect){0, 0, l->status.y, cols}, heading, board, n);
        return;
    }
    /* /samples show K: the columns where the transcript goes, column K's latest step in the
     * histogram pane */
    ui_columns_draw(&t->grid, l->transcript, heading, board, n);
    ui_layout_draw_divider(&t->grid, l);
    ui_hist_view hv = {.kind = UI_HIST_NONE, .tok = t->s->tok, .bars = t->env->bars,
                       .vocab = t->s->model->config.V, .temp_column = t->env->temp_column};
    if (compare_shown(c, &hv.snap, &hv.step, &hv.position, &hv.label))
        hv.kind = UI_HIST_STEP;
    if (c->kind == COMPARE_BEAM)   /* p: the beam's token scores; no draw */
        hv.draw_note = "beam search: best summed scores go on";
    ui_histogram_draw(&t->grid, l->histogram, &hv);
}

static void draw(tui *t)
{
    session *s = t->s;
    int rows, cols;
    ui_curses_size(&rows, &cols);
    if (rows != t->grid.rows || cols != t->grid.cols)
        ui_grid_resize(&t->grid, rows, cols);
    ui_grid_clear(&t->grid);
    transcript_doc_sync(&t->tr, s);
    if (t->answer_at_top) {
        t->scroll.open_top = true;
        t->scroll.top_at = t->tr.last_note_at;
        t->answer_at_top = false;
    }
    ui_layout l;
    ui_layout_compute(&l, rows, cols, ui_input_height(&t->in, rows / 3),
                      lens_cmd_height(t->env, ui_histogram_height(t->env->bars)));
    if (l.too_small) {
        ui_layout_draw_too_small(&t->grid);
        ui_curses_present(&t->grid);
        return;
    }
    if (t->board)
        draw_board(t, &l, cols);
    else
        draw_panes(t, &l);
    char chain[200], mode[64], precision[32], model_name[300];
    sampler_params_format(&s->set.sampler, chain, sizeof chain);
    double speedup_lo = 0, speedup_hi = 0;
    double speedup = t->turn_mixed ? 0 : session_plain_speedup(s, &speedup_lo, &speedup_hi);
    /* a GGUF file's quantization and bits a weight beside its name ("llama3.2:1b Q4_K_M 4.9 bpw": a
     * bare "4.9b" beside an Ollama name read as 4.9 billion parameters) */
    snprintf(model_name, sizeof model_name, "%s%s%s", s->model->name,
             s->model->quantization[0] ? " " : "", s->model->quantization);
    if (s->model->gguf) {
        size_t n = strlen(model_name);
        snprintf(model_name + n, sizeof model_name - n, " %.1f bpw",
                 gguf_bits_per_weight(s->model->gguf));
    }
    ui_status_view sv = {
        .model = model_name,
        /* --backend auto found no usable GPU: say so where the backend is named (/show: why) */
        .backend = t->env->backend_note && strcmp(s->eng->ops->name, "cpu") == 0
                       ? "cpu (no GPU)" : s->eng->ops->name,
        .precision = dtype_cmd_status(t->env, precision, sizeof precision),
        .sampler = chain,
        .mode = mode_name(t, mode, sizeof mode),
        .busy = t->running,
        .has_turn = t->have_turn,
        .tok_s = s->last.decode_tok_s,
        .ttft_ms = s->last.ttft_ms,
        .reused = s->last.reused_tokens,
        .prefilled = s->last.prefilled_tokens,
        /* an open step-mode generation has no decode speed yet */
        .generated = (s->gen && !t->running) ? 0 : s->last.generated_tokens,
        .kv_used = s->eng->n_past,
        .kv_total = s->eng->n_ctx,
        .kv_mib = (double)model_config_kv_bytes_per_token(&s->model->config, sizeof(float)) *
                  s->eng->n_ctx / 1048576.0,
        .seed = s->set.seed,
        .max_new = s->set.max_new_tokens,
        .message = t->message[0] ? t->message : NULL,
        .spec = s->last.speculative && !t->turn_mixed,
        .acceptance = s->last.drafted ? (double)s->last.accepted / s->last.drafted : 0,
        .tokens_per_pass = s->last.spec_rounds ? (double)s->last.spec_tokens / s->last.spec_rounds
                                               : 0,
        .speedup = speedup,
        .speedup_lo = speedup_lo,
        .speedup_hi = speedup_hi,
        .speedup_measuring = s->plain_probe && s->last.speculative && !t->turn_mixed &&
                             speedup == 0,
        .chat = session_chat_format(s) != CHAT_RAW ? chat_format_name(session_chat_format(s))
                                                   : NULL,
    };
    ui_status_draw(&t->grid, l.status, &sv);
    char armed[160];
    const char *pending = compare_pending_line(compare_cmd_of(t->env), armed, sizeof armed);
    char queued[200];
    if (t->queued)
        snprintf(queued, sizeof queued, "queued for after the reply: %.150s", t->queued);
    const char *placeholder = t->running && t->queued ? queued
                            : t->running ? "generating... Ctrl-C stops"
                            : t->board && compare_cmd_of(t->env)->running
                                ? "running: Ctrl-C stops it (what you type waits)"
                            : t->board ? "Enter closes the columns | /keep K makes K the reply"
                            : pending ? pending
                            : t->env->step_mode ? "Enter: next token | /pick N | /step off"
                            : cols < 64 ? "Send a message (/help)"
                            : "Send a message (/help for help, Enter alone continues)";
    ui_input_draw(&t->grid, l.input, &t->in, placeholder);
    ui_curses_present(&t->grid);
}

/* ---------------------------------------------------------------------------------------------
 * The loop */

static int tui_run(tui *t, const char *first)
{
    session *s = t->s;
    note(t, UI_STYLE_NOTICE, "tokentop: %s (%.1fM parameters, %s). Type a prompt and press "
         "Enter; Enter alone lets the model continue; /help lists the commands; Ctrl-D quits.",
         s->model->name, (double)s->model->n_params / 1e6, s->eng->description);
    if (s->draft)
        note(t, UI_STYLE_NOTICE, "Draft model %s loaded: speculative decoding is %s.",
             t->env->draft_dir ? t->env->draft_dir : "", s->spec_on ? "on (/spec off turns it "
             "off)" : "off; /spec on turns it on");
    if (first)
        start_turn(t, first);
    t->dirty = true;
    while (!t->quit && !g_quit_signal) {
        if (g_sigint) {
            g_sigint = 0;
            on_ctrl_c(t);
            t->dirty = true;
        }
        double now = tt_now_ms();
        if (t->dirty && (!t->running || (now - t->last_draw >= FRAME_MS && !t->hist_stale))) {
            draw(t);
            t->dirty = false;
            t->last_draw = now;
        }
        if (!t->running && !t->queued)   /* waiting for a person: the engine's loading goes on */
            cpu_engine_load_in_background(t->s->eng);
        ui_key k = ui_curses_read_key(t->running ? 0 : (t->dirty ? 10 : IDLE_WAIT_MS));
        while (k.type != UI_KEY_NONE && !t->quit) {
            handle_key(t, k);
            k = ui_curses_read_key(0);
        }
        if (t->running && !t->quit)
            run_step(t, -1);
        if (!t->running && t->queued && !t->quit) {
            char *line = t->queued;
            t->queued = NULL;
            if (t->s->gen) {   /* step mode: new text ends the open generation */
                session_gen_end(t->s, SESSION_STOP_INTERRUPTED, NULL, NULL);
                t->have_turn = true;
            }
            start_turn(t, line);
            free(line);
        }
    }
    free(t->queued);
    t->queued = NULL;
    if (t->running || s->gen)
        finish_generation(t, SESSION_STOP_INTERRUPTED, NULL);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Entry point */

static char *initial_prompt(const cli_options *o, int *rc)
{
    *rc = 0;
    if (o->prompt)
        return strdup(o->prompt);
    if (!o->prompt_file)
        return NULL;
    tt_error err = {0};
    size_t len = 0;
    char *text;
    if (util_read_file(o->prompt_file, 0, &text, &len, NULL, &err) != TT_OK) {
        fprintf(stderr, "tokentop: %s\n", err.msg);
        *rc = 1;
        return NULL;
    }
    /* One prompt: a trailing newline of the file is not part of it. */
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        text[--len] = 0;
    return text;
}

/* Token text is UTF-8 whatever the environment says; a C/POSIX locale would make ncursesw and
 * wcwidth treat it as bytes, so fall back to C.UTF-8 there. */
static void setup_locale(void)
{
    setlocale(LC_ALL, "");
    const char *cs = nl_langinfo(CODESET);
    if (!cs || (strcmp(cs, "UTF-8") != 0 && strcmp(cs, "utf8") != 0))
        if (!setlocale(LC_CTYPE, "C.UTF-8"))
            setlocale(LC_CTYPE, "en_US.UTF-8");
    setlocale(LC_NUMERIC, "C");   /* numbers in messages and files use a dot */
}

int repl_main(int argc, char **argv)
{
    setup_locale();
    cli_options o;
    cli_options_default(&o);
    int r = cli_parse(&o, "tokentop", argc, argv, 1);
    if (r)
        return r > 0 ? 0 : 2;
    int rc = 0;
    char *first = initial_prompt(&o, &rc);
    if (rc)
        return rc;
    cli_app app;
    if (cli_app_load(&app, &o, false) != TT_OK) {
        free(first);
        return 1;
    }
    cli_apply_generation_defaults(&o, app.model);
    session s;
    tt_error err = {0};
    if (session_init(&s, app.model, app.tok, app.eng, &o.set, &err) != TT_OK) {
        fprintf(stderr, "tokentop: %s\n", err.msg);
        cli_app_free(&app);
        free(first);
        return 1;
    }
    for (int i = 0; i < o.n_stops; i++)
        if (session_add_stop(&s, o.stops[i], &err) != TT_OK) {
            fprintf(stderr, "tokentop: %s\n", err.msg);
            rc = 2;
        }
    cmd_env env;
    cmd_env_init(&env, &s);
    cmd_env_add_module(&env, &compare_cmd_module);
    cmd_env_add_module(&env, &dtype_cmd_module);
    cmd_env_add_module(&env, &chat_cmd_module);
    cmd_env_add_module(&env, &model_cmd_module);
    cmd_env_add_module(&env, &lens_cmd_module);
    cmd_env_add_module(&env, &attn_cmd_module);
    env.backend_note = app.backend_note[0] ? app.backend_note : NULL;
    repl_host host;
    repl_host_init(&host, &app, &o, &s, &env);
    session_set_gamma(&s, o.gamma, o.gamma_adaptive, NULL);
    if (rc == 0 && o.draft_dir && repl_host_load_draft(&host, o.draft_dir, &err) != TT_OK) {
        fprintf(stderr, "tokentop: %s\n", err.msg);
        rc = 1;
    }
    if (rc == 0 && o.compare_set) {   /* --compare-dtype T: start as /dtype compare T would */
        char line[64];
        snprintf(line, sizeof line, "/dtype compare %s", tt_dtype_name(o.compare_dtype));
        if (cmd_execute(&env, line) & CMD_ERROR) {
            fprintf(stderr, "tokentop: --compare-dtype: %s\n", env.out);
            rc = 1;
        }
    }
    if (rc == 0 && o.attention && attn_cmd_set(&env, true, &err) != TT_OK) {   /* --attn */
        fprintf(stderr, "tokentop: --attn: %s\n", err.msg);
        rc = 1;
    }
    if (rc == 0 && o.draft_dir && o.spec_off)
        session_set_speculative(&s, false, NULL);
    /* The embedded target comes with its draft: loaded beside it (2.9 MB), off until /spec on. */
    const char *default_draft = o.draft_dir ? NULL : cli_default_draft_dir(&o);
    if (rc == 0 && default_draft && repl_host_load_draft(&host, default_draft, &err) == TT_OK)
        session_set_speculative(&s, false, NULL);
    install_signals();
    s.interrupt = &g_interrupt;
    s.device_fallback = cli_device_fallback;
    s.fallback_user = &app;
    cli_session_chat(&app, &s);

    const char *term = getenv("TERM");
    bool dumb = !term || !*term || strcmp(term, "dumb") == 0;
    bool tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    char why[200] = "";
    if (rc == 0 && tty && !dumb && ui_curses_start(why, sizeof why)) {
        tui t;
        memset(&t, 0, sizeof t);
        t.s = &s;
        t.env = &env;
        t.fallback_note = app.fallback_note;
        app.fallback_quiet = true;
        pace_set_rate(&env.pace, o.pace < 0 ? REPL_TERMINAL_PACE : o.pace);
        s.snapshots_on_demand = true;   /* the histogram shows some events only (on_event) */
        s.plain_probe = true;           /* the status bar's "x plain" (session_plain_speedup) */
        transcript_doc_init(&t.tr);
        ui_input_init(&t.in);
        char *hpath = history_default_path();
        history_init(&t.hist, hpath, HISTORY_MAX);
        free(hpath);
        if (history_load(&t.hist, &err) != TT_OK)
            snprintf(t.message, sizeof t.message, "history: %.140s", err.msg);
        ui_grid_init(&t.grid, 0, 0);
        rc = tui_run(&t, first);
        ui_curses_stop();
        ui_grid_free(&t.grid);
        history_free(&t.hist);
        ui_input_free(&t.in);
        transcript_doc_free(&t.tr);
    } else if (rc == 0) {
        if (tty && !dumb)
            fprintf(stderr, "tokentop: %s; using line mode\n", why);
        pace_set_rate(&env.pace, o.pace < 0 ? 0 : o.pace);
        s.lean = true;             /* line mode shows no histogram */
        rc = linemode_run(&s, &env, first, stdin, stdout, stderr, &g_interrupt, &g_quit_signal);
    }
    cmd_env_free(&env);
    session_free(&s);
    repl_host_free(&host);
    cli_app_free(&app);
    free(first);
    if (g_quit_signal) {
        /* Die of the signal now that the terminal is back, so the parent sees why. */
        signal(g_quit_signal, SIG_DFL);
        raise(g_quit_signal);
    }
    return rc;
}
