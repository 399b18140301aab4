/* lens_cmd.h: /lens: the logit lens of the step on screen (core/session/session_lens.h) as a
 * table in the histogram's pane (ui/lens_pane.h), layer by layer, following the histogram to
 * each step it shows once no generation streams; in line mode, the table as text. The front end
 * calls lens_cmd_track where the histogram's position changes and lens_cmd_draw where it draws
 * the histogram. */
#ifndef TOKENTOP_LENS_CMD_H
#define TOKENTOP_LENS_CMD_H

#include <stdbool.h>

#include "core/base/status.h"
#include "repl/commands.h"
#include "ui/grid.h"

/* The /lens command, with its /show line and its cleanup; a front end that offers /lens adds it
 * to its environment with cmd_env_add_module. */
extern const cmd_module lens_cmd_module;

/* The /lens handler (lens_cmd_module's row). */
int lens_cmd_exec(cmd_env *e, const cmd_entry *c, int argc, char **argv);

/* After the histogram moved (a step, a peek, the end of a turn), when no generation streams:
 * while the view is on, computes the lens of the histogram's position (a forward of one token
 * or so, session_lens). On failure the view goes off and err says why (TT_OK otherwise). */
tt_status lens_cmd_track(cmd_env *e, tt_error *err);

/* Draws the lens table into r when the view is on and describes the histogram's position (then
 * returns true); false draws nothing (the histogram goes there). */
bool lens_cmd_draw(const cmd_env *e, ui_grid *g, ui_rect r);

/* The rows the histogram's pane wants: hist_rows, or the lens table's when the view is on and
 * needs more. */
int lens_cmd_height(const cmd_env *e, int hist_rows);

#endif
