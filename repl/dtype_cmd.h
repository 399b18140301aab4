/* dtype_cmd.h: /dtype: switching the session's weight precision at run time, and the comparison
 * engine (/dtype compare T) that runs the same tokens at another precision beside it, for the
 * histogram's two-precision view. The front end supplies the engines (cmd_host's make_engine
 * and adopt_engine) and calls the dtype_cmd_track_* functions where the histogram's position
 * changes. */
#ifndef TOKENTOP_DTYPE_CMD_H
#define TOKENTOP_DTYPE_CMD_H

#include <stdbool.h>

#include "core/base/status.h"
#include "core/decode/dtype_compare.h"
#include "core/session/session.h"
#include "repl/commands.h"
#include "ui/grid.h"

/* What /dtype keeps in an environment (dtype_cmd_module's state). */
typedef struct dtype_cmd_state {
    engine *cmp;                   /* /dtype compare: the second engine, owned (freed by /dtype
                                      compare off and cmd_env_free); NULL when off */
    bool has_view;                 /* view describes the histogram's position */
    dtype_compare view;            /* the two precisions' distributions there */
} dtype_cmd_state;

/* The /dtype command, with its /show line and its cleanup; a front end that offers /dtype adds it
 * to its environment with cmd_env_add_module. */
extern const cmd_module dtype_cmd_module;

/* e's /dtype state; NULL when dtype_cmd_module is not added to e. */
dtype_cmd_state *dtype_cmd_of(const cmd_env *e);

/* The /dtype handler (dtype_cmd_module's row). */
int dtype_cmd_exec(cmd_env *e, const cmd_entry *c, int argc, char **argv);

/* /show's precision line. */
void dtype_cmd_show(cmd_env *e);

/* Frees the comparison engine (no-op when there is none); the histogram drops its comparison. */
void dtype_cmd_compare_off(cmd_env *e);

/* After an event of a generation (the token is already appended): compares the distribution it
 * was drawn from (ev->logits) on the comparison engine and sets the state's has_view and view.
 * Without a comparison engine, or for an event without logits (speculative rounds), only clears
 * has_view. On failure (the comparison engine's, e.g. out of memory) the comparison is
 * off: the engine is freed and err says why (TT_OK otherwise). */
tt_status dtype_cmd_track_step(cmd_env *e, const session_event *ev, tt_error *err);

/* After session_peek filled e->hist.snap for the end of the conversation: the same for that
 * position, from the session engine's logits. */
tt_status dtype_cmd_track_peek(cmd_env *e, tt_error *err);

/* Draws the two-precision view of the histogram's position into r when a comparison is on
 * and describes it (then returns true); false draws nothing (the sampler view goes there). */
bool dtype_cmd_draw(const cmd_env *e, ui_grid *g, ui_rect r);

/* What the status bar shows for the precision: "fp32", or "fp32 vs q8" while comparing. */
const char *dtype_cmd_status(const cmd_env *e, char *buf, size_t cap);

#endif
