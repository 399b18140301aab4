/* attn_cmd.h: /attn, the attention view: the transcript's tokens coloured by how much the step on
 * screen attended to each of them (the mean over layers and heads, or one layer, one head, one
 * head of one layer) and a pane listing the most attended earlier tokens with their weights. The
 * view keeps the last steps (core/session/attention_view.h copies), so /attn back moves it to
 * earlier ones. The module keeps that state itself (cmd_env_state); the front end registers
 * attn_cmd_module and calls attn_cmd_track_* where the histogram's step changes. */
#ifndef TOKENTOP_REPL_ATTN_CMD_H
#define TOKENTOP_REPL_ATTN_CMD_H

#include <stdbool.h>

#include "core/session/attention_view.h"
#include "repl/commands.h"
#include "repl/transcript_doc.h"
#include "ui/grid.h"
#include "ui/transcript_pane.h"

/* Steps kept for /attn back, at most (fewer when their rows pass ATTN_KEEP_BYTES together). */
#define ATTN_KEEP_STEPS 64
#define ATTN_KEEP_BYTES (64u << 20)
/* Earlier tokens the pane lists. */
#define ATTN_PANE_TOP 8

typedef struct attn_state {
    bool on;
    int layer, head;               /* -1: the mean over all */
    attention_view steps[ATTN_KEEP_STEPS];   /* oldest first */
    int n_steps;
    int back;                      /* the step shown: n_steps - 1 - back (0: the latest) */
    float *w;                      /* (cap_w) the shown step's weights under the selection */
    size_t cap_w;
    ui_doc overlay;                /* the transcript restyled by the weights (attn_cmd_overlay) */
} attn_state;

void attn_state_init(attn_state *a);
void attn_state_free(attn_state *a);   /* NULL is safe */

/* The /attn command; a front end that offers it adds it with cmd_env_add_module. */
extern const cmd_module attn_cmd_module;

/* Turns the view on or off (--attn starts it on): the session engine's capture with it. */
tt_status attn_cmd_set(cmd_env *e, bool on, tt_error *err);

/* True while the view is on and has a step to show. */
bool attn_cmd_showing(const cmd_env *e);

/* During the callback of ev (a token or rejected draft of a generation): keeps its step. */
void attn_cmd_track_step(cmd_env *e, const session_event *ev);

/* After session_peek filled the histogram for the end of the conversation: keeps that step. */
void attn_cmd_track_peek(cmd_env *e);

/* Rows the pane wants out of avail (0 when the view is off). */
int attn_cmd_pane_height(const cmd_env *e, int avail);

/* Draws the pane (title, then the most attended earlier tokens) into r. */
void attn_cmd_draw(cmd_env *e, ui_grid *g, ui_rect r, const session *s);

/* The transcript document restyled by the shown step's weights (the drawn token marked), or the
 * document itself when the view is off or has nothing to show. Valid until the next call. */
const ui_doc *attn_cmd_overlay(cmd_env *e, const transcript_doc *tr);

#endif
